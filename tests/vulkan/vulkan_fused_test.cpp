// The fused Vulkan kernels of the ops that default to compositions elsewhere
// (activations and their backward forms, softmin, clamp, sign, neg, square, hypot,
// the powers, is_nan / is_inf, not_equal, bool_xor): they must be native on Vulkan
// (a regression to the default composition fails here), and they must agree with
// the CPU backend on the values the generic suites do not reach: NaN, +-inf, -0,
// subnormals, integer wrap-around and saturation, negative and huge int
// exponents, broadcast and strided operands. Bit-exact where the CPU's result is
// one rounding of the same expression, else within a dtype tolerance. The
// validation layer is on (TENSOR_VK_VALIDATION=1) and any message fails the test.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include <tensor/tensor.hpp>

#include "dispatch/dispatch.hpp"
#include "tests/vulkan/vk_test_util.hpp"

namespace {

using namespace tensor;
namespace d = tensor::dispatch;
using DT = d::DispatchTensor;
using vk_test::kCpu;
using vk_test::kVk;

using VulkanFused = vk_test::VulkanTest;

constexpr OpCode kFusedOps[] = {
    OpCode::relu, OpCode::leaky_relu, OpCode::gelu, OpCode::sigmoid, OpCode::hard_sigmoid, OpCode::log_sigmoid,
    OpCode::prelu, OpCode::relu_backward, OpCode::gelu_backward, OpCode::sigmoid_backward,
    OpCode::log_sigmoid_backward, OpCode::clamp, OpCode::clamp_min, OpCode::clamp_max, OpCode::sign, OpCode::neg,
    OpCode::hypot, OpCode::powf_scalar, OpCode::square, OpCode::powi, OpCode::powi_scalar, OpCode::powi_scalar_impl,
    OpCode::is_nan, OpCode::is_inf, OpCode::not_equal, OpCode::not_equal_elem, OpCode::bool_xor, OpCode::softmin};

TEST_F(VulkanFused, TheFusedOpsAreNativeNotTheDefaultComposition) {
  const d::Backend& b = d::Registry::instance().get(kVulkanDeviceType);
  for (OpCode op : kFusedOps) EXPECT_TRUE(b.is_native(op)) << d::op_name(op) << " runs as the default composition on vulkan";
}

DT upload(const TensorData& data, DeviceId dev) { return d::from_data(data, dev, d::kind_of_dtype(data.dtype())); }

// Zero-size tensors give zero-size results (no dispatch); bad input is refused with a
// typed error naming the op before any kernel runs.
TEST_F(VulkanFused, ZeroSizeTensorsAndBadInputs) {
  const DT e = upload(TensorData::from<float>({}, Shape{0, 3}), kVk);
  const DT ei = upload(TensorData::from<std::int32_t>({}, Shape{0, 3}), kVk);
  EXPECT_EQ(d::read(d::unary(OpCode::gelu, e)).shape(), (Shape{0, 3}));
  EXPECT_EQ(d::read(d::clamp(OpCode::clamp, ei, Scalar(1), Scalar(2))).shape(), (Shape{0, 3}));
  EXPECT_EQ(d::read(d::powi(ei, upload(TensorData::from<std::int32_t>({1, 2, 3}, Shape{1, 3}), kVk))).shape(), (Shape{0, 3}));
  EXPECT_EQ(d::read(d::compare(OpCode::not_equal, e, e)).shape(), (Shape{0, 3}));
  auto expect_error = [](const std::function<void()>& f, const std::string& prefix) {
    try {
      f();
      ADD_FAILURE() << prefix << ": no error";
    } catch (const Error& err) {
      EXPECT_EQ(std::string(err.what()).rfind(prefix, 0), 0u) << err.what();
    }
  };
  const DT x = upload(TensorData::from<float>({1, -2, 3, -4, 5, -6}, Shape{2, 3}), kVk);
  const DT xi = upload(TensorData::from<std::int32_t>({1, -2, 3, -4, 5, -6}, Shape{2, 3}), kVk);
  expect_error([&] { d::unary(OpCode::relu, xi); }, "[relu]");
  expect_error([&] { d::binary(OpCode::prelu, x, upload(TensorData::from<float>({1, 2}, Shape{1, 2}), kVk)); }, "[prelu]");
  expect_error([&] { d::powi(x, x); }, "[powi]");
  expect_error([&] { d::clamp(OpCode::clamp, x, Scalar(2), Scalar(1)); }, "[clamp]");
  expect_error([&] { d::binary(OpCode::hypot, xi, xi); }, "[hypot]");
}

// Exact: same bytes (so -0 vs +0 and NaN payload-free positions count); bools by
// truth value. Otherwise floats within `tol` relative (NaN matches NaN, inf must be equal).
::testing::AssertionResult agree(const TensorData& cpu, const TensorData& vk, bool exact) {
  if (!(cpu.shape() == vk.shape())) return ::testing::AssertionFailure() << "shape " << cpu.shape().to_string() << " vs " << vk.shape().to_string();
  if (is_bool(cpu.dtype()) && is_bool(vk.dtype())) {  // the devices' bool dtypes differ (bool / bool(u8))
    if (cpu.to_vec<bool>() == vk.to_vec<bool>()) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "cpu " << cpu.to_string() << "\nvk  " << vk.to_string();
  }
  if (cpu.dtype() != vk.dtype()) return ::testing::AssertionFailure() << "dtype " << dtype_name(cpu.dtype()) << " vs " << dtype_name(vk.dtype());
  const auto a = cpu.convert(DType::F64).to_vec<double>(), b = vk.convert(DType::F64).to_vec<double>();
  if (exact || !is_float(cpu.dtype())) {
    for (std::size_t i = 0; i < a.size(); ++i) {
      const bool same = (std::isnan(a[i]) && std::isnan(b[i])) || (a[i] == b[i] && std::signbit(a[i]) == std::signbit(b[i]));
      if (!same || (!is_float(cpu.dtype()) && cpu.bytes() != vk.bytes()))
        return ::testing::AssertionFailure() << "element " << i << ": cpu " << a[i] << " vk " << b[i] << "\ncpu " << cpu.to_string()
                                             << "\nvk  " << vk.to_string();
    }
    return ::testing::AssertionSuccess();
  }
  const DType t = cpu.dtype();
  const double tol = t == DType::F16 ? 2e-3 : t == DType::BF16 ? 1.6e-2 : t == DType::F32 ? 2e-5 : 1e-12;
  // Relative, plus the f32 / f64 smallest normal (a device may flush subnormal
  // results) or two f16 subnormal steps (halves compute in f32: nothing flushes).
  const double floor = t == DType::F16 ? 1.2e-7 : t == DType::F64 ? 2.2250738585072014e-308 : 1.1754943508222875e-38;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) && std::isnan(b[i])) continue;
    if (std::isinf(a[i]) || std::isinf(b[i]) ? a[i] == b[i] : std::fabs(a[i] - b[i]) <= tol * std::fabs(a[i]) + floor) continue;
    return ::testing::AssertionFailure() << "element " << i << ": cpu " << a[i] << " vk " << b[i] << "\ncpu " << cpu.to_string()
                                         << "\nvk  " << vk.to_string();
  }
  return ::testing::AssertionSuccess();
}

