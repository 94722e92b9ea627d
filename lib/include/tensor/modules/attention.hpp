// burn-nn's attention modules: MultiHeadAttention (padding and attention masks, the causal
// mask), TransformerEncoderLayer / TransformerDecoderLayer (pre- and post-norm),
// TransformerEncoder, TransformerDecoder and PositionalEncoding (bodies in
// lib/src/modules/attention.cpp).
#pragma once

#include <cstddef>
#include <optional>
#include <vector>

#include "tensor/module.hpp"
#include "tensor/modules/core.hpp"
#include "tensor/modules/norm.hpp"

namespace tensor::nn {

/// burn's generate_autoregressive_mask: [batch, seq, seq], true above the diagonal (a
/// position may not attend to later ones).
TENSOR_API Tensor<3, Bool> generate_autoregressive_mask(std::size_t batch, std::size_t seq,
                                                        const Device& device = Device::default_device());

/// burn's MultiHeadAttentionConfig.
struct MultiHeadAttentionConfig {
  std::size_t d_model = 0;  ///< the model width; a positive multiple of n_heads
  std::size_t n_heads = 0;  ///< heads; d_k = d_model / n_heads
  double dropout = 0.1;  ///< the dropout probability on the scores, in [0, 1)
  double min_float = -1.0e4;  ///< the score a masked entry gets before the softmax
  bool quiet_softmax = false;  ///< softmax with an extra zero logit (a row may attend to nothing)
  Initializer initializer = Initializer::module_default();  ///< draws the four projections' weights and biases
  ///@{
  /// Whether the query / key / value / output projection has a bias.
  bool query_bias = true, key_bias = true, value_bias = true, output_bias = true;
  ///@}
};

/// burn's MhaInput: query [B, Lq, d], key / value [B, Lk, d]; mask_pad [B, Lk] (true: a
/// padding key), mask_attn [B, Lq, Lk] (true: masked out).
struct MhaInput {
  ///@{
  /// The attention's inputs (Float, on the module's device).
  Tensor<3> query, key, value;
  ///@}
  std::optional<Tensor<2, Bool>> mask_pad;   ///< [B, Lk], true: a padding key; empty: none
  std::optional<Tensor<3, Bool>> mask_attn;  ///< [B, Lq, Lk], true: masked out; empty: none
  /// Self-attention: x as query, key and value, no masks.
  static MhaInput self_attn(const Tensor<3>& x) { return {x, x, x, std::nullopt, std::nullopt}; }
};

/// weights [B, heads, Lq, Lk] (after softmax), context [B, Lq, d].
struct MhaOutput {
  Tensor<4> weights;  ///< [B, heads, Lq, Lk], the softmax of the (masked) scores
  Tensor<3> context;  ///< [B, Lq, d], after the output projection
};

/// burn's MultiHeadAttention (see MultiHeadAttentionConfig, MhaInput, MhaOutput); record
/// names query, key, value, output (Linears), dropout.
class TENSOR_API MultiHeadAttention : public Module {
 public:
  /// ShapeError naming MultiHeadAttention when d_model or n_heads is 0 or d_model is not
  /// divisible by n_heads; ShapeError naming Dropout when dropout is outside [0, 1).
  explicit MultiHeadAttention(const MultiHeadAttentionConfig& config, const Device& device = Device::default_device());
  /// As burn's: scores = q k^T / sqrt(d_k), dropout on the scores, masked entries set to
  /// min_float, softmax (quiet_softmax: with an extra zero logit), context = weights v, then
  /// the output projection. ShapeError naming the mask when its shape does not fit, and naming
  /// MultiHeadAttention when a last dim is not d_model, key and value differ in shape or the
  /// batches differ; DeviceError / DTypeError (naming Linear) for inputs unlike the weights.
  MhaOutput forward(const MhaInput& input) const;

  ///@{
  /// The projections, d_model -> d_model (weights [d_model, d_model]).
  Linear query, key, value, output;
  ///@}
  Dropout dropout;  ///< applied to the scores (training only)
  ///@{
  /// The config's d_model and n_heads, and d_k = d_model / n_heads.
  std::size_t d_model, n_heads, d_k;
  ///@}
  double min_float;    ///< the config's min_float
  bool quiet_softmax;  ///< the config's quiet_softmax

