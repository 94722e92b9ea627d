// gemm_bf16: see matmul_bf16.hpp. Layout of the packed operands:
//   A: rows padded to a multiple of kMr, k padded to even (zeros), in groups of kMr
//      rows: for each k pair p, kMr words (a[i][2p], a[i][2p+1]) side by side, one
//      32-bit word to broadcast per row (no 4 KiB-strided rows to alias in L1);
//   B: panels of kNr columns; in a panel, for each k pair p, kNr words holding
//      (b[2p][j], b[2p+1][j]), i.e. the vdpbf16ps operand layout.
// The f32 result is accumulated in a padded buffer over blocks of kKc pairs and
// rounded to bf16 once at the end. Work is split into (row block, column group)
// tiles on parallel_chunks (no barrier on a descheduled helper).
#include "backends/cpu/matmul_bf16.hpp"

#include <algorithm>
#include <cstring>
#include <memory>
#include <new>
#include <vector>

#include "backends/cpu/parallel.hpp"
#include "tensor/half.hpp"

#if defined(__x86_64__) && defined(__GNUC__)
#define TENSOR_BF16_DOT 1
#include <immintrin.h>
#else
#define TENSOR_BF16_DOT 0
#endif

namespace tensor::cpu {

#if TENSOR_BF16_DOT
namespace {

constexpr std::size_t kMr = 6;    // rows per micro-tile
constexpr std::size_t kNr = 32;   // columns per micro-tile (two 16-lane f32 vectors)
constexpr std::size_t kKc = 128;  // k pairs per block: a 32-column B block is 16 KiB
constexpr std::size_t kMc = 96;   // rows per tile (multiple of kMr): an A block is 48 KiB
constexpr std::size_t kPanelsPerTile = 4;

struct AlignedFree {
  void operator()(void* p) const { ::operator delete(p, std::align_val_t{64}); }
};
template <class T>
std::unique_ptr<T[], AlignedFree> aligned(std::size_t n) {
  return std::unique_ptr<T[], AlignedFree>(static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t{64})));
}

// c[kMr x kNr] (row stride ldc) += a group block . b panel block.
__attribute__((target("avx512f,avx512bw,avx512bf16"))) void micro(std::size_t pairs, const std::uint32_t* a,
                                                                       const std::uint32_t* b, float* c,
                                                                       std::size_t ldc) {
  // Fully unrolled so that the 12 accumulators stay in registers.
  __m512 acc[kMr][2];
#pragma GCC unroll 6
  for (std::size_t r = 0; r < kMr; ++r) {
    acc[r][0] = _mm512_loadu_ps(c + r * ldc);
    acc[r][1] = _mm512_loadu_ps(c + r * ldc + 16);
  }
  for (std::size_t p = 0; p < pairs; ++p) {
    const __m512bh b0 = (__m512bh)_mm512_load_si512(b + p * kNr);
    const __m512bh b1 = (__m512bh)_mm512_load_si512(b + p * kNr + 16);
#pragma GCC unroll 6
    for (std::size_t r = 0; r < kMr; ++r) {
      const __m512bh av = (__m512bh)_mm512_set1_epi32(static_cast<int>(a[p * kMr + r]));
      acc[r][0] = _mm512_dpbf16_ps(acc[r][0], av, b0);
      acc[r][1] = _mm512_dpbf16_ps(acc[r][1], av, b1);
    }
  }
#pragma GCC unroll 6
  for (std::size_t r = 0; r < kMr; ++r) {
    _mm512_storeu_ps(c + r * ldc, acc[r][0]);
    _mm512_storeu_ps(c + r * ldc + 16, acc[r][1]);
  }
}

}  // namespace

bool bf16_dot_live() {
  static const bool live = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                           __builtin_cpu_supports("avx512bf16");
  return live;
}

