// Quantized tensors through burn's other QTensorOps (the op table's quant rows, issue 32):
// float ops whose Float operands are all quantized reach their q row; layout ops and the
// extrema of per-tensor schemes move the codes (the scale kept), the others dequantize, run
// the float op and quantize again (requant), or return the float result under the default
// QuantPropagation::Inhibit (flow). Every expectation is worked out here from the input's
// codes and scale (hand values, host loops), not from the kernels. Propagate is in
// settings_test.cpp (scenario 5): a device's QuantConfig is fixed by its first use.
#include <numeric>

#include "quant_test_util.hpp"

namespace {

using namespace quant_test;

// x = [[-1.0, 0.4, 0.2], [1.0, -0.6, 0.8]]: amax 1, scale 2 / 254 (f32), codes x * 127 rounded
// (no value near a half).
Tensor<2> x23() { return fl<2>({-1.0f, 0.4f, 0.2f, 1.0f, -0.6f, 0.8f}, Shape{2, 3}); }
const std::vector<std::int8_t> kCodes = i8({-127, 51, 25, 127, -76, 102});
const float kScale = 2.0f / 254.0f;

// The values a quantized tensor stands for: code * scale, per tensor.
std::vector<float> deq(const std::vector<std::int8_t>& c, float s) {
  std::vector<float> v(c.size());
  for (std::size_t i = 0; i < c.size(); ++i) v[i] = static_cast<float>(c[i]) * s;
  return v;
}

template <std::size_t D>
void expect_codes(const Tensor<D>& t, const std::vector<std::int8_t>& codes, const Shape& shape) {
  ASSERT_TRUE(is_quantized(t));
  EXPECT_EQ(t.shape(), shape);
  const qz::QuantizedValues v = values_of(t);
  EXPECT_EQ(v.codes, codes);
  ASSERT_EQ(v.scales.size(), 1u);
  EXPECT_EQ(v.scales[0], kScale);
}

// Within half a scale step of `want` (requantized values): |got - want| <= step / 2 + 1e-6.
::testing::AssertionResult within_step(const std::vector<float>& got, const std::vector<float>& want, float step) {
  if (got.size() != want.size()) return ::testing::AssertionFailure() << "size " << got.size() << " != " << want.size();
  for (std::size_t i = 0; i < got.size(); ++i)
    if (!(std::fabs(got[i] - want[i]) <= step / 2 + 1e-6f))
      return ::testing::AssertionFailure() << "at " << i << ": " << got[i] << " != " << want[i] << " (step " << step << ")";
  return ::testing::AssertionSuccess();
}

TEST_P(Quant, TheInputsCodesAreTheHandValues) {
  const auto q = quantize_dynamic(x23(), q8s());
  expect_codes(q, kCodes, Shape{2, 3});
}

// dtype_usage(QFloat): what the device's i8 and f32 rows allow (every device here stores i8
// and computes f32); Accelerated only on the cpu, whose int8 products are oneDNN's where the
// build has it (the mini backend and lavapipe dequantize).
TEST_P(Quant, QFloatUsageIsStorageAndArithmetic) {
  const DTypeUsageSet u = dev().dtype_usage(DType::QFloat);
  EXPECT_TRUE(u.contains(DTypeUsage::Storage));
  EXPECT_TRUE(u.contains(DTypeUsage::Arithmetic));
  EXPECT_TRUE(dev().supports_dtype(DType::QFloat));
  EXPECT_EQ(u.contains(DTypeUsage::Accelerated), dev() == Device::cpu() && TENSOR_TEST_HAVE_ONEDNN) << dev().to_string();
  // no op but the quant rows takes a quantized operand, whatever the usage says
  EXPECT_THROWS(DTypeError, quantize_dynamic(x23(), q8s()).round(), "[round]", "qfloat");
}

TEST_P(Quant, LayoutRowsMoveTheCodesAndKeepTheScale) {
  const auto q = quantize_dynamic(x23(), q8s());
  const auto& c = kCodes;
  expect_codes(q.transpose(), {c[0], c[3], c[1], c[4], c[2], c[5]}, Shape{3, 2});
  expect_codes(q.swap_dims(0, 1), {c[0], c[3], c[1], c[4], c[2], c[5]}, Shape{3, 2});
  expect_codes(q.permute({1, 0}), {c[0], c[3], c[1], c[4], c[2], c[5]}, Shape{3, 2});
  expect_codes(q.reshape<1>({6}), c, Shape{6});
  expect_codes(q.reshape<2>({3, 2}), c, Shape{3, 2});
  expect_codes(q.flip({1}), {c[2], c[1], c[0], c[5], c[4], c[3]}, Shape{2, 3});
  expect_codes(q.flip({0, 1}), {c[5], c[4], c[3], c[2], c[1], c[0]}, Shape{2, 3});
  expect_codes(q.slice({Slice(1, 2), Slice(1, 3)}), {c[4], c[5]}, Shape{1, 2});
  expect_codes(q.select(1, {2, 0}), {c[2], c[0], c[5], c[3]}, Shape{2, 2});
  const auto idx = Tensor<2, Int>::from_data(TensorData::from<std::int32_t>({2, 2, 0, 1, 0, 0}, Shape{2, 3}), dev());
  expect_codes(q.gather(1, idx), {c[2], c[2], c[0], c[4], c[3], c[3]}, Shape{2, 3});
  expect_codes(q.repeat_dim(0, 2), {c[0], c[1], c[2], c[3], c[4], c[5], c[0], c[1], c[2], c[3], c[4], c[5]}, Shape{4, 3});
  const auto row = q.slice({Slice(1, 2)});
  expect_codes(row.expand<2>({3, 3}), {c[3], c[4], c[5], c[3], c[4], c[5], c[3], c[4], c[5]}, Shape{3, 3});
  // A layout of a layout (a strided view of the codes) reads back right.
  expect_codes(q.transpose().flip({0}), {c[2], c[5], c[1], c[4], c[0], c[3]}, Shape{3, 2});
  expect_codes(q.detach(), c, Shape{2, 3});
  EXPECT_EQ(values_of(q).codes, c);  // the input is unchanged
}

TEST_P(Quant, ExtremaOfAPerTensorSchemeAreTheCodesAtTheArgExtreme) {
  const auto q = quantize_dynamic(x23(), q8s());
  const auto& c = kCodes;
  EXPECT_EQ((q.argmax(1).into_data().convert(DType::I64).to_vec<std::int64_t>()), (std::vector<std::int64_t>{1, 0}));
  EXPECT_EQ((q.argmin(1).into_data().convert(DType::I64).to_vec<std::int64_t>()), (std::vector<std::int64_t>{0, 1}));
  EXPECT_EQ((q.argmax(0).into_data().convert(DType::I64).to_vec<std::int64_t>()), (std::vector<std::int64_t>{1, 0, 1}));
  expect_codes(q.max_dim(1), {c[1], c[3]}, Shape{2, 1});
  expect_codes(q.min_dim(0), {c[0], c[4], c[2]}, Shape{1, 3});
  auto [vals, ids] = q.max_dim_with_indices(0);
  expect_codes(vals, {c[3], c[1], c[5]}, Shape{1, 3});
  EXPECT_EQ((ids.into_data().convert(DType::I64).to_vec<std::int64_t>()), (std::vector<std::int64_t>{1, 0, 1}));
  expect_codes(q.max(), {127}, Shape{1});
  expect_codes(q.min(), {-127}, Shape{1});
}

TEST_P(Quant, FlowRowsGiveFloatsUnderInhibit) {
  const auto q = quantize_dynamic(x23(), q8s());
  const std::vector<float> d = deq(kCodes, kScale);
  auto map = [&](auto f) {
    std::vector<float> v(d.size());
    for (std::size_t i = 0; i < d.size(); ++i) v[i] = f(d[i]);
    return v;
  };
  const auto e = q.exp();
  EXPECT_FALSE(is_quantized(e));
  EXPECT_EQ(e.dtype(), DType::F32);
  EXPECT_TRUE(near(fv(e), map([](float v) { return std::exp(v); }), 1e-5f));
  EXPECT_TRUE(near(fv(q * 2.0f), map([](float v) { return v * 2.0f; }), 1e-6f));
  EXPECT_TRUE(near(fv(q.clamp(-0.5, 0.5)), map([](float v) { return std::clamp(v, -0.5f, 0.5f); }), 1e-6f));
  EXPECT_TRUE(near(fv(-q), map([](float v) { return -v; }), 1e-6f));
  EXPECT_TRUE(near(fv(q + q), map([](float v) { return v + v; }), 1e-6f));
  EXPECT_TRUE(near(fv(q * q), map([](float v) { return v * v; }), 1e-6f));
  EXPECT_TRUE(near(fv(q.sum()), {std::accumulate(d.begin(), d.end(), 0.0f)}, 1e-5f));
  EXPECT_TRUE(near(fv(q.sum_dim(1)), {d[0] + d[1] + d[2], d[3] + d[4] + d[5]}, 1e-5f));
  EXPECT_TRUE(near(fv(q.mean_dim(0)), {(d[0] + d[3]) / 2, (d[1] + d[4]) / 2, (d[2] + d[5]) / 2}, 1e-5f));
  EXPECT_TRUE(near(fv(q.cumsum(1)), {d[0], d[0] + d[1], d[0] + d[1] + d[2], d[3], d[3] + d[4], d[3] + d[4] + d[5]}, 1e-5f));
  EXPECT_EQ(values_of(q).codes, kCodes);
}

TEST_P(Quant, AQuantizedAndAFloatOperandDequantizeTheQuantizedSide) {
  const auto q = quantize_dynamic(x23(), q8s());
  const auto y = fl<2>({0.5f, 1.5f, -2.0f, 0.25f, 3.0f, -1.0f}, Shape{2, 3});
  const std::vector<float> d = deq(kCodes, kScale), yv = fv(y);
  std::vector<float> sum(d.size()), diff(d.size());
  for (std::size_t i = 0; i < d.size(); ++i) {
    sum[i] = d[i] + yv[i];
    diff[i] = yv[i] - d[i];
  }
  EXPECT_FALSE(is_quantized(q + y));
  EXPECT_TRUE(near(fv(q + y), sum, 1e-6f));
  EXPECT_TRUE(near(fv(y - q), diff, 1e-6f));
}

TEST_P(Quant, RequantRowsQuantizeTheResultWithTheInputsScheme) {
  const auto q = quantize_dynamic(x23(), q8s());
  const std::vector<float> d = deq(kCodes, kScale);
  // |x|: amax stays 127 * scale, so the step is the input's.
  const auto a = q.abs();
  ASSERT_TRUE(is_quantized(a));
  EXPECT_EQ(*quant_scheme(a), q8s());
  std::vector<float> ad(d.size());
  for (std::size_t i = 0; i < d.size(); ++i) ad[i] = std::fabs(d[i]);
  EXPECT_TRUE(within_step(fv(dequantize(a)), ad, kScale));
  const auto s = q.sort(1);
  ASSERT_TRUE(is_quantized(s));
  EXPECT_TRUE(within_step(fv(dequantize(s)), {d[0], d[2], d[1], d[4], d[5], d[3]}, kScale));
  const auto q2 = quantize_dynamic(fl<2>({0.5f, -0.25f, 0.125f}, Shape{1, 3}), q8s());
  const auto both = cat(std::vector<Tensor<2>>{q, q2}, 0);
  ASSERT_TRUE(is_quantized(both));
  EXPECT_EQ(both.shape(), (Shape{3, 3}));
  const std::vector<float> d2 = fv(dequantize(q2));
  std::vector<float> want = d;
  want.insert(want.end(), d2.begin(), d2.end());
  EXPECT_TRUE(within_step(fv(dequantize(both)), want, kScale));
}

TEST_P(Quant, OutRowsGiveIndicesAndBoolsOfTheDequantizedValues) {
  const auto q = quantize_dynamic(x23(), q8s());
  EXPECT_EQ((q.argsort(1).into_data().convert(DType::I64).to_vec<std::int64_t>()),
            (std::vector<std::int64_t>{0, 2, 1, 1, 2, 0}));
  EXPECT_EQ(q.any().into_data().convert(DType::Bool).to_vec<bool>(), std::vector<bool>{true});
  EXPECT_EQ(q.all().into_data().convert(DType::Bool).to_vec<bool>(), std::vector<bool>{true});
  const auto z = quantize_dynamic(fl<2>({0.0f, 1.0f, 0.0f, 0.0f}, Shape{2, 2}), q8s());
  EXPECT_EQ(z.all().into_data().convert(DType::Bool).to_vec<bool>(), std::vector<bool>{false});
  EXPECT_EQ(z.any_dim(1).into_data().convert(DType::Bool).to_vec<bool>(), (std::vector<bool>{true, false}));
}

// Per block: permute / swap_dims / transpose / flip move the block grid with the codes (exact:
// every code keeps its block's scale, the block extents reordered alike); the other layout ops
// go through the float op and quantize again with the same scheme; argmax compares the
// dequantized values, not the codes (whose order differs between blocks).
TEST_P(Quant, PerBlockSchemes) {
  const QuantScheme rows = q8s().with_level(QuantLevel::block({1, 2}));
  // row 0 = {1.0, 0.5}: codes {127, 64}; row 1 = {0.1, 0.45}: codes {28, 127}. Column 1's
  // values put row 0 first (0.5 > 0.45), its codes row 1 (127 > 64).
  const auto q = quantize_dynamic(fl<2>({1.0f, 0.5f, 0.1f, 0.45f}, Shape{2, 2}), rows);
  EXPECT_EQ(values_of(q).codes, i8({127, 64, 28, 127}));
  EXPECT_EQ((q.argmax(0).into_data().convert(DType::I64).to_vec<std::int64_t>()), (std::vector<std::int64_t>{0, 0}));
  const qz::QuantizedValues v = values_of(q);
  const auto f = q.flip({1});
  ASSERT_TRUE(is_quantized(f));
  EXPECT_EQ(*quant_scheme(f), rows);
  EXPECT_EQ(values_of(f).codes, i8({64, 127, 127, 28}));
  EXPECT_EQ(values_of(f).scales, v.scales);
  const auto f0 = q.flip({0});
  EXPECT_EQ(values_of(f0).codes, i8({28, 127, 127, 64}));
  EXPECT_EQ(values_of(f0).scales, (std::vector<float>{v.scales[1], v.scales[0]}));
  // [4, 6] in [2, 3] blocks, transposed: [6, 4] in [3, 2] blocks, the 2 x 2 scale grid
  // transposed, every value exactly the transposed input's.
  const QuantScheme b23 = q8s().with_level(QuantLevel::block({2, 3}));
  const auto sq = quantize_dynamic(fl<2>(lcg(24, 7u, 1.0f), Shape{4, 6}), b23);
  const qz::QuantizedValues sv = values_of(sq);
  ASSERT_EQ(sv.scales.size(), 4u);
  std::vector<std::int8_t> ct(24);
  for (std::size_t i = 0; i < 4; ++i)
    for (std::size_t j = 0; j < 6; ++j) ct[j * 4 + i] = sv.codes[i * 6 + j];
  for (const auto& t : {sq.transpose(), sq.swap_dims(0, 1), sq.permute({1, 0})}) {
    ASSERT_TRUE(is_quantized(t));
    EXPECT_EQ(t.shape(), (Shape{6, 4}));
    EXPECT_EQ(*quant_scheme(t), q8s().with_level(QuantLevel::block({3, 2})));
    const qz::QuantizedValues tv = values_of(t);
    EXPECT_EQ(tv.codes, ct);
    EXPECT_EQ(tv.scales, (std::vector<float>{sv.scales[0], sv.scales[2], sv.scales[1], sv.scales[3]}));
  }
  // A rank-3 permute: block [1, 2, 3] on [2, 4, 6] -> axes (2, 0, 1): [6, 2, 4] in [3, 1, 2].
  const auto r3 = quantize_dynamic(fl<3>(lcg(48, 9u, 2.0f), Shape{2, 4, 6}), q8s().with_level(QuantLevel::block({1, 2, 3})));
  const auto p3 = r3.permute({2, 0, 1});
  EXPECT_EQ(*quant_scheme(p3), q8s().with_level(QuantLevel::block({3, 1, 2})));
  const std::vector<float> d3 = fv(dequantize(r3)), p3v = fv(dequantize(p3));
  for (std::size_t a = 0; a < 2; ++a)
    for (std::size_t b = 0; b < 4; ++b)
      for (std::size_t c = 0; c < 6; ++c) EXPECT_EQ(p3v[(c * 2 + a) * 4 + b], d3[(a * 4 + b) * 6 + c]) << a << b << c;
  // The other layout ops: through the float op, the same scheme again (within half a step).
  const auto rr = q.repeat_dim(0, 2);
  ASSERT_TRUE(is_quantized(rr));
  EXPECT_EQ(*quant_scheme(rr), rows);
  const std::vector<float> d = fv(dequantize(q));
  EXPECT_TRUE(within_step(fv(dequantize(rr)), {d[0], d[1], d[2], d[3], d[0], d[1], d[2], d[3]}, 2.0f / 254.0f));
  // [2, 3] blocks cannot cover a [1, 6] row: quantize_dynamic's block check, typed.
  expect_error<ShapeError>([&] { (void)sq.slice({Slice(0, 1)}); }, "quantize_dynamic");
}

TEST_P(Quant, MovingAQuantizedTensorKeepsItsBytes) {
  const auto q = quantize_dynamic(x23(), q8s().with_level(QuantLevel::block({1, 3})));
  const TensorData want = q.into_data();
  const auto here = q.to_device(dev());
  EXPECT_EQ(here.into_data().bytes(), want.bytes());
  const auto on_cpu = q.to_device(Device::cpu());  // across backends from mini / vulkan: through the host
  ASSERT_TRUE(is_quantized(on_cpu));
  EXPECT_EQ(on_cpu.into_data().bytes(), want.bytes());
  EXPECT_EQ(on_cpu.to_device(dev()).into_data().bytes(), want.bytes());
}

// Ops with no quantized form (no q row) refuse a quantized operand, naming the op, and leave
// it intact: no silent dequantize.
TEST_P(Quant, OpsWithoutAQuantizedFormRefuseIt) {
  const auto q = quantize_dynamic(x23(), q8s());
  for (const auto& [op, call] : std::vector<std::pair<std::string, std::function<void()>>>{
           {"round", [&] { (void)q.round(); }},
           {"floor", [&] { (void)q.floor(); }},
           {"atan", [&] { (void)q.atan(); }}}) {
    try {
      call();
      ADD_FAILURE() << op << ": no exception";
    } catch (const DTypeError& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("[" + op + "] quantized tensors have no " + op + " yet; expected a float tensor (dequantize() it "
                       "first), or a quantized weight of matmul, linear or conv2d; got qfloat on "),
                std::string::npos)
          << m;
    }
  }
  EXPECT_EQ(values_of(q).codes, kCodes);
}

