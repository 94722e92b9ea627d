// Indexing and assembly on the CPU: gather, select, scatter / select_assign with every
// update rule (scatter_add, select_add, scatter_or, select_or are the fixed-rule
// forms), cat and repeat_dim. Index tensors may be any int dtype; every index is
// checked before anything is written, so an out-of-range one raises IndexError and
// leaves all inputs as they were.
#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "backends/cpu/cpu_ops.hpp"
#include "backends/cpu/elementwise.hpp"

namespace tensor::cpu {
namespace {

using dispatch::Prim;

template <class C> inline constexpr bool kIsInt = std::is_integral_v<C> && !std::is_same_v<C, bool>;

// Calls f(I{}) with the element type of an int index dtype.
template <class F>
void visit_index(DType dtype, const char* op, F&& f) {
  switch (dtype) {
    case DType::I64: f(std::int64_t{}); return;
    case DType::I32: f(std::int32_t{}); return;
    case DType::I16: f(std::int16_t{}); return;
    case DType::I8: f(std::int8_t{}); return;
    case DType::U64: f(std::uint64_t{}); return;
    case DType::U32: f(std::uint32_t{}); return;
    case DType::U16: f(std::uint16_t{}); return;
    case DType::U8: f(std::uint8_t{}); return;
    default: break;
  }
  throw DTypeError(fmt::format("[{}] indices must have an int dtype; got {}", op, dtype_name(dtype)));
}

// Calls f(U{}) with an unsigned type of the element size (element copies need no dtype).
template <class F>
void visit_width(std::size_t size, F&& f) {
  switch (size) {
    case 1: f(std::uint8_t{}); return;
    case 2: f(std::uint16_t{}); return;
    case 4: f(std::uint32_t{}); return;
    default: f(std::uint64_t{}); return;
  }
}

template <class I> inline bool in_range(I v, std::size_t bound) {
  if constexpr (std::is_signed_v<I>) return v >= 0 && static_cast<std::uint64_t>(v) < bound;
  else return static_cast<std::uint64_t>(v) < bound;
}

// Throws IndexError naming the op, the first bad index and the bound, unless every
// element of `idx` is in [0, bound).
void check_indices(const CpuTensor& idx, std::size_t bound, std::size_t dim, const char* op) {
  visit_index(idx.dtype(), op, [&](auto tag) {
    using I = decltype(tag);
    const auto plan = make_plan<1>(idx.shape(), {idx.layout().strides.data()}, {sizeof(I)});
    for_each_row(plan, {idx.data()}, [&](std::array<std::byte*, 1> p, std::size_t n, std::array<std::int64_t, 1> s) {
      for (std::size_t i = 0; i < n; ++i, p[0] += s[0]) {
        const I v = *at<I>(p[0]);
        if (!in_range(v, bound))
          throw IndexError(fmt::format("[{}] index out of range for dim {}; expected 0 <= index < {}; got {}", op, dim,
                                       bound, +v));
      }
    });
  });
}

// The indices of a 1-D index tensor (already checked) as offsets.
std::vector<std::size_t> read_indices(const CpuTensor& idx, const char* op) {
  std::vector<std::size_t> out(idx.shape()[0]);
  visit_index(idx.dtype(), op, [&](auto tag) {
    using I = decltype(tag);
    const std::byte* p = idx.data();
    const std::int64_t s = idx.stride(0) * static_cast<std::int64_t>(sizeof(I));
    for (std::size_t k = 0; k < out.size(); ++k, p += s) out[k] = static_cast<std::size_t>(*at<I>(p));
  });
  return out;
}

// A tensor the op may write: `a` itself when uniquely held and contiguous (no
// aliasing views), else a contiguous copy.
CpuRef writable(CpuRef a) {
  if (a->can_mut() && a->is_contiguous()) return a;
  CpuRef copy = alloc_tensor(a->dtype(), a->shape());
  copy_strided(*a, copy->data());
  return copy;
}

Shape with_dim(Shape s, std::size_t dim, std::size_t n) {
  s[dim] = n;
  return s;
}

// ---- gather / select ---------------------------------------------------------------

// out[p] = a[p with p[dim] = idx[p]]; out has the shape of idx.
Prim gather_entry(Prim pa, std::size_t dim, Prim pi) {
  const CpuRef a = as_cpu(std::move(pa));
  const CpuRef idx = as_cpu(std::move(pi));
  check_indices(*idx, a->shape()[dim], dim, "gather");
  const Shape& shape = idx->shape();
  CpuRef out = alloc_tensor(a->dtype(), shape);
  // Nothing to gather; and the loops below run m times per (possibly empty) row set, so
  // an index view [2^60, 0] would otherwise spin 2^60 times (a fuzz finding).
  if (shape.num_elements() == 0) return out;
  const std::size_t m = shape[dim];
  const Shape lines = with_dim(shape, dim, 1);
  const std::size_t e = a->elem_size(), ie = idx->elem_size();
  const auto plan = make_plan<3>(lines, {out->layout().strides.data(), idx->layout().strides.data(), a->layout().strides.data()},
                                 {e, ie, e});
  const auto se = static_cast<std::int64_t>(e);
  const std::int64_t os = out->stride(dim) * se, is = idx->stride(dim) * static_cast<std::int64_t>(ie),
                     as = a->stride(dim) * se;
  visit_index(idx->dtype(), "gather", [&](auto itag) {
    using I = decltype(itag);
    visit_width(e, [&](auto wtag) {
      using W = decltype(wtag);
      if (out->stride(dim) == 1 || lines.num_elements() == 1) {  // lanes are contiguous: one lane at a time
        for_each_row(plan, {out->data(), idx->data(), a->data()},
                     [&](std::array<std::byte*, 3> p, std::size_t n, std::array<std::int64_t, 3> s) {
                       for (std::size_t r = 0; r < n; ++r, p[0] += s[0], p[1] += s[1], p[2] += s[2]) {
                         std::byte* o = p[0];
                         const std::byte* x = p[1];
                         for (std::size_t j = 0; j < m; ++j, o += os, x += is) {
                           const auto k = static_cast<std::int64_t>(*at<I>(x));
                           std::memcpy(o, p[2] + k * as, sizeof(W));
                         }
                       }
                     });
        return;
      }
      // Otherwise one slice (fixed position along dim) at a time, so rows run along memory.
      for (std::size_t j = 0; j < m; ++j)
        for_each_row(plan, {out->data() + static_cast<std::int64_t>(j) * os, idx->data() + static_cast<std::int64_t>(j) * is, a->data()},
                     [&](std::array<std::byte*, 3> p, std::size_t n, std::array<std::int64_t, 3> s) {
                       for (std::size_t r = 0; r < n; ++r, p[0] += s[0], p[1] += s[1], p[2] += s[2])
                         std::memcpy(p[0], p[2] + static_cast<std::int64_t>(*at<I>(p[1])) * as, sizeof(W));
                     });
    });
  });
  return out;
}

// Copies the sub-tensor `plan` describes from `src` to `dst` (element size e).
void copy_block(const Plan<2>& plan, std::byte* dst, const std::byte* src, std::size_t e) {
  for_each_row(plan, {dst, const_cast<std::byte*>(src)},
               [e](std::array<std::byte*, 2> p, std::size_t n, std::array<std::int64_t, 2> s) {
                 const auto se = static_cast<std::int64_t>(e);
                 if (s[0] == se && s[1] == se) {
                   std::memcpy(p[0], p[1], n * e);
                   return;
                 }
                 for (std::size_t i = 0; i < n; ++i, p[0] += s[0], p[1] += s[1]) std::memcpy(p[0], p[1], e);
               });
}

// out[..., k, ...] = a[..., idx[k], ...] along dim.
Prim select_entry(Prim pa, std::size_t dim, Prim pi) {
  const CpuRef a = as_cpu(std::move(pa));
  const CpuRef idx = as_cpu(std::move(pi));
  check_indices(*idx, a->shape()[dim], dim, "select");
  const std::vector<std::size_t> ks = read_indices(*idx, "select");
  CpuRef out = alloc_tensor(a->dtype(), with_dim(a->shape(), dim, ks.size()));
  if (out->shape().num_elements() == 0) return out;
  const std::size_t e = a->elem_size();
  const auto plan = make_plan<2>(with_dim(a->shape(), dim, 1), {out->layout().strides.data(), a->layout().strides.data()},
                                 {e, e});
  const auto se = static_cast<std::int64_t>(e);
  if (out->stride(dim) == 1 && out->shape().num_elements() > ks.size()) {
    // Selecting along the innermost dim: gather each output row, rather than copying
    // one strided column per index.
    const std::int64_t as = a->stride(dim) * se;
    visit_width(e, [&](auto wtag) {
      using W = decltype(wtag);
      for_each_row(plan, {out->data(), a->data()}, [&](std::array<std::byte*, 2> p, std::size_t n, std::array<std::int64_t, 2> s) {
        for (std::size_t r = 0; r < n; ++r, p[0] += s[0], p[1] += s[1]) {
          W* o = at<W>(p[0]);
          for (std::size_t k = 0; k < ks.size(); ++k) std::memcpy(o + k, p[1] + static_cast<std::int64_t>(ks[k]) * as, sizeof(W));
        }
      });
    });
    return out;
  }
  for (std::size_t k = 0; k < ks.size(); ++k)
    copy_block(plan, out->data() + static_cast<std::int64_t>(k) * out->stride(dim) * se,
               a->data() + static_cast<std::int64_t>(ks[k]) * a->stride(dim) * se, e);
  return out;
}

// ---- scatter / select_assign -----------------------------------------------------------

// The update rules; Or is the only rule on bools.
enum class Upd { Assign, Add, Mul, Min, Max, Or };

template <Upd kU, class C>
inline C apply(C old, C v) {
  if constexpr (kU == Upd::Assign) {
    return v;
  } else if constexpr (kU == Upd::Or) {
    return old || v;
  } else if constexpr (kU == Upd::Add || kU == Upd::Mul) {
    if constexpr (kIsInt<C>) {
      using U = wide_unsigned_t<C>;
      return static_cast<C>(kU == Upd::Add ? static_cast<U>(old) + static_cast<U>(v) : static_cast<U>(old) * static_cast<U>(v));
    } else {
      return kU == Upd::Add ? old + v : old * v;
    }
  } else {  // Min / Max: NaN on either side wins
    if constexpr (!kIsInt<C>) {
      if (std::isnan(old)) return old;
      if (std::isnan(v)) return v;
    }
    if constexpr (kU == Upd::Min) return v < old ? v : old;
    else return v > old ? v : old;
  }
}

template <class F>
void with_update(Upd u, F&& f) {
  switch (u) {
    case Upd::Assign: f(std::integral_constant<Upd, Upd::Assign>{}); return;
    case Upd::Add: f(std::integral_constant<Upd, Upd::Add>{}); return;
    case Upd::Mul: f(std::integral_constant<Upd, Upd::Mul>{}); return;
    case Upd::Min: f(std::integral_constant<Upd, Upd::Min>{}); return;
    case Upd::Max: f(std::integral_constant<Upd, Upd::Max>{}); return;
    case Upd::Or: f(std::integral_constant<Upd, Upd::Or>{}); return;
  }
}

Upd upd_of(IndexingUpdateOp op) {
  switch (op) {
    case IndexingUpdateOp::Assign: return Upd::Assign;
    case IndexingUpdateOp::Add: return Upd::Add;
    case IndexingUpdateOp::Mul: return Upd::Mul;
    case IndexingUpdateOp::Min: return Upd::Min;
    case IndexingUpdateOp::Max: return Upd::Max;
  }
  return Upd::Add;
}

// Calls f(T{}, integral_constant<Upd>) for the tensor's dtype: bools always Or,
// numbers with `u` (Or on a number is a caller bug, reported as DTypeError).
template <class F>
void visit_update(DType dtype, Upd u, const char* op, F&& f) {
  dispatch::visit_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool> || std::is_same_v<T, BoolU32>) {
      if (u != Upd::Or) throw DTypeError(fmt::format("[{}] expected a float or int tensor; got {}", op, dtype_name(dtype)));
      f(tag, std::integral_constant<Upd, Upd::Or>{});
    } else {
      if (u == Upd::Or) throw DTypeError(fmt::format("[{}] expected a bool tensor; got {}", op, dtype_name(dtype)));
      with_update(u, [&](auto ut) { f(tag, ut); });
    }
  });
}

