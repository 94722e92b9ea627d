// CPU views: the layout table of issue 2 (shape, strides, offset, contiguity and
// buffer identity after each view op), plus values read through views.
#include <numeric>

#include "cpu_test_util.hpp"

namespace tensor::cpu::test {
namespace {

struct Row {
  std::vector<std::size_t> shape;
  std::vector<std::int64_t> strides;
  std::int64_t offset;
  bool contiguous;
  bool same_buffer;
};

void expect_layout(const Prim& p, const Storage* original, const Row& want, const char* what) {
  SCOPED_TRACE(what);
  const CpuTensor& t = cpu_of(p);
  EXPECT_EQ(t.shape(), Shape(want.shape));
  EXPECT_EQ(std::vector<std::int64_t>(t.strides().begin(), t.strides().end()), want.strides);
  EXPECT_EQ(t.offset(), want.offset);
  EXPECT_EQ(t.is_contiguous(), want.contiguous);
  EXPECT_EQ(t.storage() == original, want.same_buffer);
}

Prim iota_3x4() {
  std::vector<float> v(12);
  std::iota(v.begin(), v.end(), 0.0f);
  return from_vec(v, Shape{3, 4});
}

TEST(CpuLayout, SeedTableHolds) {
  const Prim a = iota_3x4();
  const Storage* buf = cpu_of(a).storage();
  expect_layout(a, buf, {{3, 4}, {4, 1}, 0, true, true}, "original");

  const Prim t = swap_dims(a, 0, 1);
  expect_layout(t, buf, {{4, 3}, {1, 4}, 0, false, true}, "swap_dims(0,1)");
  EXPECT_EQ(to_f32(t), (std::vector<float>{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11}));

  const Prim s = slice(a, {{1, 1, 2}, {0, 2, 2}});
  expect_layout(s, buf, {{2, 2}, {4, 2}, 4, false, true}, "slice rows 1..3, cols step 2");
  EXPECT_EQ(to_f32(s), (std::vector<float>{4, 6, 8, 10}));

  const Prim f = flip(a, {1});
  expect_layout(f, buf, {{3, 4}, {4, -1}, 3, false, true}, "flip(1)");
  EXPECT_EQ(to_f32(f), (std::vector<float>{3, 2, 1, 0, 7, 6, 5, 4, 11, 10, 9, 8}));

  const Prim row0 = slice(a, {{0, 1, 1}, {0, 1, 4}});
  const Prim e = expand(row0, Shape{3, 4});
  expect_layout(e, buf, {{3, 4}, {0, 1}, 0, false, true}, "expand row 0");
  EXPECT_EQ(to_f32(e), (std::vector<float>{0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3}));

  const Prim r = reshape(a, Shape{4, 3});
  expect_layout(r, buf, {{4, 3}, {3, 1}, 0, true, true}, "reshape [4,3]");

  const Prim rt = reshape(t, Shape{12});
  expect_layout(rt, buf, {{12}, {1}, 0, true, false}, "reshape of transposed to [12]");
  EXPECT_EQ(to_f32(rt), (std::vector<float>{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11}));
  // The source is untouched by all of the above.
  EXPECT_EQ(to_f32(a), (std::vector<float>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}));
}

TEST(CpuLayout, UniqueViewRewritesThePrimitiveInPlace) {
  Prim a = iota_3x4();
  const auto* prim = a.get();
  Prim t = swap_dims(std::move(a), 0, 1);
  EXPECT_EQ(t.get(), prim);
}

TEST(CpuLayout, NegativeStepSliceAndPermute) {
  // [[0,1,2],[3,4,5]] sliced with step -1 on dim 1 -> [[2,1,0],[5,4,3]]
  const Prim a = from_vec(std::vector<float>{0, 1, 2, 3, 4, 5}, Shape{2, 3});
  const Prim r = slice(a, {{0, 1, 2}, {2, -1, 3}});
  EXPECT_EQ(to_f32(r), (std::vector<float>{2, 1, 0, 5, 4, 3}));
  EXPECT_EQ(cpu_of(r).stride(1), -1);
  // Every other element backwards: indices 2, 0.
  const Prim r2 = slice(a, {{1, 1, 1}, {2, -2, 2}});
  EXPECT_EQ(to_f32(r2), (std::vector<float>{5, 3}));

  std::vector<float> v(24);
  std::iota(v.begin(), v.end(), 0.0f);
  const Prim b = from_vec(v, Shape{2, 3, 4});
  const std::vector<std::size_t> axes{2, 0, 1};
  const Prim p = entry<Family::Axes>(OpCode::permute)(b, axes);
  EXPECT_EQ(cpu_of(p).shape(), (Shape{4, 2, 3}));
  const auto got = to_f32(p);
  for (std::size_t i = 0; i < 4; ++i)
    for (std::size_t j = 0; j < 2; ++j)
      for (std::size_t k = 0; k < 3; ++k) EXPECT_EQ(got[i * 6 + j * 3 + k], v[j * 12 + k * 4 + i]);
  EXPECT_EQ(cpu_of(p).storage(), cpu_of(b).storage());
}

TEST(CpuLayout, EmptySliceAndExpandNewDims) {
  const Prim a = iota_3x4();
  const Prim e = slice(a, {{2, 1, 0}, {0, 1, 4}});
  EXPECT_EQ(cpu_of(e).shape(), (Shape{0, 4}));
  EXPECT_TRUE(to_f32(e).empty());

  const Prim row = from_vec(std::vector<float>{1, 2}, Shape{2});
  const Prim x = expand(row, Shape{2, 3, 2});
  EXPECT_EQ(std::vector<std::int64_t>(cpu_of(x).strides().begin(), cpu_of(x).strides().end()),
            (std::vector<std::int64_t>{0, 0, 1}));
  EXPECT_EQ(to_f32(x), (std::vector<float>{1, 2, 1, 2, 1, 2, 1, 2, 1, 2, 1, 2}));
}

TEST(CpuLayout, UnfoldIsAView) {
  const Prim a = from_vec(std::vector<float>{0, 1, 2, 3, 4, 5, 6}, Shape{7});
  const Prim u = entry<Family::Unfold>(OpCode::unfold)(a, 0, 3, 2);  // windows at 0, 2, 4
  EXPECT_EQ(cpu_of(u).shape(), (Shape{3, 3}));
  EXPECT_EQ(cpu_of(u).storage(), cpu_of(a).storage());
  EXPECT_EQ(to_f32(u), (std::vector<float>{0, 1, 2, 2, 3, 4, 4, 5, 6}));

  // Along dim 0 of a [4, 2] matrix: shape [2 windows, 2, size 3].
  const Prim m = from_vec(std::vector<float>{0, 1, 2, 3, 4, 5, 6, 7}, Shape{4, 2});
  const Prim w = entry<Family::Unfold>(OpCode::unfold)(m, 0, 3, 1);
  EXPECT_EQ(cpu_of(w).shape(), (Shape{2, 2, 3}));
  EXPECT_EQ(to_f32(w), (std::vector<float>{0, 2, 4, 1, 3, 5, 2, 4, 6, 3, 5, 7}));
}

TEST(CpuLayout, ToContiguousCopiesAnyLayout) {
  std::vector<std::int16_t> v(2 * 3 * 5);
  std::iota(v.begin(), v.end(), std::int16_t{0});
  const Prim a = from_vec(v, Shape{2, 3, 5});
  const std::vector<std::size_t> axes{1, 2, 0};
  const Prim p = flip(entry<Family::Axes>(OpCode::permute)(a, axes), {1});  // [3, 5, 2]
  CpuRef c = to_contiguous(as_cpu(Prim(p)));
  EXPECT_TRUE(c->is_dense_from_zero());
  const auto got = to_vec<std::int16_t>(Prim(c));
  for (std::size_t i = 0; i < 3; ++i)
    for (std::size_t j = 0; j < 5; ++j)
      for (std::size_t k = 0; k < 2; ++k) EXPECT_EQ(got[i * 10 + j * 2 + k], v[k * 15 + i * 5 + (4 - j)]);
}

TEST(CpuLayout, BlockedTransposeCopyEveryElementSize) {
  // Large enough for the blocked path, with ragged edges and a batch dim.
  const std::size_t b = 3, r = 37, c = 45;
  auto check = [&](auto tag) {
    using T = decltype(tag);
    std::vector<T> v(b * r * c);
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<T>(i % 251);
    const Prim a = from_vec(v, Shape{b, r, c});
    const CpuRef t = to_contiguous(as_cpu(swap_dims(a, 1, 2)));  // [b, c, r]
    ASSERT_TRUE(t->is_dense_from_zero());
    const auto got = to_vec<T>(Prim(t));
    for (std::size_t k = 0; k < b; ++k)
      for (std::size_t j = 0; j < c; ++j)
        for (std::size_t i = 0; i < r; ++i) ASSERT_EQ(got[(k * c + j) * r + i], v[(k * r + i) * c + j]);
    // Batch dim moved inward too: [c, b, r].
    const std::vector<std::size_t> axes{2, 0, 1};
    const CpuRef p = to_contiguous(as_cpu(entry<Family::Axes>(OpCode::permute)(a, axes)));
    const auto gp = to_vec<T>(Prim(p));
    for (std::size_t j = 0; j < c; ++j)
      for (std::size_t k = 0; k < b; ++k)
        for (std::size_t i = 0; i < r; ++i) ASSERT_EQ(gp[(j * b + k) * r + i], v[(k * r + i) * c + j]);
  };
  check(std::uint8_t{});
  check(std::int16_t{});
  check(float{});
  check(double{});
}

TEST(CpuLayout, SliceAssignWritesInPlaceOrCopies) {
  const auto assign = entry<Family::SliceAssign>(OpCode::slice_assign);
  Prim a = from_vec(std::vector<float>{0, 0, 0, 0, 0, 0}, Shape{6});
  const Storage* buf = cpu_of(a).storage();
  const Prim v = from_vec(std::vector<float>{60, 50, 40, 30, 20, 10}, Shape{6});
  const std::vector<dispatch::DimSlice> rev{{5, -1, 6}};
  Prim r = assign(std::move(a), rev, v);
  EXPECT_EQ(cpu_of(r).storage(), buf);
  EXPECT_EQ(to_f32(r), (std::vector<float>{10, 20, 30, 40, 50, 60}));

  const Prim held = from_vec(std::vector<float>{1, 2, 3, 4}, Shape{2, 2});
  const std::vector<dispatch::DimSlice> s{{1, 1, 1}, {0, 1, 2}};
  const Prim r2 = assign(held, s, from_vec(std::vector<float>{7, 8}, Shape{1, 2}));
  EXPECT_NE(cpu_of(r2).storage(), cpu_of(held).storage());
  EXPECT_EQ(to_f32(r2), (std::vector<float>{1, 2, 7, 8}));
  EXPECT_EQ(to_f32(held), (std::vector<float>{1, 2, 3, 4}));
}

}  // namespace
}  // namespace tensor::cpu::test
