// Op and dtype codes shared by the GLSL shaders and the C++ side (plain #defines so
// both languages can include it). Dtype codes are tensor::DType's values.
#ifndef TENSOR_VK_CODES_H
#define TENSOR_VK_CODES_H

#define DT_F64 0
#define DT_F32 1
#define DT_F16 2
#define DT_BF16 3
#define DT_I64 4
#define DT_I32 5
#define DT_I16 6
#define DT_I8 7
#define DT_U64 8
#define DT_U32 9
#define DT_U16 10
#define DT_U8 11
#define DT_BOOL 12
#define DT_BOOLU8 13
#define DT_BOOLU32 14

// Elementwise family (elementwise.comp). Operands: out, a, b, c.
#define EW_COPY 0      // out = cast(a) (also a plain strided copy when dtypes match)
#define EW_ADD 1
#define EW_SUB 2
#define EW_MUL 3
#define EW_DIV 4
#define EW_REM 5
#define EW_POW 6
#define EW_ATAN2 7
#define EW_AND 8       // bitwise (ints)
#define EW_OR 9
#define EW_XOR 10
#define EW_SHL 11
#define EW_SHR 12
#define EW_BOOL_AND 13
#define EW_BOOL_OR 14
#define EW_BOOL_XOR 15
#define EW_FMOD 16      // C's fmod (floats only)
#define EW_EQ 20       // comparisons write the out bool dtype
#define EW_GT 21
#define EW_GE 22
#define EW_LT 23
#define EW_LE 24
#define EW_NE 25       // !(a == b): NaN != NaN
#define EW_FILL 29        // out = the scalar s0 (full/zeros/ones)
#define EW_MASK_FILL 30   // b = mask, scalar s0
#define EW_MASK_WHERE 31  // b = mask, c = value
// Fused binary ops (one pass instead of dispatch/defaults/'s compositions).
#define EW_PRELU 32             // a < 0 ? a * b : a
#define EW_RELU_BWD 33          // a = relu output, b = grad
#define EW_GELU_BWD 34          // a = x, b = grad (tanh form, the default's constants)
#define EW_SIGMOID_BWD 35       // a = sigmoid output, b = grad
#define EW_LOG_SIGMOID_BWD 36   // a = x, b = grad
#define EW_HYPOT 37
#define EW_POWI 38              // b = int exponent tensor (dtype DTB)
#define EW_RECIP 40       // unary from here on
#define EW_EXP 41
#define EW_LOG 42
#define EW_LOG1P 43
#define EW_SQRT 44
#define EW_SIN 45
#define EW_COS 46
#define EW_TAN 47
#define EW_SINH 48
#define EW_COSH 49
#define EW_TANH 50
#define EW_ASIN 51
#define EW_ACOS 52
#define EW_ATAN 53
#define EW_ASINH 54
#define EW_ACOSH 55
#define EW_ATANH 56
#define EW_ROUND 57
#define EW_FLOOR 58
#define EW_CEIL 59
#define EW_TRUNC 60
#define EW_ERF 61
#define EW_ABS 62
#define EW_NOT 63         // bitwise not (ints)
#define EW_BOOL_NOT 64
#define EW_NEG 65         // ints wrap
#define EW_SIGN 66
#define EW_SQUARE 67      // ints wrap
#define EW_RELU 68
#define EW_GELU 69        // erf form
#define EW_SIGMOID 70
#define EW_LOG_SIGMOID 71
#define EW_LEAKY_RELU 72  // s0: slope as a compute float (f32, f64 in WIDE)
#define EW_HARD_SIGMOID 73  // s0 alpha, s1 beta as compute floats
#define EW_CLAMP_MIN 74   // s0: lo, an element of DTA
#define EW_CLAMP_MAX 75   // s1: hi, an element of DTA
#define EW_CLAMP 76       // s0 lo, s1 hi
#define EW_POW_SCALAR 77  // floats: a ^ s1 (compute float); ints: a ^ s0 (int, saturating)
#define EW_IS_NAN 78      // write the out bool dtype
#define EW_IS_INF 79

// Reduction family (reduce.comp).
#define RD_SUM 0
#define RD_PROD 1
#define RD_MEAN 2
#define RD_ARGMAX 3
#define RD_ARGMIN 4
#define RD_MAX_ABS 5   // arg-style reduction of |a| (ints wrap: |MIN| = MIN)
#define RD_ANY 6       // any / all nonzero (NaN is nonzero) into the bool dtype DTO
#define RD_ALL 7
// What an arg-style reduction (ARGMAX, ARGMIN, MAX_ABS) writes (extra word 4).
#define RD_OUT_INDEX 0 // the index to o in DTO
#define RD_OUT_PAIRS 1 // split pass 1: the value to o (DTA), the index to x (u32)
#define RD_OUT_VALUE 2 // the value to o (DTA)
#define RD_OUT_BOTH 3  // the value to o (DTA), the index to x (DTO)
// Specialization constant id of the subgroup size (the SUBGROUP reduce / rows variants).
#define SPEC_SUBGROUP 8

// Scan family (scan.comp).
#define SC_CUMSUM 0
#define SC_CUMPROD 1
#define SC_CUMMAX 2
#define SC_CUMMIN 3

// Index family (index.comp).
#define IX_GATHER 0
#define IX_SELECT 1
#define IX_SCATTER_ADD 2   // one invocation per line along dim; values accumulate into out
#define IX_SELECT_ADD 3
// Update rules of the accumulating index ops (extra parameter word 6 of index.comp);
// tensor::IndexingUpdateOp's order, then Or (bool scatter_or / select_or).
#define UPD_ASSIGN 0
#define UPD_ADD 1
#define UPD_MUL 2
#define UPD_MIN 3
#define UPD_MAX 4
#define UPD_OR 5

