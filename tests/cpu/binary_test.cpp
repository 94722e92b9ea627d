// CPU elementwise engine: every numeric dtype x layout for arithmetic, scalar and
// comparison ops against scalar references written here; buffer reuse order;
// integer edge semantics; bool ops and masks; Highway kernels on every target.
#include <cmath>
#include <limits>
#include <hwy/targets.h>

#include "backends/cpu/binary_hwy.hpp"
#include "backends/cpu/cpu_info.hpp"
#include "cpu_test_util.hpp"

namespace tensor::cpu::test {
namespace {

__extension__ typedef __int128 I128;
__extension__ typedef unsigned __int128 U128;

constexpr DType kNumeric[] = {DType::F64, DType::F32, DType::F16, DType::BF16, DType::I64, DType::I32,
                              DType::I16, DType::I8,  DType::U64, DType::U32, DType::U16,  DType::U8};
constexpr std::size_t kRows = 3, kCols = 5;

template <class T> inline constexpr bool kInt = std::is_integral_v<T> && !std::is_same_v<T, bool>;
template <class T> inline constexpr bool kNum = kInt<T> || dispatch::kIsFloatLike<T>;

template <class F>
void for_numeric(F&& f) {
  for (DType d : kNumeric)
    dispatch::visit_dtype(d, [&](auto tag) {
      if constexpr (kNum<decltype(tag)>) f(tag, d);
    });
}

// Test values: a few repeats (for comparisons), zeros and negatives in the
// divisor, unsigned values large enough to wrap u8 in products.
template <class T> T lhs_value(std::size_t i, std::size_t j) {
  const int k = static_cast<int>((i * 7 + j * 3) % 13);
  if constexpr (dispatch::kIsFloatLike<T>) return dispatch::convert_value<T>((k - 6) * 0.5);
  else if constexpr (std::is_signed_v<T>) return static_cast<T>(k - 6);
  else return static_cast<T>(k * 19);
}
template <class T> T rhs_value(std::size_t i, std::size_t j) {
  const int k = static_cast<int>((i * 5 + j * 2) % 9);
  if constexpr (dispatch::kIsFloatLike<T>) return dispatch::convert_value<T>((k - 4) * 0.5);
  else if constexpr (std::is_signed_v<T>) return static_cast<T>(k - 4);
  else return static_cast<T>(k * 23);
}

// Reference arithmetic, independent of the kernels: floats in float/double, ints
// exactly in 128 bits and then reduced modulo 2^bits.
template <class T> T wrap_to(I128 v) { return static_cast<T>(static_cast<std::uint64_t>(static_cast<U128>(v))); }

template <class T> T ref_arith(OpCode op, T a, T b) {
  if constexpr (dispatch::kIsFloatLike<T>) {
    using C = std::conditional_t<std::is_same_v<T, double>, double, float>;
    const C x = static_cast<C>(static_cast<float>(a)), y = static_cast<C>(static_cast<float>(b));
    C r{};
    switch (op) {
      case OpCode::add: r = x + y; break;
      case OpCode::sub: r = x - y; break;
      case OpCode::mul: r = x * y; break;
      case OpCode::div: r = x / y; break;
      default: r = x - y * std::floor(x / y); break;  // remainder: sign of the divisor
    }
    return dispatch::convert_value<T>(r);
  } else {
    const I128 x = a, y = b;
    switch (op) {
      case OpCode::add: return wrap_to<T>(x + y);
      case OpCode::sub: return wrap_to<T>(x - y);
      case OpCode::mul: return wrap_to<T>(static_cast<I128>(static_cast<U128>(x) * static_cast<U128>(y)));
      case OpCode::div: return y == 0 ? T{0} : wrap_to<T>(x / y);
      default: {
        if (y == 0) return T{0};
        I128 q = x / y;
        if (x % y != 0 && ((x < 0) != (y < 0))) q -= 1;
        return wrap_to<T>(x - y * q);
      }
    }
  }
}

template <class T> double as_double(T v) {
  if constexpr (dispatch::kIsHalf<T>) return static_cast<float>(v);
  else return static_cast<double>(v);
}
template <class T> bool same_value(T a, T b) {
  if constexpr (dispatch::kIsFloatLike<T>) {
    const double x = as_double(a), y = as_double(b);
    return (std::isnan(x) && std::isnan(y)) || x == y;
  } else {
    return a == b;
  }
}

template <class T>
void expect_values(const std::vector<T>& got, const std::vector<T>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t i = 0; i < got.size(); ++i)
    ASSERT_TRUE(same_value(got[i], want[i])) << what << " at " << i << ": got " << as_double(got[i]) << ", want "
                                             << as_double(want[i]);
}

constexpr OpCode kArith[] = {OpCode::add, OpCode::sub, OpCode::mul, OpCode::div, OpCode::remainder};
constexpr OpCode kArithScalar[] = {OpCode::add_scalar, OpCode::sub_scalar, OpCode::mul_scalar, OpCode::div_scalar,
                                   OpCode::remainder_scalar};

TEST(CpuBinary, ArithmeticEveryDtypeAndLayout) {
  for_numeric([](auto tag, DType dt) {
    using T = decltype(tag);
    for (std::size_t o = 0; o < std::size(kArith); ++o) {
      const auto fn = entry<Family::Binary>(kArith[o]);
      for (Lay la : kLayouts)
        for (Lay lb : kLayouts) {
          // Zero-size pairs only with zero-size (shapes must broadcast).
          const Lay ea = lb == Lay::ZeroSize ? Lay::ZeroSize : la, eb = la == Lay::ZeroSize ? Lay::ZeroSize : lb;
          const std::size_t rows = rows_of(ea, kRows);
          const auto va = logical_values<T>(ea, rows, kCols, lhs_value<T>);
          const auto vb = logical_values<T>(eb, rows, kCols, rhs_value<T>);
          std::vector<T> want(va.size());
          for (std::size_t i = 0; i < va.size(); ++i) want[i] = ref_arith(kArith[o], va[i], vb[i]);
          const Prim r = fn(build(ea, va, rows, kCols, dt), build(eb, vb, rows, kCols, dt));
          EXPECT_EQ(cpu_of(r).dtype(), dt);
          expect_values(to_vec<T>(r), want,
                        std::string(dispatch::op_name(kArith[o])) + " " + std::string(dtype_name(dt)) + " " +
                            lay_name(ea) + " x " + lay_name(eb));
        }
    }
  });
}

TEST(CpuBinary, ImplicitBroadcastOfSizeOneDims) {
  // [3,1] op [1,5] -> [3,5] without an explicit expand.
  for_numeric([](auto tag, DType dt) {
    using T = decltype(tag);
    std::vector<T> col(kRows), row(kCols);
    for (std::size_t i = 0; i < kRows; ++i) col[i] = lhs_value<T>(i, 1);
    for (std::size_t j = 0; j < kCols; ++j) row[j] = rhs_value<T>(2, j);
    for (OpCode op : kArith) {
      const Prim r = entry<Family::Binary>(op)(from_vec(col, Shape{kRows, 1}, dt), from_vec(row, Shape{1, kCols}, dt));
      ASSERT_EQ(cpu_of(r).shape(), (Shape{kRows, kCols}));
      std::vector<T> want;
      for (std::size_t i = 0; i < kRows; ++i)
        for (std::size_t j = 0; j < kCols; ++j) want.push_back(ref_arith(op, col[i], row[j]));
      expect_values(to_vec<T>(r), want, std::string(dispatch::op_name(op)) + " " + std::string(dtype_name(dt)));
    }
  });
}

// A scalar converted the way the spec says: float -> int truncates and saturates,
// int -> int wraps.
template <class T> T ref_scalar(Scalar s) {
  if constexpr (dispatch::kIsFloatLike<T>) {
    return dispatch::convert_value<T>(s.to_double());
  } else if (s.is_float()) {
    const double t = std::trunc(s.to_double());
    if (t <= static_cast<double>(std::numeric_limits<T>::min())) return std::numeric_limits<T>::min();
    if (t >= static_cast<double>(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
    return static_cast<T>(t);
  } else {
    return wrap_to<T>(s.to_int64());
  }
}

TEST(CpuBinary, ScalarOpsEveryDtypeAndLayout) {
  const Scalar scalars[] = {Scalar(3), Scalar(-2), Scalar(2.75), Scalar(0)};
  for_numeric([&](auto tag, DType dt) {
    using T = decltype(tag);
    for (std::size_t o = 0; o < std::size(kArithScalar); ++o) {
      const auto fn = entry<Family::Scalar>(kArithScalar[o]);
      for (Lay lay : kLayouts)
        for (const Scalar& s : scalars) {
          const std::size_t rows = rows_of(lay, kRows);
          const auto va = logical_values<T>(lay, rows, kCols, lhs_value<T>);
          const T sv = ref_scalar<T>(s);
          std::vector<T> want(va.size());
          for (std::size_t i = 0; i < va.size(); ++i) want[i] = ref_arith(kArith[o], va[i], sv);
          const Prim r = fn(build(lay, va, rows, kCols, dt), s);
          expect_values(to_vec<T>(r), want,
                        std::string(dispatch::op_name(kArithScalar[o])) + " " + std::string(dtype_name(dt)) + " " +
                            lay_name(lay) + " s=" + std::to_string(s.to_double()));
        }
    }
  });
}

constexpr OpCode kCompare[] = {OpCode::equal, OpCode::greater, OpCode::greater_equal, OpCode::lower,
                               OpCode::lower_equal, OpCode::not_equal};
constexpr OpCode kCompareElem[] = {OpCode::equal_elem, OpCode::greater_elem, OpCode::greater_equal_elem,
                                   OpCode::lower_elem, OpCode::lower_equal_elem, OpCode::not_equal_elem};
constexpr DType kBoolDTypes[] = {DType::Bool, DType::BoolU8, DType::BoolU32};

template <class T> bool ref_compare(OpCode op, T a, T b) {
  const double x = as_double(a), y = as_double(b);
  switch (op) {
    case OpCode::equal: case OpCode::equal_elem: return x == y;
    case OpCode::greater: case OpCode::greater_elem: return x > y;
    case OpCode::greater_equal: case OpCode::greater_equal_elem: return x >= y;
    case OpCode::lower: case OpCode::lower_elem: return x < y;
    case OpCode::not_equal: case OpCode::not_equal_elem: return x != y;
    default: return x <= y;
  }
}

// Bool results as 0/1 words whatever the storage.
std::vector<std::uint32_t> read_bools(const Prim& p) {
  std::vector<std::uint32_t> out;
  if (dtype_size(cpu_of(p).dtype()) == 4) return to_vec<std::uint32_t>(p);
  for (std::uint8_t b : to_vec<std::uint8_t>(p)) out.push_back(b);
  return out;
}

TEST(CpuCompare, EveryDtypeLayoutAndOutStorage) {
  for_numeric([](auto tag, DType dt) {
    using T = decltype(tag);
    for (std::size_t o = 0; o < std::size(kCompare); ++o)
      for (DType out : kBoolDTypes)
        for (Lay la : kLayouts) {
          const Lay lb = la == Lay::ZeroSize ? Lay::ZeroSize : Lay::Transposed;
          const std::size_t rows = rows_of(la, kRows);
          const auto va = logical_values<T>(la, rows, kCols, lhs_value<T>);
          const auto vb = logical_values<T>(lb, rows, kCols, rhs_value<T>);
          const std::string what = std::string(dispatch::op_name(kCompare[o])) + " " + std::string(dtype_name(dt)) +
                                   " -> " + std::string(dtype_name(out)) + " " + lay_name(la);
          const Prim r = entry<Family::Compare>(kCompare[o])(build(la, va, rows, kCols, dt),
                                                              build(lb, vb, rows, kCols, dt), out);
          ASSERT_EQ(cpu_of(r).dtype(), out) << what;
          const auto got = read_bools(r);
          ASSERT_EQ(got.size(), va.size());
          for (std::size_t i = 0; i < va.size(); ++i)
            ASSERT_EQ(got[i], ref_compare(kCompare[o], va[i], vb[i]) ? 1u : 0u) << what << " at " << i;

          const T s = lhs_value<T>(1, 1);
          const Prim re = entry<Family::CompareScalar>(kCompareElem[o])(build(la, va, rows, kCols, dt),
                                                                         Scalar(as_double(s)), out);
          const auto gote = read_bools(re);
          for (std::size_t i = 0; i < va.size(); ++i)
            ASSERT_EQ(gote[i], ref_compare(kCompareElem[o], va[i], s) ? 1u : 0u) << what << " elem at " << i;
        }
  });
}

TEST(CpuCompare, InfinitiesAndNaN) {
  const float inf = INFINITY;
  const Prim a = from_vec(std::vector<float>{0, 1, 2, inf, 4, -inf, NAN}, Shape{7});
  const Prim b = from_vec(std::vector<float>{1, 1, 1, inf, 3, -inf, NAN}, Shape{7});
  const Prim r = entry<Family::Compare>(OpCode::equal)(a, b, DType::Bool);
  EXPECT_EQ(read_bools(r), (std::vector<std::uint32_t>{0, 1, 0, 1, 0, 1, 0}));
}

// Long contiguous runs (the vectorized loops, with remainders) of every compare and of
// max_pair / min_pair, tensor-tensor and against a broadcast one-element operand on
// either side, with NaN and signed zeros among the floats; references are the plain
// definitions here (max_pair: b where a < b or b is NaN, else a).
template <class T> T long_value(std::size_t i, int seed) {
  const int k = static_cast<int>((i * 37 + static_cast<std::size_t>(seed) * 11) % 23);
  if constexpr (std::is_floating_point_v<T>) {
    if (i % 17 == 3) return std::numeric_limits<T>::quiet_NaN();
    if (i % 19 == 5) return seed % 2 ? T(-0.0) : T(0.0);
    return static_cast<T>(k - 11) * T(0.25);
  } else if constexpr (std::is_signed_v<T>) {
    return static_cast<T>(k - 11);
  } else {
    return static_cast<T>(k * 7);
  }
}
template <class T> T ref_pair(bool is_max, T a, T b) {
  bool take_b = is_max ? a < b : a > b;
  if constexpr (std::is_floating_point_v<T>) take_b = take_b || std::isnan(b);
  return take_b ? b : a;
}
template <class T> bool identical(T got, T want) {  // NaN matches NaN; -0 does not match +0
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(want)) return std::isnan(got);
    return got == want && std::signbit(got) == std::signbit(want);
  } else {
    return got == want;
  }
}

template <class T>
void check_long_runs(DType dt) {
  const std::size_t n = 1037;
  std::vector<T> va(n), vb(n);
  for (std::size_t i = 0; i < n; ++i) va[i] = long_value<T>(i, 1), vb[i] = long_value<T>(i + 5, 2);
  const T s = long_value<T>(7, 3);
  const std::string name(dtype_name(dt));
  for (std::size_t o = 0; o < std::size(kCompare); ++o) {
    const Prim r = entry<Family::Compare>(kCompare[o])(from_vec(va, Shape{n}, dt), from_vec(vb, Shape{n}, dt), DType::Bool);
    const Prim rs = entry<Family::Compare>(kCompare[o])(from_vec(va, Shape{n}, dt), from_vec(std::vector<T>{s}, Shape{1}, dt),
                                                        DType::Bool);
    const Prim sr = entry<Family::Compare>(kCompare[o])(from_vec(std::vector<T>{s}, Shape{1}, dt), from_vec(vb, Shape{n}, dt),
                                                        DType::BoolU32);
    const auto g = read_bools(r), gs = read_bools(rs), gr = read_bools(sr);
    for (std::size_t i = 0; i < n; ++i) {
      const std::string what = std::string(dispatch::op_name(kCompare[o])) + " " + name + " at " + std::to_string(i);
      ASSERT_EQ(g[i], ref_compare(kCompare[o], va[i], vb[i]) ? 1u : 0u) << what;
      ASSERT_EQ(gs[i], ref_compare(kCompare[o], va[i], s) ? 1u : 0u) << what << " (tensor, scalar)";
      ASSERT_EQ(gr[i], ref_compare(kCompare[o], s, vb[i]) ? 1u : 0u) << what << " (scalar, tensor)";
    }
  }
  for (const bool is_max : {true, false}) {
    const OpCode op = is_max ? OpCode::max_pair : OpCode::min_pair;
    const auto g = to_vec<T>(entry<Family::Binary>(op)(from_vec(va, Shape{n}, dt), from_vec(vb, Shape{n}, dt)));
    const auto gs = to_vec<T>(entry<Family::Binary>(op)(from_vec(va, Shape{n}, dt), from_vec(std::vector<T>{s}, Shape{1}, dt)));
    const auto gr = to_vec<T>(entry<Family::Binary>(op)(from_vec(std::vector<T>{s}, Shape{1}, dt), from_vec(vb, Shape{n}, dt)));
    for (std::size_t i = 0; i < n; ++i) {
      const std::string what = std::string(dispatch::op_name(op)) + " " + name + " at " + std::to_string(i);
      ASSERT_TRUE(identical(g[i], ref_pair(is_max, va[i], vb[i]))) << what;
      ASSERT_TRUE(identical(gs[i], ref_pair(is_max, va[i], s))) << what << " (tensor, scalar)";
      ASSERT_TRUE(identical(gr[i], ref_pair(is_max, s, vb[i]))) << what << " (scalar, tensor)";
    }
  }
}

TEST(CpuCompare, LongRunsOfComparesAndPairSelects) {
  check_long_runs<float>(DType::F32);
  check_long_runs<double>(DType::F64);
  check_long_runs<std::int64_t>(DType::I64);
  check_long_runs<std::int32_t>(DType::I32);
  check_long_runs<std::int8_t>(DType::I8);
  check_long_runs<std::uint8_t>(DType::U8);
  check_long_runs<std::uint16_t>(DType::U16);
}

// ---- bool ops and masks ------------------------------------------------------------
Prim bools(const std::vector<int>& v, const Shape& s, DType dt) {
  if (dt == DType::BoolU32) return from_vec(std::vector<std::uint32_t>(v.begin(), v.end()), s, dt);
  return from_vec(std::vector<std::uint8_t>(v.begin(), v.end()), s, dt);
}

TEST(CpuBool, LogicalOpsOnEveryStorage) {
  for (DType dt : kBoolDTypes) {
    SCOPED_TRACE(std::string(dtype_name(dt)));
    const Prim a = bools({1, 1, 0, 0}, Shape{2, 2}, dt);
    const Prim b = bools({1, 0, 1, 0}, Shape{2, 2}, dt);
    EXPECT_EQ(read_bools(entry<Family::Binary>(OpCode::bool_and)(a, b)), (std::vector<std::uint32_t>{1, 0, 0, 0}));
    EXPECT_EQ(read_bools(entry<Family::Binary>(OpCode::bool_or)(a, b)), (std::vector<std::uint32_t>{1, 1, 1, 0}));
    EXPECT_EQ(read_bools(entry<Family::Unary>(OpCode::bool_not)(a)), (std::vector<std::uint32_t>{0, 0, 1, 1}));
    EXPECT_EQ(read_bools(entry<Family::Unary>(OpCode::bool_not)(swap_dims(a, 0, 1))),
              (std::vector<std::uint32_t>{0, 1, 0, 1}));
    EXPECT_EQ(read_bools(entry<Family::Compare>(OpCode::equal)(a, b, DType::Bool)),
              (std::vector<std::uint32_t>{1, 0, 0, 1}));
    EXPECT_EQ(read_bools(entry<Family::CompareScalar>(OpCode::equal_elem)(a, Scalar(true), DType::BoolU32)),
              (std::vector<std::uint32_t>{1, 1, 0, 0}));
    // Broadcast a row against a [2,2].
    const Prim row = bools({0, 1}, Shape{1, 2}, dt);
    EXPECT_EQ(read_bools(entry<Family::Binary>(OpCode::bool_or)(row, b)), (std::vector<std::uint32_t>{1, 1, 1, 1}));
  }
}

TEST(CpuMask, FillAndWhereEveryKindAndMaskStorage) {
  for (DType mdt : kBoolDTypes) {
    SCOPED_TRACE(std::string(dtype_name(mdt)));
    const Prim mask = bools({1, 0, 1}, Shape{1, 3}, mdt);  // broadcast over rows
    // Float with -inf and NaN: only masked positions change.
    const Prim f = from_vec(std::vector<float>{-INFINITY, NAN, 3, 4, 5, -INFINITY}, Shape{2, 3});
    const auto got = to_f32(entry<Family::MaskFill>(OpCode::mask_fill)(f, mask, Scalar(9.5)));
    EXPECT_EQ(got[0], 9.5f);
    EXPECT_TRUE(std::isnan(got[1]));
    EXPECT_EQ(got[2], 9.5f);
    EXPECT_EQ(got[3], 9.5f);
    EXPECT_EQ(got[4], 5.0f);
    EXPECT_EQ(got[5], 9.5f);
    // Int (a float scalar truncates) and f16.
    const Prim i = from_vec(std::vector<std::int32_t>{1, 2, 3, 4, 5, 6}, Shape{2, 3});
    EXPECT_EQ(to_vec<std::int32_t>(entry<Family::MaskFill>(OpCode::mask_fill)(i, mask, Scalar(-7.9))),
              (std::vector<std::int32_t>{-7, 2, -7, -7, 5, -7}));
    const Prim h = from_vec(std::vector<f16>{f16(1.0f), f16(2.0f), f16(3.0f)}, Shape{1, 3});
    const auto hv = to_vec<f16>(entry<Family::MaskFill>(OpCode::mask_fill)(h, mask, Scalar(0.5)));
    EXPECT_EQ(static_cast<float>(hv[0]), 0.5f);
    EXPECT_EQ(static_cast<float>(hv[1]), 2.0f);
    // Bool tensor.
    const Prim bt = bools({0, 0, 0, 1, 1, 1}, Shape{2, 3}, DType::Bool);
    EXPECT_EQ(read_bools(entry<Family::MaskFill>(OpCode::mask_fill)(bt, mask, Scalar(true))),
              (std::vector<std::uint32_t>{1, 0, 1, 1, 1, 1}));

    // mask_where: value where mask, else the tensor; all three broadcast.
    const Prim a = from_vec(std::vector<std::int64_t>{1, 2, 3, 4, 5, 6}, Shape{2, 3});
    const Prim v = from_vec(std::vector<std::int64_t>{10, 20}, Shape{2, 1});
    EXPECT_EQ(to_vec<std::int64_t>(entry<Family::MaskWhere>(OpCode::mask_where)(a, mask, v)),
              (std::vector<std::int64_t>{10, 2, 10, 20, 5, 20}));
    const Prim fv = from_vec(std::vector<float>{7, 7, 7, 7, 7, 7}, Shape{2, 3});
    const auto w = to_f32(entry<Family::MaskWhere>(OpCode::mask_where)(swap_dims(swap_dims(f, 0, 1), 0, 1), mask, fv));
    EXPECT_EQ(w[0], 7.0f);
    EXPECT_TRUE(std::isnan(w[1]));
    EXPECT_EQ(w[4], 5.0f);
  }
}

// ---- buffer reuse (SPEC §4, observable) -------------------------------------------
struct Pair {
  Prim a, b;
  const Storage* sa;
  const Storage* sb;
};
Pair pair_f32() {
  Prim a = from_vec(std::vector<float>{8, 6, 4, 2}, Shape{2, 2});
  Prim b = from_vec(std::vector<float>{1, 2, 4, 8}, Shape{2, 2});
  const Storage* sa = cpu_of(a).storage();
  const Storage* sb = cpu_of(b).storage();
  return {std::move(a), std::move(b), sa, sb};
}

TEST(CpuBinaryReuse, WritesIntoUniqueLhsThenUniqueRhsElseAllocates) {
  struct Case {
    OpCode op;
    std::vector<float> want;
  };
  const Case cases[] = {{OpCode::add, {9, 8, 8, 10}},
                        {OpCode::sub, {7, 4, 0, -6}},
                        {OpCode::div, {8, 3, 1, 0.25}},
                        {OpCode::remainder, {0, 0, 0, 2}}};
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(dispatch::op_name(c.op)));
    const auto fn = entry<Family::Binary>(c.op);
    {  // lhs unique, rhs held elsewhere
      Pair p = pair_f32();
      const Prim keep_b = p.b;
      const Prim r = fn(std::move(p.a), p.b);
      EXPECT_EQ(cpu_of(r).storage(), p.sa);
      EXPECT_EQ(to_f32(r), c.want);
      EXPECT_EQ(to_f32(keep_b), (std::vector<float>{1, 2, 4, 8}));
    }
    {  // lhs held, rhs unique: reversed kernels write into rhs
      Pair p = pair_f32();
      const Prim keep_a = p.a;
      const Prim r = fn(p.a, std::move(p.b));
      EXPECT_EQ(cpu_of(r).storage(), p.sb);
      EXPECT_EQ(to_f32(r), c.want);
      EXPECT_EQ(to_f32(keep_a), (std::vector<float>{8, 6, 4, 2}));
    }
    {  // both held: a new buffer
      Pair p = pair_f32();
      const Prim r = fn(p.a, p.b);
      EXPECT_NE(cpu_of(r).storage(), p.sa);
      EXPECT_NE(cpu_of(r).storage(), p.sb);
      EXPECT_EQ(to_f32(r), c.want);
      EXPECT_EQ(to_f32(p.a), (std::vector<float>{8, 6, 4, 2}));
    }
  }
}

