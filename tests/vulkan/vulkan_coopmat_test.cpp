// The optional Vulkan f16 paths: the cooperative-matrix gate (pure decisions on
// synthetic device facts, the TENSOR_VK_DISABLE_COOPMAT switch, what this device
// reports and that F16 is Accelerated only while the path is live), and the native
// f16 elementwise kernels against the f32-compute path and the CPU. The validation
// layer is on (TENSOR_VK_VALIDATION=1) and any message fails a device test.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include <tensor/tensor.hpp>

#include "backends/vulkan/vk_backend.hpp"
#include "backends/vulkan/runtime/context.hpp"
#include "backends/vulkan/runtime/features.hpp"
#include "dispatch/dispatch.hpp"
#include "tests/vulkan/vk_test_util.hpp"

namespace {

using namespace tensor;
namespace d = tensor::dispatch;
namespace vk = tensor::vulkan;
using DT = d::DispatchTensor;

using vk_test::have_vulkan;
using vk_test::kCpu;
using vk_test::kVk;

// ---- the gate, on synthetic facts (VkComponentTypeNV: 0 = f16, 1 = f32; VkScopeNV 3 = subgroup) ----

vk::CoopFacts nvidia_like() {
  vk::CoopFacts f;
  f.vendor_id = 0x10DE;
  f.extension = true;
  f.feature = true;
  f.f16_storage = true;
  f.memory_model = true;
  f.subgroup_size = 32;
  f.shapes = {{16, 8, 16, 0, 0, 0, 0, 3}, {16, 16, 16, 0, 0, 1, 1, 3}};
  return f;
}

TEST(CoopmatGate, UsableWithEverythingInPlace) {
  const vk::CoopDecision dc = vk::decide_coopmat(nvidia_like());
  EXPECT_TRUE(dc.usable) << dc.reason;
  EXPECT_NE(dc.reason.find("VK_NV_cooperative_matrix"), std::string::npos) << dc.reason;
}

TEST(CoopmatGate, EachMissingFactSaysWhy) {
  struct Case {
    std::function<void(vk::CoopFacts&)> change;
    const char* reason;
  };
  const Case cases[] = {
      {[](vk::CoopFacts& f) { f.disabled = true; }, "disabled by TENSOR_VK_DISABLE_COOPMAT"},
      {[](vk::CoopFacts& f) { f.extension = false; }, "does not offer VK_NV_cooperative_matrix"},
      {[](vk::CoopFacts& f) { f.vendor_id = 0x1002; }, "vendor 0x1002 is not on the cooperative-matrix allow-list"},
      {[](vk::CoopFacts& f) { f.vendor_id = 0x10005; }, "vendor 0x10005 is not on"},
      {[](vk::CoopFacts& f) { f.feature = false; }, "cooperativeMatrix feature is not supported"},
      {[](vk::CoopFacts& f) { f.f16_storage = false; }, "lacks shaderFloat16 or storageBuffer16BitAccess"},
      {[](vk::CoopFacts& f) { f.memory_model = false; }, "lacks VK_KHR_vulkan_memory_model / vulkanMemoryModel"},
      {[](vk::CoopFacts& f) { f.subgroup_size = 64; }, "subgroup size 64; the shader needs 32"},
      {[](vk::CoopFacts& f) { f.shapes.pop_back(); }, "no 16x16x16 f16 x f16 + f32 subgroup tile among the 1 reported"},
      // Same sizes but f16 accumulation, or workgroup scope: not the tile the shader uses.
      {[](vk::CoopFacts& f) { f.shapes.back().c = 0; f.shapes.back().d = 0; }, "no 16x16x16"},
      {[](vk::CoopFacts& f) { f.shapes.back().scope = 2; }, "no 16x16x16"},
      {[](vk::CoopFacts& f) { f.shapes.clear(); }, "among the 0 reported shapes"},
  };
  for (const Case& c : cases) {
    vk::CoopFacts f = nvidia_like();
    c.change(f);
    const vk::CoopDecision dc = vk::decide_coopmat(f);
    EXPECT_FALSE(dc.usable) << c.reason;
    EXPECT_NE(dc.reason.find(c.reason), std::string::npos) << "got: " << dc.reason;
  }
  // The switch wins over everything else, including a device that has it all.
  vk::CoopFacts off = nvidia_like();
  off.disabled = true;
  off.vendor_id = 0x1002;
  EXPECT_EQ(vk::decide_coopmat(off).reason, "disabled by TENSOR_VK_DISABLE_COOPMAT");
  EXPECT_TRUE(vk::coopmat_vendor_allowed(0x10DE));
  EXPECT_FALSE(vk::coopmat_vendor_allowed(0x8086));
}

// ---- this device ----

class VulkanF16 : public vk_test::VulkanTest {
 protected:
  void SetUp() override {
    vk_test::VulkanTest::SetUp();
    if (IsSkipped()) return;
    ctx_ = vk::context(0);
    ctx_->ensure_init();
  }
  void TearDown() override {
    if (ctx_) ctx_->set_f16_arith(ctx_->f16_arith_supported());
    vk_test::VulkanTest::TearDown();
  }
  vk::Context* ctx_ = nullptr;
};

DT upload(const TensorData& data, DeviceId dev) { return d::from_data(data, dev, d::kind_of_dtype(data.dtype())); }

TEST_F(VulkanF16, CoopmatStateMatchesTheGateAndTheSwitch) {
  const vk::CoopDecision dc = vk::decide_coopmat(ctx_->coop_facts());
  const bool switched_off = vk::env_flag("TENSOR_VK_DISABLE_COOPMAT");
  EXPECT_EQ(ctx_->coop_facts().disabled, switched_off);
  if (switched_off) {
    EXPECT_EQ(ctx_->coop_state(), vk::CoopState::Unavailable);
    EXPECT_EQ(ctx_->coop_reason(), "disabled by TENSOR_VK_DISABLE_COOPMAT");
  }
  if (!dc.usable) {
    EXPECT_EQ(ctx_->coop_state(), vk::CoopState::Unavailable);
    EXPECT_EQ(ctx_->coop_reason(), dc.reason);
    EXPECT_FALSE(ctx_->coop_reason().empty());
  }
  // A device that offers no VK_NV_cooperative_matrix (lavapipe) says so.
  if (!ctx_->coop_facts().extension && !switched_off) {
    EXPECT_EQ(ctx_->coop_reason(), "the device does not offer VK_NV_cooperative_matrix");
  }
  // An f16 matmul with edge tiles and a broadcast batch matches the CPU on whichever
  // path runs (the first one runs the self-test where the path is usable).
  std::vector<float> av(2 * 20 * 36), bv(36 * 12);
  for (std::size_t i = 0; i < av.size(); ++i) av[i] = static_cast<float>(static_cast<int>(i % 11) - 5) / 4.0f;
  for (std::size_t i = 0; i < bv.size(); ++i) bv[i] = static_cast<float>(static_cast<int>(i % 7) - 3) / 2.0f;
  const TensorData ta = TensorData::from(av, Shape{2, 20, 36}).convert(DType::F16);
  const TensorData tb = TensorData::from(bv, Shape{1, 36, 12}).convert(DType::F16);
  const TensorData want = d::read(d::matmul(upload(ta, kCpu), upload(tb, kCpu)));
  const TensorData got = d::read(d::matmul(upload(ta, kVk), upload(tb, kVk)));
  EXPECT_EQ(want.convert(DType::F32).to_vec<float>(), got.convert(DType::F32).to_vec<float>());
  EXPECT_NE(ctx_->coop_state(), vk::CoopState::Untested);
  // F16 is Accelerated exactly while the cooperative-matrix path is live.
  const bool live = ctx_->coop_state() == vk::CoopState::Live && ctx_->coop_enabled();
  EXPECT_EQ(d::dtype_usage(kVk, DType::F16).contains(DTypeUsage::Accelerated), live);
  EXPECT_TRUE(d::dtype_usage(kVk, DType::F16).contains(DTypeUsage::Arithmetic));
  if (ctx_->coop_state() == vk::CoopState::Live) {  // switching off drops Accelerated
    ctx_->set_coop_enabled(false);
    EXPECT_FALSE(d::dtype_usage(kVk, DType::F16).contains(DTypeUsage::Accelerated));
    ctx_->set_coop_enabled(true);
    EXPECT_TRUE(d::dtype_usage(kVk, DType::F16).contains(DTypeUsage::Accelerated));
  }
}

TEST_F(VulkanF16, FailedSelfTestDisablesThePathAndSaysWhy) {
  // Where the path is unusable its shader module does not exist, so a forced self-test
  // must fail (pipeline creation), record why, and leave the tiled path answering.
  if (vk::decide_coopmat(ctx_->coop_facts()).usable) GTEST_SKIP() << "coopmat usable here: the real self-test ran";
  const vk::CoopState state = ctx_->coop_state();
  const std::string reason = ctx_->coop_reason();
  ctx_->set_coop_state(vk::CoopState::Untested, "forced by the test");
  std::vector<float> av(24 * 40), bv(40 * 8);
  for (std::size_t i = 0; i < av.size(); ++i) av[i] = static_cast<float>(static_cast<int>(i % 9) - 4) / 2.0f;
  for (std::size_t i = 0; i < bv.size(); ++i) bv[i] = static_cast<float>(static_cast<int>(i % 5) - 2) / 4.0f;
  const TensorData ta = TensorData::from(av, Shape{24, 40}).convert(DType::F16);
  const TensorData tb = TensorData::from(bv, Shape{40, 8}).convert(DType::F16);
  const TensorData got = d::read(d::matmul(upload(ta, kVk), upload(tb, kVk)));
  EXPECT_EQ(ctx_->coop_state(), vk::CoopState::Failed);
  EXPECT_NE(ctx_->coop_reason().find("self-test failed"), std::string::npos) << ctx_->coop_reason();
  EXPECT_NE(ctx_->coop_reason().find("matmul_coop"), std::string::npos) << ctx_->coop_reason();
  EXPECT_NE(ctx_->coop_reason().find("disabled"), std::string::npos) << ctx_->coop_reason();
  EXPECT_FALSE(d::dtype_usage(kVk, DType::F16).contains(DTypeUsage::Accelerated));
  const TensorData want = d::read(d::matmul(upload(ta, kCpu), upload(tb, kCpu)));
  EXPECT_EQ(want.convert(DType::F32).to_vec<float>(), got.convert(DType::F32).to_vec<float>());
  ctx_->set_coop_state(state, reason);
}

TEST_F(VulkanF16, ArithmeticSwitchFollowsTheDeviceAndTheEnvironment) {
  if (vk::env_flag("TENSOR_VK_DISABLE_F16ARITH")) {
    EXPECT_FALSE(ctx_->f16_arith_supported());
    EXPECT_FALSE(ctx_->f16_arith());
  }
  EXPECT_EQ(ctx_->f16_arith(), ctx_->f16_arith_supported());
  ctx_->set_f16_arith(false);
  EXPECT_FALSE(ctx_->f16_arith());
  ctx_->set_f16_arith(true);  // only where supported
  EXPECT_EQ(ctx_->f16_arith(), ctx_->f16_arith_supported());
}

// f16 values: k/4, large ones whose sums and products overflow to inf, NaN, -0.
std::vector<float> f16_values(std::size_t n, unsigned seed) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) {
    const unsigned k = static_cast<unsigned>(i) * 2654435761u + seed * 40503u;
    v[i] = static_cast<float>(static_cast<int>(k % 41) - 20) / 4.0f;
    if (k % 13 == 0) v[i] = (k % 2 ? -1.0f : 1.0f) * 40000.0f;
    if (k % 29 == 0) v[i] = std::numeric_limits<float>::quiet_NaN();
    if (k % 31 == 0) v[i] = -0.0f;
  }
  return v;
}

