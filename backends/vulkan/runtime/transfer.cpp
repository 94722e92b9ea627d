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
