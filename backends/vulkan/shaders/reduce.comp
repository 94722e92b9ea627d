// The reduction family: one workgroup per output element reduces a strided line
// (sum, prod, mean; any/all; argmax/argmin/max_abs with lowest-index ties and NaN
// winning, writing the index, the value or both). Ints wrap; narrow int mean divides
// the exact 64-bit sum. Floats accumulate in f32 (narrow variant) or f64 (WIDE).
// Each invocation reduces a strided part of the line; the 64 partials are then
// combined by a shared-memory tree, or (SUBGROUP variant: narrow only, compiled with
// -DSUBGROUP, used where the device has subgroup arithmetic in compute) by subgroup
// arithmetic within each subgroup of SG invocations, then subgroup 0 folds the
// 64 / SG subgroup results and reduces once more.
// Long single lines (whole-tensor reductions) are split: with a chunk size in the
// parameters, workgroup g reduces elements [g * chunk, (g + 1) * chunk) of the line
// into element g of a partial tensor (sum/prod: in the accumulator dtype; any/all:
// u32 flags; arg: the value to `o` and its index to `x`), and a second dispatch
// reduces the partials.
// Column mode (P_EXTRA + 6 set; chosen by reduce_lines in ops/reduce.cpp for a reduced
// dim that is not the innermost one): one invocation per output element walks its
// line alone, so adjacent invocations read adjacent addresses. With a chunk size it
// is split too: invocation g reduces chunk g / P_N of output g % P_N's line into
// partial g (the same partial layouts as above, [chunks, outputs] row-major); the
// second pass is a column reduction of the partials (pairs: the index beside each
// value at the same position of b). The host keeps a line or chunk at most 16384
// long here (lavapipe ends an invocation's loop after 65535 iterations).
#version 450
#extension GL_GOOGLE_include_directive : require
#ifdef SUBGROUP
#extension GL_KHR_shader_subgroup_arithmetic : require
#endif
#include "vk_codes.h"

layout(local_size_x = 64) in;
layout(constant_id = 0) const int OP = RD_SUM;
layout(constant_id = 1) const int DTA = DT_F32;
layout(constant_id = 2) const int DTO = DT_F32;   // arg: the index dtype; any/all: the bool dtype
#ifdef SUBGROUP
layout(constant_id = SPEC_SUBGROUP) const int SG = 8;  // the pipeline's required subgroup size
#endif

#include "common.glsl"

layout(std430, set = 0, binding = 1) readonly buffer A { uint a_data[]; };
layout(std430, set = 0, binding = 2) readonly buffer B { uint b_data[]; };   // arg pairs in: indices (u32)
layout(std430, set = 0, binding = 3) buffer X { uint x_data[]; };            // arg pairs out: indices
layout(std430, set = 0, binding = 4) buffer O { uint o_data[]; };

shared RAW s_v[64];
shared uint s_h[64];   // high word of narrow int mean sums, or the index of arg reductions
#ifdef SUBGROUP
// One result per subgroup: the pipeline requires full subgroups of SG invocations.
shared RAW s_sv[64 / SG];
shared uint s_sh[64 / SG];
#endif

DEFINE_LOAD(ld_a, a_data)
DEFINE_LOAD(ld_b, b_data)
DEFINE_STORE(st_o, o_data)
DEFINE_STORE(st_x, x_data)

#define kind dt_kind(DTA)
#define arg (OP == RD_ARGMAX || OP == RD_ARGMIN || OP == RD_MAX_ABS)
#define flag_op (OP == RD_ANY || OP == RD_ALL)
#define is_max (OP != RD_ARGMIN)
const uint kNone = 0xFFFFFFFFu;   // the index of an empty arg slot: loses every comparison

// Accumulators live in the compute encoding: CT_F raw for floats, UT for ints.
RAW acc_of(RAW v) { return kind == 0 ? from_f(as_f(v, DTA), CT_F) : RAW(kind == 1 ? UT(as_i(v, DTA)) : as_u(v, DTA)); }
RAW combine(RAW x, RAW y) {
  if (flag_op) return OP == RD_ANY ? (x | y) : (x & y);
  if (kind == 0) {
    FT a = as_f(x, CT_F), b = as_f(y, CT_F);
    return from_f(OP == RD_PROD ? a * b : a + b, CT_F);
  }
  return OP == RD_PROD ? x * y : x + y;
}
RAW identity() {
  if (flag_op) return RAW(OP == RD_ALL ? 1 : 0);
  return OP == RD_PROD ? (kind == 0 ? from_f(FT(1), CT_F) : RAW(1)) : (kind == 0 ? from_f(FT(0), CT_F) : RAW(0));
}
// Whether a stored element is nonzero: every bit but a float's sign (NaN is nonzero).
RAW nonzero(RAW v) { return RAW((kind == 0 ? (v & (mask_of(DTA) >> 1)) : v) != RAW(0) ? 1 : 0); }
// The key an arg-style reduction compares: the element, or |a| (the sign bit cleared
// for floats, the wrapping negation for negative ints), as stored bits of DTA.
RAW key_of(RAW v) {
  if (OP != RD_MAX_ABS) return v;
  if (kind == 0) return v & (mask_of(DTA) >> 1);
  return (kind == 1 && as_i(v, DTA) < IT(0)) ? (RAW(0) - v) & mask_of(DTA) : v;
}

