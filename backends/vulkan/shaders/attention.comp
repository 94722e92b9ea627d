// The attention family: softmax(q k^T * scale [softcap] [mask] [causal] + bias) v, fused
// and tiled with an online softmax (running max and sum per query row), so the
// [Lq, Lk] score matrix never exists. One workgroup per (b*h, block of 16 queries,
// slice of at most 128 value columns): per tile of 16 keys it forms the 16 x 16 scores
// (D in steps of 64 through shared memory), transforms them as the CPU does (scale,
// softcap before masking, mask and causal to -inf, then bias), rescales the running
// output and adds P * V. A row with every key masked gives 0, not NaN.
// Binding 1: q then k, contiguous, in the compute float (f32; f64 in WIDE); binding 2: v
// (strided, dtype DTA); binding 3: the mask (DTM) or the additive bias (DTA; the host
// folds a mask into it when both are given), strided with broadcast dims at stride 0;
// binding 4: the contiguous output [B, H, Lq, Dv] in DTA.
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#include "vk_codes.h"

#define BQ 16
#define BKEY 16
#define BD 64     // q and k columns staged per step (D past it takes several)
#ifdef WIDE
#define DVS 64    // value columns per workgroup (DVS / 16 per invocation)
#else
#define DVS 128
#endif
layout(local_size_x = 256) in;
layout(constant_id = 0) const int DTA = DT_F32;
layout(constant_id = 1) const int DTM = DT_BOOL;

#include "common.glsl"
#ifdef WIDE
#include "math64.glsl"
#define EXP_G exp_d
FT tanh_g(FT x) { FT e = expm1_d(-2.0LF * abs(x)); FT t = -e / (2.0LF + e); return x < 0.0LF ? -t : t; }
#else
#define EXP_G exp
// Drivers' tanh can lose most digits near 0 (the elementwise family's tanh_f does the same).
FT tanh_g(FT x) {
  FT z = abs(x);
  if (z < 0.25) {
    FT x2 = x * x;
    return x * (1.0 + x2 * (-1.0 / 3.0 + x2 * (2.0 / 15.0 + x2 * (-17.0 / 315.0))));
  }
  FT e = exp(-2.0 * z);
  FT t = (1.0 - e) / (1.0 + e);
  return x < 0.0 ? -t : t;
}
#endif

layout(std430, set = 0, binding = 1) readonly buffer QK { uint qk_data[]; };
layout(std430, set = 0, binding = 2) readonly buffer V { uint v_data[]; };
layout(std430, set = 0, binding = 3) readonly buffer MB { uint mb_data[]; };
layout(std430, set = 0, binding = 4) buffer O { uint o_data[]; };

DEFINE_LOAD(ld_qk, qk_data)
DEFINE_LOAD(ld_v, v_data)
DEFINE_LOAD(ld_mb, mb_data)
DEFINE_STORE(st_o, o_data)

// Parameter words (the host's attention_params).
#define A_B 0
#define A_H 1
#define A_LQ 2
#define A_LK 3
#define A_D 4
#define A_DV 5
#define A_FLAGS 6    // 1 mask, 2 bias, 4 causal, 8 softcap
#define A_ZBASE 7
#define A_SCALE 8    // 2 words: a compute float (f32 bits, or f64)
#define A_CAP 10     // 2 words
#define A_V 12       // offset, strides b, h, row, col
#define A_MB 17      // offset, strides b, h, row, col

shared FT sq[BQ][BD + 1];
shared FT sk[BKEY][BD + 1];
shared FT ss[BQ][BKEY + 1];
shared FT sv[BKEY][DVS];
shared FT salpha[BQ];
shared FT sl[BQ];

int q(int i) { return int(P[i]); }
FT ct_param(int w) { return as_f(scalar_param(w), CT_F); }

