// The forwarders, each one instance of the one invocation path: kind and argument
// validation -> output metadata from the family's shape rule (shape_rules.hpp) ->
// hooks (hooks.hpp) -> backend entry -> wrap. An op the backend need not run (an
// identity transpose, a same-dtype cast) still passes the hooks; its body returns
// the input. Only the device-level entries at the end bypass the path.
#include "dispatch/dispatch.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <initializer_list>
#include <string>

#include "dispatch/autodiff.hpp"
#include "backends/common/element.hpp"
#include "dispatch/hooks.hpp"
#include "dispatch/settings.hpp"
#include "dispatch/shape_rules.hpp"
#include "dispatch/validate.hpp"
#include "tensor/error.hpp"

namespace tensor::dispatch {
namespace {

template <Family F>
__attribute__((always_inline)) inline FamilyFn<F> entry(OpCode op, DeviceId device) {
  if (op_family(op) != F)
    throw Error(fmt::format("[{}] op used through the wrong family; expected {}; got {}", op_name(op),
                            family_name(op_family(op)), family_name(F)));
  const Backend& b = backend_of(device);
  set_current_op(op);
  auto fn = b.get<F>(op);
  if (!fn) throw_not_implemented(op, b);
  return fn;
}

// Ops that only move or view data need Storage, not Arithmetic (op table: storage_only).
bool is_layout_op(OpCode op) { return op_info(op).storage_only; }

void check_usage(OpCode op, const DispatchTensor& t) {
  if (is_layout_op(op)) check_storage(op, t.device, t.dtype());
  else check_arithmetic(op, t.device, t.dtype());
}

// Kind check + dtype capability check for the first operand.
void check_first(OpCode op, const DispatchTensor& t) {
  check_kind(op, t);
  check_usage(op, t);
}

DType bool_out(DeviceId d) { return to_dtype(device_settings(d).bool_dtype); }
DType int_out(DeviceId d) { return to_dtype(device_settings(d).int_dtype); }

DType resolve_dtype(OpCode op, DeviceId device, Kind kind, std::optional<DType> dtype) {
  check_device(op_name(op), device);
  if (!dtype) return default_dtype(device, kind, op_name(op));
  if (kind_of_dtype(*dtype) != kind)
    throw DTypeError(fmt::format("[{}] dtype does not match the tensor kind; expected a {} dtype; got {}", op_name(op),
                                 kind_name(kind), dtype_name(*dtype)));
  return *dtype;
}

void check_create_kind(OpCode op, Kind kind) {
  const std::uint8_t bit = kind == Kind::Float ? kKindF : kind == Kind::Int ? kKindI : kind == Kind::Bool ? kKindB : 0;
  if (!(op_info(op).kinds & bit))
    throw DTypeError(fmt::format("[{}] wrong tensor kind; expected {}; got {}", op_name(op), kinds_str(op_info(op).kinds),
                                 kind_name(kind)));
}

// Index tensors: Int kind, on the same device as the data.
void check_indices(OpCode op, const DispatchTensor& a, const DispatchTensor& idx) {
  if (!idx.prim) throw Error(fmt::format("[{}] expected an index tensor; got an empty handle", op_name(op)));
  if (idx.kind != Kind::Int)
    throw DTypeError(fmt::format("[{}] indices must be an Int tensor; expected Int; got {}", op_name(op), kind_name(idx.kind)));
  check_same_device(op, a, idx);
}

// An enum argument within its enumerators (a value cast from an integer may not be).
template <class E>
void check_enum(OpCode op, const char* what, E v, E last, const char* names) {
  if (static_cast<unsigned>(v) > static_cast<unsigned>(last))
    throw ShapeError(fmt::format("[{}] {} out of range; expected one of {}; got {}", op_name(op), what, names,
                                 static_cast<unsigned>(v)));
}
void check_update(OpCode op, IndexingUpdateOp u) {
  check_enum(op, "update op", u, IndexingUpdateOp::Max, "Assign, Add, Mul, Min, Max");
}

void check_mask(OpCode op, const DispatchTensor& a, const DispatchTensor& mask) {
  if (!mask.prim) throw Error(fmt::format("[{}] expected a mask tensor; got an empty handle", op_name(op)));
  if (mask.kind != Kind::Bool)
    throw DTypeError(fmt::format("[{}] mask must be a Bool tensor; expected Bool; got {}", op_name(op), kind_name(mask.kind)));
  check_same_device(op, a, mask);
}

// The op table's empty-input rule.
bool empty_raises(OpCode op, Kind k) {
  const EmptyRule r = op_info(op).empty;
  return r == EmptyRule::Raises || (r == EmptyRule::IntRaises && k == Kind::Int);
}

// An op's body (backend entry + wrap): always inlined into the forwarder, since the
// hook step names it twice (direct path, hooked path) and an out-of-line body would
// cost a call on the direct path.
#define TENSOR_BODY [&]() __attribute__((always_inline))

// Output metadata shorthands for the hook step.
auto like(const DispatchTensor& a) {
  return [&a] { return OutMeta{a.shape(), a.dtype(), a.kind}; };
}
// `shape` is read only when hooks run, within the forwarder's return statement.
auto meta_of(const Shape& shape, DType dtype, Kind kind, bool known = true) {
  return [&shape, dtype, kind, known] { return OutMeta{shape, dtype, kind, known}; };
}
OpAttrs with_ints(std::int64_t x, std::int64_t y = 0, std::int64_t z = 0) {
  OpAttrs a;
  a.ints = {x, y, z};
  return a;
}
std::int64_t i64(std::size_t v) { return static_cast<std::int64_t>(v); }

// An extremum along `d` of a tensor with no elements: raises when the axis itself is
// empty (no answer), and is true (the result is empty too) when another dim is 0.
bool empty_off_axis(OpCode op, const Shape& s, std::size_t d) {
  if (s.num_elements() != 0) return false;
  if (s[d] == 0)
    throw ShapeError(fmt::format("[{}] expected a non-empty tensor along dim {}; got shape {}", op_name(op), d, s.to_string()));
  return true;
}

}  // namespace

std::string_view kind_name(Kind k) {
  switch (k) {
    case Kind::Float: return "Float";
    case Kind::Int: return "Int";
    case Kind::Bool: return "Bool";
    case Kind::QFloat: return "QFloat";
  }
  return "?";
}

Kind kind_of_dtype(DType dtype) {
  if (is_float(dtype)) return Kind::Float;
  if (is_int(dtype)) return Kind::Int;
  if (is_bool(dtype)) return Kind::Bool;
  return Kind::QFloat;
}

DType default_dtype(DeviceId device, Kind kind, std::string_view op) {
  const DeviceSettings& s = device_settings(device);
  switch (kind) {
    case Kind::Float: return to_dtype(s.float_dtype);
    case Kind::Int: return to_dtype(s.int_dtype);
    case Kind::Bool: return to_dtype(s.bool_dtype);
    case Kind::QFloat: break;
  }
  throw DTypeError(fmt::format("[{}] quantized tensors are not supported yet; expected Float, Int or Bool; got QFloat", op));
}

// ---- creation and transfer -------------------------------------------------------

DispatchTensor create(OpCode op, const Shape& shape, DeviceId device, Kind kind, std::optional<DType> dtype) {
  check_create_kind(op, kind);
  const DType dt = resolve_dtype(op, device, kind, dtype);
  check_storage(op, device, dt);
  check_alloc_shape(op, shape, dt);
  return invoke(
      op, device, TENSOR_BODY { return DispatchTensor(entry<Family::Create>(op, device)(shape, device, dt), kind); },
      meta_of(shape, dt, kind), [&] { OpAttrs a; a.dtype = dt; a.device = device; return a; });
}

namespace {
// The empty result of reducing `a` (which has no elements) along `d`.
DispatchTensor empty_reduced(const DispatchTensor& a, std::size_t d, Kind kind, DType dtype) {
  Shape out = a.shape();
  out[d] = 1;
  return create(OpCode::empty, out, a.device, kind, dtype);
}
}  // namespace

DispatchTensor full(const Shape& shape, Scalar value, DeviceId device, Kind kind, std::optional<DType> dtype) {
  const OpCode op = OpCode::full;
  check_create_kind(op, kind);
  const DType dt = resolve_dtype(op, device, kind, dtype);
  check_storage(op, device, dt);
  check_alloc_shape(op, shape, dt);
  return invoke(
      op, device, TENSOR_BODY { return DispatchTensor(entry<Family::Full>(op, device)(shape, value, device, dt), kind); },
      meta_of(shape, dt, kind), [&] { OpAttrs a; a.scalars[0] = value; a.dtype = dt; a.device = device; return a; });
}

DispatchTensor from_data(TensorData data, DeviceId device, Kind kind) {
  const OpCode op = OpCode::from_data;
  check_create_kind(op, kind);
  check_device("from_data", device);
  if (data.dtype() == DType::QFloat)
    throw DTypeError("[from_data] quantized data is not supported yet; expected a float, int or bool dtype; got qfloat");
  // Data of another kind is converted to the device's default dtype of the wanted kind.
  // So does bool data in another bool storage: every bool tensor of a device has its
  // bool dtype, whatever made it (zeros, comparisons, host data), so they mix freely.
  if (kind_of_dtype(data.dtype()) != kind || (kind == Kind::Bool && data.dtype() != default_dtype(device, kind, "from_data")))
    data = data.convert(default_dtype(device, kind, "from_data"));
  check_storage(op, device, data.dtype());
  return invoke(
      op, device, TENSOR_BODY { return DispatchTensor(entry<Family::FromData>(op, device)(std::move(data), device), kind); },
      [&] { return OutMeta{data.shape(), data.dtype(), kind}; }, [&] { OpAttrs a; a.device = device; return a; });
}

DispatchTensor random(const Shape& shape, const Distribution& dist, DeviceId device, Kind kind,
                      std::optional<DType> dtype) {
  const OpCode op = OpCode::random;
  check_create_kind(op, kind);
  const DType dt = resolve_dtype(op, device, kind, dtype);
  check_arithmetic(op, device, dt);
  check_alloc_shape(op, shape, dt);
  check_enum(op, "distribution kind", dist.kind, Distribution::Kind::Normal, "Default, Uniform, Bernoulli, Normal");
  if (dist.kind == Distribution::Kind::Uniform && !(dist.a <= dist.b))
    throw IndexError(fmt::format("[random] uniform bounds reversed; expected low <= high; got {} and {}", dist.a, dist.b));
  if (dist.kind == Distribution::Kind::Bernoulli && !(dist.a >= 0.0 && dist.a <= 1.0))
    throw IndexError(fmt::format("[random] bernoulli probability out of range; expected 0..1; got {}", dist.a));
  if (dist.kind == Distribution::Kind::Normal && !(dist.b >= 0.0))
    throw IndexError(fmt::format("[random] normal standard deviation negative; expected >= 0; got {}", dist.b));
  return invoke(
      op, device, TENSOR_BODY { return DispatchTensor(entry<Family::Random>(op, device)(shape, dist, device, dt), kind); },
      meta_of(shape, dt, kind), [&] { OpAttrs a; a.dtype = dt; a.device = device; a.options = &dist; return a; });
}

DispatchTensor arange(std::int64_t start, std::int64_t end, std::int64_t step, DeviceId device,
                      std::optional<DType> dtype) {
  const DType dt = resolve_dtype(OpCode::arange_step, device, Kind::Int, dtype);
  check_arithmetic(OpCode::arange_step, device, dt);
  if (step == 0) throw IndexError("[arange_step] step must not be zero; expected a nonzero step; got 0");
  const OpCode op = step == 1 ? OpCode::arange : OpCode::arange_step;
  const std::size_t count = arange_count(start, end, step);
  check_alloc_shape(op, Shape{count}, dt);
  return invoke(
      op, device,
      TENSOR_BODY {
        if (step == 1) return DispatchTensor(entry<Family::Range>(op, device)(start, end, device, dt), Kind::Int);
        return DispatchTensor(entry<Family::RangeStep>(op, device)(start, end, step, device, dt), Kind::Int);
      },
      [&] { return OutMeta{Shape{count}, dt, Kind::Int}; },
      [&] { OpAttrs a = with_ints(start, end, step); a.dtype = dt; a.device = device; return a; });
}

std::future<TensorData> into_data(DispatchTensor a) {
  const OpCode op = OpCode::into_data;
  if (!a.prim) throw Error("[into_data] expected a tensor; got an empty (moved-from) handle");
  const DeviceId d = a.device;
  return invoke(
      op, d, TENSOR_BODY { return entry<Family::IntoData>(op, d)(a.take()); },
      [&] { return OutMeta{a.shape(), a.dtype(), a.kind, false}; }, no_attrs, a);
}

TensorData read(DispatchTensor a) { return into_data(std::move(a)).get(); }

DispatchTensor to_device(DispatchTensor a, DeviceId device) {
  const OpCode op = OpCode::to_device;
  check_kind(op, a);
  if (a.device != device) {
    check_device("to_device", device);  // the destination must exist
    check_storage(op, device, a.dtype());
    if (ad::is_tracked(a) && a.device.type_id != device.type_id)
      throw DeviceError(DeviceError::Kind::Mismatch,
                        fmt::format("[to_device] a tensor that requires grad cannot leave its backend; expected a device "
                                    "like {}; got {} (detach() or inner() it first)",
                                    device_string(a.device), device_string(device)));
  }
  return invoke(
      op, a.device,
      TENSOR_BODY -> DispatchTensor {
        if (a.device == device) return std::move(a);
        const Kind k = a.kind;
        if (a.device.type_id == device.type_id) return {entry<Family::ToDevice>(op, a.device)(a.take(), device), k};
        // Across backends: read on the source, upload on the destination.
        return from_data(read(std::move(a)), device, k);
      },
      like(a), [&] { OpAttrs x; x.device = device; return x; }, a);
}

DispatchTensor cast(OpCode op, DispatchTensor a, DType dtype) {
  check_kind(op, a);
  const Kind want = op == OpCode::cast ? a.kind : op == OpCode::into_int ? Kind::Int : Kind::Float;
  if (kind_of_dtype(dtype) != want)
    throw DTypeError(fmt::format("[{}] target dtype of the wrong kind; expected a {} dtype; got {}", op_name(op),
                                 kind_name(want), dtype_name(dtype)));
  check_storage(op, a.device, a.dtype());
  check_storage(op, a.device, dtype);
  return invoke(
      op, a.device,
      TENSOR_BODY -> DispatchTensor {
        if (op == OpCode::cast && a.dtype() == dtype) return std::move(a);
        return {entry<Family::Cast>(op, a.device)(a.take(), dtype), want};
      },
      meta_of(a.shape(), dtype, want), [&] { OpAttrs x; x.dtype = dtype; return x; }, a);
}

// ---- elementwise -------------------------------------------------------------------

namespace {

__extension__ typedef __int128 Wide;  // holds every i64 and u64 value

// An integer scalar against an int tensor: where it lies relative to the dtype's
// range (-1 below, 0 inside, +1 above) and the nearest value inside the range.
// Clamp bounds and comparands are compared as numbers, so they must not wrap into
// the dtype as an arithmetic scalar does (u8 clamp(-5, 300) is clamp(0, 255)).
struct FittedScalar {
  int side = 0;
  Scalar value;
};
FittedScalar fit_to_int_dtype(Scalar s, DType t) {
  if (!is_int(t) || (s.kind() != Scalar::Kind::Int && s.kind() != Scalar::Kind::UInt)) return {0, s};
  const Wide v = s.kind() == Scalar::Kind::Int ? Wide{s.to_int64()} : Wide{s.to_uint64()};
  const unsigned bits = static_cast<unsigned>(dtype_size(t) * 8);
  const bool un = is_unsigned_int(t);
  const Wide lo = un ? 0 : -(Wide{1} << (bits - 1));
  const Wide hi = un ? (Wide{1} << bits) - 1 : (Wide{1} << (bits - 1)) - 1;
  auto as_scalar = [&](Wide w) { return un ? Scalar(static_cast<std::uint64_t>(w)) : Scalar(static_cast<std::int64_t>(w)); };
  if (v < lo) return {-1, as_scalar(lo)};
  if (v > hi) return {1, as_scalar(hi)};
  return {0, s};
}

OpAttrs with_scalars(Scalar x, Scalar y = Scalar()) {
  OpAttrs a;
  a.scalars = {x, y};
  return a;
}

}  // namespace

DispatchTensor unary(OpCode op, DispatchTensor a) {
  check_first(op, a);
  return invoke(
      op, a.device,
      TENSOR_BODY -> DispatchTensor {
        if (op == OpCode::transpose && a.shape().rank() < 2) return std::move(a);  // nothing to swap
        const Kind k = a.kind;
        return {entry<Family::Unary>(op, a.device)(a.take()), k};
      },
      [&] { return OutMeta{op == OpCode::transpose ? transposed_shape(a.shape()) : a.shape(), a.dtype(), a.kind}; },
      no_attrs, a);
}

DispatchTensor binary(OpCode op, DispatchTensor a, DispatchTensor b) {
  check_first(op, a);
  check_pair(op, a, b);
  const Shape out = broadcast_shapes(op, a.shape(), b.shape());
  const Kind k = a.kind;
  return invoke(
      op, a.device, TENSOR_BODY { return DispatchTensor(entry<Family::Binary>(op, a.device)(a.take(), b.take()), k); },
      meta_of(out, a.dtype(), k), no_attrs, a, b);
}

DispatchTensor scalar(OpCode op, DispatchTensor a, Scalar s) {
  check_first(op, a);
  const Scalar user = s;
  if (op == OpCode::clamp_min || op == OpCode::clamp_max) s = fit_to_int_dtype(s, a.dtype()).value;
  const Kind k = a.kind;
  return invoke(
      op, a.device, TENSOR_BODY { return DispatchTensor(entry<Family::Scalar>(op, a.device)(a.take(), s), k); }, like(a),
      [&] { return with_scalars(user); }, a);
}

DispatchTensor clamp(OpCode op, DispatchTensor a, Scalar lo, Scalar hi) {
  check_first(op, a);
  if (op == OpCode::clamp && lo.to_double() > hi.to_double())
    throw IndexError(fmt::format("[clamp] bounds reversed; expected min <= max; got {} and {}", lo.to_double(), hi.to_double()));
  const Scalar ulo = lo, uhi = hi;
  lo = fit_to_int_dtype(lo, a.dtype()).value;
  hi = fit_to_int_dtype(hi, a.dtype()).value;
  const Kind k = a.kind;
  return invoke(
      op, a.device, TENSOR_BODY { return DispatchTensor(entry<Family::Clamp>(op, a.device)(a.take(), lo, hi), k); }, like(a),
      [&] { return with_scalars(ulo, uhi); }, a);
}

DispatchTensor compare(OpCode op, DispatchTensor a, DispatchTensor b) {
  check_first(op, a);
  check_pair(op, a, b);
  const Shape out = broadcast_shapes(op, a.shape(), b.shape());
  const DeviceId d = a.device;
  const DType bt = bool_out(d);
  return invoke(
      op, d, TENSOR_BODY { return DispatchTensor(entry<Family::Compare>(op, d)(a.take(), b.take(), bt), Kind::Bool); },
      meta_of(out, bt, Kind::Bool), no_attrs, a, b);
}

DispatchTensor compare_scalar(OpCode op, DispatchTensor a, Scalar s) {
  check_first(op, a);
  const OpCode user_op = op;
  const Scalar user = s;
  // An integer comparand outside the dtype's range: the same answer from an
  // in-range comparison (below the range: x < s and x == s are false, x > s true).
  if (const FittedScalar f = fit_to_int_dtype(s, a.dtype()); f.side != 0) {
    const bool below = f.side < 0;
    const bool is_true = op == OpCode::not_equal_elem || (below ? op == OpCode::greater_elem || op == OpCode::greater_equal_elem
                                                                 : op == OpCode::lower_elem || op == OpCode::lower_equal_elem);
    // x >= min and x <= max always hold; x < min and x > max never do.
    op = below ? (is_true ? OpCode::greater_equal_elem : OpCode::lower_elem)
               : (is_true ? OpCode::lower_equal_elem : OpCode::greater_elem);
    s = f.value;
  }
  const DeviceId d = a.device;
  const DType bt = bool_out(d);
  return invoke(
      user_op, d, TENSOR_BODY { return DispatchTensor(entry<Family::CompareScalar>(op, d)(a.take(), s, bt), Kind::Bool); },
      meta_of(a.shape(), bt, Kind::Bool), [&] { return with_scalars(user); }, a);
}

DispatchTensor predicate(OpCode op, DispatchTensor a) {
  check_first(op, a);
  const DeviceId d = a.device;
  const DType bt = bool_out(d);
  return invoke(
      op, d, TENSOR_BODY { return DispatchTensor(entry<Family::Predicate>(op, d)(a.take(), bt), Kind::Bool); },
      meta_of(a.shape(), bt, Kind::Bool), no_attrs, a);
}

// Tracking flags (native on autodiff devices; identity and false elsewhere).
DispatchTensor set_require_grad(DispatchTensor a, bool on) {
  const OpCode op = OpCode::set_require_grad;
  check_kind(op, a);
  const DeviceId d = a.device;
  return invoke(
      op, d, TENSOR_BODY { return DispatchTensor(entry<Family::SetFlag>(op, d)(a.take(), on), Kind::Float); }, like(a),
      [&] { return with_ints(on ? 1 : 0); }, a);
}

bool is_require_grad(const DispatchTensor& a) {
  const OpCode op = OpCode::is_require_grad;
  check_kind(op, a);
  a.prim->add_ref();
  const Prim p = Prim::adopt(a.prim);
  return invoke(
      op, a.device, TENSOR_BODY { return entry<Family::Query>(op, a.device)(p); },
      [&] { return OutMeta{a.shape(), a.dtype(), a.kind, false}; }, no_attrs, a);
}

DispatchTensor matmul(DispatchTensor a, DispatchTensor b) {
  const OpCode op = OpCode::matmul;
  check_first(op, a);
  check_pair(op, a, b);
  const Shape out = matmul_shape(op, a.shape(), b.shape());
  check_alloc_shape(op, out, a.dtype());
  const Kind k = a.kind;
  return invoke(
      op, a.device, TENSOR_BODY { return DispatchTensor(entry<Family::Matmul>(op, a.device)(a.take(), b.take()), k); },
      meta_of(out, a.dtype(), k), no_attrs, a, b);
}

DispatchTensor cross(DispatchTensor a, DispatchTensor b, std::int64_t dim) {
  const OpCode op = OpCode::cross;
  check_first(op, a);
  check_pair(op, a, b);
  const Shape out = broadcast_shapes(op, a.shape(), b.shape());
  const std::size_t d = resolve_dim(op, dim, out.rank());
  if (a.shape()[d] != 3 || b.shape()[d] != 3)
    throw ShapeError(fmt::format("[cross] expected size 3 in dim {}; got {} and {}", d, a.shape().to_string(),
                                 b.shape().to_string()));
  return invoke(
      op, a.device, TENSOR_BODY { return DispatchTensor(entry<Family::Cross>(op, a.device)(a.take(), b.take(), d), Kind::Float); },
      meta_of(out, a.dtype(), Kind::Float), [&] { return with_ints(i64(d)); }, a, b);
}

DispatchTensor powi(DispatchTensor a, DispatchTensor b) {
  const OpCode op = OpCode::powi;
  check_first(op, a);
  check_indices(op, a, b);  // the exponent is an Int tensor
  const Shape out = broadcast_shapes(op, a.shape(), b.shape());
  const Kind k = a.kind;
  return invoke(
      op, a.device, TENSOR_BODY { return DispatchTensor(entry<Family::PowI>(op, a.device)(a.take(), b.take()), k); },
      meta_of(out, a.dtype(), k), no_attrs, a, b);
}

// ---- reductions --------------------------------------------------------------------

DispatchTensor reduce(OpCode op, DispatchTensor a) {
  check_first(op, a);
  if (empty_raises(op, a.kind))
    check_non_empty(op, a.shape(), op_info(op).empty == EmptyRule::IntRaises
                                       ? "int tensor (int mean of nothing is undefined)" : "tensor");
  const Kind k = a.kind;
  return invoke(
      op, a.device, TENSOR_BODY { return DispatchTensor(entry<Family::Reduce>(op, a.device)(a.take()), k); },
      [&] { return OutMeta{reduce_shape(), a.dtype(), k}; }, no_attrs, a);
}

DispatchTensor reduce_dim(OpCode op, DispatchTensor a, std::int64_t dim) {
  check_first(op, a);
  const std::size_t d = resolve_dim(op, dim, a.shape().rank());
  const EmptyRule rule = op_info(op).empty;
  // Extrema: an empty reduced dim has no answer; another empty dim gives the empty result.
  const bool empty_result = rule == EmptyRule::Raises && empty_off_axis(op, a.shape(), d);
  if (rule == EmptyRule::IntRaises && a.kind == Kind::Int && a.shape()[d] == 0)
    throw ShapeError(fmt::format("[{}] expected a non-empty axis for an int tensor; got shape {} dim {}", op_name(op),
                                 a.shape().to_string(), d));
  const Kind k = a.kind;
  return invoke(
      op, a.device,
      TENSOR_BODY {
        if (empty_result) return empty_reduced(a, d, k, a.dtype());
        return DispatchTensor(entry<Family::Dim>(op, a.device)(a.take(), d), k);
      },
      [&] { return OutMeta{op_info(op).keeps_shape ? a.shape() : reduce_dim_shape(a.shape(), d), a.dtype(), k}; },
      [&] { return with_ints(i64(d)); }, a);
}

DispatchTensor dim_index(OpCode op, DispatchTensor a, std::int64_t dim) {
  check_first(op, a);
  const std::size_t d = resolve_dim(op, dim, a.shape().rank());
  const bool empty_result = empty_off_axis(op, a.shape(), d);
  const DeviceId dev = a.device;
  const DType it = int_out(dev);
  return invoke(
      op, dev,
      TENSOR_BODY {
        if (empty_result) return empty_reduced(a, d, Kind::Int, it);
        return DispatchTensor(entry<Family::DimIndex>(op, dev)(a.take(), d, it), Kind::Int);
      },
      [&] { return OutMeta{reduce_dim_shape(a.shape(), d), it, Kind::Int}; }, [&] { return with_ints(i64(d)); }, a);
}

namespace {
using TensorPair = std::pair<DispatchTensor, DispatchTensor>;
TensorPair wrap_pair(PrimPair p, Kind k) { return {DispatchTensor(std::move(p.first), k), DispatchTensor(std::move(p.second), Kind::Int)}; }
}  // namespace

std::pair<DispatchTensor, DispatchTensor> dim_with_indices(OpCode op, DispatchTensor a, std::int64_t dim) {
  check_first(op, a);
  const std::size_t d = resolve_dim(op, dim, a.shape().rank());
  const bool empty_result = empty_off_axis(op, a.shape(), d);
  const DeviceId dev = a.device;
  const Kind k = a.kind;
  const DType it = int_out(dev);
  return invoke(
      op, dev,
      TENSOR_BODY {
        if (empty_result) return TensorPair{empty_reduced(a, d, k, a.dtype()), empty_reduced(a, d, Kind::Int, it)};
        return wrap_pair(entry<Family::DimWithIndices>(op, dev)(a.take(), d, it), k);
      },
      [&] { return OutMeta{reduce_dim_shape(a.shape(), d), a.dtype(), k}; }, [&] { return with_ints(i64(d)); }, a);
}

DispatchTensor any_all(OpCode op, DispatchTensor a) {
  check_kind(op, a);
  check_storage(op, a.device, a.dtype());
  const DeviceId d = a.device;
  const DType bt = bool_out(d);
  return invoke(
      op, d, TENSOR_BODY { return DispatchTensor(entry<Family::AnyAll>(op, d)(a.take(), bt), Kind::Bool); },
      [&] { return OutMeta{reduce_shape(), bt, Kind::Bool}; }, no_attrs, a);
}

DispatchTensor any_all_dim(OpCode op, DispatchTensor a, std::int64_t dim) {
  check_kind(op, a);
  check_storage(op, a.device, a.dtype());
  const std::size_t dd = resolve_dim(op, dim, a.shape().rank());
  const DeviceId d = a.device;
  const DType bt = bool_out(d);
  return invoke(
      op, d, TENSOR_BODY { return DispatchTensor(entry<Family::AnyAllDim>(op, d)(a.take(), dd, bt), Kind::Bool); },
      [&] { return OutMeta{reduce_dim_shape(a.shape(), dd), bt, Kind::Bool}; }, [&] { return with_ints(i64(dd)); }, a);
}

DispatchTensor sort(DispatchTensor a, std::int64_t dim, bool descending) {
  const OpCode op = OpCode::sort;
  check_first(op, a);
  const std::size_t d = resolve_dim(op, dim, a.shape().rank());
  const Kind k = a.kind;
  return invoke(
      op, a.device, TENSOR_BODY { return DispatchTensor(entry<Family::Sort>(op, a.device)(a.take(), d, descending), k); }, like(a),
      [&] { return with_ints(i64(d), descending); }, a);
}

std::pair<DispatchTensor, DispatchTensor> sort_with_indices(DispatchTensor a, std::int64_t dim, bool descending) {
  const OpCode op = OpCode::sort_with_indices;
  check_first(op, a);
  const std::size_t d = resolve_dim(op, dim, a.shape().rank());
  const DeviceId dev = a.device;
  const Kind k = a.kind;
  const DType it = int_out(dev);
  return invoke(
      op, dev, TENSOR_BODY { return wrap_pair(entry<Family::SortWithIndices>(op, dev)(a.take(), d, descending, it), k); }, like(a),
      [&] { return with_ints(i64(d), descending); }, a);
}

DispatchTensor argsort(DispatchTensor a, std::int64_t dim, bool descending) {
  const OpCode op = OpCode::argsort;
  check_first(op, a);
  const std::size_t d = resolve_dim(op, dim, a.shape().rank());
  const DeviceId dev = a.device;
  const DType it = int_out(dev);
  return invoke(
      op, dev, TENSOR_BODY { return DispatchTensor(entry<Family::Argsort>(op, dev)(a.take(), d, descending, it), Kind::Int); },
      meta_of(a.shape(), it, Kind::Int), [&] { return with_ints(i64(d), descending); }, a);
}

namespace {
std::size_t check_k(OpCode op, const DispatchTensor& a, std::int64_t dim, std::size_t k) {
  check_first(op, a);
  const std::size_t d = resolve_dim(op, dim, a.shape().rank());
  if (k > a.shape()[d])
    throw IndexError(fmt::format("[{}] k larger than the dim; expected k <= {}; got {}", op_name(op), a.shape()[d], k));
  return d;
}
}  // namespace

DispatchTensor topk(DispatchTensor a, std::int64_t dim, std::size_t k) {
  const OpCode op = OpCode::topk;
  const std::size_t d = check_k(op, a, dim, k);
  const Kind kind = a.kind;
  return invoke(
      op, a.device, TENSOR_BODY { return DispatchTensor(entry<Family::TopK>(op, a.device)(a.take(), d, k), kind); },
      [&] { return OutMeta{resized_shape(a.shape(), d, k), a.dtype(), kind}; }, [&] { return with_ints(i64(d), i64(k)); },
      a);
}

std::pair<DispatchTensor, DispatchTensor> topk_with_indices(DispatchTensor a, std::int64_t dim, std::size_t k) {
  const OpCode op = OpCode::topk_with_indices;
  const std::size_t d = check_k(op, a, dim, k);
  const DeviceId dev = a.device;
  const Kind kind = a.kind;
  const DType it = int_out(dev);
  return invoke(
      op, dev, TENSOR_BODY { return wrap_pair(entry<Family::TopKWithIndices>(op, dev)(a.take(), d, k, it), kind); },
      [&] { return OutMeta{resized_shape(a.shape(), d, k), a.dtype(), kind}; }, [&] { return with_ints(i64(d), i64(k)); },
      a);
}

DispatchTensor argtopk(DispatchTensor a, std::int64_t dim, std::size_t k) {
  const OpCode op = OpCode::argtopk;
  const std::size_t d = check_k(op, a, dim, k);
  const DeviceId dev = a.device;
  const DType it = int_out(dev);
  return invoke(
      op, dev, TENSOR_BODY { return DispatchTensor(entry<Family::ArgTopK>(op, dev)(a.take(), d, k, it), Kind::Int); },
      [&] { return OutMeta{resized_shape(a.shape(), d, k), it, Kind::Int}; }, [&] { return with_ints(i64(d), i64(k)); },
      a);
}

// ---- layout ------------------------------------------------------------------------

DispatchTensor reshape(OpCode op, DispatchTensor a, std::span<const std::int64_t> dims) {
  check_first(op, a);
  const Shape& s = a.shape();
  if (dims.size() > kMaxRank)
    throw ShapeError(fmt::format("[{}] rank too large; expected at most {}; got {}", op_name(op), kMaxRank, dims.size()));
  Shape out;
  if (op == OpCode::reshape) {
    std::size_t known = 1;
    int infer = -1;
    for (std::size_t i = 0; i < dims.size(); ++i) {
      if (dims[i] == -1 && infer < 0) { infer = static_cast<int>(i); out.push_back(1); continue; }
      if (dims[i] < 0)
        throw ShapeError(fmt::format("[reshape] invalid dim; expected >= 0 or a single -1; got {} at {}", dims[i], i));
      out.push_back(static_cast<std::size_t>(dims[i]));
    }
    known = out.checked_num_elements("reshape");  // the -1 dim is 1 here
    if (infer >= 0) {
      if (known == 0 || s.num_elements() % known != 0)
        throw ShapeError(fmt::format("[reshape] cannot infer the -1 dim; expected {} elements to divide by {}; got shape {}",
                                     s.num_elements(), known, s.to_string()));
      out[static_cast<std::size_t>(infer)] = s.num_elements() / known;
    }
    if (out.num_elements() != s.num_elements())
      throw ShapeError(fmt::format("[reshape] element count differs; expected {} elements (shape {}); got shape {}",
                                   s.num_elements(), s.to_string(), out.to_string()));
  } else {  // expand: right-aligned, source dims equal or 1; -1 keeps the source dim
    if (dims.size() < s.rank())
      throw ShapeError(fmt::format("[expand] target rank below source rank; expected >= {}; got {}", s.rank(), dims.size()));
    const std::size_t lead = dims.size() - s.rank();
    for (std::size_t i = 0; i < dims.size(); ++i) {
      const std::int64_t t = dims[i];
      if (i < lead) {
        if (t < 0) throw ShapeError(fmt::format("[expand] new leading dim must be >= 0; got {} at {}", t, i));
        out.push_back(static_cast<std::size_t>(t));
        continue;
      }
      const std::size_t src = s[i - lead];
      const std::size_t want = t == -1 ? src : static_cast<std::size_t>(t);
      if (t < -1 || (src != want && src != 1))
        throw ShapeError(fmt::format("[expand] cannot expand {} to the target; expected dim {} to be {} or 1; got {}",
                                     s.to_string(), i - lead, t, src));
      out.push_back(want);
    }
    check_view_shape(op, out);
  }
  const Kind k = a.kind;
  return invoke(
      op, a.device,
      TENSOR_BODY -> DispatchTensor {
        if (out == a.shape()) return std::move(a);
        return {entry<Family::Reshape>(op, a.device)(a.take(), out), k};
      },
      meta_of(out, a.dtype(), k), [&] { OpAttrs x; x.dims = out.dims(); return x; }, a);
}

DispatchTensor swap_dims(DispatchTensor a, std::int64_t d0, std::int64_t d1) {
  const OpCode op = OpCode::swap_dims;
  check_first(op, a);
  const std::size_t x = resolve_dim(op, d0, a.shape().rank());
  const std::size_t y = resolve_dim(op, d1, a.shape().rank());
  const Kind k = a.kind;
  return invoke(
      op, a.device,
      TENSOR_BODY -> DispatchTensor {
        if (x == y) return std::move(a);
        return {entry<Family::SwapDims>(op, a.device)(a.take(), x, y), k};
      },
      [&] { return OutMeta{swapped_shape(a.shape(), x, y), a.dtype(), k}; }, [&] { return with_ints(i64(x), i64(y)); }, a);
}

DispatchTensor axes(OpCode op, DispatchTensor a, std::span<const std::int64_t> ax) {
  check_first(op, a);
  const std::size_t r = a.shape().rank();
  if (op == OpCode::permute && ax.size() != r)
    throw ShapeError(fmt::format("[permute] expected {} axes (the rank); got {}", r, ax.size()));
  std::array<std::size_t, kMaxRank> res{};
  std::size_t n = 0;
  std::array<bool, kMaxRank> seen{};
  for (std::int64_t x : ax) {
    const std::size_t d = resolve_dim(op, x, r);
    if (seen[d]) throw IndexError(fmt::format("[{}] repeated axis; expected each dim once; got {} twice", op_name(op), d));
    seen[d] = true;
    res[n++] = d;
  }
  const Axes axes_resolved(res.data(), n);
  const Kind k = a.kind;
  return invoke(
      op, a.device,
      TENSOR_BODY -> DispatchTensor {
        if (op == OpCode::flip && n == 0) return std::move(a);
        return {entry<Family::Axes>(op, a.device)(a.take(), axes_resolved), k};
      },
      [&] { return OutMeta{op == OpCode::permute ? permuted_shape(a.shape(), axes_resolved) : a.shape(), a.dtype(), k}; },
      [&] { OpAttrs x; x.dims = axes_resolved; return x; }, a);
}

DispatchTensor slice(DispatchTensor a, std::span<const tensor::Slice> slices) {
  const OpCode op = OpCode::slice;
  check_first(op, a);
  const std::vector<DimSlice> ds = resolve_slices(op, a.shape(), slices);
  const Kind k = a.kind;
  return invoke(
      op, a.device, TENSOR_BODY { return DispatchTensor(entry<Family::Slice>(op, a.device)(a.take(), DimSlices(ds)), k); },
      [&] { return OutMeta{sliced_shape(a.shape(), ds), a.dtype(), k}; },
      [&] { OpAttrs x; x.slices = ds; return x; }, a);
}

DispatchTensor slice_assign(DispatchTensor a, std::span<const tensor::Slice> slices, DispatchTensor value) {
  const OpCode op = OpCode::slice_assign;
  check_first(op, a);
  check_pair(op, a, value);
  const std::vector<DimSlice> ds = resolve_slices(op, a.shape(), slices);
  const Shape want = sliced_shape(a.shape(), ds);
  // A slice that selects nothing (one that clamps to empty) is a no-op whatever the
  // value's shape, as in burn (its batched qr relies on it).
  if (want.num_elements() != 0 && !(value.shape() == want))
    throw ShapeError(fmt::format("[slice_assign] value shape differs from the slice; expected {}; got {}", want.to_string(),
                                 value.shape().to_string()));
  const Kind k = a.kind;
  return invoke(
      op, a.device,
      TENSOR_BODY -> DispatchTensor {
        if (want.num_elements() == 0) return std::move(a);  // nothing to write
        return {entry<Family::SliceAssign>(op, a.device)(a.take(), DimSlices(ds), value.take()), k};
      },
      like(a), [&] { OpAttrs x; x.slices = ds; return x; }, a, value);
}

DispatchTensor repeat_dim(DispatchTensor a, std::int64_t dim, std::size_t times) {
  const OpCode op = OpCode::repeat_dim;
  check_first(op, a);
  const std::size_t d = resolve_dim(op, dim, a.shape().rank());
  check_alloc_shape(op, repeated_shape(op, a.shape(), d, times), a.dtype());
  const Kind k = a.kind;
  return invoke(
      op, a.device,
      TENSOR_BODY -> DispatchTensor {
        if (times == 1) return std::move(a);
        return {entry<Family::RepeatDim>(op, a.device)(a.take(), d, times), k};
      },
      [&] { return OutMeta{resized_shape(a.shape(), d, a.shape()[d] * times), a.dtype(), k}; },
      [&] { return with_ints(i64(d), i64(times)); }, a);
}

DispatchTensor cat(std::vector<DispatchTensor> parts, std::int64_t dim) {
  const OpCode op = OpCode::cat;
  if (parts.empty()) throw ShapeError("[cat] expected at least one tensor; got an empty list");
  check_first(op, parts[0]);
  const std::size_t r = parts[0].shape().rank();
  const std::size_t d = resolve_dim(op, dim, r);
  for (std::size_t i = 1; i < parts.size(); ++i) {
    check_pair(op, parts[0], parts[i]);
    if (parts[i].shape().rank() != r)
      throw ShapeError(fmt::format("[cat] ranks differ; expected {}; got {} for tensor {}", r, parts[i].shape().rank(), i));
  }
  // Empty tensors are skipped (burn semantics); the rest must agree off the cat dim.
  const Primitive* first = nullptr;
  for (const auto& p : parts) {
    if (p.shape().num_elements() == 0) continue;
    if (!first) { first = p.prim; continue; }
    for (std::size_t j = 0; j < r; ++j)
      if (j != d && p.shape()[j] != first->shape()[j])
        throw ShapeError(fmt::format("[cat] shapes differ outside dim {}; expected {}; got {}", d, first->shape().to_string(),
                                     p.shape().to_string()));
  }
  Shape out = first ? first->shape() : parts[0].shape();
  out[d] = 0;
  for (const auto& p : parts)
    if (!first || p.shape().num_elements() != 0) out[d] = checked_dim_sum(op, out[d], p.shape()[d]);
  check_alloc_shape(op, out, parts[0].dtype());
  const Kind k = parts[0].kind;
  const DeviceId dev = parts[0].device;
  const DType dt = parts[0].dtype();
  return invoke(
      op, dev,
      TENSOR_BODY -> DispatchTensor {
        std::vector<Prim> prims;
        for (auto& p : parts)
          if (p.shape().num_elements() != 0) prims.push_back(p.take());
        if (prims.empty()) return {entry<Family::Create>(OpCode::empty, dev)(out, dev, dt), k};
        if (prims.size() == 1) return {std::move(prims[0]), k};
        return {entry<Family::Cat>(op, dev)(std::move(prims), d), k};
      },
      meta_of(out, dt, k), [&] { return with_ints(i64(d)); }, parts);
}

DispatchTensor unfold(DispatchTensor a, std::int64_t dim, std::size_t size, std::size_t step) {
  const OpCode op = OpCode::unfold;
  check_first(op, a);
  const std::size_t d = resolve_dim(op, dim, a.shape().rank());
  if (size == 0 || step == 0)
    throw IndexError(fmt::format("[unfold] expected size >= 1 and step >= 1; got size {} step {}", size, step));
  if (a.shape().rank() + 1 > kMaxRank)
    throw ShapeError(fmt::format("[unfold] result rank too large; expected at most {}; got {}", kMaxRank, a.shape().rank() + 1));
  unfolded_shape(op, a.shape(), d, size, step);
  const Kind k = a.kind;
  return invoke(
      op, a.device, TENSOR_BODY { return DispatchTensor(entry<Family::Unfold>(op, a.device)(a.take(), d, size, step), k); },
      [&] { return OutMeta{unfold_shape(a.shape(), d, size, step), a.dtype(), k}; },
      [&] { return with_ints(i64(d), i64(size), i64(step)); }, a);
}

// ---- indexing ------------------------------------------------------------------------

DispatchTensor gather(DispatchTensor a, std::int64_t dim, DispatchTensor idx) {
  const OpCode op = OpCode::gather;
  check_first(op, a);
  check_indices(op, a, idx);
  const std::size_t d = resolve_dim(op, dim, a.shape().rank());
  if (idx.shape().rank() != a.shape().rank())
    throw ShapeError(fmt::format("[gather] indices rank differs; expected {}; got {}", a.shape().rank(), idx.shape().rank()));
  for (std::size_t i = 0; i < a.shape().rank(); ++i)
    if (i != d && idx.shape()[i] != a.shape()[i])
      throw ShapeError(fmt::format("[gather] indices shape differs outside dim {}; expected {}; got {}", d,
                                   a.shape().to_string(), idx.shape().to_string()));
  const Kind k = a.kind;
  return invoke(
      op, a.device, TENSOR_BODY { return DispatchTensor(entry<Family::Gather>(op, a.device)(a.take(), d, idx.take()), k); },
      meta_of(idx.shape(), a.dtype(), k), [&] { return with_ints(i64(d)); }, a, idx);
}

DispatchTensor scatter(OpCode op, DispatchTensor a, std::int64_t dim, DispatchTensor idx, DispatchTensor values,
                       IndexingUpdateOp update) {
  check_first(op, a);
  check_indices(op, a, idx);
  check_pair(op, a, values);
  check_update(op, update);
  const std::size_t d = resolve_dim(op, dim, a.shape().rank());
  if (!(idx.shape() == values.shape()) || idx.shape().rank() != a.shape().rank())
    throw ShapeError(fmt::format("[{}] indices and values must have one shape of the tensor's rank; got {} and {} for {}",
                                 op_name(op), idx.shape().to_string(), values.shape().to_string(), a.shape().to_string()));
  for (std::size_t i = 0; i < a.shape().rank(); ++i)
    if (i != d && idx.shape()[i] > a.shape()[i])
      throw ShapeError(fmt::format("[{}] indices larger than the tensor outside dim {}; expected <= {}; got {}", op_name(op), d,
                                   a.shape().to_string(), idx.shape().to_string()));
  const Kind k = a.kind;
  return invoke(
      op, a.device,
      TENSOR_BODY -> DispatchTensor {
        if (op == OpCode::scatter)
          return {entry<Family::ScatterUpdate>(op, a.device)(a.take(), d, idx.take(), values.take(), update), k};
        return {entry<Family::Scatter>(op, a.device)(a.take(), d, idx.take(), values.take()), k};
      },
      like(a), [&] { OpAttrs x = with_ints(i64(d)); x.update = update; return x; }, a, idx, values);
}

DispatchTensor select(DispatchTensor a, std::int64_t dim, DispatchTensor idx) {
  const OpCode op = OpCode::select;
  check_first(op, a);
  check_indices(op, a, idx);
  const std::size_t d = resolve_dim(op, dim, a.shape().rank());
  if (idx.shape().rank() != 1)
    throw ShapeError(fmt::format("[select] expected 1-D indices; got shape {}", idx.shape().to_string()));
  const Kind k = a.kind;
  return invoke(
      op, a.device, TENSOR_BODY { return DispatchTensor(entry<Family::Select>(op, a.device)(a.take(), d, idx.take()), k); },
      [&] { return OutMeta{resized_shape(a.shape(), d, idx.shape()[0]), a.dtype(), k}; },
      [&] { return with_ints(i64(d)); }, a, idx);
}

DispatchTensor select_assign(OpCode op, DispatchTensor a, std::int64_t dim, DispatchTensor idx, DispatchTensor values,
                             IndexingUpdateOp update) {
  check_first(op, a);
  check_indices(op, a, idx);
  check_pair(op, a, values);
  check_update(op, update);
  const std::size_t d = resolve_dim(op, dim, a.shape().rank());
  if (idx.shape().rank() != 1)
    throw ShapeError(fmt::format("[{}] expected 1-D indices; got shape {}", op_name(op), idx.shape().to_string()));
  Shape want = a.shape();
  want[d] = idx.shape()[0];
  if (!(values.shape() == want))
    throw ShapeError(fmt::format("[{}] values shape differs; expected {}; got {}", op_name(op), want.to_string(),
                                 values.shape().to_string()));
  const Kind k = a.kind;
  return invoke(
      op, a.device,
      TENSOR_BODY -> DispatchTensor {
        if (op == OpCode::select_assign)
          return {entry<Family::SelectUpdate>(op, a.device)(a.take(), d, idx.take(), values.take(), update), k};
        return {entry<Family::SelectAssign>(op, a.device)(a.take(), d, idx.take(), values.take()), k};
      },
      like(a), [&] { OpAttrs x = with_ints(i64(d)); x.update = update; return x; }, a, idx, values);
}

DispatchTensor mask_where(DispatchTensor a, DispatchTensor mask, DispatchTensor value) {
  const OpCode op = OpCode::mask_where;
  check_first(op, a);
  check_mask(op, a, mask);
  check_pair(op, a, value);
  const Shape out = broadcast_shapes(op, broadcast_shapes(op, a.shape(), mask.shape()), value.shape());
  // As in burn, the tensor broadcasts too: it is repeated (a fresh buffer, never a
  // stride-0 view the backend might write through) up to the result's shape.
  for (std::size_t i = 0; i < out.rank(); ++i)
    if (a.shape()[i] != out[i]) a = repeat_dim(std::move(a), static_cast<std::int64_t>(i), out[i]);
  const Kind k = a.kind;
  return invoke(
      op, a.device,
      TENSOR_BODY { return DispatchTensor(entry<Family::MaskWhere>(op, a.device)(a.take(), mask.take(), value.take()), k); },
      meta_of(out, a.dtype(), k), no_attrs, a, mask, value);
}

DispatchTensor mask_fill(DispatchTensor a, DispatchTensor mask, Scalar value) {
  const OpCode op = OpCode::mask_fill;
  check_first(op, a);
  check_mask(op, a, mask);
  const Shape out = broadcast_shapes(op, a.shape(), mask.shape());
  if (!(out == a.shape()))
    throw ShapeError(fmt::format("[mask_fill] mask must broadcast to the tensor's shape; expected {}; got {}",
                                 a.shape().to_string(), mask.shape().to_string()));
  const Kind k = a.kind;
  return invoke(
      op, a.device, TENSOR_BODY { return DispatchTensor(entry<Family::MaskFill>(op, a.device)(a.take(), mask.take(), value), k); },
      meta_of(out, a.dtype(), k), [&] { return with_scalars(value); }, a, mask);
}

DispatchTensor mask_select(DispatchTensor a, DispatchTensor mask) {
  const OpCode op = OpCode::mask_select;
  check_first(op, a);
  check_mask(op, a, mask);
  if (!(broadcast_shapes(op, a.shape(), mask.shape()) == a.shape()))
    throw ShapeError(fmt::format("[mask_select] mask must broadcast to the tensor's shape; expected {}; got {}",
                                 a.shape().to_string(), mask.shape().to_string()));
  const Kind k = a.kind;
  return invoke(
      op, a.device, TENSOR_BODY { return DispatchTensor(entry<Family::MaskSelect>(op, a.device)(a.take(), mask.take()), k); },
      [&] { return OutMeta{Shape{0}, a.dtype(), k, false}; }, no_attrs, a, mask);
}

DispatchTensor argwhere(DispatchTensor a) {
  const OpCode op = OpCode::argwhere;
  check_kind(op, a);
  const DeviceId d = a.device;
  const DType it = int_out(d);
  return invoke(
      op, d, TENSOR_BODY { return DispatchTensor(entry<Family::Argwhere>(op, d)(a.take(), it), Kind::Int); },
      [&] { return OutMeta{Shape{0, a.shape().rank()}, it, Kind::Int, false}; }, no_attrs, a);
}

DispatchTensor grid_sample_2d(DispatchTensor a, DispatchTensor grid, const GridSampleOptions& options) {
  const OpCode op = OpCode::grid_sample_2d;
  check_first(op, a);
  check_pair(op, a, grid, false);
  check_enum(op, "mode", options.mode, GridSampleOptions::Mode::Bicubic, "Bilinear, Nearest, Bicubic");
  check_enum(op, "padding mode", options.padding, GridSampleOptions::Padding::Reflection, "Zeros, Border, Reflection");
  const Shape& s = a.shape();
  const Shape& g = grid.shape();
  if (s.rank() != 4 || g.rank() != 4 || g[3] != 2 || g[0] != s[0])
    throw ShapeError(fmt::format("[grid_sample_2d] expected input [N,C,H,W] and grid [N,Hout,Wout,2]; got {} and {}",
                                 s.to_string(), g.to_string()));
  return invoke(
      op, a.device,
      TENSOR_BODY { return DispatchTensor(entry<Family::GridSample>(op, a.device)(a.take(), grid.take(), options), Kind::Float); },
      [&] { return OutMeta{Shape{s[0], s[1], g[1], g[2]}, a.dtype(), Kind::Float}; },
      [&] { OpAttrs x; x.options = &options; return x; }, a, grid);
}

namespace {
// gather_nd / scatter_nd: indices [.., k] with 1 <= k <= rank; the result (gather) or the
// values (scatter) are the indices' leading dims followed by a's dims from k on ([1] when
// that is empty).
Shape checked_nd_slices_shape(OpCode op, const Shape& s, const Shape& is) {
  if (is.rank() < 1 || is[is.rank() - 1] < 1 || is[is.rank() - 1] > s.rank())
    throw ShapeError(fmt::format("[{}] the last dim of the indices is the index depth; expected 1..{}; got indices of shape {} "
                                 "for a tensor of shape {}",
                                 op_name(op), s.rank(), is.to_string(), s.to_string()));
  return nd_slices_shape(s, is);
}
}  // namespace

// An index component outside its dim raises IndexError (checked by the entry: it needs the
// index values).
DispatchTensor gather_nd(DispatchTensor a, DispatchTensor idx) {
  const OpCode op = OpCode::gather_nd;
  check_first(op, a);
  check_indices(op, a, idx);
  const Shape out = checked_nd_slices_shape(op, a.shape(), idx.shape());
  check_alloc_shape(op, out, a.dtype());
  const Kind k = a.kind;
  return invoke(
      op, a.device, TENSOR_BODY { return DispatchTensor(entry<Family::GatherNd>(op, a.device)(a.take(), idx.take()), k); },
      meta_of(out, a.dtype(), k), no_attrs, a, idx);
}

DispatchTensor scatter_nd(DispatchTensor a, DispatchTensor idx, DispatchTensor values, IndexingUpdateOp update) {
  const OpCode op = OpCode::scatter_nd;
  check_first(op, a);
  check_indices(op, a, idx);
  check_pair(op, a, values);
  check_update(op, update);
  const Shape want = checked_nd_slices_shape(op, a.shape(), idx.shape());
  if (!(values.shape() == want))
    throw ShapeError(fmt::format("[scatter_nd] values must have the indices' leading dims and the remaining dims; expected {}; "
                                 "got {}",
                                 want.to_string(), values.shape().to_string()));
  const Kind k = a.kind;
  return invoke(
      op, a.device,
      TENSOR_BODY {
        return DispatchTensor(entry<Family::ScatterNd>(op, a.device)(a.take(), idx.take(), values.take(), update), k);
      },
      like(a), [&] { OpAttrs x; x.update = update; return x; }, a, idx, values);
}

// ---- module ops (Float only) ---------------------------------------------------------

namespace {

// An operand of a module op: present, Float, on the first operand's device. Optional
// operands are checked only when present (a null prim).
void check_operand(OpCode op, const DispatchTensor& first, const DispatchTensor& t, const char* what) {
  if (!t.prim) throw Error(fmt::format("[{}] expected a {} tensor; got an empty handle", op_name(op), what));
  if (t.kind != Kind::Float)
    throw DTypeError(fmt::format("[{}] {} must be a Float tensor; expected Float; got {}", op_name(op), what, kind_name(t.kind)));
  check_same_device(op, first, t);
}
void check_module_first(OpCode op, const DispatchTensor& t, const char* what) {
  if (!t.prim) throw Error(fmt::format("[{}] expected a {} tensor; got an empty handle", op_name(op), what));
  check_first(op, t);
}
const Shape* shape_or_null(const DispatchTensor& t) { return t.prim ? &t.shape() : nullptr; }

// A module op computes in one float dtype on every device: its present float operands must
// all have the first one's. Refused here, before any backend: a backend that converted
// (the cpu) and one that read the raw words as the first's dtype (vulkan) disagreed.
struct Named {
  const char* what;
  const DispatchTensor& t;
};
void check_one_float_dtype(OpCode op, std::initializer_list<Named> operands) {
  const DType want = operands.begin()->t.dtype();
  bool same = true;
  for (const Named& n : operands) same = same && (!n.t.prim || n.t.dtype() == want);
  if (same) return;
  std::string got;
  for (const Named& n : operands)
    if (n.t.prim) got += fmt::format("{}{} {}", got.empty() ? "" : ", ", dtype_name(n.t.dtype()), n.what);
  throw DTypeError(fmt::format("[{}] operands must share one float dtype; expected {} for every operand; got {}", op_name(op),
                               dtype_name(want), got));
}

template <std::size_t N>
tensor::nn::ConvOptions<N> conv_options(const ConvArgs& a) {
  tensor::nn::ConvOptions<N> o;
  for (std::size_t i = 0; i < N; ++i) {
    o.stride[i] = a.stride[i];
    o.padding[i] = a.padding[i];
    o.dilation[i] = a.dilation[i];
  }
  o.groups = a.groups;
  return o;
}
template <std::size_t N>
tensor::nn::ConvTransposeOptions<N> conv_transpose_options(const ConvArgs& a) {
  tensor::nn::ConvTransposeOptions<N> o;
  for (std::size_t i = 0; i < N; ++i) {
    o.stride[i] = a.stride[i];
    o.padding[i] = a.padding[i];
    o.dilation[i] = a.dilation[i];
    o.padding_out[i] = a.padding_out[i];
  }
  o.groups = a.groups;
  return o;
}

std::size_t conv_rank(OpCode op) {
  switch (op) {
    case OpCode::conv1d: case OpCode::conv_transpose1d: return 1;
    case OpCode::conv3d: case OpCode::conv_transpose3d: return 3;
    default: return 2;
  }
}
bool conv_is_transpose(OpCode op) {
  return op == OpCode::conv_transpose1d || op == OpCode::conv_transpose2d || op == OpCode::conv_transpose3d ||
         op == OpCode::conv_transpose_x_backward || op == OpCode::conv_transpose_weight_backward;
}

// The forward output shape of a conv (transpose) of rank args.rank: validates every option.
Shape conv_out_shape(OpCode op, bool transpose, const ConvArgs& a, const Shape& x, const Shape& w, const Shape* bias) {
  const std::string_view name = op_name(op);
  if (a.rank < 1 || a.rank > 3)
    throw ShapeError(fmt::format("[{}] convolution rank out of range; expected 1, 2 or 3; got {}", name, a.rank));
  if (transpose) {
    switch (a.rank) {
      case 1: return tensor::nn::conv_transpose_output_shape<1>(name, x, w, conv_transpose_options<1>(a), bias);
      case 2: return tensor::nn::conv_transpose_output_shape<2>(name, x, w, conv_transpose_options<2>(a), bias);
      default: return tensor::nn::conv_transpose_output_shape<3>(name, x, w, conv_transpose_options<3>(a), bias);
    }
  }
  switch (a.rank) {
    case 1: return tensor::nn::conv_output_shape<1>(name, x, w, conv_options<1>(a), bias);
    case 2: return tensor::nn::conv_output_shape<2>(name, x, w, conv_options<2>(a), bias);
    default: return tensor::nn::conv_output_shape<3>(name, x, w, conv_options<3>(a), bias);
  }
}

// The args a backend sees: only the op's rank dims used, the rest neutral.
ConvArgs normalized(ConvArgs a, std::size_t rank) {
  a.rank = rank;
  for (std::size_t i = rank; i < 3; ++i) {
    a.stride[i] = 1;
    a.padding[i] = 0;
    a.dilation[i] = 1;
    a.padding_out[i] = 0;
  }
  return a;
}

void check_same_shape(OpCode op, const char* what, const Shape& got, const Shape& want) {
  if (!(got == want))
    throw ShapeError(fmt::format("[{}] {} has the wrong shape; expected {}; got {}", op_name(op), what, want.to_string(),
                                 got.to_string()));
}

}  // namespace

DispatchTensor conv(OpCode op, DispatchTensor x, DispatchTensor weight, DispatchTensor bias, const ConvArgs& args) {
  check_module_first(op, x, "x");
  check_operand(op, x, weight, "weight");
  if (bias.prim) check_operand(op, x, bias, "bias");
  check_one_float_dtype(op, {{"x", x}, {"weight", weight}, {"bias", bias}});
  const ConvArgs a = normalized(args, conv_rank(op));
  const Shape out = conv_out_shape(op, conv_is_transpose(op), a, x.shape(), weight.shape(), shape_or_null(bias));
  check_alloc_shape(op, out, x.dtype());
  return invoke(
      op, x.device,
      TENSOR_BODY {
        return DispatchTensor(entry<Family::Conv>(op, x.device)(x.take(), weight.take(), bias.take(), a), Kind::Float);
      },
      meta_of(out, x.dtype(), Kind::Float), [&] { OpAttrs o; o.options = &a; return o; }, x, weight, bias);
}

// a, b: (dy, weight) for the x gradient, (x, dy) for the weight gradient; `target` is
// the shape of the gradient (x's or weight's).
DispatchTensor conv_backward(OpCode op, DispatchTensor a, DispatchTensor b, const Shape& target, const ConvArgs& args) {
  const bool for_x = op == OpCode::conv_x_backward || op == OpCode::conv_transpose_x_backward;
  check_module_first(op, a, for_x ? "output gradient" : "x");
  check_operand(op, a, b, for_x ? "weight" : "output gradient");
  check_one_float_dtype(op, {{for_x ? "output gradient" : "x", a}, {for_x ? "weight" : "output gradient", b}});
  const ConvArgs c = normalized(args, args.rank);
  const Shape& x = for_x ? target : a.shape();
  const Shape& w = for_x ? b.shape() : target;
  const Shape& dy = for_x ? a.shape() : b.shape();
  const Shape out = conv_out_shape(op, conv_is_transpose(op), c, x, w, nullptr);
  check_same_shape(op, "output gradient", dy, out);
  check_alloc_shape(op, target, a.dtype());
  return invoke(
      op, a.device,
      TENSOR_BODY {
        return DispatchTensor(entry<Family::ConvBackward>(op, a.device)(a.take(), b.take(), target, c), Kind::Float);
      },
      meta_of(target, a.dtype(), Kind::Float), [&] { OpAttrs o; o.options = &c; o.shape = &target; return o; }, a, b);
}

DispatchTensor conv_backward_x(DispatchTensor dy, DispatchTensor weight, const Shape& x_shape, const ConvArgs& args) {
  return conv_backward(OpCode::conv_x_backward, std::move(dy), std::move(weight), x_shape, args);
}
DispatchTensor conv_backward_weight(DispatchTensor x, DispatchTensor dy, const Shape& weight_shape, const ConvArgs& args) {
  return conv_backward(OpCode::conv_weight_backward, std::move(x), std::move(dy), weight_shape, args);
}
DispatchTensor conv_transpose_backward_x(DispatchTensor dy, DispatchTensor weight, const Shape& x_shape,
                                         const ConvArgs& args) {
  return conv_backward(OpCode::conv_transpose_x_backward, std::move(dy), std::move(weight), x_shape, args);
}
DispatchTensor conv_transpose_backward_weight(DispatchTensor x, DispatchTensor dy, const Shape& weight_shape,
                                              const ConvArgs& args) {
  return conv_backward(OpCode::conv_transpose_weight_backward, std::move(x), std::move(dy), weight_shape, args);
}

DispatchTensor conv_backward_bias(DispatchTensor dy) {
  const OpCode op = OpCode::conv_bias_backward;
  check_module_first(op, dy, "output gradient");
  const Shape& s = dy.shape();
  if (s.rank() < 3 || s.rank() > 5)
    throw ShapeError(fmt::format("[conv_bias_backward] output gradient has the wrong rank; expected [N, C, *spatial] "
                                 "with 1 to 3 spatial dims; got {}",
                                 s.to_string()));
  const Shape out{s[1]};
  return invoke(
      op, dy.device,
      TENSOR_BODY { return DispatchTensor(entry<Family::ConvBiasBackward>(op, dy.device)(dy.take()), Kind::Float); },
      meta_of(out, dy.dtype(), Kind::Float), no_attrs, dy);
}

namespace {

std::size_t pool_rank(OpCode op) {
  switch (op) {
    case OpCode::max_pool1d: case OpCode::max_pool1d_with_indices: case OpCode::avg_pool1d:
    case OpCode::adaptive_avg_pool1d:
      return 1;
    case OpCode::adaptive_avg_pool3d:
      return 3;
    default:
      return 2;
  }
}

template <std::size_t N>
std::array<std::int64_t, N> first_n(const std::array<std::int64_t, 3>& v) {
  std::array<std::int64_t, N> o{};
  for (std::size_t i = 0; i < N; ++i) o[i] = v[i];
  return o;
}
template <std::size_t N>
Shape pool_out_n(OpCode op, OpCode kind, const PoolArgs& a, const Shape& x) {
  const std::string_view name = op_name(op);
  if (kind == OpCode::adaptive_avg_pool2d)
    return tensor::nn::adaptive_avg_pool_output_shape<N>(name, x, first_n<N>(a.output_size));
  if (kind == OpCode::avg_pool2d) {
    tensor::nn::AvgPoolOptions<N> o;
    o.kernel_size = first_n<N>(a.kernel);
    o.stride = first_n<N>(a.stride);
    o.padding = first_n<N>(a.padding);
    o.ceil_mode = a.ceil_mode;
    o.count_include_pad = a.count_include_pad;
    return tensor::nn::avg_pool_output_shape<N>(name, x, o);
  }
  tensor::nn::MaxPoolOptions<N> o;
  o.kernel_size = first_n<N>(a.kernel);
  o.stride = first_n<N>(a.stride);
  o.padding = first_n<N>(a.padding);
  o.dilation = first_n<N>(a.dilation);
  o.ceil_mode = a.ceil_mode;
  return tensor::nn::max_pool_output_shape<N>(name, x, o);
}
// kind: max_pool2d, avg_pool2d or adaptive_avg_pool2d (the rule, whatever the rank).
Shape pool_out_shape(OpCode op, OpCode kind, const PoolArgs& a, const Shape& x) {
  if (a.rank == 3 && kind == OpCode::adaptive_avg_pool2d)
    return tensor::nn::adaptive_avg_pool_output_shape<3>(op_name(op), x, first_n<3>(a.output_size));
  if (a.rank < 1 || a.rank > 2)
    throw ShapeError(fmt::format("[{}] pooling rank out of range; expected 1 or 2 (3 for adaptive average pooling); got {}",
                                 op_name(op), a.rank));
  return a.rank == 1 ? pool_out_n<1>(op, kind, a, x) : pool_out_n<2>(op, kind, a, x);
}
OpCode pool_kind(OpCode op) {
  switch (op) {
    case OpCode::avg_pool1d: case OpCode::avg_pool2d: case OpCode::avg_pool_backward: return OpCode::avg_pool2d;
    case OpCode::adaptive_avg_pool1d: case OpCode::adaptive_avg_pool2d: case OpCode::adaptive_avg_pool3d:
    case OpCode::adaptive_avg_pool_backward:
      return OpCode::adaptive_avg_pool2d;
    default: return OpCode::max_pool2d;
  }
}
PoolArgs normalized(PoolArgs a, std::size_t rank) {
  a.rank = rank;
  for (std::size_t i = rank; i < 3; ++i) {
    a.kernel[i] = 1;
    a.stride[i] = 1;
    a.padding[i] = 0;
    a.dilation[i] = 1;
    a.output_size[i] = 1;
  }
  return a;
}

}  // namespace

DispatchTensor pool(OpCode op, DispatchTensor x, const PoolArgs& args) {
  check_module_first(op, x, "x");
  const PoolArgs a = normalized(args, pool_rank(op));
  const Shape out = pool_out_shape(op, pool_kind(op), a, x.shape());
  check_alloc_shape(op, out, x.dtype());
  return invoke(
      op, x.device, TENSOR_BODY { return DispatchTensor(entry<Family::Pool>(op, x.device)(x.take(), a), Kind::Float); },
      meta_of(out, x.dtype(), Kind::Float), [&] { OpAttrs o; o.options = &a; return o; }, x);
}

std::pair<DispatchTensor, DispatchTensor> max_pool_with_indices(OpCode op, DispatchTensor x, const PoolArgs& args) {
  check_module_first(op, x, "x");
  const PoolArgs a = normalized(args, pool_rank(op));
  const Shape out = pool_out_shape(op, OpCode::max_pool2d, a, x.shape());
  check_alloc_shape(op, out, x.dtype());
  const DType it = int_out(x.device);
  return invoke(
      op, x.device,
      TENSOR_BODY {
        auto [v, i] = entry<Family::PoolWithIndices>(op, x.device)(x.take(), a, it);
        return std::pair{DispatchTensor(std::move(v), Kind::Float), DispatchTensor(std::move(i), Kind::Int)};
      },
      meta_of(out, x.dtype(), Kind::Float), [&] { OpAttrs o; o.options = &a; o.dtype = it; return o; }, x);
}

// avg_pool_backward / adaptive_avg_pool_backward: dy [N, C, *out] -> dx of `x_shape`.
DispatchTensor pool_backward(OpCode op, DispatchTensor dy, const Shape& x_shape, const PoolArgs& args) {
  check_module_first(op, dy, "output gradient");
  const PoolArgs a = normalized(args, args.rank);
  const Shape out = pool_out_shape(op, pool_kind(op), a, x_shape);
  check_same_shape(op, "output gradient", dy.shape(), out);
  check_alloc_shape(op, x_shape, dy.dtype());
  return invoke(
      op, dy.device,
      TENSOR_BODY { return DispatchTensor(entry<Family::PoolBackward>(op, dy.device)(dy.take(), x_shape, a), Kind::Float); },
      meta_of(x_shape, dy.dtype(), Kind::Float), [&] { OpAttrs o; o.options = &a; o.shape = &x_shape; return o; }, dy);
}

DispatchTensor max_pool_backward(DispatchTensor dy, DispatchTensor indices, const Shape& x_shape, const PoolArgs& args) {
  const OpCode op = OpCode::max_pool_with_indices_backward;
  check_module_first(op, dy, "output gradient");
  check_indices(op, dy, indices);
  const PoolArgs a = normalized(args, args.rank);
  const Shape out = pool_out_shape(op, OpCode::max_pool2d, a, x_shape);
  check_same_shape(op, "output gradient", dy.shape(), out);
  check_same_shape(op, "indices", indices.shape(), out);
  check_alloc_shape(op, x_shape, dy.dtype());
  return invoke(
      op, dy.device,
      TENSOR_BODY {
        return DispatchTensor(entry<Family::MaxPoolBackward>(op, dy.device)(dy.take(), indices.take(), x_shape, a),
                              Kind::Float);
      },
      meta_of(x_shape, dy.dtype(), Kind::Float), [&] { OpAttrs o; o.options = &a; o.shape = &x_shape; return o; }, dy,
      indices);
}

namespace {
void check_interp_mode(OpCode op, const InterpArgs& a) {
  check_enum(op, "interpolate mode", a.options.mode, tensor::nn::InterpolateMode::Bicubic,
             "Nearest, NearestExact, Bilinear, Bicubic (Lanczos3 is composed above dispatch)");
}
}  // namespace

DispatchTensor interpolate(DispatchTensor x, const InterpArgs& args) {
  const OpCode op = OpCode::interpolate;
  check_module_first(op, x, "x");
  check_interp_mode(op, args);
  const Shape out = tensor::nn::interpolate_output_shape(op_name(op), x.shape(), args.size);
  check_alloc_shape(op, out, x.dtype());
  return invoke(
      op, x.device, TENSOR_BODY { return DispatchTensor(entry<Family::Interpolate>(op, x.device)(x.take(), args), Kind::Float); },
      meta_of(out, x.dtype(), Kind::Float), [&] { OpAttrs o; o.options = &args; return o; }, x);
}

DispatchTensor interpolate_backward(DispatchTensor dy, const Shape& x_shape, const InterpArgs& args) {
  const OpCode op = OpCode::interpolate_backward;
  check_module_first(op, dy, "output gradient");
  check_interp_mode(op, args);
  const Shape out = tensor::nn::interpolate_output_shape(op_name(op), x_shape, args.size);
  check_same_shape(op, "output gradient", dy.shape(), out);
  check_alloc_shape(op, x_shape, dy.dtype());
  return invoke(
      op, dy.device,
      TENSOR_BODY {
        return DispatchTensor(entry<Family::InterpolateBackward>(op, dy.device)(dy.take(), x_shape, args), Kind::Float);
      },
      meta_of(x_shape, dy.dtype(), Kind::Float), [&] { OpAttrs o; o.options = &args; o.shape = &x_shape; return o; }, dy);
}

namespace {
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

// weights [n, d], indices Int [*I] -> [*I, d]; an index outside [0, n) raises IndexError
// (checked by the entry: it needs the index values).
DispatchTensor embedding(DispatchTensor weights, DispatchTensor indices) {
  const OpCode op = OpCode::embedding;
  check_module_first(op, weights, "weights");
  if (weights.shape().rank() != 2)
    throw ShapeError(fmt::format("[embedding] weights has the wrong rank; expected rank 2 [n_embedding, d_model]; got {}",
                                 weights.shape().to_string()));
  check_embedding_indices(op, weights, indices);
  const Shape out = embedding_out(indices.shape(), weights.shape()[1]);
  check_alloc_shape(op, out, weights.dtype());
  return invoke(
      op, weights.device,
      TENSOR_BODY {
        return DispatchTensor(entry<Family::Embedding>(op, weights.device)(weights.take(), indices.take()), Kind::Float);
      },
      meta_of(out, weights.dtype(), Kind::Float), no_attrs, weights, indices);
}

// dy [*I, d], indices [*I] -> [n, d] of `weight_shape`.
DispatchTensor embedding_backward(DispatchTensor dy, DispatchTensor indices, const Shape& weight_shape) {
  const OpCode op = OpCode::embedding_backward;
  check_module_first(op, dy, "output gradient");
  check_embedding_indices(op, dy, indices);
  if (weight_shape.rank() != 2)
    throw ShapeError(fmt::format("[embedding_backward] weights has the wrong rank; expected rank 2 [n_embedding, "
                                 "d_model]; got {}",
                                 weight_shape.to_string()));
  check_same_shape(op, "output gradient", dy.shape(), embedding_out(indices.shape(), weight_shape[1]));
  check_alloc_shape(op, weight_shape, dy.dtype());
  return invoke(
      op, dy.device,
      TENSOR_BODY {
        return DispatchTensor(entry<Family::EmbeddingBackward>(op, dy.device)(dy.take(), indices.take(), weight_shape),
                              Kind::Float);
      },
      meta_of(weight_shape, dy.dtype(), Kind::Float), [&] { OpAttrs o; o.shape = &weight_shape; return o; }, dy, indices);
}

// x [.., d], gamma [d], beta [d]? -> x's shape.
DispatchTensor layer_norm(DispatchTensor x, DispatchTensor gamma, DispatchTensor beta, double eps) {
  const OpCode op = OpCode::layer_norm;
  check_module_first(op, x, "x");
  check_operand(op, x, gamma, "gamma");
  if (beta.prim) check_operand(op, x, beta, "beta");
  check_one_float_dtype(op, {{"x", x}, {"gamma", gamma}, {"beta", beta}});
  const Shape& s = x.shape();
  if (s.rank() < 1)
    throw ShapeError(fmt::format("[layer_norm] x has no dims; expected [..., d]; got {}", s.to_string()));
  const Shape want{s[s.rank() - 1]};
  check_same_shape(op, "gamma", gamma.shape(), want);
  if (beta.prim) check_same_shape(op, "beta", beta.shape(), want);
  if (!(eps >= 0.0) || std::isinf(eps))
    throw ShapeError(fmt::format("[layer_norm] epsilon must be finite and not negative; expected eps >= 0; got {}", eps));
  return invoke(
      op, x.device,
      TENSOR_BODY {
        return DispatchTensor(entry<Family::LayerNorm>(op, x.device)(x.take(), gamma.take(), beta.take(), eps), Kind::Float);
      },
      like(x), [&] { OpAttrs o; o.scalars[0] = Scalar(eps); return o; }, x, gamma, beta);
}

// q [B,H,Lq,D], k [B,H,Lk,D], v [B,H,Lk,Dv], mask Bool [B|1,H|1,Lq,Lk]? (true = masked
// out), bias Float of the mask's shape? -> [B,H,Lq,Dv].
DispatchTensor attention(DispatchTensor q, DispatchTensor k, DispatchTensor v, DispatchTensor mask, DispatchTensor bias,
                         const tensor::nn::AttentionModuleOptions& options) {
  const OpCode op = OpCode::attention;
  check_module_first(op, q, "q");
  check_operand(op, q, k, "k");
  check_operand(op, q, v, "v");
  if (mask.prim) check_mask(op, q, mask);
  if (bias.prim) check_operand(op, q, bias, "attn_bias");
  check_one_float_dtype(op, {{"q", q}, {"k", k}, {"v", v}, {"attn_bias", bias}});
  if (options.scale && !std::isfinite(*options.scale))
    throw ShapeError(fmt::format("[attention] scale must be finite; expected a finite scale; got {}", *options.scale));
  const Shape out = tensor::nn::attention_output_shape(op_name(op), q.shape(), k.shape(), v.shape(), shape_or_null(mask),
                                                       shape_or_null(bias), options);
  check_alloc_shape(op, out, q.dtype());
  return invoke(
      op, q.device,
      TENSOR_BODY {
        return DispatchTensor(
            entry<Family::Attention>(op, q.device)(q.take(), k.take(), v.take(), mask.take(), bias.take(), options),
            Kind::Float);
      },
      meta_of(out, q.dtype(), Kind::Float), [&] { OpAttrs o; o.options = &options; return o; }, q, k, v, mask, bias);
}

// ---- fft --------------------------------------------------------------------------------

// x [.., L, ..] -> (re, im) [.., n/2 + 1, ..] along dim; n 0 means L (L >= 1).
std::pair<DispatchTensor, DispatchTensor> rfft(DispatchTensor x, std::int64_t dim, std::size_t n) {
  const OpCode op = OpCode::rfft;
  check_module_first(op, x, "signal");
  const Shape& s = x.shape();
  if (s.rank() < 1) throw ShapeError("[rfft] expected a signal of rank >= 1; got a scalar shape []");
  const std::size_t d = resolve_dim(op, dim, s.rank());
  const std::size_t len = n ? n : s[d];
  if (len < 1)
    throw ShapeError(fmt::format("[rfft] expected a signal length n >= 1; got n = 0 for an empty dim {} of {}", d, s.to_string()));
  const Shape out = resized_shape(s, d, len / 2 + 1);
  check_alloc_shape(op, out, x.dtype());
  return invoke(
      op, x.device,
      TENSOR_BODY {
        auto [re, im] = entry<Family::Rfft>(op, x.device)(x.take(), d, len);
        return std::pair{DispatchTensor(std::move(re), Kind::Float), DispatchTensor(std::move(im), Kind::Float)};
      },
      meta_of(out, x.dtype(), Kind::Float), [&] { return with_ints(i64(d), i64(len)); }, x);
}

// (re, im) [.., m, ..] -> [.., n, ..] along dim; n 0 means 2 (m - 1) (m >= 2).
DispatchTensor irfft(DispatchTensor re, DispatchTensor im, std::int64_t dim, std::size_t n) {
  const OpCode op = OpCode::irfft;
  check_module_first(op, re, "real part");
  check_operand(op, re, im, "imaginary part");
  const Shape& s = re.shape();
  check_same_shape(op, "imaginary part", im.shape(), s);
  if (!(re.dtype() == im.dtype()))
    throw DTypeError(fmt::format("[irfft] real and imaginary parts must have one dtype; got {} and {}", dtype_name(re.dtype()),
                                 dtype_name(im.dtype())));
  if (s.rank() < 1) throw ShapeError("[irfft] expected spectra of rank >= 1; got a scalar shape []");
  const std::size_t d = resolve_dim(op, dim, s.rank());
  const std::size_t m = s[d];
  if (m < 1) throw ShapeError(fmt::format("[irfft] expected at least one bin along dim {}; got shape {}", d, s.to_string()));
  const std::size_t len = n ? n : 2 * (m - 1);
  if (len < 1)
    throw ShapeError(fmt::format("[irfft] the default output length 2 (bins - 1) is 0 for one bin; expected an explicit n >= 1 "
                                 "or at least 2 bins; got shape {}",
                                 s.to_string()));
  const Shape out = resized_shape(s, d, len);
  check_alloc_shape(op, out, re.dtype());
  return invoke(
      op, re.device,
      TENSOR_BODY {
        return DispatchTensor(entry<Family::Irfft>(op, re.device)(re.take(), im.take(), d, len), Kind::Float);
      },
      meta_of(out, re.dtype(), Kind::Float), [&] { return with_ints(i64(d), i64(len)); }, re, im);
}

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

// x [..., d_in], weight [d_in, d_out] (burn's layout, the transpose of torch's), bias [d_out]?
DispatchTensor linear(DispatchTensor x, DispatchTensor weight, DispatchTensor bias) {
  const OpCode op = OpCode::linear;
  check_module_first(op, x, "x");
  check_operand(op, x, weight, "weight");
  if (bias.prim) check_operand(op, x, bias, "bias");
  check_one_float_dtype(op, {{"x", x}, {"weight", weight}, {"bias", bias}});
  const Shape& s = x.shape();
  if (s.rank() < 1) throw ShapeError(fmt::format("[linear] x has no dims; expected [..., d_in]; got {}", s.to_string()));
  check_rank(op, "weight", weight.shape(), 2, "[d_in, d_out]");
  const std::size_t d_in = weight.shape()[0], d_out = weight.shape()[1];
  if (s[s.rank() - 1] != d_in)
    throw ShapeError(fmt::format("[linear] x's last dim does not match the weight [d_in, d_out]; expected [..., {}]; got x {} "
                                 "and weight {}",
                                 d_in, s.to_string(), weight.shape().to_string()));
  if (bias.prim) check_same_shape(op, "bias", bias.shape(), Shape{d_out});
  Shape out = s;
  out[out.rank() - 1] = d_out;
  check_alloc_shape(op, out, x.dtype());
  return invoke(
      op, x.device,
      TENSOR_BODY {
        return DispatchTensor(entry<Family::Linear>(op, x.device)(x.take(), weight.take(), bias.take()), Kind::Float);
      },
      meta_of(out, x.dtype(), Kind::Float), no_attrs, x, weight, bias);
}

// x [N, C, ...]; gamma, beta, mean, variance [C] -> x's shape.
DispatchTensor batch_norm(DispatchTensor x, DispatchTensor gamma, DispatchTensor beta, DispatchTensor mean,
                          DispatchTensor variance, double eps) {
  const OpCode op = OpCode::batch_norm;
  check_module_first(op, x, "x");
  check_operand(op, x, gamma, "gamma");
  check_operand(op, x, beta, "beta");
  check_operand(op, x, mean, "mean");
  check_operand(op, x, variance, "variance");
  check_one_float_dtype(op, {{"x", x}, {"gamma", gamma}, {"beta", beta}, {"mean", mean}, {"variance", variance}});
  const Shape& s = x.shape();
  if (s.rank() < 2)
    throw ShapeError(fmt::format("[batch_norm] x needs a channel dim; expected rank >= 2 [N, C, ...]; got {}", s.to_string()));
  const Shape want{s[1]};
  check_same_shape(op, "gamma", gamma.shape(), want);
  check_same_shape(op, "beta", beta.shape(), want);
  check_same_shape(op, "mean", mean.shape(), want);
  check_same_shape(op, "variance", variance.shape(), want);
  check_eps(op, eps);
  return invoke(
      op, x.device,
      TENSOR_BODY {
        return DispatchTensor(entry<Family::BatchNorm>(op, x.device)(x.take(), gamma.take(), beta.take(), mean.take(),
                                                                     variance.take(), eps),
                              Kind::Float);
      },
      like(x), [&] { OpAttrs o; o.scalars[0] = Scalar(eps); return o; }, x, gamma, beta, mean, variance);
}

DispatchTensor unfold4d(DispatchTensor x, const FoldArgs& args) {
  const OpCode op = OpCode::unfold4d;
  check_module_first(op, x, "x");
  check_rank(op, "x", x.shape(), 4, "[N, C, H, W]");
  const Shape out = tensor::nn::unfold4d_output_shape(op_name(op), x.shape(), args.kernel, args.options);
  check_alloc_shape(op, out, x.dtype());
  return invoke(
      op, x.device,
      TENSOR_BODY { return DispatchTensor(entry<Family::Unfold4d>(op, x.device)(x.take(), args), Kind::Float); },
      meta_of(out, x.dtype(), Kind::Float), [&] { OpAttrs o; o.options = &args; return o; }, x);
}

DispatchTensor fold4d(DispatchTensor x, const FoldArgs& args) {
  const OpCode op = OpCode::fold4d;
  check_module_first(op, x, "x");
  const Shape out = tensor::nn::fold4d_output_shape(op_name(op), x.shape(), args.output_size, args.kernel, args.options);
  check_alloc_shape(op, out, x.dtype());
  return invoke(
      op, x.device,
      TENSOR_BODY { return DispatchTensor(entry<Family::Unfold4d>(op, x.device)(x.take(), args), Kind::Float); },
      meta_of(out, x.dtype(), Kind::Float), [&] { OpAttrs o; o.options = &args; return o; }, x);
}

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

DispatchTensor ctc_loss(DispatchTensor log_probs, DispatchTensor targets, DispatchTensor input_lengths,
                        DispatchTensor target_lengths, std::int64_t blank) {
  const OpCode op = OpCode::ctc_loss;
  check_ctc(op, log_probs, targets, input_lengths, target_lengths, blank);
  const Shape out{log_probs.shape()[1]};
  return invoke(
      op, log_probs.device,
      TENSOR_BODY {
        return DispatchTensor(entry<Family::CtcLoss>(op, log_probs.device)(log_probs.take(), targets.take(),
                                                                           input_lengths.take(), target_lengths.take(), blank),
                              Kind::Float);
      },
      meta_of(out, log_probs.dtype(), Kind::Float), [&] { OpAttrs o; o.ints[0] = blank; return o; }, log_probs, targets,
      input_lengths, target_lengths);
}

DispatchTensor ctc_loss_backward(DispatchTensor log_probs, DispatchTensor targets, DispatchTensor input_lengths,
                                 DispatchTensor target_lengths, DispatchTensor dloss, std::int64_t blank) {
  const OpCode op = OpCode::ctc_loss_backward;
  check_ctc(op, log_probs, targets, input_lengths, target_lengths, blank);
  check_operand(op, log_probs, dloss, "output gradient");
  check_one_float_dtype(op, {{"log_probs", log_probs}, {"output gradient", dloss}});
  check_same_shape(op, "output gradient", dloss.shape(), Shape{log_probs.shape()[1]});
  return invoke(
      op, log_probs.device,
      TENSOR_BODY {
        return DispatchTensor(entry<Family::CtcLossBackward>(op, log_probs.device)(
                                  log_probs.take(), targets.take(), input_lengths.take(), target_lengths.take(),
                                  dloss.take(), blank),
                              Kind::Float);
      },
      like(log_probs), [&] { OpAttrs o; o.ints[0] = blank; return o; }, log_probs, targets, input_lengths, target_lengths,
      dloss);
}

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
  return tensor::nn::deform_conv2d_output_shape(op_name(op), x.shape(), offset.shape(), weight.shape(),
                                                shape_or_null(mask), shape_or_null(bias), o);
}
}  // namespace

