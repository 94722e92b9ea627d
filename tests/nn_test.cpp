// tensor::nn (lib/include/tensor/nn.hpp) on every device of the conformance list (cpu,
// mini: its module ops are dispatch's defaults, vulkan): module-ops.md's torch edge
// cases (values written here), naive nested-loop references written here, error paths
// (typed errors naming the op, inputs intact) and non-contiguous inputs.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <optional>
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

// Calls f(x_index, w_index, y_index) for every multiply-add of conv2d(x [xs], w [ws], o); out
// gets y's shape.
template <class F>
void conv2d_taps(const Shape& xs, const Shape& ws, const ConvOptions<2>& o, Shape& out, F&& f) {
  const I n = I(xs[0]), c = I(xs[1]), h = I(xs[2]), wd = I(xs[3]);
  const I co = I(ws[0]), cg = I(ws[1]), kh = I(ws[2]), kw = I(ws[3]);
  const I ho = (h + 2 * o.padding[0] - o.dilation[0] * (kh - 1) - 1) / o.stride[0] + 1;
  const I wo = (wd + 2 * o.padding[1] - o.dilation[1] * (kw - 1) - 1) / o.stride[1] + 1;
  out = Shape{xs[0], ws[0], std::size_t(ho), std::size_t(wo)};
  const I cog = co / o.groups;
  for (I in = 0; in < n; ++in)
    for (I oc = 0; oc < co; ++oc)
      for (I i = 0; i < ho; ++i)
        for (I j = 0; j < wo; ++j)
          for (I ic = 0; ic < cg; ++ic)
            for (I a = 0; a < kh; ++a)
              for (I e = 0; e < kw; ++e) {
                const I hh = i * o.stride[0] - o.padding[0] + a * o.dilation[0];
                const I ww = j * o.stride[1] - o.padding[1] + e * o.dilation[1];
                if (hh < 0 || hh >= h || ww < 0 || ww >= wd) continue;
                f(std::size_t(((in * c + (oc / cog) * cg + ic) * h + hh) * wd + ww),
                  std::size_t(((oc * cg + ic) * kh + a) * kw + e), std::size_t(((in * co + oc) * ho + i) * wo + j));
              }
}

// conv2d, conv_transpose2d and the five gradient entries over an option grid (stride,
// padding, dilation, groups, output padding, bias) against one nested-loop pass: with
// T = dy and G = x, conv_transpose2d(T) is conv's dx (+ its bias), the transpose's x
// gradient is conv2d(G) and its weight gradient is conv's dw.
TEST_P(Nn, ConvTransposeAndGradientsAgainstNestedLoops) {
  struct G { Shape xs, ws; ConvOptions<2> o; };
  const std::vector<G> grid = {
      {{2, 4, 7, 6}, {6, 2, 3, 2}, {{2, 1}, {1, 0}, {1, 2}, 2}},
      {{1, 3, 5, 5}, {4, 3, 3, 3}, {{1, 1}, {1, 1}, {1, 1}, 1}},
      {{2, 4, 10, 9}, {4, 1, 3, 3}, {{2, 3}, {2, 1}, {2, 1}, 4}},  // depthwise, output padding 1 and 2
      {{1, 2, 6, 5}, {3, 2, 1, 2}, {{3, 2}, {0, 1}, {1, 1}, 1}},
      {{3, 2, 40, 40}, {3, 2, 3, 3}, {{1, 1}, {0, 0}, {1, 1}, 1}},  // weight-gradient sum of 4332 terms
  };
  std::uint32_t seed = 300;
  for (const G& g : grid) {
    SCOPED_TRACE(g.xs.to_string() + " * " + g.ws.to_string());
    Shape ys;
    conv2d_taps(g.xs, g.ws, g.o, ys, [](std::size_t, std::size_t, std::size_t) {});
    const auto x = rnd(g.xs.num_elements(), seed++), w = rnd(g.ws.num_elements(), seed++);
    const auto dy = rnd(ys.num_elements(), seed++), b = rnd(g.ws[0], seed++), bt = rnd(g.xs[1], seed++);
    std::vector<double> y(ys.num_elements()), dx(x.size()), dw(w.size()), db(b.size()), dbt(bt.size());
    conv2d_taps(g.xs, g.ws, g.o, ys, [&](std::size_t xi, std::size_t wi, std::size_t yi) {
      y[yi] += x[xi] * w[wi];
      dx[xi] += dy[yi] * w[wi];
      dw[wi] += dy[yi] * x[xi];
    });
    std::vector<double> yb(y), dxb(dx);
    const std::size_t hw = g.xs[2] * g.xs[3], ohw = ys[2] * ys[3];
    for (std::size_t i = 0; i < y.size(); ++i) yb[i] += b[(i / ohw) % ys[1]];
    for (std::size_t i = 0; i < dx.size(); ++i) dxb[i] += bt[(i / hw) % g.xs[1]];
    for (std::size_t i = 0; i < dy.size(); ++i) db[(i / ohw) % ys[1]] += dy[i];
    for (std::size_t i = 0; i < x.size(); ++i) dbt[(i / hw) % g.xs[1]] += x[i];
    ConvTransposeOptions<2> t;
    t.stride = g.o.stride;
    t.padding = g.o.padding;
    t.dilation = g.o.dilation;
    t.groups = g.o.groups;
    for (int d = 0; d < 2; ++d)  // the output padding that gives back x's size
      t.padding_out[d] = (I(g.xs[2 + d]) + 2 * g.o.padding[d] - g.o.dilation[d] * (I(g.ws[2 + d]) - 1) - 1) % g.o.stride[d];
    auto tx = make<4>(x, g.xs), tw = make<4>(w, g.ws), tdy = make<4>(dy, ys);
    expect_values(values(conv2d(tx, tw, make<1>(b, {g.ws[0]}), g.o)), yb, 1e-4);
    expect_values(values(conv2d_x_backward(tx, tw, tdy, g.o)), dx, 1e-4);
    expect_values(values(conv2d_weight_backward(tx, tw, tdy, g.o)), dw, 1e-4);
    expect_values(values(conv2d_bias_backward(tdy)), db, 1e-4);
    auto yt = conv_transpose2d(tdy, tw, make<1>(bt, {g.xs[1]}), t);
    expect_shape(yt, g.xs);
    expect_values(values(yt), dxb, 1e-4);
    expect_values(values(conv_transpose2d(tdy, tw, std::nullopt, t)), dx, 1e-4);
    expect_values(values(conv_transpose_x_backward<4>(tdy, tw, tx, t)), y, 1e-4);
    expect_values(values(conv_transpose_weight_backward<4>(tdy, tw, tx, t)), dw, 1e-4);
    expect_values(values(conv_bias_backward<4>(tx)), dbt, 1e-4);
  }
}

// Half precision in, f32 arithmetic, one rounding out: within f16's precision of the loops.
TEST_P(Nn, ConvAndTransposeInHalfPrecision) {
  if (!dev().supports_dtype(DType::F16)) GTEST_SKIP() << "no f16 on this device";
  const Shape xs{2, 4, 6, 7}, ws{4, 2, 3, 3};
  ConvOptions<2> o;
  o.stride = {2, 1};
  o.padding = {1, 2};
  o.groups = 2;
  const auto x = rnd(xs.num_elements(), 401), w = rnd(ws.num_elements(), 402), b = rnd(4, 403);
  Shape ys;
  conv2d_taps(xs, ws, o, ys, [](std::size_t, std::size_t, std::size_t) {});
  const auto dy = rnd(ys.num_elements(), 404);
  std::vector<double> y(ys.num_elements()), dx(x.size());
  conv2d_taps(xs, ws, o, ys, [&](std::size_t xi, std::size_t wi, std::size_t yi) {
    y[yi] += x[xi] * w[wi];
    dx[xi] += dy[yi] * w[wi];
  });
  for (std::size_t i = 0; i < y.size(); ++i) y[i] += b[(i / (ys[2] * ys[3])) % 4];
  auto h = [](const Tensor<4>& t) { return t.cast(DType::F16); };
  auto yh = conv2d(h(make<4>(x, xs)), h(make<4>(w, ws)), make<1>(b, {4}).cast(DType::F16), o);
  EXPECT_EQ(yh.dtype(), DType::F16);
  expect_values(values(yh), y, 1e-2);
  ConvTransposeOptions<2> t;
  t.stride = o.stride;
  t.padding = o.padding;
  t.groups = o.groups;
  t.padding_out = {1, 0};
  expect_values(values(conv_transpose2d(h(make<4>(dy, ys)), h(make<4>(w, ws)), std::nullopt, t)), dx, 1e-2);
}

