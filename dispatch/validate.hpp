// Argument validation shared by the forwarders: each check throws the typed error
// with a message "[op] what; expected ...; got ...".
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "dispatch/dispatch.hpp"
#include "lib/core/current_op.hpp"
#include "lib/core/nn_shape.hpp"
#include "lib/core/shape_rules.hpp"

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
// A quant row's operand: DTypeError naming op unless t is quantized.
void check_quantized(OpCode op, const DispatchTensor& t);
void check_storage(OpCode op, DeviceId device, DType dtype);
// Numpy-style broadcast of equal-rank shapes; ShapeError naming both shapes otherwise.
Shape broadcast_shapes(OpCode op, const Shape& a, const Shape& b);
// Throws ShapeError unless the tensor has at least one element.
void check_non_empty(OpCode op, const Shape& s, std::string_view what);
// Resolves user slices to one DimSlice per dim.
std::vector<DimSlice> resolve_slices(OpCode op, const Shape& s, std::span<const tensor::Slice> slices);
// Shape of a slice result.
Shape sliced_shape(const Shape& s, std::span<const DimSlice> ds);

// Size limits (SPEC: element counts <= 2^63 - 1, byte counts that fit; kMaxAllocBytes is
// lib/core/shape_rules.hpp's), checked in one place: Shape::checked_num_elements /
// checked_num_bytes, called through these by every forwarder that makes a shape.
// ShapeError naming `op`.
// A shape a view op makes (no allocation): its element count fits.
void check_view_shape(OpCode op, const Shape& s);
// A shape that is allocated with elements of `dtype`: elements and bytes fit.
void check_alloc_shape(OpCode op, const Shape& s, DType dtype);
// Elements of arange(start, end, step) (step != 0), counted exactly in uint64.
std::uint64_t arange_count(std::int64_t start, std::int64_t end, std::int64_t step);
// Shape of repeat_dim / cat / unfold results, with overflow-checked dims and counts.
Shape repeated_shape(OpCode op, const Shape& s, std::size_t dim, std::size_t times);
Shape unfolded_shape(OpCode op, const Shape& s, std::size_t dim, std::size_t size, std::size_t step);
// a + b for a dim, checked (ShapeError naming `op` beyond 2^63 - 1).
std::size_t checked_dim_sum(OpCode op, std::size_t a, std::size_t b);

// The device exists on this machine (a known type, index below its device count);
// DeviceError (Unavailable) naming `op` and listing the devices otherwise.
void check_device(std::string_view op, DeviceId device);

// The user-visible op the forwarders are running on this thread (set when a backend
// entry is looked up), so backend errors (out of memory) can name it: lib/core's
// current op, by its op-table name.
inline void set_current_op(OpCode op) noexcept { core::set_current_op(op_name(op)); }
using core::current_op_name;

// lib/core/shape_rules.hpp's matmul rule, naming the op by its op code.
inline Shape matmul_shape(OpCode op, const Shape& a, const Shape& b) { return core::matmul_shape(op_name(op), a, b); }

[[noreturn]] void throw_not_implemented(OpCode op, const Backend& b);

}  // namespace tensor::dispatch
