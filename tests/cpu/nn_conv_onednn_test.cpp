// The 2-d f32 convolution on oneDNN's primitives (conv_onednn.hpp): forward (with and
// without bias) and input gradient against sums in double written here, on geometries
// with odd channel counts, a batch that is not a multiple of the part count, stride,
// dilation and asymmetric padding; groups > 1 declined by the route and still right on
// im2col + gemm; equal bit for bit on one thread and on all.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "backends/cpu/nn/conv.hpp"
#include "backends/cpu/nn/conv_gemm_pool.hpp"
#include "backends/cpu/nn/conv_onednn.hpp"

#if TENSOR_HAVE_OPENMP
#include <omp.h>
#endif
#include "nn_test_util.hpp"

namespace tensor::cpu::nn::test {
namespace {

using I = std::int64_t;

struct Case2 {
  std::size_t batch, cin, cout, groups, h, w, kh, kw;
  I sh, sw, ph, pw, dh, dw;
};

ConvGeom geom2(const Case2& c) {
  ConvGeom g;
  g.batch = c.batch;
  g.c_in = c.cin;
  g.c_out = c.cout;
  g.groups = c.groups;
  g.in = {1, c.h, c.w};
  g.kernel = {1, c.kh, c.kw};
  g.stride = {1, c.sh, c.sw};
  g.padding = {0, c.ph, c.pw};
  g.dilation = {1, c.dh, c.dw};
  g.out = {1, static_cast<std::size_t>((static_cast<I>(c.h) + 2 * c.ph - c.dh * (static_cast<I>(c.kh) - 1) - 1) / c.sh + 1),
           static_cast<std::size_t>((static_cast<I>(c.w) + 2 * c.pw - c.dw * (static_cast<I>(c.kw) - 1) - 1) / c.sw + 1)};
  return g;
}

std::string describe(const Case2& c) {
  return "[" + std::to_string(c.batch) + "," + std::to_string(c.cin) + "," + std::to_string(c.h) + "," +
         std::to_string(c.w) + "] -> " + std::to_string(c.cout) + " k" + std::to_string(c.kh) + "x" +
         std::to_string(c.kw) + " s" + std::to_string(c.sh) + " p" + std::to_string(c.ph) + " d" +
         std::to_string(c.dh) + " g" + std::to_string(c.groups);
}

// y[n,o,i,j] = b[o] + sum over c, ki, kj of w[o,c,ki,kj] x[n, grp*cgi + c, i*s - p + ki*d, j*s - p + kj*d]
// (inside the input); dx the adjoint for dy.
void reference(const Case2& c, const ConvGeom& g, const std::vector<double>& x, const std::vector<double>& w,
               const std::vector<double>& b, const std::vector<double>& dy, std::vector<double>& y,
               std::vector<double>& dx) {
  const I H = static_cast<I>(c.h), W = static_cast<I>(c.w), OH = static_cast<I>(g.out[1]), OW = static_cast<I>(g.out[2]);
  const I cgi = static_cast<I>(c.cin / c.groups), cgo = static_cast<I>(c.cout / c.groups);
  y.assign(c.batch * c.cout * g.out_size(), 0.0);
  dx.assign(x.size(), 0.0);
  for (I n = 0; n < static_cast<I>(c.batch); ++n)
    for (I o = 0; o < static_cast<I>(c.cout); ++o)
      for (I i = 0; i < OH; ++i)
        for (I j = 0; j < OW; ++j) {
          const auto yi = static_cast<std::size_t>(((n * static_cast<I>(c.cout) + o) * OH + i) * OW + j);
          double s = b.empty() ? 0.0 : b[static_cast<std::size_t>(o)];
          for (I ci = 0; ci < cgi; ++ci)
            for (I ki = 0; ki < static_cast<I>(c.kh); ++ki)
              for (I kj = 0; kj < static_cast<I>(c.kw); ++kj) {
                const I r = i * c.sh - c.ph + ki * c.dh, q = j * c.sw - c.pw + kj * c.dw;
                if (r < 0 || r >= H || q < 0 || q >= W) continue;
                const I cx = o / cgo * cgi + ci;
                const auto xi = static_cast<std::size_t>(((n * static_cast<I>(c.cin) + cx) * H + r) * W + q);
                const auto wi = static_cast<std::size_t>(((o * cgi + ci) * static_cast<I>(c.kh) + ki) * static_cast<I>(c.kw) + kj);
                s += w[wi] * x[xi];
                dx[xi] += w[wi] * dy[yi];
              }
          y[yi] = s;
        }
}

struct Outs {
  std::vector<float> y, yb, dx;
  bool fw = false, bx = false;  // whether the oneDNN route took the forward / input gradient
};

Outs run_all(const ConvGeom& g, const std::vector<float>& x, const std::vector<float>& w, const std::vector<float>& b,
             const std::vector<float>& dy) {
  Outs o;
  o.y.assign(g.batch * g.c_out * g.out_size(), -1.0f);
  o.yb = o.y;
  o.dx.assign(x.size(), -1.0f);
  conv_forward(g, x.data(), w.data(), nullptr, o.y.data());
  conv_forward(g, x.data(), w.data(), b.data(), o.yb.data());
  conv_backward_x(g, dy.data(), w.data(), o.dx.data());
  std::vector<float> probe(o.y.size()), probe_dx(x.size());
  o.fw = onednn_conv_forward(g, x.data(), w.data(), nullptr, probe.data());
  o.bx = onednn_conv_backward_x(g, dy.data(), w.data(), probe_dx.data());
  return o;
}

class OnednnConv : public ::testing::Test {
 protected:
  void SetUp() override {
    before_ = onednn_conv_mode();
    set_onednn_conv_mode(OnednnConvMode::forced);
  }
  void TearDown() override { set_onednn_conv_mode(before_); }
  OnednnConvMode before_ = OnednnConvMode::preferred;
};

TEST_F(OnednnConv, ForwardAndInputGradientMatchDoubleSums) {
  const std::vector<Case2> cases = {
      // the CNN's conv2 shape, smaller batch: 11 samples leave batch parts of two sizes
      {11, 32, 64, 1, 14, 14, 3, 3, 1, 1, 1, 1, 1, 1},
      // odd channel counts (no multiple of oneDNN's 16-channel blocks), a 3x2 kernel
      {9, 17, 19, 1, 13, 11, 3, 2, 1, 1, 1, 0, 1, 1},
      // strided, dilated, different padding along the two dims
      {7, 24, 33, 1, 21, 19, 3, 3, 2, 2, 2, 1, 2, 2},
      // stride 3, no padding, a 5x5 kernel
      {5, 16, 48, 1, 23, 20, 5, 5, 3, 3, 0, 0, 1, 1},
      // groups > 1: declined, computed on im2col + gemm
      {6, 32, 32, 2, 12, 12, 3, 3, 1, 1, 1, 1, 1, 1},
  };
  for (const Case2& c : cases) {
    const ConvGeom g = geom2(c);
    const auto x = rnd(c.batch * c.cin * c.h * c.w, 21), w = rnd(c.cout * c.cin / c.groups * c.kh * c.kw, 22);
    const auto b = rnd(c.cout, 23), dy = rnd(c.batch * c.cout * g.out_size(), 24);
    std::vector<double> y, yb, dx, unused;
    reference(c, g, x, w, {}, dy, y, dx);
    reference(c, g, x, w, b, dy, yb, unused);
    const auto xf = cast<float>(x), wf = cast<float>(w), bf = cast<float>(b), dyf = cast<float>(dy);
    const Outs all = run_all(g, xf, wf, bf, dyf);
#if TENSOR_HAVE_ONEDNN
    EXPECT_EQ(all.fw, c.groups == 1) << describe(c);
    // oneDNN 2.6 has no JIT input-gradient kernel for a strided dilated conv: declined.
    EXPECT_EQ(all.bx, c.groups == 1 && !(c.sh > 1 && c.dh > 1)) << describe(c);
#endif
    const double tol = 1e-4 * std::sqrt(static_cast<double>(c.cin / c.groups * c.kh * c.kw));
    expect_close(all.y, y, tol, "y " + describe(c));
    expect_close(all.yb, yb, tol, "y + bias " + describe(c));
    expect_close(all.dx, dx, 1e-4 * std::sqrt(static_cast<double>(c.cout * c.kh * c.kw)), "dx " + describe(c));
#if TENSOR_HAVE_OPENMP
    const int threads = omp_get_max_threads();
    omp_set_num_threads(1);
    const Outs serial = run_all(g, xf, wf, bf, dyf);
    omp_set_num_threads(threads);
    EXPECT_EQ(all.y, serial.y) << describe(c);
    EXPECT_EQ(all.yb, serial.yb) << describe(c);
    EXPECT_EQ(all.dx, serial.dx) << describe(c);
#endif
  }
}

// Off, the route takes nothing; below 16 channels or 128^3 multiply-adds it declines even
// when forced.
TEST_F(OnednnConv, DeclinesWhereOffOrTooSmall) {
  const Case2 big{4, 32, 64, 1, 14, 14, 3, 3, 1, 1, 1, 1, 1, 1};
  const Case2 thin{64, 1, 32, 1, 28, 28, 3, 3, 1, 1, 1, 1, 1, 1};
  const Case2 tiny{1, 16, 16, 1, 8, 8, 3, 3, 1, 1, 1, 1, 1, 1};
  for (int k = 0; k < 3; ++k) {
    const Case2& c = k == 0 ? big : k == 1 ? thin : tiny;
    const ConvGeom g = geom2(c);
    std::vector<float> x(c.batch * c.cin * c.h * c.w, 1.0f), w(c.cout * c.cin * c.kh * c.kw, 1.0f);
    std::vector<float> y(c.batch * c.cout * g.out_size());
    set_onednn_conv_mode(OnednnConvMode::off);
    EXPECT_FALSE(onednn_conv_forward(g, x.data(), w.data(), nullptr, y.data())) << describe(c);
    EXPECT_FALSE(onednn_conv_backward_x(g, y.data(), w.data(), x.data())) << describe(c);
    set_onednn_conv_mode(OnednnConvMode::forced);
    if (k != 0) {
      EXPECT_FALSE(onednn_conv_forward(g, x.data(), w.data(), nullptr, y.data())) << describe(c);
      EXPECT_FALSE(onednn_conv_backward_x(g, y.data(), w.data(), x.data())) << describe(c);
    }
  }
}

// The fused conv -> bias -> relu -> 2x2 max-pool block on this route (conv_gemm_pool.hpp):
// equal bit for bit to conv_forward then relu and the pool done here, and within rounding
// of the double sums; odd output rows and columns (the last one dropped by the pool), two
// part sizes, the route named.
TEST_F(OnednnConv, FusedReluPoolGivesTheUnfusedFloats) {
  const std::vector<Case2> cases = {
      {11, 32, 64, 1, 14, 14, 3, 3, 1, 1, 1, 1, 1, 1},  // the CNN's second block
      {12, 17, 21, 1, 9, 11, 3, 3, 1, 1, 0, 0, 1, 1},   // 7x9 output
  };
  for (const Case2& c : cases) {
    const ConvGeom g = geom2(c);
    ASSERT_TRUE(conv_relu_pool_fusable(g)) << describe(c);
    const auto x = rnd(c.batch * c.cin * c.h * c.w, 31), w = rnd(c.cout * c.cin * c.kh * c.kw, 32), b = rnd(c.cout, 33);
    std::vector<double> y, unused;
    reference(c, g, x, w, b, std::vector<double>(c.batch * c.cout * g.out_size(), 0.0), y, unused);
    const auto xf = cast<float>(x), wf = cast<float>(w), bf = cast<float>(b);
    const std::size_t oh = g.out[1], ow = g.out[2], py = oh / 2, px = ow / 2;
    std::vector<float> conv(c.batch * c.cout * g.out_size()), fused(c.batch * c.cout * py * px, -1.0f);
    std::vector<float> want(fused.size());
    std::vector<double> want64(fused.size());
    conv_forward(g, xf.data(), wf.data(), bf.data(), conv.data());
    reset_conv_forward_routes();
    conv_relu_pool_forward(g, xf.data(), wf.data(), bf.data(), fused.data());
#if TENSOR_HAVE_ONEDNN
    EXPECT_EQ(conv_forward_routes(), "onednn jit + relu + max-pool 2x2 [" + std::to_string(c.cin) + "->" +
                                         std::to_string(c.cout) + " 3x3]");
#endif
    for (std::size_t p = 0; p < c.batch * c.cout; ++p)
      for (std::size_t i = 0; i < py; ++i)
        for (std::size_t j = 0; j < px; ++j) {
          float m = 0.0f;
          double m64 = 0.0;
          for (std::size_t a = 0; a < 2; ++a)
            for (std::size_t e = 0; e < 2; ++e) {
              const std::size_t at = p * oh * ow + (2 * i + a) * ow + 2 * j + e;
              m = std::max(m, conv[at]);
              m64 = std::max(m64, y[at]);
            }
          want[(p * py + i) * px + j] = m;
          want64[(p * py + i) * px + j] = m64;
        }
    EXPECT_EQ(fused, want) << describe(c);
    expect_close(fused, want64, 1e-4 * std::sqrt(static_cast<double>(c.cin * 9)), "fused " + describe(c));
  }
}

}  // namespace
}  // namespace tensor::cpu::nn::test
