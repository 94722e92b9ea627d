// tensorctl bench --only quant (bench_quant.cpp): the int8 product of a float activation and
// a quantized weight (q_matmul) against our f32 product of the same shape, in the same run.
#pragma once

namespace tensor_bench {
// 0 on success.
int run_quant(bool quick);
}  // namespace tensor_bench
