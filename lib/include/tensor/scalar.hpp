// A tagged scalar passed to scalar ops (add_scalar, full, mask_fill, clamp ...).
#pragma once

#include <cstdint>
#include <type_traits>

#include "tensor/half.hpp"

namespace tensor {

/// Holds a float, signed, unsigned or bool value. The op converts it to the
/// tensor's dtype (floats are truncated toward zero for int tensors).
class Scalar {
 public:
  /// Which value is held: a double, an int64, a uint64 or a bool.
  enum class Kind : std::uint8_t { Float, Int, UInt, Bool };

  /// The Int 0.
  constexpr Scalar() : kind_(Kind::Int), i_(0) {}
  /// A float value (any floating-point type, held as a double); implicit.
  template <class T, std::enable_if_t<std::is_floating_point_v<T>, int> = 0>
  constexpr Scalar(T v) : kind_(Kind::Float), f_(static_cast<double>(v)) {}  // NOLINT
  /// A signed integer (held as int64); implicit.
  template <class T, std::enable_if_t<std::is_integral_v<T> && std::is_signed_v<T>, int> = 0>
  constexpr Scalar(T v) : kind_(Kind::Int), i_(v) {}  // NOLINT
  /// An unsigned integer (held as uint64); implicit.
  template <class T, std::enable_if_t<std::is_integral_v<T> && std::is_unsigned_v<T> && !std::is_same_v<T, bool>, int> = 0>
  constexpr Scalar(T v) : kind_(Kind::UInt), u_(v) {}  // NOLINT
  /// A bool; implicit.
  constexpr Scalar(bool v) : kind_(Kind::Bool), b_(v) {}  // NOLINT
  /// An f16 value, held exactly as a double; implicit.
  Scalar(f16 v) : kind_(Kind::Float), f_(static_cast<float>(v)) {}  // NOLINT
  /// A bf16 value, held exactly as a double; implicit.
  Scalar(bf16 v) : kind_(Kind::Float), f_(static_cast<float>(v)) {}  // NOLINT

  /// Which value is held.
  constexpr Kind kind() const { return kind_; }
  /// True for a float value.
  constexpr bool is_float() const { return kind_ == Kind::Float; }

  /// The value as a double (an int64 or uint64 beyond 2^53 rounds; bool: 0 or 1).
  constexpr double to_double() const {
    switch (kind_) {
      case Kind::Float: return f_;
      case Kind::Int: return static_cast<double>(i_);
      case Kind::UInt: return static_cast<double>(u_);
      case Kind::Bool: return b_ ? 1.0 : 0.0;
    }
    return 0.0;
  }
  /// Saturating, NaN -> 0 (Rust `as` semantics), so no input is undefined behaviour.
  constexpr std::int64_t to_int64() const {
    switch (kind_) {
      case Kind::Float:
        if (!(f_ == f_)) return 0;
        if (f_ >= 9223372036854775807.0) return INT64_MAX;
        if (f_ <= -9223372036854775808.0) return INT64_MIN;
        return static_cast<std::int64_t>(f_);
      case Kind::Int: return i_;
      case Kind::UInt: return static_cast<std::int64_t>(u_);
      case Kind::Bool: return b_ ? 1 : 0;
    }
    return 0;
  }
  /// The value as a uint64, saturating: a negative or NaN float gives 0; a negative int wraps
  /// (two's complement).
  constexpr std::uint64_t to_uint64() const {
    switch (kind_) {
      case Kind::Float:
        if (!(f_ > 0)) return 0;
        if (f_ >= 18446744073709551615.0) return UINT64_MAX;
        return static_cast<std::uint64_t>(f_);
      case Kind::Int: return static_cast<std::uint64_t>(i_);
      case Kind::UInt: return u_;
      case Kind::Bool: return b_ ? 1 : 0;
    }
    return 0;
  }
  /// True when the value is nonzero (NaN is true).
  constexpr bool to_bool() const {
    switch (kind_) {
      case Kind::Float: return f_ != 0.0;
      case Kind::Int: return i_ != 0;
      case Kind::UInt: return u_ != 0;
      case Kind::Bool: return b_;
    }
    return false;
  }

 private:
  Kind kind_;
  union {
    double f_;
    std::int64_t i_;
    std::uint64_t u_;
    bool b_;
  };
};

}  // namespace tensor
