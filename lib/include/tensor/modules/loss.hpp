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
  std::optional<double> smoothing{};  ///< label smoothing alpha in [0, 1]; empty: none
};

/// burn's CrossEntropyLoss with logits (see CrossEntropyLossConfig).
class TENSOR_API CrossEntropyLoss {
 public:
  /// ShapeError naming CrossEntropyLoss when smoothing is outside [0, 1].
  explicit CrossEntropyLoss(const CrossEntropyLossConfig& config = {});
  /// The mean loss [1] of logits [N, C] (Float) against class indices Int [N]; ShapeError
  /// when the N differ, DeviceError when the targets are on another device.
  Tensor<1> forward(const Tensor<2>& logits, const Tensor<1, Int>& targets) const;
  std::optional<double> smoothing{};  ///< the config's smoothing
};

/// burn's MseLoss: (logits - targets)^2 reduced.
class TENSOR_API MseLoss {
 public:
  /// The reduced loss [1] (ranks 1-4). ShapeError naming MseLoss when the shapes differ,
  /// DeviceError when the targets are on another device.
  template <std::size_t D>
  Tensor<1> forward(const Tensor<D>& logits, const Tensor<D>& targets, Reduction reduction = Reduction::Mean) const;
};

/// burn's BinaryCrossEntropyLossConfig with logits = true: (1 - t) x - log_sigmoid(x) per
/// element (t smoothed to t (1 - alpha) + alpha / classes, classes = the last dim, or 2 for
/// rank 1), then the mean. Targets are Int 0/1.
struct BinaryCrossEntropyLossConfig {
  std::optional<double> smoothing{};  ///< label smoothing alpha in [0, 1]; empty: none
};

/// burn's BinaryCrossEntropyLoss with logits (see BinaryCrossEntropyLossConfig).
class TENSOR_API BinaryCrossEntropyLoss {
 public:
  /// ShapeError naming BinaryCrossEntropyLoss when smoothing is outside [0, 1].
  explicit BinaryCrossEntropyLoss(const BinaryCrossEntropyLossConfig& config = {});
  /// The mean loss [1] of Float logits against Int 0/1 targets of the same shape (ranks
  /// 1-4). ShapeError when the shapes differ, DeviceError when the targets are elsewhere.
  template <std::size_t D>
  Tensor<1> forward(const Tensor<D>& logits, const Tensor<D, Int>& targets) const;
  std::optional<double> smoothing{};  ///< the config's smoothing
};

/// burn's HuberLossConfig: per element r = pred - target, 0.5 r^2 where |r| <= delta,
/// else delta (|r| - 0.5 delta); reduced. delta >= 0.
struct HuberLossConfig {
  double delta = 1.0;  ///< where the loss turns from quadratic to linear; >= 0
};

/// burn's HuberLoss (see HuberLossConfig).
class TENSOR_API HuberLoss {
 public:
  /// ShapeError naming HuberLoss when delta is negative (or NaN).
  explicit HuberLoss(const HuberLossConfig& config);
  /// The reduced loss [1] (ranks 1-4). ShapeError naming HuberLoss when the shapes differ,
  /// DeviceError when the targets are on another device.
  template <std::size_t D>
  Tensor<1> forward(const Tensor<D>& predictions, const Tensor<D>& targets, Reduction reduction = Reduction::Mean) const;
  double delta;  ///< the config's delta
};

/// burn's KLDivLossConfig: predictions are log-probabilities; per element
/// t (log t - p) (t clamped to [the dtype's smallest positive normal, 1] inside the log, so
/// t = 0 gives 0), or with log_target exp(t) (t - p). Reductions: Auto and BatchMean divide the
/// sum by the first dim's size (the KL divergence per sample), Mean averages every element,
/// Sum adds them. ShapeError naming KLDivLoss when the shapes differ.
struct KLDivLossConfig {
  bool log_target = false;  ///< the targets are log-probabilities too
};

/// burn's KLDivLoss (see KLDivLossConfig).
class TENSOR_API KLDivLoss {
 public:
  /// Keeps the config's log_target.
  explicit KLDivLoss(const KLDivLossConfig& config = {}) : log_target(config.log_target) {}
  /// forward_no_reduction() reduced to [1] (ranks 1-4; Auto: BatchMean).
  template <std::size_t D>
  Tensor<1> forward(const Tensor<D>& predictions, const Tensor<D>& targets, Reduction reduction = Reduction::Auto) const;
  /// The per-element loss, of the predictions' shape. ShapeError naming KLDivLoss when the
  /// shapes differ, DeviceError when the targets are on another device.
  template <std::size_t D>
  Tensor<D> forward_no_reduction(const Tensor<D>& predictions, const Tensor<D>& targets) const;
  bool log_target;  ///< the config's log_target
};

/// burn's CTCLossConfig over tensor::nn::ctc_loss: log_probs [T, N, C] (log_softmax output),
/// targets Int [N, S] (padded), input_lengths / target_lengths Int [N]. zero_infinity: an
/// impossible alignment's +inf loss (and its gradient) becomes 0.
struct CTCLossConfig {
  std::size_t blank = 0;        ///< the blank class's index (< C)
  bool zero_infinity = false;   ///< impossible alignments give 0 instead of +inf
};

/// burn's CTCLoss (see CTCLossConfig).
class TENSOR_API CTCLoss {
 public:
  /// Keeps the config's blank and zero_infinity (blank is checked by forward).
  explicit CTCLoss(const CTCLossConfig& config = {}) : blank(config.blank), zero_infinity(config.zero_infinity) {}
  /// The per-sample negative log-likelihoods [N]. ShapeError naming CTCLoss when the shapes
  /// do not fit each other, IndexError when blank >= C, DeviceError when the Int tensors are
  /// on another device than log_probs.
  Tensor<1> forward(const Tensor<3>& log_probs, const Tensor<2, Int>& targets, const Tensor<1, Int>& input_lengths,
                    const Tensor<1, Int>& target_lengths) const;
  /// burn's reductions: Mean and Auto divide each loss by its target length (clamped to >= 1,
  /// where burn divides by 0) and average; Sum adds the losses; BatchMean is refused (Error
  /// naming CTCLoss), as burn's panic.
  Tensor<1> forward_with_reduction(const Tensor<3>& log_probs, const Tensor<2, Int>& targets, const Tensor<1, Int>& input_lengths,
                                   const Tensor<1, Int>& target_lengths, Reduction reduction = Reduction::Auto) const;
  std::size_t blank;    ///< the config's blank
  bool zero_infinity;   ///< the config's zero_infinity
};

}  // namespace tensor::nn
