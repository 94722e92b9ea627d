// burn-nn's convolution and pooling modules (tensor/modules/conv.hpp) over tensor/nn.hpp.
#include "tensor/modules/conv.hpp"

#include <string>

#include "module_util.hpp"
#include "tensor/nn.hpp"

namespace tensor::nn {

using modules::check_input;
using modules::shape_error;

namespace {

template <std::size_t N>
std::string arr(const std::array<std::int64_t, N>& a) {
  std::string s = "[";
  for (std::size_t i = 0; i < N; ++i) s += (i ? ", " : "") + std::to_string(a[i]);
  return s + "]";
}

// The symmetric padding a Padding<N> stands for; Same needs stride 1 and an even
// dilation * (kernel - 1).
template <std::size_t N>
std::array<std::int64_t, N> resolve(const char* module, const Padding<N>& p, const std::array<std::int64_t, N>& kernel,
                                    const std::array<std::int64_t, N>& stride, const std::array<std::int64_t, N>& dilation) {
  std::array<std::int64_t, N> out{};
  if (p.kind == Padding<N>::Kind::Explicit) return p.amount;
  if (p.kind == Padding<N>::Kind::Valid) return out;
  for (std::size_t i = 0; i < N; ++i) {
    const std::int64_t span = dilation[i] * (kernel[i] - 1);
    if (stride[i] != 1 || span % 2 != 0)
      shape_error(module, "Same padding needs stride 1 and an odd effective kernel",
                  "stride 1 and dilation * (kernel - 1) even", "stride " + arr(stride) + ", kernel " + arr(kernel) + ", dilation " + arr(dilation));
    out[i] = span / 2;
  }
  return out;
}

void check_channels(const char* module, std::size_t in, std::size_t out, std::size_t groups) {
  if (in == 0 || out == 0 || groups == 0)
    shape_error(module, "channels and groups must be positive", "positive values", "channels [" + std::to_string(in) + ", " +
                std::to_string(out) + "], groups " + std::to_string(groups));
  if (in % groups != 0 || out % groups != 0)
    shape_error(module, "channels must be divisible by groups", "multiples of " + std::to_string(groups),
                "channels [" + std::to_string(in) + ", " + std::to_string(out) + "]");
}

// A convolution module's parameters: weight [out, in / groups, kernel...] ([in, out / groups,
// kernel...] when transposed) and bias [out], both initialized with fan_in = in / groups *
// prod(kernel) and fan_out = out / groups * prod(kernel) (swapped when transposed), after the
// channel checks.
template <std::size_t N>
struct ConvLayout {
  const char* module;
  std::size_t in, out, groups;
  std::array<std::size_t, N> kernel;
  bool transposed;

