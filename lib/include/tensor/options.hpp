// Argument types of ops: random distributions, indexing update rules, sampling options.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include "tensor/scalar.hpp"

namespace tensor {

/// A distribution for Tensor::random / random_like: Default (Float: uniform on [0, 1); Int: the
/// dtype's full range), uniform on [low, high) (Int: integers in [trunc(low), trunc(high))),
/// Bernoulli(p) (1 with probability p, else 0) or normal(mean, std) (Int: truncated). Bad
/// parameters (low > high, p outside 0..1, std < 0) are an IndexError from random().
struct Distribution {
  /// Which distribution; `a` and `b` are its parameters.
  enum class Kind : std::uint8_t { Default, Uniform, Bernoulli, Normal };
  Kind kind = Kind::Default;  ///< Default: uniform on [0, 1)
  double a = 0.0;             ///< Uniform: low; Bernoulli: p; Normal: mean
  double b = 1.0;             ///< Uniform: high; Normal: standard deviation

  /// Uniform on [low, high).
  static Distribution uniform(double low, double high) { return {Kind::Uniform, low, high}; }
  /// 1 with probability p, else 0.
  static Distribution bernoulli(double p) { return {Kind::Bernoulli, p, 0.0}; }
  /// Normal with the given mean and standard deviation.
  static Distribution normal(double mean, double std) { return {Kind::Normal, mean, std}; }
};

/// How scatter / select_assign combine a value with what is already there.
enum class IndexingUpdateOp : std::uint8_t { Assign, Add, Mul, Min, Max };

/// Tensor::pad's modes, as burn's PadMode: a constant value, a mirror that excludes
/// the edge ([1, 2, 3] padded by 2 before: [3, 2, 1, 2, 3]), or the edge repeated
/// (Edge; PyTorch calls it "replicate").
struct PadMode {
  /// Which mode; `value` is the Constant mode's fill.
  enum class Kind : std::uint8_t { Constant, Reflect, Edge };
  /// Constant (the default), Reflect or Edge.
  Kind kind = Kind::Constant;
  /// The fill value of Constant (converted to the tensor's dtype).
  Scalar value{};
  /// Pads with `v`.
  static PadMode constant(Scalar v) { return {Kind::Constant, v}; }
  /// Mirrors without repeating the edge (each pad must be below the dim's size: IndexError).
  static PadMode reflect() { return {Kind::Reflect, Scalar{}}; }
  /// Repeats the edge element (the dim must not be empty: IndexError).
  static PadMode edge() { return {Kind::Edge, Scalar{}}; }
  /// edge() (PyTorch's name).
  static PadMode replicate() { return edge(); }
};

/// grid_sample_2d: Bicubic is PyTorch's (cubic convolution with A = -0.75 over 4 x 4 taps,
/// the padding rule applied to each tap's coordinates).
struct GridSampleOptions {
  /// Interpolation: bilinear, nearest (round half to even) or bicubic.
  enum class Mode : std::uint8_t { Bilinear, Nearest, Bicubic };
  /// Where a sample falls outside the input: zeros, the border value, or the coordinate
  /// reflected back inside (then clamped).
  enum class Padding : std::uint8_t { Zeros, Border, Reflection };
  /// Bilinear unless set.
  Mode mode = Mode::Bilinear;
  /// Zeros unless set.
  Padding padding = Padding::Zeros;
  /// True: -1 and 1 are the centres of the corner pixels; false: their outer edges (PyTorch's rule).
  bool align_corners = false;
};

/// How Tensor::to_string and operator<< print (burn's PrintOptions): `precision`
/// digits after the point for floats (none: the shortest form that reads back
/// exactly, as burn's Display); a tensor of more than `threshold` elements shows only
/// `edge_items` entries at each end of every dim, with "..." between them.
struct PrintOptions {
  /// Digits after the point for floats; nullopt: the shortest form that reads back exactly.
  std::optional<std::size_t> precision;
  /// Element count above which a tensor prints in summarised form.
  std::size_t threshold = 1000;
  /// Entries shown at each end of every dim when summarised.
  std::size_t edge_items = 3;
};

}  // namespace tensor
