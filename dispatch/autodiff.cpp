// The autodiff decorator backend (SPEC §7, reference/autodiff.md). A primitive of an
// autodiff device wraps the inner device's primitive and, for a Float tensor in a graph,
// a node: its parents, its depth and the backward step that maps the gradient of its
// output to the gradients of its parents. Entries unwrap, run the inner backend's entry
// and wrap; a differentiable op with a tracked input records a node. The backward steps
// compute on the inner device through Dispatch's forwarders, so they pass the hooks
// (the profiler sees them) and never leave the device.
#include "dispatch/autodiff.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <functional>
#include <limits>
#include <mutex>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

#include "dispatch/backend.hpp"
#include "dispatch/settings.hpp"
#include "dispatch/validate.hpp"
#include "tensor/error.hpp"

namespace tensor::dispatch::ad {
namespace {

using T = DispatchTensor;

// ---- graph ---------------------------------------------------------------------------

struct Node;
using NodeRef = std::shared_ptr<Node>;
// Writes the gradient of parent i into out[i] for each bit i of `need` (the parents that
// are tracked); `g` is the gradient of the node's output.
using BackwardFn = std::function<void(const T& g, std::uint32_t need, std::span<T> out)>;

std::atomic<std::uint64_t> g_next_id{1};

struct Node {
  std::uint64_t id = g_next_id.fetch_add(1, std::memory_order_relaxed);
  std::uint32_t order = 0;        // depth: 0 for leaves, 1 + the deepest parent otherwise
  bool leaf = false;              // requirement Grad: a leaf whose gradient is kept
  OpCode op = OpCode::detach;     // the op that made it (messages)
  std::vector<NodeRef> parents;   // null where the input is untracked
  std::mutex mu;                  // guards fn and consumed
  BackwardFn fn;                  // saved state; null for leaves and once consumed
  bool consumed = false;

