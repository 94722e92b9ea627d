// The quant rows against host loops over codes and scales (issue 32, the Vulkan kernels of
// backends/vulkan/shaders/quant.comp; on every device): dequantize bit for bit for every
// value x store x level x scale dtype, quantize's codes exactly (ties away from zero, clamps,
// sliced / transposed / f16 inputs, zero size), q_matmul within rel 1e-5 of the dequantized
// product (M = 1 and M > 64, batches, per tensor / per column / per block [b, 1] scales,
// transposed and sliced x). Every expectation is computed here from the codes and scales.
#include <bit>

#include "quant_test_util.hpp"

namespace {

using namespace quant_test;

const QuantValue kValues[] = {QuantValue::Q8S, QuantValue::Q8F, QuantValue::Q4S, QuantValue::Q4F, QuantValue::Q2S, QuantValue::Q2F};
const QuantStore kStores[] = {QuantStore::Native, QuantStore::PackedU32};
const ScaleDtype kScaleDtypes[] = {ScaleDtype::F32, ScaleDtype::F16, ScaleDtype::BF16};

// Block extents per axis (per tensor: the whole shape) and the grid, from the shape and block.
struct Blocks {
  std::vector<std::size_t> ext, grid;
};
Blocks blocks_of(const Shape& s, const QuantScheme& scheme) {
  Blocks b;
  const std::size_t r = s.rank();
  b.ext.assign(r, 1);
  b.grid.assign(r, 1);
  for (std::size_t d = 0; d < r; ++d) b.ext[d] = s[d];
  if (scheme.level.is_block()) {
    const BlockSize& bs = scheme.level.shape;
    for (std::size_t d = 0; d < r; ++d) b.ext[d] = 1;
    for (std::size_t i = 0; i < bs.rank; ++i) b.ext[r - bs.rank + i] = bs.dims[i];  // right-aligned
    for (std::size_t d = 0; d < r; ++d) b.grid[d] = s[d] / b.ext[d];
  }
  return b;
}
// The block (row-major over the grid) of element i (row-major over s).
std::size_t block_of(std::size_t i, const Shape& s, const Blocks& b, bool per_tensor) {
  if (per_tensor) return 0;
  std::size_t blk = 0, gs = 1;
  for (std::size_t d = s.rank(); d-- > 0;) {
    const std::size_t c = i % s[d];
    i /= s[d];
    blk += c / b.ext[d] * gs;
    gs *= b.grid[d];
  }
  return blk;
}
std::size_t grid_size(const Blocks& b) {
  std::size_t n = 1;
  for (std::size_t g : b.grid) n *= g;
  return n;
}

// Codes in the value's range from a fixed sequence, with both ends present.
std::vector<std::int8_t> codes_for(std::size_t n, const QuantScheme& s, std::uint32_t seed) {
  const auto [a, b] = s.range();
  std::vector<std::int8_t> c(n);
  for (std::size_t i = 0; i < n; ++i) {
    seed = seed * 1664525u + 1013904223u;
    c[i] = static_cast<std::int8_t>(a + static_cast<int>((seed >> 8) % static_cast<std::uint32_t>(b - a + 1)));
  }
  if (n > 1) {
    c[0] = static_cast<std::int8_t>(a);
    c[n - 1] = static_cast<std::int8_t>(b);
  }
  return c;
}
// Positive scales, already in the scale dtype (so the data encodes them exactly).
std::vector<float> scales_for(std::size_t n, ScaleDtype dt, std::uint32_t seed) {
  std::vector<float> s = lcg(n, seed, 1.0f);
  for (float& v : s) v = qz::scale_to_dtype(std::fabs(v) * 0.05f + 1e-3f, dt);
  return s;
}

// The schemes of the sweeps: per tensor and blocks along one and two axes of [4, 8] / [2, 4, 8].
std::vector<QuantLevel> levels() {
  return {QuantLevel::tensor(), QuantLevel::block({1, 8}), QuantLevel::block({4}), QuantLevel::block({2, 4}),
          QuantLevel::block({4, 1})};
}

TEST_P(Quant, NativeDequantizeEqualsHostLoopsBitForBit) {
  for (const Shape& shape : {Shape{4, 8}, Shape{2, 4, 8}})
    for (QuantValue v : kValues)
      for (QuantStore st : kStores)
        for (const QuantLevel& lv : levels())
          for (ScaleDtype sd : kScaleDtypes) {
            const QuantScheme s = QuantScheme{}.with_value(v).with_store(st).with_level(lv).with_param(sd);
            SCOPED_TRACE(::testing::Message() << to_string(s) << " " << shape.to_string());
            const Blocks b = blocks_of(shape, s);
            const std::size_t n = shape.num_elements();
            const auto codes = codes_for(n, s, static_cast<std::uint32_t>(n + static_cast<int>(v) * 7 + static_cast<int>(sd)));
            const auto scales = scales_for(grid_size(b), sd, static_cast<std::uint32_t>(11 + static_cast<int>(st)));
            std::vector<float> want(n);
            for (std::size_t i = 0; i < n; ++i)
              want[i] = static_cast<float>(codes[i]) * scales[block_of(i, shape, b, !lv.is_block())];
            std::vector<float> got;
            if (shape.rank() == 2) got = fv(dequantize(Tensor<2>::from_data(qz::quantized_data(codes, shape, s, scales), dev())));
            else got = fv(dequantize(Tensor<3>::from_data(qz::quantized_data(codes, shape, s, scales), dev())));
            ASSERT_EQ(got.size(), n);
            for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(std::bit_cast<std::uint32_t>(got[i]), std::bit_cast<std::uint32_t>(want[i])) << "at " << i;
          }
}

// dequantize to f16, bf16 and f64, reached through Q x Float matmul (the quantized lhs is
// dequantized to the float operand's dtype) with an identity: the product is the dequantized
// values themselves (one nonzero product per output, summed with zeros), rounded once from f32.
TEST_P(Quant, NativeDequantizeToOtherFloatDtypes) {
  const Shape shape{4, 8};
  for (const QuantLevel& lv : {QuantLevel::tensor(), QuantLevel::block({1, 4})}) {
    const QuantScheme s = QuantScheme{}.with_value(QuantValue::Q8S).with_store(QuantStore::Native).with_level(lv);
    const Blocks b = blocks_of(shape, s);
    const auto codes = codes_for(32, s, 99u);
    auto scales = scales_for(grid_size(b), ScaleDtype::F32, 7u);
    scales[0] = 1e-7f;  // products below f16's normal range: its subnormals
    const auto q = Tensor<2>::from_data(qz::quantized_data(codes, shape, s, scales), dev());
    std::vector<float> f32(32);
    for (std::size_t i = 0; i < 32; ++i) f32[i] = static_cast<float>(codes[i]) * scales[block_of(i, shape, b, !lv.is_block())];
    std::vector<float> eye(64, 0.0f);
    for (std::size_t i = 0; i < 8; ++i) eye[i * 8 + i] = 1.0f;
    for (DType dt : {DType::F16, DType::BF16, DType::F64}) {
      SCOPED_TRACE(::testing::Message() << to_string(s) << " " << dtype_name(dt));
      const auto id = fl<2>(eye, Shape{8, 8}).cast(dt);
      const auto y = q.matmul(id);
      ASSERT_EQ(y.dtype(), dt);
      // the want: the f32 values rounded to dt by the host (TensorData's conversion)
      const auto want = TensorData::from<float>(f32, shape).convert(dt).convert(DType::F64).to_vec<double>();
      const auto got = y.into_data().convert(DType::F64).to_vec<double>();
      ASSERT_EQ(got.size(), want.size());
      for (std::size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], want[i]) << "at " << i;
    }
  }
}

