// Internal: the CPU's raw kernels for graph replay (dispatch/graph_raw.hpp) and the
// graph_stop_capture row that hands them to the replay list.
#pragma once

#include "dispatch/graph_raw.hpp"

namespace tensor::cpu {

// The kernels of the entries binary.cpp and unary.cpp register: the same functor on dense
// f32/f64/i32/i64 runs, or null when `entry` is not the one registered there for op (or
// the dtype is not covered).
dispatch::RawKernel raw_binary_kernel(OpCode op, dispatch::RawFn entry, DType dtype, const Scalar& s,
                                      dispatch::RawScalar& out);
dispatch::RawKernel raw_unary_kernel(OpCode op, dispatch::RawFn entry, DType dtype);
// graph_stop_capture: hands the replay list the raw path (graph_raw.cpp).
void graph_stop_capture_entry(DeviceId, dispatch::GraphProgram& g);

}  // namespace tensor::cpu
