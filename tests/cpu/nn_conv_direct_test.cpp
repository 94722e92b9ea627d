// The direct f32 convolution for few input channels (nn/conv_direct.hpp, the Highway row
// kernel conv_hwy.hpp): conv_forward on that route against a plain f64 loop over the
// definition, on every compiled Highway target, over strides, paddings, dilations, odd
// widths (vector tails), channel counts that are not a multiple of 8, with and without
// bias; the route's name; which shapes take it; conv2d through the public API on a sliced
// input view; and the fused conv -> relu -> 2x2 max pool block on both routes (direct and
// im2col + gemm, conv_gemm_pool.hpp).
#include <gtest/gtest.h>

#include <hwy/targets.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <tensor/nn.hpp>
#include <tensor/tensor.hpp>

#include "backends/cpu/cpu_info.hpp"
#include "backends/cpu/nn/conv.hpp"
#include "backends/cpu/nn/conv_direct.hpp"
#include "backends/cpu/nn/conv_gemm_pool.hpp"
#include "backends/cpu/nn/conv_onednn.hpp"
#include "nn_test_util.hpp"

namespace tensor::cpu::nn::test {
namespace {

using I = std::int64_t;

struct Case {
  std::size_t n, c, h, w, oc, kh, kw;
  I sh = 1, sw = 1, ph = 0, pw = 0, dh = 1, dw = 1;
  bool bias = true;
};

std::size_t out_extent(std::size_t in, std::size_t k, I s, I p, I d) {
  return static_cast<std::size_t>((static_cast<I>(in) + 2 * p - d * (static_cast<I>(k) - 1) - 1) / s + 1);
}

// y[n][o][i][j] = b[o] + sum over c, a, e of w[o][c][a][e] * x[n][c][i*sh - ph + a*dh][j*sw - pw + e*dw]
// (terms outside x are 0), in f64.
std::vector<double> reference(const Case& k, const std::vector<double>& x, const std::vector<double>& w,
                              const std::vector<double>& b) {
  const std::size_t oh = out_extent(k.h, k.kh, k.sh, k.ph, k.dh), ow = out_extent(k.w, k.kw, k.sw, k.pw, k.dw);
  std::vector<double> y(k.n * k.oc * oh * ow);
  for (std::size_t n = 0; n < k.n; ++n)
    for (std::size_t o = 0; o < k.oc; ++o)
      for (std::size_t i = 0; i < oh; ++i)
        for (std::size_t j = 0; j < ow; ++j) {
          double s = k.bias ? b[o] : 0.0;
          for (std::size_t c = 0; c < k.c; ++c)
            for (std::size_t a = 0; a < k.kh; ++a)
              for (std::size_t e = 0; e < k.kw; ++e) {
                const I r = static_cast<I>(i) * k.sh - k.ph + static_cast<I>(a) * k.dh;
                const I q = static_cast<I>(j) * k.sw - k.pw + static_cast<I>(e) * k.dw;
                if (r < 0 || q < 0 || r >= static_cast<I>(k.h) || q >= static_cast<I>(k.w)) continue;
                s += w[((o * k.c + c) * k.kh + a) * k.kw + e] *
                     x[((n * k.c + c) * k.h + static_cast<std::size_t>(r)) * k.w + static_cast<std::size_t>(q)];
              }
          y[((n * k.oc + o) * oh + i) * ow + j] = s;
        }
  return y;
}

ConvGeom geom(const Case& k) {
  return conv_geom<2>("conv2d", Shape{k.n, k.c, k.h, k.w}, Shape{k.oc, k.c, k.kh, k.kw},
                      tensor::nn::ConvOptions<2>{{k.sh, k.sw}, {k.ph, k.pw}, {k.dh, k.dw}, 1});
}

const Case kCases[] = {
    {.n = 3, .c = 1, .h = 28, .w = 28, .oc = 32, .kh = 3, .kw = 3, .ph = 1, .pw = 1},  // the CNN's first conv
    {.n = 2, .c = 3, .h = 17, .w = 19, .oc = 16, .kh = 5, .kw = 5, .bias = false},
    {.n = 2, .c = 3, .h = 21, .w = 23, .oc = 5, .kh = 5, .kw = 5, .sh = 2, .sw = 2, .ph = 2, .pw = 2},
    {.n = 1, .c = 4, .h = 13, .w = 37, .oc = 11, .kh = 3, .kw = 7, .sh = 1, .sw = 3, .ph = 0, .pw = 3},
    {.n = 2, .c = 2, .h = 15, .w = 15, .oc = 9, .kh = 3, .kw = 3, .ph = 2, .pw = 2, .dh = 2, .dw = 3},
    {.n = 1, .c = 3, .h = 40, .w = 41, .oc = 17, .kh = 7, .kw = 7, .sh = 2, .sw = 2, .ph = 3, .pw = 3, .bias = false},
    {.n = 2, .c = 1, .h = 9, .w = 3, .oc = 1, .kh = 2, .kw = 2, .sh = 3, .sw = 1, .ph = 1, .pw = 0, .dh = 1, .dw = 2},
    {.n = 1, .c = 2, .h = 1, .w = 50, .oc = 8, .kh = 1, .kw = 4, .sw = 2, .pw = 1},  // one row, as a 1-d conv
    {.n = 1, .c = 1, .h = 6, .w = 6, .oc = 3, .kh = 6, .kw = 6},                    // a 1x1 output
};

void check_case(const Case& k, const std::string& what) {
  const ConvGeom g = geom(k);
  ASSERT_TRUE(direct_small_cin_supported(g)) << what;
  const auto x = rnd(k.n * k.c * k.h * k.w, 7 + static_cast<std::uint32_t>(k.w));
  const auto w = rnd(k.oc * k.c * k.kh * k.kw, 3 + static_cast<std::uint32_t>(k.oc));
  const auto b = rnd(k.oc, 5);
  const auto xf = cast<float>(x), wf = cast<float>(w), bf = cast<float>(b);
  std::vector<float> y(k.n * k.oc * g.out_size(), -7.0f);
  if (direct_small_cin(g)) {  // through the route
    reset_conv_forward_routes();
    conv_forward(g, xf.data(), wf.data(), k.bias ? bf.data() : nullptr, y.data());
    EXPECT_NE(conv_forward_routes().find("direct small-C_in"), std::string::npos) << what << ": " << conv_forward_routes();
  } else {  // a shape the route leaves to im2col + gemm: the kernel itself
    direct_small_cin_forward(g, xf.data(), wf.data(), k.bias ? bf.data() : nullptr, y.data());
  }
  expect_close(y, reference(k, x, w, b), 1e-5, what);
}

TEST(CpuConvDirect, MatchesLoopsOnEveryCompiledTarget) {
  const std::vector<std::int64_t> targets = compiled_targets();  // before any mock
  ASSERT_FALSE(targets.empty());
  for (const std::int64_t t : targets) {
    hwy::SetSupportedTargetsForTest(t);
    const std::string name = hwy::TargetName(t);
    ASSERT_EQ(conv_direct_target(), name);
    for (std::size_t i = 0; i < std::size(kCases); ++i) check_case(kCases[i], name + " case " + std::to_string(i));
  }
  hwy::SetSupportedTargetsForTest(0);
}

// Enough work for both threads: row blocks of one sample, and many samples.
TEST(CpuConvDirect, MatchesLoopsOnThreads) {
  check_case({.n = 1, .c = 1, .h = 96, .w = 96, .oc = 32, .kh = 3, .kw = 3, .ph = 1, .pw = 1}, "one large sample");
  check_case({.n = 40, .c = 1, .h = 28, .w = 28, .oc = 32, .kh = 3, .kw = 3, .ph = 1, .pw = 1}, "a batch");
}

TEST(CpuConvDirect, TheRouteTakesSmallChannelCountsOnly) {
  EXPECT_TRUE(direct_small_cin(geom({.n = 500, .c = 1, .h = 28, .w = 28, .oc = 32, .kh = 3, .kw = 3, .ph = 1, .pw = 1})));
  EXPECT_TRUE(direct_small_cin(geom({.n = 64, .c = 3, .h = 32, .w = 32, .oc = 16, .kh = 5, .kw = 5})));
  EXPECT_TRUE(direct_small_cin(geom({.n = 256, .c = 1, .h = 7, .w = 7, .oc = 32, .kh = 3, .kw = 3, .ph = 1, .pw = 1})));
  // narrow rows with more than 9 taps stay on im2col + gemm (measured faster there)
  EXPECT_FALSE(direct_small_cin(geom({.n = 256, .c = 4, .h = 7, .w = 7, .oc = 128, .kh = 3, .kw = 3, .ph = 1, .pw = 1})));
  EXPECT_FALSE(direct_small_cin(geom({.n = 1, .c = 5, .h = 8, .w = 8, .oc = 4, .kh = 3, .kw = 3})));   // c_in > 4
  // strides, dilations past 4 and padding past the kernel's extent (a copy far larger than x)
  EXPECT_FALSE(direct_small_cin_supported(geom({.n = 1, .c = 1, .h = 40, .w = 40, .oc = 8, .kh = 3, .kw = 3, .sh = 1, .sw = 5})));
  EXPECT_FALSE(direct_small_cin_supported(geom({.n = 1, .c = 1, .h = 40, .w = 40, .oc = 8, .kh = 3, .kw = 3, .sh = 9, .sw = 1})));
  EXPECT_FALSE(direct_small_cin_supported(geom({.n = 1, .c = 1, .h = 40, .w = 40, .oc = 8, .kh = 3, .kw = 3, .dh = 5})));
  EXPECT_FALSE(direct_small_cin_supported(geom({.n = 1, .c = 1, .h = 4, .w = 4, .oc = 8, .kh = 3, .kw = 3, .ph = 3, .pw = 1})));
  EXPECT_TRUE(direct_small_cin_supported(geom({.n = 1, .c = 1, .h = 4, .w = 4, .oc = 8, .kh = 3, .kw = 3, .ph = 2, .pw = 2})));
  EXPECT_FALSE(direct_small_cin(geom({.n = 1, .c = 1, .h = 12, .w = 12, .oc = 4, .kh = 9, .kw = 3})));  // kernel > 7
  const auto grouped = conv_geom<2>("conv2d", Shape{1, 4, 8, 8}, Shape{4, 2, 3, 3}, tensor::nn::ConvOptions<2>{{1, 1}, {0, 0}, {1, 1}, 2});
  EXPECT_FALSE(direct_small_cin(grouped));
  const auto three_d = conv_geom<3>("conv3d", Shape{1, 1, 4, 8, 8}, Shape{4, 1, 3, 3, 3}, tensor::nn::ConvOptions<3>{});
  EXPECT_FALSE(direct_small_cin(three_d));
  // switched off, the same conv takes im2col + gemm and gives the same values
  const Case k{.n = 2, .c = 1, .h = 10, .w = 11, .oc = 8, .kh = 3, .kw = 3, .ph = 1, .pw = 1};
  const auto x = cast<float>(rnd(k.n * k.h * k.w, 1)), w = cast<float>(rnd(k.oc * 9, 2)), b = cast<float>(rnd(k.oc, 3));
  const ConvGeom g = geom(k);
  std::vector<float> on(k.n * k.oc * g.out_size()), off(on.size());
  reset_conv_forward_routes();
  conv_forward(g, x.data(), w.data(), b.data(), on.data());
  set_conv_direct(false);
  conv_forward(g, x.data(), w.data(), b.data(), off.data());
  set_conv_direct(true);
  EXPECT_EQ(conv_forward_routes(), "direct small-C_in [1->8 3x3]; im2col + gemm [1->8 3x3]");
  expect_close(on, off, 1e-5, "direct vs im2col + gemm");
}

// max_pool2d(relu(y), 2x2, stride 2, floor) of a conv output y [n][oc][oh][ow], in f64, in
// torch's order (relu first, then the max of each window).
std::vector<double> relu_pool_reference(const Case& k, const std::vector<double>& y) {
  const std::size_t oh = out_extent(k.h, k.kh, k.sh, k.ph, k.dh), ow = out_extent(k.w, k.kw, k.sw, k.pw, k.dw);
  const std::size_t py = oh / 2, px = ow / 2;
  std::vector<double> out(k.n * k.oc * py * px);
  for (std::size_t p = 0; p < k.n * k.oc; ++p)
    for (std::size_t i = 0; i < py; ++i)
      for (std::size_t j = 0; j < px; ++j) {
        double m = -1e300;
        for (std::size_t a = 0; a < 2; ++a)
          for (std::size_t e = 0; e < 2; ++e) m = std::max(m, std::max(0.0, y[(p * oh + 2 * i + a) * ow + 2 * j + e]));
        out[(p * py + i) * px + j] = m;
      }
  return out;
}

// A fused conv -> bias -> relu -> 2x2 max pool block: `fused(g, x, w, b, y)` writes exactly
// n * oc * py * px outputs (a guard element past the end stays), within 1e-5 of the f64
// loops; against `unfused(g, x, w, b, conv)` then relu and the pool: bit for bit where
// `exact`, else within 1e-6 relative with the count of differing floats recorded (a
// different column split may round differently). seed: the inputs' random seeds.
template <class Fused, class Unfused>
void check_fused_block(const Case& k, const std::string& what, std::uint32_t seed, bool exact, Fused&& fused,
                       Unfused&& unfused) {
  const ConvGeom g = geom(k);
  const auto x = rnd(k.n * k.c * k.h * k.w, seed + static_cast<std::uint32_t>(k.h));
  const auto w = rnd(k.oc * k.c * k.kh * k.kw, seed + 2 + static_cast<std::uint32_t>(k.oc));
  const auto b = rnd(k.oc, seed + 6);
  const auto xf = cast<float>(x), wf = cast<float>(w), bf = cast<float>(b);
  const float* bp = k.bias ? bf.data() : nullptr;
  const std::size_t py = g.out[1] / 2, px = g.out[2] / 2;
  std::vector<float> y(k.n * k.oc * py * px + 1, -7.0f);
  fused(g, xf.data(), wf.data(), bp, y.data());
  EXPECT_EQ(y.back(), -7.0f) << what;
  y.pop_back();
  expect_close(y, relu_pool_reference(k, reference(k, x, w, b)), 1e-5, what);
  std::vector<float> conv(k.n * k.oc * g.out_size());
  unfused(g, xf.data(), wf.data(), bp, conv.data());
  std::vector<double> pooled(y.size());
  std::size_t zeros = 0, differ = 0;
  for (std::size_t p = 0; p < k.n * k.oc; ++p)
    for (std::size_t i = 0; i < py; ++i)
      for (std::size_t j = 0; j < px; ++j) {
        float m = 0.0f;
        for (std::size_t a = 0; a < 2; ++a)
          for (std::size_t e = 0; e < 2; ++e) m = std::max(m, conv[(p * g.out[1] + 2 * i + a) * g.out[2] + 2 * j + e]);
        const std::size_t at = (p * py + i) * px + j;
        pooled[at] = m;
        zeros += y[at] == 0.0f;
        differ += y[at] != m;
        if (exact) {
          ASSERT_EQ(y[at], m) << what << " at " << p << "," << i << "," << j;
        }
      }
  if (!exact) {
    expect_close(y, pooled, 1e-6, what + " against the unfused path");
    ::testing::Test::RecordProperty(what + " floats differing from the unfused path", std::to_string(differ));
  }
  if (y.size() >= 100) {
    EXPECT_GT(zeros, 0u) << what << ": relu never clamped (a weak case)";
  }
  EXPECT_LT(zeros, y.size()) << what;
}

// The direct small-C_in fused block, bit for bit with the unfused direct conv then relu
// and the pool (the same per-row arithmetic).
void check_relu_pool(const Case& k, const std::string& what) {
  ASSERT_TRUE(direct_small_cin_relu_pool_supported(geom(k))) << what;
  check_fused_block(k, what, 11, true, direct_small_cin_relu_pool_forward, direct_small_cin_forward);
}

// The fused first block (conv -> bias -> relu -> 2x2 max pool) against loops on every
// compiled target: odd conv output heights and widths (the last row / column dropped, as
// max_pool2d's floor), strides, padding, dilation, channel counts off a multiple of 8.
TEST(CpuConvDirect, FusedReluPoolMatchesLoopsOnEveryCompiledTarget) {
  const Case cases[] = {
      {.n = 3, .c = 1, .h = 28, .w = 28, .oc = 32, .kh = 3, .kw = 3, .ph = 1, .pw = 1},  // the CNN's first block
      {.n = 2, .c = 3, .h = 17, .w = 19, .oc = 13, .kh = 5, .kw = 5, .bias = false},     // 13x15 conv output
      {.n = 2, .c = 2, .h = 21, .w = 23, .oc = 5, .kh = 3, .kw = 5, .sh = 2, .sw = 2, .ph = 1, .pw = 2},
      {.n = 1, .c = 4, .h = 15, .w = 37, .oc = 9, .kh = 3, .kw = 3, .ph = 2, .pw = 2, .dh = 2, .dw = 3},
      {.n = 2, .c = 1, .h = 3, .w = 3, .oc = 8, .kh = 2, .kw = 2},  // a 2x2 conv output: one pooled value
  };
  const std::vector<std::int64_t> targets = compiled_targets();
  ASSERT_FALSE(targets.empty());
  for (const std::int64_t t : targets) {
    hwy::SetSupportedTargetsForTest(t);
    const std::string name = hwy::TargetName(t);
    for (std::size_t i = 0; i < std::size(cases); ++i) check_relu_pool(cases[i], name + " fused case " + std::to_string(i));
  }
  hwy::SetSupportedTargetsForTest(0);
  // threads: row blocks of one sample, and a batch
  check_relu_pool({.n = 1, .c = 1, .h = 96, .w = 97, .oc = 32, .kh = 3, .kw = 3, .ph = 1, .pw = 1}, "fused, one large sample");
  check_relu_pool({.n = 40, .c = 1, .h = 28, .w = 28, .oc = 32, .kh = 3, .kw = 3, .ph = 1, .pw = 1}, "fused, a batch");
}

TEST(CpuConvDirect, FusedReluPoolRouteAndShapes) {
  const ConvGeom g = geom({.n = 2, .c = 1, .h = 10, .w = 11, .oc = 8, .kh = 3, .kw = 3, .ph = 1, .pw = 1});
  EXPECT_TRUE(conv_relu_pool_fusable(g));
  const auto x = cast<float>(rnd(2 * 10 * 11, 1)), w = cast<float>(rnd(8 * 9, 2));
  std::vector<float> y(2 * 8 * 5 * 5);
  reset_conv_forward_routes();
  conv_relu_pool_forward(g, x.data(), w.data(), nullptr, y.data());
  EXPECT_EQ(conv_forward_routes(), "direct small-C_in + relu + max-pool 2x2 [1->8 3x3]");
  // with the direct route off, the same shape goes to im2col + gemm, fused there too
  set_conv_direct(false);
  EXPECT_TRUE(conv_relu_pool_fusable(g));
  reset_conv_forward_routes();
  conv_relu_pool_forward(g, x.data(), w.data(), nullptr, y.data());
  set_conv_direct(true);
  EXPECT_EQ(conv_forward_routes(), "im2col + gemm + relu + max-pool 2x2 [1->8 3x3]");
  // a 1-row or 1-column conv output has nothing to pool: neither route takes it
  EXPECT_FALSE(direct_small_cin_relu_pool_supported(geom({.n = 1, .c = 2, .h = 1, .w = 50, .oc = 8, .kh = 1, .kw = 4})));
  EXPECT_FALSE(conv_relu_pool_fusable(geom({.n = 1, .c = 2, .h = 1, .w = 50, .oc = 8, .kh = 1, .kw = 4})));
  EXPECT_FALSE(conv_relu_pool_fusable(geom({.n = 2, .c = 32, .h = 9, .w = 3, .oc = 16, .kh = 3, .kw = 3})));  // 7x1
  EXPECT_FALSE(conv_relu_pool_fusable(geom({.n = 2, .c = 32, .h = 3, .w = 9, .oc = 16, .kh = 3, .kw = 3})));  // 1x7
  // the im2col shapes take the gemm route; groups do not
  EXPECT_TRUE(conv_relu_pool_fusable(geom({.n = 256, .c = 4, .h = 7, .w = 7, .oc = 128, .kh = 3, .kw = 3, .ph = 1, .pw = 1})));
  const ConvGeom grouped = conv_geom<2>("conv2d", Shape{2, 32, 8, 8}, Shape{32, 16, 3, 3}, tensor::nn::ConvOptions<2>{{1, 1}, {1, 1}, {1, 1}, 2});
  EXPECT_FALSE(conv_relu_pool_fusable(grouped));
}

// The im2col + gemm fused block (conv_gemm_pool.hpp) against the f64 loops (tolerance 1e-5,
// as the unfused route's tests) and against conv_forward's im2col + gemm then relu then the
// pool (within 1e-6 relative: the same gemm per sample, a different column split where the
// block is not the whole plane may round differently; the count of differing floats is
// recorded, 0 on these cases when written), with its route named.
void check_gemm_relu_pool(const Case& k, const std::string& what) {
  ASSERT_TRUE(conv_relu_pool_fusable(geom(k))) << what;
  reset_conv_forward_routes();
  check_fused_block(k, what, 19, false, conv_relu_pool_forward, [](const ConvGeom& g, const float* x, const float* w, const float* b, float* y) {
    const std::string route = conv_forward_routes();
    EXPECT_EQ(route, "im2col + gemm + relu + max-pool 2x2 [" + std::to_string(g.c_in) + "->" + std::to_string(g.c_out) + " " +
                         std::to_string(g.kernel[1]) + "x" + std::to_string(g.kernel[2]) + "]");
    conv_forward(g, x, w, b, y);
  });
}

TEST(CpuConvDirect, FusedReluPoolOnTheGemmRoute) {
  const Case cases[] = {
      {.n = 5, .c = 32, .h = 14, .w = 14, .oc = 64, .kh = 3, .kw = 3, .ph = 1, .pw = 1},  // the CNN's second block
      {.n = 3, .c = 32, .h = 9, .w = 11, .oc = 16, .kh = 3, .kw = 3, .bias = false},      // 7x9 output
      {.n = 2, .c = 8, .h = 13, .w = 12, .oc = 12, .kh = 3, .kw = 5, .sh = 2, .sw = 1, .ph = 1, .pw = 2, .dw = 2},
      {.n = 1, .c = 16, .h = 4, .w = 5, .oc = 8, .kh = 3, .kw = 3, .bias = false},  // a 2x3 output: one pooled row
      {.n = 3, .c = 6, .h = 10, .w = 10, .oc = 7, .kh = 1, .kw = 1},                // pointwise
      // several row blocks per sample (block of kGemmPoolBlockBytes / ((Kc + oc) * out_w * 4) rows)
      {.n = 2, .c = 64, .h = 61, .w = 60, .oc = 32, .kh = 3, .kw = 3, .ph = 1, .pw = 1},
  };
  EXPECT_LT(gemm_relu_pool_rows(geom(cases[5])), 60u);
  // oneDNN's primitive takes cases 0 and 5 by default (nn_conv_onednn_test.cpp tests it fused)
  const OnednnConvMode mode = onednn_conv_mode();
  set_onednn_conv_mode(OnednnConvMode::off);
  for (std::size_t i = 0; i < std::size(cases); ++i) check_gemm_relu_pool(cases[i], "gemm fused case " + std::to_string(i));
  set_onednn_conv_mode(mode);
  // a 1-4 channel shape with the direct route off
  set_conv_direct(false);
  check_gemm_relu_pool({.n = 3, .c = 1, .h = 28, .w = 28, .oc = 32, .kh = 3, .kw = 3, .ph = 1, .pw = 1}, "gemm fused, direct off");
  set_conv_direct(true);
}

// conv2d through dispatch on a view: x stored 3 columns wider and sliced back.
TEST(CpuConvDirect, PublicConv2dOnASlicedView) {
  const Case k{.n = 2, .c = 3, .h = 9, .w = 17, .oc = 10, .kh = 3, .kw = 3, .sh = 2, .sw = 1, .ph = 1, .pw = 1};
  const auto x = rnd(k.n * k.c * k.h * k.w, 21), w = rnd(k.oc * k.c * 9, 22), b = rnd(k.oc, 23);
  std::vector<float> wide(k.n * k.c * k.h * (k.w + 3), 99.0f);
  for (std::size_t r = 0; r < k.n * k.c * k.h; ++r)
    for (std::size_t j = 0; j < k.w; ++j) wide[r * (k.w + 3) + 1 + j] = static_cast<float>(x[r * k.w + j]);
  const Device cpu = Device::cpu();
  const auto xt = Tensor<4>::from_data(TensorData::from<float>(wide, Shape{k.n, k.c, k.h, k.w + 3}), cpu)
                      .slice_dim(3, Slice::range(1, static_cast<std::int64_t>(k.w) + 1));
  const auto wt = Tensor<4>::from_data(TensorData::from<float>(cast<float>(w), Shape{k.oc, k.c, 3, 3}), cpu);
  const auto bt = Tensor<1>::from_data(TensorData::from<float>(cast<float>(b), Shape{k.oc}), cpu);
  reset_conv_forward_routes();
  const auto y = tensor::nn::conv2d(xt, wt, bt, tensor::nn::ConvOptions<2>{{2, 1}, {1, 1}, {1, 1}, 1});
  const auto got = y.into_data().convert(DType::F32).to_vec<float>();
  EXPECT_EQ(conv_forward_routes(), "direct small-C_in [3->10 3x3]");
  expect_close(got, reference(k, x, w, b), 1e-5, "sliced view");
}

}  // namespace
}  // namespace tensor::cpu::nn::test
