// Optimizers, gradient clipping and learning-rate schedules (tensor::optim), after
// burn-optim: Sgd (momentum, dampening, Nesterov, L2 weight decay), Adam, AdamW
// (decoupled weight decay), GradientClipping::value / ::norm, ConstantLr, StepLr and
// CosineLr (cosine annealing after a linear warm-up).
//
// Updates go through the public Tensor API only, so they run on every device and
// dtype-follow the parameter (state tensors live on the parameter's device with its dtype).
// State (momentum buffers, Adam moments, step counts) is kept per ParamId.
//
// A step takes the gradient explicitly:
//   param = opt.step(lr, "fc1.weight", param, grad);
// Over a whole module, tensor/modules/optim.hpp's ModuleOptimizer walks the parameters and
// calls step(lr, name, param, grad) for each one that has a gradient in autodiff's Gradients,
// with the parameter's dotted name as its ParamId. Parameters are returned, not modified in
// place (tensors are immutable values); the caller stores the result back into its module.
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

/// Optimizers (burn-optim's): Sgd, Adam, AdamW, gradient clipping, learning-rate schedules,
/// and (tensor/modules/optim.hpp) ModuleOptimizer and module + optimizer checkpoints.
namespace tensor::optim {

/// A parameter's identity (burn's ParamId): the key of its optimizer state.
using ParamId = std::string;

/// burn's GradientClippingConfig: Value(c) clamps each gradient element to [-c, c];
/// Norm(c) scales a gradient whose L2 norm exceeds c by c / (norm + 1e-6) (per parameter,
/// as burn does; not one global norm over all parameters).
class TENSOR_API GradientClipping {
 public:
  /// Value(threshold); ShapeError unless threshold > 0.
  static GradientClipping value(double threshold);
  /// Norm(max_norm); ShapeError unless max_norm > 0.
  static GradientClipping norm(double max_norm);
  ///@{
  /// The clipped gradient, of grad's shape, dtype and device (the norm over all of it).
  Tensor<1> clip(const Tensor<1>& grad) const;
  template <std::size_t D>
  Tensor<D> clip(const Tensor<D>& grad) const;
  ///@}

  /// True for Norm, false for Value.
  bool by_norm() const { return by_norm_; }
  /// The threshold c (Value's bound or Norm's max_norm).
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
  /// they live on different devices, ShapeError / DTypeError when the parameter's state (a
  /// loaded record's) has another size / dtype than the parameter.
  template <std::size_t D>
  Tensor<D> step(double lr, const ParamId& id, const Tensor<D>& param, const Tensor<D>& grad) {
    check(id, param.shape(), grad.shape(), param.device(), grad.device());
    std::array<std::int64_t, D> dims{};
    for (std::size_t i = 0; i < D; ++i) dims[i] = static_cast<std::int64_t>(param.shape()[i]);
    const std::array<std::int64_t, 1> flat{-1};
    Tensor<1> g = grad.template reshape<1>(flat);
    check_state(id, param.num_elements(), param.dtype());
    if (graph_) check_graph(lr, id, param.dtype());
    if (clipping_) g = clipping_->clip(g);
    Tensor<D> next = update(lr, id, param.template reshape<1>(flat), g).template reshape<D>(dims);
    if (!graph_) return next;
    write(param.handle(), next.handle());
    return param;
  }

  /// Graph mode (issue 28; PyTorch's capturable=True), for a training step captured with
  /// tensor/graph.hpp's capture() and replayed: the parameter and the state (momentum buffer,
  /// moments) are updated in place, in the buffers they have (step() returns the parameter it
  /// was given, its values overwritten), and the per-step values (the rate; Adam's bias
  /// corrections, which depend on the step count) are read from small tensors on `device`
  /// (the device step() sees the parameters on) that prepare_step() refreshes. A replayed
  /// step therefore takes each step's rate and count, not the ones frozen at capture. The
  /// first step of a parameter in graph mode makes its state: take it before capture()
  /// (GraphCaptureError inside). Parameters must have the device's default float dtype.
  void set_graph_mode(const Device& device);
  /// Whether set_graph_mode() was called.
  bool graph_mode() const { return graph_.has_value(); }
  /// Graph mode: call before every step, eager or replayed, outside capture(): advances
  /// the step count and writes the step's rate and bias corrections into the device
  /// tensors. Every step() until the next prepare_step() must pass this `lr` (Error
  /// otherwise). Error when not in graph mode.
  void prepare_step(double lr);

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
  ///@{
  io::NamedTensors to_record() const;
  void load_record(const io::NamedTensors& record, Device device = Device::default_device());
  ///@}

