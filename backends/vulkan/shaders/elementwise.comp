// The elementwise family: unary math, binary arithmetic with broadcasting by strides,
// scalar forms, comparisons (writing the out bool dtype), masks and casts/copies, and
// fused one-pass forms of ops that default to compositions (activations and their
// backward forms, clamp, sign, neg, square, hypot, powers, is_nan / is_inf).
// The op and the dtypes are specialization constants, so each pipeline is one
// straight-line kernel after the driver folds the branches.
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : enable

#include "vk_codes.h"
// Workgroup size (LOCAL): 256, or 8 for tensors of at most 8 elements (a software device
// runs every invocation of a group: a [4] op paid for 256).
layout(local_size_x_id = 6) in;
layout(constant_id = 0) const int OP = 0;
layout(constant_id = 1) const int DTA = DT_F32;   // a (and c, and b unless a mask)
layout(constant_id = 2) const int DTB = DT_F32;   // b (the mask dtype for mask ops)
layout(constant_id = 3) const int DTO = DT_F32;   // out
layout(constant_id = 4) const int BSCALAR = 0;    // b is the scalar s0
layout(constant_id = 5) const int CONTIG = 0;     // 0: strided; 1: every operand is dense in the output's order:
                                                  // index = offset + i; 2 + m: dense, except the inputs whose bit is
                                                  // set in m (1 a, 2 b, 4 c): one element read everywhere (index =
                                                  // offset, uniform: one scalar load per group on a software device)
layout(constant_id = 6) const uint LOCAL = 256;   // local_size_x

#include "common.glsl"

#ifdef PROGRAM
// The PROGRAM variant (narrow, f32 only; runtime/graph.cpp): a captured run of dense f32
// elementwise dispatches replayed as one dispatch. Bindings 1..4 are up to four buffers
// (slots), each bound once over the bytes the run touches; binding 0 holds the program:
// P[0] = n, P[1] = the instruction count, then 8 words per instruction: the op's index in
// the run's op table (constants OPK0..OPK7, -1 where unused), flags (1: b is the scalar in
// word 7; 2: a is one element read everywhere; 4: the same for b; 8: the op reads b), the
// output's slot and element offset, a's, b's (or the scalar's bits). Invocation i runs
// every instruction on its own element i in order, so a value an instruction writes is
// read back by the same invocation (graph.cpp fuses only runs where every overlap of a
// written range with another range of the run is the same range). The ops are constants
// so that only the run's own ops are compiled in: a software device (llvmpipe) executes
// every branch of a switch on a run-time op under a mask, which made an interpreter over
// all ~45 ops slower than separate dispatches.
layout(constant_id = 7) const int OPK0 = -1;
layout(constant_id = 8) const int OPK1 = -1;
layout(constant_id = 9) const int OPK2 = -1;
layout(constant_id = 10) const int OPK3 = -1;
layout(constant_id = 11) const int OPK4 = -1;
layout(constant_id = 12) const int OPK5 = -1;
layout(constant_id = 13) const int OPK6 = -1;
layout(constant_id = 14) const int OPK7 = -1;
layout(constant_id = 15) const uint NSLOTS = 4;  // slots the run binds (1..4): the rest fold away
layout(std430, set = 0, binding = 1) buffer S0 { uint s0_data[]; };
layout(std430, set = 0, binding = 2) buffer S1 { uint s1_data[]; };
layout(std430, set = 0, binding = 3) buffer S2 { uint s2_data[]; };
layout(std430, set = 0, binding = 4) buffer S3 { uint s3_data[]; };
uint ld_slot(uint s, int i) {
  if (NSLOTS == 1u || s == 0u) return s0_data[i];
  if (NSLOTS == 2u || s == 1u) return s1_data[i];
  if (NSLOTS == 3u || s == 2u) return s2_data[i];
  return s3_data[i];
}
void st_slot(uint s, int i, uint v) {
  if (NSLOTS == 1u || s == 0u) s0_data[i] = v;
  else if (NSLOTS == 2u || s == 1u) s1_data[i] = v;
  else if (NSLOTS == 3u || s == 2u) s2_data[i] = v;
  else s3_data[i] = v;
}
#else
layout(std430, set = 0, binding = 1) readonly buffer A { uint a_data[]; };
layout(std430, set = 0, binding = 2) readonly buffer B { uint b_data[]; };
layout(std430, set = 0, binding = 3) readonly buffer C { uint c_data[]; };
layout(std430, set = 0, binding = 4) buffer O { uint o_data[]; };

