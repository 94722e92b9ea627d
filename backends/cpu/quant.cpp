// The CPU's quant rows (op table: quant section): quantize and dequantize in one pass over
// contiguous f32 data, block by block along each line of the last axis. The values are the
// default composition's (dispatch/defaults/quant.cpp) bit for bit: v = x * (1 / scale) in
// f32, round half away from zero as trunc(v) + sign(v) * (|v - trunc(v)| >= 0.5), clamp to
// the value's range (NaN stays NaN), then the Rust-`as` cast to i8 (NaN -> 0); dequantize:
// f32(code) * scale, then the requested float dtype by the CPU's own cast. No FMA can fuse
// the product into the rounding test: the library builds as ISO C++ (-ffp-contract=off).
#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backends/cpu/cpu_info.hpp"
#include "backends/cpu/cpu_ops.hpp"
#include "backends/cpu/gemm.hpp"
#include "backends/cpu/parallel.hpp"
#include "backends/cpu/quant.hpp"
#include "backends/cpu/quant_hwy.hpp"
#include "backends/cpu/quant_internal.hpp"
#include "backends/cpu/quant_q4.hpp"
#include "backends/cpu/quant_q8.hpp"
#include "dispatch/defaults/compose.hpp"
#include "dispatch/quant.hpp"
#include "dispatch/quant_model.hpp"

#if TENSOR_HAVE_ONEDNN
#include <oneapi/dnnl/dnnl.h>
#endif

