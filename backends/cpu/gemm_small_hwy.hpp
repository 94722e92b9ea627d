// Small f32 products in Highway (gemm_small_hwy.cpp; a normal header): the route for
// products too small for oneDNN's sgemm to pay off, which also allocates nothing (dnnl_sgemm
// mallocs its packing workspace on every call, its matmul primitive's execute several
// blocks), so a replayed graph step of small products reaches no malloc.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tensor::cpu::simd {

// B is copied to the stack (row-major) when its rows are not contiguous: at most this many floats.
inline constexpr std::size_t kSmallGemmMaxKN = 4096;

// Whether an m x n x k product (B's column stride csb) takes sgemm_small_f32 rather than
// dnnl_sgemm. Single-thread medians on the 2-core AVX-512 EPYC (2026-12-07, load 4, each
// shape 21 x 1000 calls, dnnl_sgemm timed beside it): up to 32 x 16 x 8 dnnl_sgemm costs
// 0.29-0.34 us, this kernel 0.03-0.08 us; 32^3 0.56 against 0.85 us (B transposed 1.20 against
// 1.29); 64^3 4.7-4.9 against 5.3-6.4 us with B's rows contiguous, even with B transposed
// (it is copied first). Columns past the last multiple of 4 run one lane at a time: n = 10 at
// 64 x 10 x 256 took 1.9x dnnl_sgemm's time, n = 30 at 20 x 30 x 40 1.3x; those stay on
// dnnl_sgemm unless the whole product is tiny (<= 4096 multiply-adds).
inline bool use_small_gemm(std::size_t m, std::size_t n, std::size_t k, std::int64_t csb) {
  const double work = static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  if (csb != 1 && n > 1 && k * n > kSmallGemmMaxKN) return false;
  if (work <= 4096.0) return true;
  if (n % 4 != 0) return false;
  return work <= 32.0 * 32.0 * 32.0 || (csb == 1 && work <= 64.0 * 64.0 * 64.0);
}

// c[m x n] = a[m x k] * b[k x n], c overwritten, on the calling thread, allocating nothing.
// a takes any strides (rsa, csa); b any strides (copied row-major to the stack when csb != 1
// and n > 1: then k * n <= kSmallGemmMaxKN); c's columns contiguous (row stride rsc). Each c[i][j] is the
// multiply-add chain over p = 0..k-1 in order (fused where the target has FMA; k == 0 gives
// zeros).
void sgemm_small_f32(std::size_t m, std::size_t n, std::size_t k, const float* a, std::int64_t rsa, std::int64_t csa,
                     const float* b, std::int64_t rsb, std::int64_t csb, float* c, std::int64_t rsc);

}  // namespace tensor::cpu::simd
