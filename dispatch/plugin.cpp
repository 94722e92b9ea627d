// Backend plugins: the adapter that turns the C tables of tensor/backend_plugin.h into a
// Backend (docs/plugins.md); dispatch/plugin_load.cpp finds, checks and registers them.
//
// The adapter forwards the families a small plugin needs (Unary, Binary, Scalar, Reduce, Dim,
// Create, Full, Matmul, Reshape; from_data / into_data through the device rows). Every other
// required entry, and every entry the plugin leaves NULL or that does not compute the input's
// dtype, runs the host CPU kernel through to_host / from_host; a NULL defaulted entry takes
// dispatch's composition like any backend's.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstring>
#include <future>
#include <type_traits>
#include <vector>

#include "dispatch/defaults/compose.hpp"
#include "dispatch/plugin_lib.hpp"
#include "lib/core/block_stack.hpp"
#include "lib/core/shape_rules.hpp"
#include "tensor/error.hpp"

namespace tensor::dispatch::plugin {
namespace {

// ---- the primitive ---------------------------------------------------------------------

class PluginTensor final : public Primitive {
 public:
  PluginTensor(const PluginLib& lib, TensorPrim h, DType dtype, const Shape& shape, DeviceId device)
      : Primitive(dtype, shape, device), lib_(lib), h_(h) {}
  ~PluginTensor() override { lib_.info.prim.release(h_); }
  // Every op makes and frees one: per-thread freed blocks instead of malloc/free (as CpuTensor).
  static void* operator new(std::size_t size) {
    return size == sizeof(PluginTensor) ? core::BlockStack<sizeof(PluginTensor)>::take() : ::operator new(size);
  }
  static void operator delete(void* p, std::size_t size) {
    if (size == sizeof(PluginTensor)) core::BlockStack<sizeof(PluginTensor)>::give(p);
    else ::operator delete(p);
  }
  bool can_mut() const override { return unique_ref() && (!lib_.info.prim.can_mut || lib_.info.prim.can_mut(h_) != 0); }
  TensorPrim handle() const { return h_; }

