// A block fused on the im2col + gemm route (see conv_gemm_pool.hpp).
#include "backends/cpu/nn/conv_gemm_pool.hpp"

#include <algorithm>
#include <vector>

#include "backends/cpu/nn/conv_onednn.hpp"
#include "backends/cpu/nn/nn_gemm.hpp"
#include "backends/cpu/parallel.hpp"
#include "backends/cpu/pool_hwy.hpp"

namespace tensor::cpu::nn {

bool gemm_relu_pool_supported(const ConvGeom& g) {
  return g.groups == 1 && g.in[0] == 1 && g.kernel[0] == 1 && g.out[0] == 1 && g.c_in > 0 && g.c_out > 0 &&
         g.kernel_size() > 0 && g.out[1] >= 2 && g.out[2] >= 2;
}

std::size_t gemm_relu_pool_rows(const ConvGeom& g) {
  const std::size_t kc = g.c_in * g.kernel_size(), pooled = g.out[1] / 2 * 2;
  const std::size_t row_bytes = (kc + g.c_out) * g.out[2] * sizeof(float);
  return std::clamp<std::size_t>(kGemmPoolBlockBytes / row_bytes / 2 * 2, 2, pooled);
}

void gemm_relu_pool_forward(const ConvGeom& g, const float* x, const float* w, const float* bias, float* y) {
  const std::size_t kc = g.c_in * g.kernel_size(), out_w = g.out[2], py = g.out[1] / 2, px = out_w / 2;
  const std::size_t rows = gemm_relu_pool_rows(g);
  auto image = [&](std::size_t n) {
    // this thread's columns and conv rows of every channel, [c_out][rows][out_w] (+ the pool
    // kernel's read slack)
    thread_local std::vector<float> cols, plane;
    if (cols.size() < kc * rows * out_w) cols.resize(kc * rows * out_w);
    if (plane.size() < g.c_out * rows * out_w + simd::kPoolRowsSlack) plane.resize(g.c_out * rows * out_w + simd::kPoolRowsSlack);
    const float* xn = x + n * g.c_in * g.in_size();
    float* yn = y + n * g.c_out * py * px;
    for (std::size_t r0 = 0; r0 < 2 * py; r0 += rows) {  // an odd last conv row is never computed
      const std::size_t r1 = std::min(2 * py, r0 + rows), cnt = (r1 - r0) * out_w;
      im2col_rows(g, xn, cols.data(), static_cast<std::int64_t>(r0), static_cast<std::int64_t>(r1));
      nn_gemm<float>(false, false, g.c_out, cnt, kc, 1.0f, w, kc, cols.data(), cnt, 0.0f, plane.data(), cnt, 1);
      for (std::size_t o = 0; o < g.c_out; ++o) {
        float* po = plane.data() + o * cnt;
        if (bias != nullptr) {
          const float b = bias[o];
          for (std::size_t i = 0; i < cnt; ++i) po[i] += b;
        }
        simd::max_pool_2x2_relu_rows_f32(po, (r1 - r0) / 2, out_w, yn + o * py * px + r0 / 2 * px, px);
      }
    }
  };
  parallel_chunks(g.batch, image);
}

bool onednn_relu_pool_forward(const ConvGeom& g, const float* x, const float* w, const float* bias, float* y) {
  const std::size_t P = g.out_size(), out_w = g.out[2], py = g.out[1] / 2, px = out_w / 2;
  return onednn_conv_forward_parts(g, x, w, bias, simd::kPoolRowsSlack,
                                   [&](std::size_t n0, std::size_t n1, const float* part) {
                                     for (std::size_t n = n0; n < n1; ++n)
                                       for (std::size_t o = 0; o < g.c_out; ++o)
                                         simd::max_pool_2x2_relu_rows_f32(part + ((n - n0) * g.c_out + o) * P, py, out_w,
                                                                          y + (n * g.c_out + o) * py * px, px);
                                   });
}

}  // namespace tensor::cpu::nn
