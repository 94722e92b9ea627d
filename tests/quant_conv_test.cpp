// conv2d with a quantized weight (issue 32, step 4): the q_conv2d row (oneDNN's int8
// convolution on the cpu, no im2col; dequantize + conv2d elsewhere) against plain loops over
// the weight's codes times its scales: stride, padding, dilation, batch 1 and > 1, permuted
// and sliced inputs, an empty batch, and bad input. On every device (TENSOR_TEST_DEVICE).
#include <array>
#include <cmath>
#include <optional>
#include <cstdint>
#include <map>
#include <string>
#include <tensor/nn.hpp>
#include <tensor/profile.hpp>
#include <tensor/quantization.hpp>

#include "backends/cpu/quant.hpp"
#include "conformance/devices.hpp"
#include "quant_test_util.hpp"
#include "test_util.hpp"

namespace {

using namespace tt;
using quant_test::lcg;
namespace qz = tensor::quantization;

const Device& dev() { return tt::conf::DeviceScope::current(); }

class QuantConv : public ::testing::TestWithParam<Device> {
 protected:
  void SetUp() override { scope_.enter(GetParam()); }
  void TearDown() override { scope_.leave(); }
  tt::conf::DeviceScope scope_;
};
INSTANTIATE_TEST_SUITE_P(Devices, QuantConv, ::testing::ValuesIn(tt::conf::devices()),
                         [](const ::testing::TestParamInfo<Device>& p) { return tt::conf::test_name(p.param); });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(QuantConv);

template <std::size_t D>
Tensor<D> from(const std::vector<float>& v, Shape s) {
  return Tensor<D>::from_data(TensorData::from<float>(v, s), dev());
}
template <std::size_t D>
std::vector<float> values(const Tensor<D>& t) {
  return t.into_data().convert(DType::F32).template to_vec<float>();
}
QuantScheme q8s() { return QuantScheme{}.with_value(QuantValue::Q8S).with_store(QuantStore::Native); }

// Norm-wise: |got - want| <= rel * |want|.
::testing::AssertionResult close_norm(const std::vector<float>& got, const std::vector<double>& want, double rel) {
  if (got.size() != want.size()) return ::testing::AssertionFailure() << "size " << got.size() << " != " << want.size();
  double e2 = 0.0, w2 = 0.0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double d = static_cast<double>(got[i]) - want[i];
    e2 += d * d;
    w2 += want[i] * want[i];
  }
  if (std::sqrt(e2) <= rel * std::sqrt(w2)) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "relative error " << std::sqrt(e2 / std::max(w2, 1e-300));
}

std::map<std::string, std::uint64_t> calls_of(const ProfileResult& p) {
  std::map<std::string, std::uint64_t> calls;
  for (const ProfileRow& r : p.rows) calls[r.op] += r.calls;
  return calls;
}


struct Case {
  std::size_t n, c, h, w, oc, kh, kw;
  std::array<std::int64_t, 2> stride{1, 1}, padding{0, 0}, dilation{1, 1};
  bool per_oc = true;
  int layout = 0;  // 0 contiguous, 1 a permuted view (NHWC storage), 2 a sliced view (wider storage)
  const char* name = "";
};

// conv2d of x [N, C, H, W] (x[((n * C + c) * H + h) * W + w]) with the dequantized weight
// (codes times scales, as the weight reads back), plus the bias, in doubles.
std::vector<double> conv_loops(const Case& k, const std::vector<float>& x, const qz::QuantizedValues& wv,
                               const std::vector<float>& bias, std::size_t oh_n, std::size_t ow_n) {
  const std::size_t per = k.c * k.kh * k.kw;
  std::vector<double> out(k.n * k.oc * oh_n * ow_n);
  for (std::size_t n = 0; n < k.n; ++n)
    for (std::size_t o = 0; o < k.oc; ++o)
      for (std::size_t oh = 0; oh < oh_n; ++oh)
        for (std::size_t ow = 0; ow < ow_n; ++ow) {
          double acc = bias[o];
          for (std::size_t c = 0; c < k.c; ++c)
            for (std::size_t i = 0; i < k.kh; ++i)
              for (std::size_t j = 0; j < k.kw; ++j) {
                const auto ih = static_cast<std::int64_t>(oh) * k.stride[0] - k.padding[0] + static_cast<std::int64_t>(i) * k.dilation[0];
                const auto iw = static_cast<std::int64_t>(ow) * k.stride[1] - k.padding[1] + static_cast<std::int64_t>(j) * k.dilation[1];
                if (ih < 0 || iw < 0 || ih >= static_cast<std::int64_t>(k.h) || iw >= static_cast<std::int64_t>(k.w)) continue;
                const std::size_t wi = ((o * k.c + c) * k.kh + i) * k.kw + j;
                const double s = wv.scales[wv.scales.size() == 1 ? 0 : wi / per];
                acc += static_cast<double>(x[((n * k.c + c) * k.h + static_cast<std::size_t>(ih)) * k.w + static_cast<std::size_t>(iw)]) *
                       static_cast<double>(wv.codes[wi]) * s;
              }
          out[((n * k.oc + o) * oh_n + oh) * ow_n + ow] = acc;
        }
  return out;
}

