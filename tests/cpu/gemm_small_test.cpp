// The small f32 product kernel (backends/cpu/gemm_small_hwy.cpp) against a plain triple
// loop: every column block width (full vectors, 8, 4, scalar tail), row counts around its
// 4-row tile, transposed / strided / padded operands, k = 0 and 1, m or n = 1, padding of c
// left alone; and the matmul entry on the shapes that reach it (single, batched, broadcast).
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <hwy/targets.h>

#include "backends/cpu/cpu_info.hpp"
#include "backends/cpu/gemm_small_hwy.hpp"
#include "cpu_test_util.hpp"
#include "gemm_test_util.hpp"

namespace tensor::cpu::test {
namespace {

// A [m x k] stored transposed or not with a padded leading dim (gap > 1: elements `gap`
// apart in both dims), B [k x n] likewise, C [m x n] with row stride n + 3 (NaN-filled).
void check(std::size_t m, std::size_t n, std::size_t k, bool ta, bool tb, std::int64_t gap) {
  SCOPED_TRACE(::testing::Message() << "m=" << m << " n=" << n << " k=" << k << " ta=" << ta << " tb=" << tb
                                    << " gap=" << gap);
  const auto [rsa, csa, rsb, csb, rsc, a_size, b_size, c_size] = gemm_layout(m, n, k, ta, tb, gap);
  std::vector<float> a(a_size), b(b_size);
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = gemm_a_value(i);
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = gemm_b_value(i);
  std::vector<float> c(c_size, std::numeric_limits<float>::quiet_NaN());
  simd::sgemm_small_f32(m, n, k, a.data(), rsa, csa, b.data(), rsb, csb, c.data(), rsc);
  for (std::size_t i = 0; i < m; ++i) {
    for (std::size_t j = 0; j < n; ++j) {
      double s = 0;
      for (std::size_t p = 0; p < k; ++p)
        s += static_cast<double>(a[static_cast<std::size_t>(static_cast<std::int64_t>(i) * rsa + static_cast<std::int64_t>(p) * csa)]) *
             b[static_cast<std::size_t>(static_cast<std::int64_t>(p) * rsb + static_cast<std::int64_t>(j) * csb)];
      ASSERT_EQ(c[i * static_cast<std::size_t>(rsc) + j], static_cast<float>(s)) << "at " << i << ", " << j;
    }
    for (std::size_t j = n; j < static_cast<std::size_t>(rsc); ++j)
      ASSERT_TRUE(std::isnan(c[i * static_cast<std::size_t>(rsc) + j])) << "padding written at " << i << ", " << j;
  }
}

TEST(CpuGemmSmall, EveryColumnBlockAndRowTileAgainstALoop) {
  for (const std::size_t n : {1, 2, 3, 4, 5, 7, 8, 9, 12, 15, 16, 17, 20, 24, 28, 31, 32, 33, 40})
    for (const std::size_t m : {1, 3, 4, 5, 8, 9})
      for (const std::size_t k : {1, 4, 13}) check(m, n, k, false, false, 1);
}

// The same on every Highway target this build compiled (SSE2 .. AVX-512): their column
// blocks are 4, 8 or 16 lanes wide, and the 1-lane tail differs with them.
TEST(CpuGemmSmall, EveryCompiledTarget) {
  for_each_compiled_target([](std::int64_t) {
    for (const std::size_t n : {1, 3, 4, 7, 8, 13, 16, 21, 33})
      for (const bool tb : {false, true}) check(5, n, 9, !tb, tb, 1);
  });
}

TEST(CpuGemmSmall, TransposedStridedAndPaddedOperands) {
  for (const bool ta : {false, true})
    for (const bool tb : {false, true})
      for (const std::int64_t gap : {1, 3})
        for (const auto [m, n, k] : {std::array<std::size_t, 3>{8, 16, 32}, std::array<std::size_t, 3>{8, 4, 16},
                                     std::array<std::size_t, 3>{16, 4, 8}, std::array<std::size_t, 3>{32, 16, 8},
                                     std::array<std::size_t, 3>{1, 19, 7}, std::array<std::size_t, 3>{6, 1, 9},
                                     std::array<std::size_t, 3>{5, 21, 1}, std::array<std::size_t, 3>{64, 64, 4}})
          check(m, n, k, ta, tb, gap);
}

TEST(CpuGemmSmall, EmptyInnerDimGivesZeros) {
  for (const bool tb : {false, true}) {
    check(5, 9, 0, false, tb, 1);
    check(4, 17, 0, true, tb, 2);
  }
}

// Through the matmul entry: products at and around the size that routes here, single,
// transposed, batched (each product of a batch on the kernel) and broadcast, checked
// against a loop on the same host values.
Prim f32(const std::vector<float>& v, const Shape& s) {
  return entry<Family::FromData>(OpCode::from_data)(TensorData::from(v, s), kCpuDevice);
}
std::vector<float> host(const Prim& p) { return entry<Family::IntoData>(OpCode::into_data)(p).get().to_vec<float>(); }

TEST(CpuGemmSmall, MatmulEntryRoutesSmallProductsExactly) {
  const auto matmul = entry<Family::Matmul>(OpCode::matmul);
  for (const auto [batch, m, n, k] : {std::array<std::size_t, 4>{1, 8, 16, 32}, std::array<std::size_t, 4>{1, 32, 16, 32},
                                      std::array<std::size_t, 4>{1, 1, 40, 9}, std::array<std::size_t, 4>{1, 40, 1, 9},
                                      std::array<std::size_t, 4>{300, 8, 4, 16}, std::array<std::size_t, 4>{3, 5, 7, 3}}) {
    SCOPED_TRACE(::testing::Message() << "batch=" << batch << " m=" << m << " n=" << n << " k=" << k);
    std::vector<float> av(batch * m * k), bv(batch * k * n);
    for (std::size_t i = 0; i < av.size(); ++i) av[i] = gemm_a_value(i);
    for (std::size_t i = 0; i < bv.size(); ++i) bv[i] = gemm_b_value(i);
    // B given as the transpose of a [batch, n, k] tensor (its rows strided).
    std::vector<float> bt(bv.size());
    for (std::size_t q = 0; q < batch; ++q)
      for (std::size_t p = 0; p < k; ++p)
        for (std::size_t j = 0; j < n; ++j) bt[q * n * k + j * k + p] = bv[q * k * n + p * n + j];
    const Prim a = f32(av, Shape{batch, m, k});
    const Prim b = f32(bv, Shape{batch, k, n});
    const Prim b_t = swap_dims(f32(bt, Shape{batch, n, k}), 1, 2);
    const Prim a0 = f32(std::vector<float>(av.begin(), av.begin() + static_cast<std::ptrdiff_t>(m * k)), Shape{1, m, k});
    for (const auto& [lhs, rhs, bcast, what] :
         {std::tuple{a, b, false, "plain"}, std::tuple{a, b_t, false, "b transposed"},
          std::tuple{a0, b, true, "a broadcast over the batch"}}) {
      SCOPED_TRACE(what);
      const std::vector<float> got = host(matmul(lhs, rhs));
      ASSERT_EQ(got.size(), batch * m * n);
      for (std::size_t q = 0; q < batch; ++q)
        for (std::size_t i = 0; i < m; ++i)
          for (std::size_t j = 0; j < n; ++j) {
            double s = 0;
            for (std::size_t p = 0; p < k; ++p)
              s += static_cast<double>(av[(bcast ? 0 : q * m * k) + i * k + p]) * bv[q * k * n + p * n + j];
            ASSERT_EQ(got[q * m * n + i * n + j], static_cast<float>(s)) << "at " << q << ", " << i << ", " << j;
          }
    }
  }
}

}  // namespace
}  // namespace tensor::cpu::test
