// The strided layout every backend uses (shape + signed element strides + element
// offset into a buffer), the resolved slice and axis arguments of the layout ops, and
// the view ops computed on it once for all backends:
// expand, swap_dims, permute, flip, slice and unfold only rewrite shape, strides
// and offset, so a backend turns the result into a view of the same buffer.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>

#include "tensor/shape.hpp"

namespace tensor::core {

// A resolved slice of one dim: element i of the result is source index
// start + i * step, for i < len. Validation produces one per dim.
struct DimSlice {
  std::int64_t start = 0;
  std::int64_t step = 1;
  std::size_t len = 0;
};
using Axes = std::span<const std::size_t>;
using DimSlices = std::span<const DimSlice>;

struct StridedLayout {
  std::array<std::int64_t, kMaxRank> strides{};
  std::int64_t offset = 0;
};

// A shape with its layout: what a view op produces.
struct StridedView {
  Shape shape;
  StridedLayout layout;
};

// Row-major strides of `shape`, offset 0.
inline StridedLayout contiguous_layout(const Shape& shape) {
  StridedLayout l;
  std::int64_t s = 1;
  for (std::size_t d = shape.rank(); d-- > 0;) {
    l.strides[d] = s;
    s *= static_cast<std::int64_t>(shape[d]);
  }
  return l;
}

// `target` is right-aligned with `shape`; new and broadcast dims get stride 0.
inline StridedView expand_view(const Shape& shape, const StridedLayout& from, const Shape& target) {
  const std::size_t lead = target.rank() - shape.rank();
  StridedView v{target, {}};
  v.layout.offset = from.offset;
  for (std::size_t d = lead; d < target.rank(); ++d)
    v.layout.strides[d] = shape[d - lead] == target[d] ? from.strides[d - lead] : 0;
  return v;
}

inline StridedView swap_dims_view(const Shape& shape, const StridedLayout& from, std::size_t d0, std::size_t d1) {
  StridedView v{shape, from};
  std::swap(v.shape[d0], v.shape[d1]);
  std::swap(v.layout.strides[d0], v.layout.strides[d1]);
  return v;
}

inline StridedView permute_view(const Shape& shape, const StridedLayout& from, Axes axes) {
  StridedView v{shape, from};
  for (std::size_t i = 0; i < axes.size(); ++i) {
    v.shape[i] = shape[axes[i]];
    v.layout.strides[i] = from.strides[axes[i]];
  }
  return v;
}

// Negative stride; the offset moves to the last element of the dim.
inline StridedView flip_view(const Shape& shape, const StridedLayout& from, Axes axes) {
  StridedView v{shape, from};
  for (const std::size_t d : axes) {
    if (shape[d] <= 1) continue;
    v.layout.offset += static_cast<std::int64_t>(shape[d] - 1) * v.layout.strides[d];
    v.layout.strides[d] = -v.layout.strides[d];
  }
  return v;
}

// One validated slice per dim. An empty result keeps the offset (its start may lie
// past the end of the buffer).
inline StridedView slice_view(const Shape& shape, const StridedLayout& from, DimSlices slices) {
  StridedView v{shape, from};
  bool empty = false;
  for (const DimSlice& s : slices) empty = empty || s.len == 0;
  for (std::size_t d = 0; d < slices.size(); ++d) {
    if (!empty) v.layout.offset += slices[d].start * v.layout.strides[d];
    // At most one element: the step is never taken, and stride * step may not fit
    // (a step of 2^62 made a 2^62-element stride that overflowed the kernels' byte
    // strides, UBSan in a 10-minute libFuzzer run). Every stride of a dim longer than 1
    // stays within the buffer, so kernels may scale strides to bytes freely.
    if (slices[d].len > 1) v.layout.strides[d] *= slices[d].step;
    v.shape[d] = slices[d].len;
  }
  return v;
}

// Windows of `size` every `step` along `dim`: that dim becomes the window index
// (stride * step) and a new trailing dim of `size` walks inside a window.
inline StridedView unfold_view(const Shape& shape, const StridedLayout& from, std::size_t dim, std::size_t size,
                               std::size_t step) {
  StridedView v{shape, from};
  const std::size_t n = shape[dim];
  v.shape[dim] = n >= size ? (n - size) / step + 1 : 0;
  v.shape.push_back(size);
  v.layout.strides[v.shape.rank() - 1] = from.strides[dim];
  // One window or none: the step is never taken (and may not fit a stride).
  v.layout.strides[dim] = v.shape[dim] <= 1 ? from.strides[dim] : from.strides[dim] * static_cast<std::int64_t>(step);
  return v;
}

}  // namespace tensor::core

// dispatch spells these names dispatch::... (where they lived before lib/core/): the
// using-directive keeps that spelling valid.
namespace tensor::dispatch {
using namespace tensor::core;
}  // namespace tensor::dispatch
