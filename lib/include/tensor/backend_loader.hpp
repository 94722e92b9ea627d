// Loading a backend plugin at run time (tensor/backend_plugin.h is the plugin's side; docs/plugins.md).
#pragma once

#include <string>
#include <vector>

#include "tensor/device.hpp"
#include "tensor/export.hpp"

namespace tensor {

/// A loaded backend plugin: what it calls itself and the devices it added (`<name>:N`).
struct PluginInfo {
  /// The backend's name: its devices are `<name>:0`, `<name>:1`, ...
  std::string name;
  /// The plugin's own version string.
  std::string version;
  /// The plugin's vendor string.
  std::string vendor;
  /// The file it was loaded from.
  std::string path;
  /// Its devices, in index order.
  std::vector<Device> devices;
};

/// Loads the backend plugin at `path` (a `libtensor-backend-<name>.so`) and registers its devices,
/// as TENSOR_BACKEND_PATH does at start-up. DeviceError naming the reason when the file cannot be
/// opened or fails a check (ABI version, struct size, op table, a NULL required entry, ...).
TENSOR_API PluginInfo load_backend(const std::string& path);

}  // namespace tensor
