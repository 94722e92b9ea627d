// The fused q8 GEMV of q_matmul (quant_q8.hpp). Exactness: dpbusd multiplies u8 by s8; the
// weight's codes are the s8 operand and the activation's s8 codes go in shifted by 128
// (a + 128 in [1, 255], a u8), so a lane's sum is sum (a + 128) * c = sum a * c + 128 * sum c;
// the pack keeps 128 * (the column's sum of codes) and the kernel subtracts it. Every sum is
// exact in i32 for K <= kQ8MaxK (checked: beyond it oneDNN's route takes the product).
// The f32 epilogue is the oneDNN route's: y = (f32(isum) * wscale) * a (two products, in
// that order; vpdpbusd and the i32 -> f32 conversion round as oneDNN's brgemm does), so the
// two routes give the same floats (tests/quant_q8_test.cpp checks it bit for bit).
#include "backends/cpu/quant_q8.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>

#include "backends/cpu/cpu_info.hpp"
#include "backends/cpu/cpu_ops.hpp"
#include "backends/cpu/parallel.hpp"
#include "backends/cpu/quant_hwy.hpp"
#include "backends/cpu/quant_internal.hpp"
#include "dispatch/quant.hpp"
#include "dispatch/quant_model.hpp"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace tensor::cpu::qdetail {

namespace q = dispatch::quant;
using dispatch::DispatchTensor;

bool q8_fits(const q::QuantPrim& w) {
  const Shape& s = w.shape();
  if (s.rank() != 2 || s[0] == 0 || s[1] == 0 || static_cast<std::int64_t>(s[0]) > kQ8MaxK) return false;
  if (w.scheme().size_bits_value() != 8) return false;  // Q8F ([-128, 127]) and Q8S ([-127, 127])
  // one scale for the tensor, or one per output column (a block spanning K)
  return !w.scheme().level.is_block() || q::grid_shape("q_matmul", s, w.scheme()) == Shape{1, s[1]};
}

std::shared_ptr<const Q8Pack> make_q8_pack(const q::QuantPrim& w) {
  if (!q8_fits(w)) return nullptr;
  CpuRef codes = to_contiguous(as_cpu(DispatchTensor(w.codes()).take()));
  CpuRef sc = f32_dense(as_cpu(DispatchTensor(w.scales()).take()));
  auto p = std::make_shared<Q8Pack>();
  const std::int64_t k = static_cast<std::int64_t>(w.shape()[0]), n = static_cast<std::int64_t>(w.shape()[1]);
  const auto ns = static_cast<std::int64_t>(sc->shape().num_elements());
  if (codes->dtype() != DType::I8 || static_cast<std::int64_t>(codes->shape().num_elements()) != k * n || (ns != 1 && ns != n))
    return nullptr;
  p->k = k;
  p->n = n;
  p->quads = (k + 3) / 4;
  p->panels = (n + kQ8Panel - 1) / kQ8Panel;
  const auto* c = reinterpret_cast<const std::int8_t*>(codes->data());
  const auto* s = reinterpret_cast<const float*>(sc->data());
  p->codes.assign(static_cast<std::size_t>(p->panels * p->quads * 4 * kQ8Panel), 0);  // padding: code 0
  p->comp.assign(static_cast<std::size_t>(p->panels * kQ8Panel), 0);
  p->scale.assign(static_cast<std::size_t>(p->panels * kQ8Panel), 0.0f);
  for (std::int64_t j = 0; j < n; ++j) {
    const std::int64_t pn = j / kQ8Panel, col = j % kQ8Panel;  // col = 16 v + l
    std::int8_t* base = p->codes.data() + pn * p->quads * 256 + col * 4;
    std::int32_t sum = 0;
    for (std::int64_t kk = 0; kk < k; ++kk) {
      const std::int8_t v = c[kk * n + j];
      base[(kk / 4) * 256 + kk % 4] = v;
      sum += v;
    }
    p->comp[static_cast<std::size_t>(j)] = 128 * sum;
    p->scale[static_cast<std::size_t>(j)] = ns == 1 ? s[0] : s[j];
  }
  return p;
}