// The CPU's rule, written out: v = x * fl(1 / s) in f32, round half away from zero, clamp.
std::int8_t host_code(float x, float s, const QuantScheme& scheme) {
  const auto [a, b] = scheme.range();
  const float inv = 1.0f / s;
  volatile float v = x * inv;  // one rounded product (no contraction into what follows)
  const float vv = v;
  if (std::isnan(vv)) return 0;
  float r = std::trunc(vv);
  if (std::fabs(vv - r) >= 0.5f) r += vv > 0 ? 1.0f : -1.0f;
  r = std::min(std::max(r, static_cast<float>(a)), static_cast<float>(b));
  return static_cast<std::int8_t>(r);
}

// The codes of quantize(x, scheme, scales) for host values `x` of `shape`.
std::vector<std::int8_t> host_codes(const std::vector<float>& x, const Shape& shape, const QuantScheme& s,
                                    const std::vector<float>& scales) {
  const Blocks b = blocks_of(shape, s);
  std::vector<std::int8_t> c(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) c[i] = host_code(x[i], scales[block_of(i, shape, b, !s.level.is_block())], s);
  return c;
}

template <std::size_t D>
std::vector<std::int8_t> codes_of(const Tensor<D>& q) { return values_of(q).codes; }

TEST_P(Quant, NativeQuantizeCodesEqualHostLoops) {
  const Shape shape{4, 8};
  for (QuantValue v : kValues)
    for (QuantStore st : kStores)
      for (const QuantLevel& lv : levels())
        for (ScaleDtype sd : kScaleDtypes) {
          const QuantScheme s = QuantScheme{}.with_value(v).with_store(st).with_level(lv).with_param(sd);
          SCOPED_TRACE(to_string(s));
          const Blocks b = blocks_of(shape, s);
          const auto scales = scales_for(grid_size(b), sd, 5u + static_cast<std::uint32_t>(v));
          // values over and beyond the range (clamps) of the largest scale
          const auto x = lcg(shape.num_elements(), 77u + static_cast<std::uint32_t>(sd), 1.3f * static_cast<float>(s.range().second) * 0.026f);
          const auto q = quantize(fl<2>(x, shape), s, QuantParams{fl<1>(scales, Shape{scales.size()})});
          EXPECT_EQ(codes_of(q), host_codes(x, shape, s, scales));
          EXPECT_EQ(values_of(q).scales, scales);
        }
}

