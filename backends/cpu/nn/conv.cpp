// Convolution and transposed convolution on the CPU: im2col (or the input itself for a
// 1x1 stride-1 unpadded kernel) + one gemm per (sample, group); col2im for the input
// gradient; direct row loops for depthwise kernels; wide f32 2-d convolutions (forward and
// both gradients) on oneDNN's primitives where it has AVX-512 kernels (conv_onednn.hpp).
// Above 64^3 multiply-adds, samples run on parallel_chunks with BLIS single-threaded when
// there are at least as many samples as threads, else each gemm is cut into single-threaded
// BLIS slabs on parallel_chunks (as matmul.cpp; never OpenMP regions or BLIS's own threads,
// whose barriers wait a whole time slice for a descheduled thread on a shared machine, see
// parallel.hpp). Results do not depend on the thread count: every output element is
// computed by one fixed sequence of operations, and the weight gradient sums fixed sample
// ranges in a fixed order.
#include "backends/cpu/nn/conv.hpp"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "backends/cpu/conv_hwy.hpp"
#include "backends/cpu/nn/conv_direct.hpp"
#include "backends/cpu/nn/conv_gemm_pool.hpp"
#include "backends/cpu/nn/conv_onednn.hpp"
#include "backends/cpu/nn/nn_gemm.hpp"
#include "backends/cpu/parallel.hpp"
#include "lib/core/nn_shape.hpp"

