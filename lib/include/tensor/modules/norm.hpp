// burn-nn's normalisation modules: BatchNorm, LayerNorm, GroupNorm, InstanceNorm, RmsNorm (bodies in
// lib/src/modules/norm.cpp; rank-generic forwards instantiated for ranks 2-5, LayerNorm
// and RmsNorm also rank 1).
#pragma once

#include <cstddef>
#include <optional>

#include "tensor/module.hpp"

namespace tensor::nn {

/// burn's BatchNormConfig. In training, x [N, C, ...] is normalised with the batch's mean
/// and biased variance per channel, and the buffers move: running = (1 - momentum) running +
/// momentum batch (burn's rule; the variance is the biased one, as burn's). In eval the
/// running statistics are used (tensor::nn::batch_norm). gamma = 1, beta = 0.
struct BatchNormConfig {
  std::size_t num_features = 0;  ///< C, the size of dim 1; positive
  double epsilon = 1e-5;         ///< added to the variance
  double momentum = 0.1;         ///< the running statistics' update weight
};

/// burn's BatchNorm over dim 1 (see BatchNormConfig).
class TENSOR_API BatchNorm : public Module {
 public:
  /// gamma, beta and the buffers on `device`. ShapeError naming BatchNorm when num_features is 0.
  explicit BatchNorm(const BatchNormConfig& config, const Device& device = Device::default_device());
  /// x [N, C, ...] (rank 2-5) normalised per channel, same shape; in training it also moves
  /// the running statistics (hence not const). ShapeError naming BatchNorm.gamma when dim 1
  /// is not num_features; DeviceError / DTypeError when x's device / dtype differ from gamma's.
  template <std::size_t D> Tensor<D> forward(const Tensor<D>& x);

  ///@{
  /// The per-channel scale and shift [C] (parameters "gamma", "beta").
  Tensor<1> gamma, beta;
  ///@}
  ///@{
  /// The running mean and (biased) variance [C] (buffers: zeros and ones at first).
  Tensor<1> running_mean, running_var;
  ///@}
  ///@{
  /// The config's epsilon and momentum.
  double epsilon, momentum;
  ///@}

  void visit(ModuleVisitor& v) override;
  const char* type_name() const override { return "BatchNorm"; }
  AnyTensor forward_any(const AnyTensor& x) override;
};

/// burn's LayerNormConfig: over the last dim d_model, biased variance; gamma = 1, beta = 0
/// (no beta when bias is false).
struct LayerNormConfig {
  std::size_t d_model = 0;  ///< the size of the last dim; positive
  double epsilon = 1e-5;    ///< added to the variance
  bool bias = true;         ///< whether there is a beta
};

/// burn's LayerNorm over the last dim (see LayerNormConfig).
class TENSOR_API LayerNorm : public Module {
 public:
  /// gamma (and beta) on `device`. ShapeError naming LayerNorm when d_model is 0.
  explicit LayerNorm(const LayerNormConfig& config, const Device& device = Device::default_device());
  /// (x - mean) / sqrt(var + epsilon) * gamma + beta over the last dim, same shape (ranks 1-5).
  /// ShapeError naming LayerNorm.gamma when the last dim is not d_model; DeviceError /
  /// DTypeError when x's device / dtype differ from gamma's.
  template <std::size_t D> Tensor<D> forward(const Tensor<D>& x) const;

  Tensor<1> gamma;                ///< the scale [d_model] (parameter "gamma")
  std::optional<Tensor<1>> beta;  ///< the shift [d_model] (parameter "beta"); empty without bias
  double epsilon;                 ///< the config's epsilon

