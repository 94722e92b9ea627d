// Quantized tensors (issue 32, steps 2 and 3): the op-table rows (quantize / dequantize native
// on the cpu, the default composition elsewhere) against plain loops, q_matmul (the cpu:
// oneDNN's int8 product) against a float reference, and matmul / linear / nn::Linear /
// conv2d with a quantized operand. On every device (the suite is instantiated in
// quant_test.cpp; helpers in quant_test_util.hpp).
#include "quant_test_util.hpp"

#include "backends/cpu/cpu_info.hpp"
#include "backends/cpu/quant.hpp"
#include "backends/cpu/quant_q8.hpp"

using namespace quant_test;

// ---- step 2: the op-table rows (native on cpu, the default composition elsewhere) --------

// burn's formula written out (reference/quantization.md §2): q = clamp(round(x * (1 / s)),
// a, b), std::round being round-half-away-from-zero; the reciprocal in f32, then a product.
std::vector<std::int8_t> ref_codes(const std::vector<float>& x, const std::vector<std::size_t>& block_of,
                                   const std::vector<float>& scales, int a, int b) {
  std::vector<std::int8_t> out(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    const float inv = 1.0f / scales[block_of[i]];
    const float v = std::round(x[i] * inv);
    out[i] = static_cast<std::int8_t>(std::clamp(v, static_cast<float>(a), static_cast<float>(b)));
  }
  return out;
}

TEST_P(Quant, TiesAndClampingPerTensorMatchAPlainLoop) {
  // x = k / 8 with scale 0.25: x * 4 = k / 2, so every odd k is an exact tie.
  std::vector<float> x(72);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = (static_cast<float>(i) - 30.0f) * 0.125f;
  const std::vector<std::size_t> zero(x.size(), 0);
  for (const QuantScheme& s : {q8s(), QuantScheme{}.with_value(QuantValue::Q4F), QuantScheme{}.with_value(QuantValue::Q2S)}) {
    SCOPED_TRACE(to_string(s));
    auto q = quantize(fl<3>(x, Shape{3, 4, 6}), s, QuantParams{fl<1>({0.25f}, Shape{1})});
    const auto [a, b] = s.range();
    const auto v = values_of(q);
    EXPECT_EQ(v.codes, ref_codes(x, zero, {0.25f}, a, b));
    std::vector<float> deq(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) deq[i] = static_cast<float>(v.codes[i]) * 0.25f;
    EXPECT_EQ(fv(dequantize(q)), deq);  // a product of two f32: exact
  }
}

TEST_P(Quant, BlocksOfAStridedViewMatchAPlainLoop) {
  // x [3, 4, 6], quantized as its view swap_dims(0, 2) [6, 4, 3] with blocks [2, 3] over the
  // last two dims (grid [6, 2, 1]): the kernel must read the view, not the buffer.
  std::vector<float> x(72);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37f * static_cast<float>(i) + 0.1f) * (1.0f + static_cast<float>(i % 5));
  auto xt = fl<3>(x, Shape{3, 4, 6}).swap_dims(0, 2);
  std::vector<float> logical(72);  // xt[i][j][k] = x[k][j][i]
  std::vector<std::size_t> block_of(72);
  for (std::size_t i = 0; i < 6; ++i)
    for (std::size_t j = 0; j < 4; ++j)
      for (std::size_t k = 0; k < 3; ++k) {
        logical[(i * 4 + j) * 3 + k] = x[(k * 4 + j) * 6 + i];
        block_of[(i * 4 + j) * 3 + k] = i * 2 + j / 2;
      }
  std::vector<float> amax(12, 0.0f);
  for (std::size_t e = 0; e < 72; ++e) amax[block_of[e]] = std::max(amax[block_of[e]], std::fabs(logical[e]));
  std::vector<float> scales(12);
  for (std::size_t g = 0; g < 12; ++g) scales[g] = 2.0f * amax[g] / 254.0f;  // q8s: b - a = 254
  const QuantScheme s = q8s().with_level(QuantLevel::block({2, 3}));
  auto q = quantize_dynamic(xt, s);
  const auto v = values_of(q);
  EXPECT_EQ(v.scales, scales);
  EXPECT_EQ(v.codes, ref_codes(logical, block_of, scales, -127, 127));
  std::vector<float> deq(72);
  for (std::size_t e = 0; e < 72; ++e) deq[e] = static_cast<float>(v.codes[e]) * scales[block_of[e]];
  EXPECT_EQ(fv(dequantize(q)), deq);
  EXPECT_EQ(fv(xt.swap_dims(0, 2)), x);  // input unchanged
}

