// Window functions (burn's signal helpers) and the short-time Fourier transform, composed
// from Tensor ops and nn::rfft / nn::irfft; included by nothing else. periodic = true gives
// the window of size + 1 points without its last one (for spectral analysis), false the
// symmetric window. A size of 1 is [1].
#pragma once

#include <cmath>
#include <cstdint>
#include <numbers>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tensor/error.hpp"
#include "tensor/nn.hpp"
#include "tensor/tensor.hpp"

namespace tensor::signal {

namespace detail_ {
// a0 - a1 cos(2 pi n / N) + a2 cos(4 pi n / N).
inline Tensor<1> cosine_window(std::size_t size, bool periodic, double a0, double a1, double a2, Device device) {
  if (size == 1) return Tensor<1>::ones({1}, device);
  const auto n = Tensor<1, Int>::arange(0, static_cast<std::int64_t>(size), device).float_();
  const double w = 2.0 * std::numbers::pi / static_cast<double>(periodic ? size : size - 1);
  auto out = (n * w).cos() * (-a1) + a0;
  if (a2 != 0.0) out = out + (n * (2.0 * w)).cos() * a2;
  return out;
}
}  // namespace detail_

inline Tensor<1> hann_window(std::size_t size, bool periodic = true, Device device = Device::default_device()) {
  return detail_::cosine_window(size, periodic, 0.5, 0.5, 0.0, device);
}
inline Tensor<1> hamming_window(std::size_t size, bool periodic = true, Device device = Device::default_device()) {
  return detail_::cosine_window(size, periodic, 25.0 / 46.0, 21.0 / 46.0, 0.0, device);  // burn's alpha, beta
}
inline Tensor<1> blackman_window(std::size_t size, bool periodic = true, Device device = Device::default_device()) {
  return detail_::cosine_window(size, periodic, 0.42, 0.5, 0.08, device);
}

// ---- stft / istft ---------------------------------------------------------------------
// burn has no stft; these follow torch.stft / torch.istft (return_complex as a (re, im)
// pair of real tensors). hop_length 0 means n_fft / 4, win_length 0 means n_fft, no window
// means ones(win_length); a window shorter than n_fft is zero-padded on both sides to
// n_fft (centred). center pads n_fft / 2 on both sides of the signal with pad_mode
// (reflect by default, as torch; reflect needs the pad to be shorter than the signal).
// normalized scales the spectrum by 1 / sqrt(n_fft) (istft undoes it); onesided keeps the
// n_fft / 2 + 1 bins of a real signal, otherwise all n_fft (the rest conjugate-symmetric).
struct StftOptions {
  std::size_t hop_length = 0;
  std::size_t win_length = 0;
  std::optional<Tensor<1>> window;
  bool center = true;
  PadMode pad_mode = PadMode::reflect();
  bool normalized = false;
  bool onesided = true;
};

namespace detail_ {
struct StftGeom {
  std::size_t n_fft, hop, win;
};
inline StftGeom stft_geom(const char* op, std::size_t n_fft, const StftOptions& o) {
  const std::string tag = std::string("[") + op + "] ";
  if (n_fft < 1) throw ShapeError(tag + "expected n_fft >= 1; got 0");
  const StftGeom g{n_fft, o.hop_length ? o.hop_length : n_fft / 4, o.win_length ? o.win_length : n_fft};
  if (g.hop < 1)
    throw ShapeError(tag + "expected hop_length >= 1; got the default n_fft / 4 = 0 for n_fft " + std::to_string(n_fft) +
                     " (pass hop_length)");
  if (g.win > n_fft)
    throw ShapeError(tag + "expected win_length <= n_fft = " + std::to_string(n_fft) + "; got " + std::to_string(g.win));
  if (o.window && o.window->dims()[0] != g.win)
    throw ShapeError(tag + "the window must have win_length = " + std::to_string(g.win) + " points; got " +
                     std::to_string(o.window->dims()[0]));
  return g;
}
// The window zero-padded (centred) to n_fft points.
inline Tensor<1> stft_window(const StftGeom& g, const StftOptions& o, Device device) {
  Tensor<1> w = o.window ? *o.window : Tensor<1>::ones({g.win}, device);
  if (g.win == g.n_fft) return w;
  const std::size_t left = (g.n_fft - g.win) / 2;
  return w.pad({{left, g.n_fft - g.win - left}}, PadMode::constant(Scalar(0.0)));
}
}  // namespace detail_

// x [B, L] -> (re, im) [B, bins, frames], bins = n_fft / 2 + 1 (onesided) or n_fft, frames =
// 1 + (L' - n_fft) / hop_length with L' the (padded) signal length.
inline std::pair<Tensor<3>, Tensor<3>> stft(const Tensor<2>& x, std::size_t n_fft, const StftOptions& o = {}) {
  const detail_::StftGeom g = detail_::stft_geom("stft", n_fft, o);
  Tensor<2> xp = x;
  if (o.center) {
    const std::size_t pad = n_fft / 2, len = x.dims()[1];
    if (o.pad_mode.kind == PadMode::Kind::Reflect && pad >= len && pad > 0)
      throw ShapeError("[stft] reflect padding of n_fft / 2 = " + std::to_string(pad) +
                       " needs a longer signal; expected a length > " + std::to_string(pad) + "; got " + std::to_string(len));
    if (pad > 0) xp = x.pad({{pad, pad}}, o.pad_mode);
  }
  if (xp.dims()[1] < n_fft)
    throw ShapeError("[stft] the signal is shorter than one frame; expected a (padded) length >= n_fft = " +
                     std::to_string(n_fft) + "; got " + std::to_string(xp.dims()[1]));
  const Tensor<1> w = detail_::stft_window(g, o, x.device());
  const Tensor<3> frames = xp.unfold(1, n_fft, g.hop) * w.unsqueeze<3>();  // [B, T, n_fft]
  auto [re, im] = nn::rfft(frames, 2);                                        // [B, T, n_fft / 2 + 1]
  re = re.swap_dims(1, 2);
  im = im.swap_dims(1, 2);
  if (o.normalized) {
    const double k = 1.0 / std::sqrt(static_cast<double>(n_fft));
    re = re * k;
    im = im * k;
  }
  const std::size_t half = n_fft / 2 + 1;
  if (!o.onesided && n_fft > half) {  // X[k] = conj(X[n - k]) for k > n / 2
    const auto mirror = [&](const Tensor<3>& t) {
      return t.slice({Slice::all(), Slice::range(1, static_cast<std::int64_t>(n_fft - half + 1))}).flip({1});
    };
    re = cat(std::vector<Tensor<3>>{re, mirror(re)}, 1);
    im = cat(std::vector<Tensor<3>>{im, mirror(im) * -1.0}, 1);
  }
  return {re, im};
}
inline std::pair<Tensor<2>, Tensor<2>> stft(const Tensor<1>& x, std::size_t n_fft, const StftOptions& o = {}) {
  auto [re, im] = stft(x.unsqueeze<2>(), n_fft, o);
  return {re.squeeze_dim<2>(0), im.squeeze_dim<2>(0)};
}

// The inverse: (re, im) [B, bins, frames] -> x [B, length] by irfft of each frame, the
// window applied again, overlap-add, and division by the overlap-added squared window
// (which must be nonzero over the output: torch's NOLA condition). length defaults to
// n_fft + hop (frames - 1), less n_fft / 2 at each end with center; a longer length is
// zero-padded. onesided = false reads only the first n_fft / 2 + 1 bins.
inline Tensor<2> istft(const Tensor<3>& re, const Tensor<3>& im, std::size_t n_fft, const StftOptions& o = {},
                       std::optional<std::size_t> length = std::nullopt) {
  const detail_::StftGeom g = detail_::stft_geom("istft", n_fft, o);
  const Shape s = re.shape();
  if (!(im.shape() == s))
    throw ShapeError("[istft] real and imaginary parts must have one shape; got " + s.to_string() + " and " + im.shape().to_string());
  const std::size_t half = n_fft / 2 + 1, bins = o.onesided ? half : n_fft, b = s[0], t = s[2];
  if (s[1] != bins)
    throw ShapeError("[istft] expected " + std::to_string(bins) + " frequency bins for n_fft " + std::to_string(n_fft) +
                     (o.onesided ? " (onesided)" : " (two-sided)") + "; got shape " + s.to_string());
  if (t < 1) throw ShapeError("[istft] expected at least one frame; got shape " + s.to_string());
  Tensor<3> r = re, i = im;
  if (!o.onesided) {
    r = r.slice({Slice::all(), Slice::range(0, static_cast<std::int64_t>(half))});
    i = i.slice({Slice::all(), Slice::range(0, static_cast<std::int64_t>(half))});
  }
  if (o.normalized) {
    const double k = std::sqrt(static_cast<double>(n_fft));
    r = r * k;
    i = i * k;
  }
  const Device device = re.device();
  const Tensor<1> w = detail_::stft_window(g, o, device);
  const Tensor<3> frames = nn::irfft(r.swap_dims(1, 2), i.swap_dims(1, 2), 2, n_fft) * w.unsqueeze<3>();  // [B, T, n_fft]
  const std::size_t total = n_fft + g.hop * (t - 1);
  std::vector<std::int32_t> pos(t * n_fft);
  for (std::size_t f = 0; f < t; ++f)
    for (std::size_t j = 0; j < n_fft; ++j) pos[f * n_fft + j] = static_cast<std::int32_t>(f * g.hop + j);
  const auto idx = Tensor<1, Int>::from_data(TensorData::from<std::int32_t>(pos, {pos.size()}), device);
  const auto flat = frames.reshape<2>({static_cast<std::int64_t>(b), static_cast<std::int64_t>(t * n_fft)});
  const Tensor<2> y = Tensor<2>::zeros({b, total}, device).select_assign(1, idx, flat, IndexingUpdateOp::Add);
  const Tensor<1> env = Tensor<1>::zeros({total}, device).select_assign(0, idx, (w * w).repeat_dim(0, t), IndexingUpdateOp::Add);
  const std::size_t start = o.center ? n_fft / 2 : 0;
  const std::size_t end = length ? start + *length : (o.center ? total - n_fft / 2 : total);
  const std::size_t stop = std::min(end, total);
  if (stop <= start) return Tensor<2>::zeros({b, end - start}, device);
  const auto span = Slice::range(static_cast<std::int64_t>(start), static_cast<std::int64_t>(stop));
  const Tensor<1> e = env.slice({span});
  const double lowest = e.abs().min().into_scalar().to_double();
  if (!(lowest > 1e-11))
    throw ShapeError("[istft] the overlap-added squared window is zero inside the output; expected a window and hop_length "
                     "whose overlap-add is nonzero everywhere (NOLA); got a minimum of " + std::to_string(lowest));
  Tensor<2> out = y.slice({Slice::all(), span}) / e.unsqueeze<2>();
  if (end > stop) out = out.pad({{0, end - stop}}, PadMode::constant(Scalar(0.0)));
  return out;
}
inline Tensor<1> istft(const Tensor<2>& re, const Tensor<2>& im, std::size_t n_fft, const StftOptions& o = {},
                       std::optional<std::size_t> length = std::nullopt) {
  return istft(re.unsqueeze<3>(), im.unsqueeze<3>(), n_fft, o, length).squeeze_dim<1>(0);
}

}  // namespace tensor::signal
