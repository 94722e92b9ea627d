// The graph: nodes, the graph ops' entries and backward(). The backward steps compute on
// the inner device through Dispatch's forwarders (math.hpp), so they pass the hooks.
#include <fmt/format.h>

#include <algorithm>
#include <unordered_map>

#include "dispatch/autodiff/math.hpp"
#include "dispatch/autodiff/rules.hpp"
#include "dispatch/validate.hpp"
#include "tensor/error.hpp"

namespace tensor::dispatch::ad {
namespace detail {

Node::~Node() {
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

namespace {
std::atomic<std::uint64_t> g_next_pass{1};
std::atomic<DistBegin> g_dist_begin{nullptr};
}  // namespace

Prim t_detach(Prim a) { return wrap(unwrap(std::move(a))); }

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

const AdTensor& checked_ad(const DispatchTensor& t, std::string_view op) {
  if (!t.prim) throw Error(fmt::format("[{}] use of an empty (moved-from) tensor; expected a tensor; got an empty handle", op));
  if (!is_autodiff_device(t.device))
    throw DeviceError(DeviceError::Kind::Mismatch,
                      fmt::format("[{}] expected a tensor of an autodiff device (Device::autodiff()); got one on {}", op,
                                  device_string(t.device)));
  return static_cast<const AdTensor&>(*t.prim);
}

}  // namespace detail

using namespace detail;

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

  store->pass = g_next_pass.fetch_add(1, std::memory_order_relaxed);

  // Marked leaves (set_distributed): each reports its gradient to the listener once the last
  // node that has it as a parent has run (`left` counts those edges), not at the end.
  std::unique_ptr<DistSession> session;
  std::unordered_map<Node*, std::uint32_t> left;
  if (const DistBegin begin = g_dist_begin.load(std::memory_order_acquire)) {
    std::vector<DistLeaf> marked;
    bool collectives = false;
    for (Node* n : nodes) {
      collectives = collectives || n->op == OpCode::all_reduce || n->op == OpCode::broadcast || n->op == OpCode::all_gather ||
                    n->op == OpCode::reduce_scatter;
      if (n->leaf)
        if (const std::uint64_t param = n->dist_param.load(std::memory_order_relaxed)) {
          marked.push_back({param, n->id});
          left.emplace(n, 0);
        }
    }
    if (!marked.empty()) session = begin(marked, store->pass, collectives);
    if (!session) left.clear();
    for (Node* n : nodes)
      for (const NodeRef& p : n->parents)
        if (p)
          if (auto it = left.find(p.get()); it != left.end()) ++it->second;
  }
  // Ends the session when backward throws (the reducer launches nothing more of this pass).
  struct SessionGuard {
    std::unique_ptr<DistSession>& s;
    ~SessionGuard() {
      if (s) s->finish(false);
    }
  } guard{session};
  std::unordered_map<Node*, T> grads;
  // The leaf's gradient is final: stored, and reported when marked.
  const auto settle = [&](Node* leaf) {
    auto it = grads.find(leaf);
    T g = it == grads.end() ? T() : std::move(it->second);
    if (it != grads.end()) grads.erase(it);
    if (g.prim) store->grads.emplace(leaf->id, g);
    if (session) session->ready(leaf->dist_param.load(std::memory_order_relaxed), g);
  };
  // Node n has run (or had no gradient): one edge fewer for each marked parent.
  const auto done_with = [&](Node* n) {
    if (left.empty()) return;
    for (const NodeRef& p : n->parents)
      if (p)
        if (auto it = left.find(p.get()); it != left.end() && --it->second == 0) {
          left.erase(it);
          settle(p.get());
        }
  };
  grads.emplace(r.node_.get(), ones_like(T(r.inner_, Kind::Float)));
  for (Node* n : nodes) {
    if (n->leaf && left.contains(n)) {  // a marked leaf nothing else reaches (the root itself)
      left.erase(n);
      settle(n);
      continue;
    }
    auto it = grads.find(n);
    if (it == grads.end()) {  // no gradient reached it
      done_with(n);
      continue;
    }
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
    done_with(n);
  }
  if (session) {
    std::unique_ptr<DistSession> s = std::move(session);
    s->finish(true);
  }
  return store;
}

void set_dist_listener(DistBegin begin) { g_dist_begin.store(begin, std::memory_order_release); }

void set_distributed(const DispatchTensor& t, std::uint64_t param) {
  const AdTensor& a = checked_ad(t, "set_distributed");
  if (!a.node_ || !a.node_->leaf)
    throw Error("[set_distributed] expected a tensor that requires grad (a graph leaf); got " +
                std::string(a.node_ ? "a tensor computed from one" : "an untracked tensor"));
  a.node_->dist_param.store(param, std::memory_order_relaxed);
}

std::uint64_t distributed_param(const DispatchTensor& t) {
  if (!is_tracked(t)) return 0;
  const NodeRef& n = static_cast<const AdTensor&>(*t.prim).node_;
  return n->leaf ? n->dist_param.load(std::memory_order_relaxed) : 0;
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
