// The vocabulary the backward rows are written in: tensor math on the inner device,
// through Dispatch's forwarders (so the backward steps pass the hooks, the profiler sees
// them, and they never leave the device).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "dispatch/autodiff/graph.hpp"
#include "dispatch/settings.hpp"

namespace tensor::dispatch::ad::detail {

inline std::vector<std::int64_t> dims_of(const Shape& s) {
  std::vector<std::int64_t> v(s.rank());
  for (std::size_t i = 0; i < s.rank(); ++i) v[i] = static_cast<std::int64_t>(s[i]);
  return v;
}
inline std::int64_t i64(std::size_t v) { return static_cast<std::int64_t>(v); }

inline T mul(T a, T b) { return binary(OpCode::mul, std::move(a), std::move(b)); }
inline T dvd(T a, T b) { return binary(OpCode::div, std::move(a), std::move(b)); }
inline T add(T a, T b) { return binary(OpCode::add, std::move(a), std::move(b)); }
inline T sub(T a, T b) { return binary(OpCode::sub, std::move(a), std::move(b)); }
inline T muls(T a, double s) { return scalar(OpCode::mul_scalar, std::move(a), Scalar(s)); }
inline T adds(T a, double s) { return scalar(OpCode::add_scalar, std::move(a), Scalar(s)); }
inline T neg(T a) { return muls(std::move(a), -1.0); }
inline T un(OpCode op, T a) { return unary(op, std::move(a)); }
inline T sq(const T& a) { return mul(a, a); }
inline T zeros(const Shape& s, const T& like) { return create(OpCode::zeros, s, like.device, Kind::Float, like.dtype()); }
inline T zeros_like(const T& a) { return zeros(a.shape(), a); }
inline T ones_like(const T& a) { return create(OpCode::ones, a.shape(), a.device, Kind::Float, a.dtype()); }
inline T reshape_to(T a, const Shape& s) { const auto d = dims_of(s); return reshape(OpCode::reshape, std::move(a), d); }
inline T expand_to(T a, const Shape& s) { const auto d = dims_of(s); return reshape(OpCode::expand, std::move(a), d); }
inline T swap_last(T a) {
  const auto r = i64(a.shape().rank());
  return swap_dims(std::move(a), r - 2, r - 1);
}
inline T flip_dim(T a, std::size_t d) {
  const std::int64_t ax[1] = {i64(d)};
  return axes(OpCode::flip, std::move(a), ax);
}
inline T cast_to(T g, DType t) { return g.dtype() == t ? g : cast(OpCode::cast, std::move(g), t); }
inline DType int_dtype(DeviceId inner) { return to_dtype(device_settings(inner).int_dtype); }

// The calling thread's group (tensor::dist): this rank and the world size, for the
// collectives' backward rows.
int group_rank();
int group_size();

// Sums a broadcast gradient back to the operand's shape (dims align from the right).
T sum_to(T g, const Shape& s);
// The gradient of a full reduction (shape [1]) spread over `s`.
T spread(T g, const Shape& s);
// d prod / d x_i along `d`: the product of the other elements (exact with zeros).
T prod_grad(const T& x, std::size_t d);
// d cumprod along `d`, exact with zeros.
T cumprod_grad(const T& g, const T& x, std::size_t d);
// d cummax / d cummin along `d`: each output's gradient goes to where its extremum came from.
T cumextreme_grad(const T& g, const T& x, const T& y, std::size_t d);
// d unfold: each window element's gradient added back to its source position.
T unfold_grad(const T& g, const Shape& from, std::size_t d, std::size_t size, std::size_t step);
// Scatters `g` (shaped like `idx`) into zeros of shape `s` (dtype and device of `like`) along `d`.
T scatter_into(const Shape& s, const T& like, std::size_t d, T idx, T g);
// The public Slices selecting what `ds` selects, in the same order.
std::vector<tensor::Slice> public_slices(std::span<const DimSlice> ds);

}  // namespace tensor::dispatch::ad::detail
