// Shared GLSL: dtype-coded loads/stores on uint-word buffers (8- and 16-bit elements
// are packed in words, stored with atomics so neighbours never race; 64-bit ones
// span two words), conversions with Rust `as` semantics, and strided index
// arithmetic over the parameter block.
//
// Every shader is compiled twice: the narrow variant computes in 32 bits (f16 and
// bf16 are 16-bit storage computed in f32, like the CPU backend), the WIDE variant
// (-DWIDE, needs shaderInt64 + shaderFloat64) carries raw elements as uint64 and
// computes floats in f64 and ints in 64 bits; it runs whenever a 64-bit dtype is
// involved.
#include "vk_codes.h"

#ifdef WIDE
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
#define RAW uint64_t
#define FT double
#define IT int64_t
#define UT uint64_t
#define CT_F DT_F64
#else
#define RAW uint
#define FT float
#define IT int
#define UT uint
#define CT_F DT_F32
#endif

layout(std430, set = 0, binding = 0) readonly buffer Params { uint P[]; };

int dt_size(int dt) {
  if (dt == DT_F64 || dt == DT_I64 || dt == DT_U64) return 8;
  if (dt == DT_I8 || dt == DT_U8 || dt == DT_BOOL || dt == DT_BOOLU8) return 1;
  if (dt == DT_I16 || dt == DT_U16 || dt == DT_F16 || dt == DT_BF16) return 2;
  return 4;
}
// 0: float, 1: signed int, 2: unsigned int or bool
int dt_kind(int dt) {
  if (dt == DT_F32 || dt == DT_F64 || dt == DT_F16 || dt == DT_BF16) return 0;
  if (dt == DT_I32 || dt == DT_I16 || dt == DT_I8 || dt == DT_I64) return 1;
  return 2;
}
bool dt_is_bool(int dt) { return dt == DT_BOOL || dt == DT_BOOLU8 || dt == DT_BOOLU32; }

const uint kNaN = 0x7FC00000u;

RAW mask_of(int dt) {
  int s = dt_size(dt);
  if (s == 8) return ~RAW(0);
  return RAW(s == 4 ? 0xFFFFFFFFu : (s == 1 ? 0xFFu : 0xFFFFu));
}

#ifdef WIDE
#define LOAD8(buf, i) (RAW(buf[2 * (i)]) | (RAW(buf[2 * (i) + 1]) << 32))
#define STORE8(buf, i, r) { buf[2 * (i)] = uint(r); buf[2 * (i) + 1] = uint((r) >> 32); }
#else
#define LOAD8(buf, i) 0u
#define STORE8(buf, i, r) {}
#endif

// Defines `RAW fname(int dt, int i)` reading element i of buffer `buf`.
#define DEFINE_LOAD(fname, buf)                                                   \
  RAW fname(int dt, int i) {                                                      \
    int s = dt_size(dt);                                                          \
    if (s == 8) return LOAD8(buf, i);                                             \
    if (s == 4) return RAW(buf[i]);                                               \
    if (s == 1) return RAW((buf[i >> 2] >> (uint(i & 3) * 8u)) & 0xFFu);          \
    return RAW((buf[i >> 1] >> (uint(i & 1) * 16u)) & 0xFFFFu);                   \
  }
// Defines `void fname(int dt, int i, RAW r)` writing element i of buffer `buf`.
#define DEFINE_STORE(fname, buf)                                                  \
  void fname(int dt, int i, RAW r) {                                              \
    int s = dt_size(dt);                                                          \
    if (s == 8) { STORE8(buf, i, r); return; }                                    \
    uint v = uint(r);                                                             \
    if (s == 4) { buf[i] = v; return; }                                           \
    uint sh = s == 1 ? uint(i & 3) * 8u : uint(i & 1) * 16u;                      \
    uint m = uint(mask_of(dt)) << sh;                                             \
    int w = s == 1 ? (i >> 2) : (i >> 1);                                         \
    atomicAnd(buf[w], ~m);                                                        \
    atomicOr(buf[w], (v << sh) & m);                                              \
  }

// ---- half and bfloat16 <-> float, round to nearest even (as tensor/half.hpp) ----
float half_to_float(uint h) {
  uint sign = (h & 0x8000u) << 16;
  uint e = (h >> 10) & 0x1Fu;
  uint m = h & 0x3FFu;
  if (e == 0u) {
    float mag = float(m) * 5.9604644775390625e-8;
    return sign != 0u ? -mag : mag;
  }
  if (e == 31u) return uintBitsToFloat(sign | 0x7F800000u | (m << 13));
  return uintBitsToFloat(sign | ((e + 112u) << 23) | (m << 13));
}
uint float_to_half(float f) {
  uint x = floatBitsToUint(f);
  uint sign = (x >> 16) & 0x8000u;
  uint a = x & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return sign | 0x7E00u | ((a >> 13) & 0x3FFu);
  if (a >= 0x477FF000u) return sign | 0x7C00u;
  if (a < 0x38800000u) {  // subnormal or zero in half: integer rounding
    uint e = a >> 23;
    if (e < 102u) return sign;  // below 2^-25: rounds to zero
    uint m = (a & 0x7FFFFFu) | 0x800000u;
    uint shift = 126u - e;      // 14..24
    uint q = m >> shift;
    uint rem = m & ((1u << shift) - 1u);
    uint half_ = 1u << (shift - 1u);
    if (rem > half_ || (rem == half_ && (q & 1u) != 0u)) q++;
    return sign | q;
  }
  uint e = (a >> 23) - 112u;
  uint m = a & 0x7FFFFFu;
  uint h = (e << 10) | (m >> 13);
  uint rest = m & 0x1FFFu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u) != 0u)) h++;
  return sign | h;
}
uint float_to_bf16(float f) {
  uint x = floatBitsToUint(f);
  if ((x & 0x7FFFFFFFu) > 0x7F800000u) return (x >> 16) | 0x40u;
  uint lsb = (x >> 16) & 1u;
  return (x + 0x7FFFu + lsb) >> 16;
}

