// Vulkan-specific checks against the CPU backend: casts, masks and slice_assign x every
// dtype the device reports x layouts (contiguous, transposed, step-sliced, flipped,
// broadcast, zero-size), matmul, fills, sorts of lines beyond shared memory,
// whole-tensor reductions split across workgroups for every dtype, direct checks,
// memory accounting, staging and the dtype mask. The elementwise, comparison,
// reduction, scan, softmax, sort/top-k, indexing, cat and cross ops are covered on
// Vulkan by the device-generic suites (tests/ops/, tests/edge_cases_test.cpp:
// meson tests ops_vulkan, edge_cases_vulkan). The validation layer is on
// (TENSOR_VK_VALIDATION=1) and any message fails the test.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <tensor/tensor.hpp>

#include "backends/vulkan/vk_backend.hpp"
#include "backends/vulkan/runtime/context.hpp"
#include "dispatch/dispatch.hpp"
#include "lib/core/element.hpp"
#include "tests/vulkan/vk_test_util.hpp"

namespace {

using namespace tensor;
namespace d = tensor::dispatch;
using DT = d::DispatchTensor;
using Kind = d::Kind;

using vk_test::have_vulkan;
using vk_test::kCpu;
using vk_test::kVk;
using vk_test::VulkanTest;

std::vector<DType> device_dtypes() { return vk_test::common_dtypes(true); }

// Small exact-ish values: k/4 for floats (zeros included), small ints.
TensorData make_data(DType dt, const Shape& s, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<double> v(s.num_elements());
  for (double& x : v) {
    if (is_float(dt)) x = static_cast<double>(static_cast<int>(rng() % 25) - 12) / 4.0;
    else if (is_bool(dt)) x = static_cast<double>(rng() % 2);
    else if (is_unsigned_int(dt)) x = static_cast<double>(rng() % 13);
    else x = static_cast<double>(static_cast<int>(rng() % 13) - 6);
  }
  return TensorData::from(v, s).convert(dt);
}

struct LayoutCase {
  const char* name;
  Shape base;
  std::function<DT(DT)> view;
};
std::vector<LayoutCase> layouts() {
  return {
      {"contiguous", Shape{3, 5}, [](DT t) { return t; }},
      {"transposed", Shape{5, 3}, [](DT t) { return d::swap_dims(std::move(t), 0, 1); }},
      {"sliced", Shape{6, 11},
       [](DT t) {
         const Slice s[2] = {Slice::range(0, 6, 2), Slice::range(1, 11, 2)};
         return d::slice(std::move(t), s);
       }},
      {"flipped", Shape{3, 5},
       [](DT t) {
         const std::int64_t ax[2] = {0, 1};
         return d::axes(OpCode::flip, std::move(t), ax);
       }},
      {"broadcast", Shape{1, 5},
       [](DT t) {
         const std::int64_t to[2] = {3, 5};
         return d::reshape(OpCode::expand, std::move(t), to);
       }},
      {"zero_size", Shape{0, 5}, [](DT t) { return t; }},
  };
}

// Compares two reads: exact for ints and bools (bools by truth value), tolerant for floats.
::testing::AssertionResult same(const TensorData& cpu, const TensorData& vk) {
  if (!(cpu.shape() == vk.shape())) return ::testing::AssertionFailure() << "shape " << cpu.shape().to_string() << " vs " << vk.shape().to_string();
  if (is_bool(cpu.dtype()) && is_bool(vk.dtype())) {
    if (cpu.to_vec<bool>() != vk.to_vec<bool>()) return ::testing::AssertionFailure() << "bool values differ: cpu " << cpu.to_string() << " vk " << vk.to_string();
    return ::testing::AssertionSuccess();
  }
  if (cpu.dtype() != vk.dtype()) return ::testing::AssertionFailure() << "dtype " << dtype_name(cpu.dtype()) << " vs " << dtype_name(vk.dtype());
  if (!is_float(cpu.dtype())) {
    if (cpu.bytes() != vk.bytes()) return ::testing::AssertionFailure() << "cpu " << cpu.to_string() << "\nvk  " << vk.to_string();
    return ::testing::AssertionSuccess();
  }
  const auto a = cpu.convert(DType::F64).to_vec<double>(), b = vk.convert(DType::F64).to_vec<double>();
  // Halves are computed in f32 on both sides and rounded once; a last-bit difference
  // of the f32 math can still flip the rounding, so allow one half ulp step.
  const double tol = cpu.dtype() == DType::F16 ? 1e-3 : cpu.dtype() == DType::BF16 ? 8e-3 : 2e-5;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) && std::isnan(b[i])) continue;
    if (std::isinf(a[i]) || std::isinf(b[i])) {
      if (a[i] == b[i]) continue;
    } else if (std::fabs(a[i] - b[i]) <= tol + tol * std::fabs(a[i])) {
      continue;
    }
    return ::testing::AssertionFailure() << "element " << i << ": cpu " << a[i] << " vk " << b[i] << "\ncpu " << cpu.to_string()
                                         << "\nvk  " << vk.to_string();
  }
  return ::testing::AssertionSuccess();
}

