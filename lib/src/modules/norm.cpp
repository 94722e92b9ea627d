// burn-nn's normalisation modules (tensor/modules/norm.hpp), composed from public ops
// (BatchNorm's eval form and LayerNorm call tensor/nn.hpp's batch_norm / layer_norm).
#include "tensor/modules/norm.hpp"

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "module_util.hpp"
#include "tensor/nn.hpp"

namespace tensor::nn {

using modules::check_input;
using modules::shape_error;
using modules::with_rank;

namespace {

void check_positive(const char* module, const char* what, std::size_t v) {
  if (v == 0) shape_error(module, std::string(what) + " must be positive", ">= 1", "0");
}

// [1, C, 1, ...] of rank D: a per-channel vector broadcast over dim 1.
template <std::size_t D>
Tensor<D> per_channel(const Tensor<1>& v) {
  std::array<std::int64_t, D> dims{};
  dims.fill(1);
  dims[1] = -1;
  return v.reshape<D>(dims);
}

template <std::size_t D>
void check_features(const char* module, const char* param, const Tensor<D>& x, std::size_t dim, std::size_t want) {
  const Shape xs = x.shape();
  if (xs[dim] != want)
    shape_error(module, std::string("the input's dim ") + std::to_string(dim) + " differs from " + module + "." + param + "'s size",
                std::to_string(want), "shape " + xs.to_string());
}

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

// ---- BatchNorm ------------------------------------------------------------------------------

BatchNorm::BatchNorm(const BatchNormConfig& c, const Device& device)
    : gamma((check_positive("BatchNorm", "num_features", c.num_features), Initializer::ones().init<1>(Shape{c.num_features}, device))),
      beta(Initializer::zeros().init<1>(Shape{c.num_features}, device)),
      running_mean(Tensor<1>::zeros(Shape{c.num_features}, device)),
      running_var(Tensor<1>::ones(Shape{c.num_features}, device)),
      epsilon(c.epsilon),
      momentum(c.momentum) {}

template <std::size_t D>
Tensor<D> BatchNorm::forward(const Tensor<D>& x) {
  check_input("BatchNorm", "gamma", x, gamma);
  check_features("BatchNorm", "gamma", x, 1, gamma.shape()[0]);
  if (!is_training()) return batch_norm(x, gamma, beta, running_mean, running_var, epsilon);
  std::vector<std::int64_t> dims{0};
  for (std::size_t d = 2; d < D; ++d) dims.push_back(static_cast<std::int64_t>(d));
  const Tensor<D> mean = x.mean_dims(dims);
  const Tensor<D> centered = x - mean;
  const Tensor<D> var = centered.square().mean_dims(dims);
  const std::array<std::int64_t, 1> flat{-1};
  running_mean = running_mean * (1.0 - momentum) + mean.detach().template reshape<1>(flat) * momentum;
  running_var = running_var * (1.0 - momentum) + var.detach().template reshape<1>(flat) * momentum;
  return centered / (var + epsilon).sqrt() * per_channel<D>(gamma) + per_channel<D>(beta);
}

void BatchNorm::visit(ModuleVisitor& v) {
  v.param("gamma", gamma);
  v.param("beta", beta);
  v.buffer("running_mean", running_mean);
  v.buffer("running_var", running_var);
}
AnyTensor BatchNorm::forward_any(const AnyTensor& x) { return any_forward<2>(*this, x, "BatchNorm"); }

// ---- LayerNorm ------------------------------------------------------------------------------

LayerNorm::LayerNorm(const LayerNormConfig& c, const Device& device)
    : gamma((check_positive("LayerNorm", "d_model", c.d_model), Initializer::ones().init<1>(Shape{c.d_model}, device))),
      epsilon(c.epsilon) {
  if (c.bias) beta = Initializer::zeros().init<1>(Shape{c.d_model}, device);
}

template <std::size_t D>
Tensor<D> LayerNorm::forward(const Tensor<D>& x) const {
  check_input("LayerNorm", "gamma", x, gamma);
  check_features("LayerNorm", "gamma", x, D - 1, gamma.shape()[0]);
  return layer_norm(x, gamma, beta, epsilon);
}

void LayerNorm::visit(ModuleVisitor& v) {
  v.param("gamma", gamma);
  v.param("beta", beta);
}
AnyTensor LayerNorm::forward_any(const AnyTensor& x) { return any_forward<1>(*this, x, "LayerNorm"); }

// ---- GroupNorm ------------------------------------------------------------------------------

GroupNorm::GroupNorm(const GroupNormConfig& c, const Device& device)
    : num_groups(c.num_groups), num_channels(c.num_channels), epsilon(c.epsilon) {
  check_positive("GroupNorm", "num_groups", c.num_groups);
  check_positive("GroupNorm", "num_channels", c.num_channels);
  if (c.num_channels % c.num_groups != 0)
    shape_error("GroupNorm", "num_channels must be divisible by num_groups", "a multiple of " + std::to_string(c.num_groups),
                std::to_string(c.num_channels));
  if (c.affine) {
    gamma = Initializer::ones().init<1>(Shape{c.num_channels}, device);
    beta = Initializer::zeros().init<1>(Shape{c.num_channels}, device);
  }
}

template <std::size_t D>
Tensor<D> GroupNorm::forward(const Tensor<D>& x) const {
  if (gamma) check_input("GroupNorm", "gamma", x, *gamma);
  check_features("GroupNorm", "gamma", x, 1, num_channels);
  const Shape xs = x.shape();
  std::array<std::int64_t, D> back{};
  for (std::size_t d = 0; d < D; ++d) back[d] = static_cast<std::int64_t>(xs[d]);
  const std::array<std::int64_t, 3> grouped{static_cast<std::int64_t>(xs[0]), static_cast<std::int64_t>(num_groups), -1};
  const Tensor<3> g = x.template reshape<3>(grouped);
  const Tensor<3> mean = g.mean_dim(2);
  const Tensor<3> centered = g - mean;
  const Tensor<3> var = centered.square().mean_dim(2);
  Tensor<D> y = (centered / (var + epsilon).sqrt()).template reshape<D>(back);
  if (gamma) y = y * per_channel<D>(*gamma) + per_channel<D>(*beta);
  return y;
}

void GroupNorm::visit(ModuleVisitor& v) {
  v.param("gamma", gamma);
  v.param("beta", beta);
}
AnyTensor GroupNorm::forward_any(const AnyTensor& x) { return any_forward<2>(*this, x, "GroupNorm"); }

// ---- InstanceNorm ---------------------------------------------------------------------------

InstanceNorm::InstanceNorm(const InstanceNormConfig& c, const Device& device)
    // Checked here first, so the error names InstanceNorm, not the GroupNorm it builds.
    : norm((check_positive("InstanceNorm", "num_channels", c.num_channels),
            GroupNormConfig{.num_groups = c.num_channels, .num_channels = c.num_channels, .epsilon = c.epsilon, .affine = c.affine}),
           device) {}

template <std::size_t D>
Tensor<D> InstanceNorm::forward(const Tensor<D>& x) const {
  if (norm.gamma) check_input("InstanceNorm", "gamma", x, *norm.gamma);
  check_features("InstanceNorm", "gamma", x, 1, norm.num_channels);
  return norm.forward(x);
}
AnyTensor InstanceNorm::forward_any(const AnyTensor& x) { return any_forward<2>(*this, x, "InstanceNorm"); }

void InstanceNorm::visit(ModuleVisitor& v) {
  v.param("gamma", norm.gamma);
  v.param("beta", norm.beta);
}

// ---- RmsNorm --------------------------------------------------------------------------------

RmsNorm::RmsNorm(const RmsNormConfig& c, const Device& device)
    : gamma((check_positive("RmsNorm", "d_model", c.d_model), Initializer::ones().init<1>(Shape{c.d_model}, device))),
      epsilon(c.epsilon) {}

template <std::size_t D>
Tensor<D> RmsNorm::forward(const Tensor<D>& x) const {
  check_input("RmsNorm", "gamma", x, gamma);
  check_features("RmsNorm", "gamma", x, D - 1, gamma.shape()[0]);
  std::array<std::int64_t, D> last{};
  last.fill(1);
  last[D - 1] = -1;
  const Tensor<D> rms = (x.square().mean_dim(static_cast<std::int64_t>(D) - 1) + epsilon).sqrt();
  return x / rms * gamma.reshape<D>(last);
}

void RmsNorm::visit(ModuleVisitor& v) { v.param("gamma", gamma); }
AnyTensor RmsNorm::forward_any(const AnyTensor& x) { return any_forward<1>(*this, x, "RmsNorm"); }

#define INST2(D)                                                                   \
  template TENSOR_API Tensor<D> BatchNorm::forward<D>(const Tensor<D>&);          \
  template TENSOR_API Tensor<D> GroupNorm::forward<D>(const Tensor<D>&) const;    \
  template TENSOR_API Tensor<D> InstanceNorm::forward<D>(const Tensor<D>&) const;
#define INST1(D)                                                                   \
  template TENSOR_API Tensor<D> LayerNorm::forward<D>(const Tensor<D>&) const;    \
  template TENSOR_API Tensor<D> RmsNorm::forward<D>(const Tensor<D>&) const;
INST2(2) INST2(3) INST2(4) INST2(5)
INST1(1) INST1(2) INST1(3) INST1(4) INST1(5)
#undef INST1
#undef INST2

}  // namespace tensor::nn