// op(device, dtype) on both devices. The fused kernels compute f16 / bf16 in f32 and
// round once, where the default compositions on the cpu round every intermediate:
// inexact ops on halves are compared with the cpu's f32 result rounded to the half.
void check_typed(const std::string& what, bool exact, DType dt, const std::function<DT(DeviceId, DType)>& op) {
  const bool via_f32 = !exact && (dt == DType::F16 || dt == DType::BF16);
  TensorData want = d::read(op(kCpu, via_f32 ? DType::F32 : dt));
  if (via_f32 && is_float(want.dtype())) want = want.convert(dt);
  if (const auto got = vk_test::read_on_vulkan(what, [&](DeviceId v) { return op(v, dt); })) {
    EXPECT_TRUE(agree(want, *got, exact)) << what;
  }
}
void check(const std::string& what, bool exact, const std::function<DT(DeviceId)>& op) {
  check_typed(what, exact, DType::Bool, [&](DeviceId v, DType) { return op(v); });
}

// Edge values (in a 4 x 6 tensor): NaN, +-inf, +-0, f16 subnormals (f32 ones are
// left out: devices may flush them, shaderDenormPreserveFloat32 is optional),
// values around the activations' and clamps' knees, and large magnitudes (inf in f16).
std::vector<double> float_edges() {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  return {nan, inf, -inf, 0.0, -0.0, 1e-30, -6e-6, 0.5, -0.5, 1, -1, 2.5, -3, 20, -20, 100, -100, 1e4, -1e4, 3e38, -3e38,
          0.125, -1.5, 7};
}
std::vector<double> float_others() {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  return {1, nan, 3, -0.0, 0.0, 1e-30, 2e-6, -0.25, 0.5, inf, -inf, 2, 4, -1e4, 20, 0.75, -2, 1e-3, 5, 3e38, nan, -1, 0.5, 9};
}
std::vector<DType> float_dtypes() {
  std::vector<DType> out;
  for (DType t : vk_test::common_dtypes(false))
    if (is_float(t)) out.push_back(t);
  return out;
}
std::vector<DType> int_dtypes() {
  std::vector<DType> out;
  for (DType t : vk_test::common_dtypes(false))
    if (is_int(t)) out.push_back(t);
  return out;
}