// Runs `op` on both devices; failures and NotImplemented on the CPU skip the case.
void check_op(const std::string& what, const std::function<DT(DeviceId)>& op) {
  TensorData want;
  try {
    want = d::read(op(kCpu));
  } catch (const std::exception&) {
    return;  // the CPU backend lacks this op (or rejects the case): nothing to compare
  }
  if (const auto got = vk_test::read_on_vulkan(what, op)) {
    EXPECT_TRUE(same(want, *got)) << what;
  }
}

Kind kind_of(DType t) { return d::kind_of_dtype(t); }
bool kind_ok(OpCode op, DType t) {
  const std::uint8_t bit = is_float(t) ? d::kKindF : is_int(t) ? d::kKindI : d::kKindB;
  return (d::op_info(op).kinds & bit) != 0;
}
bool native(OpCode op) { return d::Registry::instance().get(kVulkanDeviceType).is_native(op); }

DT upload(const TensorData& data, DeviceId dev) { return d::from_data(data, dev, kind_of(data.dtype())); }

using VulkanOps = VulkanTest;
using VulkanDirect = VulkanTest;
using VulkanMemory = VulkanTest;
using VulkanMask = VulkanTest;

TEST_F(VulkanOps, CastsMasksAndSliceAssignMatchCpuInEveryLayout) {
  int cases = 0;
  for (DType dt : device_dtypes()) {
    for (const LayoutCase& lc : layouts()) {
      const TensorData da = make_data(dt, lc.base, 1);
      const Shape vshape = d::read(lc.view(upload(da, kCpu))).shape();
      const TensorData db = make_data(dt, vshape, 2);
      const Scalar sc = is_float(dt) ? Scalar(1.5) : Scalar(2);
      auto A = [&](DeviceId dev) { return lc.view(upload(da, dev)); };
      auto B = [&](DeviceId dev) { return upload(db, dev); };
      for (std::size_t i = 0; i < d::kOps.size(); ++i) {
        const OpCode op = static_cast<OpCode>(i);
        if (!kind_ok(op, dt) || !native(op) || d::op_family(op) != d::Family::Cast) continue;
        const std::string what = std::string(d::op_name(op)) + " " + std::string(dtype_name(dt)) + " " + lc.name;
        for (DType to : device_dtypes()) {
          if (to == dt) continue;
          check_op(what + " -> " + std::string(dtype_name(to)), [&](DeviceId v) { return d::cast(op, A(v), to); });
        }
        ++cases;
      }
      // Masks and slice_assign (layout ops, any dtype).
      const TensorData dm = make_data(DType::Bool, vshape, 3);
      check_op(std::string("mask_fill ") + std::string(dtype_name(dt)) + " " + lc.name,
               [&](DeviceId v) { return d::mask_fill(A(v), upload(dm, v), sc); });
      check_op(std::string("mask_where ") + std::string(dtype_name(dt)) + " " + lc.name,
               [&](DeviceId v) { return d::mask_where(A(v), upload(dm, v), B(v)); });
      check_op(std::string("contiguous read ") + lc.name, [&](DeviceId v) { return A(v); });
      if (vshape.num_elements() > 0) {
        const TensorData dv = make_data(dt, Shape{2, 2}, 4);
        const Slice s[2] = {Slice::range(0, 3, 2), Slice::range(1, 5, 3)};
        check_op(std::string("slice_assign ") + std::string(dtype_name(dt)) + " " + lc.name,
                 [&](DeviceId v) { return d::slice_assign(A(v), s, upload(dv, v)); });
      }
    }
  }
  EXPECT_GT(cases, 50);
}

