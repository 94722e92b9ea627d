// Op codes and parameter words of the module family (module.comp, ops/pool_norm.cpp):
// plain #defines so GLSL and C++ both include it.
#ifndef TENSOR_VK_MODULE_CODES_H
#define TENSOR_VK_MODULE_CODES_H

// Ops (specialization constant 0).
#define MD_MAX_POOL 0       // values to O, flat argmax indices to X when MP_FLAGS has MD_WITH_INDICES
#define MD_MAX_POOL_BWD 1   // A = dy, B = indices: one invocation per dx element
#define MD_AVG_POOL 2
#define MD_AVG_POOL_BWD 3   // A = dy
#define MD_ADAPTIVE 4
#define MD_ADAPTIVE_BWD 5   // A = dy
#define MD_INTERP 6
#define MD_INTERP_BWD 7     // A = dy
#define MD_LAYER_NORM 8     // one workgroup per row; A = x, B = gamma, X = beta (read only)
#define MD_MAX_POOL_CHECK 9 // B = indices: one invocation per output; flags an index that is not
                            // -1 or a tap of its own window (X = the error buffer, slot P_ERR)

// Flags (word MP_FLAGS).
#define MD_COUNT_PAD 1      // avg pool: count_include_pad
#define MD_WITH_INDICES 2   // max pool: write the indices
#define MD_ALIGN 4          // interpolate: align_corners
#define MD_MODE_SHIFT 4     // interpolate: tensor::nn::InterpolateMode in bits 4..5

// Parameter words of the pool and interpolate ops: three spatial dims (1-d and 2-d put
// size-1 dims first), planes = N * C. Operand A (x or dy) and B (indices) are read
// through their strides: offset, n, c, then the three spatial strides. The output is
// contiguous [planes, *spatial]; `in` is always the pooled input's size, `out` the
// pooled output's.
#define MP_N 0              // invocations (output elements)
#define MP_C 1
#define MP_IN 2             // 3 words
#define MP_OUT 5            // 3 words
#define MP_K 8              // kernel, 3 words
#define MP_S 11             // stride
#define MP_P 14             // padding
#define MP_D 17             // dilation
#define MP_FLAGS 20
#define MP_A 21             // offset, sn, sc, s0, s1, s2
#define MP_B 27             // the same for operand B

// layer_norm (with common.glsl's P_* layout for the rows of x: P_SHAPE the row space,
// operand 0 = x): extra words.
#define LN_D 0              // row length
#define LN_XSTRIDE 1        // x's stride along the row
#define LN_G 2              // gamma offset, stride
#define LN_B 4              // beta offset, stride; LN_HAS_BETA flag
#define LN_HAS_BETA 6
#define LN_EPS 7            // eps as f32 bits (narrow); P_S0 holds it as f64 bits (WIDE)

#endif
