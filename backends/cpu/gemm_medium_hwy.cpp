// Highway kernel of medium f32 products (see gemm_medium_hwy.hpp), once per target.
//
// Layout: B's block [kc x nc] is packed (times alpha) into micro-panels of kNV vectors of
// columns (the last one narrower, zero-padded to whole vectors), each kc rows of its width
// contiguous. For every micro-panel, tiles of kMR rows of c run a kMR x kNV block of
// accumulators over the kc rows: each step broadcasts one element of A per row (A read in
// place, any strides) and loads the panel's vectors once for all rows. Columns past n are
// computed on the zero padding and never stored (a partial vector goes through the stack), so
// n = 10 runs one vector per row, not ten lanes one at a time.
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

template <class D>
HWY_INLINE hn::Vec<D> LoadCols(D d, const float* p, std::size_t cols) {
  const std::size_t N = hn::Lanes(d);
  if (cols >= N) return hn::LoadU(d, p);
  HWY_ALIGN float tmp[HWY_MAX_BYTES / sizeof(float)] = {};
  std::memcpy(tmp, p, cols * sizeof(float));
  return hn::Load(d, tmp);
}

// Stores the first `cols` lanes (all when cols >= N); a partial vector goes through the stack,
// so nothing past column n is read or written (a neighbouring slab's columns on another thread).
template <class D>
HWY_INLINE void StoreCols(D d, hn::Vec<D> v, float* p, std::size_t cols) {
  const std::size_t N = hn::Lanes(d);
  if (cols >= N) {
    hn::StoreU(v, d, p);
    return;
  }
  HWY_ALIGN float tmp[HWY_MAX_BYTES / sizeof(float)];
  hn::Store(v, d, tmp);
  std::memcpy(p, tmp, cols * sizeof(float));
}

// One tile: MR rows of c from row pointer a (rows rsa apart, k csa apart) times the packed
// micro-panel bp (kc rows of NV * N floats, ldb apart: packed, or B itself); `cols` valid
// columns of the panel.
template <std::size_t MR, std::size_t NV, class D>
HWY_INLINE void Tile(D d, std::size_t kc, const float* HWY_RESTRICT a, std::int64_t rsa, std::int64_t csa,
                     const float* HWY_RESTRICT bp, std::int64_t ldb, float* HWY_RESTRICT c, std::int64_t rsc, std::size_t cols, Init init,
                     float beta) {
  using V = hn::Vec<D>;
  const std::size_t N = hn::Lanes(d);
  V acc[MR][NV];
  // The loops over the tile are unrolled (constant indices) so that acc stays in registers.
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
        const std::size_t c0 = v * N;
        const float* cr = c + static_cast<std::int64_t>(r) * rsc + static_cast<std::int64_t>(c0);
        const V cv = cols >= c0 + N ? hn::LoadU(d, cr) : c0 < cols ? LoadCols(d, cr, cols - c0) : hn::Zero(d);
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
  if (cols >= NV * N) {
#pragma GCC unroll 8
    for (std::size_t r = 0; r < MR; ++r)
#pragma GCC unroll 4
      for (std::size_t v = 0; v < NV; ++v)
        hn::StoreU(acc[r][v], d, c + static_cast<std::int64_t>(r) * rsc + static_cast<std::int64_t>(v * N));
    return;
  }
#pragma GCC unroll 8
  for (std::size_t r = 0; r < MR; ++r)
#pragma GCC unroll 4
    for (std::size_t v = 0; v < NV; ++v) {
      const std::size_t c0 = v * N;
      if (c0 < cols)
        StoreCols(d, acc[r][v], c + static_cast<std::int64_t>(r) * rsc + static_cast<std::int64_t>(c0), cols - c0);
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
  for (; i + kMR <= m; i += kMR) Tile<kMR, NV>(d, kc, at(i), rsa, csa, bp, ldb, ct(i), rsc, cols, init, beta);
  if constexpr (kMR > 4) {
    if (i + 4 <= m) {
      Tile<4, NV>(d, kc, at(i), rsa, csa, bp, ldb, ct(i), rsc, cols, init, beta);
      i += 4;
    }
  }
  if (i + 2 <= m) {
    Tile<2, NV>(d, kc, at(i), rsa, csa, bp, ldb, ct(i), rsc, cols, init, beta);
    i += 2;
  }
  if (i < m) Tile<1, NV>(d, kc, at(i), rsa, csa, bp, ldb, ct(i), rsc, cols, init, beta);
}

// Packs B's [kc x valid] block at src (rows rsb apart, columns csb apart) times alpha into
// dst, kc rows of w floats (columns valid..w-1 zero).
HWY_INLINE void PackB(const float* src, std::int64_t rsb, std::int64_t csb, std::size_t kc, std::size_t valid,
                      std::size_t w, float alpha, float* HWY_RESTRICT dst) {
  for (std::size_t p = 0; p < kc; ++p) {
    const float* sp = src + static_cast<std::int64_t>(p) * rsb;
    float* dp = dst + p * w;
    if (csb == 1) {
      for (std::size_t j = 0; j < valid; ++j) dp[j] = alpha * sp[j];
    } else {
      for (std::size_t j = 0; j < valid; ++j) dp[j] = alpha * sp[static_cast<std::int64_t>(j) * csb];
    }
    for (std::size_t j = valid; j < w; ++j) dp[j] = 0.0f;
  }
}

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
        PackB(src, rsb, csb, kc, valid, nv * N, alpha, buf);
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

bool use_medium_gemm(std::size_t m, std::size_t n, std::size_t k, std::int64_t rsa, std::int64_t csa,
                     std::int64_t rsb, std::int64_t csb) {
  (void)rsa, (void)csa, (void)rsb, (void)csb;
  const double work = static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  return work <= 1024.0 * 256.0 * 1024.0 && m <= 1024 && n <= 1024;
}

void sgemm_medium_f32(std::size_t m, std::size_t n, std::size_t k, float alpha, const float* a, std::int64_t rsa,
                      std::int64_t csa, const float* b, std::int64_t rsb, std::int64_t csb, float beta, float* c,
                      std::int64_t rsc) {
  if (m == 0 || n == 0) return;
  HWY_DYNAMIC_DISPATCH(SgemmMediumF32)(m, n, k, alpha, a, rsa, csa, b, rsb, csb, beta, c, rsc);
}

}  // namespace tensor::cpu::simd
#endif  // HWY_ONCE
