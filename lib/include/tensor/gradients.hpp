// Gradients: what Tensor::backward() returns (burn's Gradients). An opaque, move-only
// container of the gradients of the graph's leaves (tensors that require grad), keyed by
// graph node; read them with Tensor::grad(grads). Gradients live on the inner device.
#pragma once

#include <cstddef>

#include "tensor/detail.hpp"
#include "tensor/export.hpp"

namespace tensor {

/// What Tensor::backward() returns (burn's Gradients): the gradients of the graph's leaves
/// (tensors that require grad), on the inner device; read them with Tensor::grad(grads).
/// Opaque and move-only.
class TENSOR_API Gradients {
 public:
  Gradients() noexcept = default;  ///< empty
  /// Moves take the gradients over (the source is left empty); copies are deleted.
  ///@{
  Gradients(Gradients&& o) noexcept : impl_(o.impl_) { o.impl_ = nullptr; }
  Gradients& operator=(Gradients&& o) noexcept;
  ///@}
  Gradients(const Gradients&) = delete;
  Gradients& operator=(const Gradients&) = delete;
  ~Gradients();

  /// How many gradients it holds.
  std::size_t size() const;
  /// True when it holds no gradient.
  bool empty() const { return size() == 0; }

  /// The implementation's (libtensor.so's) view; not for users.
  void* raw() const noexcept { return impl_; }
  /// Wraps the implementation's pointer (libtensor.so's); not for users.
  static Gradients adopt(void* impl) noexcept {
    Gradients g;
    g.impl_ = impl;
    return g;
  }

 private:
  void* impl_ = nullptr;
};

namespace detail {
TENSOR_API Gradients backward(const Handle& loss);
TENSOR_API Handle grad(const Gradients& grads, const Handle& x);  ///< empty when absent
TENSOR_API Handle grad_remove(Gradients& grads, const Handle& x);
TENSOR_API void grad_replace(Gradients& grads, const Handle& x, Handle&& g);
TENSOR_API Handle set_require_grad(Handle&& a, bool on);
TENSOR_API bool is_require_grad(const Handle& a);
TENSOR_API void set_distributed(const Handle& h, std::uint64_t param_id);  ///< lib/src/distributed/
TENSOR_API std::uint64_t distributed_id(const Handle& h);
TENSOR_API Handle inner(Handle&& a);
TENSOR_API Handle from_inner(Handle&& a);
}  // namespace detail

}  // namespace tensor
