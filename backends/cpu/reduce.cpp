// Sum/product reductions on the CPU (all elements, or along one dim kept as size 1),
// mean_dim, running scans (cumsum, cumprod, cummin, cummax) and argmax/argmin. Floats accumulate
// in double; ints in uint64 (wrapping, truncated back).
#include <cmath>
#include <vector>

#include "backends/cpu/cpu_ops.hpp"
#include "backends/cpu/elementwise.hpp"

namespace tensor::cpu {
namespace {

using dispatch::Prim;

enum class RedOp { Sum, Prod, Mean };

template <class T>
using acc_t = std::conditional_t<dispatch::kIsFloatLike<T>, double, std::uint64_t>;

template <class T> inline acc_t<T> widen(T v) {
  if constexpr (dispatch::kIsFloatLike<T>) return static_cast<double>(dispatch::load_elem(v));
  else if constexpr (std::is_signed_v<T>) return static_cast<std::uint64_t>(static_cast<std::int64_t>(v));
  else return static_cast<std::uint64_t>(v);
}

template <class T, bool kProd> inline acc_t<T> combine(acc_t<T> acc, T v) {
  if constexpr (kProd) return acc * widen(v);
  else return acc + widen(v);
}

// Reduces n elements `stride` bytes apart; contiguous rows use four accumulators.
template <class T, bool kProd>
acc_t<T> reduce_row(const std::byte* p, std::size_t n, std::int64_t stride) {
  using A = acc_t<T>;
  const A init = kProd ? A(1) : A(0);
  if (stride == static_cast<std::int64_t>(sizeof(T))) {
    const T* x = at<T>(p);
    A r[4] = {init, init, init, init};
    std::size_t i = 0;
    for (; i + 4 <= n; i += 4) {
      for (int j = 0; j < 4; ++j) r[j] = combine<T, kProd>(r[j], x[i + j]);
    }
    for (; i < n; ++i) r[0] = combine<T, kProd>(r[0], x[i]);
    return kProd ? (r[0] * r[1]) * (r[2] * r[3]) : (r[0] + r[1]) + (r[2] + r[3]);
  }
  A r = init;
  for (std::size_t i = 0; i < n; ++i, p += stride) r = combine<T, kProd>(r, *at<T>(p));
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

template <RedOp kOp>
Prim reduce_all_entry(Prim p) {
  constexpr bool kProd = kOp == RedOp::Prod;
  const CpuRef a = as_cpu(std::move(p));
  CpuRef out = alloc_tensor(a->dtype(), Shape{1});
  visit_numeric(a->dtype(), "sum", [&](auto tag) {
    using T = decltype(tag);
    using A = acc_t<T>;
    A acc = kProd ? A(1) : A(0);
    const auto plan = make_plan<1>(a->shape(), {a->layout().strides.data()}, {sizeof(T)});
    for_each_row(plan, {a->data()}, [&](std::array<std::byte*, 1> ptr, std::size_t n, std::array<std::int64_t, 1> s) {
      const A r = reduce_row<T, kProd>(ptr[0], n, s[0]);
      acc = kProd ? acc * r : acc + r;
    });
    *at<T>(out->data()) = finish<T>(acc, kOp, a->shape().num_elements());
  });
  return out;
}

// Along `dim`: when the dim is memory-contiguous, each output reduces its own row;
// otherwise whole slices are accumulated one index of `dim` at a time, so the
// inner loop runs along the contiguous dims.
template <RedOp kOp>
Prim reduce_dim_entry(Prim p, std::size_t dim) {
  constexpr bool kProd = kOp == RedOp::Prod;
  const CpuRef a = as_cpu(std::move(p));
  Shape out_shape = a->shape();
  const std::size_t n = out_shape[dim];
  out_shape[dim] = 1;
  CpuRef out = alloc_tensor(a->dtype(), out_shape);
  const std::size_t count = out_shape.num_elements();
  visit_numeric(a->dtype(), "sum_dim", [&](auto tag) {
    using T = decltype(tag);
    using A = acc_t<T>;
    std::vector<A> acc(count, kProd ? A(1) : A(0));
    const Layout acc_layout = contiguous_layout(out_shape);
    const auto plan = make_plan<2>(out_shape, {acc_layout.strides.data(), a->layout().strides.data()},
                                   {sizeof(A), sizeof(T)});
    auto* acc_base = reinterpret_cast<std::byte*>(acc.data());
    const std::int64_t dstride = a->stride(dim) * static_cast<std::int64_t>(sizeof(T));
    if (n > 0 && (a->stride(dim) == 1 || a->stride(dim) == -1 || count == 1)) {
      for_each_row(plan, {acc_base, a->data()},
                   [&](std::array<std::byte*, 2> ptr, std::size_t m, std::array<std::int64_t, 2> s) {
                     for (std::size_t i = 0; i < m; ++i, ptr[0] += s[0], ptr[1] += s[1])
                       *at<A>(ptr[0]) = reduce_row<T, kProd>(ptr[1], n, dstride);
                   });
    } else {
      for (std::size_t k = 0; k < n; ++k) {
        std::byte* base = a->data() + static_cast<std::int64_t>(k) * dstride;
        for_each_row(plan, {acc_base, base},
                     [&](std::array<std::byte*, 2> ptr, std::size_t m, std::array<std::int64_t, 2> s) {
                       for (std::size_t i = 0; i < m; ++i, ptr[0] += s[0], ptr[1] += s[1])
                         *at<A>(ptr[0]) = combine<T, kProd>(*at<A>(ptr[0]), *at<T>(ptr[1]));
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

// ---- argmax / argmin along a dim: lowest index on ties, the first NaN wins ---------
template <bool kMax>
Prim arg_entry(Prim p, std::size_t dim, DType out_dtype) {
  const CpuRef a = as_cpu(std::move(p));
  Shape out_shape = a->shape();
  const std::size_t n = out_shape[dim];
  out_shape[dim] = 1;
  CpuRef out = alloc_tensor(out_dtype, out_shape);
  visit_numeric(a->dtype(), kMax ? "argmax" : "argmin", [&](auto tag) {
    using T = decltype(tag);
    const auto plan = make_plan<2>(out_shape, {out->layout().strides.data(), a->layout().strides.data()},
                                   {out->elem_size(), sizeof(T)});
    const std::int64_t xs = a->stride(dim) * static_cast<std::int64_t>(sizeof(T));
    visit_numeric(out_dtype, "argmax", [&](auto otag) {
      using O = decltype(otag);
      for_each_row(plan, {out->data(), a->data()},
                   [&](std::array<std::byte*, 2> ptr, std::size_t m, std::array<std::int64_t, 2> s) {
                     for (std::size_t i = 0; i < m; ++i, ptr[0] += s[0], ptr[1] += s[1]) {
                       std::size_t best = 0;
                       const std::byte* x = ptr[1];
                       calc_t<T> bv = n ? ld(*at<T>(x)) : calc_t<T>{};
                       for (std::size_t j = 1; j < n; ++j) {
                         x += xs;
                         const calc_t<T> v = ld(*at<T>(x));
                         bool take = kMax ? v > bv : v < bv;
                         if constexpr (dispatch::kIsFloatLike<T>) take = !std::isnan(bv) && (take || std::isnan(v));
                         if (take) { bv = v; best = j; }
                       }
                       *at<O>(ptr[0]) = dispatch::convert_value<O>(static_cast<std::int64_t>(best));
                     }
                   });
    });
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
  b.set<OpCode::argmax>(&arg_entry<true>);
  b.set<OpCode::argmin>(&arg_entry<false>);
  b.set<OpCode::cumsum>(&scan_entry<ScanOp::Sum>);
  b.set<OpCode::cumprod>(&scan_entry<ScanOp::Prod>);
  b.set<OpCode::cummin>(&scan_entry<ScanOp::Min>);
  b.set<OpCode::cummax>(&scan_entry<ScanOp::Max>);
}

}  // namespace tensor::cpu
