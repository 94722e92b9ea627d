// Where libtensor's answer must be burn 0.22's: roll's direction, hamming's coefficients,
// fmod by an infinity, is_close of infinities, one_hot_fill of negative classes,
// categorical's sample count, repeat / split / split_with_sizes / nonzero edge cases,
// an empty slice_assign, select_dim's rank, cov of rank 3, Display's elided rows, the
// gradient of an expand that adds dims and products with a unit inner dim. Expected
// values are worked out by hand from burn's definitions (the comment beside each).
// Runs on every device (TENSOR_TEST_DEVICE), in the burn_api executable.
#include <cmath>
#include <limits>

#include <tensor/gradients.hpp>
#include <tensor/signal.hpp>

#include "conformance/devices.hpp"
#include "test_util.hpp"

namespace {

using namespace tt;

const Device& dev() { return tt::conf::DeviceScope::current(); }

class BurnBehaviour : public ::testing::TestWithParam<Device> {
 protected:
  void SetUp() override { scope_.enter(GetParam()); }
  void TearDown() override { scope_.leave(); }
  tt::conf::DeviceScope scope_;
};

INSTANTIATE_TEST_SUITE_P(Devices, BurnBehaviour, ::testing::ValuesIn(tt::conf::devices()),
                         [](const ::testing::TestParamInfo<Device>& p) { return tt::conf::test_name(p.param); });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(BurnBehaviour);

template <std::size_t D>
Tensor<D> fl(std::vector<float> v, Shape s) { return Tensor<D>::from_data(TensorData::from<float>(v, s), dev()); }
template <std::size_t D>
Tensor<D, Int> in(std::vector<std::int32_t> v, Shape s) {
  return Tensor<D, Int>::from_data(TensorData::from<std::int32_t>(v, s), dev());
}
template <std::size_t D, class K>
std::vector<float> fv(const Tensor<D, K>& t) { return t.into_data().convert(DType::F32).template to_vec<float>(); }
template <std::size_t D, class K>
std::vector<std::int64_t> iv(const Tensor<D, K>& t) { return t.into_data().convert(DType::I64).template to_vec<std::int64_t>(); }
template <std::size_t D>
std::vector<bool> bv(const Tensor<D, Bool>& t) { return t.into_data().template to_vec<bool>(); }

::testing::AssertionResult near(const std::vector<float>& got, const std::vector<float>& want, float tol = 1e-5f) {
  if (got.size() != want.size()) return ::testing::AssertionFailure() << "size " << got.size() << " != " << want.size();
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i]) && std::isnan(got[i])) continue;
    if (!(std::fabs(got[i] - want[i]) <= tol * std::max(1.0f, std::fabs(want[i]))))
      return ::testing::AssertionFailure() << "at " << i << ": " << got[i] << " != " << want[i];
  }
  return ::testing::AssertionSuccess();
}

constexpr float kInf = std::numeric_limits<float>::infinity();

TEST_P(BurnBehaviour, RollMovesTheFirstElementsToTheEnd) {
  // burn: roll_dim(shift) is cat(x[shift..], x[..shift]), out[j] = x[(j + shift) mod n].
  const auto m = fl<2>({0, 1, 2, 3, 4, 5}, {2, 3});
  EXPECT_EQ(fv(m.roll({1, -1}, {0, 1})), (std::vector<float>{5, 3, 4, 2, 0, 1}));
  const auto v = in<1>({1, 2, 3, 4, 5}, {5});
  EXPECT_EQ(iv(v.roll_dim(1, 0)), (std::vector<std::int64_t>{2, 3, 4, 5, 1}));
  EXPECT_EQ(iv(v.roll_dim(-2, 0)), (std::vector<std::int64_t>{4, 5, 1, 2, 3}));
  EXPECT_EQ(iv(v.roll_dim(5, 0)), (std::vector<std::int64_t>{1, 2, 3, 4, 5}));
}

TEST_P(BurnBehaviour, HammingUsesBurnsCoefficients) {
  // alpha = 25/46, beta = 21/46; periodic N = size: w[n] = alpha - beta cos(2 pi n / 4).
  EXPECT_TRUE(near(fv(signal::hamming_window(4, true, dev())), {4.0f / 46, 25.0f / 46, 1.0f, 25.0f / 46}, 1e-6f));
  EXPECT_NEAR(fv(signal::hamming_window(8, true, dev()))[0], 0.086957f, 1e-6f);
}

