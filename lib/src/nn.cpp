// tensor::nn's library side (lib/include/tensor/nn.hpp): converts handles and the
// rank-generic NnArgs to the dispatch forwarders' arguments.
#include "tensor/nn.hpp"

#include "dispatch/dispatch.hpp"
#include "lib/src/handles.hpp"

namespace tensor::detail {
namespace {

using handles::give;
using handles::give2;
using handles::take;

dispatch::ConvArgs conv_of(const NnArgs& a) {
  dispatch::ConvArgs c;
  c.rank = a.rank;
  c.stride = a.stride;
  c.padding = a.padding;
  c.dilation = a.dilation;
  c.padding_out = a.padding_out;
  c.groups = a.groups;
  return c;
}
dispatch::PoolArgs pool_of(const NnArgs& a) {
  dispatch::PoolArgs p;
  p.rank = a.rank;
  p.kernel = a.kernel;
  p.stride = a.stride;
  p.padding = a.padding;
  p.dilation = a.dilation;
  p.output_size = a.output_size;
  p.ceil_mode = a.ceil_mode;
  p.count_include_pad = a.count_include_pad;
  return p;
}

}  // namespace

Handle nn_conv(OpCode op, Handle&& x, Handle&& weight, Handle&& bias, const NnArgs& a) {
  auto tx = take(x), tw = take(weight), tb = take(bias);
  return give(dispatch::conv(op, std::move(tx), std::move(tw), std::move(tb), conv_of(a)));
}
Handle nn_conv_backward(OpCode op, Handle&& a, Handle&& b, const Shape& target, const NnArgs& args) {
  auto ta = take(a), tb = take(b);
  return give(dispatch::conv_backward(op, std::move(ta), std::move(tb), target, conv_of(args)));
}
Handle nn_conv_bias_backward(Handle&& dy) { return give(dispatch::conv_backward_bias(take(dy))); }
Handle nn_pool(OpCode op, Handle&& x, const NnArgs& a) { return give(dispatch::pool(op, take(x), pool_of(a))); }
std::pair<Handle, Handle> nn_max_pool_with_indices(OpCode op, Handle&& x, const NnArgs& a) {
  return give2(dispatch::max_pool_with_indices(op, take(x), pool_of(a)));
}
Handle nn_max_pool_backward(Handle&& dy, Handle&& indices, const Shape& x_shape, const NnArgs& a) {
  auto td = take(dy), ti = take(indices);
  return give(dispatch::max_pool_backward(std::move(td), std::move(ti), x_shape, pool_of(a)));
}
Handle nn_pool_backward(OpCode op, Handle&& dy, const Shape& x_shape, const NnArgs& a) {
  return give(dispatch::pool_backward(op, take(dy), x_shape, pool_of(a)));
}
Handle nn_interpolate(Handle&& x, std::array<std::int64_t, 2> size, const nn::InterpolateOptions& o) {
  return give(dispatch::interpolate(take(x), dispatch::InterpArgs{size, o}));
}
Handle nn_interpolate_backward(Handle&& dy, const Shape& x_shape, std::array<std::int64_t, 2> size,
                               const nn::InterpolateOptions& o) {
  return give(dispatch::interpolate_backward(take(dy), x_shape, dispatch::InterpArgs{size, o}));
}
Handle nn_embedding(Handle&& weights, Handle&& indices) {
  auto tw = take(weights), ti = take(indices);
  return give(dispatch::embedding(std::move(tw), std::move(ti)));
}
Handle nn_embedding_backward(Handle&& dy, Handle&& indices, const Shape& weight_shape) {
  auto td = take(dy), ti = take(indices);
  return give(dispatch::embedding_backward(std::move(td), std::move(ti), weight_shape));
}
Handle nn_layer_norm(Handle&& x, Handle&& gamma, Handle&& beta, double eps) {
  auto tx = take(x), tg = take(gamma), tb = take(beta);
  return give(dispatch::layer_norm(std::move(tx), std::move(tg), std::move(tb), eps));
}
std::pair<Handle, Handle> nn_rfft(Handle&& signal, std::int64_t dim, std::optional<std::size_t> n) {
  auto tx = take(signal);
  if (n && *n == 0) throw ShapeError("[rfft] expected a signal length n >= 1; got n = 0");
  return give2(dispatch::rfft(std::move(tx), dim, n.value_or(0)));
}
Handle nn_irfft(Handle&& re, Handle&& im, std::int64_t dim, std::optional<std::size_t> n) {
  auto tr = take(re), ti = take(im);
  if (n && *n == 0) throw ShapeError("[irfft] expected an output length n >= 1; got n = 0");
  return give(dispatch::irfft(std::move(tr), std::move(ti), dim, n.value_or(0)));
}
Handle nn_attention(Handle&& q, Handle&& k, Handle&& v, Handle&& mask, Handle&& bias, const nn::AttentionModuleOptions& o) {
  auto tq = take(q), tk = take(k), tv = take(v), tm = take(mask), tb = take(bias);
  return give(dispatch::attention(std::move(tq), std::move(tk), std::move(tv), std::move(tm), std::move(tb), o));
}

Handle nn_linear(Handle&& x, Handle&& weight, Handle&& bias) {
  auto tx = take(x), tw = take(weight), tb = take(bias);
  return give(dispatch::linear(std::move(tx), std::move(tw), std::move(tb)));
}
Handle nn_batch_norm(Handle&& x, Handle&& gamma, Handle&& beta, Handle&& mean, Handle&& variance, double eps) {
  auto tx = take(x), tg = take(gamma), tb = take(beta), tm = take(mean), tv = take(variance);
  return give(dispatch::batch_norm(std::move(tx), std::move(tg), std::move(tb), std::move(tm), std::move(tv), eps));
}
Handle nn_unfold4d(Handle&& x, std::array<std::int64_t, 2> kernel, const nn::UnfoldOptions& o) {
  dispatch::FoldArgs a;
  a.kernel = kernel;
  a.options = o;
  return give(dispatch::unfold4d(take(x), a));
}
Handle nn_fold4d(Handle&& x, std::array<std::int64_t, 2> output_size, std::array<std::int64_t, 2> kernel,
                 const nn::UnfoldOptions& o) {
  dispatch::FoldArgs a;
  a.kernel = kernel;
  a.output_size = output_size;
  a.options = o;
  return give(dispatch::fold4d(take(x), a));
}
Handle nn_ctc_loss(Handle&& log_probs, Handle&& targets, Handle&& input_lengths, Handle&& target_lengths,
                   std::int64_t blank) {
  auto tl = take(log_probs), tt = take(targets), ti = take(input_lengths), tn = take(target_lengths);
  return give(dispatch::ctc_loss(std::move(tl), std::move(tt), std::move(ti), std::move(tn), blank));
}
Handle nn_ctc_loss_backward(Handle&& log_probs, Handle&& targets, Handle&& input_lengths, Handle&& target_lengths,
                            Handle&& dloss, std::int64_t blank) {
  auto tl = take(log_probs), tt = take(targets), ti = take(input_lengths), tn = take(target_lengths), td = take(dloss);
  return give(
      dispatch::ctc_loss_backward(std::move(tl), std::move(tt), std::move(ti), std::move(tn), std::move(td), blank));
}
Handle nn_deform_conv2d(Handle&& x, Handle&& offset, Handle&& weight, Handle&& mask, Handle&& bias,
                        const nn::DeformConvOptions<2>& o) {
  auto tx = take(x), to = take(offset), tw = take(weight), tm = take(mask), tb = take(bias);
  return give(dispatch::deform_conv2d(std::move(tx), std::move(to), std::move(tw), std::move(tm), std::move(tb), o));
}
std::array<Handle, 5> nn_deform_conv2d_backward(Handle&& x, Handle&& offset, Handle&& weight, Handle&& mask,
                                                Handle&& dy, bool with_bias, const nn::DeformConvOptions<2>& o) {
  auto tx = take(x), to = take(offset), tw = take(weight), tm = take(mask), td = take(dy);
  std::vector<dispatch::DispatchTensor> g = dispatch::deform_conv2d_backward(
      std::move(tx), std::move(to), std::move(tw), std::move(tm), std::move(td), with_bias, o);
  std::array<Handle, 5> out{};
  for (std::size_t i = 0; i < g.size() && i < out.size(); ++i)
    if (g[i].prim) out[i] = give(std::move(g[i]));
  return out;
}

}  // namespace tensor::detail
