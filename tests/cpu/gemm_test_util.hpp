// Operands of the f32 product tests (small and medium kernels): exact values and a padded,
// optionally transposed or strided layout of A [m x k], B [k x n] and C [m x n].
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace tensor::cpu::test {

// Multiples of 1/8 and 1/4 in [-0.75, 1.25]: every product and partial sum of the tests'
// sizes is exact in f32, so any summation order gives the loop's value exactly.
inline float gemm_a_value(std::size_t i) { return static_cast<float>(static_cast<int>(i * 7 % 13) - 6) / 8.0f; }
inline float gemm_b_value(std::size_t i) { return static_cast<float>(static_cast<int>(i * 5 % 11) - 5) / 4.0f; }

// A stored transposed (ta) or not with a padded leading dim, B likewise (gap > 1: elements
// `gap` apart in both dims: general strides), C with row stride n + 3; the buffer sizes.
struct GemmLayout {
  std::int64_t rsa, csa, rsb, csb, rsc;
  std::size_t a_size, b_size, c_size;
};
inline GemmLayout gemm_layout(std::size_t m, std::size_t n, std::size_t k, bool ta, bool tb, std::int64_t gap) {
  const std::int64_t a_ld = static_cast<std::int64_t>(ta ? m : k) * gap + 3;
  const std::int64_t b_ld = static_cast<std::int64_t>(tb ? k : n) * gap + 2;
  const auto rsc = static_cast<std::int64_t>(n) + 3;
  return {ta ? gap : a_ld,
          ta ? a_ld : gap,
          tb ? gap : b_ld,
          tb ? b_ld : gap,
          rsc,
          static_cast<std::size_t>(a_ld) * (std::max(m, k) + 1),
          static_cast<std::size_t>(b_ld) * (std::max(n, k) + 1),
          static_cast<std::size_t>(rsc) * std::max<std::size_t>(m, 1)};
}

}  // namespace tensor::cpu::test
