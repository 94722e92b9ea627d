// The forwarders: kind checks, validation, backend lookup, result wrapping.
#include "dispatch/dispatch.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>

#include "dispatch/element.hpp"
#include "dispatch/settings.hpp"
#include "dispatch/validate.hpp"
#include "tensor/error.hpp"

namespace tensor::dispatch {
namespace {

template <Family F>
FamilyFn<F> entry(OpCode op, DeviceId device) {
  if (op_family(op) != F)
    throw Error(fmt::format("[{}] op used through the wrong family; expected {}; got {}", op_name(op),
                            family_name(op_family(op)), family_name(F)));
  const Backend& b = backend_of(device);
  auto fn = b.get<F>(op);
  if (!fn) throw_not_implemented(op, b);
  return fn;
}

// Ops that only move or view data: they need Storage, not Arithmetic.
bool is_layout_op(OpCode op) {
  switch (op) {
    case OpCode::transpose: case OpCode::detach: case OpCode::reshape: case OpCode::expand: case OpCode::swap_dims:
    case OpCode::permute: case OpCode::flip: case OpCode::slice: case OpCode::slice_assign: case OpCode::repeat_dim:
    case OpCode::cat: case OpCode::unfold: case OpCode::gather: case OpCode::select: case OpCode::mask_where:
    case OpCode::mask_fill: case OpCode::into_data: case OpCode::to_device: case OpCode::empty:
      return true;
    default:
      return false;
  }
}

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
  if (!dtype) return default_dtype(device, kind);
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

void check_mask(OpCode op, const DispatchTensor& a, const DispatchTensor& mask) {
  if (!mask.prim) throw Error(fmt::format("[{}] expected a mask tensor; got an empty handle", op_name(op)));
  if (mask.kind != Kind::Bool)
    throw DTypeError(fmt::format("[{}] mask must be a Bool tensor; expected Bool; got {}", op_name(op), kind_name(mask.kind)));
  check_same_device(op, a, mask);
}

bool is_extremum(OpCode op) {
  switch (op) {
    case OpCode::max: case OpCode::min: case OpCode::max_abs: case OpCode::max_dim: case OpCode::min_dim:
    case OpCode::max_abs_dim: case OpCode::argmax: case OpCode::argmin: case OpCode::max_dim_with_indices:
    case OpCode::min_dim_with_indices:
      return true;
    default:
      return false;
  }
}

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

DType default_dtype(DeviceId device, Kind kind) {
  const DeviceSettings& s = device_settings(device);
  switch (kind) {
    case Kind::Float: return to_dtype(s.float_dtype);
    case Kind::Int: return to_dtype(s.int_dtype);
    case Kind::Bool: return to_dtype(s.bool_dtype);
    case Kind::QFloat: break;
  }
  throw DTypeError("[dtype] quantized tensors are not supported yet; expected Float, Int or Bool; got QFloat");
}

// ---- creation and transfer -------------------------------------------------------

DispatchTensor create(OpCode op, const Shape& shape, DeviceId device, Kind kind, std::optional<DType> dtype) {
  check_create_kind(op, kind);
  const DType dt = resolve_dtype(op, device, kind, dtype);
  check_storage(op, device, dt);
  return {entry<Family::Create>(op, device)(shape, device, dt), kind};
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
  check_create_kind(OpCode::full, kind);
  const DType dt = resolve_dtype(OpCode::full, device, kind, dtype);
  check_storage(OpCode::full, device, dt);
  return {entry<Family::Full>(OpCode::full, device)(shape, value, device, dt), kind};
}

DispatchTensor from_data(TensorData data, DeviceId device, Kind kind) {
  check_create_kind(OpCode::from_data, kind);
  if (data.dtype() == DType::QFloat)
    throw DTypeError("[from_data] quantized data is not supported yet; expected a float, int or bool dtype; got qfloat");
  // Data of another kind is converted to the device's default dtype of the wanted kind.
  // So does bool data in another bool storage: every bool tensor of a device has its
  // bool dtype, whatever made it (zeros, comparisons, host data), so they mix freely.
  if (kind_of_dtype(data.dtype()) != kind || (kind == Kind::Bool && data.dtype() != default_dtype(device, kind)))
    data = data.convert(default_dtype(device, kind));
  check_storage(OpCode::from_data, device, data.dtype());
  return {entry<Family::FromData>(OpCode::from_data, device)(std::move(data), device), kind};
}

DispatchTensor random(const Shape& shape, const Distribution& dist, DeviceId device, Kind kind,
                      std::optional<DType> dtype) {
  check_create_kind(OpCode::random, kind);
  const DType dt = resolve_dtype(OpCode::random, device, kind, dtype);
  check_arithmetic(OpCode::random, device, dt);
  if (dist.kind == Distribution::Kind::Uniform && !(dist.a <= dist.b))
    throw IndexError(fmt::format("[random] uniform bounds reversed; expected low <= high; got {} and {}", dist.a, dist.b));
  if (dist.kind == Distribution::Kind::Bernoulli && !(dist.a >= 0.0 && dist.a <= 1.0))
    throw IndexError(fmt::format("[random] bernoulli probability out of range; expected 0..1; got {}", dist.a));
  if (dist.kind == Distribution::Kind::Normal && !(dist.b >= 0.0))
    throw IndexError(fmt::format("[random] normal standard deviation negative; expected >= 0; got {}", dist.b));
  return {entry<Family::Random>(OpCode::random, device)(shape, dist, device, dt), kind};
}

DispatchTensor arange(std::int64_t start, std::int64_t end, std::int64_t step, DeviceId device,
                      std::optional<DType> dtype) {
  const DType dt = resolve_dtype(OpCode::arange_step, device, Kind::Int, dtype);
  check_arithmetic(OpCode::arange_step, device, dt);
  if (step == 0) throw IndexError("[arange_step] step must not be zero; expected a nonzero step; got 0");
  if (step == 1) return {entry<Family::Range>(OpCode::arange, device)(start, end, device, dt), Kind::Int};
  return {entry<Family::RangeStep>(OpCode::arange_step, device)(start, end, step, device, dt), Kind::Int};
}

std::future<TensorData> into_data(DispatchTensor a) {
  if (!a.prim) throw Error("[into_data] expected a tensor; got an empty (moved-from) handle");
  return entry<Family::IntoData>(OpCode::into_data, a.device)(a.take());
}

TensorData read(DispatchTensor a) { return into_data(std::move(a)).get(); }

DispatchTensor to_device(DispatchTensor a, DeviceId device) {
  check_kind(OpCode::to_device, a);
  if (a.device == device) return a;
  backend_of(device);  // the destination must exist
  check_storage(OpCode::to_device, device, a.dtype());
  if (a.device.type_id == device.type_id) {
    const Kind k = a.kind;
    return {entry<Family::ToDevice>(OpCode::to_device, a.device)(a.take(), device), k};
  }
  // Across backends: read on the source, upload on the destination.
  const Kind k = a.kind;
  return from_data(read(std::move(a)), device, k);
}

DispatchTensor cast(OpCode op, DispatchTensor a, DType dtype) {
  check_kind(op, a);
  const Kind want = op == OpCode::cast ? a.kind : op == OpCode::into_int ? Kind::Int : Kind::Float;
  if (kind_of_dtype(dtype) != want)
    throw DTypeError(fmt::format("[{}] target dtype of the wrong kind; expected a {} dtype; got {}", op_name(op),
                                 kind_name(want), dtype_name(dtype)));
  check_storage(op, a.device, a.dtype());
  check_storage(op, a.device, dtype);
  if (op == OpCode::cast && a.dtype() == dtype) return a;
  return {entry<Family::Cast>(op, a.device)(a.take(), dtype), want};
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

}  // namespace

DispatchTensor unary(OpCode op, DispatchTensor a) {
  check_first(op, a);
  if (op == OpCode::transpose && a.shape().rank() < 2) return a;  // nothing to swap
  const Kind k = a.kind;
  return {entry<Family::Unary>(op, a.device)(a.take()), k};
}

DispatchTensor binary(OpCode op, DispatchTensor a, DispatchTensor b) {
  check_first(op, a);
  check_pair(op, a, b);
  broadcast_shapes(op, a.shape(), b.shape());
  const Kind k = a.kind;
  return {entry<Family::Binary>(op, a.device)(a.take(), b.take()), k};
}

DispatchTensor scalar(OpCode op, DispatchTensor a, Scalar s) {
  check_first(op, a);
  if (op == OpCode::clamp_min || op == OpCode::clamp_max) s = fit_to_int_dtype(s, a.dtype()).value;
  const Kind k = a.kind;
  return {entry<Family::Scalar>(op, a.device)(a.take(), s), k};
}

DispatchTensor clamp(OpCode op, DispatchTensor a, Scalar lo, Scalar hi) {
  check_first(op, a);
  if (op == OpCode::clamp && lo.to_double() > hi.to_double())
    throw IndexError(fmt::format("[clamp] bounds reversed; expected min <= max; got {} and {}", lo.to_double(), hi.to_double()));
  lo = fit_to_int_dtype(lo, a.dtype()).value;
  hi = fit_to_int_dtype(hi, a.dtype()).value;
  const Kind k = a.kind;
  return {entry<Family::Clamp>(op, a.device)(a.take(), lo, hi), k};
}

DispatchTensor compare(OpCode op, DispatchTensor a, DispatchTensor b) {
  check_first(op, a);
  check_pair(op, a, b);
  broadcast_shapes(op, a.shape(), b.shape());
  const DeviceId d = a.device;
  return {entry<Family::Compare>(op, d)(a.take(), b.take(), bool_out(d)), Kind::Bool};
}

DispatchTensor compare_scalar(OpCode op, DispatchTensor a, Scalar s) {
  check_first(op, a);
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
  return {entry<Family::CompareScalar>(op, d)(a.take(), s, bool_out(d)), Kind::Bool};
}

DispatchTensor predicate(OpCode op, DispatchTensor a) {
  check_first(op, a);
  const DeviceId d = a.device;
  return {entry<Family::Predicate>(op, d)(a.take(), bool_out(d)), Kind::Bool};
}

DispatchTensor matmul(DispatchTensor a, DispatchTensor b) {
  const OpCode op = OpCode::matmul;
  check_first(op, a);
  check_pair(op, a, b);
  const Shape& sa = a.shape();
  const Shape& sb = b.shape();
  if (sa.rank() < 2 || sa.rank() != sb.rank())
    throw ShapeError(fmt::format("[matmul] expected operands of equal rank >= 2; got {} and {}", sa.to_string(), sb.to_string()));
  const std::size_t r = sa.rank();
  if (sa[r - 1] != sb[r - 2])
    throw ShapeError(fmt::format("[matmul] inner dims differ; expected lhs dim {} == rhs dim {}; got {} and {}", r - 1, r - 2,
                                 sa.to_string(), sb.to_string()));
  for (std::size_t i = 0; i + 2 < r; ++i)
    if (sa[i] != sb[i] && sa[i] != 1 && sb[i] != 1)
      throw ShapeError(fmt::format("[matmul] batch dims do not broadcast; expected dim {} equal or 1; got {} and {}", i,
                                   sa.to_string(), sb.to_string()));
  const Kind k = a.kind;
  return {entry<Family::Matmul>(op, a.device)(a.take(), b.take()), k};
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
  return {entry<Family::Cross>(op, a.device)(a.take(), b.take(), d), Kind::Float};
}

DispatchTensor powi(DispatchTensor a, DispatchTensor b) {
  const OpCode op = OpCode::powi;
  check_first(op, a);
  check_indices(op, a, b);  // the exponent is an Int tensor
  broadcast_shapes(op, a.shape(), b.shape());
  const Kind k = a.kind;
  return {entry<Family::PowI>(op, a.device)(a.take(), b.take()), k};
}

// ---- reductions --------------------------------------------------------------------

DispatchTensor reduce(OpCode op, DispatchTensor a) {
  check_first(op, a);
  if (is_extremum(op)) check_non_empty(op, a.shape(), "tensor");
  if (op == OpCode::mean && a.kind == Kind::Int) check_non_empty(op, a.shape(), "int tensor (int mean of nothing is undefined)");
  const Kind k = a.kind;
  return {entry<Family::Reduce>(op, a.device)(a.take()), k};
}

DispatchTensor reduce_dim(OpCode op, DispatchTensor a, std::int64_t dim) {
  check_first(op, a);
  const std::size_t d = resolve_dim(op, dim, a.shape().rank());
  if (is_extremum(op) && empty_off_axis(op, a.shape(), d)) return empty_reduced(a, d, a.kind, a.dtype());
  if (op == OpCode::mean_dim && a.kind == Kind::Int && a.shape()[d] == 0)
    throw ShapeError(fmt::format("[mean_dim] expected a non-empty axis for an int tensor; got shape {} dim {}",
                                 a.shape().to_string(), d));
  const Kind k = a.kind;
  return {entry<Family::Dim>(op, a.device)(a.take(), d), k};
}

DispatchTensor dim_index(OpCode op, DispatchTensor a, std::int64_t dim) {
  check_first(op, a);
  const std::size_t d = resolve_dim(op, dim, a.shape().rank());
  if (empty_off_axis(op, a.shape(), d)) return empty_reduced(a, d, Kind::Int, int_out(a.device));
  const DeviceId dev = a.device;
  return {entry<Family::DimIndex>(op, dev)(a.take(), d, int_out(dev)), Kind::Int};
}

std::pair<DispatchTensor, DispatchTensor> dim_with_indices(OpCode op, DispatchTensor a, std::int64_t dim) {
  check_first(op, a);
  const std::size_t d = resolve_dim(op, dim, a.shape().rank());
  if (empty_off_axis(op, a.shape(), d)) {
    DispatchTensor idx = empty_reduced(a, d, Kind::Int, int_out(a.device));
    return {empty_reduced(a, d, a.kind, a.dtype()), std::move(idx)};
  }
  const DeviceId dev = a.device;
  const Kind k = a.kind;
  auto [v, i] = entry<Family::DimWithIndices>(op, dev)(a.take(), d, int_out(dev));
  return {DispatchTensor(std::move(v), k), DispatchTensor(std::move(i), Kind::Int)};
}

DispatchTensor any_all(OpCode op, DispatchTensor a) {
  check_kind(op, a);
  check_storage(op, a.device, a.dtype());
  const DeviceId d = a.device;
  return {entry<Family::AnyAll>(op, d)(a.take(), bool_out(d)), Kind::Bool};
}

DispatchTensor any_all_dim(OpCode op, DispatchTensor a, std::int64_t dim) {
  check_kind(op, a);
  check_storage(op, a.device, a.dtype());
  const std::size_t dd = resolve_dim(op, dim, a.shape().rank());
  const DeviceId d = a.device;
  return {entry<Family::AnyAllDim>(op, d)(a.take(), dd, bool_out(d)), Kind::Bool};
}

DispatchTensor sort(DispatchTensor a, std::int64_t dim, bool descending) {
  check_first(OpCode::sort, a);
  const std::size_t d = resolve_dim(OpCode::sort, dim, a.shape().rank());
  const Kind k = a.kind;
  return {entry<Family::Sort>(OpCode::sort, a.device)(a.take(), d, descending), k};
}

std::pair<DispatchTensor, DispatchTensor> sort_with_indices(DispatchTensor a, std::int64_t dim, bool descending) {
  const OpCode op = OpCode::sort_with_indices;
  check_first(op, a);
  const std::size_t d = resolve_dim(op, dim, a.shape().rank());
  const DeviceId dev = a.device;
  const Kind k = a.kind;
  auto [v, i] = entry<Family::SortWithIndices>(op, dev)(a.take(), d, descending, int_out(dev));
  return {DispatchTensor(std::move(v), k), DispatchTensor(std::move(i), Kind::Int)};
}

DispatchTensor argsort(DispatchTensor a, std::int64_t dim, bool descending) {
  check_first(OpCode::argsort, a);
  const std::size_t d = resolve_dim(OpCode::argsort, dim, a.shape().rank());
  const DeviceId dev = a.device;
  return {entry<Family::Argsort>(OpCode::argsort, dev)(a.take(), d, descending, int_out(dev)), Kind::Int};
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
  const std::size_t d = check_k(OpCode::topk, a, dim, k);
  const Kind kind = a.kind;
  return {entry<Family::TopK>(OpCode::topk, a.device)(a.take(), d, k), kind};
}

std::pair<DispatchTensor, DispatchTensor> topk_with_indices(DispatchTensor a, std::int64_t dim, std::size_t k) {
  const OpCode op = OpCode::topk_with_indices;
  const std::size_t d = check_k(op, a, dim, k);
  const DeviceId dev = a.device;
  const Kind kind = a.kind;
  auto [v, i] = entry<Family::TopKWithIndices>(op, dev)(a.take(), d, k, int_out(dev));
  return {DispatchTensor(std::move(v), kind), DispatchTensor(std::move(i), Kind::Int)};
}

DispatchTensor argtopk(DispatchTensor a, std::int64_t dim, std::size_t k) {
  const std::size_t d = check_k(OpCode::argtopk, a, dim, k);
  const DeviceId dev = a.device;
  return {entry<Family::ArgTopK>(OpCode::argtopk, dev)(a.take(), d, k, int_out(dev)), Kind::Int};
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
      known *= static_cast<std::size_t>(dims[i]);
    }
    if (infer >= 0) {
      if (known == 0 || s.num_elements() % known != 0)
        throw ShapeError(fmt::format("[reshape] cannot infer the -1 dim; expected {} elements to divide by {}; got shape {}",
                                     s.num_elements(), known, s.to_string()));
      out[static_cast<std::size_t>(infer)] = s.num_elements() / known;
    }
    if (out.num_elements() != s.num_elements())
      throw ShapeError(fmt::format("[reshape] element count differs; expected {} elements (shape {}); got shape {}",
                                   s.num_elements(), s.to_string(), out.to_string()));
    if (out == s) return a;
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
    if (out == s) return a;
  }
  const Kind k = a.kind;
  return {entry<Family::Reshape>(op, a.device)(a.take(), out), k};
}

