// Single-thread timing of the medium f32 kernel (backends/cpu/gemm_medium_hwy.cpp) against
// dnnl_sgemm on the same operands, interleaved rounds, medians: the measurements behind
// use_medium_gemm. Usage: gemm_medium_bench [rounds] (default 21; GEMM_BENCH_ONLY=i runs the i-th shape alone). Prints one line per shape:
// m n k layout, ours us, dnnl us, ratio, and the gate's choice. GEMM_BENCH_AVX2=1 runs ours on
// Highway's AVX2 target (set ONEDNN_MAX_CPU_ISA=AVX2 beside it for a like-for-like dnnl_sgemm):
// an AVX2-only CPU's comparison on an AVX-512 machine.
#include <hwy/targets.h>
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "backends/cpu/gemm_medium_hwy.hpp"

namespace {

struct Shape {
  std::size_t m, n, k;
  bool ta, tb;          // A stored transposed (rsa == 1), B stored transposed (rsb == 1)
  std::int64_t lda, ldb;  // leading dims (0: tight)
  const char* what;
};

double now_us() {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 21;
  omp_set_num_threads(1);
  if (const char* e = std::getenv("GEMM_BENCH_AVX2"); e != nullptr && e[0] == '1') {
    const std::int64_t avx2 = HWY_AVX2 | HWY_SSE4 | HWY_SSSE3 | HWY_EMU128 | HWY_SCALAR;
    if ((hwy::SupportedTargets() & HWY_AVX2) == 0) {
      std::fprintf(stderr, "gemm_medium_bench: this CPU has no AVX2\n");
      return 1;
    }
    hwy::SetSupportedTargetsForTest(avx2 & hwy::SupportedTargets());
  }
  const Shape shapes[] = {
      {64, 256, 784, false, false, 0, 0, "mlp fwd1 (1 thread)"},
      {64, 64, 784, false, false, 0, 256, "mlp fwd1 slab (2 threads)"},
      {64, 10, 256, false, false, 0, 0, "mlp fwd2"},
      {256, 10, 64, true, false, 0, 0, "mlp dW2 = H^T dY"},
      {64, 256, 10, false, true, 0, 0, "mlp dH = dY W2^T"},
      {784, 256, 64, true, false, 0, 0, "mlp dW1 = X^T dH (1 thread)"},
      {98, 256, 64, true, false, 784, 0, "mlp dW1 slab (2 threads)"},
      {96, 96, 96, false, false, 0, 0, "square"},
      {128, 128, 128, false, false, 0, 0, "square"},
      {64, 128, 128, false, false, 0, 0, "square 128 slab"},
      {192, 192, 192, false, false, 0, 0, "square"},
      {256, 256, 256, false, false, 0, 0, "square"},
      {64, 256, 256, false, false, 0, 0, "square 256 slab"},
      {128, 128, 128, false, true, 0, 0, "square B^T"},
      {128, 128, 128, true, false, 0, 0, "square A^T"},
      {100, 30, 300, false, false, 0, 0, "odd"},
      {33, 1000, 17, false, false, 0, 0, "odd wide"},
      {512, 512, 512, false, false, 0, 0, "square"},
      {100, 32, 300, false, false, 0, 0, "2 vectors"},
      {100, 48, 300, false, false, 0, 0, "3 vectors"},
      {100, 20, 300, false, false, 0, 0, "1.25 vectors"},
      {64, 96, 256, false, false, 0, 0, "6 vectors"},
      {256, 64, 1024, false, false, 0, 0, "long k"},
      {384, 384, 384, false, false, 0, 0, "square"},
      {64, 1024, 1024, false, false, 0, 0, "wide"},
      {64, 256, 10, false, false, 0, 0, "dH's shape, B not transposed"},
      {64, 256, 12, false, true, 0, 0, "dH's shape, k = 12"},
      {20, 12, 40, false, false, 0, 0, "small, n < 16"},
      {16, 10, 100, true, false, 0, 0, "small, n < 16"},
      {8, 48, 64, false, true, 0, 0, "small"},
      {300, 64, 300, false, false, 0, 0, "medium"},
      {1000, 16, 500, true, false, 0, 0, "tall"},
      {1, 4096, 4096, false, false, 0, 0, "GEMV, 64 MiB of B"},
      {1, 256, 784, false, false, 0, 0, "GEMV, the MLP's W1"},
      {4, 256, 784, false, false, 0, 0, "4 rows, the MLP's W1"},
      {8, 1024, 1024, false, false, 0, 0, "8 rows, 4 MiB of B"},
      {16, 1024, 1024, false, false, 0, 0, "16 rows, 4 MiB of B"},
      {32, 512, 1024, false, false, 0, 0, "32 rows, 2 MiB of B"},
      {2, 2048, 2048, false, false, 0, 0, "2 rows, 16 MiB of B"},
  };
  // GEMM_BENCH_ONLY=i: only the i-th shape (for a profiler).
  const char* only = std::getenv("GEMM_BENCH_ONLY");
  int index = -1;
  for (const Shape& s : shapes) {
    ++index;
    if (only != nullptr && std::atoi(only) != index) continue;
    const auto m = static_cast<std::int64_t>(s.m), n = static_cast<std::int64_t>(s.n), k = static_cast<std::int64_t>(s.k);
    const std::int64_t lda = s.lda ? s.lda : (s.ta ? m : k), ldb = s.ldb ? s.ldb : (s.tb ? k : n);
    std::vector<float> a(static_cast<std::size_t>(lda * (s.ta ? k : m))), b(static_cast<std::size_t>(ldb * (s.tb ? n : k))),
        c(static_cast<std::size_t>(m * n));
    for (std::size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i % 17) * 0.01f;
    for (std::size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>(i % 13) * 0.02f;
    const std::int64_t rsa = s.ta ? 1 : lda, csa = s.ta ? lda : 1, rsb = s.tb ? 1 : ldb, csb = s.tb ? ldb : 1;
    auto ours = [&] {
      tensor::cpu::simd::sgemm_medium_f32(s.m, s.n, s.k, 1.0f, a.data(), rsa, csa, b.data(), rsb, csb, 0.0f, c.data(), n);
    };
    auto dnnl = [&] {
      dnnl_sgemm(s.ta ? 'T' : 'N', s.tb ? 'T' : 'N', m, n, k, 1.0f, a.data(), lda, b.data(), ldb, 0.0f, c.data(), n);
    };
    const double flops = static_cast<double>(m * n * k);
    const int reps = std::max(1, static_cast<int>(4e6 / flops));
    for (int w = 0; w < 3; ++w) ours(), dnnl();
    std::vector<double> to, td;
    for (int r = 0; r < rounds; ++r) {
      for (int which = 0; which < 2; ++which) {
        const bool first_ours = (r % 2 == 0) == (which == 0);
        const double t0 = now_us();
        for (int i = 0; i < reps; ++i) first_ours ? ours() : dnnl();
        (first_ours ? to : td).push_back((now_us() - t0) / reps);
      }
    }
    std::nth_element(to.begin(), to.begin() + rounds / 2, to.end());
    std::nth_element(td.begin(), td.begin() + rounds / 2, td.end());
    const double mo = to[rounds / 2], md = td[rounds / 2];
    std::printf("%4zu %4zu %4zu %c%c  ours %8.2f us  dnnl %8.2f us  ours/dnnl %.3f  gate %s  (%s)\n", s.m, s.n, s.k,
                s.ta ? 'T' : 'N', s.tb ? 'T' : 'N', mo, md, mo / md,
                tensor::cpu::simd::use_medium_gemm(s.m, s.n, s.k, rsa, csa, rsb, csb) ? "ours" : "dnnl", s.what);
  }
  return 0;
}
