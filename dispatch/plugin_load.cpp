// Backend plugins: dlopen, the checks a candidate must pass, the records tensorctl info prints
// (docs/plugins.md). dispatch/plugin.cpp builds the Backend of a plugin that passes.
#include <dirent.h>
#include <dlfcn.h>
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <span>

#include "dispatch/plugin_lib.hpp"
#include "dispatch/plugin_paths.hpp"
#include "lib/src/distributed/communicator.hpp"
#include "tensor/error.hpp"

namespace tensor::dispatch::plugin {
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

}  // namespace

void clear_error() { g_error = {}; }
std::string take_error_message() {
  std::string m = std::move(g_error.message);
  g_error = {};
  return m;
}

void host_log(std::int32_t level, const char* message) {
  const char* on = std::getenv("TENSOR_PLUGIN_LOG");
  if (on && *on && *on != '0') std::fprintf(stderr, "tensor plugin %s: %s\n", level > 0 ? "warning" : "info", message);
}

namespace {

namespace di = dist::internal;

// A tensor::Error (or bad_alloc) from a host call a plugin made becomes its status + message.
TensorStatus status_of_current_exception() {
  try {
    throw;
  } catch (const ShapeError& e) {
    return host_set_error(TENSOR_STATUS_SHAPE, e.what());
  } catch (const DTypeError& e) {
    return host_set_error(TENSOR_STATUS_DTYPE, e.what());
  } catch (const IndexError& e) {
    return host_set_error(TENSOR_STATUS_INDEX, e.what());
  } catch (const DeviceError& e) {
    return host_set_error(TENSOR_STATUS_DEVICE, e.what());
  } catch (const NotImplemented& e) {
    return host_set_error(TENSOR_STATUS_UNSUPPORTED, e.what());
  } catch (const std::bad_alloc&) {
    return host_set_error(TENSOR_STATUS_OUT_OF_MEMORY, "out of memory");
  } catch (const std::exception& e) {
    return host_set_error(TENSOR_STATUS_EXECUTION, e.what());
  }
}

std::int32_t host_dist_rank() {
  try {
    return di::current().rank();
  } catch (...) {
    return 0;
  }
}
std::int32_t host_dist_world() {
  try {
    return di::current().size();
  } catch (...) {
    return 1;
  }
}
TensorStatus host_dist_all_reduce(const TensorMeta* meta, const void* src, void* dst, std::int32_t op) {
  try {
    if (!meta || meta->rank > kMaxRank || meta->dtype < 0 || meta->dtype >= TENSOR_DTYPE_COUNT)
      throw ShapeError("[all_reduce] expected a TensorMeta of rank <= 8 and a dtype code; got a bad meta");
    const auto dtype = static_cast<DType>(meta->dtype);
    if (!(is_float(dtype) || is_int(dtype)) || dtype == DType::F16 || dtype == DType::BF16)
      throw DTypeError(fmt::format("[all_reduce] expected f64, f32 or an integer dtype for host bytes; got {}", dtype_name(dtype)));
    if (op < 0 || op > 3) throw ShapeError(fmt::format("[all_reduce] expected a ReduceOp 0 to 3; got {}", op));
    std::array<std::size_t, kMaxRank> dims{};
    for (std::uint32_t i = 0; i < meta->rank; ++i) {
      if (meta->shape[i] < 0) throw ShapeError(fmt::format("[all_reduce] expected dims >= 0; got {}", meta->shape[i]));
      dims[i] = static_cast<std::size_t>(meta->shape[i]);
    }
    const Shape shape(std::span<const std::size_t>(dims.data(), meta->rank));
    const std::size_t n = shape.num_elements();
    if (n && (!src || !dst)) throw ShapeError("[all_reduce] expected src and dst buffers; got NULL");
    di::Communicator& comm = di::current();
    const di::Call call = di::begin(comm, 0, op, dtype, shape);
    comm.all_reduce_buffer(static_cast<const std::byte*>(src), static_cast<std::byte*>(dst), n, dtype,
                           static_cast<dist::ReduceOp>(op), call);
    return TENSOR_STATUS_OK;
  } catch (...) {
    return status_of_current_exception();
  }
}

}  // namespace

const TensorHostApi kHostApi{sizeof(TensorHostApi), TENSOR_PLUGIN_ABI_MAJOR, TENSOR_PLUGIN_ABI_MINOR, &host_set_error,
                             &host_log, &host_dist_rank, &host_dist_world, &host_dist_all_reduce};

// ---- loaded plugins --------------------------------------------------------------------

std::array<PluginLib*, kAutodiffTypeOffset> g_libs{};

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

}  // namespace tensor::dispatch::plugin

namespace tensor::dispatch {
namespace {

using namespace plugin;  // NOLINT(google-build-using-namespace): this file's own helpers

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
std::mutex& records_mutex() {
  static std::mutex m;
  return m;
}
std::vector<PluginRecord>& records() {
  static std::vector<PluginRecord> r;
  return r;
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
        native = in.ops[i] && forwards(static_cast<OpCode>(i), in.abi_minor) && (!in.op_dtypes || (in.op_dtypes[i] & TENSOR_DTYPE_BIT(t)));
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
    clear_error();
    const TensorStatus s = init(&kHostApi, &info);
    if (s != TENSOR_STATUS_OK)
      throw Refused{fmt::format("tensor_plugin_init failed with {}: {}", status_name(s), take_error_message())};
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