// Reductions longer than one dispatch takes on a software device (4096 terms): the
// forward's C_in * kh * kw, the bias gradient's N * H * W (past 256 x 4096).
TEST_P(Nn, ConvLongReductionsAgainstNestedLoops) {
  const Shape xs{1, 512, 5, 4}, ws{3, 512, 3, 3};
  const auto x = rnd(xs.num_elements(), 601), w = rnd(ws.num_elements(), 602);
  Shape ys;
  std::vector<double> y(3 * 3 * 2);
  conv2d_taps(xs, ws, {}, ys, [&](std::size_t xi, std::size_t wi, std::size_t yi) { y[yi] += x[xi] * w[wi]; });
  expect_values(values(conv2d(make<4>(x, xs), make<4>(w, ws), std::nullopt, {})), y, 1e-4);
  const Shape ds{3, 2, 600, 600};
  std::vector<double> dy(ds.num_elements());
  for (std::size_t i = 0; i < dy.size(); ++i) dy[i] = double(int(i % 7) - 3) / 4;  // sums exact in f32
  std::vector<double> db(2);
  for (std::size_t i = 0; i < dy.size(); ++i) db[(i / 360000) % 2] += dy[i];
  expect_values(values(conv2d_bias_backward(make<4>(dy, ds))), db, 1e-6);
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
  // Read back: on Vulkan the shader flags the index and the error surfaces when the result is read.
  EXPECT_THROW((void)values(embedding(w, make_int<2>({0, 3}, {1, 2}))), IndexError);
  EXPECT_THROW((void)values(embedding(w, make_int<2>({-1, 0}, {1, 2}))), IndexError);
  EXPECT_THROW((void)values(embedding_backward(w, make<3>(seq(0, 4), {1, 2, 2}), make_int<2>({0, 3}, {1, 2}))), IndexError);
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

// The fused attention over its options (mask, additive bias, causal with Lq < Lk and
// Lq > Lk, softcap, scale; lengths not multiples of a tile; D_v past 128; k as a
// transposed view) against the composition written out in double.
TEST_P(Nn, AttentionOptionsAgainstNestedLoops) {
  struct G { std::size_t b, h, lq, lk, d, dv; bool mask, bias; Shape bias_shape; AttentionModuleOptions o; };
  const std::vector<G> grid = {
      {2, 2, 19, 21, 5, 3, true, true, {1, 2, 19, 21}, {}},
      {1, 2, 33, 20, 17, 7, false, true, {1, 2, 33, 20}, {0.7, 2.0, true}},
      {2, 1, 5, 37, 3, 130, true, true, {2, 1, 5, 37}, {std::nullopt, 1.5, true}},
      {1, 1, 18, 18, 4, 4, true, false, {}, {std::nullopt, std::nullopt, true}},
  };
  std::uint32_t seed = 500;
  for (const G& g : grid) {
    SCOPED_TRACE("Lq " + std::to_string(g.lq) + " Lk " + std::to_string(g.lk) + " Dv " + std::to_string(g.dv));
    const auto q = rnd(g.b * g.h * g.lq * g.d, seed++), k = rnd(g.b * g.h * g.lk * g.d, seed++);
    const auto v = rnd(g.b * g.h * g.lk * g.dv, seed++);
    const auto bias = g.bias ? rnd(g.bias_shape.num_elements(), seed++) : std::vector<double>{};
    // Mask [B, 1, Lq, Lk]: about a quarter of the scores, and all of query 2's.
    std::vector<bool> m(g.b * g.lq * g.lk);
    const auto mr = rnd(m.size(), seed++);
    for (std::size_t e = 0; e < m.size(); ++e) m[e] = g.mask && (mr[e] > 0.5 || (e / g.lk) % g.lq == 2);
    const double scale = g.o.scale ? *g.o.scale : 1.0 / std::sqrt(double(g.d));
    std::vector<double> want;
    for (std::size_t b = 0; b < g.b; ++b)
      for (std::size_t h = 0; h < g.h; ++h)
        for (std::size_t i = 0; i < g.lq; ++i) {
          std::vector<double> s(g.lk);
          double mx = -INFINITY;
          for (std::size_t j = 0; j < g.lk; ++j) {
            double x = 0;
            for (std::size_t e = 0; e < g.d; ++e)
              x += q[((b * g.h + h) * g.lq + i) * g.d + e] * k[((b * g.h + h) * g.lk + j) * g.d + e];
            x *= scale;
            if (g.o.softcap) x = *g.o.softcap * std::tanh(x / *g.o.softcap);
            if (m[(b * g.lq + i) * g.lk + j]) x = -INFINITY;
            if (g.o.is_causal && I(j) > I(i) + I(g.lk) - I(g.lq)) x = -INFINITY;
            if (g.bias) {
              const std::size_t bb = g.bias_shape[0] == 1 ? 0 : b, hh = g.bias_shape[1] == 1 ? 0 : h;
              x += bias[((bb * g.bias_shape[1] + hh) * g.lq + i) * g.lk + j];
            }
            s[j] = x;
            mx = std::max(mx, x);
          }
          double sum = 0;
          for (std::size_t j = 0; j < g.lk; ++j) sum += mx == -INFINITY ? 0 : std::exp(s[j] - mx);
          for (std::size_t c = 0; c < g.dv; ++c) {
            double o = 0;
            for (std::size_t j = 0; j < g.lk; ++j)
              if (mx != -INFINITY) o += std::exp(s[j] - mx) / sum * v[((b * g.h + h) * g.lk + j) * g.dv + c];
            want.push_back(o);
          }
        }
    // k as the transpose of a [B, H, D, Lk] tensor.
    std::vector<double> kt(k.size());
    for (std::size_t bh = 0; bh < g.b * g.h; ++bh)
      for (std::size_t j = 0; j < g.lk; ++j)
        for (std::size_t e = 0; e < g.d; ++e) kt[(bh * g.d + e) * g.lk + j] = k[(bh * g.lk + j) * g.d + e];
    auto tk = make<4>(kt, {g.b, g.h, g.d, g.lk}).swap_dims(2, 3);
    std::optional<Tensor<4, Bool>> mask;
    if (g.mask) mask = Tensor<4, Bool>::from_data(TensorData::from(m, Shape{g.b, 1, g.lq, g.lk}), dev());
    std::optional<Tensor<4>> tb;
    if (g.bias) tb = make<4>(bias, g.bias_shape);
    auto y = attention(make<4>(q, {g.b, g.h, g.lq, g.d}), tk, make<4>(v, {g.b, g.h, g.lk, g.dv}), mask, tb, g.o);
    expect_shape(y, {g.b, g.h, g.lq, g.dv});
    expect_values(values(y), want, 1e-4);
  }
}

// Many key tiles (Lk 3000) and a D that is not a multiple of the 16-wide step.
TEST_P(Nn, AttentionLongKeysAgainstNestedLoops) {
  const std::size_t L = 6, S = 3000, D = 40, DV = 2;
  const auto q = rnd(L * D, 701), k = rnd(S * D, 702), v = rnd(S * DV, 703);
  std::vector<double> want;
  for (std::size_t i = 0; i < L; ++i) {
    std::vector<double> s(S);
    double mx = -INFINITY, sum = 0;
    for (std::size_t j = 0; j < S; ++j) {
      for (std::size_t e = 0; e < D; ++e) s[j] += q[i * D + e] * k[j * D + e];
      s[j] /= std::sqrt(double(D));
      mx = std::max(mx, s[j]);
    }
    for (std::size_t j = 0; j < S; ++j) sum += std::exp(s[j] - mx);
    for (std::size_t c = 0; c < DV; ++c) {
      double o = 0;
      for (std::size_t j = 0; j < S; ++j) o += std::exp(s[j] - mx) / sum * v[j * DV + c];
      want.push_back(o);
    }
  }
  expect_values(values(attention(make<4>(q, {1, 1, L, D}), make<4>(k, {1, 1, S, D}), make<4>(v, {1, 1, S, DV}))), want, 1e-4);
}

// No keys: every row fully masked in effect, so 0 (as the composition's clamps give).
TEST_P(Nn, AttentionWithoutKeysGivesZero) {
  auto y = attention(make<4>(rnd(12, 801), {1, 1, 3, 4}), make<4>({}, {1, 1, 0, 4}), make<4>({}, {1, 1, 0, 2}));
  expect_shape(y, {1, 1, 3, 2});
  expect_values(values(y), std::vector<double>(6, 0.0));
}

// ---- linear, batch_norm: E32, E35 --------------------------------------------------------

TEST_P(Nn, E32LinearWeightIsDinDout) {
  auto y = linear<2>(make<2>({1, 2}, {1, 2}), make<2>({1, 2, 3, 4, 5, 6}, {2, 3}));
  expect_shape(y, {1, 3});
  expect_values(values(y), {9, 12, 15});
}
TEST_P(Nn, LinearRank3WithBiasAgainstLoops) {
  const std::size_t B = 2, L = 3, DI = 4, DO = 5;
  const auto x = rnd(B * L * DI, 41), w = rnd(DI * DO, 42), b = rnd(DO, 43);
  std::vector<double> want;
  for (std::size_t r = 0; r < B * L; ++r)
    for (std::size_t j = 0; j < DO; ++j) {
      double acc = b[j];
      for (std::size_t k = 0; k < DI; ++k) acc += x[r * DI + k] * w[k * DO + j];
      want.push_back(acc);
    }
  auto y = linear<3>(make<3>(x, {B, L, DI}), make<2>(w, {DI, DO}), make<1>(b, {DO}));
  expect_shape(y, {B, L, DO});
  expect_values(values(y), want);
  // A transposed (non-contiguous) weight view gives the same.
  std::vector<double> wt(DI * DO);
  for (std::size_t k = 0; k < DI; ++k)
    for (std::size_t j = 0; j < DO; ++j) wt[j * DI + k] = w[k * DO + j];
  auto y2 = linear<3>(make<3>(x, {B, L, DI}), make<2>(wt, {DO, DI}).transpose(), make<1>(b, {DO}));
  expect_values(values(y2), want);
}
TEST_P(Nn, LinearErrorsNameTheOp) {
  auto x = make<2>({1, 2, 3, 4, 5, 6}, {2, 3});
  auto w = make<2>(seq(0, 8), {4, 2});
  try {
    (void)linear<2>(x, w);
    ADD_FAILURE() << "no error for d_in mismatch";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("[linear]"), std::string::npos) << e.what();
  }
  EXPECT_THROW((void)linear<2>(x, make<2>(seq(0, 6), {3, 2}), make<1>({1, 2, 3}, {3})), ShapeError);  // bias size
  expect_values(values(x), {1, 2, 3, 4, 5, 6});
  expect_values(values(w), seq(0, 8));
}

