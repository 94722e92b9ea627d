// Graph capture at the invoke hook (issue 28, first step). A Recorder is a thread hook
// installed for the length of one capture: it lets every op run as usual (the capture run's
// results are real), refuses what a replay could not repeat (GraphCaptureError), and
// appends one Node per top-level op: its OpCode, the op frozen with its resolved backend
// entry and arguments (GraphThunk, from forward.hpp), and its input and output slots by
// buffer identity. `stop` turns the recording into a Program, the device-level
// GraphProgram that graph_replay runs natively on the CPU (a loop over the nodes: no
// validation, no dispatch, no hooks; elementwise nodes as raw kernels on an arena,
// dispatch/graph_raw.hpp); other devices replay by re-running the closure.
//
// On an autodiff device the recorder records the inner device's kernels: the decorator's
// entries call the inner backend's entries directly (not through the forward path), so
// they report each call through call_entry (an EntryThunk node); the backward steps pass
// the hook on the inner device as ordinary ops; in-place writes of state (an optimizer in
// graph mode, write()) are nodes of their own. The replay list is then plain inner-device
// kernels: no tape, no wrappers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "dispatch/dispatch.hpp"
#include "dispatch/graph_raw.hpp"
#include "dispatch/hooks.hpp"
#include "dispatch/validate.hpp"

namespace tensor::dispatch::graph {

// What a slot is to the graph. Input: a tensor made before the capture and read by it (the
// user refreshes it in place with copy_from; pinned from its first read). Constant: made in
// the window by a creation op with no tensor input. Internal: made and consumed inside the
// window. Output: returned by the closure; every replay writes it into the same buffer.
enum class SlotKind : std::uint8_t { Input, Constant, Internal, Output };
std::string_view slot_kind_name(SlotKind k);

inline constexpr std::uint32_t kNoSlot = 0xffffffffu;

struct Slot {
  SlotKind kind = SlotKind::Internal;
  DispatchTensor pinned;            // Input: the tensor read; Output: the buffer replays write into
  std::size_t bytes = 0;            // of the value (shape x dtype)
  std::int64_t producer = -1;       // node index (-1: made before the capture)
  std::int64_t last_use = -1;       // last node that reads it (-1: none)
  Kind vkind = Kind::Float;         // the kind its readers see (an entry's output has only a dtype)
  Shape shape;                      // of the value at capture (every replay makes the same)
  DType dtype = DType::F32;
};

struct Node {
  OpCode op{};
  bool entry = false;               // an inner backend entry called by an autodiff entry (EntryThunk)
  bool write = false;               // an in-place write of in[1]'s values into in[0]'s buffer
  std::unique_ptr<GraphThunk> thunk;
  Scalar scalar;                    // a Scalar-family op's scalar (the raw path converts it)
  std::vector<std::uint32_t> in;    // kNoSlot: an absent optional tensor
  std::vector<std::uint32_t> out;
};

struct ProgramStats {
  std::size_t nodes = 0, arena_bytes = 0;
  std::size_t inputs = 0, constants = 0, internals = 0, outputs = 0;
  std::size_t writes = 0;  // in-place writes of state (not in op_counts)
  std::size_t raw_nodes = 0;         // nodes (writes included) replayed as raw kernels on fixed buffers
  std::size_t arena_alloc_bytes = 0;  // the one arena allocated for them
  std::vector<std::pair<OpCode, std::size_t>> op_counts;  // by first appearance
};

// The recorded list. `native` is false (and `why` says why) when the list cannot replay
// the closure exactly; the caller then replays by re-running the closure.
class Program : public GraphProgram {
 public:
  Program() { run = &run_list; }
  DeviceId device{};
  std::vector<Node> nodes;
  std::vector<Slot> slots;
  bool native = true;
  std::string why;
  const GraphRaw* raw = nullptr;  // the device's raw path (set_graph_raw), or null
  ProgramStats stats;

