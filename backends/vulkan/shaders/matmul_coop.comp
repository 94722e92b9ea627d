// Cooperative-matrix f16 matmul (VK_NV_cooperative_matrix; see runtime/features.hpp for
// why NV and not KHR): C[b] = A[b] x B[b] with A, B f16 and C accumulated in f32.
// The host pads A to [batch, M, K] and B to [batch, K, N] (dense, every size a
// multiple of 16, zeros outside the data) and rounds C to f16 afterwards. One
// workgroup is one 32-wide subgroup computing a 32x32 block of C as 2x2 tiles of
// 16x16, stepping K by 16 with tiles loaded straight from the buffers.
#version 450
#extension GL_NV_cooperative_matrix : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_shader_16bit_storage : require
#extension GL_KHR_memory_scope_semantics : require

layout(local_size_x = 32) in;

// Params: M, N, K (padded), then the batch strides (elements) of A, B and C.
layout(std430, set = 0, binding = 0) readonly buffer Params { uint P[]; };
layout(std430, set = 0, binding = 1) readonly buffer A { float16_t a[]; };
layout(std430, set = 0, binding = 2) readonly buffer B { float16_t b[]; };
layout(std430, set = 0, binding = 4) writeonly buffer O { float o[]; };

#define Tile16 fcoopmatNV<16, gl_ScopeSubgroup, 16, 16>
#define Tile32 fcoopmatNV<32, gl_ScopeSubgroup, 16, 16>

void main() {
  uint M = P[0], N = P[1], K = P[2];
  uint r0 = gl_WorkGroupID.y * 32u, c0 = gl_WorkGroupID.x * 32u;
  // The second row/column tile; at the edge (a 16-wide remainder) it repeats the first
  // and is not stored.
  uint r1 = min(r0 + 16u, M - 16u), c1 = min(c0 + 16u, N - 16u);
  uint ab = gl_WorkGroupID.z * P[3], bb = gl_WorkGroupID.z * P[4], ob = gl_WorkGroupID.z * P[5];
  Tile32 c00 = Tile32(0.0), c01 = Tile32(0.0), c10 = Tile32(0.0), c11 = Tile32(0.0);
  for (uint k = 0u; k < K; k += 16u) {
    Tile16 a0, a1, b0, b1;
    coopMatLoadNV(a0, a, ab + r0 * K + k, K, false);
    coopMatLoadNV(a1, a, ab + r1 * K + k, K, false);
    coopMatLoadNV(b0, b, bb + k * N + c0, N, false);
    coopMatLoadNV(b1, b, bb + k * N + c1, N, false);
    c00 = coopMatMulAddNV(a0, b0, c00);
    c01 = coopMatMulAddNV(a0, b1, c01);
    c10 = coopMatMulAddNV(a1, b0, c10);
    c11 = coopMatMulAddNV(a1, b1, c11);
  }
  coopMatStoreNV(c00, o, ob + r0 * N + c0, N, false);
  if (c1 != c0) coopMatStoreNV(c01, o, ob + r0 * N + c1, N, false);
  if (r1 != r0) coopMatStoreNV(c10, o, ob + r1 * N + c0, N, false);
  if (r1 != r0 && c1 != c0) coopMatStoreNV(c11, o, ob + r1 * N + c1, N, false);
}
