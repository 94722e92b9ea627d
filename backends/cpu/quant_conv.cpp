// The CPU's q_conv2d row: conv2d of a float x with a quantized weight (per tensor or per
// output channel, groups 1) on oneDNN's int8 convolution primitive, with no im2col copy.
//
// Each image's activations are quantized on the fly to s8 (symmetric, one scale per image:
// a_n = max|x_n| / 127, codes round(x * (127 / max)) ties to even, quant_hwy.hpp's rule) and
// laid out NHWC, the layout oneDNN's int8 kernels read. The weight's codes are s8 already;
// the primitive takes the weight's scales as constant output scales (per output channel,
// mask 1 << 1, or one), fixed at creation so that oneDNN picks its AMX / VNNI kernels; the
// image scale a_n and the bias are applied in the one pass that turns oneDNN's NHWC f32
// result into the NCHW output. The weight is reordered once per plan (oneDNN's layout, format
// any) and kept with the weight (QuantPrim::cache) with the primitive, one per input shape.
//
// Where oneDNN offers only its reference loops for a shape, the route is the im2col one
// (unfold4d, then q_matmul: oneDNN's int8 matmul); where an image holds a NaN or an inf (no
// int8 code), an f64 x, or no oneDNN at all, the default's: the weight dequantized, then the
// float conv2d.
#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backends/cpu/cpu_info.hpp"
#include "backends/cpu/cpu_ops.hpp"
#include "backends/cpu/gemm.hpp"
#include "backends/cpu/layout_hwy.hpp"
#include "backends/cpu/parallel.hpp"
#include "backends/cpu/quant.hpp"
#include "backends/cpu/quant_hwy.hpp"
#include "backends/cpu/quant_internal.hpp"
#include "dispatch/quant.hpp"
#include "dispatch/quant_model.hpp"
#include "lib/core/nn_shape.hpp"

