// Argument types of ops: random distributions, indexing update rules, sampling options.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include "tensor/scalar.hpp"

namespace tensor {

struct Distribution {
  enum class Kind : std::uint8_t { Default, Uniform, Bernoulli, Normal };
  Kind kind = Kind::Default;  ///< Default: uniform on [0, 1)
  double a = 0.0;             ///< Uniform: low; Bernoulli: p; Normal: mean
  double b = 1.0;             ///< Uniform: high; Normal: standard deviation

  static Distribution uniform(double low, double high) { return {Kind::Uniform, low, high}; }
  static Distribution bernoulli(double p) { return {Kind::Bernoulli, p, 0.0}; }
  static Distribution normal(double mean, double std) { return {Kind::Normal, mean, std}; }
};

/// How scatter / select_assign combine a value with what is already there.
enum class IndexingUpdateOp : std::uint8_t { Assign, Add, Mul, Min, Max };

/// Tensor::pad's modes, as burn's PadMode: a constant value, a mirror that excludes
/// the edge ([1, 2, 3] padded by 2 before: [3, 2, 1, 2, 3]), or the edge repeated
/// (Edge; PyTorch calls it "replicate").
struct PadMode {
  enum class Kind : std::uint8_t { Constant, Reflect, Edge };
  Kind kind = Kind::Constant;
  Scalar value{};
  static PadMode constant(Scalar v) { return {Kind::Constant, v}; }
  static PadMode reflect() { return {Kind::Reflect, Scalar{}}; }
  static PadMode edge() { return {Kind::Edge, Scalar{}}; }
  static PadMode replicate() { return edge(); }
};

/// grid_sample_2d: Bicubic is PyTorch's (cubic convolution with A = -0.75 over 4 x 4 taps,
/// the padding rule applied to each tap's coordinates).
struct GridSampleOptions {
  enum class Mode : std::uint8_t { Bilinear, Nearest, Bicubic };
  enum class Padding : std::uint8_t { Zeros, Border, Reflection };
  Mode mode = Mode::Bilinear;
  Padding padding = Padding::Zeros;
  bool align_corners = false;
};

/// How Tensor::to_string and operator<< print (burn's PrintOptions): `precision`
/// digits after the point for floats (none: the shortest form that reads back
/// exactly, as burn's Display); a tensor of more than `threshold` elements shows only
/// `edge_items` entries at each end of every dim, with "..." between them.
struct PrintOptions {
  std::optional<std::size_t> precision;
  std::size_t threshold = 1000;
  std::size_t edge_items = 3;
};

}  // namespace tensor