// out = a; out[p with p[dim] = idx[p]] op= v[p] for every p of idx (in order along dim).
Prim scatter_impl(const char* op, Prim pa, std::size_t dim, Prim pi, Prim pv, Upd u) {
  CpuRef a = as_cpu(std::move(pa));
  const CpuRef idx = as_cpu(std::move(pi));
  const CpuRef v = as_cpu(std::move(pv));
  check_indices(*idx, a->shape()[dim], dim, op);
  CpuRef out = writable(std::move(a));
  const Shape& shape = idx->shape();
  const std::size_t m = shape[dim];
  const std::size_t e = out->elem_size(), ie = idx->elem_size();
  if (shape.num_elements() == 0) return out;  // nothing to update (and no m-long empty loop)
  const std::size_t lanes = with_dim(shape, dim, 1).num_elements();
  const auto plan = make_plan<3>(with_dim(shape, dim, 1),
                                 {out->layout().strides.data(), idx->layout().strides.data(), v->layout().strides.data()},
                                 {e, ie, e});
  const auto se = static_cast<std::int64_t>(e);
  const std::int64_t os = out->stride(dim) * se, is = idx->stride(dim) * static_cast<std::int64_t>(ie),
                     vs = v->stride(dim) * se;
  visit_update(out->dtype(), u, op, [&](auto tag, auto ut) {
    using T = decltype(tag);
    constexpr Upd kU = decltype(ut)::value;
    visit_index(idx->dtype(), op, [&](auto itag) {
      using I = decltype(itag);
      if (idx->stride(dim) == 1 || idx->stride(dim) == -1 || lanes == 1) {  // one lane at a time
        for_each_row(plan, {out->data(), idx->data(), v->data()},
                     [&](std::array<std::byte*, 3> p, std::size_t n, std::array<std::int64_t, 3> s) {
                       for (std::size_t r = 0; r < n; ++r, p[0] += s[0], p[1] += s[1], p[2] += s[2]) {
                         const std::byte* x = p[1];
                         const std::byte* y = p[2];
                         for (std::size_t j = 0; j < m; ++j, x += is, y += vs) {
                           T* o = at<T>(p[0] + static_cast<std::int64_t>(*at<I>(x)) * os);
                           *o = st<T>(apply<kU>(ld(*o), ld(*at<T>(y))));
                         }
                       }
                     });
        return;
      }
      // One slice along dim at a time (rows run along memory); within each lane the
      // updates still happen in order along dim.
      for (std::size_t j = 0; j < m; ++j)
        for_each_row(plan, {out->data(), idx->data() + static_cast<std::int64_t>(j) * is, v->data() + static_cast<std::int64_t>(j) * vs},
                     [&](std::array<std::byte*, 3> p, std::size_t n, std::array<std::int64_t, 3> s) {
                       for (std::size_t r = 0; r < n; ++r, p[0] += s[0], p[1] += s[1], p[2] += s[2]) {
                         T* o = at<T>(p[0] + static_cast<std::int64_t>(*at<I>(p[1])) * os);
                         *o = st<T>(apply<kU>(ld(*o), ld(*at<T>(p[2]))));
                       }
                     });
    });
  });
  return out;
}

