// One single-threaded f32 GEMM on arbitrary row/column strides, routed to oneDNN's
// dnnl_sgemm where the operands allow it and to BLIS (or a loop) otherwise.
#pragma once

#include <cstddef>
#include <cstdint>

#include "tensor/half.hpp"

namespace tensor::cpu {

// c[m x n] = alpha * a[m x k] * b[k x n] + beta * c, each matrix given by its row and
// column strides (elements). beta == 0 overwrites c (NaN in c does not propagate), as
// BLIS does. Runs on the calling thread only: callers split work on parallel_chunks.
void sgemm(std::size_t m, std::size_t n, std::size_t k, float alpha, const float* a, std::int64_t rsa,
           std::int64_t csa, const float* b, std::int64_t rsb, std::int64_t csb, float beta, float* c,
           std::int64_t rsc, std::int64_t csc);

// True when bf16 products run on oneDNN's AVX512_BF16 kernels (vdpbf16ps, about twice the
// f32 GEMM's speed): oneDNN is built in and its matmul picks a bf16 brgemm kernel on this
// CPU (probed once; DNNL_MAX_CPU_ISA below avx512_core_bf16 turns it off). The CPU backend
// then reports BF16 as Accelerated.
bool bf16_gemm_live();
// True when oneDNN is built in and its effective ISA is AMX (avx512_core_amx; ONEDNN_MAX_CPU_ISA
// can lower it): the bf16 route's name and the q8 route's row limit (quant_q8.hpp) follow it.
bool onednn_amx_live();

// c[m x n] = a[m x k] * b[k x n] for bf16 matrices (overwrites c), each given by its row
// and column strides (elements; one of each operand's two strides is 1): the products
// accumulate in f32 and are rounded to bf16 once (nearest even). On oneDNN's bf16
// kernels where bf16_gemm_live(), else (or where oneDNN takes no such layout) widened to
// f32 and through sgemm. Runs on the calling thread only, like sgemm.
void bf16gemm(std::size_t m, std::size_t n, std::size_t k, const bf16* a, std::int64_t rsa, std::int64_t csa,
              const bf16* b, std::int64_t rsb, std::int64_t csb, bf16* c, std::int64_t rsc, std::int64_t csc);

// c[m x n] = a[m x k] * b[k x n] (overwrites c) on oneDNN's matmul kernels with B packed
// once into the kernels' own blocked layout (on the calling thread) and shared by every
// slab of rows of c, `pieces` slabs (rounded to multiples of 32 rows) on parallel_chunks:
// a slab's product then reads packed B as it is, where a product per slab on B's own
// layout packs all of B again for every slab. a and c take any row/column strides
// oneDNN's matmul takes; false (c partly written or untouched) where oneDNN is not
// built in, bf16 kernels are not live, or oneDNN offers no such kernel.
enum class GemmType { f32, bf16 };
bool packed_gemm(GemmType type, std::size_t m, std::size_t n, std::size_t k, const void* a, std::int64_t rsa,
                 std::int64_t csa, const void* b, std::int64_t rsb, std::int64_t csb, void* c, std::int64_t rsc,
                 std::int64_t csc, std::size_t pieces);

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
