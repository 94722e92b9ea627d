// ctc_loss against a brute-force sum over every frame-level path (collapse repeats, drop
// blanks), its gradient against central differences of that sum (f64), typed errors, and
// module-ops.md E42-E44.
#include <cmath>
#include <limits>
#include <vector>

#include "backends/cpu/nn/ctc.hpp"
#include "tensor/error.hpp"
#include "nn_test_util.hpp"

namespace tensor::cpu::nn::test {
namespace {

using I = std::int64_t;

// -log sum over paths pi in C^Tn with collapse(pi) = target of prod exp(lp[t, pi_t]).
double brute(const std::vector<double>& lp, std::size_t N, std::size_t C, std::size_t n, I Tn, const std::vector<I>& target,
             I blank) {
  double total = 0;
  std::vector<I> path(static_cast<std::size_t>(Tn), 0);
  std::size_t count = 1;
  for (I t = 0; t < Tn; ++t) count *= C;
  for (std::size_t code = 0; code < count; ++code) {
    std::size_t c = code;
    for (auto& p : path) {
      p = static_cast<I>(c % C);
      c /= C;
    }
    std::vector<I> out;
    I prev = -1;
    for (I p : path) {
      if (p != prev && p != blank) out.push_back(p);
      prev = p;
    }
    if (out != target) continue;
    double lsum = 0;
    for (I t = 0; t < Tn; ++t) lsum += lp[(static_cast<std::size_t>(t) * N + n) * C + static_cast<std::size_t>(path[static_cast<std::size_t>(t)])];
    total += std::exp(lsum);
  }
  return -std::log(total);
}

struct Batch {
  std::size_t T = 5, N = 3, C = 3, S = 3;
  I blank = 0;
  std::vector<I> targets, il, tl;
};

TEST(NnCtc, LossAndGradientMatchBruteForce) {
  for (I blank : {0, 2}) {
    Batch b;
    b.blank = blank;
    const I a = blank == 0 ? 1 : 0, c = blank == 0 ? 2 : 1;
    b.targets = {a, c, a, /**/ a, a, 0, /**/ c, 0, 0};
    b.il = {5, 4, 3};
    b.tl = {3, 2, 0};
    for (std::size_t i = 0; i < b.targets.size(); ++i)
      if (static_cast<I>(i % b.S) >= b.tl[i / b.S]) b.targets[i] = 0;
    const CtcGeom g{b.T, b.N, b.C, b.S, blank};
    // Unnormalised log-probabilities are fine: the loss is a function of every entry.
    auto lp = rnd(b.T * b.N * b.C, 91);
    for (auto& v : lp) v = v - 1.0;
    auto target_of = [&](std::size_t n) {
      return std::vector<I>(b.targets.begin() + static_cast<I>(n * b.S), b.targets.begin() + static_cast<I>(n * b.S) + b.tl[n]);
    };
    std::vector<double> loss(b.N), want(b.N);
    ctc_loss_forward(g, lp.data(), b.targets.data(), b.il.data(), b.tl.data(), loss.data());
    for (std::size_t n = 0; n < b.N; ++n) want[n] = brute(lp, b.N, b.C, n, b.il[n], target_of(n), blank);
    expect_close(loss, want, 1e-12, "ctc loss");
    const std::vector<float> lpf(lp.begin(), lp.end());
    std::vector<float> lossf(b.N);
    ctc_loss_forward(g, lpf.data(), b.targets.data(), b.il.data(), b.tl.data(), lossf.data());
    expect_close(lossf, want, 1e-5, "ctc loss f32");
    const std::vector<double> up{0.7, -1.3, 2.0};
    std::vector<double> grad(lp.size());
    ctc_loss_backward(g, lp.data(), b.targets.data(), b.il.data(), b.tl.data(), up.data(), grad.data());
    expect_close(grad, numeric_grad(lp, [&](const auto& v) {
                   double s = 0;
                   for (std::size_t n = 0; n < b.N; ++n) s += up[n] * brute(v, b.N, b.C, n, b.il[n], target_of(n), blank);
                   return s;
                 }),
                 1e-6, "ctc grad");
  }
}

TEST(NnCtc, E42ImpossibleTargetIsInfinityWithZeroGradient) {
  const CtcGeom g{2, 1, 3, 2, 0};
  const std::vector<double> lp(6, std::log(1.0 / 3));
  const std::vector<I> targets{1, 1}, il{2}, tl{2};
  std::vector<double> loss(1), grad(6, 5.0);
  ctc_loss_forward(g, lp.data(), targets.data(), il.data(), tl.data(), loss.data());
  EXPECT_EQ(loss[0], std::numeric_limits<double>::infinity());
  const std::vector<double> up{1};
  ctc_loss_backward(g, lp.data(), targets.data(), il.data(), tl.data(), up.data(), grad.data());
  expect_close(grad, std::vector<double>(6, 0.0), 0, "E42 grad");
}

TEST(NnCtc, E43ExactGradientIsMinusPosterior) {
  const CtcGeom g{2, 1, 3, 1, 0};
  const std::vector<float> lp{std::log(.5f), std::log(.3f), std::log(.2f), std::log(.4f), std::log(.4f), std::log(.2f)};
  const std::vector<I> targets{1}, il{2}, tl{1};
  std::vector<float> loss(1), grad(6);
  ctc_loss_forward(g, lp.data(), targets.data(), il.data(), tl.data(), loss.data());
  EXPECT_NEAR(loss[0], 0.821, 1e-3);
  const std::vector<float> up{1};
  ctc_loss_backward(g, lp.data(), targets.data(), il.data(), tl.data(), up.data(), grad.data());
  expect_close(std::vector<float>(grad.begin(), grad.begin() + 3), std::vector<double>{-0.4545, -0.5455, 0}, 1e-4, "E43");
}

TEST(NnCtc, E44EmptyTarget) {
  const CtcGeom g{2, 1, 3, 1, 0};
  const std::vector<double> lp{std::log(.5), std::log(.3), std::log(.2), std::log(.4), std::log(.4), std::log(.2)};
  const std::vector<I> targets{0}, il{2}, tl{0};
  std::vector<double> loss(1);
  ctc_loss_forward(g, lp.data(), targets.data(), il.data(), tl.data(), loss.data());
  EXPECT_NEAR(loss[0], 1.6094, 1e-4);
}

TEST(NnCtc, BadIntegersAreTypedErrors) {
  // The entries validate before the kernels run (the kernels trust their inputs); the
  // errors name the op the entry was called as.
  const CtcGeom g{2, 1, 3, 2, 0};
  const std::vector<I> ok_t{1, 2}, il{2}, tl{2};
  EXPECT_THROW(ctc_validate("ctc_loss", g, std::vector<I>{1, 3}.data(), il.data(), tl.data()), IndexError);
  EXPECT_THROW(ctc_validate("ctc_loss", g, std::vector<I>{0, 1}.data(), il.data(), tl.data()), IndexError);
  EXPECT_THROW(ctc_validate("ctc_loss", g, ok_t.data(), std::vector<I>{3}.data(), tl.data()), ShapeError);
  EXPECT_THROW(ctc_validate("ctc_loss", g, ok_t.data(), il.data(), std::vector<I>{3}.data()), ShapeError);
  EXPECT_THROW(ctc_validate("ctc_loss", CtcGeom{2, 1, 3, 2, 3}, ok_t.data(), il.data(), tl.data()), IndexError);
  try {
    ctc_validate("ctc_loss_backward", g, std::vector<I>{1, 3}.data(), il.data(), tl.data());
    ADD_FAILURE() << "no error";
  } catch (const IndexError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("[ctc_loss_backward]", 0), 0u) << e.what();
  }
  EXPECT_NO_THROW(ctc_validate("ctc_loss", g, ok_t.data(), il.data(), tl.data()));
}

}  // namespace
}  // namespace tensor::cpu::nn::test
