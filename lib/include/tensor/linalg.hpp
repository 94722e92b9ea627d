// burn's linear algebra helpers (burn::tensor::linalg), composed from the op
// table's ops in libtensor.so (lib/src/composite.cpp), so every device has them.
#pragma once

#include <limits>

#include "tensor/tensor.hpp"

namespace tensor::linalg {

// The p of vector_norm: L0 counts nonzero elements, LInf / LNegInf are the largest
// / smallest absolute value, any other p is (sum |x|^p)^(1/p).
struct Norm {
  double p;
  static constexpr Norm L0() { return {0.0}; }
  static constexpr Norm L1() { return {1.0}; }
  static constexpr Norm L2() { return {2.0}; }
  static constexpr Norm LInf() { return {std::numeric_limits<double>::infinity()}; }
  static constexpr Norm LNegInf() { return {-std::numeric_limits<double>::infinity()}; }
  static constexpr Norm Lp(double p) { return {p}; }
};

// The norm along `dim` (kept with size 1).
template <std::size_t D> Tensor<D> vector_norm(const Tensor<D>& x, Norm norm, std::int64_t dim) {
  return Tensor<D>(detail::composite_dims(detail::Composite::vector_norm, detail::copy(x), detail::DimList(&dim, 1), norm.p));
}
template <std::size_t D> Tensor<D> l2_norm(const Tensor<D>& x, std::int64_t dim) { return vector_norm(x, Norm::L2(), dim); }
// x / max(norm(x, dim), epsilon).
template <std::size_t D> Tensor<D> vector_normalize(const Tensor<D>& x, Norm norm, std::int64_t dim, double epsilon = 1e-12) {
  return Tensor<D>(
      detail::composite_dims(detail::Composite::vector_normalize, detail::copy(x), detail::DimList(&dim, 1), norm.p, epsilon));
}
// sum(a b, dim) / max(|a| |b|, epsilon), along `dim` (kept with size 1).
template <std::size_t D>
Tensor<D> cosine_similarity(const Tensor<D>& a, const Tensor<D>& b, std::int64_t dim, double epsilon = 1e-8) {
  return Tensor<D>(detail::composite2(detail::Composite::cosine_similarity, detail::copy(a), detail::copy(b), dim, epsilon));
}

}  // namespace tensor::linalg