 private:
  const PluginLib& lib_;
  TensorPrim h_;
};

TensorPrim handle_of(const Prim& p) { return static_cast<const PluginTensor&>(*p).handle(); }

TensorMeta meta_of(DType dtype, const Shape& shape) {
  TensorMeta m{};
  m.dtype = static_cast<std::int32_t>(dtype);
  m.rank = static_cast<std::uint32_t>(shape.rank());
  for (std::size_t i = 0; i < shape.rank(); ++i) m.shape[i] = static_cast<std::int64_t>(shape[i]);
  return m;
}

// Adopts a new reference from the plugin; `expect` (when given) is the host's shape rule.
Prim wrap(const PluginLib& lib, DeviceId d, TensorPrim h, std::string_view what, const TensorMeta* expect = nullptr) {
  if (!h) throw ExecutionError(fmt::format("[{}:{}] the plugin returned OK without a result", lib.name, what));
  TensorMeta m{};
  const TensorStatus s = lib.info.prim.metadata(h, &m);
  if (s != TENSOR_STATUS_OK) {
    lib.info.prim.release(h);
    check_status(s, lib, what);
  }
  bool ok = m.rank <= kMaxRank && m.dtype >= 0 && m.dtype < TENSOR_DTYPE_COUNT &&
            std::all_of(m.shape, m.shape + std::min<std::uint32_t>(m.rank, kMaxRank), [](std::int64_t n) { return n >= 0; });
  if (ok && expect) ok = m.dtype == expect->dtype && m.rank == expect->rank && std::equal(m.shape, m.shape + m.rank, expect->shape);
  if (!ok) {
    lib.info.prim.release(h);
    std::string got = fmt::format("dtype {} rank {}", m.dtype, m.rank);
    throw ExecutionError(fmt::format("[{}:{}] the plugin's result does not match the op; expected dtype {} rank {}; got {}",
                                     lib.name, what, expect ? expect->dtype : 0, expect ? expect->rank : 0, got));
  }
  std::array<std::size_t, kMaxRank> dims{};  // no heap: a per-op cost
  for (std::uint32_t i = 0; i < m.rank; ++i) dims[i] = static_cast<std::size_t>(m.shape[i]);
  return Prim::adopt(new PluginTensor(lib, h, static_cast<DType>(m.dtype), Shape(std::span<const std::size_t>(dims.data(), m.rank)), d));
}

// ---- host fallback: the CPU kernel through the host ---------------------------------------

TensorData read_plugin(const Prim& p) {
  const PluginLib& lib = lib_of(p->device());
  TensorData data = TensorData::zeros(p->shape(), p->dtype());
  check_status(lib.info.device.to_host(handle_of(p), data.bytes().data(), data.bytes().size()), lib, "to_host");
  return data;
}
Prim to_cpu(Prim p) {
  if (!p || p->device().type_id == kCpuDeviceType) return p;
  // A quantized tensor on the plugin's device is the host's (its rows never cross the ABI).
  const bool plugin_tensor = p->device().type_id < kAutodiffTypeOffset && g_libs[p->device().type_id] && p->dtype() != DType::QFloat;
  TensorData data = plugin_tensor ? read_plugin(p) : defaults::read_prim(std::move(p));
  return defaults::call<Family::FromData>(OpCode::from_data, kCpuDev, std::move(data), kCpuDev);
}
Prim from_cpu(Prim p, DeviceId d) { return p ? defaults::upload(defaults::read_prim(std::move(p)), d) : p; }

template <class A>
decltype(auto) lift(A&& a) {
  using T = std::decay_t<A>;
  if constexpr (std::is_same_v<T, Prim>) return to_cpu(Prim(std::forward<A>(a)));
  else if constexpr (std::is_same_v<T, DeviceId>) return kCpuDev;
  else if constexpr (std::is_same_v<T, std::vector<Prim>>) {
    std::vector<Prim> out;
    for (const Prim& p : a) out.push_back(to_cpu(p));
    return out;
  } else return std::forward<A>(a);
}
template <class A>
void find_device(DeviceId& d, bool& found, const A& a) {
  if (found) return;
  using T = std::decay_t<A>;
  if constexpr (std::is_same_v<T, Prim>) {
    if (a) d = a->device(), found = true;
  } else if constexpr (std::is_same_v<T, DeviceId>) {
    d = a, found = true;
  } else if constexpr (std::is_same_v<T, std::vector<Prim>>) {
    if (!a.empty() && a[0]) d = a[0]->device(), found = true;
  }
}

template <OpCode op, class Fn>
struct Host;
template <OpCode op, class R, class... A>
struct Host<op, R (*)(A...)> {
  static R fn(A... args) {
    DeviceId d{};
    bool found = false;
    (find_device(d, found, args), ...);
    const Backend& cpu = Registry::instance().get(kCpuDeviceType);
    auto f = cpu.get<op_family(op)>(op);
    if (!f) throw_not_implemented(op, backend_of(d));
    if constexpr (std::is_same_v<R, Prim>) {
      return from_cpu(f(lift(std::forward<A>(args))...), d);
    } else if constexpr (std::is_same_v<R, PrimPair>) {
      PrimPair r = f(lift(std::forward<A>(args))...);
      return {from_cpu(std::move(r.first), d), from_cpu(std::move(r.second), d)};
    } else if constexpr (std::is_same_v<R, std::vector<Prim>>) {
      std::vector<Prim> r = f(lift(std::forward<A>(args))...);
      for (Prim& p : r) p = from_cpu(std::move(p), d);
      return r;
    } else {
      return f(lift(std::forward<A>(args))...);
    }
  }
};

// ---- forwarded families ----------------------------------------------------------------


TensorScalar c_scalar(const Scalar& s) {
  TensorScalar c{};
  switch (s.kind()) {
    case Scalar::Kind::Float: c.kind = TENSOR_SCALAR_FLOAT; break;
    case Scalar::Kind::Int: c.kind = TENSOR_SCALAR_INT; break;
    case Scalar::Kind::UInt: c.kind = TENSOR_SCALAR_UINT; break;
    case Scalar::Kind::Bool: c.kind = TENSOR_SCALAR_BOOL; break;
  }
  c.f = s.to_double();
  c.i = s.kind() == Scalar::Kind::Bool ? (s.to_bool() ? 1 : 0) : s.kind() == Scalar::Kind::UInt ? 0 : s.to_int64();
  c.u = s.kind() == Scalar::Kind::UInt ? s.to_uint64() : 0;
  return c;
}

bool computes(const PluginLib& lib, OpCode op, DType dtype) {
  const auto i = static_cast<std::size_t>(op);
  return !lib.info.op_dtypes || (lib.info.op_dtypes[i] & TENSOR_DTYPE_BIT(static_cast<unsigned>(dtype))) != 0;
}

template <OpCode op>
Prim run_call(const PluginLib& lib, DeviceId d, std::initializer_list<const Prim*> in, TensorOpCall& call) {
  std::array<TensorPrim, 2> h{};
  std::array<std::uint8_t, 2> unique{};
  std::size_t n = 0;
  for (const Prim* p : in) {
    h[n] = handle_of(*p);
    unique[n] = (*p)->can_mut() ? 1 : 0;
    ++n;
  }
  call.struct_size = sizeof(TensorOpCall);
  call.op = static_cast<std::uint32_t>(op);
  call.device = d.index_id;
  call.input_count = static_cast<std::uint32_t>(n);
  call.inputs = h.data();
  call.input_unique = unique.data();
  const TensorStatus s = lib.info.ops[static_cast<std::size_t>(op)](&call);
  check_status(s, lib, op_name(op));
  return wrap(lib, d, call.result, op_name(op), &call.out);
}

template <OpCode op, Family F = op_family(op)>
struct Native;

template <OpCode op>
struct Native<op, Family::Unary> {
  static Prim fn(Prim a) {
    const PluginLib& lib = lib_of(a->device());
    if (!computes(lib, op, a->dtype())) return Host<op, FamilyFn<Family::Unary>>::fn(std::move(a));
    TensorOpCall c{};
    c.out = meta_of(a->dtype(), op_info(op).swaps_last_two ? core::transposed_shape(a->shape()) : a->shape());
    return run_call<op>(lib, a->device(), {&a}, c);
  }
};
template <OpCode op>
struct Native<op, Family::Reduce> {
  static Prim fn(Prim a) {
    const PluginLib& lib = lib_of(a->device());
    if (!computes(lib, op, a->dtype())) return Host<op, FamilyFn<Family::Reduce>>::fn(std::move(a));
    TensorOpCall c{};
    c.out = meta_of(a->dtype(), core::reduce_shape());
    return run_call<op>(lib, a->device(), {&a}, c);
  }
};
template <OpCode op>
struct Native<op, Family::Binary> {
  static Prim fn(Prim a, Prim b) {
    const PluginLib& lib = lib_of(a->device());
    if (!computes(lib, op, a->dtype()) || b->dtype() != a->dtype())
      return Host<op, FamilyFn<Family::Binary>>::fn(std::move(a), std::move(b));
    TensorOpCall c{};
    c.out = meta_of(a->dtype(), core::broadcast_shape(a->shape(), b->shape()));
    return run_call<op>(lib, a->device(), {&a, &b}, c);
  }
};
template <OpCode op>
struct Native<op, Family::Scalar> {
  static Prim fn(Prim a, Scalar s) {
    const PluginLib& lib = lib_of(a->device());
    if (!computes(lib, op, a->dtype())) return Host<op, FamilyFn<Family::Scalar>>::fn(std::move(a), s);
    TensorOpCall c{};
    c.out = meta_of(a->dtype(), a->shape());
    c.scalar = c_scalar(s);
    return run_call<op>(lib, a->device(), {&a}, c);
  }
};
template <OpCode op>
struct Native<op, Family::Dim> {
  static Prim fn(Prim a, std::size_t dim) {
    const PluginLib& lib = lib_of(a->device());
    if (!computes(lib, op, a->dtype())) return Host<op, FamilyFn<Family::Dim>>::fn(std::move(a), dim);
    TensorOpCall c{};
    c.out = meta_of(a->dtype(), op_info(op).keeps_shape ? a->shape() : core::reduce_dim_shape(a->shape(), dim));
    c.dim = static_cast<std::int64_t>(dim);
    return run_call<op>(lib, a->device(), {&a}, c);
  }
};
template <OpCode op>
struct Native<op, Family::Matmul> {
  static Prim fn(Prim a, Prim b) {
    const PluginLib& lib = lib_of(a->device());
    if (!computes(lib, op, a->dtype()) || b->dtype() != a->dtype())
      return Host<op, FamilyFn<Family::Matmul>>::fn(std::move(a), std::move(b));
    TensorOpCall c{};
    c.out = meta_of(a->dtype(), core::matmul_shape(op_name(op), a->shape(), b->shape()));
    return run_call<op>(lib, a->device(), {&a, &b}, c);
  }
};
// reshape and expand: the target shape is the result's (call.out), checked by the rules.
template <OpCode op>
struct Native<op, Family::Reshape> {
  static Prim fn(Prim a, const Shape& shape) {
    const PluginLib& lib = lib_of(a->device());
    if (!computes(lib, op, a->dtype())) return Host<op, FamilyFn<Family::Reshape>>::fn(std::move(a), shape);
    TensorOpCall c{};
    c.out = meta_of(a->dtype(), shape);
    return run_call<op>(lib, a->device(), {&a}, c);
  }
};
template <OpCode op>
struct Native<op, Family::Create> {
  static Prim fn(const Shape& shape, DeviceId d, DType dtype) {
    const PluginLib& lib = lib_of(d);
    if (!computes(lib, op, dtype)) return Host<op, FamilyFn<Family::Create>>::fn(shape, d, dtype);
    TensorOpCall c{};
    c.out = meta_of(dtype, shape);
    return run_call<op>(lib, d, {}, c);
  }
};
template <OpCode op>
struct Native<op, Family::Full> {
  static Prim fn(const Shape& shape, Scalar s, DeviceId d, DType dtype) {
    const PluginLib& lib = lib_of(d);
    if (!computes(lib, op, dtype)) return Host<op, FamilyFn<Family::Full>>::fn(shape, s, d, dtype);
    TensorOpCall c{};
    c.out = meta_of(dtype, shape);
    c.scalar = c_scalar(s);
    return run_call<op>(lib, d, {}, c);
  }
};

// ---- ABI 1.2: every other family, its arguments encoded in TensorOpCall::args ------------

// The members of one generic call, filled argument by argument from the family's signature
// (backend_plugin.h lists the encoding). `add` exists exactly for the argument types that can
// cross, so `Encodable` below decides at compile time which families a 1.2 plugin can take.
struct Encoder {
  std::vector<TensorPrim> in;
  std::vector<std::uint8_t> unique;
  std::vector<std::int64_t> args;
  std::array<TensorScalar, 2> scalars{};
  std::size_t scalar_count = 0;
  const Prim* first = nullptr;  // the first tensor: device and dtype of the call
  bool qfloat = false;           // a quantized operand: not a plugin tensor, the host runs the op

