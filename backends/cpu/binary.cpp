// Binary-shaped elementwise ops on the CPU: arithmetic (tensor and scalar forms),
// bitwise, comparisons, logical ops, masks and cross. One functor per op on one engine.
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "backends/cpu/binary_hwy.hpp"
#include "backends/cpu/cpu_ops.hpp"
#include "backends/cpu/elementwise.hpp"
#include "backends/cpu/graph_raw.hpp"

namespace tensor::cpu {
namespace {

using dispatch::Prim;

template <class C> inline constexpr bool kIsInt = std::is_integral_v<C> && !std::is_same_v<C, bool>;

// ---- arithmetic on compute values (ints wrap; int / 0 and int % 0 give 0) ------
struct AddOp {
  static constexpr int kSimd = static_cast<int>(simd::BinOp::Add);
  static constexpr bool kVecLoop = true;  // ints (floats take the Highway kernels)
  template <class C> static C f(C a, C b) {
    if constexpr (kIsInt<C>) { using U = wide_unsigned_t<C>; return static_cast<C>(static_cast<U>(a) + static_cast<U>(b)); }
    else return a + b;
  }
};
struct SubOp {
  static constexpr int kSimd = static_cast<int>(simd::BinOp::Sub);
  static constexpr bool kVecLoop = true;  // ints (floats take the Highway kernels)
  template <class C> static C f(C a, C b) {
    if constexpr (kIsInt<C>) { using U = wide_unsigned_t<C>; return static_cast<C>(static_cast<U>(a) - static_cast<U>(b)); }
    else return a - b;
  }
};
struct MulOp {
  static constexpr int kSimd = static_cast<int>(simd::BinOp::Mul);
  static constexpr bool kVecLoop = true;  // ints (floats take the Highway kernels)
  template <class C> static C f(C a, C b) {
    if constexpr (kIsInt<C>) { using U = wide_unsigned_t<C>; return static_cast<C>(static_cast<U>(a) * static_cast<U>(b)); }
    else return a * b;
  }
};
struct DivOp {
  static constexpr int kSimd = static_cast<int>(simd::BinOp::Div);
  template <class C> static C f(C a, C b) {
    if constexpr (kIsInt<C>) {
      if (b == 0) return 0;
      if constexpr (std::is_signed_v<C>) {
        using U = wide_unsigned_t<C>;
        if (b == -1) return static_cast<C>(U{0} - static_cast<U>(a));  // MIN / -1 wraps to MIN
      }
      return static_cast<C>(a / b);
    } else {
      return a / b;
    }
  }
};
// Result has the divisor's sign (floor-mod), for ints and floats.
struct RemOp {
  static constexpr int kSimd = -1;
  template <class C> static C f(C a, C b) {
    if constexpr (kIsInt<C>) {
      if (b == 0) return 0;
      if constexpr (std::is_signed_v<C>) {
        if (b == -1) return 0;
        C r = static_cast<C>(a % b);
        if (r != 0 && ((r < 0) != (b < 0))) r = static_cast<C>(r + b);
        return r;
      } else {
        return static_cast<C>(a % b);
      }
    } else {
      C r = std::fmod(a, b);
      if (r != 0 && ((r < 0) != (b < 0))) r += b;
      return r;
    }
  }
};
// C's fmod: the dividend's sign, exact; a finite dividend over an infinite divisor is
// itself (burn's fmod(5.3, inf) = 5.3).
struct FmodOp {
  static constexpr int kSimd = -1;
  template <class C> static C f(C a, C b) { return static_cast<C>(std::fmod(a, b)); }
};
struct PowfOp {
  static constexpr int kSimd = -1;
  template <class C> static C f(C a, C b) { return std::pow(a, b); }
};
struct Atan2Op {
  static constexpr int kSimd = -1;
  template <class C> static C f(C a, C b) { return std::atan2(a, b); }
};
// burn's max_pair / min_pair (torch.maximum / minimum), as dispatch's default composes
// them in four passes: b where it wins or is NaN, else a (a NaN in a survives, a tie
// keeps a).
template <class C> bool nan_v(C x) {
  if constexpr (std::is_floating_point_v<C>) return std::isnan(x);
  else return false;
}

struct MaxPairOp {
  static constexpr int kSimd = -1;
  static constexpr bool kVecLoop = true;
  template <class C> static C f(C a, C b) { return a < b || nan_v(b) ? b : a; }
};
struct MinPairOp {
  static constexpr int kSimd = -1;
  static constexpr bool kVecLoop = true;
  template <class C> static C f(C a, C b) { return a > b || nan_v(b) ? b : a; }
};
// hypot as burn (and dispatch's default) define it, in one pass: big * sqrt(1 + (small /
// max(big, tiny))^2) with big / small the larger / smaller of |a| and |b| (no overflow
// for large inputs, no 0/0 for two zeros; computed in f32 for halves).
struct HypotOp {
  static constexpr int kSimd = -1;
  template <class C> static C f(C a, C b) {
    const C aa = std::fabs(a), bb = std::fabs(b);
    const bool a_gt = aa > bb;
    const C big = a_gt ? aa : bb, small = a_gt ? bb : aa;
    const C tiny = std::numeric_limits<C>::min();
    const C r = small / (big < tiny ? tiny : big);
    return big * std::sqrt(C(1) + r * r);
  }
};

// ---- bitwise (ints only); shifts by a negative or too large amount are defined ----
template <class C> bool shift_in_range(C b) {
  constexpr C kBits = static_cast<C>(sizeof(C) * 8);
  if constexpr (std::is_signed_v<C>) return b >= 0 && b < kBits;
  else return b < kBits;
}
struct AndOp { static constexpr int kSimd = -1; static constexpr bool kVecLoop = true; template <class C> static C f(C a, C b) { return static_cast<C>(a & b); } };
struct OrOp { static constexpr int kSimd = -1; static constexpr bool kVecLoop = true; template <class C> static C f(C a, C b) { return static_cast<C>(a | b); } };
struct XorOp { static constexpr int kSimd = -1; static constexpr bool kVecLoop = true; template <class C> static C f(C a, C b) { return static_cast<C>(a ^ b); } };
struct ShlOp {
  static constexpr int kSimd = -1;
  template <class C> static C f(C a, C b) {
    if (!shift_in_range(b)) return 0;
    using U = wide_unsigned_t<C>;
    return static_cast<C>(static_cast<U>(a) << static_cast<unsigned>(b));
  }
};
struct ShrOp {  // arithmetic for signed types
  static constexpr int kSimd = -1;
  template <class C> static C f(C a, C b) {
    if (!shift_in_range(b)) {
      if constexpr (std::is_signed_v<C>) return a < 0 ? C(-1) : C(0);
      else return 0;
    }
    return static_cast<C>(a >> static_cast<unsigned>(b));
  }
};

// Storage-level adaptor: loads, computes in calc_t, stores; f32/f64 rows that
// are contiguous (or broadcast a scalar) go to the Highway kernels.
template <class T, class Op>
struct BinFn {
  static constexpr bool kHwy = Op::kSimd >= 0 && (std::is_same_v<T, float> || std::is_same_v<T, double>);
  static constexpr auto kOp = static_cast<simd::BinOp>(Op::kSimd < 0 ? 0 : Op::kSimd);