TEST(CpuBinaryReuse, NeverWritesIntoViewsBroadcastOrSharedStorage) {
  const auto add = entry<Family::Binary>(OpCode::add);
  {  // A unique [1,2] lhs cannot hold a [2,2] result; the unique rhs can.
    Prim a = from_vec(std::vector<float>{1, 2}, Shape{1, 2});
    Prim b = from_vec(std::vector<float>{10, 20, 30, 40}, Shape{2, 2});
    const Storage* sb = cpu_of(b).storage();
    const Prim r = add(std::move(a), std::move(b));
    EXPECT_EQ(cpu_of(r).storage(), sb);
    EXPECT_EQ(to_f32(r), (std::vector<float>{11, 22, 31, 42}));
  }
  {  // A transposed unique lhs is not dense: allocate.
    Prim a = swap_dims(from_vec(std::vector<float>{1, 2, 3, 4}, Shape{2, 2}), 0, 1);
    const Prim b = from_vec(std::vector<float>{0, 0, 0, 0}, Shape{2, 2});
    const Storage* sa = cpu_of(a).storage();
    const Prim r = add(std::move(a), b);
    EXPECT_NE(cpu_of(r).storage(), sa);
    EXPECT_EQ(to_f32(r), (std::vector<float>{1, 3, 2, 4}));
  }
  {  // A view sharing storage with a live tensor is not unique.
    const Prim base = from_vec(std::vector<float>{1, 2, 3, 4}, Shape{4});
    Prim v = reshape(base, Shape{2, 2});
    const Prim r = add(std::move(v), from_vec(std::vector<float>{1, 1, 1, 1}, Shape{2, 2}));
    EXPECT_EQ(to_f32(base), (std::vector<float>{1, 2, 3, 4}));
    EXPECT_EQ(to_f32(r), (std::vector<float>{2, 3, 4, 5}));
  }
  {  // Scalar op in place on a unique dense operand.
    Prim a = from_vec(std::vector<float>{1, 2, 3}, Shape{3});
    const Storage* sa = cpu_of(a).storage();
    const Prim r = entry<Family::Scalar>(OpCode::mul_scalar)(std::move(a), Scalar(-1));
    EXPECT_EQ(cpu_of(r).storage(), sa);
    EXPECT_EQ(to_f32(r), (std::vector<float>{-1, -2, -3}));
  }
}

