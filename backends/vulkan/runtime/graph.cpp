// Graph capture and native replay on the command stream (issue 28, step 4): the capture
// run's dispatches, copies and uploads noted in a GraphRecording; one command buffer
// recorded from it (descriptor sets bound to the recorded buffers, the parameter words,
// the eager path's hazard barriers); one submission per replay.

// Vulkan structs are initialised as `VkFoo info{VK_STRUCTURE_TYPE_FOO}` with the
// remaining members zeroed by the language; that is the intended idiom here.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#include "backends/vulkan/runtime/graph_fusion.hpp"
#include "backends/vulkan/runtime/internal.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

#include "backends/vulkan/shaders/vk_codes.h"
#include "tensor/error.hpp"

namespace tensor::vulkan {

bool Context::recording_here_locked() const {
  return stream_.rec && stream_.rec->thread == std::this_thread::get_id();
}

namespace {
// The ops elementwise.comp's PROGRAM variant runs (f32 in, f32 out): the plain copy, the
// binary float ops and fused binary forms without a third operand or int exponent, the
// unary float ops, and the fused unary forms that read no scalar parameter.
bool fusable_op(std::uint32_t op) {
  return op == EW_COPY || (op >= EW_ADD && op <= EW_ATAN2) || op == EW_FMOD || (op >= EW_PRELU && op <= EW_HYPOT) ||
         (op >= EW_RECIP && op <= EW_ABS) || op == EW_NEG || (op >= EW_SQUARE && op <= EW_LOG_SIGMOID);
}
}  // namespace

void Context::note_dispatch_locked(ShaderFamily family, const std::vector<std::uint32_t>& spec, bool wide, VkPipeline pipe,
                                   const std::vector<std::uint32_t>& params, const std::vector<Binding>& bindings,
                                   const VkDeviceSize* off, const VkDeviceSize* len, std::uint32_t gx, std::uint32_t gy,
                                   std::uint32_t gz, const std::string* check) {
  GraphRecording& r = *stream_.rec;
  GraphCmd c;
  c.pipe = pipe;
  // elementwise.comp's constants: op, dta, dtb, dto, bscalar, contig, local (ops/elementwise.cpp).
  if (family == ShaderFamily::Elementwise && !wide && !check && spec.size() == 7 && fusable_op(spec[0]) &&
      spec[1] == DT_F32 && spec[3] == DT_F32 && spec[5] >= 1 && params.size() > P_S0 && bindings.size() == 4) {
    const bool binary = spec[0] >= EW_ADD && spec[0] < EW_RECIP;
    const bool scalar = binary && spec[4] != 0;
    const std::uint32_t single = spec[5] >= 2 ? (spec[5] - 2) & 3u : 0u;
    if (!binary || scalar || spec[2] == DT_F32) {
      c.ew_op = static_cast<std::int32_t>(spec[0]);
      c.ew_scalar = scalar;
      c.ew_single = binary && !scalar ? single : single & 1u;
    }
  }
  c.params = params;
  c.gx = gx;
  c.gy = gy;
  c.gz = gz;
  for (std::size_t i = 0; i < bindings.size() && i < kBindings - 1; ++i) {
    const Binding& bd = bindings[i];
    GraphCmd::Use u;
    if (bd.buffer) {
      bd.buffer->add_ref();
      u.buf = BufRef::adopt(const_cast<Buffer*>(bd.buffer));
      u.off = off[i];
      u.len = len[i];
      u.write = bd.write;
    }
    c.uses.push_back(std::move(u));
  }
  if (check) {
    c.check = static_cast<std::int32_t>(r.checks.size());
    r.checks.push_back(*check);
  }
  r.cmds.push_back(std::move(c));
}

void Context::note_copy_locked(BufRef src, VkDeviceSize src_off, BufRef dst, VkDeviceSize dst_off, VkDeviceSize bytes) {
  GraphCmd c;
  c.bytes = bytes;
  c.uses.push_back({std::move(src), src_off, bytes, false});
  c.uses.push_back({std::move(dst), dst_off, bytes, true});
  stream_.rec->cmds.push_back(std::move(c));
}

void Context::graph_record_begin() {
  ensure_init();
  std::lock_guard<std::mutex> lock(stream_.mu);
  if (lost()) throw_lost_locked();
  stream_.rec = std::make_unique<GraphRecording>();
  stream_.rec->thread = std::this_thread::get_id();
  stream_.recording.store(true, std::memory_order_release);
}

std::unique_ptr<GraphRecording> Context::graph_record_end() {
  std::lock_guard<std::mutex> lock(stream_.mu);
  if (!recording_here_locked()) return nullptr;
  stream_.recording.store(false, std::memory_order_release);
  return std::move(stream_.rec);
}

namespace {
struct Region {
  VkBuffer buf;
  VkDeviceSize off, size;
};
bool overlaps(const Region& r, VkBuffer buf, VkDeviceSize off, VkDeviceSize size) {
  return r.buf == buf && r.off < off + size && off < r.off + r.size;
}
}  // namespace

namespace {

// Elementwise fusion (runtime/graph_fusion.hpp).
static_assert(kFusionSlots == kBindings - 1);

struct EwRange {
  VkBuffer buf = VK_NULL_HANDLE;
  VkDeviceSize off = 0, size = 0;  // bytes, buffer-absolute
};
// A fusable dispatch's element count and its output, a and b ranges (b absent: buf null).
struct EwUses {
  std::uint32_t n = 0;
  EwRange r[3];  // out, a, b
};
EwUses ew_uses(const GraphCmd& c) {
  EwUses u;
  u.n = c.params[P_N];
  const VkDeviceSize whole = static_cast<VkDeviceSize>(u.n) * 4;
  // bindings: a, b, c, out; params operand k: out, a, b, c (ops/elementwise.cpp launch_ew)
  const int use_of[3] = {3, 0, 1};
  for (int k = 0; k < 3; ++k) {
    if (k == 2 && (c.ew_op < static_cast<std::int32_t>(EW_ADD) || c.ew_op >= static_cast<std::int32_t>(EW_RECIP) || c.ew_scalar))
      continue;
    const GraphCmd::Use& x = c.uses[use_of[k]];
    if (!x.buf) continue;
    const bool one = k > 0 && (c.ew_single >> (k - 1) & 1u) != 0;
    u.r[k] = {x.buf->vk(), x.off + static_cast<VkDeviceSize>(c.params[P_OPND + 9 * k]) * 4, one ? 4 : whole};
  }
  return u;
}
bool ranges_overlap(const EwRange& a, const EwRange& b) {
  return a.buf == b.buf && a.off < b.off + b.size && b.off < a.off + a.size;
}
bool same_range(const EwRange& a, const EwRange& b) { return a.buf == b.buf && a.off == b.off && a.size == b.size; }

}  // namespace

std::vector<FusedRun> plan_fusion(const std::vector<GraphCmd>& cmds, VkDeviceSize align, VkDeviceSize max_range,
                                  std::uint32_t max_elements) {
  std::vector<FusedRun> runs;
  for (std::size_t i = 0; i < cmds.size();) {
    FusedRun run;
    run.begin = run.end = i;
    std::vector<EwRange> reads, writes;
    std::vector<EwUses> uses;
    for (std::size_t j = i; j < cmds.size() && j - i < kMaxFused && cmds[j].ew_op >= 0; ++j) {
      const EwUses u = ew_uses(cmds[j]);
      if (!u.r[0].buf || !u.r[1].buf || u.n > max_elements || (j > i && u.n != run.n)) break;
      bool ok = true;
      for (const EwRange& x : u.r)
        ok = ok && (!x.buf || x.off % 4 == 0);
      for (const EwRange& x : writes)  // the reads (and the write) against what the run wrote
        for (const EwRange& y : u.r)
          ok = ok && (!y.buf || !ranges_overlap(x, y) || same_range(x, y));
      for (const EwRange& x : reads)  // the write against what the run read
        ok = ok && (!ranges_overlap(x, u.r[0]) || same_range(x, u.r[0]));
      FusedRun next = run;  // the op table and the slots with this dispatch's buffers
      if (std::find(next.ops.begin(), next.ops.end(), static_cast<std::uint32_t>(cmds[j].ew_op)) == next.ops.end()) {
        if (next.ops.size() == kFusionOps) break;
        next.ops.push_back(static_cast<std::uint32_t>(cmds[j].ew_op));
      }
      for (int k = 0; k < 3 && ok; ++k) {
        const EwRange& x = u.r[k];
        if (!x.buf) continue;
        std::uint32_t s = 0;
        while (s < next.slots && next.buf[s] != x.buf) ++s;
        if (s == next.slots) {
          if (s == kFusionSlots) { ok = false; break; }
          next.buf[s] = x.buf;
          next.lo[s] = x.off;
          next.hi[s] = x.off + x.size;
          ++next.slots;
        }
        next.lo[s] = std::min(next.lo[s], x.off);
        next.hi[s] = std::max(next.hi[s], x.off + x.size);
        next.wrote[s] = next.wrote[s] || k == 0;
        ok = next.hi[s] - next.lo[s] / align * align <= max_range;
      }
      if (!ok) break;
      run = next;
      run.n = u.n;
      run.end = j + 1;
      for (int k = 1; k < 3; ++k)
        if (u.r[k].buf) reads.push_back(u.r[k]);
      writes.push_back(u.r[0]);
      uses.push_back(u);
    }
    if (run.end - run.begin < 2) {
      ++i;
      continue;
    }
    // The program: n, the count, then per dispatch op, flags, and (slot, element offset)
    // of out, a and b (or b's scalar bits).
    auto place = [&](const EwRange& x, std::uint32_t& slot, std::uint32_t& at) {
      slot = 0;
      while (run.buf[slot] != x.buf) ++slot;
      at = static_cast<std::uint32_t>((x.off - run.lo[slot] / align * align) / 4);
    };
    run.words = {run.n, static_cast<std::uint32_t>(run.end - run.begin)};
    for (std::size_t j = run.begin; j < run.end; ++j) {
      const GraphCmd& c = cmds[j];
      const EwUses& u = uses[j - run.begin];
      const auto op = static_cast<std::uint32_t>(c.ew_op);
      const bool binary = op >= EW_ADD && op < EW_RECIP;
      const auto index = static_cast<std::uint32_t>(std::find(run.ops.begin(), run.ops.end(), op) - run.ops.begin());
      std::uint32_t w[kProgWords] = {index, (c.ew_scalar ? 1u : 0u) | c.ew_single << 1 | (binary ? 8u : 0u), 0, 0, 0, 0, 0, 0};
      place(u.r[0], w[2], w[3]);
      place(u.r[1], w[4], w[5]);
      if (c.ew_scalar) w[7] = c.params[P_S0];
      else if (u.r[2].buf) place(u.r[2], w[6], w[7]);
      run.words.insert(run.words.end(), w, w + kProgWords);
    }
    i = run.end;
    runs.push_back(std::move(run));
  }
  return runs;
}


std::unique_ptr<Batch> Context::graph_build(GraphRecording& rec) {
  std::vector<FusedRun> runs;
  std::uint32_t fuse_max = graph_fusion_max();
  if (const char* e = std::getenv("TENSOR_VK_GRAPH_FUSION_MAX")) {  // read per build: tuning, the bench's reference
    const std::string v = e;
    if (v.empty() || v.size() > 9 || v.find_first_not_of("0123456789") != std::string::npos)
      throw ExecutionError(fmt::format("[graph_stop_capture] TENSOR_VK_GRAPH_FUSION_MAX: expected a number of elements "
                                       "(at most 9 digits; 0 turns fusion off); got '{}'",
                                       v));
    fuse_max = static_cast<std::uint32_t>(std::stoul(v));
  }
  if (fuse_max > 0) runs = plan_fusion(rec.cmds, mem_.align, dev_.props.limits.maxStorageBufferRange, fuse_max);
  std::size_t ndisp = 0;
  for (const GraphCmd& c : rec.cmds) ndisp += c.pipe ? 1 : 0;
  VkDeviceSize prog_bytes = 0;  // the programs, after the parameter slots
  for (FusedRun& r : runs) {
    r.prog_off = prog_bytes;
    prog_bytes += (r.words.size() * 4 + kParamSlotBytes - 1) / kParamSlotBytes * kParamSlotBytes;
  }
  auto b = std::make_unique<Batch>();
  stream_.live_batches.fetch_add(1, std::memory_order_relaxed);
  struct Guard {  // frees what was made when a step below throws
    Context* c;
    std::unique_ptr<Batch>* b;
    ~Guard() {
      if (*b) c->destroy_batch(**b);
    }
  } guard{this, &b};
  const auto sets = static_cast<std::uint32_t>(std::max<std::size_t>(ndisp, 1));
  create_batch_objects(*b, 0, sets);
  b->params = mem_.host_pool.allocate(sets * kParamSlotBytes + prog_bytes);
  b->errors = mem_.host_pool.allocate(std::max<std::size_t>(rec.checks.size(), 1) * 8);
  std::memset(b->errors->mapped(), 0, b->errors->size());
  b->checks = rec.checks;

  VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};  // reusable: no ONE_TIME_SUBMIT
  check_vk(vkBeginCommandBuffer(b->cmd, &bi), "vkBeginCommandBuffer");
  std::vector<Region> written, read;
  auto barrier = [&] {  // the eager path's barrier_locked
    VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
    mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT | VK_ACCESS_HOST_WRITE_BIT;
    mb.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT |
                       VK_ACCESS_TRANSFER_WRITE_BIT;
    vkCmdPipelineBarrier(b->cmd,
                         VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT | VK_PIPELINE_STAGE_HOST_BIT,
                         VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &mb, 0, nullptr, 0,
                         nullptr);
    written.clear();
    read.clear();
  };
  barrier();  // after everything submitted before (the input refreshes)
  VkPipeline bound = VK_NULL_HANDLE;
  std::uint32_t slot = 0;
  // The command's buffers, held for the graph's life, and the step that carries index errors.
  auto keep_step = [&](GraphCmd& c) {
    Batch::Step step{static_cast<std::uint32_t>(b->keep.size()), 0, 0, c.check};
    for (GraphCmd::Use& u : c.uses) {
      if (!u.buf) continue;
      if (u.write) step.writes |= 1u << step.count;
      ++step.count;
      b->keep.push_back(std::move(u.buf));
    }
    b->steps.push_back(step);
  };
  // The eager path's hazard test (RAW, WAW, WAR since the last barrier) for a dispatch
  // touching `regions` (with whether each is written); records them.
  auto hazard_barrier = [&](const std::vector<std::pair<Region, bool>>& regions) {
    bool need = false;
    for (const auto& [x, w] : regions) {
      for (const Region& r : written) need = need || overlaps(r, x.buf, x.off, x.size);
      if (w)
        for (const Region& r : read) need = need || overlaps(r, x.buf, x.off, x.size);
    }
    if (need) barrier();
    for (const auto& [x, w] : regions) (w ? written : read).push_back(x);
  };
  auto bind = [&](VkPipeline pipe) {
    if (pipe != bound) vkCmdBindPipeline(b->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pipe);
    bound = pipe;
  };
  std::uint32_t fused_cmds = 0;
  std::size_t next_run = 0;
  for (std::size_t ci = 0; ci < rec.cmds.size(); ++ci) {
    if (next_run < runs.size() && runs[next_run].begin == ci) {  // a fused run: one dispatch
      const FusedRun& run = runs[next_run++];
      const VkDeviceSize poff = static_cast<VkDeviceSize>(sets) * kParamSlotBytes + run.prog_off;
      std::memcpy(b->params->mapped() + poff, run.words.data(), run.words.size() * 4);
      VkDescriptorSet set = allocate_set(dev_.device, b->descriptors, pipes_.set_layout);
      VkDescriptorBufferInfo infos[kBindings];
      infos[0] = {b->params->vk(), b->params->offset() + poff, run.words.size() * 4};
      std::vector<std::pair<Region, bool>> regions;
      for (std::uint32_t k = 0; k < kBindings - 1; ++k) {
        if (k >= run.slots) {
          infos[k + 1] = infos[0];
          continue;
        }
        const VkDeviceSize lo = run.lo[k] / mem_.align * mem_.align;
        infos[k + 1] = {run.buf[k], lo, (run.hi[k] - lo + 3) / 4 * 4};
        regions.push_back({{run.buf[k], lo, run.hi[k] - lo}, run.wrote[k]});
      }
      write_storage_bindings(dev_.device, set, infos);
      hazard_barrier(regions);
      const std::uint32_t local = run.n <= 8 ? 8u : 256u;
      std::vector<std::uint32_t> spec = {0, DT_F32, DT_F32, DT_F32, 0, 1, local};  // + OPK0..OPK7, NSLOTS
      for (std::uint32_t k = 0; k < kFusionOps; ++k) spec.push_back(k < run.ops.size() ? run.ops[k] : ~0u);
      spec.push_back(run.slots);
      bind(pipeline(ShaderFamily::ElementwiseProgram, spec, false));
      vkCmdBindDescriptorSets(b->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pipes_.layout, 0, 1, &set, 0, nullptr);
      const std::size_t groups = (static_cast<std::size_t>(run.n) + local - 1) / local;
      const auto gx = static_cast<std::uint32_t>(std::min<std::size_t>(groups, 65535));
      vkCmdDispatch(b->cmd, gx, static_cast<std::uint32_t>((groups + gx - 1) / gx), 1);
      ++b->dispatches;
      fused_cmds += static_cast<std::uint32_t>(run.end - run.begin);
      for (std::size_t j = run.begin; j < run.end; ++j) keep_step(rec.cmds[j]);  // a step per dispatch
      ci = run.end - 1;
      continue;
    }
    GraphCmd& c = rec.cmds[ci];
    if (!c.pipe) {  // a copy: the eager path puts a barrier before each
      barrier();
      const GraphCmd::Use& s = c.uses[0];
      const GraphCmd::Use& d = c.uses[1];
      VkBufferCopy region{s.off, d.off, c.bytes};
      vkCmdCopyBuffer(b->cmd, s.buf->vk(), d.buf->vk(), 1, &region);
      written.push_back({d.buf->vk(), d.off, c.bytes});
    } else {
      const VkDeviceSize poff = static_cast<VkDeviceSize>(slot) * kParamSlotBytes;
      std::vector<std::uint32_t> words = c.params;
      if (c.check >= 0) words[P_ERR] = static_cast<std::uint32_t>(c.check);
      std::memcpy(b->params->mapped() + poff, words.data(), words.size() * 4);
      ++slot;
      VkDescriptorSet set = allocate_set(dev_.device, b->descriptors, pipes_.set_layout);
      VkDescriptorBufferInfo infos[kBindings];
      infos[0] = {b->params->vk(), b->params->offset() + poff, kParamSlotBytes};
      for (std::uint32_t i = 1; i < kBindings; ++i) {
        const GraphCmd::Use* u = i - 1 < c.uses.size() ? &c.uses[i - 1] : nullptr;
        infos[i] = u && u->buf ? VkDescriptorBufferInfo{u->buf->vk(), u->off, u->len} : infos[0];
      }
      if (c.check >= 0) infos[3] = {b->errors->vk(), b->errors->offset(), b->errors->size()};
      write_storage_bindings(dev_.device, set, infos);
      std::vector<std::pair<Region, bool>> regions;
      for (const GraphCmd::Use& u : c.uses)
        if (u.buf) regions.push_back({{u.buf->vk(), u.off, u.len}, u.write});
      hazard_barrier(regions);
      bind(c.pipe);
      vkCmdBindDescriptorSets(b->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pipes_.layout, 0, 1, &set, 0, nullptr);
      vkCmdDispatch(b->cmd, c.gx, c.gy, c.gz);
      ++b->dispatches;
    }
    keep_step(c);
  }
  for (BufRef& s : rec.staging) b->keep.push_back(std::move(s));
  VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};  // the results readable by the host
  mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  mb.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
  vkCmdPipelineBarrier(b->cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                       VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &mb, 0, nullptr, 0, nullptr);
  check_vk(vkEndCommandBuffer(b->cmd), "vkEndCommandBuffer");
  graph_stats_[0].store(b->dispatches, std::memory_order_relaxed);
  graph_stats_[1].store(static_cast<std::uint32_t>(runs.size()), std::memory_order_relaxed);
  graph_stats_[2].store(fused_cmds, std::memory_order_relaxed);
  rec.cmds.clear();
  std::unique_ptr<Batch> out = std::move(b);
  return out;
}