namespace tensor::cpu::qdetail {
namespace {

using dispatch::DispatchTensor;
using dispatch::Family;
using dispatch::Kind;
namespace q = dispatch::quant;

// The default's route: the weight dequantized to x's dtype, then the float conv2d.
Prim dequantized_conv(CpuRef x, Prim pw, Prim bias, const core::ConvArgs& a) {
  const DType xdt = x->dtype();
  const dispatch::Backend& b = dispatch::backend_of(x->device());
  Prim wf = dequantize(std::move(pw), xdt);
  return b.get<Family::Conv>(OpCode::conv2d)(Prim(std::move(x)), std::move(wf), std::move(bias), a);
}

#if TENSOR_HAVE_ONEDNN
// One compiled convolution for one input shape, with the weight reordered for it.
using ConvPlan = qdetail::Int8Primitive;

using PlanKey = std::array<std::int64_t, 9>;  // N, H, W, stride, padding, dilation (2 each)

struct ConvWeight final : q::QuantCache {
  std::mutex mu;
  std::map<PlanKey, std::shared_ptr<const ConvPlan>> plans;
  Prim kn;  // the im2col route's product weight [K, C_out] (made on first use)
};

std::shared_ptr<const ConvPlan> make_conv_plan(const PlanKey& key, const Shape& ws, std::int64_t oh, std::int64_t ow,
                                               const std::int8_t* codes, const std::vector<float>& wscales) {
  auto p = std::make_shared<ConvPlan>();
  const dnnl_engine_t e = int8_engine();
  if (e == nullptr) return p;
  const auto oc = static_cast<dnnl_dim_t>(ws[0]), ic = static_cast<dnnl_dim_t>(ws[1]);
  const auto kh = static_cast<dnnl_dim_t>(ws[2]), kw = static_cast<dnnl_dim_t>(ws[3]);
  const dnnl_dims_t sd = {key[0], ic, key[1], key[2]}, wd = {oc, ic, kh, kw}, dd = {key[0], oc, oh, ow};
  const dnnl_dims_t strides = {key[3], key[4]}, pad = {key[5], key[6]}, dil = {key[7] - 1, key[8] - 1};
  dnnl_memory_desc_t wany{}, plain{};
  if (dnnl_memory_desc_init_by_tag(&p->src, 4, sd, dnnl_s8, dnnl_nhwc) != dnnl_success ||
      dnnl_memory_desc_init_by_tag(&wany, 4, wd, dnnl_s8, dnnl_format_tag_any) != dnnl_success ||
      dnnl_memory_desc_init_by_tag(&plain, 4, wd, dnnl_s8, dnnl_oihw) != dnnl_success ||
      dnnl_memory_desc_init_by_tag(&p->dst, 4, dd, dnnl_f32, dnnl_nhwc) != dnnl_success)
    return p;
  dnnl_convolution_desc_t cd;
  if (dnnl_dilated_convolution_forward_desc_init(&cd, dnnl_forward_inference, dnnl_convolution_direct, &p->src, &wany,
                                                 nullptr, &p->dst, strides, dil, pad, pad) != dnnl_success)
    return p;
  const dnnl_primitive_desc_t pd = qdetail::scaled_int8_desc(&cd, wscales, e, p->impl);
  if (pd == nullptr) return p;
  const dnnl_memory_desc_t* w = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
  const dnnl_memory_desc_t* sp = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
  // A kernel of oneDNN's own (brgemm, jit or its int8 gemm), not its reference loops.
  const bool kernel = !p->impl.empty() && !p->impl.starts_with("ref");
  if (kernel && w != nullptr) {
    p->wei = *w;
    if (sp != nullptr) {
      p->scratch = *sp;
      p->scratch_bytes = dnnl_memory_desc_get_size(sp);
    }
    if (!reorder_codes(&p->weights, p->wei, plain, codes) || dnnl_primitive_create(&p->prim, pd) != dnnl_success)
      p->prim = nullptr;
  }
  dnnl_primitive_desc_destroy(pd);
  return p;
}

std::shared_ptr<const ConvPlan> plan_for(const q::QuantPrim& w, ConvWeight& cache, const PlanKey& key, std::int64_t oh,
                                         std::int64_t ow) {
  {
    const std::lock_guard<std::mutex> lock(cache.mu);
    if (auto it = cache.plans.find(key); it != cache.plans.end()) return it->second;
  }
  CpuRef codes = to_contiguous(as_cpu(DispatchTensor(w.codes()).take()));
  CpuRef sc = to_contiguous(as_cpu(DispatchTensor(w.scales()).take()));
  const float* s = reinterpret_cast<const float*>(sc->data());
  const std::vector<float> wscales(s, s + sc->shape().num_elements());
  auto plan = make_conv_plan(key, w.shape(), oh, ow, reinterpret_cast<const std::int8_t*>(codes->data()), wscales);
  const std::lock_guard<std::mutex> lock(cache.mu);
  if (cache.plans.size() >= 16) cache.plans.clear();  // bounded: a plan in use stays alive
  return cache.plans.try_emplace(key, plan).first->second;
}

// out[n, c, p] = y[n, p, c] * scale[n] + bias[c] (y: [N, P, C] f32; bias may be null).
void nhwc_to_nchw(const float* y, const float* scale, const float* bias, std::int64_t n, std::int64_t p, std::int64_t c,
                  float* out) {
  auto image = [&](std::size_t i) {
    const float* yi = y + static_cast<std::int64_t>(i) * p * c;
    float* oi = out + static_cast<std::int64_t>(i) * p * c;
    const float s = scale != nullptr ? scale[i] : 1.0f;
    // the image's [P, C] block transposed to [C, P] (register tiles), then each channel's row
    // scaled and offset while it is in cache
    simd::transpose_u32(reinterpret_cast<const std::uint32_t*>(yi), c, reinterpret_cast<std::uint32_t*>(oi), p,
                        static_cast<std::size_t>(p), static_cast<std::size_t>(c));
    for (std::int64_t ch = 0; ch < c; ++ch)
      simd::scale_add_f32(oi + ch * p, static_cast<std::size_t>(p), s, bias != nullptr ? bias[ch] : 0.0f);
  };
  parallel_chunks(static_cast<std::size_t>(n), image);
}

// out[n, c, i, j] = relu(the 2x2 max pool of nhwc_to_nchw's image n at rows 2i, 2i+1, columns
// 2j, 2j+1), out [N, C, OH/2, OW/2]: each image pooled, scaled, offset and relu'd in NHWC
// (pool_scale_relu_nhwc_f32: the max of four channel vectors, then the scale; the same floats
// as scaling first, since the image scale is >= 0), then its pooled [OH/2 * OW/2, C] block
// transposed to [C, OH/2 * OW/2] (a quarter of the transpose the full output would take).
void nhwc_to_nchw_relu_pool(const float* y, const float* scale, const float* bias, std::int64_t n, std::int64_t oh,
                            std::int64_t ow, std::int64_t c, float* out) {
  const std::int64_t q = (oh / 2) * (ow / 2);
  auto image = [&](std::size_t i) {
    thread_local std::vector<float> pooled;
    if (pooled.size() < static_cast<std::size_t>(q * c)) pooled.resize(static_cast<std::size_t>(q * c));
    simd::pool_scale_relu_nhwc_f32(y + static_cast<std::int64_t>(i) * oh * ow * c, static_cast<std::size_t>(oh),
                                   static_cast<std::size_t>(ow), static_cast<std::size_t>(c),
                                   scale != nullptr ? scale[i] : 1.0f, bias, pooled.data());
    simd::transpose_u32(reinterpret_cast<const std::uint32_t*>(pooled.data()), c,
                        reinterpret_cast<std::uint32_t*>(out + static_cast<std::int64_t>(i) * c * q), q,
                        static_cast<std::size_t>(q), static_cast<std::size_t>(c));
  };
  parallel_chunks(static_cast<std::size_t>(n), image);
}

// The int8 convolution of x (contiguous f32 [N, C, H, W]) into out (f32 [N, OC, OH, OW]);
// false where oneDNN has no kernel for the shape (`refused` set) or an image is not finite.
// The batch goes in chunks of images on parallel_chunks, each chunk start to end on one
// thread (quantize, oneDNN's primitive on one OpenMP thread, NCHW + scale + bias): as the
// f32 conv does (GemmThreadScope), no OpenMP team whose spinning workers would compete with
// the library's threads on a shared machine, and each chunk's data stays in that core's cache.
// With relu_pool, out is relu(max_pool2d(conv, 2x2)) [N, OC, OH/2, OW/2] instead (the pool and
// relu in the NCHW epilogue: the full-size output is never stored).
bool onednn_conv(const q::QuantPrim& w, ConvWeight& cache, const float* x, const Shape& xs, const core::ConvArgs& a,
                 std::int64_t oh, std::int64_t ow, const float* bias, float* out, bool& refused, bool relu_pool = false) {
  const auto n = static_cast<std::int64_t>(xs[0]), c = static_cast<std::int64_t>(xs[1]);
  const auto hw = static_cast<std::int64_t>(xs[2] * xs[3]);
  const auto oc = static_cast<std::int64_t>(w.shape()[0]);
  const std::int64_t threads = std::max(1, omp_threads());
  // Images per chunk: two chunks per thread at most, and at most kChunkOutBytes of f32 output
  // (oneDNN's NHWC result, read back at once by the epilogue: it stays in cache between the
  // two). The eval cnn's conv2 (64 x 14 x 14 outputs, 50 KB an image) at batch 500 took 46.1-
  // 48.5 us of CPU per image in chunks of 125 (6.3 MB), 42.8-45.3 in chunks of 32 or 64
  // (2026-12-07, load ~1, `tensorctl eval --quantize q8s`).
  constexpr std::int64_t kChunkOutBytes = std::int64_t{2} << 20;
  const std::int64_t out_image_bytes = std::max<std::int64_t>(1, oh * ow * oc * static_cast<std::int64_t>(sizeof(float)));
  const std::int64_t by_bytes = std::max<std::int64_t>(1, kChunkOutBytes / out_image_bytes);
  const std::int64_t per =
      std::min(by_bytes, threads == 1 ? n : std::max<std::int64_t>(1, (n + 2 * threads - 1) / (2 * threads)));
  const std::int64_t chunks = (n + per - 1) / per;
  auto key_for = [&](std::int64_t images) {
    return PlanKey{images, static_cast<std::int64_t>(xs[2]), static_cast<std::int64_t>(xs[3]), a.stride[0], a.stride[1],
                   a.padding[0], a.padding[1], a.dilation[0], a.dilation[1]};
  };
  const auto first = plan_for(w, cache, key_for(per), oh, ow);
  refused = first->prim == nullptr;
  if (refused) return false;
  std::atomic<bool> failed{false};
  auto chunk = [&](std::size_t ci) {
    const std::int64_t i0 = static_cast<std::int64_t>(ci) * per, cnt = std::min(per, n - i0);
    const auto plan = cnt == per ? first : plan_for(w, cache, key_for(cnt), oh, ow);
    if (plan->prim == nullptr) {
      failed = true;
      return;
    }
    // this thread's buffers (no page faults, no zeroing per call)
    thread_local std::vector<std::int8_t> xq;
    thread_local std::vector<float> y, xt;
    xq.resize(static_cast<std::size_t>(cnt * c * hw));
    xt.resize(static_cast<std::size_t>(c * hw));
    y.resize(static_cast<std::size_t>(cnt * oh * ow * oc));
    std::vector<float> scale(static_cast<std::size_t>(cnt));
    for (std::int64_t i = 0; i < cnt; ++i) {  // each image: its scale, its codes [C, HW] as [HW, C]
      const float* xi = x + (i0 + i) * c * hw;
      bool good = true;
      const float amax = simd::abs_max_f32(xi, static_cast<std::size_t>(c * hw), &good);
      if (!good) {
        failed = true;
        return;
      }
      scale[static_cast<std::size_t>(i)] = amax / 127.0f;
      // [C, HW] transposed to [HW, C] in floats (register tiles), then quantized in order
      simd::transpose_u32(reinterpret_cast<const std::uint32_t*>(xi), hw, reinterpret_cast<std::uint32_t*>(xt.data()), c,
                          static_cast<std::size_t>(c), static_cast<std::size_t>(hw));
      simd::quantize_s8(xt.data(), xt.size(), amax > 0.0f ? 127.0f / amax : 0.0f, xq.data() + i * c * hw);
    }
    Int8Stream& ts = this_thread_stream();
    if (ts.stream == nullptr) {
      failed = true;
      return;
    }
    if (ts.scratch.size() < plan->scratch_bytes) ts.scratch.resize(plan->scratch_bytes);
    std::array<dnnl_memory_t, 3> mem{};
    const dnnl_engine_t e = int8_engine();
    bool ok = dnnl_memory_create(&mem[0], &plan->src, e, xq.data()) == dnnl_success &&
              dnnl_memory_create(&mem[1], &plan->dst, e, y.data()) == dnnl_success &&
              (plan->scratch_bytes == 0 || dnnl_memory_create(&mem[2], &plan->scratch, e, ts.scratch.data()) == dnnl_success);
    if (ok) {
      const GemmThreadScope one_thread;
      const dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, mem[0]}, {DNNL_ARG_WEIGHTS, plan->weights}, {DNNL_ARG_DST, mem[1]},
                                       {DNNL_ARG_SCRATCHPAD, mem[2]}};
      ok = dnnl_primitive_execute(plan->prim, ts.stream, plan->scratch_bytes == 0 ? 3 : 4, args) == dnnl_success &&
           dnnl_stream_wait(ts.stream) == dnnl_success;
    }
    for (dnnl_memory_t m : mem)
      if (m != nullptr) dnnl_memory_destroy(m);
    if (!ok) {
      failed = true;
      return;
    }
    if (relu_pool) {
      nhwc_to_nchw_relu_pool(y.data(), scale.data(), bias, cnt, oh, ow, oc, out + i0 * oc * (oh / 2) * (ow / 2));
    } else {
      nhwc_to_nchw(y.data(), scale.data(), bias, cnt, oh * ow, oc, out + i0 * oc * oh * ow);
    }
  };
  parallel_chunks(static_cast<std::size_t>(chunks), chunk);
  if (failed) return false;
  set_conv_route("onednn conv " + first->impl);
  return true;
}

