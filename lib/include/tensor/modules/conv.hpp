// burn-nn's convolution and pooling modules: Conv1d, Conv2d, ConvTranspose2d, MaxPool2d,
// AvgPool2d, AdaptiveAvgPool2d and their 1d forms, ConvTranspose1d, and the 3d forms
// tensor/nn.hpp has (Conv3d, ConvTranspose3d, AdaptiveAvgPool3d; no max / avg pool 3d),
// with burn's configs and defaults (bodies in lib/src/modules/conv.cpp, over tensor/nn.hpp's
// functions).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>

#include "tensor/module.hpp"
#include "tensor/nn_options.hpp"

namespace tensor::nn {

/// burn's PaddingConfig1d/2d: Valid (none), Same (output size = input size at stride 1;
/// needs an odd (kernel - 1) * dilation + 1), Explicit (the given symmetric amounts).
template <std::size_t N>
struct Padding {
  enum class Kind : std::uint8_t { Valid, Same, Explicit };
  Kind kind = Kind::Valid;
  std::array<std::int64_t, N> amount{};
  static Padding valid() { return {}; }
  static Padding same() { return {Kind::Same, {}}; }
  static Padding explicit_(std::array<std::int64_t, N> a) { return {Kind::Explicit, a}; }
};

/// burn's Conv2dConfig: channels {in, out}, kernel [kh, kw]; weight [out, in/groups, kh, kw]
/// and bias [out] drawn with fan_in = in/groups * kh * kw, fan_out = out/groups * kh * kw.
struct Conv2dConfig {
  std::array<std::size_t, 2> channels{0, 0};
  std::array<std::size_t, 2> kernel_size{1, 1};
  std::array<std::int64_t, 2> stride{1, 1};
  std::array<std::int64_t, 2> dilation{1, 1};
  std::size_t groups = 1;
  Padding<2> padding = Padding<2>::valid();
  bool bias = true;
  Initializer initializer = Initializer::module_default();
};

class TENSOR_API Conv2d : public Module {
 public:
  explicit Conv2d(const Conv2dConfig& config, const Device& device = Device::default_device());
  /// x [N, in, H, W] -> [N, out, Ho, Wo]; ShapeError naming Conv2d.weight when the channels differ.
  Tensor<4> forward(const Tensor<4>& x) const;

  Tensor<4> weight;
  std::optional<Tensor<1>> bias;
  ConvOptions<2> options;

  void visit(ModuleVisitor& v) override;
  const char* type_name() const override { return "Conv2d"; }
  AnyTensor forward_any(const AnyTensor& x) override;
};

/// burn's Conv1dConfig (channels_in, channels_out, kernel_size): weight [out, in/groups, k].
struct Conv1dConfig {
  std::size_t channels_in = 0;
  std::size_t channels_out = 0;
  std::size_t kernel_size = 1;
  std::int64_t stride = 1;
  std::int64_t dilation = 1;
  std::size_t groups = 1;
  Padding<1> padding = Padding<1>::valid();
  bool bias = true;
  Initializer initializer = Initializer::module_default();
};

class TENSOR_API Conv1d : public Module {
 public:
  explicit Conv1d(const Conv1dConfig& config, const Device& device = Device::default_device());
  /// x [N, in, L] -> [N, out, Lo].
  Tensor<3> forward(const Tensor<3>& x) const;

  Tensor<3> weight;
  std::optional<Tensor<1>> bias;
  ConvOptions<1> options;

  void visit(ModuleVisitor& v) override;
  const char* type_name() const override { return "Conv1d"; }
  AnyTensor forward_any(const AnyTensor& x) override;
};

/// burn's ConvTranspose2dConfig: weight [in, out/groups, kh, kw], fan_in = out/groups * kh * kw
/// (burn's choice for the transposed layout), bias [out].
struct ConvTranspose2dConfig {
  std::array<std::size_t, 2> channels{0, 0};
  std::array<std::size_t, 2> kernel_size{1, 1};
  std::array<std::int64_t, 2> stride{1, 1};
  std::array<std::int64_t, 2> dilation{1, 1};
  std::array<std::int64_t, 2> padding{0, 0};
  std::array<std::int64_t, 2> padding_out{0, 0};
  std::size_t groups = 1;
  bool bias = true;
  Initializer initializer = Initializer::module_default();
};

class TENSOR_API ConvTranspose2d : public Module {
 public:
  explicit ConvTranspose2d(const ConvTranspose2dConfig& config, const Device& device = Device::default_device());
  Tensor<4> forward(const Tensor<4>& x) const;

