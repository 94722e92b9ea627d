// burn-nn's recurrent modules (tensor/modules/recurrent.hpp): GateController, Lstm, BiLstm,
// Gru, BiGru, composed from public ops. Each gate's input transform runs once over the
// whole sequence ([B, L, d_input] -> [B, L, d_hidden]); the steps then add the hidden
// transform of the previous hidden state.
#include "tensor/modules/recurrent.hpp"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "module_util.hpp"

namespace tensor::nn {

using modules::check_input;
using modules::shape_error;

namespace {

LinearConfig lin(std::size_t in, std::size_t out, bool bias, const Initializer& init) {
  return LinearConfig{.d_input = in, .d_output = out, .bias = bias, .initializer = init};
}

std::size_t checked_sizes(const char* module, std::size_t d_input, std::size_t d_hidden) {
  if (d_input == 0 || d_hidden == 0)
    shape_error(module, "d_input and d_hidden must be positive", ">= 1",
                "d_input " + std::to_string(d_input) + ", d_hidden " + std::to_string(d_hidden));
  return d_input;
}

void check_clip(const char* module, const std::optional<double>& clip) {
  if (clip && !(*clip > 0.0)) shape_error(module, "clip must be positive", "clip > 0", std::to_string(*clip));
}

// x [B, L, d_input] on the weight's device and dtype with L >= 1; `weight` names the
// parameter in the message ("Lstm.input_gate.input_transform.weight").
void check_sequence(const char* module, const char* weight_name, const Tensor<3>& x, const Tensor<2>& weight) {
  check_input(module, weight_name, x, weight);
  const Shape xs = x.shape(), ws = weight.shape();
  if (xs[2] != ws[0])
    shape_error(module, std::string("the input's features differ from ") + module + "." + weight_name + "'s rows (weight " +
                            ws.to_string() + ")",
                "[batch, seq, " + std::to_string(ws[0]) + "]", "shape " + xs.to_string());
  if (xs[0] == 0 || xs[1] == 0)
    shape_error(module, "batch and sequence length must be positive", "[batch >= 1, seq >= 1, features]",
                "shape " + xs.to_string());
}

template <std::size_t D>
void check_state(const char* module, const char* what, const Tensor<D>& s, const Shape& want, const Tensor<3>& x) {
  if (s.shape() != want) shape_error(module, std::string(what) + " has the wrong shape", want.to_string(), s.shape().to_string());
  check_input(module, what, x, s);
}

// Outputs collected in step order -> [B, L, H] in x's positions.
Tensor<3> gather(std::vector<Tensor<2>> steps, bool reverse) {
  if (reverse) std::reverse(steps.begin(), steps.end());
  return Tensor<2>::stack<3>(steps, 1);
}

Tensor<2> clipped(Tensor<2> t, const std::optional<double>& clip) {
  return clip ? t.clamp(-*clip, *clip) : t;
}

}  // namespace

// ---- GateController -------------------------------------------------------------------------

GateController::GateController(std::size_t d_input, std::size_t d_output, bool bias, const Initializer& init,
                               const Device& device)
    : input_transform(lin(d_input, d_output, bias, init), device), hidden_transform(lin(d_output, d_output, bias, init), device) {}

Tensor<2> GateController::gate_product(const Tensor<2>& input, const Tensor<2>& hidden) const {
  return input_transform.forward(input) + hidden_transform.forward(hidden);
}

void GateController::visit(ModuleVisitor& v) {
  v.module("input_transform", input_transform);
  v.module("hidden_transform", hidden_transform);
}

// ---- Lstm -----------------------------------------------------------------------------------

Lstm::Lstm(const LstmConfig& c, const Device& device)
    : input_gate(checked_sizes("Lstm", c.d_input, c.d_hidden), c.d_hidden, c.bias, c.initializer, device),
      forget_gate(c.d_input, c.d_hidden, c.bias, c.initializer, device),
      output_gate(c.d_input, c.d_hidden, c.bias, c.initializer, device),
      cell_gate(c.d_input, c.d_hidden, c.bias, c.initializer, device),
      d_hidden(c.d_hidden),
      batch_first(c.batch_first),
      reverse(c.reverse),
      clip(c.clip),
      input_forget(c.input_forget),
      gate_activation(c.gate_activation),
      cell_activation(c.cell_activation),
      hidden_activation(c.hidden_activation) {
  check_clip("Lstm", clip);
}

std::pair<Tensor<3>, LstmState<2>> Lstm::forward_steps(const Tensor<3>& x, const std::optional<LstmState<2>>& state,
                                                       bool rev) const {
  check_sequence("Lstm", "input_gate.input_transform.weight", x, input_gate.input_transform.weight);
  const Shape xs = x.shape();
  const std::size_t B = xs[0], L = xs[1];
  Tensor<2> c = state ? state->cell : Tensor<2>::zeros(Shape{B, d_hidden}, x.device(), x.dtype());
  Tensor<2> h = state ? state->hidden : c;
  if (state) {
    check_state("Lstm", "state.cell", state->cell, Shape{B, d_hidden}, x);
    check_state("Lstm", "state.hidden", state->hidden, Shape{B, d_hidden}, x);
  }
  const Tensor<3> xi = input_gate.input_transform.forward(x), xo = output_gate.input_transform.forward(x),
                  xg = cell_gate.input_transform.forward(x);
  const std::optional<Tensor<3>> xf =
      input_forget ? std::nullopt : std::optional<Tensor<3>>(forget_gate.input_transform.forward(x));
  std::vector<Tensor<2>> outs;
  outs.reserve(L);
  for (std::size_t s = 0; s < L; ++s) {
    const auto t = static_cast<std::int64_t>(rev ? L - 1 - s : s);
    const Tensor<2> i = gate_activation.apply(xi.select_dim(1, t) + input_gate.hidden_transform.forward(h));
    const Tensor<2> f =
        input_forget ? 1.0 - i : gate_activation.apply(xf->select_dim(1, t) + forget_gate.hidden_transform.forward(h));
    const Tensor<2> o = gate_activation.apply(xo.select_dim(1, t) + output_gate.hidden_transform.forward(h));
    const Tensor<2> g = cell_activation.apply(xg.select_dim(1, t) + cell_gate.hidden_transform.forward(h));
    c = clipped(f * c + i * g, clip);
    h = o * hidden_activation.apply(c);
    outs.push_back(h);
  }
  return {gather(std::move(outs), rev), LstmState<2>{c, h}};
}

std::pair<Tensor<3>, LstmState<2>> Lstm::forward(const Tensor<3>& x, const std::optional<LstmState<2>>& state) const {
  if (batch_first) return forward_steps(x, state, reverse);
  auto [out, st] = forward_steps(x.swap_dims(0, 1), state, reverse);
  return {out.swap_dims(0, 1), st};
}

void Lstm::visit(ModuleVisitor& v) {
  v.module("input_gate", input_gate);
  v.module("forget_gate", forget_gate);
  v.module("output_gate", output_gate);
  v.module("cell_gate", cell_gate);
}

// ---- BiLstm ---------------------------------------------------------------------------------

namespace {
LstmConfig one_way(const BiLstmConfig& c) {
  return LstmConfig{.d_input = c.d_input, .d_hidden = c.d_hidden, .bias = c.bias, .initializer = c.initializer,
                    .batch_first = true, .reverse = false, .clip = c.clip, .input_forget = c.input_forget,
                    .gate_activation = c.gate_activation, .cell_activation = c.cell_activation,
                    .hidden_activation = c.hidden_activation};
}
}  // namespace

BiLstm::BiLstm(const BiLstmConfig& c, const Device& device)
    : forward_lstm(one_way(c), device), reverse_lstm(one_way(c), device), d_hidden(c.d_hidden), batch_first(c.batch_first) {}

std::pair<Tensor<3>, LstmState<3>> BiLstm::forward(const Tensor<3>& x0, const std::optional<LstmState<3>>& state) const {
  const Tensor<3> x = batch_first ? x0 : x0.swap_dims(0, 1);
  check_sequence("BiLstm", "forward.input_gate.input_transform.weight", x, forward_lstm.input_gate.input_transform.weight);
  std::optional<LstmState<2>> sf, sr;
  if (state) {
    const Shape want{2, x.shape()[0], d_hidden};
    check_state("BiLstm", "state.cell", state->cell, want, x);
    check_state("BiLstm", "state.hidden", state->hidden, want, x);
    sf = LstmState<2>{state->cell.select_dim(0, 0), state->hidden.select_dim(0, 0)};
    sr = LstmState<2>{state->cell.select_dim(0, 1), state->hidden.select_dim(0, 1)};
  }
  auto [of, stf] = forward_lstm.forward_steps(x, sf, false);
  auto [orv, str] = reverse_lstm.forward_steps(x, sr, true);
  Tensor<3> out = tensor::cat(std::vector<Tensor<3>>{of, orv}, 2);
  if (!batch_first) out = out.swap_dims(0, 1);
  return {out, LstmState<3>{Tensor<2>::stack<3>({stf.cell, str.cell}, 0), Tensor<2>::stack<3>({stf.hidden, str.hidden}, 0)}};
}

void BiLstm::visit(ModuleVisitor& v) {
  v.module("forward", forward_lstm);
  v.module("reverse", reverse_lstm);
}

// ---- Gru ------------------------------------------------------------------------------------

Gru::Gru(const GruConfig& c, const Device& device)
    : update_gate(checked_sizes("Gru", c.d_input, c.d_hidden), c.d_hidden, c.bias, c.initializer, device),
      reset_gate(c.d_input, c.d_hidden, c.bias, c.initializer, device),
      new_gate(c.d_input, c.d_hidden, c.bias, c.initializer, device),
      d_hidden(c.d_hidden),
      reset_after(c.reset_after),
      clip(c.clip),
      gate_activation(c.gate_activation),
      hidden_activation(c.hidden_activation) {
  check_clip("Gru", clip);
}

std::pair<Tensor<3>, Tensor<2>> Gru::forward_steps(const Tensor<3>& x, const std::optional<Tensor<2>>& state, bool rev) const {
  check_sequence("Gru", "update_gate.input_transform.weight", x, update_gate.input_transform.weight);
  const Shape xs = x.shape();
  const std::size_t B = xs[0], L = xs[1];
  if (state) check_state("Gru", "state", *state, Shape{B, d_hidden}, x);
  Tensor<2> h = state ? *state : Tensor<2>::zeros(Shape{B, d_hidden}, x.device(), x.dtype());
  const Tensor<3> xz = update_gate.input_transform.forward(x), xr = reset_gate.input_transform.forward(x),
                  xn = new_gate.input_transform.forward(x);
  std::vector<Tensor<2>> outs;
  outs.reserve(L);
  for (std::size_t s = 0; s < L; ++s) {
    const auto t = static_cast<std::int64_t>(rev ? L - 1 - s : s);
    const Tensor<2> z = gate_activation.apply(xz.select_dim(1, t) + update_gate.hidden_transform.forward(h));
    const Tensor<2> r = gate_activation.apply(xr.select_dim(1, t) + reset_gate.hidden_transform.forward(h));
    const Tensor<2> hn = reset_after ? r * new_gate.hidden_transform.forward(h) : new_gate.hidden_transform.forward(r * h);
    const Tensor<2> n = hidden_activation.apply(xn.select_dim(1, t) + hn);
    h = clipped((1.0 - z) * n + z * h, clip);
    outs.push_back(h);
  }
  return {gather(std::move(outs), rev), h};
}

std::pair<Tensor<3>, Tensor<2>> Gru::forward(const Tensor<3>& x, const std::optional<Tensor<2>>& state) const {
  return forward_steps(x, state, false);
}

void Gru::visit(ModuleVisitor& v) {
  v.module("update_gate", update_gate);
  v.module("reset_gate", reset_gate);
  v.module("new_gate", new_gate);
}

// ---- BiGru ----------------------------------------------------------------------------------

namespace {
GruConfig one_way(const BiGruConfig& c) {
  return GruConfig{.d_input = c.d_input, .d_hidden = c.d_hidden, .bias = c.bias, .reset_after = c.reset_after,
                   .initializer = c.initializer, .clip = c.clip, .gate_activation = c.gate_activation,
                   .hidden_activation = c.hidden_activation};
}
}  // namespace

BiGru::BiGru(const BiGruConfig& c, const Device& device)
    : forward_gru(one_way(c), device), reverse_gru(one_way(c), device), d_hidden(c.d_hidden), batch_first(c.batch_first) {}

std::pair<Tensor<3>, Tensor<3>> BiGru::forward(const Tensor<3>& x0, const std::optional<Tensor<3>>& state) const {
  const Tensor<3> x = batch_first ? x0 : x0.swap_dims(0, 1);
  check_sequence("BiGru", "forward.update_gate.input_transform.weight", x, forward_gru.update_gate.input_transform.weight);
  std::optional<Tensor<2>> sf, sr;
  if (state) {
    check_state("BiGru", "state", *state, Shape{2, x.shape()[0], d_hidden}, x);
    sf = state->select_dim(0, 0);
    sr = state->select_dim(0, 1);
  }
  auto [of, hf] = forward_gru.forward_steps(x, sf, false);
  auto [orv, hr] = reverse_gru.forward_steps(x, sr, true);
  Tensor<3> out = tensor::cat(std::vector<Tensor<3>>{of, orv}, 2);
  if (!batch_first) out = out.swap_dims(0, 1);
  return {out, Tensor<2>::stack<3>({hf, hr}, 0)};
}

void BiGru::visit(ModuleVisitor& v) {
  v.module("forward", forward_gru);
  v.module("reverse", reverse_gru);
}

}  // namespace tensor::nn
