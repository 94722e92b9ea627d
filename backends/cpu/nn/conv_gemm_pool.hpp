// A block fused on the im2col + gemm route (conv.cpp's dense f32 conv): conv -> bias -> relu
// -> 2x2/stride-2 max pool, one sample per thread, a block of conv rows at a time computed
// into a per-thread buffer sized for L2 and pooled from there (max_pool_2x2_relu_rows_f32),
// so the pre-pool activation is never stored. Internal to backends/cpu/nn (conv.cpp routes
// conv_relu_pool_forward here for the shapes the direct small-C_in kernel does not take).
#pragma once

#include <cstddef>
#include <cstdint>

#include "backends/cpu/nn/conv.hpp"

namespace tensor::cpu::nn {

// conv.cpp's im2col of one sample (groups 1, 2-d): the columns of output rows [ra, rb),
// cols [c_in * kh * kw, (rb - ra) * out_w], 0 where a tap reads padding.
void im2col_rows(const ConvGeom& g, const float* x, float* cols, std::int64_t ra, std::int64_t rb);

// Whether gemm_relu_pool_forward takes g: 2-d, groups 1, at least one input channel, and a
// conv output of at least 2x2 (a 1-row or 1-column output has nothing to pool).
bool gemm_relu_pool_supported(const ConvGeom& g);
// Conv rows per block (even, at least 2, at most the pooled rows' 2 * (out_h / 2)): the most
// whose columns and gemm output fit kGemmPoolBlockBytes.
inline constexpr std::size_t kGemmPoolBlockBytes = std::size_t{512} << 10;
std::size_t gemm_relu_pool_rows(const ConvGeom& g);

// y = max_pool2d(relu(conv(x, w) + bias), 2x2, stride 2, floor) [batch, c_out, out_h/2,
// out_w/2] (bias may be null): per block of rows, im2col, one single-threaded gemm
// [c_out x Kc] * [Kc x rows*out_w], the bias added, then the pool and relu (max then relu:
// the same values as relu then max). Samples on parallel_chunks. Equal to conv_forward then
// relu then the pool up to the gemm's rounding (the same gemm, so the same floats where
// conv_forward runs one gemm per sample on one thread and the block is the whole plane).
void gemm_relu_pool_forward(const ConvGeom& g, const float* x, const float* w, const float* bias, float* y);

// The same block where conv_forward takes oneDNN's primitive (conv_onednn.hpp): each batch
// part's conv output (bias added) pooled from a per-thread buffer, so the block gives the
// unfused path's floats bit for bit. False (y untouched) where that route declines g.
bool onednn_relu_pool_forward(const ConvGeom& g, const float* x, const float* w, const float* bias, float* y);

}  // namespace tensor::cpu::nn
