// tensor::nn (lib/include/tensor/nn.hpp) on every device of the conformance list (cpu,
// mini: its module ops are dispatch's defaults, vulkan): module-ops.md's torch edge
// cases (values written here), naive nested-loop references written here, error paths
// (typed errors naming the op, inputs intact) and non-contiguous inputs.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include <tensor/nn.hpp>

#include "conformance/devices.hpp"

namespace {

using namespace tensor;
using namespace tensor::nn;
using I = std::int64_t;

const Device& dev() { return tt::conf::DeviceScope::current(); }

class Nn : public ::testing::TestWithParam<Device> {
 protected:
  void SetUp() override { scope_.enter(GetParam()); }
  void TearDown() override { scope_.leave(); }
  tt::conf::DeviceScope scope_;
};
INSTANTIATE_TEST_SUITE_P(Devices, Nn, ::testing::ValuesIn(tt::conf::devices()),
                         [](const ::testing::TestParamInfo<Device>& p) { return tt::conf::test_name(p.param); });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(Nn);

template <std::size_t D>
Tensor<D> make(const std::vector<double>& v, const Shape& s) {
  std::vector<float> f(v.begin(), v.end());
  return Tensor<D>::from_data(TensorData::from(f, s), dev());
}
template <std::size_t D>
Tensor<D, Int> make_int(const std::vector<std::int32_t>& v, const Shape& s) {
  return Tensor<D, Int>::from_data(TensorData::from(v, s), dev());
}
std::vector<double> seq(double from, std::size_t n, double step = 1.0) {
  std::vector<double> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = from + step * static_cast<double>(i);
  return v;
}
// Values in [-1, 1) from a fixed LCG.
std::vector<double> rnd(std::size_t n, std::uint32_t seed) {
  std::vector<double> v(n);
  std::uint32_t s = seed * 2654435761u + 12345u;
  for (auto& x : v) {
    s = s * 1664525u + 1013904223u;
    x = static_cast<double>(s >> 8) / static_cast<double>(1u << 23) - 1.0;
  }
  return v;
}
template <std::size_t D, class K>
std::vector<double> values(const Tensor<D, K>& t) { return t.into_data().convert(DType::F64).template to_vec<double>(); }

void expect_values(const std::vector<double>& got, const std::vector<double>& want, double tol = 1e-4) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    if (std::isinf(want[i])) EXPECT_EQ(got[i], want[i]) << "element " << i;
    else EXPECT_NEAR(got[i], want[i], tol * (1.0 + std::fabs(want[i]))) << "element " << i;
  }
}
template <std::size_t D, class K>
void expect_shape(const Tensor<D, K>& t, const Shape& s) { EXPECT_EQ(t.shape().to_string(), s.to_string()); }

// ---- convolution: module-ops.md E1-E7 ----------------------------------------------------

TEST_P(Nn, E1Conv2dGroupsDilationStridePadding) {
  ConvOptions<2> o;
  o.stride = {2, 1};
  o.padding = {1, 0};
  o.dilation = {2, 2};
  o.groups = 2;
  auto y = conv2d(make<4>(seq(0, 100), {1, 4, 5, 5}), make<4>(std::vector<double>(16, 1.0), {2, 2, 2, 2}), std::nullopt, o);
  expect_shape(y, {1, 2, 3, 3});
  expect_values(values(y), {74, 78, 82, 188, 196, 204, 114, 118, 122, 274, 278, 282, 588, 596, 604, 314, 318, 322});
}

TEST_P(Nn, E2Conv1dDilationPadding) {
  ConvOptions<1> o;
  o.stride = {2};
  o.padding = {1};
  o.dilation = {3};
  auto y = conv1d(make<3>(seq(1, 7), {1, 1, 7}), make<3>({1, 10, 100}, {1, 1, 3}), std::nullopt, o);
  expect_values(values(y), {630, 52});
}

TEST_P(Nn, E3Conv1dBackwardUnreadInput) {
  ConvOptions<1> o;
  o.stride = {2};
  auto x = make<3>(seq(1, 5), {1, 1, 5});
  auto w = make<3>({1, 1}, {1, 1, 2});
  auto dy = make<3>({1, 1}, {1, 1, 2});
  expect_values(values(conv_x_backward<3>(x, w, dy, o)), {1, 1, 1, 1, 0});
  expect_values(values(conv_weight_backward<3>(x, w, dy, o)), {4, 6});
}

