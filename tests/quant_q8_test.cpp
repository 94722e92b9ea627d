// The fused q8 GEMV (issue 32): q_matmul of x f32 [M, K] with an 8-bit weight [K, N] (Q8S or
// Q8F codes), one scale per output column or one for the tensor. On the cpu with
// AVX512-VNNI (backends/cpu/quant_q8.hpp) M <= q8_max_rows() (16, or 3 where oneDNN runs
// AMX-INT8) takes the fused dpbusd kernel, larger M oneDNN's int8 matmul; both quantize x's rows the same way (one scale per row,
// a = max |x| / 127, codes rounded to the nearest, ties to even), so both are checked
// against one double loop written here: the integer sums of the codes (exact) times the
// weight's scale and a. Other devices (the dequantize route) against the float product.
#include "quant_test_util.hpp"

#include <cstdlib>
#include <fstream>
#include <string>

#include "backends/cpu/cpu_info.hpp"
#include "backends/cpu/quant.hpp"
#include "backends/cpu/quant_q8.hpp"

using namespace quant_test;

namespace {

// Per element: `q8` the int8 route's value in double (f64(isum) * scale * a), `exact` the
// product of x itself with the dequantized weight, `mag` the sum of |x * w|.
struct Ref {
  std::vector<double> q8, exact, mag;
};

Ref reference(const std::vector<float>& x, std::size_t m, std::size_t k, std::size_t n, const qz::QuantizedValues& w) {
  Ref r;
  r.q8.assign(m * n, 0.0);
  r.exact.assign(m * n, 0.0);
  r.mag.assign(m * n, 0.0);
  std::vector<std::int64_t> a(k);
  for (std::size_t i = 0; i < m; ++i) {
    float amax = 0.0f;
    for (std::size_t t = 0; t < k; ++t) amax = std::max(amax, std::fabs(x[i * k + t]));
    const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
    const float sa = amax / 127.0f;
    for (std::size_t t = 0; t < k; ++t)
      a[t] = static_cast<std::int64_t>(std::nearbyint(std::clamp(x[i * k + t] * inv, -127.0f, 127.0f)));
    for (std::size_t j = 0; j < n; ++j) {
      const double ws = static_cast<double>(w.scales.size() == 1 ? w.scales[0] : w.scales[j]);
      std::int64_t isum = 0;
      for (std::size_t t = 0; t < k; ++t) {
        const std::int64_t c = w.codes[t * n + j];
        isum += a[t] * c;
        const double xw = static_cast<double>(x[i * k + t]) * static_cast<double>(c) * ws;
        r.exact[i * n + j] += xw;
        r.mag[i * n + j] += std::fabs(xw);
      }
      r.q8[i * n + j] = static_cast<double>(isum) * ws * static_cast<double>(sa);
    }
  }
  return r;
}

bool on_cpu() { return dev() == Device::cpu(); }
// Whether m rows take an int8 route here (the fused kernel or oneDNN's): the cpu with oneDNN
// or the VNNI kernel; elsewhere the dequantize route.
bool int8_route(std::size_t m) {
  return on_cpu() && (tensor::cpu::int8_products_live() || tensor::cpu::qdetail::q8_route_for(static_cast<std::int64_t>(m)));
}
bool fused(std::size_t m) { return on_cpu() && tensor::cpu::qdetail::q8_route_for(static_cast<std::int64_t>(m)); }

// The int8 routes: the integer sums are exact, then three f32 roundings (f32(isum), times the
// weight's scale, times a), each within 2^-24 relative: |got - q8| <= 4 * 2^-24 * |q8| (plus
// 1e-30 for values in the subnormal range). Dropping the compensation moves a value by
// 128 * colsum * scale * a, dropping a k by |a c| * scale * a: far more. The float route:
// x itself, within 3e-5 of the magnitude.
::testing::AssertionResult within(const std::vector<float>& got, const Ref& r, bool int8) {
  if (got.size() != r.q8.size()) return ::testing::AssertionFailure() << "size " << got.size() << " != " << r.q8.size();
  for (std::size_t e = 0; e < got.size(); ++e) {
    const double want = int8 ? r.q8[e] : r.exact[e];
    const double bound = int8 ? 4.0 * std::ldexp(1.0, -24) * std::fabs(want) + 1e-30 : 3e-5 * r.mag[e] + 1e-6;
    if (!(std::fabs(static_cast<double>(got[e]) - want) <= bound))
      return ::testing::AssertionFailure() << "at " << e << ": " << got[e] << " != " << want << " (bound " << bound << ")";
  }
  return ::testing::AssertionSuccess();
}

QuantScheme per_column(std::size_t k) { return q8s().with_level(QuantLevel::block({static_cast<std::uint32_t>(k), 1})); }

void expect_route(std::size_t m) {
  if (!on_cpu()) return;
  const std::string name = tensor::cpu::last_q_matmul_route();
  if (fused(m)) {
    EXPECT_TRUE(name.starts_with("q8 fused avx512-vnni")) << name;
  } else {
    EXPECT_FALSE(name.starts_with("q8 fused")) << name;
  }
}

void expect_not_fused() {
  if (on_cpu()) {
    EXPECT_FALSE(tensor::cpu::last_q_matmul_route().starts_with("q8 fused")) << tensor::cpu::last_q_matmul_route();
  }
}

// The fused kernel's row limit raised to kQ8MaxRows while it lives, so that its row tiles
// (up to 16 rows) are checked on a CPU with AMX too, where the route stops at 3 rows.
struct AllKernelRows {
  AllKernelRows() { tensor::cpu::qdetail::q8_set_max_rows(tensor::cpu::qdetail::kQ8MaxRows); }
  ~AllKernelRows() { tensor::cpu::qdetail::q8_set_max_rows(0); }
  AllKernelRows(const AllKernelRows&) = delete;
  AllKernelRows& operator=(const AllKernelRows&) = delete;
};

// Whether /proc/cpuinfo lists `flag` for the first CPU (read here, not through the library).
bool cpuinfo_has(const std::string& flag) {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.starts_with("flags")) return (line + " ").find(" " + flag + " ") != std::string::npos;
  return false;
}

}  // namespace