void Context::graph_run(Batch& g) {
  std::lock_guard<std::mutex> lock(stream_.mu);
  if (lost()) throw_lost_locked();
  submit_locked();  // the input refreshes (copy_from) and other work queued before, same queue
  if (!g.checks.empty()) std::memset(g.errors->mapped(), 0, g.errors->size());
  if (stream_.any_poison)  // this replay writes its values afresh: last replay's errors go
    for (const Batch::Step& s : g.steps)
      for (std::uint32_t i = 0; i < s.count; ++i)
        if (s.writes >> i & 1u) g.keep[s.first + i]->poison_.reset();
  check_vk(vkResetFences(dev_.device, 1, &g.fence), "vkResetFences");
  VkSubmitInfo si{VK_STRUCTURE_TYPE_SUBMIT_INFO};
  si.commandBufferCount = 1;
  si.pCommandBuffers = &g.cmd;
  VkResult r = vkQueueSubmit(dev_.queue, 1, &si, g.fence);
  stream_.submits.fetch_add(1, std::memory_order_relaxed);
  note_lost(r, "vkQueueSubmit");
  if (lost()) throw_lost_locked();
  check_vk(r, "vkQueueSubmit");
  // The replay completes before it returns: outputs are then readable like any retired
  // batch's, and the next replay may submit the command buffer again.
  r = vkWaitForFences(dev_.device, 1, &g.fence, VK_TRUE, UINT64_MAX);
  note_lost(r, "vkWaitForFences");
  if (lost()) throw_lost_locked();
  check_vk(r, "vkWaitForFences");
  collect_errors_locked(g);
}

void Context::graph_free(std::unique_ptr<Batch> g) {
  if (!g) return;
  std::lock_guard<std::mutex> lock(stream_.mu);
  // graph_run waited for its submission: nothing of the graph is pending here.
  destroy_batch(*g);
}

}  // namespace tensor::vulkan