  // Runs shorter than this stay in a plain loop: the dynamic dispatch into Highway
  // costs more than a few scalar lanes (per-op overhead of tiny tensors, SPEC §8).
  static constexpr std::size_t kTiny = 8;

  static constexpr bool kHalfHwy = Op::kSimd >= 0 && dispatch::kIsHalf<T>;

  T operator()(T a, T b) const { return st<T>(Op::f(ld(a), ld(b))); }
  // Branch-free ops (int arithmetic and bitwise, max_pair, min_pair: Op::kVecLoop) on
  // plain numbers without a Highway kernel: vectorized contiguous runs (kVecFn). (hypot
  // is not: its sqrt keeps errno semantics, which GCC does not vectorize; one scalar
  // pass is still 1.7x the default's nine.)
  static constexpr bool kVec = requires { Op::kVecLoop; } && std::is_arithmetic_v<T> && !kHwy;
  // Halves: f32 blocks through the f32 kernel (o may alias a or b element for element).
  void vv(T* o, const T* a, const T* b, std::size_t n) const requires(kHalfHwy) {
    half_blocks(n, [&](std::size_t i, std::size_t m) {
      float fa[kHalfBlock], fb[kHalfBlock];
      widen_block(a + i, fa, m);
      widen_block(b + i, fb, m);
      simd::binary_f32(kOp, fa, fb, fa, m);
      narrow_block(fa, o + i, m);
    });
  }
  void vv(T* o, const T* a, const T* b, std::size_t n) const requires(kHwy) {
    if (n < kTiny) {
      for (std::size_t i = 0; i < n; ++i) o[i] = Op::f(a[i], b[i]);
      return;
    }
    if constexpr (std::is_same_v<T, float>) simd::binary_f32(kOp, a, b, o, n);
    else simd::binary_f64(kOp, a, b, o, n);
  }
  void vs(T* o, const T* a, T s, std::size_t n) const requires(kHwy) {
    if constexpr (std::is_same_v<T, float>) simd::binary_scalar_f32(kOp, a, s, o, n);
    else simd::binary_scalar_f64(kOp, a, s, o, n);
  }
  void sv(T* o, T s, const T* b, std::size_t n) const requires(kHwy) {
    if constexpr (std::is_same_v<T, float>) simd::binary_rscalar_f32(kOp, s, b, o, n);
    else simd::binary_rscalar_f64(kOp, s, b, o, n);
  }
};

// An operand as the engine sees it: base address, broadcast strides, element size.
struct Operand {
  std::byte* ptr;
  std::array<std::int64_t, kMaxRank> strides;
  std::size_t size;
};
Operand operand(const CpuTensor& t, const Shape& out) {
  return {t.data(), broadcast_strides(t.shape(), t.strides(), out), t.elem_size()};
}
// A scalar held in `slot`, broadcast to every element.
Operand scalar_operand(void* slot, std::size_t size) { return {static_cast<std::byte*>(slot), {}, size}; }

template <std::size_t K>
Plan<K> plan_of(const Shape& shape, const std::array<const Operand*, K>& ops) {
  std::array<const std::int64_t*, K> s{};
  std::array<std::size_t, K> z{};
  for (std::size_t k = 0; k < K; ++k) { s[k] = ops[k]->strides.data(); z[k] = ops[k]->size; }
  return make_plan<K>(shape, s, z);
}

// Output of an op whose inputs are `a` (and `b`): the first input that is unique,
// dense from offset 0 and already has the output shape and element size, else fresh.
CpuRef output_for(const CpuRef& a, const CpuRef* b, const Shape& shape, DType dtype) {
  const std::size_t size = dtype_size(dtype);
  if (reusable(*a, shape, size)) { a->set_dtype(dtype); return a; }
  if (b && reusable(**b, shape, size)) { (*b)->set_dtype(dtype); return *b; }
  return alloc_tensor(dtype, shape);
}

template <class T> using IfInt = std::enable_if_t<kIsInt<T>, int>;

// Binary family: numeric (float and int) arithmetic with broadcasting.
template <class Op, bool kIntOnly = false, bool kFloatOnly = false>
Prim binary_entry(Prim pa, Prim pb) {
  CpuRef a = as_cpu(std::move(pa));
  CpuRef b = as_cpu(std::move(pb));
  const Shape shape = broadcast_shape(a->shape(), b->shape());
  const DType dt = a->dtype();
  CpuRef out = output_for(a, &b, shape, dt);
  // Same shapes, all contiguous (the common case): one run, no broadcast plan.
  const bool one_run = a->shape() == shape && b->shape() == shape && a->is_contiguous() && b->is_contiguous() &&
                       out->is_contiguous();
  dispatch::visit_dtype(dt, [&](auto tag) {
    using T = decltype(tag);
    constexpr bool kInt = kIsInt<T>;
    constexpr bool kFloat = dispatch::kIsFloatLike<T>;
    if constexpr ((kInt || kFloat) && !(kIntOnly && !kInt) && !(kFloatOnly && !kFloat)) {
      BinFn<T, Op> fn;
      if (one_run) {
        T* o = at<T>(out->data());
        const T* x = at<T>(a->data());
        const T* y = at<T>(b->data());
        const std::size_t n = shape.num_elements();
        if constexpr (requires { fn.vv(o, x, y, n); }) {
          fn.vv(o, x, y, n);
        } else {
          run_loop(n, fn, [&](const BinFn<T, Op>& g, std::size_t i) { o[i] = g(x[i], y[i]); });
        }
        return;
      }
      const Operand o = operand(*out, shape), x = operand(*a, shape), y = operand(*b, shape);
      map2<T, T, T>(plan_of<3>(shape, {&o, &x, &y}), o.ptr, x.ptr, y.ptr, fn);
    } else {
      throw_unsupported_dtype("a binary op", dt);
    }
  });
  return out;
}

// Scalar family: a op s, with s converted to the tensor's dtype.
template <class Op, bool kIntOnly = false>
Prim scalar_entry(Prim pa, Scalar s) {
  CpuRef a = as_cpu(std::move(pa));
  const Shape shape = a->shape();
  const DType dt = a->dtype();
  CpuRef out = output_for(a, nullptr, shape, dt);
  const Operand o = operand(*out, shape), x = operand(*a, shape);
  dispatch::visit_dtype(dt, [&](auto tag) {
    using T = decltype(tag);
    constexpr bool kInt = kIsInt<T>;
    if constexpr (kInt || (!kIntOnly && dispatch::kIsFloatLike<T>)) {
      T v = scalar_as<T>(s);
      const Operand y = scalar_operand(&v, sizeof(T));
      const auto plan = plan_of<3>(shape, {&o, &x, &y});
      BinFn<T, Op> fn;
      map2<T, T, T>(plan, o.ptr, x.ptr, y.ptr, fn);
    } else {
      throw_unsupported_dtype("a scalar op", dt);
    }
  });
  return out;
}

// ---- comparisons: out is a bool dtype (1 byte 0/1, or 4 bytes for BoolU32) ------
struct EqOp { template <class C> static bool f(C a, C b) { return a == b; } };
struct GtOp { template <class C> static bool f(C a, C b) { return a > b; } };
struct GeOp { template <class C> static bool f(C a, C b) { return a >= b; } };
struct LtOp { template <class C> static bool f(C a, C b) { return a < b; } };
struct LeOp { template <class C> static bool f(C a, C b) { return a <= b; } };
struct NeOp { template <class C> static bool f(C a, C b) { return a != b; } };  // NaN != NaN

template <class TO, class T, class Op>
struct CmpFn {
  TO operator()(T a, T b) const { return static_cast<TO>(Op::f(ld(a), ld(b)) ? 1 : 0); }
  static constexpr bool kVec = std::is_arithmetic_v<T>;  // plain numbers: vectorized runs
};

// Calls f(U{}) with the raw unsigned type of a bool storage (uint8_t or uint32_t).
template <class F>
decltype(auto) visit_bool_storage(DType dtype, F&& f) {
  if (dtype_size(dtype) == 4) return f(std::uint32_t{});
  return f(std::uint8_t{});
}

template <class Op>
Prim compare_entry(Prim pa, Prim pb, DType out_dtype) {
  CpuRef a = as_cpu(std::move(pa));
  CpuRef b = as_cpu(std::move(pb));
  const Shape shape = broadcast_shape(a->shape(), b->shape());
  CpuRef out = alloc_tensor(out_dtype, shape);
  const Operand o = operand(*out, shape), x = operand(*a, shape), y = operand(*b, shape);
  const auto plan = plan_of<3>(shape, {&o, &x, &y});
  dispatch::visit_dtype(a->dtype(), [&](auto tag) {
    using T = decltype(tag);
    visit_bool_storage(out_dtype, [&](auto otag) {
      using TO = decltype(otag);
      CmpFn<TO, T, Op> fn;
      map2<TO, T, T>(plan, o.ptr, x.ptr, y.ptr, fn);
    });
  });
  return out;
}

template <class Op>
Prim compare_scalar_entry(Prim pa, Scalar s, DType out_dtype) {
  CpuRef a = as_cpu(std::move(pa));
  const Shape shape = a->shape();
  CpuRef out = alloc_tensor(out_dtype, shape);
  const Operand o = operand(*out, shape), x = operand(*a, shape);
  dispatch::visit_dtype(a->dtype(), [&](auto tag) {
    using T = decltype(tag);
    T v = scalar_as<T>(s);
    const Operand y = scalar_operand(&v, sizeof(T));
    const auto plan = plan_of<3>(shape, {&o, &x, &y});
    visit_bool_storage(out_dtype, [&](auto otag) {
      using TO = decltype(otag);
      CmpFn<TO, T, Op> fn;
      map2<TO, T, T>(plan, o.ptr, x.ptr, y.ptr, fn);
    });
  });
  return out;
}

// ---- logical ops on bool tensors (any storage; nonzero is true) ------------------
// Logic on bool storages, without short-circuit branches: vectorized runs (kVec).
template <class D>
struct BoolFn {
  static constexpr bool kVec = true;
  template <class U> U operator()(U a, U b) const { return static_cast<U>(D::g(a != 0, b != 0)); }
};
struct AndB : BoolFn<AndB> { static bool g(bool x, bool y) { return x & y; } };
struct OrB : BoolFn<OrB> { static bool g(bool x, bool y) { return x | y; } };
struct XorB : BoolFn<XorB> { static bool g(bool x, bool y) { return x != y; } };
struct NotB {
  static constexpr bool kVec = true;
  template <class U> U operator()(U a) const { return static_cast<U>(a == 0); }
};

template <class Fn>
Prim bool_binary_entry(Prim pa, Prim pb) {
  CpuRef a = as_cpu(std::move(pa));
  CpuRef b = as_cpu(std::move(pb));
  const Shape shape = broadcast_shape(a->shape(), b->shape());
  CpuRef out = output_for(a, &b, shape, a->dtype());
  const Operand o = operand(*out, shape), x = operand(*a, shape), y = operand(*b, shape);
  const auto plan = plan_of<3>(shape, {&o, &x, &y});
  visit_bool_storage(a->dtype(), [&](auto tag) {
    using U = decltype(tag);
    Fn fn;
    map2<U, U, U>(plan, o.ptr, x.ptr, y.ptr, fn);
  });
  return out;
}

Prim bool_not_entry(Prim pa) {
  CpuRef a = as_cpu(std::move(pa));
  const Shape shape = a->shape();
  CpuRef out = output_for(a, nullptr, shape, a->dtype());
  const Operand o = operand(*out, shape), x = operand(*a, shape);
  const auto plan = plan_of<2>(shape, {&o, &x});
  visit_bool_storage(a->dtype(), [&](auto tag) {
    using U = decltype(tag);
    NotB fn;
    map1<U, U>(plan, o.ptr, x.ptr, fn);
  });
  return out;
}

// ---- masks: mask is a bool tensor of any storage, broadcast against the others ----
template <class T, class M>
struct FillFn {
  T value;
  T operator()(T a, M m) const { return m != 0 ? value : a; }
  // Plain numbers: vectorized selects (a branch per element mispredicts on an unordered
  // mask).
  static constexpr bool kVec = std::is_arithmetic_v<T>;
};
template <class T, class M>
struct WhereFn {
  T operator()(T a, M m, T v) const { return m != 0 ? v : a; }
  static constexpr bool kVec = std::is_arithmetic_v<T>;
};

Prim mask_fill_entry(Prim pa, Prim pm, Scalar s) {
  CpuRef a = as_cpu(std::move(pa));
  CpuRef m = as_cpu(std::move(pm));
  const Shape shape = broadcast_shape(a->shape(), m->shape());
  CpuRef out = output_for(a, nullptr, shape, a->dtype());
  const Operand o = operand(*out, shape), x = operand(*a, shape), y = operand(*m, shape);
  const auto plan = plan_of<3>(shape, {&o, &x, &y});
  dispatch::visit_dtype(a->dtype(), [&](auto tag) {
    using T = decltype(tag);
    visit_bool_storage(m->dtype(), [&](auto mtag) {
      using M = decltype(mtag);
      FillFn<T, M> fn{scalar_as<T>(s)};
      map2<T, T, M>(plan, o.ptr, x.ptr, y.ptr, fn);
    });
  });
  return out;
}

Prim mask_where_entry(Prim pa, Prim pm, Prim pv) {
  CpuRef a = as_cpu(std::move(pa));
  CpuRef m = as_cpu(std::move(pm));
  CpuRef v = as_cpu(std::move(pv));
  Shape shape = broadcast_shape(broadcast_shape(a->shape(), m->shape()), v->shape());
  CpuRef out = output_for(a, &v, shape, a->dtype());
  const Operand o = operand(*out, shape), x = operand(*a, shape), y = operand(*m, shape), z = operand(*v, shape);
  const auto plan = plan_of<4>(shape, {&o, &x, &y, &z});
  dispatch::visit_dtype(a->dtype(), [&](auto tag) {
    using T = decltype(tag);
    visit_bool_storage(m->dtype(), [&](auto mtag) {
      using M = decltype(mtag);
      WhereFn<T, M> fn;
      map3<T, T, M, T>(plan, o.ptr, x.ptr, y.ptr, z.ptr, fn);
    });
  });
  return out;
}

// ---- cross product of 3-vectors along `dim` (operands broadcast; floats only) -----
Prim cross_entry(Prim pa, Prim pb, std::size_t dim) {
  const CpuRef a = as_cpu(std::move(pa));
  const CpuRef b = as_cpu(std::move(pb));
  const Shape shape = broadcast_shape(a->shape(), b->shape());
  CpuRef out = alloc_tensor(a->dtype(), shape);
  const Operand o = operand(*out, shape), x = operand(*a, shape), y = operand(*b, shape);
  Shape lines = shape;
  lines[dim] = 1;
  const auto plan = make_plan<3>(lines, {o.strides.data(), x.strides.data(), y.strides.data()}, {o.size, x.size, y.size});
  dispatch::visit_dtype(a->dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (dispatch::kIsFloatLike<T>) {
      const auto e = static_cast<std::int64_t>(sizeof(T));
      const std::int64_t os = o.strides[dim] * e, xs = x.strides[dim] * e, ys = y.strides[dim] * e;
      for_each_row(plan, {o.ptr, x.ptr, y.ptr}, [&](std::array<std::byte*, 3> p, std::size_t n, std::array<std::int64_t, 3> s) {
        for (std::size_t i = 0; i < n; ++i, p[0] += s[0], p[1] += s[1], p[2] += s[2]) {
          const calc_t<T> a0 = ld(*at<T>(p[1])), a1 = ld(*at<T>(p[1] + xs)), a2 = ld(*at<T>(p[1] + 2 * xs));
          const calc_t<T> b0 = ld(*at<T>(p[2])), b1 = ld(*at<T>(p[2] + ys)), b2 = ld(*at<T>(p[2] + 2 * ys));
          *at<T>(p[0]) = st<T>(a1 * b2 - a2 * b1);
          *at<T>(p[0] + os) = st<T>(a2 * b0 - a0 * b2);
          *at<T>(p[0] + 2 * os) = st<T>(a0 * b1 - a1 * b0);
        }
      });
    } else {
      throw DTypeError("[cross] expected a float dtype; got " + std::string(dtype_name(a->dtype())));
    }
  });
  return out;
}

// ---- graph replay's raw kernels: the entries' own functors on dense runs --------------
template <class T, class Op>
void raw_binary(void* o, const void* a, const void* b, std::size_t n, const dispatch::RawScalar&) {
  BinFn<T, Op> fn;
  T* out = static_cast<T*>(o);
  const T* x = static_cast<const T*>(a);
  const T* y = static_cast<const T*>(b);
  if constexpr (requires { fn.vv(out, x, y, n); }) fn.vv(out, x, y, n);
  else run_loop(n, fn, [&](const BinFn<T, Op>& g, std::size_t i) { out[i] = g(x[i], y[i]); });
}
template <class T, class Op>
void raw_scalar(void* o, const void* a, const void*, std::size_t n, const dispatch::RawScalar& s) {
  BinFn<T, Op> fn;
  T v;
  std::memcpy(&v, s.bytes, sizeof(T));
  T* out = static_cast<T*>(o);
  const T* x = static_cast<const T*>(a);
  if constexpr (requires { fn.vs(out, x, v, n); }) fn.vs(out, x, v, n);
  else run_loop(n, fn, [&](const BinFn<T, Op>& g, std::size_t i) { out[i] = g(x[i], v); });
}

template <class F>
dispatch::RawKernel raw_by_dtype(DType dt, F&& pick) {
  switch (dt) {
    case DType::F32: return pick(float{});
    case DType::F64: return pick(double{});
    case DType::I32: return pick(std::int32_t{});
    case DType::I64: return pick(std::int64_t{});
    default: return nullptr;
  }
}

template <class Op>
dispatch::RawKernel raw_binary_for(dispatch::RawFn entry, DType dt) {
  if (entry != reinterpret_cast<dispatch::RawFn>(&binary_entry<Op>)) return nullptr;  // NOLINT: compared only
  return raw_by_dtype(dt, [](auto tag) { return &raw_binary<decltype(tag), Op>; });
}
template <class Op>
dispatch::RawKernel raw_scalar_for(dispatch::RawFn entry, DType dt, const Scalar& s, dispatch::RawScalar& out) {
  if (entry != reinterpret_cast<dispatch::RawFn>(&scalar_entry<Op>)) return nullptr;  // NOLINT: compared only
  return raw_by_dtype(dt, [&](auto tag) {
    using T = decltype(tag);
    const T v = scalar_as<T>(s);  // as scalar_entry converts it
    std::memcpy(out.bytes, &v, sizeof(T));
    return &raw_scalar<T, Op>;
  });
}

}  // namespace

