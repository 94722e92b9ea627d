// Pooling kernels against nested-loop references written here (options grid), gradients
// against central differences (f64), and module-ops.md E8-E21.
#include <cmath>
#include <limits>
#include <vector>

#include "backends/cpu/nn/pool.hpp"
#include "nn_test_util.hpp"

namespace tensor::cpu::nn::test {
namespace {

using I = std::int64_t;
using tensor::nn::AvgPoolOptions;
using tensor::nn::MaxPoolOptions;
const double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();

// torch's output size, written out: ceil mode drops a last window starting in the right padding.
I torch_out(I in, I k, I s, I p, I d, bool ceil) {
  const double span = static_cast<double>(in + 2 * p - d * (k - 1) - 1);
  I o = static_cast<I>(ceil ? std::ceil(span / static_cast<double>(s)) : std::floor(span / static_cast<double>(s))) + 1;
  if (ceil && (o - 1) * s >= in + p) --o;
  return o;
}

struct Ref {
  std::vector<double> y;
  std::vector<I> idx;
};
Ref ref_max(const std::vector<double>& x, I planes, I H, I W, const MaxPoolOptions<2>& o) {
  const I OH = torch_out(H, o.kernel_size[0], o.stride[0], o.padding[0], o.dilation[0], o.ceil_mode);
  const I OW = torch_out(W, o.kernel_size[1], o.stride[1], o.padding[1], o.dilation[1], o.ceil_mode);
  Ref r;
  for (I p = 0; p < planes; ++p)
    for (I oh = 0; oh < OH; ++oh)
      for (I ow = 0; ow < OW; ++ow) {
        double best = -kInf;
        I at = -1;
        bool nan = false;
        for (I a = 0; a < o.kernel_size[0]; ++a)
          for (I b = 0; b < o.kernel_size[1]; ++b) {
            const I h = oh * o.stride[0] - o.padding[0] + a * o.dilation[0];
            const I w = ow * o.stride[1] - o.padding[1] + b * o.dilation[1];
            if (h < 0 || h >= H || w < 0 || w >= W) continue;
            const double v = x[static_cast<std::size_t>((p * H + h) * W + w)];
            if (nan) continue;
            if (std::isnan(v)) {
              nan = true;
              best = v;
              at = h * W + w;
            } else if (at < 0 || v > best) {
              best = v;
              at = h * W + w;
            }
          }
        r.y.push_back(best);
        r.idx.push_back(at);
      }
  return r;
}

std::vector<double> ref_avg(const std::vector<double>& x, I planes, I H, I W, const AvgPoolOptions<2>& o) {
  const I OH = torch_out(H, o.kernel_size[0], o.stride[0], o.padding[0], 1, o.ceil_mode);
  const I OW = torch_out(W, o.kernel_size[1], o.stride[1], o.padding[1], 1, o.ceil_mode);
  std::vector<double> y;
  for (I p = 0; p < planes; ++p)
    for (I oh = 0; oh < OH; ++oh)
      for (I ow = 0; ow < OW; ++ow) {
        double sum = 0;
        I valid = 0, padded = 0;
        for (I a = 0; a < o.kernel_size[0]; ++a)
          for (I b = 0; b < o.kernel_size[1]; ++b) {
            const I h = oh * o.stride[0] - o.padding[0] + a, w = ow * o.stride[1] - o.padding[1] + b;
            // A tap inside the padded input counts toward count_include_pad's divisor.
            if (h < H + o.padding[0] && w < W + o.padding[1]) ++padded;
            if (h < 0 || h >= H || w < 0 || w >= W) continue;
            sum += x[static_cast<std::size_t>((p * H + h) * W + w)];
            ++valid;
          }
        y.push_back(sum / static_cast<double>(o.count_include_pad ? padded : valid));
      }
  return y;
}

std::vector<double> ref_adaptive(const std::vector<double>& x, I planes, const std::array<I, 3>& in,
                                 const std::array<I, 3>& out) {
  std::vector<double> y;
  auto lo = [](I i, I n, I m) { return static_cast<I>(std::floor(static_cast<double>(i * n) / static_cast<double>(m))); };
  auto hi = [](I i, I n, I m) { return static_cast<I>(std::ceil(static_cast<double>((i + 1) * n) / static_cast<double>(m))); };
  for (I p = 0; p < planes; ++p)
    for (I a = 0; a < out[0]; ++a)
      for (I b = 0; b < out[1]; ++b)
        for (I c = 0; c < out[2]; ++c) {
          double s = 0;
          I n = 0;
          for (I i = lo(a, in[0], out[0]); i < hi(a, in[0], out[0]); ++i)
            for (I j = lo(b, in[1], out[1]); j < hi(b, in[1], out[1]); ++j)
              for (I k = lo(c, in[2], out[2]); k < hi(c, in[2], out[2]); ++k, ++n)
                s += x[static_cast<std::size_t>(((p * in[0] + i) * in[1] + j) * in[2] + k)];
          y.push_back(s / static_cast<double>(n));
        }
  return y;
}

template <class T>
Ref run_max(const Pool2dGeom& g, const std::vector<double>& x) {
  const auto xt = cast<T>(x);
  std::vector<T> y(g.planes * g.out_h * g.out_w);
  std::vector<I> idx(y.size());
  max_pool2d_forward(g, xt.data(), y.data(), idx.data());
  return {std::vector<double>(y.begin(), y.end()), idx};
}
template <class T>
std::vector<double> run_avg(const Pool2dGeom& g, const std::vector<double>& x) {
  const auto xt = cast<T>(x);
  std::vector<T> y(g.planes * g.out_h * g.out_w);
  avg_pool2d_forward(g, xt.data(), y.data());
  return {y.begin(), y.end()};
}
template <class T>
std::vector<double> run_adaptive(const AdaptiveGeom& g, const std::vector<double>& x) {
  const auto xt = cast<T>(x);
  std::vector<T> y(g.planes * g.out[0] * g.out[1] * g.out[2]);
  adaptive_avg_pool_forward(g, xt.data(), y.data());
  return {y.begin(), y.end()};
}

std::string str(const std::array<I, 2>& a) { return "[" + std::to_string(a[0]) + "," + std::to_string(a[1]) + "]"; }

TEST(NnPool, MaxPool2dMatchesLoopsAndFiniteDifferences) {
  const I H = 7, W = 6, planes = 6;
  const auto x = rnd(static_cast<std::size_t>(planes * H * W), 21);
  int cases = 0;
  for (I k : {2, 3})
    for (I s : {1, 2, 3})
      for (I p : {0, 1})
        for (I d : {1, 2})
          for (bool ceil : {false, true}) {
            MaxPoolOptions<2> o{{k, k - 1 + (k == 2)}, {s, 1 + (s == 1)}, {p, 0}, {d, 1}, ceil};
            if (2 * o.padding[0] > o.dilation[0] * (o.kernel_size[0] - 1) + 1) continue;
            const auto g = max_pool_geom<2>("max_pool2d", Shape{2, 3, 7, 6}, o);
            const std::string what = "k" + str(o.kernel_size) + " s" + str(o.stride) + " p" + str(o.padding) +
                                     " d" + str(o.dilation) + (ceil ? " ceil" : "");
            const Ref want = ref_max(x, planes, H, W, o);
            for (const Ref& got : {run_max<double>(g, x), run_max<float>(g, x)}) {
              expect_close(got.y, want.y, 1e-6, what);
              EXPECT_EQ(got.idx, want.idx) << what;
            }
            // Gradient: distinct random values, so the max is locally smooth.
            const auto r = rnd(want.y.size(), 22);
            std::vector<double> dx(x.size());
            max_pool2d_backward(g, r.data(), want.idx.data(), dx.data());
            expect_close(dx, numeric_grad(x, [&](const auto& v) { return dot(r, run_max<double>(g, v).y); }), 1e-6,
                         "grad " + what);
            ++cases;
          }
  EXPECT_GT(cases, 30);
}

// The 2x2 stride-2 fast path (the CNN's pool) against the loops: odd sides (a dropped last
// row / column), ties, NaNs, infinities, with and without indices, and enough planes to
// run on threads.
TEST(NnPool, MaxPool2x2Stride2MatchesLoops) {
  for (const auto& [H, W, planes] : {std::array<I, 3>{7, 5, 3}, std::array<I, 3>{14, 14, 256}, std::array<I, 3>{2, 9, 2}}) {
    auto x = rnd(static_cast<std::size_t>(planes * H * W), 23);
    for (std::size_t i = 0; i < x.size(); ++i) {
      if (i % 11 == 3) x[i] = kNaN;
      if (i % 13 == 5) x[i] = -kInf;
      if (i % 17 == 7) x[i] = kInf;
      if (i % 5 == 1) x[i] = x[i - 1];  // ties with the left neighbour
      if (i % 19 == 0 && i >= static_cast<std::size_t>(W)) x[i] = x[i - static_cast<std::size_t>(W)];  // with the row above
    }
    const MaxPoolOptions<2> o{{2, 2}, {2, 2}, {0, 0}, {1, 1}, false};
    const auto g = max_pool_geom<2>("max_pool2d", Shape{static_cast<std::size_t>(planes), 1, static_cast<std::size_t>(H),
                                                         static_cast<std::size_t>(W)},
                                    o);
    const std::string what = std::to_string(H) + "x" + std::to_string(W) + " x" + std::to_string(planes);
    const Ref want = ref_max(x, planes, H, W, o);
    for (const Ref& got : {run_max<double>(g, x), run_max<float>(g, x)}) {
      expect_close(got.y, want.y, 1e-6, what);
      EXPECT_EQ(got.idx, want.idx) << what;
    }
    const auto xf = cast<float>(x);
    std::vector<float> y(want.y.size());
    max_pool2d_forward(g, xf.data(), y.data(), static_cast<I*>(nullptr));
    expect_close(std::vector<double>(y.begin(), y.end()), want.y, 1e-6, what + " without indices");
    // int32 indices (the default int dtype): the same positions, the same gradient.
    std::vector<std::int32_t> i32(want.idx.size());
    max_pool2d_forward(g, xf.data(), y.data(), i32.data());
    EXPECT_EQ(std::vector<I>(i32.begin(), i32.end()), want.idx) << what << " int32";
    const auto dy = cast<float>(rnd(want.y.size(), 24));
    std::vector<float> dx64(xf.size(), 5.0f), dx32(xf.size(), 6.0f);
    max_pool2d_backward(g, dy.data(), want.idx.data(), dx64.data());
    max_pool2d_backward(g, dy.data(), i32.data(), dx32.data());
    EXPECT_EQ(dx32, dx64) << what;
  }
}

TEST(NnPool, MaxPool1dRunsAsHeightOne) {
  const auto g = max_pool_geom<1>("max_pool1d", Shape{1, 2, 9}, MaxPoolOptions<1>{{3}, {2}, {1}, {2}, true});
  EXPECT_EQ(g.in_h, 1u);
  EXPECT_EQ(g.out_w, static_cast<std::size_t>(torch_out(9, 3, 2, 1, 2, true)));
  const auto x = rnd(18, 23);
  const Ref want = ref_max(x, 2, 1, 9, MaxPoolOptions<2>{{1, 3}, {1, 2}, {0, 1}, {1, 2}, true});
  const Ref got = run_max<double>(g, x);
  expect_close(got.y, want.y, 0, "max_pool1d");
  EXPECT_EQ(got.idx, want.idx);
}

TEST(NnPool, AvgPool2dMatchesLoopsAndFiniteDifferences) {
  const I H = 7, W = 6, planes = 4;
  const auto x = rnd(static_cast<std::size_t>(planes * H * W), 24);
  for (I k : {2, 3})
    for (I s : {1, 2, 3})
      for (I p : {0, 1})
        for (bool cip : {false, true})
          for (bool ceil : {false, true}) {
            AvgPoolOptions<2> o{{k, 5 - k}, {s, 2}, {p, 1}, cip, ceil};
            const auto g = avg_pool_geom<2>("avg_pool2d", Shape{2, 2, 7, 6}, o);
            const std::string what = "k" + str(o.kernel_size) + " s" + str(o.stride) + " p" + str(o.padding) +
                                     (cip ? " cip" : "") + (ceil ? " ceil" : "");
            const auto want = ref_avg(x, planes, H, W, o);
            expect_close(run_avg<double>(g, x), want, 1e-12, what);
            expect_close(run_avg<float>(g, x), want, 1e-5, what);
            const auto r = rnd(want.size(), 25);
            std::vector<double> dx(x.size());
            avg_pool2d_backward(g, r.data(), dx.data());
            expect_close(dx, numeric_grad(x, [&](const auto& v) { return dot(r, run_avg<double>(g, v)); }), 1e-6,
                         "grad " + what);
          }
}

// Boxes one output column wide over long rows (global pooling and [*, *, 1] outputs)
// take the contiguous double-sum path; the others the row-of-boxes path.
TEST(NnPool, AdaptiveAvgPoolOverLongRowsMatchesLoops) {
  const std::array<I, 3> in{2, 9, 40};
  const auto x = rnd(static_cast<std::size_t>(3 * 2 * 9 * 40), 28);
  for (const std::array<I, 3>& out : {std::array<I, 3>{1, 1, 1}, std::array<I, 3>{2, 3, 1}, std::array<I, 3>{1, 2, 1},
                                      std::array<I, 3>{2, 4, 7}, std::array<I, 3>{1, 1, 2}}) {
    const auto g = adaptive_avg_pool_geom<3>("adaptive_avg_pool3d", Shape{1, 3, 2, 9, 40}, out);
    const auto want = ref_adaptive(x, 3, in, out);
    expect_close(run_adaptive<double>(g, x), want, 1e-12, "adaptive3d long rows");
    expect_close(run_adaptive<float>(g, x), want, 1e-5, "adaptive3d long rows f32");
  }
}

TEST(NnPool, AdaptiveAvgPoolMatchesLoopsAndFiniteDifferences) {
  const std::array<I, 3> in{3, 5, 7};
  const auto x = rnd(static_cast<std::size_t>(2 * 3 * 5 * 7), 26);
  for (const std::array<I, 3>& out : {std::array<I, 3>{1, 1, 1}, std::array<I, 3>{2, 3, 4}, std::array<I, 3>{5, 7, 3},
                                      std::array<I, 3>{3, 5, 7}, std::array<I, 3>{4, 2, 9}}) {
    const auto g = adaptive_avg_pool_geom<3>("adaptive_avg_pool3d", Shape{1, 2, 3, 5, 7}, out);
    const auto want = ref_adaptive(x, 2, in, out);
    expect_close(run_adaptive<double>(g, x), want, 1e-12, "adaptive3d");
    expect_close(run_adaptive<float>(g, x), want, 1e-5, "adaptive3d f32");
    const auto r = rnd(want.size(), 27);
    std::vector<double> dx(x.size());
    adaptive_avg_pool_backward(g, r.data(), dx.data());
    expect_close(dx, numeric_grad(x, [&](const auto& v) { return dot(r, run_adaptive<double>(g, v)); }), 1e-6,
                 "adaptive grad");
  }
  const auto g2 = adaptive_avg_pool_geom<2>("adaptive_avg_pool2d", Shape{2, 3, 5, 7}, std::array<I, 2>{3, 4});
  EXPECT_EQ(g2.in[0], 1u);
  expect_close(run_adaptive<double>(g2, x), ref_adaptive(x, 6, {1, 5, 7}, {1, 3, 4}), 1e-12, "adaptive2d");
}

// ---- module-ops.md edge cases ----

std::vector<double> max1d(const std::vector<double>& x, MaxPoolOptions<1> o, std::vector<I>* idx = nullptr) {
  const auto g = max_pool_geom<1>("max_pool1d", Shape{1, 1, x.size()}, o);
  Ref r = run_max<float>(g, x);
  if (idx) *idx = r.idx;
  return r.y;
}
std::vector<double> avg1d(const std::vector<double>& x, AvgPoolOptions<1> o) {
  return run_avg<float>(avg_pool_geom<1>("avg_pool1d", Shape{1, 1, x.size()}, o), x);
}

TEST(NnPool, E8CeilModeDropsWindowStartingInRightPadding) {
  expect_close(max1d({1, 2, 3, 4, 5}, {{2}, {2}, {1}, {1}, true}), std::vector<double>{1, 3, 5}, 0, "E8");
}
TEST(NnPool, E9CeilModeKeepsPartialWindows) {
  std::vector<double> x(36);
  for (std::size_t i = 0; i < 36; ++i) x[i] = static_cast<double>(i + 1);
  const auto g = max_pool_geom<2>("max_pool2d", Shape{1, 1, 6, 6}, MaxPoolOptions<2>{{3, 3}, {2, 2}, {0, 0}, {1, 1}, true});
  expect_close(run_max<float>(g, x).y, std::vector<double>{15, 17, 18, 27, 29, 30, 33, 35, 36}, 0, "E9");
}
TEST(NnPool, E10AvgPoolCeilWithPadding) {
  expect_close(avg1d({1, 2, 3, 4, 5}, {{2}, {2}, {1}, true, true}), std::vector<double>{0.5, 2.5, 4.5}, 1e-6, "E10 cip");
  expect_close(avg1d({1, 2, 3, 4, 5}, {{2}, {2}, {1}, false, true}), std::vector<double>{1, 2.5, 4.5}, 1e-6, "E10");
}
TEST(NnPool, E11DivisorCountsPaddingNotCeilOverhang) {
  expect_close(avg1d({1, 2, 3, 4, 5, 6}, {{3}, {2}, {1}, true, true}), std::vector<double>{1, 3, 5, 3}, 1e-6, "E11 cip");
  expect_close(avg1d({1, 2, 3, 4, 5, 6}, {{3}, {2}, {1}, false, true}), std::vector<double>{1.5, 3, 5, 6}, 1e-6, "E11");
}
TEST(NnPool, E12AvgPool2dBorderDivisors) {
  const std::vector<double> x{1, 2, 3, 4, 5, 6, 7, 8, 9};
  const auto gc = avg_pool_geom<2>("avg_pool2d", Shape{1, 1, 3, 3}, AvgPoolOptions<2>{{3, 3}, {1, 1}, {1, 1}, true, false});
  expect_close(run_avg<float>(gc, x), std::vector<double>{1.3333, 2.3333, 1.7778, 3, 5, 3.6667, 2.6667, 4.3333, 3.1111},
               1e-4, "E12 cip");
  const auto g = avg_pool_geom<2>("avg_pool2d", Shape{1, 1, 3, 3}, AvgPoolOptions<2>{{3, 3}, {1, 1}, {1, 1}, false, false});
  expect_close(run_avg<float>(g, x), std::vector<double>{3, 3.5, 4, 4.5, 5, 5.5, 6, 6.5, 7}, 1e-6, "E12");
}
TEST(NnPool, E13MaxPoolPaddingIsMinusInfinity) {
  expect_close(max1d({-5, -3, -4}, {{2}, {1}, {1}, {1}, false}), std::vector<double>{-5, -3, -3, -4}, 0, "E13");
}
TEST(NnPool, E14IndicesAreFlatInUnpaddedPlane) {
  std::vector<double> x(16);
  for (std::size_t i = 0; i < 16; ++i) x[i] = -static_cast<double>(i);
  const auto g = max_pool_geom<2>("max_pool2d", Shape{1, 1, 4, 4}, MaxPoolOptions<2>{{2, 2}, {2, 2}, {1, 1}, {1, 1}, false});
  const Ref r = run_max<float>(g, x);
  expect_close(r.y, std::vector<double>{0, -1, -3, -4, -5, -7, -12, -13, -15}, 0, "E14");
  EXPECT_EQ(r.idx, (std::vector<I>{0, 1, 3, 4, 5, 7, 12, 13, 15}));
}
TEST(NnPool, E15TiesTakeFirstAndBackwardAccumulatesOverlaps) {
  std::vector<I> idx;
  expect_close(max1d({1, 3, 3, 2}, {{2}, {1}, {0}, {1}, false}, &idx), std::vector<double>{3, 3, 3}, 0, "E15");
  EXPECT_EQ(idx, (std::vector<I>{1, 1, 2}));
  const auto g = max_pool_geom<1>("max_pool1d", Shape{1, 1, 4}, MaxPoolOptions<1>{{2}, {1}, {0}, {1}, false});
  const std::vector<float> dy{1, 1, 1};
  std::vector<float> dx(4, 7.0f);
  max_pool2d_backward(g, dy.data(), idx.data(), dx.data());
  expect_close(dx, std::vector<double>{0, 2, 1, 0}, 0, "E15 grad");
}
TEST(NnPool, E16NaNPropagatesWithItsIndex) {
  std::vector<I> idx;
  expect_close(max1d({1, kNaN, 3}, {{2}, {1}, {0}, {1}, false}, &idx), std::vector<double>{kNaN, kNaN}, 0, "E16");
  EXPECT_EQ(idx, (std::vector<I>{1, 1}));
  // A NaN later in the window than a larger value still wins, and the first NaN keeps the index.
  expect_close(max1d({5, kNaN, kNaN}, {{3}, {1}, {0}, {1}, false}, &idx), std::vector<double>{kNaN}, 0, "NaN late");
  EXPECT_EQ(idx, (std::vector<I>{1}));
}
TEST(NnPool, E17DilatedMaxPool) {
  expect_close(max1d({0, 1, 2, 3, 4, 5, 6}, {{3}, {1}, {0}, {2}, false}), std::vector<double>{4, 5, 6}, 0, "E17");
}
std::vector<double> adaptive1d(const std::vector<double>& x, I out) {
  return run_adaptive<float>(adaptive_avg_pool_geom<1>("adaptive_avg_pool1d", Shape{1, 1, x.size()}, std::array<I, 1>{out}), x);
}
TEST(NnPool, E18AdaptiveNotDivisible) {
  expect_close(adaptive1d({1, 2, 3, 4, 5}, 3), std::vector<double>{1.5, 3, 4.5}, 1e-6, "E18");
}
TEST(NnPool, E19AdaptiveUpsampling) {
  expect_close(adaptive1d({1, 2, 3}, 5), std::vector<double>{1, 1.5, 2, 2.5, 3}, 1e-6, "E19");
}
TEST(NnPool, E20AdaptiveBackward) {
  const auto g = adaptive_avg_pool_geom<1>("adaptive_avg_pool1d", Shape{1, 1, 5}, std::array<I, 1>{3});
  const std::vector<float> dy{1, 1, 1};
  std::vector<float> dx(5);
  adaptive_avg_pool_backward(g, dy.data(), dx.data());
  expect_close(dx, std::vector<double>{0.5, 0.8333, 0.3333, 0.8333, 0.5}, 1e-4, "E20");
}
TEST(NnPool, E21AdaptiveAvgPool2d) {
  const auto g = adaptive_avg_pool_geom<2>("adaptive_avg_pool2d", Shape{1, 1, 3, 3}, std::array<I, 2>{2, 2});
  expect_close(run_adaptive<float>(g, {1, 2, 3, 4, 5, 6, 7, 8, 9}), std::vector<double>{3, 4, 6, 7}, 1e-6, "E21");
}

}  // namespace
}  // namespace tensor::cpu::nn::test
