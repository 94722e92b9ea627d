// CPU reductions: sum/prod of all elements and along a dim (every numeric dtype,
// strided inputs, empty axes) and mean_dim's float/int rules.
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>

#include "cpu_test_util.hpp"

namespace tensor::cpu::test {
namespace {

Prim reduce(OpCode op, Prim p) { return entry<Family::Reduce>(op)(std::move(p)); }
Prim reduce_dim(OpCode op, Prim p, std::size_t dim) { return entry<Family::Dim>(op)(std::move(p), dim); }

std::vector<double> as_f64(const Prim& p) {
  return entry<Family::IntoData>(OpCode::into_data)(p).get().convert(DType::F64).to_vec<double>();
}

constexpr DType kNumeric[] = {DType::F64, DType::F32, DType::F16, DType::BF16, DType::I64, DType::I32,
                              DType::I16, DType::I8,  DType::U64, DType::U32, DType::U16,  DType::U8};

Prim typed(const std::vector<double>& v, const Shape& s, DType dt) {
  return entry<Family::FromData>(OpCode::from_data)(TensorData::from(v, s).convert(dt), kCpuDevice);
}

TEST(CpuReduce, SumAndProdEveryDtypeAndLayout) {
  // [[1,2,3],[4,5,6]] as given, transposed, and flipped.
  const std::vector<double> v{1, 2, 3, 4, 5, 6};
  for (DType dt : kNumeric) {
    SCOPED_TRACE(std::string(dtype_name(dt)));
    const Prim a = typed(v, Shape{2, 3}, dt);
    EXPECT_EQ(cpu_of(reduce(OpCode::sum, a)).shape(), (Shape{1}));
    EXPECT_EQ(as_f64(reduce(OpCode::sum, a)), (std::vector<double>{21}));
    // 720 wraps in the 8-bit types.
    const double p720 = dt == DType::I8 ? -48 : dt == DType::U8 ? 208 : 720;
    EXPECT_EQ(as_f64(reduce(OpCode::prod, a)), (std::vector<double>{p720}));
    EXPECT_EQ(as_f64(reduce(OpCode::sum, swap_dims(a, 0, 1))), (std::vector<double>{21}));
    EXPECT_EQ(as_f64(reduce_dim(OpCode::sum_dim, a, 0)), (std::vector<double>{5, 7, 9}));
    EXPECT_EQ(as_f64(reduce_dim(OpCode::sum_dim, a, 1)), (std::vector<double>{6, 15}));
    EXPECT_EQ(cpu_of(reduce_dim(OpCode::sum_dim, a, 1)).shape(), (Shape{2, 1}));
    EXPECT_EQ(as_f64(reduce_dim(OpCode::prod_dim, a, 0)), (std::vector<double>{4, 10, 18}));
    const Prim t = swap_dims(a, 0, 1);  // [[1,4],[2,5],[3,6]]
    EXPECT_EQ(as_f64(reduce_dim(OpCode::sum_dim, t, 0)), (std::vector<double>{6, 15}));
    EXPECT_EQ(as_f64(reduce_dim(OpCode::sum_dim, t, 1)), (std::vector<double>{5, 7, 9}));
    const Prim f = flip(a, {1});  // [[3,2,1],[6,5,4]]
    EXPECT_EQ(as_f64(reduce_dim(OpCode::prod_dim, f, 1)), (std::vector<double>{6, 120}));
    EXPECT_EQ(as_f64(reduce_dim(OpCode::mean_dim, a, 0)),
              is_float(dt) ? (std::vector<double>{2.5, 3.5, 4.5}) : (std::vector<double>{2, 3, 4}));
    EXPECT_EQ(as_f64(reduce_dim(OpCode::mean_dim, a, 1)), (std::vector<double>{2, 5}));
    // Broadcast (stride 0) input.
    const Prim e = expand(typed({1, 2, 3}, Shape{1, 3}, dt), Shape{4, 3});
    EXPECT_EQ(as_f64(reduce_dim(OpCode::sum_dim, e, 0)), (std::vector<double>{4, 8, 12}));
  }
}

TEST(CpuReduce, EmptyInputsAndAxes) {
  const Prim e = typed({}, Shape{3, 0}, DType::F32);
  EXPECT_EQ(as_f64(reduce(OpCode::sum, e)), (std::vector<double>{0}));
  EXPECT_EQ(as_f64(reduce(OpCode::prod, e)), (std::vector<double>{1}));
  EXPECT_EQ(as_f64(reduce_dim(OpCode::sum_dim, e, 1)), (std::vector<double>{0, 0, 0}));
  EXPECT_EQ(as_f64(reduce_dim(OpCode::prod_dim, e, 1)), (std::vector<double>{1, 1, 1}));
  for (double x : as_f64(reduce_dim(OpCode::mean_dim, e, 1))) EXPECT_TRUE(std::isnan(x));
  const Prim r = reduce_dim(OpCode::sum_dim, e, 0);
  EXPECT_EQ(cpu_of(r).shape(), (Shape{1, 0}));
  const Prim ie = typed({}, Shape{0, 3}, DType::I32);
  EXPECT_EQ(cpu_of(reduce_dim(OpCode::sum_dim, ie, 1)).shape(), (Shape{0, 1}));
  EXPECT_EQ(as_f64(reduce_dim(OpCode::sum_dim, ie, 0)), (std::vector<double>{0, 0, 0}));
}

TEST(CpuReduce, PrecisionSignsAndWrapping) {
  std::vector<double> v(1024);
  std::iota(v.begin(), v.end(), 0.0);
  EXPECT_EQ(as_f64(reduce_dim(OpCode::mean_dim, typed(v, Shape{1, 1024}, DType::F32), 1)),
            (std::vector<double>{511.5}));
  EXPECT_EQ(as_f64(reduce_dim(OpCode::mean_dim, typed(v, Shape{1024, 1}, DType::F32), 0)),
            (std::vector<double>{511.5}));
  EXPECT_EQ(as_f64(reduce(OpCode::prod, typed({-5, 1, 2, 3, 4, 5}, Shape{6}, DType::F32))),
            (std::vector<double>{-600}));
  EXPECT_EQ(as_f64(reduce(OpCode::prod, typed({-5, 1, 2, 3, 4, 5}, Shape{6}, DType::I8))), (std::vector<double>{-88}));
  // i8 sums wrap; i8 means do not overflow.
  const Prim big = typed({100, 100, 100}, Shape{3}, DType::I8);
  EXPECT_EQ(as_f64(reduce(OpCode::sum, big)), (std::vector<double>{44}));
  EXPECT_EQ(as_f64(reduce_dim(OpCode::mean_dim, big, 0)), (std::vector<double>{100}));
  EXPECT_EQ(as_f64(reduce_dim(OpCode::mean_dim, typed({-7, 2}, Shape{2}, DType::I32), 0)), (std::vector<double>{-2}));
  // Large f32 sums keep precision (accumulated in double).
  std::vector<float> ones(1 << 20, 0.1f);
  const auto s = to_f32(reduce(OpCode::sum, from_vec(ones, Shape{ones.size()})));
  EXPECT_NEAR(s[0], 0.1 * static_cast<double>(ones.size()), 1e-2);
}

// Reductions over an outer dim of large tensors: many row groups (each summed into a
// partial row, combined in order) and several column blocks, f32 and f64. Values are
// small multiples of 1/4 (sums exact in double) and cycles of 2, 1/2, -1, 1 (products
// exact), so the expected values from a plain loop here are exact too.
TEST(CpuReduce, OuterDimOfLargeTensorsInGroupsAndBlocks) {
  struct Case { std::size_t outer, n, inner; };
  for (const Case c : {Case{1, 1500, 1100}, Case{2, 600, 1030}, Case{3, 70, 5}, Case{1, 9000, 3}}) {
    const Shape s = c.outer == 1 ? Shape{c.n, c.inner} : Shape{c.outer, c.n, c.inner};
    const std::size_t dim = c.outer == 1 ? 0 : 1, total = c.outer * c.n * c.inner;
    std::vector<double> add(total), mul(total);
    const double cycle[] = {2.0, 0.5, -1.0, 1.0};
    for (std::size_t i = 0; i < total; ++i) {
      add[i] = static_cast<double>(static_cast<int>((i * 7919) % 29) - 14) * 0.25;
      const std::size_t k = (i / c.inner) % c.n, col = i % c.inner;
      mul[i] = cycle[(k + col) % 4];
    }
    std::vector<double> want_sum(c.outer * c.inner, 0.0), want_prod(c.outer * c.inner, 1.0);
    for (std::size_t o = 0; o < c.outer; ++o)
      for (std::size_t k = 0; k < c.n; ++k)
        for (std::size_t j = 0; j < c.inner; ++j) {
          want_sum[o * c.inner + j] += add[(o * c.n + k) * c.inner + j];
          want_prod[o * c.inner + j] *= mul[(o * c.n + k) * c.inner + j];
        }
    for (DType dt : {DType::F32, DType::F64}) {
      EXPECT_EQ(as_f64(reduce_dim(OpCode::sum_dim, typed(add, s, dt), dim)), want_sum) << c.n << "x" << c.inner;
      EXPECT_EQ(as_f64(reduce_dim(OpCode::prod_dim, typed(mul, s, dt), dim)), want_prod) << c.n << "x" << c.inner;
    }
  }
}

// Extrema along an outer dim of large tensors (row groups combined in order): ties
// everywhere (29 distinct values) keep the lowest index, and a NaN in a later row group
// wins over numbers in an earlier one; max_abs takes |x|. Expected from a plain scan.
TEST(CpuReduce, OuterDimExtremaAcrossRowGroups) {
  const std::size_t n = 1500, inner = 1100;
  std::vector<double> v(n * inner);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(static_cast<int>((i * 7919) % 29) - 14);
  for (std::size_t col : {3u, 500u, 1099u}) v[(300 + col) * inner + col] = std::nan("");  // rows in later groups
  v[7 * inner + 3] = std::nan("");  // column 3: an earlier NaN stays
  std::vector<double> mx(inner), mn(inner), ma(inner);
  std::vector<double> imx(inner, 0), imn(inner, 0);
  auto better = [](double x, double b, bool is_max) {
    return !std::isnan(b) && (std::isnan(x) || (is_max ? x > b : x < b));
  };
  for (std::size_t j = 0; j < inner; ++j) {
    mx[j] = mn[j] = v[j];
    ma[j] = std::fabs(v[j]);
    for (std::size_t k = 1; k < n; ++k) {
      const double x = v[k * inner + j];
      if (better(x, mx[j], true)) { mx[j] = x; imx[j] = static_cast<double>(k); }
      if (better(x, mn[j], false)) { mn[j] = x; imn[j] = static_cast<double>(k); }
      if (better(std::fabs(x), ma[j], true)) ma[j] = std::fabs(x);
    }
  }
  auto same = [](const std::vector<double>& got, const std::vector<double>& want, const char* what) {
    ASSERT_EQ(got.size(), want.size()) << what;
    for (std::size_t i = 0; i < want.size(); ++i)
      ASSERT_TRUE(got[i] == want[i] || (std::isnan(got[i]) && std::isnan(want[i]))) << what << " lane " << i;
  };
  for (DType dt : {DType::F32, DType::F64}) {
    const Prim a = typed(v, Shape{n, inner}, dt);
    same(as_f64(reduce_dim(OpCode::max_dim, a, 0)), mx, "max_dim");
    same(as_f64(reduce_dim(OpCode::min_dim, a, 0)), mn, "min_dim");
    same(as_f64(reduce_dim(OpCode::max_abs_dim, a, 0)), ma, "max_abs_dim");
    same(as_f64(entry<Family::DimIndex>(OpCode::argmax)(a, 0, DType::I64)), imx, "argmax");
    same(as_f64(entry<Family::DimIndex>(OpCode::argmin)(a, 0, DType::I64)), imn, "argmin");
    // Along the last dim (one lane per row) and over everything, max_abs too.
    const Prim t = typed(std::vector<double>{3, -7, 7, std::nan(""), -9, 2, 9, -9}, Shape{2, 4}, dt);
    same(as_f64(reduce_dim(OpCode::max_abs_dim, t, 1)), {std::nan(""), 9}, "max_abs_dim last");
    same(as_f64(reduce(OpCode::max_abs, typed(std::vector<double>(v.begin() + 8 * inner, v.begin() + 300 * inner), Shape{292 * inner}, dt))),
         {14}, "max_abs");
  }
}

// Reductions of permuted views read in memory order (dense_view): a [A, B, C] block
// seen as [B, A, C] (dims 0 and 1 swapped) reduced along each dim, and a transposed 2-d
// block, against plain loops over the block's own indices.
TEST(CpuReduce, PermutedViewsAlongEveryDim) {
  const std::size_t A = 40, B = 300, C = 130;
  std::vector<double> v(A * B * C);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(static_cast<int>((i * 7919) % 29) - 14) * 0.5;
  auto val = [&](std::size_t a, std::size_t b, std::size_t c) { return v[(a * B + b) * C + c]; };
  for (DType dt : {DType::F32, DType::F64}) {
    const Prim view = swap_dims(typed(v, Shape{A, B, C}, dt), 0, 1);  // [B, A, C]
    const std::size_t sizes[3] = {B, A, C};
    for (std::size_t dim = 0; dim < 3; ++dim) {
      // Lanes in the view's row-major order of the kept dims; (b, a, c) walks them.
      std::vector<double> sum, mx, arg;
      std::vector<double> any;
      const std::size_t d0 = dim == 0 ? 1 : 0, d1 = dim == 2 ? 1 : 2;
      for (std::size_t i = 0; i < sizes[d0]; ++i)
        for (std::size_t j = 0; j < sizes[d1]; ++j) {
          double s = 0, m = 0, zero_seen = 0;
          std::size_t am = 0;
          for (std::size_t k = 0; k < sizes[dim]; ++k) {
            std::size_t idx[3];
            idx[dim] = k;
            idx[d0] = i;
            idx[d1] = j;
            const double x = val(idx[1], idx[0], idx[2]);
            s += x;
            if (k == 0 || x > m) { m = x; am = k; }
            zero_seen += x == 0 ? 1 : 0;
          }
          sum.push_back(s);
          mx.push_back(m);
          arg.push_back(static_cast<double>(am));
          any.push_back(zero_seen > 0 ? 0 : 1);  // all_dim: every element nonzero
        }
      EXPECT_EQ(as_f64(reduce_dim(OpCode::sum_dim, view, dim)), sum) << "sum_dim " << dim;
      EXPECT_EQ(as_f64(reduce_dim(OpCode::max_dim, view, dim)), mx) << "max_dim " << dim;
      EXPECT_EQ(as_f64(entry<Family::DimIndex>(OpCode::argmax)(view, dim, DType::I64)), arg) << "argmax " << dim;
      EXPECT_EQ(as_f64(entry<Family::AnyAllDim>(OpCode::all_dim)(view, dim, DType::Bool)), any) << "all_dim " << dim;
    }
  }
}

// f16/bf16 reductions run on a widened f32 copy (sums, extrema along both dims) or on
// f32 blocks (the full sum): exact values (multiples of 1/4 whose sums stay exact in a
// half) against plain loops.
TEST(CpuReduce, HalvesThroughF32MatchPlainLoops) {
  const std::size_t r = 700, c = 90;
  std::vector<double> v(r * c);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(static_cast<int>((i * 7919) % 9) - 4) * 0.25;
  std::vector<double> sum0(c, 0), sum1(r, 0), max0(c), arg1(r, 0);
  double total = 0;
  for (std::size_t i = 0; i < r; ++i)
    for (std::size_t j = 0; j < c; ++j) {
      const double x = v[i * c + j];
      sum0[j] += x;
      sum1[i] += x;
      total += x;
      if (i == 0 || x > max0[j]) max0[j] = x;
      if (x > v[i * c + static_cast<std::size_t>(arg1[i])]) arg1[i] = static_cast<double>(j);
    }
  for (DType dt : {DType::F16, DType::BF16}) {
    // The exact sums rounded once to the dtype (the f32 value is exact here).
    auto rounded = [&](std::vector<double> w) {
      for (double& x : w)
        x = dt == DType::F16 ? static_cast<double>(static_cast<float>(tensor::f16(static_cast<float>(x))))
                             : static_cast<double>(static_cast<float>(tensor::bf16(static_cast<float>(x))));
      return w;
    };
    const Prim a = typed(v, Shape{r, c}, dt);
    EXPECT_EQ(as_f64(reduce_dim(OpCode::sum_dim, a, 0)), rounded(sum0)) << static_cast<int>(dt);
    EXPECT_EQ(as_f64(reduce_dim(OpCode::sum_dim, a, 1)), rounded(sum1)) << static_cast<int>(dt);
    EXPECT_EQ(as_f64(reduce_dim(OpCode::max_dim, a, 0)), max0) << static_cast<int>(dt);
    EXPECT_EQ(as_f64(entry<Family::DimIndex>(OpCode::argmax)(a, 1, DType::I64)), arg1) << static_cast<int>(dt);
    EXPECT_EQ(as_f64(reduce(OpCode::sum, a)), rounded({total})) << static_cast<int>(dt);
  }
}

// mean_dim of 64-bit ints sums exactly (a 64-bit sum would wrap): every value near
// the top of the range, along a contiguous dim and along a strided one.
TEST(CpuReduce, MeanDimOf64BitIntsDoesNotWrap) {
  const std::int64_t hi = std::numeric_limits<std::int64_t>::max() - 6, lo = std::numeric_limits<std::int64_t>::min() + 5;
  // [[hi, hi-2, hi-4], [lo, lo+1, lo+5]]: row means hi-2 and lo+2.
  const std::vector<std::int64_t> v{hi, hi - 2, hi - 4, lo, lo + 1, lo + 5};
  auto make = [](const std::vector<std::int64_t>& x, const Shape& s) {
    return entry<Family::FromData>(OpCode::from_data)(TensorData::from(x, s), kCpuDevice);
  };
  auto read = [](const Prim& p) {
    return entry<Family::IntoData>(OpCode::into_data)(p).get().to_vec<std::int64_t>();
  };
  EXPECT_EQ(read(reduce_dim(OpCode::mean_dim, make(v, Shape{2, 3}), 1)), (std::vector<std::int64_t>{hi - 2, lo + 2}));
  // The same rows stored as columns of a [3, 2]: the reduced dim is strided.
  const std::vector<std::int64_t> t{hi, lo, hi - 2, lo + 1, hi - 4, lo + 5};
  EXPECT_EQ(read(reduce_dim(OpCode::mean_dim, make(t, Shape{3, 2}), 0)), (std::vector<std::int64_t>{hi - 2, lo + 2}));
  // Column means mix signs: sums -2, -3, -1 -> -1, -1 (-1.5 toward zero), 0 (-0.5).
  EXPECT_EQ(read(reduce_dim(OpCode::mean_dim, make(v, Shape{2, 3}), 0)), (std::vector<std::int64_t>{-1, -1, 0}));
  // u64 near the top: (2^64 - 2 + 2^64 - 4) / 2 = 2^64 - 3.
  const std::uint64_t um = std::numeric_limits<std::uint64_t>::max();
  const Prim u = entry<Family::FromData>(OpCode::from_data)(
      TensorData::from(std::vector<std::uint64_t>{um - 1, um - 3}, Shape{2}), kCpuDevice);
  EXPECT_EQ(entry<Family::IntoData>(OpCode::into_data)(reduce_dim(OpCode::mean_dim, u, 0)).get().to_vec<std::uint64_t>(),
            (std::vector<std::uint64_t>{um - 2}));
}

}  // namespace
}  // namespace tensor::cpu::test
