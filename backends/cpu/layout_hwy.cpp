// Highway 2-D transposes for to_contiguous: N x N register tiles (N = vector lanes)
// transposed with log2(N) rounds of ConcatEven/ConcatOdd, compiled once per target.
#include "backends/cpu/layout_hwy.hpp"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backends/cpu/layout_hwy.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
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

template <class T>
HWY_INLINE void TransposeTiles(const T* src, int64_t ss, T* dst, int64_t ds, size_t rows, size_t cols) {
#if HWY_TARGET == HWY_SCALAR  // one lane, and no ConcatEven/ConcatOdd
  TransposeScalar(src, ss, dst, ds, 0, rows, 0, cols);
#else
  const hn::ScalableTag<T> d;
  constexpr size_t N = hn::MaxLanes(d);
  {
    using V = hn::Vec<decltype(d)>;
    const size_t pr = rows / N * N, qr = cols / N * N;
    for (size_t p = 0; p < pr; p += N) {
      for (size_t q = 0; q < qr; q += N) {
        V v[N], w[N];
        for (size_t r = 0; r < N; ++r) v[r] = hn::LoadU(d, src + static_cast<int64_t>(p + r) * ss + static_cast<int64_t>(q));
        // One round maps (row i, lane j) to (row j0:i>>1, lane i0:j>>1) (low bit to the
        // top); after log2(N) rounds row and lane indices have traded places.
        for (size_t n = N; n > 1; n /= 2) {
          for (size_t k = 0; k < N / 2; ++k) {
            w[k] = hn::ConcatEven(d, v[2 * k + 1], v[2 * k]);
            w[k + N / 2] = hn::ConcatOdd(d, v[2 * k + 1], v[2 * k]);
          }
          for (size_t r = 0; r < N; ++r) v[r] = w[r];
        }
        for (size_t r = 0; r < N; ++r) hn::StoreU(v[r], d, dst + static_cast<int64_t>(q + r) * ds + static_cast<int64_t>(p));
      }
      TransposeScalar(src, ss, dst, ds, p, p + N, qr, cols);
    }
    TransposeScalar(src, ss, dst, ds, pr, rows, 0, cols);
  }
#endif
}

void TransposeU32(const uint32_t* src, int64_t ss, uint32_t* dst, int64_t ds, size_t rows, size_t cols) {
  TransposeTiles(src, ss, dst, ds, rows, cols);
}
void TransposeU64(const uint64_t* src, int64_t ss, uint64_t* dst, int64_t ds, size_t rows, size_t cols) {
  TransposeTiles(src, ss, dst, ds, rows, cols);
}

}  // namespace HWY_NAMESPACE
}  // namespace tensor::cpu::simd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace tensor::cpu::simd {

HWY_EXPORT(TransposeU32);
HWY_EXPORT(TransposeU64);

void transpose_u32(const std::uint32_t* src, std::int64_t ss, std::uint32_t* dst, std::int64_t ds, std::size_t rows,
                   std::size_t cols) {
  HWY_DYNAMIC_DISPATCH(TransposeU32)(src, ss, dst, ds, rows, cols);
}
void transpose_u64(const std::uint64_t* src, std::int64_t ss, std::uint64_t* dst, std::int64_t ds, std::size_t rows,
                   std::size_t cols) {
  HWY_DYNAMIC_DISPATCH(TransposeU64)(src, ss, dst, ds, rows, cols);
}

}  // namespace tensor::cpu::simd
#endif  // HWY_ONCE
