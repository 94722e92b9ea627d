// tensorctl eval's fused first block (tools/eval_fused.hpp) in the cnn (tools/train/model.hpp):
// the model with the hook installed gives the same logits, bit for bit, as on its modules, for
// f32 weights and for q8s / q4s weights (conv1 then runs dequantized, as dispatch runs it);
// both blocks of the f32 cnn take a fused route (direct, then im2col + gemm); the second on
// odd outputs against an f64 loop and the modules; the hook declines what its kernels lack
// (autodiff, nothing to pool, a q4s weight run dequantized with K >= 32).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <tensor/quantization.hpp>
#include <tensor/tensor.hpp>

#include "backends/cpu/nn/conv.hpp"
#include "backends/cpu/nn/conv_onednn.hpp"
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
  // both blocks fused: the first on the direct kernel, the second on im2col + gemm (there the
  // same single-threaded gemm per sample as the module's, so the same floats) or on oneDNN's
  // primitive (the module's conv2d takes it too: the same parts, so the same floats)
  const auto mode = tensor::cpu::nn::onednn_conv_mode();
  for (const auto route : {tensor::cpu::nn::OnednnConvMode::off, tensor::cpu::nn::OnednnConvMode::forced}) {
    tensor::cpu::nn::set_onednn_conv_mode(route);
    const Logits r = both(m, x);
    ASSERT_EQ(r.plain.size(), 37u * 10u);
    EXPECT_EQ(r.fused, r.plain);
#if TENSOR_HAVE_ONEDNN
    const bool onednn = route == tensor::cpu::nn::OnednnConvMode::forced;
#else
    const bool onednn = false;
#endif
    EXPECT_EQ(r.routes, std::string("direct small-C_in + relu + max-pool 2x2 [1->32 3x3]; ") +
                            (onednn ? "onednn jit" : "im2col + gemm") + " + relu + max-pool 2x2 [32->64 3x3]");
  }
  tensor::cpu::nn::set_onednn_conv_mode(mode);
}

