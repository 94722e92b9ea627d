// The strided loop nest every CPU elementwise kernel runs on: K operands walked over
// one shape by their own (byte) strides, with size-1 dims dropped and adjacent dims
// merged where every operand allows it, so the inner loop is as long as possible.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include "tensor/shape.hpp"

namespace tensor::cpu {

template <std::size_t K>
struct Plan {
  bool empty = false;    // some dim is 0: nothing to do
  std::size_t rank = 0;  // after collapsing; 0 = one element
  std::array<std::size_t, kMaxRank> dims{};
  std::array<std::array<std::int64_t, kMaxRank>, K> strides{};  // bytes
};

// Broadcast strides of an operand of shape `in` (same rank as `out`): stride 0
// where the operand has size 1 and the output does not.
inline std::array<std::int64_t, kMaxRank> broadcast_strides(const Shape& in, std::span<const std::int64_t> strides,
                                                            const Shape& out) {
  std::array<std::int64_t, kMaxRank> s{};
  for (std::size_t d = 0; d < out.rank(); ++d) s[d] = (in[d] == 1 && out[d] != 1) ? 0 : strides[d];
  return s;
}

// Element strides (one array per operand) and element sizes -> collapsed byte plan.
template <std::size_t K>
Plan<K> make_plan(const Shape& shape, const std::array<const std::int64_t*, K>& strides,
                  const std::array<std::size_t, K>& sizes) {
  Plan<K> p;
  std::size_t r = 0;
  for (std::size_t d = 0; d < shape.rank(); ++d) {
    const std::size_t n = shape[d];
    if (n == 0) { p.empty = true; return p; }
    if (n == 1) continue;
    bool merge = r > 0;
    for (std::size_t k = 0; k < K && merge; ++k)
      merge = p.strides[k][r - 1] == strides[k][d] * static_cast<std::int64_t>(sizes[k]) * static_cast<std::int64_t>(n);
    if (merge) {
      p.dims[r - 1] *= n;
      for (std::size_t k = 0; k < K; ++k) p.strides[k][r - 1] = strides[k][d] * static_cast<std::int64_t>(sizes[k]);
    } else {
      p.dims[r] = n;
      for (std::size_t k = 0; k < K; ++k) p.strides[k][r] = strides[k][d] * static_cast<std::int64_t>(sizes[k]);
      ++r;
    }
  }
  p.rank = r;
  return p;
}

// Calls row(ptrs, n, inner_strides) once per innermost row of the plan.
template <std::size_t K, class Row>
void for_each_row(const Plan<K>& p, std::array<std::byte*, K> base, Row&& row) {
  if (p.empty) return;
  std::array<std::int64_t, K> inner{};
  if (p.rank == 0) {
    row(base, std::size_t{1}, inner);
    return;
  }
  const std::size_t last = p.rank - 1;
  for (std::size_t k = 0; k < K; ++k) inner[k] = p.strides[k][last];
  const std::size_t n = p.dims[last];
  if (last == 0) {
    row(base, n, inner);
    return;
  }
  std::array<std::size_t, kMaxRank> idx{};
  std::array<std::byte*, K> ptr = base;
  for (;;) {
    row(ptr, n, inner);
    // Odometer over the outer dims.
    std::size_t d = last;
    for (;;) {
      if (d == 0) return;
      --d;
      if (++idx[d] < p.dims[d]) {
        for (std::size_t k = 0; k < K; ++k) ptr[k] += p.strides[k][d];
        break;
      }
      idx[d] = 0;
      for (std::size_t k = 0; k < K; ++k) ptr[k] -= p.strides[k][d] * static_cast<std::int64_t>(p.dims[d] - 1);
    }
  }
}

}  // namespace tensor::cpu
