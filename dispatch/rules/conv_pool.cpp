// Forwarders: module ops: convolution, pooling, interpolation, embedding, normalisation, attention. Each validates its arguments, states the output metadata and runs
// the backend entry through the one invocation path (dispatch/forward.hpp).
#include "dispatch/forward.hpp"
#include "dispatch/quant.hpp"

namespace tensor::dispatch {
using namespace fwd;

// ---- module ops (Float only) ---------------------------------------------------------

namespace {

// The forward output shape of a conv (transpose) of rank args.rank: validates every option.
Shape conv_out_shape(OpCode op, bool transpose, const ConvArgs& a, const Shape& x, const Shape& w, const Shape* bias) {
  const std::string_view name = op_name(op);
  if (a.rank < 1 || a.rank > 3)
    throw ShapeError(fmt::format("[{}] convolution rank out of range; expected 1, 2 or 3; got {}", name, a.rank));
  return transpose ? core::conv_transpose_output_shape(name, x, w, a, bias) : core::conv_output_shape(name, x, w, a, bias);
}

}  // namespace

using T = DispatchTensor;
using Attn = tensor::nn::AttentionModuleOptions;

// Conv: x [N, C, *S], weight, bias?; the row's spatial rank and transposition; every
// option checked by the output-shape rule.
template <> struct fwd::Rule<Family::Conv> : FloatOut {
  struct Plan { ConvArgs a; Shape out; };
  static Plan check(OpCode op, const T& x, const T& weight, const T& bias, const ConvArgs& args) {
    check_module_first(op, x, "x");
    check_operand(op, x, weight, "weight");
    if (bias.prim) check_operand(op, x, bias, "bias");
    check_one_float_dtype(op, {{"x", x}, {"weight", weight}, {"bias", bias}});
    const ConvArgs a = core::normalized(args, op_info(op).spatial);
    Shape out = conv_out_shape(op, op_info(op).transposed, a, x.shape(), weight.shape(), shape_or_null(bias));
    check_alloc_shape(op, out, x.dtype());
    return {a, std::move(out)};
  }
  static OpAttrs attrs(OpCode, const Plan& p, const T&, const T&, const T&, const ConvArgs&) { return options_attrs(&p.a); }
  template <class Entry>
  [[gnu::always_inline]] static T run(OpCode op, Entry entry, const Plan& p, T& x, T& weight, T& bias, const ConvArgs&) {
    return {entry(op)(x.take(), weight.take(), bias.take(), p.a), Kind::Float};
  }
};

// ConvBackward: a, b are (dy, weight) for the x gradient, (x, dy) for the weight gradient
// (the row's grad_of); `target` is the shape of the gradient (x's or weight's).
template <> struct fwd::Rule<Family::ConvBackward> : FloatOut {
  struct Plan { ConvArgs c; Shape out; };
  static Plan check(OpCode op, const T& a, const T& b, const Shape& target, const ConvArgs& args) {
    const bool for_x = op_info(op).grad_of == GradOf::Input;
    check_module_first(op, a, for_x ? "output gradient" : "x");
    check_operand(op, a, b, for_x ? "weight" : "output gradient");
    check_one_float_dtype(op, {{for_x ? "output gradient" : "x", a}, {for_x ? "weight" : "output gradient", b}});
    const ConvArgs c = core::normalized(args, args.rank);
    const Shape& x = for_x ? target : a.shape();
    const Shape& w = for_x ? b.shape() : target;
    const Shape& dy = for_x ? a.shape() : b.shape();
    check_same_shape(op, "output gradient", dy, conv_out_shape(op, op_info(op).transposed, c, x, w, nullptr));
    check_alloc_shape(op, target, a.dtype());
    return {c, target};
  }
  static OpAttrs attrs(OpCode, const Plan& p, const T&, const T&, const Shape& target, const ConvArgs&) {
    return options_attrs(&p.c, &target);
  }
  template <class Entry>
  [[gnu::always_inline]] static T run(OpCode op, Entry entry, const Plan& p, T& a, T& b, const Shape& target, const ConvArgs&) {
    return {entry(op)(a.take(), b.take(), target, p.c), Kind::Float};
  }
};

template <> struct fwd::Rule<Family::ConvBiasBackward> : FloatOut {
  struct Plan { Shape out; };
  static Plan check(OpCode op, const T& dy) {
    check_module_first(op, dy, "output gradient");
    const Shape& s = dy.shape();
    if (s.rank() < 3 || s.rank() > 5)
      throw ShapeError(fmt::format("[{}] output gradient has the wrong rank; expected [N, C, *spatial] with 1 to 3 spatial "
                                   "dims; got {}",
                                   op_name(op), s.to_string()));
    return {Shape{s[1]}};
  }
  template <class Entry>
  [[gnu::always_inline]] static T run(OpCode op, Entry entry, const Plan&, T& dy) { return {entry(op)(dy.take()), Kind::Float}; }
};

DispatchTensor conv(OpCode op, DispatchTensor x, DispatchTensor weight, DispatchTensor bias, const ConvArgs& args) {
  if (quant::is_quantized(x) || quant::is_quantized(weight) || quant::is_quantized(bias)) [[unlikely]]
    return quant::conv_quantized(op, std::move(x), std::move(weight), std::move(bias), args);
  return forward<Family::Conv>(op, x, weight, bias, args);
}
DispatchTensor conv_backward(OpCode op, DispatchTensor a, DispatchTensor b, const Shape& target, const ConvArgs& args) {
  return forward<Family::ConvBackward>(op, a, b, target, args);
}
DispatchTensor conv_backward_x(DispatchTensor dy, DispatchTensor weight, const Shape& x_shape, const ConvArgs& args) {
  return forward<Family::ConvBackward>(OpCode::conv_x_backward, dy, weight, x_shape, args);
}
DispatchTensor conv_backward_weight(DispatchTensor x, DispatchTensor dy, const Shape& weight_shape, const ConvArgs& args) {
  return forward<Family::ConvBackward>(OpCode::conv_weight_backward, x, dy, weight_shape, args);
}
DispatchTensor conv_transpose_backward_x(DispatchTensor dy, DispatchTensor weight, const Shape& x_shape,
                                         const ConvArgs& args) {
  return forward<Family::ConvBackward>(OpCode::conv_transpose_x_backward, dy, weight, x_shape, args);
}
DispatchTensor conv_transpose_backward_weight(DispatchTensor x, DispatchTensor dy, const Shape& weight_shape,
                                              const ConvArgs& args) {
  return forward<Family::ConvBackward>(OpCode::conv_transpose_weight_backward, x, dy, weight_shape, args);
}
DispatchTensor conv_backward_bias(DispatchTensor dy) { return forward<Family::ConvBiasBackward>(OpCode::conv_bias_backward, dy); }

namespace {

// kind: the row's window rule (op table), whatever the rank.
Shape pool_out_shape(OpCode op, Window kind, const PoolArgs& a, const Shape& x) {
  if (!(a.rank >= 1 && (a.rank <= 2 || (a.rank == 3 && kind == Window::AdaptiveAvg))))
    throw ShapeError(fmt::format("[{}] pooling rank out of range; expected 1 or 2 (3 for adaptive average pooling); got {}",
                                 op_name(op), a.rank));
  return core::pool_output_shape(op_name(op), x, a, kind);
}

}  // namespace

// Pool: the row's spatial rank and window rule.
template <> struct fwd::Rule<Family::Pool> : FloatOut {
  struct Plan { PoolArgs a; Shape out; };
  static Plan check(OpCode op, const T& x, const PoolArgs& args) {
    check_module_first(op, x, "x");
    const PoolArgs a = core::normalized(args, op_info(op).spatial);
    Shape out = pool_out_shape(op, op_info(op).window, a, x.shape());
    check_alloc_shape(op, out, x.dtype());
    return {a, std::move(out)};
  }
  static OpAttrs attrs(OpCode, const Plan& p, const T&, const PoolArgs&) { return options_attrs(&p.a); }
  template <class Entry>
  [[gnu::always_inline]] static T run(OpCode op, Entry entry, const Plan& p, T& x, const PoolArgs&) { return {entry(op)(x.take(), p.a), Kind::Float}; }
};

template <> struct fwd::Rule<Family::PoolWithIndices> : FloatOut {
  struct Plan { PoolArgs a; Shape out; DType it; };
  static Plan check(OpCode op, const T& x, const PoolArgs& args) {
    check_module_first(op, x, "x");
    const PoolArgs a = core::normalized(args, op_info(op).spatial);
    Shape out = pool_out_shape(op, op_info(op).window, a, x.shape());
    check_alloc_shape(op, out, x.dtype());
    return {a, std::move(out), int_out(x.device)};
  }
  static OpAttrs attrs(OpCode, const Plan& p, const T&, const PoolArgs&) {
    OpAttrs o = options_attrs(&p.a);
    o.dtype = p.it;
    return o;
  }
  template <class Entry>
  [[gnu::always_inline]] static std::pair<T, T> run(OpCode op, Entry entry, const Plan& p, T& x, const PoolArgs&) {
    auto [v, i] = entry(op)(x.take(), p.a, p.it);
    return {T(std::move(v), Kind::Float), T(std::move(i), Kind::Int)};
  }
};

// PoolBackward (avg_pool_backward / adaptive_avg_pool_backward): dy [N, C, *out] -> dx of x_shape.
template <> struct fwd::Rule<Family::PoolBackward> : FloatOut {
  struct Plan { PoolArgs a; Shape out; };
  static Plan check(OpCode op, const T& dy, const Shape& x_shape, const PoolArgs& args) {
    check_module_first(op, dy, "output gradient");
    const PoolArgs a = core::normalized(args, args.rank);
    check_same_shape(op, "output gradient", dy.shape(), pool_out_shape(op, op_info(op).window, a, x_shape));
    check_alloc_shape(op, x_shape, dy.dtype());
    return {a, x_shape};
  }
  static OpAttrs attrs(OpCode, const Plan& p, const T&, const Shape& x_shape, const PoolArgs&) {
    return options_attrs(&p.a, &x_shape);
  }
  template <class Entry>
  [[gnu::always_inline]] static T run(OpCode op, Entry entry, const Plan& p, T& dy, const Shape& x_shape, const PoolArgs&) {
    return {entry(op)(dy.take(), x_shape, p.a), Kind::Float};
  }
};

template <> struct fwd::Rule<Family::MaxPoolBackward> : FloatOut {
  struct Plan { PoolArgs a; Shape out; };
  static Plan check(OpCode op, const T& dy, const T& indices, const Shape& x_shape, const PoolArgs& args) {
    check_module_first(op, dy, "output gradient");
    check_indices(op, dy, indices);
    const PoolArgs a = core::normalized(args, args.rank);
    const Shape out = pool_out_shape(op, op_info(op).window, a, x_shape);
    check_same_shape(op, "output gradient", dy.shape(), out);
    check_same_shape(op, "indices", indices.shape(), out);
    check_alloc_shape(op, x_shape, dy.dtype());
    return {a, x_shape};
  }
  static OpAttrs attrs(OpCode, const Plan& p, const T&, const T&, const Shape& x_shape, const PoolArgs&) {
    return options_attrs(&p.a, &x_shape);
  }
  template <class Entry>
  [[gnu::always_inline]] static T run(OpCode op, Entry entry, const Plan& p, T& dy, T& indices, const Shape& x_shape, const PoolArgs&) {
    return {entry(op)(dy.take(), indices.take(), x_shape, p.a), Kind::Float};
  }
};

namespace {
void check_interp_mode(OpCode op, const InterpArgs& a) {
  check_enum(op, "interpolate mode", a.options.mode, tensor::nn::InterpolateMode::Bicubic,
             "Nearest, NearestExact, Bilinear, Bicubic (Lanczos3 is composed above dispatch)");
}
// Embedding indices: Int [B, L] (any rank >= 1 is accepted: the output appends d).
void check_embedding_indices(OpCode op, const DispatchTensor& w, const DispatchTensor& idx) {
  check_indices(op, w, idx);
  if (idx.shape().rank() < 1)
    throw ShapeError(fmt::format("[{}] indices must have rank >= 1; expected [B, L]; got {}", op_name(op),
                                 idx.shape().to_string()));
}
Shape embedding_out(const Shape& idx, std::size_t d) {
  Shape out = idx;
  out.push_back(d);
  return out;
}
}  // namespace

template <> struct fwd::Rule<Family::Interpolate> : FloatOut {
  struct Plan { Shape out; };
  static Plan check(OpCode op, const T& x, const InterpArgs& args) {
    check_module_first(op, x, "x");
    check_interp_mode(op, args);
    Shape out = core::interpolate_output_shape(op_name(op), x.shape(), args.size);
    check_alloc_shape(op, out, x.dtype());
    return {std::move(out)};
  }
  static OpAttrs attrs(OpCode, const Plan&, const T&, const InterpArgs& args) { return options_attrs(&args); }
  template <class Entry>
  [[gnu::always_inline]] static T run(OpCode op, Entry entry, const Plan&, T& x, const InterpArgs& args) { return {entry(op)(x.take(), args), Kind::Float}; }
};

template <> struct fwd::Rule<Family::InterpolateBackward> : FloatOut {
  struct Plan { Shape out; };
  static Plan check(OpCode op, const T& dy, const Shape& x_shape, const InterpArgs& args) {
    check_module_first(op, dy, "output gradient");
    check_interp_mode(op, args);
    check_same_shape(op, "output gradient", dy.shape(), core::interpolate_output_shape(op_name(op), x_shape, args.size));
    check_alloc_shape(op, x_shape, dy.dtype());
    return {x_shape};
  }
  static OpAttrs attrs(OpCode, const Plan&, const T&, const Shape& x_shape, const InterpArgs& args) {
    return options_attrs(&args, &x_shape);
  }
  template <class Entry>
  [[gnu::always_inline]] static T run(OpCode op, Entry entry, const Plan&, T& dy, const Shape& x_shape, const InterpArgs& args) {
    return {entry(op)(dy.take(), x_shape, args), Kind::Float};
  }
};

// Embedding: weights [n, d], indices Int [*I] -> [*I, d]; an index outside [0, n) raises
// IndexError (checked by the entry: it needs the index values).
template <> struct fwd::Rule<Family::Embedding> : FloatOut {
  struct Plan { Shape out; };
  static Plan check(OpCode op, const T& weights, const T& indices) {
    check_module_first(op, weights, "weights");
    if (weights.shape().rank() != 2)
      throw ShapeError(fmt::format("[{}] weights has the wrong rank; expected rank 2 [n_embedding, d_model]; got {}", op_name(op),
                                   weights.shape().to_string()));
    check_embedding_indices(op, weights, indices);
    Shape out = embedding_out(indices.shape(), weights.shape()[1]);
    check_alloc_shape(op, out, weights.dtype());
    return {std::move(out)};
  }
  template <class Entry>
  [[gnu::always_inline]] static T run(OpCode op, Entry entry, const Plan&, T& weights, T& indices) {
    return {entry(op)(weights.take(), indices.take()), Kind::Float};
  }
};

// EmbeddingBackward: dy [*I, d], indices [*I] -> [n, d] of weight_shape.
template <> struct fwd::Rule<Family::EmbeddingBackward> : FloatOut {
  struct Plan { Shape out; };
  static Plan check(OpCode op, const T& dy, const T& indices, const Shape& weight_shape) {
    check_module_first(op, dy, "output gradient");
    check_embedding_indices(op, dy, indices);
    if (weight_shape.rank() != 2)
      throw ShapeError(fmt::format("[{}] weights has the wrong rank; expected rank 2 [n_embedding, d_model]; got {}",
                                   op_name(op), weight_shape.to_string()));
    check_same_shape(op, "output gradient", dy.shape(), embedding_out(indices.shape(), weight_shape[1]));
    check_alloc_shape(op, weight_shape, dy.dtype());
    return {weight_shape};
  }
  static OpAttrs attrs(OpCode, const Plan&, const T&, const T&, const Shape& weight_shape) { return options_attrs(nullptr, &weight_shape); }
  template <class Entry>
  [[gnu::always_inline]] static T run(OpCode op, Entry entry, const Plan&, T& dy, T& indices, const Shape& weight_shape) {
    return {entry(op)(dy.take(), indices.take(), weight_shape), Kind::Float};
  }
};

// LayerNorm: x [.., d], gamma [d], beta [d]? -> x's shape; eps finite and >= 0.
template <> struct fwd::Rule<Family::LayerNorm> : FloatOut {
  struct Plan { Shape out; };
  static Plan check(OpCode op, const T& x, const T& gamma, const T& beta, const double& eps) {
    check_module_first(op, x, "x");
    check_operand(op, x, gamma, "gamma");
    if (beta.prim) check_operand(op, x, beta, "beta");
    check_one_float_dtype(op, {{"x", x}, {"gamma", gamma}, {"beta", beta}});
    const Shape& s = x.shape();
    if (s.rank() < 1) throw ShapeError(fmt::format("[{}] x has no dims; expected [..., d]; got {}", op_name(op), s.to_string()));
    const Shape want{s[s.rank() - 1]};
    check_same_shape(op, "gamma", gamma.shape(), want);
    if (beta.prim) check_same_shape(op, "beta", beta.shape(), want);
    if (!(eps >= 0.0) || std::isinf(eps))
      throw ShapeError(fmt::format("[{}] epsilon must be finite and not negative; expected eps >= 0; got {}", op_name(op), eps));
    return {s};
  }
  static OpAttrs attrs(OpCode, const Plan&, const T&, const T&, const T&, const double& eps) {
    OpAttrs o;
    o.scalars[0] = Scalar(eps);
    return o;
  }
  template <class Entry>
  [[gnu::always_inline]] static T run(OpCode op, Entry entry, const Plan&, T& x, T& gamma, T& beta, const double& eps) {
    return {entry(op)(x.take(), gamma.take(), beta.take(), eps), Kind::Float};
  }
};

// Attention: q [B,H,Lq,D], k [B,H,Lk,D], v [B,H,Lk,Dv], mask Bool [B|1,H|1,Lq,Lk]? (true =
// masked out), bias Float of the mask's shape? -> [B,H,Lq,Dv].
template <> struct fwd::Rule<Family::Attention> : FloatOut {
  struct Plan { Shape out; };
  static Plan check(OpCode op, const T& q, const T& k, const T& v, const T& mask, const T& bias, const Attn& options) {
    check_module_first(op, q, "q");
    check_operand(op, q, k, "k");
    check_operand(op, q, v, "v");
    if (mask.prim) check_mask(op, q, mask);
    if (bias.prim) check_operand(op, q, bias, "attn_bias");
    check_one_float_dtype(op, {{"q", q}, {"k", k}, {"v", v}, {"attn_bias", bias}});
    if (options.scale && !std::isfinite(*options.scale))
      throw ShapeError(fmt::format("[{}] scale must be finite; expected a finite scale; got {}", op_name(op), *options.scale));
    Shape out = core::attention_output_shape(op_name(op), q.shape(), k.shape(), v.shape(), shape_or_null(mask),
                                                   shape_or_null(bias), options);
    check_alloc_shape(op, out, q.dtype());
    return {std::move(out)};
  }
  static OpAttrs attrs(OpCode, const Plan&, const T&, const T&, const T&, const T&, const T&, const Attn& options) {
    return options_attrs(&options);
  }
  template <class Entry>
  [[gnu::always_inline]] static T run(OpCode op, Entry entry, const Plan&, T& q, T& k, T& v, T& mask, T& bias, const Attn& options) {
    return {entry(op)(q.take(), k.take(), v.take(), mask.take(), bias.take(), options), Kind::Float};
  }
};

DispatchTensor pool(OpCode op, DispatchTensor x, const PoolArgs& args) { return forward<Family::Pool>(op, x, args); }
std::pair<DispatchTensor, DispatchTensor> max_pool_with_indices(OpCode op, DispatchTensor x, const PoolArgs& args) {
  return forward<Family::PoolWithIndices>(op, x, args);
}
DispatchTensor pool_backward(OpCode op, DispatchTensor dy, const Shape& x_shape, const PoolArgs& args) {
  return forward<Family::PoolBackward>(op, dy, x_shape, args);
}
DispatchTensor max_pool_backward(DispatchTensor dy, DispatchTensor indices, const Shape& x_shape, const PoolArgs& args) {
  return forward<Family::MaxPoolBackward>(OpCode::max_pool_with_indices_backward, dy, indices, x_shape, args);
}
DispatchTensor interpolate(DispatchTensor x, const InterpArgs& args) { return forward<Family::Interpolate>(OpCode::interpolate, x, args); }
DispatchTensor interpolate_backward(DispatchTensor dy, const Shape& x_shape, const InterpArgs& args) {
  return forward<Family::InterpolateBackward>(OpCode::interpolate_backward, dy, x_shape, args);
}
DispatchTensor embedding(DispatchTensor weights, DispatchTensor indices) {
  return forward<Family::Embedding>(OpCode::embedding, weights, indices);
}
DispatchTensor embedding_backward(DispatchTensor dy, DispatchTensor indices, const Shape& weight_shape) {
  return forward<Family::EmbeddingBackward>(OpCode::embedding_backward, dy, indices, weight_shape);
}
DispatchTensor layer_norm(DispatchTensor x, DispatchTensor gamma, DispatchTensor beta, double eps) {
  return forward<Family::LayerNorm>(OpCode::layer_norm, x, gamma, beta, eps);
}
DispatchTensor attention(DispatchTensor q, DispatchTensor k, DispatchTensor v, DispatchTensor mask, DispatchTensor bias,
                         const tensor::nn::AttentionModuleOptions& options) {
  return forward<Family::Attention>(OpCode::attention, q, k, v, mask, bias, options);
}

}  // namespace tensor::dispatch
