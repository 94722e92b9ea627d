// What one physical device is and offers (runtime/device.cpp fills it): properties and
// limits, memory heaps, the compute queue, the dtypes it stores, its optional features
// (runtime/features.hpp), and, once initialised, the logical device and its queue.
// Beside it the switches of the optional paths (f16 arithmetic, cooperative matrix,
// subgroups), which tests and the benchmark flip at run time. Parts of Context
// (runtime/context.hpp), which alone reads and writes them.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>

#include "backends/vulkan/runtime/features.hpp"
#include "backends/vulkan/runtime/loader.hpp"
#include "tensor/device.hpp"
#include "tensor/dtype.hpp"

namespace tensor::vulkan {

// Throws ExecutionError naming the call and the VkResult unless r == VK_SUCCESS.
void check_vk(VkResult r, const char* what);
const char* vk_result_name(VkResult r);

// State of the cooperative-matrix path: not usable on this device, usable but not
// yet self-tested, live, or switched off by a failed self-test.
enum class CoopState : std::uint8_t { Unavailable, Untested, Live, Failed };

// Probed once when the context is made (valid before init), except `device`, `queue`
// (set by the device's init).
struct DeviceFacts {
  VkInstance instance = VK_NULL_HANDLE;
  VkPhysicalDevice phys = VK_NULL_HANDLE;
  VkPhysicalDeviceProperties props{};
  VkPhysicalDeviceMemoryProperties mem_props{};
  std::uint32_t queue_family = 0;
  std::uint16_t index = 0;
  DTypeUsageSet usage[kDTypeCount]{};
  bool wide_ok = false;     // shaderInt64 && shaderFloat64: the WIDE modules exist
  bool f16_ext = false;     // VK_KHR_shader_float16_int8 offered (enabled with f16_ok)
  bool budget_ext = false;  // VK_EXT_memory_budget offered (read once when the pool is sized)
  bool mm_ext = false;      // VK_KHR_vulkan_memory_model offered (enabled with the coopmat path)
  bool f16_ok = false;      // shaderFloat16 && storageBuffer16BitAccess (and not disabled)
  CoopFacts coop;
  SubgroupFacts sub;
  SubgroupDecision sub_reduce, sub_rows;
  std::uint32_t ts_bits = 0;  // the queue family's timestampValidBits

  VkDevice device = VK_NULL_HANDLE;
  VkQueue queue = VK_NULL_HANDLE;
};

// The optional paths' run-time state: whether each is on, and the cooperative-matrix
// path's self-test outcome.
struct FeatureSwitches {
  std::atomic<bool> f16_on{false};
  mutable std::mutex coop_mu;  // coop_state, coop_reason
  CoopState coop_state = CoopState::Unavailable;
  std::string coop_reason;
  std::atomic<bool> coop_on{true};
  std::atomic<bool> f16_accel{false};  // coop_state == Live && coop_on
  std::atomic<bool> sub_on{false};
  // graph_build fuses elementwise runs of at most this many elements (0: none), unless
  // TENSOR_VK_GRAPH_FUSION_MAX says otherwise at capture; set by the device's init.
  std::atomic<std::uint32_t> fuse_max{0};
};

}  // namespace tensor::vulkan
