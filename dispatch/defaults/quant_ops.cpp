// Defaults: burn's QTensorOps beyond quantize / dequantize / q_matmul (the op table's quant
// section, rows with a quant rule). Every backend gets them: a quantized tensor is dispatch's
// QuantPrim over the backend's own i8 codes and f32 scales, so these compose from the
// backend's int and float entries.
//   q_codes    the op on the codes, the scales kept: per-tensor schemes, and where the device
//              computes with i8 for argmax / argmin. Per block, permute / swap_dims / transpose /
//              flip move the block grid with the codes (NdArray's way: exact); the other layout
//              ops of a per-block scheme take the requant way, as burn's CPU backend does;
//   q_requant  dequantize (to the device's float dtype), the float op, quantize_dynamic with
//              the first quantized operand's scheme;
//   q_flow     the same, quantized again only under QuantPropagation::Propagate (the device's
//              QuantConfig); under Inhibit the float result;
//   q_out      dequantize, the float op (an Int or Bool result).
// A result a per-block scheme cannot cover (a reduction to fewer elements than a block) is the
// ShapeError of quantize_dynamic's block check.
#include "dispatch/defaults/compose.hpp"
#include "dispatch/quant.hpp"
#include "dispatch/quant_model.hpp"

namespace tensor::dispatch::defaults {
namespace {

using quant::QuantPrim;

DType float_dt(DeviceId d) { return to_dtype(device_settings(d).float_dtype); }
Prim share(const DispatchTensor& t) { return DispatchTensor(t).take(); }
const QuantPrim& qp(const Prim& p) { return prim_as<QuantPrim>(p); }

// The quantized tensor of `q`'s scheme and scales over new codes (of the new shape).
Prim with_codes(const QuantPrim& q, Prim codes) {
  const Shape shape = codes->shape();
  const DeviceId d = codes->device();
  return Prim(Ref<QuantPrim>::make(shape, d, q.scheme(), DispatchTensor(std::move(codes), Kind::Int), q.scales()));
}

// ---- the requant / flow / out way ------------------------------------------------------
struct QState {
  std::optional<QuantScheme> scheme;  // the first quantized operand's
  DeviceId dev{};
  bool have_dev = false;
};
void deq(Prim& p, QState& s) {
  if (!p) return;
  if (!s.have_dev) {
    s.dev = p->device();
    s.have_dev = true;
  }
  if (p->dtype() != DType::QFloat) return;
  if (!s.scheme) s.scheme = qp(p).scheme();
  p = call<Family::Dequantize>(OpCode::dequantize, s.dev, std::move(p), float_dt(s.dev));
}
void deq(std::vector<Prim>& v, QState& s) {
  for (Prim& p : v) deq(p, s);
}
template <class O>
void deq(O&, QState&) {}

Prim requant(Prim r, const QuantScheme& scheme) {
  const DeviceId d = r->device();
  return call<Family::QuantizeDynamic>(OpCode::quantize_dynamic, d, std::move(r), scheme);
}
template <OpCode Q>
Prim post(Prim r, const QState& s) {
  constexpr QRule rule = op_info(Q).qrule;
  if (rule == QRule::Out || !s.scheme || !r || !is_float(r->dtype())) return r;
  if (rule == QRule::Flow && device_settings(s.dev).quant.propagation == QuantPropagation::Inhibit) return r;
  return requant(std::move(r), *s.scheme);
}
template <OpCode Q>
PrimPair post(PrimPair r, const QState& s) {
  r.first = post<Q>(std::move(r.first), s);
  return r;
}

template <OpCode Q, class Fn = FamilyFn<op_family(Q)>>
struct Through;
template <OpCode Q, class R, class... A>
struct Through<Q, R (*)(A...)> {
  static R fn(A... a) {
    QState s;
    (deq(a, s), ...);
    constexpr OpCode twin = static_cast<OpCode>(op_info(Q).twin);
    R r = call<op_family(Q)>(twin, s.dev, std::forward<A>(a)...);
    return post<Q>(std::move(r), s);
  }
};
template <OpCode Q>
constexpr FamilyFn<op_family(Q)> through = &Through<Q>::fn;

// ---- the codes way -----------------------------------------------------------------------
// Per tensor (the scales kept as they are) and, for ops that compute on the codes, a device
// that computes with i8.
bool on_codes(const QuantPrim& q, bool computes = false) {
  if (q.scheme().level.is_block()) return false;
  return !computes || arith(q.device(), q.codes().dtype());
}

// The block extents after a reordering layout op, as the op moves dims: permute (axes),
// swap_dims (a, b), transpose (the last two); flip keeps them.
using Ext = std::array<std::size_t, kMaxRank>;
Ext moved(const Ext& e, std::size_t, Axes axes, bool flip) {
  if (flip) return e;
  Ext r = e;
  for (std::size_t i = 0; i < axes.size(); ++i) r[i] = e[axes[i]];
  return r;
}
Ext moved(const Ext& e, std::size_t, std::size_t a, std::size_t b, bool) {
  Ext r = e;
  std::swap(r[a], r[b]);
  return r;
}
Ext moved(const Ext& e, std::size_t rank, bool) {
  Ext r = e;
  if (rank >= 2) std::swap(r[rank - 2], r[rank - 1]);
  return r;
}

// Per block, a reordering layout op (permute, swap_dims, transpose, flip) moves the block grid
// with the codes: the same op on the codes and on the scales viewed as the grid, the block
// extents reordered alike (as many as the scheme had where the leading ones stay 1).
// Exact: every code keeps its block's scale. nullptr where the block has more extents than
// BlockSize holds.
template <OpCode Q, Family F, class... A>
Prim grid_moved(const QuantPrim& q, A... a) {
  const Shape& shape = q.shape();
  if (shape.rank() == 0 || shape.rank() > BlockSize::kMaxDims) return nullptr;
  const DeviceId d = q.device();
  constexpr OpCode twin = static_cast<OpCode>(op_info(Q).twin);
  const quant::Extents e = quant::block_extents(op_name(Q).data(), shape, q.scheme());
  const Shape grid = quant::grid_shape(op_name(Q).data(), shape, q.scheme());
  const Ext ext = moved(e.ext, shape.rank(), a..., Q == OpCode::q_flip);
  // As many extents as the scheme had, more where the op moved a blocked dim in front of them.
  std::size_t lead = shape.rank() - q.scheme().level.shape.rank;
  for (std::size_t i = 0; i < lead; ++i)
    if (ext[i] != 1) {
      lead = i;
      break;
    }
  BlockSize b;
  for (std::size_t i = lead; i < shape.rank(); ++i) b.dims[b.rank++] = static_cast<std::uint32_t>(ext[i]);
  Prim codes = call<F>(twin, d, share(q.codes()), a...);
  Prim g = call<F>(twin, d, reshape_to(share(q.scales()), grid), a...);
  Prim scales = reshape_to(std::move(g), Shape{grid.num_elements()});
  const Shape out = codes->shape();
  return Prim(Ref<QuantPrim>::make(out, d, q.scheme().with_level(QuantLevel::block(b)),
                                   DispatchTensor(std::move(codes), Kind::Int), DispatchTensor(std::move(scales), Kind::Float)));
}

template <OpCode Q, Family F, class... A>
Prim layout(Prim x, A... a) {
  const QuantPrim& q = qp(x);
  const DeviceId d = x->device();
  constexpr OpCode twin = static_cast<OpCode>(op_info(Q).twin);
  if (on_codes(q)) return with_codes(q, call<F>(twin, d, share(q.codes()), a...));
  constexpr bool reorders = Q == OpCode::q_permute || Q == OpCode::q_swap_dims || Q == OpCode::q_transpose || Q == OpCode::q_flip;
  if constexpr (reorders)
    if (Prim r = grid_moved<Q, F>(q, a...)) return r;
  return Through<Q>::fn(std::move(x), a...);
}

Prim d_q_reshape(Prim x, const Shape& s) { return layout<OpCode::q_reshape, Family::Reshape>(std::move(x), s); }
Prim d_q_expand(Prim x, const Shape& s) { return layout<OpCode::q_expand, Family::Reshape>(std::move(x), s); }
Prim d_q_swap_dims(Prim x, std::size_t a, std::size_t b) { return layout<OpCode::q_swap_dims, Family::SwapDims>(std::move(x), a, b); }
Prim d_q_transpose(Prim x) { return layout<OpCode::q_transpose, Family::Unary>(std::move(x)); }
Prim d_q_permute(Prim x, Axes axes) { return layout<OpCode::q_permute, Family::Axes>(std::move(x), axes); }
Prim d_q_flip(Prim x, Axes axes) { return layout<OpCode::q_flip, Family::Axes>(std::move(x), axes); }
Prim d_q_slice(Prim x, DimSlices s) { return layout<OpCode::q_slice, Family::Slice>(std::move(x), s); }
Prim d_q_repeat_dim(Prim x, std::size_t dim, std::size_t times) {
  return layout<OpCode::q_repeat_dim, Family::RepeatDim>(std::move(x), dim, times);
}
Prim d_q_select(Prim x, std::size_t dim, Prim idx) {
  return layout<OpCode::q_select, Family::Select>(std::move(x), dim, std::move(idx));
}
Prim d_q_gather(Prim x, std::size_t dim, Prim idx) {
  return layout<OpCode::q_gather, Family::Gather>(std::move(x), dim, std::move(idx));
}

// argmax / argmin of the codes: a positive scale keeps the order, and equal values have equal
// codes, so the first extreme index is the float op's.
template <OpCode Q>
Prim arg_extreme(Prim x, std::size_t dim, DType dt) {
  const QuantPrim& q = qp(x);
  if (!on_codes(q, true)) return Through<Q>::fn(std::move(x), dim, dt);
  constexpr OpCode twin = static_cast<OpCode>(op_info(Q).twin);
  return call<Family::DimIndex>(twin, x->device(), share(q.codes()), dim, dt);
}
Prim d_q_argmax(Prim x, std::size_t dim, DType dt) { return arg_extreme<OpCode::q_argmax>(std::move(x), dim, dt); }
Prim d_q_argmin(Prim x, std::size_t dim, DType dt) { return arg_extreme<OpCode::q_argmin>(std::move(x), dim, dt); }

// max_dim / min_dim: the codes at the extreme's index (burn's default: argmax, then gather).
PrimPair extreme_with_indices(const QuantPrim& q, OpCode arg, std::size_t dim, DType dt) {
  const DeviceId d = q.device();
  Prim idx = call<Family::DimIndex>(arg, d, share(q.codes()), dim, dt);
  Prim codes = call<Family::Gather>(OpCode::gather, d, share(q.codes()), dim, idx);
  return {with_codes(q, std::move(codes)), std::move(idx)};
}
template <OpCode Q, OpCode Arg>
Prim extreme_dim(Prim x, std::size_t dim) {
  const QuantPrim& q = qp(x);
  if (!on_codes(q, true)) return Through<Q>::fn(std::move(x), dim);
  return extreme_with_indices(q, Arg, dim, int_dt(x->device())).first;
}
template <OpCode Q, OpCode Arg>
PrimPair extreme_dim_with_indices(Prim x, std::size_t dim, DType dt) {
  const QuantPrim& q = qp(x);
  if (!on_codes(q, true)) return Through<Q>::fn(std::move(x), dim, dt);
  return extreme_with_indices(q, Arg, dim, dt);
}
// The whole tensor's extreme as [1]: the codes viewed as one row.
template <OpCode Q, OpCode Arg>
Prim extreme(Prim x) {
  const QuantPrim& q = qp(x);
  if (!on_codes(q, true)) return Through<Q>::fn(std::move(x));
  const DeviceId d = x->device();
  const Shape row{1, q.shape().num_elements()};
  Prim flat = with_codes(q, call<Family::Reshape>(OpCode::reshape, d, share(q.codes()), row));
  Prim r = extreme_with_indices(qp(flat), Arg, 1, int_dt(d)).first;
  return with_codes(q, call<Family::Reshape>(OpCode::reshape, d, share(qp(r).codes()), Shape{1}));
}

Prim d_q_max_dim(Prim x, std::size_t dim) { return extreme_dim<OpCode::q_max_dim, OpCode::argmax>(std::move(x), dim); }
Prim d_q_min_dim(Prim x, std::size_t dim) { return extreme_dim<OpCode::q_min_dim, OpCode::argmin>(std::move(x), dim); }
PrimPair d_q_max_dim_with_indices(Prim x, std::size_t dim, DType dt) {
  return extreme_dim_with_indices<OpCode::q_max_dim_with_indices, OpCode::argmax>(std::move(x), dim, dt);
}
PrimPair d_q_min_dim_with_indices(Prim x, std::size_t dim, DType dt) {
  return extreme_dim_with_indices<OpCode::q_min_dim_with_indices, OpCode::argmin>(std::move(x), dim, dt);
}
Prim d_q_max(Prim x) { return extreme<OpCode::q_max, OpCode::argmax>(std::move(x)); }
Prim d_q_min(Prim x) { return extreme<OpCode::q_min, OpCode::argmin>(std::move(x)); }

// ---- moves, reads and the tracking hooks -----------------------------------------------------
// Within one backend (dispatch's to_device goes through the host between backends).
Prim d_q_to_device(Prim x, DeviceId to) {
  const QuantPrim& q = qp(x);
  const DeviceId d = x->device();
  Prim codes = call<Family::ToDevice>(OpCode::to_device, d, share(q.codes()), to);
  Prim scales = call<Family::ToDevice>(OpCode::to_device, d, share(q.scales()), to);
  return Prim(Ref<QuantPrim>::make(q.shape(), to, q.scheme(), DispatchTensor(std::move(codes), Kind::Int),
                                   DispatchTensor(std::move(scales), Kind::Float)));
}

std::future<TensorData> d_q_into_data(Prim x) {
  const QuantPrim& q = qp(x);
  const Shape shape = q.shape();
  const std::vector<std::int8_t> codes = read_prim(share(q.codes())).to_vec<std::int8_t>();
  const std::vector<float> scales = read_prim(share(q.scales())).to_vec<float>();
  std::promise<TensorData> done;
  done.set_value(TensorData::quantized(quant::encode_data(codes, shape, q.scheme(), scales), shape, q.scheme()));
  return done.get_future();
}

// burn's layout decoded; every code in the value's range and every scale positive and finite
// (FormatError otherwise), then codes (i8) and scales (f32) uploaded.
Prim d_q_from_data(TensorData data, DeviceId device) {
  const QuantScheme* s = data.quant_scheme();
  const Shape shape = data.shape();
  quant::DecodedData dd = quant::decode_data("from_data", data.bytes(), shape, *s);
  const auto [a, b] = s->range();
  for (std::int8_t c : dd.codes)
    if (c < a || c > b)
      throw FormatError("", fmt::format("[from_data] quantized code out of range; expected {}..{} for {}; got {}", a, b,
                                        to_string(*s), static_cast<int>(c)));
  for (float v : dd.scales)
    if (!(v > 0.0f) || !std::isfinite(v))
      throw FormatError("", fmt::format("[from_data] quantization scale out of range; expected a positive finite scale; got {}", v));
  if (!dtype_usage(device, DType::I8).contains(DTypeUsage::Storage))
    throw DTypeError(fmt::format("[from_data] the device cannot store i8 codes; expected i8 storage on {}; got none",
                                 device_string(device)));
  Prim codes = upload(TensorData::from<std::int8_t>(dd.codes, shape), device);
  Prim scales = upload(TensorData::from<float>(dd.scales, Shape{dd.scales.size()}), device);
  return Prim(Ref<QuantPrim>::make(shape, device, *s, DispatchTensor(std::move(codes), Kind::Int),
                                   DispatchTensor(std::move(scales), Kind::Float)));
}

Prim d_q_detach(Prim x) { return x; }
Prim d_q_set_require_grad(Prim x, bool) { return x; }
bool d_q_is_require_grad(const Prim&) { return false; }

// quantize_dynamic: per block, scale = 2 * max|x| / (b - a) (in f32, burn's formula) rounded
// up to the scale dtype (a zero block gets the smallest positive scale), then quantize. The
// maxima are read back to round them on the host, as quantize's default reads the scales.
Prim d_quantize_dynamic(Prim x, const QuantScheme& scheme) {
  const DeviceId d = x->device();
  const Shape shape = x->shape();
  const quant::Extents e = quant::block_extents("quantize_dynamic", shape, scheme);
  const std::size_t n = quant::grid_shape("quantize_dynamic", shape, scheme).num_elements();
  std::vector<float> alpha(n, 0.0f);
  if (shape.num_elements() != 0) {
    Prim f = x->dtype() == DType::F32 ? x : call<Family::Cast>(OpCode::cast, d, x, DType::F32);
    Prim r = un(OpCode::abs, std::move(f));
    if (!scheme.level.is_block()) {
      r = reshape_to(std::move(r), Shape{1, shape.num_elements()});
      r = call<Family::Dim>(OpCode::max_dim, d, std::move(r), std::size_t{1});
    } else {
      const quant::Split s = quant::split(shape, e);
      Shape view;
      for (std::int64_t v : s.view) view.push_back(static_cast<std::size_t>(v));
      r = reshape_to(std::move(r), view);
      for (std::int64_t ax : s.reduce) r = call<Family::Dim>(OpCode::max_dim, d, std::move(r), static_cast<std::size_t>(ax));
    }
    alpha = read_prim(std::move(r)).to_vec<float>();
  }
  const auto [a, b] = scheme.range();
  for (float& v : alpha) v = quant::validated_scale(2.0f * v / static_cast<float>(b - a), scheme.param);
  Prim scales = upload(TensorData::from<float>(alpha, Shape{n}), d);
  return call<Family::Quantize>(OpCode::quantize, d, std::move(x), std::move(scales), scheme);
}

}  // namespace

TENSOR_DEFAULT(OpCode, quantize_dynamic, d_quantize_dynamic)
TENSOR_DEFAULT(OpCode, q_from_data, d_q_from_data)
TENSOR_DEFAULT(OpCode, q_into_data, d_q_into_data)
TENSOR_DEFAULT(OpCode, q_to_device, d_q_to_device)
TENSOR_DEFAULT(OpCode, q_detach, d_q_detach)
TENSOR_DEFAULT(OpCode, q_set_require_grad, d_q_set_require_grad)
TENSOR_DEFAULT(OpCode, q_is_require_grad, d_q_is_require_grad)
TENSOR_DEFAULT(OpCode, q_reshape, d_q_reshape)
TENSOR_DEFAULT(OpCode, q_expand, d_q_expand)
TENSOR_DEFAULT(OpCode, q_swap_dims, d_q_swap_dims)
TENSOR_DEFAULT(OpCode, q_transpose, d_q_transpose)
TENSOR_DEFAULT(OpCode, q_permute, d_q_permute)
TENSOR_DEFAULT(OpCode, q_flip, d_q_flip)
TENSOR_DEFAULT(OpCode, q_slice, d_q_slice)
TENSOR_DEFAULT(OpCode, q_select, d_q_select)
TENSOR_DEFAULT(OpCode, q_gather, d_q_gather)
TENSOR_DEFAULT(OpCode, q_repeat_dim, d_q_repeat_dim)
TENSOR_DEFAULT(OpCode, q_argmax, d_q_argmax)
TENSOR_DEFAULT(OpCode, q_argmin, d_q_argmin)
TENSOR_DEFAULT(OpCode, q_max_dim, d_q_max_dim)
TENSOR_DEFAULT(OpCode, q_min_dim, d_q_min_dim)
TENSOR_DEFAULT(OpCode, q_max_dim_with_indices, d_q_max_dim_with_indices)
TENSOR_DEFAULT(OpCode, q_min_dim_with_indices, d_q_min_dim_with_indices)
TENSOR_DEFAULT(OpCode, q_max, d_q_max)
TENSOR_DEFAULT(OpCode, q_min, d_q_min)

// The requant / flow / out rows: one composition, over the row's twin.
#define TENSOR_Q_THROUGH(row) TENSOR_DEFAULT(OpCode, row, through<OpCode::row>)
TENSOR_Q_THROUGH(q_cat)
TENSOR_Q_THROUGH(q_abs)
TENSOR_Q_THROUGH(q_sort)
TENSOR_Q_THROUGH(q_sort_with_indices)
TENSOR_Q_THROUGH(q_topk)
TENSOR_Q_THROUGH(q_topk_with_indices)
TENSOR_Q_THROUGH(q_max_abs_dim)
TENSOR_Q_THROUGH(q_max_abs)
TENSOR_Q_THROUGH(q_argsort)
TENSOR_Q_THROUGH(q_argtopk)
TENSOR_Q_THROUGH(q_any)
TENSOR_Q_THROUGH(q_all)
TENSOR_Q_THROUGH(q_any_dim)
TENSOR_Q_THROUGH(q_all_dim)
TENSOR_Q_THROUGH(q_add)
TENSOR_Q_THROUGH(q_sub)
TENSOR_Q_THROUGH(q_mul)
TENSOR_Q_THROUGH(q_div)
TENSOR_Q_THROUGH(q_powf)
TENSOR_Q_THROUGH(q_add_scalar)
TENSOR_Q_THROUGH(q_sub_scalar)
TENSOR_Q_THROUGH(q_mul_scalar)
TENSOR_Q_THROUGH(q_div_scalar)
TENSOR_Q_THROUGH(q_powi)
TENSOR_Q_THROUGH(q_powi_scalar)
TENSOR_Q_THROUGH(q_powf_scalar)
TENSOR_Q_THROUGH(q_clamp_min)
TENSOR_Q_THROUGH(q_clamp_max)
TENSOR_Q_THROUGH(q_clamp)
TENSOR_Q_THROUGH(q_neg)
TENSOR_Q_THROUGH(q_recip)
TENSOR_Q_THROUGH(q_exp)
TENSOR_Q_THROUGH(q_log)
TENSOR_Q_THROUGH(q_log1p)
TENSOR_Q_THROUGH(q_sqrt)
TENSOR_Q_THROUGH(q_cos)
TENSOR_Q_THROUGH(q_sin)
TENSOR_Q_THROUGH(q_tan)
TENSOR_Q_THROUGH(q_cosh)
TENSOR_Q_THROUGH(q_sinh)
TENSOR_Q_THROUGH(q_tanh)
TENSOR_Q_THROUGH(q_erf)
TENSOR_Q_THROUGH(q_sum)
TENSOR_Q_THROUGH(q_sum_dim)
TENSOR_Q_THROUGH(q_prod)
TENSOR_Q_THROUGH(q_prod_dim)
TENSOR_Q_THROUGH(q_mean)
TENSOR_Q_THROUGH(q_mean_dim)
TENSOR_Q_THROUGH(q_cumsum)
TENSOR_Q_THROUGH(q_cumprod)
TENSOR_Q_THROUGH(q_cummin)
TENSOR_Q_THROUGH(q_cummax)
#undef TENSOR_Q_THROUGH

}  // namespace tensor::dispatch::defaults