// ---- integer semantics ---------------------------------------------------------------
TEST(CpuIntSemantics, DivisionAndRemainderEdges) {
  const auto div = entry<Family::Binary>(OpCode::div);
  const auto rem = entry<Family::Binary>(OpCode::remainder);
  const std::int32_t kMin = std::numeric_limits<std::int32_t>::min();
  const Prim a = from_vec(std::vector<std::int32_t>{7, -7, kMin, 5, -5, kMin}, Shape{6});
  const Prim b = from_vec(std::vector<std::int32_t>{2, 2, -1, 0, 0, 0}, Shape{6});
  EXPECT_EQ(to_vec<std::int32_t>(div(a, b)), (std::vector<std::int32_t>{3, -3, kMin, 0, 0, 0}));
  EXPECT_EQ(to_vec<std::int32_t>(rem(a, b)), (std::vector<std::int32_t>{1, 1, 0, 0, 0, 0}));

  const Prim x = from_vec(std::vector<std::int64_t>{-3, -2, -1, 1, 2, 3}, Shape{6});
  EXPECT_EQ(to_vec<std::int64_t>(entry<Family::Scalar>(OpCode::remainder_scalar)(x, Scalar(2))),
            (std::vector<std::int64_t>{1, 0, 1, 1, 0, 1}));
  EXPECT_EQ(to_vec<std::int64_t>(entry<Family::Scalar>(OpCode::remainder_scalar)(x, Scalar(-2))),
            (std::vector<std::int64_t>{-1, 0, -1, -1, 0, -1}));

  const Prim i8 = from_vec(std::vector<std::int8_t>{-128, 127, 100}, Shape{3});
  EXPECT_EQ(to_vec<std::int8_t>(entry<Family::Scalar>(OpCode::div_scalar)(i8, Scalar(-1))),
            (std::vector<std::int8_t>{-128, -127, -100}));
  EXPECT_EQ(to_vec<std::int8_t>(entry<Family::Scalar>(OpCode::add_scalar)(i8, Scalar(1))),
            (std::vector<std::int8_t>{-127, -128, 101}));
  const Prim u16 = from_vec(std::vector<std::uint16_t>{65535, 300}, Shape{2});
  EXPECT_EQ(to_vec<std::uint16_t>(entry<Family::Binary>(OpCode::mul)(u16, u16)),
            (std::vector<std::uint16_t>{1, static_cast<std::uint16_t>(90000 % 65536)}));
  // A float scalar on an unsigned tensor saturates at 0 before the op.
  const Prim u8 = from_vec(std::vector<std::uint8_t>{200, 10}, Shape{2});
  EXPECT_EQ(to_vec<std::uint8_t>(entry<Family::Scalar>(OpCode::add_scalar)(u8, Scalar(100))),
            (std::vector<std::uint8_t>{44, 110}));
  EXPECT_EQ(to_vec<std::uint8_t>(entry<Family::Scalar>(OpCode::add_scalar)(u8, Scalar(-1.5))),
            (std::vector<std::uint8_t>{200, 10}));
}

