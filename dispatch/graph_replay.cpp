// The CPU's replay list (dispatch/graph.hpp's Program): the plan built once at the end of a
// capture, and the loop that runs it. Nodes of the elementwise families whose operands
// have the output's shape and dtype run as raw kernels (dispatch/graph_raw.hpp) on fixed
// addresses: pinned inputs and outputs, and values in one arena planned by liveness; the
// rest run their thunks as before, reading raw values through views of the arena.
#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "dispatch/graph.hpp"

namespace tensor::dispatch::graph {
namespace {

// A write node's raw form: dst's n dense elements of E bytes take src's (same shape and dtype).
template <std::size_t E>
void raw_write(void* out, const void* a, const void*, std::size_t n, const RawScalar&) {
  if (out != a) std::memmove(out, a, n * E);
}
RawKernel raw_write_for(std::size_t esz) {
  switch (esz) {
    case 1: return &raw_write<1>;
    case 2: return &raw_write<2>;
    case 4: return &raw_write<4>;
    case 8: return &raw_write<8>;
    default: return nullptr;
  }
}

// TENSOR_GRAPH_RAW=0 keeps every node on its thunk (the A/B reference of the bench).
bool raw_enabled() {
  const char* e = std::getenv("TENSOR_GRAPH_RAW");
  return !(e && e[0] == '0');
}

template <Family F>
RawFn erased_entry(DeviceId d, OpCode op) {
  return reinterpret_cast<RawFn>(backend_of(d).get<F>(op));  // NOLINT: compared, never called
}

constexpr std::size_t kBlockAlign = 64;
std::size_t aligned(std::size_t b) { return (b + kBlockAlign - 1) / kBlockAlign * kBlockAlign; }

// First-fit blocks of one arena; freed blocks are reused by later values.
class ArenaPlan {
 public:
  std::size_t take(std::size_t bytes) {
    const std::size_t b = aligned(std::max<std::size_t>(bytes, 1));
    for (std::size_t i = 0; i < free_.size(); ++i) {
      if (free_[i].second < b) continue;
      const std::size_t off = free_[i].first;
      free_[i].first += b;
      free_[i].second -= b;
      if (free_[i].second == 0) free_.erase(free_.begin() + static_cast<std::ptrdiff_t>(i));
      return off;
    }
    const std::size_t off = top_;
    top_ += b;
    return off;
  }
  void give(std::size_t off, std::size_t bytes) { free_.emplace_back(off, aligned(std::max<std::size_t>(bytes, 1))); }
  std::size_t size() const { return top_; }

