// FFT on the CPU, computed in f64 for both dtypes: a recursive mixed-radix Cooley-Tukey
// (smallest prime factor first, a direct DFT per radix) while every prime factor is at most
// kMaxRadix, else Bluestein with a power-of-two transform of length >= 2n - 1.
#include "backends/cpu/nn/fft.hpp"

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstdint>
#include <memory>
#include <numbers>
#include <vector>

namespace tensor::cpu::nn {
namespace {

using C = std::complex<double>;
using I = std::int64_t;
constexpr std::size_t kMaxRadix = 31;

std::size_t smallest_factor(std::size_t n) {
  for (std::size_t p = 2; p * p <= n; ++p)
    if (n % p == 0) return p;
  return n;
}
bool smooth(std::size_t n) {
  while (n > 1) {
    const std::size_t p = smallest_factor(n);
    if (p > kMaxRadix) return false;
    n /= p;
  }
  return true;
}

// out[k] = sum_j in[j*stride] w^{jk}, w = e^{sign 2 pi i / n}; `tw` holds w^m for m < n.
void mixed(std::size_t n, const C* in, std::size_t stride, C* out, const std::vector<C>& tw, std::size_t tw_step,
           std::vector<C>& scratch) {
  if (n == 1) {
    out[0] = in[0];
    return;
  }
  const std::size_t p = smallest_factor(n), m = n / p;
  // Sub-transforms of the p decimated sequences, stored at out[r*m ...].
  for (std::size_t r = 0; r < p; ++r) mixed(m, in + r * stride, stride * p, out + r * m, tw, tw_step * p, scratch);
  // Butterflies: X[k + q m] = sum_r w_n^{r(k + q m)} Y_r[k].
  const std::size_t base = scratch.size();
  scratch.resize(base + p);
  for (std::size_t k = 0; k < m; ++k) {
    for (std::size_t r = 0; r < p; ++r) scratch[base + r] = out[r * m + k] * tw[(r * k * tw_step) % (tw.size())];
    for (std::size_t q = 0; q < p; ++q) {
      C s = 0;
      for (std::size_t r = 0; r < p; ++r) s += scratch[base + r] * tw[(r * q * m * tw_step) % tw.size()];
      out[k + q * m] = s;
    }
  }
  scratch.resize(base);
}

// A transform of one length and direction, planned once per call of rfft/irfft.
class Plan {
 public:
  Plan(std::size_t n, int sign) : n_(n) {
    if (smooth(n)) {
      tw_.resize(n);
      for (std::size_t m = 0; m < n; ++m) tw_[m] = std::polar(1.0, sign * 2 * std::numbers::pi * static_cast<double>(m) / static_cast<double>(n));
      return;
    }
    // Bluestein: jk = (j^2 + k^2 - (k-j)^2)/2, so X[k] = c_k sum_j (x_j c_j) conj(c_{k-j})
    // with the chirp c_m = e^{sign pi i m^2/n}; the convolution runs on length M (a power of 2).
    m_ = 1;
    while (m_ < 2 * n - 1) m_ *= 2;
    chirp_.resize(n);
    std::size_t sq = 0;  // j^2 mod 2n, exact: (j+1)^2 = j^2 + 2j + 1
    for (std::size_t j = 0; j < n; ++j) {
      chirp_[j] = std::polar(1.0, sign * std::numbers::pi * static_cast<double>(sq) / static_cast<double>(n));
      sq = (sq + 2 * j + 1) % (2 * n);
    }
    inner_fwd_ = std::make_unique<Plan>(m_, -1);
    inner_inv_ = std::make_unique<Plan>(m_, +1);
    std::vector<C> b(m_, C(0));
    b[0] = std::conj(chirp_[0]);
    for (std::size_t j = 1; j < n; ++j) b[j] = b[m_ - j] = std::conj(chirp_[j]);
    kernel_.resize(m_);
    inner_fwd_->run(b.data(), kernel_.data());
  }
  // out[k] = sum_j in[j] e^{sign 2 pi i jk/n}.
  void run(const C* in, C* out) const {
    if (m_ == 0) {
      std::vector<C> scratch;
      mixed(n_, in, 1, out, tw_, 1, scratch);
      return;
    }
    std::vector<C> a(m_, C(0)), fa(m_);
    for (std::size_t j = 0; j < n_; ++j) a[j] = in[j] * chirp_[j];
    inner_fwd_->run(a.data(), fa.data());
    for (std::size_t i = 0; i < m_; ++i) fa[i] *= kernel_[i];
    inner_inv_->run(fa.data(), a.data());
    for (std::size_t k = 0; k < n_; ++k) out[k] = a[k] / static_cast<double>(m_) * chirp_[k];
  }

