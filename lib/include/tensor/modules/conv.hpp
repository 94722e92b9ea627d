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
  /// Which padding (see above).
  enum class Kind : std::uint8_t { Valid, Same, Explicit };
  Kind kind = Kind::Valid;              ///< the variant
  std::array<std::int64_t, N> amount{};  ///< Explicit: the padding per spatial dim (both sides)
  /// No padding.
  static Padding valid() { return {}; }
  /// Output size = input size; the module's constructor throws ShapeError unless the stride
  /// is 1 and (kernel - 1) * dilation is even.
  static Padding same() { return {Kind::Same, {}}; }
  /// `a` on both sides of each spatial dim.
  static Padding explicit_(std::array<std::int64_t, N> a) { return {Kind::Explicit, a}; }
};

/// burn's Conv2dConfig: channels {in, out}, kernel [kh, kw]; weight [out, in/groups, kh, kw]
/// and bias [out] drawn with fan_in = in/groups * kh * kw, fan_out = out/groups * kh * kw.
struct Conv2dConfig {
  std::array<std::size_t, 2> channels{0, 0};     ///< {in, out}; positive multiples of groups
  std::array<std::size_t, 2> kernel_size{1, 1};  ///< [kh, kw]
  std::array<std::int64_t, 2> stride{1, 1};      ///< per spatial dim
  std::array<std::int64_t, 2> dilation{1, 1};    ///< per spatial dim
  std::size_t groups = 1;                        ///< channel groups
  Padding<2> padding = Padding<2>::valid();      ///< Valid, Same or Explicit
  bool bias = true;                              ///< whether there is a bias
  Initializer initializer = Initializer::module_default();  ///< draws weight and bias
};

/// burn's Conv2d (see Conv2dConfig), over tensor::nn::conv2d.
class TENSOR_API Conv2d : public Module {
 public:
  /// Parameters drawn on `device`. ShapeError naming Conv2d when a channel count or groups is
  /// 0, the channels are not divisible by groups, or Same padding cannot keep the size.
  explicit Conv2d(const Conv2dConfig& config, const Device& device = Device::default_device());
  /// x [N, in, H, W] -> [N, out, Ho, Wo]; ShapeError naming Conv2d.weight when the channels differ,
  /// DeviceError / DTypeError when x's device / dtype differ from the weight's.
  Tensor<4> forward(const Tensor<4>& x) const;

  Tensor<4> weight;               ///< [out, in/groups, kh, kw] (parameter "weight")
  std::optional<Tensor<1>> bias;  ///< [out] (parameter "bias"); empty without bias
  ConvOptions<2> options;         ///< stride, dilation, groups and the resolved padding

  void visit(ModuleVisitor& v) override;
  const char* type_name() const override { return "Conv2d"; }
  AnyTensor forward_any(const AnyTensor& x) override;
};

/// burn's Conv1dConfig (channels_in, channels_out, kernel_size): weight [out, in/groups, k].
struct Conv1dConfig {
  std::size_t channels_in = 0;   ///< in; a positive multiple of groups
  std::size_t channels_out = 0;  ///< out; a positive multiple of groups
  std::size_t kernel_size = 1;   ///< k
  std::int64_t stride = 1;       ///< the stride
  std::int64_t dilation = 1;     ///< the dilation
  std::size_t groups = 1;        ///< channel groups
  Padding<1> padding = Padding<1>::valid();  ///< Valid, Same or Explicit
  bool bias = true;              ///< whether there is a bias [out]
  Initializer initializer = Initializer::module_default();  ///< draws weight and bias
};

/// burn's Conv1d (see Conv1dConfig), over tensor::nn::conv1d.
class TENSOR_API Conv1d : public Module {
 public:
  /// Parameters drawn on `device`. ShapeError naming Conv1d as Conv2d's constructor.
  explicit Conv1d(const Conv1dConfig& config, const Device& device = Device::default_device());
  /// x [N, in, L] -> [N, out, Lo]. ShapeError naming Conv1d.weight when the channels differ,
  /// DeviceError / DTypeError when x's device / dtype differ from the weight's.
  Tensor<3> forward(const Tensor<3>& x) const;