  Tensor<4> weight;
  std::optional<Tensor<1>> bias;
  ConvTransposeOptions<2> options;

  void visit(ModuleVisitor& v) override;
  const char* type_name() const override { return "ConvTranspose2d"; }
  AnyTensor forward_any(const AnyTensor& x) override;
};

/// burn's MaxPool2dConfig: strides default to the kernel size.
struct MaxPool2dConfig {
  std::array<std::int64_t, 2> kernel_size{2, 2};
  std::optional<std::array<std::int64_t, 2>> strides{};
  Padding<2> padding = Padding<2>::valid();
  std::array<std::int64_t, 2> dilation{1, 1};
  bool ceil_mode = false;
};

class TENSOR_API MaxPool2d : public Module {
 public:
  explicit MaxPool2d(const MaxPool2dConfig& config = {});
  Tensor<4> forward(const Tensor<4>& x) const;
  MaxPoolOptions<2> options;
  void visit(ModuleVisitor&) override {}
  const char* type_name() const override { return "MaxPool2d"; }
  AnyTensor forward_any(const AnyTensor& x) override;
};

/// burn's AvgPool2dConfig: strides default to the kernel size, count_include_pad true.
struct AvgPool2dConfig {
  std::array<std::int64_t, 2> kernel_size{2, 2};
  std::optional<std::array<std::int64_t, 2>> strides{};
  Padding<2> padding = Padding<2>::valid();
  bool count_include_pad = true;
  bool ceil_mode = false;
};

class TENSOR_API AvgPool2d : public Module {
 public:
  explicit AvgPool2d(const AvgPool2dConfig& config = {});
  Tensor<4> forward(const Tensor<4>& x) const;
  AvgPoolOptions<2> options;
  void visit(ModuleVisitor&) override {}
  const char* type_name() const override { return "AvgPool2d"; }
  AnyTensor forward_any(const AnyTensor& x) override;
};

/// burn's AdaptiveAvgPool2dConfig: the output size [H, W].
struct AdaptiveAvgPool2dConfig {
  std::array<std::int64_t, 2> output_size{1, 1};
};

class TENSOR_API AdaptiveAvgPool2d : public Module {
 public:
  explicit AdaptiveAvgPool2d(const AdaptiveAvgPool2dConfig& config = {}) : output_size(config.output_size) {}
  Tensor<4> forward(const Tensor<4>& x) const;
  std::array<std::int64_t, 2> output_size;
  void visit(ModuleVisitor&) override {}
  const char* type_name() const override { return "AdaptiveAvgPool2d"; }
  AnyTensor forward_any(const AnyTensor& x) override;
};

/// burn's ConvTranspose1dConfig: weight [in, out/groups, k], bias [out].
struct ConvTranspose1dConfig {
  std::array<std::size_t, 2> channels{0, 0};
  std::size_t kernel_size = 1;
  std::int64_t stride = 1;
  std::int64_t dilation = 1;
  std::int64_t padding = 0;
  std::int64_t padding_out = 0;
  std::size_t groups = 1;
  bool bias = true;
  Initializer initializer = Initializer::module_default();
};

class TENSOR_API ConvTranspose1d : public Module {
 public:
  explicit ConvTranspose1d(const ConvTranspose1dConfig& config, const Device& device = Device::default_device());
  Tensor<3> forward(const Tensor<3>& x) const;

  Tensor<3> weight;
  std::optional<Tensor<1>> bias;
  ConvTransposeOptions<1> options;

