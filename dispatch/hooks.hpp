// Op hooks: the decorators on dispatch's one invocation path (SPEC §1). A hook sees
// every op (device-level entries aside) with its OpCode, attributes, inputs and output
// metadata, and wraps the call: it runs the op through `next`, or replaces it. The op
// profiler is one; autodiff's tape and graph capture are meant to be the next ones.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "dispatch/dispatch.hpp"
#include "tensor/error.hpp"

namespace tensor::dispatch {

// Metadata of an op's (first) output, from the family's shape rule, known before the
// backend runs. `shape_known` is false where the shape depends on the data
// (mask_select, argwhere) or the op yields no tensor (into_data, tr_execute).
struct OutMeta {
  Shape shape;
  DType dtype = DType::F32;
  Kind kind = Kind::Float;
  bool shape_known = true;
};

// The non-tensor arguments of one call, as the forwarder resolved them (dims are
// non-negative and in range). Which fields an op uses follows its family's argument
// list in dispatch/table/ops.hpp: `ints` holds dims, sizes, steps, k and flags in that order.
struct OpAttrs {
  std::array<std::int64_t, 3> ints{};
  std::array<Scalar, 2> scalars{};
  std::span<const std::size_t> dims{};     // permute/flip axes
  std::span<const DimSlice> slices{};      // slice, slice_assign
  std::optional<DType> dtype;              // cast target, requested creation dtype
  DeviceId device{};                       // to_device target, creation device
  IndexingUpdateOp update = IndexingUpdateOp::Assign;
  const void* options = nullptr;           // GridSampleOptions* (grid_sample_2d), Distribution* (random),
                                           // ConvArgs*/PoolArgs*/InterpArgs*/AttentionModuleOptions* (nn rows)
  const Shape* shape = nullptr;            // nn backward rows: the shape of the gradient they produce
};

// One op frozen for graph replay (dispatch/graph.hpp): the family rule's body with its plan,
// its resolved backend entry and its non-tensor arguments copied. `run` takes the op's
// tensor inputs in call order (moved in) and fills `outputs` (one per OpCall output);
// nothing is validated again and no hook runs.
class GraphThunk {
 public:
  virtual ~GraphThunk() = default;
  virtual void run(std::span<DispatchTensor> inputs, std::span<DispatchTensor> outputs) const = 0;
};

// One op passing the hooks. `inputs` point at the caller's tensors and stay valid only
// until `next` runs (the op consumes them): a hook that needs them afterwards (a tape's
// saved tensors) copies them first, which also tells the backend not to reuse their
// buffers. `outputs` is filled by `next`, or by a hook that replaces the op.
struct OpCall {
  OpCode op{};
  DeviceId device{};  // where the op runs (the first input's device, or the creation device)
  std::span<const DispatchTensor* const> inputs;
  const OpAttrs* attrs = nullptr;
  OutMeta out;
  std::span<DispatchTensor> outputs;  // empty for ops that yield no tensor (into_data)
  // The graph recorder's copy of the op (null where the op cannot be replayed from a
  // list: no tensor result). Call before `next`: it copies arguments the op consumes.
  std::unique_ptr<GraphThunk> (*freeze_fn)(const void* self) = nullptr;
  const void* freeze_self = nullptr;
  std::unique_ptr<GraphThunk> freeze() const { return freeze_fn ? freeze_fn(freeze_self) : nullptr; }
};

// The rest of the chain (inner hooks, then the backend entry) for one call.
class OpNext {
 public:
  using Fn = void (*)(const void* self, OpCall& call);
  OpNext(Fn fn, const void* self) : fn_(fn), self_(self) {}
  void operator()(OpCall& call) const { fn_(self_, call); }

