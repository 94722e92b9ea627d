// Element types (DType and its per-kind subsets) and the per-device usage flags.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <type_traits>

#include "tensor/half.hpp"

namespace tensor {

/// Every element type a tensor can have. Bool has three storages: one byte
/// (Bool = native, BoolU8) or four bytes (BoolU32). QFloat is reserved for
/// quantized tensors.
enum class DType : std::uint8_t {
  F64, F32, F16, BF16,
  I64, I32, I16, I8,
  U64, U32, U16, U8,
  Bool, BoolU8, BoolU32,
  QFloat,
};
inline constexpr int kDTypeCount = 16;

enum class FloatDType : std::uint8_t { F64, F32, F16, BF16 };
enum class IntDType : std::uint8_t { I64, I32, I16, I8, U64, U32, U16, U8 };
enum class BoolDType : std::uint8_t { Native, U8, U32 };

/// A value of the enum (not an out-of-range integer cast to it).
constexpr bool is_valid(DType t) { return static_cast<unsigned>(t) < static_cast<unsigned>(kDTypeCount); }
constexpr bool is_valid(FloatDType t) { return static_cast<unsigned>(t) <= static_cast<unsigned>(FloatDType::BF16); }
constexpr bool is_valid(IntDType t) { return static_cast<unsigned>(t) <= static_cast<unsigned>(IntDType::U8); }
constexpr bool is_valid(BoolDType t) { return static_cast<unsigned>(t) <= static_cast<unsigned>(BoolDType::U32); }

constexpr bool is_float(DType t) { return t <= DType::BF16; }
constexpr bool is_signed_int(DType t) { return t >= DType::I64 && t <= DType::I8; }
constexpr bool is_unsigned_int(DType t) { return t >= DType::U64 && t <= DType::U8; }
constexpr bool is_int(DType t) { return t >= DType::I64 && t <= DType::U8; }
constexpr bool is_bool(DType t) { return t >= DType::Bool && t <= DType::BoolU32; }

constexpr std::size_t dtype_size(DType t) {
  switch (t) {
    case DType::F64: case DType::I64: case DType::U64: return 8;
    case DType::F32: case DType::I32: case DType::U32: case DType::BoolU32: return 4;
    case DType::F16: case DType::BF16: case DType::I16: case DType::U16: return 2;
    case DType::I8: case DType::U8: case DType::Bool: case DType::BoolU8: case DType::QFloat: return 1;
  }
  return 0;
}

constexpr std::string_view dtype_name(DType t) {
  constexpr std::string_view kNames[kDTypeCount] = {
      "f64", "f32", "f16", "bf16", "i64", "i32", "i16", "i8",
      "u64", "u32", "u16", "u8", "bool", "bool(u8)", "bool(u32)", "qfloat"};
  return is_valid(t) ? kNames[static_cast<int>(t)] : std::string_view("invalid dtype");
}

constexpr DType to_dtype(FloatDType t) { return static_cast<DType>(static_cast<int>(t)); }
constexpr DType to_dtype(IntDType t) { return static_cast<DType>(static_cast<int>(t) + 4); }
constexpr DType to_dtype(BoolDType t) { return static_cast<DType>(static_cast<int>(t) + 12); }
constexpr FloatDType to_float_dtype(DType t) { return static_cast<FloatDType>(static_cast<int>(t)); }  // t must be float
constexpr IntDType to_int_dtype(DType t) { return static_cast<IntDType>(static_cast<int>(t) - 4); }     // t must be int
constexpr BoolDType to_bool_dtype(DType t) { return static_cast<BoolDType>(static_cast<int>(t) - 12); } // t must be bool

/// The C++ type that holds one element of a dtype, and back.
template <class T> struct DTypeOf;
template <> struct DTypeOf<double> { static constexpr DType value = DType::F64; };
template <> struct DTypeOf<float> { static constexpr DType value = DType::F32; };
template <> struct DTypeOf<f16> { static constexpr DType value = DType::F16; };
template <> struct DTypeOf<bf16> { static constexpr DType value = DType::BF16; };
template <> struct DTypeOf<std::int64_t> { static constexpr DType value = DType::I64; };
template <> struct DTypeOf<std::int32_t> { static constexpr DType value = DType::I32; };
template <> struct DTypeOf<std::int16_t> { static constexpr DType value = DType::I16; };
template <> struct DTypeOf<std::int8_t> { static constexpr DType value = DType::I8; };
template <> struct DTypeOf<std::uint64_t> { static constexpr DType value = DType::U64; };
template <> struct DTypeOf<std::uint32_t> { static constexpr DType value = DType::U32; };
template <> struct DTypeOf<std::uint16_t> { static constexpr DType value = DType::U16; };
template <> struct DTypeOf<std::uint8_t> { static constexpr DType value = DType::U8; };
template <> struct DTypeOf<bool> { static constexpr DType value = DType::Bool; };
template <class T> inline constexpr DType dtype_of = DTypeOf<T>::value;

/// What a device can do with a dtype (SPEC §3).
enum class DTypeUsage : std::uint8_t {
  Storage = 1,      // can live on the device and be converted
  Arithmetic = 2,   // general elementwise ops and reductions
  Accelerated = 4,  // a hardware fast path (matrix units, native bf16 dot, ...)
};

class DTypeUsageSet {
 public:
  constexpr DTypeUsageSet() = default;
  constexpr DTypeUsageSet(DTypeUsage u) : bits_(static_cast<std::uint8_t>(u)) {}  // NOLINT: implicit by design
  static constexpr DTypeUsageSet general() { return DTypeUsageSet(DTypeUsage::Storage) | DTypeUsage::Arithmetic; }
  static constexpr DTypeUsageSet from_bits(std::uint8_t b) { DTypeUsageSet s; s.bits_ = b & 7u; return s; }

  constexpr bool contains(DTypeUsage u) const { return (bits_ & static_cast<std::uint8_t>(u)) != 0; }
  constexpr bool contains_all(DTypeUsageSet o) const { return (bits_ & o.bits_) == o.bits_; }
  constexpr bool empty() const { return bits_ == 0; }
  constexpr std::uint8_t bits() const { return bits_; }
  constexpr DTypeUsageSet operator|(DTypeUsageSet o) const { return from_bits(bits_ | o.bits_); }
  constexpr bool operator==(const DTypeUsageSet&) const = default;

 private:
  std::uint8_t bits_ = 0;
};

}  // namespace tensor

namespace tensor::detail {

/// The tensor kinds a handle carries (tensor/detail.hpp). Here, beside the dtypes it groups,
/// so the library's internals (lib/core/kind.hpp) have it without the firewall header.
enum class Kind : std::uint8_t { Float, Int, Bool, QFloat };

}  // namespace tensor::detail