 protected:
  /// `clipping`, when given, is applied to every gradient before the update rule.
  explicit Optimizer(std::optional<GradientClipping> clipping) : clipping_(clipping) {}
  /// One parameter's state.
  struct State {
    std::size_t t = 0;                   ///< steps taken
    ///@{
    /// The momentum buffer / Adam's first and second moments (flat, the parameter's dtype).
    std::optional<Tensor<1>> a, b;
    ///@}
  };
  /// The rule: the new flat parameter from p and the (clipped) gradient g, both rank 1 of one
  /// size, updating state(id).
  virtual Tensor<1> update(double lr, const ParamId& id, const Tensor<1>& p, const Tensor<1>& g) = 0;
  /// The state of `id`, created empty on first use.
  State& state(const ParamId& id) { return state_[id]; }
  /// The name error messages start with ("Adam::step").
  virtual const char* name() const = 0;
  /// The moments this optimizer keeps once it has taken a step, which load_record requires
  /// (a record missing one would have update() read an absent moment); `b_nonnegative`: b is
  /// a running mean of squares (its square root is taken). The default keeps none.
  struct Moments {
    ///@{
    /// Whether a / b is kept, and whether b must be >= 0.
    bool a = false, b = false, b_nonnegative = false;
    ///@}
  };
  /// This optimizer's Moments (see the struct).
  virtual Moments moments() const { return {}; }

  /// Graph mode's per-step values at step `t` (1-based) with rate `lr`, what the rule's
  /// graph-mode update reads through graph_value(k): the default is {lr, 0, 0}.
  virtual std::array<double, 3> step_values(double lr, std::size_t /*t*/) const { return {lr, 0.0, 0.0}; }
  /// Graph mode: per-step value k (step_values) as `n` elements on the device (a broadcast
  /// of its one-element tensor).
  Tensor<1> graph_value(std::size_t k, std::size_t n) const;
  /// Graph mode: the step count prepare_step() set.
  std::size_t graph_step() const { return graph_ ? graph_->t : 0; }
  /// Graph mode: makes a parameter's state (zeros of n elements on `like`'s device and
  /// dtype); GraphCaptureError inside capture() (state made there would not persist).
  Tensor<1> new_state(const Tensor<1>& like) const;
  /// Graph mode: src's values written into dst's buffer (recorded inside capture()).
  static void write(const detail::Handle& dst, const detail::Handle& src);

 private:
  void check(const ParamId& id, const Shape& p, const Shape& g, const Device& pd, const Device& gd) const;
  void check_state(const ParamId& id, std::size_t n, DType dtype) const;
  void check_graph(double lr, const ParamId& id, DType dtype) const;
  /// Graph mode's device tensors and the host values last written into them.
  struct GraphParams {
    std::array<std::optional<Tensor<1>>, 3> v;  ///< step_values() as one-element tensors
    std::size_t t = 0;  ///< the step count (of the step about to run)
    double lr = 0.0;  ///< the rate of that step
    bool prepared = false;  ///< prepare_step() was called
  };
  std::optional<GradientClipping> clipping_;
  std::map<ParamId, State> state_;
  std::optional<GraphParams> graph_;
};

/// SGD as PyTorch and burn define it: g += weight_decay * p; with momentum mu,
/// buf = g on the first step, then buf = mu * buf + (1 - dampening) * g; the step uses
/// g + mu * buf (nesterov) or buf; p -= lr * step.
struct SgdConfig {
  double momentum = 0.0;  ///< mu; 0: no momentum buffer
  double dampening = 0.0;  ///< the dampening of the buffer's update
  bool nesterov = false;  ///< Nesterov momentum (needs momentum > 0 and dampening 0)
  double weight_decay = 0.0;  ///< L2: added to the gradient times p
  std::optional<GradientClipping> grad_clipping = std::nullopt;  ///< applied to each gradient first; empty: none
};
/// SGD (see SgdConfig); state: the momentum buffer "a" when momentum != 0.
class TENSOR_API Sgd final : public Optimizer {
 public:
  /// ShapeError when nesterov is set without momentum > 0 and dampening 0.
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
  double beta_1 = 0.9;  ///< b1, the first moment's decay, in [0, 1)
  double beta_2 = 0.999;  ///< b2, the second moment's decay, in [0, 1)
  double epsilon = 1e-8;  ///< added to the denominator; >= 0
  double weight_decay = 0.0;  ///< L2, coupled: added to the gradient times p
  std::optional<GradientClipping> grad_clipping = std::nullopt;  ///< applied to each gradient first; empty: none
};
/// Adam (see AdamConfig); state: the moments "a" (m) and "b" (v).
class TENSOR_API Adam final : public Optimizer {
 public:
  /// ShapeError when a beta is outside [0, 1) or epsilon is negative.
  explicit Adam(AdamConfig config = {});
  ~Adam() override;