namespace tensor::cpu {

namespace qdetail {
// Contiguous f32 elements of x (a copy only when x is another dtype or strided).
CpuRef f32_dense(CpuRef x) {
  if (x->dtype() != DType::F32) return convert_tensor(std::move(x), DType::F32);
  return to_contiguous(std::move(x));
}
}  // namespace qdetail

namespace {

using dispatch::DispatchTensor;
using dispatch::Kind;
using dispatch::Prim;
using qdetail::f32_dense;
namespace q = dispatch::quant;

inline std::int8_t code_of(float x, float inv, float lo, float hi) {
  const float v = x * inv;
  const float t = std::trunc(v);
  const float sign = v > 0.0f ? 1.0f : v < 0.0f ? -1.0f : v;  // sign(v): 0 keeps its sign, NaN stays NaN
  const float step = sign * (std::fabs(v - t) >= 0.5f ? 1.0f : 0.0f);
  float r = t + step;
  if (r < lo) r = lo;
  if (r > hi) r = hi;
  return std::isnan(r) ? std::int8_t{0} : static_cast<std::int8_t>(r);
}

// Calls body(line_start, block_base) for every line of the last axis of `shape`, where
// block_base is the index (row-major over the block grid) of the line's first block.
template <class Body>
void for_lines(const Shape& shape, const q::Extents& e, const Shape& grid, bool per_tensor, Body&& body) {
  const std::size_t r = shape.rank();
  const std::size_t n = shape.num_elements();
  if (n == 0) return;
  const std::size_t last = r ? shape[r - 1] : 1;
  const std::size_t lines = n / last;
  if (per_tensor) {
    for (std::size_t l = 0; l < lines; ++l) body(l * last, std::size_t{0});
    return;
  }
  // Grid strides (row-major over the grid) of the outer axes, and an odometer over them.
  std::array<std::size_t, kMaxRank> gstride{}, idx{};
  std::size_t gs = 1;
  for (std::size_t d = r; d-- > 0;) {
    gstride[d] = gs;
    gs *= grid[d];
  }
  for (std::size_t l = 0; l < lines; ++l) {
    std::size_t base = 0;
    for (std::size_t d = 0; d + 1 < r; ++d) base += idx[d] / e.ext[d] * gstride[d];
    body(l * last, base);
    if (r < 2) continue;
    for (std::size_t d = r - 1; d-- > 0;) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
  }
}

Prim quantize_entry(Prim px, Prim pscales, const QuantScheme& scheme) {
  CpuRef x = f32_dense(as_cpu(std::move(px)));
  CpuRef sc = to_contiguous(as_cpu(Prim(pscales)));
  const Shape shape = x->shape();
  const q::Extents e = q::block_extents("quantize", shape, scheme);
  const bool per_tensor = !scheme.level.is_block();
  const Shape grid = q::grid_shape("quantize", shape, scheme);
  const auto [a, b] = scheme.range();
  const float lo = static_cast<float>(a), hi = static_cast<float>(b);
  const float* s = reinterpret_cast<const float*>(sc->data());
  std::vector<float> inv(grid.num_elements());
  for (std::size_t i = 0; i < inv.size(); ++i) inv[i] = 1.0f / s[i];
  CpuRef codes = alloc_tensor(DType::I8, shape);
  const float* in = reinterpret_cast<const float*>(x->data());
  auto* out = reinterpret_cast<std::int8_t*>(codes->data());
  const std::size_t last = shape.rank() ? shape[shape.rank() - 1] : 1;
  const std::size_t ext = per_tensor ? last : (shape.rank() ? e.ext[shape.rank() - 1] : 1);
  for_lines(shape, e, grid, per_tensor, [&](std::size_t at, std::size_t base) {
    for (std::size_t j0 = 0, blk = base; j0 < last; j0 += ext, blk += per_tensor ? 0 : 1) {
      const float r = inv[blk];
      for (std::size_t j = j0; j < j0 + ext; ++j) out[at + j] = code_of(in[at + j], r, lo, hi);
    }
  });
  const DeviceId dev = x->device();
  return Prim(dispatch::Ref<q::QuantPrim>::make(shape, dev, scheme, DispatchTensor(Prim(std::move(codes)), Kind::Int),
                                                DispatchTensor(std::move(pscales), Kind::Float)));
}

Prim dequantize_entry(Prim pq, DType dtype) {
  const auto& qp = dispatch::prim_as<q::QuantPrim>(pq);
  const Shape shape = qp.shape();
  const QuantScheme& scheme = qp.scheme();
  const q::Extents e = q::block_extents("dequantize", shape, scheme);
  const bool per_tensor = !scheme.level.is_block();
  const Shape grid = q::grid_shape("dequantize", shape, scheme);
  CpuRef codes = to_contiguous(as_cpu(DispatchTensor(qp.codes()).take()));
  CpuRef sc = to_contiguous(as_cpu(DispatchTensor(qp.scales()).take()));
  const auto* in = reinterpret_cast<const std::int8_t*>(codes->data());
  const float* s = reinterpret_cast<const float*>(sc->data());
  CpuRef out = alloc_tensor(DType::F32, shape);
  float* o = reinterpret_cast<float*>(out->data());
  const std::size_t last = shape.rank() ? shape[shape.rank() - 1] : 1;
  const std::size_t ext = per_tensor ? last : (shape.rank() ? e.ext[shape.rank() - 1] : 1);
  for_lines(shape, e, grid, per_tensor, [&](std::size_t at, std::size_t base) {
    for (std::size_t j0 = 0, blk = base; j0 < last; j0 += ext, blk += per_tensor ? 0 : 1) {
      const float scale = s[blk];
      for (std::size_t j = j0; j < j0 + ext; ++j) o[at + j] = static_cast<float>(in[at + j]) * scale;
    }
  });
  if (dtype == DType::F32) return out;
  return convert_tensor(std::move(out), dtype);
}

// ---- q_matmul: x [.., M, K] (float) times a quantized weight [K, N] ------------------------
//
// On oneDNN's int8 matmul primitive: x's rows are quantized on the fly to s8 (symmetric, one
// scale per row: a_m = max|x_m| / 127, codes round(x * (127 / max)) in [-127, 127]); the
// weight's codes are s8 already. The primitive takes the weight's scales as constant output
// scales (per output column, mask 1 << 1, or one), fixed when it is created, so oneDNN picks
// its AMX / VNNI brgemm kernels (a runtime scale drops to a 3-6x slower gemm:jit:
// reference/quantization.md §5.3); the row scale a_m multiplies the f32 result afterwards.
// The weight is reordered once into the layout the primitive asks for (format any) and kept
// with the weight (QuantPrim::cache), with the primitive, one per M. Where oneDNN is absent
// or offers no kernel, for rows that are not finite (NaN / inf have no int8 code) and for an
// f64 x (whose precision an int8 product cannot keep), the product is the default's: the
// weight dequantized, then the float matmul. Before all that, a 4-bit weight with scales per
// block [32, 1] takes the q4 routes (quant_q4.hpp: the fused int8 kernel, or K-panels
// dequantized into a per-thread buffer for the f32 GEMM; never the whole weight in f32);
// oneDNN only takes scales per tensor or per column, so other [b, 1] blocks dequantize.
// An 8-bit weight with those scales and at most q8_max_rows() rows of x (16, or 3 where
// oneDNN runs AMX-INT8) takes the fused q8 kernel first where the CPU has AVX512-VNNI
// (quant_q8.hpp: x quantized as here, the weight repacked once for dpbusd; the same floats
// as oneDNN's route).

thread_local std::string t_last_route;

// A fused route's pack, made once per weight and kept in its MatmulWeightCache (`slot`, and
// `tried` so that a weight that does not fit is not looked at again), then the product;
// false where there is no pack or the product declines (the caller takes another route).
template <class Pack, class Make, class Product>
bool packed_route(const q::QuantPrim& w, std::shared_ptr<const Pack> qdetail::MatmulWeightCache::*slot,
                  bool qdetail::MatmulWeightCache::*tried, Make make, Product product) {
  auto cache = w.cache<qdetail::MatmulWeightCache>([] { return std::make_shared<qdetail::MatmulWeightCache>(); });
  std::shared_ptr<const Pack> pack;
  {
    const std::lock_guard<std::mutex> lock(cache->mu);
    if (!((*cache).*tried)) {
      (*cache).*slot = make();
      (*cache).*tried = true;
    }
    pack = (*cache).*slot;
  }
  std::string route;
  if (!pack || !product(*pack, route)) return false;
  t_last_route = std::move(route);
  return true;
}

// The fused q4 kernel (quant_q4.cpp) for x [m, k] (f32, dense) and a Q4 weight with block
// [32, 1]: the nibble pack.
bool q4_route(const q::QuantPrim& w, const float* x, std::int64_t m, float* out) {
  if (!qdetail::q4_fits(w)) return false;
  return packed_route(
      w, &qdetail::MatmulWeightCache::q4, &qdetail::MatmulWeightCache::q4_tried, [&] { return qdetail::make_q4_pack(w); },
      [&](const qdetail::Q4Pack& p, std::string& route) { return qdetail::q4_product(p, x, m, out, route); });
}

// The fused q8 kernel (quant_q8.cpp) for x [m, k] (f32, dense): the dpbusd pack; false also
// where the CPU or x's rows do not fit it.
bool q8_route(const q::QuantPrim& w, const float* x, std::int64_t m, float* out) {
  if (!qdetail::q8_route_for(m) || !qdetail::q8_fits(w)) return false;
  return packed_route(
      w, &qdetail::MatmulWeightCache::q8, &qdetail::MatmulWeightCache::q8_tried, [&] { return qdetail::make_q8_pack(w); },
      [&](const qdetail::Q8Pack& p, std::string& route) { return qdetail::q8_product(p, x, m, out, route); });
}

#if TENSOR_HAVE_ONEDNN
using qdetail::int8_engine;
dnnl_engine_t int8_engine_make() {
  static const dnnl_engine_t engine = [] {
    dnnl_engine_t e = nullptr;
    if (dnnl_engine_create(&e, dnnl_cpu, 0) != dnnl_success) e = nullptr;
    return e;
  }();
  return engine;
}

// One compiled product for one M, with the weight reordered for it.
using Int8Plan = qdetail::Int8Primitive;

using Int8Weight = qdetail::MatmulWeightCache;

bool reorder_weights(Int8Plan& p, const dnnl_memory_desc_t& plain, const std::int8_t* codes) {
  return qdetail::reorder_codes(&p.weights, p.wei, plain, codes);
}

}  // namespace

namespace qdetail {
dnnl_primitive_desc_t scaled_int8_desc(const_dnnl_op_desc_t op_desc, const std::vector<float>& wscales, dnnl_engine_t e,
                                       std::string& impl) {
  dnnl_primitive_attr_t attr = nullptr;
  if (dnnl_primitive_attr_create(&attr) != dnnl_success) return nullptr;
  dnnl_primitive_desc_t pd = nullptr;
  const int mask = wscales.size() > 1 ? 1 << 1 : 0;
  const bool made =
      dnnl_primitive_attr_set_output_scales(attr, static_cast<dnnl_dim_t>(wscales.size()), mask, wscales.data()) == dnnl_success &&
      dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user) == dnnl_success &&
      dnnl_primitive_desc_create(&pd, op_desc, attr, e, nullptr) == dnnl_success;
  dnnl_primitive_attr_destroy(attr);
  if (!made) return nullptr;
  const char* name = nullptr;
  if (dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &name) == dnnl_success && name != nullptr) impl = name;
  return pd;
}
}  // namespace qdetail

