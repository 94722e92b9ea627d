// The Vulkan reduction family against the CPU backend: sum, max, min, max_abs, their
// per-dim and with-indices forms, argmax/argmin, any/all (and softmax's row max and
// sum, the other shader with subgroup reductions), on every dtype both devices
// support, over lines that span many workgroups and subgroups with lengths that are
// not multiples of the subgroup size, NaN in every position, ties, integer extremes
// and empty dims; the same cases with the subgroup path switched off in-process; the
// subgroup-size choice on synthetic device facts; and that these ops are native on
// Vulkan (not the default compositions). meson runs this file twice: as is, and
// under TENSOR_VK_DISABLE_SUBGROUP=1 (shared-memory trees only; suite 'slow', so the
// sanitizer leg skips it: there the in-process switch still runs both paths).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <tensor/tensor.hpp>

#include "backends/vulkan/runtime/context.hpp"
#include "backends/vulkan/runtime/features.hpp"
#include "dispatch/backend.hpp"
#include "dispatch/dispatch.hpp"
#include "tests/vulkan/vk_test_util.hpp"

namespace {

using namespace tensor;
namespace d = tensor::dispatch;
namespace vk = tensor::vulkan;
using DT = d::DispatchTensor;
using vk_test::kCpu;
using vk_test::kVk;

d::Kind kind_of(DType dt) { return is_float(dt) ? d::Kind::Float : is_bool(dt) ? d::Kind::Bool : d::Kind::Int; }
DT upload(const TensorData& data, DeviceId dev) { return d::from_data(data, dev, kind_of(data.dtype())); }

// Equal values (NaN matches NaN, -0 matches 0, bools by truth value); `tol` > 0 allows
// a relative float difference (sums, whose order differs between the devices).
::testing::AssertionResult same(const TensorData& cpu, const TensorData& got, double tol) {
  if (!(cpu.shape() == got.shape()))
    return ::testing::AssertionFailure() << "shape " << cpu.shape().to_string() << " vs " << got.shape().to_string();
  if (is_bool(cpu.dtype()) != is_bool(got.dtype()) || (!is_bool(cpu.dtype()) && cpu.dtype() != got.dtype()))
    return ::testing::AssertionFailure() << "dtype " << dtype_name(cpu.dtype()) << " vs " << dtype_name(got.dtype());
  if (is_bool(cpu.dtype())) {
    if (cpu.to_vec<bool>() == got.to_vec<bool>()) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "cpu " << cpu.to_string() << "\nvk  " << got.to_string();
  }
  if (!is_float(cpu.dtype())) {  // exact, including wrapped sums
    if (cpu.bytes() == got.bytes()) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "cpu " << cpu.to_string() << "\nvk  " << got.to_string();
  }
  const auto a = cpu.convert(DType::F64).to_vec<double>(), b = got.convert(DType::F64).to_vec<double>();
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) && std::isnan(b[i])) continue;
    if (a[i] == b[i]) continue;
    if (tol > 0 && std::isfinite(a[i]) && std::fabs(a[i] - b[i]) <= tol * (1.0 + std::fabs(a[i]))) continue;
    return ::testing::AssertionFailure() << "element " << i << ": cpu " << a[i] << " vk " << b[i];
  }
  return ::testing::AssertionSuccess();
}

// Runs op on both devices and compares; the CPU result is the reference.
void check(const std::string& what, const std::function<DT(DeviceId)>& op, double tol = 0) {
  const TensorData want = d::read(op(kCpu));
  if (const auto got = vk_test::read_on_vulkan(what, op)) {
    EXPECT_TRUE(same(want, *got, tol)) << what;
  }
}
void check_pair(const std::string& what, const std::function<std::pair<DT, DT>(DeviceId)>& op) {
  auto [cv, ci] = op(kCpu);
  const TensorData wv = d::read(cv), wi = d::read(ci);
  try {
    auto [gv, gi] = op(kVk);
    EXPECT_TRUE(same(wv, d::read(gv), 0)) << what << " (values)";
    EXPECT_TRUE(same(wi, d::read(gi), 0)) << what << " (indices)";
  } catch (const std::exception& e) {
    ADD_FAILURE() << what << ": vulkan threw: " << e.what();
  }
}