dispatch::RawKernel raw_binary_kernel(OpCode op, dispatch::RawFn entry, DType dt, const Scalar& s, dispatch::RawScalar& out) {
  switch (op) {
    case OpCode::add: return raw_binary_for<AddOp>(entry, dt);
    case OpCode::sub: return raw_binary_for<SubOp>(entry, dt);
    case OpCode::mul: return raw_binary_for<MulOp>(entry, dt);
    case OpCode::div: return raw_binary_for<DivOp>(entry, dt);
    case OpCode::remainder: return raw_binary_for<RemOp>(entry, dt);
    case OpCode::max_pair: return raw_binary_for<MaxPairOp>(entry, dt);
    case OpCode::min_pair: return raw_binary_for<MinPairOp>(entry, dt);
    case OpCode::add_scalar: return raw_scalar_for<AddOp>(entry, dt, s, out);
    case OpCode::sub_scalar: return raw_scalar_for<SubOp>(entry, dt, s, out);
    case OpCode::mul_scalar: return raw_scalar_for<MulOp>(entry, dt, s, out);
    case OpCode::div_scalar: return raw_scalar_for<DivOp>(entry, dt, s, out);
    case OpCode::remainder_scalar: return raw_scalar_for<RemOp>(entry, dt, s, out);
    default: return nullptr;
  }
}

