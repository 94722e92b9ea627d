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

Context::Context(VkInstance instance, VkPhysicalDevice phys, std::uint32_t queue_family, std::uint16_t index) {
  dev_.instance = instance;
  dev_.phys = phys;
  dev_.queue_family = queue_family;
  dev_.index = index;
  vkGetPhysicalDeviceProperties(dev_.phys, &dev_.props);
  vkGetPhysicalDeviceMemoryProperties(dev_.phys, &dev_.mem_props);
  std::uint32_t nq = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(dev_.phys, &nq, nullptr);
  std::vector<VkQueueFamilyProperties> queues(nq);
  vkGetPhysicalDeviceQueueFamilyProperties(dev_.phys, &nq, queues.data());
  if (dev_.queue_family < nq) dev_.ts_bits = queues[dev_.queue_family].timestampValidBits;
  // The shaders keep every element in 32-bit words (8/16-bit ones packed and stored
  // with atomics) and compute in 32 bits, so these need no optional feature; f16 and
  // bf16 are 16-bit storage computed in f32 (exact conversions in the shader), as on
  // the CPU. The 64-bit dtypes run in the WIDE shader variants, which need
  // shaderInt64 and shaderFloat64 (both, since one module serves f64 and i64/u64).
  // Optional fast paths (below): f16 elementwise kernels in native f16 on 16-bit
  // storage, and the cooperative-matrix f16 matmul (F16 becomes Accelerated only
  // once that path passed its self-test).
  VkPhysicalDeviceFeatures f{};
  vkGetPhysicalDeviceFeatures(dev_.phys, &f);
  dev_.wide_ok = f.shaderInt64 && f.shaderFloat64;
  const DTypeUsageSet g = DTypeUsageSet::general();
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::I32, DType::I16, DType::I8, DType::U32, DType::U16, DType::U8,
                  DType::Bool, DType::BoolU8, DType::BoolU32})
    dev_.usage[static_cast<int>(t)] = g;
  if (dev_.wide_ok)
    for (DType t : {DType::F64, DType::I64, DType::U64}) dev_.usage[static_cast<int>(t)] = g;

  // Optional paths: native f16 arithmetic and the cooperative-matrix matmul.
  std::uint32_t ne = 0;
  std::vector<VkExtensionProperties> exts;
  if (vkEnumerateDeviceExtensionProperties(dev_.phys, nullptr, &ne, nullptr) == VK_SUCCESS) {
    exts.resize(ne);
    if (vkEnumerateDeviceExtensionProperties(dev_.phys, nullptr, &ne, exts.data()) != VK_SUCCESS) ne = 0;
    exts.resize(ne);
  }
  auto has_ext = [&](const char* e) {
    for (const auto& x : exts)
      if (std::strcmp(x.extensionName, e) == 0) return true;
    return false;
  };
  dev_.f16_ext = has_ext(VK_KHR_SHADER_FLOAT16_INT8_EXTENSION_NAME);
  dev_.coop.extension = has_ext(VK_NV_COOPERATIVE_MATRIX_EXTENSION_NAME);
  VkPhysicalDevice16BitStorageFeatures st16{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES};
  VkPhysicalDeviceShaderFloat16Int8FeaturesKHR f16{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES_KHR};
  VkPhysicalDeviceCooperativeMatrixFeaturesNV coop{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV};
  VkPhysicalDeviceVulkanMemoryModelFeaturesKHR vmm{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_MEMORY_MODEL_FEATURES_KHR};
  dev_.mm_ext = has_ext(VK_KHR_VULKAN_MEMORY_MODEL_EXTENSION_NAME);
  dev_.budget_ext = has_ext(VK_EXT_MEMORY_BUDGET_EXTENSION_NAME);
  VkPhysicalDeviceFeatures2 f2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  f2.pNext = &st16;
  void** tail = &st16.pNext;
  if (dev_.f16_ext) { *tail = &f16; tail = &f16.pNext; }
  if (dev_.coop.extension) { *tail = &coop; tail = &coop.pNext; }
  if (dev_.mm_ext) { *tail = &vmm; tail = &vmm.pNext; }
  vkGetPhysicalDeviceFeatures2(dev_.phys, &f2);
  dev_.coop.memory_model = dev_.mm_ext && vmm.vulkanMemoryModel;
  const bool f16_storage = dev_.f16_ext && f16.shaderFloat16 && st16.storageBuffer16BitAccess;
  dev_.f16_ok = f16_storage && !env_flag("TENSOR_VK_DISABLE_F16ARITH");
  switches_.f16_on.store(dev_.f16_ok);
  switches_.fuse_max.store(dev_.props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU ? kFuseMaxSoftware : kFuseMaxHardware);
  VkPhysicalDeviceSubgroupProperties sub{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
  VkPhysicalDeviceSubgroupSizeControlPropertiesEXT ssc{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_PROPERTIES_EXT};
  VkPhysicalDeviceProperties2 p2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
  p2.pNext = &sub;
  dev_.sub.size_control_ext = has_ext(VK_EXT_SUBGROUP_SIZE_CONTROL_EXTENSION_NAME);
  if (dev_.sub.size_control_ext) sub.pNext = &ssc;
  vkGetPhysicalDeviceProperties2(dev_.phys, &p2);
  dev_.sub.size = sub.subgroupSize;
  dev_.sub.compute = (sub.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) != 0;
  dev_.sub.arithmetic = (sub.supportedOperations & VK_SUBGROUP_FEATURE_ARITHMETIC_BIT) != 0;
  if (dev_.sub.size_control_ext) {
    VkPhysicalDeviceSubgroupSizeControlFeaturesEXT sf{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES_EXT};
    VkPhysicalDeviceFeatures2 sf2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
    sf2.pNext = &sf;
    vkGetPhysicalDeviceFeatures2(dev_.phys, &sf2);
    dev_.sub.size_control = sf.subgroupSizeControl;
    dev_.sub.full_subgroups = sf.computeFullSubgroups;
    dev_.sub.min_size = ssc.minSubgroupSize;
    dev_.sub.max_size = ssc.maxSubgroupSize;
    dev_.sub.required_compute = (ssc.requiredSubgroupSizeStages & VK_SHADER_STAGE_COMPUTE_BIT) != 0;
    dev_.sub.max_workgroup_subgroups = ssc.maxComputeWorkgroupSubgroups;
  }
  dev_.sub.disabled = env_flag("TENSOR_VK_DISABLE_SUBGROUP");
  dev_.sub_reduce = decide_subgroup(dev_.sub, kReduceWorkgroup);
  dev_.sub_rows = decide_subgroup(dev_.sub, kRowsWorkgroup);
  switches_.sub_on.store(subgroup_supported());
  dev_.coop.vendor_id = dev_.props.vendorID;
  dev_.coop.feature = dev_.coop.extension && coop.cooperativeMatrix;
  dev_.coop.f16_storage = f16_storage;
  dev_.coop.subgroup_size = sub.subgroupSize;
  dev_.coop.disabled = env_flag("TENSOR_VK_DISABLE_COOPMAT");
  if (dev_.coop.feature) {
    auto query = reinterpret_cast<PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesNV>(
        vkGetInstanceProcAddr(dev_.instance, "vkGetPhysicalDeviceCooperativeMatrixPropertiesNV"));
    std::uint32_t n = 0;
    if (query && query(dev_.phys, &n, nullptr) == VK_SUCCESS && n) {
      std::vector<VkCooperativeMatrixPropertiesNV> props(n, {VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_NV});
      if (query(dev_.phys, &n, props.data()) == VK_SUCCESS)
        for (std::uint32_t i = 0; i < n; ++i)
          dev_.coop.shapes.push_back({props[i].MSize, props[i].NSize, props[i].KSize, static_cast<int>(props[i].AType),
                                        static_cast<int>(props[i].BType), static_cast<int>(props[i].CType),
                                        static_cast<int>(props[i].DType), static_cast<int>(props[i].scope)});
    }
  }
  const CoopDecision cd = decide_coopmat(dev_.coop);
  switches_.coop_state = cd.usable ? CoopState::Untested : CoopState::Unavailable;
  switches_.coop_reason = cd.reason;
  // F16 is Accelerated only while the cooperative-matrix path is live (set_coop_state).
  if (const char* mask = std::getenv("TENSOR_VK_DTYPE_MASK")) {
    const unsigned long bits = std::strtoul(mask, nullptr, 16);
    for (int i = 0; i < kDTypeCount; ++i)
      if (bits & (1ul << i)) dev_.usage[i] = DTypeUsageSet{};
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
                                     core::current_op_name(), dev_.index, name(), init_error_));
}

