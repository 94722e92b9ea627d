// The rows family: kernels that own a whole line along one dim.
//  softmax / log_softmax / softmin: one workgroup per line: max (NaN propagates), sum of
//    exp(x - max), then the write; computed in f32 (f64 in WIDE), rounded once.
//  sort: one workgroup per line, bitonic sort in shared memory of (value, index)
//    keys, so ties keep their original order (stable) and NaN sorts as the
//    largest value (last ascending, first descending); writes the sorted values
//    and/or their source indices.
//  cross: one invocation per line of 3 (a x b with broadcast strides).
// The SUBGROUP variant (narrow, -DSUBGROUP) reduces softmax's max and sum with
// subgroup arithmetic: within each subgroup of SG invocations, then subgroup 0 folds
// the 256 / SG results and reduces once more.
#version 450
#extension GL_GOOGLE_include_directive : require
#ifdef SUBGROUP
#extension GL_KHR_shader_subgroup_arithmetic : require
#endif
#include "vk_codes.h"

layout(local_size_x = 256) in;
layout(constant_id = 0) const int OP = RW_SOFTMAX;
layout(constant_id = 1) const int DTA = DT_F32;
layout(constant_id = 2) const int DTO = DT_I32;   // sort: the index dtype
#ifdef SUBGROUP
layout(constant_id = SPEC_SUBGROUP) const int SG = 8;  // the pipeline's required subgroup size
#endif

#include "common.glsl"
#ifdef WIDE
#include "math64.glsl"
#define EXP_G exp_d
#define LOG_G log_d
#else
#define EXP_G exp
#define LOG_G log
#endif

layout(std430, set = 0, binding = 1) readonly buffer A { uint a_data[]; };
layout(std430, set = 0, binding = 2) readonly buffer B { uint b_data[]; };
layout(std430, set = 0, binding = 3) buffer X { uint x_data[]; };
layout(std430, set = 0, binding = 4) buffer O { uint o_data[]; };

DEFINE_LOAD(ld_a, a_data)
DEFINE_LOAD(ld_b, b_data)
DEFINE_LOAD(ld_o, o_data)
DEFINE_STORE(st_o, o_data)
DEFINE_STORE(st_x, x_data)

shared FT s_red[256];

FT max_nan(FT a, FT b) { return (isnan(a) || isnan(b)) ? FT(uintBitsToFloat(kNaN)) : max(a, b); }

#ifdef SUBGROUP
shared FT s_sg[256 / SG];
FT subgroup_max_nan(FT v) {
  return subgroupOr(isnan(v) ? 1u : 0u) != 0u ? FT(uintBitsToFloat(kNaN)) : subgroupMax(v);
}
// The workgroup's max (NaN propagates) or sum of v; every invocation gets it.
FT workgroup_reduce(FT v, bool is_max) {
  v = is_max ? subgroup_max_nan(v) : subgroupAdd(v);
  if (gl_SubgroupInvocationID == 0u) s_sg[gl_SubgroupID] = v;
  barrier();
  if (gl_SubgroupID == 0u) {
    FT a = is_max ? -FT(uintBitsToFloat(0x7F800000u)) : FT(0);
    for (uint k = gl_SubgroupInvocationID; k < gl_NumSubgroups; k += gl_SubgroupSize)
      a = is_max ? max_nan(a, s_sg[k]) : a + s_sg[k];
    a = is_max ? subgroup_max_nan(a) : subgroupAdd(a);
    if (gl_SubgroupInvocationID == 0u) s_sg[0] = a;
  }
  barrier();
  FT r = s_sg[0];
  barrier();  // s_sg is reused by the next reduction
  return r;
}
#endif
shared RAW s_key[RW_SORT_CAP];
shared uint s_idx[RW_SORT_CAP];

