// Shape: bounds-checked construction and printing.
#include "tensor/shape.hpp"

#include <fmt/format.h>

#include "tensor/error.hpp"

namespace tensor {

void Shape::assign(const std::size_t* d, std::size_t n) {
  if (n > kMaxRank) throw ShapeError(fmt::format("[shape] rank too large; expected at most {}; got {}", kMaxRank, n));
  std::copy(d, d + n, dims_.begin());
  rank_ = n;
}

void Shape::push_back(std::size_t d) {
  if (rank_ == kMaxRank) throw ShapeError(fmt::format("[shape] rank too large; expected at most {}; got {}", kMaxRank, rank_ + 1));
  dims_[rank_++] = d;
}

void Shape::erase(std::size_t axis) {
  if (axis >= rank_) throw IndexError(fmt::format("[shape] axis out of range; expected < {}; got {}", rank_, axis));
  std::copy(dims_.begin() + static_cast<std::ptrdiff_t>(axis) + 1, dims_.begin() + static_cast<std::ptrdiff_t>(rank_),
            dims_.begin() + static_cast<std::ptrdiff_t>(axis));
  --rank_;
}

void Shape::insert(std::size_t axis, std::size_t d) {
  if (axis > rank_) throw IndexError(fmt::format("[shape] axis out of range; expected <= {}; got {}", rank_, axis));
  if (rank_ == kMaxRank) throw ShapeError(fmt::format("[shape] rank too large; expected at most {}; got {}", kMaxRank, rank_ + 1));
  std::copy_backward(dims_.begin() + static_cast<std::ptrdiff_t>(axis), dims_.begin() + static_cast<std::ptrdiff_t>(rank_),
                     dims_.begin() + static_cast<std::ptrdiff_t>(rank_) + 1);
  dims_[axis] = d;
  ++rank_;
}

std::string Shape::to_string() const { return fmt::format("[{}]", fmt::join(begin(), end(), ", ")); }

}  // namespace tensor
