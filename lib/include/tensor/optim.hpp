// Optimizers, gradient clipping and learning-rate schedules (tensor::optim), after
// burn-optim: Sgd (momentum, dampening, Nesterov, L2 weight decay), Adam, AdamW
// (decoupled weight decay), GradientClipping::value / ::norm, ConstantLr, StepLr and
// CosineLr (cosine annealing after a linear warm-up).
//
// Updates go through the public Tensor API only, so they run on every device and
// dtype-follow the parameter (state tensors live on the parameter's device with its dtype).
// State (momentum buffers, Adam moments, step counts) is kept per ParamId.
//
// Autodiff is not in the library yet, so a step takes the gradient explicitly:
//   param = opt.step(lr, "fc1.weight", param, grad);
// When autodiff lands, its Gradients container (ParamId -> gradient tensor, as burn's
// GradientsParams) feeds the same entry point: a Module visitor walks the parameters and calls
// step(lr, id, param, grads.get<D>(id)) for each id that has a gradient, so the state keyed
// by ParamId here is reused unchanged. Parameters are returned, not modified in place
// (tensors are immutable values); the caller stores the result back into its module.
#pragma once

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "tensor/export.hpp"
#include "tensor/io.hpp"
#include "tensor/tensor.hpp"

namespace tensor::optim {

/// A parameter's identity (burn's ParamId): the key of its optimizer state.
using ParamId = std::string;

/// burn's GradientClippingConfig: Value(c) clamps each gradient element to [-c, c];
/// Norm(c) scales a gradient whose L2 norm exceeds c by c / (norm + 1e-6) (per parameter,
/// as burn does; not one global norm over all parameters).
class TENSOR_API GradientClipping {
 public:
  static GradientClipping value(double threshold);
  static GradientClipping norm(double max_norm);
  Tensor<1> clip(const Tensor<1>& grad) const;
  template <std::size_t D>
  Tensor<D> clip(const Tensor<D>& grad) const;

  bool by_norm() const { return by_norm_; }
  double threshold() const { return threshold_; }

 private:
  GradientClipping(bool by_norm, double t) : by_norm_(by_norm), threshold_(t) {}
  bool by_norm_;
  double threshold_;
};

/// The common interface: step() checks shapes, flattens, applies clipping, runs the
/// optimizer's rule on the rank-1 view and reshapes back.
class TENSOR_API Optimizer {
 public:
  virtual ~Optimizer();

  /// One update of `param` with gradient `grad` at learning rate `lr`; returns the new
  /// parameter. Throws ShapeError when param and grad shapes differ, DeviceError when
  /// they live on different devices.
  template <std::size_t D>
  Tensor<D> step(double lr, const ParamId& id, const Tensor<D>& param, const Tensor<D>& grad) {
    check(id, param.shape(), grad.shape(), param.device(), grad.device());
    std::array<std::int64_t, D> dims{};
    for (std::size_t i = 0; i < D; ++i) dims[i] = static_cast<std::int64_t>(param.shape()[i]);
    const std::array<std::int64_t, 1> flat{-1};
    Tensor<1> g = grad.template reshape<1>(flat);
    check_state(id, param.num_elements(), param.dtype());
    if (clipping_) g = clipping_->clip(g);
    return update(lr, id, param.template reshape<1>(flat), g).template reshape<D>(dims);
  }

  /// Number of steps taken for a parameter (0 when it has none yet).
  std::size_t steps(const ParamId& id) const;
  /// Drops every parameter's state.
  void reset() { state_.clear(); }

  /// The state as named host tensors, for a checkpoint (burn's to_record / load_record):
  /// "<id>.step" (i64 [1]) and, where the optimizer has them, "<id>.a" / "<id>.b" (the
  /// momentum buffer, or Adam's first and second moments, flattened). save_safetensors writes
  /// them beside the weights; load_record puts them back on `device`, replacing the current
  /// state, so a resumed run takes the same steps as an uninterrupted one. A record entry that
  /// is not "<id>.step|a|b", an "a"/"b" without its "step", a negative step count, a moment
  /// this optimizer does not keep, only some of the moments it keeps, or a step count above 0
  /// without them, and a moment value that is not finite (or a negative second moment of Adam)
  /// is a ShapeError naming the entry ("[load_record] ..."; a step that is not one i64, or a
  /// moment that is not float, a DTypeError), and the state stays as it was. A moment whose
  /// size or dtype differs from the parameter's is caught by the next step().
  io::NamedTensors to_record() const;
  void load_record(const io::NamedTensors& record, Device device = Device::default_device());

 protected:
  explicit Optimizer(std::optional<GradientClipping> clipping) : clipping_(clipping) {}
  struct State {
    std::size_t t = 0;                   ///< steps taken
    std::optional<Tensor<1>> a, b;       ///< momentum buffer / Adam's first and second moments
  };
  virtual Tensor<1> update(double lr, const ParamId& id, const Tensor<1>& p, const Tensor<1>& g) = 0;
  State& state(const ParamId& id) { return state_[id]; }
  virtual const char* name() const = 0;
  /// The moments this optimizer keeps once it has taken a step, which load_record requires
  /// (a record missing one would have update() read an absent moment); `b_nonnegative`: b is
  /// a running mean of squares (its square root is taken). The default keeps none.
  struct Moments {
    bool a = false, b = false, b_nonnegative = false;
  };
  virtual Moments moments() const { return {}; }

