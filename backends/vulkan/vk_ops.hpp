// Internal: the Vulkan op families' registration (one ops/<family>.cpp each, built on
// ops/kernel.hpp) and the random generator's state. Called by vk_backend.cpp only.
#pragma once

#include <cstdint>

#include "dispatch/backend.hpp"

namespace tensor::vulkan {

void register_creation(dispatch::Backend& b);     // ops/creation.cpp: data in/out, fill, random
void register_layout(dispatch::Backend& b);       // ops/layout.cpp: reshape, views, slice_assign
void assign_entry(DeviceId d, const dispatch::Prim& dst, const dispatch::Prim& src);  // ops/layout.cpp: copy_from
void register_elementwise(dispatch::Backend& b);  // ops/elementwise.cpp: math, compare, fused, cast
void register_reduce(dispatch::Backend& b);       // ops/reduce.cpp: reductions and scans
void register_matmul(dispatch::Backend& b);       // ops/matmul.cpp: tiled and cooperative matrix
void register_index(dispatch::Backend& b);        // ops/index.cpp: gather, select, scatter
void register_softmax_sort(dispatch::Backend& b); // ops/softmax_sort.cpp: softmax, sort, cross (rows.comp)
void register_pool_norm(dispatch::Backend& b);    // ops/pool_norm.cpp: pools, interpolate, layer_norm, embedding
                                                  // (module.comp)
void register_conv(dispatch::Backend& b);         // ops/conv.cpp: conv, conv_transpose and their gradients
void register_attention(dispatch::Backend& b);    // ops/attention.cpp: fused attention
void register_quant(dispatch::Backend& b);        // ops/quant.cpp: quantize, dequantize, q_matmul (quant.comp)

// Reseeds the host-side generator of `device` (ops/creation.cpp).
void seed_device(DeviceId device, std::uint64_t seed);

}  // namespace tensor::vulkan
