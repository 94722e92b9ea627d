// Per-physical-device state of the Vulkan backend: the runtime layer, beneath the op
// families (ops/kernel.hpp) and the registration (vk_backend.cpp). One concern per file:
//   runtime/instance.cpp     instance, validation messenger, discovery, context()
//   runtime/device.cpp       feature probing (Context::Context), logical-device init
//   runtime/memory.cpp       the pooled buffer suballocator (Buffer, Pool), allocate/reclaim
//   runtime/memory_limit.cpp TENSOR_VK_MEMORY_LIMIT and the pools' heap limits
//   runtime/spirv.cpp        the embedded SPIR-V (runtime/internal.hpp: shader_spirv)
//   runtime/pipeline.cpp     shader modules, pipelines by PipelineKey, the on-disk cache
//   runtime/stream.cpp       command batches, barriers, submit / retire, index-error flags
//   runtime/transfer.cpp     host <-> buffer uploads and readbacks (direct or staged)
//   runtime/device_loss.cpp  VK_ERROR_DEVICE_LOST bookkeeping
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "backends/vulkan/runtime/features.hpp"
#include "backends/vulkan/runtime/loader.hpp"
#include "dispatch/primitive.hpp"
#include "tensor/device.hpp"
#include "tensor/dtype.hpp"

namespace tensor::vulkan {

class Context;

// Throws ExecutionError naming the call and the VkResult unless r == VK_SUCCESS.
void check_vk(VkResult r, const char* what);
const char* vk_result_name(VkResult r);

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

// One storage-buffer binding of a dispatch: a buffer and whether the dispatch writes it.
// `offset`/`range` (bytes, relative to the buffer; range 0 = to its end) bind a
// sub-range, so tensors beyond maxStorageBufferRange can be processed in pieces.
struct Binding {
  const Buffer* buffer = nullptr;
  bool write = false;
  VkDeviceSize offset = 0;
  VkDeviceSize range = 0;
};

// Submissions queued ahead of the device at most: a submit beyond this waits for the
// oldest one, so work queued without any read back holds bounded memory (the
// buffers the batches keep alive, their arenas and Vulkan objects).
inline constexpr std::size_t kMaxInFlight = 16;
// Retired batches kept for reuse; the others are destroyed.
inline constexpr std::size_t kMaxSpare = 4;

// Command recording state of one submission.
struct Batch {
  VkCommandPool pool = VK_NULL_HANDLE;
  VkCommandBuffer cmd = VK_NULL_HANDLE;
  VkFence fence = VK_NULL_HANDLE;
  VkDescriptorPool descriptors = VK_NULL_HANDLE;
  VkQueryPool timestamps = VK_NULL_HANDLE;  // 2 queries: batch start and end (when timed)
  bool timed = false;              // this recording writes both timestamps
  BufRef params;                   // host-visible parameter arena
  VkDeviceSize params_used = 0;
  std::vector<BufRef> keep;        // buffers used by the recorded work
  BufRef errors;                   // host-visible flag words of index dispatches (2 per slot)
  std::vector<std::string> checks; // per error slot: the message prefix of its op
  // The recorded work in order, for carrying an index error from a flagged dispatch
  // to everything computed from its result: `count` entries of `keep` from `first`,
  // bit i of `writes` set where entry i is written; `slot` the error slot or -1.
  struct Step { std::uint32_t first, count, writes; std::int32_t slot; };
  std::vector<Step> steps;
  std::uint32_t dispatches = 0;
  std::uint64_t ticket = 0;
  // Regions written / read since the last barrier (buffer, offset, size).
  struct Region { VkBuffer buf; VkDeviceSize off, size; };
  std::vector<Region> written, read;
};

// Shader families; each has a narrow and a WIDE (64-bit) SPIR-V module. Rows holds
// the one-workgroup-per-row kernels (softmax, log_softmax, sort, cross). The last
// two are optional and narrow only: ElementwiseF16 (f16 arithmetic on 16-bit
// storage, needs shaderFloat16 + storageBuffer16BitAccess) and MatmulCoop (the
// VK_NV_cooperative_matrix f16 matmul); their modules exist only where usable.
enum class ShaderFamily : std::uint8_t { Elementwise, Reduce, Scan, Matmul, Index, Rows, ElementwiseF16, MatmulCoop, Module, Conv, Attention, Count };

[[noreturn]] void throw_too_many_spec_constants(std::size_t count);

// Which pipeline a dispatch needs: its shader family, module variant (0 narrow, 1
// WIDE, 2 SUBGROUP), required subgroup size and every specialization constant in
// full (32 bits each, and their count), so that two dispatches share a pipeline
// only when every value agrees: an op code or dtype code of any size cannot alias.
struct PipelineKey {
  static constexpr std::size_t kMaxSpec = 8;  // constants per pipeline
  std::array<std::uint32_t, kMaxSpec + 2> words{};
  friend constexpr bool operator==(const PipelineKey&, const PipelineKey&) = default;
};
struct PipelineKeyHash {
  std::size_t operator()(const PipelineKey& k) const noexcept {
    std::uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a over the words
    for (std::uint32_t w : k.words) h = (h ^ w) * 0x100000001b3ull;
    return static_cast<std::size_t>(h);
  }
};
// Throws ExecutionError when `spec` has more than kMaxSpec constants.
constexpr PipelineKey pipeline_key(ShaderFamily family, int variant, std::uint32_t subgroup, const std::uint32_t* spec,
                                   std::size_t count) {
  if (count > PipelineKey::kMaxSpec) throw_too_many_spec_constants(count);
  PipelineKey k;
  k.words[0] = static_cast<std::uint32_t>(family) | static_cast<std::uint32_t>(variant) << 8 |
               static_cast<std::uint32_t>(count) << 16;
  k.words[1] = subgroup;
  for (std::size_t i = 0; i < count; ++i) k.words[2 + i] = spec[i];
  return k;
}

// State of the cooperative-matrix path: not usable on this device, usable but not
// yet self-tested, live, or switched off by a failed self-test.
enum class CoopState : std::uint8_t { Unavailable, Untested, Live, Failed };

class Context {
 public:
  Context(VkInstance instance, VkPhysicalDevice phys, std::uint32_t queue_family, std::uint16_t index);
  ~Context();

