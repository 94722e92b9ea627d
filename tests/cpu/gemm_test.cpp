// The f32 gemm helper (backends/cpu/gemm.cpp) against a naive loop, on each layout it
// routes differently: row-major, transposed A / B / both (oneDNN's 'N'/'T' where built
// with it), and a general-strided operand (always the BLIS fallback); beta 0 and 1.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "backends/cpu/cpu_info.hpp"
#include "backends/cpu/gemm.hpp"

#if TENSOR_HAVE_ONEDNN
#include <oneapi/dnnl/dnnl.h>
#endif
#include "tensor/device.hpp"

namespace tensor::cpu {
namespace {

struct Layout {
  const char* name;
  bool ta, tb;
  std::int64_t gap;  // > 0: A's elements spread `gap` apart in both dims (general strides)
};

// The operands' strides for a layout: A stored [m x k] (or [k x m] when ta) with padding
// 3 on its leading dim, B likewise with padding 2, C [m x n] with padding 5; and their
// values, multiples of 1/8 (A) and 1/4 (B) in [-0.75, 1.25].
struct Strides {
  std::int64_t g, a_ld, rsa, csa, b_ld, rsb, csb, ldc;
  std::size_t a_size, b_size;
  Strides(const Layout& l, std::size_t m, std::size_t n, std::size_t k)
      : g(l.gap > 0 ? l.gap : 1),
        a_ld(static_cast<std::int64_t>(l.ta ? m : k) * g + 3),
        rsa(l.gap > 0 ? a_ld : (l.ta ? 1 : a_ld)),
        csa(l.gap > 0 ? g : (l.ta ? a_ld : 1)),
        b_ld(static_cast<std::int64_t>(l.tb ? k : n) + 2),
        rsb(l.tb ? 1 : b_ld),
        csb(l.tb ? b_ld : 1),
        ldc(static_cast<std::int64_t>(n) + 5),
        a_size(static_cast<std::size_t>(a_ld) * (std::max(m, k) + 1) * static_cast<std::size_t>(g)),
        b_size(static_cast<std::size_t>(b_ld) * (std::max(n, k) + 1)) {}
  template <class T>
  std::vector<T> a_values() const {
    std::vector<T> a(a_size);
    for (std::size_t i = 0; i < a.size(); ++i) a[i] = T(static_cast<float>(static_cast<int>(i * 7 % 13) - 6) / 8.0f);
    return a;
  }
  template <class T>
  std::vector<T> b_values() const {
    std::vector<T> b(b_size);
    for (std::size_t i = 0; i < b.size(); ++i) b[i] = T(static_cast<float>(static_cast<int>(i * 5 % 11) - 5) / 4.0f);
    return b;
  }
};

void check(const Layout& l, std::size_t m, std::size_t n, std::size_t k, float beta) {
  SCOPED_TRACE(::testing::Message() << l.name << " m=" << m << " n=" << n << " k=" << k << " beta=" << beta);
  const Strides st(l, m, n, k);
  const std::int64_t rsa = st.rsa, csa = st.csa, rsb = st.rsb, csb = st.csb, ldc = st.ldc;
  const std::vector<float> a = st.a_values<float>(), b = st.b_values<float>();
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

// bf16gemm on each layout, against sums computed exactly in double: the inputs are
// multiples of 1/8 and 1/4 small enough that every f32 partial sum is exact, so the one
// rounding to bf16 (nearest even) is the only one and the result must equal
// bf16(exact sum) bit for bit, whichever route (oneDNN's bf16 kernels or f32) runs.
// Sizes from 1x1x1 to products large enough for oneDNN's blocking (and past 64^3).
void check_bf16(const Layout& l, std::size_t m, std::size_t n, std::size_t k) {
  SCOPED_TRACE(::testing::Message() << "bf16 " << l.name << " m=" << m << " n=" << n << " k=" << k);
  const Strides st(l, m, n, k);
  const std::int64_t rsa = st.rsa, csa = st.csa, rsb = st.rsb, csb = st.csb, ldc = st.ldc;
  const std::vector<bf16> a = st.a_values<bf16>(), b = st.b_values<bf16>();
  const bf16 nan = bf16::from_bits(0x7fc1);  // the padding past column n must keep it
  std::vector<bf16> c(static_cast<std::size_t>(ldc) * m, nan);
  bf16gemm(m, n, k, a.data(), rsa, csa, b.data(), rsb, csb, c.data(), ldc, 1);
  for (std::size_t i = 0; i < m; ++i) {
    for (std::size_t j = 0; j < n; ++j) {
      double s = 0;
      for (std::size_t p = 0; p < k; ++p)
        s += static_cast<double>(static_cast<float>(
                 a[static_cast<std::size_t>(static_cast<std::int64_t>(i) * rsa + static_cast<std::int64_t>(p) * csa)])) *
             static_cast<double>(static_cast<float>(
                 b[static_cast<std::size_t>(static_cast<std::int64_t>(p) * rsb + static_cast<std::int64_t>(j) * csb)]));
      const std::uint16_t want = bf16::from_float(static_cast<float>(s));  // s is exact in f32 here
      ASSERT_EQ(c[i * static_cast<std::size_t>(ldc) + j].bits, want) << "at " << i << "," << j << " sum " << s;
    }
    for (std::size_t j = n; j < static_cast<std::size_t>(ldc); ++j) ASSERT_EQ(c[i * static_cast<std::size_t>(ldc) + j].bits, nan.bits);
  }
}

TEST(CpuGemm, Bf16RoundsExactSumsOnceOnEachLayout) {
  const Layout layouts[] = {
      {"row-major", false, false, 0}, {"A^T", true, false, 0},    {"B^T", false, true, 0},
      {"A^T B^T", true, true, 0},     {"A general strides", false, false, 2},
  };
  const std::size_t sizes[][3] = {{1, 1, 1},     {1, 17, 5},     {9, 1, 33},     {7, 13, 1},   {33, 65, 47},
                                  {130, 70, 129}, {1, 300, 256}, {64, 64, 64}, {200, 150, 96}};
  for (const Layout& l : layouts)
    for (const auto& s : sizes) check_bf16(l, s[0], s[1], s[2]);
}

// BF16 is Accelerated on the CPU exactly when its products run on oneDNN's bf16
// kernels: a build with oneDNN on a CPU with AVX512_BF16 (read here from CPUID, not
// from oneDNN; the CI and test machines set no DNNL_MAX_CPU_ISA).
TEST(CpuGemm, Bf16AcceleratedWhereTheCpuHasAvx512Bf16) {
#if TENSOR_HAVE_ONEDNN
  const bool expect = __builtin_cpu_supports("avx512bf16") != 0;
#else
  const bool expect = false;
#endif
  EXPECT_EQ(bf16_gemm_live(), expect);
  EXPECT_EQ(Device::cpu().dtype_usage(DType::BF16).contains(DTypeUsage::Accelerated), expect);
  EXPECT_EQ(gemm_route().find("bf16") != std::string::npos, expect) << gemm_route();
}

// packed_gemm (B packed once into oneDNN's blocked layout, shared by slabs of rows),
// f32 and bf16, on dense and padded operands, A and B each as stored or transposed, slab
// counts that do and do not divide m (a last slab of other height), against sums in
// double: f32 within rounding, bf16 the exact sum rounded once (inputs multiples of 1/8
// and 1/4, so every f32 partial sum is exact). Where it declines (no oneDNN, bf16 not
// live, a layout brgemm does not take: a transposed or padded A or C) c is left to the
// fallbacks; on dense row-major A and C with oneDNN built in it must run.
template <class T>
void check_packed(bool ta, bool tb, std::int64_t pad, std::size_t m, std::size_t n, std::size_t k, std::size_t pieces) {
  constexpr bool bf = std::is_same_v<T, bf16>;
  SCOPED_TRACE(::testing::Message() << (bf ? "bf16" : "f32") << (ta ? " A^T" : "") << (tb ? " B^T" : "") << " pad " << pad
                                    << " m=" << m << " n=" << n << " k=" << k << " pieces=" << pieces);
  const auto sm = static_cast<std::int64_t>(m), sn = static_cast<std::int64_t>(n), sk = static_cast<std::int64_t>(k);
  const std::int64_t lda = (ta ? sm : sk) + pad, ldb = (tb ? sk : sn) + pad, ldc = sn + pad;
  const std::int64_t rsa = ta ? 1 : lda, csa = ta ? lda : 1, rsb = tb ? 1 : ldb, csb = tb ? ldb : 1;
  std::vector<T> a(static_cast<std::size_t>(lda * (ta ? sk : sm))), b(static_cast<std::size_t>(ldb * (tb ? sn : sk)));
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = T(static_cast<float>(static_cast<int>(i * 7 % 13) - 6) / 8.0f);
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = T(static_cast<float>(static_cast<int>(i * 5 % 11) - 5) / 4.0f);
  const T nan = T(std::numeric_limits<float>::quiet_NaN());
  std::vector<T> c(static_cast<std::size_t>(ldc * sm), nan);
  const bool ran = packed_gemm(bf ? GemmType::bf16 : GemmType::f32, m, n, k, a.data(), rsa, csa, b.data(), rsb, csb,
                               c.data(), ldc, 1, pieces);
#if TENSOR_HAVE_ONEDNN
  // bf16 kernels live means oneDNN's bf16 brgemm runs here (f32 brgemm needs AVX-512).
  if (bf && !ta && pad == 0 && bf16_gemm_live()) {
    ASSERT_TRUE(ran);
  }
#else
  ASSERT_FALSE(ran);
#endif
  if (!ran) return;
  for (std::int64_t i = 0; i < sm; ++i) {
    for (std::int64_t j = 0; j < sn; ++j) {
      double s = 0;
      for (std::int64_t p = 0; p < sk; ++p)
        s += static_cast<double>(static_cast<float>(a[static_cast<std::size_t>(i * rsa + p * csa)])) *
             static_cast<double>(static_cast<float>(b[static_cast<std::size_t>(p * rsb + j * csb)]));
      const T got = c[static_cast<std::size_t>(i * ldc + j)];
      if constexpr (bf) {
        ASSERT_EQ(got.bits, bf16::from_float(static_cast<float>(s))) << "at " << i << "," << j << " sum " << s;
      } else {
        ASSERT_NEAR(got, s, 1e-4 * (1.0 + std::fabs(s))) << "at " << i << "," << j;
      }
    }
    for (std::int64_t j = sn; j < ldc; ++j)
      ASSERT_TRUE(std::isnan(static_cast<float>(c[static_cast<std::size_t>(i * ldc + j)]))) << "padding at " << i << "," << j;
  }
}

TEST(CpuGemm, PackedBSharedBySlabsOnEachLayout) {
  const std::size_t sizes[][4] = {{301, 250, 240, 4}, {301, 250, 240, 1}, {200, 70, 130, 3},
                                  {40, 300, 70, 4},   {64, 64, 64, 2},    {1, 17, 5, 2}};
  for (const bool ta : {false, true})
    for (const bool tb : {false, true})
      for (const std::int64_t pad : {0, 3})
        for (const auto& s : sizes) {
          check_packed<float>(ta, tb, pad, s[0], s[1], s[2], s[3]);
          check_packed<bf16>(ta, tb, pad, s[0], s[1], s[2], s[3]);
        }
}

TEST(CpuGemm, PackedRunsOnDenseOperandsWithOnednn) {
  const std::size_t m = 150, n = 140, k = 130;
  std::vector<float> a(m * k), b(k * n), c(m * n, -1.0f);
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(static_cast<int>(i % 7) - 3);
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>(static_cast<int>(i % 5) - 2);
  const auto sn = static_cast<std::int64_t>(n), sk = static_cast<std::int64_t>(k);
  const bool ran = packed_gemm(GemmType::f32, m, n, k, a.data(), sk, 1, b.data(), sn, 1, c.data(), sn, 1, 3);
  std::vector<bf16> ha(a.begin(), a.end()), hb(b.begin(), b.end()), hc(m * n);
  const bool ran_bf16 = packed_gemm(GemmType::bf16, m, n, k, ha.data(), sk, 1, hb.data(), sn, 1, hc.data(), sn, 1, 3);
#if TENSOR_HAVE_ONEDNN
  // f32 brgemm where oneDNN's ISA has AVX-512 (ONEDNN_MAX_CPU_ISA=AVX2: it declines).
  const dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
  const bool avx512 = isa == dnnl_cpu_isa_avx512_core || isa == dnnl_cpu_isa_avx512_core_vnni ||
                      isa == dnnl_cpu_isa_avx512_core_bf16 || isa == dnnl_cpu_isa_avx512_core_amx;
  EXPECT_EQ(ran, avx512) << "isa " << static_cast<int>(isa);
  EXPECT_EQ(ran_bf16, bf16_gemm_live());
#else
  EXPECT_FALSE(ran);
  EXPECT_FALSE(ran_bf16);
#endif
  for (std::size_t i = 0; ran && i < m; ++i)
    for (std::size_t j = 0; j < n; ++j) {
      double s = 0;
      for (std::size_t p = 0; p < k; ++p) s += static_cast<double>(a[i * k + p]) * b[p * n + j];
      ASSERT_EQ(c[i * n + j], static_cast<float>(s)) << i << "," << j;  // small integers: exact
      if (ran_bf16) {
        ASSERT_EQ(static_cast<float>(hc[i * n + j]), static_cast<float>(bf16(static_cast<float>(s)))) << i << "," << j;
      }
    }
}

}  // namespace
}  // namespace tensor::cpu
