// Bulk f16/bf16 <-> f32 conversions (Highway; a normal header). The half ops compute in
// f32 (as every op on halves does) a block at a time through these, instead of one
// element at a time through tensor::f16 / tensor::bf16. Results equal those classes'
// conversions bit for bit (round to nearest even, NaN stays a quiet NaN with its
// payload's top bits, overflow to infinity, subnormals exact), except that a signaling
// f16 NaN may widen to a quiet one.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tensor::cpu::simd {

// Half values are given by their bits (tensor::f16 / tensor::bf16 storage).
void f16_to_f32(const std::uint16_t* x, float* out, std::size_t n);
void bf16_to_f32(const std::uint16_t* x, float* out, std::size_t n);
void f32_to_f16(const float* x, std::uint16_t* out, std::size_t n);
void f32_to_bf16(const float* x, std::uint16_t* out, std::size_t n);

}  // namespace tensor::cpu::simd
