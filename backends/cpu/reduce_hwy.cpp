// Highway kernels for sum / max / min over contiguous f32 and f64 runs, compiled
// once per target; the HWY_ONCE wrappers split long runs across OpenMP threads.
#include "backends/cpu/reduce_hwy.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "backends/cpu/parallel.hpp"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backends/cpu/reduce_hwy.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/aligned_allocator.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace tensor::cpu::simd {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Sum in double of n elements of T (float lanes are promoted half a vector at a time).
template <class T>
HWY_INLINE double SumImpl(const T* HWY_RESTRICT x, size_t n) {
  const hn::ScalableTag<double> dd;
  const hn::Rebind<T, decltype(dd)> dt;  // as many T lanes as double lanes
  const size_t N = hn::Lanes(dd);
  auto a0 = hn::Zero(dd), a1 = hn::Zero(dd), a2 = hn::Zero(dd), a3 = hn::Zero(dd);
  auto load = [&](size_t i) HWY_ATTR {
    if constexpr (sizeof(T) == 8) return hn::LoadU(dt, x + i);
    else return hn::PromoteTo(dd, hn::LoadU(dt, x + i));
  };
  size_t i = 0;
  for (; i + 4 * N <= n; i += 4 * N) {
    a0 = hn::Add(a0, load(i));
    a1 = hn::Add(a1, load(i + N));
    a2 = hn::Add(a2, load(i + 2 * N));
    a3 = hn::Add(a3, load(i + 3 * N));
  }
  for (; i + N <= n; i += N) a0 = hn::Add(a0, load(i));
  double s = hn::GetLane(hn::SumOfLanes(dd, hn::Add(hn::Add(a0, a1), hn::Add(a2, a3))));
  for (; i < n; ++i) s += static_cast<double>(x[i]);
  return s;
}

// Sum of (x[i] - mu)^2 in double (the centred second moment of a layer_norm row).
template <class T>
HWY_INLINE double SumSqDevImpl(const T* HWY_RESTRICT x, size_t n, double mu) {
  const hn::ScalableTag<double> dd;
  const hn::Rebind<T, decltype(dd)> dt;
  const size_t N = hn::Lanes(dd);
  const auto m = hn::Set(dd, mu);
  auto a0 = hn::Zero(dd), a1 = hn::Zero(dd), a2 = hn::Zero(dd), a3 = hn::Zero(dd);
  auto dev = [&](size_t i) HWY_ATTR {
    if constexpr (sizeof(T) == 8) return hn::Sub(hn::LoadU(dt, x + i), m);
    else return hn::Sub(hn::PromoteTo(dd, hn::LoadU(dt, x + i)), m);
  };
  size_t i = 0;
  for (; i + 4 * N <= n; i += 4 * N) {
    const auto c0 = dev(i), c1 = dev(i + N), c2 = dev(i + 2 * N), c3 = dev(i + 3 * N);
    a0 = hn::MulAdd(c0, c0, a0);
    a1 = hn::MulAdd(c1, c1, a1);
    a2 = hn::MulAdd(c2, c2, a2);
    a3 = hn::MulAdd(c3, c3, a3);
  }
  for (; i + N <= n; i += N) {
    const auto c = dev(i);
    a0 = hn::MulAdd(c, c, a0);
  }
  double s = hn::GetLane(hn::SumOfLanes(dd, hn::Add(hn::Add(a0, a1), hn::Add(a2, a3))));
  for (; i < n; ++i) {
    const double c = static_cast<double>(x[i]) - mu;
    s += c * c;
  }
  return s;
}

