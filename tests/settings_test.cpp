// Per-device settings (SPEC §3). The settings table is global and a device's
// entry is fixed by its first use, so every scenario runs in its own process:
// this file is built into several executables, one per SETTINGS_SCENARIO.
#include <latch>
#include <thread>

#include "test_util.hpp"

namespace {

using namespace tt;

[[maybe_unused]] DeviceSettings defaults() { return DeviceSettings{FloatDType::F32, IntDType::I32, BoolDType::Native}; }

#if SETTINGS_SCENARIO == 1
// Nothing touched cpu before this test: the process is fresh.
TEST(Settings, UnsupportedDTypeLeavesEntryUnsetThenOkThenAlreadyInitialized) {
  const Device cpu = Device::cpu();

  const SettingsResult bad = set_default_dtypes(cpu, FloatDType::F32, IntDType::I32, BoolDType::U32);
  EXPECT_EQ(bad.status, SettingsStatus::UnsupportedDType);
  EXPECT_FALSE(bad.ok());
  EXPECT_FALSE(static_cast<bool>(bad));
  EXPECT_EQ(bad.dtype, DType::BoolU32);
  EXPECT_EQ(bad.device, "cpu");
  try {
    bad.throw_if_error();
    ADD_FAILURE() << "throw_if_error did not throw for UnsupportedDType";
  } catch (const DeviceError& e) {
    EXPECT_EQ(e.kind(), DeviceError::Kind::UnsupportedDType);
    EXPECT_NE(std::string(e.what()).find("bool(u32)"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("cpu"), std::string::npos) << e.what();
  }

  // The entry stayed unset, so a supported call still succeeds.
  const SettingsResult ok = set_default_dtypes(cpu, FloatDType::F64, IntDType::I64, BoolDType::U8);
  EXPECT_EQ(ok.status, SettingsStatus::Ok);
  EXPECT_TRUE(ok.ok());
  EXPECT_NO_THROW(ok.throw_if_error());
  const DeviceSettings want{FloatDType::F64, IntDType::I64, BoolDType::U8};
  EXPECT_EQ(cpu.settings(), want);

  // Tensors created without a dtype take the new defaults, comparisons the bool dtype.
  const auto f = Tensor<1>::zeros({3}, cpu);
  EXPECT_EQ(f.dtype(), DType::F64);
  EXPECT_EQ((Tensor<1, Int>::ones({2}, cpu).dtype()), DType::I64);
  EXPECT_EQ(f.greater_elem(0.0).dtype(), DType::BoolU8);
  EXPECT_EQ((Tensor<1, Int>::arange(0, 4, cpu).dtype()), DType::I64);

  // A second call is refused and changes nothing.
  const SettingsResult again = set_default_dtypes(cpu, FloatDType::F32, IntDType::I32, BoolDType::Native);
  EXPECT_EQ(again.status, SettingsStatus::AlreadyInitialized);
  EXPECT_EQ(again.device, "cpu");
  try {
    again.throw_if_error();
    ADD_FAILURE() << "throw_if_error did not throw for AlreadyInitialized";
  } catch (const DeviceError& e) {
    EXPECT_EQ(e.kind(), DeviceError::Kind::AlreadyInitialized);
    EXPECT_NE(std::string(e.what()).find("already initialized"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("cpu"), std::string::npos) << e.what();
  }
  EXPECT_EQ(cpu.settings(), want);
}
#endif

#if SETTINGS_SCENARIO == 2
TEST(Settings, TensorCreationFixesDefaults) {
  const Device cpu = Device::cpu();
  const auto t = Tensor<2>::ones({2, 2}, cpu);  // the first use
  EXPECT_EQ(t.dtype(), DType::F32);
  const SettingsResult r = set_default_dtypes(cpu, FloatDType::F64, IntDType::I64, BoolDType::Native);
  EXPECT_EQ(r.status, SettingsStatus::AlreadyInitialized);
  EXPECT_THROWS(DeviceError, r.throw_if_error(), "already initialized", "cpu");
  EXPECT_EQ(cpu.settings(), defaults());
  EXPECT_EQ(Tensor<1>::zeros({1}, cpu).dtype(), DType::F32);
  // An unsupported dtype is still reported as such after the first use.
  const SettingsResult bad = set_default_dtypes(cpu, FloatDType::F32, IntDType::I32, BoolDType::U32);
  EXPECT_EQ(bad.status, SettingsStatus::UnsupportedDType);
  EXPECT_EQ(bad.dtype, DType::BoolU32);
}
#endif

#if SETTINGS_SCENARIO == 3
TEST(Settings, ReadingSettingsFixesDefaults) {
  const Device cpu = Device::cpu();
  EXPECT_EQ(cpu.settings(), defaults());  // the first use
  const SettingsResult r = set_default_dtypes(cpu, FloatDType::F16, IntDType::I16, BoolDType::Native);
  EXPECT_EQ(r.status, SettingsStatus::AlreadyInitialized);
  EXPECT_EQ(cpu.settings(), defaults());
}
#endif

#if SETTINGS_SCENARIO == 4
// Eight threads race on the first use: half set F64/I64, half create tensors and
// read the settings. Whoever wins, everybody observes one DeviceSettings.
TEST(Settings, ConcurrentFirstUseAgreesOnOneValue) {
  const Device cpu = Device::cpu();
  constexpr int kThreads = 8;
  std::latch start(kThreads);
  std::vector<DeviceSettings> seen(kThreads);
  std::vector<DType> made(kThreads, DType::QFloat);
  std::vector<SettingsStatus> status(kThreads, SettingsStatus::UnsupportedDType);
  std::vector<std::string> errors(kThreads);
  std::vector<std::thread> threads;
  for (int k = 0; k < kThreads; ++k)
    threads.emplace_back([&, k] {
      try {
        start.arrive_and_wait();
        if (k % 2 == 0) {
          status[k] = set_default_dtypes(cpu, FloatDType::F64, IntDType::I64, BoolDType::Native).status;
        } else if (k % 4 == 1) {
          made[k] = Tensor<1>::zeros({4}, cpu).dtype();
        } else {
          seen[k] = cpu.settings();
        }
        const DeviceSettings now = cpu.settings();
        if (k % 4 != 3) seen[k] = now;
        else if (!(seen[k] == now)) errors[k] = "settings changed after the first read";
      } catch (const std::exception& e) {
        errors[k] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  for (int k = 0; k < kThreads; ++k) EXPECT_EQ(errors[k], "") << "thread " << k;

  const DeviceSettings final_settings = cpu.settings();
  for (int k = 0; k < kThreads; ++k) EXPECT_EQ(seen[k], final_settings) << "thread " << k;
  int ok = 0;
  for (int k = 0; k < kThreads; k += 2) {
    EXPECT_TRUE(status[k] == SettingsStatus::Ok || status[k] == SettingsStatus::AlreadyInitialized) << "thread " << k;
    ok += status[k] == SettingsStatus::Ok;
  }
  EXPECT_LE(ok, 1) << "more than one set_default_dtypes succeeded";
  const DeviceSettings f64{FloatDType::F64, IntDType::I64, BoolDType::Native};
  if (ok == 1) EXPECT_EQ(final_settings, f64);
  else EXPECT_EQ(final_settings, defaults());
  for (int k = 1; k < kThreads; k += 4) EXPECT_EQ(made[k], to_dtype(final_settings.float_dtype)) << "thread " << k;
}
#endif

}  // namespace