 private:
  std::size_t n_, m_ = 0;
  std::vector<C> tw_, chirp_, kernel_;
  std::unique_ptr<Plan> inner_fwd_, inner_inv_;
};


template <class T>
void rfft_impl(std::size_t rows, std::size_t len, std::size_t n, const T* x, T* re, T* im) {
  const Plan plan(n, -1);
  const std::size_t bins = n / 2 + 1, take = std::min(len, n);
  std::vector<C> a(n), b(n);
  for (std::size_t r = 0; r < rows; ++r) {
    for (std::size_t j = 0; j < n; ++j) a[j] = j < take ? C(static_cast<double>(x[r * len + j]), 0) : C(0);
    plan.run(a.data(), b.data());
    for (std::size_t k = 0; k < bins; ++k) {
      re[r * bins + k] = static_cast<T>(b[k].real());
      im[r * bins + k] = static_cast<T>(b[k].imag());
    }
  }
}

template <class T>
void irfft_impl(std::size_t rows, std::size_t bins, std::size_t n, const T* re, const T* im, T* y) {
  const Plan plan(n, +1);
  const std::size_t half = n / 2;
  std::vector<C> a(n), b(n);
  for (std::size_t r = 0; r < rows; ++r) {
    std::fill(a.begin(), a.end(), C(0));
    for (std::size_t k = 0; k <= half && k < bins; ++k) {
      const bool real_only = k == 0 || (n % 2 == 0 && k == half);
      const C v(static_cast<double>(re[r * bins + k]), real_only ? 0.0 : static_cast<double>(im[r * bins + k]));
      a[k] = v;
      if (k != 0 && n - k != k) a[n - k] = std::conj(v);
    }
    plan.run(a.data(), b.data());
    for (std::size_t j = 0; j < n; ++j) y[r * n + j] = static_cast<T>(b[j].real() / static_cast<double>(n));
  }
}

// dx[j] = sum_k g_re[k] cos(2 pi jk/n) - g_im[k] sin(2 pi jk/n) = Re(sum_k G[k] e^{+2 pi i jk/n}).
template <class T>
void rfft_backward_impl(std::size_t rows, std::size_t len, std::size_t n, const T* g_re, const T* g_im, T* dx) {
  const Plan plan(n, +1);
  const std::size_t bins = n / 2 + 1;
  std::vector<C> a(n), b(n);
  for (std::size_t r = 0; r < rows; ++r) {
    std::fill(a.begin(), a.end(), C(0));
    for (std::size_t k = 0; k < bins; ++k)
      a[k] = C(static_cast<double>(g_re[r * bins + k]), static_cast<double>(g_im[r * bins + k]));
    plan.run(a.data(), b.data());
    for (std::size_t j = 0; j < len; ++j) dx[r * len + j] = j < n ? static_cast<T>(b[j].real()) : T(0);
  }
}

// d re[k] = c_k/n Re(F[k]), d im[k] = c_k/n Im(F[k]) with F = DFT(dy), c_k = 2 on interior
// bins; DC and Nyquist get c = 1 and no imaginary gradient; bins past n/2 get 0.
template <class T>
void irfft_backward_impl(std::size_t rows, std::size_t bins, std::size_t n, const T* dy, T* d_re, T* d_im) {
  const Plan plan(n, -1);
  const std::size_t half = n / 2;
  std::vector<C> a(n), b(n);
  for (std::size_t r = 0; r < rows; ++r) {
    for (std::size_t j = 0; j < n; ++j) a[j] = C(static_cast<double>(dy[r * n + j]), 0);
    plan.run(a.data(), b.data());
    for (std::size_t k = 0; k < bins; ++k) {
      double gr = 0, gi = 0;
      if (k <= half) {
        const bool edge = k == 0 || (n % 2 == 0 && k == half);
        const double c = (edge ? 1.0 : 2.0) / static_cast<double>(n);
        gr = c * b[k].real();
        gi = edge ? 0.0 : c * b[k].imag();
      }
      d_re[r * bins + k] = static_cast<T>(gr);
      d_im[r * bins + k] = static_cast<T>(gi);
    }
  }
}

}  // namespace

#define TENSOR_NN_FFT_TYPED(T)                                                                              \
  void rfft(std::size_t rows, std::size_t len, std::size_t n, const T* x, T* re, T* im) {                   \
    rfft_impl(rows, len, n, x, re, im);                                                                     \
  }                                                                                                         \
  void irfft(std::size_t rows, std::size_t bins, std::size_t n, const T* re, const T* im, T* y) {           \
    irfft_impl(rows, bins, n, re, im, y);                                                                   \
  }                                                                                                         \
  void rfft_backward(std::size_t rows, std::size_t len, std::size_t n, const T* g_re, const T* g_im, T* dx) { \
    rfft_backward_impl(rows, len, n, g_re, g_im, dx);                                                       \
  }                                                                                                         \
  void irfft_backward(std::size_t rows, std::size_t bins, std::size_t n, const T* dy, T* d_re, T* d_im) {   \
    irfft_backward_impl(rows, bins, n, dy, d_re, d_im);                                                     \
  }

TENSOR_NN_FFT_TYPED(float)
TENSOR_NN_FFT_TYPED(double)
#undef TENSOR_NN_FFT_TYPED

}  // namespace tensor::cpu::nn
