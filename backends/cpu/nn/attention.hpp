// CPU fused attention: tiled over keys with an online softmax, so the [Lq, Lk] score matrix
// is never materialized (one [64, 64] tile per thread). Semantics are burn's (module-ops.md
// §2.13, §6.5): mask true = masked out, bottom-right causal, fully masked rows give 0.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "tensor/nn_options.hpp"
#include "tensor/shape.hpp"

namespace tensor::cpu::nn {

struct AttentionGeom {
  std::size_t batch = 1, heads = 1, lq = 1, lk = 1, d = 1, dv = 1;
  double scale = 1.0;
  std::optional<double> softcap;
  bool is_causal = false;
  // Element strides of the B and H dims of mask and bias ([B|1, H|1, Lq, Lk], the [Lq, Lk]
  // part contiguous); 0 for a broadcast dim.
  std::int64_t mask_sb = 0, mask_sh = 0, bias_sb = 0, bias_sh = 0;
};

// Validates through attention_output_shape (ShapeError naming op) and fills the strides for
// contiguous mask/bias buffers of the given shapes.
AttentionGeom attention_geom(std::string_view op, const Shape& q, const Shape& k, const Shape& v,
                             const Shape* mask, const Shape* bias, const tensor::nn::AttentionModuleOptions& o);

// out [B, H, Lq, Dv] from q [B,H,Lq,D], k [B,H,Lk,D], v [B,H,Lk,Dv]; mask (bytes, nonzero =
// masked out) and bias may be null.
void attention_forward(const AttentionGeom& g, const float* q, const float* k, const float* v,
                       const std::uint8_t* mask, const float* bias, float* out);
void attention_forward(const AttentionGeom& g, const double* q, const double* k, const double* v,
                       const std::uint8_t* mask, const double* bias, double* out);

// Gradients for upstream dout [B, H, Lq, Dv]: dq, dk, dv (shapes of q, k, v) and, when
// dbias is not null, d attn_bias in bias's own (possibly broadcast) shape, summed over the
// broadcast dims. Masked entries and fully masked rows get 0. Recomputes the softmax
// statistics tile by tile (no [Lq, Lk] buffer).
void attention_backward(const AttentionGeom& g, const float* q, const float* k, const float* v,
                        const std::uint8_t* mask, const float* bias, const float* dout, float* dq, float* dk, float* dv,
                        float* dbias);
void attention_backward(const AttentionGeom& g, const double* q, const double* k, const double* v,
                        const std::uint8_t* mask, const double* bias, const double* dout, double* dq, double* dk,
                        double* dv, double* dbias);

}  // namespace tensor::cpu::nn