TEST_P(Quant, NativeQuantizeRoundsExactTiesAwayFromZero) {
  // Scales that are powers of two: 1 / s is exact, so x = (k + 0.5) * s is a tie exactly.
  const QuantScheme s = QuantScheme{}.with_value(QuantValue::Q8S).with_store(QuantStore::Native);
  const std::vector<float> x = {2.5f * 0.25f, -2.5f * 0.25f, 0.5f * 0.25f, -0.5f * 0.25f, 126.5f * 0.25f, -126.5f * 0.25f,
                                3.4999998f * 0.25f, -1.5f * 0.25f, 0.0f, -0.0f, 1000.0f, -1000.0f};
  const auto q = quantize(fl<1>(x, Shape{x.size()}), s, QuantParams{fl<1>({0.25f}, Shape{1})});
  EXPECT_EQ(codes_of(q), i8({3, -3, 1, -1, 127, -127, 3, -2, 0, 0, 127, -127}));
  // per block along the last axis: two blocks, scales 0.5 and 0.125, ties in both
  const QuantScheme sb = QuantScheme{}.with_value(QuantValue::Q4S).with_store(QuantStore::PackedU32).per_block({4}, ScaleDtype::F32);
  const std::vector<float> y = {0.25f, -0.75f, 1.25f, 5.0f, 0.0625f, -0.1875f, 0.3125f, -5.0f};
  const auto qb = quantize(fl<1>(y, Shape{8}), sb, QuantParams{fl<1>({0.5f, 0.125f}, Shape{2})});
  EXPECT_EQ(codes_of(qb), i8({1, -2, 3, 7, 1, -2, 3, -7}));
  // not finite: NaN -> 0 (Rust's `as`), inf -> the clamps
  const float inf = std::numeric_limits<float>::infinity();
  const auto qn = quantize(fl<1>({std::numeric_limits<float>::quiet_NaN(), inf, -inf, 1.0f}, Shape{4}), s,
                           QuantParams{fl<1>({0.25f}, Shape{1})});
  EXPECT_EQ(codes_of(qn), i8({0, 127, -127, 4}));
  // f64 x goes through f32 first (as the cpu's f32_dense): 2.5 * 0.25 + 1e-12 rounds to the
  // tie 0.625f, which then rounds away from zero (in f64 it would be just above the tie anyway;
  // 0.625 - 1e-12 shows the difference: 2 in f64, 3 through f32).
  if (dev().supports_dtype(DType::F64)) {
    const auto xd = Tensor<1>::from_data(TensorData::from<double>({0.625 + 1e-12, 0.625 - 1e-12, -0.625 + 1e-12}, Shape{3}), dev());
    EXPECT_EQ(codes_of(quantize(xd, s, QuantParams{fl<1>({0.25f}, Shape{1})})), i8({3, 3, -3}));
  }
}