TEST_P(Nn, E35BatchNormInference) {
  auto y = batch_norm<2>(make<2>({1, 2, 3, 4}, {2, 2}), make<1>({1, 2}, {2}), make<1>({0, 1}, {2}),
                         make<1>({1, 2}, {2}), make<1>({4, 1}, {2}), 0.0);
  expect_values(values(y), {0, 1, 1, 5});
}
TEST_P(Nn, BatchNorm4dAgainstLoops) {
  const std::size_t N = 2, C = 3, H = 2, W = 3;
  const auto x = rnd(N * C * H * W, 51), g = rnd(C, 52), b = rnd(C, 53), m = rnd(C, 54);
  const std::vector<double> v{0.5, 1.5, 2.0};
  const double eps = 1e-3;
  std::vector<double> want(x.size());
  for (std::size_t n = 0; n < N; ++n)
    for (std::size_t c = 0; c < C; ++c)
      for (std::size_t i = 0; i < H * W; ++i) {
        const std::size_t at = (n * C + c) * H * W + i;
        want[at] = (x[at] - m[c]) / std::sqrt(v[c] + eps) * g[c] + b[c];
      }
  auto y = batch_norm<4>(make<4>(x, {N, C, H, W}), make<1>(g, {C}), make<1>(b, {C}), make<1>(m, {C}), make<1>(v, {C}), eps);
  expect_values(values(y), want);
  try {
    (void)batch_norm<4>(make<4>(x, {N, C, H, W}), make<1>({1, 1}, {2}), make<1>(b, {C}), make<1>(m, {C}), make<1>(v, {C}));
    ADD_FAILURE() << "no error for a gamma of the wrong size";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("[batch_norm]"), std::string::npos) << e.what();
  }
  EXPECT_THROW((void)batch_norm<1>(make<1>({1, 2}, {2}), make<1>({1}, {1}), make<1>({1}, {1}), make<1>({1}, {1}),
                                   make<1>({1}, {1})),
               ShapeError);  // no channel dim
}

// ---- unfold4d / fold4d: E36, E37 ----------------------------------------------------------

TEST_P(Nn, E36Unfold4dOrdering) {
  auto y = unfold4d(make<4>(seq(0, 18), {1, 2, 3, 3}), {2, 2});
  expect_shape(y, {1, 8, 4});
  expect_values(values(y), {0, 1, 3, 4, 1, 2, 4, 5, 3, 4, 6, 7, 4, 5, 7, 8, 9, 10, 12, 13, 10, 11, 13, 14, 12, 13, 15, 16,
                            13, 14, 16, 17});
}
TEST_P(Nn, E37Fold4dSumsOverlaps) {
  auto y = fold4d(unfold4d(make<4>(std::vector<double>(9, 1.0), {1, 1, 3, 3}), {2, 2}), {3, 3}, {2, 2});
  expect_shape(y, {1, 1, 3, 3});
  expect_values(values(y), {1, 2, 1, 2, 4, 2, 1, 2, 1});
}
// unfold with stride, padding and dilation against loops; fold is its adjoint: <unfold(x), c> = <x, fold(c)>.
TEST_P(Nn, UnfoldFoldAgainstLoops) {
  const std::size_t N = 2, C = 2, H = 5, W = 6, KH = 2, KW = 3;
  UnfoldOptions o;
  o.stride = {2, 1};
  o.padding = {1, 1};
  o.dilation = {1, 2};
  const std::size_t HO = (H + 2 - 1 - 1) / 2 + 1, WO = (W + 2 - 2 * 2 - 1) / 1 + 1;
  const std::size_t R = C * KH * KW, L = HO * WO;
  const auto x = rnd(N * C * H * W, 61), cols = rnd(N * R * L, 62);
  std::vector<double> want_u(N * R * L, 0.0), want_f(N * C * H * W, 0.0);
  for (std::size_t n = 0; n < N; ++n)
    for (std::size_t c = 0; c < C; ++c)
      for (std::size_t i = 0; i < KH; ++i)
        for (std::size_t j = 0; j < KW; ++j)
          for (std::size_t ho = 0; ho < HO; ++ho)
            for (std::size_t wo = 0; wo < WO; ++wo) {
              const long h = static_cast<long>(ho * 2 + i) - 1, w = static_cast<long>(wo + 2 * j) - 1;
              const std::size_t at = (n * R + (c * KH + i) * KW + j) * L + ho * WO + wo;
              if (h < 0 || w < 0 || h >= long(H) || w >= long(W)) continue;
              const std::size_t xi = ((n * C + c) * H + std::size_t(h)) * W + std::size_t(w);
              want_u[at] = x[xi];
              want_f[xi] += cols[at];
            }
  auto u = unfold4d(make<4>(x, {N, C, H, W}), {I(KH), I(KW)}, o);
  expect_shape(u, {N, R, L});
  expect_values(values(u), want_u);
  auto f = fold4d(make<3>(cols, {N, R, L}), {I(H), I(W)}, {I(KH), I(KW)}, o);
  expect_shape(f, {N, C, H, W});
  expect_values(values(f), want_f);
}
TEST_P(Nn, UnfoldFoldErrorsNameTheOp) {
  auto x = make<4>(seq(0, 18), {1, 2, 3, 3});
  auto expect_err = [](auto&& f, const char* op) {
    try {
      f();
      ADD_FAILURE() << "no error for " << op;
    } catch (const ShapeError& e) {
      EXPECT_NE(std::string(e.what()).find(op), std::string::npos) << e.what();
    }
  };
  UnfoldOptions zero;
  zero.stride = {0, 1};
  expect_err([&] { (void)unfold4d(x, {2, 2}, zero); }, "[unfold4d]");
  expect_err([&] { (void)unfold4d(x, {4, 2}); }, "[unfold4d]");  // kernel larger than the input
  auto cols = make<3>(seq(0, 32), {1, 8, 4});
  expect_err([&] { (void)fold4d(cols, {4, 4}, {2, 2}); }, "[fold4d]");  // L does not match the output size
  expect_err([&] { (void)fold4d(cols, {3, 3}, {3, 3}); }, "[fold4d]");  // 8 channels not divisible by 9
  expect_values(values(x), seq(0, 18));
  expect_values(values(cols), seq(0, 32));
}

// ---- conv3d / conv_transpose3d / adaptive_avg_pool3d ---------------------------------------

TEST_P(Nn, Conv3dAgainstLoops) {
  const std::size_t N = 1, C = 2, D = 3, H = 4, W = 3, CO = 2, KD = 2, KH = 2, KW = 2;
  ConvOptions<3> o;
  o.stride = {1, 2, 1};
  o.padding = {0, 1, 1};
  const std::size_t DO = D - KD + 1, HO = (H + 2 - KH) / 2 + 1, WO = W + 2 - KW + 1;
  const auto x = rnd(N * C * D * H * W, 71), w = rnd(CO * C * KD * KH * KW, 72), b = rnd(CO, 73);
  std::vector<double> want;
  for (std::size_t co = 0; co < CO; ++co)
    for (std::size_t od = 0; od < DO; ++od)
      for (std::size_t oh = 0; oh < HO; ++oh)
        for (std::size_t ow = 0; ow < WO; ++ow) {
          double acc = b[co];
          for (std::size_t c = 0; c < C; ++c)
            for (std::size_t a = 0; a < KD; ++a)
              for (std::size_t i = 0; i < KH; ++i)
                for (std::size_t j = 0; j < KW; ++j) {
                  const long d = long(od + a), h = long(oh * 2 + i) - 1, ww = long(ow + j) - 1;
                  if (h < 0 || ww < 0 || h >= long(H) || ww >= long(W)) continue;
                  acc += x[((c * D + std::size_t(d)) * H + std::size_t(h)) * W + std::size_t(ww)] *
                         w[(((co * C + c) * KD + a) * KH + i) * KW + j];
                }
          want.push_back(acc);
        }
  auto y = conv3d(make<5>(x, {N, C, D, H, W}), make<5>(w, {CO, C, KD, KH, KW}), make<1>(b, {CO}), o);
  expect_shape(y, {N, CO, DO, HO, WO});
  expect_values(values(y), want);
  // conv_transpose3d is the adjoint of conv3d in x: <conv3d(x), g> = <x, conv_transpose3d(g)>.
  const auto g = rnd(want.size(), 74);
  ConvTransposeOptions<3> t;
  t.stride = o.stride;
  t.padding = o.padding;
  // The transpose weight [C_in_t = CO, C_out_t = C, ...] is w itself; (HO-1)*2 - 2 + 1 + 1 = 4 = H.
  auto xt = conv_transpose3d(make<5>(g, {N, CO, DO, HO, WO}), make<5>(w, {CO, C, KD, KH, KW}), std::nullopt, t);
  expect_shape(xt, {N, C, D, H, W});
  auto y0 = conv3d(make<5>(x, {N, C, D, H, W}), make<5>(w, {CO, C, KD, KH, KW}), std::nullopt, o);
  const auto yv = values(y0), xv = values(xt);
  double lhs = 0, rhs = 0;
  for (std::size_t i = 0; i < yv.size(); ++i) lhs += yv[i] * g[i];
  for (std::size_t i = 0; i < xv.size(); ++i) rhs += x[i] * xv[i];
  EXPECT_NEAR(lhs, rhs, 1e-4 * (1 + std::fabs(lhs)));
}
TEST_P(Nn, AdaptiveAvgPool3dAgainstLoops) {
  const std::size_t N = 1, C = 2, D = 3, H = 5, W = 4;
  const std::array<I, 3> out{2, 3, 1};
  const auto x = rnd(N * C * D * H * W, 81);
  auto start = [](std::size_t i, std::size_t in, std::size_t o) { return i * in / o; };
  auto stop = [](std::size_t i, std::size_t in, std::size_t o) { return ((i + 1) * in + o - 1) / o; };
  std::vector<double> want;
  for (std::size_t c = 0; c < C; ++c)
    for (std::size_t a = 0; a < 2; ++a)
      for (std::size_t b = 0; b < 3; ++b)
        for (std::size_t e = 0; e < 1; ++e) {
          double acc = 0;
          std::size_t cnt = 0;
          for (std::size_t d = start(a, D, 2); d < stop(a, D, 2); ++d)
            for (std::size_t h = start(b, H, 3); h < stop(b, H, 3); ++h)
              for (std::size_t w = start(e, W, 1); w < stop(e, W, 1); ++w, ++cnt) acc += x[((c * D + d) * H + h) * W + w];
          want.push_back(acc / double(cnt));
        }
  auto y = adaptive_avg_pool3d(make<5>(x, {N, C, D, H, W}), out);
  expect_shape(y, {N, C, 2, 3, 1});
  expect_values(values(y), want);
  // Backward: the adjoint, <pool(x), g> = <x, pool_backward(g)>.
  const auto g = rnd(want.size(), 82);
  auto dx = adaptive_avg_pool3d_backward(make<5>(x, {N, C, D, H, W}), make<5>(g, {N, C, 2, 3, 1}));
  const auto dv = values(dx);
  double lhs = 0, rhs = 0;
  for (std::size_t i = 0; i < g.size(); ++i) lhs += want[i] * g[i];
  for (std::size_t i = 0; i < dv.size(); ++i) rhs += x[i] * dv[i];
  EXPECT_NEAR(lhs, rhs, 1e-4 * (1 + std::fabs(lhs)));
  EXPECT_THROW((void)adaptive_avg_pool3d(make<5>(x, {N, C, D, H, W}), {0, 1, 1}), ShapeError);
}

