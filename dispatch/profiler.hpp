// The op profiler, the first hook on the invocation path (dispatch/hooks.hpp): the
// state behind tensor/profile.hpp and TENSOR_PROFILE=1.
#pragma once

#include "tensor/profile.hpp"

namespace tensor::dispatch {

void profiler_start();
ProfileResult profiler_read();
ProfileResult profiler_stop();
bool profiler_active();
std::string format_profile(const ProfileResult& result);

// TENSOR_PROFILE=1: start profiling and print the table to stderr at exit. Called
// once when the backend registry is built.
void start_env_profiler();

}  // namespace tensor::dispatch
