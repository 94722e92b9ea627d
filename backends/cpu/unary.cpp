// Unary elementwise ops on the CPU (float math, abs, bitwise not) and powf_scalar_impl,
// one functor each on the elementwise engine; halves compute through float.
#include <cmath>

#include "backends/cpu/cpu_ops.hpp"
#include "backends/cpu/elementwise.hpp"

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

template <class T, class Op>
struct UnFn {
  T operator()(T a) const { return st<T>(Op::f(ld(a))); }
};

template <class Op>
Prim unary_entry(Prim pa) {
  CpuRef a = as_cpu(std::move(pa));
  const Shape shape = a->shape();
  const DType dt = a->dtype();
  CpuRef out = reusable(*a, shape, a->elem_size()) ? a : alloc_tensor(dt, shape);
  const auto plan = make_plan<2>(shape, {out->layout().strides.data(), a->layout().strides.data()},
                                 {out->elem_size(), a->elem_size()});
  dispatch::visit_dtype(dt, [&](auto tag) {
    using T = decltype(tag);
    constexpr bool kOk = ((Op::kKinds & kFloat) && dispatch::kIsFloatLike<T>) || ((Op::kKinds & kInt) && kIsInt<T>);
    if constexpr (kOk) {
      UnFn<T, Op> fn;
      map1<T, T>(plan, out->data(), a->data(), fn);
    } else {
      throw DTypeError("[cpu] unary op on an unsupported dtype: " + std::string(dtype_name(dt)));
    }
  });
  return out;
}

template <class T>
struct PowScalarFn {
  calc_t<T> e;
  T operator()(T a) const { return st<T>(std::pow(ld(a), e)); }
};

// a ^ s for float tensors (the general case; dispatch routes integral s to powi).
Prim powf_scalar_entry(Prim pa, Scalar s) {
  CpuRef a = as_cpu(std::move(pa));
  const Shape shape = a->shape();
  const DType dt = a->dtype();
  CpuRef out = reusable(*a, shape, a->elem_size()) ? a : alloc_tensor(dt, shape);
  const auto plan = make_plan<2>(shape, {out->layout().strides.data(), a->layout().strides.data()},
                                 {out->elem_size(), a->elem_size()});
  dispatch::visit_dtype(dt, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (dispatch::kIsFloatLike<T>) {
      PowScalarFn<T> fn{static_cast<calc_t<T>>(s.to_double())};
      map1<T, T>(plan, out->data(), a->data(), fn);
    } else {
      throw DTypeError("[powf_scalar] expected a float dtype; got " + std::string(dtype_name(dt)));
    }
  });
  return out;
}

}  // namespace

void register_unary_ops(dispatch::Backend& b) {
#define TENSOR_X(Name, op, expr) b.set<OpCode::op>(&unary_entry<Name##Op>);
  TENSOR_FLOAT_UNARY(TENSOR_X)
#undef TENSOR_X
  b.set<OpCode::abs>(&unary_entry<AbsOp>);
  b.set<OpCode::bitwise_not>(&unary_entry<BitNotOp>);
  b.set<OpCode::powf_scalar_impl>(&powf_scalar_entry);
}

}  // namespace tensor::cpu
