// Highway kernels for f16/bf16 <-> f32 (see convert_hwy.hpp), compiled once per target.
// f16 uses the F16C conversions where Highway maps them to hardware (AVX2 and up; they
// round to nearest even and quiet NaNs as tensor::f16 does); Highway's emulation on older
// targets truncates, so those targets convert one element at a time with tensor::f16.
// bf16 -> f32 is a shift; f32 -> bf16 rounds to nearest even in integer lanes.
#include "backends/cpu/convert_hwy.hpp"

#include <cstring>

#include "tensor/half.hpp"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backends/cpu/convert_hwy.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace tensor::cpu::simd {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

#if HWY_TARGET < HWY_SSE4 && !defined(HWY_DISABLE_F16C)
constexpr bool kHardwareF16 = true;
#else
constexpr bool kHardwareF16 = false;
#endif

template <class H>
HWY_INLINE float ScalarToF32(std::uint16_t b) {
  return static_cast<float>(H::from_bits(b));
}
template <class H>
HWY_INLINE std::uint16_t ScalarFromF32(float f) {
  return H::from_float(f);
}

void F16ToF32(const std::uint16_t* HWY_RESTRICT x, float* HWY_RESTRICT out, size_t n) {
  size_t i = 0;
  if constexpr (kHardwareF16) {
    const hn::ScalableTag<float> df;
    const hn::Rebind<hwy::float16_t, decltype(df)> dh;
    const size_t N = hn::Lanes(df);
    for (; i + N <= n; i += N) {
      hn::StoreU(hn::PromoteTo(df, hn::LoadU(dh, reinterpret_cast<const hwy::float16_t*>(x + i))), df, out + i);
    }
  }
  for (; i < n; ++i) out[i] = ScalarToF32<tensor::f16>(x[i]);
}

void F32ToF16(const float* HWY_RESTRICT x, std::uint16_t* HWY_RESTRICT out, size_t n) {
  size_t i = 0;
  if constexpr (kHardwareF16) {
    const hn::ScalableTag<float> df;
    const hn::Rebind<hwy::float16_t, decltype(df)> dh;
    const size_t N = hn::Lanes(df);
    for (; i + N <= n; i += N) {
      hn::StoreU(hn::DemoteTo(dh, hn::LoadU(df, x + i)), dh, reinterpret_cast<hwy::float16_t*>(out + i));
    }
  }
  for (; i < n; ++i) out[i] = ScalarFromF32<tensor::f16>(x[i]);
}

void BF16ToF32(const std::uint16_t* HWY_RESTRICT x, float* HWY_RESTRICT out, size_t n) {
  const hn::ScalableTag<float> df;
  const hn::RebindToUnsigned<decltype(df)> du;
  const hn::Rebind<std::uint16_t, decltype(df)> d16;
  const size_t N = hn::Lanes(df);
  size_t i = 0;
  for (; i + N <= n; i += N) {
    hn::StoreU(hn::BitCast(df, hn::ShiftLeft<16>(hn::PromoteTo(du, hn::LoadU(d16, x + i)))), df, out + i);
  }
  for (; i < n; ++i) out[i] = ScalarToF32<tensor::bf16>(x[i]);
}

void F32ToBF16(const float* HWY_RESTRICT x, std::uint16_t* HWY_RESTRICT out, size_t n) {
  const hn::ScalableTag<float> df;
  const hn::RebindToUnsigned<decltype(df)> du;
  const hn::RebindToSigned<decltype(df)> di;
  const hn::Rebind<std::uint16_t, decltype(df)> d16;
  const size_t N = hn::Lanes(df);
  const auto round = hn::Set(du, 0x7fffu), one = hn::Set(du, 1u), quiet = hn::Set(du, 0x40u);
  size_t i = 0;
  for (; i + N <= n; i += N) {
    const auto v = hn::LoadU(df, x + i);
    const auto u = hn::BitCast(du, v);
    const auto hi = hn::ShiftRight<16>(u);
    const auto rounded = hn::ShiftRight<16>(hn::Add(hn::Add(u, round), hn::And(hi, one)));
    const auto bits = hn::IfThenElse(hn::RebindMask(du, hn::IsNaN(v)), hn::Or(hi, quiet), rounded);
    hn::StoreU(hn::DemoteTo(d16, hn::BitCast(di, bits)), d16, out + i);
  }
  for (; i < n; ++i) out[i] = ScalarFromF32<tensor::bf16>(x[i]);
}

}  // namespace HWY_NAMESPACE
}  // namespace tensor::cpu::simd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace tensor::cpu::simd {

HWY_EXPORT(F16ToF32);
HWY_EXPORT(F32ToF16);
HWY_EXPORT(BF16ToF32);
HWY_EXPORT(F32ToBF16);

void f16_to_f32(const std::uint16_t* x, float* out, std::size_t n) { HWY_DYNAMIC_DISPATCH(F16ToF32)(x, out, n); }
void bf16_to_f32(const std::uint16_t* x, float* out, std::size_t n) { HWY_DYNAMIC_DISPATCH(BF16ToF32)(x, out, n); }
void f32_to_f16(const float* x, std::uint16_t* out, std::size_t n) { HWY_DYNAMIC_DISPATCH(F32ToF16)(x, out, n); }
void f32_to_bf16(const float* x, std::uint16_t* out, std::size_t n) { HWY_DYNAMIC_DISPATCH(F32ToBF16)(x, out, n); }

}  // namespace tensor::cpu::simd
#endif  // HWY_ONCE
