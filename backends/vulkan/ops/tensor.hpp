// VulkanTensor: the Vulkan backend's primitive for every kind: a counted buffer
// suballocation plus the CPU backend's layout model (signed element strides and an
// offset), so transposes, slices, flips, expands and unfolds are free views.
#pragma once

#include <array>
#include <cstdint>

#include "backends/vulkan/runtime/context.hpp"
#include "dispatch/primitive.hpp"
#include "lib/core/strided.hpp"

namespace tensor::vulkan {

using VkLayout = dispatch::StridedLayout;
using dispatch::contiguous_layout;

class VulkanTensor final : public dispatch::Primitive {
 public:
  VulkanTensor(DType dtype, const Shape& shape, DeviceId device, BufRef buffer, const VkLayout& layout)
      : Primitive(dtype, shape, device), buffer_(std::move(buffer)), layout_(layout) {}

  // Unique handle and unique buffer (in-flight batches also hold the buffer, so
  // pending GPU work makes a tensor non-unique: conservative, never wrong).
  bool can_mut() const override { return unique_ref() && buffer_->unique(); }

  const BufRef& buffer() const { return buffer_; }
  const VkLayout& layout() const { return layout_; }
  std::int64_t stride(std::size_t d) const { return layout_.strides[d]; }
  std::int64_t offset() const { return layout_.offset; }
  Context& ctx() const { return *buffer_->context(); }

  bool is_contiguous() const;
  bool is_dense_from_zero() const { return layout_.offset == 0 && is_contiguous(); }
  void set_view(const Shape& shape, const VkLayout& layout) { shape_ = shape; layout_ = layout; }
  void set_dtype(DType dtype) { dtype_ = dtype; }

 private:
  BufRef buffer_;
  VkLayout layout_;
};

using VkRef = dispatch::Ref<VulkanTensor>;

}  // namespace tensor::vulkan
