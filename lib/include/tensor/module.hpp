// The module layer's base (burn's Module): named parameters and buffers gathered through
// a module's visit(), train/eval mode, moving onto a device (an autodiff one and back),
// .safetensors checkpoints by name, Sequential, and burn's initializers. Std-only and
// behind the firewall: every body that walks tensors is in libtensor.so
// (lib/src/modules/module.cpp); a file that does not include this header pays nothing.
//
// A module lists what it owns in visit(), the way burn's #[derive(Module)] does:
//   struct Net : tensor::Module {
//     Conv2d conv{Conv2dConfig{.channels = {1, 8}, .kernel_size = {3, 3}}};
//     Linear fc{LinearConfig{.d_input = 8, .d_output = 10}};
//     void visit(ModuleVisitor& v) override { v.module("conv", conv); v.module("fc", fc); }
//   };
// Names are joined with dots ("conv.weight"). Tensors are values: a module holds its
// parameters by value and an update (optimizer step, load, to()) replaces them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tensor/export.hpp"
#include "tensor/io.hpp"
#include "tensor/tensor.hpp"

namespace tensor {

class Module;

/// A Float tensor whose rank (1-5) is known at run time: what Sequential passes between
/// its modules. get<D>() throws ShapeError naming `who` unless the rank is D.
class TENSOR_API AnyTensor {
 public:
  /// No tensor: empty() is true, rank() 0, and get() throws ShapeError.
  AnyTensor() = default;
  /// Wraps `t` (rank D), sharing its buffer (no copy of the data).
  template <std::size_t D>
  AnyTensor(const Tensor<D>& t) : h_(detail::copy(t)), rank_(D) {}  // NOLINT: implicit, as a Tensor converts
  ///@{
  /// Copies share the tensor's buffer (tensors are values); a move leaves the source empty.
  AnyTensor(const AnyTensor& o) : h_(detail::retain(o.h_)), rank_(o.rank_) {}
  AnyTensor(AnyTensor&& o) noexcept : h_(std::exchange(o.h_, detail::Handle{})), rank_(o.rank_) {}
  AnyTensor& operator=(AnyTensor o) noexcept {
    std::swap(h_, o.h_);
    rank_ = o.rank_;
    return *this;
  }
  ///@}
  ~AnyTensor() { detail::release(h_); }

  /// The tensor's rank (1-5), 0 when empty.
  std::size_t rank() const { return rank_; }
  /// True when no tensor is held (default-constructed or moved from).
  bool empty() const { return h_.empty(); }
  /// The firewall handle of the tensor (for the library's own entries; empty when empty()).
  const detail::Handle& handle() const { return h_; }
  /// The tensor as a Tensor<D> (sharing its buffer). ShapeError naming `who` when empty or
  /// when the rank is not D.
  template <std::size_t D>
  Tensor<D> get(const char* who) const {
    check(D, who);
    return Tensor<D>(detail::retain(h_));
  }

 private:
  void check(std::size_t rank, const char* who) const;
  detail::Handle h_;
  std::size_t rank_ = 0;
};

/// Where a module keeps one Float tensor: a pointer to a Tensor<rank> member.
struct TensorSlot {
  std::size_t rank = 0;        ///< D of the Tensor<D> pointed to (1-5)
  void* tensor = nullptr;      ///< the Tensor<rank> member itself (not owned)
};

/// One parameter or buffer of a module tree, as named_parameters() / named_buffers()
/// return it: valid while the module lives and is not moved. module_type is the type_name()
/// of the module that owns it ("Linear", "BatchNorm", ...).
struct TENSOR_API ParamRef {
  std::string name;         ///< dotted path from the root module ("conv.weight", "layers.0.mha.query.bias")
  std::string module_type;  ///< type_name() of the owning module
  bool is_buffer = false;   ///< true for a buffer (running statistics), false for a parameter
  TensorSlot slot;          ///< where the owning module keeps the tensor

