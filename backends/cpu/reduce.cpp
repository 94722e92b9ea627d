// Reductions on the CPU (all elements, or along one dim kept as size 1): sum, prod,
// mean, mean_dim, running scans (cumsum, cumprod, cummin, cummax), extrema (max, min,
// max_abs, their _dim and _with_indices forms, argmax/argmin) and any/all. Sums
// accumulate in double (floats) or uint64 (ints, wrapping, truncated back).
#include <algorithm>
#include <cmath>
#include <optional>
#include <vector>

#include "backends/cpu/cpu_ops.hpp"
#include "backends/cpu/elementwise.hpp"
#include "backends/cpu/parallel.hpp"
#include "backends/cpu/reduce_hwy.hpp"
#include "backends/cpu/reduce_plan.hpp"
#include "lib/core/shape_rules.hpp"

namespace tensor::cpu {
namespace {

using dispatch::Prim;
using namespace reduce_plan;

enum class RedOp { Sum, Prod, Mean };

template <class T>
using acc_t = std::conditional_t<dispatch::kIsFloatLike<T>, double, std::uint64_t>;

template <class T> inline acc_t<T> widen(T v) {
  if constexpr (dispatch::kIsFloatLike<T>) return static_cast<double>(dispatch::load_elem(v));
  else if constexpr (std::is_signed_v<T>) return static_cast<std::uint64_t>(static_cast<std::int64_t>(v));
  else return static_cast<std::uint64_t>(v);
}

__extension__ typedef __int128 I128;

// Accumulator of op kOp on T: int means sum exactly in 128 bits (a wrapping 64-bit sum
// of int64 values would be wrong long before the mean leaves the range).
template <class T, RedOp kOp>
using dim_acc_t = std::conditional_t<kOp == RedOp::Mean && !dispatch::kIsFloatLike<T>, I128, acc_t<T>>;

template <class T, bool kProd, class A = acc_t<T>> inline A combine(A acc, T v) {
  if constexpr (std::is_same_v<A, I128>) return acc + static_cast<I128>(v);
  else if constexpr (kProd) return acc * widen(v);
  else return acc + widen(v);
}

// Reduces n elements `stride` bytes apart; contiguous rows use four accumulators.
template <class T, bool kProd, class A = acc_t<T>>
A reduce_row(const std::byte* p, std::size_t n, std::int64_t stride) {
  const A init = kProd ? A(1) : A(0);
  if (stride == static_cast<std::int64_t>(sizeof(T))) {
    const T* x = at<T>(p);
    A r[4] = {init, init, init, init};
    std::size_t i = 0;
    for (; i + 4 <= n; i += 4) {
      for (int j = 0; j < 4; ++j) r[j] = combine<T, kProd, A>(r[j], x[i + j]);
    }
    for (; i < n; ++i) r[0] = combine<T, kProd, A>(r[0], x[i]);
    return kProd ? (r[0] * r[1]) * (r[2] * r[3]) : (r[0] + r[1]) + (r[2] + r[3]);
  }
  A r = init;
  for (std::size_t i = 0; i < n; ++i, p += stride) r = combine<T, kProd, A>(r, *at<T>(p));
  return r;
}

// The final value of an accumulator over n elements.
template <class T>
T finish(acc_t<T> acc, RedOp op, std::size_t n) {
  if constexpr (dispatch::kIsFloatLike<T>) {
    if (op == RedOp::Mean) acc /= static_cast<double>(n);  // n == 0: NaN
    return dispatch::convert_value<T>(acc);
  } else {
    if (op == RedOp::Mean) {
      if (n == 0) return T{0};
      if constexpr (std::is_signed_v<T>) {
        return static_cast<T>(static_cast<std::int64_t>(acc) / static_cast<std::int64_t>(n));
      } else {
        return static_cast<T>(acc / n);
      }
    }
    return static_cast<T>(acc);  // wrapping truncation
  }
}
// An int mean from its exact sum: truncated toward zero, within T's range.
template <class T>
T finish(I128 sum, RedOp, std::size_t n) {
  return n == 0 ? T{0} : static_cast<T>(sum / static_cast<I128>(n));
}

template <class F>
void visit_numeric(DType dtype, const char* op, F&& f) {
  dispatch::visit_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (dispatch::kIsFloatLike<T> || (std::is_integral_v<T> && !std::is_same_v<T, bool>)) {
      f(tag);
    } else {
      throw DTypeError(std::string("[") + op + "] expected a float or int dtype; got " + std::string(dtype_name(dtype)));
    }
  });
}

