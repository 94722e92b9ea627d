// Hostile module-op options and enum values through the public API: option products
// (stride, dilation, padding, kernel) that overflow int64, windows far larger than the
// input, max-pool indices that point outside their window or plane, and enum arguments
// cast from integers outside their enumerators. Each is a typed error naming the op,
// or the right answer; the inputs are unchanged and the process stays usable. Runs in
// the hostile_test executable on TENSOR_TEST_DEVICE (cpu when unset).
#include <cstdlib>
#include <limits>

#include <tensor/nn.hpp>

#include "test_util.hpp"

namespace {

using namespace tt;
using namespace tensor::nn;

constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
constexpr std::int64_t k2p62 = std::int64_t{1} << 62;

Device dev() {
  const char* env = std::getenv("TENSOR_TEST_DEVICE");
  return env && *env ? Device::parse(env) : Device::cpu();
}
bool is_cpu() { return dev() == Device::cpu(); }

template <std::size_t D>
Tensor<D> iota(Shape s) {
  std::vector<float> v(s.num_elements());
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i);
  return Tensor<D>::from_data(TensorData::from<float>(v, s), dev());
}
template <std::size_t D, class K>
std::vector<float> fv(const Tensor<D, K>& t) { return t.into_data().convert(DType::F32).template to_vec<float>(); }

TEST(HostileOptions, ConvOptionProductsThatOverflowAreShapeErrors) {
  const auto x1 = iota<3>({1, 1, 5});
  const auto w1 = Tensor<3>::ones({1, 1, 3}, dev());
  const std::vector<float> before = fv(x1);
  ConvOptions<1> o1;
  o1.dilation = {k2p62};  // dilation * (kernel - 1) = 2^63
  EXPECT_THROWS(ShapeError, conv1d(x1, w1, std::nullopt, o1), "[conv1d]", "overflows");
  o1 = {};
  o1.padding = {kMax / 2 + 1};  // in + 2 * padding
  EXPECT_THROWS(ShapeError, conv1d(x1, w1, std::nullopt, o1), "[conv1d]", "overflows");
  EXPECT_EQ(fv(x1), before);

  const auto x2 = iota<4>({1, 1, 4, 4});
  const auto w2 = Tensor<4>::ones({1, 1, 2, 2}, dev());
  ConvOptions<2> o2;
  o2.dilation = {1, kMax};
  EXPECT_THROWS(ShapeError, conv2d(x2, w2, std::nullopt, o2), "[conv2d]", "overflows");
  EXPECT_THROWS(ShapeError, conv_weight_backward<4>(x2, w2, Tensor<4>::ones({1, 1, 3, 3}, dev()), o2),
                "[conv_weight_backward]", "overflows");
  ConvOptions<3> o3;
  o3.padding = {0, kMax, 0};
  EXPECT_THROWS(ShapeError, conv3d(iota<5>({1, 1, 2, 2, 2}), Tensor<5>::ones({1, 1, 1, 1, 1}, dev()), std::nullopt, o3),
                "[conv3d]", "overflows");

  ConvTransposeOptions<1> t1;
  t1.stride = {kMax};  // (in - 1) * stride with in = 5
  EXPECT_THROWS(ShapeError, conv_transpose1d(x1, w1, std::nullopt, t1), "[conv_transpose1d]", "overflows");
  t1 = {};
  t1.dilation = {k2p62};
  EXPECT_THROWS(ShapeError, conv_transpose1d(x1, w1, std::nullopt, t1), "[conv_transpose1d]", "overflows");
  // groups far beyond the channels of an empty-channel input.
  ConvTransposeOptions<1> tg;
  tg.groups = kMax;
  EXPECT_THROWS(ShapeError, conv_transpose1d(Tensor<3>::zeros({1, 0, 3}, dev()), Tensor<3>::zeros({0, 4, 1}, dev()),
                                             std::nullopt, tg),
                "[conv_transpose1d]");
  EXPECT_EQ(fv(x1 + 1.0f), (std::vector<float>{1, 2, 3, 4, 5}));
}