  void visit(ModuleVisitor& v) override;
  const char* type_name() const override { return "ConvTranspose1d"; }
  AnyTensor forward_any(const AnyTensor& x) override;
};

/// burn's MaxPool1dConfig / AvgPool1dConfig / AdaptiveAvgPool1dConfig over x [N, C, L].
struct MaxPool1dConfig {
  std::int64_t kernel_size = 2;
  std::optional<std::int64_t> stride{};
  Padding<1> padding = Padding<1>::valid();
  std::int64_t dilation = 1;
  bool ceil_mode = false;
};

class TENSOR_API MaxPool1d : public Module {
 public:
  explicit MaxPool1d(const MaxPool1dConfig& config = {});
  Tensor<3> forward(const Tensor<3>& x) const;
  MaxPoolOptions<1> options;
  void visit(ModuleVisitor&) override {}
  const char* type_name() const override { return "MaxPool1d"; }
  AnyTensor forward_any(const AnyTensor& x) override;
};

struct AvgPool1dConfig {
  std::int64_t kernel_size = 2;
  std::optional<std::int64_t> stride{};
  Padding<1> padding = Padding<1>::valid();
  bool count_include_pad = true;
  bool ceil_mode = false;
};

class TENSOR_API AvgPool1d : public Module {
 public:
  explicit AvgPool1d(const AvgPool1dConfig& config = {});
  Tensor<3> forward(const Tensor<3>& x) const;
  AvgPoolOptions<1> options;
  void visit(ModuleVisitor&) override {}
  const char* type_name() const override { return "AvgPool1d"; }
  AnyTensor forward_any(const AnyTensor& x) override;
};

struct AdaptiveAvgPool1dConfig {
  std::int64_t output_size = 1;
};

class TENSOR_API AdaptiveAvgPool1d : public Module {
 public:
  explicit AdaptiveAvgPool1d(const AdaptiveAvgPool1dConfig& config = {}) : output_size(config.output_size) {}
  Tensor<3> forward(const Tensor<3>& x) const;
  std::int64_t output_size;
  void visit(ModuleVisitor&) override {}
  const char* type_name() const override { return "AdaptiveAvgPool1d"; }
  AnyTensor forward_any(const AnyTensor& x) override;
};

/// burn's Conv3dConfig: channels {in, out}, kernel [kd, kh, kw]; weight [out, in/groups, kd,
/// kh, kw] and bias [out] drawn with fan_in = in/groups * kd * kh * kw, fan_out = out/groups *
/// kd * kh * kw.
struct Conv3dConfig {
  std::array<std::size_t, 2> channels{0, 0};
  std::array<std::size_t, 3> kernel_size{1, 1, 1};
  std::array<std::int64_t, 3> stride{1, 1, 1};
  std::array<std::int64_t, 3> dilation{1, 1, 1};
  std::size_t groups = 1;
  Padding<3> padding = Padding<3>::valid();
  bool bias = true;
  Initializer initializer = Initializer::module_default();
};

class TENSOR_API Conv3d : public Module {
 public:
  explicit Conv3d(const Conv3dConfig& config, const Device& device = Device::default_device());
  /// x [N, in, D, H, W] -> [N, out, Do, Ho, Wo]; ShapeError naming Conv3d.weight when the
  /// channels differ.
  Tensor<5> forward(const Tensor<5>& x) const;

  Tensor<5> weight;
  std::optional<Tensor<1>> bias;
  ConvOptions<3> options;

  void visit(ModuleVisitor& v) override;
  const char* type_name() const override { return "Conv3d"; }
  AnyTensor forward_any(const AnyTensor& x) override;
};

/// burn's ConvTranspose3dConfig: weight [in, out/groups, kd, kh, kw], fan_in = out/groups *
/// kd * kh * kw (as ConvTranspose2d), bias [out].
struct ConvTranspose3dConfig {
  std::array<std::size_t, 2> channels{0, 0};
  std::array<std::size_t, 3> kernel_size{1, 1, 1};
  std::array<std::int64_t, 3> stride{1, 1, 1};
  std::array<std::int64_t, 3> dilation{1, 1, 1};
  std::array<std::int64_t, 3> padding{0, 0, 0};
  std::array<std::int64_t, 3> padding_out{0, 0, 0};
  std::size_t groups = 1;
  bool bias = true;
  Initializer initializer = Initializer::module_default();
};

class TENSOR_API ConvTranspose3d : public Module {
 public:
  explicit ConvTranspose3d(const ConvTranspose3dConfig& config, const Device& device = Device::default_device());
  Tensor<5> forward(const Tensor<5>& x) const;

  Tensor<5> weight;
  std::optional<Tensor<1>> bias;
  ConvTransposeOptions<3> options;

  void visit(ModuleVisitor& v) override;
  const char* type_name() const override { return "ConvTranspose3d"; }
  AnyTensor forward_any(const AnyTensor& x) override;
};

/// burn's AdaptiveAvgPool3dConfig: the output size [D, H, W] over x [N, C, D, H, W].
struct AdaptiveAvgPool3dConfig {
  std::array<std::int64_t, 3> output_size{1, 1, 1};
};

class TENSOR_API AdaptiveAvgPool3d : public Module {
 public:
  explicit AdaptiveAvgPool3d(const AdaptiveAvgPool3dConfig& config = {}) : output_size(config.output_size) {}
  Tensor<5> forward(const Tensor<5>& x) const;
  std::array<std::int64_t, 3> output_size;
  void visit(ModuleVisitor&) override {}
  const char* type_name() const override { return "AdaptiveAvgPool3d"; }
  AnyTensor forward_any(const AnyTensor& x) override;
};

}  // namespace tensor::nn