DispatchTensor swap_dims(DispatchTensor a, std::int64_t d0, std::int64_t d1) {
  const OpCode op = OpCode::swap_dims;
  check_first(op, a);
  const std::size_t x = resolve_dim(op, d0, a.shape().rank());
  const std::size_t y = resolve_dim(op, d1, a.shape().rank());
  if (x == y) return a;
  const Kind k = a.kind;
  return {entry<Family::SwapDims>(op, a.device)(a.take(), x, y), k};
}

DispatchTensor axes(OpCode op, DispatchTensor a, std::span<const std::int64_t> ax) {
  check_first(op, a);
  const std::size_t r = a.shape().rank();
  if (op == OpCode::permute && ax.size() != r)
    throw ShapeError(fmt::format("[permute] expected {} axes (the rank); got {}", r, ax.size()));
  std::vector<std::size_t> res;
  std::array<bool, kMaxRank> seen{};
  for (std::int64_t x : ax) {
    const std::size_t d = resolve_dim(op, x, r);
    if (seen[d]) throw IndexError(fmt::format("[{}] repeated axis; expected each dim once; got {} twice", op_name(op), d));
    seen[d] = true;
    res.push_back(d);
  }
  if (op == OpCode::flip && res.empty()) return a;
  const Kind k = a.kind;
  return {entry<Family::Axes>(op, a.device)(a.take(), Axes(res)), k};
}

