// burn-nn's attention modules (tensor/modules/attention.hpp): MultiHeadAttention,
// PositionWiseFeedForward, TransformerEncoderLayer, PositionalEncoding.
#include "tensor/modules/attention.hpp"

#include <array>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "module_util.hpp"
#include "tensor/activation.hpp"

namespace tensor::nn {

using modules::check_input;
using modules::shape_error;

Tensor<3, Bool> generate_autoregressive_mask(std::size_t batch, std::size_t seq, const Device& device) {
  const Device plain = device.is_autodiff() ? device.inner() : device;
  // tril zeroes what lies above the diagonal, so its mask is true strictly above it.
  Tensor<2, Bool> m = Tensor<2, Bool>::tril_mask(seq, seq, 0, plain);
  Tensor<3, Bool> out = m.unsqueeze_dim(0).repeat_dim(0, batch);
  return plain == device ? out : out.to_device(device);
}

namespace {

MultiHeadAttentionConfig checked(const MultiHeadAttentionConfig& c) {
  if (c.d_model == 0 || c.n_heads == 0 || c.d_model % c.n_heads != 0)
    shape_error("MultiHeadAttention", "d_model must be a positive multiple of n_heads",
                "d_model % n_heads == 0", "d_model " + std::to_string(c.d_model) + ", n_heads " + std::to_string(c.n_heads));
  return c;
}

LinearConfig lin(std::size_t in, std::size_t out, bool bias, const Initializer& init) {
  return LinearConfig{.d_input = in, .d_output = out, .bias = bias, .initializer = init};
}

}  // namespace

// ---- MultiHeadAttention ---------------------------------------------------------------------

MultiHeadAttention::MultiHeadAttention(const MultiHeadAttentionConfig& c0, const Device& device)
    : query(lin(checked(c0).d_model, c0.d_model, c0.query_bias, c0.initializer), device),
      key(lin(c0.d_model, c0.d_model, c0.key_bias, c0.initializer), device),
      value(lin(c0.d_model, c0.d_model, c0.value_bias, c0.initializer), device),
      output(lin(c0.d_model, c0.d_model, c0.output_bias, c0.initializer), device),
      dropout(DropoutConfig{c0.dropout}),
      d_model(c0.d_model),
      n_heads(c0.n_heads),
      d_k(c0.d_model / c0.n_heads),
      min_float(c0.min_float),
      quiet_softmax(c0.quiet_softmax) {}

MhaOutput MultiHeadAttention::forward(const MhaInput& in) const {
  const Shape qs = in.query.shape(), ks = in.key.shape(), vs = in.value.shape();
  for (const Shape* s : {&qs, &ks, &vs})
    if ((*s)[2] != d_model)
      shape_error("MultiHeadAttention", "the input's last dim differs from d_model (MultiHeadAttention.query.weight)",
                  std::to_string(d_model), "query " + qs.to_string() + ", key " + ks.to_string() + ", value " + vs.to_string());
  if (ks != vs || ks[0] != qs[0])
    shape_error("MultiHeadAttention", "key and value must share a shape and the query's batch", "key == value, batch " +
                std::to_string(qs[0]), "query " + qs.to_string() + ", key " + ks.to_string() + ", value " + vs.to_string());
  const auto B = static_cast<std::int64_t>(qs[0]), Lq = static_cast<std::int64_t>(qs[1]), Lk = static_cast<std::int64_t>(ks[1]);
  const auto H = static_cast<std::int64_t>(n_heads), Dk = static_cast<std::int64_t>(d_k);
  auto heads = [&](const Linear& l, const Tensor<3>& x, std::int64_t L) {
    return l.forward(x).reshape<4>(std::array<std::int64_t, 4>{B, L, H, Dk}).swap_dims(1, 2);
  };
  const Tensor<4> q = heads(query, in.query, Lq), k = heads(key, in.key, Lk), v = heads(value, in.value, Lk);
  Tensor<4> scores = q.matmul(k.swap_dims(2, 3)) / std::sqrt(static_cast<double>(d_k));
  scores = dropout.forward(scores);
  const Device sd = scores.device();
  auto to_scores = [&](auto m) { return m.device() == sd ? m : m.to_device(sd); };
  if (in.mask_pad) {
    const Shape ms = in.mask_pad->shape();
    if (ms != Shape{qs[0], ks[1]})
      shape_error("MultiHeadAttention", "mask_pad must be [batch, key length]", Shape{qs[0], ks[1]}.to_string(), ms.to_string());
    scores = scores.mask_fill(to_scores(in.mask_pad->reshape<4>(std::array<std::int64_t, 4>{B, 1, 1, Lk})).expand(
                                  std::array<std::int64_t, 4>{B, H, Lq, Lk}),
                              min_float);
  }
  if (in.mask_attn) {
    const Shape ms = in.mask_attn->shape();
    if (ms != Shape{qs[0], qs[1], ks[1]})
      shape_error("MultiHeadAttention", "mask_attn must be [batch, query length, key length]",
                  Shape{qs[0], qs[1], ks[1]}.to_string(), ms.to_string());
    scores = scores.mask_fill(to_scores(in.mask_attn->reshape<4>(std::array<std::int64_t, 4>{B, 1, Lq, Lk})).expand(
                                  std::array<std::int64_t, 4>{B, H, Lq, Lk}),
                              min_float);
  }
  Tensor<4> weights = quiet_softmax ? activation::quiet_softmax(scores, 3) : activation::softmax(scores, 3);
  Tensor<3> context = weights.matmul(v).swap_dims(1, 2).reshape<3>(std::array<std::int64_t, 3>{B, Lq, static_cast<std::int64_t>(d_model)});
  return MhaOutput{weights, output.forward(context)};
}

void MultiHeadAttention::visit(ModuleVisitor& v) {
  v.module("query", query);
  v.module("key", key);
  v.module("value", value);
  v.module("output", output);
  v.module("dropout", dropout);
}

// ---- PositionWiseFeedForward ----------------------------------------------------------------

PositionWiseFeedForward::PositionWiseFeedForward(std::size_t d_model, std::size_t d_ff, double p, const Initializer& init,
                                                 const Device& device, const ActivationConfig& act)
    : linear_inner(lin(d_model, d_ff, true, init), device), linear_outer(lin(d_ff, d_model, true, init), device),
      dropout(DropoutConfig{p}),
      activation(act) {}

Tensor<3> PositionWiseFeedForward::forward(const Tensor<3>& x) const {
  return linear_outer.forward(dropout.forward(activation.apply(linear_inner.forward(x))));
}

void PositionWiseFeedForward::visit(ModuleVisitor& v) {
  v.module("linear_inner", linear_inner);
  v.module("linear_outer", linear_outer);
  v.module("dropout", dropout);
}

// ---- TransformerEncoderLayer ----------------------------------------------------------------

TransformerEncoderLayer::TransformerEncoderLayer(const TransformerEncoderLayerConfig& c, const Device& device)
    : mha(MultiHeadAttentionConfig{.d_model = c.d_model, .n_heads = c.n_heads, .dropout = c.dropout,
                                   .quiet_softmax = c.quiet_softmax, .initializer = c.initializer},
          device),
      pwff(c.d_model, c.d_ff, c.dropout, c.initializer, device, c.activation),
      norm_1(LayerNormConfig{.d_model = c.d_model, .epsilon = c.layer_norm_eps}, device),
      norm_2(LayerNormConfig{.d_model = c.d_model, .epsilon = c.layer_norm_eps}, device),
      dropout(DropoutConfig{c.dropout}),
      norm_first(c.norm_first) {}

Tensor<3> TransformerEncoderLayer::forward(const Tensor<3>& x, const std::optional<Tensor<2, Bool>>& mask_pad,
                                           const std::optional<Tensor<3, Bool>>& mask_attn) const {
  auto attend = [&](const Tensor<3>& h) {
    MhaInput in = MhaInput::self_attn(h);
    in.mask_pad = mask_pad;
    in.mask_attn = mask_attn;
    return dropout.forward(mha.forward(in).context);
  };
  if (norm_first) {
    Tensor<3> y = x + attend(norm_2.forward(x));
    return y + dropout.forward(pwff.forward(norm_1.forward(y)));
  }
  Tensor<3> y = norm_1.forward(x + attend(x));
  return norm_2.forward(y + dropout.forward(pwff.forward(y)));
}

void TransformerEncoderLayer::visit(ModuleVisitor& v) {
  v.module("mha", mha);
  v.module("pwff", pwff);
  v.module("norm_1", norm_1);
  v.module("norm_2", norm_2);
  v.module("dropout", dropout);
}

AnyTensor TransformerEncoderLayer::forward_any(const AnyTensor& x) { return AnyTensor(forward(x.get<3>("TransformerEncoderLayer"))); }

// ---- TransformerEncoder ---------------------------------------------------------------------

TransformerEncoder::TransformerEncoder(const TransformerEncoderConfig& c, const Device& device) {
  if (c.n_layers == 0) shape_error("TransformerEncoder", "n_layers must be positive", ">= 1", "0");
  layers.reserve(c.n_layers);
  for (std::size_t i = 0; i < c.n_layers; ++i)
    layers.emplace_back(c.layer(), device);
}

Tensor<3> TransformerEncoder::forward(const Tensor<3>& x, const std::optional<Tensor<2, Bool>>& mask_pad,
                                      const std::optional<Tensor<3, Bool>>& mask_attn) const {
  Tensor<3> h = x;
  for (const TransformerEncoderLayer& l : layers) h = l.forward(h, mask_pad, mask_attn);
  return h;
}

AnyTensor TransformerEncoder::forward_any(const AnyTensor& x) { return AnyTensor(forward(x.get<3>("TransformerEncoder"))); }

// ---- TransformerDecoderLayer / TransformerDecoder -------------------------------------------

TransformerDecoderLayer::TransformerDecoderLayer(const TransformerDecoderLayerConfig& c, const Device& device)
    : cross_attn(MultiHeadAttentionConfig{.d_model = c.d_model, .n_heads = c.n_heads, .dropout = c.dropout,
                                          .quiet_softmax = c.quiet_softmax, .initializer = c.initializer},
                 device),
      self_attn(MultiHeadAttentionConfig{.d_model = c.d_model, .n_heads = c.n_heads, .dropout = c.dropout,
                                         .quiet_softmax = c.quiet_softmax, .initializer = c.initializer},
                device),
      pwff(c.d_model, c.d_ff, c.dropout, c.initializer, device, c.activation),
      norm_1(LayerNormConfig{.d_model = c.d_model, .epsilon = c.layer_norm_eps}, device),
      norm_2(LayerNormConfig{.d_model = c.d_model, .epsilon = c.layer_norm_eps}, device),
      norm_3(LayerNormConfig{.d_model = c.d_model, .epsilon = c.layer_norm_eps}, device),
      dropout(DropoutConfig{c.dropout}),
      norm_first(c.norm_first) {}

Tensor<3> TransformerDecoderLayer::forward(const TransformerDecoderInput& in) const {
  const Shape ts = in.target.shape(), ms = in.memory.shape();
  const std::size_t d = self_attn.d_model;
  if (ts[2] != d || ms[2] != d || ts[0] != ms[0])
    shape_error("TransformerDecoderLayer", "target [B, Lt, d_model] and memory [B, Lm, d_model] must share the batch and d_model",
                "d_model " + std::to_string(d), "target " + ts.to_string() + ", memory " + ms.to_string());
  const Tensor<3>& x0 = in.target;
  MhaInput sa = MhaInput::self_attn(norm_first ? norm_3.forward(x0) : x0);
  sa.mask_pad = in.target_mask_pad;
  sa.mask_attn = in.target_mask_attn;
  Tensor<3> x = x0 + dropout.forward(self_attn.forward(sa).context);
  Tensor<3> r = norm_first ? norm_1.forward(x) : (x = norm_1.forward(x));
  const MhaInput ca{r, in.memory, in.memory, in.memory_mask_pad, in.memory_mask_attn};
  x = x + dropout.forward(cross_attn.forward(ca).context);
  r = norm_first ? norm_2.forward(x) : (x = norm_2.forward(x));
  x = x + dropout.forward(pwff.forward(r));
  return norm_first ? x : norm_3.forward(x);
}

void TransformerDecoderLayer::visit(ModuleVisitor& v) {
  v.module("cross_attn", cross_attn);
  v.module("self_attn", self_attn);
  v.module("pwff", pwff);
  v.module("norm_1", norm_1);
  v.module("norm_2", norm_2);
  v.module("norm_3", norm_3);
  v.module("dropout", dropout);
}

TransformerDecoder::TransformerDecoder(const TransformerDecoderConfig& c, const Device& device) {
  if (c.n_layers == 0) shape_error("TransformerDecoder", "n_layers must be positive", ">= 1", "0");
  layers.reserve(c.n_layers);
  for (std::size_t i = 0; i < c.n_layers; ++i)
    layers.emplace_back(c.layer(), device);
}

Tensor<3> TransformerDecoder::forward(const TransformerDecoderInput& input) const {
  TransformerDecoderInput in = input;
  for (const TransformerDecoderLayer& l : layers) in.target = l.forward(in);
  return in.target;
}

// ---- PositionalEncoding ---------------------------------------------------------------------

namespace {

Tensor<2> sinusoid_table(const PositionalEncodingConfig& c, const Device& device) {
  if (c.d_model == 0 || c.d_model % 2 != 0 || c.max_sequence_size == 0)
    shape_error("PositionalEncoding", "d_model must be even and positive, max_sequence_size positive",
                "even d_model > 0", "d_model " + std::to_string(c.d_model) + ", max_sequence_size " + std::to_string(c.max_sequence_size));
  std::vector<float> v(c.max_sequence_size * c.d_model);
  for (std::size_t p = 0; p < c.max_sequence_size; ++p)
    for (std::size_t i = 0; i < c.d_model; i += 2) {
      const double angle = static_cast<double>(p) /
                           std::pow(static_cast<double>(c.max_timescale), static_cast<double>(i) / static_cast<double>(c.d_model));
      v[p * c.d_model + i] = static_cast<float>(std::sin(angle));
      v[p * c.d_model + i + 1] = static_cast<float>(std::cos(angle));
    }
  const Device plain = device.is_autodiff() ? device.inner() : device;
  Tensor<2> t = Tensor<2>::from_data(TensorData::from(v, Shape{c.max_sequence_size, c.d_model}), plain);
  return plain == device ? t : t.to_device(device);
}

}  // namespace

PositionalEncoding::PositionalEncoding(const PositionalEncodingConfig& c, const Device& device)
    : sinusoids(sinusoid_table(c, device)) {}

Tensor<3> PositionalEncoding::forward(const Tensor<3>& x) const {
  const Shape xs = x.shape(), ts = sinusoids.shape();
  if (xs[2] != ts[1]) shape_error("PositionalEncoding", "the input's last dim differs from d_model", std::to_string(ts[1]), "shape " + xs.to_string());
  if (xs[1] > ts[0])
    shape_error("PositionalEncoding", "sequence longer than the table (max_sequence_size)", "length <= " + std::to_string(ts[0]),
                "shape " + xs.to_string());
  Tensor<2> table = sinusoids.narrow(0, 0, xs[1]);
  if (table.device() != x.device()) {
    const Device xd = x.device();
    if (table.device().is_autodiff()) table = table.inner();
    table = table.to_device(xd.is_autodiff() ? xd.inner() : xd);
    if (xd.is_autodiff()) table = table.to_device(xd);
  }
  if (table.dtype() != x.dtype()) table = table.cast(x.dtype());
  return x + table.unsqueeze_dim(0);
}

AnyTensor PositionalEncoding::forward_any(const AnyTensor& x) { return AnyTensor(forward(x.get<3>("PositionalEncoding"))); }

}  // namespace tensor::nn