// Tolerance of a float sum of n elements of magnitude <= 8 (f32 accumulation in a
// different order; halves are rounded once at the end).
double sum_tol(DType dt) { return dt == DType::F16 ? 2e-3 : dt == DType::BF16 ? 1e-2 : dt == DType::F64 ? 1e-12 : 1e-5; }

// Values with many ties (a small range); for floats zeros of both signs and the two
// infinities at seeded positions. NaN and int extremes: the tests below.
TensorData make_line(DType dt, std::size_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<double> v(n);
  for (double& x : v) {
    const int r = static_cast<int>(rng() % 17) - 8;
    if (is_float(dt)) x = r == 8 ? -0.0 : r / 2.0;
    else if (is_bool(dt)) x = rng() % 3 == 0 ? 1.0 : 0.0;
    else if (is_unsigned_int(dt)) x = static_cast<double>(r + 8);
    else x = r;
  }
  if (n > 2 && is_float(dt)) {
    v[rng() % n] = std::numeric_limits<double>::infinity();
    v[rng() % n] = -std::numeric_limits<double>::infinity();
  }
  return TensorData::from(v, Shape{n}).convert(dt);
}

// Int lines with the dtype's minimum and maximum in place (exact through TensorData).
template <class T>
TensorData int_extremes(std::size_t n, std::size_t at_min, std::size_t at_max) {
  std::vector<T> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<T>(i % 7);
  v[at_min] = std::numeric_limits<T>::min();
  v[at_max] = std::numeric_limits<T>::max();
  return TensorData::from(v, Shape{n});
}

std::vector<DType> dtypes() { return vk_test::common_dtypes(false); }

const OpCode kFull[] = {OpCode::sum, OpCode::max, OpCode::min, OpCode::max_abs};
const OpCode kDim[] = {OpCode::sum_dim, OpCode::max_dim, OpCode::min_dim, OpCode::max_abs_dim};

// Every reduction of a line / along each dim of a [rows, n] tensor, for one dtype.
void check_all_forms(const std::string& tag, const TensorData& data, DType dt) {
  const Shape& s = data.shape();
  const bool flat = s.rank() == 1;
  for (OpCode op : {OpCode::any, OpCode::all})
    check(tag + " " + std::string(d::op_name(op)), [&](DeviceId v) { return d::any_all(op, upload(data, v)); });
  for (std::int64_t dim = 0; dim < static_cast<std::int64_t>(s.rank()); ++dim)
    for (OpCode op : {OpCode::any_dim, OpCode::all_dim})
      check(tag + " dim " + std::to_string(dim) + " " + std::string(d::op_name(op)),
            [&](DeviceId v) { return d::any_all_dim(op, upload(data, v), dim); });
  if (is_bool(dt)) return;  // the rest is for numbers
  for (OpCode op : flat ? std::vector<OpCode>(std::begin(kFull), std::end(kFull))
                        : std::vector<OpCode>(std::begin(kDim), std::end(kDim))) {
    const double tol = (op == OpCode::sum || op == OpCode::sum_dim) && is_float(dt) ? sum_tol(dt) : 0;
    for (std::int64_t dim = 0; dim < (flat ? 1 : 2); ++dim) {
      const std::string what = tag + " " + std::string(d::op_name(op)) + " dim " + std::to_string(dim);
      check(what, [&](DeviceId v) { return flat ? d::reduce(op, upload(data, v)) : d::reduce_dim(op, upload(data, v), dim); },
            tol);
    }
  }
  for (std::int64_t dim = 0; dim < static_cast<std::int64_t>(s.rank()); ++dim) {
    const std::string at = tag + " dim " + std::to_string(dim);
    for (OpCode op : {OpCode::argmax, OpCode::argmin})
      check(at + " " + std::string(d::op_name(op)), [&](DeviceId v) { return d::dim_index(op, upload(data, v), dim); });
    for (OpCode op : {OpCode::max_dim_with_indices, OpCode::min_dim_with_indices})
      check_pair(at + " " + std::string(d::op_name(op)), [&](DeviceId v) { return d::dim_with_indices(op, upload(data, v), dim); });
  }
}

