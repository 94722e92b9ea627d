// Shared by the Vulkan test files: the two devices compared, whether a Vulkan device
// exists, a fixture that skips without one and fails on any validation-layer
// message, and the dtypes both devices support.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <exception>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "backends/vulkan/vk_backend.hpp"
#include "dispatch/dispatch.hpp"

namespace vk_test {

inline const tensor::DeviceId kCpu{tensor::kCpuDeviceType, 0};
inline const tensor::DeviceId kVk{tensor::kVulkanDeviceType, 0};

inline bool have_vulkan() { return tensor::dispatch::device_count(tensor::kVulkanDeviceType) > 0; }

class VulkanTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!have_vulkan()) GTEST_SKIP() << "no Vulkan device";
    before_ = tensor::vulkan::validation_message_count();
  }
  void TearDown() override {
    if (!have_vulkan()) return;
    tensor::dispatch::sync(kVk);
    EXPECT_EQ(tensor::vulkan::validation_message_count(), before_) << "validation layer reported problems (see stderr)";
  }
  std::uint64_t before_ = 0;
};

// Dtypes both the cpu and vulkan:0 support (QFloat excluded; bools only if asked).
inline std::vector<tensor::DType> common_dtypes(bool with_bool) {
  std::vector<tensor::DType> out;
  for (int i = 0; i < tensor::kDTypeCount; ++i) {
    const auto t = static_cast<tensor::DType>(i);
    if (t == tensor::DType::QFloat || (!with_bool && tensor::is_bool(t))) continue;
    if (tensor::dispatch::supports_dtype(kVk, t) && tensor::dispatch::supports_dtype(kCpu, t)) out.push_back(t);
  }
  return out;
}

// op(vulkan:0) read back; an exception is recorded as a failure naming `what`.
inline std::optional<tensor::TensorData> read_on_vulkan(
    const std::string& what, const std::function<tensor::dispatch::DispatchTensor(tensor::DeviceId)>& op) {
  try {
    return tensor::dispatch::read(op(kVk));
  } catch (const std::exception& e) {
    ADD_FAILURE() << what << ": vulkan threw: " << e.what();
    return std::nullopt;
  }
}

}  // namespace vk_test
