// The scan family: one invocation per line along the dim runs the cumulative
// sum/product/max/min serially (ints wrap; NaN propagates through max/min).
#version 450
#extension GL_GOOGLE_include_directive : require
#include "vk_codes.h"

layout(local_size_x = 64) in;
layout(constant_id = 0) const int OP = SC_CUMSUM;
layout(constant_id = 1) const int DTA = DT_F32;

#include "common.glsl"

layout(std430, set = 0, binding = 1) readonly buffer A { uint a_data[]; };
layout(std430, set = 0, binding = 4) buffer O { uint o_data[]; };

uint ld_a(int dt, int i) { return extract_raw(a_data[word_of(dt, i)], dt, i); }
void st_o(int dt, int i, uint r) {
  int s = dt_size(dt);
  if (s == 4) { o_data[i] = r; return; }
  uint sh = s == 1 ? uint(i & 3) * 8u : uint(i & 1) * 16u;
  uint m = mask_of(dt) << sh;
  int w = word_of(dt, i);
  atomicAnd(o_data[w], ~m);
  atomicOr(o_data[w], (r << sh) & m);
}

uint step_(uint acc, uint v) {
  const int kind = dt_kind(DTA);
  if (kind == 0) {
    float a = uintBitsToFloat(acc), b = uintBitsToFloat(v);
    if (OP == SC_CUMSUM) return floatBitsToUint(a + b);
    if (OP == SC_CUMPROD) return floatBitsToUint(a * b);
    if (isnan(a)) return acc;
    if (isnan(b)) return v;
    return (OP == SC_CUMMAX ? b > a : b < a) ? v : acc;
  }
  if (OP == SC_CUMSUM) return acc + v;
  if (OP == SC_CUMPROD) return acc * v;
  if (kind == 1) {
    int a = as_i(acc, DTA), b = as_i(v, DTA);
    return (OP == SC_CUMMAX ? b > a : b < a) ? v : acc;
  }
  return (OP == SC_CUMMAX ? v > acc : v < acc) ? v : acc;
}

void main() {
  int l = global_linear_id(64u);
  if (l >= int(P[P_N])) return;
  int n = int(P[P_EXTRA]);
  int sa = int(P[P_EXTRA + 1]);
  int so = int(P[P_EXTRA + 2]);
  int ia = operand_index(1, l);
  int io = operand_index(0, l);
  uint acc = 0u;
  for (int j = 0; j < n; ++j) {
    uint v = ld_a(DTA, ia + j * sa);
    acc = j == 0 ? v : step_(acc, v);
    st_o(DTA, io + j * so, acc & mask_of(DTA));
  }
}
