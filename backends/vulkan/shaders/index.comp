// The index family: gather/select read the source at an index taken from an index
// tensor; the accumulating ops (scatter / select_assign with every update rule,
// scatter_or / select_or on bools) run one invocation per line along the dim, which
// walks that line's indices in order: colliding indices combine in index order
// without atomics (none exist for most dtypes) and the result is deterministic. An index out of range reads 0 / is
// skipped and raises this dispatch's flag in the error buffer (binding 3, slot
// P_ERR: flag word, then the offending index), which the host turns into an
// IndexError naming the op at the next wait.
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
layout(std430, set = 0, binding = 3) buffer E { uint e_data[]; };
layout(std430, set = 0, binding = 4) buffer O { uint o_data[]; };

DEFINE_LOAD(ld_a, a_data)
DEFINE_LOAD(ld_o, o_data)
DEFINE_LOAD(ld_idx, i_data)
DEFINE_STORE(st_o, o_data)

// The index at element i of the index tensor, or -1 - (value clamped to int) when
// it lies outside [0, limit) (after recording the error).
int ld_i(int i, int limit) {
  RAW r = ld_idx(DTI, i);
  if (dt_kind(DTI) == 1 && dt_size(DTI) <= 4) {
    // Narrow signed indices in 32-bit arithmetic (the 64-bit path below let negative
    // i8/i16/i32 indices through unreported in the f64 variant on lavapipe).
    int s = dt_size(DTI) * 8;
    int v32 = bitfieldExtract(int(uint(r)), 0, s);
    if (v32 >= 0 && v32 < limit) return v32;
    int slot32 = int(P[P_ERR]);
    if (atomicCompSwap(e_data[2 * slot32], 0u, 1u) == 0u) e_data[2 * slot32 + 1] = uint(v32);
    return -1;
  }
  IT v = dt_kind(DTI) == 1 ? as_i(r, DTI) : IT(as_u(r, DTI));
  bool neg_u = dt_kind(DTI) != 1 && dt_size(DTI) >= 4 && (as_u(r, DTI) >> (dt_size(DTI) * 8 - 1)) != UT(0);
  if (!neg_u && v >= IT(0) && v < IT(limit)) return int(v);
  int slot = int(P[P_ERR]);
  int shown = neg_u ? 2147483647 : (v > IT(2147483647) ? 2147483647 : (v < IT(-2147483647) ? -2147483647 : int(v)));
  if (atomicCompSwap(e_data[2 * slot], 0u, 1u) == 0u) e_data[2 * slot + 1] = uint(shown);
  return -1;
}

// out op= value with the update rule (the CPU's apply in backends/cpu/index.cpp):
// ints wrap; floats compute in FT and round to the dtype once; Min/Max keep `x`
// unless `y` is strictly smaller/larger, and a NaN on either side wins (x's first).
// `upd`: a parameter word rather than a specialization constant, so the five rules
// share one pipeline per op and dtype (fewer pipelines to create at first use).
RAW update(int upd, RAW x, RAW y) {
  if (dt_is_bool(DTA)) return (x != RAW(0) || y != RAW(0)) ? RAW(1) : RAW(0);  // dispatch sends bools only as Or
  if (upd == UPD_ASSIGN) return y;
  int k = dt_kind(DTA);
  if (upd == UPD_ADD) return k == 0 ? from_f(as_f(x, DTA) + as_f(y, DTA), DTA) : x + y;
  if (upd == UPD_MUL) return k == 0 ? from_f(as_f(x, DTA) * as_f(y, DTA), DTA) : x * y;
  bool take_y;
  if (k == 0) {
    FT a = as_f(x, DTA), b = as_f(y, DTA);
    if (isnan(a)) return from_f(a, DTA);
    if (isnan(b)) return from_f(b, DTA);
    take_y = upd == UPD_MIN ? b < a : b > a;
  } else if (k == 1) {
    IT a = as_i(x, DTA), b = as_i(y, DTA);
    take_y = upd == UPD_MIN ? b < a : b > a;
  } else {
    UT a = as_u(x, DTA), b = as_u(y, DTA);
    take_y = upd == UPD_MIN ? b < a : b > a;
  }
  return take_y ? y : x;
}

// Params: shape of the iteration space; operand 0 = out, 1 = source / values,
// 2 = indices. Extra: dim, size of dim in the indexed tensor, stride of the indexed
// tensor along dim, (scatter) line length, values stride, index stride along dim,
// update rule (UPD_*).
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
      idx = ld_i(operand_index(2, i), limit);
    } else {
      int rem = i, c = 0;
      for (int d = int(P[P_RANK]) - 1; d >= 0; --d) {
        int n = int(P[P_SHAPE + d]);
        if (d == dim) c = rem % n;
        rem /= n;
      }
      idx = ld_i(int(P[P_OPND + 18]) + c * int(P[P_OPND + 19]), limit);
    }
    RAW r = idx >= 0 ? ld_a(DTA, base + idx * dstride) : RAW(0);
    st_o(DTA, io, r);
  } else {
    int len = int(P[P_EXTRA + 3]);
    int vstride = int(P[P_EXTRA + 4]);
    int istride = int(P[P_EXTRA + 5]);
    int upd = int(P[P_EXTRA + 6]);
    int obase = operand_index(0, i);
    int vbase = operand_index(1, i);
    int ibase = operand_index(2, i);
    for (int j = 0; j < len; ++j) {
      int idx = ld_i(ibase + j * istride, limit);
      if (idx < 0) continue;
      int io = obase + idx * dstride;
      st_o(DTA, io, update(upd, ld_o(DTA, io), ld_a(DTA, vbase + j * vstride)) & mask_of(DTA));
    }
  }
}