TEST_F(VulkanOps, MatmulMatchesCpuForStridedAndBatchedOperands) {
  for (DType dt : device_dtypes()) {
    if (is_bool(dt)) continue;
    const TensorData a = make_data(dt, Shape{2, 1, 19, 21}, 5);
    const TensorData b = make_data(dt, Shape{1, 3, 21, 17}, 6);
    const TensorData bt = make_data(dt, Shape{1, 3, 17, 21}, 7);
    check_op("matmul batched " + std::string(dtype_name(dt)),
             [&](DeviceId v) { return d::matmul(upload(a, v), upload(b, v)); });
    check_op("matmul transposed rhs " + std::string(dtype_name(dt)),
             [&](DeviceId v) { return d::matmul(upload(a, v), d::swap_dims(upload(bt, v), 2, 3)); });
    const TensorData e = make_data(dt, Shape{1, 1, 0, 21}, 8);
    check_op("matmul empty " + std::string(dtype_name(dt)), [&](DeviceId v) { return d::matmul(upload(e, v), upload(b, v)); });
    const TensorData k0a = make_data(dt, Shape{1, 1, 4, 0}, 8), k0b = make_data(dt, Shape{1, 1, 0, 3}, 8);
    check_op("matmul k=0 " + std::string(dtype_name(dt)), [&](DeviceId v) { return d::matmul(upload(k0a, v), upload(k0b, v)); });
  }
}

TEST_F(VulkanDirect, ArgmaxTakesLowestIndexOnTiesAndNaNWins) {
  const float nan = std::nanf("");
  auto t = upload(TensorData::from<float>({1, 3, 3, 2, nan, 5, nan, 0}, Shape{2, 4}), kVk);
  EXPECT_EQ(d::read(d::dim_index(OpCode::argmax, t, 1)).convert(DType::I64).to_vec<std::int64_t>(), (std::vector<std::int64_t>{1, 0}));
  EXPECT_EQ(d::read(d::dim_index(OpCode::argmin, t, 1)).convert(DType::I64).to_vec<std::int64_t>(), (std::vector<std::int64_t>{0, 0}));
  auto big = upload(TensorData::from<std::int32_t>(std::vector<std::int32_t>(1000, 7), Shape{1000}), kVk);
  EXPECT_EQ(d::read(d::dim_index(OpCode::argmax, big, 0)).convert(DType::I64).to_vec<std::int64_t>(), (std::vector<std::int64_t>{0}));
}

TEST_F(VulkanDirect, ScansRunAlongTheDimAndPropagateNaN) {
  const float nan = std::nanf("");
  auto t = upload(TensorData::from<float>({1, 2, 3, 4, nan, 1}, Shape{2, 3}), kVk);
  auto v = [](DT x) { return d::read(std::move(x)).to_vec<float>(); };
  const auto cs = v(d::reduce_dim(OpCode::cumsum, t, 1));
  EXPECT_EQ(cs[2], 6.0f);
  EXPECT_TRUE(std::isnan(cs[4]) && std::isnan(cs[5]));
  const auto cm = v(d::reduce_dim(OpCode::cummax, t, 1));
  EXPECT_EQ((std::vector<float>{cm[0], cm[1], cm[2], cm[3]}), (std::vector<float>{1, 2, 3, 4}));
  EXPECT_TRUE(std::isnan(cm[4]) && std::isnan(cm[5]));
  const auto cp = v(d::reduce_dim(OpCode::cumprod, t, 0));
  EXPECT_EQ(cp[0], 1.0f);
  EXPECT_EQ(cp[3], 4.0f);
  EXPECT_EQ(cp[2], 3.0f);
  EXPECT_EQ(cp[5], 3.0f);
  auto i = upload(TensorData::from<std::int8_t>({100, 100, -3, 5}, Shape{4}), kVk);
  EXPECT_EQ(d::read(d::reduce_dim(OpCode::cumsum, i, 0)).to_vec<std::int8_t>(), (std::vector<std::int8_t>{100, -56, -59, -54}));
  EXPECT_EQ(d::read(d::reduce_dim(OpCode::cummin, i, 0)).to_vec<std::int8_t>(), (std::vector<std::int8_t>{100, 100, -3, -3}));
}