// Bad arguments: the q row's rule is its twin's, so the error is the float op's, naming the q
// row that ran; the input is unchanged.
TEST_P(Quant, QuantRowsCheckTheirArgumentsLikeTheFloatOp) {
  const auto q = quantize_dynamic(x23(), q8s());
  expect_error<IndexError>([&] { (void)q.swap_dims(0, 5); }, "q_swap_dims");
  expect_error<IndexError>([&] { (void)q.argmax(2); }, "q_argmax");
  expect_error<ShapeError>([&] { (void)q.reshape<1>({5}); }, "reshape");  // checked above dispatch
  const auto other = quantize_dynamic(fl<2>({1, 2, 3, 4}, Shape{2, 2}), q8s());
  expect_error<ShapeError>([&] { (void)(q + other); }, "q_add");
  expect_error<ShapeError>([&] { (void)cat(std::vector<Tensor<2>>{q, other}, 0); }, "q_cat");
  EXPECT_EQ(values_of(q).codes, kCodes);
}

// Empty tensors: layout rows give empty codes, flow rows empty floats, reductions their float
// op's value for no elements.
TEST_P(Quant, EmptyQuantizedTensors) {
  const auto q = quantize_dynamic(fl<2>({}, Shape{0, 3}), q8s());
  ASSERT_TRUE(is_quantized(q));
  const auto t = q.transpose();
  ASSERT_TRUE(is_quantized(t));
  EXPECT_EQ(t.shape(), (Shape{3, 0}));
  EXPECT_TRUE(values_of(t).codes.empty());
  const auto e = q.exp();
  EXPECT_FALSE(is_quantized(e));
  EXPECT_EQ(e.shape(), (Shape{0, 3}));
  EXPECT_EQ(fv(q.sum()), (std::vector<float>{0.0f}));
  EXPECT_EQ(fv(q.sum_dim(0)), (std::vector<float>{0.0f, 0.0f, 0.0f}));
  expect_error<ShapeError>([&] { (void)q.max(); }, "q_max");  // an extremum of nothing (the float op's rule)
}

}  // namespace