// Max (kMax) or min of n > 0 elements; NaN when any element is NaN.
// kAbs: of |x| (max_abs).
template <class T, bool kMax, bool kAbs = false>
HWY_INLINE T ExtremumImpl(const T* HWY_RESTRICT x, size_t n) {
  const hn::ScalableTag<T> d;
  const size_t N = hn::Lanes(d);
  auto pick = [](auto a, auto b) HWY_ATTR { return kMax ? hn::Max(a, b) : hn::Min(a, b); };
  auto load = [&](size_t i) HWY_ATTR {
    if constexpr (kAbs) return hn::Abs(hn::LoadU(d, x + i));
    else return hn::LoadU(d, x + i);
  };
  size_t i = 0;
  T r = kAbs ? std::fabs(x[0]) : x[0];
  bool nan = false;
  if (n >= 4 * N) {
    auto m0 = load(0), m1 = m0, m2 = m0, m3 = m0;
    auto bad = hn::IsNaN(m0);  // NaN lanes seen so far (Ne is an ordered compare: false for NaN)
    for (; i + 4 * N <= n; i += 4 * N) {
      const auto v0 = load(i), v1 = load(i + N);
      const auto v2 = load(i + 2 * N), v3 = load(i + 3 * N);
      bad = hn::Or(bad, hn::Or(hn::Or(hn::IsNaN(v0), hn::IsNaN(v1)), hn::Or(hn::IsNaN(v2), hn::IsNaN(v3))));
      m0 = pick(m0, v0);
      m1 = pick(m1, v1);
      m2 = pick(m2, v2);
      m3 = pick(m3, v3);
    }
    nan = !hn::AllFalse(d, bad);
    const auto m = pick(pick(m0, m1), pick(m2, m3));
    r = hn::GetLane(kMax ? hn::MaxOfLanes(d, m) : hn::MinOfLanes(d, m));
  }
  for (; i < n; ++i) {
    const T v = kAbs ? std::fabs(x[i]) : x[i];
    nan = nan || std::isnan(v);
    r = kMax ? (v > r ? v : r) : (v < r ? v : r);
  }
  return nan ? std::numeric_limits<T>::quiet_NaN() : r;
}

// acc[i] = acc[i] + x[i] (or *) in double.
template <class T>
HWY_INLINE void AccRows(double* HWY_RESTRICT acc, const T* HWY_RESTRICT x, size_t m, bool prod) {
  const hn::ScalableTag<double> dd;
  const hn::Rebind<T, decltype(dd)> dt;
  const size_t N = hn::Lanes(dd);
  auto load = [&](size_t i) HWY_ATTR {
    if constexpr (sizeof(T) == 8) return hn::LoadU(dt, x + i);
    else return hn::PromoteTo(dd, hn::LoadU(dt, x + i));
  };
  size_t i = 0;
  if (prod) {
    for (; i + N <= m; i += N) hn::StoreU(hn::Mul(hn::LoadU(dd, acc + i), load(i)), dd, acc + i);
    for (; i < m; ++i) acc[i] *= static_cast<double>(x[i]);
  } else {
    for (; i + 2 * N <= m; i += 2 * N) {
      hn::StoreU(hn::Add(hn::LoadU(dd, acc + i), load(i)), dd, acc + i);
      hn::StoreU(hn::Add(hn::LoadU(dd, acc + i + N), load(i + N)), dd, acc + i + N);
    }
    for (; i + N <= m; i += N) hn::StoreU(hn::Add(hn::LoadU(dd, acc + i), load(i)), dd, acc + i);
    for (; i < m; ++i) acc[i] += static_cast<double>(x[i]);
  }
}

