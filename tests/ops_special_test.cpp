// Op tests outside the generated families, through the typed public API: matmul
// (naive reference, transposed operands, broadcast batch dims), casts between
// every dtype pair, clamp, sort, masks and the layout ops.
#include <algorithm>
#include <numeric>

#include "test_util.hpp"

namespace {

using namespace tt;

const Device kCpu = Device::cpu();

Host gen(DType t, std::vector<std::size_t> shape, double lo, double hi, std::mt19937& rng) {
  Host h;
  h.shape = std::move(shape);
  h.dtype = t;
  for (std::size_t k = 0; k < h.size(); ++k) {
    if (is_fl(t)) h.f.push_back(round_to(t, std::uniform_real_distribution<double>(lo, hi)(rng)));
    else if (is_bo(t)) h.i.push_back(std::bernoulli_distribution(0.5)(rng));
    else h.i.push_back(std::uniform_int_distribution<std::int64_t>(static_cast<std::int64_t>(lo), static_cast<std::int64_t>(hi))(rng));
  }
  return h;
}

template <std::size_t D, class K = Float>
Tensor<D, K> make(const Host& h) { return Tensor<D, K>::from_data(encode(h), kCpu); }

// Rank-3 host transposed in its last two dims.
Host swap_last(const Host& h) {
  Host o = h;
  const std::size_t b = h.shape[0], r = h.shape[1], c = h.shape[2];
  o.shape = {b, c, r};
  for (std::size_t x = 0; x < b; ++x)
    for (std::size_t i = 0; i < r; ++i)
      for (std::size_t j = 0; j < c; ++j) {
        const std::size_t from = (x * r + i) * c + j, to = (x * c + j) * r + i;
        if (h.floaty()) o.f[to] = h.f[from];
        else o.i[to] = h.i[from];
      }
  return o;
}

// ---- matmul -------------------------------------------------------------------------

// Naive batched product with broadcast batch dim (rank 3): values and per-element tolerance.
struct MatRef {
  Host out;
  std::vector<double> tol;
};
MatRef naive_matmul(const Host& a, const Host& b) {
  const std::size_t ba = a.shape[0], bb = b.shape[0], n = a.shape[1], k = a.shape[2], m = b.shape[2];
  const std::size_t batch = std::max(ba, bb);
  MatRef r;
  r.out.shape = {batch, n, m};
  r.out.dtype = a.dtype;
  const double eps = epsilon(a.dtype);
  for (std::size_t x = 0; x < batch; ++x)
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t j = 0; j < m; ++j) {
        const std::size_t xa = ba == 1 ? 0 : x, xb = bb == 1 ? 0 : x;
        if (a.floaty()) {
          double s = 0, sabs = 0;
          for (std::size_t q = 0; q < k; ++q) {
            const double p = a.f[(xa * n + i) * k + q] * b.f[(xb * k + q) * m + j];
            s += p;
            sabs += std::fabs(p);
          }
          r.out.f.push_back(s);
          r.tol.push_back((static_cast<double>(k) + 2) * eps * sabs + eps * std::fabs(s));
        } else {
          std::uint64_t s = 0;
          for (std::size_t q = 0; q < k; ++q)
            s += static_cast<std::uint64_t>(a.i[(xa * n + i) * k + q]) * static_cast<std::uint64_t>(b.i[(xb * k + q) * m + j]);
          r.out.i.push_back(wrap(a.dtype, static_cast<std::int64_t>(s)));
        }
      }
  return r;
}

void expect_close(const MatRef& want, const Host& got, const std::string& what) {
  ASSERT_EQ(got.shape, want.out.shape) << what;
  ASSERT_EQ(got.dtype, want.out.dtype) << what;
  int bad = 0;
  for (std::size_t q = 0; q < want.out.size(); ++q) {
    const bool ok = want.out.floaty() ? std::fabs(got.f[q] - want.out.f[q]) <= want.tol[q] : got.i[q] == want.out.i[q];
    if (!ok && bad++ < 3)
      ADD_FAILURE() << what << " [" << q << "] want " << want.out.at(q) << " got " << got.at(q);
  }
}