  void add(const Prim& p) {
    if (p && !first) first = &p;
    if (p && p->dtype() == DType::QFloat) qfloat = true;
    in.push_back(p && p->dtype() != DType::QFloat ? handle_of(p) : nullptr);
    unique.push_back(p && p->can_mut() ? 1 : 0);
  }
  void add(const std::vector<Prim>& ps) {
    for (const Prim& p : ps) add(p);
  }
  void add(const Scalar& v) { scalars.at(scalar_count++) = c_scalar(v); }
  void add(double v) { add(Scalar(v)); }
  void add(std::size_t v) { args.push_back(static_cast<std::int64_t>(v)); }
  void add(std::int64_t v) { args.push_back(v); }
  void add(bool v) { args.push_back(v ? 1 : 0); }
  void add(DType v) { args.push_back(static_cast<std::int64_t>(v)); }
  void add(IndexingUpdateOp v) { args.push_back(static_cast<std::int64_t>(v)); }
  void add(const Shape& v) {
    args.push_back(static_cast<std::int64_t>(v.rank()));
    for (std::size_t i = 0; i < v.rank(); ++i) args.push_back(static_cast<std::int64_t>(v[i]));
  }
  void add(Axes v) {
    args.push_back(static_cast<std::int64_t>(v.size()));
    for (std::size_t a : v) args.push_back(static_cast<std::int64_t>(a));
  }
  void add(DimSlices v) {
    args.push_back(static_cast<std::int64_t>(v.size()));
    for (const DimSlice& d : v) args.insert(args.end(), {d.start, d.step, static_cast<std::int64_t>(d.len)});
  }
  void add(const ConvArgs& a) {
    args.push_back(static_cast<std::int64_t>(a.rank));
    for (const auto* arr : {&a.stride, &a.padding, &a.dilation, &a.padding_out}) args.insert(args.end(), arr->begin(), arr->end());
    args.push_back(a.groups);
  }
  void add(const PoolArgs& a) {
    args.push_back(static_cast<std::int64_t>(a.rank));
    for (const auto* arr : {&a.kernel, &a.stride, &a.padding, &a.dilation, &a.output_size})
      args.insert(args.end(), arr->begin(), arr->end());
    args.push_back(a.ceil_mode ? 1 : 0);
    args.push_back(a.count_include_pad ? 1 : 0);
  }
};

template <class Fn>
struct Encodable : std::false_type {};
template <class R, class A0, class... A>
struct Encodable<R (*)(A0, A...)>
    : std::bool_constant<(std::is_same_v<R, Prim> || std::is_same_v<R, PrimPair>) &&
                         (std::is_same_v<std::decay_t<A0>, Prim> || std::is_same_v<std::decay_t<A0>, std::vector<Prim>>) &&
                         requires(Encoder e, A0 a0, A... a) {
                           e.add(a0);
                           (e.add(a), ...);
                         }> {};

// The families a 1.2 plugin's entries answer through Generic: encodable, not forwarded by
// their own rule above, and not the QFloat rows (a quantized tensor does not cross). The
// collectives are among them: the dispatch rule has validated the call and answered the
// singleton group itself; the entry reduces across the group (TensorHostApi::dist_all_reduce
// for host-visible bytes, or a transport of the plugin's own).
template <Family F>
constexpr bool generic_family() {
  return !forwarded(F) && F != Family::Quantize && F != Family::QuantizeDynamic && F != Family::Dequantize && F != Family::QMatmul &&
         Encodable<FamilyFn<F>>::value;
}
constexpr bool generic_op(OpCode op, Family) { return !op_info(op).qfloat_in; }

template <OpCode op, class Fn = FamilyFn<op_family(op)>>
struct Generic;
template <OpCode op, class R, class... A>
struct Generic<op, R (*)(A...)> {
  static R fn(A... a) {
    Encoder e;
    (e.add(a), ...);
    if (!e.first) throw ExecutionError(fmt::format("[{}] expected a tensor argument; got none", op_name(op)));
    const DeviceId d = (*e.first)->device();
    const PluginLib& lib = lib_of(d);
    if (e.qfloat || !computes(lib, op, (*e.first)->dtype())) return Host<op, R (*)(A...)>::fn(std::forward<A>(a)...);
    TensorOpCall c{};
    c.struct_size = sizeof(TensorOpCall);
    c.op = static_cast<std::uint32_t>(op);
    c.device = d.index_id;
    c.input_count = static_cast<std::uint32_t>(e.in.size());
    c.inputs = e.in.data();
    c.input_unique = e.unique.data();
    c.out.dtype = -1;
    c.scalar = e.scalars[0];
    c.scalar2 = e.scalars[1];
    c.args = e.args.data();
    c.arg_count = static_cast<std::uint32_t>(e.args.size());
    const TensorStatus s = lib.info.ops[static_cast<std::size_t>(op)](&c);
    if (s != TENSOR_STATUS_OK) {
      if (c.result) lib.info.prim.release(c.result);
      if (c.result2) lib.info.prim.release(c.result2);
      check_status(s, lib, op_name(op));
    }
    if constexpr (std::is_same_v<R, PrimPair>) {
      if (!c.result2) {
        if (c.result) lib.info.prim.release(c.result);
        throw ExecutionError(fmt::format("[{}:{}] the plugin returned OK without its second result", lib.name, op_name(op)));
      }
      Prim second = wrap(lib, d, c.result2, op_name(op));
      return {wrap(lib, d, c.result, op_name(op)), std::move(second)};
    } else {
      if (c.result2) lib.info.prim.release(c.result2);
      return wrap(lib, d, c.result, op_name(op));
    }
  }
};

// ---- transfer entries (the device rows from_host / to_host) --------------------------------

Prim from_data_entry(TensorData data, DeviceId d) {
  const PluginLib& lib = lib_of(d);
  const TensorMeta m = meta_of(data.dtype(), data.shape());
  TensorPrim h = nullptr;
  check_status(lib.info.device.from_host(d.index_id, &m, data.bytes().data(), &h), lib, "from_data");
  return wrap(lib, d, h, "from_data", &m);
}
std::future<TensorData> into_data_entry(Prim p) {
  std::promise<TensorData> done;
  done.set_value(read_plugin(p));
  return done.get_future();
}
Prim to_device_entry(Prim p, DeviceId target) {
  if (target == p->device()) return p;
  return defaults::upload(read_plugin(p), target);
}

// ---- device rows -------------------------------------------------------------------------

bool graph_supported_entry(DeviceId) { return true; }
void graph_replay_entry(DeviceId, GraphProgram& g) { g.run(g); }

// tensor::capture's writes (DeviceOp::assign): dst keeps its handle, the plugin copies into it.
void assign_entry(DeviceId d, const Prim& dst, const Prim& src) {
  const PluginLib& lib = lib_of(d);
  if (dst->dtype() != src->dtype() || !(dst->shape() == src->shape()))
    throw ShapeError(fmt::format("[{}:assign] expected the same dtype and shape; got {} {} and {} {}", lib.name,
                                 dtype_name(dst->dtype()), dst->shape().to_string(), dtype_name(src->dtype()),
                                 src->shape().to_string()));
  Prim s = src;
  if (s->device() != d) s = defaults::upload(defaults::read_prim(std::move(s)), d);
  check_status(lib.info.assign(handle_of(dst), handle_of(s)), lib, "assign");
}

std::string name_entry(DeviceId d) { return lib_of(d).name; }
void seed_entry(DeviceId d, std::uint64_t s) {
  const PluginLib& lib = lib_of(d);
  // Random ops run the host kernel, so the host generator is the one that counts.
  Registry::instance().get(kCpuDeviceType).get<DeviceOp::seed>()(kCpuDev, s);
  if (lib.info.device.seed) check_status(lib.info.device.seed(d.index_id, s), lib, "seed");
}
void sync_entry(DeviceId d) {
  const PluginLib& lib = lib_of(d);
  if (lib.info.device.sync) check_status(lib.info.device.sync(d.index_id), lib, "sync");
}
void flush_entry(DeviceId d) {
  const PluginLib& lib = lib_of(d);
  if (lib.info.device.flush) check_status(lib.info.device.flush(d.index_id), lib, "flush");
}
void memory_cleanup_entry(DeviceId d) {
  const PluginLib& lib = lib_of(d);
  if (lib.info.device.memory_cleanup) check_status(lib.info.device.memory_cleanup(d.index_id), lib, "memory_cleanup");
}
MemoryStats memory_stats_entry(DeviceId d) {
  const PluginLib& lib = lib_of(d);
  TensorMemoryStats m{};
  if (lib.info.device.memory_stats) check_status(lib.info.device.memory_stats(d.index_id, &m), lib, "memory_stats");
  return {m.bytes_in_use, m.bytes_reserved, m.peak_bytes_in_use};
}
DTypeUsageSet usage_of(const PluginLib& lib, std::uint32_t device, DType dtype) {
  if (dtype == DType::QFloat || !is_valid(dtype)) return {};
  const std::uint32_t f = lib.info.device.dtype_usage(device, static_cast<std::int32_t>(dtype));
  DTypeUsageSet s;
  if (f & TENSOR_USAGE_STORAGE) s = s | DTypeUsage::Storage;
  if (f & TENSOR_USAGE_ARITHMETIC) s = s | DTypeUsage::Arithmetic;
  if (f & TENSOR_USAGE_ACCELERATED) s = s | DTypeUsage::Accelerated;
  return s;
}
DTypeUsageSet dtype_usage_entry(DeviceId d, DType dtype) { return usage_of(lib_of(d), d.index_id, dtype); }
}  // namespace

TensorDefaultSettings c_settings(const PluginLib& lib, std::uint32_t device) {
  TensorDefaultSettings s{TENSOR_DTYPE_F32, TENSOR_DTYPE_I32, TENSOR_DTYPE_BOOL};
  if (lib.info.device.default_settings) check_status(lib.info.device.default_settings(device, &s), lib, "default_settings");
  return s;
}

namespace {
DeviceSettings default_settings_entry(DeviceId d) {
  const TensorDefaultSettings s = c_settings(lib_of(d), d.index_id);
  return {to_float_dtype(static_cast<DType>(s.float_dtype)), to_int_dtype(static_cast<DType>(s.int_dtype)),
          to_bool_dtype(static_cast<DType>(s.bool_dtype))};
}
template <std::uint16_t T>
std::size_t device_count_entry() {
  return g_libs[T] ? g_libs[T]->info.device_count : 0;
}
template <std::size_t... T>
constexpr std::array<std::size_t (*)(), sizeof...(T)> count_entries(std::index_sequence<T...>) {
  return {&device_count_entry<static_cast<std::uint16_t>(T)>...};
}
constexpr auto kCountEntries = count_entries(std::make_index_sequence<kAutodiffTypeOffset>{});

// ---- building the Backend ------------------------------------------------------------------

template <std::size_t I>
void install_op(Backend& b, PluginLib& lib) {
  constexpr auto op = static_cast<OpCode>(I);
  constexpr Family F = op_family(op);
  constexpr bool required = op_info(op).policy == Policy::Req;
  const bool has = I < lib.info.op_count && lib.info.ops && lib.info.ops[I];
  if constexpr (op == OpCode::from_data) {
    b.set<OpCode::from_data>(&from_data_entry);
    lib.source[I] = PluginOpSource::Native;
  } else if constexpr (op == OpCode::into_data) {
    b.set<OpCode::into_data>(&into_data_entry);
    lib.source[I] = PluginOpSource::Native;
  } else if constexpr (op == OpCode::to_device) {
    b.set<OpCode::to_device>(&to_device_entry);
    lib.source[I] = PluginOpSource::Native;
  } else {
    if constexpr (forwarded(F)) {
      if (has) {
        b.set<op>(&Native<op>::fn);
        lib.source[I] = PluginOpSource::Native;
        return;
      }
    } else if constexpr (generic_family<F>() && generic_op(op, F)) {
      if (has && lib.info.abi_minor >= 2) {
        b.set<op>(&Generic<op>::fn);
        lib.source[I] = PluginOpSource::Native;
        return;
      }
    }
    if (required) {
      b.set<op>(&Host<op, FamilyFn<F>>::fn);
      lib.source[I] = PluginOpSource::Host;
    } else {
      lib.source[I] = PluginOpSource::Default;  // install_defaults composes it
    }
  }
}
template <std::size_t... I>
void install_ops(Backend& b, PluginLib& lib, std::index_sequence<I...>) {
  // One call per op as an array's initializers, not a fold: clang limits a fold's nesting to
  // 256 operands and the table has more rows.
  [[maybe_unused]] const int each[] = {(install_op<I>(b, lib), 0)...};
}

template <std::size_t... I>
constexpr std::array<bool, kOpCount> generic_ops(std::index_sequence<I...>) {
  return {(generic_family<op_family(static_cast<OpCode>(I))>() && generic_op(static_cast<OpCode>(I), op_family(static_cast<OpCode>(I))))...};
}
constexpr std::array<bool, kOpCount> kGenericOps = generic_ops(std::make_index_sequence<kOpCount>{});

}  // namespace

bool forwards(OpCode op, std::uint16_t abi_minor) {
  const auto i = static_cast<std::size_t>(op);
  return forwarded(kOps[i].family) || (abi_minor >= 2 && kGenericOps[i]);
}

std::unique_ptr<Backend> make_backend(PluginLib& lib) {
  auto b = std::make_unique<Backend>(lib.name, lib.type_id);
  install_ops(*b, lib, std::make_index_sequence<kOpCount>{});
  b->set<DeviceOp::name>(&name_entry);
  b->set<DeviceOp::seed>(&seed_entry);
  b->set<DeviceOp::sync>(&sync_entry);
  b->set<DeviceOp::flush>(&flush_entry);
  b->set<DeviceOp::dtype_usage>(&dtype_usage_entry);
  if (lib.info.assign) {  // graphs replay natively: the host's list calls the plugin's entries
    b->set<DeviceOp::assign>(&assign_entry);
    b->set<DeviceOp::graph_supported>(&graph_supported_entry);
    b->set<DeviceOp::graph_replay>(&graph_replay_entry);
  }
  b->set<DeviceOp::device_count>(kCountEntries[lib.type_id]);
  b->set<DeviceOp::default_settings>(&default_settings_entry);
  b->set<DeviceOp::memory_stats>(&memory_stats_entry);
  b->set<DeviceOp::memory_cleanup>(&memory_cleanup_entry);
  return b;
}

}  // namespace tensor::dispatch::plugin
