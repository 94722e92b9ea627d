// The conv family (conv.comp): conv and conv_transpose 1-d to 3-d, forward and the
// ConvBackward rows, as an implicit GEMM over one forward geometry (the CPU's
// conv.cpp split: a transposed conv is the input gradient of its adjoint conv).
#include <fmt/format.h>

#include <algorithm>
#include <array>

#include "backends/vulkan/ops/kernel.hpp"
#include "backends/vulkan/vk_ops.hpp"
#include "lib/core/current_op.hpp"
#include "lib/core/nn_shape.hpp"
#include "tensor/error.hpp"

namespace tensor::vulkan {

using namespace kernel;

namespace {

using dispatch::ConvArgs;
using I = std::int64_t;

// conv.comp's modes and parameter words (its CV_* and Q_*).
enum Mode : std::uint32_t { kFwd = 0, kBwdX = 1, kBwdW = 2, kBias = 3, kSum = 4 };
constexpr int kQN = 0, kQCi = 1, kQCo = 2, kQG = 3, kQIn = 4, kQKer = 7, kQOut = 10, kQStride = 13, kQPad = 16,
              kQDil = 19, kQK0 = 22, kQK1 = 23, kQAcc = 24, kQBias = 25, kQZBase = 26,
              kQXBase = 27, kQKSplit = 28, kQOStride = 29;
constexpr std::size_t kTile = 64;  // conv.comp's BN (its BM is 16 TMR)

// One forward convolution x [n, ci, *in] * w [co, ci/groups, *ker] -> [n, co, *out] in three
// spatial dims (1-d and 2-d lead with size-1 dims).
struct Geom {
  std::size_t n = 1, ci = 1, co = 1, groups = 1;
  std::array<I, 3> in{1, 1, 1}, ker{1, 1, 1}, out{1, 1, 1}, stride{1, 1, 1}, pad{0, 0, 0}, dil{1, 1, 1};
  std::size_t in_size() const { return static_cast<std::size_t>(in[0] * in[1] * in[2]); }
  std::size_t out_size() const { return static_cast<std::size_t>(out[0] * out[1] * out[2]); }
  std::size_t ker_size() const { return static_cast<std::size_t>(ker[0] * ker[1] * ker[2]); }
};

// The geometry of a conv (x: its input shape) or of a transposed conv's adjoint conv (x: the
// transpose's input, which is that conv's output); dispatch validated both shapes already.
Geom geom_of(const ConvArgs& a, const Shape& x, const Shape& w, bool transpose) {
  Geom g;
  const std::size_t R = a.rank;
  g.n = x[0];
  g.groups = static_cast<std::size_t>(a.groups);
  for (std::size_t i = 0; i < R; ++i) {
    const std::size_t d = 3 - R + i;
    g.ker[d] = static_cast<I>(w[2 + i]);
    g.stride[d] = a.stride[i];
    g.pad[d] = a.padding[i];
    g.dil[d] = a.dilation[i];
    const I xi = static_cast<I>(x[2 + i]);
    if (transpose) {
      g.out[d] = xi;
      g.in[d] = tensor::core::conv_transpose_out_size(xi, g.ker[d], g.stride[d], g.pad[d], g.dil[d], a.padding_out[i]);
    } else {
      g.in[d] = xi;
      g.out[d] = tensor::core::conv_out_size(xi, g.ker[d], g.stride[d], g.pad[d], g.dil[d]);
    }
  }
  if (transpose) {
    g.co = x[1];
    g.ci = w[1] * g.groups;
  } else {
    g.ci = x[1];
    g.co = w[0];
  }
  return g;
}

// [n, c, *spatial] with the last `rank` of the three dims.
Shape nc_shape(std::size_t n, std::size_t c, const std::array<I, 3>& sp, std::size_t rank) {
  Shape s{n, c};
  for (std::size_t d = 3 - rank; d < 3; ++d) s.push_back(static_cast<std::size_t>(sp[d]));
  return s;
}

// conv.comp works in 32-bit ints: a tap's input position o * stride - padding + t * dilation
// (and i + padding - t * dilation for the input gradient) must stay below 2^31 along every
// dim, so each option and size is one unmangled shader word. Refused before anything is
// recorded (`rank`: the op's spatial dims, which occupy the last `rank` of the three).
void check_int32(const Geom& g, std::size_t rank) {
  constexpr I kMax = 0x7FFFFFFF;
  const auto fits = [](I v) { return v >= 0 && v <= kMax; };
  for (int d = static_cast<int>(3 - rank); d < 3; ++d) {
    const I in = g.in[d], out = g.out[d], k = g.ker[d], s = g.stride[d], p = g.pad[d], dl = g.dil[d];
    bool ok = fits(in) && fits(out) && fits(k) && fits(s) && fits(p) && fits(dl) && in + p <= kMax;
    if (ok) {
      const I span = std::max<I>(out - 1, 0) * s;  // each factor below 2^31: no int64 overflow
      const I reach = std::max<I>(k - 1, 0) * dl;
      ok = span <= kMax && reach <= kMax && span + reach + p <= kMax;
    }
    if (!ok)
      throw ExecutionError(fmt::format(
          "[{}] convolution geometry beyond vulkan's 32-bit shader arithmetic; expected (out - 1) * stride + padding + "
          "(kernel - 1) * dilation and in + padding below 2^31 along every spatial dim; got in {}, out {}, kernel {}, "
          "stride {}, padding {}, dilation {} along spatial dim {}",
          core::current_op_name(), in, out, k, s, p, dl, d - static_cast<int>(3 - rank)));
  }
  for (std::size_t v : {g.n, g.ci, g.co, g.groups})
    if (v > static_cast<std::size_t>(kMax))
      throw ExecutionError(fmt::format("[{}] convolution size beyond vulkan's 32-bit shader arithmetic; expected batch and "
                                       "channel counts below 2^31; got {}",
                                       core::current_op_name(), v));
}

std::vector<std::uint32_t> conv_params(const Geom& g) {
  std::vector<std::uint32_t> w(P_WORDS, 0u);
  w[kQN] = static_cast<std::uint32_t>(g.n);
  w[kQCi] = static_cast<std::uint32_t>(g.ci);
  w[kQCo] = static_cast<std::uint32_t>(g.co);
  w[kQG] = static_cast<std::uint32_t>(g.groups);
  for (int d = 0; d < 3; ++d) {
    w[kQIn + d] = static_cast<std::uint32_t>(g.in[d]);
    w[kQKer + d] = static_cast<std::uint32_t>(g.ker[d]);
    w[kQOut + d] = static_cast<std::uint32_t>(g.out[d]);
    w[kQStride + d] = static_cast<std::uint32_t>(g.stride[d]);
    w[kQPad + d] = static_cast<std::uint32_t>(g.pad[d]);
    w[kQDil + d] = static_cast<std::uint32_t>(g.dil[d]);
  }
  return w;
}

// Reduction steps one dispatch may take: software Vulkan stops a shader's loops after
// 65535 iterations (ops/kernel.hpp), so there a chunk is 256 steps of conv.comp's BK = 16.
std::size_t k_chunk(const Context& c) { return c.software() ? 4096 : 65536; }

bool is_half(DType t) { return t == DType::F16 || t == DType::BF16; }

// The buffer of `t`, or none for an empty tensor (the shader never reads it: an empty
// operand means an empty reduction), so no dispatch binds a zero-sized range.
const Buffer* buf_of(const VkRef& t) { return t && t->shape().num_elements() ? t->buffer().get() : nullptr; }

// The weight gradient's reduction (N * spatial terms) cut into splits of at most `chunk`
// terms (the loop limit; on a GPU also short enough that splits x `workgroups` fill it),
// each summed by its own workgroups into its own partial in the compute float, then
// added up in split order by CV_SUM: deterministic, no atomics. At most 16M partial
// elements (and 16384 splits) at a time; more run as passes added to the previous one.
template <class Gemm>
Prim weight_split(Context& c, DeviceId dev, std::size_t K, std::size_t workgroups, std::size_t chunk, DType dt,
                  const Shape& out_shape, std::vector<std::uint32_t>& w, std::size_t groups, Gemm&& gemm) {
  const std::size_t out_n = out_shape.num_elements();
  std::size_t len = chunk;
  if (!c.software()) {  // about 256 workgroups in all
    const std::size_t want = (256 + workgroups - 1) / workgroups;
    len = std::min(len, std::max<std::size_t>(1024, (K + want - 1) / want));
  }
  const std::size_t total = std::max<std::size_t>(1, (K + len - 1) / len);
  const std::size_t cap = std::max<std::size_t>(1, std::min<std::size_t>(kLoopSafe, (std::size_t{16} << 20) / out_n));
  const std::size_t per = std::min(total, cap), passes = (total + per - 1) / per;
  const DType ct = dt == DType::F64 ? DType::F64 : DType::F32;
  VkRef part = alloc(dev, ct, Shape{per * out_n});
  // Passes of halves add up in f32, rounded once at the end.
  VkRef dst = alloc(dev, passes > 1 && is_half(dt) ? DType::F32 : dt, out_shape);
  std::vector<std::uint32_t> ws(P_WORDS, 0u);
  ws[kQN] = static_cast<std::uint32_t>(out_n);
  std::uint32_t gx, gy;
  groups_for((out_n + 255) / 256, gx, gy);
  for (std::size_t p = 0; p < passes; ++p) {
    const std::size_t k0 = p * per * len, k1 = std::min(K, (p + 1) * per * len);
    const std::size_t splits = std::max<std::size_t>(1, (k1 - k0 + len - 1) / len);
    w[kQK0] = static_cast<std::uint32_t>(k0);
    w[kQK1] = static_cast<std::uint32_t>(k1);
    w[kQKSplit] = static_cast<std::uint32_t>(len);
    w[kQOStride] = static_cast<std::uint32_t>(out_n);
    gemm(*part, splits * groups);
    ws[kQCi] = static_cast<std::uint32_t>(splits);
    ws[kQAcc] = p > 0 ? 1u : 0u;
    c.dispatch(ShaderFamily::Conv, {kSum, code(ct), code(dst->dtype()), 1u}, ws,
               {{part->buffer().get(), false}, {nullptr, false}, {nullptr, false}, {dst->buffer().get(), true}}, gx, gy,
               1, wide({dt}));
  }
  if (dst->dtype() != dt) return convert(dst, dt);
  return dst;
}

// One GEMM mode over geometry g into a fresh [out_shape] tensor: `a` and `b` are
// conv.comp's bindings 1 and 2 (weight and x for kFwd, weight and dy for kBwdX, dy and x
// for kBwdW), `bias` (may be null) is added per output channel.
Prim run_gemm(Mode mode, const Geom& g, std::size_t rank, VkRef a, VkRef b, VkRef bias, const Shape& out_shape) {
  const DType dt = a->dtype();
  Context& c = a->ctx();
  if (out_shape.num_elements() == 0) return alloc(a->device(), dt, out_shape);
  const std::size_t cgi = g.ci / g.groups, cgo = g.co / g.groups, KS = g.ker_size();
  std::size_t M, NC, K, problems;
  if (mode == kFwd) {
    M = cgo, NC = g.out_size(), K = cgi * KS, problems = g.n * g.groups;
  } else if (mode == kBwdX) {
    M = cgi, NC = g.in_size(), K = cgo * KS, problems = g.n * g.groups;
  } else {
    M = cgo, NC = cgi * KS, K = g.n * g.out_size(), problems = g.groups;
  }
  if (K > 0x7FFFFFFFull)
    throw ExecutionError(fmt::format("[{}] convolution reduction too long for vulkan; expected at most 2^31 - 1 terms; got {}",
                                     core::current_op_name(), K));
  // An empty reduction reads no operand: the output is zeros (plus the bias) whatever the
  // options, so only a real one needs them representable.
  if (K > 0) check_int32(g, rank);
  // conv.comp's tiles: BK x (BM + BN) raw compute floats.
  const std::size_t shared = 16 * (64 + 64) * (wide({dt}) ? 8 : 4);
  if (shared > c.limits().maxComputeSharedMemorySize)
    throw ExecutionError(fmt::format("[{}] tile needs {} bytes of shared memory; expected at most {} "
                                     "(maxComputeSharedMemorySize)", core::current_op_name(), shared,
                                     c.limits().maxComputeSharedMemorySize));
  // conv.comp indexes every operand from element 0 of its buffer, densely: views (a batch
  // slice, a transposed weight) are copied first.
  a = dense_from_zero(std::move(a));
  b = dense_from_zero(std::move(b));
  if (bias) bias = dense_from_zero(std::move(bias));
  const std::size_t chunk = k_chunk(c);
  std::vector<std::uint32_t> w = conv_params(g);
  const std::size_t xtiles = (NC + kTile - 1) / kTile;
  // conv.comp's TMR: 16, 32 or 64 rows per workgroup, the fewest that cover M.
  const std::uint32_t tmr = M <= 16 ? 1 : M <= 32 ? 2 : 4;
  const auto gy = static_cast<std::uint32_t>((M + 16 * tmr - 1) / (16 * tmr));
  auto gemm = [&](const VulkanTensor& dst, std::size_t zcount) {
    for (std::size_t z = 0; z < zcount; z += 65535)
      for (std::size_t x = 0; x < xtiles; x += 65535) {
        w[kQZBase] = static_cast<std::uint32_t>(z);
        w[kQXBase] = static_cast<std::uint32_t>(x);
        c.dispatch(ShaderFamily::Conv, {mode, code(dt), code(dst.dtype()), tmr}, w,
                   {{buf_of(a), false}, {buf_of(b), false}, {buf_of(bias), false}, {dst.buffer().get(), true}},
                   static_cast<std::uint32_t>(std::min<std::size_t>(65535, xtiles - x)), gy,
                   static_cast<std::uint32_t>(std::min<std::size_t>(65535, zcount - z)), wide({dt}));
      }
  };
  if (mode == kBwdW)
    return weight_split(c, a->device(), K, xtiles * gy * problems, chunk, dt, out_shape, w, problems, gemm);
  const std::size_t chunks = std::max<std::size_t>(1, (K + chunk - 1) / chunk);
  // Chunked halves add up in an f32 buffer, rounded once at the end.
  VkRef dst = alloc(a->device(), chunks > 1 && is_half(dt) ? DType::F32 : dt, out_shape);
  for (std::size_t ck = 0; ck < chunks; ++ck) {
    w[kQK0] = static_cast<std::uint32_t>(ck * chunk);
    w[kQK1] = static_cast<std::uint32_t>(std::min(K, (ck + 1) * chunk));
    w[kQAcc] = ck > 0 ? 1u : 0u;
    w[kQBias] = bias && ck == 0 ? 1u : 0u;
    w[kQKSplit] = w[kQK1] - w[kQK0];
    gemm(*dst, problems);
  }
  if (dst->dtype() != dt) return convert(dst, dt);
  return dst;
}

template <bool kTranspose>
Prim conv_entry(Prim px, Prim pw, Prim pb, const ConvArgs& a) {
  VkRef x = as_vk(std::move(px)), w = as_vk(std::move(pw));
  VkRef bias = pb ? as_vk(std::move(pb)) : VkRef();
  const Geom g = geom_of(a, x->shape(), w->shape(), kTranspose);
  if constexpr (kTranspose)
    return run_gemm(kBwdX, g, a.rank, std::move(w), std::move(x), std::move(bias), nc_shape(g.n, g.ci, g.in, a.rank));
  else
    return run_gemm(kFwd, g, a.rank, std::move(w), std::move(x), std::move(bias), nc_shape(g.n, g.co, g.out, a.rank));
}

// (pa, pb) = (dy, w) for the x gradient, (x, dy) for the weight gradient; `target` is the
// gradient's shape (x's or the weight's).
template <bool kTranspose, bool kForX>
Prim conv_backward_entry(Prim pa, Prim pb, const Shape& target, const ConvArgs& args) {
  VkRef a = as_vk(std::move(pa)), b = as_vk(std::move(pb));
  const Shape xs = kForX ? target : a->shape();
  const Shape ws = kForX ? b->shape() : target;
  const Geom g = geom_of(args, xs, ws, kTranspose);
  const std::size_t r = args.rank;
  if constexpr (kForX && !kTranspose) return run_gemm(kBwdX, g, r, std::move(b), std::move(a), VkRef(), target);
  else if constexpr (kForX) return run_gemm(kFwd, g, r, std::move(b), std::move(a), VkRef(), target);
  // The weight gradient of a transposed conv is its adjoint conv's with x and dy swapped.
  else if constexpr (!kTranspose) return run_gemm(kBwdW, g, r, std::move(b), std::move(a), VkRef(), target);
  else return run_gemm(kBwdW, g, r, std::move(a), std::move(b), VkRef(), target);
}

// db[c] = dy summed over every dim but 1, one workgroup per channel.
Prim conv_bias_backward_entry(Prim p) {
  VkRef dy = as_vk(std::move(p));
  const DType dt = dy->dtype();
  const Shape& s = dy->shape();
  const std::size_t C = s[1];
  if (C == 0) return alloc(dy->device(), dt, Shape{C});
  std::size_t space = 1;
  for (std::size_t d = 2; d < s.rank(); ++d) space *= s[d];
  const std::size_t K = s[0] * space;
  dy = dense_from_zero(std::move(dy));
  Context& c = dy->ctx();
  const std::size_t chunk = 256 * k_chunk(c);
  const std::size_t chunks = std::max<std::size_t>(1, (K + chunk - 1) / chunk);
  VkRef dst = alloc(dy->device(), chunks > 1 && is_half(dt) ? DType::F32 : dt, Shape{C});
  std::vector<std::uint32_t> w(P_WORDS, 0u);
  w[kQCo] = static_cast<std::uint32_t>(C);
  w[kQOut] = static_cast<std::uint32_t>(space);
  std::uint32_t gx, gy;
  groups_for(C, gx, gy);
  for (std::size_t ck = 0; ck < chunks; ++ck) {
    w[kQK0] = static_cast<std::uint32_t>(ck * chunk);
    w[kQK1] = static_cast<std::uint32_t>(std::min(K, (ck + 1) * chunk));
    w[kQAcc] = ck > 0 ? 1u : 0u;
    c.dispatch(ShaderFamily::Conv, {kBias, code(dt), code(dst->dtype())}, w,
               {{buf_of(dy), false}, {nullptr, false}, {nullptr, false}, {dst->buffer().get(), true}}, gx, gy, 1,
               wide({dt}));
  }
  if (dst->dtype() != dt) return convert(dst, dt);
  return dst;
}

}  // namespace

void register_conv(dispatch::Backend& b) {
  using O = OpCode;
  b.set<O::conv1d>(&conv_entry<false>);
  b.set<O::conv2d>(&conv_entry<false>);
  b.set<O::conv3d>(&conv_entry<false>);
  b.set<O::conv_transpose1d>(&conv_entry<true>);
  b.set<O::conv_transpose2d>(&conv_entry<true>);
  b.set<O::conv_transpose3d>(&conv_entry<true>);
  b.set<O::conv_x_backward>(&conv_backward_entry<false, true>);
  b.set<O::conv_weight_backward>(&conv_backward_entry<false, false>);
  b.set<O::conv_transpose_x_backward>(&conv_backward_entry<true, true>);
  b.set<O::conv_transpose_weight_backward>(&conv_backward_entry<true, false>);
  b.set<O::conv_bias_backward>(&conv_bias_backward_entry);
}

}  // namespace tensor::vulkan