DEFINE_LOAD(ld_a, a_data)
DEFINE_LOAD(ld_b, b_data)
DEFINE_LOAD(ld_c, c_data)
DEFINE_STORE(st_o, o_data)
#endif

#ifdef WIDE
#include "math64.glsl"
FT nan_g() { return nan_d(); }
FT inf_g() { return inf_d(); }
#else
FT nan_g() { return uintBitsToFloat(kNaN); }
FT inf_g() { return uintBitsToFloat(0x7F800000u); }
#endif

bool is_odd_integer(FT b) { return floor(b) == b && floor(b * FT(0.5)) != b * FT(0.5); }
bool neg_zero(FT a) {
#ifdef WIDE
  return a == FT(0) && signbit_d(a);
#else
  return a == 0.0 && (floatBitsToUint(a) & 0x80000000u) != 0u;
#endif
}

// std::pow semantics (C99 Annex F) on top of exp/log.
FT pow_g(FT a, FT b) {
  if (b == FT(0) || a == FT(1)) return FT(1);
  if (isnan(a) || isnan(b)) return nan_g();
  if (isinf(b)) {
    FT aa = abs(a);
    if (aa == FT(1)) return FT(1);
    return ((aa > FT(1)) == (b > FT(0))) ? inf_g() : FT(0);
  }
  bool odd = is_odd_integer(b);
  if (a == FT(0) || isinf(a)) {
    bool big = (a == FT(0)) ? (b < FT(0)) : (b > FT(0));
    FT mag = big ? inf_g() : FT(0);
    return (odd && (a < FT(0) || neg_zero(a))) ? -mag : mag;
  }
#ifdef WIDE
  FT r = exp_d(b * log_d(abs(a)));
#else
  FT r = exp2(b * log2(abs(a)));
#endif
  if (a < FT(0)) {
    if (floor(b) != b) return nan_g();
    if (odd) r = -r;
  }
  return r;
}

#ifndef WIDE
float erf_f(float x) {
  float z = abs(x);
  if (z < 0.5) {
    float x2 = x * x;
    return x * 1.1283791670955126 * (1.0 + x2 * (-1.0 / 3.0 + x2 * (0.1 + x2 * (-1.0 / 42.0 + x2 * (1.0 / 216.0)))));
  }
  float t = 1.0 / (1.0 + 0.5 * z);
  float r = t * exp(-z * z - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (-0.18628806 +
            t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277)))))))));
  return x >= 0.0 ? 1.0 - r : r - 1.0;
}

float log1p_f(float x) {
  // Small x: the series (the driver's log near 1 can be off by 1e-7 absolute).
  if (abs(x) < 1e-2) return x * (1.0 + x * (-0.5 + x * (1.0 / 3.0 + x * (-0.25 + x * 0.2))));
  float u = 1.0 + x;
  if (u == 1.0) return x;
  if (isinf(u)) return log(u);
  return log(u) * (x / (u - 1.0));
}

float tanh_f(float x) {
  float z = abs(x);
  if (z < 0.25) {
    float x2 = x * x;
    return x * (1.0 + x2 * (-1.0 / 3.0 + x2 * (2.0 / 15.0 + x2 * (-17.0 / 315.0))));
  }
  float e = exp(-2.0 * z);
  float t = (1.0 - e) / (1.0 + e);
  return x < 0.0 ? -t : t;
}
#endif

// fmod with the divisor's sign (floor-mod), like the CPU backend.
FT rem_g(FT a, FT b) {
  if (isnan(a) || isnan(b) || isinf(a) || b == FT(0)) return nan_g();
  if (isinf(b)) return (a == FT(0) || (a < FT(0)) == (b < FT(0))) ? a : b;
  FT r = a - b * trunc(a / b);
  if (abs(r) >= abs(b)) r = FT(0);
  if (r != FT(0) && ((r < FT(0)) != (b < FT(0)))) r += b;
  return r;
}

