// The entries of their own (rules/*.def AD_ENTRY rows whose forward is more than running
// the op): mask_select and attention.
#include <cmath>
#include <limits>

#include "dispatch/autodiff/track.hpp"
#include "dispatch/settings.hpp"

namespace tensor::dispatch::ad::detail {

// The flat positions of the selected elements are found in the forward pass, so backward
// reads nothing back.
Prim t_mask_select(Prim a, Prim mask) {
  constexpr OpCode op = OpCode::mask_select;
  if (!node_of(a)) return forward_untracked<op, Prim, Prim, Prim>(std::move(a), std::move(mask));
  In x = open(std::move(a));
  Prim m = unwrap(std::move(mask));
  const Shape from = x.p->shape();
  T full_mask = expand_to(dt(m), from);
  const std::int64_t flat[1] = {i64(from.num_elements())};
  T pos = argwhere(reshape(OpCode::reshape, std::move(full_mask), flat));  // [n, 1]
  const std::int64_t col[1] = {i64(pos.shape()[0])};
  T idx = reshape(OpCode::reshape, std::move(pos), col);
  const DeviceId dev = x.p->device();
  Prim y = inner_fn<Family::MaskSelect>(op, dev)(std::move(x.p), m);
  return record<1>(op, y, {x.node}, [from, idx = std::move(idx)](const T& g, std::uint32_t, std::span<T> out) {
    T z = create(OpCode::zeros, Shape{from.num_elements()}, g.device, Kind::Float, g.dtype());
    out[0] = reshape_to(select_assign(OpCode::select_add, std::move(z), 0, idx, g, IndexingUpdateOp::Add), from);
  });
}

// burn's attention_fallback (module-ops.md §2.13), composed from tracked ops, so it is
// differentiated through its parts.
Prim t_attention(Prim q, Prim k, Prim v, Prim mask, Prim bias, const tensor::nn::AttentionModuleOptions& o) {
  constexpr OpCode op = OpCode::attention;
  const bool tracked = node_of(q) || node_of(k) || node_of(v) || (bias && node_of(bias));
  if (!tracked)
    return forward_untracked<op, Prim, Prim, Prim, Prim, Prim, Prim, const tensor::nn::AttentionModuleOptions&>(
        std::move(q), std::move(k), std::move(v), std::move(mask), std::move(bias), o);
  const bool f64 = q->dtype() == DType::F64;
  const double lowest = f64 ? -1.7976931348623157e308 : -3.4028234663852886e38;
  const double tiny = f64 ? 2.2250738585072014e-308 : 1.1754943508222875e-38;
  const std::size_t r = q->shape().rank(), lq = q->shape()[r - 2], lk = k->shape()[r - 2], d = q->shape()[r - 1];
  T Q(std::move(q), Kind::Float), K(std::move(k), Kind::Float), V(std::move(v), Kind::Float);
  const double scale = o.scale ? *o.scale : 1.0 / std::sqrt(static_cast<double>(d));
  T S = muls(matmul(Q, swap_last(K)), scale);
  if (o.softcap) S = muls(un(OpCode::tanh, muls(std::move(S), 1.0 / *o.softcap)), *o.softcap);
  const double ninf = -std::numeric_limits<double>::infinity();
  if (mask) S = mask_fill(std::move(S), T(std::move(mask), Kind::Bool), Scalar(ninf));
  if (o.is_causal) {
    const DeviceId dev = S.device;
    const DType it = to_dtype(device_settings(dev).int_dtype);
    const std::int64_t col_shape[2] = {1, i64(lk)}, row_shape[2] = {i64(lq), 1};
    T cols = reshape(OpCode::reshape, arange(0, i64(lk), 1, dev, it), col_shape);
    T rows = scalar(OpCode::add_scalar, reshape(OpCode::reshape, arange(0, i64(lq), 1, dev, it), row_shape),
                    Scalar(static_cast<std::int64_t>(lk) - static_cast<std::int64_t>(lq)));
    T above = compare(OpCode::greater, expand_to(std::move(cols), Shape{lq, lk}), expand_to(std::move(rows), Shape{lq, lk}));
    Shape full = S.shape();
    Shape m = full;
    for (std::size_t i = 0; i + 2 < m.rank(); ++i) m[i] = 1;
    S = mask_fill(std::move(S), expand_to(reshape_to(std::move(above), m), full), Scalar(ninf));
  }
  if (bias) S = add(std::move(S), T(std::move(bias), Kind::Float));
  T mx = scalar(OpCode::clamp_min, reduce_dim(OpCode::max_dim, S, -1), Scalar(lowest));
  T e = un(OpCode::exp, sub(std::move(S), std::move(mx)));
  T z = scalar(OpCode::clamp_min, reduce_dim(OpCode::sum_dim, e, -1), Scalar(tiny));
  return matmul(dvd(std::move(e), std::move(z)), std::move(V)).take();
}

}  // namespace tensor::dispatch::ad::detail
