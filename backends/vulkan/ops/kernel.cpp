// The helpers every op family shares (ops/kernel.hpp).
#include "backends/vulkan/ops/kernel.hpp"

#include <fmt/format.h>

#include <bit>
#include <type_traits>

#include "lib/core/current_op.hpp"
#include "lib/core/element.hpp"
#include "tensor/error.hpp"

namespace tensor::vulkan {

bool VulkanTensor::is_contiguous() const {
  std::int64_t s = 1;
  for (std::size_t d = rank(); d-- > 0;) {
    if (shape_[d] == 1) continue;
    if (layout_.strides[d] != s) return false;
    s *= static_cast<std::int64_t>(shape_[d]);
  }
  return true;
}

namespace kernel {

Context& ctx_of(DeviceId d) {
  Context* c = context(d.index_id);
  if (!c) throw DeviceError(DeviceError::Kind::Unavailable, fmt::format("[{}] no such device; expected a vulkan device; got vulkan:{}", core::current_op_name(), d.index_id));
  c->ensure_init();
  return *c;
}

void check_storage_dtype(const Context& c, DType t, const char* op) {
  if (!c.dtype_usage(t).contains(DTypeUsage::Storage))
    throw DTypeError(fmt::format("[{}] dtype not supported on this device; expected a dtype vulkan:{} can store; got {} on vulkan:{}",
                                 op, c.id().index_id, dtype_name(t), c.id().index_id));
}

VkRef alloc(DeviceId dev, DType dt, const Shape& shape) {
  Context& c = ctx_of(dev);
  check_storage_dtype(c, dt, "vulkan");
  const std::size_t n = shape.num_elements();
  if (n > 0x7FFFFFFFull)
    throw ExecutionError(fmt::format("[{}] tensor too large for vulkan:{}; expected at most 2^31 - 1 elements; got {} "
                                     "(shape {})",
                                     core::current_op_name(), dev.index_id, n, shape.to_string()));
  BufRef buf = c.allocate(n * dtype_size(dt));
  return VkRef::make(dt, shape, dev, std::move(buf), contiguous_layout(shape));
}

VkRef make_view(VkRef t, const Shape& shape, const VkLayout& l) {
  if (t->unique_ref()) {
    t->set_view(shape, l);
    return t;
  }
  return VkRef::make(t->dtype(), shape, t->device(), t->buffer(), l);
}


Operand operand(const VulkanTensor& t, const Shape& out) {
  Operand o{t.buffer().get(), t.offset(), {}};
  for (std::size_t d = 0; d < t.rank(); ++d) o.strides[d] = t.shape()[d] == out[d] ? t.stride(d) : 0;
  return o;
}

// A Scalar as the raw bit pattern of an element of `dt` (the CPU's scalar_as).
std::uint64_t scalar_raw(DType dt, Scalar s) {
  return dispatch::visit_dtype(dt, [&](auto tag) -> std::uint64_t {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool> || std::is_same_v<T, dispatch::BoolU32>) {
      return s.to_bool() ? 1u : 0u;
    } else if constexpr (dispatch::kIsHalf<T>) {
      return dispatch::convert_value<T>(s.to_double()).bits;
    } else if constexpr (std::is_same_v<T, float>) {
      return std::bit_cast<std::uint32_t>(dispatch::convert_value<float>(s.to_double()));
    } else if constexpr (std::is_same_v<T, double>) {
      return std::bit_cast<std::uint64_t>(s.to_double());
    } else {
      T v;
      if (s.is_float()) v = dispatch::convert_value<T>(s.to_double());
      else if (s.kind() == Scalar::Kind::UInt) v = dispatch::convert_value<T>(s.to_uint64());
      else v = dispatch::convert_value<T>(s.to_int64());
      return static_cast<std::uint64_t>(static_cast<std::make_unsigned_t<T>>(v));
    }
  });
}


// Lines of `a` along `dim` one invocation walks whole: at most `max` on a software device.
void check_loop_limit(const VulkanTensor& a, const char* what, std::size_t max, std::size_t dim) {
  if (a.shape()[dim] > max && a.ctx().software())
    throw ExecutionError(fmt::format("[{}] {} too long for a software Vulkan device (its shader loops stop after 65535 "
                                     "iterations); expected at most {} elements along dim {}; got {}",
                                     core::current_op_name(), what, max, dim, a.shape()[dim]));
}

}  // namespace kernel
}  // namespace tensor::vulkan
