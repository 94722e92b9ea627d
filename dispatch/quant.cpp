// Quantized tensors in dispatch: the model's arithmetic (burn's formulas, bit for bit) and
// its compositions from float / int ops. See dispatch/quant.hpp.
#include "dispatch/quant.hpp"

#include "dispatch/hooks.hpp"
#include "dispatch/settings.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "dispatch/hooks.hpp"
#include "dispatch/quant_model.hpp"
#include "dispatch/settings.hpp"
#include "dispatch/validate.hpp"
#include "tensor/error.hpp"

namespace tensor::dispatch::quant {

// ---- the model ------------------------------------------------------------------------

namespace {

std::string block_text(const BlockSize& b) {
  std::string s = "[";
  for (std::size_t i = 0; i < b.rank; ++i) s += fmt::format("{}{}", i ? ", " : "", b.dims[i]);
  return s + "]";
}

}  // namespace

void check_scheme(const char* op, const QuantScheme& s) {
  if (static_cast<unsigned>(s.value) > static_cast<unsigned>(QuantValue::Q2S))
    throw DTypeError(fmt::format("[{}] quant value out of range; expected Q8F, Q8S, Q4F, Q4S, Q2F or Q2S; got {}", op,
                                 static_cast<unsigned>(s.value)));
  if (static_cast<unsigned>(s.param) > static_cast<unsigned>(ScaleDtype::BF16))
    throw DTypeError(fmt::format("[{}] scale dtype out of range; expected F32, F16 or BF16; got {}", op,
                                 static_cast<unsigned>(s.param)));
  if (static_cast<unsigned>(s.store) > static_cast<unsigned>(QuantStore::PackedU32))
    throw DTypeError(fmt::format("[{}] quant store out of range; expected Native or PackedU32; got {}", op,
                                 static_cast<unsigned>(s.store)));
  if (s.mode != QuantMode::Symmetric)
    throw DTypeError(fmt::format("[{}] quant mode out of range; expected Symmetric; got {}", op, static_cast<unsigned>(s.mode)));
  if (static_cast<unsigned>(s.level.tag) > static_cast<unsigned>(QuantLevel::Tag::Block))
    throw DTypeError(fmt::format("[{}] quant level out of range; expected Tensor or Block; got {}", op,
                                 static_cast<unsigned>(s.level.tag)));
}

Extents block_extents(const char* op, const Shape& shape, const QuantScheme& s) {
  check_scheme(op, s);
  Extents e;
  e.rank = shape.rank();
  if (!s.level.is_block()) {
    for (std::size_t d = 0; d < e.rank; ++d) e.ext[d] = shape[d];
    return e;
  }
  const BlockSize& b = s.level.shape;
  if (b.rank == 0 || b.rank > BlockSize::kMaxDims || b.rank > shape.rank())
    throw ShapeError(fmt::format("[{}] block shape {} does not fit the tensor; expected 1..{} extents; got {} for shape {}", op,
                                 block_text(b), std::min<std::size_t>(shape.rank(), BlockSize::kMaxDims), b.rank,
                                 shape.to_string()));
  const std::size_t lead = shape.rank() - b.rank;
  for (std::size_t d = 0; d < e.rank; ++d) {
    const std::size_t x = d < lead ? 1 : b.dims[d - lead];
    if (x == 0 || shape[d] % x != 0)
      throw ShapeError(fmt::format("[{}] block shape {} does not divide the tensor; expected every dim of {} a multiple of "
                                   "its block extent; got extent {} for dim {} of size {}",
                                   op, block_text(b), shape.to_string(), x, d, shape[d]));
    e.ext[d] = x;
  }
  return e;
}

Shape grid_shape(const char* op, const Shape& shape, const QuantScheme& s) {
  const Extents e = block_extents(op, shape, s);
  if (!s.level.is_block()) return Shape{1};
  Shape g = shape;
  for (std::size_t d = 0; d < e.rank; ++d) g[d] = shape[d] / e.ext[d];
  return g;
}

float scale_to_dtype(float scale, ScaleDtype dt) {
  if (dt == ScaleDtype::F32 || !std::isfinite(scale) || scale <= 0.0f) return scale;
  if (dt == ScaleDtype::F16) {
    constexpr float kMax = 65504.0f;
    constexpr float kMinNormal = 6.103515625e-05f;      // 2^-14
    constexpr float kSubStep = 5.9604644775390625e-08f;  // 2^-24
    if (scale >= kMax) return kMax;
    if (scale < kMinNormal) return std::ceil(scale / kSubStep) * kSubStep;  // exact: a power-of-two step
    const std::uint32_t step = 1u << 13;                                    // 23 - 10 mantissa bits dropped
    return std::bit_cast<float>((std::bit_cast<std::uint32_t>(scale) + step - 1) & ~(step - 1));
  }
  // BF16: f32's exponent range, 7 mantissa bits.
  const std::uint32_t step = 1u << 16;
  const std::uint32_t up = (std::bit_cast<std::uint32_t>(scale) + step - 1) & ~(step - 1);
  const float r = std::bit_cast<float>(up);
  return std::isfinite(r) ? r : std::bit_cast<float>(0x7F7F0000u);  // bf16's largest finite value
}

float validated_scale(float scale, ScaleDtype dt) {
  const float s = scale_to_dtype(scale, dt);
  return s > 0.0f && std::isfinite(s) ? s : scale_to_dtype(std::numeric_limits<float>::min(), dt);
}

std::size_t scale_size(ScaleDtype dt) { return dt == ScaleDtype::F32 ? 4 : 2; }

void encode_scale(float v, ScaleDtype dt, std::byte* out) {
  if (dt == ScaleDtype::F32) {
    std::memcpy(out, &v, 4);
    return;
  }
  std::uint16_t h = dt == ScaleDtype::F16 ? f16(v).bits : bf16(v).bits;
  std::memcpy(out, &h, 2);
}

float decode_scale(const std::byte* in, ScaleDtype dt) {
  if (dt == ScaleDtype::F32) {
    float v;
    std::memcpy(&v, in, 4);
    return v;
  }
  std::uint16_t h;
  std::memcpy(&h, in, 2);
  return dt == ScaleDtype::F16 ? static_cast<float>(f16::from_bits(h)) : static_cast<float>(bf16::from_bits(h));
}

std::size_t code_bytes(const QuantScheme& s, const Shape& shape) {
  if (s.store == QuantStore::Native || shape.rank() == 0) return shape.num_elements() * (s.store == QuantStore::Native ? 1 : 4);
  const std::size_t per = static_cast<std::size_t>(s.num_quants());
  const std::size_t last = shape[shape.rank() - 1];
  const std::size_t lines = last == 0 ? 0 : shape.num_elements() / last;
  return lines * ((last + per - 1) / per) * 4;
}

std::vector<std::uint32_t> pack_codes(const std::vector<std::int8_t>& codes, int bits) {
  const std::size_t per = 32 / static_cast<std::size_t>(bits);
  const std::uint32_t mask = bits == 32 ? ~0u : (1u << bits) - 1u;
  std::vector<std::uint32_t> w((codes.size() + per - 1) / per, 0u);
  for (std::size_t i = 0; i < codes.size(); ++i)
    w[i / per] |= (static_cast<std::uint32_t>(static_cast<std::uint8_t>(codes[i])) & mask) << ((i % per) * bits);
  return w;
}

std::vector<std::int8_t> unpack_codes(const std::vector<std::uint32_t>& words, std::size_t count, int bits) {
  const std::size_t per = 32 / static_cast<std::size_t>(bits);
  const std::uint32_t mask = (1u << bits) - 1u;
  std::vector<std::int8_t> c(count);
  for (std::size_t i = 0; i < count && i / per < words.size(); ++i) {
    const std::uint32_t v = (words[i / per] >> ((i % per) * bits)) & mask;
    const std::int32_t sv = (v & (1u << (bits - 1))) ? static_cast<std::int32_t>(v) - (1 << bits) : static_cast<std::int32_t>(v);
    c[i] = static_cast<std::int8_t>(sv);
  }
  return c;
}

std::vector<std::byte> encode_data(const std::vector<std::int8_t>& codes, const Shape& shape, const QuantScheme& s,
                                   const std::vector<float>& scales) {
  std::vector<std::byte> out;
  out.reserve(code_bytes(s, shape) + scales.size() * scale_size(s.param));
  if (s.store == QuantStore::Native) {
    out.resize(codes.size());
    if (!codes.empty()) std::memcpy(out.data(), codes.data(), codes.size());
  } else {
    const int bits = s.size_bits_value();
    const std::size_t last = shape.rank() ? shape[shape.rank() - 1] : 1;
    const std::size_t lines = last == 0 ? 0 : codes.size() / last;
    for (std::size_t l = 0; l < lines; ++l) {
      std::vector<std::int8_t> line(codes.begin() + static_cast<std::ptrdiff_t>(l * last),
                                    codes.begin() + static_cast<std::ptrdiff_t>((l + 1) * last));
      for (std::uint32_t w : pack_codes(line, bits)) {
        const std::size_t at = out.size();
        out.resize(at + 4);
        std::memcpy(out.data() + at, &w, 4);
      }
    }
  }
  for (float v : scales) {
    const std::size_t at = out.size();
    out.resize(at + scale_size(s.param));
    encode_scale(v, s.param, out.data() + at);
  }
  return out;
}

void check_data_len(const char* op, const std::vector<std::byte>& bytes, const Shape& shape, const QuantScheme& s) {
  const std::size_t want = code_bytes(s, shape) + grid_shape(op, shape, s).num_elements() * scale_size(s.param);
  if (bytes.size() != want)
    throw FormatError("", fmt::format("[{}] quantized data has the wrong length; expected {} bytes (codes and scales of shape {} "
                                  "under {}); got {}",
                                  op, want, shape.to_string(), to_string(s), bytes.size()));
}

DecodedData decode_data(const char* op, const std::vector<std::byte>& bytes, const Shape& shape, const QuantScheme& s) {
  check_data_len(op, bytes, shape, s);
  DecodedData d;
  const std::size_t n = shape.num_elements();
  const std::size_t cb = code_bytes(s, shape);
  if (s.store == QuantStore::Native) {
    d.codes.resize(n);
    if (n) std::memcpy(d.codes.data(), bytes.data(), n);
  } else {
    const int bits = s.size_bits_value();
    const std::size_t last = shape.rank() ? shape[shape.rank() - 1] : 1;
    const std::size_t lines = last == 0 ? 0 : n / last;
    const std::size_t wpl = lines ? cb / 4 / lines : 0;
    d.codes.reserve(n);
    for (std::size_t l = 0; l < lines; ++l) {
      std::vector<std::uint32_t> w(wpl);
      if (wpl) std::memcpy(w.data(), bytes.data() + l * wpl * 4, wpl * 4);
      const std::vector<std::int8_t> c = unpack_codes(w, last, bits);
      d.codes.insert(d.codes.end(), c.begin(), c.end());
    }
  }
  const std::size_t ns = (bytes.size() - cb) / scale_size(s.param);
  d.scales.resize(ns);
  for (std::size_t i = 0; i < ns; ++i) d.scales[i] = decode_scale(bytes.data() + cb + i * scale_size(s.param), s.param);
  return d;
}

Split split(const Shape& shape, const Extents& e, bool per_tensor) {
  Split s;
  if (per_tensor) {  // one scale: x as it is, the scale broadcast over every dim
    for (std::size_t d = 0; d < shape.rank(); ++d) s.view.push_back(static_cast<std::int64_t>(shape[d]));
    s.grid.assign(shape.rank(), 1);
    return s;
  }
  for (std::size_t d = 0; d < e.rank; ++d) {
    const auto n = static_cast<std::int64_t>(shape[d]);
    const auto x = static_cast<std::int64_t>(e.ext[d]);
    if (x == 1) {
      s.view.push_back(n);
      s.grid.push_back(n);
    } else {
      s.view.push_back(n / x);
      s.view.push_back(x);
      s.grid.push_back(n / x);
      s.grid.push_back(1);
      s.reduce.push_back(static_cast<std::int64_t>(s.view.size()) - 1);
    }
  }
  return s;
}

// ---- compositions ---------------------------------------------------------------------

namespace {

using I64s = std::vector<std::int64_t>;

void check_float_input(const char* op, const DispatchTensor& x) {
  if (!x.prim) throw Error(fmt::format("[{}] expected a tensor; got an empty (moved-from) handle", op));
  check_plain_device(op, x.device);
  if (x.kind != Kind::Float || !is_float(x.dtype()))
    throw DTypeError(fmt::format("[{}] wrong tensor to quantize; expected a float tensor; got {}", op,
                                 x.dtype() == DType::QFloat ? std::string("an already quantized (qfloat) tensor")
                                                            : fmt::format("{} ({})", kind_name(x.kind), dtype_name(x.dtype()))));
}

DispatchTensor to_f32(DispatchTensor x) { return x.dtype() == DType::F32 ? x : cast(OpCode::cast, std::move(x), DType::F32); }

// Per block: the reduction `op` (max_dim / min_dim) of x, as an F32 [n] tensor, n = blocks.
DispatchTensor block_reduce(OpCode op, DispatchTensor x, const Shape& shape, const Extents& e, bool per_tensor) {
  if (per_tensor) {
    const I64s flat{1, static_cast<std::int64_t>(shape.num_elements())};
    DispatchTensor r = reduce_dim(op, reshape(OpCode::reshape, std::move(x), flat), 1);
    const I64s one{1};
    return reshape(OpCode::reshape, std::move(r), one);
  }
  const Split s = split(shape, e);
  DispatchTensor r = reshape(OpCode::reshape, std::move(x), s.view);
  for (std::int64_t d : s.reduce) r = reduce_dim(op, std::move(r), d);
  const I64s flat{-1};
  return reshape(OpCode::reshape, std::move(r), flat);
}

std::vector<float> read_f32(DispatchTensor t) { return read(to_f32(std::move(t))).to_vec<float>(); }

DispatchTensor upload_f32(const std::vector<float>& v, DeviceId device) {
  return dispatch::from_data(TensorData::from<float>(v, Shape{v.size()}), device, Kind::Float);
}

std::vector<float> rounded_scales(std::vector<float> v, const QuantScheme& scheme) {
  for (float& x : v) x = validated_scale(x, scheme.param);
  return v;
}

}  // namespace

void check_plain_device(const char* op, DeviceId device) {
  if (is_autodiff_device(device))
    throw DeviceError(DeviceError::Kind::UnsupportedDType,
                      fmt::format("[{}] quantized tensors on an autodiff device are not supported yet; expected a tensor "
                                  "of a plain device (inner()); got one on {}",
                                  op, device_string(device)));
}

const QuantPrim* as_quant(const DispatchTensor& t) {
  return t.prim && t.dtype() == DType::QFloat ? static_cast<const QuantPrim*>(t.prim) : nullptr;
}

DispatchTensor quantize(const DispatchTensor& x, const QuantScheme& scheme, const DispatchTensor& scales) {
  check_float_input("quantize", x);
  const Shape shape = x.shape();
  const std::size_t n = grid_shape("quantize", shape, scheme).num_elements();
  if (!scales.prim) throw Error("[quantize] expected a scales tensor; got an empty (moved-from) handle");
  if (scales.kind != Kind::Float || !is_float(scales.dtype()))
    throw DTypeError(fmt::format("[quantize] wrong scales; expected a float tensor; got {} ({})", kind_name(scales.kind),
                                 dtype_name(scales.dtype())));
  if (scales.shape().rank() != 1 || scales.shape()[0] != n)
    throw ShapeError(fmt::format("[quantize] one scale per block; expected shape [{}] for {} of shape {}; got {}", n,
                                 to_string(scheme), shape.to_string(), scales.shape().to_string()));
  if (scales.device != x.device)
    throw DeviceError(DeviceError::Kind::Mismatch, fmt::format("[quantize] scales on another device; expected {}; got {}",
                                                               device_string(x.device), device_string(scales.device)));
  const std::vector<float> sc = rounded_scales(read_f32(scales), scheme);
  return quantize_row(x, upload_f32(sc, x.device), scheme);
}

std::pair<DispatchTensor, DispatchTensor> compute_range(const QuantScheme& scheme, const DispatchTensor& x) {
  check_float_input("compute_range", x);
  const Shape shape = x.shape();
  const Extents e = block_extents("compute_range", shape, scheme);
  if (shape.num_elements() == 0) {
    const std::vector<float> z(grid_shape("compute_range", shape, scheme).num_elements(), 0.0f);
    return {upload_f32(z, x.device), upload_f32(z, x.device)};
  }
  DispatchTensor f = to_f32(x);
  const bool pt = !scheme.level.is_block();
  return {block_reduce(OpCode::min_dim, f, shape, e, pt), block_reduce(OpCode::max_dim, f, shape, e, pt)};
}

DispatchTensor compute_q_params(const QuantScheme& scheme, const DispatchTensor& min, const DispatchTensor& max) {
  check_scheme("compute_q_params", scheme);
  const auto [a, b] = scheme.range();
  DispatchTensor lo = unary(OpCode::abs, to_f32(min));
  DispatchTensor hi = unary(OpCode::abs, to_f32(max));
  DispatchTensor mask = compare(OpCode::lower, lo, hi);
  DispatchTensor alpha = mask_where(std::move(lo), std::move(mask), std::move(hi));
  return scalar(OpCode::div_scalar, scalar(OpCode::mul_scalar, std::move(alpha), Scalar(2.0f)), Scalar(static_cast<float>(b - a)));
}

DispatchTensor quantize_dynamic(const DispatchTensor& x, const QuantScheme& scheme) {
  check_float_input("quantize_dynamic", x);
  return quantize_dynamic_row(x, scheme);
}

DispatchTensor dequantize(const DispatchTensor& q, DType dtype) { return dequantize_row(q, dtype); }

}  // namespace tensor::dispatch::quant

namespace tensor::dispatch::fwd {

DispatchTensor dequantize_operand(const DispatchTensor& q, DType to) { return quant::dequantize_row(q, is_float(to) ? to : DType::F32); }

void flow_meta(OutMeta& m, DeviceId device) {
  if (m.dtype == DType::QFloat && device_settings(device).quant.propagation == QuantPropagation::Inhibit)
    m.dtype = to_dtype(device_settings(device).float_dtype);
}

}  // namespace tensor::dispatch::fwd
