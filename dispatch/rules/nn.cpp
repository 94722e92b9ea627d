// Forwarders: module ops: linear, batch_norm, unfold4d / fold4d, ctc_loss, deform_conv2d. Each validates its arguments, states the output metadata and runs
// the backend entry through the one invocation path (dispatch/forward.hpp).
#include "dispatch/forward.hpp"
#include "dispatch/quant.hpp"

namespace tensor::dispatch {
using namespace fwd;

namespace {
void check_eps(OpCode op, double eps) {
  if (!(eps >= 0.0) || std::isinf(eps))
    throw ShapeError(fmt::format("[{}] epsilon must be finite and not negative; expected eps >= 0; got {}", op_name(op), eps));
}
void check_int_operand(OpCode op, const DispatchTensor& first, const DispatchTensor& t, const char* what) {
  if (!t.prim) throw Error(fmt::format("[{}] expected a {} tensor; got an empty handle", op_name(op), what));
  if (t.kind != Kind::Int)
    throw DTypeError(fmt::format("[{}] {} must be an Int tensor; expected Int; got {}", op_name(op), what, kind_name(t.kind)));
  check_same_device(op, first, t);
}
void check_rank(OpCode op, const char* what, const Shape& s, std::size_t rank, const char* layout) {
  if (s.rank() != rank)
    throw ShapeError(fmt::format("[{}] {} has the wrong rank; expected rank {} {}; got {}", op_name(op), what, rank, layout,
                                 s.to_string()));
}
}  // namespace
namespace {
// The shapes of ctc_loss's inputs: log_probs [T, N, C], targets [N, S], lengths [N], blank in [0, C).
// The values (lengths, labels) are checked by the kernel, which reads them.
void check_ctc(OpCode op, const DispatchTensor& lp, const DispatchTensor& targets, const DispatchTensor& in_len,
               const DispatchTensor& tgt_len, std::int64_t blank) {
  check_module_first(op, lp, "log_probs");
  check_int_operand(op, lp, targets, "targets");
  check_int_operand(op, lp, in_len, "input_lengths");
  check_int_operand(op, lp, tgt_len, "target_lengths");
  check_rank(op, "log_probs", lp.shape(), 3, "[T, N, C]");
  check_rank(op, "targets", targets.shape(), 2, "[N, S]");
  const std::size_t n = lp.shape()[1], c = lp.shape()[2];
  if (targets.shape()[0] != n)
    throw ShapeError(fmt::format("[{}] targets' batch does not match log_probs [T, N, C]; expected [{}, S]; got {}",
                                 op_name(op), n, targets.shape().to_string()));
  check_same_shape(op, "input_lengths", in_len.shape(), Shape{n});
  check_same_shape(op, "target_lengths", tgt_len.shape(), Shape{n});
  if (blank < 0 || static_cast<std::size_t>(blank) >= c)
    throw IndexError(fmt::format("[{}] blank out of range; expected 0 <= blank < {} (the class count); got {}", op_name(op),
                                 c, blank));
}
}  // namespace
namespace {
Shape check_deform(OpCode op, const DispatchTensor& x, const DispatchTensor& offset, const DispatchTensor& weight,
                   const DispatchTensor& mask, const DispatchTensor& bias, const tensor::nn::DeformConvOptions<2>& o) {
  check_module_first(op, x, "x");
  check_operand(op, x, offset, "offset");
  check_operand(op, x, weight, "weight");
  if (mask.prim) check_operand(op, x, mask, "mask");
  if (bias.prim) check_operand(op, x, bias, "bias");
  check_one_float_dtype(op, {{"x", x}, {"offset", offset}, {"weight", weight}, {"mask", mask}, {"bias", bias}});
  check_rank(op, "x", x.shape(), 4, "[N, C_in, H, W]");
  check_rank(op, "weight", weight.shape(), 4, "[C_out, C_in / weight_groups, kh, kw]");
  check_rank(op, "offset", offset.shape(), 4, "[N, 2 * offset_groups * kh * kw, H_out, W_out]");
  if (mask.prim) check_rank(op, "mask", mask.shape(), 4, "[N, offset_groups * kh * kw, H_out, W_out]");
  return core::deform_conv2d_output_shape(op_name(op), x.shape(), offset.shape(), weight.shape(),
                                                shape_or_null(mask), shape_or_null(bias), o);
}
}  // namespace

using T = DispatchTensor;
using Deform = tensor::nn::DeformConvOptions<2>;

// Linear: x [..., d_in], weight [d_in, d_out] (burn's layout, the transpose of torch's),
// bias [d_out]? -> [..., d_out].
template <> struct fwd::Rule<Family::Linear> : FloatOut {
  struct Plan { Shape out; };
  static Plan check(OpCode op, const T& x, const T& weight, const T& bias) {
    check_module_first(op, x, "x");
    check_operand(op, x, weight, "weight");
    if (bias.prim) check_operand(op, x, bias, "bias");
    check_one_float_dtype(op, {{"x", x}, {"weight", weight}, {"bias", bias}});
    const Shape& s = x.shape();
    if (s.rank() < 1) throw ShapeError(fmt::format("[{}] x has no dims; expected [..., d_in]; got {}", op_name(op), s.to_string()));
    check_rank(op, "weight", weight.shape(), 2, "[d_in, d_out]");
    const std::size_t d_in = weight.shape()[0], d_out = weight.shape()[1];
    if (s[s.rank() - 1] != d_in)
      throw ShapeError(fmt::format("[{}] x's last dim does not match the weight [d_in, d_out]; expected [..., {}]; got x {} "
                                   "and weight {}",
                                   op_name(op), d_in, s.to_string(), weight.shape().to_string()));
    if (bias.prim) check_same_shape(op, "bias", bias.shape(), Shape{d_out});
    Shape out = s;
    out[out.rank() - 1] = d_out;
    check_alloc_shape(op, out, x.dtype());
    return {std::move(out)};
  }
  template <class Entry>
  [[gnu::always_inline]] static T run(OpCode op, Entry entry, const Plan&, T& x, T& weight, T& bias) {
    return {entry(op)(x.take(), weight.take(), bias.take()), Kind::Float};
  }
};

// BatchNorm (inference): x [N, C, ...]; gamma, beta, mean, variance [C] -> x's shape.
template <> struct fwd::Rule<Family::BatchNorm> : FloatOut {
  struct Plan { Shape out; };
  static Plan check(OpCode op, const T& x, const T& gamma, const T& beta, const T& mean, const T& variance, const double& eps) {
    check_module_first(op, x, "x");
    check_operand(op, x, gamma, "gamma");
    check_operand(op, x, beta, "beta");
    check_operand(op, x, mean, "mean");
    check_operand(op, x, variance, "variance");
    check_one_float_dtype(op, {{"x", x}, {"gamma", gamma}, {"beta", beta}, {"mean", mean}, {"variance", variance}});
    const Shape& s = x.shape();
    if (s.rank() < 2)
      throw ShapeError(fmt::format("[{}] x needs a channel dim; expected rank >= 2 [N, C, ...]; got {}", op_name(op),
                                   s.to_string()));
    const Shape want{s[1]};
    check_same_shape(op, "gamma", gamma.shape(), want);
    check_same_shape(op, "beta", beta.shape(), want);
    check_same_shape(op, "mean", mean.shape(), want);
    check_same_shape(op, "variance", variance.shape(), want);
    check_eps(op, eps);
    return {s};
  }
  static OpAttrs attrs(OpCode, const Plan&, const T&, const T&, const T&, const T&, const T&, const double& eps) {
    OpAttrs o;
    o.scalars[0] = Scalar(eps);
    return o;
  }
  template <class Entry>
  [[gnu::always_inline]] static T run(OpCode op, Entry entry, const Plan&, T& x, T& gamma, T& beta, T& mean, T& variance, const double& eps) {
    return {entry(op)(x.take(), gamma.take(), beta.take(), mean.take(), variance.take(), eps), Kind::Float};
  }
};

// Unfold4d (unfold4d and fold4d rows): the blocks of x [N, C, H, W], or their sum back.
template <> struct fwd::Rule<Family::Unfold4d> : FloatOut {
  struct Plan { Shape out; };
  static Plan check(OpCode op, const T& x, const FoldArgs& args) {
    check_module_first(op, x, "x");
    Shape out;
    if (op_info(op).folds) {  // fold4d: blocks back into an image
      out = core::fold4d_output_shape(op_name(op), x.shape(), args.output_size, args.kernel, args.options);
    } else {
      check_rank(op, "x", x.shape(), 4, "[N, C, H, W]");
      out = core::unfold4d_output_shape(op_name(op), x.shape(), args.kernel, args.options);
    }
    check_alloc_shape(op, out, x.dtype());
    return {std::move(out)};
  }
  static OpAttrs attrs(OpCode, const Plan&, const T&, const FoldArgs& args) { return options_attrs(&args); }
  template <class Entry>
  [[gnu::always_inline]] static T run(OpCode op, Entry entry, const Plan&, T& x, const FoldArgs& args) { return {entry(op)(x.take(), args), Kind::Float}; }
};

// CtcLoss: the per-sequence loss [N]; CtcLossBackward: the log_probs gradient.
template <> struct fwd::Rule<Family::CtcLoss> : FloatOut {
  struct Plan { Shape out; };
  static Plan check(OpCode op, const T& lp, const T& targets, const T& in_len, const T& tgt_len, const std::int64_t& blank) {
    check_ctc(op, lp, targets, in_len, tgt_len, blank);
    return {Shape{lp.shape()[1]}};
  }
  static OpAttrs attrs(OpCode, const Plan&, const T&, const T&, const T&, const T&, const std::int64_t& blank) {
    OpAttrs o;
    o.ints[0] = blank;
    return o;
  }
  template <class Entry>
  [[gnu::always_inline]] static T run(OpCode op, Entry entry, const Plan&, T& lp, T& targets, T& in_len, T& tgt_len, const std::int64_t& blank) {
    return {entry(op)(lp.take(), targets.take(), in_len.take(), tgt_len.take(), blank), Kind::Float};
  }
};
template <> struct fwd::Rule<Family::CtcLossBackward> : FloatOut {
  struct Plan { Shape out; };
  static Plan check(OpCode op, const T& lp, const T& targets, const T& in_len, const T& tgt_len, const T& dloss,
                    const std::int64_t& blank) {
    check_ctc(op, lp, targets, in_len, tgt_len, blank);
    check_operand(op, lp, dloss, "output gradient");
    check_one_float_dtype(op, {{"log_probs", lp}, {"output gradient", dloss}});
    check_same_shape(op, "output gradient", dloss.shape(), Shape{lp.shape()[1]});
    return {lp.shape()};
  }
  static OpAttrs attrs(OpCode, const Plan&, const T&, const T&, const T&, const T&, const T&, const std::int64_t& blank) {
    OpAttrs o;
    o.ints[0] = blank;
    return o;
  }
  template <class Entry>
  [[gnu::always_inline]] static T run(OpCode op, Entry entry, const Plan&, T& lp, T& targets, T& in_len, T& tgt_len, T& dloss,
               const std::int64_t& blank) {
    return {entry(op)(lp.take(), targets.take(), in_len.take(), tgt_len.take(), dloss.take(), blank), Kind::Float};
  }
};

template <> struct fwd::Rule<Family::DeformConv> : FloatOut {
  struct Plan { Shape out; };
  static Plan check(OpCode op, const T& x, const T& offset, const T& weight, const T& mask, const T& bias, const Deform& o) {
    Shape out = check_deform(op, x, offset, weight, mask, bias, o);
    check_alloc_shape(op, out, x.dtype());
    return {std::move(out)};
  }
  static OpAttrs attrs(OpCode, const Plan&, const T&, const T&, const T&, const T&, const T&, const Deform& o) {
    return options_attrs(&o);
  }
  template <class Entry>
  [[gnu::always_inline]] static T run(OpCode op, Entry entry, const Plan&, T& x, T& offset, T& weight, T& mask, T& bias, const Deform& o) {
    return {entry(op)(x.take(), offset.take(), weight.take(), mask.take(), bias.take(), o), Kind::Float};
  }
};

// DeformConvBackward: the gradients of x, offset, weight, mask and bias (absent ones empty).
template <> struct fwd::Rule<Family::DeformConvBackward> : FloatOut {
  struct Plan { Shape out; };
  static Plan check(OpCode op, const T& x, const T& offset, const T& weight, const T& mask, const T& dy, const bool&,
                    const Deform& o) {
    const Shape out = check_deform(op, x, offset, weight, mask, DispatchTensor(), o);
    check_operand(op, x, dy, "output gradient");
    check_one_float_dtype(op, {{"x", x}, {"output gradient", dy}});
    check_same_shape(op, "output gradient", dy.shape(), out);
    return {x.shape()};
  }
  static OpAttrs attrs(OpCode, const Plan&, const T&, const T&, const T&, const T&, const T&, const bool&, const Deform& o) {
    return options_attrs(&o);
  }
  template <class Entry>
  [[gnu::always_inline]] static std::vector<T> run(OpCode op, Entry entry, const Plan&, T& x, T& offset, T& weight, T& mask, T& dy,
                            const bool& with_bias, const Deform& o) {
    std::vector<Prim> g = entry(op)(x.take(), offset.take(), weight.take(), mask.take(), dy.take(), with_bias, o);
    std::vector<T> r(5);
    for (std::size_t i = 0; i < g.size() && i < r.size(); ++i)
      if (g[i]) r[i] = T(std::move(g[i]), Kind::Float);
    return r;
  }
};

DispatchTensor linear(DispatchTensor x, DispatchTensor weight, DispatchTensor bias) {
  if (quant::is_quantized(x) || quant::is_quantized(weight) || quant::is_quantized(bias)) [[unlikely]]
    return quant::linear_quantized(std::move(x), std::move(weight), std::move(bias));
  return forward<Family::Linear>(OpCode::linear, x, weight, bias);
}
DispatchTensor batch_norm(DispatchTensor x, DispatchTensor gamma, DispatchTensor beta, DispatchTensor mean,
                          DispatchTensor variance, double eps) {
  return forward<Family::BatchNorm>(OpCode::batch_norm, x, gamma, beta, mean, variance, eps);
}
DispatchTensor unfold4d(DispatchTensor x, const FoldArgs& args) { return forward<Family::Unfold4d>(OpCode::unfold4d, x, args); }
DispatchTensor fold4d(DispatchTensor x, const FoldArgs& args) { return forward<Family::Unfold4d>(OpCode::fold4d, x, args); }
DispatchTensor ctc_loss(DispatchTensor log_probs, DispatchTensor targets, DispatchTensor input_lengths,
                        DispatchTensor target_lengths, std::int64_t blank) {
  return forward<Family::CtcLoss>(OpCode::ctc_loss, log_probs, targets, input_lengths, target_lengths, blank);
}
DispatchTensor ctc_loss_backward(DispatchTensor log_probs, DispatchTensor targets, DispatchTensor input_lengths,
                                 DispatchTensor target_lengths, DispatchTensor dloss, std::int64_t blank) {
  return forward<Family::CtcLossBackward>(OpCode::ctc_loss_backward, log_probs, targets, input_lengths, target_lengths, dloss,
                                          blank);
}
DispatchTensor deform_conv2d(DispatchTensor x, DispatchTensor offset, DispatchTensor weight, DispatchTensor mask,
                             DispatchTensor bias, const tensor::nn::DeformConvOptions<2>& options) {
  return forward<Family::DeformConv>(OpCode::deform_conv2d, x, offset, weight, mask, bias, options);
}
std::vector<DispatchTensor> deform_conv2d_backward(DispatchTensor x, DispatchTensor offset, DispatchTensor weight,
                                                   DispatchTensor mask, DispatchTensor dy, bool with_bias,
                                                   const tensor::nn::DeformConvOptions<2>& options) {
  return forward<Family::DeformConvBackward>(OpCode::deform_conv2d_backward, x, offset, weight, mask, dy, with_bias, options);
}

}  // namespace tensor::dispatch