TEST_P(Quant, QuantizeAndDequantizeAreOneOpEachOnTheForwardPath) {
  auto x = fl<2>({0.5f, -1.0f, 2.0f, 0.25f}, Shape{2, 2});
  profile::start();
  auto q = quantize_dynamic(x, q8s().with_level(QuantLevel::block({1, 2})));
  auto back = dequantize(q);
  const ProfileResult p = profile::stop();
  std::map<std::string, std::uint64_t> calls;
  for (const ProfileRow& r : p.rows) calls[r.op] += r.calls;
  EXPECT_EQ(calls["quantize_dynamic"], 1u);  // its scales and codes inside the one op
  EXPECT_EQ(calls["quantize"], 0u);
  EXPECT_EQ(calls["dequantize"], 1u);
  EXPECT_EQ(back.shape(), (Shape{2, 2}));
}

// ---- q_matmul: Float x times a quantized weight (the cpu: oneDNN's int8 product) -----------

// out[b, m, n] = sum_k x[b, m, k] * code[k, n] * scale[n or 0], in double: the dequantize
// route written out, from the codes and scales the tensor reads back.
std::vector<float> ref_q_matmul(const std::vector<float>& x, std::size_t rows, std::size_t k, std::size_t n,
                                const qz::QuantizedValues& w) {
  std::vector<float> out(rows * n);
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t j = 0; j < n; ++j) {
      double acc = 0.0;
      for (std::size_t i = 0; i < k; ++i)
        acc += static_cast<double>(x[r * k + i]) * static_cast<double>(w.codes[i * n + j]) *
               static_cast<double>(w.scales[w.scales.size() == 1 ? 0 : j]);
      out[r * n + j] = static_cast<float>(acc);
    }
  return out;
}

// |got - want| within the error an int8 product may make: the cpu quantizes each row of x to
// s8 with the step max|x_row| / 127, so each activation moves by at most half a step and the
// sum by at most (max|x_row| / 254) * sum_k |w[k, n]| (w: the dequantized weight), plus f32
// rounding. The dequantize route (other devices) is within the rounding alone.
::testing::AssertionResult within_int8_bound(const std::vector<float>& got, const std::vector<float>& want,
                                             const std::vector<float>& x, std::size_t rows, std::size_t k, std::size_t n,
                                             const qz::QuantizedValues& w) {
  if (got.size() != want.size()) return ::testing::AssertionFailure() << "size " << got.size() << " != " << want.size();
  for (std::size_t r = 0; r < rows; ++r) {
    double amax = 0.0;
    for (std::size_t i = 0; i < k; ++i) amax = std::max(amax, std::fabs(static_cast<double>(x[r * k + i])));
    for (std::size_t j = 0; j < n; ++j) {
      double wsum = 0.0, mag = 0.0;
      for (std::size_t i = 0; i < k; ++i) {
        const double wv = static_cast<double>(w.codes[i * n + j]) * static_cast<double>(w.scales[w.scales.size() == 1 ? 0 : j]);
        wsum += std::fabs(wv);
        mag += std::fabs(wv * static_cast<double>(x[r * k + i]));
      }
      const double bound = amax / 254.0 * wsum * 1.001 + 1e-5 * mag + 1e-6;
      const std::size_t e = r * n + j;
      if (!(std::fabs(static_cast<double>(got[e]) - static_cast<double>(want[e])) <= bound))
        return ::testing::AssertionFailure() << "at " << e << ": " << got[e] << " != " << want[e] << " (bound " << bound << ")";
    }
  }
  return ::testing::AssertionSuccess();
}

