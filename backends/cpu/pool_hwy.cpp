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

// The max of output j's 2x2 window (rows r0, r1), in the pooling rule's order.
HWY_INLINE float WindowMax(const float* HWY_RESTRICT r0, const float* HWY_RESTRICT r1, size_t j) {
  float best = r0[2 * j];
  best = TakeScalar(best, r0[2 * j + 1]);
  best = TakeScalar(best, r1[2 * j]);
  best = TakeScalar(best, r1[2 * j + 1]);
  return best;
}

#if HWY_TARGET != HWY_SCALAR
// The maxes of d's lane count of windows from r0[0], r1[0] (loads cover 2N inputs of each row).
template <class D>
HWY_INLINE hn::Vec<D> WindowMaxes(D d, const float* HWY_RESTRICT r0, const float* HWY_RESTRICT r1) {
  const size_t N = hn::Lanes(d);
  const auto a0 = hn::LoadU(d, r0), a1 = hn::LoadU(d, r0 + N);
  const auto b0 = hn::LoadU(d, r1), b1 = hn::LoadU(d, r1 + N);
  auto best = hn::ConcatEven(d, a1, a0);  // r0[2j], in output order
  best = Take(d, best, hn::ConcatOdd(d, a1, a0));
  best = Take(d, best, hn::ConcatEven(d, b1, b0));
  return Take(d, best, hn::ConcatOdd(d, b1, b0));
}

// Outputs j.. in blocks of d's lane count; returns where it stopped.
template <class D>
HWY_INLINE size_t Blocks(D d, const float* HWY_RESTRICT r0, const float* HWY_RESTRICT r1, float* HWY_RESTRICT y, size_t j,
                         size_t out_w) {
  const size_t N = hn::Lanes(d);
  for (; j + N <= out_w; j += N) hn::StoreU(WindowMaxes(d, r0 + 2 * j, r1 + 2 * j), d, y + j);
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
  for (; j < out_w; ++j) y[j] = WindowMax(r0, r1, j);
}

#if HWY_TARGET != HWY_SCALAR
// One window row of outputs [j, j + lanes) of max_pool_2x2_relu_rows_f32 (lanes <= N; the
// loads cover 2N inputs of each row, within the caller's slack).
template <class D>
HWY_INLINE void PoolReluBlock(D d, const float* HWY_RESTRICT r0, const float* HWY_RESTRICT r1, float* HWY_RESTRICT y,
                              size_t lanes) {
  const size_t N = hn::Lanes(d);
  auto best = WindowMaxes(d, r0, r1);
  const auto zero = hn::Zero(d);
  best = hn::IfThenElse(hn::Le(best, zero), zero, best);
  if (lanes >= N) {
    hn::StoreU(best, d, y);
  } else {
    hn::BlendedStore(best, hn::FirstN(d, lanes), d, y);
  }
}

#endif

void MaxPool2x2ReluRowsF32(const float* HWY_RESTRICT x, size_t channels, size_t in_w, float* HWY_RESTRICT y,
                           size_t y_stride) {
  const size_t out_w = in_w / 2;
#if HWY_TARGET == HWY_SCALAR
  for (size_t c = 0; c < channels; ++c) {
    const float* r0 = x + c * 2 * in_w;
    const float* r1 = r0 + in_w;
    for (size_t j = 0; j < out_w; ++j) {
      const float best = WindowMax(r0, r1, j);
      y[c * y_stride + j] = best <= 0.0f ? 0.0f : best;
    }
  }
#else
  // at most 16 lanes: two vectors of each row stay within kPoolRowsSlack
  const hn::CappedTag<float, kPoolRowsSlack / 2> d;
  const size_t N = hn::Lanes(d);
  for (size_t c = 0; c < channels; ++c) {
    const float* r0 = x + c * 2 * in_w;
    const float* r1 = r0 + in_w;
    float* yc = y + c * y_stride;
    for (size_t j = 0; j < out_w; j += N) PoolReluBlock(d, r0 + 2 * j, r1 + 2 * j, yc + j, out_w - j);
  }
#endif
}

}  // namespace HWY_NAMESPACE
}  // namespace tensor::cpu::simd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace tensor::cpu::simd {

HWY_EXPORT(MaxPool2x2RowF32);
HWY_EXPORT(MaxPool2x2ReluRowsF32);

void max_pool_2x2_relu_rows_f32(const float* x, std::size_t channels, std::size_t in_w, float* y, std::size_t y_stride) {
  HWY_DYNAMIC_DISPATCH(MaxPool2x2ReluRowsF32)(x, channels, in_w, y, y_stride);
}

void max_pool_2x2_row_f32(const float* r0, const float* r1, float* y, std::size_t out_w) {
  HWY_DYNAMIC_DISPATCH(MaxPool2x2RowF32)(r0, r1, y, out_w);
}

}  // namespace tensor::cpu::simd
#endif  // HWY_ONCE
