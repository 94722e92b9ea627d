// Optimizers, gradient clipping and learning-rate schedules (tensor/optim.hpp): written
// against the public Tensor API only, so every device runs them.
#include "tensor/optim.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numbers>

#include "tensor/graph.hpp"

namespace tensor::optim {

namespace {
Tensor<1> scaled(const Tensor<1>& t, double s) { return s == 1.0 ? t : t.mul_scalar(Scalar(s)); }
}  // namespace

GradientClipping GradientClipping::value(double threshold) {
  if (!(threshold > 0.0))
    throw ShapeError(fmt::format("[GradientClipping::value] threshold must be positive; expected > 0; got {}", threshold));
  return GradientClipping(false, threshold);
}

GradientClipping GradientClipping::norm(double max_norm) {
  if (!(max_norm > 0.0))
    throw ShapeError(fmt::format("[GradientClipping::norm] max_norm must be positive; expected > 0; got {}", max_norm));
  return GradientClipping(true, max_norm);
}

Tensor<1> GradientClipping::clip(const Tensor<1>& grad) const {
  if (!by_norm_) return grad.clamp(Scalar(-threshold_), Scalar(threshold_));
  // coef = min(1, c / (||g|| + 1e-6)), computed on the device (no host round trip).
  const Tensor<1> norm = grad.square().sum().sqrt();
  const Tensor<1> coef = norm.add_scalar(Scalar(1e-6)).recip().mul_scalar(Scalar(threshold_)).clamp_max(Scalar(1.0));
  return grad.mul(coef.expand(std::array<std::int64_t, 1>{static_cast<std::int64_t>(grad.shape()[0])}));
}

Optimizer::~Optimizer() = default;

std::size_t Optimizer::steps(const ParamId& id) const {
  const auto it = state_.find(id);
  return it == state_.end() ? 0 : it->second.t;
}

void Optimizer::check(const ParamId& id, const Shape& p, const Shape& g, const Device& pd, const Device& gd) const {
  if (p != g)
    throw ShapeError(fmt::format("[{}] gradient shape of parameter '{}' differs from the parameter's; expected {}; got {}", name(),
                                 id, p.to_string(), g.to_string()));
  if (pd != gd)
    throw DeviceError(DeviceError::Kind::Mismatch,
                      fmt::format("[{}] gradient of parameter '{}' is on another device; expected {}; got {}", name(), id,
                                  pd.to_string(), gd.to_string()));
}

void Optimizer::check_state(const ParamId& id, std::size_t n, DType dtype) const {
  const auto it = state_.find(id);
  if (it == state_.end()) return;
  for (const auto* t : {&it->second.a, &it->second.b}) {
    if (*t && (*t)->num_elements() != n)
      throw ShapeError(fmt::format("[{}] the optimizer state of parameter '{}' does not fit it (a loaded record of another model?); "
                                   "expected {} elements; got {}", name(), id, n, (*t)->num_elements()));
    if (*t && (*t)->dtype() != dtype)
      throw DTypeError(fmt::format("[{}] the optimizer state of parameter '{}' has another dtype than the parameter (a loaded "
                                   "record of another model?); expected {}; got {}", name(), id, dtype_name(dtype),
                                   dtype_name((*t)->dtype())));
  }
}

void Optimizer::set_graph_mode(const Device& device) {
  GraphParams gp;
  for (auto& v : gp.v) v = Tensor<1>::zeros({1}, device);
  for (const auto& [id, st] : state_) gp.t = std::max(gp.t, st.t);
  graph_ = std::move(gp);
}

void Optimizer::prepare_step(double lr) {
  if (!graph_)
    throw Error(fmt::format("[{}] prepare_step is graph mode's; expected set_graph_mode() first; got an optimizer in eager mode",
                            name()));
  if (detail::graph_capturing())
    throw GraphCaptureError(fmt::format("[graph_capture] {} prepare_step writes the step's rate into device tensors; expected it "
                                        "before capture() and before each replay(); got it inside capture()", name()));
  GraphParams& g = *graph_;
  const std::size_t t = g.t + 1;
  const std::array<double, 3> vals = step_values(lr, t);
  const DType dt = g.v[0]->dtype();
  const Device dev = g.v[0]->device();
  for (std::size_t k = 0; k < vals.size(); ++k)
    g.v[k]->copy_from(Tensor<1>::from_data(TensorData::from<double>({vals[k]}, Shape{1}).convert(dt), dev));
  g.t = t;
  g.lr = lr;
  g.prepared = true;
  for (auto& [id, st] : state_) st.t = t;  // every parameter takes this step (a replay runs no host code)
}

void Optimizer::check_graph(double lr, const ParamId& id, DType dtype) const {
  if (!graph_->prepared)
    throw Error(fmt::format("[{}] graph mode reads the step's rate from prepare_step(); expected prepare_step(lr) before the first "
                            "step; got none", name()));
  if (lr != graph_->lr)
    throw Error(fmt::format("[{}] graph mode reads the rate prepare_step() wrote; expected lr {}; got {} for parameter '{}'",
                            name(), graph_->lr, lr, id));
  if (dtype != graph_->v[0]->dtype())
    throw DTypeError(fmt::format("[{}] graph mode keeps its per-step values in the device's default float dtype; expected a {} "
                                 "parameter; got {} for '{}'", name(), dtype_name(graph_->v[0]->dtype()), dtype_name(dtype), id));
}

Tensor<1> Optimizer::graph_value(std::size_t k, std::size_t n) const {
  return graph_->v[k]->expand(std::array<std::int64_t, 1>{static_cast<std::int64_t>(n)});
}

Tensor<1> Optimizer::new_state(const Tensor<1>& like) const {
  if (detail::graph_capturing())
    throw GraphCaptureError(fmt::format("[graph_capture] {} makes a parameter's state on its first step in graph mode; expected "
                                        "one eager step before capture(); got the first step inside capture()", name()));
  return like.zeros_like();
}

void Optimizer::write(const detail::Handle& dst, const detail::Handle& src) { detail::graph_write(dst, src); }

io::NamedTensors Optimizer::to_record() const {
  io::NamedTensors out;
  for (const auto& [id, s] : state_) {
    out.emplace_back(id + ".step", TensorData::from(std::vector<std::int64_t>{static_cast<std::int64_t>(s.t)}));
    if (s.a) out.emplace_back(id + ".a", s.a->into_data());
    if (s.b) out.emplace_back(id + ".b", s.b->into_data());
  }
  return out;
}

void Optimizer::load_record(const io::NamedTensors& record, Device device) {
  const Moments keeps = moments();
  std::map<ParamId, State> next;
  std::map<ParamId, bool> has_step;
  for (const auto& [name, data] : record) {
    const std::size_t dot = name.rfind('.');
    const std::string field = dot == std::string::npos ? std::string() : name.substr(dot + 1);
    if (field != "step" && field != "a" && field != "b")
      throw ShapeError(fmt::format("[{}] record entry '{}' is not optimizer state; expected '<id>.step', '<id>.a' or '<id>.b'; got '{}'",
                                   "load_record", name, name));
    const ParamId id = name.substr(0, dot);
    State& s = next[id];
    if (field == "step") {
      if (data.dtype() != DType::I64 || data.num_elements() != 1)
        throw DTypeError(fmt::format("[load_record] '{}' must be one i64; expected i64 [1]; got {} {}", name, dtype_name(data.dtype()),
                                     data.shape().to_string()));
      const std::int64_t t = data.to_vec<std::int64_t>()[0];
      // A negative count would wrap to a huge one and Adam's bias correction 1 - beta^t to 0.
      if (t < 0)
        throw ShapeError(fmt::format("[load_record] '{}' is a negative step count; expected a count >= 0; got {}", name, t));
      s.t = static_cast<std::size_t>(t);
      has_step[id] = true;
      continue;
    }
    if (!(field == "a" ? keeps.a : keeps.b))
      throw ShapeError(fmt::format("[load_record] record entry '{}' is a moment {} does not keep (a record of another optimizer?); "
                                   "expected {}; got '{}'", name, this->name(),
                                   keeps.a ? (keeps.b ? "'<id>.a' and '<id>.b'" : "'<id>.a' only") : "no moments", name));
    if (!is_float(data.dtype()))
      throw DTypeError(fmt::format("[load_record] '{}' must be a float tensor; expected a float dtype; got {}", name,
                                   dtype_name(data.dtype())));
    // One NaN or infinity in a moment, or a negative mean of squares under a square root,
    // poisons every later update of the parameter.
    const std::vector<double> v = data.convert(DType::F64).to_vec<double>();
    for (std::size_t i = 0; i < v.size(); ++i) {
      if (!std::isfinite(v[i]) || (field == "b" && keeps.b_nonnegative && v[i] < 0.0))
        throw ShapeError(fmt::format("[load_record] '{}' holds a value no update can start from; expected finite values{}; "
                                     "got {} at element {}", name, field == "b" && keeps.b_nonnegative ? " >= 0" : "", v[i], i));
    }
    TensorData flat(data.bytes(), Shape{data.num_elements()}, data.dtype());
    (field == "a" ? s.a : s.b) = Tensor<1>::from_data(std::move(flat), device);
  }
  for (const auto& [id, s] : next) {
    if (!has_step[id])
      throw ShapeError(fmt::format("[load_record] the record has moments of '{}' but no step count; expected '{}.step'; got none", id, id));
    // update() reads every moment it keeps once one exists or a step was taken.
    const bool some = s.a || s.b, all = s.a.has_value() == keeps.a && s.b.has_value() == keeps.b;
    if ((some || s.t > 0) && !all)
      throw ShapeError(fmt::format("[load_record] the state of '{}' lacks a moment {} keeps (step {}); expected {}; got {}", id,
                                   name(), s.t,
                                   keeps.b ? fmt::format("'{0}.a' and '{0}.b'", id) : fmt::format("'{}.a'", id),
                                   s.a ? fmt::format("'{}.a' only", id) : s.b ? fmt::format("'{}.b' only", id) : std::string("neither")));
  }
  state_ = std::move(next);
  if (graph_) {  // graph mode continues from the loaded step count
    graph_->t = 0;
    for (const auto& [id, st] : state_) graph_->t = std::max(graph_->t, st.t);
  }
}

Sgd::Sgd(SgdConfig config) : Optimizer(config.grad_clipping), config_(config) {
  if (config.nesterov && (config.momentum <= 0.0 || config.dampening != 0.0))
    throw ShapeError(fmt::format("[Sgd] nesterov needs momentum > 0 and dampening 0; expected momentum > 0, dampening 0; "
                                 "got momentum {}, dampening {}", config.momentum, config.dampening));
}
Sgd::~Sgd() = default;

Tensor<1> Sgd::update(double lr, const ParamId& id, const Tensor<1>& p, const Tensor<1>& grad) {
  State& s = state(id);
  Tensor<1> g = config_.weight_decay != 0.0 ? grad.add(p.mul_scalar(Scalar(config_.weight_decay))) : grad;
  if (graph_mode()) {  // in place, the rate from the device (graph_value 0)
    if (config_.momentum != 0.0) {
      if (!s.a) {
        s.a = new_state(p);
        write(s.a->handle(), g.handle());
      } else {
        write(s.a->handle(), s.a->mul_scalar(Scalar(config_.momentum)).add(scaled(g, 1.0 - config_.dampening)).handle());
      }
      g = config_.nesterov ? g.add(s.a->mul_scalar(Scalar(config_.momentum))) : *s.a;
    }
    s.t = graph_step();
    return p.sub(g.mul(graph_value(0, p.shape()[0])));
  }
  if (config_.momentum != 0.0) {
    if (s.t == 0) s.a = g;
    else s.a = s.a->mul_scalar(Scalar(config_.momentum)).add(scaled(g, 1.0 - config_.dampening));
    g = config_.nesterov ? g.add(s.a->mul_scalar(Scalar(config_.momentum))) : *s.a;
  }
  ++s.t;
  return p.sub(g.mul_scalar(Scalar(lr)));
}

namespace {
// The bias-corrected Adam step lr * m_hat / (sqrt(v_hat) + eps), updating the moments.
Tensor<1> adam_delta(double lr, double b1, double b2, double eps, std::size_t t, std::optional<Tensor<1>>& m,
                     std::optional<Tensor<1>>& v, const Tensor<1>& g) {
  if (!m) {
    m = g.mul_scalar(Scalar(1.0 - b1));
    v = g.square().mul_scalar(Scalar(1.0 - b2));
  } else {
    m = m->mul_scalar(Scalar(b1)).add(g.mul_scalar(Scalar(1.0 - b1)));
    v = v->mul_scalar(Scalar(b2)).add(g.square().mul_scalar(Scalar(1.0 - b2)));
  }
  const double c1 = 1.0 - std::pow(b1, static_cast<double>(t));
  const double c2 = 1.0 - std::pow(b2, static_cast<double>(t));
  const Tensor<1> denom = v->mul_scalar(Scalar(1.0 / c2)).sqrt().add_scalar(Scalar(eps));
  return m->mul_scalar(Scalar(lr / c1)).div(denom);
}

// Graph mode's Adam step: the moments updated in place; step_size = lr / (1 - b1^t) and
// inv_c2 = 1 / (1 - b2^t) are device values (Optimizer::graph_value).
Tensor<1> adam_graph_delta(double b1, double b2, double eps, Tensor<1>& m, Tensor<1>& v, const Tensor<1>& g,
                           const Tensor<1>& step_size, const Tensor<1>& inv_c2) {
  detail::graph_write(m.handle(), m.mul_scalar(Scalar(b1)).add(g.mul_scalar(Scalar(1.0 - b1))).handle());
  detail::graph_write(v.handle(), v.mul_scalar(Scalar(b2)).add(g.square().mul_scalar(Scalar(1.0 - b2))).handle());
  const Tensor<1> denom = v.mul(inv_c2).sqrt().add_scalar(Scalar(eps));
  return m.mul(step_size).div(denom);
}

std::array<double, 3> adam_values(double lr, double b1, double b2, std::size_t t) {
  return {lr / (1.0 - std::pow(b1, static_cast<double>(t))), 1.0 / (1.0 - std::pow(b2, static_cast<double>(t))), 0.0};
}

void check_betas(const char* op, double b1, double b2, double eps) {
  if (!(b1 >= 0.0 && b1 < 1.0 && b2 >= 0.0 && b2 < 1.0 && eps >= 0.0))
    throw ShapeError(fmt::format("[{}] betas must lie in [0, 1) and epsilon be >= 0; expected beta_1, beta_2 in [0, 1), epsilon >= 0; "
                                 "got {}, {}, {}", op, b1, b2, eps));
}
}  // namespace

Adam::Adam(AdamConfig config) : Optimizer(config.grad_clipping), config_(config) {
  check_betas("Adam", config.beta_1, config.beta_2, config.epsilon);
}
Adam::~Adam() = default;

std::array<double, 3> Adam::step_values(double lr, std::size_t t) const {
  return adam_values(lr, config_.beta_1, config_.beta_2, t);
}

Tensor<1> Adam::update(double lr, const ParamId& id, const Tensor<1>& p, const Tensor<1>& grad) {
  State& s = state(id);
  const Tensor<1> g = config_.weight_decay != 0.0 ? grad.add(p.mul_scalar(Scalar(config_.weight_decay))) : grad;
  if (graph_mode()) {
    if (!s.a) {
      s.a = new_state(p);
      s.b = new_state(p);
    }
    s.t = graph_step();
    const std::size_t n = p.shape()[0];
    return p.sub(adam_graph_delta(config_.beta_1, config_.beta_2, config_.epsilon, *s.a, *s.b, g, graph_value(0, n),
                                  graph_value(1, n)));
  }
  ++s.t;
  return p.sub(adam_delta(lr, config_.beta_1, config_.beta_2, config_.epsilon, s.t, s.a, s.b, g));
}

AdamW::AdamW(AdamWConfig config) : Optimizer(config.grad_clipping), config_(config) {
  check_betas("AdamW", config.beta_1, config.beta_2, config.epsilon);
}
AdamW::~AdamW() = default;

std::array<double, 3> AdamW::step_values(double lr, std::size_t t) const {
  std::array<double, 3> v = adam_values(lr, config_.beta_1, config_.beta_2, t);
  v[2] = 1.0 - lr * config_.weight_decay;
  return v;
}

Tensor<1> AdamW::update(double lr, const ParamId& id, const Tensor<1>& p, const Tensor<1>& g) {
  State& s = state(id);
  if (graph_mode()) {
    if (!s.a) {
      s.a = new_state(p);
      s.b = new_state(p);
    }
    s.t = graph_step();
    const std::size_t n = p.shape()[0];
    const Tensor<1> decayed = p.mul(graph_value(2, n));
    return decayed.sub(adam_graph_delta(config_.beta_1, config_.beta_2, config_.epsilon, *s.a, *s.b, g, graph_value(0, n),
                                        graph_value(1, n)));
  }
  ++s.t;
  const Tensor<1> decayed = scaled(p, 1.0 - lr * config_.weight_decay);
  return decayed.sub(adam_delta(lr, config_.beta_1, config_.beta_2, config_.epsilon, s.t, s.a, s.b, g));
}

LrScheduler::~LrScheduler() = default;

ConstantLr::ConstantLr(double lr) : lr_(lr) {}
ConstantLr::~ConstantLr() = default;

StepLr::StepLr(double initial_lr, std::size_t step_size, double gamma)
    : initial_lr_(initial_lr), step_size_(step_size), gamma_(gamma) {
  if (step_size == 0) throw ShapeError("[StepLr] step_size must be at least 1; expected >= 1; got 0");
}
StepLr::~StepLr() = default;
double StepLr::lr_at(std::size_t iteration) const {
  return initial_lr_ * std::pow(gamma_, static_cast<double>(iteration / step_size_));
}

CosineLr::CosineLr(double initial_lr, std::size_t num_iters, std::size_t warmup, double min_lr)
    : initial_lr_(initial_lr), num_iters_(num_iters), warmup_(warmup), min_lr_(min_lr) {
  if (warmup > num_iters)
    throw ShapeError(fmt::format("[CosineLr] warm-up longer than the schedule; expected warmup <= num_iters ({}); got {}", num_iters,
                                 warmup));
}
CosineLr::~CosineLr() = default;
double CosineLr::lr_at(std::size_t i) const {
  if (i < warmup_) return initial_lr_ * static_cast<double>(i + 1) / static_cast<double>(warmup_);
  if (i >= num_iters_) return min_lr_;
  const double span = static_cast<double>(num_iters_ - warmup_);
  const double x = static_cast<double>(i - warmup_) / span;
  return min_lr_ + 0.5 * (initial_lr_ - min_lr_) * (1.0 + std::cos(std::numbers::pi * x));
}

}  // namespace tensor::optim