// Halves are reduced through f32 (exact widening) with the f32 kernels: a sum in f32
// blocks, partial sums of fixed chunks combined in order (the same on any thread count),
// and for dim reductions a widened copy (convert_tensor). One element at a time through tensor::f16 /
// bf16 they ran at a tenth of the f32 speed.
template <class T>
double half_sum(const T* x, std::size_t n) {
  const std::size_t chunks = (n + kHalfChunk - 1) / kHalfChunk;
  std::vector<double> part(chunks);
  auto chunk = [&](std::size_t c) {
    double sum = 0;
    float buf[kHalfBlock];
    for (std::size_t i = c * kHalfChunk; i < std::min(n, (c + 1) * kHalfChunk); i += kHalfBlock) {
      const std::size_t m = std::min(kHalfBlock, n - i);
      widen_block(x + i, buf, m);
      sum += simd::sum_f32(buf, m);
    }
    part[c] = sum;
  };
  run_chunks(n >= kHalfParallelElems, chunks, chunk);
  double sum = 0;
  for (double v : part) sum += v;
  return sum;
}

template <RedOp kOp>
Prim reduce_all_entry(Prim p) {
  constexpr bool kProd = kOp == RedOp::Prod;
  const CpuRef a = as_cpu(std::move(p));
  CpuRef out = alloc_tensor(a->dtype(), Shape{1});
  visit_numeric(a->dtype(), "sum", [&](auto tag) {
    using T = decltype(tag);
    using A = acc_t<T>;
    A acc = kProd ? A(1) : A(0);
    const std::size_t count = a->shape().num_elements();
    // Any permutation / flip of a dense buffer: the order does not matter, read it straight.
    if (const std::byte* block = count ? dense_block(*a) : nullptr) {
      if constexpr (!kProd && std::is_same_v<T, float>) acc = simd::sum_f32(at<float>(block), count);
      else if constexpr (!kProd && std::is_same_v<T, double>) acc = simd::sum_f64(at<double>(block), count);
      else if constexpr (!kProd && dispatch::kIsHalf<T>) acc = half_sum(at<T>(block), count);
      else acc = reduce_row<T, kProd>(block, count, sizeof(T));
      *at<T>(out->data()) = finish<T>(acc, kOp, count);
      return;
    }
    const auto plan = make_plan<1>(a->shape(), {a->layout().strides.data()}, {sizeof(T)});
    for_each_row(plan, {a->data()}, [&](std::array<std::byte*, 1> ptr, std::size_t n, std::array<std::int64_t, 1> s) {
      const A r = reduce_row<T, kProd>(ptr[0], n, s[0]);
      acc = kProd ? acc * r : acc + r;
    });
    *at<T>(out->data()) = finish<T>(acc, kOp, count);
  });
  return out;
}

// Along `dim`: when the dim is memory-contiguous, each output reduces its own row;
// otherwise whole slices are accumulated one index of `dim` at a time, so the
// inner loop runs along the contiguous dims.
// A row-major f32/f64 tensor viewed as [outer, n, inner], reduced along n into the
// double accumulators acc (initialised): the last dim row by row (Highway sum, lanes
// over threads), any other dim by accumulating whole rows of the inner lanes (vectors
// across the kept dims), in column blocks and row groups over threads. Each accumulator sees its
// terms in the same order whatever the thread count.
template <class T>
void dense_dim_reduce(const T* x, const Shape& shape, std::size_t dim, double* acc, bool prod) {
  const Around ar = around(shape, dim);
  const std::size_t outer = ar.outer, n = ar.n, inner = ar.inner;
  const bool threads = outer * n * inner >= kParallelDimElems;
  if (inner == 1) {
    // Groups of consecutive lanes (stream_chunk elements: long runs of memory per thread).
    const std::size_t per = std::max<std::size_t>(1, stream_chunk(outer * n) / std::max<std::size_t>(n, 1));
    auto group = [&](std::size_t g) {
      for (std::size_t o = g * per; o < std::min(outer, (g + 1) * per); ++o) {
        const T* r = x + o * n;
        if (prod) {
          acc[o] = reduce_row<T, true>(reinterpret_cast<const std::byte*>(r), n, sizeof(T));
        } else if constexpr (std::is_same_v<T, float>) {
          acc[o] = simd::sum_f32(r, n);
        } else {
          acc[o] = simd::sum_f64(r, n);
        }
      }
    };
    run_chunks(threads, (outer + per - 1) / per, group);
    return;
  }
  const OuterChunks ch(outer, n, inner);
  std::vector<double> partial(ch.groups > 1 ? outer * ch.groups * inner : 0);
  auto block = [&](std::size_t t) {
    const OuterChunks::Chunk c = ch[t];
    double* a = ch.groups > 1 ? partial.data() + ch.partial(c) : acc + c.ob * inner + c.ib;
    if (ch.groups > 1) std::fill(a, a + c.m, prod ? 1.0 : 0.0);
    const T* base = x + (c.ob * n + c.k0) * inner + c.ib;
    if constexpr (std::is_same_v<T, float>) simd::acc_rows_strided_f32(a, base, c.k1 - c.k0, inner, c.m, prod);
    else simd::acc_rows_strided_f64(a, base, c.k1 - c.k0, inner, c.m, prod);
  };
  run_chunks(threads, ch.count(), block);
  for (std::size_t ob = 0; ob < outer && ch.groups > 1; ++ob)
    for (std::size_t grp = 0; grp < ch.groups; ++grp)
      simd::acc_rows_f64(acc + ob * inner, partial.data() + (ob * ch.groups + grp) * inner, inner, prod);
}

