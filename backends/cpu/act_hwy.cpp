// Highway kernels for the activations, their backward entries and softmax /
// log_softmax / softmin (see act_hwy.hpp), compiled once per target. The HWY_ONCE
// part holds the scalar references (used for tails and out-of-range lanes) and splits
// long runs across OpenMP threads outside the kernels.
#include "backends/cpu/act_hwy.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "backends/cpu/parallel.hpp"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backends/cpu/act_hwy.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/aligned_allocator.h"
#include "hwy/highway.h"
#include "hwy/contrib/math/math-inl.h"
#include "backends/cpu/math_hwy-inl.h"

HWY_BEFORE_NAMESPACE();
namespace tensor::cpu::simd {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

template <class D> using TFromD = hn::TFromD<D>;
template <class D> constexpr bool kF32 = sizeof(TFromD<D>) == 4;

// |x| <= lim for the f32 / f64 limit (false for NaN).
template <class D, class V>
HWY_INLINE auto AbsWithin(D d, V x, double lim32, double lim64) {
  using T = TFromD<D>;
  return hn::Le(hn::Abs(x), hn::Set(d, static_cast<T>(kF32<D> ? lim32 : lim64)));
}

// 1 / (1 + e^-x) for x >= 0, e^x / (1 + e^x) below (as unary_hwy's SigmoidV); valid for |x| <= 80 / 700.
template <class D, class V>
HWY_INLINE V SigmoidCore(D d, V x) {
  const V one = hn::Set(d, TFromD<D>(1));
  const V e = hn::Exp(d, hn::Neg(hn::Abs(x)));
  const V r = hn::Div(one, hn::Add(one, e));
  return hn::IfThenElse(hn::Ge(x, hn::Zero(d)), r, hn::Mul(e, r));
}

// One vector of ActOp; `ok` false: some lane needs the scalar reference.
template <class D, class V>
HWY_INLINE V ActVec(D d, ActOp op, V x, V p, V q, bool& ok) {
  const V zero = hn::Zero(d);
  switch (op) {
    case ActOp::Relu: return hn::IfThenElse(hn::Le(x, zero), zero, x);
    case ActOp::LeakyRelu: return hn::IfThenElse(hn::Lt(x, zero), hn::Mul(x, p), x);
    case ActOp::HardSigmoid: {
      const V v = hn::Add(hn::Mul(p, x), q);
      return hn::IfThenElse(hn::Lt(v, zero), zero, hn::IfThenElse(hn::Gt(v, hn::Set(d, TFromD<D>(1))), hn::Set(d, TFromD<D>(1)), v));
    }
    case ActOp::Gelu:
      if constexpr (kF32<D>) {
        ok = hn::AllTrue(d, hn::Eq(x, x));
        const V e = ErfF32(d, hn::Mul(x, hn::Set(d, 0.70710678118654752440f)));
        return hn::Mul(x, hn::Mul(hn::Add(e, hn::Set(d, 1.0f)), hn::Set(d, 0.5f)));
      } else {
        ok = false;  // f64 erf: libm
        return x;
      }
    case ActOp::Sigmoid:
      ok = hn::AllTrue(d, AbsWithin(d, x, 80.0, 700.0));
      return SigmoidCore(d, x);
    case ActOp::LogSigmoid: {
      ok = hn::AllTrue(d, AbsWithin(d, x, 80.0, 700.0));
      const V t = hn::Log1p(d, hn::Exp(d, hn::Neg(hn::Abs(x))));
      return hn::Sub(hn::IfThenElse(hn::Lt(x, zero), x, zero), t);
    }
  }
  return x;
}

template <class T>
HWY_INLINE void Act(ActOp op, const T* HWY_RESTRICT x, T* out, size_t n, T p, T q) {
  const hn::ScalableTag<T> d;
  const size_t N = hn::Lanes(d);
  const auto vp = hn::Set(d, p), vq = hn::Set(d, q);
  size_t i = 0;
  for (; i + N <= n; i += N) {
    bool ok = true;
    const auto r = ActVec(d, op, hn::LoadU(d, x + i), vp, vq, ok);
    if (HWY_LIKELY(ok)) {
      hn::StoreU(r, d, out + i);
    } else {
      for (size_t k = 0; k < N; ++k) out[i + k] = act_ref(op, x[i + k], p, q);
    }
  }
  for (; i < n; ++i) out[i] = act_ref(op, x[i], p, q);
}

template <class D, class V>
HWY_INLINE V Act2Vec(D d, Act2Op op, V a, V b, bool& ok) {
  using T = TFromD<D>;
  const V zero = hn::Zero(d);
  switch (op) {
    case Act2Op::ReluGrad: return hn::IfThenElse(hn::Le(a, zero), zero, b);
    case Act2Op::Prelu: return hn::IfThenElse(hn::Lt(a, zero), hn::Mul(a, b), a);
    case Act2Op::SigmoidGrad: return hn::Mul(hn::Mul(a, hn::Add(hn::Neg(a), hn::Set(d, T(1)))), b);
    case Act2Op::LogSigmoidGrad:
      ok = hn::AllTrue(d, AbsWithin(d, a, 80.0, 700.0));
      return hn::Mul(b, SigmoidCore(d, hn::Neg(a)));
    case Act2Op::GeluGrad:
      // Exact GELU x·Φ(x): grad · (Φ(x) + x·φ(x)); past |x| = 12 (and for NaN) the
      // scalar reference (there x·φ(x) underflows and exp's range ends).
      if constexpr (kF32<D>) {
        ok = hn::AllTrue(d, AbsWithin(d, a, 12.0, 12.0));
        const V cdf = hn::Mul(hn::Add(ErfF32(d, hn::Mul(a, hn::Set(d, 0.70710678118654752440f))), hn::Set(d, 1.0f)),
                              hn::Set(d, 0.5f));
        const V pdf = hn::Mul(hn::Exp(d, hn::Mul(hn::Mul(a, a), hn::Set(d, -0.5f))), hn::Set(d, 0.39894228040143267794f));
        return hn::Mul(b, hn::Add(cdf, hn::Mul(a, pdf)));
      } else {
        ok = false;  // f64 erf: libm
        return a;
      }
  }
  return a;
}

template <class T>
HWY_INLINE void Act2(Act2Op op, const T* HWY_RESTRICT a, const T* HWY_RESTRICT b, bool bs, T* out, size_t n) {
  const hn::ScalableTag<T> d;
  const size_t N = hn::Lanes(d);
  const auto vb = hn::Set(d, b[0]);
  size_t i = 0;
  for (; i + N <= n; i += N) {
    bool ok = true;
    const auto r = Act2Vec(d, op, hn::LoadU(d, a + i), bs ? vb : hn::LoadU(d, b + i), ok);
    if (HWY_LIKELY(ok)) {
      hn::StoreU(r, d, out + i);
    } else {
      for (size_t k = 0; k < N; ++k) out[i + k] = act2_ref(op, a[i + k], bs ? b[0] : b[i + k]);
    }
  }
  for (; i < n; ++i) out[i] = act2_ref(op, a[i], bs ? b[0] : b[i]);
}

// ---- softmax family ----------------------------------------------------------------

// e^t for t <= 0 or NaN: the vector Exp where it is accurate, exactly 0 below the
// smallest denormal's log; `ok` false when a lane needs libm (NaN or the denormal range).
template <class D, class V>
HWY_INLINE V ExpNonPos(D d, V t, bool& ok) {
  using T = TFromD<D>;
  const V lo = hn::Set(d, T(kF32<D> ? -87.3 : -708.0));
  const auto under = hn::Lt(t, hn::Set(d, T(kF32<D> ? -104.0 : -746.0)));
  ok = hn::AllTrue(d, hn::Or(hn::Ge(t, lo), under));
  return hn::IfThenZeroElse(under, hn::Exp(d, hn::Max(t, lo)));
}

// Compensated (Kahan) running sum of vectors: s + c carries the lost low bits.
template <class V>
HWY_INLINE void KahanAdd(V& s, V& c, V v) {
  const V y = hn::Sub(v, c);
  const V t = hn::Add(s, y);
  c = hn::Sub(hn::Sub(t, s), y);
  s = t;
}

template <class T>
HWY_INLINE T ScalarExp(T t) { return std::exp(t); }

// One row of n > 0 contiguous elements.
template <class T>
HWY_INLINE void SoftRow(SoftOp op, const T* x, T* out, size_t n) {
  const hn::ScalableTag<T> d;
  const size_t N = hn::Lanes(d);
  const bool neg = op == SoftOp::Softmin;
  auto load = [&](size_t i) HWY_ATTR { const auto v = hn::LoadU(d, x + i); return neg ? hn::Neg(v) : v; };
  auto get = [&](size_t i) { return neg ? -x[i] : x[i]; };
  // Pass 1: the max; a NaN anywhere (or an infinite max) makes the whole row NaN.
  T mx = -std::numeric_limits<T>::infinity();
  size_t i = 0;
  bool nan = false;
  if (n >= N) {
    auto m0 = load(0), m1 = m0;
    auto bad = hn::IsNaN(m0);
    for (; i + 2 * N <= n; i += 2 * N) {
      const auto v0 = load(i), v1 = load(i + N);
      bad = hn::Or(bad, hn::Or(hn::IsNaN(v0), hn::IsNaN(v1)));
      m0 = hn::Max(m0, v0);
      m1 = hn::Max(m1, v1);
    }
    for (; i + N <= n; i += N) {
      const auto v0 = load(i);
      bad = hn::Or(bad, hn::IsNaN(v0));
      m0 = hn::Max(m0, v0);
    }
    nan = !hn::AllFalse(d, bad);
    mx = hn::GetLane(hn::MaxOfLanes(d, hn::Max(m0, m1)));
  }
  for (; i < n; ++i) {
    const T v = get(i);
    nan = nan || std::isnan(v);
    mx = v > mx ? v : mx;
  }
  if (nan || !std::isfinite(mx)) {
    for (size_t k = 0; k < n; ++k) out[k] = std::numeric_limits<T>::quiet_NaN();
    return;
  }
  // Pass 2: e = exp(x - max), stored for softmax, summed (compensated) for all.
  const auto vm = hn::Set(d, mx);
  const bool store = op != SoftOp::LogSoftmax;
  auto s = hn::Zero(d), c = hn::Zero(d);
  T tail = 0;
  for (i = 0; i + N <= n; i += N) {
    const auto t = hn::Sub(load(i), vm);
    bool ok = true;
    auto e = ExpNonPos(d, t, ok);
    if (HWY_UNLIKELY(!ok)) {
      HWY_ALIGN T buf[hn::MaxLanes(d)];
      for (size_t k = 0; k < N; ++k) buf[k] = ScalarExp<T>(get(i + k) - mx);
      e = hn::Load(d, buf);
    }
    if (store) hn::StoreU(e, d, out + i);
    KahanAdd(s, c, e);
  }
  double sum = static_cast<double>(hn::GetLane(hn::SumOfLanes(d, s))) - static_cast<double>(hn::GetLane(hn::SumOfLanes(d, c)));
  for (size_t k = i; k < n; ++k) {
    const T e = ScalarExp<T>(get(k) - mx);
    if (store) out[k] = e;
    tail += e;
  }
  sum += static_cast<double>(tail);
  // Pass 3 (over the row just written, still in cache).
  if (op == SoftOp::LogSoftmax) {
    const T lse = static_cast<T>(std::log(sum));
    const auto vl = hn::Set(d, lse);
    for (i = 0; i + N <= n; i += N) hn::StoreU(hn::Sub(hn::Sub(load(i), vm), vl), d, out + i);
    for (; i < n; ++i) out[i] = (get(i) - mx) - lse;
  } else {
    const T inv = static_cast<T>(1.0 / sum);
    const auto vi = hn::Set(d, inv);
    for (i = 0; i + N <= n; i += N) hn::StoreU(hn::Mul(hn::LoadU(d, out + i), vi), d, out + i);
    for (; i < n; ++i) out[i] *= inv;
  }
}

template <class T>
HWY_INLINE void SoftRows(SoftOp op, const T* x, T* out, size_t rows, size_t n, size_t ld) {
  if (n == 0) return;
  for (size_t r = 0; r < rows; ++r) SoftRow<T>(op, x + r * ld, out + r * ld, n);
}

// Along an outer dim, m lanes: each pass streams the n rows once (contiguous reads of
// m elements), vectors across the lanes, with per-lane running values in scratch:
// the max (and a NaN / infinite-max flag), then e = exp(x - max) written to out and
// summed (compensated), then the scaled (or log) write.
template <class T>
HWY_INLINE void SoftCols(SoftOp op, const T* HWY_RESTRICT x, T* HWY_RESTRICT out, size_t n, size_t inner, size_t m) {
  if (n == 0 || m == 0) return;
  const hn::ScalableTag<T> d;
  const size_t N = hn::Lanes(d);
  const size_t mp = (m + N - 1) / N * N;  // scratch rounded up to whole vectors
  auto buf = hwy::AllocateAligned<T>(4 * mp);
  T* mx = buf.get();
  T* bad = mx + mp;  // 1 where the lane is all NaN in the result
  T* s = bad + mp;
  T* c = s + mp;
  const bool neg = op == SoftOp::Softmin;
  const T q = std::numeric_limits<T>::quiet_NaN();
  auto get = [&](const T* row, size_t i) { return neg ? -row[i] : row[i]; };
  auto load = [&](const T* row, size_t i) HWY_ATTR { const auto v = hn::LoadU(d, row + i); return neg ? hn::Neg(v) : v; };
  const size_t mv = m - m % N;
  for (size_t i = 0; i < mp; ++i) {
    mx[i] = i < m ? get(x, i) : T(0);
    bad[i] = i < m && std::isnan(mx[i]) ? T(1) : T(0);
    s[i] = c[i] = T(0);
  }
  const auto one = hn::Set(d, T(1));
  for (size_t j = 1; j < n; ++j) {
    const T* row = x + j * inner;
    for (size_t i = 0; i < mv; i += N) {
      const auto v = load(row, i);
      hn::Store(hn::Max(hn::Load(d, mx + i), v), d, mx + i);
      hn::Store(hn::IfThenElse(hn::IsNaN(v), one, hn::Load(d, bad + i)), d, bad + i);
    }
    for (size_t i = mv; i < m; ++i) {
      const T v = get(row, i);
      if (std::isnan(v)) bad[i] = T(1);
      mx[i] = v > mx[i] ? v : mx[i];
    }
  }
  for (size_t i = 0; i < m; ++i) {
    if (!std::isfinite(mx[i])) bad[i] = T(1);
    if (bad[i] != T(0)) mx[i] = T(0);  // keeps the exp pass fast; the lane is NaN below
  }
  const bool store = op != SoftOp::LogSoftmax;
  for (size_t j = 0; j < n; ++j) {
    const T* row = x + j * inner;
    T* orow = out + j * inner;
    for (size_t i = 0; i < mv; i += N) {
      const auto t = hn::Sub(load(row, i), hn::Load(d, mx + i));
      bool ok = true;
      auto e = ExpNonPos(d, t, ok);
      if (HWY_UNLIKELY(!ok)) {
        HWY_ALIGN T tb[hn::MaxLanes(d)];
        hn::Store(t, d, tb);
        for (size_t k = 0; k < N; ++k) tb[k] = ScalarExp<T>(tb[k]);
        e = hn::Load(d, tb);
      }
      if (store) hn::StoreU(e, d, orow + i);
      auto sv = hn::Load(d, s + i), cv = hn::Load(d, c + i);
      KahanAdd(sv, cv, e);
      hn::Store(sv, d, s + i);
      hn::Store(cv, d, c + i);
    }
    for (size_t i = mv; i < m; ++i) {
      const T e = ScalarExp<T>(get(row, i) - mx[i]);
      if (store) orow[i] = e;
      const T y = e - c[i], t = s[i] + y;
      c[i] = (t - s[i]) - y;
      s[i] = t;
    }
  }
  // s := 1 / sum (softmax) or log(sum) (log_softmax), per lane.
  for (size_t i = 0; i < m; ++i) {
    const double sum = static_cast<double>(s[i]) - static_cast<double>(c[i]);
    s[i] = store ? static_cast<T>(1.0 / sum) : static_cast<T>(std::log(sum));
  }
  for (size_t j = 0; j < n; ++j) {
    const T* row = x + j * inner;
    T* orow = out + j * inner;
    for (size_t i = 0; i < mv; i += N) {
      const auto b = hn::Gt(hn::Load(d, bad + i), hn::Zero(d));
      const auto r = store ? hn::Mul(hn::LoadU(d, orow + i), hn::Load(d, s + i))
                           : hn::Sub(hn::Sub(load(row, i), hn::Load(d, mx + i)), hn::Load(d, s + i));
      hn::StoreU(hn::IfThenElse(b, hn::Set(d, q), r), d, orow + i);
    }
    for (size_t i = mv; i < m; ++i)
      orow[i] = bad[i] != T(0) ? q : store ? orow[i] * s[i] : (get(row, i) - mx[i]) - s[i];
  }
}

void ActF32(ActOp op, const float* x, float* out, size_t n, float p, float q) { Act(op, x, out, n, p, q); }
void ActF64(ActOp op, const double* x, double* out, size_t n, double p, double q) { Act(op, x, out, n, p, q); }
void Act2F32(Act2Op op, const float* a, const float* b, bool bs, float* out, size_t n) { Act2(op, a, b, bs, out, n); }
void Act2F64(Act2Op op, const double* a, const double* b, bool bs, double* out, size_t n) { Act2(op, a, b, bs, out, n); }
void SoftRowsF32(SoftOp op, const float* x, float* out, size_t rows, size_t n, size_t ld) { SoftRows(op, x, out, rows, n, ld); }
void SoftRowsF64(SoftOp op, const double* x, double* out, size_t rows, size_t n, size_t ld) { SoftRows(op, x, out, rows, n, ld); }
void SoftColsF32(SoftOp op, const float* x, float* out, size_t n, size_t inner, size_t m) { SoftCols(op, x, out, n, inner, m); }
void SoftColsF64(SoftOp op, const double* x, double* out, size_t n, size_t inner, size_t m) { SoftCols(op, x, out, n, inner, m); }

}  // namespace HWY_NAMESPACE
}  // namespace tensor::cpu::simd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace tensor::cpu::simd {

