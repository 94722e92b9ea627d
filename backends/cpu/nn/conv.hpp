// CPU convolution kernels (conv and conv_transpose, forward and backward, 1-d to 3-d) on
// contiguous row-major buffers with explicit geometry: im2col/col2im + BLIS gemm (direct
// loops for depthwise), plus unfold4d/fold4d.
// Dispatch validated the shapes (lib/core/nn_shape.hpp); the backend entry makes buffers
// contiguous and builds the geometry from the checked arguments.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "lib/core/nn_shape.hpp"
#include "tensor/nn_options.hpp"
#include "tensor/shape.hpp"

namespace tensor::cpu::nn {

// One convolution x [batch, c_in, *in] * w [c_out, c_in/groups, *kernel] -> y [batch, c_out, *out],
// always as three spatial dims: 1-d and 2-d put size-1 dims (kernel 1, stride 1, padding 0) first.
struct ConvGeom {
  std::size_t batch = 1, c_in = 1, c_out = 1, groups = 1;
  std::array<std::size_t, 3> in{1, 1, 1}, kernel{1, 1, 1}, out{1, 1, 1};
  std::array<std::int64_t, 3> stride{1, 1, 1}, padding{0, 0, 0}, dilation{1, 1, 1};

  std::size_t in_size() const { return in[0] * in[1] * in[2]; }
  std::size_t out_size() const { return out[0] * out[1] * out[2]; }
  std::size_t kernel_size() const { return kernel[0] * kernel[1] * kernel[2]; }
};

// Geometry of a conv whose arguments dispatch already checked (lib/core/nn_shape.hpp): x the
// input [batch, c_in, *in], weight [c_out, c_in/groups, *kernel], a.rank spatial dims; the
// output extent by the rule's arithmetic, nothing validated again.
ConvGeom conv_geom(const tensor::core::ConvArgs& a, const Shape& x, const Shape& weight);

// Geometry of a checked conv_transpose expressed as its adjoint convolution: the conv whose
// input is the transpose's output [batch, c_out_t, *out_t] and whose output is the
// transpose's input. So geom.c_in = transpose output channels, geom.c_out = transpose input
// channels, and the transpose weight [Cin_t, Cout_t/G, *K] is exactly that conv's weight.
ConvGeom conv_transpose_geom(const tensor::core::ConvArgs& a, const Shape& x, const Shape& weight);

// The same from public per-rank options, checked first (ShapeError naming op): for callers
// that have not been through dispatch (the kernels' own tests, unfold, deform_conv2d).
template <std::size_t N>
ConvGeom conv_geom(std::string_view op, const Shape& x, const Shape& weight, const tensor::nn::ConvOptions<N>& o) {
  tensor::core::conv_output_shape<N>(op, x, weight, o);
  return conv_geom(tensor::core::conv_args(o), x, weight);
}
template <std::size_t N>
ConvGeom conv_transpose_geom(std::string_view op, const Shape& x, const Shape& weight,
                             const tensor::nn::ConvTransposeOptions<N>& o) {
  tensor::core::conv_transpose_output_shape<N>(op, x, weight, o);
  return conv_transpose_geom(tensor::core::conv_args(o), x, weight);
}

// y = conv(x, w) + bias (bias may be null).
void conv_forward(const ConvGeom& g, const float* x, const float* w, const float* bias, float* y);
void conv_forward(const ConvGeom& g, const double* x, const double* w, const double* bias, double* y);
// dx [batch, c_in, *in] from dy [batch, c_out, *out] (inputs the forward never read get 0).
void conv_backward_x(const ConvGeom& g, const float* dy, const float* w, float* dx);
void conv_backward_x(const ConvGeom& g, const double* dy, const double* w, double* dx);
// dw [c_out, c_in/groups, *kernel].
void conv_backward_weight(const ConvGeom& g, const float* x, const float* dy, float* dw);
void conv_backward_weight(const ConvGeom& g, const double* x, const double* dy, double* dw);
// db [c_out] = sum of dy over batch and space.
void conv_backward_bias(const ConvGeom& g, const float* dy, float* db);
void conv_backward_bias(const ConvGeom& g, const double* dy, double* db);

// conv_transpose with g from conv_transpose_geom: x [batch, g.c_out, *g.out] ->
// y [batch, g.c_in, *g.in]; bias [g.c_in] may be null.
void conv_transpose_forward(const ConvGeom& g, const float* x, const float* w, const float* bias, float* y);
void conv_transpose_forward(const ConvGeom& g, const double* x, const double* w, const double* bias, double* y);
// dx [batch, g.c_out, *g.out] from dy [batch, g.c_in, *g.in].
void conv_transpose_backward_x(const ConvGeom& g, const float* dy, const float* w, float* dx);
void conv_transpose_backward_x(const ConvGeom& g, const double* dy, const double* w, double* dx);
// dw [g.c_out, g.c_in/groups, *kernel] (the transpose weight layout).
void conv_transpose_backward_weight(const ConvGeom& g, const float* x, const float* dy, float* dw);
void conv_transpose_backward_weight(const ConvGeom& g, const double* x, const double* dy, double* dw);
// db [g.c_in].
void conv_transpose_backward_bias(const ConvGeom& g, const float* dy, float* db);
void conv_transpose_backward_bias(const ConvGeom& g, const double* dy, double* db);

// A block fused: whether conv_relu_pool_forward takes g, and y = max_pool2d(relu(conv(x, w)
// + bias), 2x2, stride 2, floor) [batch, c_out, out_h/2, out_w/2] for such a g, the pre-pool
// activation never stored, on the route conv_forward would take: the direct small-C_in
// kernel (conv_direct.hpp; at least a 2x2 output), noted "direct small-C_in + relu +
// max-pool 2x2", else im2col + gemm per sample (conv_gemm_pool.hpp; 2-d, groups 1, at least
// a 2x2 output), noted "im2col + gemm + relu + max-pool 2x2". For a caller that knows its
// model runs exactly conv2d -> relu -> max_pool2d(2, 2) (tensorctl eval's CNN).
bool conv_relu_pool_fusable(const ConvGeom& g);
void conv_relu_pool_forward(const ConvGeom& g, const float* x, const float* w, const float* bias, float* y);

// The forward routes (f32/f64 conv_forward) the calling thread's convolutions took since
// the last reset, distinct, "; "-separated, each "route [c_in->c_out khxkw]": "im2col + gemm",
// "gemm (pointwise)", "direct depthwise", "direct small-C_in" (conv_direct.hpp).
std::string conv_forward_routes();
void reset_conv_forward_routes();
// Whether f32 conv_forward may take the direct small-C_in route (default on; off with
// TENSOR_CONV_DIRECT=0), for A/B runs and tests; process-wide.
void set_conv_direct(bool on);
// The Highway target the direct small-C_in kernel runs on (e.g. "AVX3_ZEN4").
std::string conv_direct_target();

// unfold4d / fold4d (torch F.unfold / F.fold) as im2col / col2im: g from unfold_geom
// (c_out = c_in·kh·kw, groups 1). unfold: x [batch, c_in, H, W] -> cols [batch, c_in·kh·kw,
// Ho·Wo], rows (c, kh, kw)-major, 0 in padding. fold: the adjoint, overlaps summed.
ConvGeom unfold_geom(std::string_view op, const Shape& x, const std::array<std::int64_t, 2>& kernel,
                     const tensor::nn::UnfoldOptions& o);
void unfold_forward(const ConvGeom& g, const float* x, float* cols);
void unfold_forward(const ConvGeom& g, const double* x, double* cols);
void fold_forward(const ConvGeom& g, const float* cols, float* x);
void fold_forward(const ConvGeom& g, const double* cols, double* x);

}  // namespace tensor::cpu::nn