// Norm-wise: ||got - want|| <= rel * ||want||.
::testing::AssertionResult close_rel(const std::vector<float>& got, const std::vector<float>& want, double rel) {
  if (got.size() != want.size()) return ::testing::AssertionFailure() << "size " << got.size() << " != " << want.size();
  double e2 = 0.0, w2 = 0.0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double d = static_cast<double>(got[i]) - static_cast<double>(want[i]);
    e2 += d * d;
    w2 += static_cast<double>(want[i]) * static_cast<double>(want[i]);
  }
  if (std::sqrt(e2) <= rel * std::sqrt(w2)) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "relative error " << std::sqrt(e2 / w2) << " > " << rel;
}

TEST_P(Quant, QMatmulPerColumnAndPerTensorAgainstAFloatReference) {
  constexpr std::size_t B = 2, M = 3, K = 40, N = 5;
  std::vector<float> x(B * M * K), w(K * N);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.61f * static_cast<float>(i) + 0.2f) * 2.0f;
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = std::cos(0.43f * static_cast<float>(i)) * (0.5f + static_cast<float>(i % N));
  const auto xt = fl<3>(x, Shape{B, M, K});
  const auto wt = fl<2>(w, Shape{K, N});
  for (const QuantScheme& s : {q8s().with_level(QuantLevel::block({static_cast<std::uint32_t>(K), 1})), q8s()}) {
    SCOPED_TRACE(to_string(s));
    const auto wq = quantize_dynamic(wt, s);
    const auto want = ref_q_matmul(x, B * M, K, N, values_of(wq));
    const auto got = qz::q_matmul(xt, wq);
    EXPECT_EQ(got.shape(), (Shape{B, M, N}));
    EXPECT_TRUE(within_int8_bound(fv(got), want, x, B * M, K, N, values_of(wq)));
    // rank 2 (the first M rows of x).
    const auto x2 = fl<2>(std::vector<float>(x.begin(), x.begin() + M * K), Shape{M, K});
    EXPECT_TRUE(within_int8_bound(fv(qz::q_matmul(x2, wq)), std::vector<float>(want.begin(), want.begin() + M * N), x, M, K, N,
                                  values_of(wq)));
  }
  EXPECT_EQ(fv(xt), x);  // input unchanged
}

TEST_P(Quant, QMatmulOfALayerWithinOnePercent) {
  // A layer-like product (independent signs, no cancellation by construction): norm-wise
  // within 1% of the dequantize route, the bound for the int8 product.
  constexpr std::size_t M = 8, K = 256, N = 16;
  std::uint32_t state = 12345u;
  auto next = [&] {
    state = state * 1664525u + 1013904223u;
    return static_cast<float>(state >> 8) / static_cast<float>(1u << 24) * 2.0f - 1.0f;
  };
  std::vector<float> x(M * K), w(K * N);
  for (float& v : x) v = next();
  for (float& v : w) v = next() * 0.1f;
  const auto wq = quantize_dynamic(fl<2>(w, Shape{K, N}), q8s().with_level(QuantLevel::block({static_cast<std::uint32_t>(K), 1})));
  const auto want = ref_q_matmul(x, M, K, N, values_of(wq));
  EXPECT_TRUE(close_rel(fv(qz::q_matmul(fl<2>(x, Shape{M, K}), wq)), want, 1e-2));
}

TEST_P(Quant, QMatmulOfASingleRowAndExactCodes) {
  // M = 1 (a GEMV): x = k / 64 with 127 in it, so a per-row int8 quantization is exact, and
  // the weight's codes times its scales are exact in f32: every route gives the same sums.
  constexpr std::size_t K = 64, N = 7;
  std::vector<float> x(K), w(K * N);
  for (std::size_t i = 0; i < K; ++i) x[i] = static_cast<float>(i == 5 ? 127 : static_cast<int>(i * 29 % 255) - 127) / 64.0f;
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(static_cast<int>(i * 13 % 255) - 127) * 0.125f;
  const auto wq = quantize(fl<2>(w, Shape{K, N}), q8s(), QuantParams{fl<1>({0.125f}, Shape{1})});
  const auto want = ref_q_matmul(x, 1, K, N, values_of(wq));
  EXPECT_TRUE(close_rel(fv(qz::q_matmul(fl<2>(x, Shape{1, K}), wq)), want, 1e-6));
}

