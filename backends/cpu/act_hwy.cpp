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
  V e;
  if constexpr (kF32<D>) e = ExpNormalF32(d, hn::Neg(hn::Abs(x)));  // |x| > 80, NaN: not used
  else e = hn::Exp(d, hn::Neg(hn::Abs(x)));
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
      // -softplus(-x) = min(x, 0) - log1p(e^-|x|) in one pass; f32: log1p(u) for u in
      // (0, 1] as u * p(u), p a degree-9 fit of log1p(u) / u (Chebyshev nodes; within
      // 1.5e-7 relative in f32 arithmetic), instead of Highway's Log1p (a division).
      ok = hn::AllTrue(d, AbsWithin(d, x, 80.0, 700.0));
      V t;
      if constexpr (kF32<D>) {
        const V u = ExpNormalF32(d, hn::Neg(hn::Abs(x)));
        V p = hn::MulAdd(hn::Set(d, -3.176057013e-03f), u, hn::Set(d, 1.954252645e-02f));
        p = hn::MulAdd(p, u, hn::Set(d, -5.637361109e-02f));
        p = hn::MulAdd(p, u, hn::Set(d, 1.054362357e-01f));
        p = hn::MulAdd(p, u, hn::Set(d, -1.526966691e-01f));
        p = hn::MulAdd(p, u, hn::Set(d, 1.966327429e-01f));
        p = hn::MulAdd(p, u, hn::Set(d, -2.495161593e-01f));
        p = hn::MulAdd(p, u, hn::Set(d, 3.332971036e-01f));
        p = hn::MulAdd(p, u, hn::Set(d, -4.999989271e-01f));
        p = hn::MulAdd(p, u, hn::Set(d, 1.0f));
        t = hn::Mul(u, p);
      } else {
        t = hn::Log1p(d, hn::Exp(d, hn::Neg(hn::Abs(x))));
      }
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

// e^t for f32 t in [-87.3, 0], as ExpNormalF32 (t = q ln2 + r, e^r * 2^q) but with a
// degree-5 polynomial for e^r on [-ln2/2, ln2/2] instead of degree 7: relative error
// 1.1e-7, under one f32 ulp (a Lawson-weighted least-squares fit for relative error, the
// coefficients rounded to f32 and rechecked), two FMAs fewer per vector. The softmax
// family is bound by these exps' FP pipes (two per element along an outer dim: a 512-bit
// FMA per cycle on Zen 4), so they set its speed: softmax(0) / softmax(1) of [128, 1024]
// f32 in L2 on one thread 93-101 / 56-61 -> 88-91 / 51-55 us CPU time (against the degree-7
// build, interleaved, load 3-5; docs/benchmarks.md).
template <class D, class V>
HWY_INLINE V ExpSoftF32(D d, V t) {
  V z;
  const V r = ExpReduceF32(d, t, z);
  const V r2 = hn::Mul(r, r);
  const V p01 = hn::MulAdd(hn::Set(d, 1.666711420e-01f), r, hn::Set(d, 4.999923110e-01f));
  const V p23 = hn::MulAdd(hn::Set(d, 8.312527090e-03f), r, hn::Set(d, 4.189011455e-02f));
  const V y = hn::Add(hn::MulAdd(hn::MulAdd(p23, r2, p01), r2, r), hn::Set(d, 1.0f));  // e^r
  return ExpScaleF32(d, y, z);
}