template <RedOp kOp>
Prim reduce_dim_entry(Prim p, std::size_t dim) {
  constexpr bool kProd = kOp == RedOp::Prod;
  const CpuRef a = as_cpu(std::move(p));
  const Shape out_shape = core::reduce_dim_shape(a->shape(), dim);
  const std::size_t n = a->shape()[dim];
  CpuRef out = alloc_tensor(a->dtype(), out_shape);
  const std::size_t count = out_shape.num_elements();
  if (count == 0) return out;  // nothing to write (the reduced dim may still be huge: do not walk it)
  visit_numeric(a->dtype(), "sum_dim", [&](auto tag) {
    using T = decltype(tag);
    using A = dim_acc_t<T, kOp>;
    // The accumulators: up to 1 MiB in a per-thread scratch kept between calls (a loop or a
    // replayed graph reducing the same shapes calls malloc once), larger ones their own.
    constexpr std::size_t kKeep = (std::size_t{1} << 20) / sizeof(A);
    thread_local std::vector<A> kept;
    std::vector<A> own;
    std::vector<A>& acc = count <= kKeep ? kept : own;
    acc.assign(count, kProd ? A(1) : A(0));
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      if (const auto v = n > 0 ? dense_view(*a, dim) : std::nullopt) {
        dense_dim_reduce<T>(at<T>(v->base), v->shape, v->dim, acc.data(), kProd);
        T* o = at<T>(out->data());
        for (std::size_t i = 0; i < count; ++i) o[i] = finish<T>(acc[i], kOp, n);
        return;
      }
    } else if constexpr (dispatch::kIsHalf<T>) {
      if (n > 0 && a->is_contiguous()) {
        const CpuRef f = convert_tensor(a, DType::F32);
        dense_dim_reduce<float>(at<float>(f->data()), f->shape(), dim, acc.data(), kProd);
        T* o = at<T>(out->data());
        for (std::size_t i = 0; i < count; ++i) o[i] = finish<T>(acc[i], kOp, n);
        return;
      }
    }
    const Layout acc_layout = contiguous_layout(out_shape);
    const auto plan = make_plan<2>(out_shape, {acc_layout.strides.data(), a->layout().strides.data()},
                                   {sizeof(A), sizeof(T)});
    auto* acc_base = reinterpret_cast<std::byte*>(acc.data());
    const std::int64_t dstride = a->stride(dim) * static_cast<std::int64_t>(sizeof(T));
    if (n > 0 && (a->stride(dim) == 1 || a->stride(dim) == -1 || count == 1)) {
      for_each_row(plan, {acc_base, a->data()},
                   [&](std::array<std::byte*, 2> ptr, std::size_t m, std::array<std::int64_t, 2> s) {
                     for (std::size_t i = 0; i < m; ++i, ptr[0] += s[0], ptr[1] += s[1])
                       *at<A>(ptr[0]) = reduce_row<T, kProd, A>(ptr[1], n, dstride);
                   });
    } else {
      for (std::size_t k = 0; k < n; ++k) {
        std::byte* base = a->data() + static_cast<std::int64_t>(k) * dstride;
        for_each_row(plan, {acc_base, base},
                     [&](std::array<std::byte*, 2> ptr, std::size_t m, std::array<std::int64_t, 2> s) {
                       for (std::size_t i = 0; i < m; ++i, ptr[0] += s[0], ptr[1] += s[1])
                         *at<A>(ptr[0]) = combine<T, kProd, A>(*at<A>(ptr[0]), *at<T>(ptr[1]));
                     });
      }
    }
    T* o = at<T>(out->data());
    for (std::size_t i = 0; i < count; ++i) o[i] = finish<T>(acc[i], kOp, n);
  });
  return out;
}

// ---- scans: running sum / product / min / max along a dim (NaN propagates) ---------
enum class ScanOp { Sum, Prod, Min, Max };

