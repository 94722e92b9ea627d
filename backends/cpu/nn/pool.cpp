// Pooling on the CPU: direct window loops per (n, c) plane, planes on parallel_chunks
// (for_items).
#include "backends/cpu/nn/pool.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <utility>

#include "backends/cpu/nn/nn_gemm.hpp"
#include "backends/cpu/pool_hwy.hpp"
#include "backends/cpu/reduce_hwy.hpp"
#include "lib/core/nn_shape.hpp"

namespace tensor::cpu::nn {
namespace {

using I = std::int64_t;

// 2x2 windows at stride 2 without padding or dilation, all inside the input (the usual
// CNN pool): per output row its two input rows, no bounds checks or window loops. Same
// answer as the general loop: the first of equal maxima, a NaN wins over numbers. (An
// integer-key version that GCC could if-convert was not faster.)
bool is_2x2_s2(const Pool2dGeom& g) {
  return g.kernel[0] == 2 && g.kernel[1] == 2 && g.stride[0] == 2 && g.stride[1] == 2 && g.padding[0] == 0 &&
         g.padding[1] == 0 && g.dilation[0] == 1 && g.dilation[1] == 1 && 2 * g.out_h <= g.in_h &&
         2 * g.out_w <= g.in_w;
}

template <class T, class IT>
void max_forward_2x2(const Pool2dGeom& g, const T* x, T* y, IT* indices) {
  const std::size_t W = g.in_w, S = g.in_h * g.in_w, O = g.out_h * g.out_w, ow_n = g.out_w;
  for_items(g.planes, static_cast<double>(4 * O), [&](std::size_t p) {
    for (std::size_t oh = 0; oh < g.out_h; ++oh) {
      const T* __restrict__ r0 = x + p * S + 2 * oh * W;
      const T* __restrict__ r1 = r0 + W;
      T* __restrict__ yr = y + p * O + oh * ow_n;
      const I base = static_cast<I>(2 * oh * W);
      const I w = static_cast<I>(W);
      if (indices) {
        IT* __restrict__ ir = indices + p * O + oh * ow_n;
        for (std::size_t ow = 0; ow < ow_n; ++ow) {
          const std::size_t j = 2 * ow;
          T best = r0[j];
          I idx = base + static_cast<I>(j);
          auto take = [&](T v, I at) {
            const bool c = v > best || (v != v && best == best);
            best = c ? v : best;
            idx = c ? at : idx;
          };
          take(r0[j + 1], base + static_cast<I>(j) + 1);
          take(r1[j], base + w + static_cast<I>(j));
          take(r1[j + 1], base + w + static_cast<I>(j) + 1);
          yr[ow] = best;
          ir[ow] = static_cast<IT>(idx);
        }
      } else if constexpr (std::is_same_v<T, float>) {
        simd::max_pool_2x2_row_f32(r0, r1, yr, ow_n);  // the same rule, vectorized
      } else {
        for (std::size_t ow = 0; ow < ow_n; ++ow) {
          const std::size_t j = 2 * ow;
          T best = r0[j];
          auto take = [&](T v) { best = v > best || (v != v && best == best) ? v : best; };
          take(r0[j + 1]);
          take(r1[j]);
          take(r1[j + 1]);
          yr[ow] = best;
        }
      }
    }
  }, Work::Stream);
}

// The taps kk in [lo, hi) of a window starting at `start` (dilation d, k taps) that land
// inside [0, in): the loops visit only those, so a kernel far larger than the input
// (with padding to match) costs the input's size, not the kernel's.
void tap_range(I start, I d, I k, I in, I& lo, I& hi) {
  lo = start >= 0 ? 0 : -start / d + (-start % d != 0);  // ceil(-start / d), no overflow for d near 2^63
  const I room = in - 1 - start;  // kk * d <= room
  hi = room < 0 ? 0 : std::min(k, room / d + 1);
  if (lo > hi) lo = hi;
}

template <class T, class IT>
void max_forward(const Pool2dGeom& g, const T* x, T* y, IT* indices) {
  if (is_2x2_s2(g)) {
    max_forward_2x2(g, x, y, indices);
    return;
  }
  const I H = static_cast<I>(g.in_h), W = static_cast<I>(g.in_w);
  const std::size_t O = g.out_h * g.out_w;
  for_items(g.planes, static_cast<double>(O * static_cast<std::size_t>(g.kernel[0] * g.kernel[1])),
             [&](std::size_t p) {
               const T* xp = x + p * g.in_h * g.in_w;
               for (std::size_t oh = 0; oh < g.out_h; ++oh)
                 for (std::size_t ow = 0; ow < g.out_w; ++ow) {
                   T best = -std::numeric_limits<T>::infinity();
                   I idx = -1;
                   const I h0 = static_cast<I>(oh) * g.stride[0] - g.padding[0];
                   const I w0 = static_cast<I>(ow) * g.stride[1] - g.padding[1];
                   I kh_lo, kh_hi, kw_lo, kw_hi;
                   tap_range(h0, g.dilation[0], g.kernel[0], H, kh_lo, kh_hi);
                   tap_range(w0, g.dilation[1], g.kernel[1], W, kw_lo, kw_hi);
                   for (I kh = kh_lo; kh < kh_hi; ++kh) {
                     const I ih = h0 + kh * g.dilation[0];
                     for (I kw = kw_lo; kw < kw_hi; ++kw) {
                       const I iw = w0 + kw * g.dilation[1];
                       const T v = xp[ih * W + iw];
                       if (idx < 0 || v > best || (std::isnan(v) && !std::isnan(best))) {
                         best = v;
                         idx = ih * W + iw;
                       }
                     }
                   }
                   const std::size_t o = p * O + oh * g.out_w + ow;
                   y[o] = best;
                   if (indices) indices[o] = static_cast<IT>(idx);
                 }
             }, Work::Stream);
}

// The first index that is neither -1 (a window without a valid tap) nor a tap of its own
// output's window, as (position, value); position -1 when all are. Indices come from
// the user through the public backward, so they are data to check, not to trust.
template <class IT>
std::pair<std::int64_t, std::int64_t> bad_index(const Pool2dGeom& g, const IT* indices) {
  const I H = static_cast<I>(g.in_h), W = static_cast<I>(g.in_w);
  std::size_t at = 0;
  for (std::size_t p = 0; p < g.planes; ++p)
    for (std::size_t oh = 0; oh < g.out_h; ++oh)
      for (std::size_t ow = 0; ow < g.out_w; ++ow, ++at) {
        const I idx = static_cast<I>(indices[at]);
        if (idx == -1) continue;
        bool ok = idx >= 0 && idx < H * W;
        if (ok) {
          const I rh = idx / W - (static_cast<I>(oh) * g.stride[0] - g.padding[0]);
          const I rw = idx % W - (static_cast<I>(ow) * g.stride[1] - g.padding[1]);
          ok = rh >= 0 && rw >= 0 && rh % g.dilation[0] == 0 && rw % g.dilation[1] == 0 &&
               rh / g.dilation[0] < g.kernel[0] && rw / g.dilation[1] < g.kernel[1];
        }
        if (!ok) return {static_cast<std::int64_t>(at), idx};
      }
  return {-1, 0};
}

template <class T, class IT>
void max_backward(const Pool2dGeom& g, const T* dy, const IT* indices, T* dx) {
  const std::size_t O = g.out_h * g.out_w, S = g.in_h * g.in_w;
  for_items(g.planes, static_cast<double>(O + S), [&](std::size_t p) {
    T* dxp = dx + p * S;
    std::fill(dxp, dxp + S, T(0));
    for (std::size_t o = 0; o < O; ++o) {
      const I idx = static_cast<I>(indices[p * O + o]);
      if (idx >= 0) dxp[idx] += dy[p * O + o];
    }
  }, Work::Stream);
}

// The window of output o along one dim: valid input range [lo, hi) and the divisor length.
struct Win {
  I lo, hi, len;
};
Win avg_window(I o, I s, I p, I k, I in, bool cip) {
  const I start = o * s - p;
  const I end = std::min(start + k, in + p);
  const I lo = std::max<I>(start, 0), hi = std::min(end, in);
  return {lo, hi, cip ? end - start : hi - lo};
}

template <class T, bool kBackward>
void avg_impl(const Pool2dGeom& g, const T* in_buf, T* out_buf) {
  const I H = static_cast<I>(g.in_h), W = static_cast<I>(g.in_w);
  const std::size_t O = g.out_h * g.out_w, S = g.in_h * g.in_w;
  for_items(g.planes, static_cast<double>(O * static_cast<std::size_t>(g.kernel[0] * g.kernel[1])),
             [&](std::size_t p) {
               if constexpr (kBackward) std::fill(out_buf + p * S, out_buf + (p + 1) * S, T(0));
               for (std::size_t oh = 0; oh < g.out_h; ++oh) {
                 const Win wh = avg_window(static_cast<I>(oh), g.stride[0], g.padding[0], g.kernel[0], H,
                                           g.count_include_pad);
                 for (std::size_t ow = 0; ow < g.out_w; ++ow) {
                   const Win ww = avg_window(static_cast<I>(ow), g.stride[1], g.padding[1], g.kernel[1], W,
                                             g.count_include_pad);
                   const I div = std::max<I>(wh.len * ww.len, 1);
                   const std::size_t o = p * O + oh * g.out_w + ow;
                   if constexpr (kBackward) {
                     const T v = in_buf[o] / static_cast<T>(div);
                     T* dxp = out_buf + p * S;
                     for (I ih = wh.lo; ih < wh.hi; ++ih)
                       for (I iw = ww.lo; iw < ww.hi; ++iw) dxp[ih * W + iw] += v;
                   } else {
                     const T* xp = in_buf + p * S;
                     T s = 0;
                     for (I ih = wh.lo; ih < wh.hi; ++ih)
                       for (I iw = ww.lo; iw < ww.hi; ++iw) s += xp[ih * W + iw];
                     out_buf[o] = s / static_cast<T>(div);
                   }
                 }
               }
             }, Work::Stream);
}

// Forward outputs per row up to which a row of boxes is summed together (stack arrays).
constexpr std::size_t kAdaptiveRow = 64;
// ... when an input row has at most this many elements (a stack row of partial sums).
constexpr std::size_t kAdaptiveCols = 2048;
// A single-column box spanning at least this many elements per d is summed in double.
constexpr std::size_t kAdaptiveSpan = 64;

template <class T, bool kBackward>
void adaptive_impl(const AdaptiveGeom& g, const T* in_buf, T* out_buf) {
  const std::size_t S = g.in[0] * g.in[1] * g.in[2], O = g.out[0] * g.out[1] * g.out[2];
  auto box = [&](int d, std::size_t i, I& lo, I& hi) {
    lo = tensor::core::adaptive_start(static_cast<I>(i), static_cast<I>(g.in[d]), static_cast<I>(g.out[d]));
    hi = tensor::core::adaptive_end(static_cast<I>(i), static_cast<I>(g.in[d]), static_cast<I>(g.out[d]));
  };
  const I in1 = static_cast<I>(g.in[1]), in2 = static_cast<I>(g.in[2]);
  for_items(g.planes, static_cast<double>(std::max(S, O)), [&](std::size_t p) {
    if constexpr (kBackward) std::fill(out_buf + p * S, out_buf + (p + 1) * S, T(0));
    std::size_t o = p * O;
    for (std::size_t od = 0; od < g.out[0]; ++od) {
      I d0, d1;
      box(0, od, d0, d1);
      for (std::size_t oh = 0; oh < g.out[1]; ++oh) {
        I h0, h1;
        box(1, oh, h0, h1);
        if constexpr (!kBackward) {
          if (g.out[2] == 1 && (h1 - h0) * in2 >= static_cast<I>(kAdaptiveSpan)) {
            // One box over whole input rows (global pooling, or one output column): its
            // rows are one contiguous span per d, summed by the Highway double reduction
            // (several accumulators, instead of one chain of dependent float adds).
            const T* xp = in_buf + p * S;
            double sum = 0;
            for (I d = d0; d < d1; ++d) {
              const T* xr = xp + (d * in1 + h0) * in2;
              const auto len = static_cast<std::size_t>((h1 - h0) * in2);
              if constexpr (std::is_same_v<T, float>) sum += simd::sum_f32(xr, len);
              else sum += simd::sum_f64(xr, len);
            }
            out_buf[o++] = static_cast<T>(sum / static_cast<double>((d1 - d0) * (h1 - h0) * in2));
            continue;
          }
          if (g.out[2] <= kAdaptiveRow && g.in[2] <= kAdaptiveCols) {
            // A whole output row at once: first the box row's input rows are added into
            // one row (vector adds along w), then each box sums its stretch of that row.
            // An 8x8 box costs 8 vector row adds and 8 scalar adds instead of 64
            // dependent scalar adds: 7x7 of [32,64,56,56] 2.4x faster.
            T rowsum[kAdaptiveCols];
            const std::size_t iw_n = g.in[2];
            std::fill(rowsum, rowsum + iw_n, T(0));
            const T* xp = in_buf + p * S;
            for (I d = d0; d < d1; ++d)
              for (I h = h0; h < h1; ++h) {
                const T* __restrict__ xr = xp + (d * in1 + h) * in2;
#if TENSOR_HAVE_OPENMP
#pragma omp simd
#endif
                for (std::size_t w = 0; w < iw_n; ++w) rowsum[w] += xr[w];
              }
            for (std::size_t ow = 0; ow < g.out[2]; ++ow, ++o) {
              I w0, w1;
              box(2, ow, w0, w1);
              T acc = 0;
              for (I w = w0; w < w1; ++w) acc += rowsum[w];
              out_buf[o] = acc / static_cast<T>((d1 - d0) * (h1 - h0) * (w1 - w0));
            }
            continue;
          }
        }
        for (std::size_t ow = 0; ow < g.out[2]; ++ow, ++o) {
          I w0, w1;
          box(2, ow, w0, w1);
          const T cnt = static_cast<T>((d1 - d0) * (h1 - h0) * (w1 - w0));
          if constexpr (kBackward) {
            const T v = in_buf[o] / cnt;
            T* dxp = out_buf + p * S;
            for (I d = d0; d < d1; ++d)
              for (I h = h0; h < h1; ++h)
                for (I w = w0; w < w1; ++w) dxp[(d * in1 + h) * in2 + w] += v;
          } else {
            const T* xp = in_buf + p * S;
            T s = 0;
            for (I d = d0; d < d1; ++d)
              for (I h = h0; h < h1; ++h)
                for (I w = w0; w < w1; ++w) s += xp[(d * in1 + h) * in2 + w];
            out_buf[o] = s / cnt;
          }
        }
      }
    }
  }, Work::Stream);
}

}  // namespace

// Pools of 1 or 2 spatial dims run as 2-d (a 1-d pool has height 1).
Pool2dGeom pool2d_geom(const tensor::core::PoolArgs& a, const Shape& x, tensor::core::Window window) {
  const Shape y = tensor::core::checked_pool_output(x, a, window);
  const std::size_t n = a.rank;
  Pool2dGeom g;
  g.planes = x[0] * x[1];
  g.in_h = n == 2 ? x[2] : 1;
  g.in_w = x[1 + n];
  g.out_h = n == 2 ? y[2] : 1;
  g.out_w = y[1 + n];
  for (std::size_t i = 0; i < n; ++i) {
    g.kernel[2 - n + i] = a.kernel[i];
    g.stride[2 - n + i] = a.stride[i];
    g.padding[2 - n + i] = a.padding[i];
    g.dilation[2 - n + i] = window == tensor::core::Window::Max ? a.dilation[i] : 1;
  }
  g.count_include_pad = a.count_include_pad;
  return g;
}

AdaptiveGeom adaptive_avg_pool_geom(const tensor::core::PoolArgs& a, const Shape& x) {
  const std::size_t n = a.rank;
  AdaptiveGeom g;
  g.planes = x[0] * x[1];
  for (std::size_t i = 0; i < n; ++i) {
    g.in[3 - n + i] = x[2 + i];
    g.out[3 - n + i] = static_cast<std::size_t>(a.output_size[i]);
  }
  return g;
}

#define TENSOR_NN_POOL_TYPED(T)                                                                                \
  void max_pool2d_forward(const Pool2dGeom& g, const T* x, T* y, I* indices) { max_forward(g, x, y, indices); } \
  void max_pool2d_forward(const Pool2dGeom& g, const T* x, T* y, std::int32_t* indices) {                    \
    max_forward(g, x, y, indices);                                                                           \
  }                                                                                                          \
  void max_pool2d_backward(const Pool2dGeom& g, const T* dy, const I* indices, T* dx) {                      \
    max_backward(g, dy, indices, dx);                                                                        \
  }                                                                                                          \
  void max_pool2d_backward(const Pool2dGeom& g, const T* dy, const std::int32_t* indices, T* dx) {           \
    max_backward(g, dy, indices, dx);                                                                        \
  }                                                                                                          \
  void avg_pool2d_forward(const Pool2dGeom& g, const T* x, T* y) { avg_impl<T, false>(g, x, y); }            \
  void avg_pool2d_backward(const Pool2dGeom& g, const T* dy, T* dx) { avg_impl<T, true>(g, dy, dx); }        \
  void adaptive_avg_pool_forward(const AdaptiveGeom& g, const T* x, T* y) { adaptive_impl<T, false>(g, x, y); } \
  void adaptive_avg_pool_backward(const AdaptiveGeom& g, const T* dy, T* dx) {                               \
    adaptive_impl<T, true>(g, dy, dx);                                                                       \
  }

TENSOR_NN_POOL_TYPED(float)
TENSOR_NN_POOL_TYPED(double)
#undef TENSOR_NN_POOL_TYPED

std::pair<std::int64_t, std::int64_t> max_pool2d_bad_index(const Pool2dGeom& g, const std::int64_t* indices) {
  return bad_index(g, indices);
}
std::pair<std::int64_t, std::int64_t> max_pool2d_bad_index(const Pool2dGeom& g, const std::int32_t* indices) {
  return bad_index(g, indices);
}

}  // namespace tensor::cpu::nn
