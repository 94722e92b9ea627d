// Which ops the decorator differentiates, and how: an op has an explicit backward step
// exactly when it has a row in rules/*.def.
#pragma once

#include <array>

#include "dispatch/autodiff.hpp"
#include "dispatch/autodiff/rules/forms.hpp"

namespace tensor::dispatch::ad::detail {

// The module ops' backward entries: differentiating them is second-order autodiff.
inline constexpr Family kBackwardEntryFamilies[] = {
    Family::ConvBackward,        Family::ConvBiasBackward,  Family::PoolBackward,    Family::MaxPoolBackward,
    Family::InterpolateBackward, Family::EmbeddingBackward, Family::CtcLossBackward, Family::DeformConvBackward,
};
constexpr bool second_order(OpCode op) {
  for (Family f : kBackwardEntryFamilies)
    if (op_family(op) == f) return true;
  return false;
}

// Bit op of the result: the op has a row. A second row for one op does not compile.
constexpr std::array<bool, kOpCount> rows_present() {
  std::array<bool, kOpCount> r{};
  auto mark = [&r](OpCode op) {
    if (r[static_cast<std::size_t>(op)]) throw "two backward rows for one op";
    r[static_cast<std::size_t>(op)] = true;
  };
#define AD_ROW(name, via, keeps, ...) mark(OpCode::name);
#define AD_ENTRY(name, fn) mark(OpCode::name);
#include "dispatch/autodiff/rules/elementwise.def"
#include "dispatch/autodiff/rules/reduce.def"
#include "dispatch/autodiff/rules/shape.def"
#include "dispatch/autodiff/rules/module.def"
#include "dispatch/autodiff/rules/graph.def"
#undef AD_ROW
#undef AD_ENTRY
  return r;
}
inline constexpr std::array<bool, kOpCount> kHasRow = rows_present();
constexpr bool has_row(OpCode op) { return kHasRow[static_cast<std::size_t>(op)]; }

constexpr Coverage coverage_of(OpCode op) {
  const OpInfo& info = op_info(op);
  // No Float input that carries a gradient (the table's diff column): comparisons, int
  // and bool ops, creation, reads, the backward entries themselves.
  if (!(info.kinds & kKindF) || info.diff == 0 || second_order(op)) return Coverage::NotDifferentiable;
  if (has_row(op)) return Coverage::Native;
  // A host-trip default would read a tracked tensor back and lose its graph.
  if (info.policy == Policy::Def && !info.host_trip) return Coverage::Decomposed;
  return Coverage::Missing;
}

}  // namespace tensor::dispatch::ad::detail
