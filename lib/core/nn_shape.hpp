// The output-shape rules of the module ops (conv, conv_transpose, deform_conv2d, pooling,
// unfold4d / fold4d, interpolate, attention), once, for dispatch and every backend: each
// validates its options and input shapes and throws ShapeError "[op] what is wrong;
// expected ...; got ..." naming the op the user called. Convolutions take lib/core's
// ConvArgs (nn_args.hpp); the other families the public tensor/nn_options.hpp types.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "lib/core/nn_args.hpp"
#include "tensor/error.hpp"
#include "tensor/nn_options.hpp"
#include "tensor/shape.hpp"

namespace tensor::core {

// ---------------------------------------------------------------------------------------
// Output-size rules (one spatial dim). The raw formulas may give <= 0; the shape rules
// below turn that into a ShapeError.

// conv, unfold and floor-mode pooling: floor((in + 2p - d(k-1) - 1) / s) + 1.
constexpr std::int64_t conv_out_size(std::int64_t in, std::int64_t k, std::int64_t s, std::int64_t p,
                                     std::int64_t d) {
  const std::int64_t span = in + 2 * p - d * (k - 1) - 1;
  if (span < 0) return 0;
  return span / s + 1;
}

// Pooling; with ceil_mode torch's rule: ceil instead of floor, then one less when the last
// window would start at or past in + p (inside the right padding only).
constexpr std::int64_t pool_out_size(std::int64_t in, std::int64_t k, std::int64_t s, std::int64_t p,
                                     std::int64_t d, bool ceil_mode) {
  const std::int64_t span = in + 2 * p - d * (k - 1) - 1;
  if (span < 0) return 0;
  if (!ceil_mode) return span / s + 1;
  std::int64_t out = (span + s - 1) / s + 1;
  if ((out - 1) * s >= in + p) --out;
  return out;
}

// Transposed conv: (in - 1)s - 2p + d(k-1) + padding_out + 1.
constexpr std::int64_t conv_transpose_out_size(std::int64_t in, std::int64_t k, std::int64_t s, std::int64_t p,
                                               std::int64_t d, std::int64_t padding_out) {
  return (in - 1) * s - 2 * p + d * (k - 1) + padding_out + 1;
}

// Adaptive pooling window of output i: [floor(i·in/out), ceil((i+1)·in/out)).
constexpr std::int64_t adaptive_start(std::int64_t i, std::int64_t in, std::int64_t out) { return (i * in) / out; }
constexpr std::int64_t adaptive_end(std::int64_t i, std::int64_t in, std::int64_t out) {
  return ((i + 1) * in + out - 1) / out;
}

// padding_out that restores the trailing inputs a conv never read (burn's
// calculate_padding_out): used by the conv input gradient.
constexpr std::int64_t conv_backward_padding_out(std::int64_t in, std::int64_t out, std::int64_t k, std::int64_t s,
                                                 std::int64_t p, std::int64_t d) {
  const std::int64_t v = in - ((out - 1) * s + d * (k - 1) + 1 - 2 * p);
  return v > 0 ? v : 0;
}

namespace nn_check {

inline std::string list(const std::int64_t* v, std::size_t n) {
  std::string s = "[";
  for (std::size_t i = 0; i < n; ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}
template <std::size_t N>
std::string list(const std::array<std::int64_t, N>& a) {
  return list(a.data(), N);
}
[[noreturn]] inline void fail(std::string_view op, const std::string& what) {
  throw ShapeError("[" + std::string(op) + "] " + what);
}
inline void expect_rank(std::string_view op, const char* name, const Shape& s, std::size_t rank,
                        const char* layout) {
  if (s.rank() != rank)
    fail(op, std::string(name) + " has the wrong rank; expected rank " + std::to_string(rank) + " " + layout +
                 "; got " + s.to_string());
}
inline void expect_at_least(std::string_view op, const char* name, const std::int64_t* v, std::size_t n,
                            std::int64_t lo) {
  for (std::size_t i = 0; i < n; ++i)
    if (v[i] < lo)
      fail(op, std::string(name) + (lo == 0 ? " must not be negative" : " must be positive") + "; expected " +
                   name + " >= " + std::to_string(lo) + " in every dim; got " + list(v, n));
}
template <std::size_t N>
void expect_at_least(std::string_view op, const char* name, const std::array<std::int64_t, N>& a, std::int64_t lo) {
  expect_at_least(op, name, a.data(), N, lo);
}
inline void expect_positive(std::string_view op, const char* name, std::int64_t v) {
  if (v < 1) fail(op, std::string(name) + " must be positive; expected >= 1; got " + std::to_string(v));
}
inline std::string spatial(const Shape& s, std::size_t from) {
  std::string r = "[";
  for (std::size_t i = from; i < s.rank(); ++i) r += (i > from ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}
inline const char* nd_layout(std::size_t n) {
  return n == 1 ? "[N, C, L]" : n == 2 ? "[N, C, H, W]" : "[N, C, D, H, W]";
}
inline std::int64_t i64(std::size_t v) { return static_cast<std::int64_t>(v); }
// Option arithmetic is checked like shape arithmetic: a product or sum of non-negative
// option values that would not fit int64 is a ShapeError, never a wrapped "valid" size.
inline std::int64_t add_checked(std::string_view op, std::int64_t a, std::int64_t b, const char* what) {
  if (a > INT64_MAX - b)
    fail(op, std::string(what) + " overflows; expected option arithmetic that fits a signed 64-bit integer; got " +
                 std::to_string(a) + " + " + std::to_string(b));
  return a + b;
}
inline std::int64_t mul_checked(std::string_view op, std::int64_t a, std::int64_t b, const char* what) {
  if (a != 0 && b > INT64_MAX / a)
    fail(op, std::string(what) + " overflows; expected option arithmetic that fits a signed 64-bit integer; got " +
                 std::to_string(a) + " * " + std::to_string(b));
  return a * b;
}
// dilation * (kernel - 1) + 1, the extent of a dilated kernel (kernel >= 1, dilation >= 1).
inline std::int64_t kernel_extent(std::string_view op, std::int64_t k, std::int64_t d) {
  return add_checked(op, mul_checked(op, d, k - 1, "dilation * (kernel - 1) + 1"), 1, "dilation * (kernel - 1) + 1");
}
// in + 2 * padding (padding >= 0).
inline std::int64_t padded_size(std::string_view op, std::int64_t in, std::int64_t p) {
  return add_checked(op, in, mul_checked(op, 2, p, "in + 2 * padding"), "in + 2 * padding");
}
inline void expect_bias(std::string_view op, const Shape* bias, std::size_t channels) {
  if (bias && !(bias->rank() == 1 && (*bias)[0] == channels))
    fail(op, "bias has the wrong shape; expected [" + std::to_string(channels) + "]; got " + bias->to_string());
}

}  // namespace nn_check

// convNd(x [N, Cin, *S], weight [Cout, Cin/G, *K], bias [Cout]?) -> [N, Cout, *O], N = a.rank
// (1..3; the caller checks the range).
inline Shape conv_output_shape(std::string_view op, const Shape& x, const Shape& weight, const ConvArgs& a,
                               const Shape* bias = nullptr) {
  using namespace nn_check;
  const std::size_t n = a.rank;
  expect_rank(op, "x", x, n + 2, nd_layout(n));
  expect_rank(op, "weight", weight, n + 2, "[C_out, C_in / groups, *kernel]");
  expect_at_least(op, "stride", a.stride.data(), n, 1);
  expect_at_least(op, "dilation", a.dilation.data(), n, 1);
  expect_at_least(op, "padding", a.padding.data(), n, 0);
  expect_positive(op, "groups", a.groups);
  const auto g = static_cast<std::size_t>(a.groups);
  if (x[1] % g != 0 || weight[0] % g != 0)
    fail(op, "channels not divisible by groups; expected C_in and C_out divisible by " + std::to_string(g) +
                 "; got C_in " + std::to_string(x[1]) + ", C_out " + std::to_string(weight[0]));
  if (weight[1] * g != x[1])
    fail(op, "weight channels do not match the input; expected weight.shape[1] = C_in / groups = " +
                 std::to_string(x[1] / g) + "; got weight " + weight.to_string() + " for x " + x.to_string());
  if (weight[0] == 0) fail(op, "weight has no output channels; expected C_out >= 1; got " + weight.to_string());
  expect_bias(op, bias, weight[0]);
  Shape out{x[0], weight[0]};
  for (std::size_t i = 0; i < n; ++i) {
    const std::int64_t in = i64(x[2 + i]), k = i64(weight[2 + i]);
    if (k < 1) fail(op, "kernel size must be positive; expected >= 1; got weight " + weight.to_string());
    const std::int64_t eff = kernel_extent(op, k, a.dilation[i]);
    if (padded_size(op, in, a.padding[i]) < eff)
      fail(op, "kernel larger than the padded input; expected (in + 2*padding) >= dilation*(kernel-1)+1 in every "
               "dim; got input " + spatial(x, 2) + ", padding " + list(a.padding.data(), n) + ", kernel " +
                   spatial(weight, 2) + ", dilation " + list(a.dilation.data(), n));
    out.push_back(static_cast<std::size_t>(conv_out_size(in, k, a.stride[i], a.padding[i], a.dilation[i])));
  }
  return out;
}

// conv_transposeNd(x [N, Cin, *S], weight [Cin, Cout/G, *K], bias [Cout]?) -> [N, G·weight[1], *O],
// N = a.rank (1..3; the caller checks the range).
inline Shape conv_transpose_output_shape(std::string_view op, const Shape& x, const Shape& weight, const ConvArgs& a,
                                         const Shape* bias = nullptr) {
  using namespace nn_check;
  const std::size_t n = a.rank;
  expect_rank(op, "x", x, n + 2, nd_layout(n));
  expect_rank(op, "weight", weight, n + 2, "[C_in, C_out / groups, *kernel]");
  expect_at_least(op, "stride", a.stride.data(), n, 1);
  expect_at_least(op, "dilation", a.dilation.data(), n, 1);
  expect_at_least(op, "padding", a.padding.data(), n, 0);
  expect_at_least(op, "padding_out", a.padding_out.data(), n, 0);
  expect_positive(op, "groups", a.groups);
  const auto g = static_cast<std::size_t>(a.groups);
  if (x[1] % g != 0)
    fail(op, "channels not divisible by groups; expected C_in divisible by " + std::to_string(g) + "; got C_in " +
                 std::to_string(x[1]));
  if (weight[0] != x[1])
    fail(op, "weight channels do not match the input; expected weight.shape[0] = C_in = " + std::to_string(x[1]) +
                 "; got weight " + weight.to_string());
  if (weight[1] == 0) fail(op, "weight has no output channels; expected weight.shape[1] >= 1; got " + weight.to_string());
  const auto cout = static_cast<std::size_t>(mul_checked(op, i64(weight[1]), a.groups, "C_out / groups * groups"));
  expect_bias(op, bias, cout);
  Shape out{x[0], cout};
  for (std::size_t i = 0; i < n; ++i) {
    const std::int64_t k = i64(weight[2 + i]);
    if (k < 1) fail(op, "kernel size must be positive; expected >= 1; got weight " + weight.to_string());
    if (a.padding_out[i] >= std::max(a.stride[i], a.dilation[i]))
      fail(op, "padding_out too large; expected padding_out < max(stride, dilation) in every dim; got padding_out " +
                   list(a.padding_out.data(), n) + ", stride " + list(a.stride.data(), n) + ", dilation " +
                   list(a.dilation.data(), n));
    if (x[2 + i] == 0) fail(op, "empty spatial input; expected every spatial dim >= 1; got x " + x.to_string());
    // (in - 1) * stride + dilation * (kernel - 1) + padding_out + 1 - 2 * padding, every
    // step checked (the backends' adjoint conv pads this size by 2 * padding again).
    const std::int64_t grown = add_checked(
        op, mul_checked(op, i64(x[2 + i]) - 1, a.stride[i], "(in - 1) * stride"), kernel_extent(op, k, a.dilation[i]),
        "(in - 1) * stride + dilation * (kernel - 1) + 1");
    const std::int64_t full = add_checked(op, grown, a.padding_out[i], "the transposed output size");
    const std::int64_t v = full - mul_checked(op, 2, a.padding[i], "2 * padding");
    if (v < 1)
      fail(op, "output size must be positive; expected (in-1)*stride - 2*padding + dilation*(kernel-1) + "
               "padding_out + 1 >= 1; got " + std::to_string(v) + " in dim " + std::to_string(i) + " for x " +
                   x.to_string() + ", padding " + list(a.padding.data(), n));
    out.push_back(static_cast<std::size_t>(v));
  }
  return out;
}

// The same rules on the public per-rank options (for the kernels' own tests and callers
// that hold them).
template <std::size_t N>
Shape conv_output_shape(std::string_view op, const Shape& x, const Shape& weight, const nn::ConvOptions<N>& o,
                        const Shape* bias = nullptr) {
  return conv_output_shape(op, x, weight, conv_args(o), bias);
}
template <std::size_t N>
Shape conv_transpose_output_shape(std::string_view op, const Shape& x, const Shape& weight,
                                  const nn::ConvTransposeOptions<N>& o, const Shape* bias = nullptr) {
  return conv_transpose_output_shape(op, x, weight, conv_args(o), bias);
}

// The output of a conv (transpose) whose arguments the rules above already accepted: the
// same arithmetic, no checks (what a backend computes from checked arguments).
inline Shape checked_conv_output(const Shape& x, const Shape& weight, const ConvArgs& a, bool transposed) {
  Shape out{x[0], transposed ? weight[1] * static_cast<std::size_t>(a.groups) : weight[0]};
  for (std::size_t i = 0; i < a.rank; ++i) {
    const std::int64_t in = nn_check::i64(x[2 + i]), k = nn_check::i64(weight[2 + i]);
    out.push_back(static_cast<std::size_t>(
        transposed ? conv_transpose_out_size(in, k, a.stride[i], a.padding[i], a.dilation[i], a.padding_out[i])
                   : conv_out_size(in, k, a.stride[i], a.padding[i], a.dilation[i])));
  }
  return out;
}

// deform_conv2d(x [N,Cin,H,W], offset [N, 2·OG·kh·kw, Ho, Wo], weight [Cout, Cin/WG, kh, kw],
// mask [N, OG·kh·kw, Ho, Wo]?, bias [Cout]?) -> [N, Cout, Ho, Wo].
inline Shape deform_conv2d_output_shape(std::string_view op, const Shape& x, const Shape& offset,
                                        const Shape& weight, const Shape* mask, const Shape* bias,
                                        const nn::DeformConvOptions<2>& o) {
  using namespace nn_check;
  nn::ConvOptions<2> co;
  co.stride = o.stride;
  co.padding = o.padding;
  co.dilation = o.dilation;
  co.groups = o.weight_groups;
  const Shape out = conv_output_shape<2>(op, x, weight, co, bias);
  expect_positive(op, "offset_groups", o.offset_groups);
  const auto og = static_cast<std::size_t>(o.offset_groups);
  if (x[1] % og != 0)
    fail(op, "channels not divisible by offset_groups; expected C_in divisible by " + std::to_string(og) +
                 "; got C_in " + std::to_string(x[1]));
  const std::size_t taps = weight[2] * weight[3];
  const auto og_taps = static_cast<std::size_t>(mul_checked(op, i64(og), i64(taps), "offset_groups * kernel taps"));
  const Shape want_off{x[0], static_cast<std::size_t>(mul_checked(op, 2, i64(og_taps), "2 * offset_groups * kernel taps")),
                       out[2], out[3]};
  if (!(offset == want_off))
    fail(op, "offset has the wrong shape; expected " + want_off.to_string() + "; got " + offset.to_string());
  if (mask) {
    const Shape want_mask{x[0], og_taps, out[2], out[3]};
    if (!(*mask == want_mask))
      fail(op, "mask has the wrong shape; expected " + want_mask.to_string() + "; got " + mask->to_string());
  }
  return out;
}

// unfold4d(x [N,C,H,W], kernel [2]) -> [N, C·kh·kw, Ho·Wo].
inline Shape unfold4d_output_shape(std::string_view op, const Shape& x, const std::array<std::int64_t, 2>& kernel,
                                   const nn::UnfoldOptions& o) {
  using namespace nn_check;
  expect_at_least(op, "kernel_size", kernel, 1);
  const Shape w{1, x.rank() == 4 ? x[1] : 1, static_cast<std::size_t>(kernel[0]), static_cast<std::size_t>(kernel[1])};
  nn::ConvOptions<2> co;
  co.stride = o.stride;
  co.padding = o.padding;
  co.dilation = o.dilation;
  const Shape c = conv_output_shape<2>(op, x, w, co);
  const std::int64_t taps = mul_checked(op, kernel[0], kernel[1], "kernel_size[0] * kernel_size[1]");
  const std::int64_t rows = mul_checked(op, i64(x[1]), taps, "C * kh * kw");
  const std::int64_t blocks = mul_checked(op, i64(c[2]), i64(c[3]), "the block count");
  return Shape{x[0], static_cast<std::size_t>(rows), static_cast<std::size_t>(blocks)};
}

// fold4d(x [N, C·kh·kw, L], output_size [H, W], kernel [2]) -> [N, C, H, W]; L must equal the
// block grid of the output size under the options.
inline Shape fold4d_output_shape(std::string_view op, const Shape& x, const std::array<std::int64_t, 2>& size,
                                 const std::array<std::int64_t, 2>& kernel, const nn::UnfoldOptions& o) {
  using namespace nn_check;
  expect_rank(op, "x", x, 3, "[N, C * kh * kw, L]");
  expect_at_least(op, "kernel_size", kernel, 1);
  expect_at_least(op, "output size", size, 1);
  const auto taps = static_cast<std::size_t>(mul_checked(op, kernel[0], kernel[1], "kernel_size[0] * kernel_size[1]"));
  if (x[1] % taps != 0)
    fail(op, "channels not divisible by the kernel size; expected x.shape[1] divisible by kh*kw = " +
                 std::to_string(taps) + "; got " + x.to_string());
  const Shape image{x[0], x[1] / taps, static_cast<std::size_t>(size[0]), static_cast<std::size_t>(size[1])};
  const Shape cols = unfold4d_output_shape(op, image, kernel, o);
  if (cols[2] != x[2])
    fail(op, "block count does not match the output size; expected L = " + std::to_string(cols[2]) + " for output " +
                 list(size) + "; got " + x.to_string());
  return image;
}

namespace nn_check {
// max/avg pooling of n spatial dims; avg pools pass dilation 1.
inline Shape pool_shape(std::string_view op, const Shape& x, std::size_t n, const std::int64_t* kernel,
                        const std::int64_t* stride, const std::int64_t* padding, const std::int64_t* dilation,
                        bool ceil_mode, bool max_pool) {
  expect_rank(op, "x", x, n + 2, nd_layout(n));
  expect_at_least(op, "kernel_size", kernel, n, 1);
  expect_at_least(op, "stride", stride, n, 1);
  expect_at_least(op, "dilation", dilation, n, 1);
  expect_at_least(op, "padding", padding, n, 0);
  Shape out{x[0], x[1]};
  for (std::size_t i = 0; i < n; ++i) {
    const std::int64_t eff = kernel_extent(op, kernel[i], dilation[i]);
    const std::int64_t half = max_pool ? eff / 2 : kernel[i] / 2;
    if (padding[i] > half)
      fail(op, std::string("padding larger than half the ") + (max_pool ? "dilated " : "") +
                   "kernel; expected padding <= " + (max_pool ? "(dilation*(kernel-1)+1)/2" : "kernel/2") +
                   " in every dim; got padding " + list(padding, n) + ", kernel " + list(kernel, n) +
                   (max_pool ? ", dilation " + list(dilation, n) : std::string()));
    const std::int64_t in = i64(x[2 + i]);
    const std::int64_t padded = padded_size(op, in, padding[i]);
    if (ceil_mode) add_checked(op, padded, stride[i], "in + 2 * padding + stride (ceil mode)");
    if (padded < eff)
      fail(op, "kernel larger than the padded input; expected (in + 2*padding) >= " +
                   std::string(max_pool ? "dilation*(kernel-1)+1" : "kernel") + " in every dim; got input " +
                   spatial(x, 2) + ", padding " + list(padding, n) + ", kernel " + list(kernel, n));
    const std::int64_t v = pool_out_size(in, kernel[i], stride[i], padding[i], dilation[i], ceil_mode);
    if (v < 1)
      fail(op, "output size must be positive; expected >= 1; got " + std::to_string(v) + " for input " +
                   spatial(x, 2));
    out.push_back(static_cast<std::size_t>(v));
  }
  return out;
}
inline Shape adaptive_shape(std::string_view op, const Shape& x, std::size_t n, const std::int64_t* size) {
  expect_rank(op, "x", x, n + 2, nd_layout(n));
  if (x.rank() > 2)
    for (std::size_t i = 2; i < x.rank(); ++i)
      if (x[i] == 0) fail(op, "empty spatial input; expected every spatial dim >= 1; got x " + x.to_string());
  for (std::size_t i = 0; i < n; ++i)
    if (size[i] < 1) fail(op, "output size must be positive; expected >= 1 in every dim; got " + list(size, n));
  Shape out{x[0], x[1]};
  for (std::size_t i = 0; i < n; ++i) {
    // The window bounds are (i + 1) * in + out - 1 at most.
    if (x.rank() == n + 2)
      add_checked(op, mul_checked(op, size[i], i64(x[2 + i]), "output size * input size"), size[i],
                  "output size * input size + output size");
    out.push_back(static_cast<std::size_t>(size[i]));
  }
  return out;
}
}  // namespace nn_check

// A pool of a.rank spatial dims (1..3; the caller checks the range) by its window rule:
// max_poolNd / avg_poolNd (x [N, C, *S]) -> [N, C, *O] (max pool indices have the same
// shape); adaptive_avg_poolNd -> [N, C, *output_size].
inline Shape pool_output_shape(std::string_view op, const Shape& x, const PoolArgs& a, Window window) {
  const std::int64_t one[3] = {1, 1, 1};
  if (window == Window::AdaptiveAvg) return nn_check::adaptive_shape(op, x, a.rank, a.output_size.data());
  const bool max_pool = window == Window::Max;
  return nn_check::pool_shape(op, x, a.rank, a.kernel.data(), a.stride.data(), a.padding.data(),
                              max_pool ? a.dilation.data() : one, a.ceil_mode, max_pool);
}

// The same rules on the public per-rank options (for the kernels' own tests and callers
// that hold them).
template <std::size_t N>
Shape max_pool_output_shape(std::string_view op, const Shape& x, const nn::MaxPoolOptions<N>& o) {
  return pool_output_shape(op, x, pool_args(o), Window::Max);
}
template <std::size_t N>
Shape avg_pool_output_shape(std::string_view op, const Shape& x, const nn::AvgPoolOptions<N>& o) {
  return pool_output_shape(op, x, pool_args(o), Window::Avg);
}
template <std::size_t N>
Shape adaptive_avg_pool_output_shape(std::string_view op, const Shape& x, const std::array<std::int64_t, N>& size) {
  return pool_output_shape(op, x, adaptive_pool_args(size), Window::AdaptiveAvg);
}

// The output of a pool whose arguments the rule above already accepted: the same
// arithmetic, no checks.
inline Shape checked_pool_output(const Shape& x, const PoolArgs& a, Window window) {
  Shape out{x[0], x[1]};
  for (std::size_t i = 0; i < a.rank; ++i) {
    const std::int64_t d = window == Window::Max ? a.dilation[i] : 1;
    out.push_back(static_cast<std::size_t>(
        window == Window::AdaptiveAvg
            ? a.output_size[i]
            : pool_out_size(nn_check::i64(x[2 + i]), a.kernel[i], a.stride[i], a.padding[i], d, a.ceil_mode)));
  }
  return out;
}

// interpolate(x [N, C, H, W], output_size [2]) -> [N, C, Ho, Wo].
inline Shape interpolate_output_shape(std::string_view op, const Shape& x, const std::array<std::int64_t, 2>& size) {
  using namespace nn_check;
  expect_rank(op, "x", x, 4, "[N, C, H, W]");
  if (x[2] == 0 || x[3] == 0) fail(op, "empty spatial input; expected H, W >= 1; got x " + x.to_string());
  for (auto v : size)
    if (v < 1) fail(op, "output size must be positive; expected >= 1 in every dim; got " + list(size));
  return Shape{x[0], x[1], static_cast<std::size_t>(size[0]), static_cast<std::size_t>(size[1])};
}

// attention(q [B,H,Lq,D], k [B,H,Lk,D], v [B,H,Lk,Dv], mask?, bias?) -> [B,H,Lq,Dv]; mask and
// bias are [B|1, H|1, Lq, Lk].
inline Shape attention_output_shape(std::string_view op, const Shape& q, const Shape& k, const Shape& v,
                                    const Shape* mask, const Shape* bias, const nn::AttentionModuleOptions& o) {
  using namespace nn_check;
  expect_rank(op, "q", q, 4, "[B, H, L_q, D]");
  expect_rank(op, "k", k, 4, "[B, H, L_k, D]");
  expect_rank(op, "v", v, 4, "[B, H, L_k, D_v]");
  if (k[0] != q[0] || k[1] != q[1] || k[3] != q[3] || v[0] != q[0] || v[1] != q[1] || v[2] != k[2])
    fail(op, "q, k, v shapes do not agree; expected q [B,H,L_q,D], k [B,H,L_k,D], v [B,H,L_k,D_v]; got q " +
                 q.to_string() + ", k " + k.to_string() + ", v " + v.to_string());
  for (const auto& [s, name] : {std::pair{mask, "mask"}, std::pair{bias, "attn_bias"}}) {
    if (!s) continue;
    const bool ok = s->rank() == 4 && ((*s)[0] == q[0] || (*s)[0] == 1) && ((*s)[1] == q[1] || (*s)[1] == 1) &&
                    (*s)[2] == q[2] && (*s)[3] == k[2];
    if (!ok)
      fail(op, std::string(name) + " has the wrong shape; expected [" + std::to_string(q[0]) + " or 1, " +
                   std::to_string(q[1]) + " or 1, " + std::to_string(q[2]) + ", " + std::to_string(k[2]) +
                   "]; got " + s->to_string());
  }
  if (o.softcap && !(*o.softcap > 0.0))
    fail(op, "softcap must be positive; expected softcap > 0; got " + std::to_string(*o.softcap));
  return Shape{q[0], q[1], q[2], v[3]};
}

}  // namespace tensor::core
