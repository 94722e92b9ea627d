// Internal to the runtime files (runtime/: device, memory, memory_limit, pipeline,
// stream, transfer, device_loss, spirv, instance): the constants they share and the
// embedded SPIR-V. Kernels and registration include runtime/context.hpp only.
#pragma once

#include <cstddef>
#include <cstdint>

#include "backends/vulkan/runtime/context.hpp"

namespace tensor::vulkan {

inline constexpr std::uint32_t kMaxDispatchesPerBatch = 64;
inline constexpr VkDeviceSize kParamSlotBytes = 512;  // P_WORDS * 4 rounded up
inline constexpr VkDeviceSize kParamArenaBytes = kMaxDispatchesPerBatch * kParamSlotBytes;  // one slot per dispatch
inline constexpr std::uint32_t kBindings = 5;
inline constexpr std::uint32_t kReduceWorkgroup = 64;  // reduce.comp's local_size_x
inline constexpr std::uint32_t kRowsWorkgroup = 256;   // rows.comp's

// One descriptor set of `layout` from `pool` (the eager stream's dispatches and a graph's
// pre-recorded ones take their sets alike).
inline VkDescriptorSet allocate_set(VkDevice device, VkDescriptorPool pool, VkDescriptorSetLayout layout) {
  VkDescriptorSetAllocateInfo ai{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
  ai.descriptorPool = pool;
  ai.descriptorSetCount = 1;
  ai.pSetLayouts = &layout;
  VkDescriptorSet set;
  check_vk(vkAllocateDescriptorSets(device, &ai, &set), "vkAllocateDescriptorSets");
  return set;
}

// Points the kBindings storage-buffer bindings of `set` at `infos` (the eager stream's
// dispatches and a graph's pre-recorded ones bind their sets alike).
inline void write_storage_bindings(VkDevice device, VkDescriptorSet set, const VkDescriptorBufferInfo (&infos)[kBindings]) {
  VkWriteDescriptorSet writes[kBindings];
  for (std::uint32_t i = 0; i < kBindings; ++i) {
    writes[i] = {VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET};
    writes[i].dstSet = set;
    writes[i].dstBinding = i;
    writes[i].descriptorCount = 1;
    writes[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    writes[i].pBufferInfo = &infos[i];
  }
  vkUpdateDescriptorSets(device, kBindings, writes, 0, nullptr);
}

// One shader family's SPIR-V: narrow, WIDE (null for the narrow-only families) and
// SUBGROUP (reduce and rows only) modules, and the name errors use.
struct Spirv {
  const std::uint32_t* code; std::size_t bytes; const std::uint32_t* wide; std::size_t wide_bytes; const char* name;
  const std::uint32_t* subgroup = nullptr; std::size_t subgroup_bytes = 0;
};
const Spirv& shader_spirv(ShaderFamily family);

}  // namespace tensor::vulkan
