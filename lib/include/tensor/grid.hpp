// Coordinate grids (burn's grid helpers: meshgrid, meshgrid_stack, cartesian_grid), composed in
// libtensor.so (lib/src/composite/grid.cpp) from views where the backend has them; included by
// nothing else.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "tensor/tensor.hpp"

/// Coordinate grids (burn::tensor::grid): meshgrid, cartesian_grid, affine_grid_2d, and
/// grid_sample_2d as a free function.
namespace tensor::grid {

/// Matrix ("ij"): output i varies along dim i. Cartesian ("xy"): dims 0 and 1 swap.
enum class GridIndexing : std::uint8_t { Matrix, Cartesian };
/// Dense: every grid has the full shape. Sparse: grid i keeps size 1 in every dim but its
/// own (the grids broadcast against each other to the dense ones).
enum class GridSparsity : std::uint8_t { Dense, Sparse };

/// burn's GridOptions; a GridIndexing or a GridSparsity converts to it (the other field default).
struct GridOptions {
  /// Matrix unless set.
  GridIndexing indexing = GridIndexing::Matrix;
  /// Dense unless set.
  GridSparsity sparsity = GridSparsity::Dense;
  GridOptions() = default;
  /// The given indexing and / or sparsity, the other field its default.
  ///@{
  GridOptions(GridIndexing i) : indexing(i) {}   // NOLINT: implicit, as burn's From
  GridOptions(GridSparsity s) : sparsity(s) {}   // NOLINT
  GridOptions(GridIndexing i, GridSparsity s) : indexing(i), sparsity(s) {}
  ///@}
};

namespace detail_ {
/// The grids of rank-1 handles (meshgrid, meshgrid_stack) and of a shape's coordinates
/// (cartesian_grid); the templates below are their typed faces.
TENSOR_API detail::HandleList meshgrid(std::vector<detail::Handle>&& inputs, bool cartesian, bool sparse);
TENSOR_API detail::Handle meshgrid_stack(std::vector<detail::Handle>&& inputs, bool last);
TENSOR_API detail::Handle cartesian_grid(const Shape& shape, Device device);
template <std::size_t N, TensorKind K>
std::vector<detail::Handle> handles(const std::array<Tensor<1, K>, N>& inputs) {
  std::vector<detail::Handle> hs;
  hs.reserve(N);
  for (const auto& t : inputs) hs.push_back(detail::copy(t));
  return hs;
}
}  // namespace detail_

/// N rank-N grids of the inputs' sizes, output i holding inputs[i] along its dim (dims 0 and
/// 1 swapped for Cartesian indexing); sparse grids are views of the inputs (no expansion).
template <std::size_t N, TensorKind K>
std::array<Tensor<N, K>, N> meshgrid(const std::array<Tensor<1, K>, N>& inputs, GridOptions options = {}) {
  detail::HandleList gs = detail_::meshgrid(detail_::handles<N, K>(inputs), options.indexing == GridIndexing::Cartesian,
                                            options.sparsity == GridSparsity::Sparse);
  return [&]<std::size_t... I>(std::index_sequence<I...>) { return std::array<Tensor<N, K>, N>{Tensor<N, K>(gs.take(I))...}; }(
      std::make_index_sequence<N>{});
}

/// Where meshgrid_stack puts the index of the grid: dim 0 or the last dim.
enum class IndexPos : std::uint8_t { First, Last };

/// burn's meshgrid_stack: the N dense (Matrix-indexed) grids of meshgrid stacked along
/// dim 0 ([N, |t0|, .., |tN-1|]) or the last dim ([|t0|, .., |tN-1|, N]).
template <std::size_t N, TensorKind K>
Tensor<N + 1, K> meshgrid_stack(const std::array<Tensor<1, K>, N>& inputs, IndexPos index_pos = IndexPos::First) {
  return Tensor<N + 1, K>(detail_::meshgrid_stack(detail_::handles<N, K>(inputs), index_pos == IndexPos::Last));
}

/// [s0, .., s(D-1), D]: the coordinates of every element of a tensor of `shape`.
template <std::size_t D>
Tensor<D + 1, Int> cartesian_grid(const std::array<std::size_t, D>& shape, Device device = Device::default_device()) {
  return Tensor<D + 1, Int>(detail_::cartesian_grid(Shape(std::span<const std::size_t>(shape.data(), D)), device));
}

/// burn's affine_grid_2d: for affine matrices theta [N, 2, 3] and an output size
/// [N, C, H, W], the [N, H, W, 2] grid of theta (x, y, 1) over the normalised output
/// coordinates (x along W, y along H, in [-1, 1]; align_corners: -1 and 1 are the
/// corner pixels' centres, otherwise their outer edges, as grid_sample_2d reads them).
inline Tensor<4> affine_grid_2d(const Tensor<3>& theta, const std::array<std::size_t, 4>& size, bool align_corners = false) {
  return Tensor<4>(detail::affine_grid_2d(detail::copy(theta), Shape{size[0], size[1], size[2], size[3]}, align_corners));
}
/// grid_sample_2d as a free function (Tensor<4>::grid_sample_2d).
inline Tensor<4> grid_sample_2d(const Tensor<4>& input, const Tensor<4>& grid, const GridSampleOptions& options = {}) {
  return input.grid_sample_2d(grid, options);
}

}  // namespace tensor::grid
