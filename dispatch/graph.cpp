// Graph capture at the invoke hook: the recorder, the refusals, and the CPU's replay list.
#include "dispatch/graph.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>

#include "dispatch/autodiff.hpp"
#include "dispatch/profiler.hpp"
#include "dispatch/validate.hpp"
#include "tensor/error.hpp"

namespace tensor::dispatch::graph {
namespace {

thread_local Recorder* t_active = nullptr;

std::size_t bytes_of(const Primitive& p) { return p.shape().num_elements() * dtype_size(p.dtype()); }

// The tensor a graph on `inner` reads or writes for t: an autodiff device's tensor is its inner one.
DispatchTensor on_record_device(const DispatchTensor& t, DeviceId inner) {
  if (t.prim && t.device != inner && is_autodiff_device(t.device) && autodiff_inner(t.device) == inner) return ad::inner(t);
  return t;
}

Kind value_kind(DType t) { return is_float(t) ? Kind::Float : is_int(t) ? Kind::Int : Kind::Bool; }

DispatchTensor retained(const Primitive* p, Kind kind) {
  auto* q = const_cast<Primitive*>(p);  // NOLINT(cppcoreguidelines-pro-type-const-cast): a reference, not a write
  q->add_ref();
  return DispatchTensor(Prim::adopt(q), kind);
}

// A write node: dst's buffer takes src's values (the device's assign row).
class WriteThunk final : public GraphThunk {
 public:
  explicit WriteThunk(DeviceId d) : d_(d), fn_(backend_of(d).get<DeviceOp::assign>()) {}
  void run(std::span<DispatchTensor> in, std::span<DispatchTensor>) const override {
    if (in[0].prim == in[1].prim) return;
    const Prim dst = in[0].take(), src = in[1].take();
    fn_(d_, dst, src);
  }

