// The backend registry: registration fills defaults and records missing entries.
#include <fmt/format.h>

#include "dispatch/backend.hpp"
#include "dispatch/dispatch.hpp"
#include "dispatch/plugin.hpp"
#include "dispatch/profiler.hpp"
#include "tensor/error.hpp"

namespace tensor::dispatch {

Registry& Registry::instance() {
  // Built on first use; never destroyed, so tensors in static storage stay valid.
  static Registry* registry = [] {
    auto* r = new Registry();
    install_builtin_backends(*r);
    load_env_plugins(*r);  // TENSOR_BACKEND_PATH and <libdir>/tensor/backends: before any device lookup
    start_env_profiler();  // TENSOR_PROFILE=1 (uses no registry, so safe before it is published)
    return r;
  }();
  return *registry;
}

void Registry::register_backend(std::unique_ptr<Backend> backend) {
  const std::lock_guard<std::mutex> lock(register_mutex_);
  const std::uint16_t t = backend->type_id();
  if (t >= kMaxTypes) throw Error(fmt::format("[register_backend] device type {} out of range (max {})", t, kMaxTypes - 1));
  if (const Backend* taken = find(t))
    throw Error(fmt::format("[register_backend] device type {} already taken by '{}'", t, taken->short_name()));
  Backend& b = *backend;
  for (std::size_t i = 0; i < kOps.size(); ++i) b.native_[i] = b.ops_[i] != nullptr;
  for (std::size_t i = 0; i < kDeviceOps.size(); ++i) b.dev_native_[i] = b.dev_[i] != nullptr;
  install_defaults(b);
  b.missing_.clear();
  for (std::size_t i = 0; i < kOps.size(); ++i)
    if (!b.ops_[i] && kOps[i].policy == Policy::Req) b.missing_.push_back(static_cast<OpCode>(i));
  b.missing_dev_.clear();
  for (std::size_t i = 0; i < kDeviceOps.size(); ++i)
    if (!b.dev_[i] && kDeviceOps[i].policy == Policy::Req) b.missing_dev_.push_back(static_cast<DeviceOp>(i));
  // A backend without the device-level essentials cannot be used at all.
  if (!b.missing_dev_.empty()) {
    std::string names;
    for (DeviceOp d : b.missing_dev_) names += std::string(names.empty() ? "" : ", ") + std::string(device_op_info(d).name);
    throw Error(fmt::format("[register_backend] backend '{}' lacks required device entries: {}", b.short_name(), names));
  }
  backends_[t].store(backend.release(), std::memory_order_release);
}

const Backend& Registry::get(std::uint16_t type_id) const {
  if (const Backend* b = find(type_id)) return *b;
  std::string have;
  for (const Backend* b : backends()) have += std::string(have.empty() ? "" : ", ") + b->short_name();
  throw DeviceError(DeviceError::Kind::Unavailable,
                    fmt::format("[device] no backend for device type {}; available: {}", type_id, have));
}

const Backend* Registry::find_by_name(std::string_view short_name) const {
  for (const Backend* b : backends())
    if (b->short_name() == short_name) return b;
  return nullptr;
}

std::vector<const Backend*> Registry::backends() const {
  std::vector<const Backend*> out;
  for (std::uint16_t t = 0; t < kMaxTypes; ++t)
    if (const Backend* b = find(t)) out.push_back(b);
  return out;
}

void Registry::note_absent(std::string backend, std::string reason) {
  absent_.emplace_back(std::move(backend), std::move(reason));
}

std::string_view family_name(Family f) {
  switch (f) {
#define TENSOR_X(name, sig) \
  case Family::name:        \
    return #name;
    TENSOR_FAMILIES(TENSOR_X)
#undef TENSOR_X
  }
  return "?";
}

}  // namespace tensor::dispatch