TEST_F(VulkanDirect, MeanOfAnEmptyFloatAxisIsNaNAndIntMeanUsesTheExactSum) {
  auto e = upload(TensorData::from<float>({}, Shape{2, 0}), kVk);
  const auto m = d::read(d::reduce_dim(OpCode::mean_dim, e, 1)).to_vec<float>();
  ASSERT_EQ(m.size(), 2u);
  EXPECT_TRUE(std::isnan(m[0]) && std::isnan(m[1]));
  auto big = upload(TensorData::from<std::int32_t>({2000000000, 2000000000, -7}, Shape{3}), kVk);
  EXPECT_EQ(d::read(d::reduce_dim(OpCode::mean_dim, big, 0)).to_vec<std::int32_t>(), (std::vector<std::int32_t>{1333333331}));
  auto i8 = upload(TensorData::from<std::int8_t>({100, 100, 100}, Shape{3}), kVk);
  EXPECT_EQ(d::read(d::reduce(OpCode::mean, i8)).to_vec<std::int8_t>(), (std::vector<std::int8_t>{100}));
  auto neg = upload(TensorData::from<std::int32_t>({-2000000000, -2000000000, -7}, Shape{3}), kVk);
  EXPECT_EQ(d::read(d::reduce_dim(OpCode::mean_dim, neg, 0)).to_vec<std::int32_t>(), (std::vector<std::int32_t>{-1333333335}));
}

TEST_F(VulkanDirect, GatherSelectAndTheirAccumulatingForms) {
  auto a = upload(TensorData::from<float>({0, 1, 2, 3, 4, 5}, Shape{2, 3}), kVk);
  auto idx = upload(TensorData::from<std::int32_t>({2, 0, 1, 1}, Shape{2, 2}), kVk);
  EXPECT_EQ(d::read(d::gather(a, 1, idx)).to_vec<float>(), (std::vector<float>{2, 0, 4, 4}));
  auto sel = upload(TensorData::from<std::int32_t>({2, 2, 0}, Shape{3}), kVk);
  EXPECT_EQ(d::read(d::select(d::unary(OpCode::transpose, a), 0, sel)).to_vec<float>(), (std::vector<float>{2, 5, 2, 5, 0, 3}));
  auto vals = upload(TensorData::from<float>({10, 20, 30, 40}, Shape{2, 2}), kVk);
  EXPECT_EQ(d::read(d::scatter(OpCode::scatter, a, 1, idx, vals, IndexingUpdateOp::Add)).to_vec<float>(),
            (std::vector<float>{20, 1, 12, 3, 74, 5}));
  auto sv = upload(TensorData::from<float>({1, 1, 1, 2, 2, 2, 3, 3, 3}, Shape{3, 3}), kVk);
  auto rows = upload(TensorData::from<std::int32_t>({1, 1, 0}, Shape{3}), kVk);
  EXPECT_EQ(d::read(d::select_assign(OpCode::select_assign, a, 0, rows, sv, IndexingUpdateOp::Add)).to_vec<float>(),
            (std::vector<float>{3, 4, 5, 6, 7, 8}));
  // The source is unchanged (it was not uniquely owned).
  EXPECT_EQ(d::read(a).to_vec<float>(), (std::vector<float>{0, 1, 2, 3, 4, 5}));
}

TEST_F(VulkanDirect, PublicApiRoundTripAndDeviceName) {
  Device dev = Device::parse("vulkan");
  EXPECT_EQ(dev.backend_name().rfind("dispatch<vulkan<", 0), 0u) << dev.backend_name();
  auto a = Tensor<2>::from_data(TensorData::from<float>({1, 2, 3, 4, 5, 6}, {2, 3}), dev);
  auto b = Tensor<2>::ones({3, 2}, dev);
  auto c = (a.matmul(b) + 1.0f).exp();
  auto s = c.sum_dim(1).into_data().to_vec<float>();
  ASSERT_EQ(s.size(), 2u);
  EXPECT_NEAR(s[0], 2 * std::exp(7.0f), 1e-2);
  EXPECT_EQ(a.transpose().slice({Slice::range(0, 3, 2)}).into_data().to_vec<float>(), (std::vector<float>{1, 4, 3, 6}));
  EXPECT_EQ(dev.settings().bool_dtype, BoolDType::U8);
}


