// Highway reductions over contiguous f32/f64 runs (a normal header: no hwy/highway.h).
// Several vector accumulators; sums accumulate in double. Large runs are split
// across OpenMP threads outside the kernels.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tensor::cpu::simd {

double sum_f32(const float* x, std::size_t n);
double sum_f64(const double* x, std::size_t n);
// Sum of (x[i] - mu)^2 in double, one thread (a row's centred second moment).
double sum_sq_dev_f32(const float* x, std::size_t n, double mu);
double sum_sq_dev_f64(const double* x, std::size_t n, double mu);
// NaN if any element is NaN; n must be > 0.
float max_f32(const float* x, std::size_t n);
float min_f32(const float* x, std::size_t n);
double max_f64(const double* x, std::size_t n);
double min_f64(const double* x, std::size_t n);

// acc[i] += x[i] (kProd: acc[i] *= x[i]) for i < m, in double: one row of an outer-dim
// sum / mean / prod, accumulated across the kept contiguous lanes.
void acc_rows_f32(double* acc, const float* x, std::size_t m, bool prod);
void acc_rows_f64(double* acc, const double* x, std::size_t m, bool prod);
// The same for `rows` rows `inner` elements apart (x[k * inner + i]), each lane's terms
// in row order (the result of acc_rows row by row), in register blocks of rows.
void acc_rows_strided_f32(double* acc, const float* x, std::size_t rows, std::size_t inner, std::size_t m, bool prod);
void acc_rows_strided_f64(double* acc, const double* x, std::size_t rows, std::size_t inner, std::size_t m, bool prod);
// s[i] += x[k * inner + i] - c[i], q[i] += (x[k * inner + i] - c[i])^2 over the rows, in
// double (var_mean along an outer dim: f32 in one pass shifted by c near the mean, f64 in
// a second pass over a cached block shifted by its mean).
void shifted_sums_rows_strided_f32(double* s, double* q, const float* x, std::size_t rows, std::size_t inner,
                                   std::size_t m, const double* c);
void shifted_sums_rows_strided_f64(double* s, double* q, const double* x, std::size_t rows, std::size_t inner,
                                   std::size_t m, const double* c);

// max(|x|) of n > 0 elements; NaN when any is NaN.
float max_abs_f32(const float* x, std::size_t n);
double max_abs_f64(const double* x, std::size_t n);

// Which extremum the argext kernels find: the maximum or minimum of x, or the maximum of |x|.
constexpr int kExtMax = 0, kExtMin = 1, kExtMaxAbs = 2;
// Index of the first extremum of n > 0 elements; a NaN wins over every number and the
// first NaN is taken; ties keep the lowest index.
std::size_t argext_f32(const float* x, std::size_t n, int kind);
std::size_t argext_f64(const double* x, std::size_t n, int kind);
// The same along an outer dim: lane i in [0, m) has its n elements at x[j * inner + i];
// writes each lane's extremum (|x| for kExtMaxAbs) and index. n > 0 and n < 2^31.
void argext_cols_f32(const float* x, std::size_t n, std::size_t inner, std::size_t m, int kind, float* best,
                     std::int64_t* where);
void argext_cols_f64(const double* x, std::size_t n, std::size_t inner, std::size_t m, int kind, double* best,
                     std::int64_t* where);
// The start of the first block of 64 of the n elements (the last block shorter) holding
// one that is NaN or beyond t (above it when `above`, else below it), with *mask bit i set
// for each element start + i that is; n where there is none. A top-k scan skips with it
// to the blocks with candidates.
std::size_t beyond_block_f32(const float* x, std::size_t n, float t, bool above, std::uint64_t* mask);
std::size_t beyond_block_f64(const double* x, std::size_t n, double t, bool above, std::uint64_t* mask);

}  // namespace tensor::cpu::simd