TEST(CpuFloatSemantics, RemainderFollowsTheDivisor) {
  const Prim a = from_vec(std::vector<float>{-3, -2, -1, 1, 2, 3}, Shape{6});
  const Prim b = from_vec(std::vector<float>{2, 3, 1, 2, 1, 3}, Shape{6});
  EXPECT_EQ(to_f32(entry<Family::Binary>(OpCode::remainder)(a, b)), (std::vector<float>{1, 1, 0, 1, 0, 0}));
  const Prim c = from_vec(std::vector<double>{1, 2, 3, 4, 5}, Shape{5});
  EXPECT_EQ(to_vec<double>(entry<Family::Scalar>(OpCode::remainder_scalar)(c, Scalar(-1.5))),
            (std::vector<double>{-0.5, -1, 0, -0.5, -1}));
}

TEST(CpuBitwise, ShiftsAndLogic) {
  const Prim a = from_vec(std::vector<std::int32_t>{1, -8, 5, 3}, Shape{4});
  const Prim s = from_vec(std::vector<std::int32_t>{3, 1, 40, -1}, Shape{4});
  EXPECT_EQ(to_vec<std::int32_t>(entry<Family::Binary>(OpCode::bitwise_left_shift)(a, s)),
            (std::vector<std::int32_t>{8, -16, 0, 0}));
  EXPECT_EQ(to_vec<std::int32_t>(entry<Family::Binary>(OpCode::bitwise_right_shift)(a, s)),
            (std::vector<std::int32_t>{0, -4, 0, 0}));
  EXPECT_EQ(to_vec<std::int32_t>(entry<Family::Scalar>(OpCode::bitwise_xor_scalar)(a, Scalar(1))),
            (std::vector<std::int32_t>{0, -7, 4, 2}));
  const Prim u = from_vec(std::vector<std::uint8_t>{0xF0, 0x0F}, Shape{2});
  EXPECT_EQ(to_vec<std::uint8_t>(entry<Family::Scalar>(OpCode::bitwise_left_shift_scalar)(u, Scalar(4))),
            (std::vector<std::uint8_t>{0x00, 0xF0}));
  EXPECT_EQ(to_vec<std::uint8_t>(entry<Family::Scalar>(OpCode::bitwise_and_scalar)(u, Scalar(0x3C))),
            (std::vector<std::uint8_t>{0x30, 0x0C}));
}

