// The tensor kinds (float, int, bool, quantized float) a tensor handle carries. The one
// definition is the public tensor/dtype.hpp's (exported signatures carry it); dispatch and
// the backends name it from here rather than through the firewall header tensor/detail.hpp.
#pragma once

#include "tensor/dtype.hpp"

namespace tensor::core {
using Kind = tensor::detail::Kind;
}  // namespace tensor::core