TEST_P(Quant, QMatmulOfFewRowsAndAWideWeight) {
  // Few rows times a weight of >= 1M codes: on the cpu with 2+ threads, column slabs (a
  // multiple of 64 columns, the last narrower: N = 3500 gives 1792 + 1708), one per thread,
  // each its own int8 primitive over its slab of codes and scales, written into the full
  // result. Per-column and per-tensor scales, 1 and 5 rows, against the float reference.
  constexpr std::size_t K = 300, N = 3500;
  std::vector<float> w(K * N);
  for (std::size_t i = 0; i < w.size(); ++i)
    w[i] = std::sin(0.37f * static_cast<float>(i)) * (0.25f + static_cast<float>((i % N) % 7));
  const auto wt = fl<2>(w, Shape{K, N});
  for (const QuantScheme& s : {q8s().with_level(QuantLevel::block({static_cast<std::uint32_t>(K), 1})), q8s()}) {
    SCOPED_TRACE(to_string(s));
    const auto wq = quantize_dynamic(wt, s);
    for (const std::size_t M : {1u, 5u})
      for (const bool fused_off : {true, false}) {
        // the fused q8 kernel (quant_q8.hpp) takes these rows where the CPU has AVX512-VNNI:
        // turned off first, so that oneDNN's column slabs are what is checked
        tensor::cpu::qdetail::q8_disable(fused_off);
        std::vector<float> x(M * K);
        for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::cos(0.53f * static_cast<float>(i) + 0.1f) * 3.0f;
        const auto want = ref_q_matmul(x, M, K, N, values_of(wq));
        const auto got = fv(qz::q_matmul(fl<2>(x, Shape{M, K}), wq));
        tensor::cpu::qdetail::q8_disable(false);
        EXPECT_TRUE(within_int8_bound(got, want, x, M, K, N, values_of(wq))) << M << " rows";
        if (dev() != Device::cpu()) continue;
        const std::string route = tensor::cpu::last_q_matmul_route();
        if (!fused_off && tensor::cpu::qdetail::q8_route_for(static_cast<std::int64_t>(M))) {
          EXPECT_TRUE(route.starts_with("q8 fused")) << route;
          continue;
        }
#if TENSOR_HAVE_ONEDNN
        if (tensor::cpu::omp_threads() > 1) {
          EXPECT_TRUE(route.ends_with("(column slabs)")) << route;
        }
#endif
      }
  }
}

TEST_P(Quant, QMatmulBadInput) {
  const auto x = fl<2>({1, 2, 3, 4, 5, 6}, Shape{2, 3});
  const auto wf = fl<2>({1, 2, 3, 4, 5, 6}, Shape{3, 2});
  expect_error<DTypeError>([&] { (void)qz::q_matmul(x, wf); }, "q_matmul");  // a float weight: no silent float product
  const auto bad_k = quantize_dynamic(fl<2>({1, 2, 3, 4}, Shape{2, 2}), q8s());
  expect_error<ShapeError>([&] { (void)qz::q_matmul(x, bad_k); }, "q_matmul");
  const auto per_row = quantize_dynamic(wf, q8s().with_level(QuantLevel::block({1, 2})));  // scales per input row
  expect_error<ShapeError>([&] { (void)qz::q_matmul(x, per_row); }, "q_matmul");
  expect_error<DTypeError>([&] { (void)qz::q_matmul(quantize_dynamic(x, q8s()), quantize_dynamic(wf, q8s())); }, "q_matmul");
  EXPECT_EQ(fv(x), (std::vector<float>{1, 2, 3, 4, 5, 6}));
}

// ---- step 3: matmul / linear / nn::Linear / conv2d with a quantized operand -----------------

namespace {

// The sin/cos fillers of the tests above, one per call site.
std::vector<float> wave(std::size_t n, float f, float phase, float amp) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = std::sin(f * static_cast<float>(i) + phase) * amp;
  return v;
}