TEST(HostileOptions, ExtremeButValidConvOptionsGiveTheRightAnswer) {
  // stride 2^63 - 1 and padding 2^40: one output, whose window lies wholly in the left
  // padding (0). The first valid tap's index, ceil(2^40 / stride), must not be formed as
  // 2^40 + stride - 1 (an overflow that sent im2col outside its buffer).
  ConvOptions<1> o;
  o.stride = {kMax};
  o.padding = {std::int64_t{1} << 40};
  const auto x = iota<3>({1, 1, 6});
  const auto w = Tensor<3>::ones({1, 1, 6}, dev());
  if (is_cpu()) {
    const auto y = conv1d(x, w, std::nullopt, o);
    EXPECT_EQ(y.shape(), Shape({1, 1, 1}));
    EXPECT_EQ(fv(y), (std::vector<float>{0}));
  } else {
    try {  // a device may refuse what its shader words cannot hold; it must say so
      EXPECT_EQ(fv(conv1d(x, w, std::nullopt, o)), (std::vector<float>{0}));
    } catch (const tensor::Error& e) {
      EXPECT_NE(std::string(e.what()).find("conv1d"), std::string::npos) << e.what();
    }
  }
}

TEST(HostileOptions, UnfoldAndFoldKernelsThatOverflow) {
  const auto x = iota<4>({1, 2, 3, 3});
  UnfoldOptions o;
  o.padding = {std::int64_t{1} << 31, std::int64_t{1} << 31};
  // kh * kw = 2^64: a wrapped product would give an empty [1, 0, 1] "result".
  EXPECT_THROWS(ShapeError, unfold4d(x, {std::int64_t{1} << 32, std::int64_t{1} << 32}, o), "[unfold4d]", "overflows");
  UnfoldOptions d;
  d.dilation = {kMax, 1};
  EXPECT_THROWS(ShapeError, unfold4d(x, {3, 1}, d), "[unfold4d]", "overflows");
  EXPECT_THROWS(ShapeError,
                fold4d(Tensor<3>::zeros({1, 4, 1}, dev()), {2, 2}, {std::int64_t{1} << 32, std::int64_t{1} << 32}),
                "[fold4d]");
}

TEST(HostileOptions, PoolKernelTimesDilationOverflowIsAnError) {
  const auto x = iota<4>({1, 1, 4, 4});
  MaxPoolOptions<2> o;
  o.kernel_size = {2, 2};
  o.dilation = {kMax, 1};
  EXPECT_THROWS(ShapeError, max_pool2d(x, o), "[max_pool2d]", "overflows");
  MaxPoolOptions<1> o1;
  o1.kernel_size = {k2p62};
  o1.dilation = {4};
  EXPECT_THROWS(ShapeError, max_pool1d(iota<3>({1, 1, 8}), o1), "[max_pool1d]", "overflows");
  MaxPoolOptions<1> c;
  c.kernel_size = {3};
  c.stride = {kMax};
  c.ceil_mode = true;
  EXPECT_THROWS(ShapeError, max_pool1d(iota<3>({1, 1, 8}), c), "[max_pool1d]", "overflows");
  AvgPoolOptions<2> a;
  a.kernel_size = {2, 2};
  a.padding = {1, kMax};
  EXPECT_THROWS(ShapeError, avg_pool2d(x, a), "[avg_pool2d]");
}

TEST(HostileOptions, AWindowFarLargerThanTheInputCostsTheInput) {
  // kernel 2^40 (dilation 1), padding 2^39, stride 2^40: one window, whose 7 valid taps
  // are the whole input; the loop must not walk 2^40 taps.
  const auto x = iota<3>({1, 1, 7});
  MaxPoolOptions<1> o;
  o.kernel_size = {std::int64_t{1} << 40};
  o.padding = {std::int64_t{1} << 39};
  o.stride = {std::int64_t{1} << 40};
  if (is_cpu()) {
    const auto y = max_pool1d(x, o);
    EXPECT_EQ(y.shape(), Shape({1, 1, 1}));
    EXPECT_EQ(fv(y), (std::vector<float>{6}));
    const auto [v, i] = max_pool1d_with_indices(x, o);
    EXPECT_EQ(fv(i), (std::vector<float>{6}));
  } else {
    // A device may refuse a window it cannot loop over; it must say so, not hang.
    try {
      EXPECT_EQ(fv(max_pool1d(x, o)), (std::vector<float>{6}));
    } catch (const tensor::Error& e) {
      EXPECT_NE(std::string(e.what()).find("max_pool1d"), std::string::npos) << e.what();
    }
  }
}