class VulkanReduce : public vk_test::VulkanTest {
 protected:
  vk::Context& ctx() { return *vk::context(0); }
  // Runs body with the subgroup path on (where supported) and off.
  void both_paths(const std::function<void()>& body) {
    const bool was = ctx().subgroup_on();
    body();
    if (!was) return;
    ctx().set_subgroup(false);
    body();
    ctx().set_subgroup(true);
  }
};

TEST_F(VulkanReduce, LongLinesOfOddLengthsMatchTheCpuOnEveryDType) {
  // The path in use only (the vulkan_reduce_no_subgroup run covers the other).
  // 1 and 7 fill part of a subgroup, 65 and 1000 part of a workgroup's lanes, 16389
  // and 70001 split into several workgroups and a second pass.
  for (DType dt : dtypes()) {
    for (std::size_t n : {std::size_t{1}, std::size_t{7}, std::size_t{65}, std::size_t{1000}, std::size_t{16389},
                          std::size_t{70001}}) {
      const std::string tag = std::string(dtype_name(dt)) + " n=" + std::to_string(n);
      check_all_forms(tag, make_line(dt, n, static_cast<std::uint32_t>(n)), dt);
    }
  }
}

TEST_F(VulkanReduce, PerDimReductionsOfViewsMatchTheCpuOnEveryDType) {
  for (DType dt : dtypes()) {
    const TensorData data = make_line(dt, 37 * 131, 5);
    const std::int64_t shape[2] = {37, 131};
    const std::int64_t ax[1] = {1};
    const Slice sl[2] = {Slice::range(1, 37, 3), Slice::range(0, 131, 2)};
    const Slice row[2] = {Slice::range(4, 5, 1), Slice::range(0, 131, 1)};  // one row, expanded to all 37
    const std::vector<std::pair<std::string, std::function<DT(DT)>>> views = {
        {"transposed", [](DT t) { return d::swap_dims(std::move(t), 0, 1); }},
        {"step-sliced", [&](DT t) { return d::slice(std::move(t), sl); }},
        {"flipped", [&](DT t) { return d::axes(OpCode::flip, std::move(t), ax); }},
        {"broadcast", [&](DT t) { return d::reshape(OpCode::expand, d::slice(std::move(t), row), shape); }},
    };
    for (const auto& [name, view] : views) {
      auto A = [&](DeviceId v) { return view(d::reshape(OpCode::reshape, upload(data, v), shape)); };
      const std::string tag = std::string(dtype_name(dt)) + " " + name;
      both_paths([&] {
        for (std::int64_t dim = 0; dim < 2; ++dim) {
          const std::string at = tag + " dim " + std::to_string(dim);
          for (OpCode op : kDim)
            check(at + " " + std::string(d::op_name(op)), [&](DeviceId v) { return d::reduce_dim(op, A(v), dim); },
                  op == OpCode::sum_dim && is_float(dt) ? sum_tol(dt) : 0);
          check_pair(at + " max_dim_with_indices",
                     [&](DeviceId v) { return d::dim_with_indices(OpCode::max_dim_with_indices, A(v), dim); });
          check(at + " all_dim", [&](DeviceId v) { return d::any_all_dim(OpCode::all_dim, A(v), dim); });
        }
        for (OpCode op : kFull)
          check(tag + " " + std::string(d::op_name(op)), [&](DeviceId v) { return d::reduce(op, A(v)); },
                op == OpCode::sum && is_float(dt) ? sum_tol(dt) : 0);
        check(tag + " any", [&](DeviceId v) { return d::any_all(OpCode::any, A(v)); });
      });
    }
  }
}