// The dequantized weight, element by element, from the codes and scales the tensor reads back
// (scales per tensor, or per index `group(i)`).
template <class G>
std::vector<double> dequantized_ref(const qz::QuantizedValues& w, G group) {
  std::vector<double> out(w.codes.size());
  for (std::size_t i = 0; i < out.size(); ++i)
    out[i] = static_cast<double>(w.codes[i]) * static_cast<double>(w.scales[w.scales.size() == 1 ? 0 : group(i)]);
  return out;
}

std::map<std::string, std::uint64_t> op_calls(const ProfileResult& p) {
  std::map<std::string, std::uint64_t> calls;
  for (const ProfileRow& r : p.rows) calls[r.op] += r.calls;
  return calls;
}

}  // namespace

TEST_P(Quant, MatmulAndLinearWithAQuantizedWeightAgainstLoops) {
  constexpr std::size_t B = 2, M = 3, K = 48, N = 6;
  const auto x = wave(B * M * K, 0.37f, 0.1f, 1.5f);
  const auto w = wave(K * N, 0.71f, 0.4f, 0.3f);
  const std::vector<float> bias = {0.5f, -1.0f, 0.25f, 2.0f, -0.75f, 0.0f};
  const QuantScheme per_col = q8s().with_level(QuantLevel::block({static_cast<std::uint32_t>(K), 1}));
  for (const QuantScheme& s : {per_col, q8s()}) {
    SCOPED_TRACE(to_string(s));
    const auto wq = quantize_dynamic(fl<2>(w, Shape{K, N}), s);
    const auto vals = values_of(wq);
    const auto want = ref_q_matmul(x, B * M, K, N, vals);  // loops over codes * scales
    std::vector<float> want_b(want);
    for (std::size_t i = 0; i < want_b.size(); ++i) want_b[i] += bias[i % N];
    const auto x3 = fl<3>(x, Shape{B, M, K});
    // linear, batched lhs [B, M, K], with a bias; one q_matmul, no float weight on the cpu
    profile::start();
    const auto y = nn::linear(x3, wq, fl<1>(bias, Shape{N}));
    const auto calls = op_calls(profile::stop());
    EXPECT_EQ(y.shape(), (Shape{B, M, N}));
    EXPECT_TRUE(close_rel(fv(y), want_b, 1e-2));
    auto y_nb = fv(y);
    for (std::size_t i = 0; i < y_nb.size(); ++i) y_nb[i] -= bias[i % N];
    EXPECT_TRUE(within_int8_bound(y_nb, want, x, B * M, K, N, vals));
    EXPECT_EQ(calls.count("q_matmul") ? calls.at("q_matmul") : 0u, 1u);
    if (dev() == Device::cpu()) {
      EXPECT_EQ(calls.count("dequantize"), 0u);
    }
    // matmul, rank 2, M = 1 and M = 0
    const auto x2 = fl<2>(std::vector<float>(x.begin(), x.begin() + M * K), Shape{M, K});
    EXPECT_TRUE(within_int8_bound(fv(x2.matmul(wq)), std::vector<float>(want.begin(), want.begin() + M * N), x, M, K, N, vals));
    const auto x1 = fl<2>(std::vector<float>(x.begin(), x.begin() + K), Shape{1, K});
    EXPECT_TRUE(within_int8_bound(fv(x1.matmul(wq)), std::vector<float>(want.begin(), want.begin() + N), x, 1, K, N, vals));
    const auto y1 = nn::linear(fl<1>(std::vector<float>(x.begin(), x.begin() + K), Shape{K}), wq);  // x [K]
    EXPECT_EQ(y1.shape(), (Shape{N}));
    EXPECT_TRUE(within_int8_bound(fv(y1), std::vector<float>(want.begin(), want.begin() + N), x, 1, K, N, vals));
    const auto x0 = Tensor<2>::zeros({0, K}, dev());
    EXPECT_EQ(x0.matmul(wq).shape(), (Shape{0, N}));
    EXPECT_EQ(nn::linear(Tensor<3>::zeros({B, 0, K}, dev()), wq, fl<1>(bias, Shape{N})).shape(), (Shape{B, 0, N}));
    EXPECT_EQ(fv(x3), x);  // input unchanged
  }
}

