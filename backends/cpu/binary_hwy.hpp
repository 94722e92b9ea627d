// Contiguous f32/f64 add/sub/mul/div kernels (Highway, dynamic dispatch). A normal
// header: no hwy/highway.h here. `out` may alias either input exactly.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace tensor::cpu::simd {

enum class BinOp : std::uint8_t { Add, Sub, Mul, Div };

// out[i] = a[i] op b[i]
void binary_f32(BinOp op, const float* a, const float* b, float* out, std::size_t n);
void binary_f64(BinOp op, const double* a, const double* b, double* out, std::size_t n);
// out[i] = a[i] op s
void binary_scalar_f32(BinOp op, const float* a, float s, float* out, std::size_t n);
void binary_scalar_f64(BinOp op, const double* a, double s, double* out, std::size_t n);
// out[i] = s op b[i] (the reversed kernels: s - b, s / b)
void binary_rscalar_f32(BinOp op, float s, const float* b, float* out, std::size_t n);
void binary_rscalar_f64(BinOp op, double s, const double* b, double* out, std::size_t n);

}  // namespace tensor::cpu::simd
