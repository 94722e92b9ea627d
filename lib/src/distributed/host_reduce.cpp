// The host reduction every staged collective uses: one elementwise loop per dtype and op,
// applied in rank order so each rank computes bitwise the same result.
#include <cmath>
#include <cstring>
#include <type_traits>

#include "communicator.hpp"

namespace tensor::dist::internal {
namespace {

// Integer Sum wraps (through the unsigned type: no signed-overflow UB), as int tensors add.
template <class T>
T add(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
  } else {
    return a + b;
  }
}

template <class T>
bool is_nan(T v) {
  if constexpr (std::is_floating_point_v<T>) return std::isnan(v);
  return false;
}

// memcpy in and out: the byte buffers carry no alignment promise.
template <class T, class F>
void each(std::byte* acc, const std::byte* x, std::size_t n, F f) {
  for (std::size_t i = 0; i < n; ++i) {
    T a, b;
    std::memcpy(&a, acc + i * sizeof(T), sizeof(T));
    std::memcpy(&b, x + i * sizeof(T), sizeof(T));
    a = f(a, b);
    std::memcpy(acc + i * sizeof(T), &a, sizeof(T));
  }
}

template <class T>
void reduce_t(std::byte* acc, const std::byte* x, std::size_t n, ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Mean: each<T>(acc, x, n, [](T a, T b) { return add(a, b); }); return;
    // NaN wins: once either side is NaN the result stays NaN, in any rank order.
    case ReduceOp::Max: each<T>(acc, x, n, [](T a, T b) { return is_nan(a) || is_nan(b) ? (is_nan(a) ? a : b) : (b > a ? b : a); }); return;
    case ReduceOp::Min: each<T>(acc, x, n, [](T a, T b) { return is_nan(a) || is_nan(b) ? (is_nan(a) ? a : b) : (b < a ? b : a); }); return;
  }
}

template <class T>
void mean_t(std::byte* acc, std::size_t n, int size) {
  for (std::size_t i = 0; i < n; ++i) {
    T a;
    std::memcpy(&a, acc + i * sizeof(T), sizeof(T));
    a = static_cast<T>(a / static_cast<T>(size));
    std::memcpy(acc + i * sizeof(T), &a, sizeof(T));
  }
}

template <class F>
void by_dtype(DType dtype, F f) {
  switch (dtype) {
    case DType::F64: f(double{}); return;
    case DType::F32: f(float{}); return;
    case DType::I64: f(std::int64_t{}); return;
    case DType::I32: f(std::int32_t{}); return;
    case DType::I16: f(std::int16_t{}); return;
    case DType::I8: f(std::int8_t{}); return;
    case DType::U64: f(std::uint64_t{}); return;
    case DType::U32: f(std::uint32_t{}); return;
    case DType::U16: f(std::uint16_t{}); return;
    case DType::U8: f(std::uint8_t{}); return;
    default: break;
  }
  throw DTypeError(std::string("[dist] host reduction expected a float or int dtype other than f16/bf16; got ") +
                   std::string(dtype_name(dtype)));
}

}  // namespace

void reduce_into(std::byte* acc, const std::byte* x, std::size_t n, DType dtype, ReduceOp op) {
  by_dtype(dtype, [&](auto t) { reduce_t<decltype(t)>(acc, x, n, op); });
}

void finish(std::byte* acc, std::size_t n, DType dtype, ReduceOp op, int size) {
  if (op != ReduceOp::Mean || size == 1) return;
  by_dtype(dtype, [&](auto t) { mean_t<decltype(t)>(acc, n, size); });
}

}  // namespace tensor::dist::internal