DispatchTensor slice(DispatchTensor a, std::span<const tensor::Slice> slices) {
  const OpCode op = OpCode::slice;
  check_first(op, a);
  const std::vector<DimSlice> ds = resolve_slices(op, a.shape(), slices);
  const Kind k = a.kind;
  return {entry<Family::Slice>(op, a.device)(a.take(), DimSlices(ds)), k};
}

DispatchTensor slice_assign(DispatchTensor a, std::span<const tensor::Slice> slices, DispatchTensor value) {
  const OpCode op = OpCode::slice_assign;
  check_first(op, a);
  check_pair(op, a, value);
  const std::vector<DimSlice> ds = resolve_slices(op, a.shape(), slices);
  const Shape want = sliced_shape(a.shape(), ds);
  if (!(value.shape() == want))
    throw ShapeError(fmt::format("[slice_assign] value shape differs from the slice; expected {}; got {}", want.to_string(),
                                 value.shape().to_string()));
  if (want.num_elements() == 0) return a;  // nothing to write
  const Kind k = a.kind;
  return {entry<Family::SliceAssign>(op, a.device)(a.take(), DimSlices(ds), value.take()), k};
}

DispatchTensor repeat_dim(DispatchTensor a, std::int64_t dim, std::size_t times) {
  const OpCode op = OpCode::repeat_dim;
  check_first(op, a);
  const std::size_t d = resolve_dim(op, dim, a.shape().rank());
  if (times == 1) return a;
  const Kind k = a.kind;
  return {entry<Family::RepeatDim>(op, a.device)(a.take(), d, times), k};
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
  std::vector<DispatchTensor> keep;
  for (auto& p : parts)
    if (p.shape().num_elements() != 0) keep.push_back(std::move(p));
  if (keep.empty()) {
    Shape out = parts[0].shape();
    std::size_t total = 0;
    for (auto& p : parts) total += p.prim ? p.shape()[d] : 0;
    out[d] = total;
    return create(OpCode::empty, out, parts[0].device, parts[0].kind, parts[0].dtype());
  }
  const Shape& s0 = keep[0].shape();
  for (std::size_t i = 1; i < keep.size(); ++i)
    for (std::size_t j = 0; j < r; ++j)
      if (j != d && keep[i].shape()[j] != s0[j])
        throw ShapeError(fmt::format("[cat] shapes differ outside dim {}; expected {}; got {}", d, s0.to_string(),
                                     keep[i].shape().to_string()));
  if (keep.size() == 1) return std::move(keep[0]);
  const Kind k = keep[0].kind;
  const DeviceId dev = keep[0].device;
  std::vector<Prim> prims;
  prims.reserve(keep.size());
  for (auto& p : keep) prims.push_back(p.take());
  return {entry<Family::Cat>(op, dev)(std::move(prims), d), k};
}

