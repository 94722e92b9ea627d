// The medium f32 product kernel (backends/cpu/gemm_medium_hwy.cpp) against a double triple
// loop: the MLP 784-256-10 step's shapes, odd sizes around its 8- (4-) row tiles and 1-3
// vector panels, transposed / strided / padded operands, n = 10, k = 0, k past one k block,
// alpha and beta, NaN in c with beta == 0, padding of c left alone; on every compiled target.
//
// Tolerance: zero for the exact inputs (multiples of 1/8 and 1/4 small enough that every
// product and partial sum below is exact in f32, so any summation order gives the loop's
// value); for arbitrary values |got - loop| <= 2 k eps sum_p |a b| (+ |beta c|), the
// classical bound of an f32 dot product in any order (k roundings of the chain).
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <hwy/targets.h>

#include "backends/cpu/cpu_info.hpp"
#include "backends/cpu/gemm.hpp"
#include "backends/cpu/gemm_medium_hwy.hpp"
#include "cpu_test_util.hpp"
#include "gemm_test_util.hpp"

namespace tensor::cpu::test {
namespace {

struct Case {
  std::size_t m, n, k;
  bool ta = false, tb = false;
  std::int64_t gap = 1;  // > 1: elements `gap` apart in both dims of A and B (general strides)
  float alpha = 1.0f, beta = 0.0f;
  bool random = false;  // arbitrary values (checked against the error bound, not exactly)
};

// A [m x k] stored transposed or not with a padded leading dim, B [k x n] likewise, C with row
// stride n + 3 (NaN-filled where beta == 0, values where beta != 0). via_sgemm: through
// tensor::cpu::sgemm (its route), else the kernel directly.
void check(const Case& t, bool via_sgemm = false) {
  const auto [m, n, k, ta, tb, g, alpha, beta, random] = t;
  SCOPED_TRACE(::testing::Message() << "m=" << m << " n=" << n << " k=" << k << " ta=" << ta << " tb=" << tb
                                    << " gap=" << g << " alpha=" << alpha << " beta=" << beta
                                    << " random=" << random << " sgemm=" << via_sgemm);
  const auto [rsa, csa, rsb, csb, rsc, a_size, b_size, c_size] = gemm_layout(m, n, k, ta, tb, g);
  std::vector<float> a(a_size), b(b_size), c(c_size);
  std::mt19937 rng(static_cast<unsigned>(m * 131 + n * 17 + k));
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = random ? u(rng) : gemm_a_value(i);
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = random ? u(rng) : gemm_b_value(i);
  for (std::size_t i = 0; i < c.size(); ++i)
    c[i] = beta == 0.0f || i % static_cast<std::size_t>(rsc) >= n ? std::numeric_limits<float>::quiet_NaN()
                                                                   : (random ? u(rng) : gemm_a_value(i + 5));
  const std::vector<float> c0 = c;
  if (via_sgemm) {
    sgemm(m, n, k, alpha, a.data(), rsa, csa, b.data(), rsb, csb, beta, c.data(), rsc, 1);
  } else {
    simd::sgemm_medium_f32(m, n, k, alpha, a.data(), rsa, csa, b.data(), rsb, csb, beta, c.data(), rsc);
  }
  const double eps = std::ldexp(1.0, -23);
  for (std::size_t i = 0; i < m; ++i) {
    for (std::size_t j = 0; j < n; ++j) {
      double s = 0, mag = 0;
      for (std::size_t p = 0; p < k; ++p) {
        const double x = static_cast<double>(a[static_cast<std::size_t>(static_cast<std::int64_t>(i) * rsa + static_cast<std::int64_t>(p) * csa)]) *
                         b[static_cast<std::size_t>(static_cast<std::int64_t>(p) * rsb + static_cast<std::int64_t>(j) * csb)];
        s += x;
        mag += std::abs(x);
      }
      const std::size_t at = i * static_cast<std::size_t>(rsc) + j;
      const double want = alpha * s + (beta == 0.0f ? 0.0 : static_cast<double>(beta) * c0[at]);
      const double got = c[at];
      if (!random) {
        ASSERT_EQ(got, static_cast<double>(static_cast<float>(want))) << "at " << i << ", " << j;
      } else {
        const double bound = 2.0 * static_cast<double>(k + 2) * eps *
                             (std::abs(alpha) * mag + (beta == 0.0f ? 0.0 : std::abs(static_cast<double>(beta) * c0[at])));
        ASSERT_LE(std::abs(got - want), bound + 1e-30) << "at " << i << ", " << j << " got " << got << " want " << want;
      }
    }
    for (std::size_t j = n; j < static_cast<std::size_t>(rsc); ++j)
      ASSERT_TRUE(std::isnan(c[i * static_cast<std::size_t>(rsc) + j])) << "padding written at " << i << ", " << j;
  }
}

// The products of the MLP 784-256-10 batch-64 Adam step as sgemm gets them (1 thread and the
// 2-thread slabs of matmul.cpp), with their strides.
const std::vector<Case>& mlp_cases() {
  static const std::vector<Case> cases = {
      {64, 256, 784},               // forward X W1
      {64, 10, 256},                // forward H W2
      {256, 10, 64, true, false},   // dW2 = H^T dY
      {64, 256, 10, false, true},   // dH = dY W2^T
      {784, 256, 64, true, false},  // dW1 = X^T dH
      {98, 256, 64, true, false},   // a 2-thread slab of dW1
      {64, 64, 784},                // a 2-thread column slab of the forward (its ld 256 > n: the padded ld below)
  };
  return cases;
}

TEST(CpuGemmMedium, MlpStepShapesExactly) {
  for (const Case& t : mlp_cases()) check(t);
}

TEST(CpuGemmMedium, MlpStepShapesRandomValuesWithinTheBound) {
  for (Case t : mlp_cases()) {
    t.random = true;
    check(t);
  }
}

TEST(CpuGemmMedium, OddSizesAgainstALoop) {
  const std::size_t sizes[] = {1, 3, 17, 63, 65, 127, 784, 1000};
  for (const std::size_t m : sizes)
    for (const std::size_t n : sizes)
      for (const std::size_t k : sizes) {
        if (static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) > 3.0e7) continue;
        check({m, n, k, (m + n) % 2 == 1, (n + k) % 2 == 1});
        if (::testing::Test::HasFatalFailure()) return;
      }
}

TEST(CpuGemmMedium, TransposedStridedAndPaddedOperands) {
  for (const bool ta : {false, true})
    for (const bool tb : {false, true})
      for (const std::int64_t gap : {1, 3})
        for (const auto [m, n, k] : {std::array<std::size_t, 3>{64, 10, 256}, std::array<std::size_t, 3>{17, 65, 300},
                                     std::array<std::size_t, 3>{9, 49, 7}, std::array<std::size_t, 3>{13, 10, 513},
                                     std::array<std::size_t, 3>{1, 100, 33}, std::array<std::size_t, 3>{100, 1, 33}})
          check({m, n, k, ta, tb, gap});
}

TEST(CpuGemmMedium, NarrowColumnsFillWholeVectors) {
  for (const std::size_t n : {1, 2, 5, 10, 15, 16, 17, 31, 33, 47, 48, 49, 95, 97})
    for (const std::size_t m : {1, 2, 3, 4, 7, 8, 9, 64})
      for (const bool tb : {false, true}) check({m, n, 40, false, tb});
}

TEST(CpuGemmMedium, AlphaBetaAndKBlocks) {
  for (const auto [alpha, beta] : {std::array<float, 2>{0.5f, 0.0f}, std::array<float, 2>{1.0f, 2.0f},
                                   std::array<float, 2>{-2.0f, 0.25f}, std::array<float, 2>{1.0f, 1.0f}})
    for (const std::size_t k : {1, 255, 256, 257, 600})
      for (const bool tb : {false, true}) {
        check({19, 37, k, false, tb, 1, alpha, beta});
        check({19, 37, k, true, tb, 1, alpha, beta, true});
      }
}

TEST(CpuGemmMedium, EmptyInnerDimGivesBetaC) {
  for (const float beta : {0.0f, 2.0f})
    for (const bool tb : {false, true}) {
      check({5, 9, 0, false, tb, 1, 1.0f, beta});
      check({64, 10, 0, true, tb, 2, 0.5f, beta});
    }
}

// Every Highway target this build compiled (SSE2 .. AVX-512): their tiles are 4 or 8 rows by
// 1-3 vectors of 4, 8 or 16 lanes; their partial stores differ (masked or through the stack).
TEST(CpuGemmMedium, EveryCompiledTarget) {
  for_each_compiled_target([](std::int64_t) {
    for (const Case& t : mlp_cases()) check(t);
    for (const std::size_t n : {1, 3, 10, 17, 63, 65})
      for (const std::size_t m : {1, 3, 17})
        for (const bool tb : {false, true}) check({m, n, 300, !tb, tb, tb ? 1 : 2, 1.0f, tb ? 0.5f : 0.0f});
    check({17, 65, 127, false, true, 1, 1.0f, 0.0f, true});
  });
}

// Through sgemm (the route: the medium kernel where its gate says so, dnnl_sgemm / BLIS
// otherwise): the same values either way.
TEST(CpuGemmMedium, ThroughSgemm) {
  for (const Case& t : mlp_cases()) check(t, true);
  check({17, 65, 127, true, true, 1, 0.5f, 2.0f}, true);
}

TEST(CpuGemmMedium, GateTakesTheMlpShapes) {
  // The products of the MLP step, with their strides as matmul.cpp passes them (see mlp_cases).
  EXPECT_TRUE(simd::use_medium_gemm(64, 256, 784, 784, 1, 256, 1));
  EXPECT_TRUE(simd::use_medium_gemm(64, 64, 784, 784, 1, 256, 1));
  EXPECT_TRUE(simd::use_medium_gemm(64, 10, 256, 256, 1, 10, 1));
  EXPECT_TRUE(simd::use_medium_gemm(256, 10, 64, 1, 256, 10, 1));
  EXPECT_TRUE(simd::use_medium_gemm(64, 256, 10, 10, 1, 1, 10));
  EXPECT_TRUE(simd::use_medium_gemm(784, 256, 64, 1, 784, 256, 1));
  EXPECT_TRUE(simd::use_medium_gemm(98, 256, 64, 1, 784, 256, 1));
}

}  // namespace
}  // namespace tensor::cpu::test
