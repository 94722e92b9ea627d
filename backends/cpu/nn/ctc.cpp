// CTC on the CPU: alpha (and for the gradient beta) over the blank-extended target
// l' = [blank, l1, blank, ..., lL, blank] in log space, one sample at a time.
#include "backends/cpu/nn/ctc.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "tensor/error.hpp"

namespace tensor::cpu::nn {
namespace {

using I = std::int64_t;
constexpr double kNegInf = -std::numeric_limits<double>::infinity();

double lse(double a, double b) {
  if (a == kNegInf) return b;
  if (b == kNegInf) return a;
  const double m = std::max(a, b);
  return m + std::log(std::exp(a - m) + std::exp(b - m));
}

struct Sample {
  std::vector<I> ext;  // l'
  I frames = 0;
};

Sample extended(const CtcGeom& g, const I* targets, const I* input_lengths, const I* target_lengths, std::size_t n) {
  Sample s;
  const I L = target_lengths[n];
  s.frames = input_lengths[n];
  s.ext.assign(static_cast<std::size_t>(2 * L + 1), g.blank);
  for (I i = 0; i < L; ++i) s.ext[static_cast<std::size_t>(2 * i + 1)] = targets[n * g.max_target + static_cast<std::size_t>(i)];
  return s;
}

// alpha[t][s] for t < frames (row-major [frames, S']), returns the loss.
template <class T>
double alpha_pass(const CtcGeom& g, const T* lp, std::size_t n, const Sample& smp, std::vector<double>& alpha) {
  const std::size_t S = smp.ext.size(), Tn = static_cast<std::size_t>(smp.frames);
  if (Tn == 0) return S == 1 ? 0.0 : std::numeric_limits<double>::infinity();
  auto at = [&](std::size_t t, std::size_t s) {
    return static_cast<double>(lp[(t * g.batch + n) * g.classes + static_cast<std::size_t>(smp.ext[s])]);
  };
  alpha.assign(Tn * S, kNegInf);
  alpha[0] = at(0, 0);
  if (S > 1) alpha[1] = at(0, 1);
  for (std::size_t t = 1; t < Tn; ++t)
    for (std::size_t s = 0; s < S; ++s) {
      double a = alpha[(t - 1) * S + s];
      if (s >= 1) a = lse(a, alpha[(t - 1) * S + s - 1]);
      if (s >= 2 && smp.ext[s] != g.blank && smp.ext[s] != smp.ext[s - 2]) a = lse(a, alpha[(t - 1) * S + s - 2]);
      alpha[t * S + s] = a == kNegInf ? kNegInf : a + at(t, s);
    }
  double ll = alpha[(Tn - 1) * S + S - 1];
  if (S > 1) ll = lse(ll, alpha[(Tn - 1) * S + S - 2]);
  return -ll;
}

template <class T>
void forward(const CtcGeom& g, const T* lp, const I* targets, const I* il, const I* tl, T* loss) {
  std::vector<double> alpha;
  for (std::size_t n = 0; n < g.batch; ++n)
    loss[n] = static_cast<T>(alpha_pass(g, lp, n, extended(g, targets, il, tl, n), alpha));
}

template <class T>
void backward(const CtcGeom& g, const T* lp, const I* targets, const I* il, const I* tl, const T* dloss, T* dlp) {
  std::fill(dlp, dlp + g.time * g.batch * g.classes, T(0));
  std::vector<double> alpha, beta;
  for (std::size_t n = 0; n < g.batch; ++n) {
    const Sample smp = extended(g, targets, il, tl, n);
    const double loss = alpha_pass(g, lp, n, smp, alpha);
    const std::size_t S = smp.ext.size(), Tn = static_cast<std::size_t>(smp.frames);
    if (!std::isfinite(loss) || Tn == 0) continue;  // impossible target: zero gradient (§6.6)
    auto at = [&](std::size_t t, std::size_t s) {
      return static_cast<double>(lp[(t * g.batch + n) * g.classes + static_cast<std::size_t>(smp.ext[s])]);
    };
    beta.assign(Tn * S, kNegInf);
    beta[(Tn - 1) * S + S - 1] = at(Tn - 1, S - 1);
    if (S > 1) beta[(Tn - 1) * S + S - 2] = at(Tn - 1, S - 2);
    for (std::size_t t = Tn - 1; t-- > 0;)
      for (std::size_t s = 0; s < S; ++s) {
        double b = beta[(t + 1) * S + s];
        if (s + 1 < S) b = lse(b, beta[(t + 1) * S + s + 1]);
        if (s + 2 < S && smp.ext[s] != g.blank && smp.ext[s] != smp.ext[s + 2]) b = lse(b, beta[(t + 1) * S + s + 2]);
        beta[t * S + s] = b == kNegInf ? kNegInf : b + at(t, s);
      }
    const double up = static_cast<double>(dloss[n]);
    for (std::size_t t = 0; t < Tn; ++t) {
      T* row = dlp + (t * g.batch + n) * g.classes;
      for (std::size_t s = 0; s < S; ++s) {
        const double ab = alpha[t * S + s] + beta[t * S + s];
        if (ab == kNegInf) continue;
        const double post = std::exp(ab - at(t, s) + loss);
        row[smp.ext[s]] = static_cast<T>(static_cast<double>(row[smp.ext[s]]) - up * post);
      }
    }
  }
}

}  // namespace

void ctc_validate(const char* op, const CtcGeom& g, const I* targets, const I* input_lengths, const I* target_lengths) {
  const I C = static_cast<I>(g.classes);
  if (g.blank < 0 || g.blank >= C)
    throw IndexError(std::string("[") + op + "] blank out of range; expected blank in [0, " + std::to_string(C) + "); got " +
                     std::to_string(g.blank));
  for (std::size_t n = 0; n < g.batch; ++n) {
    const I tn = input_lengths[n], ln = target_lengths[n];
    if (tn < 0 || tn > static_cast<I>(g.time))
      throw ShapeError(std::string("[") + op + "] input length out of range; expected 0 <= input_lengths[n] <= " +
                       std::to_string(g.time) + "; got " + std::to_string(tn) + " for sample " + std::to_string(n));
    if (ln < 0 || ln > static_cast<I>(g.max_target))
      throw ShapeError(std::string("[") + op + "] target length out of range; expected 0 <= target_lengths[n] <= " +
                       std::to_string(g.max_target) + "; got " + std::to_string(ln) + " for sample " + std::to_string(n));
    for (I i = 0; i < ln; ++i) {
      const I v = targets[n * g.max_target + static_cast<std::size_t>(i)];
      if (v < 0 || v >= C || v == g.blank)
        throw IndexError(std::string("[") + op + "] target label out of range; expected labels in [0, " + std::to_string(C) +
                         ") other than blank " + std::to_string(g.blank) + "; got " + std::to_string(v) +
                         " at sample " + std::to_string(n) + ", position " + std::to_string(i));
    }
  }
}

void ctc_loss_forward(const CtcGeom& g, const float* lp, const I* t, const I* il, const I* tl, float* loss) {
  forward(g, lp, t, il, tl, loss);
}
void ctc_loss_forward(const CtcGeom& g, const double* lp, const I* t, const I* il, const I* tl, double* loss) {
  forward(g, lp, t, il, tl, loss);
}
void ctc_loss_backward(const CtcGeom& g, const float* lp, const I* t, const I* il, const I* tl, const float* dloss,
                       float* dlp) {
  backward(g, lp, t, il, tl, dloss, dlp);
}
void ctc_loss_backward(const CtcGeom& g, const double* lp, const I* t, const I* il, const I* tl, const double* dloss,
                       double* dlp) {
  backward(g, lp, t, il, tl, dloss, dlp);
}

}  // namespace tensor::cpu::nn
