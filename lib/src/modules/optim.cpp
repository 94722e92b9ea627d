// Optimizers over modules (tensor/modules/optim.hpp): a step over every parameter with a
// gradient, parameter groups, and module + optimizer checkpoints.
#include "tensor/modules/optim.hpp"

#include <set>
#include <string>
#include <utility>

#include "module_util.hpp"
#include "tensor/distributed.hpp"

namespace tensor::optim {

bool is_norm_or_bias(const ParamRef& p) {
  auto ends_with = [&](const std::string& s) { return p.name.size() >= s.size() && p.name.compare(p.name.size() - s.size(), s.size(), s) == 0; };
  if (ends_with("bias") || ends_with("beta")) return true;
  const std::string& t = p.module_type;
  return t == "BatchNorm" || t == "LayerNorm" || t == "GroupNorm" || t == "InstanceNorm" || t == "RmsNorm";
}

ModuleOptimizer::ModuleOptimizer(std::unique_ptr<Optimizer> optimizer) : rest_(std::move(optimizer)) {
  if (!rest_) throw Error("[ModuleOptimizer] no optimizer; expected one; got a null pointer");
}
ModuleOptimizer::ModuleOptimizer(ModuleOptimizer&&) noexcept = default;
ModuleOptimizer& ModuleOptimizer::operator=(ModuleOptimizer&&) noexcept = default;
ModuleOptimizer::~ModuleOptimizer() = default;

ModuleOptimizer ModuleOptimizer::sgd(const SgdConfig& c, bool no_decay) {
  ModuleOptimizer m(std::make_unique<Sgd>(c));
  if (no_decay) {
    SgdConfig z = c;
    z.weight_decay = 0.0;
    m.add_group(is_norm_or_bias, std::make_unique<Sgd>(z));
  }
  return m;
}
ModuleOptimizer ModuleOptimizer::adam(const AdamConfig& c, bool no_decay) {
  ModuleOptimizer m(std::make_unique<Adam>(c));
  if (no_decay) {
    AdamConfig z = c;
    z.weight_decay = 0.0;
    m.add_group(is_norm_or_bias, std::make_unique<Adam>(z));
  }
  return m;
}
ModuleOptimizer ModuleOptimizer::adamw(const AdamWConfig& c, bool no_decay) {
  ModuleOptimizer m(std::make_unique<AdamW>(c));
  if (no_decay) {
    AdamWConfig z = c;
    z.weight_decay = 0.0;
    m.add_group(is_norm_or_bias, std::make_unique<AdamW>(z));
  }
  return m;
}

ModuleOptimizer& ModuleOptimizer::add_group(std::function<bool(const ParamRef&)> in_group, std::unique_ptr<Optimizer> optimizer) {
  if (!optimizer || !in_group) throw Error("[ModuleOptimizer::add_group] empty group; expected a predicate and an optimizer; got null");
  groups_.emplace_back(std::move(in_group), std::move(optimizer));
  return *this;
}

Optimizer& ModuleOptimizer::group_of(const ParamRef& p) {
  for (auto& [pred, opt] : groups_)
    if (pred(p)) return *opt;
  return *rest_;
}

std::size_t ModuleOptimizer::step(double lr, Module& module, const Gradients& grads) {
  std::vector<ParamRef> params = module.named_parameters();
  if (!params.empty() && !params.front().device().is_autodiff())
    throw DeviceError(DeviceError::Kind::Mismatch, std::string("[ModuleOptimizer::step] ") + module.type_name() + " parameter " +
                                                       params.front().name + " is not on an autodiff device; expected an autodiff device; got " +
                                                       params.front().device().to_string());
  // Compute every update first, then assign: a failing step leaves the module unchanged.
  std::vector<std::pair<const ParamRef*, detail::Handle>> updates;
  try {
    for (const ParamRef& p : params) {
      detail::Handle h = modules::slot_handle(p.slot);
      detail::Handle g = detail::grad(grads, h);
      if (g.empty()) {
        detail::release(h);
        continue;
      }
      Optimizer& opt = group_of(p);
      detail::Handle next = modules::with_rank(p.slot.rank, [&](auto r) {
        constexpr std::size_t D = decltype(r)::value;
        Tensor<D> param(h), grad(g);
        Tensor<D> stepped = opt.step(lr, p.name, param.inner(), grad);
        detail::Handle marked = detail::set_require_grad(detail::from_inner(detail::copy(stepped)), true);
        // The updated parameter keeps its set_distributed mark (burn: the optimizer re-marks).
        if (const std::uint64_t id = detail::distributed_id(h)) detail::set_distributed(marked, id);
        return marked;
      });
      updates.emplace_back(&p, next);
    }
  } catch (...) {
    for (auto& u : updates) detail::release(u.second);
    throw;
  }
  for (auto& [p, h] : updates) modules::slot_set(p->slot, h);
  return updates.size();
}

void ModuleOptimizer::set_graph_mode(const Device& device) {
  const Device d = device.is_autodiff() ? device.inner() : device;
  rest_->set_graph_mode(d);
  for (auto& g : groups_) g.second->set_graph_mode(d);
}

void ModuleOptimizer::prepare_step(double lr) {
  rest_->prepare_step(lr);
  for (auto& g : groups_) g.second->prepare_step(lr);
}

io::NamedTensors ModuleOptimizer::to_record() const {
  io::NamedTensors out = rest_->to_record();
  for (const auto& g : groups_)
    for (auto& e : g.second->to_record()) out.push_back(std::move(e));
  return out;
}

void ModuleOptimizer::load_record(const io::NamedTensors& record, Module& module) {
  std::vector<ParamRef> params = module.named_parameters();
  const std::optional<Device> dev = module.device();
  std::vector<io::NamedTensors> parts(groups_.size() + 1);
  for (const auto& [name, data] : record) {
    const std::size_t dot = name.rfind('.');
    const std::string id = dot == std::string::npos ? name : name.substr(0, dot);
    const ParamRef* owner = nullptr;
    for (const ParamRef& p : params)
      if (p.name == id) owner = &p;
    if (!owner)
      throw FormatError("<record>", "[ModuleOptimizer::load_record] " + name + " names no parameter of this " + module.type_name() +
                                        "; expected <parameter>.step|a|b; got " + name);
    std::size_t gi = groups_.size();
    for (std::size_t i = 0; i < groups_.size(); ++i)
      if (groups_[i].first(*owner)) {
        gi = i;
        break;
      }
    parts[gi].emplace_back(name, data);
  }
  const Device inner = dev ? (dev->is_autodiff() ? dev->inner() : *dev) : Device::default_device();
  // Each Optimizer::load_record validates its part before replacing its state; when a later
  // group refuses its part, the groups already loaded get their previous state back, so
  // nothing is half-loaded.
  std::vector<Optimizer*> opts;
  for (auto& g : groups_) opts.push_back(g.second.get());
  opts.push_back(rest_.get());
  std::vector<io::NamedTensors> before;
  for (Optimizer* o : opts) before.push_back(o->to_record());
  std::size_t done = 0;
  try {
    for (; done < opts.size(); ++done) opts[done]->load_record(parts[done], inner);
  } catch (...) {
    for (std::size_t i = 0; i < done; ++i) opts[i]->load_record(before[i], inner);
    throw;
  }
}

void save_checkpoint(const std::string& path, Module& module, const ModuleOptimizer& optimizer,
                     const std::map<std::string, std::string>& metadata) {
  io::NamedTensors all;
  for (auto& [n, d] : module.to_record()) all.emplace_back("model." + n, std::move(d));
  for (auto& [n, d] : optimizer.to_record()) all.emplace_back("optim." + n, std::move(d));
  io::save_safetensors(path, all, metadata);
}

std::map<std::string, std::string> load_checkpoint(const std::string& path, Module& module, ModuleOptimizer& optimizer) {
  io::SafetensorsFile f = io::load_safetensors(path);
  io::NamedTensors model, optim;
  for (auto& [n, d] : f.tensors) {
    if (n.rfind("model.", 0) == 0) model.emplace_back(n.substr(6), std::move(d));
    else if (n.rfind("optim.", 0) == 0) optim.emplace_back(n.substr(6), std::move(d));
    else throw FormatError(path, "[load_checkpoint] " + n + " in " + path + " is neither model.* nor optim.*; expected a checkpoint of save_checkpoint; got " + n);
  }
  // Validate the optimizer part's names before the module changes.
  std::set<std::string> names;
  for (const ParamRef& p : module.named_parameters()) names.insert(p.name);
  for (const auto& [n, d] : optim) {
    const std::size_t dot = n.rfind('.');
    if (dot == std::string::npos || !names.count(n.substr(0, dot)))
      throw FormatError(path, "[load_checkpoint] optim." + n + " in " + path + " names no parameter of this " + module.type_name() +
                                  "; expected optim.<parameter>.step|a|b; got optim." + n);
  }
  // All or nothing: the optimizer checks its moments' shapes and dtypes only when it loads
  // them, after the module has changed; when it refuses, the module gets its weights back.
  io::NamedTensors before = module.to_record();
  module.load_record(model, true, path);
  try {
    optimizer.load_record(optim, module);
  } catch (...) {
    module.load_record(before, true, path);
    throw;
  }
  return f.metadata;
}

}  // namespace tensor::optim
