// Lines longer than one shader invocation may walk. lavapipe (Mesa's llvmpipe compiler)
// ends any one invocation's loops after 65535 iterations in all and the result is
// silently short, so the backend splits such work (line reductions of many long lines
// go to the column path, scatter/select_assign walk their indices in chunks) or, for
// scans and softmax rows it cannot split, raises ExecutionError on software devices.
// Expected values are worked out in closed form here, not by another backend.
#include <gtest/gtest.h>

#include <tensor/tensor.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "backends/vulkan/runtime/context.hpp"
#include "tests/vulkan/vk_test_util.hpp"

namespace {

using namespace tensor;

class VulkanLongLines : public vk_test::VulkanTest {
 protected:
  void SetUp() override {
    vk_test::VulkanTest::SetUp();
    if (IsSkipped()) return;
    dev_ = Device(vk_test::kVk);
    software_ = tensor::vulkan::context(0)->software();
  }
  Device dev_;
  bool software_ = false;
};

// v[r][j] = (j + r) % 3: row sums, maxima and first argmax are known in closed form.
std::vector<float> rows_pattern(std::size_t rows, std::size_t n) {
  std::vector<float> v(rows * n);
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t j = 0; j < n; ++j) v[r * n + j] = static_cast<float>((j + r) % 3);
  return v;
}

std::uint64_t row_sum(std::size_t r, std::size_t n) {
  std::uint64_t s = 0;
  for (std::size_t j = 0; j < n; ++j) s += (j + r) % 3;
  return s;
}

TEST_F(VulkanLongLines, ReductionsOfSeveralLinesLongerThanTheLoopLimit) {
  const std::size_t rows = 2, n = 4'500'001;  // the line path's n / 64 per invocation: past 65535
  auto t = Tensor<2>::from_data(TensorData::from<float>(rows_pattern(rows, n), {rows, n}), dev_);
  const auto sums = t.sum_dim(1).into_data().to_vec<float>();
  const auto maxs = t.max_dim(1).into_data().to_vec<float>();
  const auto args = t.argmax(1).into_data().to_vec<std::int32_t>();
  ASSERT_EQ(sums.size(), rows);
  for (std::size_t r = 0; r < rows; ++r) {
    EXPECT_EQ(static_cast<std::uint64_t>(sums[r]), row_sum(r, n)) << "row " << r;  // < 2^24: exact in f32
    EXPECT_EQ(maxs[r], 2.0f) << "row " << r;
    EXPECT_EQ(args[r], static_cast<std::int32_t>((2 + 3 - r % 3) % 3)) << "row " << r;  // first j with (j + r) % 3 == 2
  }
  // The last element alone changes the answer: nothing past the limit may be dropped.
  std::vector<float> v(rows * n, 0.0f);
  v[n - 1] = 5.0f;
  v[2 * n - 1] = -1.0f;
  auto u = Tensor<2>::from_data(TensorData::from<float>(v, {rows, n}), dev_);
  const auto umax = u.max_dim(1).into_data().to_vec<float>();
  const auto umin = u.min_dim(1).into_data().to_vec<float>();
  EXPECT_EQ(umax[0], 5.0f);
  EXPECT_EQ(umin[1], -1.0f);
}

TEST_F(VulkanLongLines, IntegerMeanOfLongLinesIsExactOrATypedErrorOnSoftwareDevices) {
  const std::size_t rows = 2, n = 2'200'000;
  std::vector<std::int32_t> v(rows * n);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<std::int32_t>(i % 7);
  auto t = Tensor<2, Int>::from_data(TensorData::from<std::int32_t>(v, {rows, n}), dev_);
  if (software_) {
    try {
      (void)t.mean_dim(1).into_data();
      ADD_FAILURE() << "expected ExecutionError";
    } catch (const ExecutionError& e) {
      EXPECT_NE(std::string(e.what()).find("software Vulkan device"), std::string::npos) << e.what();
    }
    return;
  }
  const auto m = t.mean_dim(1).into_data().to_vec<std::int32_t>();
  for (std::size_t r = 0; r < rows; ++r) {
    std::int64_t s = 0;
    for (std::size_t j = 0; j < n; ++j) s += static_cast<std::int64_t>((r * n + j) % 7);
    EXPECT_EQ(m[r], static_cast<std::int32_t>(s / static_cast<std::int64_t>(n))) << "row " << r;
  }
}

