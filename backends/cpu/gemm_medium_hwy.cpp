// Highway kernel of medium f32 products (see gemm_medium_hwy.hpp), once per target.
//
// Layout: c in micro-panels of kNV vectors of columns (the last one narrower), k in blocks of
// kMediumKC. A micro-panel of B (kc rows of its width) is read in place where B's rows are
// contiguous and the panel is whole vectors, else packed (times alpha; zero-padded to whole
// vectors) into the thread's buffer. Tiles of kMR rows of c then run a kMR x kNV block of
// accumulators over the kc rows: each step broadcasts one element of A per row (A read in
// place, any strides) and loads the panel's vectors once for all rows. Columns past n are
// computed on the zero padding and never stored (a partial vector goes through a stack tile
// and a masked store), so n = 10 runs one vector per row, not ten lanes one at a time.
#include "backends/cpu/gemm_medium_hwy.hpp"

#include <algorithm>
#include <cstring>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backends/cpu/gemm_medium_hwy.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace tensor::cpu::simd {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Vectors of columns per micro-panel, and rows per tile: 8 x 3 accumulators where the
// target has 32 vector registers of 512 bits (AVX-512), 4 x 3 on 16 registers (AVX2, SSE).
constexpr std::size_t kNV = 3;  // Tile's loads are written out for at most 3
constexpr std::size_t kMR = HWY_MAX_BYTES >= 64 ? 8 : 4;

// How a tile's accumulators start: zeros (first k block, beta == 0), beta * c (first k block),
// or c (later k blocks: the multiply-add chain goes on from the previous block's sums).
enum class Init { zero, scaled, load };

// One tile: MR rows of c from row pointer a (rows rsa apart, k csa apart) times the micro-panel
// bp (kc rows of NV * N floats, ldb apart: packed, or B itself), all NV vectors of columns of c
// written (a partial panel runs on a copy of c, see Panel). The loops over the tile are
// unrolled (constant indices) so that acc stays in registers.
template <std::size_t MR, std::size_t NV, class D>
HWY_INLINE void Tile(D d, std::size_t kc, const float* HWY_RESTRICT a, std::int64_t rsa, std::int64_t csa,
                     const float* HWY_RESTRICT bp, std::int64_t ldb, float* HWY_RESTRICT c, std::int64_t rsc,
                     Init init, float beta) {
  using V = hn::Vec<D>;
  const std::size_t N = hn::Lanes(d);
  V acc[MR][NV];
  if (init == Init::zero) {
#pragma GCC unroll 8
    for (std::size_t r = 0; r < MR; ++r)
#pragma GCC unroll 4
      for (std::size_t v = 0; v < NV; ++v) acc[r][v] = hn::Zero(d);
  } else {
    const V vb = hn::Set(d, init == Init::scaled ? beta : 1.0f);
#pragma GCC unroll 8
    for (std::size_t r = 0; r < MR; ++r)
#pragma GCC unroll 4
      for (std::size_t v = 0; v < NV; ++v) {
        const V cv = hn::LoadU(d, c + static_cast<std::int64_t>(r) * rsc + static_cast<std::int64_t>(v * N));
        acc[r][v] = init == Init::scaled ? hn::Mul(cv, vb) : cv;
      }
  }
  // Rows r and r + 4 from two bases (row offsets 0, rsa, 2 rsa, 3 rsa: x86 addressing takes
  // them from two registers), so the 8 row pointers do not use up the general registers.
  const float* a0 = a;
  const float* a4 = a + (MR > 4 ? 4 * rsa : 0);
  const std::int64_t r3 = 3 * rsa;
  for (std::size_t p = 0; p < kc; ++p, a0 += csa, a4 += csa, bp += ldb) {
    const V b0 = hn::LoadU(d, bp);
    const V b1 = NV > 1 ? hn::LoadU(d, bp + N) : b0;
    const V b2 = NV > 2 ? hn::LoadU(d, bp + 2 * N) : b0;
#pragma GCC unroll 8
    for (std::size_t r = 0; r < MR; ++r) {
      const float* ar = r < 4 ? a0 : a4;
      const std::size_t q = r % 4;
      const V av = hn::Set(d, q == 0 ? ar[0] : q == 1 ? ar[rsa] : q == 2 ? ar[2 * rsa] : ar[r3]);
      acc[r][0] = hn::MulAdd(av, b0, acc[r][0]);
      if constexpr (NV > 1) acc[r][1] = hn::MulAdd(av, b1, acc[r][1]);
      if constexpr (NV > 2) acc[r][2] = hn::MulAdd(av, b2, acc[r][2]);
    }
  }
#pragma GCC unroll 8
  for (std::size_t r = 0; r < MR; ++r)
#pragma GCC unroll 4
    for (std::size_t v = 0; v < NV; ++v)
      hn::StoreU(acc[r][v], d, c + static_cast<std::int64_t>(r) * rsc + static_cast<std::int64_t>(v * N));
}

