// Internal: the Vulkan op entries (vk_ops.cpp) and the random generator state.
#pragma once

#include <cstdint>

#include "dispatch/backend.hpp"

namespace tensor::vulkan {

void register_ops(dispatch::Backend& b);
void seed_device(DeviceId device, std::uint64_t seed);

}  // namespace tensor::vulkan