namespace {

// The product of m rows with columns [col0, col0 + n) of a [k, ld] weight (codes of the
// whole weight; all_scales per column of the whole weight, or one), into a dense [m, n]
// (a strided destination made oneDNN pick its slower gemm:jit over brgemm).
std::shared_ptr<const Int8Plan> make_int8_plan(std::int64_t m, std::int64_t k, std::int64_t n, const std::int8_t* codes,
                                               const std::vector<float>& all_scales, std::int64_t col0 = 0,
                                               std::int64_t ld = 0) {
  auto p = std::make_shared<Int8Plan>();
  const dnnl_engine_t e = int8_engine();
  if (e == nullptr) return p;
  if (ld == 0) ld = n;
  const std::vector<float> wscales =
      all_scales.size() > 1 ? std::vector<float>(all_scales.begin() + col0, all_scales.begin() + col0 + n) : all_scales;
  // A column slab's codes gathered dense first: oneDNN 2.6 has no reorder with the s8
  // compensation its int8 weights carry from a strided source.
  std::vector<std::int8_t> slab;
  if (ld != n) {
    slab.resize(static_cast<std::size_t>(k * n));
    for (std::int64_t r = 0; r < k; ++r) std::copy_n(codes + r * ld + col0, n, slab.begin() + r * n);
    codes = slab.data();
  }
  const dnnl_dims_t sd = {m, k}, wd = {k, n}, dd = {m, n};
  dnnl_memory_desc_t wany{}, plain{};
  if (dnnl_memory_desc_init_by_tag(&p->src, 2, sd, dnnl_s8, dnnl_ab) != dnnl_success ||
      dnnl_memory_desc_init_by_tag(&wany, 2, wd, dnnl_s8, dnnl_format_tag_any) != dnnl_success ||
      dnnl_memory_desc_init_by_tag(&plain, 2, wd, dnnl_s8, dnnl_ab) != dnnl_success ||
      dnnl_memory_desc_init_by_tag(&p->dst, 2, dd, dnnl_f32, dnnl_ab) != dnnl_success)
    return p;
  dnnl_matmul_desc_t md;
  if (dnnl_matmul_desc_init(&md, &p->src, &wany, nullptr, &p->dst) != dnnl_success) return p;
  const dnnl_primitive_desc_t pd = qdetail::scaled_int8_desc(&md, wscales, e, p->impl);
  if (pd == nullptr) return p;
  const dnnl_memory_desc_t* w = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
  const dnnl_memory_desc_t* sp = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
  // A kernel of oneDNN's own (brgemm or its int8 gemm), not its reference loops.
  const bool kernel = p->impl.starts_with("brg:") || p->impl.starts_with("gemm:");
  if (kernel && w != nullptr) {
    p->wei = *w;
    if (sp != nullptr) {
      p->scratch = *sp;
      p->scratch_bytes = dnnl_memory_desc_get_size(sp);
    }
    if (!reorder_weights(*p, plain, codes) || dnnl_primitive_create(&p->prim, pd) != dnnl_success) p->prim = nullptr;
  }
  dnnl_primitive_desc_destroy(pd);
  return p;
}

using qdetail::Int8Stream;

// (v + 1.5 * 2^23) - 1.5 * 2^23 rounds v (|v| <= 127) to the nearest integer, ties to even,
// in two vectorizable adds (std::round is a libm call per element).
inline float act_round(float v) {
  constexpr float kMagic = 12582912.0f;
  v = v < -127.0f ? -127.0f : v > 127.0f ? 127.0f : v;
  return (v + kMagic) - kMagic;
}

// The rows of a transposed view, x[b, i, j] at x + b * sb + i + j * sk (unfold4d's [N, K, L]
// swapped to [N, L, K]), quantized like int8_product's rows without a contiguous copy: per
// image, blocks of 64 rows read along i (contiguous; loops of a fixed 64 the compiler
// vectorizes), the rounded codes staged [K][64] as floats and written row-major as s8.
template <std::int64_t R>
void transposed_block(const float* base, std::int64_t k, std::int64_t sk, float* amax, float* chk, float* staged, float* inv) {
  for (std::int64_t i = 0; i < R; ++i) amax[i] = chk[i] = 0.0f;
  for (std::int64_t j = 0; j < k; ++j) {
    const float* col = base + j * sk;
    for (std::int64_t i = 0; i < R; ++i) {
      const float a = std::fabs(col[i]);
      amax[i] = a > amax[i] ? a : amax[i];
      chk[i] += col[i] * 0.0f;  // NaN where a NaN or an inf was
    }
  }
  for (std::int64_t i = 0; i < R; ++i) inv[i] = amax[i] > 0.0f ? 127.0f / amax[i] : 0.0f;
  std::array<float, R> iv;  // a local copy: no store below can alias it
  for (std::int64_t i = 0; i < R; ++i) iv[static_cast<std::size_t>(i)] = inv[i];
  for (std::int64_t j = 0; j < k; ++j) {
    const float* __restrict col = base + j * sk;
    float* __restrict st = staged + j * R;
    // |col[i] * inv[i]| <= 127 (times 1 + 2^-23 at most, which rounds to 127): no clamp, so
    // the loop is branch-free and vectorizes
    constexpr float kMagic = 12582912.0f;
    for (std::int64_t i = 0; i < R; ++i) st[i] = (col[i] * iv[static_cast<std::size_t>(i)] + kMagic) - kMagic;
  }
}

void quantize_transposed_rows(const float* x, std::int64_t batch, std::int64_t mb, std::int64_t k, std::int64_t sb,
                              std::int64_t sk, std::int8_t* xq, float* row_scale, unsigned char* finite) {
  constexpr std::int64_t kRows = 64;
  const std::int64_t blocks = (mb + kRows - 1) / kRows;
  auto block = [&](std::size_t c) {
    const std::int64_t b = static_cast<std::int64_t>(c) / blocks, i0 = static_cast<std::int64_t>(c) % blocks * kRows;
    const std::int64_t rows = std::min(kRows, mb - i0);
    const float* base = x + b * sb + i0;
    std::array<float, kRows> amax{}, chk{}, inv{};
    thread_local std::vector<float> staged;
    if (staged.size() < static_cast<std::size_t>(k * kRows)) staged.resize(static_cast<std::size_t>(k * kRows));
    if (rows == kRows) {
      transposed_block<kRows>(base, k, sk, amax.data(), chk.data(), staged.data(), inv.data());
    } else {  // the image's last rows: the same steps row by row
      for (std::int64_t i = 0; i < rows; ++i) {
        const auto u = static_cast<std::size_t>(i);
        for (std::int64_t j = 0; j < k; ++j) {
          const float v = base[i + j * sk], a = std::fabs(v);
          amax[u] = a > amax[u] ? a : amax[u];
          chk[u] += v * 0.0f;
        }
        inv[u] = amax[u] > 0.0f ? 127.0f / amax[u] : 0.0f;
        for (std::int64_t j = 0; j < k; ++j) staged[static_cast<std::size_t>(j * kRows + i)] = act_round(base[i + j * sk] * inv[u]);
      }
    }
    const std::int64_t r0 = b * mb + i0;
    for (std::int64_t i = 0; i < rows; ++i) {
      const auto u = static_cast<std::size_t>(i);
      finite[r0 + i] = chk[u] == 0.0f ? 1 : 0;
      row_scale[r0 + i] = amax[u] / 127.0f;
      std::int8_t* o = xq + (r0 + i) * k;
      const float* st = staged.data() + i;
      for (std::int64_t j = 0; j < k; ++j) o[j] = static_cast<std::int8_t>(static_cast<int>(st[j * kRows]));
    }
  };
  parallel_chunks(static_cast<std::size_t>(batch * blocks), block);
}

// Where x's rows come from: contiguous [m, k] (`x`), or a transposed view (`tb` > 0: tb
// images of m / tb rows, quantize_transposed_rows' strides sb, sk).
struct RowSource {
  const float* x = nullptr;
  std::int64_t tb = 0, sb = 0, sk = 0;
};

// x [m, k] (f32) times the weight on oneDNN into out [m, n]; false where it cannot.
bool int8_product(const q::QuantPrim& w, const RowSource& src, std::int64_t m, std::int64_t k, std::int64_t n, float* out) {
  // (not zeroed: every code is written below before the product reads it)
  const auto xq_buf = std::make_unique_for_overwrite<std::int8_t[]>(static_cast<std::size_t>(m * k));
  std::int8_t* const xq = xq_buf.get();
  std::vector<float> row_scale(static_cast<std::size_t>(m));
  std::vector<unsigned char> finite(static_cast<std::size_t>(m), 1);
  const float* x = src.x;
  // Rows in chunks of about 64K elements on the CPU backend's threads.
  const std::int64_t rows_per = std::max<std::int64_t>(1, (std::int64_t{1} << 16) / std::max<std::int64_t>(k, 1));
  auto quantize_rows = [&](std::size_t c) {
    const std::int64_t i0 = static_cast<std::int64_t>(c) * rows_per, i1 = std::min(m, i0 + rows_per);
    for (std::int64_t i = i0; i < i1; ++i) {
      const float* r = x + i * k;
      bool good = true;
      const float amax = simd::abs_max_f32(r, static_cast<std::size_t>(k), &good);
      if (!good) {  // NaN or inf: no int8 code
        finite[static_cast<std::size_t>(i)] = 0;
        continue;
      }
      const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
      row_scale[static_cast<std::size_t>(i)] = amax / 127.0f;
      simd::quantize_s8(r, static_cast<std::size_t>(k), inv, xq + i * k);
    }
  };
  if (src.tb > 0)
    quantize_transposed_rows(x, src.tb, m / src.tb, k, src.sb, src.sk, xq, row_scale.data(), finite.data());
  else
    parallel_chunks(static_cast<std::size_t>((m + rows_per - 1) / rows_per), quantize_rows);
  if (std::find(finite.begin(), finite.end(), 0) != finite.end()) return false;
  auto cache = w.cache<Int8Weight>([] { return std::make_shared<Int8Weight>(); });
  // The plan for `rows` rows, or for rows by column slab `slab` of `slabs` (slab widths a
  // multiple of 64 columns, the last taking the rest), cached by both.
  auto slab_cols = [&](std::int64_t slab, std::int64_t slabs) {
    const std::int64_t width = ((n + slabs - 1) / slabs + 63) & ~std::int64_t{63};
    const std::int64_t c0 = std::min(n, slab * width);
    return std::pair<std::int64_t, std::int64_t>{c0, std::min(n, c0 + width) - c0};
  };
  auto plan_for = [&](std::int64_t rows, std::int64_t slab = -1, std::int64_t slabs = 1) {
    const std::int64_t key = rows + ((slab + 1) << 40) + (slabs << 50);
    {
      const std::lock_guard<std::mutex> lock(cache->mu);
      if (auto it = cache->by_m.find(key); it != cache->by_m.end()) return it->second;
    }
    CpuRef codes = to_contiguous(as_cpu(DispatchTensor(w.codes()).take()));
    CpuRef sc = to_contiguous(as_cpu(DispatchTensor(w.scales()).take()));
    const float* s = reinterpret_cast<const float*>(sc->data());
    const std::vector<float> wscales(s, s + sc->shape().num_elements());
    const auto [c0, cols] = slab < 0 ? std::pair<std::int64_t, std::int64_t>{0, n} : slab_cols(slab, slabs);
    auto made = make_int8_plan(rows, k, cols, reinterpret_cast<const std::int8_t*>(codes->data()), wscales, c0, n);
    const std::lock_guard<std::mutex> lock(cache->mu);
    if (cache->by_m.size() >= 16) cache->by_m.clear();  // bounded: a plan in use stays alive
    return cache->by_m.try_emplace(key, made).first->second;
  };
  // rows [i0, i0 + rows) x columns [c0, c0 + cols) through `plan` on the calling thread's
  // stream, then the row scales
  auto run_block = [&](const Int8Plan& plan, std::int64_t i0, std::int64_t rows, std::int64_t c0, std::int64_t cols) {
    // a column slab's rows land in a dense block first (m is small there), then in out
    std::vector<float> block(cols == n ? 0 : static_cast<std::size_t>(rows * cols));
    float* dst = cols == n ? out + i0 * n : block.data();
    Int8Stream& ts = qdetail::this_thread_stream();
    if (ts.stream == nullptr) return false;
    if (ts.scratch.size() < plan.scratch_bytes) ts.scratch.resize(plan.scratch_bytes);
    std::array<dnnl_memory_t, 3> mem{};
    bool ok = dnnl_memory_create(&mem[0], &plan.src, int8_engine(), xq + i0 * k) == dnnl_success &&
              dnnl_memory_create(&mem[1], &plan.dst, int8_engine(), dst) == dnnl_success &&
              (plan.scratch_bytes == 0 ||
               dnnl_memory_create(&mem[2], &plan.scratch, int8_engine(), ts.scratch.data()) == dnnl_success);
    if (ok) {
      const dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, mem[0]}, {DNNL_ARG_WEIGHTS, plan.weights}, {DNNL_ARG_DST, mem[1]},
                                       {DNNL_ARG_SCRATCHPAD, mem[2]}};
      ok = dnnl_primitive_execute(plan.prim, ts.stream, plan.scratch_bytes == 0 ? 3 : 4, args) == dnnl_success &&
           dnnl_stream_wait(ts.stream) == dnnl_success;
    }
    for (dnnl_memory_t mm : mem)
      if (mm != nullptr) dnnl_memory_destroy(mm);
    if (!ok) return false;
    for (std::int64_t i = i0; i < i0 + rows; ++i) {
      const float a = row_scale[static_cast<std::size_t>(i)];
      float* o = out + i * n + c0;
      const float* r = cols == n ? o : block.data() + (i - i0) * cols;
      simd::scale_f32(r, static_cast<std::size_t>(cols), a, o);
    }
    return true;
  };
  // Whole rows in blocks of about kScaleBlockBytes of output, each block's row scales applied
  // while the block is still in L2 (one call over 1024 x 1024 left 4 MiB to read back from
  // L3); oneDNN's brgemm takes no per-row scale (a binary post-op {m, 1} drops it to
  // ref_int8). 1024^3 on a Xeon with AMX, 4 bench runs interleaved: 1 thread 1.65-1.85 ms
  // against 1.82-2.37 unblocked, 2 threads 0.78-0.89 against 0.83-0.87.
  constexpr std::int64_t kScaleBlockBytes = std::int64_t{256} << 10;
  const std::int64_t block_rows = std::max<std::int64_t>(32, kScaleBlockBytes / (4 * std::max<std::int64_t>(n, 1)));
  // rows [i0, i0 + rows), all columns, in those blocks (each block's plan from the cache)
  auto run_rows = [&](std::int64_t i0, std::int64_t rows) {
    for (std::int64_t b = 0; b < rows; b += block_rows) {
      const std::int64_t r = std::min(block_rows, rows - b);
      const auto p = plan_for(r);
      if (p->prim == nullptr || !run_block(*p, i0 + b, r, 0, n)) return false;
    }
    return true;
  };
  // Many rows: chunks of rows on parallel_chunks, oneDNN on one OpenMP thread per chunk (as
  // the f32 products do: no OpenMP team spinning against the library's threads). Few rows
  // and a large weight (a GEMV is a read of the weight): column slabs, one per thread, each
  // reading its part of the weight on parallel_chunks; oneDNN's own threads on the whole
  // product were slower than one (1 x 4096 x 4096: 1.26 against 1.16 ms). Otherwise one call.
  constexpr std::int64_t kChunkedRows = 256, kSlabWeightBytes = std::int64_t{1} << 20;
  const std::int64_t threads = std::max(1, omp_threads());
  if (m < kChunkedRows && threads > 1 && k * n >= kSlabWeightBytes && n >= 128 * threads) {
    std::atomic<bool> failed{false};
    std::string impl;
    auto slab = [&](std::size_t c) {
      const auto sl = static_cast<std::int64_t>(c);
      const auto [c0, cols] = slab_cols(sl, threads);
      if (cols <= 0) return;
      const auto p = plan_for(m, sl, threads);
      const GemmThreadScope one_thread;
      if (p->prim == nullptr || !run_block(*p, 0, m, c0, cols)) failed = true;
      if (c == 0) impl = p->impl;
    };
    parallel_chunks(static_cast<std::size_t>(threads), slab);
    if (failed) return false;
    t_last_route = "onednn " + impl + " (column slabs)";
    return true;
  }
  // The first block's plan, made (or found) before any thread runs: a plan holds its own
  // reordered copy of the weight, so none is made for a row count the blocks split.
  const bool row_chunks = m >= kChunkedRows && threads > 1;
  const std::int64_t per = row_chunks ? std::max<std::int64_t>(1, (m + 2 * threads - 1) / (2 * threads)) : m;
  const std::shared_ptr<const Int8Plan> plan = plan_for(std::min(per, block_rows));
  if (plan->prim == nullptr) return false;
  if (row_chunks) {
    std::atomic<bool> failed{false};
    auto chunk = [&](std::size_t c) {
      const std::int64_t i0 = static_cast<std::int64_t>(c) * per, rows = std::min(per, m - i0);
      const GemmThreadScope one_thread;
      if (!run_rows(i0, rows)) failed = true;
    };
    parallel_chunks(static_cast<std::size_t>((m + per - 1) / per), chunk);
    if (failed) return false;
  } else if (!run_rows(0, m)) {
    return false;
  }
  t_last_route = "onednn " + plan->impl;
  return true;
}
#endif

