// The pooled buffer suballocator (Buffer, Pool) and the context's allocation,
// reclaim and statistics entry points (see runtime/context.hpp).

// Vulkan structs are initialised as `VkFoo info{VK_STRUCTURE_TYPE_FOO}` with the
// remaining members zeroed by the language; that is the intended idiom here.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#include "backends/vulkan/runtime/internal.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>

#include "lib/core/current_op.hpp"
#include "tensor/error.hpp"

namespace tensor::vulkan {

// ---- Buffer / Pool ---------------------------------------------------------------

void Buffer::release_ref() const {
  if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    Pool* pool = block_->host ? &ctx_->mem_.host_pool : &ctx_->mem_.device_pool;
    pool->release(block_, offset_, size_, request_);
    delete this;
  }
}

void Pool::init(Context* ctx, std::uint32_t memory_type, bool map, bool host, VkDeviceSize block_size) {
  ctx_ = ctx;
  type_ = memory_type;
  map_ = map;
  host_ = host;
  block_size_ = block_size;
}

void Pool::set_limits(VkDeviceSize limit, std::string limit_source, VkDeviceSize heap, const Pool* heap_sibling) {
  limit_ = limit;
  limit_source_ = std::move(limit_source);
  heap_ = heap;
  heap_sibling_ = heap_sibling;
}