DispatchTensor deform_conv2d(DispatchTensor x, DispatchTensor offset, DispatchTensor weight, DispatchTensor mask,
                             DispatchTensor bias, const tensor::nn::DeformConvOptions<2>& options) {
  const OpCode op = OpCode::deform_conv2d;
  const Shape out = check_deform(op, x, offset, weight, mask, bias, options);
  check_alloc_shape(op, out, x.dtype());
  return invoke(
      op, x.device,
      TENSOR_BODY {
        return DispatchTensor(entry<Family::DeformConv>(op, x.device)(x.take(), offset.take(), weight.take(), mask.take(),
                                                                      bias.take(), options),
                              Kind::Float);
      },
      meta_of(out, x.dtype(), Kind::Float), [&] { OpAttrs o; o.options = &options; return o; }, x, offset, weight, mask,
      bias);
}

std::vector<DispatchTensor> deform_conv2d_backward(DispatchTensor x, DispatchTensor offset, DispatchTensor weight,
                                                   DispatchTensor mask, DispatchTensor dy, bool with_bias,
                                                   const tensor::nn::DeformConvOptions<2>& options) {
  const OpCode op = OpCode::deform_conv2d_backward;
  const Shape out = check_deform(op, x, offset, weight, mask, DispatchTensor(), options);
  check_operand(op, x, dy, "output gradient");
  check_one_float_dtype(op, {{"x", x}, {"output gradient", dy}});
  check_same_shape(op, "output gradient", dy.shape(), out);
  return invoke(
      op, x.device,
      TENSOR_BODY {
        std::vector<Prim> g = entry<Family::DeformConvBackward>(op, x.device)(x.take(), offset.take(), weight.take(),
                                                                              mask.take(), dy.take(), with_bias, options);
        std::vector<DispatchTensor> r(5);
        for (std::size_t i = 0; i < g.size() && i < r.size(); ++i)
          if (g[i]) r[i] = DispatchTensor(std::move(g[i]), Kind::Float);
        return r;
      },
      like(x), [&] { OpAttrs o; o.options = &options; return o; }, x, offset, weight, mask, dy);
}

