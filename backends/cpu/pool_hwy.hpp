// The 2x2 stride-2 max pool's row kernel in Highway (pool_hwy.cpp; a normal header), for
// f32 without indices: y[j] = the max of r0[2j], r0[2j+1], r1[2j], r1[2j+1] taken in that
// order with nn/pool.cpp's rule (a later value wins only when greater, or when it is a NaN
// and the best so far is not): the first NaN wins, and of equal values the first.
#pragma once

#include <cstddef>

namespace tensor::cpu::simd {

void max_pool_2x2_row_f32(const float* r0, const float* r1, float* y, std::size_t out_w);

}  // namespace tensor::cpu::simd