  std::size_t taps() const {
    std::size_t k = 1;
    for (std::size_t v : kernel) k *= v;
    return k;
  }
  std::size_t fan_in() const { return (transposed ? out : in) / groups * taps(); }
  std::size_t fan_out() const { return (transposed ? in : out) / groups * taps(); }
  Tensor<N + 2> weight(const Initializer& init, const Device& device) const {
    check_channels(module, in, out, groups);
    std::array<std::size_t, N + 2> dims{transposed ? in : out, (transposed ? out : in) / groups};
    for (std::size_t i = 0; i < N; ++i) dims[2 + i] = kernel[i];
    return init.init<N + 2>(Shape(std::span<const std::size_t>(dims)), device, fan_in(), fan_out());
  }
  std::optional<Tensor<1>> bias(bool has, const Initializer& init, const Device& device) const {
    if (!has) return std::nullopt;
    return init.init<1>(Shape{out}, device, fan_in(), fan_out());
  }
};

ConvLayout<2> layout(const Conv2dConfig& c) { return {"Conv2d", c.channels[0], c.channels[1], c.groups, c.kernel_size, false}; }
ConvLayout<1> layout(const Conv1dConfig& c) { return {"Conv1d", c.channels_in, c.channels_out, c.groups, {c.kernel_size}, false}; }
ConvLayout<2> layout(const ConvTranspose2dConfig& c) { return {"ConvTranspose2d", c.channels[0], c.channels[1], c.groups, c.kernel_size, true}; }
ConvLayout<1> layout(const ConvTranspose1dConfig& c) { return {"ConvTranspose1d", c.channels[0], c.channels[1], c.groups, {c.kernel_size}, true}; }
ConvLayout<3> layout(const Conv3dConfig& c) { return {"Conv3d", c.channels[0], c.channels[1], c.groups, c.kernel_size, false}; }
ConvLayout<3> layout(const ConvTranspose3dConfig& c) { return {"ConvTranspose3d", c.channels[0], c.channels[1], c.groups, c.kernel_size, true}; }

template <std::size_t D>
void check_in_channels(const char* module, const Tensor<D>& x, std::size_t want, const Shape& ws) {
  const Shape xs = x.shape();
  if (xs[1] != want)
    shape_error(module, std::string("the input's channels differ from ") + module + ".weight's (weight " + ws.to_string() + ")",
                std::to_string(want) + " channels", "shape " + xs.to_string());
}

template <std::size_t N>
std::array<std::int64_t, N> to_i64(const std::array<std::size_t, N>& a) {
  std::array<std::int64_t, N> o{};
  for (std::size_t i = 0; i < N; ++i) o[i] = static_cast<std::int64_t>(a[i]);
  return o;
}

template <class M, std::size_t D>
AnyTensor fixed_rank(const M& m, const AnyTensor& x, const char* name) {
  return AnyTensor(m.forward(x.get<D>(name)));
}

}  // namespace

// ---- Conv2d ---------------------------------------------------------------------------------

Conv2d::Conv2d(const Conv2dConfig& c, const Device& device)
    : weight(layout(c).weight(c.initializer, device)) {
  bias = layout(c).bias(c.bias, c.initializer, device);
  options.stride = c.stride;
  options.dilation = c.dilation;
  options.groups = static_cast<std::int64_t>(c.groups);
  options.padding = resolve<2>("Conv2d", c.padding, to_i64<2>(c.kernel_size), c.stride, c.dilation);
}

Tensor<4> Conv2d::forward(const Tensor<4>& x) const {
  check_input("Conv2d", "weight", x, weight);
  const Shape ws = weight.shape();
  check_in_channels("Conv2d", x, ws[1] * static_cast<std::size_t>(options.groups), ws);
  return conv2d(x, weight, bias, options);
}

void Conv2d::visit(ModuleVisitor& v) {
  v.param("weight", weight);
  v.param("bias", bias);
}
AnyTensor Conv2d::forward_any(const AnyTensor& x) { return fixed_rank<Conv2d, 4>(*this, x, "Conv2d"); }

// ---- Conv1d ---------------------------------------------------------------------------------

Conv1d::Conv1d(const Conv1dConfig& c, const Device& device)
    : weight(layout(c).weight(c.initializer, device)) {
  bias = layout(c).bias(c.bias, c.initializer, device);
  options.stride = {c.stride};
  options.dilation = {c.dilation};
  options.groups = static_cast<std::int64_t>(c.groups);
  options.padding = resolve<1>("Conv1d", c.padding, {static_cast<std::int64_t>(c.kernel_size)}, {c.stride}, {c.dilation});
}

Tensor<3> Conv1d::forward(const Tensor<3>& x) const {
  check_input("Conv1d", "weight", x, weight);
  const Shape ws = weight.shape();
  check_in_channels("Conv1d", x, ws[1] * static_cast<std::size_t>(options.groups), ws);
  return conv1d(x, weight, bias, options);
}

void Conv1d::visit(ModuleVisitor& v) {
  v.param("weight", weight);
  v.param("bias", bias);
}
AnyTensor Conv1d::forward_any(const AnyTensor& x) { return fixed_rank<Conv1d, 3>(*this, x, "Conv1d"); }

// ---- ConvTranspose2d ------------------------------------------------------------------------

ConvTranspose2d::ConvTranspose2d(const ConvTranspose2dConfig& c, const Device& device)
    : weight(layout(c).weight(c.initializer, device)) {
  bias = layout(c).bias(c.bias, c.initializer, device);
  options.stride = c.stride;
  options.dilation = c.dilation;
  options.padding = c.padding;
  options.padding_out = c.padding_out;
  options.groups = static_cast<std::int64_t>(c.groups);
}

Tensor<4> ConvTranspose2d::forward(const Tensor<4>& x) const {
  check_input("ConvTranspose2d", "weight", x, weight);
  const Shape ws = weight.shape();
  check_in_channels("ConvTranspose2d", x, ws[0], ws);
  return conv_transpose2d(x, weight, bias, options);
}

void ConvTranspose2d::visit(ModuleVisitor& v) {
  v.param("weight", weight);
  v.param("bias", bias);
}
AnyTensor ConvTranspose2d::forward_any(const AnyTensor& x) { return fixed_rank<ConvTranspose2d, 4>(*this, x, "ConvTranspose2d"); }

// ---- pooling --------------------------------------------------------------------------------

MaxPool2d::MaxPool2d(const MaxPool2dConfig& c) {
  options.kernel_size = c.kernel_size;
  options.stride = c.strides ? *c.strides : c.kernel_size;
  options.dilation = c.dilation;
  options.ceil_mode = c.ceil_mode;
  options.padding = resolve<2>("MaxPool2d", c.padding, c.kernel_size, options.stride, c.dilation);
}
Tensor<4> MaxPool2d::forward(const Tensor<4>& x) const { return max_pool2d(x, options); }
AnyTensor MaxPool2d::forward_any(const AnyTensor& x) { return fixed_rank<MaxPool2d, 4>(*this, x, "MaxPool2d"); }

AvgPool2d::AvgPool2d(const AvgPool2dConfig& c) {
  options.kernel_size = c.kernel_size;
  options.stride = c.strides ? *c.strides : c.kernel_size;
  options.count_include_pad = c.count_include_pad;
  options.ceil_mode = c.ceil_mode;
  options.padding = resolve<2>("AvgPool2d", c.padding, c.kernel_size, options.stride, {1, 1});
}
Tensor<4> AvgPool2d::forward(const Tensor<4>& x) const { return avg_pool2d(x, options); }
AnyTensor AvgPool2d::forward_any(const AnyTensor& x) { return fixed_rank<AvgPool2d, 4>(*this, x, "AvgPool2d"); }

Tensor<4> AdaptiveAvgPool2d::forward(const Tensor<4>& x) const { return adaptive_avg_pool2d(x, output_size); }
AnyTensor AdaptiveAvgPool2d::forward_any(const AnyTensor& x) {
  return fixed_rank<AdaptiveAvgPool2d, 4>(*this, x, "AdaptiveAvgPool2d");
}

// ---- the 1d forms ---------------------------------------------------------------------------

ConvTranspose1d::ConvTranspose1d(const ConvTranspose1dConfig& c, const Device& device)
    : weight(layout(c).weight(c.initializer, device)) {
  bias = layout(c).bias(c.bias, c.initializer, device);
  options.stride = {c.stride};
  options.dilation = {c.dilation};
  options.padding = {c.padding};
  options.padding_out = {c.padding_out};
  options.groups = static_cast<std::int64_t>(c.groups);
}

Tensor<3> ConvTranspose1d::forward(const Tensor<3>& x) const {
  check_input("ConvTranspose1d", "weight", x, weight);
  const Shape ws = weight.shape();
  check_in_channels("ConvTranspose1d", x, ws[0], ws);
  return conv_transpose1d(x, weight, bias, options);
}

void ConvTranspose1d::visit(ModuleVisitor& v) {
  v.param("weight", weight);
  v.param("bias", bias);
}
AnyTensor ConvTranspose1d::forward_any(const AnyTensor& x) { return fixed_rank<ConvTranspose1d, 3>(*this, x, "ConvTranspose1d"); }

MaxPool1d::MaxPool1d(const MaxPool1dConfig& c) {
  options.kernel_size = {c.kernel_size};
  options.stride = {c.stride ? *c.stride : c.kernel_size};
  options.dilation = {c.dilation};
  options.ceil_mode = c.ceil_mode;
  options.padding = resolve<1>("MaxPool1d", c.padding, {c.kernel_size}, options.stride, {c.dilation});
}
Tensor<3> MaxPool1d::forward(const Tensor<3>& x) const { return max_pool1d(x, options); }
AnyTensor MaxPool1d::forward_any(const AnyTensor& x) { return fixed_rank<MaxPool1d, 3>(*this, x, "MaxPool1d"); }

AvgPool1d::AvgPool1d(const AvgPool1dConfig& c) {
  options.kernel_size = {c.kernel_size};
  options.stride = {c.stride ? *c.stride : c.kernel_size};
  options.count_include_pad = c.count_include_pad;
  options.ceil_mode = c.ceil_mode;
  options.padding = resolve<1>("AvgPool1d", c.padding, {c.kernel_size}, options.stride, {1});
}
Tensor<3> AvgPool1d::forward(const Tensor<3>& x) const { return avg_pool1d(x, options); }
AnyTensor AvgPool1d::forward_any(const AnyTensor& x) { return fixed_rank<AvgPool1d, 3>(*this, x, "AvgPool1d"); }

Tensor<3> AdaptiveAvgPool1d::forward(const Tensor<3>& x) const { return adaptive_avg_pool1d(x, output_size); }
AnyTensor AdaptiveAvgPool1d::forward_any(const AnyTensor& x) {
  return fixed_rank<AdaptiveAvgPool1d, 3>(*this, x, "AdaptiveAvgPool1d");
}

// ---- the 3d forms ---------------------------------------------------------------------------

Conv3d::Conv3d(const Conv3dConfig& c, const Device& device)
    : weight(layout(c).weight(c.initializer, device)) {
  bias = layout(c).bias(c.bias, c.initializer, device);
  options.stride = c.stride;
  options.dilation = c.dilation;
  options.groups = static_cast<std::int64_t>(c.groups);
  options.padding = resolve<3>("Conv3d", c.padding, to_i64<3>(c.kernel_size), c.stride, c.dilation);
}

Tensor<5> Conv3d::forward(const Tensor<5>& x) const {
  check_input("Conv3d", "weight", x, weight);
  const Shape ws = weight.shape();
  check_in_channels("Conv3d", x, ws[1] * static_cast<std::size_t>(options.groups), ws);
  return conv3d(x, weight, bias, options);
}

void Conv3d::visit(ModuleVisitor& v) {
  v.param("weight", weight);
  v.param("bias", bias);
}
AnyTensor Conv3d::forward_any(const AnyTensor& x) { return fixed_rank<Conv3d, 5>(*this, x, "Conv3d"); }

ConvTranspose3d::ConvTranspose3d(const ConvTranspose3dConfig& c, const Device& device)
    : weight(layout(c).weight(c.initializer, device)) {
  bias = layout(c).bias(c.bias, c.initializer, device);
  options.stride = c.stride;
  options.dilation = c.dilation;
  options.padding = c.padding;
  options.padding_out = c.padding_out;
  options.groups = static_cast<std::int64_t>(c.groups);
}

Tensor<5> ConvTranspose3d::forward(const Tensor<5>& x) const {
  check_input("ConvTranspose3d", "weight", x, weight);
  const Shape ws = weight.shape();
  check_in_channels("ConvTranspose3d", x, ws[0], ws);
  return conv_transpose3d(x, weight, bias, options);
}

void ConvTranspose3d::visit(ModuleVisitor& v) {
  v.param("weight", weight);
  v.param("bias", bias);
}
AnyTensor ConvTranspose3d::forward_any(const AnyTensor& x) { return fixed_rank<ConvTranspose3d, 5>(*this, x, "ConvTranspose3d"); }

Tensor<5> AdaptiveAvgPool3d::forward(const Tensor<5>& x) const { return adaptive_avg_pool3d(x, output_size); }
AnyTensor AdaptiveAvgPool3d::forward_any(const AnyTensor& x) {
  return fixed_rank<AdaptiveAvgPool3d, 5>(*this, x, "AdaptiveAvgPool3d");
}

}  // namespace tensor::nn
