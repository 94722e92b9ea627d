// Options of the module ops (burn's ConvOptions, ConvTransposeOptions, DeformConvOptions,
// pooling, InterpolateOptions, AttentionModuleOptions). Their output-shape rules live
// behind the firewall (lib/core/nn_shape.hpp).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>

namespace tensor::nn {

namespace detail {
template <std::size_t N>
constexpr std::array<std::int64_t, N> filled(std::int64_t v) {
  std::array<std::int64_t, N> a{};
  for (auto& x : a) x = v;
  return a;
}
}  // namespace detail

/// Convolution: symmetric zero padding, stride/dilation/groups >= 1 (burn-std ConvOptions).
template <std::size_t N>
struct ConvOptions {
  /// Step between output positions per spatial dim (>= 1; options out of range: ShapeError from the op).
  std::array<std::int64_t, N> stride = detail::filled<N>(1);
  /// Zeros added at both ends of each spatial dim (>= 0).
  std::array<std::int64_t, N> padding = detail::filled<N>(0);
  /// Spacing between kernel taps per spatial dim (>= 1).
  std::array<std::int64_t, N> dilation = detail::filled<N>(1);
  /// Channel groups (>= 1; divides the input and output channels).
  std::int64_t groups = 1;
};

/// Transposed convolution; padding_out is torch's output_padding (< max(stride, dilation)).
template <std::size_t N>
struct ConvTransposeOptions {
  /// Step of the forward convolution this one transposes (>= 1).
  std::array<std::int64_t, N> stride = detail::filled<N>(1);
  /// The forward convolution's padding, removed from the output (>= 0).
  std::array<std::int64_t, N> padding = detail::filled<N>(0);
  /// Extra size at the end of each output dim (torch's output_padding).
  std::array<std::int64_t, N> padding_out = detail::filled<N>(0);
  /// Spacing between kernel taps (>= 1).
  std::array<std::int64_t, N> dilation = detail::filled<N>(1);
  /// Channel groups (>= 1).
  std::int64_t groups = 1;
};

/// Deformable convolution (torchvision semantics, module-ops.md §2.3).
template <std::size_t N>
struct DeformConvOptions {
  /// Step between output positions (>= 1).
  std::array<std::int64_t, N> stride = detail::filled<N>(1);
  /// Zeros added at both ends of each spatial dim (>= 0).
  std::array<std::int64_t, N> padding = detail::filled<N>(0);
  /// Spacing between kernel taps (>= 1).
  std::array<std::int64_t, N> dilation = detail::filled<N>(1);
  /// Groups of the weight's channels (torchvision's groups).
  std::int64_t weight_groups = 1;
  /// Groups of the input channels sharing one set of offsets (and mask).
  std::int64_t offset_groups = 1;
};

/// unfold4d / fold4d (torch F.unfold / F.fold).
struct UnfoldOptions {
  /// Step between windows (height, width).
  std::array<std::int64_t, 2> stride{1, 1};
  /// Zeros added at both ends (height, width).
  std::array<std::int64_t, 2> padding{0, 0};
  /// Spacing between window taps (height, width).
  std::array<std::int64_t, 2> dilation{1, 1};
};

/// max_pool: padding acts as -inf; ceil_mode follows torch (a last window that would
/// start in the right padding is dropped; burn keeps it).
template <std::size_t N>
struct MaxPoolOptions {
  /// Window size per spatial dim.
  std::array<std::int64_t, N> kernel_size = detail::filled<N>(1);
  /// Step between windows (>= 1).
  std::array<std::int64_t, N> stride = detail::filled<N>(1);
  /// -inf padding at both ends of each spatial dim.
  std::array<std::int64_t, N> padding = detail::filled<N>(0);
  /// Spacing between window taps (>= 1).
  std::array<std::int64_t, N> dilation = detail::filled<N>(1);
  /// Round the output size up instead of down (torch's rule: see MaxPoolOptions).
  bool ceil_mode = false;
};

/// avg_pool: no dilation. count_include_pad counts the padding (not a ceil-mode overhang
/// past it) in the divisor; burn-nn's default is true.
template <std::size_t N>
struct AvgPoolOptions {
  /// Window size per spatial dim.
  std::array<std::int64_t, N> kernel_size = detail::filled<N>(1);
  /// Step between windows (>= 1).
  std::array<std::int64_t, N> stride = detail::filled<N>(1);
  /// Zero padding at both ends of each spatial dim.
  std::array<std::int64_t, N> padding = detail::filled<N>(0);
  /// Count the padding in each window's divisor (true, burn-nn's default).
  bool count_include_pad = true;
  /// Round the output size up instead of down.
  bool ceil_mode = false;
};

/// Lanczos3 is burn's: a 6-tap windowed sinc (a = 3) per axis, taps outside the image
/// skipped and the weights renormalised, no antialiasing when shrinking.
enum class InterpolateMode : std::uint8_t { Nearest, NearestExact, Bilinear, Bicubic, Lanczos3 };

/// align_corners defaults to false (PyTorch/ONNX); burn's InterpolateOptions::new sets true,
/// so code ported from burn should pass it explicitly. Nearest modes ignore it.
struct InterpolateOptions {
  /// Nearest unless set.
  InterpolateMode mode = InterpolateMode::Nearest;
  /// Map the corner pixels' centres onto each other (false: their outer edges).
  bool align_corners = false;
};

/// attention: scale defaults to 1/sqrt(D) (q's last dim); softcap (> 0) is applied before
/// masking; is_causal is bottom-right aligned (query i of Lq sees keys j <= i + Lk - Lq), as
/// burn, unlike PyTorch's SDPA (top-left). A fully masked row gives 0, not NaN.
struct AttentionModuleOptions {
  /// Scores are q k^T times this (nullopt: 1/sqrt of q's last dim).
  std::optional<double> scale;
  /// When set (> 0), scores become softcap * tanh(scores / softcap) before masking.
  std::optional<double> softcap;
  /// Mask keys after the query's diagonal (bottom-right aligned: see AttentionModuleOptions).
  bool is_causal = false;
};
/// burn's other name of AttentionModuleOptions.
using AttentionOptions = AttentionModuleOptions;

}  // namespace tensor::nn