void main() {
  const int H = q(A_H), Lq = q(A_LQ), Lk = q(A_LK), D = q(A_D), Dv = q(A_DV), flags = q(A_FLAGS);
  const bool has_mask = (flags & 1) != 0, has_bias = (flags & 2) != 0, causal = (flags & 4) != 0;
  const bool softcap = (flags & 8) != 0;
  const FT scale = ct_param(A_SCALE), cap = ct_param(A_CAP);
  const FT ninf = FT(-uintBitsToFloat(0x7F800000u));
  const int z = int(gl_WorkGroupID.z) + q(A_ZBASE);
  const int b = z / H, h = z - b * H;
  const int i0 = int(gl_WorkGroupID.x) * BQ, dv0 = int(gl_WorkGroupID.y) * DVS;
  const int tid = int(gl_LocalInvocationID.x), r = tid >> 4, c = tid & 15;
  const int i = i0 + r;
  const int shift = Lk - Lq;  // causal: key j visible when j <= i + shift
  const int q_base = z * Lq * D, k_base = q(A_B) * H * Lq * D + z * Lk * D;
  const int v_base = q(A_V) + b * q(A_V + 1) + h * q(A_V + 2);
  const int mb_base = q(A_MB) + b * q(A_MB + 1) + h * q(A_MB + 2);
  const int last_i = min(i0 + BQ, Lq) - 1;

  FT acc[DVS / 16];
  [[unroll]] for (int j = 0; j < DVS / 16; ++j) acc[j] = FT(0);
  FT m_run = ninf, l_run = FT(0);  // row tid's, kept by invocations tid < BQ

  for (int j0 = 0; j0 < Lk; j0 += BKEY) {
    if (causal && j0 > last_i + shift) break;  // uniform: no row of this block sees these keys
    // Scores: s[r][c] = q[i0 + r] . k[j0 + c].
    // The q block stays in shared memory from the first tile on when D fits one step.
    FT s = FT(0);
    for (int d0 = 0; d0 < D; d0 += BD) {
      [[unroll]] for (int l = 0; l < (BQ * BD) / 256; ++l) {
        const int e = tid + 256 * l, rr = e / BD, d = d0 + (e - rr * BD);
        if (D > BD || j0 == 0)
          sq[rr][d - d0] = (i0 + rr < Lq && d < D) ? as_f(ld_qk(CT_F, q_base + (i0 + rr) * D + d), CT_F) : FT(0);
        sk[rr][d - d0] = (j0 + rr < Lk && d < D) ? as_f(ld_qk(CT_F, k_base + (j0 + rr) * D + d), CT_F) : FT(0);
      }
      barrier();
      [[unroll]] for (int dd = 0; dd < BD; ++dd) s += sq[r][dd] * sk[c][dd];
      if (D > BD) barrier();  // the next step overwrites sq and sk (else the tile's last barrier covers it)
    }
    const int j = j0 + c;
    FT x = ninf;
    if (j < Lk) {
      x = s * scale;
      if (softcap) x = cap * tanh_g(x / cap);
      if (i < Lq) {
        const int e = mb_base + i * q(A_MB + 3) + j * q(A_MB + 4);
        if (has_mask && (ld_mb(DTM, e) & mask_of(DTM)) != RAW(0)) x = ninf;
        if (causal && j > i + shift) x = ninf;
        if (has_bias) x += as_f(ld_mb(DTA, e), DTA);
      }
    }
    ss[r][c] = x;
    // The value tile: 16 keys x 128 columns.
    [[unroll]] for (int l = 0; l < (BKEY * DVS) / 256; ++l) {
      const int e = tid + 256 * l, kr = e / DVS, col = e - kr * DVS;
      const int jj = j0 + kr, dvc = dv0 + col;
      sv[kr][col] = (jj < Lk && dvc < Dv) ? as_f(ld_v(DTA, v_base + jj * q(A_V + 3) + dvc * q(A_V + 4)), DTA) : FT(0);
    }
    barrier();
    if (tid < BQ) {
      FT mx = ninf;
      [[unroll]] for (int k = 0; k < BKEY; ++k) mx = max(mx, ss[tid][k]);
      const FT mnew = max(m_run, mx);
      FT alpha = FT(1);
      if (mnew == ninf) {  // everything so far masked: contributes nothing
        [[unroll]] for (int k = 0; k < BKEY; ++k) ss[tid][k] = FT(0);
      } else {
        alpha = m_run == ninf ? FT(0) : EXP_G(m_run - mnew);
        FT sum = FT(0);
        [[unroll]] for (int k = 0; k < BKEY; ++k) {
          const FT sx = ss[tid][k];
          const FT p = sx == ninf ? FT(0) : EXP_G(sx - mnew);
          ss[tid][k] = p;
          sum += p;
        }
        l_run = l_run * alpha + sum;
        m_run = mnew;
      }
      salpha[tid] = alpha;
    }
    barrier();
    const FT al = salpha[r];
    [[unroll]] for (int jv = 0; jv < DVS / 16; ++jv) {
      FT a = acc[jv] * al;
      [[unroll]] for (int k = 0; k < BKEY; ++k) a += ss[r][k] * sv[k][c + 16 * jv];
      acc[jv] = a;
    }
    barrier();
  }
  if (tid < BQ) sl[tid] = l_run;
  barrier();
  if (i >= Lq) return;
  const FT l = sl[r];
  const FT inv = l > FT(0) ? FT(1) / l : FT(0);
  const int o_base = (z * Lq + i) * Dv;
  [[unroll]] for (int jv = 0; jv < DVS / 16; ++jv) {
    const int dvc = dv0 + c + 16 * jv;
    if (dvc < Dv) st_o(DTA, o_base + dvc, from_f(acc[jv] * inv, DTA));
  }
}