namespace tensor::cpu::nn {
namespace {

using I = std::int64_t;

bool pointwise(const ConvGeom& g) {
  for (int i = 0; i < 3; ++i)
    if (g.kernel[i] != 1 || g.stride[i] != 1 || g.padding[i] != 0 || g.in[i] != g.out[i]) return false;
  return true;
}

// Valid output range [lo, hi) along the last dim for a tap at offset `base` (= k*d - p):
// 0 <= base + o*s < in.
void valid_range(I base, I s, I in, I out, I& lo, I& hi) {
  lo = base >= 0 ? 0 : -base / s + (-base % s != 0);  // ceil(-base / s) without -base + s - 1 (s may be near 2^63)
  hi = base >= in ? 0 : std::min<I>(out, (in - 1 - base) / s + 1);
  if (lo > hi) lo = hi;
}

// Calls f(channel, k0, k1, b2, lo, hi, row) for every (channel, tap) of one group's cols
// block [cg * K, P], rows channel-major then kernel row-major (unfold4d's order); [lo, hi)
// is the tap's valid output range along the last dim.
template <class T, class F>
void for_channel_taps(const ConvGeom& g, std::size_t cg, T* cols, F&& f, std::size_t row_len = 0) {
  if (row_len == 0) row_len = g.out_size();
  const I in2 = static_cast<I>(g.in[2]), out2 = static_cast<I>(g.out[2]);
  T* row = cols;
  for (std::size_t c = 0; c < cg; ++c)
    for (std::size_t k0 = 0; k0 < g.kernel[0]; ++k0)
      for (std::size_t k1 = 0; k1 < g.kernel[1]; ++k1)
        for (std::size_t k2 = 0; k2 < g.kernel[2]; ++k2, row += row_len) {
          const I b2 = static_cast<I>(k2) * g.dilation[2] - g.padding[2];
          I lo, hi;
          valid_range(b2, g.stride[2], in2, out2, lo, hi);
          f(c, static_cast<I>(k0), static_cast<I>(k1), b2, lo, hi, row);
        }
}

// Input offset of tap k along dim d for output o; false where it falls in the padding.
inline bool tap_input(const ConvGeom& g, int d, I o, I k, I& i) {
  i = o * g.stride[d] - g.padding[d] + k * g.dilation[d];
  return i >= 0 && i < static_cast<I>(g.in[d]);
}

// Both trailing strides 1 and rows as wide as the input's (in2 == out2, as with "same"
// padding): output t of a plane then reads input t + b1 * in2 + b2 of the matching input
// plane, so a tap's valid rows are one memcpy, after which only the columns outside
// [lo, hi) of each row (the padding) are zeroed. Row by row (a memcpy and two fills per
// 14-float row) the copy cost about as much as the gemm (perf, [128,32,14,14] 3x3).
bool shifted_planes(const ConvGeom& g) { return g.stride[1] == 1 && g.stride[2] == 1 && g.in[2] == g.out[2]; }

// Zeroes columns [0, lo) and [hi, w) of rows [r0, r1) of a [*, w] block: column by
// column, as strided stores (a loop along a row became a memset call per 1-float run).
template <class T>
void zero_columns(T* a, I w, I r0, I r1, I lo, I hi) {
  auto column = [&](I q) {
    for (I r = r0; r < r1; ++r) a[r * w + q] = T(0);
  };
  for (I q = 0; q < lo; ++q) column(q);
  for (I q = hi; q < w; ++q) column(q);
}

// Output rows [ra, rb) of a tap's shifted plane into dst (row ra first).
template <class T>
void copy_shifted_plane(const T* plane, I in1, I w, I ra, I rb, I b1, I b2, I lo, I hi, T* dst) {
  const I r0 = std::clamp<I>(-b1, ra, rb), r1 = std::clamp<I>(in1 - b1, r0, rb);
  T* d = dst - ra * w;  // indexed by absolute output position
  std::fill(d + ra * w, d + r0 * w, T(0));
  std::fill(d + r1 * w, d + rb * w, T(0));
  // Clipped to the input plane: what falls outside lies in the columns zeroed below.
  const I shift = b1 * w + b2, c0 = std::max(r0 * w, -shift), c1 = std::min(r1 * w, in1 * w - shift);
  if (c1 > c0) std::memcpy(d + c0, plane + c0 + shift, static_cast<std::size_t>(c1 - c0) * sizeof(T));
  zero_columns(dst, w, r0 - ra, r1 - ra, lo, hi);
}

// One output row of a tap: dst[o2] = src[b2 + o2 * s2] on [lo, hi), zero elsewhere.
template <class T>
void copy_row(const T* src, I b2, I s2, I lo, I hi, I out2, T* dst) {
  std::fill(dst, dst + lo, T(0));
  if (s2 == 1) {
    std::memcpy(dst + lo, src + b2 + lo, static_cast<std::size_t>(hi - lo) * sizeof(T));
  } else {
    for (I o2 = lo; o2 < hi; ++o2) dst[o2] = src[b2 + o2 * s2];
  }
  std::fill(dst + hi, dst + out2, T(0));
}

// cols [cg * K, P] of one group's input; with a row range (only where out[0] == 1: 1-d
// and 2-d convs) the columns of output rows [ra, rb) alone, [cg * K, (rb - ra) * out2].
template <class T>
void im2col(const ConvGeom& g, std::size_t cg, const T* x, T* cols, I ra = 0, I rb = -1) {
  const I in1 = static_cast<I>(g.in[1]), in2 = static_cast<I>(g.in[2]), plane = in1 * in2;
  const I out0 = static_cast<I>(g.out[0]), out1 = static_cast<I>(g.out[1]), out2 = static_cast<I>(g.out[2]);
  if (rb < 0) rb = out1;
  const I rows = rb - ra;
  const bool shifted = shifted_planes(g);
  for_channel_taps(g, cg, cols, [&](std::size_t c, I k0, I k1, I b2, I lo, I hi, T* row) {
    const T* xc = x + c * g.in_size();
    for (I o0 = 0; o0 < out0; ++o0) {
      T* dst0 = row + o0 * rows * out2;
      I i0, i1;
      if (!tap_input(g, 0, o0, k0, i0)) {
        std::fill(dst0, dst0 + rows * out2, T(0));
      } else if (shifted) {
        copy_shifted_plane(xc + i0 * plane, in1, in2, ra, rb, k1 * g.dilation[1] - g.padding[1], b2, lo, hi, dst0);
      } else {
        for (I o1 = ra; o1 < rb; ++o1) {
          T* dst = dst0 + (o1 - ra) * out2;
          if (tap_input(g, 1, o1, k1, i1)) {
            copy_row(xc + i0 * plane + i1 * in2, b2, g.stride[2], lo, hi, out2, dst);
          } else {
            std::fill(dst, dst + out2, T(0));
          }
        }
      }
    }
  }, static_cast<std::size_t>(out0 * rows * out2));
}

// Output rows per cols block: the whole plane unless one sample's cols would outgrow the
// L2 cache (kColsBlockBytes); then blocks of rows whose cols stay in it, each its own
// gemm on a slice of the output (1-d and 2-d convs). [32,64,56,56] 3x3 64->64: cols of
// 7.2 MB per sample were written to memory and read back by the gemm.
constexpr std::size_t kColsBlockBytes = std::size_t{512} << 10;
template <class T>
I block_rows(const ConvGeom& g, std::size_t Kc) {
  const I out1 = static_cast<I>(g.out[1]);
  const std::size_t row_bytes = Kc * g.out[2] * sizeof(T);
  if (g.out[0] != 1 || row_bytes == 0 || row_bytes * g.out[1] <= kColsBlockBytes) return std::max<I>(out1, 1);
  return std::clamp<I>(static_cast<I>(kColsBlockBytes / row_bytes), 1, out1);
}

// x[i] += d[i] for i < n (col2im adds every cols element once).
void add_to(float* __restrict__ x, const float* __restrict__ d, I n) {
#if TENSOR_HAVE_OPENMP
#pragma omp simd
#endif
  for (I i = 0; i < n; ++i) x[i] += d[i];
}
void add_to(double* __restrict__ x, const double* __restrict__ d, I n) {
#if TENSOR_HAVE_OPENMP
#pragma omp simd
#endif
  for (I i = 0; i < n; ++i) x[i] += d[i];
}

// The adjoint of copy_shifted_plane on a cols block the caller lets us clobber: its
// columns outside [lo, hi) are zeroed, then the valid rows are one flat add (the zeroed
// elements land on inputs of the neighbouring rows; x starts at +0, so adding +0 changes
// no bit). One loop over a plane instead of a short loop per 14-float row.
template <class T>
void add_shifted_plane(T* src, I in1, I w, I out1, I b1, I b2, I lo, I hi, T* plane) {
  const I r0 = std::clamp<I>(-b1, 0, out1), r1 = std::clamp<I>(in1 - b1, r0, out1);
  zero_columns(src, w, r0, r1, lo, hi);
  const I shift = b1 * w + b2, c0 = std::max(r0 * w, -shift), c1 = std::min(r1 * w, in1 * w - shift);
  if (c1 > c0) add_to(plane + c0 + shift, src + c0, c1 - c0);
}

// The adjoint of im2col: each cols element added to the input element it was read from.
// `clobber`: cols is scratch the shifted-plane path may overwrite; x must start at +0 there.
template <class T>
void col2im_add(const ConvGeom& g, std::size_t cg, const T* cols, T* x, bool clobber = false) {
  const I in1 = static_cast<I>(g.in[1]), in2 = static_cast<I>(g.in[2]), plane = in1 * in2;
  const I out0 = static_cast<I>(g.out[0]), out1 = static_cast<I>(g.out[1]), out2 = static_cast<I>(g.out[2]);
  const I s2 = g.stride[2];
  const bool shifted = clobber && shifted_planes(g);
  for_channel_taps(g, cg, const_cast<T*>(cols), [&](std::size_t c, I k0, I k1, I b2, I lo, I hi, T* row) {
    T* xc = x + c * g.in_size();
    for (I o0 = 0; o0 < out0; ++o0) {
      I i0, i1;
      if (!tap_input(g, 0, o0, k0, i0)) continue;
      if (shifted) {
        add_shifted_plane(row + o0 * out1 * out2, in1, in2, out1, k1 * g.dilation[1] - g.padding[1], b2, lo, hi,
                          xc + i0 * plane);
        continue;
      }
      for (I o1 = 0; o1 < out1; ++o1) {
        if (!tap_input(g, 1, o1, k1, i1)) continue;
        T* __restrict__ xr = xc + i0 * plane + i1 * in2;
        const T* __restrict__ d = row + (o0 * out1 + o1) * out2;
        if (s2 == 1) {
#if TENSOR_HAVE_OPENMP
#pragma omp simd
#endif
          for (I q = lo; q < hi; ++q) xr[b2 + q] += d[q];
        } else {
          for (I q = lo; q < hi; ++q) xr[b2 + q * s2] += d[q];
        }
      }
    }
  });
}

// A per-thread scratch buffer of at least n elements, kept between calls (an im2col buffer
// of a few hundred KB would otherwise be a fresh mmap, page-faulted in, on every sample).
// `Slot` tells apart buffers one kernel needs at the same time.
template <class T, int Slot = 0>
T* scratch(std::size_t n) {
  thread_local std::vector<T> buf;
  if (buf.size() < n) buf.resize(n);
  return buf.data();
}

// Runs f(i) for every i in [0, n): on parallel_chunks when `parallel`, else in order.
template <class F>
void for_range(std::size_t n, bool parallel, F&& f) {
  if (parallel && n > 1) {
    auto body = [&](std::size_t i) { f(i); };
    parallel_chunks(n, body);
  } else {
    for (std::size_t i = 0; i < n; ++i) f(i);
  }
}

// Below 64^3 multiply-adds in all, threads cost more than they save.
constexpr double kThreadsWork = 64.0 * 64.0 * 64.0;

// One gemm per (sample, group), also for small planes. Packing several samples' cols side
// by side into one wider gemm (the [Kc, s*P] layout) was measured and dropped: the gemm
// alone gains little for the forward and x-gradient shapes (a per-sample gemm already runs
// near its peak) and loses for the weight gradient (its k grows), and the copies in and
// out of the packed layout cost more than the gain. What cost more than the gemm on small planes was im2col's and
// col2im's per-row overhead (see copy_shifted_plane).
struct Plan {
  int threads;       // total threads
  bool per_sample;   // samples (weight gradient: its parts) on parallel_chunks, gemms single-threaded
  int blis_threads;  // threads per gemm (slabs on parallel_chunks) when not per_sample
};
// `units` independent items (samples, weight-gradient parts), gemms of m x n x k per sample.
Plan plan(const ConvGeom& g, std::size_t units, std::size_t m, std::size_t n, std::size_t k) {
  const int t = nn_threads();
  const double work = static_cast<double>(g.batch * g.groups) * static_cast<double>(m) * static_cast<double>(n) *
                      static_cast<double>(k);
  Plan p{t, t > 1 && units >= static_cast<std::size_t>(t) && work >= kThreadsWork, 1};
  if (!p.per_sample) p.blis_threads = gemm_threads(m, n, k, t);
  return p;
}

// nn_gemm on `threads` threads: C cut along its longer dim into slabs of at least 64 rows
// or columns, each a single-threaded gemm, on parallel_chunks (the cut depends on the
// thread count; each element's sum over k runs in the same order in any slab).
template <class T>
void split_gemm(bool ta, bool tb, std::size_t m, std::size_t n, std::size_t k, T alpha, const T* a, std::size_t lda,
                const T* b, std::size_t ldb, T beta, T* c, std::size_t ldc, int threads) {
  constexpr std::size_t kMinSlab = 64;
  const bool rows = m >= n;
  const std::size_t dim = rows ? m : n;
  const std::size_t pieces = std::min<std::size_t>(dim / kMinSlab, 4 * static_cast<std::size_t>(std::max(threads, 1)));
  if (threads < 2 || pieces < 2) {
    nn_gemm<T>(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, 1);
    return;
  }
  auto slab = [&](std::size_t i) {
    const std::size_t lo = dim * i / pieces, hi = dim * (i + 1) / pieces;
    if (rows) {
      nn_gemm<T>(ta, tb, hi - lo, n, k, alpha, ta ? a + lo : a + lo * lda, lda, b, ldb, beta, c + lo * ldc, ldc, 1);
    } else {
      nn_gemm<T>(ta, tb, m, hi - lo, k, alpha, a, lda, tb ? b + lo * ldb : b + lo, ldb, beta, c + lo, ldc, 1);
    }
  };
  parallel_chunks(pieces, slab);
}

// Runs f(n, cols_buffer) for every sample, on threads as the plan says.
template <class T, class F>
void for_samples(const ConvGeom& g, const Plan& p, std::size_t cols_size, F&& f) {
  for_range(g.batch, p.per_sample, [&](std::size_t n) { f(n, scratch<T>(cols_size)); });
}

// Direct convolution for depthwise kernels (one input channel per group, at most
// kDirectMaxMultiplier outputs each): per (sample, output channel) an axpy of each input
// row into each output row. There each gemm has m <= 4 and k = kh*kw, which BLIS runs badly,
// so direct is faster. A dense conv with a short reduction ([128,1,28,28] -> 32) stays on
// gemm, where direct is several times slower.
constexpr std::size_t kDirectMaxReduction = 32, kDirectMaxMultiplier = 4;

template <class T>
void direct_forward(const ConvGeom& g, const T* x, const T* w, const T* bias, T* y) {
  const std::size_t cgi = g.c_in / g.groups, cgo = g.c_out / g.groups, P = g.out_size();
  const I in1 = static_cast<I>(g.in[1]), in2 = static_cast<I>(g.in[2]);
  const I out0 = static_cast<I>(g.out[0]), out1 = static_cast<I>(g.out[1]), out2 = static_cast<I>(g.out[2]);
  const I in0 = static_cast<I>(g.in[0]);
  const I tasks = static_cast<I>(g.batch * g.c_out);
  const int t = nn_threads();
  const double work = static_cast<double>(g.batch * g.c_out * P) * static_cast<double>(cgi * g.kernel_size());
  auto one = [&](I task) {
    const std::size_t n = static_cast<std::size_t>(task) / g.c_out, o = static_cast<std::size_t>(task) % g.c_out;
    const std::size_t grp = o / cgo;
    T* yo = y + (n * g.c_out + o) * P;
    std::fill(yo, yo + P, bias ? bias[o] : T(0));
    for (std::size_t ci = 0; ci < cgi; ++ci) {
      const T* xc = x + (n * g.c_in + grp * cgi + ci) * g.in_size();
      const T* wk = w + (o * cgi + ci) * g.kernel_size();
      for (std::size_t k0 = 0; k0 < g.kernel[0]; ++k0)
        for (std::size_t k1 = 0; k1 < g.kernel[1]; ++k1)
          for (std::size_t k2 = 0; k2 < g.kernel[2]; ++k2) {
            const T wv = wk[(k0 * g.kernel[1] + k1) * g.kernel[2] + k2];
            const I b2 = static_cast<I>(k2) * g.dilation[2] - g.padding[2];
            I lo, hi;
            valid_range(b2, g.stride[2], in2, out2, lo, hi);
            for (I o0 = 0; o0 < out0; ++o0) {
              const I i0 = o0 * g.stride[0] - g.padding[0] + static_cast<I>(k0) * g.dilation[0];
              if (i0 < 0 || i0 >= in0) continue;
              for (I o1 = 0; o1 < out1; ++o1) {
                const I i1 = o1 * g.stride[1] - g.padding[1] + static_cast<I>(k1) * g.dilation[1];
                if (i1 < 0 || i1 >= in1) continue;
                T* __restrict__ yr = yo + (o0 * out1 + o1) * out2;
                const T* __restrict__ xr = xc + (i0 * in1 + i1) * in2;
                if (g.stride[2] == 1) {
#if TENSOR_HAVE_OPENMP
#pragma omp simd
#endif
                  for (I q = lo; q < hi; ++q) yr[q] += wv * xr[b2 + q];
                } else {
                  for (I q = lo; q < hi; ++q) yr[q] += wv * xr[b2 + q * g.stride[2]];
                }
              }
            }
          }
    }
  };
  for_range(static_cast<std::size_t>(tasks), t > 1 && work >= kThreadsWork,
            [&](std::size_t task) { one(static_cast<I>(task)); });
}

// The forward routes this thread's convolutions took since the last reset (at most 8
// distinct entries: the route and the conv's channels and kernel), for tensorctl's reports;
// noted without building strings (a few compares per conv).
struct RouteNote {
  const char* route;
  std::size_t c_in, c_out, kh, kw;
  bool operator==(const RouteNote&) const = default;
};
thread_local std::vector<RouteNote> t_routes;
void note_route(const ConvGeom& g, const char* route) {
  const RouteNote n{route, g.c_in, g.c_out, g.kernel[1], g.kernel[2]};
  if (t_routes.size() >= 8 || std::find(t_routes.begin(), t_routes.end(), n) != t_routes.end()) return;
  t_routes.push_back(n);
}

std::atomic<bool> g_conv_direct{[] {
  const char* e = std::getenv("TENSOR_CONV_DIRECT");
  return e == nullptr || std::string_view(e) != "0";
}()};
bool conv_direct_enabled() { return g_conv_direct.load(std::memory_order_relaxed); }

bool depthwise(const ConvGeom& g) {
  const std::size_t cgi = g.c_in / g.groups, cgo = g.c_out / g.groups;
  return !pointwise(g) && g.groups > 1 && cgi == 1 && cgo <= kDirectMaxMultiplier &&
         g.kernel_size() <= kDirectMaxReduction;
}

// f(in_row_offset, out_row_offset, b2, lo, hi, tap) for every tap and every pair of rows it
// connects (row offsets in elements within one plane).
template <class F>
void for_tap_rows(const ConvGeom& g, F&& f) {
  const I in0 = static_cast<I>(g.in[0]), in1 = static_cast<I>(g.in[1]), in2 = static_cast<I>(g.in[2]);
  const I out0 = static_cast<I>(g.out[0]), out1 = static_cast<I>(g.out[1]), out2 = static_cast<I>(g.out[2]);
  std::size_t tap = 0;
  for (std::size_t k0 = 0; k0 < g.kernel[0]; ++k0)
    for (std::size_t k1 = 0; k1 < g.kernel[1]; ++k1)
      for (std::size_t k2 = 0; k2 < g.kernel[2]; ++k2, ++tap) {
        const I b2 = static_cast<I>(k2) * g.dilation[2] - g.padding[2];
        I lo, hi;
        valid_range(b2, g.stride[2], in2, out2, lo, hi);
        for (I o0 = 0; o0 < out0; ++o0) {
          const I i0 = o0 * g.stride[0] - g.padding[0] + static_cast<I>(k0) * g.dilation[0];
          if (i0 < 0 || i0 >= in0) continue;
          for (I o1 = 0; o1 < out1; ++o1) {
            const I i1 = o1 * g.stride[1] - g.padding[1] + static_cast<I>(k1) * g.dilation[1];
            if (i1 < 0 || i1 >= in1) continue;
            f((i0 * in1 + i1) * in2, (o0 * out1 + o1) * out2, b2, lo, hi, tap);
          }
        }
      }
}

template <class F>
void for_tasks(I tasks, double work, F&& f) {
  for_range(static_cast<std::size_t>(tasks), nn_threads() > 1 && work >= kThreadsWork,
            [&](std::size_t task) { f(static_cast<I>(task)); });
}

// Depthwise input gradient: per (sample, input channel), each output row of its group's
// channels scattered back through every tap.
template <class T>
void direct_backward_x(const ConvGeom& g, const T* dy, const T* w, T* dx) {
  const std::size_t cgo = g.c_out / g.groups, P = g.out_size(), S = g.in_size(), K = g.kernel_size();
  const I s2 = g.stride[2];
  for_tasks(static_cast<I>(g.batch * g.c_in), static_cast<double>(g.batch * g.c_out * P * K), [&](I task) {
    const std::size_t n = static_cast<std::size_t>(task) / g.c_in, c = static_cast<std::size_t>(task) % g.c_in;
    T* dxc = dx + (n * g.c_in + c) * S;
    std::fill(dxc, dxc + S, T(0));
    for (std::size_t oo = 0; oo < cgo; ++oo) {
      const std::size_t o = c * cgo + oo;
      const T* dyo = dy + (n * g.c_out + o) * P;
      const T* wk = w + o * K;
      for_tap_rows(g, [&](I in_off, I out_off, I b2, I lo, I hi, std::size_t tap) {
        const T wv = wk[tap];
        T* __restrict__ xr = dxc + in_off;
        const T* __restrict__ yr = dyo + out_off;
        if (s2 == 1) {
#if TENSOR_HAVE_OPENMP
#pragma omp simd
#endif
          for (I q = lo; q < hi; ++q) xr[b2 + q] += wv * yr[q];
        } else {
          for (I q = lo; q < hi; ++q) xr[b2 + q * s2] += wv * yr[q];
        }
      });
    }
  });
}

// Depthwise weight gradient: per output channel, dot products of its dy rows with the
// shifted rows of its one input channel, summed over the batch.
template <class T>
void direct_backward_weight(const ConvGeom& g, const T* x, const T* dy, T* dw) {
  const std::size_t cgo = g.c_out / g.groups, P = g.out_size(), S = g.in_size(), K = g.kernel_size();
  const I s2 = g.stride[2];
  for_tasks(static_cast<I>(g.c_out), static_cast<double>(g.batch * g.c_out * P * K), [&](I task) {
    const std::size_t o = static_cast<std::size_t>(task), c = o / cgo;
    std::vector<double> acc(K, 0.0);
    for (std::size_t n = 0; n < g.batch; ++n) {
      const T* xc = x + (n * g.c_in + c) * S;
      const T* dyo = dy + (n * g.c_out + o) * P;
      for_tap_rows(g, [&](I in_off, I out_off, I b2, I lo, I hi, std::size_t tap) {
        const T* xr = xc + in_off;
        const T* yr = dyo + out_off;
        T sum = 0;
        if (s2 == 1) {
#if TENSOR_HAVE_OPENMP
#pragma omp simd reduction(+ : sum)
#endif
          for (I q = lo; q < hi; ++q) sum += yr[q] * xr[b2 + q];
        } else {
          for (I q = lo; q < hi; ++q) sum += yr[q] * xr[b2 + q * s2];
        }
        acc[tap] += static_cast<double>(sum);
      });
    }
    for (std::size_t k = 0; k < K; ++k) dw[o * K + k] = static_cast<T>(acc[k]);
  });
}

// dw[grp][o][k] = the sum over parts, in order, of part[grp][k][o] (each part holds the
// groups' [Kc, cgo] transposed partial sums, one after another).
template <class T>
void add_transposed_parts(const T* parts_data, std::size_t parts, std::size_t groups, std::size_t Kc,
                          std::size_t cgo, T* dw) {
  const std::size_t wsize = groups * cgo * Kc;
  for (std::size_t grp = 0; grp < groups; ++grp)
    for (std::size_t o = 0; o < cgo; ++o)
      for (std::size_t k = 0; k < Kc; ++k) {
        const std::size_t at = grp * cgo * Kc + k * cgo + o;
        T s = parts_data[at];
        for (std::size_t i = 1; i < parts; ++i) s += parts_data[i * wsize + at];
        dw[grp * cgo * Kc + o * Kc + k] = s;
      }
}

// Whether an f32 forward conv (fused or not) runs on the direct small-C_in kernel.
bool direct_route(const ConvGeom& g) { return conv_direct_enabled() && direct_small_cin(g); }

template <class T>
void forward(const ConvGeom& g, const T* x, const T* w, const T* bias, T* y) {
  const std::size_t cgi = g.c_in / g.groups, cgo = g.c_out / g.groups, P = g.out_size(), Kc = cgi * g.kernel_size();
  const bool pw = pointwise(g);
  if (depthwise(g)) {
    note_route(g, "direct depthwise");
    direct_forward(g, x, w, bias, y);
    return;
  }
  if constexpr (std::is_same_v<T, float>) {
    if (direct_route(g)) {
      note_route(g, "direct small-C_in");
      direct_small_cin_forward(g, x, w, bias, y);
      return;
    }
  }
  if constexpr (std::is_same_v<T, float>) {
    if (onednn_conv_forward(g, x, w, bias, y)) return note_route(g, "onednn jit");
  }
  note_route(g, pw ? "gemm (pointwise)" : "im2col + gemm");
  const Plan p = plan(g, g.batch, cgo, P, Kc);
  const I out1 = static_cast<I>(g.out[1]), out2 = static_cast<I>(g.out[2]), rows = block_rows<T>(g, Kc);
  const std::size_t cols_size = pw ? 0 : Kc * (rows == out1 ? P : static_cast<std::size_t>(rows * out2));
  for_samples<T>(g, p, cols_size, [&](std::size_t n, T* cols) {
    for (std::size_t grp = 0; grp < g.groups; ++grp) {
      const T* xg = x + (n * g.c_in + grp * cgi) * g.in_size();
      T* yg = y + (n * g.c_out + grp * cgo) * P;
      const T* wg = w + grp * cgo * Kc;
      if (pw) {
        split_gemm<T>(false, false, cgo, P, Kc, T(1), wg, Kc, xg, P, T(0), yg, P, p.blis_threads);
      } else if (rows == out1) {
        im2col(g, cgi, xg, cols);
        split_gemm<T>(false, false, cgo, P, Kc, T(1), wg, Kc, cols, P, T(0), yg, P, p.blis_threads);
      } else {
        for (I ra = 0; ra < out1; ra += rows) {
          const I rb = std::min(out1, ra + rows);
          const auto pb = static_cast<std::size_t>((rb - ra) * out2);
          im2col(g, cgi, xg, cols, ra, rb);
          split_gemm<T>(false, false, cgo, pb, Kc, T(1), wg, Kc, cols, pb, T(0), yg + ra * out2, P, p.blis_threads);
        }
      }
      if (Kc == 0) std::fill(yg, yg + cgo * P, T(0));
    }
    if (bias)
      for (std::size_t o = 0; o < g.c_out; ++o) {
        T* yo = y + (n * g.c_out + o) * P;
        const T b = bias[o];
        for (std::size_t i = 0; i < P; ++i) yo[i] += b;
      }
  });
}

template <class T>
void backward_x(const ConvGeom& g, const T* dy, const T* w, T* dx) {
  if (depthwise(g)) {
    direct_backward_x(g, dy, w, dx);
    return;
  }
  if constexpr (std::is_same_v<T, float>) {
    if (onednn_conv_backward_x(g, dy, w, dx)) return;
  }
  const std::size_t cgi = g.c_in / g.groups, cgo = g.c_out / g.groups, P = g.out_size(), Kc = cgi * g.kernel_size();
  const bool pw = pointwise(g);
  const Plan p = plan(g, g.batch, Kc, P, cgo);
  for_samples<T>(g, p, pw ? 0 : Kc * P, [&](std::size_t n, T* cols) {
    for (std::size_t grp = 0; grp < g.groups; ++grp) {
      const T* dyg = dy + (n * g.c_out + grp * cgo) * P;
      T* dxg = dx + (n * g.c_in + grp * cgi) * g.in_size();
      const T* wg = w + grp * cgo * Kc;
      if (pw) {
        split_gemm<T>(true, false, Kc, P, cgo, T(1), wg, Kc, dyg, P, T(0), dxg, P, p.blis_threads);
      } else {
        split_gemm<T>(true, false, Kc, P, cgo, T(1), wg, Kc, dyg, P, T(0), cols, P, p.blis_threads);
        std::fill(dxg, dxg + cgi * g.in_size(), T(0));
        col2im_add(g, cgi, cols, dxg, true);
      }
    }
  });
}

// The weight gradient sums dy_n x cols_n^T over the samples: two fixed halves of the
// batch each accumulate a partial dW on whichever thread takes them, added at the end, so
// the result is the same on any number of threads. Two, not more: that is the sum the
// 2-thread kernel before this one formed (OpenMP halves); more ranges balance no better
// on two cores.
constexpr std::size_t kWeightParts = 2;

// With fewer cols rows than output channels (Kc < cgo) the parts form dW^T = cols_n x
// dy_n^T instead, transposed when they are added: dnnl_sgemm runs the short-m orientation
// about twice as slowly; with Kc >= cgo both orientations take the same.
bool weight_transposed(std::size_t Kc, std::size_t cgo) { return Kc < cgo; }

template <class T>
void backward_weight(const ConvGeom& g, const T* x, const T* dy, T* dw) {
  if (depthwise(g)) {
    direct_backward_weight(g, x, dy, dw);
    return;
  }
  if constexpr (std::is_same_v<T, float>) {
    if (onednn_conv_backward_weight(g, x, dy, dw)) return;
  }
  const std::size_t cgi = g.c_in / g.groups, cgo = g.c_out / g.groups, P = g.out_size(), Kc = cgi * g.kernel_size();
  const std::size_t wsize = g.c_out * Kc;
  const bool pw = pointwise(g), tr = weight_transposed(Kc, cgo);
  const std::size_t parts = std::min(g.batch, kWeightParts);
  const Plan p = plan(g, parts, cgo, Kc, P);
  if (parts == 0 || P == 0) {
    std::fill(dw, dw + wsize, T(0));
    return;
  }
  // Part 0 accumulates into dw itself (into partial[0] when transposed), part i > 0 into
  // the partial after it.
  std::vector<T> partial((tr ? parts : parts - 1) * wsize);
  const I out1 = static_cast<I>(g.out[1]), out2 = static_cast<I>(g.out[2]);
  const I rows = pw ? std::max<I>(out1, 1) : block_rows<T>(g, Kc);
  auto part = [&](std::size_t i) {
    T* acc = tr ? partial.data() + i * wsize : i == 0 ? dw : partial.data() + (i - 1) * wsize;
    T* cols = scratch<T>(pw ? 0 : Kc * (rows == out1 ? P : static_cast<std::size_t>(rows * out2)));
    const int threads = p.per_sample ? 1 : p.blis_threads;
    const std::size_t n0 = g.batch * i / parts, n1 = g.batch * (i + 1) / parts;
    for (std::size_t n = n0; n < n1; ++n)
      for (std::size_t grp = 0; grp < g.groups; ++grp) {
        const T* xg = x + (n * g.c_in + grp * cgi) * g.in_size();
        const T* dyg = dy + (n * g.c_out + grp * cgo) * P;
        T* ag = acc + grp * cgo * Kc;
        // Blocks of output rows (one block: the whole plane), each adding its columns'
        // products; the first of the part's first sample overwrites.
        for (I ra = 0; ra < std::max<I>(out1, 1); ra += rows) {
          const I rb = std::min(out1, ra + rows);
          const bool whole = rb - ra == out1;
          const std::size_t pb = whole ? P : static_cast<std::size_t>((rb - ra) * out2);
          const T* b = xg;
          if (!pw) {
            if (whole) im2col(g, cgi, xg, cols);
            else im2col(g, cgi, xg, cols, ra, rb);
            b = cols;
          }
          const T* dyb = dyg + (whole ? 0 : ra * out2);
          const T beta = n == n0 && ra == 0 ? T(0) : T(1);
          if (tr) {
            split_gemm<T>(false, true, Kc, cgo, pb, T(1), b, pb, dyb, P, beta, ag, cgo, threads);
          } else {
            split_gemm<T>(false, true, cgo, Kc, pb, T(1), dyb, P, b, pb, beta, ag, Kc, threads);
          }
        }
      }
  };
  for_range(parts, p.per_sample, part);
  if (tr) {
    add_transposed_parts(partial.data(), parts, g.groups, Kc, cgo, dw);
    return;
  }
  for (std::size_t i = 1; i < parts; ++i) {
    const T* src = partial.data() + (i - 1) * wsize;
    for (std::size_t j = 0; j < wsize; ++j) dw[j] += src[j];
  }
}

// db[c] = sum over batch and the `space` positions of a [batch, channels, space] buffer.
// Channels on parallel_chunks; each sums its planes in double in order (as before
// threading, so the result is unchanged bit for bit).
template <class T>
void channel_sum(std::size_t batch, std::size_t channels, std::size_t space, const T* dy, T* db) {
  const double work = static_cast<double>(batch * channels * space);
  for_range(channels, nn_threads() > 1 && work >= kThreadsWork, [&](std::size_t c) {
    double s = 0;
    for (std::size_t n = 0; n < batch; ++n) {
      const T* p = dy + (n * channels + c) * space;
      for (std::size_t i = 0; i < space; ++i) s += static_cast<double>(p[i]);
    }
    db[c] = static_cast<T>(s);
  });
}

void fill_spatial(std::array<std::size_t, 3>& dst, const Shape& s, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) dst[3 - n + i] = s[2 + i];
}
void fill_opts(std::array<I, 3>& dst, const std::array<I, 3>& src, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) dst[3 - n + i] = src[i];
}

}  // namespace