  Node() = default;
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;
  // A long chain would otherwise free itself recursively (one frame per node).
  ~Node() {
    thread_local std::vector<NodeRef>* pending = nullptr;
    if (pending) {
      for (NodeRef& p : parents)
        if (p) pending->push_back(std::move(p));
      return;
    }
    std::vector<NodeRef> list;
    pending = &list;
    for (NodeRef& p : parents)
      if (p) list.push_back(std::move(p));
    while (!list.empty()) {
      NodeRef n = std::move(list.back());
      list.pop_back();
      n.reset();  // may append its own parents
    }
    pending = nullptr;
  }
};

// Balanced checkpointing (reference/autodiff.md): the output of a memory-bound op
// (elementwise unary and scalar ops) carries the recipe that recomputes it, a base
// tensor kept by the graph and the ops applied to it in order. A memory-bound op's
// backward step saves its input's recipe instead of its input or output, so the
// intermediates of a chain of such ops are freed after the forward pass and recomputed
// during backward.
struct RecipeStep {
  OpCode op;
  std::optional<Scalar> s;  // the scalar of a Scalar-family op
};
struct Recipe {
  Prim base;  // an inner tensor
  std::vector<RecipeStep> steps;
};
using RecipeRef = std::shared_ptr<const Recipe>;
// Longer chains start again from a saved base (replaying is O(chain) per step).
constexpr std::size_t kMaxRecipe = 8;

class AdTensor final : public Primitive {
 public:
  AdTensor(Prim inner, NodeRef node, DeviceId device)
      : Primitive(inner->dtype(), inner->shape(), device), inner_(std::move(inner)), node_(std::move(node)) {}
  bool can_mut() const override { return unique_ref() && inner_->can_mut(); }
  Prim inner_;
  NodeRef node_;
  RecipeRef recipe_;  // balanced checkpointing: how to recompute inner_ (memory-bound ops)
};

// The autodiff device type an entry is running for: the decorator's entries serve both
// strategies of an inner type (type + 8, type + 16), so the first tensor or device
// argument an entry opens notes its offset here, and the results are wrapped for the
// same device. Entries never interleave across devices on one thread (the backward
// steps run on the inner device), so a per-thread note is enough.
thread_local std::uint16_t t_offset = kAutodiffTypeOffset;
void note(DeviceId ad) { t_offset = is_balanced_device(ad) ? kBalancedTypeOffset : kAutodiffTypeOffset; }
bool balanced() { return t_offset == kBalancedTypeOffset; }
DeviceId ad_of(DeviceId inner) { return {static_cast<std::uint16_t>(inner.type_id + t_offset), inner.index_id}; }

Prim wrap(Prim inner, NodeRef node = {}) {
  const DeviceId d = ad_of(inner->device());
  return Prim::adopt(new AdTensor(std::move(inner), std::move(node), d));
}
AdTensor& as_ad(const Prim& p) { return static_cast<AdTensor&>(*p); }
const NodeRef& node_of(const Prim& p) { return as_ad(p).node_; }
// The inner primitive; a unique wrapper passes ownership on (the buffer may be reused).
Prim unwrap(Prim p) {
  note(p->device());
  AdTensor& a = as_ad(p);
  return p->unique_ref() ? std::move(a.inner_) : a.inner_;
}

// One tensor argument of a tracking entry: its inner primitive and node.
struct In {
  Prim p;
  NodeRef node;
  RecipeRef recipe;  // balanced checkpointing: how p is recomputed (null: p is kept)
};
In open(Prim&& a) {
  note(a->device());
  NodeRef n = node_of(a);
  RecipeRef r = n ? as_ad(a).recipe_ : nullptr;
  return {n ? as_ad(a).inner_ : unwrap(std::move(a)), std::move(n), std::move(r)};  // saved inputs keep a reference
}

T dt(Prim p) {
  const Kind k = is_float(p->dtype()) ? Kind::Float : is_int(p->dtype()) ? Kind::Int : Kind::Bool;
  return T(std::move(p), k);
}

// Records `out` (an inner primitive) as the output of `op` with the given parents.
template <std::size_t N>
Prim record(OpCode op, Prim out, std::array<NodeRef, N> parents, BackwardFn fn) {
  bool any = false;
  for (const NodeRef& p : parents) any = any || p;
  if (!any || !is_float(out->dtype())) return wrap(std::move(out));
  auto n = std::make_shared<Node>();
  n->op = op;
  for (NodeRef& p : parents) {
    if (p) n->order = std::max(n->order, p->order + 1);
    n->parents.push_back(std::move(p));
  }
  n->fn = std::move(fn);
  return wrap(std::move(out), std::move(n));
}

// ---- math on the inner device (through Dispatch's forwarders) -------------------------

std::vector<std::int64_t> dims_of(const Shape& s) {
  std::vector<std::int64_t> v(s.rank());
  for (std::size_t i = 0; i < s.rank(); ++i) v[i] = static_cast<std::int64_t>(s[i]);
  return v;
}
std::int64_t i64(std::size_t v) { return static_cast<std::int64_t>(v); }

T mul(T a, T b) { return binary(OpCode::mul, std::move(a), std::move(b)); }
T dvd(T a, T b) { return binary(OpCode::div, std::move(a), std::move(b)); }
T add(T a, T b) { return binary(OpCode::add, std::move(a), std::move(b)); }
T sub(T a, T b) { return binary(OpCode::sub, std::move(a), std::move(b)); }
T muls(T a, double s) { return scalar(OpCode::mul_scalar, std::move(a), Scalar(s)); }
T adds(T a, double s) { return scalar(OpCode::add_scalar, std::move(a), Scalar(s)); }
T neg(T a) { return muls(std::move(a), -1.0); }
T un(OpCode op, T a) { return unary(op, std::move(a)); }
T sq(const T& a) { return mul(a, a); }
T zeros(const Shape& s, const T& like) { return create(OpCode::zeros, s, like.device, Kind::Float, like.dtype()); }
T zeros_like(const T& a) { return zeros(a.shape(), a); }
T ones_like(const T& a) { return create(OpCode::ones, a.shape(), a.device, Kind::Float, a.dtype()); }
T reshape_to(T a, const Shape& s) { const auto d = dims_of(s); return reshape(OpCode::reshape, std::move(a), d); }
T expand_to(T a, const Shape& s) { const auto d = dims_of(s); return reshape(OpCode::expand, std::move(a), d); }
T swap_last(T a) {
  const auto r = i64(a.shape().rank());
  return swap_dims(std::move(a), r - 2, r - 1);
}
T flip_dim(T a, std::size_t d) {
  const std::int64_t ax[1] = {i64(d)};
  return axes(OpCode::flip, std::move(a), ax);
}

// Sums a broadcast gradient back to the operand's shape. Dims align from the right (the
// broadcast rule): the operand's size-1 dims and every leading dim `g` has beyond the
// operand's rank (an expand that adds dims) are summed; sum_dim keeps them as size 1.
T sum_to(T g, const Shape& s) {
  if (g.shape() == s) return g;
  const std::size_t gr = g.shape().rank(), sr = s.rank();
  const std::size_t lead = gr > sr ? gr - sr : 0;
  for (std::size_t i = 0; i < sr && lead + i < gr; ++i)
    if (s[i] == 1 && g.shape()[lead + i] != 1) g = reduce_dim(OpCode::sum_dim, std::move(g), i64(lead + i));
  for (std::size_t i = 0; i < lead; ++i)
    if (g.shape()[i] != 1) g = reduce_dim(OpCode::sum_dim, std::move(g), i64(i));
  return g.shape() == s ? g : reshape_to(std::move(g), s);
}
// The gradient of a full reduction (shape [1]) spread over `s`.
T spread(T g, const Shape& s) {
  Shape ones = s;
  for (std::size_t i = 0; i < ones.rank(); ++i) ones[i] = 1;
  return expand_to(reshape_to(std::move(g), ones), s);
}
// Exclusive products along `d` from the start (inclusive = false shifts cumprod by one).
T exclusive_cumprod(const T& x, std::size_t d) {
  const std::size_t n = x.shape()[d];
  T c = reduce_dim(OpCode::cumprod, x, i64(d));
  Shape one = x.shape();
  one[d] = 1;
  T first = create(OpCode::ones, one, x.device, Kind::Float, x.dtype());
  if (n <= 1) return first.shape() == x.shape() ? first : expand_to(std::move(first), x.shape());
  std::vector<tensor::Slice> sl(x.shape().rank(), tensor::Slice::all());
  sl[d] = tensor::Slice::range(0, i64(n - 1));
  std::vector<T> parts;
  parts.push_back(std::move(first));
  parts.push_back(slice(std::move(c), sl));
  return cat(std::move(parts), i64(d));
}
// d prod / d x_i along `d`: the product of the other elements (exact with zeros).
T prod_grad(const T& x, std::size_t d) {
  T pre = exclusive_cumprod(x, d);
  T post = flip_dim(exclusive_cumprod(flip_dim(x, d), d), d);
  return mul(std::move(pre), std::move(post));
}
// d cumprod: dL/dx_j = sum_{i>=j} g_i prod_{k<=i, k!=j} x_k, exact with zeros (burn's
// sum_{i>=j} g_i y_i / x_j divides by zero). A new dim j of n copies of x, each with
// x_j replaced by 1, is cumprod'ed along d (the i dim): c[j][i] = prod_{k<=i, k!=j} x_k;
// times g_i, masked to i >= j, summed over i. O(n) times the memory of x, with no
// read-back; cumprod lanes are short in practice.
T cumprod_grad(const T& g, const T& x, std::size_t d) {
  const std::size_t n = x.shape()[d], r = x.shape().rank();
  if (n <= 1) return g;
  const DType it = to_dtype(device_settings(x.device).int_dtype);
  // Shape with the j dim inserted before d: [.., n(j), n(i), ..].
  Shape big;
  for (std::size_t k = 0; k < r; ++k) {
    if (k == d) big.push_back(n);
    big.push_back(x.shape()[k]);
  }
  auto at = [&](Shape s, std::size_t k) {  // s with a 1 inserted at k
    Shape o;
    for (std::size_t q = 0; q <= s.rank(); ++q) {
      if (q == k) o.push_back(1);
      if (q < s.rank()) o.push_back(s[q]);
    }
    return o;
  };
  // j index along dim d, i index along dim d + 1 of `big`, as int tensors broadcast to it.
  Shape jline, iline;
  for (std::size_t k = 0; k <= r; ++k) {
    jline.push_back(k == d ? n : 1);
    iline.push_back(k == d + 1 ? n : 1);
  }
  T jj = expand_to(reshape_to(arange(0, i64(n), 1, x.device, it), jline), big);
  T ii = expand_to(reshape_to(arange(0, i64(n), 1, x.device, it), iline), big);
  T xs = expand_to(reshape_to(x, at(x.shape(), d)), big);
  T c = reduce_dim(OpCode::cumprod, mask_fill(std::move(xs), compare(OpCode::equal, jj, ii), Scalar(1.0)), i64(d + 1));
  T gi = expand_to(reshape_to(g, at(g.shape(), d)), big);
  T terms = mask_fill(mul(std::move(c), std::move(gi)), compare(OpCode::lower, ii, jj), Scalar(0.0));
  return reshape_to(reduce_dim(OpCode::sum_dim, std::move(terms), i64(d + 1)), x.shape());
}
// A DimSlice as the public Slice selecting the same elements in the same order.
tensor::Slice public_slice(const DimSlice& s) {
  if (s.len == 0) return tensor::Slice::range(0, 0);
  if (s.step > 0) return tensor::Slice::range(s.start, s.start + static_cast<std::int64_t>(s.len) * s.step, s.step);
  return tensor::Slice::range(s.start + static_cast<std::int64_t>(s.len - 1) * s.step, s.start + 1, s.step);
}
std::vector<tensor::Slice> public_slices(std::span<const DimSlice> ds) {
  std::vector<tensor::Slice> v;
  for (const DimSlice& s : ds) v.push_back(public_slice(s));
  return v;
}
// Scatters `g` (shaped like `idx`) into zeros shaped like `x` along `d`.
T scatter_into(const Shape& s, const T& like, std::size_t d, T idx, T g) {
  return scatter(OpCode::scatter_add, zeros(s, like), i64(d), std::move(idx), std::move(g), IndexingUpdateOp::Add);
}
T cast_to(T g, DType t) { return g.dtype() == t ? g : cast(OpCode::cast, std::move(g), t); }

// ---- backward steps, by family ----------------------------------------------------------

constexpr double kTwoOverSqrtPi = 1.12837916709551257390;

// d y / d x of a unary op, times g; x the input, y the output.
T unary_grad(OpCode op, const T& g, const T& x, const T& y) {
  switch (op) {
    case OpCode::neg: return neg(g);
    case OpCode::recip: return neg(mul(g, sq(y)));
    case OpCode::sqrt: return dvd(g, muls(y, 2.0));
    case OpCode::exp: return mul(g, y);
    case OpCode::log: return dvd(g, x);
    case OpCode::log1p: return dvd(g, adds(x, 1.0));
    case OpCode::abs: return mul(g, un(OpCode::sign, x));
    case OpCode::cos: return neg(mul(g, un(OpCode::sin, x)));
    case OpCode::sin: return mul(g, un(OpCode::cos, x));
    case OpCode::tan: return mul(g, adds(sq(y), 1.0));
    case OpCode::cosh: return mul(g, un(OpCode::sinh, x));
    case OpCode::sinh: return mul(g, un(OpCode::cosh, x));
    case OpCode::tanh: return mul(g, adds(neg(sq(y)), 1.0));
    case OpCode::acos: return neg(dvd(g, un(OpCode::sqrt, adds(neg(sq(x)), 1.0))));
    case OpCode::asin: return dvd(g, un(OpCode::sqrt, adds(neg(sq(x)), 1.0)));
    case OpCode::acosh: return dvd(g, un(OpCode::sqrt, adds(sq(x), -1.0)));
    case OpCode::asinh: return dvd(g, un(OpCode::sqrt, adds(sq(x), 1.0)));
    case OpCode::atan: return dvd(g, adds(sq(x), 1.0));
    case OpCode::atanh: return dvd(g, adds(neg(sq(x)), 1.0));
    case OpCode::erf: return mul(g, muls(un(OpCode::exp, neg(sq(x))), kTwoOverSqrtPi));
    case OpCode::round: case OpCode::floor: case OpCode::ceil: case OpCode::trunc: case OpCode::sign:
      return zeros_like(g);
    case OpCode::relu: return binary(OpCode::relu_backward, y, g);
    case OpCode::sigmoid: return binary(OpCode::sigmoid_backward, y, g);
    case OpCode::log_sigmoid: return binary(OpCode::log_sigmoid_backward, x, g);
    case OpCode::gelu: return binary(OpCode::gelu_backward, x, g);  // exact: Φ(x) + x·φ(x)
    default: break;
  }
  throw Error(fmt::format("[{}] internal: no backward step", op_name(op)));
}

// What a unary op's backward step reads: its input, its output or neither.
enum class Needs : std::uint8_t { Nothing, X, Y };
constexpr Needs unary_needs(OpCode op) {
  switch (op) {
    case OpCode::recip: case OpCode::sqrt: case OpCode::exp: case OpCode::tan: case OpCode::tanh: case OpCode::relu:
    case OpCode::sigmoid:
      return Needs::Y;
    case OpCode::neg: case OpCode::round: case OpCode::floor: case OpCode::ceil: case OpCode::trunc: case OpCode::sign:
      return Needs::Nothing;
    default: return Needs::X;
  }
}

constexpr bool unary_rule(OpCode op) {
  switch (op) {
    case OpCode::neg: case OpCode::recip: case OpCode::sqrt: case OpCode::exp: case OpCode::log: case OpCode::log1p:
    case OpCode::abs: case OpCode::cos: case OpCode::sin: case OpCode::tan: case OpCode::cosh: case OpCode::sinh:
    case OpCode::tanh: case OpCode::acos: case OpCode::asin: case OpCode::acosh: case OpCode::asinh: case OpCode::atan:
    case OpCode::atanh: case OpCode::erf: case OpCode::round: case OpCode::floor: case OpCode::ceil: case OpCode::trunc:
    case OpCode::sign: case OpCode::relu: case OpCode::sigmoid: case OpCode::log_sigmoid: case OpCode::gelu:
      return true;
    default: return false;
  }
}

// What a binary op's backward step reads (bits: 1 a, 2 b, 4 y); the shapes are kept anyway.
constexpr std::uint32_t binary_reads(OpCode op) {
  switch (op) {
    case OpCode::add: case OpCode::sub: return 0;
    case OpCode::mul: case OpCode::remainder: case OpCode::atan2: return 1 | 2;
    case OpCode::div: return 2 | 4;
    default: return 1 | 2 | 4;  // powf, hypot
  }
}

// a, b, y: the operands and the output (empty where binary_reads says unread).
void binary_grad(OpCode op, const T& g, const Shape& as, const Shape& bs, const T& a, const T& b, const T& y,
                 std::uint32_t need, std::span<T> out) {
  const bool na = need & 1, nb = need & 2;
  switch (op) {
    case OpCode::add:
      if (na) out[0] = sum_to(g, as);
      if (nb) out[1] = sum_to(g, bs);
      return;
    case OpCode::sub:
      if (na) out[0] = sum_to(g, as);
      if (nb) out[1] = sum_to(neg(g), bs);
      return;
    case OpCode::mul:
      if (na) out[0] = sum_to(mul(g, b), as);
      if (nb) out[1] = sum_to(mul(g, a), bs);
      return;
    case OpCode::div:
      if (na) out[0] = sum_to(dvd(g, b), as);
      if (nb) out[1] = sum_to(neg(dvd(mul(g, y), b)), bs);
      return;
    case OpCode::remainder:  // a - b·floor(a/b)
      if (na) out[0] = sum_to(g, as);
      if (nb) out[1] = sum_to(neg(mul(g, un(OpCode::floor, dvd(a, b)))), bs);
      return;
    case OpCode::powf:
      if (na) out[0] = sum_to(mul(mul(g, b), binary(OpCode::powf, a, adds(b, -1.0))), as);
      if (nb) out[1] = sum_to(mul(mul(g, y), un(OpCode::log, a)), bs);
      return;
    case OpCode::atan2: {  // atan2(a, b): d/da = b/(a²+b²), d/db = -a/(a²+b²)
      T den = add(sq(a), sq(b));
      if (na) out[0] = sum_to(dvd(mul(g, b), den), as);
      if (nb) out[1] = sum_to(neg(dvd(mul(g, a), den)), bs);
      return;
    }
    case OpCode::hypot:
      if (na) out[0] = sum_to(dvd(mul(g, a), y), as);
      if (nb) out[1] = sum_to(dvd(mul(g, b), y), bs);
      return;
    default: break;
  }
  throw Error(fmt::format("[{}] internal: no backward step", op_name(op)));
}
constexpr bool binary_rule(OpCode op) {
  switch (op) {
    case OpCode::add: case OpCode::sub: case OpCode::mul: case OpCode::div: case OpCode::remainder: case OpCode::powf:
    case OpCode::atan2: case OpCode::hypot:
      return true;
    default: return false;
  }
}

T scalar_grad(OpCode op, const T& g, const T& x, Scalar s) {
  const double v = s.to_double();
  switch (op) {
    case OpCode::add_scalar: case OpCode::sub_scalar: case OpCode::remainder_scalar: return g;
    case OpCode::mul_scalar: return muls(g, v);
    case OpCode::div_scalar: return muls(g, 1.0 / v);
    case OpCode::powf_scalar_impl:
      return mul(muls(g, v), scalar(OpCode::powf_scalar_impl, x, Scalar(v - 1.0)));
    default: break;
  }
  throw Error(fmt::format("[{}] internal: no backward step", op_name(op)));
}
constexpr bool scalar_rule(OpCode op) {
  switch (op) {
    case OpCode::add_scalar: case OpCode::sub_scalar: case OpCode::remainder_scalar: case OpCode::mul_scalar:
    case OpCode::div_scalar: case OpCode::powf_scalar_impl:
      return true;
    default: return false;
  }
}

// What an along-dim op's backward step reads (bits: 1 x, 2 y); x's shape is kept anyway.
constexpr std::uint32_t dim_reads(OpCode op) {
  switch (op) {
    case OpCode::sum_dim: case OpCode::mean_dim: case OpCode::cumsum: return 0;
    case OpCode::prod_dim: case OpCode::cumprod: return 1;
    case OpCode::softmax: case OpCode::log_softmax: return 2;
    default: return 1 | 2;  // cummax, cummin
  }
}

// Along-dim ops (Dim family): x input (shape xs), y output, d the dim.
T dim_grad(OpCode op, const T& g, const Shape& xs, const T& x, const T& y, std::size_t d) {
  const std::int64_t dd = i64(d);
  switch (op) {
    case OpCode::sum_dim: return expand_to(g, xs);
    case OpCode::mean_dim: return muls(expand_to(g, xs), 1.0 / static_cast<double>(std::max<std::size_t>(xs[d], 1)));
    case OpCode::prod_dim: return mul(expand_to(g, x.shape()), prod_grad(x, d));
    case OpCode::cumsum: return flip_dim(reduce_dim(OpCode::cumsum, flip_dim(g, d), dd), d);
    case OpCode::cumprod: return cumprod_grad(g, x, d);
    case OpCode::cummax: case OpCode::cummin: {
      // Each output takes its gradient to the (last) position its running extremum came from.
      const DType it = to_dtype(device_settings(x.device).int_dtype);
      Shape line = x.shape();
      for (std::size_t i = 0; i < line.rank(); ++i) line[i] = i == d ? line[i] : 1;
      T pos = expand_to(reshape_to(arange(0, i64(x.shape()[d]), 1, x.device, it), line), x.shape());
      T hit = compare(OpCode::equal, x, y);
      T src = mask_where(create(OpCode::zeros, x.shape(), x.device, Kind::Int, it), std::move(hit), std::move(pos));
      T idx = reduce_dim(OpCode::cummax, std::move(src), dd);
      return scatter_into(x.shape(), x, d, std::move(idx), g);
    }
    case OpCode::softmax: return mul(y, sub(g, reduce_dim(OpCode::sum_dim, mul(g, y), dd)));
    case OpCode::log_softmax: return sub(g, mul(un(OpCode::exp, y), reduce_dim(OpCode::sum_dim, g, dd)));
    default: break;
  }
  throw Error(fmt::format("[{}] internal: no backward step", op_name(op)));
}
constexpr bool dim_rule(OpCode op) {
  switch (op) {
    case OpCode::sum_dim: case OpCode::mean_dim: case OpCode::prod_dim: case OpCode::cumsum: case OpCode::cumprod:
    case OpCode::cummax: case OpCode::cummin: case OpCode::softmax: case OpCode::log_softmax:
      return true;
    default: return false;
  }
}

// ---- the decorator's entries ----------------------------------------------------------------

const Backend& inner_backend(DeviceId inner) { return Registry::instance().get(inner.type_id); }
template <Family F>
FamilyFn<F> inner_fn(OpCode op, DeviceId inner) {
  const Backend& b = inner_backend(inner);
  auto fn = b.get<F>(op);
  if (!fn) throw_not_implemented(op, b);
  return fn;
}
template <Family F, class... A>
auto run_inner(OpCode op, const Prim& first, A&&... args) {
  return inner_fn<F>(op, first->device())(std::forward<A>(args)...);
}

// Pass-through: unwraps every tensor argument, runs the inner entry and wraps the result
// untracked. Used for ops that carry no gradient, and (raising) for a tracked input of
// a differentiable op without a backward step.
template <class V> struct Conv {
  template <class U> static decltype(auto) in(U&& v) { return std::forward<U>(v); }
  template <class U> static decltype(auto) out(U&& v) { return std::forward<U>(v); }
};
template <> struct Conv<Prim> {
  static Prim in(Prim p) { return p ? unwrap(std::move(p)) : Prim(); }  // null: an absent optional tensor
  static Prim out(Prim p) { return wrap(std::move(p)); }
};
template <> struct Conv<const Prim&> {
  static const Prim& in(const Prim& p) {
    note(p->device());
    return as_ad(p).inner_;
  }
};
template <> struct Conv<PrimPair> {
  static PrimPair out(PrimPair p) { return {wrap(std::move(p.first)), wrap(std::move(p.second))}; }
};
template <> struct Conv<std::vector<Prim>> {
  static std::vector<Prim> in(std::vector<Prim> v) {
    for (Prim& p : v) p = unwrap(std::move(p));
    return v;
  }
  static std::vector<Prim> out(std::vector<Prim> v) {  // a null entry (an absent gradient) stays null
    for (Prim& p : v)
      if (p) p = wrap(std::move(p));
    return v;
  }
};
template <> struct Conv<DeviceId> {
  static DeviceId in(DeviceId d) {
    note(d);
    return autodiff_inner(d);
  }
};

template <class V> DeviceId inner_dev(const V&) { return {}; }
inline DeviceId inner_dev(const Prim& p) { return as_ad(p).inner_->device(); }
inline DeviceId inner_dev(const std::vector<Prim>& v) { return v.empty() ? DeviceId{} : as_ad(v[0]).inner_->device(); }
inline DeviceId inner_dev(DeviceId d) { return autodiff_inner(d); }
template <class V> bool tracked_arg(const V&) { return false; }
inline bool tracked_arg(const Prim& p) { return node_of(p) != nullptr; }
inline bool tracked_arg(const std::vector<Prim>& v) {
  return std::any_of(v.begin(), v.end(), [](const Prim& p) { return node_of(p) != nullptr; });
}

template <class V> constexpr bool names_device = std::is_same_v<V, Prim> || std::is_same_v<V, std::vector<Prim>> ||
                                                std::is_same_v<V, DeviceId>;
// The inner device of the first argument that names one.
template <class... A>
DeviceId pick_device(const A&... args) {
  DeviceId pick{};
  bool have = false;
  auto take = [&](const auto& a) {
    using U = std::decay_t<decltype(a)>;
    if constexpr (names_device<U>) {
      if constexpr (std::is_same_v<U, std::vector<Prim>>) {
        if (a.empty()) return;
      }
      if (!have) pick = inner_dev(a), have = true;
    }
  };
  (take(args), ...);
  return pick;
}

constexpr Coverage coverage_of(OpCode op);
// The module ops' backward entries: differentiating them is second-order autodiff.
constexpr bool second_order(OpCode op) {
  switch (op_family(op)) {
    case Family::ConvBackward: case Family::ConvBiasBackward: case Family::PoolBackward: case Family::MaxPoolBackward:
    case Family::InterpolateBackward: case Family::EmbeddingBackward: case Family::CtcLossBackward:
    case Family::DeformConvBackward:
      return true;
    default: return false;
  }
}

template <OpCode op, class Fn> struct Pass;
template <OpCode op, class R, class... A>
struct Pass<op, R (*)(A...)> {
  static R call(A... args) {
    if constexpr (coverage_of(op) == Coverage::Missing) {
      if ((tracked_arg(args) || ...))
        throw Error(fmt::format("[{}] has no backward on autodiff devices; expected inputs that do not require grad; "
                                "got a tracked tensor (detach() it first)",
                                op_name(op)));
    } else if constexpr (second_order(op)) {
      if ((tracked_arg(args) || ...))
        throw Error(fmt::format("[{}] is a backward entry and second-order autodiff is not supported; expected "
                                "inputs that do not require grad; got a tracked tensor (detach() it first)",
                                op_name(op)));
    }
    const auto fn = inner_fn<op_family(op)>(op, pick_device(args...));
    if constexpr (std::is_void_v<R>) fn(Conv<A>::in(std::forward<A>(args))...);
    else return Conv<R>::out(fn(Conv<A>::in(std::forward<A>(args))...));
  }
};

// ---- tracking entries, one template per family ----

// Balanced checkpointing: the recipe of a memory-bound op's input (its own, or the
// input itself as a base) and of its output.
RecipeRef input_recipe(const In& x) {
  if (x.recipe && x.recipe->steps.size() < kMaxRecipe) return x.recipe;
  return std::make_shared<const Recipe>(Recipe{x.p, {}});
}
RecipeRef extend(const RecipeRef& r, RecipeStep s) {
  auto o = std::make_shared<Recipe>(*r);
  o->steps.push_back(s);
  return o;
}
T replay(const Recipe& r) {
  T v = dt(r.base);
  for (const RecipeStep& s : r.steps) v = s.s ? scalar(s.op, std::move(v), *s.s) : un(s.op, std::move(v));
  return v;
}
// A tensor a backward step reads: kept, or (balanced checkpointing, for the output of a
// memory-bound op) recomputed from its recipe when the step runs.
struct Saved {
  T t;
  RecipeRef r;
  T get() const { return r ? replay(*r) : t; }
};
Saved save(const In& x) {
  if (balanced() && x.recipe) return {T(), x.recipe};
  return {dt(x.p), nullptr};
}
Prim with_recipe(Prim out, RecipeRef r) {
  if (as_ad(out).node_) as_ad(out).recipe_ = std::move(r);
  return out;
}

template <OpCode op>
Prim t_unary(Prim a) {
  constexpr Needs nd = unary_needs(op);
  In x = open(std::move(a));
  if (!x.node) return wrap(run_inner<Family::Unary>(op, x.p, std::move(x.p)));
  Prim y = run_inner<Family::Unary>(op, x.p, x.p);
  if (balanced()) {  // keep the recipe of what the step reads, not the tensor
    RecipeRef rx = input_recipe(x);
    RecipeRef ry = extend(rx, RecipeStep{op, std::nullopt});
    RecipeRef keep = nd == Needs::X ? rx : nd == Needs::Y ? ry : nullptr;
    Prim res = record<1>(op, std::move(y), {x.node}, [keep](const T& g, std::uint32_t, std::span<T> out) {
      const T v = keep ? replay(*keep) : T();
      out[0] = unary_grad(op, g, nd == Needs::X ? v : T(), nd == Needs::Y ? v : T());
    });
    return with_recipe(std::move(res), std::move(ry));
  }
  T keep = nd == Needs::X ? dt(x.p) : nd == Needs::Y ? dt(y) : T();  // only what the step reads
  return record<1>(op, std::move(y), {x.node}, [keep = std::move(keep)](const T& g, std::uint32_t, std::span<T> out) {
    out[0] = unary_grad(op, g, nd == Needs::X ? keep : T(), nd == Needs::Y ? keep : T());
  });
}

Prim t_detach(Prim a) { return wrap(unwrap(std::move(a))); }

template <OpCode op>
Prim t_binary(Prim a, Prim b) {
  constexpr std::uint32_t reads = binary_reads(op);
  In x = open(std::move(a)), w = open(std::move(b));
  if (!x.node && !w.node) return wrap(run_inner<Family::Binary>(op, x.p, std::move(x.p), std::move(w.p)));
  Prim y = run_inner<Family::Binary>(op, x.p, x.p, w.p);
  const Shape as = x.p->shape(), bs = w.p->shape();
  Saved sa = (reads & 1) ? save(x) : Saved{}, sb = (reads & 2) ? save(w) : Saved{};
  T ys = (reads & 4) ? dt(y) : T();
  return record<2>(op, std::move(y), {x.node, w.node},
                   [as, bs, sa = std::move(sa), sb = std::move(sb), ys = std::move(ys)](const T& g, std::uint32_t need, std::span<T> out) {
                     binary_grad(op, g, as, bs, sa.get(), sb.get(), ys, need, out);
                   });
}

template <OpCode op>
Prim t_scalar(Prim a, Scalar s) {
  constexpr bool reads_x = op == OpCode::powf_scalar_impl;
  In x = open(std::move(a));
  if (!x.node) return wrap(run_inner<Family::Scalar>(op, x.p, std::move(x.p), s));
  Prim y = run_inner<Family::Scalar>(op, x.p, x.p, s);
  if (balanced()) {
    RecipeRef rx = input_recipe(x);
    RecipeRef ry = extend(rx, RecipeStep{op, s});
    Prim res = record<1>(op, std::move(y), {x.node}, [keep = reads_x ? rx : nullptr, s](const T& g, std::uint32_t, std::span<T> out) {
      out[0] = scalar_grad(op, g, keep ? replay(*keep) : T(), s);
    });
    return with_recipe(std::move(res), std::move(ry));
  }
  return record<1>(op, std::move(y), {x.node}, [xs = reads_x ? dt(x.p) : T(), s](const T& g, std::uint32_t, std::span<T> out) {
    out[0] = scalar_grad(op, g, xs, s);
  });
}

Prim t_matmul(Prim a, Prim b) {
  constexpr OpCode op = OpCode::matmul;
  In x = open(std::move(a)), w = open(std::move(b));
  if (!x.node && !w.node) return wrap(run_inner<Family::Matmul>(op, x.p, std::move(x.p), std::move(w.p)));
  Prim y = run_inner<Family::Matmul>(op, x.p, x.p, w.p);
  // dA reads B, dB reads A: an operand is kept only when the other one is tracked.
  const Shape ash = x.p->shape(), bsh = w.p->shape();
  Saved sa = w.node ? save(x) : Saved{}, sb = x.node ? save(w) : Saved{};
  return record<2>(op, std::move(y), {x.node, w.node}, [ash, bsh, sa = std::move(sa), sb = std::move(sb)](const T& g, std::uint32_t need, std::span<T> out) {
    if (need & 1) out[0] = sum_to(matmul(g, swap_last(sb.get())), ash);
    if (need & 2) out[1] = sum_to(matmul(swap_last(sa.get()), g), bsh);
  });
}

Prim t_cross(Prim a, Prim b, std::size_t d) {
  constexpr OpCode op = OpCode::cross;
  In x = open(std::move(a)), w = open(std::move(b));
  if (!x.node && !w.node) return wrap(run_inner<Family::Cross>(op, x.p, std::move(x.p), std::move(w.p), d));
  Prim y = run_inner<Family::Cross>(op, x.p, x.p, w.p, d);
  return record<2>(op, y, {x.node, w.node}, [as = dt(x.p), bs = dt(w.p), d](const T& g, std::uint32_t need, std::span<T> out) {
    // y = a × b: dL/da = b × g, dL/db = g × a.
    if (need & 1) out[0] = sum_to(cross(expand_to(bs, g.shape()), g, i64(d)), as.shape());
    if (need & 2) out[1] = sum_to(cross(g, expand_to(as, g.shape()), i64(d)), bs.shape());
  });
}

template <OpCode op>
Prim t_reduce(Prim a) {
  In x = open(std::move(a));
  if (!x.node) return wrap(run_inner<Family::Reduce>(op, x.p, std::move(x.p)));
  Prim y = run_inner<Family::Reduce>(op, x.p, x.p);
  return record<1>(op, y, {x.node}, [xs = dt(x.p)](const T& g, std::uint32_t, std::span<T> out) {
    if constexpr (op == OpCode::sum) {
      out[0] = spread(g, xs.shape());
    } else {  // prod: the product of the other elements, exact with zeros
      const std::size_t n = xs.shape().num_elements();
      const std::int64_t flat[1] = {i64(n)};
      T pg = reshape_to(prod_grad(reshape(OpCode::reshape, xs, flat), 0), xs.shape());
      out[0] = mul(spread(g, xs.shape()), std::move(pg));
    }
  });
}

template <OpCode op>
Prim t_dim(Prim a, std::size_t d) {
  In x = open(std::move(a));
  if (!x.node) return wrap(run_inner<Family::Dim>(op, x.p, std::move(x.p), d));
  constexpr std::uint32_t reads = dim_reads(op);
  Prim y = run_inner<Family::Dim>(op, x.p, x.p, d);
  const Shape xsh = x.p->shape();
  Saved sx = (reads & 1) ? save(x) : Saved{};
  T ys = (reads & 2) ? dt(y) : T();
  return record<1>(op, std::move(y), {x.node}, [xsh, sx = std::move(sx), ys = std::move(ys), d](const T& g, std::uint32_t, std::span<T> out) {
    out[0] = dim_grad(op, g, xsh, sx.get(), ys, d);
  });
}

// Values with indices (max/min_dim_with_indices, sort, topk): the gradient goes back to
// the index each value came from.
Prim record_indexed(OpCode op, const In& x, Prim values, const Prim& idx, std::size_t d) {
  return record<1>(op, std::move(values), {x.node}, [xs = dt(x.p), is = dt(idx), d](const T& g, std::uint32_t, std::span<T> out) {
    out[0] = scatter_into(xs.shape(), xs, d, is, g);
  });
}
template <OpCode op>
PrimPair t_dim_with_indices(Prim a, std::size_t d, DType it) {
  In x = open(std::move(a));
  auto [v, i] = run_inner<Family::DimWithIndices>(op, x.p, x.node ? x.p : std::move(x.p), d, it);
  if (!x.node) return {wrap(std::move(v)), wrap(std::move(i))};
  Prim values = record_indexed(op, x, std::move(v), i, d);
  return {std::move(values), wrap(std::move(i))};
}
template <OpCode op>
PrimPair t_sort_with_indices(Prim a, std::size_t d, bool desc, DType it) {
  In x = open(std::move(a));
  auto [v, i] = run_inner<Family::SortWithIndices>(op, x.p, x.node ? x.p : std::move(x.p), d, desc, it);
  if (!x.node) return {wrap(std::move(v)), wrap(std::move(i))};
  Prim values = record_indexed(op, x, std::move(v), i, d);
  return {std::move(values), wrap(std::move(i))};
}
Prim t_sort(Prim a, std::size_t d, bool desc) {
  In x = open(std::move(a));
  if (!x.node) return wrap(run_inner<Family::Sort>(OpCode::sort, x.p, std::move(x.p), d, desc));
  const DType it = to_dtype(device_settings(x.p->device()).int_dtype);
  auto [v, i] = run_inner<Family::SortWithIndices>(OpCode::sort_with_indices, x.p, x.p, d, desc, it);
  return record_indexed(OpCode::sort, x, std::move(v), i, d);
}
template <OpCode op>
PrimPair t_topk_with_indices(Prim a, std::size_t d, std::size_t k, DType it) {
  In x = open(std::move(a));
  auto [v, i] = run_inner<Family::TopKWithIndices>(op, x.p, x.node ? x.p : std::move(x.p), d, k, it);
  if (!x.node) return {wrap(std::move(v)), wrap(std::move(i))};
  Prim values = record_indexed(op, x, std::move(v), i, d);
  return {std::move(values), wrap(std::move(i))};
}
Prim t_topk(Prim a, std::size_t d, std::size_t k) {
  In x = open(std::move(a));
  if (!x.node) return wrap(run_inner<Family::TopK>(OpCode::topk, x.p, std::move(x.p), d, k));
  const DType it = to_dtype(device_settings(x.p->device()).int_dtype);
  auto [v, i] = run_inner<Family::TopKWithIndices>(OpCode::topk_with_indices, x.p, x.p, d, k, it);
  return record_indexed(OpCode::topk, x, std::move(v), i, d);
}

template <OpCode op>
Prim t_cast(Prim a, DType to) {
  In x = open(std::move(a));
  const bool track = x.node && op == OpCode::cast && is_float(x.p->dtype());
  if (!track) return wrap(run_inner<Family::Cast>(op, x.p, std::move(x.p), to));
  Prim y = run_inner<Family::Cast>(op, x.p, x.p, to);
  return record<1>(op, y, {x.node}, [from = x.p->dtype()](const T& g, std::uint32_t, std::span<T> out) {
    out[0] = cast_to(g, from);
  });
}

template <OpCode op>
Prim t_reshape(Prim a, const Shape& s) {
  In x = open(std::move(a));
  if (!x.node) return wrap(run_inner<Family::Reshape>(op, x.p, std::move(x.p), s));
  const Shape from = x.p->shape();
  Prim y = run_inner<Family::Reshape>(op, x.p, std::move(x.p), s);
  return record<1>(op, y, {x.node}, [from](const T& g, std::uint32_t, std::span<T> out) {
    out[0] = op == OpCode::expand ? sum_to(g, from) : reshape_to(g, from);
  });
}

Prim t_swap_dims(Prim a, std::size_t d0, std::size_t d1) {
  In x = open(std::move(a));
  if (!x.node) return wrap(run_inner<Family::SwapDims>(OpCode::swap_dims, x.p, std::move(x.p), d0, d1));
  Prim y = run_inner<Family::SwapDims>(OpCode::swap_dims, x.p, std::move(x.p), d0, d1);
  return record<1>(OpCode::swap_dims, y, {x.node}, [d0, d1](const T& g, std::uint32_t, std::span<T> out) {
    out[0] = swap_dims(g, i64(d0), i64(d1));
  });
}

template <OpCode op>
Prim t_axes(Prim a, Axes ax) {
  In x = open(std::move(a));
  if (!x.node) return wrap(run_inner<Family::Axes>(op, x.p, std::move(x.p), ax));
  Prim y = run_inner<Family::Axes>(op, x.p, std::move(x.p), ax);
  std::vector<std::int64_t> back(ax.size());
  if (op == OpCode::permute) {
    for (std::size_t i = 0; i < ax.size(); ++i) back[ax[i]] = i64(i);  // the inverse permutation
  } else {
    for (std::size_t i = 0; i < ax.size(); ++i) back[i] = i64(ax[i]);
  }
  return record<1>(op, y, {x.node}, [back = std::move(back)](const T& g, std::uint32_t, std::span<T> out) {
    out[0] = axes(op, g, back);
  });
}

Prim t_slice(Prim a, DimSlices ds) {
  In x = open(std::move(a));
  if (!x.node) return wrap(run_inner<Family::Slice>(OpCode::slice, x.p, std::move(x.p), ds));
  const Shape from = x.p->shape();
  Prim y = run_inner<Family::Slice>(OpCode::slice, x.p, std::move(x.p), ds);
  return record<1>(OpCode::slice, y, {x.node}, [from, sl = public_slices(ds)](const T& g, std::uint32_t, std::span<T> out) {
    out[0] = slice_assign(zeros(from, g), sl, g);
  });
}

Prim t_slice_assign(Prim a, DimSlices ds, Prim v) {
  In x = open(std::move(a)), w = open(std::move(v));
  if (!x.node && !w.node) return wrap(run_inner<Family::SliceAssign>(OpCode::slice_assign, x.p, std::move(x.p), ds, std::move(w.p)));
  const Shape vs = w.p->shape();
  Prim y = run_inner<Family::SliceAssign>(OpCode::slice_assign, x.p, std::move(x.p), ds, std::move(w.p));
  return record<2>(OpCode::slice_assign, y, {x.node, w.node},
                   [sl = public_slices(ds), vs](const T& g, std::uint32_t need, std::span<T> out) {
                     if (need & 1) out[0] = slice_assign(g, sl, zeros(vs, g));
                     if (need & 2) out[1] = slice(g, sl);
                   });
}

Prim t_unfold(Prim a, std::size_t d, std::size_t size, std::size_t step) {
  In x = open(std::move(a));
  if (!x.node) return wrap(run_inner<Family::Unfold>(OpCode::unfold, x.p, std::move(x.p), d, size, step));
  const Shape from = x.p->shape();
  Prim y = run_inner<Family::Unfold>(OpCode::unfold, x.p, std::move(x.p), d, size, step);
  return record<1>(OpCode::unfold, y, {x.node}, [from, d, size, step](const T& g, std::uint32_t, std::span<T> out) {
    // g: from with dim d -> windows, plus a last dim of `size`. Window w, offset j reads
    // source position w*step + j: add each back with select_add.
    const std::size_t r = from.rank();
    const std::size_t windows = g.shape()[d];
    const DType it = to_dtype(device_settings(g.device).int_dtype);
    // Move the window-offset dim next to the window dim, then merge them.
    std::vector<std::int64_t> perm;
    for (std::size_t i = 0; i <= r; ++i) {
      if (i == r) continue;
      perm.push_back(i64(i));
      if (i == d) perm.push_back(i64(r));
    }
    T gp = axes(OpCode::permute, g, perm);
    Shape merged = from;
    merged[d] = windows * size;
    T gm = reshape_to(std::move(gp), merged);
    std::vector<std::int64_t> src;
    for (std::size_t w = 0; w < windows; ++w)
      for (std::size_t j = 0; j < size; ++j) src.push_back(i64(w * step + j));
    T idx = from_data(TensorData::from(src, Shape{src.size()}).convert(it), g.device, Kind::Int);
    out[0] = select_assign(OpCode::select_add, zeros(from, g), i64(d), std::move(idx), std::move(gm), IndexingUpdateOp::Add);
  });
}

Prim t_gather(Prim a, std::size_t d, Prim idx) {
  In x = open(std::move(a));
  Prim i = unwrap(std::move(idx));
  if (!x.node) return wrap(run_inner<Family::Gather>(OpCode::gather, x.p, std::move(x.p), d, std::move(i)));
  const Shape from = x.p->shape();
  Prim y = run_inner<Family::Gather>(OpCode::gather, x.p, std::move(x.p), d, i);
  return record<1>(OpCode::gather, y, {x.node}, [from, d, is = dt(i)](const T& g, std::uint32_t, std::span<T> out) {
    out[0] = scatter_into(from, g, d, is, g);
  });
}

Prim t_scatter_add(Prim a, std::size_t d, Prim idx, Prim v) {
  constexpr OpCode op = OpCode::scatter_add;
  In x = open(std::move(a)), w = open(std::move(v));
  Prim i = unwrap(std::move(idx));
  if (!x.node && !w.node) return wrap(run_inner<Family::Scatter>(op, x.p, std::move(x.p), d, std::move(i), std::move(w.p)));
  Prim y = run_inner<Family::Scatter>(op, x.p, std::move(x.p), d, i, std::move(w.p));
  return record<2>(op, y, {x.node, w.node}, [d, is = dt(i)](const T& g, std::uint32_t need, std::span<T> out) {
    if (need & 1) out[0] = g;
    if (need & 2) out[1] = gather(g, i64(d), is);
  });
}

Prim t_select(Prim a, std::size_t d, Prim idx) {
  In x = open(std::move(a));
  Prim i = unwrap(std::move(idx));
  if (!x.node) return wrap(run_inner<Family::Select>(OpCode::select, x.p, std::move(x.p), d, std::move(i)));
  const Shape from = x.p->shape();
  Prim y = run_inner<Family::Select>(OpCode::select, x.p, std::move(x.p), d, i);
  return record<1>(OpCode::select, y, {x.node}, [from, d, is = dt(i)](const T& g, std::uint32_t, std::span<T> out) {
    out[0] = select_assign(OpCode::select_add, zeros(from, g), i64(d), is, g, IndexingUpdateOp::Add);
  });
}

Prim t_select_add(Prim a, std::size_t d, Prim idx, Prim v) {
  constexpr OpCode op = OpCode::select_add;
  In x = open(std::move(a)), w = open(std::move(v));
  Prim i = unwrap(std::move(idx));
  if (!x.node && !w.node) return wrap(run_inner<Family::SelectAssign>(op, x.p, std::move(x.p), d, std::move(i), std::move(w.p)));
  Prim y = run_inner<Family::SelectAssign>(op, x.p, std::move(x.p), d, i, std::move(w.p));
  return record<2>(op, y, {x.node, w.node}, [d, is = dt(i)](const T& g, std::uint32_t need, std::span<T> out) {
    if (need & 1) out[0] = g;
    if (need & 2) out[1] = select(g, i64(d), is);
  });
}

Prim t_mask_where(Prim a, Prim mask, Prim v) {
  constexpr OpCode op = OpCode::mask_where;
  In x = open(std::move(a)), w = open(std::move(v));
  Prim m = unwrap(std::move(mask));
  if (!x.node && !w.node) return wrap(run_inner<Family::MaskWhere>(op, x.p, std::move(x.p), std::move(m), std::move(w.p)));
  const Shape as = x.p->shape(), vs = w.p->shape();
  Prim y = run_inner<Family::MaskWhere>(op, x.p, std::move(x.p), m, std::move(w.p));
  return record<2>(op, y, {x.node, w.node}, [as, vs, ms = dt(m)](const T& g, std::uint32_t need, std::span<T> out) {
    if (need & 1) out[0] = sum_to(mask_fill(g, ms, Scalar(0.0)), as);
    if (need & 2) out[1] = sum_to(mask_fill(g, un(OpCode::bool_not, ms), Scalar(0.0)), vs);
  });
}

Prim t_mask_fill(Prim a, Prim mask, Scalar s) {
  constexpr OpCode op = OpCode::mask_fill;
  In x = open(std::move(a));
  Prim m = unwrap(std::move(mask));
  if (!x.node) return wrap(run_inner<Family::MaskFill>(op, x.p, std::move(x.p), std::move(m), s));
  Prim y = run_inner<Family::MaskFill>(op, x.p, std::move(x.p), m, s);
  return record<1>(op, y, {x.node}, [ms = dt(m)](const T& g, std::uint32_t, std::span<T> out) {
    out[0] = mask_fill(g, ms, Scalar(0.0));
  });
}

Prim t_mask_select(Prim a, Prim mask) {
  constexpr OpCode op = OpCode::mask_select;
  In x = open(std::move(a));
  Prim m = unwrap(std::move(mask));
  if (!x.node) return wrap(run_inner<Family::MaskSelect>(op, x.p, std::move(x.p), std::move(m)));
  // The flat positions of the selected elements, found now, so backward reads nothing back.
  const Shape from = x.p->shape();
  T full_mask = expand_to(dt(m), from);
  const std::int64_t flat[1] = {i64(from.num_elements())};
  T pos = argwhere(reshape(OpCode::reshape, std::move(full_mask), flat));  // [n, 1]
  const std::int64_t col[1] = {i64(pos.shape()[0])};
  T idx = reshape(OpCode::reshape, std::move(pos), col);
  Prim y = run_inner<Family::MaskSelect>(op, x.p, std::move(x.p), m);
  return record<1>(op, y, {x.node}, [from, idx = std::move(idx)](const T& g, std::uint32_t, std::span<T> out) {
    T z = create(OpCode::zeros, Shape{from.num_elements()}, g.device, Kind::Float, g.dtype());
    out[0] = reshape_to(select_assign(OpCode::select_add, std::move(z), 0, idx, g, IndexingUpdateOp::Add), from);
  });
}

Prim t_to_device(Prim a, DeviceId to) {
  In x = open(std::move(a));
  if (is_autodiff_device(to)) note(to);  // the result is on `to` (either strategy)
  const DeviceId inner_to = autodiff_inner(to);
  if (!x.node) return wrap(run_inner<Family::ToDevice>(OpCode::to_device, x.p, std::move(x.p), inner_to));
  const DeviceId from = x.p->device();
  Prim y = run_inner<Family::ToDevice>(OpCode::to_device, x.p, std::move(x.p), inner_to);
  return record<1>(OpCode::to_device, y, {x.node}, [from](const T& g, std::uint32_t, std::span<T> out) {
    out[0] = to_device(g, from);
  });
}

// ---- module ops: their backward entries on the inner device --------------------------

In open_opt(Prim&& a) { return a ? open(std::move(a)) : In{}; }

constexpr bool is_transpose_conv(OpCode op) {
  return op == OpCode::conv_transpose1d || op == OpCode::conv_transpose2d || op == OpCode::conv_transpose3d;
}
template <OpCode op>
Prim t_conv(Prim x, Prim w, Prim b, const ConvArgs& args) {
  In xi = open(std::move(x)), wi = open(std::move(w)), bi = open_opt(std::move(b));
  if (!xi.node && !wi.node && !bi.node)
    return wrap(run_inner<Family::Conv>(op, xi.p, std::move(xi.p), std::move(wi.p), std::move(bi.p), args));
  Prim y = run_inner<Family::Conv>(op, xi.p, xi.p, wi.p, bi.p, args);
  // dx reads the weight, dweight reads x: each kept only when the other is tracked.
  const Shape xsh = xi.p->shape(), wsh = wi.p->shape();
  Saved sx = wi.node ? save(xi) : Saved{}, sw = xi.node ? save(wi) : Saved{};
  return record<3>(op, std::move(y), {xi.node, wi.node, bi.node}, [xsh, wsh, sx = std::move(sx), sw = std::move(sw), args](const T& g, std::uint32_t need, std::span<T> out) {
    if constexpr (is_transpose_conv(op)) {
      if (need & 1) out[0] = conv_transpose_backward_x(g, sw.get(), xsh, args);
      if (need & 2) out[1] = conv_transpose_backward_weight(sx.get(), g, wsh, args);
    } else {
      if (need & 1) out[0] = conv_backward_x(g, sw.get(), xsh, args);
      if (need & 2) out[1] = conv_backward_weight(sx.get(), g, wsh, args);
    }
    if (need & 4) out[2] = conv_backward_bias(g);
  });
}

constexpr OpCode with_indices_of(OpCode op) {
  return op == OpCode::max_pool1d ? OpCode::max_pool1d_with_indices : OpCode::max_pool2d_with_indices;
}
Prim record_max_pool(OpCode op, const In& x, Prim values, const Prim& idx, const PoolArgs& args) {
  return record<1>(op, std::move(values), {x.node}, [from = x.p->shape(), is = dt(idx), args](const T& g, std::uint32_t, std::span<T> out) {
    out[0] = max_pool_backward(g, is, from, args);
  });
}
template <OpCode op>
Prim t_pool(Prim a, const PoolArgs& args) {
  In x = open(std::move(a));
  if (!x.node) return wrap(run_inner<Family::Pool>(op, x.p, std::move(x.p), args));
  if constexpr (op == OpCode::max_pool1d || op == OpCode::max_pool2d) {
    const DType it = to_dtype(device_settings(x.p->device()).int_dtype);
    auto [v, i] = run_inner<Family::PoolWithIndices>(with_indices_of(op), x.p, x.p, args, it);
    return record_max_pool(op, x, std::move(v), i, args);
  } else {
    const Shape from = x.p->shape();
    Prim y = run_inner<Family::Pool>(op, x.p, std::move(x.p), args);
    return record<1>(op, y, {x.node}, [from, args](const T& g, std::uint32_t, std::span<T> out) {
      constexpr bool adaptive =
          op == OpCode::adaptive_avg_pool1d || op == OpCode::adaptive_avg_pool2d || op == OpCode::adaptive_avg_pool3d;
      out[0] = pool_backward(adaptive ? OpCode::adaptive_avg_pool_backward : OpCode::avg_pool_backward, g, from, args);
    });
  }
}
template <OpCode op>
PrimPair t_pool_with_indices(Prim a, const PoolArgs& args, DType it) {
  In x = open(std::move(a));
  auto [v, i] = run_inner<Family::PoolWithIndices>(op, x.p, x.node ? x.p : std::move(x.p), args, it);
  if (!x.node) return {wrap(std::move(v)), wrap(std::move(i))};
  Prim values = record_max_pool(op, x, std::move(v), i, args);
  return {std::move(values), wrap(std::move(i))};
}

Prim t_interpolate(Prim a, const InterpArgs& args) {
  constexpr OpCode op = OpCode::interpolate;
  In x = open(std::move(a));
  if (!x.node) return wrap(run_inner<Family::Interpolate>(op, x.p, std::move(x.p), args));
  const Shape from = x.p->shape();
  Prim y = run_inner<Family::Interpolate>(op, x.p, std::move(x.p), args);
  return record<1>(op, y, {x.node}, [from, args](const T& g, std::uint32_t, std::span<T> out) {
    out[0] = interpolate_backward(g, from, args);
  });
}

Prim t_embedding(Prim w, Prim idx) {
  constexpr OpCode op = OpCode::embedding;
  In wi = open(std::move(w));
  Prim i = unwrap(std::move(idx));
  if (!wi.node) return wrap(run_inner<Family::Embedding>(op, wi.p, std::move(wi.p), std::move(i)));
  const Shape ws = wi.p->shape();
  Prim y = run_inner<Family::Embedding>(op, wi.p, std::move(wi.p), i);
  return record<1>(op, y, {wi.node}, [ws, is = dt(i)](const T& g, std::uint32_t, std::span<T> out) {
    out[0] = embedding_backward(g, is, ws);
  });
}

// ctc_loss: the exact gradient with respect to the log-probabilities from the backward
// entry (module-ops.md §6.6); the integer inputs carry none.
Prim t_ctc_loss(Prim lp, Prim targets, Prim in_len, Prim tgt_len, std::int64_t blank) {
  constexpr OpCode op = OpCode::ctc_loss;
  In li = open(std::move(lp));
  Prim t = unwrap(std::move(targets)), il = unwrap(std::move(in_len)), tl = unwrap(std::move(tgt_len));
  if (!li.node)
    return wrap(run_inner<Family::CtcLoss>(op, li.p, std::move(li.p), std::move(t), std::move(il), std::move(tl), blank));
  Prim y = run_inner<Family::CtcLoss>(op, li.p, li.p, t, il, tl, blank);
  return record<1>(op, y, {li.node},
                   [ls = dt(li.p), ts = dt(t), is = dt(il), ns = dt(tl), blank](const T& g, std::uint32_t, std::span<T> out) {
                     out[0] = ctc_loss_backward(ls, ts, is, ns, g, blank);
                   });
}

// deform_conv2d: every gradient from the one backward entry.
Prim t_deform_conv2d(Prim x, Prim offset, Prim w, Prim mask, Prim bias, const tensor::nn::DeformConvOptions<2>& o) {
  constexpr OpCode op = OpCode::deform_conv2d;
  In xi = open(std::move(x)), oi = open(std::move(offset)), wi = open(std::move(w)), mi = open_opt(std::move(mask)),
     bi = open_opt(std::move(bias));
  if (!xi.node && !oi.node && !wi.node && !mi.node && !bi.node)
    return wrap(run_inner<Family::DeformConv>(op, xi.p, std::move(xi.p), std::move(oi.p), std::move(wi.p), std::move(mi.p),
                                              std::move(bi.p), o));
  const bool with_bias = static_cast<bool>(bi.p);
  Prim y = run_inner<Family::DeformConv>(op, xi.p, xi.p, oi.p, wi.p, mi.p, bi.p, o);
  return record<5>(op, y, {xi.node, oi.node, wi.node, mi.node, bi.node},
                   [xs = dt(xi.p), os = dt(oi.p), ws = dt(wi.p), ms = mi.p ? dt(mi.p) : T(), with_bias, o](
                       const T& g, std::uint32_t need, std::span<T> out) {
                     std::vector<T> r = deform_conv2d_backward(xs, os, ws, ms, g, with_bias && (need & 16), o);
                     for (std::size_t i = 0; i < 5 && i < r.size(); ++i)
                       if (need & (1u << i)) out[i] = std::move(r[i]);
                   });
}

// attention on an autodiff device is burn's attention_fallback (module-ops.md §2.13),
// composed from tracked ops, so it is differentiated through its parts.
Prim t_attention(Prim q, Prim k, Prim v, Prim mask, Prim bias, const tensor::nn::AttentionModuleOptions& o) {
  constexpr OpCode op = OpCode::attention;
  const bool tracked = node_of(q) || node_of(k) || node_of(v) || (bias && node_of(bias));
  if (!tracked) {
    Prim qi = unwrap(std::move(q));
    return wrap(run_inner<Family::Attention>(op, qi, std::move(qi), unwrap(std::move(k)), unwrap(std::move(v)),
                                             mask ? unwrap(std::move(mask)) : Prim(), bias ? unwrap(std::move(bias)) : Prim(), o));
  }
  const bool f64 = q->dtype() == DType::F64;
  const double lowest = f64 ? -1.7976931348623157e308 : -3.4028234663852886e38;
  const double tiny = f64 ? 2.2250738585072014e-308 : 1.1754943508222875e-38;
  const std::size_t r = q->shape().rank(), lq = q->shape()[r - 2], lk = k->shape()[r - 2], d = q->shape()[r - 1];
  T Q(std::move(q), Kind::Float), K(std::move(k), Kind::Float), V(std::move(v), Kind::Float);
  const double scale = o.scale ? *o.scale : 1.0 / std::sqrt(static_cast<double>(d));
  T S = muls(matmul(Q, swap_last(K)), scale);
  if (o.softcap) S = muls(un(OpCode::tanh, muls(std::move(S), 1.0 / *o.softcap)), *o.softcap);
  const double ninf = -std::numeric_limits<double>::infinity();
  if (mask) S = mask_fill(std::move(S), T(std::move(mask), Kind::Bool), Scalar(ninf));
  if (o.is_causal) {
    const DeviceId dev = S.device;
    const DType it = to_dtype(device_settings(dev).int_dtype);
    const std::int64_t col_shape[2] = {1, i64(lk)}, row_shape[2] = {i64(lq), 1};
    T cols = reshape(OpCode::reshape, arange(0, i64(lk), 1, dev, it), col_shape);
    T rows = scalar(OpCode::add_scalar, reshape(OpCode::reshape, arange(0, i64(lq), 1, dev, it), row_shape),
                    Scalar(static_cast<std::int64_t>(lk) - static_cast<std::int64_t>(lq)));
    T above = compare(OpCode::greater, expand_to(std::move(cols), Shape{lq, lk}), expand_to(std::move(rows), Shape{lq, lk}));
    Shape full = S.shape();
    Shape m = full;
    for (std::size_t i = 0; i + 2 < m.rank(); ++i) m[i] = 1;
    S = mask_fill(std::move(S), expand_to(reshape_to(std::move(above), m), full), Scalar(ninf));
  }
  if (bias) S = add(std::move(S), T(std::move(bias), Kind::Float));
  T mx = scalar(OpCode::clamp_min, reduce_dim(OpCode::max_dim, S, -1), Scalar(lowest));
  T e = un(OpCode::exp, sub(std::move(S), std::move(mx)));
  T z = scalar(OpCode::clamp_min, reduce_dim(OpCode::sum_dim, e, -1), Scalar(tiny));
  return matmul(dvd(std::move(e), std::move(z)), std::move(V)).take();
}

Prim t_set_require_grad(Prim a, bool on) {
  note(a->device());
  AdTensor& t = as_ad(a);
  if (!is_float(t.dtype())) return a;
  if (on) {
    if (t.node_ && t.node_->leaf) return a;
    auto n = std::make_shared<Node>();
    n->leaf = true;
    return wrap(t.inner_, std::move(n));
  }
  return wrap(t.inner_);  // burn: set_require_grad(false) makes it an untracked leaf
}
bool t_is_require_grad(const Prim& a) {
  const NodeRef& n = node_of(a);
  return n && n->leaf;
}

// ---- which ops have an explicit step --------------------------------------------------

constexpr bool native_step(OpCode op) {
  if (op == OpCode::detach || op == OpCode::set_require_grad || op == OpCode::is_require_grad) return true;
  switch (op_family(op)) {
    case Family::Unary: return unary_rule(op);
    case Family::Binary: return binary_rule(op);
    case Family::Scalar: return scalar_rule(op);
    case Family::Dim: return dim_rule(op);
    case Family::Reduce: return op == OpCode::sum || op == OpCode::prod;
    case Family::DimWithIndices: case Family::Matmul: case Family::Cross: case Family::Reshape: case Family::SwapDims:
    case Family::Axes: case Family::Slice: case Family::SliceAssign: case Family::Unfold: case Family::Gather:
    case Family::Select: case Family::MaskWhere: case Family::MaskFill: case Family::MaskSelect: case Family::Sort:
    case Family::SortWithIndices: case Family::TopK: case Family::TopKWithIndices: case Family::ToDevice:
      return true;
    case Family::Conv: case Family::Pool: case Family::PoolWithIndices: case Family::Interpolate: case Family::Embedding:
    case Family::Attention: case Family::CtcLoss: case Family::DeformConv:
      return true;
    case Family::Cast: return op == OpCode::cast;
    case Family::Scatter: return op == OpCode::scatter_add;
    case Family::SelectAssign: return op == OpCode::select_add;
    default: return false;
  }
}

constexpr Coverage coverage_of(OpCode op) {
  const OpInfo& info = op_info(op);
  if (!(info.kinds & kKindF) || info.diff == 0) return Coverage::NotDifferentiable;
  switch (op_family(op)) {  // no Float result with a gradient
    case Family::Compare: case Family::CompareScalar: case Family::Predicate: case Family::DimIndex: case Family::Argsort:
    case Family::ArgTopK: case Family::Argwhere: case Family::AnyAll: case Family::AnyAllDim: case Family::Query:
    case Family::IntoData: case Family::Transaction: case Family::FromData: case Family::Create: case Family::Full:
    case Family::Random: case Family::Range: case Family::RangeStep:
      return Coverage::NotDifferentiable;
    default: break;
  }
  if (op == OpCode::into_int || op == OpCode::into_float || second_order(op)) return Coverage::NotDifferentiable;
  if (native_step(op)) return Coverage::Native;
  if (info.policy == Policy::Def && !info.host_trip) return Coverage::Decomposed;
  return Coverage::Missing;
}

template <OpCode op>
void set_entry(Backend& b) {
  constexpr Family f = op_family(op);
  if constexpr (op == OpCode::detach) b.set<op>(&t_detach);
  else if constexpr (op == OpCode::set_require_grad) b.set<op>(&t_set_require_grad);
  else if constexpr (op == OpCode::is_require_grad) b.set<op>(&t_is_require_grad);
  else if constexpr (native_step(op)) {
    if constexpr (f == Family::Unary) b.set<op>(&t_unary<op>);
    else if constexpr (f == Family::Binary) b.set<op>(&t_binary<op>);
    else if constexpr (f == Family::Scalar) b.set<op>(&t_scalar<op>);
    else if constexpr (f == Family::Dim) b.set<op>(&t_dim<op>);
    else if constexpr (f == Family::Reduce) b.set<op>(&t_reduce<op>);
    else if constexpr (f == Family::DimWithIndices) b.set<op>(&t_dim_with_indices<op>);
    else if constexpr (f == Family::Matmul) b.set<op>(&t_matmul);
    else if constexpr (f == Family::Cross) b.set<op>(&t_cross);
    else if constexpr (f == Family::Cast) b.set<op>(&t_cast<op>);
    else if constexpr (f == Family::Reshape) b.set<op>(&t_reshape<op>);
    else if constexpr (f == Family::SwapDims) b.set<op>(&t_swap_dims);
    else if constexpr (f == Family::Axes) b.set<op>(&t_axes<op>);
    else if constexpr (f == Family::Slice) b.set<op>(&t_slice);
    else if constexpr (f == Family::SliceAssign) b.set<op>(&t_slice_assign);
    else if constexpr (f == Family::Unfold) b.set<op>(&t_unfold);
    else if constexpr (f == Family::Gather) b.set<op>(&t_gather);
    else if constexpr (f == Family::Scatter) b.set<op>(&t_scatter_add);
    else if constexpr (f == Family::Select) b.set<op>(&t_select);
    else if constexpr (f == Family::SelectAssign) b.set<op>(&t_select_add);
    else if constexpr (f == Family::MaskWhere) b.set<op>(&t_mask_where);
    else if constexpr (f == Family::MaskFill) b.set<op>(&t_mask_fill);
    else if constexpr (f == Family::MaskSelect) b.set<op>(&t_mask_select);
    else if constexpr (f == Family::Sort) b.set<op>(&t_sort);
    else if constexpr (f == Family::SortWithIndices) b.set<op>(&t_sort_with_indices<op>);
    else if constexpr (f == Family::TopK) b.set<op>(&t_topk);
    else if constexpr (f == Family::TopKWithIndices) b.set<op>(&t_topk_with_indices<op>);
    else if constexpr (f == Family::ToDevice) b.set<op>(&t_to_device);
    else if constexpr (f == Family::Conv) b.set<op>(&t_conv<op>);
    else if constexpr (f == Family::Pool) b.set<op>(&t_pool<op>);
    else if constexpr (f == Family::PoolWithIndices) b.set<op>(&t_pool_with_indices<op>);
    else if constexpr (f == Family::Interpolate) b.set<op>(&t_interpolate);
    else if constexpr (f == Family::Embedding) b.set<op>(&t_embedding);
    else if constexpr (f == Family::Attention) b.set<op>(&t_attention);
    else if constexpr (f == Family::CtcLoss) b.set<op>(&t_ctc_loss);
    else if constexpr (f == Family::DeformConv) b.set<op>(&t_deform_conv2d);
  } else if constexpr (op_info(op).policy == Policy::Req || op_info(op).host_trip || second_order(op)) {
    // Forwarded to the inner backend's own entry; raises for a tracked input unless the
    // op carries no gradient. (A host-trip default would read a tracked tensor back and
    // lose its graph; a backward entry's own gradient is second order.)
    b.set<op>(&Pass<op, FamilyFn<f>>::call);
  }
  // Defaulted ops without a step: install_defaults composes them from these entries.
}

template <std::size_t... I>
void set_all(Backend& b, std::index_sequence<I...>) {
  (set_entry<static_cast<OpCode>(I)>(b), ...);
}

// Device-level entries: the inner device's, except the name and ad_enabled.
std::string d_name(DeviceId d) {
  const DeviceId in = autodiff_inner(d);
  return fmt::format("autodiff<{}{}>", inner_backend(in).get<DeviceOp::name>()(in),
                     is_balanced_device(d) ? ", balanced" : "");
}
void d_seed(DeviceId d, std::uint64_t s) { const DeviceId in = autodiff_inner(d); inner_backend(in).get<DeviceOp::seed>()(in, s); }
void d_sync(DeviceId d) { const DeviceId in = autodiff_inner(d); inner_backend(in).get<DeviceOp::sync>()(in); }
void d_flush(DeviceId d) { const DeviceId in = autodiff_inner(d); inner_backend(in).get<DeviceOp::flush>()(in); }
DTypeUsageSet d_usage(DeviceId d, DType t) {
  const DeviceId in = autodiff_inner(d);
  return inner_backend(in).get<DeviceOp::dtype_usage>()(in, t);
}
bool d_supports(DeviceId d, DType t) {
  const DeviceId in = autodiff_inner(d);
  return inner_backend(in).get<DeviceOp::supports_dtype>()(in, t);
}
DeviceSettings d_settings(DeviceId d) {
  const DeviceId in = autodiff_inner(d);
  return inner_backend(in).get<DeviceOp::default_settings>()(in);
}
MemoryStats d_memory(DeviceId d) { const DeviceId in = autodiff_inner(d); return inner_backend(in).get<DeviceOp::memory_stats>()(in); }
void d_cleanup(DeviceId d) { const DeviceId in = autodiff_inner(d); inner_backend(in).get<DeviceOp::memory_cleanup>()(in); }
bool d_true(DeviceId) { return true; }
// As many devices as the inner type has (entries take no type, so one function per type).
template <std::uint16_t I>
std::size_t d_count() { return inner_backend({I, 0}).get<DeviceOp::device_count>()(); }
template <std::size_t... I>
constexpr std::array<std::size_t (*)(), sizeof...(I)> counts(std::index_sequence<I...>) {
  return {&d_count<static_cast<std::uint16_t>(I)>...};
}
constexpr auto kCounts = counts(std::make_index_sequence<kAutodiffTypeOffset>());

std::unique_ptr<Backend> make_backend(std::uint16_t inner_type, bool bal) {
  const Backend& in = Registry::instance().get(inner_type);
  auto b = std::make_unique<Backend>(fmt::format("autodiff<{}{}>", in.short_name(), bal ? ", balanced" : ""),
                                     static_cast<std::uint16_t>(inner_type + (bal ? kBalancedTypeOffset : kAutodiffTypeOffset)));
  set_all(*b, std::make_index_sequence<kOpCount>());
  b->set<DeviceOp::name>(&d_name);
  b->set<DeviceOp::seed>(&d_seed);
  b->set<DeviceOp::sync>(&d_sync);
  b->set<DeviceOp::flush>(&d_flush);
  b->set<DeviceOp::dtype_usage>(&d_usage);
  b->set<DeviceOp::supports_dtype>(&d_supports);
  b->set<DeviceOp::default_settings>(&d_settings);
  b->set<DeviceOp::memory_stats>(&d_memory);
  b->set<DeviceOp::memory_cleanup>(&d_cleanup);
  b->set<DeviceOp::ad_enabled>(&d_true);
  b->set<DeviceOp::device_count>(kCounts[inner_type]);
  return b;
}

std::mutex g_register_mutex;

const AdTensor& checked_ad(const DispatchTensor& t, std::string_view op) {
  if (!t.prim) throw Error(fmt::format("[{}] use of an empty (moved-from) tensor; expected a tensor; got an empty handle", op));
  if (!is_autodiff_device(t.device))
    throw DeviceError(DeviceError::Kind::Mismatch,
                      fmt::format("[{}] expected a tensor of an autodiff device (Device::autodiff()); got one on {}", op,
                                  device_string(t.device)));
  return static_cast<const AdTensor&>(*t.prim);
}

}  // namespace

DeviceId autodiff_device(DeviceId inner, CheckpointingStrategy strategy) {
  if (is_autodiff_device(inner))
    throw DeviceError(DeviceError::Kind::Unavailable,
                      fmt::format("[Device::autodiff] autodiff of an autodiff device is not supported; expected a plain "
                                  "device; got {}",
                                  device_string(inner)));
  check_device("Device::autodiff", inner);
  const bool bal = strategy == CheckpointingStrategy::Balanced;
  const DeviceId ad{static_cast<std::uint16_t>(inner.type_id + (bal ? kBalancedTypeOffset : kAutodiffTypeOffset)), inner.index_id};
  if (!Registry::instance().find(ad.type_id)) {
    const std::lock_guard<std::mutex> lock(g_register_mutex);
    if (!Registry::instance().find(ad.type_id)) Registry::instance().register_backend(make_backend(inner.type_id, bal));
  }
  return ad;
}

bool is_tracked(const DispatchTensor& t) {
  return t.prim && is_autodiff_device(t.device) && static_cast<const AdTensor&>(*t.prim).node_ != nullptr;
}

std::optional<std::uint64_t> node_id(const DispatchTensor& t) {
  if (!is_tracked(t)) return std::nullopt;
  return static_cast<const AdTensor&>(*t.prim).node_->id;
}

DispatchTensor inner(DispatchTensor t) {
  checked_ad(t, "inner");
  const Kind k = t.kind;
  return DispatchTensor(unwrap(t.take()), k);
}

DispatchTensor from_inner(DispatchTensor t) {
  if (!t.prim) throw Error("[from_inner] use of an empty (moved-from) tensor; expected a tensor; got an empty handle");
  if (is_autodiff_device(t.device))
    throw DeviceError(DeviceError::Kind::Mismatch,
                      fmt::format("[from_inner] expected a tensor of a plain device; got one on {}", device_string(t.device)));
  // The untracked tensor goes to the autodiff device of the strategy this thread last
  // used (Device::autodiff()'s when none): the public from_inner names no device, and a
  // training loop re-wraps its parameters between ops on their own device. to_device
  // moves an untracked tensor to the other strategy's device.
  autodiff_device(t.device, balanced() ? CheckpointingStrategy::Balanced : CheckpointingStrategy::None);
  const Kind k = t.kind;
  return DispatchTensor(wrap(t.take()), k);
}

std::unique_ptr<GradStore> backward(const DispatchTensor& root) {
  const AdTensor& r = checked_ad(root, "backward");
  if (root.kind != Kind::Float)
    throw DTypeError(fmt::format("[backward] expected a Float tensor; got {}", kind_name(root.kind)));
  if (root.shape().num_elements() != 1)
    throw ShapeError(fmt::format("[backward] expected a tensor with one element (a loss); got shape {}",
                                 root.shape().to_string()));
  auto store = std::make_unique<GradStore>();
  if (!r.node_) return store;  // nothing requires grad: no gradients

  // The reachable nodes, deepest first (a node's id is larger than its parents', so id
  // order is a topological order too; depth groups what can run together).
  std::vector<Node*> nodes;
  std::unordered_map<Node*, bool> seen;
  std::vector<Node*> stack{r.node_.get()};
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    if (!seen.emplace(n, true).second) continue;
    {
      const std::lock_guard<std::mutex> lock(n->mu);
      if (n->consumed)
        throw Error(fmt::format("[backward] the graph was already freed by an earlier backward() (at op {}); expected "
                                "a graph that has not been backwarded; got a consumed one (recompute the forward pass)",
                                op_name(n->op)));
    }
    nodes.push_back(n);
    for (const NodeRef& p : n->parents)
      if (p) stack.push_back(p.get());
  }
  std::sort(nodes.begin(), nodes.end(), [](const Node* a, const Node* b) {
    return a->order != b->order ? a->order > b->order : a->id > b->id;
  });

