// The module base (tensor/module.hpp): walkers over visit(), device moves, checkpoints by
// name, Sequential and the initializers. Public API only: every tensor operation goes
// through Tensor / detail:: entries, as user code would.
#include "tensor/module.hpp"

#include <cmath>
#include <map>
#include <set>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "module_util.hpp"
#include "tensor/linalg.hpp"

namespace tensor {

using detail::Handle;

namespace modules {

Handle slot_handle(const TensorSlot& s) {
  return with_rank(s.rank, [&](auto r) -> Handle {
    constexpr std::size_t D = decltype(r)::value;
    return detail::copy(*static_cast<const Tensor<D>*>(s.tensor));
  });
}

void slot_set(const TensorSlot& s, Handle h) {
  with_rank(s.rank, [&](auto r) {
    constexpr std::size_t D = decltype(r)::value;
    *static_cast<Tensor<D>*>(s.tensor) = Tensor<D>(h);
  });
}

Handle on_device(Handle h, const Device& target, bool require_grad) {
  const Device src = detail::device(h);
  if (src == target) return h;
  if (src.is_autodiff()) h = detail::inner(std::move(h));
  const Device plain = target.is_autodiff() ? target.inner() : target;
  if (detail::device(h) != plain) h = detail::to_device(std::move(h), plain);
  if (target.is_autodiff()) {
    h = detail::to_device(std::move(h), target);
    if (require_grad) h = detail::set_require_grad(std::move(h), true);
  }
  return h;
}

void check_same_device(const char* module, const char* param, const Handle& x, const Handle& p) {
  const Device xd = detail::device(x), pd = detail::device(p);
  if (xd != pd)
    throw DeviceError(DeviceError::Kind::Mismatch, std::string("[") + module + "] input on another device than " + module +
                                                       "." + param + "; expected " + pd.to_string() + "; got " +
                                                       xd.to_string());
  const DType xt = detail::dtype(x), pt = detail::dtype(p);
  // A quantized parameter (QFloat) takes a float input of any float dtype: the op (linear,
  // conv) checks it and computes in the input's dtype.
  if (xt != pt && pt != DType::QFloat)
    throw DTypeError(std::string("[") + module + "] input dtype differs from " + module + "." + param + "'s; expected " +
                     std::string(dtype_name(pt)) + "; got " + std::string(dtype_name(xt)));
}

[[noreturn]] void shape_error(const char* module, const std::string& what, const std::string& expected,
                              const std::string& got) {
  throw ShapeError(std::string("[") + module + "] " + what + "; expected " + expected + "; got " + got);
}

}  // namespace modules

using modules::slot_handle;
using modules::slot_set;

// ---- AnyTensor, ParamRef -----------------------------------------------------------------

void AnyTensor::check(std::size_t rank, const char* who) const {
  if (h_.empty()) throw ShapeError(std::string("[") + who + "] no tensor; expected a tensor of rank " + std::to_string(rank) + "; got none");
  if (rank_ != rank)
    throw ShapeError(std::string("[") + who + "] rank mismatch; expected rank " + std::to_string(rank) + "; got rank " +
                     std::to_string(rank_) + " " + detail::shape(h_).to_string());
}

Shape ParamRef::shape() const {
  Handle h = slot_handle(slot);
  Shape s = detail::shape(h);
  detail::release(h);
  return s;
}
DType ParamRef::dtype() const {
  Handle h = slot_handle(slot);
  DType t = detail::dtype(h);
  detail::release(h);
  return t;
}
Device ParamRef::device() const {
  Handle h = slot_handle(slot);
  Device d = detail::device(h);
  detail::release(h);
  return d;
}
AnyTensor ParamRef::value() const {
  return modules::with_rank(slot.rank, [&](auto r) -> AnyTensor {
    constexpr std::size_t D = decltype(r)::value;
    return AnyTensor(*static_cast<const Tensor<D>*>(slot.tensor));
  });
}
void ParamRef::check_rank(std::size_t rank) const {
  if (rank != slot.rank)
    throw ShapeError("[ParamRef::get] " + name + " has another rank; expected rank " + std::to_string(slot.rank) + "; got rank " +
                     std::to_string(rank));
}

ModuleVisitor::~ModuleVisitor() = default;

// ---- walkers -------------------------------------------------------------------------------

namespace {

// Gathers ParamRefs with dotted names and the owning module's type.
class Gather final : public ModuleVisitor {
 public:
  Gather(Module& root, bool params, bool buffers) : params_(params), buffers_(buffers) { types_.push_back(root.type_name()); }
  std::vector<ParamRef> out;

