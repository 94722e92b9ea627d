// The index family (index.comp): gather, select, scatter and select_assign with every
// update rule; out-of-range indices are flagged by the shader, and reading the result (or
// anything computed from it) throws the IndexError (Context::collect_errors_locked).
#include <fmt/format.h>

#include <algorithm>
#include <string>

#include "backends/vulkan/ops/kernel.hpp"
#include "backends/vulkan/vk_ops.hpp"
#include "tensor/error.hpp"

namespace tensor::vulkan {

using namespace kernel;

namespace {

// `check`: the IndexError text for an index outside [0, limit) ("; got <index>" follows).
void launch_index(int op, DType dt, DType idx_dt, const Shape& space, std::size_t count, const Operand& out,
                  const Operand& src, const Operand& idx, std::size_t rank, std::initializer_list<std::int64_t> extra,
                  const std::string& check) {
  if (count == 0) return;
  Params p;
  p.shape(space, count);
  p.operand(0, out, rank);
  p.operand(1, src, rank);
  p.operand(2, idx, rank);
  int i = 0;
  for (std::int64_t e : extra) p.extra(i++, e);
  std::uint32_t gx, gy;
  groups_for((count + 63) / 64, gx, gy);
  out.buf->context()->dispatch(ShaderFamily::Index, {static_cast<std::uint32_t>(op), code(dt), code(idx_dt)}, p.w,
                               {{src.buf, false}, {idx.buf, false}, {nullptr, false}, {out.buf, true}}, gx, gy, 1,
                               wide({dt, idx_dt}), &check);
}

std::string index_check(const char* op, std::size_t dim, std::size_t size) {
  // The CPU backend's message (backends/cpu/index.cpp); the shader supplies the index.
  return fmt::format("[{}] index out of range for dim {}; expected 0 <= index < {}", op, dim, size);
}

Prim gather_entry(Prim pa, std::size_t dim, Prim pi) {
  VkRef a = as_vk(std::move(pa));
  VkRef idx = as_vk(std::move(pi));
  const Shape s = idx->shape();
  VkRef out = alloc(a->device(), a->dtype(), s);
  Operand src{a->buffer().get(), a->offset(), a->layout().strides};
  src.strides[dim] = 0;
  launch_index(IX_GATHER, a->dtype(), idx->dtype(), s, s.num_elements(), operand(*out, s), src, operand(*idx, s), s.rank(),
               {static_cast<std::int64_t>(dim), static_cast<std::int64_t>(a->shape()[dim]), a->stride(dim)},
               index_check("gather", dim, a->shape()[dim]));
  return out;
}

// Where no invocation runs (nothing to read or write), the shader cannot flag an index:
// the indices of `idx` are checked here against [0, size), as the cpu does.
void check_on_host(const char* op, const VkRef& idx, std::size_t dim, std::size_t size) {
  const std::vector<std::int64_t> v = read_data(idx).get().convert(DType::I64).to_vec<std::int64_t>();
  for (std::int64_t i : v)
    if (i < 0 || static_cast<std::uint64_t>(i) >= size) throw IndexError(fmt::format("{}; got {}", index_check(op, dim, size), i));
}

Prim select_entry(Prim pa, std::size_t dim, Prim pi) {
  VkRef a = as_vk(std::move(pa));
  VkRef idx = as_vk(std::move(pi));
  Shape s = a->shape();
  s[dim] = idx->shape()[0];
  if (s.num_elements() == 0 && idx->shape()[0] != 0) check_on_host("select", idx, dim, a->shape()[dim]);
  VkRef out = alloc(a->device(), a->dtype(), s);
  Operand src{a->buffer().get(), a->offset(), a->layout().strides};
  src.strides[dim] = 0;
  Operand oi{idx->buffer().get(), idx->offset(), {}};
  oi.strides[0] = idx->stride(0);
  launch_index(IX_SELECT, a->dtype(), idx->dtype(), s, s.num_elements(), operand(*out, s), src, oi, s.rank(),
               {static_cast<std::int64_t>(dim), static_cast<std::int64_t>(a->shape()[dim]), a->stride(dim)},
               index_check("select", dim, a->shape()[dim]));
  return out;
}

// Accumulating writes go into a unique dense `a` or a fresh contiguous copy of it.
VkRef writable_copy(VkRef a) {
  if (a->can_mut() && a->is_dense_from_zero()) return a;
  return convert(a, a->dtype());
}

int upd_code(IndexingUpdateOp u) {
  switch (u) {
    case IndexingUpdateOp::Assign: return UPD_ASSIGN;
    case IndexingUpdateOp::Add: return UPD_ADD;
    case IndexingUpdateOp::Mul: return UPD_MUL;
    case IndexingUpdateOp::Min: return UPD_MIN;
    case IndexingUpdateOp::Max: return UPD_MAX;
  }
  throw Error(fmt::format("[scatter] unknown update rule {}", static_cast<int>(u)));
}

// out = a; out[p with p[dim] = idx[p]] upd= v[p] for every p of idx, in order along dim
// (one invocation per line, see index.comp).
Prim scatter_impl(const char* op, Prim pa, std::size_t dim, Prim pi, Prim pv, int upd) {
  VkRef out = writable_copy(as_vk(std::move(pa)));
  VkRef idx = as_vk(std::move(pi));
  VkRef v = as_vk(std::move(pv));
  Shape lines = idx->shape();
  const std::size_t len = lines[dim];
  lines[dim] = 1;
  // An empty index (even one whose dim is 2^60 long, with no lines) updates nothing.
  if (len == 0 || lines.num_elements() == 0) return out;
  Operand oo{out->buffer().get(), 0, out->layout().strides};
  // In chunks of kLoopSafe indices, in order (each dispatch sees the previous one's writes).
  for (std::size_t k0 = 0; k0 < len; k0 += kLoopSafe) {
    const auto k = static_cast<std::int64_t>(k0);
    Operand ov{v->buffer().get(), v->offset() + k * v->stride(dim), v->layout().strides};
    Operand oi{idx->buffer().get(), idx->offset() + k * idx->stride(dim), idx->layout().strides};
    launch_index(IX_SCATTER_ADD, out->dtype(), idx->dtype(), lines, lines.num_elements(), oo, ov, oi, lines.rank(),
                 {static_cast<std::int64_t>(dim), static_cast<std::int64_t>(out->shape()[dim]), out->stride(dim),
                  static_cast<std::int64_t>(std::min(kLoopSafe, len - k0)), v->stride(dim), idx->stride(dim), upd},
                 index_check(op, dim, out->shape()[dim]));
  }
  return out;
}

// out = a; out[..., idx[k], ...] upd= v[..., k, ...] along dim, k in order.
Prim select_assign_impl(const char* op, Prim pa, std::size_t dim, Prim pi, Prim pv, int upd) {
  VkRef out = writable_copy(as_vk(std::move(pa)));
  VkRef idx = as_vk(std::move(pi));
  VkRef v = as_vk(std::move(pv));
  Shape lines = v->shape();
  const std::size_t len = lines[dim];
  lines[dim] = 1;
  // Nothing to update (see scatter_impl); the indices are still checked, as on the cpu.
  if (len != 0 && lines.num_elements() == 0) check_on_host(op, idx, dim, out->shape()[dim]);
  if (len == 0 || lines.num_elements() == 0) return out;
  Operand oo{out->buffer().get(), 0, out->layout().strides};
  for (std::size_t k0 = 0; k0 < len; k0 += kLoopSafe) {  // in order, as scatter_impl
    const auto k = static_cast<std::int64_t>(k0);
    Operand ov{v->buffer().get(), v->offset() + k * v->stride(dim), v->layout().strides};
    Operand oi{idx->buffer().get(), idx->offset() + k * idx->stride(0), {}};
    launch_index(IX_SELECT_ADD, out->dtype(), idx->dtype(), lines, lines.num_elements(), oo, ov, oi, lines.rank(),
                 {static_cast<std::int64_t>(dim), static_cast<std::int64_t>(out->shape()[dim]), out->stride(dim),
                  static_cast<std::int64_t>(std::min(kLoopSafe, len - k0)), v->stride(dim), idx->stride(0), upd},
                 index_check(op, dim, out->shape()[dim]));
  }
  return out;
}

template <bool kOr>
Prim scatter_add_entry(Prim a, std::size_t dim, Prim i, Prim v) {
  return scatter_impl(kOr ? "scatter_or" : "scatter_add", std::move(a), dim, std::move(i), std::move(v),
                      kOr ? UPD_OR : UPD_ADD);
}
template <bool kOr>
Prim select_add_entry(Prim a, std::size_t dim, Prim i, Prim v) {
  return select_assign_impl(kOr ? "select_or" : "select_add", std::move(a), dim, std::move(i), std::move(v),
                            kOr ? UPD_OR : UPD_ADD);
}
Prim scatter_entry(Prim a, std::size_t dim, Prim i, Prim v, IndexingUpdateOp u) {
  return scatter_impl("scatter", std::move(a), dim, std::move(i), std::move(v), upd_code(u));
}
Prim select_assign_entry(Prim a, std::size_t dim, Prim i, Prim v, IndexingUpdateOp u) {
  return select_assign_impl("select_assign", std::move(a), dim, std::move(i), std::move(v), upd_code(u));
}

}  // namespace

void register_index(dispatch::Backend& b) {
  using O = OpCode;
  b.set<O::gather>(&gather_entry);
  b.set<O::select>(&select_entry);
  b.set<O::scatter_add>(&scatter_add_entry<false>);
  b.set<O::scatter_or>(&scatter_add_entry<true>);
  b.set<O::select_add>(&select_add_entry<false>);
  b.set<O::select_or>(&select_add_entry<true>);
  b.set<O::scatter>(&scatter_entry);
  b.set<O::select_assign>(&select_assign_entry);
}

}  // namespace tensor::vulkan
