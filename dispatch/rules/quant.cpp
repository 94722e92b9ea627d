// Forwarders: the op table's quant section (quantize, dequantize). Each validates its
// arguments, states the output metadata and runs the backend entry through the one
// invocation path (dispatch/forward.hpp), so hooks and the profiler see them as one op.
// The scheme arithmetic on the host (scales rounded to the scale dtype, calibration) stays
// in dispatch/quant.cpp, which calls these.
#include "dispatch/forward.hpp"
#include "dispatch/quant.hpp"
#include "dispatch/quant_model.hpp"
#include "dispatch/settings.hpp"

namespace tensor::dispatch {
using namespace fwd;

using T = DispatchTensor;

// Quantize: x (Float, any float dtype), the scales (F32, one per block of the scheme's
// grid, on x's device) and the scheme. The result: a QFloat tensor of x's shape.
template <> struct fwd::Rule<Family::Quantize> : OnFirst {
  struct Plan {};
  static Plan check(OpCode op, const T& x, const T& scales, const QuantScheme& scheme) {
    check_first(op, x);
    quant::check_plain_device(op_name(op).data(), x.device);
    const std::size_t n = quant::grid_shape(op_name(op).data(), x.shape(), scheme).num_elements();
    if (!scales.prim) throw Error(fmt::format("[{}] expected a scales tensor; got an empty (moved-from) handle", op_name(op)));
    check_same_device(op, x, scales);
    if (scales.kind != Kind::Float || scales.dtype() != DType::F32)
      throw DTypeError(fmt::format("[{}] wrong scales; expected an f32 tensor; got {} ({})", op_name(op), kind_name(scales.kind),
                                   dtype_name(scales.dtype())));
    if (scales.shape().rank() != 1 || scales.shape()[0] != n)
      throw ShapeError(fmt::format("[{}] one scale per block; expected shape [{}] for {} of shape {}; got {}", op_name(op), n,
                                   to_string(scheme), x.shape().to_string(), scales.shape().to_string()));
    return {};
  }
  static OutMeta meta(OpCode, const Plan&, const T& x, const T&, const QuantScheme&) {
    return {x.shape(), DType::QFloat, Kind::Float};
  }
  template <class Entry>
  [[gnu::always_inline]] static T run(OpCode op, Entry entry, const Plan&, T& x, T& scales, const QuantScheme& scheme) {
    return {entry(op)(x.take(), scales.take(), scheme), Kind::Float};
  }
};

// Dequantize: a quantized tensor (the op table's q_in: its primitive a QuantPrim, which no
// device lists as Arithmetic, so the usage check is this one) and a float dtype.
template <> struct fwd::Rule<Family::Dequantize> : OnFirst {
  struct Plan {};
  static Plan check(OpCode op, const T& q, const DType& dtype) {
    if (!q.prim) throw Error(fmt::format("[{}] expected a tensor; got an empty (moved-from) handle", op_name(op)));
    if (!quant::as_quant(q))
      throw DTypeError(fmt::format("[{}] not a quantized tensor; expected a qfloat tensor; got {} ({})", op_name(op),
                                   kind_name(q.kind), dtype_name(q.dtype())));
    check_kind(op, q);
    if (!is_float(dtype))
      throw DTypeError(fmt::format("[{}] wrong target dtype; expected a float dtype; got {}", op_name(op), dtype_name(dtype)));
    check_device(op_name(op), q.device);
    return {};
  }
  static OutMeta meta(OpCode, const Plan&, const T& q, const DType& dtype) { return {q.shape(), dtype, Kind::Float}; }
  template <class Entry>
  [[gnu::always_inline]] static T run(OpCode op, Entry entry, const Plan&, T& q, const DType& dtype) {
    return {entry(op)(q.take(), dtype), Kind::Float};
  }
};

// QuantizeDynamic: x (Float, any float dtype) and the scheme; the scales from x's blocks.
template <> struct fwd::Rule<Family::QuantizeDynamic> : OnFirst {
  struct Plan {};
  static Plan check(OpCode op, const T& x, const QuantScheme& scheme) {
    check_first(op, x);
    quant::check_plain_device(op_name(op).data(), x.device);
    quant::check_scheme(op_name(op).data(), scheme);
    quant::grid_shape(op_name(op).data(), x.shape(), scheme);  // the block must fit and divide
    return {};
  }
  static OutMeta meta(OpCode, const Plan&, const T& x, const QuantScheme&) { return {x.shape(), DType::QFloat, Kind::Float}; }
  template <class Entry>
  [[gnu::always_inline]] static T run(OpCode op, Entry entry, const Plan&, T& x, const QuantScheme& scheme) {
    return {entry(op)(x.take(), scheme), Kind::Float};
  }
};

// A block level of a weight [K, N] whose blocks lie in one column (block [b, 1], b dividing
// K: per output column where b = K); throws block_extents' ShapeError where it does not fit.
static bool column_blocks(const char* op, const Shape& sw, const QuantScheme& s) {
  const quant::Extents e = quant::block_extents(op, sw, s);
  return sw.rank() == 2 && e.rank == 2 && e.ext[1] == 1;
}

// The checks q_matmul and q_conv2d share: x a live float tensor, w a quantized one on x's
// device; the weight's quantized prim.
static const quant::QuantPrim& quantized_weight(OpCode op, const DispatchTensor& x, const DispatchTensor& w) {
  check_first(op, x);
  if (!w.prim) throw Error(fmt::format("[{}] expected a weight tensor; got an empty (moved-from) handle", op_name(op)));
  const quant::QuantPrim* qw = quant::as_quant(w);
  if (!qw)
    throw DTypeError(fmt::format("[{}] the weight is not quantized; expected a qfloat weight; got {} ({})", op_name(op),
                                 kind_name(w.kind), dtype_name(w.dtype())));
  check_same_device(op, x, w);
  return *qw;
}

// QMatmul: x (Float, rank >= 2, [.., M, K]) times w (quantized, [K, N], one scale for the
// tensor, one per output column: block [K, 1], or one per block of one column: block
// [b, 1], the q4 GEMV's [32, 1]). The result: [.., M, N] in x's dtype.
template <> struct fwd::Rule<Family::QMatmul> : OnFirst {
  struct Plan { Shape out; };
  static Plan check(OpCode op, const T& x, const T& w) {
    const quant::QuantPrim* qw = &quantized_weight(op, x, w);
    const Shape& sx = x.shape();
    const Shape& sw = w.shape();
    if (sx.rank() < 2 || sw.rank() != 2)
      throw ShapeError(fmt::format("[{}] expected x of rank >= 2 and a weight of rank 2; got {} and {}", op_name(op),
                                   sx.to_string(), sw.to_string()));
    if (sx[sx.rank() - 1] != sw[0])
      throw ShapeError(fmt::format("[{}] inner dims differ; expected x's last dim == the weight's dim 0; got {} and {}",
                                   op_name(op), sx.to_string(), sw.to_string()));
    const QuantScheme& s = qw->scheme();
    if (s.level.is_block() && !column_blocks(op_name(op).data(), sw, s))
      throw ShapeError(fmt::format("[{}] weight scales per tensor, per output column or per block of one column; "
                                   "expected the level tensor or block [b, 1] (b dividing {}); got {}",
                                   op_name(op), sw[0], to_string(s)));
    Shape out = sx;
    out[out.rank() - 1] = sw[1];
    check_alloc_shape(op, out, x.dtype());
    return {std::move(out)};
  }
  static OutMeta meta(OpCode, const Plan& p, const T& x, const T&) { return {p.out, x.dtype(), Kind::Float}; }
  template <class Entry>
  [[gnu::always_inline]] static T run(OpCode op, Entry entry, const Plan&, T& x, T& w) {
    return {entry(op)(x.take(), w.take()), Kind::Float};
  }
};

DispatchTensor q_matmul(DispatchTensor x, DispatchTensor w) { return forward<Family::QMatmul>(OpCode::q_matmul, x, w); }

// QConv: conv2d of x (Float, [N, C_in, H, W]) with a quantized weight [C_out, C_in, KH, KW]
// (scales per tensor or per output channel), a bias [C_out] in x's dtype or none, groups 1.
// The result: [N, C_out, OH, OW] in x's dtype.
template <> struct fwd::Rule<Family::QConv> : OnFirst {
  struct Plan {
    Shape out;
    QConvArgs a;
  };
  static Plan check(OpCode op, const T& x, const T& w, const T& bias, const QConvArgs& args) {
    const quant::QuantPrim* qw = &quantized_weight(op, x, w);
    if (bias.prim) {
      check_operand(op, x, bias, "bias");
      if (bias.dtype() != x.dtype())
        throw DTypeError(fmt::format("[{}] bias and x differ in dtype; expected {}; got {}", op_name(op),
                                     dtype_name(x.dtype()), dtype_name(bias.dtype())));
    }
    const Shape& ws = w.shape();
    if (x.shape().rank() != 4 || ws.rank() != 4)
      throw ShapeError(fmt::format("[{}] expected x [N, C_in, H, W] and a weight [C_out, C_in, KH, KW]; got {} and {}",
                                   op_name(op), x.shape().to_string(), ws.to_string()));
    if (args.conv.groups != 1)
      throw ShapeError(fmt::format("[{}] expected groups 1; got {}", op_name(op), args.conv.groups));
    const QuantScheme& s = qw->scheme();
    if (s.level.is_block() && quant::grid_shape(op_name(op).data(), ws, s) != Shape{ws[0], 1, 1, 1})
      throw ShapeError(fmt::format("[{}] weight scales per tensor or per output channel; expected the level tensor or "
                                   "block [1, {}, {}, {}]; got {}",
                                   op_name(op), ws[1], ws[2], ws[3], to_string(s)));
    Plan p{Shape{}, QConvArgs{core::normalized(args.conv, 2)}};
    p.out = core::conv_output_shape(op_name(op), x.shape(), ws, p.a.conv, shape_or_null(bias));
    check_alloc_shape(op, p.out, x.dtype());
    return p;
  }
  static OutMeta meta(OpCode, const Plan& p, const T& x, const T&, const T&, const QConvArgs&) {
    return {p.out, x.dtype(), Kind::Float};
  }
  template <class Entry>
  [[gnu::always_inline]] static T run(OpCode op, Entry entry, const Plan& p, T& x, T& w, T& bias, const QConvArgs&) {
    return {entry(op)(x.take(), w.take(), bias.take(), p.a), Kind::Float};
  }
};

DispatchTensor q_conv2d(DispatchTensor x, DispatchTensor w, DispatchTensor bias, const QConvArgs& args) {
  return forward<Family::QConv>(OpCode::q_conv2d, x, w, bias, args);
}

namespace quant {

DispatchTensor quantize_row(const DispatchTensor& x, DispatchTensor scales, const QuantScheme& scheme) {
  DispatchTensor in = x;
  return forward<Family::Quantize>(OpCode::quantize, in, scales, scheme);
}

DispatchTensor quantize_dynamic_row(DispatchTensor x, const QuantScheme& scheme) {
  return forward<Family::QuantizeDynamic>(OpCode::quantize_dynamic, x, scheme);
}
DispatchTensor dequantize_row(const DispatchTensor& q, DType dtype) {
  DispatchTensor in = q;
  return forward<Family::Dequantize>(OpCode::dequantize, in, dtype);
}

// ---- float ops with a quantized operand (issue 32, step 3) ----------------------------

namespace {

// A weight [K, N] q_matmul takes: scales per tensor, per output column (block [K, 1]) or
// per block of one column (block [b, 1], the q4 GEMV's [32, 1]).
bool fits_q_matmul(const QuantPrim& w) {
  const Shape& s = w.shape();
  if (s.rank() != 2) return false;
  if (!w.scheme().level.is_block()) return true;
  return column_blocks("q_matmul", s, w.scheme());
}

// A conv weight [C_out, C_in, *K] with scales per tensor or per output channel.
bool per_out_channel(const QuantPrim& w) {
  const Shape& s = w.shape();
  if (!w.scheme().level.is_block()) return true;
  std::vector<std::size_t> per_oc(s.rank(), 1);
  per_oc[0] = s[0];
  return grid_shape("conv2d", s, w.scheme()) == Shape(per_oc);
}

// The float dtype a quantized operand dequantizes to: `like`'s where it is a float tensor,
// else the device's default float dtype.
DType float_like(const DispatchTensor& like, DeviceId device, OpCode op) {
  if (like.prim && !is_quantized(like) && like.kind == Kind::Float && is_float(like.dtype())) return like.dtype();
  return default_dtype(device, Kind::Float, op_name(op));
}

DispatchTensor dequantized(const DispatchTensor& t, DType dtype) { return is_quantized(t) ? dequantize_row(t, dtype) : t; }

DispatchTensor reshaped(DispatchTensor t, const Shape& s) {
  std::vector<std::int64_t> d(s.begin(), s.end());
  return reshape(OpCode::reshape, std::move(t), d);
}

// The bias [C] broadcast along `axis` of a result of rank `rank`, added to y.
DispatchTensor add_bias(DispatchTensor y, const DispatchTensor& bias, std::size_t rank, std::size_t axis) {
  if (!bias.prim) return y;
  std::vector<std::size_t> s(rank, 1);
  s[axis] = bias.shape()[0];
  return binary(OpCode::add, std::move(y), reshaped(bias, Shape(s)));
}

// x (a float tensor, not quantized) against a quantized weight: x's kind, the device, and,
// where given, the bias's kind, device and dtype (x's). Errors name `op`.
void check_x_and_bias(OpCode op, const DispatchTensor& x, const DispatchTensor& w, const DispatchTensor& bias) {
  check_module_first(op, x, "x");
  check_same_device(op, x, w);
  if (bias.prim) {
    check_operand(op, x, bias, "bias");
    if (bias.dtype() != x.dtype())
      throw DTypeError(fmt::format("[{}] bias and x differ in dtype; expected {}; got {}", op_name(op), dtype_name(x.dtype()),
                                   dtype_name(bias.dtype())));
  }
}

// conv2d's weight [C_out, C_in, KH, KW] as the product weight [C_in*KH*KW, C_out]: the codes
// reshaped and transposed (a view), the scales as they are (per tensor, or one per output
// channel = one per column), made once per weight.
DispatchTensor conv_weight_kn(const DispatchTensor& w) {
  const QuantPrim& q = *as_quant(w);
  return q.derived([&] {
    const Shape& s = q.shape();
    const std::size_t oc = s[0], k = s.num_elements() / std::max<std::size_t>(oc, 1);
    DispatchTensor codes = swap_dims(reshaped(q.codes(), Shape{oc, k}), 0, 1);
    QuantScheme scheme = q.scheme();
    if (scheme.level.is_block()) scheme = scheme.with_level(QuantLevel::block({static_cast<std::uint32_t>(k), 1}));
    return DispatchTensor(Prim(Ref<QuantPrim>::make(Shape{k, oc}, q.device(), scheme, std::move(codes), q.scales())),
                          Kind::Float);
  });
}

}  // namespace

// burn's q_matmul under QuantPropagation::Propagate: the product quantized again with the last
// quantized operand's scheme (Inhibit, the default: the float product).
DispatchTensor propagated(DispatchTensor y, const QuantScheme& last) {
  if (device_settings(y.device).quant.propagation != QuantPropagation::Propagate) return y;
  return quantize_dynamic_row(std::move(y), last);
}

DispatchTensor matmul_quantized(DispatchTensor a, DispatchTensor b) {
  constexpr OpCode op = OpCode::matmul;
  if (!a.prim || !b.prim) throw Error(fmt::format("[{}] expected two tensors; got an empty (moved-from) handle", op_name(op)));
  const QuantPrim* qa = as_quant(a);
  const QuantPrim* qb = as_quant(b);
  const QuantScheme last = qb ? qb->scheme() : qa->scheme();
  if (!qa) {  // Float x Q: the int8 product where the weight fits it
    check_module_first(op, a, "lhs");
    check_same_device(op, a, b);
    (void)matmul_shape(op, a.shape(), b.shape());
    if (fits_q_matmul(*qb)) return propagated(q_matmul(std::move(a), std::move(b)), last);
    return propagated(matmul(std::move(a), dequantize_row(b, a.dtype())), last);
  }
  // Q x Float and Q x Q: dequantized (to the float operand's dtype, else the device's
  // default float dtype), then the float product.
  const DType dt = qb ? default_dtype(a.device, Kind::Float, op_name(op)) : float_like(b, a.device, op);
  return propagated(matmul(dequantize_row(a, dt), dequantized(b, dt)), last);
}

DispatchTensor linear_quantized(DispatchTensor x, DispatchTensor weight, DispatchTensor bias) {
  constexpr OpCode op = OpCode::linear;
  if (!x.prim || !weight.prim)
    throw Error(fmt::format("[{}] expected x and a weight; got an empty (moved-from) handle", op_name(op)));
  if (is_quantized(x)) x = dequantize_row(x, float_like(weight, x.device, op));
  if (is_quantized(bias)) bias = dequantize_row(bias, x.dtype());
  const QuantPrim* qw = as_quant(weight);
  if (!qw) return linear(std::move(x), std::move(weight), std::move(bias));
  check_x_and_bias(op, x, weight, bias);
  const Shape& s = x.shape();
  if (s.rank() < 1) throw ShapeError(fmt::format("[{}] x has no dims; expected [..., d_in]; got {}", op_name(op), s.to_string()));
  const Shape& ws = weight.shape();
  if (ws.rank() != 2)
    throw ShapeError(fmt::format("[{}] weight has the wrong rank; expected [d_in, d_out]; got {}", op_name(op), ws.to_string()));
  if (s[s.rank() - 1] != ws[0])
    throw ShapeError(fmt::format("[{}] x's last dim does not match the weight [d_in, d_out]; expected [..., {}]; got x {} "
                                 "and weight {}",
                                 op_name(op), ws[0], s.to_string(), ws.to_string()));
  if (bias.prim && bias.shape() != Shape{ws[1]})
    throw ShapeError(fmt::format("[{}] bias has the wrong shape; expected [{}]; got {}", op_name(op), ws[1],
                                 bias.shape().to_string()));
  if (!fits_q_matmul(*qw)) {  // other blocks: the dequantized weight, then the float linear
    DispatchTensor wf = dequantize_row(weight, x.dtype());
    return linear(std::move(x), std::move(wf), std::move(bias));
  }
  const bool vec = s.rank() == 1;
  DispatchTensor xi = vec ? reshaped(std::move(x), Shape{1, s[0]}) : std::move(x);
  DispatchTensor y = q_matmul(std::move(xi), std::move(weight));
  if (vec) y = reshaped(std::move(y), Shape{ws[1]});
  const std::size_t r = y.shape().rank();
  return add_bias(std::move(y), bias, r, r - 1);
}

DispatchTensor conv_quantized(OpCode op, DispatchTensor x, DispatchTensor weight, DispatchTensor bias, const ConvArgs& args) {
  if (!x.prim || !weight.prim)
    throw Error(fmt::format("[{}] expected x and a weight; got an empty (moved-from) handle", op_name(op)));
  if (is_quantized(x)) x = dequantize_row(x, float_like(weight, x.device, op));
  if (is_quantized(bias)) bias = dequantize_row(bias, x.dtype());
  const QuantPrim* qw = as_quant(weight);
  if (!qw) return conv(op, std::move(x), std::move(weight), std::move(bias), args);
  check_x_and_bias(op, x, weight, bias);
  const ConvArgs a = core::normalized(args, op_info(op).spatial);
  if (a.rank < 1 || a.rank > 3)
    throw ShapeError(fmt::format("[{}] convolution rank out of range; expected 1, 2 or 3; got {}", op_name(op), a.rank));
  const Shape out = op_info(op).transposed
                        ? core::conv_transpose_output_shape(op_name(op), x.shape(), weight.shape(), a, shape_or_null(bias))
                        : core::conv_output_shape(op_name(op), x.shape(), weight.shape(), a, shape_or_null(bias));
  // The int8 route pays where each output sums enough products (quant.hpp's kMinIntConvK).
  const std::size_t k = weight.shape().num_elements() / std::max<std::size_t>(weight.shape()[0], 1);
  const bool int8 = op == OpCode::conv2d && a.groups == 1 && k >= quant::kMinIntConvK && per_out_channel(*qw) && x.dtype() != DType::F64;
  const Backend& be = backend_of(x.device);
  if (int8 && be.is_native(OpCode::q_conv2d))  // the backend's int8 convolution (oneDNN's on the cpu)
    return q_conv2d(std::move(x), std::move(weight), std::move(bias), QConvArgs{a});
  // im2col + q_matmul only where that q_matmul is an integer product (QFloat Accelerated); a
  // q_matmul that dequantizes in the shader (vulkan's) gains nothing over the float conv and
  // would materialize the [N, L, K] columns.
  const bool int8_matmul =
      be.is_native(OpCode::q_matmul) && dtype_usage(x.device, DType::QFloat).contains(DTypeUsage::Accelerated);
  if (!int8 || !int8_matmul) {  // the default: the dequantized weight, then the float conv
    DispatchTensor wf = dequantize_row(weight, x.dtype());
    return conv(op, std::move(x), std::move(wf), std::move(bias), args);
  }
  // im2col (unfold4d: [N, C_in*KH*KW, L]) and the int8 product with the weight [K, C_out].
  const Shape& ws = weight.shape();
  FoldArgs f;
  f.kernel = {static_cast<std::int64_t>(ws[2]), static_cast<std::int64_t>(ws[3])};
  for (std::size_t i = 0; i < 2; ++i) {
    f.options.stride[i] = a.stride[i];
    f.options.padding[i] = a.padding[i];
    f.options.dilation[i] = a.dilation[i];
  }
  DispatchTensor cols = swap_dims(unfold4d(std::move(x), f), 1, 2);   // [N, L, K]
  DispatchTensor y = swap_dims(q_matmul(std::move(cols), conv_weight_kn(weight)), 1, 2);  // [N, C_out, L]
  y = reshaped(std::move(y), out);
  return add_bias(std::move(y), bias, 4, 1);
}

}  // namespace quant
}  // namespace tensor::dispatch
