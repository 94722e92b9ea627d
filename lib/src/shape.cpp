// Shape: bounds-checked construction and printing.
#include "tensor/shape.hpp"

#include <fmt/format.h>

#include "tensor/error.hpp"

namespace tensor {

void Shape::assign(const std::size_t* d, std::size_t n) {
  if (n > kMaxRank) throw ShapeError(fmt::format("[Shape] rank too large; expected at most {}; got {}", kMaxRank, n));
  std::copy(d, d + n, dims_.begin());
  rank_ = n;
}

void Shape::push_back(std::size_t d) {
  if (rank_ == kMaxRank) throw ShapeError(fmt::format("[Shape] rank too large; expected at most {}; got {}", kMaxRank, rank_ + 1));
  dims_[rank_++] = d;
}

void Shape::erase(std::size_t axis) {
  if (axis >= rank_) throw IndexError(fmt::format("[Shape] axis out of range; expected < {}; got {}", rank_, axis));
  std::copy(dims_.begin() + static_cast<std::ptrdiff_t>(axis) + 1, dims_.begin() + static_cast<std::ptrdiff_t>(rank_),
            dims_.begin() + static_cast<std::ptrdiff_t>(axis));
  --rank_;
}

void Shape::insert(std::size_t axis, std::size_t d) {
  if (axis > rank_) throw IndexError(fmt::format("[Shape] axis out of range; expected <= {}; got {}", rank_, axis));
  if (rank_ == kMaxRank) throw ShapeError(fmt::format("[Shape] rank too large; expected at most {}; got {}", kMaxRank, rank_ + 1));
  std::copy_backward(dims_.begin() + static_cast<std::ptrdiff_t>(axis), dims_.begin() + static_cast<std::ptrdiff_t>(rank_),
                     dims_.begin() + static_cast<std::ptrdiff_t>(rank_) + 1);
  dims_[axis] = d;
  ++rank_;
}

std::size_t Shape::checked_num_elements(std::string_view op) const {
  std::size_t n = 1;
  bool zero = false;
  for (std::size_t i = 0; i < rank_; ++i) {
    if (dims_[i] == 0) { zero = true; continue; }
    if (dims_[i] > kMaxElements / n)
      throw ShapeError(fmt::format("[{}] too many elements; expected at most 2^63 - 1 (the product of the nonzero dims); "
                                   "got shape {}",
                                   op, to_string()));
    n *= dims_[i];
  }
  return zero ? 0 : n;
}

std::size_t Shape::checked_num_bytes(std::string_view op, std::size_t elem_size) const {
  const std::size_t n = checked_num_elements(op);
  if (elem_size != 0 && n > kMaxElements / elem_size)
    throw ShapeError(fmt::format("[{}] tensor too large; expected at most 2^63 - 1 bytes; got shape {} of {}-byte elements",
                                 op, to_string(), elem_size));
  return n * elem_size;
}

std::string Shape::to_string() const { return fmt::format("[{}]", fmt::join(begin(), end(), ", ")); }

}  // namespace tensor
