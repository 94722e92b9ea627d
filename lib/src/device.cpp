// Device: parsing TENSOR_DEVICE, capabilities and the settings entry points.
#include "tensor/device.hpp"

#include <fmt/format.h>

#include <cstdlib>

#include "dispatch/autodiff.hpp"
#include "dispatch/backend.hpp"
#include "dispatch/dispatch.hpp"
#include "dispatch/quant_model.hpp"
#include "dispatch/settings.hpp"
#include "dispatch/validate.hpp"
#include "tensor/error.hpp"

namespace tensor {

Device Device::default_device() {
  const char* env = std::getenv("TENSOR_DEVICE");
  if (!env || !*env) return Device::cpu();
  return parse(env);
}

Device Device::parse(const std::string& spec) { return Device(dispatch::parse_device(spec)); }

std::vector<Device> Device::available() {
  std::vector<Device> out;
  for (DeviceId id : dispatch::available_devices()) out.emplace_back(id);
  return out;
}

std::string Device::to_string() const { return dispatch::device_string(id_); }

Device Device::autodiff(CheckpointingStrategy strategy) const {
  return Device(dispatch::ad::autodiff_device(id_, strategy));
}
CheckpointingStrategy Device::checkpointing() const {
  return dispatch::is_balanced_device(id_) ? CheckpointingStrategy::Balanced : CheckpointingStrategy::None;
}
bool Device::is_autodiff() const { return dispatch::is_autodiff_device(id_); }
Device Device::inner() const { return Device(dispatch::autodiff_inner(id_)); }
namespace {
void check_dtype(const char* op, DType t) {
  if (!is_valid(t))
    throw DTypeError(fmt::format("[{}] invalid dtype; expected a DType value below {}; got {}", op, kDTypeCount,
                                 static_cast<unsigned>(t)));
}
}  // namespace

std::string Device::backend_name() const {
  dispatch::check_device("Device::backend_name", id_);
  return dispatch::backend_name(id_);
}
DTypeUsageSet Device::dtype_usage(DType dtype) const {
  dispatch::check_device("Device::dtype_usage", id_);
  check_dtype("Device::dtype_usage", dtype);
  return dispatch::dtype_usage(id_, dtype);
}
bool Device::supports_dtype(DType dtype) const {
  dispatch::check_device("Device::supports_dtype", id_);
  check_dtype("Device::supports_dtype", dtype);
  return dispatch::supports_dtype(id_, dtype);
}
DeviceSettings Device::settings() const {
  dispatch::check_device("Device::settings", id_);
  return dispatch::device_settings(id_);
}
void Device::seed(std::uint64_t s) const {
  dispatch::check_device("Device::seed", id_);
  dispatch::seed(id_, s);
}
void Device::sync() const {
  dispatch::check_device("Device::sync", id_);
  dispatch::sync(id_);
}
MemoryStats Device::memory_stats() const {
  dispatch::check_device("Device::memory_stats", id_);
  return dispatch::memory_stats(id_);
}
void Device::memory_cleanup() const {
  dispatch::check_device("Device::memory_cleanup", id_);
  dispatch::memory_cleanup(id_);
}

std::string SettingsResult::message() const {
  switch (status) {
    case SettingsStatus::Ok: return "ok";
    case SettingsStatus::AlreadyInitialized:
      return fmt::format("[{}] settings already initialized; expected one call before the first use of {}; "
                         "got a call after it or a second call",
                         op, device);
    case SettingsStatus::UnsupportedDType:
      return fmt::format("[{}] dtype not supported; expected a dtype {} supports; got {}", op, device,
                         dtype_name(dtype));
  }
  return "?";
}

void SettingsResult::throw_if_error() const {
  if (status == SettingsStatus::AlreadyInitialized) throw DeviceError(DeviceError::Kind::AlreadyInitialized, message());
  if (status == SettingsStatus::UnsupportedDType) throw DeviceError(DeviceError::Kind::UnsupportedDType, message());
}

SettingsResult set_default_dtypes(const Device& device, FloatDType f, IntDType i, BoolDType b) {
  dispatch::check_device("set_default_dtypes", device.id());
  if (!is_valid(f))
    throw DTypeError(fmt::format("[set_default_dtypes] invalid FloatDType value; expected 0..3 (f64, f32, f16, bf16); got {}",
                                 static_cast<unsigned>(f)));
  if (!is_valid(i))
    throw DTypeError(fmt::format("[set_default_dtypes] invalid IntDType value; expected 0..7 (i64 .. u8); got {}",
                                 static_cast<unsigned>(i)));
  if (!is_valid(b))
    throw DTypeError(fmt::format("[set_default_dtypes] invalid BoolDType value; expected 0..2 (native, u8, u32); got {}",
                                 static_cast<unsigned>(b)));
  return dispatch::set_default_dtypes(device.id(), f, i, b);
}

SettingsResult set_default_quantization(const Device& device, const QuantConfig& config) {
  dispatch::check_device("set_default_quantization", device.id());
  dispatch::quant::check_scheme("set_default_quantization", config.scheme);
  if (config.propagation != QuantPropagation::Propagate && config.propagation != QuantPropagation::Inhibit)
    throw DTypeError(fmt::format("[set_default_quantization] invalid QuantPropagation value; expected 0..1 (propagate, "
                                 "inhibit); got {}",
                                 static_cast<unsigned>(config.propagation)));
  return dispatch::set_default_quantization(device.id(), config);
}

}  // namespace tensor
