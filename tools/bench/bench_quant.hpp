// tensorctl bench --only quant (bench_quant.cpp): the int8 product of a float activation and
// a quantized weight (q_matmul) against our f32 product of the same shape, in the same run.
#pragma once

#include <string>

namespace tensor_bench {
// 0 on success.
int run_quant(bool quick);
// --device D other than the cpu (bench_quant_device.cpp): the device's q_matmul, quantize and
// dequantize against its own f32 ops of the same shape.
int run_quant_device(const std::string& device, bool quick);
}  // namespace tensor_bench
