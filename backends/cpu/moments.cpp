// var_mean on the CPU: the mean and the centred second moment along a dim in one pass
// over memory. Along the last dim (and for f64 along any) work is cut into blocks that fit
// a cache (a row's run of up to 32 KB, or a block of rows of up to 512 KB across the kept
// lanes); each block is read from memory once for its sum and again from the cache for
// its squared deviations about its own mean (the two-pass formula, exact to rounding).
// f32 along an outer dim takes shifted sums in one read (rows_moments_shifted). Blocks
// and chunks are joined in order with
// Chan's pairwise update for the second moment. The mean returned is the plain sum over n
// (as mean_dim: an infinite element gives an infinite mean, where joined running means
// would give inf - inf). A row that fits one block gives exactly the two-pass second
// moment. Every join order depends on the shape only, never on the
// thread count. Sums in double; f16 / bf16 through f32.
#include <cmath>
#include <vector>

#include "backends/cpu/cpu_ops.hpp"
#include "backends/cpu/elementwise.hpp"
#include "backends/cpu/reduce_hwy.hpp"
#include "backends/cpu/reduce_plan.hpp"
#include "lib/core/shape_rules.hpp"

namespace tensor::cpu {
namespace {

using dispatch::Prim;
using dispatch::PrimPair;
using namespace reduce_plan;

// A row's run per block, and an f64 block of rows along an outer dim, in bytes: the first
// is re-read from L1, the second from L2. Along an outer dim of [4096, 1024] f32 (the
// two-pass blocks, before the one-pass f32 path) blocks of 32 KB took 2.2x a read, 128 KB
// 1.6x, 512 KB 1.3-1.4x: the per-block passes over the lanes cost more than L2 re-reads.
constexpr std::size_t kRunBytes = std::size_t{32} << 10;
constexpr std::size_t kRowBlockBytes = std::size_t{512} << 10;

// Joins moments (mean b, m2 b over nb elements) into (mean, m2 over na); Chan et al.
inline void join(double& mean, double& m2, double na, double bmean, double bm2, double nb) {
  if (nb == 0) return;
  if (na == 0) {
    mean = bmean;
    m2 = bm2;
    return;
  }
  const double n = na + nb, delta = bmean - mean;
  mean += delta * (nb / n);
  m2 += bm2 + delta * delta * (na * nb / n);
}

template <class T>
double run_sum(const T* x, std::size_t n) {
  if constexpr (std::is_same_v<T, float>) return simd::sum_f32(x, n);
  else return simd::sum_f64(x, n);
}
template <class T>
double run_sq_dev(const T* x, std::size_t n, double mu) {
  if constexpr (std::is_same_v<T, float>) return simd::sum_sq_dev_f32(x, n, mu);
  else return simd::sum_sq_dev_f64(x, n, mu);
}

// One contiguous row of n > 0 elements: its sum and m2.
template <class T>
void row_moments(const T* r, std::size_t n, double& sum, double& m2) {
  constexpr std::size_t kRun = kRunBytes / sizeof(T);
  double mean = 0;
  sum = 0;
  m2 = 0;
  for (std::size_t b = 0; b < n; b += kRun) {
    const std::size_t len = std::min(kRun, n - b);
    const double s = run_sum(r + b, len), mu = s / static_cast<double>(len);
    sum += s;
    join(mean, m2, static_cast<double>(b), mu, run_sq_dev(r + b, len, mu), static_cast<double>(len));
  }
}

// Rows k0..k1 of an [n, inner] f32 slab, m lanes, in one pass: sums shifted by each
// lane's first value c (or 0 where that is not finite), then mean = c + s / r and
// m2 = q - s^2 / r. With c a value of the lane the difference loses about
// log10(((mean - c) / sd)^2) of double's 16 digits (under 4 for c within 100 standard
// deviations), far below what the f32 result keeps; a second pass over the block, which
// the f64 path makes, cost 1.3-1.4x a read here against about 0.85 for this one.
void rows_moments_shifted(const float* slab, std::size_t inner, std::size_t k0, std::size_t k1, std::size_t m,
                          double* sum, double* mean, double* m2, double* tmp) {
  double* c = tmp;
  const float* first = slab + k0 * inner;
  for (std::size_t i = 0; i < m; ++i) c[i] = std::isfinite(first[i]) ? static_cast<double>(first[i]) : 0.0;
  std::fill(sum, sum + m, 0.0);
  std::fill(m2, m2 + m, 0.0);
  simd::shifted_sums_rows_strided_f32(sum, m2, first, k1 - k0, inner, m, c);
  const double r = static_cast<double>(k1 - k0);
  for (std::size_t i = 0; i < m; ++i) {
    const double s = sum[i];
    mean[i] = c[i] + s / r;
    const double d = m2[i] - s * (s / r);
    m2[i] = d < 0 ? 0.0 : d;  // rounding may leave a tiny negative; NaN stays NaN
    sum[i] = c[i] * r + s;
  }
}

// Rows k0..k1 of an [n, inner] f64 slab, m lanes: their sums, running means and m2 (zeroed
// here), in blocks read twice (the second time from the cache, shifted by the block's mean
// with the corrected two-pass formula q - s^2 / r). tmp: 3 * m doubles.
void rows_moments(const double* slab, std::size_t inner, std::size_t k0, std::size_t k1, std::size_t m, double* sum,
                  double* mean, double* m2, double* tmp) {
  std::fill(sum, sum + m, 0.0);
  std::fill(mean, mean + m, 0.0);
  std::fill(m2, m2 + m, 0.0);
  const std::size_t block = std::max<std::size_t>(1, kRowBlockBytes / (m * sizeof(double)));
  double* mu = tmp;
  double* s = tmp + m;
  double* q = tmp + 2 * m;
  for (std::size_t k = k0; k < k1; k += block) {
    const std::size_t r = std::min(block, k1 - k);
    const double* x = slab + k * inner;
    const double rd = static_cast<double>(r);
    std::fill(mu, mu + m, 0.0);
    simd::acc_rows_strided_f64(mu, x, r, inner, m, false);
    for (std::size_t i = 0; i < m; ++i) {
      sum[i] += mu[i];
      mu[i] /= rd;
    }
    std::fill(s, s + m, 0.0);
    std::fill(q, q + m, 0.0);
    simd::shifted_sums_rows_strided_f64(s, q, x, r, inner, m, mu);
    // Chan's join with the block's weights shared by every lane (branch-free: the first
    // block finds mean and m2 at 0 and takes its own, f = 1 and g = 0).
    const double na = static_cast<double>(k - k0), f = rd / (na + rd), g = na * f;
    for (std::size_t i = 0; i < m; ++i) {
      const double delta = mu[i] - mean[i];
      mean[i] += delta * f;
      m2[i] += (q[i] - s[i] * (s[i] / rd)) + delta * delta * g;
    }
  }
}

// A row-major f32/f64 tensor viewed as [outer, n, inner] with n > 0, reduced along n
// into sum and m2 (one per output element, in the output's order).
template <class T>
void dense_moments(const T* x, const Shape& shape, std::size_t dim, double* sum, double* m2) {
  const Around ar = around(shape, dim);
  const std::size_t outer = ar.outer, n = ar.n, inner = ar.inner;
  const bool threads = outer * n * inner >= kParallelDimElems;
  if (inner == 1) {
    const std::size_t per = std::max<std::size_t>(1, stream_chunk(outer * n) / n);
    auto group = [&](std::size_t g) {
      for (std::size_t o = g * per; o < std::min(outer, (g + 1) * per); ++o) row_moments(x + o * n, n, sum[o], m2[o]);
    };
    run_chunks(threads, (outer + per - 1) / per, group);
    return;
  }
  // Chunks of (outer index, row group, column block); with several row groups each chunk
  // fills a partial row of its own, joined in group order below.
  const OuterChunks ch(outer, n, inner);
  const bool parts = ch.groups > 1;
  const std::size_t total = parts ? outer * ch.groups * inner : outer * inner;
  std::vector<double> psum(parts ? total : 0), pmean(total), pm2(parts ? total : 0);
  auto block = [&](std::size_t t) {
    const OuterChunks::Chunk c = ch[t];
    const std::size_t off = parts ? ch.partial(c) : c.ob * inner + c.ib;
    std::vector<double> tmp(3 * c.m);
    double* cs = (parts ? psum.data() : sum) + off;
    double* cq = (parts ? pm2.data() : m2) + off;
    if constexpr (std::is_same_v<T, float>)
      rows_moments_shifted(x + c.ob * n * inner + c.ib, inner, c.k0, c.k1, c.m, cs, pmean.data() + off, cq, tmp.data());
    else
      rows_moments(x + c.ob * n * inner + c.ib, inner, c.k0, c.k1, c.m, cs, pmean.data() + off, cq, tmp.data());
  };
  run_chunks(threads, ch.count(), block);
  if (!parts) return;
  std::vector<double> mean(inner);
  for (std::size_t ob = 0; ob < outer; ++ob) {
    double* s = sum + ob * inner;
    double* q = m2 + ob * inner;
    for (std::size_t grp = 0; grp < ch.groups; ++grp) {
      const std::size_t k0 = grp * ch.rows, len = std::min(n, k0 + ch.rows) - k0;
      const std::size_t off = (ob * ch.groups + grp) * inner;
      for (std::size_t i = 0; i < inner; ++i) {
        if (grp == 0) {
          s[i] = psum[off + i];
          mean[i] = pmean[off + i];
          q[i] = pm2[off + i];
        } else {
          s[i] += psum[off + i];
          join(mean[i], q[i], static_cast<double>(k0), pmean[off + i], pm2[off + i], static_cast<double>(len));
        }
      }
    }
  }
}

PrimPair var_mean_entry(Prim p, std::size_t dim, std::size_t correction) {
  CpuRef a = as_cpu(std::move(p));
  const DType dt = a->dtype();
  // The Moments rule admits Float kinds only: f64, f32, f16, bf16.
  const Shape out_shape = core::reduce_dim_shape(a->shape(), dim);
  CpuRef var = alloc_tensor(dt, out_shape), mean = alloc_tensor(dt, out_shape);
  const std::size_t count = out_shape.num_elements(), n = a->shape()[dim];
  if (count == 0) return {std::move(var), std::move(mean)};
  std::vector<double> mu(count), m2(count);  // the sums, then the means
  if (n == 0) {
    // nothing to read: sums 0, so the mean is 0 / 0 (NaN) and m2 0, as the composite
  } else if (dt == DType::F64) {
    const auto v = dense_view(*a, dim);
    const CpuRef c = v ? CpuRef{} : to_contiguous(a);
    if (v) dense_moments(at<double>(v->base), v->shape, v->dim, mu.data(), m2.data());
    else dense_moments(at<double>(c->data()), c->shape(), dim, mu.data(), m2.data());
  } else {
    const auto v = dt == DType::F32 ? dense_view(*a, dim) : std::nullopt;
    if (v) {
      dense_moments(at<float>(v->base), v->shape, v->dim, mu.data(), m2.data());
    } else {
      const CpuRef c = convert_tensor(to_contiguous(a), DType::F32);
      dense_moments(at<float>(c->data()), c->shape(), dim, mu.data(), m2.data());
    }
  }
  for (double& v : mu) v /= static_cast<double>(n);
  const double div = static_cast<double>(n) - static_cast<double>(correction);
  auto store = [&](auto tag) {
    using T = decltype(tag);
    T* vo = at<T>(var->data());
    T* mo = at<T>(mean->data());
    for (std::size_t i = 0; i < count; ++i) {
      const double q = m2[i] < 0 ? 0.0 : m2[i];  // rounding may leave a tiny negative; NaN stays NaN
      vo[i] = dispatch::convert_value<T>(q / div);
      mo[i] = dispatch::convert_value<T>(mu[i]);
    }
  };
  switch (dt) {
    case DType::F64: store(double{}); break;
    case DType::F32: store(float{}); break;
    case DType::F16: store(tensor::f16{}); break;
    default: store(tensor::bf16{}); break;
  }
  return {std::move(var), std::move(mean)};
}

}  // namespace

void register_moments_ops(dispatch::Backend& b) { b.set<OpCode::var_mean>(&var_mean_entry); }

}  // namespace tensor::cpu
