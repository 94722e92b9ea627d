// burn's linear algebra helpers (burn::tensor::linalg), composed from the op
// table's ops in libtensor.so (lib/src/composite/linalg.cpp), so every device has them.
#pragma once

#include <limits>
#include <tuple>
#include <utility>

#include "tensor/tensor.hpp"

namespace tensor::detail {
/// (lib/src/composite/linalg.cpp) The norm of exponent p along dim (Float: any p; Int: p = 0, 1,
/// +-inf), `op` naming the caller in errors; QR of either mode.
TENSOR_API Handle linalg_norm(Handle&& a, double p, std::int64_t dim, const char* op);
TENSOR_API std::pair<Handle, Handle> qr_mode(Handle&& a, bool reduced);
}  // namespace tensor::detail

/// burn's linear algebra helpers (burn::tensor::linalg): norms, normalisation, cosine similarity,
/// outer products, matvec, diag, trace, det, LU and QR, composed from the op table's ops so every
/// device (and autodiff) has them; LAPACK serves f32/f64 det / lu / qr on the plain cpu device.
namespace tensor::linalg {

/// The p of vector_norm: L0 counts nonzero elements, LInf / LNegInf are the largest
/// / smallest absolute value, any other p is (sum |x|^p)^(1/p).
struct Norm {
  /// The exponent p (0 and +-inf included).
  double p;
  /// The norms of p = 0, 1, 2, +inf, -inf, and any p.
  ///@{
  static constexpr Norm L0() { return {0.0}; }
  static constexpr Norm L1() { return {1.0}; }
  static constexpr Norm L2() { return {2.0}; }
  static constexpr Norm LInf() { return {std::numeric_limits<double>::infinity()}; }
  static constexpr Norm LNegInf() { return {-std::numeric_limits<double>::infinity()}; }
  static constexpr Norm Lp(double p) { return {p}; }
  ///@}
};

/// The norm along `dim` (kept with size 1; negative counts from the end; IndexError out of range).
template <std::size_t D> Tensor<D> vector_norm(const Tensor<D>& x, Norm norm, std::int64_t dim) {
  return Tensor<D>(detail::vector_norm(detail::copy(x), dim, norm.p));
}
/// vector_norm(x, Norm::L2(), dim): the Euclidean norm along `dim` (kept with size 1).
template <std::size_t D> Tensor<D> l2_norm(const Tensor<D>& x, std::int64_t dim) { return vector_norm(x, Norm::L2(), dim); }
/// burn's named norms along `dim` (kept with size 1; negative counts from the end; a dim out
/// of range: IndexError), Float or Int in the tensor's dtype: l0 counts the nonzero elements,
/// l1 sums |x|, max_abs / min_abs are the largest / smallest |x| (the L-inf / L-neg-inf norms).
///@{
template <std::size_t D, TensorKind K> Tensor<D, K> l0_norm(const Tensor<D, K>& x, std::int64_t dim) requires Numeric<K> {
  return Tensor<D, K>(detail::linalg_norm(detail::copy(x), 0.0, dim, "l0_norm"));
}
template <std::size_t D, TensorKind K> Tensor<D, K> l1_norm(const Tensor<D, K>& x, std::int64_t dim) requires Numeric<K> {
  return Tensor<D, K>(detail::linalg_norm(detail::copy(x), 1.0, dim, "l1_norm"));
}
template <std::size_t D, TensorKind K> Tensor<D, K> max_abs_norm(const Tensor<D, K>& x, std::int64_t dim) requires Numeric<K> {
  return Tensor<D, K>(detail::linalg_norm(detail::copy(x), std::numeric_limits<double>::infinity(), dim, "max_abs_norm"));
}
template <std::size_t D, TensorKind K> Tensor<D, K> min_abs_norm(const Tensor<D, K>& x, std::int64_t dim) requires Numeric<K> {
  return Tensor<D, K>(detail::linalg_norm(detail::copy(x), -std::numeric_limits<double>::infinity(), dim, "min_abs_norm"));
}
///@}
/// (sum |x|^p)^(1/p) along dim (Float); p = 0, 1, 2 and +-inf are the norms above.
template <std::size_t D> Tensor<D> lp_norm(const Tensor<D>& x, double p, std::int64_t dim) {
  return Tensor<D>(detail::linalg_norm(detail::copy(x), p, dim, "lp_norm"));
}
/// x / max(norm(x, dim), epsilon).
template <std::size_t D> Tensor<D> vector_normalize(const Tensor<D>& x, Norm norm, std::int64_t dim, double epsilon = 1e-12) {
  return Tensor<D>(detail::vector_normalize(detail::copy(x), dim, norm.p, epsilon));
}
/// sum(a b, dim) / max(|a| |b|, epsilon), along `dim` (kept with size 1).
template <std::size_t D>
Tensor<D> cosine_similarity(const Tensor<D>& a, const Tensor<D>& b, std::int64_t dim, double epsilon = 1e-8) {
  return Tensor<D>(detail::cosine_similarity(detail::copy(a), detail::copy(b), dim, epsilon));
}

/// burn's outer_dim: result[.., i, j, ..] = a[.., i, ..] * b[.., j, ..], dim `dim` of the
/// operands becoming dims (dim, dim + 1) of the result; the other dims broadcast.
template <std::size_t D, TensorKind K>
Tensor<D + 1, K> outer_dim(const Tensor<D, K>& a, const Tensor<D, K>& b, std::int64_t dim) requires(!std::is_same_v<K, Bool>) {
  return Tensor<D + 1, K>(detail::outer_dim(detail::copy(a), detail::copy(b), dim));
}
/// outer_dim along the last dim: [n] x [m] -> [n, m]; [b, n] x [b, m] -> [b, n, m].
template <std::size_t D, TensorKind K>
Tensor<D + 1, K> outer(const Tensor<D, K>& a, const Tensor<D, K>& b) requires(!std::is_same_v<K, Bool>) {
  return Tensor<D + 1, K>(detail::outer(detail::copy(a), detail::copy(b)));
}
/// [.., m, n] x [.., n] -> [.., m] (batch dims broadcast as in matmul).
template <std::size_t D, TensorKind K> Tensor<D - 1, K> matvec(const Tensor<D, K>& m, const Tensor<D - 1, K>& v) {
  return Tensor<D - 1, K>(detail::matvec(detail::copy(m), detail::copy(v)));
}
/// The diagonal of the last two dims: [.., n, m] -> [.., min(n, m)].
template <std::size_t D, TensorKind K> Tensor<D - 1, K> diag(const Tensor<D, K>& x) {
  return Tensor<D - 1, K>(detail::diag(detail::copy(x)));
}
/// The sum of the diagonal of the last two dims, batched as burn's trace: [.., n, m] ->
/// [.., 1] (a single matrix gives a one-element tensor).
template <std::size_t D, TensorKind K> Tensor<D - 1, K> trace(const Tensor<D, K>& x) requires(D >= 2) {
  return Tensor<D - 1, K>(detail::trace(detail::copy(x)));
}

// det, lu and qr of small matrices, batched over the leading dims, composed from
// tensor ops on every device (one elimination step per column: meant for small n;
// on the plain cpu device, f32 and f64 call LAPACK instead: lib/src/lapack.hpp). Float
// tensors only.

/// LU with partial pivoting of [.., m, n] (any m, n): P A = L U, packed as burn's
/// lu_decomposition: L below the diagonal (its unit diagonal implied) and U on and above
/// it, with the permutation [.., m] (row i of P A is row permutation[i] of A).
template <std::size_t D>
std::pair<Tensor<D>, Tensor<D - 1, Int>> lu_decomposition(const Tensor<D>& a) requires(D >= 2) {
  auto [lu, perm] = detail::lu_decomposition(detail::copy(a));
  return {Tensor<D>(lu), Tensor<D - 1, Int>(perm)};
}
/// The same unpacked: (L [.., m, k], U [.., k, n], permutation [.., m]), k = min(m, n), L
/// with a unit diagonal. (burn's lu returns the permutation as a matrix P with A = P L U.)
template <std::size_t D>
std::tuple<Tensor<D>, Tensor<D>, Tensor<D - 1, Int>> lu(const Tensor<D>& a) requires(D >= 2) {
  detail::HandleList hs = detail::lu(detail::copy(a));
  Tensor<D> l(hs.take(0));
  Tensor<D> u(hs.take(1));
  return {std::move(l), std::move(u), Tensor<D - 1, Int>(hs.take(2))};
}
/// The determinant of each [.., n, n] matrix, with the batch dims as burn's det: [b, n, n]
/// -> [b]; a single [n, n] matrix gives a one-element [1]. (The product of U's diagonal
/// times the permutation's sign; a singular matrix gives 0; n = 0 gives 1.) ShapeError
/// unless square.
template <std::size_t D> Tensor<(D == 2 ? 1 : D - 2)> det(const Tensor<D>& a) requires(D >= 2) {
  return Tensor<(D == 2 ? 1 : D - 2)>(detail::det(detail::copy(a)));
}
/// QR of [.., m, n], k = min(m, n), as burn's qr(tensor, reduced): reduced gives Q [.., m, k]
/// with orthonormal columns and R [.., k, n] upper triangular; reduced = false the complete
/// Q [.., m, m] (orthogonal) and R [.., m, n]. R's first k diagonal entries are >= 0 (burn's
/// Householder signs differ: a column of Q and a row of R may be negated). For m >= n,
/// reduced: modified Gram-Schmidt (LAPACK on the cpu device), a rank-deficient column giving
/// a zero column of Q and a zero diagonal entry; otherwise Householder reflections.
template <std::size_t D> std::pair<Tensor<D>, Tensor<D>> qr(const Tensor<D>& a, bool reduced = true) requires(D >= 2) {
  auto [q, r] = detail::qr_mode(detail::copy(a), reduced);
  return {Tensor<D>(q), Tensor<D>(r)};
}

}  // namespace tensor::linalg
