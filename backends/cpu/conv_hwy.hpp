// The row kernel of the direct f32 convolution for few input channels (nn/conv_direct.cpp
// drives it) in Highway (conv_hwy.cpp; a normal header), once per target, vectorized over
// the output width with up to 16 lanes, 8 output channels at a time.
#pragma once

#include <cstddef>

namespace tensor::cpu::simd {

// The most taps (c_in * kh * kw) the row kernel takes.
inline constexpr std::size_t kConvRowsMaxTaps = 4 * 7 * 7;
// Floats readable past the end of each prepared row (a full vector at the last output).
inline constexpr std::size_t kConvRowsSlack = 16;

// Output rows [oh0, oh1) of one sample, every output channel:
//   y[o][oh][ow] = bias8[o] + sum over taps t = (c, i, j) of w8[(o/8)*taps*8 + t*8 + o%8] *
//                  x[c][(j*dw) % sw][(oh - oh0)*sh + i*dh][ow + (j*dw) / sw]
// where x is the prepared input block ([c_in][sw phases][rows][row_len], row_len >= out_w +
// ((kw-1)*dw)/sw + kConvRowsSlack, zero in the padding) and w8/bias8 are padded with zeros
// to a multiple of 8 output channels. y is the sample's [c_out][out_h][out_w] output.
struct ConvRows {
  const float* x;
  std::size_t rows, row_len;  // prepared rows per phase plane, floats per prepared row
  const float* w8;
  const float* bias8;
  std::size_t c_in, c_out, kh, kw, sh, sw, dh, dw;
  std::size_t oh0, oh1, out_h, out_w;
  float* y;
};

void conv_rows_f32(const ConvRows& a);

// The Highway target conv_rows_f32 runs on (for the route's name).
const char* conv_rows_target();

}  // namespace tensor::cpu::simd
