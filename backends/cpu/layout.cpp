// Layout ops on the CPU: views that only rewrite shape/strides/offset (swap_dims,
// permute, flip, slice with any step, expand, unfold, reshape of a contiguous
// tensor), plus reshape of a strided tensor (copy, then view) and slice_assign.
#include "backends/cpu/cpu_ops.hpp"
#include "backends/cpu/cpu_tensor.hpp"

namespace tensor::cpu {
namespace {

using dispatch::Prim;

Prim reshape_entry(Prim p, const Shape& shape) {
  CpuRef t = to_contiguous(as_cpu(std::move(p)));
  Layout l = contiguous_layout(shape);
  l.offset = t->offset();
  return make_view(std::move(t), shape, l);
}

// The pure view ops: shape, strides and offset from dispatch/strided.hpp.
template <auto kView, class... Args>
Prim view_entry(Prim p, Args... args) {
  CpuRef t = as_cpu(std::move(p));
  dispatch::StridedView v = kView(t->shape(), t->layout(), args...);
  return make_view(std::move(t), v.shape, v.layout);
}

// Writes `value` into the sliced region: in place when `a` is unique and contiguous
// (no stride-0 or overlapping view), else into a contiguous copy of `a`.
Prim slice_assign_entry(Prim p, dispatch::DimSlices slices, Prim pv) {
  CpuRef t = as_cpu(std::move(p));
  const CpuRef v = as_cpu(std::move(pv));
  if (!(t->can_mut() && t->is_contiguous())) {
    CpuRef copy = alloc_tensor(t->dtype(), t->shape());
    copy_strided(*t, copy->data());
    t = std::move(copy);
  }
  const dispatch::StridedView region = dispatch::slice_view(t->shape(), t->layout(), slices);
  if (region.shape.num_elements() == 0) return t;
  std::byte* dst = t->storage()->data() + region.layout.offset * static_cast<std::int64_t>(t->elem_size());
  copy_strided_to(*v, dst, region.layout.strides.data());
  return t;
}

}  // namespace

void register_layout_ops(dispatch::Backend& b) {
  b.set<OpCode::reshape>(&reshape_entry);
  b.set<OpCode::expand>(&view_entry<dispatch::expand_view, const Shape&>);
  b.set<OpCode::swap_dims>(&view_entry<dispatch::swap_dims_view, std::size_t, std::size_t>);
  b.set<OpCode::permute>(&view_entry<dispatch::permute_view, dispatch::Axes>);
  b.set<OpCode::flip>(&view_entry<dispatch::flip_view, dispatch::Axes>);
  b.set<OpCode::slice>(&view_entry<dispatch::slice_view, dispatch::DimSlices>);
  b.set<OpCode::slice_assign>(&slice_assign_entry);
  b.set<OpCode::unfold>(&view_entry<dispatch::unfold_view, std::size_t, std::size_t, std::size_t>);
}

}  // namespace tensor::cpu
