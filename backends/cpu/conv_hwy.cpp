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

// Stores 8 accumulators (their first `channels`) at y, y + plane, ...: full vectors, or the
// first `lanes` columns (a row's tail).
template <class D, class V>
HWY_INLINE void Store8(D d, V a0, V a1, V a2, V a3, V a4, V a5, V a6, V a7, float* HWY_RESTRICT y, size_t plane,
                       size_t channels, size_t lanes) {
  const V acc[8] = {a0, a1, a2, a3, a4, a5, a6, a7};
  if (lanes >= hn::Lanes(d)) {
    for (size_t k = 0; k < channels; ++k) hn::StoreU(acc[k], d, y + k * plane);
  } else {
    const auto m = hn::FirstN(d, lanes);
    for (size_t k = 0; k < channels; ++k) hn::BlendedStore(acc[k], m, d, y + k * plane);
  }
}

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
  Store8(d, a0, a1, a2, a3, a4, a5, a6, a7, y, plane, channels, lanes);
}

// The same over two vectors (columns ow .. ow + 2N), each weight broadcast once for both;
// lanes > N (the second vector full or the row's tail).
template <class D>
HWY_INLINE void Block8x2(D d, const float* HWY_RESTRICT x, const size_t* HWY_RESTRICT off, size_t taps,
                         const float* HWY_RESTRICT w, const float* HWY_RESTRICT bias, float* HWY_RESTRICT y,
                         size_t plane, size_t channels, size_t lanes) {
  const size_t N = hn::Lanes(d);
  auto a0 = hn::Set(d, bias[0]), a1 = hn::Set(d, bias[1]), a2 = hn::Set(d, bias[2]), a3 = hn::Set(d, bias[3]);
  auto a4 = hn::Set(d, bias[4]), a5 = hn::Set(d, bias[5]), a6 = hn::Set(d, bias[6]), a7 = hn::Set(d, bias[7]);
  auto b0 = a0, b1 = a1, b2 = a2, b3 = a3, b4 = a4, b5 = a5, b6 = a6, b7 = a7;
  for (size_t t = 0; t < taps; ++t, w += 8) {
    const auto u = hn::LoadU(d, x + off[t]), v = hn::LoadU(d, x + off[t] + N);
    auto s = hn::Set(d, w[0]);
    a0 = hn::MulAdd(s, u, a0), b0 = hn::MulAdd(s, v, b0);
    s = hn::Set(d, w[1]);
    a1 = hn::MulAdd(s, u, a1), b1 = hn::MulAdd(s, v, b1);
    s = hn::Set(d, w[2]);
    a2 = hn::MulAdd(s, u, a2), b2 = hn::MulAdd(s, v, b2);
    s = hn::Set(d, w[3]);
    a3 = hn::MulAdd(s, u, a3), b3 = hn::MulAdd(s, v, b3);
    s = hn::Set(d, w[4]);
    a4 = hn::MulAdd(s, u, a4), b4 = hn::MulAdd(s, v, b4);
    s = hn::Set(d, w[5]);
    a5 = hn::MulAdd(s, u, a5), b5 = hn::MulAdd(s, v, b5);
    s = hn::Set(d, w[6]);
    a6 = hn::MulAdd(s, u, a6), b6 = hn::MulAdd(s, v, b6);
    s = hn::Set(d, w[7]);
    a7 = hn::MulAdd(s, u, a7), b7 = hn::MulAdd(s, v, b7);
  }
  Store8(d, a0, a1, a2, a3, a4, a5, a6, a7, y, plane, channels, N);
  Store8(d, b0, b1, b2, b3, b4, b5, b6, b7, y + N, plane, channels, lanes - N);
}

// Two vectors per block where the target has 32 vector registers (16 accumulators).
#if HWY_TARGET <= HWY_AVX3 && HWY_TARGET != HWY_SCALAR && HWY_ARCH_X86
constexpr size_t kPair = 2;
#else
constexpr size_t kPair = 1;
#endif

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
      size_t ow = 0;
      if constexpr (kPair == 2) {
        for (; ow + N < a.out_w; ow += 2 * N) {  // more than one vector left: two at a time
          const size_t lanes = a.out_w - ow < 2 * N ? a.out_w - ow : 2 * N;
          Block8x2(d, xr + ow, off.data(), taps, w, a.bias8 + ob, y + ow, plane, channels, lanes);
        }
      }
      for (; ow < a.out_w; ow += N) {
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