template <class T, ScanOp kOp>
void scan_line(std::byte* o, const std::byte* x, std::size_t n, std::int64_t os, std::int64_t xs) {
  if constexpr (kOp == ScanOp::Sum || kOp == ScanOp::Prod) {
    constexpr bool kProd = kOp == ScanOp::Prod;
    acc_t<T> acc = kProd ? acc_t<T>(1) : acc_t<T>(0);
    for (std::size_t j = 0; j < n; ++j, o += os, x += xs) {
      acc = combine<T, kProd>(acc, *at<T>(x));
      *at<T>(o) = finish<T>(acc, RedOp::Sum, 0);
    }
  } else {
    if (n == 0) return;
    calc_t<T> acc = ld(*at<T>(x));
    for (std::size_t j = 0; j < n; ++j, o += os, x += xs) {
      const calc_t<T> v = ld(*at<T>(x));
      bool take = kOp == ScanOp::Max ? v > acc : v < acc;
      if constexpr (dispatch::kIsFloatLike<T>) take = !std::isnan(acc) && (take || std::isnan(v));
      if (take) acc = v;
      *at<T>(o) = st<T>(acc);
    }
  }
}

template <ScanOp kOp>
Prim scan_entry(Prim p, std::size_t dim) {
  const CpuRef a = as_cpu(std::move(p));
  const Shape& shape = a->shape();
  CpuRef out = alloc_tensor(a->dtype(), shape);
  Shape lines = shape;
  const std::size_t n = shape[dim];
  if (shape.num_elements() == 0) return out;
  lines[dim] = 1;
  visit_numeric(a->dtype(), "cumsum", [&](auto tag) {
    using T = decltype(tag);
    const auto e = static_cast<std::int64_t>(sizeof(T));
    const auto plan = make_plan<2>(lines, {out->layout().strides.data(), a->layout().strides.data()},
                                   {sizeof(T), sizeof(T)});
    const std::int64_t os = out->stride(dim) * e, xs = a->stride(dim) * e;
    for_each_row(plan, {out->data(), a->data()},
                 [&](std::array<std::byte*, 2> ptr, std::size_t m, std::array<std::int64_t, 2> s) {
                   for (std::size_t i = 0; i < m; ++i, ptr[0] += s[0], ptr[1] += s[1])
                     scan_line<T, kOp>(ptr[0], ptr[1], n, os, xs);
                 });
  });
  return out;
}

// ---- lanes: every element visited as (lane, j), j ascending within a lane ---------

// Calls f(lane, j, ptr) for every element of `a` (rank >= 1), where lane is the
// row-major position of the element with `dim` dropped. Lanes are walked one at a
// time when `dim` is memory-contiguous, else slice by slice (j outer), so the
// inner loop always runs along contiguous memory.
template <class F>
void walk_lanes(const CpuTensor& a, std::size_t dim, F&& f) {
  const Shape& shape = a.shape();
  if (shape.num_elements() == 0) return;
  const std::size_t n = shape[dim];
  Shape lines = shape;
  lines[dim] = 1;
  const std::size_t e = a.elem_size();
  const auto plan = make_plan<1>(lines, {a.layout().strides.data()}, {e});
  const std::int64_t xs = a.stride(dim) * static_cast<std::int64_t>(e);
  if (a.stride(dim) == 1 || a.stride(dim) == -1 || lines.num_elements() == 1) {
    std::size_t lane = 0;
    for_each_row(plan, {a.data()}, [&](std::array<std::byte*, 1> p, std::size_t m, std::array<std::int64_t, 1> s) {
      for (std::size_t r = 0; r < m; ++r, p[0] += s[0], ++lane) {
        const std::byte* x = p[0];
        for (std::size_t j = 0; j < n; ++j, x += xs) f(lane, j, x);
      }
    });
    return;
  }
  for (std::size_t j = 0; j < n; ++j) {
    std::size_t lane = 0;
    for_each_row(plan, {a.data() + static_cast<std::int64_t>(j) * xs},
                 [&](std::array<std::byte*, 1> p, std::size_t m, std::array<std::int64_t, 1> s) {
                   for (std::size_t r = 0; r < m; ++r, p[0] += s[0], ++lane) f(lane, j, p[0]);
                 });
  }
}

// ---- extrema: max / min / max_abs, with or without the index -----------------------
// Ties keep the lowest index; a NaN wins over every number and the first NaN stays.
enum class Ext { Max, Min, MaxAbs };

template <Ext kE, class T>
inline calc_t<T> ext_key(T v) {
  const calc_t<T> x = ld(v);
  if constexpr (kE != Ext::MaxAbs) {
    return x;
  } else if constexpr (std::is_integral_v<calc_t<T>>) {
    if constexpr (std::is_signed_v<calc_t<T>>) {  // abs wraps at the minimum, like the abs op
      using U = wide_unsigned_t<calc_t<T>>;
      return x < 0 ? static_cast<calc_t<T>>(U{0} - static_cast<U>(x)) : x;
    } else {
      return x;
    }
  } else {
    return std::fabs(x);
  }
}

template <Ext kE, class C>
inline bool better(C v, C best) {
  bool take = kE == Ext::Min ? v < best : v > best;
  if constexpr (std::is_floating_point_v<C>) take = !std::isnan(best) && (take || std::isnan(v));
  return take;
}

