// Bulk dtype conversion for host data (TensorData::convert) and backends. Errors name
// the op the user called (lib/core/current_op.hpp).
#include "lib/core/element.hpp"

#include <fmt/format.h>

#include <cstring>

#include "lib/core/current_op.hpp"
#include "tensor/error.hpp"

namespace tensor::core {

void throw_unvisitable_dtype(DType dtype) {
  if (dtype == DType::QFloat)
    throw DTypeError(fmt::format("[{}] quantized tensors are not supported by this operation; expected a float, int or bool "
                                 "dtype; got qfloat",
                                 current_op_name()));
  throw DTypeError(fmt::format("[{}] invalid dtype; expected a DType value below {}; got {}", current_op_name(), kDTypeCount,
                               static_cast<unsigned>(dtype)));
}

void convert_elements(DType from, const void* src, DType to, void* dst, std::size_t n) {
  if (from == to || (dtype_size(from) == 1 && is_bool(from) && is_bool(to) && dtype_size(to) == 1)) {
    if (n) std::memcpy(dst, src, n * dtype_size(from));
    return;
  }
  visit_dtype(from, [&](auto f) {
    using F = decltype(f);
    visit_dtype(to, [&](auto t) {
      using T = decltype(t);
      const auto* s = static_cast<const unsigned char*>(src);
      auto* d = static_cast<unsigned char*>(dst);
      for (std::size_t i = 0; i < n; ++i) {
        F v;
        std::memcpy(&v, s + i * sizeof(F), sizeof(F));
        if constexpr (std::is_same_v<F, bool>) v = (s[i] != 0);  // any nonzero byte is true
        T out = convert_value<T>(v);
        std::memcpy(d + i * sizeof(T), &out, sizeof(T));
      }
    });
  });
}

}  // namespace tensor::core