// acc[i] (+ or *)= x[k * inner + i] for rows k in [0, rows), i < m, in double, each lane
// in row order (the same sums as acc_rows row by row). Blocks of 8 rows per vector of
// lanes: the running value stays in a register across the block (one load and store of
// acc per 8 rows instead of per row).
template <class T>
HWY_INLINE void AccRowsStrided(double* HWY_RESTRICT acc, const T* HWY_RESTRICT x, size_t rows, size_t inner, size_t m,
                               bool prod) {
  constexpr size_t kRows = 8;
  const hn::ScalableTag<double> dd;
  const hn::Rebind<T, decltype(dd)> dt;
  const size_t N = hn::Lanes(dd);
  auto load = [&](const T* p) HWY_ATTR {
    if constexpr (sizeof(T) == 8) return hn::LoadU(dt, p);
    else return hn::PromoteTo(dd, hn::LoadU(dt, p));
  };
  for (size_t j0 = 0; j0 < rows; j0 += kRows) {
    const size_t r = std::min(kRows, rows - j0);
    const T* base = x + j0 * inner;
    size_t i = 0;
    for (; i + N <= m; i += N) {
      auto a = hn::LoadU(dd, acc + i);
      if (prod) {
        for (size_t k = 0; k < r; ++k) a = hn::Mul(a, load(base + k * inner + i));
      } else {
        for (size_t k = 0; k < r; ++k) a = hn::Add(a, load(base + k * inner + i));
      }
      hn::StoreU(a, dd, acc + i);
    }
    for (; i < m; ++i)
      for (size_t k = 0; k < r; ++k) {
        const double v = static_cast<double>(base[k * inner + i]);
        acc[i] = prod ? acc[i] * v : acc[i] + v;
      }
  }
}

// s[i] += x[k * inner + i] - c[i] and q[i] += (x[k * inner + i] - c[i])^2 over the rows,
// in double: the shifted sums of a block of rows (var_mean along an outer dim in one
// pass; c near each lane's mean keeps the difference q - s^2 / n well-conditioned).
template <class T>
HWY_INLINE void ShiftedSumsRowsStrided(double* HWY_RESTRICT s, double* HWY_RESTRICT q, const T* HWY_RESTRICT x, size_t rows,
                                       size_t inner, size_t m, const double* HWY_RESTRICT c) {
  constexpr size_t kRows = 8;
  const hn::ScalableTag<double> dd;
  const hn::Rebind<T, decltype(dd)> dt;
  const size_t N = hn::Lanes(dd);
  auto load = [&](const T* p) HWY_ATTR {
    if constexpr (sizeof(T) == 8) return hn::LoadU(dt, p);
    else return hn::PromoteTo(dd, hn::LoadU(dt, p));
  };
  for (size_t j0 = 0; j0 < rows; j0 += kRows) {
    const size_t r = std::min(kRows, rows - j0);
    const T* base = x + j0 * inner;
    size_t i = 0;
    for (; i + N <= m; i += N) {
      auto a = hn::LoadU(dd, s + i), b = hn::LoadU(dd, q + i);
      const auto k = hn::LoadU(dd, c + i);
      for (size_t t = 0; t < r; ++t) {
        const auto v = hn::Sub(load(base + t * inner + i), k);
        a = hn::Add(a, v);
        b = hn::MulAdd(v, v, b);
      }
      hn::StoreU(a, dd, s + i);
      hn::StoreU(b, dd, q + i);
    }
    for (; i < m; ++i)
      for (size_t t = 0; t < r; ++t) {
        const double v = static_cast<double>(base[t * inner + i]) - c[i];
        s[i] += v;
        q[i] += v * v;
      }
  }
}

// First index of the extremum: the value by ExtremumImpl, then the first lane equal
// to it (or the first NaN).
template <class T, bool kMax, bool kAbs>
HWY_INLINE size_t ArgExt(const T* HWY_RESTRICT x, size_t n) {
  const T v = ExtremumImpl<T, kMax, kAbs>(x, n);
  const hn::ScalableTag<T> d;
  const size_t N = hn::Lanes(d);
  const bool nan = std::isnan(v);
  const auto vv = hn::Set(d, v);
  size_t i = 0;
  for (; i + N <= n; i += N) {
    const auto xv = kAbs ? hn::Abs(hn::LoadU(d, x + i)) : hn::LoadU(d, x + i);
    const intptr_t k = hn::FindFirstTrue(d, nan ? hn::IsNaN(xv) : hn::Eq(xv, vv));
    if (k >= 0) return i + static_cast<size_t>(k);
  }
  for (; i < n; ++i) {
    const T xi = kAbs ? std::fabs(x[i]) : x[i];
    if (nan ? std::isnan(xi) : xi == v) return i;
  }
  return 0;
}

