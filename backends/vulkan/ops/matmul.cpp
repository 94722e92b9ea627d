// The matmul family: the tiled kernel (matmul.comp) and the cooperative-matrix f16 path
// (matmul_coop.comp, gated in runtime/features.hpp, self-tested on first use).
#include <fmt/format.h>

#include <exception>
#include <mutex>

#include "backends/vulkan/runtime/features.hpp"
#include "backends/vulkan/ops/kernel.hpp"
#include "backends/vulkan/vk_ops.hpp"
#include "lib/core/shape_rules.hpp"
#include "tensor/error.hpp"

namespace tensor::vulkan {

using namespace kernel;

namespace {

// ---- cooperative-matrix f16 matmul (matmul_coop.comp; gating in runtime/features.hpp) ----

std::size_t up16(std::size_t x) { return (x + kCoopTile - 1) / kCoopTile * kCoopTile; }

// Dense f16 [nb, rp, cp] copy of the [..., r, c] operand `t` (batch dims broadcast to
// `batch`), zeros in the padding.
VkRef padded_f16(const VulkanTensor& t, const Shape& batch, std::size_t rp, std::size_t cp) {
  const std::size_t rank = t.rank(), nb = batch.num_elements();
  const std::size_t r = t.shape()[rank - 2], c = t.shape()[rank - 1];
  VkRef p = alloc(t.device(), DType::F16, Shape{nb, rp, cp});
  if (rp != r || cp != c) {
    const Shape flat{nb * rp * cp};
    launch_ew(EW_FILL, DType::F16, DType::F16, DType::F16, false, flat, operand(*p, flat), operand(*p, flat), nullptr, nullptr,
              0, 0);
  }
  Shape s = batch;
  s.push_back(r);
  s.push_back(c);
  Operand dst{p->buffer().get(), 0, {}}, src{t.buffer().get(), t.offset(), {}};
  std::int64_t step = static_cast<std::int64_t>(rp * cp);
  for (std::size_t d = batch.rank(); d-- > 0;) {
    dst.strides[d] = step;
    step *= static_cast<std::int64_t>(batch[d]);
    src.strides[d] = t.shape()[d] == batch[d] ? t.stride(d) : 0;
  }
  dst.strides[rank - 2] = static_cast<std::int64_t>(cp);
  dst.strides[rank - 1] = 1;
  src.strides[rank - 2] = t.stride(rank - 2);
  src.strides[rank - 1] = t.stride(rank - 1);
  launch_ew(EW_COPY, DType::F16, DType::F16, DType::F16, false, s, dst, src, nullptr, nullptr, 0, 0);
  return p;
}

// f16 x f16 -> f16 through cooperative matrices: pad, multiply with f32 accumulation,
// round the [M, N] part to f16 once (the same rounding as the tiled path).
VkRef matmul_coop(const VulkanTensor& a, const VulkanTensor& b, const Shape& out_shape) {
  const std::size_t r = out_shape.rank();
  const std::size_t M = a.shape()[r - 2], K = a.shape()[r - 1], N = b.shape()[r - 1];
  const std::size_t Mp = up16(M), Kp = up16(K), Np = up16(N);
  Shape batch;
  for (std::size_t d = 0; d + 2 < r; ++d) batch.push_back(out_shape[d]);
  const std::size_t nb = batch.num_elements();
  VkRef pa = padded_f16(a, batch, Mp, Kp);
  VkRef pb = padded_f16(b, batch, Kp, Np);
  VkRef c32 = alloc(a.device(), DType::F32, Shape{nb, Mp, Np});
  std::vector<std::uint32_t> w(P_WORDS, 0u);
  w[0] = static_cast<std::uint32_t>(Mp);
  w[1] = static_cast<std::uint32_t>(Np);
  w[2] = static_cast<std::uint32_t>(Kp);
  w[3] = static_cast<std::uint32_t>(Mp * Kp);
  w[4] = static_cast<std::uint32_t>(Kp * Np);
  w[5] = static_cast<std::uint32_t>(Mp * Np);
  a.ctx().dispatch(ShaderFamily::MatmulCoop, {}, w,
                   {{pa->buffer().get(), false}, {pb->buffer().get(), false}, {nullptr, false}, {c32->buffer().get(), true}},
                   static_cast<std::uint32_t>((Np + 31) / 32), static_cast<std::uint32_t>((Mp + 31) / 32),
                   static_cast<std::uint32_t>(nb));
  VkRef out = alloc(a.device(), DType::F16, out_shape);
  Operand src{c32->buffer().get(), 0, {}};
  std::int64_t step = static_cast<std::int64_t>(Mp * Np);
  for (std::size_t d = batch.rank(); d-- > 0;) {
    src.strides[d] = step;
    step *= static_cast<std::int64_t>(batch[d]);
  }
  src.strides[r - 2] = static_cast<std::int64_t>(Np);
  src.strides[r - 1] = 1;
  launch_ew(EW_COPY, DType::F32, DType::F32, DType::F16, false, out_shape, operand(*out, out_shape), src, nullptr, nullptr,
            0, 0);
  return out;
}

VkRef matmul_tiled(VkRef a, VkRef b, const Shape& out_shape);

// matmul.comp's tile (its BM, BN, BK): 64 x 64 outputs per workgroup, K in steps of 16, a 64 x 16
// slice of A and a 16 x 64 slice of B in shared memory (sa + sb, raw words of 4 or 8 bytes).
constexpr std::uint32_t kTileM = 64, kTileN = 64, kTileK = 16;

void check_tile_fits(const Context& c, bool wide64) {
  const std::uint32_t shared = kTileK * (kTileM + kTileN) * (wide64 ? 8 : 4);
  if (shared > c.limits().maxComputeSharedMemorySize)
    throw ExecutionError(fmt::format("[matmul] tile needs {} bytes of shared memory; expected at most {} "
                                     "(maxComputeSharedMemorySize)", shared, c.limits().maxComputeSharedMemorySize));
}

// First use of the cooperative-matrix path: a small f16 matmul with edge tiles on
// both paths; a mismatch (or any failure) switches the path off for the process and
// records why (tensorctl info shows it).
void coop_self_test(Context& c) {
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  if (c.coop_state() != CoopState::Untested) return;
  const std::size_t M = 40, K = 56, N = 24;
  std::vector<float> av(M * K), bv(K * N);
  for (std::size_t i = 0; i < av.size(); ++i) av[i] = static_cast<float>(static_cast<int>((i * 7 + 3) % 17) - 8) / 8.0f;
  for (std::size_t i = 0; i < bv.size(); ++i) bv[i] = static_cast<float>(static_cast<int>((i * 5 + 1) % 13) - 6) / 4.0f;
  try {
    VkRef a = as_vk(upload_data(TensorData::from(av, Shape{M, K}).convert(DType::F16), c.id()));
    VkRef b = as_vk(upload_data(TensorData::from(bv, Shape{K, N}).convert(DType::F16), c.id()));
    const std::vector<float> want =
        read_data(matmul_tiled(a, b, Shape{M, N})).get().convert(DType::F32).to_vec<float>();
    const std::vector<float> got =
        read_data(matmul_coop(*a, *b, Shape{M, N})).get().convert(DType::F32).to_vec<float>();
    for (std::size_t i = 0; i < want.size(); ++i) {
      // Products of k/8 and k/4 sum exactly in f32: both paths must agree to the last bit.
      if (!(got[i] == want[i])) {
        c.set_coop_state(CoopState::Failed, fmt::format("self-test mismatch at ({}, {}): coopmat {} vs tiled {}; disabled",
                                                        i / N, i % N, got[i], want[i]));
        return;
      }
    }
    c.set_coop_state(CoopState::Live, c.coop_reason() + "; self-test passed");
  } catch (const std::exception& e) {
    c.set_coop_state(CoopState::Failed, fmt::format("self-test failed: {}; disabled", e.what()));
  }
}

bool coop_ready(Context& c) {
  if (c.coop_state() == CoopState::Untested) coop_self_test(c);
  return c.coop_state() == CoopState::Live && c.coop_enabled();
}

Prim matmul_entry(Prim pa, Prim pb) {
  VkRef a = as_vk(std::move(pa));
  VkRef b = as_vk(std::move(pb));
  // The family's one output-shape rule (lib/core/shape_rules.hpp).
  const Shape out_shape = core::matmul_shape("matmul", a->shape(), b->shape());
  if (a->dtype() == DType::F16 && a->shape().num_elements() && b->shape().num_elements() && coop_ready(a->ctx())) {
    const std::size_t r = out_shape.rank();
    if (out_shape.num_elements() && out_shape.num_elements() / (out_shape[r - 1] * out_shape[r - 2]) <= 65535)
      return matmul_coop(*a, *b, out_shape);
  }
  return matmul_tiled(std::move(a), std::move(b), out_shape);
}

VkRef matmul_tiled(VkRef a, VkRef b, const Shape& out_shape) {
  const DType dt = a->dtype();
  const std::size_t r = a->rank();
  const std::size_t M = a->shape()[r - 2], K = a->shape()[r - 1], N = b->shape()[r - 1];
  VkRef out = alloc(a->device(), dt, out_shape);
  if (out_shape.num_elements() == 0) return out;
  if (K == 0) {
    std::vector<std::byte> zeros(out_shape.num_elements() * dtype_size(dt));
    out->ctx().upload(out->buffer(), zeros.data(), zeros.size());
    return out;
  }
  Shape batch;
  for (std::size_t d = 0; d + 2 < r; ++d) batch.push_back(out_shape[d]);
  const std::size_t nb = batch.num_elements();
  Operand oo{out->buffer().get(), 0, {}}, oa{a->buffer().get(), a->offset(), {}}, ob{b->buffer().get(), b->offset(), {}};
  for (std::size_t d = 0; d + 2 < r; ++d) {
    oo.strides[d] = out->stride(d);
    oa.strides[d] = a->shape()[d] == batch[d] ? a->stride(d) : 0;
    ob.strides[d] = b->shape()[d] == batch[d] ? b->stride(d) : 0;
  }
  check_tile_fits(a->ctx(), wide({dt}));
  for (std::size_t base = 0; base < nb; base += 65535) {
    Params p;
    p.shape(batch, nb);
    p.operand(0, oo, batch.rank());
    p.operand(1, oa, batch.rank());
    p.operand(2, ob, batch.rank());
    p.extra(0, static_cast<std::int64_t>(M));
    p.extra(1, static_cast<std::int64_t>(N));
    p.extra(2, static_cast<std::int64_t>(K));
    p.extra(3, a->stride(r - 2));
    p.extra(4, a->stride(r - 1));
    p.extra(5, b->stride(r - 2));
    p.extra(6, b->stride(r - 1));
    p.extra(7, static_cast<std::int64_t>(N));
    p.extra(8, static_cast<std::int64_t>(base));
    const auto gz = static_cast<std::uint32_t>(std::min<std::size_t>(65535, nb - base));
    a->ctx().dispatch(ShaderFamily::Matmul, {code(dt)}, p.w,
                      {{a->buffer().get(), false}, {b->buffer().get(), false}, {nullptr, false}, {out->buffer().get(), true}},
                      static_cast<std::uint32_t>((N + kTileN - 1) / kTileN),
                      static_cast<std::uint32_t>((M + kTileM - 1) / kTileM), gz, wide({dt}));
  }
  return out;
}

}  // namespace

void register_matmul(dispatch::Backend& b) {
  using O = OpCode;
  b.set<O::matmul>(&matmul_entry);
}

}  // namespace tensor::vulkan
