// Per-physical-device state of the Vulkan backend: the runtime layer, beneath the op
// families (ops/kernel.hpp) and the registration (vk_backend.cpp). Context is composed
// of one part per concern, each declared in its own header:
//   runtime/device_facts.hpp   what the device is and offers; the optional paths' switches
//   runtime/memory.hpp         Block, Buffer, Pool: the pooled buffer suballocator
//   runtime/pipeline_cache.hpp shader families, pipeline keys, the pipeline cache
//   runtime/stream.hpp         Binding, Batch: command recording and submission
// and its members are implemented one concern per file:
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

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backends/vulkan/runtime/device_facts.hpp"
#include "backends/vulkan/runtime/features.hpp"
#include "backends/vulkan/runtime/loader.hpp"
#include "backends/vulkan/runtime/memory.hpp"
#include "backends/vulkan/runtime/pipeline_cache.hpp"
#include "backends/vulkan/runtime/stream.hpp"
#include "dispatch/primitive.hpp"
#include "tensor/device.hpp"
#include "tensor/dtype.hpp"

namespace tensor::vulkan {

class Context {
 public:
  Context(VkInstance instance, VkPhysicalDevice phys, std::uint32_t queue_family, std::uint16_t index);
  ~Context();

  // Device-level facts (valid before init()).
  std::string name() const { return dev_.props.deviceName; }
  // F16 adds Accelerated while the cooperative-matrix matmul is live (SPEC §3).
  DTypeUsageSet dtype_usage(DType t) const {
    const DTypeUsageSet u = dev_.usage[static_cast<int>(t)];
    if (t == DType::F16 && u.contains(DTypeUsage::Arithmetic) && switches_.f16_accel.load(std::memory_order_relaxed))
      return u | DTypeUsage::Accelerated;
    return u;
  }
  const VkPhysicalDeviceLimits& limits() const { return dev_.props.limits; }
  // Largest range one storage-buffer binding may cover, and the alignment of
  // binding offsets (valid after ensure_init()).
  VkDeviceSize max_binding() const { return dev_.props.limits.maxStorageBufferRange; }
  // A software device (lavapipe/llvmpipe): its compiler ends any one invocation's loops
  // after 65535 iterations in all, silently (see kLoopSafe in ops/kernel.hpp).
  bool software() const { return dev_.props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU; }
  VkDeviceSize binding_align() const { return mem_.align; }
  DeviceId id() const { return {kVulkanDeviceType, dev_.index}; }

  // Creates the logical device, queue, pools and pipeline cache on first use.
  void ensure_init();

  // Memory. Throws ExecutionError when the request cannot be served.
  BufRef allocate(std::size_t bytes);
  MemoryStats memory_stats();
  void memory_cleanup();
  // Upper bound on the bytes the tensor pool reserves and where it comes from (the
  // heap's size or VK_EXT_memory_budget budget, or TENSOR_VK_MEMORY_LIMIT); valid
  // after ensure_init().
  std::uint64_t memory_limit() const { return mem_.device_pool.limit(); }
  std::string memory_limit_source() const { return mem_.device_pool.limit_source(); }
  // Gives memory back to the driver before an allocation is refused: with `wait`,
  // submits the recording batch and waits for every submission (the buffers they
  // hold return to the pools); then frees the pools' empty blocks. Without `wait`
  // (the caller holds stream_.mu) only the latter.
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
  // The same from byte `src_off` of src to byte `dst_off` of dst (assign of dense tensors:
  // a transfer, a memcpy on a software device, not a shader pass).
  void copy(const Buffer& src, std::size_t src_off, const Buffer& dst, std::size_t dst_off, std::size_t bytes);
  // Whether the 64-bit shader variants can run (shaderInt64 and shaderFloat64).
  bool wide_supported() const { return dev_.wide_ok; }
  // Keeps a buffer alive until the current batch completes.
  void keep(BufRef b);
  // Submits the recording batch (if any); returns the ticket of the last submission.
  std::uint64_t flush();
  // Waits until every submission up to `ticket` completed; ExecutionError on device loss.
  void wait(std::uint64_t ticket);
  void sync() { wait(flush()); }
  // wait(ticket), then throws the IndexError `src` (may be null) carries, if any (see dispatch).
  void wait_read(std::uint64_t ticket, const Buffer* src);