void register_binary_ops(dispatch::Backend& b) {
  b.set<OpCode::add>(&binary_entry<AddOp>);
  b.set<OpCode::sub>(&binary_entry<SubOp>);
  b.set<OpCode::mul>(&binary_entry<MulOp>);
  b.set<OpCode::div>(&binary_entry<DivOp>);
  b.set<OpCode::remainder>(&binary_entry<RemOp>);
  b.set<OpCode::fmod>(&binary_entry<FmodOp, false, true>);
  b.set<OpCode::powf>(&binary_entry<PowfOp, false, true>);
  b.set<OpCode::atan2>(&binary_entry<Atan2Op, false, true>);
  b.set<OpCode::hypot>(&binary_entry<HypotOp, false, true>);
  b.set<OpCode::max_pair>(&binary_entry<MaxPairOp>);
  b.set<OpCode::min_pair>(&binary_entry<MinPairOp>);
  b.set<OpCode::add_scalar>(&scalar_entry<AddOp>);
  b.set<OpCode::sub_scalar>(&scalar_entry<SubOp>);
  b.set<OpCode::mul_scalar>(&scalar_entry<MulOp>);
  b.set<OpCode::div_scalar>(&scalar_entry<DivOp>);
  b.set<OpCode::remainder_scalar>(&scalar_entry<RemOp>);
  b.set<OpCode::fmod_scalar>(&scalar_entry<FmodOp>);

  b.set<OpCode::bitwise_and>(&binary_entry<AndOp, true>);
  b.set<OpCode::bitwise_or>(&binary_entry<OrOp, true>);
  b.set<OpCode::bitwise_xor>(&binary_entry<XorOp, true>);
  b.set<OpCode::bitwise_left_shift>(&binary_entry<ShlOp, true>);
  b.set<OpCode::bitwise_right_shift>(&binary_entry<ShrOp, true>);
  b.set<OpCode::bitwise_and_scalar>(&scalar_entry<AndOp, true>);
  b.set<OpCode::bitwise_or_scalar>(&scalar_entry<OrOp, true>);
  b.set<OpCode::bitwise_xor_scalar>(&scalar_entry<XorOp, true>);
  b.set<OpCode::bitwise_left_shift_scalar>(&scalar_entry<ShlOp, true>);
  b.set<OpCode::bitwise_right_shift_scalar>(&scalar_entry<ShrOp, true>);

  b.set<OpCode::equal>(&compare_entry<EqOp>);
  b.set<OpCode::greater>(&compare_entry<GtOp>);
  b.set<OpCode::greater_equal>(&compare_entry<GeOp>);
  b.set<OpCode::lower>(&compare_entry<LtOp>);
  b.set<OpCode::lower_equal>(&compare_entry<LeOp>);
  b.set<OpCode::not_equal>(&compare_entry<NeOp>);
  b.set<OpCode::equal_elem>(&compare_scalar_entry<EqOp>);
  b.set<OpCode::greater_elem>(&compare_scalar_entry<GtOp>);
  b.set<OpCode::greater_equal_elem>(&compare_scalar_entry<GeOp>);
  b.set<OpCode::lower_elem>(&compare_scalar_entry<LtOp>);
  b.set<OpCode::lower_equal_elem>(&compare_scalar_entry<LeOp>);
  b.set<OpCode::not_equal_elem>(&compare_scalar_entry<NeOp>);

  b.set<OpCode::bool_not>(&bool_not_entry);
  b.set<OpCode::bool_and>(&bool_binary_entry<AndB>);
  b.set<OpCode::bool_or>(&bool_binary_entry<OrB>);
  b.set<OpCode::bool_xor>(&bool_binary_entry<XorB>);

  b.set<OpCode::mask_fill>(&mask_fill_entry);
  b.set<OpCode::mask_where>(&mask_where_entry);
  b.set<OpCode::cross>(&cross_entry);
}

}  // namespace tensor::cpu
