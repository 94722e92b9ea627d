// burn-nn's loss modules with burn's reductions: CrossEntropyLoss (with logits, label
// smoothing), MseLoss, BinaryCrossEntropyLoss (with logits), HuberLoss, KLDivLoss, CTCLoss
// (bodies in lib/src/modules/loss.cpp; rank-generic forwards instantiated for ranks 1-4).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include "tensor/module.hpp"

namespace tensor::nn {

/// burn's Reduction: Mean and Auto average every element, Sum adds them, BatchMean divides
/// the sum by the first dim's size.
enum class Reduction : std::uint8_t { Mean, Sum, BatchMean, Auto };

/// burn's CrossEntropyLossConfig with logits = true: -mean over the batch of
/// sum_c t[n, c] log_softmax(logits)[n, c], t the one-hot target or, with smoothing alpha,
/// (1 - alpha) one_hot + alpha / C. ShapeError naming CrossEntropyLoss when targets [N] do
/// not match logits [N, C].
struct CrossEntropyLossConfig {
  std::optional<double> smoothing{};
};

class TENSOR_API CrossEntropyLoss {
 public:
  explicit CrossEntropyLoss(const CrossEntropyLossConfig& config = {});
  Tensor<1> forward(const Tensor<2>& logits, const Tensor<1, Int>& targets) const;
  std::optional<double> smoothing{};
};

/// burn's MseLoss: (logits - targets)^2 reduced.
class TENSOR_API MseLoss {
 public:
  template <std::size_t D>
  Tensor<1> forward(const Tensor<D>& logits, const Tensor<D>& targets, Reduction reduction = Reduction::Mean) const;
};

/// burn's BinaryCrossEntropyLossConfig with logits = true: (1 - t) x - log_sigmoid(x) per
/// element (t smoothed to t (1 - alpha) + alpha / classes, classes = the last dim, or 2 for
/// rank 1), then the mean. Targets are Int 0/1.
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

/// burn's HuberLossConfig: per element r = pred - target, 0.5 r^2 where |r| <= delta,
/// else delta (|r| - 0.5 delta); reduced. delta >= 0.
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

/// burn's KLDivLossConfig: predictions are log-probabilities; per element
/// t (log t - p) (t clamped below to the dtype's smallest positive normal inside the log, so
/// t = 0 gives 0), or with log_target exp(t) (t - p). Reductions: Auto and BatchMean divide the
/// sum by the first dim's size (the KL divergence per sample), Mean averages every element,
/// Sum adds them. ShapeError naming KLDivLoss when the shapes differ.
struct KLDivLossConfig {
  bool log_target = false;
};

class TENSOR_API KLDivLoss {
 public:
  explicit KLDivLoss(const KLDivLossConfig& config = {}) : log_target(config.log_target) {}
  template <std::size_t D>
  Tensor<1> forward(const Tensor<D>& predictions, const Tensor<D>& targets, Reduction reduction = Reduction::Auto) const;
  template <std::size_t D>
  Tensor<D> forward_no_reduction(const Tensor<D>& predictions, const Tensor<D>& targets) const;
  bool log_target;
};

/// burn's CTCLossConfig over tensor::nn::ctc_loss: log_probs [T, N, C] (log_softmax output),
/// targets Int [N, S] (padded), input_lengths / target_lengths Int [N]. zero_infinity: an
/// impossible alignment's +inf loss (and its gradient) becomes 0.
struct CTCLossConfig {
  std::size_t blank = 0;
  bool zero_infinity = false;
};

class TENSOR_API CTCLoss {
 public:
  explicit CTCLoss(const CTCLossConfig& config = {}) : blank(config.blank), zero_infinity(config.zero_infinity) {}
  /// The per-sample negative log-likelihoods [N]. ShapeError naming CTCLoss when the shapes
  /// do not fit each other, IndexError when blank >= C.
  Tensor<1> forward(const Tensor<3>& log_probs, const Tensor<2, Int>& targets, const Tensor<1, Int>& input_lengths,
                    const Tensor<1, Int>& target_lengths) const;
  /// burn's reductions: Mean and Auto divide each loss by its target length (clamped to >= 1,
  /// where burn divides by 0) and average; Sum adds the losses; BatchMean is refused (Error
  /// naming CTCLoss), as burn's panic.
  Tensor<1> forward_with_reduction(const Tensor<3>& log_probs, const Tensor<2, Int>& targets, const Tensor<1, Int>& input_lengths,
                                   const Tensor<1, Int>& target_lengths, Reduction reduction = Reduction::Auto) const;
  std::size_t blank;
  bool zero_infinity;
};

}  // namespace tensor::nn