// C's fmod: the dividend's sign; a finite dividend over an infinite divisor is itself; a
// zero result takes the dividend's sign (a * 0).
FT fmod_g(FT a, FT b) {
  if (isnan(a) || isnan(b) || isinf(a) || b == FT(0)) return nan_g();
  if (isinf(b)) return a;
  // a - b q in one rounding (exact for the true quotient); a quotient rounded one off is
  // corrected by one |b| toward the dividend's side.
  const FT m = abs(b);
  FT r = fma(-b, trunc(a / b), a);
  if (a >= FT(0)) r = r < FT(0) ? r + m : (r >= m ? r - m : r);
  else r = r > FT(0) ? r - m : (r <= -m ? r + m : r);
  return r == FT(0) ? a * FT(0) : r;
}

#ifdef WIDE
FT unary_g(int op, FT a) {
  switch (op) {
    case EW_RECIP: return FT(1) / a;
    case EW_EXP: return exp_d(a);
    case EW_LOG: return log_d(a);
    case EW_LOG1P: return log1p_d(a);
    case EW_SQRT: return sqrt(a);
    case EW_SIN: return sin_d(a);
    case EW_COS: return cos_d(a);
    case EW_TAN: return tan_d(a);
    case EW_SINH: { FT e = expm1_d(abs(a)); FT r = 0.5LF * (e + e / (e + 1.0LF)); return a < 0.0LF ? -r : r; }
    case EW_COSH: { FT e = exp_d(abs(a)); return 0.5LF * (e + 1.0LF / e); }
    case EW_TANH: { FT e = expm1_d(-2.0LF * abs(a)); FT t = -e / (2.0LF + e); return a < 0.0LF ? -t : t; }
    case EW_ASIN: return abs(a) > 1.0LF ? nan_g() : atan2_d(a, sqrt((1.0LF - a) * (1.0LF + a)));
    case EW_ACOS: return abs(a) > 1.0LF ? nan_g() : atan2_d(sqrt((1.0LF - a) * (1.0LF + a)), a);
    case EW_ATAN: return atan_d(a);
    case EW_ASINH: { FT z = abs(a); FT r = z > 1e150LF ? log_d(z) + kLn2Hi + kLn2Lo : log1p_d(z + z * z / (1.0LF + sqrt(1.0LF + z * z))); return a < 0.0LF ? -r : r; }
    case EW_ACOSH: return a < 1.0LF ? nan_g() : (a > 1e150LF ? log_d(a) + kLn2Hi + kLn2Lo : log1p_d((a - 1.0LF) + sqrt((a - 1.0LF) * (a + 1.0LF))));
    case EW_ATANH: return 0.5LF * log1p_d(2.0LF * a / (1.0LF - a));
    // Half to even from floor: lavapipe's f64 roundEven rounds 1.5 to 1 and -3.5 to -3
    // (Debian 12's Mesa; the op grid caught it). |a| >= 2^52 is already an integer.
    case EW_ROUND: { FT r = floor(a); FT d = a - r; return (d > 0.5LF || (d == 0.5LF && r - 2.0LF * floor(0.5LF * r) != 0.0LF)) ? r + 1.0LF : r; }
    case EW_FLOOR: return floor(a);
    case EW_CEIL: return ceil(a);
    case EW_TRUNC: return trunc(a);
    case EW_ERF: return erf_d(a);
    case EW_ABS: return abs(a);
  }
  return a;
}
#else
FT unary_g(int op, FT a) {
  switch (op) {
    case EW_RECIP: return 1.0 / a;
    case EW_EXP: return exp(a);
    case EW_LOG: return log(a);
    case EW_LOG1P: return log1p_f(a);
    case EW_SQRT: return sqrt(a);
    case EW_SIN: return sin(a);
    case EW_COS: return cos(a);
    case EW_TAN: return tan(a);
    case EW_SINH: return abs(a) < 0.25 ? a * (1.0 + a * a / 6.0 * (1.0 + a * a / 20.0)) : sinh(a);
    case EW_COSH: return cosh(a);
    case EW_TANH: return tanh_f(a);
    // Through atan: some drivers' asin/acos are far less precise (lavapipe: 2e-4).
    case EW_ASIN: return abs(a) > 1.0 ? nan_g() : atan(a, sqrt((1.0 - a) * (1.0 + a)));
    case EW_ACOS: return abs(a) > 1.0 ? nan_g() : atan(sqrt((1.0 - a) * (1.0 + a)), a);
    case EW_ATAN: return atan(a);
    case EW_ASINH: { float z = abs(a); float r = z > 1e18 ? log(z) + 0.6931471805599453 : log1p_f(z + z * z / (1.0 + sqrt(1.0 + z * z))); return a < 0.0 ? -r : r; }
    case EW_ACOSH: return a < 1.0 ? nan_g() : (a > 1e18 ? log(a) + 0.6931471805599453 : log1p_f((a - 1.0) + sqrt((a - 1.0) * (a + 1.0))));
    case EW_ATANH: return 0.5 * log1p_f(2.0 * a / (1.0 - a));
    case EW_ROUND: return roundEven(a);
    case EW_FLOOR: return floor(a);
    case EW_CEIL: return ceil(a);
    case EW_TRUNC: return trunc(a);
    case EW_ERF: return erf_f(a);
    case EW_ABS: return abs(a);
  }
  return a;
}
#endif

