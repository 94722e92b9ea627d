// tensor/quantization.hpp: the public model functions, quantized TensorData, and the handle
// side of quantize / dequantize (the work is dispatch/quant.cpp's).
#include "tensor/quantization.hpp"

#include <fmt/format.h>

#include "dispatch/quant.hpp"
#include "dispatch/quant_model.hpp"
#include "dispatch/settings.hpp"
#include "lib/src/handles.hpp"

namespace tensor {

namespace q = dispatch::quant;

std::string to_string(const QuantScheme& s) {
  const auto v = static_cast<unsigned>(s.value);
  const auto p = static_cast<unsigned>(s.param);
  std::string level = "per-tensor";
  if (s.level.is_block()) {
    level = "block[";
    for (std::size_t i = 0; i < s.level.shape.rank; ++i) level += fmt::format("{}{}", i ? ", " : "", s.level.shape.dims[i]);
    level += "]";
  }
  return fmt::format("{} {} {} {}", v < std::size(q::kValueNames) ? q::kValueNames[v] : "q?", q::kStoreNames[s.store == QuantStore::Native ? 0 : 1], level,
                     p < std::size(q::kScaleNames) ? q::kScaleNames[p] : "?");
}

TensorData TensorData::quantized(std::vector<std::byte> bytes, Shape shape, const QuantScheme& scheme) {
  q::check_data_len("TensorData::quantized", bytes, shape, scheme);
  TensorData d;
  d.bytes_ = std::move(bytes);
  d.shape_ = shape;
  d.dtype_ = DType::QFloat;
  d.qscheme_ = scheme;
  return d;
}

namespace quantization {

Shape params_shape(const Shape& shape, const QuantScheme& scheme) { return q::grid_shape("params_shape", shape, scheme); }

std::size_t quantized_data_len(const QuantScheme& scheme, const Shape& shape) {
  return q::code_bytes(scheme, shape) + q::grid_shape("quantized_data_len", shape, scheme).num_elements() * q::scale_size(scheme.param);
}

float scale_to_dtype(float scale, ScaleDtype dtype) { return q::scale_to_dtype(scale, dtype); }

static void check_bits(const char* op, int bits) {
  if (bits != 2 && bits != 4 && bits != 8)
    throw DTypeError(fmt::format("[{}] code width out of range; expected 2, 4 or 8 bits; got {}", op, bits));
}

std::vector<std::uint32_t> pack_codes(const std::vector<std::int8_t>& codes, int bits) {
  check_bits("pack_codes", bits);
  return q::pack_codes(codes, bits);
}

std::vector<std::int8_t> unpack_codes(const std::vector<std::uint32_t>& words, std::size_t count, int bits) {
  check_bits("unpack_codes", bits);
  const std::size_t per = 32 / static_cast<std::size_t>(bits);
  if (count > words.size() * per)
    throw ShapeError(fmt::format("[unpack_codes] too few words; expected at least {} for {} codes; got {}",
                                 (count + per - 1) / per, count, words.size()));
  return q::unpack_codes(words, count, bits);
}

TensorData quantized_data(const std::vector<std::int8_t>& codes, const Shape& shape, const QuantScheme& scheme,
                          const std::vector<float>& scales) {
  const std::size_t n = q::grid_shape("quantized_data", shape, scheme).num_elements();
  if (codes.size() != shape.num_elements())
    throw ShapeError(fmt::format("[quantized_data] one code per element; expected {} for shape {}; got {}", shape.num_elements(),
                                 shape.to_string(), codes.size()));
  if (scales.size() != n)
    throw ShapeError(fmt::format("[quantized_data] one scale per block; expected {} for {} of shape {}; got {}", n,
                                 to_string(scheme), shape.to_string(), scales.size()));
  return TensorData::quantized(q::encode_data(codes, shape, scheme, scales), shape, scheme);
}

QuantizedValues quantized_values(const TensorData& data) {
  const QuantScheme* s = data.quant_scheme();
  if (!s)
    throw FormatError("", fmt::format("[quantized_values] expected quantized (qfloat) data; got {}", dtype_name(data.dtype())));
  q::DecodedData d = q::decode_data("quantized_values", data.bytes(), data.shape(), *s);
  return {std::move(d.codes), std::move(d.scales)};
}

}  // namespace quantization

namespace detail {

using handles::give;
using handles::give2;

namespace {
// A reference of our own to the handle's tensor (the caller keeps its handle).
dispatch::DispatchTensor peek(const Handle& h) {
  Handle c = retain(h);
  return handles::take(c);
}
}  // namespace

Handle quantize(const Handle& x, const QuantScheme& scheme, const Handle& scales) {
  return give(q::quantize(peek(x), scheme, peek(scales)));
}

Handle quantize_dynamic(const Handle& x, const QuantScheme& scheme) { return give(q::quantize_dynamic(peek(x), scheme)); }

Handle dequantize(const Handle& x) {
  const dispatch::DispatchTensor t = peek(x);
  if (!t.prim) throw Error("[dequantize] expected a tensor; got an empty (moved-from) handle");
  return give(q::dequantize(t, dispatch::default_dtype(t.device, Kind::Float, "dequantize")));
}

std::optional<QuantScheme> quant_scheme(const Handle& x) {
  const dispatch::DispatchTensor t = peek(x);
  const q::QuantPrim* p = q::as_quant(t);
  if (!p) return std::nullopt;
  return p->scheme();
}

std::pair<Handle, Handle> compute_range(const QuantScheme& scheme, const Handle& x, Calibration c) {
  if (c != Calibration::MinMax)
    throw DTypeError(fmt::format("[compute_range] calibration out of range; expected MinMax; got {}", static_cast<unsigned>(c)));
  return give2(q::compute_range(scheme, peek(x)));
}

Handle compute_q_params(const QuantScheme& scheme, const Handle& min, const Handle& max) {
  return give(q::compute_q_params(scheme, peek(min), peek(max)));
}

Handle q_matmul(const Handle& x, const Handle& w) { return give(dispatch::q_matmul(peek(x), peek(w))); }

}  // namespace detail
}  // namespace tensor