  // Flattens the nodes into the replay plan below (at the end of the recording, after the
  // device's graph_stop_capture row, which may set `raw`): dispatch/graph_replay.cpp.
  void compile();

 private:
  static void run_list(GraphProgram& g);
  // Which nodes run raw, the arena offsets of their values (graph_replay.cpp).
  void plan_raw();
  // The replay plan: per node its thunk and ranges of ins_/outs_; what to do with each
  // argument and result decided once (hand over a fixed tensor: a pinned input or output,
  // an arena view; copy or hand over a value; keep a result, drop it, or write it into its
  // output buffer; publish its address for raw readers). A step without a thunk is
  // raws_[in0]: a kernel on the addresses in ptrs_.
  enum class In : std::uint8_t { None, Fixed, Copy, Move };
  enum class Out : std::uint8_t { Drop, Keep, Home, HomeKeep };
  struct InRef { std::uint32_t slot; In how; };
  struct OutRef { std::uint32_t slot; Kind kind; Out how; bool bind; };
  struct Step { const GraphThunk* thunk; std::uint32_t in0, nin, out0, nout; };
  struct RawStep { RawKernel fn; std::uint32_t out, a, b; std::size_t n; RawScalar s; };
  // Fused runs of raw nodes (graph_fuse.cpp): consecutive raw nodes over one element count
  // run tile by tile (a step without a thunk is groups_[in0]). Each slot a group touches is
  // one operand: its full address (ptrs_), or a tile buffer in scratch_ (a value no node
  // outside the group reads: never stored; or a 1-element input broadcast by an expand).
  struct Opd { std::uint32_t slot, esz, src; std::int32_t scratch; bool written, bound; };
  struct GOp { RawKernel fn; std::uint32_t o, a, b; RawScalar s; };
  struct Group { std::uint32_t first, op0, nops, opd0, nopd, nscratch; std::size_t n, tile; bool check; std::uint8_t untiled; };
  std::vector<Step> steps_;
  std::vector<InRef> ins_;
  std::vector<OutRef> outs_;
  std::vector<Opd> opds_;
  std::vector<GOp> gops_;
  std::vector<Group> groups_;
  std::vector<unsigned char> scratch_;
  std::vector<std::uint32_t> bcast_src_;  // per slot: the 1-element slot an expand broadcasts, or kNoSlot
  std::vector<std::uint32_t> alias_;      // per slot: the dense slot a reshape read only by raw nodes renames, or kNoSlot
  // Forms the groups from the raw nodes (cand: their kernels; fn null: an expand that runs
  // no kernel) and returns per slot the node its block must live to (group ends).
  // A value held in a tile buffer needs no arena block (no_block).
  void plan_groups(const std::vector<RawStep>& cand, const std::vector<bool>& keep_stored,
                   const std::vector<bool>& bound, std::vector<std::int64_t>& end, std::vector<bool>& no_block);
  void run_group(const Group& g);
  std::vector<DispatchTensor> values_;  // per-slot values during one replay (reused)
  std::vector<std::uint32_t> kept_;     // slots a replay may leave a value in (cleared after it)
  std::vector<DispatchTensor> in_, out_;  // one node's arguments and results (reused)
  // Raw path: per node whether it runs raw; per slot its address (fixed, or published
  // by the thunk that makes it), its fixed tensor (pinned, or a view of the arena) and
  // its staging address (where a thunk's non-dense value is copied for raw readers).
  std::vector<bool> raw_node_;
  std::vector<void*> ptrs_;
  std::vector<DispatchTensor> fixed_;
  std::vector<void*> stage_;
  // Values a thunk made that turned out not dense at a replay (a broadcast view): their
  // readers leave the raw path when the plan is rebuilt after that replay.
  std::vector<bool> not_dense_;
  bool replan_ = false;
  Prim arena_;
};

// ---- an inner backend entry as a replay node (autodiff devices) ------------------------
namespace entry_detail {
// One argument of an entry, as the node keeps it: tensors are taken at replay, in call
// order, from the inputs the list hands the thunk; spans own a copy; the rest is copied.
template <class A> struct Arg {
  using V = std::decay_t<A>;
  using Live = const V&;
  V v;
  explicit Arg(const V& a) : v(a) {}
  Live live(std::span<DispatchTensor>, std::size_t&) const { return v; }
};
template <> struct Arg<Prim> {
  using Live = Prim;
  explicit Arg(const Prim&) {}
  static Live live(std::span<DispatchTensor> in, std::size_t& k) { return in[k++].take(); }
};
template <> struct Arg<const Prim&> : Arg<Prim> {
  using Arg<Prim>::Arg;
};
template <> struct Arg<std::vector<Prim>> {
  using Live = std::vector<Prim>;
  std::size_t n;
  explicit Arg(const std::vector<Prim>& v) : n(v.size()) {}
  Live live(std::span<DispatchTensor> in, std::size_t& k) const {
    Live out;
    out.reserve(n);
    for (std::size_t i = 0; i < n; ++i) out.push_back(in[k++].take());
    return out;
  }
};
template <class T> struct Arg<std::span<T>> {
  using Live = std::span<T>;
  std::vector<std::remove_const_t<T>> v;
  explicit Arg(std::span<T> s) : v(s.begin(), s.end()) {}
  Live live(std::span<DispatchTensor>, std::size_t&) const { return Live(v.data(), v.size()); }
};

inline void prims(std::vector<const Prim*>& out, const Prim& p) { out.push_back(&p); }
inline void prims(std::vector<const Prim*>& out, const std::vector<Prim>& v) {
  for (const Prim& p : v) out.push_back(&p);
}
template <class Other> void prims(std::vector<const Prim*>&, const Other&) {}
template <class A> void pick_scalar(Scalar& s, const A& a) {
  if constexpr (std::is_same_v<A, Scalar>) s = a;
}

inline DispatchTensor as_tensor(Prim p) {
  const Kind k = is_float(p->dtype()) ? Kind::Float : is_int(p->dtype()) ? Kind::Int : Kind::Bool;
  return DispatchTensor(std::move(p), k);  // the list sets the kind its readers saw
}
}  // namespace entry_detail

// A backend entry with its arguments frozen: replay calls the function pointer directly.
template <class R, class... A>
class EntryThunk final : public GraphThunk {
 public:
  template <class... U>
  EntryThunk(OpCode op, R (*fn)(A...), const U&... args) : op_(op), fn_(fn), args_(entry_detail::Arg<A>(args)...) {}
  void run(std::span<DispatchTensor> in, std::span<DispatchTensor> out) const override {
    std::size_t k = 0;
    auto live = std::apply(
        [&](const auto&... f) { return std::tuple<typename entry_detail::Arg<A>::Live...>{f.live(in, k)...}; }, args_);
    set_current_op(op_);
    R r = std::apply(fn_, std::move(live));
    if constexpr (std::is_same_v<R, PrimPair>) {
      out[0] = entry_detail::as_tensor(std::move(r.first));
      out[1] = entry_detail::as_tensor(std::move(r.second));
    } else {
      out[0] = entry_detail::as_tensor(std::move(r));
    }
  }

