// Graph capture and replay (issue 28; burn's graph_* group, CUDA graphs' static inputs).
//
//   auto x = Tensor<1>::zeros({4}, dev);                    // a static input, made before
//   auto g = capture(dev, [&] { return (x + 1.0) * 2.0; });  // runs once (results valid), records
//   x.copy_from(batch);                                      // refresh inputs in place
//   g.replay();                                              // writes g.outputs() in place
//
// capture() runs the closure once while a recorder at the invoke hook notes every op (its
// resolved backend entry, frozen arguments and buffers). On a device with native replay
// replay() re-runs that list without validation, dispatch or hooks (the CPU) or submits
// one command buffer recorded at capture (vulkan); elsewhere it re-runs the closure
// (is_native() is false). Either way outputs() keeps its buffers:
// each replay overwrites them. Inside the closure a GraphCaptureError refuses what a
// replay could not repeat (host reads, sync, settings, seeding, value-dependent shapes,
// random ops, other devices, nested capture, collectives, copy_from); the capture is then
// abandoned and the device stays usable. The closure is kept for the fallback, so what it
// captures by reference must outlive the Graph. Read docs/graphs.md.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "tensor/device.hpp"
#include "tensor/export.hpp"
#include "tensor/op_code.hpp"
#include "tensor/tensor.hpp"

namespace tensor {

/// What capture() may do on a device without native replay.
struct CaptureOptions {
  /// A device without native replay replays by re-running the closure (burn's fallback);
  /// false makes capture() throw GraphCaptureError there instead.
  bool allow_eager_fallback = true;
};

/// What a captured graph holds (Graph::stats()).
struct GraphStats {
  std::size_t nodes = 0;        ///< ops recorded (top-level ops: a composed default is one node)
  std::size_t arena_bytes = 0;  ///< peak bytes of the values made and consumed inside a replay
  /// Buffers by role: made before the capture and read (inputs), constants, made and consumed
  /// inside (internals), returned (outputs).
  ///@{
  std::size_t inputs = 0, constants = 0, internals = 0, outputs = 0;
  ///@}
  std::size_t writes = 0;       ///< in-place writes of state (an optimizer in graph mode); not in op_counts
  /// Nodes (writes included) a native replay runs as raw kernels on fixed buffers (no
  /// refcount, validation or allocation), and the one arena allocated for their values.
  ///@{
  std::size_t raw_nodes = 0, arena_alloc_bytes = 0;
  ///@}
  std::vector<std::pair<OpCode, std::size_t>> op_counts;              ///< nodes per op
  bool native = false;          ///< replay runs the recorded list (false: it re-runs the closure)
  std::string fallback_reason;  ///< why replay re-runs the closure (empty when native)
};

namespace detail {
struct GraphState;
/// Runs the closure again and appends (retained) handles of its results.
using GraphRerun = std::function<void(std::vector<Handle>&)>;
TENSOR_API std::shared_ptr<GraphState> graph_begin(const Device& device, const CaptureOptions& options);
TENSOR_API void graph_abandon(GraphState& s) noexcept;
TENSOR_API void graph_end(GraphState& s, const std::vector<const Handle*>& outputs, GraphRerun rerun);
TENSOR_API void graph_replay(GraphState& s);
TENSOR_API GraphStats graph_stats(const GraphState& s);
/// Whether this thread is inside capture().
TENSOR_API bool graph_capturing();
/// Writes src's values into dst's buffer (copy_from's checks), in place: the state
/// update of an optimizer in graph mode. Inside capture() it is recorded as a write node
/// that every replay repeats (copy_from, which refreshes inputs, is refused there).
TENSOR_API void graph_write(const Handle& dst, const Handle& src);

template <std::size_t D, class K> void graph_collect(std::vector<const Handle*>& out, const Tensor<D, K>& t);
template <class T> void graph_collect(std::vector<const Handle*>& out, const std::vector<T>& v);
template <class A, class B> void graph_collect(std::vector<const Handle*>& out, const std::pair<A, B>& p);
template <class... T> void graph_collect(std::vector<const Handle*>& out, const std::tuple<T...>& t);

template <std::size_t D, class K> void graph_collect(std::vector<const Handle*>& out, const Tensor<D, K>& t) {
  out.push_back(&t.handle());
}
template <class T> void graph_collect(std::vector<const Handle*>& out, const std::vector<T>& v) {
  for (const T& e : v) graph_collect(out, e);
}
template <class A, class B> void graph_collect(std::vector<const Handle*>& out, const std::pair<A, B>& p) {
  graph_collect(out, p.first);
  graph_collect(out, p.second);
}
template <class... T> void graph_collect(std::vector<const Handle*>& out, const std::tuple<T...>& t) {
  std::apply([&](const T&... e) { (graph_collect(out, e), ...); }, t);
}
}  // namespace detail

/// What every captured graph does, whatever its closure returns (Graph<R> adds outputs()).
/// Move-only; it holds references to every buffer the replay reads or writes, so it may
/// outlive the user's own handles. A moved-from graph holds nothing: its replay() and
/// stats() throw Error.
class GraphBase {
 public:
  /// Runs the step again; a graph's outputs() then hold its results (the same buffers).
  void replay() { detail::graph_replay(state()); }
  /// Whether replay runs the recorded list (false: it re-runs the closure; see stats()).
  bool is_native() const { return stats().native; }
  /// Nodes, arena bytes, buffers by role, nodes per op, and why a replay is not native.
  GraphStats stats() const { return detail::graph_stats(state()); }