Block* Pool::new_block(VkDeviceSize size, std::string& why) {
  const char* kind = host_ ? "staging" : "tensor";
  const std::uint64_t reserved = reserved_.load(), in_use = in_use_.load();
  if (size > limit_ || reserved + size > limit_) {
    why = fmt::format("{} bytes in use and {} reserved in the {} pool, whose limit is {} bytes ({})", in_use, reserved, kind,
                      limit_, limit_source_);
    return nullptr;
  }
  const std::uint64_t shared = heap_sibling_ ? heap_sibling_->reserved() : 0;
  if (size > heap_ || reserved + shared + size > heap_) {
    why = fmt::format("{} bytes reserved by this device's pools of a {}-byte memory heap ({} in use in the {} pool)",
                      reserved + shared, heap_, in_use, kind);
    return nullptr;
  }
  auto b = std::make_unique<Block>();
  b->size = size;
  b->host = host_;
  VkBufferCreateInfo bi{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  bi.size = size;
  bi.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  bi.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  const char* call = "vkCreateBuffer";  // the call that failed, if one does
  VkResult r = vkCreateBuffer(ctx_->dev_.device, &bi, nullptr, &b->buffer);
  if (r == VK_SUCCESS) {
    call = "vkAllocateMemory";
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(ctx_->dev_.device, b->buffer, &req);
    VkMemoryAllocateInfo ai{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
    ai.allocationSize = req.size;
    ai.memoryTypeIndex = type_;
    r = vkAllocateMemory(ctx_->dev_.device, &ai, nullptr, &b->memory);
    if (r != VK_SUCCESS) b->memory = VK_NULL_HANDLE;
  }
  if (r == VK_SUCCESS) {
    call = "vkBindBufferMemory";
    r = vkBindBufferMemory(ctx_->dev_.device, b->buffer, b->memory, 0);
  }
  if (r == VK_SUCCESS && map_) {
    call = "vkMapMemory";
    r = vkMapMemory(ctx_->dev_.device, b->memory, 0, VK_WHOLE_SIZE, 0, reinterpret_cast<void**>(&b->mapped));
  }
  if (r != VK_SUCCESS) {
    if (b->buffer) vkDestroyBuffer(ctx_->dev_.device, b->buffer, nullptr);
    if (b->memory) vkFreeMemory(ctx_->dev_.device, b->memory, nullptr);
    if (r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY) {  // the caller may reclaim and retry
      why = fmt::format("{} from {} for a {}-byte block, with {} bytes in use and {} reserved in the {} pool",
                        vk_result_name(r), call, size, in_use, reserved, kind);
      return nullptr;
    }
    ctx_->note_lost(r, call);
    check_vk(r, call);
  }
  b->free.emplace(0, size);
  reserved_ += size;
  blocks_.push_back(std::move(b));
  return blocks_.back().get();
}

void Pool::free_block(Block* b) {
  if (b->mapped) vkUnmapMemory(ctx_->dev_.device, b->memory);
  vkDestroyBuffer(ctx_->dev_.device, b->buffer, nullptr);
  vkFreeMemory(ctx_->dev_.device, b->memory, nullptr);
  reserved_ -= b->size;
  blocks_.erase(std::find_if(blocks_.begin(), blocks_.end(), [&](const auto& p) { return p.get() == b; }));
}

BufRef Pool::allocate(VkDeviceSize bytes, bool may_wait) {
  const VkDeviceSize align = ctx_->mem_.align;
  const VkDeviceSize need = (std::max<VkDeviceSize>(bytes, 4) + align - 1) / align * align;
  // Beyond maxStorageBufferRange a tensor still fits one allocation; kernels that
  // cannot bind it in pieces refuse it at dispatch time (Context::dispatch).
  if (need > ctx_->mem_.max_alloc)
    throw ExecutionError(fmt::format("[{}] tensor too large for one allocation on vulkan:{}; expected at most {} bytes "
                                     "(maxMemoryAllocationSize); got {} bytes",
                                     core::current_op_name(), ctx_->dev_.index, ctx_->mem_.max_alloc, bytes));
  std::string why;
  if (BufRef b = try_allocate(need, bytes, why)) return b;
  // Give back what finished or pending work holds and cached empty blocks, then retry.
  ctx_->reclaim_memory(may_wait);
  if (BufRef b = try_allocate(need, bytes, why)) return b;
  throw ExecutionError(fmt::format("[{}] out of {} memory on vulkan:{}; expected room for {} bytes (a request of {}) after "
                                   "freeing cached blocks{}; got {}",
                                   core::current_op_name(), host_ ? "host-visible staging" : "device", ctx_->dev_.index, need,
                                   bytes, may_wait ? " and waiting for pending work" : "", why));
}

BufRef Pool::try_allocate(VkDeviceSize need, VkDeviceSize bytes, std::string& why) {
  std::lock_guard<std::mutex> lock(mu_);
  Block* block = nullptr;
  VkDeviceSize offset = 0;
  if (need <= block_size_) {
    for (auto& b : blocks_) {
      if (b->size != block_size_) continue;
      for (auto it = b->free.begin(); it != b->free.end(); ++it) {
        if (it->second >= need) {
          block = b.get();
          offset = it->first;
          const VkDeviceSize rest = it->second - need;
          b->free.erase(it);
          if (rest) block->free.emplace(offset + need, rest);
          break;
        }
      }
      if (block) break;
    }
    if (!block) {
      block = new_block(block_size_, why);
      if (!block) return {};
      block->free.clear();
      if (need < block_size_) block->free.emplace(need, block_size_ - need);
    }
  } else {
    block = new_block(need, why);  // dedicated
    if (!block) return {};
    block->free.clear();
  }
  block->live++;
  const std::uint64_t used = in_use_ += need;
  if (used > peak_.load()) peak_.store(used);
  return BufRef::adopt(new Buffer(ctx_, block, offset, need, bytes));
}

void Pool::release(Block* block, VkDeviceSize offset, VkDeviceSize size, VkDeviceSize) {
  std::lock_guard<std::mutex> lock(mu_);
  in_use_ -= size;
  block->live--;
  if (block->size != block_size_) {  // dedicated: give it back at once
    free_block(block);
    return;
  }
  auto it = block->free.emplace(offset, size).first;
  if (it != block->free.begin()) {
    auto prev = std::prev(it);
    if (prev->first + prev->second == it->first) {
      prev->second += it->second;
      block->free.erase(it);
      it = prev;
    }
  }
  auto next = std::next(it);
  if (next != block->free.end() && it->first + it->second == next->first) {
    it->second += next->second;
    block->free.erase(next);
  }
}

void Pool::cleanup() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<Block*> empty;
  for (auto& b : blocks_)
    if (b->live == 0) empty.push_back(b.get());
  for (Block* b : empty) free_block(b);
}

void Pool::destroy() {
  std::lock_guard<std::mutex> lock(mu_);
  while (!blocks_.empty()) free_block(blocks_.back().get());
}

// ---- Context: allocation and memory statistics ------------------------------------

BufRef Context::allocate(std::size_t bytes) {
  ensure_init();
  {
    std::lock_guard<std::mutex> lock(stream_.mu);
    if (lost()) throw_lost_locked();
    retire_locked(false, 0);  // give finished batches' buffers back first
  }
  return mem_.device_pool.allocate(bytes);
}

void Context::reclaim_memory(bool wait) {
  if (wait) {
    std::lock_guard<std::mutex> lock(stream_.mu);
    if (lost()) throw_lost_locked();
    submit_locked();
    retire_locked(true, stream_.next_ticket - 1);
  }
  mem_.device_pool.cleanup();
  mem_.host_pool.cleanup();
}

MemoryStats Context::memory_stats() {
  ensure_init();
  return {mem_.device_pool.in_use(), mem_.device_pool.reserved(), mem_.device_pool.peak()};
}

void Context::memory_cleanup() {
  ensure_init();
  if (!lost()) sync();  // a lost device completes nothing; its empty blocks can still go
  mem_.device_pool.cleanup();
  mem_.host_pool.cleanup();
}

}  // namespace tensor::vulkan
