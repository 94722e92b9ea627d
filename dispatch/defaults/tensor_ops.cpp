// Defaults: creation, layout, indexing, comparison and arithmetic (see dispatch/defaults/install.cpp for the rules every default keeps).
#include "dispatch/defaults/compose.hpp"

namespace tensor::dispatch::defaults {
namespace {

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

// Add: scatter_add / select_add, on the device. The other rules: the indices are read back
// and the updates applied at their positions by update_at (nd_grid.cpp).
Prim d_scatter(Prim x, std::size_t dim, Prim idx, Prim v, IndexingUpdateOp op) {
  const DeviceId d = x->device();
  if (op != IndexingUpdateOp::Add) {
    const std::vector<std::int64_t> t = update_targets("scatter", x->shape(), v->shape(), dim, std::move(idx), true);
    return update_at(std::move(x), std::move(v), t, op);
  }
  return renamed_errors("scatter_add", "scatter", [&] {
    return call<Family::Scatter>(OpCode::scatter_add, d, std::move(x), dim, std::move(idx), std::move(v));
  });
}
Prim d_select_assign(Prim x, std::size_t dim, Prim idx, Prim v, IndexingUpdateOp op) {
  const DeviceId d = x->device();
  if (op != IndexingUpdateOp::Add) {
    const std::vector<std::int64_t> t = update_targets("select_assign", x->shape(), v->shape(), dim, std::move(idx), false);
    return update_at(std::move(x), std::move(v), t, op);
  }
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

}  // namespace

TENSOR_DEFAULT(OpCode, zeros, d_zeros)
TENSOR_DEFAULT(OpCode, ones, d_ones)
TENSOR_DEFAULT(OpCode, full, d_full)
TENSOR_DEFAULT(OpCode, arange, d_arange)
TENSOR_DEFAULT(OpCode, arange_step, d_arange_step)
TENSOR_DEFAULT(OpCode, detach, d_identity)
TENSOR_DEFAULT(OpCode, set_require_grad, d_set_require_grad)
TENSOR_DEFAULT(OpCode, is_require_grad, d_is_require_grad)
TENSOR_DEFAULT(OpCode, transpose, d_transpose)
TENSOR_DEFAULT(OpCode, repeat_dim, d_repeat_dim)
TENSOR_DEFAULT(OpCode, cat, d_cat)
TENSOR_DEFAULT(OpCode, scatter, d_scatter)
TENSOR_DEFAULT(OpCode, select_assign, d_select_assign)
TENSOR_DEFAULT(OpCode, mask_select, d_mask_select)
TENSOR_DEFAULT(OpCode, argwhere, d_argwhere)
TENSOR_DEFAULT(OpCode, not_equal, d_not_equal)
TENSOR_DEFAULT(OpCode, not_equal_elem, d_not_equal_elem)
TENSOR_DEFAULT(OpCode, is_nan, d_is_nan)
TENSOR_DEFAULT(OpCode, is_inf, d_is_inf)
TENSOR_DEFAULT(OpCode, neg, d_neg)
TENSOR_DEFAULT(OpCode, powi, d_powi)
TENSOR_DEFAULT(OpCode, powi_scalar, d_powi_scalar)
TENSOR_DEFAULT(OpCode, powi_scalar_impl, d_powi_scalar_impl)
TENSOR_DEFAULT(OpCode, powf_scalar, d_powf_scalar)
TENSOR_DEFAULT(OpCode, square, d_square)
TENSOR_DEFAULT(OpCode, hypot, d_hypot)
TENSOR_DEFAULT(OpCode, max_pair, d_max_pair)
TENSOR_DEFAULT(OpCode, min_pair, d_min_pair)
TENSOR_DEFAULT(OpCode, sign, d_sign)
TENSOR_DEFAULT(OpCode, clamp_min, d_clamp_min)
TENSOR_DEFAULT(OpCode, clamp_max, d_clamp_max)
TENSOR_DEFAULT(OpCode, clamp, d_clamp)
TENSOR_DEFAULT(OpCode, bool_xor, d_bool_xor)

}  // namespace tensor::dispatch::defaults