// Max / min / max_abs (with index) of f32/f64 lanes through Highway: lanes contiguous
// in memory (stride 1) one at a time, or a row-major tensor along an outer dim in
// OuterChunks, vectors across the kept inner lanes; row groups' partial extrema are
// combined in group order (a later group wins only when strictly better, so ties keep
// the lowest index and the first NaN stays, as in one pass). False when the layout or
// dtype has no fast path.
template <Ext kE, class T, class C>
bool dense_extremum(const CpuTensor& a, std::size_t a_dim, std::vector<C>& best, std::vector<std::int64_t>& where) {
  if constexpr (!(std::is_same_v<T, float> || std::is_same_v<T, double>)) {
    return false;
  } else {
    const std::size_t n = a.shape()[a_dim];
    if (n == 0 || n >= (std::size_t{1} << 31)) return false;
    const auto v = dense_view(a, a_dim);
    if (!v) return false;
    const Shape& shape = v->shape;
    const std::size_t dim = v->dim;
    constexpr int kKind = kE == Ext::Min ? simd::kExtMin : kE == Ext::MaxAbs ? simd::kExtMaxAbs : simd::kExtMax;
    const Around ar = around(shape, dim);
    const std::size_t outer = ar.outer, inner = ar.inner;
    const T* x = at<T>(v->base);
    const bool threads = outer * n * inner >= kParallelDimElems;
    if (inner == 1) {
      const std::size_t per = std::max<std::size_t>(1, stream_chunk(outer * n) / n);
      auto group = [&](std::size_t g) {
        for (std::size_t o = g * per; o < std::min(outer, (g + 1) * per); ++o) {
          const T* r = x + o * n;
          std::size_t k;
          if constexpr (std::is_same_v<T, float>) k = simd::argext_f32(r, n, kKind);
          else k = simd::argext_f64(r, n, kKind);
          best[o] = kE == Ext::MaxAbs ? std::fabs(r[k]) : r[k];
          where[o] = static_cast<std::int64_t>(k);
        }
      };
      run_chunks(threads, (outer + per - 1) / per, group);
      return true;
    }
    const OuterChunks ch(outer, n, inner);
    const bool parts = ch.groups > 1;
    std::vector<T> pbest(parts ? outer * ch.groups * inner : 0);
    std::vector<std::int64_t> pwhere(pbest.size());
    auto block = [&](std::size_t t) {
      const OuterChunks::Chunk c = ch[t];
      const std::size_t off = parts ? ch.partial(c) : c.ob * inner + c.ib;
      T* b = parts ? pbest.data() + off : best.data() + off;
      std::int64_t* w = parts ? pwhere.data() + off : where.data() + off;
      const T* base = x + (c.ob * n + c.k0) * inner + c.ib;
      if constexpr (std::is_same_v<T, float>) simd::argext_cols_f32(base, c.k1 - c.k0, inner, c.m, kKind, b, w);
      else simd::argext_cols_f64(base, c.k1 - c.k0, inner, c.m, kKind, b, w);
      for (std::size_t i = 0; parts && i < c.m; ++i) w[i] += static_cast<std::int64_t>(c.k0);
    };
    run_chunks(threads, ch.count(), block);
    for (std::size_t ob = 0; ob < outer && parts; ++ob) {
      const std::size_t first = ob * ch.groups * inner;
      std::copy_n(pbest.data() + first, inner, best.data() + ob * inner);
      std::copy_n(pwhere.data() + first, inner, where.data() + ob * inner);
      for (std::size_t grp = 1; grp < ch.groups; ++grp)
        for (std::size_t i = 0; i < inner; ++i) {
          const std::size_t src = first + grp * inner + i, dst = ob * inner + i;
          if (better<kE == Ext::Min ? Ext::Min : Ext::Max>(static_cast<C>(pbest[src]), best[dst])) {
            best[dst] = pbest[src];
            where[dst] = pwhere[src];
          }
        }
    }
    return true;
  }
}

// Extremum of every lane along `dim` into `vals` (the key: |a| for MaxAbs) and/or
// `idxs` (lane position), both contiguous of the kept-dim shape.
template <Ext kE>
void extremum_lanes(const CpuRef& ref, std::size_t dim, CpuTensor* vals, CpuTensor* idxs, const char* op) {
  const CpuTensor& a = *ref;
  Shape lines = a.shape();
  lines[dim] = 1;
  const std::size_t count = lines.num_elements();
  visit_numeric(a.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    using C = calc_t<T>;
    std::vector<C> best(count);
    std::vector<std::int64_t> where(count, 0);
    bool dense = false;
    if constexpr (dispatch::kIsHalf<T>) {
      if (a.is_contiguous() && a.shape()[dim] > 0) dense = dense_extremum<kE, float>(*convert_tensor(ref, DType::F32), dim, best, where);
    } else {
      dense = dense_extremum<kE, T>(a, dim, best, where);
    }
    if (!dense) {
      walk_lanes(a, dim, [&](std::size_t lane, std::size_t j, const std::byte* p) {
        const C v = ext_key<kE>(*at<T>(p));
        if (j == 0 || better<kE>(v, best[lane])) {
          best[lane] = v;
          where[lane] = static_cast<std::int64_t>(j);
        }
      });
    }
    if (vals) {
      T* o = at<T>(vals->data());
      for (std::size_t i = 0; i < count; ++i) o[i] = st<T>(best[i]);
    }
    if (idxs) {
      visit_numeric(idxs->dtype(), op, [&](auto otag) {
        using O = decltype(otag);
        O* o = at<O>(idxs->data());
        for (std::size_t i = 0; i < count; ++i) o[i] = dispatch::convert_value<O>(where[i]);
      });
    }
  });
}

