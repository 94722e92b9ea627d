// tensor/activation.hpp's compositions: the activations burn composes from other ops.
#include <cmath>
#include <numbers>
#include <string>

#include "lib/src/composite/compose.hpp"

namespace tensor::detail {

using namespace compose;

namespace {
// x > 0 ? x : alpha (e^(x / s) - 1), times `scale` (elu: s = 1; celu: s = alpha; selu:
// fixed alpha and scale).
Handle exp_linear(const char* op, H x, double alpha, double s, double scale) {
  return named(op, [&] {
    const H neg = sc(OpCode::clamp_max, x, Scalar(0.0));
    const H e = sc(OpCode::mul_scalar, sc(OpCode::sub_scalar, un(OpCode::exp, sc(OpCode::div_scalar, neg, Scalar(s))), Scalar(1.0)),
                   Scalar(alpha));
    H out = H(mask_where(x.r(), compare_scalar(OpCode::lower_equal_elem, x.r(), Scalar(0.0)), e.r()));
    if (scale != 1.0) out = sc(OpCode::mul_scalar, out, Scalar(scale));
    return out.take();
  });
}
}  // namespace

Handle silu(Handle&& a_) {
  const H x = take_h(a_);
  return named("silu", [&] { return binary(OpCode::mul, x.r(), unary(OpCode::sigmoid, x.r())); });
}

Handle relu6(Handle&& a_) {
  const H x = take_h(a_);
  return named("relu6", [&] { return clamp(OpCode::clamp, x.r(), Scalar(0.0), Scalar(6.0)); });
}

Handle hard_swish(Handle&& a_) {  // x relu6(x + 3) / 6
  const H x = take_h(a_);
  return named("hard_swish", [&] {
    const H r6 = H(clamp(OpCode::clamp, scalar(OpCode::add_scalar, x.r(), Scalar(3.0)), Scalar(0.0), Scalar(6.0)));
    return scalar(OpCode::div_scalar, binary(OpCode::mul, x.r(), r6.r()), Scalar(6.0));
  });
}

Handle gelu_approximate(Handle&& a_) {  // 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))
  const H x = take_h(a_);
  return named("gelu_approximate", [&] {
    const H x3 = bin(OpCode::mul, bin(OpCode::mul, x, x), x);
    const H in = sc(OpCode::mul_scalar, bin(OpCode::add, x, sc(OpCode::mul_scalar, x3, Scalar(0.044715))),
                    Scalar(std::sqrt(2.0 / std::numbers::pi)));
    const H t = sc(OpCode::add_scalar, un(OpCode::tanh, in), Scalar(1.0));
    return scalar(OpCode::mul_scalar, binary(OpCode::mul, x.r(), t.r()), Scalar(0.5));
  });
}

Handle softplus(Handle&& a_, double beta) {  // log(1 + e^(beta x)) / beta, as relu(bx) + log1p(e^-|bx|) (no overflow)
  const H x = take_h(a_);
  return named("softplus", [&] {
    const H bx = sc(OpCode::mul_scalar, x, Scalar(beta));
    const H t = un(OpCode::log1p, un(OpCode::exp, un(OpCode::neg, un(OpCode::abs, bx))));
    return scalar(OpCode::div_scalar, binary(OpCode::add, unary(OpCode::relu, bx.r()), t.r()), Scalar(beta));
  });
}

Handle mish(Handle&& a_) {  // x tanh(softplus(x))
  const H x = take_h(a_);
  return named("mish", [&] {
    const H sp = H(softplus(x.r(), 1.0));
    return binary(OpCode::mul, x.r(), unary(OpCode::tanh, sp.r()));
  });
}

Handle softsign(Handle&& a_) {  // x / (1 + |x|)
  const H x = take_h(a_);
  return named("softsign", [&] {
    return binary(OpCode::div, x.r(), scalar(OpCode::add_scalar, unary(OpCode::abs, x.r()), Scalar(1.0)));
  });
}

Handle tanhshrink(Handle&& a_) {  // x - tanh(x)
  const H x = take_h(a_);
  return named("tanhshrink", [&] { return binary(OpCode::sub, x.r(), unary(OpCode::tanh, x.r())); });
}

Handle elu(Handle&& a_, double alpha) { return exp_linear("elu", take_h(a_), alpha, 1.0, 1.0); }
Handle celu(Handle&& a_, double alpha) { return exp_linear("celu", take_h(a_), alpha, alpha, 1.0); }
Handle selu(Handle&& a_) {
  return exp_linear("selu", take_h(a_), 1.6732632423543772848170429916717, 1.0, 1.0507009873554804934193349852946);
}

Handle hardtanh(Handle&& a_, double min, double max) {
  const H x = take_h(a_);
  return named("hardtanh", [&] { return clamp(OpCode::clamp, x.r(), Scalar(min), Scalar(max)); });
}

Handle hard_shrink(Handle&& a_, double lambda) {  // |x| > lambda ? x : 0
  const H x = take_h(a_);
  return named("hard_shrink", [&] {
    const H keep = H(compare_scalar(OpCode::lower_equal_elem, unary(OpCode::abs, x.r()), Scalar(lambda)));
    return mask_fill(x.r(), keep.r(), Scalar(0.0));
  });
}

Handle soft_shrink(Handle&& a_, double lambda, double bias) {  // x > l ? x - b : x < -l ? x + b : 0 (soft_shrink: b = l; shrink)
  const H x = take_h(a_);
  return named("soft_shrink", [&] {
    const H small = H(compare_scalar(OpCode::lower_equal_elem, unary(OpCode::abs, x.r()), Scalar(lambda)));
    const H shrunk = bin(OpCode::sub, x, sc(OpCode::mul_scalar, un(OpCode::sign, x), Scalar(bias)));
    return mask_fill(shrunk.r(), small.r(), Scalar(0.0));
  });
}

Handle threshold(Handle&& a_, double limit, double value) {  // x > limit ? x : value
  const H x = take_h(a_);
  return named("threshold", [&] {
    const H low = H(compare_scalar(OpCode::lower_equal_elem, x.r(), Scalar(limit)));
    return mask_fill(x.r(), low.r(), Scalar(value));
  });
}

Handle thresholded_relu(Handle&& a_, double alpha) {  // x > alpha ? x : 0
  const H x = take_h(a_);
  return named("thresholded_relu", [&] {
    const H low = H(compare_scalar(OpCode::lower_equal_elem, x.r(), Scalar(alpha)));
    return mask_fill(x.r(), low.r(), Scalar(0.0));
  });
}

Handle glu(Handle&& a_, std::int64_t dim) {  // first half * sigmoid(second half) along dim
  const H x = take_h(a_);
  const Shape s = x.shape();
  const std::size_t d = rdim_of("glu", dim, s.rank());
  return named("glu", [&] {
    const std::size_t n = s[d];
    if (n % 2 != 0)
      throw ShapeError("[glu] the dim must split in halves; expected an even size; got " + std::to_string(n) + " in dim " +
                       std::to_string(d) + " of " + s.to_string());
    const auto h = static_cast<std::int64_t>(n / 2);
    const H a = slice_dim(x, d, Slice::range(0, h)), b = slice_dim(x, d, Slice::range(h, 2 * h));
    return binary(OpCode::mul, a.r(), unary(OpCode::sigmoid, b.r()));
  });
}

Handle quiet_softmax(Handle&& a_, std::int64_t dim) {  // e^x / (1 + sum e^x), as e^(x - m) / (e^-m + sum e^(x - m))
  const H x = take_h(a_);
  const std::size_t d = rdim_of("quiet_softmax", dim, x.shape().rank());
  return named("quiet_softmax", [&] {
    const H m = rdim(OpCode::max_dim, un(OpCode::detach, x), d);
    const H e = un(OpCode::exp, bin(OpCode::sub, x, m));
    const H den = bin(OpCode::add, rdim(OpCode::sum_dim, e, d), un(OpCode::exp, un(OpCode::neg, m)));
    return binary(OpCode::div, e.r(), den.r());
  });
}

Handle prelu(Handle&& x_, Handle&& alpha_) {  // alpha [1] or [C] along dim 1 of x
  const H a = take_h(x_), b = take_h(alpha_);
  const Shape sa = a.shape(), sb = b.shape();
  return named("prelu", [&] {
    const std::size_t n = sb.rank() == 1 ? sb[0] : 0;
    if (sb.rank() != 1 || !(n == 1 || (sa.rank() >= 2 && n == sa[1])))
      throw ShapeError("[prelu] expected weights of shape [1] or [C] with C the size of dim 1; got weights " + sb.to_string() +
                       " for input " + sa.to_string());
    Shape ws;
    for (std::size_t i = 0; i < sa.rank(); ++i) ws.push_back(i == 1 ? n : 1);
    return binary(OpCode::prelu, a.r(), lit_reshape(b, ws).take());
  });
}

}  // namespace tensor::detail