// e^t for t <= 0 or NaN: the vector Exp where it is accurate, exactly 0 below the
// smallest denormal's log; `ok` false when a lane needs libm (NaN or the denormal range).
template <class D, class V>
HWY_INLINE V ExpNonPos(D d, V t, bool& ok) {
  using T = TFromD<D>;
  const V lo = hn::Set(d, T(kF32<D> ? -87.3 : -708.0));
  if constexpr (kF32<D>) {
    if (HWY_LIKELY(hn::AllTrue(d, hn::Ge(t, lo)))) return ExpSoftF32(d, hn::Min(t, hn::Zero(d)));
  }
  const auto under = hn::Lt(t, hn::Set(d, T(kF32<D> ? -104.0 : -746.0)));
  ok = hn::AllTrue(d, hn::Or(hn::Ge(t, lo), under));
  if constexpr (kF32<D>) return hn::IfThenZeroElse(under, ExpSoftF32(d, hn::Min(hn::Max(t, lo), hn::Zero(d))));
  else return hn::IfThenZeroElse(under, hn::Exp(d, hn::Max(t, lo)));
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

// exp(t) for t <= 0: ExpNonPos, with the lanes it cannot take exactly done by std::exp.
template <class D, class V = hn::Vec<D>, class T = TFromD<D>>
HWY_INLINE V ExpNonPosExact(D d, V t) {
  bool ok = true;
  V e = ExpNonPos(d, t, ok);
  if (HWY_UNLIKELY(!ok)) {
    HWY_ALIGN T buf[hn::MaxLanes(d)];
    hn::Store(t, d, buf);
    for (size_t q = 0; q < hn::Lanes(d); ++q) buf[q] = ScalarExp<T>(buf[q]);
    e = hn::Load(d, buf);
  }
  return e;
}

// What a softmax row's exp pass writes to out: the exps (softmax, softmin), or the shifted
// x - max (log_softmax, whose last pass then subtracts log(sum) in place). Writing in the exp
// pass, while the FP pipe is busy, hides the first touch of out's lines (a read for
// ownership from memory); log_softmax's last pass reading x and writing out cold took 1.2-1.3x
// softmax's time on [4096, 1024] (one pass of stores that waited on memory).
enum class RowStore : std::uint8_t { Exp, Shifted };

// exp(x[k..] - max) of one vector of a softmax row (negated x for softmin), its exp or its
// shifted value stored to out.
template <class D, class V, class T = TFromD<D>>
HWY_INLINE V RowExp(D d, const T* x, T* out, size_t k, V vm, bool neg, RowStore store) {
  const V v = hn::LoadU(d, x + k);
  const V t = hn::Sub(neg ? hn::Neg(v) : v, vm);
  const V e = ExpNonPosExact(d, t);
  hn::StoreU(store == RowStore::Exp ? e : t, d, out + k);
  return e;
}

// One row of n > 0 contiguous elements.
template <class T>
HWY_INLINE void SoftRow(SoftOp op, const T* x, T* out, size_t n) {
  const hn::ScalableTag<T> d;
  const size_t N = hn::Lanes(d);
  const bool neg = op == SoftOp::Softmin;
  auto load = [&](size_t i) HWY_ATTR { const auto v = hn::LoadU(d, x + i); return neg ? hn::Neg(v) : v; };
  auto get = [&](size_t i) { return neg ? -x[i] : x[i]; };
  // Pass 1: the max, four independent chains. A NaN is not looked for here: it makes the
  // max NaN, or its own exp below NaN, so the sum comes out NaN either way.
  T mx = -std::numeric_limits<T>::infinity();
  size_t i = 0;
  bool nan = false;
  if (n >= N) {
    auto m0 = load(0), m1 = m0, m2 = m0, m3 = m0;
    for (; i + 4 * N <= n; i += 4 * N) {
      m0 = hn::Max(m0, load(i));
      m1 = hn::Max(m1, load(i + N));
      m2 = hn::Max(m2, load(i + 2 * N));
      m3 = hn::Max(m3, load(i + 3 * N));
    }
    for (; i + N <= n; i += N) m0 = hn::Max(m0, load(i));
    mx = hn::GetLane(hn::MaxOfLanes(d, hn::Max(hn::Max(m0, m1), hn::Max(m2, m3))));
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
  // Pass 2: e = exp(x - max), stored for softmax, summed (compensated, two independent
  // chains: one chain's dependent adds, not the exps, bounded the loop) for all.
  const auto vm = hn::Set(d, mx);
  const RowStore store = op == SoftOp::LogSoftmax ? RowStore::Shifted : RowStore::Exp;
  auto s0 = hn::Zero(d), c0 = hn::Zero(d), s1 = hn::Zero(d), c1 = hn::Zero(d);
  T tail = 0;
  for (i = 0; i + 2 * N <= n; i += 2 * N) {
    KahanAdd(s0, c0, RowExp(d, x, out, i, vm, neg, store));
    KahanAdd(s1, c1, RowExp(d, x, out, i + N, vm, neg, store));
  }
  for (; i + N <= n; i += N) KahanAdd(s0, c0, RowExp(d, x, out, i, vm, neg, store));
  double sum = (static_cast<double>(hn::GetLane(hn::SumOfLanes(d, s0))) - static_cast<double>(hn::GetLane(hn::SumOfLanes(d, c0)))) +
               (static_cast<double>(hn::GetLane(hn::SumOfLanes(d, s1))) - static_cast<double>(hn::GetLane(hn::SumOfLanes(d, c1))));
  for (size_t k = i; k < n; ++k) {
    const T t = get(k) - mx, e = ScalarExp<T>(t);
    out[k] = store == RowStore::Exp ? e : t;
    tail += e;
  }
  sum += static_cast<double>(tail);
  if (std::isnan(sum)) {  // a NaN in the row
    for (size_t k = 0; k < n; ++k) out[k] = std::numeric_limits<T>::quiet_NaN();
    return;
  }
  // Pass 3 (over the row just written, still in cache).
  if (op == SoftOp::LogSoftmax) {
    const T lse = static_cast<T>(std::log(sum));
    const auto vl = hn::Set(d, lse);
    for (i = 0; i + N <= n; i += N) hn::StoreU(hn::Sub(hn::LoadU(d, out + i), vl), d, out + i);
    for (; i < n; ++i) out[i] -= lse;
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

// Along an outer dim, m lanes (x[j * inner + i]), in two passes over memory instead of
// three: SoftColsStats folds rows into per-lane running values, SoftColsFinish turns
// them into each lane's max and scale, SoftColsWrite writes the result.

// Double lanes from as many T lanes at p (f32 promoted, f64 as is), and back.
template <class DD, class DT>
HWY_INLINE hn::Vec<DD> LoadAsDouble(DD dd, DT dt, const hn::TFromD<DT>* p) {
  if constexpr (sizeof(hn::TFromD<DT>) == 8) return hn::LoadU(dd, p);
  else return hn::PromoteTo(dd, hn::LoadU(dt, p));
}
template <class DD, class DT>
HWY_INLINE void StoreFromDouble(DD dd, DT dt, hn::Vec<DD> v, hn::TFromD<DT>* p) {
  if constexpr (sizeof(hn::TFromD<DT>) == 8) hn::StoreU(v, dd, p);
  else hn::StoreU(hn::DemoteTo(dt, v), dt, p);
}

// Pass 1: rows [0, n) folded into the per-lane running max mx (T) and sum s (double) of
// exp(x - mx), both initialised by the caller (-inf, 0) and in the same state afterwards.
// Blocks of kRows rows, each read in memory order: the block's max; the running sum
// rescaled once per block by exp(old max - new max) (in double, so that a lane whose max
// rises in every block keeps its precision); then the block's exps (in T, the rows
// re-read from L2) added. One exp per element, plus one per block and lane vector where a
// lane's max rose: blocks of 8 rows held in registers took that double exp in most blocks
// of random data (a 16-lane vector's max rises often); 32 rows: softmax(0) of [4096,
// 1024] 3.7-4.1 -> 3.1-3.4 ms (load 4.5, alternating runs). A NaN makes s NaN; a lane of -inf keeps
// mx = -inf and s = 0 (its terms are taken as 0 until a finite max).
template <class T>
HWY_INLINE void SoftColsStats(SoftOp op, const T* HWY_RESTRICT x, size_t n, size_t inner, size_t m, T* HWY_RESTRICT mx,
                              double* HWY_RESTRICT s) {
  constexpr size_t kRows = 32;
  const hn::ScalableTag<T> d;
  const size_t N = hn::Lanes(d);
  const hn::ScalableTag<double> dd;
  const hn::Rebind<T, decltype(dd)> dt;  // as many T lanes as double lanes
  const size_t Nd = hn::Lanes(dd);
  const bool neg = op == SoftOp::Softmin;
  const T lowest = std::numeric_limits<T>::lowest();
  auto load = [&](const T* p) HWY_ATTR { const auto v = hn::LoadU(d, p); return neg ? hn::Neg(v) : v; };
  const size_t mv = m - m % N;
  // Per block: bm the block's max, then the max subtracted; bo the running max before
  // the block; bs the block's sum of exps.
  auto scratch = hwy::AllocateAligned<T>(3 * mv + 1);
  T* HWY_RESTRICT bm = scratch.get();
  T* HWY_RESTRICT bo = bm + mv;
  T* HWY_RESTRICT bs = bo + mv;
  for (size_t j0 = 0; j0 < n; j0 += kRows) {
    const size_t rows = std::min(kRows, n - j0);
    const T* base = x + j0 * inner;
    if (mv > 0) {
      for (size_t i = 0; i < mv; i += N) hn::StoreU(load(base + i), d, bm + i);
      for (size_t k = 1; k < rows; ++k) {
        const T* row = base + k * inner;
        for (size_t i = 0; i < mv; i += N) hn::StoreU(hn::Max(hn::LoadU(d, bm + i), load(row + i)), d, bm + i);
      }
      for (size_t i = 0; i < mv; i += N) {
        const auto mo = hn::LoadU(d, mx + i);
        const auto mn = hn::Max(mo, hn::LoadU(d, bm + i));
        hn::StoreU(mn, d, mx + i);
        hn::StoreU(mo, d, bo + i);
        hn::StoreU(hn::Max(mn, hn::Set(d, lowest)), d, bm + i);  // -inf lanes: terms -inf - lowest = -inf, exp 0
      }
      for (size_t i = 0; i < mv; i += N) hn::StoreU(ExpNonPosExact(d, hn::Sub(load(base + i), hn::LoadU(d, bm + i))), d, bs + i);
      for (size_t k = 1; k < rows; ++k) {
        const T* row = base + k * inner;
        for (size_t i = 0; i < mv; i += N)
          hn::StoreU(hn::Add(hn::LoadU(d, bs + i), ExpNonPosExact(d, hn::Sub(load(row + i), hn::LoadU(d, bm + i)))), d, bs + i);
      }
      for (size_t i = 0; i < mv; i += N) {
        if (hn::AllTrue(d, hn::Eq(hn::LoadU(d, bo + i), hn::LoadU(d, mx + i)))) {  // no lane's max rose (the common case)
          for (size_t h = 0; h < N; h += Nd)
            hn::StoreU(hn::Add(hn::LoadU(dd, s + i + h), LoadAsDouble(dd, dt, bs + i + h)), dd, s + i + h);
          continue;
        }
        for (size_t h = 0; h < N; h += Nd) {
          const auto o = LoadAsDouble(dd, dt, bo + i + h), nw = LoadAsDouble(dd, dt, mx + i + h);
          // exp(o - nw) <= 1; exactly 1 where the max stayed (also -inf to -inf), ~0 from -inf.
          const auto f = hn::IfThenElse(hn::Eq(o, nw), hn::Set(dd, 1.0),
                                        hn::Exp(dd, hn::Max(hn::Sub(o, nw), hn::Set(dd, -700.0))));
          const auto sv = hn::LoadU(dd, s + i + h);
          hn::StoreU(hn::MulAdd(sv, f, LoadAsDouble(dd, dt, bs + i + h)), dd, s + i + h);
        }
      }
    }
    for (size_t i = mv; i < m; ++i) {
      T bm = neg ? -base[i] : base[i];
      for (size_t k = 1; k < rows; ++k) {
        const T v = neg ? -base[k * inner + i] : base[k * inner + i];
        bm = std::isnan(v) ? v : (v > bm ? v : bm);
      }
      const T mo = mx[i], mn = std::isnan(bm) || std::isnan(mo) ? std::numeric_limits<T>::quiet_NaN() : std::max(mo, bm);
      mx[i] = mn;
      const T msub = std::isnan(mn) ? mn : std::max(mn, lowest);
      T sum = 0;
      for (size_t k = 0; k < rows; ++k) sum += ScalarExp<T>((neg ? -base[k * inner + i] : base[k * inner + i]) - msub);
      const double od = static_cast<double>(mo), nd = static_cast<double>(mn);
      const double f = od == nd ? 1.0 : std::exp(std::max(od - nd, -700.0));
      s[i] = s[i] * f + static_cast<double>(sum);
    }
  }
}

// Joins `groups` partial states (group g's lanes at pm / ps + g * stride) into each lane's
// max M and scale: 1 / sum (softmax, softmin) or log(sum) (log_softmax), in double, groups
// in order. A lane with a NaN or without a finite max gets M = +inf and scale NaN, which
// makes SoftColsWrite give NaN.
template <class T>
HWY_INLINE void SoftColsFinish(SoftOp op, const T* HWY_RESTRICT pm, const double* HWY_RESTRICT ps, size_t groups,
                               size_t stride, size_t m, T* HWY_RESTRICT M, T* HWY_RESTRICT scale) {
  const hn::ScalableTag<double> dd;
  const hn::Rebind<T, decltype(dd)> dt;
  const size_t Nd = hn::Lanes(dd);
  const bool log = op == SoftOp::LogSoftmax;
  const auto inf = hn::Set(dd, std::numeric_limits<double>::infinity());
  size_t i = 0;
  for (; i + Nd <= m; i += Nd) {
    auto mv = LoadAsDouble(dd, dt, pm + i);
    auto bad = hn::IsNaN(mv);
    for (size_t g = 1; g < groups; ++g) {
      const auto v = LoadAsDouble(dd, dt, pm + g * stride + i);
      bad = hn::Or(bad, hn::IsNaN(v));
      mv = hn::Max(mv, v);
    }
    auto sum = hn::Zero(dd);
    for (size_t g = 0; g < groups; ++g) {
      const auto v = LoadAsDouble(dd, dt, pm + g * stride + i);
      const auto f = hn::IfThenElse(hn::Eq(v, mv), hn::Set(dd, 1.0), hn::Exp(dd, hn::Max(hn::Sub(v, mv), hn::Set(dd, -700.0))));
      sum = hn::MulAdd(hn::LoadU(dd, ps + g * stride + i), f, sum);
    }
    bad = hn::Or(bad, hn::Or(hn::IsNaN(sum), hn::Not(hn::Lt(hn::Abs(mv), inf))));
    const auto sc = log ? hn::Log(dd, sum) : hn::Div(hn::Set(dd, 1.0), sum);
    StoreFromDouble(dd, dt, hn::IfThenElse(bad, inf, mv), M + i);
    StoreFromDouble(dd, dt, hn::IfThenElse(bad, hn::Set(dd, std::numeric_limits<double>::quiet_NaN()), sc), scale + i);
  }
  for (; i < m; ++i) {
    double mv = static_cast<double>(pm[i]);
    bool bad = std::isnan(mv);
    for (size_t g = 1; g < groups; ++g) {
      const double v = static_cast<double>(pm[g * stride + i]);
      bad = bad || std::isnan(v);
      mv = std::max(mv, v);
    }
    double sum = 0;
    for (size_t g = 0; g < groups; ++g) {
      const double v = static_cast<double>(pm[g * stride + i]);
      sum += ps[g * stride + i] * (v == mv ? 1.0 : std::exp(std::max(v - mv, -700.0)));
    }
    bad = bad || std::isnan(sum) || !std::isfinite(mv);
    M[i] = bad ? std::numeric_limits<T>::infinity() : static_cast<T>(mv);
    scale[i] = bad ? std::numeric_limits<T>::quiet_NaN() : static_cast<T>(log ? std::log(sum) : 1.0 / sum);
  }
}

// Pass 2: rows [0, n) of m lanes written: exp(x - M) * scale, or (x - M) - scale for
// log_softmax (the formulas of the row kernel).
template <class T>
HWY_INLINE void SoftColsWrite(SoftOp op, const T* HWY_RESTRICT x, T* HWY_RESTRICT out, size_t n, size_t inner, size_t m,
                              const T* HWY_RESTRICT M, const T* HWY_RESTRICT scale) {
  const hn::ScalableTag<T> d;
  const size_t N = hn::Lanes(d);
  const bool neg = op == SoftOp::Softmin, log = op == SoftOp::LogSoftmax;
  auto load = [&](const T* p) HWY_ATTR { const auto v = hn::LoadU(d, p); return neg ? hn::Neg(v) : v; };
  const size_t mv = m - m % N;
  for (size_t j = 0; j < n; ++j) {
    const T* row = x + j * inner;
    T* orow = out + j * inner;
    for (size_t i = 0; i < mv; i += N) {
      const auto t = hn::Sub(load(row + i), hn::LoadU(d, M + i));
      if (log) {
        hn::StoreU(hn::Sub(t, hn::LoadU(d, scale + i)), d, orow + i);
        continue;
      }
      hn::StoreU(hn::Mul(ExpNonPosExact(d, t), hn::LoadU(d, scale + i)), d, orow + i);
    }
    for (size_t i = mv; i < m; ++i) {
      const T t = (neg ? -row[i] : row[i]) - M[i];
      orow[i] = log ? t - scale[i] : ScalarExp<T>(t) * scale[i];
    }
  }
}

// All three steps for one block of lanes (one group).
template <class T>
HWY_INLINE void SoftCols(SoftOp op, const T* HWY_RESTRICT x, T* HWY_RESTRICT out, size_t n, size_t inner, size_t m) {
  if (n == 0 || m == 0) return;
  auto mx = hwy::AllocateAligned<T>(3 * m);
  auto s = hwy::AllocateAligned<double>(m);
  for (size_t i = 0; i < m; ++i) {
    mx[i] = -std::numeric_limits<T>::infinity();
    s[i] = 0;
  }
  SoftColsStats(op, x, n, inner, m, mx.get(), s.get());
  SoftColsFinish(op, mx.get(), s.get(), 1, m, m, mx.get() + m, mx.get() + 2 * m);
  SoftColsWrite(op, x, out, n, inner, m, mx.get() + m, mx.get() + 2 * m);
}

void ActF32(ActOp op, const float* x, float* out, size_t n, float p, float q) { Act(op, x, out, n, p, q); }
void ActF64(ActOp op, const double* x, double* out, size_t n, double p, double q) { Act(op, x, out, n, p, q); }
void Act2F32(Act2Op op, const float* a, const float* b, bool bs, float* out, size_t n) { Act2(op, a, b, bs, out, n); }
void Act2F64(Act2Op op, const double* a, const double* b, bool bs, double* out, size_t n) { Act2(op, a, b, bs, out, n); }
void SoftRowsF32(SoftOp op, const float* x, float* out, size_t rows, size_t n, size_t ld) { SoftRows(op, x, out, rows, n, ld); }
void SoftRowsF64(SoftOp op, const double* x, double* out, size_t rows, size_t n, size_t ld) { SoftRows(op, x, out, rows, n, ld); }
void SoftColsF32(SoftOp op, const float* x, float* out, size_t n, size_t inner, size_t m) { SoftCols(op, x, out, n, inner, m); }
void SoftColsF64(SoftOp op, const double* x, double* out, size_t n, size_t inner, size_t m) { SoftCols(op, x, out, n, inner, m); }
void SoftColsStatsF32(SoftOp op, const float* x, size_t n, size_t inner, size_t m, float* mx, double* s) {
  SoftColsStats(op, x, n, inner, m, mx, s);
}
void SoftColsStatsF64(SoftOp op, const double* x, size_t n, size_t inner, size_t m, double* mx, double* s) {
  SoftColsStats(op, x, n, inner, m, mx, s);
}
void SoftColsFinishF32(SoftOp op, const float* pm, const double* ps, size_t groups, size_t stride, size_t m, float* M,
                       float* scale) {
  SoftColsFinish(op, pm, ps, groups, stride, m, M, scale);
}
void SoftColsFinishF64(SoftOp op, const double* pm, const double* ps, size_t groups, size_t stride, size_t m, double* M,
                       double* scale) {
  SoftColsFinish(op, pm, ps, groups, stride, m, M, scale);
}
void SoftColsWriteF32(SoftOp op, const float* x, float* out, size_t n, size_t inner, size_t m, const float* M,
                      const float* scale) {
  SoftColsWrite(op, x, out, n, inner, m, M, scale);
}
void SoftColsWriteF64(SoftOp op, const double* x, double* out, size_t n, size_t inner, size_t m, const double* M,
                      const double* scale) {
  SoftColsWrite(op, x, out, n, inner, m, M, scale);
}

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
HWY_EXPORT(SoftColsStatsF32);
HWY_EXPORT(SoftColsStatsF64);
HWY_EXPORT(SoftColsFinishF32);
HWY_EXPORT(SoftColsFinishF64);
HWY_EXPORT(SoftColsWriteF32);
HWY_EXPORT(SoftColsWriteF64);

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
// ones (compute-bound) from 256K in chunks of 64K; the cheap selects (relu, leaky_relu,
// hard_sigmoid, relu_backward, prelu, sigmoid_backward) are memory-bound and go from 1M
// in stream_chunk pieces, as the cheap unary ops and the binary ops do (unary_hwy.cpp,
// binary_hwy.cpp): one core does not reach the machine's bandwidth everywhere (on a
// Xeon, 2026-12-07, relu of 16M f32 on one thread took 8.6 ms, 2.8x a 2-thread
// mul_scalar of the same bytes; 4.4 ms on two). Earlier they never split, which an AMD
// EPYC (32 MiB L3) did not punish.
// Why 256K for the math ops: with parallel_chunks two threads are not slower than one
// from 256K elements up, also with both cores busy; below that a helper's wake-up costs
// more than the second thread saves.
constexpr std::size_t kParallelMathElems = std::size_t{1} << 18;
constexpr std::size_t kParallelCheapElems = std::size_t{1} << 20;
constexpr std::size_t kChunkElems = std::size_t{1} << 16;

bool is_math(ActOp op) { return op == ActOp::Gelu || op == ActOp::Sigmoid || op == ActOp::LogSigmoid; }
bool is_math(Act2Op op) { return op == Act2Op::GeluGrad || op == Act2Op::LogSigmoidGrad; }

template <class Body>
void chunked(std::size_t n, bool math, Body body) {
  if (n < (math ? kParallelMathElems : kParallelCheapElems)) return body(0, n);
  const std::size_t len = math ? kChunkElems : stream_chunk(n);  // both multiples of 64 elements
  auto one = [&](std::size_t c) {
    const std::size_t b = c * len;
    body(b, std::min(n, b + len) - b);
  };
  parallel_chunks((n + len - 1) / len, one);
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
void soft_cols_stats_f32(SoftOp op, const float* x, std::size_t n, std::size_t inner, std::size_t m, float* mx, double* s) {
  HWY_DYNAMIC_DISPATCH(SoftColsStatsF32)(op, x, n, inner, m, mx, s);
}
void soft_cols_stats_f64(SoftOp op, const double* x, std::size_t n, std::size_t inner, std::size_t m, double* mx,
                         double* s) {
  HWY_DYNAMIC_DISPATCH(SoftColsStatsF64)(op, x, n, inner, m, mx, s);
}
void soft_cols_finish_f32(SoftOp op, const float* pm, const double* ps, std::size_t groups, std::size_t stride,
                          std::size_t m, float* M, float* scale) {
  HWY_DYNAMIC_DISPATCH(SoftColsFinishF32)(op, pm, ps, groups, stride, m, M, scale);
}
void soft_cols_finish_f64(SoftOp op, const double* pm, const double* ps, std::size_t groups, std::size_t stride,
                          std::size_t m, double* M, double* scale) {
  HWY_DYNAMIC_DISPATCH(SoftColsFinishF64)(op, pm, ps, groups, stride, m, M, scale);
}
void soft_cols_write_f32(SoftOp op, const float* x, float* out, std::size_t n, std::size_t inner, std::size_t m,
                         const float* M, const float* scale) {
  HWY_DYNAMIC_DISPATCH(SoftColsWriteF32)(op, x, out, n, inner, m, M, scale);
}
void soft_cols_write_f64(SoftOp op, const double* x, double* out, std::size_t n, std::size_t inner, std::size_t m,
                         const double* M, const double* scale) {
  HWY_DYNAMIC_DISPATCH(SoftColsWriteF64)(op, x, out, n, inner, m, M, scale);
}

}  // namespace tensor::cpu::simd
#endif  // HWY_ONCE
