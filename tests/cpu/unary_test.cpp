// CPU unary ops and scans: float math through every float dtype and layout, int abs
// and bitwise not, rounding rules, and cumulative ops with NaN propagation.
#include <cmath>
#include <limits>

#include "cpu_test_util.hpp"

namespace tensor::cpu::test {
namespace {

Prim unary(OpCode op, Prim p) { return entry<Family::Unary>(op)(std::move(p)); }

std::vector<double> as_f64(const Prim& p) {
  return entry<Family::IntoData>(OpCode::into_data)(p).get().convert(DType::F64).to_vec<double>();
}

TEST(CpuUnary, FloatMathEveryFloatDtypeAndLayout) {
  struct Case {
    OpCode op;
    double (*ref)(double);
  };
  const Case cases[] = {{OpCode::exp, [](double x) { return std::exp(x); }},
                        {OpCode::sqrt, [](double x) { return std::sqrt(std::fabs(x)); }},
                        {OpCode::tanh, [](double x) { return std::tanh(x); }},
                        {OpCode::floor, [](double x) { return std::floor(x); }},
                        {OpCode::recip, [](double x) { return 1.0 / x; }},
                        {OpCode::abs, [](double x) { return std::fabs(x); }}};
  for (DType dt : {DType::F64, DType::F32, DType::F16, DType::BF16}) {
    const double tol = dt == DType::F64 ? 1e-12 : dt == DType::F32 ? 1e-6 : dt == DType::F16 ? 2e-3 : 1e-2;
    for (const Case& c : cases)
      for (Lay lay : kLayouts) {
        const std::size_t rows = rows_of(lay, 3);
        auto gen = [&](std::size_t i, std::size_t j) {
          const double x = 0.25 * static_cast<double>(i * 5 + j) - 1.9;
          return c.op == OpCode::sqrt ? std::fabs(x) : x;
        };
        const auto v = logical_values<double>(lay, rows, 4, gen);
        // The values as the dtype holds them, laid out in `lay` in that dtype.
        std::vector<double> held;
        Prim in;
        dispatch::visit_dtype(dt, [&](auto tag) {
          using T = decltype(tag);
          if constexpr (dispatch::kIsFloatLike<T>) {
            std::vector<T> tv;
            for (double x : v) {
              tv.push_back(dispatch::convert_value<T>(x));
              held.push_back(static_cast<double>(dispatch::load_elem(tv.back())));
            }
            in = build(lay, tv, rows, 4, dt);
          }
        });
        const auto got = as_f64(unary(c.op, std::move(in)));
        ASSERT_EQ(got.size(), held.size());
        for (std::size_t i = 0; i < got.size(); ++i) {
          const double want = c.ref(held[i]);
          ASSERT_NEAR(got[i], want, tol * (1 + std::fabs(want)))
              << dispatch::op_name(c.op) << " " << dtype_name(dt) << " " << lay_name(lay) << " at " << i;
        }
      }
  }
}

TEST(CpuUnary, StridedInputsAndInPlace) {
  // Through a transposed f32 view, and in place into a unique dense operand.
  const Prim a = from_vec(std::vector<float>{1, 4, 9, 16, 25, 36}, Shape{2, 3});
  EXPECT_EQ(to_f32(unary(OpCode::sqrt, swap_dims(a, 0, 1))), (std::vector<float>{1, 4, 2, 5, 3, 6}));
  Prim b = from_vec(std::vector<float>{-1.5f, 2.5f, -0.5f, 0.5f, 3.5f}, Shape{5});
  const Storage* sb = cpu_of(b).storage();
  const Prim r = unary(OpCode::round, std::move(b));
  EXPECT_EQ(cpu_of(r).storage(), sb);
  EXPECT_EQ(to_f32(r), (std::vector<float>{-2, 2, -0, 0, 4}));
  EXPECT_EQ(to_f32(unary(OpCode::trunc, from_vec(std::vector<float>{-1.7f, -2.9f, 3.1f, 4.5f}, Shape{4}))),
            (std::vector<float>{-1, -2, 3, 4}));
}

// 4 M + 7 elements (16 MB): the math op splits across threads in chunks and a fresh
// output takes streaming stores; lanes out of the vector formula's range (inf, NaN,
// overflow) still go to libm. In place takes the same chunks without streaming.
TEST(CpuUnary, LargeRunsOnThreadsAndStreamingStores) {
  const std::size_t n = (std::size_t{4} << 20) + 7;
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<float>(static_cast<double>(i % 1000) * 0.01 - 5);
  v[3] = 100.0f;  // exp overflows to inf
  v[n / 2] = std::numeric_limits<float>::quiet_NaN();
  v[n - 1] = -std::numeric_limits<float>::infinity();
  const Prim a = from_vec(v, Shape{n});
  auto check = [&](const std::vector<float>& got, const char* what) {
    ASSERT_EQ(got.size(), n);
    for (std::size_t i = 0; i < n; ++i) {
      const float want = std::exp(v[i]);
      if (std::isnan(want)) {
        ASSERT_TRUE(std::isnan(got[i])) << what << " " << i;
      } else if (std::isinf(want)) {
        ASSERT_EQ(got[i], want) << what << " " << i;
      } else {
        ASSERT_NEAR(got[i], want, 1e-6 * (1 + std::fabs(want))) << what << " " << i;
      }
    }
  };
  check(to_f32(unary(OpCode::exp, a)), "fresh");
  Prim b = from_vec(v, Shape{n});
  const Storage* sb = cpu_of(b).storage();
  const Prim r = unary(OpCode::exp, std::move(b));
  EXPECT_EQ(cpu_of(r).storage(), sb);
  check(to_f32(r), "in place");
  // A memory-bound op on the same sizes (one thread): abs.
  const auto ab = to_f32(unary(OpCode::abs, a));
  for (std::size_t i = 0; i < n; ++i) {
    if (!std::isnan(v[i])) {
      ASSERT_EQ(ab[i], std::fabs(v[i])) << i;
    }
  }
}

TEST(CpuUnary, IntAbsAndBitwiseNot) {
  const Prim a = from_vec(std::vector<std::int32_t>{INT32_MIN, -3, 0, 7}, Shape{4});
  EXPECT_EQ(to_vec<std::int32_t>(unary(OpCode::abs, a)), (std::vector<std::int32_t>{INT32_MIN, 3, 0, 7}));
  EXPECT_EQ(to_vec<std::int32_t>(unary(OpCode::bitwise_not, a)), (std::vector<std::int32_t>{INT32_MAX, 2, -1, -8}));
  const Prim u = from_vec(std::vector<std::uint8_t>{0, 255, 15}, Shape{3});
  EXPECT_EQ(to_vec<std::uint8_t>(unary(OpCode::bitwise_not, u)), (std::vector<std::uint8_t>{255, 0, 240}));
  const Prim i8 = from_vec(std::vector<std::int8_t>{-128, -1}, Shape{2});
  EXPECT_EQ(to_vec<std::int8_t>(unary(OpCode::abs, i8)), (std::vector<std::int8_t>{-128, 1}));
}

TEST(CpuUnary, PowfScalarImpl) {
  const Prim a = from_vec(std::vector<float>{4, 9, 2}, Shape{3});
  const auto r = to_f32(entry<Family::Scalar>(OpCode::powf_scalar_impl)(a, Scalar(0.5)));
  EXPECT_FLOAT_EQ(r[0], 2.0f);
  EXPECT_FLOAT_EQ(r[1], 3.0f);
  EXPECT_FLOAT_EQ(r[2], std::sqrt(2.0f));
}

// Integral exponents 3 and 4 are products on contiguous f32/f64 runs: within 2 ulps of
// the correctly rounded power (computed in long double here), with pow's signed zeros,
// infinities and NaNs; other exponents still std::pow. A long run (vector loop and its
// remainder) with the special values inside.
template <class T>
void check_small_int_powers() {
  std::vector<T> x;
  for (int i = 0; i < 1000; ++i) x.push_back(static_cast<T>((i % 97) - 48) * static_cast<T>(0.173) + static_cast<T>(i) * static_cast<T>(1e-3));
  const T inf = std::numeric_limits<T>::infinity();
  for (T v : {T(0), T(-0.0), inf, -inf, std::numeric_limits<T>::quiet_NaN(), std::numeric_limits<T>::max(),
              std::numeric_limits<T>::min(), static_cast<T>(-1e-30)})
    x.insert(x.begin() + static_cast<std::ptrdiff_t>(x.size() / 2), v);
  const DType dt = std::is_same_v<T, float> ? DType::F32 : DType::F64;
  for (const double e : {3.0, 4.0, 5.0}) {
    const auto got = to_vec<T>(entry<Family::Scalar>(OpCode::powf_scalar_impl)(from_vec(x, Shape{x.size()}, dt), Scalar(e)));
    for (std::size_t i = 0; i < x.size(); ++i) {
      const T want = static_cast<T>(std::pow(static_cast<long double>(x[i]), static_cast<long double>(e)));
      const std::string what = std::string(dtype_name(dt)) + " " + std::to_string(x[i]) + " ^ " + std::to_string(e);
      if (std::isnan(want)) {
        ASSERT_TRUE(std::isnan(got[i])) << what;
      } else if (std::isinf(want) || want == 0) {
        ASSERT_EQ(got[i], want) << what;
        ASSERT_EQ(std::signbit(got[i]), std::signbit(want)) << what;
      } else {
        ASSERT_LE(std::fabs(got[i] - want), 2 * std::fabs(want) * std::numeric_limits<T>::epsilon()) << what;
      }
    }
  }
}

TEST(CpuUnary, SmallIntegralPowersAsProducts) {
  check_small_int_powers<float>();
  check_small_int_powers<double>();
}

TEST(CpuScan, CumulativeOps) {
  const auto scan = [](OpCode op, Prim p, std::size_t dim) { return entry<Family::Dim>(op)(std::move(p), dim); };
  // cumsum on a transposed view: [[1,3],[2,4]] along dim 1 = [[1,4],[2,6]].
  const Prim t = swap_dims(from_vec(std::vector<float>{1, 2, 3, 4}, Shape{2, 2}), 0, 1);
  EXPECT_EQ(to_f32(scan(OpCode::cumsum, t, 1)), (std::vector<float>{1, 4, 2, 6}));
  EXPECT_EQ(to_f32(scan(OpCode::cumsum, t, 0)), (std::vector<float>{1, 3, 3, 7}));
  EXPECT_EQ(to_f32(scan(OpCode::cumprod, t, 1)), (std::vector<float>{1, 3, 2, 8}));
  const auto mx = to_f32(scan(OpCode::cummax, from_vec(std::vector<float>{1, NAN, 5, 2}, Shape{4}), 0));
  EXPECT_EQ(mx[0], 1.0f);
  for (int i = 1; i < 4; ++i) EXPECT_TRUE(std::isnan(mx[i]));
  const auto mn = to_f32(scan(OpCode::cummin, from_vec(std::vector<float>{NAN, 1, -5}, Shape{3}), 0));
  for (float x : mn) EXPECT_TRUE(std::isnan(x));
  EXPECT_EQ(to_vec<std::int16_t>(scan(OpCode::cummin, from_vec(std::vector<std::int16_t>{3, 1, 2, -4}, Shape{4}), 0)),
            (std::vector<std::int16_t>{3, 1, 1, -4}));
  EXPECT_EQ(to_vec<std::int8_t>(scan(OpCode::cumsum, from_vec(std::vector<std::int8_t>{100, 100, -56}, Shape{3}), 0)),
            (std::vector<std::int8_t>{100, -56, -112}));
  EXPECT_EQ(cpu_of(scan(OpCode::cumsum, from_vec(std::vector<float>{}, Shape{2, 0}), 1)).shape(), (Shape{2, 0}));
}

TEST(CpuArg, ArgmaxArgminTiesNaNAndLayouts) {
  const auto arg = [](OpCode op, Prim p, std::size_t dim, DType out) {
    return entry<Family::DimIndex>(op)(std::move(p), dim, out);
  };
  const Prim a = from_vec(std::vector<float>{3, 3, -2, -2}, Shape{1, 4});
  EXPECT_EQ(to_vec<std::int64_t>(arg(OpCode::argmax, a, 1, DType::I64)), (std::vector<std::int64_t>{0}));
  EXPECT_EQ(to_vec<std::int32_t>(arg(OpCode::argmin, a, 1, DType::I32)), (std::vector<std::int32_t>{2}));
  const Prim n = from_vec(std::vector<float>{1, NAN, -3}, Shape{1, 3});
  EXPECT_EQ(to_vec<std::int64_t>(arg(OpCode::argmax, n, 1, DType::I64)), (std::vector<std::int64_t>{1}));
  EXPECT_EQ(to_vec<std::int64_t>(arg(OpCode::argmin, n, 1, DType::I64)), (std::vector<std::int64_t>{1}));
  // [[NaN,1],[NaN,2],[-3,4]] along dim 0: argmax [0,2], argmin [0,0].
  const Prim c = from_vec(std::vector<double>{NAN, 1, NAN, 2, -3, 4}, Shape{3, 2});
  EXPECT_EQ(to_vec<std::int64_t>(arg(OpCode::argmax, c, 0, DType::I64)), (std::vector<std::int64_t>{0, 2}));
  EXPECT_EQ(to_vec<std::int64_t>(arg(OpCode::argmin, c, 0, DType::I64)), (std::vector<std::int64_t>{0, 0}));
  // Ints, through a transposed view: [[1,3,3],[2,2,0]] -> max [1,0], min [0,2].
  const Prim i = swap_dims(from_vec(std::vector<std::int16_t>{1, 2, 3, 2, 3, 0}, Shape{3, 2}), 0, 1);
  EXPECT_EQ(to_vec<std::int32_t>(arg(OpCode::argmax, i, 1, DType::I32)), (std::vector<std::int32_t>{1, 0}));
  EXPECT_EQ(to_vec<std::int32_t>(arg(OpCode::argmin, i, 1, DType::I32)), (std::vector<std::int32_t>{0, 2}));
}

}  // namespace
}  // namespace tensor::cpu::test