  void visit(ModuleVisitor& v) override;
  const char* type_name() const override { return "MultiHeadAttention"; }
};

/// One transformer layer, encoder or decoder (d_ff: the feed-forward width).
struct TransformerLayerConfig {
  std::size_t d_model = 0;  ///< the model width (the inputs' last dim); a positive multiple of n_heads
  std::size_t d_ff = 0;  ///< the feed-forward block's inner width; positive
  std::size_t n_heads = 0;  ///< attention heads; positive
  double dropout = 0.1;  ///< the dropout probability (attention scores, residual branches, feed-forward), in [0, 1)
  bool norm_first = false;  ///< pre-norm when true, post-norm when false
  bool quiet_softmax = false;  ///< the attention's softmax with an extra zero logit
  double layer_norm_eps = 1e-5;  ///< the LayerNorms' epsilon
  Initializer initializer = Initializer::module_default();  ///< draws every Linear's weight and bias
  ActivationConfig activation{ActivationConfig::Kind::Gelu};  ///< the feed-forward block's
};
/// burn's TransformerEncoderConfig for one layer.
using TransformerEncoderLayerConfig = TransformerLayerConfig;
/// burn's TransformerDecoderConfig for one layer.
using TransformerDecoderLayerConfig = TransformerLayerConfig;

/// burn's PositionWiseFeedForward: linear_outer(dropout(activation(linear_inner(x)))),
/// activation GELU unless given.
class TENSOR_API PositionWiseFeedForward : public Module {
 public:
  /// linear_inner d_model -> d_ff and linear_outer d_ff -> d_model (with biases) drawn by
  /// `init` on `device`. ShapeError naming Linear when a width is 0, naming Dropout when
  /// `dropout` is outside [0, 1).
  PositionWiseFeedForward(std::size_t d_model, std::size_t d_ff, double dropout, const Initializer& init,
                          const Device& device = Device::default_device(),
                          const ActivationConfig& activation = {ActivationConfig::Kind::Gelu});
  /// x [B, L, d_model] -> [B, L, d_model]; errors as Linear::forward's.
  Tensor<3> forward(const Tensor<3>& x) const;
  ///@{
  /// The two projections (record names linear_inner, linear_outer).
  Linear linear_inner, linear_outer;
  ///@}
  Dropout dropout;              ///< after the activation
  ActivationConfig activation;  ///< between the projections
  void visit(ModuleVisitor& v) override;
  const char* type_name() const override { return "PositionWiseFeedForward"; }
};

/// burn's TransformerEncoderLayer. norm_first (pre-norm): x + drop(mha(norm_2(x))), then
/// + drop(pwff(norm_1(x))); otherwise (post-norm) norm_1(x + drop(mha(x))), then
/// norm_2(x + drop(pwff(x))).
class TENSOR_API TransformerEncoderLayer : public Module {
 public:
  /// The submodules on `device`; ShapeError as MultiHeadAttention's, PositionWiseFeedForward's
  /// and LayerNorm's constructors.
  explicit TransformerEncoderLayer(const TransformerEncoderLayerConfig& config,
                                   const Device& device = Device::default_device());
  /// x [B, L, d_model] -> [B, L, d_model], self-attention with the optional masks (shapes and
  /// errors as MultiHeadAttention::forward's).
  Tensor<3> forward(const Tensor<3>& x, const std::optional<Tensor<2, Bool>>& mask_pad = std::nullopt,
                    const std::optional<Tensor<3, Bool>>& mask_attn = std::nullopt) const;

  MultiHeadAttention mha;        ///< the self-attention
  PositionWiseFeedForward pwff;  ///< the feed-forward block
  ///@{
  /// The two LayerNorms (see the class comment for where each applies).
  LayerNorm norm_1, norm_2;
  ///@}
  Dropout dropout;  ///< on the residual branches
  bool norm_first;  ///< the config's norm_first (pre-norm)

