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

// e^t for f32 t in [-87.3, 0] (normal results): Highway's reduction and polynomial
// (within 1 ulp), with the rounding to the nearest multiple of ln 2 done by adding
// 1.5 * 2^23 and the result's exponent added as an integer; about 15 vector ops where
// hn::Exp (which also covers the denormal range) takes about 25; softmax, sigmoid,
// log_sigmoid and erf are bound by their exps. Other t give garbage lanes (callers
// clamp or recompute them).
//
// The two halves every such exp shares: t = q ln 2 + r with r in [-ln2/2, ln2/2] (z holds q
// in its low mantissa bits), and e^r * 2^q from a polynomial's e^r.
template <class D, class V>
HWY_INLINE V ExpReduceF32(D d, V t, V& z) {
  const V magic = hn::Set(d, 12582912.0f);  // 1.5 * 2^23: the sum's low mantissa bits hold round(t / ln 2)
  z = hn::MulAdd(t, hn::Set(d, 1.44269504088896341f), magic);
  const V q = hn::Sub(z, magic);
  const V r = hn::MulAdd(q, hn::Set(d, -0.693145751953125f), t);
  return hn::MulAdd(q, hn::Set(d, -1.428606765330187045e-6f), r);
}
// q's integer sits in z's low bits; shifted to the exponent field (the high bits of
// 1.5 * 2^23 shift out) and added to y's exponent: y * 2^q, normal for q >= -126.
template <class D, class V>
HWY_INLINE V ExpScaleF32(D d, V y, V z) {
  const hn::RebindToSigned<D> di;
  return hn::BitCast(d, hn::Add(hn::BitCast(di, y), hn::ShiftLeft<23>(hn::BitCast(di, z))));
}

template <class D, class V>
HWY_INLINE V ExpNormalF32(D d, V t) {
  V z;
  const V r = ExpReduceF32(d, t, z);
  const V r2 = hn::Mul(r, r);
  const V p45 = hn::MulAdd(hn::Set(d, 0.000198527617612853646278381f), r, hn::Set(d, 0.00139304355252534151077271f));
  const V p23 = hn::MulAdd(hn::Set(d, 0.00833336077630519866943359f), r, hn::Set(d, 0.0416664853692054748535156f));
  const V p01 = hn::MulAdd(hn::Set(d, 0.166666671633720397949219f), r, hn::Set(d, 0.5f));
  const V p = hn::MulAdd(hn::MulAdd(p45, r2, p23), r2, p01);
  const V y = hn::Add(hn::MulAdd(p, r2, r), hn::Set(d, 1.0f));  // e^r, r in [-ln2/2, ln2/2]
  return ExpScaleF32(d, y, z);
}

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
  // r <= -0.86; below -87.3 e^r is under 2^-126, and 1 - e^r is 1 in float either way.
  const V big = hn::CopySign(hn::Sub(hn::Set(d, 1.0f), ExpNormalF32(d, hn::Max(r, hn::Set(d, -87.3f)))), x);
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