Shape kept(const Shape& s, std::size_t dim) { return core::reduce_dim_shape(s, dim); }

template <Ext kE>
Prim ext_dim_entry(Prim p, std::size_t dim) {
  const CpuRef a = as_cpu(std::move(p));
  CpuRef v = alloc_tensor(a->dtype(), kept(a->shape(), dim));
  extremum_lanes<kE>(a, dim, v.get(), nullptr, "max_dim");
  return v;
}

template <Ext kE>
dispatch::PrimPair ext_dim_with_indices_entry(Prim p, std::size_t dim, DType out) {
  const CpuRef a = as_cpu(std::move(p));
  CpuRef v = alloc_tensor(a->dtype(), kept(a->shape(), dim));
  CpuRef i = alloc_tensor(out, kept(a->shape(), dim));
  extremum_lanes<kE>(a, dim, v.get(), i.get(), "max_dim_with_indices");
  return {std::move(v), std::move(i)};
}

template <Ext kE>
Prim arg_entry(Prim p, std::size_t dim, DType out) {
  const CpuRef a = as_cpu(std::move(p));
  CpuRef i = alloc_tensor(out, kept(a->shape(), dim));
  extremum_lanes<kE>(a, dim, nullptr, i.get(), kE == Ext::Max ? "argmax" : "argmin");
  return i;
}

// Whole tensor: rows of the collapsed plan in row-major order, one running value.
template <Ext kE>
Prim ext_all_entry(Prim p) {
  const CpuRef a = as_cpu(std::move(p));
  CpuRef out = alloc_tensor(a->dtype(), Shape{1});
  visit_numeric(a->dtype(), "max", [&](auto tag) {
    using T = decltype(tag);
    using C = calc_t<T>;
    // f32/f64 max/min over a dense buffer (any dim order): Highway, NaN-propagating.
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      if (const std::byte* block = dense_block(*a)) {
        const std::size_t n = a->shape().num_elements();
        const T* x = at<T>(block);
        if constexpr (std::is_same_v<T, float>) {
          *at<T>(out->data()) = kE == Ext::Max ? simd::max_f32(x, n) : kE == Ext::Min ? simd::min_f32(x, n) : simd::max_abs_f32(x, n);
        } else {
          *at<T>(out->data()) = kE == Ext::Max ? simd::max_f64(x, n) : kE == Ext::Min ? simd::min_f64(x, n) : simd::max_abs_f64(x, n);
        }
        return;
      }
    }
    C best = ext_key<kE>(*at<T>(a->data()));
    const auto plan = make_plan<1>(a->shape(), {a->layout().strides.data()}, {sizeof(T)});
    for_each_row(plan, {a->data()}, [&](std::array<std::byte*, 1> ptr, std::size_t n, std::array<std::int64_t, 1> s) {
      if constexpr (std::is_floating_point_v<C>) {
        if (std::isnan(best)) return;
      }
      const std::byte* x = ptr[0];
      for (std::size_t i = 0; i < n; ++i, x += s[0]) {
        const C v = ext_key<kE>(*at<T>(x));
        if (better<kE>(v, best)) best = v;
      }
    });
    *at<T>(out->data()) = st<T>(best);
  });
  return out;
}

// ---- any / all: nonzero test on every dtype (NaN is nonzero); empty: any false, all true
template <class T>
inline bool nonzero(T v) {
  if constexpr (std::is_same_v<T, BoolU32>) return v.v != 0;
  else if constexpr (std::is_same_v<T, bool>) return v;
  else return ld(v) != calc_t<T>(0);
}

template <class TO>
void store_bools(CpuTensor& out, const std::vector<std::uint8_t>& flags) {
  TO* o = at<TO>(out.data());
  for (std::size_t i = 0; i < flags.size(); ++i) o[i] = static_cast<TO>(flags[i]);
}
void write_bools(CpuTensor& out, const std::vector<std::uint8_t>& flags) {
  if (out.elem_size() == 4) store_bools<std::uint32_t>(out, flags);
  else store_bools<std::uint8_t>(out, flags);
}