TEST_P(Nn, E4ConvTranspose2dOutputPadding) {
  ConvTransposeOptions<2> o;
  o.stride = {2, 2};
  o.padding = {1, 1};
  o.padding_out = {1, 1};
  auto y = conv_transpose2d(make<4>(std::vector<double>(4, 1.0), {1, 1, 2, 2}), make<4>(std::vector<double>(9, 1.0), {1, 1, 3, 3}),
                            std::nullopt, o);
  expect_shape(y, {1, 1, 4, 4});
  expect_values(values(y), {1, 2, 1, 1, 2, 4, 2, 2, 1, 2, 1, 1, 1, 2, 1, 1});
}

TEST_P(Nn, E5ConvTranspose1dGroups) {
  ConvTransposeOptions<1> o;
  o.groups = 2;
  auto y = conv_transpose1d(make<3>({1, 2, 3, 4}, {1, 2, 2}), make<3>({1, 1, 10, 10}, {2, 1, 2}), std::nullopt, o);
  expect_values(values(y), {1, 3, 2, 30, 70, 40});
}

TEST_P(Nn, E6ConvTranspose1dDilation) {
  ConvTransposeOptions<1> o;
  o.stride = {3};
  o.dilation = {2};
  auto y = conv_transpose1d(make<3>({1, 2}, {1, 1, 2}), make<3>({1, 10, 100}, {1, 1, 3}), std::nullopt, o);
  expect_values(values(y), {1, 0, 10, 2, 100, 20, 0, 200});
}

TEST_P(Nn, E7BiasGradient) {
  expect_values(values(conv2d_bias_backward(make<4>(std::vector<double>(24, 1.0), {2, 3, 2, 2}))), {8, 8, 8});
}

// A direct nested-loop conv2d (zero padding, groups, stride, dilation, bias).
std::vector<double> ref_conv2d(const std::vector<double>& x, const Shape& xs, const std::vector<double>& w, const Shape& ws,
                               const std::vector<double>& b, const ConvOptions<2>& o, Shape& out) {
  const I n = static_cast<I>(xs[0]), c = static_cast<I>(xs[1]), h = static_cast<I>(xs[2]), wd = static_cast<I>(xs[3]);
  const I co = static_cast<I>(ws[0]), cg = static_cast<I>(ws[1]), kh = static_cast<I>(ws[2]), kw = static_cast<I>(ws[3]);
  const I ho = (h + 2 * o.padding[0] - o.dilation[0] * (kh - 1) - 1) / o.stride[0] + 1;
  const I wo = (wd + 2 * o.padding[1] - o.dilation[1] * (kw - 1) - 1) / o.stride[1] + 1;
  out = Shape{xs[0], ws[0], static_cast<std::size_t>(ho), static_cast<std::size_t>(wo)};
  const I cog = co / o.groups;
  std::vector<double> y;
  for (I in = 0; in < n; ++in)
    for (I oc = 0; oc < co; ++oc)
      for (I i = 0; i < ho; ++i)
        for (I j = 0; j < wo; ++j) {
          double acc = b.empty() ? 0.0 : b[static_cast<std::size_t>(oc)];
          const I g = oc / cog;
          for (I ic = 0; ic < cg; ++ic)
            for (I a = 0; a < kh; ++a)
              for (I e = 0; e < kw; ++e) {
                const I hh = i * o.stride[0] - o.padding[0] + a * o.dilation[0];
                const I ww = j * o.stride[1] - o.padding[1] + e * o.dilation[1];
                if (hh < 0 || hh >= h || ww < 0 || ww >= wd) continue;
                acc += x[static_cast<std::size_t>(((in * c + g * cg + ic) * h + hh) * wd + ww)] *
                       w[static_cast<std::size_t>(((oc * cg + ic) * kh + a) * kw + e)];
              }
          y.push_back(acc);
        }
  return y;
}