namespace {

#if defined(__x86_64__)
#define Q8_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni"), optimize("fp-contract=off")))

// R rows of x (as u8 quads: xu[r * quads + q]) against panel pn's 64 columns. For R = 1 the
// quads alternate between two sets of accumulators: 8 independent dpbusd chains.
// R rows of x (as u8 quads: xu[r * quads + q]) against P panels pn .. pn + P - 1 at once:
// per quad, each panel's 4 weight vectors are loaded once for the R rows, the R broadcasts
// once for the P panels; 4 R P independent dpbusd chains (at most 24 accumulators). P > 1
// reads P streams of the pack side by side: for the GEMV (R = 1, P = 4) that read the 16 MiB
// weight from memory 18-25 % faster than one stream on this Zen 4 (interleaved with the f32
// GEMV evicting it between calls).
template <int R, int P>
Q8_TARGET void vnni_tile(const Q8Pack& p, const std::uint32_t* xu, const float* xs, std::int64_t r0, std::int64_t pn,
                         float* out) {
  static_assert(R * P * 4 <= 24, "accumulators past the register file");
  // (every loop over rows, panels and vectors unrolled: -O2 leaves them rolled, and the
  // accumulators then live on the stack, a store and a load per dpbusd)
  const std::int64_t quads = p.quads, n = p.n, stride = quads * 256;
  __m512i acc[R][P][4];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int s = 0; s < P; ++s)
#pragma GCC unroll 4
      for (int v = 0; v < 4; ++v) acc[r][s][v] = _mm512_setzero_si512();
  const std::int8_t* wc = p.codes.data() + pn * stride;
  const std::uint32_t* xr = xu + r0 * quads;
  for (std::int64_t qd = 0; qd < quads; ++qd) {
    __m512i xb[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) xb[r] = _mm512_set1_epi32(static_cast<int>(xr[r * quads + qd]));
#pragma GCC unroll 8
    for (int s = 0; s < P; ++s) {
      const std::int8_t* wq = wc + s * stride + qd * 256;
      const __m512i w0 = _mm512_loadu_si512(wq), w1 = _mm512_loadu_si512(wq + 64), w2 = _mm512_loadu_si512(wq + 128),
                    w3 = _mm512_loadu_si512(wq + 192);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        acc[r][s][0] = _mm512_dpbusd_epi32(acc[r][s][0], xb[r], w0);
        acc[r][s][1] = _mm512_dpbusd_epi32(acc[r][s][1], xb[r], w1);
        acc[r][s][2] = _mm512_dpbusd_epi32(acc[r][s][2], xb[r], w2);
        acc[r][s][3] = _mm512_dpbusd_epi32(acc[r][s][3], xb[r], w3);
      }
    }
  }
#pragma GCC unroll 8
  for (int s = 0; s < P; ++s)
#pragma GCC unroll 4
    for (int v = 0; v < 4; ++v) {
      const std::int64_t c0 = (pn + s) * kQ8Panel + 16 * v;
      if (c0 >= n) break;
      const std::int64_t cols = std::min<std::int64_t>(16, n - c0);
      const __mmask16 mask = cols == 16 ? __mmask16(0xFFFF) : static_cast<__mmask16>((1u << cols) - 1u);
      const __m512i comp = _mm512_loadu_si512(p.comp.data() + c0);
      const __m512 ws = _mm512_loadu_ps(p.scale.data() + c0);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const __m512i isum = _mm512_sub_epi32(acc[r][s][v], comp);
        // (the maskz form: GCC 12 warns that the plain one's _mm512_undefined_ps may be uninitialized)
        const __m512 y =
            _mm512_mul_ps(_mm512_mul_ps(_mm512_maskz_cvtepi32_ps(0xFFFF, isum), ws), _mm512_set1_ps(xs[r0 + r]));
        _mm512_mask_storeu_ps(out + (r0 + r) * n + c0, mask, y);
      }
    }
}

// Rows [0, m) against panels [pn0, pn1): m <= 3 rows as one tile over P panels at a time
// (then one); more rows in tiles of at most 6 rows, as even as they come (M = 8: 4 + 4;
// M = 16: 6 + 5 + 5), each tile a pass over the panel (the first from memory, the others
// from L2).
template <int R, int P>
Q8_TARGET void few_rows(const Q8Pack& p, const std::uint32_t* xu, const float* xs, std::int64_t pn0, std::int64_t pn1,
                        float* out) {
  std::int64_t pn = pn0;
  for (; pn + P <= pn1; pn += P) vnni_tile<R, P>(p, xu, xs, 0, pn, out);
  for (; pn < pn1; ++pn) vnni_tile<R, 1>(p, xu, xs, 0, pn, out);
}