DispatchTensor unfold(DispatchTensor a, std::int64_t dim, std::size_t size, std::size_t step) {
  const OpCode op = OpCode::unfold;
  check_first(op, a);
  const std::size_t d = resolve_dim(op, dim, a.shape().rank());
  if (size == 0 || step == 0)
    throw IndexError(fmt::format("[unfold] expected size >= 1 and step >= 1; got size {} step {}", size, step));
  if (a.shape().rank() + 1 > kMaxRank)
    throw ShapeError(fmt::format("[unfold] result rank too large; expected at most {}; got {}", kMaxRank, a.shape().rank() + 1));
  const Kind k = a.kind;
  return {entry<Family::Unfold>(op, a.device)(a.take(), d, size, step), k};
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
  return {entry<Family::Gather>(op, a.device)(a.take(), d, idx.take()), k};
}

DispatchTensor scatter(OpCode op, DispatchTensor a, std::int64_t dim, DispatchTensor idx, DispatchTensor values,
                       IndexingUpdateOp update) {
  check_first(op, a);
  check_indices(op, a, idx);
  check_pair(op, a, values);
  const std::size_t d = resolve_dim(op, dim, a.shape().rank());
  if (!(idx.shape() == values.shape()) || idx.shape().rank() != a.shape().rank())
    throw ShapeError(fmt::format("[{}] indices and values must have one shape of the tensor's rank; got {} and {} for {}",
                                 op_name(op), idx.shape().to_string(), values.shape().to_string(), a.shape().to_string()));
  for (std::size_t i = 0; i < a.shape().rank(); ++i)
    if (i != d && idx.shape()[i] > a.shape()[i])
      throw ShapeError(fmt::format("[{}] indices larger than the tensor outside dim {}; expected <= {}; got {}", op_name(op), d,
                                   a.shape().to_string(), idx.shape().to_string()));
  const Kind k = a.kind;
  if (op == OpCode::scatter)
    return {entry<Family::ScatterUpdate>(op, a.device)(a.take(), d, idx.take(), values.take(), update), k};
  return {entry<Family::Scatter>(op, a.device)(a.take(), d, idx.take(), values.take()), k};
}