template <class K>
void run_matmul_cases(DType t) {
  std::mt19937 rng(42);
  const bool fl = is_fl(t);
  const double lo = fl ? -2 : (is_un(t) ? 0 : -3), hi = fl ? 2 : 3;
  struct Case { std::size_t ba, bb, n, k, m; };
  for (const Case c : {Case{1, 1, 3, 4, 5}, Case{2, 2, 7, 9, 6}, Case{3, 1, 4, 5, 2}, Case{1, 3, 2, 3, 4},
                       Case{2, 2, 17, 33, 12}, Case{1, 1, 1, 1, 1}, Case{2, 2, 3, 0, 4}}) {
    const Host a = gen(t, {c.ba, c.n, c.k}, lo, hi, rng), b = gen(t, {c.bb, c.k, c.m}, lo, hi, rng);
    const MatRef want = naive_matmul(a, b);
    const std::string tag = std::string(name(t)) + " [" + std::to_string(c.ba) + "," + std::to_string(c.n) + "," +
                            std::to_string(c.k) + "] x [" + std::to_string(c.bb) + "," + std::to_string(c.k) + "," +
                            std::to_string(c.m) + "]";
    const auto ta = make<3, K>(a), tb = make<3, K>(b);
    const auto at = make<3, K>(swap_last(a)).transpose();  // same values, transposed strides
    const auto bt = make<3, K>(swap_last(b)).transpose();
    expect_close(want, read(ta.matmul(tb)), tag + " contiguous");
    expect_close(want, read(at.matmul(tb)), tag + " lhs transposed");
    expect_close(want, read(ta.matmul(bt)), tag + " rhs transposed");
    expect_close(want, read(at.matmul(bt)), tag + " both transposed");
    // The operands are unchanged.
    EXPECT_EQ(read(ta).i, a.i);
    EXPECT_EQ(read(ta).f, a.f);
  }
  // Rank-4 broadcast batch dims: [2,1,3,4] x [1,3,4,5] -> [2,3,3,5].
  const Host a = gen(t, {2, 1, 3, 4}, lo, hi, rng), b = gen(t, {1, 3, 4, 5}, lo, hi, rng);
  const auto got = read(make<4, K>(a).matmul(make<4, K>(b)));
  ASSERT_EQ(got.shape, (std::vector<std::size_t>{2, 3, 3, 5}));
  for (std::size_t x = 0; x < 2; ++x)
    for (std::size_t y = 0; y < 3; ++y) {
      Host sa = a, sb = b;
      sa.shape = {1, 3, 4};
      sb.shape = {1, 4, 5};
      if (fl) {
        sa.f.assign(a.f.begin() + x * 12, a.f.begin() + (x + 1) * 12);
        sb.f.assign(b.f.begin() + y * 20, b.f.begin() + (y + 1) * 20);
      } else {
        sa.i.assign(a.i.begin() + x * 12, a.i.begin() + (x + 1) * 12);
        sb.i.assign(b.i.begin() + y * 20, b.i.begin() + (y + 1) * 20);
      }
      const MatRef w = naive_matmul(sa, sb);
      for (std::size_t q = 0; q < 15; ++q) {
        const std::size_t g = (x * 3 + y) * 15 + q;
        if (fl) EXPECT_NEAR(got.f[g], w.out.f[q], w.tol[q]) << name(t) << " rank-4 batch (" << x << "," << y << ")";
        else EXPECT_EQ(got.i[g], w.out.i[q]) << name(t) << " rank-4 batch (" << x << "," << y << ")";
      }
    }
}

class Matmul : public ::testing::TestWithParam<DType> {};
TEST_P(Matmul, MatchesNaiveProduct) {
  const DType t = GetParam();
  try {
    if (is_fl(t)) run_matmul_cases<Float>(t);
    else run_matmul_cases<Int>(t);
  } catch (const NotImplemented& e) {
    GTEST_SKIP() << "NotImplemented on cpu: " << e.what();
  }
}
INSTANTIATE_TEST_SUITE_P(AllNumeric, Matmul,
                         ::testing::Values(DType::F64, DType::F32, DType::F16, DType::BF16, DType::I64, DType::I32,
                                           DType::I16, DType::I8, DType::U64, DType::U32, DType::U16, DType::U8),
                         [](const ::testing::TestParamInfo<DType>& p) { return std::string(name(p.param)); });

// ---- casts --------------------------------------------------------------------------

