// Vulkan device state: instance/device setup, pooled memory, command batching and
// pipelines (see vk_context.hpp).

// Vulkan structs are initialised as `VkFoo info{VK_STRUCTURE_TYPE_FOO}` with the
// remaining members zeroed by the language; that is the intended idiom here.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#include "backends/vulkan/vk_context.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "backends/vulkan/shaders/vk_codes.h"
#include "dispatch/validate.hpp"
#include "tensor/error.hpp"

namespace tensor::vulkan {
namespace {

alignas(4) const std::uint32_t kElementwiseSpv[] =
#include "elementwise.comp.spv.inc"
    ;
alignas(4) const std::uint32_t kElementwiseWideSpv[] =
#include "elementwise.comp.wide.spv.inc"
    ;
alignas(4) const std::uint32_t kReduceSpv[] =
#include "reduce.comp.spv.inc"
    ;
alignas(4) const std::uint32_t kReduceWideSpv[] =
#include "reduce.comp.wide.spv.inc"
    ;
alignas(4) const std::uint32_t kReduceSubgroupSpv[] =
#include "reduce.comp.subgroup.spv.inc"
    ;
alignas(4) const std::uint32_t kScanSpv[] =
#include "scan.comp.spv.inc"
    ;
alignas(4) const std::uint32_t kScanWideSpv[] =
#include "scan.comp.wide.spv.inc"
    ;
alignas(4) const std::uint32_t kMatmulSpv[] =
#include "matmul.comp.spv.inc"
    ;
alignas(4) const std::uint32_t kMatmulWideSpv[] =
#include "matmul.comp.wide.spv.inc"
    ;
alignas(4) const std::uint32_t kIndexSpv[] =
#include "index.comp.spv.inc"
    ;
alignas(4) const std::uint32_t kIndexWideSpv[] =
#include "index.comp.wide.spv.inc"
    ;
alignas(4) const std::uint32_t kRowsSpv[] =
#include "rows.comp.spv.inc"
    ;
alignas(4) const std::uint32_t kRowsWideSpv[] =
#include "rows.comp.wide.spv.inc"
    ;
alignas(4) const std::uint32_t kRowsSubgroupSpv[] =
#include "rows.comp.subgroup.spv.inc"
    ;
alignas(4) const std::uint32_t kElementwiseF16Spv[] =
#include "ew_f16.comp.spv.inc"
    ;
alignas(4) const std::uint32_t kMatmulCoopSpv[] =
#include "matmul_coop.comp.spv.inc"
    ;

struct Spirv {
  const std::uint32_t* code; std::size_t bytes; const std::uint32_t* wide; std::size_t wide_bytes; const char* name;
  const std::uint32_t* subgroup = nullptr; std::size_t subgroup_bytes = 0;
};
const Spirv kShaders[] = {
    {kElementwiseSpv, sizeof(kElementwiseSpv), kElementwiseWideSpv, sizeof(kElementwiseWideSpv), "elementwise"},
    {kReduceSpv, sizeof(kReduceSpv), kReduceWideSpv, sizeof(kReduceWideSpv), "reduce", kReduceSubgroupSpv,
     sizeof(kReduceSubgroupSpv)},
    {kScanSpv, sizeof(kScanSpv), kScanWideSpv, sizeof(kScanWideSpv), "scan"},
    {kMatmulSpv, sizeof(kMatmulSpv), kMatmulWideSpv, sizeof(kMatmulWideSpv), "matmul"},
    {kIndexSpv, sizeof(kIndexSpv), kIndexWideSpv, sizeof(kIndexWideSpv), "index"},
    {kRowsSpv, sizeof(kRowsSpv), kRowsWideSpv, sizeof(kRowsWideSpv), "rows", kRowsSubgroupSpv, sizeof(kRowsSubgroupSpv)},
    {kElementwiseF16Spv, sizeof(kElementwiseF16Spv), nullptr, 0, "elementwise_f16"},
    {kMatmulCoopSpv, sizeof(kMatmulCoopSpv), nullptr, 0, "matmul_coop"},
};
static_assert(std::size(kShaders) == static_cast<std::size_t>(ShaderFamily::Count));

constexpr std::uint32_t kMaxDispatchesPerBatch = 64;
constexpr VkDeviceSize kParamSlotBytes = 512;  // P_WORDS * 4 rounded up
constexpr VkDeviceSize kParamArenaBytes = kMaxDispatchesPerBatch * kParamSlotBytes;  // one slot per dispatch
constexpr std::uint32_t kBindings = 5;
constexpr std::uint32_t kReduceWorkgroup = 64;  // reduce.comp's local_size_x
constexpr std::uint32_t kRowsWorkgroup = 256;   // rows.comp's

bool overlaps(const Batch::Region& r, VkBuffer buf, VkDeviceSize off, VkDeviceSize size) {
  return r.buf == buf && r.off < off + size && off < r.off + r.size;
}

}  // namespace

const char* vk_result_name(VkResult r) {
  switch (r) {
#define TENSOR_VK_CASE(x) case x: return #x;
    TENSOR_VK_CASE(VK_SUCCESS) TENSOR_VK_CASE(VK_NOT_READY) TENSOR_VK_CASE(VK_TIMEOUT)
    TENSOR_VK_CASE(VK_INCOMPLETE) TENSOR_VK_CASE(VK_ERROR_OUT_OF_HOST_MEMORY)
    TENSOR_VK_CASE(VK_ERROR_OUT_OF_DEVICE_MEMORY) TENSOR_VK_CASE(VK_ERROR_INITIALIZATION_FAILED)
    TENSOR_VK_CASE(VK_ERROR_DEVICE_LOST) TENSOR_VK_CASE(VK_ERROR_MEMORY_MAP_FAILED)
    TENSOR_VK_CASE(VK_ERROR_LAYER_NOT_PRESENT) TENSOR_VK_CASE(VK_ERROR_EXTENSION_NOT_PRESENT)
    TENSOR_VK_CASE(VK_ERROR_FEATURE_NOT_PRESENT) TENSOR_VK_CASE(VK_ERROR_INCOMPATIBLE_DRIVER)
    TENSOR_VK_CASE(VK_ERROR_TOO_MANY_OBJECTS) TENSOR_VK_CASE(VK_ERROR_FORMAT_NOT_SUPPORTED)
    TENSOR_VK_CASE(VK_ERROR_FRAGMENTED_POOL) TENSOR_VK_CASE(VK_ERROR_OUT_OF_POOL_MEMORY)
    TENSOR_VK_CASE(VK_ERROR_INVALID_SHADER_NV) TENSOR_VK_CASE(VK_ERROR_UNKNOWN)
#undef TENSOR_VK_CASE
    default: return "VkResult(?)";
  }
}

void check_vk(VkResult r, const char* what) {
  if (r != VK_SUCCESS)
    throw ExecutionError(fmt::format("[{}] vulkan: {} failed; expected VK_SUCCESS; got {} ({})", dispatch::current_op_name(),
                                     what, vk_result_name(r), static_cast<int>(r)));
}

// ---- Buffer / Pool ---------------------------------------------------------------

void Buffer::release_ref() const {
  if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    Pool* pool = block_->host ? &ctx_->host_pool_ : &ctx_->device_pool_;
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
  VkResult r = vkCreateBuffer(ctx_->device_, &bi, nullptr, &b->buffer);
  if (r == VK_SUCCESS) {
    call = "vkAllocateMemory";
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(ctx_->device_, b->buffer, &req);
    VkMemoryAllocateInfo ai{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
    ai.allocationSize = req.size;
    ai.memoryTypeIndex = type_;
    r = vkAllocateMemory(ctx_->device_, &ai, nullptr, &b->memory);
    if (r != VK_SUCCESS) b->memory = VK_NULL_HANDLE;
  }
  if (r == VK_SUCCESS) {
    call = "vkBindBufferMemory";
    r = vkBindBufferMemory(ctx_->device_, b->buffer, b->memory, 0);
  }
  if (r == VK_SUCCESS && map_) {
    call = "vkMapMemory";
    r = vkMapMemory(ctx_->device_, b->memory, 0, VK_WHOLE_SIZE, 0, reinterpret_cast<void**>(&b->mapped));
  }
  if (r != VK_SUCCESS) {
    if (b->buffer) vkDestroyBuffer(ctx_->device_, b->buffer, nullptr);
    if (b->memory) vkFreeMemory(ctx_->device_, b->memory, nullptr);
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
  if (b->mapped) vkUnmapMemory(ctx_->device_, b->memory);
  vkDestroyBuffer(ctx_->device_, b->buffer, nullptr);
  vkFreeMemory(ctx_->device_, b->memory, nullptr);
  reserved_ -= b->size;
  blocks_.erase(std::find_if(blocks_.begin(), blocks_.end(), [&](const auto& p) { return p.get() == b; }));
}

BufRef Pool::allocate(VkDeviceSize bytes, bool may_wait) {
  const VkDeviceSize align = ctx_->align_;
  const VkDeviceSize need = (std::max<VkDeviceSize>(bytes, 4) + align - 1) / align * align;
  // Beyond maxStorageBufferRange a tensor still fits one allocation; kernels that
  // cannot bind it in pieces refuse it at dispatch time (Context::dispatch).
  if (need > ctx_->max_alloc_)
    throw ExecutionError(fmt::format("[{}] tensor too large for one allocation on vulkan:{}; expected at most {} bytes "
                                     "(maxMemoryAllocationSize); got {} bytes",
                                     dispatch::current_op_name(), ctx_->index_, ctx_->max_alloc_, bytes));
  std::string why;
  if (BufRef b = try_allocate(need, bytes, why)) return b;
  // Give back what finished or pending work holds and cached empty blocks, then retry.
  ctx_->reclaim_memory(may_wait);
  if (BufRef b = try_allocate(need, bytes, why)) return b;
  throw ExecutionError(fmt::format("[{}] out of {} memory on vulkan:{}; expected room for {} bytes (a request of {}) after "
                                   "freeing cached blocks{}; got {}",
                                   dispatch::current_op_name(), host_ ? "host-visible staging" : "device", ctx_->index_, need,
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

// ---- Context ----------------------------------------------------------------------

Context::Context(VkInstance instance, VkPhysicalDevice phys, std::uint32_t queue_family, std::uint16_t index)
    : instance_(instance), phys_(phys), queue_family_(queue_family), index_(index) {
  vkGetPhysicalDeviceProperties(phys_, &props_);
  vkGetPhysicalDeviceMemoryProperties(phys_, &mem_props_);
  // The shaders keep every element in 32-bit words (8/16-bit ones packed and stored
  // with atomics) and compute in 32 bits, so these need no optional feature; f16 and
  // bf16 are 16-bit storage computed in f32 (exact conversions in the shader), as on
  // the CPU. The 64-bit dtypes run in the WIDE shader variants, which need
  // shaderInt64 and shaderFloat64 (both, since one module serves f64 and i64/u64).
  // Optional fast paths (below): f16 elementwise kernels in native f16 on 16-bit
  // storage, and the cooperative-matrix f16 matmul (F16 becomes Accelerated only
  // once that path passed its self-test).
  VkPhysicalDeviceFeatures f{};
  vkGetPhysicalDeviceFeatures(phys_, &f);
  wide_ok_ = f.shaderInt64 && f.shaderFloat64;
  const DTypeUsageSet g = DTypeUsageSet::general();
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::I32, DType::I16, DType::I8, DType::U32, DType::U16, DType::U8,
                  DType::Bool, DType::BoolU8, DType::BoolU32})
    usage_[static_cast<int>(t)] = g;
  if (wide_ok_)
    for (DType t : {DType::F64, DType::I64, DType::U64}) usage_[static_cast<int>(t)] = g;

  // Optional paths: native f16 arithmetic and the cooperative-matrix matmul.
  std::uint32_t ne = 0;
  std::vector<VkExtensionProperties> exts;
  if (vkEnumerateDeviceExtensionProperties(phys_, nullptr, &ne, nullptr) == VK_SUCCESS) {
    exts.resize(ne);
    if (vkEnumerateDeviceExtensionProperties(phys_, nullptr, &ne, exts.data()) != VK_SUCCESS) ne = 0;
    exts.resize(ne);
  }
  auto has_ext = [&](const char* e) {
    for (const auto& x : exts)
      if (std::strcmp(x.extensionName, e) == 0) return true;
    return false;
  };
  f16_ext_ = has_ext(VK_KHR_SHADER_FLOAT16_INT8_EXTENSION_NAME);
  coop_facts_.extension = has_ext(VK_NV_COOPERATIVE_MATRIX_EXTENSION_NAME);
  VkPhysicalDevice16BitStorageFeatures st16{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES};
  VkPhysicalDeviceShaderFloat16Int8FeaturesKHR f16{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES_KHR};
  VkPhysicalDeviceCooperativeMatrixFeaturesNV coop{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV};
  VkPhysicalDeviceVulkanMemoryModelFeaturesKHR vmm{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_MEMORY_MODEL_FEATURES_KHR};
  mm_ext_ = has_ext(VK_KHR_VULKAN_MEMORY_MODEL_EXTENSION_NAME);
  budget_ext_ = has_ext(VK_EXT_MEMORY_BUDGET_EXTENSION_NAME);
  VkPhysicalDeviceFeatures2 f2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  f2.pNext = &st16;
  void** tail = &st16.pNext;
  if (f16_ext_) { *tail = &f16; tail = &f16.pNext; }
  if (coop_facts_.extension) { *tail = &coop; tail = &coop.pNext; }
  if (mm_ext_) { *tail = &vmm; tail = &vmm.pNext; }
  vkGetPhysicalDeviceFeatures2(phys_, &f2);
  coop_facts_.memory_model = mm_ext_ && vmm.vulkanMemoryModel;
  const bool f16_storage = f16_ext_ && f16.shaderFloat16 && st16.storageBuffer16BitAccess;
  f16_ok_ = f16_storage && !env_flag("TENSOR_VK_DISABLE_F16ARITH");
  f16_on_.store(f16_ok_);
  VkPhysicalDeviceSubgroupProperties sub{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
  VkPhysicalDeviceSubgroupSizeControlPropertiesEXT ssc{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_PROPERTIES_EXT};
  VkPhysicalDeviceProperties2 p2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
  p2.pNext = &sub;
  sub_facts_.size_control_ext = has_ext(VK_EXT_SUBGROUP_SIZE_CONTROL_EXTENSION_NAME);
  if (sub_facts_.size_control_ext) sub.pNext = &ssc;
  vkGetPhysicalDeviceProperties2(phys_, &p2);
  sub_facts_.size = sub.subgroupSize;
  sub_facts_.compute = (sub.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) != 0;
  sub_facts_.arithmetic = (sub.supportedOperations & VK_SUBGROUP_FEATURE_ARITHMETIC_BIT) != 0;
  if (sub_facts_.size_control_ext) {
    VkPhysicalDeviceSubgroupSizeControlFeaturesEXT sf{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES_EXT};
    VkPhysicalDeviceFeatures2 sf2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
    sf2.pNext = &sf;
    vkGetPhysicalDeviceFeatures2(phys_, &sf2);
    sub_facts_.size_control = sf.subgroupSizeControl;
    sub_facts_.full_subgroups = sf.computeFullSubgroups;
    sub_facts_.min_size = ssc.minSubgroupSize;
    sub_facts_.max_size = ssc.maxSubgroupSize;
    sub_facts_.required_compute = (ssc.requiredSubgroupSizeStages & VK_SHADER_STAGE_COMPUTE_BIT) != 0;
    sub_facts_.max_workgroup_subgroups = ssc.maxComputeWorkgroupSubgroups;
  }
  sub_facts_.disabled = env_flag("TENSOR_VK_DISABLE_SUBGROUP");
  sub_reduce_ = decide_subgroup(sub_facts_, kReduceWorkgroup);
  sub_rows_ = decide_subgroup(sub_facts_, kRowsWorkgroup);
  sub_on_.store(subgroup_supported());
  coop_facts_.vendor_id = props_.vendorID;
  coop_facts_.feature = coop_facts_.extension && coop.cooperativeMatrix;
  coop_facts_.f16_storage = f16_storage;
  coop_facts_.subgroup_size = sub.subgroupSize;
  coop_facts_.disabled = env_flag("TENSOR_VK_DISABLE_COOPMAT");
  if (coop_facts_.feature) {
    auto query = reinterpret_cast<PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesNV>(
        vkGetInstanceProcAddr(instance_, "vkGetPhysicalDeviceCooperativeMatrixPropertiesNV"));
    std::uint32_t n = 0;
    if (query && query(phys_, &n, nullptr) == VK_SUCCESS && n) {
      std::vector<VkCooperativeMatrixPropertiesNV> props(n, {VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_NV});
      if (query(phys_, &n, props.data()) == VK_SUCCESS)
        for (std::uint32_t i = 0; i < n; ++i)
          coop_facts_.shapes.push_back({props[i].MSize, props[i].NSize, props[i].KSize, static_cast<int>(props[i].AType),
                                        static_cast<int>(props[i].BType), static_cast<int>(props[i].CType),
                                        static_cast<int>(props[i].DType), static_cast<int>(props[i].scope)});
    }
  }
  const CoopDecision cd = decide_coopmat(coop_facts_);
  coop_state_ = cd.usable ? CoopState::Untested : CoopState::Unavailable;
  coop_reason_ = cd.reason;
  // F16 is Accelerated only while the cooperative-matrix path is live (set_coop_state).
  if (const char* mask = std::getenv("TENSOR_VK_DTYPE_MASK")) {
    const unsigned long bits = std::strtoul(mask, nullptr, 16);
    for (int i = 0; i < kDTypeCount; ++i)
      if (bits & (1ul << i)) usage_[i] = DTypeUsageSet{};
  }
}

Context::~Context() = default;  // contexts live for the whole process

void Context::ensure_init() {
  std::call_once(init_once_, [&] {
    try {
      init_device();
    } catch (const std::exception& e) {
      init_failed_ = true;
      init_error_ = e.what();
    }
  });
  if (init_failed_)
    throw ExecutionError(fmt::format("[{}] vulkan device {} ({}) could not be initialised; expected a working device; got: {}",
                                     dispatch::current_op_name(), index_, name(), init_error_));
}

std::string Context::cache_path() const {
  std::string dir;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) dir = std::string(x) + "/libtensor";
  else if (const char* h = std::getenv("HOME"); h && *h) dir = std::string(h) + "/.cache/libtensor";
  else return {};
  std::string uuid;
  for (std::uint8_t b : props_.pipelineCacheUUID) uuid += fmt::format("{:02x}", b);
  return fmt::format("{}/vk-pipelines-{}-{:x}-{:x}-{:x}.bin", dir, uuid, props_.vendorID, props_.deviceID,
                     props_.driverVersion);
}

void Context::init_device() {
  // A bad TENSOR_VK_MEMORY_LIMIT fails device init (before anything is created).
  const char* cap_env = std::getenv("TENSOR_VK_MEMORY_LIMIT");
  const std::uint64_t cap = cap_env && *cap_env ? parse_memory_limit(cap_env) : 0;
  const float prio = 1.0f;
  VkDeviceQueueCreateInfo qi{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
  qi.queueFamilyIndex = queue_family_;
  qi.queueCount = 1;
  qi.pQueuePriorities = &prio;
  VkPhysicalDeviceFeatures2 enabled{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  enabled.features.shaderInt64 = wide_ok_ ? VK_TRUE : VK_FALSE;
  enabled.features.shaderFloat64 = wide_ok_ ? VK_TRUE : VK_FALSE;
  // 16-bit storage and f16 arithmetic serve both optional families.
  const bool coop = coop_state() != CoopState::Unavailable;
  const bool want16 = f16_ok_ || coop;
  VkPhysicalDevice16BitStorageFeatures st16{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES};
  VkPhysicalDeviceShaderFloat16Int8FeaturesKHR f16{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES_KHR};
  VkPhysicalDeviceCooperativeMatrixFeaturesNV cm{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV};
  VkPhysicalDeviceVulkanMemoryModelFeaturesKHR vmm{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_MEMORY_MODEL_FEATURES_KHR};
  std::vector<const char*> dev_exts;
  if (want16) {
    st16.storageBuffer16BitAccess = VK_TRUE;
    f16.shaderFloat16 = VK_TRUE;
    enabled.pNext = &st16;
    st16.pNext = &f16;
    dev_exts.push_back(VK_KHR_SHADER_FLOAT16_INT8_EXTENSION_NAME);
    if (coop) {
      cm.cooperativeMatrix = VK_TRUE;
      f16.pNext = &cm;
      vmm.vulkanMemoryModel = VK_TRUE;
      cm.pNext = &vmm;
      dev_exts.push_back(VK_NV_COOPERATIVE_MATRIX_EXTENSION_NAME);
      dev_exts.push_back(VK_KHR_VULKAN_MEMORY_MODEL_EXTENSION_NAME);
    }
  }
  // Subgroup size control for the reduce family's SUBGROUP pipelines.
  VkPhysicalDeviceSubgroupSizeControlFeaturesEXT ssc{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES_EXT};
  if (subgroup_supported()) {
    ssc.subgroupSizeControl = VK_TRUE;
    ssc.computeFullSubgroups = VK_TRUE;
    ssc.pNext = enabled.pNext;
    enabled.pNext = &ssc;
    dev_exts.push_back(VK_EXT_SUBGROUP_SIZE_CONTROL_EXTENSION_NAME);
  }
  VkDeviceCreateInfo di{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
  di.pNext = &enabled;
  di.queueCreateInfoCount = 1;
  di.pQueueCreateInfos = &qi;
  di.enabledExtensionCount = static_cast<std::uint32_t>(dev_exts.size());
  di.ppEnabledExtensionNames = dev_exts.data();
  check_vk(vkCreateDevice(phys_, &di, nullptr, &device_), "vkCreateDevice");
  vkGetDeviceQueue(device_, queue_family_, 0, &queue_);

  align_ = std::max<VkDeviceSize>(256, props_.limits.minStorageBufferOffsetAlignment);

  // Memory types: host-visible device memory used directly (UMA, lavapipe), else
  // device-local memory with a host-visible staging pool.
  VkBufferCreateInfo bi{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  bi.size = 4096;
  bi.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  VkBuffer probe;
  check_vk(vkCreateBuffer(device_, &bi, nullptr, &probe), "vkCreateBuffer");
  VkMemoryRequirements req;
  vkGetBufferMemoryRequirements(device_, probe, &req);
  vkDestroyBuffer(device_, probe, nullptr);
  auto find = [&](VkMemoryPropertyFlags want) -> int {
    for (std::uint32_t i = 0; i < mem_props_.memoryTypeCount; ++i)
      if ((req.memoryTypeBits & (1u << i)) && (mem_props_.memoryTypes[i].propertyFlags & want) == want) return static_cast<int>(i);
    return -1;
  };
  const VkMemoryPropertyFlags host = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  const int uma = find(host | VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
  const int dev = find(VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
  const int hst = find(host);
  if (hst < 0) throw ExecutionError("[vulkan] no host-visible coherent memory type");
  // Tensors live in host-visible memory only on integrated / software devices: a
  // discrete GPU's host-visible device-local heap is often a 256 MiB BAR window, and
  // reads through it are slow, so there tensors are device-local with staging.
  const bool integrated = props_.deviceType == VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU ||
                          props_.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU;
  staging_ = uma < 0 || !integrated || env_flag("TENSOR_VK_FORCE_STAGING");

  VkPhysicalDeviceMaintenance3Properties m3{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES};
  VkPhysicalDeviceProperties2 p2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
  p2.pNext = &m3;
  vkGetPhysicalDeviceProperties2(phys_, &p2);
  max_alloc_ = m3.maxMemoryAllocationSize;
  VkDeviceSize block = 64ull << 20;
  block = std::min<VkDeviceSize>(block, props_.limits.maxStorageBufferRange);
  block = std::min<VkDeviceSize>(block, m3.maxMemoryAllocationSize);
  const int tensor_type = staging_ ? (dev >= 0 ? dev : hst) : uma;
  init_memory_limits(tensor_type, hst, cap, block);
  block = std::max(block / align_ * align_, align_);
  device_pool_.init(this, static_cast<std::uint32_t>(tensor_type), !staging_, false, block);
  host_pool_.init(this, static_cast<std::uint32_t>(hst), true, true, std::min<VkDeviceSize>(block, 16ull << 20));

  // One set layout for every family: binding 0 = parameters, 1..4 = tensors.
  VkDescriptorSetLayoutBinding binds[kBindings];
  for (std::uint32_t i = 0; i < kBindings; ++i)
    binds[i] = {i, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1, VK_SHADER_STAGE_COMPUTE_BIT, nullptr};
  VkDescriptorSetLayoutCreateInfo li{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO};
  li.bindingCount = kBindings;
  li.pBindings = binds;
  check_vk(vkCreateDescriptorSetLayout(device_, &li, nullptr, &set_layout_), "vkCreateDescriptorSetLayout");
  VkPipelineLayoutCreateInfo pli{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
  pli.setLayoutCount = 1;
  pli.pSetLayouts = &set_layout_;
  check_vk(vkCreatePipelineLayout(device_, &pli, nullptr, &pipeline_layout_), "vkCreatePipelineLayout");

  for (int i = 0; i < static_cast<int>(ShaderFamily::Count); ++i) {
    // The optional families declare Float16 / StorageBuffer16BitAccess /
    // CooperativeMatrixNV: their modules exist only where those are enabled.
    if (i == static_cast<int>(ShaderFamily::ElementwiseF16) && !f16_ok_) continue;
    if (i == static_cast<int>(ShaderFamily::MatmulCoop) && !coop) continue;
    VkShaderModuleCreateInfo si{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
    si.codeSize = kShaders[i].bytes;
    si.pCode = kShaders[i].code;
    const std::string what = fmt::format("vkCreateShaderModule (shader {})", kShaders[i].name);
    check_vk(vkCreateShaderModule(device_, &si, nullptr, &modules_[i][0]), what.c_str());
    if (wide_ok_ && kShaders[i].wide) {  // the 64-bit modules declare Int64/Float64: only where enabled
      si.codeSize = kShaders[i].wide_bytes;
      si.pCode = kShaders[i].wide;
      check_vk(vkCreateShaderModule(device_, &si, nullptr, &modules_[i][1]), (what + " wide").c_str());
    }
    if (kShaders[i].subgroup && subgroup_decision(static_cast<ShaderFamily>(i)).size) {  // GroupNonUniformArithmetic
      si.codeSize = kShaders[i].subgroup_bytes;
      si.pCode = kShaders[i].subgroup;
      check_vk(vkCreateShaderModule(device_, &si, nullptr, &modules_[i][2]), "vkCreateShaderModule");
    }
  }

  // Pipeline cache from disk, keyed by pipelineCacheUUID and driver version.
  std::vector<char> blob;
  const bool use_disk = !(std::getenv("TENSOR_VK_PIPELINE_CACHE") && std::strcmp(std::getenv("TENSOR_VK_PIPELINE_CACHE"), "0") == 0);
  const std::string path = use_disk ? cache_path() : std::string();
  if (!path.empty()) {
    std::ifstream in(path, std::ios::binary);
    if (in) blob.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  VkPipelineCacheCreateInfo ci{VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO};
  ci.initialDataSize = blob.size();
  ci.pInitialData = blob.empty() ? nullptr : blob.data();
  if (vkCreatePipelineCache(device_, &ci, nullptr, &cache_) != VK_SUCCESS) {
    ci.initialDataSize = 0;  // a corrupt or foreign file: start empty
    ci.pInitialData = nullptr;
    check_vk(vkCreatePipelineCache(device_, &ci, nullptr, &cache_), "vkCreatePipelineCache");
  } else {
    cache_loaded_ = !blob.empty();
  }
}

std::uint64_t parse_memory_limit(const char* text) {
  const std::string s = text ? text : "";
  auto bad = [&](const char* why) {
    return ExecutionError(fmt::format("[vulkan] TENSOR_VK_MEMORY_LIMIT; expected a byte count with an optional K, M or G "
                                      "suffix (e.g. 512M){}; got '{}'", why, s));
  };
  std::size_t i = 0;
  std::uint64_t v = 0;
  for (; i < s.size() && s[i] >= '0' && s[i] <= '9'; ++i) {
    const std::uint64_t digit = static_cast<std::uint64_t>(s[i] - '0');
    if (v > (~std::uint64_t{0} - digit) / 10) throw bad(" below 2^64");
    v = v * 10 + digit;
  }
  if (i == 0) throw bad("");
  int shift = 0;
  if (i < s.size()) {
    switch (s[i]) {
      case 'K': case 'k': shift = 10; break;
      case 'M': case 'm': shift = 20; break;
      case 'G': case 'g': shift = 30; break;
      default: throw bad("");
    }
    if (++i != s.size()) throw bad("");
  }
  if (shift && v > (~std::uint64_t{0} >> shift)) throw bad(" below 2^64");
  v <<= shift;
  if (v == 0) throw bad(" above 0");
  return v;
}

void Context::init_memory_limits(int tensor_type, int staging_type, std::uint64_t cap, VkDeviceSize& block) {
  // The heaps' sizes, or their budgets where VK_EXT_memory_budget tells them (this
  // process's share now, at device creation: an upper bound, not a reservation).
  VkDeviceSize heap_bytes[VK_MAX_MEMORY_HEAPS];
  for (std::uint32_t h = 0; h < mem_props_.memoryHeapCount; ++h) heap_bytes[h] = mem_props_.memoryHeaps[h].size;
  const char* heap_what = "the memory heap's size";
  auto props2 = reinterpret_cast<PFN_vkGetPhysicalDeviceMemoryProperties2>(
      vkGetInstanceProcAddr(instance_, "vkGetPhysicalDeviceMemoryProperties2"));
  if (budget_ext_ && props2) {
    VkPhysicalDeviceMemoryBudgetPropertiesEXT budget{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_BUDGET_PROPERTIES_EXT};
    VkPhysicalDeviceMemoryProperties2 mp{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_PROPERTIES_2};
    mp.pNext = &budget;
    props2(phys_, &mp);
    for (std::uint32_t h = 0; h < mp.memoryProperties.memoryHeapCount; ++h)
      if (budget.heapBudget[h] > 0) heap_bytes[h] = std::min(heap_bytes[h], budget.heapBudget[h]);
    heap_what = "the memory heap's budget (VK_EXT_memory_budget)";
  }
  const std::uint32_t th = mem_props_.memoryTypes[tensor_type].heapIndex;
  const std::uint32_t sh = mem_props_.memoryTypes[staging_type].heapIndex;
  VkDeviceSize limit = heap_bytes[th];
  std::string source = fmt::format("{}, heap {}", heap_what, th);
  if (cap && cap < limit) {
    limit = cap;
    source = "TENSOR_VK_MEMORY_LIMIT";
  }
  // Blocks of at most a quarter of the limit, so that a small limit still holds a few.
  block = std::min<VkDeviceSize>(block, limit / 4);
  const bool shared = th == sh;  // one heap for both pools (UMA, lavapipe)
  device_pool_.set_limits(limit, std::move(source), heap_bytes[th], shared ? &host_pool_ : nullptr);
  host_pool_.set_limits(heap_bytes[sh], fmt::format("{}, heap {}", heap_what, sh), heap_bytes[sh],
                        shared ? &device_pool_ : nullptr);
}

void Context::save_pipeline_cache() {
  if (!device_ || !cache_) return;
  const std::string path = cache_path();
  if (path.empty() || (std::getenv("TENSOR_VK_PIPELINE_CACHE") && std::strcmp(std::getenv("TENSOR_VK_PIPELINE_CACHE"), "0") == 0))
    return;
  std::size_t size = 0;
  if (vkGetPipelineCacheData(device_, cache_, &size, nullptr) != VK_SUCCESS || size == 0) return;
  std::vector<char> data(size);
  if (vkGetPipelineCacheData(device_, cache_, &size, data.data()) != VK_SUCCESS) return;
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  const std::string tmp = fmt::format("{}.{}.tmp", path, static_cast<long>(reinterpret_cast<std::uintptr_t>(this) & 0xFFFFFF));
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return;
    out.write(data.data(), static_cast<std::streamsize>(size));
    if (!out) return;
  }
  std::filesystem::rename(tmp, path, ec);  // atomic: concurrent processes never see half a file
}

VkPipeline Context::pipeline(ShaderFamily family, const std::vector<std::uint32_t>& spec, bool wide) {
  if (wide && !wide_ok_)
    throw DTypeError(fmt::format("[{}] a 64-bit dtype needs shaderInt64 and shaderFloat64; expected them on vulkan device {} "
                                 "({}); got a device without them", dispatch::current_op_name(), index_, name()));
  // The SUBGROUP variant (narrow only) runs with the family's chosen subgroup size.
  const std::uint32_t sg = wide ? 0 : subgroup_size(family);
  const int variant = wide ? 1 : sg ? 2 : 0;
  // Key: family, variant and the specialization constants (each < 256), packed.
  std::uint64_t key = static_cast<std::uint64_t>(family) | (wide ? 16u : 0u) | (sg ? 32u : 0u);
  for (std::size_t i = 0; i < spec.size(); ++i) key |= static_cast<std::uint64_t>(spec[i] & 0xFFu) << (8 * i + 8);
  std::lock_guard<std::mutex> lock(pipeline_mu_);
  if (auto it = pipelines_.find(key); it != pipelines_.end()) return it->second;
  if (!modules_[static_cast<int>(family)][variant])
    throw ExecutionError(fmt::format("[{}] vulkan pipeline {}{}: its shader module is not available on device {} ({})",
                                     dispatch::current_op_name(), kShaders[static_cast<int>(family)].name,
                                     wide ? " (wide)" : sg ? " (subgroup)" : "", index_, name()));
  if (family == ShaderFamily::Matmul) {
    const std::uint32_t shared = 16 * (64 + 64) * (wide ? 8 : 4);  // matmul.comp's sa + sb
    if (shared > props_.limits.maxComputeSharedMemorySize)
      throw ExecutionError(fmt::format("[matmul] tile needs {} bytes of shared memory; expected at most {} "
                                       "(maxComputeSharedMemorySize)", shared, props_.limits.maxComputeSharedMemorySize));
  }
  std::vector<std::uint32_t> values = spec;
  std::vector<VkSpecializationMapEntry> entries(spec.size());
  for (std::uint32_t i = 0; i < spec.size(); ++i) entries[i] = {i, i * 4, 4};
  if (sg) {  // the shader's SG constant, a required size and full subgroups
    entries.push_back({SPEC_SUBGROUP, static_cast<std::uint32_t>(values.size() * 4), 4});
    values.push_back(sg);
  }
  VkSpecializationInfo si{static_cast<std::uint32_t>(entries.size()), entries.data(), values.size() * 4, values.data()};
  VkPipelineShaderStageRequiredSubgroupSizeCreateInfoEXT rs{
      VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_REQUIRED_SUBGROUP_SIZE_CREATE_INFO_EXT};
  rs.requiredSubgroupSize = sg;
  VkComputePipelineCreateInfo ci{VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
  ci.stage = {VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO};
  if (sg) {
    ci.stage.pNext = &rs;
    ci.stage.flags = VK_PIPELINE_SHADER_STAGE_CREATE_REQUIRE_FULL_SUBGROUPS_BIT_EXT;
  }
  ci.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  ci.stage.module = modules_[static_cast<int>(family)][variant];
  ci.stage.pName = "main";
  ci.stage.pSpecializationInfo = &si;
  ci.layout = pipeline_layout_;
  VkPipeline p;
  check_vk(vkCreateComputePipelines(device_, cache_, 1, &ci, nullptr, &p),
           fmt::format("vkCreateComputePipelines (pipeline {}{})", kShaders[static_cast<int>(family)].name, wide ? " wide" : "").c_str());
  if (pipelines_.empty()) {
    static bool registered = false;
    if (!registered) {
      registered = true;
      std::atexit([] {
        for (std::size_t i = 0; i < context_count(); ++i)
          if (Context* c = context(static_cast<std::uint16_t>(i))) c->save_pipeline_cache();
      });
    }
  }
  pipelines_.emplace(key, p);
  return p;
}

CoopState Context::coop_state() const {
  std::lock_guard<std::mutex> lock(coop_mu_);
  return coop_state_;
}
std::string Context::coop_reason() const {
  std::lock_guard<std::mutex> lock(coop_mu_);
  return coop_reason_;
}
void Context::set_coop_state(CoopState s, std::string reason) {
  std::lock_guard<std::mutex> lock(coop_mu_);
  coop_state_ = s;
  coop_reason_ = std::move(reason);
  f16_accel_.store(s == CoopState::Live && coop_on_.load());
}
void Context::set_coop_enabled(bool on) {
  coop_on_.store(on);
  std::string reason = coop_reason();
  set_coop_state(coop_state(), std::move(reason));
}

std::unique_ptr<Batch> Context::make_batch() {
  auto b = std::make_unique<Batch>();
  VkCommandPoolCreateInfo pi{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  pi.flags = VK_COMMAND_POOL_CREATE_TRANSIENT_BIT;
  pi.queueFamilyIndex = queue_family_;
  check_vk(vkCreateCommandPool(device_, &pi, nullptr, &b->pool), "vkCreateCommandPool");
  VkCommandBufferAllocateInfo ai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
  ai.commandPool = b->pool;
  ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  ai.commandBufferCount = 1;
  check_vk(vkAllocateCommandBuffers(device_, &ai, &b->cmd), "vkAllocateCommandBuffers");
  VkFenceCreateInfo fi{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
  check_vk(vkCreateFence(device_, &fi, nullptr, &b->fence), "vkCreateFence");
  VkDescriptorPoolSize ps{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, kMaxDispatchesPerBatch * kBindings};
  VkDescriptorPoolCreateInfo di{VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
  di.maxSets = kMaxDispatchesPerBatch;
  di.poolSizeCount = 1;
  di.pPoolSizes = &ps;
  check_vk(vkCreateDescriptorPool(device_, &di, nullptr, &b->descriptors), "vkCreateDescriptorPool");
  // mu_ is held here: reclaiming memory may not wait for batches.
  b->params = host_pool_.allocate(kParamArenaBytes, false);
  b->errors = host_pool_.allocate(kMaxDispatchesPerBatch * 8, false);
  live_batches_.fetch_add(1, std::memory_order_relaxed);
  return b;
}

Batch& Context::begin_batch() {
  if (lost()) throw_lost_locked();
  if (current_) return *current_;
  retire_locked(false, 0);
  std::unique_ptr<Batch> b;
  if (!spare_.empty()) {
    b = std::move(spare_.back());
    spare_.pop_back();
  } else {
    b = make_batch();
  }
  check_vk(vkResetCommandPool(device_, b->pool, 0), "vkResetCommandPool");
  check_vk(vkResetDescriptorPool(device_, b->descriptors, 0), "vkResetDescriptorPool");
  b->params_used = 0;
  b->dispatches = 0;
  b->checks.clear();
  std::memset(b->errors->mapped(), 0, kMaxDispatchesPerBatch * 8);
  b->keep.clear();
  b->written.clear();
  b->read.clear();
  VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  check_vk(vkBeginCommandBuffer(b->cmd, &bi), "vkBeginCommandBuffer");
  current_ = std::move(b);
  // Orders this batch after everything submitted before it (cross-batch dependencies).
  barrier_locked(*current_);
  return *current_;
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
    if (len[i] > props_.limits.maxStorageBufferRange)
      throw ExecutionError(fmt::format("[{}] tensor too large for the {} kernel on vulkan:{}; expected at most {} bytes "
                                       "(maxStorageBufferRange; only contiguous elementwise ops split larger tensors); got {} "
                                       "bytes",
                                       dispatch::current_op_name(), kShaders[static_cast<int>(family)].name, index_,
                                       props_.limits.maxStorageBufferRange, len[i]));
  }
  // Beyond the device's grid a dispatch would be invalid usage (undefined behaviour, a
  // lost device at worst): refused before anything is recorded.
  const std::uint32_t* grid = props_.limits.maxComputeWorkGroupCount;
  if (gx > grid[0] || gy > grid[1] || gz > grid[2])
    throw ExecutionError(fmt::format("[{}] too many workgroups for the {} kernel on vulkan:{}; expected at most {} x {} x {} "
                                     "(maxComputeWorkGroupCount); got {} x {} x {}",
                                     dispatch::current_op_name(), kShaders[static_cast<int>(family)].name, index_, grid[0],
                                     grid[1], grid[2], gx, gy, gz));
  VkPipeline pipe = pipeline(family, spec, wide);
  std::lock_guard<std::mutex> lock(mu_);
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

  VkDescriptorSetAllocateInfo ai{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
  ai.descriptorPool = b->descriptors;
  ai.descriptorSetCount = 1;
  ai.pSetLayouts = &set_layout_;
  VkDescriptorSet set;
  check_vk(vkAllocateDescriptorSets(device_, &ai, &set), "vkAllocateDescriptorSets");
  VkDescriptorBufferInfo infos[kBindings];
  infos[0] = {b->params->vk(), b->params->offset() + poff, kParamSlotBytes};
  for (std::uint32_t i = 1; i < kBindings; ++i) {
    const Buffer* buf = i - 1 < bindings.size() ? bindings[i - 1].buffer : nullptr;
    infos[i] = buf ? VkDescriptorBufferInfo{buf->vk(), off[i - 1], len[i - 1]} : infos[0];
  }
  // The error flags (binding 3 of checked dispatches) are only ever set, never read
  // on the device, so they need no hazard tracking.
  if (check) infos[3] = {b->errors->vk(), b->errors->offset(), b->errors->size()};
  VkWriteDescriptorSet writes[kBindings];
  for (std::uint32_t i = 0; i < kBindings; ++i) {
    writes[i] = {VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET};
    writes[i].dstSet = set;
    writes[i].dstBinding = i;
    writes[i].descriptorCount = 1;
    writes[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    writes[i].pBufferInfo = &infos[i];
  }
  vkUpdateDescriptorSets(device_, kBindings, writes, 0, nullptr);

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
  for (std::size_t i = 0; i < bindings.size(); ++i) {
    const Binding& bd = bindings[i];
    if (!bd.buffer) continue;
    (bd.write ? b->written : b->read).push_back({bd.buffer->vk(), off[i], len[i]});
    bd.buffer->add_ref();
    b->keep.push_back(BufRef::adopt(const_cast<Buffer*>(bd.buffer)));
  }
  vkCmdBindPipeline(b->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pipe);
  vkCmdBindDescriptorSets(b->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline_layout_, 0, 1, &set, 0, nullptr);
  vkCmdDispatch(b->cmd, gx, gy, gz);
  if (++b->dispatches >= kMaxDispatchesPerBatch) submit_locked();
}

void Context::keep(BufRef buf) {
  std::lock_guard<std::mutex> lock(mu_);
  if (current_) current_->keep.push_back(std::move(buf));
}

void Context::submit_locked() {
  if (!current_) return;
  if (lost()) throw_lost_locked();
  Batch& b = *current_;
  VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  mb.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
  vkCmdPipelineBarrier(b.cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                       VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &mb, 0, nullptr, 0, nullptr);
  check_vk(vkEndCommandBuffer(b.cmd), "vkEndCommandBuffer");
  check_vk(vkResetFences(device_, 1, &b.fence), "vkResetFences");
  VkSubmitInfo si{VK_STRUCTURE_TYPE_SUBMIT_INFO};
  si.commandBufferCount = 1;
  si.pCommandBuffers = &b.cmd;
  const VkResult r = vkQueueSubmit(queue_, 1, &si, b.fence);
  note_lost(r, "vkQueueSubmit");
  if (r != VK_SUCCESS) {
    recycle_locked(std::move(current_));
    if (lost()) throw_lost_locked();
    check_vk(r, "vkQueueSubmit");
  }
  b.ticket = next_ticket_++;
  in_flight_.push_back(std::move(current_));
  // Bound the queue: wait for the oldest submission when too many are pending.
  if (in_flight_.size() > kMaxInFlight) retire_locked(true, in_flight_.front()->ticket);
}

void Context::recycle_locked(std::unique_ptr<Batch> b) {
  b->keep.clear();
  if (spare_.size() < kMaxSpare) {
    spare_.push_back(std::move(b));
    return;
  }
  destroy_batch(*b);
}

void Context::destroy_batch(Batch& b) {
  b.keep.clear();
  b.params = {};
  b.errors = {};
  if (b.pool) vkDestroyCommandPool(device_, b.pool, nullptr);  // frees its command buffer
  if (b.descriptors) vkDestroyDescriptorPool(device_, b.descriptors, nullptr);
  if (b.fence) vkDestroyFence(device_, b.fence, nullptr);
  b.pool = VK_NULL_HANDLE;
  b.cmd = VK_NULL_HANDLE;
  b.descriptors = VK_NULL_HANDLE;
  b.fence = VK_NULL_HANDLE;
  live_batches_.fetch_sub(1, std::memory_order_relaxed);
}

void Context::retire_locked(bool block, std::uint64_t ticket) {
  while (!in_flight_.empty()) {
    Batch& b = *in_flight_.front();
    VkResult r;
    if (block && b.ticket <= ticket) r = vkWaitForFences(device_, 1, &b.fence, VK_TRUE, UINT64_MAX);
    else r = vkGetFenceStatus(device_, b.fence);
    if (r == VK_NOT_READY || r == VK_TIMEOUT) return;
    if (r != VK_SUCCESS) {
      const char* what = block && b.ticket <= ticket ? "vkWaitForFences" : "vkGetFenceStatus";
      note_lost(r, what);
      if (lost()) throw_lost_locked();
      check_vk(r, what);
    }
    completed_ticket_ = b.ticket;
    collect_errors_locked(b);
    std::unique_ptr<Batch> done = std::move(in_flight_.front());
    in_flight_.pop_front();
    recycle_locked(std::move(done));
  }
}

std::uint64_t Context::flush() {
  std::lock_guard<std::mutex> lock(mu_);
  submit_locked();
  return next_ticket_ - 1;
}

void Context::collect_errors_locked(Batch& b) {
  if (b.checks.empty() || !pending_error_.empty()) return;
  const auto* words = reinterpret_cast<const std::uint32_t*>(b.errors->mapped());
  for (std::size_t i = 0; i < b.checks.size(); ++i) {
    if (words[2 * i] == 0) continue;
    pending_error_ = fmt::format("{}; got {}", b.checks[i], static_cast<std::int32_t>(words[2 * i + 1]));
    return;
  }
}

void Context::wait(std::uint64_t ticket) {
  std::lock_guard<std::mutex> lock(mu_);
  if (lost()) throw_lost_locked();
  retire_locked(true, ticket);
  if (!pending_error_.empty()) {
    // Reported once, at the first wait after the faulty op completed (its output
    // holds zeros where an index was out of range).
    std::string e = std::move(pending_error_);
    pending_error_.clear();
    throw IndexError(e);
  }
}

void Context::copy(const Buffer& src, const Buffer& dst, std::size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  Batch& b = begin_batch();
  barrier_locked(b);
  VkBufferCopy region{src.offset(), dst.offset(), bytes};
  vkCmdCopyBuffer(b.cmd, src.vk(), dst.vk(), 1, &region);
  b.written.push_back({dst.vk(), dst.offset(), dst.size()});
  src.add_ref();
  dst.add_ref();
  b.keep.push_back(BufRef::adopt(const_cast<Buffer*>(&src)));
  b.keep.push_back(BufRef::adopt(const_cast<Buffer*>(&dst)));
  if (++b.dispatches >= kMaxDispatchesPerBatch) submit_locked();
}

BufRef Context::allocate(std::size_t bytes) {
  ensure_init();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (lost()) throw_lost_locked();
    retire_locked(false, 0);  // give finished batches' buffers back first
  }
  return device_pool_.allocate(bytes);
}

void Context::reclaim_memory(bool wait) {
  if (wait) {
    std::lock_guard<std::mutex> lock(mu_);
    if (lost()) throw_lost_locked();
    submit_locked();
    retire_locked(true, next_ticket_ - 1);
  }
  device_pool_.cleanup();
  host_pool_.cleanup();
}

void Context::note_lost(VkResult r, const char* where) {
  if (r != VK_ERROR_DEVICE_LOST) return;
  std::lock_guard<std::mutex> lock(lost_mu_);
  if (lost_.load()) return;
  lost_where_ = where;
  lost_.store(true, std::memory_order_release);
}

std::string Context::lost_message() const {
  std::lock_guard<std::mutex> lock(lost_mu_);
  return fmt::format("[{}] vulkan device {} ({}) lost; expected a working device; got VK_ERROR_DEVICE_LOST from {} "
                     "(its tensors can only be dropped now)", dispatch::current_op_name(), index_, name(), lost_where_);
}

void Context::throw_lost_locked() {
  // Nothing recorded or submitted will run any more: release what it holds, so that
  // dropping the tensors gives their memory back.
  if (current_) recycle_locked(std::move(current_));
  while (!in_flight_.empty()) {
    std::unique_ptr<Batch> b = std::move(in_flight_.front());
    in_flight_.pop_front();
    recycle_locked(std::move(b));
  }
  throw ExecutionError(lost_message());
}

void Context::simulate_device_loss(const char* where) {
  ensure_init();
  std::lock_guard<std::mutex> lock(mu_);
  retire_locked(true, next_ticket_ - 1);  // the real device must not run on freed buffers
  note_lost(VK_ERROR_DEVICE_LOST, where);
}

MemoryStats Context::memory_stats() {
  ensure_init();
  return {device_pool_.in_use(), device_pool_.reserved(), device_pool_.peak()};
}

void Context::memory_cleanup() {
  ensure_init();
  if (!lost()) sync();  // a lost device completes nothing; its empty blocks can still go
  device_pool_.cleanup();
  host_pool_.cleanup();
}

void Context::upload(const BufRef& dst, const void* src, std::size_t bytes) {
  if (bytes == 0) return;
  if (std::byte* p = dst->mapped()) {
    std::memcpy(p, src, bytes);
    return;
  }
  BufRef staging = host_pool_.allocate(bytes);
  std::memcpy(staging->mapped(), src, bytes);
  std::lock_guard<std::mutex> lock(mu_);
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
  BufRef staging = host_pool_.allocate(bytes);
  const VkDeviceSize from = src->offset() + offset;
  offset = 0;
  std::lock_guard<std::mutex> lock(mu_);
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
