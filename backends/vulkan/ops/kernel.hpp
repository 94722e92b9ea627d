// Internal to the op-family files (ops/: creation, layout, elementwise, reduce, matmul,
// index, softmax_sort, pool_norm, conv, attention): what their entries share.
// Allocation and views, launch parameters, and the few cross-family kernels (the
// elementwise launch and conversions, host upload and readback). Depends on the runtime (runtime/context.hpp)
// only; registration (vk_backend.cpp) sits above, through vk_ops.hpp.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <future>
#include <initializer_list>
#include <vector>

#include "backends/vulkan/shaders/vk_codes.h"
#include "backends/vulkan/runtime/context.hpp"
#include "backends/vulkan/ops/tensor.hpp"
#include "dispatch/primitive.hpp"
#include "lib/core/shape_rules.hpp"
#include "tensor/data.hpp"
#include "tensor/scalar.hpp"
#include "tensor/shape.hpp"

namespace tensor::vulkan::kernel {

using dispatch::Prim;

inline VkRef as_vk(Prim&& p) { return dispatch::prim_cast<VulkanTensor>(std::move(p)); }

// The initialised context of `d`; DeviceError naming the user's op when unknown.
Context& ctx_of(DeviceId d);
// DTypeError naming `op` unless the device can store `t`.
void check_storage_dtype(const Context& c, DType t, const char* op);
// A fresh contiguous tensor (at most 2^31 - 1 elements).
VkRef alloc(DeviceId dev, DType dt, const Shape& shape);
// `t` viewed as (shape, l): in place when `t` is the only handle.
VkRef make_view(VkRef t, const Shape& shape, const VkLayout& l);

// One operand of a strided launch.
struct Operand {
  const Buffer* buf = nullptr;
  std::int64_t offset = 0;
  std::array<std::int64_t, kMaxRank> strides{};
};
// `t` read over `out` (broadcast dims get stride 0).
Operand operand(const VulkanTensor& t, const Shape& out);

// The parameter words of one dispatch (vk_codes.h's P_* layout).
struct Params {
  std::vector<std::uint32_t> w = std::vector<std::uint32_t>(P_WORDS, 0u);
  void shape(const Shape& s, std::size_t n) {
    w[P_N] = static_cast<std::uint32_t>(n);
    w[P_RANK] = static_cast<std::uint32_t>(s.rank());
    for (std::size_t d = 0; d < s.rank(); ++d) w[P_SHAPE + d] = static_cast<std::uint32_t>(s[d]);
  }
  void operand(int k, const Operand& o, std::size_t rank) {
    w[P_OPND + 9 * k] = static_cast<std::uint32_t>(o.offset);
    for (std::size_t d = 0; d < rank; ++d) w[P_OPND + 9 * k + 1 + d] = static_cast<std::uint32_t>(o.strides[d]);
  }
  void extra(int i, std::int64_t v) { w[P_EXTRA + i] = static_cast<std::uint32_t>(v); }
  void scalar(int word, std::uint64_t raw) {
    w[word] = static_cast<std::uint32_t>(raw);
    w[word + 1] = static_cast<std::uint32_t>(raw >> 32);
  }
};

// Whether a dispatch touching these dtypes needs the 64-bit (WIDE) shader variant.
inline bool wide(std::initializer_list<DType> ts) {
  for (DType t : ts)
    if (dtype_size(t) == 8) return true;
  return false;
}
// A 2-D grid of `groups` workgroups (x at most 65535).
inline void groups_for(std::size_t groups, std::uint32_t& gx, std::uint32_t& gy) {
  gx = static_cast<std::uint32_t>(std::min<std::size_t>(groups, 65535));
  gy = static_cast<std::uint32_t>((groups + gx - 1) / gx);
}
inline std::uint32_t code(DType t) { return static_cast<std::uint32_t>(t); }

// The broadcast of two equal-rank shapes (validated by Dispatch).
inline Shape broadcast(const Shape& a, const Shape& b) { return core::broadcast_shape(a, b); }
// A Scalar as the raw bit pattern of an element of `dt` (the CPU's scalar_as).
std::uint64_t scalar_raw(DType dt, Scalar s);

// Software Vulkan (lavapipe: Mesa's llvmpipe compiler) stops any one invocation's
// loops after 65535 iterations in all and the result is silently short. Where one
// invocation walks a whole line, lines stay under kLoopSafe iterations on every device:
// line reductions of many long lines go to the column path (which splits them),
// scatter/select_assign walk their indices in chunks; scans and softmax rows that
// would need more raise on software devices (Context::software).
inline constexpr std::size_t kLoopSafe = 16384;
// Lines of `a` along `dim` one invocation walks whole: at most `max` on a software device.
void check_loop_limit(const VulkanTensor& a, const char* what, std::size_t max, std::size_t dim);

// ---- ops/elementwise.cpp ----
// One elementwise dispatch (or several, for contiguous tensors beyond
// maxStorageBufferRange): out = op(a, b, c) over `shape`, scalars s0, s1.
void launch_ew(int op, DType dta, DType dtb, DType dto, bool bscalar, const Shape& shape, const Operand& out,
               const Operand& a, const Operand* b, const Operand* c, std::uint64_t s0, std::uint64_t s1);
// `t` converted to `to` (contiguous, fresh), or a strided copy when dtypes match.
VkRef convert(const VkRef& t, DType to);
// `t` itself when contiguous, else a contiguous copy (which may keep a non-zero offset:
// for kernels that read through the offset).
VkRef to_contiguous(VkRef t);
// `t` itself when contiguous from element 0 of its buffer, else a fresh contiguous copy:
// for kernels that index an operand's whole buffer from element 0 (conv.comp).
VkRef dense_from_zero(VkRef t);

// ---- ops/creation.cpp ----
Prim upload_data(TensorData data, DeviceId dev);       // the from_data entry
std::future<TensorData> read_data(Prim p);             // the into_data entry

}  // namespace tensor::vulkan::kernel