  void visit(ModuleVisitor& v) override;
  const char* type_name() const override { return "TransformerEncoderLayer"; }
  AnyTensor forward_any(const AnyTensor& x) override;
};

/// A stack of n_layers transformer layers, each built from layer(): burn's
/// TransformerEncoderConfig and TransformerDecoderConfig, which have the same fields.
struct TransformerConfig {
  std::size_t d_model = 0;  ///< the model width (the inputs' last dim); a positive multiple of n_heads
  std::size_t d_ff = 0;  ///< the feed-forward block's inner width; positive
  std::size_t n_heads = 0;  ///< attention heads; positive
  std::size_t n_layers = 0;  ///< layers; positive
  double dropout = 0.1;  ///< the dropout probability (attention scores, residual branches, feed-forward), in [0, 1)
  bool norm_first = false;  ///< pre-norm when true, post-norm when false
  bool quiet_softmax = false;  ///< the attention's softmax with an extra zero logit
  double layer_norm_eps = 1e-5;  ///< the LayerNorms' epsilon
  Initializer initializer = Initializer::module_default();  ///< draws every Linear's weight and bias
  ActivationConfig activation{ActivationConfig::Kind::Gelu};  ///< the feed-forward block's

  /// The config of each layer (every field but n_layers).
  TransformerLayerConfig layer() const {
    return {.d_model = d_model, .d_ff = d_ff, .n_heads = n_heads, .dropout = dropout, .norm_first = norm_first,
            .quiet_softmax = quiet_softmax, .layer_norm_eps = layer_norm_eps, .initializer = initializer,
            .activation = activation};
  }
};
/// burn's TransformerEncoderConfig: n_layers TransformerEncoderLayers applied in order
/// (named layers.0, layers.1, ...), every one with the same masks.
using TransformerEncoderConfig = TransformerConfig;
/// burn's TransformerDecoderConfig: n_layers TransformerDecoderLayers (layers.0, ...), each
/// given the same memory and masks.
using TransformerDecoderConfig = TransformerConfig;

/// burn's TransformerEncoder (see TransformerEncoderConfig).
class TENSOR_API TransformerEncoder : public Module {
 public:
  /// n_layers layers on `device`. ShapeError naming TransformerEncoder when n_layers is 0, and
  /// as TransformerEncoderLayer's constructor.
  explicit TransformerEncoder(const TransformerEncoderConfig& config, const Device& device = Device::default_device());
  /// x [B, L, d_model] through every layer in order, each with the same masks (errors as
  /// TransformerEncoderLayer::forward's).
  Tensor<3> forward(const Tensor<3>& x, const std::optional<Tensor<2, Bool>>& mask_pad = std::nullopt,
                    const std::optional<Tensor<3, Bool>>& mask_attn = std::nullopt) const;

  std::vector<TransformerEncoderLayer> layers;  ///< record names layers.0, layers.1, ...

  void visit(ModuleVisitor& v) override { v.module("layers", layers); }
  const char* type_name() const override { return "TransformerEncoder"; }
  AnyTensor forward_any(const AnyTensor& x) override;
};

/// burn's TransformerDecoderInput: the target [B, Lt, d] with its self-attention masks
/// (target_mask_attn: generate_autoregressive_mask(B, Lt) for a causal decoder), the memory
/// [B, Lm, d] (the encoder's output) with the cross-attention masks (mask_pad [B, Lm],
/// mask_attn [B, Lt, Lm]; true: masked out).
struct TransformerDecoderInput {
  Tensor<3> target;  ///< [B, Lt, d], the decoder's input
  std::optional<Tensor<2, Bool>> target_mask_pad{};  ///< [B, Lt], true: a padding position; empty: none
  std::optional<Tensor<3, Bool>> target_mask_attn{};  ///< [B, Lt, Lt], true: masked out; empty: none
  Tensor<3> memory;  ///< [B, Lm, d], the encoder's output
  std::optional<Tensor<2, Bool>> memory_mask_pad{};  ///< [B, Lm], true: a padding position; empty: none
  std::optional<Tensor<3, Bool>> memory_mask_attn{};  ///< [B, Lt, Lm], true: masked out; empty: none
  /// burn's TransformerDecoderInput::new: no masks.
  static TransformerDecoderInput make(const Tensor<3>& target, const Tensor<3>& memory) {
    return {target, std::nullopt, std::nullopt, memory, std::nullopt, std::nullopt};
  }
};

/// burn's TransformerDecoderLayer (record names cross_attn, self_attn, pwff, norm_1..3).
/// Post-norm (default): x = norm_1(x + drop(self_attn(x))), x = norm_2(x + drop(cross_attn(x,
/// memory))), x = norm_3(x + drop(pwff(x))). Pre-norm (norm_first): x += drop(self_attn(norm_3(x))),
/// x += drop(cross_attn(norm_1(x), memory)), x += drop(pwff(norm_2(x))) (burn's norm order).
class TENSOR_API TransformerDecoderLayer : public Module {
 public:
  /// The submodules on `device`; ShapeError as MultiHeadAttention's, PositionWiseFeedForward's
  /// and LayerNorm's constructors.
  explicit TransformerDecoderLayer(const TransformerDecoderLayerConfig& config,
                                   const Device& device = Device::default_device());
  /// The new target [B, Lt, d]. ShapeError naming TransformerDecoderLayer when the target's or
  /// the memory's last dim is not d_model or their batches differ; mask shapes as
  /// MultiHeadAttention's.
  Tensor<3> forward(const TransformerDecoderInput& input) const;

