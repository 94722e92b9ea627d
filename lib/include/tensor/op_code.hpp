// OpCode: one enumerator per row of the op table (dispatch/table/op_table.def, copied here at build time),
// valued by the row's code column: append-only, so a value compiled into user code never changes.
#pragma once

#include <cstdint>

namespace tensor {

/// One enumerator per op of the op table (dispatch/table/op_table.def; each op's kinds and meaning:
/// dispatch/table/ops.md), valued by the row's code: append-only, so a value never changes.
enum class OpCode : std::uint16_t {
#define TENSOR_OP(name, family, kinds, policy, meaning, code, ...) name = code,
#include "tensor/op_table.def"
#undef TENSOR_OP
};

/// The number of ops in the table (rows of op_table.def).
inline constexpr int kOpCount = 0
#define TENSOR_OP(name, family, kinds, policy, meaning, ...) +1
#include "tensor/op_table.def"
#undef TENSOR_OP
    ;

}  // namespace tensor