 protected:
  /// Made by capture(), not by users.
  explicit GraphBase(std::shared_ptr<detail::GraphState> s) : s_(std::move(s)) {}
  /// Moves leave the source empty; copies are deleted.
  ///@{
  GraphBase(GraphBase&&) noexcept = default;
  GraphBase& operator=(GraphBase&&) noexcept = default;
  GraphBase(const GraphBase&) = delete;
  GraphBase& operator=(const GraphBase&) = delete;
  ~GraphBase() = default;
  ///@}

 private:
  detail::GraphState& state() const {
    if (!s_) throw Error("[Graph] use of a moved-from graph; expected a graph made by capture(); got an empty one");
    return *s_;
  }
  std::shared_ptr<detail::GraphState> s_;
};

/// A captured graph. R is what the closure returns: void, a Tensor, or a std::vector,
/// std::pair or std::tuple of tensors.
template <class R>
class Graph : public GraphBase {
 public:
  /// Made by capture(), not by users.
  Graph(std::shared_ptr<detail::GraphState> s, R out) : GraphBase(std::move(s)), out_(std::move(out)) {}
  /// The closure's results: the same buffers after every replay.
  const R& outputs() const { return out_; }

 private:
  R out_;
};

/// A captured graph whose closure returns nothing (its effects are in-place updates).
template <>
class Graph<void> : public GraphBase {
 public:
  /// Made by capture(), not by users.
  explicit Graph(std::shared_ptr<detail::GraphState> s) : GraphBase(std::move(s)) {}
};

/// Runs `step` once on `device`, recording it, and returns the graph that replays it.
template <class F>
auto capture(const Device& device, F&& step, const CaptureOptions& options = {}) {
  using R = std::decay_t<std::invoke_result_t<std::decay_t<F>&>>;
  auto fn = std::make_shared<std::decay_t<F>>(std::forward<F>(step));
  std::shared_ptr<detail::GraphState> s = detail::graph_begin(device, options);
  if constexpr (std::is_void_v<R>) {
    try {
      (*fn)();
    } catch (...) {
      detail::graph_abandon(*s);
      throw;
    }
    detail::graph_end(*s, {}, [fn](std::vector<detail::Handle>&) { (*fn)(); });
    return Graph<void>(std::move(s));
  } else {
    std::optional<R> out;
    try {
      out.emplace((*fn)());
    } catch (...) {
      detail::graph_abandon(*s);
      throw;
    }
    std::vector<const detail::Handle*> hs;
    detail::graph_collect(hs, *out);
    detail::graph_end(*s, hs, [fn](std::vector<detail::Handle>& res) {
      const R r = (*fn)();
      std::vector<const detail::Handle*> p;
      detail::graph_collect(p, r);
      for (const detail::Handle* h : p) res.push_back(detail::retain(*h));
    });
    return Graph<R>(std::move(s), std::move(*out));
  }
}

}  // namespace tensor
