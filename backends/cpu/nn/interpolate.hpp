// CPU interpolate (nearest, nearest-exact, bilinear, bicubic; forward and backward) on
// contiguous [planes, H, W] buffers, and embedding_backward. Index rules: module-ops.md §6.8.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "tensor/nn_options.hpp"
#include "tensor/shape.hpp"

namespace tensor::cpu::nn {

struct InterpGeom {
  std::size_t planes = 1, in_h = 1, in_w = 1, out_h = 1, out_w = 1;
  tensor::nn::InterpolateOptions options;
};
// Validates through interpolate_output_shape (ShapeError naming op).
InterpGeom interpolate_geom(std::string_view op, const Shape& x, const std::array<std::int64_t, 2>& size,
                            const tensor::nn::InterpolateOptions& o);

void interpolate_forward(const InterpGeom& g, const float* x, float* y);
void interpolate_forward(const InterpGeom& g, const double* x, double* y);
// dx [planes, in_h, in_w]: the adjoint of the sampling (each tap weight times dy, summed).
void interpolate_backward(const InterpGeom& g, const float* dy, float* dx);
void interpolate_backward(const InterpGeom& g, const double* dy, double* dx);

// dw [n_emb, d] = zeros with row dy[i] added at indices[i] for i < count; an index outside
// [0, n_emb) throws IndexError "[embedding_backward] ..." before dw is written.
void embedding_backward(std::size_t n_emb, std::size_t d, std::size_t count, const std::int64_t* indices,
                        const float* dy, float* dw);
void embedding_backward(std::size_t n_emb, std::size_t d, std::size_t count, const std::int64_t* indices,
                        const double* dy, double* dw);

}  // namespace tensor::cpu::nn
