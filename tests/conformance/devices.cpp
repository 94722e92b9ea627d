#include "devices.hpp"

#include <algorithm>
#include <cstdlib>

#include "dispatch/backend.hpp"
#include "mini_backend.hpp"
#include "tensor/version.hpp"
#if TENSOR_HAVE_VULKAN
#include "backends/vulkan/vk_backend.hpp"
#endif

namespace tt::conf {
namespace {

tensor::Device g_current;

const char* requested() {
  const char* env = std::getenv("TENSOR_TEST_DEVICE");
  return env && *env ? env : nullptr;
}

std::uint64_t validation_messages() {
#if TENSOR_HAVE_VULKAN
  return tensor::vulkan::validation_message_count();
#else
  return 0;
#endif
}

bool is_vulkan(const tensor::Device& dev) { return dev.id().type_id == tensor::kVulkanDeviceType; }

}  // namespace

std::vector<tensor::Device> devices() {
  (void)mini::device();
  std::vector<tensor::Device> all = tensor::Device::available();
  const char* want = requested();
  if (!want) return all;
  std::vector<tensor::Device> out;
  const std::string w = want;
  for (const tensor::Device& d : all) {
    const std::string s = d.to_string();
    // "vulkan" picks vulkan:0, as TENSOR_DEVICE does; "vulkan:1" a given index.
    if (s == w || (w.find(':') == std::string::npos && s == w + ":0")) out.push_back(d);
  }
  return out;
}

std::string test_name(const tensor::Device& dev) {
  std::string s = dev.to_string();
  std::replace(s.begin(), s.end(), ':', '_');
  return s;
}

void DeviceScope::enter(const tensor::Device& dev) {
  g_current = dev;
  validation_before_ = validation_messages();
}

void DeviceScope::leave() {
  if (!is_vulkan(g_current)) return;
  g_current.sync();
  EXPECT_EQ(validation_messages(), validation_before_) << "the Vulkan validation layer reported problems (see stderr)";
}

const tensor::Device& DeviceScope::current() { return g_current; }

// The device TENSOR_TEST_DEVICE names must be present: only a missing Vulkan
// device (no loader, no driver) is a skip, with the registry's reason.
TEST(Devices, RequestedDeviceIsPresent) {
  const std::vector<tensor::Device> have = devices();
  std::string names;
  for (const tensor::Device& d : tensor::Device::available()) names += (names.empty() ? "" : ", ") + d.to_string();
  const char* want = requested();
  if (!want) {
    EXPECT_GE(have.size(), 2u) << "expected at least cpu and mini; got " << names;
    return;
  }
  if (!have.empty()) return;
  const std::string w = want;
  if (w.rfind("vulkan", 0) == 0) {
    std::string why;
    for (const auto& [backend, reason] : tensor::dispatch::Registry::instance().absent()) why += backend + ": " + reason + "; ";
    GTEST_SKIP() << "no Vulkan device (" << (why.empty() ? "not built with Vulkan" : why) << "devices: " << names << ")";
  }
  FAIL() << "TENSOR_TEST_DEVICE=" << w << " names no device; have " << names;
}

}  // namespace tt::conf
