// Validation helpers used by the forwarders in dispatch.cpp.
#include "dispatch/validate.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "tensor/error.hpp"

namespace tensor::dispatch {

std::string shape_str(const Shape& s) { return s.to_string(); }

std::string kinds_str(std::uint8_t mask) {
  std::string out;
  auto add = [&](const char* k) { out += out.empty() ? k : std::string(" or ") + k; };
  if (mask & kKindF) add("Float");
  if (mask & kKindI) add("Int");
  if (mask & kKindB) add("Bool");
  return out;
}

std::size_t resolve_dim(std::string_view op, std::int64_t dim, std::size_t rank) {
  const auto r = static_cast<std::int64_t>(rank);
  const std::int64_t d = dim < 0 ? dim + r : dim;
  if (d < 0 || d >= r)
    throw IndexError(fmt::format("[{}] dim out of range; expected {}..{} for rank {}; got {}", op, -r, r - 1, rank, dim));
  return static_cast<std::size_t>(d);
}

std::size_t resolve_dim(OpCode op, std::int64_t dim, std::size_t rank) { return resolve_dim(op_name(op), dim, rank); }

void check_kind(OpCode op, const DispatchTensor& t) {
  if (!t.prim) throw Error(fmt::format("[{}] expected a tensor; got an empty (moved-from) handle", op_name(op)));
  const std::uint8_t mask = op_info(op).kinds;
  const std::uint8_t bit = t.kind == Kind::Float ? kKindF : t.kind == Kind::Int ? kKindI : t.kind == Kind::Bool ? kKindB : 0;
  if (!(mask & bit))
    throw DTypeError(fmt::format("[{}] wrong tensor kind; expected {}; got {}", op_name(op), kinds_str(mask), kind_name(t.kind)));
}

void check_same_device(OpCode op, const DispatchTensor& a, const DispatchTensor& b) {
  if (a.device != b.device)
    throw DeviceError(DeviceError::Kind::Mismatch,
                      fmt::format("[{}] operands on different devices; expected {}; got {}", op_name(op),
                                  device_string(a.device), device_string(b.device)));
}

void check_pair(OpCode op, const DispatchTensor& a, const DispatchTensor& b, bool same_dtype) {
  if (!b.prim) throw Error(fmt::format("[{}] expected a tensor; got an empty (moved-from) handle", op_name(op)));
  if (a.kind != b.kind)
    throw DTypeError(fmt::format("[{}] operand kinds differ; expected {}; got {}", op_name(op), kind_name(a.kind),
                                 kind_name(b.kind)));
  check_same_device(op, a, b);
  if (same_dtype && a.dtype() != b.dtype())
    throw DTypeError(fmt::format("[{}] operand dtypes differ; expected {}; got {}", op_name(op), dtype_name(a.dtype()),
                                 dtype_name(b.dtype())));
}

// A quantized tensor reaching an op that has no quantized form yet: say so, and what works
// (the generic messages below would claim the device cannot store it).
[[noreturn]] void throw_not_for_quantized(OpCode op, DeviceId device) {
  throw DTypeError(fmt::format("[{}] quantized tensors have no {} yet; expected a float tensor (dequantize() it first), or "
                               "a quantized weight of matmul, linear or conv2d; got qfloat on {}",
                               op_name(op), op_name(op), device_string(device)));
}

void check_quantized(OpCode op, const DispatchTensor& t) {
  if (t.dtype() != DType::QFloat)
    throw DTypeError(fmt::format("[{}] not a quantized tensor; expected a qfloat tensor; got {} ({})", op_name(op),
                                 kind_name(t.kind), dtype_name(t.dtype())));
}

// A quantized operand passes only a quant row (the codes' backend holds it); any other op
// refuses it, whatever dtype_usage(QFloat) says (that answers for the quant rows).
void check_quantized_operand(OpCode op, DeviceId device) {
  if (!op_info(op).qfloat_in) throw_not_for_quantized(op, device);
}

void check_arithmetic(OpCode op, DeviceId device, DType dtype) {
  if (dtype == DType::QFloat) return check_quantized_operand(op, device);
  if (!dtype_usage(device, dtype).contains(DTypeUsage::Arithmetic)) {
    throw DTypeError(fmt::format("[{}] dtype not supported for arithmetic on this device; expected a dtype {} computes "
                                 "with; got {} on {}",
                                 op_name(op), device_string(device), dtype_name(dtype), device_string(device)));
  }
}

void check_storage(OpCode op, DeviceId device, DType dtype) {
  if (dtype == DType::QFloat) return check_quantized_operand(op, device);
  if (!dtype_usage(device, dtype).contains(DTypeUsage::Storage)) {
    throw DTypeError(fmt::format("[{}] dtype not supported on this device; expected a dtype {} can store; got {} on {}",
                                 op_name(op), device_string(device), dtype_name(dtype), device_string(device)));
  }
}

Shape broadcast_shapes(OpCode op, const Shape& a, const Shape& b) {
  if (a.rank() != b.rank())
    throw ShapeError(fmt::format("[{}] operand ranks differ; expected equal ranks; got {} and {}", op_name(op),
                                 a.to_string(), b.to_string()));
  for (std::size_t i = 0; i < a.rank(); ++i)
    if (a[i] != b[i] && a[i] != 1 && b[i] != 1)
      throw ShapeError(fmt::format("[{}] shapes do not broadcast; expected dim {} equal or 1; got {} and {}", op_name(op), i,
                                   a.to_string(), b.to_string()));
  const Shape out = broadcast_shape(a, b);
  check_view_shape(op, out);
  return out;
}

void check_non_empty(OpCode op, const Shape& s, std::string_view what) {
  if (s.num_elements() == 0)
    throw ShapeError(fmt::format("[{}] expected a non-empty {}; got shape {}", op_name(op), what, s.to_string()));
}

std::vector<DimSlice> resolve_slices(OpCode op, const Shape& s, std::span<const tensor::Slice> slices) {
  if (slices.size() > s.rank())
    throw IndexError(fmt::format("[{}] too many slices; expected at most {}; got {}", op_name(op), s.rank(), slices.size()));
  std::vector<DimSlice> out(s.rank());
  for (std::size_t d = 0; d < s.rank(); ++d) {
    const auto n = static_cast<std::int64_t>(s[d]);
    if (d >= slices.size()) {
      out[d] = {0, 1, s[d]};
      continue;
    }
    const tensor::Slice& sl = slices[d];
    if (sl.step == 0) throw IndexError(fmt::format("[{}] slice step must not be zero; got step 0 in dim {}", op_name(op), d));
    // As burn's Slice::to_range: negative bounds count from the end, and both bounds
    // clamp to 0..n. A start past the end (after counting from the end) is an error,
    // as in burn, which rejects a range whose start is beyond its end.
    if (sl.start > n)
      throw IndexError(fmt::format("[{}] slice start beyond the end in dim {}; expected a start within -{}..{}; got {}",
                                   op_name(op), d, n, n, sl.start));
    std::int64_t start = std::clamp<std::int64_t>(sl.start < 0 ? sl.start + n : sl.start, 0, n);
    std::int64_t end = sl.end ? std::clamp<std::int64_t>(*sl.end < 0 ? *sl.end + n : *sl.end, 0, n) : n;
    if (end < start) end = start;  // a reversed range selects nothing
    // In uint64: |INT64_MIN| and span + step - 1 do not fit int64.
    const auto span = static_cast<std::uint64_t>(end - start);
    const std::uint64_t k = sl.step > 0 ? static_cast<std::uint64_t>(sl.step) : std::uint64_t{0} - static_cast<std::uint64_t>(sl.step);
    const std::uint64_t len = span == 0 ? 0 : (span - 1) / k + 1;
    // With at most one element the step is never taken: 1 keeps stride x step in range.
    const std::int64_t step = len <= 1 ? 1 : sl.step;
    if (sl.step > 0) out[d] = {start, step, static_cast<std::size_t>(len)};
    else out[d] = {len ? end - 1 : 0, step, static_cast<std::size_t>(len)};
  }
  return out;
}

Shape sliced_shape(const Shape& s, std::span<const DimSlice> ds) {
  Shape out = s;
  for (std::size_t d = 0; d < ds.size(); ++d) out[d] = ds[d].len;
  return out;
}

void check_view_shape(OpCode op, const Shape& s) { s.checked_num_elements(op_name(op)); }

void check_alloc_shape(OpCode op, const Shape& s, DType dtype) { s.checked_num_bytes(op_name(op), dtype_size(dtype)); }

std::uint64_t arange_count(std::int64_t start, std::int64_t end, std::int64_t step) {
  if (step > 0 && end > start) {
    const std::uint64_t diff = static_cast<std::uint64_t>(end) - static_cast<std::uint64_t>(start);
    const auto k = static_cast<std::uint64_t>(step);
    return diff / k + (diff % k != 0);
  }
  if (step < 0 && end < start) {
    const std::uint64_t diff = static_cast<std::uint64_t>(start) - static_cast<std::uint64_t>(end);
    const std::uint64_t k = std::uint64_t{0} - static_cast<std::uint64_t>(step);
    return diff / k + (diff % k != 0);
  }
  return 0;
}

std::size_t checked_dim_sum(OpCode op, std::size_t a, std::size_t b) {
  if (a > kMaxElements || b > kMaxElements - a)
    throw ShapeError(fmt::format("[{}] dim too large; expected a sum of at most 2^63 - 1; got {} + {}", op_name(op), a, b));
  return a + b;
}

Shape repeated_shape(OpCode op, const Shape& s, std::size_t dim, std::size_t times) {
  Shape out = s;
  if (s[dim] != 0 && times > kMaxElements / s[dim])
    throw ShapeError(fmt::format("[{}] too many elements; expected dim {} x {} to be at most 2^63 - 1; got shape {}",
                                 op_name(op), s[dim], times, s.to_string()));
  out[dim] = s[dim] * times;
  check_view_shape(op, out);
  return out;
}

Shape unfolded_shape(OpCode op, const Shape& s, std::size_t dim, std::size_t size, std::size_t step) {
  Shape out = s;
  const std::size_t n = s[dim];
  out[dim] = n >= size ? (n - size) / step + 1 : 0;
  out.push_back(size);
  check_view_shape(op, out);
  return out;
}

void check_device(std::string_view op, DeviceId device) {
  if (device.index_id < device_count(device.type_id)) return;
  std::string have;
  for (DeviceId d : available_devices()) have += (have.empty() ? "" : ", ") + device_string(d);
  throw DeviceError(DeviceError::Kind::Unavailable,
                    fmt::format("[{}] no such device; expected one of: {}; got type {} index {}", op, have, device.type_id,
                                device.index_id));
}

void throw_not_implemented(OpCode op, const Backend& b) {
  throw NotImplemented(fmt::format("[{}] not implemented on {}", op_name(op), b.short_name()));
}

}  // namespace tensor::dispatch