TEST_P(Nn, Conv2dAgainstNestedLoops) {
  struct G { Shape xs, ws; ConvOptions<2> o; bool bias; };
  const std::vector<G> grid = {
      {{2, 3, 6, 5}, {4, 3, 3, 3}, {{1, 1}, {1, 1}, {1, 1}, 1}, true},
      {{1, 4, 7, 7}, {6, 2, 3, 2}, {{2, 1}, {1, 2}, {2, 1}, 2}, false},
      {{2, 4, 5, 6}, {4, 1, 3, 3}, {{1, 2}, {1, 1}, {1, 1}, 4}, true},  // depthwise
      {{1, 2, 8, 3}, {3, 2, 1, 1}, {{3, 1}, {0, 0}, {1, 1}, 1}, true},
  };
  std::uint32_t seed = 1;
  for (const G& g : grid) {
    SCOPED_TRACE(g.xs.to_string() + " * " + g.ws.to_string());
    const auto x = rnd(g.xs.num_elements(), seed++), w = rnd(g.ws.num_elements(), seed++);
    const auto b = g.bias ? rnd(g.ws[0], seed++) : std::vector<double>{};
    Shape out;
    const auto want = ref_conv2d(x, g.xs, w, g.ws, b, g.o, out);
    auto y = conv2d(make<4>(x, g.xs), make<4>(w, g.ws), g.bias ? std::optional(make<1>(b, {g.ws[0]})) : std::nullopt, g.o);
    expect_shape(y, out);
    expect_values(values(y), want, 1e-4);
  }
}

TEST_P(Nn, Conv2dNonContiguousInputs) {
  // x given transposed in H/W and as a step-slice of a wider tensor: same answer as the dense copy.
  const Shape xs{1, 2, 4, 5}, ws{3, 2, 2, 3};
  const auto x = rnd(xs.num_elements(), 7), w = rnd(ws.num_elements(), 8);
  ConvOptions<2> o;
  o.padding = {1, 0};
  Shape out;
  const auto want = ref_conv2d(x, xs, w, ws, {}, o, out);
  // The transpose of the [1, 2, 5, 4] tensor holding x's transpose.
  std::vector<double> xt(x.size());
  for (std::size_t c = 0; c < 2; ++c)
    for (std::size_t i = 0; i < 4; ++i)
      for (std::size_t j = 0; j < 5; ++j) xt[(c * 5 + j) * 4 + i] = x[(c * 4 + i) * 5 + j];
  auto xv = make<4>(xt, {1, 2, 5, 4}).swap_dims(2, 3);
  expect_values(values(conv2d(xv, make<4>(w, ws), std::nullopt, o)), want);
  // Every other column of a [1, 2, 4, 10] tensor.
  std::vector<double> wide(80, 99.0);
  for (std::size_t c = 0; c < 2; ++c)
    for (std::size_t i = 0; i < 4; ++i)
      for (std::size_t j = 0; j < 5; ++j) wide[(c * 4 + i) * 10 + 2 * j] = x[(c * 4 + i) * 5 + j];
  auto xs2 = make<4>(wide, {1, 2, 4, 10}).slice({Slice::all(), Slice::all(), Slice::all(), Slice::range(0, 10, 2)});
  expect_values(values(conv2d(xs2, make<4>(w, ws), std::nullopt, o)), want);
}

TEST_P(Nn, Conv2dEmptyBatch) {
  auto y = conv2d(make<4>({}, {0, 2, 4, 4}), make<4>(rnd(36, 3), {2, 2, 3, 3}), std::nullopt, {});
  expect_shape(y, {0, 2, 2, 2});
}

TEST_P(Nn, ConvErrorsNameTheOpAndKeepInputs) {
  auto x = make<4>(seq(0, 32), {1, 2, 4, 4});
  auto w = make<4>(std::vector<double>(18, 1.0), {1, 2, 3, 3});
  auto expect_shape_error = [&](const ConvOptions<2>& o, const Tensor<4>& ww, const char* what) {
    try {
      (void)conv2d(x, ww, std::nullopt, o);
      ADD_FAILURE() << "no error for " << what;
    } catch (const ShapeError& e) {
      EXPECT_NE(std::string(e.what()).find("[conv2d]"), std::string::npos) << e.what();
    }
  };
  ConvOptions<2> o;
  o.stride = {0, 1};
  expect_shape_error(o, w, "zero stride");
  o = {};
  o.stride = {-1, 1};
  expect_shape_error(o, w, "negative stride");
  o = {};
  o.dilation = {0, 1};
  expect_shape_error(o, w, "zero dilation");
  o = {};
  o.padding = {-1, 0};
  expect_shape_error(o, w, "negative padding");
  o = {};
  o.groups = 3;
  expect_shape_error(o, w, "channels not divisible by groups");
  o = {};
  o.groups = 0;
  expect_shape_error(o, w, "zero groups");
  expect_shape_error({}, make<4>(std::vector<double>(50, 1.0), {1, 2, 5, 5}), "kernel larger than the input");
  expect_shape_error({}, make<4>(std::vector<double>(27, 1.0), {1, 3, 3, 3}), "weight channels");
  EXPECT_THROW((void)conv2d(x, w, make<1>({1, 2}, {2}), {}), ShapeError);  // bias of the wrong size
  expect_values(values(x), seq(0, 32));
  expect_values(values(w), std::vector<double>(18, 1.0));
}