// Rust `as` semantics written out: float -> int truncates toward zero, saturates, NaN -> 0.
std::int64_t float_to_int(double v, DType t) {
  if (std::isnan(v)) return 0;
  long double lo, hi;
  switch (t) {
    case DType::I64: lo = -9223372036854775808.0L; hi = 9223372036854775807.0L; break;
    case DType::I32: lo = INT32_MIN; hi = INT32_MAX; break;
    case DType::I16: lo = INT16_MIN; hi = INT16_MAX; break;
    case DType::I8: lo = INT8_MIN; hi = INT8_MAX; break;
    case DType::U64: lo = 0; hi = 18446744073709551615.0L; break;
    case DType::U32: lo = 0; hi = UINT32_MAX; break;
    case DType::U16: lo = 0; hi = UINT16_MAX; break;
    default: lo = 0; hi = UINT8_MAX; break;
  }
  const long double x = std::trunc(static_cast<long double>(v));
  if (x <= lo) return t == DType::U64 ? 0 : static_cast<std::int64_t>(lo);
  if (x >= hi) return t == DType::U64 ? static_cast<std::int64_t>(UINT64_MAX) : static_cast<std::int64_t>(hi);
  if (t == DType::U64) return static_cast<std::int64_t>(static_cast<std::uint64_t>(x));
  return static_cast<std::int64_t>(x);
}

Host cast_source(DType t) {
  Host h;
  h.dtype = t;
  if (is_fl(t)) {
    h.f = {0.0, -0.0, 1.5, -1.5, 2.75, -2.75, 127.9, -128.9, 300.7, -300.7, 65504, -70000, 1e10, -1e10,
           NAN, INFINITY, -INFINITY, 1e-3};
    for (double& v : h.f) v = round_to(t, v);
  } else if (is_bo(t)) {
    h.i = {0, 1, 1, 0};
  } else {
    std::vector<std::int64_t> all = {0, 1, -1, 100, -100, 127, -128, 200, 255, 256, 1000, -1000, 40000, -40000, 70000, 5000000000LL};
    for (std::int64_t v : all)
      if (wrap(t, v) == v) h.i.push_back(v);  // representable in t
  }
  h.shape = {h.floaty() ? h.f.size() : h.i.size()};
  return h;
}

Host expected_cast(const Host& src, DType to) {
  Host o;
  o.dtype = to;
  o.shape = src.shape;
  for (std::size_t k = 0; k < src.size(); ++k) {
    if (is_bo(to)) {
      o.i.push_back(src.floaty() ? (src.f[k] != 0 ? 1 : 0) : (src.i[k] != 0 ? 1 : 0));  // NaN != 0: true
    } else if (is_fl(to)) {
      const double v = src.floaty() ? src.f[k] : (is_un(src.dtype) ? static_cast<double>(static_cast<std::uint64_t>(src.i[k]))
                                                                     : static_cast<double>(src.i[k]));
      o.f.push_back(round_to(to, v));
    } else {
      o.i.push_back(src.floaty() ? float_to_int(src.f[k], to) : wrap(to, src.i[k]));
    }
  }
  return o;
}

class Cast : public ::testing::TestWithParam<std::pair<DType, DType>> {};
TEST_P(Cast, FollowsRustAsSemantics) {
  const auto [from, to] = GetParam();
  const Host src = cast_source(from);
  const Host want = expected_cast(src, to);
  Host got;
  if (is_fl(from)) {
    const auto t = make<1, Float>(src);
    if (is_fl(to)) got = read(t.cast(to));
    else if (is_bo(to)) got = read(t.bool_());
    else got = read(t.int_cast(to));
  } else if (is_bo(from)) {
    const auto t = make<1, Bool>(src);
    if (is_fl(to)) got = read(t.float_cast(to));
    else got = read(t.int_cast(to));
  } else {
    const auto t = make<1, Int>(src);
    if (is_fl(to)) got = read(t.float_cast(to));
    else if (is_bo(to)) got = read(t.bool_());
    else got = read(t.cast(to));
  }
  ASSERT_EQ(got.dtype, is_bo(to) ? DType::Bool : to);
  ASSERT_EQ(got.shape, want.shape);
  for (std::size_t k = 0; k < want.size(); ++k) {
    if (want.floaty()) {
      const double w = want.f[k], g = got.f[k];
      EXPECT_TRUE((std::isnan(w) && std::isnan(g)) || (w == g && std::signbit(w) == std::signbit(g)))
          << name(from) << "->" << name(to) << " [" << k << "] source " << src.at(k) << ": want " << w << " got " << g;
    } else {
      EXPECT_EQ(got.i[k], want.i[k]) << name(from) << "->" << name(to) << " [" << k << "] source " << src.at(k);
    }
  }
}
std::vector<std::pair<DType, DType>> cast_pairs() {
  const std::vector<DType> num = {DType::F64, DType::F32, DType::F16, DType::BF16, DType::I64, DType::I32, DType::I16,
                                  DType::I8,  DType::U64, DType::U32, DType::U16,  DType::U8};
  std::vector<std::pair<DType, DType>> out;
  for (DType a : num)
    for (DType b : num) out.emplace_back(a, b);
  for (DType a : num) out.emplace_back(a, DType::Bool);
  for (DType b : num) out.emplace_back(DType::Bool, b);
  return out;
}
INSTANTIATE_TEST_SUITE_P(AllPairs, Cast, ::testing::ValuesIn(cast_pairs()),
                         [](const ::testing::TestParamInfo<std::pair<DType, DType>>& p) {
                           auto clean = [](std::string s) {
                             s.erase(std::remove_if(s.begin(), s.end(), [](char c) { return !std::isalnum(c); }), s.end());
                             return s;
                           };
                           return clean(name(p.param.first)) + "_to_" + clean(name(p.param.second));
                         });