// Whether candidate (v1, i1) beats (v0, i0) for the arg-style reductions.
bool better(RAW v1, uint i1, RAW v0, uint i0) {
  bool gt, eq;
  if (kind == 0) {
    FT a = as_f(v1, DTA), b = as_f(v0, DTA);
    bool na = isnan(a), nb = isnan(b);
    if (na || nb) return na && (!nb || i1 < i0);
    gt = is_max ? a > b : a < b;
    eq = a == b;
  } else if (kind == 1) {
    IT a = as_i(v1, DTA), b = as_i(v0, DTA);
    gt = is_max ? a > b : a < b;
    eq = a == b;
  } else {
    UT a = as_u(v1, DTA), b = as_u(v0, DTA);
    gt = is_max ? a > b : a < b;
    eq = a == b;
  }
  return gt || (eq && i1 < i0);
}

void add64(inout uint lo, inout uint hi, uint lo2, uint hi2) {
  uint carry;
  lo = uaddCarry(lo, lo2, carry);
  hi = hi + hi2 + carry;
}

// Narrow int means sum exactly in 64 bits (lo in the value, hi beside it).
#ifdef WIDE
#define wide_mean false
#else
#define wide_mean (OP == RD_MEAN && kind != 0)
#endif

// Folds the partial (v1, h1) into (v, h).
void merge(inout RAW v, inout uint h, RAW v1, uint h1) {
  if (arg) {
    if (h1 != kNone && (h == kNone || better(v1, h1, v, h))) { v = v1; h = h1; }
  } else if (wide_mean) {
    uint lo = uint(v);
    add64(lo, h, uint(v1), h1);
    v = RAW(lo);
  } else {
    v = combine(v, v1);
  }
}

#ifdef SUBGROUP
// One subgroup's reduction of (v, h) (narrow variant: RAW = uint, FT = float); every
// invocation gets the result. Arg: the best value by subgroupMax/Min (a NaN, when
// there is one, wins), then the lowest index holding it, then that slot's value.
void subgroup_reduce(inout RAW v, inout uint h) {
  if (flag_op) {
    v = OP == RD_ANY ? subgroupOr(v) : subgroupAnd(v);
    return;
  }
  if (!arg) {
    if (kind == 0) {
      FT f = as_f(v, CT_F);
      v = from_f(OP == RD_PROD ? subgroupMul(f) : subgroupAdd(f), CT_F);
    } else {
      v = OP == RD_PROD ? subgroupMul(v) : subgroupAdd(v);
    }
    return;
  }
  bool have = h != kNone;
  bool hit;
  if (kind == 0) {
    FT f = as_f(v, DTA);
    bool nan_ = have && isnan(f);
    if (subgroupOr(nan_ ? 1u : 0u) != 0u) {
      hit = nan_;
    } else {
      FT inf = uintBitsToFloat(0x7F800000u);
      FT m = is_max ? subgroupMax(have ? f : -inf) : subgroupMin(have ? f : inf);
      hit = have && f == m;
    }
  } else if (kind == 1) {
    IT x = as_i(v, DTA);
    IT m = is_max ? subgroupMax(have ? x : IT(0x80000000u)) : subgroupMin(have ? x : IT(0x7FFFFFFF));
    hit = have && x == m;
  } else {
    UT x = as_u(v, DTA);
    UT m = is_max ? subgroupMax(have ? x : 0u) : subgroupMin(have ? x : 0xFFFFFFFFu);
    hit = have && x == m;
  }
  // Indices are distinct, so exactly one slot holds the winner (none: empty).
  uint w = subgroupMin(hit ? h : kNone);
  v = subgroupOr(hit && h == w ? v : 0u);
  h = w;
}
#endif

// Writes index h (< 2^31) in DTO to o or x; a 64-bit index is two words (also in the
// narrow variant, so a 32-bit input never needs the WIDE one for its i64 indices).
void store_index(bool to_x, int io, uint h) {
  if (dt_size(DTO) == 8) {
    if (to_x) { x_data[2 * io] = h; x_data[2 * io + 1] = 0u; }
    else { o_data[2 * io] = h; o_data[2 * io + 1] = 0u; }
    return;
  }
  RAW r = RAW(h) & mask_of(DTO);
  if (to_x) st_x(DTO, io, r);
  else st_o(DTO, io, r);
}

