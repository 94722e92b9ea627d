// Layout: reshape and the pure views (strides and offset from dispatch/strided.hpp;
// no data moves), and slice_assign.
#include "backends/vulkan/ops/kernel.hpp"
#include "backends/vulkan/vk_ops.hpp"
#include "lib/core/strided.hpp"

namespace tensor::vulkan {

using namespace kernel;

namespace {

Prim reshape_entry(Prim p, const Shape& shape) {
  VkRef t = to_contiguous(as_vk(std::move(p)));
  VkLayout l = contiguous_layout(shape);
  l.offset = t->offset();
  return make_view(std::move(t), shape, l);
}

// The pure view ops: shape, strides and offset from dispatch/strided.hpp.
template <auto kView, class... Args>
Prim view_entry(Prim p, Args... args) {
  VkRef t = as_vk(std::move(p));
  dispatch::StridedView v = kView(t->shape(), t->layout(), args...);
  return make_view(std::move(t), v.shape, v.layout);
}

// In place when `a` is unique and contiguous, else into a contiguous copy of `a`.
Prim slice_assign_entry(Prim p, dispatch::DimSlices slices, Prim pv) {
  VkRef t = as_vk(std::move(p));
  VkRef v = as_vk(std::move(pv));
  if (!(t->can_mut() && t->is_contiguous())) t = convert(t, t->dtype());
  const dispatch::StridedView region = dispatch::slice_view(t->shape(), t->layout(), slices);
  if (region.shape.num_elements() == 0) return t;
  Operand dst{t->buffer().get(), region.layout.offset, region.layout.strides};
  launch_ew(EW_COPY, v->dtype(), v->dtype(), t->dtype(), false, region.shape, dst, operand(*v, region.shape), nullptr,
            nullptr, 0, 0);
  return t;
}

}  // namespace

// copy_from: src's elements written into dst's buffer through dst's strides (same shape
// and dtype, checked by the caller), queued on the device's stream like any op. A src on
// dst's buffer is copied out first, so an overlapping view reads before it is overwritten.
void assign_entry(DeviceId, const Prim& pd, const Prim& ps) {
  const auto& d = static_cast<const VulkanTensor&>(*pd);
  VkRef s = as_vk(Prim(ps));
  if (d.shape().num_elements() == 0) return;
  if (s->buffer().get() == d.buffer().get()) s = convert(s, s->dtype());
  // Dense to dense of one dtype (copy_from, the optimizer's graph-mode state writes): a
  // buffer copy. On lavapipe a 200k-element f32 copy pass costs about as much as an add;
  // the transfer is a memcpy.
  if (s->dtype() == d.dtype() && s->shape() == d.shape() && s->is_contiguous() && d.is_contiguous()) {
    const std::size_t es = dtype_size(d.dtype());
    d.ctx().copy(*s->buffer(), static_cast<std::size_t>(s->offset()) * es, *d.buffer(), static_cast<std::size_t>(d.offset()) * es,
                 d.shape().num_elements() * es);
    return;
  }
  Operand dst{d.buffer().get(), d.offset(), d.layout().strides};
  launch_ew(EW_COPY, s->dtype(), s->dtype(), d.dtype(), false, d.shape(), dst, operand(*s, d.shape()), nullptr, nullptr, 0,
            0);
}

void register_layout(dispatch::Backend& b) {
  using O = OpCode;
  b.set<O::reshape>(&reshape_entry);
  b.set<O::expand>(&view_entry<dispatch::expand_view, const Shape&>);
  b.set<O::swap_dims>(&view_entry<dispatch::swap_dims_view, std::size_t, std::size_t>);
  b.set<O::permute>(&view_entry<dispatch::permute_view, dispatch::Axes>);
  b.set<O::flip>(&view_entry<dispatch::flip_view, dispatch::Axes>);
  b.set<O::slice>(&view_entry<dispatch::slice_view, dispatch::DimSlices>);
  b.set<O::slice_assign>(&slice_assign_entry);
  b.set<O::unfold>(&view_entry<dispatch::unfold_view, std::size_t, std::size_t, std::size_t>);
}

}  // namespace tensor::vulkan
