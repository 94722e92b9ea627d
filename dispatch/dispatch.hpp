// Dispatch: DispatchTensor (the tagged variant behind every Tensor handle) and one
// forwarding function per op family. Each forwarder checks kinds, validates its
// arguments once (ranks, shapes, dims, index ranges, dtypes), picks the backend by
// device type and calls its entry. Nothing below it validates again.
#pragma once

#include <cstdint>
#include <future>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "dispatch/backend.hpp"
#include "lib/core/kind.hpp"
#include "tensor/data.hpp"
#include "tensor/options.hpp"

namespace tensor::dispatch {

using Kind = tensor::detail::Kind;

std::string_view kind_name(Kind k);
Kind kind_of_dtype(DType dtype);  // QFloat -> Kind::QFloat

// Backend tag (device) + kind + counted primitive. 16 bytes, the size of a Handle
// (lib/src/handles.hpp checks that it fits).
struct DispatchTensor {
  Primitive* prim = nullptr;  // owned reference
  DeviceId device{};
  Kind kind = Kind::Float;

  DispatchTensor() = default;
  DispatchTensor(Prim p, Kind k) : device(p->device()), kind(k) { prim = p.release(); }
  DispatchTensor(const DispatchTensor& o) : prim(o.prim), device(o.device), kind(o.kind) { if (prim) prim->add_ref(); }
  DispatchTensor(DispatchTensor&& o) noexcept : prim(std::exchange(o.prim, nullptr)), device(o.device), kind(o.kind) {}
  DispatchTensor& operator=(DispatchTensor o) noexcept {
    std::swap(prim, o.prim); device = o.device; kind = o.kind; return *this;
  }
  ~DispatchTensor() { if (prim) prim->release_ref(); }

