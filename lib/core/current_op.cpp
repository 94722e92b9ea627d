#include "lib/core/current_op.hpp"

namespace tensor::core {

namespace {
thread_local std::string_view t_current_op = "tensor";
}  // namespace

void set_current_op(std::string_view name) noexcept { t_current_op = name; }

std::string_view current_op_name() noexcept { return t_current_op; }

}  // namespace tensor::core