  Tensor<3> weight;               ///< [out, in/groups, k] (parameter "weight")
  std::optional<Tensor<1>> bias;  ///< [out] (parameter "bias"); empty without bias
  ConvOptions<1> options;         ///< stride, dilation, groups and the resolved padding

  void visit(ModuleVisitor& v) override;
  const char* type_name() const override { return "Conv1d"; }
  AnyTensor forward_any(const AnyTensor& x) override;
};

/// burn's ConvTranspose2dConfig: weight [in, out/groups, kh, kw], fan_in = out/groups * kh * kw
/// (burn's choice for the transposed layout), bias [out].
struct ConvTranspose2dConfig {
  std::array<std::size_t, 2> channels{0, 0};      ///< {in, out}; positive multiples of groups
  std::array<std::size_t, 2> kernel_size{1, 1};   ///< [kh, kw]
  std::array<std::int64_t, 2> stride{1, 1};       ///< per spatial dim
  std::array<std::int64_t, 2> dilation{1, 1};     ///< per spatial dim
  std::array<std::int64_t, 2> padding{0, 0};      ///< per spatial dim (torch's padding)
  std::array<std::int64_t, 2> padding_out{0, 0};  ///< torch's output_padding
  std::size_t groups = 1;                         ///< channel groups
  bool bias = true;                               ///< whether there is a bias
  Initializer initializer = Initializer::module_default();  ///< draws weight and bias
};

/// burn's ConvTranspose2d (see ConvTranspose2dConfig), over tensor::nn::conv_transpose2d.
class TENSOR_API ConvTranspose2d : public Module {
 public:
  /// Parameters drawn on `device`. ShapeError naming ConvTranspose2d when a channel count or
  /// groups is 0 or the channels are not divisible by groups.
  explicit ConvTranspose2d(const ConvTranspose2dConfig& config, const Device& device = Device::default_device());
  /// x [N, in, H, W] -> [N, out, Ho, Wo]. ShapeError naming ConvTranspose2d.weight when the
  /// channels differ, DeviceError / DTypeError when x's device / dtype differ from the weight's.
  Tensor<4> forward(const Tensor<4>& x) const;

  Tensor<4> weight;                 ///< [in, out/groups, kh, kw] (parameter "weight")
  std::optional<Tensor<1>> bias;    ///< [out] (parameter "bias"); empty without bias
  ConvTransposeOptions<2> options;  ///< stride, dilation, padding, padding_out, groups

  void visit(ModuleVisitor& v) override;
  const char* type_name() const override { return "ConvTranspose2d"; }
  AnyTensor forward_any(const AnyTensor& x) override;
};

/// burn's MaxPool2dConfig: strides default to the kernel size.
struct MaxPool2dConfig {
  std::array<std::int64_t, 2> kernel_size{2, 2};         ///< the window [kh, kw]
  std::optional<std::array<std::int64_t, 2>> strides{};  ///< empty: the kernel size
  Padding<2> padding = Padding<2>::valid();              ///< Valid, Same (stride 1 only) or Explicit
  std::array<std::int64_t, 2> dilation{1, 1};            ///< per spatial dim
  bool ceil_mode = false;                                ///< round the output size up (torch's rule)
};

/// burn's MaxPool2d (see MaxPool2dConfig); no parameters.
class TENSOR_API MaxPool2d : public Module {
 public:
  /// ShapeError naming MaxPool2d when Same padding cannot keep the size (see Padding::same).
  explicit MaxPool2d(const MaxPool2dConfig& config = {});
  /// tensor::nn::max_pool2d of x [N, C, H, W] -> [N, C, Ho, Wo], with its errors.
  Tensor<4> forward(const Tensor<4>& x) const;
  MaxPoolOptions<2> options;  ///< the resolved options
  void visit(ModuleVisitor&) override {}
  const char* type_name() const override { return "MaxPool2d"; }
  AnyTensor forward_any(const AnyTensor& x) override;
};

/// burn's AvgPool2dConfig: strides default to the kernel size, count_include_pad true.
struct AvgPool2dConfig {
  std::array<std::int64_t, 2> kernel_size{2, 2};         ///< the window [kh, kw]
  std::optional<std::array<std::int64_t, 2>> strides{};  ///< empty: the kernel size
  Padding<2> padding = Padding<2>::valid();              ///< Valid, Same (stride 1 only) or Explicit
  bool count_include_pad = true;                         ///< the padding counts in the divisor
  bool ceil_mode = false;                                ///< round the output size up (torch's rule)
};

