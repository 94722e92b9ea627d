// tensorctl train / eval: the CNN (or MLP) on Fashion-MNIST (or digits) with autodiff and
// Adam on TENSOR_DEVICE; the code is tools/train/ (public API only).
#include <cstdlib>
#include <string>
#include <vector>

#include "backends/cpu/nn/conv.hpp"
#include "backends/cpu/quant.hpp"
#include "tools/eval_fused.hpp"
#include "tools/tensorctl.hpp"
#include "trainer.hpp"

namespace tensorctl {

namespace {

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
