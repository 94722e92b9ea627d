// burn-nn's basic modules: Linear, Embedding, Dropout, Flatten, the activations as
// modules (Relu, Gelu, Sigmoid, Tanh, LeakyRelu, Silu) and burn's ActivationConfig. Forward bodies are in libtensor.so
// (lib/src/modules/core.cpp), instantiated for ranks 1-5 (Embedding: indices of rank 2).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include "tensor/module.hpp"

namespace tensor::nn {

/// burn's LinearConfig: y = x W + b over the last dim; W [d_input, d_output] (burn's row
/// layout), b [d_output]; both drawn from `initializer` with fan_in d_input, fan_out d_output.
struct LinearConfig {
  std::size_t d_input = 0;
  std::size_t d_output = 0;
  bool bias = true;
  Initializer initializer = Initializer::module_default();
};

class TENSOR_API Linear : public Module {
 public:
  explicit Linear(const LinearConfig& config, const Device& device = Device::default_device());
  /// x [..., d_input] -> [..., d_output]. ShapeError naming Linear.weight when the last dim
  /// differs, DeviceError naming it when x is on another device than the module.
  template <std::size_t D> Tensor<D> forward(const Tensor<D>& x) const;

  Tensor<2> weight;
  std::optional<Tensor<1>> bias;

  void visit(ModuleVisitor& v) override;
  const char* type_name() const override { return "Linear"; }
  AnyTensor forward_any(const AnyTensor& x) override;
};

/// burn's EmbeddingConfig: a table [n_embedding, d_model] drawn from N(0, 1) by default.
struct EmbeddingConfig {
  std::size_t n_embedding = 0;
  std::size_t d_model = 0;
  Initializer initializer = Initializer::normal(0.0, 1.0);
};

class TENSOR_API Embedding : public Module {
 public:
  explicit Embedding(const EmbeddingConfig& config, const Device& device = Device::default_device());
  /// Int indices [B, L] -> [B, L, d_model]; IndexError for an index outside the table.
  Tensor<3> forward(const Tensor<2, Int>& indices) const;

  Tensor<2> weight;

  void visit(ModuleVisitor& v) override;
  const char* type_name() const override { return "Embedding"; }
};

/// burn's DropoutConfig: in training, each element is zeroed with probability prob and the
/// rest scaled by 1 / (1 - prob); in eval (or prob 0) the identity. The mask is drawn from
/// the input device's random stream (Device::seed makes it repeatable). prob in [0, 1).
struct DropoutConfig {
  double prob = 0.5;
};

class TENSOR_API Dropout : public Module {
 public:
  explicit Dropout(const DropoutConfig& config = {});
  template <std::size_t D> Tensor<D> forward(const Tensor<D>& x) const;

  double prob;

  void visit(ModuleVisitor&) override {}
  const char* type_name() const override { return "Dropout"; }
  AnyTensor forward_any(const AnyTensor& x) override;
};

/// Flattens every dim after the first: [N, ...] -> [N, rest] (for Sequential).
class TENSOR_API Flatten : public Module {
 public:
  template <std::size_t D> Tensor<2> forward(const Tensor<D>& x) const;
  void visit(ModuleVisitor&) override {}
  const char* type_name() const override { return "Flatten"; }
  AnyTensor forward_any(const AnyTensor& x) override;
};

// The activations as parameterless modules (tensor::activation's functions).
#define TENSOR_ACTIVATION_MODULE(Name)                                            \
  class TENSOR_API Name : public Module {                                         \
   public:                                                                        \
    template <std::size_t D> Tensor<D> forward(const Tensor<D>& x) const;         \
    void visit(ModuleVisitor&) override {}                                        \
    const char* type_name() const override { return #Name; }                      \
    AnyTensor forward_any(const AnyTensor& x) override;                           \
  };
TENSOR_ACTIVATION_MODULE(Relu)
TENSOR_ACTIVATION_MODULE(Gelu)
TENSOR_ACTIVATION_MODULE(Sigmoid)
TENSOR_ACTIVATION_MODULE(Tanh)
TENSOR_ACTIVATION_MODULE(Silu)
#undef TENSOR_ACTIVATION_MODULE

/// burn's LeakyReluConfig: x >= 0 ? x : negative_slope x.
struct LeakyReluConfig {
  double negative_slope = 0.01;
};
class TENSOR_API LeakyRelu : public Module {
 public:
  explicit LeakyRelu(const LeakyReluConfig& config = {}) : negative_slope(config.negative_slope) {}
  template <std::size_t D> Tensor<D> forward(const Tensor<D>& x) const;
  double negative_slope;
  void visit(ModuleVisitor&) override {}
  const char* type_name() const override { return "LeakyRelu"; }
  AnyTensor forward_any(const AnyTensor& x) override;
};

/// burn's ActivationConfig (its variants without a parameter tensor): the activation a
/// module applies where burn lets the config choose (the recurrent modules' gates). a / b
/// are the variant's parameters, absent for burn's defaults: LeakyRelu a = negative_slope
/// (0.01); HardSigmoid a = alpha (0.2), b = beta (0.5); Softplus a = beta (1); Elu, Celu
/// a = alpha (1).
struct TENSOR_API ActivationConfig {
  enum class Kind : std::uint8_t {
    Identity, Relu, Gelu, GeluApproximate, LeakyRelu, Selu, Sigmoid, Tanh, HardSigmoid, HardSwish, Softplus, Softsign, Elu, Celu
  };
  Kind kind = Kind::Relu;
  std::optional<double> a{}, b{};
  /// The activation of x (ranks 1-5).
  template <std::size_t D> Tensor<D> apply(const Tensor<D>& x) const;
};

}  // namespace tensor::nn
