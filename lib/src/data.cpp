// TensorData: construction checks, conversion and printing.
#include <cstring>
#include "tensor/data.hpp"

#include <fmt/format.h>

#include "lib/core/element.hpp"
#include "tensor/quantization.hpp"

namespace tensor {

TensorData::TensorData(std::vector<std::byte> bytes, Shape shape, DType dtype, const char* op)
    : bytes_(std::move(bytes)), shape_(shape), dtype_(dtype) {
  if (!is_valid(dtype))
    throw DTypeError(fmt::format("[{}] invalid dtype; expected a DType value below {}; got {}", op, kDTypeCount,
                                 static_cast<unsigned>(dtype)));
  if (dtype == DType::QFloat)
    throw DTypeError(fmt::format("[{}] quantized data needs its scheme; expected a float, int or bool dtype (quantized data: "
                                 "TensorData::quantized); got qfloat", op));
  const std::size_t want = shape_.checked_num_bytes(op, dtype_size(dtype_));
  if (bytes_.size() != want)
    throw ShapeError(fmt::format("[{}] byte count does not match shape {} x {}; expected {} bytes; got {}", op,
                                 shape_.to_string(), dtype_name(dtype_), want, bytes_.size()));
}

TensorData TensorData::zeros(Shape shape, DType dtype) {
  if (!is_valid(dtype))
    throw DTypeError(fmt::format("[TensorData::zeros] invalid dtype; expected a DType value below {}; got {}", kDTypeCount,
                                 static_cast<unsigned>(dtype)));
  const std::size_t bytes = shape.checked_num_bytes("TensorData::zeros", dtype_size(dtype));
  std::vector<std::byte> v;
  try {
    v.resize(bytes);
  } catch (const std::bad_alloc&) {
    throw ExecutionError(fmt::format("[TensorData::zeros] out of host memory; expected {} bytes for shape {} x {}; "
                                     "got an allocation failure on the host",
                                     bytes, shape.to_string(), dtype_name(dtype)));
  }
  return TensorData(std::move(v), shape, dtype, "TensorData::zeros");
}

TensorData TensorData::full(Shape shape, Scalar value, DType dtype) {
  TensorData one;
  switch (value.kind()) {
    case Scalar::Kind::Float: one = from<double>({value.to_double()}); break;
    case Scalar::Kind::Int: one = from<std::int64_t>({value.to_int64()}); break;
    case Scalar::Kind::UInt: one = from<std::uint64_t>({value.to_uint64()}); break;
    case Scalar::Kind::Bool: one = from<bool>({value.to_bool()}); break;
  }
  const TensorData elem = one.convert(dtype);
  TensorData out = zeros(shape, dtype);
  const std::size_t w = dtype_size(dtype);
  for (std::size_t i = 0; i < out.num_elements(); ++i) std::memcpy(out.bytes_.data() + i * w, elem.bytes_.data(), w);
  return out;
}

void TensorData::check_element_type(DType want, std::size_t size) const {
  const bool ok = want == dtype_ || (want == DType::Bool && is_bool(dtype_));
  if (!ok || (want != DType::Bool && size != dtype_size(dtype_)))
    throw DTypeError(fmt::format("[to_vec] element type does not match the data; expected {}; got {}", dtype_name(dtype_),
                                 dtype_name(want)));
}

TensorData TensorData::convert(DType to) const {
  if (to == dtype_) return *this;
  if (!is_valid(to) || to == DType::QFloat)
    throw DTypeError(fmt::format("[TensorData::convert] target dtype not supported; expected a float, int or bool dtype; "
                                 "got {}",
                                 is_valid(to) ? std::string(dtype_name(to)) : std::to_string(static_cast<unsigned>(to))));
  TensorData out = zeros(shape_, to);
  dispatch::convert_elements(dtype_, bytes_.data(), to, out.bytes_.data(), num_elements());
  return out;
}

std::string TensorData::to_string() const {
  if (dtype_ == DType::QFloat)
    return fmt::format("TensorData(qfloat({}), {}, {} bytes of codes and scales)", tensor::to_string(qscheme_),
                       shape_.to_string(), bytes_.size());
  std::string values;
  const std::size_t n = num_elements();
  const std::size_t show = std::min<std::size_t>(n, 16);
  dispatch::visit_dtype(dtype_, [&](auto t) {
    using T = decltype(t);
    for (std::size_t i = 0; i < show; ++i) {
      T v;
      std::memcpy(&v, bytes_.data() + i * sizeof(T), sizeof(T));
      if constexpr (std::is_same_v<T, bool>) values += fmt::format("{}{}", i ? ", " : "", bytes_[i] != std::byte{0});
      else if constexpr (std::is_same_v<T, dispatch::BoolU32>) values += fmt::format("{}{}", i ? ", " : "", v.v != 0);
      else if constexpr (dispatch::kIsHalf<T>) values += fmt::format("{}{}", i ? ", " : "", static_cast<float>(v));
      else values += fmt::format("{}{}", i ? ", " : "", v);
    }
  });
  if (show < n) values += ", ...";
  return fmt::format("TensorData({}, {}, [{}])", dtype_name(dtype_), shape_.to_string(), values);
}

}  // namespace tensor