// ---- Highway kernels on every compiled target ---------------------------------------
template <class T>
void check_simd_kernels(const std::string& target) {
  using simd::BinOp;
  for (std::size_t n : {0u, 1u, 3u, 7u, 8u, 15u, 16u, 17u, 33u, 64u, 67u, 1000u}) {
    std::vector<T> a(n), b(n), out(n);
    for (std::size_t i = 0; i < n; ++i) {
      a[i] = static_cast<T>(static_cast<double>(i % 17) * 1.25 - 7);
      b[i] = static_cast<T>(static_cast<double>(i % 5) + 0.5);
    }
    for (BinOp op : {BinOp::Add, BinOp::Sub, BinOp::Mul, BinOp::Div}) {
      auto ref = [op](T x, T y) -> T {
        switch (op) {
          case BinOp::Add: return x + y;
          case BinOp::Sub: return x - y;
          case BinOp::Mul: return x * y;
          default: return x / y;
        }
      };
      const std::string what = target + " n=" + std::to_string(n) + " op=" + std::to_string(static_cast<int>(op));
      if constexpr (std::is_same_v<T, float>) {
        simd::binary_f32(op, a.data(), b.data(), out.data(), n);
        for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(out[i], ref(a[i], b[i])) << what;
        simd::binary_scalar_f32(op, a.data(), T(2.5), out.data(), n);
        for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(out[i], ref(a[i], T(2.5))) << what;
        simd::binary_rscalar_f32(op, T(2.5), b.data(), out.data(), n);
        for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(out[i], ref(T(2.5), b[i])) << what;
        out = a;  // in place into the first input
        simd::binary_f32(op, out.data(), b.data(), out.data(), n);
        for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(out[i], ref(a[i], b[i])) << what;
      } else {
        simd::binary_f64(op, a.data(), b.data(), out.data(), n);
        for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(out[i], ref(a[i], b[i])) << what;
        simd::binary_scalar_f64(op, a.data(), T(2.5), out.data(), n);
        for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(out[i], ref(a[i], T(2.5))) << what;
        simd::binary_rscalar_f64(op, T(2.5), b.data(), out.data(), n);
        for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(out[i], ref(T(2.5), b[i])) << what;
        out = b;  // in place into the second input
        simd::binary_f64(op, a.data(), out.data(), out.data(), n);
        for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(out[i], ref(a[i], b[i])) << what;
      }
    }
  }
}

