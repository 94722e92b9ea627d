// Highway 2-D transposes for to_contiguous: N x N register tiles (N = vector lanes)
// transposed with log2(N) rounds of ConcatEven/ConcatOdd, compiled once per target.
#include "backends/cpu/layout_hwy.hpp"

#include <algorithm>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backends/cpu/layout_hwy.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/cache_control.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace tensor::cpu::simd {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

template <class T>
HWY_INLINE void TransposeScalar(const T* src, int64_t ss, T* dst, int64_t ds, size_t p0, size_t p1, size_t q0,
                                size_t q1) {
  for (size_t p = p0; p < p1; ++p)
    for (size_t q = q0; q < q1; ++q) dst[static_cast<int64_t>(q) * ds + static_cast<int64_t>(p)] =
        src[static_cast<int64_t>(p) * ss + static_cast<int64_t>(q)];
}

#if HWY_TARGET != HWY_SCALAR
// One round maps (row i, lane j) to (row j0:i>>1, lane i0:j>>1) (low bit to the top);
// after log2(N) rounds row and lane indices have traded places. Rounds alternate between
// two arrays and every loop is unrolled, so the tile stays in registers (with a copy
// back after each round, GCC kept both arrays on the stack: 3x slower in L2).
template <size_t R, class D, class V, class Store>
HWY_INLINE void TileRounds(D d, V* a, V* b, Store&& store) {
  if constexpr (R == 0) {
    store(a);
  } else {
    constexpr size_t N = hn::MaxLanes(D());
    HWY_UNROLL(16)
    for (size_t k = 0; k < N / 2; ++k) {
      b[k] = hn::ConcatEven(d, a[2 * k + 1], a[2 * k]);
      b[k + N / 2] = hn::ConcatOdd(d, a[2 * k + 1], a[2 * k]);
    }
    TileRounds<R - 1>(d, b, a, store);
  }
}

constexpr size_t Log2(size_t n) { return n <= 1 ? 0 : 1 + Log2(n / 2); }

// One block of whole N x N register tiles: rows [p0, p1) x cols [q0, q1), multiples of N.
template <class D, class T = hn::TFromD<D>>
HWY_INLINE void TransposeBlock(D d, const T* src, int64_t ss, T* dst, int64_t ds, size_t p0, size_t p1, size_t q0,
                               size_t q1, bool stream) {
  constexpr size_t N = hn::MaxLanes(D());
  using V = hn::Vec<D>;
  for (size_t p = p0; p < p1; p += N) {
    for (size_t q = q0; q < q1; q += N) {
      V v[N], w[N];
      HWY_UNROLL(16)
      for (size_t r = 0; r < N; ++r) v[r] = hn::LoadU(d, src + static_cast<int64_t>(p + r) * ss + static_cast<int64_t>(q));
      T* out = dst + static_cast<int64_t>(q) * ds + static_cast<int64_t>(p);
      TileRounds<Log2(N)>(d, v, w, [&](const V* t) HWY_ATTR {
        if (stream) {
          HWY_UNROLL(16)
          for (size_t r = 0; r < N; ++r) hn::Stream(t[r], d, out + static_cast<int64_t>(r) * ds);
        } else {
          HWY_UNROLL(16)
          for (size_t r = 0; r < N; ++r) hn::StoreU(t[r], d, out + static_cast<int64_t>(r) * ds);
        }
      });
    }
  }
}
#endif

// Register tiles grouped into cache blocks of kBlockBytes x kBlockBytes (64 x 64 f32):
// a block's source rows and destination rows (16 KiB each) stay in L1 while its tiles
// are moved, and the destination is written a whole cache line per row at a time.
// (One strip of N source rows across every column instead touches a destination page
// per row and runs several times slower than a copy.)
template <class T>
HWY_INLINE void TransposeTiles(const T* src, int64_t ss, T* dst, int64_t ds, size_t rows, size_t cols, bool big) {
#if HWY_TARGET == HWY_SCALAR  // one lane, and no ConcatEven/ConcatOdd
  (void)big;
  TransposeScalar(src, ss, dst, ds, 0, rows, 0, cols);
#else
  const hn::ScalableTag<T> d;
  constexpr size_t N = hn::MaxLanes(d);
  constexpr size_t kBlock = 256 / sizeof(T) > N ? 256 / sizeof(T) / N * N : N;
  const size_t pr = rows / N * N, qr = cols / N * N;
  // A large destination (`big`: the whole transpose this call is part of) is written
  // with non-temporal stores (no read for ownership of lines that are overwritten
  // whole), when every tile row is vector-aligned.
  const bool stream = big && ds % static_cast<int64_t>(N) == 0 && reinterpret_cast<uintptr_t>(dst) % (N * sizeof(T)) == 0;
  for (size_t pb = 0; pb < pr; pb += kBlock) {
    const size_t pe = pb + kBlock < pr ? pb + kBlock : pr;
    for (size_t qb = 0; qb < qr; qb += kBlock) {
      const size_t qe = qb + kBlock < qr ? qb + kBlock : qr;
      TransposeBlock(d, src, ss, dst, ds, pb, pe, qb, qe, stream);
    }
    TransposeScalar(src, ss, dst, ds, pb, pe, qr, cols);
  }
  if (stream) hwy::FlushStream();
  TransposeScalar(src, ss, dst, ds, pr, rows, 0, cols);
#endif
}

void TransposeU32(const uint32_t* src, int64_t ss, uint32_t* dst, int64_t ds, size_t rows, size_t cols, bool big) {
  TransposeTiles(src, ss, dst, ds, rows, cols, big);
}
void TransposeU64(const uint64_t* src, int64_t ss, uint64_t* dst, int64_t ds, size_t rows, size_t cols, bool big) {
  TransposeTiles(src, ss, dst, ds, rows, cols, big);
}

}  // namespace HWY_NAMESPACE
}  // namespace tensor::cpu::simd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace tensor::cpu::simd {

HWY_EXPORT(TransposeU32);
HWY_EXPORT(TransposeU64);

namespace {
// Destinations from this size up (the whole transpose, of which a call may be one band)
// are written with streaming stores: 16 MiB, half the L3 of a common desktop part. On the
// 2-core VM a 4096^2 f32 transpose split in 8 MiB bands on two threads took 3.3x a copy
// with cached stores and about 1x with streaming ones (the rule was per band before).
constexpr std::size_t kStreamBytes = std::size_t{16} << 20;
bool big(std::size_t rows, std::size_t cols, std::size_t e, std::size_t whole) {
  return std::max(whole, rows * cols * e) >= kStreamBytes;
}
}  // namespace

void transpose_u32(const std::uint32_t* src, std::int64_t ss, std::uint32_t* dst, std::int64_t ds, std::size_t rows,
                   std::size_t cols, std::size_t whole_bytes) {
  HWY_DYNAMIC_DISPATCH(TransposeU32)(src, ss, dst, ds, rows, cols, big(rows, cols, 4, whole_bytes));
}
void transpose_u64(const std::uint64_t* src, std::int64_t ss, std::uint64_t* dst, std::int64_t ds, std::size_t rows,
                   std::size_t cols, std::size_t whole_bytes) {
  HWY_DYNAMIC_DISPATCH(TransposeU64)(src, ss, dst, ds, rows, cols, big(rows, cols, 8, whole_bytes));
}

}  // namespace tensor::cpu::simd
#endif  // HWY_ONCE
