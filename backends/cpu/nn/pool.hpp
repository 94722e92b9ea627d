// CPU pooling kernels (max with indices, average, adaptive average; forward and backward) on
// contiguous [planes = N*C, *spatial] buffers. 1-d pools run as 2-d with a height of 1.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <utility>

#include "lib/core/nn_shape.hpp"
#include "tensor/nn_options.hpp"
#include "tensor/shape.hpp"

namespace tensor::cpu::nn {

struct Pool2dGeom {
  std::size_t planes = 1, in_h = 1, in_w = 1, out_h = 1, out_w = 1;
  std::array<std::int64_t, 2> kernel{1, 1}, stride{1, 1}, padding{0, 0}, dilation{1, 1};
  bool count_include_pad = true;  // avg only
};

// Geometry of max_pool1d/2d or avg_pool1d/2d (by `window`) whose arguments dispatch already
// checked (lib/core/nn_shape.hpp): nothing validated again.
Pool2dGeom pool2d_geom(const tensor::core::PoolArgs& a, const Shape& x, tensor::core::Window window);

// The same from public per-rank options, checked first (ShapeError naming op): for callers
// that have not been through dispatch (the kernels' own tests).
template <std::size_t N>
Pool2dGeom max_pool_geom(std::string_view op, const Shape& x, const tensor::nn::MaxPoolOptions<N>& o) {
  tensor::core::max_pool_output_shape<N>(op, x, o);
  return pool2d_geom(tensor::core::pool_args(o), x, tensor::core::Window::Max);
}
template <std::size_t N>
Pool2dGeom avg_pool_geom(std::string_view op, const Shape& x, const tensor::nn::AvgPoolOptions<N>& o) {
  tensor::core::avg_pool_output_shape<N>(op, x, o);
  return pool2d_geom(tensor::core::pool_args(o), x, tensor::core::Window::Avg);
}

// y and indices [planes, out_h, out_w]; indices (may be null) are flat h*in_w + w in the
// unpadded plane, the first maximum in window order; NaN wins (its first position). A
// window without a valid tap gives -inf and index -1.
// The int32 indices (the default int dtype) spare a conversion pass each way; the caller
// takes them only when a plane has at most INT32_MAX elements.
void max_pool2d_forward(const Pool2dGeom& g, const float* x, float* y, std::int64_t* indices);
void max_pool2d_forward(const Pool2dGeom& g, const double* x, double* y, std::int64_t* indices);
void max_pool2d_forward(const Pool2dGeom& g, const float* x, float* y, std::int32_t* indices);
void max_pool2d_forward(const Pool2dGeom& g, const double* x, double* y, std::int32_t* indices);
// dx = zeros with dy scatter-added at the indices (index -1 is skipped).
// The first of `indices` ([planes, out_h, out_w]) that is neither -1 nor a tap of its own
// output's window, as (flat position, value); (-1, 0) when every index is valid.
std::pair<std::int64_t, std::int64_t> max_pool2d_bad_index(const Pool2dGeom& g, const std::int64_t* indices);
std::pair<std::int64_t, std::int64_t> max_pool2d_bad_index(const Pool2dGeom& g, const std::int32_t* indices);
void max_pool2d_backward(const Pool2dGeom& g, const float* dy, const std::int64_t* indices, float* dx);
void max_pool2d_backward(const Pool2dGeom& g, const double* dy, const std::int64_t* indices, double* dx);
void max_pool2d_backward(const Pool2dGeom& g, const float* dy, const std::int32_t* indices, float* dx);
void max_pool2d_backward(const Pool2dGeom& g, const double* dy, const std::int32_t* indices, double* dx);

void avg_pool2d_forward(const Pool2dGeom& g, const float* x, float* y);
void avg_pool2d_forward(const Pool2dGeom& g, const double* x, double* y);
void avg_pool2d_backward(const Pool2dGeom& g, const float* dy, float* dx);
void avg_pool2d_backward(const Pool2dGeom& g, const double* dy, double* dx);

// Adaptive average pooling, always as three spatial dims (1-d and 2-d put size-1 dims first).
struct AdaptiveGeom {
  std::size_t planes = 1;
  std::array<std::size_t, 3> in{1, 1, 1}, out{1, 1, 1};
};
// Adaptive pooling of a.rank (1..3) spatial dims from checked arguments; the template checks first.
AdaptiveGeom adaptive_avg_pool_geom(const tensor::core::PoolArgs& a, const Shape& x);
template <std::size_t N>
AdaptiveGeom adaptive_avg_pool_geom(std::string_view op, const Shape& x, const std::array<std::int64_t, N>& size) {
  tensor::core::adaptive_avg_pool_output_shape<N>(op, x, size);
  return adaptive_avg_pool_geom(tensor::core::adaptive_pool_args(size), x);
}

void adaptive_avg_pool_forward(const AdaptiveGeom& g, const float* x, float* y);
void adaptive_avg_pool_forward(const AdaptiveGeom& g, const double* x, double* y);
void adaptive_avg_pool_backward(const AdaptiveGeom& g, const float* dy, float* dx);
void adaptive_avg_pool_backward(const AdaptiveGeom& g, const double* dy, double* dx);

}  // namespace tensor::cpu::nn