// ---- pooling: E8-E21 -------------------------------------------------------------------

MaxPoolOptions<1> mp1(I k, I s, I p, I d = 1, bool ceil = false) { return {{k}, {s}, {p}, {d}, ceil}; }
AvgPoolOptions<1> ap1(I k, I s, I p, bool cip, bool ceil) { return {{k}, {s}, {p}, cip, ceil}; }

TEST_P(Nn, E8MaxPoolCeilDropsWindowInPadding) {
  expect_values(values(max_pool1d(make<3>(seq(1, 5), {1, 1, 5}), mp1(2, 2, 1, 1, true))), {1, 3, 5});
}
TEST_P(Nn, E9CeilKeepsPartialWindows) {
  MaxPoolOptions<2> o{{3, 3}, {2, 2}, {0, 0}, {1, 1}, true};
  expect_values(values(max_pool2d(make<4>(seq(1, 36), {1, 1, 6, 6}), o)), {15, 17, 18, 27, 29, 30, 33, 35, 36});
}
TEST_P(Nn, E10AvgPoolCeilPadding) {
  auto x = make<3>(seq(1, 5), {1, 1, 5});
  expect_values(values(avg_pool1d(x, ap1(2, 2, 1, true, true))), {0.5, 2.5, 4.5});
  expect_values(values(avg_pool1d(x, ap1(2, 2, 1, false, true))), {1, 2.5, 4.5});
}
TEST_P(Nn, E11DivisorCountsPaddingNotOverhang) {
  auto x = make<3>(seq(1, 6), {1, 1, 6});
  expect_values(values(avg_pool1d(x, ap1(3, 2, 1, true, true))), {1, 3, 5, 3});
  expect_values(values(avg_pool1d(x, ap1(3, 2, 1, false, true))), {1.5, 3, 5, 6});
}
TEST_P(Nn, E12AvgPool2dBorderDivisors) {
  auto x = make<4>(seq(1, 9), {1, 1, 3, 3});
  AvgPoolOptions<2> o{{3, 3}, {1, 1}, {1, 1}, true, false};
  expect_values(values(avg_pool2d(x, o)), {1.3333, 2.3333, 1.7778, 3, 5, 3.6667, 2.6667, 4.3333, 3.1111});
  o.count_include_pad = false;
  expect_values(values(avg_pool2d(x, o)), {3, 3.5, 4, 4.5, 5, 5.5, 6, 6.5, 7});
}
TEST_P(Nn, E13MaxPoolPaddingIsMinusInfinity) {
  expect_values(values(max_pool1d(make<3>({-5, -3, -4}, {1, 1, 3}), mp1(2, 1, 1))), {-5, -3, -3, -4});
}
TEST_P(Nn, E14IndexEncoding) {
  MaxPoolOptions<2> o{{2, 2}, {2, 2}, {1, 1}, {1, 1}, false};
  auto [v, i] = max_pool2d_with_indices(make<4>(seq(0, 16, -1), {1, 1, 4, 4}), o);
  expect_values(values(v), {0, -1, -3, -4, -5, -7, -12, -13, -15});
  expect_values(values(i), {0, 1, 3, 4, 5, 7, 12, 13, 15});
}
TEST_P(Nn, E15TiesAndOverlapInBackward) {
  auto x = make<4>({1, 3, 3, 2}, {1, 1, 1, 4});
  MaxPoolOptions<2> o{{1, 2}, {1, 1}, {0, 0}, {1, 1}, false};
  auto [v, i] = max_pool2d_with_indices(x, o);
  expect_values(values(v), {3, 3, 3});
  expect_values(values(i), {1, 1, 2});
  expect_values(values(max_pool2d_with_indices_backward(x, make<4>({1, 1, 1}, {1, 1, 1, 3}), i, o)), {0, 2, 1, 0});
}
TEST_P(Nn, E17DilatedMaxPool) {
  expect_values(values(max_pool1d(make<3>(seq(0, 7), {1, 1, 7}), mp1(3, 1, 0, 2))), {4, 5, 6});
}
TEST_P(Nn, E18To21Adaptive) {
  expect_values(values(adaptive_avg_pool1d(make<3>(seq(1, 5), {1, 1, 5}), 3)), {1.5, 3, 4.5});
  expect_values(values(adaptive_avg_pool1d(make<3>(seq(1, 3), {1, 1, 3}), 5)), {1, 1.5, 2, 2.5, 3});
  auto x = make<3>(seq(1, 5), {1, 1, 5});
  expect_values(values(adaptive_avg_pool1d_backward(x, make<3>({1, 1, 1}, {1, 1, 3}))), {0.5, 0.8333, 0.3333, 0.8333, 0.5});
  expect_values(values(adaptive_avg_pool2d(make<4>(seq(1, 9), {1, 1, 3, 3}), {2, 2})), {3, 4, 6, 7});
}

