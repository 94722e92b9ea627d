// TensorData: owning host bytes with a dtype and a shape; the currency of from_data / into_data.
#pragma once

#include <cstddef>
#include <cstring>
#include <string>
#include <vector>

#include "tensor/dtype.hpp"
#include "tensor/error.hpp"
#include "tensor/export.hpp"
#include "tensor/quant_scheme.hpp"
#include "tensor/scalar.hpp"
#include "tensor/shape.hpp"

namespace tensor {

/// Owning host data of one tensor: little-endian element bytes, a Shape and a DType (row-major).
/// What Tensor::from_data takes and into_data returns; the same on every device.
class TENSOR_API TensorData {
 public:
  /// Empty f32 data of rank 0 (no bytes).
  TensorData() = default;
  /// Takes raw little-endian element bytes. Throws ShapeError when the byte
  /// count does not match shape x dtype size.
  TensorData(std::vector<std::byte> bytes, Shape shape, DType dtype) : TensorData(std::move(bytes), shape, dtype, "TensorData") {}

  /// Copies `values` (row-major) with the dtype matching T.
  template <class T>
  static TensorData from(const std::vector<T>& values, Shape shape) {
    std::vector<std::byte> bytes(values.size() * sizeof(T));
    if constexpr (std::is_same_v<T, bool>) {
      for (std::size_t i = 0; i < values.size(); ++i) bytes[i] = std::byte{values[i] ? std::uint8_t{1} : std::uint8_t{0}};
    } else if (!values.empty()) {
      std::memcpy(bytes.data(), values.data(), bytes.size());
    }
    return TensorData(std::move(bytes), shape, dtype_of<T>, "TensorData::from");
  }
  /// A rank-1 tensor holding `values`.
  template <class T>
  static TensorData from(const std::vector<T>& values) { return from(values, Shape{values.size()}); }

  /// Quantized data (dtype QFloat) in burn's byte layout: the codes (one i8 per element for
  /// the Native store, little-endian u32 words for PackedU32, each line of the last axis
  /// packed on its own), then one scale per block in the scheme's scale dtype, row-major
  /// over the block grid. Throws FormatError naming `TensorData::quantized` when the byte
  /// count does not match scheme and shape, ShapeError when the blocks do not tile the shape.
  static TensorData quantized(std::vector<std::byte> bytes, Shape shape, const QuantScheme& scheme);
  /// The scheme of QFloat data (TensorData::quantized, Tensor::into_data of a quantized
  /// tensor); nullptr for every other dtype.
  const QuantScheme* quant_scheme() const { return dtype_ == DType::QFloat ? &qscheme_ : nullptr; }

  /// Zero-filled data of the given shape and dtype.
  static TensorData zeros(Shape shape, DType dtype);
  /// Every element `value`, converted to dtype as TensorData::convert converts.
  static TensorData full(Shape shape, Scalar value, DType dtype);

  /// The elements as T; throws DTypeError unless T matches dtype() (bool reads any bool storage).
  template <class T>
  std::vector<T> to_vec() const {
    check_element_type(dtype_of<T>, sizeof(T));
    std::vector<T> out(num_elements());
    if constexpr (std::is_same_v<T, bool>) {
      const std::size_t w = dtype_size(dtype_);
      for (std::size_t i = 0; i < out.size(); ++i) {
        bool v = false;
        for (std::size_t b = 0; b < w; ++b) v = v || bytes_[i * w + b] != std::byte{0};
        out[i] = v;
      }
    } else if (!out.empty()) {
      std::memcpy(out.data(), bytes_.data(), bytes_.size());
    }
    return out;
  }

  /// The same values in another dtype (float->int truncates and saturates, NaN -> 0;
  /// int->int wraps; anything -> bool is "nonzero"; bool -> number is 0/1).
  TensorData convert(DType to) const;

  /// The element type.
  DType dtype() const { return dtype_; }
  /// The dims.
  const Shape& shape() const { return shape_; }
  /// The element count (product of the dims).
  std::size_t num_elements() const { return shape_.num_elements(); }
  /// The raw little-endian element bytes, row-major.
  ///@{
  const std::vector<std::byte>& bytes() const { return bytes_; }
  std::vector<std::byte>& bytes() { return bytes_; }
  ///@}
  /// Moves the bytes out (the data is left without them).
  std::vector<std::byte> into_bytes() && { return std::move(bytes_); }

  /// Exact equality of dtype, shape and bytes (quantized data: the schemes are equal too).
  bool operator==(const TensorData& o) const {
    return dtype_ == o.dtype_ && shape_ == o.shape_ && bytes_ == o.bytes_ && (dtype_ != DType::QFloat || qscheme_ == o.qscheme_);
  }
  /// "TensorData(f32, [2, 3], [1, 2, ...])": dtype, shape and the first 16 values.
  std::string to_string() const;

 private:
  /// `op` names the public entry (TensorData, TensorData::from, ...) in error messages.
  TensorData(std::vector<std::byte> bytes, Shape shape, DType dtype, const char* op);
  void check_element_type(DType want, std::size_t size) const;
  std::vector<std::byte> bytes_;
  Shape shape_;
  DType dtype_ = DType::F32;
  QuantScheme qscheme_{};  // meaningful for QFloat data only
};

}  // namespace tensor
