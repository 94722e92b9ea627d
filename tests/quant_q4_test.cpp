// The q4 weight-only GEMV (issue 32): q_matmul of x f32 [M, K] with a 4-bit weight [K, N],
// one scale per 32 codes along K of each column (block [32, 1], tensorctl eval --quantize
// q4s's layout). On the cpu (backends/cpu/quant_q4.hpp) the fused kernel takes every M
// with AVX512-VNNI and M <= 16 with the portable kernel: each 32-block of a row of x
// quantized to s8 with its own scale, int8 dot products with the nibble codes, f32
// accumulation. Above that M, elsewhere, and for rows with NaN / inf, the panel route:
// K-panels of the weight dequantized into a per-thread f32 buffer, the f32 GEMM panel by
// panel. Every device is checked; the reference is a double loop written here.
#include "quant_test_util.hpp"

#include "backends/cpu/quant.hpp"
#include "backends/cpu/quant_q4.hpp"

using namespace quant_test;

namespace {

constexpr std::size_t kBlk = 32;


QuantScheme q4s(ScaleDtype dt) {
  return QuantScheme{}.with_value(QuantValue::Q4S).with_store(QuantStore::PackedU32).per_block(BlockSize({32, 1}), dt);
}

// The activation written out: per row and 32-block, amax = max |x|, inv = 127 / amax (f32),
// code = clamp(x * inv, -127, 127) rounded to the nearest integer, ties to even (the
// default rounding mode of nearbyint), scale = amax / 127 (f32).
struct Ref {
  std::vector<double> fused;  // sum over blocks of scale_x * sum_k code_x * w (w = code * scale, in double)
  std::vector<double> mag;    // the same sum of absolute values
  std::vector<double> exact;  // the product with x itself (the dequantize route)
  std::vector<double> act;    // sum_k |x - scale_x * code_x| * |w|: what the activation rounding may move
};

Ref reference(const std::vector<float>& x, std::size_t m, std::size_t k, std::size_t n, const qz::QuantizedValues& w) {
  const std::size_t nb = k / kBlk;
  Ref r;
  r.fused.assign(m * n, 0.0);
  r.mag.assign(m * n, 0.0);
  r.exact.assign(m * n, 0.0);
  r.act.assign(m * n, 0.0);
  std::vector<double> xa(k);  // x's int8 rounding, scale_x * code_x
  for (std::size_t i = 0; i < m; ++i) {
    for (std::size_t b = 0; b < nb; ++b) {
      float amax = 0.0f;
      for (std::size_t t = 0; t < kBlk; ++t) amax = std::max(amax, std::fabs(x[i * k + b * kBlk + t]));
      const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
      const float sx = amax / 127.0f;
      for (std::size_t t = 0; t < kBlk; ++t) {
        const float v = std::clamp(x[i * k + b * kBlk + t] * inv, -127.0f, 127.0f);
        xa[b * kBlk + t] = static_cast<double>(sx) * static_cast<double>(std::nearbyint(v));
      }
    }
    for (std::size_t j = 0; j < n; ++j)
      for (std::size_t kk = 0; kk < k; ++kk) {
        const double wv = static_cast<double>(w.codes[kk * n + j]) * static_cast<double>(w.scales[(kk / kBlk) * n + j]);
        const double xv = static_cast<double>(x[i * k + kk]);
        r.fused[i * n + j] += xa[kk] * wv;
        r.mag[i * n + j] += std::fabs(xa[kk] * wv);
        r.exact[i * n + j] += xv * wv;
        r.act[i * n + j] += std::fabs(xv - xa[kk]) * std::fabs(wv);
      }
  }
  return r;
}

// How a route treats x: the fused kernel (x's 32-blocks in int8) or the float product
// (the panel route, the dequantize route of other devices).
enum class Route { Fused, Float };

// The fused kernel's error against r.fused: its integer sums are exact; per block it rounds
// the scale product, the term and the running sum in f32 (each within 2^-24 relative), so
// |got - fused| <= (nb + 3) * 2^-24 * mag (mag bounds every partial sum). Dropping a block,
// a scale or a column moves a value by far more. The float routes (the cpu's panels, the
// dequantize route of other devices) use x itself: r.exact within f32 rounding.
::testing::AssertionResult within(const std::vector<float>& got, const Ref& r, std::size_t k, Route route) {
  const bool fused = route == Route::Fused;
  if (got.size() != r.fused.size()) return ::testing::AssertionFailure() << "size " << got.size() << " != " << r.fused.size();
  const double nb = static_cast<double>(k / kBlk);
  for (std::size_t e = 0; e < got.size(); ++e) {
    const double want = fused ? r.fused[e] : r.exact[e];
    const double bound = fused ? (nb + 3.0) * std::ldexp(1.0, -24) * r.mag[e]
                               : 3e-5 * (r.mag[e] + r.act[e]) + 1e-6;
    if (!(std::fabs(static_cast<double>(got[e]) - want) <= bound))
      return ::testing::AssertionFailure() << "at " << e << ": " << got[e] << " != " << want << " (bound " << bound << ")";
  }
  return ::testing::AssertionSuccess();
}

bool on_cpu() { return dev() == Device::cpu(); }
bool fused_kernel() { return on_cpu() && std::string(tensor::cpu::qdetail::q4_kernel()) != ""; }
// The route M <= 16 rows take on this device.
Route small_m() { return fused_kernel() ? Route::Fused : Route::Float; }

// The route m rows take on this device: the fused kernel's int8 rounding or f32 products.
Route route_for(std::size_t m, std::size_t n) {
  if (!on_cpu()) return Route::Float;
  const auto route = std::string(tensor::cpu::qdetail::q4_route_for(static_cast<std::int64_t>(m), static_cast<std::int64_t>(n)));
  return route == "fused" ? Route::Fused : Route::Float;
}
// The name last_q_matmul_route() starts with for that route.
const char* route_name(Route r) { return r == Route::Fused ? "q4 fused" : "q4 panels"; }

// Restores the CPU's kernel choice when a test leaves.
struct PortableScope {
  explicit PortableScope(bool on) { tensor::cpu::qdetail::q4_force_portable(on); }
  ~PortableScope() { tensor::cpu::qdetail::q4_force_portable(false); }
};

}  // namespace

