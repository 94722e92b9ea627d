// Backend plugins (tensor/backend_plugin.h): the loader with its checks and the adapter that
// registers a plugin's devices as a Backend like the built-in ones (docs/plugins.md).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "dispatch/backend.hpp"

namespace tensor::dispatch {

// What a candidate file gave: loaded (type_id set) or refused with the reason.
struct PluginRecord {
  std::string path;
  bool loaded = false;
  std::string reason;  // why it was refused (empty when loaded)
  std::string name, version, vendor;
  std::uint16_t abi_major = 0, abi_minor = 0;
  std::int32_t score = -1;  // -1: no score entry
  std::uint32_t op_count = 0;
  std::uint16_t type_id = 0;
  std::size_t native = 0, defaulted = 0, host = 0;  // op coverage: plugin entries, compositions, host kernels
  std::vector<std::string> devices;                 // "ref:0 \"ref scalar cpu\""
  std::vector<std::pair<std::string, std::string>> features;
};

// How the plugin backend of `type_id` answers `op`: its own entry, a composition of its other
// entries, or the host CPU kernel through to_host / from_host. Nullopt: not a plugin type.
enum class PluginOpSource : std::uint8_t { Native, Default, Host };
std::optional<PluginOpSource> plugin_op_source(std::uint16_t type_id, OpCode op);
// For a Native op: the kinds (kKindF / kKindI / kKindB) with a dtype its entry computes; the
// others run on the host (op_dtypes).
std::uint8_t plugin_native_kinds(std::uint16_t type_id, OpCode op);

// Every candidate seen so far, in load order.
std::vector<PluginRecord> plugin_records();

// TENSOR_BACKEND_PATH (colon-separated files or directories of libtensor-backend-<name>.so),
// then <libdir>/tensor/backends/. Called once by Registry::instance() after the built-in
// backends; a refused candidate is recorded (and noted absent), never thrown.
void load_env_plugins(Registry& registry);

// Loads one file (tensor::load_backend): the record, or DeviceError naming the reason.
PluginRecord load_plugin_file(const std::string& path);

}  // namespace tensor::dispatch
