// burn-nn's basic modules (tensor/modules/core.hpp): Linear, Embedding, Dropout, Flatten
// and the activation modules, over tensor/nn.hpp and tensor/activation.hpp.
#include "tensor/modules/core.hpp"

#include <array>
#include <cstdint>
#include <string>

#include "module_util.hpp"
#include "tensor/activation.hpp"
#include "tensor/nn.hpp"

namespace tensor::nn {

using modules::check_input;
using modules::shape_error;
using modules::with_rank;

namespace {

void check_positive(const char* module, const char* what, std::size_t v) {
  if (v == 0) shape_error(module, std::string(what) + " must be positive", ">= 1", "0");
}

// forward_any for a module whose forward<D> exists for ranks lo..5.
template <std::size_t Lo, class M>
AnyTensor any_forward(M& m, const AnyTensor& x, const char* name) {
  if (x.rank() < Lo) shape_error(name, "input rank too low", "rank >= " + std::to_string(Lo), "rank " + std::to_string(x.rank()));
  return with_rank(x.rank(), [&](auto r) -> AnyTensor {
    constexpr std::size_t D = decltype(r)::value;
    if constexpr (D < Lo) {
      shape_error(name, "input rank too low", "rank >= " + std::to_string(Lo), "rank " + std::to_string(D));
    } else {
      return AnyTensor(m.forward(x.get<D>(name)));
    }
  });
}

}  // namespace

// ---- Linear ---------------------------------------------------------------------------------

Linear::Linear(const LinearConfig& c, const Device& device)
    : weight((check_positive("Linear", "d_input", c.d_input), check_positive("Linear", "d_output", c.d_output),
              c.initializer.init<2>(Shape{c.d_input, c.d_output}, device, c.d_input, c.d_output))) {
  if (c.bias) bias = c.initializer.init<1>(Shape{c.d_output}, device, c.d_input, c.d_output);
}

template <std::size_t D>
Tensor<D> Linear::forward(const Tensor<D>& x) const {
  check_input("Linear", "weight", x, weight);
  const Shape xs = x.shape(), ws = weight.shape();
  if (xs[D - 1] != ws[0])
    shape_error("Linear", "the input's last dim differs from Linear.weight's rows (weight " + ws.to_string() + ")",
                std::to_string(ws[0]), "shape " + xs.to_string());
  return linear(x, weight, bias);
}

void Linear::visit(ModuleVisitor& v) {
  v.param("weight", weight);
  v.param("bias", bias);
}

AnyTensor Linear::forward_any(const AnyTensor& x) { return any_forward<1>(*this, x, "Linear"); }

// ---- Embedding ------------------------------------------------------------------------------

Embedding::Embedding(const EmbeddingConfig& c, const Device& device)
    : weight((check_positive("Embedding", "n_embedding", c.n_embedding), check_positive("Embedding", "d_model", c.d_model),
              c.initializer.init<2>(Shape{c.n_embedding, c.d_model}, device, c.n_embedding, c.d_model))) {}

Tensor<3> Embedding::forward(const Tensor<2, Int>& indices) const {
  const Device id = indices.device(), wd = weight.device();
  if ((id.is_autodiff() ? id.inner() : id) != (wd.is_autodiff() ? wd.inner() : wd))
    throw DeviceError(DeviceError::Kind::Mismatch, "[Embedding] indices on another device than Embedding.weight; expected " +
                                                       wd.to_string() + "; got " + id.to_string());
  Tensor<2, Int> idx = indices;
  if (id != wd) idx = idx.to_device(wd);
  return embedding(weight, idx);
}

void Embedding::visit(ModuleVisitor& v) { v.param("weight", weight); }

// ---- Dropout --------------------------------------------------------------------------------

Dropout::Dropout(const DropoutConfig& c) : prob(c.prob) {
  if (!(c.prob >= 0.0 && c.prob < 1.0))
    shape_error("Dropout", "prob out of range", "0 <= prob < 1", std::to_string(c.prob));
}

template <std::size_t D>
Tensor<D> Dropout::forward(const Tensor<D>& x) const {
  if (!is_training() || prob == 0.0) return x;
  const Device dev = x.device();
  const Device plain = dev.is_autodiff() ? dev.inner() : dev;
  tensor::detail::Handle m = tensor::detail::random(x.shape(), Distribution::bernoulli(1.0 - prob), plain, tensor::detail::Kind::Float, x.dtype());
  Tensor<D> mask(modules::on_device(std::move(m), dev, false));
  return x * mask * (1.0 / (1.0 - prob));
}

AnyTensor Dropout::forward_any(const AnyTensor& x) { return any_forward<1>(*this, x, "Dropout"); }

// ---- Flatten --------------------------------------------------------------------------------

template <std::size_t D>
Tensor<2> Flatten::forward(const Tensor<D>& x) const {
  if constexpr (D == 1) {
    shape_error("Flatten", "input rank too low", "rank >= 2", "rank 1");
  } else {
    const std::array<std::int64_t, 2> dims{static_cast<std::int64_t>(x.shape()[0]), -1};
    return x.template reshape<2>(dims);
  }
}

AnyTensor Flatten::forward_any(const AnyTensor& x) {
  return with_rank(x.rank(), [&](auto r) -> AnyTensor {
    constexpr std::size_t D = decltype(r)::value;
    return AnyTensor(forward(x.get<D>("Flatten")));
  });
}

// ---- activations ----------------------------------------------------------------------------

template <std::size_t D> Tensor<D> Relu::forward(const Tensor<D>& x) const { return activation::relu(x); }
template <std::size_t D> Tensor<D> Gelu::forward(const Tensor<D>& x) const { return activation::gelu(x); }
template <std::size_t D> Tensor<D> Sigmoid::forward(const Tensor<D>& x) const { return activation::sigmoid(x); }
template <std::size_t D> Tensor<D> Tanh::forward(const Tensor<D>& x) const { return activation::tanh(x); }
template <std::size_t D> Tensor<D> Silu::forward(const Tensor<D>& x) const { return activation::silu(x); }
template <std::size_t D> Tensor<D> LeakyRelu::forward(const Tensor<D>& x) const {
  return activation::leaky_relu(x, negative_slope);
}
AnyTensor Relu::forward_any(const AnyTensor& x) { return any_forward<1>(*this, x, "Relu"); }
AnyTensor Gelu::forward_any(const AnyTensor& x) { return any_forward<1>(*this, x, "Gelu"); }
AnyTensor Sigmoid::forward_any(const AnyTensor& x) { return any_forward<1>(*this, x, "Sigmoid"); }
AnyTensor Tanh::forward_any(const AnyTensor& x) { return any_forward<1>(*this, x, "Tanh"); }
AnyTensor Silu::forward_any(const AnyTensor& x) { return any_forward<1>(*this, x, "Silu"); }
AnyTensor LeakyRelu::forward_any(const AnyTensor& x) { return any_forward<1>(*this, x, "LeakyRelu"); }

// ---- ActivationConfig -----------------------------------------------------------------------

template <std::size_t D>
Tensor<D> ActivationConfig::apply(const Tensor<D>& x) const {
  switch (kind) {
    case Kind::Identity: return x;
    case Kind::Relu: return activation::relu(x);
    case Kind::Gelu: return activation::gelu(x);
    case Kind::GeluApproximate: return activation::gelu_approximate(x);
    case Kind::LeakyRelu: return activation::leaky_relu(x, a.value_or(0.01));
    case Kind::Selu: return activation::selu(x);
    case Kind::Sigmoid: return activation::sigmoid(x);
    case Kind::Tanh: return activation::tanh(x);
    case Kind::HardSigmoid: return activation::hard_sigmoid(x, a.value_or(0.2), b.value_or(0.5));
    case Kind::HardSwish: return activation::hard_swish(x);
    case Kind::Softplus: return activation::softplus(x, a.value_or(1.0));
    case Kind::Softsign: return activation::softsign(x);
    case Kind::Elu: return activation::elu(x, a.value_or(1.0));
    case Kind::Celu: return activation::celu(x, a.value_or(1.0));
  }
  throw Error("[ActivationConfig] unknown activation kind; expected a Kind value; got " + std::to_string(static_cast<int>(kind)));
}

// ---- PRelu, SwiGlu ---------------------------------------------------------------------------

PRelu::PRelu(const PReluConfig& c, const Device& device)
    : alpha((check_positive("PRelu", "num_parameters", c.num_parameters),
             Initializer::constant(c.alpha).init<1>(Shape{c.num_parameters}, device, 1, 1))),
      alpha_value(c.alpha) {}

template <std::size_t D>
Tensor<D> PRelu::forward(const Tensor<D>& x) const {
  if constexpr (D < 2) {
    shape_error("PRelu", "input rank too low", "rank >= 2 ([N, C, ...])", "rank 1");
  } else {
    check_input("PRelu", "alpha", x, alpha);
    const std::size_t n = alpha.shape()[0], channels = x.shape()[1];
    if (n != 1 && n != channels)
      shape_error("PRelu", "PRelu.alpha has neither one slope nor one per channel (dim 1 of the input, shape " +
                               x.shape().to_string() + ")",
                  "1 or " + std::to_string(channels), std::to_string(n));
    return activation::prelu(x, alpha);
  }
}
AnyTensor PRelu::forward_any(const AnyTensor& x) { return any_forward<2>(*this, x, "PRelu"); }

SwiGlu::SwiGlu(const SwiGluConfig& c, const Device& device)
    : linear_inner(LinearConfig{.d_input = c.d_input, .d_output = c.d_output, .bias = c.bias, .initializer = c.initializer}, device),
      linear_outer(LinearConfig{.d_input = c.d_input, .d_output = c.d_output, .bias = c.bias, .initializer = c.initializer}, device) {}

template <std::size_t D>
Tensor<D> SwiGlu::forward(const Tensor<D>& x) const {
  return activation::silu(linear_inner.forward(x)) * linear_outer.forward(x);
}
void SwiGlu::visit(ModuleVisitor& v) {
  v.module("linear_inner", linear_inner);
  v.module("linear_outer", linear_outer);
}
AnyTensor SwiGlu::forward_any(const AnyTensor& x) { return any_forward<1>(*this, x, "SwiGlu"); }

#define TENSOR_MODULE_RANKS(X) X(1) X(2) X(3) X(4) X(5)
#define INST(D)                                                                        \
  template TENSOR_API Tensor<D> Linear::forward<D>(const Tensor<D>&) const;           \
  template TENSOR_API Tensor<D> Dropout::forward<D>(const Tensor<D>&) const;          \
  template TENSOR_API Tensor<2> Flatten::forward<D>(const Tensor<D>&) const;          \
  template TENSOR_API Tensor<D> Relu::forward<D>(const Tensor<D>&) const;             \
  template TENSOR_API Tensor<D> Gelu::forward<D>(const Tensor<D>&) const;             \
  template TENSOR_API Tensor<D> Sigmoid::forward<D>(const Tensor<D>&) const;          \
  template TENSOR_API Tensor<D> Tanh::forward<D>(const Tensor<D>&) const;             \
  template TENSOR_API Tensor<D> Silu::forward<D>(const Tensor<D>&) const;             \
  template TENSOR_API Tensor<D> LeakyRelu::forward<D>(const Tensor<D>&) const;         \
  template TENSOR_API Tensor<D> PRelu::forward<D>(const Tensor<D>&) const;             \
  template TENSOR_API Tensor<D> SwiGlu::forward<D>(const Tensor<D>&) const;            \
  template TENSOR_API Tensor<D> ActivationConfig::apply<D>(const Tensor<D>&) const;
TENSOR_MODULE_RANKS(INST)
#undef INST

}  // namespace tensor::nn
