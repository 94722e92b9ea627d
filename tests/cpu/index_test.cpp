// CPU indexing, sort, extrema, mean and softmax kernels called below dispatch:
// buffer reuse (scatter / select_assign write into a uniquely held contiguous
// input, never into a shared or strided one), out-of-range indices raising before
// any write, every index dtype, long lanes against std::stable_sort, exact wide
// means and softmax along a strided dim.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>

#include "cpu_test_util.hpp"
#include "tensor/error.hpp"

namespace tensor::cpu::test {
namespace {

std::vector<double> as_f64(const Prim& p) {
  return entry<Family::IntoData>(OpCode::into_data)(p).get().convert(DType::F64).to_vec<double>();
}
Prim typed(const std::vector<double>& v, const Shape& s, DType dt) {
  return entry<Family::FromData>(OpCode::from_data)(TensorData::from(v, s).convert(dt), kCpuDevice);
}
const std::byte* buffer(const Prim& p) { return cpu_of(p).storage()->data(); }

constexpr DType kIndexDtypes[] = {DType::I64, DType::I32, DType::I16, DType::I8,
                                  DType::U64, DType::U32, DType::U16, DType::U8};

TEST(CpuIndex, GatherAndSelectAcceptEveryIndexDtype) {
  const Prim a = typed({10, 11, 12, 20, 21, 22}, Shape{2, 3}, DType::F32);
  for (DType it : kIndexDtypes) {
    SCOPED_TRACE(std::string(dtype_name(it)));
    const Prim g = entry<Family::Gather>(OpCode::gather)(a, 1, typed({2, 2, 0, 1, 0, 1}, Shape{2, 3}, it));
    EXPECT_EQ(as_f64(g), (std::vector<double>{12, 12, 10, 21, 20, 21}));
    const Prim s = entry<Family::Select>(OpCode::select)(a, 0, typed({1, 1, 0}, Shape{3}, it));
    EXPECT_EQ(as_f64(s), (std::vector<double>{20, 21, 22, 20, 21, 22, 10, 11, 12}));
  }
}

TEST(CpuIndex, ScatterWritesIntoAUniqueContiguousInput) {
  Prim a = typed({1, 2, 3, 4}, Shape{2, 2}, DType::F32);
  const std::byte* before = buffer(a);
  const Prim out = entry<Family::ScatterUpdate>(OpCode::scatter)(std::move(a), 1, typed({1, 1, 0, 0}, Shape{2, 2}, DType::I32),
                                                                 typed({5, 6, 7, 8}, Shape{2, 2}, DType::F32),
                                                                 IndexingUpdateOp::Assign);
  EXPECT_EQ(buffer(out), before);
  EXPECT_EQ(as_f64(out), (std::vector<double>{1, 6, 8, 4}));  // duplicates: the last one along the dim wins
}

TEST(CpuIndex, ScatterIntoASharedOrStridedInputCopies) {
  const Prim a = typed({1, 2, 3, 4}, Shape{2, 2}, DType::I64);
  const Prim out = entry<Family::Scatter>(OpCode::scatter_add)(a, 0, typed({1, 0}, Shape{1, 2}, DType::U8),
                                                               typed({10, 20}, Shape{1, 2}, DType::I64));
  EXPECT_NE(buffer(out), buffer(a));
  EXPECT_EQ(as_f64(out), (std::vector<double>{1, 22, 13, 4}));
  EXPECT_EQ(as_f64(a), (std::vector<double>{1, 2, 3, 4}));
  // A uniquely held transposed view is not written through.
  Prim t = swap_dims(typed({1, 2, 3, 4}, Shape{2, 2}, DType::I64), 0, 1);  // [[1,3],[2,4]]
  const Prim ot = entry<Family::SelectUpdate>(OpCode::select_assign)(std::move(t), 1, typed({0}, Shape{1}, DType::I8),
                                                                     typed({7, 8}, Shape{2, 1}, DType::I64),
                                                                     IndexingUpdateOp::Max);
  EXPECT_EQ(as_f64(ot), (std::vector<double>{7, 3, 8, 4}));
}

TEST(CpuIndex, OutOfRangeRaisesBeforeWriting) {
  const Prim a = typed({1, 2, 3, 4}, Shape{2, 2}, DType::F32);
  const Prim shared = a;  // observes the buffer
  Prim unique_view = a;
  try {
    (void)entry<Family::ScatterUpdate>(OpCode::scatter)(std::move(unique_view), 1,
                                                        typed({0, 1, 1, 2}, Shape{2, 2}, DType::I16),
                                                        typed({9, 9, 9, 9}, Shape{2, 2}, DType::F32), IndexingUpdateOp::Add);
    ADD_FAILURE() << "no IndexError";
  } catch (const IndexError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("[scatter]"), std::string::npos) << m;
    EXPECT_NE(m.find("got 2"), std::string::npos) << m;
    EXPECT_NE(m.find("< 2"), std::string::npos) << m;
  }
  EXPECT_EQ(as_f64(shared), (std::vector<double>{1, 2, 3, 4}));
  EXPECT_THROW((void)entry<Family::Select>(OpCode::select)(a, 0, typed({0, -1}, Shape{2}, DType::I64)), IndexError);
  EXPECT_THROW((void)entry<Family::Gather>(OpCode::gather)(a, 0, typed({0, 1, 2, 0}, Shape{2, 2}, DType::U32)), IndexError);
  EXPECT_THROW((void)entry<Family::SelectAssign>(OpCode::select_add)(a, 1, typed({5}, Shape{1}, DType::U64),
                                                                     typed({1, 1}, Shape{2, 1}, DType::F32)),
               IndexError);
  EXPECT_EQ(as_f64(a), (std::vector<double>{1, 2, 3, 4}));
}

TEST(CpuIndex, UpdateRulesOnIntsWrapAndFloatsKeepNaN) {
  const Prim a = typed({100, -128}, Shape{2}, DType::I8);
  const Prim i = typed({0, 0, 1}, Shape{3}, DType::I32);
  const Prim v = typed({100, 1, -1}, Shape{3}, DType::I8);
  auto sel = [&](IndexingUpdateOp op) { return as_f64(entry<Family::SelectUpdate>(OpCode::select_assign)(a, 0, i, v, op)); };
  EXPECT_EQ(sel(IndexingUpdateOp::Add), (std::vector<double>{-55, 127}));  // 100 + 100 + 1 wraps; -128 - 1 wraps
  EXPECT_EQ(sel(IndexingUpdateOp::Mul), (std::vector<double>{16, -128}));  // 100 * 100 = 10000 -> 16
  EXPECT_EQ(sel(IndexingUpdateOp::Min), (std::vector<double>{1, -128}));
  EXPECT_EQ(sel(IndexingUpdateOp::Max), (std::vector<double>{100, -1}));
  EXPECT_EQ(sel(IndexingUpdateOp::Assign), (std::vector<double>{1, -1}));
  const Prim f = typed({1, NAN}, Shape{2}, DType::F32);
  const auto m = as_f64(entry<Family::SelectUpdate>(OpCode::select_assign)(
      f, 0, typed({0, 1}, Shape{2}, DType::I64), typed({NAN, 5}, Shape{2}, DType::F32), IndexingUpdateOp::Max));
  EXPECT_TRUE(std::isnan(m[0]));
  EXPECT_TRUE(std::isnan(m[1]));
}

TEST(CpuIndex, CrossBroadcastsAndHandlesHalves) {
  for (DType dt : {DType::F64, DType::F32, DType::F16, DType::BF16}) {
    SCOPED_TRACE(std::string(dtype_name(dt)));
    const Prim a = typed({1, 0, 0}, Shape{1, 3}, dt);
    const Prim b = typed({0, 1, 0, 0, 0, 1}, Shape{2, 3}, dt);
    EXPECT_EQ(as_f64(entry<Family::Cross>(OpCode::cross)(a, b, 1)), (std::vector<double>{0, 0, 1, 0, -1, 0}));
  }
  EXPECT_THROW((void)entry<Family::Cross>(OpCode::cross)(typed({1, 2, 3}, Shape{3}, DType::I32),
                                                         typed({1, 2, 3}, Shape{3}, DType::I32), 0),
               DTypeError);
}

TEST(CpuIndex, CatAndRepeatOfStridedParts) {
  const Prim a = swap_dims(typed({1, 2, 3, 4, 5, 6}, Shape{2, 3}, DType::U16), 0, 1);  // [[1,4],[2,5],[3,6]]
  const Prim b = flip(typed({7, 8}, Shape{1, 2}, DType::U16), {1});                    // [[8,7]]
  EXPECT_EQ(as_f64(entry<Family::Cat>(OpCode::cat)({a, b}, 0)), (std::vector<double>{1, 4, 2, 5, 3, 6, 8, 7}));
  EXPECT_EQ(as_f64(entry<Family::RepeatDim>(OpCode::repeat_dim)(a, 1, 2)),
            (std::vector<double>{1, 4, 1, 4, 2, 5, 2, 5, 3, 6, 3, 6}));
  EXPECT_EQ(cpu_of(entry<Family::RepeatDim>(OpCode::repeat_dim)(a, 0, 0)).shape(), (Shape{0, 2}));
}

// Long lanes (partial sort and full sort) match std::stable_sort with the NaN rule.
TEST(CpuSort, LongLanesMatchStableSort) {
  std::mt19937 rng(7);
  const std::size_t rows = 3, n = 1000;
  std::vector<double> v(rows * n);
  for (auto& x : v) x = std::round(std::uniform_real_distribution<double>(-50, 50)(rng));  // many ties
  v[5] = NAN;
  v[1500] = NAN;
  const Prim a = typed(v, Shape{rows, n}, DType::F32);
  for (bool desc : {false, true})
    for (std::size_t k : {std::size_t{1}, std::size_t{17}, n}) {
      SCOPED_TRACE("desc=" + std::to_string(desc) + " k=" + std::to_string(k));
      auto [vals, idx] = k == n ? entry<Family::SortWithIndices>(OpCode::sort_with_indices)(a, 1, desc, DType::I64)
                                : entry<Family::TopKWithIndices>(OpCode::topk_with_indices)(a, 1, k, DType::I64);
      if (!desc && k != n) continue;  // top-k is descending
      const auto got_v = as_f64(vals), got_i = as_f64(idx);
      for (std::size_t r = 0; r < rows; ++r) {
        std::vector<std::size_t> p(n);
        std::iota(p.begin(), p.end(), std::size_t{0});
        std::stable_sort(p.begin(), p.end(), [&](std::size_t i, std::size_t j) {
          const double x = v[r * n + i], y = v[r * n + j];
          if (std::isnan(x) || std::isnan(y)) return desc ? std::isnan(x) && !std::isnan(y) : !std::isnan(x) && std::isnan(y);
          return desc ? y < x : x < y;
        });
        for (std::size_t q = 0; q < k; ++q) {
          ASSERT_EQ(got_i[r * k + q], static_cast<double>(p[q])) << "row " << r << " position " << q;
          const double want = v[r * n + p[q]];
          ASSERT_TRUE(std::isnan(want) ? std::isnan(got_v[r * k + q]) : got_v[r * k + q] == want);
        }
      }
    }
}

TEST(CpuReduceExtra, MeanIsExactInWideAccumulators) {
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  const Prim i = entry<Family::FromData>(OpCode::from_data)(TensorData::from<std::int64_t>({kMax, kMax, kMax - 2}, Shape{3}),
                                                            kCpuDevice);
  EXPECT_EQ(to_vec<std::int64_t>(entry<Family::Reduce>(OpCode::mean)(i)), std::vector<std::int64_t>{kMax - 1});
  const Prim u = entry<Family::FromData>(OpCode::from_data)(
      TensorData::from<std::uint64_t>({~std::uint64_t{0}, ~std::uint64_t{0} - 4}, Shape{2}), kCpuDevice);
  EXPECT_EQ(to_vec<std::uint64_t>(entry<Family::Reduce>(OpCode::mean)(u)), std::vector<std::uint64_t>{~std::uint64_t{0} - 2});
  // Compensated f64: 1e16 + 1 + 1 - 1e16 loses the ones in a plain double sum.
  const Prim f = typed({1e16, 1, 1, -1e16}, Shape{4}, DType::F64);
  EXPECT_EQ(as_f64(entry<Family::Reduce>(OpCode::mean)(f)), std::vector<double>{0.5});
  const Prim n = typed({1, INFINITY, 2}, Shape{3}, DType::F32);
  EXPECT_EQ(as_f64(entry<Family::Reduce>(OpCode::mean)(n)), std::vector<double>{INFINITY});
}

TEST(CpuReduceExtra, ExtremaAlongAStridedDimAndMaxAbs) {
  // [[1, -7], [5, 5], [-9, 2]] stored transposed: lanes along dim 0 are strided.
  const Prim a = swap_dims(typed({1, 5, -9, -7, 5, 2}, Shape{2, 3}, DType::I16), 0, 1);
  EXPECT_EQ(as_f64(entry<Family::Dim>(OpCode::max_dim)(a, 0)), (std::vector<double>{5, 5}));
  EXPECT_EQ(as_f64(entry<Family::Dim>(OpCode::min_dim)(a, 0)), (std::vector<double>{-9, -7}));
  EXPECT_EQ(as_f64(entry<Family::Dim>(OpCode::max_abs_dim)(a, 0)), (std::vector<double>{9, 7}));
  EXPECT_EQ(as_f64(entry<Family::DimIndex>(OpCode::argmax)(a, 0, DType::I64)), (std::vector<double>{1, 1}));
  EXPECT_EQ(as_f64(entry<Family::Reduce>(OpCode::max_abs)(a)), (std::vector<double>{9}));
  EXPECT_EQ(as_f64(entry<Family::Reduce>(OpCode::min)(a)), (std::vector<double>{-9}));
}

TEST(CpuActivation, SoftmaxAlongAStridedDimSumsToOne) {
  std::mt19937 rng(3);
  std::vector<double> v(7 * 300);
  for (auto& x : v) x = std::uniform_real_distribution<double>(-30, 30)(rng);
  const Prim a = swap_dims(typed(v, Shape{7, 300}, DType::F32), 0, 1);  // [300, 7], softmax over the 300
  const auto s = as_f64(entry<Family::Dim>(OpCode::softmax)(a, 0));
  const auto l = as_f64(entry<Family::Dim>(OpCode::log_softmax)(a, 0));
  for (std::size_t c = 0; c < 7; ++c) {
    double sum = 0;
    for (std::size_t r = 0; r < 300; ++r) {
      sum += s[r * 7 + c];
      EXPECT_NEAR(std::exp(l[r * 7 + c]), s[r * 7 + c], 1e-6);
    }
    EXPECT_NEAR(sum, 1.0, 1e-5) << "column " << c;
  }
  // softmin(x) == softmax(-x)
  const auto m = as_f64(entry<Family::Dim>(OpCode::softmin)(typed({1, 2, 3}, Shape{3}, DType::F64), 0));
  const double z = std::exp(-1.0) + std::exp(-2.0) + std::exp(-3.0);
  EXPECT_NEAR(m[0], std::exp(-1.0) / z, 1e-15);
  EXPECT_NEAR(m[2], std::exp(-3.0) / z, 1e-15);
}

}  // namespace
}  // namespace tensor::cpu::test
