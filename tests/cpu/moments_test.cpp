// CPU var_mean (backends/cpu/moments.cpp) at the shapes its blocks and threads split:
// long rows (several runs joined), long columns (several row blocks and row groups
// joined), a middle dim, permuted / sliced / broadcast views, data far from zero (where a
// one-pass sum of squares loses every digit), infinities and NaN inside long lanes, and
// the empty and one-element rules. References: the two-pass formula in long double on
// the host values.
#include <cmath>
#include <cstdint>
#include <random>

#include "cpu_test_util.hpp"

namespace tensor::cpu::test {
namespace {

using dispatch::PrimPair;

PrimPair var_mean(Prim p, std::size_t dim, std::size_t correction) {
  return entry<Family::Moments>(OpCode::var_mean)(std::move(p), dim, correction);
}
std::vector<double> f64_of(const Prim& p) {
  return entry<Family::IntoData>(OpCode::into_data)(p).get().convert(DType::F64).to_vec<double>();
}
Prim typed(const std::vector<double>& v, const Shape& s, DType dt) {
  return entry<Family::FromData>(OpCode::from_data)(TensorData::from(v, s).convert(dt), kCpuDevice);
}

// Row-major values of shape [outer, n, inner]; the reference (var, mean) along n.
struct Ref {
  std::vector<double> var, mean;
};
Ref reference(const std::vector<double>& x, std::size_t outer, std::size_t n, std::size_t inner, double c) {
  Ref r;
  for (std::size_t o = 0; o < outer; ++o)
    for (std::size_t i = 0; i < inner; ++i) {
      long double s = 0;
      for (std::size_t k = 0; k < n; ++k) s += x[(o * n + k) * inner + i];
      const long double mu = s / static_cast<long double>(n);
      long double m2 = 0;
      for (std::size_t k = 0; k < n; ++k) {
        const long double d = x[(o * n + k) * inner + i] - mu;
        m2 += d * d;
      }
      r.mean.push_back(static_cast<double>(mu));
      r.var.push_back(static_cast<double>(m2 / (static_cast<long double>(n) - c)));
    }
  return r;
}

// `got` within rel of `want` (both NaN, or equal infinities, count as equal).
void expect_close(const std::vector<double>& got, const std::vector<double>& want, double rel, const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int bad = 0;
  for (std::size_t k = 0; k < want.size() && bad < 5; ++k) {
    const double w = want[k], g = got[k];
    const bool ok = (std::isnan(w) && std::isnan(g)) || w == g || std::fabs(g - w) <= rel * std::fabs(w);
    if (!ok) ++bad;
    EXPECT_TRUE(ok) << what << " [" << k << "] want " << w << " got " << g;
  }
}

std::vector<double> noise(std::size_t n, double offset, double scale, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> nd(0.0, 1.0);
  std::vector<double> v(n);
  for (double& x : v) x = offset + scale * nd(rng);
  return v;
}

// The values as the dtype holds them (the reference sees the rounded inputs).
std::vector<double> rounded(const std::vector<double>& v, DType dt) {
  return TensorData::from(v, Shape{v.size()}).convert(dt).convert(DType::F64).to_vec<double>();
}

TEST(CpuMoments, LongRowsColumnsAndMiddleDimsAgainstTwoPass) {
  struct Case {
    std::size_t outer, n, inner;
  };
  // [3, 20000]: rows of several 32 KB runs; [20000, 3] and [2048, 512] along dim 0: many
  // row blocks, and row groups on both threads; [5, 700, 9] along the middle dim.
  const Case cases[] = {{3, 20000, 1}, {1, 20000, 3}, {1, 2048, 512}, {5, 700, 9}, {512, 2048, 1}, {2, 1, 4}};
  for (DType dt : {DType::F32, DType::F64, DType::BF16}) {
    for (const Case& c : cases) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " [" + std::to_string(c.outer) + ", " + std::to_string(c.n) + ", " +
                   std::to_string(c.inner) + "]");
      const std::vector<double> v = rounded(noise(c.outer * c.n * c.inner, 1.5, 2.0, 7u), dt);
      const Shape s = c.outer == 1 ? Shape{c.n, c.inner} : c.inner == 1 ? Shape{c.outer, c.n} : Shape{c.outer, c.n, c.inner};
      const std::size_t dim = c.outer == 1 ? 0 : 1;
      for (std::size_t corr : {0u, 1u}) {
        const Ref want = reference(v, c.outer, c.n, c.inner, static_cast<double>(corr));
        auto [var, mean] = var_mean(typed(v, s, dt), dim, corr);
        const double rel = dt == DType::BF16 ? 8e-3 : dt == DType::F32 ? 2e-7 : 1e-13;
        expect_close(f64_of(var), want.var, rel, "var");
        expect_close(f64_of(mean), want.mean, rel, "mean");
      }
    }
  }
}

// 1e4 + N(0, 1): a sum of squares minus n mean^2 in double keeps about 8 digits of the
// variance here, in f32 none; the blocked two-pass keeps f32's.
TEST(CpuMoments, DataFarFromZeroKeepsTheVariance) {
  for (std::size_t dim : {0u, 1u}) {
    const std::size_t rows = dim == 0 ? 30000 : 3, cols = dim == 0 ? 5 : 30000;
    const std::vector<double> v = rounded(noise(rows * cols, 1e4, 1.0, 11u), DType::F32);
    const Ref want = dim == 0 ? reference(v, 1, rows, cols, 1) : reference(v, rows, cols, 1, 1);
    auto [var, mean] = var_mean(typed(v, Shape{rows, cols}, DType::F32), dim, 1);
    expect_close(f64_of(var), want.var, 1e-5, "var");
    expect_close(f64_of(mean), want.mean, 1e-7, "mean");
  }
}

