// The quantization scheme (burn's QuantScheme and its parts): plain values, no library calls.
// Included by tensor/data.hpp, whose quantized TensorData carries one; the operations on
// quantized tensors are in tensor/quantization.hpp.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <utility>

#include "tensor/error.hpp"

namespace tensor {

/// What a stored code means: 8, 4 or 2 bits, "F" full range [-2^(n-1), 2^(n-1)-1] or "S"
/// symmetric [-(2^(n-1)-1), 2^(n-1)-1].
enum class QuantValue : std::uint8_t { Q8F, Q8S, Q4F, Q4S, Q2F, Q2S };
/// The container of the codes: one i8 per element (Native), or u32 words holding 32/bits
/// codes each, lowest bits first, packed along the last axis line by line (burn's
/// PackedU32(0)).
enum class QuantStore : std::uint8_t { Native, PackedU32 };
/// Only symmetric quantization (no zero point), as in burn.
enum class QuantMode : std::uint8_t { Symmetric };
/// The dtype the scales are stored in (burn's QuantParam; main's ScaleDtype). A computed
/// scale is rounded UP to it, so the scale quantization divides by is the stored one.
enum class ScaleDtype : std::uint8_t { F32, F16, BF16 };
/// burn's name for the scale dtype.
using QuantParam = ScaleDtype;

/// A block: extents over the trailing axes, right-aligned ([32] on a rank-2 tensor is
/// [1, 32]). Up to 5 extents; each up to the whole axis (burn caps them at 255; libtensor
/// accepts any u32 so a per-output-channel block such as [1, IC*KH*KW] works for any layer).
struct BlockSize {
  static constexpr std::size_t kMaxDims = 5;  ///< the most extents a block has
  std::array<std::uint32_t, kMaxDims> dims{};  ///< the extents; the first `rank` are used
  std::uint8_t rank = 0;                       ///< how many extents

  /// No extents (rank 0).
  BlockSize() = default;
  /// The given extents, outermost first; ShapeError beyond kMaxDims.
  BlockSize(std::initializer_list<std::uint32_t> extents) {  // NOLINT: implicit, as burn's [..]
    if (extents.size() > kMaxDims)
      throw ShapeError("[BlockSize] too many extents; expected at most 5; got " + std::to_string(extents.size()));
    for (std::uint32_t e : extents) dims[rank++] = e;
  }
  /// Elements in one block (the product of the extents).
  std::size_t num_elements() const {
    std::size_t n = 1;
    for (std::size_t i = 0; i < rank; ++i) n *= dims[i];
    return n;
  }
  /// Same rank and extents.
  constexpr bool operator==(const BlockSize& o) const {
    if (rank != o.rank) return false;
    for (std::size_t i = 0; i < rank; ++i)
      if (dims[i] != o.dims[i]) return false;
    return true;
  }
};

/// The granularity of the scales: one for the tensor, or one per block.
struct QuantLevel {
  /// One scale for the tensor, or one per block.
  enum class Tag : std::uint8_t { Tensor, Block };
  Tag tag = Tag::Tensor;  ///< which of the two
  BlockSize shape;  ///< Block only

  /// One scale for the whole tensor.
  static QuantLevel tensor() { return {}; }
  /// One scale per block of extents `b`.
  static QuantLevel block(BlockSize b) { return {Tag::Block, b}; }
  /// Whether the scales are per block.
  bool is_block() const { return tag == Tag::Block; }
  /// Same tag and, per block, the same block.
  constexpr bool operator==(const QuantLevel& o) const { return tag == o.tag && (tag == Tag::Tensor || shape == o.shape); }
};

/// burn's QuantScheme. The defaults are burn's (Q8F, PackedU32, per tensor, F32 scales);
/// Q8S with the Native store is what docs/quantization.md recommends for int8.
struct QuantScheme {
  QuantValue value = QuantValue::Q8F;         ///< bits and range of a code
  QuantParam param = ScaleDtype::F32;         ///< the dtype the scales are stored in
  QuantStore store = QuantStore::PackedU32;   ///< how codes are stored in TensorData
  QuantLevel level{};                         ///< per tensor or per block
  QuantMode mode = QuantMode::Symmetric;      ///< symmetric only (no zero point)

  /// The builder (burn 0.22.0-pre.2's names, and main's per_tensor / per_block): a copy
  /// with one field (per_tensor / per_block: the level and the scale dtype) replaced.
  ///@{
  QuantScheme with_value(QuantValue v) const { QuantScheme s = *this; s.value = v; return s; }
  QuantScheme with_param(QuantParam p) const { QuantScheme s = *this; s.param = p; return s; }
  QuantScheme with_store(QuantStore st) const { QuantScheme s = *this; s.store = st; return s; }
  QuantScheme with_level(QuantLevel l) const { QuantScheme s = *this; s.level = l; return s; }
  QuantScheme with_mode(QuantMode m) const { QuantScheme s = *this; s.mode = m; return s; }
  QuantScheme per_tensor(ScaleDtype p) const { return with_level(QuantLevel::tensor()).with_param(p); }
  QuantScheme per_block(BlockSize b, ScaleDtype p) const { return with_level(QuantLevel::block(b)).with_param(p); }
  ///@}

  /// The code range [a, b] of the value.
  std::pair<int, int> range() const {
    switch (value) {
      case QuantValue::Q8F: return {-128, 127};
      case QuantValue::Q8S: return {-127, 127};
      case QuantValue::Q4F: return {-8, 7};
      case QuantValue::Q4S: return {-7, 7};
      case QuantValue::Q2F: return {-2, 1};
      case QuantValue::Q2S: return {-1, 1};
    }
    return {0, 0};
  }
  /// Bits per code: 8, 4 or 2.
  int size_bits_value() const {
    return value <= QuantValue::Q8S ? 8 : value <= QuantValue::Q4S ? 4 : 2;
  }
  /// Codes per storage element: 1 (Native) or 32 / bits (PackedU32).
  int num_quants() const { return store == QuantStore::Native ? 1 : 32 / size_bits_value(); }
  /// The block of a per-block scheme; empty per tensor.
  std::optional<BlockSize> block_size() const { return level.is_block() ? std::optional<BlockSize>(level.shape) : std::nullopt; }
  /// The dtype the scales are stored in.
  ScaleDtype scale_dtype() const { return param; }
  /// Every field equal.
  constexpr bool operator==(const QuantScheme& o) const {
    return value == o.value && param == o.param && store == o.store && level == o.level && mode == o.mode;
  }
};

/// What a float op with quantized operands returns (burn's QuantPropagation): Inhibit, a float
/// tensor (the default); Propagate, the result quantized again with the first quantized
/// operand's scheme.
enum class QuantPropagation : std::uint8_t { Propagate, Inhibit };

/// A device's quantization settings (burn's QuantConfig), in its settings table
/// (DeviceSettings::quant; set once, before the device's first use, by
/// set_default_quantization).
struct QuantConfig {
  QuantScheme scheme{};                                      ///< burn's default scheme unless set
  QuantPropagation propagation = QuantPropagation::Inhibit;  ///< see QuantPropagation
  constexpr bool operator==(const QuantConfig& o) const { return scheme == o.scheme && propagation == o.propagation; }
};

}  // namespace tensor
