// Device memory: big blocks of one memory type (Block) suballocated by a free list
// (Pool) into counted buffers (Buffer, BufRef); the context's two pools (Memory) and
// TENSOR_VK_MEMORY_LIMIT's syntax. Implemented in runtime/memory.cpp and
// runtime/memory_limit.cpp.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backends/vulkan/runtime/loader.hpp"
#include "dispatch/primitive.hpp"

namespace tensor::vulkan {

class Context;

// One VkDeviceMemory + one VkBuffer covering it; suballocated by a free list.
struct Block {
  VkDeviceMemory memory = VK_NULL_HANDLE;
  VkBuffer buffer = VK_NULL_HANDLE;
  VkDeviceSize size = 0;
  std::byte* mapped = nullptr;
  std::map<VkDeviceSize, VkDeviceSize> free;  // offset -> size, coalesced
  std::size_t live = 0;                        // allocations not yet released
  bool host = false;                           // staging pool block
};

// A counted suballocation; released back to its pool when the last reference goes
// (the command batches that use it hold references until their fence signals).
class Buffer {
 public:
  Buffer(Context* ctx, Block* block, VkDeviceSize offset, VkDeviceSize size, VkDeviceSize request)
      : ctx_(ctx), block_(block), offset_(offset), size_(size), request_(request) {}
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  VkBuffer vk() const { return block_->buffer; }
  VkDeviceSize offset() const { return offset_; }
  VkDeviceSize size() const { return size_; }
  VkDeviceSize request() const { return request_; }
  // Host address of byte 0 (null when the memory is not host-visible).
  std::byte* mapped() const { return block_->mapped ? block_->mapped + offset_ : nullptr; }
  Context* context() const { return ctx_; }
  bool unique() const { return refs_.load(std::memory_order_acquire) == 1; }

  void add_ref() const { refs_.fetch_add(1, std::memory_order_relaxed); }
  void release_ref() const;

 private:
  friend class Context;
  Context* ctx_;
  Block* block_;
  VkDeviceSize offset_, size_, request_;
  mutable std::atomic<std::uint32_t> refs_{1};
  // The IndexError of a flagged index dispatch that wrote this buffer, or of one whose
  // result some dispatch read before writing here (set when the batch retires, under
  // the context's lock): a read of the buffer throws it (Context::wait_read).
  mutable std::shared_ptr<const std::string> poison_;
};
using BufRef = dispatch::Ref<Buffer>;

// Suballocator over big blocks of one memory type.
class Pool {
 public:
  void init(Context* ctx, std::uint32_t memory_type, bool map, bool host, VkDeviceSize block_size);
  // Upper bounds on the bytes this pool reserves: `limit` (named by `limit_source` in
  // errors), and the heap's size or budget `heap`, shared with `heap_sibling` (the
  // other pool when both draw from one heap; may be null).
  void set_limits(VkDeviceSize limit, std::string limit_source, VkDeviceSize heap, const Pool* heap_sibling);
  // When the request does not fit (a limit, or the driver refuses a block), gives
  // memory back (Context::reclaim_memory; `may_wait` false: only cached empty
  // blocks, for callers that hold the context's lock) and retries once; then throws
  // ExecutionError saying what was asked and what is in use and reserved.
  BufRef allocate(VkDeviceSize bytes, bool may_wait = true);
  void release(Block* block, VkDeviceSize offset, VkDeviceSize size, VkDeviceSize request);
  // Frees blocks without live allocations.
  void cleanup();
  void destroy();
  std::uint64_t in_use() const { return in_use_.load(std::memory_order_relaxed); }
  std::uint64_t reserved() const { return reserved_.load(std::memory_order_relaxed); }
  std::uint64_t peak() const { return peak_.load(std::memory_order_relaxed); }
  std::uint64_t limit() const { return limit_; }
  const std::string& limit_source() const { return limit_source_; }

 private:
  // Null (and `why`) when the request does not fit now.
  BufRef try_allocate(VkDeviceSize need, VkDeviceSize bytes, std::string& why);
  Block* new_block(VkDeviceSize size, std::string& why);
  void free_block(Block* b);
  Context* ctx_ = nullptr;
  std::uint32_t type_ = 0;
  bool map_ = false, host_ = false;
  VkDeviceSize block_size_ = 0;
  VkDeviceSize limit_ = ~VkDeviceSize{0}, heap_ = ~VkDeviceSize{0};
  std::string limit_source_;
  const Pool* heap_sibling_ = nullptr;
  std::vector<std::unique_ptr<Block>> blocks_;
  std::mutex mu_;
  std::atomic<std::uint64_t> in_use_{0}, reserved_{0}, peak_{0};
};

// TENSOR_VK_MEMORY_LIMIT's syntax: a byte count with an optional K, M or G suffix
// (powers of 1024, either case). Throws ExecutionError naming the variable otherwise
// (also for 0 and for values beyond 2^64 - 1).
std::uint64_t parse_memory_limit(const char* text);

// The context's memory: tensors in the device pool, staging buffers and the command
// batches' arenas in the host-visible one (set up by the device's init).
struct Memory {
  bool staging = false;  // device memory is not host-visible (or forced)
  Pool device_pool, host_pool;
  VkDeviceSize align = 256;     // binding offsets' alignment (and of every suballocation)
  VkDeviceSize max_alloc = 0;   // maxMemoryAllocationSize
};

}  // namespace tensor::vulkan
