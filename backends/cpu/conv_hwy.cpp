// Highway row kernel of the direct f32 convolution for few input channels (see conv_hwy.hpp),
// once per target.
#include "backends/cpu/conv_hwy.hpp"

#include <array>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backends/cpu/conv_hwy.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace tensor::cpu::simd {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// 8 output channels over one vector of output columns at ow: accumulate every tap, store
// `lanes` columns (a full vector, or the row's tail).
template <class D>
HWY_INLINE void Block8(D d, const float* HWY_RESTRICT x, const size_t* HWY_RESTRICT off, size_t taps,
                       const float* HWY_RESTRICT w, const float* HWY_RESTRICT bias, float* HWY_RESTRICT y,
                       size_t plane, size_t channels, size_t lanes) {
  auto a0 = hn::Set(d, bias[0]), a1 = hn::Set(d, bias[1]), a2 = hn::Set(d, bias[2]), a3 = hn::Set(d, bias[3]);
  auto a4 = hn::Set(d, bias[4]), a5 = hn::Set(d, bias[5]), a6 = hn::Set(d, bias[6]), a7 = hn::Set(d, bias[7]);
  for (size_t t = 0; t < taps; ++t, w += 8) {
    const auto v = hn::LoadU(d, x + off[t]);
    a0 = hn::MulAdd(hn::Set(d, w[0]), v, a0);
    a1 = hn::MulAdd(hn::Set(d, w[1]), v, a1);
    a2 = hn::MulAdd(hn::Set(d, w[2]), v, a2);
    a3 = hn::MulAdd(hn::Set(d, w[3]), v, a3);
    a4 = hn::MulAdd(hn::Set(d, w[4]), v, a4);
    a5 = hn::MulAdd(hn::Set(d, w[5]), v, a5);
    a6 = hn::MulAdd(hn::Set(d, w[6]), v, a6);
    a7 = hn::MulAdd(hn::Set(d, w[7]), v, a7);
  }
  const decltype(a0) acc[8] = {a0, a1, a2, a3, a4, a5, a6, a7};
  if (lanes == hn::Lanes(d)) {
    for (size_t k = 0; k < channels; ++k) hn::StoreU(acc[k], d, y + k * plane);
  } else {
    const auto m = hn::FirstN(d, lanes);
    for (size_t k = 0; k < channels; ++k) hn::BlendedStore(acc[k], m, d, y + k * plane);
  }
}

void ConvRowsF32(const ConvRows& a) {
  const hn::CappedTag<float, kConvRowsSlack> d;
  const size_t N = hn::Lanes(d);
  const size_t taps = a.c_in * a.kh * a.kw, plane = a.out_h * a.out_w;
  std::array<size_t, kConvRowsMaxTaps> off{};
  for (size_t c = 0, t = 0; c < a.c_in; ++c)
    for (size_t i = 0; i < a.kh; ++i)
      for (size_t j = 0; j < a.kw; ++j, ++t)
        off[t] = ((c * a.sw + (j * a.dw) % a.sw) * a.rows + i * a.dh) * a.row_len + (j * a.dw) / a.sw;
  for (size_t oh = a.oh0; oh < a.oh1; ++oh) {
    const float* xr = a.x + (oh - a.oh0) * a.sh * a.row_len;
    for (size_t ob = 0; ob < a.c_out; ob += 8) {
      const size_t channels = a.c_out - ob < 8 ? a.c_out - ob : 8;
      const float* w = a.w8 + ob * taps;
      float* y = a.y + ob * plane + oh * a.out_w;
      for (size_t ow = 0; ow < a.out_w; ow += N) {
        const size_t lanes = a.out_w - ow < N ? a.out_w - ow : N;
        Block8(d, xr + ow, off.data(), taps, w, a.bias8 + ob, y + ow, plane, channels, lanes);
      }
    }
  }
}

const char* TargetName() { return hwy::TargetName(HWY_TARGET); }

}  // namespace HWY_NAMESPACE
}  // namespace tensor::cpu::simd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace tensor::cpu::simd {

HWY_EXPORT(ConvRowsF32);
HWY_EXPORT(TargetName);

void conv_rows_f32(const ConvRows& a) { HWY_DYNAMIC_DISPATCH(ConvRowsF32)(a); }
const char* conv_rows_target() { return HWY_DYNAMIC_DISPATCH(TargetName)(); }

}  // namespace tensor::cpu::simd
#endif  // HWY_ONCE
