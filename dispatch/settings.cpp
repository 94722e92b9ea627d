// Settings table: one atomic slot per (device type, index). A slot is published
// once with a compare-exchange, so concurrent first uses agree on one value and
// later reads are a single acquire load.
#include "dispatch/settings.hpp"

#include <array>
#include <atomic>
#include <memory>
#include <mutex>
#include <optional>

#include "dispatch/dispatch.hpp"
#include "dispatch/graph.hpp"
#include "tensor/error.hpp"

namespace tensor::dispatch {
namespace {

constexpr std::size_t kMaxIndex = 64;

// What the setters chose before a device's first use: each part is set at most once, and
// the first read publishes the backend's defaults with the chosen parts over them.
struct Staged {
  std::optional<DeviceSettings> dtypes;  // float / int / bool dtypes
  std::optional<QuantConfig> quant;
};

struct Table {
  std::array<std::atomic<const DeviceSettings*>, Registry::kMaxTypes * kMaxIndex> slots{};
  std::array<Staged, Registry::kMaxTypes * kMaxIndex> staged{};
  std::mutex mu;  // the first publication of a slot and the staged parts
  ~Table() {
    for (auto& s : slots) delete s.load();
  }
};

Table& settings_table() {
  static Table t;
  return t;
}

std::size_t slot_index(DeviceId d) {
  d = autodiff_inner(d);  // an autodiff device shares its inner device's settings
  if (d.type_id >= Registry::kMaxTypes || d.index_id >= kMaxIndex)
    throw DeviceError(DeviceError::Kind::Unavailable,
                      "[settings] device id out of range; got type " + std::to_string(d.type_id) + " index " +
                          std::to_string(d.index_id));
  return d.type_id * kMaxIndex + d.index_id;
}
std::atomic<const DeviceSettings*>& slot(DeviceId d) { return settings_table().slots[slot_index(d)]; }

// Publishes `s` if the slot is empty; returns the value that won.
const DeviceSettings* publish(std::atomic<const DeviceSettings*>& sl, const DeviceSettings& s, bool* won) {
  auto fresh = std::make_unique<DeviceSettings>(s);
  const DeviceSettings* expected = nullptr;
  if (sl.compare_exchange_strong(expected, fresh.get(), std::memory_order_acq_rel, std::memory_order_acquire)) {
    *won = true;
    return fresh.release();
  }
  *won = false;
  return expected;
}

}  // namespace

DeviceSettings backend_default_settings(DeviceId device) {
  return backend_of(device).get<DeviceOp::default_settings>()(device);
}

const DeviceSettings& device_settings(DeviceId device) {
  auto& sl = slot(device);
  if (const DeviceSettings* s = sl.load(std::memory_order_acquire)) return *s;
  Registry::instance().get(device.type_id);  // an unknown device type is an error, not a silent default
  DeviceSettings s = backend_default_settings(autodiff_inner(device));
  const std::lock_guard<std::mutex> lock(settings_table().mu);
  const Staged& st = settings_table().staged[slot_index(device)];
  if (st.dtypes) {
    s.float_dtype = st.dtypes->float_dtype;
    s.int_dtype = st.dtypes->int_dtype;
    s.bool_dtype = st.dtypes->bool_dtype;
  }
  if (st.quant) s.quant = *st.quant;
  bool won = false;
  return *publish(sl, s, &won);
}

SettingsResult set_default_dtypes(DeviceId device, FloatDType f, IntDType i, BoolDType b) {
  graph::refuse("set_default_dtypes", "changes a device setting");
  SettingsResult r;
  r.device = device_string(device);
  for (DType t : {to_dtype(f), to_dtype(i), to_dtype(b)}) {
    if (!supports_dtype(device, t)) {
      r.status = SettingsStatus::UnsupportedDType;
      r.dtype = t;
      return r;
    }
  }
  auto& sl = slot(device);
  const std::lock_guard<std::mutex> lock(settings_table().mu);
  Staged& st = settings_table().staged[slot_index(device)];
  if (sl.load(std::memory_order_acquire) != nullptr || st.dtypes) r.status = SettingsStatus::AlreadyInitialized;
  else st.dtypes = DeviceSettings{f, i, b};
  return r;
}

SettingsResult set_default_quantization(DeviceId device, const QuantConfig& config) {
  graph::refuse("set_default_quantization", "changes a device setting");
  SettingsResult r;
  r.op = "set_default_quantization";
  r.device = device_string(device);
  auto& sl = slot(device);
  const std::lock_guard<std::mutex> lock(settings_table().mu);
  Staged& st = settings_table().staged[slot_index(device)];
  if (sl.load(std::memory_order_acquire) != nullptr || st.quant) r.status = SettingsStatus::AlreadyInitialized;
  else st.quant = config;
  return r;
}

}  // namespace tensor::dispatch
