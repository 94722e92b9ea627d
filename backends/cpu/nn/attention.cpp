// Fused attention on the CPU: per (batch, head, block of 64 queries), key tiles (256
// forward, 64 backward) with scores and P·V through gemm and a running max/sum per query
// row (online softmax).
#include "backends/cpu/nn/attention.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "backends/cpu/nn/nn_gemm.hpp"
#include "backends/cpu/reduce_hwy.hpp"
#include "backends/cpu/unary_hwy.hpp"
#include "lib/core/nn_shape.hpp"

namespace tensor::cpu::nn {
namespace {

using I = std::int64_t;
constexpr std::size_t kBlockQ = 64, kBlockK = 64;

// Key tiles of the forward: 256 keys per score gemm (a [64, 256] f32 tile is 64 KiB,
// in L2) instead of the backward's 64, so each BLIS call packs 4x the work and a row's
// running max and sum are rescaled a quarter as often.
constexpr std::size_t kBlockKF = 256;

// The row transform, max, exp and sum of one score tile row without softcap, mask or bias
// (the common case): the first `live` columns are visible (causal cut), the rest get 0;
// f32 takes the Highway max / exp / sum kernels. Returns the new running max (ninf: the
// row has seen nothing visible yet; nothing changed) and adds the exps into sum.
template <class T>
T plain_row(T* sr, std::size_t nk, std::size_t live, T mprev, T& sum) {
  const T ninf = -std::numeric_limits<T>::infinity();
  T mx = ninf;
  if constexpr (std::is_same_v<T, float>) {
    if (live > 0) mx = simd::max_f32(sr, live);
  } else {
    for (std::size_t c = 0; c < live; ++c) mx = std::max(mx, sr[c]);
  }
  const T mnew = std::max(mprev, mx);
  if (mnew == ninf) {
    std::fill(sr, sr + nk, T(0));
    return mnew;
  }
  std::fill(sr + live, sr + nk, T(0));
  if constexpr (std::is_same_v<T, float>) {
    for (std::size_t c = 0; c < live; ++c) sr[c] -= mnew;
    simd::unary_f32(simd::UnOp::Exp, sr, sr, live);
    sum = static_cast<T>(simd::sum_f32(sr, live));
  } else {
    T acc = 0;
    for (std::size_t c = 0; c < live; ++c) acc += (sr[c] = sr[c] == ninf ? T(0) : std::exp(sr[c] - mnew));
    sum = acc;
  }
  return mnew;
}

template <class T>
void forward(const AttentionGeom& g, const T* q, const T* k, const T* v, const std::uint8_t* mask, const T* bias,
             T* out) {
  const std::size_t qblocks = (g.lq + kBlockQ - 1) / kBlockQ;
  const std::size_t tasks = g.batch * g.heads * qblocks;
  const T scale = static_cast<T>(g.scale);
  const T cap = g.softcap ? static_cast<T>(*g.softcap) : T(0);
  const T ninf = -std::numeric_limits<T>::infinity();
  const I shift = static_cast<I>(g.lk) - static_cast<I>(g.lq);  // causal: key j visible when j <= i + shift
  const bool plain = !g.softcap && !mask && !bias;
  const double work = static_cast<double>(kBlockQ) * static_cast<double>(g.lk) * static_cast<double>(g.d + g.dv);
  // Each task (batch, head, block of queries) on parallel_chunks, scratch per thread.
  for_items(tasks, work, [&](std::size_t task) {
    thread_local std::vector<T> s, acc, m, l;
    s.resize(kBlockQ * kBlockKF);
    acc.resize(kBlockQ * g.dv);
    m.resize(kBlockQ);
    l.resize(kBlockQ);
    {
      const std::size_t qb = task % qblocks;
      const std::size_t bh = task / qblocks;
      const std::size_t b = bh / g.heads, h = bh % g.heads;
      const std::size_t i0 = qb * kBlockQ, nq = std::min(kBlockQ, g.lq - i0);
      const T* qp = q + (bh * g.lq + i0) * g.d;
      const T* kp = k + bh * g.lk * g.d;
      const T* vp = v + bh * g.lk * g.dv;
      const std::uint8_t* mp =
          mask ? mask + static_cast<I>(b) * g.mask_sb + static_cast<I>(h) * g.mask_sh : nullptr;
      const T* bp = bias ? bias + static_cast<I>(b) * g.bias_sb + static_cast<I>(h) * g.bias_sh : nullptr;
      std::fill(acc.begin(), acc.begin() + static_cast<I>(nq * g.dv), T(0));
      std::fill(m.begin(), m.end(), ninf);
      std::fill(l.begin(), l.end(), T(0));
      for (std::size_t j0 = 0; j0 < g.lk; j0 += kBlockKF) {
        // Causal: no query of this block sees keys from j0 on.
        if (g.is_causal && static_cast<I>(j0) > static_cast<I>(i0 + nq - 1) + shift) break;
        const std::size_t nk = std::min(kBlockKF, g.lk - j0);
        nn_gemm<T>(false, true, nq, nk, g.d, scale, qp, g.d, kp + j0 * g.d, g.d, T(0), s.data(), nk, 1);
        for (std::size_t r = 0; r < nq; ++r) {
          T* sr = s.data() + r * nk;
          const std::size_t i = i0 + r;
          T* ar = acc.data() + r * g.dv;
          T mnew, sum = 0;
          if (plain) {
            // Visible keys of this row in the tile: j <= i + shift.
            const I last = g.is_causal ? static_cast<I>(i) + shift - static_cast<I>(j0) + 1 : static_cast<I>(nk);
            const auto live = static_cast<std::size_t>(std::clamp<I>(last, 0, static_cast<I>(nk)));
            mnew = plain_row(sr, nk, live, m[r], sum);
            if (mnew == ninf) continue;
          } else {
            T mx = ninf;
            for (std::size_t c = 0; c < nk; ++c) {
              const std::size_t j = j0 + c;
              T x = sr[c];
              if (g.softcap) x = cap * std::tanh(x / cap);
              if (mp && mp[i * g.lk + j]) x = ninf;
              if (g.is_causal && static_cast<I>(j) > static_cast<I>(i) + shift) x = ninf;
              if (bp) x += bp[i * g.lk + j];
              sr[c] = x;
              mx = std::max(mx, x);
            }
            mnew = std::max(m[r], mx);
            if (mnew == ninf) {  // everything so far masked: contributes nothing
              std::fill(sr, sr + nk, T(0));
              continue;
            }
            for (std::size_t c = 0; c < nk; ++c) {
              const T p = sr[c] == ninf ? T(0) : std::exp(sr[c] - mnew);
              sr[c] = p;
              sum += p;
            }
          }
          const T alpha = m[r] == ninf ? T(0) : std::exp(m[r] - mnew);
          l[r] = l[r] * alpha + sum;
          m[r] = mnew;
          if (alpha != T(1))
            for (std::size_t c = 0; c < g.dv; ++c) ar[c] *= alpha;
        }
        nn_gemm<T>(false, false, nq, g.dv, nk, T(1), s.data(), nk, vp + j0 * g.dv, g.dv, T(1), acc.data(), g.dv, 1);
      }
      T* op = out + (bh * g.lq + i0) * g.dv;
      for (std::size_t r = 0; r < nq; ++r) {
        const T inv = l[r] > T(0) ? T(1) / l[r] : T(0);
        for (std::size_t c = 0; c < g.dv; ++c) op[r * g.dv + c] = acc[r * g.dv + c] * inv;
      }
    }
  });
}

// One [nq, nk] tile of transformed scores (scale, softcap, mask, causal, bias; -inf where
// masked) into s, and the scaled scores before softcap into raw.
template <class T>
void score_tile(const AttentionGeom& g, const T* qp, std::size_t i0, std::size_t nq, const T* kp, std::size_t j0,
                std::size_t nk, const std::uint8_t* mp, const T* bp, T* s, T* raw) {
  const T cap = g.softcap ? static_cast<T>(*g.softcap) : T(0);
  const T ninf = -std::numeric_limits<T>::infinity();
  const I shift = static_cast<I>(g.lk) - static_cast<I>(g.lq);
  nn_gemm<T>(false, true, nq, nk, g.d, static_cast<T>(g.scale), qp, g.d, kp + j0 * g.d, g.d, T(0), raw, nk, 1);
  for (std::size_t r = 0; r < nq; ++r)
    for (std::size_t c = 0; c < nk; ++c) {
      const std::size_t i = i0 + r, j = j0 + c;
      T x = raw[r * nk + c];
      if (g.softcap) x = cap * std::tanh(x / cap);
      if (mp && mp[i * g.lk + j]) x = ninf;
      if (g.is_causal && static_cast<I>(j) > static_cast<I>(i) + shift) x = ninf;
      if (bp) x += bp[i * g.lk + j];
      s[r * nk + c] = x;
    }
}

// Gradients of the burn composition (module-ops.md §2.13) without the [Lq, Lk] matrix: per
// block of queries, pass 1 recomputes the row max, sum and output, pass 2 rebuilds each
// P tile from the log-sum-exp and accumulates dV, dQ, dK (and d bias).
template <class T>
void backward(const AttentionGeom& g, const T* q, const T* k, const T* v, const std::uint8_t* mask, const T* bias,
              const T* dout, T* dq, T* dk, T* dv, T* dbias) {
  const std::size_t BH = g.batch * g.heads;
  const T ninf = -std::numeric_limits<T>::infinity();
  const I shift = static_cast<I>(g.lk) - static_cast<I>(g.lq);
  std::fill(dq, dq + BH * g.lq * g.d, T(0));
  std::fill(dk, dk + BH * g.lk * g.d, T(0));
  std::fill(dv, dv + BH * g.lk * g.dv, T(0));
  const std::size_t bias_b = g.bias_sb ? g.batch : 1, bias_h = g.bias_sh ? g.heads : 1;
  if (dbias) std::fill(dbias, dbias + bias_b * bias_h * g.lq * g.lk, T(0));
  // A broadcast bias sums its gradient over (b, h): those tasks then run one after another.
  const bool shared_dbias = dbias && ((bias_b == 1 && g.batch > 1) || (bias_h == 1 && g.heads > 1));
  const int threads = nn_threads();
  const bool par = !shared_dbias && threads > 1 && BH > 1 &&
                   static_cast<double>(g.lq) * static_cast<double>(g.lk) * static_cast<double>(g.d + g.dv) *
                           static_cast<double>(BH) >= 1 << 16;
  const I tasks = static_cast<I>(BH);
#if TENSOR_HAVE_OPENMP
#pragma omp parallel num_threads(par ? threads : 1)
#else
  (void)par;
#endif
  {
    std::vector<T> s(kBlockQ * kBlockK), raw(kBlockQ * kBlockK), dp(kBlockQ * kBlockK), acc(kBlockQ * g.dv),
        m(kBlockQ), l(kBlockQ), lse(kBlockQ), dsum(kBlockQ);
#if TENSOR_HAVE_OPENMP
#pragma omp for schedule(dynamic, 1)
#endif
    for (I task = 0; task < tasks; ++task) {
      const std::size_t bh = static_cast<std::size_t>(task), b = bh / g.heads, h = bh % g.heads;
      const T* kp = k + bh * g.lk * g.d;
      const T* vp = v + bh * g.lk * g.dv;
      T* dkp = dk + bh * g.lk * g.d;
      T* dvp = dv + bh * g.lk * g.dv;
      const std::uint8_t* mp =
          mask ? mask + static_cast<I>(b) * g.mask_sb + static_cast<I>(h) * g.mask_sh : nullptr;
      const T* bp = bias ? bias + static_cast<I>(b) * g.bias_sb + static_cast<I>(h) * g.bias_sh : nullptr;
      T* dbp = dbias ? dbias + static_cast<I>(b) * g.bias_sb + static_cast<I>(h) * g.bias_sh : nullptr;
      for (std::size_t i0 = 0; i0 < g.lq; i0 += kBlockQ) {
        const std::size_t nq = std::min(kBlockQ, g.lq - i0);
        const T* qp = q + (bh * g.lq + i0) * g.d;
        const T* dop = dout + (bh * g.lq + i0) * g.dv;
        T* dqp = dq + (bh * g.lq + i0) * g.d;
        auto tiles = [&](auto&& f) {
          for (std::size_t j0 = 0; j0 < g.lk; j0 += kBlockK) {
            if (g.is_causal && static_cast<I>(j0) > static_cast<I>(i0 + nq - 1) + shift) break;
            const std::size_t nk = std::min(kBlockK, g.lk - j0);
            score_tile(g, qp, i0, nq, kp, j0, nk, mp, bp, s.data(), raw.data());
            f(j0, nk);
          }
        };
        // Pass 1: m, l and O (online, as the forward).
        std::fill(m.begin(), m.end(), ninf);
        std::fill(l.begin(), l.end(), T(0));
        std::fill(acc.begin(), acc.end(), T(0));
        tiles([&](std::size_t j0, std::size_t nk) {
          for (std::size_t r = 0; r < nq; ++r) {
            T* sr = s.data() + r * nk;
            T mx = ninf;
            for (std::size_t c = 0; c < nk; ++c) mx = std::max(mx, sr[c]);
            const T mnew = std::max(m[r], mx);
            if (mnew == ninf) {
              std::fill(sr, sr + nk, T(0));
              continue;
            }
            const T alpha = m[r] == ninf ? T(0) : std::exp(m[r] - mnew);
            T sum = 0;
            for (std::size_t c = 0; c < nk; ++c) sum += (sr[c] = sr[c] == ninf ? T(0) : std::exp(sr[c] - mnew));
            l[r] = l[r] * alpha + sum;
            m[r] = mnew;
            for (std::size_t c = 0; c < g.dv; ++c) acc[r * g.dv + c] *= alpha;
          }
          nn_gemm<T>(false, false, nq, g.dv, nk, T(1), s.data(), nk, vp + j0 * g.dv, g.dv, T(1), acc.data(), g.dv, 1);
        });
        for (std::size_t r = 0; r < nq; ++r) {
          lse[r] = l[r] > T(0) ? m[r] + std::log(l[r]) : ninf;  // ninf: fully masked row, P = 0
          T d = 0;
          const T inv = l[r] > T(0) ? T(1) / l[r] : T(0);
          for (std::size_t c = 0; c < g.dv; ++c) d += dop[r * g.dv + c] * acc[r * g.dv + c] * inv;
          dsum[r] = d;
        }
        // Pass 2: P from lse, then dV += P^T dO, dS = P (dO V^T - D), dQ/dK through softcap and scale.
        tiles([&](std::size_t j0, std::size_t nk) {
          for (std::size_t r = 0; r < nq; ++r)
            for (std::size_t c = 0; c < nk; ++c) {
              T& x = s[r * nk + c];
              x = (lse[r] == ninf || x == ninf) ? T(0) : std::exp(x - lse[r]);
            }
          nn_gemm<T>(true, false, nk, g.dv, nq, T(1), s.data(), nk, dop, g.dv, T(1), dvp + j0 * g.dv, g.dv, 1);
          nn_gemm<T>(false, true, nq, nk, g.dv, T(1), dop, g.dv, vp + j0 * g.dv, g.dv, T(0), dp.data(), nk, 1);
          for (std::size_t r = 0; r < nq; ++r)
            for (std::size_t c = 0; c < nk; ++c) {
              const std::size_t e = r * nk + c;
              T ds = s[e] * (dp[e] - dsum[r]);
              if (dbp) dbp[(i0 + r) * g.lk + j0 + c] += ds;
              if (g.softcap) {
                const T t = std::tanh(raw[e] / static_cast<T>(*g.softcap));
                ds *= T(1) - t * t;
              }
              dp[e] = ds;
            }
          const T sc = static_cast<T>(g.scale);
          nn_gemm<T>(false, false, nq, g.d, nk, sc, dp.data(), nk, kp + j0 * g.d, g.d, T(1), dqp, g.d, 1);
          nn_gemm<T>(true, false, nk, g.d, nq, sc, dp.data(), nk, qp, g.d, T(1), dkp + j0 * g.d, g.d, 1);
        });
      }
    }
  }
}

void strides_of(const Shape* s, std::int64_t& sb, std::int64_t& sh) {
  if (!s) return;
  const auto plane = static_cast<std::int64_t>((*s)[2] * (*s)[3]);
  sh = (*s)[1] == 1 ? 0 : plane;
  sb = (*s)[0] == 1 ? 0 : plane * static_cast<std::int64_t>((*s)[1]);
}

}  // namespace

AttentionGeom attention_geom(std::string_view op, const Shape& q, const Shape& k, const Shape& v,
                             const Shape* mask, const Shape* bias, const tensor::nn::AttentionModuleOptions& o) {
  tensor::core::attention_output_shape(op, q, k, v, mask, bias, o);
  AttentionGeom g;
  g.batch = q[0];
  g.heads = q[1];
  g.lq = q[2];
  g.lk = k[2];
  g.d = q[3];
  g.dv = v[3];
  g.scale = o.scale ? *o.scale : 1.0 / std::sqrt(static_cast<double>(std::max<std::size_t>(q[3], 1)));
  g.softcap = o.softcap;
  g.is_causal = o.is_causal;
  strides_of(mask, g.mask_sb, g.mask_sh);
  strides_of(bias, g.bias_sb, g.bias_sh);
  return g;
}

void attention_forward(const AttentionGeom& g, const float* q, const float* k, const float* v,
                       const std::uint8_t* mask, const float* bias, float* out) {
  forward(g, q, k, v, mask, bias, out);
}
void attention_forward(const AttentionGeom& g, const double* q, const double* k, const double* v,
                       const std::uint8_t* mask, const double* bias, double* out) {
  forward(g, q, k, v, mask, bias, out);
}
void attention_backward(const AttentionGeom& g, const float* q, const float* k, const float* v,
                        const std::uint8_t* mask, const float* bias, const float* dout, float* dq, float* dk, float* dv,
                        float* dbias) {
  backward(g, q, k, v, mask, bias, dout, dq, dk, dv, dbias);
}
void attention_backward(const AttentionGeom& g, const double* q, const double* k, const double* v,
                        const std::uint8_t* mask, const double* bias, const double* dout, double* dq, double* dk,
                        double* dv, double* dbias) {
  backward(g, q, k, v, mask, bias, dout, dq, dk, dv, dbias);
}

}  // namespace tensor::cpu::nn
