// Registers every compiled-in backend with Dispatch (the only place that names them all).
#include "backends/cpu/cpu_backend.hpp"
#include "dispatch/backend.hpp"
#include "tensor/version.hpp"

#if TENSOR_HAVE_VULKAN
#include "backends/vulkan/vk_backend.hpp"
#endif

namespace tensor::dispatch {

void install_builtin_backends(Registry& registry) {
  registry.register_backend(cpu::make_cpu_backend());
#if TENSOR_HAVE_VULKAN
  vulkan::install_vulkan_backend(registry);
#else
  registry.note_absent("vulkan", "not compiled in (Vulkan disabled at configure time, or no Vulkan headers or glslc)");
#endif
}

}  // namespace tensor::dispatch