TEST_P(Quant, Q8GemvRowLimitFollowsTheCpu) {
  // Up to 3 rows the fused kernel wherever it runs; 4 to 16 rows only where oneDNN's int8
  // matmul does not run on AMX-INT8 tiles (which beat it from 4 rows). AMX is live when the
  // CPU lists amx_int8 and ONEDNN_MAX_CPU_ISA does not lower oneDNN below it.
  if (!on_cpu() || !fused(1)) GTEST_SKIP() << "needs the fused kernel (x86-64 with AVX512-VNNI)";
  const char* cap = std::getenv("ONEDNN_MAX_CPU_ISA");
  if (cap == nullptr || std::string(cap) == "ALL") {
    EXPECT_EQ(tensor::cpu::qdetail::int8_amx_live(), tensor::cpu::int8_products_live() && cpuinfo_has("amx_int8"));
  }
  const bool amx = tensor::cpu::qdetail::int8_amx_live();
  constexpr std::size_t K = 256, N = 64;
  const auto wq = quantize_dynamic(fl<2>(lcg(K * N, 21u, 0.5f), Shape{K, N}), per_column(K));
  for (const std::size_t m : {std::size_t{1}, std::size_t{3}, std::size_t{4}, std::size_t{16}, std::size_t{17}}) {
    SCOPED_TRACE(::testing::Message() << m << " rows" << (amx ? ", AMX" : ""));
    const auto x = lcg(m * K, static_cast<std::uint32_t>(m), 1.0f);
    EXPECT_TRUE(within(fv(qz::q_matmul(fl<2>(x, Shape{m, K}), wq)), reference(x, m, K, N, values_of(wq)), int8_route(m)));
    const bool want_fused = m <= 3 || (m <= 16 && !amx);
    EXPECT_EQ(tensor::cpu::last_q_matmul_route().starts_with("q8 fused"), want_fused) << tensor::cpu::last_q_matmul_route();
  }
  {
    const AllKernelRows raised;
    const auto x = lcg(16 * K, 16u, 1.0f);
    (void)qz::q_matmul(fl<2>(x, Shape{16, K}), wq);
    EXPECT_TRUE(tensor::cpu::last_q_matmul_route().starts_with("q8 fused")) << tensor::cpu::last_q_matmul_route();
  }
  EXPECT_EQ(tensor::cpu::qdetail::q8_max_rows(), amx ? tensor::cpu::qdetail::kQ8MaxRowsAmx : tensor::cpu::qdetail::kQ8MaxRows);
}