// f64 -> f16/bf16 rounds the double once (to nearest, ties to even); going through
// the nearest float first would drop the 2^-40 and turn these into ties that round down.
TEST(Cast, F64ToHalfRoundsOnce) {
  const double t40 = std::ldexp(1.0, -40);
  Host h{{4}, DType::F64, {1 + std::ldexp(1.0, -11) + t40, -(1 + std::ldexp(1.0, -11) + t40),
                           1 + std::ldexp(1.0, -8) + t40, 1 + std::ldexp(1.0, -11) - t40}, {}};
  const auto x = make<1, Float>(h);
  // f16 keeps 10 fraction bits: 1 + 2^-11 + 2^-40 is above the midpoint of 1 and 1 + 2^-10.
  EXPECT_EQ(read(x.cast(DType::F16)).f, (std::vector<double>{1.0009765625, -1.0009765625, 1.00390625, 1.0}));
  // bf16 keeps 7: 1 + 2^-8 + 2^-40 is above the midpoint of 1 and 1 + 2^-7.
  EXPECT_EQ(read(x.cast(DType::BF16)).f, (std::vector<double>{1.0, -1.0, 1.0078125, 1.0}));
}

// ---- clamp, relu --------------------------------------------------------------------

TEST(Clamp, FloatAndIntAcrossDTypes) {
  for (DType t : {DType::F64, DType::F32, DType::F16, DType::BF16}) {
    Host h{{6}, t, {-3, -1.5, 0, 0.5, 2, 7}, {}};
    const auto x = make<1, Float>(h).flip({0});  // a non-contiguous view
    EXPECT_EQ(read(x.clamp(-1.0, 1.0)).f, (std::vector<double>{1, 1, 0.5, 0, -1, -1})) << name(t);
    EXPECT_EQ(read(x.clamp_min(0.0)).f, (std::vector<double>{7, 2, 0.5, 0, 0, 0})) << name(t);
    EXPECT_EQ(read(x.clamp_max(0.0)).f, (std::vector<double>{0, 0, 0, 0, -1.5, -3})) << name(t);
    EXPECT_EQ(read(activation::relu(x)).f, (std::vector<double>{7, 2, 0.5, 0, 0, 0})) << name(t);
  }
  for (DType t : {DType::I64, DType::I32, DType::I16, DType::I8}) {
    Host h{{5}, t, {}, {-100, -2, 0, 3, 100}};
    EXPECT_EQ(read(make<1, Int>(h).clamp(-5, 5)).i, (std::vector<std::int64_t>{-5, -2, 0, 3, 5})) << name(t);
  }
  for (DType t : {DType::U64, DType::U32, DType::U16, DType::U8}) {
    Host h{{4}, t, {}, {0, 2, 9, 200}};
    EXPECT_EQ(read(make<1, Int>(h).clamp(1, 10)).i, (std::vector<std::int64_t>{1, 2, 9, 10})) << name(t);
  }
  Host h{{2}, DType::F32, {1, 2}, {}};
  EXPECT_THROWS(IndexError, (make<1, Float>(h).clamp(2.0, 1.0)), "clamp", "2", "1");
}

