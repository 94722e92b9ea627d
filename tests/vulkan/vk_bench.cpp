// Vulkan backend benchmark (SPEC §8; meson test --benchmark --suite perf, and
// tools/vulkan_device_check.sh): the cases of tools/bench/bench_vulkan.cpp, the same
// ones `tensorctl bench --device vulkan` prints after the common suite. Each median
// is printed beside a reference measured in the same run.
#include "tools/bench/bench_vulkan.hpp"

int main() { return tensor_bench::run_vulkan(0, false); }
