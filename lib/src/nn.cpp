// tensor::nn's library side (lib/include/tensor/nn.hpp): converts handles and the
// rank-generic ConvArgs / PoolArgs (tensor/nn_options.hpp) straight to the dispatch forwarders.
#include "lib/core/nn_shape.hpp"
#include "tensor/nn.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>
#include <vector>

#include "dispatch/dispatch.hpp"
#include "lib/src/handles.hpp"

namespace tensor::detail {
using handles::give;
using handles::give2;
using handles::take;

Handle nn_conv(OpCode op, Handle&& x, Handle&& weight, Handle&& bias, const ConvArgs& a) {
  auto tx = take(x), tw = take(weight), tb = take(bias);
  return give(dispatch::conv(op, std::move(tx), std::move(tw), std::move(tb), a));
}
Handle nn_conv_backward(OpCode op, Handle&& a, Handle&& b, const Shape& target, const ConvArgs& args) {
  auto ta = take(a), tb = take(b);
  return give(dispatch::conv_backward(op, std::move(ta), std::move(tb), target, args));
}
Handle nn_conv_bias_backward(Handle&& dy) { return give(dispatch::conv_backward_bias(take(dy))); }
Handle nn_pool(OpCode op, Handle&& x, const PoolArgs& a) { return give(dispatch::pool(op, take(x), a)); }
std::pair<Handle, Handle> nn_max_pool_with_indices(OpCode op, Handle&& x, const PoolArgs& a) {
  return give2(dispatch::max_pool_with_indices(op, take(x), a));
}
Handle nn_max_pool_backward(Handle&& dy, Handle&& indices, const Shape& x_shape, const PoolArgs& a) {
  auto td = take(dy), ti = take(indices);
  return give(dispatch::max_pool_backward(std::move(td), std::move(ti), x_shape, a));
}
Handle nn_pool_backward(OpCode op, Handle&& dy, const Shape& x_shape, const PoolArgs& a) {
  return give(dispatch::pool_backward(op, take(dy), x_shape, a));
}
namespace {

// burn's Lanczos3 weights along one axis as a matrix [out, in]: for output o at source
// position p (align_corners: o (in - 1) / max(out - 1, 1); otherwise (o + 0.5) in / out -
// 0.5), taps floor(p) - 2 .. floor(p) + 3 inside [0, in) weighted by sinc(x) sinc(x / 3),
// x = p - tap, then divided by their sum. burn divides each output by the 2-D sum of
// wy wx, which is (sum wy)(sum wx): normalising each axis is the same.
Tensor<4> lanczos3_weights(std::size_t in, std::size_t out, bool align_corners, const Device& dev, DType dt) {
  auto kernel = [](double x) {
    if (x == 0.0) return 1.0;
    if (std::abs(x) >= 3.0) return 0.0;
    const double px = std::numbers::pi * x;
    return std::sin(px) * std::sin(px / 3.0) / (px * px / 3.0);
  };
  std::vector<double> w(out * in, 0.0);
  for (std::size_t o = 0; o < out; ++o) {
    const double p = align_corners ? static_cast<double>(in - 1) / static_cast<double>(std::max<std::size_t>(out - 1, 1)) *
                                         static_cast<double>(o)
                                   : (static_cast<double>(o) + 0.5) * static_cast<double>(in) / static_cast<double>(out) - 0.5;
    const double f = std::floor(p);
    double sum = 0.0;
    for (int k = -2; k <= 3; ++k) {
      const double t = f + k;
      if (t < 0.0 || t > static_cast<double>(in - 1)) continue;
      const double v = kernel(p - t);
      w[o * in + static_cast<std::size_t>(t)] += v;
      sum += v;
    }
    if (sum != 0.0)
      for (std::size_t i = 0; i < in; ++i) w[o * in + i] /= sum;
  }
  return Tensor<4>::from_data(TensorData::from<double>(w, Shape{1, 1, out, in}).convert(dt), dev);
}

}  // namespace

// Lanczos3 is separable and linear: Wh x Ww^T with the two weight matrices (and its
// transpose for the backward), composed from matmul, so every device and autodiff have it.
Handle nn_interpolate(Handle&& x, std::array<std::int64_t, 2> size, const nn::InterpolateOptions& o) {
  if (o.mode != nn::InterpolateMode::Lanczos3) return give(dispatch::interpolate(take(x), dispatch::InterpArgs{size, o}));
  const Tensor<4> t(x);
  const Shape out = core::interpolate_output_shape("interpolate", t.shape(), size);
  const Tensor<4> wh = lanczos3_weights(t.dims()[2], out[2], o.align_corners, t.device(), t.dtype());
  const Tensor<4> ww = lanczos3_weights(t.dims()[3], out[3], o.align_corners, t.device(), t.dtype());
  return detail::copy(wh.matmul(t).matmul(ww.swap_dims(2, 3)));
}
Handle nn_interpolate_backward(Handle&& dy, const Shape& x_shape, std::array<std::int64_t, 2> size,
                               const nn::InterpolateOptions& o) {
  if (o.mode != nn::InterpolateMode::Lanczos3)
    return give(dispatch::interpolate_backward(take(dy), x_shape, dispatch::InterpArgs{size, o}));
  const Tensor<4> g(dy);
  const Shape out = core::interpolate_output_shape("interpolate_backward", x_shape, size);
  if (!(g.shape() == out))
    throw ShapeError("[interpolate_backward] output_grad has the wrong shape; expected " + out.to_string() + "; got " +
                     g.shape().to_string());
  const Tensor<4> wh = lanczos3_weights(x_shape[2], out[2], o.align_corners, g.device(), g.dtype());
  const Tensor<4> ww = lanczos3_weights(x_shape[3], out[3], o.align_corners, g.device(), g.dtype());
  return detail::copy(wh.swap_dims(2, 3).matmul(g).matmul(ww));
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

// burn's attention_fallback: the reference composition of attention (nn_options.hpp's
// semantics), from matmul, softmax pieces and masks, on every device.
Handle nn_attention_fallback(Handle&& q, Handle&& k, Handle&& v, Handle&& mask, Handle&& bias,
                             const nn::AttentionModuleOptions& o) {
  const Tensor<4> tq(q), tk(k), tv(v);
  std::optional<Tensor<4, Bool>> tm;
  std::optional<Tensor<4>> tb;
  if (!mask.empty()) tm.emplace(mask);
  if (!bias.empty()) tb.emplace(bias);
  const char* op = "attention_fallback";
  if (o.scale && !std::isfinite(*o.scale))
    throw ShapeError("[attention_fallback] scale must be finite; expected a finite scale; got " + std::to_string(*o.scale));
  const Shape ms = tm ? tm->shape() : Shape{}, bs = tb ? tb->shape() : Shape{};
  core::attention_output_shape(op, tq.shape(), tk.shape(), tv.shape(), tm ? &ms : nullptr, tb ? &bs : nullptr, o);
  const std::size_t lq = tq.dims()[2], lk = tk.dims()[2], d = tq.dims()[3];
  const DType dt = tq.dtype();
  // The dtype's lowest finite value and smallest normal: a fully masked row stays finite and
  // sums to zero, so it gives 0, not NaN.
  const double lowest = dt == DType::F64 ? std::numeric_limits<double>::lowest()
                        : dt == DType::F16 ? -65504.0
                                           : static_cast<double>(std::numeric_limits<float>::lowest());
  const double tiny = dt == DType::F64 ? std::numeric_limits<double>::min()
                      : dt == DType::F16 ? 6.103515625e-05
                                         : static_cast<double>(std::numeric_limits<float>::min());
  const double scale = o.scale ? *o.scale : 1.0 / std::sqrt(static_cast<double>(d));
  Tensor<4> s = tq.matmul(tk.swap_dims(2, 3)) * scale;
  if (o.softcap) s = (s * (1.0 / *o.softcap)).tanh() * *o.softcap;
  const double ninf = -std::numeric_limits<double>::infinity();
  const auto full = [&] {
    const auto sd = s.dims();
    return std::array<std::int64_t, 4>{static_cast<std::int64_t>(sd[0]), static_cast<std::int64_t>(sd[1]),
                                       static_cast<std::int64_t>(sd[2]), static_cast<std::int64_t>(sd[3])};
  }();
  if (tm) s = s.mask_fill(tm->expand(full), Scalar(ninf));
  if (o.is_causal) {  // bottom-right aligned: query i sees keys j <= i + lk - lq
    std::vector<bool> above(lq * lk);
    for (std::size_t i = 0; i < lq; ++i)
      for (std::size_t j = 0; j < lk; ++j)
        above[i * lk + j] = static_cast<std::int64_t>(j) > static_cast<std::int64_t>(i + lk) - static_cast<std::int64_t>(lq);
    const auto m = Tensor<4, Bool>::from_data(TensorData::from<bool>(above, Shape{1, 1, lq, lk}), s.device());
    s = s.mask_fill(m.expand(full), Scalar(ninf));
  }
  if (tb) s = s + tb->expand(full);
  const Tensor<4> mx = s.max_dim(3).clamp_min(Scalar(lowest));
  const Tensor<4> e = (s - mx).exp();
  const Tensor<4> z = e.sum_dim(3).clamp_min(Scalar(tiny));
  return detail::copy((e / z).matmul(tv));
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
