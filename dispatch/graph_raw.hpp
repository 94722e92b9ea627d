// The raw-kernel side of graph replay (issue 28 step 3): what a backend hands the replay
// list so that an elementwise node runs as one call of a plain function on fixed pointers
// (no Prim, no refcount, no validation, no allocation), with its intermediate values in
// one arena buffer planned at capture. A backend opts in from its graph_stop_capture
// row (set_graph_raw); the list (dispatch/graph_replay.cpp)
// decides which nodes qualify.
#pragma once

#include <cstddef>
#include <cstdint>

#include "dispatch/backend.hpp"
#include "dispatch/primitive.hpp"
#include "tensor/dtype.hpp"
#include "tensor/op_code.hpp"
#include "tensor/scalar.hpp"
#include "tensor/shape.hpp"

namespace tensor::dispatch {

// A Scalar argument converted once, at capture, to the tensor's element type.
struct RawScalar {
  alignas(8) unsigned char bytes[8] = {};
};

// out[i] = op(a[i]) (Unary), op(a[i], b[i]) (Binary) or op(a[i], s) (Scalar) for i < n,
// all dense buffers of one dtype; out may be a or b itself (never a partial overlap).
using RawKernel = void (*)(void* out, const void* a, const void* b, std::size_t n, const RawScalar& s);

// Whether a node is one the raw path may take is decided by the list; which kernel runs
// it, and buffers, by the backend.
struct GraphRaw {
  // The kernel for `op` on dense `dtype` operands, when `entry` (the backend's resolved
  // function for op, type-erased) is the one the kernel mirrors, so a replay computes
  // bit for bit what the entry computes; `s` (Scalar family) is converted into `out_s`.
  // Null: the node keeps its thunk.
  RawKernel (*kernel)(OpCode op, RawFn entry, DType dtype, const Scalar& s, RawScalar& out_s) = nullptr;
  // The address of p's first element when p is dense and row-major from it, else null.
  void* (*data)(const Primitive& p) = nullptr;
  // One buffer of `bytes` bytes (64-byte aligned) on the device: the graph's arena.
  Prim (*arena)(std::size_t bytes) = nullptr;
  // A dense tensor of `shape` and `dtype` at byte `offset` of an arena (it shares it).
  Prim (*view)(const Prim& arena, std::size_t offset, const Shape& shape, DType dtype) = nullptr;
  // Copies src's elements (any layout) densely into dst (same shape and dtype).
  void (*copy)(void* dst, const Primitive& src) = nullptr;
  // Runs body(ctx, c) for every c in [0, chunks), each once, on any thread; returns when all
  // have run (a fused group of raw nodes over a large count). Null: one thread.
  void (*parallel)(std::size_t chunks, void (*body)(void*, std::size_t), void* ctx) = nullptr;
};

// A backend's graph_stop_capture row hands the replay list its raw path (before the list
// is planned); without it every node keeps its thunk.
void set_graph_raw(GraphProgram& g, const GraphRaw* raw);

}  // namespace tensor::dispatch
