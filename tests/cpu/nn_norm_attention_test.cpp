// layer_norm and fused attention against naive references written here (attention: the
// full-score-matrix composition of module-ops.md §2.13), layer_norm's backward against
// central differences (f64), and module-ops.md E33, E34, E38-E41.
#include <algorithm>
#include <string>
#include <utility>
#include <cmath>
#include <limits>
#include <vector>

#include "backends/cpu/nn/attention.hpp"
#include "backends/cpu/nn/norm.hpp"
#include "nn_test_util.hpp"

namespace tensor::cpu::nn::test {
namespace {

using I = std::int64_t;

std::vector<double> ref_layer_norm(const std::vector<double>& x, std::size_t rows, std::size_t d,
                                   const std::vector<double>& gamma, const std::vector<double>* beta, double eps) {
  std::vector<double> y(x.size());
  for (std::size_t r = 0; r < rows; ++r) {
    double mu = 0, var = 0;
    for (std::size_t i = 0; i < d; ++i) mu += x[r * d + i] / static_cast<double>(d);
    for (std::size_t i = 0; i < d; ++i) var += (x[r * d + i] - mu) * (x[r * d + i] - mu) / static_cast<double>(d);
    for (std::size_t i = 0; i < d; ++i)
      y[r * d + i] = (x[r * d + i] - mu) / std::sqrt(var + eps) * gamma[i] + (beta ? (*beta)[i] : 0.0);
  }
  return y;
}

template <class T>
std::vector<double> run_ln(const std::vector<double>& x, std::size_t rows, std::size_t d, const std::vector<double>& gm,
                           const std::vector<double>* beta, double eps) {
  const auto xt = cast<T>(x), gt = cast<T>(gm);
  const auto bt = beta ? cast<T>(*beta) : std::vector<T>{};
  std::vector<T> y(x.size());
  layer_norm_forward(rows, d, xt.data(), gt.data(), beta ? bt.data() : nullptr, eps, y.data(), nullptr, nullptr);
  return {y.begin(), y.end()};
}

TEST(NnNorm, LayerNormMatchesLoopsAndFiniteDifferences) {
  for (std::size_t d : {1u, 5u, 64u, 1024u}) {
    const std::size_t rows = d == 1024 ? 3 : 7;
    const auto x = rnd(rows * d, 31), gm = rnd(d, 32), bt = rnd(d, 33);
    for (const std::vector<double>* beta : {static_cast<const std::vector<double>*>(nullptr), &bt}) {
      const auto want = ref_layer_norm(x, rows, d, gm, beta, 1e-5);
      expect_close(run_ln<double>(x, rows, d, gm, beta, 1e-5), want, 1e-10, "ln f64");
      expect_close(run_ln<float>(x, rows, d, gm, beta, 1e-5), want, 1e-4, "ln f32");
    }
    if (d > 64) continue;
    const auto r = rnd(rows * d, 34);
    std::vector<double> dx(x.size()), dg(d), db(d), mean(rows), rstd(rows), y(x.size());
    layer_norm_backward(rows, d, x.data(), gm.data(), r.data(), 1e-5, dx.data(), dg.data(), db.data());
    expect_close(dx, numeric_grad(x, [&](const auto& v) { return dot(r, ref_layer_norm(v, rows, d, gm, &bt, 1e-5)); }),
                 1e-5, "ln dx");
    expect_close(dg, numeric_grad(gm, [&](const auto& v) { return dot(r, ref_layer_norm(x, rows, d, v, &bt, 1e-5)); }),
                 1e-5, "ln dgamma");
    expect_close(db, numeric_grad(bt, [&](const auto& v) { return dot(r, ref_layer_norm(x, rows, d, gm, &v, 1e-5)); }),
                 1e-5, "ln dbeta");
    layer_norm_forward(rows, d, x.data(), gm.data(), bt.data(), 1e-5, y.data(), mean.data(), rstd.data());
    double mu0 = 0;
    for (std::size_t i = 0; i < d; ++i) mu0 += x[i] / static_cast<double>(d);
    EXPECT_NEAR(mean[0], mu0, 1e-12);
  }
}

TEST(NnNorm, E33LayerNormUsesBiasedVariance) {
  const std::vector<float> x{1, 2, 3, 4}, g(4, 1.0f);
  std::vector<float> y(4);
  layer_norm_forward(1, 4, x.data(), g.data(), nullptr, 0.0, y.data(), nullptr, nullptr);
  expect_close(y, std::vector<double>{-1.3416, -0.4472, 0.4472, 1.3416}, 1e-4, "E33");
}

TEST(NnNorm, E34ConstantRowGradientIsOneOverSqrtEps) {
  const std::vector<float> x{5, 5, 5}, g(3, 1.0f), dy{1, 0, 0};
  std::vector<float> y(3), dx(3);
  layer_norm_forward(1, 3, x.data(), g.data(), nullptr, 1e-5, y.data(), nullptr, nullptr);
  expect_close(y, std::vector<double>{0, 0, 0}, 0, "E34 forward");
  layer_norm_backward(1, 3, x.data(), g.data(), dy.data(), 1e-5, dx.data(), nullptr, nullptr);
  expect_close(dx, std::vector<double>{210.8185, -105.4093, -105.4093}, 1e-5, "E34 grad");
}

// ---- attention ----

struct Att {
  std::size_t b = 1, h = 1, lq = 1, lk = 1, d = 1, dv = 1;
  std::vector<std::size_t> mask_bh, bias_bh;  // {B|1, H|1} or empty = none
  tensor::nn::AttentionModuleOptions o;
};

// burn's attention_fallback with the full [Lq, Lk] score matrix.
std::vector<double> ref_attention(const Att& a, const std::vector<double>& q, const std::vector<double>& k,
                                  const std::vector<double>& v, const std::vector<std::uint8_t>& mask,
                                  const std::vector<double>& bias) {
  const double scale = a.o.scale ? *a.o.scale : 1.0 / std::sqrt(static_cast<double>(a.d));
  std::vector<double> out(a.b * a.h * a.lq * a.dv, 0.0), s(a.lk);
  for (std::size_t b = 0; b < a.b; ++b)
    for (std::size_t h = 0; h < a.h; ++h)
      for (std::size_t i = 0; i < a.lq; ++i) {
        const std::size_t bh = b * a.h + h;
        for (std::size_t j = 0; j < a.lk; ++j) {
          double x = 0;
          for (std::size_t c = 0; c < a.d; ++c) x += q[(bh * a.lq + i) * a.d + c] * k[(bh * a.lk + j) * a.d + c];
          x *= scale;
          if (a.o.softcap) x = *a.o.softcap * std::tanh(x / *a.o.softcap);
          if (!a.mask_bh.empty()) {
            const std::size_t mb = a.mask_bh[0] == 1 ? 0 : b, mh = a.mask_bh[1] == 1 ? 0 : h;
            if (mask[((mb * a.mask_bh[1] + mh) * a.lq + i) * a.lk + j]) x = -INFINITY;
          }
          if (a.o.is_causal && static_cast<I>(j) > static_cast<I>(i) + static_cast<I>(a.lk) - static_cast<I>(a.lq))
            x = -INFINITY;
          if (!a.bias_bh.empty()) {
            const std::size_t bb = a.bias_bh[0] == 1 ? 0 : b, bhh = a.bias_bh[1] == 1 ? 0 : h;
            x += bias[((bb * a.bias_bh[1] + bhh) * a.lq + i) * a.lk + j];
          }
          s[j] = x;
        }
        double m = std::numeric_limits<double>::lowest();
        for (double x : s) m = std::max(m, x);
        double sum = 0;
        for (double& x : s) sum += (x = std::exp(x - m));
        sum = std::max(sum, std::numeric_limits<double>::min());
        for (std::size_t j = 0; j < a.lk; ++j)
          for (std::size_t c = 0; c < a.dv; ++c) out[(bh * a.lq + i) * a.dv + c] += s[j] / sum * v[(bh * a.lk + j) * a.dv + c];
      }
  return out;
}

template <class T>
std::vector<double> run_attention(const Att& a, const std::vector<double>& q, const std::vector<double>& k,
                                  const std::vector<double>& v, const std::vector<std::uint8_t>& mask,
                                  const std::vector<double>& bias) {
  const Shape ms = a.mask_bh.empty() ? Shape{} : Shape{a.mask_bh[0], a.mask_bh[1], a.lq, a.lk};
  const Shape bs = a.bias_bh.empty() ? Shape{} : Shape{a.bias_bh[0], a.bias_bh[1], a.lq, a.lk};
  const AttentionGeom g = attention_geom("attention", Shape{a.b, a.h, a.lq, a.d}, Shape{a.b, a.h, a.lk, a.d},
                                         Shape{a.b, a.h, a.lk, a.dv}, a.mask_bh.empty() ? nullptr : &ms,
                                         a.bias_bh.empty() ? nullptr : &bs, a.o);
  const auto qt = cast<T>(q), kt = cast<T>(k), vt = cast<T>(v), bt = cast<T>(bias);
  std::vector<T> out(a.b * a.h * a.lq * a.dv);
  attention_forward(g, qt.data(), kt.data(), vt.data(), a.mask_bh.empty() ? nullptr : mask.data(),
                    a.bias_bh.empty() ? nullptr : bt.data(), out.data());
  return {out.begin(), out.end()};
}

TEST(NnAttention, FusedMatchesFullScoreReferenceOverGrid) {
  int n = 0;
  for (auto [lq, lk] : {std::pair<std::size_t, std::size_t>{5, 7}, {70, 130}, {130, 70}, {64, 64}, {1, 200}})
    for (bool causal : {false, true})
      for (int variant = 0; variant < 4; ++variant) {
        Att a;
        a.b = 2;
        a.h = 3;
        a.lq = lq;
        a.lk = lk;
        a.d = variant == 3 ? 1 : 8;
        a.dv = 5;
        a.o.is_causal = causal;
        if (variant == 1) a.mask_bh = {2, 1};
        if (variant == 2) {
          a.bias_bh = {1, 3};
          a.o.scale = 0.7;
          a.mask_bh = {1, 1};
        }
        if (variant == 3) {
          a.o.softcap = 0.9;
          a.bias_bh = {2, 3};
        }
        const auto q = rnd(a.b * a.h * lq * a.d, 41), k = rnd(a.b * a.h * lk * a.d, 42),
                   v = rnd(a.b * a.h * lk * a.dv, 43), bias = rnd(a.b * a.h * lq * lk, 44);
        std::vector<std::uint8_t> mask(a.b * a.h * lq * lk);
        const auto mr = rnd(mask.size(), 45);
        // About a third masked, and some rows (every 11th query) fully masked.
        for (std::size_t i = 0; i < mask.size(); ++i) mask[i] = mr[i] < -0.33 || (i / lk) % 11 == 3;
        const auto want = ref_attention(a, q, k, v, mask, bias);
        expect_close(run_attention<double>(a, q, k, v, mask, bias), want, 1e-12, "attention f64");
        expect_close(run_attention<float>(a, q, k, v, mask, bias), want, 2e-5, "attention f32");
        ++n;
      }
  EXPECT_EQ(n, 40);
}

TEST(NnAttention, BackwardMatchesFiniteDifferences) {
  int variant = 0;
  for (auto [lq, lk] : {std::pair<std::size_t, std::size_t>{5, 7}, {7, 4}, {70, 80}})
    for (bool causal : {false, true}) {
      Att a;
      a.b = 2;
      a.h = 2;
      a.lq = lq;
      a.lk = lk;
      a.d = 3;
      a.dv = 2;
      a.o.is_causal = causal;
      a.mask_bh = {2, 1};
      a.bias_bh = variant % 2 == 0 ? std::vector<std::size_t>{1, 2} : std::vector<std::size_t>{2, 2};
      if (variant % 3 == 1) a.o.softcap = 0.8;
      if (variant % 3 == 2) a.o.scale = 1.3;
      ++variant;
      const auto q = rnd(a.b * a.h * lq * a.d, 46), k = rnd(a.b * a.h * lk * a.d, 47), v = rnd(a.b * a.h * lk * a.dv, 48);
      const std::size_t bias_n = a.bias_bh[0] * a.bias_bh[1] * lq * lk;
      const auto bias = rnd(bias_n, 49);
      std::vector<std::uint8_t> mask(a.b * lq * lk);
      const auto mr = rnd(mask.size(), 50);
      for (std::size_t i = 0; i < mask.size(); ++i) mask[i] = mr[i] < -0.5 || (i / lk) % 9 == 2;
      const auto dout = rnd(a.b * a.h * lq * a.dv, 51);
      const Shape ms{2, 1, lq, lk}, bs{a.bias_bh[0], a.bias_bh[1], lq, lk};
      const AttentionGeom g = attention_geom("attention", Shape{a.b, a.h, lq, a.d}, Shape{a.b, a.h, lk, a.d},
                                             Shape{a.b, a.h, lk, a.dv}, &ms, &bs, a.o);
      std::vector<double> dq(q.size()), dk(k.size()), dv(v.size()), db(bias.size());
      attention_backward(g, q.data(), k.data(), v.data(), mask.data(), bias.data(), dout.data(), dq.data(), dk.data(),
                         dv.data(), db.data());
      const std::string what = "Lq " + std::to_string(lq) + " Lk " + std::to_string(lk) + (causal ? " causal" : "");
      const double h = 1e-6;
      expect_grad(dq, q, [&](const auto& x) { return dot(dout, ref_attention(a, x, k, v, mask, bias)); }, 1e-5, "dq " + what, 40, h);
      expect_grad(dk, k, [&](const auto& x) { return dot(dout, ref_attention(a, q, x, v, mask, bias)); }, 1e-5, "dk " + what, 40, h);
      expect_grad(dv, v, [&](const auto& x) { return dot(dout, ref_attention(a, q, k, x, mask, bias)); }, 1e-5, "dv " + what, 40, h);
      expect_grad(db, bias, [&](const auto& x) { return dot(dout, ref_attention(a, q, k, v, mask, x)); }, 1e-5, "dbias " + what, 40, h);
      // f32 agrees with f64, and no bias gradient is written when none is asked for.
      const auto qf = cast<float>(q), kf = cast<float>(k), vf = cast<float>(v), bf = cast<float>(bias), dof = cast<float>(dout);
      std::vector<float> dqf(q.size()), dkf(k.size()), dvf(v.size());
      attention_backward(g, qf.data(), kf.data(), vf.data(), mask.data(), bf.data(), dof.data(), dqf.data(), dkf.data(),
                         dvf.data(), nullptr);
      expect_close(dqf, dq, 1e-4, "dq f32 " + what);
      expect_close(dkf, dk, 1e-4, "dk f32 " + what);
      expect_close(dvf, dv, 1e-4, "dv f32 " + what);
    }
}

TEST(NnAttention, FullyMaskedRowGetsZeroGradient) {
  Att a;
  a.lq = 2;
  a.lk = 3;
  a.mask_bh = {1, 1};
  const std::vector<std::uint8_t> mask{1, 1, 1, 0, 1, 0};
  const Shape ms{1, 1, 2, 3};
  const AttentionGeom g = attention_geom("attention", Shape{1, 1, 2, 1}, Shape{1, 1, 3, 1}, Shape{1, 1, 3, 1}, &ms, nullptr, a.o);
  const std::vector<double> q{0.3, -0.2}, k{0.1, 0.5, -0.4}, v{1, 10, 100}, dout{1, 0};
  std::vector<double> dq(2, 9), dk(3, 9), dv(3, 9);
  attention_backward(g, q.data(), k.data(), v.data(), mask.data(), static_cast<const double*>(nullptr), dout.data(), dq.data(),
                     dk.data(), dv.data(), static_cast<double*>(nullptr));
  expect_close(dq, std::vector<double>{0, 0}, 0, "dq");
  expect_close(dk, std::vector<double>{0, 0, 0}, 0, "dk");
  expect_close(dv, std::vector<double>{0, 0, 0}, 0, "dv");
}

TEST(NnAttention, E38FullyMaskedRowGivesZero) {
  Att a;
  a.lq = 2;
  a.lk = 3;
  a.mask_bh = {1, 1};
  const std::vector<std::uint8_t> mask{1, 1, 1, 0, 1, 0};
  expect_close(run_attention<float>(a, {0, 0}, {0, 0, 0}, {1, 10, 100}, mask, {}), std::vector<double>{0, 50.5}, 1e-6, "E38");
}

TEST(NnAttention, E39CausalIsBottomRightAligned) {
  Att a;
  a.lq = 2;
  a.lk = 3;
  a.o.is_causal = true;
  expect_close(run_attention<float>(a, {0, 0}, {0, 0, 0}, {1, 10, 100}, {}, {}), std::vector<double>{5.5, 37}, 1e-5, "E39");
}

TEST(NnAttention, E40CausalRowsBeforeTheKeysGiveZero) {
  Att a;
  a.lq = 3;
  a.lk = 2;
  a.o.is_causal = true;
  expect_close(run_attention<float>(a, {0, 0, 0}, {0, 0}, {1, 10}, {}, {}), std::vector<double>{0, 1, 5.5}, 1e-5, "E40");
}

TEST(NnAttention, E41ScaleAndSoftcap) {
  Att a;
  a.lq = 1;
  a.lk = 2;
  a.d = 2;
  const std::vector<double> q{1, 0}, k{4, 0, 0, 0}, v{1, 0};
  expect_close(run_attention<float>(a, q, k, v, {}, {}), std::vector<double>{0.9442}, 1e-4, "E41 default scale");
  a.o.scale = 1.0;
  expect_close(run_attention<float>(a, q, k, v, {}, {}), std::vector<double>{0.982}, 1e-3, "E41 scale 1");
  a.o.scale.reset();
  a.o.softcap = 1.0;
  expect_close(run_attention<float>(a, q, k, v, {}, {}), std::vector<double>{0.7297}, 1e-4, "E41 softcap");
}

}  // namespace
}  // namespace tensor::cpu::nn::test
