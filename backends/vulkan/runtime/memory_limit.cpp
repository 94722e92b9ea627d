// TENSOR_VK_MEMORY_LIMIT's syntax and the pools' limits from the heaps (their sizes or
// VK_EXT_memory_budget budgets) and that variable.

// Vulkan structs are initialised as `VkFoo info{VK_STRUCTURE_TYPE_FOO}` with the
// remaining members zeroed by the language; that is the intended idiom here.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#include "backends/vulkan/runtime/internal.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "tensor/error.hpp"

namespace tensor::vulkan {

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
  for (std::uint32_t h = 0; h < dev_.mem_props.memoryHeapCount; ++h) heap_bytes[h] = dev_.mem_props.memoryHeaps[h].size;
  const char* heap_what = "the memory heap's size";
  auto props2 = reinterpret_cast<PFN_vkGetPhysicalDeviceMemoryProperties2>(
      vkGetInstanceProcAddr(dev_.instance, "vkGetPhysicalDeviceMemoryProperties2"));
  if (dev_.budget_ext && props2) {
    VkPhysicalDeviceMemoryBudgetPropertiesEXT budget{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_BUDGET_PROPERTIES_EXT};
    VkPhysicalDeviceMemoryProperties2 mp{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_PROPERTIES_2};
    mp.pNext = &budget;
    props2(dev_.phys, &mp);
    for (std::uint32_t h = 0; h < mp.memoryProperties.memoryHeapCount; ++h)
      if (budget.heapBudget[h] > 0) heap_bytes[h] = std::min(heap_bytes[h], budget.heapBudget[h]);
    heap_what = "the memory heap's budget (VK_EXT_memory_budget)";
  }
  const std::uint32_t th = dev_.mem_props.memoryTypes[tensor_type].heapIndex;
  const std::uint32_t sh = dev_.mem_props.memoryTypes[staging_type].heapIndex;
  VkDeviceSize limit = heap_bytes[th];
  std::string source = fmt::format("{}, heap {}", heap_what, th);
  if (cap && cap < limit) {
    limit = cap;
    source = "TENSOR_VK_MEMORY_LIMIT";
  }
  // Blocks of at most a quarter of the limit, so that a small limit still holds a few.
  block = std::min<VkDeviceSize>(block, limit / 4);
  const bool shared = th == sh;  // one heap for both pools (UMA, lavapipe)
  mem_.device_pool.set_limits(limit, std::move(source), heap_bytes[th], shared ? &mem_.host_pool : nullptr);
  mem_.host_pool.set_limits(heap_bytes[sh], fmt::format("{}, heap {}", heap_what, sh), heap_bytes[sh],
                        shared ? &mem_.device_pool : nullptr);
}

}  // namespace tensor::vulkan
