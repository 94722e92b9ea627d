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
  std::size_t d_input = 0;   ///< input features (the last dim of x); must be positive
  std::size_t d_output = 0;  ///< output features; must be positive
  bool bias = true;          ///< whether there is a bias b
  Initializer initializer = Initializer::module_default();  ///< draws W and b
};

/// burn's Linear: an affine map over the last dim (see LinearConfig).
class TENSOR_API Linear : public Module {
 public:
  /// W and b drawn on `device`. ShapeError naming Linear when d_input or d_output is 0.
  explicit Linear(const LinearConfig& config, const Device& device = Device::default_device());
  /// x [..., d_input] -> [..., d_output]. ShapeError naming Linear.weight when the last dim
  /// differs, DeviceError naming it when x is on another device than the module (DTypeError
  /// for another dtype). Ranks 1-5.
  template <std::size_t D> Tensor<D> forward(const Tensor<D>& x) const;

  Tensor<2> weight;               ///< W [d_input, d_output] (parameter "weight")
  std::optional<Tensor<1>> bias;  ///< b [d_output] (parameter "bias"); empty without bias

  void visit(ModuleVisitor& v) override;
  const char* type_name() const override { return "Linear"; }
  AnyTensor forward_any(const AnyTensor& x) override;
};

/// burn's EmbeddingConfig: a table [n_embedding, d_model] drawn from N(0, 1) by default.
struct EmbeddingConfig {
  std::size_t n_embedding = 0;  ///< rows of the table (valid indices 0 .. n_embedding - 1); positive
  std::size_t d_model = 0;      ///< the width of each row; positive
  Initializer initializer = Initializer::normal(0.0, 1.0);  ///< draws the table
};

/// burn's Embedding: a lookup of rows of a learned table (see EmbeddingConfig).
class TENSOR_API Embedding : public Module {
 public:
  /// The table drawn on `device`. ShapeError naming Embedding when a size is 0.
  explicit Embedding(const EmbeddingConfig& config, const Device& device = Device::default_device());
  /// Int indices [B, L] -> [B, L, d_model]; IndexError for an index outside the table,
  /// DeviceError when the indices are on another device than the table.
  Tensor<3> forward(const Tensor<2, Int>& indices) const;

  Tensor<2> weight;  ///< the table [n_embedding, d_model] (parameter "weight")

  void visit(ModuleVisitor& v) override;
  const char* type_name() const override { return "Embedding"; }
};

/// burn's DropoutConfig: in training, each element is zeroed with probability prob and the
/// rest scaled by 1 / (1 - prob); in eval (or prob 0) the identity. The mask is drawn from
/// the input device's random stream (Device::seed makes it repeatable). prob in [0, 1).
struct DropoutConfig {
  double prob = 0.5;  ///< the probability of zeroing an element, in [0, 1)
};

/// burn's Dropout (see DropoutConfig); no parameters.
class TENSOR_API Dropout : public Module {
 public:
  /// ShapeError naming Dropout when prob is outside [0, 1).
  explicit Dropout(const DropoutConfig& config = {});
  /// x with each element zeroed with probability prob and the rest scaled by 1 / (1 - prob)
  /// in training; x itself in eval or with prob 0. Same shape, dtype and device; ranks 1-5.
  template <std::size_t D> Tensor<D> forward(const Tensor<D>& x) const;

  double prob;  ///< the config's prob

  void visit(ModuleVisitor&) override {}
  const char* type_name() const override { return "Dropout"; }
  AnyTensor forward_any(const AnyTensor& x) override;
};

/// Flattens every dim after the first: [N, ...] -> [N, rest] (for Sequential).
class TENSOR_API Flatten : public Module {
 public:
  /// x [N, ...] (rank 2-5) as a [N, rest] view; ShapeError naming Flatten for rank 1.
  template <std::size_t D> Tensor<2> forward(const Tensor<D>& x) const;
  void visit(ModuleVisitor&) override {}
  const char* type_name() const override { return "Flatten"; }
  AnyTensor forward_any(const AnyTensor& x) override;
};