// The im2col route: unfold4d's [N, K, L] read as [N, L, K] times the weight [K, C_out] on
// q_matmul (oneDNN's int8 matmul), then NCHW with the bias.
bool im2col_conv(const q::QuantPrim& w, ConvWeight& cache, CpuRef x, const core::ConvArgs& a, std::int64_t oh,
                 std::int64_t ow, const float* bias, float* out) {
  const Shape& ws = w.shape();
  const std::size_t oc = ws[0], k = ws.num_elements() / std::max<std::size_t>(oc, 1);
  Prim kn;
  {
    const std::lock_guard<std::mutex> lock(cache.mu);
    if (!cache.kn) {
      CpuRef codes = to_contiguous(as_cpu(DispatchTensor(w.codes()).take()));
      Layout l;
      l.strides[0] = 1;
      l.strides[1] = static_cast<std::int64_t>(k);
      CpuRef t = make_view(std::move(codes), Shape{k, oc}, l);  // [C_out, K] read as [K, C_out]
      QuantScheme scheme = w.scheme();
      if (scheme.level.is_block()) scheme = scheme.with_level(QuantLevel::block({static_cast<std::uint32_t>(k), 1}));
      cache.kn = Prim(dispatch::Ref<q::QuantPrim>::make(Shape{k, oc}, w.device(), scheme,
                                                        DispatchTensor(Prim(std::move(t)), Kind::Int), w.scales()));
    }
    kn = cache.kn;
  }
  core::FoldArgs f;
  f.kernel = {static_cast<std::int64_t>(ws[2]), static_cast<std::int64_t>(ws[3])};
  for (std::size_t i = 0; i < 2; ++i) {
    f.options.stride[i] = a.stride[i];
    f.options.padding[i] = a.padding[i];
    f.options.dilation[i] = a.dilation[i];
  }
  const std::size_t n = x->shape()[0];
  const dispatch::Backend& b = dispatch::backend_of(x->device());
  CpuRef cols = to_contiguous(as_cpu(b.get<Family::Unfold4d>(OpCode::unfold4d)(Prim(std::move(x)), f)));  // [N, K, L]
  const std::size_t l = cols->shape()[2];
  Layout sw;
  sw.strides[0] = static_cast<std::int64_t>(k * l);
  sw.strides[1] = 1;
  sw.strides[2] = static_cast<std::int64_t>(l);
  Prim y = q_matmul(Prim(make_view(std::move(cols), Shape{n, l, k}, sw)), std::move(kn));  // [N, L, C_out]
  CpuRef yc = f32_dense(as_cpu(std::move(y)));
  nhwc_to_nchw(reinterpret_cast<const float*>(yc->data()), nullptr, bias, static_cast<std::int64_t>(n), oh * ow,
               static_cast<std::int64_t>(oc), out);
  return true;
}
#endif

}  // namespace