// The second block's f32 fused route through the hook: odd conv outputs (7x9, 5x5: the last
// row and column left out), with and without bias, against an f64 loop (1e-5) and against
// the modules (conv2d, max_pool2d, relu: within 1e-6 relative, the gemm's rounding; whether
// bit for bit is recorded); 1-row / 1-column outputs declined.
TEST(EvalFused, F32GemmBlockOnOddOutputs) {
  const train::Model m = train::Model("cnn", 8, 8, 10, 3, Device::cpu()).detached();
  struct Shape4 { std::size_t n, c, h, w, oc; };
  for (const Shape4 k : {Shape4{5, 6, 7, 9, 16}, Shape4{3, 32, 5, 5, 8}})
    for (const bool bias : {true, false}) {
      tensor::nn::Conv2dConfig cfg;
      cfg.channels = {k.c, k.oc};
      cfg.kernel_size = {3, 3};
      cfg.padding = tensor::nn::Padding<2>::explicit_({1, 1});
      cfg.bias = bias;
      const tensor::nn::Conv2d c(cfg, Device::cpu());
      std::vector<float> v(k.n * k.c * k.h * k.w);
      std::uint32_t seed = 7;
      for (auto& e : v) {
        seed = seed * 1664525u + 1013904223u;
        e = static_cast<float>(seed >> 8) / static_cast<float>(1u << 24) * 2.0f - 1.0f;
      }
      const auto x = Tensor<4>::from_data(TensorData::from<float>(v, Shape{k.n, k.c, k.h, k.w}), Device::cpu());
      const std::string what = std::to_string(k.c) + "->" + std::to_string(k.oc) + " bias " + std::to_string(bias);
      const auto want = m.relu.forward(m.pool.forward(c.forward(x))).to_vec<float>();
      tensor::cpu::nn::reset_conv_forward_routes();
      const auto got = tensorctl::cpu_conv_relu_pool(x, c);
      ASSERT_TRUE(got.has_value()) << what;
      EXPECT_EQ(tensor::cpu::nn::conv_forward_routes(), "im2col + gemm + relu + max-pool 2x2 [" + std::to_string(k.c) + "->" +
                                                            std::to_string(k.oc) + " 3x3]") << what;
      ASSERT_EQ(got->shape(), (Shape{k.n, k.oc, k.h / 2, k.w / 2})) << what;
      const auto g = got->to_vec<float>();
      // f64 loop: relu(max over the window of bias + sum w * x), padding 1
      const auto wv = c.weight.to_vec<float>();
      const auto bv = bias ? c.bias->to_vec<float>() : std::vector<float>(k.oc, 0.0f);
      const std::size_t py = k.h / 2, px = k.w / 2;
      std::size_t clamped = 0;
      for (std::size_t n = 0; n < k.n; ++n)
        for (std::size_t o = 0; o < k.oc; ++o)
          for (std::size_t i = 0; i < py; ++i)
            for (std::size_t j = 0; j < px; ++j) {
              double best = 0.0;  // relu
              for (std::size_t a = 0; a < 2; ++a)
                for (std::size_t e = 0; e < 2; ++e) {
                  double s = bv[o];
                  for (std::size_t ci = 0; ci < k.c; ++ci)
                    for (std::size_t u = 0; u < 3; ++u)
                      for (std::size_t t = 0; t < 3; ++t) {
                        const auto r = static_cast<std::int64_t>(2 * i + a + u) - 1, q = static_cast<std::int64_t>(2 * j + e + t) - 1;
                        if (r < 0 || q < 0 || r >= static_cast<std::int64_t>(k.h) || q >= static_cast<std::int64_t>(k.w)) continue;
                        s += static_cast<double>(wv[((o * k.c + ci) * 3 + u) * 3 + t]) *
                             static_cast<double>(v[((n * k.c + ci) * k.h + static_cast<std::size_t>(r)) * k.w + static_cast<std::size_t>(q)]);
                      }
                  best = std::max(best, s);
                }
              const std::size_t at = ((n * k.oc + o) * py + i) * px + j;
              clamped += best == 0.0;
              EXPECT_NEAR(g[at], best, 1e-5 * (1.0 + std::abs(best))) << what << " at " << at;
              EXPECT_NEAR(g[at], want[at], 1e-6 * (1.0 + std::abs(want[at]))) << what << " at " << at;
            }
      EXPECT_GT(clamped, 0u) << what;
      // bit for bit with the modules is not the contract (1e-6 is); recorded (equal when written)
      ::testing::Test::RecordProperty(what + " bit for bit", g == want ? "yes" : "no");
    }
  // a 1x7 conv output (3 rows, no padding) has nothing to pool: declined
  tensor::nn::Conv2dConfig cfg;
  cfg.channels = {32, 8};
  cfg.kernel_size = {3, 3};
  const tensor::nn::Conv2d c(cfg, Device::cpu());
  const auto x = Tensor<4>::from_data(TensorData::from<float>(std::vector<float>(2 * 32 * 3 * 9, 0.5f), Shape{2, 32, 3, 9}),
                                      Device::cpu());
  EXPECT_FALSE(tensorctl::cpu_conv_relu_pool(x, c).has_value());
  const auto xt = Tensor<4>::from_data(TensorData::from<float>(std::vector<float>(2 * 32 * 9 * 3, 0.5f), Shape{2, 32, 9, 3}),
                                       Device::cpu());
  EXPECT_FALSE(tensorctl::cpu_conv_relu_pool(xt, c).has_value());
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
// modules (conv2d on the int8 route, max_pool2d, relu) bit for bit; 16 output channels (whole
// vectors) and 19 (the epilogue's channel tail).
TEST(EvalFused, Int8ConvEpilogueOnOddOutputs) {
  const train::Model m = train::Model("cnn", 8, 8, 10, 3, Device::cpu()).detached();
  for (const std::size_t oc : {std::size_t{16}, std::size_t{19}})
  for (const bool bias : {true, false}) {
    tensor::nn::Conv2dConfig cfg;
    cfg.channels = {6, oc};
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
    EXPECT_EQ(got->shape(), (Shape{5, oc, 3, 4}));
    EXPECT_EQ(got->to_vec<float>(), want.to_vec<float>()) << "bias " << bias << ", " << oc << " channels";
    EXPECT_EQ(tensor::cpu::last_q_conv2d_route(), unfused_route + " + relu + max-pool 2x2");
  }
}

TEST(EvalFused, DeclinesWhatItsKernelLacks) {
  // both convs of the f32 cnn are taken (the second on im2col + gemm)
  const train::Model m = train::Model("cnn", 8, 8, 10, 1, Device::cpu()).detached();
  EXPECT_TRUE(tensorctl::cpu_conv_relu_pool(images(2, 8, 8, 1), *m.conv1).has_value());
  const auto h = Tensor<4>::from_data(TensorData::from<float>(std::vector<float>(2 * 32 * 4 * 4, 0.5f), Shape{2, 32, 4, 4}),
                                      Device::cpu());
  EXPECT_TRUE(tensorctl::cpu_conv_relu_pool(h, *m.conv2).has_value());
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
