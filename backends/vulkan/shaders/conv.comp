// The conv family: convolution as an implicit GEMM (no im2col buffer), 1-d to 3-d
// (always three spatial dims, leading ones of size 1), on contiguous operands.
// One forward geometry g (x [N, Ci, *in] * w [Co, Ci/G, *ker] -> y [N, Co, *out])
// serves every entry through three GEMM modes, per problem z in gl_WorkGroupID.z:
//  CV_FWD   (z = n*G + grp): y[o, p]  = sum_{ci,t} w[o, ci, t] * x[ci, p*s - pad + t*d]
//           M = Co/G, Ncol = prod(out), K = Ci/G * prod(ker)
//  CV_BWD_X (z = n*G + grp): dx[c, i] = sum_{o,t} w[o, c, t] * dy[o, (i + pad - t*d) / s]
//           (the tap counts when the division is exact and in range): the input gradient
//           and the transposed conv, gathered, so no atomics. M = Ci/G, Ncol = prod(in),
//           K = Co/G * prod(ker)
//  CV_BWD_W (z = split*G + grp): dw[o, (ci,t)] = sum_{n,p} dy[n, o, p] * x[n, ci, p*s - pad + t*d]
//           M = Co/G, Ncol = Ci/G * prod(ker), K = N * prod(out); each split sums its own
//           Q_KSPLIT terms into its own partial (output offset split * Q_OSTRIDE), then
//  CV_SUM:  out[e] = sum over the splits of partial[s][e], in split order (plus the previous
//           pass's out), so the weight gradient keeps a fixed summation order.
// For CV_FWD and CV_BWD_X the host cuts K into chunks of at most a few thousand (lavapipe's
// loop limit), each a dispatch that adds to what the previous one left in the output (fixed
// order, so the result is deterministic); the bias joins in the first chunk.
//  CV_BIAS: db[c] = sum over n and space of dy[n, c, :], one workgroup per channel,
//           a fixed tree per workgroup; the host chunks the n * space range the same way.
// Floats accumulate in f32 (f16/bf16 converted on load; f64 in the WIDE variant).
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#include "vk_codes.h"

#define CV_FWD 0
#define CV_BWD_X 1
#define CV_BWD_W 2
#define CV_BIAS 3
#define CV_SUM 4

#define BN 64
#define BK 16
layout(local_size_x = 256) in;
layout(constant_id = 0) const int MODE = CV_FWD;
layout(constant_id = 1) const int DTA = DT_F32;   // a, b and bias
layout(constant_id = 2) const int DTO = DT_F32;   // the output (DTA, or f32 for chunked halves)
// Tile rows per invocation: a workgroup computes (16 TMR) x 64 outputs, so a GEMM with
// few rows (channels per group) does not pay for 64.
layout(constant_id = 3) const int TMR = 4;
#define BM (16 * TMR)

#include "common.glsl"

layout(std430, set = 0, binding = 1) readonly buffer A { uint a_data[]; };
layout(std430, set = 0, binding = 2) readonly buffer B { uint b_data[]; };
layout(std430, set = 0, binding = 3) readonly buffer C { uint c_data[]; };
layout(std430, set = 0, binding = 4) buffer O { uint o_data[]; };

DEFINE_LOAD(ld_a, a_data)
DEFINE_LOAD(ld_b, b_data)
DEFINE_LOAD(ld_c, c_data)
DEFINE_LOAD(ld_o, o_data)
DEFINE_STORE(st_o, o_data)

// Parameter words (own layout, the host's conv_params):
#define Q_N 0        // batch
#define Q_CI 1
#define Q_CO 2
#define Q_G 3
#define Q_IN 4       // 3 words
#define Q_KER 7      // 3 words
#define Q_OUT 10     // 3 words
#define Q_STRIDE 13  // 3 words
#define Q_PAD 16     // 3 words
#define Q_DIL 19     // 3 words
#define Q_K0 22      // this chunk's reduction range [K0, K1)
#define Q_K1 23
#define Q_ACC 24     // 1: add to the output's current value
#define Q_BIAS 25    // 1: add bias (binding 3)
#define Q_ZBASE 26   // first problem of this dispatch
#define Q_XBASE 27   // first column tile of this dispatch
#define Q_KSPLIT 28  // reduction terms per split (CV_BWD_W; the whole range otherwise)
#define Q_OSTRIDE 29 // elements between the splits' partials

shared FT sa[BK][BM];
shared FT sb[BK][BN];

int q(int i) { return int(P[i]); }

// The 3-d position of linear index r in a box of `dims` (two divisions).
ivec3 split3(int r, ivec3 dims) {
  const int yz = r / dims.z, x = yz / dims.y;
  return ivec3(x, yz - x * dims.y, r - yz * dims.z);
}

FT lda(int i) { return as_f(ld_a(DTA, i), DTA); }
FT ldb(int i) { return as_f(ld_b(DTA, i), DTA); }

