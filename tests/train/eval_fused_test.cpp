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

#include <tensor/quantization.hpp>
#include <tensor/tensor.hpp>

#include "backends/cpu/nn/conv.hpp"
#include "backends/cpu/quant.hpp"
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
    // q8s's conv2 (per-channel scales, K = 288) runs oneDNN's int8 conv with the epilogue
    const std::string q = tensor::cpu::last_q_conv2d_route();
    if (scheme == "q8s" && q.starts_with("onednn conv")) {
      EXPECT_TRUE(q.ends_with(" + relu + max-pool 2x2")) << q;
    }
  }
}

// The int8 conv's pooled epilogue on odd conv outputs (7x9: the last row and column left
// out), a batch of 5 split in chunks over the threads, with and without bias, against the
// modules (conv2d on the int8 route, max_pool2d, relu) bit for bit.
TEST(EvalFused, Int8ConvEpilogueOnOddOutputs) {
  const train::Model m = train::Model("cnn", 8, 8, 10, 3, Device::cpu()).detached();
  for (const bool bias : {true, false}) {
    tensor::nn::Conv2dConfig cfg;
    cfg.channels = {6, 16};
    cfg.kernel_size = {3, 3};
    cfg.padding = tensor::nn::Padding<2>::explicit_({1, 1});
    cfg.bias = bias;
    tensor::nn::Conv2d c(cfg, Device::cpu());
    const auto s = tensor::QuantScheme{}.with_value(tensor::QuantValue::Q8S).with_store(tensor::QuantStore::Native);
    c.weight = tensor::quantize_dynamic(c.weight, s.with_param(tensor::ScaleDtype::F32).with_level(tensor::QuantLevel::block({1, 6, 3, 3})));
    std::vector<float> v(5 * 6 * 7 * 9);
    std::uint32_t seed = 5;
    for (auto& e : v) {
      seed = seed * 1664525u + 1013904223u;
      e = static_cast<float>(seed >> 8) / static_cast<float>(1u << 24) * 2.0f - 1.0f;
    }
    const auto x = Tensor<4>::from_data(TensorData::from<float>(v, Shape{5, 6, 7, 9}), Device::cpu());
    const auto want = m.relu.forward(m.pool.forward(c.forward(x)));
    const std::string unfused_route = tensor::cpu::last_q_conv2d_route();
    const auto got = tensorctl::cpu_conv_relu_pool(x, c);
    if (!unfused_route.starts_with("onednn conv")) {  // no oneDNN kernel here: declined
      EXPECT_FALSE(got.has_value()) << unfused_route;
      continue;
    }
    ASSERT_TRUE(got.has_value()) << unfused_route;
    EXPECT_EQ(got->shape(), (Shape{5, 16, 3, 4}));
    EXPECT_EQ(got->to_vec<float>(), want.to_vec<float>()) << "bias " << bias;
    EXPECT_EQ(tensor::cpu::last_q_conv2d_route(), unfused_route + " + relu + max-pool 2x2");
  }
}

TEST(EvalFused, DeclinesWhatItsKernelLacks) {
  // the second conv (32 input channels) is not the direct route's
  const train::Model m = train::Model("cnn", 8, 8, 10, 1, Device::cpu()).detached();
  EXPECT_TRUE(tensorctl::cpu_conv_relu_pool(images(2, 8, 8, 1), *m.conv1).has_value());
  const auto h = Tensor<4>::from_data(TensorData::from<float>(std::vector<float>(2 * 32 * 4 * 4, 0.5f), Shape{2, 32, 4, 4}),
                                      Device::cpu());
  EXPECT_FALSE(tensorctl::cpu_conv_relu_pool(h, *m.conv2).has_value());
  // a q4s conv2 (blocks of 32 input channels: not per output channel, so not the int8 route
  // but the float conv on the dequantized weight, K = 288): left to the modules
  train::Model q = m.detached();
  train::quantize_weights(q, "q4s");
  EXPECT_FALSE(tensorctl::cpu_conv_relu_pool(h, *q.conv2).has_value());
  // x with the wrong channel count: declined, the module then reports it
  EXPECT_FALSE(tensorctl::cpu_conv_relu_pool(h, *m.conv1).has_value());
  // a model on the autodiff device: its tensors are not the cpu's primitives
  const train::Model a("cnn", 8, 8, 10, 1, Device::cpu().autodiff());
  const auto xa = Tensor<4>::from_data(images(2, 8, 8, 1).into_data(), Device::cpu().autodiff());
  EXPECT_FALSE(tensorctl::cpu_conv_relu_pool(xa, *a.conv1).has_value());
}

}  // namespace
