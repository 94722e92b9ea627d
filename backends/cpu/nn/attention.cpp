// Fused attention on the CPU: per (batch, head, block of 64 queries), key tiles of 64 with
// scores and P·V through gemm and a running max/sum per query row (online softmax).
#include "backends/cpu/nn/attention.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "backends/cpu/nn/nn_gemm.hpp"

namespace tensor::cpu::nn {
namespace {

using I = std::int64_t;
constexpr std::size_t kBlockQ = 64, kBlockK = 64;

template <class T>
void forward(const AttentionGeom& g, const T* q, const T* k, const T* v, const std::uint8_t* mask, const T* bias,
             T* out) {
  const std::size_t qblocks = (g.lq + kBlockQ - 1) / kBlockQ;
  const I tasks = static_cast<I>(g.batch * g.heads * qblocks);
  const T scale = static_cast<T>(g.scale);
  const T cap = g.softcap ? static_cast<T>(*g.softcap) : T(0);
  const T ninf = -std::numeric_limits<T>::infinity();
  const I shift = static_cast<I>(g.lk) - static_cast<I>(g.lq);  // causal: key j visible when j <= i + shift
  const int threads = nn_threads();
  const bool par = threads > 1 && tasks > 1 &&
                   static_cast<double>(g.lq) * static_cast<double>(g.lk) * static_cast<double>(g.d + g.dv) *
                           static_cast<double>(g.batch * g.heads) >= 1 << 16;
#if TENSOR_HAVE_OPENMP
#pragma omp parallel num_threads(par ? threads : 1)
#else
  (void)par;
#endif
  {
    std::vector<T> s(kBlockQ * kBlockK), acc(kBlockQ * g.dv), m(kBlockQ), l(kBlockQ);
#if TENSOR_HAVE_OPENMP
#pragma omp for schedule(dynamic, 1)
#endif
    for (I task = 0; task < tasks; ++task) {
      const std::size_t qb = static_cast<std::size_t>(task) % qblocks;
      const std::size_t bh = static_cast<std::size_t>(task) / qblocks;
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
      for (std::size_t j0 = 0; j0 < g.lk; j0 += kBlockK) {
        // Causal: no query of this block sees keys from j0 on.
        if (g.is_causal && static_cast<I>(j0) > static_cast<I>(i0 + nq - 1) + shift) break;
        const std::size_t nk = std::min(kBlockK, g.lk - j0);
        nn_gemm<T>(false, true, nq, nk, g.d, scale, qp, g.d, kp + j0 * g.d, g.d, T(0), s.data(), nk, 1);
        for (std::size_t r = 0; r < nq; ++r) {
          T* sr = s.data() + r * nk;
          const std::size_t i = i0 + r;
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
          const T mnew = std::max(m[r], mx);
          T* ar = acc.data() + r * g.dv;
          if (mnew == ninf) {  // everything so far masked: contributes nothing
            std::fill(sr, sr + nk, T(0));
            continue;
          }
          const T alpha = m[r] == ninf ? T(0) : std::exp(m[r] - mnew);
          T sum = 0;
          for (std::size_t c = 0; c < nk; ++c) {
            const T p = sr[c] == ninf ? T(0) : std::exp(sr[c] - mnew);
            sr[c] = p;
            sum += p;
          }
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
  tensor::nn::attention_output_shape(op, q, k, v, mask, bias, o);
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

}  // namespace tensor::cpu::nn
