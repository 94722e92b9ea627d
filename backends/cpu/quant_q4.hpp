// The fused weight-only 4-bit GEMV / small-M GEMM of q_matmul (backends/cpu/quant_q4.cpp):
// x f32 [M, K] times a weight [K, N] of 4-bit (or 2-bit) codes with one scale per 32 codes
// along K of each column (block [32, 1]). The weight is repacked once into nibbles and kept
// with it (QuantPrim::cache, quant_internal.hpp's MatmulWeightCache); each 32-block of a
// row of x is quantized to s8 with its own scale; the products are int8 dot products
// (AVX512-VNNI dpbusd where the CPU has it, a portable loop elsewhere on x86-64) scaled and
// accumulated in f32. docs/quantization.md § "The q4 GEMV" has the layout.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace tensor::dispatch::quant {
class QuantPrim;
}

namespace tensor::cpu::qdetail {

// Rows of x up to which the portable kernel (x86-64 without AVX512-VNNI) is the fused
// route; above, and on other CPUs, the panel route. With AVX512-VNNI the fused route takes
// every M where N >= 16 (1.6-3.4x the f32 product at M = 16..512, K = N = 4096:
// docs/quantization.md).
inline constexpr std::int64_t kQ4PortableMaxRows = 16;
// The panel route: K-panels of kQ4PanelK rows (a multiple of 32) by kQ4PanelGroups groups
// of 16 columns dequantized from the pack into a per-thread f32 buffer (512 KiB) and fed to
// the single-threaded f32 GEMM (gemm.hpp's sgemm), accumulating into out panel by panel.
inline constexpr std::int64_t kQ4PanelK = 512, kQ4PanelGroups = 16;
// Columns per packed group (one 512-bit vector of i32 lanes) and codes per block.
inline constexpr std::int64_t kQ4Cols = 16, kQ4Block = 32;

// The weight in nibbles: per group g of 16 columns (the last padded with zero codes), per
// block b of 32 rows of K, 256 bytes: byte t * 64 + 4 * l + i (t < 4, lane l < 16, i < 4)
// holds code[32 b + 4 t + i][16 g + l] + 8 in its low nibble and code[32 b + 4 (t + 4) + i]
// [16 g + l] + 8 in its high nibble (dpbusd's u8 operand for lanes of 4 consecutive k).
// Scales [groups][nb][16] as f32, and as f16 bits where every scale is an f16 exactly.
struct Q4Pack {
  std::int64_t k = 0, n = 0, nb = 0, groups = 0;
  std::vector<std::uint8_t> codes;
  std::vector<float> s32;
  std::vector<std::uint16_t> s16;  // empty unless every scale round-trips through f16
  std::size_t bytes_read() const;  // codes + the scales the kernel reads
};

// Packs w (codes in [-8, 7], block [32, 1], K a multiple of 32); nullptr where it does not fit.
std::shared_ptr<const Q4Pack> make_q4_pack(const dispatch::quant::QuantPrim& w);
// Whether w is a weight the fused kernel takes (the scheme only, nothing read).
bool q4_fits(const dispatch::quant::QuantPrim& w);

// out [m, n] = x [m, k] times the packed weight, on the route q4_route_for(m) names; where
// the fused route meets a row of x with a NaN or an infinity (no int8 code) the panels take
// it (NaN where it reaches, as the dequantize route). `route` gets the kernel's name. Always true.
bool q4_product(const Q4Pack& p, const float* x, std::int64_t m, float* out, std::string& route);
// "fused" or "panels": the route q4_product takes for x [m, k] times [k, n] on this CPU
// (after q4_force_portable): fused for m <= kQ4PortableMaxRows on x86-64, and above with
// AVX512-VNNI where n >= 16; the panels otherwise.
const char* q4_route_for(std::int64_t m, std::int64_t n);
// The panel route alone (quant_q4_panel.cpp): f32 products, the weight never whole in f32.
void panel_product(const Q4Pack& p, const float* x, std::int64_t m, float* out);

// The fused kernel the CPU's flags choose: "avx512-vnni" or "portable" (x86-64), "" elsewhere.
const char* q4_kernel();
// Tests: force the portable kernel (true) or the CPU's choice (false).
void q4_force_portable(bool on);

}  // namespace tensor::cpu::qdetail
