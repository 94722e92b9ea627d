// Errors through the public API (SPEC §6): typed exceptions whose messages name
// the op, what was expected and what was received; inputs survive every error.
#include "test_util.hpp"

namespace {

using namespace tt;

Tensor<2> mat(std::vector<float> v, std::size_t r, std::size_t c) {
  return Tensor<2>::from_data(TensorData::from<float>(v, {r, c}), Device::cpu());
}
std::vector<float> values(const Tensor<2>& t) { return t.into_data().to_vec<float>(); }

TEST(Errors, AddShapeMismatchNamesBothShapes) {
  const auto a = mat({1, 2, 3, 4, 5, 6}, 2, 3);
  const auto b = mat({1, 2, 3, 4, 5, 6}, 3, 2);
  EXPECT_THROWS(ShapeError, a + b, "add", "[2, 3]", "[3, 2]");
  EXPECT_THROWS(ShapeError, a.greater(b), "greater", "[2, 3]", "[3, 2]");
  // Inputs unchanged.
  EXPECT_EQ(values(a), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(values(b), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(a.shape(), Shape({2, 3}));
}

TEST(Errors, MatmulInnerDimMismatch) {
  const auto a = mat({1, 2, 3, 4, 5, 6}, 2, 3);
  EXPECT_THROWS(ShapeError, a.matmul(a), "matmul", "[2, 3]");
  const auto b = Tensor<3>::ones({2, 3, 4}, Device::cpu());
  const auto c = Tensor<3>::ones({3, 4, 5}, Device::cpu());
  EXPECT_THROWS(ShapeError, b.matmul(c), "matmul", "[2, 3, 4]", "[3, 4, 5]");
  EXPECT_EQ(values(a), (std::vector<float>{1, 2, 3, 4, 5, 6}));
}

TEST(Errors, FromDataRankMismatch) {
  EXPECT_THROWS(ShapeError, Tensor<2>::from_data(TensorData::from<float>({1, 2, 3}), Device::cpu()), "from_data", "rank",
                "[3]");
  EXPECT_THROWS(ShapeError, Tensor<1>::zeros({2, 2}, Device::cpu()), "zeros", "[2, 2]");
  // Byte count that does not match shape x dtype.
  EXPECT_THROWS(ShapeError, TensorData(std::vector<std::byte>(5), Shape{2}, DType::F32), "8", "5");
}

TEST(Errors, DimOutOfRangeIsIndexErrorAndNegativeDimsCountFromTheEnd) {
  const auto a = mat({1, 2, 3, 4, 5, 6}, 2, 3);
  EXPECT_THROWS(IndexError, a.sum_dim(2), "sum_dim", "2");
  EXPECT_THROWS(IndexError, a.sum_dim(-3), "sum_dim", "-3");
  EXPECT_THROWS(IndexError, a.swap_dims(0, 5), "swap_dims", "5");
  EXPECT_THROWS(IndexError, a.flip({2}), "flip");
  EXPECT_EQ(values(a.sum_dim(-1)), (std::vector<float>{6, 15}));
  EXPECT_EQ(values(a.sum_dim(-2)), (std::vector<float>{5, 7, 9}));
  EXPECT_EQ(a.sum_dim(-2).shape(), Shape({1, 3}));
  EXPECT_EQ(values(a), (std::vector<float>{1, 2, 3, 4, 5, 6}));
}

TEST(Errors, DTypeMismatchBetweenOperands) {
  const auto a = mat({1, 2}, 1, 2);
  const auto b = Tensor<2>::from_data(TensorData::from<double>({1, 2}, {1, 2}), Device::cpu());
  ASSERT_EQ(b.dtype(), DType::F64);
  EXPECT_THROWS(DTypeError, a + b, "add", "f32", "f64");
  EXPECT_THROWS(DTypeError, a.matmul(b.transpose()), "matmul", "f32", "f64");
  EXPECT_EQ(values(a), (std::vector<float>{1, 2}));
  EXPECT_EQ(b.into_data().to_vec<double>(), (std::vector<double>{1, 2}));
}

TEST(Errors, ToVecOfTheWrongElementType) {
  const TensorData d = TensorData::from<std::int32_t>({1, 2, 3});
  EXPECT_THROWS(DTypeError, d.to_vec<float>(), "i32", "f32");
  EXPECT_THROWS(DTypeError, d.to_vec<std::uint32_t>(), "i32", "u32");
  EXPECT_EQ(d.to_vec<std::int32_t>(), (std::vector<std::int32_t>{1, 2, 3}));
}

TEST(Errors, UseOfAMovedFromTensor) {
  auto a = mat({1, 2}, 1, 2);
  auto b = std::move(a);
  EXPECT_THROWS(Error, a.exp(), "empty");          // NOLINT(bugprone-use-after-move)
  EXPECT_THROWS(Error, a.shape(), "empty");        // NOLINT(bugprone-use-after-move)
  EXPECT_THROWS(Error, a.into_data(), "empty");    // NOLINT(bugprone-use-after-move)
  EXPECT_THROWS(Error, b + a, "empty");            // NOLINT(bugprone-use-after-move)
  EXPECT_EQ(values(b), (std::vector<float>{1, 2}));
}

TEST(Errors, SliceOutOfRangeAndStepZero) {
  const auto a = mat({1, 2, 3, 4, 5, 6}, 2, 3);
  EXPECT_THROWS(IndexError, a.slice({Slice::range(4, 5)}), "slice", "4");  // a start past the end (burn raises)
  EXPECT_EQ(a.slice({Slice::range(0, 4)}).shape(), Shape({2, 3}));            // an end past the end clamps
  EXPECT_THROWS(IndexError, a.slice({Slice::all(), Slice::range(0, 3, 0)}), "slice", "step");
  EXPECT_EQ(values(a), (std::vector<float>{1, 2, 3, 4, 5, 6}));
}

TEST(Errors, KindMismatchedDTypeArgument) {
  const auto a = mat({1.5f, -2.5f}, 1, 2);
  EXPECT_THROWS(DTypeError, a.cast(DType::I32), "cast", "i32");
  EXPECT_THROWS(DTypeError, a.int_cast(DType::F16), "into_int", "f16");
  EXPECT_THROWS(DTypeError, Tensor<1>::zeros({2}, Device::cpu(), DType::I32), "zeros", "i32");
}

TEST(Errors, DataFutureConsumedTwice) {
  const auto a = mat({1, 2}, 1, 2);
  DataFuture f = a.into_data_async();
  EXPECT_EQ(f.get().to_vec<float>(), (std::vector<float>{1, 2}));
  EXPECT_THROWS(Error, f.get(), "into_data");
}

// Ownership is permission: an rvalue operand is consumed.
TEST(BufferReuse, MovedUniqueLhsGivesRightValuesAndLeavesItEmpty) {
  auto a = mat({1, 2, 3, 4}, 2, 2);
  const auto b = mat({10, 20, 30, 40}, 2, 2);
  const auto c = std::move(a) + b;
  EXPECT_TRUE(a.handle().empty());  // NOLINT(bugprone-use-after-move)
  EXPECT_EQ(values(c), (std::vector<float>{11, 22, 33, 44}));
  EXPECT_EQ(values(b), (std::vector<float>{10, 20, 30, 40}));
}

TEST(BufferReuse, SharedLhsIsNotWrittenThrough) {
  auto a = mat({1, 2, 3, 4}, 2, 2);
  auto alias = a;  // a second reference: the buffer is not unique
  const auto c = std::move(alias) + a;
  EXPECT_EQ(values(c), (std::vector<float>{2, 4, 6, 8}));
  EXPECT_EQ(values(a), (std::vector<float>{1, 2, 3, 4}));
  const auto v = a.transpose();  // a view shares the buffer
  const auto d = std::move(a).exp();
  EXPECT_EQ(values(v), (std::vector<float>{1, 3, 2, 4}));
  EXPECT_NEAR(values(d)[3], std::exp(4.0), 1e-4);
}

}  // namespace
