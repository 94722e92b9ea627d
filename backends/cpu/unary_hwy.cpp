// Highway kernels for contiguous f32/f64 unary math (exp, log, sin, erf, sigmoid, ...),
// compiled once per target. Each op is a functor with the vector formula and, when
// the formula is not exact everywhere, the lanes it is accurate on; a vector with
// any other lane (NaN, inf, out of range) is recomputed with libm, lane by lane.
#include "backends/cpu/unary_hwy.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "backends/cpu/parallel.hpp"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backends/cpu/unary_hwy.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/cache_control.h"
#include "hwy/highway.h"
#include "hwy/contrib/math/math-inl.h"
#include "backends/cpu/math_hwy-inl.h"

HWY_BEFORE_NAMESPACE();
namespace tensor::cpu::simd {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

template <class D> using TFromD = hn::TFromD<D>;
template <class D> constexpr bool kF32 = sizeof(TFromD<D>) == 4;

// Lanes in [lo, hi] (false for NaN).
template <class D, class V>
HWY_INLINE auto InRange(D d, V x, double lo, double hi) {
  using T = TFromD<D>;
  return hn::And(hn::Ge(x, hn::Set(d, static_cast<T>(lo))), hn::Le(x, hn::Set(d, static_cast<T>(hi))));
}

// Exact everywhere: no range check.
struct ExactOp { static constexpr bool kExact = true; };
struct CheckedOp { static constexpr bool kExact = false; };

struct ExpV : CheckedOp {
  template <class D, class V> HWY_INLINE V operator()(D d, V x) const { return hn::Exp(d, x); }
  template <class D, class V> HWY_INLINE auto Ok(D d, V x) const {
    return kF32<D> ? InRange(d, x, -87.3, 88.7) : InRange(d, x, -708.0, 709.0);
  }
};
struct Expm1V : CheckedOp {
  template <class D, class V> HWY_INLINE V operator()(D d, V x) const { return hn::Expm1(d, x); }
  template <class D, class V> HWY_INLINE auto Ok(D d, V x) const {
    return kF32<D> ? InRange(d, x, -87.3, 88.7) : InRange(d, x, -708.0, 709.0);
  }
};
struct LogV : CheckedOp {
  template <class D, class V> HWY_INLINE V operator()(D d, V x) const { return hn::Log(d, x); }
  template <class D, class V> HWY_INLINE auto Ok(D d, V x) const {  // normal, finite, positive
    return kF32<D> ? InRange(d, x, 1.1754944e-38, 3.4e38) : InRange(d, x, 2.2250738585072014e-308, 1.7e308);
  }
};
// log1p(x) = log(u) * x / (u - 1) with u = 1 + x (exact when u == 1): Highway's
// Log1p covers only x >= 0.
struct Log1pV : CheckedOp {
  template <class D, class V> HWY_INLINE V operator()(D d, V x) const {
    const V one = hn::Set(d, TFromD<D>(1));
    const V u = hn::Add(one, x);
    const V um1 = hn::Sub(u, one);
    const auto same = hn::Eq(um1, hn::Zero(d));
    const V r = hn::Div(hn::Mul(hn::Log(d, u), x), hn::IfThenElse(same, one, um1));
    return hn::IfThenElse(same, x, r);
  }
  template <class D, class V> HWY_INLINE auto Ok(D d, V x) const {
    return kF32<D> ? InRange(d, x, -0.99999994, 3.4e38) : InRange(d, x, -0.9999999999999999, 1.7e308);
  }
};
struct SinV : CheckedOp {
  template <class D, class V> HWY_INLINE V operator()(D d, V x) const { return hn::Sin(d, x); }
  template <class D, class V> HWY_INLINE auto Ok(D d, V x) const { return InRange(d, x, -39000.0, 39000.0); }
};
struct CosV : CheckedOp {
  template <class D, class V> HWY_INLINE V operator()(D d, V x) const { return hn::Cos(d, x); }
  template <class D, class V> HWY_INLINE auto Ok(D d, V x) const { return InRange(d, x, -39000.0, 39000.0); }
};
struct TanhV : CheckedOp {
  template <class D, class V> HWY_INLINE V operator()(D d, V x) const { return hn::Tanh(d, x); }
  template <class D, class V> HWY_INLINE auto Ok(D, V x) const { return hn::IsFinite(x); }
};
// 1 / (1 + e^-x) for x >= 0, e^x / (1 + e^x) below; e = e^-|x| never overflows.
struct SigmoidV : CheckedOp {
  template <class D, class V> HWY_INLINE V operator()(D d, V x) const {
    const V one = hn::Set(d, TFromD<D>(1));
    const V e = hn::Exp(d, hn::Neg(hn::Abs(x)));
    const V r = hn::Div(one, hn::Add(one, e));
    return hn::IfThenElse(hn::Ge(x, hn::Zero(d)), r, hn::Mul(e, r));
  }
  template <class D, class V> HWY_INLINE auto Ok(D d, V x) const {
    return kF32<D> ? InRange(d, x, -80.0, 80.0) : InRange(d, x, -700.0, 700.0);
  }
};
// f32 erf (math_hwy-inl.h); NaN lanes go to libm.
struct ErfV : CheckedOp {
  template <class D, class V> HWY_INLINE V operator()(D d, V x) const {
    if constexpr (!kF32<D>) {
      return x;  // unused: f64 erf has no vector formula and goes to libm (Unary)
    } else {
      return ErfF32(d, x);
    }
  }
  template <class D, class V> HWY_INLINE auto Ok(D, V x) const { return hn::Eq(x, x); }  // NaN: libm
};
struct SqrtV : ExactOp { template <class D, class V> HWY_INLINE V operator()(D, V x) const { return hn::Sqrt(x); } };
struct AbsV : ExactOp { template <class D, class V> HWY_INLINE V operator()(D, V x) const { return hn::Abs(x); } };
struct NegV : ExactOp { template <class D, class V> HWY_INLINE V operator()(D, V x) const { return hn::Neg(x); } };
struct RecipV : ExactOp {
  template <class D, class V> HWY_INLINE V operator()(D d, V x) const { return hn::Div(hn::Set(d, TFromD<D>(1)), x); }
};
struct FloorV : ExactOp { template <class D, class V> HWY_INLINE V operator()(D, V x) const { return hn::Floor(x); } };
struct CeilV : ExactOp { template <class D, class V> HWY_INLINE V operator()(D, V x) const { return hn::Ceil(x); } };
struct TruncV : ExactOp { template <class D, class V> HWY_INLINE V operator()(D, V x) const { return hn::Trunc(x); } };
struct RoundV : ExactOp { template <class D, class V> HWY_INLINE V operator()(D, V x) const { return hn::Round(x); } };

// One vector (of tag d) at x -> out, falling back to libm when a lane is out of range.
// `stream`: a non-temporal store (out aligned to the vector); a runtime flag, so each
// op's formula is compiled once per tag.
template <class D, class Op>
HWY_INLINE void Step(D d, const TFromD<D>* x, TFromD<D>* out, UnOp op, bool stream = false) {
  const Op f;
  const auto v = hn::LoadU(d, x);
  auto store = [&](auto r) {
    if (stream) hn::Stream(r, d, out);
    else hn::StoreU(r, d, out);
  };
  if constexpr (Op::kExact) {
    store(f(d, v));
  } else {
    if (HWY_LIKELY(hn::AllTrue(d, f.Ok(d, v)))) {
      store(f(d, v));
    } else {
      for (size_t k = 0; k < hn::Lanes(d); ++k) out[k] = unary_ref(op, x[k]);
    }
  }
}

// `stream`: the output is large and fresh (see binary_hwy.cpp): non-temporal stores
// for whole vectors, once out is aligned.
template <class T, class Op>
HWY_INLINE void Run(const T* x, T* out, size_t n, UnOp op, bool stream) {
  const hn::ScalableTag<T> d;
  const hn::CappedTag<T, 1> d1;
  const size_t N = hn::Lanes(d);
  size_t i = 0;
  if (stream) {
    for (; i < n && reinterpret_cast<uintptr_t>(out + i) % (N * sizeof(T)) != 0; ++i)
      Step<decltype(d1), Op>(d1, x + i, out + i, op);
  }
  for (; i + N <= n; i += N) Step<decltype(d), Op>(d, x + i, out + i, op, stream);
  if (stream) hwy::FlushStream();
  for (; i < n; ++i) Step<decltype(d1), Op>(d1, x + i, out + i, op);
}

template <class T>
HWY_INLINE void Unary(UnOp op, const T* x, T* out, size_t n, bool stream) {
  switch (op) {
    case UnOp::Exp: return Run<T, ExpV>(x, out, n, op, stream);
    case UnOp::Expm1: return Run<T, Expm1V>(x, out, n, op, stream);
    case UnOp::Log: return Run<T, LogV>(x, out, n, op, stream);
    case UnOp::Log1p: return Run<T, Log1pV>(x, out, n, op, stream);
    case UnOp::Sin: return Run<T, SinV>(x, out, n, op, stream);
    case UnOp::Cos: return Run<T, CosV>(x, out, n, op, stream);
    case UnOp::Tanh: return Run<T, TanhV>(x, out, n, op, stream);
    case UnOp::Sqrt: return Run<T, SqrtV>(x, out, n, op, stream);
    case UnOp::Abs: return Run<T, AbsV>(x, out, n, op, stream);
    case UnOp::Neg: return Run<T, NegV>(x, out, n, op, stream);
    case UnOp::Erf:
      if constexpr (sizeof(T) == 8) {
        for (size_t i = 0; i < n; ++i) out[i] = unary_ref(op, x[i]);
        return;
      } else {
        return Run<T, ErfV>(x, out, n, op, stream);
      }
    case UnOp::Sigmoid: return Run<T, SigmoidV>(x, out, n, op, stream);
    case UnOp::Recip: return Run<T, RecipV>(x, out, n, op, stream);
    case UnOp::Floor: return Run<T, FloorV>(x, out, n, op, stream);
    case UnOp::Ceil: return Run<T, CeilV>(x, out, n, op, stream);
    case UnOp::Trunc: return Run<T, TruncV>(x, out, n, op, stream);
    case UnOp::Round: return Run<T, RoundV>(x, out, n, op, stream);
  }
}

void UnaryF32(UnOp op, const float* x, float* out, size_t n, bool st) { Unary(op, x, out, n, st); }
void UnaryF64(UnOp op, const double* x, double* out, size_t n, bool st) { Unary(op, x, out, n, st); }

}  // namespace HWY_NAMESPACE
}  // namespace tensor::cpu::simd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace tensor::cpu::simd {

