// Forwarders: indexing (gather, scatter, select, masks). Each validates its arguments, states the output metadata and runs
// the backend entry through the one invocation path (dispatch/forward.hpp).
#include "dispatch/forward.hpp"

namespace tensor::dispatch {
using namespace fwd;

// ---- indexing ------------------------------------------------------------------------

using T = DispatchTensor;
using I = std::int64_t;
using Update = IndexingUpdateOp;

namespace {
// gather_nd / scatter_nd: indices [.., k] with 1 <= k <= rank; the result (gather) or the
// values (scatter) are the indices' leading dims followed by a's dims from k on ([1] when
// that is empty).
Shape checked_nd_slices_shape(OpCode op, const Shape& s, const Shape& is) {
  if (is.rank() < 1 || is[is.rank() - 1] < 1 || is[is.rank() - 1] > s.rank())
    throw ShapeError(fmt::format("[{}] the last dim of the indices is the index depth; expected 1..{}; got indices of shape {} "
                                 "for a tensor of shape {}",
                                 op_name(op), s.rank(), is.to_string(), s.to_string()));
  return nd_slices_shape(s, is);
}
}  // namespace

namespace {
// scatter / scatter_add (the update rule checked for both, as the public call passes one):
// indices and values of one shape, of the tensor's rank, no larger
// than the tensor outside the dim.
std::size_t scatter_dim(OpCode op, const T& a, I dim, const T& idx, const T& values, Update u) {
  check_first(op, a);
  check_indices(op, a, idx);
  check_pair(op, a, values);
  check_update(op, u);
  const std::size_t d = resolve_dim(op, dim, a.shape().rank());
  if (!(idx.shape() == values.shape()) || idx.shape().rank() != a.shape().rank())
    throw ShapeError(fmt::format("[{}] indices and values must have one shape of the tensor's rank; got {} and {} for {}",
                                 op_name(op), idx.shape().to_string(), values.shape().to_string(), a.shape().to_string()));
  for (std::size_t i = 0; i < a.shape().rank(); ++i)
    if (i != d && idx.shape()[i] > a.shape()[i])
      throw ShapeError(fmt::format("[{}] indices larger than the tensor outside dim {}; expected <= {}; got {}", op_name(op), d,
                                   a.shape().to_string(), idx.shape().to_string()));
  return d;
}
// select_add / select_assign: 1-D indices, values shaped like the tensor with the dim resized.
std::size_t select_assign_dim(OpCode op, const T& a, I dim, const T& idx, const T& values, Update u) {
  check_first(op, a);
  check_indices(op, a, idx);
  check_pair(op, a, values);
  check_update(op, u);
  const std::size_t d = resolve_dim(op, dim, a.shape().rank());
  if (idx.shape().rank() != 1)
    throw ShapeError(fmt::format("[{}] expected 1-D indices; got shape {}", op_name(op), idx.shape().to_string()));
  Shape want = a.shape();
  want[d] = idx.shape()[0];
  if (!(values.shape() == want))
    throw ShapeError(fmt::format("[{}] values shape differs; expected {}; got {}", op_name(op), want.to_string(),
                                 values.shape().to_string()));
  return d;
}
// mask_where: the result's shape, the tensor, mask and value broadcast together.
Shape mask_where_shape(OpCode op, const T& a, const T& mask, const T& value) {
  check_first(op, a);
  check_mask(op, a, mask);
  check_pair(op, a, value);
  return broadcast_shapes(op, broadcast_shapes(op, a.shape(), mask.shape()), value.shape());
}
OpAttrs dim_update_attrs(std::size_t d, Update u) {
  OpAttrs x = with_ints(i64(d));
  x.update = u;
  return x;
}
}  // namespace

template <> struct fwd::Rule<Family::Gather> : OnFirst {
  struct Plan { std::size_t d; };
  static Plan check(OpCode op, const T& a, const I& dim, const T& idx) {
    check_first(op, a);
    check_indices(op, a, idx);
    const std::size_t d = resolve_dim(op, dim, a.shape().rank());
    if (idx.shape().rank() != a.shape().rank())
      throw ShapeError(fmt::format("[{}] indices rank differs; expected {}; got {}", op_name(op), a.shape().rank(),
                                   idx.shape().rank()));
    for (std::size_t i = 0; i < a.shape().rank(); ++i)
      if (i != d && idx.shape()[i] != a.shape()[i])
        throw ShapeError(fmt::format("[{}] indices shape differs outside dim {}; expected {}; got {}", op_name(op), d,
                                     a.shape().to_string(), idx.shape().to_string()));
    return {d};
  }
  static OutMeta meta(OpCode, const Plan&, const T& a, const I&, const T& idx) { return {idx.shape(), a.dtype(), a.kind}; }
  static OpAttrs attrs(OpCode, const Plan& p, const T&, const I&, const T&) { return with_ints(i64(p.d)); }
  template <class Entry>
  [[gnu::always_inline]] static T run(OpCode op, Entry entry, const Plan& p, T& a, const I&, T& idx) {
    const Kind k = a.kind;
    return {entry(op)(a.take(), p.d, idx.take()), k};
  }
};

// Indexed updates along a dim: scatter_add / scatter_or and select_add / select_or (`Dim`
// validates and resolves the dim); the tensor's metadata. The Update families pass the rule on.
using DimCheck = std::size_t (*)(OpCode, const T&, I, const T&, const T&, Update);
template <DimCheck Dim>
struct IndexedUpdate : OnFirst {
  struct Plan { std::size_t d; };
  static Plan check(OpCode op, const T& a, const I& dim, const T& idx, const T& values, const Update& u) {
    return {Dim(op, a, dim, idx, values, u)};
  }
  static OutMeta meta(OpCode, const Plan&, const T& a, const I&, const T&, const T&, const Update&) {
    return {a.shape(), a.dtype(), a.kind};
  }
  static OpAttrs attrs(OpCode, const Plan& p, const T&, const I&, const T&, const T&, const Update& u) {
    return dim_update_attrs(p.d, u);
  }
  template <class Entry>
  [[gnu::always_inline]] static T run(OpCode op, Entry entry, const Plan& p, T& a, const I&, T& idx, T& values, const Update&) {
    const Kind k = a.kind;
    return {entry(op)(a.take(), p.d, idx.take(), values.take()), k};
  }
};
template <DimCheck Dim>
struct IndexedUpdateWithRule : IndexedUpdate<Dim> {
  using Plan = typename IndexedUpdate<Dim>::Plan;
  template <class Entry>
  [[gnu::always_inline]] static T run(OpCode op, Entry entry, const Plan& p, T& a, const I&, T& idx, T& values, const Update& u) {
    const Kind k = a.kind;
    return {entry(op)(a.take(), p.d, idx.take(), values.take(), u), k};
  }
};
template <> struct fwd::Rule<Family::Scatter> : IndexedUpdate<scatter_dim> {};
template <> struct fwd::Rule<Family::ScatterUpdate> : IndexedUpdateWithRule<scatter_dim> {};
template <> struct fwd::Rule<Family::SelectAssign> : IndexedUpdate<select_assign_dim> {};
template <> struct fwd::Rule<Family::SelectUpdate> : IndexedUpdateWithRule<select_assign_dim> {};

template <> struct fwd::Rule<Family::Select> : OnFirst {
  struct Plan { std::size_t d; };
  static Plan check(OpCode op, const T& a, const I& dim, const T& idx) {
    check_first(op, a);
    check_indices(op, a, idx);
    const std::size_t d = resolve_dim(op, dim, a.shape().rank());
    if (idx.shape().rank() != 1)
      throw ShapeError(fmt::format("[{}] expected 1-D indices; got shape {}", op_name(op), idx.shape().to_string()));
    return {d};
  }
  static OutMeta meta(OpCode, const Plan& p, const T& a, const I&, const T& idx) {
    return {resized_shape(a.shape(), p.d, idx.shape()[0]), a.dtype(), a.kind};
  }
  static OpAttrs attrs(OpCode, const Plan& p, const T&, const I&, const T&) { return with_ints(i64(p.d)); }
  template <class Entry>
  [[gnu::always_inline]] static T run(OpCode op, Entry entry, const Plan& p, T& a, const I&, T& idx) {
    const Kind k = a.kind;
    return {entry(op)(a.take(), p.d, idx.take()), k};
  }
};

template <> struct fwd::Rule<Family::MaskWhere> : OnFirst {
  struct Plan { Shape out; };
  static Plan check(OpCode op, const T& a, const T& mask, const T& value) { return {mask_where_shape(op, a, mask, value)}; }
  static OutMeta meta(OpCode, const Plan& p, const T& a, const T&, const T&) { return {p.out, a.dtype(), a.kind}; }
  template <class Entry>
  [[gnu::always_inline]] static T run(OpCode op, Entry entry, const Plan&, T& a, T& mask, T& value) {
    const Kind k = a.kind;
    return {entry(op)(a.take(), mask.take(), value.take()), k};
  }
};

template <> struct fwd::Rule<Family::MaskFill> : OnFirst {
  struct Plan {};
  static Plan check(OpCode op, const T& a, const T& mask, const Scalar&) {
    check_first(op, a);
    check_mask(op, a, mask);
    if (!(broadcast_shapes(op, a.shape(), mask.shape()) == a.shape()))
      throw ShapeError(fmt::format("[{}] mask must broadcast to the tensor's shape; expected {}; got {}", op_name(op),
                                   a.shape().to_string(), mask.shape().to_string()));
    return {};
  }
  static OutMeta meta(OpCode, const Plan&, const T& a, const T&, const Scalar&) { return {a.shape(), a.dtype(), a.kind}; }
  static OpAttrs attrs(OpCode, const Plan&, const T&, const T&, const Scalar& v) { return with_scalars(v); }
  template <class Entry>
  [[gnu::always_inline]] static T run(OpCode op, Entry entry, const Plan&, T& a, T& mask, const Scalar& v) {
    const Kind k = a.kind;
    return {entry(op)(a.take(), mask.take(), v), k};
  }
};

template <> struct fwd::Rule<Family::MaskSelect> : OnFirst {
  struct Plan {};
  static Plan check(OpCode op, const T& a, const T& mask) {
    check_first(op, a);
    check_mask(op, a, mask);
    if (!(broadcast_shapes(op, a.shape(), mask.shape()) == a.shape()))
      throw ShapeError(fmt::format("[{}] mask must broadcast to the tensor's shape; expected {}; got {}", op_name(op),
                                   a.shape().to_string(), mask.shape().to_string()));
    return {};
  }
  static OutMeta meta(OpCode, const Plan&, const T& a, const T&) { return {Shape{0}, a.dtype(), a.kind, false}; }
  template <class Entry>
  [[gnu::always_inline]] static T run(OpCode op, Entry entry, const Plan&, T& a, T& mask) {
    const Kind k = a.kind;
    return {entry(op)(a.take(), mask.take()), k};
  }
};

template <> struct fwd::Rule<Family::Argwhere> : OnFirst {
  struct Plan { DType it; };
  static Plan check(OpCode op, const T& a) {
    check_kind(op, a);
    return {int_out(a.device)};
  }
  static OutMeta meta(OpCode, const Plan& p, const T& a) { return {Shape{0, a.shape().rank()}, p.it, Kind::Int, false}; }
  template <class Entry>
  [[gnu::always_inline]] static T run(OpCode op, Entry entry, const Plan& p, T& a) { return {entry(op)(a.take(), p.it), Kind::Int}; }
};

template <> struct fwd::Rule<Family::GridSample> : OnFirst {
  struct Plan {};
  using O = GridSampleOptions;
  static Plan check(OpCode op, const T& a, const T& grid, const O& options) {
    check_first(op, a);
    check_pair(op, a, grid, false);
    check_enum(op, "mode", options.mode, GridSampleOptions::Mode::Bicubic, "Bilinear, Nearest, Bicubic");
    check_enum(op, "padding mode", options.padding, GridSampleOptions::Padding::Reflection, "Zeros, Border, Reflection");
    const Shape& s = a.shape();
    const Shape& g = grid.shape();
    if (s.rank() != 4 || g.rank() != 4 || g[3] != 2 || g[0] != s[0])
      throw ShapeError(fmt::format("[{}] expected input [N,C,H,W] and grid [N,Hout,Wout,2]; got {} and {}", op_name(op),
                                   s.to_string(), g.to_string()));
    return {};
  }
  static OutMeta meta(OpCode, const Plan&, const T& a, const T& grid, const O&) {
    const Shape& s = a.shape();
    const Shape& g = grid.shape();
    return {Shape{s[0], s[1], g[1], g[2]}, a.dtype(), Kind::Float};
  }
  static OpAttrs attrs(OpCode, const Plan&, const T&, const T&, const O& options) {
    OpAttrs x;
    x.options = &options;
    return x;
  }
  template <class Entry>
  [[gnu::always_inline]] static T run(OpCode op, Entry entry, const Plan&, T& a, T& grid, const O& options) {
    return {entry(op)(a.take(), grid.take(), options), Kind::Float};
  }
};

// An index component outside its dim raises IndexError (checked by the entry: it needs the
// index values).
template <> struct fwd::Rule<Family::GatherNd> : OnFirst {
  struct Plan { Shape out; };
  static Plan check(OpCode op, const T& a, const T& idx) {
    check_first(op, a);
    check_indices(op, a, idx);
    Shape out = checked_nd_slices_shape(op, a.shape(), idx.shape());
    check_alloc_shape(op, out, a.dtype());
    return {std::move(out)};
  }
  static OutMeta meta(OpCode, const Plan& p, const T& a, const T&) { return {p.out, a.dtype(), a.kind}; }
  template <class Entry>
  [[gnu::always_inline]] static T run(OpCode op, Entry entry, const Plan&, T& a, T& idx) {
    const Kind k = a.kind;
    return {entry(op)(a.take(), idx.take()), k};
  }
};

template <> struct fwd::Rule<Family::ScatterNd> : OnFirst {
  struct Plan {};
  static Plan check(OpCode op, const T& a, const T& idx, const T& values, const Update& u) {
    check_first(op, a);
    check_indices(op, a, idx);
    check_pair(op, a, values);
    check_update(op, u);
    const Shape want = checked_nd_slices_shape(op, a.shape(), idx.shape());
    if (!(values.shape() == want))
      throw ShapeError(fmt::format("[{}] values must have the indices' leading dims and the remaining dims; expected {}; got {}",
                                   op_name(op), want.to_string(), values.shape().to_string()));
    return {};
  }
  static OutMeta meta(OpCode, const Plan&, const T& a, const T&, const T&, const Update&) { return {a.shape(), a.dtype(), a.kind}; }
  static OpAttrs attrs(OpCode, const Plan&, const T&, const T&, const T&, const Update& u) {
    OpAttrs x;
    x.update = u;
    return x;
  }
  template <class Entry>
  [[gnu::always_inline]] static T run(OpCode op, Entry entry, const Plan&, T& a, T& idx, T& values, const Update& u) {
    const Kind k = a.kind;
    return {entry(op)(a.take(), idx.take(), values.take(), u), k};
  }
};

DispatchTensor gather(DispatchTensor a, std::int64_t dim, DispatchTensor idx) {
  return forward<Family::Gather>(OpCode::gather, a, dim, idx);
}
// scatter (an update rule) and scatter_add / scatter_or are families of their own.
DispatchTensor scatter(OpCode op, DispatchTensor a, std::int64_t dim, DispatchTensor idx, DispatchTensor values,
                       IndexingUpdateOp update) {
  if (op_family(op) == Family::ScatterUpdate) return forward<Family::ScatterUpdate>(op, a, dim, idx, values, update);
  return forward<Family::Scatter>(op, a, dim, idx, values, update);
}
DispatchTensor select(DispatchTensor a, std::int64_t dim, DispatchTensor idx) {
  return forward<Family::Select>(OpCode::select, a, dim, idx);
}
DispatchTensor select_assign(OpCode op, DispatchTensor a, std::int64_t dim, DispatchTensor idx, DispatchTensor values,
                             IndexingUpdateOp update) {
  if (op_family(op) == Family::SelectUpdate) return forward<Family::SelectUpdate>(op, a, dim, idx, values, update);
  return forward<Family::SelectAssign>(op, a, dim, idx, values, update);
}
// As in burn, the tensor broadcasts too: it is repeated (a fresh buffer, never a stride-0
// view the backend might write through) up to the result's shape before the op runs.
DispatchTensor mask_where(DispatchTensor a, DispatchTensor mask, DispatchTensor value) {
  const OpCode op = OpCode::mask_where;
  const Shape out = mask_where_shape(op, a, mask, value);
  for (std::size_t i = 0; i < out.rank(); ++i)
    if (a.shape()[i] != out[i]) a = repeat_dim(std::move(a), static_cast<std::int64_t>(i), out[i]);
  return forward<Family::MaskWhere>(op, a, mask, value);
}
DispatchTensor mask_fill(DispatchTensor a, DispatchTensor mask, Scalar value) {
  return forward<Family::MaskFill>(OpCode::mask_fill, a, mask, value);
}
DispatchTensor mask_select(DispatchTensor a, DispatchTensor mask) { return forward<Family::MaskSelect>(OpCode::mask_select, a, mask); }
DispatchTensor argwhere(DispatchTensor a) { return forward<Family::Argwhere>(OpCode::argwhere, a); }
DispatchTensor grid_sample_2d(DispatchTensor a, DispatchTensor grid, const GridSampleOptions& options) {
  return forward<Family::GridSample>(OpCode::grid_sample_2d, a, grid, options);
}
DispatchTensor gather_nd(DispatchTensor a, DispatchTensor idx) { return forward<Family::GatherNd>(OpCode::gather_nd, a, idx); }
DispatchTensor scatter_nd(DispatchTensor a, DispatchTensor idx, DispatchTensor values, IndexingUpdateOp update) {
  return forward<Family::ScatterNd>(OpCode::scatter_nd, a, idx, values, update);
}

}  // namespace tensor::dispatch
