// Vulkan scatter / select_assign with every IndexingUpdateOp (Assign, Add, Mul, Min,
// Max) on every dtype the device reports, against the CPU backend (results must be
// identical: both apply the updates of a line in index order and round once), plus
// hand-computed cases for duplicate indices, NaN, integer wrap-around and unsigned
// order, and the error paths. The validation layer is on (TENSOR_VK_VALIDATION=1)
// and any message fails the test.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <tensor/tensor.hpp>

#include "backends/vulkan/vk_backend.hpp"
#include "dispatch/dispatch.hpp"
#include "tests/vulkan/vk_test_util.hpp"

namespace {

using namespace tensor;
namespace d = tensor::dispatch;
using DT = d::DispatchTensor;
using U = IndexingUpdateOp;

using vk_test::have_vulkan;
using vk_test::kCpu;
using vk_test::kVk;
constexpr U kRules[] = {U::Assign, U::Add, U::Mul, U::Min, U::Max};

const char* rule_name(U u) {
  switch (u) {
    case U::Assign: return "assign";
    case U::Add: return "add";
    case U::Mul: return "mul";
    case U::Min: return "min";
    case U::Max: return "max";
  }
  return "?";
}

using VulkanScatter = vk_test::VulkanTest;

// Number dtypes both devices support.
std::vector<DType> number_dtypes() { return vk_test::common_dtypes(false); }

DT upload(const TensorData& data, DeviceId dev) { return d::from_data(data, dev, d::kind_of_dtype(data.dtype())); }

// Values that exercise the rules: floats k/4 with a NaN and a -0 among them, ints
// spread wide enough that products wrap in the narrow types.
TensorData make_values(DType dt, const Shape& s, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<double> v(s.num_elements());
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (is_float(dt)) {
      v[i] = static_cast<double>(static_cast<int>(rng() % 25) - 12) / 4.0;
      if (rng() % 9 == 0) v[i] = std::numeric_limits<double>::quiet_NaN();
      else if (rng() % 9 == 0) v[i] = -0.0;
    } else if (is_unsigned_int(dt)) {
      v[i] = static_cast<double>(rng() % 200);
    } else {
      v[i] = static_cast<double>(static_cast<int>(rng() % 201) - 100);
    }
  }
  return TensorData::from(v, s).convert(dt);
}

// Indices in [0, n) with many duplicates.
TensorData make_indices(DType it, const Shape& s, std::size_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<double> v(s.num_elements());
  for (double& x : v) x = static_cast<double>(rng() % n);
  return TensorData::from(v, s).convert(it);
}

// Equal values: bit-exact for ints, equal-or-both-NaN for floats (the same f32/f64
// operations round once on both devices; -0 and +0 must agree too).
::testing::AssertionResult identical(const TensorData& cpu, const TensorData& vk) {
  if (!(cpu.shape() == vk.shape()) || cpu.dtype() != vk.dtype())
    return ::testing::AssertionFailure() << "shape/dtype " << cpu.shape().to_string() << " vs " << vk.shape().to_string();
  if (!is_float(cpu.dtype())) {
    if (cpu.bytes() != vk.bytes()) return ::testing::AssertionFailure() << "cpu " << cpu.to_string() << "\nvk  " << vk.to_string();
    return ::testing::AssertionSuccess();
  }
  const auto a = cpu.convert(DType::F64).to_vec<double>(), b = vk.convert(DType::F64).to_vec<double>();
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) && std::isnan(b[i])) continue;
    if (a[i] == b[i] && std::signbit(a[i]) == std::signbit(b[i])) continue;
    return ::testing::AssertionFailure() << "element " << i << ": cpu " << a[i] << " vk " << b[i] << "\ncpu " << cpu.to_string()
                                         << "\nvk  " << vk.to_string();
  }
  return ::testing::AssertionSuccess();
}

void compare(const std::string& what, const std::function<DT(DeviceId)>& op) {
  const TensorData want = d::read(op(kCpu));
  if (const auto got = vk_test::read_on_vulkan(what, op)) {
    EXPECT_TRUE(identical(want, *got)) << what;
  }
}

DT transposed(DT t) { return d::swap_dims(std::move(t), 0, 1); }
DT flipped(DT t) {
  const std::int64_t ax[1] = {0};
  return d::axes(OpCode::flip, std::move(t), ax);
}

