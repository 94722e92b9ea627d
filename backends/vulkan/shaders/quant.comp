// The quant family (issue 32): a quantized tensor is i8 codes (one per element, packed four
// to a word in the buffer) and f32 scales (one per block, row-major over the block grid,
// already rounded to the scheme's scale dtype); see dispatch/quant.hpp. Four modes (spec
// constant 0, vk_codes.h's QT_*), narrow only (f32 compute; the host side converts f64):
//   QT_DEQUANTIZE: out = f32(code) * scale, written as DTX (f32, f16, bf16).
//   QT_QUANTIZE:   code = clamp(round_half_away(x * inv), lo, hi), x read as DTX; inv is the
//                  host's 1.0f / scale per block (a shader division need not be correctly
//                  rounded, a product is: the codes then equal the CPU's bit for bit).
//   QT_MATMUL:     out [.., M, N] = x [.., M, K] times the weight [K, N] dequantized tile by
//                  tile into shared memory (never a float weight buffer), f32 accumulation.
//   QT_GEMV:       the same for small M: one row and 64 columns per workgroup, K split four ways.
// `precise` keeps each product rounded on its own (no fused multiply-add), as the CPU's.
#version 450
#extension GL_GOOGLE_include_directive : require
#include "vk_codes.h"

layout(local_size_x = 256) in;
layout(constant_id = 0) const int MODE = QT_DEQUANTIZE;
layout(constant_id = 1) const int DTX = DT_F32;

#include "common.glsl"

layout(std430, set = 0, binding = 1) readonly buffer A { uint a_data[]; };
layout(std430, set = 0, binding = 2) readonly buffer B { uint b_data[]; };
layout(std430, set = 0, binding = 3) readonly buffer C { uint c_data[]; };
layout(std430, set = 0, binding = 4) buffer O { uint o_data[]; };

DEFINE_LOAD(ld_a, a_data)
DEFINE_LOAD(ld_b, b_data)
DEFINE_STORE(st_o, o_data)

int code_at(int i) { return bitfieldExtract(int(b_data[i >> 2]), (i & 3) * 8, 8); }     // codes in B (matmul)
int code_in_a(int i) { return bitfieldExtract(int(a_data[i >> 2]), (i & 3) * 8, 8); }   // codes in A (dequantize)

// ---- element modes: operand 1 = the source (codes or x: offset, strides), operand 2 = the
// scale offset and the block grid's strides (0 per tensor), operand 3 = the block extents.
void element_at(int i, out int src, out int blk, out int last) {
  int rank = int(P[P_RANK]);
  src = int(P[P_OPND + 9]);
  blk = int(P[P_OPND + 18]);
  last = i;
  int rem = i;
  for (int d = rank - 1; d >= 0; --d) {
    int c = rem;  // the outermost coordinate is what is left (i is below the element count)
    if (d > 0) {
      int n = int(P[P_SHAPE + d]);
      c = rem % n;
      rem /= n;
    }
    if (d == rank - 1) last = c;
    src += c * int(P[P_OPND + 10 + d]);
    int g = int(P[P_OPND + 19 + d]);
    if (g != 0) {
      int e = int(P[P_OPND + 28 + d]);
      blk += (e == 1 ? c : c / e) * g;
    }
  }
}

int quantize_one(float x, float inv, float lo, float hi) {
  precise float v = x * inv;
  float t = trunc(v);
  float sgn = v > 0.0 ? 1.0 : (v < 0.0 ? -1.0 : v);  // sign(v): 0 keeps its sign, NaN stays NaN
  precise float d = v - t;
  float step_ = sgn * (abs(d) >= 0.5 ? 1.0 : 0.0);
  precise float r = t + step_;
  if (r < lo) r = lo;
  if (r > hi) r = hi;
  return isnan(r) ? 0 : int(r);
}

