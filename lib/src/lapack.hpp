// LAPACK (Debian's liblapack-dev) for det / lu / qr on the plain cpu device: measured
// 3x (n = 64) to ~200x (n = 256) faster than the composed elimination
// (scripts/bench-linalg-lapack.sh). Each function returns false where it does not
// apply (another device, the autodiff device, a dtype other than f32/f64, a build
// without LAPACK, a rank-deficient qr), and the caller takes the composed path, which
// every device has.
#pragma once

#include <utility>

#include "tensor/detail.hpp"

namespace tensor::detail::lapack {

// P A = L U packed as burn's lu_decomposition (see linalg.hpp), batch dims flattened
// to B as composite/linalg.cpp's lu_steps returns them: lu [B, m, n], perm [B, m] (Int), sign
// [B, 1, 1] (Float: +-1, the permutation's parity).
struct Lu {
  Handle lu, perm, sign;
};
bool lu(const Handle& a, Lu& out);
// Reduced QR with R's diagonal >= 0 (signs flipped from LAPACK's to match the composed path).
bool qr(const Handle& a, Handle& q, Handle& r);

}  // namespace tensor::detail::lapack