 private:
  OpCode op_;
  R (*fn_)(A...);
  std::tuple<entry_detail::Arg<A>...> args_;
};

class Recorder final : public OpHook {
 public:
  explicit Recorder(DeviceId device);
  ~Recorder() override;
  Recorder(const Recorder&) = delete;
  Recorder& operator=(const Recorder&) = delete;

  void around(OpCall& call, const OpNext& next) override;
  // Ends the recording: `outputs` are the closure's results (their buffers become the
  // Output slots' homes). The recorder is uninstalled.
  std::unique_ptr<Program> stop(const std::vector<DispatchTensor>& outputs);
  // Uninstalls without a program (the closure threw).
  void abandon() noexcept;

  // An inner backend entry called by an autodiff device's entry: runs it, and records it
  // as one node when it is a top-level op of the inner device (see call_entry).
  template <class R, class... A, class Tuple>
  R entry(OpCode op, DeviceId dev, R (*fn)(A...), Tuple&& args) {
    constexpr bool kTensorResult = std::is_same_v<R, Prim> || std::is_same_v<R, PrimPair>;
    if (depth_ > 0 || dev != p_->device || outer_ == p_->device) return std::apply(fn, std::forward<Tuple>(args));
    if constexpr (!kTensorResult) {
      if constexpr (std::is_same_v<R, std::vector<Prim>>) not_native(fmt_no_list(op));
      return std::apply(fn, std::forward<Tuple>(args));
    } else {
      std::vector<const Prim*> in;
      std::apply([&](const auto&... a) { (entry_detail::prims(in, a), ...); }, args);
      std::unique_ptr<GraphThunk> thunk;
      Scalar scalar;
      std::apply([&](const auto&... a) { (entry_detail::pick_scalar(scalar, a), ...); }, args);
      if (p_->native)
        thunk = std::apply([&](const auto&... a) { return std::make_unique<EntryThunk<R, A...>>(op, fn, a...); }, args);
      entry_begin(op, dev, in, std::move(thunk), scalar);
      ++depth_;
      R r;
      try {
        r = std::apply(fn, std::forward<Tuple>(args));
      } catch (...) {
        --depth_;
        entry_failed();
        throw;
      }
      --depth_;
      if constexpr (std::is_same_v<R, PrimPair>) {
        const Primitive* o[2] = {r.first.get(), r.second.get()};
        entry_end(o);
      } else {
        const Primitive* o[1] = {r.get()};
        entry_end(o);
      }
      return r;
    }
  }
  // An in-place write of src's values into dst's buffer (an optimizer's state in graph
  // mode), run now and recorded as a node. Tensors of the captured autodiff device are
  // written through their inner tensors.
  void write(const DispatchTensor& dst, const DispatchTensor& src);