// The geometry of the forward conv that maps `in` to `out` (for a transposed conv, its
// output is that conv's input): the two builders differ only in which shape is which.
ConvGeom conv_geom_of(std::size_t batch, std::size_t c_in, std::size_t c_out, const Shape& in, const Shape& weight,
                      const Shape& out, const tensor::core::ConvArgs& a) {
  ConvGeom g;
  g.batch = batch;
  g.c_in = c_in;
  g.c_out = c_out;
  g.groups = static_cast<std::size_t>(a.groups);
  fill_spatial(g.in, in, a.rank);
  fill_spatial(g.kernel, weight, a.rank);
  fill_spatial(g.out, out, a.rank);
  fill_opts(g.stride, a.stride, a.rank);
  fill_opts(g.padding, a.padding, a.rank);
  fill_opts(g.dilation, a.dilation, a.rank);
  return g;
}

ConvGeom conv_geom(const tensor::core::ConvArgs& a, const Shape& x, const Shape& weight) {
  const Shape y = tensor::core::checked_conv_output(x, weight, a, false);
  return conv_geom_of(x[0], x[1], weight[0], x, weight, y, a);
}

ConvGeom conv_transpose_geom(const tensor::core::ConvArgs& a, const Shape& x, const Shape& weight) {
  const Shape y = tensor::core::checked_conv_output(x, weight, a, true);
  return conv_geom_of(x[0], y[1], x[1], y, weight, x, a);
}