TEST_F(VulkanScatter, ScatterEveryRuleEveryDtypeMatchesCpu) {
  for (DType dt : number_dtypes()) {
    // a: [4, 5] (or its transposed [5, 4] source, a strided view); idx/values cover
    // [3, 5] along dim 0 and [4, 3] along dim 1, with repeated targets.
    const TensorData da = make_values(dt, Shape{4, 5}, 1), dat = make_values(dt, Shape{5, 4}, 2);
    const TensorData v0 = make_values(dt, Shape{3, 5}, 3), v1 = make_values(dt, Shape{4, 3}, 4);
    const TensorData i0 = make_indices(DType::I32, Shape{3, 5}, 4, 5), i1 = make_indices(DType::I32, Shape{4, 3}, 5, 6);
    const TensorData v0f = make_values(dt, Shape{3, 5}, 7);
    for (U u : kRules) {
      const std::string base = std::string(dtype_name(dt)) + " " + rule_name(u);
      compare(base + " dim 0", [&](DeviceId dev) { return d::scatter(OpCode::scatter, upload(da, dev), 0, upload(i0, dev), upload(v0, dev), u); });
      compare(base + " dim 1", [&](DeviceId dev) { return d::scatter(OpCode::scatter, upload(da, dev), 1, upload(i1, dev), upload(v1, dev), u); });
      // Strided tensor, flipped values, transposed indices (a [5, 3] index tensor viewed as [3, 5]).
      compare(base + " views", [&](DeviceId dev) {
        const TensorData it = make_indices(DType::I32, Shape{5, 3}, 4, 8);
        return d::scatter(OpCode::scatter, transposed(upload(dat, dev)), 0, transposed(upload(it, dev)),
                          flipped(upload(v0f, dev)), u);
      });
    }
  }
}

TEST_F(VulkanScatter, SelectAssignEveryRuleEveryDtypeMatchesCpu) {
  for (DType dt : number_dtypes()) {
    const TensorData da = make_values(dt, Shape{4, 5}, 11), dat = make_values(dt, Shape{5, 4}, 12);
    const TensorData v0 = make_values(dt, Shape{6, 5}, 13), v1 = make_values(dt, Shape{4, 6}, 14);
    const TensorData i0 = TensorData::from<std::int32_t>({3, 1, 3, 0, 3, 1}, Shape{6});
    const TensorData i1 = TensorData::from<std::int32_t>({4, 4, 0, 2, 4, 0}, Shape{6});
    for (U u : kRules) {
      const std::string base = std::string(dtype_name(dt)) + " " + rule_name(u);
      compare(base + " dim 0", [&](DeviceId dev) {
        return d::select_assign(OpCode::select_assign, upload(da, dev), 0, upload(i0, dev), upload(v0, dev), u);
      });
      compare(base + " dim 1", [&](DeviceId dev) {
        return d::select_assign(OpCode::select_assign, upload(da, dev), 1, upload(i1, dev), upload(v1, dev), u);
      });
      compare(base + " views", [&](DeviceId dev) {
        // Flipped indices (a negative stride) into a transposed tensor, flipped values.
        return d::select_assign(OpCode::select_assign, transposed(upload(dat, dev)), 0, flipped(upload(i0, dev)),
                                flipped(upload(v0, dev)), u);
      });
    }
  }
}

TEST_F(VulkanScatter, WideIndicesZeroSizeAndBroadcastValues) {
  const bool i64 = d::supports_dtype(kVk, DType::I64);
  const TensorData da = make_values(DType::F32, Shape{4, 5}, 21), v0 = make_values(DType::F32, Shape{3, 5}, 22);
  for (U u : kRules) {
    const std::string base = rule_name(u);
    if (i64) {
      const TensorData i0 = make_indices(DType::I64, Shape{3, 5}, 4, 23);
      compare(base + " i64 indices", [&](DeviceId dev) {
        return d::scatter(OpCode::scatter, upload(da, dev), 0, upload(i0, dev), upload(v0, dev), u);
      });
      const TensorData s0 = TensorData::from<std::int64_t>({2, 2, 0}, Shape{3});
      compare(base + " i64 select", [&](DeviceId dev) {
        return d::select_assign(OpCode::select_assign, upload(da, dev), 0, upload(s0, dev), upload(v0, dev), u);
      });
    }
    // Empty index tensors leave the tensor as it is.
    compare(base + " empty scatter", [&](DeviceId dev) {
      return d::scatter(OpCode::scatter, upload(da, dev), 0, upload(TensorData::from<std::int32_t>({}, Shape{0, 5}), dev),
                        upload(TensorData::from<float>({}, Shape{0, 5}), dev), u);
    });
    compare(base + " empty select", [&](DeviceId dev) {
      return d::select_assign(OpCode::select_assign, upload(da, dev), 1, upload(TensorData::from<std::int32_t>({}, Shape{0}), dev),
                              upload(TensorData::from<float>({}, Shape{4, 0}), dev), u);
    });
    // Values broadcast from one row (stride 0 along dim 0).
    compare(base + " broadcast values", [&](DeviceId dev) {
      const std::int64_t to[2] = {3, 5};
      DT row = upload(make_values(DType::F32, Shape{1, 5}, 24), dev);
      return d::select_assign(OpCode::select_assign, upload(da, dev), 0,
                              upload(TensorData::from<std::int32_t>({1, 1, 3}, Shape{3}), dev),
                              d::reshape(OpCode::expand, std::move(row), to), u);
    });
  }
}

