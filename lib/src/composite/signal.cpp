// tensor/signal.hpp's compositions: the window functions, cfft, and stft / istft (torch's
// semantics, and burn's [B, frames, bins, 2] form), composed from Tensor ops and
// nn::rfft / nn::irfft.
#include "tensor/signal.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numbers>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "tensor/error.hpp"
#include "tensor/nn.hpp"

namespace tensor::signal {

namespace {

// a0 - a1 cos(2 pi n / N) + a2 cos(4 pi n / N).
Tensor<1> cosine_window(std::size_t size, bool periodic, double a0, double a1, double a2, Device device) {
  if (size == 1) return Tensor<1>::ones({1}, device);
  const auto n = Tensor<1, Int>::arange(0, static_cast<std::int64_t>(size), device).float_();
  const double w = 2.0 * std::numbers::pi / static_cast<double>(periodic ? size : size - 1);
  auto out = (n * w).cos() * (-a1) + a0;
  if (a2 != 0.0) out = out + (n * (2.0 * w)).cos() * a2;
  return out;
}

Tensor<1> with_options(Tensor<1> w, const TensorCreationOptions& o) { return o.dtype ? w.cast(*o.dtype) : w; }

// The n-bin spectrum from the n / 2 + 1 bins of a real signal's rfft along dim:
// X[n - k] = conj(X[k]).
template <std::size_t D>
std::pair<Tensor<D>, Tensor<D>> hermitian_extend(const Tensor<D>& re, const Tensor<D>& im, std::int64_t dim, std::size_t n) {
  const std::size_t half = re.dims()[static_cast<std::size_t>(dim)];
  if (n <= half) return {re, im};
  const std::size_t mirror = n - half;
  const Tensor<D> mr = re.narrow(dim, 1, mirror).flip({dim});
  const Tensor<D> mi = im.narrow(dim, 1, mirror).flip({dim}).neg();
  return {cat(std::vector<Tensor<D>>{re, mr}, dim), cat(std::vector<Tensor<D>>{im, mi}, dim)};
}

template <std::size_t D>
std::pair<detail::Handle, detail::Handle> cfft_of(detail::Handle re_, detail::Handle im_, std::int64_t dim,
                                                  std::optional<std::size_t> n) {
  const Tensor<D> re(re_), im(im_);
  if (!(re.shape() == im.shape()))
    throw ShapeError("[cfft] real and imaginary parts must have one shape; expected " + re.shape().to_string() + "; got " +
                     im.shape().to_string());
  const auto r = static_cast<std::int64_t>(D);
  const std::int64_t d = dim < 0 ? dim + r : dim;
  if (d < 0 || d >= r)
    throw IndexError("[cfft] dim out of range; expected " + std::to_string(-r) + ".." + std::to_string(r - 1) + "; got " +
                     std::to_string(dim));
  const std::size_t len = n ? *n : re.dims()[static_cast<std::size_t>(d)];
  if (len == 0) throw ShapeError("[cfft] expected an fft length n >= 1; got 0");
  auto [xr, xi] = nn::rfft(re, d, len);
  auto [yr, yi] = nn::rfft(im, d, len);
  std::tie(xr, xi) = hermitian_extend(xr, xi, d, len);
  std::tie(yr, yi) = hermitian_extend(yr, yi, d, len);
  return {detail::copy(xr - yi), detail::copy(xi + yr)};  // (Xr + i Xi) + i (Yr + i Yi)
}

template <std::size_t... R>
std::pair<detail::Handle, detail::Handle> cfft_rank(std::size_t rank, detail::Handle re, detail::Handle im, std::int64_t dim,
                                                    std::optional<std::size_t> n, std::index_sequence<R...>) {
  std::pair<detail::Handle, detail::Handle> out;
  const bool done = ((rank == R + 1 ? (out = cfft_of<R + 1>(re, im, dim, n), true) : false) || ...);
  if (!done) {
    detail::release(re);
    detail::release(im);
    throw ShapeError("[cfft] expected a rank of 1.." + std::to_string(kMaxRank) + "; got " + std::to_string(rank));
  }
  return out;
}

struct StftGeom {
  std::size_t n_fft, hop, win;
};
StftGeom stft_geom(const char* op, std::size_t n_fft, const StftOptions& o) {
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
Tensor<1> stft_window(const StftGeom& g, const StftOptions& o, Device device) {
  Tensor<1> w = o.window ? *o.window : Tensor<1>::ones({g.win}, device);
  if (g.win == g.n_fft) return w;
  const std::size_t left = (g.n_fft - g.win) / 2;
  return w.pad({{left, g.n_fft - g.win - left}}, PadMode::constant(Scalar(0.0)));
}

// burn's form: `window`, when given, replaces options.window; hop_length 0 is max(1, n_fft / 4).
StftOptions burn_options(const std::optional<Tensor<1>>& window, const StftOptions& options) {
  StftOptions o = options;
  if (window) o.window = window;
  if (o.hop_length == 0) o.hop_length = std::max<std::size_t>(1, o.n_fft / 4);
  return o;
}

}  // namespace

Tensor<1> hann_window(std::size_t size, bool periodic, Device device) {
  return cosine_window(size, periodic, 0.5, 0.5, 0.0, device);
}
Tensor<1> hamming_window(std::size_t size, bool periodic, Device device) {
  return cosine_window(size, periodic, 25.0 / 46.0, 21.0 / 46.0, 0.0, device);  // burn's alpha, beta
}
Tensor<1> blackman_window(std::size_t size, bool periodic, Device device) {
  return cosine_window(size, periodic, 0.42, 0.5, 0.08, device);
}
Tensor<1> hann_window(std::size_t size, bool periodic, const TensorCreationOptions& o) {
  return with_options(hann_window(size, periodic, o.device), o);
}
Tensor<1> hamming_window(std::size_t size, bool periodic, const TensorCreationOptions& o) {
  return with_options(hamming_window(size, periodic, o.device), o);
}
Tensor<1> blackman_window(std::size_t size, bool periodic, const TensorCreationOptions& o) {
  return with_options(blackman_window(size, periodic, o.device), o);
}

namespace detail_ {
std::pair<detail::Handle, detail::Handle> cfft(detail::Handle&& re, detail::Handle&& im, std::size_t rank, std::int64_t dim,
                                               std::optional<std::size_t> n) {
  const detail::Handle r = std::exchange(re, detail::Handle{}), i = std::exchange(im, detail::Handle{});
  return cfft_rank(rank, r, i, dim, n, std::make_index_sequence<kMaxRank>{});
}
}  // namespace detail_

std::pair<Tensor<3>, Tensor<3>> stft(const Tensor<2>& x, std::size_t n_fft, const StftOptions& o) {
  const StftGeom g = stft_geom("stft", n_fft, o);
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
  const Tensor<1> w = stft_window(g, o, x.device());
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

std::pair<Tensor<2>, Tensor<2>> stft(const Tensor<1>& x, std::size_t n_fft, const StftOptions& o) {
  auto [re, im] = stft(x.unsqueeze<2>(), n_fft, o);
  return {re.squeeze_dim<2>(0), im.squeeze_dim<2>(0)};
}

Tensor<2> istft(const Tensor<3>& re, const Tensor<3>& im, std::size_t n_fft, const StftOptions& o,
                std::optional<std::size_t> length) {
  const StftGeom g = stft_geom("istft", n_fft, o);
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
  const Tensor<1> w = stft_window(g, o, device);
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

Tensor<1> istft(const Tensor<2>& re, const Tensor<2>& im, std::size_t n_fft, const StftOptions& o,
                std::optional<std::size_t> length) {
  return istft(re.unsqueeze<3>(), im.unsqueeze<3>(), n_fft, o, length).squeeze_dim<1>(0);
}

Tensor<4> stft(const Tensor<2>& x, const std::optional<Tensor<1>>& window, const StftOptions& options) {
  const StftOptions o = burn_options(window, options);
  auto [re, im] = stft(x, o.n_fft, o);  // [B, bins, frames]
  return Tensor<3>::stack<4>({re.swap_dims(1, 2), im.swap_dims(1, 2)}, 3);
}

Tensor<2> istft(const Tensor<4>& spectrum, const std::optional<Tensor<1>>& window, std::optional<std::size_t> length,
                const StftOptions& options) {
  if (spectrum.dims()[3] != 2)
    throw ShapeError("[istft] expected [batch, frames, bins, 2] with (re, im) in the last dim; got shape " +
                     spectrum.shape().to_string());
  const StftOptions o = burn_options(window, options);
  const Tensor<3> re = spectrum.narrow(3, 0, 1).squeeze_dim<3>(3).swap_dims(1, 2);
  const Tensor<3> im = spectrum.narrow(3, 1, 1).squeeze_dim<3>(3).swap_dims(1, 2);
  return istft(re, im, o.n_fft, o, length);
}

}  // namespace tensor::signal
