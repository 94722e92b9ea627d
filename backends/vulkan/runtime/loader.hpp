// Run-time binding of the Vulkan loader: libvulkan.so.1 is opened with dlopen and
// every Vulkan function the backend calls is a pointer in this table, so
// libtensor.so has no link-time dependency on libvulkan (SPEC §5: no loader means
// the backend is absent, not that the library fails to load).
#pragma once

#ifndef VK_NO_PROTOTYPES
#define VK_NO_PROTOTYPES
#endif
#include <vulkan/vulkan.h>

#include <string>

// Loader-level entries (callable before an instance exists).
#define TENSOR_VK_GLOBAL_FNS(X)            \
  X(vkCreateInstance)                      \
  X(vkEnumerateInstanceLayerProperties)    \
  X(vkEnumerateInstanceExtensionProperties)

// Instance- and device-level entries, all fetched with vkGetInstanceProcAddr: for
// device functions that yields the loader's trampolines, which dispatch on the
// device handle, so one table serves every physical device.
#define TENSOR_VK_INSTANCE_FNS(X)              \
  X(vkEnumeratePhysicalDevices)                \
  X(vkEnumerateDeviceExtensionProperties)      \
  X(vkGetPhysicalDeviceProperties)             \
  X(vkGetPhysicalDeviceProperties2)            \
  X(vkGetPhysicalDeviceFeatures)               \
  X(vkGetPhysicalDeviceFeatures2)              \
  X(vkGetPhysicalDeviceMemoryProperties)       \
  X(vkGetPhysicalDeviceQueueFamilyProperties)  \
  X(vkCreateDevice)                            \
  X(vkAllocateCommandBuffers)                  \
  X(vkAllocateDescriptorSets)                  \
  X(vkAllocateMemory)                          \
  X(vkBeginCommandBuffer)                      \
  X(vkBindBufferMemory)                        \
  X(vkCmdBindDescriptorSets)                   \
  X(vkCmdBindPipeline)                         \
  X(vkCmdCopyBuffer)                           \
  X(vkCmdDispatch)                             \
  X(vkCmdPipelineBarrier)                      \
  X(vkCmdResetQueryPool)                       \
  X(vkCmdWriteTimestamp)                       \
  X(vkCreateBuffer)                            \
  X(vkCreateCommandPool)                       \
  X(vkCreateComputePipelines)                  \
  X(vkCreateDescriptorPool)                    \
  X(vkCreateDescriptorSetLayout)               \
  X(vkCreateFence)                             \
  X(vkCreatePipelineCache)                     \
  X(vkCreatePipelineLayout)                    \
  X(vkCreateQueryPool)                         \
  X(vkCreateShaderModule)                      \
  X(vkDestroyBuffer)                           \
  X(vkDestroyCommandPool)                      \
  X(vkDestroyDescriptorPool)                   \
  X(vkDestroyFence)                            \
  X(vkDestroyQueryPool)                        \
  X(vkEndCommandBuffer)                        \
  X(vkFreeMemory)                              \
  X(vkGetBufferMemoryRequirements)             \
  X(vkGetDeviceQueue)                          \
  X(vkGetFenceStatus)                          \
  X(vkGetPipelineCacheData)                    \
  X(vkGetQueryPoolResults)                     \
  X(vkMapMemory)                               \
  X(vkQueueSubmit)                             \
  X(vkResetCommandPool)                        \
  X(vkResetDescriptorPool)                     \
  X(vkResetFences)                             \
  X(vkUnmapMemory)                             \
  X(vkUpdateDescriptorSets)                    \
  X(vkWaitForFences)

namespace tensor::vulkan {

#define TENSOR_VK_DECLARE(name) extern PFN_##name name;
extern PFN_vkGetInstanceProcAddr vkGetInstanceProcAddr;
TENSOR_VK_GLOBAL_FNS(TENSOR_VK_DECLARE)
TENSOR_VK_INSTANCE_FNS(TENSOR_VK_DECLARE)
#undef TENSOR_VK_DECLARE

// Opens the loader (TENSOR_VK_LOADER names a file to use instead of
// libvulkan.so.1) and binds the loader-level entries. Returns "" on success, else
// why not ("no Vulkan loader (libvulkan.so.1): <dlerror>").
std::string open_loader();

// Binds the instance- and device-level entries; returns the first missing name or "".
std::string load_instance_functions(VkInstance instance);

}  // namespace tensor::vulkan
