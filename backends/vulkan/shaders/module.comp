// The module family: pooling (max with indices, average, adaptive average), interpolate
// and layer_norm, forward and backward, with the CPU backend's arithmetic
// (backends/cpu/nn/pool.cpp, interpolate.cpp, norm.cpp): f16/bf16 computed in f32, f64 in
// the WIDE variant. Inputs are read through their strides. The backwards are gathers:
// one invocation per input-gradient element walks the outputs whose windows (taps)
// cover it, in the CPU's scatter order, so results are deterministic without atomics.
// Loops are bounded by a window or a tap range (the host keeps them under lavapipe's
// 65535-iteration limit).
#version 450
#extension GL_GOOGLE_include_directive : require
#include "vk_codes.h"
#include "module_codes.h"

layout(local_size_x = 256) in;
layout(constant_id = 0) const int OP = MD_MAX_POOL;
layout(constant_id = 1) const int DT = DT_F32;    // the float dtype of x / dy / y
layout(constant_id = 2) const int DTI = DT_I32;   // max pool: the index dtype

#include "common.glsl"

layout(std430, set = 0, binding = 1) readonly buffer A { uint a_data[]; };
layout(std430, set = 0, binding = 2) readonly buffer B { uint b_data[]; };
layout(std430, set = 0, binding = 3) buffer X { uint x_data[]; };
layout(std430, set = 0, binding = 4) buffer O { uint o_data[]; };

DEFINE_LOAD(ld_a, a_data)
DEFINE_LOAD(ld_b, b_data)
DEFINE_LOAD(ld_x, x_data)
DEFINE_STORE(st_o, o_data)
DEFINE_STORE(st_x, x_data)

// One step of the CPU's work-dtype arithmetic: f32 values stay f32 in the WIDE variant
// (which also runs for f32 data with i64 indices).
FT rw(FT v) {
#ifdef WIDE
  if (DT != DT_F64) return FT(float(v));
#endif
  return v;
}

int pw(int base, int k) { return int(P[base + k]); }
// Element (plane p, spatial d, h, w) of operand at word `base` (MP_A or MP_B).
int at(int base, int p, int d, int h, int w) {
  int c = p % pw(0, MP_C), n = p / pw(0, MP_C);
  return pw(base, 0) + n * pw(base, 1) + c * pw(base, 2) + d * pw(base, 3) + h * pw(base, 4) + w * pw(base, 5);
}
FT a_at(int p, int d, int h, int w) { return as_f(ld_a(DT, at(MP_A, p, d, h, w)), DT); }

// Splits invocation t into plane and position over the spatial sizes at word `sz`.
void split(int t, int sz, out int p, out int d, out int h, out int w) {
  int n1 = pw(sz, 1), n2 = pw(sz, 2);
  int per = pw(sz, 0) * n1 * n2;
  p = t / per;
  int r = t - p * per;
  d = r / (n1 * n2);
  h = (r / n2) % n1;
  w = r % n2;
}

// ---- average pooling windows (the CPU's avg_window) ----
void avg_window(int o, int k, out int lo, out int hi, out int len) {
  int s = pw(MP_S, k), pd = pw(MP_P, k), ks = pw(MP_K, k), in_ = pw(MP_IN, k);
  int start = o * s - pd;
  int end_ = min(start + ks, in_ + pd);
  lo = max(start, 0);
  hi = min(end_, in_);
  len = (pw(0, MP_FLAGS) & MD_COUNT_PAD) != 0 ? end_ - start : hi - lo;
}
int avg_div(int od, int oh, int ow) {
  int lo, hi, l0, l1, l2;
  avg_window(od, 0, lo, hi, l0);
  avg_window(oh, 1, lo, hi, l1);
  avg_window(ow, 2, lo, hi, l2);
  return max(l0 * l1 * l2, 1);
}
// Outputs o along dim k whose window [o*s - p, o*s - p + span) holds input i.
void covering(int i, int k, int span, out int lo, out int hi) {
  int s = pw(MP_S, k), first = i + pw(MP_P, k) - span + 1;
  lo = first <= 0 ? 0 : (first + s - 1) / s;
  hi = min((i + pw(MP_P, k)) / s, pw(MP_OUT, k) - 1);
}