void bias_main() {
  // Binding 1: dy [N, C, S]; one workgroup per channel c (x + y * gx).
  int c = int(gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x);
  int C = q(Q_CO), S = q(Q_OUT);
  if (c >= C) return;
  int tid = int(gl_LocalInvocationID.x);
  FT s = FT(0);
  for (int e = q(Q_K0) + tid; e < q(Q_K1); e += 256) {
    int n = e / S, p = e - n * S;
    s += lda((n * C + c) * S + p);
  }
  // A fixed tree over the 256 partial sums (in sb as [4][64]).
  sb[tid >> 6][tid & 63] = s;
  barrier();
  for (int w = 128; w > 0; w >>= 1) {
    if (tid < w) {
      int j = tid + w;
      sb[tid >> 6][tid & 63] += sb[j >> 6][j & 63];
    }
    barrier();
  }
  if (tid == 0) {
    FT r = sb[0][0];
    if (q(Q_ACC) != 0) r += as_f(ld_o(DTO, c), DTO);
    st_o(DTO, c, from_f(r, DTO));
  }
}

// CV_SUM: Q_N elements, Q_CI partials of them in binding 1 (DTA, the compute float).
void sum_main() {
  const int e = global_linear_id(256), n = q(Q_N);
  if (e >= n) return;
  FT r = q(Q_ACC) != 0 ? as_f(ld_o(DTO, e), DTO) : FT(0);
  for (int s = 0; s < q(Q_CI); ++s) r += lda(s * n + e);
  st_o(DTO, e, from_f(r, DTO));
}

