// The Vulkan compute backend's entry point (used by backends/backends.cpp).
#pragma once

#include <cstdint>

#include "backends/vulkan/runtime/instance.hpp"  // validation_message_count
#include "dispatch/backend.hpp"

namespace tensor::vulkan {

// Discovers Vulkan devices with a compute queue and registers the backend; when
// there is no loader or no device it records why (note_absent) and registers nothing.
void install_vulkan_backend(dispatch::Registry& registry);

}  // namespace tensor::vulkan
