// The panel route of q_matmul's q4 product (quant_q4.hpp): for M where the fused kernel does
// not run (no AVX512-VNNI and M > kQ4PortableMaxRows, or not x86-64) and for rows of x that
// hold a NaN or an infinity. The weight is never dequantized whole: each task (a slab of
// kQ4PanelGroups * 16 columns, and a range of rows where there are few slabs) dequantizes
// one K-panel of kQ4PanelK rows of its slab at a time from the nibble pack into a
// thread-local f32 buffer (512 KiB: half this CPU's L2) and multiplies it into out with the
// single-threaded f32 GEMM, beta = 0 on the first panel and 1 after. Every weight value is
// code * scale in f32, the value dequantize() gives, so the products are the f32 product's
// up to summation order; NaN / inf in x reach out as in the dequantize route.
#include <algorithm>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "backends/cpu/cpu_info.hpp"
#include "backends/cpu/gemm.hpp"
#include "backends/cpu/parallel.hpp"
#include "backends/cpu/quant_q4.hpp"

namespace tensor::cpu::qdetail {

namespace {

// Rows [b0, b1) of 32 (blocks) by groups [g0, g1) of the pack into buf (row stride ld).
void dequantize_panel(const Q4Pack& p, std::int64_t b0, std::int64_t b1, std::int64_t g0, std::int64_t g1, float* buf,
                      std::int64_t ld) {
  for (std::int64_t g = g0; g < g1; ++g)
    for (std::int64_t b = b0; b < b1; ++b) {
      const std::uint8_t* wc = p.codes.data() + (g * p.nb + b) * 256;
      const float* ws = p.s32.data() + (g * p.nb + b) * kQ4Cols;
      float* o = buf + (b - b0) * kQ4Block * ld + (g - g0) * kQ4Cols;
      for (std::int64_t t = 0; t < 4; ++t)
        for (std::int64_t i = 0; i < 4; ++i) {
          float* lo = o + (4 * t + i) * ld;
          float* hi = o + (16 + 4 * t + i) * ld;
          for (std::int64_t l = 0; l < kQ4Cols; ++l) {
            const std::uint8_t v = wc[t * 64 + 4 * l + i];
            lo[l] = static_cast<float>(static_cast<int>(v & 15) - 8) * ws[l];
            hi[l] = static_cast<float>(static_cast<int>(v >> 4) - 8) * ws[l];
          }
        }
    }
}

#if defined(__x86_64__)
// The same values with AVX512F: per 64 bytes (one t), the 16 lanes' byte i of the low and of
// the high nibbles, shifted out of each i32 lane, converted, minus 8, times the scales: two
// rows of 16 floats per i (the maskz forms: GCC 12 warns that the plain ones' undefined
// operand may be uninitialized). (The scalar loop above ran about 7 ms of CPU per 4096 x 4096 weight.)
__attribute__((target("avx512f"))) void dequantize_panel_avx512(const Q4Pack& p, std::int64_t b0, std::int64_t b1,
                                                                std::int64_t g0, std::int64_t g1, float* buf, std::int64_t ld) {
  const __m512i nib = _mm512_set1_epi32(0x0F0F0F0F), byte = _mm512_set1_epi32(0xFF);
  const __m512 eight = _mm512_set1_ps(8.0f);
  for (std::int64_t g = g0; g < g1; ++g)
    for (std::int64_t b = b0; b < b1; ++b) {
      const std::uint8_t* wc = p.codes.data() + (g * p.nb + b) * 256;
      const __m512 ws = _mm512_loadu_ps(p.s32.data() + (g * p.nb + b) * kQ4Cols);
      float* o = buf + (b - b0) * kQ4Block * ld + (g - g0) * kQ4Cols;
      for (int t = 0; t < 4; ++t) {
        const __m512i v = _mm512_loadu_si512(wc + 64 * t);
        const __m512i lo = _mm512_and_si512(v, nib), hi = _mm512_and_si512(_mm512_maskz_srli_epi32(0xFFFF, v, 4), nib);
        for (int i = 0; i < 4; ++i) {
          const __m512i li = _mm512_and_si512(_mm512_maskz_srli_epi32(0xFFFF, lo, static_cast<unsigned>(8 * i)), byte);
          const __m512i hii = _mm512_and_si512(_mm512_maskz_srli_epi32(0xFFFF, hi, static_cast<unsigned>(8 * i)), byte);
          _mm512_storeu_ps(o + (4 * t + i) * ld, _mm512_mul_ps(_mm512_sub_ps(_mm512_maskz_cvtepi32_ps(0xFFFF, li), eight), ws));
          _mm512_storeu_ps(o + (16 + 4 * t + i) * ld, _mm512_mul_ps(_mm512_sub_ps(_mm512_maskz_cvtepi32_ps(0xFFFF, hii), eight), ws));
        }
      }
    }
}

bool has_avx512f() {
  static const bool yes = __builtin_cpu_supports("avx512f");
  return yes;
}
#endif

}  // namespace

void panel_product(const Q4Pack& p, const float* x, std::int64_t m, float* out) {
  const std::int64_t k = p.k, n = p.n;
  const std::int64_t slabs = (p.groups + kQ4PanelGroups - 1) / kQ4PanelGroups;
  const std::int64_t nt = std::max(1, omp_threads());
  // fewer slabs than threads (N <= 256 on 2 threads): rows split too, each row range its own panels
  const std::int64_t row_parts = slabs >= nt ? 1 : std::min<std::int64_t>((nt + slabs - 1) / slabs, (m + 31) / 32);
  const std::int64_t parts = std::max<std::int64_t>(1, row_parts);
  const std::int64_t panel_blocks = kQ4PanelK / kQ4Block;
  auto task = [&](std::size_t c) {
    const std::int64_t slab = static_cast<std::int64_t>(c) / parts, part = static_cast<std::int64_t>(c) % parts;
    const std::int64_t r0 = m * part / parts, r1 = m * (part + 1) / parts;
    const std::int64_t g0 = slab * kQ4PanelGroups, g1 = std::min(p.groups, g0 + kQ4PanelGroups);
    const std::int64_t c0 = g0 * kQ4Cols, cols = std::min(n, g1 * kQ4Cols) - c0, ld = (g1 - g0) * kQ4Cols;
    if (r0 >= r1) return;
    thread_local std::vector<float> buf;
    buf.resize(static_cast<std::size_t>(kQ4PanelK * kQ4PanelGroups * kQ4Cols));
    const GemmThreadScope scope;
    for (std::int64_t b0 = 0; b0 < p.nb; b0 += panel_blocks) {
      const std::int64_t b1 = std::min(p.nb, b0 + panel_blocks);
#if defined(__x86_64__)
      if (has_avx512f())
        dequantize_panel_avx512(p, b0, b1, g0, g1, buf.data(), ld);
      else
#endif
        dequantize_panel(p, b0, b1, g0, g1, buf.data(), ld);
      sgemm(static_cast<std::size_t>(r1 - r0), static_cast<std::size_t>(cols), static_cast<std::size_t>((b1 - b0) * kQ4Block), 1.0f,
            x + r0 * k + b0 * kQ4Block, k, 1, buf.data(), ld, 1, b0 == 0 ? 0.0f : 1.0f, out + r0 * n + c0, n, 1);
    }
  };
  parallel_chunks(static_cast<std::size_t>(slabs * parts), task);
}

}  // namespace tensor::cpu::qdetail