TEST_P(Quant, NativeQuantizeReadsSlicedTransposedAndHalfInputs) {
  const QuantScheme s = QuantScheme{}.with_value(QuantValue::Q8F).with_store(QuantStore::Native).per_block({1, 3}, ScaleDtype::F32);
  const auto base = lcg(6 * 9, 1234u, 2.0f);  // [6, 9]
  const auto big = fl<2>(base, Shape{6, 9});
  const std::vector<float> scales = {0.011f, 0.017f, 0.023f, 0.029f, 0.013f, 0.019f};  // grid [3, 2] of a [3, 6] view
  const auto sc = fl<1>(scales, Shape{6});
  // rows 1..3 (step 1) and columns 2, 3, .. 7: a strided view [3, 6]
  const auto sl = big.slice({Slice::range(1, 4), Slice::range(2, 8)});
  std::vector<float> xs;
  for (std::size_t i = 1; i < 4; ++i)
    for (std::size_t j = 2; j < 8; ++j) xs.push_back(base[i * 9 + j]);
  EXPECT_EQ(codes_of(quantize(sl, s, QuantParams{sc})), host_codes(xs, Shape{3, 6}, s, scales));
  // the transpose of a [6, 3] tensor: a [3, 6] view with unit row stride
  const auto t = fl<2>(base, Shape{18, 3}).slice({Slice::range(0, 6), Slice::all()}).transpose();
  std::vector<float> xt;
  for (std::size_t i = 0; i < 3; ++i)
    for (std::size_t j = 0; j < 6; ++j) xt.push_back(base[j * 3 + i]);
  EXPECT_EQ(codes_of(quantize(t, s, QuantParams{sc})), host_codes(xt, Shape{3, 6}, s, scales));
  // f16 and bf16 inputs: their exact f32 values quantized
  for (DType dt : {DType::F16, DType::BF16}) {
    const auto h = fl<2>(xs, Shape{3, 6}).cast(dt);
    EXPECT_EQ(codes_of(quantize(h, s, QuantParams{sc})), host_codes(fv(h), Shape{3, 6}, s, scales)) << dtype_name(dt);
  }
  // zero size: no codes, the scheme kept
  const auto z = quantize(fl<2>({}, Shape{0, 6}), s.per_block({1, 3}, ScaleDtype::F32), QuantParams{fl<1>({}, Shape{0})});
  EXPECT_EQ(z.shape(), (Shape{0, 6}));
  EXPECT_TRUE(codes_of(z).empty());
  EXPECT_TRUE(fv(dequantize(z)).empty());
}

// ---- q_matmul against the host product of x and the dequantized weight -----------------

struct Weight {
  Tensor<2> q;
  std::vector<float> deq;  // [K, N], f32(code) * scale
};
Weight weight(std::size_t k, std::size_t n, const QuantScheme& s, std::uint32_t seed) {
  const Shape shape{k, n};
  const Blocks b = blocks_of(shape, s);
  const auto codes = codes_for(k * n, s, seed);
  const auto scales = scales_for(grid_size(b), s.param, seed + 1);
  Weight w{Tensor<2>::from_data(qz::quantized_data(codes, shape, s, scales), dev()), std::vector<float>(k * n)};
  for (std::size_t i = 0; i < k * n; ++i) w.deq[i] = static_cast<float>(codes[i]) * scales[block_of(i, shape, b, !s.level.is_block())];
  return w;
}
// The cpu's q_matmul is an int8 product (x quantized per row: oneDNN, the q4 kernels): about
// 1e-2 of sum |x| |w|; every other device's is the dequantized weight times x in f32.
double product_rel() { return dev() == Device::cpu() ? 1e-2 : 1e-5; }

