// Internal: each CPU op-family file registers its own entries on the Backend.
#pragma once

#include "backends/cpu/cpu_tensor.hpp"
#include "dispatch/backend.hpp"

namespace tensor::cpu {

void register_creation_ops(dispatch::Backend& b);  // creation.cpp: from_data, full, random, casts, ...
void register_layout_ops(dispatch::Backend& b);    // layout.cpp: views, reshape
void register_binary_ops(dispatch::Backend& b);    // binary.cpp: arithmetic, comparisons, bool, masks
void register_unary_ops(dispatch::Backend& b);     // unary.cpp: float math, abs, bitwise not
void register_matmul_ops(dispatch::Backend& b);    // matmul.cpp
void register_reduce_ops(dispatch::Backend& b);    // reduce.cpp: sum, prod, mean_dim, scans
void register_moments_ops(dispatch::Backend& b);   // moments.cpp: var_mean in one pass
void register_index_ops(dispatch::Backend& b);     // index.cpp: gather/scatter/select, cat, repeat_dim
void register_sort_ops(dispatch::Backend& b);      // sort.cpp: sort, argsort, topk family
void register_activation_ops(dispatch::Backend& b);  // activation.cpp: relu ... softmax
void register_distributed_ops(dispatch::Backend& b);  // distributed.cpp: all_reduce on the tensor's buffer
void register_quant_ops(dispatch::Backend& b);       // quant.cpp: quantize, dequantize in one pass
void register_nn_ops(dispatch::Backend& b);          // nn/nn_entries.cpp: conv, pools, interpolate, ...

// `a` converted to dtype `to` (Rust `as` semantics), any layout in, contiguous out;
// `a` itself when it already has that dtype.
CpuRef convert_tensor(CpuRef a, DType to);

}  // namespace tensor::cpu
