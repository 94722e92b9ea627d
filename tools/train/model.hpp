// The three models `tensorctl train` trains, an MLP, the issue-15 CNN and a small vision
// transformer, built from the public module layer (<tensor/module.hpp>, <tensor/modules/...>):
// a train::Model is a tensor::Module whose submodules are the layer's (nn::Conv2d, nn::Linear,
// nn::MaxPool2d, nn::TransformerEncoder, ...), so its
// parameters are named by the module layer ("conv1.weight", "fc2.bias", ...), the
// ModuleOptimizer steps them, and checkpoints store them under those names (the names the
// tool's own model layer used before, so older checkpoints load). Public API only.
//
// Create a model on an autodiff device (Device::autodiff()) to train it: its parameters then
// require grad.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <random>
#include <string>

#include <tensor/io.hpp>
#include <tensor/quantization.hpp>
#include <tensor/module.hpp>
#include <tensor/modules/attention.hpp>
#include <tensor/modules/conv.hpp>
#include <tensor/modules/core.hpp>
#include <tensor/modules/norm.hpp>
#include <tensor/tensor.hpp>

namespace train {

// The seeded generator the tool draws from: the models' initial weights and each epoch's
// shuffle (std::mt19937_64 is specified bit for bit; the uniform mapping is ours, so the same
// seed gives the same weights on every device and build).
class Rng {
 public:
  explicit Rng(std::uint64_t seed) : g_(seed) {}
  double uniform() { return static_cast<double>(g_() >> 11) * 0x1.0p-53; }  // [0, 1)
  std::size_t below(std::size_t n) { return static_cast<std::size_t>(g_() % n); }

 private:
  std::mt19937_64 g_;
};

// The models: "cnn" is conv1(1->32, 3x3, pad 1) ReLU max-pool 2, conv2(32->64, 3x3, pad 1)
// ReLU max-pool 2, fc1(64*(H/4)*(W/4) -> 128) ReLU, fc2(128 -> 10) (3136 inputs for 28x28
// images); "mlp" is fc1(H*W -> 128) ReLU fc2(128 -> 10); "vit" is a vision transformer:
// 4x4 patches embedded by a strided Conv2d (1 -> 64), a class token and learned position
// embeddings (49 + 1 tokens for 28x28 images), dropout 0.1, 4 pre-norm TransformerEncoder
// layers (d = 64, 4 heads, feed-forward 128, GELU, dropout 0.1), a final LayerNorm and a
// Linear head on the class token. Input [N, 1, H, W], output logits [N, classes].
//
// Initialisation is burn's module default, U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for every
// weight and bias, drawn from Rng(seed) in parameter order (conv1.weight, conv1.bias, ...,
// fc2.bias) rather than from the device's stream, so a seed gives the weights it gave before
// the tool moved onto the module layer, on every device. The vit draws the same way, in its
// parameter order: every Linear / Conv2d weight and bias from U(-1/sqrt(fan_in), ..), the class
// token and position embeddings from N(0, 0.02^2); its LayerNorms start at gamma 1, beta 0.
class Model : public tensor::Module {
 public:
  Model(const std::string& kind, std::size_t height, std::size_t width, std::size_t classes, std::uint64_t seed,
        tensor::Device device);
  tensor::Tensor<2> forward(const tensor::Tensor<4>& x) const;

  const std::string& kind() const { return kind_; }
  std::size_t num_parameters() { return num_params(); }

  // Replaces every parameter from `record` (the names to_record() writes, each with
  // `prefix`, e.g. "model." in a checkpoint; tensors outside the prefix are ignored), on
  // `device`, converted to F32. A missing tensor or one of another shape is a ShapeError
  // naming it, a tensor under the prefix that the model lacks a FormatError naming it; nothing
  // is replaced then. Parameters require grad when `device` is autodiff.
  using tensor::Module::load_record;
  void load_record(const tensor::io::NamedTensors& record, tensor::Device device, const std::string& prefix = "");

  // A copy whose parameters are on the inner device, without grad, in eval mode: for evaluation.
  Model detached() const;

  void visit(tensor::ModuleVisitor& v) override;
  const char* type_name() const override { return "train::Model"; }

  // The submodules (conv1 / conv2 only in the cnn; fc2 is the vit's head, the vit's parts only in it).
  std::optional<tensor::nn::Conv2d> conv1, conv2;
  std::optional<tensor::nn::Linear> fc1, fc2;
  std::optional<tensor::nn::Conv2d> patch_embedding;
  std::optional<tensor::Tensor<3>> cls_token, pos_embedding;  // [1, 1, d], [1, tokens, d]
  std::optional<tensor::nn::TransformerEncoder> encoder;
  std::optional<tensor::nn::LayerNorm> norm;
  std::optional<tensor::nn::Dropout> embedding_dropout;
  tensor::nn::MaxPool2d pool;  // 2x2, stride 2
  tensor::nn::Relu relu;
  tensor::nn::Flatten flatten;

 private:
  std::string kind_;
};

// tensorctl eval --quantize: replaces the weight of every nn::Linear and nn::Conv2d in
// `model` (a detached, inference copy; biases and other tensors stay f32) by a quantized one.
// "q8s": int8 (Q8S, native codes, f32 scales) per output channel (Linear [in, out]: block
// [in, 1]; Conv2d [out, in, kh, kw]: block [1, in, kh, kw]), the layout the int8 product
// takes. "q4s": weight-only Q4S packed in u32 words, blocks of 32 along the input dim with f16
// scales (Linear: [32, 1] where 32 divides d_in; Conv2d: [1, 32, 1, 1] where 32 divides the
// input channels), one block per output channel otherwise. Returns the bytes of the weights
// (codes and scales as into_data lays them out) against f32, all parameters counted.
struct QuantizedSize {
  std::size_t f32_bytes = 0;    // every parameter in f32
  std::size_t bytes = 0;        // the same with the quantized weights' codes and scales
  std::size_t quantized = 0;    // how many weights were quantized
};
QuantizedSize quantize_weights(Model& model, const std::string& scheme);

// An inference-only fused block the tool may install (this library sees the public API only;
// tensorctl eval installs the CPU's fused conv + 2x2 max pool + relu, tools/eval_fused.hpp):
// the cnn's forward offers it each conv -> max-pool -> relu block, and the hook returns
// relu(max_pool2d(conv(x), 2x2)) or nullopt where it does not take the block (another device
// or dtype, a shape or a quantized route its kernels lack), and forward then runs the modules. A hook must give the
// modules' values (up to a float gemm's rounding: a different split may round differently); it bypasses autodiff and graph capture, so only evaluation installs one.
using ConvReluPool = std::optional<tensor::Tensor<4>> (*)(const tensor::Tensor<4>& x, const tensor::nn::Conv2d& conv);
void set_conv_relu_pool_hook(ConvReluPool hook);

// Mean cross-entropy of logits [N, C] against one-hot targets [N, C]:
// -(log_softmax(logits) * targets).sum() / N (differentiable on an autodiff device).
tensor::Tensor<1> cross_entropy(const tensor::Tensor<2>& logits, const tensor::Tensor<2>& one_hot);

}  // namespace train