TEST_P(Quant, Q4GemvShapesAgainstALoop) {
  // M = 1, 3, 16 and 17 (fused or panels: route_for); K = 32, 64, 4128 (1, 2
  // and 129 blocks); N = 1, 17 (a group of 16 and one column), 3500 (218 groups and 12).
  struct Case { std::size_t k, n; };
  for (const Case c : {Case{32, 1}, Case{64, 17}, Case{4128, 17}, Case{64, 3500}, Case{4128, 3500}, Case{32, 3500}, Case{4128, 1}}) {
    const auto w = lcg(c.k * c.n, static_cast<std::uint32_t>(c.k * 31 + c.n), 0.5f);
    const auto wq = quantize_dynamic(fl<2>(w, Shape{c.k, c.n}), q4s(ScaleDtype::F16));
    const auto vals = values_of(wq);
    for (const std::size_t m : {1u, 3u, 16u, 17u}) {
      if (c.k * c.n > 1'000'000 && m == 3) continue;  // the large weight: 1, 16, 17 rows
      SCOPED_TRACE(::testing::Message() << m << " x " << c.k << " x " << c.n);
      const auto x = lcg(m * c.k, static_cast<std::uint32_t>(m + c.k), 2.0f);
      const Ref r = reference(x, m, c.k, c.n, vals);
      const auto y = qz::q_matmul(fl<2>(x, Shape{m, c.k}), wq);
      EXPECT_EQ(y.shape(), (Shape{m, c.n}));
      const auto got = fv(y);  // (the route is known once the product has run)
      const Route route = route_for(m, c.n);
      if (on_cpu()) {
        const std::string name = tensor::cpu::last_q_matmul_route();
        EXPECT_TRUE(name.starts_with(route_name(route))) << name;
      }
      EXPECT_TRUE(within(got, r, c.k, route));
    }
  }
}

