// Forwarders: creation and transfer. Each validates its arguments, states the output metadata and runs
// the backend entry through the one invocation path (dispatch/forward.hpp).
#include "dispatch/autodiff.hpp"
#include "dispatch/forward.hpp"
#include "dispatch/quant.hpp"

namespace tensor::dispatch {
using namespace fwd;

// ---- creation and transfer -------------------------------------------------------

using T = DispatchTensor;

// The creation families: the kind is one the row lists, the dtype that kind's (the
// device's default when none is asked for), the device can hold it, the shape fits.
namespace {
DType creation_dtype(OpCode op, const Shape& shape, DeviceId device, Kind kind, std::optional<DType> dtype) {
  check_create_kind(op, kind);
  const DType dt = resolve_dtype(op, device, kind, dtype);
  check_storage(op, device, dt);
  check_alloc_shape(op, shape, dt);
  return dt;
}
OpAttrs creation_attrs(DType dt, DeviceId device) {
  OpAttrs a;
  a.dtype = dt;
  a.device = device;
  return a;
}
}  // namespace

template <> struct fwd::Rule<Family::Create> : RuleBase {
  struct Plan { DType dt; };
  using Dt = std::optional<DType>;
  static Plan check(OpCode op, const Shape& s, const DeviceId& d, const Kind& k, const Dt& dt) {
    return {creation_dtype(op, s, d, k, dt)};
  }
  static DeviceId device(const Plan&, const Shape&, const DeviceId& d, const Kind&, const Dt&) { return d; }
  static OutMeta meta(OpCode, const Plan& p, const Shape& s, const DeviceId&, const Kind& k, const Dt&) { return {s, p.dt, k}; }
  static OpAttrs attrs(OpCode, const Plan& p, const Shape&, const DeviceId& d, const Kind&, const Dt&) {
    return creation_attrs(p.dt, d);
  }
  template <class Entry>
  [[gnu::always_inline]] static T run(OpCode op, Entry entry, const Plan& p, const Shape& s, const DeviceId& d, const Kind& k, const Dt&) {
    return {entry(op)(s, d, p.dt), k};
  }
};

template <> struct fwd::Rule<Family::Full> : RuleBase {
  struct Plan { DType dt; };
  using Dt = std::optional<DType>;
  static Plan check(OpCode op, const Shape& s, const Scalar&, const DeviceId& d, const Kind& k, const Dt& dt) {
    return {creation_dtype(op, s, d, k, dt)};
  }
  static DeviceId device(const Plan&, const Shape&, const Scalar&, const DeviceId& d, const Kind&, const Dt&) { return d; }
  static OutMeta meta(OpCode, const Plan& p, const Shape& s, const Scalar&, const DeviceId&, const Kind& k, const Dt&) {
    return {s, p.dt, k};
  }
  static OpAttrs attrs(OpCode, const Plan& p, const Shape&, const Scalar& v, const DeviceId& d, const Kind&, const Dt&) {
    OpAttrs a = creation_attrs(p.dt, d);
    a.scalars[0] = v;
    return a;
  }
  template <class Entry>
  [[gnu::always_inline]] static T run(OpCode op, Entry entry, const Plan& p, const Shape& s, const Scalar& v, const DeviceId& d, const Kind& k,
               const Dt&) {
    return {entry(op)(s, v, d, p.dt), k};
  }
};

// from_data: data of another kind is converted to the device's default dtype of the wanted
// kind. So is bool data in another bool storage: every bool tensor of a device has its bool
// dtype, whatever made it (zeros, comparisons, host data), so they mix freely.
template <> struct fwd::Rule<Family::FromData> : RuleBase {
  struct Plan { DType dt; };
  static Plan check(OpCode op, const TensorData& data, const DeviceId& d, const Kind& k) {
    check_create_kind(op, k);
    check_device(op_name(op), d);
    if (op_info(op).qfloat_in) {  // q_from_data: codes and scales, burn's layout
      if (data.dtype() != DType::QFloat || !data.quant_scheme())
        throw DTypeError(fmt::format("[{}] expected quantized data (TensorData::quantized); got {}", op_name(op),
                                     dtype_name(data.dtype())));
      quant::check_plain_device("from_data", d);
      return {DType::QFloat};
    }
    DType dt = data.dtype();
    if (kind_of_dtype(dt) != k || (k == Kind::Bool && dt != default_dtype(d, k, "from_data"))) dt = default_dtype(d, k, "from_data");
    check_storage(op, d, dt);
    return {dt};
  }
  static DeviceId device(const Plan&, const TensorData&, const DeviceId& d, const Kind&) { return d; }
  static OutMeta meta(OpCode, const Plan& p, const TensorData& data, const DeviceId&, const Kind& k) {
    return {data.shape(), p.dt, k};
  }
  static OpAttrs attrs(OpCode, const Plan&, const TensorData&, const DeviceId& d, const Kind&) {
    OpAttrs a;
    a.device = d;
    return a;
  }
  template <class Entry>
  [[gnu::always_inline]] static T run(OpCode op, Entry entry, const Plan& p, TensorData& data, const DeviceId& d, const Kind& k) {
    if (data.dtype() != p.dt) data = data.convert(p.dt);
    return {entry(op)(std::move(data), d), k};
  }
};

template <> struct fwd::Rule<Family::Random> : RuleBase {
  struct Plan { DType dt; };
  using Dt = std::optional<DType>;
  using Dist = Distribution;
  static Plan check(OpCode op, const Shape& s, const Dist& dist, const DeviceId& d, const Kind& k, const Dt& dtype) {
    check_create_kind(op, k);
    const DType dt = resolve_dtype(op, d, k, dtype);
    check_arithmetic(op, d, dt);
    check_alloc_shape(op, s, dt);
    check_enum(op, "distribution kind", dist.kind, Distribution::Kind::Normal, "Default, Uniform, Bernoulli, Normal");
    if (dist.kind == Distribution::Kind::Uniform && !(dist.a <= dist.b))
      throw IndexError(fmt::format("[random] uniform bounds reversed; expected low <= high; got {} and {}", dist.a, dist.b));
    if (dist.kind == Distribution::Kind::Bernoulli && !(dist.a >= 0.0 && dist.a <= 1.0))
      throw IndexError(fmt::format("[random] bernoulli probability out of range; expected 0..1; got {}", dist.a));
    if (dist.kind == Distribution::Kind::Normal && !(dist.b >= 0.0))
      throw IndexError(fmt::format("[random] normal standard deviation negative; expected >= 0; got {}", dist.b));
    return {dt};
  }
  static DeviceId device(const Plan&, const Shape&, const Dist&, const DeviceId& d, const Kind&, const Dt&) { return d; }
  static OutMeta meta(OpCode, const Plan& p, const Shape& s, const Dist&, const DeviceId&, const Kind& k, const Dt&) {
    return {s, p.dt, k};
  }
  static OpAttrs attrs(OpCode, const Plan& p, const Shape&, const Dist& dist, const DeviceId& d, const Kind&, const Dt&) {
    OpAttrs a = creation_attrs(p.dt, d);
    a.options = &dist;
    return a;
  }
  template <class Entry>
  [[gnu::always_inline]] static T run(OpCode op, Entry entry, const Plan& p, const Shape& s, const Dist& dist, const DeviceId& d, const Kind& k,
               const Dt&) {
    return {entry(op)(s, dist, d, p.dt), k};
  }
};

// arange (step 1) and arange_step: an Int range; the count is exact in uint64 and must fit.
namespace {
struct RangePlan {
  DType dt;
  std::size_t count;
};
RangePlan range_plan(OpCode op, std::int64_t start, std::int64_t end, std::int64_t step, DeviceId d,
                     std::optional<DType> dtype) {
  const DType dt = resolve_dtype(OpCode::arange_step, d, Kind::Int, dtype);
  check_arithmetic(OpCode::arange_step, d, dt);
  if (step == 0) throw IndexError("[arange_step] step must not be zero; expected a nonzero step; got 0");
  const std::size_t count = arange_count(start, end, step);
  check_alloc_shape(op, Shape{count}, dt);
  return {dt, count};
}
OpAttrs range_attrs(std::int64_t start, std::int64_t end, std::int64_t step, DType dt, DeviceId d) {
  OpAttrs a = with_ints(start, end, step);
  a.dtype = dt;
  a.device = d;
  return a;
}
}  // namespace
template <> struct fwd::Rule<Family::Range> : RuleBase {
  using Plan = RangePlan;
  using I = std::int64_t;
  using Dt = std::optional<DType>;
  static Plan check(OpCode op, const I& start, const I& end, const DeviceId& d, const Dt& dt) {
    return range_plan(op, start, end, 1, d, dt);
  }
  static DeviceId device(const Plan&, const I&, const I&, const DeviceId& d, const Dt&) { return d; }
  static OutMeta meta(OpCode, const Plan& p, const I&, const I&, const DeviceId&, const Dt&) {
    return {Shape{p.count}, p.dt, Kind::Int};
  }
  static OpAttrs attrs(OpCode, const Plan& p, const I& start, const I& end, const DeviceId& d, const Dt&) {
    return range_attrs(start, end, 1, p.dt, d);
  }
  template <class Entry>
  [[gnu::always_inline]] static T run(OpCode op, Entry entry, const Plan& p, const I& start, const I& end, const DeviceId& d, const Dt&) {
    return {entry(op)(start, end, d, p.dt), Kind::Int};
  }
};
template <> struct fwd::Rule<Family::RangeStep> : RuleBase {
  using Plan = RangePlan;
  using I = std::int64_t;
  using Dt = std::optional<DType>;
  static Plan check(OpCode op, const I& start, const I& end, const I& step, const DeviceId& d, const Dt& dt) {
    return range_plan(op, start, end, step, d, dt);
  }
  static DeviceId device(const Plan&, const I&, const I&, const I&, const DeviceId& d, const Dt&) { return d; }
  static OutMeta meta(OpCode, const Plan& p, const I&, const I&, const I&, const DeviceId&, const Dt&) {
    return {Shape{p.count}, p.dt, Kind::Int};
  }
  static OpAttrs attrs(OpCode, const Plan& p, const I& start, const I& end, const I& step, const DeviceId& d, const Dt&) {
    return range_attrs(start, end, step, p.dt, d);
  }
  template <class Entry>
  [[gnu::always_inline]] static T run(OpCode op, Entry entry, const Plan& p, const I& start, const I& end, const I& step, const DeviceId& d,
               const Dt&) {
    return {entry(op)(start, end, step, d, p.dt), Kind::Int};
  }
};

template <> struct fwd::Rule<Family::IntoData> : RuleBase {
  struct Plan {};
  static Plan check(OpCode op, const T& a) {
    if (!a.prim) throw Error(fmt::format("[{}] expected a tensor; got an empty (moved-from) handle", op_name(op)));
    return {};
  }
  static DeviceId device(const Plan&, const T& a) { return a.device; }
  static OutMeta meta(OpCode, const Plan&, const T& a) { return {a.shape(), a.dtype(), a.kind, false}; }
  template <class Entry>
  [[gnu::always_inline]] static std::future<TensorData> run(OpCode op, Entry entry, const Plan&, T& a) { return entry(op)(a.take()); }
};

// to_device: the same device is the input itself; across backends the data goes through
// the host (read on the source, upload on the destination). A tracked tensor stays on its
// backend.
template <> struct fwd::Rule<Family::ToDevice> : RuleBase {
  struct Plan {};
  static Plan check(OpCode op, const T& a, const DeviceId& device) {
    check_kind(op, a);
    if (a.device != device) {
      check_device(op_name(op), device);  // the destination must exist
      check_storage(op, device, a.dtype());
      if (ad::is_tracked(a) && a.device.type_id != device.type_id)
        throw DeviceError(DeviceError::Kind::Mismatch,
                          fmt::format("[to_device] a tensor that requires grad cannot leave its backend; expected a device "
                                      "like {}; got {} (detach() or inner() it first)",
                                      device_string(a.device), device_string(device)));
    }
    return {};
  }
  static DeviceId device(const Plan&, const T& a, const DeviceId&) { return a.device; }
  static OutMeta meta(OpCode, const Plan&, const T& a, const DeviceId&) { return {a.shape(), a.dtype(), a.kind}; }
  static OpAttrs attrs(OpCode, const Plan&, const T&, const DeviceId& device) {
    OpAttrs x;
    x.device = device;
    return x;
  }
  template <class Entry>
  [[gnu::always_inline]] static T run(OpCode op, Entry entry, const Plan&, T& a, const DeviceId& device) {
    if (a.device == device) return std::move(a);
    const Kind k = a.kind;
    if (a.device.type_id == device.type_id) return {entry(op)(a.take(), device), k};
    // Between a device and its own autodiff device the buffer stays where it is: wrapped as
    // an untracked tensor, or unwrapped (a tracked one was refused in check).
    if (is_autodiff_device(device) && autodiff_inner(device) == a.device) {
      DispatchTensor w = ad::from_inner(std::move(a));
      return w.device == device ? w : dispatch::to_device(std::move(w), device);  // the other strategy's device
    }
    if (is_autodiff_device(a.device) && autodiff_inner(a.device) == device) return ad::inner(std::move(a));
    return from_data(read(std::move(a)), device, k);
  }
};

// Cast: the target dtype is of the row's result kind (cast: the input's; into_int: Int;
// into_float: Float); a same-dtype cast is the input itself.
template <> struct fwd::Rule<Family::Cast> : RuleBase {
  struct Plan { Kind want; };
  static Plan check(OpCode op, const T& a, const DType& dtype) {
    check_kind(op, a);
    const Kind want = op_info(op).result_kind == kKindI ? Kind::Int : op_info(op).result_kind == kKindF ? Kind::Float : a.kind;
    if (kind_of_dtype(dtype) != want)
      throw DTypeError(fmt::format("[{}] target dtype of the wrong kind; expected a {} dtype; got {}", op_name(op),
                                   kind_name(want), dtype_name(dtype)));
    check_storage(op, a.device, a.dtype());
    check_storage(op, a.device, dtype);
    return {want};
  }
  static DeviceId device(const Plan&, const T& a, const DType&) { return a.device; }
  static OutMeta meta(OpCode, const Plan& p, const T& a, const DType& dtype) { return {a.shape(), dtype, p.want}; }
  static OpAttrs attrs(OpCode, const Plan&, const T&, const DType& dtype) {
    OpAttrs x;
    x.dtype = dtype;
    return x;
  }
  template <class Entry>
  [[gnu::always_inline]] static T run(OpCode op, Entry entry, const Plan& p, T& a, const DType& dtype) {
    if (a.kind == p.want && a.dtype() == dtype) return std::move(a);  // nothing to convert
    return {entry(op)(a.take(), dtype), p.want};
  }
};

DispatchTensor create(OpCode op, const Shape& shape, DeviceId device, Kind kind, std::optional<DType> dtype) {
  return forward<Family::Create>(op, shape, device, kind, dtype);
}
DispatchTensor full(const Shape& shape, Scalar value, DeviceId device, Kind kind, std::optional<DType> dtype) {
  return forward<Family::Full>(OpCode::full, shape, value, device, kind, dtype);
}
DispatchTensor from_data(TensorData data, DeviceId device, Kind kind) {
  if (data.dtype() == DType::QFloat) {  // quantized data: codes and scales (the q_from_data row)
    if (kind != Kind::Float)
      throw DTypeError(fmt::format("[from_data] quantized data loads into a Float tensor; expected Float; got {}", kind_name(kind)));
    return forward<Family::FromData>(OpCode::q_from_data, data, device, kind);
  }
  return forward<Family::FromData>(OpCode::from_data, data, device, kind);
}
DispatchTensor random(const Shape& shape, const Distribution& dist, DeviceId device, Kind kind,
                      std::optional<DType> dtype) {
  return forward<Family::Random>(OpCode::random, shape, dist, device, kind, dtype);
}
DispatchTensor arange(std::int64_t start, std::int64_t end, std::int64_t step, DeviceId device,
                      std::optional<DType> dtype) {
  if (step == 1) return forward<Family::Range>(OpCode::arange, start, end, device, dtype);
  return forward<Family::RangeStep>(OpCode::arange_step, start, end, step, device, dtype);
}
std::future<TensorData> into_data(DispatchTensor a) {
  return forward<Family::IntoData>(OpCode::into_data, a);
}
TensorData read(DispatchTensor a) { return into_data(std::move(a)).get(); }
DispatchTensor to_device(DispatchTensor a, DeviceId device) { return forward<Family::ToDevice>(OpCode::to_device, a, device); }
DispatchTensor cast(OpCode op, DispatchTensor a, DType dtype) { return forward<Family::Cast>(op, a, dtype); }

}  // namespace tensor::dispatch
