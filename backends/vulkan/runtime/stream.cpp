// The command stream: batches (command buffer, descriptor pool, parameter arena, fence)
// recorded, submitted with a bounded queue, retired and recycled; hazard barriers;
// the index-error flags read back at retire.

// Vulkan structs are initialised as `VkFoo info{VK_STRUCTURE_TYPE_FOO}` with the
// remaining members zeroed by the language; that is the intended idiom here.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#include "backends/vulkan/runtime/internal.hpp"

#include <fmt/format.h>

#include <cstring>

#include "backends/vulkan/shaders/vk_codes.h"
#include "lib/core/current_op.hpp"
#include "tensor/error.hpp"

namespace tensor::vulkan {

namespace {

bool overlaps(const Batch::Region& r, VkBuffer buf, VkDeviceSize off, VkDeviceSize size) {
  return r.buf == buf && r.off < off + size && off < r.off + r.size;
}


}  // namespace

void Context::create_batch_objects(Batch& b, VkCommandPoolCreateFlags flags, std::uint32_t sets) {
  VkCommandPoolCreateInfo pi{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  pi.flags = flags;
  pi.queueFamilyIndex = dev_.queue_family;
  check_vk(vkCreateCommandPool(dev_.device, &pi, nullptr, &b.pool), "vkCreateCommandPool");
  VkCommandBufferAllocateInfo ai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
  ai.commandPool = b.pool;
  ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  ai.commandBufferCount = 1;
  check_vk(vkAllocateCommandBuffers(dev_.device, &ai, &b.cmd), "vkAllocateCommandBuffers");
  VkFenceCreateInfo fi{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
  check_vk(vkCreateFence(dev_.device, &fi, nullptr, &b.fence), "vkCreateFence");
  VkDescriptorPoolSize ps{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, sets * kBindings};
  VkDescriptorPoolCreateInfo di{VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
  di.maxSets = sets;
  di.poolSizeCount = 1;
  di.pPoolSizes = &ps;
  check_vk(vkCreateDescriptorPool(dev_.device, &di, nullptr, &b.descriptors), "vkCreateDescriptorPool");
}

std::unique_ptr<Batch> Context::make_batch() {
  auto b = std::make_unique<Batch>();
  create_batch_objects(*b, VK_COMMAND_POOL_CREATE_TRANSIENT_BIT, kMaxDispatchesPerBatch);
  if (timestamps_supported()) {
    VkQueryPoolCreateInfo qi{VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO};
    qi.queryType = VK_QUERY_TYPE_TIMESTAMP;
    qi.queryCount = 2;
    check_vk(vkCreateQueryPool(dev_.device, &qi, nullptr, &b->timestamps), "vkCreateQueryPool");
  }
  // stream_.mu is held here: reclaiming memory may not wait for batches.
  b->params = mem_.host_pool.allocate(kParamArenaBytes, false);
  b->errors = mem_.host_pool.allocate(kMaxDispatchesPerBatch * 8, false);
  stream_.live_batches.fetch_add(1, std::memory_order_relaxed);
  return b;
}

Batch& Context::begin_batch() {
  if (lost()) throw_lost_locked();
  if (stream_.current) return *stream_.current;
  retire_locked(false, 0);
  std::unique_ptr<Batch> b;
  if (!stream_.spare.empty()) {
    b = std::move(stream_.spare.back());
    stream_.spare.pop_back();
  } else {
    b = make_batch();
  }
  check_vk(vkResetCommandPool(dev_.device, b->pool, 0), "vkResetCommandPool");
  check_vk(vkResetDescriptorPool(dev_.device, b->descriptors, 0), "vkResetDescriptorPool");
  b->params_used = 0;
  b->dispatches = 0;
  b->checks.clear();
  b->steps.clear();
  std::memset(b->errors->mapped(), 0, kMaxDispatchesPerBatch * 8);
  b->keep.clear();
  b->written.clear();
  b->read.clear();
  VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  check_vk(vkBeginCommandBuffer(b->cmd, &bi), "vkBeginCommandBuffer");
  b->timed = b->timestamps != VK_NULL_HANDLE && timestamps_on();
  if (b->timed) {
    vkCmdResetQueryPool(b->cmd, b->timestamps, 0, 2);
    vkCmdWriteTimestamp(b->cmd, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, b->timestamps, 0);
  }
  stream_.current = std::move(b);
  // Orders this batch after everything submitted before it (cross-batch dependencies).
  barrier_locked(*stream_.current);
  return *stream_.current;
}

void Context::barrier_locked(Batch& b) {
  VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT | VK_ACCESS_HOST_WRITE_BIT;
  mb.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT |
                     VK_ACCESS_TRANSFER_WRITE_BIT;
  vkCmdPipelineBarrier(b.cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT | VK_PIPELINE_STAGE_HOST_BIT,
                       VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &mb, 0, nullptr, 0,
                       nullptr);
  b.written.clear();
  b.read.clear();
}

void Context::dispatch(ShaderFamily family, const std::vector<std::uint32_t>& spec, const std::vector<std::uint32_t>& params,
                       const std::vector<Binding>& bindings, std::uint32_t gx, std::uint32_t gy, std::uint32_t gz, bool wide,
                       const std::string* check) {
  // Effective byte ranges of the bindings (buffer-absolute).
  VkDeviceSize off[kBindings - 1]{}, len[kBindings - 1]{};
  for (std::size_t i = 0; i < bindings.size() && i < kBindings - 1; ++i) {
    const Binding& bd = bindings[i];
    if (!bd.buffer) continue;
    off[i] = bd.buffer->offset() + bd.offset;
    len[i] = bd.range ? bd.range : bd.buffer->size() - bd.offset;
    if (len[i] > dev_.props.limits.maxStorageBufferRange)
      throw ExecutionError(fmt::format("[{}] tensor too large for the {} kernel on vulkan:{}; expected at most {} bytes "
                                       "(maxStorageBufferRange; only contiguous elementwise ops split larger tensors); got {} "
                                       "bytes",
                                       core::current_op_name(), shader_spirv(family).name, dev_.index,
                                       dev_.props.limits.maxStorageBufferRange, len[i]));
  }
  // Beyond the device's grid a dispatch would be invalid usage (undefined behaviour, a
  // lost device at worst): refused before anything is recorded.
  const std::uint32_t* grid = dev_.props.limits.maxComputeWorkGroupCount;
  if (gx > grid[0] || gy > grid[1] || gz > grid[2])
    throw ExecutionError(fmt::format("[{}] too many workgroups for the {} kernel on vulkan:{}; expected at most {} x {} x {} "
                                     "(maxComputeWorkGroupCount); got {} x {} x {}",
                                     core::current_op_name(), shader_spirv(family).name, dev_.index, grid[0],
                                     grid[1], grid[2], gx, gy, gz));
  VkPipeline pipe = pipeline(family, spec, wide);
  std::lock_guard<std::mutex> lock(stream_.mu);
  if (stream_.rec && recording_here_locked()) note_dispatch_locked(family, spec, wide, pipe, params, bindings, off, len, gx, gy, gz, check);
  Batch* b = &begin_batch();
  const VkDeviceSize pbytes = params.size() * 4;
  if (b->params_used + kParamSlotBytes > kParamArenaBytes || pbytes > kParamSlotBytes) {
    submit_locked();
    b = &begin_batch();
  }
  const VkDeviceSize poff = b->params_used;
  std::memcpy(b->params->mapped() + poff, params.data(), pbytes);
  b->params_used += kParamSlotBytes;
  if (check) {  // this dispatch's error slot (one per dispatch of the batch)
    const auto slot = static_cast<std::uint32_t>(b->checks.size());
    std::memcpy(b->params->mapped() + poff + P_ERR * 4, &slot, 4);
    b->checks.push_back(*check);
  }

  VkDescriptorSet set = allocate_set(dev_.device, b->descriptors, pipes_.set_layout);
  VkDescriptorBufferInfo infos[kBindings];
  infos[0] = {b->params->vk(), b->params->offset() + poff, kParamSlotBytes};
  for (std::uint32_t i = 1; i < kBindings; ++i) {
    const Buffer* buf = i - 1 < bindings.size() ? bindings[i - 1].buffer : nullptr;
    infos[i] = buf ? VkDescriptorBufferInfo{buf->vk(), off[i - 1], len[i - 1]} : infos[0];
  }
  // The error flags (binding 3 of checked dispatches) are only ever set, never read
  // on the device, so they need no hazard tracking.
  if (check) infos[3] = {b->errors->vk(), b->errors->offset(), b->errors->size()};
  write_storage_bindings(dev_.device, set, infos);

  // A barrier only when this dispatch touches what an earlier one in this batch
  // wrote (RAW, WAW) or writes what one read (WAR) since the last barrier.
  bool need = false;
  for (std::size_t i = 0; i < bindings.size(); ++i) {
    const Binding& bd = bindings[i];
    if (!bd.buffer) continue;
    for (const auto& r : b->written) need = need || overlaps(r, bd.buffer->vk(), off[i], len[i]);
    if (bd.write)
      for (const auto& r : b->read) need = need || overlaps(r, bd.buffer->vk(), off[i], len[i]);
  }
  if (need) barrier_locked(*b);
  Batch::Step step{static_cast<std::uint32_t>(b->keep.size()), 0, 0,
                   check ? static_cast<std::int32_t>(b->checks.size() - 1) : -1};
  for (std::size_t i = 0; i < bindings.size(); ++i) {
    const Binding& bd = bindings[i];
    if (!bd.buffer) continue;
    (bd.write ? b->written : b->read).push_back({bd.buffer->vk(), off[i], len[i]});
    bd.buffer->add_ref();
    b->keep.push_back(BufRef::adopt(const_cast<Buffer*>(bd.buffer)));
    if (bd.write) step.writes |= 1u << step.count;
    ++step.count;
  }
  b->steps.push_back(step);
  vkCmdBindPipeline(b->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pipe);
  vkCmdBindDescriptorSets(b->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pipes_.layout, 0, 1, &set, 0, nullptr);
  vkCmdDispatch(b->cmd, gx, gy, gz);
  if (++b->dispatches >= kMaxDispatchesPerBatch) submit_locked();
}

void Context::keep(BufRef buf) {
  std::lock_guard<std::mutex> lock(stream_.mu);
  if (stream_.current) stream_.current->keep.push_back(std::move(buf));
}

void Context::submit_locked() {
  if (!stream_.current) return;
  if (lost()) throw_lost_locked();
  Batch& b = *stream_.current;
  VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  mb.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
  vkCmdPipelineBarrier(b.cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                       VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &mb, 0, nullptr, 0, nullptr);
  if (b.timed) vkCmdWriteTimestamp(b.cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, b.timestamps, 1);
  check_vk(vkEndCommandBuffer(b.cmd), "vkEndCommandBuffer");
  check_vk(vkResetFences(dev_.device, 1, &b.fence), "vkResetFences");
  VkSubmitInfo si{VK_STRUCTURE_TYPE_SUBMIT_INFO};
  si.commandBufferCount = 1;
  si.pCommandBuffers = &b.cmd;
  const VkResult r = vkQueueSubmit(dev_.queue, 1, &si, b.fence);
  stream_.submits.fetch_add(1, std::memory_order_relaxed);
  note_lost(r, "vkQueueSubmit");
  if (r != VK_SUCCESS) {
    recycle_locked(std::move(stream_.current));
    if (lost()) throw_lost_locked();
    check_vk(r, "vkQueueSubmit");
  }
  b.ticket = stream_.next_ticket++;
  stream_.in_flight.push_back(std::move(stream_.current));
  // Bound the queue: wait for the oldest submission when too many are pending.
  if (stream_.in_flight.size() > kMaxInFlight) retire_locked(true, stream_.in_flight.front()->ticket);
}

void Context::recycle_locked(std::unique_ptr<Batch> b) {
  b->keep.clear();
  if (stream_.spare.size() < kMaxSpare) {
    stream_.spare.push_back(std::move(b));
    return;
  }
  destroy_batch(*b);
}

void Context::destroy_batch(Batch& b) {
  b.keep.clear();
  b.params = {};
  b.errors = {};
  if (b.pool) vkDestroyCommandPool(dev_.device, b.pool, nullptr);  // frees its command buffer
  if (b.descriptors) vkDestroyDescriptorPool(dev_.device, b.descriptors, nullptr);
  if (b.fence) vkDestroyFence(dev_.device, b.fence, nullptr);
  if (b.timestamps) vkDestroyQueryPool(dev_.device, b.timestamps, nullptr);
  b.timestamps = VK_NULL_HANDLE;
  b.pool = VK_NULL_HANDLE;
  b.cmd = VK_NULL_HANDLE;
  b.descriptors = VK_NULL_HANDLE;
  b.fence = VK_NULL_HANDLE;
  stream_.live_batches.fetch_sub(1, std::memory_order_relaxed);
}

void Context::retire_locked(bool block, std::uint64_t ticket) {
  while (!stream_.in_flight.empty()) {
    Batch& b = *stream_.in_flight.front();
    VkResult r;
    if (block && b.ticket <= ticket) r = vkWaitForFences(dev_.device, 1, &b.fence, VK_TRUE, UINT64_MAX);
    else r = vkGetFenceStatus(dev_.device, b.fence);
    if (r == VK_NOT_READY || r == VK_TIMEOUT) return;
    if (r != VK_SUCCESS) {
      const char* what = block && b.ticket <= ticket ? "vkWaitForFences" : "vkGetFenceStatus";
      note_lost(r, what);
      if (lost()) throw_lost_locked();
      check_vk(r, what);
    }
    stream_.completed_ticket = b.ticket;
    collect_errors_locked(b);
    collect_time_locked(b);
    std::unique_ptr<Batch> done = std::move(stream_.in_flight.front());
    stream_.in_flight.pop_front();
    recycle_locked(std::move(done));
  }
}

std::uint64_t Context::flush() {
  std::lock_guard<std::mutex> lock(stream_.mu);
  submit_locked();
  return stream_.next_ticket - 1;
}

void Context::collect_time_locked(Batch& b) {
  if (!b.timed) return;
  std::uint64_t t[2] = {0, 0};
  if (vkGetQueryPoolResults(dev_.device, b.timestamps, 0, 2, sizeof(t), t, sizeof(t[0]), VK_QUERY_RESULT_64_BIT) != VK_SUCCESS)
    return;  // completed batches have their results; a failure only loses this sample
  const std::uint64_t mask = dev_.ts_bits >= 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << dev_.ts_bits) - 1;
  const std::uint64_t ticks = (t[1] - t[0]) & mask;
  stream_.device_ns.fetch_add(static_cast<std::uint64_t>(static_cast<double>(ticks) * dev_.props.limits.timestampPeriod),
                       std::memory_order_relaxed);
}

// The bad call's own error belongs to its result: a flagged dispatch poisons the
// buffers it wrote (they hold zeros where an index was out of range), and a step that
// read a poisoned buffer poisons what it wrote, in recording order and across batches
// (they retire in order), so every tensor computed from the bad result throws the
// error when read while tensors that do not depend on it read as usual.
void Context::collect_errors_locked(Batch& b) {
  if (b.checks.empty() && !stream_.any_poison) return;
  const auto* words = reinterpret_cast<const std::uint32_t*>(b.errors->mapped());
  for (const Batch::Step& s : b.steps) {
    std::shared_ptr<const std::string> bad;
    if (s.slot >= 0 && words[2 * s.slot] != 0) {
      bad = std::make_shared<const std::string>(
          fmt::format("{}; got {}", b.checks[static_cast<std::size_t>(s.slot)], static_cast<std::int32_t>(words[2 * s.slot + 1])));
      stream_.any_poison = true;
    }
    for (std::uint32_t i = 0; i < s.count && !bad; ++i)
      if (!(s.writes >> i & 1u)) bad = b.keep[s.first + i]->poison_;
    if (!bad) continue;
    for (std::uint32_t i = 0; i < s.count; ++i) {
      const Buffer& out = *b.keep[s.first + i];
      if (s.writes >> i & 1u && !out.poison_) out.poison_ = bad;
    }
  }
}

void Context::wait(std::uint64_t ticket) { wait_read(ticket, nullptr); }

void Context::wait_read(std::uint64_t ticket, const Buffer* src) {
  std::lock_guard<std::mutex> lock(stream_.mu);
  if (lost()) throw_lost_locked();
  retire_locked(true, ticket);
  if (src && src->poison_) throw IndexError(*src->poison_);
}

void Context::copy(const Buffer& src, const Buffer& dst, std::size_t bytes) { copy(src, 0, dst, 0, bytes); }

void Context::copy(const Buffer& src, std::size_t src_off, const Buffer& dst, std::size_t dst_off, std::size_t bytes) {
  std::lock_guard<std::mutex> lock(stream_.mu);
  Batch& b = begin_batch();
  const VkDeviceSize so = src.offset() + src_off, dof = dst.offset() + dst_off;
  if (stream_.rec && recording_here_locked()) {
    src.add_ref();
    dst.add_ref();
    note_copy_locked(BufRef::adopt(const_cast<Buffer*>(&src)), so, BufRef::adopt(const_cast<Buffer*>(&dst)), dof, bytes);
  }
  barrier_locked(b);
  VkBufferCopy region{so, dof, bytes};
  vkCmdCopyBuffer(b.cmd, src.vk(), dst.vk(), 1, &region);
  b.written.push_back({dst.vk(), dof, bytes});
  src.add_ref();
  dst.add_ref();
  b.steps.push_back({static_cast<std::uint32_t>(b.keep.size()), 2, 0b10, -1});
  b.keep.push_back(BufRef::adopt(const_cast<Buffer*>(&src)));
  b.keep.push_back(BufRef::adopt(const_cast<Buffer*>(&dst)));
  if (++b.dispatches >= kMaxDispatchesPerBatch) submit_locked();
}

}  // namespace tensor::vulkan