  /// The tensor's current shape.
  Shape shape() const;
  /// The tensor's current dtype.
  DType dtype() const;
  /// The device the tensor is on now (an autodiff device for a module being trained).
  Device device() const;
  /// shape().num_elements().
  std::size_t num_elements() const { return shape().num_elements(); }
  /// The tensor as an AnyTensor sharing its buffer (a new reference, not a copy of the data).
  AnyTensor value() const;
  /// The tensor itself; ShapeError unless its rank is D.
  template <std::size_t D>
  Tensor<D>& get() const {
    check_rank(D);
    return *static_cast<Tensor<D>*>(slot.tensor);
  }

 private:
  void check_rank(std::size_t rank) const;
};

/// What visit() calls for each thing a module owns. The library's walkers implement it;
/// a user module only calls param / buffer / module.
class TENSOR_API ModuleVisitor {
 public:
  virtual ~ModuleVisitor();
  ///@{
  /// A trainable Float tensor (an empty optional: none, e.g. a Linear without bias).
  template <std::size_t D>
  void param(const std::string& name, Tensor<D>& t) { on_tensor(name, TensorSlot{D, &t}, false); }
  template <std::size_t D>
  void param(const std::string& name, std::optional<Tensor<D>>& t) {
    if (t) param(name, *t);
  }
  ///@}
  /// State that is saved and moved with the module but not trained (running statistics).
  template <std::size_t D>
  void buffer(const std::string& name, Tensor<D>& t) { on_tensor(name, TensorSlot{D, &t}, true); }
  ///@{
  /// A submodule, its names prefixed with "name." (an empty optional: none; a vector: one
  /// submodule per element, named "name.0", "name.1", ...).
  void module(const std::string& name, Module& m) { on_module(name, m); }
  template <class M>
  void module(const std::string& name, std::optional<M>& m) {
    if (m) on_module(name, *m);
  }
  template <class M>
  void module(const std::string& name, std::vector<M>& ms) {
    for (std::size_t i = 0; i < ms.size(); ++i) on_module(name + "." + std::to_string(i), ms[i]);
  }
  ///@}

 protected:
  /// Receives each tensor `name` of the module being visited (is_buffer: a buffer).
  virtual void on_tensor(const std::string& name, TensorSlot slot, bool is_buffer) = 0;
  /// Receives each submodule `name` (a walker usually visits it with its prefix extended).
  virtual void on_module(const std::string& name, Module& m) = 0;
};

/// What a non-strict load skipped, by name: tensors the module has and the file lacks,
/// tensors the file has and the module lacks, and those of another shape or dtype
/// ("name: why").
struct LoadReport {
  ///@{
  /// The skipped names: missing (in the module, not the record), unexpected (in the record,
  /// not the module), mismatched ("name: wrong shape ..." or "name: wrong dtype ...").
  std::vector<std::string> missing, unexpected, mismatched;
  ///@}
  /// True when nothing was skipped (every list is empty).
  bool complete() const { return missing.empty() && unexpected.empty() && mismatched.empty(); }
};

/// The base of every module (burn's Module): what a module owns is listed by visit(), and
/// the base walks it for named_parameters(), train() / eval(), to(device) and save / load.
/// See the header's comment for an example.
class TENSOR_API Module {
 public:
  /// A module in training mode.
  Module() = default;
  ///@{
  /// Copies and moves carry only the training flag (a derived module's defaulted copy also
  /// copies its tensors, which then share their buffers with the original's).
  Module(const Module&) = default;
  Module(Module&&) = default;
  Module& operator=(const Module&) = default;
  Module& operator=(Module&&) = default;
  ///@}
  virtual ~Module();

  /// Lists the parameters, buffers and submodules (burn's derive(Module)).
  virtual void visit(ModuleVisitor& v) = 0;
  /// The type's name in error messages and ParamRef::module_type.
  virtual const char* type_name() const { return "Module"; }
  /// The forward pass on a tensor of run-time rank, for Sequential. The built-in modules
  /// with one tensor input have it (ShapeError for a rank they do not take); the default
  /// throws ShapeError naming the type.
  virtual AnyTensor forward_any(const AnyTensor& x);

