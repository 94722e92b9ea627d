// The quant rows on Vulkan (issue 32): quantize, dequantize and q_matmul natively, on
// quant.comp. A quantized tensor is dispatch's QuantPrim (dispatch/quant.hpp): i8 codes
// (one per element, whatever the scheme's store: PackedU32 is only its TensorData layout)
// and f32 scales (already rounded to the scale dtype), both Vulkan tensors here. The values
// are the CPU's (backends/cpu/quant.cpp) and the default composition's: codes from
// x * (1 / scale) rounded half away from zero and clamped, f32(code) * scale back; q_matmul
// is dequantize + matmul with the dequantization done per tile in shared memory.
#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "backends/vulkan/ops/kernel.hpp"
#include "backends/vulkan/vk_ops.hpp"
#include "dispatch/defaults/compose.hpp"
#include "dispatch/quant.hpp"
#include "dispatch/quant_model.hpp"
#include "tensor/error.hpp"

namespace tensor::vulkan {

using namespace kernel;

namespace {

namespace q = dispatch::quant;
using dispatch::DispatchTensor;
using dispatch::Kind;

VkRef share_vk(const DispatchTensor& t) { return as_vk(DispatchTensor(t).take()); }

// The element modes' parameters: the shape, the source's strides (operand 1), the scale
// offset and the block grid's strides (operand 2; 0 per tensor), the block extents (operand 3).
Params element_params(const Shape& shape, const VulkanTensor& src, const VulkanTensor& scales, const q::Extents& e,
                      const Shape& grid, bool per_tensor) {
  Params p;
  const std::size_t r = shape.rank();
  p.shape(shape, shape.num_elements());
  p.operand(1, Operand{src.buffer().get(), src.offset(), {}}, 0);
  for (std::size_t d = 0; d < r; ++d) p.w[P_OPND + 10 + d] = static_cast<std::uint32_t>(src.stride(d));
  p.w[P_OPND + 18] = static_cast<std::uint32_t>(scales.offset());
  std::size_t gs = 1;
  for (std::size_t d = r; d-- > 0;) {
    // an axis of one block adds nothing to the block index: stride 0 (no division in the shader)
    p.w[P_OPND + 19 + d] = per_tensor || grid[d] == 1 ? 0u : static_cast<std::uint32_t>(gs);
    p.w[P_OPND + 28 + d] = per_tensor ? 1u : static_cast<std::uint32_t>(e.ext[d]);
    gs *= per_tensor ? 1 : grid[d];
  }
  return p;
}

// One element-mode dispatch: four elements per invocation, 256 invocations per workgroup.
void launch_elements(Context& c, int mode, DType dtx, const Params& p, std::size_t n, const Buffer* a, const Buffer* b,
                     const Buffer* out) {
  std::uint32_t gx = 0, gy = 0;
  groups_for(((n + 3) / 4 + 255) / 256, gx, gy);
  c.dispatch(ShaderFamily::Quant, {static_cast<std::uint32_t>(mode), code(dtx)}, p.w,
             {{a, false}, {b, false}, {nullptr, false}, {out, true}}, gx, gy, 1);
}

Prim quantize_entry(Prim px, Prim pscales, const QuantScheme& scheme) {
  VkRef x = as_vk(std::move(px));
  const Shape shape = x->shape();
  const q::Extents e = q::block_extents("quantize", shape, scheme);
  const Shape grid = q::grid_shape("quantize", shape, scheme);
  const bool per_tensor = !scheme.level.is_block();
  const DeviceId dev = x->device();
  VkRef codes = alloc(dev, DType::I8, shape);
  const std::size_t n = shape.num_elements();
  if (n > 0) {
    if (x->dtype() == DType::F64) x = convert(x, DType::F32);  // the CPU quantizes f64 through f32 too
    // 1.0f / scale on the host: a shader's division may be 2.5 ulp off, the product is exact.
    const std::vector<float> s = read_data(Prim(pscales)).get().to_vec<float>();
    std::vector<float> inv(s.size());
    for (std::size_t i = 0; i < inv.size(); ++i) inv[i] = 1.0f / s[i];
    VkRef invt = as_vk(upload_data(TensorData::from(inv, Shape{inv.size()}), dev));
    Params p = element_params(shape, *x, *invt, e, grid, per_tensor);
    const auto [lo, hi] = scheme.range();
    p.extra(0, lo);
    p.extra(1, hi);
    launch_elements(x->ctx(), QT_QUANTIZE, x->dtype(), p, n, x->buffer().get(), invt->buffer().get(), codes->buffer().get());
  }
  return Prim(dispatch::Ref<q::QuantPrim>::make(shape, dev, scheme, DispatchTensor(Prim(std::move(codes)), Kind::Int),
                                                DispatchTensor(std::move(pscales), Kind::Float)));
}

VkRef dequantize_f(const q::QuantPrim& qp, DType dtype) {
  const Shape shape = qp.shape();
  const QuantScheme& scheme = qp.scheme();
  const q::Extents e = q::block_extents("dequantize", shape, scheme);
  const Shape grid = q::grid_shape("dequantize", shape, scheme);
  VkRef codes = share_vk(qp.codes());
  VkRef sc = to_contiguous(share_vk(qp.scales()));
  const DType dto = dtype == DType::F64 ? DType::F32 : dtype;
  VkRef out = alloc(codes->device(), dto, shape);
  const std::size_t n = shape.num_elements();
  if (n > 0) {
    const Params p = element_params(shape, *codes, *sc, e, grid, !scheme.level.is_block());
    launch_elements(codes->ctx(), QT_DEQUANTIZE, dto, p, n, codes->buffer().get(), sc->buffer().get(), out->buffer().get());
  }
  return dto == dtype ? out : convert(out, dtype);  // f64: f32 products widened, as the CPU's
}

Prim dequantize_entry(Prim pq, DType dtype) {
  const auto& qp = dispatch::prim_as<q::QuantPrim>(pq);
  if (dtype != DType::F32 && dtype != DType::F16 && dtype != DType::BF16 && dtype != DType::F64)
    throw DTypeError(fmt::format("[dequantize] expected a float dtype (f32, f16, bf16, f64); got {}", dtype_name(dtype)));
  return Prim(dequantize_f(qp, dtype));
}

// Rows per batch up to which q_matmul takes the GEMV kernel (one row per workgroup: the
// 64-row tile would compute 63 empty rows at M = 1). On lavapipe, K = N = 1024 (q8s, per
// column; 3 interleaved runs): the tiled kernel took ~122 ms for every M up to 16, the GEMV
// ~4.8 ms per row (M = 16: 77 ms, 1.7x less), so the crossover is near M = 25.
constexpr std::size_t kGemvRows = 16;

Prim q_matmul_entry(Prim px, Prim pw) {
  const auto& w = dispatch::prim_as<q::QuantPrim>(pw);
  VkRef x = as_vk(std::move(px));
  const DType dt = x->dtype();
  const Shape xs = x->shape();
  const std::size_t r = xs.rank();
  const std::size_t M = xs[r - 2], K = xs[r - 1], N = w.shape()[1];
  // quant.comp computes in f32: f64 keeps the default's route (dequantize, then matmul)
  if (dt == DType::F64) return dispatch::defaults::default_q_matmul(Prim(std::move(x)), std::move(pw));
  Shape out_shape = xs;
  out_shape[r - 1] = N;
  VkRef out = alloc(x->device(), dt, out_shape);
  if (out_shape.num_elements() == 0) return out;
  if (K == 0) {
    std::vector<std::byte> zeros(out_shape.num_elements() * dtype_size(dt));
    out->ctx().upload(out->buffer(), zeros.data(), zeros.size());
    return out;
  }
  const QuantScheme& scheme = w.scheme();
  const Shape grid = q::grid_shape("q_matmul", w.shape(), scheme);
  const q::Extents e = q::block_extents("q_matmul", w.shape(), scheme);
  const bool per_tensor = !scheme.level.is_block();
  const std::size_t bk = per_tensor ? K : e.ext[0], bn = per_tensor ? N : e.ext[1], gN = per_tensor ? 1 : grid[1];
  VkRef codes = to_contiguous(share_vk(w.codes()));
  VkRef sc = to_contiguous(share_vk(w.scales()));
  Shape batch;
  for (std::size_t d = 0; d + 2 < r; ++d) batch.push_back(xs[d]);
  const std::size_t nb = batch.num_elements();
  Operand oo{out->buffer().get(), 0, {}}, oa{x->buffer().get(), x->offset(), {}};
  for (std::size_t d = 0; d + 2 < r; ++d) {
    oo.strides[d] = out->stride(d);
    oa.strides[d] = x->stride(d);
  }
  // The GEMV walks K / 4 per invocation: under the software device's loop limit (kLoopSafe).
  const bool gemv = M <= kGemvRows && K / 4 < kLoopSafe;
  for (std::size_t base = 0; base < nb; base += 65535) {
    Params p;
    p.shape(batch, nb);
    p.operand(0, oo, batch.rank());
    p.operand(1, oa, batch.rank());
    p.extra(0, static_cast<std::int64_t>(M));
    p.extra(1, static_cast<std::int64_t>(N));
    p.extra(2, static_cast<std::int64_t>(K));
    p.extra(3, x->stride(r - 2));
    p.extra(4, x->stride(r - 1));
    p.extra(5, codes->offset());
    p.extra(6, static_cast<std::int64_t>(bk));
    p.extra(7, static_cast<std::int64_t>(bn));
    p.extra(8, static_cast<std::int64_t>(gN));
    p.extra(9, sc->offset());
    p.extra(10, static_cast<std::int64_t>(base));
    const auto gz = static_cast<std::uint32_t>(std::min<std::size_t>(65535, nb - base));
    const auto gx = static_cast<std::uint32_t>((N + 63) / 64);
    const auto gy = static_cast<std::uint32_t>(gemv ? M : (M + 63) / 64);
    x->ctx().dispatch(ShaderFamily::Quant, {static_cast<std::uint32_t>(gemv ? QT_GEMV : QT_MATMUL), code(dt)}, p.w,
                      {{x->buffer().get(), false}, {codes->buffer().get(), false}, {sc->buffer().get(), false},
                       {out->buffer().get(), true}},
                      gx, gy, gz);
  }
  return out;
}

}  // namespace

void register_quant(dispatch::Backend& b) {
  b.set<OpCode::quantize>(&quantize_entry);
  b.set<OpCode::dequantize>(&dequantize_entry);
  b.set<OpCode::q_matmul>(&q_matmul_entry);
}

}  // namespace tensor::vulkan