/// burn's AvgPool2d (see AvgPool2dConfig); no parameters.
class TENSOR_API AvgPool2d : public Module {
 public:
  /// ShapeError naming AvgPool2d when Same padding cannot keep the size (see Padding::same).
  explicit AvgPool2d(const AvgPool2dConfig& config = {});
  /// tensor::nn::avg_pool2d of x [N, C, H, W] -> [N, C, Ho, Wo], with its errors.
  Tensor<4> forward(const Tensor<4>& x) const;
  AvgPoolOptions<2> options;  ///< the resolved options
  void visit(ModuleVisitor&) override {}
  const char* type_name() const override { return "AvgPool2d"; }
  AnyTensor forward_any(const AnyTensor& x) override;
};

/// burn's AdaptiveAvgPool2dConfig: the output size [H, W].
struct AdaptiveAvgPool2dConfig {
  std::array<std::int64_t, 2> output_size{1, 1};  ///< [H, W] of the output
};

/// burn's AdaptiveAvgPool2d (see AdaptiveAvgPool2dConfig); no parameters.
class TENSOR_API AdaptiveAvgPool2d : public Module {
 public:
  /// Keeps the config's output_size (checked by forward).
  explicit AdaptiveAvgPool2d(const AdaptiveAvgPool2dConfig& config = {}) : output_size(config.output_size) {}
  /// tensor::nn::adaptive_avg_pool2d of x [N, C, H, W] -> [N, C, output_size], with its errors.
  Tensor<4> forward(const Tensor<4>& x) const;
  std::array<std::int64_t, 2> output_size;  ///< the config's output_size
  void visit(ModuleVisitor&) override {}
  const char* type_name() const override { return "AdaptiveAvgPool2d"; }
  AnyTensor forward_any(const AnyTensor& x) override;
};

/// burn's ConvTranspose1dConfig: weight [in, out/groups, k], bias [out].
struct ConvTranspose1dConfig {
  std::array<std::size_t, 2> channels{0, 0};  ///< {in, out}; positive multiples of groups
  std::size_t kernel_size = 1;                ///< k
  std::int64_t stride = 1;                    ///< the stride
  std::int64_t dilation = 1;                  ///< the dilation
  std::int64_t padding = 0;                   ///< torch's padding
  std::int64_t padding_out = 0;               ///< torch's output_padding
  std::size_t groups = 1;                     ///< channel groups
  bool bias = true;                           ///< whether there is a bias
  Initializer initializer = Initializer::module_default();  ///< draws weight and bias
};

/// burn's ConvTranspose1d (see ConvTranspose1dConfig), over tensor::nn::conv_transpose1d.
class TENSOR_API ConvTranspose1d : public Module {
 public:
  /// Parameters drawn on `device`. ShapeError naming ConvTranspose1d as ConvTranspose2d's.
  explicit ConvTranspose1d(const ConvTranspose1dConfig& config, const Device& device = Device::default_device());
  /// x [N, in, L] -> [N, out, Lo]. ShapeError naming ConvTranspose1d.weight when the channels
  /// differ, DeviceError / DTypeError when x's device / dtype differ from the weight's.
  Tensor<3> forward(const Tensor<3>& x) const;

  Tensor<3> weight;                 ///< [in, out/groups, k] (parameter "weight")
  std::optional<Tensor<1>> bias;    ///< [out] (parameter "bias"); empty without bias
  ConvTransposeOptions<1> options;  ///< stride, dilation, padding, padding_out, groups

  void visit(ModuleVisitor& v) override;
  const char* type_name() const override { return "ConvTranspose1d"; }
  AnyTensor forward_any(const AnyTensor& x) override;
};

/// burn's MaxPool1dConfig / AvgPool1dConfig / AdaptiveAvgPool1dConfig over x [N, C, L].
struct MaxPool1dConfig {
  std::int64_t kernel_size = 2;              ///< the window
  std::optional<std::int64_t> stride{};      ///< empty: the kernel size
  Padding<1> padding = Padding<1>::valid();  ///< Valid, Same (stride 1 only) or Explicit
  std::int64_t dilation = 1;                 ///< the dilation
  bool ceil_mode = false;                    ///< round the output size up (torch's rule)
};

