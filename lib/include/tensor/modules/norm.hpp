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
  std::size_t num_features = 0;
  double epsilon = 1e-5;
  double momentum = 0.1;
};

class TENSOR_API BatchNorm : public Module {
 public:
  explicit BatchNorm(const BatchNormConfig& config, const Device& device = Device::default_device());
  /// ShapeError naming BatchNorm.gamma when dim 1 is not num_features.
  template <std::size_t D> Tensor<D> forward(const Tensor<D>& x);

  Tensor<1> gamma, beta;
  Tensor<1> running_mean, running_var;  ///< buffers: zeros and ones at first
  double epsilon, momentum;

  void visit(ModuleVisitor& v) override;
  const char* type_name() const override { return "BatchNorm"; }
  AnyTensor forward_any(const AnyTensor& x) override;
};

/// burn's LayerNormConfig: over the last dim d_model, biased variance; gamma = 1, beta = 0
/// (no beta when bias is false).
struct LayerNormConfig {
  std::size_t d_model = 0;
  double epsilon = 1e-5;
  bool bias = true;
};

class TENSOR_API LayerNorm : public Module {
 public:
  explicit LayerNorm(const LayerNormConfig& config, const Device& device = Device::default_device());
  template <std::size_t D> Tensor<D> forward(const Tensor<D>& x) const;

  Tensor<1> gamma;
  std::optional<Tensor<1>> beta;
  double epsilon;

  void visit(ModuleVisitor& v) override;
  const char* type_name() const override { return "LayerNorm"; }
  AnyTensor forward_any(const AnyTensor& x) override;
};

/// burn's GroupNormConfig: x [N, C, ...] in num_groups groups of C / num_groups channels,
/// each normalised over its channels and the remaining dims; per-channel gamma / beta when
/// affine. num_channels must be divisible by num_groups.
struct GroupNormConfig {
  std::size_t num_groups = 0;
  std::size_t num_channels = 0;
  double epsilon = 1e-5;
  bool affine = true;
};

class TENSOR_API GroupNorm : public Module {
 public:
  explicit GroupNorm(const GroupNormConfig& config, const Device& device = Device::default_device());
  template <std::size_t D> Tensor<D> forward(const Tensor<D>& x) const;

  std::optional<Tensor<1>> gamma, beta;
  std::size_t num_groups, num_channels;
  double epsilon;

  void visit(ModuleVisitor& v) override;
  const char* type_name() const override { return "GroupNorm"; }
  AnyTensor forward_any(const AnyTensor& x) override;
};

/// burn's RmsNormConfig: x / sqrt(mean(x^2, last dim) + epsilon) * gamma, gamma = 1.
struct RmsNormConfig {
  std::size_t d_model = 0;
  double epsilon = 1e-5;
};

class TENSOR_API RmsNorm : public Module {
 public:
  explicit RmsNorm(const RmsNormConfig& config, const Device& device = Device::default_device());
  template <std::size_t D> Tensor<D> forward(const Tensor<D>& x) const;

  Tensor<1> gamma;
  double epsilon;

  void visit(ModuleVisitor& v) override;
  const char* type_name() const override { return "RmsNorm"; }
  AnyTensor forward_any(const AnyTensor& x) override;
};

/// burn's InstanceNormConfig: GroupNorm with one channel per group (each channel of each
/// sample normalised over the remaining dims), per-channel gamma / beta when affine.
struct InstanceNormConfig {
  std::size_t num_channels = 0;
  double epsilon = 1e-5;
  bool affine = true;
};

class TENSOR_API InstanceNorm : public Module {
 public:
  explicit InstanceNorm(const InstanceNormConfig& config, const Device& device = Device::default_device());
  /// ShapeError naming InstanceNorm.gamma when dim 1 is not num_channels.
  template <std::size_t D> Tensor<D> forward(const Tensor<D>& x) const;

  GroupNorm norm;  ///< its gamma / beta are this module's (visit names them gamma, beta)

  void visit(ModuleVisitor& v) override;
  const char* type_name() const override { return "InstanceNorm"; }
  AnyTensor forward_any(const AnyTensor& x) override;
};

}  // namespace tensor::nn
