// Highway kernel of the 2x2 stride-2 max pool's rows (see pool_hwy.hpp), once per target.
#include "backends/cpu/pool_hwy.hpp"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backends/cpu/pool_hwy.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace tensor::cpu::simd {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

template <class D, class V>
HWY_INLINE V Take(D, V best, V v) {
  const auto c = hn::Or(hn::Gt(v, best), hn::AndNot(hn::IsNaN(best), hn::IsNaN(v)));
  return hn::IfThenElse(c, v, best);
}

HWY_INLINE float TakeScalar(float best, float v) { return v > best || (v != v && best == best) ? v : best; }

#if HWY_TARGET != HWY_SCALAR
// Outputs j.. in blocks of d's lane count; returns where it stopped.
template <class D>
HWY_INLINE size_t Blocks(D d, const float* HWY_RESTRICT r0, const float* HWY_RESTRICT r1, float* HWY_RESTRICT y, size_t j,
                         size_t out_w) {
  const size_t N = hn::Lanes(d);
  for (; j + N <= out_w; j += N) {
    const auto a0 = hn::LoadU(d, r0 + 2 * j), a1 = hn::LoadU(d, r0 + 2 * j + N);
    const auto b0 = hn::LoadU(d, r1 + 2 * j), b1 = hn::LoadU(d, r1 + 2 * j + N);
    auto best = hn::ConcatEven(d, a1, a0);  // r0[2j], in output order
    best = Take(d, best, hn::ConcatOdd(d, a1, a0));
    best = Take(d, best, hn::ConcatEven(d, b1, b0));
    best = Take(d, best, hn::ConcatOdd(d, b1, b0));
    hn::StoreU(best, d, y + j);
  }
  return j;
}
#endif

void MaxPool2x2RowF32(const float* HWY_RESTRICT r0, const float* HWY_RESTRICT r1, float* HWY_RESTRICT y, size_t out_w) {
  size_t j = 0;
#if HWY_TARGET != HWY_SCALAR  // one lane: the scalar loop below is the kernel
  // full vectors, then 8 and 4 lanes: a CNN's rows are short (14, 7 outputs)
  j = Blocks(hn::ScalableTag<float>(), r0, r1, y, j, out_w);
  if (hn::Lanes(hn::ScalableTag<float>()) > 8) j = Blocks(hn::CappedTag<float, 8>(), r0, r1, y, j, out_w);
  if (hn::Lanes(hn::ScalableTag<float>()) > 4) j = Blocks(hn::CappedTag<float, 4>(), r0, r1, y, j, out_w);
#endif
  for (; j < out_w; ++j) {
    float best = r0[2 * j];
    best = TakeScalar(best, r0[2 * j + 1]);
    best = TakeScalar(best, r1[2 * j]);
    best = TakeScalar(best, r1[2 * j + 1]);
    y[j] = best;
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace tensor::cpu::simd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace tensor::cpu::simd {

HWY_EXPORT(MaxPool2x2RowF32);

void max_pool_2x2_row_f32(const float* r0, const float* r1, float* y, std::size_t out_w) {
  HWY_DYNAMIC_DISPATCH(MaxPool2x2RowF32)(r0, r1, y, out_w);
}

}  // namespace tensor::cpu::simd
#endif  // HWY_ONCE