/// burn's MaxPool1d (see MaxPool1dConfig); no parameters.
class TENSOR_API MaxPool1d : public Module {
 public:
  /// ShapeError naming MaxPool1d when Same padding cannot keep the size (see Padding::same).
  explicit MaxPool1d(const MaxPool1dConfig& config = {});
  /// tensor::nn::max_pool1d of x [N, C, L] -> [N, C, Lo], with its errors.
  Tensor<3> forward(const Tensor<3>& x) const;
  MaxPoolOptions<1> options;  ///< the resolved options
  void visit(ModuleVisitor&) override {}
  const char* type_name() const override { return "MaxPool1d"; }
  AnyTensor forward_any(const AnyTensor& x) override;
};

/// burn's AvgPool1dConfig: the stride defaults to the kernel size, count_include_pad true.
struct AvgPool1dConfig {
  std::int64_t kernel_size = 2;              ///< the window
  std::optional<std::int64_t> stride{};      ///< empty: the kernel size
  Padding<1> padding = Padding<1>::valid();  ///< Valid, Same (stride 1 only) or Explicit
  bool count_include_pad = true;             ///< the padding counts in the divisor
  bool ceil_mode = false;                    ///< round the output size up (torch's rule)
};

/// burn's AvgPool1d (see AvgPool1dConfig); no parameters.
class TENSOR_API AvgPool1d : public Module {
 public:
  /// ShapeError naming AvgPool1d when Same padding cannot keep the size (see Padding::same).
  explicit AvgPool1d(const AvgPool1dConfig& config = {});
  /// tensor::nn::avg_pool1d of x [N, C, L] -> [N, C, Lo], with its errors.
  Tensor<3> forward(const Tensor<3>& x) const;
  AvgPoolOptions<1> options;  ///< the resolved options
  void visit(ModuleVisitor&) override {}
  const char* type_name() const override { return "AvgPool1d"; }
  AnyTensor forward_any(const AnyTensor& x) override;
};

/// burn's AdaptiveAvgPool1dConfig: the output length.
struct AdaptiveAvgPool1dConfig {
  std::int64_t output_size = 1;  ///< L of the output
};

/// burn's AdaptiveAvgPool1d (see AdaptiveAvgPool1dConfig); no parameters.
class TENSOR_API AdaptiveAvgPool1d : public Module {
 public:
  /// Keeps the config's output_size (checked by forward).
  explicit AdaptiveAvgPool1d(const AdaptiveAvgPool1dConfig& config = {}) : output_size(config.output_size) {}
  /// tensor::nn::adaptive_avg_pool1d of x [N, C, L] -> [N, C, output_size], with its errors.
  Tensor<3> forward(const Tensor<3>& x) const;
  std::int64_t output_size;  ///< the config's output_size
  void visit(ModuleVisitor&) override {}
  const char* type_name() const override { return "AdaptiveAvgPool1d"; }
  AnyTensor forward_any(const AnyTensor& x) override;
};

/// burn's Conv3dConfig: channels {in, out}, kernel [kd, kh, kw]; weight [out, in/groups, kd,
/// kh, kw] and bias [out] drawn with fan_in = in/groups * kd * kh * kw, fan_out = out/groups *
/// kd * kh * kw.
struct Conv3dConfig {
  std::array<std::size_t, 2> channels{0, 0};        ///< {in, out}; positive multiples of groups
  std::array<std::size_t, 3> kernel_size{1, 1, 1};  ///< [kd, kh, kw]
  std::array<std::int64_t, 3> stride{1, 1, 1};      ///< per spatial dim
  std::array<std::int64_t, 3> dilation{1, 1, 1};    ///< per spatial dim
  std::size_t groups = 1;                           ///< channel groups
  Padding<3> padding = Padding<3>::valid();         ///< Valid, Same or Explicit
  bool bias = true;                                 ///< whether there is a bias
  Initializer initializer = Initializer::module_default();  ///< draws weight and bias
};

