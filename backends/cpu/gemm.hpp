// One single-threaded f32 GEMM on arbitrary row/column strides, routed to oneDNN's
// dnnl_sgemm where the operands allow it and to BLIS (or a loop) otherwise.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tensor::cpu {

// c[m x n] = alpha * a[m x k] * b[k x n] + beta * c, each matrix given by its row and
// column strides (elements). beta == 0 overwrites c (NaN in c does not propagate), as
// BLIS does. Runs on the calling thread only: callers split work on parallel_chunks.
void sgemm(std::size_t m, std::size_t n, std::size_t k, float alpha, const float* a, std::int64_t rsa,
           std::int64_t csa, const float* b, std::int64_t rsb, std::int64_t csb, float beta, float* c,
           std::int64_t rsc, std::int64_t csc);

// While one is alive, sgemm calls on this thread skip setting the OpenMP thread count
// to 1 and back around each product (it stays 1 for the scope): a loop of many tiny
// products (a batch of 32 x 32 matmuls) spent ~20% of its time on those two calls.
class GemmThreadScope {
 public:
  GemmThreadScope();
  ~GemmThreadScope();
  GemmThreadScope(const GemmThreadScope&) = delete;
  GemmThreadScope& operator=(const GemmThreadScope&) = delete;

 private:
  [[maybe_unused]] int prev_ = 1;  // unused without oneDNN
};

}  // namespace tensor::cpu
