// What the CPU backend runs on, for `tensorctl info` and tests: the SIMD target
// Highway dispatches to, the targets compiled in, BLIS's kernel set, OpenMP threads.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tensor::cpu {

// Highway targets compiled into the kernels AND supported by this CPU (HWY_* bits,
// best first). Reflects hwy::SetSupportedTargetsForTest while a mock is active, so
// tests read it before forcing targets.
std::vector<std::int64_t> compiled_targets();
// Name of the target HWY_DYNAMIC_DISPATCH currently picks ("AVX3", "AVX2", ...).
const char* current_target_name();
// BLIS's configuration name for this CPU ("skx", "haswell", ...), or "none" without BLIS.
std::string blis_arch();
// The f32 GEMM route (gemm.cpp): "onednn sgemm (avx512_core); f64 blis", "blis zen3", "loop".
std::string gemm_route();
// Threads OpenMP regions would use (1 without OpenMP).
int omp_threads();

}  // namespace tensor::cpu
