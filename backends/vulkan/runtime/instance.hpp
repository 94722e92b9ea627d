// Internal: the Vulkan instance and device discovery (runtime/instance.cpp). The contexts
// it creates are reached through context() / context_count() (runtime/context.hpp).
#pragma once

#include <cstdint>
#include <string>

namespace tensor::vulkan {

// Opens the loader, creates the instance (validation layer and a counting messenger
// when TENSOR_VK_VALIDATION=1) and one Context per physical device with a compute
// queue. Returns why not (empty on success); call once.
std::string discover_devices();

// Validation-layer messages (warnings and errors) seen since start; tests assert 0.
std::uint64_t validation_message_count();

}  // namespace tensor::vulkan
