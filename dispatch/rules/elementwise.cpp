// Forwarders: elementwise arithmetic, comparison and matmul. Each validates its arguments, states the output metadata and runs
// the backend entry through the one invocation path (dispatch/forward.hpp).
#include "dispatch/forward.hpp"
#include "dispatch/quant.hpp"

namespace tensor::dispatch {
using namespace fwd;

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

using T = DispatchTensor;

// Unary: the input's metadata (transpose: the last two dims swapped; of rank < 2 it is the
// input itself).
template <> struct fwd::Rule<Family::Unary> : RuleBase {
  struct Plan {};
  static Plan check(OpCode op, const T& a) { check_first(op, a); return {}; }
  static DeviceId device(const Plan&, const T& a) { return a.device; }
  static OutMeta meta(OpCode op, const Plan&, const T& a) {
    return {op_info(op).swaps_last_two ? transposed_shape(a.shape()) : a.shape(), a.dtype(), a.kind};
  }
  template <class Entry>
  [[gnu::always_inline]] static T run(OpCode op, Entry entry, const Plan&, T& a) {
    if (op_info(op).swaps_last_two && a.shape().rank() < 2) return std::move(a);  // nothing to swap
    const Kind k = a.kind;
    return {entry(op)(a.take()), k};
  }
};

// Binary: same kind, device and dtype; the broadcast shape.
template <> struct fwd::Rule<Family::Binary> : RuleBase {
  struct Plan { Shape out; };
  static Plan check(OpCode op, const T& a, const T& b) {
    check_first(op, a);
    check_pair(op, a, b);
    return {broadcast_shapes(op, a.shape(), b.shape())};
  }
  static DeviceId device(const Plan&, const T& a, const T&) { return a.device; }
  static OutMeta meta(OpCode, const Plan& p, const T& a, const T&) { return {p.out, a.dtype(), a.kind}; }
  template <class Entry>
  [[gnu::always_inline]] static T run(OpCode op, Entry entry, const Plan&, T& a, T& b) {
    const Kind k = a.kind;
    return {entry(op)(a.take(), b.take()), k};
  }
};

// Scalar: the input's metadata; a bound (clamp_min / clamp_max) outside an int dtype's range
// is clamped to it, so it compares as a number instead of wrapping.
template <> struct fwd::Rule<Family::Scalar> : RuleBase {
  struct Plan { Scalar s; };
  static Plan check(OpCode op, const T& a, const Scalar& s) {
    check_first(op, a);
    return {op_info(op).bounds ? fit_to_int_dtype(s, a.dtype()).value : s};
  }
  static DeviceId device(const Plan&, const T& a, const Scalar&) { return a.device; }
  static OutMeta meta(OpCode, const Plan&, const T& a, const Scalar&) { return {a.shape(), a.dtype(), a.kind}; }
  static OpAttrs attrs(OpCode, const Plan&, const T&, const Scalar& user) { return with_scalars(user); }
  template <class Entry>
  [[gnu::always_inline]] static T run(OpCode op, Entry entry, const Plan& p, T& a, const Scalar&) {
    const Kind k = a.kind;
    return {entry(op)(a.take(), p.s), k};
  }
};

// Clamp: two scalars fitted to an int dtype's range like Scalar's bounds; bounds (clamp, not
// hard_sigmoid's alpha and beta) in order.
template <> struct fwd::Rule<Family::Clamp> : RuleBase {
  struct Plan { Scalar lo, hi; };
  static Plan check(OpCode op, const T& a, const Scalar& lo, const Scalar& hi) {
    check_first(op, a);
    if (op_info(op).bounds && lo.to_double() > hi.to_double())
      throw IndexError(fmt::format("[{}] bounds reversed; expected min <= max; got {} and {}", op_name(op), lo.to_double(),
                                   hi.to_double()));
    return {fit_to_int_dtype(lo, a.dtype()).value, fit_to_int_dtype(hi, a.dtype()).value};
  }
  static DeviceId device(const Plan&, const T& a, const Scalar&, const Scalar&) { return a.device; }
  static OutMeta meta(OpCode, const Plan&, const T& a, const Scalar&, const Scalar&) { return {a.shape(), a.dtype(), a.kind}; }
  static OpAttrs attrs(OpCode, const Plan&, const T&, const Scalar& lo, const Scalar& hi) { return with_scalars(lo, hi); }
  template <class Entry>
  [[gnu::always_inline]] static T run(OpCode op, Entry entry, const Plan& p, T& a, const Scalar&, const Scalar&) {
    const Kind k = a.kind;
    return {entry(op)(a.take(), p.lo, p.hi), k};
  }
};

// Compare: like Binary, with a Bool result in the device's bool dtype.
template <> struct fwd::Rule<Family::Compare> : RuleBase {
  struct Plan { Shape out; DType bt; };
  static Plan check(OpCode op, const T& a, const T& b) {
    check_first(op, a);
    check_pair(op, a, b);
    return {broadcast_shapes(op, a.shape(), b.shape()), bool_out(a.device)};
  }
  static DeviceId device(const Plan&, const T& a, const T&) { return a.device; }
  static OutMeta meta(OpCode, const Plan& p, const T&, const T&) { return {p.out, p.bt, Kind::Bool}; }
  template <class Entry>
  [[gnu::always_inline]] static T run(OpCode op, Entry entry, const Plan& p, T& a, T& b) {
    return {entry(op)(a.take(), b.take(), p.bt), Kind::Bool};
  }
};

// CompareScalar: an integer comparand outside the dtype's range gives the same answer as an
// in-range comparison (below the range: x < s and x == s are false, x > s true), so the
// backend runs that one: x >= min and x <= max always hold; x < min and x > max never do.
template <> struct fwd::Rule<Family::CompareScalar> : RuleBase {
  struct Plan { OpCode run_as; Scalar s; DType bt; };
  static Plan check(OpCode op, const T& a, const Scalar& s) {
    check_first(op, a);
    const DType bt = bool_out(a.device);
    const FittedScalar f = fit_to_int_dtype(s, a.dtype());
    if (f.side == 0) return {op, s, bt};
    const Relation r = op_info(op).relation;
    const bool below = f.side < 0;
    const bool holds = r == Relation::Ne || (below ? r == Relation::Gt || r == Relation::Ge : r == Relation::Lt || r == Relation::Le);
    const OpCode as = below ? (holds ? OpCode::greater_equal_elem : OpCode::lower_elem)
                            : (holds ? OpCode::lower_equal_elem : OpCode::greater_elem);
    return {as, f.value, bt};
  }
  static DeviceId device(const Plan&, const T& a, const Scalar&) { return a.device; }
  static OutMeta meta(OpCode, const Plan& p, const T& a, const Scalar&) { return {a.shape(), p.bt, Kind::Bool}; }
  static OpAttrs attrs(OpCode, const Plan&, const T&, const Scalar& user) { return with_scalars(user); }
  template <class Entry>
  [[gnu::always_inline]] static T run(OpCode, Entry entry, const Plan& p, T& a, const Scalar&) {
    return {entry(p.run_as)(a.take(), p.s, p.bt), Kind::Bool};
  }
};

DispatchTensor unary(OpCode op, DispatchTensor a) { return forward<Family::Unary>(op, a); }
DispatchTensor binary(OpCode op, DispatchTensor a, DispatchTensor b) { return forward<Family::Binary>(op, a, b); }
DispatchTensor scalar(OpCode op, DispatchTensor a, Scalar s) { return forward<Family::Scalar>(op, a, s); }
DispatchTensor clamp(OpCode op, DispatchTensor a, Scalar lo, Scalar hi) { return forward<Family::Clamp>(op, a, lo, hi); }
DispatchTensor compare(OpCode op, DispatchTensor a, DispatchTensor b) { return forward<Family::Compare>(op, a, b); }
DispatchTensor compare_scalar(OpCode op, DispatchTensor a, Scalar s) { return forward<Family::CompareScalar>(op, a, s); }

// Predicate (is_nan, is_inf, ...): a Bool tensor of the input's shape.
template <> struct fwd::Rule<Family::Predicate> : RuleBase {
  struct Plan { DType bt; };
  static Plan check(OpCode op, const T& a) { check_first(op, a); return {bool_out(a.device)}; }
  static DeviceId device(const Plan&, const T& a) { return a.device; }
  static OutMeta meta(OpCode, const Plan& p, const T& a) { return {a.shape(), p.bt, Kind::Bool}; }
  template <class Entry>
  [[gnu::always_inline]] static T run(OpCode op, Entry entry, const Plan& p, T& a) { return {entry(op)(a.take(), p.bt), Kind::Bool}; }
};

// Tracking flags (native on autodiff devices; identity and false elsewhere).
template <> struct fwd::Rule<Family::SetFlag> : RuleBase {
  struct Plan {};
  static Plan check(OpCode op, const T& a, const bool&) { check_kind(op, a); return {}; }
  static DeviceId device(const Plan&, const T& a, const bool&) { return a.device; }
  static OutMeta meta(OpCode, const Plan&, const T& a, const bool&) { return {a.shape(), a.dtype(), a.kind}; }
  static OpAttrs attrs(OpCode, const Plan&, const T&, const bool& on) { return with_ints(on ? 1 : 0); }
  template <class Entry>
  [[gnu::always_inline]] static T run(OpCode op, Entry entry, const Plan&, T& a, const bool& on) { return {entry(op)(a.take(), on), Kind::Float}; }
};
template <> struct fwd::Rule<Family::Query> : RuleBase {
  struct Plan {};
  static Plan check(OpCode op, const T& a) { check_kind(op, a); return {}; }
  static DeviceId device(const Plan&, const T& a) { return a.device; }
  static OutMeta meta(OpCode, const Plan&, const T& a) { return {a.shape(), a.dtype(), a.kind, false}; }
  template <class Entry>
  [[gnu::always_inline]] static bool run(OpCode op, Entry entry, const Plan&, const T& a) {
    a.prim->add_ref();  // the entry reads a reference of its own; `a` stays the caller's
    return entry(op)(Prim::adopt(a.prim));
  }
};

// Matmul: batched [.., m, k] x [.., k, n], batch dims broadcast.
template <> struct fwd::Rule<Family::Matmul> : RuleBase {
  struct Plan { Shape out; };
  static Plan check(OpCode op, const T& a, const T& b) {
    check_first(op, a);
    check_pair(op, a, b);
    Shape out = matmul_shape(op, a.shape(), b.shape());
    check_alloc_shape(op, out, a.dtype());
    return {std::move(out)};
  }
  static DeviceId device(const Plan&, const T& a, const T&) { return a.device; }
  static OutMeta meta(OpCode, const Plan& p, const T& a, const T&) { return {p.out, a.dtype(), a.kind}; }
  template <class Entry>
  [[gnu::always_inline]] static T run(OpCode op, Entry entry, const Plan&, T& a, T& b) {
    const Kind k = a.kind;
    return {entry(op)(a.take(), b.take()), k};
  }
};

// Cross: size 3 along the (resolved) dim of the broadcast shape.
template <> struct fwd::Rule<Family::Cross> : RuleBase {
  struct Plan { Shape out; std::size_t d; };
  static Plan check(OpCode op, const T& a, const T& b, const std::int64_t& dim) {
    check_first(op, a);
    check_pair(op, a, b);
    Shape out = broadcast_shapes(op, a.shape(), b.shape());
    const std::size_t d = resolve_dim(op, dim, out.rank());
    if (a.shape()[d] != 3 || b.shape()[d] != 3)
      throw ShapeError(fmt::format("[{}] expected size 3 in dim {}; got {} and {}", op_name(op), d, a.shape().to_string(),
                                   b.shape().to_string()));
    return {std::move(out), d};
  }
  static DeviceId device(const Plan&, const T& a, const T&, const std::int64_t&) { return a.device; }
  static OutMeta meta(OpCode, const Plan& p, const T& a, const T&, const std::int64_t&) {
    return {p.out, a.dtype(), Kind::Float};
  }
  static OpAttrs attrs(OpCode, const Plan& p, const T&, const T&, const std::int64_t&) { return with_ints(i64(p.d)); }
  template <class Entry>
  [[gnu::always_inline]] static T run(OpCode op, Entry entry, const Plan& p, T& a, T& b, const std::int64_t&) {
    return {entry(op)(a.take(), b.take(), p.d), Kind::Float};
  }
};

// PowI: a float or int base and an Int exponent tensor, broadcast.
template <> struct fwd::Rule<Family::PowI> : RuleBase {
  struct Plan { Shape out; };
  static Plan check(OpCode op, const T& a, const T& b) {
    check_first(op, a);
    check_indices(op, a, b);  // the exponent is an Int tensor
    return {broadcast_shapes(op, a.shape(), b.shape())};
  }
  static DeviceId device(const Plan&, const T& a, const T&) { return a.device; }
  static OutMeta meta(OpCode, const Plan& p, const T& a, const T&) { return {p.out, a.dtype(), a.kind}; }
  template <class Entry>
  [[gnu::always_inline]] static T run(OpCode op, Entry entry, const Plan&, T& a, T& b) {
    const Kind k = a.kind;
    return {entry(op)(a.take(), b.take()), k};
  }
};

DispatchTensor predicate(OpCode op, DispatchTensor a) { return forward<Family::Predicate>(op, a); }
DispatchTensor set_require_grad(DispatchTensor a, bool on) { return forward<Family::SetFlag>(OpCode::set_require_grad, a, on); }
bool is_require_grad(const DispatchTensor& a) { return forward<Family::Query>(OpCode::is_require_grad, a); }
DispatchTensor matmul(DispatchTensor a, DispatchTensor b) {
  if (quant::is_quantized(a) || quant::is_quantized(b)) [[unlikely]]
    return quant::matmul_quantized(std::move(a), std::move(b));
  return forward<Family::Matmul>(OpCode::matmul, a, b);
}
DispatchTensor cross(DispatchTensor a, DispatchTensor b, std::int64_t dim) {
  return forward<Family::Cross>(OpCode::cross, a, b, dim);
}
DispatchTensor powi(DispatchTensor a, DispatchTensor b) { return forward<Family::PowI>(OpCode::powi, a, b); }

}  // namespace tensor::dispatch
