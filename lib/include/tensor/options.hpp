// Argument types of ops: random distributions, indexing update rules, sampling options.
#pragma once

#include <cstdint>

namespace tensor {

struct Distribution {
  enum class Kind : std::uint8_t { Default, Uniform, Bernoulli, Normal };
  Kind kind = Kind::Default;  // Default: uniform on [0, 1)
  double a = 0.0;             // Uniform: low; Bernoulli: p; Normal: mean
  double b = 1.0;             // Uniform: high; Normal: standard deviation

  static Distribution uniform(double low, double high) { return {Kind::Uniform, low, high}; }
  static Distribution bernoulli(double p) { return {Kind::Bernoulli, p, 0.0}; }
  static Distribution normal(double mean, double std) { return {Kind::Normal, mean, std}; }
};

// How scatter / select_assign combine a value with what is already there.
enum class IndexingUpdateOp : std::uint8_t { Assign, Add, Mul, Min, Max };

struct GridSampleOptions {
  enum class Mode : std::uint8_t { Bilinear, Nearest };
  enum class Padding : std::uint8_t { Zeros, Border, Reflection };
  Mode mode = Mode::Bilinear;
  Padding padding = Padding::Zeros;
  bool align_corners = false;
};

}  // namespace tensor