  void visit(ModuleVisitor& v) override;
  const char* type_name() const override { return "LayerNorm"; }
  AnyTensor forward_any(const AnyTensor& x) override;
};

/// burn's GroupNormConfig: x [N, C, ...] in num_groups groups of C / num_groups channels,
/// each normalised over its channels and the remaining dims; per-channel gamma / beta when
/// affine. num_channels must be divisible by num_groups.
struct GroupNormConfig {
  std::size_t num_groups = 0;    ///< groups; positive
  std::size_t num_channels = 0;  ///< C, the size of dim 1; a positive multiple of num_groups
  double epsilon = 1e-5;         ///< added to the variance
  bool affine = true;            ///< whether there are gamma and beta
};

/// burn's GroupNorm (see GroupNormConfig).
class TENSOR_API GroupNorm : public Module {
 public:
  /// ShapeError naming GroupNorm when a count is 0 or num_channels is not divisible by num_groups.
  explicit GroupNorm(const GroupNormConfig& config, const Device& device = Device::default_device());
  /// x [N, C, ...] (rank 2-5) normalised per sample and group (biased variance), same shape.
  /// ShapeError naming GroupNorm.gamma when dim 1 is not num_channels; when affine,
  /// DeviceError / DTypeError when x's device / dtype differ from gamma's.
  template <std::size_t D> Tensor<D> forward(const Tensor<D>& x) const;

  ///@{
  /// The per-channel scale and shift [C] (parameters "gamma", "beta"); empty unless affine.
  std::optional<Tensor<1>> gamma, beta;
  ///@}
  ///@{
  /// The config's num_groups and num_channels.
  std::size_t num_groups, num_channels;
  ///@}
  double epsilon;  ///< the config's epsilon

  void visit(ModuleVisitor& v) override;
  const char* type_name() const override { return "GroupNorm"; }
  AnyTensor forward_any(const AnyTensor& x) override;
};

/// burn's RmsNormConfig: x / sqrt(mean(x^2, last dim) + epsilon) * gamma, gamma = 1.
struct RmsNormConfig {
  std::size_t d_model = 0;  ///< the size of the last dim; positive
  double epsilon = 1e-5;    ///< added to the mean square
};

/// burn's RmsNorm over the last dim (see RmsNormConfig).
class TENSOR_API RmsNorm : public Module {
 public:
  /// gamma on `device`. ShapeError naming RmsNorm when d_model is 0.
  explicit RmsNorm(const RmsNormConfig& config, const Device& device = Device::default_device());
  /// x / sqrt(mean(x^2, last dim) + epsilon) * gamma, same shape (ranks 1-5). ShapeError naming
  /// RmsNorm.gamma when the last dim is not d_model; DeviceError / DTypeError as LayerNorm's.
  template <std::size_t D> Tensor<D> forward(const Tensor<D>& x) const;

  Tensor<1> gamma;  ///< the scale [d_model] (parameter "gamma")
  double epsilon;   ///< the config's epsilon

  void visit(ModuleVisitor& v) override;
  const char* type_name() const override { return "RmsNorm"; }
  AnyTensor forward_any(const AnyTensor& x) override;
};

/// burn's InstanceNormConfig: GroupNorm with one channel per group (each channel of each
/// sample normalised over the remaining dims), per-channel gamma / beta when affine.
struct InstanceNormConfig {
  std::size_t num_channels = 0;  ///< C, the size of dim 1; positive
  double epsilon = 1e-5;         ///< added to the variance
  bool affine = true;            ///< whether there are gamma and beta
};

/// burn's InstanceNorm (see InstanceNormConfig).
class TENSOR_API InstanceNorm : public Module {
 public:
  /// ShapeError (naming GroupNorm, which it builds) when num_channels is 0.
  explicit InstanceNorm(const InstanceNormConfig& config, const Device& device = Device::default_device());
  /// x [N, C, ...] (rank 2-5) normalised per sample and channel, same shape. ShapeError naming
  /// InstanceNorm.gamma when dim 1 is not num_channels; DeviceError / DTypeError when affine.
  template <std::size_t D> Tensor<D> forward(const Tensor<D>& x) const;

  GroupNorm norm;  ///< its gamma / beta are this module's (visit names them gamma, beta)

  void visit(ModuleVisitor& v) override;
  const char* type_name() const override { return "InstanceNorm"; }
  AnyTensor forward_any(const AnyTensor& x) override;
};

}  // namespace tensor::nn
