// Per-device settings (SPEC §3). The settings table is global and a device's
// entry is fixed by its first use, so every scenario runs in its own process:
// this file is built into several executables, one per SETTINGS_SCENARIO.
#include <latch>
#include <thread>

#include <tensor/quantization.hpp>

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
  const SettingsResult rq = set_default_quantization(cpu, QuantConfig{});
  EXPECT_EQ(rq.status, SettingsStatus::AlreadyInitialized);
  EXPECT_EQ(cpu.settings().quant.propagation, QuantPropagation::Inhibit);
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

#if SETTINGS_SCENARIO == 5
// The quantization part of the settings: set once before the first use, beside the dtypes;
// Propagate quantizes a float op's result on quantized operands again with their scheme.
TEST(Settings, QuantizationIsSetOnceBeforeTheFirstUseAndPropagates) {
  const Device cpu = Device::cpu();
  const QuantScheme q8s = QuantScheme{}.with_value(QuantValue::Q8S).with_store(QuantStore::Native);
  QuantConfig cfg;
  cfg.scheme = q8s;
  cfg.propagation = QuantPropagation::Propagate;
  const SettingsResult ok = set_default_quantization(cpu, cfg);
  EXPECT_TRUE(ok.ok()) << ok.message();
  // The dtypes are a part of their own: still settable once.
  EXPECT_TRUE(set_default_dtypes(cpu, FloatDType::F32, IntDType::I64, BoolDType::Native).ok());
  const SettingsResult again = set_default_quantization(cpu, QuantConfig{});
  EXPECT_EQ(again.status, SettingsStatus::AlreadyInitialized);
  EXPECT_THROWS(DeviceError, again.throw_if_error(), "[set_default_quantization] settings already initialized", "cpu");
  QuantConfig bad;
  bad.propagation = static_cast<QuantPropagation>(7);
  EXPECT_THROWS(DTypeError, (void)set_default_quantization(cpu, bad), "[set_default_quantization]", "got 7");
  EXPECT_EQ(cpu.settings().quant, cfg);
  EXPECT_EQ(cpu.settings().int_dtype, IntDType::I64);

  // x = [[-1, 0.4], [0.2, 1]]: codes {-127, 51, 25, 127}, scale 2 / 254.
  const auto x = Tensor<2>::from_data(TensorData::from<float>({-1.0f, 0.4f, 0.2f, 1.0f}, Shape{2, 2}), cpu);
  const auto q = quantize_dynamic(x, q8s);
  const float s = 2.0f / 254.0f;
  const std::vector<float> d = {-127 * s, 51 * s, 25 * s, 127 * s};
  // q * 2: amax 254 s, so the result's scale is 2 s; its codes are round(d * 2 / (2 s)) = the input's.
  const auto twice = q * 2.0f;
  ASSERT_TRUE(is_quantized(twice));
  EXPECT_EQ(*quant_scheme(twice), q8s);
  const auto tv = quantization::quantized_values(twice.into_data());
  EXPECT_EQ(tv.codes, (std::vector<std::int8_t>{-127, 51, 25, 127}));
  ASSERT_EQ(tv.scales.size(), 1u);
  EXPECT_EQ(tv.scales[0], 2.0f * (2.0f * (127 * s)) / 254.0f);
  // A reduction: one value, quantized per tensor (code 127 at amax).
  const auto sum = q.sum();
  ASSERT_TRUE(is_quantized(sum));
  const float total = d[0] + d[1] + d[2] + d[3];
  EXPECT_NEAR(dequantize(sum).into_data().to_vec<float>()[0], total, total / 127.0f);
  // A float operand: the float op, a float result (no propagation for mixed operands).
  const auto mixed = q + x;
  EXPECT_FALSE(is_quantized(mixed));
  EXPECT_EQ(mixed.dtype(), DType::F32);
  // matmul (burn's q_matmul): the product quantized again with the last quantized operand's
  // scheme, for Float x Q (the int8 route) and Q x Q alike: within half a step of the float
  // product of the values (plus the int8 route's activation rounding for Float x Q).
  const std::vector<float> xa = {0.5f, -1.0f, 2.0f, 0.25f};
  const auto xf = Tensor<2>::from_data(TensorData::from<float>(xa, Shape{2, 2}), cpu);
  std::vector<float> want(4, 0.0f), want_qq(4, 0.0f);
  for (std::size_t i = 0; i < 2; ++i)
    for (std::size_t j = 0; j < 2; ++j)
      for (std::size_t k = 0; k < 2; ++k) {
        want[i * 2 + j] += xa[i * 2 + k] * d[k * 2 + j];
        want_qq[i * 2 + j] += d[i * 2 + k] * d[k * 2 + j];
      }
  for (const auto& [y, ref] : {std::pair{xf.matmul(q), want}, std::pair{q.matmul(q), want_qq}}) {
    ASSERT_TRUE(is_quantized(y));
    EXPECT_EQ(*quant_scheme(y), q8s);
    const std::vector<float> got = dequantize(y).into_data().to_vec<float>();
    float amax = 0.0f;
    for (float v : ref) amax = std::max(amax, std::fabs(v));
    for (std::size_t i = 0; i < 4; ++i) EXPECT_NEAR(got[i], ref[i], amax / 127.0f + 0.02f * amax) << i;
  }
  // Out rows and layout rows are unaffected: indices, and codes moved.
  EXPECT_FALSE(is_quantized(q.argsort(1)));
  EXPECT_EQ(quantization::quantized_values(q.transpose().into_data()).codes, (std::vector<std::int8_t>{-127, 25, 51, 127}));
}
#endif

}  // namespace