TEST_P(Nn, PoolErrors) {
  auto x = make<4>(seq(0, 16), {1, 1, 4, 4});
  EXPECT_THROW((void)max_pool2d(x, MaxPoolOptions<2>{{2, 2}, {0, 1}, {0, 0}, {1, 1}, false}), ShapeError);   // zero stride
  EXPECT_THROW((void)max_pool2d(x, MaxPoolOptions<2>{{2, 2}, {1, 1}, {2, 0}, {1, 1}, false}), ShapeError);   // padding > k/2
  EXPECT_THROW((void)max_pool2d(x, MaxPoolOptions<2>{{5, 1}, {1, 1}, {0, 0}, {1, 1}, false}), ShapeError);   // kernel > input
  EXPECT_THROW((void)avg_pool2d(x, AvgPoolOptions<2>{{0, 1}, {1, 1}, {0, 0}, true, false}), ShapeError);      // zero kernel
  EXPECT_THROW((void)adaptive_avg_pool2d(x, {0, 2}), ShapeError);
  try {
    (void)avg_pool2d(x, AvgPoolOptions<2>{{2, 2}, {1, 1}, {3, 0}, true, false});
    ADD_FAILURE() << "no error";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("[avg_pool2d]"), std::string::npos) << e.what();
  }
  expect_values(values(x), seq(0, 16));
}

// Max pool against a nested-loop reference on a transposed input (ceil, padding, dilation).
TEST_P(Nn, MaxPool2dAgainstNestedLoopsOnTransposedInput) {
  const I H = 7, W = 6;
  const auto x = rnd(static_cast<std::size_t>(2 * H * W), 11);
  MaxPoolOptions<2> o{{3, 2}, {2, 2}, {1, 1}, {1, 2}, true};
  auto out = [](I in, I k, I s, I p, I d) {
    I n = (in + 2 * p - d * (k - 1) - 1 + s - 1) / s + 1;
    if ((n - 1) * s >= in + p) --n;
    return n;
  };
  const I OH = out(H, 3, 2, 1, 1), OW = out(W, 2, 2, 1, 2);
  std::vector<double> want;
  for (I c = 0; c < 2; ++c)
    for (I i = 0; i < OH; ++i)
      for (I j = 0; j < OW; ++j) {
        double best = -std::numeric_limits<double>::infinity();
        for (I a = 0; a < 3; ++a)
          for (I b = 0; b < 2; ++b) {
            const I h = i * 2 - 1 + a, w = j * 2 - 1 + 2 * b;
            if (h >= 0 && h < H && w >= 0 && w < W) best = std::max(best, x[static_cast<std::size_t>((c * H + h) * W + w)]);
          }
        want.push_back(best);
      }
  std::vector<double> xt(x.size());
  for (I c = 0; c < 2; ++c)
    for (I h = 0; h < H; ++h)
      for (I w = 0; w < W; ++w) xt[static_cast<std::size_t>((c * W + w) * H + h)] = x[static_cast<std::size_t>((c * H + h) * W + w)];
  auto xv = make<4>(xt, {1, 2, static_cast<std::size_t>(W), static_cast<std::size_t>(H)}).swap_dims(2, 3);
  expect_values(values(max_pool2d(xv, o)), want);
}

// ---- interpolate, embedding, layer_norm, attention ----------------------------------------

