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

// Target is right-aligned with the source; new and broadcast dims get stride 0.
Prim expand_entry(Prim p, const Shape& shape) {
  CpuRef t = as_cpu(std::move(p));
  const std::size_t lead = shape.rank() - t->rank();
  Layout l;
  l.offset = t->offset();
  for (std::size_t d = 0; d < shape.rank(); ++d) {
    if (d < lead) continue;
    const std::size_t sd = d - lead;
    l.strides[d] = t->shape()[sd] == shape[d] ? t->stride(sd) : 0;
  }
  return make_view(std::move(t), shape, l);
}

Prim swap_dims_entry(Prim p, std::size_t d0, std::size_t d1) {
  CpuRef t = as_cpu(std::move(p));
  Shape shape = t->shape();
  Layout l = t->layout();
  std::swap(shape[d0], shape[d1]);
  std::swap(l.strides[d0], l.strides[d1]);
  return make_view(std::move(t), shape, l);
}

Prim permute_entry(Prim p, dispatch::Axes axes) {
  CpuRef t = as_cpu(std::move(p));
  Shape shape = t->shape();
  Layout l = t->layout();
  for (std::size_t i = 0; i < axes.size(); ++i) {
    shape[i] = t->shape()[axes[i]];
    l.strides[i] = t->stride(axes[i]);
  }
  return make_view(std::move(t), shape, l);
}

// Negative stride; the offset moves to the last element of the dim.
Prim flip_entry(Prim p, dispatch::Axes axes) {
  CpuRef t = as_cpu(std::move(p));
  const Shape shape = t->shape();
  Layout l = t->layout();
  for (const std::size_t d : axes) {
    if (shape[d] <= 1) continue;
    l.offset += static_cast<std::int64_t>(shape[d] - 1) * l.strides[d];
    l.strides[d] = -l.strides[d];
  }
  return make_view(std::move(t), shape, l);
}

// The view of `t` selected by `slices` (one per dim).
void slice_layout(const CpuTensor& t, dispatch::DimSlices slices, Shape& shape, Layout& l) {
  shape = t.shape();
  l = t.layout();
  bool empty = false;
  for (std::size_t d = 0; d < slices.size(); ++d) empty = empty || slices[d].len == 0;
  for (std::size_t d = 0; d < slices.size(); ++d) {
    const dispatch::DimSlice& s = slices[d];
    if (!empty) l.offset += s.start * l.strides[d];
    l.strides[d] *= s.step;
    shape[d] = s.len;
  }
}

Prim slice_entry(Prim p, dispatch::DimSlices slices) {
  CpuRef t = as_cpu(std::move(p));
  Shape shape;
  Layout l;
  slice_layout(*t, slices, shape, l);
  return make_view(std::move(t), shape, l);
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
  Shape shape;
  Layout l;
  slice_layout(*t, slices, shape, l);
  if (shape.num_elements() == 0) return t;
  std::byte* dst = t->storage()->data() + l.offset * static_cast<std::int64_t>(t->elem_size());
  copy_strided_to(*v, dst, l.strides.data());
  return t;
}

// Windows of `size` every `step` along `dim`: that dim becomes the window index
// (stride * step) and a trailing dim of `size` walks inside a window.
Prim unfold_entry(Prim p, std::size_t dim, std::size_t size, std::size_t step) {
  CpuRef t = as_cpu(std::move(p));
  Shape shape = t->shape();
  Layout l = t->layout();
  const std::size_t n = shape[dim];
  const std::size_t windows = n >= size ? (n - size) / step + 1 : 0;
  shape[dim] = windows;
  shape.push_back(size);
  l.strides[shape.rank() - 1] = t->stride(dim);
  l.strides[dim] = t->stride(dim) * static_cast<std::int64_t>(step);
  return make_view(std::move(t), shape, l);
}

}  // namespace

void register_layout_ops(dispatch::Backend& b) {
  b.set<OpCode::reshape>(&reshape_entry);
  b.set<OpCode::expand>(&expand_entry);
  b.set<OpCode::swap_dims>(&swap_dims_entry);
  b.set<OpCode::permute>(&permute_entry);
  b.set<OpCode::flip>(&flip_entry);
  b.set<OpCode::slice>(&slice_entry);
  b.set<OpCode::slice_assign>(&slice_assign_entry);
  b.set<OpCode::unfold>(&unfold_entry);
}

}  // namespace tensor::cpu