// y [rows, n] = x [rows, k] w; err [rows, n] = sum |x| |w| (the scale of the rounding error).
void host_product(const std::vector<float>& x, const std::vector<float>& w, std::size_t rows, std::size_t k, std::size_t n,
                  std::vector<double>& y, std::vector<double>& mag) {
  y.assign(rows * n, 0.0);
  mag.assign(rows * n, 0.0);
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t kk = 0; kk < k; ++kk)
      for (std::size_t j = 0; j < n; ++j) {
        const double p = static_cast<double>(x[r * k + kk]) * static_cast<double>(w[kk * n + j]);
        y[r * n + j] += p;
        mag[r * n + j] += std::fabs(p);
      }
}
::testing::AssertionResult close_product(const std::vector<float>& got, const std::vector<double>& y, const std::vector<double>& mag,
                                         double rel) {
  if (got.size() != y.size()) return ::testing::AssertionFailure() << "size " << got.size() << " != " << y.size();
  for (std::size_t i = 0; i < got.size(); ++i)
    if (!(std::fabs(got[i] - y[i]) <= rel * mag[i] + 1e-30))
      return ::testing::AssertionFailure() << "at " << i << ": " << got[i] << " != " << y[i] << " (|x||w| " << mag[i] << ")";
  return ::testing::AssertionSuccess();
}

std::vector<QuantScheme> weight_schemes(std::size_t k) {
  const QuantScheme q8 = QuantScheme{}.with_value(QuantValue::Q8S).with_store(QuantStore::Native);
  const QuantScheme q4 = QuantScheme{}.with_value(QuantValue::Q4S).with_store(QuantStore::PackedU32);
  return {q8, q8.per_block({static_cast<std::uint32_t>(k), 1}, ScaleDtype::F32), q4.per_block({32, 1}, ScaleDtype::F16),
          q8.per_block({16, 1}, ScaleDtype::BF16), QuantScheme{}.with_value(QuantValue::Q2F).per_tensor(ScaleDtype::F32)};
}

TEST_P(Quant, NativeQMatmulAgainstTheDequantizedProduct) {
  const std::size_t k = 96, n = 72;  // n: a 64-column tile and a partial one
  for (const QuantScheme& s : weight_schemes(k)) {
    const Weight w = weight(k, n, s, 3u);
    for (std::size_t m : {1u, 3u, 16u, 17u, 70u, 130u}) {  // vulkan: the GEMV (m <= 16), the tiles (70: a partial tile)
      SCOPED_TRACE(::testing::Message() << to_string(s) << " m " << m);
      const auto x = lcg(m * k, static_cast<std::uint32_t>(m), 1.5f);
      std::vector<double> y, mag;
      host_product(x, w.deq, m, k, n, y, mag);
      const auto out = qz::q_matmul(fl<2>(x, Shape{m, k}), w.q);
      EXPECT_EQ(out.shape(), (Shape{m, n}));
      EXPECT_TRUE(close_product(fv(out), y, mag, product_rel()));
    }
  }
}

