// Shared GLSL: dtype-coded loads/stores on uint-word buffers (8- and 16-bit elements
// are packed in words, stored with atomics so neighbours never race), conversions
// with Rust `as` semantics, and strided index arithmetic over the parameter block.
#include "vk_codes.h"

layout(std430, set = 0, binding = 0) readonly buffer Params { uint P[]; };

int dt_size(int dt) {
  if (dt == DT_I8 || dt == DT_U8 || dt == DT_BOOL || dt == DT_BOOLU8) return 1;
  if (dt == DT_I16 || dt == DT_U16) return 2;
  return 4;
}
// 0: float, 1: signed int, 2: unsigned int or bool
int dt_kind(int dt) {
  if (dt == DT_F32) return 0;
  if (dt == DT_I32 || dt == DT_I16 || dt == DT_I8) return 1;
  return 2;
}
bool dt_is_bool(int dt) { return dt == DT_BOOL || dt == DT_BOOLU8 || dt == DT_BOOLU32; }

uint extract_raw(uint word, int dt, int i) {
  int s = dt_size(dt);
  if (s == 4) return word;
  if (s == 1) return (word >> (uint(i & 3) * 8u)) & 0xFFu;
  return (word >> (uint(i & 1) * 16u)) & 0xFFFFu;
}
int word_of(int dt, int i) {
  int s = dt_size(dt);
  return s == 4 ? i : (s == 1 ? (i >> 2) : (i >> 1));
}

// Typed views of a raw element.
float as_f(uint r, int dt) { return uintBitsToFloat(r); }
int as_i(uint r, int dt) {
  if (dt == DT_I8) return bitfieldExtract(int(r), 0, 8);
  if (dt == DT_I16) return bitfieldExtract(int(r), 0, 16);
  return int(r);
}
uint as_u(uint r, int dt) { return r; }

uint mask_of(int dt) { int s = dt_size(dt); return s == 4 ? 0xFFFFFFFFu : (s == 1 ? 0xFFu : 0xFFFFu); }

const uint kNaN = 0x7FC00000u;

// Converts a raw element of dtype `from` to a raw element of dtype `to`.
uint convert_raw(uint r, int from, int to) {
  if (from == to) return r;
  if (dt_is_bool(to)) {
    if (dt_kind(from) == 0) return as_f(r, from) != 0.0 ? 1u : 0u;  // NaN -> true
    return (r & mask_of(from)) != 0u ? 1u : 0u;
  }
  int kf = dt_kind(from), kt = dt_kind(to);
  if (kt == 0) {  // -> float
    float f;
    if (kf == 0) f = as_f(r, from);
    else if (kf == 1) f = float(as_i(r, from));
    else f = float(r);
    return floatBitsToUint(f);
  }
  if (kf == 0) {  // float -> int: truncate, saturate, NaN -> 0
    float f = as_f(r, from);
    if (isnan(f)) return 0u;
    if (kt == 1) {
      int bits = dt_size(to) * 8;
      float hi = exp2(float(bits - 1));
      int v;
      if (f >= hi) v = int((1u << uint(bits - 1)) - 1u);
      else if (f <= -hi) v = bits == 32 ? int(0x80000000u) : -(1 << (bits - 1));
      else v = int(f);
      return uint(v) & mask_of(to);
    } else {
      int bits = dt_size(to) * 8;
      if (f <= 0.0) return 0u;
      if (f >= exp2(float(bits))) return mask_of(to);
      return uint(f);
    }
  }
  // int -> int: wrap (sign-extend the source first)
  uint v = kf == 1 ? uint(as_i(r, from)) : r;
  return v & mask_of(to);
}

// Strided index of operand k for output linear index i (the P block describes the shape).
int operand_index(int k, int i) {
  int rank = int(P[P_RANK]);
  int base = P_OPND + 9 * k;
  int idx = int(P[base]);
  int rem = i;
  for (int d = rank - 1; d >= 0; --d) {
    int n = int(P[P_SHAPE + d]);
    int c = rem % n;
    rem /= n;
    idx += c * int(P[base + 1 + d]);
  }
  return idx;
}

int global_linear_id(uint local_size) {
  return int((gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * local_size + gl_LocalInvocationID.x);
}
