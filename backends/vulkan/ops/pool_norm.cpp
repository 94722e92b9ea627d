// Pooling and normalisation on the module shader (module.comp): max / average / adaptive
// average pooling, interpolate and layer_norm with their backwards, plus embedding and embedding_backward on the index
// family (index.comp: out-of-range indices flagged there, the IndexError raised when the
// result is read, as gather/select).
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <bit>
#include <string>
#include <vector>

#include "backends/vulkan/shaders/module_codes.h"
#include "backends/vulkan/ops/kernel.hpp"
#include "backends/vulkan/vk_ops.hpp"
#include "lib/core/current_op.hpp"
#include "lib/core/nn_shape.hpp"
#include "tensor/error.hpp"

namespace tensor::vulkan {

using namespace kernel;
using dispatch::InterpArgs;
using dispatch::PoolArgs;
using dispatch::PrimPair;
using I = std::int64_t;

namespace {

// Pools and interpolate as three spatial dims: 1-d and 2-d put size-1 dims first.
struct Geom {
  std::size_t planes = 0, channels = 1;
  std::array<I, 3> in{1, 1, 1}, out{1, 1, 1}, kernel{1, 1, 1}, stride{1, 1, 1}, padding{0, 0, 0}, dilation{1, 1, 1};
  std::uint32_t flags = 0;
};

// `args` dim i (of `rank`) lands in slot 3 - rank + i.
Geom pool_geom(const Shape& x, const Shape& y, const PoolArgs& a, std::size_t rank) {
  Geom g;
  g.planes = x[0] * x[1];
  g.channels = x[1];
  for (std::size_t i = 0; i < rank; ++i) {
    const std::size_t s = 3 - rank + i;
    g.in[s] = static_cast<I>(x[2 + i]);
    g.out[s] = static_cast<I>(y[2 + i]);
    g.kernel[s] = a.kernel[i];
    g.stride[s] = a.stride[i];
    g.padding[s] = a.padding[i];
    g.dilation[s] = a.dilation[i];
  }
  return g;
}

// The pooled output shape (dispatch validated the arguments with the same rules).
Shape pool_out(const Shape& x, const PoolArgs& a, std::size_t rank, bool max_pool, bool adaptive) {
  Shape y{x[0], x[1]};
  for (std::size_t i = 0; i < rank; ++i) {
    if (adaptive) {
      y.push_back(static_cast<std::size_t>(a.output_size[i]));
      continue;
    }
    const I d = max_pool ? a.dilation[i] : 1;
    y.push_back(static_cast<std::size_t>(tensor::core::pool_out_size(static_cast<I>(x[2 + i]), a.kernel[i], a.stride[i],
                                                                   a.padding[i], d, a.ceil_mode)));
  }
  return y;
}

// Strides of `t` ([N, C, *spatial of rank r]) as the shader's operand words.
void put_operand(Params& p, int base, const VulkanTensor& t, std::size_t rank) {
  p.w[base] = static_cast<std::uint32_t>(t.offset());
  p.w[base + 1] = static_cast<std::uint32_t>(t.shape()[0] > 1 ? t.stride(0) : 0);
  p.w[base + 2] = static_cast<std::uint32_t>(t.shape()[1] > 1 ? t.stride(1) : 0);
  for (std::size_t i = 0; i < rank; ++i)
    p.w[base + 3 + 3 - rank + i] = static_cast<std::uint32_t>(t.shape()[2 + i] > 1 ? t.stride(2 + i) : 0);
}

// On a software device one invocation's loops stop after 65535 iterations: a window (or
// a gather's range of covering outputs) of more taps than kLoopSafe raises instead.
void check_taps(const Context& c, std::size_t taps, const char* what) {
  if (taps > kLoopSafe && c.software())
    throw ExecutionError(fmt::format("[{}] {} too large for a software Vulkan device (its shader loops stop after 65535 "
                                     "iterations); expected at most {} taps; got {}",
                                     core::current_op_name(), what, kLoopSafe, taps));
}

// module.comp works in 32-bit ints: a window's input position o * stride - padding + t *
// dilation, i + padding, the adaptive bounds o * in / out and i * out / in, and the nearest
// modes' (2 o + 1) * in must stay below 2^31, so every option is one unmangled shader word.
// Refused before anything is recorded.
void check_int32(int op, const Geom& g) {
  constexpr I kMax = 0x7FFFFFFF;
  const auto fits = [](I v) { return v >= 0 && v <= kMax; };
  const bool adaptive = op == MD_ADAPTIVE || op == MD_ADAPTIVE_BWD;
  // The nearest modes pick taps in ints; bilinear and bicubic in floats.
  const bool interp = (op == MD_INTERP || op == MD_INTERP_BWD) && ((g.flags >> MD_MODE_SHIFT) & 3u) < 2u;
  for (int k = 0; k < 3; ++k) {
    const I in = g.in[k], out = g.out[k], ks = g.kernel[k], s = g.stride[k], p = g.padding[k], dl = g.dilation[k];
    bool ok = fits(in) && fits(out) && fits(ks) && fits(s) && fits(p) && fits(dl) && in + p <= kMax;
    if (ok) {  // each factor below 2^31: no int64 overflow
      const I span = std::max<I>(out - 1, 0) * s, reach = std::max<I>(ks - 1, 0) * dl;
      ok = span <= kMax && reach <= kMax && span + reach + p + ks <= kMax;
      if (adaptive) ok = ok && (out + 1) * in + out <= kMax && (in + 1) * out + in <= kMax;
      if (interp) ok = ok && 2 * (out + 1) * in <= kMax;
    }
    if (!ok)
      throw ExecutionError(fmt::format(
          "[{}] window geometry beyond vulkan's 32-bit shader arithmetic; expected (out - 1) * stride + padding + "
          "(kernel - 1) * dilation + kernel, in + padding{} below 2^31 along every spatial dim; got in {}, out {}, "
          "kernel {}, stride {}, padding {}, dilation {}",
          core::current_op_name(), adaptive ? " and (out + 1) * in" : interp ? " and 2 (out + 1) * in" : "", in, out, ks,
          s, p, dl));
  }
}

// One module.comp dispatch over `count` invocations (one per element of `out`).
void launch(int op, const Geom& g, std::size_t count, const VulkanTensor& a, const VulkanTensor* b, std::size_t rank,
            VulkanTensor& out, VulkanTensor* x, DType idx_dt, const std::string* check = nullptr) {
  if (count == 0) return;
  check_int32(op, g);
  Params p;
  p.w[MP_N] = static_cast<std::uint32_t>(count);
  p.w[MP_C] = static_cast<std::uint32_t>(g.channels);
  for (int k = 0; k < 3; ++k) {
    p.w[MP_IN + k] = static_cast<std::uint32_t>(g.in[k]);
    p.w[MP_OUT + k] = static_cast<std::uint32_t>(g.out[k]);
    p.w[MP_K + k] = static_cast<std::uint32_t>(g.kernel[k]);
    p.w[MP_S + k] = static_cast<std::uint32_t>(g.stride[k]);
    p.w[MP_P + k] = static_cast<std::uint32_t>(g.padding[k]);
    p.w[MP_D + k] = static_cast<std::uint32_t>(g.dilation[k]);
  }
  p.w[MP_FLAGS] = g.flags;
  put_operand(p, MP_A, a, rank);
  if (b) put_operand(p, MP_B, *b, rank);
  std::uint32_t gx, gy;
  groups_for((count + 255) / 256, gx, gy);
  const DType dt = out.dtype();
  a.ctx().dispatch(ShaderFamily::Module, {static_cast<std::uint32_t>(op), code(dt), code(idx_dt)}, p.w,
                   {{a.buffer().get(), false}, {b ? b->buffer().get() : nullptr, false},
                    {x ? x->buffer().get() : nullptr, true}, {out.buffer().get(), true}},
                   gx, gy, 1, wide({dt, idx_dt}), check);
}

std::size_t rank_of(OpCode op, const PoolArgs& a) {
  switch (op) {
    case OpCode::max_pool1d: case OpCode::max_pool1d_with_indices: case OpCode::avg_pool1d:
    case OpCode::adaptive_avg_pool1d:
      return 1;
    case OpCode::adaptive_avg_pool3d: return 3;
    case OpCode::max_pool2d: case OpCode::max_pool2d_with_indices: case OpCode::avg_pool2d:
    case OpCode::adaptive_avg_pool2d:
      return 2;
    default: return a.rank;
  }
}

std::size_t window_taps(const Geom& g, bool dilated_span_per_stride) {
  std::size_t n = 1;
  for (int k = 0; k < 3; ++k) {
    // A window visits only its taps inside the input (module.comp's pool_taps): at most
    // ceil(in / dilation) of them however wide the kernel.
    const I span = dilated_span_per_stride ? ((g.kernel[k] - 1) * g.dilation[k] + g.stride[k]) / g.stride[k]
                                           : std::min(g.kernel[k], (g.in[k] + g.dilation[k] - 1) / g.dilation[k]);
    n *= static_cast<std::size_t>(std::max<I>(span, 1));
  }
  return n;
}

// Windows of more taps than one invocation may loop over on lavapipe: one spatial dim per
// pass (maxima, sums and the avg divisor, a product of per-dim lengths, are separable), in
// f32 (f64) so that f16 / bf16 round once.
Prim pool_per_dim(int op, VkRef x, const Shape& ys, const PoolArgs& a, std::size_t rank, std::uint32_t flags) {
  const DType want = x->dtype(), work = want == DType::F64 ? DType::F64 : DType::F32;
  VkRef cur = want == work ? std::move(x) : convert(x, work);
  for (std::size_t i = 0; i < rank; ++i) {
    Shape s = cur->shape();
    s[2 + i] = ys[2 + i];
    PoolArgs one = a;
    for (std::size_t j = 0; j < rank; ++j)
      if (j != i) one.kernel[j] = one.stride[j] = one.dilation[j] = 1, one.padding[j] = 0;
    Geom step = pool_geom(cur->shape(), s, one, rank);
    step.flags = flags;
    check_taps(cur->ctx(), window_taps(step, false), "pooling window");
    VkRef next = alloc(cur->device(), work, s);
    launch(op, step, s.num_elements(), *cur, nullptr, rank, *next, nullptr, DType::I32);
    cur = std::move(next);
  }
  return want == work ? cur : convert(cur, want);
}

// ---- max pooling ----
PrimPair max_pool_run(OpCode op, Prim px, const PoolArgs& a, bool with_indices, DType idx_dt) {
  VkRef x = as_vk(std::move(px));
  const std::size_t rank = rank_of(op, a);
  const Shape ys = pool_out(x->shape(), a, rank, true, false);
  Geom g = pool_geom(x->shape(), ys, a, rank);
  if (with_indices) g.flags |= MD_WITH_INDICES;
  if (ys.num_elements()) check_int32(MD_MAX_POOL, g);  // before the per-dim passes record anything
  if (!with_indices && window_taps(g, false) > kLoopSafe) return {pool_per_dim(MD_MAX_POOL, x, ys, a, rank, 0), Prim()};
  check_taps(x->ctx(), window_taps(g, false), "pooling window");
  VkRef y = alloc(x->device(), x->dtype(), ys);
  VkRef idx = with_indices ? alloc(x->device(), idx_dt, ys) : VkRef();
  launch(MD_MAX_POOL, g, ys.num_elements(), *x, nullptr, rank, *y, idx.get(), with_indices ? idx_dt : DType::I32);
  return {Prim(std::move(y)), Prim(std::move(idx))};
}
template <OpCode op>
Prim max_pool_entry(Prim x, const PoolArgs& a) {
  return max_pool_run(op, std::move(x), a, false, DType::I32).first;
}
template <OpCode op>
PrimPair max_pool_wi_entry(Prim x, const PoolArgs& a, DType idx_dt) {
  return max_pool_run(op, std::move(x), a, true, idx_dt);
}
Prim max_pool_backward_entry(Prim pdy, Prim pidx, const Shape& xs, const PoolArgs& a) {
  VkRef dy = as_vk(std::move(pdy));
  VkRef idx = as_vk(std::move(pidx));
  const std::size_t rank = a.rank;
  Geom g = pool_geom(xs, dy->shape(), a, rank);
  check_taps(dy->ctx(), window_taps(g, true), "max pool gradient range");
  VkRef dx = alloc(dy->device(), dy->dtype(), xs);
  // The indices come from the caller: a pass over them flags one that is not -1 or a tap
  // of its own window, and dx then reads as that IndexError (the gather below would
  // drop such a gradient silently).
  const std::string check = fmt::format(
      "[{}] index outside its pooling window; expected -1 or the flat h*W+w position of a tap of its output's window",
      core::current_op_name());
  launch(MD_MAX_POOL_CHECK, g, dy->shape().num_elements(), *dy, idx.get(), rank, *dx, nullptr, idx->dtype(), &check);
  launch(MD_MAX_POOL_BWD, g, xs.num_elements(), *dy, idx.get(), rank, *dx, nullptr, idx->dtype());
  return dx;
}

// ---- average pooling ----
template <OpCode op>
Prim avg_pool_entry(Prim px, const PoolArgs& a) {
  VkRef x = as_vk(std::move(px));
  const std::size_t rank = rank_of(op, a);
  const Shape ys = pool_out(x->shape(), a, rank, false, false);
  Geom g = pool_geom(x->shape(), ys, a, rank);
  if (a.count_include_pad) g.flags |= MD_COUNT_PAD;
  if (ys.num_elements()) check_int32(MD_AVG_POOL, g);
  if (window_taps(g, false) > kLoopSafe) return pool_per_dim(MD_AVG_POOL, x, ys, a, rank, g.flags);
  check_taps(x->ctx(), window_taps(g, false), "pooling window");
  VkRef y = alloc(x->device(), x->dtype(), ys);
  launch(MD_AVG_POOL, g, ys.num_elements(), *x, nullptr, rank, *y, nullptr, DType::I32);
  return y;
}
Prim avg_pool_backward_entry(Prim pdy, const Shape& xs, const PoolArgs& a) {
  VkRef dy = as_vk(std::move(pdy));
  const std::size_t rank = a.rank;
  Geom g = pool_geom(xs, dy->shape(), a, rank);
  if (a.count_include_pad) g.flags |= MD_COUNT_PAD;
  Geom span = g;
  span.dilation = {1, 1, 1};
  check_taps(dy->ctx(), window_taps(span, true), "avg pool gradient range");
  VkRef dx = alloc(dy->device(), dy->dtype(), xs);
  launch(MD_AVG_POOL_BWD, g, xs.num_elements(), *dy, nullptr, rank, *dx, nullptr, DType::I32);
  return dx;
}

// ---- adaptive average pooling ----
// The longest adaptive window along each dim: ceil(in / out) + 1 bounds it.
std::size_t adaptive_taps(const Geom& g, bool backward) {
  std::size_t n = 1;
  for (int k = 0; k < 3; ++k) {
    const I w = backward ? (g.out[k] + g.in[k] - 1) / g.in[k] + 1 : (g.in[k] + g.out[k] - 1) / g.out[k] + 1;
    n *= static_cast<std::size_t>(w);
  }
  return n;
}
template <OpCode op>
Prim adaptive_entry(Prim px, const PoolArgs& a) {
  VkRef x = as_vk(std::move(px));
  const std::size_t rank = rank_of(op, a);
  const Shape ys = pool_out(x->shape(), a, rank, false, true);
  const Geom g = pool_geom(x->shape(), ys, a, rank);
  if (ys.num_elements()) check_int32(MD_ADAPTIVE, g);
  if (adaptive_taps(g, false) > kLoopSafe) {
    // Large windows (global pooling of a big image): one spatial dim per pass, in f32
    // (f64) so that f16 / bf16 round once; each pass's window is one dim's.
    const DType want = x->dtype(), work = want == DType::F64 ? DType::F64 : DType::F32;
    VkRef cur = want == work ? x : convert(x, work);
    for (std::size_t i = 0; i < rank; ++i) {
      Shape s = cur->shape();
      s[2 + i] = ys[2 + i];
      Geom step = pool_geom(cur->shape(), s, a, rank);
      check_taps(x->ctx(), adaptive_taps(step, false), "adaptive pooling window");
      VkRef next = alloc(x->device(), work, s);
      launch(MD_ADAPTIVE, step, s.num_elements(), *cur, nullptr, rank, *next, nullptr, DType::I32);
      cur = std::move(next);
    }
    return want == work ? cur : convert(cur, want);
  }
  VkRef y = alloc(x->device(), x->dtype(), ys);
  launch(MD_ADAPTIVE, g, ys.num_elements(), *x, nullptr, rank, *y, nullptr, DType::I32);
  return y;
}
Prim adaptive_backward_entry(Prim pdy, const Shape& xs, const PoolArgs& a) {
  VkRef dy = as_vk(std::move(pdy));
  const std::size_t rank = xs.rank() - 2;
  const Geom g = pool_geom(xs, dy->shape(), a, rank);
  check_taps(dy->ctx(), adaptive_taps(g, true), "adaptive pool gradient range");
  VkRef dx = alloc(dy->device(), dy->dtype(), xs);
  launch(MD_ADAPTIVE_BWD, g, xs.num_elements(), *dy, nullptr, rank, *dx, nullptr, DType::I32);
  return dx;
}

// ---- interpolate ----
Geom interp_geom(const Shape& x, const InterpArgs& a) {
  Geom g;
  g.planes = x[0] * x[1];
  g.channels = x[1];
  g.in = {1, static_cast<I>(x[2]), static_cast<I>(x[3])};
  g.out = {1, a.size[0], a.size[1]};
  g.flags = (a.options.align_corners ? MD_ALIGN : 0u) | (static_cast<std::uint32_t>(a.options.mode) << MD_MODE_SHIFT);
  return g;
}
Prim interpolate_entry(Prim px, const InterpArgs& a) {
  VkRef x = as_vk(std::move(px));
  const Shape& xs = x->shape();
  const Geom g = interp_geom(xs, a);
  VkRef y = alloc(x->device(), x->dtype(), Shape{xs[0], xs[1], static_cast<std::size_t>(a.size[0]),
                                                 static_cast<std::size_t>(a.size[1])});
  launch(MD_INTERP, g, y->shape().num_elements(), *x, nullptr, 2, *y, nullptr, DType::I32);
  return y;
}
Prim interpolate_backward_entry(Prim pdy, const Shape& xs, const InterpArgs& a) {
  VkRef dy = as_vk(std::move(pdy));
  const Geom g = interp_geom(xs, a);
  // Per input element: the covering columns (about out/in + 4), each with its width taps
  // and the covering rows (about out/in + 4) times their height taps.
  auto range = [&](int k) { return static_cast<std::size_t>((g.out[k] + g.in[k] - 1) / g.in[k] + 4); };
  check_taps(dy->ctx(), range(2) * (8 + 4 * range(1)), "interpolate gradient range");
  VkRef dx = alloc(dy->device(), dy->dtype(), xs);
  launch(MD_INTERP_BWD, g, xs.num_elements(), *dy, nullptr, 2, *dx, nullptr, DType::I32);
  return dx;
}

// ---- layer_norm: one workgroup per row of the last dim ----
constexpr std::size_t kRowMaxSoftware = 256 * kLoopSafe / 2;  // 3 passes of d / 256 per invocation

Prim layer_norm_entry(Prim px, Prim pg, Prim pb, double eps) {
  VkRef x = as_vk(std::move(px));
  VkRef gamma = as_vk(std::move(pg));
  VkRef beta = pb ? as_vk(std::move(pb)) : VkRef();
  const Shape xs = x->shape();
  const std::size_t last = xs.rank() - 1, d = xs[last];
  check_loop_limit(*x, "layer_norm row", kRowMaxSoftware, last);
  VkRef y = alloc(x->device(), x->dtype(), xs);
  Shape rows = xs;
  rows[last] = 1;
  const std::size_t count = rows.num_elements();
  if (count == 0 || d == 0) return y;
  Params p;
  p.shape(rows, count);
  p.operand(0, Operand{x->buffer().get(), x->offset(), x->layout().strides}, rows.rank());
  p.extra(LN_D, static_cast<I>(d));
  p.extra(LN_XSTRIDE, x->stride(last));
  p.extra(LN_G, gamma->offset());
  p.extra(LN_G + 1, gamma->stride(0));
  if (beta) {
    p.extra(LN_B, beta->offset());
    p.extra(LN_B + 1, beta->stride(0));
    p.extra(LN_HAS_BETA, 1);
  }
  p.w[P_EXTRA + LN_EPS] = std::bit_cast<std::uint32_t>(static_cast<float>(eps));
  p.scalar(P_S0, std::bit_cast<std::uint64_t>(eps));
  std::uint32_t gx, gy;
  groups_for(count, gx, gy);
  x->ctx().dispatch(ShaderFamily::Module, {MD_LAYER_NORM, code(x->dtype()), code(DType::I32)}, p.w,
                    {{x->buffer().get(), false}, {gamma->buffer().get(), false},
                     {beta ? beta->buffer().get() : nullptr, false}, {y->buffer().get(), true}},
                    gx, gy, 1, wide({x->dtype()}));
  return y;
}

// ---- embedding (index.comp's gather over [*I, d]) ----
// `t` (contiguous, or a contiguous copy) viewed as `s`, keeping its offset: a batch slice
// starts past element 0 of its buffer.
VkRef contiguous_as(VkRef t, const Shape& s) {
  t = to_contiguous(std::move(t));
  VkLayout l = contiguous_layout(s);
  l.offset = t->offset();
  return make_view(std::move(t), s, l);
}

Prim embedding_entry(Prim pw, Prim pi) {
  VkRef w = as_vk(std::move(pw));
  VkRef idx = as_vk(std::move(pi));
  const std::size_t n = w->shape()[0], d = w->shape()[1], count = idx->shape().num_elements();
  Shape out = idx->shape();
  out.push_back(d);
  const std::string check = fmt::format("[embedding] index out of range; expected 0 <= index < {}", n);
  if (out.num_elements() == 0) {
    // No invocation runs for an empty result: the indices are checked here (as select).
    if (count != 0) {
      const std::vector<I> v = read_data(idx).get().convert(DType::I64).to_vec<I>();
      for (std::size_t i = 0; i < v.size(); ++i)
        if (v[i] < 0 || static_cast<std::uint64_t>(v[i]) >= n)
          throw IndexError(fmt::format("{}; got {} at position {}", check, v[i], i));
    }
    return alloc(w->device(), w->dtype(), out);
  }
  if (out.rank() > kMaxRank) idx = contiguous_as(std::move(idx), Shape{count});
  const Shape space = out.rank() > kMaxRank ? Shape{count, d} : out;
  const std::size_t r = space.rank();
  VkRef y = alloc(w->device(), w->dtype(), out);
  Operand oo{y->buffer().get(), 0, {}};
  I st = 1;
  for (std::size_t k = r; k-- > 0;) {
    oo.strides[k] = st;
    st *= static_cast<I>(space[k]);
  }
  Operand src{w->buffer().get(), w->offset(), {}};
  src.strides[r - 1] = d > 1 ? w->stride(1) : 0;
  Operand oi{idx->buffer().get(), idx->offset(), {}};
  for (std::size_t k = 0; k + 1 < r; ++k) oi.strides[k] = idx->shape()[k] > 1 ? idx->stride(k) : 0;
  Params p;
  p.shape(space, space.num_elements());
  p.operand(0, oo, r);
  p.operand(1, src, r);
  p.operand(2, oi, r);
  p.extra(0, static_cast<I>(r - 1));
  p.extra(1, static_cast<I>(n));
  p.extra(2, w->stride(0));
  std::uint32_t gx, gy;
  groups_for((space.num_elements() + 63) / 64, gx, gy);
  w->ctx().dispatch(ShaderFamily::Index, {IX_GATHER, code(w->dtype()), code(idx->dtype())}, p.w,
                    {{w->buffer().get(), false}, {idx->buffer().get(), false}, {nullptr, false}, {y->buffer().get(), true}},
                    gx, gy, 1, wide({w->dtype(), idx->dtype()}), &check);
  return y;
}


// dw = zeros [n, d] (in f32 for f16/bf16, as the CPU) with row i of dy added at indices[i],
// in index order: index.comp's select_add, one invocation per column, in chunks of
// kLoopSafe indices (each chunk sees the previous one's sums).
Prim embedding_backward_entry(Prim pdy, Prim pi, const Shape& ws) {
  VkRef dy = as_vk(std::move(pdy));
  VkRef idx = as_vk(std::move(pi));
  const DType want = dy->dtype(), work = want == DType::F64 ? DType::F64 : DType::F32;
  const std::size_t n = ws[0], d = ws[1], count = idx->shape().num_elements();
  const std::string check = fmt::format("[embedding_backward] index out of range; expected indices in [0, {})", n);
  VkRef dw = alloc(dy->device(), work, ws);
  launch_ew(EW_FILL, work, work, work, false, ws, operand(*dw, ws), operand(*dw, ws), nullptr, nullptr, 0, 0);
  if (count != 0 && d == 0) {
    // No invocation runs without columns: the indices are checked here.
    const std::vector<I> v = read_data(idx).get().convert(DType::I64).to_vec<I>();
    for (std::size_t i = 0; i < v.size(); ++i)
      if (v[i] < 0 || static_cast<std::uint64_t>(v[i]) >= n)
        throw IndexError(fmt::format("{}; got {} at position {}", check, v[i], i));
  }
  if (count == 0 || d == 0) return want == work ? dw : convert(dw, want);
  VkRef v = contiguous_as(want == work ? std::move(dy) : convert(dy, work), Shape{count, d});
  idx = contiguous_as(std::move(idx), Shape{count});
  const Shape lines{1, d};
  Context& c = dw->ctx();
  for (std::size_t k0 = 0; k0 < count; k0 += kLoopSafe) {
    const auto k = static_cast<I>(k0);
    Params p;
    p.shape(lines, d);
    p.operand(0, Operand{dw->buffer().get(), 0, {static_cast<I>(d), 1}}, 2);
    p.operand(1, Operand{v->buffer().get(), v->offset() + k * static_cast<I>(d), {static_cast<I>(d), 1}}, 2);
    p.operand(2, Operand{idx->buffer().get(), idx->offset() + k, {}}, 2);
    const std::int64_t extra[] = {0, static_cast<I>(n), static_cast<I>(d), static_cast<I>(std::min(kLoopSafe, count - k0)),
                                  static_cast<I>(d), 1, UPD_ADD};
    for (int i = 0; i < 7; ++i) p.extra(i, extra[i]);
    std::uint32_t gx, gy;
    groups_for((d + 63) / 64, gx, gy);
    c.dispatch(ShaderFamily::Index, {IX_SELECT_ADD, code(work), code(idx->dtype())}, p.w,
               {{v->buffer().get(), false}, {idx->buffer().get(), false}, {nullptr, false}, {dw->buffer().get(), true}},
               gx, gy, 1, wide({work, idx->dtype()}), &check);
  }
  return want == work ? dw : convert(dw, want);
}
}  // namespace

void register_pool_norm(dispatch::Backend& b) {
  using O = OpCode;
  b.set<O::max_pool1d>(&max_pool_entry<O::max_pool1d>);
  b.set<O::max_pool2d>(&max_pool_entry<O::max_pool2d>);
  b.set<O::max_pool1d_with_indices>(&max_pool_wi_entry<O::max_pool1d_with_indices>);
  b.set<O::max_pool2d_with_indices>(&max_pool_wi_entry<O::max_pool2d_with_indices>);
  b.set<O::max_pool_with_indices_backward>(&max_pool_backward_entry);
  b.set<O::avg_pool1d>(&avg_pool_entry<O::avg_pool1d>);
  b.set<O::avg_pool2d>(&avg_pool_entry<O::avg_pool2d>);
  b.set<O::avg_pool_backward>(&avg_pool_backward_entry);
  b.set<O::adaptive_avg_pool1d>(&adaptive_entry<O::adaptive_avg_pool1d>);
  b.set<O::adaptive_avg_pool2d>(&adaptive_entry<O::adaptive_avg_pool2d>);
  b.set<O::adaptive_avg_pool3d>(&adaptive_entry<O::adaptive_avg_pool3d>);
  b.set<O::adaptive_avg_pool_backward>(&adaptive_backward_entry);
  b.set<O::interpolate>(&interpolate_entry);
  b.set<O::interpolate_backward>(&interpolate_backward_entry);
  b.set<O::layer_norm>(&layer_norm_entry);
  b.set<O::embedding>(&embedding_entry);
  b.set<O::embedding_backward>(&embedding_backward_entry);
}

}  // namespace tensor::vulkan