  // Device-level facts (valid before init()).
  std::string name() const { return props_.deviceName; }
  // F16 adds Accelerated while the cooperative-matrix matmul is live (SPEC §3).
  DTypeUsageSet dtype_usage(DType t) const {
    const DTypeUsageSet u = usage_[static_cast<int>(t)];
    if (t == DType::F16 && u.contains(DTypeUsage::Arithmetic) && f16_accel_.load(std::memory_order_relaxed))
      return u | DTypeUsage::Accelerated;
    return u;
  }
  const VkPhysicalDeviceLimits& limits() const { return props_.limits; }
  // Largest range one storage-buffer binding may cover, and the alignment of
  // binding offsets (valid after ensure_init()).
  VkDeviceSize max_binding() const { return props_.limits.maxStorageBufferRange; }
  // A software device (lavapipe/llvmpipe): its compiler ends any one invocation's loops
  // after 65535 iterations in all, silently (see kLoopSafe in ops/kernel.hpp).
  bool software() const { return props_.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU; }
  VkDeviceSize binding_align() const { return align_; }
  DeviceId id() const { return {kVulkanDeviceType, index_}; }

  // Creates the logical device, queue, pools and pipeline cache on first use.
  void ensure_init();

  // Memory. Throws ExecutionError when the request cannot be served.
  BufRef allocate(std::size_t bytes);
  MemoryStats memory_stats();
  void memory_cleanup();
  // Upper bound on the bytes the tensor pool reserves and where it comes from (the
  // heap's size or VK_EXT_memory_budget budget, or TENSOR_VK_MEMORY_LIMIT); valid
  // after ensure_init().
  std::uint64_t memory_limit() const { return device_pool_.limit(); }
  std::string memory_limit_source() const { return device_pool_.limit_source(); }
  // Gives memory back to the driver before an allocation is refused: with `wait`,
  // submits the recording batch and waits for every submission (the buffers they
  // hold return to the pools); then frees the pools' empty blocks. Without `wait`
  // (the caller holds mu_) only the latter.
  void reclaim_memory(bool wait);
  // Host <-> buffer transfers (direct on host-visible memory, staging otherwise).
  void upload(const BufRef& dst, const void* src, std::size_t bytes);
  // Makes bytes [offset, offset + bytes) of `src` host-readable after the next wait:
  // returns `src` itself when mapped, else a staging buffer (data at its byte 0) and
  // records the copy. `offset` is updated to where the data will be.
  BufRef prepare_readback(const BufRef& src, std::size_t& offset, std::size_t bytes);

