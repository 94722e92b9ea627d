// Device: parsing TENSOR_DEVICE, capabilities and the settings entry points.
#include "tensor/device.hpp"

#include <fmt/format.h>

#include <cstdlib>

#include "dispatch/dispatch.hpp"
#include "dispatch/settings.hpp"
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
std::string Device::backend_name() const { return dispatch::backend_name(id_); }
DTypeUsageSet Device::dtype_usage(DType dtype) const { return dispatch::dtype_usage(id_, dtype); }
bool Device::supports_dtype(DType dtype) const { return dispatch::supports_dtype(id_, dtype); }
DeviceSettings Device::settings() const { return dispatch::device_settings(id_); }
void Device::seed(std::uint64_t s) const { dispatch::seed(id_, s); }
void Device::sync() const { dispatch::sync(id_); }
MemoryStats Device::memory_stats() const { return dispatch::memory_stats(id_); }
void Device::memory_cleanup() const { dispatch::memory_cleanup(id_); }

std::string SettingsResult::message() const {
  switch (status) {
    case SettingsStatus::Ok: return "ok";
    case SettingsStatus::AlreadyInitialized:
      return fmt::format("[set_default_dtypes] settings already initialized; expected a call before the first use of {}; "
                         "got a call after it",
                         device);
    case SettingsStatus::UnsupportedDType:
      return fmt::format("[set_default_dtypes] dtype not supported; expected a dtype {} supports; got {}", device,
                         dtype_name(dtype));
  }
  return "?";
}

void SettingsResult::throw_if_error() const {
  if (status == SettingsStatus::AlreadyInitialized) throw DeviceError(DeviceError::Kind::AlreadyInitialized, message());
  if (status == SettingsStatus::UnsupportedDType) throw DeviceError(DeviceError::Kind::UnsupportedDType, message());
}

SettingsResult set_default_dtypes(const Device& device, FloatDType f, IntDType i, BoolDType b) {
  return dispatch::set_default_dtypes(device.id(), f, i, b);
}

}  // namespace tensor