// Values with ties and (for floats) NaN and +-inf, for the sort family.
TensorData sort_data(DType dt, const Shape& s, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<double> v(s.num_elements());
  for (std::size_t i = 0; i < v.size(); ++i) {
    v[i] = static_cast<double>(static_cast<int>(rng() % 9) - (is_unsigned_int(dt) ? 0 : 4));
    if (is_float(dt) && rng() % 11 == 0) v[i] = std::nan("");
    if (is_float(dt) && rng() % 23 == 0) v[i] = (rng() % 2 ? 1.0 : -1.0) * HUGE_VAL;
  }
  return TensorData::from(v, s).convert(dt);
}

TEST_F(VulkanOps, SortOfLinesLongerThanTheSharedMemoryLimitUsesTheGlobalNetwork) {
  for (DType dt : {DType::F32, DType::I16, DType::F64, DType::U8}) {
    if (!d::supports_dtype(kVk, dt)) continue;
    for (const Shape& shape : {Shape{1025}, Shape{3, 5000}}) {
      const TensorData data = sort_data(dt, shape, 5);
      const std::int64_t dim = static_cast<std::int64_t>(shape.rank()) - 1;
      for (bool desc : {false, true}) {
        const std::string what = std::string(dtype_name(dt)) + " " + shape.to_string() + (desc ? " desc" : " asc");
        check_op("sort " + what, [&](DeviceId v) { return d::sort(upload(data, v), dim, desc); });
        check_op("argsort " + what, [&](DeviceId v) { return d::argsort(upload(data, v), dim, desc); });
      }
      if (shape.rank() == 2)
        check_op("sort dim 0 of transposed " + std::string(dtype_name(dt)),
                 [&](DeviceId v) { return d::sort(d::swap_dims(upload(data, v), 0, 1), 0, false); });
    }
  }
}

TEST_F(VulkanOps, FillMatchesTheCpu) {
  for (DType dt : device_dtypes()) {
    for (double v : {0.0, 1.0, -3.5, 7.0}) {
      if (!is_float(dt) && v != std::trunc(v)) continue;
      const Scalar sc = is_float(dt) ? Scalar(v) : is_bool(dt) ? Scalar(v != 0.0) : Scalar(static_cast<std::int64_t>(v));
      check_op("full " + std::string(dtype_name(dt)) + " " + std::to_string(v), [&](DeviceId dev) {
        return d::full(Shape{3, 5}, sc, dev, kind_of(dt), dt);
      });
    }
    check_op("zeros " + std::string(dtype_name(dt)), [&](DeviceId dev) { return d::create(OpCode::zeros, Shape{7}, dev, kind_of(dt), dt); });
    check_op("ones " + std::string(dtype_name(dt)), [&](DeviceId dev) { return d::create(OpCode::ones, Shape{7}, dev, kind_of(dt), dt); });
  }
  EXPECT_TRUE(native(OpCode::full) && native(OpCode::softmax) && native(OpCode::log_softmax) && native(OpCode::cross));
}

