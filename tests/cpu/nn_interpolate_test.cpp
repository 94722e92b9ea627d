// interpolate against a per-pixel reference written from module-ops.md §2.7/§6.8 (a 2-D sum
// over taps, not the kernel's separable tables), backward against central differences (f64),
// E22-E30, and embedding_backward (E31 and an out-of-range index).
#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "backends/cpu/nn/interpolate.hpp"
#include "nn_test_util.hpp"
#include "tensor/error.hpp"

namespace tensor::cpu::nn::test {
namespace {

using I = std::int64_t;
using tensor::nn::InterpolateMode;
using tensor::nn::InterpolateOptions;

double keys(double x) {
  const double a = -0.75, t = std::fabs(x);
  if (t <= 1) return (a + 2) * t * t * t - (a + 3) * t * t + 1;
  if (t < 2) return a * t * t * t - 5 * a * t * t + 8 * a * t - 4 * a;
  return 0;
}

// (index, weight) pairs of output `o` along an axis.
std::vector<std::pair<I, double>> taps(I o, I in, I out, const InterpolateOptions& opt) {
  const double scale = static_cast<double>(in) / static_cast<double>(out);
  const double src_ac = out > 1 ? static_cast<double>(o) * static_cast<double>(in - 1) / static_cast<double>(out - 1) : 0.0;
  const double src_hp = (static_cast<double>(o) + 0.5) * scale - 0.5;
  switch (opt.mode) {
    case InterpolateMode::Nearest: return {{std::min<I>(static_cast<I>(std::floor(static_cast<double>(o * in) / static_cast<double>(out))), in - 1), 1.0}};
    case InterpolateMode::NearestExact:
      return {{std::min<I>(static_cast<I>(std::floor((static_cast<double>(o) + 0.5) * static_cast<double>(in) / static_cast<double>(out))), in - 1), 1.0}};
    case InterpolateMode::Bilinear: {
      const double src = opt.align_corners ? src_ac : std::max(0.0, src_hp);
      const I i0 = static_cast<I>(src);
      const I step = i0 < in - 1 ? 1 : 0;
      const double lam = src - static_cast<double>(i0);
      return {{i0, 1 - lam}, {i0 + step, lam}};
    }
    default: {
      const double src = opt.align_corners ? src_ac : src_hp;
      const I i0 = static_cast<I>(std::floor(src));
      std::vector<std::pair<I, double>> t;
      for (I k = -1; k <= 2; ++k) t.push_back({std::clamp<I>(i0 + k, 0, in - 1), keys(src - static_cast<double>(i0 + k))});
      return t;
    }
  }
}

std::vector<double> ref_interp(const std::vector<double>& x, I planes, I H, I W, I OH, I OW, const InterpolateOptions& o) {
  std::vector<double> y;
  for (I p = 0; p < planes; ++p)
    for (I oh = 0; oh < OH; ++oh)
      for (I ow = 0; ow < OW; ++ow) {
        double s = 0;
        for (auto [ih, wh] : taps(oh, H, OH, o))
          for (auto [iw, ww] : taps(ow, W, OW, o)) s += wh * ww * x[static_cast<std::size_t>((p * H + ih) * W + iw)];
        y.push_back(s);
      }
  return y;
}

template <class T>
std::vector<double> run(const std::vector<double>& x, I planes, I H, I W, I OH, I OW, const InterpolateOptions& o) {
  const auto g = interpolate_geom("interpolate", Shape{1, static_cast<std::size_t>(planes), static_cast<std::size_t>(H), static_cast<std::size_t>(W)}, {OH, OW}, o);
  const auto xt = cast<T>(x);
  std::vector<T> y(static_cast<std::size_t>(planes * OH * OW));
  interpolate_forward(g, xt.data(), y.data());
  return {y.begin(), y.end()};
}

TEST(NnInterpolate, AllModesMatchPerPixelReferenceAndFiniteDifferences) {
  const I planes = 2, H = 5, W = 4;
  const auto x = rnd(static_cast<std::size_t>(planes * H * W), 51);
  for (InterpolateMode m : {InterpolateMode::Nearest, InterpolateMode::NearestExact, InterpolateMode::Bilinear, InterpolateMode::Bicubic})
    for (bool ac : {false, true})
      for (auto [OH, OW] : {std::pair<I, I>{5, 4}, {9, 3}, {2, 11}, {1, 1}, {13, 8}}) {
        const InterpolateOptions o{m, ac};
        const std::string what = "mode " + std::to_string(static_cast<int>(m)) + (ac ? " ac" : "") + " -> " +
                                 std::to_string(OH) + "x" + std::to_string(OW);
        const auto want = ref_interp(x, planes, H, W, OH, OW, o);
        expect_close(run<double>(x, planes, H, W, OH, OW, o), want, 1e-12, what);
        expect_close(run<float>(x, planes, H, W, OH, OW, o), want, 1e-5, what);
        const auto g = interpolate_geom("interpolate", Shape{1, 2, 5, 4}, {OH, OW}, o);
        const auto r = rnd(want.size(), 52);
        std::vector<double> dx(x.size());
        interpolate_backward(g, r.data(), dx.data());
        expect_close(dx, numeric_grad(x, [&](const auto& v) { return dot(r, run<double>(v, planes, H, W, OH, OW, o)); }),
                     1e-6, "grad " + what);
      }
}

// 1-D along the width: [1, 1, 1, n].
std::vector<double> line(const std::vector<double>& x, I out, InterpolateMode m, bool ac) {
  return run<float>(x, 1, 1, static_cast<I>(x.size()), 1, out, InterpolateOptions{m, ac});
}
std::vector<double> picked(I in, I out, InterpolateMode m) {
  std::vector<double> x(static_cast<std::size_t>(in));
  for (I i = 0; i < in; ++i) x[static_cast<std::size_t>(i)] = static_cast<double>(i);
  return line(x, out, m, false);
}

TEST(NnInterpolate, E22NearestVsNearestExactUpsampling) {
  expect_close(picked(3, 5, InterpolateMode::Nearest), std::vector<double>{0, 0, 1, 1, 2}, 0, "E22 nearest");
  expect_close(picked(3, 5, InterpolateMode::NearestExact), std::vector<double>{0, 0, 1, 2, 2}, 0, "E22 exact");
}
TEST(NnInterpolate, E23NearestVsNearestExactDownsampling) {
  expect_close(picked(5, 3, InterpolateMode::Nearest), std::vector<double>{0, 1, 3}, 0, "E23 nearest");
  expect_close(picked(5, 3, InterpolateMode::NearestExact), std::vector<double>{0, 2, 4}, 0, "E23 exact");
}
TEST(NnInterpolate, E24NearestUsesExactIntegerIndex) {
  // §6.8: floor(dst * in / out) exactly. torch's float32 gives 2 at 6->74 dst 37 (exact 3);
  // at 18->66 dst 55 the exact value 15 is torch's too (f64 would give 14).
  EXPECT_EQ(picked(6, 74, InterpolateMode::Nearest)[37], 3);
  EXPECT_EQ(picked(18, 66, InterpolateMode::Nearest)[55], 15);
}
TEST(NnInterpolate, E25BilinearBorders) {
  expect_close(line({1, 2, 3, 4}, 8, InterpolateMode::Bilinear, false), std::vector<double>{1, 1.25, 1.75, 2.25, 2.75, 3.25, 3.75, 4}, 1e-6, "E25");
  expect_close(line({1, 2, 3, 4}, 8, InterpolateMode::Bilinear, true),
               std::vector<double>{1, 1.4286, 1.8571, 2.2857, 2.7143, 3.1429, 3.5714, 4}, 1e-4, "E25 ac");
}
TEST(NnInterpolate, E26NoAntialiasWhenDownsampling) {
  expect_close(line({0, 1, 2, 3, 4, 5, 6, 7}, 3, InterpolateMode::Bilinear, false), std::vector<double>{0.8333, 3.5, 6.1667}, 1e-4, "E26");
}
TEST(NnInterpolate, E27BicubicOvershootsWithClampedTaps) {
  expect_close(line({1, 2, 3, 4}, 8, InterpolateMode::Bicubic, false),
               std::vector<double>{0.8945, 1.1914, 1.668, 2.2969, 2.7031, 3.332, 3.8086, 4.1055}, 1e-4, "E27");
  expect_close(line({1, 2, 3, 4}, 8, InterpolateMode::Bicubic, true),
               std::vector<double>{1, 1.3411, 1.8003, 2.3294, 2.6706, 3.1997, 3.6589, 4}, 1e-4, "E27 ac");
}
TEST(NnInterpolate, E28BicubicNegativeLobes) {
  expect_close(line({0, 0, 1, 0, 0}, 10, InterpolateMode::Bicubic, false),
               std::vector<double>{0, -0.0352, -0.1055, 0.2617, 0.8789, 0.8789, 0.2617, -0.1055, -0.0352, 0}, 1e-4, "E28");
}
TEST(NnInterpolate, E29OutputSizeOne) {
  expect_close(line({1, 2, 3, 4}, 1, InterpolateMode::Bilinear, true), std::vector<double>{1}, 0, "E29 ac");
  expect_close(line({1, 2, 3, 4}, 1, InterpolateMode::Bilinear, false), std::vector<double>{2.5}, 1e-6, "E29");
  expect_close(line({1, 2, 3, 4}, 1, InterpolateMode::Nearest, false), std::vector<double>{1}, 0, "E29 nearest");
}
TEST(NnInterpolate, E30NearestBackwardAccumulates) {
  const auto g = interpolate_geom("interpolate", Shape{1, 1, 1, 2}, {1, 5}, InterpolateOptions{});
  const std::vector<float> dy(5, 1.0f);
  std::vector<float> dx(2);
  interpolate_backward(g, dy.data(), dx.data());
  expect_close(dx, std::vector<double>{3, 2}, 0, "E30");
}

TEST(NnEmbedding, E31BackwardAddsRepeatedIndices) {
  const std::vector<I> idx{0, 2, 0};
  const std::vector<float> dy{1, 1, 2, 2, 3, 3};
  std::vector<float> dw(6, 9.0f);
  embedding_backward(3, 2, 3, idx.data(), dy.data(), dw.data());
  expect_close(dw, std::vector<double>{4, 4, 0, 0, 2, 2}, 0, "E31");
}
TEST(NnEmbedding, OutOfRangeIndexIsIndexErrorAndWritesNothing) {
  const std::vector<I> idx{0, 3};
  const std::vector<double> dy{1, 1, 2, 2};
  std::vector<double> dw(6, 9.0);
  EXPECT_THROW(embedding_backward(3, 2, 2, idx.data(), dy.data(), dw.data()), IndexError);
  const std::vector<I> neg{-1};
  try {
    embedding_backward(3, 2, 1, neg.data(), dy.data(), dw.data());
    ADD_FAILURE() << "no IndexError";
  } catch (const IndexError& e) {
    EXPECT_NE(std::string(e.what()).find("[embedding_backward] index out of range"), std::string::npos) << e.what();
  }
  expect_close(dw, std::vector<double>(6, 9.0), 0, "dw untouched");
}

}  // namespace
}  // namespace tensor::cpu::nn::test