void check(const Case& k) {
  SCOPED_TRACE(k.name);
  const std::vector<float> x = lcg(k.n * k.c * k.h * k.w, 11u + static_cast<std::uint32_t>(k.n * 31 + k.h), 1.0f);
  const std::vector<float> w = lcg(k.oc * k.c * k.kh * k.kw, 5u + static_cast<std::uint32_t>(k.oc), 0.3f);
  const std::vector<float> bias = lcg(k.oc, 3u, 0.5f);
  const QuantScheme s =
      k.per_oc ? q8s().with_level(QuantLevel::block({1, static_cast<std::uint32_t>(k.c), static_cast<std::uint32_t>(k.kh),
                                                     static_cast<std::uint32_t>(k.kw)}))
               : q8s();
  const auto wq = quantize_dynamic(from<4>(w, Shape{k.oc, k.c, k.kh, k.kw}), s);
  Tensor<4> xt = from<4>(x, Shape{k.n, k.c, k.h, k.w});
  if (k.layout == 1) {  // the same values stored NHWC, read through a permuted view
    std::vector<float> nhwc(x.size());
    for (std::size_t n = 0; n < k.n; ++n)
      for (std::size_t c = 0; c < k.c; ++c)
        for (std::size_t p = 0; p < k.h * k.w; ++p) nhwc[(n * k.h * k.w + p) * k.c + c] = x[(n * k.c + c) * k.h * k.w + p];
    xt = from<4>(nhwc, Shape{k.n, k.h, k.w, k.c}).permute({0, 3, 1, 2});
  } else if (k.layout == 2) {  // stored with 3 more columns, sliced back to W
    std::vector<float> wide(k.n * k.c * k.h * (k.w + 3), 99.0f);
    for (std::size_t r = 0; r < k.n * k.c * k.h; ++r)
      for (std::size_t j = 0; j < k.w; ++j) wide[r * (k.w + 3) + 1 + j] = x[r * k.w + j];
    xt = from<4>(wide, Shape{k.n, k.c, k.h, k.w + 3}).slice_dim(3, Slice::range(1, static_cast<std::int64_t>(k.w) + 1));
  }
  nn::ConvOptions<2> o;
  o.stride = k.stride;
  o.padding = k.padding;
  o.dilation = k.dilation;
  const auto ext = [](std::size_t in, std::int64_t p, std::int64_t d, std::size_t kk, std::int64_t st) {
    return (in + 2 * static_cast<std::size_t>(p) - static_cast<std::size_t>(d) * (kk - 1) - 1) / static_cast<std::size_t>(st) + 1;
  };
  const std::size_t oh = ext(k.h, k.padding[0], k.dilation[0], k.kh, k.stride[0]);
  const std::size_t ow = ext(k.w, k.padding[1], k.dilation[1], k.kw, k.stride[1]);
  const auto want = conv_loops(k, x, qz::quantized_values(wq.into_data()), bias, oh, ow);
  profile::start();
  const auto y = nn::conv2d(xt, wq, from<1>(bias, Shape{k.oc}), o);
  const auto calls = calls_of(profile::stop());
  EXPECT_EQ(y.shape(), (Shape{k.n, k.oc, oh, ow}));
  EXPECT_EQ(y.dtype(), DType::F32);
  // the int8 convolution itself: one q_conv2d on the cpu, no im2col (unfold4d) and no q_matmul
  EXPECT_EQ(calls.count("q_conv2d") ? calls.at("q_conv2d") : 0u, dev() == Device::cpu() ? 1u : 0u);
  EXPECT_EQ(calls.count("unfold4d"), 0u);
  EXPECT_EQ(calls.count("q_matmul"), 0u);
#if TENSOR_HAVE_ONEDNN
  // and oneDNN's own kernel for it (not its reference loops, not the im2col fallback)
  if (dev() == Device::cpu()) {
    const std::string route = tensor::cpu::last_q_conv2d_route();
    EXPECT_TRUE(route.starts_with("onednn conv ")) << route;
  }
#endif
  EXPECT_TRUE(close_norm(values(y), want, 1e-2));
}

