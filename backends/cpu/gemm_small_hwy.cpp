// Highway kernel of small f32 products (see gemm_small_hwy.hpp), once per target.
#include "backends/cpu/gemm_small_hwy.hpp"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backends/cpu/gemm_small_hwy.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace tensor::cpu::simd {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Columns j.. of c in blocks of d's lane count, 4 rows at a time (4 independent FMA chains
// sharing each load of b), then single rows; returns the first column not done. b is
// row-major with row stride rsb.
template <class D>
HWY_INLINE size_t Columns(D d, size_t m, size_t n, size_t k, const float* HWY_RESTRICT a, int64_t rsa, int64_t csa,
                          const float* HWY_RESTRICT b, int64_t rsb, float* HWY_RESTRICT c, int64_t rsc, size_t j) {
  const size_t N = hn::Lanes(d);
  for (; j + N <= n; j += N) {
    size_t i = 0;
    for (; i + 4 <= m; i += 4) {
      const float* a0 = a + static_cast<int64_t>(i) * rsa;
      const float* a1 = a0 + rsa;
      const float* a2 = a1 + rsa;
      const float* a3 = a2 + rsa;
      auto c0 = hn::Zero(d), c1 = hn::Zero(d), c2 = hn::Zero(d), c3 = hn::Zero(d);
      for (size_t p = 0; p < k; ++p) {
        const int64_t o = static_cast<int64_t>(p) * csa;
        const auto bv = hn::LoadU(d, b + static_cast<int64_t>(p) * rsb + static_cast<int64_t>(j));
        c0 = hn::MulAdd(hn::Set(d, a0[o]), bv, c0);
        c1 = hn::MulAdd(hn::Set(d, a1[o]), bv, c1);
        c2 = hn::MulAdd(hn::Set(d, a2[o]), bv, c2);
        c3 = hn::MulAdd(hn::Set(d, a3[o]), bv, c3);
      }
      float* ci = c + static_cast<int64_t>(i) * rsc + static_cast<int64_t>(j);
      hn::StoreU(c0, d, ci);
      hn::StoreU(c1, d, ci + rsc);
      hn::StoreU(c2, d, ci + 2 * rsc);
      hn::StoreU(c3, d, ci + 3 * rsc);
    }
    for (; i < m; ++i) {
      const float* ai = a + static_cast<int64_t>(i) * rsa;
      auto acc = hn::Zero(d);
      for (size_t p = 0; p < k; ++p)
        acc = hn::MulAdd(hn::Set(d, ai[static_cast<int64_t>(p) * csa]),
                         hn::LoadU(d, b + static_cast<int64_t>(p) * rsb + static_cast<int64_t>(j)), acc);
      hn::StoreU(acc, d, c + static_cast<int64_t>(i) * rsc + static_cast<int64_t>(j));
    }
  }
  return j;
}

void SgemmSmallF32(size_t m, size_t n, size_t k, const float* HWY_RESTRICT a, int64_t rsa, int64_t csa,
                   const float* HWY_RESTRICT b, int64_t rsb, float* HWY_RESTRICT c, int64_t rsc) {
  const hn::ScalableTag<float> d;
  size_t j = Columns(d, m, n, k, a, rsa, csa, b, rsb, c, rsc, 0);
  // Narrower blocks for the last columns: the products this route takes are narrow (4, 16).
  if (hn::Lanes(d) > 8) j = Columns(hn::CappedTag<float, 8>(), m, n, k, a, rsa, csa, b, rsb, c, rsc, j);
  if (hn::Lanes(d) > 4) j = Columns(hn::CappedTag<float, 4>(), m, n, k, a, rsa, csa, b, rsb, c, rsc, j);
  // The last 1-3 columns one lane at a time (a one-lane vector: still the target's FMA, where
  // std::fma would be a libm call on targets without one).
  Columns(hn::CappedTag<float, 1>(), m, n, k, a, rsa, csa, b, rsb, c, rsc, j);
}

}  // namespace HWY_NAMESPACE
}  // namespace tensor::cpu::simd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace tensor::cpu::simd {

HWY_EXPORT(SgemmSmallF32);

void sgemm_small_f32(std::size_t m, std::size_t n, std::size_t k, const float* a, std::int64_t rsa, std::int64_t csa,
                     const float* b, std::int64_t rsb, std::int64_t csb, float* c, std::int64_t rsc) {
  if (csb != 1 && n > 1) {
    // B's rows are strided (a transposed weight): copied row-major to the stack, so the
    // kernel loads whole vectors of a row (k * n <= kSmallGemmMaxKN, checked by the caller).
    // With n == 1 the kernel reads only b[p * rsb] (its scalar tail), so b is taken as it is.
    alignas(64) float packed[kSmallGemmMaxKN];
    for (std::size_t p = 0; p < k; ++p)
      for (std::size_t j = 0; j < n; ++j)
        packed[p * n + j] = b[static_cast<std::int64_t>(p) * rsb + static_cast<std::int64_t>(j) * csb];
    HWY_DYNAMIC_DISPATCH(SgemmSmallF32)(m, n, k, a, rsa, csa, packed, static_cast<std::int64_t>(n), c, rsc);
    return;
  }
  HWY_DYNAMIC_DISPATCH(SgemmSmallF32)(m, n, k, a, rsa, csa, b, rsb, c, rsc);
}

}  // namespace tensor::cpu::simd
#endif  // HWY_ONCE
