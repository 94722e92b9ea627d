// Device probing (features, optional paths, subgroup facts) and logical-device
// initialisation; the VkResult helpers (see runtime/context.hpp).

// Vulkan structs are initialised as `VkFoo info{VK_STRUCTURE_TYPE_FOO}` with the
// remaining members zeroed by the language; that is the intended idiom here.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#include "backends/vulkan/runtime/internal.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "lib/core/current_op.hpp"
#include "tensor/error.hpp"

namespace tensor::vulkan {

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
    throw ExecutionError(fmt::format("[{}] vulkan: {} failed; expected VK_SUCCESS; got {} ({})", core::current_op_name(),
                                     what, vk_result_name(r), static_cast<int>(r)));
}

// ---- Context ----------------------------------------------------------------------

Context::Context(VkInstance instance, VkPhysicalDevice phys, std::uint32_t queue_family, std::uint16_t index)
    : instance_(instance), phys_(phys), queue_family_(queue_family), index_(index) {
  vkGetPhysicalDeviceProperties(phys_, &props_);
  vkGetPhysicalDeviceMemoryProperties(phys_, &mem_props_);
  std::uint32_t nq = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(phys_, &nq, nullptr);
  std::vector<VkQueueFamilyProperties> queues(nq);
  vkGetPhysicalDeviceQueueFamilyProperties(phys_, &nq, queues.data());
  if (queue_family_ < nq) ts_bits_ = queues[queue_family_].timestampValidBits;
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
                                     core::current_op_name(), index_, name(), init_error_));
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

  init_pipelines(coop);
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

}  // namespace tensor::vulkan
