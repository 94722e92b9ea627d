// eval's fused first block (train::ConvReluPool, tools/train/model.hpp) on the cpu: tensorctl
// eval installs it; it reads below the public API (the CPU primitives behind the handles).
#pragma once

#include <optional>

#include <tensor/modules/conv.hpp>
#include <tensor/tensor.hpp>

namespace tensorctl {

// relu(max_pool2d(conv2d(x), 2x2, stride 2)) in one pass of the CPU's direct small-C_in
// kernel (nn::conv_relu_pool_forward) where it takes the conv: x, the weight and the bias f32
// row-major tensors on the cpu (not autodiff), a shape of the direct route; a quantized weight
// where dispatch runs the conv on it dequantized. A quantized weight on oneDNN's int8 route
// takes that route with the pool and relu in its epilogue (cpu::q_conv2d_relu_pool). nullopt
// otherwise (the model then runs its
// modules, which also report any bad input).
std::optional<tensor::Tensor<4>> cpu_conv_relu_pool(const tensor::Tensor<4>& x, const tensor::nn::Conv2d& c);

}  // namespace tensorctl
