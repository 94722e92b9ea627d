// 16-bit float storage types (IEEE binary16 and bfloat16) with exact conversions to float.
#pragma once

#include <bit>
#include <cstdint>

namespace tensor {

/// IEEE 754 binary16. Arithmetic is done by converting to float.
struct f16 {
  /// The raw IEEE binary16 bits.
  std::uint16_t bits = 0;

  /// +0.
  constexpr f16() = default;
  /// `v` rounded to nearest, ties to even (from_float).
  explicit f16(float v) : bits(from_float(v)) {}
  /// The exact float value.
  explicit operator float() const { return to_float(bits); }

  /// The value with these raw bits.
  static constexpr f16 from_bits(std::uint16_t b) { f16 h; h.bits = b; return h; }

  /// The exact float value of the binary16 bits `h` (subnormals, infinities and NaN included).
  static float to_float(std::uint16_t h) {
    const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
    const std::uint32_t exp = (h >> 10) & 0x1fu;
    const std::uint32_t man = h & 0x3ffu;
    if (exp == 0) {
      // Zero or subnormal: value = man * 2^-24, exact in float.
      const float mag = static_cast<float>(man) * 5.9604644775390625e-8f;
      return sign ? -mag : mag;
    }
    if (exp == 31) return std::bit_cast<float>(sign | 0x7f800000u | (man << 13));
    return std::bit_cast<float>(sign | ((exp + 112u) << 23) | (man << 13));
  }

  /// Round to nearest, ties to even; overflow to infinity; NaN stays NaN.
  static std::uint16_t from_float(float f) {
    const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
    const std::uint32_t sign = (x >> 16) & 0x8000u;
    const std::uint32_t abs = x & 0x7fffffffu;
    if (abs > 0x7f800000u) return static_cast<std::uint16_t>(sign | 0x7e00u | ((abs >> 13) & 0x3ffu));
    if (abs >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // rounds past 65504
    if (abs < 0x38800000u) {
      // Result is subnormal (or zero) in half: scale by 2^24 and round.
      const float mag = std::bit_cast<float>(abs) * 16777216.0f;
      // mag < 1024 here, so the conversion is exact after rounding to nearest even.
      const float r = mag + 12582912.0f - 12582912.0f;  // 1.5*2^23 forces round-half-even
      return static_cast<std::uint16_t>(sign | static_cast<std::uint32_t>(r));
    }
    std::uint32_t e = (abs >> 23) - 112u;
    std::uint32_t m = abs & 0x7fffffu;
    std::uint32_t h = (e << 10) | (m >> 13);
    const std::uint32_t rest = m & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;  // may carry into the exponent: correct
    return static_cast<std::uint16_t>(sign | h);
  }
};

/// bfloat16: the upper half of a float.
struct bf16 {
  /// The raw bits: the upper 16 bits of a float.
  std::uint16_t bits = 0;

  /// +0.
  constexpr bf16() = default;
  /// `v` rounded to nearest, ties to even (from_float).
  explicit bf16(float v) : bits(from_float(v)) {}
  /// The exact float value.
  explicit operator float() const { return to_float(bits); }

  /// The value with these raw bits.
  static constexpr bf16 from_bits(std::uint16_t b) { bf16 h; h.bits = b; return h; }
  /// The exact float value of the bfloat16 bits `b`.
  static float to_float(std::uint16_t b) { return std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16); }

  /// Round to nearest, ties to even; NaN stays a quiet NaN.
  static std::uint16_t from_float(float f) {
    const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((x >> 16) | 0x40u);
    const std::uint32_t lsb = (x >> 16) & 1u;
    return static_cast<std::uint16_t>((x + 0x7fffu + lsb) >> 16);
  }
};

}  // namespace tensor
