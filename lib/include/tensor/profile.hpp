// The op profiler: time, calls and bytes produced per op and device, recorded on
// dispatch's one invocation path. TENSOR_PROFILE=1 prints the table at exit; the
// functions here start, read and stop a profile in code. Times come from the device's
// clock: timestamp queries on a GPU whose queue has them (Vulkan), host wall time
// otherwise; ProfileClock says which.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tensor/device.hpp"
#include "tensor/export.hpp"

namespace tensor {

/// One op on one device.
struct ProfileRow {
  std::string device;     ///< "cpu", "vulkan:0"
  std::string op;         ///< op table name ("add", "matmul")
  /// How many times the op ran.
  std::uint64_t calls = 0;
  double total_ms = 0.0;  ///< time of every call together, on the device's clock (ProfileClock)
  double mean_us = 0.0;   ///< total / calls
  double host_ms = 0.0;   ///< host wall time of every call together (= total_ms on a host clock)
  std::uint64_t bytes = 0;  ///< bytes of the output tensors the calls produced
};

/// Which clock a device's times come from.
struct ProfileClock {
  /// The device ("cpu", "vulkan:0").
  std::string device;
  /// "host wall time" (cpu), "device timestamp queries" (a GPU queue with timestamps:
  /// the device time of the work each op submitted), or "host wall time, device synced
  /// after each op" (a device without them).
  std::string clock;
  bool device_clock = false;  ///< the times are the device's own (timestamp queries)
  /// The device's memory_stats() when the profile was read (bytes in use, reserved, peak);
  /// has_memory is false where the device keeps no account (the cpu) or could not report.
  MemoryStats memory;
  /// True when `memory` holds the device's figures (false on the cpu, or when it could not report).
  bool has_memory = false;
};

/// A recorded profile: per-op rows and each device's clock.
struct TENSOR_API ProfileResult {
  std::vector<ProfileRow> rows;      ///< grouped by device (cpu first), each by total time, longest first
  std::vector<ProfileClock> clocks;  ///< one per device that has rows
  /// The table TENSOR_PROFILE=1 prints: one block per device naming its clock.
  std::string to_string() const;
};

/// The op profiler's controls: start, read, stop (see ProfileResult; TENSOR_PROFILE=1 prints
/// the table at exit).
namespace profile {
/// Starts recording every op (clearing what a previous profile recorded). Recording
/// adds a lock and a clock read per op, and off the CPU a device sync before and after
/// each op, and timestamp queries per command batch where the device has them
/// (turned off again by stop()).
TENSOR_API void start();
/// What has been recorded since start(); recording goes on.
TENSOR_API ProfileResult read();
/// Stops recording and returns the profile (empty if none was started).
TENSOR_API ProfileResult stop();
/// True while a profile is recording (between start() and stop()).
TENSOR_API bool active();
}  // namespace profile

}  // namespace tensor