// ---- option grids against nested loops (every op of the pooling / interpolate family,
// forward and backward, on contiguous, transposed and stepped inputs, f32 and f64) ------

bool has_f64() { return dev().dtype_usage(DType::F64).contains(DTypeUsage::Arithmetic); }

// `v` (row-major over `s`) as a tensor of dtype `dt` laid out per `mode`: 0 contiguous, 1 the
// last two dims (4-d) or the first two (3-d) stored transposed, 2 the last dim every other
// element of a wider tensor.
template <std::size_t D>
Tensor<D> laid_out(const std::vector<double>& v, const Shape& s, int mode, DType dt = DType::F32) {
  auto mk = [&](const std::vector<double>& data, const Shape& shape) {
    return Tensor<D>::from_data(TensorData::from(data, shape).convert(dt), dev());
  };
  if (mode == 0) return mk(v, s);
  const std::size_t n = s.num_elements(), last = s[D - 1];
  if (mode == 2) {
    std::vector<double> w(2 * n, 99.0);
    for (std::size_t i = 0; i < n; ++i) w[2 * i] = v[i];
    Shape ws = s;
    ws[D - 1] = 2 * last;
    std::vector<Slice> sl(D, Slice::all());
    sl[D - 1] = Slice::range(0, static_cast<I>(2 * last), 2);
    return mk(w, ws).slice(sl);
  }
  const std::size_t a = D == 4 ? 2 : 0;  // swap dims a and a + 1
  Shape ts = s;
  std::swap(ts[a], ts[a + 1]);
  std::size_t inner = 1;
  for (std::size_t k = a + 2; k < D; ++k) inner *= s[k];
  const std::size_t outer = n / (s[a] * s[a + 1] * inner);
  std::vector<double> t(n);
  for (std::size_t o = 0; o < outer; ++o)
    for (std::size_t i = 0; i < s[a]; ++i)
      for (std::size_t j = 0; j < s[a + 1]; ++j)
        for (std::size_t r = 0; r < inner; ++r)
          t[((o * s[a + 1] + j) * s[a] + i) * inner + r] = v[((o * s[a] + i) * s[a + 1] + j) * inner + r];
  return mk(t, ts).swap_dims(a, a + 1);
}

// Pooled length, torch's rule written out: floor or ceil, and a ceil window starting in the
// right padding dropped.
I ref_pool_len(I in, I k, I s, I p, I d, bool ceil) {
  const I span = in + 2 * p - d * (k - 1) - 1;
  I n = (ceil ? (span + s - 1) / s : span / s) + 1;
  if (ceil && (n - 1) * s >= in + p) --n;
  return n;
}

// 2-d pooling of planes [P, H, W] in double. Max: value and first-max index (NaN-free
// data); avg: the mean with torch's divisors. Backward: dy scattered the same way.
struct RefPool {
  std::size_t P, H, W;
  I kh, kw, sh, sw, ph, pw, dh, dw;
  bool ceil, cip;
  I OH() const { return ref_pool_len(static_cast<I>(H), kh, sh, ph, dh, ceil); }
  I OW() const { return ref_pool_len(static_cast<I>(W), kw, sw, pw, dw, ceil); }
  void max(const std::vector<double>& x, std::vector<double>& y, std::vector<double>& idx) const {
    for (std::size_t p = 0; p < P; ++p)
      for (I i = 0; i < OH(); ++i)
        for (I j = 0; j < OW(); ++j) {
          double best = -std::numeric_limits<double>::infinity();
          I at = -1;
          for (I a = 0; a < kh; ++a)
            for (I b = 0; b < kw; ++b) {
              const I h = i * sh - ph + a * dh, w = j * sw - pw + b * dw;
              if (h < 0 || h >= I(H) || w < 0 || w >= I(W)) continue;
              const double v = x[(p * H + std::size_t(h)) * W + std::size_t(w)];
              if (at < 0 || v > best) { best = v; at = h * I(W) + w; }
            }
          y.push_back(best);
          idx.push_back(double(at));
        }
  }
  // The window of output o along one dim: [lo, hi) inside the input, and its divisor length.
  static void win(I o, I s, I p, I k, I in, bool cip, I& lo, I& hi, I& len) {
    const I start = o * s - p, end = std::min(start + k, in + p);
    lo = std::max<I>(start, 0);
    hi = std::min(end, in);
    len = cip ? end - start : hi - lo;
  }
  // avg forward (dy == nullptr) or backward (returns dx).
  std::vector<double> avg(const std::vector<double>& in, bool backward) const {
    std::vector<double> out(backward ? P * H * W : 0, 0.0);
    std::size_t o = 0;
    for (std::size_t p = 0; p < P; ++p)
      for (I i = 0; i < OH(); ++i)
        for (I j = 0; j < OW(); ++j, ++o) {
          I h0, h1, lh, w0, w1, lw;
          win(i, sh, ph, kh, I(H), cip, h0, h1, lh);
          win(j, sw, pw, kw, I(W), cip, w0, w1, lw);
          const double div = double(std::max<I>(lh * lw, 1));
          double s = 0;
          for (I h = h0; h < h1; ++h)
            for (I w = w0; w < w1; ++w) {
              const std::size_t at = (p * H + std::size_t(h)) * W + std::size_t(w);
              if (backward) out[at] += in[o] / div;
              else s += in[at];
            }
          if (!backward) out.push_back(s / div);
        }
    return out;
  }
};

