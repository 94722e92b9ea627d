// Quantized tensors: burn's model (QuantScheme, calibration, quantize / dequantize) and the
// byte layout of quantized TensorData. docs/quantization.md says what works and what is next.
//
// A quantized tensor is a Tensor<D> (Float kind) whose dtype() is DType::QFloat; its scheme
// rides with the tensor (quant_scheme(t)), not in the one-byte DType, so nothing that
// switches over DType changes. Every float op refuses it with a DTypeError until it is
// dequantized; into_data / from_data read and load it byte-exactly (burn's layout).
// Not included by tensor/tensor.hpp: only users of quantization pay for this header.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tensor/io.hpp"  // FormatError
#include "tensor/quant_scheme.hpp"
#include "tensor/tensor.hpp"

namespace tensor {

/// "q8s native per-tensor f32", "q4f packed-u32 block[2, 16] f16", ...
TENSOR_API std::string to_string(const QuantScheme& scheme);

/// How a range is measured from the data (burn's Calibration; AbsMean is next).
enum class Calibration : std::uint8_t { MinMax };

/// The scales of a quantized tensor: one per block, row-major over the block grid (one for a
/// per-tensor scheme), in f32 (burn's QuantizationParameters).
struct QuantParams {
  Tensor<1> scales;  ///< f32, one per block
};
/// burn's name for QuantParams.
using QuantizationParameters = QuantParams;

/// Per block (or for the tensor): the smallest and the largest value, row-major over the
/// block grid.
struct CalibrationRange {
  Tensor<1> min;  ///< the smallest value of each block
  Tensor<1> max;  ///< the largest value of each block
};

namespace detail {
TENSOR_API Handle quantize(const Handle& x, const QuantScheme& scheme, const Handle& scales);
TENSOR_API Handle quantize_dynamic(const Handle& x, const QuantScheme& scheme);
TENSOR_API Handle dequantize(const Handle& x);
TENSOR_API std::optional<QuantScheme> quant_scheme(const Handle& x);
TENSOR_API std::pair<Handle, Handle> compute_range(const QuantScheme& scheme, const Handle& x, Calibration c);
TENSOR_API Handle compute_q_params(const QuantScheme& scheme, const Handle& min, const Handle& max);
TENSOR_API Handle q_matmul(const Handle& x, const Handle& w);
}  // namespace detail

/// x quantized with the given scales (rounded up to the scheme's scale dtype; a zero or
/// non-finite scale becomes the smallest positive one): q = clamp(round(x * (1 / scale)), a, b),
/// ties away from zero. Throws ShapeError when the blocks do not tile x or the scales do not
/// match the block grid, DTypeError when x is not a float tensor.
template <std::size_t D>
Tensor<D> quantize(const Tensor<D>& x, const QuantScheme& scheme, const QuantParams& params) {
  return Tensor<D>(detail::quantize(x.handle(), scheme, params.scales.handle()));
}
/// Calibrated on the fly (MinMax): burn's quantize_dynamic.
template <std::size_t D>
Tensor<D> quantize_dynamic(const Tensor<D>& x, const QuantScheme& scheme) {
  return Tensor<D>(detail::quantize_dynamic(x.handle(), scheme));
}
/// Back to the device's default float dtype: scale[block] * code, computed in f32. Throws
/// DTypeError naming dequantize for a tensor that is not quantized (burn returns a float
/// tensor unchanged; libtensor refuses, so a missed quantize is not silent).
template <std::size_t D>
Tensor<D> dequantize(const Tensor<D>& x) {
  return Tensor<D>(detail::dequantize(x.handle()));
}
/// The scheme of a quantized tensor; nullopt for any other.
template <std::size_t D, class K>
std::optional<QuantScheme> quant_scheme(const Tensor<D, K>& x) {
  return detail::quant_scheme(x.handle());
}
/// Whether the tensor is quantized (dtype QFloat).
template <std::size_t D, class K>
bool is_quantized(const Tensor<D, K>& x) {
  return x.dtype() == DType::QFloat;
}

/// Quantized data on the host (block grid, byte layout, code packing) and calibration.
namespace quantization {

/// The block grid: ceil(shape[d] / block[d]) per axis (right-aligned block), or [1] for a
/// per-tensor scheme.
TENSOR_API Shape params_shape(const Shape& shape, const QuantScheme& scheme);
/// Bytes of quantized TensorData: codes (Native: one per element; PackedU32: 4 per word,
/// ceil(last / codes-per-word) words per line) + scales.
TENSOR_API std::size_t quantized_data_len(const QuantScheme& scheme, const Shape& shape);
/// A scale rounded up to the scale dtype (F32: unchanged; saturates at the dtype's maximum).
TENSOR_API float scale_to_dtype(float scale, ScaleDtype dtype);
/// burn's pack_i8s_to_u32s: `bits`-bit codes, lowest bits first, zero-padded.
TENSOR_API std::vector<std::uint32_t> pack_codes(const std::vector<std::int8_t>& codes, int bits);
/// burn's unpack_q_to_i8s: `count` codes of `bits` bits, sign-extended.
TENSOR_API std::vector<std::int8_t> unpack_codes(const std::vector<std::uint32_t>& words, std::size_t count, int bits);

/// burn's TensorData::quantized(values_i8, shape, scheme, &scales): one i8 code per element
/// (packed here when the store is PackedU32) and the f32 scales (encoded in the scale dtype).
TENSOR_API TensorData quantized_data(const std::vector<std::int8_t>& codes, const Shape& shape, const QuantScheme& scheme,
                                     const std::vector<float>& scales);
/// burn's QuantizedBytes::into_vec_i8: the codes of QFloat data, one per element (unpacked
/// and sign-extended), and its scales decoded to f32. FormatError for other data.
struct QuantizedValues {
  std::vector<std::int8_t> codes;  ///< one per element, row-major
  std::vector<float> scales;        ///< one per block, row-major over the block grid
};
/// The codes and scales of QFloat data (see QuantizedValues); FormatError for other data.
TENSOR_API QuantizedValues quantized_values(const TensorData& data);

/// burn's compute_range: the smallest and largest value of each block (of the tensor, per
/// tensor); DTypeError when x is not a float tensor.
template <std::size_t D>
CalibrationRange compute_range(const QuantScheme& scheme, const Tensor<D>& x, Calibration c = Calibration::MinMax) {
  auto [lo, hi] = detail::compute_range(scheme, x.handle(), c);
  return {Tensor<1>(lo), Tensor<1>(hi)};
}
/// burn's compute_q_params: scale = 2 * max(|min|, |max|) / (b - a) per block, rounded up to
/// the scheme's scale dtype.
inline QuantParams compute_q_params(const QuantScheme& scheme, const CalibrationRange& range) {
  return {Tensor<1>(detail::compute_q_params(scheme, range.min.handle(), range.max.handle()))};
}

/// burn's q_matmul(Float, QFloat), the inference case: x [.., M, K] (float) times a quantized
/// weight w [K, N] whose scales are per tensor or per output column (block [K, 1]), in x's
/// dtype. On the cpu with oneDNN: an int8 product (within about 1% of the float product of the
/// dequantized weight); elsewhere the weight is dequantized and multiplied in float.
/// (`x.matmul(w)` with a quantized w still raises DTypeError: use this.)
/// ShapeError naming q_matmul for a rank or inner dim that does not fit, or other blocks;
/// DTypeError when w is not quantized or x is not a float tensor.
template <std::size_t D>
Tensor<D> q_matmul(const Tensor<D>& x, const Tensor<2>& w) {
  return Tensor<D>(detail::q_matmul(x.handle(), w.handle()));
}

}  // namespace quantization
}  // namespace tensor