// ---- devices -------------------------------------------------------------------------

std::string device_string(DeviceId device) {
  if (is_balanced_device(device)) return fmt::format("autodiff<{}, balanced>", device_string(autodiff_inner(device)));
  if (is_autodiff_device(device)) return fmt::format("autodiff<{}>", device_string(autodiff_inner(device)));
  const Backend* b = Registry::instance().find(device.type_id);
  const std::string name = b ? b->short_name() : fmt::format("type{}", device.type_id);
  if (device.type_id == kCpuDeviceType && device.index_id == 0) return name;
  return fmt::format("{}:{}", name, device.index_id);
}

std::string backend_name(DeviceId device) {
  return fmt::format("dispatch<{}>", backend_of(device).get<DeviceOp::name>()(device));
}

DTypeUsageSet dtype_usage(DeviceId device, DType dtype) { return backend_of(device).get<DeviceOp::dtype_usage>()(device, dtype); }
bool supports_dtype(DeviceId device, DType dtype) { return backend_of(device).get<DeviceOp::supports_dtype>()(device, dtype); }
void seed(DeviceId device, std::uint64_t s) { backend_of(device).get<DeviceOp::seed>()(device, s); }
void sync(DeviceId device) { backend_of(device).get<DeviceOp::sync>()(device); }
MemoryStats memory_stats(DeviceId device) { return backend_of(device).get<DeviceOp::memory_stats>()(device); }
void memory_cleanup(DeviceId device) { backend_of(device).get<DeviceOp::memory_cleanup>()(device); }