// Rows family (rows.comp): one workgroup per line along a dim (softmax, sort), or
// one invocation per line (cross).
#define RW_SOFTMAX 0
#define RW_LOG_SOFTMAX 1
#define RW_SORT 2          // bitonic sort of a line in shared memory, (value, index) keys
#define RW_CROSS 3
#define RW_SORT_CAP 1024   // longest line the shared-memory sort takes
// Longer lines: a bitonic network over global scratch (keys in the data dtype,
// indices u32, each line padded to a power of two), one dispatch per stage.
#define RW_GSORT_INIT 4
#define RW_GSORT_STEP 5
#define RW_GSORT_OUT 6
#define RW_SOFTMIN 7        // softmax of -a (one pass instead of neg + softmax)

// Quant family (quant.comp, narrow only; spec constant 0 the mode, 1 the float dtype of x
// or of the output). Codes are i8 (one per element), scales f32 (one per block).
#define QT_DEQUANTIZE 0  // out (float) = f32(code) * scale[block]
#define QT_QUANTIZE 1    // codes = clamp(round_away(x * inv[block]), lo, hi)
#define QT_MATMUL 2      // out = x [.., M, K] x dequantized weight [K, N], 64x64 tiles
#define QT_GEMV 3        // the same, one row per workgroup (M small)

// Parameter block layout (uint words) of the strided families.
#define P_N 0
#define P_RANK 1
#define P_SHAPE 2          // 8 words
#define P_OPND 10          // operand k at P_OPND + 9k: offset, 8 strides
#define P_S0 46            // scalar 0 (raw bits, 2 words)
#define P_S1 48
#define P_EXTRA 50         // family-specific words
#define P_ERR 63           // index family: this dispatch's slot in the error-flag buffer
#define P_WORDS 64

#ifdef __cplusplus
// The op table rows (dispatch/table/op_table.def) served by one elementwise code each, on
// the entry their family implies (Unary, Binary/PowI, Scalar, Compare, CompareScalar,
// Predicate: ops/elementwise.cpp registers them in one loop over the op table). A new
// op of these families: its EW_ code above, its shader case, and a row here.
#define TENSOR_VK_EW_OPS(X) \
  X(equal, EW_EQ) X(greater, EW_GT) X(greater_equal, EW_GE) X(lower, EW_LT) X(lower_equal, EW_LE)               \
  X(equal_elem, EW_EQ) X(greater_elem, EW_GT) X(greater_equal_elem, EW_GE) X(lower_elem, EW_LT)                 \
  X(lower_equal_elem, EW_LE) X(add, EW_ADD) X(sub, EW_SUB) X(mul, EW_MUL) X(div, EW_DIV) X(remainder, EW_REM)   \
  X(fmod, EW_FMOD) X(fmod_scalar, EW_FMOD)                                                                      \
  X(powf, EW_POW) X(atan2, EW_ATAN2) X(add_scalar, EW_ADD) X(sub_scalar, EW_SUB) X(mul_scalar, EW_MUL)          \
  X(div_scalar, EW_DIV) X(remainder_scalar, EW_REM) X(recip, EW_RECIP) X(sqrt, EW_SQRT) X(exp, EW_EXP)          \
  X(log, EW_LOG) X(log1p, EW_LOG1P) X(abs, EW_ABS) X(cos, EW_COS) X(sin, EW_SIN) X(tan, EW_TAN)                 \
  X(cosh, EW_COSH) X(sinh, EW_SINH) X(tanh, EW_TANH) X(acos, EW_ACOS) X(acosh, EW_ACOSH) X(asin, EW_ASIN)       \
  X(asinh, EW_ASINH) X(atan, EW_ATAN) X(atanh, EW_ATANH) X(round, EW_ROUND) X(floor, EW_FLOOR) X(ceil, EW_CEIL) \
  X(trunc, EW_TRUNC) X(erf, EW_ERF) X(bitwise_and, EW_AND) X(bitwise_or, EW_OR) X(bitwise_xor, EW_XOR)          \
  X(bitwise_left_shift, EW_SHL) X(bitwise_right_shift, EW_SHR) X(bitwise_and_scalar, EW_AND)                    \
  X(bitwise_or_scalar, EW_OR) X(bitwise_xor_scalar, EW_XOR) X(bitwise_left_shift_scalar, EW_SHL)                \
  X(bitwise_right_shift_scalar, EW_SHR) X(bitwise_not, EW_NOT) X(bool_not, EW_BOOL_NOT)                         \
  X(bool_and, EW_BOOL_AND) X(bool_or, EW_BOOL_OR) X(not_equal, EW_NE) X(not_equal_elem, EW_NE)                  \
  X(is_nan, EW_IS_NAN) X(is_inf, EW_IS_INF) X(bool_xor, EW_BOOL_XOR) X(neg, EW_NEG) X(sign, EW_SIGN)            \
  X(square, EW_SQUARE) X(hypot, EW_HYPOT) X(powi, EW_POWI) X(relu, EW_RELU) X(prelu, EW_PRELU) X(gelu, EW_GELU) \
  X(sigmoid, EW_SIGMOID) X(log_sigmoid, EW_LOG_SIGMOID) X(relu_backward, EW_RELU_BWD)                           \
  X(gelu_backward, EW_GELU_BWD) X(sigmoid_backward, EW_SIGMOID_BWD) X(log_sigmoid_backward, EW_LOG_SIGMOID_BWD)
#endif

#endif
