// Internal: the Vulkan op families' registration (one vk_<family>.cpp each, built on
// vk_kernel.hpp) and the random generator's state. Called by vk_backend.cpp only.
#pragma once

#include <cstdint>

#include "dispatch/backend.hpp"

namespace tensor::vulkan {

void register_creation(dispatch::Backend& b);     // vk_creation.cpp: data in/out, fill, random
void register_layout(dispatch::Backend& b);       // vk_layout.cpp: reshape, views, slice_assign
void register_elementwise(dispatch::Backend& b);  // vk_elementwise.cpp: math, compare, fused, cast
void register_reduce(dispatch::Backend& b);       // vk_reduce.cpp: reductions and scans
void register_matmul(dispatch::Backend& b);       // vk_matmul.cpp: tiled and cooperative matrix
void register_index(dispatch::Backend& b);        // vk_index.cpp: gather, select, scatter
void register_rows(dispatch::Backend& b);         // vk_rows.cpp: softmax, sort, cross
void register_module(dispatch::Backend& b);       // vk_module.cpp: pools, interpolate, layer_norm, embedding
void register_conv(dispatch::Backend& b);         // vk_conv.cpp: conv, conv_transpose and their gradients
void register_attention(dispatch::Backend& b);    // vk_attention.cpp: fused attention

// Reseeds the host-side generator of `device` (vk_creation.cpp).
void seed_device(DeviceId device, std::uint64_t seed);

}  // namespace tensor::vulkan