TEST_P(Nn, MaxPoolOptionGridAgainstNestedLoops) {
  const std::size_t N = 2, C = 2, H = 7, W = 6;
  const std::vector<MaxPoolOptions<2>> grid = {
      {{2, 2}, {2, 2}, {0, 0}, {1, 1}, false}, {{3, 2}, {2, 1}, {1, 1}, {1, 2}, true},
      {{3, 3}, {1, 2}, {1, 0}, {2, 1}, false}, {{2, 3}, {3, 2}, {1, 1}, {1, 1}, true},
      {{1, 4}, {1, 3}, {0, 2}, {1, 1}, true}};
  const auto x = rnd(N * C * H * W, 31);
  for (std::size_t gi = 0; gi < grid.size(); ++gi) {
    const auto& o = grid[gi];
    SCOPED_TRACE(testing::Message() << "config " << gi);
    const RefPool r{N * C, H, W, o.kernel_size[0], o.kernel_size[1], o.stride[0], o.stride[1], o.padding[0],
                    o.padding[1], o.dilation[0], o.dilation[1], o.ceil_mode, false};
    std::vector<double> want, want_idx;
    r.max(x, want, want_idx);
    const Shape ys{N, C, std::size_t(r.OH()), std::size_t(r.OW())};
    const DType dt = gi == 1 && has_f64() ? DType::F64 : DType::F32;
    auto xt = laid_out<4>(x, {N, C, H, W}, int(gi % 3), dt);
    expect_values(values(max_pool2d(xt, o)), want);
    auto [v, idx] = max_pool2d_with_indices(xt, o);
    expect_shape(v, ys);
    expect_values(values(v), want);
    EXPECT_EQ(values(idx), want_idx);
    const auto g = rnd(want.size(), 32 + std::uint32_t(gi));
    std::vector<double> dx(x.size(), 0.0);
    for (std::size_t k = 0; k < g.size(); ++k)
      dx[(k / (ys[2] * ys[3])) * H * W + std::size_t(want_idx[k])] += g[k];
    auto gt = laid_out<4>(g, ys, int((gi + 1) % 3), dt);
    expect_values(values(max_pool2d_with_indices_backward(xt, gt, idx, o)), dx);
  }
  // 1-d: the same reference with a height of 1.
  const std::vector<MaxPoolOptions<1>> grid1 = {mp1(3, 2, 1, 1, true), mp1(2, 1, 1, 2), mp1(4, 3, 2, 1, true)};
  const auto x1 = rnd(N * C * 9, 33);
  for (std::size_t gi = 0; gi < grid1.size(); ++gi) {
    const auto& o = grid1[gi];
    const RefPool r{N * C, 1, 9, 1, o.kernel_size[0], 1, o.stride[0], 0, o.padding[0], 1, o.dilation[0], o.ceil_mode, false};
    std::vector<double> want, want_idx;
    r.max(x1, want, want_idx);
    auto xt = laid_out<3>(x1, {N, C, 9}, int(gi % 3));
    expect_values(values(max_pool1d(xt, o)), want);
    auto [v, idx] = max_pool1d_with_indices(xt, o);
    expect_values(values(v), want);
    EXPECT_EQ(values(idx), want_idx);
    const auto g = rnd(want.size(), 34);
    std::vector<double> dx(x1.size(), 0.0);
    for (std::size_t k = 0; k < g.size(); ++k) dx[(k / std::size_t(r.OW())) * 9 + std::size_t(want_idx[k])] += g[k];
    expect_values(values(max_pool1d_with_indices_backward(xt, make<3>(g, v.shape()), idx, o)), dx);
  }
}

TEST_P(Nn, MaxPoolNaNWinsAtItsFirstPosition) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  auto [v, i] = max_pool1d_with_indices(make<3>({1, nan, 3, nan, nan, 0, 2}, {1, 1, 7}), mp1(3, 2, 1, 1, true));
  const auto got = values(v);
  ASSERT_EQ(got.size(), 4u);
  EXPECT_TRUE(std::isnan(got[0]) && std::isnan(got[1]) && std::isnan(got[2]));
  EXPECT_EQ(got[3], 2.0);
  EXPECT_EQ(values(i), (std::vector<double>{1, 1, 3, 6}));
}

TEST_P(Nn, AvgPoolOptionGridAgainstNestedLoops) {
  const std::size_t N = 2, C = 2, H = 7, W = 6;
  const std::vector<AvgPoolOptions<2>> grid = {
      {{2, 2}, {2, 2}, {0, 0}, true, false}, {{3, 3}, {2, 2}, {1, 1}, true, true},
      {{3, 3}, {2, 2}, {1, 1}, false, true}, {{3, 2}, {1, 3}, {1, 1}, false, false},
      {{4, 1}, {3, 1}, {2, 0}, true, true}};
  const auto x = rnd(N * C * H * W, 41);
  for (std::size_t gi = 0; gi < grid.size(); ++gi) {
    const auto& o = grid[gi];
    SCOPED_TRACE(testing::Message() << "config " << gi);
    const RefPool r{N * C, H, W, o.kernel_size[0], o.kernel_size[1], o.stride[0], o.stride[1], o.padding[0],
                    o.padding[1], 1, 1, o.ceil_mode, o.count_include_pad};
    const Shape ys{N, C, std::size_t(r.OH()), std::size_t(r.OW())};
    const DType dt = gi == 2 && has_f64() ? DType::F64 : DType::F32;
    auto y = avg_pool2d(laid_out<4>(x, {N, C, H, W}, int(gi % 3), dt), o);
    expect_shape(y, ys);
    expect_values(values(y), r.avg(x, false));
    const auto g = rnd(ys.num_elements(), 42 + std::uint32_t(gi));
    expect_values(values(avg_pool2d_backward(make<4>(x, {N, C, H, W}), laid_out<4>(g, ys, int((gi + 1) % 3), dt), o)),
                  r.avg(g, true));
  }
  const std::vector<AvgPoolOptions<1>> grid1 = {ap1(3, 2, 1, true, true), ap1(3, 2, 1, false, true), ap1(2, 3, 1, true, false)};
  const auto x1 = rnd(N * C * 8, 43);
  for (std::size_t gi = 0; gi < grid1.size(); ++gi) {
    const auto& o = grid1[gi];
    const RefPool r{N * C, 1, 8, 1, o.kernel_size[0], 1, o.stride[0], 0, o.padding[0], 1, 1, o.ceil_mode,
                    o.count_include_pad};
    auto y = avg_pool1d(laid_out<3>(x1, {N, C, 8}, int(gi % 3)), o);
    expect_values(values(y), r.avg(x1, false));
    const auto g = rnd(y.shape().num_elements(), 44);
    expect_values(values(avg_pool1d_backward(make<3>(x1, {N, C, 8}), laid_out<3>(g, y.shape(), int((gi + 1) % 3)), o)),
                  r.avg(g, true));
  }
}

TEST_P(Nn, AdaptiveAvgPoolGlobalOverALargeImage) {
  // More taps than one shader invocation loops over on lavapipe: pooled one dim at a time.
  const std::size_t S = 160;
  const auto x = rnd(2 * S * S, 57);
  std::vector<double> want(2, 0.0);
  for (std::size_t i = 0; i < x.size(); ++i) want[i / (S * S)] += x[i] / double(S * S);
  expect_values(values(adaptive_avg_pool2d(laid_out<4>(x, {1, 2, S, S}, 1), {1, 1})), want);
}

TEST_P(Nn, PoolWindowsOfGlobalSize) {
  // 130x130 windows: more taps than one shader invocation loops over on lavapipe.
  const std::size_t S = 140;
  const auto x = rnd(S * S, 58);
  const RefPool r{1, S, S, 130, 130, 10, 10, 0, 0, 1, 1, false, false};
  std::vector<double> want, idx;
  r.max(x, want, idx);
  auto xt = laid_out<4>(x, {1, 1, S, S}, 1);
  expect_values(values(max_pool2d(xt, {{130, 130}, {10, 10}, {0, 0}, {1, 1}, false})), want);
  expect_values(values(avg_pool2d(xt, {{130, 130}, {10, 10}, {1, 0}, true, false})),
                RefPool{1, S, S, 130, 130, 10, 10, 1, 0, 1, 1, false, true}.avg(x, false));
}

TEST_P(Nn, AdaptiveAvgPoolGridAgainstNestedLoops) {
  auto lo = [](std::size_t i, std::size_t in, std::size_t o) { return i * in / o; };
  auto hi = [](std::size_t i, std::size_t in, std::size_t o) { return ((i + 1) * in + o - 1) / o; };
  const std::size_t N = 2, C = 3, H = 5, W = 7;
  const auto x = rnd(N * C * H * W, 51);
  const std::vector<std::array<I, 2>> sizes = {{2, 3}, {7, 9}, {1, 1}, {5, 4}};
  for (std::size_t gi = 0; gi < sizes.size(); ++gi) {
    const std::size_t OH = std::size_t(sizes[gi][0]), OW = std::size_t(sizes[gi][1]);
    SCOPED_TRACE(testing::Message() << "size " << OH << "x" << OW);
    std::vector<double> want, dx(x.size(), 0.0);
    const auto g = rnd(N * C * OH * OW, 52 + std::uint32_t(gi));
    std::size_t o = 0;
    for (std::size_t p = 0; p < N * C; ++p)
      for (std::size_t i = 0; i < OH; ++i)
        for (std::size_t j = 0; j < OW; ++j, ++o) {
          const double cnt = double((hi(i, H, OH) - lo(i, H, OH)) * (hi(j, W, OW) - lo(j, W, OW)));
          double s = 0;
          for (std::size_t h = lo(i, H, OH); h < hi(i, H, OH); ++h)
            for (std::size_t w = lo(j, W, OW); w < hi(j, W, OW); ++w) {
              s += x[(p * H + h) * W + w];
              dx[(p * H + h) * W + w] += g[o] / cnt;
            }
          want.push_back(s / cnt);
        }
    const DType dt = gi == 1 && has_f64() ? DType::F64 : DType::F32;
    expect_values(values(adaptive_avg_pool2d(laid_out<4>(x, {N, C, H, W}, int(gi % 3), dt), sizes[gi])), want);
    expect_values(values(adaptive_avg_pool2d_backward(make<4>(x, {N, C, H, W}),
                                                      laid_out<4>(g, {N, C, OH, OW}, int((gi + 1) % 3), dt))),
                  dx);
    // 1-d over the rows of the same data: [N * C, H, W] as [N*C, H, W] pooled along W.
    std::vector<double> want1, dx1(x.size(), 0.0);
    const auto g1 = rnd(N * C * H * OW, 56);
    for (std::size_t r = 0; r < N * C * H; ++r)
      for (std::size_t j = 0; j < OW; ++j) {
        const double cnt = double(hi(j, W, OW) - lo(j, W, OW));
        double s = 0;
        for (std::size_t w = lo(j, W, OW); w < hi(j, W, OW); ++w) {
          s += x[r * W + w];
          dx1[r * W + w] += g1[r * OW + j] / cnt;
        }
        want1.push_back(s / cnt);
      }
    expect_values(values(adaptive_avg_pool1d(laid_out<3>(x, {N * C, H, W}, int(gi % 3)), I(OW))), want1);
    expect_values(values(adaptive_avg_pool1d_backward(make<3>(x, {N * C, H, W}),
                                                      laid_out<3>(g1, {N * C, H, OW}, int((gi + 2) % 3)))),
                  dx1);
  }
}

