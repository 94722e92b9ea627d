// Run-time binding of the Vulkan loader (see runtime/loader.hpp).
#include "backends/vulkan/runtime/loader.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>

namespace tensor::vulkan {

PFN_vkGetInstanceProcAddr vkGetInstanceProcAddr = nullptr;
#define TENSOR_VK_DEFINE(name) PFN_##name name = nullptr;
TENSOR_VK_GLOBAL_FNS(TENSOR_VK_DEFINE)
TENSOR_VK_INSTANCE_FNS(TENSOR_VK_DEFINE)
#undef TENSOR_VK_DEFINE

namespace {
std::once_flag g_once;
std::string g_error;
void* g_handle = nullptr;  // never closed: function pointers stay valid until exit
}  // namespace

std::string open_loader() {
  std::call_once(g_once, [] {
    const char* override_path = std::getenv("TENSOR_VK_LOADER");
    const char* name = override_path && *override_path ? override_path : "libvulkan.so.1";
    g_handle = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (!g_handle) {
      const char* err = dlerror();
      g_error = std::string("no Vulkan loader (") + name + "): " + (err ? err : "dlopen failed");
      return;
    }
    vkGetInstanceProcAddr = reinterpret_cast<PFN_vkGetInstanceProcAddr>(dlsym(g_handle, "vkGetInstanceProcAddr"));
    if (!vkGetInstanceProcAddr) {
      g_error = std::string("Vulkan loader (") + name + ") lacks vkGetInstanceProcAddr";
      return;
    }
#define TENSOR_VK_LOAD_GLOBAL(fn)                                                             \
  fn = reinterpret_cast<PFN_##fn>(vkGetInstanceProcAddr(VK_NULL_HANDLE, #fn));                \
  if (!fn) {                                                                                  \
    g_error = std::string("Vulkan loader (") + name + ") lacks " #fn;                         \
    return;                                                                                   \
  }
    TENSOR_VK_GLOBAL_FNS(TENSOR_VK_LOAD_GLOBAL)
#undef TENSOR_VK_LOAD_GLOBAL
  });
  return g_error;
}

std::string load_instance_functions(VkInstance instance) {
#define TENSOR_VK_LOAD_INSTANCE(fn)                                              \
  fn = reinterpret_cast<PFN_##fn>(vkGetInstanceProcAddr(instance, #fn));         \
  if (!fn) return #fn;
  TENSOR_VK_INSTANCE_FNS(TENSOR_VK_LOAD_INSTANCE)
#undef TENSOR_VK_LOAD_INSTANCE
  return {};
}

}  // namespace tensor::vulkan
