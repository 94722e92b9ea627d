// Window functions (burn's signal helpers) and the short-time Fourier transform, composed
// in libtensor.so (lib/src/composite/signal.cpp) from Tensor ops and nn::rfft / nn::irfft;
// included by nothing else. periodic = true gives the window of size + 1 points without its
// last one (for spectral analysis), false the symmetric window. A size of 1 is [1].
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <utility>

#include "tensor/export.hpp"
#include "tensor/tensor.hpp"

/// Signal processing: window functions (hann, hamming, blackman), burn's complex FFT (cfft) and
/// torch-style stft / istft, composed from rfft / irfft and the op table's ops on every device.
namespace tensor::signal {

/// Window functions of `size` points (Float, the device's default float dtype): hann
/// 0.5 - 0.5 cos(2 pi k / N), hamming 25/46 - 21/46 cos(2 pi k / N) (burn's coefficients),
/// blackman 0.42 - 0.5 cos(2 pi k / N) + 0.08 cos(4 pi k / N), with N = size when periodic,
/// size - 1 otherwise (symmetric). A size of 1 is [1].
///@{
TENSOR_API Tensor<1> hann_window(std::size_t size, bool periodic = true, Device device = Device::default_device());
TENSOR_API Tensor<1> hamming_window(std::size_t size, bool periodic = true, Device device = Device::default_device());
TENSOR_API Tensor<1> blackman_window(std::size_t size, bool periodic = true, Device device = Device::default_device());
///@}
/// burn's TensorCreationOptions forms: the window on options.device, cast to options.dtype when set.
///@{
TENSOR_API Tensor<1> hann_window(std::size_t size, bool periodic, const TensorCreationOptions& o);
TENSOR_API Tensor<1> hamming_window(std::size_t size, bool periodic, const TensorCreationOptions& o);
TENSOR_API Tensor<1> blackman_window(std::size_t size, bool periodic, const TensorCreationOptions& o);
///@}

// ---- cfft -----------------------------------------------------------------------------
namespace detail_ {
/// cfft of rank-`rank` Float handles (the template below is its typed face).
TENSOR_API std::pair<detail::Handle, detail::Handle> cfft(detail::Handle&& re, detail::Handle&& im, std::size_t rank,
                                                          std::int64_t dim, std::optional<std::size_t> n);
}  // namespace detail_

/// burn's cfft: the DFT of the complex signal re + i im along dim, X[k] = sum_j x[j]
/// e^{-2 pi i j k / n}, n bins (the signal truncated or zero-padded to n; default its
/// length), as (re, im). Composed from nn::rfft of both parts, so any n >= 1 and every
/// device. ShapeError unless re and im have one shape; IndexError for a bad dim.
template <std::size_t D>
std::pair<Tensor<D>, Tensor<D>> cfft(const Tensor<D>& re, const Tensor<D>& im, std::int64_t dim,
                                     std::optional<std::size_t> n = std::nullopt) {
  auto [r, i] = detail_::cfft(detail::copy(re), detail::copy(im), D, dim, n);
  return {Tensor<D>(r), Tensor<D>(i)};
}

// ---- stft / istft ---------------------------------------------------------------------
/// burn has no stft; these follow torch.stft / torch.istft (return_complex as a (re, im)
/// pair of real tensors). hop_length 0 means n_fft / 4, win_length 0 means n_fft, no window
/// means ones(win_length); a window shorter than n_fft is zero-padded on both sides to
/// n_fft (centred). center pads n_fft / 2 on both sides of the signal with pad_mode
/// (reflect by default, as torch; reflect needs the pad to be shorter than the signal).
/// normalized scales the spectrum by 1 / sqrt(n_fft) (istft undoes it); onesided keeps the
/// n_fft / 2 + 1 bins of a real signal, otherwise all n_fft (the rest conjugate-symmetric).
/// n_fft is read only by the burn-form overloads (stft(x, window, options)), which take no
/// n_fft argument.
struct StftOptions {
  /// Frame size, read only by the burn-form overloads (the others take n_fft as an argument).
  std::size_t n_fft = 0;
  /// Samples between frames (0: n_fft / 4; ShapeError when that is 0).
  std::size_t hop_length = 0;
  /// Window length (0: n_fft; ShapeError above n_fft).
  std::size_t win_length = 0;
  /// The window of win_length points (nullopt: ones), zero-padded centred to n_fft.
  std::optional<Tensor<1>> window;
  /// Pad n_fft / 2 on both sides of the signal first.
  bool center = true;
  /// The padding of `center` (reflect: the pad must be shorter than the signal).
  PadMode pad_mode = PadMode::reflect();
  /// Scale the spectrum by 1 / sqrt(n_fft) (istft undoes it).
  bool normalized = false;
  /// Keep the n_fft / 2 + 1 bins of a real signal (false: all n_fft).
  bool onesided = true;
};

/// x [B, L] -> (re, im) [B, bins, frames], bins = n_fft / 2 + 1 (onesided) or n_fft, frames =
/// 1 + (L' - n_fft) / hop_length with L' the (padded) signal length.
TENSOR_API std::pair<Tensor<3>, Tensor<3>> stft(const Tensor<2>& x, std::size_t n_fft, const StftOptions& o = {});
/// stft of a 1-d signal x [L] -> (re, im) [bins, frames].
TENSOR_API std::pair<Tensor<2>, Tensor<2>> stft(const Tensor<1>& x, std::size_t n_fft, const StftOptions& o = {});

/// The inverse: (re, im) [B, bins, frames] -> x [B, length] by irfft of each frame, the
/// window applied again, overlap-add, and division by the overlap-added squared window
/// (which must be nonzero over the output: torch's NOLA condition). length defaults to
/// n_fft + hop (frames - 1), less n_fft / 2 at each end with center; a longer length is
/// zero-padded. onesided = false reads only the first n_fft / 2 + 1 bins.
TENSOR_API Tensor<2> istft(const Tensor<3>& re, const Tensor<3>& im, std::size_t n_fft, const StftOptions& o = {},
                           std::optional<std::size_t> length = std::nullopt);
/// istft of one signal: (re, im) [bins, frames] -> x [length].
TENSOR_API Tensor<1> istft(const Tensor<2>& re, const Tensor<2>& im, std::size_t n_fft, const StftOptions& o = {},
                           std::optional<std::size_t> length = std::nullopt);

// ---- burn's stft / istft form ----------------------------------------------------------
/// burn's signature: stft(signal [B, L], window, options) -> [B, frames, bins, 2], the last
/// dim holding (re, im); options.n_fft gives the frame size (hop_length 0: max(1, n_fft / 4));
/// `window`, when given, replaces options.window. The same transform as stft above.
TENSOR_API Tensor<4> stft(const Tensor<2>& x, const std::optional<Tensor<1>>& window, const StftOptions& options);
/// The inverse of that form: [B, frames, bins, 2] -> [B, length] (ShapeError unless the last
/// dim is 2).
TENSOR_API Tensor<2> istft(const Tensor<4>& spectrum, const std::optional<Tensor<1>>& window,
                           std::optional<std::size_t> length, const StftOptions& options);

}  // namespace tensor::signal
