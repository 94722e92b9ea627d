// burn's linear algebra helpers (burn::tensor::linalg), composed from the op
// table's ops in libtensor.so (lib/src/composite.cpp), so every device has them.
#pragma once

#include <limits>
#include <tuple>
#include <utility>

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

// burn's outer_dim: result[.., i, j, ..] = a[.., i, ..] * b[.., j, ..], dim `dim` of the
// operands becoming dims (dim, dim + 1) of the result; the other dims broadcast.
template <std::size_t D, TensorKind K>
Tensor<D + 1, K> outer_dim(const Tensor<D, K>& a, const Tensor<D, K>& b, std::int64_t dim) requires(!std::is_same_v<K, Bool>) {
  return Tensor<D + 1, K>(detail::composite2(detail::Composite::outer_dim, detail::copy(a), detail::copy(b), dim));
}
// outer_dim along the last dim: [n] x [m] -> [n, m]; [b, n] x [b, m] -> [b, n, m].
template <std::size_t D, TensorKind K>
Tensor<D + 1, K> outer(const Tensor<D, K>& a, const Tensor<D, K>& b) requires(!std::is_same_v<K, Bool>) {
  return Tensor<D + 1, K>(detail::composite2(detail::Composite::outer, detail::copy(a), detail::copy(b)));
}
// [.., m, n] x [.., n] -> [.., m] (batch dims broadcast as in matmul).
template <std::size_t D, TensorKind K> Tensor<D - 1, K> matvec(const Tensor<D, K>& m, const Tensor<D - 1, K>& v) {
  return Tensor<D - 1, K>(detail::composite2(detail::Composite::matvec, detail::copy(m), detail::copy(v)));
}
// The diagonal of the last two dims: [.., n, m] -> [.., min(n, m)].
template <std::size_t D, TensorKind K> Tensor<D - 1, K> diag(const Tensor<D, K>& x) {
  return Tensor<D - 1, K>(detail::composite(detail::Composite::diag, detail::copy(x)));
}
// The sum of the diagonal of a matrix, as a one-element tensor.
template <TensorKind K> Tensor<1, K> trace(const Tensor<2, K>& x) {
  return Tensor<1, K>(detail::composite(detail::Composite::trace, detail::copy(x)));
}

// det, lu and qr of small matrices, batched over the leading dims, composed from
// tensor ops on every device (one elimination step per column: meant for small n;
// on the plain cpu device, f32 and f64 call LAPACK instead: lib/src/lapack.hpp). Float
// tensors only.

// LU with partial pivoting of [.., n, n]: P A = L U, packed as burn's lu_decomposition:
// L below the diagonal (its unit diagonal implied) and U on and above it, with the
// permutation [.., n] (row i of P A is row permutation[i] of A).
template <std::size_t D>
std::pair<Tensor<D>, Tensor<D - 1, Int>> lu_decomposition(const Tensor<D>& a) requires(D >= 2) {
  auto [lu, perm] = detail::lu_decomposition(detail::copy(a));
  return {Tensor<D>(lu), Tensor<D - 1, Int>(perm)};
}
// The same unpacked: (L, U, permutation).
template <std::size_t D>
std::tuple<Tensor<D>, Tensor<D>, Tensor<D - 1, Int>> lu(const Tensor<D>& a) requires(D >= 2) {
  detail::HandleList hs = detail::lu(detail::copy(a));
  Tensor<D> l(hs.take(0));
  Tensor<D> u(hs.take(1));
  return {std::move(l), std::move(u), Tensor<D - 1, Int>(hs.take(2))};
}
// The determinant of each [.., n, n] matrix, as [.., 1] (the product of U's diagonal
// times the permutation's sign; a singular matrix gives 0; n = 0 gives 1).
template <std::size_t D> Tensor<D - 1> det(const Tensor<D>& a) requires(D >= 2) {
  return Tensor<D - 1>(detail::det(detail::copy(a)));
}
// Reduced QR of [.., m, n] (m >= n) by modified Gram-Schmidt: Q [.., m, n] with
// orthonormal columns, R [.., n, n] upper triangular with a non-negative diagonal
// (LAPACK may flip the signs of a column of Q and a row of R). A rank-deficient
// column gives a zero column of Q and a zero diagonal entry.
template <std::size_t D> std::pair<Tensor<D>, Tensor<D>> qr(const Tensor<D>& a) requires(D >= 2) {
  auto [q, r] = detail::qr(detail::copy(a));
  return {Tensor<D>(q), Tensor<D>(r)};
}

}  // namespace tensor::linalg
