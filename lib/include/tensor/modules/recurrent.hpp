// burn-nn's recurrent modules: Lstm, BiLstm, Gru, BiGru and their GateController, with
// burn's configs, gate order, record names and defaults (bodies in lib/src/modules/recurrent.cpp).
// Inputs are [batch, seq, d_input] (burn's batch_first; Lstm / BiLstm / BiGru take
// batch_first = false for [seq, batch, d_input]); every forward returns the output sequence
// and the final state, and takes an optional initial state (zeros when absent).
#pragma once

#include <cstddef>
#include <optional>
#include <utility>

#include "tensor/module.hpp"
#include "tensor/modules/core.hpp"

namespace tensor::nn {

/// burn's GateController: one gate's two transforms, gate_product(x, h) = x Wi + bi + h Wh + bh
/// (input_transform: Linear d_input -> d_output, hidden_transform: Linear d_output -> d_output).
class TENSOR_API GateController : public Module {
 public:
  /// Both Linears drawn by `init` on `device` (with biases when `bias`). ShapeError naming
  /// Linear when d_input or d_output is 0.
  GateController(std::size_t d_input, std::size_t d_output, bool bias, const Initializer& init,
                 const Device& device = Device::default_device());
  /// input [B, d_input], hidden [B, d_output] -> [B, d_output]; errors as Linear::forward's.
  Tensor<2> gate_product(const Tensor<2>& input, const Tensor<2>& hidden) const;

  ///@{
  /// The transforms of the input and of the previous hidden state (record names as here).
  Linear input_transform, hidden_transform;
  ///@}

  void visit(ModuleVisitor& v) override;
  const char* type_name() const override { return "GateController"; }
};

/// burn's LstmState: cell and hidden, [batch, d_hidden] for Lstm, [2, batch, d_hidden]
/// (forward, reverse) for BiLstm.
template <std::size_t D>
struct LstmState {
  ///@{
  /// The cell state c and the hidden state h.
  Tensor<D> cell, hidden;
  ///@}
};

/// burn's LstmConfig. The initializer draws every gate's weights and biases (burn's default
/// XavierNormal, gain 1). reverse: the sequence is read last to first (the output keeps the
/// input's positions). clip: the cell state clamped to [-clip, clip] after each step.
/// input_forget: the forget gate is 1 - the input gate (its weights stay but are unused).
/// gate_activation (i, f, o; sigmoid), cell_activation (g; tanh), hidden_activation (applied
/// to c' for h'; tanh). burn's `bias` has no default; true here.
struct LstmConfig {
  std::size_t d_input = 0;  ///< x's features; positive
  std::size_t d_hidden = 0;  ///< the hidden (and cell) width; positive
  bool bias = true;  ///< whether the gates' Linears have biases
  Initializer initializer = Initializer::xavier_normal(1.0);  ///< draws every gate's weights and biases
  bool batch_first = true;  ///< x is [batch, seq, d_input] (false: [seq, batch, d_input], and so is the output)
  bool reverse = false;  ///< read the sequence last to first (the output keeps the input's positions)
  std::optional<double> clip{};  ///< the state clamped to [-clip, clip] after each step; positive; empty: none
  bool input_forget = false;  ///< the forget gate is 1 - the input gate
  ActivationConfig gate_activation{ActivationConfig::Kind::Sigmoid};  ///< the gates' activation (sigmoid)
  ActivationConfig cell_activation{ActivationConfig::Kind::Tanh};  ///< the cell candidate g's activation (tanh)
  ActivationConfig hidden_activation{ActivationConfig::Kind::Tanh};  ///< applied to c' for h' (tanh)
};

/// burn's Lstm: gates input, forget, output, cell (record names input_gate, forget_gate,
/// output_gate, cell_gate); per step i = s(x Wii + h Whi), f = s(...), o = s(...),
/// g = tanh(...), c' = f c + i g, h' = o tanh(c').
class TENSOR_API Lstm : public Module {
 public:
  /// The four gates on `device`. ShapeError naming Lstm when d_input or d_hidden is 0 or clip
  /// is not positive.
  explicit Lstm(const LstmConfig& config, const Device& device = Device::default_device());
  /// x [B, L, d_input] (batch_first) -> (output [B, L, d_hidden], final state [B, d_hidden]).
  /// ShapeError naming Lstm.input_gate.input_transform.weight when the features differ, or
  /// the state when its shape is not [B, d_hidden]; DeviceError / DTypeError when x (or the
  /// state) has another device / dtype than the weights; ShapeError when B or L is 0.
  std::pair<Tensor<3>, LstmState<2>> forward(const Tensor<3>& x, const std::optional<LstmState<2>>& state = std::nullopt) const;
  /// x batch-first, the steps in the given order (reverse: last to first; the output keeps
  /// x's positions), whatever the config's batch_first and reverse (BiLstm's steps).
  std::pair<Tensor<3>, LstmState<2>> forward_steps(const Tensor<3>& x, const std::optional<LstmState<2>>& state,
                                                   bool reverse) const;