DT transposed(DT t) { return d::swap_dims(std::move(t), 0, 1); }

TEST_F(VulkanFused, FloatActivationsClampsAndPowersMatchTheCpuOnEdgeValues) {
  for (DType dt : float_dtypes()) {
    const std::string n(dtype_name(dt));
    // Values in dt (the f32 reference of a half op reads the half's values).
    auto in = [&](std::vector<double> v, const Shape& s, DeviceId dev, DType t) {
      return upload(TensorData::from(v, s).convert(dt).convert(t), dev);
    };
    auto X = [&](DeviceId v, DType t) { return in(float_edges(), Shape{4, 6}, v, t); };
    auto Y = [&](DeviceId v, DType t) { return in(float_others(), Shape{4, 6}, v, t); };
    auto run = [&](const std::string& what, bool exact, const std::function<DT(DeviceId, DType)>& op) {
      check_typed(what + " " + n, exact, dt, op);
    };
    for (OpCode op : {OpCode::relu, OpCode::sign, OpCode::neg})
      run(std::string(d::op_name(op)), true, [&](DeviceId v, DType t) { return d::unary(op, X(v, t)); });
    for (OpCode op : {OpCode::gelu, OpCode::sigmoid, OpCode::log_sigmoid})
      run(std::string(d::op_name(op)), false, [&](DeviceId v, DType t) { return d::unary(op, X(v, t)); });
    for (std::int64_t dim : {0, 1})  // rows with NaN, +-inf (a NaN makes its row NaN)
      run("softmin dim " + std::to_string(dim), false, [&](DeviceId v, DType t) { return d::reduce_dim(OpCode::softmin, X(v, t), dim); });
    run("leaky_relu", true, [&](DeviceId v, DType t) { return d::scalar(OpCode::leaky_relu, X(v, t), Scalar(0.1)); });
    run("hard_sigmoid", false, [&](DeviceId v, DType t) { return d::clamp(OpCode::hard_sigmoid, X(v, t), Scalar(0.2), Scalar(0.5)); });
    run("clamp", true, [&](DeviceId v, DType t) { return d::clamp(OpCode::clamp, X(v, t), Scalar(-1.3), Scalar(2.7)); });
    run("clamp_min", true, [&](DeviceId v, DType t) { return d::scalar(OpCode::clamp_min, X(v, t), Scalar(0.3)); });
    run("clamp_max", true, [&](DeviceId v, DType t) { return d::scalar(OpCode::clamp_max, X(v, t), Scalar(-0.0)); });
    for (OpCode op : {OpCode::is_nan, OpCode::is_inf})
      run(std::string(d::op_name(op)), true, [&](DeviceId v, DType t) { return d::predicate(op, X(v, t)); });
    run("not_equal", true, [&](DeviceId v, DType t) { return d::compare(OpCode::not_equal, X(v, t), Y(v, t)); });
    run("not_equal self", true, [&](DeviceId v, DType t) { DT x = X(v, t); return d::compare(OpCode::not_equal, x, x); });
    run("not_equal_elem", true, [&](DeviceId v, DType t) { return d::compare_scalar(OpCode::not_equal_elem, X(v, t), Scalar(-0.5)); });
    for (double e : {0.0, 1.0, 2.0, -1.0, -2.0, 3.0, -3.0, 2.5, -0.5, 1e10})
      run("powf_scalar " + std::to_string(e), false, [&](DeviceId v, DType t) { return d::scalar(OpCode::powf_scalar, X(v, t), Scalar(e)); });
    for (double e : {0.1, -2.5})  // the exponent in f32 for halves, as the cpu's calc_t
      run("powf_scalar_impl " + std::to_string(e), false,
          [&](DeviceId v, DType t) { return d::scalar(OpCode::powf_scalar_impl, X(v, t), Scalar(e)); });
    for (std::int64_t e : {0, 1, 2, -2, 5})
      run("powi_scalar " + std::to_string(e), false,
          [&](DeviceId v, DType t) { return d::scalar(OpCode::powi_scalar, X(v, t), Scalar(e)); });
    // Binary, the second operand transposed or broadcast.
    auto alpha = [&](DeviceId v, DType t) {
      return in({0.25, -2, 0, 1, 3, -0.5}, Shape{1, 6}, v, t);
    };
    run("prelu broadcast alpha", true, [&](DeviceId v, DType t) { return d::binary(OpCode::prelu, X(v, t), alpha(v, t)); });
    run("relu_backward", true, [&](DeviceId v, DType t) { return d::binary(OpCode::relu_backward, X(v, t), Y(v, t)); });
    for (OpCode op : {OpCode::gelu_backward, OpCode::sigmoid_backward, OpCode::log_sigmoid_backward, OpCode::hypot})
      run(std::string(d::op_name(op)), false, [&](DeviceId v, DType t) { return d::binary(op, X(v, t), Y(v, t)); });
    run("hypot transposed", false, [&](DeviceId v, DType t) {
      return d::binary(OpCode::hypot, transposed(in(float_edges(), Shape{6, 4}, v, t)), Y(v, t));
    });
    // Float base, int exponent tensor (converted to the base's dtype first).
    const TensorData ex = TensorData::from<std::int32_t>({0, 1, 2, 3, -1, -2, 5, 7, 0, 2, 3, -3, 1, 2, 4, -1, 2, 3, 2, 0, -2, 1, 2, 3},
                                                         Shape{4, 6});
    run("powi", false, [&](DeviceId v, DType t) { return d::powi(X(v, t), upload(ex, v)); });
  }
}