HWY_EXPORT(ActF32);
HWY_EXPORT(ActF64);
HWY_EXPORT(Act2F32);
HWY_EXPORT(Act2F64);
HWY_EXPORT(SoftRowsF32);
HWY_EXPORT(SoftRowsF64);
HWY_EXPORT(SoftColsF32);
HWY_EXPORT(SoftColsF64);

namespace {

template <class T>
T sigmoid_ref(T x) {
  const T e = std::exp(-std::fabs(x));
  const T r = T(1) / (T(1) + e);
  return x >= 0 ? r : e * r;
}

template <class T>
T ref1(ActOp op, T a, T p, T q) {
  switch (op) {
    case ActOp::Relu: return a <= T(0) ? T(0) : a;
    case ActOp::LeakyRelu: return a < T(0) ? a * p : a;
    case ActOp::Gelu: return a * ((std::erf(a * T(0.70710678118654752440)) + T(1)) * T(0.5));
    case ActOp::Sigmoid: return sigmoid_ref(a);
    case ActOp::LogSigmoid: return (a < T(0) ? a : T(0)) - std::log1p(std::exp(-std::fabs(a)));
    case ActOp::HardSigmoid: {
      const T v = p * a + q;
      return v < T(0) ? T(0) : (v > T(1) ? T(1) : v);
    }
  }
  return a;
}

template <class T>
T ref2(Act2Op op, T a, T b) {
  switch (op) {
    case Act2Op::ReluGrad: return a <= T(0) ? T(0) : b;
    case Act2Op::Prelu: return a < T(0) ? a * b : a;
    case Act2Op::SigmoidGrad: return (a * (-a + T(1))) * b;
    case Act2Op::LogSigmoidGrad: return b * sigmoid_ref(-a);
    case Act2Op::GeluGrad: {  // grad · (Φ(x) + x·φ(x)), the exact erf form's derivative (NaN at ±inf, as the default)
      const T cdf = (std::erf(a * T(0.70710678118654752440)) + T(1)) * T(0.5);
      const T xpdf = a * (std::exp(a * a * T(-0.5)) * T(0.39894228040143267794));
      return b * (cdf + xpdf);
    }
  }
  return a;
}

// Elementwise runs of at least this many elements are split into chunks shared out by
// parallel_chunks (a busy second core costs at most one chunk): the transcendental
// ones (compute-bound) from 256K; the cheap selects (relu, leaky_relu, hard_sigmoid,
// relu_backward, prelu, sigmoid_backward) are memory-bound, where a second thread
// only adds contention, so never.
// Why this bound: with parallel_chunks two threads are not slower than one from 256K
// elements up, also with both cores busy; below that a helper's wake-up costs more than
// the second thread saves.
constexpr std::size_t kParallelMathElems = std::size_t{1} << 18;
constexpr std::size_t kChunkElems = std::size_t{1} << 16;

bool is_math(ActOp op) { return op == ActOp::Gelu || op == ActOp::Sigmoid || op == ActOp::LogSigmoid; }
bool is_math(Act2Op op) { return op == Act2Op::GeluGrad || op == Act2Op::LogSigmoidGrad; }

template <class Body>
void chunked(std::size_t n, bool math, Body body) {
  if (!math || n < kParallelMathElems) return body(0, n);
  const std::size_t chunks = (n + kChunkElems - 1) / kChunkElems;
  auto one = [&](std::size_t c) {
    const std::size_t b = c * kChunkElems;
    body(b, std::min(n, b + kChunkElems) - b);
  };
  parallel_chunks(chunks, one);
}

// Softmax rows: split by rows once there are this many elements (exp per element,
// compute-bound like the math ops).
template <class T, class K>
void soft_rows(K kernel, SoftOp op, const T* x, T* out, std::size_t rows, std::size_t n, std::size_t ld) {
  if (rows < 2 || rows * n < kParallelMathElems) return kernel(op, x, out, rows, n, ld);
  const std::size_t per = std::max<std::size_t>(1, kChunkElems / std::max<std::size_t>(n, 1));
  auto one = [&](std::size_t c) {
    const std::size_t r0 = c * per;
    kernel(op, x + r0 * ld, out + r0 * ld, std::min(rows, r0 + per) - r0, n, ld);
  };
  parallel_chunks((rows + per - 1) / per, one);
}

}  // namespace