 private:
  std::vector<std::pair<std::size_t, std::size_t>> free_;
  std::size_t top_ = 0;
};

}  // namespace

void Program::plan_raw() {
  const std::size_t nn = nodes.size(), ns = slots.size();
  std::vector<RawStep> cand(nn);
  auto fixed_ptr = [&](std::uint32_t s) -> void* {  // a pinned input's or output's dense address
    const Slot& sl = slots[s];
    return sl.pinned.prim ? raw->data(*sl.pinned.prim) : nullptr;
  };
  alias_.assign(ns, kNoSlot);
  auto res = [&](std::uint32_t s) { return s != kNoSlot && alias_[s] != kNoSlot ? alias_[s] : s; };
  auto usable_in = [&](std::uint32_t s0, const Slot& want) {
    if (s0 == kNoSlot) return false;
    const std::uint32_t s = res(s0);  // a reshape's value is its source's elements
    const Slot& sl = slots[s];
    if (sl.dtype != want.dtype) return false;  // casts: thunk
    if (s != s0 ? sl.shape.num_elements() != want.shape.num_elements() : !(sl.shape == want.shape)) return false;  // broadcasting
    if (sl.kind == SlotKind::Input || sl.kind == SlotKind::Output) return fixed_ptr(s) != nullptr;
    return bcast_src_[s] != kNoSlot || !not_dense_[s];
  };

  // 0. Broadcasts of a pinned 1-element tensor by an expand (an optimizer's graph values):
  // raw readers take them as a tile of the value, if every reader of the expand runs raw.
  bcast_src_.assign(ns, kNoSlot);
  std::vector<std::size_t> bcast_node;
  for (std::size_t i = 0; i < nn; ++i) {
    const Node& n = nodes[i];
    if (n.op != OpCode::expand || n.write || !n.thunk || n.in.size() != 1 || n.out.size() != 1 || n.in[0] == kNoSlot) continue;
    const Slot& src = slots[n.in[0]];
    const Slot& o = slots[n.out[0]];
    if (src.kind != SlotKind::Input || src.shape.num_elements() != 1 || src.dtype != o.dtype || !fixed_ptr(n.in[0]) ||
        o.kind != SlotKind::Internal || o.shape.num_elements() == 0 || raw->kernel == nullptr)
      continue;
    bcast_src_[n.out[0]] = n.in[0];
    bcast_node.push_back(i);
  }

  // 1. Which nodes run raw (each decided from its own slots). A reshape of a value with a
  // dense address (pinned, raw, or a thunk's published one) renames it for raw readers.
  std::vector<std::size_t> alias_node;
  for (std::size_t i = 0; i < nn; ++i) {
    const Node& n = nodes[i];
    if (!n.thunk) continue;
    if (n.op == OpCode::reshape && !n.write && n.in.size() == 1 && n.out.size() == 1 && n.in[0] != kNoSlot) {
      const std::uint32_t src = res(n.in[0]);
      const Slot& o = slots[n.out[0]];
      const Slot& sl = slots[src];
      if (o.kind == SlotKind::Internal && bcast_src_[src] == kNoSlot && sl.dtype == o.dtype &&
          sl.shape.num_elements() == o.shape.num_elements() && usable_in(src, sl)) {
        alias_[n.out[0]] = src;
        alias_node.push_back(i);
      }
      continue;
    }
    if (n.write) {
      if (n.in.size() != 2 || n.in[0] == kNoSlot) continue;
      const Slot& dst = slots[n.in[0]];
      if (dst.kind != SlotKind::Input || !fixed_ptr(n.in[0]) || !usable_in(n.in[1], dst)) continue;
      const RawKernel w = raw_write_for(dtype_size(dst.dtype));
      if (!w) continue;
      cand[i] = {w, n.in[0], res(n.in[1]), res(n.in[1]), dst.shape.num_elements(), {}};
      raw_node_[i] = true;
      continue;
    }
    const OpInfo& info = op_info(n.op);
    std::size_t arity = 0;
    RawFn entry = nullptr;
    switch (info.family) {
      case Family::Unary: arity = 1; entry = erased_entry<Family::Unary>(device, n.op); break;
      case Family::Binary: arity = 2; entry = erased_entry<Family::Binary>(device, n.op); break;
      case Family::Scalar: arity = 1; entry = erased_entry<Family::Scalar>(device, n.op); break;
      default: continue;
    }
    if (info.swaps_last_two || info.bounds || n.out.size() != 1 || n.in.size() != arity) continue;
    const Slot& o = slots[n.out[0]];
    if (o.kind == SlotKind::Output && !fixed_ptr(n.out[0])) continue;
    if (!std::all_of(n.in.begin(), n.in.end(), [&](std::uint32_t s) { return usable_in(s, o); })) continue;
    RawScalar sc;
    const RawKernel fn = raw->kernel(n.op, entry, o.dtype, n.scalar, sc);
    if (!fn) continue;
    cand[i] = {fn, n.out[0], res(n.in[0]), res(n.in[arity - 1]), o.shape.num_elements(), sc};
    raw_node_[i] = true;
  }
  // A broadcast read by a thunk stays the expand's value: its raw readers go back to thunks
  // too (one value, one home); a renaming read by a thunk stays the reshape's value, read
  // raw at its published address. Else the expand or reshape runs nothing (raw, no kernel).
  auto reads = [&](std::size_t i, std::uint32_t b) {
    return std::find(nodes[i].in.begin(), nodes[i].in.end(), b) != nodes[i].in.end();
  };
  // Whether a node after e that is not raw reads b.
  auto thunk_reads_after = [&](std::size_t e, std::uint32_t b) {
    for (std::size_t i = e + 1; i < nn; ++i)
      if (!raw_node_[i] && reads(i, b)) return true;
    return false;
  };
  for (bool changed = true; changed;) {
    changed = false;
    for (std::size_t e : bcast_node) {
      const std::uint32_t b = nodes[e].out[0];
      if (bcast_src_[b] == kNoSlot || !thunk_reads_after(e, b)) continue;
      for (std::size_t i = e + 1; i < nn; ++i)
        if (raw_node_[i] && reads(i, b)) raw_node_[i] = false;
      bcast_src_[b] = kNoSlot;
      changed = true;
    }
    for (std::size_t e : alias_node) {
      const std::uint32_t b = nodes[e].out[0];
      if (alias_[b] == kNoSlot || !thunk_reads_after(e, b)) continue;
      alias_[b] = kNoSlot;  // the reshape keeps its thunk; raw readers read its published value
      changed = true;
    }
  }
  for (std::size_t i = 0; i < nn; ++i) {  // operands as renamed at the fixed point
    if (!raw_node_[i] || !cand[i].fn) continue;
    const Node& n = nodes[i];
    cand[i].a = res(n.write ? n.in[1] : n.in[0]);
    cand[i].b = res(n.in.back());
  }
  for (std::size_t e : bcast_node) {
    const std::uint32_t b = nodes[e].out[0];
    if (bcast_src_[b] == kNoSlot) continue;
    raw_node_[e] = true;
    cand[e] = {nullptr, b, nodes[e].in[0], nodes[e].in[0], slots[b].shape.num_elements(), {}};
  }
  for (std::size_t e : alias_node) {
    const std::uint32_t b = nodes[e].out[0];
    if (alias_[b] == kNoSlot) continue;
    raw_node_[e] = true;
    cand[e] = {nullptr, b, alias_[b], alias_[b], slots[b].shape.num_elements(), {}};
  }

  // 2. Slot roles: values raw nodes make (in the arena unless they are outputs), values
  // thunks make that raw nodes read (their address published at replay).
  std::vector<bool> in_arena(ns, false), bound(ns, false), read_by_thunk(ns, false);
  for (std::size_t i = 0; i < nn; ++i) {
    const Node& n = nodes[i];
    if (raw_node_[i]) {
      for (std::uint32_t s : n.out)
        if (slots[s].kind != SlotKind::Output && alias_[s] == kNoSlot) in_arena[s] = true;
      for (std::uint32_t s0 : n.in) {
        const std::uint32_t s = res(s0);
        const Slot& sl = slots[s];
        if (sl.kind != SlotKind::Input && sl.kind != SlotKind::Output && sl.producer >= 0 &&
            !raw_node_[static_cast<std::size_t>(sl.producer)] && bcast_src_[s] == kNoSlot)
          bound[s] = true;
      }
    } else {
      for (std::uint32_t s : n.in)
        if (s != kNoSlot) read_by_thunk[s] = true;
    }
  }

  // 3. How long each arena block must live: to its value's last reader, and further while a
  // thunk's result made from it (a view sharing its buffer) is alive.
  std::vector<std::int64_t> end(ns);
  for (std::size_t s = 0; s < ns; ++s) end[s] = std::max(slots[s].last_use, slots[s].producer);
  for (std::size_t i = nn; i-- > 0;) {
    const Node& n = nodes[i];
    if (raw_node_[i] && !n.out.empty() && alias_[n.out[0]] != kNoSlot) {  // a renaming: its readers read the source
      end[alias_[n.out[0]]] = std::max(end[alias_[n.out[0]]], end[n.out[0]]);
      continue;
    }
    if (raw_node_[i] || n.write) continue;
    std::int64_t m = static_cast<std::int64_t>(i);
    for (std::uint32_t o : n.out) m = std::max(m, end[o]);
    for (std::uint32_t s : n.in)
      if (s != kNoSlot) end[s] = std::max(end[s], m);
  }
  // 3b. The fused groups; their blocks live to each group's end.
  std::vector<bool> keep_stored(ns, false);
  for (std::size_t s = 0; s < ns; ++s) keep_stored[s] = read_by_thunk[s] || slots[s].kind != SlotKind::Internal;
  std::vector<bool> no_block(ns, false);
  plan_groups(cand, keep_stored, bound, end, no_block);

  // 4. Offsets by liveness; a raw node writes in place over an operand whose block dies there.
  ArenaPlan arena;
  std::vector<std::size_t> off(ns, 0);
  std::vector<bool> has_block(ns, false);
  std::vector<std::vector<std::uint32_t>> dies(nn);
  for (std::size_t i = 0; i < nn; ++i) {
    const Node& n = nodes[i];
    for (std::uint32_t o : n.out) {
      if ((!in_arena[o] && !bound[o]) || no_block[o]) continue;
      bool placed = false;
      if (raw_node_[i]) {
        for (std::uint32_t s : n.in) {
          if (!has_block[s] || !in_arena[s] || end[s] != static_cast<std::int64_t>(i) ||
              aligned(slots[s].bytes) != aligned(slots[o].bytes))
            continue;
          off[o] = off[s];
          has_block[s] = false;  // handed over: not freed at i
          placed = true;
          break;
        }
      }
      if (!placed) off[o] = arena.take(slots[o].bytes);
      has_block[o] = true;
      dies[static_cast<std::size_t>(std::max<std::int64_t>(end[o], static_cast<std::int64_t>(i)))].push_back(o);
    }
    for (std::uint32_t s : dies[i])
      if (has_block[s]) {
        arena.give(off[s], slots[s].bytes);
        has_block[s] = false;
      }
  }

  // 5. The one allocation, the addresses, the views thunks read.
  if (arena.size() > 0) arena_ = raw->arena(arena.size());
  auto* base = arena_ ? static_cast<unsigned char*>(raw->data(*arena_)) : nullptr;
  for (std::size_t s = 0; s < ns; ++s) {
    const Slot& sl = slots[s];
    if (sl.kind == SlotKind::Input || sl.kind == SlotKind::Output) {
      ptrs_[s] = fixed_ptr(static_cast<std::uint32_t>(s));
    } else if (no_block[s]) {
      continue;  // a tile buffer's value (graph_fuse.cpp)
    } else if (in_arena[s]) {
      ptrs_[s] = base + off[s];
      if (read_by_thunk[s]) fixed_[s] = DispatchTensor(raw->view(arena_, off[s], sl.shape, sl.dtype), sl.vkind);
    } else if (bound[s]) {
      stage_[s] = base + off[s];
    }
  }
  for (std::size_t i = 0; i < nn; ++i)
    if (raw_node_[i]) ++stats.raw_nodes;
  stats.arena_alloc_bytes = arena.size();
}

void Program::compile() {
  steps_.clear();
  ins_.clear();
  outs_.clear();
  opds_.clear();
  gops_.clear();
  groups_.clear();
  kept_.clear();
  const std::size_t ns = slots.size();
  raw_node_.assign(nodes.size(), false);
  ptrs_.assign(ns, nullptr);
  stage_.assign(ns, nullptr);
  fixed_.assign(ns, DispatchTensor());
  bcast_src_.assign(ns, kNoSlot);
  alias_.assign(ns, kNoSlot);
  not_dense_.resize(ns, false);
  arena_ = Prim();
  stats.raw_nodes = 0;
  stats.arena_alloc_bytes = 0;
  if (raw && raw_enabled()) plan_raw();
  for (std::size_t s = 0; s < ns; ++s) {
    const Slot& sl = slots[s];
    const bool raw_made = sl.producer >= 0 && raw_node_[static_cast<std::size_t>(sl.producer)];
    if (sl.kind == SlotKind::Input || (sl.kind == SlotKind::Output && raw_made)) fixed_[s] = sl.pinned;
  }
  std::vector<bool> read_raw(ns, false);
  std::uint32_t next_group = 0;
  for (std::size_t i = 0; i < nodes.size(); ++i)
    if (raw_node_[i])
      for (std::uint32_t s : nodes[i].in) {
        const std::uint32_t r = alias_[s] != kNoSlot ? alias_[s] : s;
        if (bcast_src_[r] == kNoSlot) read_raw[r] = true;
      }

  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const Node& n = nodes[i];
    const auto at = static_cast<std::int64_t>(i);
    if (raw_node_[i]) {
      if (next_group < groups_.size() && groups_[next_group].first == i) steps_.push_back({nullptr, next_group++, 0, 0, 0});
      continue;
    }
    Step st{n.thunk.get(), static_cast<std::uint32_t>(ins_.size()), static_cast<std::uint32_t>(n.in.size()),
            static_cast<std::uint32_t>(outs_.size()), static_cast<std::uint32_t>(n.out.size())};
    for (std::size_t k = 0; k < n.in.size(); ++k) {
      const std::uint32_t s = n.in[k];
      if (s == kNoSlot) {
        ins_.push_back({0, In::None});
        continue;
      }
      const Slot& sl = slots[s];
      if (fixed_[s].prim) {  // a pinned input, a raw node's output or arena value
        ins_.push_back({s, In::Fixed});
        continue;
      }
      // The last reader of an internal value takes it (the backend may then reuse its
      // buffer), unless the same value is also a later argument of this node.
      const bool last = sl.kind != SlotKind::Output && sl.last_use == at &&
                        std::find(n.in.begin() + static_cast<std::ptrdiff_t>(k) + 1, n.in.end(), s) == n.in.end();
      ins_.push_back({s, last ? In::Move : In::Copy});
    }
    for (const std::uint32_t s : n.out) {
      const Slot& sl = slots[s];
      const bool bind = read_raw[s] && sl.kind != SlotKind::Output;
      const bool later = sl.last_use > at || bind;  // raw readers hold no reference: keep it for them
      const Out how = sl.kind == SlotKind::Output ? (later ? Out::HomeKeep : Out::Home) : later ? Out::Keep : Out::Drop;
      if (how == Out::Keep || how == Out::HomeKeep) kept_.push_back(s);
      outs_.push_back({s, sl.vkind, how, bind});
    }
    steps_.push_back(st);
  }
  values_.resize(ns);
}