TEST(HostileOptions, MaxPoolBackwardRefusesIndicesOutsideTheirWindow) {
  const auto x = iota<4>({1, 2, 4, 4});
  MaxPoolOptions<2> o;
  o.kernel_size = {2, 2};
  o.stride = {2, 2};
  const auto [y, idx] = max_pool2d_with_indices(x, o);
  const auto dy = Tensor<4>::ones(y.shape(), dev());
  // The forward's own indices: dx is 1 at each window's maximum (its bottom-right tap).
  const std::vector<float> dx = fv(max_pool2d_with_indices_backward(x, dy, idx, o));
  std::vector<float> want(32, 0.0f);
  for (std::size_t p = 0; p < 2; ++p)
    for (std::size_t h : {1, 3})
      for (std::size_t w : {1, 3}) want[p * 16 + h * 4 + w] = 1.0f;
  EXPECT_EQ(dx, want);

  const std::vector<std::int64_t> good = idx.into_data().convert(DType::I64).to_vec<std::int64_t>();
  auto with = [&](std::size_t at, std::int64_t v) {
    std::vector<std::int64_t> b = good;
    b[at] = v;
    return Tensor<4, Int>::from_data(TensorData::from<std::int64_t>(b, idx.shape()), dev());
  };
  // Negative, far out of range, into the next plane, inside the plane but another window.
  for (std::int64_t bad : {std::int64_t{-2}, std::int64_t{-1000000}, std::int64_t{1} << 40, std::int64_t{16},
                           std::int64_t{15}}) {
    EXPECT_THROWS(IndexError, fv(max_pool2d_with_indices_backward(x, dy, with(0, bad), o)),
                  "max_pool_with_indices_backward", "window")
        << bad;
  }
  // -1 (a window without a valid tap) contributes nothing.
  std::vector<float> want1 = want;
  want1[5] = 0.0f;
  EXPECT_EQ(fv(max_pool2d_with_indices_backward(x, dy, with(0, -1), o)), want1);
  EXPECT_EQ(fv(x + 0.0f), fv(iota<4>({1, 2, 4, 4})));
}

TEST(HostileOptions, EnumValuesOutsideTheirEnumerators) {
  const auto x = iota<4>({1, 1, 2, 2});
  InterpolateOptions io;
  io.mode = static_cast<InterpolateMode>(200);
  EXPECT_THROWS(ShapeError, interpolate(x, {4, 4}, io), "[interpolate]", "mode");
  GridSampleOptions go;
  go.mode = static_cast<GridSampleOptions::Mode>(9);
  const auto grid = Tensor<4>::zeros({1, 2, 2, 2}, dev());
  EXPECT_THROWS(ShapeError, x.grid_sample_2d(grid, go), "[grid_sample_2d]", "mode");
  go = {};
  go.padding = static_cast<GridSampleOptions::Padding>(7);
  EXPECT_THROWS(ShapeError, x.grid_sample_2d(grid, go), "[grid_sample_2d]", "padding mode");
  const auto v = iota<1>({4});
  const auto i = Tensor<1, Int>::from_data(TensorData::from<std::int64_t>({0, 1}, {2}), dev());
  const auto vals = Tensor<1>::ones({2}, dev());
  EXPECT_THROWS(ShapeError, v.scatter(0, i, vals, static_cast<IndexingUpdateOp>(42)), "[scatter]", "update op");
  EXPECT_THROWS(ShapeError, v.select_assign(0, i, vals, static_cast<IndexingUpdateOp>(5)), "[select_assign]", "update op");
  const auto nd = Tensor<2, Int>::from_data(TensorData::from<std::int64_t>({1}, {1, 1}), dev());
  EXPECT_THROWS(ShapeError, v.scatter_nd(nd, Tensor<1>::ones({1}, dev()), static_cast<IndexingUpdateOp>(99)), "[scatter_nd]",
                "update op");
  Distribution d;
  d.kind = static_cast<Distribution::Kind>(17);
  EXPECT_THROWS(ShapeError, Tensor<1>::random({8}, d, dev()), "[random]", "distribution");
  PadMode pm;
  pm.kind = static_cast<PadMode::Kind>(3);
  EXPECT_THROWS(ShapeError, v.pad({{1, 1}}, pm), "[pad]", "pad mode");
  EXPECT_EQ(fv(v), (std::vector<float>{0, 1, 2, 3}));
}

}  // namespace
