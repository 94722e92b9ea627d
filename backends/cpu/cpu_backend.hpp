// The CPU backend (after burn-flex): entry point used by backends/backends.cpp.
#pragma once

#include <memory>

#include "dispatch/backend.hpp"

namespace tensor::cpu {

// A Backend with every CPU entry set; the registry fills defaults.
std::unique_ptr<dispatch::Backend> make_cpu_backend();

}  // namespace tensor::cpu
