// Devices (cpu, vulkan:N), their per-device settings and dtype capabilities.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tensor/dtype.hpp"
#include "tensor/export.hpp"
#include "tensor/quant_scheme.hpp"

namespace tensor {

/// Identifies one device: its backend type and its index within that type.
struct DeviceId {
  /// The backend type (kCpuDeviceType, kVulkanDeviceType, ...).
  std::uint16_t type_id = 0;
  /// The device's index within its type (vulkan:N).
  std::uint16_t index_id = 0;
  /// Ordered by type, then index.
  constexpr auto operator<=>(const DeviceId&) const = default;
};

/// Autodiff checkpointing (burn's CheckpointingStrategy): None keeps every op's saved
/// state; Balanced recomputes memory-bound ops during backward instead of keeping them.
enum class CheckpointingStrategy : std::uint8_t { None, Balanced };

/// Built-in device type ids.
///@{
inline constexpr std::uint16_t kCpuDeviceType = 0;
inline constexpr std::uint16_t kVulkanDeviceType = 1;
///@}

/// Default dtypes of a device, fixed at its first use (SPEC §3).
struct DeviceSettings {
  /// The dtype of Float tensors made without an explicit dtype (f32 unless set).
  FloatDType float_dtype = FloatDType::F32;
  /// The dtype of Int tensors made without an explicit dtype, and of indices (argmax, ...).
  IntDType int_dtype = IntDType::I32;
  /// The bool storage of every Bool tensor of the device.
  BoolDType bool_dtype = BoolDType::Native;
  /// How float ops treat quantized operands (Inhibit unless set_default_quantization said otherwise).
  QuantConfig quant{};
  /// Same dtypes and quantization.
  constexpr bool operator==(const DeviceSettings&) const = default;
};

/// A device's memory pool use, in bytes (all zero where the backend does not track it, as on cpu).
struct MemoryStats {
  /// Bytes held by live buffers.
  std::uint64_t bytes_in_use = 0;
  /// Bytes the pool holds from the driver (in use or cached for reuse).
  std::uint64_t bytes_reserved = 0;
  /// The largest bytes_in_use so far.
  std::uint64_t peak_bytes_in_use = 0;
};

/// One device (cpu or vulkan:N), a small value type. Its methods throw DeviceError when the
/// device does not exist on this machine.
class TENSOR_API Device {
 public:
  constexpr Device() = default;  ///< cpu
  /// The device of `id` (not checked until used).
  constexpr explicit Device(DeviceId id) : id_(id) {}

  /// TENSOR_DEVICE (cpu, vulkan, vulkan:N), else cpu. Throws DeviceError
  /// (listing this machine's devices) when the value is unknown or unavailable.
  static Device default_device();
  /// The cpu device.
  static Device cpu() { return Device(); }
  /// Parses "cpu", "vulkan", "vulkan:N"; throws DeviceError like default_device().
  static Device parse(const std::string& spec);
  /// Every device this machine has, cpu first.
  static std::vector<Device> available();

  /// The backend type and index.
  DeviceId id() const { return id_; }
  /// "cpu", "vulkan:0"
  std::string to_string() const;
  /// The composed backend name: "dispatch<cpu>".
  std::string backend_name() const;

  /// What this device can do with `dtype` (storage, arithmetic, a fast path); an empty set when
  /// it cannot hold it. DTypeError for a value outside the DType enum.
  DTypeUsageSet dtype_usage(DType dtype) const;
  /// Storage and Arithmetic both present.
  bool supports_dtype(DType dtype) const;
  /// The device's settings; the first call fixes them to the device defaults.
  DeviceSettings settings() const;

  /// Reseeds the device's random stream (random(), random_like(), categorical(), ...): the same seed
  /// repeats the same later draws.
  void seed(std::uint64_t seed) const;
  /// Waits for all queued work; throws ExecutionError if any of it failed.
  void sync() const;
  /// The device's memory pool use (see MemoryStats).
  MemoryStats memory_stats() const;
  /// Returns cached, unused memory to the driver (vulkan: after waiting for queued work; cpu:
  /// clears the buffer cache).
  void memory_cleanup() const;

