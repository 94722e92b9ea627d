// Helpers shared by the module sources (lib/src/modules/): rank dispatch over a
// TensorSlot, device moves for parameters, and the checks every forward makes.
#pragma once

#include <cstddef>
#include <string>
#include <type_traits>

#include "tensor/error.hpp"
#include "tensor/module.hpp"

namespace tensor::modules {

// Calls f(std::integral_constant<std::size_t, rank>) for rank 1-5.
template <class F>
decltype(auto) with_rank(std::size_t rank, F&& f) {
  switch (rank) {
    case 1: return f(std::integral_constant<std::size_t, 1>{});
    case 2: return f(std::integral_constant<std::size_t, 2>{});
    case 3: return f(std::integral_constant<std::size_t, 3>{});
    case 4: return f(std::integral_constant<std::size_t, 4>{});
    case 5: return f(std::integral_constant<std::size_t, 5>{});
    default: throw ShapeError("[Module] unsupported tensor rank; expected 1-5; got " + std::to_string(rank));
  }
}

// A new reference to the slot's tensor / the slot's tensor replaced by h (adopted).
detail::Handle slot_handle(const TensorSlot& s);
void slot_set(const TensorSlot& s, detail::Handle h);

// h on `target`: through the inner device when either end is autodiff; a parameter
// (require_grad) is a leaf that requires grad on an autodiff target.
detail::Handle on_device(detail::Handle h, const Device& target, bool require_grad);

// DeviceError / DTypeError naming "module.param" unless x is on p's device with p's dtype.
void check_same_device(const char* module, const char* param, const detail::Handle& x, const detail::Handle& p);
template <std::size_t D, std::size_t E>
void check_input(const char* module, const char* param, const Tensor<D>& x, const Tensor<E>& p) {
  check_same_device(module, param, x.handle(), p.handle());
}

[[noreturn]] void shape_error(const char* module, const std::string& what, const std::string& expected, const std::string& got);

}  // namespace tensor::modules
