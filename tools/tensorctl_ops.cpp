// tensorctl ops [--device D] [--markdown]: op coverage per device (native, default
// composition, missing, unsupported) from the op table. `--markdown` without
// --device prints one section per backend's first device: dispatch/table/ops.md.
#include <iostream>

#include "dispatch/dispatch.hpp"
#include "tools/ops_report.hpp"
#include "tools/tensorctl.hpp"

namespace tensorctl {

int run_ops(Args args) {
  bool markdown = false;
  std::vector<tensor::DeviceId> devices;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--markdown") {
      markdown = true;
    } else if (args[i] == "--device" && i + 1 < args.size()) {
      devices.push_back(tensor::dispatch::parse_device(args[++i]));
    } else {
      std::cerr << "usage: tensorctl ops [--device D] [--markdown]\n";
      return kExitUsage;
    }
  }
  if (devices.empty()) {
    for (tensor::DeviceId d : tensor::dispatch::available_devices())
      if (d.index_id == 0) devices.push_back(d);
  }
  if (markdown) {
    std::cout << ops_markdown_document(devices);
    return kExitOk;
  }
  for (tensor::DeviceId d : devices) std::cout << ops_text(d) << '\n';
  return kExitOk;
}

}  // namespace tensorctl