// Integer bounds and comparands outside the dtype's range act as numbers: they never
// wrap into the dtype (u8: -5 is not 251; i8: 1000 is not -24).
TEST(Clamp, OutOfRangeIntBoundsSaturate) {
  for (DType t : {DType::U64, DType::U32, DType::U16, DType::U8}) {
    const auto x = make<1, Int>(Host{{4}, t, {}, {0, 2, 9, 200}});
    EXPECT_EQ(read(x.clamp(-5, 10)).i, (std::vector<std::int64_t>{0, 2, 9, 10})) << name(t);
    EXPECT_EQ(read(x.clamp_min(-5)).i, (std::vector<std::int64_t>{0, 2, 9, 200})) << name(t);
    EXPECT_EQ(read(x.clamp_max(-5)).i, (std::vector<std::int64_t>{0, 0, 0, 0})) << name(t);
    EXPECT_EQ(read(x.clamp(3, std::int64_t{1} << 40)).i, (std::vector<std::int64_t>{3, 3, 9, 200})) << name(t);
  }
  for (DType t : {DType::I32, DType::I16, DType::I8}) {
    const auto x = make<1, Int>(Host{{4}, t, {}, {-100, -2, 3, 100}});
    EXPECT_EQ(read(x.clamp(-1000, 1000)).i, (std::vector<std::int64_t>{-100, -2, 3, 100})) << name(t);
    EXPECT_EQ(read(x.clamp_max(std::int64_t{1} << 40)).i, (std::vector<std::int64_t>{-100, -2, 3, 100})) << name(t);
    EXPECT_EQ(read(x.clamp_min(-(std::int64_t{1} << 40))).i, (std::vector<std::int64_t>{-100, -2, 3, 100})) << name(t);
  }
  const auto i64 = make<1, Int>(Host{{2}, DType::I64, {}, {-7, 7}});
  EXPECT_EQ(read(i64.clamp_max(std::numeric_limits<std::uint64_t>::max())).i, (std::vector<std::int64_t>{-7, 7}));
}

TEST(Compare, OutOfRangeIntComparandsCompareAsNumbers) {
  for (DType t : {DType::U8, DType::U16, DType::I8, DType::I16}) {
    const auto x = make<1, Int>(Host{{3}, t, {}, {0, 5, 100}});
    auto bools = [](const Tensor<1, Bool>& b) { return read(b).i; };
    using V = std::vector<std::int64_t>;
    for (std::int64_t s : {std::int64_t{-1000}, std::int64_t{100000}}) {
      const std::int64_t all = s < 0 ? 1 : 0;  // every element is above s
      SCOPED_TRACE(std::string(name(t)) + " s=" + std::to_string(s));
      EXPECT_EQ(bools(x.greater_elem(s)), V(3, all));
      EXPECT_EQ(bools(x.greater_equal_elem(s)), V(3, all));
      EXPECT_EQ(bools(x.lower_elem(s)), V(3, 1 - all));
      EXPECT_EQ(bools(x.lower_equal_elem(s)), V(3, 1 - all));
      EXPECT_EQ(bools(x.equal_elem(s)), V(3, 0));
      EXPECT_EQ(bools(x.not_equal_elem(s)), V(3, 1));
    }
  }
}

TEST(Transpose, SwapsTheLastTwoDims) {
  std::vector<float> v(24);
  std::iota(v.begin(), v.end(), 0.0f);
  const auto a = Tensor<3>::from_data(TensorData::from<float>(v, {2, 3, 4}), kCpu);
  const auto t = a.transpose();
  ASSERT_EQ(t.shape(), Shape({2, 4, 3}));
  const auto got = t.into_data().to_vec<float>();
  for (std::size_t b = 0; b < 2; ++b)
    for (std::size_t i = 0; i < 4; ++i)
      for (std::size_t j = 0; j < 3; ++j) EXPECT_EQ(got[(b * 4 + i) * 3 + j], v[(b * 3 + j) * 4 + i]);
  EXPECT_EQ(Tensor<1>::ones({3}, kCpu).transpose().shape(), Shape({3}));  // rank 1: nothing to swap
}

// ---- sort (host default) --------------------------------------------------------------

