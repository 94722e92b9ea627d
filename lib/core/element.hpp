// Element-type plumbing shared by the backends, dispatch and the host side (TensorData):
// dtype -> C++ type
// visitation and value conversion with Rust `as` semantics (saturating float->int,
// NaN -> 0, wrapping int->int), so no conversion is undefined behaviour.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "tensor/dtype.hpp"
#include "tensor/error.hpp"
#include "tensor/half.hpp"

namespace tensor::core {

// One-byte and four-byte bool storages.
struct BoolU32 { std::uint32_t v; };

template <class T> inline constexpr bool kIsHalf = std::is_same_v<T, f16> || std::is_same_v<T, bf16>;
template <class T> inline constexpr bool kIsFloatLike = std::is_floating_point_v<T> || kIsHalf<T>;

// The type used to compute with T: halves go through float.
template <class T> struct ComputeOf { using type = T; };
template <> struct ComputeOf<f16> { using type = float; };
template <> struct ComputeOf<bf16> { using type = float; };
template <class T> using compute_t = typename ComputeOf<T>::type;

template <class T> inline compute_t<T> load_elem(T v) {
  if constexpr (kIsHalf<T>) return static_cast<float>(v); else return v;
}
template <class T> inline T store_elem(compute_t<T> v) {
  if constexpr (kIsHalf<T>) return T(v); else return v;
}

// double -> float rounded to odd: an inexact result is truncated toward zero and
// gets its last bit set. Rounding that float to f16 or bf16 (at least 2 fewer
// significand bits) then gives the correctly rounded result of the double, which
// rounding to nearest float first would not (1 + 2^-11 + 2^-40 would tie to 1).
inline float round_to_odd_float(double d) {
  float f = static_cast<float>(d);
  if (std::isnan(d) || static_cast<double>(f) == d) return f;
  std::uint32_t bits = std::bit_cast<std::uint32_t>(f);
  if (std::fabs(static_cast<double>(f)) > std::fabs(d)) --bits;  // rounded away from zero: step back
  return std::bit_cast<float>(bits | 1u);
}

// Converts one value with Rust `as` semantics. Bool targets mean "nonzero".
template <class To, class From>
inline To convert_value(From from) {
  if constexpr (std::is_same_v<From, To>) {
    return from;
  } else if constexpr (std::is_same_v<From, BoolU32>) {
    return convert_value<To>(from.v != 0);
  } else if constexpr (std::is_same_v<To, BoolU32>) {
    return BoolU32{convert_value<bool>(from) ? 1u : 0u};
  } else if constexpr (kIsHalf<From>) {
    return convert_value<To>(static_cast<float>(from));
  } else if constexpr (kIsHalf<To>) {
    if constexpr (std::is_same_v<From, double>) {
      return To(round_to_odd_float(from));  // no double rounding through float
    } else {
      return To(static_cast<float>(from));
    }
  } else if constexpr (std::is_same_v<To, bool>) {
    return from != From{};
  } else if constexpr (std::is_floating_point_v<To>) {
    return static_cast<To>(from);
  } else if constexpr (std::is_floating_point_v<From>) {  // float -> int: truncate, saturate, NaN -> 0
    if (std::isnan(from)) return To{0};
    constexpr auto lo = static_cast<From>(std::numeric_limits<To>::min());
    constexpr auto hi = static_cast<From>(std::numeric_limits<To>::max());
    if (from <= lo) return std::numeric_limits<To>::min();
    if (from >= hi) return std::numeric_limits<To>::max();
    return static_cast<To>(from);
  } else {  // int/bool -> int: two's complement wrap
    return static_cast<To>(from);
  }
}

// Calls f(T{}) with T the element type of `dtype`. Bool and BoolU8 are bool
// (one byte holding 0/1); BoolU32 is BoolU32. QFloat throws DTypeError.
// DTypeError naming the running op: qfloat or a value outside the enum.
[[noreturn]] void throw_unvisitable_dtype(DType dtype);

template <class F>
decltype(auto) visit_dtype(DType dtype, F&& f) {
  switch (dtype) {
    case DType::F64: return f(double{});
    case DType::F32: return f(float{});
    case DType::F16: return f(f16{});
    case DType::BF16: return f(bf16{});
    case DType::I64: return f(std::int64_t{});
    case DType::I32: return f(std::int32_t{});
    case DType::I16: return f(std::int16_t{});
    case DType::I8: return f(std::int8_t{});
    case DType::U64: return f(std::uint64_t{});
    case DType::U32: return f(std::uint32_t{});
    case DType::U16: return f(std::uint16_t{});
    case DType::U8: return f(std::uint8_t{});
    case DType::Bool: case DType::BoolU8: return f(bool{});
    case DType::BoolU32: return f(BoolU32{});
    case DType::QFloat: break;
  }
  throw_unvisitable_dtype(dtype);
}

// Converts n contiguous elements between dtypes.
void convert_elements(DType from, const void* src, DType to, void* dst, std::size_t n);

}  // namespace tensor::core

// dispatch spells these names dispatch::... (where they lived before lib/core/): the
// using-directive keeps that spelling valid.
namespace tensor::dispatch {
using namespace tensor::core;
}  // namespace tensor::dispatch
