// The matmul family: C[b] = A[b] x B[b] in register-tiled 64x64 blocks; operands are
// strided (a transposed operand is read in place) and batch dims broadcast by
// stride 0. Floats accumulate in f32 (f16/bf16 converted on load; f64 in the WIDE
// variant); ints wrap.
#version 450
#extension GL_GOOGLE_include_directive : require
#include "vk_codes.h"

// Register tiling: a 16x16 workgroup computes a 64x64 block of C, each invocation
// a 4x4 sub-block (rows ty + 16i, cols tx + 16j, so shared reads do not conflict),
// stepping through K in slices of 16 staged in shared memory.
#define BM 64
#define BN 64
#define BK 16
layout(local_size_x = 16, local_size_y = 16) in;
layout(constant_id = 0) const int DTA = DT_F32;

#include "common.glsl"

layout(std430, set = 0, binding = 1) readonly buffer A { uint a_data[]; };
layout(std430, set = 0, binding = 2) readonly buffer B { uint b_data[]; };
layout(std430, set = 0, binding = 4) buffer O { uint o_data[]; };

DEFINE_LOAD(ld_a, a_data)
DEFINE_LOAD(ld_b, b_data)
DEFINE_STORE(st_o, o_data)

// Tiles hold the compute encoding: f32/f64 raw for floats, sign-extended UT for ints.
shared RAW sa[BK][BM];
shared RAW sb[BK][BN];

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
  int tid = ty * 16 + tx;
  int row0 = int(gl_WorkGroupID.y) * BM;
  int col0 = int(gl_WorkGroupID.x) * BN;
  const bool is_f = dt_kind(DTA) == 0;
  FT accf[4][4];
  UT acci[4][4];
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) { accf[i][j] = FT(0); acci[i][j] = UT(0); }
  for (int k0 = 0; k0 < K; k0 += BK) {
    for (int l = 0; l < 4; ++l) {
      int e = tid + l * 256;
      int m = e >> 4, k = e & 15;          // A: 64 rows x 16, consecutive k per row
      int gr = row0 + m, gk = k0 + k;
      sa[k][m] = (gr < M && gk < K) ? to_compute(ld_a(DTA, a0 + gr * ars + gk * acs)) : RAW(0);
      int kb = e >> 6, n = e & 63;         // B: 16 rows x 64, consecutive n per row
      int gkb = k0 + kb, gc = col0 + n;
      sb[kb][n] = (gkb < K && gc < N) ? to_compute(ld_b(DTA, b0 + gkb * brs + gc * bcs)) : RAW(0);
    }
    barrier();
    for (int k = 0; k < BK; ++k) {
      if (is_f) {
        FT av[4], bv[4];
        for (int i = 0; i < 4; ++i) { av[i] = as_f(sa[k][ty + 16 * i], CT_F); bv[i] = as_f(sb[k][tx + 16 * i], CT_F); }
        for (int i = 0; i < 4; ++i)
          for (int j = 0; j < 4; ++j) accf[i][j] += av[i] * bv[j];
      } else {
        UT av[4], bv[4];
        for (int i = 0; i < 4; ++i) { av[i] = UT(sa[k][ty + 16 * i]); bv[i] = UT(sb[k][tx + 16 * i]); }
        for (int i = 0; i < 4; ++i)
          for (int j = 0; j < 4; ++j) acci[i][j] += av[i] * bv[j];
      }
    }
    barrier();
  }
  for (int i = 0; i < 4; ++i) {
    int row = row0 + ty + 16 * i;
    if (row >= M) continue;
    for (int j = 0; j < 4; ++j) {
      int col = col0 + tx + 16 * j;
      if (col >= N) continue;
      RAW r = is_f ? from_f(accf[i][j], DTA) : (RAW(acci[i][j]) & mask_of(DTA));
      st_o(DTA, o0 + row * ors + col, r);
    }
  }
}
