// Optimizers over modules: one step updates every parameter of a module that has a
// gradient (tensor/optim.hpp's Sgd, Adam, AdamW underneath, their state keyed by the
// parameter's name), with parameter groups (weight decay off for norms and biases when
// asked), and checkpoints holding the module and the optimizer state side by side.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tensor/module.hpp"
#include "tensor/optim.hpp"

namespace tensor::optim {

/// True for the parameters that usually take no weight decay: biases ("*.bias", "*.beta")
/// and every parameter of a normalisation module (BatchNorm, LayerNorm, GroupNorm, InstanceNorm, RmsNorm).
TENSOR_API bool is_norm_or_bias(const ParamRef& p);

/// Optimizers over a module's parameters by name: groups of parameters, each with its own
/// Optimizer (its state keyed by the parameter's dotted name), stepped together. Move-only.
class TENSOR_API ModuleOptimizer {
 public:
  /// One optimizer for every parameter. Error when `optimizer` is null.
  explicit ModuleOptimizer(std::unique_ptr<Optimizer> optimizer);
  ///@{
  /// Moves take the optimizers and their state over.
  ModuleOptimizer(ModuleOptimizer&&) noexcept;
  ModuleOptimizer& operator=(ModuleOptimizer&&) noexcept;
  ///@}
  ~ModuleOptimizer();

  ///@{
  /// burn's optimizer configs over a module; no_decay_for_norms_and_biases: a second group,
  /// the same config with weight_decay 0, takes the is_norm_or_bias parameters. The configs
  /// are checked as Sgd's / Adam's / AdamW's constructors check them (ShapeError).
  static ModuleOptimizer sgd(const SgdConfig& config = {}, bool no_decay_for_norms_and_biases = false);
  static ModuleOptimizer adam(const AdamConfig& config = {}, bool no_decay_for_norms_and_biases = false);
  static ModuleOptimizer adamw(const AdamWConfig& config = {}, bool no_decay_for_norms_and_biases = false);
  ///@}

  /// A group: parameters for which `in_group` is true use `optimizer`. Groups are tried in
  /// the order added; the constructor's optimizer takes the rest. Returns *this; Error when
  /// either argument is empty.
  ModuleOptimizer& add_group(std::function<bool(const ParamRef&)> in_group, std::unique_ptr<Optimizer> optimizer);
  /// The number of groups, the constructor's included.
  std::size_t num_groups() const { return groups_.size() + 1; }

  /// One update of every parameter of `module` that has a gradient in `grads` (the module
  /// on an autodiff device; the new parameters require grad again). Returns how many were
  /// updated. DeviceError naming the module when it is not on an autodiff device. After an
  /// Optimizer::step error (ShapeError, DeviceError, DTypeError) every parameter is as it was
  /// (the optimizer state of those stepped before it has advanced).
  std::size_t step(double lr, Module& module, const Gradients& grads);

  /// Graph mode for every group (Optimizer::set_graph_mode) on the device the optimizers
  /// see the parameters on: `device`'s inner device when it is an autodiff one (a module's
  /// device). A training step captured with capture() then replays with each step's rate.
  void set_graph_mode(const Device& device);
  /// Graph mode: Optimizer::prepare_step(lr) for every group; before each step, eager or
  /// replayed, outside capture().
  void prepare_step(double lr);

  ///@{
  /// The state of every group as "<name>.step|a|b" (Optimizer::to_record), and back: each
  /// entry goes to the group of the module's parameter of that name; an entry naming no
  /// parameter of `module` is a FormatError naming it, and nothing is loaded (nor when a
  /// group's Optimizer::load_record refuses its part: ShapeError / DTypeError).
  io::NamedTensors to_record() const;
  void load_record(const io::NamedTensors& record, Module& module);
  ///@}

 private:
  Optimizer& group_of(const ParamRef& p);
  std::unique_ptr<Optimizer> rest_;
  std::vector<std::pair<std::function<bool(const ParamRef&)>, std::unique_ptr<Optimizer>>> groups_;
};

/// One .safetensors file with the module's tensors as "model.<name>" and the optimizer's
/// state as "optim.<name>.step|a|b", plus `metadata`; loading is strict as Module::load.
/// FormatError when the file cannot be written.
TENSOR_API void save_checkpoint(const std::string& path, Module& module, const ModuleOptimizer& optimizer,
                                const std::map<std::string, std::string>& metadata = {});
/// Loads a save_checkpoint file into `module` and `optimizer`; returns the file's metadata.
/// FormatError naming an entry that is neither model.* nor optim.* or an optim.* entry naming
/// no parameter of `module`; otherwise errors as Module::load and ModuleOptimizer::load_record.
TENSOR_API std::map<std::string, std::string> load_checkpoint(const std::string& path, Module& module,
                                                              ModuleOptimizer& optimizer);

}  // namespace tensor::optim