// A tile of a partial micro-panel (cols < NV * N valid columns): run on a copy of c's valid
// columns on the stack (the rest zero), copied back after, so that nothing past column n is
// read or written (a neighbouring slab's columns may belong to another thread).
template <std::size_t MR, std::size_t NV, class D>
HWY_NOINLINE void PartialTile(D d, std::size_t kc, const float* a, std::int64_t rsa, std::int64_t csa,
                              const float* bp, std::int64_t ldb, float* c, std::int64_t rsc, std::size_t cols,
                              Init init, float beta) {
  constexpr std::size_t kW = NV * HWY_MAX_BYTES / sizeof(float);
  const std::size_t w = NV * hn::Lanes(d);
  HWY_ALIGN float tmp[MR * kW];
  if (init != Init::zero) {
    for (std::size_t r = 0; r < MR; ++r) {
      float* t = tmp + r * w;
      std::memcpy(t, c + static_cast<std::int64_t>(r) * rsc, cols * sizeof(float));
      std::fill(t + cols, t + w, 0.0f);
    }
  }
  Tile<MR, NV>(d, kc, a, rsa, csa, bp, ldb, tmp, static_cast<std::int64_t>(w), init, beta);
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2
  // A real masked store here (vmaskmovps, AVX-512's masked vmovups): nothing past cols written.
  const std::size_t N = hn::Lanes(d);
  for (std::size_t r = 0; r < MR; ++r) {
    float* cr = c + static_cast<std::int64_t>(r) * rsc;
    std::size_t j = 0;
    for (; j + N <= cols; j += N) hn::StoreU(hn::Load(d, tmp + r * w + j), d, cr + j);
    if (j < cols) hn::BlendedStore(hn::Load(d, tmp + r * w + j), hn::FirstN(d, cols - j), d, cr + j);
  }
#else
  for (std::size_t r = 0; r < MR; ++r)
    std::memcpy(c + static_cast<std::int64_t>(r) * rsc, tmp + r * w, cols * sizeof(float));
#endif
}

template <std::size_t MR, std::size_t NV, class D>
HWY_INLINE void AnyTile(D d, std::size_t kc, const float* a, std::int64_t rsa, std::int64_t csa, const float* bp,
                        std::int64_t ldb, float* c, std::int64_t rsc, std::size_t cols, Init init, float beta) {
  if (cols >= NV * hn::Lanes(d)) {
    Tile<MR, NV>(d, kc, a, rsa, csa, bp, ldb, c, rsc, init, beta);
  } else {
    PartialTile<MR, NV>(d, kc, a, rsa, csa, bp, ldb, c, rsc, cols, init, beta);
  }
}

// All rows of c against one micro-panel of NV vectors: tiles of kMR rows, then 4, 2, 1.
template <std::size_t NV, class D>
HWY_NOINLINE void Panel(D d, std::size_t m, std::size_t kc, const float* a, std::int64_t rsa, std::int64_t csa,
                        const float* bp, std::int64_t ldb, float* c, std::int64_t rsc, std::size_t cols, Init init,
                        float beta) {
  std::size_t i = 0;
  const auto at = [&](std::size_t row) { return a + static_cast<std::int64_t>(row) * rsa; };
  const auto ct = [&](std::size_t row) { return c + static_cast<std::int64_t>(row) * rsc; };
  for (; i + kMR <= m; i += kMR) AnyTile<kMR, NV>(d, kc, at(i), rsa, csa, bp, ldb, ct(i), rsc, cols, init, beta);
  if constexpr (kMR > 4) {
    if (i + 4 <= m) {
      AnyTile<4, NV>(d, kc, at(i), rsa, csa, bp, ldb, ct(i), rsc, cols, init, beta);
      i += 4;
    }
  }
  if (i + 2 <= m) {
    AnyTile<2, NV>(d, kc, at(i), rsa, csa, bp, ldb, ct(i), rsc, cols, init, beta);
    i += 2;
  }
  if (i < m) AnyTile<1, NV>(d, kc, at(i), rsa, csa, bp, ldb, ct(i), rsc, cols, init, beta);
}

