// The backend-author interface: a Backend is a table of op entries (one per row of
// the op table) plus device-level entries, registered with Dispatch under a device
// type id. Defaulted entries left empty are filled at registration.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "dispatch/table/ops.hpp"

namespace tensor::dispatch {

using RawFn = void (*)();

class Backend {
 public:
  // `short_name` is what TENSOR_DEVICE uses ("cpu", "vulkan").
  Backend(std::string short_name, std::uint16_t type_id) : short_name_(std::move(short_name)), type_id_(type_id) {}

  // Type-checked setters: the function must have the op's family signature.
  template <OpCode op>
  void set(FamilyFn<op_family(op)> fn) { ops_[static_cast<std::size_t>(op)] = reinterpret_cast<RawFn>(fn); }
  template <DeviceOp op>
  void set(FamilyFn<device_op_info(op).family> fn) { dev_[static_cast<std::size_t>(op)] = reinterpret_cast<RawFn>(fn); }

  // Getters; callers know the family from the op table. Null when absent.
  template <Family F>
  FamilyFn<F> get(OpCode op) const { return reinterpret_cast<FamilyFn<F>>(ops_[static_cast<std::size_t>(op)]); }
  template <DeviceOp op>
  FamilyFn<device_op_info(op).family> get() const {
    return reinterpret_cast<FamilyFn<device_op_info(op).family>>(dev_[static_cast<std::size_t>(op)]);
  }

  bool has(OpCode op) const { return ops_[static_cast<std::size_t>(op)] != nullptr; }
  bool has(DeviceOp op) const { return dev_[static_cast<std::size_t>(op)] != nullptr; }
  // Whether the entry is the backend's own (native) rather than a composed default.
  bool is_native(OpCode op) const { return native_[static_cast<std::size_t>(op)]; }
  bool is_native(DeviceOp op) const { return dev_native_[static_cast<std::size_t>(op)]; }

  const std::string& short_name() const { return short_name_; }
  std::uint16_t type_id() const { return type_id_; }
  // Required entries the backend left empty (recorded at registration).
  const std::vector<OpCode>& missing_required() const { return missing_; }
  const std::vector<DeviceOp>& missing_required_device() const { return missing_dev_; }

  // Raw access for registration.
  void set_raw(OpCode op, RawFn fn) { ops_[static_cast<std::size_t>(op)] = fn; }

 private:
  friend class Registry;
  std::string short_name_;
  std::uint16_t type_id_;
  std::array<RawFn, kOpCount> ops_{};
  std::array<RawFn, kDeviceOpCount> dev_{};
  std::array<bool, kOpCount> native_{};
  std::array<bool, kDeviceOpCount> dev_native_{};
  std::vector<OpCode> missing_;
  std::vector<DeviceOp> missing_dev_;
};

// Backends by device type. Registration happens once, at first use, through
// install_builtin_backends() (defined in backends/, so dispatch includes none of them).
class Registry {
 public:
  // Types 0..7 are backends; 8..15 their autodiff wrappers (type + kAutodiffTypeOffset);
  // 16..23 the wrappers with balanced checkpointing (type + kBalancedTypeOffset).
  static constexpr std::size_t kMaxTypes = 24;

  static Registry& instance();
  // Fills defaults, records missing required entries, takes ownership.
  // Throws Error when the type id is taken or out of range.
  void register_backend(std::unique_ptr<Backend> backend);

  // Null when no backend is registered for the type. Safe against a concurrent
  // register_backend: a slot is published only once its backend is complete.
  const Backend* find(std::uint16_t type_id) const {
    return type_id < kMaxTypes ? backends_[type_id].load(std::memory_order_acquire) : nullptr;
  }
  // Throws DeviceError listing available devices when absent.
  const Backend& get(std::uint16_t type_id) const;
  const Backend* find_by_name(std::string_view short_name) const;
  std::vector<const Backend*> backends() const;

  // Why a backend is absent (e.g. "vulkan: no Vulkan loader", or a plugin refused by a check),
  // for tensorctl info. Noted by install_builtin_backends and the plugin loader, both before
  // the registry is handed out.
  void note_absent(std::string backend, std::string reason);
  const std::vector<std::pair<std::string, std::string>>& absent() const { return absent_; }

 private:
  Registry() = default;
  // Registered backends live as long as the process (tensors in static storage may
  // outlive main), so the slots hold plain pointers that are never freed.
  std::array<std::atomic<Backend*>, kMaxTypes> backends_{};
  std::mutex register_mutex_;  // one registration at a time
  std::vector<std::pair<std::string, std::string>> absent_;
};

// Autodiff devices (dispatch/autodiff.hpp): the wrapper of device type t has type
// t + kAutodiffTypeOffset (t + kBalancedTypeOffset with balanced checkpointing) and the
// same index; it shares the inner device's settings.
inline constexpr std::uint16_t kAutodiffTypeOffset = 8;
inline constexpr std::uint16_t kBalancedTypeOffset = 16;
constexpr bool is_autodiff_device(DeviceId d) { return d.type_id >= kAutodiffTypeOffset; }
constexpr bool is_balanced_device(DeviceId d) { return d.type_id >= kBalancedTypeOffset; }
constexpr DeviceId autodiff_inner(DeviceId d) {
  if (!is_autodiff_device(d)) return d;
  const std::uint16_t off = is_balanced_device(d) ? kBalancedTypeOffset : kAutodiffTypeOffset;
  return DeviceId{static_cast<std::uint16_t>(d.type_id - off), d.index_id};
}

// Defined in backends/backends.cpp: registers every compiled-in backend.
void install_builtin_backends(Registry& registry);

// Fills the empty defaulted entries of `backend` with compositions (dispatch/defaults/).
void install_defaults(Backend& backend);

// A device clock a backend offers the profiler (dispatch/profiler.hpp; Vulkan: timestamp
// queries per command batch). set(d, on) turns it on or off where the device has one and
// says whether it is now on; ns(d) is the device time of the work retired so far (after a
// sync: of all work submitted before it). A backend registers it once, when it registers
// itself.
struct DeviceClock {
  bool (*set)(DeviceId, bool) = nullptr;
  std::uint64_t (*ns)(DeviceId) = nullptr;
};
void register_device_clock(std::uint16_t device_type, DeviceClock clock);

// The backend that owns a primitive.
inline const Backend& backend_of(const Prim& p) { return Registry::instance().get(p->device().type_id); }
inline const Backend& backend_of(DeviceId d) { return Registry::instance().get(d.type_id); }

}  // namespace tensor::dispatch