TEST_P(BurnBehaviour, FmodByAnInfinityIsTheDividend) {
  const auto a = fl<1>({5.3f, -5.3f, 0.0f, -0.0f, 5.3f, 7.0f, kInf}, {7});
  const auto b = fl<1>({kInf, kInf, -kInf, kInf, -kInf, 2.0f, kInf}, {7});
  const std::vector<float> got = fv(a.fmod(b));
  ASSERT_EQ(got.size(), 7u);
  EXPECT_EQ(got[0], 5.3f);
  EXPECT_EQ(got[1], -5.3f);
  EXPECT_EQ(got[2], 0.0f);
  EXPECT_FALSE(std::signbit(got[2]));
  EXPECT_EQ(got[3], 0.0f);
  EXPECT_TRUE(std::signbit(got[3]));  // the sign of the dividend
  EXPECT_EQ(got[4], 5.3f);
  EXPECT_EQ(got[5], 1.0f);
  EXPECT_TRUE(std::isnan(got[6]));  // fmod(inf, inf) stays NaN
  const std::vector<float> s = fv(fl<1>({-5.3f, 0.0f}, {2}).fmod_scalar(-std::numeric_limits<double>::infinity()));
  EXPECT_EQ(s[0], -5.3f);
  EXPECT_EQ(s[1], 0.0f);
}

TEST_P(BurnBehaviour, InfinitiesAreCloseOnlyToThemselves) {
  const auto a = fl<1>({kInf, kInf, -kInf, 1.0f, 1.0f, std::nanf("")}, {6});
  const auto b = fl<1>({-kInf, kInf, -kInf, kInf, 1.0f + 1e-7f, std::nanf("")}, {6});
  EXPECT_EQ(bv(a.is_close(b)), (std::vector<bool>{false, true, true, false, true, false}));
  EXPECT_FALSE(fl<1>({kInf}, {1}).all_close(fl<1>({-kInf}, {1})));
  EXPECT_TRUE(fl<1>({-kInf, 2.0f}, {2}).all_close(fl<1>({-kInf, 2.0f}, {2})));
}

TEST_P(BurnBehaviour, OneHotFillWrapsNegativeClasses) {
  // burn's example: [[0, 2], [1, -1]] with 3 classes, on 5, off 0, last axis.
  const auto idx = fl<2>({0, 2, 1, -1}, {2, 2});
  const auto oh = idx.one_hot_fill<3>(3, Scalar(5.0), Scalar(0.0), -1);
  EXPECT_EQ(oh.shape(), Shape({2, 2, 3}));
  EXPECT_EQ(fv(oh), (std::vector<float>{5, 0, 0, 0, 0, 5, 0, 5, 0, 0, 0, 5}));
  const auto ioh = in<1>({-3, -1}, {2}).one_hot_fill<2>(3, Scalar(1), Scalar(0), 0);  // classes along axis 0
  EXPECT_EQ(iv(ioh), (std::vector<std::int64_t>{1, 0, 0, 0, 0, 1}));
  EXPECT_THROWS(IndexError, in<1>({-4}, {1}).one_hot_fill<2>(3, Scalar(1), Scalar(0), -1), "[one_hot_fill]", "-3..2");
  EXPECT_THROWS(IndexError, in<1>({3}, {1}).one_hot_fill<2>(3, Scalar(1), Scalar(0), -1), "[one_hot_fill]");
}

TEST_P(BurnBehaviour, CategoricalNeedsASample) {
  const auto w = fl<2>({1, 1, 1, 1}, {2, 2});
  EXPECT_THROWS(ShapeError, w.categorical(0), "[categorical]", "num_samples");
  EXPECT_EQ(w.categorical(3).shape(), Shape({2, 3}));
}

TEST_P(BurnBehaviour, RepeatAcceptsTrailingOnes) {
  const auto a = fl<2>({1, 2, 3}, {1, 3});
  const auto r = a.repeat({4, 1, 1});
  EXPECT_EQ(r.shape(), Shape({4, 3}));
  EXPECT_EQ(fv(r), (std::vector<float>{1, 2, 3, 1, 2, 3, 1, 2, 3, 1, 2, 3}));
  EXPECT_THROWS(ShapeError, a.repeat({1, 1, 2}), "[repeat]", "past the rank");
}