TEST_P(Quant, Int8ProductRowBlocksAgainstALoop) {
  // oneDNN's route runs whole rows in blocks of about 256 KiB of output (64 rows of 1,024
  // columns), each block's row scales applied after it: 300 rows (on 2 threads chunks of 75:
  // a block of 64 and one of 11; on one thread four blocks of 64 and one of 44) and 1,000
  // rows, per column and per tensor, against the double loop.
  constexpr std::size_t K = 40, N = 1024;
  for (const bool tensor_scale : {false, true}) {
    const auto wq = quantize_dynamic(fl<2>(lcg(K * N, 31u, 0.5f), Shape{K, N}), tensor_scale ? q8s() : per_column(K));
    for (const std::size_t m : {std::size_t{300}, std::size_t{1000}}) {
      SCOPED_TRACE(::testing::Message() << m << " rows" << (tensor_scale ? ", per tensor" : ", per column"));
      const auto x = lcg(m * K, static_cast<std::uint32_t>(m + 5), 1.5f);
      const auto got = fv(qz::q_matmul(fl<2>(x, Shape{m, K}), wq));
      if (on_cpu() && tensor::cpu::int8_products_live()) {
        EXPECT_TRUE(tensor::cpu::last_q_matmul_route().starts_with("onednn")) << tensor::cpu::last_q_matmul_route();
      }
      EXPECT_TRUE(within(got, reference(x, m, K, N, values_of(wq)), int8_route(m)));
    }
  }
}

TEST_P(Quant, Q8GemvShapesAgainstALoop) {
  // M = 1 (four panels at a time, then one), 2, 3 (two panels at a time), 7 (row tiles of 4
  // and 3), 16 (the fused kernel's limit: tiles of 6, 5 and 5), 17 (oneDNN); K = 4 (one
  // quad), 99 and 101 (not a multiple of 4: the padded last quad), 4096; N = 1, 17 (a
  // partial vector), 3500 (55 panels of 64, the last partial) for the short K's and 300 for
  // K = 4096 (1.2 M codes: past the 1 MiB where the panels split over the threads; 4096 x 3500
  // made this test 7 s of double loops per device, minutes under ASan); per-column and
  // per-tensor scales.
  const AllKernelRows raised;
  const std::size_t limit = static_cast<std::size_t>(tensor::cpu::qdetail::kQ8MaxRows);
  for (const std::size_t k : {4u, 99u, 101u, 4096u})
    for (const std::size_t n : {std::size_t{1}, std::size_t{17}, k == 4096 ? std::size_t{300} : std::size_t{3500}})
      for (const bool tensor_scale : {false, true}) {
        if (tensor_scale && k != 99 && k != 4096) continue;
        const auto w = lcg(k * n, static_cast<std::uint32_t>(k * 13 + n), 0.5f);
        const QuantScheme s = tensor_scale ? q8s() : per_column(k);
        const auto wq = quantize_dynamic(fl<2>(w, Shape{k, n}), s);
        const auto vals = values_of(wq);
        ASSERT_EQ(vals.scales.size(), tensor_scale ? 1u : n);
        for (const std::size_t m : {std::size_t{1}, std::size_t{2}, std::size_t{3}, std::size_t{7}, limit, limit + 1}) {
          SCOPED_TRACE(::testing::Message() << m << " x " << k << " x " << n << (tensor_scale ? ", per tensor" : ", per column"));
          const auto x = lcg(m * k, static_cast<std::uint32_t>(m * 7 + k), 2.0f);
          const Ref r = reference(x, m, k, n, vals);
          const auto y = qz::q_matmul(fl<2>(x, Shape{m, k}), wq);
          EXPECT_EQ(y.shape(), (Shape{m, n}));
          const auto got = fv(y);
          expect_route(m);
          if (on_cpu() && fused(m) && k * n >= (std::size_t{1} << 20) && tensor::cpu::omp_threads() > 1) {
            // the weight's panels split over the library's threads
            EXPECT_TRUE(tensor::cpu::last_q_matmul_route().ends_with("threads)")) << tensor::cpu::last_q_matmul_route();
          }
          EXPECT_TRUE(within(got, r, int8_route(m)));
        }
      }
}

TEST_P(Quant, Q8GemvMatchesTheOneDnnRouteBitForBit) {
  // The same rows through both int8 routes: 17 rows on oneDNN's, then each row alone (and
  // rows 0..15) on the fused kernel: the same floats, bit for bit.
  if (!on_cpu() || !tensor::cpu::int8_products_live() || !fused(1)) GTEST_SKIP() << "needs oneDNN and the fused kernel";
  const AllKernelRows raised;
  constexpr std::size_t M = 17, K = 1001, N = 300;
  const auto w = lcg(K * N, 41u, 0.7f);
  const auto wq = quantize_dynamic(fl<2>(w, Shape{K, N}), per_column(K));
  const auto x = lcg(M * K, 42u, 3.0f);
  const auto all = fv(qz::q_matmul(fl<2>(x, Shape{M, K}), wq));
  ASSERT_TRUE(tensor::cpu::last_q_matmul_route().starts_with("onednn")) << tensor::cpu::last_q_matmul_route();
  const auto first16 = fv(qz::q_matmul(fl<2>(std::vector<float>(x.begin(), x.begin() + 16 * K), Shape{16, K}), wq));
  expect_route(16);
  for (std::size_t e = 0; e < 16 * N; ++e) ASSERT_EQ(first16[e], all[e]) << "rows 0..15 at " << e;
  for (std::size_t i = 0; i < M; i += 4) {
    const auto row = fv(qz::q_matmul(fl<2>(std::vector<float>(x.begin() + i * K, x.begin() + (i + 1) * K), Shape{1, K}), wq));
    expect_route(1);
    for (std::size_t j = 0; j < N; ++j) ASSERT_EQ(row[j], all[i * N + j]) << "row " << i << ", column " << j;
  }
}

