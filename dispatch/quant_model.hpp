// The quantization model's host-side arithmetic (dispatch/quant.cpp): scheme checks, the
// block grid, burn's scale rounding and the TensorData byte layout. Used by dispatch's
// compositions and by the public model functions (lib/src/quantization.cpp).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "tensor/quantization.hpp"

namespace tensor::dispatch::quant {

// The names of the scheme's values, scale dtypes and stores, in enum order (to_string(QuantScheme)
// and the .safetensors convention of lib/src/io_quant.cpp).
inline constexpr const char* kValueNames[] = {"q8f", "q8s", "q4f", "q4s", "q2f", "q2s"};
inline constexpr const char* kScaleNames[] = {"f32", "f16", "bf16"};
inline constexpr const char* kStoreNames[] = {"native", "packed-u32"};

// DTypeError naming `op` for an enum value out of range.
void check_scheme(const char* op, const QuantScheme& s);

// The block extent of every axis (per tensor: the whole shape). ShapeError naming `op`
// when the block does not fit or divide the shape.
struct Extents {
  std::array<std::size_t, kMaxRank> ext{};
  std::size_t rank = 0;
};
Extents block_extents(const char* op, const Shape& shape, const QuantScheme& s);
// Blocks per axis ([1] per tensor).
Shape grid_shape(const char* op, const Shape& shape, const QuantScheme& s);

// x (of `shape`) viewed with every blocked axis split into (blocks, extent); axes whose
// extent is 1 stay whole. `grid` gets the matching shape of the scales (extent axes 1),
// `reduce` the split extent axes. Per tensor: x as it is, one scale broadcast over it.
struct Split {
  std::vector<std::int64_t> view, grid;
  std::vector<std::int64_t> reduce;
};
Split split(const Shape& shape, const Extents& e, bool per_tensor = false);

float scale_to_dtype(float scale, ScaleDtype dt);  // rounded up; saturates at the dtype's max
float validated_scale(float scale, ScaleDtype dt);  // and a zero / non-finite scale -> the smallest positive
std::size_t scale_size(ScaleDtype dt);
std::size_t code_bytes(const QuantScheme& s, const Shape& shape);

std::vector<std::uint32_t> pack_codes(const std::vector<std::int8_t>& codes, int bits);
std::vector<std::int8_t> unpack_codes(const std::vector<std::uint32_t>& words, std::size_t count, int bits);

// burn's layout: codes (Native bytes, or u32 words per line of the last axis), then scales.
std::vector<std::byte> encode_data(const std::vector<std::int8_t>& codes, const Shape& shape, const QuantScheme& s,
                                   const std::vector<float>& scales);
// FormatError naming `op` when the length disagrees with scheme and shape.
void check_data_len(const char* op, const std::vector<std::byte>& bytes, const Shape& shape, const QuantScheme& s);
struct DecodedData {
  std::vector<std::int8_t> codes;
  std::vector<float> scales;
};
DecodedData decode_data(const char* op, const std::vector<std::byte>& bytes, const Shape& shape, const QuantScheme& s);

}  // namespace tensor::dispatch::quant
