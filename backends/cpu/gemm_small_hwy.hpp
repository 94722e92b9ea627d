// Small f32 products in Highway (gemm_small_hwy.cpp; a normal header): the route for
// products too small for oneDNN's sgemm to pay off, which also allocates nothing (dnnl_sgemm
// mallocs its packing workspace on every call, its matmul primitive's execute several
// blocks), so a replayed graph step of small products reaches no malloc.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tensor::cpu::simd {

// Products up to this many multiply-adds, with k * n up to kSmallGemmMaxKN (B is copied to
// the stack when its rows are not contiguous), take sgemm_small_f32. Measured on the 2-core
// AVX-512 EPYC (2026-12-07): dnnl_sgemm costs 0.30-0.37 us for any product up to 32 x 16 x 8,
// the kernel below 0.03-0.2 us; at 32^3 they are about even (see gemm.cpp's call site).
inline constexpr double kSmallGemmWork = 16.0 * 1024.0;
inline constexpr std::size_t kSmallGemmMaxKN = 4096;

// c[m x n] = a[m x k] * b[k x n], c overwritten, on the calling thread, allocating nothing.
// a takes any strides (rsa, csa); b any strides (copied row-major to the stack when csb != 1;
// k * n <= kSmallGemmMaxKN); c's columns contiguous (row stride rsc). Each c[i][j] is the
// fused multiply-add chain over p = 0..k-1 in order (k == 0 gives zeros).
void sgemm_small_f32(std::size_t m, std::size_t n, std::size_t k, const float* a, std::int64_t rsa, std::int64_t csa,
                     const float* b, std::int64_t rsb, std::int64_t csb, float* c, std::int64_t rsc);

}  // namespace tensor::cpu::simd