TEST(Sort, AscendingNaNLastDescendingNaNFirstStableIndices) {
  const auto a = Tensor<1>::from_data(TensorData::from<float>({3, NAN, -1, 3, 0, NAN, -7}), kCpu);
  const auto s = a.sort(0).into_data().to_vec<float>();
  const std::vector<float> want_s = {-7, -1, 0, 3, 3};
  for (std::size_t k = 0; k < 5; ++k) EXPECT_EQ(s[k], want_s[k]) << k;
  EXPECT_TRUE(std::isnan(s[5]) && std::isnan(s[6]));
  const auto d = a.sort_descending(0).into_data().to_vec<float>();
  EXPECT_TRUE(std::isnan(d[0]) && std::isnan(d[1]));
  const std::vector<float> want_d = {3, 3, 0, -1, -7};
  for (std::size_t k = 0; k < 5; ++k) EXPECT_EQ(d[k + 2], want_d[k]) << k;
  const auto [v, idx] = a.sort_with_indices(0);
  EXPECT_EQ(read(idx).i, (std::vector<std::int64_t>{6, 2, 4, 0, 3, 1, 5}));  // ties keep their order
  EXPECT_EQ(read(a.argsort(0, true)).i, (std::vector<std::int64_t>{1, 5, 0, 3, 4, 2, 6}));
  EXPECT_EQ(read(a.topk(2, 0)).f.size(), 2u);
}

TEST(Sort, IntAlongEachDim) {
  for (DType t : {DType::I64, DType::I32, DType::I8, DType::U16}) {
    Host h{{2, 3}, t, {}, {5, 1, 3, 2, 9, 0}};
    const auto x = make<2, Int>(h);
    EXPECT_EQ(read(x.sort(1)).i, (std::vector<std::int64_t>{1, 3, 5, 0, 2, 9})) << name(t);
    EXPECT_EQ(read(x.sort(0)).i, (std::vector<std::int64_t>{2, 1, 0, 5, 9, 3})) << name(t);
    EXPECT_EQ(read(x.sort_descending(-1)).i, (std::vector<std::int64_t>{5, 3, 1, 9, 2, 0})) << name(t);
    EXPECT_EQ(read(x.transpose().sort(1)).i, (std::vector<std::int64_t>{2, 5, 1, 9, 0, 3})) << name(t);
    EXPECT_EQ(read(x.topk(2, 1)).i, (std::vector<std::int64_t>{5, 3, 9, 2})) << name(t);
  }
  EXPECT_THROWS(IndexError, Tensor<1>::ones({3}, kCpu).topk(4, 0), "topk", "4");
}

// ---- masks ----------------------------------------------------------------------------

TEST(Mask, FillAndWhereAcrossDTypesWithBroadcastMask) {
  const std::vector<bool> mrow = {true, false, true};  // mask [1,3] broadcast over rows
  const auto m = Tensor<2, Bool>::from_data(TensorData::from<bool>(mrow, {1, 3}), kCpu).expand(std::array<std::int64_t, 2>{2, 3});
  const auto m_small = Tensor<2, Bool>::from_data(TensorData::from<bool>(mrow, {1, 3}), kCpu);
  for (DType t : {DType::F64, DType::F32, DType::F16, DType::BF16, DType::I64, DType::I32, DType::I16, DType::I8,
                  DType::U64, DType::U32, DType::U16, DType::U8}) {
    SCOPED_TRACE(name(t));
    Host x{{2, 3}, t, {}, {}}, v{{2, 3}, t, {}, {}};
    if (is_fl(t)) { x.f = {1, 2, 3, 4, 5, 6}; v.f = {10, 20, 30, 40, 50, 60}; }
    else { x.i = {1, 2, 3, 4, 5, 6}; v.i = {10, 20, 30, 40, 50, 60}; }
    auto check = [&](const Host& got, std::vector<double> want) {
      ASSERT_EQ(got.dtype, t);
      for (std::size_t k = 0; k < want.size(); ++k) EXPECT_EQ(got.at(k), want[k]) << k;
    };
    if (is_fl(t)) {
      const auto tx = make<2, Float>(x), tv = make<2, Float>(v);
      check(read(tx.mask_fill(m, 7.0)), {7, 2, 7, 7, 5, 7});
      check(read(tx.mask_fill(m_small, -1.0)), {-1, 2, -1, -1, 5, -1});
      check(read(tx.mask_where(m, tv)), {10, 2, 30, 40, 5, 60});
      check(read(tx.transpose().mask_where(m.transpose(), tv.transpose()).transpose()), {10, 2, 30, 40, 5, 60});
      check(read(tx), {1, 2, 3, 4, 5, 6});
    } else {
      const auto tx = make<2, Int>(x), tv = make<2, Int>(v);
      check(read(tx.mask_fill(m, 7)), {7, 2, 7, 7, 5, 7});
      check(read(tx.mask_where(m_small, tv)), {10, 2, 30, 40, 5, 60});
      check(read(tx.mask_where(m, tv.slice({Slice::range(0, 1)}))), {10, 2, 30, 10, 5, 30});  // value broadcast
      check(read(tx), {1, 2, 3, 4, 5, 6});
    }
  }
  const auto b = Tensor<2, Bool>::from_data(TensorData::from<bool>({false, false, false, true, true, true}, {2, 3}), kCpu);
  EXPECT_EQ(b.mask_fill(m, true).into_data().to_vec<bool>(), (std::vector<bool>{true, false, true, true, true, true}));
  EXPECT_EQ(b.mask_where(m, b.bool_not()).into_data().to_vec<bool>(),
            (std::vector<bool>{true, false, true, false, true, false}));
  EXPECT_THROWS(ShapeError, Tensor<2>::ones({3, 3}, kCpu).mask_fill(m, 1.0), "mask_fill", "[3, 3]");
  EXPECT_THROWS(DTypeError, Tensor<2>::ones({2, 3}, kCpu).mask_where(m, Tensor<2>::ones({2, 3}, kCpu, DType::F64)),
                "mask_where", "f32", "f64");
}