// Outputs of 16 MB and more that overlap no input take non-temporal stores, after a
// scalar head up to the vector alignment (outputs start 1 element past an aligned
// block here); in place they do not. Every element checked.
template <class T>
void check_streaming(std::size_t n) {
  std::vector<T> a(n), b(n), out(n + 1, T(-1));
  for (std::size_t i = 0; i < n; ++i) {
    a[i] = static_cast<T>(static_cast<double>(i % 17) * 1.25 - 7);
    b[i] = static_cast<T>(static_cast<double>(i % 5) + 0.5);
  }
  T* o = out.data() + 1;
  if constexpr (std::is_same_v<T, float>) {
    simd::binary_f32(simd::BinOp::Mul, a.data(), b.data(), o, n);
    for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(o[i], a[i] * b[i]) << i;
    simd::binary_scalar_f32(simd::BinOp::Sub, a.data(), T(2.5), o, n);
    for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(o[i], a[i] - T(2.5)) << i;
    simd::binary_rscalar_f32(simd::BinOp::Div, T(2.5), b.data(), o, n);
    for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(o[i], T(2.5) / b[i]) << i;
    simd::binary_f32(simd::BinOp::Add, a.data(), b.data(), a.data(), n);  // in place
  } else {
    simd::binary_f64(simd::BinOp::Mul, a.data(), b.data(), o, n);
    for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(o[i], a[i] * b[i]) << i;
    simd::binary_scalar_f64(simd::BinOp::Sub, a.data(), T(2.5), o, n);
    for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(o[i], a[i] - T(2.5)) << i;
    simd::binary_rscalar_f64(simd::BinOp::Div, T(2.5), b.data(), o, n);
    for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(o[i], T(2.5) / b[i]) << i;
    simd::binary_f64(simd::BinOp::Add, a.data(), b.data(), a.data(), n);
  }
  EXPECT_EQ(out[0], T(-1));
  for (std::size_t i = 0; i < n; ++i)
    ASSERT_EQ(a[i], static_cast<T>(static_cast<double>(i % 17) * 1.25 - 7) + b[i]) << i;
}