// An outer-dim extremum of m lanes: the n rows stream by once (contiguous reads),
// each updating the running best and index of every lane, vectors across the lanes.
template <class T, bool kMax, bool kAbs>
HWY_INLINE void ArgExtColsImpl(const T* HWY_RESTRICT x, size_t n, size_t inner, size_t m, T* HWY_RESTRICT best,
                               std::int64_t* where) {
  using I = hwy::MakeSigned<T>;
  const hn::ScalableTag<T> d;
  const hn::RebindToSigned<decltype(d)> di;
  const size_t N = hn::Lanes(d);
  auto idx = hwy::AllocateAligned<I>(m + N);
  for (size_t i = 0; i < m; ++i) {
    best[i] = kAbs ? std::fabs(x[i]) : x[i];
    idx[i] = 0;
  }
  const size_t mv = m - m % N;
  // Blocks of 8 rows per vector of lanes: best and index stay in registers across the
  // block (one load and store each per 8 rows instead of per row).
  constexpr size_t kRows = 8;
  for (size_t j0 = 1; j0 < n; j0 += kRows) {
    const size_t r = std::min(kRows, n - j0);
    for (size_t i = 0; i < mv; i += N) {
      auto b = hn::LoadU(d, best + i);
      auto w = hn::Load(di, idx.get() + i);
      for (size_t k = 0; k < r; ++k) {
        const T* row = x + (j0 + k) * inner;
        const auto v = kAbs ? hn::Abs(hn::LoadU(d, row + i)) : hn::LoadU(d, row + i);
        const auto gt = kMax ? hn::Gt(v, b) : hn::Lt(v, b);
        const auto take = hn::Or(gt, hn::AndNot(hn::IsNaN(b), hn::IsNaN(v)));
        b = hn::IfThenElse(take, v, b);
        w = hn::IfThenElse(hn::RebindMask(di, take), hn::Set(di, static_cast<I>(j0 + k)), w);
      }
      hn::StoreU(b, d, best + i);
      hn::Store(w, di, idx.get() + i);
    }
    for (size_t k = 0; k < r; ++k) {
      const size_t j = j0 + k;
      const T* row = x + j * inner;
      for (size_t i = mv; i < m; ++i) {
        const T v = kAbs ? std::fabs(row[i]) : row[i], bb = best[i];
        if (!std::isnan(bb) && (std::isnan(v) || (kMax ? v > bb : v < bb))) {
          best[i] = v;
          idx[i] = static_cast<I>(j);
        }
      }
    }
  }
  for (size_t i = 0; i < m; ++i) where[i] = static_cast<std::int64_t>(idx[i]);
}

template <class T>
HWY_INLINE void ArgExtCols(const T* x, size_t n, size_t inner, size_t m, int kind, T* best, std::int64_t* where) {
  if (kind == kExtMin) ArgExtColsImpl<T, false, false>(x, n, inner, m, best, where);
  else if (kind == kExtMaxAbs) ArgExtColsImpl<T, true, true>(x, n, inner, m, best, where);
  else ArgExtColsImpl<T, true, false>(x, n, inner, m, best, where);
}
template <class T>
HWY_INLINE size_t ArgExtKind(const T* x, size_t n, int kind) {
  if (kind == kExtMin) return ArgExt<T, false, false>(x, n);
  if (kind == kExtMaxAbs) return ArgExt<T, true, true>(x, n);
  return ArgExt<T, true, false>(x, n);
}

