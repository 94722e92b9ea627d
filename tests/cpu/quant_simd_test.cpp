// The activation quantizer of the int8 routes (backends/cpu/quant_hwy.cpp) on every compiled
// Highway target, against a scalar reference written here: amax = max |x| (and whether every
// value is finite), codes = nearest integer (ties to even) of clamp(x * inv, -127, 127).
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>
#include <hwy/targets.h>

#include "backends/cpu/cpu_info.hpp"
#include "backends/cpu/pool_hwy.hpp"
#include "backends/cpu/quant_hwy.hpp"
#include "cpu_test_util.hpp"

namespace tensor::cpu::test {
namespace {

std::int8_t ref_code(float x, float inv) {
  float v = x * inv;
  if (v < -127.0f) v = -127.0f;
  if (v > 127.0f) v = 127.0f;
  return static_cast<std::int8_t>(std::nearbyint(v));  // the default rounding mode: ties to even
}

// Values with exact ties at inv = 1 (k + 0.5), both clamps, signed zeros, tiny values and a
// pseudo-random sweep; `len` of them (vector bodies and tails).
std::vector<float> values(std::size_t len, std::uint32_t seed) {
  const float fixed[] = {0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.5f, 126.5f, -126.5f, 127.49f, 127.5f, 128.0f, -300.0f, 300.0f,
                         -0.0f, 0.0f, 1e-30f, -1e-30f, 63.5f, -64.5f, 3.4e38f};
  std::vector<float> v;
  for (std::size_t i = 0; i < len; ++i) {
    seed = seed * 1664525u + 1013904223u;
    v.push_back(i % 3 == 0 ? fixed[(i / 3) % std::size(fixed)]
                           : (static_cast<float>(seed >> 8) / static_cast<float>(1u << 24) * 2.0f - 1.0f) * 140.0f);
  }
  return v;
}

void check_quantizer(const std::string& target) {
  for (std::size_t len : {0u, 1u, 3u, 7u, 8u, 15u, 16u, 17u, 31u, 32u, 33u, 64u, 100u, 257u}) {
    const std::vector<float> x = values(len, static_cast<std::uint32_t>(len) * 7u + 1u);
    float want_max = 0.0f;
    for (float v : x) want_max = std::max(want_max, std::fabs(v));
    bool finite = false;
    ASSERT_EQ(simd::abs_max_f32(x.data(), x.size(), &finite), want_max) << target << " len " << len;
    ASSERT_TRUE(finite) << target << " len " << len;
    for (float inv : {1.0f, 127.0f / 140.0f, 0.0f, 127.0f / std::max(want_max, 1e-30f), 3.0f}) {
      std::vector<std::int8_t> got(len, 99);
      simd::quantize_s8(x.data(), x.size(), inv, got.data());
      for (std::size_t i = 0; i < len; ++i)
        ASSERT_EQ(got[i], ref_code(x[i], inv)) << target << " len " << len << " inv " << inv << " x " << x[i];
    }
    // x * s + b in place (a target may fuse the product into the sum: within an ulp of the
    // exact value)
    std::vector<float> z = x;
    simd::scale_add_f32(z.data(), z.size(), 0.37f, -1.25f);
    for (std::size_t i = 0; i < len; ++i) {
      const double want = static_cast<double>(x[i]) * 0.37f + -1.25;
      ASSERT_LE(std::fabs(z[i] - want), 1.2e-7 * std::max(1.0, std::fabs(want))) << target << " len " << len << " at " << i;
    }
    // a NaN or an inf anywhere (body or tail): not finite
    for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                      -std::numeric_limits<float>::infinity()}) {
      for (std::size_t at : {std::size_t{0}, len / 2, len - 1}) {
        if (len == 0) break;
        std::vector<float> y = x;
        y[at] = bad;
        bool ok = true;
        (void)simd::abs_max_f32(y.data(), y.size(), &ok);
        ASSERT_FALSE(ok) << target << " len " << len << " at " << at << " value " << bad;
      }
    }
  }
}

TEST(CpuQuantSimd, ActivationQuantizerMatchesTheScalarRuleOnEveryCompiledTarget) {
  const std::vector<std::int64_t> targets = compiled_targets();
  ASSERT_FALSE(targets.empty());
  for (const std::int64_t t : targets) {
    hwy::SetSupportedTargetsForTest(t);
    const std::string name = hwy::TargetName(t);
    ASSERT_EQ(std::string(current_target_name()), name);
    check_quantizer(name);
  }
  hwy::SetSupportedTargetsForTest(0);
}

// The header's scalar rule (quant.cpp's tails) is the same rule.
TEST(CpuQuantSimd, ScalarRuleIsTiesToEvenWithClamp) {
  for (float x : values(300, 5u))
    for (float inv : {1.0f, 0.9f, 0.0f}) ASSERT_EQ(simd::act_code_scalar(x, inv), ref_code(x, inv)) << x << " " << inv;
  EXPECT_EQ(simd::act_code_scalar(2.5f, 1.0f), 2);
  EXPECT_EQ(simd::act_code_scalar(-3.5f, 1.0f), -4);
  EXPECT_EQ(simd::act_code_scalar(500.0f, 1.0f), 127);
  EXPECT_EQ(simd::act_code_scalar(-500.0f, 1.0f), -127);
}

}  // namespace
}  // namespace tensor::cpu::test

