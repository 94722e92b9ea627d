// Helpers for the CPU backend tests: call CPU entries directly (no dispatch), build
// tensors of any dtype in a chosen layout, and read them back as host vectors.
#pragma once

#include <gtest/gtest.h>
#include <hwy/targets.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.hpp"
#include "backends/cpu/cpu_info.hpp"
#include "backends/cpu/cpu_tensor.hpp"
#include "dispatch/backend.hpp"
#include "lib/core/element.hpp"

namespace tensor::cpu::test {

using dispatch::Family;
using dispatch::Prim;

inline const dispatch::Backend& cpu() {
  static const std::unique_ptr<dispatch::Backend> backend = make_cpu_backend();
  return *backend;
}

// Runs body(target) once per Highway target this build compiled and this CPU runs, with
// dispatch forced to it (traced by name), then restores the real dispatch; stops at the first
// fatal failure.
template <class F>
void for_each_compiled_target(F&& body) {
  const std::vector<std::int64_t> targets = compiled_targets();
  ASSERT_FALSE(targets.empty());
  for (const std::int64_t t : targets) {
    hwy::SetSupportedTargetsForTest(t);
    SCOPED_TRACE(hwy::TargetName(t));
    ASSERT_EQ(std::string(current_target_name()), hwy::TargetName(t));
    body(t);
    if (::testing::Test::HasFatalFailure()) break;
  }
  hwy::SetSupportedTargetsForTest(0);
}

template <Family F>
auto entry(OpCode op) {
  auto fn = cpu().get<F>(op);
  if (!fn) throw std::runtime_error("cpu entry missing");
  return fn;
}

// Host element type for a dtype: one-byte bools are read as uint8_t.
template <class T> struct HostOf { using type = T; };
template <> struct HostOf<bool> { using type = std::uint8_t; };

template <class T>
Prim from_vec(const std::vector<T>& v, const Shape& shape, DType dtype = dtype_of<T>) {
  std::vector<std::byte> bytes(v.size() * sizeof(T));
  if (!bytes.empty()) std::memcpy(bytes.data(), v.data(), bytes.size());
  return entry<Family::FromData>(OpCode::from_data)(TensorData(std::move(bytes), shape, dtype), kCpuDevice);
}

template <class T>
std::vector<T> to_vec(const Prim& p) {
  TensorData d = entry<Family::IntoData>(OpCode::into_data)(p).get();
  EXPECT_EQ(d.bytes().size(), d.num_elements() * sizeof(T));
  std::vector<T> out(d.num_elements());
  if (!out.empty()) std::memcpy(out.data(), d.bytes().data(), d.bytes().size());
  return out;
}

inline std::vector<float> to_f32(const Prim& p) { return to_vec<float>(p); }

inline Prim swap_dims(Prim p, std::size_t a, std::size_t b) {
  return entry<Family::SwapDims>(OpCode::swap_dims)(std::move(p), a, b);
}
inline Prim slice(Prim p, std::vector<dispatch::DimSlice> s) {
  return entry<Family::Slice>(OpCode::slice)(std::move(p), s);
}
inline Prim flip(Prim p, std::vector<std::size_t> axes) { return entry<Family::Axes>(OpCode::flip)(std::move(p), axes); }
inline Prim expand(Prim p, const Shape& s) { return entry<Family::Reshape>(OpCode::expand)(std::move(p), s); }
inline Prim reshape(Prim p, const Shape& s) { return entry<Family::Reshape>(OpCode::reshape)(std::move(p), s); }

// Layouts every elementwise test covers (STYLE: op x dtype x layout).
enum class Lay { Contiguous, Transposed, StepSliced, Flipped, Broadcast, ZeroSize };
inline constexpr Lay kLayouts[] = {Lay::Contiguous, Lay::Transposed, Lay::StepSliced,
                                   Lay::Flipped,    Lay::Broadcast,  Lay::ZeroSize};
inline std::string lay_name(Lay l) {
  constexpr const char* kNames[] = {"contiguous", "transposed", "step-sliced", "flipped", "broadcast", "zero-size"};
  return kNames[static_cast<int>(l)];
}

// Logical row-major values of an R x C tensor in layout `lay`: gen(i, j), with the
// broadcast layout repeating row 0 and the zero-size layout having no rows.
template <class T, class Gen>
std::vector<T> logical_values(Lay lay, std::size_t rows, std::size_t cols, Gen gen) {
  if (lay == Lay::ZeroSize) return {};
  std::vector<T> v(rows * cols);
  for (std::size_t i = 0; i < rows; ++i)
    for (std::size_t j = 0; j < cols; ++j) v[i * cols + j] = gen(lay == Lay::Broadcast ? 0 : i, j);
  return v;
}

// A tensor whose logical values (row-major, shape [rows, cols]) are `v`, stored in layout `lay`.
template <class T>
Prim build(Lay lay, const std::vector<T>& v, std::size_t rows, std::size_t cols, DType dtype) {
  switch (lay) {
    case Lay::Contiguous: return from_vec(v, Shape{rows, cols}, dtype);
    case Lay::Transposed: {
      std::vector<T> s(rows * cols);
      for (std::size_t i = 0; i < rows; ++i)
        for (std::size_t j = 0; j < cols; ++j) s[j * rows + i] = v[i * cols + j];
      return swap_dims(from_vec(s, Shape{cols, rows}, dtype), 0, 1);
    }
    case Lay::StepSliced: {  // rows every 2nd, columns every 2nd walked backwards
      const std::size_t w = 2 * cols + 1;
      std::vector<T> s(2 * rows * w, v.empty() ? T{} : v[0]);
      for (std::size_t i = 0; i < rows; ++i)
        for (std::size_t j = 0; j < cols; ++j) s[2 * i * w + (2 * cols - 2 * j)] = v[i * cols + j];
      return slice(from_vec(s, Shape{2 * rows, w}, dtype),
                   {{0, 2, rows}, {static_cast<std::int64_t>(2 * cols), -2, cols}});
    }
    case Lay::Flipped: {
      std::vector<T> s(rows * cols);
      for (std::size_t i = 0; i < rows; ++i)
        for (std::size_t j = 0; j < cols; ++j) s[i * cols + (cols - 1 - j)] = v[i * cols + j];
      return flip(from_vec(s, Shape{rows, cols}, dtype), {1});
    }
    case Lay::Broadcast: {
      std::vector<T> s(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(cols));
      return expand(from_vec(s, Shape{1, cols}, dtype), Shape{rows, cols});
    }
    case Lay::ZeroSize: return from_vec(std::vector<T>{}, Shape{0, cols}, dtype);
  }
  return {};
}

inline std::size_t rows_of(Lay lay, std::size_t rows) { return lay == Lay::ZeroSize ? 0 : rows; }

}  // namespace tensor::cpu::test