std::vector<float> run_f32(U u, std::vector<float> a, std::vector<std::int32_t> idx, std::vector<float> v) {
  const std::size_t n = idx.size();
  DT t = upload(TensorData::from<float>(a, Shape{a.size()}), kVk);
  DT i = upload(TensorData::from<std::int32_t>(idx, Shape{n}), kVk);
  DT x = upload(TensorData::from<float>(v, Shape{n}), kVk);
  return d::read(d::scatter(OpCode::scatter, std::move(t), 0, std::move(i), std::move(x), u)).to_vec<float>();
}

TEST_F(VulkanScatter, DuplicatesApplyInIndexOrder) {
  // Target 1 gets 5, then 7, then 2; target 3 gets 4.
  const std::vector<float> a{10, 3, 6, -1};
  const std::vector<std::int32_t> idx{1, 3, 1, 1};
  const std::vector<float> v{5, 4, 7, 2};
  EXPECT_EQ(run_f32(U::Assign, a, idx, v), (std::vector<float>{10, 2, 6, 4}));
  EXPECT_EQ(run_f32(U::Add, a, idx, v), (std::vector<float>{10, 17, 6, 3}));
  EXPECT_EQ(run_f32(U::Mul, a, idx, v), (std::vector<float>{10, 210, 6, -4}));
  EXPECT_EQ(run_f32(U::Min, a, idx, v), (std::vector<float>{10, 2, 6, -1}));
  EXPECT_EQ(run_f32(U::Max, a, idx, v), (std::vector<float>{10, 7, 6, 4}));
  // select_assign on rows: row 0 gets [1, 2] then [3, 4] (Assign keeps the last).
  DT t = upload(TensorData::from<float>({9, 9, 8, 8}, Shape{2, 2}), kVk);
  DT i = upload(TensorData::from<std::int32_t>({0, 0}, Shape{2}), kVk);
  DT x = upload(TensorData::from<float>({1, 2, 3, 4}, Shape{2, 2}), kVk);
  EXPECT_EQ(d::read(d::select_assign(OpCode::select_assign, t, 0, i, x, U::Assign)).to_vec<float>(),
            (std::vector<float>{3, 4, 8, 8}));
  EXPECT_EQ(d::read(d::select_assign(OpCode::select_assign, t, 0, i, x, U::Mul)).to_vec<float>(),
            (std::vector<float>{27, 72, 8, 8}));
  // The input is shared (t is still alive), so it was not written.
  EXPECT_EQ(d::read(t).to_vec<float>(), (std::vector<float>{9, 9, 8, 8}));
}

TEST_F(VulkanScatter, MinMaxNaNWinsAndSignedZeroKeepsTheFirst) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // Element 0: NaN already there stays; element 1: a NaN value wins and then sticks;
  // element 2: -0 vs +0 compare equal, so the old value (+0) stays.
  for (U u : {U::Min, U::Max}) {
    const auto r = run_f32(u, {nan, 1, 0.0f}, {0, 1, 1, 2}, {-5, nan, 3, -0.0f});
    EXPECT_TRUE(std::isnan(r[0])) << rule_name(u);
    EXPECT_TRUE(std::isnan(r[1])) << rule_name(u);
    EXPECT_EQ(r[2], 0.0f);
    EXPECT_FALSE(std::signbit(r[2])) << rule_name(u);
  }
}

