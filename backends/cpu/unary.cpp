// Unary elementwise ops on the CPU (float math, abs, neg, sign, bitwise not, clamp,
// is_nan / is_inf) and powf_scalar_impl, one functor each on the elementwise engine;
// halves compute through float.
#include <cmath>

#include "backends/cpu/cpu_ops.hpp"
#include "backends/cpu/elementwise.hpp"
#include "backends/cpu/graph_raw.hpp"

namespace tensor::cpu {
namespace {

using dispatch::Prim;

template <class C> inline constexpr bool kIsInt = std::is_integral_v<C> && !std::is_same_v<C, bool>;

enum Kinds { kFloat = 1, kInt = 2 };

#define TENSOR_FLOAT_UNARY(X)                        \
  X(Recip, recip, C(1) / a)                          \
  X(Sqrt, sqrt, std::sqrt(a))                        \
  X(Exp, exp, std::exp(a))                           \
  X(Log, log, std::log(a))                           \
  X(Log1p, log1p, std::log1p(a))                     \
  X(Cos, cos, std::cos(a))                           \
  X(Sin, sin, std::sin(a))                           \
  X(Tan, tan, std::tan(a))                           \
  X(Cosh, cosh, std::cosh(a))                        \
  X(Sinh, sinh, std::sinh(a))                        \
  X(Tanh, tanh, std::tanh(a))                        \
  X(Acos, acos, std::acos(a))                        \
  X(Acosh, acosh, std::acosh(a))                     \
  X(Asin, asin, std::asin(a))                        \
  X(Asinh, asinh, std::asinh(a))                     \
  X(Atan, atan, std::atan(a))                        \
  X(Atanh, atanh, std::atanh(a))                     \
  X(Round, round, std::nearbyint(a)) /* ties to even */ \
  X(Floor, floor, std::floor(a))                     \
  X(Ceil, ceil, std::ceil(a))                        \
  X(Trunc, trunc, std::trunc(a))                     \
  X(Erf, erf, std::erf(a))

#define TENSOR_X(Name, op, expr) \
  struct Name##Op {              \
    static constexpr int kKinds = kFloat; \
    template <class C> static C f(C a) { return expr; } \
  };
TENSOR_FLOAT_UNARY(TENSOR_X)
#undef TENSOR_X

// |a|; ints wrap at the minimum (abs(INT_MIN) = INT_MIN).
struct AbsOp {
  static constexpr int kKinds = kFloat | kInt;
  template <class C> static C f(C a) {
    if constexpr (kIsInt<C>) {
      if constexpr (std::is_signed_v<C>) {
        using U = wide_unsigned_t<C>;
        return a < 0 ? static_cast<C>(U{0} - static_cast<U>(a)) : a;
      } else {
        return a;
      }
    } else {
      return std::fabs(a);
    }
  }
};
struct BitNotOp {
  static constexpr int kKinds = kInt;
  template <class C> static C f(C a) {
    if constexpr (kIsInt<C>) return static_cast<C>(~static_cast<wide_unsigned_t<C>>(a));
    else return a;
  }
};

// -a; ints wrap (neg(INT_MIN) = INT_MIN, unsigned: 2^n - a).
struct NegOp {
  static constexpr int kKinds = kFloat | kInt;
  template <class C> static C f(C a) {
    if constexpr (kIsInt<C>) return static_cast<C>(wide_unsigned_t<C>{0} - static_cast<wide_unsigned_t<C>>(a));
    else return -a;
  }
};
// -1, 0 or 1; sign(-0.0) = +0.0 and sign(NaN) = 0, as the default composition gives.
struct SignOp {
  static constexpr int kKinds = kFloat | kInt;
  static constexpr bool kVecLoop = true;
  template <class C> static C f(C a) {
    // Branch-free: (a > 0) - (a < 0); NaN compares false both ways.
    if constexpr (std::is_unsigned_v<C>) return static_cast<C>(a > 0);
    else return static_cast<C>(static_cast<int>(a > C(0)) - static_cast<int>(a < C(0)));
  }
};

// The Highway kernel behind an op (unary_hwy.hpp), -1 for none.
template <class Op> inline constexpr int kSimdUn = -1;
#define TENSOR_X(Name, K) template <> inline constexpr int kSimdUn<Name##Op> = static_cast<int>(simd::UnOp::K);
TENSOR_X(Exp, Exp) TENSOR_X(Log, Log) TENSOR_X(Log1p, Log1p) TENSOR_X(Sin, Sin) TENSOR_X(Cos, Cos)
TENSOR_X(Tanh, Tanh) TENSOR_X(Sqrt, Sqrt) TENSOR_X(Erf, Erf) TENSOR_X(Recip, Recip) TENSOR_X(Floor, Floor)
TENSOR_X(Ceil, Ceil) TENSOR_X(Trunc, Trunc) TENSOR_X(Round, Round) TENSOR_X(Abs, Abs) TENSOR_X(Neg, Neg)
#undef TENSOR_X

template <class T, class Op>
struct UnFn {
  T operator()(T a) const { return st<T>(Op::f(ld(a))); }
  // Contiguous float rows (halves through f32 blocks).
  void vv(T* o, const T* x, std::size_t n) const requires(kSimdUn<Op> >= 0 && dispatch::kIsFloatLike<T>) {
    unary_simd(static_cast<simd::UnOp>(kSimdUn<Op>), o, x, n);
  }
  // Branch-free ops without a Highway kernel (sign), on plain numbers: vectorized runs.
  static constexpr bool kVec = kSimdUn<Op> < 0 && std::is_arithmetic_v<T> && requires { Op::kVecLoop; };
};

template <class Op>
Prim unary_entry(Prim pa) {
  const DType dt = pa->dtype();
  return map_same_dtype(std::move(pa), [&](auto tag, auto apply) {
    using T = decltype(tag);
    constexpr bool kOk = ((Op::kKinds & kFloat) && dispatch::kIsFloatLike<T>) || ((Op::kKinds & kInt) && kIsInt<T>);
    if constexpr (kOk) {
      apply(UnFn<T, Op>{});
    } else {
      throw_unsupported_dtype("a unary op", dt);
    }
  });
}

// Graph replay's raw kernel: unary_entry's functor on a dense run.
template <class T, class Op>
void raw_unary(void* o, const void* a, const void*, std::size_t n, const dispatch::RawScalar&) {
  UnFn<T, Op> fn;
  T* out = static_cast<T*>(o);
  const T* x = static_cast<const T*>(a);
  if constexpr (requires { fn.vv(out, x, n); }) fn.vv(out, x, n);
  else run_loop(n, fn, [&](const UnFn<T, Op>& g, std::size_t i) { out[i] = g(x[i]); });
}
template <class Op, class T>
dispatch::RawKernel raw_unary_dtype() {
  constexpr bool kOk = ((Op::kKinds & kFloat) && dispatch::kIsFloatLike<T>) || ((Op::kKinds & kInt) && kIsInt<T>);
  if constexpr (kOk) return &raw_unary<T, Op>;
  else return nullptr;
}
template <class Op>
dispatch::RawKernel raw_unary_for(dispatch::RawFn entry, DType dt) {
  if (entry != reinterpret_cast<dispatch::RawFn>(&unary_entry<Op>)) return nullptr;  // NOLINT: compared only
  switch (dt) {
    case DType::F32: return raw_unary_dtype<Op, float>();
    case DType::F64: return raw_unary_dtype<Op, double>();
    case DType::I32: return raw_unary_dtype<Op, std::int32_t>();
    case DType::I64: return raw_unary_dtype<Op, std::int64_t>();
    default: return nullptr;
  }
}

template <class T>
struct PowScalarFn {
  calc_t<T> e;
  T operator()(T a) const { return st<T>(std::pow(ld(a), e)); }
  // x ^ 3 and x ^ 4 of f32/f64 as products, vectorized (std::pow per element is slow):
  // at most one more rounding than pow, and the same signed zeros,
  // infinities and NaNs. (dispatch already turns 0, 1, 2, -1 and -2 into ones, copies,
  // squares and reciprocals.)
  void vv(T* o, const T* a, std::size_t n) const requires(std::is_floating_point_v<T>) {
    if (e == T(3)) {
      simd_loop(n, [&](std::size_t i) { const T x = a[i]; o[i] = x * x * x; });
    } else if (e == T(4)) {
      simd_loop(n, [&](std::size_t i) { const T x2 = a[i] * a[i]; o[i] = x2 * x2; });
    } else {
      for (std::size_t i = 0; i < n; ++i) o[i] = std::pow(a[i], e);
    }
  }
};

// a ^ s for float tensors (the general case; dispatch routes integral s to powi).
Prim powf_scalar_entry(Prim pa, Scalar s) {
  const DType dt = pa->dtype();
  return map_same_dtype(std::move(pa), [&](auto tag, auto apply) {
    using T = decltype(tag);
    if constexpr (dispatch::kIsFloatLike<T>) {
      apply(PowScalarFn<T>{static_cast<calc_t<T>>(s.to_double())});
    } else {
      throw DTypeError("[powf_scalar] expected a float dtype; got " + std::string(dtype_name(dt)));
    }
  });
}

// ---- clamp family: bounds converted to the tensor's dtype; NaN stays NaN -----------
enum class ClampKind { Min, Max, Both };

template <class T, ClampKind kK>
struct ClampFn {
  calc_t<T> lo, hi;
  // lo > v ? lo : v and hi < v ? hi : v: max/min instructions (a NaN v stays), no branches.
  T operator()(T a) const {
    calc_t<T> v = ld(a);
    if constexpr (kK != ClampKind::Max) v = lo > v ? lo : v;
    if constexpr (kK != ClampKind::Min) v = hi < v ? hi : v;
    return st<T>(v);
  }
  static constexpr bool kVec = std::is_arithmetic_v<T>;  // max/min selects: vectorized runs
};

template <ClampKind kK>
Prim clamp_impl(Prim pa, Scalar lo, Scalar hi) {
  const DType dt = pa->dtype();
  return map_same_dtype(std::move(pa), [&](auto tag, auto apply) {
    using T = decltype(tag);
    if constexpr (dispatch::kIsFloatLike<T> || kIsInt<T>) {
      apply(ClampFn<T, kK>{ld(scalar_as<T>(lo)), ld(scalar_as<T>(hi))});
    } else {
      throw DTypeError("[clamp] expected a float or int dtype; got " + std::string(dtype_name(dt)));
    }
  });
}
Prim clamp_min_entry(Prim a, Scalar lo) { return clamp_impl<ClampKind::Min>(std::move(a), lo, lo); }
Prim clamp_max_entry(Prim a, Scalar hi) { return clamp_impl<ClampKind::Max>(std::move(a), hi, hi); }
Prim clamp_entry(Prim a, Scalar lo, Scalar hi) { return clamp_impl<ClampKind::Both>(std::move(a), lo, hi); }

// ---- is_nan / is_inf: a bool per element, computed on the loaded value (no abs or
// arithmetic that could overflow a narrow dtype) ----------------------------------
struct IsNanOp { template <class C> static bool f(C a) { return std::isnan(a); } };
struct IsInfOp { template <class C> static bool f(C a) { return std::isinf(a); } };

template <class TO, class T, class Op>
struct PredFn {
  TO operator()(T a) const { return static_cast<TO>(Op::f(ld(a)) ? 1 : 0); }
};

template <class Op>
Prim predicate_entry(Prim pa, DType out_dtype) {
  const CpuRef a = as_cpu(std::move(pa));
  const Shape& shape = a->shape();
  CpuRef out = alloc_tensor(out_dtype, shape);
  const auto plan = make_plan<2>(shape, {out->layout().strides.data(), a->layout().strides.data()},
                                 {out->elem_size(), a->elem_size()});
  dispatch::visit_dtype(a->dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (dispatch::kIsFloatLike<T>) {
      auto run = [&](auto otag) {
        using TO = decltype(otag);
        PredFn<TO, T, Op> fn;
        map1<TO, T>(plan, out->data(), a->data(), fn);
      };
      if (out->elem_size() == 4) run(std::uint32_t{});
      else run(std::uint8_t{});
    } else {
      throw DTypeError("[is_nan] expected a float dtype; got " + std::string(dtype_name(a->dtype())));
    }
  });
  return out;
}

}  // namespace