void Program::run_list(GraphProgram& g) {
  auto& p = static_cast<Program&>(g);
  const auto assign = backend_of(p.device).get<DeviceOp::assign>();
  std::vector<DispatchTensor>& v = p.values_;
  std::vector<DispatchTensor>& in = p.in_;
  std::vector<DispatchTensor>& out = p.out_;
  auto clear = [&] {
    for (std::uint32_t s : p.kept_) v[s] = DispatchTensor();
    in.clear();
    out.clear();
  };
  try {
    for (const Step& st : p.steps_) {
      if (!st.thunk) {
        p.run_group(p.groups_[st.in0]);
        continue;
      }
      in.clear();
      for (std::uint32_t k = 0; k < st.nin; ++k) {
        const InRef& r = p.ins_[st.in0 + k];
        switch (r.how) {
          case In::None: in.emplace_back(); break;
          case In::Fixed: in.push_back(p.fixed_[r.slot]); break;
          case In::Copy: in.push_back(v[r.slot]); break;
          case In::Move: in.push_back(std::move(v[r.slot])); break;
        }
      }
      out.clear();
      out.resize(st.nout);
      st.thunk->run(in, out);
      for (std::uint32_t j = 0; j < st.nout; ++j) {
        const OutRef& r = p.outs_[st.out0 + j];
        out[j].kind = r.kind;
        switch (r.how) {
          case Out::Drop: break;
          case Out::Keep: v[r.slot] = std::move(out[j]); break;
          case Out::Home: case Out::HomeKeep: {
            const DispatchTensor& pinned = p.slots[r.slot].pinned;
            DispatchTensor home = pinned;
            DispatchTensor val = std::move(out[j]);
            const Prim dst = home.take(), src = val.take();
            if (dst.get() != src.get()) assign(p.device, dst, src);
            if (r.how == Out::HomeKeep) v[r.slot] = pinned;
            break;
          }
        }
        if (r.bind) {  // raw readers follow: the value's dense address, or a dense copy of it
          const Primitive& val = *v[r.slot].prim;
          void* d = p.raw->data(val);
          if (!d) {  // correct now through a dense copy; its readers go back to thunks
            d = p.stage_[r.slot];
            p.raw->copy(d, val);
            p.not_dense_[r.slot] = true;
            p.replan_ = true;
          }
          p.ptrs_[r.slot] = d;
        }
      }
    }
  } catch (...) {
    clear();
    throw;
  }
  clear();
  if (p.replan_) {
    p.replan_ = false;
    p.compile();
  }
}

}  // namespace tensor::dispatch::graph

namespace tensor::dispatch {
void set_graph_raw(GraphProgram& g, const GraphRaw* raw) { static_cast<graph::Program&>(g).raw = raw; }
}  // namespace tensor::dispatch
