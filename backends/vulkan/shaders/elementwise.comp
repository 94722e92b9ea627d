// The elementwise family: unary math, binary arithmetic with broadcasting by strides,
// scalar forms, comparisons (writing the out bool dtype), masks and casts/copies.
// The op and the dtypes are specialization constants, so each pipeline is one
// straight-line kernel after the driver folds the branches.
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : enable

#include "vk_codes.h"
layout(local_size_x = 256) in;
layout(constant_id = 0) const int OP = 0;
layout(constant_id = 1) const int DTA = DT_F32;   // a (and c, and b unless a mask)
layout(constant_id = 2) const int DTB = DT_F32;   // b (the mask dtype for mask ops)
layout(constant_id = 3) const int DTO = DT_F32;   // out
layout(constant_id = 4) const int BSCALAR = 0;    // b is the scalar s0

#include "common.glsl"

layout(std430, set = 0, binding = 1) readonly buffer A { uint a_data[]; };
layout(std430, set = 0, binding = 2) readonly buffer B { uint b_data[]; };
layout(std430, set = 0, binding = 3) readonly buffer C { uint c_data[]; };
layout(std430, set = 0, binding = 4) buffer O { uint o_data[]; };

uint ld_a(int dt, int i) { return extract_raw(a_data[word_of(dt, i)], dt, i); }
uint ld_b(int dt, int i) { return extract_raw(b_data[word_of(dt, i)], dt, i); }
uint ld_c(int dt, int i) { return extract_raw(c_data[word_of(dt, i)], dt, i); }
void st_o(int dt, int i, uint r) {
  int s = dt_size(dt);
  if (s == 4) { o_data[i] = r; return; }
  uint sh = s == 1 ? uint(i & 3) * 8u : uint(i & 1) * 16u;
  uint m = mask_of(dt) << sh;
  int w = word_of(dt, i);
  atomicAnd(o_data[w], ~m);
  atomicOr(o_data[w], (r << sh) & m);
}

float nan_f() { return uintBitsToFloat(kNaN); }

bool is_odd_integer(float b) { return floor(b) == b && abs(b) < 16777216.0 && (int(abs(b)) & 1) == 1; }

// std::pow semantics (C99 Annex F) on top of exp2/log2.
float pow_f(float a, float b) {
  if (b == 0.0 || a == 1.0) return 1.0;
  if (isnan(a) || isnan(b)) return nan_f();
  if (isinf(b)) {
    float aa = abs(a);
    if (aa == 1.0) return 1.0;
    return ((aa > 1.0) == (b > 0.0)) ? uintBitsToFloat(0x7F800000u) : 0.0;
  }
  bool odd = is_odd_integer(b);
  if (a == 0.0 || isinf(a)) {
    bool big = (a == 0.0) ? (b < 0.0) : (b > 0.0);
    float mag = big ? uintBitsToFloat(0x7F800000u) : 0.0;
    return (odd && sign(a) < 0.0) || (odd && a == 0.0 && (floatBitsToUint(a) & 0x80000000u) != 0u) ? -mag : mag;
  }
  float r = exp2(b * log2(abs(a)));
  if (a < 0.0) {
    if (floor(b) != b) return nan_f();
    if (odd) r = -r;
  }
  return r;
}

float erf_f(float x) {
  float z = abs(x);
  if (z < 0.5) {
    float x2 = x * x;
    return x * 1.1283791670955126 * (1.0 + x2 * (-1.0 / 3.0 + x2 * (0.1 + x2 * (-1.0 / 42.0 + x2 * (1.0 / 216.0)))));
  }
  float t = 1.0 / (1.0 + 0.5 * z);
  float r = t * exp(-z * z - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (-0.18628806 +
            t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277)))))))));
  return x >= 0.0 ? 1.0 - r : r - 1.0;
}

float log1p_f(float x) {
  float u = 1.0 + x;
  if (u == 1.0) return x;
  if (isinf(u)) return log(u);
  return log(u) * (x / (u - 1.0));
}

