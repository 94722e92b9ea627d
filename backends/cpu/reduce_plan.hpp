// How the CPU's reductions along a dim lay out their work (reduce.cpp, moments.cpp): the
// dense view of the input, the [outer, n, inner] split around the dim, the chunks of an
// outer-dim reduction, and when threads are used.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <optional>

#include "backends/cpu/cpu_tensor.hpp"
#include "backends/cpu/parallel.hpp"

namespace tensor::cpu::reduce_plan {

// Dim reductions (and dim extrema) of at least this many elements are spread over
// threads (parallel_chunks), split into independent lane groups or column blocks.
// How chosen: as the full reductions in reduce_hwy.cpp (memory-bound the same way):
// from 1M elements.
constexpr std::size_t kParallelDimElems = std::size_t{1} << 20;

// Lane groups of about this many elements are one chunk of work.
constexpr std::size_t kGroupElems = std::size_t{1} << 16;

// f(c) for c in [0, chunks): spread by parallel_chunks when `threads`.
template <class F>
inline void run_chunks(bool threads, std::size_t chunks, F& f) {
  if (threads) {
    parallel_chunks(chunks, f);
  } else {
    for (std::size_t c = 0; c < chunks; ++c) f(c);
  }
}

// A tensor reduced along `dim` as the row-major array its memory holds: itself when
// contiguous; for a permuted view of a dense block (a transpose, a permute; strides
// positive) the block with its dims in memory order, when the kept dims keep their
// order there, so that the lanes come out in the output's own order. Then the dense
// kernels below read memory in order instead of walking strided lanes (which touch a new
// cache line per element). nullopt otherwise.
struct DenseView {
  const std::byte* base;
  Shape shape;
  std::size_t dim;
};
inline std::optional<DenseView> dense_view(const CpuTensor& a, std::size_t dim) {
  if (a.is_contiguous()) return DenseView{a.data(), a.shape(), dim};
  const Shape& s = a.shape();
  if (s[dim] < 2) return std::nullopt;
  std::array<std::size_t, kMaxRank> order{};
  std::size_t k = 0;
  for (std::size_t d = 0; d < s.rank(); ++d) {
    if (s[d] == 0) return std::nullopt;
    if (s[d] == 1) continue;
    if (a.stride(d) <= 0) return std::nullopt;
    order[k++] = d;
  }
  std::stable_sort(order.begin(), order.begin() + k,
                   [&](std::size_t x, std::size_t y) { return a.stride(x) > a.stride(y); });
  std::array<std::size_t, kMaxRank> dims{};
  std::int64_t expect = 1;
  for (std::size_t i = k; i-- > 0;) {
    if (a.stride(order[i]) != expect) return std::nullopt;
    expect *= static_cast<std::int64_t>(s[order[i]]);
  }
  std::size_t mdim = 0, last_kept = 0;
  bool first = true;
  for (std::size_t i = 0; i < k; ++i) {
    dims[i] = s[order[i]];
    if (order[i] == dim) {
      mdim = i;
      continue;
    }
    if (!first && order[i] < last_kept) return std::nullopt;
    last_kept = order[i];
    first = false;
  }
  return DenseView{a.data(), Shape(std::span<const std::size_t>(dims.data(), k)), mdim};
}

// A row-major shape seen as [outer, n, inner] around `dim`.
struct Around {
  std::size_t outer, n, inner;
};
inline Around around(const Shape& shape, std::size_t dim) {
  Around a{1, shape[dim], 1};
  for (std::size_t d = 0; d < dim; ++d) a.outer *= shape[d];
  for (std::size_t d = dim + 1; d < shape.rank(); ++d) a.inner *= shape[d];
  return a;
}

// The chunks of a reduction of a row-major [outer, n, inner] tensor (inner > 1) along n:
// (outer index, group of rows, block of columns). A block of at most kCols lanes keeps
// its accumulators in L1 while the group's rows stream by, each row a contiguous segment
// (a whole row when inner <= kCols, so the chunk reads one contiguous slab and the
// prefetchers keep up). When n is long, fixed groups of rows each reduce into a partial
// row of their own, combined in group order at the end: the order of every reduction
// depends on the shape only, never on the thread count, and a reduction over the outer
// dim of [4096, 1024] still makes 16 chunks for the threads. Narrow column blocks of 128
// with whole columns as the chunk (the kernels before these) read 512 bytes per 4 KB
// row, a page apart, several times slower.
struct OuterChunks {
  static constexpr std::size_t kCols = 1024, kMaxGroups = 64;
  std::size_t outer, n, inner, cols, col_blocks, rows, groups;
  OuterChunks(std::size_t o, std::size_t n_, std::size_t i)
      : outer(o), n(n_), inner(i), cols(std::min(i, kCols)), col_blocks((i + cols - 1) / cols) {
    rows = std::max<std::size_t>({1, 4 * kGroupElems / cols, (n + kMaxGroups - 1) / kMaxGroups});
    groups = (n + rows - 1) / rows;
  }
  std::size_t count() const { return outer * groups * col_blocks; }
  struct Chunk {
    std::size_t ob, grp, k0, k1, ib, m;
  };
  Chunk operator[](std::size_t t) const {
    const std::size_t cb = t % col_blocks, grp = (t / col_blocks) % groups, ob = t / (col_blocks * groups);
    const std::size_t ib = cb * cols, k0 = grp * rows;
    return {ob, grp, k0, std::min(n, k0 + rows), ib, std::min(cols, inner - ib)};
  }
  // Offset of a chunk's partial row (groups > 1) in a buffer of outer * groups * inner.
  std::size_t partial(const Chunk& c) const { return (c.ob * groups + c.grp) * inner + c.ib; }
};

}  // namespace tensor::cpu::reduce_plan