// From x[0, n): the first block of 64 elements (the last one shorter) holding an element
// beyond t (!(x <= t) when kAbove, else !(x >= t): NaN counts); returns its start and
// sets *mask (bit i: element start + i is one), or returns n.
template <class T, bool kAbove>
HWY_INLINE size_t BeyondBlockImpl(const T* HWY_RESTRICT x, size_t n, T t, uint64_t* HWY_RESTRICT mask) {
  const hn::ScalableTag<T> d;
  const size_t N = hn::Lanes(d);
  const auto tv = hn::Set(d, t);
  auto beyond = [&](auto v) HWY_ATTR { return hn::Not(kAbove ? hn::Le(v, tv) : hn::Ge(v, tv)); };
  for (size_t b = 0; b < n; b += 64) {
    const size_t len = std::min<size_t>(64, n - b);
    uint64_t bits = 0;
    size_t i = 0;
    if (N <= 64 && 64 % N == 0) {
      for (; i + N <= len; i += N) {
        uint8_t bytes[8] = {};
        hn::StoreMaskBits(d, beyond(hn::LoadU(d, x + b + i)), bytes);
        uint64_t v = 0;
        for (size_t q = 0; q < (N + 7) / 8; ++q) v |= static_cast<uint64_t>(bytes[q]) << (8 * q);
        if (N < 64) v &= (uint64_t{1} << N) - 1;
        bits |= v << i;
      }
    }
    for (; i < len; ++i)
      if (!(kAbove ? x[b + i] <= t : x[b + i] >= t)) bits |= uint64_t{1} << i;
    if (bits) {
      *mask = bits;
      return b;
    }
  }
  return n;
}

size_t BeyondBlockF32(const float* x, size_t n, float t, bool above, uint64_t* mask) {
  return above ? BeyondBlockImpl<float, true>(x, n, t, mask) : BeyondBlockImpl<float, false>(x, n, t, mask);
}
size_t BeyondBlockF64(const double* x, size_t n, double t, bool above, uint64_t* mask) {
  return above ? BeyondBlockImpl<double, true>(x, n, t, mask) : BeyondBlockImpl<double, false>(x, n, t, mask);
}
void AccRowsF32(double* acc, const float* x, size_t m, bool prod) { AccRows(acc, x, m, prod); }
void AccRowsF64(double* acc, const double* x, size_t m, bool prod) { AccRows(acc, x, m, prod); }
void AccRowsStridedF32(double* acc, const float* x, size_t rows, size_t inner, size_t m, bool prod) {
  AccRowsStrided(acc, x, rows, inner, m, prod);
}
void AccRowsStridedF64(double* acc, const double* x, size_t rows, size_t inner, size_t m, bool prod) {
  AccRowsStrided(acc, x, rows, inner, m, prod);
}
size_t ArgExtF32(const float* x, size_t n, int kind) { return ArgExtKind(x, n, kind); }
size_t ArgExtF64(const double* x, size_t n, int kind) { return ArgExtKind(x, n, kind); }
void ShiftedSumsRowsStridedF32(double* s, double* q, const float* x, size_t rows, size_t inner, size_t m, const double* c) {
  ShiftedSumsRowsStrided(s, q, x, rows, inner, m, c);
}
void ShiftedSumsRowsStridedF64(double* s, double* q, const double* x, size_t rows, size_t inner, size_t m, const double* c) {
  ShiftedSumsRowsStrided(s, q, x, rows, inner, m, c);
}
void ArgExtColsF32(const float* x, size_t n, size_t inner, size_t m, int kind, float* best, std::int64_t* where) {
  ArgExtCols(x, n, inner, m, kind, best, where);
}
void ArgExtColsF64(const double* x, size_t n, size_t inner, size_t m, int kind, double* best, std::int64_t* where) {
  ArgExtCols(x, n, inner, m, kind, best, where);
}
float MaxAbsF32(const float* x, size_t n) { return ExtremumImpl<float, true, true>(x, n); }
double MaxAbsF64(const double* x, size_t n) { return ExtremumImpl<double, true, true>(x, n); }
double SumF32(const float* x, size_t n) { return SumImpl(x, n); }
double SumSqDevF32(const float* x, size_t n, double mu) { return SumSqDevImpl(x, n, mu); }
double SumSqDevF64(const double* x, size_t n, double mu) { return SumSqDevImpl(x, n, mu); }
double SumF64(const double* x, size_t n) { return SumImpl(x, n); }
float MaxF32(const float* x, size_t n) { return ExtremumImpl<float, true>(x, n); }
float MinF32(const float* x, size_t n) { return ExtremumImpl<float, false>(x, n); }
double MaxF64(const double* x, size_t n) { return ExtremumImpl<double, true>(x, n); }
double MinF64(const double* x, size_t n) { return ExtremumImpl<double, false>(x, n); }

}  // namespace HWY_NAMESPACE
}  // namespace tensor::cpu::simd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace tensor::cpu::simd {