TEST_P(QuantConv, AgainstLoopsOverCodesAndScales) {
  // K = C * KH * KW >= 32 everywhere (the int8 route's threshold)
  check({.n = 2, .c = 8, .h = 9, .w = 10, .oc = 5, .kh = 3, .kw = 3, .padding = {1, 1}, .name = "3x3 padding 1, batch 2"});
  check({.n = 1, .c = 8, .h = 9, .w = 10, .oc = 5, .kh = 3, .kw = 3, .name = "3x3, batch 1"});
  check({.n = 3, .c = 16, .h = 11, .w = 9, .oc = 7, .kh = 3, .kw = 2, .stride = {2, 1}, .padding = {1, 0},
         .per_oc = false, .name = "3x2 stride (2, 1) padding (1, 0), per tensor"});
  check({.n = 2, .c = 8, .h = 12, .w = 13, .oc = 6, .kh = 3, .kw = 3, .stride = {2, 2}, .padding = {2, 1},
         .dilation = {2, 3}, .name = "dilation (2, 3) stride 2"});
  check({.n = 2, .c = 32, .h = 6, .w = 7, .oc = 9, .kh = 1, .kw = 1, .name = "1x1"});
  check({.n = 2, .c = 8, .h = 9, .w = 10, .oc = 5, .kh = 3, .kw = 3, .padding = {1, 1}, .layout = 1,
         .name = "a permuted view (NHWC storage)"});
  check({.n = 2, .c = 8, .h = 9, .w = 10, .oc = 5, .kh = 3, .kw = 3, .stride = {2, 2}, .layout = 2, .name = "a sliced view"});
}

TEST_P(QuantConv, EmptyBatchAndOtherDtypes) {
  const auto wq = quantize_dynamic(from<4>(lcg(4 * 8 * 3 * 3, 9u, 0.3f), Shape{4, 8, 3, 3}), q8s());
  nn::ConvOptions<2> o;
  o.padding = {1, 1};
  const auto y0 = nn::conv2d(from<4>({}, Shape{0, 8, 5, 5}), wq, from<1>({1, 2, 3, 4}, Shape{4}), o);
  EXPECT_EQ(y0.shape(), (Shape{0, 4, 5, 5}));
  EXPECT_TRUE(values(y0).empty());
  // a bf16 x (and bias): the result in bf16, within bf16's precision of the f32 x's result
  const auto x = from<4>(lcg(2 * 8 * 5 * 5, 4u, 1.0f), Shape{2, 8, 5, 5});
  const auto b = from<1>({0.5f, -0.5f, 0.25f, 0.0f}, Shape{4});
  const auto yf = values(nn::conv2d(x, wq, b, o));
  const auto yb = nn::conv2d(x.cast(DType::BF16), wq, b.cast(DType::BF16), o);
  EXPECT_EQ(yb.dtype(), DType::BF16);
  const std::vector<double> want(yf.begin(), yf.end());
  EXPECT_TRUE(close_norm(values(yb), want, 2e-2));
}

TEST_P(QuantConv, BadInputIsATypedErrorNamingTheOp) {
  const auto wq = quantize_dynamic(from<4>(lcg(4 * 8 * 3 * 3, 9u, 0.3f), Shape{4, 8, 3, 3}), q8s());
  const auto x = from<4>(lcg(2 * 8 * 5 * 5, 4u, 1.0f), Shape{2, 8, 5, 5});
  auto expect = [](auto&& f, const char* what) {
    try {
      f();
      ADD_FAILURE() << what << ": no exception";
    } catch (const tensor::Error& e) {
      EXPECT_NE(std::string(e.what()).find("[conv2d]"), std::string::npos) << what << ": " << e.what();
    }
  };
  expect([&] { (void)nn::conv2d(from<4>(lcg(2 * 6 * 5 * 5, 1u, 1.0f), Shape{2, 6, 5, 5}), wq, std::nullopt, {}); },
         "channels differ");
  expect([&] { (void)nn::conv2d(x, wq, from<1>({1, 2, 3}, Shape{3}), {}); }, "bias of the wrong length");
  expect([&] { (void)nn::conv2d(x, wq, std::optional<Tensor<1>>(from<1>({1, 2, 3, 4}, Shape{4}).cast(DType::F64)), {}); },
         "bias of another dtype");
  nn::ConvOptions<2> big;
  big.padding = {0, 0};
  expect([&] { (void)nn::conv2d(from<4>(lcg(1 * 8 * 2 * 2, 1u, 1.0f), Shape{1, 8, 2, 2}), wq, std::nullopt, big); },
         "a kernel larger than the input");
  EXPECT_THROW((void)nn::conv2d(from<4>(lcg(1 * 8 * 2 * 2, 1u, 1.0f), Shape{1, 8, 2, 2}), wq, std::nullopt, big), ShapeError);
  EXPECT_THROW((void)nn::conv2d(x, wq, from<1>({1, 2, 3}, Shape{3}), {}), ShapeError);
  EXPECT_THROW((void)nn::conv2d(x, wq, std::optional<Tensor<1>>(from<1>({1, 2, 3, 4}, Shape{4}).cast(DType::F64)), {}),
               DTypeError);
}

}  // namespace
