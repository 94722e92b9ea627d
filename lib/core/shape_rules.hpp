// The output-shape rule of each op family, in one place: the forwarders take the output
// metadata the hooks see from here, and a backend that needs its output shape can take
// it from here instead of working it out again. Inputs are validated (dims resolved).
// The module ops' rules (conv, pool, interpolate, fold, attention) are nn_shape.hpp's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <utility>

#include "tensor/shape.hpp"

namespace tensor::core {

// The most bytes one buffer may have on any device (byte offsets fit int64; SPEC: element
// counts <= 2^63 - 1, byte counts that fit).
inline constexpr std::size_t kMaxAllocBytes = kMaxElements;

// Broadcast of equal-rank shapes already checked compatible (dispatch's broadcast_shapes
// checks them and names the op): a size-1 dim takes the other's size.
inline Shape broadcast_shape(const Shape& a, const Shape& b) {
  Shape out = a;
  for (std::size_t d = 0; d < a.rank(); ++d)
    if (a[d] == 1) out[d] = b[d];
  return out;
}

// Batched matmul [.., m, k] x [.., k, n] -> [.., m, n], batch dims broadcast.
// Validates (equal ranks >= 2, inner dims, batch broadcast); ShapeError naming `op` otherwise.
Shape matmul_shape(std::string_view op, const Shape& a, const Shape& b);

// Full reductions give [1]; dim reductions keep the dim with size 1.
inline Shape reduce_shape() { return Shape{1}; }
inline Shape reduce_dim_shape(Shape s, std::size_t dim) {
  s[dim] = 1;
  return s;
}
// Size `n` along `dim` (topk, select, repeat_dim).
inline Shape resized_shape(Shape s, std::size_t dim, std::size_t n) {
  s[dim] = n;
  return s;
}
inline Shape swapped_shape(Shape s, std::size_t x, std::size_t y) {
  std::swap(s[x], s[y]);
  return s;
}
inline Shape transposed_shape(const Shape& s) { return s.rank() < 2 ? s : swapped_shape(s, s.rank() - 2, s.rank() - 1); }
inline Shape permuted_shape(const Shape& s, std::span<const std::size_t> axes) {
  Shape out = s;
  for (std::size_t i = 0; i < axes.size(); ++i) out[i] = s[axes[i]];
  return out;
}
// Windows of `size` every `step` along `dim`: that dim counts windows, a new last dim of `size`.
inline Shape unfold_shape(Shape s, std::size_t dim, std::size_t size, std::size_t step) {
  const std::size_t n = s[dim];
  s[dim] = n >= size ? (n - size) / step + 1 : 0;
  s.push_back(size);
  return s;
}
// gather_nd / scatter_nd: indices [..., k] address a's first k dims (1 <= k <= rank, checked
// by the forwarder); the slices are the indices' leading dims then a's dims from k on, [1]
// when that is empty.
inline Shape nd_slices_shape(const Shape& s, const Shape& is) {
  const std::size_t k = is[is.rank() - 1];
  Shape out;
  for (std::size_t j = 0; j + 1 < is.rank(); ++j) out.push_back(is[j]);
  for (std::size_t j = k; j < s.rank(); ++j) out.push_back(s[j]);
  if (out.rank() == 0) out.push_back(1);
  return out;
}
// Elements of arange(start, end, step) (step != 0).
inline std::size_t arange_len(std::int64_t start, std::int64_t end, std::int64_t step) {
  if (step > 0 ? start >= end : start <= end) return 0;
  const auto u = [](std::int64_t v) { return static_cast<std::uint64_t>(v); };  // differences wrap, not overflow
  const std::uint64_t span = step > 0 ? u(end) - u(start) : u(start) - u(end);
  const std::uint64_t st = step > 0 ? u(step) : std::uint64_t{0} - u(step);
  return static_cast<std::size_t>((span + st - 1) / st);
}

}  // namespace tensor::core

// dispatch spells these names dispatch::... (where they lived before lib/core/): the
// using-directive keeps that spelling valid.
namespace tensor::dispatch {
using namespace tensor::core;
}  // namespace tensor::dispatch