  ///@{
  /// The gates i, f, o and g (record names input_gate, forget_gate, output_gate, cell_gate).
  GateController input_gate, forget_gate, output_gate, cell_gate;
  ///@}
  std::size_t d_hidden;  ///< the config's d_hidden
  ///@{
  /// The config's batch_first and reverse.
  bool batch_first, reverse;
  ///@}
  std::optional<double> clip;  ///< the config's clip
  bool input_forget;           ///< the config's input_forget
  ///@{
  /// The config's activations.
  ActivationConfig gate_activation, cell_activation, hidden_activation;
  ///@}

  void visit(ModuleVisitor& v) override;
  const char* type_name() const override { return "Lstm"; }
};

/// burn's BiLstmConfig: two Lstms (record names forward, reverse), the second reading the
/// sequence backwards.
struct BiLstmConfig {
  std::size_t d_input = 0;  ///< x's features; positive
  std::size_t d_hidden = 0;  ///< the hidden (and cell) width; positive
  bool bias = true;  ///< whether the gates' Linears have biases
  Initializer initializer = Initializer::xavier_normal(1.0);  ///< draws every gate's weights and biases
  bool batch_first = true;  ///< x is [batch, seq, d_input] (false: [seq, batch, d_input], and so is the output)
  std::optional<double> clip{};  ///< the state clamped to [-clip, clip] after each step; positive; empty: none
  bool input_forget = false;  ///< the forget gate is 1 - the input gate
  ActivationConfig gate_activation{ActivationConfig::Kind::Sigmoid};  ///< the gates' activation (sigmoid)
  ActivationConfig cell_activation{ActivationConfig::Kind::Tanh};  ///< the cell candidate g's activation (tanh)
  ActivationConfig hidden_activation{ActivationConfig::Kind::Tanh};  ///< applied to c' for h' (tanh)
};

/// burn's BiLstm (see BiLstmConfig).
class TENSOR_API BiLstm : public Module {
 public:
  /// Both Lstms on `device`; ShapeError as Lstm's constructor.
  explicit BiLstm(const BiLstmConfig& config, const Device& device = Device::default_device());
  /// x [B, L, d_input] -> (output [B, L, 2 d_hidden]: forward then reverse features, final
  /// state [2, B, d_hidden]: forward's then reverse's). A given state is [2, B, d_hidden].
  /// Errors as Lstm::forward's, naming BiLstm (and its forward.* weight).
  std::pair<Tensor<3>, LstmState<3>> forward(const Tensor<3>& x, const std::optional<LstmState<3>>& state = std::nullopt) const;

  ///@{
  /// burn's `forward` and `reverse` fields (record names).
  Lstm forward_lstm, reverse_lstm;
  ///@}
  std::size_t d_hidden;  ///< the config's d_hidden
  bool batch_first;      ///< the config's batch_first