// The taps [lo, hi) of a max-pool window starting at `start` along dim k that land
// inside the input: a kernel far wider than the input costs the input, not the kernel.
void pool_taps(int start, int k, out int lo, out int hi) {
  int dl = pw(MP_D, k), room = pw(MP_IN, k) - 1 - start;
  lo = start >= 0 ? 0 : -start / dl + (-start % dl != 0 ? 1 : 0);
  hi = room < 0 ? 0 : min(pw(MP_K, k), room / dl + 1);
  lo = min(lo, hi);
}

// Whether input i along dim k is a tap of output o's max-pool window.
bool is_tap(int i, int o, int k) {
  int r = i - (o * pw(MP_S, k) - pw(MP_P, k));
  return r >= 0 && r % pw(MP_D, k) == 0 && r / pw(MP_D, k) < pw(MP_K, k);
}

// ---- adaptive windows: [floor(o*in/out), ceil((o+1)*in/out)) ----
int ad_start(int o, int k) { return (o * pw(MP_IN, k)) / pw(MP_OUT, k); }
int ad_end(int o, int k) { return ((o + 1) * pw(MP_IN, k) + pw(MP_OUT, k) - 1) / pw(MP_OUT, k); }

// ---- interpolate taps (the CPU's make_taps) along dim k (1: height, 2: width) ----
FT cubic_near(FT x) { const FT a = FT(-0.75); return ((a + FT(2)) * x - (a + FT(3))) * x * x + FT(1); }
FT cubic_far(FT x) { const FT a = FT(-0.75); return ((a * x - FT(5) * a) * x + FT(8) * a) * x - FT(4) * a; }
int interp_mode() { return (pw(0, MP_FLAGS) >> MD_MODE_SHIFT) & 3; }
int taps(int dst, int k, out int ix[4], out FT wt[4]) {
  int in_ = pw(MP_IN, k), out_ = pw(MP_OUT, k), mode = interp_mode();
  bool align = (pw(0, MP_FLAGS) & MD_ALIGN) != 0;
  for (int j = 0; j < 4; ++j) { ix[j] = 0; wt[j] = FT(0); }
  if (mode == 0 || mode == 1) {
    ix[0] = mode == 0 ? min((dst * in_) / out_, in_ - 1) : min(((2 * dst + 1) * in_) / (2 * out_), in_ - 1);
    wt[0] = FT(1);
    return 1;
  }
  FT src = align ? (out_ > 1 ? FT(dst) * FT(in_ - 1) / FT(out_ - 1) : FT(0))
                 : (FT(dst) + FT(0.5)) * FT(in_) / FT(out_) - FT(0.5);
  if (mode == 2) {
    if (!align) src = max(FT(0), src);
    int i0 = min(int(floor(src)), in_ - 1);
    FT lam = min(max(src - FT(i0), FT(0)), FT(1));
    ix[0] = i0;
    ix[1] = min(i0 + 1, in_ - 1);
    wt[0] = FT(1) - lam;
    wt[1] = lam;
    return 2;
  }
  FT f = floor(src);
  int i0 = int(f);
  FT x = src - f;
  for (int j = 0; j < 4; ++j) ix[j] = clamp(i0 - 1 + j, 0, in_ - 1);
  wt[0] = cubic_far(x + FT(1));
  wt[1] = cubic_near(x);
  wt[2] = cubic_near(FT(1) - x);
  wt[3] = cubic_far(FT(2) - x);
  return 4;
}
// The outputs along dim k with a tap on input i: tap indices never decrease with the
// output, so [first o whose last tap >= i, last o whose first tap <= i], by bisection.
void tap_range(int i, int k, out int lo, out int hi) {
  int ix[4];
  FT wt[4];
  int a = 0, b = pw(MP_OUT, k);  // first o in [a, b) with last tap >= i
  while (a < b) {
    int m = (a + b) / 2;
    int n = taps(m, k, ix, wt);
    if (ix[n - 1] >= i) b = m; else a = m + 1;
  }
  lo = a;
  a = 0;
  b = pw(MP_OUT, k);  // first o with first tap > i
  while (a < b) {
    int m = (a + b) / 2;
    taps(m, k, ix, wt);
    if (ix[0] > i) b = m; else a = m + 1;
  }
  hi = a - 1;
}

