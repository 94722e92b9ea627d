// The CPU's quant rows (backends/cpu/quant.cpp), for tools: the route the calling thread's
// last q_matmul took ("onednn <kernel name>", or "dequantize + f32 matmul").
#pragma once

#include <string>

namespace tensor::cpu {

std::string last_q_matmul_route();
// The route the calling thread's last q_conv2d took ("onednn conv <kernel name>", "im2col +
// onednn <kernel name>", "dequantize + f32 conv2d"; empty before any).
std::string last_q_conv2d_route();

}  // namespace tensor::cpu