// Every per-dim reduction of `a` along `dim` (the column path when the dim is not the
// innermost of the layout): sums, products (ints only: float products of long
// columns overflow in an order-dependent way), means, extrema, arg and any/all.
void check_dim_forms(const std::string& tag, DType dt, std::int64_t dim, const std::function<DT(DeviceId)>& A) {
  const std::string at = tag + " dim " + std::to_string(dim) + " ";
  for (OpCode op : {OpCode::any_dim, OpCode::all_dim})
    check(at + std::string(d::op_name(op)), [&](DeviceId v) { return d::any_all_dim(op, A(v), dim); });
  if (is_bool(dt)) return;
  for (OpCode op : {OpCode::sum_dim, OpCode::mean_dim, OpCode::prod_dim, OpCode::max_dim, OpCode::min_dim, OpCode::max_abs_dim}) {
    if (op == OpCode::prod_dim && is_float(dt)) continue;
    const bool summed = op == OpCode::sum_dim || op == OpCode::mean_dim;
    check(at + std::string(d::op_name(op)), [&](DeviceId v) { return d::reduce_dim(op, A(v), dim); },
          summed && is_float(dt) ? sum_tol(dt) : 0);
  }
  for (OpCode op : {OpCode::argmax, OpCode::argmin})
    check(at + std::string(d::op_name(op)), [&](DeviceId v) { return d::dim_index(op, A(v), dim); });
  for (OpCode op : {OpCode::max_dim_with_indices, OpCode::min_dim_with_indices})
    check_pair(at + std::string(d::op_name(op)), [&](DeviceId v) { return d::dim_with_indices(op, A(v), dim); });
}

TEST_F(VulkanReduce, ColumnsAndSplitColumnsMatchTheCpuOnEveryDType) {
  // Reduced dims that are not the innermost: [70001, 3] along 0 (few outputs, long
  // columns: split into chunks and a second pass; int means: the line path, as
  // a column that long is not split), [20000, 3] flipped (negative stride); [5, 4099] along 0 (short columns, many outputs); [3, 2000, 5] along the
  // middle dim (split) and [4, 9, 6] along the middle dim; a transposed [3, 700]
  // along its dim 1 (column stride 700 in memory, innermost output stride 1).
  // The long cases on one dtype of each family (run time), the short ones on all.
  const std::int64_t ax0[1] = {0};
  for (DType dt : vk_test::common_dtypes(true)) {
    const bool family = dt == DType::F32 || dt == DType::F16 || dt == DType::F64 || dt == DType::I32 || dt == DType::U8 ||
                        dt == DType::I64 || is_bool(dt);
    struct Case {
      std::string name;
      Shape shape;
      std::int64_t dim;
      std::function<DT(DT)> view;
    };
    const std::vector<Case> cases = {
        {"[70001, 3]", Shape{70001, 3}, 0, [](DT t) { return t; }},
        {"[20000, 3] flipped", Shape{20000, 3}, 0, [&](DT t) { return d::axes(OpCode::flip, std::move(t), ax0); }},
        {"[5, 4099]", Shape{5, 4099}, 0, [](DT t) { return t; }},
        {"[3, 2000, 5]", Shape{3, 2000, 5}, 1, [](DT t) { return t; }},
        {"[4, 9, 6]", Shape{4, 9, 6}, 1, [](DT t) { return t; }},
        {"[3, 700] transposed", Shape{3, 700}, 1, [](DT t) { return d::swap_dims(std::move(t), 0, 1); }},
    };
    for (const Case& c : cases) {
      const std::size_t n = c.shape.num_elements();
      if (n > 10000 && !family) continue;
      const TensorData data = make_line(dt, n, static_cast<std::uint32_t>(n));
      std::vector<std::int64_t> dims(c.shape.rank());
      for (std::size_t i = 0; i < dims.size(); ++i) dims[i] = static_cast<std::int64_t>(c.shape[i]);
      auto A = [&](DeviceId v) { return c.view(d::reshape(OpCode::reshape, upload(data, v), dims)); };
      check_dim_forms(std::string(dtype_name(dt)) + " " + c.name, dt, c.dim, A);
    }
  }
}