// Whether (va, ia) goes before (vb, ib). Padding (index ~0) goes after everything.
bool before(RAW va, uint ia, RAW vb, uint ib, bool desc) {
  if (ia == 0xFFFFFFFFu || ib == 0xFFFFFFFFu) return ib == 0xFFFFFFFFu && ia != 0xFFFFFFFFu;
  const int kind = dt_kind(DTA);
  bool lt, gt;
  if (kind == 0) {
    FT a = as_f(va, DTA), b = as_f(vb, DTA);
    bool na = isnan(a), nb = isnan(b);
    if (na || nb) {
      if (na && nb) return ia < ib;
      return desc ? na : nb;  // NaN is the largest value
    }
    lt = a < b; gt = a > b;
  } else if (kind == 1) {
    IT a = as_i(va, DTA), b = as_i(vb, DTA);
    lt = a < b; gt = a > b;
  } else {
    UT a = as_u(va, DTA), b = as_u(vb, DTA);
    lt = a < b; gt = a > b;
  }
  if (desc ? gt : lt) return true;
  if (desc ? lt : gt) return false;
  return ia < ib;
}

// Params: iteration space = the lines (dim of size 1); operand 0 = out, 1 = a,
// 2 = b (cross) or the index output (sort). Extra: line length, a / out / b (or
// index out) strides along the dim, flags (sort: bit 0 descending, bit 1 write
// values, bit 2 write indices; padded length).
// Global sort stages. Params: P_N = lines * np invocations, operand 1 = the input
// lines (INIT) with its shape in P_SHAPE; extra: n, input stride along the dim,
// out stride, index-out stride, flags, np, k, j.
void global_sort() {
  int g = global_linear_id(256u);
  if (g >= int(P[P_N])) return;
  int n = int(P[P_EXTRA]);
  int np = int(P[P_EXTRA + 5]);
  int line = g / np, i = g - line * np;
  int base = line * np;
  if (OP == RW_GSORT_INIT) {
    int ia = operand_index(1, line) + i * int(P[P_EXTRA + 1]);
    st_o(DTA, base + i, i < n ? ld_a(DTA, ia) : RAW(0));
    x_data[base + i] = i < n ? uint(i) : 0xFFFFFFFFu;
    return;
  }
  bool desc = (P[P_EXTRA + 4] & 1u) != 0u;
  if (OP == RW_GSORT_STEP) {
    int k = int(P[P_EXTRA + 6]), j = int(P[P_EXTRA + 7]);
    int l = i ^ j;
    if (l <= i) return;
    RAW vi = ld_o(DTA, base + i), vl = ld_o(DTA, base + l);
    uint ii = x_data[base + i], il = x_data[base + l];
    bool up = (i & k) == 0;
    if (up ? before(vl, il, vi, ii, desc) : before(vi, ii, vl, il, desc)) {
      st_o(DTA, base + i, vl); st_o(DTA, base + l, vi);
      x_data[base + i] = il; x_data[base + l] = ii;
    }
    return;
  }
  // OUT: a = sorted keys, b = their indices (scratch); o = values, x = indices.
  if (i >= n) return;
  uint flags = P[P_EXTRA + 4];
  int io = operand_index(0, line), ix = operand_index(2, line);
  if ((flags & 2u) != 0u) st_o(DTA, io + i * int(P[P_EXTRA + 2]), ld_a(DTA, base + i));
  if ((flags & 4u) != 0u) st_x(DTO, ix + i * int(P[P_EXTRA + 3]), RAW(b_data[base + i]) & mask_of(DTO));
}