DispatchTensor select(DispatchTensor a, std::int64_t dim, DispatchTensor idx) {
  const OpCode op = OpCode::select;
  check_first(op, a);
  check_indices(op, a, idx);
  const std::size_t d = resolve_dim(op, dim, a.shape().rank());
  if (idx.shape().rank() != 1)
    throw ShapeError(fmt::format("[select] expected 1-D indices; got shape {}", idx.shape().to_string()));
  const Kind k = a.kind;
  return {entry<Family::Select>(op, a.device)(a.take(), d, idx.take()), k};
}

DispatchTensor select_assign(OpCode op, DispatchTensor a, std::int64_t dim, DispatchTensor idx, DispatchTensor values,
                             IndexingUpdateOp update) {
  check_first(op, a);
  check_indices(op, a, idx);
  check_pair(op, a, values);
  const std::size_t d = resolve_dim(op, dim, a.shape().rank());
  if (idx.shape().rank() != 1)
    throw ShapeError(fmt::format("[{}] expected 1-D indices; got shape {}", op_name(op), idx.shape().to_string()));
  Shape want = a.shape();
  want[d] = idx.shape()[0];
  if (!(values.shape() == want))
    throw ShapeError(fmt::format("[{}] values shape differs; expected {}; got {}", op_name(op), want.to_string(),
                                 values.shape().to_string()));
  const Kind k = a.kind;
  if (op == OpCode::select_assign)
    return {entry<Family::SelectUpdate>(op, a.device)(a.take(), d, idx.take(), values.take(), update), k};
  return {entry<Family::SelectAssign>(op, a.device)(a.take(), d, idx.take(), values.take()), k};
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
  return {entry<Family::MaskWhere>(op, a.device)(a.take(), mask.take(), value.take()), k};
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
  return {entry<Family::MaskFill>(op, a.device)(a.take(), mask.take(), value), k};
}