TEST_F(VulkanReduce, NaNAndTiesInColumnsTakeTheLowestIndex) {
  // Columns of [rows, 4] along dim 0: column 0 NaN at two rows (the first wins),
  // column 1 ties of the maximum and the minimum, column 2 a NaN last, column 3 plain;
  // rows = 9 (one pass) and 30000 (split: the winners sit in different chunks).
  for (DType dt : dtypes()) {
    for (std::size_t rows : {std::size_t{9}, std::size_t{30000}}) {
      std::vector<double> v(rows * 4);
      for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>((i * 5) % 7) + 1.0;
      const std::size_t a = rows / 3, b = rows - 2, c = 1;
      for (std::size_t r : {b, a, c}) v[r * 4 + 1] = 20.0;  // ties of the maximum: row c wins
      v[(rows - 1) * 4 + 1] = v[2 * 4 + 1] = 0.0;           // ties of the minimum: row 2 wins
      if (is_float(dt)) {
        v[b * 4 + 0] = v[a * 4 + 0] = std::nan("");
        v[(rows - 1) * 4 + 2] = std::nan("");
      }
      const TensorData data = TensorData::from(v, Shape{rows, 4}).convert(dt);
      const std::string tag = std::string(dtype_name(dt)) + " NaN/ties rows=" + std::to_string(rows);
      const std::int64_t shape[2] = {static_cast<std::int64_t>(rows), 4};
      check_dim_forms(tag, dt, 0, [&](DeviceId x) { return d::reshape(OpCode::reshape, upload(data, x), shape); });
      // Independently of the cpu: the expected argmax / argmin of columns 0 and 1.
      const auto mx = vk_test::read_on_vulkan(tag, [&](DeviceId x) { return d::dim_index(OpCode::argmax, upload(data, x), 0); });
      const auto mn = vk_test::read_on_vulkan(tag, [&](DeviceId x) { return d::dim_index(OpCode::argmin, upload(data, x), 0); });
      if (mx && mn) {
        const auto ix = mx->convert(DType::I64).to_vec<std::int64_t>(), in = mn->convert(DType::I64).to_vec<std::int64_t>();
        EXPECT_EQ(ix[1], static_cast<std::int64_t>(c)) << tag;
        EXPECT_EQ(in[1], 2) << tag;
        if (is_float(dt)) {  // the first NaN wins both
          EXPECT_EQ(ix[0], static_cast<std::int64_t>(a)) << tag;
          EXPECT_EQ(in[0], static_cast<std::int64_t>(a)) << tag;
          EXPECT_EQ(ix[2], static_cast<std::int64_t>(rows - 1)) << tag;
          EXPECT_EQ(in[2], static_cast<std::int64_t>(rows - 1)) << tag;
        }
      }
    }
  }
}

TEST_F(VulkanReduce, NaNWinsAtTheLowestIndexWhereverItIs) {
  // NaN first, in the middle of a subgroup, last, and twice (the first one wins), in a
  // short line, in a line of several workgroups, and in rows of a matrix.
  for (DType dt : dtypes()) {
    if (!is_float(dt)) continue;
    for (std::size_t n : {std::size_t{13}, std::size_t{20000}}) {
      for (std::vector<std::size_t> nans : {std::vector<std::size_t>{0}, {n / 2 + 3}, {n - 1}, {n - 2, 5}}) {
        std::vector<double> v(n);
        for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<double>(i % 11) - 5.0;
        for (std::size_t at : nans) v[at] = std::nan("");
        const TensorData data = TensorData::from(v, Shape{n}).convert(dt);
        const std::string tag = std::string(dtype_name(dt)) + " n=" + std::to_string(n) + " NaN at " + std::to_string(nans[0]);
        both_paths([&] {
          for (OpCode op : kFull)
            if (op != OpCode::sum) check(tag + " " + std::string(d::op_name(op)), [&](DeviceId x) { return d::reduce(op, upload(data, x)); });
          for (OpCode op : {OpCode::argmax, OpCode::argmin}) {
            const auto got = vk_test::read_on_vulkan(tag, [&](DeviceId x) { return d::dim_index(op, upload(data, x), 0); });
            std::size_t first = n;
            for (std::size_t at : nans) first = std::min(first, at);
            if (got) {
              EXPECT_EQ(got->convert(DType::I64).to_vec<std::int64_t>()[0], static_cast<std::int64_t>(first)) << tag;
            }
          }
          check(tag + " any", [&](DeviceId x) { return d::any_all(OpCode::any, upload(data, x)); });
        });
      }
    }
    // Rows: NaN only in row 1 (position 3) and row 2 (last).
    std::vector<double> m(3 * 40);
    for (std::size_t i = 0; i < m.size(); ++i) m[i] = static_cast<double>((i * 7) % 13) - 6.0;
    m[40 + 3] = std::nan("");
    m[3 * 40 - 1] = std::nan("");
    const TensorData mat = TensorData::from(m, Shape{3, 40}).convert(dt);
    both_paths([&] { check_all_forms(std::string(dtype_name(dt)) + " NaN rows", mat, dt); });
  }
}

