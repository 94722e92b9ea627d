// eval's fused first block on the cpu (see eval_fused.hpp).
#include "tools/eval_fused.hpp"

#include <exception>

#include "backends/cpu/cpu_tensor.hpp"
#include "backends/cpu/nn/conv.hpp"
#include "backends/cpu/quant.hpp"
#include "dispatch/quant.hpp"
#include "lib/src/handles.hpp"
#include "tensor/quantization.hpp"

namespace tensorctl {
namespace {

// The CPU primitive behind a tensor's handle when it is a row-major CPU tensor in f32.
const tensor::cpu::CpuTensor* cpu_f32(const tensor::detail::Handle& h) {
  const auto* t = dynamic_cast<const tensor::cpu::CpuTensor*>(tensor::detail::handles::prim_of(h));
  return t != nullptr && t->dtype() == tensor::DType::F32 && t->is_contiguous() ? t : nullptr;
}

}  // namespace

std::optional<tensor::Tensor<4>> cpu_conv_relu_pool(const tensor::Tensor<4>& x, const tensor::nn::Conv2d& c) {
  namespace cn = tensor::cpu::nn;
  if (x.device() != tensor::Device::cpu() || c.weight.device() != x.device()) return std::nullopt;
  if (c.bias && c.bias->device() != x.device()) return std::nullopt;
  // A quantized weight: as dispatch's conv_quantized rule (dispatch/rules/quant.cpp, kMinIntConvK),
  // a conv whose outputs sum fewer than 32 products runs the float conv on the dequantized
  // weight, and that one is fused the same way; one with more runs oneDNN's int8 conv, with
  // the pool and relu in its epilogue (q_conv2d_relu_pool checks the rest of the rule).
  std::optional<tensor::Tensor<4>> dequantized;
  if (tensor::quant_scheme(c.weight)) {
    const tensor::Shape s = c.weight.shape();
    if (s[0] == 0) return std::nullopt;
    if (s.num_elements() / s[0] >= tensor::dispatch::quant::kMinIntConvK) {
      namespace h = tensor::detail::handles;
      const tensor::dispatch::Primitive* b = c.bias ? h::prim_of(c.bias->handle()) : nullptr;
      tensor::dispatch::Prim y = tensor::cpu::q_conv2d_relu_pool(*h::prim_of(x.handle()), *h::prim_of(c.weight.handle()), b, c.options);
      if (!y) return std::nullopt;
      return tensor::Tensor<4>(h::give(tensor::dispatch::DispatchTensor(std::move(y), tensor::detail::Kind::Float)));
    }
    dequantized = tensor::dequantize(c.weight);
  }
  const tensor::Tensor<4>& w = dequantized ? *dequantized : c.weight;
  const auto *xs = cpu_f32(x.handle()), *ws = cpu_f32(w.handle());
  const auto* bs = c.bias ? cpu_f32(c.bias->handle()) : nullptr;
  if (xs == nullptr || ws == nullptr || (c.bias && bs == nullptr)) return std::nullopt;
  if (c.bias && c.bias->shape() != tensor::Shape{w.shape()[0]}) return std::nullopt;  // the module reports it
  cn::ConvGeom g;
  try {
    g = cn::conv_geom<2>("conv2d", x.shape(), w.shape(), c.options);
  } catch (const std::exception&) {
    return std::nullopt;  // the module's forward reports it
  }
  if (!cn::conv_relu_pool_fusable(g)) return std::nullopt;
  auto y = tensor::cpu::alloc_tensor(tensor::DType::F32, tensor::Shape{g.batch, g.c_out, g.out[1] / 2, g.out[2] / 2});
  cn::conv_relu_pool_forward(g, reinterpret_cast<const float*>(xs->data()), reinterpret_cast<const float*>(ws->data()),
                             bs ? reinterpret_cast<const float*>(bs->data()) : nullptr, reinterpret_cast<float*>(y->data()));
  tensor::dispatch::Prim p = std::move(y);
  return tensor::Tensor<4>(tensor::detail::handles::give(tensor::dispatch::DispatchTensor(std::move(p), tensor::detail::Kind::Float)));
}

}  // namespace tensorctl
