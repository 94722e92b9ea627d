// The fused q4 GEMV of q_matmul (quant_q4.hpp). Exactness: the integer part of every block
// product is exact (|sum| <= 32 * 127 * 8 < 2^24, so its f32 conversion is exact too); per
// block the f32 epilogue is acc = acc + f32(isum) * (wscale * xscale), a product then a sum
// (no FMA: the vector body is built with fp-contract=off and uses mul + add), in
// block order, so the AVX512-VNNI and the portable kernels give the same floats bit for bit.
//
// dpbusd multiplies u8 by s8: the weight's codes are stored offset by 8 (code + 8 in
// [0, 15], an unsigned nibble) and the activation codes are the s8 operand, so a block's
// dpbusd sum is sum (c + 8) * a = sum c * a + 8 * sum a; 8 * sum a is computed once per
// activation block and subtracted.
#include "backends/cpu/quant_q4.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "backends/cpu/convert_hwy.hpp"
#include "backends/cpu/cpu_info.hpp"
#include "backends/cpu/cpu_ops.hpp"
#include "backends/cpu/gemm.hpp"
#include "backends/cpu/parallel.hpp"
#include "backends/cpu/quant_hwy.hpp"
#include "dispatch/quant.hpp"
#include "dispatch/quant_model.hpp"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace tensor::cpu::qdetail {

namespace q = dispatch::quant;
using dispatch::DispatchTensor;

std::size_t Q4Pack::bytes_read() const { return codes.size() + (s16.empty() ? s32.size() * 4 : s16.size() * 2); }

bool q4_fits(const q::QuantPrim& w) {
  const Shape& s = w.shape();
  if (s.rank() != 2 || !w.scheme().level.is_block() || s[0] == 0 || s[1] == 0) return false;
  const auto [a, b] = w.scheme().range();
  if (a < -8 || b > 7) return false;  // Q4F, Q4S, Q2F, Q2S
  const q::Extents e = q::block_extents("q_matmul", s, w.scheme());
  return e.rank == 2 && e.ext[0] == static_cast<std::size_t>(kQ4Block) && e.ext[1] == 1 && s[0] % kQ4Block == 0;
}

std::shared_ptr<const Q4Pack> make_q4_pack(const q::QuantPrim& w) {
  if (!q4_fits(w)) return nullptr;
  CpuRef codes = to_contiguous(as_cpu(DispatchTensor(w.codes()).take()));
  CpuRef sc = to_contiguous(as_cpu(DispatchTensor(w.scales()).take()));
  auto p = std::make_shared<Q4Pack>();
  p->k = static_cast<std::int64_t>(w.shape()[0]);
  p->n = static_cast<std::int64_t>(w.shape()[1]);
  p->nb = p->k / kQ4Block;
  p->groups = (p->n + kQ4Cols - 1) / kQ4Cols;
  if (static_cast<std::int64_t>(sc->shape().num_elements()) != p->nb * p->n) return nullptr;
  const auto* c = reinterpret_cast<const std::int8_t*>(codes->data());
  const auto* s = reinterpret_cast<const float*>(sc->data());
  const std::int64_t k = p->k, n = p->n, nb = p->nb;
  p->codes.assign(static_cast<std::size_t>(p->groups * nb * 256), 0x88);  // padding columns: code 0
  p->s32.assign(static_cast<std::size_t>(p->groups * nb * kQ4Cols), 0.0f);
  for (std::int64_t i = 0; i < k * n; ++i)
    if (c[i] < -8 || c[i] > 7) return nullptr;
  for (std::int64_t g = 0; g < p->groups; ++g)
    for (std::int64_t b = 0; b < nb; ++b) {
      std::uint8_t* out = p->codes.data() + (g * nb + b) * 256;
      float* so = p->s32.data() + (g * nb + b) * kQ4Cols;
      for (std::int64_t l = 0; l < kQ4Cols; ++l) {
        const std::int64_t j = g * kQ4Cols + l;
        if (j >= n) break;
        so[l] = s[b * n + j];
        for (std::int64_t t = 0; t < 4; ++t)
          for (std::int64_t i = 0; i < 4; ++i) {
            const std::int64_t klo = kQ4Block * b + 4 * t + i, khi = klo + 16;
            const auto lo = static_cast<std::uint8_t>(c[klo * n + j] + 8), hi = static_cast<std::uint8_t>(c[khi * n + j] + 8);
            out[t * 64 + 4 * l + i] = static_cast<std::uint8_t>(lo | (hi << 4));
          }
      }
    }
  // f16 scales where exact (an f16 or bf16-in-f16-range scheme): half the scale bytes.
  std::vector<std::uint16_t> h(p->s32.size());
  std::vector<float> back(p->s32.size());
  simd::f32_to_f16(p->s32.data(), h.data(), h.size());
  simd::f16_to_f32(h.data(), back.data(), back.size());
  if (std::memcmp(back.data(), p->s32.data(), back.size() * sizeof(float)) == 0) p->s16 = std::move(h);
  return p;
}

