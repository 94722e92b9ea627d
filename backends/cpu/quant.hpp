// The CPU's quant rows (backends/cpu/quant.cpp), for tools: the route the calling thread's
// last q_matmul took ("onednn <kernel name>", or "dequantize + f32 matmul").
#pragma once

#include <string>

#include "dispatch/primitive.hpp"
#include "tensor/nn_options.hpp"

namespace tensor::cpu {

std::string last_q_matmul_route();
// True where the int8 products are live: a build with oneDNN whose CPU engine starts (its
// int8 kernels: AMX, VNNI, or AVX2 / AVX-512 without VNNI). The cpu then lists QFloat as
// Accelerated (dtype_usage).
bool int8_products_live();
// The route the calling thread's last q_conv2d took ("onednn conv <kernel name>", "im2col +
// onednn <kernel name>", "dequantize + f32 conv2d"; empty before any).
std::string last_q_conv2d_route();

// relu(max_pool2d(conv2d(x, w, bias), 2x2, stride 2)) on oneDNN's int8 convolution with the
// pool and relu in its NCHW epilogue (the full-size output never stored; the same floats as
// the conv's route then max_pool2d then relu), for tensorctl eval's cnn: x a row-major f32
// CPU tensor [N, C, H, W], w a quantized weight, bias a row-major f32 CPU tensor or null.
// Null, with nothing computed or kept, where dispatch would not run this conv on that route
// (groups, fewer than 32 products per output, block scales not per output channel), the
// shapes do not fit, oneDNN has no kernel, or an image is not finite. The route is then
// "onednn conv <kernel> + relu + max-pool 2x2".
dispatch::Prim q_conv2d_relu_pool(const dispatch::Primitive& x, const dispatch::Primitive& w, const dispatch::Primitive* bias,
                                  const tensor::nn::ConvOptions<2>& options);

}  // namespace tensor::cpu