  std::unordered_map<Node*, T> grads;
  grads.emplace(r.node_.get(), ones_like(T(r.inner_, Kind::Float)));
  for (Node* n : nodes) {
    auto it = grads.find(n);
    if (it == grads.end()) continue;  // no gradient reached it
    T g = std::move(it->second);
    grads.erase(it);
    if (n->leaf) {
      store->grads.emplace(n->id, std::move(g));
      continue;
    }
    BackwardFn fn;
    {
      const std::lock_guard<std::mutex> lock(n->mu);
      if (n->consumed)
        throw Error(fmt::format("[backward] the graph was already freed by an earlier backward() (at op {}); expected "
                                "a graph that has not been backwarded; got a consumed one",
                                op_name(n->op)));
      fn = std::move(n->fn);
      n->fn = nullptr;
      n->consumed = true;
    }
    std::uint32_t need = 0;
    for (std::size_t i = 0; i < n->parents.size(); ++i)
      if (n->parents[i]) need |= 1u << i;
    std::vector<T> out(n->parents.size());
    fn(g, need, out);
    for (std::size_t i = 0; i < n->parents.size(); ++i) {
      Node* p = n->parents[i].get();
      if (!p || !out[i].prim) continue;
      auto [slot, fresh] = grads.try_emplace(p, std::move(out[i]));
      if (!fresh) slot->second = add(std::move(slot->second), std::move(out[i]));  // used twice: accumulate
    }
  }
  return store;
}

Coverage coverage(OpCode op) { return coverage_of(op); }

std::string_view coverage_name(Coverage c) {
  switch (c) {
    case Coverage::NotDifferentiable: return "not differentiable";
    case Coverage::Native: return "native";
    case Coverage::Decomposed: return "decomposed";
    case Coverage::Missing: return "missing";
  }
  return "?";
}

}  // namespace tensor::dispatch::ad
