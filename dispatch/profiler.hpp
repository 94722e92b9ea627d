// The op profiler, the first hook on the invocation path (dispatch/hooks.hpp): the
// state behind tensor/profile.hpp and TENSOR_PROFILE=1.
#pragma once

#include <cstdint>
#include <string_view>

#include "dispatch/backend.hpp"
#include "tensor/profile.hpp"

namespace tensor::dispatch {

// The device clocks backends register (DeviceClock, register_device_clock: backend.hpp).
// The clock of the device's type (an autodiff device: its inner device's); null
// members where the type has none.
DeviceClock device_clock_of(DeviceId device);

void profiler_start();
ProfileResult profiler_read();
ProfileResult profiler_stop();
bool profiler_active();
// One row that is not an op (a graph replay: host wall time `ns`, `bytes` written), kept
// only while a profile is recording.
void profiler_record(DeviceId device, std::string_view name, std::uint64_t ns, std::uint64_t bytes);
std::string format_profile(const ProfileResult& result);

// TENSOR_PROFILE=1: start profiling and print the table to stderr at exit. Called
// once when the backend registry is built.
void start_env_profiler();

}  // namespace tensor::dispatch