// The activations as parameterless modules (tensor::activation's functions).
#define TENSOR_ACTIVATION_MODULE(Name)                                            \
  class TENSOR_API Name : public Module {                                         \
   public:                                                                        \
    /** x's activation, elementwise (ranks 1-5; shape, dtype, device kept). */    \
    template <std::size_t D> Tensor<D> forward(const Tensor<D>& x) const;         \
    void visit(ModuleVisitor&) override {}                                        \
    const char* type_name() const override { return #Name; }                      \
    AnyTensor forward_any(const AnyTensor& x) override;                           \
  };
/// relu(x) as a module (tensor::activation::relu).
TENSOR_ACTIVATION_MODULE(Relu)
/// gelu(x) as a module (tensor::activation::gelu).
TENSOR_ACTIVATION_MODULE(Gelu)
/// sigmoid(x) as a module (tensor::activation::sigmoid).
TENSOR_ACTIVATION_MODULE(Sigmoid)
/// tanh(x) as a module (tensor::activation::tanh).
TENSOR_ACTIVATION_MODULE(Tanh)
/// silu(x) as a module (tensor::activation::silu).
TENSOR_ACTIVATION_MODULE(Silu)
#undef TENSOR_ACTIVATION_MODULE

/// burn's LeakyReluConfig: x >= 0 ? x : negative_slope x.
struct LeakyReluConfig {
  double negative_slope = 0.01;  ///< the slope for x < 0
};
/// burn's LeakyRelu as a parameterless module (tensor::activation::leaky_relu).
class TENSOR_API LeakyRelu : public Module {
 public:
  /// Keeps the config's negative_slope.
  explicit LeakyRelu(const LeakyReluConfig& config = {}) : negative_slope(config.negative_slope) {}
  /// x >= 0 ? x : negative_slope x, elementwise (ranks 1-5; shape, dtype and device kept).
  template <std::size_t D> Tensor<D> forward(const Tensor<D>& x) const;
  double negative_slope;  ///< the slope for x < 0
  void visit(ModuleVisitor&) override {}
  const char* type_name() const override { return "LeakyRelu"; }
  AnyTensor forward_any(const AnyTensor& x) override;
};

/// burn's PReluConfig: num_parameters slopes (1: one for every channel, or C: one per
/// channel, dim 1 of the input), each starting at alpha.
struct PReluConfig {
  std::size_t num_parameters = 1;  ///< 1 or the channel count; positive
  double alpha = 0.25;             ///< the slopes' initial value
};
/// burn's PRelu: x >= 0 ? x : alpha[c] x, with the slopes a parameter (tensor::activation::prelu).
class TENSOR_API PRelu : public Module {
 public:
  /// alpha [num_parameters] filled with the config's alpha on `device`. ShapeError naming
  /// PRelu when num_parameters is 0.
  explicit PRelu(const PReluConfig& config = {}, const Device& device = Device::default_device());
  /// x [N, C, ...] (ranks 2-5) with slope alpha[c] (alpha[0] for every channel when there is
  /// one). ShapeError naming PRelu.alpha when it has neither 1 nor C values; DeviceError /
  /// DTypeError naming it for an input on another device or of another dtype.
  template <std::size_t D> Tensor<D> forward(const Tensor<D>& x) const;

  Tensor<1> alpha;     ///< the slopes (parameter "alpha")
  double alpha_value;  ///< the config's initial value (burn keeps it for display)

  void visit(ModuleVisitor& v) override { v.param("alpha", alpha); }
  const char* type_name() const override { return "PRelu"; }
  AnyTensor forward_any(const AnyTensor& x) override;
};

/// burn's SwiGluConfig: two bias-free (by default) Linear maps d_input -> d_output drawn from
/// burn's KaimingUniform(gain 1/sqrt(3)).
struct SwiGluConfig {
  std::size_t d_input = 0;   ///< input features; positive
  std::size_t d_output = 0;  ///< output features; positive
  bool bias = false;         ///< whether the two Linears have a bias
  Initializer initializer = Initializer::kaiming_uniform(0.5773502691896258);  ///< draws both Linears
};
/// burn's SwiGlu: silu(linear_inner(x)) * linear_outer(x) (the gated unit of LLaMA-style
/// feed-forward blocks).
class TENSOR_API SwiGlu : public Module {
 public:
  /// Both Linears on `device`; ShapeError as Linear's constructor.
  explicit SwiGlu(const SwiGluConfig& config, const Device& device = Device::default_device());
  /// x [..., d_input] -> [..., d_output] (ranks 1-5); errors as Linear::forward's.
  template <std::size_t D> Tensor<D> forward(const Tensor<D>& x) const;

  ///@{
  /// The gate (through silu) and the value projection.
  Linear linear_inner, linear_outer;
  ///@}

  void visit(ModuleVisitor& v) override;
  const char* type_name() const override { return "SwiGlu"; }
  AnyTensor forward_any(const AnyTensor& x) override;
};

/// burn's ActivationConfig (its variants without a parameter tensor): the activation a
/// module applies where burn lets the config choose (the recurrent modules' gates). a / b
/// are the variant's parameters, absent for burn's defaults: LeakyRelu a = negative_slope
/// (0.01); HardSigmoid a = alpha (0.2), b = beta (0.5); Softplus a = beta (1); Elu, Celu
/// a = alpha (1).
struct TENSOR_API ActivationConfig {
  /// The activation (tensor::activation's function of the same name; GeluApproximate: the
  /// tanh approximation).
  enum class Kind : std::uint8_t {
    Identity, Relu, Gelu, GeluApproximate, LeakyRelu, Selu, Sigmoid, Tanh, HardSigmoid, HardSwish, Softplus, Softsign, Elu, Celu
  };
  Kind kind = Kind::Relu;  ///< the activation
  ///@{
  /// The variant's parameters (see above); empty: burn's default.
  std::optional<double> a{}, b{};
  ///@}
  /// The activation of x, elementwise (ranks 1-5; shape, dtype and device kept). Error for a
  /// kind outside the enum.
  template <std::size_t D> Tensor<D> apply(const Tensor<D>& x) const;
};

}  // namespace tensor::nn