void gemm_bf16(std::size_t m, std::size_t n, std::size_t k, const std::uint16_t* a, std::int64_t rsa, std::int64_t csa,
               const std::uint16_t* b, std::int64_t rsb, std::int64_t csb, std::uint16_t* c, std::int64_t rsc,
               std::int64_t csc) {
  const std::size_t kp = (k + 1) / 2;               // k pairs
  const std::size_t mp = (m + kMr - 1) / kMr * kMr;  // padded rows
  const std::size_t panels = (n + kNr - 1) / kNr;
  const std::size_t np = panels * kNr;
  const auto at = [](const std::uint16_t* base, std::int64_t i, std::int64_t rs, std::int64_t j, std::int64_t cs) {
    return base[i * rs + j * cs];
  };

  // Pack A: mp x (2 kp) halves, as mp x kp words.
  auto ap = aligned<std::uint32_t>(mp * kp);
  auto bp = aligned<std::uint32_t>(panels * kp * kNr);
  auto cf = aligned<float>(mp * np);
  {
    auto pack = [&](std::size_t chunk) {
      if (chunk == 0) {
        for (std::size_t i = 0; i < mp; ++i) {
          std::uint32_t* row = ap.get() + (i / kMr) * kMr * kp + i % kMr;
          for (std::size_t p = 0; p < kp; ++p) {
            std::uint32_t lo = 0, hi = 0;
            if (i < m) {
              const auto ii = static_cast<std::int64_t>(i), kk = static_cast<std::int64_t>(2 * p);
              lo = at(a, ii, rsa, kk, csa);
              if (2 * p + 1 < k) hi = at(a, ii, rsa, kk + 1, csa);
            }
            row[p * kMr] = lo | (hi << 16);
          }
        }
      } else {
        const std::size_t jp = chunk - 1;
        std::uint32_t* panel = bp.get() + jp * kp * kNr;
        for (std::size_t p = 0; p < kp; ++p) {
          const auto kk = static_cast<std::int64_t>(2 * p);
          for (std::size_t jj = 0; jj < kNr; ++jj) {
            const std::size_t j = jp * kNr + jj;
            std::uint32_t lo = 0, hi = 0;
            if (j < n) {
              lo = at(b, kk, rsb, static_cast<std::int64_t>(j), csb);
              if (2 * p + 1 < k) hi = at(b, kk + 1, rsb, static_cast<std::int64_t>(j), csb);
            }
            panel[p * kNr + jj] = lo | (hi << 16);
          }
        }
      }
    };
    parallel_chunks(1 + panels, pack);
  }

  const std::size_t row_blocks = (mp + kMc - 1) / kMc;
  const std::size_t col_groups = (panels + kPanelsPerTile - 1) / kPanelsPerTile;
  auto tile = [&](std::size_t t) {
    const std::size_t i0 = (t / col_groups) * kMc, i1 = std::min(mp, i0 + kMc);
    const std::size_t g0 = (t % col_groups) * kPanelsPerTile, g1 = std::min(panels, g0 + kPanelsPerTile);
    for (std::size_t i = i0; i < i1; ++i) std::memset(cf.get() + i * np + g0 * kNr, 0, (g1 - g0) * kNr * sizeof(float));
    for (std::size_t p0 = 0; p0 < kp; p0 += kKc) {
      const std::size_t pairs = std::min(kKc, kp - p0);
      for (std::size_t jp = g0; jp < g1; ++jp) {
        const std::uint32_t* bb = bp.get() + jp * kp * kNr + p0 * kNr;
        for (std::size_t i = i0; i < i1; i += kMr)
          micro(pairs, ap.get() + i * kp + p0 * kMr, bb, cf.get() + i * np + jp * kNr, np);
      }
    }
    // Round once to bf16 into c.
    const std::size_t j0 = g0 * kNr, j1 = std::min(n, g1 * kNr);
    for (std::size_t i = i0; i < std::min(i1, m); ++i) {
      const float* src = cf.get() + i * np;
      std::uint16_t* dst = c + static_cast<std::int64_t>(i) * rsc;
      for (std::size_t j = j0; j < j1; ++j) dst[static_cast<std::int64_t>(j) * csc] = bf16::from_float(src[j]);
    }
  };
  parallel_chunks(row_blocks * col_groups, tile);
}

#else

bool bf16_dot_live() { return false; }

void gemm_bf16(std::size_t, std::size_t, std::size_t, const std::uint16_t*, std::int64_t, std::int64_t,
               const std::uint16_t*, std::int64_t, std::int64_t, std::uint16_t*, std::int64_t, std::int64_t) {}

#endif

}  // namespace tensor::cpu
