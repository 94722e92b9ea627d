// The elementwise math and predicate methods of tensor.hpp that burn composes: is_finite,
// contains_nan, is_close, deg2rad / rad2deg.
#include <numbers>
#include <string>

#include "lib/src/composite/compose.hpp"

namespace tensor::detail {

using namespace compose;

Handle is_finite(Handle&& a_) {
  const H x = take_h(a_);
  return named("is_finite", [&] {
    const H bad = bin(OpCode::bool_or, H(predicate(OpCode::is_nan, x.r())), H(predicate(OpCode::is_inf, x.r())));
    return unary(OpCode::bool_not, bad.r());
  });
}

Handle contains_nan(Handle&& a_) {
  const H x = take_h(a_);
  return named("contains_nan", [&] { return any_all(OpCode::any, predicate(OpCode::is_nan, x.r())); });
}

Handle deg2rad(Handle&& a_) {
  const H x = take_h(a_);
  return named("deg2rad", [&] { return scalar(OpCode::mul_scalar, x.r(), Scalar(std::numbers::pi / 180.0)); });
}

Handle rad2deg(Handle&& a_) {
  const H x = take_h(a_);
  return named("rad2deg", [&] { return scalar(OpCode::mul_scalar, x.r(), Scalar(180.0 / std::numbers::pi)); });
}

Handle is_close(Handle&& a_, Handle&& b_, double rtol, double atol) {  // |a - b| <= atol + rtol |b| where both are finite, or equal
  const H a = take_h(a_), b = take_h(b_);
  return named("is_close", [&] {
    // An infinity is close only to itself: the tolerance (itself infinite when b is)
    // must not make inf and -inf close.
    const H diff = un(OpCode::abs, bin(OpCode::sub, a, b));
    const H tol = sc(OpCode::add_scalar, sc(OpCode::mul_scalar, un(OpCode::abs, b), Scalar(rtol)), Scalar(atol));
    const H near = H(compare(OpCode::lower_equal, diff.r(), tol.r()));
    const H inf = bin(OpCode::bool_or, H(predicate(OpCode::is_inf, a.r())), H(predicate(OpCode::is_inf, b.r())));
    const H finite_near = bin(OpCode::bool_and, near, un(OpCode::bool_not, inf));
    return binary(OpCode::bool_or, finite_near.r(), compare(OpCode::equal, a.r(), b.r()));
  });
}

}  // namespace tensor::detail
