// Defaults that run the CPU backend's kernel through the host (the op table's host_trip
// rows): each tensor argument is read back and uploaded to the CPU device, the CPU entry
// runs, and the result is uploaded to the calling device. The only file of dispatch/ that
// names the CPU backend: a device without a kernel for these rows (conv3d, the transposed
// convolutions, max-pool indices, interpolate, attention, adaptive_avg_pool3d, ctc_loss,
// deform_conv2d) still answers them, slowly, rather than refusing.
#include "dispatch/defaults/compose.hpp"

namespace tensor::dispatch::defaults {
namespace {

// Host trip: each tensor argument is read back and uploaded to the CPU, the CPU
// backend's entry runs, and the result is uploaded to `d`.
constexpr DeviceId kCpuDev{kCpuDeviceType, 0};
Prim to_cpu(Prim p) {
  if (!p || p->device().type_id == kCpuDeviceType) return p;
  return call<Family::FromData>(OpCode::from_data, kCpuDev, read_prim(std::move(p)), kCpuDev);
}
Prim from_cpu(Prim p, DeviceId d) { return upload(read_prim(std::move(p)), d); }
template <class A>
decltype(auto) lift(A&& a) {
  if constexpr (std::is_same_v<std::decay_t<A>, Prim>) return to_cpu(std::forward<A>(a));
  else return std::forward<A>(a);
}
template <Family F, class... A>
auto on_cpu(OpCode op, DeviceId d, A&&... args) {
  const Backend& cpu = Registry::instance().get(kCpuDeviceType);
  auto fn = cpu.get<F>(op);
  if (!fn || d.type_id == kCpuDeviceType) throw_not_implemented(op, backend_of(d));
  auto r = fn(lift(std::forward<A>(args))...);
  if constexpr (std::is_same_v<decltype(r), PrimPair>) return PrimPair{from_cpu(std::move(r.first), d), from_cpu(std::move(r.second), d)};
  else return from_cpu(std::move(r), d);
}

template <OpCode op>
Prim d_conv_host(Prim x, Prim w, Prim bias, const ConvArgs& a) {
  const DeviceId d = x->device();
  return on_cpu<Family::Conv>(op, d, std::move(x), std::move(w), std::move(bias), a);
}
template <OpCode op>
Prim d_conv_backward_host(Prim a, Prim b, const Shape& target, const ConvArgs& args) {
  const DeviceId d = a->device();
  return on_cpu<Family::ConvBackward>(op, d, std::move(a), std::move(b), target, args);
}
template <OpCode op>
PrimPair d_max_pool_wi_host(Prim x, const PoolArgs& a, DType it) {
  const DeviceId d = x->device();
  return on_cpu<Family::PoolWithIndices>(op, d, std::move(x), a, it);
}
Prim d_interpolate(Prim x, const InterpArgs& a) {
  const DeviceId d = x->device();
  return on_cpu<Family::Interpolate>(OpCode::interpolate, d, std::move(x), a);
}
Prim d_interpolate_backward(Prim dy, const Shape& x_shape, const InterpArgs& a) {
  const DeviceId d = dy->device();
  return on_cpu<Family::InterpolateBackward>(OpCode::interpolate_backward, d, std::move(dy), x_shape, a);
}
Prim d_attention(Prim q, Prim k, Prim v, Prim mask, Prim bias, const tensor::nn::AttentionModuleOptions& o) {
  const DeviceId d = q->device();
  return on_cpu<Family::Attention>(OpCode::attention, d, std::move(q), std::move(k), std::move(v), std::move(mask),
                                   std::move(bias), o);
}

// adaptive_avg_pool3d, ctc_loss and deform_conv2d run the CPU kernels through the host.
Prim d_adaptive_avg_pool3d(Prim x, const PoolArgs& a) {
  const DeviceId d = x->device();
  return on_cpu<Family::Pool>(OpCode::adaptive_avg_pool3d, d, std::move(x), a);
}
Prim d_ctc_loss(Prim lp, Prim targets, Prim in_len, Prim tgt_len, std::int64_t blank) {
  const DeviceId d = lp->device();
  return on_cpu<Family::CtcLoss>(OpCode::ctc_loss, d, std::move(lp), std::move(targets), std::move(in_len),
                                 std::move(tgt_len), blank);
}
Prim d_ctc_loss_backward(Prim lp, Prim targets, Prim in_len, Prim tgt_len, Prim dloss, std::int64_t blank) {
  const DeviceId d = lp->device();
  return on_cpu<Family::CtcLossBackward>(OpCode::ctc_loss_backward, d, std::move(lp), std::move(targets),
                                         std::move(in_len), std::move(tgt_len), std::move(dloss), blank);
}
Prim d_deform_conv2d(Prim x, Prim offset, Prim w, Prim mask, Prim bias, const tensor::nn::DeformConvOptions<2>& o) {
  const DeviceId d = x->device();
  return on_cpu<Family::DeformConv>(OpCode::deform_conv2d, d, std::move(x), std::move(offset), std::move(w),
                                    std::move(mask), std::move(bias), o);
}
std::vector<Prim> d_deform_conv2d_backward(Prim x, Prim offset, Prim w, Prim mask, Prim dy, bool with_bias,
                                           const tensor::nn::DeformConvOptions<2>& o) {
  const DeviceId d = x->device();
  const Backend& cpu = Registry::instance().get(kCpuDeviceType);
  auto fn = cpu.get<Family::DeformConvBackward>(OpCode::deform_conv2d_backward);
  if (!fn || d.type_id == kCpuDeviceType) throw_not_implemented(OpCode::deform_conv2d_backward, backend_of(d));
  std::vector<Prim> r = fn(to_cpu(std::move(x)), to_cpu(std::move(offset)), to_cpu(std::move(w)), to_cpu(std::move(mask)),
                           to_cpu(std::move(dy)), with_bias, o);
  for (Prim& p : r)
    if (p) p = from_cpu(std::move(p), d);
  return r;
}


}  // namespace

Prim host_conv_backward(OpCode op, Prim a, Prim b, const Shape& target, const ConvArgs& args) {
  const DeviceId d = a->device();
  return on_cpu<Family::ConvBackward>(op, d, std::move(a), std::move(b), target, args);
}

TENSOR_DEFAULT(OpCode, conv3d, d_conv_host<OpCode::conv3d>)
TENSOR_DEFAULT(OpCode, conv_transpose1d, d_conv_host<OpCode::conv_transpose1d>)
TENSOR_DEFAULT(OpCode, conv_transpose2d, d_conv_host<OpCode::conv_transpose2d>)
TENSOR_DEFAULT(OpCode, conv_transpose3d, d_conv_host<OpCode::conv_transpose3d>)
TENSOR_DEFAULT(OpCode, conv_transpose_x_backward, d_conv_backward_host<OpCode::conv_transpose_x_backward>)
TENSOR_DEFAULT(OpCode, conv_transpose_weight_backward, d_conv_backward_host<OpCode::conv_transpose_weight_backward>)
TENSOR_DEFAULT(OpCode, max_pool1d_with_indices, d_max_pool_wi_host<OpCode::max_pool1d_with_indices>)
TENSOR_DEFAULT(OpCode, max_pool2d_with_indices, d_max_pool_wi_host<OpCode::max_pool2d_with_indices>)
TENSOR_DEFAULT(OpCode, interpolate, d_interpolate)
TENSOR_DEFAULT(OpCode, interpolate_backward, d_interpolate_backward)
TENSOR_DEFAULT(OpCode, attention, d_attention)
TENSOR_DEFAULT(OpCode, adaptive_avg_pool3d, d_adaptive_avg_pool3d)
TENSOR_DEFAULT(OpCode, ctc_loss, d_ctc_loss)
TENSOR_DEFAULT(OpCode, ctc_loss_backward, d_ctc_loss_backward)
TENSOR_DEFAULT(OpCode, deform_conv2d, d_deform_conv2d)
TENSOR_DEFAULT(OpCode, deform_conv2d_backward, d_deform_conv2d_backward)

}  // namespace tensor::dispatch::defaults
