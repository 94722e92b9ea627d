// The Vulkan benchmark cases (tools/bench/bench_vulkan.cpp): run by `tensorctl bench
// --device vulkan[:N]` after the common suite, and by the `vulkan_bench` Meson
// benchmark / tools/vulkan_device_check.sh through tests/vulkan/vk_bench.
#pragma once

#include <cstdint>

namespace tensor_bench {

// Prints the Vulkan table for device `index` to stdout; returns the exit status (0).
int run_vulkan(std::uint16_t index, bool quick);

}  // namespace tensor_bench
