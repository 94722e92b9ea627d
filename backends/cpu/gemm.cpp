// The f32 GEMM route of the CPU backend: oneDNN's sgemm when built with it, else BLIS.
//
// Why oneDNN: Debian 12's BLIS 0.9 has no configuration for AMD family 0x1A (Zen 5) and
// falls back to its generic reference kernels there ("generic"), 17-34 GFLOP/s for a
// one-thread n = 512 f32 product, against 192-210 GFLOP/s for dnnl_sgemm (oneDNN 2.6),
// which picks its JIT kernels from the CPUID ISA bits (AVX-512...) rather than the CPU
// family. dnnl_sgemm takes row-major matrices with a leading dimension, each
// optionally transposed; any other layout (general strides, broadcast zero strides,
// negative strides) stays on BLIS, which takes both strides.
//
// No size threshold: one-thread square products, best of 31 x 2000 calls on the loaded
// 2-core VM, took 0.22-1.3 us with dnnl_sgemm against 4.2-12.4 us with bli_sgemm_ex for
// n = 2..48. The first dnnl_sgemm call in a process costs about 90 ms (oneDNN's
// initialisation and kernel JIT); later calls of new shapes about as much as a warm one.
#include "backends/cpu/gemm.hpp"

#include <algorithm>

#include "backends/cpu/blis.hpp"
#include "backends/cpu/cpu_info.hpp"

#if TENSOR_HAVE_ONEDNN
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>
#endif

namespace tensor::cpu {

namespace {

void sgemm_fallback(std::size_t m, std::size_t n, std::size_t k, float alpha, const float* a, std::int64_t rsa,
                    std::int64_t csa, const float* b, std::int64_t rsb, std::int64_t csb, float beta, float* c,
                    std::int64_t rsc, std::int64_t csc) {
#if TENSOR_HAVE_BLIS
  rntm_t rntm = BLIS_RNTM_INITIALIZER;
  bli_rntm_set_num_threads(1, &rntm);
  bli_sgemm_ex(BLIS_NO_TRANSPOSE, BLIS_NO_TRANSPOSE, static_cast<dim_t>(m), static_cast<dim_t>(n),
               static_cast<dim_t>(k), &alpha, const_cast<float*>(a), rsa, csa, const_cast<float*>(b), rsb, csb, &beta,
               c, rsc, csc, nullptr, &rntm);
#else
  for (std::size_t i = 0; i < m; ++i) {
    float* crow = c + static_cast<std::int64_t>(i) * rsc;
    for (std::size_t j = 0; j < n; ++j) {
      float s = 0;
      for (std::size_t p = 0; p < k; ++p)
        s += a[static_cast<std::int64_t>(i) * rsa + static_cast<std::int64_t>(p) * csa] *
             b[static_cast<std::int64_t>(p) * rsb + static_cast<std::int64_t>(j) * csb];
      float& cv = crow[static_cast<std::int64_t>(j) * csc];
      cv = beta == 0.0f ? alpha * s : alpha * s + beta * cv;
    }
  }
#endif
}

#if TENSOR_HAVE_ONEDNN
// A [rows x cols] operand as dnnl's (trans, ld): 'N' when its columns are contiguous,
// 'T' when its rows are; a stride along a dimension of extent 1 is never read, so it
// does not decide. False for any other layout.
bool as_dnnl(std::size_t rows, std::size_t cols, std::int64_t rs, std::int64_t cs, char& trans, std::int64_t& ld) {
  const auto r = static_cast<std::int64_t>(rows), cl = static_cast<std::int64_t>(cols);
  if (cs == 1 || cols == 1) {
    ld = rows == 1 ? std::max<std::int64_t>(cl, 1) : rs;
    if (ld >= std::max<std::int64_t>(cl, 1)) {
      trans = 'N';
      return true;
    }
  }
  if (rs == 1 || rows == 1) {
    ld = cols == 1 ? std::max<std::int64_t>(r, 1) : cs;
    if (ld >= std::max<std::int64_t>(r, 1)) {
      trans = 'T';
      return true;
    }
  }
  return false;
}
#endif

}  // namespace

void sgemm(std::size_t m, std::size_t n, std::size_t k, float alpha, const float* a, std::int64_t rsa,
           std::int64_t csa, const float* b, std::int64_t rsb, std::int64_t csb, float beta, float* c,
           std::int64_t rsc, std::int64_t csc) {
  if (m == 0 || n == 0) return;
#if TENSOR_HAVE_ONEDNN
  char ta = 'N', tb = 'N', tc = 'N';
  std::int64_t lda = 0, ldb = 0, ldc = 0;
  if (k > 0 && as_dnnl(m, k, rsa, csa, ta, lda) && as_dnnl(k, n, rsb, csb, tb, ldb) &&
      as_dnnl(m, n, rsc, csc, tc, ldc) && tc == 'N') {
    // dnnl_sgemm (built on OpenMP) opens a team of omp_get_max_threads() threads from
    // whatever thread calls it; our callers already run one product per thread, so the
    // calling thread's OpenMP thread count is 1 for the call and restored after (it is
    // a per-thread setting; the library's own OpenMP regions on this thread keep theirs).
    const int prev = omp_get_max_threads();
    if (prev != 1) omp_set_num_threads(1);
    const dnnl_status_t st = dnnl_sgemm(ta, tb, static_cast<dnnl_dim_t>(m), static_cast<dnnl_dim_t>(n),
                                        static_cast<dnnl_dim_t>(k), alpha, a, lda, b, ldb, beta, c, ldc);
    if (prev != 1) omp_set_num_threads(prev);
    if (st == dnnl_success) return;
  }
#endif
  sgemm_fallback(m, n, k, alpha, a, rsa, csa, b, rsb, csb, beta, c, rsc, csc);
}

#if TENSOR_HAVE_ONEDNN
GemmThreadScope::GemmThreadScope() : prev_(omp_get_max_threads()) {
  if (prev_ != 1) omp_set_num_threads(1);
}
GemmThreadScope::~GemmThreadScope() {
  if (prev_ != 1) omp_set_num_threads(prev_);
}
#else
GemmThreadScope::GemmThreadScope() = default;
GemmThreadScope::~GemmThreadScope() = default;
#endif

std::string gemm_route() {
#if TENSOR_HAVE_ONEDNN
  const char* isa = "sse41";
  switch (dnnl_get_effective_cpu_isa()) {
    case dnnl_cpu_isa_avx: isa = "avx"; break;
    case dnnl_cpu_isa_avx2: isa = "avx2"; break;
    case dnnl_cpu_isa_avx2_vnni: isa = "avx2_vnni"; break;
    case dnnl_cpu_isa_avx512_mic:
    case dnnl_cpu_isa_avx512_mic_4ops: isa = "avx512_mic"; break;
    case dnnl_cpu_isa_avx512_core: isa = "avx512_core"; break;
    case dnnl_cpu_isa_avx512_core_vnni: isa = "avx512_core_vnni"; break;
    case dnnl_cpu_isa_avx512_core_bf16: isa = "avx512_core_bf16"; break;
    case dnnl_cpu_isa_avx512_core_amx: isa = "avx512_core_amx"; break;
    default: break;
  }
  return std::string("onednn sgemm (") + isa + "); f64 blis";
#elif TENSOR_HAVE_BLIS
  return std::string("blis ") + bli_arch_string(bli_arch_query_id());
#else
  return "loop";
#endif
}

}  // namespace tensor::cpu