  ///@{
  /// Every parameter / buffer of the tree, depth first in visit() order. ShapeError when a
  /// visited tensor's rank is outside 1-5.
  std::vector<ParamRef> named_parameters();
  std::vector<ParamRef> named_buffers();
  ///@}
  /// Both, in visit() order.
  std::vector<ParamRef> named_tensors();
  /// The number of parameter elements (buffers excluded).
  std::size_t num_params();

  /// Training mode (dropout active, batch norm on batch statistics) for this module and
  /// every submodule; eval() is train(false). Modules start in training mode.
  void train(bool on = true);
  /// train(false): dropout off, batch norm on its running statistics.
  void eval() { train(false); }
  /// True in training mode (the default), false after eval().
  bool is_training() const { return training_; }

  /// Moves every parameter and buffer onto `device`. Onto an autodiff device the parameters
  /// require grad (buffers stay untracked); from an autodiff device onto its inner device
  /// they are plain tensors again. Everything moves or, when one move throws, nothing does.
  void to(const Device& device);
  /// The device of the first tensor in visit() order; empty when the module has no tensors.
  std::optional<Device> device();

  /// Every parameter and buffer as host data under its name (from the inner device when
  /// on autodiff), in visit() order.
  io::NamedTensors to_record();
  /// Replaces every parameter and buffer by the record's tensor of the same name, on the
  /// module's device. Strict: a name the module has and the record lacks, one the record
  /// has and the module lacks, or a tensor of another shape or dtype is a FormatError
  /// naming it (`source` is the path it names), and nothing is replaced. Not strict: what
  /// matches is loaded and the rest is reported. A quantized (QFloat) tensor of the right shape
  /// loads into a float parameter: the parameter becomes that quantized tensor.
  LoadReport load_record(const io::NamedTensors& record, bool strict = true, const std::string& source = "<record>");
  ///@{
  /// .safetensors: to_record() with `metadata` / load_record() of the file's tensors.
  /// FormatError for a file that cannot be written or read, and as load_record().
  void save(const std::string& path, const std::map<std::string, std::string>& metadata = {});
  LoadReport load(const std::string& path, bool strict = true);
  ///@}

 protected:
  /// Called by train() on each module of the tree (a module with mode-dependent state
  /// overrides it; the default records the flag).
  virtual void set_training(bool on) { training_ = on; }

 private:
  bool training_ = true;
};

/// Modules applied in order (burn has no Sequential; torch's nn.Sequential): submodules
/// named "0", "1", ... Each must have forward_any. Move-only: it owns its modules.
class TENSOR_API Sequential : public Module {
 public:
  /// No modules: forward_any returns its input.
  Sequential() = default;
  ///@{
  /// Moves take the modules over; copies are deleted.
  Sequential(Sequential&&) = default;
  Sequential& operator=(Sequential&&) = default;
  Sequential(const Sequential&) = delete;
  Sequential& operator=(const Sequential&) = delete;
  ///@}
  ~Sequential() override;

  /// Appends `m` (moved in) as the next module, named by its position; returns *this.
  template <class M>
  Sequential& add(M m) {
    layers_.push_back(std::make_unique<M>(std::move(m)));
    return *this;
  }
  /// The number of modules.
  std::size_t size() const { return layers_.size(); }
  /// The i-th module; std::out_of_range when i >= size().
  Module& operator[](std::size_t i) { return *layers_.at(i); }