namespace {

// One row of x quantized per 32-block: codes, scale (amax / 127) and 8 * the codes' sum.
struct Act {
  std::vector<std::int8_t> codes;
  std::vector<float> scale;
  std::vector<std::int32_t> sum8;
};

bool quantize_rows(const float* x, std::int64_t m, std::int64_t k, Act& a) {
  const std::int64_t nb = k / kQ4Block;
  a.codes.resize(static_cast<std::size_t>(m * k));
  a.scale.resize(static_cast<std::size_t>(m * nb));
  a.sum8.resize(static_cast<std::size_t>(m * nb));
  // rows split over the library's threads (M = 500, K = 3136 took a third of the product on
  // one thread); each chunk writes its own rows and its own flag
  const std::int64_t chunks = std::min<std::int64_t>(std::max(1, omp_threads()), std::max<std::int64_t>(1, m * k >> 15));
  std::vector<char> bad(static_cast<std::size_t>(chunks), 0);
  auto body = [&](std::size_t c) {
    const std::int64_t r0 = m * static_cast<std::int64_t>(c) / chunks, r1 = m * (static_cast<std::int64_t>(c) + 1) / chunks;
    for (std::int64_t r = r0; r < r1; ++r)
      for (std::int64_t b = 0; b < nb; ++b) {
        const float* xb = x + r * k + b * kQ4Block;
        bool good = true;
        const float amax = simd::abs_max_f32(xb, kQ4Block, &good);
        if (!good) {  // NaN or inf: no int8 code
          bad[c] = 1;
          return;
        }
        const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
        std::int8_t* o = a.codes.data() + r * k + b * kQ4Block;
        simd::quantize_s8(xb, kQ4Block, inv, o);
        std::int32_t s = 0;
        for (std::int64_t i = 0; i < kQ4Block; ++i) s += o[i];
        a.scale[static_cast<std::size_t>(r * nb + b)] = amax / 127.0f;
        a.sum8[static_cast<std::size_t>(r * nb + b)] = 8 * s;
      }
  };
  parallel_chunks(static_cast<std::size_t>(chunks), body);
  return std::find(bad.begin(), bad.end(), 1) == bad.end();
}

// Groups [g0, g1) for rows [r0, r1), portable: the same sums and float steps as the vector body.
void portable_groups(const Q4Pack& p, const Act& a, std::int64_t r0, std::int64_t r1, float* out, std::int64_t g0,
                     std::int64_t g1) {
  const std::int64_t nb = p.nb, k = p.k, n = p.n;
  for (std::int64_t g = g0; g < g1; ++g)
    for (std::int64_t r = r0; r < r1; ++r) {
      float acc[kQ4Cols] = {};
      for (std::int64_t b = 0; b < nb; ++b) {
        const std::uint8_t* wc = p.codes.data() + (g * nb + b) * 256;
        const std::int8_t* xb = a.codes.data() + r * k + b * kQ4Block;
        const float* ws = p.s32.data() + (g * nb + b) * kQ4Cols;
        const float xs = a.scale[static_cast<std::size_t>(r * nb + b)];
        std::int32_t isum[kQ4Cols] = {};
        for (std::int64_t t = 0; t < 4; ++t)
          for (std::int64_t l = 0; l < kQ4Cols; ++l)
            for (std::int64_t i = 0; i < 4; ++i) {
              const std::uint8_t v = wc[t * 64 + 4 * l + i];
              isum[l] += (static_cast<std::int32_t>(v & 15) - 8) * xb[4 * t + i] + (static_cast<std::int32_t>(v >> 4) - 8) * xb[16 + 4 * t + i];
            }
        for (std::int64_t l = 0; l < kQ4Cols; ++l) acc[l] = acc[l] + static_cast<float>(isum[l]) * (ws[l] * xs);
      }
      const std::int64_t cols = std::min(kQ4Cols, n - g * kQ4Cols);
      std::copy_n(acc, cols, out + r * n + g * kQ4Cols);
    }
}

#if defined(__x86_64__)
// fp-contract=off: with FMA in the target GCC 12 fuses the intrinsics' mul + add (C++'s ISO
// mode does not turn contraction off), and the portable loop has no FMA to match.
#define Q4_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,f16c"), optimize("fp-contract=off")))

// R rows (R <= 6) of x against one group of 16 columns: the block's 8 weight vectors are
// unpacked once and used for each row.
template <int R, bool kF16>
Q4_TARGET void vnni_tile(const Q4Pack& p, const Act& a, std::int64_t r0, std::int64_t g, float* out) {
  const std::int64_t nb = p.nb, k = p.k, n = p.n;
  const __m512i lo4 = _mm512_set1_epi8(0x0F);
  __m512 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  const std::uint8_t* wc = p.codes.data() + g * nb * 256;
  for (std::int64_t b = 0; b < nb; ++b, wc += 256) {
    __m512i w[8];
    for (int t = 0; t < 4; ++t) {
      const __m512i v = _mm512_loadu_si512(wc + 64 * t);
      w[t] = _mm512_and_si512(v, lo4);
      w[t + 4] = _mm512_and_si512(_mm512_srli_epi16(v, 4), lo4);
    }
    // (the maskz forms: GCC 12 warns that the plain ones' _mm512_undefined_ps may be uninitialized)
    __m512 ws;
    if constexpr (kF16)
      ws = _mm512_maskz_cvtph_ps(0xFFFF, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p.s16.data() + (g * nb + b) * kQ4Cols)));
    else
      ws = _mm512_loadu_ps(p.s32.data() + (g * nb + b) * kQ4Cols);
    for (int r = 0; r < R; ++r) {
      const std::int8_t* xb = a.codes.data() + (r0 + r) * k + b * kQ4Block;
      // two chains of 4 (the low and the high nibbles): 2 R independent dpbusd chains
      __m512i s0 = _mm512_setzero_si512(), s1 = _mm512_setzero_si512();
      for (int t = 0; t < 4; ++t) {
        std::int32_t x4, y4;
        std::memcpy(&x4, xb + 4 * t, 4);
        std::memcpy(&y4, xb + 16 + 4 * t, 4);
        s0 = _mm512_dpbusd_epi32(s0, w[t], _mm512_set1_epi32(x4));
        s1 = _mm512_dpbusd_epi32(s1, w[t + 4], _mm512_set1_epi32(y4));
      }
      const auto u = static_cast<std::size_t>((r0 + r) * nb + b);
      const __m512i s = _mm512_sub_epi32(_mm512_add_epi32(s0, s1), _mm512_set1_epi32(a.sum8[u]));
      const __m512 sc = _mm512_mul_ps(ws, _mm512_set1_ps(a.scale[u]));
      acc[r] = _mm512_add_ps(acc[r], _mm512_mul_ps(_mm512_maskz_cvtepi32_ps(0xFFFF, s), sc));
    }
  }
  const std::int64_t cols = std::min(kQ4Cols, n - g * kQ4Cols);
  const __mmask16 mask = cols == kQ4Cols ? __mmask16(0xFFFF) : static_cast<__mmask16>((1u << cols) - 1u);
  for (int r = 0; r < R; ++r) _mm512_mask_storeu_ps(out + (r0 + r) * n + g * kQ4Cols, mask, acc[r]);
}

