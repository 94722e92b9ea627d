// Vulkan backend benchmark (SPEC §8; meson test --benchmark --suite perf, and
// tools/vulkan_device_check.sh): the cases of tools/bench/bench_vulkan.cpp, the same
// ones `tensorctl bench --device vulkan` prints after the common suite. Each median
// is printed beside a reference measured in the same run.
//
// `vk_bench --startup` instead prints the time from process start to the first
// results of a few ops (device creation, pipeline creation, one readback) and then
// to a second batch of new pipelines: run it with an empty and with a filled
// $XDG_CACHE_HOME, and with TENSOR_VK_PIPELINE_CACHE=0, to see what the on-disk
// pipeline cache saves (tools/vulkan_device_check.sh does).
#include <chrono>
#include <cstdio>
#include <cstring>

#include <tensor/tensor.hpp>

#include "tools/bench/bench_vulkan.hpp"

namespace {

int startup() {
  using namespace tensor;
  using Ms = std::chrono::duration<double, std::milli>;
  const auto t0 = std::chrono::steady_clock::now();
  const Device dev = Device::parse("vulkan");
  const auto a = Tensor<2>::full({64, 64}, 0.5f, dev), b = Tensor<2>::full({64, 64}, 0.25f, dev);
  const auto first = (a + b).exp().matmul(b).sum_dim(1).into_data().to_vec<float>();
  const auto t1 = std::chrono::steady_clock::now();
  const auto second = (a * b).max().into_data().to_vec<float>();
  const auto t2 = std::chrono::steady_clock::now();
  std::printf("startup: first results %.1f ms, next new pipelines %.1f ms (check %g %g)\n", Ms(t1 - t0).count(),
              Ms(t2 - t1).count(), static_cast<double>(first[0]), static_cast<double>(second[0]));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "--startup") == 0) return startup();
  return tensor_bench::run_vulkan(0, false);
}
