// Medium f32 products in Highway (gemm_medium_hwy.cpp; a normal header): a register-blocked
// kernel for the products between the small kernel's (gemm_small_hwy.hpp, up to 64^3) and the
// sizes where dnnl_sgemm's own blocking pays off. It allocates nothing per call: B is packed
// into a per-thread buffer that grows to the largest block it has held and is kept, where
// dnnl_sgemm mallocs its packing buffer on every call (a replayed MLP 784-256-10 step made 15
// host allocations, all of them there).
#pragma once

#include <cstddef>
#include <cstdint>

namespace tensor::cpu::simd {

// Whether the gate can take the kernel at all: Highway's dispatched target has 512-bit vectors
// (the 8 x 3 tiles measured against dnnl_sgemm; follows SetSupportedTargetsForTest).
bool medium_gemm_live();

// Whether sgemm takes an m x n x k product (A's strides rsa, csa; B's rsb, csb) on
// sgemm_medium_f32 rather than dnnl_sgemm. Defined in gemm_medium_hwy.cpp, where the
// measurements that set it are written.
bool use_medium_gemm(std::size_t m, std::size_t n, std::size_t k, std::int64_t rsa, std::int64_t csa,
                     std::int64_t rsb, std::int64_t csb);

// c[m x n] = alpha * a[m x k] * b[k x n] + beta * c on the calling thread. a and b take any
// strides; c's columns are contiguous (row stride rsc). beta == 0 overwrites c (NaN in c does
// not propagate); k == 0 gives beta * c (zeros when beta == 0). B is packed (times alpha) into
// a thread_local buffer of kMediumKC x 3 vectors of floats (48 KiB at AVX-512) where its rows
// are not contiguous or a panel is partial, allocated the first time a thread needs it and kept. Each c[i][j] (alpha == 1,
// beta == 0) is the multiply-add chain over p = 0..k-1 in order, fused where the target has
// FMA: k blocks continue the chain from c.
void sgemm_medium_f32(std::size_t m, std::size_t n, std::size_t k, float alpha, const float* a, std::int64_t rsa,
                      std::int64_t csa, const float* b, std::int64_t rsb, std::int64_t csb, float beta, float* c,
                      std::int64_t rsc);

// Blocking: k in blocks of kMediumKC; a micro-panel of B, 3 vectors of columns (48 at AVX-512)
// by 256 rows, is 48 KiB, re-read from L1/L2 by every tile of rows of c.
inline constexpr std::size_t kMediumKC = 512;

// The thread's packing buffer, at least `floats` long (64-byte aligned); internal to the kernel.
float* medium_pack_buffer(std::size_t floats);

}  // namespace tensor::cpu::simd