float act_ref(ActOp op, float x, float p, float q) { return ref1(op, x, p, q); }
double act_ref(ActOp op, double x, double p, double q) { return ref1(op, x, p, q); }
float act2_ref(Act2Op op, float a, float b) { return ref2(op, a, b); }
double act2_ref(Act2Op op, double a, double b) { return ref2(op, a, b); }

void act_f32(ActOp op, const float* x, float* out, std::size_t n, float p, float q) {
  const auto k = HWY_DYNAMIC_DISPATCH(ActF32);
  chunked(n, is_math(op), [&](std::size_t b, std::size_t m) { k(op, x + b, out + b, m, p, q); });
}
void act_f64(ActOp op, const double* x, double* out, std::size_t n, double p, double q) {
  const auto k = HWY_DYNAMIC_DISPATCH(ActF64);
  chunked(n, is_math(op), [&](std::size_t b, std::size_t m) { k(op, x + b, out + b, m, p, q); });
}
void act2_f32(Act2Op op, const float* a, const float* b, bool bs, float* out, std::size_t n) {
  const auto k = HWY_DYNAMIC_DISPATCH(Act2F32);
  chunked(n, is_math(op), [&](std::size_t s, std::size_t m) { k(op, a + s, bs ? b : b + s, bs, out + s, m); });
}
void act2_f64(Act2Op op, const double* a, const double* b, bool bs, double* out, std::size_t n) {
  const auto k = HWY_DYNAMIC_DISPATCH(Act2F64);
  chunked(n, is_math(op), [&](std::size_t s, std::size_t m) { k(op, a + s, bs ? b : b + s, bs, out + s, m); });
}
void soft_rows_f32(SoftOp op, const float* x, float* out, std::size_t rows, std::size_t n, std::size_t ld) {
  soft_rows(HWY_DYNAMIC_DISPATCH(SoftRowsF32), op, x, out, rows, n, ld);
}
void soft_rows_f64(SoftOp op, const double* x, double* out, std::size_t rows, std::size_t n, std::size_t ld) {
  soft_rows(HWY_DYNAMIC_DISPATCH(SoftRowsF64), op, x, out, rows, n, ld);
}
void soft_cols_f32(SoftOp op, const float* x, float* out, std::size_t n, std::size_t inner, std::size_t m) {
  HWY_DYNAMIC_DISPATCH(SoftColsF32)(op, x, out, n, inner, m);
}
void soft_cols_f64(SoftOp op, const double* x, double* out, std::size_t n, std::size_t inner, std::size_t m) {
  HWY_DYNAMIC_DISPATCH(SoftColsF64)(op, x, out, n, inner, m);
}

}  // namespace tensor::cpu::simd
#endif  // HWY_ONCE