// One row of x (the GEMV) against G groups at once: the activation block's 8 broadcasts are
// shared by the G groups, and each group's dpbusd sum runs as two chains of 4, so G * 2
// independent chains hide vpdpbusd's latency (one group's chain of 8 left it latency-bound:
// 11 GB/s of codes on one core where the f32 GEMV streams 22).
template <int G, bool kF16>
Q4_TARGET void vnni_row1(const Q4Pack& p, const Act& a, std::int64_t r, std::int64_t g0, float* out) {
  const std::int64_t nb = p.nb, k = p.k, n = p.n;
  const __m512i lo4 = _mm512_set1_epi8(0x0F);
  __m512 acc[G];
  for (int gi = 0; gi < G; ++gi) acc[gi] = _mm512_setzero_ps();
  for (std::int64_t b = 0; b < nb; ++b) {
    const std::int8_t* xb = a.codes.data() + r * k + b * kQ4Block;
    __m512i xv[8];
    for (int t = 0; t < 8; ++t) {
      std::int32_t x4;
      std::memcpy(&x4, xb + 4 * t, 4);
      xv[t] = _mm512_set1_epi32(x4);
    }
    const auto u = static_cast<std::size_t>(r * nb + b);
    const __m512i sum8 = _mm512_set1_epi32(a.sum8[u]);
    const __m512 xs = _mm512_set1_ps(a.scale[u]);
    for (int gi = 0; gi < G; ++gi) {
      const std::int64_t g = g0 + gi;
      const std::uint8_t* wc = p.codes.data() + (g * nb + b) * 256;
      __m512i s0 = _mm512_setzero_si512(), s1 = _mm512_setzero_si512();
      for (int t = 0; t < 4; ++t) {
        const __m512i v = _mm512_loadu_si512(wc + 64 * t);
        s0 = _mm512_dpbusd_epi32(s0, _mm512_and_si512(v, lo4), xv[t]);
        s1 = _mm512_dpbusd_epi32(s1, _mm512_and_si512(_mm512_srli_epi16(v, 4), lo4), xv[t + 4]);
      }
      __m512 ws;
      if constexpr (kF16)
        ws = _mm512_maskz_cvtph_ps(0xFFFF, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p.s16.data() + (g * nb + b) * kQ4Cols)));
      else
        ws = _mm512_loadu_ps(p.s32.data() + (g * nb + b) * kQ4Cols);
      const __m512i s = _mm512_sub_epi32(_mm512_add_epi32(s0, s1), sum8);
      acc[gi] = _mm512_add_ps(acc[gi], _mm512_mul_ps(_mm512_maskz_cvtepi32_ps(0xFFFF, s), _mm512_mul_ps(ws, xs)));
    }
  }
  for (int gi = 0; gi < G; ++gi) {
    const std::int64_t g = g0 + gi;
    const std::int64_t cols = std::min(kQ4Cols, n - g * kQ4Cols);
    const __mmask16 mask = cols == kQ4Cols ? __mmask16(0xFFFF) : static_cast<__mmask16>((1u << cols) - 1u);
    _mm512_mask_storeu_ps(out + r * n + g * kQ4Cols, mask, acc[gi]);
  }
}