FT binary_g(int op, FT a, FT b) {
  switch (op) {
    case EW_ADD: return a + b;
    case EW_SUB: return a - b;
    case EW_MUL: return a * b;
    case EW_DIV: return a / b;
    case EW_REM: return rem_g(a, b);
    case EW_FMOD: return fmod_g(a, b);
    case EW_POW: return pow_g(a, b);
#ifdef WIDE
    case EW_ATAN2: return atan2_d(a, b);
#else
    case EW_ATAN2: return atan(a, b);
#endif
  }
  return a;
}

// Wrapping int arithmetic on 32/64-bit patterns; narrower dtypes truncate on store.
UT binary_i(int op, IT a, IT b, int bits) {
  switch (op) {
    case EW_ADD: return UT(a) + UT(b);
    case EW_SUB: return UT(a) - UT(b);
    case EW_MUL: return UT(a) * UT(b);
    case EW_DIV:
      if (b == IT(0)) return UT(0);
      if (b == IT(-1)) return UT(0) - UT(a);
      return UT(a / b);
    case EW_REM: {
      if (b == IT(0) || b == IT(-1)) return UT(0);
      IT r = a - (a / b) * b;
      if (r != IT(0) && ((r < IT(0)) != (b < IT(0)))) r += b;
      return UT(r);
    }
    case EW_AND: return UT(a & b);
    case EW_OR: return UT(a | b);
    case EW_XOR: return UT(a ^ b);
    case EW_SHL: return (b < IT(0) || b >= IT(bits)) ? UT(0) : (UT(a) << UT(b));
    case EW_SHR: return (b < IT(0) || b >= IT(bits)) ? (a < IT(0) ? ~UT(0) : UT(0)) : UT(a >> UT(b));
  }
  return UT(a);
}
UT binary_u(int op, UT a, UT b, int bits) {
  switch (op) {
    case EW_ADD: return a + b;
    case EW_SUB: return a - b;
    case EW_MUL: return a * b;
    case EW_DIV: return b == UT(0) ? UT(0) : a / b;
    case EW_REM: return b == UT(0) ? UT(0) : a % b;
    case EW_AND: return a & b;
    case EW_OR: return a | b;
    case EW_XOR: return a ^ b;
    case EW_SHL: return b >= UT(bits) ? UT(0) : (a << b);
    case EW_SHR: return b >= UT(bits) ? UT(0) : (a >> b);
  }
  return a;
}

bool compare_f(int op, FT a, FT b) {
  switch (op) {
    case EW_EQ: return a == b;
    case EW_GT: return a > b;
    case EW_GE: return a >= b;
    case EW_LT: return a < b;
    case EW_LE: return a <= b;
    case EW_NE: return !(a == b);
  }
  return false;
}
bool compare_i(int op, IT a, IT b) {
  switch (op) {
    case EW_EQ: return a == b;
    case EW_GT: return a > b;
    case EW_GE: return a >= b;
    case EW_LT: return a < b;
    case EW_LE: return a <= b;
    case EW_NE: return a != b;
  }
  return false;
}
bool compare_u(int op, UT a, UT b) {
  switch (op) {
    case EW_EQ: return a == b;
    case EW_GT: return a > b;
    case EW_GE: return a >= b;
    case EW_LT: return a < b;
    case EW_LE: return a <= b;
    case EW_NE: return a != b;
  }
  return false;
}

