// The dynamic activation quantizer of the int8 routes (backends/cpu/quant.cpp,
// quant_conv.cpp), in Highway (quant_hwy.cpp; a normal header). Symmetric s8, one scale per
// row: amax = max |x|, inv = amax > 0 ? 127 / amax : 0, code = the nearest integer of
// clamp(x * inv, -127, 127), ties to even ((v + 1.5 * 2^23) - 1.5 * 2^23: two adds, no FMA),
// the scalar rule of quant.cpp's act_code bit for bit on every target.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tensor::cpu::simd {

// max |x[i]| over n values; *finite false where a NaN or an infinity is among them (the
// returned value is then meaningless: such a row has no int8 code).
float abs_max_f32(const float* x, std::size_t n, bool* finite);
// out[i] = the code of x[i] * inv (see above), for finite x.
void quantize_s8(const float* x, std::size_t n, float inv, std::int8_t* out);

// out[i] = x[i] * s (out may be x): the int8 product's row scales.
void scale_f32(const float* x, std::size_t n, float s, float* out);
// x[i] = x[i] * s + b (a product, then a sum: no FMA), in place.
void scale_add_f32(float* x, std::size_t n, float s, float b);

// The int8 conv's pooled epilogue (quant_conv.cpp), on y [oh, ow, c] (NHWC, finite):
// out[(i * (ow / 2) + j) * c + ch] = relu(max(the 2x2 window at rows 2i, 2i+1, columns 2j,
// 2j+1 of channel ch) * s + bias[ch]) (bias null: 0; relu: v <= 0 ? 0 : v), an odd last row or
// column left out. For s >= 0 the product and the sum are monotone, so this is bit for bit
// the relu of the max of the scaled values (scale_add_f32, then the pool): the max is taken
// before the scaling, over four floats a channel vector at a time.
void pool_scale_relu_nhwc_f32(const float* y, std::size_t oh, std::size_t ow, std::size_t c, float s, const float* bias,
                              float* out);

// The scalar rule, for the tails and the tests.
inline std::int8_t act_code_scalar(float x, float inv) {
  constexpr float kMagic = 12582912.0f;  // 1.5 * 2^23
  float v = x * inv;
  v = v < -127.0f ? -127.0f : v > 127.0f ? 127.0f : v;
  return static_cast<std::int8_t>(static_cast<int>((v + kMagic) - kMagic));
}

}  // namespace tensor::cpu::simd