TEST_P(Quant, QuantizedLinearModuleAndOtherOperandOrders) {
  constexpr std::size_t M = 4, K = 32, N = 5;
  const auto x = wave(M * K, 0.29f, 0.3f, 2.0f);
  const auto w = wave(K * N, 0.53f, 0.9f, 0.4f);
  const auto xt = fl<2>(x, Shape{M, K});
  // nn::Linear stores its weight [d_in, d_out]: a quantized one per output column reaches q_matmul.
  nn::Linear lin(nn::LinearConfig{K, N, true}, dev());
  lin.weight = quantize_dynamic(fl<2>(w, Shape{K, N}), q8s().with_level(QuantLevel::block({static_cast<std::uint32_t>(K), 1})));
  lin.bias = fl<1>({1, 2, 3, 4, 5}, Shape{N});
  const auto vals = values_of(lin.weight);
  auto want = ref_q_matmul(x, M, K, N, vals);
  for (std::size_t i = 0; i < want.size(); ++i) want[i] += static_cast<float>(i % N + 1);
  EXPECT_TRUE(close_rel(fv(lin.forward(xt)), want, 1e-2));
  // Q x Float and Q x Q: dequantized, then the float product (loops over codes * scales).
  const auto aq = quantize_dynamic(xt, q8s());  // [M, K], per tensor
  const auto bq = quantize_dynamic(fl<2>(w, Shape{K, N}), q8s());
  const auto da = dequantized_ref(values_of(aq), [](std::size_t) { return 0; });
  const auto db = dequantized_ref(values_of(bq), [](std::size_t) { return 0; });
  std::vector<float> want_qf(M * N), want_qq(M * N);
  for (std::size_t i = 0; i < M; ++i)
    for (std::size_t j = 0; j < N; ++j) {
      double f = 0.0, q = 0.0;
      for (std::size_t k = 0; k < K; ++k) {
        f += da[i * K + k] * static_cast<double>(w[k * N + j]);
        q += da[i * K + k] * db[k * N + j];
      }
      want_qf[i * N + j] = static_cast<float>(f);
      want_qq[i * N + j] = static_cast<float>(q);
    }
  EXPECT_TRUE(near(fv(aq.matmul(fl<2>(w, Shape{K, N}))), want_qf, 1e-4f));
  EXPECT_TRUE(near(fv(aq.matmul(bq)), want_qq, 1e-4f));
  // scales per input row (not a q_matmul weight): the dequantized weight, the float product
  const auto per_row = quantize_dynamic(fl<2>(w, Shape{K, N}), q8s().with_level(QuantLevel::block({1, static_cast<std::uint32_t>(N)})));
  const auto dr = dequantized_ref(values_of(per_row), [](std::size_t i) { return i / N; });
  std::vector<float> want_r(M * N);
  for (std::size_t i = 0; i < M; ++i)
    for (std::size_t j = 0; j < N; ++j) {
      double f = 0.0;
      for (std::size_t k = 0; k < K; ++k) f += static_cast<double>(x[i * K + k]) * dr[k * N + j];
      want_r[i * N + j] = static_cast<float>(f);
    }
  EXPECT_TRUE(near(fv(xt.matmul(per_row)), want_r, 1e-4f));
  EXPECT_TRUE(near(fv(nn::linear(xt, per_row)), want_r, 1e-4f));
}