  // Graph capture and native replay (runtime/graph.cpp). While this thread records, every
  // dispatch, copy and upload it makes is also noted (with its buffers, held) in a
  // GraphRecording; graph_build turns one into a Batch whose command buffer is recorded
  // once (no ONE_TIME_SUBMIT) with the eager path's barriers; graph_run submits it once,
  // after the recording batch (input refreshes), waits for it and carries index errors as
  // a retired batch would; graph_free destroys it.
  void graph_record_begin();
  // The recording this thread made (null when it made none); recording stops.
  std::unique_ptr<GraphRecording> graph_record_end();
  std::unique_ptr<Batch> graph_build(GraphRecording& rec);
  void graph_run(Batch& g);
  void graph_free(std::unique_ptr<Batch> g);
  // vkQueueSubmit calls so far (eager batches and graph replays).
  std::uint64_t submit_count() const { return stream_.submits.load(std::memory_order_relaxed); }
  // Elementwise fusion in graph_build: runs of two or more dense f32 elementwise dispatches
  // over at most graph_fusion_max() elements become one dispatch of the PROGRAM variant of
  // elementwise.comp (runtime/graph_fusion.hpp): kFuseMaxSoftware on a software device,
  // kFuseMaxHardware otherwise; 0 turns it off (tests set it). TENSOR_VK_GRAPH_FUSION_MAX=N
  // when a graph is captured replaces it for that graph (0: the benchmark's reference).
  static constexpr std::uint32_t kFuseMaxSoftware = 128;
  static constexpr std::uint32_t kFuseMaxHardware = 4096;
  std::uint32_t graph_fusion_max() const { return switches_.fuse_max.load(std::memory_order_relaxed); }
  void set_graph_fusion_max(std::uint32_t elements) { switches_.fuse_max.store(elements, std::memory_order_relaxed); }
  // What the last graph_build recorded: its dispatches, and of them the fused runs and the
  // captured dispatches those hold.
  struct GraphBuildStats {
    std::uint32_t dispatches = 0, fused_runs = 0, fused_dispatches = 0;
  };
  GraphBuildStats last_graph_build() const {
    return {graph_stats_[0].load(std::memory_order_relaxed), graph_stats_[1].load(std::memory_order_relaxed),
            graph_stats_[2].load(std::memory_order_relaxed)};
  }

  // Native f16 arithmetic (ElementwiseF16): whether the device has what it needs, and
  // whether it is used (on unless TENSOR_VK_DISABLE_F16ARITH=1; tests and the
  // benchmark switch it to compare both paths; switching on needs support).
  bool f16_arith_supported() const { return dev_.f16_ok; }
  bool f16_arith() const { return switches_.f16_on.load(std::memory_order_relaxed); }
  void set_f16_arith(bool on) { switches_.f16_on.store(on && dev_.f16_ok, std::memory_order_relaxed); }

  // Cooperative-matrix f16 matmul: the device facts, the gate's decision, and the
  // state after the first-use self-test (ops/matmul.cpp runs it and records the result).
  const CoopFacts& coop_facts() const { return dev_.coop; }
  CoopState coop_state() const;
  std::string coop_reason() const;
  void set_coop_state(CoopState s, std::string reason);
  // Tests and the benchmark: switch a live path off and on again (no-op otherwise).
  void set_coop_enabled(bool on);
  bool coop_enabled() const { return switches_.coop_on.load(std::memory_order_relaxed); }

  // Subgroup arithmetic in the reduction shaders (reduce.comp, rows.comp's softmax):
  // the device facts, the choice made per family (its pipelines' required subgroup
  // size for its workgroup size, or why none), and whether it is used (on unless
  // TENSOR_VK_DISABLE_SUBGROUP=1; tests and the benchmark switch it to compare both
  // paths; switching on needs support).
  const SubgroupFacts& subgroup_facts() const { return dev_.sub; }
  // The choice for Reduce or Rows (other families have no subgroup variant).
  const SubgroupDecision& subgroup_decision(ShaderFamily family) const {
    return family == ShaderFamily::Rows ? dev_.sub_rows : dev_.sub_reduce;
  }
  bool subgroup_supported() const { return dev_.sub_reduce.size != 0 || dev_.sub_rows.size != 0; }
  bool subgroup_on() const { return switches_.sub_on.load(std::memory_order_relaxed); }
  void set_subgroup(bool on) { switches_.sub_on.store(on && subgroup_supported(), std::memory_order_relaxed); }
  // The subgroup size the pipelines of `family` now run with (0: not a subgroup variant).
  std::uint32_t subgroup_size(ShaderFamily family) const {
    if (!subgroup_on()) return 0;
    return family == ShaderFamily::Reduce ? dev_.sub_reduce.size : family == ShaderFamily::Rows ? dev_.sub_rows.size : 0;
  }

  // Live object counts, to tell this backend's memory from the driver's: command
  // batches (each a command pool and buffer, a descriptor pool, a fence and a
  // parameter arena; bounded by the in-flight limit plus the spares kept),
  // submissions pending, compiled pipelines (one per family, variant and
  // specialisation seen; never evicted) and the staging/parameter pool's bytes.
  std::size_t batch_count() const { return stream_.live_batches.load(std::memory_order_relaxed); }
  std::size_t in_flight_count() {
    std::lock_guard<std::mutex> lock(stream_.mu);
    return stream_.in_flight.size();
  }
  std::size_t pipeline_count() {
    std::lock_guard<std::mutex> lock(pipes_.mu);
    return pipes_.pipelines.size();
  }
  MemoryStats host_memory_stats() { return {mem_.host_pool.in_use(), mem_.host_pool.reserved(), mem_.host_pool.peak()}; }

