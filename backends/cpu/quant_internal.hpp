// What the CPU's quant rows share between backends/cpu/quant.cpp (quantize, dequantize,
// q_matmul) and quant_conv.cpp (q_conv2d): oneDNN's engine, a stream per thread, the weight
// reorder, and the entries the conv falls back to.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backends/cpu/cpu_ops.hpp"
#include "dispatch/quant.hpp"
#include "dispatch/table/ops.hpp"

#if TENSOR_HAVE_ONEDNN
#include <oneapi/dnnl/dnnl.h>
#endif

namespace tensor::cpu::qdetail {

using dispatch::Prim;

// Contiguous f32 elements of x (a copy only when x is another dtype or strided).
CpuRef f32_dense(CpuRef x);
Prim dequantize(Prim q, DType dtype);
Prim q_matmul(Prim x, Prim w);
Prim q_conv2d_entry(Prim x, Prim w, Prim bias, const dispatch::QConvArgs& args);
// The routes last_q_matmul_route() / last_q_conv2d_route() report on this thread.
void set_route(std::string route);
void set_conv_route(std::string route);

#if TENSOR_HAVE_ONEDNN
dnnl_engine_t int8_engine();  // nullptr where oneDNN has no cpu engine

// This thread's stream (oneDNN streams are not shared between threads) and its scratchpad.
struct Int8Stream {
  dnnl_stream_t stream = nullptr;
  std::vector<std::byte> scratch;
  Int8Stream();
  Int8Stream(const Int8Stream&) = delete;
  Int8Stream& operator=(const Int8Stream&) = delete;
  ~Int8Stream();
};
Int8Stream& this_thread_stream();

// The primitive descriptor of `op_desc` (an int8 matmul or convolution) with the weight's
// output scales (one for the tensor, or one per output channel: mask bit 1) and a user
// scratchpad; nullptr where oneDNN refuses it. `impl` gets the implementation's name.
dnnl_primitive_desc_t scaled_int8_desc(const_dnnl_op_desc_t op_desc, const std::vector<float>& wscales, dnnl_engine_t e,
                                       std::string& impl);
// A created int8 primitive (matmul or convolution) with its memory descriptors, its
// weights reordered into the layout it chose (oneDNN's allocation), the size of the user
// scratchpad it needs (two threads may run one primitive at once) and the implementation's
// name; owns and destroys the primitive and the weights.
struct Int8Primitive {
  dnnl_primitive_t prim = nullptr;
  dnnl_memory_desc_t src{}, dst{}, wei{}, scratch{};
  std::size_t scratch_bytes = 0;
  dnnl_memory_t weights = nullptr;
  std::string impl;
  Int8Primitive() = default;
  Int8Primitive(const Int8Primitive&) = delete;
  Int8Primitive& operator=(const Int8Primitive&) = delete;
  ~Int8Primitive() {
    if (weights != nullptr) dnnl_memory_destroy(weights);
    if (prim != nullptr) dnnl_primitive_destroy(prim);
  }
};

// Allocates *out in `want` and reorders the s8 codes (laid out as `plain`) into it.
bool reorder_codes(dnnl_memory_t* out, const dnnl_memory_desc_t& want, const dnnl_memory_desc_t& plain,
                   const std::int8_t* codes);
#endif

struct Q4Pack;  // quant_q4.hpp
struct Q8Pack;  // quant_q8.hpp
// What q_matmul keeps with a weight (QuantPrim::cache: one slot per tensor, so every route's
// state lives in one object): oneDNN's plans by M (and column slab), the q4 nibble pack and
// the q8 dpbusd pack.
// A QuantPrim is immutable (a write makes a new one, with an empty cache), so neither goes stale.
struct MatmulWeightCache final : dispatch::quant::QuantCache {
  std::mutex mu;
#if TENSOR_HAVE_ONEDNN
  std::map<std::int64_t, std::shared_ptr<const Int8Primitive>> by_m;
#endif
  std::shared_ptr<const Q4Pack> q4;
  bool q4_tried = false;  // q4 made (or found not to fit) once
  std::shared_ptr<const Q8Pack> q8;
  bool q8_tried = false;  // q8 made (or found not to fit) once
};

}  // namespace tensor::cpu::qdetail