void main() {
  if (MODE == CV_BIAS) {
    bias_main();
    return;
  }
  if (MODE == CV_SUM) {
    sum_main();
    return;
  }
  const int N = q(Q_N), Ci = q(Q_CI), Co = q(Q_CO), G = q(Q_G);
  const ivec3 inn = ivec3(q(Q_IN), q(Q_IN + 1), q(Q_IN + 2));
  const ivec3 ker = ivec3(q(Q_KER), q(Q_KER + 1), q(Q_KER + 2));
  const ivec3 outn = ivec3(q(Q_OUT), q(Q_OUT + 1), q(Q_OUT + 2));
  const ivec3 st = ivec3(q(Q_STRIDE), q(Q_STRIDE + 1), q(Q_STRIDE + 2));
  const ivec3 pd = ivec3(q(Q_PAD), q(Q_PAD + 1), q(Q_PAD + 2));
  const ivec3 dl = ivec3(q(Q_DIL), q(Q_DIL + 1), q(Q_DIL + 2));
  const int cgi = Ci / G, cgo = Co / G;
  const int KS = ker.x * ker.y * ker.z, S = inn.x * inn.y * inn.z, PO = outn.x * outn.y * outn.z;
  const int z = int(gl_WorkGroupID.z) + q(Q_ZBASE);
  const int zq = z / G;  // the sample (CV_FWD, CV_BWD_X) or the split (CV_BWD_W)
  const int nb = MODE == CV_BWD_W ? 0 : zq, grp = z - zq * G, split = MODE == CV_BWD_W ? zq : 0;
  int M, NC;
  if (MODE == CV_FWD) { M = cgo; NC = PO; }
  else if (MODE == CV_BWD_X) { M = cgi; NC = S; }
  else { M = cgo; NC = cgi * KS; }
  const int K0 = q(Q_K0) + split * q(Q_KSPLIT), K1 = min(q(Q_K1), K0 + q(Q_KSPLIT));

  const int tid = int(gl_LocalInvocationID.x);
  const int tx = tid & 15, ty = tid >> 4;
  const int row0 = int(gl_WorkGroupID.y) * BM, col0 = (int(gl_WorkGroupID.x) + q(Q_XBASE)) * BN;

  // This invocation's B column (fixed over K): e = tid + 256 l -> kb = (tid >> 6) + 4 l, n = tid & 63.
  const int bn = col0 + (tid & 63);
  const bool bn_ok = bn < NC;
  ivec3 cpos = ivec3(0);  // FWD: output position; BWD_X: input position; BWD_W: kernel tap
  int cch = 0;            // BWD_W: the input channel of the column
  if (bn_ok) {
    int r = bn;
    if (MODE == CV_BWD_W) { cch = r / KS; r -= cch * KS; }
    cpos = split3(r, MODE == CV_FWD ? outn : MODE == CV_BWD_X ? inn : ker);
  }
  // This invocation's A row in the tile loads: m = (tid >> 4) + 16 l, k = tid & 15.
  const int a_base_w = grp * cgo * cgi * KS;                  // FWD/BWD_X: weight group
  const int x_base = (nb * Ci + grp * cgi) * S;               // FWD: x of (n, grp)
  const int dy_base = (nb * Co + grp * cgo) * PO;             // BWD_X: dy of (n, grp)

  FT acc[TMR][4];
  for (int i = 0; i < TMR; ++i)
    [[unroll]] for (int j = 0; j < 4; ++j) acc[i][j] = FT(0);

  for (int k0 = K0; k0 < K1; k0 += BK) {
    // A tile: 64 rows x 16 k.
    {
      const int gk = k0 + tx;
      const bool kin = gk < K1;
      int kq = 0, kr = 0;  // BWD_X: (o, t) of k; BWD_W: (n, p) of k
      if (MODE == CV_BWD_X) { kq = gk / KS; kr = gk - kq * KS; }
      if (MODE == CV_BWD_W) { kq = gk / PO; kr = gk - kq * PO; }
      for (int l = 0; l < TMR; ++l) {
        const int m = ty + 16 * l, gr = row0 + m;
        FT v = FT(0);
        if (kin && gr < M) {
          if (MODE == CV_FWD) v = lda(a_base_w + gr * (cgi * KS) + gk);
          else if (MODE == CV_BWD_X) v = lda(a_base_w + kq * (cgi * KS) + gr * KS + kr);
          else v = lda((kq * Co + grp * cgo + gr) * PO + kr);
        }
        sa[tx][m] = v;
      }
    }
    // B tile: 16 k x 64 columns.
    [[unroll]] for (int l = 0; l < 4; ++l) {
      const int kb = (tid >> 6) + 4 * l, gk = k0 + kb;
      FT v = FT(0);
      if (bn_ok && gk < K1) {
        if (MODE == CV_FWD) {
          int ci = gk / KS, t = gk - ci * KS;
          ivec3 tp = split3(t, ker);
          ivec3 ip = cpos * st - pd + tp * dl;
          if (all(greaterThanEqual(ip, ivec3(0))) && all(lessThan(ip, inn)))
            v = ldb(x_base + ci * S + (ip.x * inn.y + ip.y) * inn.z + ip.z);
        } else if (MODE == CV_BWD_X) {
          int o = gk / KS, t = gk - o * KS;
          ivec3 tp = split3(t, ker);
          ivec3 tt = cpos + pd - tp * dl;
          if (all(greaterThanEqual(tt, ivec3(0)))) {
            ivec3 qp = tt / st;
            if (all(equal(qp * st, tt)) && all(lessThan(qp, outn)))
              v = ldb(dy_base + o * PO + (qp.x * outn.y + qp.y) * outn.z + qp.z);
          }
        } else {
          int n = gk / PO, p = gk - n * PO;
          ivec3 op = split3(p, outn);
          ivec3 ip = op * st - pd + cpos * dl;
          if (all(greaterThanEqual(ip, ivec3(0))) && all(lessThan(ip, inn)))
            v = ldb((n * Ci + grp * cgi + cch) * S + (ip.x * inn.y + ip.y) * inn.z + ip.z);
        }
      }
      sb[kb][tid & 63] = v;
    }
    barrier();
    [[unroll]] for (int k = 0; k < BK; ++k) {
      FT av[TMR], bv[4];
      for (int i = 0; i < TMR; ++i) av[i] = sa[k][ty + 16 * i];
      [[unroll]] for (int i = 0; i < 4; ++i) bv[i] = sb[k][tx + 16 * i];
      for (int i = 0; i < TMR; ++i)
        [[unroll]] for (int j = 0; j < 4; ++j) acc[i][j] += av[i] * bv[j];
    }
    barrier();
  }

  // Output: FWD y[(n*Co + grp*cgo + m)*PO + col]; BWD_X dx[(n*Ci + grp*cgi + m)*S + col];
  // BWD_W dw[(grp*cgo + m)*cgi*KS + col]. The bias (binding 3) is indexed by the output channel.
  int obase, ch0;
  if (MODE == CV_FWD) { ch0 = grp * cgo; obase = (nb * Co + ch0) * NC; }
  else if (MODE == CV_BWD_X) { ch0 = grp * cgi; obase = (nb * Ci + ch0) * NC; }
  else { ch0 = grp * cgo; obase = ch0 * NC + split * q(Q_OSTRIDE); }
  const bool accumulate = q(Q_ACC) != 0, add_bias = q(Q_BIAS) != 0;
  for (int i = 0; i < TMR; ++i) {
    const int row = row0 + ty + 16 * i;
    if (row >= M) continue;
    FT b = add_bias ? as_f(ld_c(DTA, ch0 + row), DTA) : FT(0);
    [[unroll]] for (int j = 0; j < 4; ++j) {
      const int col = col0 + tx + 16 * j;
      if (col >= NC) continue;
      const int oi = obase + row * NC + col;
      FT r = acc[i][j] + b;
      if (accumulate) r += as_f(ld_o(DTO, oi), DTO);
      st_o(DTO, oi, from_f(r, DTO));
    }
  }
}
