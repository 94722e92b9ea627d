// CPU backend micro-benchmarks (meson test --benchmark --suite perf): each figure is
// printed beside a reference measured in the same run. Never a timed assertion.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "backends/cpu/cpu_info.hpp"
#include "cpu_test_util.hpp"

#include "backends/cpu/blis.hpp"

using namespace tensor;
using namespace tensor::cpu;
using namespace tensor::cpu::test;

namespace {

template <class F>
double best_seconds(int reps, F&& f) {
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    const auto t1 = std::chrono::steady_clock::now();
    best = std::min(best, std::chrono::duration<double>(t1 - t0).count());
  }
  return best;
}

Prim filled(const Shape& s, float v) { return entry<Family::Full>(OpCode::full)(s, Scalar(v), kCpuDevice, DType::F32); }

}  // namespace

int main() {
  std::printf("cpu: highway target %s, blis %s, omp threads %d\n", current_target_name(), blis_arch().c_str(),
              omp_threads());
  const auto add = entry<Family::Binary>(OpCode::add);
  constexpr std::size_t kN = 16u << 20;
  const double mb = static_cast<double>(kN) * 4 / 1e9;  // GB per operand

  {  // Elementwise add, 16 M f32.
    std::vector<float> x(kN, 1.0f), y(kN, 2.0f), z(kN);
    const double ref = best_seconds(5, [&] {
      for (std::size_t i = 0; i < kN; ++i) z[i] = x[i] + y[i];
    });
    Prim a = filled(Shape{kN}, 1.0f);
    const Prim b = filled(Shape{kN}, 2.0f);
    const double inplace = best_seconds(5, [&] { a = add(std::move(a), b); });
    const double alloc = best_seconds(5, [&] { const Prim r = add(a, b); });
    std::printf("add f32 16M: in place %.2f ms (%.1f GB/s), allocating %.2f ms (%.2fx in place); "
                "plain loop z=x+y %.2f ms (%.1f GB/s)\n",
                inplace * 1e3, 3 * mb / inplace, alloc * 1e3, alloc / inplace, ref * 1e3, 3 * mb / ref);
    const auto sum = entry<Family::Reduce>(OpCode::sum);
    const double s = best_seconds(5, [&] { const Prim r = sum(b); });
    std::printf("sum f32 16M: %.2f ms (%.1f GB/s read)\n", s * 1e3, mb / s);
  }
  {  // Per-op overhead on tiny tensors.
    const Prim a = filled(Shape{4}, 1.0f), b = filled(Shape{4}, 2.0f);
    constexpr int kIters = 200000;
    const double t = best_seconds(3, [&] {
      for (int i = 0; i < kIters; ++i) { const Prim r = add(a, b); }
    });
    std::printf("add of two [4] f32 (allocating): %.0f ns/op\n", t / kIters * 1e9);
  }
  {  // transpose -> contiguous, 4096 x 4096 f32.
    const Prim a = filled(Shape{4096, 4096}, 1.0f);
    const double t = best_seconds(3, [&] { CpuRef c = to_contiguous(as_cpu(swap_dims(a, 0, 1))); });
    std::printf("transpose->contiguous 4096x4096 f32: %.1f ms\n", t * 1e3);
  }
  for (std::size_t n : {64u, 256u, 1024u}) {  // matmul vs a direct BLIS call
    const Prim a = filled(Shape{n, n}, 0.5f), b = filled(Shape{n, n}, 0.25f);
    const int reps = n <= 256 ? 20 : 3;
    const double ours = best_seconds(reps, [&] { const Prim c = entry<Family::Matmul>(OpCode::matmul)(a, b); });
    const double flop = 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n);
#if TENSOR_HAVE_BLIS
    std::vector<float> x(n * n, 0.5f), y(n * n, 0.25f), z(n * n);
    float one = 1, zero = 0;
    const auto dn = static_cast<dim_t>(n);
    const double raw = best_seconds(reps, [&] {
      bli_sgemm(BLIS_NO_TRANSPOSE, BLIS_NO_TRANSPOSE, dn, dn, dn, &one, x.data(), dn, 1, y.data(), dn, 1, &zero,
                z.data(), dn, 1);
    });
    std::printf("matmul f32 n=%zu: %.1f GFLOP/s; direct bli_sgemm %.1f GFLOP/s (%.2fx)\n", n, flop / ours / 1e9,
                flop / raw / 1e9, raw / ours);
#else
    std::printf("matmul f32 n=%zu: %.1f GFLOP/s (no BLIS)\n", n, flop / ours / 1e9);
#endif
  }
  return 0;
}