// ---- fused ops: the CPU backend's functors and dispatch/defaults/'s compositions
// in one pass (same formulas and constants, computed in FT) ----

// The constants of gelu and of its backward (exact erf form: 1/sqrt 2, 1/sqrt(2 pi)).
#ifdef WIDE
const FT kSqrtHalf = 0.70710678118654752440LF;
const FT kInvSqrt2Pi = 0.39894228040143267794LF;
#else
const FT kSqrtHalf = 0.70710678118654752440;
const FT kInvSqrt2Pi = 0.39894228040143267794;
#endif

// A scalar parameter carried as a compute float (f32 bits; f64 bits in WIDE).
FT scalar_ft(int w) {
#ifdef WIDE
  return packDouble2x32(uvec2(P[w], P[w + 1]));
#else
  return uintBitsToFloat(P[w]);
#endif
}

// Never exponentiates a large positive number: sigmoid(+-MAX) = 1, 0.
FT sigmoid_g(FT a) {
  if (a >= FT(0)) return FT(1) / (FT(1) + unary_g(EW_EXP, -a));
  FT e = unary_g(EW_EXP, a);
  return e / (FT(1) + e);
}

// big * sqrt(1 + (small / max(big, tiny))^2), tiny the compute type's smallest
// normal (halves compute in f32 here, so f16 subnormals keep their precision); a NaN
// operand gives NaN, and so do two infinities (as the default composition does).
FT hypot_g(FT a, FT b) {
  FT aa = abs(a), bb = abs(b);
  bool gt = aa > bb;
  FT big = gt ? aa : bb, small = gt ? bb : aa;
#ifdef WIDE
  FT tiny = 2.2250738585072014e-308LF;
#else
  FT tiny = uintBitsToFloat(0x00800000u);
#endif
  FT safe = tiny > big ? tiny : big;
  FT r = small / safe;
  return big * sqrt(r * r + FT(1));
}

FT fused_unary_f(int op, FT a) {
  switch (op) {
    case EW_NEG: return -a;
    case EW_SQUARE: return a * a;
    case EW_RELU: return a <= FT(0) ? FT(0) : a;  // NaN stays, -0 -> +0
    case EW_GELU: return a * ((unary_g(EW_ERF, a * kSqrtHalf) + FT(1)) * FT(0.5));
    case EW_SIGMOID: return sigmoid_g(a);
    case EW_LOG_SIGMOID: return (a < FT(0) ? a : FT(0)) - unary_g(EW_LOG1P, unary_g(EW_EXP, -abs(a)));
    case EW_LEAKY_RELU: return a < FT(0) ? a * scalar_ft(P_S0) : a;
    case EW_HARD_SIGMOID: {
      FT v = scalar_ft(P_S0) * a + scalar_ft(P_S1);
      return v < FT(0) ? FT(0) : (v > FT(1) ? FT(1) : v);
    }
    case EW_CLAMP_MIN:
    case EW_CLAMP_MAX:
    case EW_CLAMP: {  // lo > v ? lo : v, hi < v ? hi : v: a NaN v stays
      FT v = a;
      if (op != EW_CLAMP_MAX) { FT lo = as_f(scalar_param(P_S0), DTA); v = lo > v ? lo : v; }
      if (op != EW_CLAMP_MIN) { FT hi = as_f(scalar_param(P_S1), DTA); v = hi < v ? hi : v; }
      return v;
    }
    case EW_POW_SCALAR: {  // powi_scalar's shortcuts (x * x, recip), else pow
      FT e = scalar_ft(P_S1);
      if (e == FT(1)) return a;
      if (e == FT(2)) return a * a;
      if (e == FT(-1)) return FT(1) / a;
      if (e == FT(-2)) return FT(1) / (a * a);
      return pow_g(a, e);
    }
  }
  return a;
}