TEST(CpuMoments, ViewsMatchTheirContiguousCopies) {
  const std::vector<double> v = noise(64 * 300, -0.5, 3.0, 5u);
  const Prim a = typed(v, Shape{64, 300}, DType::F32);
  const Prim t = swap_dims(a, 0, 1);  // [300, 64], columns contiguous
  for (std::size_t dim : {0u, 1u}) {
    auto [vt, mt] = var_mean(t, dim, 1);
    auto [vc, mc] = var_mean(to_contiguous(as_cpu(Prim(t))), dim, 1);
    expect_close(f64_of(vt), f64_of(vc), 2e-7, "transposed var");
    expect_close(f64_of(mt), f64_of(mc), 2e-7, "transposed mean");
  }
  const Prim f = flip(a, {1});  // negative stride: through a contiguous copy
  auto [vf, mf] = var_mean(f, 1, 0);
  const Ref want = reference(v, 64, 300, 1, 0);  // a flip does not change a row's moments
  expect_close(f64_of(vf), want.var, 2e-7, "flipped var");
  expect_close(f64_of(mf), want.mean, 2e-7, "flipped mean");
  // A broadcast row: every element of a column equal, variance exactly 0.
  const Prim e = expand(typed({1, -2, 3.5}, Shape{1, 3}, DType::F32), Shape{5000, 3});
  auto [ve, me] = var_mean(e, 0, 1);
  EXPECT_EQ(f64_of(ve), (std::vector<double>{0, 0, 0}));
  EXPECT_EQ(f64_of(me), (std::vector<double>{1, -2, 3.5}));
}

TEST(CpuMoments, InfinityAndNaNInsideLongLanes) {
  // Columns of 4096 rows (several row groups): +inf mid-column in column 0, NaN in column
  // 1, +inf and -inf in column 2, -inf as the first value of a row group in column 4 (the
  // one-pass f32 path shifts by a group's first values). The mean is the sum's (inf, NaN,
  // NaN, -inf); the variance NaN.
  for (DType dt : {DType::F32, DType::F64}) {
    SCOPED_TRACE(std::string(dtype_name(dt)));
    std::vector<double> v = noise(4096 * 5, 0.0, 1.0, 3u);
    v[2000 * 5 + 0] = INFINITY;
    v[100 * 5 + 1] = NAN;
    v[5 * 5 + 2] = INFINITY;
    v[4000 * 5 + 2] = -INFINITY;
    v[0 * 5 + 4] = -INFINITY;
    auto [var, mean] = var_mean(typed(v, Shape{4096, 5}, dt), 0, 1);
    const auto m = f64_of(mean), s = f64_of(var);
    EXPECT_EQ(m[0], INFINITY);
    EXPECT_TRUE(std::isnan(m[1]) && std::isnan(m[2]));
    EXPECT_EQ(m[4], -INFINITY);
    EXPECT_TRUE(std::isnan(s[0]) && std::isnan(s[1]) && std::isnan(s[2]) && std::isnan(s[4]));
    EXPECT_TRUE(std::isfinite(s[3]) && std::isfinite(m[3]));
  }
  // The same along a long row (several runs).
  std::vector<double> r = noise(3 * 20000, 0.0, 1.0, 4u);
  r[15000] = -INFINITY;
  auto [rv, rm] = var_mean(typed(r, Shape{3, 20000}, DType::F32), 1, 1);
  EXPECT_EQ(f64_of(rm)[0], -INFINITY);
  EXPECT_TRUE(std::isnan(f64_of(rv)[0]));
  EXPECT_TRUE(std::isfinite(f64_of(rv)[1]));
}

TEST(CpuMoments, EmptyAndOneElementLanes) {
  // An empty reduced dim: mean 0 / 0 (NaN), variance 0 / (0 - correction).
  auto [v0, m0] = var_mean(typed({}, Shape{0, 3}, DType::F32), 0, 1);
  EXPECT_EQ(cpu_of(v0).shape(), (Shape{1, 3}));
  for (double x : f64_of(m0)) EXPECT_TRUE(std::isnan(x));
  for (double x : f64_of(v0)) EXPECT_EQ(x, 0.0);
  auto [v0b, m0b] = var_mean(typed({}, Shape{0, 3}, DType::F32), 0, 0);
  for (double x : f64_of(v0b)) EXPECT_TRUE(std::isnan(x));
  // Another dim empty: empty results of the kept shape.
  auto [ve, me] = var_mean(typed({}, Shape{4, 0}, DType::F64), 0, 1);
  EXPECT_EQ(cpu_of(ve).shape(), (Shape{1, 0}));
  EXPECT_EQ(cpu_of(me).shape(), (Shape{1, 0}));
  // One element: the unbiased variance is 0 / 0, the biased 0.
  auto [v1, m1] = var_mean(typed({2.5, -1}, Shape{2, 1}, DType::F16), 1, 1);
  EXPECT_EQ(f64_of(m1), (std::vector<double>{2.5, -1}));
  for (double x : f64_of(v1)) EXPECT_TRUE(std::isnan(x));
  auto [v1b, m1b] = var_mean(typed({2.5, -1}, Shape{2, 1}, DType::F16), 1, 0);
  EXPECT_EQ(f64_of(v1b), (std::vector<double>{0, 0}));
  EXPECT_EQ(cpu_of(v1b).dtype(), DType::F16);
}

}  // namespace
}  // namespace tensor::cpu::test
