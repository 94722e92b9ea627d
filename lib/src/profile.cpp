// tensor/profile.hpp: the public face of the op profiler (dispatch/profiler.cpp).
#include "tensor/profile.hpp"

#include "dispatch/profiler.hpp"

namespace tensor {

std::string ProfileResult::to_string() const { return dispatch::format_profile(*this); }

namespace profile {
void start() { dispatch::profiler_start(); }
ProfileResult read() { return dispatch::profiler_read(); }
ProfileResult stop() { return dispatch::profiler_stop(); }
bool active() { return dispatch::profiler_active(); }
}  // namespace profile

}  // namespace tensor