FT fused_binary_f(int op, FT a, FT b) {
  switch (op) {
    case EW_PRELU: return a < FT(0) ? a * b : a;
    case EW_RELU_BWD: return a <= FT(0) ? FT(0) : b;
    case EW_GELU_BWD: {  // exact: Phi(a) + a * phi(a) (NaN for an infinite a, as the default)
      FT cdf = (unary_g(EW_ERF, a * kSqrtHalf) + FT(1)) * FT(0.5);
      FT xpdf = a * (unary_g(EW_EXP, (a * a) * FT(-0.5)) * kInvSqrt2Pi);
      return b * (cdf + xpdf);
    }
    case EW_SIGMOID_BWD: return (a * (FT(1) - a)) * b;
    case EW_LOG_SIGMOID_BWD: return b * sigmoid_g(-a);
    case EW_HYPOT: return hypot_g(a, b);
  }
  return a;
}

// |v| and whether v < 0 for a raw element of an int dtype, by bit operations only
// (a first form through as_i gave zero-extended magnitudes for 8- to 32-bit dtypes in
// the WIDE variant on lavapipe; the cause was not pinned down).
UT int_mag(RAW r, int dt, out bool neg) {
  const int bits = dt_size(dt) * 8;
  r &= mask_of(dt);
  neg = dt_kind(dt) == 1 && ((r >> uint(bits - 1)) & RAW(1)) != RAW(0);
  return UT(neg ? ((~r + RAW(1)) & mask_of(dt)) : r);
}

// Int a ^ (-1)^eneg * eabs as the CPU computes it (an f64 pow, rounded, cast back
// with saturation): exact while the power fits, saturated beyond (1 / 0 too), 0 for
// 1 / a^n with |a| > 1 (at most 1/2, rounds to even 0); a 64-bit power above 2^53
// is the nearest double's value.
RAW powi_int(RAW ra, int dt, bool eneg, UT eabs) {
  const bool sgn = dt_kind(dt) == 1;
  const int bits = dt_size(dt) * 8;
  bool neg;
  const UT mag = int_mag(ra, dt, neg);
  const bool rneg = neg && (eabs & UT(1)) != UT(0);
  const UT maxpos = sgn ? UT(mask_of(dt) >> 1) : UT(mask_of(dt));
  const UT lim = rneg ? maxpos + UT(1) : maxpos;
  UT r = UT(1);
  bool over = false;
  if (eabs == UT(0)) {
    r = UT(1);
  } else if (eneg) {
    if (mag == UT(0)) over = true;
    else if (mag > UT(1)) r = UT(0);
  } else if (mag <= UT(1)) {
    r = mag;
  } else if (eabs >= UT(bits)) {
    over = true;
  } else {
    for (UT k = UT(0); k < eabs && !over; ++k) {
      if (r > lim / mag) over = true;
      else r *= mag;
    }
  }
  if (over) return rneg ? (RAW(1) << uint(bits - 1)) : RAW(maxpos);
#ifdef WIDE
  if (bits == 64 && r > (UT(1) << 53)) {  // to 53 significant bits, ties to even (integer ops: exact)
    uint sh = 0u;
    while ((r >> sh) >= (UT(1) << 53)) ++sh;
    UT q = r >> sh;
    const UT rest = r & ((UT(1) << sh) - UT(1)), half_ = UT(1) << (sh - 1u);
    if (rest > half_ || (rest == half_ && (q & UT(1)) != UT(0))) ++q;
    if ((q << sh) >> sh != q || (sgn && !rneg && (q << sh) > maxpos)) return rneg ? (RAW(1) << 63) : RAW(maxpos);
    r = q << sh;
  }
#endif
  return RAW(rneg ? UT(0) - r : r);
}

