// Highway kernels of the activation quantizer (see quant_hwy.hpp), compiled once per target.
#include "backends/cpu/quant_hwy.hpp"

// No contraction in this file: the header promises a product, then a sum (scale_add_f32 and
// the pooled epilogue must give the same floats), and with FMA in the target GCC fuses the
// intrinsics' mul + add (C++'s ISO mode does not turn contraction off), clang a scalar a * b + c.
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#include <algorithm>
#include <cmath>
#include <limits>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backends/cpu/quant_hwy.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace tensor::cpu::simd {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

float AbsMaxF32(const float* HWY_RESTRICT x, size_t n, bool* finite) {
  const hn::ScalableTag<float> d;
  const size_t N = hn::Lanes(d);
  const auto big = hn::Set(d, std::numeric_limits<float>::max());
  auto m0 = hn::Zero(d), m1 = hn::Zero(d);
  auto ok = hn::Set(d, 1.0f);  // lanes stay 1 while every |x| <= FLT_MAX (NaN compares false)
  size_t i = 0;
  for (; i + 2 * N <= n; i += 2 * N) {
    const auto a0 = hn::Abs(hn::LoadU(d, x + i)), a1 = hn::Abs(hn::LoadU(d, x + i + N));
    m0 = hn::Max(m0, a0);
    m1 = hn::Max(m1, a1);
    ok = hn::IfThenElseZero(hn::And(hn::Le(a0, big), hn::Le(a1, big)), ok);
  }
  for (; i + N <= n; i += N) {
    const auto a = hn::Abs(hn::LoadU(d, x + i));
    m0 = hn::Max(m0, a);
    ok = hn::IfThenElseZero(hn::Le(a, big), ok);
  }
  float amax = hn::GetLane(hn::MaxOfLanes(d, hn::Max(m0, m1)));
  bool good = hn::GetLane(hn::MinOfLanes(d, ok)) == 1.0f;
  for (; i < n; ++i) {
    const float a = std::fabs(x[i]);
    good = good && a <= std::numeric_limits<float>::max();
    amax = a > amax ? a : amax;
  }
  *finite = good;
  return amax;
}

void QuantizeS8(const float* HWY_RESTRICT x, size_t n, float inv, std::int8_t* HWY_RESTRICT out) {
  const hn::ScalableTag<float> d;
  const hn::RebindToSigned<decltype(d)> di;
  const hn::Rebind<std::int8_t, decltype(di)> d8;
  const size_t N = hn::Lanes(d);
  const auto vinv = hn::Set(d, inv), lo = hn::Set(d, -127.0f), hi = hn::Set(d, 127.0f), magic = hn::Set(d, 12582912.0f);
  size_t i = 0;
  for (; i + N <= n; i += N) {
    auto v = hn::Mul(hn::LoadU(d, x + i), vinv);
    v = hn::Min(hn::Max(v, lo), hi);
    const auto r = hn::Sub(hn::Add(v, magic), magic);  // an integer in [-127, 127]
    hn::StoreU(hn::DemoteTo(d8, hn::ConvertTo(di, r)), d8, out + i);
  }
  for (; i < n; ++i) out[i] = act_code_scalar(x[i], inv);
}

void ScaleF32(const float* x, size_t n, float s, float* out) {  // out may be x: no restrict
  const hn::ScalableTag<float> d;
  const size_t N = hn::Lanes(d);
  const auto vs = hn::Set(d, s);
  size_t i = 0;
  for (; i + N <= n; i += N) hn::StoreU(hn::Mul(hn::LoadU(d, x + i), vs), d, out + i);
  for (; i < n; ++i) out[i] = x[i] * s;
}

void ScaleAddF32(float* HWY_RESTRICT x, size_t n, float s, float b) {
  const hn::ScalableTag<float> d;
  const size_t N = hn::Lanes(d);
  const auto vs = hn::Set(d, s), vb = hn::Set(d, b);
  size_t i = 0;
  for (; i + N <= n; i += N) hn::StoreU(hn::Add(hn::Mul(hn::LoadU(d, x + i), vs), vb), d, x + i);
  for (; i < n; ++i) x[i] = x[i] * s + b;
}

void PoolScaleReluNhwcF32(const float* HWY_RESTRICT y, size_t oh, size_t ow, size_t c, float s,
                          const float* HWY_RESTRICT bias, float* HWY_RESTRICT out) {
  const hn::ScalableTag<float> d;
  const size_t N = hn::Lanes(d);
  const auto vs = hn::Set(d, s), zero = hn::Zero(d);
  const size_t py = oh / 2, px = ow / 2, row = ow * c;
  for (size_t i = 0; i < py; ++i) {
    for (size_t j = 0; j < px; ++j) {
      const float* r0 = y + 2 * i * row + 2 * j * c;
      const float* r1 = r0 + row;
      float* o = out + (i * px + j) * c;
      size_t ch = 0;
      for (; ch + N <= c; ch += N) {
        const auto m = hn::Max(hn::Max(hn::LoadU(d, r0 + ch), hn::LoadU(d, r0 + c + ch)),
                               hn::Max(hn::LoadU(d, r1 + ch), hn::LoadU(d, r1 + c + ch)));
        const auto b = bias != nullptr ? hn::LoadU(d, bias + ch) : zero;
        const auto v = hn::Add(hn::Mul(m, vs), b);
        hn::StoreU(hn::IfThenElse(hn::Le(v, zero), zero, v), d, o + ch);
      }
      for (; ch < c; ++ch) {
        const float m = std::max(std::max(r0[ch], r0[c + ch]), std::max(r1[ch], r1[c + ch]));
        const float v = m * s + (bias != nullptr ? bias[ch] : 0.0f);
        o[ch] = v <= 0.0f ? 0.0f : v;
      }
    }
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace tensor::cpu::simd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace tensor::cpu::simd {

HWY_EXPORT(AbsMaxF32);
HWY_EXPORT(QuantizeS8);
HWY_EXPORT(ScaleF32);
HWY_EXPORT(ScaleAddF32);
HWY_EXPORT(PoolScaleReluNhwcF32);

float abs_max_f32(const float* x, std::size_t n, bool* finite) { return HWY_DYNAMIC_DISPATCH(AbsMaxF32)(x, n, finite); }
void quantize_s8(const float* x, std::size_t n, float inv, std::int8_t* out) {
  HWY_DYNAMIC_DISPATCH(QuantizeS8)(x, n, inv, out);
}

void scale_f32(const float* x, std::size_t n, float s, float* out) { HWY_DYNAMIC_DISPATCH(ScaleF32)(x, n, s, out); }
void scale_add_f32(float* x, std::size_t n, float s, float b) { HWY_DYNAMIC_DISPATCH(ScaleAddF32)(x, n, s, b); }
void pool_scale_relu_nhwc_f32(const float* y, std::size_t oh, std::size_t ow, std::size_t c, float s, const float* bias,
                              float* out) {
  HWY_DYNAMIC_DISPATCH(PoolScaleReluNhwcF32)(y, oh, ow, c, s, bias, out);
}

}  // namespace tensor::cpu::simd
#endif  // HWY_ONCE
