// The reduction family: one workgroup per output element reduces a strided line
// (sum, prod, mean; argmax/argmin with lowest-index ties and NaN winning) with a
// shared-memory tree. Ints wrap; narrow int mean divides the exact 64-bit sum.
// Floats accumulate in f32 (narrow variant) or f64 (WIDE).
// Long single lines (whole-tensor reductions) are split: with a chunk size in the
// parameters, workgroup g reduces elements [g * chunk, (g + 1) * chunk) of the line
// into element g of a partial tensor (sum/prod: in the accumulator dtype; arg: the
// value to `o` and its index to `x`), and a second dispatch reduces the partials.
#version 450
#extension GL_GOOGLE_include_directive : require
#include "vk_codes.h"

layout(local_size_x = 64) in;
layout(constant_id = 0) const int OP = RD_SUM;
layout(constant_id = 1) const int DTA = DT_F32;
layout(constant_id = 2) const int DTO = DT_F32;   // the index dtype for argmax/argmin

#include "common.glsl"

layout(std430, set = 0, binding = 1) readonly buffer A { uint a_data[]; };
layout(std430, set = 0, binding = 2) readonly buffer B { uint b_data[]; };   // arg pairs in: indices (u32)
layout(std430, set = 0, binding = 3) buffer X { uint x_data[]; };            // arg pairs out: indices (u32)
layout(std430, set = 0, binding = 4) buffer O { uint o_data[]; };

shared RAW s_v[64];
shared uint s_h[64];   // high word of narrow int mean sums, or the index of arg reductions

DEFINE_LOAD(ld_a, a_data)
DEFINE_LOAD(ld_b, b_data)
DEFINE_STORE(st_o, o_data)

#define kind dt_kind(DTA)
#define arg (OP == RD_ARGMAX || OP == RD_ARGMIN)

// Accumulators live in the compute encoding: CT_F raw for floats, UT for ints.
RAW acc_of(RAW v) { return kind == 0 ? from_f(as_f(v, DTA), CT_F) : RAW(kind == 1 ? UT(as_i(v, DTA)) : as_u(v, DTA)); }
RAW combine(RAW x, RAW y) {
  if (kind == 0) {
    FT a = as_f(x, CT_F), b = as_f(y, CT_F);
    return from_f(OP == RD_PROD ? a * b : a + b, CT_F);
  }
  return OP == RD_PROD ? x * y : x + y;
}

// Whether candidate (v1, i1) beats (v0, i0) for argmax/argmin.
bool better(RAW v1, uint i1, RAW v0, uint i0) {
  bool gt, eq;
  if (kind == 0) {
    FT a = as_f(v1, DTA), b = as_f(v0, DTA);
    bool na = isnan(a), nb = isnan(b);
    if (na || nb) return na && (!nb || i1 < i0);
    gt = OP == RD_ARGMAX ? a > b : a < b;
    eq = a == b;
  } else if (kind == 1) {
    IT a = as_i(v1, DTA), b = as_i(v0, DTA);
    gt = OP == RD_ARGMAX ? a > b : a < b;
    eq = a == b;
  } else {
    UT a = as_u(v1, DTA), b = as_u(v0, DTA);
    gt = OP == RD_ARGMAX ? a > b : a < b;
    eq = a == b;
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
  int chunk = int(P[P_EXTRA + 2]);          // > 0: split mode (one line, P_N groups)
  bool pairs_in = P[P_EXTRA + 3] != 0u;     // arg: indices of the values come from b
  bool pairs_out = P[P_EXTRA + 4] != 0u;    // arg: write value to o and index to x
  // first: the line index of this group's first element; a big line is dispatched
  // in pieces (group base P_EXTRA + 5), each binding its part of the input.
  int gb = int(P[P_EXTRA + 5]);
  int base, first = 0;
  if (chunk > 0) {
    first = (gb + o) * chunk;
    base = int(P[P_OPND + 9]) + o * chunk * sd;
    n = min(chunk, n - first);
  } else {
    base = operand_index(1, o);
  }
#ifdef WIDE
  const bool wide = false;
#else
  const bool wide = OP == RD_MEAN && kind != 0;
#endif
  RAW acc = OP == RD_PROD ? (kind == 0 ? from_f(FT(1), CT_F) : RAW(1)) : (kind == 0 ? from_f(FT(0), CT_F) : RAW(0));
  uint hi = 0u;
  bool have = false;
  for (int j = int(t); j < n; j += 64) {
    RAW v = ld_a(DTA, base + j * sd);
    if (arg) {
      uint ix = pairs_in ? uint(ld_b(DT_U32, first + j)) : uint(first + j);
      if (!have || better(v, ix, acc, hi)) { acc = v; hi = ix; have = true; }
    } else if (wide) {
      uint lo = uint(acc);
      uint lo2 = kind == 1 ? uint(as_i(v, DTA)) : uint(v);
      uint hi2 = (kind == 1 && as_i(v, DTA) < IT(0)) ? 0xFFFFFFFFu : 0u;
      add64(lo, hi, lo2, hi2);
      acc = RAW(lo);
    } else {
      acc = combine(acc, acc_of(v));
    }
  }
  if (arg && !have) hi = 0xFFFFFFFFu;  // empty slot loses every comparison below
  s_v[t] = acc;
  s_h[t] = hi;
  barrier();
  for (uint s = 32u; s > 0u; s >>= 1) {
    if (t < s) {
      RAW v1 = s_v[t + s];
      uint h1 = s_h[t + s];
      if (arg) {
        if (h1 != 0xFFFFFFFFu && (s_h[t] == 0xFFFFFFFFu || better(v1, h1, s_v[t], s_h[t]))) { s_v[t] = v1; s_h[t] = h1; }
      } else if (wide) {
        uint lo = uint(s_v[t]), h = s_h[t];
        add64(lo, h, uint(v1), h1);
        s_v[t] = RAW(lo); s_h[t] = h;
      } else {
        s_v[t] = combine(s_v[t], v1);
      }
    }
    barrier();
  }
  if (t != 0u) return;
  int io = chunk > 0 ? gb + o : operand_index(0, o);
  RAW r = s_v[0];
  if (arg) {
    if (pairs_out) {
      st_o(DTA, io, r);
      x_data[io] = s_h[0];
      return;
    }
    st_o(DTO, io, RAW(s_h[0]) & mask_of(DTO));
    return;
  }
  if (OP == RD_MEAN) {
    if (kind == 0) {
      r = n == 0 ? from_f(FT(uintBitsToFloat(kNaN)), CT_F) : from_f(as_f(r, CT_F) / FT(n), CT_F);
    } else if (!wide) {
      r = kind == 1 ? RAW(UT(IT(r) / IT(n))) : RAW(UT(r) / UT(n));
    } else {
      uint lo = uint(r), h = s_h[0];
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
      r = RAW(neg ? 0u - q : q);
    }
  }
  // Sum/prod/mean write DTO: the input dtype, or the accumulator dtype for partials.
  if (kind == 0) r = from_f(as_f(r, CT_F), DTO);
  st_o(DTO, io, r & mask_of(DTO));
}