// Contiguous f16/bf16 arithmetic goes through f32 blocks (widen, f32 kernel, round):
// every result must equal the scalar definition H(float(a) op float(b)) bit for bit, over
// lengths that end mid-block, large enough to run on threads, and in place.
template <class H>
void check_half_arithmetic(DType dt) {
  for (const std::size_t n : {std::size_t{7}, std::size_t{1537}, (std::size_t{1} << 20) + 11}) {
    std::vector<H> a(n), b(n);
    for (std::size_t i = 0; i < n; ++i) {
      a[i] = H(static_cast<float>(static_cast<int>((i * 7919) % 2003) - 1001) * 0.37f);
      b[i] = H(static_cast<float>(static_cast<int>((i * 104729) % 997) + 1) * 0.011f);
    }
    const std::pair<OpCode, float (*)(float, float)> ops[] = {
        {OpCode::add, [](float x, float y) { return x + y; }}, {OpCode::sub, [](float x, float y) { return x - y; }},
        {OpCode::mul, [](float x, float y) { return x * y; }}, {OpCode::div, [](float x, float y) { return x / y; }}};
    for (const auto& [op, f] : ops) {
      const std::vector<H> got = to_vec<H>(entry<Family::Binary>(op)(from_vec(a, Shape{n}, dt), from_vec(b, Shape{n}, dt)));
      ASSERT_EQ(got.size(), n);
      for (std::size_t i = 0; i < n; ++i)
        ASSERT_EQ(got[i].bits, H(f(static_cast<float>(a[i]), static_cast<float>(b[i]))).bits) << static_cast<int>(op) << " " << i;
    }
    Prim x = from_vec(a, Shape{n}, dt);  // unique: the sum is written into it
    const std::vector<H> in_place = to_vec<H>(entry<Family::Binary>(OpCode::add)(std::move(x), from_vec(b, Shape{n}, dt)));
    for (std::size_t i = 0; i < n; ++i)
      ASSERT_EQ(in_place[i].bits, H(static_cast<float>(a[i]) + static_cast<float>(b[i])).bits) << "in place " << i;
  }
}