// Interpolate: per axis the source taps and weights, module-ops.md §2.7 written out.
void ref_taps(std::size_t in_s, std::size_t out_s, const InterpolateOptions& o, std::size_t dst, std::vector<I>& at,
              std::vector<double>& wt) {
  const I in = I(in_s), out = I(out_s), d = I(dst);
  at.clear();
  wt.clear();
  if (o.mode == InterpolateMode::Nearest || o.mode == InterpolateMode::NearestExact) {
    const I i = o.mode == InterpolateMode::Nearest ? (d * in) / out : ((2 * d + 1) * in) / (2 * out);
    at.push_back(std::min(i, in - 1));
    wt.push_back(1);
    return;
  }
  double src = o.align_corners ? (out > 1 ? double(d) * double(in - 1) / double(out - 1) : 0.0)
                               : (double(d) + 0.5) * double(in) / double(out) - 0.5;
  if (o.mode == InterpolateMode::Bilinear) {
    if (!o.align_corners && src < 0) src = 0;
    const I i0 = std::min(I(std::floor(src)), in - 1);
    const double lam = std::clamp(src - double(i0), 0.0, 1.0);
    at = {i0, std::min(i0 + 1, in - 1)};
    wt = {1 - lam, lam};
    return;
  }
  const double A = -0.75, f = std::floor(src), t = src - f;
  auto kern = [&](double v) {
    v = std::fabs(v);
    if (v <= 1) return (A + 2) * v * v * v - (A + 3) * v * v + 1;
    if (v < 2) return A * v * v * v - 5 * A * v * v + 8 * A * v - 4 * A;
    return 0.0;
  };
  for (I k = -1; k <= 2; ++k) {
    at.push_back(std::clamp<I>(I(f) + k, 0, in - 1));
    wt.push_back(kern(t - double(k)));
  }
}

TEST_P(Nn, InterpolateGridAgainstNestedLoops) {
  const std::size_t N = 1, C = 2, H = 3, W = 5;
  const auto x = rnd(N * C * H * W, 61);
  const std::vector<std::array<I, 2>> sizes = {{7, 4}, {2, 9}, {1, 1}, {6, 10}, {31, 43}};
  const InterpolateMode modes[] = {InterpolateMode::Nearest, InterpolateMode::NearestExact, InterpolateMode::Bilinear,
                                   InterpolateMode::Bicubic};
  std::size_t run = 0;
  for (InterpolateMode m : modes)
    for (bool align : {false, true})
      for (const auto& sz : sizes) {
        if ((m == InterpolateMode::Nearest || m == InterpolateMode::NearestExact) && align) continue;
        const InterpolateOptions o{m, align};
        const std::size_t OH = std::size_t(sz[0]), OW = std::size_t(sz[1]);
        SCOPED_TRACE(testing::Message() << "mode " << int(m) << " align " << align << " size " << OH << "x" << OW);
        const auto g = rnd(N * C * OH * OW, 62 + std::uint32_t(run));
        std::vector<double> want, dx(x.size(), 0.0);
        std::vector<I> ah, aw;
        std::vector<double> wh, ww;
        std::size_t k = 0;
        for (std::size_t p = 0; p < N * C; ++p)
          for (std::size_t i = 0; i < OH; ++i)
            for (std::size_t j = 0; j < OW; ++j, ++k) {
              ref_taps(H, OH, o, i, ah, wh);
              ref_taps(W, OW, o, j, aw, ww);
              double s = 0;
              for (std::size_t a = 0; a < ah.size(); ++a)
                for (std::size_t b = 0; b < aw.size(); ++b) {
                  const std::size_t at = (p * H + std::size_t(ah[a])) * W + std::size_t(aw[b]);
                  s += wh[a] * ww[b] * x[at];
                  dx[at] += wh[a] * ww[b] * g[k];
                }
              want.push_back(s);
            }
        const DType dt = run % 5 == 3 && has_f64() ? DType::F64 : DType::F32;
        expect_values(values(interpolate(laid_out<4>(x, {N, C, H, W}, int(run % 3), dt), sz, o)), want, 2e-4);
        expect_values(values(interpolate_backward(make<4>(x, {N, C, H, W}), laid_out<4>(g, {N, C, OH, OW}, int((run + 1) % 3), dt),
                                                  sz, o)),
                      dx, 2e-4);
        ++run;
      }
}

TEST_P(Nn, LayerNormAndEmbeddingGridAgainstLoops) {
  for (const std::size_t d : {std::size_t(1), std::size_t(6), std::size_t(300)}) {
    for (int mode = 0; mode < 3; ++mode) {
      const std::size_t rows = 5;
      SCOPED_TRACE(testing::Message() << "d " << d << " layout " << mode);
      const auto x = rnd(rows * d, 71 + std::uint32_t(d)), gm = rnd(d, 72), bt = rnd(d, 73);
      const bool with_beta = mode != 1;
      const double eps = 1e-5;
      std::vector<double> want;
      for (std::size_t r = 0; r < rows; ++r) {
        double mu = 0, var = 0;
        for (std::size_t i = 0; i < d; ++i) mu += x[r * d + i];
        mu /= double(d);
        for (std::size_t i = 0; i < d; ++i) var += (x[r * d + i] - mu) * (x[r * d + i] - mu);
        var /= double(d);
        for (std::size_t i = 0; i < d; ++i)
          want.push_back((x[r * d + i] - mu) / std::sqrt(var + eps) * gm[i] + (with_beta ? bt[i] : 0.0));
      }
      const DType dt = mode == 2 && has_f64() ? DType::F64 : DType::F32;
      auto xt = laid_out<2>(x, {rows, d}, mode, dt);
      auto gt = Tensor<1>::from_data(TensorData::from(gm, Shape{d}).convert(dt), dev());
      std::optional<Tensor<1>> b;
      if (with_beta) b = Tensor<1>::from_data(TensorData::from(bt, Shape{d}).convert(dt), dev());
      expect_values(values(layer_norm<2>(xt, gt, b, eps)), want, 1e-3);
    }
  }
  // embedding on transposed indices (f32 and f64 weights) and its backward.
  const std::size_t n = 5, d = 3;
  const auto w = rnd(n * d, 74);
  const std::vector<std::int32_t> it = {4, 0, 2, 2, 1, 4};  // [3, 2] stored, read as [2, 3]
  auto idx = make_int<2>(it, {3, 2}).swap_dims(0, 1);
  std::vector<double> want;
  for (std::size_t b = 0; b < 2; ++b)
    for (std::size_t l = 0; l < 3; ++l)
      for (std::size_t c = 0; c < d; ++c) want.push_back(w[std::size_t(it[l * 2 + b]) * d + c]);
  for (DType dt : {DType::F32, DType::F64}) {
    if (dt == DType::F64 && !has_f64()) continue;
    auto wt = Tensor<2>::from_data(TensorData::from(w, Shape{n, d}).convert(dt), dev());
    expect_values(values(embedding(wt, idx)), want);
    const auto g = rnd(2 * 3 * d, 75);
    std::vector<double> dw(n * d, 0.0);
    for (std::size_t b = 0; b < 2; ++b)
      for (std::size_t l = 0; l < 3; ++l)
        for (std::size_t c = 0; c < d; ++c) dw[std::size_t(it[l * 2 + b]) * d + c] += g[(b * 3 + l) * d + c];
    expect_values(values(embedding_backward(wt, Tensor<3>::from_data(TensorData::from(g, Shape{2, 3, d}).convert(dt), dev()), idx)),
                  dw);
  }
  EXPECT_THROW((void)values(embedding(Tensor<2>::from_data(TensorData::from(w, Shape{n, d}), dev()),
                                      make_int<2>({0, 5, 1, 2}, {2, 2}).swap_dims(0, 1))),
               IndexError);
}

// ---- ctc_loss: E42-E44 ---------------------------------------------------------------------

