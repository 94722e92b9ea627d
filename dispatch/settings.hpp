// The per-device settings table (SPEC §3): the first use of a device fixes its
// default dtypes; set_default_dtypes succeeds once, only before that.
#pragma once

#include "tensor/device.hpp"

namespace tensor::dispatch {

// The device's settings, fixing them to the backend defaults on first call.
// Lock-free after the first call for that device.
const DeviceSettings& device_settings(DeviceId device);

// SettingsStatus::Ok, AlreadyInitialized or UnsupportedDType (entry left unset).
SettingsResult set_default_dtypes(DeviceId device, FloatDType f, IntDType i, BoolDType b);
// The same rule for the quantization part (DeviceSettings::quant), set on its own.
SettingsResult set_default_quantization(DeviceId device, const QuantConfig& config);

// The backend's defaults for a device (its default_settings entry).
DeviceSettings backend_default_settings(DeviceId device);

}  // namespace tensor::dispatch