RAW fused_unary_int(int op, RAW ra, int kind) {
  switch (op) {
    case EW_NEG: return RAW(0) - ra;  // wraps (the store keeps the dtype's bits)
    case EW_SQUARE: return ra * ra;
    case EW_SIGN:
      if (kind == 2) return ra != RAW(0) ? RAW(1) : RAW(0);
      return as_i(ra, DTA) > IT(0) ? RAW(1) : (as_i(ra, DTA) < IT(0) ? ~RAW(0) : RAW(0));
    case EW_CLAMP_MIN:
    case EW_CLAMP_MAX:
    case EW_CLAMP:
      if (kind == 1) {
        IT v = as_i(ra, DTA);
        if (op != EW_CLAMP_MAX) { IT lo = as_i(scalar_param(P_S0), DTA); v = lo > v ? lo : v; }
        if (op != EW_CLAMP_MIN) { IT hi = as_i(scalar_param(P_S1), DTA); v = hi < v ? hi : v; }
        return RAW(UT(v));
      } else {
        UT v = as_u(ra, DTA);
        if (op != EW_CLAMP_MAX) { UT lo = as_u(scalar_param(P_S0), DTA); v = lo > v ? lo : v; }
        if (op != EW_CLAMP_MIN) { UT hi = as_u(scalar_param(P_S1), DTA); v = hi < v ? hi : v; }
        return RAW(v);
      }
    case EW_POW_SCALAR: {  // s0: the exponent as an int of the variant's width
      bool eneg;
#ifdef WIDE
      const UT eabs = int_mag(scalar_param(P_S0), DT_I64, eneg);
#else
      const UT eabs = int_mag(scalar_param(P_S0), DT_I32, eneg);
#endif
      return powi_int(ra, DTA, eneg, eabs);
    }
  }
  return ra;
}

int index_of(int k, int i) {
  if (CONTIG == 1) return int(P[P_OPND + 9 * k]) + i;
  if (CONTIG >= 2) return k > 0 && ((CONTIG - 2) >> (k - 1) & 1) != 0 ? int(P[P_OPND + 9 * k]) : int(P[P_OPND + 9 * k]) + i;
  return operand_index_in(k, i);
}

#ifdef PROGRAM
// The op set is graph.cpp's fusable_op: the f32 forms of the eager main below, the same
// functions, so a fused run computes what its dispatches compute one by one. `op` is a
// constant at every call (OPKj), so each call folds to one op's code.
float apply(int op, float a, float b) {
  if (op == EW_COPY) return a;
  if (op >= EW_RECIP) return op >= EW_NEG ? fused_unary_f(op, a) : unary_g(op, a);
  return op >= EW_PRELU ? fused_binary_f(op, a, b) : binary_g(op, a, b);
}

