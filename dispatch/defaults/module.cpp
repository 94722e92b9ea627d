// Defaults: module ops on the device (see dispatch/defaults/install.cpp for the rules every default keeps).
#include "dispatch/defaults/compose.hpp"

namespace tensor::dispatch::defaults {
namespace {

// ---- module ops ---------------------------------------------------------------------------
// Compositions on the device for the CNN path (conv1d/2d through windows of the padded
// input and one batched matmul, the pools through the same windows, layer_norm,
// embedding); the rest (host_trip rows) run the CPU kernel through the host.

// On the device: dy scatter-added into zeros [N*C, H*W] at the flat indices (an index -1,
// a window without a valid tap, adds nothing).
Prim d_max_pool_with_indices_backward(Prim dy, Prim idx, const Shape& x_shape, const PoolArgs&) {
  const DeviceId d = dy->device();
  const std::size_t planes = x_shape[0] * x_shape[1], plane = x_shape.num_elements() / (planes ? planes : 1);
  const std::size_t per = planes ? dy->shape().num_elements() / planes : 0;
  const Shape s2{planes, per};
  Prim i2 = reshape_to(std::move(idx), s2);
  Prim none = cmp_s(OpCode::lower_elem, i2, Scalar(0));
  Prim g = mfill(reshape_to(std::move(dy), s2), std::move(none), Scalar(0.0));
  i2 = sc(OpCode::clamp_min, std::move(i2), Scalar(0));
  Prim zeros = full_shape(Shape{planes, plane}, Scalar(0.0), d, g->dtype());
  Prim dx = call<Family::Scatter>(OpCode::scatter_add, d, std::move(zeros), std::size_t{1}, std::move(i2), std::move(g));
  return reshape_to(std::move(dx), x_shape);
}

// x [N, C, H, W] inside a `fill` border: `before` rows/cols above/left, `after` below/right.
Prim padded(Prim x, std::array<std::int64_t, 2> before, std::array<std::int64_t, 2> after, Scalar fill) {
  if (before == std::array<std::int64_t, 2>{0, 0} && after == std::array<std::int64_t, 2>{0, 0}) return x;
  const DeviceId d = x->device();
  const Shape s = x->shape();
  const Shape ps{s[0], s[1], s[2] + static_cast<std::size_t>(before[0] + after[0]),
                 s[3] + static_cast<std::size_t>(before[1] + after[1])};
  std::vector<DimSlice> at = full_slices(s);
  at[2].start = before[0];
  at[3].start = before[1];
  return call<Family::SliceAssign>(OpCode::slice_assign, d, full_shape(ps, fill, d, x->dtype()), DimSlices(at), std::move(x));
}

// The kernel windows of a padded [N, C, Hp, Wp]: [N, C, Ho, Wo, kh, kw] (window (i, j)
// starts at (i*s0, j*s1), taps dilation apart).
Prim windows(Prim xp, std::array<std::int64_t, 2> k, std::array<std::int64_t, 2> s, std::array<std::int64_t, 2> dil) {
  const DeviceId d = xp->device();
  const auto eh = static_cast<std::size_t>(dil[0] * (k[0] - 1) + 1), ew = static_cast<std::size_t>(dil[1] * (k[1] - 1) + 1);
  Prim u = call<Family::Unfold>(OpCode::unfold, d, std::move(xp), std::size_t{2}, eh, static_cast<std::size_t>(s[0]));
  u = call<Family::Unfold>(OpCode::unfold, d, std::move(u), std::size_t{3}, ew, static_cast<std::size_t>(s[1]));
  if (dil[0] == 1 && dil[1] == 1) return u;
  std::vector<DimSlice> ds = full_slices(u->shape());
  ds[4] = {0, dil[0], static_cast<std::size_t>(k[0])};
  ds[5] = {0, dil[1], static_cast<std::size_t>(k[1])};
  return slice_prim(std::move(u), std::move(ds));
}

// The extra right/bottom padding a ceil-mode pool needs so that `out` windows fit.
std::int64_t overhang(std::size_t in, std::int64_t out, std::int64_t k, std::int64_t s, std::int64_t p, std::int64_t dil) {
  const std::int64_t need = (out - 1) * s + dil * (k - 1) + 1, have = static_cast<std::int64_t>(in) + 2 * p;
  return need > have ? need - have : 0;
}

// conv2d: windows of the zero-padded input, [N, G, Ho*Wo, Cg*kh*kw] x [1, G, Cg*kh*kw, Cout/G].
Prim d_conv2d(Prim x, Prim w, Prim bias, const ConvArgs& a) {
  const DeviceId d = x->device();
  const Shape xs = x->shape(), ws = w->shape();
  const std::size_t n = xs[0], c = xs[1], co = ws[0], kh = ws[2], kw = ws[3];
  const auto g = static_cast<std::size_t>(a.groups);
  const std::size_t cg = c / g, cog = co / g;
  const std::array<std::int64_t, 2> k{static_cast<std::int64_t>(kh), static_cast<std::int64_t>(kw)};
  const std::array<std::int64_t, 2> p{a.padding[0], a.padding[1]};
  Prim u = windows(padded(std::move(x), p, p, Scalar(0.0)), k, {a.stride[0], a.stride[1]}, {a.dilation[0], a.dilation[1]});
  const std::size_t ho = u->shape()[2], wo = u->shape()[3], l = ho * wo, taps = cg * kh * kw;
  // [N, C, Ho, Wo, kh, kw] -> [N, Ho, Wo, C, kh, kw] -> [N, L, G, Cg*kh*kw] -> [N, G, L, Cg*kh*kw]
  u = reshape_to(permute_prim(std::move(u), {0, 2, 3, 1, 4, 5}), Shape{n, l, g, taps});
  u = permute_prim(std::move(u), {0, 2, 1, 3});
  // weight [Cout, Cg, kh, kw] -> [1, G, Cog, Cg*kh*kw] -> [1, G, Cg*kh*kw, Cog]
  Prim wm = permute_prim(reshape_to(std::move(w), Shape{1, g, cog, taps}), {0, 1, 3, 2});
  Prim y = call<Family::Matmul>(OpCode::matmul, d, std::move(u), std::move(wm));  // [N, G, L, Cog]
  y = reshape_to(permute_prim(std::move(y), {0, 1, 3, 2}), Shape{n, co, ho, wo});
  if (bias) y = bin(OpCode::add, std::move(y), reshape_to(std::move(bias), Shape{1, co, 1, 1}));
  return y;
}

// 1-d module ops run as 2-d ones over [N, C, 1, L] (burn's compositions).
ConvArgs conv_as_2d(const ConvArgs& a) {
  ConvArgs b;
  b.rank = 2;
  b.stride = {1, a.stride[0], 1};
  b.padding = {0, a.padding[0], 0};
  b.dilation = {1, a.dilation[0], 1};
  b.padding_out = {0, a.padding_out[0], 0};
  b.groups = a.groups;
  return b;
}
Prim unsqueeze2(Prim x) {
  const Shape s = x->shape();
  return reshape_to(std::move(x), Shape{s[0], s[1], 1, s[2]});
}
Prim squeeze2(Prim y) {
  const Shape s = y->shape();
  return reshape_to(std::move(y), Shape{s[0], s[1], s[3]});
}
Prim d_conv1d(Prim x, Prim w, Prim bias, const ConvArgs& a) {
  const DeviceId d = x->device();
  return squeeze2(call<Family::Conv>(OpCode::conv2d, d, unsqueeze2(std::move(x)), unsqueeze2(std::move(w)), std::move(bias),
                                     conv_as_2d(a)));
}


// conv_x_backward, rank 1 and 2, on the device: dy spread `stride` apart into zeros (the
// positions that reach x only), correlated with the flipped, group-transposed weight at
// stride 1 and the forward's dilation. Rank 3 runs through the host.
Prim conv_x_backward_2d(Prim dy, Prim w, const Shape& xs, const ConvArgs& a) {
  const DeviceId d = dy->device();
  const Shape ys = dy->shape(), ws = w->shape();
  const auto g = static_cast<std::size_t>(a.groups);
  const std::size_t co = ws[0], cg = ws[1], cog = co / g, c = cg * g;
  std::vector<DimSlice> src = full_slices(ys), dst = full_slices(ys);
  Shape zs = ys;
  for (std::size_t i = 0; i < 2; ++i) {
    const auto k = static_cast<std::int64_t>(ws[2 + i]), s = a.stride[i], in = static_cast<std::int64_t>(xs[2 + i]);
    const std::int64_t e = a.dilation[i] * (k - 1) + 1, left = e - 1 - a.padding[i], len = in + e - 1;
    const auto out = static_cast<std::int64_t>(ys[2 + i]);
    std::int64_t i0 = 0, i1 = out;  // outputs whose position left + i*s lies in [0, len)
    while (i0 < i1 && left + i0 * s < 0) ++i0;
    while (i1 > i0 && left + (i1 - 1) * s >= len) --i1;
    src[2 + i] = {i0, 1, static_cast<std::size_t>(i1 - i0)};
    dst[2 + i] = {left + i0 * s, s, static_cast<std::size_t>(i1 - i0)};
    zs[2 + i] = static_cast<std::size_t>(len);
  }
  Prim z = full_shape(zs, Scalar(0.0), d, dy->dtype());
  if (src[2].len > 0 && src[3].len > 0)
    z = call<Family::SliceAssign>(OpCode::slice_assign, d, std::move(z), DimSlices(dst), slice_prim(std::move(dy), src));
  // weight [Co, Cg, kh, kw] -> [G, Cog, Cg, kh, kw] -> [G, Cg, Cog, kh, kw] -> [C, Cog, kh, kw], flipped in space.
  Prim wt = permute_prim(reshape_to(std::move(w), Shape{g, cog, cg, ws[2], ws[3]}), {0, 2, 1, 3, 4});
  wt = reshape_to(std::move(wt), Shape{c, cog, ws[2], ws[3]});
  const std::vector<std::size_t> sp{2, 3};
  wt = call<Family::Axes>(OpCode::flip, d, std::move(wt), Axes(sp));
  ConvArgs b;
  b.rank = 2;
  b.dilation = {a.dilation[0], a.dilation[1], 1};
  b.groups = a.groups;
  return call<Family::Conv>(OpCode::conv2d, d, std::move(z), std::move(wt), Prim(), b);
}
Prim d_conv_x_backward(Prim dy, Prim w, const Shape& xs, const ConvArgs& a) {
  if (a.rank == 2) return conv_x_backward_2d(std::move(dy), std::move(w), xs, a);
  if (a.rank == 1) {
    const Shape x2{xs[0], xs[1], 1, xs[2]};
    return squeeze2(conv_x_backward_2d(unsqueeze2(std::move(dy)), unsqueeze2(std::move(w)), x2, conv_as_2d(a)));
  }
  return host_conv_backward(OpCode::conv_x_backward, std::move(dy), std::move(w), xs, a);  // rank 3
}


// conv_weight_backward, rank 1 and 2, on the device: the forward's windows of the padded
// x, [G, Cog, N*L] x [G, N*L, Cg*kh*kw]. Rank 3 runs through the host.
Prim conv_weight_backward_2d(Prim x, Prim dy, const Shape& ws, const ConvArgs& a) {
  const DeviceId d = x->device();
  const Shape xs = x->shape(), ys = dy->shape();
  const auto g = static_cast<std::size_t>(a.groups);
  const std::size_t n = xs[0], co = ws[0], cg = ws[1], cog = co / g, taps = cg * ws[2] * ws[3];
  const std::array<std::int64_t, 2> p{a.padding[0], a.padding[1]};
  const std::array<std::int64_t, 2> k{static_cast<std::int64_t>(ws[2]), static_cast<std::int64_t>(ws[3])};
  Prim u = windows(padded(std::move(x), p, p, Scalar(0.0)), k, {a.stride[0], a.stride[1]}, {a.dilation[0], a.dilation[1]});
  const std::size_t l = u->shape()[2] * u->shape()[3];
  u = reshape_to(permute_prim(std::move(u), {0, 2, 3, 1, 4, 5}), Shape{n, l, g, taps});
  u = reshape_to(permute_prim(std::move(u), {2, 0, 1, 3}), Shape{g, n * l, taps});
  Prim gy = reshape_to(std::move(dy), Shape{n, g, cog, ys[2] * ys[3]});
  gy = reshape_to(permute_prim(std::move(gy), {1, 2, 0, 3}), Shape{g, cog, n * l});
  Prim dw = call<Family::Matmul>(OpCode::matmul, d, std::move(gy), std::move(u));  // [G, Cog, Cg*kh*kw]
  return reshape_to(std::move(dw), ws);
}
Prim d_conv_weight_backward(Prim x, Prim dy, const Shape& ws, const ConvArgs& a) {
  if (a.rank == 2) return conv_weight_backward_2d(std::move(x), std::move(dy), ws, a);
  if (a.rank == 1) {
    const Shape w2{ws[0], ws[1], 1, ws[2]};
    return reshape_to(conv_weight_backward_2d(unsqueeze2(std::move(x)), unsqueeze2(std::move(dy)), w2, conv_as_2d(a)), ws);
  }
  return host_conv_backward(OpCode::conv_weight_backward, std::move(x), std::move(dy), ws, a);  // rank 3
}

// dy [N, C, *S] summed over every dim but 1.
Prim d_conv_bias_backward(Prim dy) {
  const std::size_t c = dy->shape()[1], r = dy->shape().rank();
  for (std::size_t i = 0; i < r; ++i)
    if (i != 1) dy = rdim(OpCode::sum_dim, std::move(dy), i);
  return reshape_to(std::move(dy), Shape{c});
}

PoolArgs pool_as_2d(const PoolArgs& a) {
  PoolArgs b = a;
  b.rank = 2;
  b.kernel = {1, a.kernel[0], 1};
  b.stride = {1, a.stride[0], 1};
  b.padding = {0, a.padding[0], 0};
  b.dilation = {1, a.dilation[0], 1};
  b.output_size = {1, a.output_size[0], 1};
  return b;
}
std::array<std::int64_t, 2> two(const std::array<std::int64_t, 3>& v) { return {v[0], v[1]}; }

// The window sums / maxima of x [N, C, H, W] as [N, C, Ho, Wo] (out from the shape rule).
Prim pooled_windows(Prim x, const PoolArgs& a, std::size_t oh, std::size_t ow, Scalar fill, bool max) {
  const Shape xs = x->shape();
  const auto ho = static_cast<std::int64_t>(oh), wo = static_cast<std::int64_t>(ow);
  const std::array<std::int64_t, 2> after{
      a.padding[0] + overhang(xs[2], ho, a.kernel[0], a.stride[0], a.padding[0], a.dilation[0]),
      a.padding[1] + overhang(xs[3], wo, a.kernel[1], a.stride[1], a.padding[1], a.dilation[1])};
  Prim u = windows(padded(std::move(x), two(a.padding), after, fill), two(a.kernel), two(a.stride), two(a.dilation));
  // Ceil mode may leave one window more than torch keeps: take the first `out`.
  std::vector<DimSlice> ds = full_slices(u->shape());
  ds[2].len = oh;
  ds[3].len = ow;
  u = slice_prim(std::move(u), std::move(ds));
  const Shape us = u->shape();
  u = reshape_to(std::move(u), Shape{us[0], us[1], oh, ow, us[4] * us[5]});
  u = rdim(max ? OpCode::max_dim : OpCode::sum_dim, std::move(u), 4);
  return reshape_to(std::move(u), Shape{us[0], us[1], oh, ow});
}

// Output size of one pool dim (the lib/core/nn_shape.hpp rule the forwarder checked).
std::size_t pool_dim(std::size_t in, const PoolArgs& a, std::size_t i) {
  return static_cast<std::size_t>(core::pool_out_size(static_cast<std::int64_t>(in), a.kernel[i], a.stride[i],
                                                            a.padding[i], a.dilation[i], a.ceil_mode));
}

Prim d_max_pool2d(Prim x, const PoolArgs& a) {
  const Shape xs = x->shape();
  return pooled_windows(std::move(x), a, pool_dim(xs[2], a, 0), pool_dim(xs[3], a, 1),
                        Scalar(-std::numeric_limits<double>::infinity()), true);
}
Prim d_max_pool1d(Prim x, const PoolArgs& a) {
  const DeviceId d = x->device();
  return squeeze2(call<Family::Pool>(OpCode::max_pool2d, d, unsqueeze2(std::move(x)), pool_as_2d(a)));
}

// avg: window sums over zero padding, divided by the count of taps inside the padded
// input (count_include_pad) or inside the input; the counts come from pooling a mask
// of ones the same way, so everything stays on the device.
// The divisors of avg pooling [1, 1, oh, ow]: taps inside the padded input
// (count_include_pad) or inside the input, from pooling ones on the device.
Prim avg_counts(const Shape& xs, const PoolArgs& a, std::size_t oh, std::size_t ow, DeviceId d, DType dt) {
  Prim ones = full_shape(Shape{1, 1, xs[2], xs[3]}, Scalar(1.0), d, dt);
  if (a.count_include_pad) ones = padded(std::move(ones), two(a.padding), two(a.padding), Scalar(1.0));
  // With the padding made of ones, the windows start at the ones' origin.
  Prim counts;
  if (a.count_include_pad) {
    const Shape os = ones->shape();
    const std::array<std::int64_t, 2> after{
        overhang(os[2], static_cast<std::int64_t>(oh), a.kernel[0], a.stride[0], 0, 1),
        overhang(os[3], static_cast<std::int64_t>(ow), a.kernel[1], a.stride[1], 0, 1)};
    Prim u = windows(padded(std::move(ones), {0, 0}, after, Scalar(0.0)), two(a.kernel), two(a.stride), {1, 1});
    std::vector<DimSlice> ds = full_slices(u->shape());
    ds[2].len = oh;
    ds[3].len = ow;
    u = slice_prim(std::move(u), std::move(ds));
    u = reshape_to(std::move(u), Shape{1, 1, oh, ow, static_cast<std::size_t>(a.kernel[0] * a.kernel[1])});
    counts = reshape_to(rdim(OpCode::sum_dim, std::move(u), 4), Shape{1, 1, oh, ow});
  } else {
    counts = pooled_windows(std::move(ones), a, oh, ow, Scalar(0.0), false);
  }
  return counts;
}

Prim d_avg_pool2d(Prim x, const PoolArgs& args) {
  PoolArgs a = args;
  a.dilation = {1, 1, 1};  // avg pools have none
  const DeviceId d = x->device();
  const Shape xs = x->shape();
  const DType dt = x->dtype();
  const std::size_t oh = pool_dim(xs[2], a, 0), ow = pool_dim(xs[3], a, 1);
  Prim sums = pooled_windows(std::move(x), a, oh, ow, Scalar(0.0), false);
  Prim counts = avg_counts(xs, a, oh, ow, d, dt);
  return bin(OpCode::div, std::move(sums), std::move(counts));
}
// avg_pool_backward on the device: dy / counts added into the padded input once per
// kernel tap (slice_assign with the stride), then the padding cropped.
Prim avg_backward_2d(Prim dy, const Shape& xs, const PoolArgs& args) {
  PoolArgs a = args;
  a.dilation = {1, 1, 1};
  const DeviceId d = dy->device();
  const DType dt = dy->dtype();
  const Shape ys = dy->shape();
  const std::size_t oh = ys[2], ow = ys[3];
  Prim g = bin(OpCode::div, std::move(dy), avg_counts(xs, a, oh, ow, d, dt));
  const auto hp = static_cast<std::size_t>(static_cast<std::int64_t>(xs[2]) + 2 * a.padding[0] +
                                            overhang(xs[2], static_cast<std::int64_t>(oh), a.kernel[0], a.stride[0], a.padding[0], 1));
  const auto wp = static_cast<std::size_t>(static_cast<std::int64_t>(xs[3]) + 2 * a.padding[1] +
                                            overhang(xs[3], static_cast<std::int64_t>(ow), a.kernel[1], a.stride[1], a.padding[1], 1));
  const Shape ps{xs[0], xs[1], hp, wp};
  Prim acc;
  for (std::int64_t ka = 0; ka < a.kernel[0]; ++ka)
    for (std::int64_t kb = 0; kb < a.kernel[1]; ++kb) {
      std::vector<DimSlice> at = full_slices(ps);
      at[2] = {ka, a.stride[0], oh};
      at[3] = {kb, a.stride[1], ow};
      Prim part = call<Family::SliceAssign>(OpCode::slice_assign, d, full_shape(ps, Scalar(0.0), d, dt), DimSlices(at), g);
      acc = acc ? bin(OpCode::add, std::move(acc), std::move(part)) : std::move(part);
    }
  std::vector<DimSlice> crop = full_slices(ps);
  crop[2] = {a.padding[0], 1, xs[2]};
  crop[3] = {a.padding[1], 1, xs[3]};
  return slice_prim(std::move(acc), std::move(crop));
}
Prim d_avg_pool_backward(Prim dy, const Shape& x_shape, const PoolArgs& a) {
  if (a.rank == 1) {
    const Shape x2{x_shape[0], x_shape[1], 1, x_shape[2]};
    return reshape_to(avg_backward_2d(unsqueeze2(std::move(dy)), x2, pool_as_2d(a)), x_shape);
  }
  return avg_backward_2d(std::move(dy), x_shape, a);
}
Prim d_avg_pool1d(Prim x, const PoolArgs& a) {
  const DeviceId d = x->device();
  return squeeze2(call<Family::Pool>(OpCode::avg_pool2d, d, unsqueeze2(std::move(x)), pool_as_2d(a)));
}

// Adaptive average: separable, one slice + mean per output row, then per output column.
Prim adaptive_dim(Prim x, std::size_t dim, std::size_t out) {
  const DeviceId d = x->device();
  const std::size_t in = x->shape()[dim];
  std::vector<Prim> parts;
  for (std::size_t i = 0; i < out; ++i) {
    const auto s = core::adaptive_start(static_cast<std::int64_t>(i), static_cast<std::int64_t>(in), static_cast<std::int64_t>(out));
    const auto e = core::adaptive_end(static_cast<std::int64_t>(i), static_cast<std::int64_t>(in), static_cast<std::int64_t>(out));
    std::vector<DimSlice> ds = full_slices(x->shape());
    ds[dim] = {s, 1, static_cast<std::size_t>(e - s)};
    parts.push_back(rdim(OpCode::mean_dim, slice_prim(x, std::move(ds)), dim));
  }
  if (parts.size() == 1) return std::move(parts[0]);
  return call<Family::Cat>(OpCode::cat, d, std::move(parts), dim);
}
Prim d_adaptive_avg_pool2d(Prim x, const PoolArgs& a) {
  Prim y = adaptive_dim(std::move(x), 2, static_cast<std::size_t>(a.output_size[0]));
  return adaptive_dim(std::move(y), 3, static_cast<std::size_t>(a.output_size[1]));
}
// adaptive_avg_pool_backward on the device, one dim at a time: each output's gradient,
// divided by its window length, added over its window.
Prim adaptive_dim_backward(Prim g, std::size_t dim, std::size_t in) {
  const DeviceId d = g->device();
  const std::size_t out = g->shape()[dim];
  Shape target = g->shape();
  target[dim] = in;
  Prim acc;
  for (std::size_t i = 0; i < out; ++i) {
    const auto s = core::adaptive_start(static_cast<std::int64_t>(i), static_cast<std::int64_t>(in), static_cast<std::int64_t>(out));
    const auto e = core::adaptive_end(static_cast<std::int64_t>(i), static_cast<std::int64_t>(in), static_cast<std::int64_t>(out));
    std::vector<DimSlice> one = full_slices(g->shape());
    one[dim] = {static_cast<std::int64_t>(i), 1, 1};
    Prim gi = sc(OpCode::mul_scalar, slice_prim(g, std::move(one)), Scalar(1.0 / static_cast<double>(e - s)));
    Shape wide = gi->shape();
    wide[dim] = static_cast<std::size_t>(e - s);
    gi = call<Family::Reshape>(OpCode::expand, d, std::move(gi), wide);
    std::vector<DimSlice> at = full_slices(target);
    at[dim] = {s, 1, static_cast<std::size_t>(e - s)};
    Prim part = call<Family::SliceAssign>(OpCode::slice_assign, d, full_shape(target, Scalar(0.0), d, g->dtype()),
                                          DimSlices(at), std::move(gi));
    acc = acc ? bin(OpCode::add, std::move(acc), std::move(part)) : std::move(part);
  }
  return acc;
}
Prim d_adaptive_avg_pool_backward(Prim dy, const Shape& x_shape, const PoolArgs& a) {
  if (a.rank == 1) return adaptive_dim_backward(std::move(dy), 2, x_shape[2]);
  if (a.rank == 3) dy = adaptive_dim_backward(std::move(dy), 4, x_shape[4]);
  Prim g = adaptive_dim_backward(std::move(dy), 3, x_shape[3]);
  return adaptive_dim_backward(std::move(g), 2, x_shape[2]);
}
Prim d_adaptive_avg_pool1d(Prim x, const PoolArgs& a) {
  const DeviceId d = x->device();
  return squeeze2(call<Family::Pool>(OpCode::adaptive_avg_pool2d, d, unsqueeze2(std::move(x)), pool_as_2d(a)));
}

// embedding: select rows of the weights at the flattened indices.
Prim d_embedding(Prim weights, Prim indices) {
  const DeviceId d = weights->device();
  Shape out = indices->shape();
  out.push_back(weights->shape()[1]);
  Prim rows = call<Family::Select>(OpCode::select, d, std::move(weights), std::size_t{0}, flat(std::move(indices)));
  return reshape_to(std::move(rows), out);
}
// embedding_backward: dy rows added into zeros at the indices.
Prim d_embedding_backward(Prim dy, Prim indices, const Shape& weight_shape) {
  const DeviceId d = dy->device();
  const std::size_t count = indices->shape().num_elements();
  Prim zeros = full_shape(weight_shape, Scalar(0.0), d, dy->dtype());
  Prim rows = reshape_to(std::move(dy), Shape{count, weight_shape[1]});
  return call<Family::SelectAssign>(OpCode::select_add, d, std::move(zeros), std::size_t{0}, flat(std::move(indices)),
                                    std::move(rows));
}

// layer_norm over the last dim: (x - mean) / sqrt(biased var + eps) * gamma + beta.
Prim d_layer_norm(Prim x, Prim gamma, Prim beta, double eps) {
  const Shape s = x->shape();
  const std::size_t last = s.rank() - 1;
  Shape ps{std::vector<std::size_t>(s.rank(), 1)};
  ps[last] = s[last];
  Prim xc = bin(OpCode::sub, x, rdim(OpCode::mean_dim, x, last));
  Prim var = rdim(OpCode::mean_dim, d_square(xc), last);
  Prim rstd = un(OpCode::recip, un(OpCode::sqrt, sc(OpCode::add_scalar, std::move(var), Scalar(eps))));
  Prim y = bin(OpCode::mul, bin(OpCode::mul, std::move(xc), std::move(rstd)), reshape_to(std::move(gamma), ps));
  if (beta) y = bin(OpCode::add, std::move(y), reshape_to(std::move(beta), ps));
  return y;
}

// linear: the leading dims folded into rows, one 2-d matmul, the bias broadcast (burn's
// default with the fold policy; the weight is [d_in, d_out]).
Prim d_linear(Prim x, Prim w, Prim bias) {
  const DeviceId d = x->device();
  const Shape xs = x->shape();
  const std::size_t d_in = w->shape()[0], d_out = w->shape()[1];
  std::size_t rows = 1;
  for (std::size_t i = 0; i + 1 < xs.rank(); ++i) rows *= xs[i];
  Prim y = call<Family::Matmul>(OpCode::matmul, d, reshape_to(std::move(x), Shape{rows, d_in}), std::move(w));
  if (bias) y = bin(OpCode::add, std::move(y), reshape_to(std::move(bias), Shape{1, d_out}));
  Shape out = xs;
  out[out.rank() - 1] = d_out;
  return reshape_to(std::move(y), out);
}

// batch_norm (inference): each [C] statistic reshaped to [1, C, 1, ...];
// (x - mean) / sqrt(var + eps) * gamma + beta.
Prim d_batch_norm(Prim x, Prim gamma, Prim beta, Prim mean, Prim var, double eps) {
  const Shape s = x->shape();
  Shape ps{std::vector<std::size_t>(s.rank(), 1)};
  ps[1] = s[1];
  Prim xc = bin(OpCode::sub, std::move(x), reshape_to(std::move(mean), ps));
  Prim rstd = un(OpCode::recip, un(OpCode::sqrt, sc(OpCode::add_scalar, reshape_to(std::move(var), ps), Scalar(eps))));
  Prim y = bin(OpCode::mul, bin(OpCode::mul, std::move(xc), std::move(rstd)), reshape_to(std::move(gamma), ps));
  return bin(OpCode::add, std::move(y), reshape_to(std::move(beta), ps));
}

// The one-hot weight [C*kh*kw, C, kh, kw] of unfold4d/fold4d: w[c*kh*kw + i*kw + j, c, i, j] = 1.
Prim onehot_weight(std::size_t c, std::size_t kh, std::size_t kw, DType dt, DeviceId d) {
  const std::size_t taps = kh * kw;
  std::vector<float> v(c * taps * c * taps, 0.0f);
  for (std::size_t ch = 0; ch < c; ++ch)
    for (std::size_t t = 0; t < taps; ++t) v[((ch * taps + t) * c + ch) * taps + t] = 1.0f;
  Prim w = upload(TensorData::from(v, Shape{c * taps, c, kh, kw}), d);
  if (w->dtype() != dt) w = call<Family::Cast>(OpCode::cast, d, std::move(w), dt);
  return w;
}
ConvArgs fold_conv_args(const FoldArgs& a) {
  ConvArgs c;
  c.rank = 2;
  c.stride = {a.options.stride[0], a.options.stride[1], 1};
  c.padding = {a.options.padding[0], a.options.padding[1], 0};
  c.dilation = {a.options.dilation[0], a.options.dilation[1], 1};
  return c;
}
// unfold4d: conv2d with the one-hot weight, [N, C*kh*kw, Ho, Wo] reshaped to [N, C*kh*kw, L].
Prim d_unfold4d(Prim x, const FoldArgs& a) {
  const DeviceId d = x->device();
  const Shape xs = x->shape();
  const auto kh = static_cast<std::size_t>(a.kernel[0]), kw = static_cast<std::size_t>(a.kernel[1]);
  Prim w = onehot_weight(xs[1], kh, kw, x->dtype(), d);
  Prim y = call<Family::Conv>(OpCode::conv2d, d, std::move(x), std::move(w), Prim(), fold_conv_args(a));
  const Shape ys = y->shape();
  return reshape_to(std::move(y), Shape{ys[0], ys[1], ys[2] * ys[3]});
}
// fold4d: conv_transpose2d of the blocks [N, C*kh*kw, Hb, Wb] with the one-hot weight;
// padding_out = (H + 2p - d(k-1) - 1) mod s reaches the requested size.
Prim d_fold4d(Prim x, const FoldArgs& a) {
  const DeviceId d = x->device();
  const Shape xs = x->shape();
  const auto kh = static_cast<std::size_t>(a.kernel[0]), kw = static_cast<std::size_t>(a.kernel[1]);
  const std::size_t c = xs[1] / (kh * kw);
  ConvArgs ca = fold_conv_args(a);
  std::array<std::size_t, 2> blocks{};
  for (std::size_t i = 0; i < 2; ++i) {
    const std::int64_t span = a.output_size[i] + 2 * a.options.padding[i] - a.options.dilation[i] * (a.kernel[i] - 1) - 1;
    blocks[i] = static_cast<std::size_t>(span / a.options.stride[i] + 1);
    ca.padding_out[i] = span % a.options.stride[i];
  }
  Prim w = onehot_weight(c, kh, kw, x->dtype(), d);
  Prim b = reshape_to(std::move(x), Shape{xs[0], xs[1], blocks[0], blocks[1]});
  return call<Family::Conv>(OpCode::conv_transpose2d, d, std::move(b), std::move(w), Prim(), ca);
}

}  // namespace

TENSOR_DEFAULT(OpCode, conv1d, d_conv1d)
TENSOR_DEFAULT(OpCode, conv2d, d_conv2d)
TENSOR_DEFAULT(OpCode, conv_x_backward, d_conv_x_backward)
TENSOR_DEFAULT(OpCode, conv_weight_backward, d_conv_weight_backward)
TENSOR_DEFAULT(OpCode, conv_bias_backward, d_conv_bias_backward)
TENSOR_DEFAULT(OpCode, max_pool1d, d_max_pool1d)
TENSOR_DEFAULT(OpCode, max_pool2d, d_max_pool2d)
TENSOR_DEFAULT(OpCode, max_pool_with_indices_backward, d_max_pool_with_indices_backward)
TENSOR_DEFAULT(OpCode, avg_pool1d, d_avg_pool1d)
TENSOR_DEFAULT(OpCode, avg_pool2d, d_avg_pool2d)
TENSOR_DEFAULT(OpCode, avg_pool_backward, d_avg_pool_backward)
TENSOR_DEFAULT(OpCode, adaptive_avg_pool1d, d_adaptive_avg_pool1d)
TENSOR_DEFAULT(OpCode, adaptive_avg_pool2d, d_adaptive_avg_pool2d)
TENSOR_DEFAULT(OpCode, adaptive_avg_pool_backward, d_adaptive_avg_pool_backward)
TENSOR_DEFAULT(OpCode, embedding, d_embedding)
TENSOR_DEFAULT(OpCode, embedding_backward, d_embedding_backward)
TENSOR_DEFAULT(OpCode, layer_norm, d_layer_norm)
TENSOR_DEFAULT(OpCode, linear, d_linear)
TENSOR_DEFAULT(OpCode, batch_norm, d_batch_norm)
TENSOR_DEFAULT(OpCode, unfold4d, d_unfold4d)
TENSOR_DEFAULT(OpCode, fold4d, d_fold4d)

}  // namespace tensor::dispatch::defaults
