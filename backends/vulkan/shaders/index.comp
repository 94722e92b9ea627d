// The index family: gather/select read the source at an index taken from an index
// tensor (out of range reads 0); scatter_add/select_add run one invocation per
// line along the dim so that colliding indices accumulate without races.
#version 450
#extension GL_GOOGLE_include_directive : require
#include "vk_codes.h"

layout(local_size_x = 64) in;
layout(constant_id = 0) const int OP = IX_GATHER;
layout(constant_id = 1) const int DTA = DT_F32;
layout(constant_id = 2) const int DTI = DT_I32;   // index dtype

#include "common.glsl"

layout(std430, set = 0, binding = 1) readonly buffer A { uint a_data[]; };
layout(std430, set = 0, binding = 2) readonly buffer I { uint i_data[]; };
layout(std430, set = 0, binding = 4) buffer O { uint o_data[]; };

uint ld_a(int dt, int i) { return extract_raw(a_data[word_of(dt, i)], dt, i); }
uint ld_o(int dt, int i) { return extract_raw(o_data[word_of(dt, i)], dt, i); }
int ld_i(int i) {
  uint r = extract_raw(i_data[word_of(DTI, i)], DTI, i);
  return dt_kind(DTI) == 1 ? as_i(r, DTI) : (r > 0x7FFFFFFFu ? -1 : int(r));
}
void st_o(int dt, int i, uint r) {
  int s = dt_size(dt);
  if (s == 4) { o_data[i] = r; return; }
  uint sh = s == 1 ? uint(i & 3) * 8u : uint(i & 1) * 16u;
  uint m = mask_of(dt) << sh;
  int w = word_of(dt, i);
  atomicAnd(o_data[w], ~m);
  atomicOr(o_data[w], (r << sh) & m);
}

uint accumulate(uint x, uint y) {
  if (dt_is_bool(DTA)) return (x != 0u || y != 0u) ? 1u : 0u;
  if (dt_kind(DTA) == 0) return floatBitsToUint(uintBitsToFloat(x) + uintBitsToFloat(y));
  return x + y;
}

// Params: shape of the iteration space; operand 0 = out, 1 = source / values,
// 2 = indices. Extra: dim, size of dim in the indexed tensor, stride of the indexed
// tensor along dim, (scatter) line length, values stride, index stride along dim.
void main() {
  int i = global_linear_id(64u);
  if (i >= int(P[P_N])) return;
  int dim = int(P[P_EXTRA]);
  int limit = int(P[P_EXTRA + 1]);
  int dstride = int(P[P_EXTRA + 2]);
  if (OP == IX_GATHER || OP == IX_SELECT) {
    int io = operand_index(0, i);
    int base = operand_index(1, i);   // source with stride 0 along dim
    int idx;
    if (OP == IX_GATHER) {
      idx = ld_i(operand_index(2, i));
    } else {
      int rem = i, c = 0;
      for (int d = int(P[P_RANK]) - 1; d >= 0; --d) {
        int n = int(P[P_SHAPE + d]);
        if (d == dim) c = rem % n;
        rem /= n;
      }
      idx = ld_i(int(P[P_OPND + 18]) + c * int(P[P_OPND + 19]));
    }
    uint r = (idx >= 0 && idx < limit) ? ld_a(DTA, base + idx * dstride) : 0u;
    st_o(DTA, io, r);
  } else {
    int len = int(P[P_EXTRA + 3]);
    int vstride = int(P[P_EXTRA + 4]);
    int istride = int(P[P_EXTRA + 5]);
    int obase = operand_index(0, i);
    int vbase = operand_index(1, i);
    int ibase = operand_index(2, i);
    for (int j = 0; j < len; ++j) {
      int idx = ld_i(OP == IX_SCATTER_ADD ? ibase + j * istride : ibase + j * istride);
      if (idx < 0 || idx >= limit) continue;
      int io = obase + idx * dstride;
      st_o(DTA, io, accumulate(ld_o(DTA, io), ld_a(DTA, vbase + j * vstride)) & mask_of(DTA));
    }
  }
}