void main() {
  int i = global_linear_id(LOCAL);
  if (i >= int(P[0])) return;
  const uint count = P[1];
  for (uint k = 0u; k < count; ++k) {
    const uint w = 2u + 8u * k;
    const uint op = P[w];
    const uint fl = P[w + 1u];
    const float a = uintBitsToFloat(ld_slot(P[w + 4u], int(P[w + 5u]) + ((fl & 2u) != 0u ? 0 : i)));
    float b = 0.0;
    if ((fl & 8u) != 0u)
      b = (fl & 1u) != 0u ? uintBitsToFloat(P[w + 7u])
                          : uintBitsToFloat(ld_slot(P[w + 6u], int(P[w + 7u]) + ((fl & 4u) != 0u ? 0 : i)));
    float r = a;
    if (OPK0 >= 0 && op == 0u) r = apply(OPK0, a, b);
    else if (OPK1 >= 0 && op == 1u) r = apply(OPK1, a, b);
    else if (OPK2 >= 0 && op == 2u) r = apply(OPK2, a, b);
    else if (OPK3 >= 0 && op == 3u) r = apply(OPK3, a, b);
    else if (OPK4 >= 0 && op == 4u) r = apply(OPK4, a, b);
    else if (OPK5 >= 0 && op == 5u) r = apply(OPK5, a, b);
    else if (OPK6 >= 0 && op == 6u) r = apply(OPK6, a, b);
    else if (OPK7 >= 0 && op == 7u) r = apply(OPK7, a, b);
    st_slot(P[w + 2u], int(P[w + 3u]) + i, floatBitsToUint(r));
  }
}
#else
void main() {
  int i = global_linear_id(LOCAL);
  if (i >= int(P[P_N])) return;
  int io = index_of(0, i);
  if (OP == EW_FILL) {
    st_o(DTO, io, scalar_param(P_S0) & mask_of(DTO));
    return;
  }
  int ia = index_of(1, i);
  RAW ra = ld_a(DTA, ia);
  RAW rb = RAW(0);
  if (OP >= EW_ADD && OP < EW_RECIP) rb = BSCALAR != 0 ? scalar_param(P_S0) : ld_b(DTB, index_of(2, i));
  RAW r;
  const int kind = dt_kind(DTA);
  const int bits = dt_size(DTA) * 8;
  if (OP == EW_COPY) {
    r = convert_raw(ra, DTA, DTO);
  } else if (OP == EW_MASK_FILL) {
    r = (rb & mask_of(DTB)) != RAW(0) ? scalar_param(P_S1) : ra;
  } else if (OP == EW_MASK_WHERE) {
    r = (rb & mask_of(DTB)) != RAW(0) ? ld_c(DTA, index_of(3, i)) : ra;
  } else if (OP == EW_BOOL_AND) {
    r = (ra != RAW(0) && rb != RAW(0)) ? RAW(1) : RAW(0);
  } else if (OP == EW_BOOL_OR) {
    r = (ra != RAW(0) || rb != RAW(0)) ? RAW(1) : RAW(0);
  } else if (OP == EW_BOOL_XOR) {
    r = ((ra != RAW(0)) != (rb != RAW(0))) ? RAW(1) : RAW(0);
  } else if (OP == EW_BOOL_NOT) {
    r = ra == RAW(0) ? RAW(1) : RAW(0);
  } else if (OP >= EW_EQ && OP <= EW_NE) {
    bool c;
    if (kind == 0) c = compare_f(OP, as_f(ra, DTA), as_f(rb, DTA));
    else if (kind == 1) c = compare_i(OP, as_i(ra, DTA), as_i(rb, DTA));
    else c = compare_u(OP, as_u(ra, DTA), as_u(rb, DTA));
    r = c ? RAW(1) : RAW(0);
  } else if (OP == EW_IS_NAN || OP == EW_IS_INF) {
    FT v = as_f(ra, DTA);
    r = (OP == EW_IS_NAN ? isnan(v) : isinf(v)) ? RAW(1) : RAW(0);
  } else if (OP == EW_POWI) {
    if (kind == 0) {
      r = from_f(pow_g(as_f(ra, DTA), as_f(convert_raw(rb, DTB, DTA), DTA)), DTA);
    } else {
      bool eneg;
      const UT eabs = int_mag(rb, DTB, eneg);
      r = powi_int(ra, DTA, eneg, eabs);
    }
  } else if (OP >= EW_RECIP) {
    if (kind == 0 && OP == EW_SIGN) {  // built as raw bits: +0 for NaN and +-0 (lavapipe folds the float select into an fsign giving -0)
      FT v = as_f(ra, DTA);
      const RAW one = from_f(FT(1), DTA), sbit = one ^ from_f(FT(-1), DTA);
      r = (v > FT(0) || v < FT(0)) ? (one | (v < FT(0) ? sbit : RAW(0))) : RAW(0);
    } else if (kind == 0) r = from_f(OP >= EW_NEG ? fused_unary_f(OP, as_f(ra, DTA)) : unary_g(OP, as_f(ra, DTA)), DTA);
    else if (OP >= EW_NEG) r = fused_unary_int(OP, ra, kind);
    else if (OP == EW_NOT) r = ~ra;
    else if (OP == EW_ABS && kind == 1) { IT v = as_i(ra, DTA); r = RAW(v < IT(0) ? UT(0) - UT(v) : UT(v)); }
    else r = ra;
  } else {
    if (kind == 0) r = from_f(OP >= EW_PRELU ? fused_binary_f(OP, as_f(ra, DTA), as_f(rb, DTA)) : binary_g(OP, as_f(ra, DTA), as_f(rb, DTA)), DTA);
    else if (kind == 1) r = RAW(binary_i(OP, as_i(ra, DTA), as_i(rb, DTA), bits));
    else r = RAW(binary_u(OP, as_u(ra, DTA), as_u(rb, DTA), bits));
  }
  st_o(DTO, io, r & mask_of(DTO));
}
#endif
