// Forwarders: reductions, scans, sorts. Each validates its arguments, states the output metadata and runs
// the backend entry through the one invocation path (dispatch/forward.hpp).
#include "dispatch/forward.hpp"

namespace tensor::dispatch {
using namespace fwd;

// ---- reductions --------------------------------------------------------------------

using T = DispatchTensor;
using I = std::int64_t;

namespace {
using TensorPair = std::pair<DispatchTensor, DispatchTensor>;
TensorPair wrap_pair(PrimPair p, Kind k) { return {DispatchTensor(std::move(p.first), k), DispatchTensor(std::move(p.second), Kind::Int)}; }

// A dim-taking rule's plan: the resolved dim, whether the result is empty without running
// the op (an extremum of a tensor with no elements off the axis), the index dtype.
struct DimPlan {
  std::size_t d;
  bool empty_result = false;
  DType it{};
};
DimPlan extremum_plan(OpCode op, const T& a, I dim) {
  check_first(op, a);
  const std::size_t d = resolve_dim(op, dim, a.shape().rank());
  return {d, empty_off_axis(op, a.shape(), d), int_out(a.device)};
}
// topk / argtopk: k within the dim.
DimPlan k_plan(OpCode op, const T& a, I dim, std::size_t k) {
  check_first(op, a);
  const std::size_t d = resolve_dim(op, dim, a.shape().rank());
  if (k > a.shape()[d])
    throw IndexError(fmt::format("[{}] k larger than the dim; expected k <= {}; got {}", op_name(op), a.shape()[d], k));
  return {d, false, int_out(a.device)};
}
}  // namespace

// Reduce (sum, prod, mean, max, min of everything): shape [1]; the op table's empty rule.
template <> struct fwd::Rule<Family::Reduce> : OnFirst {
  struct Plan {};
  static Plan check(OpCode op, const T& a) {
    check_first(op, a);
    if (empty_raises(op, a.kind))
      check_non_empty(op, a.shape(), op_info(op).empty == EmptyRule::IntRaises
                                         ? "int tensor (int mean of nothing is undefined)" : "tensor");
    return {};
  }
  static OutMeta meta(OpCode, const Plan&, const T& a) { return {reduce_shape(), a.dtype(), a.kind}; }
  template <class Entry>
  [[gnu::always_inline]] static T run(OpCode op, Entry entry, const Plan&, T& a) {
    const Kind k = a.kind;
    return {entry(op)(a.take()), k};
  }
};

// Dim (reductions along a dim, scans, softmax): extrema of an empty reduced dim have no
// answer, another empty dim gives the empty result; int mean of an empty axis raises.
template <> struct fwd::Rule<Family::Dim> : OnFirst {
  using Plan = DimPlan;
  static Plan check(OpCode op, const T& a, const I& dim) {
    check_first(op, a);
    const std::size_t d = resolve_dim(op, dim, a.shape().rank());
    const EmptyRule rule = op_info(op).empty;
    const bool empty_result = rule == EmptyRule::Raises && empty_off_axis(op, a.shape(), d);
    if (rule == EmptyRule::IntRaises && a.kind == Kind::Int && a.shape()[d] == 0)
      throw ShapeError(fmt::format("[{}] expected a non-empty axis for an int tensor; got shape {} dim {}", op_name(op),
                                   a.shape().to_string(), d));
    return {d, empty_result};
  }
  static OutMeta meta(OpCode op, const Plan& p, const T& a, const I&) {
    return {op_info(op).keeps_shape ? a.shape() : reduce_dim_shape(a.shape(), p.d), a.dtype(), a.kind};
  }
  static OpAttrs attrs(OpCode, const Plan& p, const T&, const I&) { return with_ints(i64(p.d)); }
  template <class Entry>
  [[gnu::always_inline]] static T run(OpCode op, Entry entry, const Plan& p, T& a, const I&) {
    const Kind k = a.kind;
    if (p.empty_result) return empty_reduced(a, p.d, k, a.dtype());
    return {entry(op)(a.take(), p.d), k};
  }
};

// DimIndex (argmax, argmin): Int indices in the device's int dtype.
template <> struct fwd::Rule<Family::DimIndex> : OnFirst {
  using Plan = DimPlan;
  static Plan check(OpCode op, const T& a, const I& dim) { return extremum_plan(op, a, dim); }
  static OutMeta meta(OpCode, const Plan& p, const T& a, const I&) { return {reduce_dim_shape(a.shape(), p.d), p.it, Kind::Int}; }
  static OpAttrs attrs(OpCode, const Plan& p, const T&, const I&) { return with_ints(i64(p.d)); }
  template <class Entry>
  [[gnu::always_inline]] static T run(OpCode op, Entry entry, const Plan& p, T& a, const I&) {
    if (p.empty_result) return empty_reduced(a, p.d, Kind::Int, p.it);
    return {entry(op)(a.take(), p.d, p.it), Kind::Int};
  }
};

// DimWithIndices (max/min_dim_with_indices): values and Int indices.
template <> struct fwd::Rule<Family::DimWithIndices> : OnFirst {
  using Plan = DimPlan;
  static Plan check(OpCode op, const T& a, const I& dim) { return extremum_plan(op, a, dim); }
  static OutMeta meta(OpCode, const Plan& p, const T& a, const I&) { return {reduce_dim_shape(a.shape(), p.d), a.dtype(), a.kind}; }
  static OpAttrs attrs(OpCode, const Plan& p, const T&, const I&) { return with_ints(i64(p.d)); }
  template <class Entry>
  [[gnu::always_inline]] static TensorPair run(OpCode op, Entry entry, const Plan& p, T& a, const I&) {
    const Kind k = a.kind;
    if (p.empty_result) return {empty_reduced(a, p.d, k, a.dtype()), empty_reduced(a, p.d, Kind::Int, p.it)};
    return wrap_pair(entry(op)(a.take(), p.d, p.it), k);
  }
};

// Moments (var_mean): the variance and the mean along a dim, both Float of the input's
// dtype, kept as size 1. An empty reduced dim gives the mean NaN and the variance
// 0 / (0 - correction) (as the composite); another empty dim gives empty results.
template <> struct fwd::Rule<Family::Moments> : OnFirst {
  struct Plan {
    std::size_t d;
  };
  static Plan check(OpCode op, const T& a, const I& dim, const std::size_t&) {
    check_first(op, a);
    return {resolve_dim(op, dim, a.shape().rank())};
  }
  static OutMeta meta(OpCode, const Plan& p, const T& a, const I&, const std::size_t&) {
    return {reduce_dim_shape(a.shape(), p.d), a.dtype(), a.kind};
  }
  static OpAttrs attrs(OpCode, const Plan& p, const T&, const I&, const std::size_t& c) { return with_ints(i64(p.d), i64(c)); }
  template <class Entry>
  [[gnu::always_inline]] static TensorPair run(OpCode op, Entry entry, const Plan& p, T& a, const I&, const std::size_t& c) {
    const Kind k = a.kind;
    PrimPair r = entry(op)(a.take(), p.d, c);
    return {DispatchTensor(std::move(r.first), k), DispatchTensor(std::move(r.second), k)};
  }
};

// AnyAll / AnyAllDim: any kind the device can hold; a Bool result.
template <> struct fwd::Rule<Family::AnyAll> : OnFirst {
  struct Plan { DType bt; };
  static Plan check(OpCode op, const T& a) {
    check_kind(op, a);
    check_storage(op, a.device, a.dtype());
    return {bool_out(a.device)};
  }
  static OutMeta meta(OpCode, const Plan& p, const T&) { return {reduce_shape(), p.bt, Kind::Bool}; }
  template <class Entry>
  [[gnu::always_inline]] static T run(OpCode op, Entry entry, const Plan& p, T& a) { return {entry(op)(a.take(), p.bt), Kind::Bool}; }
};
template <> struct fwd::Rule<Family::AnyAllDim> : OnFirst {
  struct Plan { std::size_t d; DType bt; };
  static Plan check(OpCode op, const T& a, const I& dim) {
    check_kind(op, a);
    check_storage(op, a.device, a.dtype());
    return {resolve_dim(op, dim, a.shape().rank()), bool_out(a.device)};
  }
  static OutMeta meta(OpCode, const Plan& p, const T& a, const I&) { return {reduce_dim_shape(a.shape(), p.d), p.bt, Kind::Bool}; }
  static OpAttrs attrs(OpCode, const Plan& p, const T&, const I&) { return with_ints(i64(p.d)); }
  template <class Entry>
  [[gnu::always_inline]] static T run(OpCode op, Entry entry, const Plan& p, T& a, const I&) { return {entry(op)(a.take(), p.d, p.bt), Kind::Bool}; }
};

// The sorts share the check (the dim resolved, the index dtype) and the attributes.
struct SortRule : OnFirst {
  using Plan = DimPlan;
  static Plan check(OpCode op, const T& a, const I& dim, const bool&) {
    check_first(op, a);
    return {resolve_dim(op, dim, a.shape().rank()), false, int_out(a.device)};
  }
  static OpAttrs attrs(OpCode, const Plan& p, const T&, const I&, const bool& desc) { return with_ints(i64(p.d), desc); }
};
// Sorts along a dim: values (Sort), values and indices (SortWithIndices), indices (Argsort).
template <> struct fwd::Rule<Family::Sort> : SortRule {
  static OutMeta meta(OpCode, const Plan&, const T& a, const I&, const bool&) { return {a.shape(), a.dtype(), a.kind}; }
  template <class Entry>
  [[gnu::always_inline]] static T run(OpCode op, Entry entry, const Plan& p, T& a, const I&, const bool& desc) {
    const Kind k = a.kind;
    return {entry(op)(a.take(), p.d, desc), k};
  }
};
template <> struct fwd::Rule<Family::SortWithIndices> : SortRule {
  static OutMeta meta(OpCode, const Plan&, const T& a, const I&, const bool&) { return {a.shape(), a.dtype(), a.kind}; }
  template <class Entry>
  [[gnu::always_inline]] static TensorPair run(OpCode op, Entry entry, const Plan& p, T& a, const I&, const bool& desc) {
    const Kind k = a.kind;
    return wrap_pair(entry(op)(a.take(), p.d, desc, p.it), k);
  }
};
template <> struct fwd::Rule<Family::Argsort> : SortRule {
  static OutMeta meta(OpCode, const Plan& p, const T& a, const I&, const bool&) { return {a.shape(), p.it, Kind::Int}; }
  template <class Entry>
  [[gnu::always_inline]] static T run(OpCode op, Entry entry, const Plan& p, T& a, const I&, const bool& desc) {
    return {entry(op)(a.take(), p.d, desc, p.it), Kind::Int};
  }
};

// The k largest along a dim: values (TopK), values and indices, indices (ArgTopK); one
// check and one set of attributes.
struct TopKRule : OnFirst {
  using Plan = DimPlan;
  using K = std::size_t;
  static Plan check(OpCode op, const T& a, const I& dim, const K& k) { return k_plan(op, a, dim, k); }
  static OpAttrs attrs(OpCode, const Plan& p, const T&, const I&, const K& k) { return with_ints(i64(p.d), i64(k)); }
};
template <> struct fwd::Rule<Family::TopK> : TopKRule {
  static OutMeta meta(OpCode, const Plan& p, const T& a, const I&, const K& k) {
    return {resized_shape(a.shape(), p.d, k), a.dtype(), a.kind};
  }
  template <class Entry>
  [[gnu::always_inline]] static T run(OpCode op, Entry entry, const Plan& p, T& a, const I&, const K& k) {
    const Kind kind = a.kind;
    return {entry(op)(a.take(), p.d, k), kind};
  }
};
template <> struct fwd::Rule<Family::TopKWithIndices> : TopKRule {
  static OutMeta meta(OpCode, const Plan& p, const T& a, const I&, const K& k) {
    return {resized_shape(a.shape(), p.d, k), a.dtype(), a.kind};
  }
  template <class Entry>
  [[gnu::always_inline]] static TensorPair run(OpCode op, Entry entry, const Plan& p, T& a, const I&, const K& k) {
    const Kind kind = a.kind;
    return wrap_pair(entry(op)(a.take(), p.d, k, p.it), kind);
  }
};
template <> struct fwd::Rule<Family::ArgTopK> : TopKRule {
  static OutMeta meta(OpCode, const Plan& p, const T& a, const I&, const K& k) {
    return {resized_shape(a.shape(), p.d, k), p.it, Kind::Int};
  }
  template <class Entry>
  [[gnu::always_inline]] static T run(OpCode op, Entry entry, const Plan& p, T& a, const I&, const K& k) {
    return {entry(op)(a.take(), p.d, k, p.it), Kind::Int};
  }
};

DispatchTensor reduce(OpCode op, DispatchTensor a) { return forward<Family::Reduce>(op, a); }
DispatchTensor reduce_dim(OpCode op, DispatchTensor a, std::int64_t dim) { return forward<Family::Dim>(op, a, dim); }
DispatchTensor dim_index(OpCode op, DispatchTensor a, std::int64_t dim) { return forward<Family::DimIndex>(op, a, dim); }
std::pair<DispatchTensor, DispatchTensor> dim_with_indices(OpCode op, DispatchTensor a, std::int64_t dim) {
  return forward<Family::DimWithIndices>(op, a, dim);
}
std::pair<DispatchTensor, DispatchTensor> var_mean(DispatchTensor a, std::int64_t dim, std::size_t correction) {
  return forward<Family::Moments>(OpCode::var_mean, a, dim, correction);
}
DispatchTensor any_all(OpCode op, DispatchTensor a) { return forward<Family::AnyAll>(op, a); }
DispatchTensor any_all_dim(OpCode op, DispatchTensor a, std::int64_t dim) { return forward<Family::AnyAllDim>(op, a, dim); }
DispatchTensor sort(DispatchTensor a, std::int64_t dim, bool descending) {
  return forward<Family::Sort>(OpCode::sort, a, dim, descending);
}
std::pair<DispatchTensor, DispatchTensor> sort_with_indices(DispatchTensor a, std::int64_t dim, bool descending) {
  return forward<Family::SortWithIndices>(OpCode::sort_with_indices, a, dim, descending);
}
DispatchTensor argsort(DispatchTensor a, std::int64_t dim, bool descending) {
  return forward<Family::Argsort>(OpCode::argsort, a, dim, descending);
}
DispatchTensor topk(DispatchTensor a, std::int64_t dim, std::size_t k) { return forward<Family::TopK>(OpCode::topk, a, dim, k); }
std::pair<DispatchTensor, DispatchTensor> topk_with_indices(DispatchTensor a, std::int64_t dim, std::size_t k) {
  return forward<Family::TopKWithIndices>(OpCode::topk_with_indices, a, dim, k);
}
DispatchTensor argtopk(DispatchTensor a, std::int64_t dim, std::size_t k) {
  return forward<Family::ArgTopK>(OpCode::argtopk, a, dim, k);
}

}  // namespace tensor::dispatch