Prim q_matmul_entry(Prim px, Prim pw) {
  const auto& w = dispatch::prim_as<q::QuantPrim>(pw);
  CpuRef x = as_cpu(std::move(px));
  const DType xdt = x->dtype();
  const Shape xs = x->shape();
  const std::size_t r = xs.rank();
  const std::size_t k = xs[r - 1], n = w.shape()[1];
  Shape out_shape = xs;
  out_shape[r - 1] = n;
  const std::size_t m = k == 0 ? 0 : xs.num_elements() / k;
  auto shaped_result = [&](CpuRef out) {
    Layout l;
    std::int64_t st = 1;
    for (std::size_t d = r; d-- > 0;) {
      l.strides[d] = st;
      st *= static_cast<std::int64_t>(out_shape[d]);
    }
    CpuRef shaped = make_view(std::move(out), out_shape, l);
    return xdt == DType::F32 ? shaped : convert_tensor(std::move(shaped), xdt);
  };
  // 4-bit codes in blocks of 32 along K: the fused nibble kernel, or its K-panels (quant_q4.hpp).
  if (m > 0 && n > 0 && xdt != DType::F64 && qdetail::q4_fits(w)) {
    CpuRef xf = f32_dense(x);
    CpuRef out = alloc_tensor(DType::F32, Shape{m, n});
    if (q4_route(w, reinterpret_cast<const float*>(xf->data()), static_cast<std::int64_t>(m), reinterpret_cast<float*>(out->data())))
      return shaped_result(std::move(out));
  }
  // 8-bit codes, scales per tensor or per column, few rows: the fused q8 kernel (quant_q8.hpp).
  if (m > 0 && xdt != DType::F64 && qdetail::q8_route_for(static_cast<std::int64_t>(m)) && qdetail::q8_fits(w)) {
    CpuRef xf = f32_dense(x);
    CpuRef out = alloc_tensor(DType::F32, Shape{m, n});
    if (q8_route(w, reinterpret_cast<const float*>(xf->data()), static_cast<std::int64_t>(m), reinterpret_cast<float*>(out->data())))
      return shaped_result(std::move(out));
  }
#if TENSOR_HAVE_ONEDNN
  // oneDNN's int8 product takes one scale for the tensor or one per output column.
  const bool per_column = !w.scheme().level.is_block() || q::grid_shape("q_matmul", w.shape(), w.scheme()) == Shape{1, n};
  if (per_column && m > 0 && k > 0 && n > 0 && xdt != DType::F64) {  // f64 asks for more than an int8 product holds
    // conv2d's route hands unfold4d's [N, K, L] swapped to [N, L, K]: read in place.
    const bool transposed = xdt == DType::F32 && r == 3 && xs[1] > 1 && k > 1 && x->stride(1) == 1 &&
                            x->stride(2) == static_cast<std::int64_t>(xs[1]) &&
                            (xs[0] == 1 || x->stride(0) == static_cast<std::int64_t>(xs[1] * k));
    CpuRef xf = transposed ? x : f32_dense(x);
    RowSource src{reinterpret_cast<const float*>(xf->data())};
    if (transposed) {
      src.tb = static_cast<std::int64_t>(xs[0]);
      src.sb = static_cast<std::int64_t>(xs[1] * k);
      src.sk = static_cast<std::int64_t>(xs[1]);
    }
    CpuRef out = alloc_tensor(DType::F32, Shape{m, n});
    if (int8_product(w, src, static_cast<std::int64_t>(m), static_cast<std::int64_t>(k), static_cast<std::int64_t>(n),
                     reinterpret_cast<float*>(out->data())))
      return shaped_result(std::move(out));
  }
#endif
  // The default's route: the weight dequantized to x's dtype, then the CPU's float matmul.
  t_last_route = "dequantize + f32 matmul";
  return dispatch::defaults::default_q_matmul(Prim(std::move(x)), std::move(pw));
}

}  // namespace