TEST_F(VulkanOps, WholeTensorReductionsOfLongLinesUseManyWorkgroupsAndMatchTheCpu) {
  for (DType dt : device_dtypes()) {
    if (is_bool(dt)) continue;
    for (std::size_t n : {std::size_t{16384}, std::size_t{100003}}) {
      const TensorData data = make_data(dt, Shape{n}, 41);
      const std::string what = std::string(dtype_name(dt)) + " n=" + std::to_string(n);
      for (OpCode op : {OpCode::sum, OpCode::mean, OpCode::max, OpCode::min, OpCode::max_abs})
        check_op(std::string(d::op_name(op)) + " " + what, [&](DeviceId v) { return d::reduce(op, upload(data, v)); });
      for (OpCode op : {OpCode::argmax, OpCode::argmin})
        check_op(std::string(d::op_name(op)) + " " + what, [&](DeviceId v) { return d::dim_index(op, upload(data, v), 0); });
      check_op("sum_dim " + what, [&](DeviceId v) { return d::reduce_dim(OpCode::sum_dim, upload(data, v), 0); });
      // prod of mostly ones (stays finite and exact).
      std::vector<double> ones(n, 1.0);
      ones[7] = 2.0;
      ones[n - 1] = is_unsigned_int(dt) ? 3.0 : -3.0;
      const TensorData pd = TensorData::from(ones, Shape{n}).convert(dt);
      check_op("prod " + what, [&](DeviceId v) { return d::reduce(OpCode::prod, upload(pd, v)); });
    }
  }
  // A NaN late in a long line wins argmax, and the lowest index wins ties.
  std::vector<float> v(50000, 1.0f);
  v[30000] = 5.0f;
  v[40000] = 5.0f;
  EXPECT_EQ(d::read(d::dim_index(OpCode::argmax, upload(TensorData::from(v, Shape{v.size()}), kVk), 0))
                .convert(DType::I64).to_vec<std::int64_t>()[0], 30000);
  v[45000] = std::nanf("");
  EXPECT_EQ(d::read(d::dim_index(OpCode::argmax, upload(TensorData::from(v, Shape{v.size()}), kVk), 0))
                .convert(DType::I64).to_vec<std::int64_t>()[0], 45000);
}

TEST_F(VulkanDirect, SixtyFourBitDTypesAreReportedWhereTheDeviceHasThemAndAreExact) {
  // lavapipe has shaderInt64 and shaderFloat64: the 64-bit dtypes must be there.
  if (d::backend_name(kVk).find("llvmpipe") != std::string::npos) {
    for (DType t : {DType::F64, DType::I64, DType::U64, DType::F16, DType::BF16}) EXPECT_TRUE(d::supports_dtype(kVk, t)) << dtype_name(t);
  }
  if (!d::supports_dtype(kVk, DType::F64)) GTEST_SKIP() << "no f64 on this device";
  // f64 math is double precision, not f32 in disguise.
  const std::vector<double> x = {0.1, 1.0 / 3.0, 2.5, -7.25, 1e-8, 30.0, 700.0};
  auto t = upload(TensorData::from(x, Shape{x.size()}), kVk);
  auto c = upload(TensorData::from(x, Shape{x.size()}), kCpu);
  for (OpCode op : {OpCode::exp, OpCode::sin, OpCode::cos, OpCode::tanh, OpCode::atan, OpCode::erf, OpCode::sqrt}) {
    const auto got = d::read(d::unary(op, t)).to_vec<double>();
    const auto want = d::read(d::unary(op, c)).to_vec<double>();
    for (std::size_t i = 0; i < x.size(); ++i) {
      if (std::isnan(got[i]) && std::isnan(want[i])) continue;
      EXPECT_NEAR(got[i], want[i], 1e-13 * std::max(1.0, std::fabs(want[i]))) << d::op_name(op) << "(" << x[i] << ")";
    }
  }
  const std::vector<double> pos = {0.1, 1.0 / 3.0, 2.5, 7.25, 1e-8, 30.0, 1e300};
  const auto lg = d::read(d::unary(OpCode::log, upload(TensorData::from(pos, Shape{pos.size()}), kVk))).to_vec<double>();
  for (std::size_t i = 0; i < pos.size(); ++i) EXPECT_NEAR(lg[i], std::log(pos[i]), 1e-14 * std::max(1.0, std::fabs(std::log(pos[i]))));
  // i64 arithmetic wraps at 64 bits; u64 keeps values above 2^63.
  auto big = upload(TensorData::from<std::int64_t>({INT64_MAX, 5000000000LL}, Shape{2}), kVk);
  EXPECT_EQ(d::read(d::scalar(OpCode::add_scalar, big, Scalar(std::int64_t{1}))).to_vec<std::int64_t>(),
            (std::vector<std::int64_t>{INT64_MIN, 5000000001LL}));
  auto u = upload(TensorData::from<std::uint64_t>({18000000000000000000ull, 3}, Shape{2}), kVk);
  EXPECT_EQ(d::read(d::scalar(OpCode::div_scalar, u, Scalar(std::uint64_t{3}))).to_vec<std::uint64_t>(),
            (std::vector<std::uint64_t>{6000000000000000000ull, 1}));
  EXPECT_EQ(d::read(d::reduce(OpCode::sum, u)).to_vec<std::uint64_t>(), (std::vector<std::uint64_t>{18000000000000000003ull}));
}