/// burn's Conv3d (see Conv3dConfig), over tensor::nn::conv3d.
class TENSOR_API Conv3d : public Module {
 public:
  /// Parameters drawn on `device`. ShapeError naming Conv3d as Conv2d's constructor.
  explicit Conv3d(const Conv3dConfig& config, const Device& device = Device::default_device());
  /// x [N, in, D, H, W] -> [N, out, Do, Ho, Wo]; ShapeError naming Conv3d.weight when the
  /// channels differ, DeviceError / DTypeError when x's device / dtype differ from the weight's.
  Tensor<5> forward(const Tensor<5>& x) const;

  Tensor<5> weight;               ///< [out, in/groups, kd, kh, kw] (parameter "weight")
  std::optional<Tensor<1>> bias;  ///< [out] (parameter "bias"); empty without bias
  ConvOptions<3> options;         ///< stride, dilation, groups and the resolved padding

  void visit(ModuleVisitor& v) override;
  const char* type_name() const override { return "Conv3d"; }
  AnyTensor forward_any(const AnyTensor& x) override;
};

/// burn's ConvTranspose3dConfig: weight [in, out/groups, kd, kh, kw], fan_in = out/groups *
/// kd * kh * kw (as ConvTranspose2d), bias [out].
struct ConvTranspose3dConfig {
  std::array<std::size_t, 2> channels{0, 0};         ///< {in, out}; positive multiples of groups
  std::array<std::size_t, 3> kernel_size{1, 1, 1};   ///< [kd, kh, kw]
  std::array<std::int64_t, 3> stride{1, 1, 1};       ///< per spatial dim
  std::array<std::int64_t, 3> dilation{1, 1, 1};     ///< per spatial dim
  std::array<std::int64_t, 3> padding{0, 0, 0};      ///< per spatial dim (torch's padding)
  std::array<std::int64_t, 3> padding_out{0, 0, 0};  ///< torch's output_padding
  std::size_t groups = 1;                            ///< channel groups
  bool bias = true;                                  ///< whether there is a bias
  Initializer initializer = Initializer::module_default();  ///< draws weight and bias
};

/// burn's ConvTranspose3d (see ConvTranspose3dConfig), over tensor::nn::conv_transpose3d.
class TENSOR_API ConvTranspose3d : public Module {
 public:
  /// Parameters drawn on `device`. ShapeError naming ConvTranspose3d as ConvTranspose2d's.
  explicit ConvTranspose3d(const ConvTranspose3dConfig& config, const Device& device = Device::default_device());
  /// x [N, in, D, H, W] -> [N, out, Do, Ho, Wo]. ShapeError naming ConvTranspose3d.weight when
  /// the channels differ, DeviceError / DTypeError when x's device / dtype differ from the weight's.
  Tensor<5> forward(const Tensor<5>& x) const;

  Tensor<5> weight;                 ///< [in, out/groups, kd, kh, kw] (parameter "weight")
  std::optional<Tensor<1>> bias;    ///< [out] (parameter "bias"); empty without bias
  ConvTransposeOptions<3> options;  ///< stride, dilation, padding, padding_out, groups

  void visit(ModuleVisitor& v) override;
  const char* type_name() const override { return "ConvTranspose3d"; }
  AnyTensor forward_any(const AnyTensor& x) override;
};

/// burn's AdaptiveAvgPool3dConfig: the output size [D, H, W] over x [N, C, D, H, W].
struct AdaptiveAvgPool3dConfig {
  std::array<std::int64_t, 3> output_size{1, 1, 1};  ///< [D, H, W] of the output
};

/// burn's AdaptiveAvgPool3d (see AdaptiveAvgPool3dConfig); no parameters.
class TENSOR_API AdaptiveAvgPool3d : public Module {
 public:
  /// Keeps the config's output_size (checked by forward).
  explicit AdaptiveAvgPool3d(const AdaptiveAvgPool3dConfig& config = {}) : output_size(config.output_size) {}
  /// tensor::nn::adaptive_avg_pool3d of x [N, C, D, H, W] -> [N, C, output_size], with its errors.
  Tensor<5> forward(const Tensor<5>& x) const;
  std::array<std::int64_t, 3> output_size;  ///< the config's output_size
  void visit(ModuleVisitor&) override {}
  const char* type_name() const override { return "AdaptiveAvgPool3d"; }
  AnyTensor forward_any(const AnyTensor& x) override;
};

}  // namespace tensor::nn
