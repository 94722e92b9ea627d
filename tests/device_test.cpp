// Devices through the public API (SPEC §3): TENSOR_DEVICE parsing, the composed
// backend name and the cpu dtype usage table.
#include <cstdlib>

#include "test_util.hpp"

namespace {

using namespace tt;

struct EnvGuard {
  explicit EnvGuard(const char* value) {
    if (value) setenv("TENSOR_DEVICE", value, 1);
    else unsetenv("TENSOR_DEVICE");
  }
  ~EnvGuard() { unsetenv("TENSOR_DEVICE"); }
};

TEST(Device, UnsetEnvironmentMeansCpu) {
  EnvGuard g(nullptr);
  const Device d = Device::default_device();
  EXPECT_EQ(d, Device::cpu());
  EXPECT_EQ(d.id().type_id, kCpuDeviceType);
  EXPECT_EQ(d.id().index_id, 0);
  EXPECT_EQ(d.to_string(), "cpu");
}

TEST(Device, EmptyEnvironmentMeansCpu) {
  EnvGuard g("");
  EXPECT_EQ(Device::default_device(), Device::cpu());
}

TEST(Device, CpuEnvironmentMeansCpu) {
  EnvGuard g("cpu");
  EXPECT_EQ(Device::default_device(), Device::cpu());
}

TEST(Device, UnknownNameIsDeviceErrorListingDevices) {
  EnvGuard g("bogus");
  EXPECT_THROWS(DeviceError, Device::default_device(), "bogus", "cpu");
  try {
    Device::default_device();
  } catch (const DeviceError& e) {
    EXPECT_EQ(e.kind(), DeviceError::Kind::Unavailable);
  }
  // Creation with the default device argument reads TENSOR_DEVICE too.
  EXPECT_THROWS(DeviceError, Tensor<1>::zeros({2}), "bogus", "cpu");
}

TEST(Device, CpuIndexOutOfRangeIsDeviceErrorListingDevices) {
  EnvGuard g("cpu:3");
  EXPECT_THROWS(DeviceError, Device::default_device(), "cpu:3", "cpu");
  EXPECT_THROWS(DeviceError, Device::parse("cpu:x"), "cpu:x", "cpu");
  EXPECT_THROWS(DeviceError, Device::parse("cpu:"), "cpu");
}

TEST(Device, CpuZeroParses) { EXPECT_EQ(Device::parse("cpu:0"), Device::cpu()); }

TEST(Device, AbsentVulkanIsAnErrorOnlyWhenRequested) {
  bool have_vulkan = false;
  for (const Device& d : Device::available()) have_vulkan |= d.id().type_id == kVulkanDeviceType;
  if (have_vulkan) GTEST_SKIP() << "a Vulkan device is present";
  EnvGuard g("vulkan");
  EXPECT_THROWS(DeviceError, Device::default_device(), "vulkan", "cpu");
}

TEST(Device, AvailableListsCpuFirst) {
  const auto all = Device::available();
  ASSERT_FALSE(all.empty());
  EXPECT_EQ(all.front(), Device::cpu());
}

TEST(Device, BackendNameComposesDispatch) { EXPECT_EQ(Device::cpu().backend_name(), "dispatch<cpu>"); }

TEST(Device, CpuDTypeUsageTable) {
  const Device cpu = Device::cpu();
  const DTypeUsageSet general = DTypeUsageSet(DTypeUsage::Storage) | DTypeUsage::Arithmetic;
  for (DType t : {DType::F64, DType::F32, DType::F16, DType::I64, DType::I32, DType::I16, DType::I8, DType::U64,
                  DType::U32, DType::U16, DType::U8, DType::Bool, DType::BoolU8}) {
    EXPECT_EQ(cpu.dtype_usage(t).bits(), general.bits()) << name(t);
    EXPECT_TRUE(cpu.supports_dtype(t)) << name(t);
  }
  // BF16 may add Accelerated where the CPU has a bf16 fast path.
  EXPECT_TRUE(cpu.dtype_usage(DType::BF16).contains(DTypeUsage::Storage));
  EXPECT_TRUE(cpu.dtype_usage(DType::BF16).contains(DTypeUsage::Arithmetic));
  EXPECT_TRUE(cpu.supports_dtype(DType::BF16));
  EXPECT_TRUE(cpu.dtype_usage(DType::BoolU32).empty()) << "bits " << int(cpu.dtype_usage(DType::BoolU32).bits());
  EXPECT_FALSE(cpu.supports_dtype(DType::BoolU32));
  // QFloat: a quantized tensor is i8 codes and f32 scales, so Storage and Arithmetic as those;
  // Accelerated where the build has the int8 products (oneDNN's).
  const DTypeUsageSet q = cpu.dtype_usage(DType::QFloat);
  EXPECT_TRUE(q.contains(DTypeUsage::Storage));
  EXPECT_TRUE(q.contains(DTypeUsage::Arithmetic));
  EXPECT_TRUE(cpu.supports_dtype(DType::QFloat));
#if TENSOR_TEST_HAVE_ONEDNN
  EXPECT_TRUE(q.contains(DTypeUsage::Accelerated));
#else
  EXPECT_FALSE(q.contains(DTypeUsage::Accelerated));
#endif
  // ... and still no op but the quant rows takes one: creating a QFloat tensor is refused
  EXPECT_THROWS(DTypeError, Tensor<1>::zeros({2}, cpu, DType::QFloat), "[zeros]", "qfloat");
}

TEST(Device, UnsupportedDTypeCreationIsDTypeError) {
  EXPECT_THROWS(DTypeError, (Tensor<1, Bool>::zeros({2}, Device::cpu(), DType::BoolU32)), "bool(u32)", "cpu");
  EXPECT_THROWS(DTypeError, Tensor<1>::zeros({2}, Device::cpu(), DType::I32), "i32");
}

}  // namespace
