// bf16 x bf16 -> bf16 matrix product on the AVX512_BF16 dot instruction (vdpbf16ps),
// accumulated in f32 and rounded to bf16 once. Highway 1.0.3 (Debian 12) has no
// target that emits vdpbf16ps, so this one kernel is written with the intrinsic in a
// function compiled for that extension only and chosen at run time from the CPU's
// feature bits.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tensor::cpu {

// Whether gemm_bf16 runs on this CPU (AVX512F + AVX512BW + AVX512_BF16), and so
// whether bf16 matmul takes it; false where the library was built without it.
bool bf16_dot_live();

// c[m x n] = a[m x k] * b[k x n] for bf16 bits, strides in elements (any sign, any
// layout: both operands are packed). Needs bf16_dot_live(). Uses parallel_chunks.
void gemm_bf16(std::size_t m, std::size_t n, std::size_t k, const std::uint16_t* a, std::int64_t rsa, std::int64_t csa,
               const std::uint16_t* b, std::int64_t rsb, std::int64_t csb, std::uint16_t* c, std::int64_t rsc,
               std::int64_t csc);

}  // namespace tensor::cpu