// Packs B's [kc x valid] block at src (rows rsb apart, columns csb apart) times alpha into
// dst, kc rows of w floats (columns valid..w-1 zero).
template <class D>
HWY_INLINE void PackB(D d, const float* src, std::int64_t rsb, std::int64_t csb, std::size_t kc, std::size_t valid,
                      std::size_t w, float alpha, float* HWY_RESTRICT dst) {
  // A transposed B (its rows one float apart, a weight used as W^T): 4 x 4 blocks transposed
  // in registers, 4 columns by 4 rows at a time (a float at a time was 14% of a 64 x 256 x 10
  // product, AVX-512 gathers 9% more time than this at 128^3).
  std::size_t done_j = 0, done_p = 0, tail_j = 0;
#if HWY_TARGET != HWY_SCALAR
  if (csb != 1 && rsb == 1) {
    const hn::CappedTag<float, 4> d4;
    if (hn::Lanes(d4) == 4) {
      const hn::Repartition<double, decltype(d4)> dd;
      done_j = valid / 4 * 4;
      done_p = kc / 4 * 4;
      const auto va = hn::Set(d4, alpha);
      for (std::size_t j = 0; j < done_j; j += 4) {
        const float* s0 = src + static_cast<std::int64_t>(j) * csb;
        const float* s1 = s0 + csb;
        const float* s2 = s1 + csb;
        const float* s3 = s2 + csb;
        for (std::size_t p = 0; p < done_p; p += 4) {
          const auto r0 = hn::LoadU(d4, s0 + p), r1 = hn::LoadU(d4, s1 + p);
          const auto r2 = hn::LoadU(d4, s2 + p), r3 = hn::LoadU(d4, s3 + p);
          const auto t0 = hn::BitCast(dd, hn::InterleaveLower(d4, r0, r1));
          const auto t1 = hn::BitCast(dd, hn::InterleaveLower(d4, r2, r3));
          const auto t2 = hn::BitCast(dd, hn::InterleaveUpper(d4, r0, r1));
          const auto t3 = hn::BitCast(dd, hn::InterleaveUpper(d4, r2, r3));
          float* o = dst + p * w + j;
          hn::StoreU(hn::Mul(va, hn::BitCast(d4, hn::InterleaveLower(dd, t0, t1))), d4, o);
          hn::StoreU(hn::Mul(va, hn::BitCast(d4, hn::InterleaveUpper(dd, t0, t1))), d4, o + w);
          hn::StoreU(hn::Mul(va, hn::BitCast(d4, hn::InterleaveLower(dd, t2, t3))), d4, o + 2 * w);
          hn::StoreU(hn::Mul(va, hn::BitCast(d4, hn::InterleaveUpper(dd, t2, t3))), d4, o + 3 * w);
        }
      }
      // The last kc % 4 rows the same way where the 4-float loads past a column's kc rows
      // stay before an element of the next column (j + 4 < valid, csb >= 4: inside the
      // operand's storage); what they read there lands in rows >= kc, never stored.
      const std::size_t rest = kc - done_p;
      if (rest > 0 && csb >= 4) {
        tail_j = valid > 0 ? std::min(done_j, (valid - 1) / 4 * 4) : 0;
        for (std::size_t j = 0; j < tail_j; j += 4) {
          const float* s0 = src + static_cast<std::int64_t>(j) * csb + static_cast<std::int64_t>(done_p);
          const auto r0 = hn::LoadU(d4, s0), r1 = hn::LoadU(d4, s0 + csb);
          const auto r2 = hn::LoadU(d4, s0 + 2 * csb), r3 = hn::LoadU(d4, s0 + 3 * csb);
          const auto t0 = hn::BitCast(dd, hn::InterleaveLower(d4, r0, r1));
          const auto t1 = hn::BitCast(dd, hn::InterleaveLower(d4, r2, r3));
          float* o = dst + done_p * w + j;
          hn::StoreU(hn::Mul(va, hn::BitCast(d4, hn::InterleaveLower(dd, t0, t1))), d4, o);
          if (rest > 1) hn::StoreU(hn::Mul(va, hn::BitCast(d4, hn::InterleaveUpper(dd, t0, t1))), d4, o + w);
          if (rest > 2) {
            const auto t2 = hn::BitCast(dd, hn::InterleaveUpper(d4, r0, r1));
            const auto t3 = hn::BitCast(dd, hn::InterleaveUpper(d4, r2, r3));
            hn::StoreU(hn::Mul(va, hn::BitCast(d4, hn::InterleaveLower(dd, t2, t3))), d4, o + 2 * w);
          }
        }
      }
    }
  }
#endif
  (void)d;
  for (std::size_t p = 0; p < kc; ++p) {
    const float* sp = src + static_cast<std::int64_t>(p) * rsb;
    float* dp = dst + p * w;
    if (csb == 1) {
      const std::size_t N = hn::Lanes(d);
      const auto va = hn::Set(d, alpha);
      std::size_t j = 0;
      for (; j + N <= valid; j += N) hn::Store(hn::Mul(va, hn::LoadU(d, sp + j)), d, dp + j);
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2
      // The partial vector by a real masked load (vmaskmovps, AVX-512's masked vmovups):
      // nothing past column `valid` is read; its lanes come back zero.
      if (j < valid) {
        hn::Store(hn::Mul(va, hn::MaskedLoad(hn::FirstN(d, valid - j), d, sp + j)), d, dp + j);
        j += N;
      }
      for (; j < w; j += N) hn::Store(hn::Zero(d), d, dp + j);
      continue;
#else
      for (; j < valid; ++j) dp[j] = alpha * sp[j];
#endif
    } else {
      // What the 4 x 4 blocks left: the last valid % 4 columns (of the last kc % 4 rows: 4 more).
      for (std::size_t j = p < done_p ? done_j : tail_j; j < valid; ++j) dp[j] = alpha * sp[static_cast<std::int64_t>(j) * csb];
    }
    for (std::size_t j = valid; j < w; ++j) dp[j] = 0.0f;
  }
}

