// Vulkan backend registration: the op families' entries (vk_ops.hpp) and the
// device-level entries, once runtime/instance.cpp found devices. The top layer:
// runtime (runtime/context.hpp) <- op families (ops/kernel.hpp, ops/<family>.cpp) <- this
// file.

#include "backends/vulkan/vk_backend.hpp"

#include <fmt/format.h>

#include <exception>
#include <memory>
#include <string>

#include "backends/vulkan/runtime/context.hpp"
#include "backends/vulkan/runtime/instance.hpp"
#include "backends/vulkan/vk_ops.hpp"

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
  using D = dispatch::DeviceOp;
  b->set<D::name>(&name_entry);
  b->set<D::seed>(&seed_entry);
  b->set<D::flush>(&flush_entry);
  b->set<D::sync>(&sync_entry);
  b->set<D::dtype_usage>(&usage_entry);
  b->set<D::device_count>(&count_entry);
  b->set<D::memory_stats>(&memory_entry);
  b->set<D::memory_cleanup>(&cleanup_entry);
  b->set<D::assign>(&assign_entry);  // graph replay: the fallback (re-run the closure) until command-buffer replay
  registry.register_backend(std::move(b));
  dispatch::register_device_clock(kVulkanDeviceType, {&timing_entry, &time_entry});
}

}  // namespace tensor::vulkan