// The reduction family: one workgroup per output element reduces a strided line
// (sum, prod, mean; argmax/argmin with lowest-index ties and NaN winning) with a
// shared-memory tree. Ints wrap (32-bit); int mean divides the exact 64-bit sum.
#version 450
#extension GL_GOOGLE_include_directive : require
#include "vk_codes.h"

layout(local_size_x = 64) in;
layout(constant_id = 0) const int OP = RD_SUM;
layout(constant_id = 1) const int DTA = DT_F32;
layout(constant_id = 2) const int DTO = DT_F32;   // the index dtype for argmax/argmin

#include "common.glsl"

layout(std430, set = 0, binding = 1) readonly buffer A { uint a_data[]; };
layout(std430, set = 0, binding = 4) buffer O { uint o_data[]; };

shared uint s_v[64];
shared uint s_h[64];   // high word of int mean sums, or the index of arg reductions

uint ld_a(int dt, int i) { return extract_raw(a_data[word_of(dt, i)], dt, i); }
void st_o(int dt, int i, uint r) {
  int s = dt_size(dt);
  if (s == 4) { o_data[i] = r; return; }
  uint sh = s == 1 ? uint(i & 3) * 8u : uint(i & 1) * 16u;
  uint m = mask_of(dt) << sh;
  int w = word_of(dt, i);
  atomicAnd(o_data[w], ~m);
  atomicOr(o_data[w], (r << sh) & m);
}

uint combine(uint x, uint y) {
  const int kind = dt_kind(DTA);
  if (kind == 0) {
    float a = uintBitsToFloat(x), b = uintBitsToFloat(y);
    return floatBitsToUint(OP == RD_PROD ? a * b : a + b);
  }
  return OP == RD_PROD ? x * y : x + y;
}

// Whether candidate (v1, i1) beats (v0, i0) for argmax/argmin.
bool better(uint v1, uint i1, uint v0, uint i0) {
  const int kind = dt_kind(DTA);
  bool gt, eq;
  if (kind == 0) {
    float a = uintBitsToFloat(v1), b = uintBitsToFloat(v0);
    bool na = isnan(a), nb = isnan(b);
    if (na || nb) return na && (!nb || i1 < i0);
    gt = OP == RD_ARGMAX ? a > b : a < b;
    eq = a == b;
  } else if (kind == 1) {
    int a = as_i(v1, DTA), b = as_i(v0, DTA);
    gt = OP == RD_ARGMAX ? a > b : a < b;
    eq = a == b;
  } else {
    gt = OP == RD_ARGMAX ? v1 > v0 : v1 < v0;
    eq = v1 == v0;
  }
  return gt || (eq && i1 < i0);
}

void add64(inout uint lo, inout uint hi, uint lo2, uint hi2) {
  uint carry;
  lo = uaddCarry(lo, lo2, carry);
  hi = hi + hi2 + carry;
}

void main() {
  int o = int(gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x);
  if (o >= int(P[P_N])) return;
  uint t = gl_LocalInvocationID.x;
  int n = int(P[P_EXTRA]);
  int sd = int(P[P_EXTRA + 1]);
  int base = operand_index(1, o);
  const int kind = dt_kind(DTA);
  const bool arg = OP == RD_ARGMAX || OP == RD_ARGMIN;
  const bool wide = OP == RD_MEAN && kind != 0;
  uint acc = OP == RD_PROD ? (kind == 0 ? floatBitsToUint(1.0) : 1u) : (kind == 0 ? floatBitsToUint(0.0) : 0u);
  uint hi = 0u;
  bool have = false;
  for (int j = int(t); j < n; j += 64) {
    uint v = ld_a(DTA, base + j * sd);
    if (arg) {
      if (!have || better(v, uint(j), acc, hi)) { acc = v; hi = uint(j); have = true; }
    } else if (wide) {
      uint lo2 = kind == 1 ? uint(as_i(v, DTA)) : v;
      uint hi2 = (kind == 1 && as_i(v, DTA) < 0) ? 0xFFFFFFFFu : 0u;
      add64(acc, hi, lo2, hi2);
    } else {
      acc = combine(acc, kind == 1 ? uint(as_i(v, DTA)) : v);
    }
  }
  if (arg && !have) hi = 0xFFFFFFFFu;  // empty slot loses every comparison below
  s_v[t] = acc;
  s_h[t] = hi;
  barrier();
  for (uint s = 32u; s > 0u; s >>= 1) {
    if (t < s) {
      uint v1 = s_v[t + s], h1 = s_h[t + s];
      if (arg) {
        if (h1 != 0xFFFFFFFFu && (s_h[t] == 0xFFFFFFFFu || better(v1, h1, s_v[t], s_h[t]))) { s_v[t] = v1; s_h[t] = h1; }
      } else if (wide) {
        uint lo = s_v[t], h = s_h[t];
        add64(lo, h, v1, h1);
        s_v[t] = lo; s_h[t] = h;
      } else {
        s_v[t] = combine(s_v[t], v1);
      }
    }
    barrier();
  }
  if (t != 0u) return;
  int io = operand_index(0, o);
  uint r = s_v[0];
  if (arg) {
    r = s_h[0];
  } else if (OP == RD_MEAN) {
    if (kind == 0) {
      r = n == 0 ? kNaN : floatBitsToUint(uintBitsToFloat(r) / float(n));
    } else {
      uint lo = r, h = s_h[0];
      bool neg = kind == 1 && (h & 0x80000000u) != 0u;
      if (neg) { lo = ~lo; h = ~h; add64(lo, h, 1u, 0u); }
      uint un = uint(n);
      uint rem = h % un;
      uint q = 0u;
      for (int b = 31; b >= 0; --b) {
        // rem < n < 2^31, so the shift cannot overflow.
        rem = (rem << 1) | ((lo >> uint(b)) & 1u);
        if (rem >= un) { rem -= un; q |= 1u << uint(b); }
      }
      r = neg ? 0u - q : q;
    }
  }
  st_o(arg ? DTO : DTA, io, r & mask_of(arg ? DTO : DTA));
}
