// Runs with the Vulkan loader or its drivers hidden (VK_DRIVER_FILES=/nonexistent,
// or TENSOR_VK_LOADER=/nonexistent/libvulkan.so.1): libtensor.so still loads, the cpu
// device still computes, vulkan is absent, and asking for it is a DeviceError that
// lists what exists and why vulkan is missing. Exit status 0 = as expected.
#include <cstdio>
#include <string>

#include <tensor/tensor.hpp>

using namespace tensor;

int main(int argc, char** argv) {
  const std::string want_reason = argc > 1 ? argv[1] : "";
  int failures = 0;
  auto fail = [&](const std::string& what) { std::printf("FAIL: %s\n", what.c_str()); ++failures; };

  for (const Device& d : Device::available())
    if (d.to_string().rfind("vulkan", 0) == 0) fail("vulkan listed as available: " + d.to_string());

  auto a = Tensor<1>::from_data(TensorData::from<float>({1, 2, 3}, {3}), Device::cpu());
  const auto s = (a * 2.0f).sum().into_data().to_vec<float>();
  if (s.size() != 1 || s[0] != 12.0f) fail("cpu sum is wrong");

  try {
    (void)Device::parse("vulkan");
    fail("Device::parse(\"vulkan\") did not throw");
  } catch (const DeviceError& e) {
    const std::string m = e.what();
    std::printf("DeviceError: %s\n", m.c_str());
    if (m.find("cpu") == std::string::npos) fail("message does not list cpu");
    if (m.find("vulkan absent") == std::string::npos) fail("message does not say why vulkan is absent");
    if (!want_reason.empty() && m.find(want_reason) == std::string::npos) fail("message lacks '" + want_reason + "'");
  }
  std::printf("%s\n", failures ? "FAILED" : "ok");
  return failures ? 1 : 0;
}
