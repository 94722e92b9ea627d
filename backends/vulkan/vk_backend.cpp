// Vulkan backend registration: the op families' entries (vk_ops.hpp) and the
// device-level entries, once runtime/instance.cpp found devices. The top layer:
// runtime (runtime/context.hpp) <- op families (ops/kernel.hpp, ops/<family>.cpp) <- this
// file.

#include "backends/vulkan/vk_backend.hpp"

#include <fmt/format.h>

#include <cstdlib>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "backends/vulkan/runtime/context.hpp"
#include "backends/vulkan/runtime/instance.hpp"
#include "backends/vulkan/vk_ops.hpp"
#include "dispatch/graph.hpp"
#include "tensor/error.hpp"

namespace tensor::vulkan {
namespace {

std::string name_entry(DeviceId d) {
  Context* c = context(d.index_id);
  return fmt::format("vulkan<{}>", c ? c->name() : "?");
}
void seed_entry(DeviceId d, std::uint64_t s) { seed_device(d, s); }
void flush_entry(DeviceId d) {
  if (Context* c = context(d.index_id)) { c->ensure_init(); c->flush(); }
}
void sync_entry(DeviceId d) {
  if (Context* c = context(d.index_id)) { c->ensure_init(); c->sync(); }
}
DTypeUsageSet usage_entry(DeviceId d, DType t) {
  Context* c = context(d.index_id);
  return c ? c->dtype_usage(t) : DTypeUsageSet{};
}
std::size_t count_entry() { return context_count(); }
MemoryStats memory_entry(DeviceId d) {
  Context* c = context(d.index_id);
  return c ? c->memory_stats() : MemoryStats{};
}
void cleanup_entry(DeviceId d) {
  if (Context* c = context(d.index_id)) c->memory_cleanup();
}
// The profiler's device clock: timestamp queries per command batch (Context::device_time_ns).
bool timing_entry(DeviceId d, bool on) {
  Context* c = context(d.index_id);
  if (!c) return false;
  c->ensure_init();
  c->set_timestamps(on);
  return c->timestamps_on();
}
std::uint64_t time_entry(DeviceId d) {
  Context* c = context(d.index_id);
  return c ? c->device_time_ns() : 0;
}

// Native graph replay (runtime/graph.cpp): the capture run's work recorded into one
// command buffer per graph, kept here by program until graph_release.
struct NativeGraph {
  Context* ctx = nullptr;
  std::unique_ptr<Batch> exec;
};
std::mutex g_graphs_mu;
std::unordered_map<const dispatch::GraphProgram*, NativeGraph>& graphs() {
  static auto* m = new std::unordered_map<const dispatch::GraphProgram*, NativeGraph>();  // outlives static teardown
  return *m;
}
Context& graph_ctx(DeviceId d) {
  Context* c = context(d.index_id);
  if (!c)
    throw DeviceError(DeviceError::Kind::Unavailable,
                      fmt::format("[graph_capture] no such device; expected a vulkan device; got vulkan:{}", d.index_id));
  c->ensure_init();
  return *c;
}
// TENSOR_VK_GRAPH_NATIVE=0 turns native replay off (the closure is re-run): the A/B reference.
bool graph_native_enabled() {
  const char* e = std::getenv("TENSOR_VK_GRAPH_NATIVE");
  return !(e && e[0] == '0');
}
void graph_start_entry(DeviceId d) {
  if (graph_native_enabled()) graph_ctx(d).graph_record_begin();
}
void graph_stop_entry(DeviceId d, dispatch::GraphProgram& gp) {
  auto& p = static_cast<dispatch::graph::Program&>(gp);
  Context& c = graph_ctx(d);
  std::unique_ptr<GraphRecording> rec = c.graph_record_end();
  if (!rec || !rec->why.empty()) {
    p.native = false;
    p.why = !graph_native_enabled() ? "vulkan native replay is off (TENSOR_VK_GRAPH_NATIVE=0)"
            : rec ? fmt::format("vulkan cannot pre-record this graph: {}", rec->why)
                  : std::string("vulkan recorded no command stream for this capture");
    return;
  }
  NativeGraph g{&c, c.graph_build(*rec)};
  std::lock_guard<std::mutex> lock(g_graphs_mu);
  graphs()[&gp] = std::move(g);
}
void graph_replay_entry(DeviceId d, dispatch::GraphProgram& gp) {
  Batch* exec = nullptr;
  Context* c = nullptr;
  {
    std::lock_guard<std::mutex> lock(g_graphs_mu);
    auto it = graphs().find(&gp);
    if (it != graphs().end()) {
      exec = it->second.exec.get();
      c = it->second.ctx;
    }
  }
  if (!exec)
    throw ExecutionError(fmt::format("[graph_replay] no command buffer for this graph on vulkan:{}; expected a graph captured "
                                     "natively on this device; got none", d.index_id));
  c->graph_run(*exec);
}
void graph_release_entry(DeviceId d, dispatch::GraphProgram& gp) {
  Context* c = context(d.index_id);
  if (!c) return;
  // A capture that ended without a native program: its recording goes (unless another
  // capture is under way on this thread).
  if (!dispatch::graph::active()) (void)c->graph_record_end();
  NativeGraph g;
  {
    std::lock_guard<std::mutex> lock(g_graphs_mu);
    auto it = graphs().find(&gp);
    if (it == graphs().end()) return;
    g = std::move(it->second);
    graphs().erase(it);
  }
  g.ctx->graph_free(std::move(g.exec));
}
bool graph_supported_entry(DeviceId) { return graph_native_enabled(); }

}  // namespace

void install_vulkan_backend(dispatch::Registry& registry) {
  std::string why;
  try {
    why = discover_devices();
  } catch (const std::exception& e) {
    why = e.what();
  }
  if (!why.empty()) {
    registry.note_absent("vulkan", why);
    return;
  }
  auto b = std::make_unique<dispatch::Backend>("vulkan", kVulkanDeviceType);
  register_creation(*b);
  register_layout(*b);
  register_elementwise(*b);
  register_reduce(*b);
  register_matmul(*b);
  register_index(*b);
  register_softmax_sort(*b);
  register_pool_norm(*b);
  register_conv(*b);
  register_attention(*b);
  register_quant(*b);
  using D = dispatch::DeviceOp;
  b->set<D::name>(&name_entry);
  b->set<D::seed>(&seed_entry);
  b->set<D::flush>(&flush_entry);
  b->set<D::sync>(&sync_entry);
  b->set<D::dtype_usage>(&usage_entry);
  b->set<D::device_count>(&count_entry);
  b->set<D::memory_stats>(&memory_entry);
  b->set<D::memory_cleanup>(&cleanup_entry);
  b->set<D::assign>(&assign_entry);  // copy_from, graph writes, the fallback's outputs
  b->set<D::graph_start_capture>(&graph_start_entry);
  b->set<D::graph_stop_capture>(&graph_stop_entry);
  b->set<D::graph_replay>(&graph_replay_entry);
  b->set<D::graph_release>(&graph_release_entry);
  b->set<D::graph_supported>(&graph_supported_entry);
  registry.register_backend(std::move(b));
  dispatch::register_device_clock(kVulkanDeviceType, {&timing_entry, &time_entry});
}

}  // namespace tensor::vulkan