// deform_conv2d on the CPU: per sample, cols[c·K + k, p] = bilinear(x[c], p + offset) · mask,
// then y_g = W_g @ cols_g per weight group; the backward runs dcols = W_gᵀ @ dy_g and
// distributes each dcols entry to x (the 4 corners), the offsets and the mask.
#include "backends/cpu/nn/deform_conv.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "backends/cpu/nn/nn_gemm.hpp"
#include "lib/core/nn_shape.hpp"

namespace tensor::cpu::nn {
namespace {

using I = std::int64_t;

// The sample of one (channel, tap, output position): where it reads and with what weights.
struct Sample {
  bool inside = false;  // within the open box (-1, H) x (-1, W)
  I h0 = 0, w0 = 0;
  double lh = 0, lw = 0;
};

Sample locate(double ph, double pw, I H, I W) {
  Sample s;
  if (ph <= -1 || ph >= static_cast<double>(H) || pw <= -1 || pw >= static_cast<double>(W)) return s;
  s.inside = true;
  const double fh = std::floor(ph), fw = std::floor(pw);
  s.h0 = static_cast<I>(fh);
  s.w0 = static_cast<I>(fw);
  s.lh = ph - fh;
  s.lw = pw - fw;
  return s;
}

template <class T>
double at(const T* xc, I H, I W, I h, I w) {
  return h < 0 || w < 0 || h >= H || w >= W ? 0.0 : static_cast<double>(xc[h * W + w]);
}

template <class T>
double bilinear(const T* xc, I H, I W, const Sample& s) {
  if (!s.inside) return 0.0;
  return (1 - s.lh) * (1 - s.lw) * at(xc, H, W, s.h0, s.w0) + (1 - s.lh) * s.lw * at(xc, H, W, s.h0, s.w0 + 1) +
         s.lh * (1 - s.lw) * at(xc, H, W, s.h0 + 1, s.w0) + s.lh * s.lw * at(xc, H, W, s.h0 + 1, s.w0 + 1);
}

// Visits every (channel c, tap k, output position p) of a sample: f(c, k, p, offset group, ho, wo).
template <class F>
void for_taps(const DeformGeom& dg, F&& f) {
  const ConvGeom& g = dg.conv;
  const std::size_t K = g.kernel[1] * g.kernel[2], Wo = g.out[2], P = g.out[1] * g.out[2];
  const std::size_t cpo = g.c_in / dg.offset_groups;
  for (std::size_t c = 0; c < g.c_in; ++c)
    for (std::size_t k = 0; k < K; ++k)
      for (std::size_t p = 0; p < P; ++p) f(c, k, p, c / cpo, p / Wo, p % Wo);
}

template <class T>
struct Ctx {
  const DeformGeom& dg;
  std::size_t K, P, kw;
  I H, W;
  // Sampling position of tap k at output p (ho, wo) for offset group og of sample n.
  void pos(const T* off_n, std::size_t og, std::size_t k, std::size_t ho, std::size_t wo, double& ph,
           double& pw) const {
    const ConvGeom& g = dg.conv;
    const std::size_t i = k / kw, j = k % kw;
    const T* o = off_n + (og * 2 * K + 2 * k) * P + ho * g.out[2] + wo;
    ph = static_cast<double>(static_cast<I>(ho) * g.stride[1] - g.padding[1] + static_cast<I>(i) * g.dilation[1]) +
         static_cast<double>(o[0]);
    pw = static_cast<double>(static_cast<I>(wo) * g.stride[2] - g.padding[2] + static_cast<I>(j) * g.dilation[2]) +
         static_cast<double>(o[P]);
  }
};

template <class T>
void build_cols(const Ctx<T>& cx, const T* xn, const T* off_n, const T* mask_n, T* cols) {
  const ConvGeom& g = cx.dg.conv;
  for_taps(cx.dg, [&](std::size_t c, std::size_t k, std::size_t p, std::size_t og, std::size_t ho, std::size_t wo) {
    double ph, pw;
    cx.pos(off_n, og, k, ho, wo, ph, pw);
    double v = bilinear(xn + c * g.in_size(), cx.H, cx.W, locate(ph, pw, cx.H, cx.W));
    if (mask_n) v *= static_cast<double>(mask_n[(og * cx.K + k) * cx.P + p]);
    cols[(c * cx.K + k) * cx.P + p] = static_cast<T>(v);
  });
}

template <class T>
void forward(const DeformGeom& dg, const T* x, const T* offset, const T* weight, const T* mask, const T* bias, T* y) {
  const ConvGeom& g = dg.conv;
  const Ctx<T> cx{dg, g.kernel_size(), g.out_size(), g.kernel[2], static_cast<I>(g.in[1]), static_cast<I>(g.in[2])};
  const std::size_t cgi = g.c_in / g.groups, cgo = g.c_out / g.groups, Kc = cgi * cx.K;
  const std::size_t off_per = 2 * dg.offset_groups * cx.K * cx.P, mask_per = dg.offset_groups * cx.K * cx.P;
  std::vector<T> cols(g.c_in * cx.K * cx.P);
  const int threads = gemm_threads(cgo, cx.P, Kc, nn_threads());
  for (std::size_t n = 0; n < g.batch; ++n) {
    build_cols(cx, x + n * g.c_in * g.in_size(), offset + n * off_per, mask ? mask + n * mask_per : nullptr, cols.data());
    for (std::size_t grp = 0; grp < g.groups; ++grp)
      nn_gemm<T>(false, false, cgo, cx.P, Kc, T(1), weight + grp * cgo * Kc, Kc, cols.data() + grp * Kc * cx.P, cx.P,
                 T(0), y + (n * g.c_out + grp * cgo) * cx.P, cx.P, threads);
    if (bias)
      for (std::size_t o = 0; o < g.c_out; ++o)
        for (std::size_t p = 0; p < cx.P; ++p) y[(n * g.c_out + o) * cx.P + p] += bias[o];
  }
}

template <class T>
void backward(const DeformGeom& dg, const T* x, const T* offset, const T* weight, const T* mask, const T* dy, T* dx,
              T* doffset, T* dweight, T* dmask, T* dbias) {
  const ConvGeom& g = dg.conv;
  const Ctx<T> cx{dg, g.kernel_size(), g.out_size(), g.kernel[2], static_cast<I>(g.in[1]), static_cast<I>(g.in[2])};
  const std::size_t cgi = g.c_in / g.groups, cgo = g.c_out / g.groups, Kc = cgi * cx.K;
  const std::size_t off_per = 2 * dg.offset_groups * cx.K * cx.P, mask_per = dg.offset_groups * cx.K * cx.P;
  const I H = cx.H, W = cx.W;
  std::vector<T> cols(g.c_in * cx.K * cx.P), dcols(cols.size());
  std::vector<double> dxn(g.c_in * g.in_size()), doff(off_per), dm(mask_per);
  const int threads = gemm_threads(cgo, cx.P, Kc, nn_threads());
  std::fill(dweight, dweight + g.c_out * Kc, T(0));
  for (std::size_t n = 0; n < g.batch; ++n) {
    const T* xn = x + n * g.c_in * g.in_size();
    const T* off_n = offset + n * off_per;
    const T* mask_n = mask ? mask + n * mask_per : nullptr;
    const T* dyn = dy + n * g.c_out * cx.P;
    build_cols(cx, xn, off_n, mask_n, cols.data());
    for (std::size_t grp = 0; grp < g.groups; ++grp) {
      const T* wg = weight + grp * cgo * Kc;
      const T* dyg = dyn + grp * cgo * cx.P;
      nn_gemm<T>(true, false, Kc, cx.P, cgo, T(1), wg, Kc, dyg, cx.P, T(0), dcols.data() + grp * Kc * cx.P, cx.P, threads);
      nn_gemm<T>(false, true, cgo, Kc, cx.P, T(1), dyg, cx.P, cols.data() + grp * Kc * cx.P, cx.P, T(1),
                 dweight + grp * cgo * Kc, Kc, threads);
    }
    std::fill(dxn.begin(), dxn.end(), 0.0);
    std::fill(doff.begin(), doff.end(), 0.0);
    std::fill(dm.begin(), dm.end(), 0.0);
    for_taps(dg, [&](std::size_t c, std::size_t k, std::size_t p, std::size_t og, std::size_t ho, std::size_t wo) {
      const double G = static_cast<double>(dcols[(c * cx.K + k) * cx.P + p]);
      if (G == 0) return;
      double ph, pw;
      cx.pos(off_n, og, k, ho, wo, ph, pw);
      const Sample s = locate(ph, pw, H, W);
      if (!s.inside) return;
      const T* xc = xn + c * g.in_size();
      const std::size_t mi = (og * cx.K + k) * cx.P + p;
      const double m = mask_n ? static_cast<double>(mask_n[mi]) : 1.0, gm = G * m;
      if (mask_n) dm[mi] += G * bilinear(xc, H, W, s);
      const double v00 = at(xc, H, W, s.h0, s.w0), v01 = at(xc, H, W, s.h0, s.w0 + 1),
                   v10 = at(xc, H, W, s.h0 + 1, s.w0), v11 = at(xc, H, W, s.h0 + 1, s.w0 + 1);
      const std::size_t oi = (og * 2 * cx.K + 2 * k) * cx.P + p;
      doff[oi] += gm * ((1 - s.lw) * (v10 - v00) + s.lw * (v11 - v01));
      doff[oi + cx.P] += gm * ((1 - s.lh) * (v01 - v00) + s.lh * (v11 - v10));
      double* dxc = dxn.data() + c * g.in_size();
      auto add = [&](I h, I w, double wt) {
        if (h >= 0 && w >= 0 && h < H && w < W) dxc[h * W + w] += gm * wt;
      };
      add(s.h0, s.w0, (1 - s.lh) * (1 - s.lw));
      add(s.h0, s.w0 + 1, (1 - s.lh) * s.lw);
      add(s.h0 + 1, s.w0, s.lh * (1 - s.lw));
      add(s.h0 + 1, s.w0 + 1, s.lh * s.lw);
    });
    std::transform(dxn.begin(), dxn.end(), dx + n * g.c_in * g.in_size(), [](double v) { return static_cast<T>(v); });
    std::transform(doff.begin(), doff.end(), doffset + n * off_per, [](double v) { return static_cast<T>(v); });
    if (dmask) std::transform(dm.begin(), dm.end(), dmask + n * mask_per, [](double v) { return static_cast<T>(v); });
  }
  if (dbias)
    for (std::size_t o = 0; o < g.c_out; ++o) {
      double s = 0;
      for (std::size_t n = 0; n < g.batch; ++n)
        for (std::size_t p = 0; p < cx.P; ++p) s += static_cast<double>(dy[(n * g.c_out + o) * cx.P + p]);
      dbias[o] = static_cast<T>(s);
    }
}

}  // namespace

DeformGeom deform_conv2d_geom(std::string_view op, const Shape& x, const Shape& offset, const Shape& weight,
                              const Shape* mask, const Shape* bias, const tensor::nn::DeformConvOptions<2>& o) {
  tensor::core::deform_conv2d_output_shape(op, x, offset, weight, mask, bias, o);
  tensor::nn::ConvOptions<2> co;
  co.stride = o.stride;
  co.padding = o.padding;
  co.dilation = o.dilation;
  co.groups = o.weight_groups;
  DeformGeom g;
  g.conv = conv_geom<2>(op, x, weight, co);
  g.offset_groups = static_cast<std::size_t>(o.offset_groups);
  return g;
}

#define TENSOR_NN_DEFORM_TYPED(T)                                                                            \
  void deform_conv2d_forward(const DeformGeom& g, const T* x, const T* offset, const T* weight, const T* mask, \
                             const T* bias, T* y) {                                                          \
    forward(g, x, offset, weight, mask, bias, y);                                                            \
  }                                                                                                          \
  void deform_conv2d_backward(const DeformGeom& g, const T* x, const T* offset, const T* weight, const T* mask, \
                              const T* dy, T* dx, T* doffset, T* dweight, T* dmask, T* dbias) {              \
    backward(g, x, offset, weight, mask, dy, dx, doffset, dweight, dmask, dbias);                            \
  }

TENSOR_NN_DEFORM_TYPED(float)
TENSOR_NN_DEFORM_TYPED(double)
#undef TENSOR_NN_DEFORM_TYPED

}  // namespace tensor::cpu::nn
