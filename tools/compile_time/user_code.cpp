// Compile-time benchmark input (SPEC §8, seed 001): generic user code against the public
// API only — 16 template functions x 12 ops, each instantiated for ranks 1..4. It is
// compiled, never run; tools/compile_time/measure.sh times it (target <= 1 s at -O2).
//
// The body mirrors the burn experiment (BridgeTensor vs a type holding DispatchTensor):
// if the public headers pulled dispatch or backend code into user translation units,
// every instantiation below would drag it in and this file would compile far slower.
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

// Twelve ops per function: the arithmetic operators, exp/log, negation, matmul with a
// transposed view, two keep-dim reductions and a dim swap.
#define USER_STEPS(name)                                  \
  template <std::size_t D>                                \
  Tensor<D> name(const Tensor<D>& a, const Tensor<D>& b) { \
    auto c = a + b;                                       \
    c = c * b;                                            \
    c = c - a;                                            \
    c = c.exp();                                          \
    c = c.log();                                          \
    c = -c;                                               \
    c = c / b;                                            \
    c = c.matmul(b.transpose());                          \
    c = c.sum_dim(0);                                     \
    c = c.mean_dim(0);                                    \
    c = c.swap_dims(0, D - 1);                            \
    return c + a;                                         \
  }

USER_STEPS(s0)
USER_STEPS(s1)
USER_STEPS(s2)
USER_STEPS(s3)
USER_STEPS(s4)
USER_STEPS(s5)
USER_STEPS(s6)
USER_STEPS(s7)
USER_STEPS(s8)
USER_STEPS(s9)
USER_STEPS(s10)
USER_STEPS(s11)
USER_STEPS(s12)
USER_STEPS(s13)
USER_STEPS(s14)
USER_STEPS(s15)
#undef USER_STEPS

#define USER_RUN(name)                                   \
  (void)name<1>(make<1>(device), make<1>(device));       \
  (void)name<2>(make<2>(device), make<2>(device));       \
  (void)name<3>(make<3>(device), make<3>(device));       \
  (void)name<4>(make<4>(device), make<4>(device));

// Instantiates every function at every rank (external linkage, so nothing is discarded).
void run(const Device& device) {
  USER_RUN(s0) USER_RUN(s1) USER_RUN(s2) USER_RUN(s3)
  USER_RUN(s4) USER_RUN(s5) USER_RUN(s6) USER_RUN(s7)
  USER_RUN(s8) USER_RUN(s9) USER_RUN(s10) USER_RUN(s11)
  USER_RUN(s12) USER_RUN(s13) USER_RUN(s14) USER_RUN(s15)
}
#undef USER_RUN

}  // namespace user