void main() {
  if (OP == RW_GSORT_INIT || OP == RW_GSORT_STEP || OP == RW_GSORT_OUT) {
    global_sort();
    return;
  }
  if (OP == RW_CROSS) {
    int l = global_linear_id(256u);
    if (l >= int(P[P_N])) return;
    int sa = int(P[P_EXTRA + 1]), so = int(P[P_EXTRA + 2]), sb = int(P[P_EXTRA + 3]);
    int ia = operand_index(1, l), ib = operand_index(2, l), io = operand_index(0, l);
    FT a0 = as_f(ld_a(DTA, ia), DTA), a1 = as_f(ld_a(DTA, ia + sa), DTA), a2 = as_f(ld_a(DTA, ia + 2 * sa), DTA);
    FT b0 = as_f(ld_b(DTA, ib), DTA), b1 = as_f(ld_b(DTA, ib + sb), DTA), b2 = as_f(ld_b(DTA, ib + 2 * sb), DTA);
    st_o(DTA, io, from_f(a1 * b2 - a2 * b1, DTA));
    st_o(DTA, io + so, from_f(a2 * b0 - a0 * b2, DTA));
    st_o(DTA, io + 2 * so, from_f(a0 * b1 - a1 * b0, DTA));
    return;
  }
  int line = int(gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x);
  if (line >= int(P[P_N])) return;
  uint t = gl_LocalInvocationID.x;
  int n = int(P[P_EXTRA]);
  int sa = int(P[P_EXTRA + 1]), so = int(P[P_EXTRA + 2]), sx = int(P[P_EXTRA + 3]);
  int ia = operand_index(1, line), io = operand_index(0, line);
  if (OP == RW_SORT) {
    uint flags = P[P_EXTRA + 4];
    bool desc = (flags & 1u) != 0u;
    int np = int(P[P_EXTRA + 5]);   // power of two >= n, <= RW_SORT_CAP
    int ix = operand_index(2, line);
    for (int j = int(t); j < np; j += 256) {
      s_key[j] = j < n ? ld_a(DTA, ia + j * sa) : RAW(0);
      s_idx[j] = j < n ? uint(j) : 0xFFFFFFFFu;
    }
    barrier();
    for (int k = 2; k <= np; k <<= 1) {
      for (int j = k >> 1; j > 0; j >>= 1) {
        for (int i = int(t); i < np; i += 256) {
          int l = i ^ j;
          if (l > i) {
            RAW vi = s_key[i], vl = s_key[l];
            uint ii = s_idx[i], il = s_idx[l];
            bool up = (i & k) == 0;
            bool swap_ = up ? before(vl, il, vi, ii, desc) : before(vi, ii, vl, il, desc);
            if (swap_) { s_key[i] = vl; s_key[l] = vi; s_idx[i] = il; s_idx[l] = ii; }
          }
        }
        barrier();
      }
    }
    for (int j = int(t); j < n; j += 256) {
      if ((flags & 2u) != 0u) st_o(DTA, io + j * so, s_key[j]);
      if ((flags & 4u) != 0u) st_x(DTO, ix + j * sx, RAW(s_idx[j]) & mask_of(DTO));
    }
    return;
  }
  // softmax / log_softmax / softmin (the values negated as they are read)
  const FT sgn = OP == RW_SOFTMIN ? FT(-1) : FT(1);
  FT m = FT(0);
  bool have = false, nan_seen = false;
  for (int j = int(t); j < n; j += 256) {
    FT v = sgn * as_f(ld_a(DTA, ia + j * sa), DTA);
    if (isnan(v)) nan_seen = true;
    else if (!have || v > m) { m = v; have = true; }
  }
  // Lanes without elements contribute -inf; a NaN anywhere makes the row NaN.
  FT neg_inf = -FT(uintBitsToFloat(0x7F800000u));
  m = nan_seen ? FT(uintBitsToFloat(kNaN)) : (have ? m : neg_inf);
#ifdef SUBGROUP
  m = workgroup_reduce(m, true);
#else
  s_red[t] = m;
  barrier();
  for (uint s = 128u; s > 0u; s >>= 1) {
    if (t < s) s_red[t] = max_nan(s_red[t], s_red[t + s]);
    barrier();
  }
  m = s_red[0];
  barrier();
#endif
  FT sum = FT(0);
  for (int j = int(t); j < n; j += 256) sum += EXP_G(sgn * as_f(ld_a(DTA, ia + j * sa), DTA) - m);
#ifdef SUBGROUP
  sum = workgroup_reduce(sum, false);
#else
  s_red[t] = sum;
  barrier();
  for (uint s = 128u; s > 0u; s >>= 1) {
    if (t < s) s_red[t] += s_red[t + s];
    barrier();
  }
  sum = s_red[0];
#endif
  FT lse = LOG_G(sum);
  for (int j = int(t); j < n; j += 256) {
    FT x = sgn * as_f(ld_a(DTA, ia + j * sa), DTA) - m;
    FT r = OP == RW_LOG_SOFTMAX ? x - lse : EXP_G(x) / sum;
    st_o(DTA, io + j * so, from_f(r, DTA));
  }
}
