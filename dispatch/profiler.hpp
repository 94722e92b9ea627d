// The op profiler, the first hook on the invocation path (dispatch/hooks.hpp): the
// state behind tensor/profile.hpp and TENSOR_PROFILE=1.
#pragma once

#include <cstdint>

#include "tensor/profile.hpp"

namespace tensor::dispatch {

// A device clock a backend offers the profiler (Vulkan: timestamp queries per command
// batch). set(d, on) turns it on or off where the device has one and says whether it
// is now on; ns(d) is the device time of the work retired so far (after a sync: of all
// work submitted before it). A backend registers it once, when it registers itself.
struct DeviceClock {
  bool (*set)(DeviceId, bool) = nullptr;
  std::uint64_t (*ns)(DeviceId) = nullptr;
};
void register_device_clock(std::uint16_t device_type, DeviceClock clock);
// The clock of the device's type (an autodiff device: its inner device's); null
// members where the type has none.
DeviceClock device_clock_of(DeviceId device);

void profiler_start();
ProfileResult profiler_read();
ProfileResult profiler_stop();
bool profiler_active();
std::string format_profile(const ProfileResult& result);

// TENSOR_PROFILE=1: start profiling and print the table to stderr at exit. Called
// once when the backend registry is built.
void start_env_profiler();

}  // namespace tensor::dispatch