  // Start-up cost bookkeeping for the pipeline cache.
  bool pipeline_cache_loaded() const { return pipes_.loaded; }

  // Device time from timestamp queries: each batch recorded while timing is on writes
  // a timestamp at its start and one at its end, and retiring it adds the difference
  // to device_time_ns() (so after a sync it holds the device time of all the work
  // submitted before, what a profiler that syncs after each op charges to that op).
  // Supported where the queue family has timestamp bits; turned on by the profiler
  // (its DeviceClock, dispatch/backend.hpp) or set_timestamps (no-op without support).
  bool timestamps_supported() const { return dev_.ts_bits != 0 && dev_.props.limits.timestampPeriod > 0; }
  bool timestamps_on() const { return stream_.ts_on.load(std::memory_order_relaxed); }
  void set_timestamps(bool on) { stream_.ts_on.store(on && timestamps_supported(), std::memory_order_relaxed); }
  std::uint64_t device_time_ns() const { return stream_.device_ns.load(std::memory_order_relaxed); }

  // Whether VK_ERROR_DEVICE_LOST was seen: from then on reads, syncs and new work on
  // this device throw ExecutionError naming the loss; dropping tensors stays safe.
  bool lost() const { return lost_.load(std::memory_order_acquire); }
  // Test hook (a real loss cannot be provoked on lavapipe): waits for submitted work,
  // then puts the context in the state a VK_ERROR_DEVICE_LOST from `where` leaves.
  void simulate_device_loss(const char* where);
  // Test hook: pretend maxComputeSharedMemorySize is `bytes` from now on, to reach
  // the matmul tile-size check (ops/matmul.cpp).
  void set_shared_memory_limit_for_testing(std::uint32_t bytes) { dev_.props.limits.maxComputeSharedMemorySize = bytes; }

 private:
  friend class Pool;
  friend class Buffer;
  void init_device();
  // The pools' limits (`cap`: TENSOR_VK_MEMORY_LIMIT, 0 = none); shrinks `block` to fit.
  void init_memory_limits(int tensor_type, int staging_type, std::uint64_t cap, VkDeviceSize& block);
  // Records a VK_ERROR_DEVICE_LOST seen from `where` (any thread, any lock).
  void note_lost(VkResult r, const char* where);
  // With stream_.mu held and the device lost: drops the recording batch and releases what
  // the submitted ones hold (a lost device runs nothing more), then throws.
  [[noreturn]] void throw_lost_locked();
  std::string lost_message() const;
  // Descriptor set and pipeline layouts, the shader modules (`coop`: the
  // cooperative-matrix family too) and the pipeline cache from disk (runtime/pipeline.cpp).
  void init_pipelines(bool coop);
  void save_pipeline_cache();
  VkPipeline pipeline(ShaderFamily family, const std::vector<std::uint32_t>& spec, bool wide);
  void collect_errors_locked(Batch& b);
  // With stream_.mu held: whether this thread's work is being recorded for a graph.
  bool recording_here_locked() const;
  void note_dispatch_locked(ShaderFamily family, const std::vector<std::uint32_t>& spec, bool wide, VkPipeline pipe,
                            const std::vector<std::uint32_t>& params, const std::vector<Binding>& bindings,
                            const VkDeviceSize* off, const VkDeviceSize* len, std::uint32_t gx, std::uint32_t gy,
                            std::uint32_t gz, const std::string* check);
  void note_copy_locked(BufRef src, VkDeviceSize src_off, BufRef dst, VkDeviceSize dst_off, VkDeviceSize bytes);
  // Adds a retired timed batch's start-to-end time to stream_.device_ns.
  void collect_time_locked(Batch& b);
  Batch& begin_batch();
  void submit_locked();
  void retire_locked(bool block_until_ticket, std::uint64_t ticket);
  void barrier_locked(Batch& b);
  std::unique_ptr<Batch> make_batch();
  // b's command pool (flags), its one primary command buffer, fence and a descriptor pool of
  // `sets` storage-buffer sets: what an eager batch and a graph's program both start from.
  void create_batch_objects(Batch& b, VkCommandPoolCreateFlags flags, std::uint32_t sets);
  // A retired batch: kept for reuse (at most kMaxSpare) or destroyed.
  void recycle_locked(std::unique_ptr<Batch> b);
  void destroy_batch(Batch& b);
  std::string cache_path() const;

  DeviceFacts dev_;
  FeatureSwitches switches_;

  std::once_flag init_once_;
  bool init_failed_ = false;
  std::string init_error_;
  Memory mem_;
  PipelineCache pipes_;
  Stream stream_;

  std::atomic<bool> lost_{false};
  std::atomic<std::uint32_t> graph_stats_[3]{};  // last_graph_build
  mutable std::mutex lost_mu_;
  std::string lost_where_;     // the call that returned VK_ERROR_DEVICE_LOST first
};

// The context of vulkan device `index` (null when the index is unknown); the list is
// filled once by discover_devices (runtime/instance.cpp).
Context* context(std::uint16_t index);
std::size_t context_count();

}  // namespace tensor::vulkan
