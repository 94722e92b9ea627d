// layer_norm on the CPU: statistics per row in f64 (two passes), rows on parallel_chunks.
#include "backends/cpu/nn/norm.hpp"

#include <cmath>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "backends/cpu/nn/nn_gemm.hpp"
#include "backends/cpu/reduce_hwy.hpp"

namespace tensor::cpu::nn {
namespace {

using I = std::int64_t;

#if TENSOR_HAVE_OPENMP
#define TENSOR_NORM_SIMD _Pragma("omp simd")
#else
#define TENSOR_NORM_SIMD
#endif

// Mean and 1 / sqrt(biased variance + eps) of one row: two passes of the Highway double
// reductions (several accumulators; a scalar loop was one long chain of dependent adds).
// Rows of at least 1M elements would split across threads inside sum_f32; the caller
// runs rows on parallel_chunks, where that runs serially.
template <class T>
void row_stats(const T* xr, std::size_t d, double eps, double& mu, double& rs) {
  double s, v;
  if constexpr (std::is_same_v<T, float>) {
    s = d ? simd::sum_f32(xr, d) : 0.0;
    mu = d ? s / static_cast<double>(d) : 0.0;
    v = simd::sum_sq_dev_f32(xr, d, mu);
  } else {
    s = d ? simd::sum_f64(xr, d) : 0.0;
    mu = d ? s / static_cast<double>(d) : 0.0;
    v = simd::sum_sq_dev_f64(xr, d, mu);
  }
  v = d ? v / static_cast<double>(d) : 0.0;
  rs = 1.0 / std::sqrt(v + eps);
}

template <class T>
void forward(std::size_t rows, std::size_t d, const T* x, const T* gamma, const T* beta, double eps, T* y, T* mean,
             T* rstd) {
  for_items(rows, static_cast<double>(d), [&](std::size_t r) {
    const T* xr = x + r * d;
    T* yr = y + r * d;
    double mu, rs;
    row_stats(xr, d, eps, mu, rs);
    const T m = static_cast<T>(mu), s = static_cast<T>(rs);
    // The same formula in four branch-free loops (vectorized; an element's result is
    // the one the single loop with branches gave).
    if (gamma && beta) {
      TENSOR_NORM_SIMD
      for (std::size_t i = 0; i < d; ++i) yr[i] = (xr[i] - m) * s * gamma[i] + beta[i];
    } else if (gamma) {
      TENSOR_NORM_SIMD
      for (std::size_t i = 0; i < d; ++i) yr[i] = (xr[i] - m) * s * gamma[i];
    } else if (beta) {
      TENSOR_NORM_SIMD
      for (std::size_t i = 0; i < d; ++i) yr[i] = (xr[i] - m) * s + beta[i];
    } else {
      TENSOR_NORM_SIMD
      for (std::size_t i = 0; i < d; ++i) yr[i] = (xr[i] - m) * s;
    }
    if (mean) mean[r] = m;
    if (rstd) rstd[r] = s;
  }, Work::Stream);
}

template <class T>
void backward(std::size_t rows, std::size_t d, const T* x, const T* gamma, const T* dy, double eps, T* dx, T* dgamma,
              T* dbeta) {
  std::vector<double> mus(rows), rss(rows);
  for_items(rows, static_cast<double>(d), [&](std::size_t r) {
    const T* xr = x + r * d;
    const T* gr = dy + r * d;
    double mu, rs;
    row_stats(xr, d, eps, mu, rs);
    mus[r] = mu;
    rss[r] = rs;
    double mg = 0, mgx = 0;
    for (std::size_t i = 0; i < d; ++i) {
      const double g = static_cast<double>(gr[i]) * (gamma ? static_cast<double>(gamma[i]) : 1.0);
      mg += g;
      mgx += g * (static_cast<double>(xr[i]) - mu) * rs;
    }
    mg /= static_cast<double>(d);
    mgx /= static_cast<double>(d);
    T* dr = dx + r * d;
    for (std::size_t i = 0; i < d; ++i) {
      const double g = static_cast<double>(gr[i]) * (gamma ? static_cast<double>(gamma[i]) : 1.0);
      const double xh = (static_cast<double>(xr[i]) - mu) * rs;
      dr[i] = static_cast<T>((g - mg - xh * mgx) * rs);
    }
  }, Work::Stream);
  if (!dgamma && !dbeta) return;
  std::vector<double> sg(d, 0.0), sb(d, 0.0);
  for (std::size_t r = 0; r < rows; ++r) {
    const T* xr = x + r * d;
    const T* gr = dy + r * d;
    for (std::size_t i = 0; i < d; ++i) {
      sg[i] += static_cast<double>(gr[i]) * (static_cast<double>(xr[i]) - mus[r]) * rss[r];
      sb[i] += static_cast<double>(gr[i]);
    }
  }
  for (std::size_t i = 0; i < d; ++i) {
    if (dgamma) dgamma[i] = static_cast<T>(sg[i]);
    if (dbeta) dbeta[i] = static_cast<T>(sb[i]);
  }
}

}  // namespace

#define TENSOR_NN_NORM_TYPED(T)                                                                              \
  void layer_norm_forward(std::size_t rows, std::size_t d, const T* x, const T* gamma, const T* beta, double eps, \
                          T* y, T* mean, T* rstd) {                                                          \
    forward(rows, d, x, gamma, beta, eps, y, mean, rstd);                                                    \
  }                                                                                                          \
  void layer_norm_backward(std::size_t rows, std::size_t d, const T* x, const T* gamma, const T* dy, double eps, \
                           T* dx, T* dgamma, T* dbeta) {                                                     \
    backward(rows, d, x, gamma, dy, eps, dx, dgamma, dbeta);                                                 \
  }

TENSOR_NN_NORM_TYPED(float)
TENSOR_NN_NORM_TYPED(double)
#undef TENSOR_NN_NORM_TYPED

}  // namespace tensor::cpu::nn