Tensor<3> ctc_lp(const std::vector<double>& probs, const Shape& s) {
  std::vector<double> l(probs.size());
  for (std::size_t i = 0; i < l.size(); ++i) l[i] = std::log(probs[i]);
  return make<3>(l, s);
}
TEST_P(Nn, E42CtcImpossibleTargetIsInfinite) {
  auto lp = ctc_lp({.5, .3, .2, .4, .4, .2}, {2, 1, 3});
  auto loss = ctc_loss(lp, make_int<2>({1, 1}, {1, 2}), make_int<1>({2}, {1}), make_int<1>({2}, {1}));
  expect_values(values(loss), {std::numeric_limits<double>::infinity()});
  auto g = ctc_loss_backward(lp, make_int<2>({1, 1}, {1, 2}), make_int<1>({2}, {1}), make_int<1>({2}, {1}),
                             make<1>({1}, {1}));
  expect_values(values(g), std::vector<double>(6, 0.0));  // zero, not NaN
}
TEST_P(Nn, E43CtcLossAndExactGradient) {
  auto lp = ctc_lp({.5, .3, .2, .4, .4, .2}, {2, 1, 3});
  auto tg = make_int<2>({1}, {1, 1});
  auto il = make_int<1>({2}, {1}), tl = make_int<1>({1}, {1});
  expect_values(values(ctc_loss(lp, tg, il, tl)), {0.8210});
  // -posterior: paths "b1" (.2), "1b" (.12), "11" (.12) of total .44.
  auto g = ctc_loss_backward(lp, tg, il, tl, make<1>({1}, {1}));
  expect_values(values(g), {-0.2 / 0.44, -0.24 / 0.44, 0, -0.12 / 0.44, -0.32 / 0.44, 0});
}
TEST_P(Nn, E44CtcEmptyTargetAndPaddedBatch) {
  // Two samples: sample 0 target [1] over 2 frames (E43), sample 1 empty target (E44), S = 2 (padded).
  auto lp = ctc_lp({.5, .3, .2, .5, .3, .2, .4, .4, .2, .4, .4, .2}, {2, 2, 3});
  auto loss = ctc_loss(lp, make_int<2>({1, 2, 2, 2}, {2, 2}), make_int<1>({2, 2}, {2}), make_int<1>({1, 0}, {2}));
  expect_values(values(loss), {0.8210, 1.6094});
  // A shorter input length freezes the later frames: sample 1 with 1 frame gives -ln .5.
  auto l1 = ctc_loss(lp, make_int<2>({1, 2, 2, 2}, {2, 2}), make_int<1>({2, 1}, {2}), make_int<1>({1, 0}, {2}));
  expect_values(values(l1), {0.8210, 0.6931});
}
TEST_P(Nn, E45CtcMeanClampsTheTargetLength) {
  auto m = ctc_loss_mean(make<1>({1.6864, 3.2958}, {2}), make_int<1>({2, 0}, {2}));
  expect_values(values(m), {2.0695});
}
TEST_P(Nn, CtcErrorsNameTheOp) {
  auto lp = ctc_lp({.5, .3, .2, .4, .4, .2}, {2, 1, 3});
  auto tg = make_int<2>({1}, {1, 1});
  auto il = make_int<1>({2}, {1}), tl = make_int<1>({1}, {1});
  try {
    (void)ctc_loss(lp, tg, il, tl, 3);
    ADD_FAILURE() << "no error for blank out of range";
  } catch (const IndexError& e) {
    EXPECT_NE(std::string(e.what()).find("[ctc_loss]"), std::string::npos) << e.what();
  }
  EXPECT_THROW((void)ctc_loss(lp, make_int<2>({5}, {1, 1}), il, tl), IndexError);         // label >= C
  EXPECT_THROW((void)ctc_loss(lp, make_int<2>({0}, {1, 1}), il, tl), IndexError);         // label == blank
  EXPECT_THROW((void)ctc_loss(lp, tg, make_int<1>({3}, {1}), tl), Error);                 // input length > T
  EXPECT_THROW((void)ctc_loss(lp, tg, il, make_int<1>({2}, {1})), Error);                 // target length > S
  EXPECT_THROW((void)ctc_loss(lp, make_int<2>({1, 1}, {2, 1}), il, tl), ShapeError);      // batch mismatch
  expect_values(values(lp), {std::log(.5), std::log(.3), std::log(.2), std::log(.4), std::log(.4), std::log(.2)});
}

// ---- deform_conv2d -------------------------------------------------------------------------

// torchvision's deform_conv2d in double, written out (module-ops.md §2.3).
struct DeformCase {
  std::size_t n = 1, c = 4, h = 4, w = 5, co = 2, kh = 2, kw = 2, og = 2, wg = 2;
  I stride = 1, pad = 1, dil = 1;
  std::size_t ho() const { return (h + 2 * pad - dil * (kh - 1) - 1) / stride + 1; }
  std::size_t wo() const { return (w + 2 * pad - dil * (kw - 1) - 1) / stride + 1; }
  std::vector<double> forward(const std::vector<double>& x, const std::vector<double>& off, const std::vector<double>& wt,
                              const std::vector<double>* mask, const std::vector<double>& bias) const {
    const std::size_t HO = ho(), WO = wo(), K = kh * kw, cg = c / wg, cog = co / wg;
    std::vector<double> y(n * co * HO * WO);
    auto at = [&](std::size_t b, std::size_t ch, double ph, double pw) {
      if (ph <= -1 || ph >= double(h) || pw <= -1 || pw >= double(w)) return 0.0;
      const double h0 = std::floor(ph), w0 = std::floor(pw), lh = ph - h0, lw = pw - w0;
      double v = 0;
      for (int dh = 0; dh < 2; ++dh)
        for (int dw = 0; dw < 2; ++dw) {
          const long hh = long(h0) + dh, ww = long(w0) + dw;
          if (hh < 0 || ww < 0 || hh >= long(h) || ww >= long(w)) continue;
          v += (dh ? lh : 1 - lh) * (dw ? lw : 1 - lw) * x[((b * c + ch) * h + std::size_t(hh)) * w + std::size_t(ww)];
        }
      return v;
    };
    for (std::size_t b = 0; b < n; ++b)
      for (std::size_t o = 0; o < co; ++o)
        for (std::size_t i0 = 0; i0 < HO; ++i0)
          for (std::size_t j0 = 0; j0 < WO; ++j0) {
            double acc = bias.empty() ? 0.0 : bias[o];
            const std::size_t g = o / cog;
            for (std::size_t cc = 0; cc < cg; ++cc) {
              const std::size_t ch = g * cg + cc, ogi = ch / (c / og);
              for (std::size_t i = 0; i < kh; ++i)
                for (std::size_t j = 0; j < kw; ++j) {
                  const std::size_t k = i * kw + j;
                  const double dy = off[((b * 2 * og * K + ogi * 2 * K + 2 * k) * HO + i0) * WO + j0];
                  const double dx = off[((b * 2 * og * K + ogi * 2 * K + 2 * k + 1) * HO + i0) * WO + j0];
                  const double ph = double(long(i0) * stride - pad + long(i) * dil) + dy;
                  const double pw = double(long(j0) * stride - pad + long(j) * dil) + dx;
                  double v = at(b, ch, ph, pw);
                  if (mask) v *= (*mask)[((b * og * K + ogi * K + k) * HO + i0) * WO + j0];
                  acc += wt[((o * cg + cc) * kh + i) * kw + j] * v;
                }
            }
            y[((b * co + o) * HO + i0) * WO + j0] = acc;
          }
    return y;
  }
};
TEST_P(Nn, DeformConv2dAgainstLoops) {
  const DeformCase dc;
  const std::size_t HO = dc.ho(), WO = dc.wo(), K = dc.kh * dc.kw;
  const auto x = rnd(dc.n * dc.c * dc.h * dc.w, 91), wt = rnd(dc.co * (dc.c / dc.wg) * K, 92), b = rnd(dc.co, 93);
  auto off = rnd(dc.n * 2 * dc.og * K * HO * WO, 94);
  for (double& v : off) v *= 1.7;  // some sample points leave the image
  auto mk = rnd(dc.n * dc.og * K * HO * WO, 95);
  DeformConvOptions<2> o;
  o.padding = {dc.pad, dc.pad};
  o.weight_groups = I(dc.wg);
  o.offset_groups = I(dc.og);
  const Shape xs{dc.n, dc.c, dc.h, dc.w}, os{dc.n, 2 * dc.og * K, HO, WO}, ws{dc.co, dc.c / dc.wg, dc.kh, dc.kw},
      ms{dc.n, dc.og * K, HO, WO};
  auto y = deform_conv2d(make<4>(x, xs), make<4>(off, os), make<4>(wt, ws), std::nullopt, make<1>(b, {dc.co}), o);
  expect_shape(y, {dc.n, dc.co, HO, WO});
  expect_values(values(y), dc.forward(x, off, wt, nullptr, b));
  auto ym = deform_conv2d(make<4>(x, xs), make<4>(off, os), make<4>(wt, ws), make<4>(mk, ms), std::nullopt, o);
  expect_values(values(ym), dc.forward(x, off, wt, &mk, {}));
}
// The backward against central differences of the loop reference: loss = sum(dy * y).
TEST_P(Nn, DeformConv2dBackwardAgainstFiniteDifferences) {
  DeformCase dc;
  dc.c = 2;
  dc.og = 1;
  dc.wg = 1;
  dc.h = 3;
  dc.w = 4;
  const std::size_t HO = dc.ho(), WO = dc.wo(), K = dc.kh * dc.kw;
  const auto x = rnd(dc.n * dc.c * dc.h * dc.w, 101), wt = rnd(dc.co * dc.c * K, 102), b = rnd(dc.co, 103);
  auto off = rnd(dc.n * 2 * K * HO * WO, 104);
  for (double& v : off) v = v * 0.8 + 0.13;  // away from integer sample coordinates
  const auto mk = rnd(dc.n * K * HO * WO, 105), gy = rnd(dc.n * dc.co * HO * WO, 106);
  auto loss = [&](const std::vector<double>& xx, const std::vector<double>& oo, const std::vector<double>& ww,
                  const std::vector<double>& mm) {
    const auto y = dc.forward(xx, oo, ww, &mm, b);
    double s = 0;
    for (std::size_t i = 0; i < y.size(); ++i) s += y[i] * gy[i];
    return s;
  };
  auto fd = [&](int which) {
    std::vector<std::vector<double>> in{x, off, wt, mk};
    std::vector<double> g(in[std::size_t(which)].size());
    for (std::size_t i = 0; i < g.size(); ++i) {
      auto p = in, m = in;
      p[std::size_t(which)][i] += 1e-6;
      m[std::size_t(which)][i] -= 1e-6;
      g[i] = (loss(p[0], p[1], p[2], p[3]) - loss(m[0], m[1], m[2], m[3])) / 2e-6;
    }
    return g;
  };
  DeformConvOptions<2> o;
  o.padding = {dc.pad, dc.pad};
  const Shape xs{dc.n, dc.c, dc.h, dc.w}, os{dc.n, 2 * K, HO, WO}, ws{dc.co, dc.c, dc.kh, dc.kw}, ms{dc.n, K, HO, WO};
  auto r = deform_conv2d_backward(make<4>(x, xs), make<4>(off, os), make<4>(wt, ws), make<4>(mk, ms), make<1>(b, {dc.co}),
                                  make<4>(gy, {dc.n, dc.co, HO, WO}), o);
  expect_values(values(r.x_grad), fd(0), 2e-3);
  expect_values(values(r.offset_grad), fd(1), 2e-3);
  expect_values(values(r.weight_grad), fd(2), 2e-3);
  ASSERT_TRUE(r.mask_grad.has_value());
  expect_values(values(*r.mask_grad), fd(3), 2e-3);
  ASSERT_TRUE(r.bias_grad.has_value());
  std::vector<double> db(dc.co, 0.0);
  for (std::size_t o2 = 0; o2 < dc.co; ++o2)
    for (std::size_t i = 0; i < HO * WO; ++i) db[o2] += gy[o2 * HO * WO + i];
  expect_values(values(*r.bias_grad), db, 2e-3);
  auto r2 = deform_conv2d_backward(make<4>(x, xs), make<4>(off, os), make<4>(wt, ws), std::nullopt, std::nullopt,
                                   make<4>(gy, {dc.n, dc.co, HO, WO}), o);
  EXPECT_FALSE(r2.mask_grad.has_value());
  EXPECT_FALSE(r2.bias_grad.has_value());
}
TEST_P(Nn, DeformConv2dErrorsNameTheOp) {
  auto x = make<4>(seq(0, 32), {1, 2, 4, 4});
  auto w = make<4>(std::vector<double>(8, 1.0), {1, 2, 2, 2});
  auto off = make<4>(std::vector<double>(8 * 9, 0.0), {1, 8, 3, 3});
  auto expect_err = [](auto&& f, const char* what) {
    try {
      f();
      ADD_FAILURE() << "no error for " << what;
    } catch (const ShapeError& e) {
      EXPECT_NE(std::string(e.what()).find("[deform_conv2d]"), std::string::npos) << e.what();
    }
  };
  expect_err([&] { (void)deform_conv2d(x, make<4>(std::vector<double>(8 * 4, 0.0), {1, 8, 2, 2}), w, std::nullopt, std::nullopt); },
             "offset of the wrong size");
  DeformConvOptions<2> g3;
  g3.weight_groups = 3;
  expect_err([&] { (void)deform_conv2d(x, off, w, std::nullopt, std::nullopt, g3); }, "weight_groups not dividing C_in");
  DeformConvOptions<2> s0;
  s0.stride = {0, 1};
  expect_err([&] { (void)deform_conv2d(x, off, w, std::nullopt, std::nullopt, s0); }, "zero stride");
  expect_err([&] { (void)deform_conv2d(x, off, w, make<4>(std::vector<double>(9, 1.0), {1, 1, 3, 3}), std::nullopt); },
             "mask of the wrong size");
  // Zero offsets and no mask: a plain convolution.
  auto y = deform_conv2d(x, off, w, std::nullopt, std::nullopt);
  expect_values(values(y), values(conv2d(x, w, std::nullopt, {})));
  expect_values(values(x), seq(0, 32));
}

