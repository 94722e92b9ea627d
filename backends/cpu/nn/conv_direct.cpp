// Direct f32 convolution for few input channels (see conv_direct.hpp).
#include "backends/cpu/nn/conv_direct.hpp"

#include <algorithm>
#include <cstring>
#include <vector>

#include "backends/cpu/conv_hwy.hpp"
#include "backends/cpu/nn/nn_gemm.hpp"
#include "backends/cpu/parallel.hpp"
#include "backends/cpu/pool_hwy.hpp"

namespace tensor::cpu::nn {
namespace {

using I = std::int64_t;

constexpr std::size_t kMaxCin = 4, kMaxKernel = 7;
constexpr I kMaxStep = 4;

// Below this many multiply-adds in all, threads cost more than they save (as conv.cpp).
constexpr double kThreadsWork = 64.0 * 64.0 * 64.0;

// Input rows [r0, r1) of the padded plane (row r is input row r - padding) of every channel
// of one sample, split by column phase: dst[c][p][r - r0][m] = padded[c][r][m*sw + p], zero
// outside the input and in each row's tail up to row_len.
void prepare(const ConvGeom& g, const float* xs, std::size_t r0, std::size_t r1, std::size_t row_len, float* dst) {
  const std::size_t sw = static_cast<std::size_t>(g.stride[2]), in_h = g.in[1], in_w = g.in[2];
  const I ph = g.padding[1], pw = g.padding[2];
  const std::size_t rows = r1 - r0;
  for (std::size_t c = 0; c < g.c_in; ++c)
    for (std::size_t p = 0; p < sw; ++p)
      for (std::size_t r = r0; r < r1; ++r) {
        float* d = dst + ((c * sw + p) * rows + (r - r0)) * row_len;
        const I src_row = static_cast<I>(r) - ph;
        if (src_row < 0 || src_row >= static_cast<I>(in_h)) {
          std::fill(d, d + row_len, 0.0f);
          continue;
        }
        const float* s = xs + (c * in_h + static_cast<std::size_t>(src_row)) * in_w;
        if (sw == 1) {  // pw zeros, the row, zeros to row_len (pw <= the kernel's extent < row_len)
          const auto left = static_cast<std::size_t>(pw), n = std::min(in_w, row_len - left);
          std::fill(d, d + left, 0.0f);
          std::memcpy(d + left, s, n * sizeof(float));
          std::fill(d + left + n, d + row_len, 0.0f);
          continue;
        }
        // m covers input column m*sw + p - pw when that lies in [0, in_w)
        for (std::size_t m = 0; m < row_len; ++m) {
          const I col = static_cast<I>(m * sw + p) - pw;
          d[m] = col >= 0 && col < static_cast<I>(in_w) ? s[col] : 0.0f;
        }
      }
}

}  // namespace

bool direct_small_cin_supported(const ConvGeom& g) {
  if (g.groups != 1 || g.c_in == 0 || g.c_in > kMaxCin || g.c_out == 0) return false;
  if (g.in[0] != 1 || g.kernel[0] != 1 || g.out[0] != 1) return false;  // 3-d
  if (g.kernel[1] > kMaxKernel || g.kernel[2] > kMaxKernel || g.kernel[1] == 0 || g.kernel[2] == 0) return false;
  if (g.c_in * g.kernel[1] * g.kernel[2] > simd::kConvRowsMaxTaps) return false;
  // The prepared copy has stride_w phase planes and covers the padded rows: strides and
  // dilations up to kMaxStep, padding up to the kernel's extent (so it stays about the
  // input's size; a far larger padding or stride, which dispatch accepts, is left to im2col).
  for (int d = 1; d < 3; ++d) {
    if (g.stride[d] < 1 || g.stride[d] > kMaxStep || g.dilation[d] < 1 || g.dilation[d] > kMaxStep) return false;
    if (g.padding[d] < 0 || g.padding[d] > static_cast<I>(g.kernel[d] - 1) * g.dilation[d]) return false;
  }
  if (g.out_size() == 0) return false;
  return true;
}

// Measured (nn_conv_bench small, 2026-12-06, AVX3 on the 2-core AMD EPYC): faster than
// im2col + gemm on every shape with rows of at least 16 outputs (1.2-2x: [500,1,28,28] 3x3
// -> 32, [64,3,32,32] 5x5 -> 16 strides 1 and 2, [8,3,224,224] 7x7 -> 64 stride 2, 64x64
// planes with 256 outputs or a 7x7 on 4 channels) and with a reduction of at most 9 taps on
// narrow rows ([256,1,7,7] and [128,1,17,17] 3x3 -> 32, 1.2-1.4x); slower on narrow rows with
// a longer one, where the gemm runs well and the vectors are part empty ([256,4,7,7] 3x3 ->
// 128: 0.67-0.85x, [128,3,12,12] 3x3 -> 64: 0.91x).
bool direct_small_cin(const ConvGeom& g) {
  if (!direct_small_cin_supported(g)) return false;
  return g.out[2] >= 16 || g.c_in * g.kernel[1] * g.kernel[2] <= 9;
}

namespace {

// The weights [c_out][c_in][kh][kw] as [c_out/8][taps][8] and the bias as [c_out8], zero-padded
// to a multiple of 8 output channels (the row kernel's layout).
struct Packed {
  std::vector<float> w8, bias8;
};
Packed pack(const ConvGeom& g, const float* w, const float* bias) {
  const std::size_t taps = g.c_in * g.kernel[1] * g.kernel[2], c_out8 = (g.c_out + 7) / 8 * 8;
  Packed p{std::vector<float>(c_out8 * taps, 0.0f), std::vector<float>(c_out8, 0.0f)};
  for (std::size_t o = 0; o < g.c_out; ++o) {
    for (std::size_t t = 0; t < taps; ++t) p.w8[(o / 8) * taps * 8 + t * 8 + o % 8] = w[o * taps + t];
    if (bias) p.bias8[o] = bias[o];
  }
  return p;
}

std::size_t row_len_of(const ConvGeom& g) {
  const std::size_t kw = g.kernel[2], sw = static_cast<std::size_t>(g.stride[2]), dw = static_cast<std::size_t>(g.dilation[2]);
  return g.out[2] + ((kw - 1) * dw) / sw + simd::kConvRowsSlack;
}

// Runs body(n, oh0, oh1, prepared, rows) over samples n and blocks of output rows [oh0, oh1)
// made of whole units of `unit_rows` rows (`units` per sample), on parallel_chunks when the
// conv is worth threads; `prepared` holds the `rows` input rows the block reads (prepare()).
template <class Body>
void for_row_blocks(const ConvGeom& g, const float* x, std::size_t units, std::size_t unit_rows, Body body) {
  const std::size_t kh = g.kernel[1], taps = g.c_in * kh * g.kernel[2], row_len = row_len_of(g);
  const std::size_t sh = static_cast<std::size_t>(g.stride[1]), sw = static_cast<std::size_t>(g.stride[2]);
  const std::size_t dh = static_cast<std::size_t>(g.dilation[1]);
  // Row blocks per sample: enough tasks for the threads when the batch is small.
  const int t = nn_threads();
  const double work = static_cast<double>(g.batch * g.c_out * g.out_size()) * static_cast<double>(taps);
  const bool parallel = t > 1 && work >= kThreadsWork;
  std::size_t blocks = 1;
  if (parallel && g.batch < 4 * static_cast<std::size_t>(t))
    blocks = std::min(units, (4 * static_cast<std::size_t>(t) + g.batch - 1) / g.batch);
  const std::size_t tasks = g.batch * blocks;
  const std::size_t in_plane = g.c_in * g.in_size();
  auto one = [&](std::size_t task) {
    const std::size_t n = task / blocks, b = task % blocks;
    const std::size_t u0 = units * b / blocks, u1 = units * (b + 1) / blocks;
    if (u0 == u1) return;
    const std::size_t oh0 = u0 * unit_rows, oh1 = u1 * unit_rows;
    const std::size_t r0 = oh0 * sh, r1 = (oh1 - 1) * sh + (kh - 1) * dh + 1;
    thread_local std::vector<float> buf;
    const std::size_t need = g.c_in * sw * (r1 - r0) * row_len;
    if (buf.size() < need) buf.resize(need);
    prepare(g, x + n * in_plane, r0, r1, row_len, buf.data());
    body(n, oh0, oh1, static_cast<const float*>(buf.data()), r1 - r0);
  };
  if (parallel && tasks > 1) {
    parallel_chunks(tasks, one);
  } else {
    for (std::size_t i = 0; i < tasks; ++i) one(i);
  }
}

}  // namespace

void direct_small_cin_forward(const ConvGeom& g, const float* x, const float* w, const float* bias, float* y) {
  const Packed p = pack(g, w, bias);
  const std::size_t sh = static_cast<std::size_t>(g.stride[1]), sw = static_cast<std::size_t>(g.stride[2]);
  const std::size_t dh = static_cast<std::size_t>(g.dilation[1]), dw = static_cast<std::size_t>(g.dilation[2]);
  const std::size_t out_h = g.out[1], out_w = g.out[2], P = g.out_size(), row_len = row_len_of(g);
  for_row_blocks(g, x, out_h, 1, [&](std::size_t n, std::size_t oh0, std::size_t oh1, const float* buf, std::size_t rows) {
    simd::ConvRows a{buf, rows, row_len, p.w8.data(), p.bias8.data(), g.c_in, g.c_out, g.kernel[1], g.kernel[2], sh, sw, dh, dw,
                     oh0, oh1, out_h, out_w, y + n * g.c_out * P};
    simd::conv_rows_f32(a);
  });
}

bool direct_small_cin_relu_pool_supported(const ConvGeom& g) {
  return direct_small_cin_supported(g) && g.out[1] >= 2 && g.out[2] >= 2;
}

void direct_small_cin_relu_pool_forward(const ConvGeom& g, const float* x, const float* w, const float* bias, float* y) {
  const Packed p = pack(g, w, bias);
  const std::size_t sh = static_cast<std::size_t>(g.stride[1]), sw = static_cast<std::size_t>(g.stride[2]);
  const std::size_t dh = static_cast<std::size_t>(g.dilation[1]), dw = static_cast<std::size_t>(g.dilation[2]);
  const std::size_t out_w = g.out[2], py = g.out[1] / 2, px = out_w / 2, row_len = row_len_of(g);
  // pooled rows in units of one (two conv rows each); an odd last conv row is never computed
  for_row_blocks(g, x, py, 2, [&](std::size_t n, std::size_t oh0, std::size_t oh1, const float* buf, std::size_t rows) {
    // two conv rows of every channel, [c_out][2][out_w], and the pool kernel's read slack
    thread_local std::vector<float> pair;
    if (pair.size() < g.c_out * 2 * out_w + simd::kPoolRowsSlack) pair.resize(g.c_out * 2 * out_w + simd::kPoolRowsSlack);
    float* yn = y + n * g.c_out * py * px;
    for (std::size_t oh = oh0; oh < oh1; oh += 2) {
      // conv rows oh, oh + 1 as rows 0, 1 of a 2-row output, from the prepared rows they read
      simd::ConvRows a{buf + (oh - oh0) * sh * row_len, rows, row_len, p.w8.data(), p.bias8.data(), g.c_in, g.c_out,
                       g.kernel[1], g.kernel[2], sh, sw, dh, dw, 0, 2, 2, out_w, pair.data()};
      simd::conv_rows_f32(a);
      simd::max_pool_2x2_relu_rows_f32(pair.data(), g.c_out, out_w, yn + (oh / 2) * px, py * px);
    }
  });
}

}  // namespace tensor::cpu::nn