namespace qdetail {

Prim dequantize(Prim q, DType dtype) { return dequantize_entry(std::move(q), dtype); }
Prim q_matmul(Prim x, Prim w) { return q_matmul_entry(std::move(x), std::move(w)); }
void set_route(std::string route) { t_last_route = std::move(route); }
thread_local std::string t_conv_route;
void set_conv_route(std::string route) { t_conv_route = std::move(route); }

#if TENSOR_HAVE_ONEDNN
dnnl_engine_t int8_engine() {
  static const dnnl_engine_t engine = int8_engine_make();
  return engine;
}

Int8Stream::Int8Stream() {
  if (int8_engine() == nullptr || dnnl_stream_create(&stream, int8_engine(), dnnl_stream_default_flags) != dnnl_success)
    stream = nullptr;
}
Int8Stream::~Int8Stream() {
  if (stream != nullptr) dnnl_stream_destroy(stream);
}
Int8Stream& this_thread_stream() {
  thread_local Int8Stream ts;
  return ts;
}

bool reorder_codes(dnnl_memory_t* out, const dnnl_memory_desc_t& want, const dnnl_memory_desc_t& plain, const std::int8_t* codes) {
  const dnnl_engine_t e = int8_engine();
  dnnl_memory_t from = nullptr;
  if (dnnl_memory_create(out, &want, e, DNNL_MEMORY_ALLOCATE) != dnnl_success) return false;
  if (dnnl_memory_create(&from, &plain, e, const_cast<std::int8_t*>(codes)) != dnnl_success) return false;
  dnnl_primitive_desc_t rpd = nullptr;
  dnnl_primitive_t r = nullptr;
  dnnl_stream_t st = nullptr;
  bool ok = dnnl_reorder_primitive_desc_create(&rpd, &plain, e, &want, e, nullptr) == dnnl_success &&
            dnnl_primitive_create(&r, rpd) == dnnl_success && dnnl_stream_create(&st, e, dnnl_stream_default_flags) == dnnl_success;
  if (ok) {
    const dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, *out}};
    ok = dnnl_primitive_execute(r, st, 2, args) == dnnl_success && dnnl_stream_wait(st) == dnnl_success;
  }
  if (st != nullptr) dnnl_stream_destroy(st);
  if (r != nullptr) dnnl_primitive_destroy(r);
  if (rpd != nullptr) dnnl_primitive_desc_destroy(rpd);
  dnnl_memory_destroy(from);
  return ok;
}
#endif

}  // namespace qdetail

std::string last_q_matmul_route() {
#if TENSOR_HAVE_ONEDNN
  return t_last_route;
#else
  return t_last_route == "dequantize + f32 matmul" ? t_last_route + " (no oneDNN)" : t_last_route;
#endif
}

std::string last_q_conv2d_route() { return qdetail::t_conv_route; }

bool qdetail::int8_amx_live() {
#if TENSOR_HAVE_ONEDNN
  return qdetail::int8_engine() != nullptr && onednn_amx_live();
#else
  return false;
#endif
}

bool int8_products_live() {
#if TENSOR_HAVE_ONEDNN
  return qdetail::int8_engine() != nullptr;
#else
  return false;
#endif
}

void register_quant_ops(dispatch::Backend& b) {
  b.set<OpCode::quantize>(&quantize_entry);
  b.set<OpCode::dequantize>(&dequantize_entry);
  b.set<OpCode::q_matmul>(&q_matmul_entry);
  b.set<OpCode::q_conv2d>(&qdetail::q_conv2d_entry);
}

}  // namespace tensor::cpu