// out = a; out[..., idx[k], ...] op= v[..., k, ...] along dim, k in order.
Prim select_assign_impl(const char* op, Prim pa, std::size_t dim, Prim pi, Prim pv, Upd u) {
  CpuRef a = as_cpu(std::move(pa));
  const CpuRef idx = as_cpu(std::move(pi));
  const CpuRef v = as_cpu(std::move(pv));
  check_indices(*idx, a->shape()[dim], dim, op);
  const std::vector<std::size_t> ks = read_indices(*idx, op);
  CpuRef out = writable(std::move(a));
  if (v->shape().num_elements() == 0) return out;
  const std::size_t e = out->elem_size();
  const auto plan = make_plan<2>(with_dim(out->shape(), dim, 1), {out->layout().strides.data(), v->layout().strides.data()},
                                 {e, e});
  const auto se = static_cast<std::int64_t>(e);
  visit_update(out->dtype(), u, op, [&](auto tag, auto ut) {
    using T = decltype(tag);
    constexpr Upd kU = decltype(ut)::value;
    for (std::size_t k = 0; k < ks.size(); ++k) {
      std::byte* dst = out->data() + static_cast<std::int64_t>(ks[k]) * out->stride(dim) * se;
      const std::byte* src = v->data() + static_cast<std::int64_t>(k) * v->stride(dim) * se;
      for_each_row(plan, {dst, const_cast<std::byte*>(src)},
                   [&](std::array<std::byte*, 2> p, std::size_t n, std::array<std::int64_t, 2> s) {
                     for (std::size_t i = 0; i < n; ++i, p[0] += s[0], p[1] += s[1])
                       *at<T>(p[0]) = st<T>(apply<kU>(ld(*at<T>(p[0])), ld(*at<T>(p[1]))));
                   });
    }
  });
  return out;
}