float tanh_f(float x) {
  float z = abs(x);
  if (z < 0.25) {
    float x2 = x * x;
    return x * (1.0 + x2 * (-1.0 / 3.0 + x2 * (2.0 / 15.0 + x2 * (-17.0 / 315.0))));
  }
  float e = exp(-2.0 * z);
  float t = (1.0 - e) / (1.0 + e);
  return x < 0.0 ? -t : t;
}

// fmod with the divisor's sign (floor-mod), like the CPU backend.
float rem_f(float a, float b) {
  if (isnan(a) || isnan(b) || isinf(a) || b == 0.0) return nan_f();
  if (isinf(b)) return (a == 0.0 || (a < 0.0) == (b < 0.0)) ? a : b;
  float r = a - b * trunc(a / b);
  if (abs(r) >= abs(b)) r = 0.0;
  if (r != 0.0 && ((r < 0.0) != (b < 0.0))) r += b;
  return r;
}

float unary_f(int op, float a) {
  switch (op) {
    case EW_RECIP: return 1.0 / a;
    case EW_EXP: return exp(a);
    case EW_LOG: return log(a);
    case EW_LOG1P: return log1p_f(a);
    case EW_SQRT: return sqrt(a);
    case EW_SIN: return sin(a);
    case EW_COS: return cos(a);
    case EW_TAN: return tan(a);
    case EW_SINH: return abs(a) < 0.25 ? a * (1.0 + a * a / 6.0 * (1.0 + a * a / 20.0)) : sinh(a);
    case EW_COSH: return cosh(a);
    case EW_TANH: return tanh_f(a);
    // Through atan: some drivers' asin/acos are far less precise (lavapipe: 2e-4).
    case EW_ASIN: return abs(a) > 1.0 ? nan_f() : atan(a, sqrt((1.0 - a) * (1.0 + a)));
    case EW_ACOS: return abs(a) > 1.0 ? nan_f() : atan(sqrt((1.0 - a) * (1.0 + a)), a);
    case EW_ATAN: return atan(a);
    case EW_ASINH: { float z = abs(a); float r = z > 1e18 ? log(z) + 0.6931471805599453 : log1p_f(z + z * z / (1.0 + sqrt(1.0 + z * z))); return a < 0.0 ? -r : r; }
    case EW_ACOSH: return a < 1.0 ? nan_f() : (a > 1e18 ? log(a) + 0.6931471805599453 : log1p_f((a - 1.0) + sqrt((a - 1.0) * (a + 1.0))));
    case EW_ATANH: return 0.5 * log1p_f(2.0 * a / (1.0 - a));
    case EW_ROUND: return roundEven(a);
    case EW_FLOOR: return floor(a);
    case EW_CEIL: return ceil(a);
    case EW_TRUNC: return trunc(a);
    case EW_ERF: return erf_f(a);
    case EW_ABS: return abs(a);
  }
  return a;
}

float binary_f(int op, float a, float b) {
  switch (op) {
    case EW_ADD: return a + b;
    case EW_SUB: return a - b;
    case EW_MUL: return a * b;
    case EW_DIV: return a / b;
    case EW_REM: return rem_f(a, b);
    case EW_POW: return pow_f(a, b);
    case EW_ATAN2: return atan(a, b);
  }
  return a;
}

// Wrapping int arithmetic on 32-bit patterns; narrower dtypes truncate on store.
uint binary_i(int op, int a, int b, int bits) {
  switch (op) {
    case EW_ADD: return uint(a) + uint(b);
    case EW_SUB: return uint(a) - uint(b);
    case EW_MUL: return uint(a) * uint(b);
    case EW_DIV:
      if (b == 0) return 0u;
      if (b == -1) return 0u - uint(a);
      return uint(a / b);
    case EW_REM: {
      if (b == 0 || b == -1) return 0u;
      int r = a - (a / b) * b;
      if (r != 0 && ((r < 0) != (b < 0))) r += b;
      return uint(r);
    }
    case EW_AND: return uint(a & b);
    case EW_OR: return uint(a | b);
    case EW_XOR: return uint(a ^ b);
    case EW_SHL: return (b < 0 || b >= bits) ? 0u : (uint(a) << uint(b));
    case EW_SHR: return (b < 0 || b >= bits) ? (a < 0 ? 0xFFFFFFFFu : 0u) : uint(a >> uint(b));
  }
  return uint(a);
}
uint binary_u(int op, uint a, uint b, int bits) {
  switch (op) {
    case EW_ADD: return a + b;
    case EW_SUB: return a - b;
    case EW_MUL: return a * b;
    case EW_DIV: return b == 0u ? 0u : a / b;
    case EW_REM: return b == 0u ? 0u : a % b;
    case EW_AND: return a & b;
    case EW_OR: return a | b;
    case EW_XOR: return a ^ b;
    case EW_SHL: return b >= uint(bits) ? 0u : (a << b);
    case EW_SHR: return b >= uint(bits) ? 0u : (a >> b);
  }
  return a;
}

