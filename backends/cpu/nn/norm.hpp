// CPU layer_norm (forward and backward) over the last dim of a contiguous [rows, d] buffer.
#pragma once

#include <cstddef>

namespace tensor::cpu::nn {

// y = (x - mean) / sqrt(var + eps) * gamma (+ beta), biased variance. gamma, beta, mean and
// rstd (the per-row statistics, [rows]) may be null (gamma null = 1).
void layer_norm_forward(std::size_t rows, std::size_t d, const float* x, const float* gamma, const float* beta,
                        double eps, float* y, float* mean, float* rstd);
void layer_norm_forward(std::size_t rows, std::size_t d, const double* x, const double* gamma,
                        const double* beta, double eps, double* y, double* mean, double* rstd);
// dx [rows, d]; dgamma and dbeta ([d], may be null) are overwritten with sums over rows.
void layer_norm_backward(std::size_t rows, std::size_t d, const float* x, const float* gamma, const float* dy,
                         double eps, float* dx, float* dgamma, float* dbeta);
void layer_norm_backward(std::size_t rows, std::size_t d, const double* x, const double* gamma, const double* dy,
                         double eps, double* dx, double* dgamma, double* dbeta);

}  // namespace tensor::cpu::nn