TEST_P(Quant, Q4GemvScaleDtypesAndThePortableKernel) {
  // Scales in f16, bf16 and f32 (the pack keeps f16 where every scale is one exactly, else
  // f32); the portable kernel gives the vector kernel's floats bit for bit, for M = 1 (the
  // GEMV body: 4 groups of 16 columns at a time, then single groups; N = 150 is 10 groups)
  // and M = 3 (the rows body).
  constexpr std::size_t K = 4128, N = 150;
  const auto w = lcg(K * N, 7u, 0.3f);
  for (const std::size_t M : {1u, 3u})
    for (const ScaleDtype dt : {ScaleDtype::F16, ScaleDtype::BF16, ScaleDtype::F32}) {
      SCOPED_TRACE(::testing::Message() << M << " rows, scale dtype " << static_cast<int>(dt));
      const auto x = lcg(M * K, 9u, 1.0f);
      const auto wq = quantize_dynamic(fl<2>(w, Shape{K, N}), q4s(dt));
      const Ref r = reference(x, M, K, N, values_of(wq));
      const auto got = fv(qz::q_matmul(fl<2>(x, Shape{M, K}), wq));
      EXPECT_TRUE(within(got, r, K, small_m()));
      if (!fused_kernel()) continue;
      const std::string route = tensor::cpu::last_q_matmul_route();
      if (route.find("avx512") != std::string::npos) {
        const char* want = dt == ScaleDtype::F32 ? "(f32 scales)" : "(f16 scales)";  // bf16 values: f16 too
        EXPECT_TRUE(route.ends_with(want)) << route;
      }
      const PortableScope portable(true);
      const auto again = fv(qz::q_matmul(fl<2>(x, Shape{M, K}), wq));
      EXPECT_EQ(tensor::cpu::last_q_matmul_route(), "q4 fused portable");
      for (std::size_t i = 0; i < got.size(); ++i)
        if (again[i] != got[i]) {
          ADD_FAILURE() << "portable differs at " << i << ": " << again[i] << " vs " << got[i];
          break;
        }
      EXPECT_TRUE(within(again, r, K, Route::Fused));
    }
}

TEST_P(Quant, Q4GemvCacheFollowsTheWeight) {
  // The nibble pack is kept with the weight: a second weight of the same shape, and the
  // first overwritten by copy_from, give their own products, never the stale pack's.
  constexpr std::size_t M = 1, K = 96, N = 40;
  const auto x = lcg(M * K, 3u, 1.0f);
  const auto xt = fl<2>(x, Shape{M, K});
  const auto w1 = lcg(K * N, 11u, 0.5f), w2 = lcg(K * N, 12u, 0.5f);
  auto a = quantize_dynamic(fl<2>(w1, Shape{K, N}), q4s(ScaleDtype::F16));
  const auto b = quantize_dynamic(fl<2>(w2, Shape{K, N}), q4s(ScaleDtype::F16));
  const Ref r1 = reference(x, M, K, N, values_of(a)), r2 = reference(x, M, K, N, values_of(b));
  const Route fused = small_m();
  EXPECT_TRUE(within(fv(qz::q_matmul(xt, a)), r1, K, fused));
  EXPECT_TRUE(within(fv(qz::q_matmul(xt, b)), r2, K, fused));
  EXPECT_TRUE(within(fv(qz::q_matmul(xt, a)), r1, K, fused));  // a's own pack again
  // copy_from into a quantized tensor: refused with a typed error (no backend writes into
  // one: the codes, the scales and the pack stay together), a unchanged.
  expect_error<DTypeError>([&] { a.copy_from(b); }, "copy_from");
  EXPECT_EQ(values_of(a).codes, values_of(quantize_dynamic(fl<2>(w1, Shape{K, N}), q4s(ScaleDtype::F16))).codes);
  EXPECT_TRUE(within(fv(qz::q_matmul(xt, a)), r1, K, fused));
  // the handle rebound to a new quantized weight (what an optimizer step or load does)
  a = quantize_dynamic(fl<2>(w2, Shape{K, N}), q4s(ScaleDtype::F16));
  EXPECT_TRUE(within(fv(qz::q_matmul(xt, a)), r2, K, fused));
}