// Int values at the edges of every int dtype: min, max, 0, +-1, +-2, 3, -3 and a few more.
TensorData int_edges(DType dt) {
  std::vector<std::int64_t> v = {0, 1, -1, 2, -2, 3, -3, 5, -7, 11, 100, -100};
  TensorData small = TensorData::from(v, Shape{12}).convert(dt);  // wraps for unsigned (as the cpu's cast)
  std::vector<std::byte> bytes = small.bytes();
  TensorData lo = TensorData::from<double>({-1e30}, Shape{1}).convert(dt);  // saturating casts: min and max
  TensorData hi = TensorData::from<double>({1e30}, Shape{1}).convert(dt);
  for (int k = 0; k < 2; ++k) {
    bytes.insert(bytes.end(), lo.bytes().begin(), lo.bytes().end());
    bytes.insert(bytes.end(), hi.bytes().begin(), hi.bytes().end());
  }
  return TensorData(std::move(bytes), Shape{4, 4}, dt);
}

TEST_F(VulkanFused, IntNegSquareSignClampAndPowersWrapOrSaturateAsTheCpu) {
  for (DType dt : int_dtypes()) {
    const std::string n(dtype_name(dt));
    const TensorData x = int_edges(dt);
    auto X = [&](DeviceId v) { return upload(x, v); };
    for (OpCode op : {OpCode::neg, OpCode::square, OpCode::sign})
      check(std::string(d::op_name(op)) + " " + n, true, [&](DeviceId v) { return d::unary(op, X(v)); });
    check("clamp " + n, true, [&](DeviceId v) { return d::clamp(OpCode::clamp, X(v), Scalar(-3), Scalar(7)); });
    check("clamp wide bounds " + n, true,
          [&](DeviceId v) { return d::clamp(OpCode::clamp, X(v), Scalar(std::int64_t{-1} << 40), Scalar(std::int64_t{1} << 40)); });
    check("clamp_min " + n, true, [&](DeviceId v) { return d::scalar(OpCode::clamp_min, X(v), Scalar(2)); });
    check("clamp_max " + n, true, [&](DeviceId v) { return d::scalar(OpCode::clamp_max, X(v), Scalar(-2)); });
    check("not_equal_elem " + n, true, [&](DeviceId v) { return d::compare_scalar(OpCode::not_equal_elem, X(v), Scalar(3)); });
    check("not_equal transposed " + n, true, [&](DeviceId v) { return d::compare(OpCode::not_equal, X(v), transposed(X(v))); });
    for (std::int64_t e : {std::int64_t{0}, std::int64_t{1}, std::int64_t{2}, std::int64_t{3}, std::int64_t{-1},
                           std::int64_t{-2}, std::int64_t{-3}, std::int64_t{7}, std::int64_t{39}, std::int64_t{63},
                           std::int64_t{64}, std::int64_t{1} << 40, (std::int64_t{1} << 40) + 1}) {
      check("powi_scalar " + std::to_string(e) + " " + n, true, [&](DeviceId v) { return d::scalar(OpCode::powi_scalar, X(v), Scalar(e)); });
      check("powi_scalar_impl " + std::to_string(e) + " " + n, true,
            [&](DeviceId v) { return d::scalar(OpCode::powi_scalar_impl, X(v), Scalar(e)); });
    }
    // Exponent tensors of another int dtype, broadcast along rows.
    const auto ints = int_dtypes();
    auto have = [&](DType t) { return std::find(ints.begin(), ints.end(), t) != ints.end(); };
    const DType narrow_e = have(DType::I8) ? DType::I8 : dt;
    const TensorData ex = TensorData::from<std::int64_t>({0, 3, -1, 39}, Shape{1, 4}).convert(narrow_e);
    check("powi " + n, true, [&](DeviceId v) { return d::powi(X(v), upload(ex, v)); });
    if (have(DType::I64))
      check("powi i64 exponent " + n, true,
            [&](DeviceId v) { return d::powi(X(v), upload(TensorData::from<std::int64_t>({2, 62, -2, 5}, Shape{1, 4}), v)); });
  }
}

TEST_F(VulkanFused, BoolXorAndNotEqualOnBoolTensors) {
  for (DType dt : vk_test::common_dtypes(true)) {
    if (!is_bool(dt)) continue;
    const TensorData a = TensorData::from<bool>({true, false, true, false, true, true}, Shape{2, 3}).convert(dt);
    const TensorData b = TensorData::from<bool>({true, true, false, false, false, true}, Shape{2, 3}).convert(dt);
    const std::string n(dtype_name(dt));
    check("bool_xor " + n, true, [&](DeviceId v) { return d::binary(OpCode::bool_xor, upload(a, v), upload(b, v)); });
    check("not_equal " + n, true, [&](DeviceId v) { return d::compare(OpCode::not_equal, upload(a, v), upload(b, v)); });
  }
}

}  // namespace
