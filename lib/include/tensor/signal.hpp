// Window functions (burn's signal helpers), composed from Tensor ops; included by
// nothing else. periodic = true gives the window of size + 1 points without its last
// one (for spectral analysis), false the symmetric window. A size of 1 is [1].
#pragma once

#include <numbers>

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
  return detail_::cosine_window(size, periodic, 0.54, 0.46, 0.0, device);
}
inline Tensor<1> blackman_window(std::size_t size, bool periodic = true, Device device = Device::default_device()) {
  return detail_::cosine_window(size, periodic, 0.42, 0.5, 0.08, device);
}

}  // namespace tensor::signal