// Bit patterns equal, NaNs by class.
::testing::AssertionResult same_f16(const TensorData& x, const TensorData& y) {
  if (!(x.shape() == y.shape())) return ::testing::AssertionFailure() << x.shape().to_string() << " vs " << y.shape().to_string();
  const auto a = x.convert(DType::F32).to_vec<float>(), b = y.convert(DType::F32).to_vec<float>();
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) && std::isnan(b[i])) continue;
    if (a[i] == b[i] && std::signbit(a[i]) == std::signbit(b[i])) continue;
    return ::testing::AssertionFailure() << "element " << i << ": " << a[i] << " vs " << b[i];
  }
  return ::testing::AssertionSuccess();
}

TEST_F(VulkanF16, NativeF16KernelsMatchTheF32PathAndTheCpu) {
  if (!d::supports_dtype(kVk, DType::F16)) GTEST_SKIP() << "device has no f16";
  const TensorData a = TensorData::from(f16_values(6 * 7, 1), Shape{6, 7}).convert(DType::F16);
  const TensorData b = TensorData::from(f16_values(6 * 7, 2), Shape{6, 7}).convert(DType::F16);
  const TensorData bt = TensorData::from(f16_values(7 * 6, 3), Shape{7, 6}).convert(DType::F16);
  const TensorData row = TensorData::from(f16_values(7, 4), Shape{1, 7}).convert(DType::F16);
  struct Case {
    const char* name;
    std::function<DT(DeviceId)> f;
  };
  const std::int64_t to[2] = {6, 7};
  const std::int64_t ax[1] = {1};
  std::vector<Case> cases;
  for (OpCode op : {OpCode::add, OpCode::sub, OpCode::mul, OpCode::div}) {
    cases.push_back({"contiguous", [=, &a, &b](DeviceId dev) { return d::binary(op, upload(a, dev), upload(b, dev)); }});
    cases.push_back({"transposed", [=, &a, &bt](DeviceId dev) {
                       return d::binary(op, upload(a, dev), d::swap_dims(upload(bt, dev), 0, 1));
                     }});
    cases.push_back({"broadcast", [=, &a, &row](DeviceId dev) {
                       return d::binary(op, d::reshape(OpCode::expand, upload(row, dev), to), upload(a, dev));
                     }});
    cases.push_back({"flipped", [=, &a, &b](DeviceId dev) {
                       return d::binary(op, d::axes(OpCode::flip, upload(a, dev), ax), upload(b, dev));
                     }});
  }
  for (OpCode op : {OpCode::add_scalar, OpCode::sub_scalar, OpCode::mul_scalar, OpCode::div_scalar})
    cases.push_back({"scalar", [=, &a](DeviceId dev) { return d::scalar(op, upload(a, dev), Scalar(-1.75)); }});
  cases.push_back({"copy of a transposed view", [&](DeviceId dev) {
                     return d::reshape(OpCode::reshape, d::swap_dims(upload(bt, dev), 0, 1), std::vector<std::int64_t>{42});
                   }});
  cases.push_back({"fill", [](DeviceId dev) { return d::full(Shape{5, 3}, Scalar(0.1), dev, d::Kind::Float, DType::F16); }});
  cases.push_back({"zero-size", [](DeviceId dev) {
                     return d::binary(OpCode::add, d::full(Shape{0, 3}, Scalar(1), dev, d::Kind::Float, DType::F16),
                                      d::full(Shape{0, 3}, Scalar(2), dev, d::Kind::Float, DType::F16));
                   }});
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    const TensorData want = d::read(c.f(kCpu));
    ctx_->set_f16_arith(false);
    const TensorData f32path = d::read(c.f(kVk));
    ctx_->set_f16_arith(true);
    const TensorData native = d::read(c.f(kVk));
    // add/sub/mul are correctly rounded in f16 and div rounds an f32 quotient exactly
    // once, so both paths give the CPU's bits (no subnormal results here).
    EXPECT_TRUE(same_f16(want, f32path)) << "case " << i << " " << c.name << " (f32 compute)";
    EXPECT_TRUE(same_f16(want, native)) << "case " << i << " " << c.name << " (native f16)";
  }
}

}  // namespace