// Rows per tile on this target (8 where vectors are 512 bits: the target the gate was measured on).
std::size_t MediumTileRows() { return kMR; }

void SgemmMediumF32(std::size_t m, std::size_t n, std::size_t k, float alpha, const float* HWY_RESTRICT a,
                    std::int64_t rsa, std::int64_t csa, const float* HWY_RESTRICT b, std::int64_t rsb,
                    std::int64_t csb, float beta, float* HWY_RESTRICT c, std::int64_t rsc) {
  const hn::ScalableTag<float> d;
  const std::size_t N = hn::Lanes(d);
  const std::size_t W = kNV * N;
  if (k == 0) {
    for (std::size_t i = 0; i < m; ++i) {
      float* ci = c + static_cast<std::int64_t>(i) * rsc;
      for (std::size_t j = 0; j < n; ++j) ci[j] = beta == 0.0f ? 0.0f : beta * ci[j];
    }
    return;
  }
  // B's micro-panels are read in place where its rows are contiguous, alpha is 1 and the panel
  // is whole vectors of valid columns; the others (the last, partial panel, a transposed or
  // strided B) are packed into the thread's buffer first, kc x W floats.
  float* buf = medium_pack_buffer(kMediumKC * W);
  for (std::size_t pc = 0; pc < k; pc += kMediumKC) {
    const std::size_t kc = std::min(kMediumKC, k - pc);
    const Init init = pc > 0 ? Init::load : (beta == 0.0f ? Init::zero : Init::scaled);
    const float* ak = a + static_cast<std::int64_t>(pc) * csa;
    for (std::size_t j0 = 0; j0 < n; j0 += W) {
      const std::size_t valid = std::min(W, n - j0);
      const std::size_t nv = (valid + N - 1) / N;
      const float* src = b + static_cast<std::int64_t>(pc) * rsb + static_cast<std::int64_t>(j0) * csb;
      const float* bp = src;
      std::int64_t ldb = rsb;
      if (!(csb == 1 && alpha == 1.0f && valid == nv * N)) {
        PackB(d, src, rsb, csb, kc, valid, nv * N, alpha, buf);
        bp = buf;
        ldb = static_cast<std::int64_t>(nv * N);
      }
      float* cj = c + static_cast<std::int64_t>(j0);
      switch (nv) {
        case 1: Panel<1>(d, m, kc, ak, rsa, csa, bp, ldb, cj, rsc, valid, init, beta); break;
        case 2: Panel<2>(d, m, kc, ak, rsa, csa, bp, ldb, cj, rsc, valid, init, beta); break;
        default: Panel<kNV>(d, m, kc, ak, rsa, csa, bp, ldb, cj, rsc, valid, init, beta); break;
      }
    }
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace tensor::cpu::simd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "hwy/aligned_allocator.h"

namespace tensor::cpu::simd {

HWY_EXPORT(SgemmMediumF32);
HWY_EXPORT(MediumTileRows);

bool medium_gemm_live() { return HWY_DYNAMIC_DISPATCH(MediumTileRows)() >= 8; }

float* medium_pack_buffer(std::size_t floats) {
  // Grown to the largest block this thread has packed and kept for the thread's life: no
  // allocation once a thread has run its largest product.
  thread_local hwy::AlignedFreeUniquePtr<float[]> buf;
  thread_local std::size_t capacity = 0;
  if (floats > capacity) {
    const std::size_t want = floats;
    buf = hwy::AllocateAligned<float>(want);
    capacity = want;
  }
  return buf.get();
}

// The gate: single-thread medians against dnnl_sgemm in the same process, interleaved (31
// rounds; tests/cpu/gemm_medium_bench; 2-core AVX-512 EPYC (Zen 4), 2026-12-07, load 1.5-2.1),
// ours / dnnl: the MLP 784-256-10 step's products 64x256x784 0.98, its 2-thread slab 64x64x784
// 0.90, 64x10x256 0.81, 256x10x64 (A^T) 0.75, 64x256x10 (B^T) 0.98-1.03 over five runs,
// 784x256x64 (A^T) 0.99, its slab 98x256x64 0.93; squares 96..256 0.97-1.00 (A^T or B^T at
// 128: 0.99); 256x64x1024 0.89, 300x64x300 0.91, 1000x16x500 (A^T) 0.80; small ones with
// n < 16 (20x12x40, 16x10x100) 0.52-0.70. Left on dnnl_sgemm: a partial last vector of
// columns after whole ones (n = 20, 30 at 100 x n x 300: 1.02-1.03; 33x1000x17 1.02-1.06),
// and products past 256^3 (384^3 1.02-1.04; 512^3 and 64x1024x1024 were 0.91-1.0, not taken:
// dnnl_sgemm's allocation matters less there). General strides (neither of an operand's
// strides 1, which dnnl_sgemm does not take: BLIS then) were not timed.
bool use_medium_gemm(std::size_t m, std::size_t n, std::size_t k, std::int64_t rsa, std::int64_t csa,
                     std::int64_t rsb, std::int64_t csb) {
  // A's layout does not matter to the kernel (broadcasts from A in place); B's is read in place
  // or packed (transposed: 4 x 4 register transposes), both measured even with dnnl_sgemm.
  (void)rsa, (void)csa, (void)rsb, (void)csb;
  // Only where Highway dispatches to 512-bit vectors (8 x 3 tiles): on the AVX2 target (4 x 3
  // tiles, 16 registers) against dnnl_sgemm limited to AVX2 (ONEDNN_MAX_CPU_ISA=AVX2,
  // GEMM_BENCH_AVX2=1, same EPYC, load 3) ours took 0.96-1.32x dnnl's time: the MLP step's
  // 64x256x784 1.16, 784x256x64 (A^T) 1.20, 128^3 1.14, 1000x16x500 (A^T) 1.32.
  if (!medium_gemm_live()) return false;
  const double work = static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  if (work > 256.0 * 256.0 * 256.0) return false;
  // Fewer than 8 rows (a tile's worth) read B for too few rows: dnnl_sgemm's GEMV kernels were
  // faster (same bench, load 1.8): 1x4096x4096 (work = 256^3) 1.53x, 2x2048x2048 1.11x,
  // 1x256x784 1.17x, 4x256x784 1.06x; from 8 rows ours was ahead (8x1024x1024 0.90,
  // 16x1024x1024 0.89, 32x512x1024 0.98).
  if (m < 8) return false;
  // Columns in whole vectors of 16 (AVX-512; also whole vectors of 8 and 4), or a single
  // partial vector (n < 16: the MLP's n = 10); a partial last vector after whole ones lost.
  return n < 16 || n % 16 == 0;
}

void sgemm_medium_f32(std::size_t m, std::size_t n, std::size_t k, float alpha, const float* a, std::int64_t rsa,
                      std::int64_t csa, const float* b, std::int64_t rsb, std::int64_t csb, float beta, float* c,
                      std::int64_t rsc) {
  if (m == 0 || n == 0) return;
  HWY_DYNAMIC_DISPATCH(SgemmMediumF32)(m, n, k, alpha, a, rsa, csa, b, rsb, csb, beta, c, rsc);
}

}  // namespace tensor::cpu::simd
#endif  // HWY_ONCE