template <bool kF16>
Q4_TARGET void vnni_groups(const Q4Pack& p, const Act& a, std::int64_t r0, std::int64_t r1, float* out, std::int64_t g0,
                           std::int64_t g1) {
  if (r1 - r0 == 1) {
    std::int64_t g = g0;
    for (; g + 4 <= g1; g += 4) vnni_row1<4, kF16>(p, a, r0, g, out);
    for (; g < g1; ++g) vnni_row1<1, kF16>(p, a, r0, g, out);
    return;
  }
  for (std::int64_t g = g0; g < g1; ++g)
    for (std::int64_t r = r0; r < r1;) {
      const std::int64_t left = r1 - r;
      if (left >= 6) {
        vnni_tile<6, kF16>(p, a, r, g, out);
        r += 6;
        continue;
      }
      r += std::min<std::int64_t>(4, left);
      switch (std::min<std::int64_t>(4, left)) {
        case 4: vnni_tile<4, kF16>(p, a, r - 4, g, out); break;
        case 3: vnni_tile<3, kF16>(p, a, r - 3, g, out); break;
        case 2: vnni_tile<2, kF16>(p, a, r - 2, g, out); break;
        default: vnni_tile<1, kF16>(p, a, r - 1, g, out); break;
      }
    }
}
#undef Q4_TARGET