dispatch::RawKernel raw_unary_kernel(OpCode op, dispatch::RawFn entry, DType dt) {
  switch (op) {
#define TENSOR_X(Name, op, expr) \
  case OpCode::op: return raw_unary_for<Name##Op>(entry, dt);
    TENSOR_FLOAT_UNARY(TENSOR_X)
#undef TENSOR_X
    case OpCode::abs: return raw_unary_for<AbsOp>(entry, dt);
    case OpCode::neg: return raw_unary_for<NegOp>(entry, dt);
    case OpCode::sign: return raw_unary_for<SignOp>(entry, dt);
    case OpCode::bitwise_not: return raw_unary_for<BitNotOp>(entry, dt);
    default: return nullptr;
  }
}

void register_unary_ops(dispatch::Backend& b) {
#define TENSOR_X(Name, op, expr) b.set<OpCode::op>(&unary_entry<Name##Op>);
  TENSOR_FLOAT_UNARY(TENSOR_X)
#undef TENSOR_X
  b.set<OpCode::abs>(&unary_entry<AbsOp>);
  b.set<OpCode::bitwise_not>(&unary_entry<BitNotOp>);
  b.set<OpCode::powf_scalar_impl>(&powf_scalar_entry);
  b.set<OpCode::neg>(&unary_entry<NegOp>);
  b.set<OpCode::sign>(&unary_entry<SignOp>);
  b.set<OpCode::clamp_min>(&clamp_min_entry);
  b.set<OpCode::clamp_max>(&clamp_max_entry);
  b.set<OpCode::clamp>(&clamp_entry);
  b.set<OpCode::is_nan>(&predicate_entry<IsNanOp>);
  b.set<OpCode::is_inf>(&predicate_entry<IsInfOp>);
}

}  // namespace tensor::cpu
