// burn's functional losses (burn::tensor::loss), composed in libtensor.so.
#pragma once

#include "tensor/tensor.hpp"

/// burn's loss functions on tensors (burn::tensor::loss).
namespace tensor::loss {

/// -mean(sum(targets * log_softmax(logits, last dim), last dim)); targets are
/// probabilities of logits' shape. A one-element result.
template <std::size_t D> Tensor<1> cross_entropy_with_logits(const Tensor<D>& logits, const Tensor<D>& targets) {
  return Tensor<1>(detail::cross_entropy_with_logits(detail::copy(logits), detail::copy(targets)));
}

}  // namespace tensor::loss
