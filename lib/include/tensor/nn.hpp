// Module ops (burn's ModuleOps, module-ops.md): convolution, pooling, interpolation,
// embedding, layer_norm and attention as free functions in tensor::nn, with burn's names
// and option structs (tensor/nn_options.hpp), and the backward entries burn makes public.
// Float tensors of one float dtype per call (a mixed call throws DTypeError on every device);
// channels first. Included by nothing else, so a file that does not use it pays nothing.
// Each function calls one exported detail:: function (lib/src/nn.cpp): no dispatch code here.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <utility>

#include "tensor/nn_options.hpp"
#include "tensor/tensor.hpp"

namespace tensor::detail {

/// An empty Handle stands for an absent optional tensor (bias, beta, mask).
TENSOR_API Handle nn_conv(OpCode op, Handle&& x, Handle&& weight, Handle&& bias, const ConvArgs& a);
/// op: conv_x_backward, conv_weight_backward, conv_transpose_x_backward, conv_transpose_weight_backward;
/// (a, b) = (dy, weight) for x, (x, dy) for weight; `target` is the gradient's shape.
TENSOR_API Handle nn_conv_backward(OpCode op, Handle&& a, Handle&& b, const Shape& target, const ConvArgs& args);
TENSOR_API Handle nn_conv_bias_backward(Handle&& dy);
TENSOR_API Handle nn_pool(OpCode op, Handle&& x, const PoolArgs& a);
TENSOR_API std::pair<Handle, Handle> nn_max_pool_with_indices(OpCode op, Handle&& x, const PoolArgs& a);
TENSOR_API Handle nn_max_pool_backward(Handle&& dy, Handle&& indices, const Shape& x_shape, const PoolArgs& a);
/// op: avg_pool_backward or adaptive_avg_pool_backward.
TENSOR_API Handle nn_pool_backward(OpCode op, Handle&& dy, const Shape& x_shape, const PoolArgs& a);
TENSOR_API Handle nn_interpolate(Handle&& x, std::array<std::int64_t, 2> size, const nn::InterpolateOptions& o);
TENSOR_API Handle nn_interpolate_backward(Handle&& dy, const Shape& x_shape, std::array<std::int64_t, 2> size,
                                          const nn::InterpolateOptions& o);
TENSOR_API Handle nn_embedding(Handle&& weights, Handle&& indices);
TENSOR_API Handle nn_embedding_backward(Handle&& dy, Handle&& indices, const Shape& weight_shape);
TENSOR_API Handle nn_layer_norm(Handle&& x, Handle&& gamma, Handle&& beta, double eps);
TENSOR_API Handle nn_attention(Handle&& q, Handle&& k, Handle&& v, Handle&& mask, Handle&& bias,
                               const nn::AttentionModuleOptions& o);
TENSOR_API Handle nn_attention_fallback(Handle&& q, Handle&& k, Handle&& v, Handle&& mask, Handle&& bias,
                                        const nn::AttentionModuleOptions& o);
TENSOR_API Handle nn_linear(Handle&& x, Handle&& weight, Handle&& bias);
TENSOR_API Handle nn_batch_norm(Handle&& x, Handle&& gamma, Handle&& beta, Handle&& mean, Handle&& variance, double eps);
TENSOR_API Handle nn_unfold4d(Handle&& x, std::array<std::int64_t, 2> kernel, const nn::UnfoldOptions& o);
TENSOR_API Handle nn_fold4d(Handle&& x, std::array<std::int64_t, 2> output_size, std::array<std::int64_t, 2> kernel,
                            const nn::UnfoldOptions& o);
TENSOR_API Handle nn_ctc_loss(Handle&& log_probs, Handle&& targets, Handle&& input_lengths, Handle&& target_lengths,
                              std::int64_t blank);
TENSOR_API Handle nn_ctc_loss_backward(Handle&& log_probs, Handle&& targets, Handle&& input_lengths,
                                       Handle&& target_lengths, Handle&& dloss, std::int64_t blank);
TENSOR_API Handle nn_deform_conv2d(Handle&& x, Handle&& offset, Handle&& weight, Handle&& mask, Handle&& bias,
                                   const nn::DeformConvOptions<2>& o);
/// {x, offset, weight, mask, bias} gradients; the mask's is empty without a mask, the bias's without with_bias.
TENSOR_API std::array<Handle, 5> nn_deform_conv2d_backward(Handle&& x, Handle&& offset, Handle&& weight, Handle&& mask,
                                                           Handle&& dy, bool with_bias, const nn::DeformConvOptions<2>& o);
/// n: the length (0: the signal's length; irfft: 2 (bins - 1)); an explicit 0 is refused.
TENSOR_API std::pair<Handle, Handle> nn_rfft(Handle&& signal, std::int64_t dim, std::optional<std::size_t> n);
TENSOR_API Handle nn_irfft(Handle&& re, Handle&& im, std::int64_t dim, std::optional<std::size_t> n);

}  // namespace tensor::detail