TEST_P(Quant, Q4GemvThroughLinearAndNonFiniteRows) {
  // nn::linear with a vector x [K] and a bias reaches the fused kernel (one q_matmul); a row
  // with a NaN or an inf has no int8 code: the panel route, NaN as the float product gives.
  constexpr std::size_t K = 64, N = 20;
  const auto w = lcg(K * N, 5u, 0.5f);
  const auto wq = quantize_dynamic(fl<2>(w, Shape{K, N}), q4s(ScaleDtype::F16));
  const auto x = lcg(K, 6u, 1.0f);
  const auto bias = lcg(N, 8u, 1.0f);
  const Ref r = reference(x, 1, K, N, values_of(wq));
  auto y = fv(nn::linear(fl<1>(x, Shape{K}), wq, fl<1>(bias, Shape{N})));
  ASSERT_EQ(y.size(), N);
  for (std::size_t j = 0; j < N; ++j) y[j] -= bias[j];
  // the bias add rounds once more: 2^-24 of |y + bias| on top of the kernel's bound
  Ref rb = r;
  for (std::size_t j = 0; j < N; ++j) rb.mag[j] += 2.0 * (std::fabs(r.fused[j]) + std::fabs(static_cast<double>(bias[j])));
  EXPECT_TRUE(within(y, rb, K, small_m()));
  if (fused_kernel()) {
    EXPECT_TRUE(tensor::cpu::last_q_matmul_route().starts_with("q4 fused"));
  }
  auto bad = x;
  bad[40] = std::numeric_limits<float>::quiet_NaN();
  const auto yn = fv(qz::q_matmul(fl<2>(bad, Shape{1, K}), wq));
  for (const float v : yn) EXPECT_TRUE(std::isnan(v));
  if (on_cpu()) {
    EXPECT_TRUE(tensor::cpu::last_q_matmul_route().starts_with("q4 panels"));
  }
  bad[40] = std::numeric_limits<float>::infinity();
  const auto yi = fv(qz::q_matmul(fl<2>(bad, Shape{1, K}), wq));
  for (std::size_t j = 0; j < N; ++j) EXPECT_FALSE(std::isfinite(yi[j])) << j;
  // blocks of 32 along N, not K: not a q_matmul weight (ShapeError naming q_matmul)
  const auto rows = quantize_dynamic(fl<2>(w, Shape{K, N}), q4s(ScaleDtype::F16).with_level(QuantLevel::block({1, 20})));
  expect_error<ShapeError>([&] { (void)qz::q_matmul(fl<2>(x, Shape{1, K}), rows); }, "q_matmul");
}

TEST_P(Quant, Q4GemmLargeMBothRoutes) {
  // M = 17, 33, 100, 513 (past the old fused limit of 16), K = 32, 64, 4128 (1, 2, 129
  // blocks: 4128 is 8 panels of 512 and a panel of 32), N = 1, 17, 300 (one panel of 256
  // columns and a partial one), against the double loop over the dequantized weight: the
  // CPU's route (fused where it has AVX512-VNNI and N >= 16), then on the cpu the portable kernel's
  // choice (the panel route for every M here). Tolerances: within()'s, i.e. the fused route
  // within (nb + 3) 2^-24 of the magnitude of the int8-rounded-activation product (its
  // integer sums are exact, only the per-block f32 epilogue rounds); the panels (f32
  // products and sums of x itself with code * scale, the dequantized value exactly) within
  // 3e-5 of the magnitude of the exact product.
  for (const std::size_t k : {32u, 64u, 4128u})
    for (const std::size_t n : {1u, 17u, 300u}) {
      const auto w = lcg(k * n, static_cast<std::uint32_t>(k + 7 * n), 0.5f);
      const auto wq = quantize_dynamic(fl<2>(w, Shape{k, n}), q4s(ScaleDtype::F16));
      const auto vals = values_of(wq);
      for (const std::size_t m : {17u, 33u, 100u, 513u}) {
        SCOPED_TRACE(::testing::Message() << m << " x " << k << " x " << n);
        const auto x = lcg(m * k, static_cast<std::uint32_t>(3 * m + k), 2.0f);
        const auto xt = fl<2>(x, Shape{m, k});
        const Ref r = reference(x, m, k, n, vals);
        const Route route = route_for(m, n);
        const auto got = fv(qz::q_matmul(xt, wq));
        ASSERT_EQ(got.size(), m * n);
        if (on_cpu()) {
          const std::string name = tensor::cpu::last_q_matmul_route();
          EXPECT_TRUE(name.starts_with(route_name(route))) << name;
        }
        EXPECT_TRUE(within(got, r, k, route));
        if (!fused_kernel()) continue;
        const PortableScope portable(true);
        const auto again = fv(qz::q_matmul(xt, wq));
        EXPECT_TRUE(tensor::cpu::last_q_matmul_route().starts_with("q4 panels")) << tensor::cpu::last_q_matmul_route();
        EXPECT_TRUE(within(again, r, k, Route::Float));
      }
    }
}