Prim q_conv2d_entry(Prim px, Prim pw, Prim pbias, const dispatch::QConvArgs& qa) {
  const auto& w = dispatch::prim_as<q::QuantPrim>(pw);
  CpuRef x = as_cpu(std::move(px));
  const core::ConvArgs& a = qa.conv;
  const DType xdt = x->dtype();
  const Shape xs = x->shape();
  const Shape out_shape = core::conv_output_shape("q_conv2d", xs, w.shape(), a, nullptr);
#if TENSOR_HAVE_ONEDNN
  const std::size_t k = w.shape().num_elements() / std::max<std::size_t>(w.shape()[0], 1);
  if (xdt != DType::F64 && k > 0 && out_shape.num_elements() > 0) {
    CpuRef xf = f32_dense(x);
    CpuRef bf = pbias ? f32_dense(as_cpu(Prim(pbias))) : CpuRef{};
    const float* bias = bf ? reinterpret_cast<const float*>(bf->data()) : nullptr;
    auto cache = w.cache<ConvWeight>([] { return std::make_shared<ConvWeight>(); });
    CpuRef out = alloc_tensor(DType::F32, out_shape);
    const auto oh = static_cast<std::int64_t>(out_shape[2]), ow = static_cast<std::int64_t>(out_shape[3]);
    bool refused = false;
    bool done = onednn_conv(w, *cache, reinterpret_cast<const float*>(xf->data()), xs, a, oh, ow, bias,
                            reinterpret_cast<float*>(out->data()), refused);
    if (!done && refused) {  // no oneDNN kernel for this shape: im2col and the int8 product
      done = im2col_conv(w, *cache, xf, a, oh, ow, bias, reinterpret_cast<float*>(out->data()));
      if (done) set_conv_route("im2col + " + last_q_matmul_route());
    }
    if (done) return xdt == DType::F32 ? Prim(std::move(out)) : Prim(convert_tensor(std::move(out), xdt));
  }
#endif
  set_conv_route("dequantize + f32 conv2d");
  if (out_shape.num_elements() == 0) {
    set_conv_route("none (an empty result)");
    return Prim(alloc_tensor(xdt, out_shape));
  }
  return dequantized_conv(std::move(x), std::move(pw), std::move(pbias), a);
}

}  // namespace tensor::cpu::qdetail