std::size_t device_count(std::uint16_t type_id) {
  const Backend* b = Registry::instance().find(type_id);
  return b ? b->get<DeviceOp::device_count>()() : 0;
}

std::vector<DeviceId> available_devices() {
  std::vector<DeviceId> out;
  for (const Backend* b : Registry::instance().backends()) {
    if (b->type_id() >= kAutodiffTypeOffset) continue;  // Device::autodiff() of a listed device
    const std::size_t n = b->get<DeviceOp::device_count>()();
    for (std::size_t i = 0; i < n; ++i) out.push_back({b->type_id(), static_cast<std::uint16_t>(i)});
  }
  return out;
}

DeviceId parse_device(const std::string& spec) {
  auto fail = [&](const std::string& why) -> DeviceId {
    std::string have;
    for (DeviceId d : available_devices()) have += (have.empty() ? "" : ", ") + device_string(d);
    std::string absent;
    for (const auto& [name, reason] : Registry::instance().absent()) absent += fmt::format("; {} absent: {}", name, reason);
    throw DeviceError(DeviceError::Kind::Unavailable,
                      fmt::format("[Device::parse] {}; expected one of: {}; got '{}'{}", why, have, spec, absent));
  };
  const auto colon = spec.find(':');
  const std::string name = spec.substr(0, colon);
  const Backend* b = Registry::instance().find_by_name(name);
  if (!b) return fail("unknown or unavailable device");
  std::size_t index = 0;
  if (colon != std::string::npos) {
    const std::string num = spec.substr(colon + 1);
    if (num.empty() || num.size() > 5 || !std::all_of(num.begin(), num.end(), [](char c) { return c >= '0' && c <= '9'; }))
      return fail("bad device index");
    index = std::stoul(num);
  }
  if (index >= b->get<DeviceOp::device_count>()()) return fail("device index out of range");
  return {b->type_id(), static_cast<std::uint16_t>(index)};
}

}  // namespace tensor::dispatch