  // Records one compute dispatch. `params` (uint words) go to binding 0, the bindings
  // to 1..4 (unused ones get the parameter buffer). groups: x, y, z.
  // `wide`: use the 64-bit module (some dtype of the dispatch is 64-bit). `check`:
  // the dispatch may flag out-of-range indices (index family, binding 3 = the error
  // slot given in params word P_ERR); a flagged dispatch poisons what it writes, and
  // what is later computed from that, with IndexError("<check>; got <index>"), which a
  // read of any of them throws (wait_read); other tensors read as usual.
  void dispatch(ShaderFamily family, const std::vector<std::uint32_t>& spec, const std::vector<std::uint32_t>& params,
                const std::vector<Binding>& bindings, std::uint32_t gx, std::uint32_t gy, std::uint32_t gz,
                bool wide = false, const std::string* check = nullptr);
  // Records a plain buffer copy (the benchmark's bandwidth reference).
  void copy(const Buffer& src, const Buffer& dst, std::size_t bytes);
  // Whether the 64-bit shader variants can run (shaderInt64 and shaderFloat64).
  bool wide_supported() const { return wide_ok_; }
  // Keeps a buffer alive until the current batch completes.
  void keep(BufRef b);
  // Submits the recording batch (if any); returns the ticket of the last submission.
  std::uint64_t flush();
  // Waits until every submission up to `ticket` completed; ExecutionError on device loss.
  void wait(std::uint64_t ticket);
  void sync() { wait(flush()); }
  // wait(ticket), then throws the IndexError `src` (may be null) carries, if any (see dispatch).
  void wait_read(std::uint64_t ticket, const Buffer* src);

  // Native f16 arithmetic (ElementwiseF16): whether the device has what it needs, and
  // whether it is used (on unless TENSOR_VK_DISABLE_F16ARITH=1; tests and the
  // benchmark switch it to compare both paths; switching on needs support).
  bool f16_arith_supported() const { return f16_ok_; }
  bool f16_arith() const { return f16_on_.load(std::memory_order_relaxed); }
  void set_f16_arith(bool on) { f16_on_.store(on && f16_ok_, std::memory_order_relaxed); }

  // Cooperative-matrix f16 matmul: the device facts, the gate's decision, and the
  // state after the first-use self-test (ops/matmul.cpp runs it and records the result).
  const CoopFacts& coop_facts() const { return coop_facts_; }
  CoopState coop_state() const;
  std::string coop_reason() const;
  void set_coop_state(CoopState s, std::string reason);
  // Tests and the benchmark: switch a live path off and on again (no-op otherwise).
  void set_coop_enabled(bool on);
  bool coop_enabled() const { return coop_on_.load(std::memory_order_relaxed); }

  // Subgroup arithmetic in the reduction shaders (reduce.comp, rows.comp's softmax):
  // the device facts, the choice made per family (its pipelines' required subgroup
  // size for its workgroup size, or why none), and whether it is used (on unless
  // TENSOR_VK_DISABLE_SUBGROUP=1; tests and the benchmark switch it to compare both
  // paths; switching on needs support).
  const SubgroupFacts& subgroup_facts() const { return sub_facts_; }
  // The choice for Reduce or Rows (other families have no subgroup variant).
  const SubgroupDecision& subgroup_decision(ShaderFamily family) const {
    return family == ShaderFamily::Rows ? sub_rows_ : sub_reduce_;
  }
  bool subgroup_supported() const { return sub_reduce_.size != 0 || sub_rows_.size != 0; }
  bool subgroup_on() const { return sub_on_.load(std::memory_order_relaxed); }
  void set_subgroup(bool on) { sub_on_.store(on && subgroup_supported(), std::memory_order_relaxed); }
  // The subgroup size the pipelines of `family` now run with (0: not a subgroup variant).
  std::uint32_t subgroup_size(ShaderFamily family) const {
    if (!subgroup_on()) return 0;
    return family == ShaderFamily::Reduce ? sub_reduce_.size : family == ShaderFamily::Rows ? sub_rows_.size : 0;
  }