// ---- typed views of a raw element ----
FT as_f(RAW r, int dt) {
#ifdef WIDE
  if (dt == DT_F64) return packDouble2x32(uvec2(uint(r), uint(r >> 32)));
#endif
  uint u = uint(r);
  if (dt == DT_F16) return FT(half_to_float(u));
  if (dt == DT_BF16) return FT(uintBitsToFloat(u << 16));
  return FT(uintBitsToFloat(u));
}
RAW from_f(FT f, int dt) {
#ifdef WIDE
  if (dt == DT_F64) { uvec2 v = unpackDouble2x32(f); return RAW(v.x) | (RAW(v.y) << 32); }
#endif
  float x = float(f);
  if (dt == DT_F16) return RAW(float_to_half(x));
  if (dt == DT_BF16) return RAW(float_to_bf16(x));
  return RAW(floatBitsToUint(x));
}
IT as_i(RAW r, int dt) {
  int s = dt_size(dt);
  if (s == 8) return IT(r);
  int v = int(uint(r));
  if (s == 1) v = bitfieldExtract(v, 0, 8);
  else if (s == 2) v = bitfieldExtract(v, 0, 16);
  return IT(v);
}
UT as_u(RAW r, int dt) { return UT(r & mask_of(dt)); }

// Converts a raw element of dtype `from` to a raw element of dtype `to` (the CPU's
// convert_value: int/float -> narrower float goes through f32; float -> int
// truncates and saturates, NaN -> 0; int -> int wraps; bool targets mean nonzero).
RAW convert_raw(RAW r, int from, int to) {
  if (from == to) return r;
  int kf = dt_kind(from), kt = dt_kind(to);
  if (dt_is_bool(to)) {
    if (kf == 0) return as_f(r, from) != FT(0) ? RAW(1) : RAW(0);  // NaN -> true
    return (r & mask_of(from)) != RAW(0) ? RAW(1) : RAW(0);
  }
  if (kt == 0) {
    if (to == DT_F64) {
      FT f;
      if (kf == 0) f = as_f(r, from);
      else if (kf == 1) f = FT(as_i(r, from));
      else f = FT(as_u(r, from));
      return from_f(f, to);
    }
    float x;
    if (kf == 0) x = float(as_f(r, from));
    else if (kf == 1) x = float(as_i(r, from));
    else x = float(as_u(r, from));
    return from_f(FT(x), to);
  }
  int bits = dt_size(to) * 8;
  if (kf == 0) {
    FT f = as_f(r, from);
    if (isnan(f)) return RAW(0);
    if (kt == 1) {
      FT hi = FT(exp2(float(bits - 1)));
      if (f >= hi) return mask_of(to) >> 1;
      if (f <= -hi) return (RAW(1) << uint(bits - 1));
      return RAW(IT(f)) & mask_of(to);
    }
    if (f <= FT(0)) return RAW(0);
    if (f >= FT(exp2(float(bits)))) return mask_of(to);
    return RAW(UT(f));
  }
  UT v = kf == 1 ? UT(as_i(r, from)) : as_u(r, from);
  return RAW(v) & mask_of(to);
}

// The scalar parameter at word w (2 words, little-endian) as a raw element.
RAW scalar_param(int w) {
#ifdef WIDE
  return RAW(P[w]) | (RAW(P[w + 1]) << 32);
#else
  return P[w];
#endif
}

// Strided index of operand k for output linear index i (the P block describes the shape).
int operand_index(int k, int i) {
  int rank = int(P[P_RANK]);
  int base = P_OPND + 9 * k;
  int idx = int(P[base]);
  int rem = i;
  for (int d = rank - 1; d >= 0; --d) {
    int n = int(P[P_SHAPE + d]);
    int c = rem % n;
    rem /= n;
    idx += c * int(P[base + 1 + d]);
  }
  return idx;
}

// operand_index for an i below the shape's element count (the elementwise kernels): the
// outermost dimension's coordinate is then what is left, with no division. On a software
// device (lavapipe) each integer division is scalarised per lane; a rank-1 broadcast
// operand (the optimizer's graph-mode step size expanded over a parameter) paid two per
// operand per element and ran ~5x slower than the dense kernel.
int operand_index_in(int k, int i) {
  int rank = int(P[P_RANK]);
  int base = P_OPND + 9 * k;
  int idx = int(P[base]);
  int rem = i;
  for (int d = rank - 1; d > 0; --d) {
    int n = int(P[P_SHAPE + d]);
    int c = rem % n;
    rem /= n;
    idx += c * int(P[base + 1 + d]);
  }
  return rank > 0 ? idx + rem * int(P[base + 1]) : idx;
}

int global_linear_id(uint local_size) {
  return int((gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * local_size + gl_LocalInvocationID.x);
}