  /// Autodiff (burn's Device::autodiff()): the device wrapping this one, whose Float
  /// tensors can require grad and record a graph; DeviceError for an autodiff device.
  /// Balanced checkpointing keeps the inputs of memory-bound ops (elementwise unary
  /// ops, activations) instead of their outputs and recomputes them during backward.
  Device autodiff(CheckpointingStrategy strategy = CheckpointingStrategy::None) const;
  /// The checkpointing strategy of an autodiff device (None for a plain device).
  CheckpointingStrategy checkpointing() const;
  /// True for a Device::autodiff() device (burn's ad_enabled).
  bool is_autodiff() const;
  /// The wrapped device of an autodiff device; the device itself otherwise.
  Device inner() const;

  /// Same device (type and index).
  constexpr bool operator==(const Device& o) const { return id_ == o.id_; }

 private:
  DeviceId id_{};
};

/// burn's TensorCreationOptions: the device a creation function puts its tensor on and,
/// optionally, its dtype (nullopt: the device's default for the tensor's kind). A Device
/// converts to it, so every creation function that takes options also takes a Device.
struct TensorCreationOptions {
  /// Where the tensor goes.
  Device device;
  /// Its dtype (nullopt: the device's default dtype of the tensor's kind).
  std::optional<DType> dtype;
  /// The default device (Device::default_device()), no dtype.
  TensorCreationOptions() : device(Device::default_device()) {}
  /// `d`, no dtype.
  TensorCreationOptions(Device d) : device(d) {}  // NOLINT: implicit, as burn's From<&Device>
  /// `d` and dtype `t`.
  TensorCreationOptions(Device d, DType t) : device(d), dtype(t) {}
  /// Sets the dtype; returns *this to chain.
  TensorCreationOptions& with_dtype(DType t) { dtype = t; return *this; }
  /// Sets the device; returns *this to chain.
  TensorCreationOptions& with_device(Device d) { device = d; return *this; }
  /// The dtype, or `fallback` when none was set.
  DType dtype_or(DType fallback) const { return dtype ? *dtype : fallback; }
};

/// Why set_default_dtypes did not apply.
enum class SettingsStatus : std::uint8_t { Ok, AlreadyInitialized, UnsupportedDType };

/// What set_default_dtypes did: Ok, or why not (status, device, dtype, message).
struct TENSOR_API SettingsResult {
  /// Ok, AlreadyInitialized or UnsupportedDType.
  SettingsStatus status = SettingsStatus::Ok;
  std::string device;                  ///< "cpu"
  DType dtype = DType::F32;            ///< the offending dtype, for UnsupportedDType
  std::string op = "set_default_dtypes";  ///< the setter that answered
  /// ok(), for `if (r) ...`.
  explicit operator bool() const { return status == SettingsStatus::Ok; }
  /// True when the settings were applied.
  bool ok() const { return status == SettingsStatus::Ok; }
  /// The error message ("[set_default_dtypes] ..."), or "ok".
  std::string message() const;
  /// Throws DeviceError with the matching kind unless ok().
  void throw_if_error() const;
};

/// Sets the device's default dtypes. Succeeds once, and only before the device's
/// first use; otherwise AlreadyInitialized. A dtype the device cannot do gives
/// UnsupportedDType and leaves the settings unset.
TENSOR_API SettingsResult set_default_dtypes(const Device& device, FloatDType float_dtype, IntDType int_dtype,
                                             BoolDType bool_dtype);

/// Sets the device's quantization settings (DeviceSettings::quant: the scheme and whether
/// float ops on quantized tensors give quantized results). The same rule as
/// set_default_dtypes, on its own: succeeds once, and only before the device's first use;
/// otherwise AlreadyInitialized. A scheme value out of range is a DTypeError.
TENSOR_API SettingsResult set_default_quantization(const Device& device, const QuantConfig& config);

}  // namespace tensor
