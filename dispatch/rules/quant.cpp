// Forwarders: the op table's quant section (quantize, dequantize). Each validates its
// arguments, states the output metadata and runs the backend entry through the one
// invocation path (dispatch/forward.hpp), so hooks and the profiler see them as one op.
// The scheme arithmetic on the host (scales rounded to the scale dtype, calibration) stays
// in dispatch/quant.cpp, which calls these.
#include "dispatch/forward.hpp"
#include "dispatch/quant.hpp"
#include "dispatch/quant_model.hpp"

namespace tensor::dispatch {
using namespace fwd;

using T = DispatchTensor;

// Quantize: x (Float, any float dtype), the scales (F32, one per block of the scheme's
// grid, on x's device) and the scheme. The result: a QFloat tensor of x's shape.
template <> struct fwd::Rule<Family::Quantize> : OnFirst {
  struct Plan {};
  static Plan check(OpCode op, const T& x, const T& scales, const QuantScheme& scheme) {
    check_first(op, x);
    // Autodiff devices wrap every primitive in a tracked one; a QuantPrim there would be read
    // as one (burn: a quantized tensor is never tracked).
    if (is_autodiff_device(x.device))
      throw DeviceError(DeviceError::Kind::UnsupportedDType,
                        fmt::format("[{}] quantized tensors on an autodiff device are not supported yet; expected a tensor "
                                    "of a plain device (inner()); got one on {}",
                                    op_name(op), device_string(x.device)));
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

// QMatmul: x (Float, rank >= 2, [.., M, K]) times w (quantized, [K, N], one scale for the
// tensor or one per output column: block [K, 1]). The result: [.., M, N] in x's dtype.
template <> struct fwd::Rule<Family::QMatmul> : OnFirst {
  struct Plan { Shape out; };
  static Plan check(OpCode op, const T& x, const T& w) {
    check_first(op, x);
    if (!w.prim) throw Error(fmt::format("[{}] expected a weight tensor; got an empty (moved-from) handle", op_name(op)));
    const quant::QuantPrim* qw = quant::as_quant(w);
    if (!qw)
      throw DTypeError(fmt::format("[{}] the weight is not quantized; expected a qfloat weight; got {} ({})", op_name(op),
                                   kind_name(w.kind), dtype_name(w.dtype())));
    check_same_device(op, x, w);
    const Shape& sx = x.shape();
    const Shape& sw = w.shape();
    if (sx.rank() < 2 || sw.rank() != 2)
      throw ShapeError(fmt::format("[{}] expected x of rank >= 2 and a weight of rank 2; got {} and {}", op_name(op),
                                   sx.to_string(), sw.to_string()));
    if (sx[sx.rank() - 1] != sw[0])
      throw ShapeError(fmt::format("[{}] inner dims differ; expected x's last dim == the weight's dim 0; got {} and {}",
                                   op_name(op), sx.to_string(), sw.to_string()));
    const QuantScheme& s = qw->scheme();
    const bool per_column = s.level.is_block() && s.level.shape.rank >= 1 &&
                            quant::grid_shape(op_name(op).data(), sw, s) == Shape{1, sw[1]};
    if (s.level.is_block() && !per_column)
      throw ShapeError(fmt::format("[{}] weight scales per tensor or per output column; expected the level tensor or "
                                   "block [{}, 1]; got {}",
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

namespace quant {

DispatchTensor quantize_row(const DispatchTensor& x, DispatchTensor scales, const QuantScheme& scheme) {
  DispatchTensor in = x;
  return forward<Family::Quantize>(OpCode::quantize, in, scales, scheme);
}

DispatchTensor dequantize_row(const DispatchTensor& q, DType dtype) {
  DispatchTensor in = q;
  return forward<Family::Dequantize>(OpCode::dequantize, in, dtype);
}

}  // namespace quant
}  // namespace tensor::dispatch