 private:
  DeviceId d_;
  void (*fn_)(DeviceId, const Prim&, const Prim&);
};

bool is_creation(Family f) {
  return f == Family::FromData || f == Family::Create || f == Family::Full || f == Family::Range || f == Family::RangeStep;
}

}  // namespace

std::string_view slot_kind_name(SlotKind k) {
  switch (k) {
    case SlotKind::Input: return "input";
    case SlotKind::Constant: return "constant";
    case SlotKind::Internal: return "internal";
    case SlotKind::Output: return "output";
  }
  return "?";
}

Recorder* active() { return t_active; }

void refuse(std::string_view what, std::string_view why) {
  if (!t_active) return;
  throw GraphCaptureError(fmt::format("[graph_capture] {} {}; expected ops a replay can repeat; got it inside capture()", what, why));
}

Recorder::Recorder(DeviceId device) : p_(std::make_unique<Program>()), outer_(device) {
  if (t_active)
    throw GraphCaptureError("[graph_capture] capture() inside capture() (nested capture); expected one capture at a time per "
                            "thread; got a second one");
  p_->device = is_autodiff_device(device) ? autodiff_inner(device) : device;
  // The kernels are the inner device's: its rows begin the capture too (capture() began
  // it on `device`, whose rows an autodiff device leaves at the defaults).
  if (p_->device != device) {
    backend_of(p_->device).get<DeviceOp::graph_prepare>()(p_->device);
    backend_of(p_->device).get<DeviceOp::graph_start_capture>()(p_->device);
  }
  add_thread_hook(this);
  installed_ = true;
  t_active = this;
}

Recorder::~Recorder() {
  abandon();
  if (!p_) return;
  // An abandoned capture: the device drops what its graph_start_capture began (a Vulkan
  // context's recording of this thread's work).
  try {
    backend_of(p_->device).get<DeviceOp::graph_release>()(p_->device, *p_);
  } catch (...) {  // a destructor does not throw
  }
}

void Recorder::abandon() noexcept {
  if (!installed_) return;
  remove_thread_hook(this);
  installed_ = false;
  t_active = nullptr;
}

void Recorder::not_native(std::string why) {
  if (!p_->native) return;
  p_->native = false;
  p_->why = std::move(why);
}

std::string Recorder::fmt_no_list(OpCode op) {
  return fmt::format("{} yields a list of tensors a replay list cannot hold", op_name(op));
}

std::uint32_t Recorder::slot_of_input(const Primitive* prim, Kind kind) {
  if (!prim) return kNoSlot;
  if (auto it = current_.find(prim); it != current_.end()) return it->second;
  // First read of a buffer made before the capture: an Input. It is pinned now unless this
  // is its only handle (the op may then write into it, and a reference would change that).
  Slot s;
  s.kind = SlotKind::Input;
  s.bytes = bytes_of(*prim);
  s.vkind = kind;
  s.shape = prim->shape();
  s.dtype = prim->dtype();
  if (prim->unique_ref())
    not_native("a tensor made before the capture was moved into an op (its only handle), so its buffer is not kept for a "
               "replay");
  else
    s.pinned = retained(prim, kind);
  const auto id = static_cast<std::uint32_t>(p_->slots.size());
  p_->slots.push_back(std::move(s));
  current_[prim] = id;
  return id;
}

void Recorder::add_outputs(Node& n, Family family, std::span<const Primitive* const> out, std::span<const Kind> kinds) {
  const auto index = static_cast<std::int64_t>(p_->nodes.size());
  const bool made_here = std::all_of(n.in.begin(), n.in.end(), [](std::uint32_t s) { return s == kNoSlot; });
  for (std::size_t j = 0; j < out.size(); ++j) {
    Slot s;
    s.kind = made_here && is_creation(family) ? SlotKind::Constant : SlotKind::Internal;
    s.bytes = out[j] ? bytes_of(*out[j]) : 0;
    if (out[j]) {
      s.shape = out[j]->shape();
      s.dtype = out[j]->dtype();
    }
    s.producer = index;
    if (j < kinds.size()) s.vkind = kinds[j];
    else if (out[j]) s.vkind = value_kind(out[j]->dtype());
    const auto id = static_cast<std::uint32_t>(p_->slots.size());
    p_->slots.push_back(std::move(s));
    if (out[j]) current_[out[j]] = id;
    n.out.push_back(id);
  }
  for (std::uint32_t s : n.in)
    if (s != kNoSlot) p_->slots[s].last_use = index;
}

void Recorder::around(OpCall& call, const OpNext& next) {
  const OpInfo& info = op_info(call.op);
  const std::string_view name = op_name(call.op);
  switch (info.family) {
    case Family::IntoData: refuse(name, "reads tensor data on the host (into_data, to_vec, item, printing); read outputs after replay() instead"); break;
    case Family::Transaction: refuse(name, "reads tensor data on the host (a transaction); read outputs after replay() instead"); break;
    case Family::MaskSelect: case Family::Argwhere:
      refuse(name, "has a value-dependent output shape (mask_select, argwhere, nonzero); a replay cannot change shapes"); break;
    case Family::Random: refuse(name, "draws random numbers; a replay would repeat them (no counter-based generator yet)"); break;
    case Family::ToDevice: refuse(name, "moves a tensor between devices; a graph runs on one device"); break;
    default: break;
  }
  // Inner ops (depth > 0) may run on another device. At the top level, ops run on the
  // captured device or, when that is an autodiff device, on its inner device (the
  // backward steps, an optimizer working on the inner tensors).
  if (depth_ == 0 && call.device != p_->device && call.device != outer_)
    refuse(name, fmt::format("runs on {}; the graph is captured on {}", device_string(call.device), device_string(outer_)));
  if (info.host_trip && !backend_of(call.device).is_native(call.op))
    refuse(name, "runs through the host on this device (a host-trip default)");

  // An autodiff device's op: its entry runs the inner entries, each recorded as a node
  // (call_entry); the op itself is no node.
  if (call.device == outer_ && outer_ != p_->device) {
    next(call);
    return;
  }
  if (depth_ > 0) {  // an op inside another (a composed default): part of the outer node
    ++depth_;
    try { next(call); } catch (...) { --depth_; throw; }
    --depth_;
    return;
  }

  Node n;
  n.op = call.op;
  if (info.family == Family::Scalar && call.attrs) n.scalar = call.attrs->scalars[0];
  if (p_->native) {
    n.thunk = call.freeze();
    if (!n.thunk) not_native(fmt::format("{} yields no tensor a replay list can hold", name));
  }
  n.in.reserve(call.inputs.size());
  for (const DispatchTensor* t : call.inputs) {
    const std::uint32_t s = slot_of_input(*t);
    n.in.push_back(s);
    if (s != kNoSlot) {  // the kind as this op sees it (an entry's output had only a dtype)
      Slot& sl = p_->slots[s];
      sl.vkind = t->kind;
      if (sl.pinned.prim) sl.pinned.kind = t->kind;
    }
  }
  ++depth_;
  try { next(call); } catch (...) { --depth_; throw; }
  --depth_;
  std::vector<const Primitive*> out;
  std::vector<Kind> kinds;
  for (const DispatchTensor& o : call.outputs) {
    out.push_back(o.prim);
    kinds.push_back(o.kind);
  }
  add_outputs(n, info.family, out, kinds);
  p_->nodes.push_back(std::move(n));
}

void Recorder::entry_begin(OpCode op, DeviceId dev, std::span<const Prim* const> in, std::unique_ptr<GraphThunk> thunk,
                           const Scalar& scalar) {
  if (op_info(op).host_trip && !backend_of(dev).is_native(op))
    refuse(op_name(op), "runs through the host on this device (a host-trip default)");
  Node n;
  n.op = op;
  n.entry = true;
  n.scalar = scalar;
  if (p_->native) {
    n.thunk = std::move(thunk);
    if (!n.thunk) not_native(fmt::format("{} yields no tensor a replay list can hold", op_name(op)));
  }
  n.in.reserve(in.size());
  for (const Prim* t : in) {
    const Primitive* q = t->get();
    n.in.push_back(slot_of_input(q, q ? value_kind(q->dtype()) : Kind::Float));
  }
  pending_ = std::move(n);
}

void Recorder::entry_end(std::span<const Primitive* const> out) {
  Node n = std::move(pending_);
  add_outputs(n, op_info(n.op).family, out, {});
  p_->nodes.push_back(std::move(n));
}

void Recorder::entry_failed() noexcept { pending_ = Node(); }

void Recorder::write(const DispatchTensor& dst_in, const DispatchTensor& src_in) {
  const DispatchTensor dst = on_record_device(dst_in, p_->device), src = on_record_device(src_in, p_->device);
  if (dst.device != p_->device || src.device != p_->device)
    refuse("graph_write", fmt::format("writes on {}; the graph is captured on {}", device_string(dst.device), device_string(outer_)));
  const auto assign = backend_of(p_->device).get<DeviceOp::assign>();
  if (depth_ > 0) {
    DispatchTensor d = dst, s = src;
    const Prim pd = d.take(), ps = s.take();
    if (pd.get() != ps.get()) assign(p_->device, pd, ps);
    return;
  }
  Node n;
  n.write = true;
  if (p_->native) n.thunk = std::make_unique<WriteThunk>(p_->device);
  n.in = {slot_of_input(dst), slot_of_input(src)};
  {
    DispatchTensor d = dst, s = src;
    const Prim pd = d.take(), ps = s.take();
    if (pd.get() != ps.get()) assign(p_->device, pd, ps);
  }
  add_outputs(n, Family::Unary, {}, {});
  p_->nodes.push_back(std::move(n));
}

std::unique_ptr<Program> Recorder::stop(const std::vector<DispatchTensor>& outputs) {
  abandon();
  Program& p = *p_;
  for (const DispatchTensor& out : outputs) {
    const DispatchTensor t = on_record_device(out, p.device);
    if (!t.prim) continue;
    auto it = current_.find(t.prim);
    if (it == current_.end()) continue;  // made before the capture and not read by it: nothing to write
    Slot& s = p.slots[it->second];
    if (s.kind == SlotKind::Input) continue;  // an input returned as it is
    s.kind = SlotKind::Output;
    s.pinned = t;
  }
  for (const Slot& s : p.slots)
    if (s.kind == SlotKind::Input && s.pinned.prim && s.pinned.prim->unique_ref())
      not_native("the closure dropped or rebound a tensor made before the capture that it reads (x = x + 1 on a "
                 "captured variable): a list replay would read the old buffer");
  const Backend& b = backend_of(p.device);
  if (!b.get<DeviceOp::graph_supported>()(p.device))
    not_native(fmt::format("{} has no native graph replay yet (graph_supported is false)", device_string(p.device)));

  // Statistics; internal and constant values live from their node to their last reader.
  ProgramStats& st = p.stats;
  st.nodes = p.nodes.size();
  for (const Slot& s : p.slots) {
    switch (s.kind) {
      case SlotKind::Input: ++st.inputs; break;
      case SlotKind::Constant: ++st.constants; break;
      case SlotKind::Internal: ++st.internals; break;
      case SlotKind::Output: ++st.outputs; break;
    }
  }
  std::size_t live = 0;
  std::vector<std::vector<std::uint32_t>> dies(p.nodes.size());
  for (std::size_t i = 0; i < p.nodes.size(); ++i) {
    const Node& n = p.nodes[i];
    if (n.write) {
      ++st.writes;
    } else {
      auto c = std::find_if(st.op_counts.begin(), st.op_counts.end(), [&](const auto& e) { return e.first == n.op; });
      if (c == st.op_counts.end()) st.op_counts.emplace_back(n.op, 1);
      else ++c->second;
    }
    for (std::uint32_t o : n.out) {
      const Slot& s = p.slots[o];
      if (s.kind == SlotKind::Output) continue;
      live += s.bytes;
      const std::int64_t end = std::max<std::int64_t>(s.last_use, static_cast<std::int64_t>(i));
      dies[static_cast<std::size_t>(end)].push_back(o);
    }
    st.arena_bytes = std::max(st.arena_bytes, live);
    for (std::uint32_t d : dies[i]) live -= p.slots[d].bytes;
  }
  if (p.native) {
    b.get<DeviceOp::graph_stop_capture>()(p.device, p);  // may set p.raw before the plan, or p.native false
    p.compile();
  } else {
    b.get<DeviceOp::graph_release>()(p.device, p);  // ends what graph_start_capture began
  }
  return std::move(p_);
}

void replay(Program& p) {
  const auto run = backend_of(p.device).get<DeviceOp::graph_replay>();
  if (!profiler_active()) {
    run(p.device, p);
    return;
  }
  // One profiler row per replay (the nodes pass no hook).
  const auto t0 = std::chrono::steady_clock::now();
  run(p.device, p);
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count();
  std::uint64_t bytes = 0;
  for (const Slot& s : p.slots)
    if (s.kind == SlotKind::Output) bytes += s.bytes;
  profiler_record(p.device, "graph_replay", static_cast<std::uint64_t>(ns), bytes);
}

}  // namespace tensor::dispatch::graph