  // Live object counts, to tell this backend's memory from the driver's: command
  // batches (each a command pool and buffer, a descriptor pool, a fence and a
  // parameter arena; bounded by the in-flight limit plus the spares kept),
  // submissions pending, compiled pipelines (one per family, variant and
  // specialisation seen; never evicted) and the staging/parameter pool's bytes.
  std::size_t batch_count() const { return live_batches_.load(std::memory_order_relaxed); }
  std::size_t in_flight_count() {
    std::lock_guard<std::mutex> lock(mu_);
    return in_flight_.size();
  }
  std::size_t pipeline_count() {
    std::lock_guard<std::mutex> lock(pipeline_mu_);
    return pipelines_.size();
  }
  MemoryStats host_memory_stats() { return {host_pool_.in_use(), host_pool_.reserved(), host_pool_.peak()}; }

  // Start-up cost bookkeeping for the pipeline cache.
  bool pipeline_cache_loaded() const { return cache_loaded_; }

  // Device time from timestamp queries: each batch recorded while timing is on writes
  // a timestamp at its start and one at its end, and retiring it adds the difference
  // to device_time_ns() (so after a sync it holds the device time of all the work
  // submitted before, what a profiler that syncs after each op charges to that op).
  // Supported where the queue family has timestamp bits; turned on by the profiler
  // (its DeviceClock, dispatch/backend.hpp) or set_timestamps (no-op without support).
  bool timestamps_supported() const { return ts_bits_ != 0 && props_.limits.timestampPeriod > 0; }
  bool timestamps_on() const { return ts_on_.load(std::memory_order_relaxed); }
  void set_timestamps(bool on) { ts_on_.store(on && timestamps_supported(), std::memory_order_relaxed); }
  std::uint64_t device_time_ns() const { return device_ns_.load(std::memory_order_relaxed); }

  // Whether VK_ERROR_DEVICE_LOST was seen: from then on reads, syncs and new work on
  // this device throw ExecutionError naming the loss; dropping tensors stays safe.
  bool lost() const { return lost_.load(std::memory_order_acquire); }
  // Test hook (a real loss cannot be provoked on lavapipe): waits for submitted work,
  // then puts the context in the state a VK_ERROR_DEVICE_LOST from `where` leaves.
  void simulate_device_loss(const char* where);
  // Test hook: pretend maxComputeSharedMemorySize is `bytes` from now on, to reach
  // the matmul tile-size check (ops/matmul.cpp).
  void set_shared_memory_limit_for_testing(std::uint32_t bytes) { props_.limits.maxComputeSharedMemorySize = bytes; }

 private:
  friend class Pool;
  friend class Buffer;
  void init_device();
  // The pools' limits (`cap`: TENSOR_VK_MEMORY_LIMIT, 0 = none); shrinks `block` to fit.
  void init_memory_limits(int tensor_type, int staging_type, std::uint64_t cap, VkDeviceSize& block);
  // Records a VK_ERROR_DEVICE_LOST seen from `where` (any thread, any lock).
  void note_lost(VkResult r, const char* where);
  // With mu_ held and the device lost: drops the recording batch and releases what
  // the submitted ones hold (a lost device runs nothing more), then throws.
  [[noreturn]] void throw_lost_locked();
  std::string lost_message() const;
  // Descriptor set and pipeline layouts, the shader modules (`coop`: the
  // cooperative-matrix family too) and the pipeline cache from disk (runtime/pipeline.cpp).
  void init_pipelines(bool coop);
  void save_pipeline_cache();
  VkPipeline pipeline(ShaderFamily family, const std::vector<std::uint32_t>& spec, bool wide);
  void collect_errors_locked(Batch& b);
  // Adds a retired timed batch's start-to-end time to device_ns_.
  void collect_time_locked(Batch& b);
  Batch& begin_batch();
  void submit_locked();
  void retire_locked(bool block_until_ticket, std::uint64_t ticket);
  void barrier_locked(Batch& b);
  std::unique_ptr<Batch> make_batch();
  // A retired batch: kept for reuse (at most kMaxSpare) or destroyed.
  void recycle_locked(std::unique_ptr<Batch> b);
  void destroy_batch(Batch& b);
  std::string cache_path() const;

