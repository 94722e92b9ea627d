// The decorator backend (SPEC §7, reference/autodiff.md): registered once per inner
// device type and checkpointing strategy. The ops with a backward row get the generic
// tracking entry (rules_*.cpp); the required ops, host-trip defaults and backward entries
// without one are forwarded to the inner backend (Pass); the other defaulted ops are
// left to install_defaults, which composes them from these entries, so they are
// differentiated by decomposition, as burn does.
#include <fmt/format.h>

#include <mutex>

#include "dispatch/autodiff/track.hpp"
#include "dispatch/settings.hpp"
#include "dispatch/validate.hpp"

namespace tensor::dispatch::ad {
namespace detail {
namespace {

template <OpCode op>
void set_pass(Backend& b) {
  constexpr OpInfo info = op_info(op);
  // A host-trip default would read a tracked tensor back and lose its graph; a backward
  // entry's own gradient is second order: both are forwarded (raising for a tracked input
  // unless the op carries no gradient).
  if constexpr (!has_row(op) && (info.policy == Policy::Req || info.host_trip || second_order(op)))
    b.set<op>(&Pass<op>::call);
}
template <std::size_t... I>
void set_passes(Backend& b, std::index_sequence<I...>) {
  // Initializers, not a fold: clang limits a fold's nesting to 256 operands (kOpCount is more).
  [[maybe_unused]] const int each[] = {(set_pass<static_cast<OpCode>(I)>(b), 0)...};
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
// copy_from (and a graph's writes) on an autodiff device: the inner tensors' buffers.
void d_assign(DeviceId d, const Prim& dst, const Prim& src) {
  const DeviceId in = autodiff_inner(d);
  inner_backend(in).get<DeviceOp::assign>()(in, as_ad(dst).inner_, as_ad(src).inner_);
}
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
  register_elementwise(*b);
  register_reduce(*b);
  register_shape(*b);
  register_module(*b);
#define AD_ROW(name, via, keeps, ...) static_assert(false, "graph.def holds entries only");
#define AD_ENTRY(name, fn) b->set<OpCode::name>(&fn);
#include "dispatch/autodiff/rules/graph.def"
#undef AD_ROW
#undef AD_ENTRY
  set_passes(*b, std::make_index_sequence<kOpCount>());
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
  b->set<DeviceOp::assign>(&d_assign);
  b->set<DeviceOp::device_count>(kCounts[inner_type]);
  return b;
}

std::mutex g_register_mutex;

}  // namespace
}  // namespace detail

using namespace detail;

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

}  // namespace tensor::dispatch::ad
