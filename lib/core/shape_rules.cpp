#include "lib/core/shape_rules.hpp"

#include <fmt/format.h>

#include "tensor/error.hpp"

namespace tensor::core {

Shape matmul_shape(std::string_view op, const Shape& sa, const Shape& sb) {
  if (sa.rank() < 2 || sa.rank() != sb.rank())
    throw ShapeError(fmt::format("[{}] expected operands of equal rank >= 2; got {} and {}", op, sa.to_string(),
                                 sb.to_string()));
  const std::size_t r = sa.rank();
  if (sa[r - 1] != sb[r - 2])
    throw ShapeError(fmt::format("[{}] inner dims differ; expected lhs dim {} == rhs dim {}; got {} and {}", op, r - 1,
                                 r - 2, sa.to_string(), sb.to_string()));
  Shape out = sa;
  for (std::size_t i = 0; i + 2 < r; ++i) {
    if (sa[i] != sb[i] && sa[i] != 1 && sb[i] != 1)
      throw ShapeError(fmt::format("[{}] batch dims do not broadcast; expected dim {} equal or 1; got {} and {}", op, i,
                                   sa.to_string(), sb.to_string()));
    out[i] = sa[i] == 1 ? sb[i] : sa[i];
  }
  out[r - 1] = sb[r - 1];
  return out;
}

}  // namespace tensor::core
