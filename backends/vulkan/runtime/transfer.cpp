// Host <-> buffer transfers: direct on host-visible memory, through the staging pool
// otherwise (see runtime/context.hpp).

// Vulkan structs are initialised as `VkFoo info{VK_STRUCTURE_TYPE_FOO}` with the
// remaining members zeroed by the language; that is the intended idiom here.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#include "backends/vulkan/runtime/internal.hpp"

#include <cstring>

namespace tensor::vulkan {

void Context::upload(const BufRef& dst, const void* src, std::size_t bytes) {
  if (bytes == 0) return;
  if (stream_.recording.load(std::memory_order_acquire)) {
    // A graph capture: the upload is repeated by each replay from a copy of the data the
    // graph keeps (a later node may write over this buffer in place).
    std::lock_guard<std::mutex> lock(stream_.mu);
    if (stream_.rec && recording_here_locked()) {
      BufRef kept = mem_.host_pool.allocate(bytes, false);
      std::memcpy(kept->mapped(), src, bytes);
      stream_.rec->staging.push_back(kept);
      note_copy_locked(kept, kept->offset(), dst, dst->offset(), bytes);
    }
  }
  if (std::byte* p = dst->mapped()) {
    std::memcpy(p, src, bytes);
    return;
  }
  BufRef staging = mem_.host_pool.allocate(bytes);
  std::memcpy(staging->mapped(), src, bytes);
  std::lock_guard<std::mutex> lock(stream_.mu);
  Batch& b = begin_batch();
  barrier_locked(b);
  VkBufferCopy region{staging->offset(), dst->offset(), bytes};
  vkCmdCopyBuffer(b.cmd, staging->vk(), dst->vk(), 1, &region);
  b.written.push_back({dst->vk(), dst->offset(), dst->size()});
  b.keep.push_back(std::move(staging));
  b.keep.push_back(dst);
}

BufRef Context::prepare_readback(const BufRef& src, std::size_t& offset, std::size_t bytes) {
  if (stream_.recording.load(std::memory_order_acquire)) {
    std::lock_guard<std::mutex> lock(stream_.mu);
    if (stream_.rec && recording_here_locked() && stream_.rec->why.empty())
      stream_.rec->why = "a read back to the host was recorded";
  }
  if (src->mapped() || bytes == 0) return src;
  BufRef staging = mem_.host_pool.allocate(bytes);
  const VkDeviceSize from = src->offset() + offset;
  offset = 0;
  std::lock_guard<std::mutex> lock(stream_.mu);
  Batch& b = begin_batch();
  barrier_locked(b);
  VkBufferCopy region{from, staging->offset(), bytes};
  vkCmdCopyBuffer(b.cmd, src->vk(), staging->vk(), 1, &region);
  b.read.push_back({src->vk(), src->offset(), src->size()});
  b.keep.push_back(src);
  b.keep.push_back(staging);
  return staging;
}

}  // namespace tensor::vulkan
