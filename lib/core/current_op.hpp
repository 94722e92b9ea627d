// The user-visible op running on this thread, for error messages raised below dispatch
// (a backend out of memory, a lost device, an unvisitable dtype): "[op] ...".
#pragma once

#include <string_view>

namespace tensor::core {

// Set by dispatch when it looks up a backend entry; `name` must outlive the call (the op
// table's names are static).
void set_current_op(std::string_view name) noexcept;
// The name last set on this thread; "tensor" before any op ran.
std::string_view current_op_name() noexcept;

}  // namespace tensor::core