template <bool kAll>
Prim any_all_entry(Prim p, DType out_dtype) {
  const CpuRef a = as_cpu(std::move(p));
  CpuRef out = alloc_tensor(out_dtype, Shape{1});
  bool acc = kAll;
  dispatch::visit_dtype(a->dtype(), [&](auto tag) {
    using T = decltype(tag);
    const auto plan = make_plan<1>(a->shape(), {a->layout().strides.data()}, {sizeof(T)});
    for_each_row(plan, {a->data()}, [&](std::array<std::byte*, 1> ptr, std::size_t n, std::array<std::int64_t, 1> s) {
      if (acc != kAll) return;  // decided
      const std::byte* x = ptr[0];
      for (std::size_t i = 0; i < n; ++i, x += s[0])
        if (nonzero(*at<T>(x)) != kAll) {
          acc = !kAll;
          return;
        }
    });
  });
  write_bools(*out, std::vector<std::uint8_t>{static_cast<std::uint8_t>(acc)});
  return out;
}

// any/all along `dim` of a row-major tensor viewed as [outer, n, inner]: a lane along the
// contiguous last dim is tested in blocks of branch-free (vectorizable) flag loops, up to
// the first block that decides it; an outer dim ORs (ANDs) whole rows of flags, vectors
// across the kept lanes. Lane groups or column blocks on threads (a per-element walk
// with a branch per element is far slower).
template <bool kAll, class T>
void dense_any_all(const T* x, const Shape& shape, std::size_t dim, std::uint8_t* flags) {
  const Around ar = around(shape, dim);
  const std::size_t outer = ar.outer, n = ar.n, inner = ar.inner;
  const bool threads = outer * n * inner >= kParallelDimElems;
  if (inner == 1) {
    constexpr std::size_t kBlock = 256;
    const std::size_t per = std::max<std::size_t>(1, stream_chunk(outer * n) / std::max<std::size_t>(n, 1));
    auto group = [&](std::size_t g) {
      for (std::size_t o = g * per; o < std::min(outer, (g + 1) * per); ++o) {
        const T* r = x + o * n;
        unsigned decided = 0;  // any: a nonzero seen; all: a zero seen
        for (std::size_t k = 0; k < n && !decided; k += kBlock) {
          const std::size_t m = std::min(kBlock, n - k);
#if TENSOR_HAVE_OPENMP
#pragma omp simd reduction(| : decided)
#endif
          for (std::size_t i = 0; i < m; ++i) decided |= static_cast<unsigned>(nonzero(r[k + i]) != kAll);
        }
        flags[o] = static_cast<std::uint8_t>(decided ? !kAll : kAll);
      }
    };
    run_chunks(threads, (outer + per - 1) / per, group);
    return;
  }
  constexpr std::size_t kCols = 4096;
  const std::size_t per = (inner + kCols - 1) / kCols;
  auto block = [&](std::size_t t) {
    const std::size_t ob = t / per, ib = (t % per) * kCols, m = std::min(kCols, inner - ib);
    std::uint8_t* __restrict__ f = flags + ob * inner + ib;
    for (std::size_t k = 0; k < n; ++k) {
      const T* __restrict__ r = x + (ob * n + k) * inner + ib;
#if TENSOR_HAVE_OPENMP
#pragma omp simd
#endif
      for (std::size_t i = 0; i < m; ++i) {
        const auto nz = static_cast<std::uint8_t>(nonzero(r[i]));
        if constexpr (kAll) f[i] &= nz;
        else f[i] |= nz;
      }
    }
  };
  run_chunks(threads, outer * per, block);
}

template <bool kAll>
Prim any_all_dim_entry(Prim p, std::size_t dim, DType out_dtype) {
  const CpuRef a = as_cpu(std::move(p));
  const Shape out_shape = kept(a->shape(), dim);
  CpuRef out = alloc_tensor(out_dtype, out_shape);
  if (out_shape.num_elements() == 0) return out;
  std::vector<std::uint8_t> flags(out_shape.num_elements(), kAll ? 1 : 0);
  dispatch::visit_dtype(a->dtype(), [&](auto tag) {
    using T = decltype(tag);
    if (const auto v = dense_view(*a, dim)) {
      dense_any_all<kAll>(at<T>(v->base), v->shape, v->dim, flags.data());
      return;
    }
    walk_lanes(*a, dim, [&](std::size_t lane, std::size_t, const std::byte* x) {
      if (nonzero(*at<T>(x)) != kAll) flags[lane] = kAll ? 0 : 1;
    });
  });
  write_bools(*out, flags);
  return out;
}