TEST_P(Quant, QuantizedOperandsBadInput) {
  const auto x = fl<2>({1, 2, 3, 4, 5, 6}, Shape{2, 3});
  const auto wq = quantize_dynamic(fl<2>({1, 2, 3, 4, 5, 6}, Shape{3, 2}), q8s());
  const auto codes_before = values_of(wq).codes;
  // a transposed view of a quantized weight (its codes moved, the scale kept) multiplies as the
  // values it stands for
  const std::vector<float> dq = fv(dequantize(wq));  // [3, 2]
  const std::vector<float> xa = {1, 2, 3, 4};         // [2, 2]
  std::vector<float> want(6, 0.0f);
  for (std::size_t i = 0; i < 2; ++i)
    for (std::size_t j = 0; j < 3; ++j)
      for (std::size_t k = 0; k < 2; ++k) want[i * 3 + j] += xa[i * 2 + k] * dq[j * 2 + k];
  EXPECT_TRUE(near(fv(fl<2>(xa, Shape{2, 2}).matmul(wq.transpose())), want, 1e-2f));
  expect_error<ShapeError>([&] { (void)x.matmul(quantize_dynamic(fl<2>({1, 2, 3, 4}, Shape{2, 2}), q8s())); }, "matmul");
  expect_error<ShapeError>([&] { (void)nn::linear(fl<2>({1, 2, 3, 4}, Shape{2, 2}), wq); }, "linear");
  expect_error<ShapeError>([&] { (void)nn::linear(x, wq, fl<1>({1, 2, 3}, Shape{3})); }, "linear");
  expect_error<DTypeError>([&] { (void)nn::linear(x, wq, std::optional<Tensor<1>>(fl<1>({1, 2}, Shape{2}).cast(DType::F64))); },
                           "linear");
  const auto w4 = quantize_dynamic(fl<4>(wave(2 * 3 * 2 * 2, 0.3f, 0.0f, 1.0f), Shape{2, 3, 2, 2}), q8s());
  expect_error<ShapeError>([&] { (void)nn::conv2d(fl<4>(wave(2 * 2 * 4 * 4, 0.2f, 0.0f, 1.0f), Shape{2, 2, 4, 4}), w4, std::nullopt, {}); },
                           "conv2d");
  EXPECT_EQ(fv(x), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(values_of(wq).codes, codes_before);
}

TEST_P(Quant, Conv2dWithAQuantizedWeightAgainstLoops) {
  // K = 36: the int8 route on the cpu; L = 100 output pixels per image at stride 1 (a block of 64 rows and 36)
  constexpr std::size_t Nb = 2, C = 6, H = 12, W = 11, OC = 4, KH = 3, KW = 2;
  // independent signs (an LCG), no cancellation by construction: the int8 route is norm-wise
  // within 1% (each im2col row, one output pixel, quantized to s8 with its own scale)
  std::uint32_t state = 777u;
  auto next = [&] {
    state = state * 1664525u + 1013904223u;
    return static_cast<float>(state >> 8) / static_cast<float>(1u << 24) * 2.0f - 1.0f;
  };
  std::vector<float> x(Nb * C * H * W), w(OC * C * KH * KW);
  for (float& v : x) v = next();
  for (float& v : w) v = next() * 0.3f;
  const std::vector<float> bias = {0.1f, -0.2f, 0.3f, 0.0f};
  const QuantScheme per_oc = q8s().with_level(QuantLevel::block({1, static_cast<std::uint32_t>(C), KH, KW}));
  for (const QuantScheme& s : {per_oc, q8s()}) {
    for (int variant = 0; variant < 2; ++variant) {
      SCOPED_TRACE(to_string(s) + (variant ? " stride 2, padding 1" : " stride 1"));
      nn::ConvOptions<2> o;
      if (variant) {
        o.stride = {2, 2};
        o.padding = {1, 1};
      }
      const auto wq = quantize_dynamic(fl<4>(w, Shape{OC, C, KH, KW}), s);
      const auto dw = dequantized_ref(values_of(wq), [](std::size_t i) { return i / (C * KH * KW); });
      const std::size_t OH = (H + 2 * static_cast<std::size_t>(o.padding[0]) - KH) / static_cast<std::size_t>(o.stride[0]) + 1;
      const std::size_t OW = (W + 2 * static_cast<std::size_t>(o.padding[1]) - KW) / static_cast<std::size_t>(o.stride[1]) + 1;
      std::vector<float> want(Nb * OC * OH * OW);
      for (std::size_t n = 0; n < Nb; ++n)
        for (std::size_t oc = 0; oc < OC; ++oc)
          for (std::size_t oh = 0; oh < OH; ++oh)
            for (std::size_t ow = 0; ow < OW; ++ow) {
              double acc = bias[oc];
              for (std::size_t c = 0; c < C; ++c)
                for (std::size_t i = 0; i < KH; ++i)
                  for (std::size_t j = 0; j < KW; ++j) {
                    const auto ih = static_cast<std::int64_t>(oh) * o.stride[0] - o.padding[0] + static_cast<std::int64_t>(i);
                    const auto iw = static_cast<std::int64_t>(ow) * o.stride[1] - o.padding[1] + static_cast<std::int64_t>(j);
                    if (ih < 0 || iw < 0 || ih >= static_cast<std::int64_t>(H) || iw >= static_cast<std::int64_t>(W)) continue;
                    acc += static_cast<double>(x[((n * C + c) * H + static_cast<std::size_t>(ih)) * W + static_cast<std::size_t>(iw)]) *
                           dw[((oc * C + c) * KH + i) * KW + j];
                  }
              want[((n * OC + oc) * OH + oh) * OW + ow] = static_cast<float>(acc);
            }
      profile::start();
      const auto y = nn::conv2d(fl<4>(x, Shape{Nb, C, H, W}), wq, fl<1>(bias, Shape{OC}), o);
      const auto calls = op_calls(profile::stop());
      EXPECT_EQ(calls.count("q_conv2d"), dev() == Device::cpu() ? 1u : 0u);  // oneDNN's int8 conv on the cpu, no im2col
      EXPECT_EQ(calls.count("unfold4d"), 0u);
      EXPECT_EQ(y.shape(), (Shape{Nb, OC, OH, OW}));
      EXPECT_TRUE(close_rel(fv(y), want, 1e-2));
    }
  }
  {
    // a NaN in x has no int8 code: the product takes the dequantize route, and the NaN reaches
    // exactly the outputs whose window holds it (image 1, channel 2, row 5, column 4)
    std::vector<float> xn(x);
    xn[((1 * C + 2) * H + 5) * W + 4] = std::numeric_limits<float>::quiet_NaN();
    const auto wq = quantize_dynamic(fl<4>(w, Shape{OC, C, KH, KW}), per_oc);
    const auto y = fv(nn::conv2d(fl<4>(xn, Shape{Nb, C, H, W}), wq, fl<1>(bias, Shape{OC}), {}));
    const std::size_t OH = H - KH + 1, OW = W - KW + 1;
    for (std::size_t n = 0; n < Nb; ++n)
      for (std::size_t oc = 0; oc < OC; ++oc)
        for (std::size_t oh = 0; oh < OH; ++oh)
          for (std::size_t ow = 0; ow < OW; ++ow) {
            const bool hit = n == 1 && oh <= 5 && 5 < oh + KH && ow <= 4 && 4 < ow + KW;
            EXPECT_EQ(std::isnan(y[((n * OC + oc) * OH + oh) * OW + ow]), hit) << n << " " << oc << " " << oh << " " << ow;
          }
  }
  // groups 2: the default route (dequantize + conv), against the same kind of loop
  const auto wg = quantize_dynamic(fl<4>(wave(4 * 1 * 2 * 2, 0.9f, 0.1f, 1.0f), Shape{4, 1, 2, 2}), q8s());
  const auto dg = dequantized_ref(values_of(wg), [](std::size_t) { return 0; });
  const auto xg = wave(1 * 2 * 3 * 3, 0.5f, 0.0f, 1.0f);
  nn::ConvOptions<2> og;
  og.groups = 2;
  std::vector<float> want_g(4 * 2 * 2);
  for (std::size_t oc = 0; oc < 4; ++oc)
    for (std::size_t oh = 0; oh < 2; ++oh)
      for (std::size_t ow = 0; ow < 2; ++ow) {
        double acc = 0.0;
        for (std::size_t i = 0; i < 2; ++i)
          for (std::size_t j = 0; j < 2; ++j) acc += static_cast<double>(xg[((oc / 2) * 3 + oh + i) * 3 + ow + j]) * dg[(oc * 2 + i) * 2 + j];
        want_g[(oc * 2 + oh) * 2 + ow] = static_cast<float>(acc);
      }
  EXPECT_TRUE(near(fv(nn::conv2d(fl<4>(xg, Shape{1, 2, 3, 3}), wg, std::nullopt, og)), want_g, 1e-4f));
}
