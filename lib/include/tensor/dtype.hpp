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
/// The number of DType values.
inline constexpr int kDTypeCount = 16;

/// The float dtypes (a device's default float dtype is one of them: DeviceSettings).
enum class FloatDType : std::uint8_t { F64, F32, F16, BF16 };
/// The int dtypes, signed and unsigned (DeviceSettings::int_dtype).
enum class IntDType : std::uint8_t { I64, I32, I16, I8, U64, U32, U16, U8 };
/// The bool storages: Native (one byte, DType::Bool), U8 (one byte) or U32 (four bytes).
enum class BoolDType : std::uint8_t { Native, U8, U32 };

/// A value of the enum (not an out-of-range integer cast to it).
///@{
constexpr bool is_valid(DType t) { return static_cast<unsigned>(t) < static_cast<unsigned>(kDTypeCount); }
constexpr bool is_valid(FloatDType t) { return static_cast<unsigned>(t) <= static_cast<unsigned>(FloatDType::BF16); }
constexpr bool is_valid(IntDType t) { return static_cast<unsigned>(t) <= static_cast<unsigned>(IntDType::U8); }
constexpr bool is_valid(BoolDType t) { return static_cast<unsigned>(t) <= static_cast<unsigned>(BoolDType::U32); }
///@}

/// F64, F32, F16 or BF16.
constexpr bool is_float(DType t) { return t <= DType::BF16; }
/// I64, I32, I16 or I8.
constexpr bool is_signed_int(DType t) { return t >= DType::I64 && t <= DType::I8; }
/// U64, U32, U16 or U8.
constexpr bool is_unsigned_int(DType t) { return t >= DType::U64 && t <= DType::U8; }
/// A signed or unsigned int dtype.
constexpr bool is_int(DType t) { return t >= DType::I64 && t <= DType::U8; }
/// Bool, BoolU8 or BoolU32.
constexpr bool is_bool(DType t) { return t >= DType::Bool && t <= DType::BoolU32; }

/// Bytes per element (1 for the bool storages Bool and BoolU8, 4 for BoolU32; 0 for an invalid value).
constexpr std::size_t dtype_size(DType t) {
  switch (t) {
    case DType::F64: case DType::I64: case DType::U64: return 8;
    case DType::F32: case DType::I32: case DType::U32: case DType::BoolU32: return 4;
    case DType::F16: case DType::BF16: case DType::I16: case DType::U16: return 2;
    case DType::I8: case DType::U8: case DType::Bool: case DType::BoolU8: case DType::QFloat: return 1;
  }
  return 0;
}

/// The short name ("f32", "i64", "bool(u8)", ...); "invalid dtype" for a value outside the enum.
constexpr std::string_view dtype_name(DType t) {
  constexpr std::string_view kNames[kDTypeCount] = {
      "f64", "f32", "f16", "bf16", "i64", "i32", "i16", "i8",
      "u64", "u32", "u16", "u8", "bool", "bool(u8)", "bool(u32)", "qfloat"};
  return is_valid(t) ? kNames[static_cast<int>(t)] : std::string_view("invalid dtype");
}

/// The DType of a per-kind dtype.
///@{
constexpr DType to_dtype(FloatDType t) { return static_cast<DType>(static_cast<int>(t)); }
constexpr DType to_dtype(IntDType t) { return static_cast<DType>(static_cast<int>(t) + 4); }
constexpr DType to_dtype(BoolDType t) { return static_cast<DType>(static_cast<int>(t) + 12); }
///@}
/// The per-kind dtype of a DType, which must be of that kind (unchecked).
///@{
constexpr FloatDType to_float_dtype(DType t) { return static_cast<FloatDType>(static_cast<int>(t)); }  // t must be float
constexpr IntDType to_int_dtype(DType t) { return static_cast<IntDType>(static_cast<int>(t) - 4); }     // t must be int
constexpr BoolDType to_bool_dtype(DType t) { return static_cast<BoolDType>(static_cast<int>(t) - 12); } // t must be bool
///@}

/// The C++ type that holds one element of a dtype: DTypeOf<T>::value is T's dtype, for double
/// (F64), float (F32), f16, bf16, std::int64_t ... std::int8_t (I64 ... I8), std::uint64_t ...
/// std::uint8_t (U64 ... U8) and bool (Bool); no other T has one (a compile error).
template <class T> struct DTypeOf;
/// \cond
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
/// \endcond

/// DTypeOf<T>::value, e.g. dtype_of<float> is DType::F32.
template <class T> inline constexpr DType dtype_of = DTypeOf<T>::value;

/// What a device can do with a dtype (SPEC §3).
enum class DTypeUsage : std::uint8_t {
  Storage = 1,      ///< can live on the device and be converted
  Arithmetic = 2,   ///< general elementwise ops and reductions
  Accelerated = 4,  ///< a hardware fast path (matrix units, native bf16 dot, ...)
};

/// A set of DTypeUsage flags: what one device can do with one dtype (Device::dtype_usage).
class DTypeUsageSet {
 public:
  constexpr DTypeUsageSet() = default;
  /// The set holding `u` alone.
  constexpr DTypeUsageSet(DTypeUsage u) : bits_(static_cast<std::uint8_t>(u)) {}  // NOLINT: implicit by design
  /// Storage and Arithmetic: a dtype a device fully supports.
  static constexpr DTypeUsageSet general() { return DTypeUsageSet(DTypeUsage::Storage) | DTypeUsage::Arithmetic; }
  /// The set of the flag bits in `b` (bits outside the three flags are dropped).
  static constexpr DTypeUsageSet from_bits(std::uint8_t b) { DTypeUsageSet s; s.bits_ = b & 7u; return s; }

  /// True when `u` is in the set.
  constexpr bool contains(DTypeUsage u) const { return (bits_ & static_cast<std::uint8_t>(u)) != 0; }
  /// True when every flag of `o` is in the set.
  constexpr bool contains_all(DTypeUsageSet o) const { return (bits_ & o.bits_) == o.bits_; }
  /// True when no flag is set (the device cannot hold the dtype).
  constexpr bool empty() const { return bits_ == 0; }
  /// The flags as bits (Storage 1, Arithmetic 2, Accelerated 4).
  constexpr std::uint8_t bits() const { return bits_; }
  /// The union of two sets.
  constexpr DTypeUsageSet operator|(DTypeUsageSet o) const { return from_bits(bits_ | o.bits_); }
  /// Same flags.
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
