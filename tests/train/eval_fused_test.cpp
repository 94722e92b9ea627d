// tensorctl eval's fused first block (tools/eval_fused.hpp) in the cnn (tools/train/model.hpp):
// the model with the hook installed gives the same logits, bit for bit, as on its modules, for
// f32 weights and for q8s / q4s weights (conv1 then runs dequantized, as dispatch runs it);
// the first block takes the fused route and the second does not; the hook declines what its
// kernel lacks (autodiff, a shape off the direct route, a quantized weight on an int8 route).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <tensor/tensor.hpp>

#include "backends/cpu/nn/conv.hpp"
#include "model.hpp"
#include "tools/eval_fused.hpp"

namespace {

using tensor::Device;
using tensor::Shape;
using tensor::Tensor;
using tensor::TensorData;

Tensor<4> images(std::size_t n, std::size_t h, std::size_t w, std::uint32_t seed) {
  std::vector<float> v(n * h * w);
  for (auto& x : v) {
    seed = seed * 1664525u + 1013904223u;
    x = static_cast<float>(seed >> 8) / static_cast<float>(1u << 24);  // pixels in [0, 1)
  }
  return Tensor<4>::from_data(TensorData::from<float>(v, Shape{n, 1, h, w}), Device::cpu());
}

// Logits of m on x with the hook off and on (the hook left off), and the conv routes with it on.
struct Logits {
  std::vector<float> plain, fused;
  std::string routes;
};
Logits both(const train::Model& m, const Tensor<4>& x) {
  Logits r;
  train::set_conv_relu_pool_hook(nullptr);
  r.plain = m.forward(x).to_vec<float>();
  train::set_conv_relu_pool_hook(&tensorctl::cpu_conv_relu_pool);
  tensor::cpu::nn::reset_conv_forward_routes();
  r.fused = m.forward(x).to_vec<float>();
  r.routes = tensor::cpu::nn::conv_forward_routes();
  train::set_conv_relu_pool_hook(nullptr);
  return r;
}

TEST(EvalFused, TheCnnGivesTheModulesLogitsBitForBit) {
  const train::Model m = train::Model("cnn", 28, 28, 10, 7, Device::cpu()).detached();
  const auto x = images(37, 28, 28, 3);  // an odd batch: row blocks split unevenly over threads
  const Logits r = both(m, x);
  ASSERT_EQ(r.plain.size(), 37u * 10u);
  EXPECT_EQ(r.fused, r.plain);
  EXPECT_EQ(r.routes, "direct small-C_in + relu + max-pool 2x2 [1->32 3x3]; im2col + gemm [32->64 3x3]");
}

TEST(EvalFused, QuantizedWeightsGiveTheModulesLogitsBitForBit) {
  for (const std::string scheme : {"q8s", "q4s"}) {
    train::Model m = train::Model("cnn", 12, 20, 10, 9, Device::cpu()).detached();  // 3x5 after two pools
    train::quantize_weights(m, scheme);
    const auto x = images(5, 12, 20, 4);
    const Logits r = both(m, x);
    ASSERT_EQ(r.plain.size(), 5u * 10u) << scheme;
    EXPECT_EQ(r.fused, r.plain) << scheme;
    EXPECT_NE(r.routes.find("direct small-C_in + relu + max-pool 2x2 [1->32 3x3]"), std::string::npos) << scheme << ": " << r.routes;
  }
}

TEST(EvalFused, DeclinesWhatItsKernelLacks) {
  // the second conv (32 input channels) is not the direct route's
  const train::Model m = train::Model("cnn", 8, 8, 10, 1, Device::cpu()).detached();
  EXPECT_TRUE(tensorctl::cpu_conv_relu_pool(images(2, 8, 8, 1), *m.conv1).has_value());
  const auto h = Tensor<4>::from_data(TensorData::from<float>(std::vector<float>(2 * 32 * 4 * 4, 0.5f), Shape{2, 32, 4, 4}),
                                      Device::cpu());
  EXPECT_FALSE(tensorctl::cpu_conv_relu_pool(h, *m.conv2).has_value());
  // a q8s conv2 runs on the int8 route (K = 288): not fused
  train::Model q = m.detached();
  train::quantize_weights(q, "q8s");
  EXPECT_FALSE(tensorctl::cpu_conv_relu_pool(h, *q.conv2).has_value());
  // x with the wrong channel count: declined, the module then reports it
  EXPECT_FALSE(tensorctl::cpu_conv_relu_pool(h, *m.conv1).has_value());
  // a model on the autodiff device: its tensors are not the cpu's primitives
  const train::Model a("cnn", 8, 8, 10, 1, Device::cpu().autodiff());
  const auto xa = Tensor<4>::from_data(images(2, 8, 8, 1).into_data(), Device::cpu().autodiff());
  EXPECT_FALSE(tensorctl::cpu_conv_relu_pool(xa, *a.conv1).has_value());
}

}  // namespace
