// The CPU elementwise engine: typed maps of 1-3 inputs over a strided Plan, with a
// functor per op. Contiguous rows (and rows where one input is a broadcast scalar)
// go to the functor's fast hooks (vv / vs / sv) when it has them, e.g. Highway.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "backends/cpu/convert_hwy.hpp"
#include "backends/cpu/cpu_tensor.hpp"
#include "backends/cpu/parallel.hpp"
#include "backends/cpu/strided.hpp"
#include "backends/cpu/unary_hwy.hpp"
#include "lib/core/element.hpp"
#include "lib/core/shape_rules.hpp"
#include "tensor/scalar.hpp"

namespace tensor::cpu {

using dispatch::BoolU32;

// Value type ops compute with: halves -> float, both bool storages -> bool.
template <class T> struct CalcOf { using type = dispatch::compute_t<T>; };
template <> struct CalcOf<BoolU32> { using type = bool; };
template <class T> using calc_t = typename CalcOf<T>::type;

template <class T> inline calc_t<T> ld(T v) {
  if constexpr (std::is_same_v<T, BoolU32>) return v.v != 0;
  else return dispatch::load_elem(v);
}
template <class T> inline T st(calc_t<T> v) {
  if constexpr (std::is_same_v<T, BoolU32>) return BoolU32{v ? 1u : 0u};
  else return dispatch::store_elem<T>(v);
}

// A Scalar as a value of element type T (Rust `as`: float -> int truncates and
// saturates; int -> int wraps; anything -> bool is "nonzero").
template <class T> T scalar_as(Scalar s) {
  if constexpr (std::is_same_v<T, bool>) {
    return s.to_bool();
  } else if constexpr (std::is_same_v<T, BoolU32>) {
    return BoolU32{s.to_bool() ? 1u : 0u};
  } else if constexpr (dispatch::kIsFloatLike<T>) {
    return dispatch::convert_value<T>(s.to_double());
  } else if (s.is_float()) {
    return dispatch::convert_value<T>(s.to_double());
  } else if (s.kind() == Scalar::Kind::UInt) {
    return dispatch::convert_value<T>(s.to_uint64());
  } else {
    return dispatch::convert_value<T>(s.to_int64());
  }
}

// Wrapping integer arithmetic is done in an unsigned type at least as wide as
// unsigned int, so that no promotion to signed int can overflow.
template <class T> using wide_unsigned_t =
    std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;

template <class T> inline T* at(std::byte* p) { return reinterpret_cast<T*>(p); }
template <class T> inline const T* at(const std::byte* p) { return reinterpret_cast<const T*>(p); }

// body(i) for i in [0, n) in one loop the compiler vectorizes (`omp simd`: compares
// and selects become vector compares and blends). For elementwise bodies on contiguous
// runs of plain numbers: a branch per element mispredicts on unordered data (max_pair
// or mask_where of random f32 run an order of magnitude faster vectorized). A body
// must read its operands unconditionally (a load under a condition needs masked loads,
// and the loop then stays scalar).
template <class F>
inline void simd_loop(std::size_t n, F&& body) {
#if TENSOR_HAVE_OPENMP
#pragma omp simd
#endif
  for (std::size_t i = 0; i < n; ++i) body(i);
}

// A functor that declares `kVec = true` (a branch-free body on plain numbers) has the
// contiguous runs of map1/map2/map3 in simd_loop; others in a plain loop. The engine
// passes operands by value, so they are always loaded unconditionally.
template <class F>
consteval bool vec_fn() {
  if constexpr (requires { F::kVec; }) return F::kVec;
  else return false;
}
template <class F> inline constexpr bool kVecFn = vec_fn<F>();
// body(g, i) for i in [0, n) with g the functor: a local copy in the vectorized case, so
// its members (a fill value) are not reloaded through a pointer the stores might alias.
template <class F, class B>
inline void run_loop(std::size_t n, F& f, B&& body) {
  if constexpr (kVecFn<F>) {
    const F g = f;
    simd_loop(n, [&](std::size_t i) { body(g, i); });
  } else {
    for (std::size_t i = 0; i < n; ++i) body(f, i);
  }
}

// out[i] = f(a[i])
template <class TO, class TA, class F>
void map1(const Plan<2>& plan, std::byte* out, const std::byte* a, F& f) {
  for_each_row(plan, {out, const_cast<std::byte*>(a)},
               [&](std::array<std::byte*, 2> p, std::size_t n, std::array<std::int64_t, 2> s) {
                 TO* o = at<TO>(p[0]);
                 const TA* x = at<TA>(p[1]);
                 if (s[0] == sizeof(TO) && s[1] == sizeof(TA)) {
                   if constexpr (requires { f.vv(o, x, n); }) {
                     f.vv(o, x, n);
                   } else {
                     run_loop(n, f, [&](const F& g, std::size_t i) { o[i] = g(x[i]); });
                   }
                   return;
                 }
                 for (std::size_t i = 0; i < n; ++i, p[0] += s[0], p[1] += s[1]) *at<TO>(p[0]) = f(*at<TA>(p[1]));
               });
}

// out[i] = f(a[i], b[i])
template <class TO, class TA, class TB, class F>
void map2(const Plan<3>& plan, std::byte* out, const std::byte* a, const std::byte* b, F& f) {
  for_each_row(plan, {out, const_cast<std::byte*>(a), const_cast<std::byte*>(b)},
               [&](std::array<std::byte*, 3> p, std::size_t n, std::array<std::int64_t, 3> s) {
                 TO* o = at<TO>(p[0]);
                 const TA* x = at<TA>(p[1]);
                 const TB* y = at<TB>(p[2]);
                 if (s[0] == sizeof(TO)) {
                   if (s[1] == sizeof(TA) && s[2] == sizeof(TB)) {
                     if constexpr (requires { f.vv(o, x, y, n); }) {
                       f.vv(o, x, y, n);
                     } else {
                       run_loop(n, f, [&](const F& g, std::size_t i) { o[i] = g(x[i], y[i]); });
                     }
                     return;
                   }
                   if (s[1] == sizeof(TA) && s[2] == 0) {
                     const TB yv = *y;
                     if constexpr (requires { f.vs(o, x, yv, n); }) {
                       f.vs(o, x, yv, n);
                     } else {
                       run_loop(n, f, [&](const F& g, std::size_t i) { o[i] = g(x[i], yv); });
                     }
                     return;
                   }
                   if (s[1] == 0 && s[2] == sizeof(TB)) {
                     const TA xv = *x;
                     if constexpr (requires { f.sv(o, xv, y, n); }) {
                       f.sv(o, xv, y, n);
                     } else {
                       run_loop(n, f, [&](const F& g, std::size_t i) { o[i] = g(xv, y[i]); });
                     }
                     return;
                   }
                 }
                 for (std::size_t i = 0; i < n; ++i, p[0] += s[0], p[1] += s[1], p[2] += s[2])
                   *at<TO>(p[0]) = f(*at<TA>(p[1]), *at<TB>(p[2]));
               });
}

// out[i] = f(a[i], b[i], c[i])
template <class TO, class TA, class TB, class TC, class F>
void map3(const Plan<4>& plan, std::byte* out, const std::byte* a, const std::byte* b, const std::byte* c, F& f) {
  for_each_row(plan, {out, const_cast<std::byte*>(a), const_cast<std::byte*>(b), const_cast<std::byte*>(c)},
               [&](std::array<std::byte*, 4> p, std::size_t n, std::array<std::int64_t, 4> s) {
                 if (s[0] == sizeof(TO) && s[1] == sizeof(TA) && s[2] == sizeof(TB) && s[3] == sizeof(TC)) {
                   TO* o = at<TO>(p[0]);
                   const TA* x = at<TA>(p[1]);
                   const TB* y = at<TB>(p[2]);
                   const TC* z = at<TC>(p[3]);
                   run_loop(n, f, [&](const F& g, std::size_t i) { o[i] = g(x[i], y[i], z[i]); });
                   return;
                 }
                 for (std::size_t i = 0; i < n; ++i, p[0] += s[0], p[1] += s[1], p[2] += s[2], p[3] += s[3])
                   *at<TO>(p[0]) = f(*at<TA>(p[1]), *at<TB>(p[2]), *at<TC>(p[3]));
               });
}

// Halves <-> f32 for one block (convert_hwy: vector conversions).
template <class T>
inline void widen_block(const T* x, float* out, std::size_t m) {
  if constexpr (std::is_same_v<T, tensor::f16>) simd::f16_to_f32(reinterpret_cast<const std::uint16_t*>(x), out, m);
  else simd::bf16_to_f32(reinterpret_cast<const std::uint16_t*>(x), out, m);
}
template <class T>
inline void narrow_block(const float* x, T* out, std::size_t m) {
  if constexpr (std::is_same_v<T, tensor::f16>) simd::f32_to_f16(x, reinterpret_cast<std::uint16_t*>(out), m);
  else simd::f32_to_bf16(x, reinterpret_cast<std::uint16_t*>(out), m);
}

// Elementwise work on halves goes through f32 buffers of kHalfBlock elements (they stay
// in L1): f(begin, count) for consecutive blocks covering [0, n), on parallel_chunks of
// kHalfChunk elements from kHalfParallelElems up (as the f32 binary ops, binary_hwy.cpp).
constexpr std::size_t kHalfBlock = 512, kHalfChunk = std::size_t{1} << 16, kHalfParallelElems = std::size_t{1} << 20;
template <class F>
void half_blocks(std::size_t n, F&& f) {
  auto run = [&](std::size_t lo, std::size_t hi) {
    for (std::size_t i = lo; i < hi; i += kHalfBlock) f(i, std::min(kHalfBlock, hi - i));
  };
  if (n >= kHalfParallelElems) {
    auto chunk = [&](std::size_t c) { run(c * kHalfChunk, std::min(n, (c + 1) * kHalfChunk)); };
    parallel_chunks((n + kHalfChunk - 1) / kHalfChunk, chunk);
    return;
  }
  run(0, n);
}

// A contiguous run through the Highway unary kernels: f32/f64 directly, halves
// converted through f32 blocks (o may alias x).
template <class T>
void unary_simd(simd::UnOp op, T* o, const T* x, std::size_t n) {
  if constexpr (std::is_same_v<T, float>) {
    simd::unary_f32(op, x, o, n);
  } else if constexpr (std::is_same_v<T, double>) {
    simd::unary_f64(op, x, o, n);
  } else {
    half_blocks(n, [&](std::size_t i, std::size_t m) {
      float buf[kHalfBlock];
      widen_block(x + i, buf, m);
      simd::unary_f32(op, buf, buf, m);
      narrow_block(buf, o + i, m);
    });
  }
}

// Output shapes of broadcasting operands: dispatch's rule (shape_rules.hpp).
using core::broadcast_shape;

// Whether `t` may be written as the output of an op with this shape and element size.
inline bool reusable(const CpuTensor& t, const Shape& out, std::size_t elem_size) {
  return t.can_mut() && t.elem_size() == elem_size && t.shape() == out && t.is_dense_from_zero();
}

// out = f(a) in a's dtype and shape, written into `a` itself when it may be reused:
// the body every same-dtype unary entry shares. `per_dtype(tag, apply)` runs once
// with the element type as `tag` and calls apply(fn) to map fn over the tensor
// (or throws for a dtype the op does not take).
template <class F>
dispatch::Prim map_same_dtype(dispatch::Prim pa, F&& per_dtype) {
  CpuRef a = as_cpu(std::move(pa));
  const Shape shape = a->shape();
  CpuRef out = reusable(*a, shape, a->elem_size()) ? a : alloc_tensor(a->dtype(), shape);
  const auto plan = make_plan<2>(shape, {out->layout().strides.data(), a->layout().strides.data()},
                                 {out->elem_size(), a->elem_size()});
  dispatch::visit_dtype(a->dtype(), [&](auto tag) {
    using T = decltype(tag);
    per_dtype(tag, [&](auto fn) { map1<T, T>(plan, out->data(), a->data(), fn); });
  });
  return out;
}

}  // namespace tensor::cpu
