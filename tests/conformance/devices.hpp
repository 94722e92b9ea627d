// The devices the device-generic suites (ops_test, edge_cases_test) run on: every
// device of the registry (cpu, vulkan:N when present, and any backend registered
// later) plus the "mini" test backend, narrowed to one device by TENSOR_TEST_DEVICE
// (meson registers one test per device: ops_cpu, ops_mini, ops_vulkan, ...).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include <tensor/device.hpp>

namespace tt::conf {

// Registers the mini backend (once), then lists Device::available(), keeping only
// the device named by TENSOR_TEST_DEVICE when it is set. Call it from a gtest
// parameter generator (after static initialisation).
std::vector<tensor::Device> devices();

// "cpu", "mini_0", "vulkan_0": the device part of a test name.
std::string test_name(const tensor::Device& dev);

// Used by the device-parameterized fixtures (SetUp: enter, TearDown: leave): the
// current device, and on Vulkan a check that the validation layer stayed silent.
class DeviceScope {
 public:
  void enter(const tensor::Device& dev);
  void leave();
  static const tensor::Device& current();

 private:
  std::uint64_t validation_before_ = 0;
};

}  // namespace tt::conf

namespace tensor {
// gtest prints a device parameter as "vulkan:0" (found by argument-dependent lookup).
inline void PrintTo(const Device& dev, std::ostream* os) { *os << dev.to_string(); }
}  // namespace tensor
