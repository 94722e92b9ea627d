// Devices (cpu, vulkan:N), their per-device settings and dtype capabilities.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tensor/dtype.hpp"
#include "tensor/export.hpp"

namespace tensor {

/// Identifies one device: its backend type and its index within that type.
struct DeviceId {
  std::uint16_t type_id = 0;
  std::uint16_t index_id = 0;
  constexpr auto operator<=>(const DeviceId&) const = default;
};

/// Autodiff checkpointing (burn's CheckpointingStrategy): None keeps every op's saved
/// state; Balanced recomputes memory-bound ops during backward instead of keeping them.
enum class CheckpointingStrategy : std::uint8_t { None, Balanced };

/// Built-in device type ids.
inline constexpr std::uint16_t kCpuDeviceType = 0;
inline constexpr std::uint16_t kVulkanDeviceType = 1;

/// Default dtypes of a device, fixed at its first use (SPEC §3).
struct DeviceSettings {
  FloatDType float_dtype = FloatDType::F32;
  IntDType int_dtype = IntDType::I32;
  BoolDType bool_dtype = BoolDType::Native;
  constexpr bool operator==(const DeviceSettings&) const = default;
};

struct MemoryStats {
  std::uint64_t bytes_in_use = 0;
  std::uint64_t bytes_reserved = 0;
  std::uint64_t peak_bytes_in_use = 0;
};

class TENSOR_API Device {
 public:
  constexpr Device() = default;  ///< cpu
  constexpr explicit Device(DeviceId id) : id_(id) {}

  /// TENSOR_DEVICE (cpu, vulkan, vulkan:N), else cpu. Throws DeviceError
  /// (listing this machine's devices) when the value is unknown or unavailable.
  static Device default_device();
  static Device cpu() { return Device(); }
  /// Parses "cpu", "vulkan", "vulkan:N"; throws DeviceError like default_device().
  static Device parse(const std::string& spec);
  /// Every device this machine has, cpu first.
  static std::vector<Device> available();

  DeviceId id() const { return id_; }
  /// "cpu", "vulkan:0"
  std::string to_string() const;
  /// The composed backend name: "dispatch<cpu>".
  std::string backend_name() const;

  DTypeUsageSet dtype_usage(DType dtype) const;
  /// Storage and Arithmetic both present.
  bool supports_dtype(DType dtype) const;
  /// The device's settings; the first call fixes them to the device defaults.
  DeviceSettings settings() const;

  void seed(std::uint64_t seed) const;
  /// Waits for all queued work; throws ExecutionError if any of it failed.
  void sync() const;
  MemoryStats memory_stats() const;
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

  constexpr bool operator==(const Device& o) const { return id_ == o.id_; }

 private:
  DeviceId id_{};
};

/// burn's TensorCreationOptions: the device a creation function puts its tensor on and,
/// optionally, its dtype (nullopt: the device's default for the tensor's kind). A Device
/// converts to it, so every creation function that takes options also takes a Device.
struct TensorCreationOptions {
  Device device;
  std::optional<DType> dtype;
  TensorCreationOptions() : device(Device::default_device()) {}
  TensorCreationOptions(Device d) : device(d) {}  // NOLINT: implicit, as burn's From<&Device>
  TensorCreationOptions(Device d, DType t) : device(d), dtype(t) {}
  TensorCreationOptions& with_dtype(DType t) { dtype = t; return *this; }
  TensorCreationOptions& with_device(Device d) { device = d; return *this; }
  /// The dtype, or `fallback` when none was set.
  DType dtype_or(DType fallback) const { return dtype ? *dtype : fallback; }
};

/// Why set_default_dtypes did not apply.
enum class SettingsStatus : std::uint8_t { Ok, AlreadyInitialized, UnsupportedDType };

struct TENSOR_API SettingsResult {
  SettingsStatus status = SettingsStatus::Ok;
  std::string device;                  ///< "cpu"
  DType dtype = DType::F32;            ///< the offending dtype, for UnsupportedDType
  explicit operator bool() const { return status == SettingsStatus::Ok; }
  bool ok() const { return status == SettingsStatus::Ok; }
  std::string message() const;
  /// Throws DeviceError with the matching kind unless ok().
  void throw_if_error() const;
};

/// Sets the device's default dtypes. Succeeds once, and only before the device's
/// first use; otherwise AlreadyInitialized. A dtype the device cannot do gives
/// UnsupportedDType and leaves the settings unset.
TENSOR_API SettingsResult set_default_dtypes(const Device& device, FloatDType float_dtype, IntDType int_dtype,
                                             BoolDType bool_dtype);

}  // namespace tensor
