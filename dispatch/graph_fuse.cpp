// Fused runs of raw nodes in the CPU's replay list (dispatch/graph.hpp's Program, issue 28
// step 5). Consecutive raw nodes over one element count form a group that runs tile by
// tile: every node of the group on elements [i, i + tile) before the next tile, so the
// values the group makes and reads stay in L1/L2. A value that no node outside the group
// reads (no thunk, no later group, not an output) lives only in a tile buffer and is never
// stored; a 1-element input broadcast by an expand is a tile buffer filled with its value.
// Elementwise kernels read and write element i only, so a tiled run computes bit for bit
// what the nodes compute one after the other, as long as no two of the group's buffers
// overlap at different offsets (same-address aliasing, in place, is fine): the arena keeps
// every block a group touches to the group's end; pinned buffers overlapping a written one
// at another offset make the group untiled at capture; operands published at replay (a
// thunk's value) are checked each run, the group then running untiled on full buffers.
#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "dispatch/graph.hpp"

namespace tensor::dispatch::graph {
namespace {

constexpr std::size_t kSlotBytes = 16384;  // one tile buffer: 4,096 f32
constexpr std::uint32_t kMaxScratch = 12;  // tile buffers per group (more values stay stored)
constexpr std::size_t kMaxChunks = 8;      // parallel chunks per group (each its own tile buffers)
// Groups of at least this many elements run their chunks on both cores, as the binary
// kernels do from 1M elements (binary_hwy.cpp): the MLP's 200k-element Adam group was no
// faster on two (the helper then competes with oneDNN's threads in the next product).
constexpr std::size_t kParallelElems = std::size_t{1} << 20;

// n copies of one element (doubling copies: a tile costs a few memcpy calls).
void fill(unsigned char* dst, const void* one, std::size_t esz, std::size_t n) {
  if (n == 0) return;
  std::memcpy(dst, one, esz);
  const std::size_t total = n * esz;
  for (std::size_t have = esz; have < total;) {
    const std::size_t c = std::min(have, total - have);
    std::memcpy(dst + have, dst, c);
    have += c;
  }
}

// TENSOR_GRAPH_FUSE (read at capture): 0 runs every group untiled, node after node on full
// buffers (the A/B reference of the fused path); "run" plans tile buffers as usual but
// takes, at every run, the path of a failed overlap check (tests).
enum : std::uint8_t { kTiled = 0, kUntiled = 1, kUntiledAtRun = 2 };
std::uint8_t fuse_mode() {
  const char* e = std::getenv("TENSOR_GRAPH_FUSE");
  if (e && e[0] == '0') return kUntiled;
  if (e && std::strcmp(e, "run") == 0) return kUntiledAtRun;
  return kTiled;
}

}  // namespace

void Program::plan_groups(const std::vector<RawStep>& cand, const std::vector<bool>& keep_stored,
                          const std::vector<bool>& bound, std::vector<std::int64_t>& end, std::vector<bool>& no_block) {
  opds_.clear();
  gops_.clear();
  groups_.clear();
  const std::size_t nn = nodes.size();
  std::size_t scratch_bytes = 0;
  const std::uint8_t mode = fuse_mode();
  const bool fuse = mode != kUntiled;
  std::size_t i = 0;
  while (i < nn) {
    if (!raw_node_[i] || !cand[i].fn) {
      ++i;
      continue;
    }
    // The run: raw nodes with this element count, skipped expands between them allowed.
    const std::size_t n = cand[i].n;
    std::vector<std::size_t> members;
    std::size_t j = i;
    for (; j < nn && raw_node_[j]; ++j) {
      if (!cand[j].fn) continue;
      if (cand[j].n != n) break;
      members.push_back(j);
    }
    const auto last = static_cast<std::int64_t>(members.back());
    Group g{static_cast<std::uint32_t>(i), static_cast<std::uint32_t>(gops_.size()), static_cast<std::uint32_t>(members.size()),
            static_cast<std::uint32_t>(opds_.size()), 0, 0, n, 0, false, mode};
    std::vector<std::int64_t> last_read;  // per operand: the last op of the group reading it
    auto opd_of = [&](std::uint32_t s) -> std::uint32_t {
      for (std::uint32_t k = g.opd0; k < opds_.size(); ++k)
        if (opds_[k].slot == s) return k - g.opd0;
      opds_.push_back({s, static_cast<std::uint32_t>(dtype_size(slots[s].dtype)), bcast_src_[s], -1, false, bound[s]});
      last_read.push_back(-1);
      return static_cast<std::uint32_t>(opds_.size() - 1 - g.opd0);
    };
    std::size_t max_esz = 1;
    for (std::size_t m = 0; m < members.size(); ++m) {
      const RawStep& r = cand[members[m]];
      const std::uint32_t a = opd_of(r.a), b = opd_of(r.b), o = opd_of(r.out);
      last_read[a] = last_read[b] = static_cast<std::int64_t>(m);
      opds_[g.opd0 + o].written = true;
      gops_.push_back({r.fn, o, a, b, r.s});
    }
    g.nopd = static_cast<std::uint32_t>(opds_.size() - g.opd0);
    // Pinned buffers (inputs made before the capture: views of one storage) that overlap a
    // written one at another offset: this group runs untiled, node after node.
    auto pinned_at = [&](std::uint32_t s) -> const unsigned char* {
      const Slot& sl = slots[s];
      if ((sl.kind != SlotKind::Input && sl.kind != SlotKind::Output) || !sl.pinned.prim) return nullptr;
      return static_cast<const unsigned char*>(raw->data(*sl.pinned.prim));
    };
    bool overlap = false;
    for (std::uint32_t w = g.opd0; w < opds_.size() && !overlap; ++w) {
      const unsigned char* pw = opds_[w].written ? pinned_at(opds_[w].slot) : nullptr;
      if (!pw) continue;
      for (std::uint32_t k = g.opd0; k < opds_.size(); ++k) {
        const unsigned char* pk = pinned_at(opds_[k].slot);
        if (pk && pk != pw && pk < pw + n * opds_[w].esz && pw < pk + n * opds_[k].esz) overlap = true;
      }
    }
    const bool tile = fuse && !overlap;
    if (overlap) g.untiled = kUntiled;
    for (std::uint32_t k = 0; k < g.nopd; ++k) {
      const Opd& d = opds_[g.opd0 + k];
      max_esz = std::max<std::size_t>(max_esz, d.esz);
      if (d.bound) g.check = true;
      // Every block the group touches lives to its end (no reuse at another offset inside it).
      end[d.slot] = std::max(end[d.slot], last);
    }
    g.tile = kSlotBytes / max_esz;
    // Tile buffers: broadcasts for the whole group; values made and consumed inside it by
    // liveness (an op may write into the buffer of an operand it reads last).
    std::vector<std::uint32_t> free_bufs;
    auto take = [&]() -> std::int32_t {
      if (!free_bufs.empty()) {
        const std::uint32_t b = free_bufs.back();
        free_bufs.pop_back();
        return static_cast<std::int32_t>(b);
      }
      if (g.nscratch >= kMaxScratch) return -1;
      return static_cast<std::int32_t>(g.nscratch++);
    };
    for (std::uint32_t k = 0; k < g.nopd; ++k) {
      Opd& d = opds_[g.opd0 + k];
      if (d.src != kNoSlot && tile) d.scratch = take();
    }
    for (std::size_t m = 0; m < members.size() && tile; ++m) {
      const GOp& op = gops_[g.op0 + m];
      for (const std::uint32_t in : {op.a, op.b}) {
        Opd& d = opds_[g.opd0 + in];
        if (last_read[in] == static_cast<std::int64_t>(m) && d.scratch >= 0 && d.src == kNoSlot) {
          free_bufs.push_back(static_cast<std::uint32_t>(d.scratch));
          last_read[in] = -2;  // freed once
        }
      }
      Opd& o = opds_[g.opd0 + op.o];
      const Slot& sl = slots[o.slot];
      const bool dead_here = sl.producer == static_cast<std::int64_t>(members[m]) && sl.kind == SlotKind::Internal &&
                             !keep_stored[o.slot] && end[o.slot] <= last && o.src == kNoSlot;
      if (dead_here) {
        o.scratch = take();
        if (o.scratch >= 0 && last_read[op.o] < static_cast<std::int64_t>(m))  // never read: free after this op
          free_bufs.push_back(static_cast<std::uint32_t>(o.scratch));
      }
    }
    for (std::uint32_t k = 0; k < g.nopd; ++k)
      if (opds_[g.opd0 + k].scratch >= 0) no_block[opds_[g.opd0 + k].slot] = true;
    const std::size_t chunks = std::min<std::size_t>(kMaxChunks, (n + g.tile - 1) / g.tile);
    scratch_bytes = std::max(scratch_bytes, chunks * g.nscratch * kSlotBytes);
    groups_.push_back(g);
    i = j;
  }
  scratch_.assign(scratch_bytes + 64, 0);
}

void Program::run_group(const Group& g) {
  void* const* ptr = ptrs_.data();
  const Opd* opd = opds_.data() + g.opd0;
  const GOp* ops = gops_.data() + g.op0;
  bool tiled = g.untiled == kTiled;
  if (g.check && tiled) {  // a thunk's value read here: a view overlapping a written buffer at another offset?
    for (std::uint32_t k = 0; k < g.nopd && tiled; ++k) {
      if (!opd[k].bound) continue;
      const auto* b0 = static_cast<const unsigned char*>(ptr[opd[k].slot]);
      const unsigned char* b1 = b0 + g.n * opd[k].esz;
      for (std::uint32_t w = 0; w < g.nopd; ++w) {
        if (!opd[w].written || opd[w].scratch >= 0) continue;
        const auto* w0 = static_cast<const unsigned char*>(ptr[opd[w].slot]);
        const unsigned char* w1 = w0 + g.n * opd[w].esz;
        if (w0 != b0 && w0 < b1 && b0 < w1) tiled = false;
      }
    }
  }
  if (!tiled) {
    // Untiled, node after node on full buffers; the values of tile buffers get full ones
    // for this run (an allocation, on this rare path only).
    std::vector<std::size_t> at;
    std::vector<std::uint64_t> full;
    if (g.nscratch > 0) {
      at.assign(g.nopd, 0);
      std::size_t bytes = 0;
      for (std::uint32_t k = 0; k < g.nopd; ++k)
        if (opd[k].scratch >= 0) {
          at[k] = bytes;
          bytes += (g.n * opd[k].esz + 63) / 64 * 64;
        }
      full.resize(bytes / 8 + 1);
    }
    auto addr = [&](std::uint32_t k) -> void* {
      return opd[k].scratch >= 0 ? reinterpret_cast<unsigned char*>(full.data()) + at[k] : ptr[opd[k].slot];
    };
    for (std::uint32_t k = 0; k < g.nopd; ++k)
      if (opd[k].src != kNoSlot) fill(static_cast<unsigned char*>(addr(k)), ptr[opd[k].src], opd[k].esz, g.n);
    for (std::uint32_t m = 0; m < g.nops; ++m) {
      const GOp& op = ops[m];
      op.fn(addr(op.o), addr(op.a), addr(op.b), g.n, op.s);
    }
    return;
  }
  const std::size_t tiles = (g.n + g.tile - 1) / g.tile;
  const std::size_t chunks = g.n >= kParallelElems && raw->parallel ? std::min(kMaxChunks, tiles) : 1;
  const std::size_t per_chunk = (tiles + chunks - 1) / chunks;
  auto* base = reinterpret_cast<unsigned char*>((reinterpret_cast<std::uintptr_t>(scratch_.data()) + 63) / 64 * 64);
  struct Ctx {
    Program* p;
    const Group* g;
    const Opd* opd;
    const GOp* ops;
    unsigned char* base;
    std::size_t per_chunk;
  } ctx{this, &g, opd, ops, base, per_chunk};
  auto body = [](void* c, std::size_t chunk) {
    const Ctx& x = *static_cast<const Ctx*>(c);
    const Group& gr = *x.g;
    void* const* pt = x.p->ptrs_.data();
    unsigned char* scr = x.base + chunk * gr.nscratch * kSlotBytes;
    const std::size_t t0 = chunk * x.per_chunk * gr.tile;
    const std::size_t t1 = std::min(gr.n, t0 + x.per_chunk * gr.tile);
    if (t0 >= t1) return;
    for (std::uint32_t k = 0; k < gr.nopd; ++k) {  // broadcasts: one tile of the value (or the chunk's block)
      const Opd& d = x.opd[k];
      if (d.src == kNoSlot) continue;
      if (d.scratch >= 0) fill(scr + static_cast<std::size_t>(d.scratch) * kSlotBytes, pt[d.src], d.esz, std::min(gr.tile, t1 - t0));
      else fill(static_cast<unsigned char*>(pt[d.slot]) + t0 * d.esz, pt[d.src], d.esz, t1 - t0);
    }
    auto at = [&](std::uint32_t k, std::size_t i) -> void* {
      const Opd& d = x.opd[k];
      if (d.scratch >= 0) return scr + static_cast<std::size_t>(d.scratch) * kSlotBytes;
      return static_cast<unsigned char*>(pt[d.slot]) + i * d.esz;
    };
    for (std::size_t i = t0; i < t1; i += gr.tile) {
      const std::size_t len = std::min(gr.tile, t1 - i);
      for (std::uint32_t m = 0; m < gr.nops; ++m) {
        const GOp& op = x.ops[m];
        op.fn(at(op.o, i), at(op.a, i), at(op.b, i), len, op.s);
      }
    }
  };
  if (chunks > 1) raw->parallel(chunks, body, &ctx);
  else body(&ctx, 0);
}

}  // namespace tensor::dispatch::graph