// The next element after (src, blk, last) along the last axis: a step, not a decomposition,
// while the line goes on.
void element_next(int i, inout int src, inout int blk, inout int last) {
  int rank = int(P[P_RANK]);
  if (rank == 0) return;
  int d = rank - 1;
  if (last + 1 >= int(P[P_SHAPE + d])) {
    element_at(i, src, blk, last);
    return;
  }
  ++last;
  src += int(P[P_OPND + 10 + d]);
  int g = int(P[P_OPND + 19 + d]);
  if (g != 0) {
    int e = int(P[P_OPND + 28 + d]);
    if (e == 1 || last % e == 0) blk += g;
  }
}

// Four consecutive elements per invocation: one whole word of codes (no atomics), or four
// outputs of the float dtype.
void element_mode() {
  int n = int(P[P_N]);
  int w = int(gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 256u);
  int e0 = w * 4;
  if (e0 >= n) return;
  int cnt = min(4, n - e0);
  if (MODE == QT_QUANTIZE) {
    float lo = float(int(P[P_EXTRA])), hi = float(int(P[P_EXTRA + 1]));
    uint word = 0u;
    int src, blk, last;
    element_at(e0, src, blk, last);
    for (int j = 0; j < 4; ++j) {  // a constant bound: unrolled, v[j] in registers
      if (j >= cnt) break;
      if (j > 0) element_next(e0 + j, src, blk, last);
      float x = float(as_f(ld_a(DTX, src), DTX));
      float inv = uintBitsToFloat(b_data[blk]);
      word |= (uint(quantize_one(x, inv, lo, hi)) & 0xFFu) << uint(8 * j);
    }
    o_data[w] = word;
    return;
  }
  float v[4];
  int src, blk, last;
  element_at(e0, src, blk, last);
  for (int j = 0; j < 4; ++j) {
    if (j >= cnt) break;
    if (j > 0) element_next(e0 + j, src, blk, last);
    precise float p = float(code_in_a(src)) * uintBitsToFloat(b_data[blk]);
    v[j] = p;
  }
  if (DTX == DT_F32) {
    for (int j = 0; j < 4; ++j)
      if (j < cnt) o_data[e0 + j] = floatBitsToUint(v[j]);
  } else if (cnt == 4) {  // two whole words of 16-bit elements
    o_data[e0 >> 1] = uint(from_f(v[0], DTX)) | (uint(from_f(v[1], DTX)) << 16);
    o_data[(e0 >> 1) + 1] = uint(from_f(v[2], DTX)) | (uint(from_f(v[3], DTX)) << 16);
  } else {
    for (int j = 0; j < cnt; ++j) st_o(DTX, e0 + j, from_f(v[j], DTX));
  }
}

// ---- product modes. Params: P_N batches, P_RANK/P_SHAPE the batch shape, operand 0/1 =
// out/x batch strides (x's offset in operand 1). Extra: M, N, K, x row/col stride, codes
// offset, block rows bk and cols bn, grid columns gN, scale offset, batch base.
// The weight element (k, n) dequantized: f32(code) * scale[(k / bk) * gN + n / bn] (then
// rounded to x's dtype, as the default's dequantize to x's dtype is).
float weight_at(int k, int n, int c0, int bk, int bn, int gN, int s0) {
  int blk = s0 + (k / bk) * gN + (bn == 1 ? n : n / bn);
  precise float w = float(code_at(c0 + k * int(P[P_EXTRA + 1]) + n)) * uintBitsToFloat(c_data[blk]);
  if (DTX != DT_F32) w = float(as_f(from_f(w, DTX), DTX));
  return w;
}

#define BM 64
#define BN 64
#define BK 16
shared float sa[BK][BM];
shared float sb[BK][BN];
shared float red[256];

