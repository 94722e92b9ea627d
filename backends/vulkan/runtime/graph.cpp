// Graph capture and native replay on the command stream (issue 28, step 4): the capture
// run's dispatches, copies and uploads noted in a GraphRecording; one command buffer
// recorded from it (descriptor sets bound to the recorded buffers, the parameter words,
// the eager path's hazard barriers); one submission per replay.

// Vulkan structs are initialised as `VkFoo info{VK_STRUCTURE_TYPE_FOO}` with the
// remaining members zeroed by the language; that is the intended idiom here.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#include "backends/vulkan/runtime/internal.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "backends/vulkan/shaders/vk_codes.h"
#include "tensor/error.hpp"

namespace tensor::vulkan {

bool Context::recording_here_locked() const {
  return stream_.rec && stream_.rec->thread == std::this_thread::get_id();
}

void Context::note_dispatch_locked(VkPipeline pipe, const std::vector<std::uint32_t>& params,
                                   const std::vector<Binding>& bindings, const VkDeviceSize* off, const VkDeviceSize* len,
                                   std::uint32_t gx, std::uint32_t gy, std::uint32_t gz, const std::string* check) {
  GraphRecording& r = *stream_.rec;
  GraphCmd c;
  c.pipe = pipe;
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

std::unique_ptr<Batch> Context::graph_build(GraphRecording& rec) {
  std::size_t ndisp = 0;
  for (const GraphCmd& c : rec.cmds) ndisp += c.pipe ? 1 : 0;
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
  b->params = mem_.host_pool.allocate(sets * kParamSlotBytes);
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
  for (GraphCmd& c : rec.cmds) {
    Batch::Step step{static_cast<std::uint32_t>(b->keep.size()), 0, 0, c.check};
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
      VkDescriptorSetAllocateInfo sa{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
      sa.descriptorPool = b->descriptors;
      sa.descriptorSetCount = 1;
      sa.pSetLayouts = &pipes_.set_layout;
      VkDescriptorSet set;
      check_vk(vkAllocateDescriptorSets(dev_.device, &sa, &set), "vkAllocateDescriptorSets");
      VkDescriptorBufferInfo infos[kBindings];
      infos[0] = {b->params->vk(), b->params->offset() + poff, kParamSlotBytes};
      for (std::uint32_t i = 1; i < kBindings; ++i) {
        const GraphCmd::Use* u = i - 1 < c.uses.size() ? &c.uses[i - 1] : nullptr;
        infos[i] = u && u->buf ? VkDescriptorBufferInfo{u->buf->vk(), u->off, u->len} : infos[0];
      }
      if (c.check >= 0) infos[3] = {b->errors->vk(), b->errors->offset(), b->errors->size()};
      write_storage_bindings(dev_.device, set, infos);
      bool need = false;  // the eager path's hazard test (RAW, WAW, WAR since the last barrier)
      for (const GraphCmd::Use& u : c.uses) {
        if (!u.buf) continue;
        for (const Region& r : written) need = need || overlaps(r, u.buf->vk(), u.off, u.len);
        if (u.write)
          for (const Region& r : read) need = need || overlaps(r, u.buf->vk(), u.off, u.len);
      }
      if (need) barrier();
      for (const GraphCmd::Use& u : c.uses)
        if (u.buf) (u.write ? written : read).push_back({u.buf->vk(), u.off, u.len});
      if (c.pipe != bound) vkCmdBindPipeline(b->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, c.pipe);
      bound = c.pipe;
      vkCmdBindDescriptorSets(b->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pipes_.layout, 0, 1, &set, 0, nullptr);
      vkCmdDispatch(b->cmd, c.gx, c.gy, c.gz);
      ++b->dispatches;
    }
    // The buffers, held for the graph's life, and the step that carries index errors.
    for (GraphCmd::Use& u : c.uses) {
      if (!u.buf) continue;
      if (u.write) step.writes |= 1u << step.count;
      ++step.count;
      b->keep.push_back(std::move(u.buf));
    }
    b->steps.push_back(step);
  }
  for (BufRef& s : rec.staging) b->keep.push_back(std::move(s));
  VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};  // the results readable by the host
  mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  mb.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
  vkCmdPipelineBarrier(b->cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                       VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &mb, 0, nullptr, 0, nullptr);
  check_vk(vkEndCommandBuffer(b->cmd), "vkEndCommandBuffer");
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
