// The 2x2 stride-2 max pool's row kernel in Highway (pool_hwy.cpp; a normal header), for
// f32 without indices: y[j] = the max of r0[2j], r0[2j+1], r1[2j], r1[2j+1] taken in that
// order with nn/pool.cpp's rule (a later value wins only when greater, or when it is a NaN
// and the best so far is not): the first NaN wins, and of equal values the first.
#pragma once

#include <cstddef>

namespace tensor::cpu::simd {

void max_pool_2x2_row_f32(const float* r0, const float* r1, float* y, std::size_t out_w);

// Floats readable past the end of max_pool_2x2_relu_rows_f32's input.
inline constexpr std::size_t kPoolRowsSlack = 32;

// The direct conv's fused epilogue (nn/conv_direct.cpp): for each of `channels` row pairs
// x + c*2*in_w (rows r0 = that, r1 = r0 + in_w), y[c*y_stride + j] = relu(the max above of
// r0[2j], r0[2j+1], r1[2j], r1[2j+1]) for j < in_w / 2, relu as the relu op's rule
// (x <= 0 ? 0 : x, NaN kept). Reads up to kPoolRowsSlack floats past x's last row pair;
// writes nothing else.
void max_pool_2x2_relu_rows_f32(const float* x, std::size_t channels, std::size_t in_w, float* y, std::size_t y_stride);

}  // namespace tensor::cpu::simd
