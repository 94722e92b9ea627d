// burn-nn's loss modules with burn's reductions: CrossEntropyLoss (with logits, label
// smoothing), MseLoss, BinaryCrossEntropyLoss (with logits), HuberLoss (bodies in
// lib/src/modules/loss.cpp; rank-generic forwards instantiated for ranks 1-4).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include "tensor/module.hpp"

namespace tensor::nn {

// burn's Reduction: Mean and Auto average every element, Sum adds them, BatchMean divides
// the sum by the first dim's size.
enum class Reduction : std::uint8_t { Mean, Sum, BatchMean, Auto };

// burn's CrossEntropyLossConfig with logits = true: -mean over the batch of
// sum_c t[n, c] log_softmax(logits)[n, c], t the one-hot target or, with smoothing alpha,
// (1 - alpha) one_hot + alpha / C. ShapeError naming CrossEntropyLoss when targets [N] do
// not match logits [N, C].
struct CrossEntropyLossConfig {
  std::optional<double> smoothing{};
};

class TENSOR_API CrossEntropyLoss {
 public:
  explicit CrossEntropyLoss(const CrossEntropyLossConfig& config = {});
  Tensor<1> forward(const Tensor<2>& logits, const Tensor<1, Int>& targets) const;
  std::optional<double> smoothing{};
};

// burn's MseLoss: (logits - targets)^2 reduced.
class TENSOR_API MseLoss {
 public:
  template <std::size_t D>
  Tensor<1> forward(const Tensor<D>& logits, const Tensor<D>& targets, Reduction reduction = Reduction::Mean) const;
};

// burn's BinaryCrossEntropyLossConfig with logits = true: (1 - t) x - log_sigmoid(x) per
// element (t smoothed to t (1 - alpha) + alpha / classes, classes = the last dim, or 2 for
// rank 1), then the mean. Targets are Int 0/1.
struct BinaryCrossEntropyLossConfig {
  std::optional<double> smoothing{};
};

class TENSOR_API BinaryCrossEntropyLoss {
 public:
  explicit BinaryCrossEntropyLoss(const BinaryCrossEntropyLossConfig& config = {});
  template <std::size_t D>
  Tensor<1> forward(const Tensor<D>& logits, const Tensor<D, Int>& targets) const;
  std::optional<double> smoothing{};
};

// burn's HuberLossConfig: per element r = pred - target, 0.5 r^2 where |r| <= delta,
// else delta (|r| - 0.5 delta); reduced. delta >= 0.
struct HuberLossConfig {
  double delta = 1.0;
};

class TENSOR_API HuberLoss {
 public:
  explicit HuberLoss(const HuberLossConfig& config);
  template <std::size_t D>
  Tensor<1> forward(const Tensor<D>& predictions, const Tensor<D>& targets, Reduction reduction = Reduction::Mean) const;
  double delta;
};

}  // namespace tensor::nn
