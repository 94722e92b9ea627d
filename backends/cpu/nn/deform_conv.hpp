// CPU deform_conv2d (torchvision semantics, module-ops.md §2.3: DCNv1 without a mask, DCNv2
// with one), forward and backward, as a bilinear-sampling im2col + gemm per sample.
#pragma once

#include <cstddef>

#include "backends/cpu/nn/conv.hpp"

namespace tensor::cpu::nn {

struct DeformGeom {
  ConvGeom conv;  // 2-d (in[0] = kernel[0] = out[0] = 1); groups = weight_groups
  std::size_t offset_groups = 1;
};
// Validates through deform_conv2d_output_shape (ShapeError naming op).
DeformGeom deform_conv2d_geom(std::string_view op, const Shape& x, const Shape& offset, const Shape& weight,
                              const Shape* mask, const Shape* bias, const tensor::nn::DeformConvOptions<2>& o);

// y [N, Cout, Ho, Wo]; offset [N, 2·OG·kh·kw, Ho, Wo] (dy then dx per tap); mask
// [N, OG·kh·kw, Ho, Wo] and bias [Cout] may be null.
void deform_conv2d_forward(const DeformGeom& g, const float* x, const float* offset, const float* weight,
                           const float* mask, const float* bias, float* y);
void deform_conv2d_forward(const DeformGeom& g, const double* x, const double* offset, const double* weight,
                           const double* mask, const double* bias, double* y);
// All gradients are overwritten; dmask must be null exactly when mask is, dbias may be null.
void deform_conv2d_backward(const DeformGeom& g, const float* x, const float* offset, const float* weight,
                            const float* mask, const float* dy, float* dx, float* doffset, float* dweight,
                            float* dmask, float* dbias);
void deform_conv2d_backward(const DeformGeom& g, const double* x, const double* offset, const double* weight,
                            const double* mask, const double* dy, double* dx, double* doffset, double* dweight,
                            double* dmask, double* dbias);

}  // namespace tensor::cpu::nn