  VkInstance instance_;
  VkPhysicalDevice phys_;
  VkPhysicalDeviceProperties props_{};
  VkPhysicalDeviceMemoryProperties mem_props_{};
  std::uint32_t queue_family_;
  std::uint16_t index_;
  DTypeUsageSet usage_[kDTypeCount]{};
  bool wide_ok_ = false;  // shaderInt64 && shaderFloat64: the WIDE modules exist
  bool f16_ext_ = false;  // VK_KHR_shader_float16_int8 offered (enabled with f16_ok_)
  bool budget_ext_ = false;  // VK_EXT_memory_budget offered (read once when the pool is sized)
  bool mm_ext_ = false;   // VK_KHR_vulkan_memory_model offered (enabled with the coopmat path)
  bool f16_ok_ = false;   // shaderFloat16 && storageBuffer16BitAccess (and not disabled)
  std::atomic<bool> f16_on_{false};
  CoopFacts coop_facts_;
  mutable std::mutex coop_mu_;
  CoopState coop_state_ = CoopState::Unavailable;
  std::string coop_reason_;
  std::atomic<bool> coop_on_{true};
  std::atomic<bool> f16_accel_{false};  // coop_state_ == Live && coop_on_
  SubgroupFacts sub_facts_;
  SubgroupDecision sub_reduce_, sub_rows_;
  std::atomic<bool> sub_on_{false};

  std::once_flag init_once_;
  bool init_failed_ = false;
  std::string init_error_;
  VkDevice device_ = VK_NULL_HANDLE;
  VkQueue queue_ = VK_NULL_HANDLE;
  bool staging_ = false;  // device memory is not host-visible (or forced)
  Pool device_pool_, host_pool_;
  VkDeviceSize align_ = 256;
  VkDeviceSize max_alloc_ = 0;  // maxMemoryAllocationSize

  VkDescriptorSetLayout set_layout_ = VK_NULL_HANDLE;
  VkPipelineLayout pipeline_layout_ = VK_NULL_HANDLE;
  VkPipelineCache cache_ = VK_NULL_HANDLE;
  bool cache_loaded_ = false;
  // Per family: narrow, WIDE and (reduce only) the narrow SUBGROUP variant.
  VkShaderModule modules_[static_cast<int>(ShaderFamily::Count)][3]{};
  std::unordered_map<PipelineKey, VkPipeline, PipelineKeyHash> pipelines_;  // see pipeline()
  std::mutex pipeline_mu_;

  std::mutex mu_;  // recording, submission
  std::unique_ptr<Batch> current_;
  std::deque<std::unique_ptr<Batch>> in_flight_;
  std::vector<std::unique_ptr<Batch>> spare_;
  std::atomic<std::size_t> live_batches_{0};  // created and not destroyed (recording, in flight, spare)
  std::uint64_t next_ticket_ = 1;
  std::uint64_t completed_ticket_ = 0;
  std::atomic<bool> lost_{false};
  std::uint32_t ts_bits_ = 0;  // the queue family's timestampValidBits
  std::atomic<bool> ts_on_{false};
  std::atomic<std::uint64_t> device_ns_{0};
  mutable std::mutex lost_mu_;
  std::string lost_where_;     // the call that returned VK_ERROR_DEVICE_LOST first
  bool any_poison_ = false;    // a flagged index dispatch retired (then every batch's steps are walked)
};

// The context of vulkan device `index` (null when the index is unknown); the list is
// filled once by discover_devices (runtime/instance.cpp).
Context* context(std::uint16_t index);
std::size_t context_count();

}  // namespace tensor::vulkan
