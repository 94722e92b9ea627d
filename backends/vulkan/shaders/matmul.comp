// The matmul family: C[b] = A[b] x B[b] with 16x16 shared-memory tiles; operands are
// strided (a transposed operand is read in place) and batch dims broadcast by
// stride 0. Floats accumulate in f32 (f16/bf16 converted on load; f64 in the WIDE
// variant); ints wrap.
#version 450
#extension GL_GOOGLE_include_directive : require
#include "vk_codes.h"

#define TILE 16
layout(local_size_x = TILE, local_size_y = TILE) in;
layout(constant_id = 0) const int DTA = DT_F32;

#include "common.glsl"

layout(std430, set = 0, binding = 1) readonly buffer A { uint a_data[]; };
layout(std430, set = 0, binding = 2) readonly buffer B { uint b_data[]; };
layout(std430, set = 0, binding = 4) buffer O { uint o_data[]; };

DEFINE_LOAD(ld_a, a_data)
DEFINE_LOAD(ld_b, b_data)
DEFINE_STORE(st_o, o_data)

// Tiles hold the compute encoding: f32/f64 raw for floats, sign-extended UT for ints.
shared RAW sa[TILE][TILE + 1];
shared RAW sb[TILE][TILE + 1];

RAW to_compute(RAW v) {
  const int kind = dt_kind(DTA);
  if (kind == 0) return from_f(as_f(v, DTA), CT_F);
  return RAW(kind == 1 ? UT(as_i(v, DTA)) : as_u(v, DTA));
}

// Params: P_N = batch count in this dispatch, P_RANK/P_SHAPE = batch shape (the
// output's leading dims), operands 0/1/2 = out/a/b batch strides and offsets.
// Extra: M, N, K, a row/col stride, b row/col stride, out row stride, batch base.
void main() {
  int M = int(P[P_EXTRA]), N = int(P[P_EXTRA + 1]), K = int(P[P_EXTRA + 2]);
  int ars = int(P[P_EXTRA + 3]), acs = int(P[P_EXTRA + 4]);
  int brs = int(P[P_EXTRA + 5]), bcs = int(P[P_EXTRA + 6]);
  int ors = int(P[P_EXTRA + 7]);
  int batch = int(gl_WorkGroupID.z) + int(P[P_EXTRA + 8]);
  int a0 = operand_index(1, batch), b0 = operand_index(2, batch), o0 = operand_index(0, batch);
  int tx = int(gl_LocalInvocationID.x), ty = int(gl_LocalInvocationID.y);
  int row = int(gl_WorkGroupID.y) * TILE + ty;
  int col = int(gl_WorkGroupID.x) * TILE + tx;
  const bool is_f = dt_kind(DTA) == 0;
  FT accf = FT(0);
  UT acci = UT(0);
  for (int k0 = 0; k0 < K; k0 += TILE) {
    int ka = k0 + tx, kb = k0 + ty;
    sa[ty][tx] = (row < M && ka < K) ? to_compute(ld_a(DTA, a0 + row * ars + ka * acs)) : RAW(0);
    sb[ty][tx] = (kb < K && col < N) ? to_compute(ld_b(DTA, b0 + kb * brs + col * bcs)) : RAW(0);
    barrier();
    for (int k = 0; k < TILE; ++k) {
      if (is_f) accf += as_f(sa[ty][k], CT_F) * as_f(sb[k][tx], CT_F);
      else acci += UT(sa[ty][k]) * UT(sb[k][tx]);
    }
    barrier();
  }
  if (row < M && col < N) {
    RAW r = is_f ? from_f(accf, DTA) : (RAW(acci) & mask_of(DTA));
    st_o(DTA, o0 + row * ors + col, r);
  }
}
