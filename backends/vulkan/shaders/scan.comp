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

DEFINE_LOAD(ld_a, a_data)
DEFINE_STORE(st_o, o_data)

// Sums and products run in the compute encoding (f32/f64 raw, or wrapping UT) and
// round at each store, like the CPU backend; max/min compare the stored values.
RAW step_(RAW acc, RAW v) {
  const int kind = dt_kind(DTA);
  if (kind == 0) {
    if (OP == SC_CUMSUM || OP == SC_CUMPROD) {
      FT a = as_f(acc, CT_F), b = as_f(v, DTA);
      return from_f(OP == SC_CUMSUM ? a + b : a * b, CT_F);
    }
    FT a = as_f(acc, DTA), b = as_f(v, DTA);
    if (isnan(a)) return acc;
    if (isnan(b)) return v;
    return (OP == SC_CUMMAX ? b > a : b < a) ? v : acc;
  }
  if (OP == SC_CUMSUM) return acc + v;
  if (OP == SC_CUMPROD) return RAW(UT(acc) * UT(kind == 1 ? UT(as_i(v, DTA)) : as_u(v, DTA)));
  if (kind == 1) {
    IT a = as_i(acc, DTA), b = as_i(v, DTA);
    return (OP == SC_CUMMAX ? b > a : b < a) ? v : acc;
  }
  return (OP == SC_CUMMAX ? as_u(v, DTA) > as_u(acc, DTA) : as_u(v, DTA) < as_u(acc, DTA)) ? v : acc;
}

void main() {
  int l = global_linear_id(64u);
  if (l >= int(P[P_N])) return;
  int n = int(P[P_EXTRA]);
  int sa = int(P[P_EXTRA + 1]);
  int so = int(P[P_EXTRA + 2]);
  int ia = operand_index(1, l);
  int io = operand_index(0, l);
  const bool arith = OP == SC_CUMSUM || OP == SC_CUMPROD;
  const int kind = dt_kind(DTA);
  RAW acc = RAW(0);
  for (int j = 0; j < n; ++j) {
    RAW v = ld_a(DTA, ia + j * sa);
    if (j == 0) acc = (arith && kind == 0) ? from_f(as_f(v, DTA), CT_F) : v;
    else acc = step_(acc, v);
    RAW res = (arith && kind == 0) ? from_f(as_f(acc, CT_F), DTA) : acc;
    st_o(DTA, io + j * so, res & mask_of(DTA));
  }
}
