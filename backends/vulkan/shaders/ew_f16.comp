// The f16 arithmetic variant of the elementwise family, used for f16 tensors where
// the device has shaderFloat16 and storageBuffer16BitAccess: elements are read and
// written as float16_t (no packing into words, so stores need no atomics), add, sub
// and mul run in f16 (correctly rounded, so equal to f32 math rounded once), div
// runs in f32 and rounds to f16 with the exact conversion of common.glsl, copies
// and fills move 16-bit elements. Subnormal f16 results may flush to zero on
// devices without shaderDenormPreserveFloat16 (within the f16 tolerance).
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_shader_16bit_storage : require

#include "vk_codes.h"
layout(local_size_x = 256) in;
layout(constant_id = 0) const int OP = EW_ADD;   // EW_ADD, EW_SUB, EW_MUL, EW_DIV, EW_COPY, EW_FILL
layout(constant_id = 1) const int BSCALAR = 0;   // b is the scalar s0 (f16 bits)
layout(constant_id = 2) const int CONTIG = 0;    // every operand dense in the output's order

#include "common.glsl"

layout(std430, set = 0, binding = 1) readonly buffer A { float16_t a16[]; };
layout(std430, set = 0, binding = 2) readonly buffer B { float16_t b16[]; };
layout(std430, set = 0, binding = 4) writeonly buffer O { float16_t o16[]; };

int index_of(int k, int i) { return CONTIG != 0 ? int(P[P_OPND + 9 * k]) + i : operand_index_in(k, i); }

float16_t scalar16() { return unpackFloat2x16(P[P_S0] & 0xFFFFu).x; }

void main() {
  int i = global_linear_id(256u);
  if (i >= int(P[P_N])) return;
  int io = index_of(0, i);
  if (OP == EW_FILL) {
    o16[io] = scalar16();
    return;
  }
  float16_t x = a16[index_of(1, i)];
  if (OP == EW_COPY) {
    o16[io] = x;
    return;
  }
  float16_t y = BSCALAR != 0 ? scalar16() : b16[index_of(2, i)];
  float16_t r;
  if (OP == EW_ADD) r = x + y;
  else if (OP == EW_SUB) r = x - y;
  else if (OP == EW_MUL) r = x * y;
  else r = unpackFloat2x16(float_to_half(float(x) / float(y))).x;
  o16[io] = r;
}
