// The f32 gemm helper (backends/cpu/gemm.cpp) against a naive loop, on each layout it
// routes differently: row-major, transposed A / B / both (oneDNN's 'N'/'T' where built
// with it), and a general-strided operand (always the BLIS fallback); beta 0 and 1.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "backends/cpu/cpu_info.hpp"
#include "backends/cpu/gemm.hpp"

namespace tensor::cpu {
namespace {

struct Layout {
  const char* name;
  bool ta, tb;
  std::int64_t gap;  // > 0: A's elements spread `gap` apart in both dims (general strides)
};

void check(const Layout& l, std::size_t m, std::size_t n, std::size_t k, float beta) {
  SCOPED_TRACE(::testing::Message() << l.name << " m=" << m << " n=" << n << " k=" << k << " beta=" << beta);
  const std::int64_t g = l.gap > 0 ? l.gap : 1;
  // A stored [m x k] (or [k x m] when ta) with padding 3 on its leading dim.
  const std::int64_t a_ld = static_cast<std::int64_t>(l.ta ? m : k) * g + 3;
  const std::int64_t rsa = l.gap > 0 ? a_ld : (l.ta ? 1 : a_ld), csa = l.gap > 0 ? g : (l.ta ? a_ld : 1);
  const std::int64_t b_ld = static_cast<std::int64_t>(l.tb ? k : n) + 2;
  const std::int64_t rsb = l.tb ? 1 : b_ld, csb = l.tb ? b_ld : 1;
  const std::int64_t ldc = static_cast<std::int64_t>(n) + 5;
  std::vector<float> a(static_cast<std::size_t>(a_ld) * (std::max(m, k) + 1) * static_cast<std::size_t>(g));
  std::vector<float> b(static_cast<std::size_t>(b_ld) * (std::max(n, k) + 1));
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(static_cast<int>(i * 7 % 13) - 6) / 8.0f;
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>(static_cast<int>(i * 5 % 11) - 5) / 4.0f;
  std::vector<float> c(static_cast<std::size_t>(ldc) * m), want(c.size());
  for (std::size_t i = 0; i < c.size(); ++i)
    c[i] = beta == 0.0f ? std::numeric_limits<float>::quiet_NaN() : static_cast<float>(i % 9) - 4.0f;
  const float alpha = 0.5f;
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t j = 0; j < n; ++j) {
      double s = 0;
      for (std::size_t p = 0; p < k; ++p)
        s += static_cast<double>(a[static_cast<std::size_t>(static_cast<std::int64_t>(i) * rsa +
                                                            static_cast<std::int64_t>(p) * csa)]) *
             b[static_cast<std::size_t>(static_cast<std::int64_t>(p) * rsb + static_cast<std::int64_t>(j) * csb)];
      const std::size_t at = i * static_cast<std::size_t>(ldc) + j;
      want[at] = static_cast<float>(alpha * s + (beta == 0.0f ? 0.0 : beta * static_cast<double>(c[at])));
    }
  sgemm(m, n, k, alpha, a.data(), rsa, csa, b.data(), rsb, csb, beta, c.data(), ldc, 1);
  for (std::size_t i = 0; i < m; ++i) {
    for (std::size_t j = 0; j < n; ++j) {
      const std::size_t at = i * static_cast<std::size_t>(ldc) + j;
      ASSERT_NEAR(c[at], want[at], 1e-3f * (1.0f + std::fabs(want[at]))) << "at " << i << "," << j;
    }
    // The padding past column n is not written.
    for (std::size_t j = n; j < static_cast<std::size_t>(ldc); ++j) {
      const std::size_t at = i * static_cast<std::size_t>(ldc) + j;
      if (beta != 0.0f) {
        ASSERT_EQ(c[at], static_cast<float>(at % 9) - 4.0f);
      } else {
        ASSERT_TRUE(std::isnan(c[at]));
      }
    }
  }
}

TEST(CpuGemm, MatchesNaiveLoopOnEachLayout) {
  const Layout layouts[] = {
      {"row-major", false, false, 0}, {"A^T", true, false, 0},    {"B^T", false, true, 0},
      {"A^T B^T", true, true, 0},     {"A general strides", false, false, 2},
  };
  const std::size_t sizes[][3] = {{1, 1, 1}, {1, 17, 5}, {9, 1, 33}, {7, 13, 1}, {33, 65, 47}, {130, 70, 129}};
  for (const Layout& l : layouts)
    for (const auto& s : sizes)
      for (float beta : {0.0f, 1.0f}) check(l, s[0], s[1], s[2], beta);
}

TEST(CpuGemm, ZeroDepthScalesC) {
  std::vector<float> c = {1, 2, 3, 4};
  const float a = 0, b = 0;
  sgemm(2, 2, 0, 1.0f, &a, 1, 1, &b, 1, 1, 1.0f, c.data(), 2, 1);
  EXPECT_EQ(c, (std::vector<float>{1, 2, 3, 4}));
  sgemm(2, 2, 0, 1.0f, &a, 1, 1, &b, 1, 1, 0.0f, c.data(), 2, 1);
  EXPECT_EQ(c, (std::vector<float>{0, 0, 0, 0}));
}

TEST(CpuGemm, RouteIsNamed) { EXPECT_FALSE(gemm_route().empty()); }

}  // namespace
}  // namespace tensor::cpu
