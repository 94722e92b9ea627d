// Defaults: transactions and device-level entries (see dispatch/defaults/install.cpp for the rules every default keeps).
#include "dispatch/defaults/compose.hpp"

namespace tensor::dispatch::defaults {
namespace {

// ---- transactions and devices -----------------------------------------------------------

std::future<std::vector<TensorData>> d_tr_execute(std::vector<Prim> prims) {
  std::vector<std::future<TensorData>> pending;
  for (Prim& p : prims) {
    const DeviceId d = p->device();
    pending.push_back(call<Family::IntoData>(OpCode::into_data, d, std::move(p)));
  }
  return std::async(std::launch::deferred, [pending = std::move(pending)]() mutable {
    std::vector<TensorData> out;
    for (auto& f : pending) out.push_back(f.get());
    return out;
  });
}

void d_noop(DeviceId) {}
void d_graph_noop(DeviceId, GraphProgram&) {}
void d_graph_unsupported(DeviceId d, GraphProgram&) {
  throw ExecutionError(fmt::format("[graph_replay] graph capture is not supported by this backend; expected a device with "
                                   "native replay; got {}", device_string(d)));
}
void d_assign_unsupported(DeviceId d, const Prim&, const Prim&) {
  throw NotImplemented(fmt::format("[copy_from] not implemented on {}; expected a backend with an assign entry; got none",
                                   device_string(d)));
}
bool d_supports(DeviceId d, DType t) {
  return backend_of(d).get<DeviceOp::dtype_usage>()(d, t).contains_all(DTypeUsageSet::general());
}
bool d_false(DeviceId) { return false; }
MemoryStats d_memory(DeviceId) { return {}; }
// burn's defaults for GPU-style devices: F32, I32, bools stored as U8.
DeviceSettings d_default_settings(DeviceId) { return {FloatDType::F32, IntDType::I32, BoolDType::U8}; }

}  // namespace

TENSOR_DEFAULT(OpCode, tr_execute, d_tr_execute)
TENSOR_DEFAULT(DeviceOp, sync, d_noop)
TENSOR_DEFAULT(DeviceOp, supports_dtype, d_supports)
TENSOR_DEFAULT(DeviceOp, default_settings, d_default_settings)
TENSOR_DEFAULT(DeviceOp, ad_enabled, d_false)
TENSOR_DEFAULT(DeviceOp, memory_stats, d_memory)
TENSOR_DEFAULT(DeviceOp, memory_cleanup, d_noop)
TENSOR_DEFAULT(DeviceOp, graph_prepare, d_noop)
TENSOR_DEFAULT(DeviceOp, graph_start_capture, d_noop)
TENSOR_DEFAULT(DeviceOp, graph_stop_capture, d_graph_noop)
TENSOR_DEFAULT(DeviceOp, graph_replay, d_graph_unsupported)
TENSOR_DEFAULT(DeviceOp, graph_release, d_graph_noop)
TENSOR_DEFAULT(DeviceOp, graph_supported, d_false)
TENSOR_DEFAULT(DeviceOp, assign, d_assign_unsupported)

}  // namespace tensor::dispatch::defaults
