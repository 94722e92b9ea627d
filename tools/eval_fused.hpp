// eval's fused conv blocks (train::ConvReluPool, tools/train/model.hpp) on the cpu: tensorctl
// eval installs it; it reads below the public API (the CPU primitives behind the handles).
#pragma once

#include <optional>

#include <tensor/modules/conv.hpp>
#include <tensor/tensor.hpp>

namespace tensorctl {

// relu(max_pool2d(conv2d(x), 2x2, stride 2)) in one pass, the pre-pool activation never
// stored (nn::conv_relu_pool_forward), on the route the CPU's f32 conv takes for the shape:
// the direct small-C_in kernel (the cnn's first block) or im2col + gemm per sample (its
// second block): x, the weight and the bias f32 row-major tensors on the cpu (not autodiff),
// 2-d, groups 1, a conv output of at least 2x2; a quantized weight where dispatch runs the
// conv on it dequantized (fewer than 32 products per output). A quantized weight on oneDNN's
// int8 route takes that route with the pool and relu in its epilogue
// (cpu::q_conv2d_relu_pool). nullopt otherwise (the model then runs its modules, which also
// report any bad input).
std::optional<tensor::Tensor<4>> cpu_conv_relu_pool(const tensor::Tensor<4>& x, const tensor::nn::Conv2d& c);

}  // namespace tensorctl
