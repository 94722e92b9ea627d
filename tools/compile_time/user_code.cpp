// Compile-time benchmark input (SPEC §8, seed 001): generic user code against the public
// API only — 16 template functions x 12 ops, each instantiated for ranks 1..4. It is
// compiled, never run; tools/compile_time/measure.sh times it (target <= 1 s at -O2).
//
// The body mirrors the burn experiment (BridgeTensor vs a type holding DispatchTensor):
// if the public headers pulled dispatch or backend code into user translation units,
// every instantiation (user_steps.inc) would drag it in and this file would compile far slower.
#include <tensor/tensor.hpp>

#include <cstddef>
#include <vector>

namespace user {

using tensor::Device;
using tensor::Tensor;

template <std::size_t D>
Tensor<D> make(const Device& device) {
  return Tensor<D>::ones(tensor::Shape(std::vector<std::size_t>(D, 2)), device);
}

#include "user_steps.inc"

}  // namespace user
