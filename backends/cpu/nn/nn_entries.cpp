// The CPU backend's module-op entries (the nn rows of the op table): each makes its
// inputs contiguous in f32 or f64 (f16/bf16 compute in f32), builds the kernel geometry
// from the already validated arguments and runs the kernels of backends/cpu/nn/.
#include <fmt/format.h>

#include <array>
#include <cmath>
#include <cstring>
#include <vector>

#include "backends/cpu/cpu_ops.hpp"
#include "backends/cpu/nn/attention.hpp"
#include "backends/cpu/nn/conv.hpp"
#include "backends/cpu/nn/ctc.hpp"
#include "backends/cpu/nn/deform_conv.hpp"
#include "backends/cpu/nn/fft.hpp"
#include "backends/cpu/nn/interpolate.hpp"
#include "backends/cpu/nn/nn_gemm.hpp"
#include "backends/cpu/nn/norm.hpp"
#include "backends/cpu/nn/pool.hpp"
#include "lib/core/nn_shape.hpp"
#include "tensor/error.hpp"

namespace tensor::cpu {
namespace {

using dispatch::ConvArgs;
using dispatch::FoldArgs;
using dispatch::InterpArgs;
using dispatch::PoolArgs;
using dispatch::Prim;
using dispatch::PrimPair;

// The dtype a float tensor is computed in: itself for f32/f64, f32 otherwise.
DType work_dtype(DType d) { return d == DType::F64 ? DType::F64 : DType::F32; }

// `p` contiguous in `work` (null stays null).
CpuRef prep(Prim p, DType work) {
  if (!p) return nullptr;
  return to_contiguous(convert_tensor(as_cpu(std::move(p)), work));
}
// Int indices contiguous as i64.
CpuRef prep_index(Prim p) { return to_contiguous(convert_tensor(as_cpu(std::move(p)), DType::I64)); }

template <class T>
const T* ptr(const CpuRef& t) { return t ? reinterpret_cast<const T*>(t->data()) : nullptr; }
template <class T>
T* mut(const CpuRef& t) { return reinterpret_cast<T*>(t->data()); }

// Runs f(T{}) with T = float or double for the work dtype.
template <class F>
void on_work(DType work, F&& f) {
  if (work == DType::F64) f(double{});
  else f(float{});
}

// The result back in the caller's dtype.
Prim finish(CpuRef out, DType want) { return convert_tensor(std::move(out), want); }

// Geometry of a conv (x: the conv input shape) or a transpose (x: the transpose input),
// from the arguments dispatch checked.
nn::ConvGeom geom(bool transpose, const ConvArgs& a, const Shape& x, const Shape& w) {
  return transpose ? nn::conv_transpose_geom(a, x, w) : nn::conv_geom(a, x, w);
}

template <OpCode op, bool kTranspose>
Prim conv_entry(Prim x, Prim w, Prim bias, const ConvArgs& a) {
  const DType want = x->dtype(), work = work_dtype(want);
  const Shape xs = x->shape(), ws = w->shape();
  const nn::ConvGeom g = geom(kTranspose, a, xs, ws);
  CpuRef cx = prep(std::move(x), work), cw = prep(std::move(w), work), cb = prep(std::move(bias), work);
  Shape out{xs[0], kTranspose ? g.c_in : g.c_out};
  for (std::size_t i = 3 - a.rank; i < 3; ++i) out.push_back(kTranspose ? g.in[i] : g.out[i]);
  CpuRef y = alloc_tensor(work, out);
  on_work(work, [&](auto t) {
    using T = decltype(t);
    if constexpr (kTranspose) nn::conv_transpose_forward(g, ptr<T>(cx), ptr<T>(cw), ptr<T>(cb), mut<T>(y));
    else nn::conv_forward(g, ptr<T>(cx), ptr<T>(cw), ptr<T>(cb), mut<T>(y));
  });
  return finish(std::move(y), want);
}

// (a, b) = (dy, w) for the x gradient, (x, dy) for the weight gradient.
template <OpCode op, bool kTranspose, bool kForX>
Prim conv_backward_entry(Prim a, Prim b, const Shape& target, const ConvArgs& args) {
  const DType want = a->dtype(), work = work_dtype(want);
  const Shape& x = kForX ? target : a->shape();
  const Shape w = kForX ? b->shape() : target;
  const nn::ConvGeom g = geom(kTranspose, args, x, w);
  CpuRef ca = prep(std::move(a), work), cb = prep(std::move(b), work);
  CpuRef out = alloc_tensor(work, target);
  on_work(work, [&](auto t) {
    using T = decltype(t);
    if constexpr (kTranspose && kForX) nn::conv_transpose_backward_x(g, ptr<T>(ca), ptr<T>(cb), mut<T>(out));
    else if constexpr (kTranspose) nn::conv_transpose_backward_weight(g, ptr<T>(ca), ptr<T>(cb), mut<T>(out));
    else if constexpr (kForX) nn::conv_backward_x(g, ptr<T>(ca), ptr<T>(cb), mut<T>(out));
    else nn::conv_backward_weight(g, ptr<T>(ca), ptr<T>(cb), mut<T>(out));
  });
  return finish(std::move(out), want);
}

Prim conv_bias_backward_entry(Prim dy) {
  const DType want = dy->dtype(), work = work_dtype(want);
  const Shape s = dy->shape();
  nn::ConvGeom g;
  g.batch = s[0];
  g.c_out = s[1];
  for (std::size_t i = 2; i < s.rank(); ++i) g.out[3 - (s.rank() - i)] = s[i];
  CpuRef c = prep(std::move(dy), work);
  CpuRef out = alloc_tensor(work, Shape{s[1]});
  on_work(work, [&](auto t) {
    using T = decltype(t);
    nn::conv_backward_bias(g, ptr<T>(c), mut<T>(out));
  });
  return finish(std::move(out), want);
}

nn::Pool2dGeom max_geom(const PoolArgs& a, const Shape& x) { return nn::pool2d_geom(a, x, core::Window::Max); }
nn::Pool2dGeom avg_geom(const PoolArgs& a, const Shape& x) { return nn::pool2d_geom(a, x, core::Window::Avg); }
nn::AdaptiveGeom adaptive_geom(const PoolArgs& a, const Shape& x) { return nn::adaptive_avg_pool_geom(a, x); }
Shape pooled(const Shape& x, const PoolArgs& a, std::size_t h, std::size_t w) {
  Shape out{x[0], x[1]};
  if (a.rank == 2) out.push_back(h);
  out.push_back(w);
  return out;
}

// Whether indices into planes of g can be int32 (flat positions below 2^31).
bool i32_fits(const nn::Pool2dGeom& g) {
  return static_cast<double>(g.in_h) * static_cast<double>(g.in_w) <= 2147483647.0;
}

// max_pool1d/2d (values only) and the _with_indices rows; the indices are written as
// int32 when that is the dtype asked for and it fits (no conversion pass), else as int64.
std::pair<CpuRef, CpuRef> max_pool_run(Prim x, const PoolArgs& a, bool with_indices,
                                       DType index_dtype = DType::I64) {
  const DType work = work_dtype(x->dtype());
  const Shape xs = x->shape();
  const nn::Pool2dGeom g = max_geom(a, xs);
  CpuRef cx = prep(std::move(x), work);
  const Shape out = pooled(xs, a, g.out_h, g.out_w);
  CpuRef y = alloc_tensor(work, out);
  const bool i32 = index_dtype == DType::I32 && i32_fits(g);
  CpuRef idx = with_indices ? alloc_tensor(i32 ? DType::I32 : DType::I64, out) : nullptr;
  on_work(work, [&](auto t) {
    using T = decltype(t);
    if (idx && i32) nn::max_pool2d_forward(g, ptr<T>(cx), mut<T>(y), mut<std::int32_t>(idx));
    else nn::max_pool2d_forward(g, ptr<T>(cx), mut<T>(y), idx ? mut<std::int64_t>(idx) : nullptr);
  });
  return {std::move(y), std::move(idx)};
}
template <OpCode op>
Prim max_pool_entry(Prim x, const PoolArgs& a) {
  const DType want = x->dtype();
  return finish(max_pool_run(std::move(x), a, false).first, want);
}
template <OpCode op>
PrimPair max_pool_wi_entry(Prim x, const PoolArgs& a, DType index_dtype) {
  const DType want = x->dtype();
  auto [y, idx] = max_pool_run(std::move(x), a, true, index_dtype);
  return {finish(std::move(y), want), convert_tensor(std::move(idx), index_dtype)};
}
Prim max_pool_backward_entry(Prim dy, Prim indices, const Shape& x_shape, const PoolArgs& a) {
  const DType want = dy->dtype(), work = work_dtype(want);
  const nn::Pool2dGeom g = max_geom(a, x_shape);
  const bool i32 = indices->dtype() == DType::I32 && i32_fits(g);
  CpuRef cdy = prep(std::move(dy), work);
  CpuRef ci = i32 ? to_contiguous(as_cpu(std::move(indices))) : prep_index(std::move(indices));
  const auto [at, bad] =
      i32 ? nn::max_pool2d_bad_index(g, ptr<std::int32_t>(ci)) : nn::max_pool2d_bad_index(g, ptr<std::int64_t>(ci));
  if (at >= 0)
    throw IndexError(fmt::format("[{}] index outside its pooling window; expected -1 or the flat h*W+w position of a "
                                 "tap of its output's window; got {} at output position {}",
                                 dispatch::op_name(OpCode::max_pool_with_indices_backward), bad, at));
  CpuRef dx = alloc_tensor(work, x_shape);
  on_work(work, [&](auto t) {
    using T = decltype(t);
    if (i32) nn::max_pool2d_backward(g, ptr<T>(cdy), ptr<std::int32_t>(ci), mut<T>(dx));
    else nn::max_pool2d_backward(g, ptr<T>(cdy), ptr<std::int64_t>(ci), mut<T>(dx));
  });
  return finish(std::move(dx), want);
}

template <OpCode op>
Prim avg_pool_entry(Prim x, const PoolArgs& a) {
  const DType want = x->dtype(), work = work_dtype(want);
  const Shape xs = x->shape();
  const nn::Pool2dGeom g = avg_geom(a, xs);
  CpuRef cx = prep(std::move(x), work);
  CpuRef y = alloc_tensor(work, pooled(xs, a, g.out_h, g.out_w));
  on_work(work, [&](auto t) {
    using T = decltype(t);
    nn::avg_pool2d_forward(g, ptr<T>(cx), mut<T>(y));
  });
  return finish(std::move(y), want);
}
Prim avg_pool_backward_entry(Prim dy, const Shape& x_shape, const PoolArgs& a) {
  const DType want = dy->dtype(), work = work_dtype(want);
  const nn::Pool2dGeom g = avg_geom(a, x_shape);
  CpuRef cdy = prep(std::move(dy), work);
  CpuRef dx = alloc_tensor(work, x_shape);
  on_work(work, [&](auto t) {
    using T = decltype(t);
    nn::avg_pool2d_backward(g, ptr<T>(cdy), mut<T>(dx));
  });
  return finish(std::move(dx), want);
}

template <OpCode op>
Prim adaptive_entry(Prim x, const PoolArgs& a) {
  const DType want = x->dtype(), work = work_dtype(want);
  const Shape xs = x->shape();
  const nn::AdaptiveGeom g = adaptive_geom(a, xs);
  CpuRef cx = prep(std::move(x), work);
  Shape out = pooled(xs, a, g.out[1], g.out[2]);
  if (a.rank == 3) out = Shape{xs[0], xs[1], g.out[0], g.out[1], g.out[2]};
  CpuRef y = alloc_tensor(work, out);
  on_work(work, [&](auto t) {
    using T = decltype(t);
    nn::adaptive_avg_pool_forward(g, ptr<T>(cx), mut<T>(y));
  });
  return finish(std::move(y), want);
}
Prim adaptive_backward_entry(Prim dy, const Shape& x_shape, const PoolArgs& a) {
  const DType want = dy->dtype(), work = work_dtype(want);
  const nn::AdaptiveGeom g = adaptive_geom(a, x_shape);
  CpuRef cdy = prep(std::move(dy), work);
  CpuRef dx = alloc_tensor(work, x_shape);
  on_work(work, [&](auto t) {
    using T = decltype(t);
    nn::adaptive_avg_pool_backward(g, ptr<T>(cdy), mut<T>(dx));
  });
  return finish(std::move(dx), want);
}

Prim interpolate_entry(Prim x, const InterpArgs& a) {
  const DType want = x->dtype(), work = work_dtype(want);
  const Shape xs = x->shape();
  const nn::InterpGeom g = nn::interpolate_geom("interpolate", xs, a.size, a.options);
  CpuRef cx = prep(std::move(x), work);
  CpuRef y = alloc_tensor(work, Shape{xs[0], xs[1], g.out_h, g.out_w});
  on_work(work, [&](auto t) {
    using T = decltype(t);
    nn::interpolate_forward(g, ptr<T>(cx), mut<T>(y));
  });
  return finish(std::move(y), want);
}
Prim interpolate_backward_entry(Prim dy, const Shape& x_shape, const InterpArgs& a) {
  const DType want = dy->dtype(), work = work_dtype(want);
  const nn::InterpGeom g = nn::interpolate_geom("interpolate_backward", x_shape, a.size, a.options);
  CpuRef cdy = prep(std::move(dy), work);
  CpuRef dx = alloc_tensor(work, x_shape);
  on_work(work, [&](auto t) {
    using T = decltype(t);
    nn::interpolate_backward(g, ptr<T>(cdy), mut<T>(dx));
  });
  return finish(std::move(dx), want);
}

// Rows of weights at the indices; an index outside [0, n) raises IndexError.
Prim embedding_entry(Prim weights, Prim indices) {
  const Shape ws = weights->shape(), is = indices->shape();
  const std::size_t n = ws[0], d = ws[1], count = is.num_elements();
  CpuRef w = to_contiguous(as_cpu(std::move(weights)));
  CpuRef idx = prep_index(std::move(indices));
  const auto* ip = ptr<std::int64_t>(idx);
  for (std::size_t i = 0; i < count; ++i)
    if (ip[i] < 0 || static_cast<std::size_t>(ip[i]) >= n)
      throw IndexError(fmt::format("[embedding] index out of range; expected 0 <= index < {}; got {} at position {}", n,
                                   ip[i], i));
  Shape out = is;
  out.push_back(d);
  CpuRef y = alloc_tensor(w->dtype(), out);
  const std::size_t row = d * w->elem_size();
  const std::byte* src = w->data();
  std::byte* dst = y->data();
  for (std::size_t i = 0; i < count; ++i)
    if (row) std::memcpy(dst + i * row, src + static_cast<std::size_t>(ip[i]) * row, row);
  return y;
}
Prim embedding_backward_entry(Prim dy, Prim indices, const Shape& weight_shape) {
  const DType want = dy->dtype(), work = work_dtype(want);
  const std::size_t count = indices->shape().num_elements();
  CpuRef cdy = prep(std::move(dy), work), idx = prep_index(std::move(indices));
  CpuRef dw = alloc_tensor(work, weight_shape);
  on_work(work, [&](auto t) {
    using T = decltype(t);
    nn::embedding_backward(weight_shape[0], weight_shape[1], count, ptr<std::int64_t>(idx), ptr<T>(cdy), mut<T>(dw));
  });
  return finish(std::move(dw), want);
}

Prim layer_norm_entry(Prim x, Prim gamma, Prim beta, double eps) {
  const DType want = x->dtype(), work = work_dtype(want);
  const Shape xs = x->shape();
  const std::size_t d = xs[xs.rank() - 1];
  const std::size_t rows = d ? xs.num_elements() / d : 0;
  CpuRef cx = prep(std::move(x), work), cg = prep(std::move(gamma), work), cb = prep(std::move(beta), work);
  CpuRef y = alloc_tensor(work, xs);
  on_work(work, [&](auto t) {
    using T = decltype(t);
    nn::layer_norm_forward(rows, d, ptr<T>(cx), ptr<T>(cg), ptr<T>(cb), eps, mut<T>(y), nullptr, nullptr);
  });
  return finish(std::move(y), want);
}

Prim attention_entry(Prim q, Prim k, Prim v, Prim mask, Prim bias, const tensor::nn::AttentionModuleOptions& o) {
  const DType want = q->dtype(), work = work_dtype(want);
  const Shape qs = q->shape(), ks = k->shape(), vs = v->shape();
  const Shape ms = mask ? mask->shape() : Shape{}, bs = bias ? bias->shape() : Shape{};
  const nn::AttentionGeom g =
      nn::attention_geom("attention", qs, ks, vs, mask ? &ms : nullptr, bias ? &bs : nullptr, o);
  CpuRef cq = prep(std::move(q), work), ck = prep(std::move(k), work), cv = prep(std::move(v), work);
  CpuRef cb = prep(std::move(bias), work);
  CpuRef cm = mask ? to_contiguous(convert_tensor(as_cpu(std::move(mask)), DType::U8)) : nullptr;
  CpuRef y = alloc_tensor(work, Shape{qs[0], qs[1], qs[2], vs[3]});
  on_work(work, [&](auto t) {
    using T = decltype(t);
    nn::attention_forward(g, ptr<T>(cq), ptr<T>(ck), ptr<T>(cv), ptr<std::uint8_t>(cm), ptr<T>(cb), mut<T>(y));
  });
  return finish(std::move(y), want);
}

// linear: x [rows, d_in] @ w [d_in, d_out] (+ bias), through the backend's matmul.
Prim linear_entry(Prim x, Prim w, Prim bias) {
  const DType want = x->dtype(), work = work_dtype(want);
  const Shape xs = x->shape();
  const std::size_t d_in = w->shape()[0], d_out = w->shape()[1];
  std::size_t rows = 1;
  for (std::size_t i = 0; i + 1 < xs.rank(); ++i) rows *= xs[i];
  CpuRef cx = prep(std::move(x), work), cw = prep(std::move(w), work), cb = prep(std::move(bias), work);
  Shape out = xs;
  out[out.rank() - 1] = d_out;
  CpuRef y = alloc_tensor(work, out);
  on_work(work, [&](auto t) {
    using T = decltype(t);
    const T* xp = ptr<T>(cx);
    const T* wp = ptr<T>(cw);
    const T* bp = ptr<T>(cb);
    T* yp = mut<T>(y);
    for (std::size_t r = 0; r < rows; ++r)
      for (std::size_t j = 0; j < d_out; ++j) yp[r * d_out + j] = bp ? bp[j] : T(0);
    nn::nn_gemm<T>(false, false, rows, d_out, d_in, T(1), xp, d_in, wp, d_out, T(1), yp, d_out,
                   nn::gemm_threads(rows, d_out, d_in, nn::nn_threads()));
  });
  return finish(std::move(y), want);
}

// batch_norm (inference): (x - mean[c]) / sqrt(var[c] + eps) * gamma[c] + beta[c].
Prim batch_norm_entry(Prim x, Prim gamma, Prim beta, Prim mean, Prim var, double eps) {
  const DType want = x->dtype(), work = work_dtype(want);
  const Shape xs = x->shape();
  const std::size_t n = xs[0], c = xs[1], planes = n * c;
  const std::size_t inner = planes ? xs.num_elements() / planes : 0;
  CpuRef cx = prep(std::move(x), work), cg = prep(std::move(gamma), work), cb = prep(std::move(beta), work);
  CpuRef cm = prep(std::move(mean), work), cv = prep(std::move(var), work);
  CpuRef y = alloc_tensor(work, xs);
  on_work(work, [&](auto t) {
    using T = decltype(t);
    const T *xp = ptr<T>(cx), *gp = ptr<T>(cg), *bp = ptr<T>(cb), *mp = ptr<T>(cm), *vp = ptr<T>(cv);
    T* yp = mut<T>(y);
    for (std::size_t ch = 0; ch < c; ++ch) {
      const double scale = static_cast<double>(gp[ch]) / std::sqrt(static_cast<double>(vp[ch]) + eps);
      const double m = static_cast<double>(mp[ch]), b = static_cast<double>(bp[ch]);
      for (std::size_t s = 0; s < n; ++s) {
        const std::size_t base = (s * c + ch) * inner;
        for (std::size_t i = 0; i < inner; ++i)
          yp[base + i] = static_cast<T>((static_cast<double>(xp[base + i]) - m) * scale + b);
      }
    }
  });
  return finish(std::move(y), want);
}

template <bool kFold>
Prim fold_entry(Prim x, const FoldArgs& a) {
  const DType want = x->dtype(), work = work_dtype(want);
  const Shape xs = x->shape();
  const std::string_view name = kFold ? "fold4d" : "unfold4d";
  const Shape image = kFold ? tensor::core::fold4d_output_shape(name, xs, a.output_size, a.kernel, a.options) : xs;
  const nn::ConvGeom g = nn::unfold_geom(name, image, a.kernel, a.options);
  CpuRef cx = prep(std::move(x), work);
  const Shape out = kFold ? image : tensor::core::unfold4d_output_shape(name, xs, a.kernel, a.options);
  CpuRef y = alloc_tensor(work, out);
  on_work(work, [&](auto t) {
    using T = decltype(t);
    if constexpr (kFold) nn::fold_forward(g, ptr<T>(cx), mut<T>(y));
    else nn::unfold_forward(g, ptr<T>(cx), mut<T>(y));
  });
  return finish(std::move(y), want);
}

nn::CtcGeom ctc_geom(const Shape& lp, const Shape& targets, std::int64_t blank) {
  nn::CtcGeom g;
  g.time = lp[0];
  g.batch = lp[1];
  g.classes = lp[2];
  g.max_target = targets[1];
  g.blank = blank;
  return g;
}
Prim ctc_loss_entry(Prim lp, Prim targets, Prim in_len, Prim tgt_len, std::int64_t blank) {
  const DType want = lp->dtype(), work = work_dtype(want);
  const nn::CtcGeom g = ctc_geom(lp->shape(), targets->shape(), blank);
  CpuRef cl = prep(std::move(lp), work), ct = prep_index(std::move(targets));
  CpuRef ci = prep_index(std::move(in_len)), cn = prep_index(std::move(tgt_len));
  nn::ctc_validate("ctc_loss", g, ptr<std::int64_t>(ct), ptr<std::int64_t>(ci), ptr<std::int64_t>(cn));
  CpuRef y = alloc_tensor(work, Shape{g.batch});
  on_work(work, [&](auto t) {
    using T = decltype(t);
    nn::ctc_loss_forward(g, ptr<T>(cl), ptr<std::int64_t>(ct), ptr<std::int64_t>(ci), ptr<std::int64_t>(cn), mut<T>(y));
  });
  return finish(std::move(y), want);
}
Prim ctc_loss_backward_entry(Prim lp, Prim targets, Prim in_len, Prim tgt_len, Prim dloss, std::int64_t blank) {
  const DType want = lp->dtype(), work = work_dtype(want);
  const Shape ls = lp->shape();
  const nn::CtcGeom g = ctc_geom(ls, targets->shape(), blank);
  CpuRef cl = prep(std::move(lp), work), ct = prep_index(std::move(targets));
  CpuRef ci = prep_index(std::move(in_len)), cn = prep_index(std::move(tgt_len));
  CpuRef cd = prep(std::move(dloss), work);
  nn::ctc_validate("ctc_loss_backward", g, ptr<std::int64_t>(ct), ptr<std::int64_t>(ci), ptr<std::int64_t>(cn));
  CpuRef dx = alloc_tensor(work, ls);
  on_work(work, [&](auto t) {
    using T = decltype(t);
    nn::ctc_loss_backward(g, ptr<T>(cl), ptr<std::int64_t>(ct), ptr<std::int64_t>(ci), ptr<std::int64_t>(cn), ptr<T>(cd),
                          mut<T>(dx));
  });
  return finish(std::move(dx), want);
}

Prim deform_conv2d_entry(Prim x, Prim offset, Prim w, Prim mask, Prim bias, const tensor::nn::DeformConvOptions<2>& o) {
  const DType want = x->dtype(), work = work_dtype(want);
  const Shape xs = x->shape(), os = offset->shape(), ws = w->shape();
  const Shape ms = mask ? mask->shape() : Shape{}, bs = bias ? bias->shape() : Shape{};
  const nn::DeformGeom g =
      nn::deform_conv2d_geom("deform_conv2d", xs, os, ws, mask ? &ms : nullptr, bias ? &bs : nullptr, o);
  CpuRef cx = prep(std::move(x), work), co = prep(std::move(offset), work), cw = prep(std::move(w), work);
  CpuRef cm = prep(std::move(mask), work), cb = prep(std::move(bias), work);
  CpuRef y = alloc_tensor(work, Shape{xs[0], ws[0], os[2], os[3]});
  on_work(work, [&](auto t) {
    using T = decltype(t);
    nn::deform_conv2d_forward(g, ptr<T>(cx), ptr<T>(co), ptr<T>(cw), ptr<T>(cm), ptr<T>(cb), mut<T>(y));
  });
  return finish(std::move(y), want);
}
std::vector<Prim> deform_conv2d_backward_entry(Prim x, Prim offset, Prim w, Prim mask, Prim dy, bool with_bias,
                                               const tensor::nn::DeformConvOptions<2>& o) {
  const DType want = x->dtype(), work = work_dtype(want);
  const Shape xs = x->shape(), os = offset->shape(), ws = w->shape();
  const Shape ms = mask ? mask->shape() : Shape{};
  const nn::DeformGeom g = nn::deform_conv2d_geom("deform_conv2d_backward", xs, os, ws, mask ? &ms : nullptr, nullptr, o);
  CpuRef cx = prep(std::move(x), work), co = prep(std::move(offset), work), cw = prep(std::move(w), work);
  CpuRef cm = prep(std::move(mask), work), cd = prep(std::move(dy), work);
  CpuRef dx = alloc_tensor(work, xs), doff = alloc_tensor(work, os), dw = alloc_tensor(work, ws);
  CpuRef dm = cm ? alloc_tensor(work, ms) : nullptr;
  CpuRef db = with_bias ? alloc_tensor(work, Shape{ws[0]}) : nullptr;
  on_work(work, [&](auto t) {
    using T = decltype(t);
    nn::deform_conv2d_backward(g, ptr<T>(cx), ptr<T>(co), ptr<T>(cw), ptr<T>(cm), ptr<T>(cd), mut<T>(dx), mut<T>(doff),
                               mut<T>(dw), dm ? mut<T>(dm) : nullptr, db ? mut<T>(db) : nullptr);
  });
  std::vector<Prim> out;
  out.push_back(finish(std::move(dx), want));
  out.push_back(finish(std::move(doff), want));
  out.push_back(finish(std::move(dw), want));
  out.push_back(dm ? finish(std::move(dm), want) : Prim());
  out.push_back(db ? finish(std::move(db), want) : Prim());
  return out;
}

}  // namespace

// ---- rfft / irfft along any dim: the kernels work on rows of the last dim, so a dim with
// inner elements after it is gathered into [outer * inner, len] rows and scattered back.
struct Lanes {
  std::size_t outer = 1, len = 1, inner = 1;
};
Lanes lanes(const Shape& s, std::size_t dim) {
  Lanes l;
  for (std::size_t i = 0; i < dim; ++i) l.outer *= s[i];
  l.len = s[dim];
  for (std::size_t i = dim + 1; i < s.rank(); ++i) l.inner *= s[i];
  return l;
}
// [outer, len, inner] -> [outer * inner, len] (or back with `back`).
template <class T>
void to_rows(const T* src, T* dst, const Lanes& l, bool back) {
  for (std::size_t o = 0; o < l.outer; ++o)
    for (std::size_t j = 0; j < l.len; ++j)
      for (std::size_t i = 0; i < l.inner; ++i) {
        const std::size_t a = (o * l.len + j) * l.inner + i, r = (o * l.inner + i) * l.len + j;
        if (back) dst[a] = src[r];
        else dst[r] = src[a];
      }
}
template <class T>
std::vector<T> rows_copy(const T* src, const Lanes& l) {
  std::vector<T> v(l.outer * l.len * l.inner);
  to_rows(src, v.data(), l, false);
  return v;
}

PrimPair rfft_entry(Prim x, std::size_t dim, std::size_t n) {
  const DType want = x->dtype(), work = work_dtype(want);
  const Shape xs = x->shape();
  const Lanes l = lanes(xs, dim);
  const std::size_t bins = n / 2 + 1, rows = l.outer * l.inner;
  Shape os = xs;
  os[dim] = bins;
  CpuRef cx = prep(std::move(x), work);
  CpuRef re = alloc_tensor(work, os), im = alloc_tensor(work, os);
  on_work(work, [&](auto t) {
    using T = decltype(t);
    if (rows == 0) return;
    if (l.inner == 1) {
      nn::rfft(rows, l.len, n, ptr<T>(cx), mut<T>(re), mut<T>(im));
      return;
    }
    const std::vector<T> xr = rows_copy(ptr<T>(cx), l);
    std::vector<T> r(rows * bins), i(rows * bins);
    nn::rfft(rows, l.len, n, xr.data(), r.data(), i.data());
    const Lanes lo{l.outer, bins, l.inner};
    to_rows(r.data(), mut<T>(re), lo, true);
    to_rows(i.data(), mut<T>(im), lo, true);
  });
  return {finish(std::move(re), want), finish(std::move(im), want)};
}

Prim irfft_entry(Prim re, Prim im, std::size_t dim, std::size_t n) {
  const DType want = re->dtype(), work = work_dtype(want);
  const Shape s = re->shape();
  const Lanes l = lanes(s, dim);
  const std::size_t rows = l.outer * l.inner;
  Shape os = s;
  os[dim] = n;
  CpuRef cr = prep(std::move(re), work), ci = prep(std::move(im), work);
  CpuRef y = alloc_tensor(work, os);
  on_work(work, [&](auto t) {
    using T = decltype(t);
    if (rows == 0) return;
    if (l.inner == 1) {
      nn::irfft(rows, l.len, n, ptr<T>(cr), ptr<T>(ci), mut<T>(y));
      return;
    }
    const std::vector<T> rr = rows_copy(ptr<T>(cr), l), ir = rows_copy(ptr<T>(ci), l);
    std::vector<T> yr(rows * n);
    nn::irfft(rows, l.len, n, rr.data(), ir.data(), yr.data());
    to_rows(yr.data(), mut<T>(y), Lanes{l.outer, n, l.inner}, true);
  });
  return finish(std::move(y), want);
}

void register_nn_ops(dispatch::Backend& b) {
  b.set<OpCode::conv1d>(&conv_entry<OpCode::conv1d, false>);
  b.set<OpCode::conv2d>(&conv_entry<OpCode::conv2d, false>);
  b.set<OpCode::conv3d>(&conv_entry<OpCode::conv3d, false>);
  b.set<OpCode::conv_transpose1d>(&conv_entry<OpCode::conv_transpose1d, true>);
  b.set<OpCode::conv_transpose2d>(&conv_entry<OpCode::conv_transpose2d, true>);
  b.set<OpCode::conv_transpose3d>(&conv_entry<OpCode::conv_transpose3d, true>);
  b.set<OpCode::conv_x_backward>(&conv_backward_entry<OpCode::conv_x_backward, false, true>);
  b.set<OpCode::conv_weight_backward>(&conv_backward_entry<OpCode::conv_weight_backward, false, false>);
  b.set<OpCode::conv_transpose_x_backward>(&conv_backward_entry<OpCode::conv_transpose_x_backward, true, true>);
  b.set<OpCode::conv_transpose_weight_backward>(
      &conv_backward_entry<OpCode::conv_transpose_weight_backward, true, false>);
  b.set<OpCode::conv_bias_backward>(&conv_bias_backward_entry);
  b.set<OpCode::max_pool1d>(&max_pool_entry<OpCode::max_pool1d>);
  b.set<OpCode::max_pool2d>(&max_pool_entry<OpCode::max_pool2d>);
  b.set<OpCode::max_pool1d_with_indices>(&max_pool_wi_entry<OpCode::max_pool1d_with_indices>);
  b.set<OpCode::max_pool2d_with_indices>(&max_pool_wi_entry<OpCode::max_pool2d_with_indices>);
  b.set<OpCode::max_pool_with_indices_backward>(&max_pool_backward_entry);
  b.set<OpCode::avg_pool1d>(&avg_pool_entry<OpCode::avg_pool1d>);
  b.set<OpCode::avg_pool2d>(&avg_pool_entry<OpCode::avg_pool2d>);
  b.set<OpCode::avg_pool_backward>(&avg_pool_backward_entry);
  b.set<OpCode::adaptive_avg_pool1d>(&adaptive_entry<OpCode::adaptive_avg_pool1d>);
  b.set<OpCode::adaptive_avg_pool2d>(&adaptive_entry<OpCode::adaptive_avg_pool2d>);
  b.set<OpCode::adaptive_avg_pool_backward>(&adaptive_backward_entry);
  b.set<OpCode::interpolate>(&interpolate_entry);
  b.set<OpCode::interpolate_backward>(&interpolate_backward_entry);
  b.set<OpCode::embedding>(&embedding_entry);
  b.set<OpCode::embedding_backward>(&embedding_backward_entry);
  b.set<OpCode::layer_norm>(&layer_norm_entry);
  b.set<OpCode::attention>(&attention_entry);
  b.set<OpCode::rfft>(&rfft_entry);
  b.set<OpCode::irfft>(&irfft_entry);
  b.set<OpCode::linear>(&linear_entry);
  b.set<OpCode::batch_norm>(&batch_norm_entry);
  b.set<OpCode::unfold4d>(&fold_entry<false>);
  b.set<OpCode::fold4d>(&fold_entry<true>);
  b.set<OpCode::adaptive_avg_pool3d>(&adaptive_entry<OpCode::adaptive_avg_pool3d>);
  b.set<OpCode::ctc_loss>(&ctc_loss_entry);
  b.set<OpCode::ctc_loss_backward>(&ctc_loss_backward_entry);
  b.set<OpCode::deform_conv2d>(&deform_conv2d_entry);
  b.set<OpCode::deform_conv2d_backward>(&deform_conv2d_backward_entry);
}

}  // namespace tensor::cpu