bool has_avx512_vnni() {
  static const bool yes = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
  return yes;
}
#endif

bool g_force_portable = false;

}  // namespace

const char* q4_kernel() {
#if defined(__x86_64__)
  if (!g_force_portable && has_avx512_vnni()) return "avx512-vnni";
  return "portable";
#else
  return "";
#endif
}

void q4_force_portable(bool on) { g_force_portable = on; }

const char* q4_route_for(std::int64_t m, std::int64_t n) {
  const std::string kernel = q4_kernel();
  if (m <= kQ4PortableMaxRows) return kernel.empty() ? "panels" : "fused";
  // many rows and fewer than 16 columns: the fused kernel computes the padded group's 16
  // (the cnn's fc2, 500 x 128 x 10: fused 0.24-0.52x the f32 product, panels 1.08-1.75x)
  return kernel == "avx512-vnni" && n >= kQ4Cols ? "fused" : "panels";
}

namespace {

bool fused_product(const Q4Pack& p, const float* x, std::int64_t m, float* out, std::string& route) {
  const std::string kernel = q4_kernel();
  thread_local Act act;
  if (!quantize_rows(x, m, p.k, act)) return false;
  const bool vnni = kernel == "avx512-vnni";
  const bool f16 = !p.s16.empty();
  // Groups of columns split evenly over the library's threads, one contiguous range each;
  // where there are too few groups for that (the cnn's fc1: N = 128, 8 groups, M = 500),
  // rows in tiles of 4 instead, each thread all the groups.
  const std::int64_t nt = std::max(1, omp_threads());
  const bool by_rows = p.groups <= 4 * nt && m >= 8 * nt;
  const std::int64_t threads = std::min<std::int64_t>(nt, by_rows ? (m + 3) / 4 : p.groups);
  const Act& a = act;
  auto chunk = [&](std::size_t c) {
    const auto ci = static_cast<std::int64_t>(c);
    std::int64_t g0 = 0, g1 = p.groups, r0 = 0, r1 = m;
    if (by_rows) {
      const std::int64_t tiles = (m + 3) / 4;
      r0 = std::min(m, 4 * (tiles * ci / threads));
      r1 = std::min(m, 4 * (tiles * (ci + 1) / threads));
    } else {
      g0 = p.groups * ci / threads;
      g1 = p.groups * (ci + 1) / threads;
    }
#if defined(__x86_64__)
    if (vnni) {
      if (f16)
        vnni_groups<true>(p, a, r0, r1, out, g0, g1);
      else
        vnni_groups<false>(p, a, r0, r1, out, g0, g1);
      return;
    }
#endif
    portable_groups(p, a, r0, r1, out, g0, g1);
  };
  parallel_chunks(static_cast<std::size_t>(threads), chunk);
  route = std::string("q4 fused ") + kernel + (vnni ? (f16 ? " (f16 scales)" : " (f32 scales)") : "") +
          (by_rows ? ", rows split" : "");
  return true;
}

}  // namespace

bool q4_product(const Q4Pack& p, const float* x, std::int64_t m, float* out, std::string& route) {
  // a row of x with a NaN or an infinity has no int8 code: the panels (f32 throughout) take it
  if (std::string(q4_route_for(m, p.n)) == "fused" && fused_product(p, x, m, out, route)) return true;
  panel_product(p, x, m, out);
  route = std::string("q4 panels (") + std::to_string(kQ4PanelK) + " x " + std::to_string(kQ4PanelGroups * kQ4Cols) +
          " f32) + sgemm";
  return true;
}

}  // namespace tensor::cpu::qdetail