TEST_P(Quant, Q8GemvExtremeCodesAndZeroRows) {
  // Codes at the ends of the range (Q8F: -128 and 127; Q8S: -127 and 127) in every column of
  // a K = 4096 weight, x with a row of zeros (y = 0 exactly), a row of +-max (every
  // activation code +-127), a row with one value (one code): the integer sums reach
  // 4096 * 127 * 128 = 2^26: exact in i32, rounded once to f32.
  constexpr std::size_t K = 4096, N = 33, M = 4;
  for (const QuantValue v : {QuantValue::Q8F, QuantValue::Q8S}) {
    SCOPED_TRACE(v == QuantValue::Q8F ? "q8f" : "q8s");
    const int lo = v == QuantValue::Q8F ? -128 : -127;
    std::vector<std::int8_t> codes(K * N);
    for (std::size_t t = 0; t < K; ++t)
      for (std::size_t j = 0; j < N; ++j) {
        // column 0 all lo, column 1 all 127, the others alternating by k and column
        const int c = j == 0 ? lo : j == 1 ? 127 : ((t + j) % 3 == 0 ? lo : (t + j) % 3 == 1 ? 127 : static_cast<int>(t % 255) - 127);
        codes[t * N + j] = static_cast<std::int8_t>(c);
      }
    std::vector<float> scales(N);
    for (std::size_t j = 0; j < N; ++j) scales[j] = 0.001f * static_cast<float>(j + 1);
    const QuantScheme s = QuantScheme{}.with_value(v).with_store(QuantStore::Native).with_level(QuantLevel::block({K, 1}));
    const auto wq = Tensor<2>::from_data(qz::quantized_data(codes, Shape{K, N}, s, scales), dev());
    const auto vals = values_of(wq);
    ASSERT_EQ(vals.codes, codes);
    std::vector<float> x(M * K, 0.0f);  // row 0: zeros
    for (std::size_t t = 0; t < K; ++t) {
      x[K + t] = t % 2 == 0 ? 5.0f : -5.0f;  // row 1: codes +-127
      x[3 * K + t] = 0.5f + static_cast<float>(t % 7);
    }
    x[2 * K + 77] = -3.0f;  // row 2: one code, -127
    const Ref r = reference(x, M, K, N, vals);
    for (const std::size_t m : {std::size_t{1}, std::size_t{2}, M}) {
      SCOPED_TRACE(::testing::Message() << m << " rows");
      const auto got = fv(qz::q_matmul(fl<2>(std::vector<float>(x.begin(), x.begin() + m * K), Shape{m, K}), wq));
      expect_route(m);
      const Ref rm = reference(std::vector<float>(x.begin(), x.begin() + m * K), m, K, N, vals);
      EXPECT_TRUE(within(got, rm, int8_route(m)));
      for (std::size_t j = 0; j < N; ++j) EXPECT_EQ(got[j], 0.0f) << j;  // the zero row
    }
    if (int8_route(M)) {  // hand values: row 2 column 0 = (-127 * lo) * 0.001 * (3 / 127)
      const auto got = fv(qz::q_matmul(fl<2>(x, Shape{M, K}), wq));
      EXPECT_NEAR(got[2 * N], static_cast<double>(-127 * lo) * 0.001 * (3.0 / 127.0), 1e-5);
      EXPECT_NEAR(got[2 * N + 1], static_cast<double>(-127 * 127) * 0.002 * (3.0 / 127.0), 1e-5);
    }
  }
}