Q8_TARGET void vnni_panels(const Q8Pack& p, const std::uint32_t* xu, const float* xs, std::int64_t m, std::int64_t pn0,
                           std::int64_t pn1, float* out) {
  switch (m) {
    case 1: few_rows<1, 4>(p, xu, xs, pn0, pn1, out); return;
    case 2: few_rows<2, 2>(p, xu, xs, pn0, pn1, out); return;
    case 3: few_rows<3, 2>(p, xu, xs, pn0, pn1, out); return;
    default: break;
  }
  const std::int64_t tiles = (m + 5) / 6;
  for (std::int64_t pn = pn0; pn < pn1; ++pn)
    for (std::int64_t t = 0; t < tiles; ++t) {
      const std::int64_t r0 = m * t / tiles, rows = m * (t + 1) / tiles - r0;
      switch (rows) {
        case 6: vnni_tile<6, 1>(p, xu, xs, r0, pn, out); break;
        case 5: vnni_tile<5, 1>(p, xu, xs, r0, pn, out); break;
        case 4: vnni_tile<4, 1>(p, xu, xs, r0, pn, out); break;
        case 3: vnni_tile<3, 1>(p, xu, xs, r0, pn, out); break;
        case 2: vnni_tile<2, 1>(p, xu, xs, r0, pn, out); break;
        default: vnni_tile<1, 1>(p, xu, xs, r0, pn, out); break;
      }
    }
}
#undef Q8_TARGET

bool has_avx512_vnni() {
  static const bool yes = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
  return yes;
}
#else
bool has_avx512_vnni() { return false; }
#endif

std::atomic<bool> g_q8_off{false};  // tests and the bench switch it while other threads may read it
std::atomic<std::int64_t> g_q8_rows{0};  // q8_set_max_rows; 0: the machine's limit

}  // namespace

std::int64_t q8_max_rows() {
  static const std::int64_t machine = int8_amx_live() ? kQ8MaxRowsAmx : kQ8MaxRows;
  const std::int64_t set = g_q8_rows;
  return set > 0 ? set : machine;
}
void q8_set_max_rows(std::int64_t rows) { g_q8_rows = std::clamp<std::int64_t>(rows, 0, kQ8MaxRows); }
bool q8_route_for(std::int64_t m) { return !g_q8_off && m >= 1 && m <= q8_max_rows() && has_avx512_vnni(); }
void q8_disable(bool off) { g_q8_off = off; }

bool q8_product(const Q8Pack& p, const float* x, std::int64_t m, float* out, std::string& route) {
#if defined(__x86_64__)
  if (!q8_route_for(m)) return false;
  const std::int64_t k = p.k, quads = p.quads;
  // x's rows as the oneDNN route quantizes them (quant.cpp's int8_product), then as u8
  // quads (code + 128; the padding k's: 128, the code 0, against zero weight codes)
  thread_local std::vector<std::int8_t> xq;
  thread_local std::vector<std::uint32_t> xu;
  thread_local std::vector<float> xs;
  xq.resize(static_cast<std::size_t>(quads * 4));
  xu.resize(static_cast<std::size_t>(m * quads));
  xs.resize(static_cast<std::size_t>(m));
  for (std::int64_t i = 0; i < m; ++i) {
    const float* r = x + i * k;
    bool good = true;
    const float amax = simd::abs_max_f32(r, static_cast<std::size_t>(k), &good);
    if (!good) return false;  // NaN or inf: no int8 code
    const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
    xs[static_cast<std::size_t>(i)] = amax / 127.0f;
    std::fill(xq.begin() + k, xq.end(), std::int8_t{0});
    simd::quantize_s8(r, static_cast<std::size_t>(k), inv, xq.data());
    auto* u = reinterpret_cast<std::uint8_t*>(xu.data() + i * quads);
    for (std::int64_t t = 0; t < quads * 4; ++t) u[t] = static_cast<std::uint8_t>(static_cast<std::uint8_t>(xq[t]) ^ 0x80u);
  }
  // panels split evenly over the library's threads where the weight is large enough (1 MiB
  // of codes) for the split to pay; one contiguous range each
  const std::int64_t nt = std::max(1, omp_threads());
  const std::int64_t threads = p.k * p.n >= (std::int64_t{1} << 20) ? std::min<std::int64_t>(nt, p.panels) : 1;
  const std::uint32_t* xup = xu.data();
  const float* xsp = xs.data();
  auto chunk = [&](std::size_t c) {
    const auto ci = static_cast<std::int64_t>(c);
    vnni_panels(p, xup, xsp, m, p.panels * ci / threads, p.panels * (ci + 1) / threads, out);
  };
  if (threads > 1)
    parallel_chunks(static_cast<std::size_t>(threads), chunk);
  else
    chunk(0);
  route = "q8 fused avx512-vnni (" + std::to_string(threads) + (threads > 1 ? " threads)" : " thread)");
  return true;
#else
  (void)p, (void)x, (void)m, (void)out, (void)route;
  return false;
#endif
}

}  // namespace tensor::cpu::qdetail