// ---- layer_norm: one workgroup per row ----
shared FT s_red[256];
FT wg_sum(FT v) {
  uint l = gl_LocalInvocationID.x;
  s_red[l] = v;
  barrier();
  for (uint s = 128u; s > 0u; s >>= 1) {
    if (l < s) s_red[l] += s_red[l + s];
    barrier();
  }
  FT r = s_red[0];
  barrier();
  return r;
}
void layer_norm() {
  int row = int(gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x);
  if (row >= int(P[P_N])) return;  // uniform per workgroup
  int l = int(gl_LocalInvocationID.x);
  int d = int(P[P_EXTRA + LN_D]), xs = int(P[P_EXTRA + LN_XSTRIDE]);
  int xb = operand_index(0, row);
  FT s = FT(0);
  for (int i = l; i < d; i += 256) s += as_f(ld_a(DT, xb + i * xs), DT);
  FT mu = wg_sum(s) / FT(d);
  FT v = FT(0);
  for (int i = l; i < d; i += 256) {
    FT c = as_f(ld_a(DT, xb + i * xs), DT) - mu;
    v += c * c;
  }
  FT var = wg_sum(v) / FT(d);
#ifdef WIDE
  FT eps = packDouble2x32(uvec2(P[P_S0], P[P_S0 + 1]));
#else
  FT eps = uintBitsToFloat(P[P_EXTRA + LN_EPS]);
#endif
  FT rs = FT(1) / sqrt(var + eps);
  // The CPU's per-element arithmetic in the work dtype, mean and rstd rounded to it.
  FT m = rw(mu), r = rw(rs);
  int gb = int(P[P_EXTRA + LN_G]), gs = int(P[P_EXTRA + LN_G + 1]);
  int bb = int(P[P_EXTRA + LN_B]), bs = int(P[P_EXTRA + LN_B + 1]);
  bool beta = P[P_EXTRA + LN_HAS_BETA] != 0u;
  for (int i = l; i < d; i += 256) {
    FT y = rw(rw(as_f(ld_a(DT, xb + i * xs), DT) - m) * r);
    y = rw(y * as_f(ld_b(DT, gb + i * gs), DT));
    if (beta) y = rw(y + as_f(ld_x(DT, bb + i * bs), DT));
    st_o(DT, row * d + i, from_f(y, DT));
  }
}

