// Softmax and sort on the rows shader (rows.comp, one workgroup per line): softmax /
// log_softmax / softmin, the in-workgroup and global bitonic sorts, and cross.
#include <fmt/format.h>

#include "backends/vulkan/ops/kernel.hpp"
#include "backends/vulkan/vk_ops.hpp"
#include "tensor/error.hpp"

namespace tensor::vulkan {

using namespace kernel;

namespace {

constexpr std::size_t kRowsMaxSoftware = 256 * kLoopSafe;   // rows.comp softmax: 3 passes of n / 256

// One workgroup per line along `dim` (rows.comp). `x` is the second output (sort indices).
void launch_rows(int op, const VulkanTensor& a, std::size_t dim, const VulkanTensor* out, const VulkanTensor* x,
                 DType xdt, std::initializer_list<std::int64_t> tail) {
  Shape lines = a.shape();
  const std::size_t n = lines[dim];
  lines[dim] = 1;
  const std::size_t count = lines.num_elements();
  if (count == 0 || n == 0) return;
  const VulkanTensor& o = out ? *out : *x;
  Params p;
  p.shape(lines, count);
  p.operand(0, Operand{o.buffer().get(), o.offset(), o.layout().strides}, lines.rank());
  p.operand(1, Operand{a.buffer().get(), a.offset(), a.layout().strides}, lines.rank());
  if (x) p.operand(2, Operand{x->buffer().get(), x->offset(), x->layout().strides}, lines.rank());
  p.extra(0, static_cast<std::int64_t>(n));
  p.extra(1, a.stride(dim));
  p.extra(2, o.stride(dim));
  p.extra(3, x ? x->stride(dim) : 0);
  int i = 4;
  for (std::int64_t e : tail) p.extra(i++, e);
  std::uint32_t gx, gy;
  groups_for(count, gx, gy);
  a.ctx().dispatch(ShaderFamily::Rows, {static_cast<std::uint32_t>(op), code(a.dtype()), code(xdt)}, p.w,
                   {{a.buffer().get(), false}, {nullptr, false}, {x ? x->buffer().get() : nullptr, true},
                    {out ? out->buffer().get() : nullptr, true}},
                   gx, gy, 1, wide({a.dtype(), xdt}));
}

template <int OP>
Prim softmax_entry(Prim p, std::size_t dim) {
  VkRef a = as_vk(std::move(p));
  check_loop_limit(*a, "softmax row", kRowsMaxSoftware, dim);
  VkRef out = alloc(a->device(), a->dtype(), a->shape());
  launch_rows(OP, *a, dim, out.get(), nullptr, a->dtype(), {});
  return out;
}

// Sorted values and/or indices along `dim` (stable; NaN last ascending, first descending).
dispatch::PrimPair sort_impl(Prim p, std::size_t dim, bool desc, DType idx_dt, bool values, bool indices) {
  VkRef a = as_vk(std::move(p));
  const std::size_t n = a->shape()[dim];
  std::size_t np = 1;
  while (np < n) np <<= 1;
  VkRef vals = values ? alloc(a->device(), a->dtype(), a->shape()) : VkRef();
  VkRef idx = indices ? alloc(a->device(), idx_dt, a->shape()) : VkRef();
  const std::int64_t flags = (desc ? 1 : 0) | (values ? 2 : 0) | (indices ? 4 : 0);
  if (np <= RW_SORT_CAP) {
    launch_rows(RW_SORT, *a, dim, vals.get(), idx.get(), idx_dt, {flags, static_cast<std::int64_t>(np)});
    return {Prim(std::move(vals)), Prim(std::move(idx))};
  }
  // Long lines: the bitonic network over global scratch, one dispatch per stage.
  Shape lines = a->shape();
  lines[dim] = 1;
  const std::size_t count = lines.num_elements();
  const std::size_t total = count * np;
  if (count == 0) return {Prim(std::move(vals)), Prim(std::move(idx))};
  if (total > 0x7FFFFFFFull)
    throw ExecutionError(fmt::format("[sort] padded sort workspace too large; expected at most 2^31 - 1 elements; got {}", total));
  VkRef keys = alloc(a->device(), a->dtype(), Shape{total});
  VkRef ids = alloc(a->device(), DType::U32, Shape{total});
  Context& c = a->ctx();
  const VulkanTensor& dst = vals ? *vals : *idx;
  auto stage = [&](int op, std::int64_t k, std::int64_t j, std::vector<Binding> binds) {
    Params p;
    p.shape(lines, total);
    p.operand(0, Operand{dst.buffer().get(), dst.offset(), dst.layout().strides}, lines.rank());
    p.operand(1, Operand{a->buffer().get(), a->offset(), a->layout().strides}, lines.rank());
    if (idx) p.operand(2, Operand{idx->buffer().get(), idx->offset(), idx->layout().strides}, lines.rank());
    p.extra(0, static_cast<std::int64_t>(n));
    p.extra(1, a->stride(dim));
    p.extra(2, vals ? vals->stride(dim) : 0);
    p.extra(3, idx ? idx->stride(dim) : 0);
    p.extra(4, flags);
    p.extra(5, static_cast<std::int64_t>(np));
    p.extra(6, k);
    p.extra(7, j);
    std::uint32_t gx, gy;
    groups_for((total + 255) / 256, gx, gy);
    c.dispatch(ShaderFamily::Rows, {static_cast<std::uint32_t>(op), code(a->dtype()), code(idx_dt)}, p.w, binds, gx, gy, 1,
               wide({a->dtype(), idx_dt}));
  };
  stage(RW_GSORT_INIT, 0, 0,
        {{a->buffer().get(), false}, {nullptr, false}, {ids->buffer().get(), true}, {keys->buffer().get(), true}});
  for (std::size_t k = 2; k <= np; k <<= 1)
    for (std::size_t j = k >> 1; j > 0; j >>= 1)
      stage(RW_GSORT_STEP, static_cast<std::int64_t>(k), static_cast<std::int64_t>(j),
            {{nullptr, false}, {nullptr, false}, {ids->buffer().get(), true}, {keys->buffer().get(), true}});
  stage(RW_GSORT_OUT, 0, 0,
        {{keys->buffer().get(), false}, {ids->buffer().get(), false}, {idx ? idx->buffer().get() : nullptr, true},
         {vals ? vals->buffer().get() : nullptr, true}});
  return {Prim(std::move(vals)), Prim(std::move(idx))};
}
Prim sort_entry(Prim p, std::size_t dim, bool desc) {
  return sort_impl(std::move(p), dim, desc, DType::I32, true, false).first;
}
dispatch::PrimPair sort_wi_entry(Prim p, std::size_t dim, bool desc, DType out) {
  return sort_impl(std::move(p), dim, desc, out, true, true);
}
Prim argsort_entry(Prim p, std::size_t dim, bool desc, DType out) {
  return sort_impl(std::move(p), dim, desc, out, false, true).second;
}

Prim cross_entry(Prim pa, Prim pb, std::size_t dim) {
  VkRef a = as_vk(std::move(pa));
  VkRef b = as_vk(std::move(pb));
  const Shape s = broadcast(a->shape(), b->shape());
  VkRef out = alloc(a->device(), a->dtype(), s);
  Shape lines = s;
  lines[dim] = 1;
  const std::size_t count = lines.num_elements();
  if (count == 0) return out;
  const Operand oa = operand(*a, s), ob = operand(*b, s), oo = operand(*out, s);
  Params p;
  p.shape(lines, count);
  p.operand(0, oo, lines.rank());
  p.operand(1, oa, lines.rank());
  p.operand(2, ob, lines.rank());
  p.extra(1, oa.strides[dim]);
  p.extra(2, oo.strides[dim]);
  p.extra(3, ob.strides[dim]);
  std::uint32_t gx, gy;
  groups_for((count + 255) / 256, gx, gy);
  a->ctx().dispatch(ShaderFamily::Rows, {RW_CROSS, code(a->dtype()), code(a->dtype())}, p.w,
                    {{a->buffer().get(), false}, {b->buffer().get(), false}, {nullptr, false}, {out->buffer().get(), true}},
                    gx, gy, 1, wide({a->dtype()}));
  return out;
}

}  // namespace

void register_softmax_sort(dispatch::Backend& b) {
  using O = OpCode;
  b.set<O::softmax>(&softmax_entry<RW_SOFTMAX>);
  b.set<O::log_softmax>(&softmax_entry<RW_LOG_SOFTMAX>);
  b.set<O::softmin>(&softmax_entry<RW_SOFTMIN>);
  b.set<O::sort>(&sort_entry);
  b.set<O::sort_with_indices>(&sort_wi_entry);
  b.set<O::argsort>(&argsort_entry);
  b.set<O::cross>(&cross_entry);
}

}  // namespace tensor::vulkan
