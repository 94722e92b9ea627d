// The Vulkan instance (with the validation layer and a counting debug messenger when
// TENSOR_VK_VALIDATION=1), device discovery and the process-wide list of contexts.

// Vulkan structs are initialised as `VkFoo info{VK_STRUCTURE_TYPE_FOO}` with the
// remaining members zeroed by the language; that is the intended idiom here.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#include "backends/vulkan/runtime/instance.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "backends/vulkan/runtime/context.hpp"
#include "backends/vulkan/runtime/loader.hpp"

namespace tensor::vulkan {
namespace {

std::atomic<std::uint64_t> g_validation_messages{0};

struct Global {
  VkInstance instance = VK_NULL_HANDLE;
  VkDebugUtilsMessengerEXT messenger = VK_NULL_HANDLE;
  std::vector<std::unique_ptr<Context>> contexts;
};
Global& global() {
  static Global* g = new Global();  // never destroyed: tensors may outlive statics
  return *g;
}

VKAPI_ATTR VkBool32 VKAPI_CALL debug_callback(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                              VkDebugUtilsMessageTypeFlagsEXT,
                                              const VkDebugUtilsMessengerCallbackDataEXT* data, void*) {
  if (severity & (VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT)) {
    g_validation_messages.fetch_add(1, std::memory_order_relaxed);
    std::fprintf(stderr, "[vulkan validation] %s\n", data && data->pMessage ? data->pMessage : "(no message)");
  }
  return VK_FALSE;
}

bool env_is(const char* name, const char* value) {
  const char* v = std::getenv(name);
  return v && std::strcmp(v, value) == 0;
}

}  // namespace

// Creates the instance and finds the devices; returns why not on failure.
std::string discover_devices() {
  Global& g = global();
  if (std::string why = open_loader(); !why.empty()) return why;
  const bool validation = env_is("TENSOR_VK_VALIDATION", "1");
  std::vector<const char*> layers, exts;
  if (validation) {
    std::uint32_t n = 0;
    std::vector<VkLayerProperties> props;
    if (vkEnumerateInstanceLayerProperties(&n, nullptr) == VK_SUCCESS) {
      props.resize(n);
      if (vkEnumerateInstanceLayerProperties(&n, props.data()) != VK_SUCCESS) props.clear();
      props.resize(std::min<std::size_t>(props.size(), n));
    }
    bool found = false;
    for (const auto& p : props) found = found || std::strcmp(p.layerName, "VK_LAYER_KHRONOS_validation") == 0;
    if (found) {
      layers.push_back("VK_LAYER_KHRONOS_validation");
      exts.push_back(VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
    } else {
      // Asked for validation but cannot have it: say so, and count it, so tests that
      // assert a clean run do not pass unvalidated.
      g_validation_messages.fetch_add(1);
      std::fprintf(stderr, "[vulkan validation] TENSOR_VK_VALIDATION=1 but VK_LAYER_KHRONOS_validation is not installed\n");
    }
  }
  VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO};
  app.pApplicationName = "libtensor";
  app.pEngineName = "libtensor";
  app.apiVersion = VK_API_VERSION_1_1;
  VkInstanceCreateInfo ci{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
  ci.pApplicationInfo = &app;
  ci.enabledLayerCount = static_cast<std::uint32_t>(layers.size());
  ci.ppEnabledLayerNames = layers.data();
  ci.enabledExtensionCount = static_cast<std::uint32_t>(exts.size());
  ci.ppEnabledExtensionNames = exts.data();
  VkDebugUtilsMessengerCreateInfoEXT mi{VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT};
  mi.messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
  mi.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT;
  mi.pfnUserCallback = debug_callback;
  if (!layers.empty()) ci.pNext = &mi;  // also covers vkCreateInstance itself
  VkResult r = vkCreateInstance(&ci, nullptr, &g.instance);
  if (r != VK_SUCCESS) return fmt::format("vkCreateInstance failed ({})", vk_result_name(r));
  if (std::string missing = load_instance_functions(g.instance); !missing.empty())
    return fmt::format("the Vulkan loader lacks {}", missing);
  if (!layers.empty()) {
    auto create = reinterpret_cast<PFN_vkCreateDebugUtilsMessengerEXT>(
        vkGetInstanceProcAddr(g.instance, "vkCreateDebugUtilsMessengerEXT"));
    if (create && create(g.instance, &mi, nullptr, &g.messenger) != VK_SUCCESS) {
      g_validation_messages.fetch_add(1);  // asked for validation but cannot see its messages
      std::fprintf(stderr, "[vulkan validation] vkCreateDebugUtilsMessengerEXT failed\n");
    }
  }
  std::uint32_t n = 0;
  r = vkEnumeratePhysicalDevices(g.instance, &n, nullptr);
  if (r != VK_SUCCESS) return fmt::format("vkEnumeratePhysicalDevices failed ({})", vk_result_name(r));
  std::vector<VkPhysicalDevice> phys(n);
  if (n) {
    r = vkEnumeratePhysicalDevices(g.instance, &n, phys.data());
    if (r != VK_SUCCESS && r != VK_INCOMPLETE) return fmt::format("vkEnumeratePhysicalDevices failed ({})", vk_result_name(r));
    phys.resize(n);
  }
  for (VkPhysicalDevice p : phys) {
    std::uint32_t qn = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(p, &qn, nullptr);
    std::vector<VkQueueFamilyProperties> qs(qn);
    vkGetPhysicalDeviceQueueFamilyProperties(p, &qn, qs.data());
    for (std::uint32_t q = 0; q < qn; ++q) {
      if (qs[q].queueFlags & VK_QUEUE_COMPUTE_BIT) {
        g.contexts.push_back(std::make_unique<Context>(g.instance, p, q, static_cast<std::uint16_t>(g.contexts.size())));
        break;
      }
    }
  }
  if (g.contexts.empty()) return n ? "no Vulkan device with a compute queue" : "no Vulkan physical device";
  return {};
}

std::uint64_t validation_message_count() { return g_validation_messages.load(); }

Context* context(std::uint16_t index) {
  auto& c = global().contexts;
  return index < c.size() ? c[index].get() : nullptr;
}
std::size_t context_count() { return global().contexts.size(); }

}  // namespace tensor::vulkan