  // Moves the primitive out (the tensor becomes empty).
  Prim take() { return Prim::adopt(std::exchange(prim, nullptr)); }
  const Primitive& operator*() const { return *prim; }
  const Primitive* operator->() const { return prim; }
  const Shape& shape() const { return prim->shape(); }
  DType dtype() const { return prim->dtype(); }
};

// Settings-aware dtype defaults (first use fixes the device settings).
// `op` names the user's op in the error for a kind without a default (QFloat).
DType default_dtype(DeviceId device, Kind kind, std::string_view op = "default_dtype");

// ---- forwarders (argument dims may be negative: counted from the end) ----------
DispatchTensor create(OpCode op, const Shape& shape, DeviceId device, Kind kind, std::optional<DType> dtype);
DispatchTensor full(const Shape& shape, Scalar value, DeviceId device, Kind kind, std::optional<DType> dtype);
DispatchTensor from_data(TensorData data, DeviceId device, Kind kind);
DispatchTensor random(const Shape& shape, const Distribution& dist, DeviceId device, Kind kind,
                      std::optional<DType> dtype);
DispatchTensor arange(std::int64_t start, std::int64_t end, std::int64_t step, DeviceId device,
                      std::optional<DType> dtype);
std::future<TensorData> into_data(DispatchTensor a);
TensorData read(DispatchTensor a);  // into_data().get()
DispatchTensor to_device(DispatchTensor a, DeviceId device);
DispatchTensor cast(OpCode op, DispatchTensor a, DType dtype);

DispatchTensor unary(OpCode op, DispatchTensor a);
DispatchTensor binary(OpCode op, DispatchTensor a, DispatchTensor b);
DispatchTensor scalar(OpCode op, DispatchTensor a, Scalar s);
DispatchTensor clamp(OpCode op, DispatchTensor a, Scalar lo, Scalar hi);
DispatchTensor compare(OpCode op, DispatchTensor a, DispatchTensor b);
DispatchTensor compare_scalar(OpCode op, DispatchTensor a, Scalar s);
DispatchTensor predicate(OpCode op, DispatchTensor a);
DispatchTensor set_require_grad(DispatchTensor a, bool on);
bool is_require_grad(const DispatchTensor& a);
DispatchTensor matmul(DispatchTensor a, DispatchTensor b);
DispatchTensor cross(DispatchTensor a, DispatchTensor b, std::int64_t dim);
DispatchTensor powi(DispatchTensor a, DispatchTensor b);

DispatchTensor reduce(OpCode op, DispatchTensor a);
DispatchTensor reduce_dim(OpCode op, DispatchTensor a, std::int64_t dim);
DispatchTensor dim_index(OpCode op, DispatchTensor a, std::int64_t dim);
std::pair<DispatchTensor, DispatchTensor> dim_with_indices(OpCode op, DispatchTensor a, std::int64_t dim);
// (variance, mean) along dim, the variance's divisor n - correction.
std::pair<DispatchTensor, DispatchTensor> var_mean(DispatchTensor a, std::int64_t dim, std::size_t correction);
DispatchTensor any_all(OpCode op, DispatchTensor a);
DispatchTensor any_all_dim(OpCode op, DispatchTensor a, std::int64_t dim);
DispatchTensor sort(DispatchTensor a, std::int64_t dim, bool descending);
std::pair<DispatchTensor, DispatchTensor> sort_with_indices(DispatchTensor a, std::int64_t dim, bool descending);
DispatchTensor argsort(DispatchTensor a, std::int64_t dim, bool descending);
DispatchTensor topk(DispatchTensor a, std::int64_t dim, std::size_t k);
std::pair<DispatchTensor, DispatchTensor> topk_with_indices(DispatchTensor a, std::int64_t dim, std::size_t k);
DispatchTensor argtopk(DispatchTensor a, std::int64_t dim, std::size_t k);

DispatchTensor reshape(OpCode op, DispatchTensor a, std::span<const std::int64_t> shape);
DispatchTensor swap_dims(DispatchTensor a, std::int64_t d0, std::int64_t d1);
DispatchTensor axes(OpCode op, DispatchTensor a, std::span<const std::int64_t> axes);
DispatchTensor slice(DispatchTensor a, std::span<const tensor::Slice> slices);
DispatchTensor slice_assign(DispatchTensor a, std::span<const tensor::Slice> slices, DispatchTensor value);
DispatchTensor repeat_dim(DispatchTensor a, std::int64_t dim, std::size_t times);
DispatchTensor cat(std::vector<DispatchTensor> parts, std::int64_t dim);
DispatchTensor unfold(DispatchTensor a, std::int64_t dim, std::size_t size, std::size_t step);

DispatchTensor gather(DispatchTensor a, std::int64_t dim, DispatchTensor indices);
DispatchTensor scatter(OpCode op, DispatchTensor a, std::int64_t dim, DispatchTensor indices, DispatchTensor values,
                       IndexingUpdateOp update);
DispatchTensor select(DispatchTensor a, std::int64_t dim, DispatchTensor indices);
DispatchTensor select_assign(OpCode op, DispatchTensor a, std::int64_t dim, DispatchTensor indices,
                             DispatchTensor values, IndexingUpdateOp update);
DispatchTensor mask_where(DispatchTensor a, DispatchTensor mask, DispatchTensor value);
DispatchTensor mask_fill(DispatchTensor a, DispatchTensor mask, Scalar value);
DispatchTensor mask_select(DispatchTensor a, DispatchTensor mask);
DispatchTensor argwhere(DispatchTensor a);
DispatchTensor grid_sample_2d(DispatchTensor a, DispatchTensor grid, const GridSampleOptions& options);
// burn's gather_nd / scatter_nd: indices [.., k] (Int) address the first k dims of `a`;
// gather_nd gives [indices' leading dims.., a's dims from k..]; scatter_nd's values have
// that shape and update `a`'s addressed slices. An index outside its dim is an IndexError.
DispatchTensor gather_nd(DispatchTensor a, DispatchTensor indices);
DispatchTensor scatter_nd(DispatchTensor a, DispatchTensor indices, DispatchTensor values, IndexingUpdateOp update);

// ---- nn: the module ops (burn's ModuleOps), Float only ------------------------------
// Each forwarder validates with the lib/core/nn_shape.hpp shape rules (ShapeError naming
// the op), so backend entries and defaults do not validate again. An absent optional
// tensor (bias, beta, mask, attn_bias) is an empty DispatchTensor. The backward
// forwarders are what the autodiff layer calls on the inner device:
//   conv(op, x, w, bias, args)             conv1d/2d/3d, conv_transpose1d/2d/3d (args.rank from op)
//   conv_backward_x(dy, w, x_shape, args)  dL/dx of conv (args.rank = the conv's rank)
//   conv_backward_weight(x, dy, w_shape, args)
//   conv_backward_bias(dy)                 dL/dbias of conv and conv_transpose: dy summed but dim 1
//   conv_transpose_backward_x(dy, w, x_shape, args), conv_transpose_backward_weight(x, dy, w_shape, args)
//   pool(op, x, args)                      max/avg_pool1d/2d, adaptive_avg_pool1d/2d (args.rank from op)
//   max_pool_with_indices(op, x, args)     (values, Int indices flat h*W+w in the unpadded plane)
//   max_pool_backward(dy, indices, x_shape, args)
//   pool_backward(op, dy, x_shape, args)   op: avg_pool_backward or adaptive_avg_pool_backward
//   interpolate(x, args), interpolate_backward(dy, x_shape, args)
//   embedding(weights, indices), embedding_backward(dy, indices, weight_shape)
//   layer_norm(x, gamma, beta, eps), attention(q, k, v, mask, bias, options)
//   linear, batch_norm, unfold4d/fold4d, ctc_loss(+backward), deform_conv2d(+backward): below
DispatchTensor conv(OpCode op, DispatchTensor x, DispatchTensor weight, DispatchTensor bias, const ConvArgs& args);
// rfft(x, dim, n): (re, im), n/2 + 1 bins along dim (x truncated or zero-padded to n; n 0:
// the length along dim). irfft(re, im, dim, n): length n along dim (n 0: 2 (bins - 1)).
std::pair<DispatchTensor, DispatchTensor> rfft(DispatchTensor x, std::int64_t dim, std::size_t n);
DispatchTensor irfft(DispatchTensor re, DispatchTensor im, std::int64_t dim, std::size_t n);
// op: conv_x_backward, conv_weight_backward, conv_transpose_x_backward or
// conv_transpose_weight_backward; (a, b) = (dy, weight) for x, (x, dy) for weight.
DispatchTensor conv_backward(OpCode op, DispatchTensor a, DispatchTensor b, const Shape& target, const ConvArgs& args);
DispatchTensor conv_backward_x(DispatchTensor dy, DispatchTensor weight, const Shape& x_shape, const ConvArgs& args);
DispatchTensor conv_backward_weight(DispatchTensor x, DispatchTensor dy, const Shape& weight_shape, const ConvArgs& args);
DispatchTensor conv_backward_bias(DispatchTensor dy);
DispatchTensor conv_transpose_backward_x(DispatchTensor dy, DispatchTensor weight, const Shape& x_shape,
                                         const ConvArgs& args);
DispatchTensor conv_transpose_backward_weight(DispatchTensor x, DispatchTensor dy, const Shape& weight_shape,
                                              const ConvArgs& args);
DispatchTensor pool(OpCode op, DispatchTensor x, const PoolArgs& args);
std::pair<DispatchTensor, DispatchTensor> max_pool_with_indices(OpCode op, DispatchTensor x, const PoolArgs& args);
DispatchTensor max_pool_backward(DispatchTensor dy, DispatchTensor indices, const Shape& x_shape, const PoolArgs& args);
DispatchTensor pool_backward(OpCode op, DispatchTensor dy, const Shape& x_shape, const PoolArgs& args);
DispatchTensor interpolate(DispatchTensor x, const InterpArgs& args);
DispatchTensor interpolate_backward(DispatchTensor dy, const Shape& x_shape, const InterpArgs& args);
DispatchTensor embedding(DispatchTensor weights, DispatchTensor indices);
DispatchTensor embedding_backward(DispatchTensor dy, DispatchTensor indices, const Shape& weight_shape);
DispatchTensor layer_norm(DispatchTensor x, DispatchTensor gamma, DispatchTensor beta, double eps);
DispatchTensor attention(DispatchTensor q, DispatchTensor k, DispatchTensor v, DispatchTensor mask, DispatchTensor bias,
                         const tensor::nn::AttentionModuleOptions& options);
// linear(x [..., d_in], weight [d_in, d_out], bias [d_out]?) -> [..., d_out]
DispatchTensor linear(DispatchTensor x, DispatchTensor weight, DispatchTensor bias);
// batch_norm(x [N, C, ...], gamma, beta, mean, variance [C], eps): inference form.
DispatchTensor batch_norm(DispatchTensor x, DispatchTensor gamma, DispatchTensor beta, DispatchTensor mean,
                          DispatchTensor variance, double eps);
// unfold4d(x [N,C,H,W]) -> [N, C*kh*kw, L]; fold4d(x [N, C*kh*kw, L]) -> [N, C, H, W] (args.output_size).
DispatchTensor unfold4d(DispatchTensor x, const FoldArgs& args);
DispatchTensor fold4d(DispatchTensor x, const FoldArgs& args);
// ctc_loss(log_probs [T,N,C], targets Int [N,S], input_lengths Int [N], target_lengths Int [N]) -> [N];
// ctc_loss_backward(..., dloss [N]) -> d log_probs [T,N,C].
DispatchTensor ctc_loss(DispatchTensor log_probs, DispatchTensor targets, DispatchTensor input_lengths,
                        DispatchTensor target_lengths, std::int64_t blank);
DispatchTensor ctc_loss_backward(DispatchTensor log_probs, DispatchTensor targets, DispatchTensor input_lengths,
                                 DispatchTensor target_lengths, DispatchTensor dloss, std::int64_t blank);
// The collectives (op table: distributed section) on the calling thread's group: op is
// all_reduce / reduce_scatter (arg: the ReduceOp), broadcast (arg: the root) or all_gather.
DispatchTensor collective(OpCode op, DispatchTensor a, std::int64_t arg);
// x [.., M, K] (float) times a quantized weight [K, N] (op table: quant section).
DispatchTensor q_matmul(DispatchTensor x, DispatchTensor w);
// conv2d with a quantized weight (the q_conv2d row; dispatch/rules/quant.cpp).
DispatchTensor q_conv2d(DispatchTensor x, DispatchTensor w, DispatchTensor bias, const QConvArgs& args);
// deform_conv2d(x, offset, weight, mask?, bias?, options) -> [N, Cout, Ho, Wo];
// deform_conv2d_backward(x, offset, weight, mask?, dy, with_bias) -> {dx, doffset, dweight, dmask?, dbias?}.
DispatchTensor deform_conv2d(DispatchTensor x, DispatchTensor offset, DispatchTensor weight, DispatchTensor mask,
                             DispatchTensor bias, const tensor::nn::DeformConvOptions<2>& options);
std::vector<DispatchTensor> deform_conv2d_backward(DispatchTensor x, DispatchTensor offset, DispatchTensor weight,
                                                   DispatchTensor mask, DispatchTensor dy, bool with_bias,
                                                   const tensor::nn::DeformConvOptions<2>& options);

// Device-level entries.
std::string backend_name(DeviceId device);  // "dispatch<cpu>"
DTypeUsageSet dtype_usage(DeviceId device, DType dtype);
bool supports_dtype(DeviceId device, DType dtype);
void seed(DeviceId device, std::uint64_t seed);
void sync(DeviceId device);
MemoryStats memory_stats(DeviceId device);
void memory_cleanup(DeviceId device);
std::size_t device_count(std::uint16_t type_id);
// "cpu", "vulkan:0"
std::string device_string(DeviceId device);
// Every available device, cpu first; and the parse of a TENSOR_DEVICE value.
std::vector<DeviceId> available_devices();
DeviceId parse_device(const std::string& spec);

}  // namespace tensor::dispatch
