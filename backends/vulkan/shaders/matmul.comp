// The matmul family: C[b] = A[b] x B[b] with 16x16 shared-memory tiles; operands are
// strided (a transposed operand is read in place) and batch dims broadcast by
// stride 0. Floats accumulate in f32; ints wrap.
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

shared uint sa[TILE][TILE + 1];
shared uint sb[TILE][TILE + 1];

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
  float accf = 0.0;
  uint acci = 0u;
  for (int k0 = 0; k0 < K; k0 += TILE) {
    int ka = k0 + tx, kb = k0 + ty;
    sa[ty][tx] = (row < M && ka < K) ? a_data[a0 + row * ars + ka * acs] : 0u;
    sb[ty][tx] = (kb < K && col < N) ? b_data[b0 + kb * brs + col * bcs] : 0u;
    barrier();
    for (int k = 0; k < TILE; ++k) {
      if (is_f) accf += uintBitsToFloat(sa[ty][k]) * uintBitsToFloat(sb[k][tx]);
      else acci += sa[ty][k] * sb[k][tx];
    }
    barrier();
  }
  if (row < M && col < N) o_data[o0 + row * ors + col] = is_f ? floatBitsToUint(accf) : acci;
}
