// Backend plugins: dlopen, the checks a candidate must pass, and the adapter that turns the
// C tables of tensor/backend_plugin.h into a Backend (docs/plugins.md).
//
// The adapter forwards the families a small plugin needs (Unary, Binary, Scalar, Reduce, Dim,
// Create, Full; from_data / into_data through the device rows). Every other required entry,
// and every entry the plugin leaves NULL or that does not compute the input's dtype, runs the
// host CPU kernel through to_host / from_host; a NULL defaulted entry takes dispatch's
// composition like any backend's.
#include "dispatch/plugin.hpp"

#include <dirent.h>
#include <dlfcn.h>
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <future>
#include <mutex>
#include <type_traits>

#include "dispatch/defaults/compose.hpp"
#include "dispatch/plugin_paths.hpp"
#include "lib/core/block_stack.hpp"
#include "lib/core/shape_rules.hpp"
#include "tensor/backend_plugin.h"
#include "tensor/error.hpp"

namespace tensor::dispatch {
namespace {

// ---- the host side of the ABI ----------------------------------------------------------

static_assert(static_cast<int>(DType::F64) == TENSOR_DTYPE_F64 && static_cast<int>(DType::F32) == TENSOR_DTYPE_F32 &&
              static_cast<int>(DType::BF16) == TENSOR_DTYPE_BF16 && static_cast<int>(DType::I64) == TENSOR_DTYPE_I64 &&
              static_cast<int>(DType::U8) == TENSOR_DTYPE_U8 && static_cast<int>(DType::Bool) == TENSOR_DTYPE_BOOL &&
              static_cast<int>(DType::BoolU32) == TENSOR_DTYPE_BOOL_U32,
              "backend_plugin.h's dtype codes are tensor::DType's values");
static_assert(TENSOR_PLUGIN_MAX_RANK == kMaxRank);
static_assert(TENSOR_PLUGIN_OP_COUNT == kOpCount, "backend_plugin_ops.h is generated from the same op table");
static_assert(TENSOR_USAGE_STORAGE == static_cast<int>(DTypeUsage::Storage) &&
              TENSOR_USAGE_ARITHMETIC == static_cast<int>(DTypeUsage::Arithmetic) &&
              TENSOR_USAGE_ACCELERATED == static_cast<int>(DTypeUsage::Accelerated));

// The host's op list in code order, as the plugin header spells it.
constexpr std::array<const char*, TENSOR_PLUGIN_OP_COUNT> kHostOpNames = {{
#define TENSOR_X(code, name, entry) entry,
    TENSOR_PLUGIN_OP_LIST(TENSOR_X)
#undef TENSOR_X
}};

std::uint64_t op_table_hash(std::uint32_t count, const char* const* names) {
  std::uint64_t h = 0xCBF29CE484222325ull;
  auto mix = [&h](unsigned char c) { h = (h ^ c) * 0x100000001B3ull; };
  for (std::uint32_t i = 0; i < count; ++i) {
    for (const char* p = names[i]; *p; ++p) mix(static_cast<unsigned char>(*p));
    mix('\n');
  }
  return h;
}

struct ErrorSlot {
  TensorStatus code = TENSOR_STATUS_OK;
  std::string message;
};
thread_local ErrorSlot g_error;

TensorStatus host_set_error(TensorStatus code, const char* message) {
  g_error.code = code;
  g_error.message = message ? message : "";
  return code;
}
void host_log(std::int32_t level, const char* message) {
  const char* on = std::getenv("TENSOR_PLUGIN_LOG");
  if (on && *on && *on != '0') std::fprintf(stderr, "tensor plugin %s: %s\n", level > 0 ? "warning" : "info", message);
}
const TensorHostApi kHostApi{sizeof(TensorHostApi), TENSOR_PLUGIN_ABI_MAJOR, TENSOR_PLUGIN_ABI_MINOR, &host_set_error,
                             &host_log};

// ---- loaded plugins --------------------------------------------------------------------

// Plugins take the backend type ids the built-in backends leave free (autodiff wrappers sit at
// type + kAutodiffTypeOffset, so a plugin type must stay below it).
constexpr std::uint16_t kFirstPluginType = 2;

struct PluginLib {
  std::string name;
  TensorPluginInfo info{};  // the host's view: members past the plugin's struct_size are zero
  std::uint16_t type_id = 0;
  std::array<PluginOpSource, kOpCount> source{};
};

// The kinds with at least one dtype in an op_dtypes mask.
std::uint8_t kinds_of_mask(std::uint32_t mask) {
  std::uint8_t k = 0;
  for (int t = 0; t < TENSOR_DTYPE_COUNT; ++t) {
    if (!(mask & TENSOR_DTYPE_BIT(t))) continue;
    const auto d = static_cast<DType>(t);
    k |= is_float(d) ? kKindF : is_int(d) ? kKindI : kKindB;
  }
  return k;
}
std::array<PluginLib*, kAutodiffTypeOffset> g_libs{};  // by type id; never freed (no dlclose)

std::mutex& records_mutex() {
  static std::mutex m;
  return m;
}
std::vector<PluginRecord>& records() {
  static std::vector<PluginRecord> r;
  return r;
}

const PluginLib& lib_of(DeviceId d) { return *g_libs[d.type_id]; }

std::string status_name(TensorStatus s) {
  switch (s) {
    case TENSOR_STATUS_SHAPE: return "SHAPE";
    case TENSOR_STATUS_DTYPE: return "DTYPE";
    case TENSOR_STATUS_DEVICE: return "DEVICE";
    case TENSOR_STATUS_EXECUTION: return "EXECUTION";
    case TENSOR_STATUS_INDEX: return "INDEX";
    case TENSOR_STATUS_UNSUPPORTED: return "UNSUPPORTED";
    case TENSOR_STATUS_OUT_OF_MEMORY: return "OUT_OF_MEMORY";
    default: return fmt::format("status {}", s);
  }
}

// A failing status becomes the matching tensor::Error, "[<plugin>:<what>] <message>".
void check_status(TensorStatus s, const PluginLib& lib, std::string_view what) {
  if (s == TENSOR_STATUS_OK) return;
  std::string msg = g_error.code == s && !g_error.message.empty() ? std::move(g_error.message)
                                                                  : fmt::format("failed with {} and no message", status_name(s));
  g_error = {};
  const std::string text = fmt::format("[{}:{}] {}", lib.name, what, msg);
  switch (s) {
    case TENSOR_STATUS_SHAPE: throw ShapeError(text);
    case TENSOR_STATUS_DTYPE: throw DTypeError(text);
    case TENSOR_STATUS_DEVICE: throw DeviceError(DeviceError::Kind::Unavailable, text);
    case TENSOR_STATUS_INDEX: throw IndexError(text);
    case TENSOR_STATUS_UNSUPPORTED: throw NotImplemented(text);
    case TENSOR_STATUS_OUT_OF_MEMORY: throw ExecutionError(text + " (out of memory)");
    default: throw ExecutionError(text);
  }
}

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

constexpr DeviceId kCpuDev{kCpuDeviceType, 0};

TensorData read_plugin(const Prim& p) {
  const PluginLib& lib = lib_of(p->device());
  TensorData data = TensorData::zeros(p->shape(), p->dtype());
  check_status(lib.info.device.to_host(handle_of(p), data.bytes().data(), data.bytes().size()), lib, "to_host");
  return data;
}
Prim to_cpu(Prim p) {
  if (!p || p->device().type_id == kCpuDeviceType) return p;
  TensorData data = p->device().type_id < kAutodiffTypeOffset && g_libs[p->device().type_id] ? read_plugin(p)
                                                                                           : defaults::read_prim(std::move(p));
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

constexpr bool forwarded(Family f) {
  return f == Family::Unary || f == Family::Binary || f == Family::Scalar || f == Family::Reduce || f == Family::Dim ||
         f == Family::Create || f == Family::Full || f == Family::Matmul || f == Family::Reshape;
}

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
TensorDefaultSettings c_settings(const PluginLib& lib, std::uint32_t device) {
  TensorDefaultSettings s{TENSOR_DTYPE_F32, TENSOR_DTYPE_I32, TENSOR_DTYPE_BOOL};
  if (lib.info.device.default_settings) check_status(lib.info.device.default_settings(device, &s), lib, "default_settings");
  return s;
}
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
  (install_op<I>(b, lib), ...);
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

// ---- the checks ----------------------------------------------------------------------------

struct Refused {
  std::string reason;
};

bool valid_name(const char* n) {
  if (!n || !*n || std::strlen(n) > 32) return false;
  for (const char* p = n; *p; ++p)
    if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_')) return false;
  return true;
}

// The host CPU computes `dtype` (so the host default covers an entry the plugin lacks).
bool host_computes(const Registry& reg, DType dtype) {
  const Backend* cpu = reg.find(kCpuDeviceType);
  return cpu && cpu->get<DeviceOp::dtype_usage>()(kCpuDev, dtype).contains(DTypeUsage::Arithmetic);
}

// The size of ABI 1.0's TensorPluginInfo: members from `assign` on came with minor 1.
constexpr std::size_t kInfoSize_1_0 = offsetof(TensorPluginInfo, assign);

void check_info(const Registry& reg, const TensorPluginInfo& in, std::uint32_t size, PluginRecord& rec) {
  // abi_major sits at offset 4: readable once the struct has 8 bytes.
  if (size < 8) throw Refused{fmt::format("TensorPluginInfo struct_size {} is too short to hold the ABI version", size)};
  rec.abi_major = in.abi_major;
  rec.abi_minor = in.abi_minor;
  if (in.abi_major != TENSOR_PLUGIN_ABI_MAJOR)
    throw Refused{fmt::format("ABI major {}.{} != host {}.{}", in.abi_major, in.abi_minor, TENSOR_PLUGIN_ABI_MAJOR,
                              TENSOR_PLUGIN_ABI_MINOR)};
  if (size < kInfoSize_1_0)
    throw Refused{fmt::format("TensorPluginInfo struct_size {} < {} (ABI {}.0)", size, kInfoSize_1_0, TENSOR_PLUGIN_ABI_MAJOR)};
  if (in.device.struct_size < sizeof(TensorDeviceRows))
    throw Refused{fmt::format("TensorDeviceRows struct_size {} < {}", in.device.struct_size, sizeof(TensorDeviceRows))};
  if (in.prim.struct_size < sizeof(TensorPrimRows))
    throw Refused{fmt::format("TensorPrimRows struct_size {} < {}", in.prim.struct_size, sizeof(TensorPrimRows))};
  if (!valid_name(in.name))
    throw Refused{fmt::format("name '{}' is not [a-z0-9_]+ (1 to 32 characters)", in.name ? in.name : "(null)")};
  rec.name = in.name;
  rec.version = in.version ? in.version : "";
  rec.vendor = in.vendor ? in.vendor : "";
  if (rec.name == "autodiff" || reg.find_by_name(rec.name))
    throw Refused{fmt::format("name '{}' is taken by a registered backend", rec.name)};
  rec.op_count = in.op_count;
  if (in.op_count > TENSOR_PLUGIN_OP_COUNT)
    throw Refused{fmt::format("op table has {} ops; the host has {} (a plugin built for a newer libtensor)", in.op_count,
                              TENSOR_PLUGIN_OP_COUNT)};
  const std::uint64_t host_hash = op_table_hash(in.op_count, kHostOpNames.data());
  if (in.op_table_hash != host_hash) {
    if (in.op_names)
      for (std::uint32_t i = 0; i < in.op_count; ++i)
        if (!in.op_names[i] || std::strcmp(in.op_names[i], kHostOpNames[i]) != 0)
          throw Refused{fmt::format("op table differs at op {}: plugin \"{}\", host \"{}\"", i,
                                    in.op_names[i] ? in.op_names[i] : "(null)", kHostOpNames[i])};
    throw Refused{fmt::format("op table hash {:#018x} != host's {:#018x} over the first {} ops", in.op_table_hash,
                              host_hash, in.op_count)};
  }
  const std::pair<bool, const char*> required[] = {
      {in.device.device_info != nullptr, "device.device_info"},
      {in.device.dtype_usage != nullptr, "device.dtype_usage"},
      {in.device.from_host != nullptr, "device.from_host"},
      {in.device.to_host != nullptr, "device.to_host"},
      {in.prim.retain != nullptr, "prim.retain"},
      {in.prim.release != nullptr, "prim.release"},
      {in.prim.metadata != nullptr, "prim.metadata"},
  };
  for (const auto& [present, name] : required)
    if (!present) throw Refused{fmt::format("required entry {} is NULL", name)};
  if (in.device_count == 0 || in.device_count > 0xffff)
    throw Refused{fmt::format("device_count {}; expected 1 to 65535", in.device_count)};
  for (std::uint32_t dev = 0; dev < in.device_count; ++dev) {
    for (int t = 0; t < TENSOR_DTYPE_COUNT; ++t) {
      const auto dtype = static_cast<DType>(t);
      const std::uint32_t f = in.device.dtype_usage(dev, t);
      bool native = false;
      for (std::uint32_t i = 0; i < in.op_count && in.ops && !native; ++i)
        native = in.ops[i] && forwarded(kOps[i].family) && (!in.op_dtypes || (in.op_dtypes[i] & TENSOR_DTYPE_BIT(t)));
      if ((f & (TENSOR_USAGE_ARITHMETIC | TENSOR_USAGE_ACCELERATED)) && !(f & TENSOR_USAGE_STORAGE))
        throw Refused{fmt::format("device {} claims {} Arithmetic without Storage", dev, dtype_name(dtype))};
      if ((f & TENSOR_USAGE_ACCELERATED) && !native)
        throw Refused{fmt::format("device {} claims {} Accelerated, but no native entry computes it", dev, dtype_name(dtype))};
      if ((f & TENSOR_USAGE_ARITHMETIC) && !native && !host_computes(reg, dtype))
        throw Refused{fmt::format("device {} claims {} Arithmetic, but no entry computes it (no native entry takes it and "
                                  "the host cannot default it)",
                                  dev, dtype_name(dtype))};
    }
    PluginLib probe;
    probe.name = rec.name;
    probe.info = in;
    TensorDefaultSettings s{};
    try {
      s = c_settings(probe, dev);
    } catch (const Error& e) {
      throw Refused{e.what()};
    }
    auto ok = [&](std::int32_t code, bool (*kind)(DType)) {
      if (code < 0 || code >= TENSOR_DTYPE_COUNT || !kind(static_cast<DType>(code))) return false;
      return (in.device.dtype_usage(dev, code) & TENSOR_USAGE_STORAGE) != 0;
    };
    const bool float_ok = ok(s.float_dtype, [](DType t) { return is_float(t); });
    const bool int_ok = ok(s.int_dtype, [](DType t) { return is_int(t); });
    const bool bool_ok = ok(s.bool_dtype, [](DType t) { return is_bool(t); });
    if (!float_ok || !int_ok || !bool_ok)
      throw Refused{fmt::format("device {} default settings (float {}, int {}, bool {}) are not dtypes of their kind the "
                                "device stores",
                                dev, s.float_dtype, s.int_dtype, s.bool_dtype)};
    TensorDeviceInfo di{};
    di.struct_size = sizeof(TensorDeviceInfo);
    try {
      check_status(in.device.device_info(dev, &di), probe, "device_info");
    } catch (const Error& e) {
      throw Refused{e.what()};
    }
    rec.devices.push_back(fmt::format("{}:{} \"{}\"{}", rec.name, dev, di.name ? di.name : "",
                                      di.memory_total ? fmt::format(" {} MiB", di.memory_total >> 20) : ""));
  }
  for (const TensorFeature* f = in.features; f && f->key; ++f) rec.features.emplace_back(f->key, f->value ? f->value : "");
}

std::mutex& load_mutex() {
  static std::mutex m;
  return m;
}

// One candidate: the record, loaded or refused. Never throws for the candidate's faults.
PluginRecord load_one(Registry& reg, const std::string& path) {
  PluginRecord rec;
  rec.path = path;
  try {
    void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      const char* e = dlerror();
      throw Refused{fmt::format("dlopen: {}", e ? e : "failed")};
    }
    // From here the handle is kept even when the candidate is refused: its static initialisers
    // have run, and nothing proves that no thread or pointer of it is live (reference §5).
    if (auto score = reinterpret_cast<TensorPluginScoreFn>(dlsym(h, TENSOR_PLUGIN_SCORE_SYMBOL))) {
      rec.score = score();
      if (rec.score <= 0) throw Refused{fmt::format("score {}: not supported on this system", rec.score)};
    }
    auto init = reinterpret_cast<TensorPluginInitFn>(dlsym(h, TENSOR_PLUGIN_INIT_SYMBOL));
    if (!init) throw Refused{"missing init symbol " TENSOR_PLUGIN_INIT_SYMBOL " (not a libtensor backend plugin?)"};
    const TensorPluginInfo* info = nullptr;
    g_error = {};
    const TensorStatus s = init(&kHostApi, &info);
    if (s != TENSOR_STATUS_OK)
      throw Refused{fmt::format("tensor_plugin_init failed with {}: {}", status_name(s), g_error.message)};
    if (!info) throw Refused{"tensor_plugin_init returned OK without a TensorPluginInfo"};
    // Read only the members the plugin has; members a newer minor appends are ignored.
    TensorPluginInfo view{};
    const std::uint32_t size = info->struct_size;
    std::memcpy(&view, info, std::min<std::size_t>(size, sizeof view));
    check_info(reg, view, size, rec);
    std::uint16_t type = 0;
    for (std::uint16_t t = kFirstPluginType; t < kAutodiffTypeOffset && !type; ++t)
      if (!reg.find(t) && !g_libs[t]) type = t;
    if (!type) throw Refused{fmt::format("no free device type (plugins use types {} to {})", kFirstPluginType,
                                         kAutodiffTypeOffset - 1)};
    auto* lib = new PluginLib{rec.name, view, type, {}};
    g_libs[type] = lib;
    try {
      reg.register_backend(make_backend(*lib));
    } catch (const Error& e) {
      g_libs[type] = nullptr;
      throw Refused{e.what()};
    }
    rec.type_id = type;
    rec.loaded = true;
    for (PluginOpSource src : lib->source) {
      if (src == PluginOpSource::Native) ++rec.native;
      else if (src == PluginOpSource::Host) ++rec.host;
      else ++rec.defaulted;
    }
    host_log(0, fmt::format("loaded {} {} from {}", rec.name, rec.version, path).c_str());
  } catch (const Refused& r) {
    rec.reason = r.reason;
    host_log(1, fmt::format("{}: {}", path, r.reason).c_str());
  }
  const std::lock_guard<std::mutex> lock(records_mutex());
  records().push_back(rec);
  return rec;
}

std::vector<std::string> candidates(const std::string& entry) {
  DIR* dir = opendir(entry.c_str());
  if (!dir) return {entry};
  std::vector<std::string> out;
  while (const dirent* e = readdir(dir)) {
    const std::string n = e->d_name;
    const std::string pre = "libtensor-backend-", suf = ".so";
    if (n.size() > pre.size() + suf.size() && n.starts_with(pre) && n.ends_with(suf)) out.push_back(entry + "/" + n);
  }
  closedir(dir);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

std::optional<PluginOpSource> plugin_op_source(std::uint16_t type_id, OpCode op) {
  if (type_id >= kAutodiffTypeOffset || !g_libs[type_id]) return std::nullopt;
  return g_libs[type_id]->source[static_cast<std::size_t>(op)];
}

std::uint8_t plugin_native_kinds(std::uint16_t type_id, OpCode op) {
  if (type_id >= kAutodiffTypeOffset || !g_libs[type_id]) return 0;
  const PluginLib& lib = *g_libs[type_id];
  const auto i = static_cast<std::size_t>(op);
  if (lib.source[i] != PluginOpSource::Native) return 0;
  if (!lib.info.op_dtypes || i >= lib.info.op_count || !lib.info.ops || !lib.info.ops[i]) return kinds::FIB;  // every dtype, or a device row (from_data, ...)
  return kinds_of_mask(lib.info.op_dtypes[i]);
}

std::vector<PluginRecord> plugin_records() {
  const std::lock_guard<std::mutex> lock(records_mutex());
  return records();
}

void load_env_plugins(Registry& registry) {
  const std::lock_guard<std::mutex> lock(load_mutex());
  std::vector<std::string> entries;
  // secure_getenv: a setuid program does not load code named by its caller's environment.
  if (const char* env = secure_getenv("TENSOR_BACKEND_PATH")) {
    std::string s = env;
    std::size_t start = 0;
    while (start <= s.size()) {
      const std::size_t colon = std::min(s.find(':', start), s.size());
      if (colon > start) entries.push_back(s.substr(start, colon - start));
      start = colon + 1;
    }
  }
  std::vector<std::string> files;
  for (const std::string& e : entries)
    for (std::string& f : candidates(e)) files.push_back(std::move(f));
  if (DIR* d = opendir(TENSOR_PLUGIN_DIR)) {
    closedir(d);
    for (std::string& f : candidates(TENSOR_PLUGIN_DIR)) files.push_back(std::move(f));
  }
  for (const std::string& f : files) {
    const PluginRecord r = load_one(registry, f);
    if (!r.loaded) registry.note_absent(r.name.empty() ? f : fmt::format("{} ({})", r.name, f), r.reason);
  }
}

PluginRecord load_plugin_file(const std::string& path) {
  Registry& reg = Registry::instance();
  const std::lock_guard<std::mutex> lock(load_mutex());
  PluginRecord r = load_one(reg, path);
  if (!r.loaded)
    throw DeviceError(DeviceError::Kind::Unavailable, fmt::format("[load_backend] {} refused: {}", path, r.reason));
  return r;
}

}  // namespace tensor::dispatch