TEST_P(Quant, Q4GemmLargeMScaleDtypesAndNaN) {
  // f16, bf16 and f32 scales at M = 33, K = 4128, N = 40 on both routes; then a NaN and an
  // inf in x (rows 5 and 9 of 40): the product is what the dequantize route gives (the
  // weight dequantized, then the f32 matmul): NaN exactly where it gives NaN, non-finite
  // where it is, the other rows within the f32 bound.
  constexpr std::size_t M = 33, K = 4128, N = 40;
  const auto w = lcg(K * N, 21u, 0.3f);
  const auto x = lcg(M * K, 22u, 1.0f);
  for (const ScaleDtype dt : {ScaleDtype::F16, ScaleDtype::BF16, ScaleDtype::F32})
    for (const bool portable : {false, true}) {
      if (portable && !fused_kernel()) continue;
      SCOPED_TRACE(::testing::Message() << "scale dtype " << static_cast<int>(dt) << (portable ? ", portable" : ""));
      const PortableScope scope(portable);
      const auto wq = quantize_dynamic(fl<2>(w, Shape{K, N}), q4s(dt));
      const Ref r = reference(x, M, K, N, values_of(wq));
      EXPECT_TRUE(within(fv(qz::q_matmul(fl<2>(x, Shape{M, K}), wq)), r, K, route_for(M, N)));
    }
  constexpr std::size_t M2 = 40, K2 = 96;
  const auto w2 = lcg(K2 * N, 23u, 0.5f);
  const auto wq2 = quantize_dynamic(fl<2>(w2, Shape{K2, N}), q4s(ScaleDtype::F16));
  auto bad = lcg(M2 * K2, 24u, 1.0f);
  bad[5 * K2 + 40] = std::numeric_limits<float>::quiet_NaN();
  bad[9 * K2 + 3] = std::numeric_limits<float>::infinity();
  const auto want = fv(fl<2>(bad, Shape{M2, K2}).matmul(dequantize(wq2)));
  const Ref r = reference(bad, M2, K2, N, values_of(wq2));
  for (const bool portable : {false, true}) {
    if (portable && !fused_kernel()) continue;
    const PortableScope scope(portable);
    const auto got = fv(qz::q_matmul(fl<2>(bad, Shape{M2, K2}), wq2));
    ASSERT_EQ(got.size(), M2 * N);
    if (on_cpu()) {
      EXPECT_TRUE(tensor::cpu::last_q_matmul_route().starts_with("q4 panels")) << tensor::cpu::last_q_matmul_route();
    }
    for (std::size_t i = 0; i < M2; ++i)
      for (std::size_t j = 0; j < N; ++j) {
        const std::size_t e = i * N + j;
        EXPECT_EQ(std::isnan(got[e]), std::isnan(want[e])) << i << ", " << j << ": " << got[e] << " vs " << want[e];
        EXPECT_EQ(std::isfinite(got[e]), std::isfinite(want[e])) << i << ", " << j;
        if (i == 5) {
          EXPECT_TRUE(std::isnan(got[e])) << j;
        }
        if (i != 5 && i != 9) {
          const double bound = 3e-5 * (r.mag[e] + r.act[e]) + 1e-6;
          EXPECT_LE(std::fabs(static_cast<double>(got[e]) - r.exact[e]), bound) << i << ", " << j;
        }
      }
  }
}
