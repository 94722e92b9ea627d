// Argument validation shared by the forwarders: each check throws the typed error
// with a message "[op] what; expected ...; got ...".
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "dispatch/dispatch.hpp"

namespace tensor::dispatch {

std::string shape_str(const Shape& s);
std::string kinds_str(std::uint8_t mask);

// Resolves a possibly negative dim against `rank`; IndexError when out of range.
std::size_t resolve_dim(OpCode op, std::int64_t dim, std::size_t rank);
std::size_t resolve_dim(std::string_view op, std::int64_t dim, std::size_t rank);

// The tensor's kind is one the op accepts (op table kinds column); DTypeError otherwise.
void check_kind(OpCode op, const DispatchTensor& t);
// A second operand must be of the same kind, device and dtype as the first.
void check_pair(OpCode op, const DispatchTensor& a, const DispatchTensor& b, bool same_dtype = true);
void check_same_device(OpCode op, const DispatchTensor& a, const DispatchTensor& b);
// The device can compute with the tensor's dtype (Arithmetic) or merely hold it (Storage).
void check_arithmetic(OpCode op, DeviceId device, DType dtype);
void check_storage(OpCode op, DeviceId device, DType dtype);
// Numpy-style broadcast of equal-rank shapes; ShapeError naming both shapes otherwise.
Shape broadcast_shapes(OpCode op, const Shape& a, const Shape& b);
// Throws ShapeError unless the tensor has at least one element.
void check_non_empty(OpCode op, const Shape& s, std::string_view what);
// Resolves user slices to one DimSlice per dim.
std::vector<DimSlice> resolve_slices(OpCode op, const Shape& s, std::span<const tensor::Slice> slices);
// Shape of a slice result.
Shape sliced_shape(const Shape& s, std::span<const DimSlice> ds);

[[noreturn]] void throw_not_implemented(OpCode op, const Backend& b);

}  // namespace tensor::dispatch
