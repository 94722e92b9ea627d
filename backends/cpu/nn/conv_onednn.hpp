// The 2-d f32 convolution (forward, input gradient, weight gradient) on oneDNN's
// convolution primitives (JIT kernels on its own blocked layouts; the plain NCHW operands
// reordered in and out per batch part), where they take less work than im2col + gemm
// (+ col2im) in conv.cpp: the forward and input gradient without im2col's copies and
// col2im's scattered adds, the weight gradient without im2col. Each part of the batch (a
// fixed count, so results do not depend on the thread count) runs single-threaded on
// parallel_chunks (never oneDNN's OpenMP threads, see parallel.hpp); the weight gradient
// adds the parts' partial sums in part order. By default only where oneDNN picks an
// AVX-512 kernel (measured faster here); TENSOR_CONV_ONEDNN=0 / 1 for A/B.
#pragma once

#include <cstddef>
#include <functional>

#include "backends/cpu/nn/conv.hpp"

namespace tensor::cpu::nn {

// Which geometries the functions below take: none, those where this route was measured
// faster than im2col + gemm on this CPU (the default), or every one they can run.
// TENSOR_CONV_ONEDNN=0 / 1 at startup: off / forced; tests and A/B runs set it here.
enum class OnednnConvMode { off, preferred, forced };
void set_onednn_conv_mode(OnednnConvMode m);
OnednnConvMode onednn_conv_mode();

// y = the convolution of x with w, plus bias per output channel where bias is not null
// (overwritten); false as below.
bool onednn_conv_forward(const ConvGeom& g, const float* x, const float* w, const float* bias, float* y);

// The forward above with each batch part's output, samples [n0, n1) as [n1 - n0, c_out,
// out_h, out_w] (bias added) in a per-thread buffer readable `slack` floats past its end,
// handed to epilogue(n0, n1, part) instead of stored (conv_gemm_pool.hpp's fused block);
// the same floats as onednn_conv_forward. False as below.
using PartEpilogue = std::function<void(std::size_t, std::size_t, const float*)>;
bool onednn_conv_forward_parts(const ConvGeom& g, const float* x, const float* w, const float* bias, std::size_t slack,
                               const PartEpilogue& epilogue);

// dx = the input gradient of a convolution with geometry g (overwritten); false (dx
// untouched or partly written, to be overwritten) where this route does not take g: no
// oneDNN, not 2-d, groups > 1, fewer than 16 input or output channels, less than 128^3
// multiply-adds, or no JIT kernel for it.
bool onednn_conv_backward_x(const ConvGeom& g, const float* dy, const float* w, float* dx);

// dw = the weight gradient (overwritten), [c_out, c_in, kh, kw]; false as above.
bool onednn_conv_backward_weight(const ConvGeom& g, const float* x, const float* dy, float* dw);

}  // namespace tensor::cpu::nn