TEST_F(VulkanScatter, IntegerRulesWrapAndOrderUnsignedValuesAsUnsigned) {
  DT a8 = upload(TensorData::from<std::int8_t>({100, -7}, Shape{2}), kVk);
  DT i = upload(TensorData::from<std::int32_t>({0, 1}, Shape{2}), kVk);
  DT v8 = upload(TensorData::from<std::int8_t>({3, 20}, Shape{2}), kVk);
  // 300 wraps to 44, -140 wraps to 116.
  EXPECT_EQ(d::read(d::scatter(OpCode::scatter, a8, 0, i, v8, U::Mul)).to_vec<std::int8_t>(), (std::vector<std::int8_t>{44, 116}));
  EXPECT_EQ(d::read(d::scatter(OpCode::scatter, a8, 0, i, v8, U::Add)).to_vec<std::int8_t>(), (std::vector<std::int8_t>{103, 13}));
  EXPECT_EQ(d::read(d::scatter(OpCode::scatter, a8, 0, i, v8, U::Min)).to_vec<std::int8_t>(), (std::vector<std::int8_t>{3, -7}));
  DT a32 = upload(TensorData::from<std::uint32_t>({0xFFFFFFF0u, 5}, Shape{2}), kVk);
  DT v32 = upload(TensorData::from<std::uint32_t>({1, 0x80000000u}, Shape{2}), kVk);
  EXPECT_EQ(d::read(d::scatter(OpCode::scatter, a32, 0, i, v32, U::Max)).to_vec<std::uint32_t>(),
            (std::vector<std::uint32_t>{0xFFFFFFF0u, 0x80000000u}));
  EXPECT_EQ(d::read(d::scatter(OpCode::scatter, a32, 0, i, v32, U::Min)).to_vec<std::uint32_t>(),
            (std::vector<std::uint32_t>{1, 5}));
  if (d::supports_dtype(kVk, DType::I64)) {
    const std::int64_t big = std::int64_t{1} << 40;
    DT a64 = upload(TensorData::from<std::int64_t>({big, -big}, Shape{2}), kVk);
    DT v64 = upload(TensorData::from<std::int64_t>({big + 1, -big - 1}, Shape{2}), kVk);
    EXPECT_EQ(d::read(d::scatter(OpCode::scatter, a64, 0, i, v64, U::Max)).to_vec<std::int64_t>(),
              (std::vector<std::int64_t>{big + 1, -big}));
    EXPECT_EQ(d::read(d::scatter(OpCode::scatter, a64, 0, i, v64, U::Min)).to_vec<std::int64_t>(),
              (std::vector<std::int64_t>{big, -big - 1}));
  }
}

TEST_F(VulkanScatter, BadInputsRaiseTypedErrors) {
  DT a = upload(TensorData::from<float>({0, 1, 2, 3, 4, 5}, Shape{2, 3}), kVk);
  DT bad = upload(TensorData::from<std::int32_t>({2, 3, 1, 0}, Shape{2, 2}), kVk);
  DT vals = upload(TensorData::from<float>({1, 1, 1, 1}, Shape{2, 2}), kVk);
  DT rows = upload(TensorData::from<float>({1, 1, 1, 1, 1, 1}, Shape{2, 3}), kVk);
  DT big = upload(TensorData::from<std::int32_t>({1, 2}, Shape{2}), kVk);
  for (U u : kRules) {
    try {
      d::read(d::scatter(OpCode::scatter, a, 1, bad, vals, u));
      ADD_FAILURE() << rule_name(u) << ": no error";
    } catch (const IndexError& e) {
      EXPECT_NE(std::string(e.what()).find("[scatter] index out of range for dim 1"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("got 3"), std::string::npos) << e.what();
    }
    try {
      d::read(d::select_assign(OpCode::select_assign, a, 0, big, rows, u));
      ADD_FAILURE() << rule_name(u) << ": no error";
    } catch (const IndexError& e) {
      EXPECT_NE(std::string(e.what()).find("[select_assign] index out of range for dim 0"), std::string::npos) << e.what();
    }
  }
  // The device still works after the errors.
  EXPECT_EQ(d::read(d::scatter(OpCode::scatter, a, 1, upload(TensorData::from<std::int32_t>({2, 2, 0, 0}, Shape{2, 2}), kVk),
                               vals, U::Assign))
                .to_vec<float>(),
            (std::vector<float>{0, 1, 1, 1, 4, 5}));
  // Bool tensors take no update rule; values of another dtype are rejected.
  DT b = d::from_data(TensorData::from<bool>({true, false}, Shape{2}), kVk, d::Kind::Bool);
  DT i1 = upload(TensorData::from<std::int32_t>({0}, Shape{1}), kVk);
  EXPECT_THROW(d::scatter(OpCode::scatter, b, 0, i1, d::from_data(TensorData::from<bool>({true}, Shape{1}), kVk, d::Kind::Bool), U::Max),
               DTypeError);
  EXPECT_THROW(d::scatter(OpCode::scatter, a, 1, bad, upload(TensorData::from<std::int32_t>({1, 1, 1, 1}, Shape{2, 2}), kVk), U::Min),
               Error);
}

}  // namespace