TEST_F(VulkanReduce, TiesTakeTheLowestIndexAcrossSubgroupsAndWorkgroups) {
  for (DType dt : dtypes()) {
    for (std::size_t n : {std::size_t{64}, std::size_t{300}, std::size_t{40000}}) {
      // Equal maxima at n-1, n/2 and 9 (other lanes, subgroups and, for 40000, chunks).
      std::vector<double> v(n, 1.0);
      v[n - 1] = v[n / 2] = v[9] = 3.0;
      v[n - 2] = v[n / 3] = v[11] = 0.0;
      const TensorData data = TensorData::from(v, Shape{n}).convert(dt);
      const std::string tag = std::string(dtype_name(dt)) + " n=" + std::to_string(n);
      both_paths([&] {
        for (auto [op, want] : {std::pair{OpCode::argmax, 9}, std::pair{OpCode::argmin, 11}}) {
          const auto got = vk_test::read_on_vulkan(tag, [&](DeviceId x) { return d::dim_index(op, upload(data, x), 0); });
          if (got) {
            EXPECT_EQ(got->convert(DType::I64).to_vec<std::int64_t>()[0], want) << tag << " " << d::op_name(op);
          }
        }
        check_pair(tag + " max_dim_with_indices",
                   [&](DeviceId x) { return d::dim_with_indices(OpCode::max_dim_with_indices, upload(data, x), 0); });
      });
    }
  }
  // Signed zeros tie: the first of -0 and +0 is the extremum's index.
  const TensorData z = TensorData::from(std::vector<float>{-0.0f, 0.0f, -0.0f}, Shape{3});
  const auto got = vk_test::read_on_vulkan("zeros", [&](DeviceId x) { return d::dim_index(OpCode::argmax, upload(z, x), 0); });
  if (got) {
    EXPECT_EQ(got->convert(DType::I64).to_vec<std::int64_t>()[0], 0);
  }
}

TEST_F(VulkanReduce, IntegerExtremesAreExactAndSumsWrap) {
  std::vector<TensorData> cases;
  for (std::size_t n : {std::size_t{9}, std::size_t{5000}, std::size_t{20011}}) {
    const std::size_t lo = n / 3, hi = n - 1;
    cases.push_back(int_extremes<std::int32_t>(n, lo, hi));
    cases.push_back(int_extremes<std::uint32_t>(n, lo, hi));
    cases.push_back(int_extremes<std::int16_t>(n, hi, lo));
    cases.push_back(int_extremes<std::int8_t>(n, lo, hi));
    cases.push_back(int_extremes<std::uint8_t>(n, hi, lo));
    if (d::supports_dtype(kVk, DType::I64)) cases.push_back(int_extremes<std::int64_t>(n, lo, hi));
  }
  for (const TensorData& data : cases) {
    const DType dt = data.dtype();
    if (!d::supports_dtype(kVk, dt)) continue;
    const std::string tag = std::string(dtype_name(dt)) + " extremes n=" + std::to_string(data.shape()[0]);
    both_paths([&] { check_all_forms(tag, data, dt); });
  }
  // |MIN| wraps to MIN (as the abs op), so max_abs of {MIN, 5} is 5.
  const TensorData w = TensorData::from(std::vector<std::int32_t>{std::numeric_limits<std::int32_t>::min(), 5}, Shape{2});
  const auto got = vk_test::read_on_vulkan("max_abs i32", [&](DeviceId x) { return d::reduce(OpCode::max_abs, upload(w, x)); });
  if (got) {
    EXPECT_EQ(got->to_vec<std::int32_t>()[0], 5);
  }
}