namespace tensor::detail {

/// The one rank-generic form the convolution and pooling options take from the public call
/// down to the kernels (rank 1..3; the dims past the rank hold neutral values): tensor::nn
/// builds it here from the per-rank options, dispatch checks it once, backends trust it.
struct ConvArgs {
  std::size_t rank = 2;
  std::array<std::int64_t, 3> stride{1, 1, 1}, padding{0, 0, 0}, dilation{1, 1, 1}, padding_out{0, 0, 0};
  std::int64_t groups = 1;
};
/// Pools: kernel/stride/padding/dilation for max and avg pools, output_size for the
/// adaptive ones; count_include_pad for avg only.
struct PoolArgs {
  std::size_t rank = 2;
  std::array<std::int64_t, 3> kernel{1, 1, 1}, stride{1, 1, 1}, padding{0, 0, 0}, dilation{1, 1, 1};
  std::array<std::int64_t, 3> output_size{1, 1, 1};
  bool ceil_mode = false;
  bool count_include_pad = true;
};

template <std::size_t N>
ConvArgs conv_args(const nn::ConvOptions<N>& o) {
  ConvArgs a;
  a.rank = N;
  for (std::size_t i = 0; i < N; ++i) {
    a.stride[i] = o.stride[i];
    a.padding[i] = o.padding[i];
    a.dilation[i] = o.dilation[i];
  }
  a.groups = o.groups;
  return a;
}
template <std::size_t N>
ConvArgs conv_args(const nn::ConvTransposeOptions<N>& o) {
  ConvArgs a = conv_args(nn::ConvOptions<N>{o.stride, o.padding, o.dilation, o.groups});
  for (std::size_t i = 0; i < N; ++i) a.padding_out[i] = o.padding_out[i];
  return a;
}
/// The window options every max and avg pool has.
template <std::size_t N, class O>
PoolArgs pool_window_args(const O& o) {
  PoolArgs a;
  a.rank = N;
  for (std::size_t i = 0; i < N; ++i) {
    a.kernel[i] = o.kernel_size[i];
    a.stride[i] = o.stride[i];
    a.padding[i] = o.padding[i];
  }
  a.ceil_mode = o.ceil_mode;
  return a;
}
template <std::size_t N>
PoolArgs pool_args(const nn::MaxPoolOptions<N>& o) {
  PoolArgs a = pool_window_args<N>(o);
  for (std::size_t i = 0; i < N; ++i) a.dilation[i] = o.dilation[i];
  return a;
}
template <std::size_t N>
PoolArgs pool_args(const nn::AvgPoolOptions<N>& o) {
  PoolArgs a = pool_window_args<N>(o);
  a.count_include_pad = o.count_include_pad;
  return a;
}
template <std::size_t N>
PoolArgs adaptive_pool_args(const std::array<std::int64_t, N>& output_size) {
  PoolArgs a;
  a.rank = N;
  for (std::size_t i = 0; i < N; ++i) a.output_size[i] = output_size[i];
  return a;
}

}  // namespace tensor::detail
