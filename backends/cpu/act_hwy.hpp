// Highway kernels for the activations, their backward entries and the softmax family
// over contiguous f32/f64 runs (a normal header: no hwy/highway.h). Each computes the
// same formula as the default composition in one pass (softmax: a max pass, then an
// exp pass that sums, then a scale pass over the row still in cache). Lanes outside a
// formula's accurate range (NaN, infinities, huge magnitudes) are recomputed with the
// scalar reference below, so the special values match it exactly.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tensor::cpu::simd {

// out = f(x; p, q): p = slope (leaky_relu), alpha (hard_sigmoid); q = beta.
enum class ActOp : std::uint8_t { Relu, LeakyRelu, Gelu, Sigmoid, LogSigmoid, HardSigmoid };
// out = f(a, b) for the two-input entries (b may be one broadcast value):
//   ReluGrad(out, grad)    = out <= 0 ? 0 : grad
//   GeluGrad(x, grad)      = grad * d/dx gelu (exact erf form: Phi(x) + x * phi(x))
//   SigmoidGrad(out, grad) = out * (1 - out) * grad
//   LogSigmoidGrad(x, grad)= grad * sigmoid(-x)
//   Prelu(x, alpha)        = x < 0 ? x * alpha : x
enum class Act2Op : std::uint8_t { ReluGrad, GeluGrad, SigmoidGrad, LogSigmoidGrad, Prelu };
enum class SoftOp : std::uint8_t { Softmax, LogSoftmax, Softmin };

void act_f32(ActOp op, const float* x, float* out, std::size_t n, float p, float q);
void act_f64(ActOp op, const double* x, double* out, std::size_t n, double p, double q);
// b_scalar: b points at one value used for every element.
void act2_f32(Act2Op op, const float* a, const float* b, bool b_scalar, float* out, std::size_t n);
void act2_f64(Act2Op op, const double* a, const double* b, bool b_scalar, double* out, std::size_t n);

// `rows` rows of n contiguous elements, rows `ld` elements apart in x and out (out may be x).
void soft_rows_f32(SoftOp op, const float* x, float* out, std::size_t rows, std::size_t n, std::size_t ld);
void soft_rows_f64(SoftOp op, const double* x, double* out, std::size_t rows, std::size_t n, std::size_t ld);
// Along a dim of n elements `inner` apart (x[j * inner + i]) for the m <= inner lanes i
// in [0, m): the lanes are contiguous in memory, so vectors run across them.
void soft_cols_f32(SoftOp op, const float* x, float* out, std::size_t n, std::size_t inner, std::size_t m);
void soft_cols_f64(SoftOp op, const double* x, double* out, std::size_t n, std::size_t inner, std::size_t m);
// The same in pieces, for lanes split into groups of rows on threads (two passes over
// memory: stats, then write). stats: rows [0, n) folded into the per-lane running max mx
// and sum s of exp(x - mx) (start from mx = -inf, s = 0; groups of rows each fold into a
// state of their own). finish: `groups` states (group g at pm / ps + g * stride) joined,
// in group order, into each lane's max M and scale (softmax: 1 / sum; log_softmax:
// log(sum); a lane with a NaN or no finite max: M = +inf, scale NaN). write: rows of the
// result from them.
void soft_cols_stats_f32(SoftOp op, const float* x, std::size_t n, std::size_t inner, std::size_t m, float* mx, double* s);
void soft_cols_stats_f64(SoftOp op, const double* x, std::size_t n, std::size_t inner, std::size_t m, double* mx,
                         double* s);
void soft_cols_finish_f32(SoftOp op, const float* pm, const double* ps, std::size_t groups, std::size_t stride,
                          std::size_t m, float* M, float* scale);
void soft_cols_finish_f64(SoftOp op, const double* pm, const double* ps, std::size_t groups, std::size_t stride,
                          std::size_t m, double* M, double* scale);
void soft_cols_write_f32(SoftOp op, const float* x, float* out, std::size_t n, std::size_t inner, std::size_t m,
                         const float* M, const float* scale);
void soft_cols_write_f64(SoftOp op, const double* x, double* out, std::size_t n, std::size_t inner, std::size_t m,
                         const double* M, const double* scale);

// The scalar definitions the kernels match (the default compositions, element by element).
float act_ref(ActOp op, float x, float p, float q);
double act_ref(ActOp op, double x, double p, double q);
float act2_ref(Act2Op op, float a, float b);
double act2_ref(Act2Op op, double a, double b);

}  // namespace tensor::cpu::simd