Prim scatter_add_entry(Prim a, std::size_t dim, Prim i, Prim v) {
  return scatter_impl("scatter_add", std::move(a), dim, std::move(i), std::move(v), Upd::Add);
}
Prim scatter_or_entry(Prim a, std::size_t dim, Prim i, Prim v) {
  return scatter_impl("scatter_or", std::move(a), dim, std::move(i), std::move(v), Upd::Or);
}
Prim scatter_entry(Prim a, std::size_t dim, Prim i, Prim v, IndexingUpdateOp op) {
  return scatter_impl("scatter", std::move(a), dim, std::move(i), std::move(v), upd_of(op));
}
Prim select_add_entry(Prim a, std::size_t dim, Prim i, Prim v) {
  return select_assign_impl("select_add", std::move(a), dim, std::move(i), std::move(v), Upd::Add);
}
Prim select_or_entry(Prim a, std::size_t dim, Prim i, Prim v) {
  return select_assign_impl("select_or", std::move(a), dim, std::move(i), std::move(v), Upd::Or);
}
Prim select_assign_entry(Prim a, std::size_t dim, Prim i, Prim v, IndexingUpdateOp op) {
  return select_assign_impl("select_assign", std::move(a), dim, std::move(i), std::move(v), upd_of(op));
}

// ---- cat / repeat_dim --------------------------------------------------------------------

