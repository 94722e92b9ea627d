// Vulkan backend benchmark (SPEC §8; meson test --benchmark --suite perf): each case's
// median beside a reference measured in the same run: matmul GFLOP/s beside the CPU
// backend's (BLIS); elementwise add/exp and sum over N f32 beside a plain buffer copy
// (vkCmdCopyBuffer) on the same device; per-op overhead of a tiny add, including
// submission and the wait. Sizes shrink on lavapipe (software) so a run stays short.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include <tensor/tensor.hpp>

#include "backends/vulkan/vk_context.hpp"
#include "dispatch/dispatch.hpp"

namespace {

using namespace tensor;
namespace d = tensor::dispatch;
using DT = d::DispatchTensor;
using Clock = std::chrono::steady_clock;

const DeviceId kCpu{kCpuDeviceType, 0};
const DeviceId kVk{kVulkanDeviceType, 0};

// Median seconds of `reps` runs of f (after one warm-up run).
double median_s(int reps, const std::function<void()>& f) {
  f();
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    const auto t0 = Clock::now();
    f();
    t.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

DT filled(DeviceId dev, const Shape& s, DType dt, double v) {
  return d::full(s, Scalar(v), dev, d::Kind::Float, dt);
}

void row(const std::string& name, const std::string& value, const std::string& ref, const std::string& ratio) {
  std::printf("%-34s %18s   %-30s %s\n", name.c_str(), value.c_str(), ref.c_str(), ratio.c_str());
}
std::string fmt1(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

}  // namespace

int main() {
  if (d::device_count(kVulkanDeviceType) == 0) {
    std::printf("no Vulkan device: nothing to measure\n");
    return 0;
  }
  const std::string name = d::backend_name(kVk);
  const bool software = name.find("llvmpipe") != std::string::npos;
  std::printf("device: %s%s\n", name.c_str(), software ? " (software: reduced sizes)" : "");
  std::printf("%-34s %18s   %-30s %s\n", "case", "median", "reference (same run)", "ratio");

  // ---- matmul ----
  std::vector<std::size_t> sizes = software ? std::vector<std::size_t>{256, 512, 1024}
                                            : std::vector<std::size_t>{256, 512, 1024, 2048, 4096};
  for (DType dt : {DType::F32, DType::F16}) {
    if (!d::supports_dtype(kVk, dt)) continue;
    for (std::size_t n : sizes) {
      const double flop = 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n);
      const int reps = software ? (n >= 1024 ? 3 : 5) : (n >= 2048 ? 5 : 10);
      DT a = filled(kVk, Shape{n, n}, dt, 0.5), b = filled(kVk, Shape{n, n}, dt, 0.25);
      const double tv = median_s(reps, [&] { DT c = d::matmul(a, b); d::sync(kVk); });
      std::string ref = "-";
      std::string ratio;
      if (n <= 2048 && dt == DType::F32) {  // CPU reference (BLIS); larger n would dominate the run
        DT ca = filled(kCpu, Shape{n, n}, dt, 0.5), cb = filled(kCpu, Shape{n, n}, dt, 0.25);
        const double tc = median_s(software ? 3 : 3, [&] { DT c = d::matmul(ca, cb); d::sync(kCpu); });
        ref = fmt1("cpu %.1f GFLOP/s", flop / tc * 1e-9);
        ratio = fmt1("x%.2f", tc / tv);
      }
      row(std::string("matmul ") + std::string(dtype_name(dt)) + " n=" + std::to_string(n),
          fmt1("%.1f GFLOP/s", flop / tv * 1e-9), ref, ratio);
    }
  }

  // ---- bandwidth: copy reference, elementwise, sum ----
  const std::size_t n = software ? (std::size_t{4} << 20) : (std::size_t{16} << 20);
  const double bytes = static_cast<double>(n) * 4.0;
  const int reps = software ? 5 : 20;
  vulkan::Context& ctx = *vulkan::context(0);
  vulkan::BufRef src = ctx.allocate(n * 4), dst = ctx.allocate(n * 4);
  const double tcopy = median_s(reps, [&] { ctx.copy(*src, *dst, n * 4); ctx.sync(); });
  const double copy_gbs = 2.0 * bytes / tcopy * 1e-9;  // read + write
  const std::string copy_ref = fmt1("copy %.1f GB/s", copy_gbs);
  row("buffer copy " + std::to_string(n >> 20) + "M f32", fmt1("%.1f GB/s", copy_gbs), "(reference)", "");
  DT x = filled(kVk, Shape{n}, DType::F32, 1.5), y = filled(kVk, Shape{n}, DType::F32, 2.5);
  const double tadd = median_s(reps, [&] { DT z = d::binary(OpCode::add, x, y); d::sync(kVk); });
  row("add " + std::to_string(n >> 20) + "M f32 (allocating)", fmt1("%.1f GB/s", 3.0 * bytes / tadd * 1e-9), copy_ref,
      fmt1("%.0f%% of copy", 100.0 * 3.0 * bytes / tadd * 1e-9 / copy_gbs));
  const double texp = median_s(reps, [&] { DT z = d::unary(OpCode::exp, x); d::sync(kVk); });
  row("exp " + std::to_string(n >> 20) + "M f32 (allocating)", fmt1("%.1f GB/s", 2.0 * bytes / texp * 1e-9), copy_ref,
      fmt1("%.0f%% of copy", 100.0 * 2.0 * bytes / texp * 1e-9 / copy_gbs));
  const double tsum = median_s(reps, [&] { DT z = d::reduce(OpCode::sum, x); d::sync(kVk); });
  row("sum " + std::to_string(n >> 20) + "M f32", fmt1("%.1f GB/s", bytes / tsum * 1e-9), copy_ref,
      fmt1("%.0f%% of copy", 100.0 * bytes / tsum * 1e-9 / copy_gbs));

  // ---- per-op overhead ----
  DT s1 = filled(kVk, Shape{4}, DType::F32, 1.0), s2 = filled(kVk, Shape{4}, DType::F32, 2.0);
  const int ops = 1000;
  const double tloop = median_s(5, [&] {
    for (int i = 0; i < ops; ++i) { DT z = d::binary(OpCode::add, s1, s2); }
    d::sync(kVk);
  });
  const double tone = median_s(50, [&] { DT z = d::binary(OpCode::add, s1, s2); d::sync(kVk); });
  DT c1 = filled(kCpu, Shape{4}, DType::F32, 1.0), c2 = filled(kCpu, Shape{4}, DType::F32, 2.0);
  const double tcpu = median_s(5, [&] { for (int i = 0; i < ops; ++i) { DT z = d::binary(OpCode::add, c1, c2); } });
  row("add [4] f32, 1000 queued + 1 wait", fmt1("%.2f us/op", tloop / ops * 1e6), fmt1("cpu %.3f us/op", tcpu / ops * 1e6), "");
  row("add [4] f32 + wait (round trip)", fmt1("%.1f us", tone * 1e6), "", "");
  return 0;
}