TEST_P(Nn, E25BilinearBorders) {
  auto x = make<4>({1, 2, 3, 4}, {1, 1, 1, 4});
  expect_values(values(interpolate(x, {1, 8}, {InterpolateMode::Bilinear, false})), {1, 1.25, 1.75, 2.25, 2.75, 3.25, 3.75, 4});
  expect_values(values(interpolate(x, {1, 8}, {InterpolateMode::Bilinear, true})),
                {1, 1.4286, 1.8571, 2.2857, 2.7143, 3.1429, 3.5714, 4});
}
TEST_P(Nn, E27Bicubic) {
  auto x = make<4>({1, 2, 3, 4}, {1, 1, 1, 4});
  expect_values(values(interpolate(x, {1, 8}, {InterpolateMode::Bicubic, false})),
                {0.8945, 1.1914, 1.668, 2.2969, 2.7031, 3.332, 3.8086, 4.1055}, 2e-4);
}
TEST_P(Nn, E30NearestBackwardAccumulates) {
  auto x = make<4>({1, 2}, {1, 1, 1, 2});
  expect_values(values(interpolate_backward(x, make<4>(std::vector<double>(5, 1.0), {1, 1, 1, 5}), {1, 5})), {3, 2});
}
TEST_P(Nn, E31EmbeddingBackwardRepeatedIndices) {
  auto w = make<2>(seq(0, 6), {3, 2});
  auto idx = make_int<2>({0, 2, 0}, {1, 3});
  expect_values(values(embedding(w, idx)), {0, 1, 4, 5, 0, 1});
  expect_values(values(embedding_backward(w, make<3>({1, 1, 2, 2, 3, 3}, {1, 3, 2}), idx)), {4, 4, 0, 0, 2, 2});
}
TEST_P(Nn, EmbeddingIndexOutOfRange) {
  auto w = make<2>(seq(0, 6), {3, 2});
  EXPECT_THROW((void)embedding(w, make_int<2>({0, 3}, {1, 2})), IndexError);
  EXPECT_THROW((void)embedding(w, make_int<2>({-1, 0}, {1, 2})), IndexError);
  expect_values(values(w), seq(0, 6));
}
TEST_P(Nn, E33LayerNormBiasedVariance) {
  auto y = layer_norm<2>(make<2>({1, 2, 3, 4}, {1, 4}), make<1>({1, 1, 1, 1}, {4}), std::nullopt, 0.0);
  expect_values(values(y), {-1.3416, -0.4472, 0.4472, 1.3416});
  auto y2 = layer_norm<2>(make<2>({1, 2, 3, 4}, {1, 4}), make<1>({2, 2, 2, 2}, {4}), make<1>({1, 1, 1, 1}, {4}), 0.0);
  expect_values(values(y2), {-1.6833, 0.1056, 1.8944, 3.6833});
  EXPECT_THROW((void)layer_norm<2>(make<2>({1, 2, 3, 4}, {1, 4}), make<1>({1, 1, 1}, {3}), std::nullopt), ShapeError);
}
TEST_P(Nn, AttentionAgainstNaiveSoftmax) {
  const std::size_t L = 3, S = 4, D = 2;
  const auto q = rnd(L * D, 21), k = rnd(S * D, 22), v = rnd(S * D, 23);
  std::vector<bool> m(L * S, false);
  m[1] = true;  // query 0 does not see key 1
  std::vector<double> want;
  for (std::size_t i = 0; i < L; ++i) {
    std::vector<double> s(S);
    double mx = -1e300, sum = 0;
    for (std::size_t j = 0; j < S; ++j) {
      s[j] = 0;
      for (std::size_t e = 0; e < D; ++e) s[j] += q[i * D + e] * k[j * D + e];
      s[j] /= std::sqrt(static_cast<double>(D));
      if (!m[i * S + j]) mx = std::max(mx, s[j]);
    }
    for (std::size_t j = 0; j < S; ++j) sum += m[i * S + j] ? 0 : std::exp(s[j] - mx);
    for (std::size_t e = 0; e < D; ++e) {
      double o = 0;
      for (std::size_t j = 0; j < S; ++j) o += m[i * S + j] ? 0 : std::exp(s[j] - mx) / sum * v[j * D + e];
      want.push_back(o);
    }
  }
  auto mask = Tensor<4, Bool>::from_data(TensorData::from(m, Shape{1, 1, L, S}), dev());
  auto y = attention(make<4>(q, {1, 1, L, D}), make<4>(k, {1, 1, S, D}), make<4>(v, {1, 1, S, D}), mask);
  expect_values(values(y), want);
  auto bad = Tensor<4, Bool>::from_data(TensorData::from(std::vector<bool>(L * L, false), Shape{1, 1, L, L}), dev());
  EXPECT_THROW((void)attention(make<4>(q, {1, 1, L, D}), make<4>(k, {1, 1, S, D}), make<4>(v, {1, 1, S, D}), bad), ShapeError);
}

}  // namespace
