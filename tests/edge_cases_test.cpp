// Edge cases from the reference catalogue (backend-surface.md, "30+ edge cases"),
// with hand-written expectations, on every device (tt::conf::devices(): cpu, the
// mini test backend, vulkan:0 when present, any backend registered later; one
// device per process with TENSOR_TEST_DEVICE). The semantics hold on every device.
// Ops that raise NotImplemented are skipped (and say so), and so are the parts that
// need a dtype the device does not support.
#include "conformance/devices.hpp"
#include "test_util.hpp"

namespace {

using namespace tt;

const Device& dev() { return tt::conf::DeviceScope::current(); }

class EdgeCases : public ::testing::TestWithParam<Device> {
 protected:
  void SetUp() override { scope_.enter(GetParam()); }
  void TearDown() override { scope_.leave(); }
  tt::conf::DeviceScope scope_;
};

INSTANTIATE_TEST_SUITE_P(Devices, EdgeCases, ::testing::ValuesIn(tt::conf::devices()),
                         [](const ::testing::TestParamInfo<Device>& p) { return tt::conf::test_name(p.param); });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(EdgeCases);  // TENSOR_TEST_DEVICE names an absent device

// Skips the rest of the test when the device lacks one of the dtypes.
#define REQUIRE_DTYPES(...)                                                              \
  for (DType required_ : {__VA_ARGS__})                                                  \
    if (!dev().supports_dtype(required_))                                                \
      GTEST_SKIP() << dev().to_string() << " does not support " << name(required_)

template <class T>
Tensor<1> f1(std::vector<T> v) { return Tensor<1>::from_data(TensorData::from<T>(v), dev()); }
template <class T>
Tensor<1, Int> i1(std::vector<T> v) { return Tensor<1, Int>::from_data(TensorData::from<T>(v), dev()); }
template <class T>
Tensor<2> f2(std::vector<T> v, std::size_t r, std::size_t c) {
  return Tensor<2>::from_data(TensorData::from<T>(v, {r, c}), dev());
}
template <class T, std::size_t D, class K>
std::vector<T> vals(const Tensor<D, K>& t) { return t.into_data().template to_vec<T>(); }

#define SKIP_IF_NOT_IMPLEMENTED(stmt)                                          \
  try {                                                                        \
    (void)(stmt);                                                              \
  } catch (const NotImplemented& e) {                                          \
    GTEST_SKIP() << "NotImplemented on " << dev().to_string() << ": " << e.what(); \
  }

// 5. Sum of empty = 0, prod of empty = 1; sum_dim of [3,0] along 1 gives zeros.
TEST_P(EdgeCases, EmptyReductions) {
  const auto e = Tensor<2>::zeros({3, 0}, dev());
  EXPECT_EQ(vals<float>(e.sum()), std::vector<float>{0});
  EXPECT_EQ(vals<float>(e.prod()), std::vector<float>{1});
  EXPECT_EQ(e.sum_dim(1).shape(), Shape({3, 1}));
  EXPECT_EQ(vals<float>(e.sum_dim(1)), (std::vector<float>{0, 0, 0}));
  EXPECT_EQ(vals<float>(e.prod_dim(1)), (std::vector<float>{1, 1, 1}));
  const auto ei = Tensor<2, Int>::zeros({3, 0}, dev());
  EXPECT_EQ(vals<std::int32_t>(ei.sum()), std::vector<std::int32_t>{0});
  EXPECT_EQ(vals<std::int32_t>(ei.prod()), std::vector<std::int32_t>{1});
  // 8. sum_dim over a non-empty axis of a [0,3] tensor is empty [0,1].
  const auto z = Tensor<2>::zeros({0, 3}, dev());
  EXPECT_EQ(z.sum_dim(1).shape(), Shape({0, 1}));
  EXPECT_EQ(z.sum_dim(0).shape(), Shape({1, 3}));
  EXPECT_EQ(vals<float>(z.sum_dim(0)), (std::vector<float>{0, 0, 0}));
}

// 6. Mean of empty float = NaN, int mean of empty raises.
TEST_P(EdgeCases, MeanOfEmpty) {
  const auto e = Tensor<2>::zeros({3, 0}, dev());
  const auto m = vals<float>(e.mean());
  ASSERT_EQ(m.size(), 1u);
  EXPECT_TRUE(std::isnan(m[0])) << m[0];
  const auto md = vals<float>(e.mean_dim(1));
  ASSERT_EQ(md.size(), 3u);
  for (float x : md) EXPECT_TRUE(std::isnan(x)) << x;
  const auto ei = Tensor<2, Int>::zeros({3, 0}, dev());
  EXPECT_THROWS(ShapeError, ei.mean(), "mean", "[3, 0]");
  EXPECT_THROWS(ShapeError, ei.mean_dim(1), "mean_dim", "[3, 0]");
  EXPECT_EQ(ei.mean_dim(0).shape(), Shape({1, 0}));  // no empty lane: fine
}

// 32. mean must not overflow an intermediate sum in narrow types.
TEST_P(EdgeCases, MeanOfArange1024) {
  REQUIRE_DTYPES(DType::F64, DType::F16, DType::BF16);
  const auto a = Tensor<1, Int>::arange(0, 1024, dev());
  EXPECT_EQ(vals<float>(a.float_().mean()), std::vector<float>{511.5f});
  EXPECT_EQ(vals<double>(a.float_cast(DType::F64).mean()), std::vector<double>{511.5});
  EXPECT_EQ(vals<std::int32_t>(a.mean()), std::vector<std::int32_t>{511});  // integer division
  // f16 holds 511.5 exactly, but not the sum 523776 (max 65504).
  const Host h16 = read(a.float_cast(DType::F16).mean());
  ASSERT_EQ(h16.f.size(), 1u);
  EXPECT_EQ(h16.f[0], 511.5) << "f16 mean of 0..1023";
  const Host h16d = read(a.float_cast(DType::F16).reshape(std::array<std::int64_t, 2>{1, 1024}).mean_dim(1));
  ASSERT_EQ(h16d.f.size(), 1u);
  EXPECT_EQ(h16d.f[0], 511.5) << "f16 mean_dim of 0..1023";
  // bf16 rounds 511.5 to 512.
  const Host hb = read(a.float_cast(DType::BF16).mean());
  ASSERT_EQ(hb.f.size(), 1u);
  EXPECT_EQ(hb.f[0], 512.0) << "bf16 mean of 0..1023";
}

// The same rule for narrow ints: mean (all elements) must agree with mean_dim,
// i.e. not wrap an intermediate sum in the tensor's own dtype.
TEST_P(EdgeCases, IntMeanDoesNotWrapInNarrowTypes) {
  REQUIRE_DTYPES(DType::I8, DType::I16);
  const auto a8 = i1<std::int8_t>({100, 100, 100});
  EXPECT_EQ(vals<std::int8_t>(a8.mean_dim(0)), std::vector<std::int8_t>{100});
  EXPECT_EQ(vals<std::int8_t>(a8.mean()), std::vector<std::int8_t>{100});
  const auto a16 = i1<std::int16_t>({30000, 30000});
  EXPECT_EQ(vals<std::int16_t>(a16.mean_dim(0)), std::vector<std::int16_t>{30000});
  EXPECT_EQ(vals<std::int16_t>(a16.mean()), std::vector<std::int16_t>{30000});
  // The sum itself does wrap: it is an i8 result.
  EXPECT_EQ(vals<std::int8_t>(a8.sum()), std::vector<std::int8_t>{44});
}

// 64-bit integers stay exact beyond 2^53 (no detour through double).
TEST_P(EdgeCases, LargeIntegersAreExact) {
  REQUIRE_DTYPES(DType::I64, DType::U64);
  const std::int64_t v = (std::int64_t{1} << 53) + 1;
  const auto t = i1<std::int64_t>({v, -v});
  EXPECT_EQ(vals<std::int64_t>(t.add_scalar(std::int64_t{1})), (std::vector<std::int64_t>{v + 1, -v + 1}));
  EXPECT_EQ(vals<bool>(t.equal_elem(std::int64_t{1} << 53)), (std::vector<bool>{false, false}));
  EXPECT_EQ(vals<bool>(t.greater_elem(std::int64_t{1} << 53)), (std::vector<bool>{true, false}));
  EXPECT_EQ(vals<std::int64_t>(t + t), (std::vector<std::int64_t>{2 * v, -2 * v}));
  EXPECT_EQ(vals<std::int64_t>(t.sum()), std::vector<std::int64_t>{0});
  EXPECT_EQ(vals<std::int64_t>(t.remainder_scalar(std::int64_t{2})), (std::vector<std::int64_t>{1, 1}));
  EXPECT_EQ(vals<std::int64_t>((Tensor<1, Int>::full({1}, Scalar(v), dev(), DType::I64))), std::vector<std::int64_t>{v});
  const std::uint64_t big = (std::uint64_t{1} << 63) + 5;
  const auto u = i1<std::uint64_t>({big, 3});
  EXPECT_EQ(vals<bool>(u.greater_elem(std::uint64_t{4})), (std::vector<bool>{true, false}));
  EXPECT_EQ(vals<std::uint64_t>(u.div_scalar(std::uint64_t{2})), (std::vector<std::uint64_t>{big / 2, 1}));
  EXPECT_EQ(vals<std::uint64_t>(u.remainder_scalar(std::uint64_t{7})), (std::vector<std::uint64_t>{big % 7, 3}));
  EXPECT_EQ(vals<std::uint64_t>(u.sum()), std::vector<std::uint64_t>{big + 3});
  EXPECT_EQ(vals<bool>(i1<std::uint64_t>({~std::uint64_t{0}}).equal_elem(~std::uint64_t{0})), std::vector<bool>{true});
}

// 10. Remainder follows the sign of the divisor.
TEST_P(EdgeCases, RemainderSignRules) {
  const auto a = f1<float>({-3, -2, -1, 1, 2, 3});
  const auto b = f1<float>({2, 3, 1, 2, 1, 3});
  EXPECT_EQ(vals<float>(a % b), (std::vector<float>{1, 1, 0, 1, 0, 0}));
  EXPECT_EQ(vals<float>(f1<float>({1, 2, 3, 4, 5}).remainder_scalar(-1.5)),
            (std::vector<float>{-0.5f, -1.0f, 0.0f, -0.5f, -1.0f}));
  const auto ia = i1<std::int32_t>({-3, -2, -1, 1, 2, 3});
  EXPECT_EQ(vals<std::int32_t>(ia.remainder_scalar(2)), (std::vector<std::int32_t>{1, 0, 1, 1, 0, 1}));
  EXPECT_EQ(vals<std::int32_t>(ia % i1<std::int32_t>({2, 2, 2, 2, 2, 2})), (std::vector<std::int32_t>{1, 0, 1, 1, 0, 1}));
  EXPECT_EQ(vals<std::int32_t>(ia.remainder_scalar(-2)), (std::vector<std::int32_t>{-1, 0, -1, -1, 0, -1}));
  // Integer division truncates toward zero.
  EXPECT_EQ(vals<std::int32_t>(ia.div_scalar(2)), (std::vector<std::int32_t>{-1, -1, 0, 0, 1, 1}));
}

// Documented: integer x / 0 = 0 and x % 0 = 0 (no trap), for every int dtype.
TEST_P(EdgeCases, IntegerDivisionByZeroIsZero) {
  for (DType t : {DType::I64, DType::I32, DType::I16, DType::I8, DType::U64, DType::U32, DType::U16, DType::U8}) {
    SCOPED_TRACE(name(t));
    if (!dev().supports_dtype(t)) continue;
    const auto a = Tensor<1, Int>::from_data(TensorData::from<std::int64_t>({7, 0, 5}).convert(t), dev());
    ASSERT_EQ(a.dtype(), t);
    const auto z = Tensor<1, Int>::zeros({3}, dev(), t);
    EXPECT_EQ(read(a / z).i, (std::vector<std::int64_t>{0, 0, 0}));
    EXPECT_EQ(read(a % z).i, (std::vector<std::int64_t>{0, 0, 0}));
    EXPECT_EQ(read(a.div_scalar(0)).i, (std::vector<std::int64_t>{0, 0, 0}));
    EXPECT_EQ(read(a.remainder_scalar(0)).i, (std::vector<std::int64_t>{0, 0, 0}));
    EXPECT_EQ(read(a).i, (std::vector<std::int64_t>{7, 0, 5}));
  }
}

// 19. Slices: reversed range is empty, step 0 raises, negative step reverses.
TEST_P(EdgeCases, Slices) {
  const auto a = f1<float>({0, 1, 2, 3, 4, 5});
  EXPECT_EQ(a.slice({Slice::range(2, 1)}).shape(), Shape({0}));
  EXPECT_EQ(a.slice({Slice::range(1, 1)}).shape(), Shape({0}));
  EXPECT_THROWS(IndexError, a.slice({Slice::range(0, 6, 0)}), "slice", "step");
  const auto m = f2<float>({0, 1, 2, 3, 4, 5}, 2, 3);
  EXPECT_EQ(vals<float>(m.slice({Slice::all(), Slice{0, std::nullopt, -1}})), (std::vector<float>{2, 1, 0, 5, 4, 3}));
  EXPECT_EQ(vals<float>(a.slice({Slice::range(0, 6, -2)})), (std::vector<float>{5, 3, 1}));
  EXPECT_EQ(vals<float>(a.slice({Slice::range(1, 5, -1)})), (std::vector<float>{4, 3, 2, 1}));
  EXPECT_EQ(vals<float>(a.slice({Slice::range(-3, -1)})), (std::vector<float>{3, 4}));
  EXPECT_EQ(vals<float>(a.slice({Slice::range(0, 6, 4)})), (std::vector<float>{0, 4}));
  // The negative-step result is a correct tensor for further ops.
  EXPECT_EQ(vals<float>(a.slice({Slice{0, std::nullopt, -1}}) + a), (std::vector<float>{5, 5, 5, 5, 5, 5}));
}

// 20. narrow with length 0 raises.
TEST_P(EdgeCases, NarrowLengthZeroRaises) {
  const auto a = f2<float>({0, 1, 2, 3, 4, 5}, 2, 3);
  EXPECT_THROWS(IndexError, a.narrow(1, 0, 0), "narrow", "0");
  EXPECT_EQ(vals<float>(a.narrow(1, 1, 2)), (std::vector<float>{1, 2, 4, 5}));
}

// 12-14. round half to even, trunc toward zero, float->int truncates, sign(-0.0) = +0.0.
TEST_P(EdgeCases, RoundingAndSign) {
  EXPECT_EQ(vals<float>(f1<float>({1.5, 2.5, 3.5, 4.5, 5.5, 6.5}).round()), (std::vector<float>{2, 2, 4, 4, 6, 6}));
  EXPECT_EQ(vals<float>(f1<float>({-1.7f, -2.9f, -3.1f, -4.5f}).trunc()), (std::vector<float>{-1, -2, -3, -4}));
  EXPECT_EQ(vals<std::int32_t>(f1<float>({4.4f, 5.5f, 6.6f}).int_cast(DType::I32)), (std::vector<std::int32_t>{4, 5, 6}));
  EXPECT_EQ(vals<float>(f1<float>({-0.2f, -1, 2, 3, 0, -5}).sign()), (std::vector<float>{-1, -1, 1, 1, 0, -1}));
  const auto s = vals<float>(f1<float>({-0.0f}).sign());
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(std::bit_cast<std::uint32_t>(s[0]), 0u) << "sign(-0.0) must be +0.0";
}

// 15. abs(INT_MIN) wraps to INT_MIN.
TEST_P(EdgeCases, AbsOfIntMinWraps) {
  REQUIRE_DTYPES(DType::I32, DType::I8);
  const auto a = i1<std::int32_t>({INT32_MIN, -5, 5});
  EXPECT_EQ(vals<std::int32_t>(a.abs()), (std::vector<std::int32_t>{INT32_MIN, 5, 5}));
  const auto b = i1<std::int8_t>({-128, -1});
  EXPECT_EQ(vals<std::int8_t>(b.abs()), (std::vector<std::int8_t>{-128, 1}));
}

// 16. cummax/cummin propagate NaN forward; 32. cumsum on a transposed view.
TEST_P(EdgeCases, CumulativeScans) {
  std::vector<float> cm;
  SKIP_IF_NOT_IMPLEMENTED(cm = vals<float>(f1<float>({1, NAN, 5, 2}).cummax(0)));
  ASSERT_EQ(cm.size(), 4u);
  EXPECT_EQ(cm[0], 1);
  for (int k = 1; k < 4; ++k) EXPECT_TRUE(std::isnan(cm[k])) << k << ": " << cm[k];
  const auto cn = vals<float>(f1<float>({NAN, 1, 5}).cummin(0));
  for (float x : cn) EXPECT_TRUE(std::isnan(x)) << x;
  const auto t = f2<float>({1, 2, 3, 4}, 2, 2).transpose();  // [[1,3],[2,4]]
  EXPECT_EQ(vals<float>(t.cumsum(1)), (std::vector<float>{1, 4, 2, 6}));
}

// 9. any of empty = false, all of empty = true; all_dim over an empty axis is true.
TEST_P(EdgeCases, AnyAllOfEmpty) {
  const auto e = Tensor<2>::zeros({3, 0}, dev());
  std::vector<bool> any;
  SKIP_IF_NOT_IMPLEMENTED(any = vals<bool>(e.any()));
  EXPECT_EQ(any, std::vector<bool>{false});
  EXPECT_EQ(vals<bool>(e.all()), std::vector<bool>{true});
  EXPECT_EQ(vals<bool>(e.all_dim(1)), (std::vector<bool>{true, true, true}));
  EXPECT_EQ(vals<bool>(e.any_dim(1)), (std::vector<bool>{false, false, false}));
  const auto b = Tensor<2, Bool>::from_data(TensorData::from<bool>({true, false, true, true}, {2, 2}), dev());
  EXPECT_EQ(vals<bool>(b.all_dim(1)), (std::vector<bool>{false, true}));
  EXPECT_EQ(vals<bool>(b.any()), std::vector<bool>{true});
}

// 17. sort puts NaN last ascending.
TEST_P(EdgeCases, SortNaNLast) {
  const auto a = f2<float>({-0.5f, NAN, 0, 0.94f, -0.3f, NAN}, 3, 2);
  const auto s = vals<float>(a.sort(0));
  ASSERT_EQ(s.size(), 6u);
  EXPECT_EQ(s[0], -0.5f);
  EXPECT_EQ(s[1], 0.94f);
  EXPECT_EQ(s[2], -0.3f);
  EXPECT_TRUE(std::isnan(s[3]));
  EXPECT_EQ(s[4], 0.0f);
  EXPECT_TRUE(std::isnan(s[5]));
}

// 21. cat ignores empty tensors; 22. repeat with a 0 factor gives an empty dim.
TEST_P(EdgeCases, CatAndRepeatWithEmpty) {
  const auto a = f2<float>({1, 2, 3}, 1, 3);
  const auto e = Tensor<2>::zeros({1, 0}, dev());
  EXPECT_EQ(vals<float>(cat<2, Float>({a, e}, 1)), (std::vector<float>{1, 2, 3}));
  EXPECT_EQ(vals<float>(cat<2, Float>({e, a}, 1)), (std::vector<float>{1, 2, 3}));
  EXPECT_EQ((cat<2, Float>({e, e}, 1).shape()), Shape({1, 0}));
  EXPECT_EQ(Tensor<3>::ones({2, 3, 4}, dev()).repeat_dim(1, 0).shape(), Shape({2, 0, 4}));
  EXPECT_EQ(vals<float>(a.repeat_dim(0, 2)), (std::vector<float>{1, 2, 3, 1, 2, 3}));
}

// 24. mask_where with NaN input; mask_fill on -inf tensors.
TEST_P(EdgeCases, MasksWithNaNAndInf) {
  const auto x = f1<float>({NAN, 1, NAN, -INFINITY});
  const auto m = Tensor<1, Bool>::from_data(TensorData::from<bool>({true, false, false, true}), dev());
  const auto w = vals<float>(x.mask_where(m, f1<float>({7, 8, 9, 10})));
  EXPECT_EQ(w[0], 7);
  EXPECT_EQ(w[1], 1);
  EXPECT_TRUE(std::isnan(w[2]));
  EXPECT_EQ(w[3], 10);
  const auto f = vals<float>(f1<float>({-INFINITY, -INFINITY, 2}).mask_fill(
      Tensor<1, Bool>::from_data(TensorData::from<bool>({false, true, true}), dev()), 5.0));
  EXPECT_EQ(f, (std::vector<float>{-INFINITY, 5, 5}));
}

// 25. Comparison with infinities.
TEST_P(EdgeCases, ComparisonWithInfinities) {
  REQUIRE_DTYPES(DType::F16);
  const auto a = f1<float>({0, 1, 2, INFINITY, 4, -INFINITY});
  const auto b = f1<float>({1, 1, 1, INFINITY, 3, -INFINITY});
  EXPECT_EQ(vals<bool>(a.equal(b)), (std::vector<bool>{false, true, false, true, false, true}));
  EXPECT_EQ(vals<bool>(a.not_equal(b)), (std::vector<bool>{true, false, true, false, true, false}));
  EXPECT_EQ(vals<bool>(f1<float>({NAN, 1}).equal(f1<float>({NAN, 1}))), (std::vector<bool>{false, true}));
  EXPECT_EQ(vals<bool>(f1<float>({NAN, INFINITY, -INFINITY, 1}).is_nan()), (std::vector<bool>{true, false, false, false}));
  EXPECT_EQ(vals<bool>(f1<float>({NAN, INFINITY, -INFINITY, 1}).is_inf()), (std::vector<bool>{false, true, true, false}));
  // is_inf must not overflow in f16: +-60000 is finite.
  const auto h = Tensor<1>::from_data(TensorData::from<float>({60000, -60000}).convert(DType::F16), dev());
  EXPECT_EQ(vals<bool>(h.is_inf()), (std::vector<bool>{false, false}));
}

// 31. Negative base with integral float exponent; 32. arange_step with step 0 raises.
TEST_P(EdgeCases, PowAndArange) {
  EXPECT_EQ(vals<float>(f1<float>({-2, -3}).powf(f1<float>({3, 3}))), (std::vector<float>{-8, -27}));
  EXPECT_EQ(vals<float>(f1<float>({-2}).powf_scalar(4.0)), std::vector<float>{16});
  EXPECT_THROWS(IndexError, (Tensor<1, Int>::arange_step(0, 5, 0, dev())), "arange_step", "step");
  EXPECT_EQ(vals<std::int32_t>(Tensor<1, Int>::arange_step(5, 0, -2, dev())), (std::vector<std::int32_t>{5, 3, 1}));
}

// 1-4. argmax/argmin ties and NaN (skipped while argmax is not implemented).
TEST_P(EdgeCases, ArgmaxTiesAndNaN) {
  const auto a = f2<float>({3, 3, -2, -2}, 1, 4);
  std::vector<std::int32_t> am;
  SKIP_IF_NOT_IMPLEMENTED(am = vals<std::int32_t>(a.argmax(1)));
  EXPECT_EQ(am, std::vector<std::int32_t>{0});
  EXPECT_EQ(vals<std::int32_t>(a.argmin(1)), std::vector<std::int32_t>{2});
  const auto n = f2<float>({1, NAN, -3}, 1, 3);
  EXPECT_EQ(vals<std::int32_t>(n.argmax(1)), std::vector<std::int32_t>{1});
  EXPECT_EQ(vals<std::int32_t>(n.argmin(1)), std::vector<std::int32_t>{1});
  const auto mx = vals<float>(n.max_dim(1));
  EXPECT_TRUE(std::isnan(mx[0]));
  EXPECT_THROWS(ShapeError, Tensor<2>::zeros({0, 0}, dev()).max_dim(1), "max_dim");
}

// ---- one named test per catalogue edge case for indexing, extrema, sort, activations ----

template <class T>
Tensor<2, Int> i2(std::vector<T> v, std::size_t r, std::size_t c) {
  return Tensor<2, Int>::from_data(TensorData::from<T>(v, {r, c}), dev());
}

// 1. Ties go to the lowest index: argmax/argmin and the _with_indices forms.
TEST_P(EdgeCases, ArgmaxTiesLowestIndex) {
  const auto a = f2<float>({3, 3, -2, -2}, 1, 4);
  EXPECT_EQ(vals<std::int32_t>(a.argmax(1)), std::vector<std::int32_t>{0});
  EXPECT_EQ(vals<std::int32_t>(a.argmin(1)), std::vector<std::int32_t>{2});
  const auto [mv, mi] = a.max_dim_with_indices(1);
  EXPECT_EQ(vals<float>(mv), std::vector<float>{3});
  EXPECT_EQ(vals<std::int32_t>(mi), std::vector<std::int32_t>{0});
  const auto [nv, ni] = a.min_dim_with_indices(1);
  EXPECT_EQ(vals<float>(nv), std::vector<float>{-2});
  EXPECT_EQ(vals<std::int32_t>(ni), std::vector<std::int32_t>{2});
  const auto b = i2<std::int32_t>({1, 3, 3, 2, 2, 0}, 2, 3);
  EXPECT_EQ(vals<std::int32_t>(b.argmax(1)), (std::vector<std::int32_t>{1, 0}));
  EXPECT_EQ(vals<std::int32_t>(b.argmin(1)), (std::vector<std::int32_t>{0, 2}));
  EXPECT_EQ(vals<std::int32_t>(b.max_dim_with_indices(1).second), (std::vector<std::int32_t>{1, 0}));
  EXPECT_EQ(vals<std::int32_t>(b.min_dim_with_indices(1).second), (std::vector<std::int32_t>{0, 2}));
  // The same along dim 0 of the transposed view (a strided lane).
  EXPECT_EQ(vals<std::int32_t>(b.transpose().argmax(0)), (std::vector<std::int32_t>{1, 0}));
}

// 2. argmax and argmin both point at a NaN.
TEST_P(EdgeCases, ArgmaxArgminPropagateNaN) {
  const auto n = f2<float>({1, NAN, -3}, 1, 3);
  EXPECT_EQ(vals<std::int32_t>(n.argmax(1)), std::vector<std::int32_t>{1});
  EXPECT_EQ(vals<std::int32_t>(n.argmin(1)), std::vector<std::int32_t>{1});
  EXPECT_EQ(vals<std::int32_t>(n.max_dim_with_indices(1).second), std::vector<std::int32_t>{1});
  EXPECT_EQ(vals<std::int32_t>(n.min_dim_with_indices(1).second), std::vector<std::int32_t>{1});
}

// 3. An all-NaN lane gives index 0 (the first NaN), along either dim.
TEST_P(EdgeCases, AllNaNLaneGivesFirstIndex) {
  const auto r = f2<float>({NAN, NAN, NAN}, 1, 3);
  EXPECT_EQ(vals<std::int32_t>(r.argmax(1)), std::vector<std::int32_t>{0});
  EXPECT_EQ(vals<std::int32_t>(r.argmin(1)), std::vector<std::int32_t>{0});
  const auto c = f2<float>({NAN, 1, NAN, 2, -3, 4}, 3, 2);
  EXPECT_EQ(vals<std::int32_t>(c.argmax(0)), (std::vector<std::int32_t>{0, 2}));
  EXPECT_EQ(vals<std::int32_t>(c.argmin(0)), (std::vector<std::int32_t>{0, 0}));
}

// 4. max_dim / min_dim / max_abs_dim propagate NaN; max_abs_dim returns |a|.
TEST_P(EdgeCases, MaxMinDimPropagateNaN) {
  const auto n = f2<float>({1, NAN, 3}, 1, 3);
  EXPECT_TRUE(std::isnan(vals<float>(n.max_dim(1))[0]));
  EXPECT_TRUE(std::isnan(vals<float>(n.min_dim(1))[0]));
  EXPECT_TRUE(std::isnan(vals<float>(n.max())[0]));
  EXPECT_TRUE(std::isnan(vals<float>(n.min())[0]));
  const auto m = vals<float>(f2<float>({1, NAN, -3, 1, -4, 3}, 2, 3).max_abs_dim(1));
  ASSERT_EQ(m.size(), 2u);
  EXPECT_TRUE(std::isnan(m[0]));
  EXPECT_EQ(m[1], 4.0f);
  EXPECT_EQ(vals<float>(f1<float>({1, -7, 3}).max_abs()), std::vector<float>{7});
  EXPECT_EQ(vals<std::int32_t>(i1<std::int32_t>({1, -7, 3}).max_abs()), std::vector<std::int32_t>{7});
}

// 5 (and §0). prod is a real product: zeros and negatives, empty = 1.
TEST_P(EdgeCases, ProdHandlesZerosAndNegatives) {
  EXPECT_EQ(vals<float>(f1<float>({-5, 1, 2, 3, 4, 5}).prod()), std::vector<float>{-600});
  EXPECT_EQ(vals<float>(f1<float>({-5, 0, 2}).prod()), std::vector<float>{0});
  EXPECT_EQ(vals<std::int32_t>(i1<std::int32_t>({-5, 1, 2, 3, 4, 5}).prod()), std::vector<std::int32_t>{-600});
  EXPECT_EQ(vals<float>(f2<float>({-5, 1, 2, 3, 4, 5}, 2, 3).prod_dim(1)), (std::vector<float>{-10, 60}));
  EXPECT_EQ(vals<float>(Tensor<1>::zeros({0}, dev()).prod()), std::vector<float>{1});
}

// 7. Extrema of an empty tensor or over an empty axis raise, even when the result would be empty.
TEST_P(EdgeCases, ExtremaOfEmptyRaise) {
  const auto e = Tensor<2>::zeros({3, 0}, dev());
  EXPECT_THROWS(ShapeError, e.max(), "max");
  EXPECT_THROWS(ShapeError, e.min(), "min");
  EXPECT_THROWS(ShapeError, e.max_abs(), "max_abs");
  EXPECT_THROWS(ShapeError, e.max_dim(1), "max_dim");
  EXPECT_THROWS(ShapeError, e.argmax(1), "argmax");
  EXPECT_THROWS(ShapeError, e.min_dim_with_indices(1), "min_dim_with_indices");
  EXPECT_THROWS(ShapeError, Tensor<2>::zeros({0, 0}, dev()).max_dim(1), "max_dim");
}

// 9. any/all of empty for int and bool tensors too.
TEST_P(EdgeCases, AnyAllOfEmptyIntAndBool) {
  const auto ei = Tensor<2, Int>::zeros({3, 0}, dev());
  EXPECT_EQ(vals<bool>(ei.any()), std::vector<bool>{false});
  EXPECT_EQ(vals<bool>(ei.all()), std::vector<bool>{true});
  EXPECT_EQ(vals<bool>(ei.all_dim(1)), (std::vector<bool>{true, true, true}));
  const auto eb = Tensor<2, Bool>::from_data(TensorData::from<bool>({}, {0, 2}), dev());
  EXPECT_EQ(vals<bool>(eb.any()), std::vector<bool>{false});
  EXPECT_EQ(vals<bool>(eb.all()), std::vector<bool>{true});
  EXPECT_EQ(vals<bool>(eb.any_dim(0)), (std::vector<bool>{false, false}));
  // NaN is nonzero.
  EXPECT_EQ(vals<bool>(f1<float>({0, NAN}).any()), std::vector<bool>{true});
  EXPECT_EQ(vals<bool>(f1<float>({-0.0f, 1}).all()), std::vector<bool>{false});
}

// 14. sign(-0.0) is +0.0 bit-exactly, also in f64 and f16; NaN gives 0 (as the default does).
TEST_P(EdgeCases, SignOfNegativeZeroIsPositiveZero) {
  REQUIRE_DTYPES(DType::F64, DType::F16);
  EXPECT_EQ(vals<float>(f1<float>({-0.2f, -1, 2, 3, 0, -5}).sign()), (std::vector<float>{-1, -1, 1, 1, 0, -1}));
  const auto s = vals<float>(f1<float>({-0.0f}).sign());
  EXPECT_EQ(std::bit_cast<std::uint32_t>(s.at(0)), 0u);
  const auto d = vals<double>(Tensor<1>::from_data(TensorData::from<double>({-0.0}), dev()).sign());
  EXPECT_EQ(std::bit_cast<std::uint64_t>(d.at(0)), 0u);
  const Host h = read(Tensor<1>::from_data(TensorData::from<float>({-0.0f, -3}).convert(DType::F16), dev()).sign());
  EXPECT_FALSE(std::signbit(h.f.at(0)));
  EXPECT_EQ(h.f.at(1), -1.0);
  EXPECT_EQ(vals<float>(f1<float>({NAN}).sign()), std::vector<float>{0});
}

// 17. Descending sort_with_indices returns exact (stable) indices; NaN first descending.
TEST_P(EdgeCases, SortDescendingWithIndicesExact) {
  const auto t = f1<float>({0.5f, 1.2f, -0.21f, 0.f, 2.1f, 0.94f, -0.3f, 2.3f, 199.412f, 4.f, 0.99f, 3.f, -8.1f});
  const auto [v, i] = t.sort_with_indices(0, true);
  EXPECT_EQ(vals<float>(v), (std::vector<float>{199.412f, 4.f, 3.f, 2.3f, 2.1f, 1.2f, 0.99f, 0.94f, 0.5f, 0.f, -0.21f,
                                                -0.3f, -8.1f}));
  EXPECT_EQ(vals<std::int32_t>(i), (std::vector<std::int32_t>{8, 9, 11, 7, 4, 1, 10, 5, 0, 3, 2, 6, 12}));
  EXPECT_EQ(vals<std::int32_t>(t.argsort(0, true)), (std::vector<std::int32_t>{8, 9, 11, 7, 4, 1, 10, 5, 0, 3, 2, 6, 12}));
  const auto d = vals<float>(f1<float>({1, NAN, 3}).sort_descending(0));
  EXPECT_TRUE(std::isnan(d.at(0)));
  EXPECT_EQ(d.at(1), 3);
  EXPECT_EQ(d.at(2), 1);
  // Ties keep their order in both directions.
  EXPECT_EQ(vals<std::int32_t>(i1<std::int32_t>({2, 1, 2, 1}).argsort(0, true)), (std::vector<std::int32_t>{0, 2, 1, 3}));
  EXPECT_EQ(vals<std::int32_t>(i1<std::int32_t>({2, 1, 2, 1}).argsort(0)), (std::vector<std::int32_t>{1, 3, 0, 2}));
}

// 17. Ascending sort_with_indices along dim 0 puts NaN last, with their indices.
TEST_P(EdgeCases, SortWithIndicesNaNLast) {
  const auto a = f2<float>({-0.5f, NAN, 0, 0.94f, -0.3f, NAN}, 3, 2);
  const auto [v, i] = a.sort_with_indices(0);
  const auto s = vals<float>(v);
  EXPECT_EQ(s[0], -0.5f);
  EXPECT_EQ(s[1], 0.94f);
  EXPECT_EQ(s[2], -0.3f);
  EXPECT_TRUE(std::isnan(s[3]));
  EXPECT_EQ(s[4], 0.0f);
  EXPECT_TRUE(std::isnan(s[5]));
  EXPECT_EQ(vals<std::int32_t>(i), (std::vector<std::int32_t>{0, 1, 2, 0, 1, 2}));
}

// 18. topk with k == dim size works; k > dim size raises.
TEST_P(EdgeCases, TopKWithKEqualToDimSize) {
  const auto t = f2<float>({1, 5, 3, 4, 2, 6}, 2, 3);
  EXPECT_EQ(vals<float>(t.topk(3, 1)), (std::vector<float>{5, 3, 1, 6, 4, 2}));
  const auto [v, i] = t.topk_with_indices(3, 1);
  EXPECT_EQ(vals<float>(v), (std::vector<float>{5, 3, 1, 6, 4, 2}));
  EXPECT_EQ(vals<std::int32_t>(i), (std::vector<std::int32_t>{1, 2, 0, 2, 0, 1}));
  EXPECT_EQ(vals<std::int32_t>(t.argtopk(2, 0)), (std::vector<std::int32_t>{1, 0, 1, 0, 1, 0}));
  EXPECT_EQ(vals<std::int32_t>(i2<std::int32_t>({3, 1, 3}, 1, 3).argtopk(2, 1)), (std::vector<std::int32_t>{0, 2}));
  EXPECT_THROWS(IndexError, t.topk(4, 1), "topk", "k");
  EXPECT_THROWS(IndexError, t.argtopk(3, 0), "argtopk", "k");
}

// 21. cat ignores empty tensors for int and bool as well.
TEST_P(EdgeCases, CatIgnoresEmptyTensors) {
  const auto a = i2<std::int32_t>({1, 2, 3}, 1, 3);
  const auto e = Tensor<2, Int>::zeros({1, 0}, dev());
  EXPECT_EQ(vals<std::int32_t>(cat<2, Int>({e, a, e}, 1)), (std::vector<std::int32_t>{1, 2, 3}));
  EXPECT_EQ(vals<std::int32_t>(cat<2, Int>({a, e, a}, 1)), (std::vector<std::int32_t>{1, 2, 3, 1, 2, 3}));
  const auto b = Tensor<2, Bool>::from_data(TensorData::from<bool>({true, false}, {1, 2}), dev());
  const auto eb = Tensor<2, Bool>::from_data(TensorData::from<bool>({}, {1, 0}), dev());
  EXPECT_EQ(vals<bool>(cat<2, Bool>({eb, b}, 1)), (std::vector<bool>{true, false}));
  EXPECT_EQ((cat<2, Bool>({eb, eb}, 1).shape()), Shape({1, 0}));
  // Along dim 0 with a transposed part.
  const auto t = f2<float>({1, 2, 3, 4}, 2, 2).transpose();
  EXPECT_EQ(vals<float>(cat<2, Float>({t, f2<float>({9, 8}, 1, 2)}, 0)), (std::vector<float>{1, 3, 2, 4, 9, 8}));
}

// 22. repeat by 0 gives an empty dim.
TEST_P(EdgeCases, RepeatWithZeroFactor) {
  const auto o = Tensor<3>::ones({2, 3, 4}, dev());
  EXPECT_EQ(o.repeat_dim(1, 0).shape(), Shape({2, 0, 4}));
  EXPECT_EQ(o.repeat_dim(1, 0).repeat_dim(2, 2).shape(), Shape({2, 0, 8}));
  EXPECT_EQ(vals<std::int32_t>(i2<std::int32_t>({1, 2, 3, 4}, 2, 2).transpose().repeat_dim(1, 2)),
            (std::vector<std::int32_t>{1, 3, 1, 3, 2, 4, 2, 4}));
}

// 25. is_nan / is_inf do not overflow: +-60000 in f16 is finite.
TEST_P(EdgeCases, IsInfDoesNotOverflowF16) {
  REQUIRE_DTYPES(DType::F16, DType::BF16);
  const auto h = Tensor<1>::from_data(TensorData::from<float>({60000, -60000, INFINITY, NAN}).convert(DType::F16), dev());
  EXPECT_EQ(vals<bool>(h.is_inf()), (std::vector<bool>{false, false, true, false}));
  EXPECT_EQ(vals<bool>(h.is_nan()), (std::vector<bool>{false, false, false, true}));
  const auto b = Tensor<1>::from_data(TensorData::from<float>({3e38f, -3e38f}).convert(DType::BF16), dev());
  EXPECT_EQ(vals<bool>(b.is_inf()), (std::vector<bool>{false, false}));
}

// 26. Overflow-safe activations.
TEST_P(EdgeCases, OverflowSafeActivations) {
  constexpr float kMax = std::numeric_limits<float>::max();
  const auto m = f1<float>({kMax, -kMax});
  EXPECT_EQ(vals<float>(activation::sigmoid(m)), (std::vector<float>{1, 0}));
  EXPECT_EQ(vals<float>(activation::hard_sigmoid(m, 0.2, 0.5)), (std::vector<float>{1, 0}));
  EXPECT_EQ(vals<float>(activation::log_sigmoid(f1<float>({300, -300}))), (std::vector<float>{0, -300}));
  EXPECT_EQ(vals<float>(activation::log_sigmoid(m)), (std::vector<float>{0, -kMax}));
  EXPECT_EQ(vals<float>(activation::log_sigmoid(f1<float>({-INFINITY}))), std::vector<float>{-INFINITY});
  // softmax of huge logits stays finite.
  const auto s = vals<float>(activation::softmax(f2<float>({1000, 1000, -1000}, 1, 3), 1));
  EXPECT_EQ(s, (std::vector<float>{0.5f, 0.5f, 0.0f}));
  const auto ls = vals<float>(activation::log_softmax(f2<float>({1000, 0}, 1, 2), 1));
  EXPECT_EQ(ls[0], 0.0f);
  EXPECT_EQ(ls[1], -1000.0f);
}

// Clamp keeps NaN (the default's mask rule), for every clamp form.
TEST_P(EdgeCases, ClampKeepsNaN) {
  const auto a = f1<float>({NAN, -5, 5});
  const auto c = vals<float>(a.clamp(-1, 1));
  EXPECT_TRUE(std::isnan(c[0]));
  EXPECT_EQ(c[1], -1);
  EXPECT_EQ(c[2], 1);
  EXPECT_TRUE(std::isnan(vals<float>(a.clamp_min(0))[0]));
  EXPECT_TRUE(std::isnan(vals<float>(a.clamp_max(0))[0]));
  EXPECT_TRUE(std::isnan(vals<float>(activation::relu(a))[0]));
}

// Out-of-range indices raise IndexError naming the op, the index and the bound, and
// leave every input unchanged (also when the input is handed over). A device may
// report it when the result is read (Vulkan checks indices on the device), so every
// result is read here.
TEST_P(EdgeCases, IndexOutOfRangeRaisesAndLeavesInputs) {
  REQUIRE_DTYPES(DType::I64, DType::I8, DType::U8, DType::I16);
  const auto a = f2<float>({1, 2, 3, 4, 5, 6}, 2, 3);
  const auto bad = i2<std::int64_t>({0, 3, 1, 0, 0, 0}, 2, 3);
  EXPECT_THROWS(IndexError, a.gather(1, bad).into_data(), "gather", "3", "< 3");
  EXPECT_THROWS(IndexError, a.gather(1, i2<std::int8_t>({0, -1, 1, 0, 0, 0}, 2, 3)).into_data(), "gather", "-1");
  EXPECT_THROWS(IndexError, a.select(0, i1<std::int32_t>({1, 2})).into_data(), "select", "2", "< 2");
  EXPECT_THROWS(IndexError, a.scatter(1, bad, a).into_data(), "scatter", "3");
  // The Assign rule has no default composition: a backend without it says so.
  try {
    (void)a.scatter(1, i2<std::int64_t>({0, 2, 1, 0, 0, 0}, 2, 3), a, IndexingUpdateOp::Assign).into_data();
    EXPECT_THROWS(IndexError, a.scatter(1, bad, a, IndexingUpdateOp::Assign).into_data(), "scatter", "3");
  } catch (const NotImplemented& e) {
    EXPECT_NE(std::string(e.what()).find("scatter"), std::string::npos) << e.what();
  }
  EXPECT_THROWS(IndexError, a.select_assign(0, i1<std::uint8_t>({0, 7}), a).into_data(), "select_assign", "7");
  const auto b = Tensor<2, Bool>::from_data(TensorData::from<bool>({true, false, true, false, true, false}, {2, 3}), dev());
  EXPECT_THROWS(IndexError, b.scatter(1, bad, b).into_data(), "scatter_or", "3");
  EXPECT_THROWS(IndexError, b.select_assign(1, i1<std::int16_t>({-2}), b.slice({Slice::all(), Slice::range(0, 1)})).into_data(),
                "select_or", "-2");
  EXPECT_EQ(vals<float>(a), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(vals<std::int64_t>(bad), (std::vector<std::int64_t>{0, 3, 1, 0, 0, 0}));
  EXPECT_EQ(vals<bool>(b), (std::vector<bool>{true, false, true, false, true, false}));
  // A handed-over (uniquely owned) input: the error comes before any write.
  auto u = f2<float>({1, 2, 3, 4, 5, 6}, 2, 3);
  const auto alias = u;  // keeps the buffer observable
  EXPECT_THROWS(IndexError, std::move(u).scatter(1, bad, alias).into_data(), "scatter");
  EXPECT_EQ(vals<float>(alias), (std::vector<float>{1, 2, 3, 4, 5, 6}));
}

// select_assign whose values have an empty dim beside `dim` updates nothing, but its indices
// are still checked (issue 30: vulkan returned before any check when no line remained).
TEST_P(EdgeCases, SelectAssignChecksIndicesWhenNothingIsUpdated) {
  const auto a = Tensor<2>::from_data(TensorData::from<float>({}, {0, 4}), dev());
  const auto v = Tensor<2>::from_data(TensorData::from<float>({}, {0, 2}), dev());
  EXPECT_THROWS(IndexError, a.select_assign(1, i1<std::int32_t>({1, 7}), v).into_data(), "select_assign", "7", "< 4");
  EXPECT_THROWS(IndexError, a.select_assign(1, i1<std::int64_t>({0, -1}), v).into_data(), "select_assign", "-1");
  // Along an empty dim every index is out of range, with or without lines to update.
  const auto z = Tensor<2>::from_data(TensorData::from<float>({}, {2, 0}), dev());
  const auto w = Tensor<2>::from_data(TensorData::from<float>({5, 6}, {2, 1}), dev());
  EXPECT_THROWS(IndexError, z.select_assign(1, i1<std::int32_t>({0}), w).into_data(), "select_assign", "< 0");
  const auto z2 = Tensor<2>::from_data(TensorData::from<float>({}, {0, 0}), dev());
  const auto w2 = Tensor<2>::from_data(TensorData::from<float>({}, {0, 1}), dev());
  EXPECT_THROWS(IndexError, z2.select_assign(1, i1<std::int32_t>({0}), w2).into_data(), "select_assign", "< 0");
  // In range: nothing changes, no error.
  EXPECT_EQ(a.select_assign(1, i1<std::int32_t>({3, 0}), v).into_data().shape(), (Shape{0, 4}));
}

// ---- issue 17: behaviours that differed from burn's ----

// reshape takes 0 as "keep the input's dim at this index" (with -1 inferred).
TEST_P(EdgeCases, ReshapeZeroKeepsDim) {
  const auto a = f2<float>({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, 2, 6);
  const auto r = a.reshape(std::array<std::int64_t, 3>{0, 2, -1});
  EXPECT_EQ(r.shape(), Shape({2, 2, 3}));
  EXPECT_EQ(vals<float>(r), (std::vector<float>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}));
  EXPECT_EQ(a.reshape(std::array<std::int64_t, 2>{0, 0}).shape(), Shape({2, 6}));
  EXPECT_EQ(a.reshape(std::array<std::int64_t, 2>{-1, 0}).shape(), Shape({2, 6}));
  // 0 past the input's rank has no dim to keep.
  EXPECT_THROWS(ShapeError, a.reshape(std::array<std::int64_t, 3>{4, 3, 0}), "reshape", "index 2");
  // Empty tensors still reshape (stack unsqueezes them with their literal dims).
  const auto e = Tensor<2>::zeros({0, 3}, dev());
  EXPECT_EQ(e.reshape(std::array<std::int64_t, 2>{3, -1}).shape(), Shape({3, 0}));
  EXPECT_EQ((stack<2, Float>({e, e}, 0).shape()), Shape({2, 0, 3}));
}

// slice clamps bounds to the dim as burn's Slice::to_range does; a start past the
// end and a zero step stay typed errors.
TEST_P(EdgeCases, SliceClampsLikeBurn) {
  const auto a = f1<float>({0, 1, 2});
  EXPECT_EQ(vals<float>(a.slice({Slice::range(0, 4)})), (std::vector<float>{0, 1, 2}));
  EXPECT_EQ(vals<float>(a.slice({Slice::range(1, 100)})), (std::vector<float>{1, 2}));
  EXPECT_EQ(vals<float>(a.slice({Slice::range(-10, 2)})), (std::vector<float>{0, 1}));
  EXPECT_EQ(vals<float>(a.slice({Slice::range(-2, 10)})), (std::vector<float>{1, 2}));
  EXPECT_EQ(vals<float>(a.slice({Slice::range(0, 10, -1)})), (std::vector<float>{2, 1, 0}));
  EXPECT_EQ(a.slice({Slice::range(0, -10)}).shape(), Shape({0}));
  EXPECT_EQ(a.slice({Slice::range(3, 5)}).shape(), Shape({0}));
  EXPECT_THROWS(IndexError, a.slice({Slice::range(4, 6)}), "slice", "start", "4");
  EXPECT_THROWS(IndexError, a.slice({Slice::range(0, 4, 0)}), "slice", "step");
  // Missing dims are whole; each dim clamps on its own.
  const auto m = f2<float>({0, 1, 2, 3, 4, 5}, 2, 3);
  EXPECT_EQ(vals<float>(m.slice({Slice::range(1, 9)})), (std::vector<float>{3, 4, 5}));
  EXPECT_EQ(vals<float>(m.slice({Slice::range(0, 5), Slice::range(-5, 2)})), (std::vector<float>{0, 1, 3, 4}));
  // slice_assign clamps the same way.
  EXPECT_EQ(vals<float>(a.slice_assign({Slice::range(1, 9)}, f1<float>({7, 8}))), (std::vector<float>{0, 7, 8}));
}

// mask_where broadcasts the tensor itself to the mask and value's shape (as burn).
TEST_P(EdgeCases, MaskWhereBroadcastsTheTensor) {
  const auto a = Tensor<3>::from_data(TensorData::from<float>({1, 2, 3, 4}, {1, 2, 2}), dev());
  std::vector<bool> mv(16);
  for (std::size_t i = 0; i < 16; ++i) mv[i] = i % 3 == 0;
  const auto m = Tensor<3, Bool>::from_data(TensorData::from<bool>(mv, {4, 2, 2}), dev());
  const auto v = Tensor<3>::full({4, 2, 2}, 9.0f, dev());
  const auto r = a.mask_where(m, v);
  EXPECT_EQ(r.shape(), Shape({4, 2, 2}));
  EXPECT_EQ(vals<float>(r), (std::vector<float>{9, 2, 3, 9, 1, 2, 9, 4, 1, 9, 3, 4, 9, 2, 3, 9}));
  EXPECT_EQ(vals<float>(a), (std::vector<float>{1, 2, 3, 4}));  // the input is not touched
  // Int and Bool tensors too, with a [1, 2, 2] value.
  const auto ai = Tensor<3, Int>::from_data(TensorData::from<std::int32_t>({1, 2, 3, 4}, {1, 2, 2}), dev());
  EXPECT_EQ(vals<std::int32_t>(ai.mask_where(m, ai.mul_scalar(10))),
            (std::vector<std::int32_t>{10, 2, 3, 40, 1, 2, 30, 4, 1, 20, 3, 4, 10, 2, 3, 40}));
  const auto ab = Tensor<3, Bool>::from_data(TensorData::from<bool>({false, false, false, false}, {1, 2, 2}), dev());
  EXPECT_EQ(vals<bool>(ab.mask_where(m, m)), mv);
}

// Bool host data takes the device's bool dtype, so it mixes with zeros, empty and
// comparison results (cat, bool_and, equal) on every device.
TEST_P(EdgeCases, BoolFromDataTakesTheDeviceBoolDType) {
  const DType want = to_dtype(dev().settings().bool_dtype);
  const auto b = Tensor<1, Bool>::from_data(TensorData::from<bool>({true, false, true}), dev());
  EXPECT_EQ(b.dtype(), want);
  const auto z = Tensor<1, Bool>::zeros({3}, dev());
  EXPECT_EQ(z.dtype(), want);
  const auto c = f1<float>({1, 2, 3}).greater_elem(1.5);
  EXPECT_EQ(c.dtype(), want);
  EXPECT_EQ(vals<bool>(cat<1, Bool>({b, z, c}, 0)), (std::vector<bool>{true, false, true, false, false, false, false, true, true}));
  EXPECT_EQ(vals<bool>(b.bool_and(c)), (std::vector<bool>{false, false, true}));
  EXPECT_EQ(vals<bool>(b.equal(c)), (std::vector<bool>{false, false, true}));
  EXPECT_EQ(vals<bool>(b.bool_or(Tensor<1, Bool>::empty({3}, dev()).bool_and(z))), (std::vector<bool>{true, false, true}));
  // Data in another bool storage (four-byte bools) is converted the same way.
  const TensorData u32(std::vector<std::byte>{std::byte{1}, std::byte{0}, std::byte{0}, std::byte{0}, std::byte{0},
                                              std::byte{0}, std::byte{0}, std::byte{0}},
                       Shape{2}, DType::BoolU32);
  const auto b32 = Tensor<1, Bool>::from_data(u32, dev());
  EXPECT_EQ(b32.dtype(), want);
  EXPECT_EQ(vals<bool>(b32), (std::vector<bool>{true, false}));
}

// Extrema along a non-empty dim of a tensor with a zero-size dim give the empty result.
TEST_P(EdgeCases, ExtremaAlongANonEmptyDimOfAnEmptyTensor) {
  const auto e = Tensor<2>::zeros({0, 4}, dev());
  EXPECT_EQ(e.max_dim(1).shape(), Shape({0, 1}));
  EXPECT_EQ(e.min_dim(1).shape(), Shape({0, 1}));
  EXPECT_EQ(e.max_abs_dim(1).shape(), Shape({0, 1}));
  EXPECT_EQ(e.max_dim(1).dtype(), e.dtype());
  const auto am = e.argmax(1);
  EXPECT_EQ(am.shape(), Shape({0, 1}));
  EXPECT_EQ(am.dtype(), to_dtype(dev().settings().int_dtype));
  EXPECT_EQ(e.argmin(-1).shape(), Shape({0, 1}));
  const auto [v, i] = e.max_dim_with_indices(1);
  EXPECT_EQ(v.shape(), Shape({0, 1}));
  EXPECT_EQ(i.shape(), Shape({0, 1}));
  EXPECT_EQ((Tensor<3, Int>::zeros({2, 0, 3}, dev()).min_dim(2).shape()), Shape({2, 0, 1}));
  EXPECT_EQ(vals<float>(e.max_dim(1)), std::vector<float>{});
  // Along the empty dim (or to a scalar) there is no answer.
  EXPECT_THROWS(ShapeError, e.max_dim(0), "max_dim", "[0, 4]");
  EXPECT_THROWS(ShapeError, e.argmin(0), "argmin", "[0, 4]");
  EXPECT_THROWS(ShapeError, e.min_dim_with_indices(0), "min_dim_with_indices");
  EXPECT_THROWS(ShapeError, e.max(), "max");
}

}  // namespace