TEST_P(Quant, Q8GemvCacheFollowsTheWeight) {
  // The dpbusd pack is kept with the weight: a second weight of the same shape, and the
  // handle rebound to a new quantized weight, give their own products, never a stale pack.
  constexpr std::size_t M = 1, K = 103, N = 70;
  const auto x = lcg(M * K, 3u, 1.0f);
  const auto xt = fl<2>(x, Shape{M, K});
  const auto w1 = lcg(K * N, 11u, 0.5f), w2 = lcg(K * N, 12u, 0.5f);
  auto a = quantize_dynamic(fl<2>(w1, Shape{K, N}), per_column(K));
  const auto b = quantize_dynamic(fl<2>(w2, Shape{K, N}), per_column(K));
  const Ref r1 = reference(x, M, K, N, values_of(a)), r2 = reference(x, M, K, N, values_of(b));
  const bool int8 = int8_route(M);
  EXPECT_TRUE(within(fv(qz::q_matmul(xt, a)), r1, int8));
  expect_route(M);
  EXPECT_TRUE(within(fv(qz::q_matmul(xt, b)), r2, int8));
  EXPECT_TRUE(within(fv(qz::q_matmul(xt, a)), r1, int8));
  expect_error<DTypeError>([&] { a.copy_from(b); }, "copy_from");  // no write into a quantized tensor
  EXPECT_TRUE(within(fv(qz::q_matmul(xt, a)), r1, int8));
  a = quantize_dynamic(fl<2>(w2, Shape{K, N}), per_column(K));
  EXPECT_TRUE(within(fv(qz::q_matmul(xt, a)), r2, int8));
  a = quantize_dynamic(fl<2>(w1, Shape{K, N}), q8s());  // per tensor now
  EXPECT_TRUE(within(fv(qz::q_matmul(xt, a)), reference(x, M, K, N, values_of(a)), int8));
}

TEST_P(Quant, Q8GemvOtherRoutes) {
  // What the fused kernel leaves to the other routes: a row with a NaN or an inf (no int8
  // code: the dequantize route's NaN / inf), an f64 x (the dequantize route in f64), scales
  // per block of 32 along K (not per column: dequantize), and 1-D x through nn::linear.
  constexpr std::size_t K = 64, N = 20;
  const auto w = lcg(K * N, 5u, 0.5f);
  const auto wq = quantize_dynamic(fl<2>(w, Shape{K, N}), per_column(K));
  const auto x = lcg(K, 6u, 1.0f);
  const Ref r = reference(x, 1, K, N, values_of(wq));
  const auto y = fv(nn::linear(fl<1>(x, Shape{K}), wq));
  expect_route(1);
  EXPECT_TRUE(within(y, r, int8_route(1)));
  auto bad = x;
  bad[40] = std::numeric_limits<float>::quiet_NaN();
  for (const float v : fv(qz::q_matmul(fl<2>(bad, Shape{1, K}), wq))) EXPECT_TRUE(std::isnan(v));
  if (on_cpu()) {
    EXPECT_EQ(tensor::cpu::last_q_matmul_route().rfind("dequantize + f32 matmul", 0), 0u) << tensor::cpu::last_q_matmul_route();
  }
  bad[40] = std::numeric_limits<float>::infinity();
  for (const float v : fv(qz::q_matmul(fl<2>(bad, Shape{1, K}), wq))) EXPECT_FALSE(std::isfinite(v));
  const auto x64 = Tensor<2>::from_data(TensorData::from<double>(std::vector<double>(x.begin(), x.end()), Shape{1, K}), dev());
  const auto y64 = qz::q_matmul(x64, wq);
  EXPECT_EQ(y64.dtype(), DType::F64);
  expect_not_fused();
  EXPECT_TRUE(within(fv(y64), r, false));
  const auto blocks = quantize_dynamic(fl<2>(w, Shape{K, N}), q8s().with_level(QuantLevel::block({32, 1})));
  (void)qz::q_matmul(fl<2>(x, Shape{1, K}), blocks);
  expect_not_fused();
}

TEST_P(Quant, Q8GemvLongKLeavesTheKernel) {
  // K past kQ8MaxK (the i32 sums' bound): not the fused route; the product still right.
  const std::size_t k = static_cast<std::size_t>(tensor::cpu::qdetail::kQ8MaxK) + 1, n = 2;
  const auto w = lcg(k * n, 77u, 0.5f);
  const auto wq = quantize_dynamic(fl<2>(w, Shape{k, n}), per_column(k));
  const auto x = lcg(k, 78u, 1.0f);
  const auto got = fv(qz::q_matmul(fl<2>(x, Shape{1, k}), wq));
  expect_not_fused();
  const Ref r = reference(x, 1, k, n, values_of(wq));
  EXPECT_TRUE(within(got, r, on_cpu() && tensor::cpu::int8_products_live()));
}