 private:
  void check(const ParamId& id, const Shape& p, const Shape& g, const Device& pd, const Device& gd) const;
  void check_state(const ParamId& id, std::size_t n, DType dtype) const;
  std::optional<GradientClipping> clipping_;
  std::map<ParamId, State> state_;
};

/// SGD as PyTorch and burn define it: g += weight_decay * p; with momentum mu,
/// buf = g on the first step, then buf = mu * buf + (1 - dampening) * g; the step uses
/// g + mu * buf (nesterov) or buf; p -= lr * step.
struct SgdConfig {
  double momentum = 0.0;
  double dampening = 0.0;
  bool nesterov = false;
  double weight_decay = 0.0;
  std::optional<GradientClipping> grad_clipping = std::nullopt;
};
class TENSOR_API Sgd final : public Optimizer {
 public:
  explicit Sgd(SgdConfig config = {});
  ~Sgd() override;

 private:
  Tensor<1> update(double lr, const ParamId& id, const Tensor<1>& p, const Tensor<1>& g) override;
  const char* name() const override { return "Sgd::step"; }
  Moments moments() const override { return {.a = config_.momentum != 0.0}; }
  SgdConfig config_;
};

/// Adam: g += weight_decay * p (L2, coupled); m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
/// p -= lr * (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + epsilon). Defaults are PyTorch's
/// (burn's epsilon is 1e-5).
struct AdamConfig {
  double beta_1 = 0.9;
  double beta_2 = 0.999;
  double epsilon = 1e-8;
  double weight_decay = 0.0;
  std::optional<GradientClipping> grad_clipping = std::nullopt;
};
class TENSOR_API Adam final : public Optimizer {
 public:
  explicit Adam(AdamConfig config = {});
  ~Adam() override;

 private:
  Tensor<1> update(double lr, const ParamId& id, const Tensor<1>& p, const Tensor<1>& g) override;
  const char* name() const override { return "Adam::step"; }
  Moments moments() const override { return {.a = true, .b = true, .b_nonnegative = true}; }
  AdamConfig config_;
};

/// AdamW: p *= (1 - lr * weight_decay) (decoupled), then the Adam update without L2.
struct AdamWConfig {
  double beta_1 = 0.9;
  double beta_2 = 0.999;
  double epsilon = 1e-8;
  double weight_decay = 1e-2;
  std::optional<GradientClipping> grad_clipping = std::nullopt;
};
class TENSOR_API AdamW final : public Optimizer {
 public:
  explicit AdamW(AdamWConfig config = {});
  ~AdamW() override;

 private:
  Tensor<1> update(double lr, const ParamId& id, const Tensor<1>& p, const Tensor<1>& g) override;
  const char* name() const override { return "AdamW::step"; }
  Moments moments() const override { return {.a = true, .b = true, .b_nonnegative = true}; }
  AdamWConfig config_;
};

// ---- learning-rate schedules (burn's LrScheduler: step() returns the rate for this
/// iteration and advances). iteration() / set_iteration() save and restore the position,
/// so a resumed run continues the schedule.
class TENSOR_API LrScheduler {
 public:
  virtual ~LrScheduler();
  double step() { return lr_at(iteration_++); }
  virtual double lr_at(std::size_t iteration) const = 0;
  std::size_t iteration() const { return iteration_; }
  void set_iteration(std::size_t i) { iteration_ = i; }

 private:
  std::size_t iteration_ = 0;
};

class TENSOR_API ConstantLr final : public LrScheduler {
 public:
  explicit ConstantLr(double lr);
  ~ConstantLr() override;
  double lr_at(std::size_t) const override { return lr_; }

 private:
  double lr_;
};

/// lr * gamma^(iteration / step_size) (integer division); step_size >= 1.
class TENSOR_API StepLr final : public LrScheduler {
 public:
  StepLr(double initial_lr, std::size_t step_size, double gamma = 0.1);
  ~StepLr() override;
  double lr_at(std::size_t iteration) const override;

 private:
  double initial_lr_;
  std::size_t step_size_;
  double gamma_;
};

/// Linear warm-up from 0 over `warmup` iterations (iteration i < warmup gives
/// initial_lr * (i + 1) / warmup), then cosine annealing from initial_lr to min_lr over
/// the remaining num_iters - warmup iterations; min_lr after num_iters.
class TENSOR_API CosineLr final : public LrScheduler {
 public:
  CosineLr(double initial_lr, std::size_t num_iters, std::size_t warmup = 0, double min_lr = 0.0);
  ~CosineLr() override;
  double lr_at(std::size_t iteration) const override;

 private:
  double initial_lr_;
  std::size_t num_iters_, warmup_;
  double min_lr_;
};

template <std::size_t D>
Tensor<D> GradientClipping::clip(const Tensor<D>& grad) const {
  std::array<std::int64_t, D> dims{};
  for (std::size_t i = 0; i < D; ++i) dims[i] = static_cast<std::int64_t>(grad.shape()[i]);
  return clip(grad.template reshape<1>(std::array<std::int64_t, 1>{-1})).template reshape<D>(dims);
}

}  // namespace tensor::optim