TEST_F(VulkanReduce, EmptyDimsAndEmptyTensors) {
  for (DType dt : vk_test::common_dtypes(true)) {
    const TensorData e = TensorData::from(std::vector<double>{}, Shape{3, 0}).convert(dt);
    const std::string tag = std::string(dtype_name(dt)) + " [3, 0]";
    both_paths([&] {
      // Along the empty dim: identities (any false, all true, sum 0); along the other:
      // a zero-size result.
      for (std::int64_t dim : {0, 1}) {
        for (OpCode op : {OpCode::any_dim, OpCode::all_dim})
          check(tag + " " + std::string(d::op_name(op)) + " " + std::to_string(dim),
                [&](DeviceId v) { return d::any_all_dim(op, upload(e, v), dim); });
        if (!is_bool(dt))
          check(tag + " sum_dim " + std::to_string(dim), [&](DeviceId v) { return d::reduce_dim(OpCode::sum_dim, upload(e, v), dim); });
      }
      for (OpCode op : {OpCode::any, OpCode::all})
        check(tag + " " + std::string(d::op_name(op)), [&](DeviceId v) { return d::any_all(op, upload(e, v)); });
    });
    if (is_bool(dt)) continue;
    // Extrema of nothing are an error on both devices, never a crash or a value.
    for (OpCode op : {OpCode::max, OpCode::min, OpCode::max_abs})
      EXPECT_THROW(d::reduce(op, upload(e, kVk)), Error) << tag << " " << d::op_name(op);
    EXPECT_THROW(d::reduce_dim(OpCode::max_dim, upload(e, kVk), 1), Error) << tag;
  }
}

TEST_F(VulkanReduce, BoolInputsOfAnyAndAll) {
  for (DType dt : vk_test::common_dtypes(true)) {
    if (!is_bool(dt)) continue;
    for (std::size_t n : {std::size_t{5}, std::size_t{77}, std::size_t{20001}}) {
      std::vector<double> ones(n, 1.0), zeros(n, 0.0);
      std::vector<double> one_off = ones, one_on = zeros;
      one_off[n - 1] = 0.0;
      one_on[n / 2] = 1.0;
      for (const auto& v : {ones, zeros, one_off, one_on}) {
        const TensorData data = TensorData::from(v, Shape{n}).convert(dt);
        const std::string tag = std::string(dtype_name(dt)) + " n=" + std::to_string(n);
        both_paths([&] { check_all_forms(tag, data, dt); });
      }
    }
  }
}

TEST_F(VulkanReduce, SoftmaxRowsMatchTheCpuOnBothPaths) {
  // rows.comp's max and sum: rows shorter than a subgroup, spanning some and all of
  // the 256 invocations, longer than the workgroup; NaN in one row, -inf in another.
  for (DType dt : dtypes()) {
    if (!is_float(dt)) continue;
    for (std::size_t n : {std::size_t{1}, std::size_t{7}, std::size_t{300}, std::size_t{3001}}) {
      std::vector<double> v(3 * n);
      for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>((i * 5) % 17) / 4.0 - 2.0;
      v[n + n / 2] = std::nan("");
      v[2 * n] = -std::numeric_limits<double>::infinity();
      const TensorData data = TensorData::from(v, Shape{3, n}).convert(dt);
      const std::string tag = std::string(dtype_name(dt)) + " rows of " + std::to_string(n);
      both_paths([&] {
        for (OpCode op : {OpCode::softmax, OpCode::log_softmax})
          check(tag + " " + std::string(d::op_name(op)), [&](DeviceId x) { return d::reduce_dim(op, upload(data, x), 1); },
                sum_tol(dt));
      });
    }
  }
}

TEST_F(VulkanReduce, TheseOpsAreNativeOnVulkan) {
  const d::Backend& b = d::Registry::instance().get(kVulkanDeviceType);
  for (OpCode op : {OpCode::sum, OpCode::sum_dim, OpCode::argmax, OpCode::argmin, OpCode::max, OpCode::min, OpCode::max_abs,
                    OpCode::max_dim, OpCode::min_dim, OpCode::max_abs_dim, OpCode::max_dim_with_indices,
                    OpCode::min_dim_with_indices, OpCode::any, OpCode::all, OpCode::any_dim, OpCode::all_dim})
    EXPECT_TRUE(b.is_native(op)) << d::op_name(op) << " fell back to the default composition";
}