  ///@{
  /// The attention over the memory and the self-attention over the target.
  MultiHeadAttention cross_attn, self_attn;
  ///@}
  PositionWiseFeedForward pwff;  ///< the feed-forward block
  ///@{
  /// The three LayerNorms (see the class comment for where each applies).
  LayerNorm norm_1, norm_2, norm_3;
  ///@}
  Dropout dropout;  ///< on the residual branches
  bool norm_first;  ///< the config's norm_first (pre-norm)

  void visit(ModuleVisitor& v) override;
  const char* type_name() const override { return "TransformerDecoderLayer"; }
};

/// burn's TransformerDecoder (see TransformerDecoderConfig).
class TENSOR_API TransformerDecoder : public Module {
 public:
  /// n_layers layers on `device`. ShapeError naming TransformerDecoder when n_layers is 0, and
  /// as TransformerDecoderLayer's constructor.
  explicit TransformerDecoder(const TransformerDecoderConfig& config, const Device& device = Device::default_device());
  /// The target [B, Lt, d] through every layer in order, each given the same memory and
  /// masks (errors as TransformerDecoderLayer::forward's).
  Tensor<3> forward(const TransformerDecoderInput& input) const;

  std::vector<TransformerDecoderLayer> layers;  ///< record names layers.0, layers.1, ...

  void visit(ModuleVisitor& v) override { v.module("layers", layers); }
  const char* type_name() const override { return "TransformerDecoder"; }
};

/// burn's PositionalEncodingConfig: x [B, L, d_model] + the sinusoid table's first L rows,
/// pe[p, 2i] = sin(p / max_timescale^(2i / d)), pe[p, 2i + 1] = cos(the same). A constant,
/// not a parameter or buffer (burn's): not saved. ShapeError naming PositionalEncoding when
/// L > max_sequence_size or the last dim is not d_model (which must be even).
struct PositionalEncodingConfig {
  std::size_t d_model = 0;  ///< the width (x's last dim); even and positive
  std::size_t max_sequence_size = 5000;  ///< the table's rows, the longest L; positive
  std::size_t max_timescale = 10000;  ///< the sinusoids' longest period scale
};

/// burn's PositionalEncoding (see PositionalEncodingConfig); no parameters or buffers.
class TENSOR_API PositionalEncoding : public Module {
 public:
  /// The table computed on the host and put on `device`. ShapeError naming PositionalEncoding
  /// when d_model is 0 or odd or max_sequence_size is 0.
  explicit PositionalEncoding(const PositionalEncodingConfig& config, const Device& device = Device::default_device());
  /// x [B, L, d_model] + the table's first L rows (moved to x's device and dtype when they
  /// differ), same shape. ShapeError naming PositionalEncoding as the config's comment says.
  Tensor<3> forward(const Tensor<3>& x) const;
  Tensor<2> sinusoids;  ///< [max_sequence_size, d_model]
  void visit(ModuleVisitor&) override {}
  const char* type_name() const override { return "PositionalEncoding"; }
  AnyTensor forward_any(const AnyTensor& x) override;
};

}  // namespace tensor::nn
