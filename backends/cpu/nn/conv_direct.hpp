// Direct f32 convolution for few input channels (a network's first layer: 1-4 channels into
// many): each output row computed from a zero-padded, column-phase-split copy of the input
// rows it reads, by the Highway row kernel (conv_hwy.hpp), samples and row blocks on
// parallel_chunks. Beside im2col + gemm it skips the column matrix and a gemm whose
// reduction (c_in*kh*kw, 9 for a 3x3 on one channel) is too short for BLIS to run well.
#pragma once

#include "backends/cpu/nn/conv.hpp"

namespace tensor::cpu::nn {

// Whether the direct kernel takes g: groups 1, 1-d or 2-d, c_in <= 4, kernel up to 7x7.
bool direct_small_cin_supported(const ConvGeom& g);
// Whether conv_forward takes the direct route for g (f32 only): supported, and a shape where
// it was measured faster than im2col + gemm (rows of 16 or more outputs, or at most 9 taps).
bool direct_small_cin(const ConvGeom& g);

// y = conv(x, w) + bias (bias may be null) for a g with direct_small_cin_supported(g).
void direct_small_cin_forward(const ConvGeom& g, const float* x, const float* w, const float* bias, float* y);

// A network's first block in one pass: y = max_pool2d(relu(conv(x, w) + bias), kernel 2,
// stride 2, no padding, floor), y [batch, c_out, out_h/2, out_w/2] where conv's output is
// [batch, c_out, out_h, out_w]. Each pair of conv rows is computed into a small per-thread
// block (L1-sized) and pooled from there, so the 4x larger pre-pool activation is never
// stored; relu is applied after the max (relu is monotone, so max and relu commute: the same
// values as relu then max-pool, NaN kept, -0 -> 0 either way).
// Takes a g with direct_small_cin_relu_pool_supported(g): the direct kernel's shapes with at
// least a 2x2 output.
bool direct_small_cin_relu_pool_supported(const ConvGeom& g);
void direct_small_cin_relu_pool_forward(const ConvGeom& g, const float* x, const float* w, const float* bias, float* y);

}  // namespace tensor::cpu::nn
