// tensorctl train / eval: the CNN (or MLP) on Fashion-MNIST (or digits) with autodiff and
// Adam on TENSOR_DEVICE; the code is tools/train/ (public API only).
#include <cstdlib>
#include <exception>
#include <optional>
#include <string>
#include <vector>

#include "backends/cpu/cpu_tensor.hpp"
#include "backends/cpu/nn/conv.hpp"
#include "backends/cpu/quant.hpp"
#include "lib/src/handles.hpp"
#include "tensor/quantization.hpp"
#include "tools/tensorctl.hpp"
#include "trainer.hpp"

namespace tensorctl {

namespace {

// The CPU primitive behind a tensor's handle when it is a row-major CPU tensor in f32.
const tensor::cpu::CpuTensor* cpu_f32(const tensor::detail::Handle& h) {
  const auto* t = dynamic_cast<const tensor::cpu::CpuTensor*>(tensor::detail::handles::prim_of(h));
  return t != nullptr && t->dtype() == tensor::DType::F32 && t->is_contiguous() ? t : nullptr;
}

// eval's fused first block (train::ConvReluPool): relu(max_pool2d(conv2d(x), 2x2)) in one pass
// of the CPU's direct small-C_in kernel where it takes the conv (f32 tensors on the cpu, the
// direct route's shapes, a quantized weight where the conv runs on it dequantized); nullopt
// otherwise, and the model runs its modules (which also
// report any bad input).
std::optional<tensor::Tensor<4>> cpu_conv_relu_pool(const tensor::Tensor<4>& x, const tensor::nn::Conv2d& c) {
  namespace cn = tensor::cpu::nn;
  if (x.device() != tensor::Device::cpu() || c.weight.device() != x.device()) return std::nullopt;
  if (c.bias && c.bias->device() != x.device()) return std::nullopt;
  // A quantized weight: as dispatch's conv_quantized rule (dispatch/rules/quant.cpp, kMinIntK),
  // a conv whose outputs sum fewer than 32 products runs the float conv on the dequantized
  // weight, and that one is fused the same way; the int8 routes are left to the modules.
  std::optional<tensor::Tensor<4>> dequantized;
  if (tensor::quant_scheme(c.weight)) {
    const tensor::Shape s = c.weight.shape();
    if (s[0] == 0 || s.num_elements() / s[0] >= 32) return std::nullopt;
    dequantized = tensor::dequantize(c.weight);
  }
  const tensor::Tensor<4>& w = dequantized ? *dequantized : c.weight;
  const auto *xs = cpu_f32(x.handle()), *ws = cpu_f32(w.handle());
  const auto* bs = c.bias ? cpu_f32(c.bias->handle()) : nullptr;
  if (xs == nullptr || ws == nullptr || (c.bias && bs == nullptr)) return std::nullopt;
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

// TENSOR_EVAL_FUSED=0 runs eval's cnn on its modules only (A/B runs).
bool fused_off() {
  const char* e = std::getenv("TENSOR_EVAL_FUSED");
  return e != nullptr && std::string(e) == "0";
}

}  // namespace

int run_train(Args args) { return train::train_main(std::vector<std::string>(args.begin(), args.end())); }
int run_eval(Args args) {
  train::set_conv_route_probe(&tensor::cpu::last_q_conv2d_route);
  train::set_f32_conv_routes_probe(&tensor::cpu::nn::conv_forward_routes, &tensor::cpu::nn::reset_conv_forward_routes);
  if (!fused_off()) train::set_conv_relu_pool_hook(&cpu_conv_relu_pool);
  return train::eval_main(std::vector<std::string>(args.begin(), args.end()));
}

}  // namespace tensorctl