// ---- layout ops -----------------------------------------------------------------------

Tensor<3> iota3(std::size_t a, std::size_t b, std::size_t c) {
  std::vector<float> v(a * b * c);
  std::iota(v.begin(), v.end(), 0.0f);
  return Tensor<3>::from_data(TensorData::from<float>(v, {a, b, c}), kCpu);
}
std::vector<float> fv(const Tensor<3>& t) { return t.into_data().to_vec<float>(); }

TEST(Layout, ReshapeExpandPermuteFlipUnfold) {
  const auto a = iota3(2, 3, 4);
  // reshape with -1 inference, and of a non-contiguous (permuted) tensor.
  const auto r = a.reshape(std::array<std::int64_t, 2>{-1, 6});
  EXPECT_EQ(r.shape(), Shape({4, 6}));
  EXPECT_EQ(r.into_data().to_vec<float>(), fv(a));
  const auto p = a.permute({2, 0, 1});  // [4, 2, 3]: p[i][j][k] = a[j][k][i]
  ASSERT_EQ(p.shape(), Shape({4, 2, 3}));
  const auto pv = fv(p);
  for (std::size_t i = 0; i < 4; ++i)
    for (std::size_t j = 0; j < 2; ++j)
      for (std::size_t k = 0; k < 3; ++k) EXPECT_EQ(pv[(i * 2 + j) * 3 + k], static_cast<float>((j * 3 + k) * 4 + i));
  const auto pr = p.reshape(std::array<std::int64_t, 1>{24}).into_data().to_vec<float>();
  EXPECT_EQ(pr, pv);
  EXPECT_THROWS(ShapeError, a.reshape(std::array<std::int64_t, 2>{5, 5}), "reshape", "[2, 3, 4]");
  EXPECT_THROWS(ShapeError, a.reshape(std::array<std::int64_t, 2>{-1, 5}), "reshape", "5");

  // swap_dims and flip.
  const auto s = a.swap_dims(0, 2);
  EXPECT_EQ(s.shape(), Shape({4, 3, 2}));
  EXPECT_EQ(fv(s), fv(a.permute({2, 1, 0})));
  const auto f = a.flip({0, 2});
  const auto fvv = fv(f);
  for (std::size_t i = 0; i < 2; ++i)
    for (std::size_t j = 0; j < 3; ++j)
      for (std::size_t k = 0; k < 4; ++k) EXPECT_EQ(fvv[(i * 3 + j) * 4 + k], static_cast<float>(((1 - i) * 3 + j) * 4 + (3 - k)));
  EXPECT_THROWS(IndexError, a.flip({0, 0}), "flip", "0");

  // expand: size-1 dims, new leading dims, -1 keeps a dim.
  const auto one = Tensor<2>::from_data(TensorData::from<float>({1, 2, 3}, {1, 3}), kCpu);
  const auto e = one.expand(std::array<std::int64_t, 3>{2, 2, -1});
  EXPECT_EQ(e.shape(), Shape({2, 2, 3}));
  EXPECT_EQ(fv(e), (std::vector<float>{1, 2, 3, 1, 2, 3, 1, 2, 3, 1, 2, 3}));
  EXPECT_EQ(fv(e + iota3(2, 2, 3)), (std::vector<float>{1, 3, 5, 4, 6, 8, 7, 9, 11, 10, 12, 14}));
  EXPECT_THROWS(ShapeError, one.expand(std::array<std::int64_t, 2>{2, 4}), "expand");

  // unfold: windows of 3 every 2 along dim 0.
  const auto u = Tensor<1>::from_data(TensorData::from<float>({0, 1, 2, 3, 4, 5, 6}), kCpu).unfold(0, 3, 2);
  EXPECT_EQ(u.shape(), Shape({3, 3}));
  EXPECT_EQ(u.into_data().to_vec<float>(), (std::vector<float>{0, 1, 2, 2, 3, 4, 4, 5, 6}));

  // slice with steps in several dims, then an op on the view.
  const auto sl = a.slice({Slice::all(), Slice::range(0, 3, 2), Slice{0, std::nullopt, -2}});
  EXPECT_EQ(sl.shape(), Shape({2, 2, 2}));
  EXPECT_EQ(fv(sl), (std::vector<float>{3, 1, 11, 9, 15, 13, 23, 21}));
  EXPECT_EQ(fv(sl * 2.0), (std::vector<float>{6, 2, 22, 18, 30, 26, 46, 42}));
  // slice_assign with a negative step writes in reverse order.
  const auto z = Tensor<1>::zeros({6}, kCpu);
  const auto vals = Tensor<1>::from_data(TensorData::from<float>({60, 50, 40, 30, 20, 10}), kCpu);
  EXPECT_EQ(z.slice_assign({Slice{0, 6, -1}}, vals).into_data().to_vec<float>(), (std::vector<float>{10, 20, 30, 40, 50, 60}));
  EXPECT_EQ(z.into_data().to_vec<float>(), (std::vector<float>{0, 0, 0, 0, 0, 0}));
}

