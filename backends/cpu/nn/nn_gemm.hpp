// Row-major gemm and thread count shared by the nn kernels (one-thread f32 on gemm.cpp's
// route, oneDNN or BLIS; else BLIS when built with it, else a plain loop).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "backends/cpu/blis.hpp"
#include "backends/cpu/gemm.hpp"
#include "backends/cpu/parallel.hpp"

#if TENSOR_HAVE_OPENMP
#include <omp.h>
#endif

namespace tensor::cpu::nn {

// Threads the caller may use (1 inside an OpenMP region).
inline int nn_threads() {
#if TENSOR_HAVE_OPENMP
  return omp_in_parallel() ? 1 : std::max(1, omp_get_max_threads());
#else
  return 1;
#endif
}

// Runs f(i) for every i in [0, n): on parallel_chunks (never an OpenMP region: see
// parallel.hpp) when there are several items and n * work_per_item (window taps,
// multiply-adds) reaches kParallelWork, below which waking a helper costs more than it
// saves; serially otherwise. Compute-bound items go in chunks of about kChunkWork work
// each; memory-bound kernels that read about one element per unit of work (pooling,
// normalization: Work::Stream) in stream_chunk's long chunks (parallel.hpp), so that each
// thread reads long runs of consecutive memory (chunks of 32 KB alternating between two
// threads kept the hardware prefetchers from ever getting ahead).
constexpr double kParallelWork = 32768.0;
constexpr double kChunkWork = 8192.0;
enum class Work { Compute, Stream };
template <class F>
void for_items(std::size_t n, double work_per_item, F&& f, Work kind = Work::Compute) {
  const int t = nn_threads();
  if (t > 1 && n > 1 && static_cast<double>(n) * work_per_item >= kParallelWork) {
    const double chunk_work =
        kind == Work::Stream ? static_cast<double>(stream_chunk(static_cast<std::size_t>(static_cast<double>(n) * work_per_item)))
                             : kChunkWork;
    const std::size_t per =
        std::max<std::size_t>(1, static_cast<std::size_t>(chunk_work / std::max(work_per_item, 1.0)));
    const std::size_t chunks = (n + per - 1) / per;
    auto body = [&](std::size_t c) {
      const std::size_t hi = std::min(n, (c + 1) * per);
      for (std::size_t i = c * per; i < hi; ++i) f(i);
    };
    parallel_chunks(chunks, body);
  } else {
    for (std::size_t i = 0; i < n; ++i) f(i);
  }
}

// C[m x n] = alpha * op(A) * op(B) + beta * C, row-major with leading dims lda/ldb/ldc;
// op(A) = A^T when ta (A then stored [k x m]), likewise B ([n x k] when tb).
template <class T>
void nn_gemm(bool ta, bool tb, std::size_t m, std::size_t n, std::size_t k, T alpha, const T* a, std::size_t lda,
             const T* b, std::size_t ldb, T beta, T* c, std::size_t ldc, int threads) {
  if (m == 0 || n == 0) return;
  const auto ia = static_cast<std::int64_t>(lda), ib = static_cast<std::int64_t>(ldb),
             ic = static_cast<std::int64_t>(ldc);
  const std::int64_t rsa = ta ? 1 : ia, csa = ta ? ia : 1;
  const std::int64_t rsb = tb ? 1 : ib, csb = tb ? ib : 1;
#if TENSOR_HAVE_BLIS
  if constexpr (std::is_same_v<T, float>) {
    // One thread: the shared f32 route (oneDNN or BLIS, backends/cpu/gemm.cpp).
    if (threads == 1) {
      sgemm(m, n, k, alpha, a, rsa, csa, b, rsb, csb, beta, c, ic, 1);
      return;
    }
  }
  if (k > 0) {
    rntm_t rntm = BLIS_RNTM_INITIALIZER;
    bli_rntm_set_num_threads(threads, &rntm);
    const auto dm = static_cast<dim_t>(m), dn = static_cast<dim_t>(n), dk = static_cast<dim_t>(k);
    if constexpr (std::is_same_v<T, float>) {
      bli_sgemm_ex(BLIS_NO_TRANSPOSE, BLIS_NO_TRANSPOSE, dm, dn, dk, &alpha, const_cast<float*>(a), rsa, csa,
                   const_cast<float*>(b), rsb, csb, &beta, c, ic, 1, nullptr, &rntm);
    } else {
      bli_dgemm_ex(BLIS_NO_TRANSPOSE, BLIS_NO_TRANSPOSE, dm, dn, dk, &alpha, const_cast<double*>(a), rsa, csa,
                   const_cast<double*>(b), rsb, csb, &beta, c, ic, 1, nullptr, &rntm);
    }
    return;
  }
#endif
  (void)threads;
  for (std::size_t i = 0; i < m; ++i) {
    T* crow = c + static_cast<std::int64_t>(i) * ic;
    for (std::size_t j = 0; j < n; ++j) crow[j] = beta == T(0) ? T(0) : beta * crow[j];
    for (std::size_t p = 0; p < k; ++p) {
      const T av = alpha * a[static_cast<std::int64_t>(i) * rsa + static_cast<std::int64_t>(p) * csa];
      for (std::size_t j = 0; j < n; ++j)
        crow[j] += av * b[static_cast<std::int64_t>(p) * rsb + static_cast<std::int64_t>(j) * csb];
    }
  }
}

// BLIS threads for one product of m*n*k multiply-adds (as matmul.cpp: all threads from 64^3).
inline int gemm_threads(std::size_t m, std::size_t n, std::size_t k, int threads) {
  return static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) >= 64.0 * 64.0 * 64.0 ? threads
                                                                                                          : 1;
}

}  // namespace tensor::cpu::nn