TEST_P(BurnBehaviour, SplitsOfEmptyDimsAndZeroSizes) {
  const auto e = Tensor<2>::zeros({0, 3}, dev());
  EXPECT_TRUE(e.split(2, 0).empty());
  EXPECT_TRUE(e.split(0, 0).empty());
  const auto v = fl<1>({0, 1, 2, 3, 4}, {5});
  const auto parts = v.split_with_sizes({0, 2, 0, 3, 0}, 0);
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(fv(parts[0]), (std::vector<float>{0, 1}));
  EXPECT_EQ(fv(parts[1]), (std::vector<float>{2, 3, 4}));
  EXPECT_TRUE(e.split_with_sizes({0}, 0).empty());
}

TEST_P(BurnBehaviour, NonzeroOfAllFalseIsEmpty) {
  const auto b = Tensor<2, Bool>::from_data(TensorData::from<bool>({false, false, false, false}, {2, 2}), dev());
  EXPECT_TRUE(b.nonzero().empty());
  const auto c = Tensor<2, Bool>::from_data(TensorData::from<bool>({false, true, true, false}, {2, 2}), dev());
  const auto nz = c.nonzero();
  ASSERT_EQ(nz.size(), 2u);
  EXPECT_EQ(iv(nz[0]), (std::vector<std::int64_t>{0, 1}));
  EXPECT_EQ(iv(nz[1]), (std::vector<std::int64_t>{1, 0}));
}

TEST_P(BurnBehaviour, SliceAssignIntoAnEmptySliceIsANoOp) {
  const auto a = fl<2>({1, 2, 3, 4}, {2, 2});
  // Rows 2..7 clamp to 2..2: nothing selected, whatever the value's shape.
  const auto r = a.slice_assign({Slice::range(2, 7), Slice::all()}, fl<2>({9, 9, 9, 9}, {2, 2}));
  EXPECT_EQ(fv(r), (std::vector<float>{1, 2, 3, 4}));
  const auto r2 = a.slice_assign({Slice::range(1, 1), Slice::all()}, Tensor<2>::zeros({3, 5}, dev()));
  EXPECT_EQ(fv(r2), (std::vector<float>{1, 2, 3, 4}));
  // A non-empty slice still checks the value's shape.
  EXPECT_THROWS(ShapeError, a.slice_assign({Slice::range(0, 1), Slice::all()}, Tensor<2>::zeros({2, 2}, dev())),
                "[slice_assign]");
}

TEST_P(BurnBehaviour, SelectDimRemovesTheDim) {
  const auto a = fl<3>({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, {2, 3, 2});
  const Tensor<2> s = a.select_dim(1, -1);  // a[:, 2, :]
  EXPECT_EQ(s.shape(), Shape({2, 2}));
  EXPECT_EQ(fv(s), (std::vector<float>{4, 5, 10, 11}));
  EXPECT_EQ(fv(a.select_dim(0, 1)), (std::vector<float>{6, 7, 8, 9, 10, 11}));
}

TEST_P(BurnBehaviour, CovOfRankThreeFollowsBurn) {
  // burn: c = (x - mean_dim(d)).swap_dims(d, 0); c^T (last two dims swapped) matmul c.
  // x [4, 2, 4], dim 0: c is [4, 2, 4]; c^T [4, 4, 2] x c [4, 2, 4] -> [4, 4, 4]. The
  // value at [b, i, j] is sum over k < 2 of c[b, k, i] c[b, k, j] / (4 - 1).
  std::vector<float> x(32);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 7) % 11) - 3.0f;
  const auto t = fl<3>(x, {4, 2, 4});
  const auto c = t.cov(0, 1);
  ASSERT_EQ(c.shape(), Shape({4, 4, 4}));
  auto at = [&](std::size_t a, std::size_t b, std::size_t cc) { return x[(a * 2 + b) * 4 + cc]; };
  std::vector<float> want(64);
  for (std::size_t b = 0; b < 4; ++b)
    for (std::size_t i = 0; i < 4; ++i)
      for (std::size_t j = 0; j < 4; ++j) {
        double s = 0;
        for (std::size_t k = 0; k < 2; ++k) {
          double mi = 0, mj = 0;
          for (std::size_t r = 0; r < 4; ++r) mi += at(r, k, i), mj += at(r, k, j);
          s += (at(b, k, i) - mi / 4) * (at(b, k, j) - mj / 4);
        }
        want[(b * 4 + i) * 4 + j] = static_cast<float>(s / 3.0);
      }
  EXPECT_TRUE(near(fv(c), want, 1e-5f));
}

