// The autodiff graph (reference/autodiff.md): a primitive of an autodiff device wraps
// the inner device's primitive and, for a Float tensor in a graph, a node: its parents,
// its depth and the backward step that maps the gradient of its output to the gradients
// of its parents. backward() (graph.cpp) walks the nodes deepest first.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "dispatch/autodiff.hpp"
#include "dispatch/backend.hpp"

namespace tensor::dispatch::ad::detail {

using T = DispatchTensor;

struct Node;
using NodeRef = std::shared_ptr<Node>;
// Writes the gradient of parent i into out[i] for each bit i of `need` (the parents that
// are tracked); `g` is the gradient of the node's output.
using BackwardFn = std::function<void(const T& g, std::uint32_t need, std::span<T> out)>;

inline std::atomic<std::uint64_t> g_next_id{1};

struct Node {
  std::uint64_t id = g_next_id.fetch_add(1, std::memory_order_relaxed);
  std::uint32_t order = 0;        // depth: 0 for leaves, 1 + the deepest parent otherwise
  bool leaf = false;              // requirement Grad: a leaf whose gradient is kept
  std::atomic<std::uint64_t> dist_param{0};  // a leaf's set_distributed mark (0: none)
  OpCode op = OpCode::detach;     // the op that made it (messages)
  std::vector<NodeRef> parents;   // null where the input is untracked (or carries no gradient)
  std::mutex mu;                  // guards fn and consumed
  BackwardFn fn;                  // saved state; null for leaves and once consumed
  bool consumed = false;

  Node() = default;
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;
  ~Node();  // iterative: a long chain would otherwise free itself one frame per node
};

// Balanced checkpointing (checkpoint.hpp): how a memory-bound op's output is recomputed,
// a base tensor kept by the graph and the ops applied to it in order.
struct RecipeStep {
  OpCode op;
  std::optional<Scalar> s;  // the scalar of a Scalar-family op
};
struct Recipe {
  Prim base;  // an inner tensor
  std::vector<RecipeStep> steps;
};
using RecipeRef = std::shared_ptr<const Recipe>;

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
constinit inline thread_local std::uint16_t t_offset = kAutodiffTypeOffset;
inline void note(DeviceId ad) { t_offset = is_balanced_device(ad) ? kBalancedTypeOffset : kAutodiffTypeOffset; }
inline bool balanced() { return t_offset == kBalancedTypeOffset; }
inline DeviceId ad_of(DeviceId inner) { return {static_cast<std::uint16_t>(inner.type_id + t_offset), inner.index_id}; }

inline Prim wrap(Prim inner, NodeRef node = {}) {
  const DeviceId d = ad_of(inner->device());
  return Prim::adopt(new AdTensor(std::move(inner), std::move(node), d));
}
inline AdTensor& as_ad(const Prim& p) { return static_cast<AdTensor&>(*p); }
inline const NodeRef& node_of(const Prim& p) { return as_ad(p).node_; }
// The inner primitive; a unique wrapper passes ownership on (the buffer may be reused).
inline Prim unwrap(Prim p) {
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
// A tracked input keeps its wrapper's reference (the graph may save it); an untracked
// one is unwrapped. A null primitive (an absent optional tensor) opens empty.
inline In open(Prim&& a) {
  if (!a) return {};
  note(a->device());
  NodeRef n = node_of(a);
  RecipeRef r = n ? as_ad(a).recipe_ : nullptr;
  return {n ? as_ad(a).inner_ : unwrap(std::move(a)), std::move(n), std::move(r)};
}

// An inner primitive as a tensor of the kind its dtype implies.
inline T dt(Prim p) {
  const Kind k = is_float(p->dtype()) ? Kind::Float : is_int(p->dtype()) ? Kind::Int : Kind::Bool;
  return T(std::move(p), k);
}

// Records `out` (an inner primitive) as the output of `op` with the given parents; an
// output that is not Float, or has no tracked parent, is wrapped untracked.
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

// The graph ops' entries (graph.cpp), named by rules/graph.def.
Prim t_detach(Prim a);
Prim t_set_require_grad(Prim a, bool on);
bool t_is_require_grad(const Prim& a);

}  // namespace tensor::dispatch::ad::detail