TEST_P(Quant, NativeQMatmulOddSizes) {
  // K not a multiple of the 16-deep tile, N under one 64-column tile, blocks of 10 along K;
  // and K = 4096 (many blocks of 32 on the GEMV's four K slices).
  const QuantScheme q8 = QuantScheme{}.with_value(QuantValue::Q8F).with_store(QuantStore::PackedU32);
  struct Case { std::size_t k, n; QuantScheme s; };
  for (const Case& c : {Case{50, 5, q8}, Case{50, 5, q8.per_block({50, 1}, ScaleDtype::F32)},
                        Case{50, 5, q8.per_block({10, 1}, ScaleDtype::F16)},
                        Case{4096, 65, QuantScheme{}.with_value(QuantValue::Q4F).per_block({32, 1}, ScaleDtype::F16)}}) {
    const Weight w = weight(c.k, c.n, c.s, 17u);
    for (std::size_t m : {1u, 17u, 65u}) {
      if (c.k == 4096 && m == 65) continue;
      SCOPED_TRACE(::testing::Message() << to_string(c.s) << " " << m << " x " << c.k << " x " << c.n);
      const auto x = lcg(m * c.k, 31u + static_cast<std::uint32_t>(m), 1.0f);
      std::vector<double> y, mag;
      host_product(x, w.deq, m, c.k, c.n, y, mag);
      EXPECT_TRUE(close_product(fv(qz::q_matmul(fl<2>(x, Shape{m, c.k}), w.q)), y, mag, product_rel()));
    }
  }
}

TEST_P(Quant, NativeQMatmulBatchesTransposedAndSlicedX) {
  const std::size_t k = 64, n = 40;
  const QuantScheme s = QuantScheme{}.with_value(QuantValue::Q8S).with_store(QuantStore::Native).per_block({k, 1}, ScaleDtype::F32);
  const Weight w = weight(k, n, s, 9u);
  for (std::size_t m : {1u, 67u}) {
    SCOPED_TRACE(m);
    // batch [2, m, k]
    const auto x = lcg(2 * m * k, 5u + static_cast<std::uint32_t>(m), 1.0f);
    std::vector<double> y, mag;
    host_product(x, w.deq, 2 * m, k, n, y, mag);
    const auto out = qz::q_matmul(fl<3>(x, Shape{2, m, k}), w.q);
    EXPECT_EQ(out.shape(), (Shape{2, m, n}));
    EXPECT_TRUE(close_product(fv(out), y, mag, product_rel()));
    // transposed: x stored [k, m], read as [m, k]
    std::vector<float> xt(m * k);
    for (std::size_t i = 0; i < m; ++i)
      for (std::size_t j = 0; j < k; ++j) xt[j * m + i] = x[i * k + j];
    host_product(x, w.deq, m, k, n, y, mag);
    EXPECT_TRUE(close_product(fv(qz::q_matmul(fl<2>(xt, Shape{k, m}).transpose(), w.q)), y, mag, product_rel()));
    // sliced: x inside a [m + 1, k + 3] tensor at row 1, column 2
    std::vector<float> xb((m + 1) * (k + 3), 1e6f);
    for (std::size_t i = 0; i < m; ++i)
      for (std::size_t j = 0; j < k; ++j) xb[(i + 1) * (k + 3) + j + 2] = x[i * k + j];
    const auto xs = fl<2>(xb, Shape{m + 1, k + 3}).slice({Slice::range(1, static_cast<std::int64_t>(m) + 1),
                                                         Slice::range(2, static_cast<std::int64_t>(k) + 2)});
    EXPECT_TRUE(close_product(fv(qz::q_matmul(xs, w.q)), y, mag, product_rel()));
  }
  // zero rows, and f16 x (the weight rounded to f16 as the default's dequantize does)
  EXPECT_EQ(qz::q_matmul(fl<2>({}, Shape{0, k}), w.q).shape(), (Shape{0, n}));
  const auto x = lcg(3 * k, 21u, 1.0f);
  const auto xh = fl<2>(x, Shape{3, k}).cast(DType::F16);
  const auto out = qz::q_matmul(xh, w.q);
  EXPECT_EQ(out.dtype(), DType::F16);
  std::vector<float> wh(w.deq.size());
  const auto whd = fl<1>(w.deq, Shape{w.deq.size()}).cast(DType::F16);
  wh = fv(whd);
  std::vector<double> y, mag;
  host_product(fv(xh), wh, 3, k, n, y, mag);
  // f16 output: within half an f16 ulp of the f32 sum, plus the sum's rounding
  const auto got = fv(out);
  for (std::size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], y[i], std::fabs(y[i]) * 1e-3 + mag[i] * product_rel()) << i;
}

}  // namespace
