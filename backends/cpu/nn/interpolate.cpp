// Interpolation on the CPU: per axis a table of up to 4 (index, weight) taps per output
// sample, applied separably (width, then height); the backward applies the transposed tables.
#include "backends/cpu/nn/interpolate.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "backends/cpu/nn/nn_gemm.hpp"
#include "lib/core/nn_shape.hpp"

namespace tensor::cpu::nn {
namespace {

using I = std::int64_t;
using Mode = tensor::nn::InterpolateMode;

struct Taps {
  std::size_t n = 1;          // taps per output sample
  std::vector<I> idx;         // [out * n]
  std::vector<double> w;      // [out * n]
};

double cubic_near(double x, double a) { return ((a + 2) * x - (a + 3)) * x * x + 1; }     // |x| <= 1
double cubic_far(double x, double a) { return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a; }  // 1 < |x| < 2

Taps make_taps(std::size_t in_sz, std::size_t out_sz, const tensor::nn::InterpolateOptions& o) {
  Taps t;
  const I in = static_cast<I>(in_sz), out = static_cast<I>(out_sz);
  const bool linear = o.mode == Mode::Bilinear, cubic = o.mode == Mode::Bicubic;
  t.n = linear ? 2 : cubic ? 4 : 1;
  t.idx.resize(out_sz * t.n);
  t.w.resize(out_sz * t.n);
  auto src_of = [&](I dst) {
    if (o.align_corners) return out > 1 ? static_cast<double>(dst) * static_cast<double>(in - 1) / static_cast<double>(out - 1) : 0.0;
    return (static_cast<double>(dst) + 0.5) * static_cast<double>(in) / static_cast<double>(out) - 0.5;
  };
  for (I dst = 0; dst < out; ++dst) {
    I* ix = t.idx.data() + dst * static_cast<I>(t.n);
    double* wx = t.w.data() + dst * static_cast<I>(t.n);
    if (o.mode == Mode::Nearest) {
      ix[0] = std::min((dst * in) / out, in - 1);  // exact integer rule (§6.8), not torch's float32 one
      wx[0] = 1;
    } else if (o.mode == Mode::NearestExact) {
      ix[0] = std::min(((2 * dst + 1) * in) / (2 * out), in - 1);
      wx[0] = 1;
    } else if (linear) {
      const double src = o.align_corners ? src_of(dst) : std::max(0.0, src_of(dst));
      const I i0 = std::min(static_cast<I>(std::floor(src)), in - 1);
      const double lam = std::min(std::max(src - static_cast<double>(i0), 0.0), 1.0);
      ix[0] = i0;
      ix[1] = std::min(i0 + 1, in - 1);
      wx[0] = 1 - lam;
      wx[1] = lam;
    } else {
      const double a = -0.75, src = src_of(dst);
      const double f = std::floor(src);
      const I i0 = static_cast<I>(f);
      const double x = src - f;
      for (I k = 0; k < 4; ++k) ix[k] = std::clamp<I>(i0 - 1 + k, 0, in - 1);
      wx[0] = cubic_far(x + 1, a);
      wx[1] = cubic_near(x, a);
      wx[2] = cubic_near(1 - x, a);
      wx[3] = cubic_far(2 - x, a);
    }
  }
  return t;
}

template <class T>
void forward(const InterpGeom& g, const T* x, T* y) {
  const Taps th = make_taps(g.in_h, g.out_h, g.options), tw = make_taps(g.in_w, g.out_w, g.options);
  const std::size_t S = g.in_h * g.in_w, O = g.out_h * g.out_w;
  for_items(g.planes, static_cast<double>(O * th.n * tw.n), [&](std::size_t p) {
    std::vector<double> tmp(g.in_h * g.out_w);  // width pass
    const T* xp = x + p * S;
    for (std::size_t ih = 0; ih < g.in_h; ++ih)
      for (std::size_t ow = 0; ow < g.out_w; ++ow) {
        double s = 0;
        for (std::size_t k = 0; k < tw.n; ++k)
          s += tw.w[ow * tw.n + k] * static_cast<double>(xp[ih * g.in_w + static_cast<std::size_t>(tw.idx[ow * tw.n + k])]);
        tmp[ih * g.out_w + ow] = s;
      }
    T* yp = y + p * O;
    for (std::size_t oh = 0; oh < g.out_h; ++oh)
      for (std::size_t ow = 0; ow < g.out_w; ++ow) {
        double s = 0;
        for (std::size_t k = 0; k < th.n; ++k)
          s += th.w[oh * th.n + k] * tmp[static_cast<std::size_t>(th.idx[oh * th.n + k]) * g.out_w + ow];
        yp[oh * g.out_w + ow] = static_cast<T>(s);
      }
  });
}

template <class T>
void backward(const InterpGeom& g, const T* dy, T* dx) {
  const Taps th = make_taps(g.in_h, g.out_h, g.options), tw = make_taps(g.in_w, g.out_w, g.options);
  const std::size_t S = g.in_h * g.in_w, O = g.out_h * g.out_w;
  for_items(g.planes, static_cast<double>(O * th.n * tw.n), [&](std::size_t p) {
    std::vector<double> tmp(g.in_h * g.out_w, 0.0), acc(S, 0.0);
    const T* dyp = dy + p * O;
    for (std::size_t oh = 0; oh < g.out_h; ++oh)
      for (std::size_t ow = 0; ow < g.out_w; ++ow) {
        const double v = static_cast<double>(dyp[oh * g.out_w + ow]);
        for (std::size_t k = 0; k < th.n; ++k)
          tmp[static_cast<std::size_t>(th.idx[oh * th.n + k]) * g.out_w + ow] += th.w[oh * th.n + k] * v;
      }
    for (std::size_t ih = 0; ih < g.in_h; ++ih)
      for (std::size_t ow = 0; ow < g.out_w; ++ow) {
        const double v = tmp[ih * g.out_w + ow];
        for (std::size_t k = 0; k < tw.n; ++k)
          acc[ih * g.in_w + static_cast<std::size_t>(tw.idx[ow * tw.n + k])] += tw.w[ow * tw.n + k] * v;
      }
    T* dxp = dx + p * S;
    for (std::size_t i = 0; i < S; ++i) dxp[i] = static_cast<T>(acc[i]);
  });
}

template <class T>
void embedding_bw(std::size_t n_emb, std::size_t d, std::size_t count, const I* indices, const T* dy, T* dw) {
  for (std::size_t i = 0; i < count; ++i)
    if (indices[i] < 0 || static_cast<std::size_t>(indices[i]) >= n_emb)
      throw IndexError("[embedding_backward] index out of range; expected indices in [0, " + std::to_string(n_emb) +
                       "); got " + std::to_string(indices[i]) + " at position " + std::to_string(i));
  std::fill(dw, dw + n_emb * d, T(0));
  for (std::size_t i = 0; i < count; ++i) {
    T* row = dw + static_cast<std::size_t>(indices[i]) * d;
    const T* src = dy + i * d;
    for (std::size_t c = 0; c < d; ++c) row[c] += src[c];
  }
}

}  // namespace

InterpGeom interpolate_geom(std::string_view op, const Shape& x, const std::array<I, 2>& size,
                            const tensor::nn::InterpolateOptions& o) {
  const Shape y = tensor::core::interpolate_output_shape(op, x, size);
  InterpGeom g;
  g.planes = x[0] * x[1];
  g.in_h = x[2];
  g.in_w = x[3];
  g.out_h = y[2];
  g.out_w = y[3];
  g.options = o;
  return g;
}

void interpolate_forward(const InterpGeom& g, const float* x, float* y) { forward(g, x, y); }
void interpolate_forward(const InterpGeom& g, const double* x, double* y) { forward(g, x, y); }
void interpolate_backward(const InterpGeom& g, const float* dy, float* dx) { backward(g, dy, dx); }
void interpolate_backward(const InterpGeom& g, const double* dy, double* dx) { backward(g, dy, dx); }
void embedding_backward(std::size_t n_emb, std::size_t d, std::size_t count, const I* indices, const float* dy,
                        float* dw) {
  embedding_bw(n_emb, d, count, indices, dy, dw);
}
void embedding_backward(std::size_t n_emb, std::size_t d, std::size_t count, const I* indices, const double* dy,
                        double* dw) {
  embedding_bw(n_emb, d, count, indices, dy, dw);
}

}  // namespace tensor::cpu::nn