/// burn's module ops as free functions (convolution, pooling, interpolation, embedding, norms,
/// attention, rfft, losses) and their public backward entries, with burn's option structs.
/// Float tensors of one dtype per call (DTypeError otherwise), channels first; shapes or
/// options that do not fit are a ShapeError naming the op. The module classes (tensor/module.hpp,
/// tensor/modules/) live here too.
namespace tensor::nn {

namespace nn_detail {
template <std::size_t D, class K>
tensor::detail::Handle opt(const std::optional<Tensor<D, K>>& t) {
  return t ? tensor::detail::copy(*t) : tensor::detail::Handle{};
}
}  // namespace nn_detail

// ---- convolution: x [N, C_in, *S], weight [C_out, C_in/groups, *K], bias [C_out] ----------
/// Convolution: x [N, C_in, *S], weight [C_out, C_in/groups, *K], bias [C_out] -> [N, C_out, *O],
/// O = floor((S + 2 padding - dilation (K - 1) - 1) / stride) + 1 per spatial dim (1-d, 2-d, 3-d).
/// ShapeError when channels, groups or options do not fit; DTypeError for mixed dtypes.
///@{
inline Tensor<3> conv1d(const Tensor<3>& x, const Tensor<3>& weight, const std::optional<Tensor<1>>& bias,
                        const ConvOptions<1>& options = {}) {
  return Tensor<3>(tensor::detail::nn_conv(OpCode::conv1d, tensor::detail::copy(x), tensor::detail::copy(weight), nn_detail::opt(bias),
                                   tensor::detail::conv_args(options)));
}
inline Tensor<4> conv2d(const Tensor<4>& x, const Tensor<4>& weight, const std::optional<Tensor<1>>& bias,
                        const ConvOptions<2>& options = {}) {
  return Tensor<4>(tensor::detail::nn_conv(OpCode::conv2d, tensor::detail::copy(x), tensor::detail::copy(weight), nn_detail::opt(bias),
                                   tensor::detail::conv_args(options)));
}
inline Tensor<5> conv3d(const Tensor<5>& x, const Tensor<5>& weight, const std::optional<Tensor<1>>& bias,
                        const ConvOptions<3>& options = {}) {
  return Tensor<5>(tensor::detail::nn_conv(OpCode::conv3d, tensor::detail::copy(x), tensor::detail::copy(weight),
                                           nn_detail::opt(bias), tensor::detail::conv_args(options)));
}
///@}
/// Transposed convolution: x [N, C_in, *S], weight [C_in, C_out/groups, *K], bias [C_out] ->
/// [N, C_out, *O], O = (S - 1) stride - 2 padding + dilation (K - 1) + padding_out + 1.
///@{
inline Tensor<3> conv_transpose1d(const Tensor<3>& x, const Tensor<3>& weight, const std::optional<Tensor<1>>& bias,
                                  const ConvTransposeOptions<1>& options = {}) {
  return Tensor<3>(tensor::detail::nn_conv(OpCode::conv_transpose1d, tensor::detail::copy(x), tensor::detail::copy(weight),
                                   nn_detail::opt(bias), tensor::detail::conv_args(options)));
}
inline Tensor<4> conv_transpose2d(const Tensor<4>& x, const Tensor<4>& weight, const std::optional<Tensor<1>>& bias,
                                  const ConvTransposeOptions<2>& options = {}) {
  return Tensor<4>(tensor::detail::nn_conv(OpCode::conv_transpose2d, tensor::detail::copy(x), tensor::detail::copy(weight),
                                   nn_detail::opt(bias), tensor::detail::conv_args(options)));
}
inline Tensor<5> conv_transpose3d(const Tensor<5>& x, const Tensor<5>& weight, const std::optional<Tensor<1>>& bias,
                                  const ConvTransposeOptions<3>& options = {}) {
  return Tensor<5>(tensor::detail::nn_conv(OpCode::conv_transpose3d, tensor::detail::copy(x), tensor::detail::copy(weight),
                                           nn_detail::opt(bias), tensor::detail::conv_args(options)));
}
///@}

/// The gradient of conv (rank D = spatial dims + 2) with respect to x, of x's shape, given the
/// forward inputs and output_grad (burn's argument lists: the forward inputs give the shapes).
template <std::size_t D>
Tensor<D> conv_x_backward(const Tensor<D>& x, const Tensor<D>& weight, const Tensor<D>& output_grad,
                          const ConvOptions<D - 2>& options) {
  return Tensor<D>(tensor::detail::nn_conv_backward(OpCode::conv_x_backward, tensor::detail::copy(output_grad), tensor::detail::copy(weight),
                                            x.shape(), tensor::detail::conv_args(options)));
}
/// The gradient of conv with respect to the weight, of the weight's shape.
template <std::size_t D>
Tensor<D> conv_weight_backward(const Tensor<D>& x, const Tensor<D>& weight, const Tensor<D>& output_grad,
                               const ConvOptions<D - 2>& options) {
  return Tensor<D>(tensor::detail::nn_conv_backward(OpCode::conv_weight_backward, tensor::detail::copy(x), tensor::detail::copy(output_grad),
                                            weight.shape(), tensor::detail::conv_args(options)));
}
/// The gradient with respect to the bias: output_grad summed over every dim but 1 -> [C_out].
template <std::size_t D>
Tensor<1> conv_bias_backward(const Tensor<D>& output_grad) {
  return Tensor<1>(tensor::detail::nn_conv_bias_backward(tensor::detail::copy(output_grad)));
}
/// conv_x_backward, conv_weight_backward and conv_bias_backward of a 2-d convolution.
///@{
inline Tensor<4> conv2d_x_backward(const Tensor<4>& x, const Tensor<4>& weight, const Tensor<4>& output_grad,
                                   const ConvOptions<2>& options = {}) {
  return conv_x_backward<4>(x, weight, output_grad, options);
}
inline Tensor<4> conv2d_weight_backward(const Tensor<4>& x, const Tensor<4>& weight, const Tensor<4>& output_grad,
                                        const ConvOptions<2>& options = {}) {
  return conv_weight_backward<4>(x, weight, output_grad, options);
}
inline Tensor<1> conv2d_bias_backward(const Tensor<4>& output_grad) { return conv_bias_backward<4>(output_grad); }
///@}
/// The gradient of conv_transpose with respect to x, of x's shape.
template <std::size_t D>
Tensor<D> conv_transpose_x_backward(const Tensor<D>& x, const Tensor<D>& weight, const Tensor<D>& output_grad,
                                    const ConvTransposeOptions<D - 2>& options) {
  return Tensor<D>(tensor::detail::nn_conv_backward(OpCode::conv_transpose_x_backward, tensor::detail::copy(output_grad),
                                            tensor::detail::copy(weight), x.shape(), tensor::detail::conv_args(options)));
}
/// The gradient of conv_transpose with respect to the weight, of the weight's shape.
template <std::size_t D>
Tensor<D> conv_transpose_weight_backward(const Tensor<D>& x, const Tensor<D>& weight, const Tensor<D>& output_grad,
                                         const ConvTransposeOptions<D - 2>& options) {
  return Tensor<D>(tensor::detail::nn_conv_backward(OpCode::conv_transpose_weight_backward, tensor::detail::copy(x),
                                            tensor::detail::copy(output_grad), weight.shape(), tensor::detail::conv_args(options)));
}

// ---- pooling -------------------------------------------------------------------------
/// Max pooling: x [N, C, *S] -> [N, C, *O] (1-d, 2-d), each output the maximum of its window
/// (padding acts as -inf; the first maximum wins ties). ShapeError when the options do not fit.
///@{
inline Tensor<3> max_pool1d(const Tensor<3>& x, const MaxPoolOptions<1>& options) {
  return Tensor<3>(tensor::detail::nn_pool(OpCode::max_pool1d, tensor::detail::copy(x), tensor::detail::pool_args(options)));
}
inline Tensor<4> max_pool2d(const Tensor<4>& x, const MaxPoolOptions<2>& options) {
  return Tensor<4>(tensor::detail::nn_pool(OpCode::max_pool2d, tensor::detail::copy(x), tensor::detail::pool_args(options)));
}
///@}
/// max_pool1d / max_pool2d and the Int index of each maximum: its flat position in the
/// unpadded input plane (h W + w; 1-d: the position along L); -1 for a window with no tap.
///@{
inline std::pair<Tensor<3>, Tensor<3, Int>> max_pool1d_with_indices(const Tensor<3>& x, const MaxPoolOptions<1>& options) {
  auto [v, i] = tensor::detail::nn_max_pool_with_indices(OpCode::max_pool1d_with_indices, tensor::detail::copy(x), tensor::detail::pool_args(options));
  return {Tensor<3>(v), Tensor<3, Int>(i)};
}
inline std::pair<Tensor<4>, Tensor<4, Int>> max_pool2d_with_indices(const Tensor<4>& x, const MaxPoolOptions<2>& options) {
  auto [v, i] = tensor::detail::nn_max_pool_with_indices(OpCode::max_pool2d_with_indices, tensor::detail::copy(x), tensor::detail::pool_args(options));
  return {Tensor<4>(v), Tensor<4, Int>(i)};
}
///@}
/// The gradient of max_pool with respect to x: output_grad added at the indices of the
/// forward's max_pool*_with_indices (overlapping windows accumulate). IndexError for an index
/// that is neither -1 nor a tap of its own output's window.
///@{
inline Tensor<4> max_pool2d_with_indices_backward(const Tensor<4>& x, const Tensor<4>& output_grad,
                                                  const Tensor<4, Int>& indices, const MaxPoolOptions<2>& options) {
  return Tensor<4>(tensor::detail::nn_max_pool_backward(tensor::detail::copy(output_grad), tensor::detail::copy(indices), x.shape(),
                                                tensor::detail::pool_args(options)));
}
inline Tensor<3> max_pool1d_with_indices_backward(const Tensor<3>& x, const Tensor<3>& output_grad,
                                                  const Tensor<3, Int>& indices, const MaxPoolOptions<1>& options) {
  return Tensor<3>(tensor::detail::nn_max_pool_backward(tensor::detail::copy(output_grad), tensor::detail::copy(indices), x.shape(),
                                                tensor::detail::pool_args(options)));
}
///@}
/// Average pooling: x [N, C, *S] -> [N, C, *O] (1-d, 2-d), each output the mean of its window
/// (the divisor counts the padding when count_include_pad). ShapeError when the options do not fit.
///@{
inline Tensor<3> avg_pool1d(const Tensor<3>& x, const AvgPoolOptions<1>& options) {
  return Tensor<3>(tensor::detail::nn_pool(OpCode::avg_pool1d, tensor::detail::copy(x), tensor::detail::pool_args(options)));
}
inline Tensor<4> avg_pool2d(const Tensor<4>& x, const AvgPoolOptions<2>& options) {
  return Tensor<4>(tensor::detail::nn_pool(OpCode::avg_pool2d, tensor::detail::copy(x), tensor::detail::pool_args(options)));
}
///@}
/// The gradient of avg_pool with respect to x: each output_grad element divided by its window's
/// divisor and added to each input the window covers.
///@{
inline Tensor<3> avg_pool1d_backward(const Tensor<3>& x, const Tensor<3>& output_grad, const AvgPoolOptions<1>& options) {
  return Tensor<3>(tensor::detail::nn_pool_backward(OpCode::avg_pool_backward, tensor::detail::copy(output_grad), x.shape(),
                                            tensor::detail::pool_args(options)));
}
inline Tensor<4> avg_pool2d_backward(const Tensor<4>& x, const Tensor<4>& output_grad, const AvgPoolOptions<2>& options) {
  return Tensor<4>(tensor::detail::nn_pool_backward(OpCode::avg_pool_backward, tensor::detail::copy(output_grad), x.shape(),
                                            tensor::detail::pool_args(options)));
}
///@}
/// Adaptive average pooling to `output_size` per spatial dim (1-d, 2-d): output i of a
/// dim averages inputs floor(i in / out) .. ceil((i + 1) in / out) - 1 (windows may overlap).
///@{
inline Tensor<3> adaptive_avg_pool1d(const Tensor<3>& x, std::int64_t output_size) {
  return Tensor<3>(tensor::detail::nn_pool(OpCode::adaptive_avg_pool1d, tensor::detail::copy(x),
                                   tensor::detail::adaptive_pool_args<1>({output_size})));
}
inline Tensor<4> adaptive_avg_pool2d(const Tensor<4>& x, std::array<std::int64_t, 2> output_size) {
  return Tensor<4>(tensor::detail::nn_pool(OpCode::adaptive_avg_pool2d, tensor::detail::copy(x), tensor::detail::adaptive_pool_args<2>(output_size)));
}
///@}
/// The gradient of adaptive_avg_pool with respect to x (its output size read from output_grad).
///@{
inline Tensor<3> adaptive_avg_pool1d_backward(const Tensor<3>& x, const Tensor<3>& output_grad) {
  const std::int64_t o = static_cast<std::int64_t>(output_grad.dims()[2]);
  return Tensor<3>(tensor::detail::nn_pool_backward(OpCode::adaptive_avg_pool_backward, tensor::detail::copy(output_grad), x.shape(),
                                            tensor::detail::adaptive_pool_args<1>({o})));
}
inline Tensor<4> adaptive_avg_pool2d_backward(const Tensor<4>& x, const Tensor<4>& output_grad) {
  const auto d = output_grad.dims();
  return Tensor<4>(tensor::detail::nn_pool_backward(OpCode::adaptive_avg_pool_backward, tensor::detail::copy(output_grad), x.shape(),
                                            tensor::detail::adaptive_pool_args<2>({static_cast<std::int64_t>(d[2]),
                                                                         static_cast<std::int64_t>(d[3])})));
}
///@}
/// adaptive_avg_pool1d / 2d's rule over three spatial dims: x [N, C, D, H, W] -> [N, C, *output_size].
inline Tensor<5> adaptive_avg_pool3d(const Tensor<5>& x, std::array<std::int64_t, 3> output_size) {
  return Tensor<5>(tensor::detail::nn_pool(OpCode::adaptive_avg_pool3d, tensor::detail::copy(x),
                                           tensor::detail::adaptive_pool_args<3>(output_size)));
}
/// The gradient of adaptive_avg_pool3d with respect to x.
inline Tensor<5> adaptive_avg_pool3d_backward(const Tensor<5>& x, const Tensor<5>& output_grad) {
  const auto d = output_grad.dims();
  return Tensor<5>(tensor::detail::nn_pool_backward(
      OpCode::adaptive_avg_pool_backward, tensor::detail::copy(output_grad), x.shape(),
      tensor::detail::adaptive_pool_args<3>({static_cast<std::int64_t>(d[2]), static_cast<std::int64_t>(d[3]),
                                   static_cast<std::int64_t>(d[4])})));
}

// ---- interpolate (x [N, C, H, W] -> [N, C, size[0], size[1]]) ----------------------------
/// Resizes x [N, C, H, W] to [N, C, output_size[0], output_size[1]] with the options' mode
/// (nearest, nearest-exact, bilinear, bicubic, lanczos3) and align_corners rule.
inline Tensor<4> interpolate(const Tensor<4>& x, std::array<std::int64_t, 2> output_size,
                             const InterpolateOptions& options = {}) {
  return Tensor<4>(tensor::detail::nn_interpolate(tensor::detail::copy(x), output_size, options));
}
/// The gradient of interpolate with respect to x, of x's shape.
inline Tensor<4> interpolate_backward(const Tensor<4>& x, const Tensor<4>& output_grad,
                                      std::array<std::int64_t, 2> output_size, const InterpolateOptions& options = {}) {
  return Tensor<4>(tensor::detail::nn_interpolate_backward(tensor::detail::copy(output_grad), x.shape(), output_size, options));
}

// ---- embedding: weights [n, d], indices Int [B, L] -> [B, L, d] ---------------------------
/// Rows of `weights` [n, d] picked by the Int `indices` (any rank >= 1; [B, L] gives [B, L, d]).
/// IndexError for an index outside 0..n-1.
inline Tensor<3> embedding(const Tensor<2>& weights, const Tensor<2, Int>& indices) {
  return Tensor<3>(tensor::detail::nn_embedding(tensor::detail::copy(weights), tensor::detail::copy(indices)));
}
/// The gradient with respect to the weights [n, d]: output_grad rows added at their indices
/// (repeated indices add).
inline Tensor<2> embedding_backward(const Tensor<2>& weights, const Tensor<3>& output_grad, const Tensor<2, Int>& indices) {
  return Tensor<2>(tensor::detail::nn_embedding_backward(tensor::detail::copy(output_grad), tensor::detail::copy(indices), weights.shape()));
}

// ---- layer_norm over the last dim (biased variance) ----------------------------------------
/// Normalises over the last dim: (x - mean) / sqrt(biased variance + epsilon) * gamma + beta,
/// gamma and beta of the last dim's size. ShapeError for a negative or non-finite epsilon.
template <std::size_t D>
Tensor<D> layer_norm(const Tensor<D>& x, const Tensor<1>& gamma, const std::optional<Tensor<1>>& beta, double epsilon = 1e-5) {
  return Tensor<D>(tensor::detail::nn_layer_norm(tensor::detail::copy(x), tensor::detail::copy(gamma), nn_detail::opt(beta), epsilon));
}

// ---- attention: q [B,H,Lq,D], k [B,H,Lk,D], v [B,H,Lk,Dv] -> [B,H,Lq,Dv] -------------------
/// softmax(q k^T * scale + attn_bias, masked) v: q [B, H, Lq, D], k [B, H, Lk, D], v [B, H, Lk, Dv]
/// -> [B, H, Lq, Dv]. mask [B|1, H|1, Lq, Lk]: true = masked out; attn_bias of that shape is added
/// to the scores; options: scale, softcap, is_causal (nn_options.hpp). A fully masked row gives 0.
inline Tensor<4> attention(const Tensor<4>& q, const Tensor<4>& k, const Tensor<4>& v,
                           const std::optional<Tensor<4, Bool>>& mask = std::nullopt,
                           const std::optional<Tensor<4>>& attn_bias = std::nullopt,
                           const AttentionModuleOptions& options = {}) {
  return Tensor<4>(tensor::detail::nn_attention(tensor::detail::copy(q), tensor::detail::copy(k), tensor::detail::copy(v), nn_detail::opt(mask),
                                        nn_detail::opt(attn_bias), options));
}

/// burn's attention_fallback: attention's reference composition (matmul, masks, a softmax
/// whose fully masked rows give 0), on every device, to check a backend's attention
/// against. Arguments, shapes and errors as attention's.
inline Tensor<4> attention_fallback(const Tensor<4>& q, const Tensor<4>& k, const Tensor<4>& v,
                                    const std::optional<Tensor<4, Bool>>& mask = std::nullopt,
                                    const std::optional<Tensor<4>>& attn_bias = std::nullopt,
                                    const AttentionModuleOptions& options = {}) {
  return Tensor<4>(tensor::detail::nn_attention_fallback(tensor::detail::copy(q), tensor::detail::copy(k), tensor::detail::copy(v),
                                                         nn_detail::opt(mask), nn_detail::opt(attn_bias), options));
}

// ---- rfft / irfft (module-ops.md §2.15; torch's semantics, any length n >= 1) ----------
/// rfft(signal, dim, n) -> (re, im), n/2 + 1 bins along dim: X[k] = sum_{j<n} x[j] e^{-2 pi i
/// j k / n}, the signal truncated or zero-padded to n (default: its length). burn accepts
/// only powers of two and panics otherwise; we take any n >= 1 (mixed radix + Bluestein
/// on the CPU, a DFT matmul elsewhere).
template <std::size_t D>
std::pair<Tensor<D>, Tensor<D>> rfft(const Tensor<D>& signal, std::int64_t dim, std::optional<std::size_t> n = std::nullopt) {
  auto [re, im] = tensor::detail::nn_rfft(tensor::detail::copy(signal), dim, n);
  return {Tensor<D>(re), Tensor<D>(im)};
}
/// irfft(re, im, dim, n) -> the real signal of length n along dim (default 2 (bins - 1)),
/// normalised by 1/n; uses the first n/2 + 1 bins (missing ones are zero) and ignores the
/// imaginary parts of DC and Nyquist. An odd-length signal round-trips only with its n.
template <std::size_t D>
Tensor<D> irfft(const Tensor<D>& re, const Tensor<D>& im, std::int64_t dim, std::optional<std::size_t> n = std::nullopt) {
  return Tensor<D>(tensor::detail::nn_irfft(tensor::detail::copy(re), tensor::detail::copy(im), dim, n));
}

// ---- linear: x [..., d_in] @ weight [d_in, d_out] (+ bias [d_out]) -------------------------
/// burn's layout: the weight is [d_in, d_out], the transpose of torch's F.linear weight.
template <std::size_t D>
Tensor<D> linear(const Tensor<D>& x, const Tensor<2>& weight, const std::optional<Tensor<1>>& bias = std::nullopt) {
  return Tensor<D>(tensor::detail::nn_linear(tensor::detail::copy(x), tensor::detail::copy(weight), nn_detail::opt(bias)));
}

// ---- batch_norm, inference form: x [N, C, ...], statistics [C] given by the caller ----------
/// y = (x - mean) / sqrt(variance + epsilon) * gamma + beta per channel (dim 1); nothing is
/// computed or updated (torch F.batch_norm(training=False)).
template <std::size_t D>
Tensor<D> batch_norm(const Tensor<D>& x, const Tensor<1>& gamma, const Tensor<1>& beta, const Tensor<1>& mean,
                     const Tensor<1>& variance, double epsilon = 1e-5) {
  return Tensor<D>(tensor::detail::nn_batch_norm(tensor::detail::copy(x), tensor::detail::copy(gamma),
                                                 tensor::detail::copy(beta), tensor::detail::copy(mean),
                                                 tensor::detail::copy(variance), epsilon));
}

// ---- unfold4d / fold4d (torch F.unfold / F.fold) -------------------------------------------
/// unfold4d: x [N, C, H, W] -> [N, C*kh*kw, L], row c*kh*kw + i*kw + j, column ho*Wo + wo.
inline Tensor<3> unfold4d(const Tensor<4>& x, std::array<std::int64_t, 2> kernel_size, const UnfoldOptions& options = {}) {
  return Tensor<3>(tensor::detail::nn_unfold4d(tensor::detail::copy(x), kernel_size, options));
}
/// fold4d: the adjoint, x [N, C*kh*kw, L] -> [N, C, output_size], overlapping blocks summed.
inline Tensor<4> fold4d(const Tensor<3>& x, std::array<std::int64_t, 2> output_size, std::array<std::int64_t, 2> kernel_size,
                        const UnfoldOptions& options = {}) {
  return Tensor<4>(tensor::detail::nn_fold4d(tensor::detail::copy(x), output_size, kernel_size, options));
}

// ---- ctc_loss: log_probs [T, N, C] (log_softmax output), targets Int [N, S] (padded) ---------
/// Per-sample negative log-likelihood [N] (no reduction); entries past target_lengths[n] are
/// ignored; an impossible alignment gives +inf and a zero gradient. The gradient is the exact
/// derivative with respect to the log-probabilities (not torch's through-log_softmax form).
inline Tensor<1> ctc_loss(const Tensor<3>& log_probs, const Tensor<2, Int>& targets, const Tensor<1, Int>& input_lengths,
                          const Tensor<1, Int>& target_lengths, std::int64_t blank = 0) {
  return Tensor<1>(tensor::detail::nn_ctc_loss(tensor::detail::copy(log_probs), tensor::detail::copy(targets),
                                               tensor::detail::copy(input_lengths), tensor::detail::copy(target_lengths),
                                               blank));
}
/// d loss / d log_probs [T, N, C] for the upstream gradient output_grad [N].
inline Tensor<3> ctc_loss_backward(const Tensor<3>& log_probs, const Tensor<2, Int>& targets,
                                   const Tensor<1, Int>& input_lengths, const Tensor<1, Int>& target_lengths,
                                   const Tensor<1>& output_grad, std::int64_t blank = 0) {
  return Tensor<3>(tensor::detail::nn_ctc_loss_backward(
      tensor::detail::copy(log_probs), tensor::detail::copy(targets), tensor::detail::copy(input_lengths),
      tensor::detail::copy(target_lengths), tensor::detail::copy(output_grad), blank));
}
/// The 'mean' reduction (torch's): each loss divided by its target length clamped to >= 1,
/// then averaged over the batch (burn-nn divides an empty target's loss by 0).
inline Tensor<1> ctc_loss_mean(const Tensor<1>& losses, const Tensor<1, Int>& target_lengths) {
  return losses.div(target_lengths.float_().cast(losses.dtype()).clamp_min(1.0)).mean();
}

// ---- deform_conv2d (torchvision semantics: DCNv1 without a mask, DCNv2 with one) -----------
/// x [N, C_in, H, W], offset [N, 2*OG*kh*kw, Ho, Wo] (dy then dx per tap), weight
/// [C_out, C_in/weight_groups, kh, kw], mask [N, OG*kh*kw, Ho, Wo]?, bias [C_out]? -> [N, C_out, Ho, Wo].
inline Tensor<4> deform_conv2d(const Tensor<4>& x, const Tensor<4>& offset, const Tensor<4>& weight,
                               const std::optional<Tensor<4>>& mask, const std::optional<Tensor<1>>& bias,
                               const DeformConvOptions<2>& options = {}) {
  return Tensor<4>(tensor::detail::nn_deform_conv2d(tensor::detail::copy(x), tensor::detail::copy(offset),
                                                    tensor::detail::copy(weight), nn_detail::opt(mask),
                                                    nn_detail::opt(bias), options));
}
/// The gradients deform_conv2d_backward returns (mask_grad and bias_grad only when the
/// forward had a mask / bias).
struct DeformConv2dBackward {
  /// Gradients of x, offset and weight, of their shapes.
  ///@{
  Tensor<4> x_grad, offset_grad, weight_grad;
  ///@}
  /// The mask's gradient (nullopt without a mask).
  std::optional<Tensor<4>> mask_grad;
  /// The bias's gradient [C_out] (nullopt without a bias).
  std::optional<Tensor<1>> bias_grad;
};
/// The gradients of deform_conv2d with respect to each input, given the forward inputs and
/// output_grad [N, C_out, Ho, Wo].
inline DeformConv2dBackward deform_conv2d_backward(const Tensor<4>& x, const Tensor<4>& offset, const Tensor<4>& weight,
                                                   const std::optional<Tensor<4>>& mask,
                                                   const std::optional<Tensor<1>>& bias, const Tensor<4>& output_grad,
                                                   const DeformConvOptions<2>& options = {}) {
  auto h = tensor::detail::nn_deform_conv2d_backward(tensor::detail::copy(x), tensor::detail::copy(offset),
                                                     tensor::detail::copy(weight), nn_detail::opt(mask),
                                                     tensor::detail::copy(output_grad), bias.has_value(), options);
  DeformConv2dBackward r{Tensor<4>(h[0]), Tensor<4>(h[1]), Tensor<4>(h[2]), std::nullopt, std::nullopt};
  if (mask) r.mask_grad = Tensor<4>(h[3]);
  if (bias) r.bias_grad = Tensor<1>(h[4]);
  return r;
}

}  // namespace tensor::nn