TEST_F(VulkanLongLines, ScatterAndSelectAssignWithMoreIndicesPerLineThanTheLoopLimit) {
  const std::size_t rows = 2, k = 70'001;
  std::vector<std::int32_t> idx(rows * k), sel(k);
  std::vector<float> vals(rows * k);
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t j = 0; j < k; ++j) {
      idx[r * k + j] = static_cast<std::int32_t>(j % 4);
      vals[r * k + j] = static_cast<float>(j % 5);
    }
  for (std::size_t j = 0; j < k; ++j) sel[j] = static_cast<std::int32_t>(j % 4);
  auto i = Tensor<2, Int>::from_data(TensorData::from<std::int32_t>(idx, {rows, k}), dev_);
  auto v = Tensor<2>::from_data(TensorData::from<float>(vals, {rows, k}), dev_);
  // Add: column c receives every j with j % 4 == c; Assign: the last such j wins.
  const auto added = Tensor<2>::zeros({rows, 4}, dev_).scatter(1, i, v).into_data().to_vec<float>();
  const auto assigned =
      Tensor<2>::zeros({rows, 4}, dev_).scatter(1, i, v, IndexingUpdateOp::Assign).into_data().to_vec<float>();
  auto s = Tensor<1, Int>::from_data(TensorData::from<std::int32_t>(sel, {k}), dev_);
  const auto sel_added = Tensor<2>::zeros({rows, 4}, dev_).select_assign(1, s, v).into_data().to_vec<float>();
  for (std::size_t c = 0; c < 4; ++c) {
    double sum = 0;
    std::size_t last = 0;
    for (std::size_t j = c; j < k; j += 4) {
      sum += static_cast<double>(j % 5);
      last = j;
    }
    for (std::size_t r = 0; r < rows; ++r) {
      EXPECT_EQ(added[r * 4 + c], static_cast<float>(sum)) << "scatter add, row " << r << " col " << c;
      EXPECT_EQ(assigned[r * 4 + c], static_cast<float>(last % 5)) << "scatter assign, row " << r << " col " << c;
      EXPECT_EQ(sel_added[r * 4 + c], static_cast<float>(sum)) << "select_assign, row " << r << " col " << c;
    }
  }
}

TEST_F(VulkanLongLines, LongScansAndSoftmaxRowsAreExactOrATypedErrorOnSoftwareDevices) {
  // Up to 32768 elements a scan runs everywhere.
  const std::size_t ok = 32'768;
  auto a = Tensor<2, Int>::ones({2, ok}, dev_);
  const auto cs = a.cumsum(1).into_data().to_vec<std::int32_t>();
  EXPECT_EQ(cs[ok - 1], static_cast<std::int32_t>(ok));
  EXPECT_EQ(cs[2 * ok - 1], static_cast<std::int32_t>(ok));

  const std::size_t n = 70'000;
  auto b = Tensor<2, Int>::ones({2, n}, dev_);
  auto f = Tensor<2>::ones({1, 4'194'305}, dev_);
  if (software_) {
    EXPECT_THROW((void)b.cumsum(1).into_data(), ExecutionError);
    EXPECT_THROW((void)activation::softmax(f, 1).into_data(), ExecutionError);
    // The inputs are untouched and still usable.
    EXPECT_EQ(b.sum().into_data().to_vec<std::int32_t>()[0], static_cast<std::int32_t>(2 * n));
    return;
  }
  const auto bs = b.cumsum(1).into_data().to_vec<std::int32_t>();
  EXPECT_EQ(bs[n - 1], static_cast<std::int32_t>(n));
  EXPECT_EQ(bs[2 * n - 1], static_cast<std::int32_t>(n));
  const auto sm = activation::softmax(f, 1).into_data().to_vec<float>();
  EXPECT_FLOAT_EQ(sm.back(), 1.0f / 4'194'305.0f);
}

}  // namespace