TEST(CpuBinary, HalvesThroughF32BlocksMatchTheScalarDefinition) {
  check_half_arithmetic<tensor::f16>(DType::F16);
  check_half_arithmetic<tensor::bf16>(DType::BF16);
}

TEST(CpuHighway, LargeFreshOutputsStream) {
  check_streaming<float>((std::size_t{4} << 20) + 5);
  check_streaming<double>((std::size_t{2} << 20) + 3);
}

TEST(CpuHighway, KernelsAndEngineOnEveryCompiledTarget) {
  const std::vector<std::int64_t> targets = compiled_targets();  // before any mock
  ASSERT_FALSE(targets.empty());
  for (const std::int64_t t : targets) {
    hwy::SetSupportedTargetsForTest(t);
    const std::string name = hwy::TargetName(t);
    EXPECT_EQ(std::string(current_target_name()), name);
    check_simd_kernels<float>(name);
    check_simd_kernels<double>(name);
    // Through the engine: a contiguous add/sub on f32 and a broadcast-scalar div on f64.
    const Prim a = from_vec(std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8, 9}, Shape{9});
    const Prim b = from_vec(std::vector<float>{9, 8, 7, 6, 5, 4, 3, 2, 1}, Shape{9});
    EXPECT_EQ(to_f32(entry<Family::Binary>(OpCode::sub)(a, b)),
              (std::vector<float>{-8, -6, -4, -2, 0, 2, 4, 6, 8}))
        << name;
    const Prim d = from_vec(std::vector<double>{1, 2, 4}, Shape{3});
    const Prim one = from_vec(std::vector<double>{8}, Shape{1});
    EXPECT_EQ(to_vec<double>(entry<Family::Binary>(OpCode::div)(one, d)), (std::vector<double>{8, 4, 2})) << name;
  }
  hwy::SetSupportedTargetsForTest(0);
  EXPECT_FALSE(std::string(current_target_name()).empty());
}

}  // namespace
}  // namespace tensor::cpu::test
