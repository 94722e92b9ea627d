// tensor::load_backend: the public face of dispatch/plugin.cpp's loader.
#include "tensor/backend_loader.hpp"

#include "dispatch/plugin.hpp"

namespace tensor {

PluginInfo load_backend(const std::string& path) {
  const dispatch::PluginRecord r = dispatch::load_plugin_file(path);
  PluginInfo info{r.name, r.version, r.vendor, r.path, {}};
  for (std::size_t i = 0; i < r.devices.size(); ++i)
    info.devices.emplace_back(DeviceId{r.type_id, static_cast<std::uint16_t>(i)});
  return info;
}

}  // namespace tensor