// Writes the reduction of the line (r, h) to its outputs (invocation 0).
void finish(int o, int chunk, int gb, int n, RAW r, uint h) {
  int io = chunk > 0 ? gb + o : operand_index(0, o);
  int mode = int(P[P_EXTRA + 4]);
  if (arg) {
    if (mode != RD_OUT_INDEX) st_o(DTA, io, r);
    if (mode == RD_OUT_PAIRS) x_data[io] = h;
    if (mode == RD_OUT_INDEX) store_index(false, io, h);
    if (mode == RD_OUT_BOTH) store_index(true, io, h);
    return;
  }
  if (flag_op) {
    st_o(DTO, io, r);
    return;
  }
  if (OP == RD_MEAN) {
    if (kind == 0) {
      r = n == 0 ? from_f(FT(uintBitsToFloat(kNaN)), CT_F) : from_f(as_f(r, CT_F) / FT(n), CT_F);
    } else if (!wide_mean) {
      r = kind == 1 ? RAW(UT(IT(r) / IT(n))) : RAW(UT(r) / UT(n));
    } else {
      uint lo = uint(r);
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

// Folds element v (line index ix; with pairs_in, v is already a key) into (acc, hi).
void accumulate(inout RAW acc, inout uint hi, RAW v, uint ix, bool pairs_in) {
  if (arg) {
    if (!pairs_in) v = key_of(v);
    if (hi == kNone || better(v, ix, acc, hi)) { acc = v; hi = ix; }
  } else if (flag_op) {
    acc = combine(acc, nonzero(v));
  } else if (wide_mean) {
    uint lo = uint(acc);
    uint lo2 = kind == 1 ? uint(as_i(v, DTA)) : uint(v);
    uint hi2 = (kind == 1 && as_i(v, DTA) < IT(0)) ? 0xFFFFFFFFu : 0u;
    add64(lo, hi, lo2, hi2);
    acc = RAW(lo);
  } else {
    acc = combine(acc, acc_of(v));
  }
}

// Column mode: invocation g reduces (part of) one line by itself (see the header).
void column(int n, int sd, int chunk, bool pairs_in) {
  int outs = int(P[P_N]);
  int parts = chunk > 0 ? (n + chunk - 1) / chunk : 1;
  uint g = uint(global_linear_id(64u));
  if (g >= uint(outs) * uint(parts)) return;
  int o = int(g % uint(outs));
  int first = chunk > 0 ? int(g / uint(outs)) * chunk : 0;
  int len = chunk > 0 ? min(chunk, n - first) : n;
  int base = operand_index(1, o) + first * sd;
  RAW acc = arg ? RAW(0) : identity();
  uint hi = arg ? kNone : 0u;
  for (int j = 0; j < len; ++j) {
    int at = base + j * sd;
    accumulate(acc, hi, ld_a(DTA, at), pairs_in ? uint(ld_b(DT_U32, at)) : uint(first + j), pairs_in);
  }
  finish(chunk > 0 ? int(g) : o, chunk, 0, len, acc, hi);
}

void main() {
  int n = int(P[P_EXTRA]);
  int sd = int(P[P_EXTRA + 1]);
  int chunk = int(P[P_EXTRA + 2]);          // > 0: split mode (one line, P_N groups)
  bool pairs_in = P[P_EXTRA + 3] != 0u;     // arg: the values are keys, their indices come from b
  // Uniform over the dispatch: the line path's barriers stay in uniform control flow.
  if (P[P_EXTRA + 6] != 0u) {
    column(n, sd, chunk, pairs_in);
    return;
  }
  int o = int(gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x);
  if (o >= int(P[P_N])) return;
  uint t = gl_LocalInvocationID.x;
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
  RAW acc = arg ? RAW(0) : identity();
  uint hi = arg ? kNone : 0u;
  for (int j = int(t); j < n; j += 64) {
    RAW v = ld_a(DTA, base + j * sd);
    accumulate(acc, hi, v, pairs_in ? uint(ld_b(DT_U32, first + j)) : uint(first + j), pairs_in);
  }
#ifdef SUBGROUP
  if (!wide_mean) {
    subgroup_reduce(acc, hi);
    uint sg = gl_SubgroupID, lane = gl_SubgroupInvocationID;
    if (lane == 0u) { s_sv[sg] = acc; s_sh[sg] = hi; }
    barrier();
    if (sg != 0u) return;
    // Subgroup 0 folds the subgroup results (each lane a strided part), then once more.
    acc = arg ? RAW(0) : identity();
    hi = arg ? kNone : 0u;
    for (uint k = lane; k < gl_NumSubgroups; k += gl_SubgroupSize) merge(acc, hi, s_sv[k], s_sh[k]);
    subgroup_reduce(acc, hi);
    if (lane == 0u) finish(o, chunk, gb, n, acc, hi);
    return;
  }
#endif
  s_v[t] = acc;
  s_h[t] = hi;
  barrier();
  for (uint s = 32u; s > 0u; s >>= 1) {
    if (t < s) {
      RAW v = s_v[t];
      uint h = s_h[t];
      merge(v, h, s_v[t + s], s_h[t + s]);
      s_v[t] = v;
      s_h[t] = h;
    }
    barrier();
  }
  if (t == 0u) finish(o, chunk, gb, n, s_v[0], s_h[0]);
}