void matmul_mode() {
  int M = int(P[P_EXTRA]), N = int(P[P_EXTRA + 1]), K = int(P[P_EXTRA + 2]);
  int ars = int(P[P_EXTRA + 3]), acs = int(P[P_EXTRA + 4]);
  int c0 = int(P[P_EXTRA + 5]), bk = int(P[P_EXTRA + 6]), bn = int(P[P_EXTRA + 7]), gN = int(P[P_EXTRA + 8]);
  int s0 = int(P[P_EXTRA + 9]);
  int batch = int(gl_WorkGroupID.z) + int(P[P_EXTRA + 10]);
  int a0 = operand_index(1, batch), o0 = operand_index(0, batch);
  int tid = int(gl_LocalInvocationID.x);
  int tx = tid & 15, ty = tid >> 4;
  int row0 = int(gl_WorkGroupID.y) * BM;
  int col0 = int(gl_WorkGroupID.x) * BN;
  float acc[4][4];
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) acc[i][j] = 0.0;
  for (int k0 = 0; k0 < K; k0 += BK) {
    for (int l = 0; l < 4; ++l) {
      int e = tid + l * 256;
      int m = e >> 4, k = e & 15;  // x: 64 rows x 16
      int gr = row0 + m, gk = k0 + k;
      sa[k][m] = (gr < M && gk < K) ? float(as_f(ld_a(DTX, a0 + gr * ars + gk * acs), DTX)) : 0.0;
      int kb = e >> 6, n = e & 63;  // weight: 16 rows x 64, dequantized here
      int gkb = k0 + kb, gc = col0 + n;
      sb[kb][n] = (gkb < K && gc < N) ? weight_at(gkb, gc, c0, bk, bn, gN, s0) : 0.0;
    }
    barrier();
    for (int k = 0; k < BK; ++k) {
      float av[4], bv[4];
      for (int i = 0; i < 4; ++i) { av[i] = sa[k][ty + 16 * i]; bv[i] = sb[k][tx + 16 * i]; }
      for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j) acc[i][j] += av[i] * bv[j];
    }
    barrier();
  }
  for (int i = 0; i < 4; ++i) {
    int row = row0 + ty + 16 * i;
    if (row >= M) continue;
    for (int j = 0; j < 4; ++j) {
      int col = col0 + tx + 16 * j;
      if (col >= N) continue;
      st_o(DTX, o0 + row * N + col, from_f(acc[i][j], DTX));
    }
  }
}

// 64 columns x 4 slices of K per workgroup; the scale is looked up again only where k
// crosses a block boundary.
void gemv_mode() {
  int N = int(P[P_EXTRA + 1]), K = int(P[P_EXTRA + 2]);
  int ars = int(P[P_EXTRA + 3]), acs = int(P[P_EXTRA + 4]);
  int c0 = int(P[P_EXTRA + 5]), bk = int(P[P_EXTRA + 6]), bn = int(P[P_EXTRA + 7]), gN = int(P[P_EXTRA + 8]);
  int s0 = int(P[P_EXTRA + 9]);
  int batch = int(gl_WorkGroupID.z) + int(P[P_EXTRA + 10]);
  int row = int(gl_WorkGroupID.y);
  int a0 = operand_index(1, batch) + row * ars, o0 = operand_index(0, batch) + row * N;
  int tid = int(gl_LocalInvocationID.x);
  int col = int(gl_WorkGroupID.x) * 64 + (tid & 63), slice = tid >> 6;
  float acc = 0.0;
  if (col < N) {
    int cidx = c0 + slice * N + col;
    int sc = bn == 1 ? col : col / bn;
    int knext = -1;
    float s = 0.0;
    for (int k = slice; k < K; k += 4) {
      if (k >= knext) {
        int b = k / bk;
        s = uintBitsToFloat(c_data[s0 + b * gN + sc]);
        knext = (b + 1) * bk;
      }
      precise float w = float(code_at(cidx)) * s;
      if (DTX != DT_F32) w = float(as_f(from_f(w, DTX), DTX));
      acc += float(as_f(ld_a(DTX, a0 + k * acs), DTX)) * w;
      cidx += 4 * N;
    }
  }
  red[tid] = acc;
  barrier();
  if (slice == 0 && col < N) {
    float r = (red[tid] + red[tid + 64]) + (red[tid + 128] + red[tid + 192]);
    st_o(DTX, o0 + col, from_f(r, DTX));
  }
}

void main() {
  if (MODE == QT_MATMUL) matmul_mode();
  else if (MODE == QT_GEMV) gemv_mode();
  else element_mode();
}