ConvGeom unfold_geom(std::string_view op, const Shape& x, const std::array<I, 2>& kernel,
                     const tensor::nn::UnfoldOptions& o) {
  tensor::core::unfold4d_output_shape(op, x, kernel, o);
  tensor::nn::ConvOptions<2> co;
  co.stride = o.stride;
  co.padding = o.padding;
  co.dilation = o.dilation;
  const Shape w{x[1] * static_cast<std::size_t>(kernel[0] * kernel[1]), x[1], static_cast<std::size_t>(kernel[0]),
                static_cast<std::size_t>(kernel[1])};
  return conv_geom<2>(op, x, w, co);
}

namespace {
template <class T>
void unfold_impl(const ConvGeom& g, const T* x, T* cols) {
  const std::size_t per = g.c_in * g.kernel_size() * g.out_size();
  for (std::size_t n = 0; n < g.batch; ++n) im2col(g, g.c_in, x + n * g.c_in * g.in_size(), cols + n * per);
}
template <class T>
void fold_impl(const ConvGeom& g, const T* cols, T* x) {
  const std::size_t per = g.c_in * g.kernel_size() * g.out_size();
  std::fill(x, x + g.batch * g.c_in * g.in_size(), T(0));
  for (std::size_t n = 0; n < g.batch; ++n) col2im_add(g, g.c_in, cols + n * per, x + n * g.c_in * g.in_size());
}
}  // namespace