 private:
  Fn fn_;
  const void* self_;
};

class OpHook {
 public:
  virtual ~OpHook() = default;
  // Runs around one op. Call `next(call)` once to run it; a hook that replaces the op
  // fills every entry of `call.outputs` instead. Exceptions propagate to the op's caller.
  virtual void around(OpCall& call, const OpNext& next) = 0;
};

// Installation. Global hooks see the ops of every thread; thread hooks only the calling
// thread's; on a call the global hooks run outside the thread hooks, each list in
// installation order (the first installed is outermost). A hook must stay alive until
// it is removed and no call is inside it. At most kMaxHooks of each kind.
inline constexpr std::size_t kMaxHooks = 8;
void add_global_hook(OpHook* hook);
void remove_global_hook(OpHook* hook);
void add_thread_hook(OpHook* hook);
void remove_thread_hook(OpHook* hook);

namespace hooks_detail {
// Installed hooks of all kinds on all threads; zero keeps every op on the direct path.
extern std::atomic<std::uint32_t> g_installed;
// Runs `body` (which fills call.outputs) under the hooks this thread sees.
void run_hooked(OpCall& call, OpNext body);
// "[op] a hook skipped the op without producing its output; ..."
std::string fmt_hook_error(OpCode op);
// The std:: exception net: a std::bad_alloc (or any other std:: exception that is not
// a tensor::Error) escaping a backend entry becomes an ExecutionError naming the op
// and the device. Out of line and cold: the body's direct path stays as it was.
[[noreturn]] void rethrow_backend_exception(OpCode op, DeviceId device, const std::exception& e);

// Runs an op body (backend entry + wrap) under the net; tensor::Errors pass unchanged.
template <class Body>
__attribute__((always_inline)) inline auto guarded(OpCode op, DeviceId device, Body& body) {
  try {
    return body();
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    rethrow_backend_exception(op, device, e);
  }
}

template <class R> struct Outputs {  // an op result as a list of output tensors
  static constexpr std::size_t kCount = 0;
};
template <> struct Outputs<DispatchTensor> {
  static constexpr std::size_t kCount = 1;
  static std::array<DispatchTensor, 1> split(DispatchTensor r) { return {std::move(r)}; }
  static DispatchTensor join(std::array<DispatchTensor, 1>& o) { return std::move(o[0]); }
};
template <> struct Outputs<std::pair<DispatchTensor, DispatchTensor>> {
  static constexpr std::size_t kCount = 2;
  static std::array<DispatchTensor, 2> split(std::pair<DispatchTensor, DispatchTensor> r) {
    return {std::move(r.first), std::move(r.second)};
  }
  static std::pair<DispatchTensor, DispatchTensor> join(std::array<DispatchTensor, 2>& o) {
    return {std::move(o[0]), std::move(o[1])};
  }
};

inline void collect(std::vector<const DispatchTensor*>& out, const DispatchTensor& t) { out.push_back(&t); }
template <class Other>  // a non-tensor argument of a forwarder (a dim, a scalar, options)
inline void collect(std::vector<const DispatchTensor*>&, const Other&) {}
inline void collect(std::vector<const DispatchTensor*>& out, const std::vector<DispatchTensor>& ts) {
  for (const DispatchTensor& t : ts) out.push_back(&t);
}

template <class Body, class MetaFn, class AttrFn, class FreezeFn, class... In>
auto invoke_hooked(OpCode op, DeviceId device, Body& body, MetaFn& meta, AttrFn& attrs, FreezeFn& freeze, const In&... in) {
  using R = decltype(body());
  using O = Outputs<R>;
  std::vector<const DispatchTensor*> ins;
  ins.reserve(sizeof...(In));
  (collect(ins, in), ...);
  const OpAttrs a = attrs();
  OpCall call{op, device, ins, &a, meta(), {}};
  call.freeze_fn = [](const void* f) -> std::unique_ptr<GraphThunk> { return (*static_cast<const FreezeFn*>(f))(); };
  call.freeze_self = &freeze;
  if constexpr (O::kCount > 0) {
    std::array<DispatchTensor, O::kCount> outs{};
    call.outputs = outs;
    auto run = [&](OpCall& c) {
      auto r = O::split(guarded(op, device, body));
      for (std::size_t i = 0; i < O::kCount; ++i) c.outputs[i] = std::move(r[i]);
    };
    run_hooked(call, OpNext([](const void* f, OpCall& c) { (*static_cast<const decltype(run)*>(f))(c); }, &run));
    for (const DispatchTensor& t : outs)
      if (!t.prim)
        throw Error(fmt_hook_error(op));
    return O::join(outs);
  } else {
    std::optional<R> result;
    auto run = [&](OpCall&) { result.emplace(guarded(op, device, body)); };
    run_hooked(call, OpNext([](const void* f, OpCall& c) { (*static_cast<const decltype(run)*>(f))(c); }, &run));
    if (!result) throw Error(fmt_hook_error(op));
    return std::move(*result);
  }
}
}  // namespace hooks_detail

// The hook step of the one invocation path: with no hook installed anywhere it is one
// relaxed load and a predictable branch before `body` (backend entry + wrap). `meta`
// and `attrs` are evaluated only when hooks run, `freeze` only when a graph recorder asks.
// On both paths the body runs under the std:: exception net (hooks_detail::guarded); a
// hook's own exceptions pass unchanged.
template <class Body, class MetaFn, class AttrFn, class FreezeFn, class... In>
inline auto invoke(OpCode op, DeviceId device, Body&& body, MetaFn&& meta, AttrFn&& attrs, FreezeFn&& freeze,
                   const In&... in) {
  if (hooks_detail::g_installed.load(std::memory_order_relaxed) == 0) [[likely]]
    return hooks_detail::guarded(op, device, body);
  return hooks_detail::invoke_hooked(op, device, body, meta, attrs, freeze, in...);
}

}  // namespace tensor::dispatch
