// burn-nn's losses (tensor/modules/loss.hpp), composed from public ops.
#include "tensor/modules/loss.hpp"

#include <string>

#include "module_util.hpp"
#include "tensor/activation.hpp"
#include "tensor/nn.hpp"

namespace tensor::nn {

using modules::shape_error;

namespace {

template <std::size_t D>
Tensor<1> reduce(const Tensor<D>& x, Reduction r) {
  switch (r) {
    case Reduction::Sum: return x.sum();
    case Reduction::BatchMean: return x.sum() / static_cast<double>(x.shape()[0]);
    case Reduction::Mean:
    case Reduction::Auto: break;
  }
  return x.mean();
}

template <std::size_t D, class K>
Tensor<D, K> beside(const char* loss, const Tensor<D, K>& t, const Device& want) {
  const Device got = t.device();
  if (got == want) return t;
  if ((got.is_autodiff() ? got.inner() : got) != (want.is_autodiff() ? want.inner() : want))
    throw DeviceError(DeviceError::Kind::Mismatch, std::string("[") + loss + "] targets on another device than the predictions; expected " +
                                                       want.to_string() + "; got " + got.to_string());
  return Tensor<D, K>(modules::on_device(tensor::detail::copy(t), want, false));
}

template <std::size_t D, class K>
void same_shape(const char* loss, const Tensor<D>& a, const Tensor<D, K>& b) {
  if (a.shape() != b.shape()) shape_error(loss, "targets and predictions differ in shape", a.shape().to_string(), b.shape().to_string());
}

}  // namespace

CrossEntropyLoss::CrossEntropyLoss(const CrossEntropyLossConfig& c) : smoothing(c.smoothing) {
  if (smoothing && !(*smoothing >= 0.0 && *smoothing <= 1.0))
    shape_error("CrossEntropyLoss", "smoothing out of range", "0 <= smoothing <= 1", std::to_string(*smoothing));
}

Tensor<1> CrossEntropyLoss::forward(const Tensor<2>& logits, const Tensor<1, Int>& targets) const {
  const Shape ls = logits.shape(), ts = targets.shape();
  if (ts[0] != ls[0]) shape_error("CrossEntropyLoss", "targets [N] must match logits [N, C]", "[" + std::to_string(ls[0]) + "]", ts.to_string());
  const std::size_t c = ls[1];
  const Tensor<1, Int> t = beside("CrossEntropyLoss", targets, logits.device());
  Tensor<2> target = t.one_hot(c).float_().cast(logits.dtype());
  if (smoothing) target = target * (1.0 - *smoothing) + *smoothing / static_cast<double>(c);
  return (activation::log_softmax(logits, 1) * target).sum_dim(1).mean().neg();
}

template <std::size_t D>
Tensor<1> MseLoss::forward(const Tensor<D>& logits, const Tensor<D>& targets, Reduction reduction) const {
  same_shape("MseLoss", logits, targets);
  return reduce((logits - beside("MseLoss", targets, logits.device())).square(), reduction);
}

BinaryCrossEntropyLoss::BinaryCrossEntropyLoss(const BinaryCrossEntropyLossConfig& c) : smoothing(c.smoothing) {
  if (smoothing && !(*smoothing >= 0.0 && *smoothing <= 1.0))
    shape_error("BinaryCrossEntropyLoss", "smoothing out of range", "0 <= smoothing <= 1", std::to_string(*smoothing));
}

template <std::size_t D>
Tensor<1> BinaryCrossEntropyLoss::forward(const Tensor<D>& logits, const Tensor<D, Int>& targets) const {
  same_shape("BinaryCrossEntropyLoss", logits, targets);
  Tensor<D> t = beside("BinaryCrossEntropyLoss", targets, logits.device()).float_().cast(logits.dtype());
  if (smoothing) {
    const double classes = D > 1 ? static_cast<double>(logits.shape()[D - 1]) : 2.0;
    t = t * (1.0 - *smoothing) + *smoothing / classes;
  }
  return ((1.0 - t) * logits - activation::log_sigmoid(logits)).mean();
}

HuberLoss::HuberLoss(const HuberLossConfig& c) : delta(c.delta) {
  if (!(c.delta >= 0.0)) shape_error("HuberLoss", "delta out of range", "delta >= 0", std::to_string(c.delta));
}

template <std::size_t D>
Tensor<1> HuberLoss::forward(const Tensor<D>& predictions, const Tensor<D>& targets, Reduction reduction) const {
  same_shape("HuberLoss", predictions, targets);
  const Tensor<D> r = predictions - beside("HuberLoss", targets, predictions.device());
  const Tensor<D> a = r.abs();
  const Tensor<D> quadratic = r.square() * 0.5;
  const Tensor<D> linear = (a - 0.5 * delta) * delta;
  return reduce(quadratic.mask_where(a.greater_elem(delta), linear), reduction);
}

// ---- KLDivLoss ------------------------------------------------------------------------------

namespace {
// The smallest positive normal of a float dtype (burn's finfo().min_positive).
double min_positive(DType t) {
  switch (t) {
    case DType::F64: return 2.2250738585072014e-308;
    case DType::F16: return 6.103515625e-05;
    default: return 1.1754943508222875e-38;  // f32, bf16
  }
}
}  // namespace

template <std::size_t D>
Tensor<D> KLDivLoss::forward_no_reduction(const Tensor<D>& predictions, const Tensor<D>& targets) const {
  same_shape("KLDivLoss", predictions, targets);
  const Tensor<D> t = beside("KLDivLoss", targets, predictions.device());
  if (log_target) return t.exp() * (t - predictions);
  return t * (t.clamp(min_positive(t.dtype()), 1.0).log() - predictions);
}

template <std::size_t D>
Tensor<1> KLDivLoss::forward(const Tensor<D>& predictions, const Tensor<D>& targets, Reduction reduction) const {
  const Tensor<D> loss = forward_no_reduction(predictions, targets);
  return reduce(loss, reduction == Reduction::Auto ? Reduction::BatchMean : reduction);
}

// ---- CTCLoss --------------------------------------------------------------------------------

Tensor<1> CTCLoss::forward(const Tensor<3>& log_probs, const Tensor<2, Int>& targets, const Tensor<1, Int>& input_lengths,
                           const Tensor<1, Int>& target_lengths) const {
  const Shape ls = log_probs.shape(), ts = targets.shape(), is = input_lengths.shape(), tls = target_lengths.shape();
  const std::size_t n = ls[1];
  if (ts[0] != n || is[0] != n || tls[0] != n)
    shape_error("CTCLoss", "targets [N, S], input_lengths [N] and target_lengths [N] must share log_probs' batch (log_probs [T, N, C])",
                "N = " + std::to_string(n),
                "log_probs " + ls.to_string() + ", targets " + ts.to_string() + ", input_lengths " + is.to_string() +
                    ", target_lengths " + tls.to_string());
  if (blank >= ls[2])
    throw IndexError("[CTCLoss] blank out of range; expected blank < " + std::to_string(ls[2]) + " (the class count); got " +
                     std::to_string(blank));
  const Device d = log_probs.device();
  Tensor<1> loss = ctc_loss(log_probs, beside("CTCLoss", targets, d), beside("CTCLoss", input_lengths, d),
                            beside("CTCLoss", target_lengths, d), static_cast<std::int64_t>(blank));
  if (zero_infinity) loss = loss.mask_where(loss.is_inf(), loss.zeros_like());
  return loss;
}

Tensor<1> CTCLoss::forward_with_reduction(const Tensor<3>& log_probs, const Tensor<2, Int>& targets,
                                          const Tensor<1, Int>& input_lengths, const Tensor<1, Int>& target_lengths,
                                          Reduction reduction) const {
  if (reduction == Reduction::BatchMean)
    throw Error("[CTCLoss] reduction not supported; expected Mean, Auto or Sum; got BatchMean");
  const Tensor<1> loss = forward(log_probs, targets, input_lengths, target_lengths);
  if (reduction == Reduction::Sum) return loss.sum();
  return ctc_loss_mean(loss, beside("CTCLoss", target_lengths, log_probs.device()));
}

#define INST(D)                                                                                                    \
  template TENSOR_API Tensor<1> MseLoss::forward<D>(const Tensor<D>&, const Tensor<D>&, Reduction) const;         \
  template TENSOR_API Tensor<1> BinaryCrossEntropyLoss::forward<D>(const Tensor<D>&, const Tensor<D, Int>&) const; \
  template TENSOR_API Tensor<1> HuberLoss::forward<D>(const Tensor<D>&, const Tensor<D>&, Reduction) const;     \
  template TENSOR_API Tensor<1> KLDivLoss::forward<D>(const Tensor<D>&, const Tensor<D>&, Reduction) const;     \
  template TENSOR_API Tensor<D> KLDivLoss::forward_no_reduction<D>(const Tensor<D>&, const Tensor<D>&) const;
INST(1) INST(2) INST(3) INST(4)
#undef INST

}  // namespace tensor::nn
