// <blis.h> with the warnings it triggers under -Werror silenced (one place for the pragmas).
// The CPU backend (TENSOR_HAVE_BLIS) and the benchmark's direct-BLIS reference
// (TENSOR_BENCH_HAVE_BLIS, tools/bench) both include it.
#pragma once

#if TENSOR_HAVE_BLIS || TENSOR_BENCH_HAVE_BLIS
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#pragma GCC diagnostic ignored "-Wpedantic"
#pragma GCC diagnostic ignored "-Wtype-limits"
#include <blis.h>
#pragma GCC diagnostic pop
#endif