TEST_P(BurnBehaviour, DisplayElidesRowsWithoutAComma) {
  PrintOptions cut;
  cut.threshold = 5;
  cut.edge_items = 1;
  const auto m = Tensor<1, Int>::arange(0, 27, dev()).reshape<3>({3, 3, 3});
  const std::string s = m.to_string(cut);
  EXPECT_NE(s.find("[[[0, ..., 2],\n  ...\n  [6, ..., 8]],\n ...\n [[18, ..., 20],\n  ...\n  [24, ..., 26]]]"),
            std::string::npos)
      << s;
  EXPECT_EQ(s.find("backend"), std::string::npos);
  EXPECT_EQ(s.find("...,\n"), std::string::npos);
}

TEST_P(BurnBehaviour, ExpandThatAddsDimsSumsThemInTheGradient) {
  // x [3, 1] expanded to [1, 3, 3]; d sum(out * up) / dx[i] = sum_j up[0, i, j].
  const Device ad = dev().autodiff();
  auto x = Tensor<2>::from_data(TensorData::from<float>({1, 2, 3}, {3, 1}), ad).require_grad();
  const auto up = Tensor<1, Int>::arange(0, 9, ad).float_().reshape<3>({1, 3, 3});
  const auto y = x.expand<3>({1, 3, 3});
  const Gradients g = (y * up).sum().backward();
  EXPECT_EQ(fv(x.grad(g).value()), (std::vector<float>{3, 12, 21}));

  // A [6, 1] view (a slice of [6, 2]) expanded to [2, 6, 7]: every element's gradient is
  // 2 * 7 = 14 terms of `up`.
  auto base = Tensor<2>::ones({6, 2}, ad).require_grad();
  const auto view = base.slice({Slice::all(), Slice::range(0, 1)});
  const auto up2 = Tensor<1, Int>::arange(0, 84, ad).float_().reshape<3>({2, 6, 7});
  const Gradients g2 = (view.expand<3>({2, 6, 7}) * up2).sum().backward();
  std::vector<float> want(12, 0.0f);
  for (std::size_t i = 0; i < 6; ++i) {
    double s = 0;
    for (std::size_t a = 0; a < 2; ++a)
      for (std::size_t j = 0; j < 7; ++j) s += static_cast<double>((a * 6 + i) * 7 + j);
    want[i * 2] = static_cast<float>(s);
  }
  EXPECT_EQ(fv(base.grad(g2).value()), want);
}

TEST_P(BurnBehaviour, ProductsWithAUnitDimKeepIeeeNaN) {
  // inf * 0 is NaN in every dtype and every product shape (inner dim 1, a row, a column).
  for (DType dt : {DType::F32, DType::F64}) {
    if (!dev().dtype_usage(dt).contains(DTypeUsage::Arithmetic)) continue;
    const auto a = Tensor<2>::from_data(TensorData::from<float>({kInf, 1.0f}, {2, 1}), dev()).cast(dt);
    const auto b = Tensor<2>::from_data(TensorData::from<float>({0.0f, 2.0f}, {1, 2}), dev()).cast(dt);
    const std::vector<float> p = fv(a.matmul(b));  // [2, 1] x [1, 2]
    ASSERT_EQ(p.size(), 4u);
    EXPECT_TRUE(std::isnan(p[0])) << dtype_name(dt);
    EXPECT_EQ(p[1], kInf) << dtype_name(dt);
    EXPECT_EQ(p[2], 0.0f) << dtype_name(dt);
    EXPECT_EQ(p[3], 2.0f) << dtype_name(dt);
    // A row times a matrix and a matrix times a column (m = 1 and n = 1).
    const auto row = Tensor<2>::from_data(TensorData::from<float>({0.0f, 1.0f}, {1, 2}), dev()).cast(dt);
    const auto mat = Tensor<2>::from_data(TensorData::from<float>({kInf, 1.0f, 1.0f, 1.0f}, {2, 2}), dev()).cast(dt);
    const std::vector<float> r = fv(row.matmul(mat));
    EXPECT_TRUE(std::isnan(r[0])) << dtype_name(dt);
    EXPECT_EQ(r[1], 1.0f) << dtype_name(dt);
    const auto col = Tensor<2>::from_data(TensorData::from<float>({0.0f, 1.0f}, {2, 1}), dev()).cast(dt);
    const std::vector<float> c = fv(mat.matmul(col));
    EXPECT_TRUE(std::isnan(c[0])) << dtype_name(dt);
    EXPECT_EQ(c[1], 1.0f) << dtype_name(dt);
  }
}

}  // namespace