HWY_EXPORT(SumF32);
HWY_EXPORT(SumF64);
HWY_EXPORT(MaxF32);
HWY_EXPORT(MinF32);
HWY_EXPORT(MaxF64);
HWY_EXPORT(MinF64);
HWY_EXPORT(AccRowsF32);
HWY_EXPORT(AccRowsF64);
HWY_EXPORT(AccRowsStridedF32);
HWY_EXPORT(AccRowsStridedF64);
HWY_EXPORT(MaxAbsF32);
HWY_EXPORT(MaxAbsF64);
HWY_EXPORT(ArgExtF32);
HWY_EXPORT(ArgExtF64);
HWY_EXPORT(ArgExtColsF32);
HWY_EXPORT(ArgExtColsF64);
HWY_EXPORT(BeyondBlockF32);
HWY_EXPORT(BeyondBlockF64);
HWY_EXPORT(SumSqDevF32);
HWY_EXPORT(SumSqDevF64);
HWY_EXPORT(ShiftedSumsRowsStridedF32);
HWY_EXPORT(ShiftedSumsRowsStridedF64);

namespace {

// Runs of at least this many elements are reduced in fixed chunks (stream_chunk),
// shared out by parallel_chunks and joined in chunk order, so the result does not
// depend on the thread count and a busy second core costs at most one chunk.
// Why this bound: with parallel_chunks two threads are not slower than one from 256K
// elements up, also with both cores busy; below that a helper's wake-up costs more than
// the second thread saves.
// Memory-bound, so splitting starts at 1M elements (long enough to dwarf the wake-up).
constexpr std::size_t kParallelReduceElems = std::size_t{1} << 20;
// kernel(x, n) over chunks (stream_chunk: their length depends on n only) of a long run,
// partials combined with `join` in chunk order.
template <class R, class T, class K, class J>
R chunked(const T* x, std::size_t n, K kernel, J join) {
  if (n < kParallelReduceElems) return kernel(x, n);
  const std::size_t len = stream_chunk(n);
  const std::size_t chunks = (n + len - 1) / len;
  std::vector<R> part(chunks);
  auto body = [&](std::size_t c) {
    const std::size_t b = c * len;
    part[c] = kernel(x + b, std::min(n, b + len) - b);
  };
  parallel_chunks(chunks, body);
  R r = part[0];
  for (std::size_t c = 1; c < chunks; ++c) r = join(r, part[c]);
  return r;
}

template <class T> T join_max(T a, T b) { return std::isnan(a) || std::isnan(b) ? a + b : std::max(a, b); }
template <class T> T join_min(T a, T b) { return std::isnan(a) || std::isnan(b) ? a + b : std::min(a, b); }

}  // namespace

double sum_f32(const float* x, std::size_t n) {
  return chunked<double>(x, n, HWY_DYNAMIC_DISPATCH(SumF32), [](double a, double b) { return a + b; });
}
double sum_f64(const double* x, std::size_t n) {
  return chunked<double>(x, n, HWY_DYNAMIC_DISPATCH(SumF64), [](double a, double b) { return a + b; });
}
float max_f32(const float* x, std::size_t n) { return chunked<float>(x, n, HWY_DYNAMIC_DISPATCH(MaxF32), join_max<float>); }
float min_f32(const float* x, std::size_t n) { return chunked<float>(x, n, HWY_DYNAMIC_DISPATCH(MinF32), join_min<float>); }
double max_f64(const double* x, std::size_t n) {
  return chunked<double>(x, n, HWY_DYNAMIC_DISPATCH(MaxF64), join_max<double>);
}
double min_f64(const double* x, std::size_t n) {
  return chunked<double>(x, n, HWY_DYNAMIC_DISPATCH(MinF64), join_min<double>);
}