// Each part is copied straight into its place in one fresh buffer (dispatch has
// dropped empty parts and checked the shapes).
Prim cat_entry(std::vector<Prim> parts, std::size_t dim) {
  Shape shape = parts[0]->shape();
  std::size_t total = 0;
  for (const Prim& p : parts) total += p->shape()[dim];
  shape[dim] = total;
  CpuRef out = alloc_tensor(parts[0]->dtype(), shape);
  const auto step = out->stride(dim) * static_cast<std::int64_t>(out->elem_size());
  std::int64_t offset = 0;
  for (const Prim& p : parts) {
    const CpuTensor& t = cpu_of(p);
    if (t.shape().num_elements() != 0) copy_strided_to(t, out->data() + offset * step, out->layout().strides.data());
    offset += static_cast<std::int64_t>(t.shape()[dim]);
  }
  return out;
}

// `times` copies of `a` one after another along dim (0 copies: an empty dim).
Prim repeat_dim_entry(Prim pa, std::size_t dim, std::size_t times) {
  const CpuRef a = as_cpu(std::move(pa));
  const std::size_t n = a->shape()[dim];
  CpuRef out = alloc_tensor(a->dtype(), with_dim(a->shape(), dim, n * times));
  if (out->shape().num_elements() == 0) return out;
  const auto step = out->stride(dim) * static_cast<std::int64_t>(n * out->elem_size());
  copy_strided_to(*a, out->data(), out->layout().strides.data());
  // Later copies come from the first, which is contiguous in every dim but `dim`.
  const CpuRef first = make_view(out, a->shape(), out->layout());
  for (std::size_t t = 1; t < times; ++t)
    copy_strided_to(*first, out->data() + static_cast<std::int64_t>(t) * step, out->layout().strides.data());
  return out;
}

}  // namespace

void register_index_ops(dispatch::Backend& b) {
  b.set<OpCode::gather>(&gather_entry);
  b.set<OpCode::select>(&select_entry);
  b.set<OpCode::scatter_add>(&scatter_add_entry);
  b.set<OpCode::scatter_or>(&scatter_or_entry);
  b.set<OpCode::scatter>(&scatter_entry);
  b.set<OpCode::select_add>(&select_add_entry);
  b.set<OpCode::select_or>(&select_or_entry);
  b.set<OpCode::select_assign>(&select_assign_entry);
  b.set<OpCode::cat>(&cat_entry);
  b.set<OpCode::repeat_dim>(&repeat_dim_entry);
}

}  // namespace tensor::cpu
