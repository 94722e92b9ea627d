// The attention family (attention.comp): fused, tiled attention with an online softmax,
// the CPU entry's semantics (backends/cpu/nn/attention.cpp) without the [Lq, Lk] scores.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "backends/vulkan/ops/kernel.hpp"
#include "backends/vulkan/vk_ops.hpp"
#include "tensor/error.hpp"
#include "tensor/nn_options.hpp"

namespace tensor::vulkan {

using namespace kernel;

namespace {

// attention.comp's tile (BQ, BKEY, BD; DVS is 128, 64 in the WIDE variant) and parameter words (A_*).
constexpr std::size_t kBlockQ = 16, kBlockKey = 16, kBlockD = 64;
std::size_t slice_dv(bool wide64) { return wide64 ? 64 : 128; }
constexpr int kAB = 0, kAH = 1, kALq = 2, kALk = 3, kAD = 4, kADv = 5, kAFlags = 6, kAZBase = 7, kAScale = 8, kACap = 10,
              kAV = 12, kAMB = 17;

// The compute float's raw bits (f32, or f64 for f64 tensors) of `v`.
std::uint64_t compute_raw(DType dt, double v) {
  return dt == DType::F64 ? scalar_raw(DType::F64, Scalar(v)) : scalar_raw(DType::F32, Scalar(v));
}

// The buffer of `t`, or none for an empty tensor (Lk or D of 0: the shader never reads it),
// so no dispatch binds a zero-sized range.
const Buffer* buf_of(const VkRef& t) { return t && t->shape().num_elements() ? t->buffer().get() : nullptr; }

// `t` copied contiguously into `dst` from element `at` on, converted to dst's dtype.
void copy_into(const VulkanTensor& t, const VulkanTensor& dst, std::size_t at) {
  const Shape& s = t.shape();
  if (s.num_elements() == 0) return;
  Operand o{dst.buffer().get(), static_cast<std::int64_t>(at), {}};
  std::int64_t step = 1;
  for (std::size_t d = s.rank(); d-- > 0;) {
    o.strides[d] = step;
    step *= static_cast<std::int64_t>(s[d]);
  }
  launch_ew(EW_COPY, t.dtype(), t.dtype(), dst.dtype(), false, s, o, operand(t, s), nullptr, nullptr, 0, 0);
}

// Offset and (b, h, row, col) strides of a [B|1, H|1, rows, cols] operand, broadcast dims at 0.
void put_strides(std::vector<std::uint32_t>& w, int at, const VulkanTensor& t) {
  w[at] = static_cast<std::uint32_t>(t.offset());
  for (std::size_t d = 0; d < 4; ++d)
    w[at + 1 + d] = static_cast<std::uint32_t>(t.shape()[d] == 1 ? 0 : t.stride(d));
}

Prim attention_entry(Prim pq, Prim pk, Prim pv, Prim pm, Prim pb, const tensor::nn::AttentionModuleOptions& o) {
  VkRef q = as_vk(std::move(pq)), k = as_vk(std::move(pk)), v = as_vk(std::move(pv));
  VkRef mask = pm ? as_vk(std::move(pm)) : VkRef(), bias = pb ? as_vk(std::move(pb)) : VkRef();
  const DType dt = q->dtype(), ct = dt == DType::F64 ? DType::F64 : DType::F32;
  const std::size_t B = q->shape()[0], H = q->shape()[1], Lq = q->shape()[2], D = q->shape()[3];
  const std::size_t Lk = k->shape()[2], Dv = v->shape()[3];
  Context& c = q->ctx();
  VkRef out = alloc(q->device(), dt, Shape{B, H, Lq, Dv});
  if (out->shape().num_elements() == 0) return out;
  // Software Vulkan stops a shader's loops after 65535 iterations (ops/kernel.hpp): each
  // invocation walks Lk / 16 key tiles of about D / 64 + 4 loop steps.
  const std::size_t steps = (Lk + kBlockKey - 1) / kBlockKey * ((D + kBlockD - 1) / kBlockD + 4);
  if (c.software() && steps > kLoopSafe)
    throw ExecutionError(fmt::format("[attention] too long for a software Vulkan device (its shader loops stop after 65535 "
                                     "iterations); expected at most {} key tiles x (D / 64 + 4) steps; got Lk {}, D {}",
                                     kLoopSafe, Lk, D));
  const bool w64 = wide({dt});
  const std::size_t shared = ((kBlockQ + kBlockKey) * (kBlockD + 1) + kBlockQ * (kBlockKey + 1) + kBlockKey * slice_dv(w64) +
                              2 * kBlockQ) * (w64 ? 8 : 4);
  if (shared > c.limits().maxComputeSharedMemorySize)
    throw ExecutionError(fmt::format("[attention] tile needs {} bytes of shared memory; expected at most {} "
                                     "(maxComputeSharedMemorySize)", shared, c.limits().maxComputeSharedMemorySize));
  // q and k side by side in the compute float (the shader has four buffers: qk, v, mask or bias, out).
  VkRef qk = alloc(q->device(), ct, Shape{B * H * (Lq + Lk) * D});
  copy_into(*q, *qk, 0);
  copy_into(*k, *qk, B * H * Lq * D);
  // Both a mask and a bias: one additive term, -inf where masked (the score is masked,
  // then the bias added: -inf + b stays -inf).
  std::uint32_t flags = 0;
  if (mask && bias) {
    const Shape s = broadcast(mask->shape(), bias->shape());
    VkRef both = alloc(q->device(), dt, s);
    const Operand om = operand(*mask, s);
    launch_ew(EW_MASK_FILL, dt, mask->dtype(), dt, false, s, operand(*both, s), operand(*bias, s), &om, nullptr, 0,
              scalar_raw(dt, Scalar(-std::numeric_limits<double>::infinity())));
    bias = std::move(both);
    mask = VkRef();
  }
  const VkRef& mb = mask ? mask : bias;
  if (mask) flags |= 1;
  if (bias) flags |= 2;
  if (o.is_causal) flags |= 4;
  if (o.softcap) flags |= 8;
  std::vector<std::uint32_t> w(P_WORDS, 0u);
  w[kAB] = static_cast<std::uint32_t>(B);
  w[kAH] = static_cast<std::uint32_t>(H);
  w[kALq] = static_cast<std::uint32_t>(Lq);
  w[kALk] = static_cast<std::uint32_t>(Lk);
  w[kAD] = static_cast<std::uint32_t>(D);
  w[kADv] = static_cast<std::uint32_t>(Dv);
  w[kAFlags] = flags;
  const double scale = o.scale ? *o.scale : 1.0 / std::sqrt(static_cast<double>(std::max<std::size_t>(D, 1)));
  const std::uint64_t sr = compute_raw(dt, scale), cr = compute_raw(dt, o.softcap ? *o.softcap : 1.0);
  w[kAScale] = static_cast<std::uint32_t>(sr);
  w[kAScale + 1] = static_cast<std::uint32_t>(sr >> 32);
  w[kACap] = static_cast<std::uint32_t>(cr);
  w[kACap + 1] = static_cast<std::uint32_t>(cr >> 32);
  put_strides(w, kAV, *v);
  if (mb) put_strides(w, kAMB, *mb);
  const std::size_t problems = B * H;
  const auto gx = static_cast<std::uint32_t>((Lq + kBlockQ - 1) / kBlockQ);
  const auto gy = static_cast<std::uint32_t>((Dv + slice_dv(w64) - 1) / slice_dv(w64));
  const DType mdt = mask ? mask->dtype() : DType::Bool;
  for (std::size_t z = 0; z < problems; z += 65535) {
    w[kAZBase] = static_cast<std::uint32_t>(z);
    c.dispatch(ShaderFamily::Attention, {code(dt), code(mdt)}, w,
               {{buf_of(qk), false}, {buf_of(v), false}, {buf_of(mb), false}, {out->buffer().get(), true}},
               gx, gy, static_cast<std::uint32_t>(std::min<std::size_t>(65535, problems - z)), w64);
  }
  return out;
}

}  // namespace

void register_attention(dispatch::Backend& b) { b.set<OpCode::attention>(&attention_entry); }

}  // namespace tensor::vulkan