void acc_rows_f32(double* acc, const float* x, std::size_t m, bool prod) { HWY_DYNAMIC_DISPATCH(AccRowsF32)(acc, x, m, prod); }
void acc_rows_f64(double* acc, const double* x, std::size_t m, bool prod) { HWY_DYNAMIC_DISPATCH(AccRowsF64)(acc, x, m, prod); }
void acc_rows_strided_f32(double* acc, const float* x, std::size_t rows, std::size_t inner, std::size_t m, bool prod) {
  HWY_DYNAMIC_DISPATCH(AccRowsStridedF32)(acc, x, rows, inner, m, prod);
}
void acc_rows_strided_f64(double* acc, const double* x, std::size_t rows, std::size_t inner, std::size_t m, bool prod) {
  HWY_DYNAMIC_DISPATCH(AccRowsStridedF64)(acc, x, rows, inner, m, prod);
}
double sum_sq_dev_f32(const float* x, std::size_t n, double mu) { return HWY_DYNAMIC_DISPATCH(SumSqDevF32)(x, n, mu); }
double sum_sq_dev_f64(const double* x, std::size_t n, double mu) { return HWY_DYNAMIC_DISPATCH(SumSqDevF64)(x, n, mu); }
void shifted_sums_rows_strided_f32(double* s, double* q, const float* x, std::size_t rows, std::size_t inner,
                                   std::size_t m, const double* c) {
  HWY_DYNAMIC_DISPATCH(ShiftedSumsRowsStridedF32)(s, q, x, rows, inner, m, c);
}
void shifted_sums_rows_strided_f64(double* s, double* q, const double* x, std::size_t rows, std::size_t inner,
                                   std::size_t m, const double* c) {
  HWY_DYNAMIC_DISPATCH(ShiftedSumsRowsStridedF64)(s, q, x, rows, inner, m, c);
}
std::size_t beyond_block_f32(const float* x, std::size_t n, float t, bool above, std::uint64_t* mask) {
  return HWY_DYNAMIC_DISPATCH(BeyondBlockF32)(x, n, t, above, mask);
}
std::size_t beyond_block_f64(const double* x, std::size_t n, double t, bool above, std::uint64_t* mask) {
  return HWY_DYNAMIC_DISPATCH(BeyondBlockF64)(x, n, t, above, mask);
}
std::size_t argext_f32(const float* x, std::size_t n, int kind) { return HWY_DYNAMIC_DISPATCH(ArgExtF32)(x, n, kind); }
std::size_t argext_f64(const double* x, std::size_t n, int kind) { return HWY_DYNAMIC_DISPATCH(ArgExtF64)(x, n, kind); }
void argext_cols_f32(const float* x, std::size_t n, std::size_t inner, std::size_t m, int kind, float* best,
                     std::int64_t* where) {
  HWY_DYNAMIC_DISPATCH(ArgExtColsF32)(x, n, inner, m, kind, best, where);
}
void argext_cols_f64(const double* x, std::size_t n, std::size_t inner, std::size_t m, int kind, double* best,
                     std::int64_t* where) {
  HWY_DYNAMIC_DISPATCH(ArgExtColsF64)(x, n, inner, m, kind, best, where);
}
float max_abs_f32(const float* x, std::size_t n) {
  return chunked<float>(x, n, HWY_DYNAMIC_DISPATCH(MaxAbsF32), join_max<float>);
}
double max_abs_f64(const double* x, std::size_t n) {
  return chunked<double>(x, n, HWY_DYNAMIC_DISPATCH(MaxAbsF64), join_max<double>);
}

}  // namespace tensor::cpu::simd
#endif  // HWY_ONCE