DispatchTensor mask_select(DispatchTensor a, DispatchTensor mask) {
  const OpCode op = OpCode::mask_select;
  check_first(op, a);
  check_mask(op, a, mask);
  if (!(broadcast_shapes(op, a.shape(), mask.shape()) == a.shape()))
    throw ShapeError(fmt::format("[mask_select] mask must broadcast to the tensor's shape; expected {}; got {}",
                                 a.shape().to_string(), mask.shape().to_string()));
  const Kind k = a.kind;
  return {entry<Family::MaskSelect>(op, a.device)(a.take(), mask.take()), k};
}

DispatchTensor argwhere(DispatchTensor a) {
  const OpCode op = OpCode::argwhere;
  check_kind(op, a);
  const DeviceId d = a.device;
  return {entry<Family::Argwhere>(op, d)(a.take(), int_out(d)), Kind::Int};
}

DispatchTensor grid_sample_2d(DispatchTensor a, DispatchTensor grid, const GridSampleOptions& options) {
  const OpCode op = OpCode::grid_sample_2d;
  check_first(op, a);
  check_pair(op, a, grid, false);
  const Shape& s = a.shape();
  const Shape& g = grid.shape();
  if (s.rank() != 4 || g.rank() != 4 || g[3] != 2 || g[0] != s[0])
    throw ShapeError(fmt::format("[grid_sample_2d] expected input [N,C,H,W] and grid [N,Hout,Wout,2]; got {} and {}",
                                 s.to_string(), g.to_string()));
  return {entry<Family::GridSample>(op, a.device)(a.take(), grid.take(), options), Kind::Float};
}

// ---- devices -------------------------------------------------------------------------

std::string device_string(DeviceId device) {
  const Backend* b = Registry::instance().find(device.type_id);
  const std::string name = b ? b->short_name() : fmt::format("type{}", device.type_id);
  if (device.type_id == kCpuDeviceType) return name;
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
                      fmt::format("[device] {}; expected one of: {}; got '{}'{}", why, have, spec, absent));
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
