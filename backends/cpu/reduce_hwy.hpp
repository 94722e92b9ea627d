// Highway reductions over contiguous f32/f64 runs (a normal header: no hwy/highway.h).
// Several vector accumulators; sums accumulate in double. Large runs are split
// across OpenMP threads outside the kernels.
#pragma once

#include <cstddef>

namespace tensor::cpu::simd {

double sum_f32(const float* x, std::size_t n);
double sum_f64(const double* x, std::size_t n);
// NaN if any element is NaN; n must be > 0.
float max_f32(const float* x, std::size_t n);
float min_f32(const float* x, std::size_t n);
double max_f64(const double* x, std::size_t n);
double min_f64(const double* x, std::size_t n);

}  // namespace tensor::cpu::simd