  void visit(ModuleVisitor& v) override;
  const char* type_name() const override { return "BiLstm"; }
};

/// burn's GruConfig: gates update, reset, new (record names update_gate, reset_gate,
/// new_gate). reset_after (burn's default, torch's form): n = tanh(x Win + bin + r (h Whn +
/// bhn)); otherwise n = tanh(x Win + bin + (r h) Whn + bhn). h' = (1 - z) n + z h.
/// gate_activation (z, r; sigmoid), hidden_activation (n; tanh). Always batch-first, as
/// burn's Gru.
struct GruConfig {
  std::size_t d_input = 0;  ///< x's features; positive
  std::size_t d_hidden = 0;  ///< the hidden width; positive
  bool bias = true;  ///< whether the gates' Linears have biases
  bool reset_after = true;  ///< apply the reset gate after the hidden transform (burn's default, torch's form)
  Initializer initializer = Initializer::xavier_normal(1.0);  ///< draws every gate's weights and biases
  std::optional<double> clip{};  ///< the state clamped to [-clip, clip] after each step; positive; empty: none
  ActivationConfig gate_activation{ActivationConfig::Kind::Sigmoid};  ///< the gates' activation (sigmoid)
  ActivationConfig hidden_activation{ActivationConfig::Kind::Tanh};  ///< the candidate n's activation (tanh)
};

/// burn's Gru (see GruConfig).
class TENSOR_API Gru : public Module {
 public:
  /// The three gates on `device`. ShapeError naming Gru when d_input or d_hidden is 0 or clip
  /// is not positive.
  explicit Gru(const GruConfig& config, const Device& device = Device::default_device());
  /// x [B, L, d_input] -> (output [B, L, d_hidden], final hidden [B, d_hidden]); burn's
  /// forward returns only the output, whose last step is the final hidden. Errors as Lstm's.
  std::pair<Tensor<3>, Tensor<2>> forward(const Tensor<3>& x, const std::optional<Tensor<2>>& state = std::nullopt) const;
  /// The steps in the given order (reverse: last to first); the output keeps x's positions.
  std::pair<Tensor<3>, Tensor<2>> forward_steps(const Tensor<3>& x, const std::optional<Tensor<2>>& state, bool reverse) const;

  ///@{
  /// The gates z, r and n (record names update_gate, reset_gate, new_gate).
  GateController update_gate, reset_gate, new_gate;
  ///@}
  std::size_t d_hidden;        ///< the config's d_hidden
  bool reset_after;            ///< the config's reset_after
  std::optional<double> clip;  ///< the config's clip
  ///@{
  /// The config's activations.
  ActivationConfig gate_activation, hidden_activation;
  ///@}

  void visit(ModuleVisitor& v) override;
  const char* type_name() const override { return "Gru"; }
};

/// burn's BiGruConfig: two Grus (record names forward, reverse).
struct BiGruConfig {
  std::size_t d_input = 0;  ///< x's features; positive
  std::size_t d_hidden = 0;  ///< the hidden width; positive
  bool bias = true;  ///< whether the gates' Linears have biases
  bool reset_after = true;  ///< apply the reset gate after the hidden transform (burn's default, torch's form)
  Initializer initializer = Initializer::xavier_normal(1.0);  ///< draws every gate's weights and biases
  bool batch_first = true;  ///< x is [batch, seq, d_input] (false: [seq, batch, d_input], and so is the output)
  std::optional<double> clip{};  ///< the state clamped to [-clip, clip] after each step; positive; empty: none
  ActivationConfig gate_activation{ActivationConfig::Kind::Sigmoid};  ///< the gates' activation (sigmoid)
  ActivationConfig hidden_activation{ActivationConfig::Kind::Tanh};  ///< the candidate n's activation (tanh)
};

/// burn's BiGru (see BiGruConfig).
class TENSOR_API BiGru : public Module {
 public:
  /// Both Grus on `device`; ShapeError as Gru's constructor.
  explicit BiGru(const BiGruConfig& config, const Device& device = Device::default_device());
  /// x [B, L, d_input] -> (output [B, L, 2 d_hidden], final hidden [2, B, d_hidden]). A given
  /// state is [2, B, d_hidden]. Errors as Lstm::forward's, naming BiGru.
  std::pair<Tensor<3>, Tensor<3>> forward(const Tensor<3>& x, const std::optional<Tensor<3>>& state = std::nullopt) const;

  ///@{
  /// burn's `forward` and `reverse` fields (record names).
  Gru forward_gru, reverse_gru;
  ///@}
  std::size_t d_hidden;  ///< the config's d_hidden
  bool batch_first;      ///< the config's batch_first

  void visit(ModuleVisitor& v) override;
  const char* type_name() const override { return "BiGru"; }
};

}  // namespace tensor::nn
