// More of burn's activations (burn::tensor::activation), composed from the op
// table's ops in libtensor.so (lib/src/composite/activation.cpp), so every device has them
// and autodiff differentiates them through their parts. relu, gelu, sigmoid,
// softmax and the other single-op activations are in tensor.hpp.
#pragma once

#include "tensor/tensor.hpp"

/// burn's less common activations (burn::tensor::activation), composed from the op table's ops;
/// the common ones (relu, gelu, sigmoid, softmax, ...) are in <tensor/tensor.hpp>. Float tensors.
namespace tensor::activation {

/// x * sigmoid(x).
template <std::size_t D> Tensor<D> silu(const Tensor<D>& x) { return Tensor<D>(detail::silu(detail::copy(x))); }
/// log(1 + e^(beta x)) / beta, computed without overflow.
template <std::size_t D> Tensor<D> softplus(const Tensor<D>& x, double beta = 1.0) {
  return Tensor<D>(detail::softplus(detail::copy(x), beta));
}
/// x > 0 ? x : alpha (e^x - 1).
template <std::size_t D> Tensor<D> elu(const Tensor<D>& x, double alpha = 1.0) { return Tensor<D>(detail::elu(detail::copy(x), alpha)); }
/// x > 0 ? x : alpha (e^(x / alpha) - 1).
template <std::size_t D> Tensor<D> celu(const Tensor<D>& x, double alpha = 1.0) { return Tensor<D>(detail::celu(detail::copy(x), alpha)); }
/// scale * elu(x, alpha) with SELU's fixed alpha and scale.
template <std::size_t D> Tensor<D> selu(const Tensor<D>& x) { return Tensor<D>(detail::selu(detail::copy(x))); }
/// min(max(x, 0), 6).
template <std::size_t D> Tensor<D> relu6(const Tensor<D>& x) { return Tensor<D>(detail::relu6(detail::copy(x))); }
/// x * relu6(x + 3) / 6.
template <std::size_t D> Tensor<D> hard_swish(const Tensor<D>& x) { return Tensor<D>(detail::hard_swish(detail::copy(x))); }
/// GELU's tanh approximation: 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))).
template <std::size_t D> Tensor<D> gelu_approximate(const Tensor<D>& x) { return Tensor<D>(detail::gelu_approximate(detail::copy(x))); }
/// x tanh(softplus(x)).
template <std::size_t D> Tensor<D> mish(const Tensor<D>& x) { return Tensor<D>(detail::mish(detail::copy(x))); }
/// x / (1 + |x|).
template <std::size_t D> Tensor<D> softsign(const Tensor<D>& x) { return Tensor<D>(detail::softsign(detail::copy(x))); }
/// x - tanh(x).
template <std::size_t D> Tensor<D> tanhshrink(const Tensor<D>& x) { return Tensor<D>(detail::tanhshrink(detail::copy(x))); }
/// clamp(x, min, max).
template <std::size_t D> Tensor<D> hardtanh(const Tensor<D>& x, double min = -1.0, double max = 1.0) {
  return Tensor<D>(detail::hardtanh(detail::copy(x), min, max));
}
/// |x| > lambda ? x : 0.
template <std::size_t D> Tensor<D> hard_shrink(const Tensor<D>& x, double lambda = 0.5) {
  return Tensor<D>(detail::hard_shrink(detail::copy(x), lambda));
}
/// x > lambda ? x - lambda : x < -lambda ? x + lambda : 0.
template <std::size_t D> Tensor<D> soft_shrink(const Tensor<D>& x, double lambda = 0.5) {
  return Tensor<D>(detail::soft_shrink(detail::copy(x), lambda, lambda));
}
/// burn's general shrink: x > lambda ? x - bias : x < -lambda ? x + bias : 0 (NaN stays NaN).
template <std::size_t D> Tensor<D> shrink(const Tensor<D>& x, double lambda = 0.5, double bias = 0.5) {
  return Tensor<D>(detail::soft_shrink(detail::copy(x), lambda, bias));
}
/// x > threshold ? x : value.
template <std::size_t D> Tensor<D> threshold(const Tensor<D>& x, double threshold, double value) {
  return Tensor<D>(detail::threshold(detail::copy(x), threshold, value));
}
/// x > alpha ? x : 0.
template <std::size_t D> Tensor<D> thresholded_relu(const Tensor<D>& x, double alpha = 1.0) {
  return Tensor<D>(detail::thresholded_relu(detail::copy(x), alpha));
}

/// The first half of dim times the sigmoid of the second (the dim's size must be even).
template <std::size_t D> Tensor<D> glu(const Tensor<D>& x, std::int64_t dim) {
  return Tensor<D>(detail::glu(detail::copy(x), dim));
}
/// e^x / (1 + sum e^x) along dim (softmax with an extra zero logit), computed stably.
template <std::size_t D> Tensor<D> quiet_softmax(const Tensor<D>& x, std::int64_t dim) {
  return Tensor<D>(detail::quiet_softmax(detail::copy(x), dim));
}

/// burn's prelu with per-channel weights: alpha of shape [1] (one slope) or [C], the
/// slope of channel c (dim 1) of x. (prelu(x, alpha) with alpha of x's rank broadcasts.)
template <std::size_t D> Tensor<D> prelu(const Tensor<D>& x, const Tensor<1>& alpha) requires(D > 1) {
  return Tensor<D>(detail::prelu(detail::copy(x), detail::copy(alpha)));
}

}  // namespace tensor::activation