namespace tensor::cpu {

dispatch::Prim q_conv2d_relu_pool(const dispatch::Primitive& x, const dispatch::Primitive& w, const dispatch::Primitive* bias,
                                  const tensor::nn::ConvOptions<2>& options) {
#if TENSOR_HAVE_ONEDNN
  namespace q = dispatch::quant;
  const auto* qw = dynamic_cast<const q::QuantPrim*>(&w);
  const auto* xc = dynamic_cast<const CpuTensor*>(&x);
  const auto* bc = bias != nullptr ? dynamic_cast<const CpuTensor*>(bias) : nullptr;
  if (qw == nullptr || xc == nullptr || (bias != nullptr && bc == nullptr)) return nullptr;
  if (xc->dtype() != DType::F32 || !xc->is_contiguous() || (bc && (bc->dtype() != DType::F32 || !bc->is_contiguous())))
    return nullptr;
  const Shape& ws = qw->shape();
  if (x.shape().rank() != 4 || ws.rank() != 4 || ws[0] == 0) return nullptr;
  // dispatch's conv_quantized rule for the int8 route (dispatch/rules/quant.cpp): groups 1,
  // at least kMinIntConvK products per output, per-output-channel (or per-tensor) scales
  const core::ConvArgs a = core::normalized(core::conv_args(options), 2);
  if (a.groups != 1 || ws.num_elements() / ws[0] < q::kMinIntConvK) return nullptr;
  if (qw->scheme().level.is_block() && q::grid_shape("conv2d", ws, qw->scheme()) != Shape{ws[0], 1, 1, 1}) return nullptr;
  Shape out;
  try {
    const Shape bs = bias != nullptr ? bias->shape() : Shape{};
    out = core::conv_output_shape("q_conv2d", x.shape(), ws, a, bias != nullptr ? &bs : nullptr);
  } catch (const std::exception&) {
    return nullptr;  // the modules report it
  }
  if (out[0] == 0 || out[2] < 2 || out[3] < 2) return nullptr;
  const auto oh = static_cast<std::int64_t>(out[2]), ow = static_cast<std::int64_t>(out[3]);
  auto cache = qw->cache<qdetail::ConvWeight>([] { return std::make_shared<qdetail::ConvWeight>(); });
  CpuRef y = alloc_tensor(DType::F32, Shape{out[0], out[1], out[2] / 2, out[3] / 2});
  bool refused = false;
  const float* b = bc ? reinterpret_cast<const float*>(bc->data()) : nullptr;
  if (!qdetail::onednn_conv(*qw, *cache, reinterpret_cast<const float*>(xc->data()), x.shape(), a, oh, ow, b,
                            reinterpret_cast<float*>(y->data()), refused, true))
    return nullptr;  // no oneDNN kernel, or an image that is not finite: the modules' routes
  qdetail::set_conv_route(last_q_conv2d_route() + " + relu + max-pool 2x2");
  return dispatch::Prim(std::move(y));
#else
  (void)x, (void)w, (void)bias, (void)options;
  return nullptr;
#endif
}

}  // namespace tensor::cpu