 protected:
  void on_tensor(const std::string& name, TensorSlot slot, bool is_buffer) override {
    if (is_buffer ? !buffers_ : !params_) return;
    if (slot.rank < 1 || slot.rank > 5)
      throw ShapeError("[Module::visit] " + prefix_ + name + " has an unsupported rank; expected 1-5; got " + std::to_string(slot.rank));
    out.push_back(ParamRef{prefix_ + name, types_.back(), is_buffer, slot});
  }
  void on_module(const std::string& name, Module& m) override {
    const std::string saved = prefix_;
    prefix_ += name + ".";
    types_.push_back(m.type_name());
    m.visit(*this);
    types_.pop_back();
    prefix_ = saved;
  }

 private:
  bool params_, buffers_;
  std::string prefix_;
  std::vector<std::string> types_;
};

class TrainWalk final : public ModuleVisitor {
 public:
  explicit TrainWalk(bool on) : on_(on) {}

 protected:
  void on_tensor(const std::string&, TensorSlot, bool) override {}
  void on_module(const std::string&, Module& m) override { m.train(on_); }

 private:
  bool on_;
};

std::string where(const ParamRef& p) { return p.module_type + " " + (p.is_buffer ? "buffer " : "parameter ") + p.name; }

}  // namespace

Module::~Module() = default;

AnyTensor Module::forward_any(const AnyTensor&) {
  throw ShapeError(std::string("[Sequential] ") + type_name() +
                   " has no one-tensor forward; expected a module with forward_any; got " + type_name());
}

std::vector<ParamRef> Module::named_parameters() {
  Gather g(*this, true, false);
  visit(g);
  return std::move(g.out);
}
std::vector<ParamRef> Module::named_buffers() {
  Gather g(*this, false, true);
  visit(g);
  return std::move(g.out);
}
std::vector<ParamRef> Module::named_tensors() {
  Gather g(*this, true, true);
  visit(g);
  return std::move(g.out);
}
std::size_t Module::num_params() {
  std::size_t n = 0;
  for (const ParamRef& p : named_parameters()) n += p.num_elements();
  return n;
}

void Module::train(bool on) {
  set_training(on);
  TrainWalk w(on);
  visit(w);
}

void Module::to(const Device& device) {
  // Move everything first, then assign: a failed move leaves the module as it was.
  std::vector<ParamRef> all = named_tensors();
  std::vector<Handle> moved;
  moved.reserve(all.size());
  try {
    for (const ParamRef& p : all) moved.push_back(modules::on_device(slot_handle(p.slot), device, !p.is_buffer));
  } catch (...) {
    for (Handle& h : moved) detail::release(h);
    throw;
  }
  for (std::size_t i = 0; i < all.size(); ++i) slot_set(all[i].slot, moved[i]);
}

std::optional<Device> Module::device() {
  std::vector<ParamRef> all = named_tensors();
  if (all.empty()) return std::nullopt;
  return all.front().device();
}

io::NamedTensors Module::to_record() {
  io::NamedTensors out;
  for (const ParamRef& p : named_tensors()) {
    Handle h = slot_handle(p.slot);
    if (detail::device(h).is_autodiff()) h = detail::inner(std::move(h));
    out.emplace_back(p.name, modules::with_rank(p.slot.rank, [&](auto r) {
                       constexpr std::size_t D = decltype(r)::value;
                       return Tensor<D>(h).into_data();
                     }));
  }
  return out;
}

LoadReport Module::load_record(const io::NamedTensors& record, bool strict, const std::string& source) {
  std::vector<ParamRef> all = named_tensors();
  std::map<std::string, const TensorData*> by_name;
  for (const auto& [name, data] : record) by_name.emplace(name, &data);
  LoadReport report;
  std::vector<std::pair<const ParamRef*, const TensorData*>> todo;
  std::set<std::string> known;
  for (const ParamRef& p : all) {
    known.insert(p.name);
    auto it = by_name.find(p.name);
    if (it == by_name.end()) {
      report.missing.push_back(p.name);
      if (strict)
        throw FormatError(source, "[Module::load] " + where(p) + " is missing; expected " + p.name + " " +
                                      p.shape().to_string() + " in " + source + "; got none");
      continue;
    }
    const TensorData& d = *it->second;
    const Shape want = p.shape();
    const DType want_t = p.dtype();
    std::string why;
    if (d.shape() != want)
      why = "wrong shape; expected " + want.to_string() + "; got " + d.shape().to_string();
    // A quantized tensor loads into a float parameter (a quantized model saved by save()).
    else if (d.dtype() != want_t && !(d.dtype() == DType::QFloat && is_float(want_t)))
      why = "wrong dtype; expected " + std::string(dtype_name(want_t)) + "; got " + std::string(dtype_name(d.dtype()));
    if (!why.empty()) {
      report.mismatched.push_back(p.name + ": " + why);
      if (strict) throw FormatError(source, "[Module::load] " + where(p) + " in " + source + " has the " + why);
      continue;
    }
    todo.emplace_back(&p, &d);
  }
  for (const auto& [name, data] : record) {
    if (known.count(name)) continue;
    report.unexpected.push_back(name);
    if (strict)
      throw FormatError(source, "[Module::load] " + name + " in " + source + " is not a tensor of this " + type_name() +
                                    "; expected only the module's names; got " + name + " " + data.shape().to_string());
  }
  // Build every tensor, then assign: nothing is half-loaded when one fails.
  std::vector<Handle> made;
  made.reserve(todo.size());
  try {
    for (const auto& [p, d] : todo) {
      const Device dev = p->device();
      Handle h = detail::from_data(*d, dev.is_autodiff() ? dev.inner() : dev, detail::Kind::Float);
      made.push_back(modules::on_device(std::move(h), dev, !p->is_buffer));
    }
  } catch (...) {
    for (Handle& h : made) detail::release(h);
    throw;
  }
  for (std::size_t i = 0; i < todo.size(); ++i) slot_set(todo[i].first->slot, made[i]);
  return report;
}

void Module::save(const std::string& path, const std::map<std::string, std::string>& metadata) {
  io::save_safetensors(path, to_record(), metadata);
}

LoadReport Module::load(const std::string& path, bool strict) {
  io::SafetensorsFile f = io::load_safetensors(path);
  return load_record(f.tensors, strict, path);
}

// ---- Sequential ---------------------------------------------------------------------------

Sequential::~Sequential() = default;

void Sequential::visit(ModuleVisitor& v) {
  for (std::size_t i = 0; i < layers_.size(); ++i) v.module(std::to_string(i), *layers_[i]);
}

AnyTensor Sequential::forward_any(const AnyTensor& x) {
  AnyTensor h = x;
  for (auto& m : layers_) h = m->forward_any(h);
  return h;
}

// ---- initializers -------------------------------------------------------------------------

Initializer Initializer::module_default() { return kaiming_uniform(1.0 / std::sqrt(3.0)); }

namespace {

const char* init_name(Initializer::Kind k) {
  switch (k) {
    case Initializer::Kind::Constant: return "Initializer::constant";
    case Initializer::Kind::Ones: return "Initializer::ones";
    case Initializer::Kind::Zeros: return "Initializer::zeros";
    case Initializer::Kind::Uniform: return "Initializer::uniform";
    case Initializer::Kind::Normal: return "Initializer::normal";
    case Initializer::Kind::KaimingUniform: return "Initializer::kaiming_uniform";
    case Initializer::Kind::KaimingNormal: return "Initializer::kaiming_normal";
    case Initializer::Kind::XavierUniform: return "Initializer::xavier_uniform";
    case Initializer::Kind::XavierNormal: return "Initializer::xavier_normal";
    case Initializer::Kind::Orthogonal: return "Initializer::orthogonal";
  }
  return "Initializer";
}

std::size_t need_fan(const Initializer& i, const std::optional<std::size_t>& fan, const char* which) {
  if (!fan || *fan == 0)
    throw ShapeError(std::string("[") + init_name(i.kind) + "] needs the " + which + "; expected a positive " + which +
                     " (the module gives it); got " + (fan ? "0" : "none"));
  return *fan;
}

Handle orthogonal_draw(const Initializer& i, const Shape& shape, const Device& dev) {
  if (shape.rank() < 2 || shape.num_elements() == 0)
    throw ShapeError("[Initializer::orthogonal] needs a matrix; expected rank >= 2 and no zero dim; got " + shape.to_string());
  const std::size_t rows = shape[0], cols = shape.num_elements() / rows;
  Tensor<2> t = Tensor<2>::random(Shape{rows, cols}, Distribution::normal(0.0, 1.0), dev);
  if (rows < cols) t = t.transpose();
  auto [q, r] = linalg::qr(t, true);
  const std::size_t k = r.shape()[0];
  // The signs of R's diagonal, so that Q does not depend on the factorisation's sign choice.
  Tensor<2> diag = (r.slice({Slice::range(0, static_cast<std::int64_t>(k)), Slice::range(0, static_cast<std::int64_t>(k))}) *
                    Tensor<2>::eye(k, dev))
                       .sum_dim(0);
  Tensor<2> sign = diag.sign();
  sign = sign.mask_fill(sign.equal_elem(0.0), 1.0);
  q = q * sign;
  if (rows < cols) q = q.transpose();
  std::vector<std::int64_t> dims;
  for (std::size_t d = 0; d < shape.rank(); ++d) dims.push_back(static_cast<std::int64_t>(shape[d]));
  Tensor<2> scaled = q * i.a;
  return detail::reshape(OpCode::reshape, detail::copy(scaled), std::span<const std::int64_t>(dims.data(), dims.size()));
}

}  // namespace

Handle Initializer::init_handle(const Shape& shape, const Device& device, std::optional<std::size_t> fan_in,
                                std::optional<std::size_t> fan_out) const {
  const Device dev = device.is_autodiff() ? device.inner() : device;
  const auto F = detail::Kind::Float;
  Handle h;
  switch (kind) {
    case Kind::Constant: h = detail::full(shape, Scalar(a), dev, F, std::nullopt); break;
    case Kind::Ones: h = detail::create(OpCode::ones, shape, dev, F, std::nullopt); break;
    case Kind::Zeros: h = detail::create(OpCode::zeros, shape, dev, F, std::nullopt); break;
    case Kind::Uniform: h = detail::random(shape, Distribution::uniform(a, b), dev, F, std::nullopt); break;
    case Kind::Normal: h = detail::random(shape, Distribution::normal(a, b), dev, F, std::nullopt); break;
    case Kind::KaimingUniform:
    case Kind::KaimingNormal: {
      const std::size_t fan = fan_out_only ? need_fan(*this, fan_out, "fan_out") : need_fan(*this, fan_in, "fan_in");
      const double std = a / std::sqrt(static_cast<double>(fan));
      h = kind == Kind::KaimingUniform ? detail::random(shape, Distribution::uniform(-std::sqrt(3.0) * std, std::sqrt(3.0) * std), dev, F, std::nullopt)
                                       : detail::random(shape, Distribution::normal(0.0, std), dev, F, std::nullopt);
      break;
    }
    case Kind::XavierUniform:
    case Kind::XavierNormal: {
      const std::size_t fi = need_fan(*this, fan_in, "fan_in"), fo = need_fan(*this, fan_out, "fan_out");
      const double std = a * std::sqrt(2.0 / static_cast<double>(fi + fo));
      h = kind == Kind::XavierUniform ? detail::random(shape, Distribution::uniform(-std::sqrt(3.0) * std, std::sqrt(3.0) * std), dev, F, std::nullopt)
                                      : detail::random(shape, Distribution::normal(0.0, std), dev, F, std::nullopt);
      break;
    }
    case Kind::Orthogonal: h = orthogonal_draw(*this, shape, dev); break;
  }
  return modules::on_device(std::move(h), device, true);
}

}  // namespace tensor