void unfold_forward(const ConvGeom& g, const float* x, float* cols) { unfold_impl(g, x, cols); }
void unfold_forward(const ConvGeom& g, const double* x, double* cols) { unfold_impl(g, x, cols); }
void fold_forward(const ConvGeom& g, const float* cols, float* x) { fold_impl(g, cols, x); }
void fold_forward(const ConvGeom& g, const double* cols, double* x) { fold_impl(g, cols, x); }

#define TENSOR_NN_CONV_TYPED(T)                                                                                  \
  void conv_forward(const ConvGeom& g, const T* x, const T* w, const T* bias, T* y) { forward(g, x, w, bias, y); } \
  void conv_backward_x(const ConvGeom& g, const T* dy, const T* w, T* dx) { backward_x(g, dy, w, dx); }         \
  void conv_backward_weight(const ConvGeom& g, const T* x, const T* dy, T* dw) { backward_weight(g, x, dy, dw); } \
  void conv_backward_bias(const ConvGeom& g, const T* dy, T* db) {                                             \
    channel_sum(g.batch, g.c_out, g.out_size(), dy, db);                                                       \
  }                                                                                                            \
  void conv_transpose_forward(const ConvGeom& g, const T* x, const T* w, const T* bias, T* y) {                \
    backward_x(g, x, w, y);                                                                                    \
    if (bias)                                                                                                  \
      for (std::size_t n = 0; n < g.batch; ++n)                                                                \
        for (std::size_t c = 0; c < g.c_in; ++c) {                                                             \
          T* p = y + (n * g.c_in + c) * g.in_size();                                                           \
          for (std::size_t i = 0; i < g.in_size(); ++i) p[i] += bias[c];                                       \
        }                                                                                                      \
  }                                                                                                            \
  void conv_transpose_backward_x(const ConvGeom& g, const T* dy, const T* w, T* dx) {                          \
    forward(g, dy, w, static_cast<const T*>(nullptr), dx);                                                     \
  }                                                                                                            \
  void conv_transpose_backward_weight(const ConvGeom& g, const T* x, const T* dy, T* dw) {                     \
    backward_weight(g, dy, x, dw);                                                                             \
  }                                                                                                            \
  void conv_transpose_backward_bias(const ConvGeom& g, const T* dy, T* db) {                                   \
    channel_sum(g.batch, g.c_in, g.in_size(), dy, db);                                                         \
  }