TEST_F(VulkanDirect, OutOfRangeIndicesRaiseIndexErrorNamingTheOp) {
  auto a = upload(TensorData::from<float>({0, 1, 2, 3, 4, 5}, Shape{2, 3}), kVk);
  auto expect_index_error = [&](const char* op, const std::function<DT()>& f) {
    try {
      d::read(f());
      ADD_FAILURE() << op << ": no error";
    } catch (const IndexError& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find(std::string("[") + op + "]"), std::string::npos) << m;
      EXPECT_NE(m.find("out of range"), std::string::npos) << m;
    }
    // The device keeps working, and the error is reported once.
    EXPECT_EQ(d::read(d::scalar(OpCode::add_scalar, a, Scalar(1.0))).to_vec<float>(), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  };
  auto bad2 = upload(TensorData::from<std::int32_t>({2, 3, 1, 0}, Shape{2, 2}), kVk);
  auto neg = upload(TensorData::from<std::int64_t>({0, -1}, Shape{2}), kVk);
  auto big = upload(TensorData::from<std::int32_t>({1, 2}, Shape{2}), kVk);
  auto vals = upload(TensorData::from<float>({1, 1, 1, 1}, Shape{2, 2}), kVk);
  auto rows = upload(TensorData::from<float>({1, 1, 1, 1, 1, 1}, Shape{2, 3}), kVk);
  expect_index_error("gather", [&] { return d::gather(a, 1, bad2); });
  if (d::supports_dtype(kVk, DType::I64)) expect_index_error("select", [&] { return d::select(a, 1, neg); });
  expect_index_error("select", [&] { return d::select(a, 0, big); });
  expect_index_error("scatter_add", [&] { return d::scatter(OpCode::scatter_add, a, 1, bad2, vals, IndexingUpdateOp::Add); });
  expect_index_error("select_add",
                     [&] { return d::select_assign(OpCode::select_add, a, 0, big, rows, IndexingUpdateOp::Add); });
}

TEST_F(VulkanMemory, StatsReturnToBaselineAfterManyTensors) {
  d::sync(kVk);
  const MemoryStats base = d::memory_stats(kVk);
  {
    std::vector<DT> keep;
    for (int i = 0; i < 300; ++i) {
      DT t = upload(make_data(DType::F32, Shape{static_cast<std::size_t>(17 + i), 33}, i), kVk);
      keep.push_back(d::scalar(OpCode::add_scalar, t, Scalar(1.0)));
      if (i % 3 == 0) keep.pop_back();
    }
    d::sync(kVk);
    EXPECT_GT(d::memory_stats(kVk).bytes_in_use, base.bytes_in_use);
  }
  d::sync(kVk);
  const MemoryStats after = d::memory_stats(kVk);
  EXPECT_EQ(after.bytes_in_use, base.bytes_in_use);
  EXPECT_GE(after.peak_bytes_in_use, after.bytes_in_use);
  d::memory_cleanup(kVk);
  EXPECT_LE(d::memory_stats(kVk).bytes_reserved, after.bytes_reserved);
}

TEST_F(VulkanMemory, ATensorBeyondTheAllocationLimitIsAnExecutionError) {
  // 2^31 f32 elements: beyond the 2^31 - 1 element limit of the kernels; 3 GiB: beyond
  // maxMemoryAllocationSize on lavapipe (2 GiB). Neither is allocated.
  EXPECT_THROW(d::create(OpCode::empty, Shape{std::size_t{1} << 31}, kVk, Kind::Float, DType::F32), ExecutionError);
  if (d::backend_name(kVk).find("llvmpipe") != std::string::npos) {
    EXPECT_THROW(d::create(OpCode::empty, Shape{std::size_t{1} << 28, 3}, kVk, Kind::Float, DType::F32), ExecutionError);
  }
  // The device still works afterwards.
  EXPECT_EQ(d::read(upload(TensorData::from<float>({1, 2}), kVk)).to_vec<float>(), (std::vector<float>{1, 2}));
}

