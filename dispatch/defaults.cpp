// Default implementations of the defaulted entries, each composed only from other
// entries of the same backend (SPEC §2). install_defaults() fills the empty ones.
// Inputs were validated by the forwarder that called the entry, so defaults
// trust shapes and dims like any backend kernel.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <numeric>
#include <type_traits>

#include "dispatch/dispatch.hpp"
#include "backends/common/element.hpp"
#include "dispatch/shape_rules.hpp"
#include "dispatch/settings.hpp"
#include "dispatch/validate.hpp"
#include "tensor/error.hpp"

namespace tensor::dispatch {
namespace {

// Calls another entry of the backend that owns `device`.
template <Family F, class... A>
auto call(OpCode op, DeviceId device, A&&... args) {
  const Backend& b = backend_of(device);
  auto fn = b.get<F>(op);
  if (!fn) throw_not_implemented(op, b);
  return fn(std::forward<A>(args)...);
}

DType bool_dt(DeviceId d) { return to_dtype(device_settings(d).bool_dtype); }
DType int_dt(DeviceId d) { return to_dtype(device_settings(d).int_dtype); }

// The widest signed int / float dtype the device computes with (defaults that
// need headroom use these instead of assuming 64-bit support).
bool arith(DeviceId d, DType t) { return dtype_usage(d, t).contains(DTypeUsage::Arithmetic); }
DType wide_int(DeviceId d) { return arith(d, DType::I64) ? DType::I64 : DType::I32; }
DType wide_float(DeviceId d) { return arith(d, DType::F64) ? DType::F64 : DType::F32; }

TensorData read_prim(Prim p) {
  const DeviceId d = p->device();
  return call<Family::IntoData>(OpCode::into_data, d, std::move(p)).get();
}
Prim upload(TensorData data, DeviceId d) { return call<Family::FromData>(OpCode::from_data, d, std::move(data), d); }

// Shorthands over the backend's entries.
Prim un(OpCode op, Prim x) { const DeviceId d = x->device(); return call<Family::Unary>(op, d, std::move(x)); }
Prim bin(OpCode op, Prim a, Prim b) { const DeviceId d = a->device(); return call<Family::Binary>(op, d, std::move(a), std::move(b)); }
Prim sc(OpCode op, Prim x, Scalar s) { const DeviceId d = x->device(); return call<Family::Scalar>(op, d, std::move(x), s); }
Prim cmp_s(OpCode op, Prim x, Scalar s) {
  const DeviceId d = x->device();
  return call<Family::CompareScalar>(op, d, std::move(x), s, bool_dt(d));
}
Prim cmp(OpCode op, Prim a, Prim b) {
  const DeviceId d = a->device();
  return call<Family::Compare>(op, d, std::move(a), std::move(b), bool_dt(d));
}
// The mask ops give the tensor's shape (dispatch checks that mask and value broadcast to
// it, and backends rely on that): a composition whose tensor is smaller than its mask or
// value (prelu, hypot, relu_backward of broadcast operands) expands the tensor first.
Prim widened(Prim x, const Shape& to) {
  if (x->shape() == to) return x;
  const DeviceId d = x->device();
  return call<Family::Reshape>(OpCode::expand, d, std::move(x), to);
}
Prim mfill(Prim x, Prim mask, Scalar s) {
  const DeviceId d = x->device();
  const Shape out = broadcast_shapes(OpCode::mask_fill, x->shape(), mask->shape());
  return call<Family::MaskFill>(OpCode::mask_fill, d, widened(std::move(x), out), std::move(mask), s);
}
Prim mwhere(Prim x, Prim mask, Prim v) {
  const DeviceId d = x->device();
  const Shape out = broadcast_shapes(OpCode::mask_where, broadcast_shapes(OpCode::mask_where, x->shape(), mask->shape()), v->shape());
  return call<Family::MaskWhere>(OpCode::mask_where, d, widened(std::move(x), out), std::move(mask), std::move(v));
}
Prim rdim(OpCode op, Prim x, std::size_t dim) { const DeviceId d = x->device(); return call<Family::Dim>(op, d, std::move(x), dim); }
Prim reshape_to(Prim x, const Shape& s) {
  const DeviceId d = x->device();
  return call<Family::Reshape>(OpCode::reshape, d, std::move(x), s);
}
Prim flat(Prim x) { const Shape s{x->shape().num_elements()}; return x->shape() == s ? x : reshape_to(std::move(x), s); }
Prim full_like(const Prim& x, Scalar v, DType dt) {
  return call<Family::Full>(OpCode::full, x->device(), x->shape(), v, x->device(), dt);
}
Prim slice_prim(Prim x, std::vector<DimSlice> ds) {
  const DeviceId d = x->device();
  return call<Family::Slice>(OpCode::slice, d, std::move(x), DimSlices(ds));
}
std::vector<DimSlice> full_slices(const Shape& s) {
  std::vector<DimSlice> ds(s.rank());
  for (std::size_t i = 0; i < s.rank(); ++i) ds[i] = {0, 1, s[i]};
  return ds;
}
bool is_float_prim(const Prim& x) { return is_float(x->dtype()); }

// ---- creation -------------------------------------------------------------------

Prim d_full(const Shape& shape, Scalar v, DeviceId d, DType dt) {
  // The values are built on the host first: its allocation failure names the op and device.
  TensorData data;
  try {
    data = TensorData::zeros(shape, dt);
  } catch (const ExecutionError&) {
    throw ExecutionError(fmt::format("[{}] out of host memory; expected {} bytes on the host for {} x {} on {}; got an "
                                     "allocation failure",
                                     current_op_name(), shape.num_elements() * dtype_size(dt), shape.to_string(),
                                     dtype_name(dt), device_string(d)));
  }
  visit_dtype(dt, [&](auto t) {
    using T = decltype(t);
    T value;
    if constexpr (std::is_same_v<T, bool> || std::is_same_v<T, BoolU32>) value = convert_value<T>(v.to_bool());
    else if constexpr (kIsFloatLike<T>) value = convert_value<T>(v.to_double());
    else if constexpr (std::is_signed_v<T>) value = v.is_float() ? convert_value<T>(v.to_double()) : static_cast<T>(v.to_int64());
    else value = v.is_float() ? convert_value<T>(v.to_double()) : static_cast<T>(v.to_uint64());
    auto* p = data.bytes().data();
    for (std::size_t i = 0; i < shape.num_elements(); ++i) std::memcpy(p + i * sizeof(T), &value, sizeof(T));
  });
  return upload(std::move(data), d);
}
Prim d_zeros(const Shape& s, DeviceId d, DType dt) { return call<Family::Full>(OpCode::full, d, s, Scalar(0), d, dt); }
Prim d_ones(const Shape& s, DeviceId d, DType dt) { return call<Family::Full>(OpCode::full, d, s, Scalar(1), d, dt); }

Prim d_arange_step(std::int64_t start, std::int64_t end, std::int64_t step, DeviceId d, DType dt) {
  // The values are built on the host: a range too large for host memory is refused
  // up front (not after pushing elements one by one for minutes).
  const std::uint64_t n = arange_count(start, end, step);
  std::vector<std::int64_t> v;
  try {
    // Probed with malloc first: it returns null where a failing operator new would be
    // fatal under AddressSanitizer instead of throwing.
    void* probe = n > std::numeric_limits<std::size_t>::max() / sizeof(std::int64_t) ? nullptr : std::malloc(n * sizeof(std::int64_t));
    if (!probe && n) throw std::bad_alloc();
    std::free(probe);
    v.reserve(n);
  } catch (const std::exception&) {  // bad_alloc, or length_error beyond max_size
    throw ExecutionError(fmt::format("[{}] out of host memory; expected {} bytes on the host to build a range of {} "
                                     "elements for {}; got an allocation failure",
                                     current_op_name(), n * 8, n, device_string(d)));
  }
  for (std::uint64_t i = 0; i < n; ++i)
    v.push_back(static_cast<std::int64_t>(static_cast<std::uint64_t>(start) + i * static_cast<std::uint64_t>(step)));
  return upload(TensorData::from(v).convert(dt), d);
}
Prim d_arange(std::int64_t start, std::int64_t end, DeviceId d, DType dt) {
  return call<Family::RangeStep>(OpCode::arange_step, d, start, end, std::int64_t{1}, d, dt);
}

Prim d_identity(Prim x) { return x; }
Prim d_set_require_grad(Prim x, bool) { return x; }
bool d_is_require_grad(const Prim&) { return false; }

// ---- layout ---------------------------------------------------------------------

Prim d_transpose(Prim x) {
  const std::size_t r = x->rank();
  if (r < 2) return x;
  const DeviceId d = x->device();
  return call<Family::SwapDims>(OpCode::swap_dims, d, std::move(x), r - 2, r - 1);
}

Prim assign_at(Prim out, std::size_t dim, std::size_t offset, Prim part) {
  std::vector<DimSlice> ds = full_slices(out->shape());
  ds[dim] = {static_cast<std::int64_t>(offset), 1, part->shape()[dim]};
  const DeviceId d = out->device();
  return call<Family::SliceAssign>(OpCode::slice_assign, d, std::move(out), DimSlices(ds), std::move(part));
}

Prim d_repeat_dim(Prim x, std::size_t dim, std::size_t times) {
  Shape s = x->shape();
  const std::size_t n = s[dim];
  s[dim] = n * times;
  const DeviceId d = x->device();
  Prim out = call<Family::Create>(OpCode::empty, d, s, d, x->dtype());
  if (s.num_elements() == 0) return out;  // times may still be huge (2^40 copies of nothing hung)
  // By the binary digits of `times`: `block` holds x repeated `len` times and doubles each
  // round (two copies into a fresh tensor: nothing is written through an alias), so
  // there are O(log times) slice_assigns, not `times` (1e8 one-element copies hang too).
  Prim block = std::move(x);
  std::size_t len = 1, pos = 0;
  for (std::size_t left = times;;) {
    if (left & 1) {
      out = assign_at(std::move(out), dim, pos * n, block);
      pos += len;
    }
    left >>= 1;
    if (left == 0) return out;
    Shape bs = block->shape();
    bs[dim] *= 2;
    Prim twice = call<Family::Create>(OpCode::empty, d, bs, d, block->dtype());
    twice = assign_at(std::move(twice), dim, 0, block);
    block = assign_at(std::move(twice), dim, len * n, block);
    len *= 2;
  }
}

Prim d_cat(std::vector<Prim> parts, std::size_t dim) {
  Shape s = parts[0]->shape();
  std::size_t total = 0;
  for (const Prim& p : parts) total += p->shape()[dim];
  s[dim] = total;
  const DeviceId d = parts[0]->device();
  Prim out = call<Family::Create>(OpCode::empty, d, s, d, parts[0]->dtype());
  std::size_t off = 0;
  for (Prim& p : parts) {
    const std::size_t n = p->shape()[dim];
    if (n && p->shape().num_elements()) out = assign_at(std::move(out), dim, off, std::move(p));
    off += n;
  }
  return out;
}

// ---- indexing -------------------------------------------------------------------

// Runs `f`, an op implemented by another one; an IndexError names the op the user called.
template <class F>
Prim renamed_errors(std::string_view inner, std::string_view outer, F&& f) {
  try {
    return f();
  } catch (const IndexError& e) {
    std::string m = e.what();
    const std::string tag = fmt::format("[{}]", inner);
    if (m.rfind(tag, 0) == 0) m = fmt::format("[{}]{}", outer, m.substr(tag.size()));
    throw IndexError(m);
  }
}

Prim d_scatter(Prim x, std::size_t dim, Prim idx, Prim v, IndexingUpdateOp op) {
  if (op != IndexingUpdateOp::Add)
    throw NotImplemented(fmt::format("[scatter] only the Add update has a default; a backend must implement the others on {}",
                                     backend_of(x).short_name()));
  const DeviceId d = x->device();
  return renamed_errors("scatter_add", "scatter", [&] {
    return call<Family::Scatter>(OpCode::scatter_add, d, std::move(x), dim, std::move(idx), std::move(v));
  });
}
Prim d_select_assign(Prim x, std::size_t dim, Prim idx, Prim v, IndexingUpdateOp op) {
  if (op != IndexingUpdateOp::Add)
    throw NotImplemented(fmt::format("[select_assign] only the Add update has a default; a backend must implement the others "
                                     "on {}", backend_of(x).short_name()));
  const DeviceId d = x->device();
  return renamed_errors("select_add", "select_assign", [&] {
    return call<Family::SelectAssign>(OpCode::select_add, d, std::move(x), dim, std::move(idx), std::move(v));
  });
}

// Host: positions of true elements of a row-major bool buffer.
std::vector<std::int64_t> true_positions(const TensorData& m) {
  const std::vector<bool> v = m.to_vec<bool>();
  std::vector<std::int64_t> pos;
  for (std::size_t i = 0; i < v.size(); ++i)
    if (v[i]) pos.push_back(static_cast<std::int64_t>(i));
  return pos;
}

Prim d_argwhere(Prim mask, DType out) {
  const DeviceId d = mask->device();
  const Shape s = mask->shape();
  const auto pos = true_positions(read_prim(std::move(mask)));
  std::vector<std::int64_t> idx(pos.size() * s.rank());
  for (std::size_t i = 0; i < pos.size(); ++i) {
    std::int64_t rem = pos[i];
    for (std::size_t k = s.rank(); k-- > 0;) {
      idx[i * s.rank() + k] = rem % static_cast<std::int64_t>(s[k]);
      rem /= static_cast<std::int64_t>(s[k]);
    }
  }
  return upload(TensorData::from(idx, Shape{pos.size(), s.rank()}).convert(out), d);
}

Prim d_mask_select(Prim x, Prim mask) {
  const DeviceId d = x->device();
  if (!(mask->shape() == x->shape()))
    mask = call<Family::Reshape>(OpCode::expand, d, std::move(mask), x->shape());
  const auto pos = true_positions(read_prim(std::move(mask)));
  const TensorData data = read_prim(std::move(x));
  const std::size_t w = dtype_size(data.dtype());
  std::vector<std::byte> out(pos.size() * w);
  for (std::size_t i = 0; i < pos.size(); ++i)
    std::memcpy(out.data() + i * w, data.bytes().data() + static_cast<std::size_t>(pos[i]) * w, w);
  return upload(TensorData(std::move(out), Shape{pos.size()}, data.dtype()), d);
}

// ---- comparison -------------------------------------------------------------------

Prim d_not_equal(Prim a, Prim b, DType out) {
  const DeviceId d = a->device();
  return un(OpCode::bool_not, call<Family::Compare>(OpCode::equal, d, std::move(a), std::move(b), out));
}
Prim d_not_equal_elem(Prim a, Scalar s, DType out) {
  const DeviceId d = a->device();
  return un(OpCode::bool_not, call<Family::CompareScalar>(OpCode::equal_elem, d, std::move(a), s, out));
}
Prim d_is_nan(Prim x, DType out) {
  const DeviceId d = x->device();
  Prim y = x;
  return call<Family::Compare>(OpCode::not_equal, d, std::move(x), std::move(y), out);
}
Prim d_is_inf(Prim x, DType out) {
  const DeviceId d = x->device();
  return call<Family::CompareScalar>(OpCode::equal_elem, d, un(OpCode::abs, std::move(x)),
                                     Scalar(std::numeric_limits<double>::infinity()), out);
}
Prim d_bool_xor(Prim a, Prim b) {
  const DType dt = a->dtype();
  const DeviceId d = a->device();
  return call<Family::Compare>(OpCode::not_equal, d, std::move(a), std::move(b), dt);
}

// ---- arithmetic -------------------------------------------------------------------

Prim d_neg(Prim x) { return sc(OpCode::mul_scalar, std::move(x), Scalar(-1)); }
Prim d_square(Prim x) { Prim y = x; return bin(OpCode::mul, std::move(x), std::move(y)); }

Prim d_powi(Prim a, Prim b) {
  const DeviceId d = a->device();
  if (is_float_prim(a)) {
    const DType dt = a->dtype();
    return bin(OpCode::powf, std::move(a), call<Family::Cast>(OpCode::into_float, d, std::move(b), dt));
  }
  // Int base: compute in the widest float (f64 is exact below 2^53), cast back.
  const DType it = a->dtype();
  Prim fa = call<Family::Cast>(OpCode::into_float, d, std::move(a), wide_float(d));
  Prim fb = call<Family::Cast>(OpCode::into_float, d, std::move(b), wide_float(d));
  // Round before truncating: a float pow may land just below the exact integer.
  return call<Family::Cast>(OpCode::into_int, d, un(OpCode::round, bin(OpCode::powf, std::move(fa), std::move(fb))), it);
}

Prim d_powi_scalar(Prim x, Scalar s) {
  const std::int64_t n = s.to_int64();
  if (n == 0) return full_like(x, Scalar(1), x->dtype());
  if (n == 1) return x;
  if (n == 2) return d_square(std::move(x));
  if (is_float_prim(x)) {
    if (n == -1) return un(OpCode::recip, std::move(x));
    if (n == -2) return un(OpCode::recip, d_square(std::move(x)));
  }
  return sc(OpCode::powi_scalar_impl, std::move(x), s);
}
// x^n with a float exponent, for a float x. Above 2^p (p: the significand bits of
// x's dtype) the exponent cannot be odd once converted, so powi(-1, 2^63 - 1) would
// come out 1: an odd n is x^(n-1) * x (n > 0) or x^(n+1) / x (n < 0), where n -+ 1
// is even and stays even when rounded; both give the right sign of 0, 1 and inf.
Prim pow_int_exponent(Prim x, std::int64_t n) {
  const DType dt = x->dtype();
  const int p = dt == DType::F64 ? 53 : dt == DType::F32 ? 24 : dt == DType::F16 ? 11 : 8;
  const std::int64_t exact = std::int64_t{1} << p;
  if ((n > -exact && n < exact) || (n & 1) == 0)
    return sc(OpCode::powf_scalar_impl, std::move(x), Scalar(static_cast<double>(n)));
  Prim base = x;
  Prim even = sc(OpCode::powf_scalar_impl, std::move(x), Scalar(static_cast<double>(n > 0 ? n - 1 : n + 1)));
  return bin(n > 0 ? OpCode::mul : OpCode::div, std::move(even), std::move(base));
}
Prim d_powi_scalar_impl(Prim x, Scalar s) {
  if (is_float_prim(x)) return pow_int_exponent(std::move(x), s.to_int64());
  const DeviceId d = x->device();
  const DType it = x->dtype();
  Prim f = call<Family::Cast>(OpCode::into_float, d, std::move(x), wide_float(d));
  f = pow_int_exponent(std::move(f), s.to_int64());
  return call<Family::Cast>(OpCode::into_int, d, un(OpCode::round, std::move(f)), it);
}
Prim d_powf_scalar(Prim x, Scalar s) {
  const double e = s.to_double();
  if (std::isfinite(e) && std::trunc(e) == e && std::fabs(e) < 2147483648.0)
    return sc(OpCode::powi_scalar, std::move(x), Scalar(static_cast<std::int64_t>(e)));
  return sc(OpCode::powf_scalar_impl, std::move(x), s);
}

Prim d_hypot(Prim a, Prim b) {
  const DType dt = a->dtype();
  // big = max(|a|, |b|), small = min(...); result = big * sqrt(1 + (small / max(big, tiny))^2).
  Prim aa = un(OpCode::abs, std::move(a));
  Prim bb = un(OpCode::abs, std::move(b));
  Prim a_gt = cmp(OpCode::greater, aa, bb);
  Prim big = mwhere(bb, a_gt, aa);
  Prim small = mwhere(aa, a_gt, bb);
  const double tiny = dt == DType::F64 ? std::numeric_limits<double>::min()
                      : dt == DType::F16 ? 6.103515625e-05
                                         : static_cast<double>(std::numeric_limits<float>::min());
  Prim safe = sc(OpCode::clamp_min, big, Scalar(tiny));
  Prim r = bin(OpCode::div, std::move(small), std::move(safe));
  Prim r2 = d_square(std::move(r));
  Prim root = un(OpCode::sqrt, sc(OpCode::add_scalar, std::move(r2), Scalar(1.0)));
  return bin(OpCode::mul, std::move(big), std::move(root));
}

// burn's max_pair / min_pair (torch.maximum / minimum): take b where it wins (a < b for
// max) or is NaN; a NaN in a survives because every comparison with it is false.
Prim pick_pair(Prim a, Prim b, OpCode b_wins) {
  const DeviceId d = a->device();
  Prim take_b = cmp(b_wins, a, b);
  if (is_float_prim(a))
    take_b = bin(OpCode::bool_or, std::move(take_b), call<Family::Predicate>(OpCode::is_nan, d, b, bool_dt(d)));
  return mwhere(std::move(a), std::move(take_b), std::move(b));
}
Prim d_max_pair(Prim a, Prim b) { return pick_pair(std::move(a), std::move(b), OpCode::lower); }
Prim d_min_pair(Prim a, Prim b) { return pick_pair(std::move(a), std::move(b), OpCode::greater); }

Prim d_sign(Prim x) {
  const DType dt = x->dtype();
  Prim out = full_like(x, Scalar(0), dt);
  out = mfill(std::move(out), cmp_s(OpCode::lower_elem, x, Scalar(0)), Scalar(-1));
  return mfill(std::move(out), cmp_s(OpCode::greater_elem, std::move(x), Scalar(0)), Scalar(1));
}

Prim d_clamp_min(Prim x, Scalar lo) {
  Prim m = cmp_s(OpCode::lower_elem, x, lo);
  return mfill(std::move(x), std::move(m), lo);
}
Prim d_clamp_max(Prim x, Scalar hi) {
  Prim m = cmp_s(OpCode::greater_elem, x, hi);
  return mfill(std::move(x), std::move(m), hi);
}
Prim d_clamp(Prim x, Scalar lo, Scalar hi) {
  return sc(OpCode::clamp_min, sc(OpCode::clamp_max, std::move(x), hi), lo);
}

// ---- reductions -------------------------------------------------------------------

// Sums in a wide type (f32/f64, i64/u64) so narrow dtypes cannot overflow the
// intermediate sum, then divides and casts back.
Prim d_mean(Prim x) {
  const std::size_t n = x->shape().num_elements();
  const DeviceId d = x->device();
  const DType dt = x->dtype();
  const DType wide = is_float(dt)                                ? (dt == DType::F64 ? DType::F64 : DType::F32)
                     : is_unsigned_int(dt) && arith(d, DType::U64) ? DType::U64
                     : is_unsigned_int(dt)                         ? DType::U32
                                                                   : wide_int(d);
  if (dt != wide) x = call<Family::Cast>(OpCode::cast, d, std::move(x), wide);
  Prim s = call<Family::Reduce>(OpCode::sum, d, std::move(x));
  s = is_float(dt) ? sc(OpCode::div_scalar, std::move(s), Scalar(static_cast<double>(n)))
                   : sc(OpCode::div_scalar, std::move(s), Scalar(static_cast<std::uint64_t>(n)));
  return dt == wide ? s : call<Family::Cast>(OpCode::cast, d, std::move(s), dt);
}

Prim gather_at(Prim x, std::size_t dim, Prim idx) {
  const DeviceId d = x->device();
  return call<Family::Gather>(OpCode::gather, d, std::move(x), dim, std::move(idx));
}
PrimPair extremum_dim(Prim x, std::size_t dim, bool is_max, DType out) {
  const DeviceId d = x->device();
  Prim idx = call<Family::DimIndex>(is_max ? OpCode::argmax : OpCode::argmin, d, x, dim, out);
  Prim v = gather_at(std::move(x), dim, idx);
  return {std::move(v), std::move(idx)};
}
Prim d_max_dim(Prim x, std::size_t dim) { const DType t = int_dt(x->device()); return extremum_dim(std::move(x), dim, true, t).first; }
Prim d_min_dim(Prim x, std::size_t dim) { const DType t = int_dt(x->device()); return extremum_dim(std::move(x), dim, false, t).first; }
PrimPair d_max_dim_wi(Prim x, std::size_t dim, DType out) { return extremum_dim(std::move(x), dim, true, out); }
PrimPair d_min_dim_wi(Prim x, std::size_t dim, DType out) { return extremum_dim(std::move(x), dim, false, out); }
Prim d_max(Prim x) { return rdim(OpCode::max_dim, flat(std::move(x)), 0); }
Prim d_min(Prim x) { return rdim(OpCode::min_dim, flat(std::move(x)), 0); }
Prim d_max_abs_dim(Prim x, std::size_t dim) { return rdim(OpCode::max_dim, un(OpCode::abs, std::move(x)), dim); }
Prim d_max_abs(Prim x) { return rdim(OpCode::max_abs_dim, flat(std::move(x)), 0); }

// Count of nonzero elements along `dim` (or everything when dim == npos), in the widest int.
Prim nonzero_count(Prim x, std::size_t dim) {
  const DeviceId d = x->device();
  Prim nz = is_bool(x->dtype()) ? std::move(x)
                                : call<Family::CompareScalar>(OpCode::not_equal_elem, d, std::move(x), Scalar(0), bool_dt(d));
  Prim n = call<Family::Cast>(OpCode::into_int, d, std::move(nz), wide_int(d));
  if (dim == static_cast<std::size_t>(-1)) return call<Family::Reduce>(OpCode::sum, d, std::move(n));
  return rdim(OpCode::sum_dim, std::move(n), dim);
}
Prim d_any(Prim x, DType out) {
  const DeviceId d = x->device();
  return call<Family::CompareScalar>(OpCode::greater_elem, d, nonzero_count(std::move(x), static_cast<std::size_t>(-1)),
                                     Scalar(0), out);
}
Prim d_all(Prim x, DType out) {
  const DeviceId d = x->device();
  const auto n = static_cast<std::int64_t>(x->shape().num_elements());
  return call<Family::CompareScalar>(OpCode::equal_elem, d, nonzero_count(std::move(x), static_cast<std::size_t>(-1)),
                                     Scalar(n), out);
}
Prim d_any_dim(Prim x, std::size_t dim, DType out) {
  const DeviceId d = x->device();
  return call<Family::CompareScalar>(OpCode::greater_elem, d, nonzero_count(std::move(x), dim), Scalar(0), out);
}
Prim d_all_dim(Prim x, std::size_t dim, DType out) {
  const DeviceId d = x->device();
  const auto n = static_cast<std::int64_t>(x->shape()[dim]);
  return call<Family::CompareScalar>(OpCode::equal_elem, d, nonzero_count(std::move(x), dim), Scalar(n), out);
}

// Host sort along `dim` of row-major data: stable; NaN counts as the largest value,
// so it goes last ascending and first descending. Returns values and indices.
std::pair<TensorData, std::vector<std::int64_t>> host_sort(const TensorData& data, std::size_t dim, bool desc) {
  const Shape& s = data.shape();
  const std::size_t n = s[dim];
  std::size_t inner = 1;
  for (std::size_t i = dim + 1; i < s.rank(); ++i) inner *= s[i];
  const std::size_t outer = n && inner ? s.num_elements() / (n * inner) : 0;  // zero-size: nothing to sort
  TensorData out = data;
  std::vector<std::int64_t> idx(s.num_elements());
  visit_dtype(data.dtype(), [&](auto t) {
    using T = decltype(t);
    if constexpr (std::is_same_v<T, bool> || std::is_same_v<T, BoolU32>) {
      throw DTypeError("[sort] expected a Float or Int tensor; got Bool");
    } else {
      const auto* src = reinterpret_cast<const T*>(data.bytes().data());
      auto* dst = reinterpret_cast<T*>(out.bytes().data());
      std::vector<std::size_t> perm(n);
      auto key = [](T v) { return load_elem(v); };
      for (std::size_t o = 0; o < outer; ++o)
        for (std::size_t in = 0; in < inner; ++in) {
          const std::size_t base = o * n * inner + in;
          std::iota(perm.begin(), perm.end(), std::size_t{0});
          std::stable_sort(perm.begin(), perm.end(), [&](std::size_t i, std::size_t j) {
            const auto a = key(src[base + i * inner]);
            const auto b = key(src[base + j * inner]);
            if constexpr (kIsFloatLike<T>) {
              const bool na = std::isnan(a), nb = std::isnan(b);
              if (na || nb) return desc ? (na && !nb) : (!na && nb);
            }
            return desc ? b < a : a < b;
          });
          for (std::size_t k = 0; k < n; ++k) {
            dst[base + k * inner] = src[base + perm[k] * inner];
            idx[base + k * inner] = static_cast<std::int64_t>(perm[k]);
          }
        }
    }
  });
  return {std::move(out), std::move(idx)};
}

PrimPair sort_impl(Prim x, std::size_t dim, bool desc, DType out_dt) {
  const DeviceId d = x->device();
  const Shape s = x->shape();
  auto [values, idx] = host_sort(read_prim(std::move(x)), dim, desc);
  return {upload(std::move(values), d), upload(TensorData::from(idx, s).convert(out_dt), d)};
}
Prim d_sort(Prim x, std::size_t dim, bool desc) {
  const DType idx = int_dt(x->device());
  return sort_impl(std::move(x), dim, desc, idx).first;
}
PrimPair d_sort_wi(Prim x, std::size_t dim, bool desc, DType out) { return sort_impl(std::move(x), dim, desc, out); }
Prim d_argsort(Prim x, std::size_t dim, bool desc, DType out) { return sort_impl(std::move(x), dim, desc, out).second; }

Prim first_k(Prim x, std::size_t dim, std::size_t k) {
  std::vector<DimSlice> ds = full_slices(x->shape());
  ds[dim] = {0, 1, k};
  return slice_prim(std::move(x), std::move(ds));
}
PrimPair d_topk_wi(Prim x, std::size_t dim, std::size_t k, DType out) {
  const DeviceId d = x->device();
  auto [v, i] = call<Family::SortWithIndices>(OpCode::sort_with_indices, d, std::move(x), dim, true, out);
  return {first_k(std::move(v), dim, k), first_k(std::move(i), dim, k)};
}
Prim d_topk(Prim x, std::size_t dim, std::size_t k) {
  const DeviceId d = x->device();
  return first_k(call<Family::Sort>(OpCode::sort, d, std::move(x), dim, true), dim, k);
}
Prim d_argtopk(Prim x, std::size_t dim, std::size_t k, DType out) {
  const DeviceId d = x->device();
  return first_k(call<Family::Argsort>(OpCode::argsort, d, std::move(x), dim, true, out), dim, k);
}

// ---- activations ------------------------------------------------------------------

Prim d_relu(Prim x) {
  Prim m = cmp_s(OpCode::lower_equal_elem, x, Scalar(0));
  return mfill(std::move(x), std::move(m), Scalar(0));
}
Prim d_leaky_relu(Prim x, Scalar slope) {
  Prim m = cmp_s(OpCode::lower_elem, x, Scalar(0));
  Prim scaled = sc(OpCode::mul_scalar, x, slope);
  return mwhere(std::move(x), std::move(m), std::move(scaled));
}
Prim d_prelu(Prim x, Prim alpha) {
  Prim m = cmp_s(OpCode::lower_elem, x, Scalar(0));
  Prim scaled = bin(OpCode::mul, x, std::move(alpha));
  return mwhere(std::move(x), std::move(m), std::move(scaled));
}
Prim d_gelu(Prim x) {
  Prim e = un(OpCode::erf, sc(OpCode::mul_scalar, x, Scalar(0.70710678118654752440)));
  Prim h = sc(OpCode::mul_scalar, sc(OpCode::add_scalar, std::move(e), Scalar(1.0)), Scalar(0.5));
  return bin(OpCode::mul, std::move(x), std::move(h));
}
Prim d_sigmoid(Prim x) {
  // exp(-log1p(exp(-x))): saturates to exactly 0 and 1 instead of overflowing.
  Prim t = un(OpCode::log1p, un(OpCode::exp, un(OpCode::neg, std::move(x))));
  return un(OpCode::exp, un(OpCode::neg, std::move(t)));
}
Prim d_hard_sigmoid(Prim x, Scalar alpha, Scalar beta) {
  Prim y = sc(OpCode::add_scalar, sc(OpCode::mul_scalar, std::move(x), alpha), beta);
  const DeviceId d = y->device();
  return call<Family::Clamp>(OpCode::clamp, d, std::move(y), Scalar(0.0), Scalar(1.0));
}
Prim d_log_sigmoid(Prim x) {
  // min(x, 0) - log1p(exp(-|x|)): never exponentiates a large positive number, and
  // keeps log_sigmoid(-inf) = -inf (burn's -(m + log(exp(-m) + exp(-x - m))) form
  // with m = max(-x, 0) gives NaN there: inf - inf inside the exp).
  Prim m = sc(OpCode::clamp_max, x, Scalar(0.0));
  Prim t = un(OpCode::log1p, un(OpCode::exp, un(OpCode::neg, un(OpCode::abs, std::move(x)))));
  return bin(OpCode::sub, std::move(m), std::move(t));
}
Prim d_softmax(Prim x, std::size_t dim) {
  if (x->shape().num_elements() == 0) return x;  // max_dim of an empty lane would raise
  Prim m = rdim(OpCode::max_dim, x, dim);
  Prim e = un(OpCode::exp, bin(OpCode::sub, std::move(x), std::move(m)));
  Prim s = rdim(OpCode::sum_dim, e, dim);
  return bin(OpCode::div, std::move(e), std::move(s));
}
Prim d_log_softmax(Prim x, std::size_t dim) {
  if (x->shape().num_elements() == 0) return x;
  Prim m = rdim(OpCode::max_dim, x, dim);
  Prim shifted = bin(OpCode::sub, std::move(x), std::move(m));
  Prim lse = un(OpCode::log, rdim(OpCode::sum_dim, un(OpCode::exp, shifted), dim));
  return bin(OpCode::sub, std::move(shifted), std::move(lse));
}
Prim d_softmin(Prim x, std::size_t dim) { return rdim(OpCode::softmax, un(OpCode::neg, std::move(x)), dim); }
Prim d_relu_backward(Prim out, Prim grad) {
  Prim m = cmp_s(OpCode::lower_equal_elem, std::move(out), Scalar(0));
  return mfill(std::move(grad), std::move(m), Scalar(0));
}
Prim d_gelu_backward(Prim x, Prim grad) {
  // Derivative of the exact (erf) GELU x·Φ(x): Φ(x) + x·φ(x), φ(x) = exp(-x²/2) / sqrt(2π).
  Prim e = un(OpCode::erf, sc(OpCode::mul_scalar, x, Scalar(0.70710678118654752440)));
  Prim cdf = sc(OpCode::mul_scalar, sc(OpCode::add_scalar, std::move(e), Scalar(1.0)), Scalar(0.5));
  Prim pdf = sc(OpCode::mul_scalar, un(OpCode::exp, sc(OpCode::mul_scalar, d_square(x), Scalar(-0.5))),
                Scalar(0.39894228040143267794));
  Prim d = bin(OpCode::add, std::move(cdf), bin(OpCode::mul, std::move(x), std::move(pdf)));
  return bin(OpCode::mul, std::move(grad), std::move(d));
}
Prim d_sigmoid_backward(Prim out, Prim grad) {
  Prim one_minus = sc(OpCode::add_scalar, un(OpCode::neg, out), Scalar(1.0));
  return bin(OpCode::mul, bin(OpCode::mul, std::move(out), std::move(one_minus)), std::move(grad));
}
Prim d_log_sigmoid_backward(Prim x, Prim grad) {
  // d/dx log(sigmoid(x)) = sigmoid(-x)
  return bin(OpCode::mul, std::move(grad), un(OpCode::sigmoid, un(OpCode::neg, std::move(x))));
}

// ---- module ops ---------------------------------------------------------------------------
// Compositions on the device for the CNN path (conv1d/2d through windows of the padded
// input and one batched matmul, the pools through the same windows, layer_norm,
// embedding); the rest (host_trip rows) run the CPU kernel through the host.

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
Prim full_shape(const Shape& s, Scalar v, DeviceId d, DType dt);
// On the device: dy scatter-added into zeros [N*C, H*W] at the flat indices (an index -1,
// a window without a valid tap, adds nothing).
Prim d_max_pool_with_indices_backward(Prim dy, Prim idx, const Shape& x_shape, const PoolArgs&) {
  const DeviceId d = dy->device();
  const std::size_t planes = x_shape[0] * x_shape[1], plane = x_shape.num_elements() / (planes ? planes : 1);
  const std::size_t per = planes ? dy->shape().num_elements() / planes : 0;
  const Shape s2{planes, per};
  Prim i2 = reshape_to(std::move(idx), s2);
  Prim none = cmp_s(OpCode::lower_elem, i2, Scalar(0));
  Prim g = mfill(reshape_to(std::move(dy), s2), std::move(none), Scalar(0.0));
  i2 = sc(OpCode::clamp_min, std::move(i2), Scalar(0));
  Prim zeros = full_shape(Shape{planes, plane}, Scalar(0.0), d, g->dtype());
  Prim dx = call<Family::Scatter>(OpCode::scatter_add, d, std::move(zeros), std::size_t{1}, std::move(i2), std::move(g));
  return reshape_to(std::move(dx), x_shape);
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

Prim permute_prim(Prim x, std::vector<std::size_t> axes) {
  const DeviceId d = x->device();
  return call<Family::Axes>(OpCode::permute, d, std::move(x), Axes(axes));
}
Prim full_shape(const Shape& s, Scalar v, DeviceId d, DType dt) { return call<Family::Full>(OpCode::full, d, s, v, d, dt); }

// x [N, C, H, W] inside a `fill` border: `before` rows/cols above/left, `after` below/right.
Prim padded(Prim x, std::array<std::int64_t, 2> before, std::array<std::int64_t, 2> after, Scalar fill) {
  if (before == std::array<std::int64_t, 2>{0, 0} && after == std::array<std::int64_t, 2>{0, 0}) return x;
  const DeviceId d = x->device();
  const Shape s = x->shape();
  const Shape ps{s[0], s[1], s[2] + static_cast<std::size_t>(before[0] + after[0]),
                 s[3] + static_cast<std::size_t>(before[1] + after[1])};
  std::vector<DimSlice> at = full_slices(s);
  at[2].start = before[0];
  at[3].start = before[1];
  return call<Family::SliceAssign>(OpCode::slice_assign, d, full_shape(ps, fill, d, x->dtype()), DimSlices(at), std::move(x));
}

// The kernel windows of a padded [N, C, Hp, Wp]: [N, C, Ho, Wo, kh, kw] (window (i, j)
// starts at (i*s0, j*s1), taps dilation apart).
Prim windows(Prim xp, std::array<std::int64_t, 2> k, std::array<std::int64_t, 2> s, std::array<std::int64_t, 2> dil) {
  const DeviceId d = xp->device();
  const auto eh = static_cast<std::size_t>(dil[0] * (k[0] - 1) + 1), ew = static_cast<std::size_t>(dil[1] * (k[1] - 1) + 1);
  Prim u = call<Family::Unfold>(OpCode::unfold, d, std::move(xp), std::size_t{2}, eh, static_cast<std::size_t>(s[0]));
  u = call<Family::Unfold>(OpCode::unfold, d, std::move(u), std::size_t{3}, ew, static_cast<std::size_t>(s[1]));
  if (dil[0] == 1 && dil[1] == 1) return u;
  std::vector<DimSlice> ds = full_slices(u->shape());
  ds[4] = {0, dil[0], static_cast<std::size_t>(k[0])};
  ds[5] = {0, dil[1], static_cast<std::size_t>(k[1])};
  return slice_prim(std::move(u), std::move(ds));
}

// The extra right/bottom padding a ceil-mode pool needs so that `out` windows fit.
std::int64_t overhang(std::size_t in, std::int64_t out, std::int64_t k, std::int64_t s, std::int64_t p, std::int64_t dil) {
  const std::int64_t need = (out - 1) * s + dil * (k - 1) + 1, have = static_cast<std::int64_t>(in) + 2 * p;
  return need > have ? need - have : 0;
}

// conv2d: windows of the zero-padded input, [N, G, Ho*Wo, Cg*kh*kw] x [1, G, Cg*kh*kw, Cout/G].
Prim d_conv2d(Prim x, Prim w, Prim bias, const ConvArgs& a) {
  const DeviceId d = x->device();
  const Shape xs = x->shape(), ws = w->shape();
  const std::size_t n = xs[0], c = xs[1], co = ws[0], kh = ws[2], kw = ws[3];
  const auto g = static_cast<std::size_t>(a.groups);
  const std::size_t cg = c / g, cog = co / g;
  const std::array<std::int64_t, 2> k{static_cast<std::int64_t>(kh), static_cast<std::int64_t>(kw)};
  const std::array<std::int64_t, 2> p{a.padding[0], a.padding[1]};
  Prim u = windows(padded(std::move(x), p, p, Scalar(0.0)), k, {a.stride[0], a.stride[1]}, {a.dilation[0], a.dilation[1]});
  const std::size_t ho = u->shape()[2], wo = u->shape()[3], l = ho * wo, taps = cg * kh * kw;
  // [N, C, Ho, Wo, kh, kw] -> [N, Ho, Wo, C, kh, kw] -> [N, L, G, Cg*kh*kw] -> [N, G, L, Cg*kh*kw]
  u = reshape_to(permute_prim(std::move(u), {0, 2, 3, 1, 4, 5}), Shape{n, l, g, taps});
  u = permute_prim(std::move(u), {0, 2, 1, 3});
  // weight [Cout, Cg, kh, kw] -> [1, G, Cog, Cg*kh*kw] -> [1, G, Cg*kh*kw, Cog]
  Prim wm = permute_prim(reshape_to(std::move(w), Shape{1, g, cog, taps}), {0, 1, 3, 2});
  Prim y = call<Family::Matmul>(OpCode::matmul, d, std::move(u), std::move(wm));  // [N, G, L, Cog]
  y = reshape_to(permute_prim(std::move(y), {0, 1, 3, 2}), Shape{n, co, ho, wo});
  if (bias) y = bin(OpCode::add, std::move(y), reshape_to(std::move(bias), Shape{1, co, 1, 1}));
  return y;
}

// 1-d module ops run as 2-d ones over [N, C, 1, L] (burn's compositions).
ConvArgs conv_as_2d(const ConvArgs& a) {
  ConvArgs b;
  b.rank = 2;
  b.stride = {1, a.stride[0], 1};
  b.padding = {0, a.padding[0], 0};
  b.dilation = {1, a.dilation[0], 1};
  b.padding_out = {0, a.padding_out[0], 0};
  b.groups = a.groups;
  return b;
}
Prim unsqueeze2(Prim x) {
  const Shape s = x->shape();
  return reshape_to(std::move(x), Shape{s[0], s[1], 1, s[2]});
}
Prim squeeze2(Prim y) {
  const Shape s = y->shape();
  return reshape_to(std::move(y), Shape{s[0], s[1], s[3]});
}
Prim d_conv1d(Prim x, Prim w, Prim bias, const ConvArgs& a) {
  const DeviceId d = x->device();
  return squeeze2(call<Family::Conv>(OpCode::conv2d, d, unsqueeze2(std::move(x)), unsqueeze2(std::move(w)), std::move(bias),
                                     conv_as_2d(a)));
}


// conv_x_backward, rank 1 and 2, on the device: dy spread `stride` apart into zeros (the
// positions that reach x only), correlated with the flipped, group-transposed weight at
// stride 1 and the forward's dilation. Rank 3 runs through the host.
Prim conv_x_backward_2d(Prim dy, Prim w, const Shape& xs, const ConvArgs& a) {
  const DeviceId d = dy->device();
  const Shape ys = dy->shape(), ws = w->shape();
  const auto g = static_cast<std::size_t>(a.groups);
  const std::size_t co = ws[0], cg = ws[1], cog = co / g, c = cg * g;
  std::vector<DimSlice> src = full_slices(ys), dst = full_slices(ys);
  Shape zs = ys;
  for (std::size_t i = 0; i < 2; ++i) {
    const auto k = static_cast<std::int64_t>(ws[2 + i]), s = a.stride[i], in = static_cast<std::int64_t>(xs[2 + i]);
    const std::int64_t e = a.dilation[i] * (k - 1) + 1, left = e - 1 - a.padding[i], len = in + e - 1;
    const auto out = static_cast<std::int64_t>(ys[2 + i]);
    std::int64_t i0 = 0, i1 = out;  // outputs whose position left + i*s lies in [0, len)
    while (i0 < i1 && left + i0 * s < 0) ++i0;
    while (i1 > i0 && left + (i1 - 1) * s >= len) --i1;
    src[2 + i] = {i0, 1, static_cast<std::size_t>(i1 - i0)};
    dst[2 + i] = {left + i0 * s, s, static_cast<std::size_t>(i1 - i0)};
    zs[2 + i] = static_cast<std::size_t>(len);
  }
  Prim z = full_shape(zs, Scalar(0.0), d, dy->dtype());
  if (src[2].len > 0 && src[3].len > 0)
    z = call<Family::SliceAssign>(OpCode::slice_assign, d, std::move(z), DimSlices(dst), slice_prim(std::move(dy), src));
  // weight [Co, Cg, kh, kw] -> [G, Cog, Cg, kh, kw] -> [G, Cg, Cog, kh, kw] -> [C, Cog, kh, kw], flipped in space.
  Prim wt = permute_prim(reshape_to(std::move(w), Shape{g, cog, cg, ws[2], ws[3]}), {0, 2, 1, 3, 4});
  wt = reshape_to(std::move(wt), Shape{c, cog, ws[2], ws[3]});
  const std::vector<std::size_t> sp{2, 3};
  wt = call<Family::Axes>(OpCode::flip, d, std::move(wt), Axes(sp));
  ConvArgs b;
  b.rank = 2;
  b.dilation = {a.dilation[0], a.dilation[1], 1};
  b.groups = a.groups;
  return call<Family::Conv>(OpCode::conv2d, d, std::move(z), std::move(wt), Prim(), b);
}
Prim d_conv_x_backward(Prim dy, Prim w, const Shape& xs, const ConvArgs& a) {
  if (a.rank == 2) return conv_x_backward_2d(std::move(dy), std::move(w), xs, a);
  if (a.rank == 1) {
    const Shape x2{xs[0], xs[1], 1, xs[2]};
    return squeeze2(conv_x_backward_2d(unsqueeze2(std::move(dy)), unsqueeze2(std::move(w)), x2, conv_as_2d(a)));
  }
  const DeviceId d = dy->device();
  return on_cpu<Family::ConvBackward>(OpCode::conv_x_backward, d, std::move(dy), std::move(w), xs, a);
}


// conv_weight_backward, rank 1 and 2, on the device: the forward's windows of the padded
// x, [G, Cog, N*L] x [G, N*L, Cg*kh*kw]. Rank 3 runs through the host.
Prim conv_weight_backward_2d(Prim x, Prim dy, const Shape& ws, const ConvArgs& a) {
  const DeviceId d = x->device();
  const Shape xs = x->shape(), ys = dy->shape();
  const auto g = static_cast<std::size_t>(a.groups);
  const std::size_t n = xs[0], co = ws[0], cg = ws[1], cog = co / g, taps = cg * ws[2] * ws[3];
  const std::array<std::int64_t, 2> p{a.padding[0], a.padding[1]};
  const std::array<std::int64_t, 2> k{static_cast<std::int64_t>(ws[2]), static_cast<std::int64_t>(ws[3])};
  Prim u = windows(padded(std::move(x), p, p, Scalar(0.0)), k, {a.stride[0], a.stride[1]}, {a.dilation[0], a.dilation[1]});
  const std::size_t l = u->shape()[2] * u->shape()[3];
  u = reshape_to(permute_prim(std::move(u), {0, 2, 3, 1, 4, 5}), Shape{n, l, g, taps});
  u = reshape_to(permute_prim(std::move(u), {2, 0, 1, 3}), Shape{g, n * l, taps});
  Prim gy = reshape_to(std::move(dy), Shape{n, g, cog, ys[2] * ys[3]});
  gy = reshape_to(permute_prim(std::move(gy), {1, 2, 0, 3}), Shape{g, cog, n * l});
  Prim dw = call<Family::Matmul>(OpCode::matmul, d, std::move(gy), std::move(u));  // [G, Cog, Cg*kh*kw]
  return reshape_to(std::move(dw), ws);
}
Prim d_conv_weight_backward(Prim x, Prim dy, const Shape& ws, const ConvArgs& a) {
  if (a.rank == 2) return conv_weight_backward_2d(std::move(x), std::move(dy), ws, a);
  if (a.rank == 1) {
    const Shape w2{ws[0], ws[1], 1, ws[2]};
    return reshape_to(conv_weight_backward_2d(unsqueeze2(std::move(x)), unsqueeze2(std::move(dy)), w2, conv_as_2d(a)), ws);
  }
  const DeviceId d = x->device();
  return on_cpu<Family::ConvBackward>(OpCode::conv_weight_backward, d, std::move(x), std::move(dy), ws, a);
}

// dy [N, C, *S] summed over every dim but 1.
Prim d_conv_bias_backward(Prim dy) {
  const std::size_t c = dy->shape()[1], r = dy->shape().rank();
  for (std::size_t i = 0; i < r; ++i)
    if (i != 1) dy = rdim(OpCode::sum_dim, std::move(dy), i);
  return reshape_to(std::move(dy), Shape{c});
}

PoolArgs pool_as_2d(const PoolArgs& a) {
  PoolArgs b = a;
  b.rank = 2;
  b.kernel = {1, a.kernel[0], 1};
  b.stride = {1, a.stride[0], 1};
  b.padding = {0, a.padding[0], 0};
  b.dilation = {1, a.dilation[0], 1};
  b.output_size = {1, a.output_size[0], 1};
  return b;
}
std::array<std::int64_t, 2> two(const std::array<std::int64_t, 3>& v) { return {v[0], v[1]}; }

// The window sums / maxima of x [N, C, H, W] as [N, C, Ho, Wo] (out from the shape rule).
Prim pooled_windows(Prim x, const PoolArgs& a, std::size_t oh, std::size_t ow, Scalar fill, bool max) {
  const Shape xs = x->shape();
  const auto ho = static_cast<std::int64_t>(oh), wo = static_cast<std::int64_t>(ow);
  const std::array<std::int64_t, 2> after{
      a.padding[0] + overhang(xs[2], ho, a.kernel[0], a.stride[0], a.padding[0], a.dilation[0]),
      a.padding[1] + overhang(xs[3], wo, a.kernel[1], a.stride[1], a.padding[1], a.dilation[1])};
  Prim u = windows(padded(std::move(x), two(a.padding), after, fill), two(a.kernel), two(a.stride), two(a.dilation));
  // Ceil mode may leave one window more than torch keeps: take the first `out`.
  std::vector<DimSlice> ds = full_slices(u->shape());
  ds[2].len = oh;
  ds[3].len = ow;
  u = slice_prim(std::move(u), std::move(ds));
  const Shape us = u->shape();
  u = reshape_to(std::move(u), Shape{us[0], us[1], oh, ow, us[4] * us[5]});
  u = rdim(max ? OpCode::max_dim : OpCode::sum_dim, std::move(u), 4);
  return reshape_to(std::move(u), Shape{us[0], us[1], oh, ow});
}

// Output size of one pool dim (the nn_options rule the forwarder checked).
std::size_t pool_dim(std::size_t in, const PoolArgs& a, std::size_t i) {
  return static_cast<std::size_t>(tensor::nn::pool_out_size(static_cast<std::int64_t>(in), a.kernel[i], a.stride[i],
                                                            a.padding[i], a.dilation[i], a.ceil_mode));
}

Prim d_max_pool2d(Prim x, const PoolArgs& a) {
  const Shape xs = x->shape();
  return pooled_windows(std::move(x), a, pool_dim(xs[2], a, 0), pool_dim(xs[3], a, 1),
                        Scalar(-std::numeric_limits<double>::infinity()), true);
}
Prim d_max_pool1d(Prim x, const PoolArgs& a) {
  const DeviceId d = x->device();
  return squeeze2(call<Family::Pool>(OpCode::max_pool2d, d, unsqueeze2(std::move(x)), pool_as_2d(a)));
}

// avg: window sums over zero padding, divided by the count of taps inside the padded
// input (count_include_pad) or inside the input; the counts come from pooling a mask
// of ones the same way, so everything stays on the device.
// The divisors of avg pooling [1, 1, oh, ow]: taps inside the padded input
// (count_include_pad) or inside the input, from pooling ones on the device.
Prim avg_counts(const Shape& xs, const PoolArgs& a, std::size_t oh, std::size_t ow, DeviceId d, DType dt) {
  Prim ones = full_shape(Shape{1, 1, xs[2], xs[3]}, Scalar(1.0), d, dt);
  if (a.count_include_pad) ones = padded(std::move(ones), two(a.padding), two(a.padding), Scalar(1.0));
  // With the padding made of ones, the windows start at the ones' origin.
  Prim counts;
  if (a.count_include_pad) {
    const Shape os = ones->shape();
    const std::array<std::int64_t, 2> after{
        overhang(os[2], static_cast<std::int64_t>(oh), a.kernel[0], a.stride[0], 0, 1),
        overhang(os[3], static_cast<std::int64_t>(ow), a.kernel[1], a.stride[1], 0, 1)};
    Prim u = windows(padded(std::move(ones), {0, 0}, after, Scalar(0.0)), two(a.kernel), two(a.stride), {1, 1});
    std::vector<DimSlice> ds = full_slices(u->shape());
    ds[2].len = oh;
    ds[3].len = ow;
    u = slice_prim(std::move(u), std::move(ds));
    u = reshape_to(std::move(u), Shape{1, 1, oh, ow, static_cast<std::size_t>(a.kernel[0] * a.kernel[1])});
    counts = reshape_to(rdim(OpCode::sum_dim, std::move(u), 4), Shape{1, 1, oh, ow});
  } else {
    counts = pooled_windows(std::move(ones), a, oh, ow, Scalar(0.0), false);
  }
  return counts;
}

Prim d_avg_pool2d(Prim x, const PoolArgs& args) {
  PoolArgs a = args;
  a.dilation = {1, 1, 1};  // avg pools have none
  const DeviceId d = x->device();
  const Shape xs = x->shape();
  const DType dt = x->dtype();
  const std::size_t oh = pool_dim(xs[2], a, 0), ow = pool_dim(xs[3], a, 1);
  Prim sums = pooled_windows(std::move(x), a, oh, ow, Scalar(0.0), false);
  Prim counts = avg_counts(xs, a, oh, ow, d, dt);
  return bin(OpCode::div, std::move(sums), std::move(counts));
}
// avg_pool_backward on the device: dy / counts added into the padded input once per
// kernel tap (slice_assign with the stride), then the padding cropped.
Prim avg_backward_2d(Prim dy, const Shape& xs, const PoolArgs& args) {
  PoolArgs a = args;
  a.dilation = {1, 1, 1};
  const DeviceId d = dy->device();
  const DType dt = dy->dtype();
  const Shape ys = dy->shape();
  const std::size_t oh = ys[2], ow = ys[3];
  Prim g = bin(OpCode::div, std::move(dy), avg_counts(xs, a, oh, ow, d, dt));
  const auto hp = static_cast<std::size_t>(static_cast<std::int64_t>(xs[2]) + 2 * a.padding[0] +
                                            overhang(xs[2], static_cast<std::int64_t>(oh), a.kernel[0], a.stride[0], a.padding[0], 1));
  const auto wp = static_cast<std::size_t>(static_cast<std::int64_t>(xs[3]) + 2 * a.padding[1] +
                                            overhang(xs[3], static_cast<std::int64_t>(ow), a.kernel[1], a.stride[1], a.padding[1], 1));
  const Shape ps{xs[0], xs[1], hp, wp};
  Prim acc;
  for (std::int64_t ka = 0; ka < a.kernel[0]; ++ka)
    for (std::int64_t kb = 0; kb < a.kernel[1]; ++kb) {
      std::vector<DimSlice> at = full_slices(ps);
      at[2] = {ka, a.stride[0], oh};
      at[3] = {kb, a.stride[1], ow};
      Prim part = call<Family::SliceAssign>(OpCode::slice_assign, d, full_shape(ps, Scalar(0.0), d, dt), DimSlices(at), g);
      acc = acc ? bin(OpCode::add, std::move(acc), std::move(part)) : std::move(part);
    }
  std::vector<DimSlice> crop = full_slices(ps);
  crop[2] = {a.padding[0], 1, xs[2]};
  crop[3] = {a.padding[1], 1, xs[3]};
  return slice_prim(std::move(acc), std::move(crop));
}
Prim d_avg_pool_backward(Prim dy, const Shape& x_shape, const PoolArgs& a) {
  if (a.rank == 1) {
    const Shape x2{x_shape[0], x_shape[1], 1, x_shape[2]};
    return reshape_to(avg_backward_2d(unsqueeze2(std::move(dy)), x2, pool_as_2d(a)), x_shape);
  }
  return avg_backward_2d(std::move(dy), x_shape, a);
}
Prim d_avg_pool1d(Prim x, const PoolArgs& a) {
  const DeviceId d = x->device();
  return squeeze2(call<Family::Pool>(OpCode::avg_pool2d, d, unsqueeze2(std::move(x)), pool_as_2d(a)));
}

// Adaptive average: separable, one slice + mean per output row, then per output column.
Prim adaptive_dim(Prim x, std::size_t dim, std::size_t out) {
  const DeviceId d = x->device();
  const std::size_t in = x->shape()[dim];
  std::vector<Prim> parts;
  for (std::size_t i = 0; i < out; ++i) {
    const auto s = tensor::nn::adaptive_start(static_cast<std::int64_t>(i), static_cast<std::int64_t>(in), static_cast<std::int64_t>(out));
    const auto e = tensor::nn::adaptive_end(static_cast<std::int64_t>(i), static_cast<std::int64_t>(in), static_cast<std::int64_t>(out));
    std::vector<DimSlice> ds = full_slices(x->shape());
    ds[dim] = {s, 1, static_cast<std::size_t>(e - s)};
    parts.push_back(rdim(OpCode::mean_dim, slice_prim(x, std::move(ds)), dim));
  }
  if (parts.size() == 1) return std::move(parts[0]);
  return call<Family::Cat>(OpCode::cat, d, std::move(parts), dim);
}
Prim d_adaptive_avg_pool2d(Prim x, const PoolArgs& a) {
  Prim y = adaptive_dim(std::move(x), 2, static_cast<std::size_t>(a.output_size[0]));
  return adaptive_dim(std::move(y), 3, static_cast<std::size_t>(a.output_size[1]));
}
// adaptive_avg_pool_backward on the device, one dim at a time: each output's gradient,
// divided by its window length, added over its window.
Prim adaptive_dim_backward(Prim g, std::size_t dim, std::size_t in) {
  const DeviceId d = g->device();
  const std::size_t out = g->shape()[dim];
  Shape target = g->shape();
  target[dim] = in;
  Prim acc;
  for (std::size_t i = 0; i < out; ++i) {
    const auto s = tensor::nn::adaptive_start(static_cast<std::int64_t>(i), static_cast<std::int64_t>(in), static_cast<std::int64_t>(out));
    const auto e = tensor::nn::adaptive_end(static_cast<std::int64_t>(i), static_cast<std::int64_t>(in), static_cast<std::int64_t>(out));
    std::vector<DimSlice> one = full_slices(g->shape());
    one[dim] = {static_cast<std::int64_t>(i), 1, 1};
    Prim gi = sc(OpCode::mul_scalar, slice_prim(g, std::move(one)), Scalar(1.0 / static_cast<double>(e - s)));
    Shape wide = gi->shape();
    wide[dim] = static_cast<std::size_t>(e - s);
    gi = call<Family::Reshape>(OpCode::expand, d, std::move(gi), wide);
    std::vector<DimSlice> at = full_slices(target);
    at[dim] = {s, 1, static_cast<std::size_t>(e - s)};
    Prim part = call<Family::SliceAssign>(OpCode::slice_assign, d, full_shape(target, Scalar(0.0), d, g->dtype()),
                                          DimSlices(at), std::move(gi));
    acc = acc ? bin(OpCode::add, std::move(acc), std::move(part)) : std::move(part);
  }
  return acc;
}
Prim d_adaptive_avg_pool_backward(Prim dy, const Shape& x_shape, const PoolArgs& a) {
  if (a.rank == 1) return adaptive_dim_backward(std::move(dy), 2, x_shape[2]);
  if (a.rank == 3) dy = adaptive_dim_backward(std::move(dy), 4, x_shape[4]);
  Prim g = adaptive_dim_backward(std::move(dy), 3, x_shape[3]);
  return adaptive_dim_backward(std::move(g), 2, x_shape[2]);
}
Prim d_adaptive_avg_pool1d(Prim x, const PoolArgs& a) {
  const DeviceId d = x->device();
  return squeeze2(call<Family::Pool>(OpCode::adaptive_avg_pool2d, d, unsqueeze2(std::move(x)), pool_as_2d(a)));
}

// embedding: select rows of the weights at the flattened indices.
Prim d_embedding(Prim weights, Prim indices) {
  const DeviceId d = weights->device();
  Shape out = indices->shape();
  out.push_back(weights->shape()[1]);
  Prim rows = call<Family::Select>(OpCode::select, d, std::move(weights), std::size_t{0}, flat(std::move(indices)));
  return reshape_to(std::move(rows), out);
}
// embedding_backward: dy rows added into zeros at the indices.
Prim d_embedding_backward(Prim dy, Prim indices, const Shape& weight_shape) {
  const DeviceId d = dy->device();
  const std::size_t count = indices->shape().num_elements();
  Prim zeros = full_shape(weight_shape, Scalar(0.0), d, dy->dtype());
  Prim rows = reshape_to(std::move(dy), Shape{count, weight_shape[1]});
  return call<Family::SelectAssign>(OpCode::select_add, d, std::move(zeros), std::size_t{0}, flat(std::move(indices)),
                                    std::move(rows));
}

// layer_norm over the last dim: (x - mean) / sqrt(biased var + eps) * gamma + beta.
Prim d_layer_norm(Prim x, Prim gamma, Prim beta, double eps) {
  const Shape s = x->shape();
  const std::size_t last = s.rank() - 1;
  Shape ps{std::vector<std::size_t>(s.rank(), 1)};
  ps[last] = s[last];
  Prim xc = bin(OpCode::sub, x, rdim(OpCode::mean_dim, x, last));
  Prim var = rdim(OpCode::mean_dim, d_square(xc), last);
  Prim rstd = un(OpCode::recip, un(OpCode::sqrt, sc(OpCode::add_scalar, std::move(var), Scalar(eps))));
  Prim y = bin(OpCode::mul, bin(OpCode::mul, std::move(xc), std::move(rstd)), reshape_to(std::move(gamma), ps));
  if (beta) y = bin(OpCode::add, std::move(y), reshape_to(std::move(beta), ps));
  return y;
}

// ---- gather_nd / scatter_nd ------------------------------------------------------------
// The indices [.., k] are read back (their values decide the rows, and an out-of-range
// component would otherwise alias another row); x and the values stay on the device:
// x is viewed as [prod(first k dims), rest..] and rows of it are selected or updated.

struct NdRows {
  Shape flat;                      // [prod(s[0..k)), s[k..]..]
  std::vector<std::int64_t> rows;  // one linear row per index tuple
};
NdRows nd_rows(std::string_view op, const Shape& s, Prim idx) {
  const Shape is = idx->shape();
  const std::size_t k = is[is.rank() - 1];
  const std::vector<std::int64_t> host = read_prim(std::move(idx)).convert(DType::I64).to_vec<std::int64_t>();
  NdRows r;
  r.flat = Shape{1};
  for (std::size_t j = 0; j < k; ++j) r.flat[0] *= s[j];
  for (std::size_t j = k; j < s.rank(); ++j) r.flat.push_back(s[j]);
  std::vector<std::int64_t> strides(k, 1);
  for (std::size_t j = k - 1; j > 0; --j) strides[j - 1] = strides[j] * static_cast<std::int64_t>(s[j]);
  r.rows.assign(host.size() / k, 0);
  for (std::size_t i = 0; i < host.size(); ++i) {
    const std::size_t j = i % k;
    if (host[i] < 0 || host[i] >= static_cast<std::int64_t>(s[j]))
      throw IndexError(fmt::format("[{}] index out of range; expected 0..{} for dim {} of {}; got {}", op,
                                   static_cast<std::int64_t>(s[j]) - 1, j, s.to_string(), host[i]));
    r.rows[i / k] += host[i] * strides[j];
  }
  return r;
}
Prim upload_ints(const std::vector<std::int64_t>& v, DeviceId d) {
  return upload(TensorData::from(v, Shape{v.size()}).convert(int_dt(d)), d);
}

Prim d_gather_nd(Prim x, Prim idx) {
  const DeviceId d = x->device();
  const Shape s = x->shape(), out = nd_slices_shape(s, idx->shape());
  NdRows r = nd_rows("gather_nd", s, std::move(idx));
  Prim rows = upload_ints(r.rows, d);
  Prim sel = call<Family::Select>(OpCode::select, d, reshape_to(std::move(x), r.flat), std::size_t{0}, std::move(rows));
  return reshape_to(std::move(sel), out);
}

// Assign: the addressed rows are zeroed, then the last value written to each row is added
// (of duplicates, the last write wins, as burn's scatter_nd). Add: select_add; the other
// rules go to the backend's select_assign (its default has Add only).
Prim d_scatter_nd(Prim x, Prim idx, Prim v, IndexingUpdateOp update) {
  const DeviceId d = x->device();
  const Shape s = x->shape();
  NdRows r = nd_rows("scatter_nd", s, std::move(idx));
  Shape vflat = r.flat;
  vflat[0] = r.rows.size();
  Prim base = reshape_to(std::move(x), r.flat), vals = reshape_to(std::move(v), vflat);
  if (r.rows.empty()) return reshape_to(std::move(base), s);
  IndexingUpdateOp how = update;
  std::vector<std::int64_t> rows = r.rows;
  if (update == IndexingUpdateOp::Assign) {
    std::vector<std::int64_t> last(r.flat[0], -1), keep, kept;
    for (std::size_t i = 0; i < rows.size(); ++i) last[static_cast<std::size_t>(rows[i])] = static_cast<std::int64_t>(i);
    std::vector<bool> hit(r.flat[0], false);
    for (std::size_t i = 0; i < rows.size(); ++i)
      if (last[static_cast<std::size_t>(rows[i])] == static_cast<std::int64_t>(i)) {
        keep.push_back(static_cast<std::int64_t>(i));
        kept.push_back(rows[i]);
        hit[static_cast<std::size_t>(rows[i])] = true;
      }
    Shape ms{std::vector<std::size_t>(r.flat.rank(), 1)};
    ms[0] = r.flat[0];
    Prim mask = upload(TensorData::from<bool>(hit).convert(bool_dt(d)), d);
    base = mfill(std::move(base), reshape_to(std::move(mask), ms), Scalar(0));
    if (keep.size() != rows.size()) {
      vals = call<Family::Select>(OpCode::select, d, std::move(vals), std::size_t{0}, upload_ints(keep, d));
      rows = std::move(kept);
    }
    how = IndexingUpdateOp::Add;
  }
  Prim out = how == IndexingUpdateOp::Add
                 ? call<Family::SelectAssign>(OpCode::select_add, d, std::move(base), std::size_t{0}, upload_ints(rows, d),
                                              std::move(vals))
                 : call<Family::SelectUpdate>(OpCode::select_assign, d, std::move(base), std::size_t{0}, upload_ints(rows, d),
                                              std::move(vals), how);
  return reshape_to(std::move(out), s);
}

// ---- grid_sample_2d ---------------------------------------------------------------------
// Bilinear (or nearest) taps gathered from the flattened image, as torch's grid_sampler_2d:
// the grid's x, y in [-1, 1] map to pixel coordinates (align_corners: -1 and 1 are the
// corner pixels' centres; otherwise their outer edges). Padding: Zeros (a tap outside the
// image adds nothing), Border (coordinates clamped to the image), Reflection (coordinates
// reflected at the border (align_corners: the corner centres; otherwise the outer edges),
// then clamped, as torch's reflect_coordinates).

// Reflects p into [lo2/2, hi2/2] (torch's reflect_coordinates(p, twice_low, twice_high)).
Prim reflected(Prim p, double twice_low, double twice_high) {
  if (twice_low == twice_high) return sc(OpCode::mul_scalar, std::move(p), Scalar(0.0));
  const double lo = twice_low / 2, span = (twice_high - twice_low) / 2;
  Prim in = un(OpCode::abs, sc(OpCode::sub_scalar, std::move(p), Scalar(lo)));
  Prim flips = un(OpCode::floor, sc(OpCode::div_scalar, in, Scalar(span)));
  Prim extra = bin(OpCode::sub, std::move(in), sc(OpCode::mul_scalar, flips, Scalar(span)));
  Prim odd = cmp_s(OpCode::greater_elem, sc(OpCode::remainder_scalar, std::move(flips), Scalar(2.0)), Scalar(0.5));
  Prim even_v = sc(OpCode::add_scalar, extra, Scalar(lo));
  Prim odd_v = sc(OpCode::add_scalar, un(OpCode::neg, std::move(extra)), Scalar(span + lo));
  return mwhere(std::move(even_v), std::move(odd), std::move(odd_v));
}

Prim d_grid_sample(Prim x, Prim grid_in, const GridSampleOptions& o) {
  using P = GridSampleOptions::Padding;
  const DeviceId d = x->device();
  const Shape s = x->shape(), gs = grid_in->shape();
  const std::size_t n = s[0], c = s[1], h = s[2], w = s[3], ho = gs[1], wo = gs[2];
  const DType dt = x->dtype();
  Prim grid = grid_in->dtype() == dt ? std::move(grid_in) : call<Family::Cast>(OpCode::cast, d, std::move(grid_in), dt);
  auto clamp_to = [&](Prim p, double hi) { return call<Family::Clamp>(OpCode::clamp, d, std::move(p), Scalar(0.0), Scalar(hi)); };
  // Pixel coordinates [N, Ho, Wo] of the grid's x (along W, which = 0) and y (along H).
  auto coord = [&](std::int64_t which, std::size_t size) {
    std::vector<DimSlice> sl = full_slices(gs);
    sl[3] = {which, 1, 1};
    Prim v = reshape_to(slice_prim(grid, sl), Shape{n, ho, wo});
    const double sz = static_cast<double>(size);
    Prim p = o.align_corners ? sc(OpCode::mul_scalar, sc(OpCode::add_scalar, std::move(v), Scalar(1.0)), Scalar((sz - 1) / 2))
                             : sc(OpCode::div_scalar,
                                  sc(OpCode::sub_scalar, sc(OpCode::mul_scalar, sc(OpCode::add_scalar, std::move(v), Scalar(1.0)), Scalar(sz)),
                                     Scalar(1.0)),
                                  Scalar(2.0));
    if (o.mode == GridSampleOptions::Mode::Bicubic) return p;  // bicubic pads each tap's coordinates instead
    if (o.padding == P::Border) p = clamp_to(std::move(p), sz - 1);
    if (o.padding == P::Reflection) {
      p = o.align_corners ? reflected(std::move(p), 0.0, 2 * (sz - 1)) : reflected(std::move(p), -1.0, 2 * sz - 1);
      p = clamp_to(std::move(p), sz - 1);
    }
    return p;
  };
  Prim ix = coord(0, w), iy = coord(1, h);
  Prim img = reshape_to(std::move(x), Shape{n, c, h * w});
  const DType it = int_dt(d);
  const Shape plane{n, 1, ho * wo}, taps{n, c, ho * wo}, out{n, c, ho, wo};
  // The pixel at integer coordinates (xc, yc) times weight wt, zero outside the image.
  auto tap = [&](const Prim& xc, const Prim& yc, Prim wt) {
    Prim outside = bin(OpCode::bool_or,
                       bin(OpCode::bool_or, cmp_s(OpCode::lower_elem, xc, Scalar(0.0)),
                           cmp_s(OpCode::greater_elem, xc, Scalar(static_cast<double>(w) - 1))),
                       bin(OpCode::bool_or, cmp_s(OpCode::lower_elem, yc, Scalar(0.0)),
                           cmp_s(OpCode::greater_elem, yc, Scalar(static_cast<double>(h) - 1))));
    Prim lin = bin(OpCode::add, sc(OpCode::mul_scalar, clamp_to(yc, static_cast<double>(h) - 1), Scalar(static_cast<double>(w))),
                   clamp_to(xc, static_cast<double>(w) - 1));
    Prim li = reshape_to(call<Family::Cast>(OpCode::into_int, d, std::move(lin), it), plane);
    Prim lie = call<Family::Reshape>(OpCode::expand, d, std::move(li), taps);
    Prim vals = reshape_to(call<Family::Gather>(OpCode::gather, d, img, std::size_t{2}, std::move(lie)), out);
    Prim wz = reshape_to(mfill(std::move(wt), std::move(outside), Scalar(0.0)), Shape{n, 1, ho, wo});
    return bin(OpCode::mul, std::move(vals), std::move(wz));
  };
  if (o.mode == GridSampleOptions::Mode::Nearest) {
    Prim rx = un(OpCode::round, ix), ry = un(OpCode::round, iy);
    return tap(rx, ry, full_shape(Shape{n, ho, wo}, Scalar(1.0), d, dt));
  }
  if (o.mode == GridSampleOptions::Mode::Bicubic) {
    // torch's bicubic: taps floor(p) - 1 .. floor(p) + 2 on each axis, cubic convolution
    // weights with A = -0.75, and the padding rule applied to each tap coordinate (Border:
    // clamped; Reflection: reflected, then clamped; Zeros: taps outside add nothing).
    constexpr double A = -0.75;
    auto pad_tap = [&](Prim c, std::size_t size) {
      const double sz = static_cast<double>(size);
      if (o.padding == P::Border) return clamp_to(std::move(c), sz - 1);
      if (o.padding == P::Reflection) {
        c = o.align_corners ? reflected(std::move(c), 0.0, 2 * (sz - 1)) : reflected(std::move(c), -1.0, 2 * sz - 1);
        return clamp_to(std::move(c), sz - 1);
      }
      return c;
    };
    // The four weights of fraction t: conv2(t + 1), conv1(t), conv1(1 - t), conv2(2 - t), with
    // conv1(u) = ((A + 2) u - (A + 3)) u^2 + 1 and conv2(u) = ((A u - 5A) u + 8A) u - 4A.
    auto weights = [&](const Prim& t) {
      auto conv1 = [&](Prim u) {
        Prim in = sc(OpCode::sub_scalar, sc(OpCode::mul_scalar, u, Scalar(A + 2)), Scalar(A + 3));
        return sc(OpCode::add_scalar, bin(OpCode::mul, bin(OpCode::mul, std::move(in), u), u), Scalar(1.0));
      };
      auto conv2 = [&](Prim u) {
        Prim in = sc(OpCode::sub_scalar, sc(OpCode::mul_scalar, u, Scalar(A)), Scalar(5 * A));
        in = sc(OpCode::add_scalar, bin(OpCode::mul, std::move(in), u), Scalar(8 * A));
        return sc(OpCode::sub_scalar, bin(OpCode::mul, std::move(in), u), Scalar(4 * A));
      };
      Prim one_minus = sc(OpCode::add_scalar, un(OpCode::neg, t), Scalar(1.0));
      return std::array<Prim, 4>{conv2(sc(OpCode::add_scalar, t, Scalar(1.0))), conv1(t), conv1(one_minus),
                                 conv2(sc(OpCode::add_scalar, un(OpCode::neg, t), Scalar(2.0)))};
    };
    Prim fx0 = un(OpCode::floor, ix), fy0 = un(OpCode::floor, iy);
    const std::array<Prim, 4> wx = weights(bin(OpCode::sub, ix, fx0)), wy = weights(bin(OpCode::sub, iy, fy0));
    std::array<Prim, 4> xs, ys;
    for (std::size_t i = 0; i < 4; ++i) {
      xs[i] = pad_tap(sc(OpCode::add_scalar, fx0, Scalar(static_cast<double>(i) - 1.0)), w);
      ys[i] = pad_tap(sc(OpCode::add_scalar, fy0, Scalar(static_cast<double>(i) - 1.0)), h);
    }
    Prim acc;
    for (std::size_t j = 0; j < 4; ++j)
      for (std::size_t i = 0; i < 4; ++i) {
        Prim t = tap(xs[i], ys[j], bin(OpCode::mul, wx[i], wy[j]));
        acc = acc ? bin(OpCode::add, std::move(acc), std::move(t)) : std::move(t);
      }
    return acc;
  }
  Prim x0 = un(OpCode::floor, ix), y0 = un(OpCode::floor, iy);
  Prim x1 = sc(OpCode::add_scalar, x0, Scalar(1.0)), y1 = sc(OpCode::add_scalar, y0, Scalar(1.0));
  Prim fx = bin(OpCode::sub, ix, x0), fy = bin(OpCode::sub, iy, y0);  // the weights of x1 / y1
  Prim gx = sc(OpCode::add_scalar, un(OpCode::neg, fx), Scalar(1.0));
  Prim gy = sc(OpCode::add_scalar, un(OpCode::neg, fy), Scalar(1.0));
  Prim acc = tap(x0, y0, bin(OpCode::mul, gx, gy));
  acc = bin(OpCode::add, std::move(acc), tap(x1, y0, bin(OpCode::mul, fx, gy)));
  acc = bin(OpCode::add, std::move(acc), tap(x0, y1, bin(OpCode::mul, gx, fy)));
  return bin(OpCode::add, std::move(acc), tap(x1, y1, bin(OpCode::mul, fx, fy)));
}

// ---- rfft / irfft: the DFT as a matmul with cos / sin matrices ---------------------------
// O(n^2) per row (the CPU has the mixed-radix / Bluestein kernels). The matrices are built
// on the host in double (angles 2 pi (j k mod n) / n, exact in the index) and uploaded in x's
// dtype; the signal moves to the last dim, [rows, len] @ [len, bins].

Prim dim_last(Prim x, std::size_t dim) {
  const std::size_t last = x->shape().rank() - 1;
  if (dim == last) return x;
  const DeviceId d = x->device();
  return call<Family::SwapDims>(OpCode::swap_dims, d, std::move(x), dim, last);
}
Prim matrix(std::size_t rows, std::size_t cols, DeviceId d, DType dt, const std::vector<double>& v) {
  return upload(TensorData::from(v, Shape{rows, cols}).convert(dt), d);
}
double angle(std::size_t j, std::size_t k, std::size_t n) {
  const auto r = static_cast<double>((static_cast<unsigned long long>(j) * k) % n);
  return 2.0 * 3.14159265358979323846 * r / static_cast<double>(n);
}
// x [.., L] (last dim) with L cut to `used`: [rows, used].
Prim rows_of(Prim x, std::size_t used) {
  const Shape s = x->shape();
  const std::size_t last = s.rank() - 1;
  if (s[last] != used) {
    std::vector<DimSlice> sl = full_slices(s);
    sl[last] = {0, 1, used};
    x = slice_prim(std::move(x), sl);
  }
  const std::size_t rows = used ? x->shape().num_elements() / used : 0;
  return reshape_to(std::move(x), Shape{rows, used});
}
Prim back_to(Prim y2, Shape s_last, std::size_t len, std::size_t dim) {
  s_last[s_last.rank() - 1] = len;
  Prim y = reshape_to(std::move(y2), s_last);
  return dim_last(std::move(y), dim);  // swapping back is the same swap
}

PrimPair d_rfft(Prim x, std::size_t dim, std::size_t n) {
  const DeviceId d = x->device();
  const DType dt = x->dtype();
  x = dim_last(std::move(x), dim);
  const Shape s = x->shape();
  const std::size_t used = std::min(s[s.rank() - 1], n), bins = n / 2 + 1;
  std::vector<double> c(used * bins), sn(used * bins);
  for (std::size_t j = 0; j < used; ++j)
    for (std::size_t k = 0; k < bins; ++k) {
      c[j * bins + k] = std::cos(angle(j, k, n));
      sn[j * bins + k] = -std::sin(angle(j, k, n));
    }
  Prim x2 = rows_of(std::move(x), used);
  Prim re = call<Family::Matmul>(OpCode::matmul, d, x2, matrix(used, bins, d, dt, c));
  Prim im = call<Family::Matmul>(OpCode::matmul, d, std::move(x2), matrix(used, bins, d, dt, sn));
  return {back_to(std::move(re), s, bins, dim), back_to(std::move(im), s, bins, dim)};
}

// y[j] = (1/n) sum_k c_k (re_k cos - im_k sin)(2 pi j k / n), c_k = 1 at DC and Nyquist, 2
// between; the imaginary parts of DC and Nyquist are ignored; bins past n/2 + 1 unused,
// missing bins zero.
Prim d_irfft(Prim re, Prim im, std::size_t dim, std::size_t n) {
  const DeviceId d = re->device();
  const DType dt = re->dtype();
  re = dim_last(std::move(re), dim);
  im = dim_last(std::move(im), dim);
  const Shape s = re->shape();
  const std::size_t used = std::min(s[s.rank() - 1], n / 2 + 1);
  std::vector<double> a(used * n), b(used * n);
  for (std::size_t k = 0; k < used; ++k) {
    const bool edge = k == 0 || (n % 2 == 0 && k == n / 2);
    const double ck = (edge ? 1.0 : 2.0) / static_cast<double>(n);
    for (std::size_t j = 0; j < n; ++j) {
      a[k * n + j] = ck * std::cos(angle(j, k, n));
      b[k * n + j] = edge ? 0.0 : -ck * std::sin(angle(j, k, n));
    }
  }
  Prim y = bin(OpCode::add, call<Family::Matmul>(OpCode::matmul, d, rows_of(std::move(re), used), matrix(used, n, d, dt, a)),
               call<Family::Matmul>(OpCode::matmul, d, rows_of(std::move(im), used), matrix(used, n, d, dt, b)));
  return back_to(std::move(y), s, n, dim);
}

// linear: the leading dims folded into rows, one 2-d matmul, the bias broadcast (burn's
// default with the fold policy; the weight is [d_in, d_out]).
Prim d_linear(Prim x, Prim w, Prim bias) {
  const DeviceId d = x->device();
  const Shape xs = x->shape();
  const std::size_t d_in = w->shape()[0], d_out = w->shape()[1];
  std::size_t rows = 1;
  for (std::size_t i = 0; i + 1 < xs.rank(); ++i) rows *= xs[i];
  Prim y = call<Family::Matmul>(OpCode::matmul, d, reshape_to(std::move(x), Shape{rows, d_in}), std::move(w));
  if (bias) y = bin(OpCode::add, std::move(y), reshape_to(std::move(bias), Shape{1, d_out}));
  Shape out = xs;
  out[out.rank() - 1] = d_out;
  return reshape_to(std::move(y), out);
}

// batch_norm (inference): each [C] statistic reshaped to [1, C, 1, ...];
// (x - mean) / sqrt(var + eps) * gamma + beta.
Prim d_batch_norm(Prim x, Prim gamma, Prim beta, Prim mean, Prim var, double eps) {
  const Shape s = x->shape();
  Shape ps{std::vector<std::size_t>(s.rank(), 1)};
  ps[1] = s[1];
  Prim xc = bin(OpCode::sub, std::move(x), reshape_to(std::move(mean), ps));
  Prim rstd = un(OpCode::recip, un(OpCode::sqrt, sc(OpCode::add_scalar, reshape_to(std::move(var), ps), Scalar(eps))));
  Prim y = bin(OpCode::mul, bin(OpCode::mul, std::move(xc), std::move(rstd)), reshape_to(std::move(gamma), ps));
  return bin(OpCode::add, std::move(y), reshape_to(std::move(beta), ps));
}

// The one-hot weight [C*kh*kw, C, kh, kw] of unfold4d/fold4d: w[c*kh*kw + i*kw + j, c, i, j] = 1.
Prim onehot_weight(std::size_t c, std::size_t kh, std::size_t kw, DType dt, DeviceId d) {
  const std::size_t taps = kh * kw;
  std::vector<float> v(c * taps * c * taps, 0.0f);
  for (std::size_t ch = 0; ch < c; ++ch)
    for (std::size_t t = 0; t < taps; ++t) v[((ch * taps + t) * c + ch) * taps + t] = 1.0f;
  Prim w = upload(TensorData::from(v, Shape{c * taps, c, kh, kw}), d);
  if (w->dtype() != dt) w = call<Family::Cast>(OpCode::cast, d, std::move(w), dt);
  return w;
}
ConvArgs fold_conv_args(const FoldArgs& a) {
  ConvArgs c;
  c.rank = 2;
  c.stride = {a.options.stride[0], a.options.stride[1], 1};
  c.padding = {a.options.padding[0], a.options.padding[1], 0};
  c.dilation = {a.options.dilation[0], a.options.dilation[1], 1};
  return c;
}
// unfold4d: conv2d with the one-hot weight, [N, C*kh*kw, Ho, Wo] reshaped to [N, C*kh*kw, L].
Prim d_unfold4d(Prim x, const FoldArgs& a) {
  const DeviceId d = x->device();
  const Shape xs = x->shape();
  const auto kh = static_cast<std::size_t>(a.kernel[0]), kw = static_cast<std::size_t>(a.kernel[1]);
  Prim w = onehot_weight(xs[1], kh, kw, x->dtype(), d);
  Prim y = call<Family::Conv>(OpCode::conv2d, d, std::move(x), std::move(w), Prim(), fold_conv_args(a));
  const Shape ys = y->shape();
  return reshape_to(std::move(y), Shape{ys[0], ys[1], ys[2] * ys[3]});
}
// fold4d: conv_transpose2d of the blocks [N, C*kh*kw, Hb, Wb] with the one-hot weight;
// padding_out = (H + 2p - d(k-1) - 1) mod s reaches the requested size.
Prim d_fold4d(Prim x, const FoldArgs& a) {
  const DeviceId d = x->device();
  const Shape xs = x->shape();
  const auto kh = static_cast<std::size_t>(a.kernel[0]), kw = static_cast<std::size_t>(a.kernel[1]);
  const std::size_t c = xs[1] / (kh * kw);
  ConvArgs ca = fold_conv_args(a);
  std::array<std::size_t, 2> blocks{};
  for (std::size_t i = 0; i < 2; ++i) {
    const std::int64_t span = a.output_size[i] + 2 * a.options.padding[i] - a.options.dilation[i] * (a.kernel[i] - 1) - 1;
    blocks[i] = static_cast<std::size_t>(span / a.options.stride[i] + 1);
    ca.padding_out[i] = span % a.options.stride[i];
  }
  Prim w = onehot_weight(c, kh, kw, x->dtype(), d);
  Prim b = reshape_to(std::move(x), Shape{xs[0], xs[1], blocks[0], blocks[1]});
  return call<Family::Conv>(OpCode::conv_transpose2d, d, std::move(b), std::move(w), Prim(), ca);
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

// ---- transactions and devices -----------------------------------------------------------

std::future<std::vector<TensorData>> d_tr_execute(std::vector<Prim> prims) {
  std::vector<std::future<TensorData>> pending;
  for (Prim& p : prims) {
    const DeviceId d = p->device();
    pending.push_back(call<Family::IntoData>(OpCode::into_data, d, std::move(p)));
  }
  return std::async(std::launch::deferred, [pending = std::move(pending)]() mutable {
    std::vector<TensorData> out;
    for (auto& f : pending) out.push_back(f.get());
    return out;
  });
}

void d_noop(DeviceId) {}
void d_graph_unsupported(DeviceId d) {
  throw ExecutionError(fmt::format("[graph] graph capture is not supported by this backend; got device {}", device_string(d)));
}
bool d_supports(DeviceId d, DType t) {
  return backend_of(d).get<DeviceOp::dtype_usage>()(d, t).contains_all(DTypeUsageSet::general());
}
bool d_false(DeviceId) { return false; }
MemoryStats d_memory(DeviceId) { return {}; }
// burn's defaults for GPU-style devices: F32, I32, bools stored as U8.
DeviceSettings d_default_settings(DeviceId) { return {FloatDType::F32, IntDType::I32, BoolDType::U8}; }

template <OpCode op>
void fill(Backend& b, FamilyFn<op_family(op)> fn) {
  if (!b.has(op)) b.set<op>(fn);
}
template <DeviceOp op>
void fill(Backend& b, FamilyFn<device_op_info(op).family> fn) {
  if (!b.has(op)) b.set<op>(fn);
}

// Each defaulted row `name` of the op table is filled with `d_name` (an alias below
// where one composition serves several rows), so the registration is the table itself.
constexpr auto d_detach = d_identity;
constexpr auto d_max_dim_with_indices = d_max_dim_wi;
constexpr auto d_min_dim_with_indices = d_min_dim_wi;
constexpr auto d_sort_with_indices = d_sort_wi;
constexpr auto d_topk_with_indices = d_topk_wi;
constexpr auto d_grid_sample_2d = d_grid_sample;
constexpr auto d_conv3d = d_conv_host<OpCode::conv3d>;
constexpr auto d_conv_transpose1d = d_conv_host<OpCode::conv_transpose1d>;
constexpr auto d_conv_transpose2d = d_conv_host<OpCode::conv_transpose2d>;
constexpr auto d_conv_transpose3d = d_conv_host<OpCode::conv_transpose3d>;
constexpr auto d_conv_transpose_x_backward = d_conv_backward_host<OpCode::conv_transpose_x_backward>;
constexpr auto d_conv_transpose_weight_backward = d_conv_backward_host<OpCode::conv_transpose_weight_backward>;
constexpr auto d_max_pool1d_with_indices = d_max_pool_wi_host<OpCode::max_pool1d_with_indices>;
constexpr auto d_max_pool2d_with_indices = d_max_pool_wi_host<OpCode::max_pool2d_with_indices>;
constexpr auto d_sync = d_noop;
constexpr auto d_supports_dtype = d_supports;
constexpr auto d_ad_enabled = d_false;
constexpr auto d_memory_stats = d_memory;
constexpr auto d_memory_cleanup = d_noop;
constexpr auto d_graph_prepare = d_noop;
constexpr auto d_graph_start_capture = d_graph_unsupported;
constexpr auto d_graph_stop_capture = d_graph_unsupported;
constexpr auto d_graph_replay = d_graph_unsupported;

}  // namespace

void install_defaults(Backend& b) {
#define TENSOR_FILL_Req(kind, name)
#define TENSOR_FILL_Def(kind, name) fill<kind::name>(b, d_##name);
#define TENSOR_OP(name, family, kinds, policy, meaning, ...) TENSOR_FILL_##policy(OpCode, name)
#define TENSOR_DEVICE_OP(name, family, policy, meaning) TENSOR_FILL_##policy(DeviceOp, name)
#include "dispatch/op_table.def"
#undef TENSOR_DEVICE_OP
#undef TENSOR_OP
#undef TENSOR_FILL_Def
#undef TENSOR_FILL_Req

  // Every defaulted row of the op table must have a default here.
  for (std::size_t i = 0; i < kOps.size(); ++i)
    if (kOps[i].policy == Policy::Def && !b.has(static_cast<OpCode>(i)))
      throw Error(fmt::format("[install_defaults] op '{}' is marked defaulted but has no default", kOps[i].name));
}

}  // namespace tensor::dispatch