void main() {
  if (OP == MD_LAYER_NORM) {
    layer_norm();
    return;
  }
  int t = global_linear_id(256u);
  if (t >= int(P[MP_N])) return;
  int p, d, h, w;
  if (OP == MD_MAX_POOL) {
    split(t, MP_OUT, p, d, h, w);
    FT best = FT(uintBitsToFloat(0xFF800000u));
    int idx = -1;
    int in1 = pw(MP_IN, 1), in2 = pw(MP_IN, 2);
    int d0 = d * pw(MP_S, 0) - pw(MP_P, 0), h0 = h * pw(MP_S, 1) - pw(MP_P, 1), w0 = w * pw(MP_S, 2) - pw(MP_P, 2);
    int lo0, hi0, lo1, hi1, lo2, hi2;
    pool_taps(d0, 0, lo0, hi0);
    pool_taps(h0, 1, lo1, hi1);
    pool_taps(w0, 2, lo2, hi2);
    for (int kd = lo0; kd < hi0; ++kd) {
      int id = d0 + kd * pw(MP_D, 0);
      for (int kh = lo1; kh < hi1; ++kh) {
        int ih = h0 + kh * pw(MP_D, 1);
        for (int kw = lo2; kw < hi2; ++kw) {
          int iw = w0 + kw * pw(MP_D, 2);
          FT v = a_at(p, id, ih, iw);
          if (idx < 0 || v > best || (isnan(v) && !isnan(best))) {
            best = v;
            idx = (id * in1 + ih) * in2 + iw;
          }
        }
      }
    }
    st_o(DT, t, from_f(best, DT));
    if ((pw(0, MP_FLAGS) & MD_WITH_INDICES) != 0) st_x(DTI, t, RAW(IT(idx)) & mask_of(DTI));
  } else if (OP == MD_MAX_POOL_BWD) {
    split(t, MP_IN, p, d, h, w);
    IT want = IT((d * pw(MP_IN, 1) + h) * pw(MP_IN, 2) + w);
    int lo0, hi0, lo1, hi1, lo2, hi2;
    covering(d, 0, (pw(MP_K, 0) - 1) * pw(MP_D, 0) + 1, lo0, hi0);
    covering(h, 1, (pw(MP_K, 1) - 1) * pw(MP_D, 1) + 1, lo1, hi1);
    covering(w, 2, (pw(MP_K, 2) - 1) * pw(MP_D, 2) + 1, lo2, hi2);
    FT acc = FT(0);
    for (int od = lo0; od <= hi0; ++od)
      for (int oh = lo1; oh <= hi1; ++oh)
        for (int ow = lo2; ow <= hi2; ++ow)
          if (as_i(ld_b(DTI, at(MP_B, p, od, oh, ow)), DTI) == want) acc = rw(acc + a_at(p, od, oh, ow));
    st_o(DT, t, from_f(acc, DT));
  } else if (OP == MD_MAX_POOL_CHECK) {
    split(t, MP_OUT, p, d, h, w);
    IT v = as_i(ld_b(DTI, at(MP_B, p, d, h, w)), DTI);
    if (v != IT(-1)) {
      IT H = IT(pw(MP_IN, 1)), W = IT(pw(MP_IN, 2));
      bool ok = v >= IT(0) && v < IT(pw(MP_IN, 0)) * H * W;
      if (ok) ok = is_tap(int(v / (H * W)), d, 0) && is_tap(int((v / W) % H), h, 1) && is_tap(int(v % W), w, 2);
      if (!ok) {
        int slot = int(P[P_ERR]);
        int shown = v > IT(2147483647) ? 2147483647 : (v < IT(-2147483647) ? -2147483647 : int(v));
        if (atomicCompSwap(x_data[2 * slot], 0u, 1u) == 0u) x_data[2 * slot + 1] = uint(shown);
      }
    }
  } else if (OP == MD_AVG_POOL) {
    split(t, MP_OUT, p, d, h, w);
    int lo0, hi0, l0, lo1, hi1, l1, lo2, hi2, l2;
    avg_window(d, 0, lo0, hi0, l0);
    avg_window(h, 1, lo1, hi1, l1);
    avg_window(w, 2, lo2, hi2, l2);
    FT s = FT(0);
    for (int id = lo0; id < hi0; ++id)
      for (int ih = lo1; ih < hi1; ++ih)
        for (int iw = lo2; iw < hi2; ++iw) s = rw(s + a_at(p, id, ih, iw));
    st_o(DT, t, from_f(rw(s / FT(max(l0 * l1 * l2, 1))), DT));
  } else if (OP == MD_AVG_POOL_BWD) {
    split(t, MP_IN, p, d, h, w);
    int lo0, hi0, lo1, hi1, lo2, hi2;
    covering(d, 0, pw(MP_K, 0), lo0, hi0);
    covering(h, 1, pw(MP_K, 1), lo1, hi1);
    covering(w, 2, pw(MP_K, 2), lo2, hi2);
    FT acc = FT(0);
    for (int od = lo0; od <= hi0; ++od)
      for (int oh = lo1; oh <= hi1; ++oh)
        for (int ow = lo2; ow <= hi2; ++ow) acc = rw(acc + rw(a_at(p, od, oh, ow) / FT(avg_div(od, oh, ow))));
    st_o(DT, t, from_f(acc, DT));
  } else if (OP == MD_ADAPTIVE) {
    split(t, MP_OUT, p, d, h, w);
    int d0 = ad_start(d, 0), d1 = ad_end(d, 0), h0 = ad_start(h, 1), h1 = ad_end(h, 1);
    int w0 = ad_start(w, 2), w1 = ad_end(w, 2);
    FT s = FT(0);
    for (int id = d0; id < d1; ++id)
      for (int ih = h0; ih < h1; ++ih)
        for (int iw = w0; iw < w1; ++iw) s = rw(s + a_at(p, id, ih, iw));
    st_o(DT, t, from_f(rw(s / FT((d1 - d0) * (h1 - h0) * (w1 - w0))), DT));
  } else if (OP == MD_ADAPTIVE_BWD) {
    split(t, MP_IN, p, d, h, w);
    int lo[3], hi[3], pos[3] = int[3](d, h, w);
    for (int k = 0; k < 3; ++k) {
      int in_ = pw(MP_IN, k), out_ = pw(MP_OUT, k), i = pos[k];
      lo[k] = (i * out_) / in_;
      hi[k] = min(out_ - 1, ((i + 1) * out_ + in_ - 1) / in_ - 1);
    }
    FT acc = FT(0);
    for (int od = lo[0]; od <= hi[0]; ++od)
      for (int oh = lo[1]; oh <= hi[1]; ++oh)
        for (int ow = lo[2]; ow <= hi[2]; ++ow) {
          int cnt = (ad_end(od, 0) - ad_start(od, 0)) * (ad_end(oh, 1) - ad_start(oh, 1)) *
                    (ad_end(ow, 2) - ad_start(ow, 2));
          acc = rw(acc + rw(a_at(p, od, oh, ow) / FT(cnt)));
        }
    st_o(DT, t, from_f(acc, DT));
  } else if (OP == MD_INTERP) {
    // CPU order: per tap row, the width taps summed, then the rows weighted and summed.
    split(t, MP_OUT, p, d, h, w);
    int ih[4], iw[4];
    FT wh[4], ww[4];
    int nh = taps(h, 1, ih, wh), nw = taps(w, 2, iw, ww);
    FT s = FT(0);
    for (int a = 0; a < nh; ++a) {
      FT r = FT(0);
      for (int b = 0; b < nw; ++b) r += ww[b] * a_at(p, 0, ih[a], iw[b]);
      s += wh[a] * r;
    }
    st_o(DT, t, from_f(s, DT));
  } else if (OP == MD_INTERP_BWD) {
    // dx[i][j] = sum over ow (ascending), width taps hitting j, of the tap weight times
    // tmp[i][ow] = sum over oh (ascending), height taps hitting i, of weight * dy[oh][ow].
    split(t, MP_IN, p, d, h, w);
    int loh, hih, low, hiw;
    tap_range(h, 1, loh, hih);
    tap_range(w, 2, low, hiw);
    int ix[4], jx[4];
    FT wx[4], wy[4];
    FT acc = FT(0);
    for (int ow = low; ow <= hiw; ++ow) {
      int nw = taps(ow, 2, jx, wy);
      bool hit = false;
      for (int b = 0; b < nw; ++b) hit = hit || jx[b] == w;
      if (!hit) continue;
      FT tmp = FT(0);
      for (int oh = loh; oh <= hih; ++oh) {
        int nh = taps(oh, 1, ix, wx);
        FT g = a_at(p, 0, oh, ow);
        for (int a = 0; a < nh; ++a)
          if (ix[a] == h) tmp += wx[a] * g;
      }
      for (int b = 0; b < nw; ++b)
        if (jx[b] == w) acc += wy[b] * tmp;
    }
    st_o(DT, t, from_f(acc, DT));
  }
}