  void visit(ModuleVisitor& v) override;
  const char* type_name() const override { return "Sequential"; }
  /// Each module's forward_any in order; the first error (ShapeError for a module without
  /// one or a rank it does not take) propagates.
  AnyTensor forward_any(const AnyTensor& x) override;
  /// forward_any with typed ends: ShapeError when the last module's output is not rank DO.
  template <std::size_t DO, std::size_t DI>
  Tensor<DO> forward(const Tensor<DI>& x) { return forward_any(AnyTensor(x)).template get<DO>("Sequential::forward"); }

 private:
  std::vector<std::unique_ptr<Module>> layers_;
};

/// burn's Initializer: how a module fills a new parameter. Kaiming and Xavier need the fan
/// in / out the module gives (fan_out_only: Kaiming from the fan out); Orthogonal needs
/// rank >= 2. Random draws use the device's stream (Device::seed makes them repeatable).
struct TENSOR_API Initializer {
  /// Which distribution (burn's Initializer variants).
  enum class Kind : std::uint8_t {
    Constant, Ones, Zeros, Uniform, Normal, KaimingUniform, KaimingNormal, XavierUniform, XavierNormal, Orthogonal
  };
  Kind kind = Kind::Zeros;  ///< the variant
  double a = 0.0;  ///< Constant: value; Uniform: min; Normal: mean; Kaiming, Xavier, Orthogonal: gain
  double b = 0.0;  ///< Uniform: max; Normal: std
  bool fan_out_only = false;  ///< Kaiming: use the fan out instead of the fan in

  /// Every element `value`.
  static Initializer constant(double value) { return {Kind::Constant, value, 0.0, false}; }
  /// Every element 1.
  static Initializer ones() { return {Kind::Ones, 0.0, 0.0, false}; }
  /// Every element 0.
  static Initializer zeros() { return {Kind::Zeros, 0.0, 0.0, false}; }
  /// U(min, max).
  static Initializer uniform(double min, double max) { return {Kind::Uniform, min, max, false}; }
  /// N(mean, std), `std` the standard deviation.
  static Initializer normal(double mean, double std) { return {Kind::Normal, mean, std, false}; }
  ///@{
  /// U(-a, a), a = sqrt(3) gain / sqrt(fan); N(0, gain / sqrt(fan)).
  static Initializer kaiming_uniform(double gain, bool fan_out_only = false) {
    return {Kind::KaimingUniform, gain, 0.0, fan_out_only};
  }
  static Initializer kaiming_normal(double gain, bool fan_out_only = false) {
    return {Kind::KaimingNormal, gain, 0.0, fan_out_only};
  }
  ///@}
  ///@{
  /// U(-a, a), a = sqrt(3) gain sqrt(2 / (fan_in + fan_out)); N(0, gain sqrt(2 / (fan_in + fan_out))).
  static Initializer xavier_uniform(double gain) { return {Kind::XavierUniform, gain, 0.0, false}; }
  static Initializer xavier_normal(double gain) { return {Kind::XavierNormal, gain, 0.0, false}; }
  ///@}
  /// A (semi-)orthogonal matrix of [shape[0], rest] times gain (QR of a normal draw).
  static Initializer orthogonal(double gain) { return {Kind::Orthogonal, gain, 0.0, false}; }
  /// burn's module default: KaimingUniform with gain 1/sqrt(3), i.e. U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
  static Initializer module_default();

  /// A new Float tensor of `shape` on `device` (on an autodiff device it requires grad).
  /// ShapeError naming the initializer when Kaiming / Xavier lack their fan (none or 0), or
  /// Orthogonal a rank >= 2 without a zero dim.
  template <std::size_t D>
  Tensor<D> init(const Shape& shape, const Device& device, std::optional<std::size_t> fan_in = std::nullopt,
                 std::optional<std::size_t> fan_out = std::nullopt) const {
    return Tensor<D>(init_handle(shape, device, fan_in, fan_out));
  }
  /// init() as a firewall handle, for a rank known only at run time.
  detail::Handle init_handle(const Shape& shape, const Device& device, std::optional<std::size_t> fan_in,
                             std::optional<std::size_t> fan_out) const;
};

}  // namespace tensor