// Handing over a view that is the only owner of its buffer must not let an op
// write through broadcast (stride-0) or strided elements it does not own alone.
TEST(Ownership, UniqueViewsAreNotWrittenThroughWrongly) {
  auto row = [] { return Tensor<2>::from_data(TensorData::from<float>({1, 2, 3}, {1, 3}), kCpu); };
  const std::array<std::int64_t, 2> to{2, 3};
  const auto m = Tensor<2, Bool>::from_data(TensorData::from<bool>({true, false, false, false, false, false}, {2, 3}), kCpu);
  auto e1 = row().expand(to);
  EXPECT_EQ(std::move(e1).mask_fill(m, 9.0).into_data().to_vec<float>(), (std::vector<float>{9, 2, 3, 1, 2, 3}));
  auto e2 = row().expand(to);
  const auto w = Tensor<2>::from_data(TensorData::from<float>({5, 6, 7, 8, 9, 10}, {2, 3}), kCpu);
  EXPECT_EQ(std::move(e2).mask_where(m, w).into_data().to_vec<float>(), (std::vector<float>{5, 2, 3, 1, 2, 3}));
  auto e3 = row().expand(to);
  const auto seven = Tensor<2>::full({1, 1}, 7.0, kCpu);
  EXPECT_EQ(std::move(e3).slice_assign({Slice::range(0, 1), Slice::range(0, 1)}, seven).into_data().to_vec<float>(),
            (std::vector<float>{7, 2, 3, 1, 2, 3}));
  // A strided view that shares its buffer with another live view.
  auto whole = Tensor<1>::from_data(TensorData::from<float>({1, 2, 3, 4, 5, 6}), kCpu);
  const auto evens = whole.slice({Slice::range(0, 6, 2)});
  const auto r = std::move(whole).slice_assign({Slice::range(1, 6, 2)}, Tensor<1>::zeros({3}, kCpu));
  EXPECT_EQ(r.into_data().to_vec<float>(), (std::vector<float>{1, 0, 3, 0, 5, 0}));
  EXPECT_EQ(evens.into_data().to_vec<float>(), (std::vector<float>{1, 3, 5}));
  // A unique window view (unfold overlaps its elements).
  auto u = Tensor<1>::from_data(TensorData::from<float>({0, 1, 2, 3, 4}), kCpu).unfold(0, 2, 1);
  EXPECT_EQ((std::move(u) + Tensor<2>::ones({4, 2}, kCpu)).into_data().to_vec<float>(),
            (std::vector<float>{1, 2, 2, 3, 3, 4, 4, 5}));
}

}  // namespace
