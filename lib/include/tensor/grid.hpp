// Coordinate grids (burn's grid helpers: meshgrid, meshgrid_stack, cartesian_grid), composed from
// Tensor ops (views where the backend has them); included by nothing else.
#pragma once

#include <array>
#include <cstdint>
#include <utility>
#include <vector>

#include "tensor/tensor.hpp"

namespace tensor::grid {

// Matrix ("ij"): output i varies along dim i. Cartesian ("xy"): dims 0 and 1 swap.
enum class GridIndexing : std::uint8_t { Matrix, Cartesian };
// Dense: every grid has the full shape. Sparse: grid i keeps size 1 in every dim but its
// own (the grids broadcast against each other to the dense ones).
enum class GridSparsity : std::uint8_t { Dense, Sparse };

// burn's GridOptions; a GridIndexing or a GridSparsity converts to it (the other field default).
struct GridOptions {
  GridIndexing indexing = GridIndexing::Matrix;
  GridSparsity sparsity = GridSparsity::Dense;
  GridOptions() = default;
  GridOptions(GridIndexing i) : indexing(i) {}   // NOLINT: implicit, as burn's From
  GridOptions(GridSparsity s) : sparsity(s) {}   // NOLINT
  GridOptions(GridIndexing i, GridSparsity s) : indexing(i), sparsity(s) {}
};

// N rank-N grids of the inputs' sizes, output i holding inputs[i] along its dim (dims 0 and
// 1 swapped for Cartesian indexing); sparse grids are views of the inputs (no expansion).
template <std::size_t N, TensorKind K>
std::array<Tensor<N, K>, N> meshgrid(const std::array<Tensor<1, K>, N>& inputs, GridOptions options = {}) {
  const bool cartesian = options.indexing == GridIndexing::Cartesian;
  auto pos = [&](std::size_t i) { return cartesian && N >= 2 && i < 2 ? 1 - i : i; };
  std::array<std::int64_t, N> full{};
  for (std::size_t i = 0; i < N; ++i) full[pos(i)] = static_cast<std::int64_t>(inputs[i].dims()[0]);
  auto make = [&](std::size_t i) {
    std::array<std::int64_t, N> s{};
    s.fill(1);
    s[pos(i)] = full[pos(i)];
    Tensor<N, K> g = inputs[i].reshape(s);
    return options.sparsity == GridSparsity::Sparse ? g : g.expand(full);
  };
  return [&]<std::size_t... I>(std::index_sequence<I...>) { return std::array<Tensor<N, K>, N>{make(I)...}; }(
      std::make_index_sequence<N>{});
}

// Where meshgrid_stack puts the index of the grid: dim 0 or the last dim.
enum class IndexPos : std::uint8_t { First, Last };

// burn's meshgrid_stack: the N dense (Matrix-indexed) grids of meshgrid stacked along
// dim 0 ([N, |t0|, .., |tN-1|]) or the last dim ([|t0|, .., |tN-1|, N]).
template <std::size_t N, TensorKind K>
Tensor<N + 1, K> meshgrid_stack(const std::array<Tensor<1, K>, N>& inputs, IndexPos index_pos = IndexPos::First) {
  const std::array<Tensor<N, K>, N> grids = meshgrid<N, K>(inputs);
  return stack(std::vector<Tensor<N, K>>(grids.begin(), grids.end()),
               index_pos == IndexPos::First ? 0 : static_cast<std::int64_t>(N));
}

// [s0, .., s(D-1), D]: the coordinates of every element of a tensor of `shape`.
template <std::size_t D>
Tensor<D + 1, Int> cartesian_grid(const std::array<std::size_t, D>& shape, Device device = Device::default_device()) {
  std::vector<Tensor<D, Int>> parts;
  std::array<Tensor<1, Int>, D> ranges = [&]<std::size_t... I>(std::index_sequence<I...>) {
    return std::array<Tensor<1, Int>, D>{Tensor<1, Int>::arange(0, static_cast<std::int64_t>(shape[I]), device)...};
  }(std::make_index_sequence<D>{});
  for (auto& g : meshgrid<D, Int>(ranges)) parts.push_back(g);
  return stack(parts, static_cast<std::int64_t>(D));
}

// burn's affine_grid_2d: for affine matrices theta [N, 2, 3] and an output size
// [N, C, H, W], the [N, H, W, 2] grid of theta (x, y, 1) over the normalised output
// coordinates (x along W, y along H, in [-1, 1]; align_corners: -1 and 1 are the
// corner pixels' centres, otherwise their outer edges, as grid_sample_2d reads them).
inline Tensor<4> affine_grid_2d(const Tensor<3>& theta, const std::array<std::size_t, 4>& size, bool align_corners = false) {
  return Tensor<4>(detail::affine_grid_2d(detail::copy(theta), Shape{size[0], size[1], size[2], size[3]}, align_corners));
}
// grid_sample_2d as a free function (Tensor<4>::grid_sample_2d).
inline Tensor<4> grid_sample_2d(const Tensor<4>& input, const Tensor<4>& grid, const GridSampleOptions& options = {}) {
  return input.grid_sample_2d(grid, options);
}

}  // namespace tensor::grid
