// A quantized model saved and loaded (issue 32): nn::Linear / nn::Conv2d with quantized weights
// through Module::save and a fresh float module's load, on every device. The reference is the
// quantized weight's own bytes before the save, and the forward of the module that was saved.
#include <filesystem>

#include <tensor/modules/conv.hpp>

#include "quant_test_util.hpp"

using namespace quant_test;

namespace {

std::string scratch(const std::string& name) {
  return (std::filesystem::path(::testing::TempDir()) / (name + "_" + std::to_string(::getpid()) + ".safetensors")).string();
}

std::vector<float> ramp(std::size_t n, float step, float start) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = start + step * static_cast<float>((i * 7) % 23);
  return v;
}

TEST_P(Quant, QuantizedModelSavesAndLoadsIntoAFloatModule) {
  constexpr std::size_t K = 64, N = 5;
  const QuantScheme q4 = QuantScheme{}
                             .with_value(QuantValue::Q4S)
                             .with_store(QuantStore::PackedU32)
                             .with_param(ScaleDtype::F16)
                             .with_level(QuantLevel::block({32, 1}));
  const QuantScheme q8 = q8s().with_level(QuantLevel::block({1, 2, 3, 3}));
  nn::Linear lin(nn::LinearConfig{K, N, true}, dev());
  lin.weight = quantize_dynamic(fl<2>(ramp(K * N, 0.05f, -0.5f), Shape{K, N}), q4);
  nn::Conv2dConfig cc;
  cc.channels = {2, 3};
  cc.kernel_size = {3, 3};
  nn::Conv2d conv(cc, dev());
  conv.weight = quantize_dynamic(fl<4>(ramp(3 * 2 * 9, 0.11f, -1.2f), Shape{3, 2, 3, 3}), q8);
  const std::string lpath = scratch("qlinear"), cpath = scratch("qconv");
  lin.save(lpath);
  conv.save(cpath);

  nn::Linear lin2(nn::LinearConfig{K, N, true}, dev());  // float weights of another draw
  nn::Conv2d conv2(cc, dev());
  lin2.load(lpath);
  conv2.load(cpath);
  std::filesystem::remove(lpath);
  std::filesystem::remove(cpath);
  ASSERT_TRUE(is_quantized(lin2.weight));
  ASSERT_TRUE(is_quantized(conv2.weight));
  EXPECT_EQ(*quant_scheme(lin2.weight), q4);
  EXPECT_EQ(*quant_scheme(conv2.weight), q8);
  EXPECT_EQ(lin2.weight.into_data(), lin.weight.into_data());
  EXPECT_EQ(conv2.weight.into_data(), conv.weight.into_data());
  EXPECT_EQ(lin2.bias->into_data(), lin.bias->into_data());
  EXPECT_EQ(conv2.bias->into_data(), conv.bias->into_data());
  // The loaded modules compute what the saved ones did (same data, same route: equal bits).
  const auto x = fl<2>(ramp(3 * K, 0.03f, -0.3f), Shape{3, K});
  EXPECT_EQ(lin2.forward(x).into_data(), lin.forward(x).into_data());
  const auto img = fl<4>(ramp(2 * 2 * 6 * 6, 0.07f, -0.8f), Shape{2, 2, 6, 6});
  EXPECT_EQ(conv2.forward(img).into_data(), conv.forward(img).into_data());
}

TEST_P(Quant, QuantizedRecordOfTheWrongShapeLoadsNothing) {
  const QuantScheme s = q8s();
  nn::Linear small(nn::LinearConfig{4, 3, true}, dev());
  small.weight = quantize_dynamic(small.weight, s);
  const std::string path = scratch("qwrong");
  small.save(path);
  nn::Linear other(nn::LinearConfig{4, 2, true}, dev());
  const TensorData before = other.weight.into_data();
  EXPECT_THROW(other.load(path), FormatError);
  std::filesystem::remove(path);
  EXPECT_EQ(other.weight.into_data(), before);
  EXPECT_FALSE(is_quantized(other.weight));
}

}  // namespace