 private:
  Tensor<1> update(double lr, const ParamId& id, const Tensor<1>& p, const Tensor<1>& g) override;
  const char* name() const override { return "Adam::step"; }
  Moments moments() const override { return {.a = true, .b = true, .b_nonnegative = true}; }
  std::array<double, 3> step_values(double lr, std::size_t t) const override;
  AdamConfig config_;
};

/// AdamW: p *= (1 - lr * weight_decay) (decoupled), then the Adam update without L2.
struct AdamWConfig {
  double beta_1 = 0.9;  ///< b1, the first moment's decay, in [0, 1)
  double beta_2 = 0.999;  ///< b2, the second moment's decay, in [0, 1)
  double epsilon = 1e-8;  ///< added to the denominator; >= 0
  double weight_decay = 1e-2;  ///< decoupled: p shrinks by lr * weight_decay
  std::optional<GradientClipping> grad_clipping = std::nullopt;  ///< applied to each gradient first; empty: none
};
/// AdamW (see AdamWConfig); state as Adam's.
class TENSOR_API AdamW final : public Optimizer {
 public:
  /// ShapeError when a beta is outside [0, 1) or epsilon is negative.
  explicit AdamW(AdamWConfig config = {});
  ~AdamW() override;

 private:
  Tensor<1> update(double lr, const ParamId& id, const Tensor<1>& p, const Tensor<1>& g) override;
  const char* name() const override { return "AdamW::step"; }
  Moments moments() const override { return {.a = true, .b = true, .b_nonnegative = true}; }
  std::array<double, 3> step_values(double lr, std::size_t t) const override;
  AdamWConfig config_;
};

// ---- learning-rate schedules ----------------------------------------------------------
/// burn's LrScheduler: step() returns the rate for this iteration and advances.
/// iteration() / set_iteration() save and restore the position, so a resumed run continues
/// the schedule.
class TENSOR_API LrScheduler {
 public:
  virtual ~LrScheduler();
  /// lr_at(iteration()), then the iteration advances by one.
  double step() { return lr_at(iteration_++); }
  /// The rate at `iteration` (0-based), without moving the position.
  virtual double lr_at(std::size_t iteration) const = 0;
  /// The position: the number of step() calls so far (or what set_iteration() set).
  std::size_t iteration() const { return iteration_; }
  /// Moves the position to `i` (a resumed run's iteration()).
  void set_iteration(std::size_t i) { iteration_ = i; }

 private:
  std::size_t iteration_ = 0;
};

/// The same rate at every iteration.
class TENSOR_API ConstantLr final : public LrScheduler {
 public:
  /// Always `lr`.
  explicit ConstantLr(double lr);
  ~ConstantLr() override;
  /// `lr`, whatever the iteration.
  double lr_at(std::size_t) const override { return lr_; }

 private:
  double lr_;
};

/// lr * gamma^(iteration / step_size) (integer division); step_size >= 1.
class TENSOR_API StepLr final : public LrScheduler {
 public:
  /// ShapeError when step_size is 0.
  StepLr(double initial_lr, std::size_t step_size, double gamma = 0.1);
  ~StepLr() override;
  /// initial_lr * gamma^(iteration / step_size).
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
  /// ShapeError when warmup > num_iters.
  CosineLr(double initial_lr, std::size_t num_iters, std::size_t warmup = 0, double min_lr = 0.0);
  ~CosineLr() override;
  /// The warm-up / cosine / min_lr rate of the class comment at `iteration`.
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
