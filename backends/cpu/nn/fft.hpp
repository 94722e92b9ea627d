// CPU rfft / irfft of any length (mixed radix for lengths whose prime factors are small,
// Bluestein's chirp-z through a power-of-two FFT otherwise), forward and backward, along the
// last dim of contiguous [rows, len] buffers. Semantics: module-ops.md §2.15 (torch's).
#pragma once

#include <cstddef>

namespace tensor::cpu::nn {

// re, im [rows, n/2 + 1]: X[k] = sum_{j<n} x[j] e^{-2 pi i jk/n}, with x truncated or
// zero-padded from len to n (n >= 1).
void rfft(std::size_t rows, std::size_t len, std::size_t n, const float* x, float* re, float* im);
void rfft(std::size_t rows, std::size_t len, std::size_t n, const double* x, double* re, double* im);
// y [rows, n] from `bins` bins per row (the first n/2 + 1 used, zero-padded if fewer); the
// imaginary parts of DC and Nyquist are ignored; normalised by 1/n.
void irfft(std::size_t rows, std::size_t bins, std::size_t n, const float* re, const float* im, float* y);
void irfft(std::size_t rows, std::size_t bins, std::size_t n, const double* re, const double* im, double* y);
// dx [rows, len] from the gradients of re and im ([rows, n/2 + 1]).
void rfft_backward(std::size_t rows, std::size_t len, std::size_t n, const float* g_re, const float* g_im, float* dx);
void rfft_backward(std::size_t rows, std::size_t len, std::size_t n, const double* g_re, const double* g_im,
                   double* dx);
// d_re, d_im [rows, bins] from dy [rows, n].
void irfft_backward(std::size_t rows, std::size_t bins, std::size_t n, const float* dy, float* d_re, float* d_im);
void irfft_backward(std::size_t rows, std::size_t bins, std::size_t n, const double* dy, double* d_re,
                    double* d_im);

}  // namespace tensor::cpu::nn
