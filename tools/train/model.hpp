// A small model layer over the public API (burn-nn's Linear and Conv2d, as parameter
// holders with burn's default initialisation), and the two models `tensorctl train`
// trains: an MLP and the issue-15 CNN. Public API only, so examples can copy it.
//
// Parameters are plain tensors with names ("conv1.weight", ...): the optimizer keys its
// state by the name and checkpoints store them under it. Create a model on an autodiff
// device (Device::autodiff()) to train it: its parameters then require grad.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <variant>
#include <vector>

#include <tensor/io.hpp>
#include <tensor/nn.hpp>
#include <tensor/optim.hpp>
#include <tensor/tensor.hpp>

namespace train {

// One named parameter of rank D.
template <std::size_t D>
struct Param {
  std::string name;
  tensor::Tensor<D> value;
};
using ParamRef = std::variant<Param<1>*, Param<2>*, Param<4>*>;

// The seeded generator parameter init draws from (std::mt19937_64 is specified bit for bit;
// the uniform mapping is ours, so the same seed gives the same weights everywhere).
class Rng {
 public:
  explicit Rng(std::uint64_t seed) : g_(seed) {}
  double uniform() { return static_cast<double>(g_() >> 11) * 0x1.0p-53; }  // [0, 1)
  std::size_t below(std::size_t n) { return static_cast<std::size_t>(g_() % n); }

 private:
  std::mt19937_64 g_;
};

// burn's default init for both layers: KaimingUniform with gain 1/sqrt(3) and fan-in,
// i.e. U(-1/sqrt(fan_in), 1/sqrt(fan_in)), for the weight and for the bias.
tensor::Tensor<2> kaiming_uniform(tensor::Shape shape, std::size_t fan_in, Rng& rng, tensor::Device device);

// y = x W + b; x [N, in], W [in, out] (burn's layout), b [out].
struct Linear {
  Param<2> weight;
  std::optional<Param<1>> bias;
  Linear(const std::string& name, std::size_t in, std::size_t out, Rng& rng, tensor::Device device, bool with_bias = true);
  tensor::Tensor<2> forward(const tensor::Tensor<2>& x) const;
  void params(std::vector<ParamRef>& out);
};

// 2-d convolution: x [N, C_in, H, W], weight [C_out, C_in, k, k], bias [C_out].
struct Conv2d {
  Param<4> weight;
  std::optional<Param<1>> bias;
  tensor::nn::ConvOptions<2> options;
  Conv2d(const std::string& name, std::size_t in, std::size_t out, std::size_t kernel, std::int64_t padding, Rng& rng,
         tensor::Device device, bool with_bias = true);
  tensor::Tensor<4> forward(const tensor::Tensor<4>& x) const;
  void params(std::vector<ParamRef>& out);
};

// The models: "cnn" is conv(1->32, 3x3, pad 1) ReLU max-pool 2, conv(32->64, 3x3, pad 1)
// ReLU max-pool 2, linear(64*(H/4)*(W/4) -> 128) ReLU, linear(128 -> 10) (3136 inputs for
// 28x28 images); "mlp" is linear(H*W -> 128) ReLU linear(128 -> 10). Input [N, 1, H, W],
// output logits [N, classes].
class Model {
 public:
  Model(const std::string& kind, std::size_t height, std::size_t width, std::size_t classes, std::uint64_t seed,
        tensor::Device device);
  tensor::Tensor<2> forward(const tensor::Tensor<4>& x) const;

  const std::string& kind() const { return kind_; }
  std::vector<ParamRef> params();
  std::size_t num_parameters();

  // Every parameter, as host data under its name (from the inner device when on autodiff).
  tensor::io::NamedTensors to_record();
  // Replaces every parameter from `record` (names as to_record writes them, with an optional
  // prefix), on `device`; a missing tensor or one of another shape is a ShapeError naming
  // it, and nothing is replaced then. Parameters require grad when `device` is autodiff.
  void load_record(const tensor::io::NamedTensors& record, tensor::Device device, const std::string& prefix = "");

  // One optimizer step for every parameter that has a gradient in `grads`.
  void step(tensor::optim::Optimizer& opt, double lr, const tensor::Gradients& grads);
  // A copy whose parameters are on the inner device, without grad: for evaluation.
  Model detached() const;

 private:
  std::string kind_;
  std::vector<Conv2d> convs_;
  std::vector<Linear> linears_;
};

// Mean cross-entropy of logits [N, C] against one-hot targets [N, C]:
// -(log_softmax(logits) * targets).sum() / N (differentiable on an autodiff device).
tensor::Tensor<1> cross_entropy(const tensor::Tensor<2>& logits, const tensor::Tensor<2>& one_hot);

}  // namespace train
