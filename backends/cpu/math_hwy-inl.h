// Shared Highway math helpers (a per-target -inl header: include after hwy/highway.h,
// inside no namespace; the toggle guard recompiles it for every target).
#if defined(TENSOR_CPU_MATH_HWY_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TENSOR_CPU_MATH_HWY_INL_H_
#undef TENSOR_CPU_MATH_HWY_INL_H_
#else
#define TENSOR_CPU_MATH_HWY_INL_H_
#endif

#include "hwy/highway.h"
#include "hwy/contrib/math/math-inl.h"

HWY_BEFORE_NAMESPACE();
namespace tensor::cpu::simd {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// f32 erf: N. Juffa's minimax pair (max error < 1 ulp in float); |x| clamped at 10,
// where erf is 1 in float, so infinities come out as +-1. NaN lanes give +-1 or NaN
// depending on the target's Min: callers that must keep NaN check for it.
template <class D, class V>
HWY_INLINE V ErfF32(D d, V x) {
  const V t = hn::Min(hn::Abs(x), hn::Set(d, 10.0f));
  const V s = hn::Mul(t, t);
  V r = hn::MulAdd(hn::Set(d, -1.72853470e-5f), t, hn::Set(d, 3.83197126e-4f));
  const V u = hn::MulAdd(hn::Set(d, -3.88396438e-3f), t, hn::Set(d, 2.42546219e-2f));
  r = hn::MulAdd(r, s, u);
  r = hn::MulAdd(r, t, hn::Set(d, -1.06777877e-1f));
  r = hn::MulAdd(r, t, hn::Set(d, -6.34846687e-1f));
  r = hn::MulAdd(r, t, hn::Set(d, -1.28717512e-1f));
  r = hn::MulAdd(r, t, hn::Neg(t));
  const V big = hn::CopySign(hn::Sub(hn::Set(d, 1.0f), hn::Exp(d, r)), x);
  const V xs = hn::Mul(x, x);
  V q = hn::Set(d, -5.96761703e-4f);
  q = hn::MulAdd(q, xs, hn::Set(d, 4.99119423e-3f));
  q = hn::MulAdd(q, xs, hn::Set(d, -2.67681349e-2f));
  q = hn::MulAdd(q, xs, hn::Set(d, 1.12819925e-1f));
  q = hn::MulAdd(q, xs, hn::Set(d, -3.76125336e-1f));
  q = hn::MulAdd(q, xs, hn::Set(d, 1.28379166e-1f));
  q = hn::MulAdd(q, x, x);
  return hn::IfThenElse(hn::Gt(t, hn::Set(d, 0.927734375f)), big, q);
}

}  // namespace HWY_NAMESPACE
}  // namespace tensor::cpu::simd
HWY_AFTER_NAMESPACE();

#endif  // include guard