// ---- the 2x2 stride-2 max pool's f32 row kernel (pool_hwy.cpp), on every target --------

namespace tensor::cpu::test {
namespace {

float ref_pool(const float* r0, const float* r1, std::size_t j) {
  const float v[4] = {r0[2 * j], r0[2 * j + 1], r1[2 * j], r1[2 * j + 1]};
  float best = v[0];
  for (int i = 1; i < 4; ++i)
    if (v[i] > best || (std::isnan(v[i]) && !std::isnan(best))) best = v[i];
  return best;
}

TEST(CpuPoolSimd, MaxPool2x2RowMatchesTheScalarRuleOnEveryCompiledTarget) {
  const std::vector<std::int64_t> targets = compiled_targets();
  for (const std::int64_t t : targets) {
    hwy::SetSupportedTargetsForTest(t);
    const std::string name = hwy::TargetName(t);
    for (std::size_t out_w : {0u, 1u, 3u, 4u, 7u, 8u, 9u, 16u, 17u, 33u}) {
      // 2 * out_w + 1 columns (an odd input width leaves its last column out)
      std::vector<float> r0 = values(2 * out_w + 1, 3u + static_cast<std::uint32_t>(out_w));
      std::vector<float> r1 = values(2 * out_w + 1, 40u + static_cast<std::uint32_t>(out_w));
      // NaNs with distinct payloads (the first one must win), signed zeros, ties
      const float nan1 = std::bit_cast<float>(0x7fc00001u), nan2 = std::bit_cast<float>(0xffc00002u);
      for (std::size_t j = 0; j < out_w; ++j) {
        if (j % 5 == 1) r1[2 * j] = nan1;
        if (j % 5 == 1 && j % 2) r0[2 * j + 1] = nan2;
        if (j % 7 == 3) { r0[2 * j] = -0.0f; r0[2 * j + 1] = 0.0f; r1[2 * j] = -5.0f; r1[2 * j + 1] = -1.0f; }
      }
      std::vector<float> y(out_w + 1, 12345.0f);
      simd::max_pool_2x2_row_f32(r0.data(), r1.data(), y.data(), out_w);
      for (std::size_t j = 0; j < out_w; ++j)
        ASSERT_EQ(std::bit_cast<std::uint32_t>(y[j]), std::bit_cast<std::uint32_t>(ref_pool(r0.data(), r1.data(), j)))
            << name << " out_w " << out_w << " at " << j;
      ASSERT_EQ(y[out_w], 12345.0f) << name << ": wrote past the row";
    }
  }
  hwy::SetSupportedTargetsForTest(0);
}

// The direct conv's fused epilogue: every channel's row pair pooled, then relu (x <= 0 ? 0 :
// x, NaN kept), bit for bit against the scalar rule; odd widths, an output stride wider than
// the row, nothing written between or after the output rows.
TEST(CpuPoolSimd, MaxPool2x2ReluRowsMatchesTheScalarRuleOnEveryCompiledTarget) {
  const std::vector<std::int64_t> targets = compiled_targets();
  for (const std::int64_t t : targets) {
    hwy::SetSupportedTargetsForTest(t);
    const std::string name = hwy::TargetName(t);
    for (std::size_t in_w : {2u, 3u, 7u, 8u, 15u, 28u, 29u, 33u, 64u}) {
      const std::size_t channels = 5, out_w = in_w / 2, stride = out_w + 3;
      std::vector<float> x = values(channels * 2 * in_w + simd::kPoolRowsSlack, 9u + static_cast<std::uint32_t>(in_w));
      const float nan1 = std::bit_cast<float>(0x7fc00001u), nan2 = std::bit_cast<float>(0xffc00002u);
      for (std::size_t i = 0; i + 1 < channels * 2 * in_w; i += 11) x[i] = i % 2 ? nan1 : -0.0f;
      for (std::size_t i = 5; i + 1 < channels * 2 * in_w; i += 17) x[i] = nan2;
      std::vector<float> y(channels * stride, 12345.0f);
      simd::max_pool_2x2_relu_rows_f32(x.data(), channels, in_w, y.data(), stride);
      std::size_t zeros = 0, nans = 0;
      for (std::size_t c = 0; c < channels; ++c) {
        const float* r0 = x.data() + c * 2 * in_w;
        for (std::size_t j = 0; j < stride; ++j) {
          const float got = y[c * stride + j];
          if (j >= out_w) {
            ASSERT_EQ(got, 12345.0f) << name << " in_w " << in_w << ": wrote past row " << c;
            continue;
          }
          const float m = ref_pool(r0, r0 + in_w, j), want = m <= 0.0f ? 0.0f : m;
          zeros += got == 0.0f;
          nans += std::isnan(got);
          ASSERT_EQ(std::bit_cast<std::uint32_t>(got), std::bit_cast<std::uint32_t>(want))
              << name << " in_w " << in_w << " channel " << c << " at " << j;
        }
      }
      if (in_w >= 28) {
        EXPECT_GT(zeros, 0u) << name << " in_w " << in_w;
        EXPECT_GT(nans, 0u) << name << " in_w " << in_w;
      }
    }
  }
  hwy::SetSupportedTargetsForTest(0);
}

}  // namespace
}  // namespace tensor::cpu::test