// The fused block on the route conv_forward takes: direct small-C_in, else im2col + gemm.
bool conv_relu_pool_fusable(const ConvGeom& g) {
  if (direct_route(g)) return direct_small_cin_relu_pool_supported(g);
  return gemm_relu_pool_supported(g);
}
void conv_relu_pool_forward(const ConvGeom& g, const float* x, const float* w, const float* bias, float* y) {
  if (direct_route(g)) {
    note_route(g, "direct small-C_in + relu + max-pool 2x2");
    direct_small_cin_relu_pool_forward(g, x, w, bias, y);
    return;
  }
  if (onednn_relu_pool_forward(g, x, w, bias, y)) return note_route(g, "onednn jit + relu + max-pool 2x2");
  note_route(g, "im2col + gemm + relu + max-pool 2x2");
  gemm_relu_pool_forward(g, x, w, bias, y);
}
void im2col_rows(const ConvGeom& g, const float* x, float* cols, std::int64_t ra, std::int64_t rb) {
  im2col(g, g.c_in, x, cols, ra, rb);
}

std::string conv_forward_routes() {
  std::string s;
  for (const auto& r : t_routes)
    s += (s.empty() ? "" : "; ") + std::string(r.route) + " [" + std::to_string(r.c_in) + "->" + std::to_string(r.c_out) +
         " " + std::to_string(r.kh) + "x" + std::to_string(r.kw) + "]";
  return s;
}
void reset_conv_forward_routes() { t_routes.clear(); }
void set_conv_direct(bool on) { g_conv_direct.store(on, std::memory_order_relaxed); }
std::string conv_direct_target() { return simd::conv_rows_target(); }

TENSOR_NN_CONV_TYPED(float)
TENSOR_NN_CONV_TYPED(double)
#undef TENSOR_NN_CONV_TYPED

}  // namespace tensor::cpu::nn
