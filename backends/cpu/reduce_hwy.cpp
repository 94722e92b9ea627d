// Highway kernels for sum / max / min over contiguous f32 and f64 runs, compiled
// once per target; the HWY_ONCE wrappers split long runs across OpenMP threads.
#include "backends/cpu/reduce_hwy.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#if TENSOR_HAVE_OPENMP
#include <omp.h>
#endif

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backends/cpu/reduce_hwy.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
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

// Max (kMax) or min of n > 0 elements; NaN when any element is NaN.
template <class T, bool kMax>
HWY_INLINE T ExtremumImpl(const T* HWY_RESTRICT x, size_t n) {
  const hn::ScalableTag<T> d;
  const size_t N = hn::Lanes(d);
  auto pick = [](auto a, auto b) HWY_ATTR { return kMax ? hn::Max(a, b) : hn::Min(a, b); };
  size_t i = 0;
  T r = x[0];
  bool nan = false;
  if (n >= 4 * N) {
    auto m0 = hn::LoadU(d, x), m1 = m0, m2 = m0, m3 = m0;
    auto bad = hn::IsNaN(m0);  // NaN lanes seen so far (Ne is an ordered compare: false for NaN)
    for (; i + 4 * N <= n; i += 4 * N) {
      const auto v0 = hn::LoadU(d, x + i), v1 = hn::LoadU(d, x + i + N);
      const auto v2 = hn::LoadU(d, x + i + 2 * N), v3 = hn::LoadU(d, x + i + 3 * N);
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
    const T v = x[i];
    nan = nan || std::isnan(v);
    r = kMax ? (v > r ? v : r) : (v < r ? v : r);
  }
  return nan ? std::numeric_limits<T>::quiet_NaN() : r;
}

double SumF32(const float* x, size_t n) { return SumImpl(x, n); }
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

namespace {

// Runs (transposes) of at least this many elements are split across OpenMP threads.
// Measured on the 2-core development machine (shared, so the sibling core is usually
// busy): two threads were slower than one for every size up to 16 M elements (add
// 14 vs 8.5 ms, sum 14 vs 3-6 ms, exp equal), so splitting starts only at 64 M.
constexpr std::size_t kParallelReduceElems = std::size_t{1} << 26;

// kernel(x, n) over chunks of a long run, partials combined with `join` in chunk order.
template <class R, class T, class K, class J>
R chunked(const T* x, std::size_t n, K kernel, J join) {
#if TENSOR_HAVE_OPENMP
  const int threads = omp_get_max_threads();
  if (n >= kParallelReduceElems && threads > 1 && !omp_in_parallel()) {
    constexpr int kMaxChunks = 64;
    const int chunks = std::min(threads, kMaxChunks);
    R part[kMaxChunks];
    const std::size_t step = (n + static_cast<std::size_t>(chunks) - 1) / static_cast<std::size_t>(chunks);
#pragma omp parallel for schedule(static) num_threads(chunks)
    for (int c = 0; c < chunks; ++c) {
      const std::size_t b = static_cast<std::size_t>(c) * step, e = std::min(n, b + step);
      part[c] = kernel(x + b, e - b);
    }
    R r = part[0];
    for (int c = 1; c < chunks; ++c) r = join(r, part[c]);
    return r;
  }
#endif
  (void)join;
  return kernel(x, n);
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

}  // namespace tensor::cpu::simd
#endif  // HWY_ONCE
