// The kinds and the device-level entries (names, usage, counts, parsing): these bypass the
// invocation path. The op forwarders are in dispatch/rules/, one file per op-table section.
#include "dispatch/dispatch.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <string>

#include "dispatch/autodiff.hpp"
#include "dispatch/graph.hpp"
#include "dispatch/settings.hpp"
#include "dispatch/validate.hpp"
#include "tensor/error.hpp"

namespace tensor::dispatch {


std::string_view kind_name(Kind k) {
  switch (k) {
    case Kind::Float: return "Float";
    case Kind::Int: return "Int";
    case Kind::Bool: return "Bool";
    case Kind::QFloat: return "QFloat";
  }
  return "?";
}

Kind kind_of_dtype(DType dtype) {
  if (is_float(dtype)) return Kind::Float;
  if (is_int(dtype)) return Kind::Int;
  if (is_bool(dtype)) return Kind::Bool;
  return Kind::QFloat;
}

DType default_dtype(DeviceId device, Kind kind, std::string_view op) {
  const DeviceSettings& s = device_settings(device);
  switch (kind) {
    case Kind::Float: return to_dtype(s.float_dtype);
    case Kind::Int: return to_dtype(s.int_dtype);
    case Kind::Bool: return to_dtype(s.bool_dtype);
    case Kind::QFloat: break;
  }
  throw DTypeError(fmt::format("[{}] quantized tensors are not supported yet; expected Float, Int or Bool; got QFloat", op));
}

// ---- devices -------------------------------------------------------------------------

std::string device_string(DeviceId device) {
  if (is_balanced_device(device)) return fmt::format("autodiff<{}, balanced>", device_string(autodiff_inner(device)));
  if (is_autodiff_device(device)) return fmt::format("autodiff<{}>", device_string(autodiff_inner(device)));
  const Backend* b = Registry::instance().find(device.type_id);
  const std::string name = b ? b->short_name() : fmt::format("type{}", device.type_id);
  if (device.type_id == kCpuDeviceType && device.index_id == 0) return name;
  return fmt::format("{}:{}", name, device.index_id);
}

std::string backend_name(DeviceId device) {
  return fmt::format("dispatch<{}>", backend_of(device).get<DeviceOp::name>()(device));
}

namespace {
// A quantized tensor is dispatch's (dispatch/quant.hpp: i8 codes and f32 scales, each a tensor
// of the device), so its usage comes from those rows: Storage where the device stores i8 and
// f32, Arithmetic where it also computes in f32 (every quant row then runs: the defaults
// dequantize), Accelerated where the backend's own answer for QFloat says it has an integer
// path (the cpu's int8 products), not where a native row only dequantizes in a shader.
DTypeUsageSet qfloat_usage(DeviceId device, const Backend& b) {
  const auto usage = b.get<DeviceOp::dtype_usage>();
  const DTypeUsageSet i8 = usage(device, DType::I8), f32 = usage(device, DType::F32);
  if (!i8.contains(DTypeUsage::Storage) || !f32.contains(DTypeUsage::Storage)) return {};
  DTypeUsageSet u(DTypeUsage::Storage);
  if (!f32.contains(DTypeUsage::Arithmetic)) return u;
  u = u | DTypeUsage::Arithmetic;
  if (usage(device, DType::QFloat).contains(DTypeUsage::Accelerated)) u = u | DTypeUsage::Accelerated;
  return u;
}
}  // namespace

DTypeUsageSet dtype_usage(DeviceId device, DType dtype) {
  const Backend& b = backend_of(device);
  if (dtype == DType::QFloat) return qfloat_usage(device, b);
  return b.get<DeviceOp::dtype_usage>()(device, dtype);
}
bool supports_dtype(DeviceId device, DType dtype) {
  if (dtype == DType::QFloat) return dtype_usage(device, dtype).contains(DTypeUsage::Storage);
  return backend_of(device).get<DeviceOp::supports_dtype>()(device, dtype);
}
void seed(DeviceId device, std::uint64_t s) {
  graph::refuse("seed", "reseeds the device's generator (a host-side setting)");
  backend_of(device).get<DeviceOp::seed>()(device, s);
}
void sync(DeviceId device) {
  graph::refuse("sync", "waits for the device on the host");
  backend_of(device).get<DeviceOp::sync>()(device);
}
MemoryStats memory_stats(DeviceId device) { return backend_of(device).get<DeviceOp::memory_stats>()(device); }
void memory_cleanup(DeviceId device) { backend_of(device).get<DeviceOp::memory_cleanup>()(device); }

std::size_t device_count(std::uint16_t type_id) {
  const Backend* b = Registry::instance().find(type_id);
  return b ? b->get<DeviceOp::device_count>()() : 0;
}

std::vector<DeviceId> available_devices() {
  std::vector<DeviceId> out;
  for (const Backend* b : Registry::instance().backends()) {
    if (b->type_id() >= kAutodiffTypeOffset) continue;  // Device::autodiff() of a listed device
    const std::size_t n = b->get<DeviceOp::device_count>()();
    for (std::size_t i = 0; i < n; ++i) out.push_back({b->type_id(), static_cast<std::uint16_t>(i)});
  }
  return out;
}

DeviceId parse_device(const std::string& spec) {
  auto fail = [&](const std::string& why) -> DeviceId {
    std::string have;
    for (DeviceId d : available_devices()) have += (have.empty() ? "" : ", ") + device_string(d);
    std::string absent;
    for (const auto& [name, reason] : Registry::instance().absent()) absent += fmt::format("; {} absent: {}", name, reason);
    throw DeviceError(DeviceError::Kind::Unavailable,
                      fmt::format("[Device::parse] {}; expected one of: {}; got '{}'{}", why, have, spec, absent));
  };
  const auto colon = spec.find(':');
  const std::string name = spec.substr(0, colon);
  const Backend* b = Registry::instance().find_by_name(name);
  if (!b) return fail("unknown or unavailable device");
  std::size_t index = 0;
  if (colon != std::string::npos) {
    const std::string num = spec.substr(colon + 1);
    if (num.empty() || num.size() > 5 || !std::all_of(num.begin(), num.end(), [](char c) { return c >= '0' && c <= '9'; }))
      return fail("bad device index");
    index = std::stoul(num);
  }
  if (index >= b->get<DeviceOp::device_count>()()) return fail("device index out of range");
  return {b->type_id(), static_cast<std::uint16_t>(index)};
}

}  // namespace tensor::dispatch