bool compare_f(int op, float a, float b) {
  switch (op) {
    case EW_EQ: return a == b;
    case EW_GT: return a > b;
    case EW_GE: return a >= b;
    case EW_LT: return a < b;
    case EW_LE: return a <= b;
  }
  return false;
}
bool compare_i(int op, int a, int b) {
  switch (op) {
    case EW_EQ: return a == b;
    case EW_GT: return a > b;
    case EW_GE: return a >= b;
    case EW_LT: return a < b;
    case EW_LE: return a <= b;
  }
  return false;
}
bool compare_u(int op, uint a, uint b) {
  switch (op) {
    case EW_EQ: return a == b;
    case EW_GT: return a > b;
    case EW_GE: return a >= b;
    case EW_LT: return a < b;
    case EW_LE: return a <= b;
  }
  return false;
}

void main() {
  int i = global_linear_id(256u);
  if (i >= int(P[P_N])) return;
  int io = operand_index(0, i);
  int ia = operand_index(1, i);
  uint ra = ld_a(DTA, ia);
  uint rb = 0u;
  if (OP >= EW_ADD && OP < EW_RECIP) rb = BSCALAR != 0 ? P[P_S0] : ld_b(DTB, operand_index(2, i));
  uint r;
  const int kind = dt_kind(DTA);
  const int bits = dt_size(DTA) * 8;
  if (OP == EW_COPY) {
    r = convert_raw(ra, DTA, DTO);
  } else if (OP == EW_MASK_FILL) {
    r = (rb & mask_of(DTB)) != 0u ? P[P_S1] : ra;
  } else if (OP == EW_MASK_WHERE) {
    r = (rb & mask_of(DTB)) != 0u ? ld_c(DTA, operand_index(3, i)) : ra;
  } else if (OP == EW_BOOL_AND) {
    r = (ra != 0u && rb != 0u) ? 1u : 0u;
  } else if (OP == EW_BOOL_OR) {
    r = (ra != 0u || rb != 0u) ? 1u : 0u;
  } else if (OP == EW_BOOL_NOT) {
    r = ra == 0u ? 1u : 0u;
  } else if (OP >= EW_EQ && OP <= EW_LE) {
    bool c;
    if (kind == 0) c = compare_f(OP, as_f(ra, DTA), as_f(rb, DTA));
    else if (kind == 1) c = compare_i(OP, as_i(ra, DTA), as_i(rb, DTA));
    else c = compare_u(OP, ra, rb);
    r = c ? 1u : 0u;
  } else if (OP >= EW_RECIP) {
    if (kind == 0) r = floatBitsToUint(unary_f(OP, as_f(ra, DTA)));
    else if (OP == EW_NOT) r = ~ra;
    else if (OP == EW_ABS && kind == 1) { int v = as_i(ra, DTA); r = v < 0 ? 0u - uint(v) : uint(v); }
    else r = ra;
  } else {
    if (kind == 0) r = floatBitsToUint(binary_f(OP, as_f(ra, DTA), as_f(rb, DTA)));
    else if (kind == 1) r = binary_i(OP, as_i(ra, DTA), as_i(rb, DTA), bits);
    else r = binary_u(OP, ra, rb, bits);
  }
  st_o(DTO, io, r & mask_of(DTO));
}