HWY_EXPORT(UnaryF32);
HWY_EXPORT(UnaryF64);

namespace {

template <class T>
T ref(UnOp op, T x) {
  switch (op) {
    case UnOp::Exp: return std::exp(x);
    case UnOp::Expm1: return std::expm1(x);
    case UnOp::Log: return std::log(x);
    case UnOp::Log1p: return std::log1p(x);
    case UnOp::Sin: return std::sin(x);
    case UnOp::Cos: return std::cos(x);
    case UnOp::Tanh: return std::tanh(x);
    case UnOp::Sqrt: return std::sqrt(x);
    case UnOp::Abs: return std::fabs(x);
    case UnOp::Neg: return -x;
    case UnOp::Erf: return std::erf(x);
    case UnOp::Sigmoid: {
      const T e = std::exp(-std::fabs(x));
      const T r = T(1) / (T(1) + e);
      return x >= 0 ? r : e * r;
    }
    case UnOp::Recip: return T(1) / x;
    case UnOp::Floor: return std::floor(x);
    case UnOp::Ceil: return std::ceil(x);
    case UnOp::Trunc: return std::trunc(x);
    case UnOp::Round: return std::nearbyint(x);
  }
  return x;
}

// Runs of at least this many elements are split into chunks shared out by
// parallel_chunks, per op family: the math ops (compute-bound: exp 16M takes 1.2-1.8x
// a copy on one core) from 256K, chosen as act_hwy.cpp's math ops; the memory-bound
// ones (abs, neg, sqrt, floor, ...) from 1M, as binary ops (see binary_hwy.cpp).
constexpr std::size_t kParallelMathElems = std::size_t{1} << 18;
constexpr std::size_t kParallelCheapElems = std::size_t{1} << 20;
// Fresh outputs from this many bytes up are written with non-temporal stores (as binary_hwy.cpp).
constexpr std::size_t kStreamBytes = std::size_t{16} << 20;

// Transcendental ops cost tens of cycles per vector (compute-bound); the rest are a
// load, one or two instructions and a store (memory-bound on large runs).
bool is_math(UnOp op) {
  switch (op) {
    case UnOp::Exp: case UnOp::Expm1: case UnOp::Log: case UnOp::Log1p: case UnOp::Sin: case UnOp::Cos:
    case UnOp::Tanh: case UnOp::Erf: case UnOp::Sigmoid:
      return true;
    default:
      return false;
  }
}


template <class T, class K>
void chunked(UnOp op, const T* x, T* out, std::size_t n, K kernel) {
  const auto o = reinterpret_cast<std::uintptr_t>(out), p = reinterpret_cast<std::uintptr_t>(x);
  const std::size_t bytes = n * sizeof(T);
  const bool stream = bytes >= kStreamBytes && (p >= o + bytes || o >= p + bytes);
  if (n >= (is_math(op) ? kParallelMathElems : kParallelCheapElems)) {
    const std::size_t len = stream_chunk(n);  // a busy second core costs at most one chunk
    auto one = [&](std::size_t c) {
      const std::size_t b = c * len;
      kernel(op, x + b, out + b, std::min(n, b + len) - b, stream);
    };
    parallel_chunks((n + len - 1) / len, one);
    return;
  }
  kernel(op, x, out, n, stream);
}

}  // namespace

float unary_ref(UnOp op, float x) { return ref(op, x); }
double unary_ref(UnOp op, double x) { return ref(op, x); }

void unary_f32(UnOp op, const float* x, float* out, std::size_t n) {
  chunked(op, x, out, n, HWY_DYNAMIC_DISPATCH(UnaryF32));
}
void unary_f64(UnOp op, const double* x, double* out, std::size_t n) {
  chunked(op, x, out, n, HWY_DYNAMIC_DISPATCH(UnaryF64));
}

}  // namespace tensor::cpu::simd
#endif  // HWY_ONCE