// ---- mean of every element: exact wide sums (128-bit ints; double for floats,
// compensated for f64), then one division (ints truncate toward zero) ---------------
Prim mean_entry(Prim p) {
  const CpuRef a = as_cpu(std::move(p));
  CpuRef out = alloc_tensor(a->dtype(), Shape{1});
  const std::size_t count = a->shape().num_elements();
  visit_numeric(a->dtype(), "mean", [&](auto tag) {
    using T = decltype(tag);
    const auto plan = make_plan<1>(a->shape(), {a->layout().strides.data()}, {sizeof(T)});
    if constexpr (dispatch::kIsFloatLike<T> && !std::is_same_v<T, double>) {
      // f32 and narrower: a double sum of them is exact up to 2^29 same-magnitude terms.
      double sum = 0;
      if constexpr (std::is_same_v<T, float>) {
        if (const std::byte* block = count ? dense_block(*a) : nullptr) {
          *at<T>(out->data()) = dispatch::convert_value<T>(simd::sum_f32(at<float>(block), count) / static_cast<double>(count));
          return;
        }
      }
      for_each_row(plan, {a->data()}, [&](std::array<std::byte*, 1> ptr, std::size_t n, std::array<std::int64_t, 1> s) {
        sum += static_cast<double>(reduce_row<T, false>(ptr[0], n, s[0]));
      });
      *at<T>(out->data()) = dispatch::convert_value<T>(sum / static_cast<double>(count));
    } else if constexpr (dispatch::kIsFloatLike<T>) {
      double sum = 0, comp = 0;  // Neumaier: comp collects the low-order bits sum drops
      for_each_row(plan, {a->data()}, [&](std::array<std::byte*, 1> ptr, std::size_t n, std::array<std::int64_t, 1> s) {
        const std::byte* x = ptr[0];
        for (std::size_t i = 0; i < n; ++i, x += s[0]) {
          const double v = static_cast<double>(ld(*at<T>(x)));
          const double t = sum + v;
          comp += std::fabs(sum) >= std::fabs(v) ? (sum - t) + v : (v - t) + sum;
          sum = t;
        }
      });
      const double total = std::isfinite(sum) ? sum + comp : sum;  // inf/NaN: comp is NaN
      *at<T>(out->data()) = dispatch::convert_value<T>(total / static_cast<double>(count));
    } else {
      I128 sum = 0;
      for_each_row(plan, {a->data()}, [&](std::array<std::byte*, 1> ptr, std::size_t n, std::array<std::int64_t, 1> s) {
        const std::byte* x = ptr[0];
        for (std::size_t i = 0; i < n; ++i, x += s[0]) sum += static_cast<I128>(*at<T>(x));
      });
      // count > 0: dispatch rejects the int mean of nothing. The mean lies within T's range.
      *at<T>(out->data()) = static_cast<T>(sum / static_cast<I128>(count));
    }
  });
  return out;
}

}  // namespace

void register_reduce_ops(dispatch::Backend& b) {
  b.set<OpCode::sum>(&reduce_all_entry<RedOp::Sum>);
  b.set<OpCode::prod>(&reduce_all_entry<RedOp::Prod>);
  b.set<OpCode::sum_dim>(&reduce_dim_entry<RedOp::Sum>);
  b.set<OpCode::prod_dim>(&reduce_dim_entry<RedOp::Prod>);
  b.set<OpCode::mean_dim>(&reduce_dim_entry<RedOp::Mean>);
  b.set<OpCode::mean>(&mean_entry);
  b.set<OpCode::argmax>(&arg_entry<Ext::Max>);
  b.set<OpCode::argmin>(&arg_entry<Ext::Min>);
  b.set<OpCode::max>(&ext_all_entry<Ext::Max>);
  b.set<OpCode::min>(&ext_all_entry<Ext::Min>);
  b.set<OpCode::max_abs>(&ext_all_entry<Ext::MaxAbs>);
  b.set<OpCode::max_dim>(&ext_dim_entry<Ext::Max>);
  b.set<OpCode::min_dim>(&ext_dim_entry<Ext::Min>);
  b.set<OpCode::max_abs_dim>(&ext_dim_entry<Ext::MaxAbs>);
  b.set<OpCode::max_dim_with_indices>(&ext_dim_with_indices_entry<Ext::Max>);
  b.set<OpCode::min_dim_with_indices>(&ext_dim_with_indices_entry<Ext::Min>);
  b.set<OpCode::any>(&any_all_entry<false>);
  b.set<OpCode::all>(&any_all_entry<true>);
  b.set<OpCode::any_dim>(&any_all_dim_entry<false>);
  b.set<OpCode::all_dim>(&any_all_dim_entry<true>);
  b.set<OpCode::cumsum>(&scan_entry<ScanOp::Sum>);
  b.set<OpCode::cumprod>(&scan_entry<ScanOp::Prod>);
  b.set<OpCode::cummin>(&scan_entry<ScanOp::Min>);
  b.set<OpCode::cummax>(&scan_entry<ScanOp::Max>);
}

}  // namespace tensor::cpu
