// The fused q8 GEMV / small-M GEMM of q_matmul (backends/cpu/quant_q8.cpp): x f32 [M, K]
// times a weight [K, N] of 8-bit codes (Q8S or Q8F) with one scale per output column or one
// for the tensor, for M <= kQ8MaxRows on CPUs with AVX512-VNNI. x's rows are quantized as
// the oneDNN route quantizes them (one scale per row, a = max |x| / 127, codes rounded to
// the nearest, ties to even: simd::quantize_s8); the weight is repacked once for dpbusd and
// kept with it (quant_internal.hpp's MatmulWeightCache). docs/quantization.md § "The q8
// GEMV" has the layout and the figures.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace tensor::dispatch::quant {
class QuantPrim;
}

namespace tensor::cpu::qdetail {

// Rows of x up to which the fused kernel is the route (above: oneDNN's int8 matmul) ...
inline constexpr std::int64_t kQ8MaxRows = 16;
// ... and where oneDNN's int8 matmul runs on AMX-INT8 tiles, which is faster from 4 rows
// (K = N = 4096, Xeon with AMX, 1 and 2 threads: 0.62 against 0.82 ms at M = 3, 1.04
// against 0.83 at M = 4, 1.24 against 0.84 at M = 8; docs/quantization.md).
inline constexpr std::int64_t kQ8MaxRowsAmx = 3;
// Columns per packed panel (four 512-bit vectors of 16 i32 lanes).
inline constexpr std::int64_t kQ8Panel = 64;
// The largest K whose integer sums are exact in i32: the dpbusd sum is sum (a + 128) * c
// with a + 128 in [0, 255] and |c| <= 128, so |sum| <= K * 255 * 128 < 2^31.
inline constexpr std::int64_t kQ8MaxK = (std::int64_t{1} << 31) / (255 * 128) - 1;

// The weight for dpbusd: per panel p of 64 columns (the last padded with zero codes), per
// quad q of 4 consecutive rows of K (K padded to a multiple of 4 with zero codes), 256
// bytes: byte 64 v + 4 l + i holds code[4 q + i][64 p + 16 v + l] (the s8 operand; lane l of
// vector v sums 4 consecutive k). comp[64 p + c] = 128 * (the sum of column c's codes): the
// activation's codes go in shifted by 128 (the u8 operand), which adds 128 * the column sum
// to each lane's sum. scale[64 p + c]: the column's scale (the tensor's, repeated, per tensor).
struct Q8Pack {
  std::int64_t k = 0, n = 0, quads = 0, panels = 0;
  std::vector<std::int8_t> codes;
  std::vector<std::int32_t> comp;
  std::vector<float> scale;
};

// Whether w is a weight the fused kernel takes (scheme, shape and K only, nothing read).
bool q8_fits(const dispatch::quant::QuantPrim& w);
// Packs w; nullptr where it does not fit.
std::shared_ptr<const Q8Pack> make_q8_pack(const dispatch::quant::QuantPrim& w);
// Whether this CPU runs the fused kernel (AVX512-VNNI, x86-64), and m rows take it (m up to
// q8_max_rows()).
bool q8_route_for(std::int64_t m);
// The row limit on this machine: kQ8MaxRowsAmx where int8_amx_live(), else kQ8MaxRows, or
// what q8_set_max_rows set.
std::int64_t q8_max_rows();
// Tests: the limit (1..kQ8MaxRows) whatever the CPU, so the kernel's row tiles are checked on
// every machine; 0 returns to the machine's limit.
void q8_set_max_rows(std::int64_t rows);
// Whether oneDNN's int8 products run on AMX-INT8 here (its effective ISA, which
// ONEDNN_MAX_CPU_ISA can lower; quant.cpp; false without oneDNN).
bool int8_amx_live();
// Tests and the bench: turn the fused route off (true: oneDNN's route for every M) or on.
void q8_disable(bool off);
// out [m, n] = x [m, k] (f32, dense) times the packed weight; false (nothing written that
// matters) where a row of x has a NaN or an infinity (no int8 code) or the CPU lacks VNNI.
// `route` gets the kernel's name.
bool q8_product(const Q8Pack& p, const float* x, std::int64_t m, float* out, std::string& route);

}  // namespace tensor::cpu::qdetail