 private:
  void not_native(std::string why);
  static std::string fmt_no_list(OpCode op);
  std::uint32_t slot_of_input(const Primitive* prim, Kind kind);
  std::uint32_t slot_of_input(const DispatchTensor& t) { return slot_of_input(t.prim, t.kind); }
  void entry_begin(OpCode op, DeviceId dev, std::span<const Prim* const> in, std::unique_ptr<GraphThunk> thunk,
                   const Scalar& scalar);
  void entry_end(std::span<const Primitive* const> out);
  void entry_failed() noexcept;
  void add_outputs(Node& n, Family family, std::span<const Primitive* const> out, std::span<const Kind> kinds);

  std::unique_ptr<Program> p_;
  DeviceId outer_{};
  Node pending_;      // the entry node being recorded (entry_begin .. entry_end)  // the captured device (p_->device is its inner device when it is an autodiff one)
  std::unordered_map<const Primitive*, std::uint32_t> current_;  // buffer -> its latest slot
  int depth_ = 0;
  bool installed_ = false;
};

// The recorder capturing on this thread, or null.
Recorder* active();
// Throws GraphCaptureError "[graph_capture] <what> ..." when this thread is capturing.
void refuse(std::string_view what, std::string_view why);
// Runs the replay list of a native program (through the device's graph_replay row).
void replay(Program& p);

// An autodiff entry's call of the inner backend's entry `fn` with `args` (a tuple): run
// directly, and recorded as one replay node while this thread captures.
template <class R, class... A, class Tuple>
inline R call_entry(OpCode op, DeviceId dev, R (*fn)(A...), Tuple&& args) {
  Recorder* r = active();
  if (!r) [[likely]] return std::apply(fn, std::forward<Tuple>(args));
  return r->entry(op, dev, fn, std::forward<Tuple>(args));
}

}  // namespace tensor::dispatch::graph