// ---- one float dtype per module op (issue 30) -------------------------------------------

// Operands of different float dtypes are refused before any backend runs, with one message
// on every device (vulkan read an f64 weight's words as f32 and returned garbage, the cpu
// converted to x's dtype), and the inputs stay as they were.
TEST_P(Nn, MixedFloatDtypesAreRefusedEverywhere) {
  const DType other = has_f64() ? DType::F64 : DType::F16;
  if (!dev().supports_dtype(other)) GTEST_SKIP() << "one float dtype only";
  const std::string theirs(dtype_name(other));
  auto expect_refused = [&](auto&& f, const char* op, const std::string& got) {
    try {
      f();
      ADD_FAILURE() << "no error for " << op << " with " << got;
    } catch (const DTypeError& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find(std::string("[") + op + "] operands must share one float dtype"), std::string::npos) << m;
      EXPECT_NE(m.find(got), std::string::npos) << m;
    }
  };
  const auto x = make<4>(seq(1, 2 * 4 * 6 * 8), {2, 4, 6, 8});
  const auto w = make<4>(rnd(4 * 2 * 3 * 3, 7), {4, 2, 3, 3});
  const auto b = make<1>({1, 2, 3, 4}, {4});
  ConvOptions<2> o;
  o.groups = 2;
  expect_refused([&] { (void)conv2d(x, w.cast(other), b, o).into_data(); }, "conv2d", "got f32 x, " + theirs + " weight, f32 bias");
  expect_refused([&] { (void)conv2d(x, w, b.cast(other), o).into_data(); }, "conv2d", theirs + " bias");
  expect_refused([&] { (void)conv2d(x.cast(other), w, std::nullopt, o).into_data(); }, "conv2d", theirs + " x, f32 weight");
  const auto x1 = make<3>(seq(1, 2 * 4 * 5), {2, 4, 5});
  const auto w1 = make<3>(rnd(4 * 4 * 2, 8), {4, 4, 2});
  expect_refused([&] { (void)conv1d(x1, w1.cast(other), std::nullopt, {}).into_data(); }, "conv1d", theirs + " weight");
  expect_refused([&] { (void)conv_transpose1d(x1, w1.cast(other), std::nullopt, {}).into_data(); }, "conv_transpose1d",
                 theirs + " weight");
  const auto x3 = make<5>(seq(1, 2 * 3 * 3 * 3), {1, 2, 3, 3, 3});
  const auto w3 = make<5>(rnd(2 * 2 * 8, 9), {2, 2, 2, 2, 2});
  expect_refused([&] { (void)conv3d(x3, w3, make<1>({1, 2}, {2}).cast(other), {}).into_data(); }, "conv3d", theirs + " bias");
  expect_refused([&] { (void)conv_transpose3d(x3.cast(other), w3, std::nullopt, {}).into_data(); }, "conv_transpose3d",
                 theirs + " x");
  ConvTransposeOptions<2> t;
  t.groups = 2;
  expect_refused([&] { (void)conv_transpose2d(x, w.cast(other), std::nullopt, t).into_data(); }, "conv_transpose2d",
                 theirs + " weight");
  // The gradients' entries: dy of another dtype than the weight or x.
  const auto y = conv2d(x, w, b, o);
  expect_refused([&] { (void)conv2d_x_backward(x, w, y.cast(other), o).into_data(); }, "conv_x_backward",
                 theirs + " output gradient, f32 weight");
  expect_refused([&] { (void)conv2d_weight_backward(x, w, y.cast(other), o).into_data(); }, "conv_weight_backward",
                 "f32 x, " + theirs + " output gradient");
  // linear, attention, the norms, deform_conv2d.
  const auto xl = make<2>(seq(1, 6), {2, 3});
  const auto wl = make<2>(rnd(12, 10), {3, 4});
  expect_refused([&] { (void)linear(xl, wl.cast(other)).into_data(); }, "linear", theirs + " weight");
  expect_refused([&] { (void)linear(xl, wl, make<1>({1, 2, 3, 4}, {4}).cast(other)).into_data(); }, "linear", theirs + " bias");
  const auto q = make<4>(rnd(2 * 3 * 4, 11), {1, 2, 3, 4});
  expect_refused([&] { (void)attention(q, q.cast(other), q).into_data(); }, "attention", theirs + " k");
  expect_refused([&] { (void)attention(q, q, q.cast(other)).into_data(); }, "attention", theirs + " v");
  expect_refused([&] { (void)attention(q, q, q, std::nullopt, make<4>(rnd(9, 12), {1, 1, 3, 3}).cast(other)).into_data(); },
                 "attention", theirs + " attn_bias");
  const auto g = make<1>({1, 2, 3, 4}, {4});
  expect_refused([&] { (void)layer_norm(q, g.cast(other), g).into_data(); }, "layer_norm", theirs + " gamma");
  expect_refused([&] { (void)layer_norm(q, g, g.cast(other)).into_data(); }, "layer_norm", theirs + " beta");
  expect_refused([&] { (void)batch_norm(x, g, g, g.cast(other), g).into_data(); }, "batch_norm", theirs + " mean");
  const auto xd = make<4>(seq(0, 32), {1, 2, 4, 4});
  const auto wd = make<4>(std::vector<double>(8, 1.0), {1, 2, 2, 2});
  const auto off = make<4>(std::vector<double>(8 * 9, 0.0), {1, 8, 3, 3});
  expect_refused([&] { (void)deform_conv2d(xd, off.cast(other), wd, std::nullopt, std::nullopt).into_data(); },
                 "deform_conv2d", theirs + " offset");
  expect_refused([&] { (void)deform_conv2d(xd, off, wd.cast(other), std::nullopt, std::nullopt).into_data(); },
                 "deform_conv2d", theirs + " weight");
  // Nothing was consumed or changed; one dtype throughout still works.
  expect_values(values(x), seq(1, 2 * 4 * 6 * 8));
  expect_values(values(w), rnd(4 * 2 * 3 * 3, 7));
  expect_values(values(g), {1, 2, 3, 4});
  expect_values(values(conv2d(x.cast(other), w.cast(other), b.cast(other), o)), values(y), 1e-2);
}

}  // namespace
