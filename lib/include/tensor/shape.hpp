// Shape (dims of a tensor, at most kMaxRank) and Slice (a range with a step along one dim).
#pragma once


#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tensor/export.hpp"

namespace tensor {

/// The largest tensor rank (dims per Shape and per Tensor).
inline constexpr std::size_t kMaxRank = 8;
/// The largest element count a tensor may have, 2^63 - 1: element counts, strides and
/// element offsets then fit a signed 64-bit integer (checked_num_elements).
inline constexpr std::size_t kMaxElements = (std::size_t{1} << 63) - 1;

/// The dims of a tensor, stored inline (no allocation). Rank 0 is a scalar-like
/// shape with one element. Constructing a rank above kMaxRank throws ShapeError.
class TENSOR_API Shape {
 public:
  /// Rank 0 (one element).
  Shape() = default;
  /// The given dims (ShapeError above kMaxRank, as for every constructor): Shape{2, 3}.
  Shape(std::initializer_list<std::size_t> dims) { assign(dims.begin(), dims.size()); }
  /// The dims of a span.
  explicit Shape(std::span<const std::size_t> dims) { assign(dims.data(), dims.size()); }
  /// The dims of a vector.
  explicit Shape(const std::vector<std::size_t>& dims) { assign(dims.data(), dims.size()); }

  /// The number of dims.
  std::size_t rank() const { return rank_; }
  /// rank() (burn's name).
  std::size_t num_dims() const { return rank_; }
  /// Dim `i` (unchecked: i must be below rank()).
  std::size_t operator[](std::size_t i) const { return dims_[i]; }
  /// Dim `i`, writable (unchecked: i must be below rank()).
  std::size_t& operator[](std::size_t i) { return dims_[i]; }
  /// The product of the dims (1 for rank 0), unchecked for overflow: see checked_num_elements.
  std::size_t num_elements() const {
    std::size_t n = 1;
    for (std::size_t i = 0; i < rank_; ++i) n *= dims_[i];
    return n;
  }
  /// num_elements(), checked: ShapeError "[op] too many elements ..." unless the product
  /// of the nonzero dims is at most kMaxElements (so every stride fits too).
  std::size_t checked_num_elements(std::string_view op) const;
  /// checked_num_elements() x elem_size, checked: ShapeError unless it is at most kMaxElements.
  std::size_t checked_num_bytes(std::string_view op, std::size_t elem_size) const;
  /// The dims, for range-for.
  ///@{
  const std::size_t* begin() const { return dims_.data(); }
  const std::size_t* end() const { return dims_.data() + rank_; }
  ///@}
  /// The dims as a span.
  std::span<const std::size_t> dims() const { return {dims_.data(), rank_}; }
  /// The dims as a vector.
  std::vector<std::size_t> to_vector() const { return {begin(), end()}; }

  /// Appends a dim (ShapeError when the rank would pass kMaxRank).
  void push_back(std::size_t d);
  /// Removes dim `axis` (IndexError unless axis < rank()).
  void erase(std::size_t axis);
  /// Inserts `d` at `axis` (0..rank(): IndexError otherwise; ShapeError past kMaxRank).
  void insert(std::size_t axis, std::size_t d);

  // A loop, not std::equal: <algorithm> costs every user file ~0.06 s (SPEC §8).
  /// Same rank and same dims.
  bool operator==(const Shape& o) const {
    if (rank_ != o.rank_) return false;
    for (std::size_t i = 0; i < rank_; ++i) if (dims_[i] != o.dims_[i]) return false;
    return true;
  }
  /// "[2, 3]"
  std::string to_string() const;

 private:
  void assign(const std::size_t* d, std::size_t n);
  std::array<std::size_t, kMaxRank> dims_{};
  std::size_t rank_ = 0;
};

/// A range along one dim: negative start/end count from the end; a missing end
/// means "to the end"; a negative step selects the range then walks it backwards.
/// A step of 0 is an IndexError.
struct Slice {
  /// The first index (negative: counted from the end).
  std::int64_t start = 0;
  /// One past the last index (negative: from the end; nullopt: the dim's end).
  std::optional<std::int64_t> end = std::nullopt;
  /// The stride between taken indices (negative: the range walked backwards; 0: IndexError).
  std::int64_t step = 1;

  /// The whole dim.
  static Slice all() { return {}; }
  /// Indices [s, e) every `step`.
  static Slice range(std::int64_t s, std::int64_t e, std::int64_t step = 1) { return {s, e, step}; }
  /// Indices from `s` to the end.
  static Slice from(std::int64_t s) { return {s, std::nullopt, 1}; }
  /// One index, keeping the dim with size 1.
  static Slice index(std::int64_t i) { return {i, i == -1 ? std::nullopt : std::optional<std::int64_t>(i + 1), 1}; }
};

}  // namespace tensor