TEST_F(VulkanReduce, SubgroupPathStateFollowsTheDeviceAndTheSwitch) {
  const vk::SubgroupFacts& f = ctx().subgroup_facts();
  const bool disabled = vk::env_flag("TENSOR_VK_DISABLE_SUBGROUP");
  EXPECT_EQ(f.disabled, disabled);
  if (disabled) {
    EXPECT_FALSE(ctx().subgroup_on());
    EXPECT_EQ(ctx().subgroup_size(vk::ShaderFamily::Reduce), 0u);
    EXPECT_EQ(ctx().subgroup_decision(vk::ShaderFamily::Reduce).reason, "disabled by TENSOR_VK_DISABLE_SUBGROUP");
  } else if (d::backend_name(kVk).find("llvmpipe") != std::string::npos) {
    // lavapipe: 8-wide subgroups with arithmetic and size control.
    EXPECT_TRUE(ctx().subgroup_on()) << ctx().subgroup_decision(vk::ShaderFamily::Reduce).reason;
    EXPECT_EQ(ctx().subgroup_size(vk::ShaderFamily::Reduce), 8u);
    EXPECT_EQ(ctx().subgroup_size(vk::ShaderFamily::Rows), 8u);
  }
  EXPECT_EQ(ctx().subgroup_size(vk::ShaderFamily::Elementwise), 0u);  // no subgroup variant
  const bool was = ctx().subgroup_on();
  ctx().set_subgroup(false);
  EXPECT_FALSE(ctx().subgroup_on());
  EXPECT_EQ(ctx().subgroup_size(vk::ShaderFamily::Reduce), 0u);
  ctx().set_subgroup(true);
  EXPECT_EQ(ctx().subgroup_on(), was);
}

TEST(VulkanSubgroupDecision, ChoosesTheLargestSizeThatFitsOrSaysWhyNot) {
  vk::SubgroupFacts f;
  f.size = 32;
  f.compute = f.arithmetic = f.size_control_ext = f.size_control = f.full_subgroups = f.required_compute = true;
  f.min_size = 8;
  f.max_size = 32;
  f.max_workgroup_subgroups = 32;
  EXPECT_EQ(vk::decide_subgroup(f, 64).size, 32u);
  f.max_size = 128;  // wider than the workgroup: the largest that divides it
  EXPECT_EQ(vk::decide_subgroup(f, 64).size, 64u);
  f.min_size = f.max_size = 4;
  EXPECT_EQ(vk::decide_subgroup(f, 64).size, 4u);
  EXPECT_EQ(vk::decide_subgroup(f, 256).size, 0u);  // 64 subgroups of 4 exceed the device's 32
  EXPECT_NE(vk::decide_subgroup(f, 256).reason.find("no subgroup size"), std::string::npos);
  f.min_size = f.max_size = 8;
  f.max_workgroup_subgroups = 4;  // 8 subgroups of 8 exceed the device's limit
  EXPECT_EQ(vk::decide_subgroup(f, 64).size, 0u);
  f.max_workgroup_subgroups = 32;
  EXPECT_EQ(vk::decide_subgroup(f, 64).size, 8u);
  EXPECT_EQ(vk::decide_subgroup(f, 256).size, 8u);
  vk::SubgroupFacts g = f;
  g.arithmetic = false;
  EXPECT_EQ(vk::decide_subgroup(g, 64).reason, "no subgroup arithmetic in compute shaders");
  g = f;
  g.size_control_ext = false;
  EXPECT_EQ(vk::decide_subgroup(g, 64).size, 0u);
  g = f;
  g.full_subgroups = false;
  EXPECT_EQ(vk::decide_subgroup(g, 64).size, 0u);
  g = f;
  g.required_compute = false;
  EXPECT_EQ(vk::decide_subgroup(g, 64).size, 0u);
  g = f;
  g.disabled = true;
  EXPECT_EQ(vk::decide_subgroup(g, 64).reason, "disabled by TENSOR_VK_DISABLE_SUBGROUP");
}

}  // namespace