void Context::init_device() {
  // A bad TENSOR_VK_MEMORY_LIMIT fails device init (before anything is created).
  const char* cap_env = std::getenv("TENSOR_VK_MEMORY_LIMIT");
  const std::uint64_t cap = cap_env && *cap_env ? parse_memory_limit(cap_env) : 0;
  const float prio = 1.0f;
  VkDeviceQueueCreateInfo qi{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
  qi.queueFamilyIndex = dev_.queue_family;
  qi.queueCount = 1;
  qi.pQueuePriorities = &prio;
  VkPhysicalDeviceFeatures2 enabled{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  enabled.features.shaderInt64 = dev_.wide_ok ? VK_TRUE : VK_FALSE;
  enabled.features.shaderFloat64 = dev_.wide_ok ? VK_TRUE : VK_FALSE;
  // 16-bit storage and f16 arithmetic serve both optional families.
  const bool coop = coop_state() != CoopState::Unavailable;
  const bool want16 = dev_.f16_ok || coop;
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
  check_vk(vkCreateDevice(dev_.phys, &di, nullptr, &dev_.device), "vkCreateDevice");
  vkGetDeviceQueue(dev_.device, dev_.queue_family, 0, &dev_.queue);

  mem_.align = std::max<VkDeviceSize>(256, dev_.props.limits.minStorageBufferOffsetAlignment);

  // Memory types: host-visible device memory used directly (UMA, lavapipe), else
  // device-local memory with a host-visible staging pool.
  VkBufferCreateInfo bi{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  bi.size = 4096;
  bi.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  VkBuffer probe;
  check_vk(vkCreateBuffer(dev_.device, &bi, nullptr, &probe), "vkCreateBuffer");
  VkMemoryRequirements req;
  vkGetBufferMemoryRequirements(dev_.device, probe, &req);
  vkDestroyBuffer(dev_.device, probe, nullptr);
  auto find = [&](VkMemoryPropertyFlags want) -> int {
    for (std::uint32_t i = 0; i < dev_.mem_props.memoryTypeCount; ++i)
      if ((req.memoryTypeBits & (1u << i)) && (dev_.mem_props.memoryTypes[i].propertyFlags & want) == want) return static_cast<int>(i);
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
  const bool integrated = dev_.props.deviceType == VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU ||
                          dev_.props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU;
  mem_.staging = uma < 0 || !integrated || env_flag("TENSOR_VK_FORCE_STAGING");

  VkPhysicalDeviceMaintenance3Properties m3{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES};
  VkPhysicalDeviceProperties2 p2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
  p2.pNext = &m3;
  vkGetPhysicalDeviceProperties2(dev_.phys, &p2);
  mem_.max_alloc = m3.maxMemoryAllocationSize;
  VkDeviceSize block = 64ull << 20;
  block = std::min<VkDeviceSize>(block, dev_.props.limits.maxStorageBufferRange);
  block = std::min<VkDeviceSize>(block, m3.maxMemoryAllocationSize);
  const int tensor_type = mem_.staging ? (dev >= 0 ? dev : hst) : uma;
  init_memory_limits(tensor_type, hst, cap, block);
  block = std::max(block / mem_.align * mem_.align, mem_.align);
  mem_.device_pool.init(this, static_cast<std::uint32_t>(tensor_type), !mem_.staging, false, block);
  mem_.host_pool.init(this, static_cast<std::uint32_t>(hst), true, true, std::min<VkDeviceSize>(block, 16ull << 20));

  init_pipelines(coop);
}

CoopState Context::coop_state() const {
  std::lock_guard<std::mutex> lock(switches_.coop_mu);
  return switches_.coop_state;
}
std::string Context::coop_reason() const {
  std::lock_guard<std::mutex> lock(switches_.coop_mu);
  return switches_.coop_reason;
}
void Context::set_coop_state(CoopState s, std::string reason) {
  std::lock_guard<std::mutex> lock(switches_.coop_mu);
  switches_.coop_state = s;
  switches_.coop_reason = std::move(reason);
  switches_.f16_accel.store(s == CoopState::Live && switches_.coop_on.load());
}
void Context::set_coop_enabled(bool on) {
  switches_.coop_on.store(on);
  std::string reason = coop_reason();
  set_coop_state(coop_state(), std::move(reason));
}

}  // namespace tensor::vulkan
