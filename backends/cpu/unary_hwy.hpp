// Highway kernels for contiguous f32/f64 unary math (a normal header: no
// hwy/highway.h). `out` may alias `x` exactly. Lanes outside a kernel's accurate
// range (NaN, infinities, huge sin/cos arguments, ...) are recomputed with libm.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tensor::cpu::simd {

enum class UnOp : std::uint8_t {
  Exp, Expm1, Log, Log1p, Sin, Cos, Tanh, Sqrt, Abs, Neg, Erf, Sigmoid, Recip, Floor, Ceil, Trunc, Round,
};

// out[i] = op(x[i]); Round is ties-to-even.
void unary_f32(UnOp op, const float* x, float* out, std::size_t n);
void unary_f64(UnOp op, const double* x, double* out, std::size_t n);

// The scalar definition each kernel matches (libm), for tails, fallbacks and tests.
float unary_ref(UnOp op, float x);
double unary_ref(UnOp op, double x);

}  // namespace tensor::cpu::simd
