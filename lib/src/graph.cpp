// tensor/graph.hpp's library side: capture sessions (dispatch/graph.hpp's recorder), native
// replay or the closure re-run, and Tensor::copy_from.
#include "tensor/graph.hpp"

#include <fmt/format.h>

#include "dispatch/graph.hpp"
#include "dispatch/validate.hpp"
#include "handles.hpp"

namespace tensor::detail {

using dispatch::DeviceOp;
using dispatch::DispatchTensor;
namespace graph = dispatch::graph;

namespace {

DispatchTensor borrow(const Handle& h) {
  Handle c = retain(h);
  return handles::take(c);
}

void assign(const DispatchTensor& dst, const DispatchTensor& src) {
  DispatchTensor d = dst, s = src;
  const dispatch::Prim pd = d.take(), ps = s.take();
  dispatch::backend_of(dst.device).get<DeviceOp::assign>()(dst.device, pd, ps);
}

}  // namespace

struct GraphState {
  DeviceId device{};
  CaptureOptions options;
  std::unique_ptr<graph::Recorder> recorder;
  std::unique_ptr<graph::Program> program;
  std::vector<DispatchTensor> outputs;  // the buffers every replay writes
  GraphRerun rerun;

  GraphState() = default;
  GraphState(const GraphState&) = delete;
  GraphState& operator=(const GraphState&) = delete;
  ~GraphState() {
    if (program && program->native) {
      try {
        dispatch::backend_of(program->device).get<DeviceOp::graph_release>()(program->device, *program);
      } catch (...) {  // a destructor does not throw; the pins go with the program
      }
    }
  }
};

std::shared_ptr<GraphState> graph_begin(const Device& device, const CaptureOptions& options) {
  dispatch::check_device("capture", device.id());
  const DeviceId d = device.id();
  const dispatch::Backend& b = dispatch::backend_of(d);
  if (graph::active())
    throw GraphCaptureError("[graph_capture] capture() inside capture() (nested capture); expected one capture at a time "
                            "per thread; got a second one");
  b.get<DeviceOp::graph_prepare>()(d);
  b.get<DeviceOp::graph_start_capture>()(d);
  auto s = std::make_shared<GraphState>();
  s->device = d;
  s->options = options;
  s->recorder = std::make_unique<graph::Recorder>(d);
  return s;
}

void graph_abandon(GraphState& s) noexcept {
  if (s.recorder) s.recorder->abandon();
  s.recorder.reset();
}

void graph_end(GraphState& s, const std::vector<const Handle*>& outputs, GraphRerun rerun) {
  for (const Handle* h : outputs) s.outputs.push_back(borrow(*h));
  s.program = s.recorder->stop(s.outputs);
  s.recorder.reset();
  s.rerun = std::move(rerun);
  if (!s.program->native && !s.options.allow_eager_fallback)
    throw GraphCaptureError(fmt::format("[graph_capture] graph capture is not supported by this backend: {}; expected native "
                                        "replay (allow_eager_fallback is false); got the fallback",
                                        s.program->why));
}

void graph_replay(GraphState& s) {
  graph::refuse("replay", "replays a graph inside a capture");
  if (s.program->native) {
    graph::replay(*s.program);
    return;
  }
  // The fallback: the closure again, its results written into the captured buffers.
  std::vector<Handle> got;
  struct Drop {
    std::vector<Handle>& hs;
    ~Drop() {
      for (Handle& h : hs) release(h);
    }
  } drop{got};
  s.rerun(got);
  if (got.size() != s.outputs.size())
    throw Error(fmt::format("[graph_replay] the closure returned {} tensors; expected {} (as at capture)", got.size(),
                            s.outputs.size()));
  for (std::size_t i = 0; i < got.size(); ++i) {
    const DispatchTensor t = borrow(got[i]);
    const DispatchTensor& home = s.outputs[i];
    if (!(t.shape() == home.shape()) || t.dtype() != home.dtype())
      throw ShapeError(fmt::format("[graph_replay] output {} changed; expected {} {} (as at capture); got {} {}", i,
                                   home.shape().to_string(), dtype_name(home.dtype()), t.shape().to_string(),
                                   dtype_name(t.dtype())));
    if (t.prim != home.prim) assign(home, t);
  }
}

GraphStats graph_stats(const GraphState& s) {
  GraphStats g;
  if (!s.program) return g;
  const graph::ProgramStats& p = s.program->stats;
  g.nodes = p.nodes;
  g.arena_bytes = p.arena_bytes;
  g.inputs = p.inputs;
  g.constants = p.constants;
  g.internals = p.internals;
  g.outputs = p.outputs;
  g.writes = p.writes;
  g.raw_nodes = p.raw_nodes;
  g.arena_alloc_bytes = p.arena_alloc_bytes;
  g.op_counts = p.op_counts;
  g.native = s.program->native;
  g.fallback_reason = s.program->why;
  return g;
}

namespace {
// copy_from's checks; the two tensors as dispatch sees them.
std::pair<DispatchTensor, DispatchTensor> checked_pair(const char* op, const Handle& dst, const Handle& src) {
  if (dst.empty() || src.empty())
    throw Error(fmt::format("[{}] use of an empty (moved-from) tensor; expected a tensor; got an empty handle", op));
  DispatchTensor d = borrow(dst), s = borrow(src);
  if (d.device != s.device)
    throw DeviceError(DeviceError::Kind::Mismatch,
                      fmt::format("[{}] tensors on different devices; expected {}; got {}", op,
                                  dispatch::device_string(d.device), dispatch::device_string(s.device)));
  if (!(d.shape() == s.shape()))
    throw ShapeError(fmt::format("[{}] shapes differ; expected {}; got {}", op, d.shape().to_string(), s.shape().to_string()));
  if (d.dtype() != s.dtype())
    throw DTypeError(fmt::format("[{}] dtypes differ; expected {}; got {}", op, dtype_name(d.dtype()), dtype_name(s.dtype())));
  // A quantized tensor is immutable (codes, scales and what a backend derived from them, the
  // cpu's reordered int8 weight and q4 nibble pack, are kept with it): no device writes into
  // one (the backends' assign reads dst as a plain buffer). Quantize the new values instead.
  if (d.dtype() == DType::QFloat)
    throw DTypeError(fmt::format("[{}] a quantized tensor is immutable; expected a float, int or bool tensor; got qfloat "
                                 "(quantize the new values into a new tensor)",
                                 op));
  return {std::move(d), std::move(s)};
}
}  // namespace

bool graph_capturing() { return graph::active() != nullptr; }

void graph_write(const Handle& dst, const Handle& src) {
  const auto [d, s] = checked_pair("graph_write", dst, src);
  if (graph::Recorder* r = graph::active()) {
    r->write(d, s);
    return;
  }
  if (d.prim == s.prim) return;
  assign(d, s);
}

void copy_from(const Handle& dst, const Handle& src) {
  if (dst.empty() || src.empty())
    throw Error("[copy_from] use of an empty (moved-from) tensor; expected a tensor; got an empty handle");
  graph::refuse("copy_from", "writes into a buffer; refresh inputs between replays, outside capture()");
  const auto [d, s] = checked_pair("copy_from", dst, src);
  if (d.prim == s.prim) return;
  assign(d, s);
}

}  // namespace tensor::detail