TEST_F(VulkanMemory, TensorsBeyondTheStorageBufferRangeWorkInContiguousElementwiseOps) {
  vulkan::Context& ctx = *vulkan::context(0);
  ctx.ensure_init();
  const std::size_t limit = ctx.max_binding();
  if (limit > (std::size_t{512} << 20)) GTEST_SKIP() << "maxStorageBufferRange is " << limit << " bytes: too big to exceed here";
  const std::size_t n = limit / 4 + 3 * (std::size_t{1} << 20) + 5;  // f32 elements: beyond one binding
  DT x = d::full(Shape{n}, Scalar(1.5), kVk, Kind::Float, DType::F32);
  DT y = d::scalar(OpCode::mul_scalar, d::scalar(OpCode::add_scalar, x, Scalar(2.0)), Scalar(2.0));  // 7
  DT z = d::binary(OpCode::sub, y, x);                                                                  // 5.5
  DT h = d::cast(OpCode::cast, z, DType::F16);  // mixed element sizes in one piece
  const auto v = d::read(z).to_vec<float>();
  ASSERT_EQ(v.size(), n);
  std::size_t bad = 0;
  for (float f : v) bad += f != 5.5f;
  EXPECT_EQ(bad, 0u);
  const auto hv = d::read(d::slice(h, std::vector<Slice>{Slice::range(static_cast<std::int64_t>(n) - 3, static_cast<std::int64_t>(n))}))
                      .convert(DType::F32).to_vec<float>();
  EXPECT_EQ(hv, (std::vector<float>{5.5f, 5.5f, 5.5f}));
  // Whole-tensor reductions split too (chunked passes bind their part of the input).
  const double total = 5.5 * static_cast<double>(n);
  EXPECT_NEAR(d::read(d::reduce(OpCode::sum, z)).to_vec<float>()[0], total, total * 1e-6);
  const std::vector<Slice> last{Slice::range(static_cast<std::int64_t>(n) - 2, static_cast<std::int64_t>(n) - 1)};
  DT peak = d::slice_assign(z, last, d::full(Shape{1}, Scalar(9.0), kVk, Kind::Float, DType::F32));
  EXPECT_EQ(d::read(d::dim_index(OpCode::argmax, peak, 0)).convert(DType::I64).to_vec<std::int64_t>()[0],
            static_cast<std::int64_t>(n) - 2);
  // Kernels that do not split say so clearly.
  try {
    d::read(d::reduce_dim(OpCode::cumsum, x, 0));
    ADD_FAILURE() << "cumsum of a tensor beyond maxStorageBufferRange did not throw";
  } catch (const ExecutionError& e) {
    // A software device refuses the line's length first (vulkan_long_lines_test).
    EXPECT_NE(std::string(e.what()).find(ctx.software() ? "software Vulkan device" : "maxStorageBufferRange"),
              std::string::npos)
        << e.what();
  }
}

TEST_F(VulkanMask, MaskedDTypesRaiseDTypeErrorNamingOpDtypeAndDevice) {
  if (!std::getenv("TENSOR_VK_DTYPE_MASK")) GTEST_SKIP() << "run with TENSOR_VK_DTYPE_MASK (meson test vulkan_dtype_mask)";
  EXPECT_FALSE(d::dtype_usage(kVk, DType::F32).contains(DTypeUsage::Storage));
  try {
    upload(TensorData::from<float>({1, 2}), kVk);
    ADD_FAILURE() << "no error";
  } catch (const DTypeError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("from_data"), std::string::npos) << m;
    EXPECT_NE(m.find("f32"), std::string::npos) << m;
    EXPECT_NE(m.find("vulkan:0"), std::string::npos) << m;
  }
  DT u = upload(TensorData::from<std::uint32_t>({1, 2}), kVk);
  try {
    d::cast(OpCode::into_float, u, DType::F32);
    ADD_FAILURE() << "no error";
  } catch (const DTypeError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("into_float"), std::string::npos) << m;
    EXPECT_NE(m.find("f32"), std::string::npos) << m;
  }
  EXPECT_THROW(d::create(OpCode::zeros, Shape{2}, kVk, Kind::Int, DType::I32), DTypeError);
}

}  // namespace
