// The one vocabulary of the default compositions (dispatch/defaults/*.cpp): each default is
// composed only from other entries of the same backend (SPEC §2), through these calls.
// Inputs were validated by the forwarder that called the entry, so defaults trust shapes
// and dims like any backend kernel. Registration: a file ends with one
// TENSOR_DEFAULT(kind, row, function) line per defaulted op-table row it provides;
// install.cpp installs them all from the table (a row without one fails to link).
#pragma once
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <numeric>
#include <type_traits>

#include "dispatch/dispatch.hpp"
#include "lib/core/element.hpp"
#include "lib/core/shape_rules.hpp"
#include "dispatch/settings.hpp"
#include "dispatch/validate.hpp"
#include "tensor/error.hpp"

namespace tensor::dispatch::defaults {

// Calls another entry of the backend that owns `device`.
template <Family F, class... A>
inline auto call(OpCode op, DeviceId device, A&&... args) {
  const Backend& b = backend_of(device);
  auto fn = b.get<F>(op);
  if (!fn) throw_not_implemented(op, b);
  return fn(std::forward<A>(args)...);
}

inline DType bool_dt(DeviceId d) { return to_dtype(device_settings(d).bool_dtype); }
inline DType int_dt(DeviceId d) { return to_dtype(device_settings(d).int_dtype); }

// The widest signed int / float dtype the device computes with (defaults that
// need headroom use these instead of assuming 64-bit support).
inline bool arith(DeviceId d, DType t) { return dtype_usage(d, t).contains(DTypeUsage::Arithmetic); }
inline DType wide_int(DeviceId d) { return arith(d, DType::I64) ? DType::I64 : DType::I32; }
inline DType wide_float(DeviceId d) { return arith(d, DType::F64) ? DType::F64 : DType::F32; }

inline TensorData read_prim(Prim p) {
  const DeviceId d = p->device();
  return call<Family::IntoData>(OpCode::into_data, d, std::move(p)).get();
}
inline Prim upload(TensorData data, DeviceId d) { return call<Family::FromData>(OpCode::from_data, d, std::move(data), d); }

// Shorthands over the backend's entries.
inline Prim un(OpCode op, Prim x) { const DeviceId d = x->device(); return call<Family::Unary>(op, d, std::move(x)); }
inline Prim bin(OpCode op, Prim a, Prim b) { const DeviceId d = a->device(); return call<Family::Binary>(op, d, std::move(a), std::move(b)); }
inline Prim sc(OpCode op, Prim x, Scalar s) { const DeviceId d = x->device(); return call<Family::Scalar>(op, d, std::move(x), s); }
inline Prim cmp_s(OpCode op, Prim x, Scalar s) {
  const DeviceId d = x->device();
  return call<Family::CompareScalar>(op, d, std::move(x), s, bool_dt(d));
}
inline Prim cmp(OpCode op, Prim a, Prim b) {
  const DeviceId d = a->device();
  return call<Family::Compare>(op, d, std::move(a), std::move(b), bool_dt(d));
}
// The mask ops give the tensor's shape (dispatch checks that mask and value broadcast to
// it, and backends rely on that): a composition whose tensor is smaller than its mask or
// value (prelu, hypot, relu_backward of broadcast operands) expands the tensor first.
inline Prim widened(Prim x, const Shape& to) {
  if (x->shape() == to) return x;
  const DeviceId d = x->device();
  return call<Family::Reshape>(OpCode::expand, d, std::move(x), to);
}
inline Prim mfill(Prim x, Prim mask, Scalar s) {
  const DeviceId d = x->device();
  const Shape out = broadcast_shapes(OpCode::mask_fill, x->shape(), mask->shape());
  return call<Family::MaskFill>(OpCode::mask_fill, d, widened(std::move(x), out), std::move(mask), s);
}
inline Prim mwhere(Prim x, Prim mask, Prim v) {
  const DeviceId d = x->device();
  const Shape out = broadcast_shapes(OpCode::mask_where, broadcast_shapes(OpCode::mask_where, x->shape(), mask->shape()), v->shape());
  return call<Family::MaskWhere>(OpCode::mask_where, d, widened(std::move(x), out), std::move(mask), std::move(v));
}
inline Prim rdim(OpCode op, Prim x, std::size_t dim) { const DeviceId d = x->device(); return call<Family::Dim>(op, d, std::move(x), dim); }
inline Prim reshape_to(Prim x, const Shape& s) {
  const DeviceId d = x->device();
  return call<Family::Reshape>(OpCode::reshape, d, std::move(x), s);
}
inline Prim flat(Prim x) { const Shape s{x->shape().num_elements()}; return x->shape() == s ? x : reshape_to(std::move(x), s); }
inline Prim full_like(const Prim& x, Scalar v, DType dt) {
  return call<Family::Full>(OpCode::full, x->device(), x->shape(), v, x->device(), dt);
}
inline Prim slice_prim(Prim x, std::vector<DimSlice> ds) {
  const DeviceId d = x->device();
  return call<Family::Slice>(OpCode::slice, d, std::move(x), DimSlices(ds));
}
inline std::vector<DimSlice> full_slices(const Shape& s) {
  std::vector<DimSlice> ds(s.rank());
  for (std::size_t i = 0; i < s.rank(); ++i) ds[i] = {0, 1, s[i]};
  return ds;
}
inline bool is_float_prim(const Prim& x) { return is_float(x->dtype()); }
inline Prim d_square(Prim x) { Prim y = x; return bin(OpCode::mul, std::move(x), std::move(y)); }
inline Prim permute_prim(Prim x, std::vector<std::size_t> axes) {
  const DeviceId d = x->device();
  return call<Family::Axes>(OpCode::permute, d, std::move(x), Axes(axes));
}
inline Prim full_shape(const Shape& s, Scalar v, DeviceId d, DType dt) { return call<Family::Full>(OpCode::full, d, s, v, d, dt); }

// An indexed update by rule at host-computed positions (nd_grid.cpp): element i of v (row
// major) updates x's row-major element targets[i]. Assign: the last write to a position wins;
// Mul, Min, Max: applied in source order, so repeated positions combine as a kernel's
// sequential loop does; Add: select_add. x and v stay on the device.
Prim update_at(Prim x, Prim v, const std::vector<std::int64_t>& targets, IndexingUpdateOp how);

// The targets of scatter (v[p] -> x[p with p[dim] = idx[p]], idx shaped like v) and of
// select_assign (v[p] -> x[p with p[dim] = idx[p[dim]]], idx 1-D): the indices are read back
// and range-checked (IndexError naming `op`).
std::vector<std::int64_t> update_targets(std::string_view op, const Shape& xs, const Shape& vs, std::size_t dim, Prim idx,
                                         bool per_element);

// A convolution's x or weight gradient by the CPU backend's kernel through the host
// (host_trip.cpp; the rank-3 forms).
Prim host_conv_backward(OpCode op, Prim a, Prim b, const Shape& target, const ConvArgs& args);

// The function type of a defaulted row's entry.
constexpr Family row_family(OpCode op) { return op_family(op); }
constexpr Family row_family(DeviceOp op) { return device_op_info(op).family; }
template <auto row> using DefaultFn = FamilyFn<row_family(row)>;

// One declaration per defaulted op-table row; its definition is the TENSOR_DEFAULT line of
// the file that composes it, and install.cpp fills the backend from all of them.
#define TENSOR_DECLARE_Req(kind, name)
#define TENSOR_DECLARE_Def(kind, name) extern const DefaultFn<kind::name> default_##name;
#define TENSOR_OP(name, family, kinds, policy, meaning, ...) TENSOR_DECLARE_##policy(OpCode, name)
#define TENSOR_DEVICE_OP(name, family, policy, meaning) TENSOR_DECLARE_##policy(DeviceOp, name)
#include "dispatch/table/op_table.def"
#undef TENSOR_DEVICE_OP
#undef TENSOR_OP
#undef TENSOR_DECLARE_Def
#undef TENSOR_DECLARE_Req

// Makes `fn` the default of op-table row `row` (kind OpCode or DeviceOp).
#define TENSOR_DEFAULT(kind, row, fn) constinit const DefaultFn<kind::row> default_##row = fn;

}  // namespace tensor::dispatch::defaults
