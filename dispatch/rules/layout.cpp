// Forwarders: layout (reshape, permute, slice, cat, ...). Each validates its arguments, states the output metadata and runs
// the backend entry through the one invocation path (dispatch/forward.hpp).
#include "dispatch/forward.hpp"

namespace tensor::dispatch {
using namespace fwd;

// ---- layout ------------------------------------------------------------------------

namespace {
// reshape: one -1 dim inferred, the element count kept. expand: right-aligned, source dims
// equal or 1; -1 keeps the source dim.
Shape reshaped(OpCode op, const DispatchTensor& a, std::span<const std::int64_t> dims) {
  check_first(op, a);
  const Shape& s = a.shape();
  if (dims.size() > kMaxRank)
    throw ShapeError(fmt::format("[{}] rank too large; expected at most {}; got {}", op_name(op), kMaxRank, dims.size()));
  Shape out;
  if (!op_info(op).broadcasts) {
    std::size_t known = 1;
    int infer = -1;
    for (std::size_t i = 0; i < dims.size(); ++i) {
      if (dims[i] == -1 && infer < 0) { infer = static_cast<int>(i); out.push_back(1); continue; }
      if (dims[i] < 0)
        throw ShapeError(fmt::format("[reshape] invalid dim; expected >= 0 or a single -1; got {} at {}", dims[i], i));
      out.push_back(static_cast<std::size_t>(dims[i]));
    }
    known = out.checked_num_elements("reshape");  // the -1 dim is 1 here
    if (infer >= 0) {
      if (known == 0 || s.num_elements() % known != 0)
        throw ShapeError(fmt::format("[reshape] cannot infer the -1 dim; expected {} elements to divide by {}; got shape {}",
                                     s.num_elements(), known, s.to_string()));
      out[static_cast<std::size_t>(infer)] = s.num_elements() / known;
    }
    if (out.num_elements() != s.num_elements())
      throw ShapeError(fmt::format("[reshape] element count differs; expected {} elements (shape {}); got shape {}",
                                   s.num_elements(), s.to_string(), out.to_string()));
  } else {  // expand: right-aligned, source dims equal or 1; -1 keeps the source dim
    if (dims.size() < s.rank())
      throw ShapeError(fmt::format("[expand] target rank below source rank; expected >= {}; got {}", s.rank(), dims.size()));
    const std::size_t lead = dims.size() - s.rank();
    for (std::size_t i = 0; i < dims.size(); ++i) {
      const std::int64_t t = dims[i];
      if (i < lead) {
        if (t < 0) throw ShapeError(fmt::format("[expand] new leading dim must be >= 0; got {} at {}", t, i));
        out.push_back(static_cast<std::size_t>(t));
        continue;
      }
      const std::size_t src = s[i - lead];
      const std::size_t want = t == -1 ? src : static_cast<std::size_t>(t);
      if (t < -1 || (src != want && src != 1))
        throw ShapeError(fmt::format("[expand] cannot expand {} to the target; expected dim {} to be {} or 1; got {}",
                                     s.to_string(), i - lead, t, src));
      out.push_back(want);
    }
    check_view_shape(op, out);
  }
  return out;
}
}  // namespace

using T = DispatchTensor;
using I = std::int64_t;
using Dims = std::span<const std::int64_t>;

template <> struct fwd::Rule<Family::Reshape> : OnFirst {
  struct Plan { Shape out; };
  static Plan check(OpCode op, const T& a, const Dims& dims) { return {reshaped(op, a, dims)}; }
  static OutMeta meta(OpCode, const Plan& p, const T& a, const Dims&) { return {p.out, a.dtype(), a.kind}; }
  static OpAttrs attrs(OpCode, const Plan& p, const T&, const Dims&) {
    OpAttrs x;
    x.dims = p.out.dims();
    return x;
  }
  template <class Entry>
  [[gnu::always_inline]] static T run(OpCode op, Entry entry, const Plan& p, T& a, const Dims&) {
    if (p.out == a.shape()) return std::move(a);
    const Kind k = a.kind;
    return {entry(op)(a.take(), p.out), k};
  }
};

template <> struct fwd::Rule<Family::SwapDims> : OnFirst {
  struct Plan { std::size_t x, y; };
  static Plan check(OpCode op, const T& a, const I& d0, const I& d1) {
    check_first(op, a);
    return {resolve_dim(op, d0, a.shape().rank()), resolve_dim(op, d1, a.shape().rank())};
  }
  static OutMeta meta(OpCode, const Plan& p, const T& a, const I&, const I&) {
    return {swapped_shape(a.shape(), p.x, p.y), a.dtype(), a.kind};
  }
  static OpAttrs attrs(OpCode, const Plan& p, const T&, const I&, const I&) { return with_ints(i64(p.x), i64(p.y)); }
  template <class Entry>
  [[gnu::always_inline]] static T run(OpCode op, Entry entry, const Plan& p, T& a, const I&, const I&) {
    if (p.x == p.y) return std::move(a);
    const Kind k = a.kind;
    return {entry(op)(a.take(), p.x, p.y), k};
  }
};

// Axes (permute: every dim once; flip: a subset, none is the input itself).
template <> struct fwd::Rule<Family::Axes> : OnFirst {
  struct Plan {
    std::array<std::size_t, kMaxRank> res{};
    std::size_t n = 0;
    Axes axes() const { return Axes(res.data(), n); }
  };
  static Plan check(OpCode op, const T& a, const Dims& ax) {
    check_first(op, a);
    const std::size_t r = a.shape().rank();
    if (op_info(op).reorders && ax.size() != r)
      throw ShapeError(fmt::format("[{}] expected {} axes (the rank); got {}", op_name(op), r, ax.size()));
    Plan p;
    std::array<bool, kMaxRank> seen{};
    for (std::int64_t x : ax) {
      const std::size_t d = resolve_dim(op, x, r);
      if (seen[d]) throw IndexError(fmt::format("[{}] repeated axis; expected each dim once; got {} twice", op_name(op), d));
      seen[d] = true;
      p.res[p.n++] = d;
    }
    return p;
  }
  static OutMeta meta(OpCode op, const Plan& p, const T& a, const Dims&) {
    return {op_info(op).reorders ? permuted_shape(a.shape(), p.axes()) : a.shape(), a.dtype(), a.kind};
  }
  static OpAttrs attrs(OpCode, const Plan& p, const T&, const Dims&) {
    OpAttrs x;
    x.dims = p.axes();
    return x;
  }
  template <class Entry>
  [[gnu::always_inline]] static T run(OpCode op, Entry entry, const Plan& p, T& a, const Dims&) {
    if (!op_info(op).reorders && p.n == 0) return std::move(a);
    const Kind k = a.kind;
    return {entry(op)(a.take(), p.axes()), k};
  }
};

using Slices = std::span<const tensor::Slice>;
template <> struct fwd::Rule<Family::Slice> : OnFirst {
  struct Plan { std::vector<DimSlice> ds; };
  static Plan check(OpCode op, const T& a, const Slices& slices) {
    check_first(op, a);
    return {resolve_slices(op, a.shape(), slices)};
  }
  static OutMeta meta(OpCode, const Plan& p, const T& a, const Slices&) { return {sliced_shape(a.shape(), p.ds), a.dtype(), a.kind}; }
  static OpAttrs attrs(OpCode, const Plan& p, const T&, const Slices&) {
    OpAttrs x;
    x.slices = p.ds;
    return x;
  }
  template <class Entry>
  [[gnu::always_inline]] static T run(OpCode op, Entry entry, const Plan& p, T& a, const Slices&) {
    const Kind k = a.kind;
    return {entry(op)(a.take(), DimSlices(p.ds)), k};
  }
};

// SliceAssign: the value has the slice's shape; a slice that selects nothing (one that
// clamps to empty) is a no-op whatever the value's shape, as in burn (its batched qr
// relies on it).
template <> struct fwd::Rule<Family::SliceAssign> : OnFirst {
  struct Plan { std::vector<DimSlice> ds; bool empty; };
  static Plan check(OpCode op, const T& a, const Slices& slices, const T& value) {
    check_first(op, a);
    check_pair(op, a, value);
    std::vector<DimSlice> ds = resolve_slices(op, a.shape(), slices);
    const Shape want = sliced_shape(a.shape(), ds);
    if (want.num_elements() != 0 && !(value.shape() == want))
      throw ShapeError(fmt::format("[{}] value shape differs from the slice; expected {}; got {}", op_name(op), want.to_string(),
                                   value.shape().to_string()));
    return {std::move(ds), want.num_elements() == 0};
  }
  static OutMeta meta(OpCode, const Plan&, const T& a, const Slices&, const T&) { return {a.shape(), a.dtype(), a.kind}; }
  static OpAttrs attrs(OpCode, const Plan& p, const T&, const Slices&, const T&) {
    OpAttrs x;
    x.slices = p.ds;
    return x;
  }
  template <class Entry>
  [[gnu::always_inline]] static T run(OpCode op, Entry entry, const Plan& p, T& a, const Slices&, T& value) {
    if (p.empty) return std::move(a);  // nothing to write
    const Kind k = a.kind;
    return {entry(op)(a.take(), DimSlices(p.ds), value.take()), k};
  }
};

template <> struct fwd::Rule<Family::RepeatDim> : OnFirst {
  struct Plan { std::size_t d; };
  using N = std::size_t;
  static Plan check(OpCode op, const T& a, const I& dim, const N& times) {
    check_first(op, a);
    const std::size_t d = resolve_dim(op, dim, a.shape().rank());
    check_alloc_shape(op, repeated_shape(op, a.shape(), d, times), a.dtype());
    return {d};
  }
  static OutMeta meta(OpCode, const Plan& p, const T& a, const I&, const N& times) {
    return {resized_shape(a.shape(), p.d, a.shape()[p.d] * times), a.dtype(), a.kind};
  }
  static OpAttrs attrs(OpCode, const Plan& p, const T&, const I&, const N& times) { return with_ints(i64(p.d), i64(times)); }
  template <class Entry>
  [[gnu::always_inline]] static T run(OpCode op, Entry entry, const Plan& p, T& a, const I&, const N& times) {
    if (times == 1) return std::move(a);
    const Kind k = a.kind;
    return {entry(op)(a.take(), p.d, times), k};
  }
};

// Cat: same kind, device, dtype and rank; empty parts are skipped (burn), the rest agree
// off the cat dim; all empty gives an empty tensor, one part is that part.
template <> struct fwd::Rule<Family::Cat> : RuleBase {
  using Parts = std::vector<DispatchTensor>;
  struct Plan { std::size_t d; Shape out; };
  static Plan check(OpCode op, const Parts& parts, const I& dim) {
    if (parts.empty()) throw ShapeError(fmt::format("[{}] expected at least one tensor; got an empty list", op_name(op)));
    check_first(op, parts[0]);
    const std::size_t r = parts[0].shape().rank();
    const std::size_t d = resolve_dim(op, dim, r);
    for (std::size_t i = 1; i < parts.size(); ++i) {
      check_pair(op, parts[0], parts[i]);
      if (parts[i].shape().rank() != r)
        throw ShapeError(fmt::format("[{}] ranks differ; expected {}; got {} for tensor {}", op_name(op), r,
                                     parts[i].shape().rank(), i));
    }
    const Primitive* first = nullptr;
    for (const auto& p : parts) {
      if (p.shape().num_elements() == 0) continue;
      if (!first) { first = p.prim; continue; }
      for (std::size_t j = 0; j < r; ++j)
        if (j != d && p.shape()[j] != first->shape()[j])
          throw ShapeError(fmt::format("[{}] shapes differ outside dim {}; expected {}; got {}", op_name(op), d,
                                       first->shape().to_string(), p.shape().to_string()));
    }
    Shape out = first ? first->shape() : parts[0].shape();
    out[d] = 0;
    for (const auto& p : parts)
      if (!first || p.shape().num_elements() != 0) out[d] = checked_dim_sum(op, out[d], p.shape()[d]);
    check_alloc_shape(op, out, parts[0].dtype());
    return {d, std::move(out)};
  }
  static DeviceId device(const Plan&, const Parts& parts, const I&) { return parts[0].device; }
  static OutMeta meta(OpCode, const Plan& p, const Parts& parts, const I&) { return {p.out, parts[0].dtype(), parts[0].kind}; }
  static OpAttrs attrs(OpCode, const Plan& p, const Parts&, const I&) { return with_ints(i64(p.d)); }
  template <class Entry>
  [[gnu::always_inline]] static T run(OpCode op, Entry entry, const Plan& p, Parts& parts, const I&) {
    const Kind k = parts[0].kind;
    const DeviceId dev = parts[0].device;
    const DType dt = parts[0].dtype();
    std::vector<Prim> prims;
    for (auto& part : parts)
      if (part.shape().num_elements() != 0) prims.push_back(part.take());
    if (prims.empty()) return {entry.template other<Family::Create>(OpCode::empty)(p.out, dev, dt), k};
    if (prims.size() == 1) return {std::move(prims[0]), k};
    return {entry(op)(std::move(prims), p.d), k};
  }
};

template <> struct fwd::Rule<Family::Unfold> : OnFirst {
  struct Plan { std::size_t d; };
  using N = std::size_t;
  static Plan check(OpCode op, const T& a, const I& dim, const N& size, const N& step) {
    check_first(op, a);
    const std::size_t d = resolve_dim(op, dim, a.shape().rank());
    if (size == 0 || step == 0)
      throw IndexError(fmt::format("[{}] expected size >= 1 and step >= 1; got size {} step {}", op_name(op), size, step));
    if (a.shape().rank() + 1 > kMaxRank)
      throw ShapeError(fmt::format("[{}] result rank too large; expected at most {}; got {}", op_name(op), kMaxRank,
                                   a.shape().rank() + 1));
    unfolded_shape(op, a.shape(), d, size, step);
    return {d};
  }
  static OutMeta meta(OpCode, const Plan& p, const T& a, const I&, const N& size, const N& step) {
    return {unfold_shape(a.shape(), p.d, size, step), a.dtype(), a.kind};
  }
  static OpAttrs attrs(OpCode, const Plan& p, const T&, const I&, const N& size, const N& step) {
    return with_ints(i64(p.d), i64(size), i64(step));
  }
  template <class Entry>
  [[gnu::always_inline]] static T run(OpCode op, Entry entry, const Plan& p, T& a, const I&, const N& size, const N& step) {
    const Kind k = a.kind;
    return {entry(op)(a.take(), p.d, size, step), k};
  }
};

DispatchTensor reshape(OpCode op, DispatchTensor a, std::span<const std::int64_t> dims) {
  return forward<Family::Reshape>(op, a, dims);
}
DispatchTensor swap_dims(DispatchTensor a, std::int64_t d0, std::int64_t d1) {
  return forward<Family::SwapDims>(OpCode::swap_dims, a, d0, d1);
}
DispatchTensor axes(OpCode op, DispatchTensor a, std::span<const std::int64_t> ax) { return forward<Family::Axes>(op, a, ax); }
DispatchTensor slice(DispatchTensor a, std::span<const tensor::Slice> slices) {
  return forward<Family::Slice>(OpCode::slice, a, slices);
}
DispatchTensor slice_assign(DispatchTensor a, std::span<const tensor::Slice> slices, DispatchTensor value) {
  return forward<Family::SliceAssign>(OpCode::slice_assign, a, slices, value);
}
DispatchTensor repeat_dim(DispatchTensor a, std::int64_t dim, std::size_t times) {
  return forward<Family::RepeatDim>(OpCode::repeat_dim, a, dim, times);
}
DispatchTensor cat(std::vector<DispatchTensor> parts, std::int64_t dim) { return forward<Family::Cat>(OpCode::cat, parts, dim); }
DispatchTensor unfold(DispatchTensor a, std::int64_t dim, std::size_t size, std::size_t step) {
  return forward<Family::Unfold>(OpCode::unfold, a, dim, size, step);
}

}  // namespace tensor::dispatch
