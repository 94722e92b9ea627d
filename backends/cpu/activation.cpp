// Activations on the CPU: relu, leaky_relu, gelu (exact erf form), sigmoid and
// log_sigmoid (overflow-safe), hard_sigmoid as elementwise functors, and softmax /
// log_softmax / softmin along a dim (max, then sum of exp, per lane; numerically
// stable). Float dtypes only; halves compute through float.
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

#include "backends/cpu/cpu_ops.hpp"
#include "backends/cpu/elementwise.hpp"

namespace tensor::cpu {
namespace {

using dispatch::Prim;

// c ? x : y without a branch (compares against constants otherwise compile to jumps,
// which mispredict on data of mixed sign).
template <class C>
inline C pick(bool c, C x, C y) {
  using B = std::conditional_t<sizeof(C) == 4, std::uint32_t, std::uint64_t>;
  const B m = B{0} - static_cast<B>(c);
  return std::bit_cast<C>(static_cast<B>((std::bit_cast<B>(x) & m) | (std::bit_cast<B>(y) & ~m)));
}

// max(a, 0); NaN stays NaN and -0.0 becomes +0.0 (as the default mask_fill does).
struct ReluOp {
  template <class C> static C f(C a, C, C) { return pick(a <= C(0), C(0), a); }
};
struct LeakyReluOp {
  template <class C> static C f(C a, C slope, C) { return pick(a < C(0), a * slope, a); }
};
struct GeluOp {
  template <class C> static C f(C a, C, C) {
    return a * ((std::erf(a * C(0.70710678118654752440)) + C(1)) * C(0.5));
  }
};
// Never evaluates exp of a large positive number: sigmoid(+-MAX) = 1, 0.
struct SigmoidOp {
  template <class C> static C f(C a, C, C) {
    if (a >= C(0)) return C(1) / (C(1) + std::exp(-a));
    const C e = std::exp(a);
    return e / (C(1) + e);
  }
};
// min(a, 0) - log1p(exp(-|a|)): log_sigmoid(300) = 0, log_sigmoid(-300) = -300, -inf -> -inf.
struct LogSigmoidOp {
  template <class C> static C f(C a, C, C) { return (a < C(0) ? a : C(0)) - std::log1p(std::exp(-std::fabs(a))); }
};
// clamp(alpha * a + beta, 0, 1), NaN kept.
struct HardSigmoidOp {
  template <class C> static C f(C a, C alpha, C beta) {
    const C v = alpha * a + beta;
    return pick(v < C(0), C(0), pick(v > C(1), C(1), v));
  }
};

template <class T, class Op>
struct ActFn {
  calc_t<T> p, q;
  T operator()(T a) const { return st<T>(Op::f(ld(a), p, q)); }
  // Contiguous rows of sigmoid: the Highway kernel (same overflow-safe formula).
  void vv(T* o, const T* x, std::size_t n) const requires(std::is_same_v<Op, SigmoidOp>) {
    unary_simd(simd::UnOp::Sigmoid, o, x, n);
  }
};

template <class Op>
Prim act_impl(Prim pa, double p, double q) {
  const DType dt = pa->dtype();
  return map_same_dtype(std::move(pa), [&](auto tag, auto apply) {
    using T = decltype(tag);
    if constexpr (dispatch::kIsFloatLike<T>) {
      apply(ActFn<T, Op>{static_cast<calc_t<T>>(p), static_cast<calc_t<T>>(q)});
    } else {
      throw DTypeError("[activation] expected a float dtype; got " + std::string(dtype_name(dt)));
    }
  });
}

template <class Op>
Prim act_entry(Prim a) { return act_impl<Op>(std::move(a), 0.0, 0.0); }
Prim leaky_relu_entry(Prim a, Scalar slope) { return act_impl<LeakyReluOp>(std::move(a), slope.to_double(), 0.0); }
Prim hard_sigmoid_entry(Prim a, Scalar alpha, Scalar beta) {
  return act_impl<HardSigmoidOp>(std::move(a), alpha.to_double(), beta.to_double());
}

// ---- softmax family along a dim ---------------------------------------------------------

enum class Soft { Max, LogMax, Min };

// One lane of n values (already gathered, contiguous, in compute precision) into
// `out` (element stride os bytes); `e` is scratch of n values. The max propagates
// NaN, so a lane with a NaN is all NaN, as the default composition gives. exp runs
// once per element, through the Highway kernel.
template <Soft kS, class T, class C>
void soft_lane(C* x, C* e, std::size_t n, std::byte* out, std::int64_t os) {
  if constexpr (kS == Soft::Min)
    for (std::size_t j = 0; j < n; ++j) x[j] = -x[j];
  C mx = -std::numeric_limits<C>::infinity();
  for (std::size_t j = 0; j < n; ++j) {
    if (std::isnan(x[j]) || x[j] > mx) mx = x[j];
    if (std::isnan(mx)) break;
  }
  for (std::size_t j = 0; j < n; ++j) x[j] -= mx;
  unary_simd(simd::UnOp::Exp, e, x, n);
  double sum = 0;  // in double: long lanes of small terms keep their precision
  for (std::size_t j = 0; j < n; ++j) sum += static_cast<double>(e[j]);
  if constexpr (kS == Soft::LogMax) {
    const C lse = static_cast<C>(std::log(sum));
    for (std::size_t j = 0; j < n; ++j, out += os) *at<T>(out) = st<T>(x[j] - lse);
  } else {
    const C inv = static_cast<C>(1.0 / sum);
    for (std::size_t j = 0; j < n; ++j, out += os) *at<T>(out) = st<T>(e[j] * inv);
  }
}

template <Soft kS>
Prim soft_entry(Prim pa, std::size_t dim) {
  const CpuRef a = as_cpu(std::move(pa));
  const Shape& shape = a->shape();
  const std::size_t n = shape[dim];
  Shape lines = shape;
  lines[dim] = 1;
  const std::size_t last = shape.rank() - 1;
  if (dim != last && a->stride(dim) != 1 && a->stride(dim) != -1 && lines.num_elements() > 1 && n > 1) {
    // Lanes far apart in memory: swap `dim` with the last dim through the blocked
    // transposing copy, run contiguous lanes, and transpose the result back.
    Shape ss = shape;
    Layout sl = a->layout();
    std::swap(ss[dim], ss[last]);
    std::swap(sl.strides[dim], sl.strides[last]);
    const CpuRef r = as_cpu(soft_entry<kS>(to_contiguous(make_view(a, ss, sl)), last));
    CpuRef out = alloc_tensor(a->dtype(), shape);
    Layout ol = contiguous_layout(shape);
    std::swap(ol.strides[dim], ol.strides[last]);
    copy_strided_to(*r, out->data(), ol.strides.data());
    return out;
  }
  CpuRef out = alloc_tensor(a->dtype(), shape);
  if (shape.num_elements() == 0) return out;
  dispatch::visit_dtype(a->dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (dispatch::kIsFloatLike<T>) {
      using C = calc_t<T>;
      const auto e = static_cast<std::int64_t>(sizeof(T));
      const auto plan = make_plan<2>(lines, {out->layout().strides.data(), a->layout().strides.data()}, {sizeof(T), sizeof(T)});
      const std::int64_t os = out->stride(dim) * e, xs = a->stride(dim) * e;
      std::vector<C> lane(n), scratch(n);
      for_each_row(plan, {out->data(), a->data()}, [&](std::array<std::byte*, 2> p, std::size_t m, std::array<std::int64_t, 2> s) {
        for (std::size_t r = 0; r < m; ++r, p[0] += s[0], p[1] += s[1]) {
          const std::byte* x = p[1];
          for (std::size_t j = 0; j < n; ++j, x += xs) lane[j] = ld(*at<T>(x));
          soft_lane<kS, T>(lane.data(), scratch.data(), n, p[0], os);
        }
      });
    } else {
      throw DTypeError("[softmax] expected a float dtype; got " + std::string(dtype_name(a->dtype())));
    }
  });
  return out;
}

}  // namespace

void register_activation_ops(dispatch::Backend& b) {
  b.set<OpCode::relu>(&act_entry<ReluOp>);
  b.set<OpCode::gelu>(&act_entry<GeluOp>);
  b.set<OpCode::sigmoid>(&act_entry<SigmoidOp>);
  b.set<OpCode::log_sigmoid>(&act_entry<LogSigmoidOp>);
  b.set<OpCode::leaky_relu>(&leaky_relu_entry);
  b.set<OpCode::hard_sigmoid>(&hard_sigmoid_entry);
  b.set<OpCode::softmax>(&soft_entry<Soft::Max>);
  b.set<OpCode::log_softmax>(&soft_entry<Soft::LogMax>);
  b.set<OpCode::softmin>(&soft_entry<Soft::Min>);
}

}  // namespace tensor::cpu
