// Internal to the plugin loader (dispatch/plugin_load.cpp) and its adapter (dispatch/plugin.cpp):
// a loaded plugin's record and the host-side helpers both halves use. Includes the C ABI header.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "dispatch/backend.hpp"
#include "dispatch/plugin.hpp"
#include "tensor/backend_plugin.h"

namespace tensor::dispatch::plugin {

// Plugins take the backend type ids the built-in backends leave free (autodiff wrappers sit at
// type + kAutodiffTypeOffset, so a plugin type must stay below it).
inline constexpr std::uint16_t kFirstPluginType = 2;
// The host CPU: where the host's kernels run a plugin's ops it lacks.
inline constexpr DeviceId kCpuDev{kCpuDeviceType, 0};

struct PluginLib {
  std::string name;
  TensorPluginInfo info{};  // the host's view: members past the plugin's struct_size are zero
  std::uint16_t type_id = 0;
  std::array<PluginOpSource, kOpCount> source{};
};

// By type id; set once under the load lock, never freed (no dlclose).
extern std::array<PluginLib*, kAutodiffTypeOffset> g_libs;
inline const PluginLib& lib_of(DeviceId d) { return *g_libs[d.type_id]; }

// The table the host hands every plugin's init.
extern const TensorHostApi kHostApi;
// TENSOR_PLUGIN_LOG=1: the line on stderr.
void host_log(std::int32_t level, const char* message);
// A failing status becomes the matching tensor::Error, "[<plugin>:<what>] <message>" (the
// message the entry set with TensorHostApi::set_error on this thread).
void check_status(TensorStatus s, const PluginLib& lib, std::string_view what);
// Forgets this thread's pending message (before an init call).
void clear_error();
// The message set on this thread since clear_error(), taken.
std::string take_error_message();
std::string status_name(TensorStatus s);

// The families whose entries the adapter calls (the others run the host's kernel or default).
constexpr bool forwarded(Family f) {
  return f == Family::Unary || f == Family::Binary || f == Family::Scalar || f == Family::Reduce || f == Family::Dim ||
         f == Family::Create || f == Family::Full || f == Family::Matmul || f == Family::Reshape;
}

// The adapter calls a plugin's entry for `op` (else the host's kernel or default runs): the
// families above, and under ABI >= 1.2 every family with encodable arguments but the
// collectives and the QFloat rows (plugin.cpp's Generic).
bool forwards(OpCode op, std::uint16_t abi_minor);

// The device's default dtypes (F32, I32, BOOL without the entry); throws through check_status.
TensorDefaultSettings c_settings(const PluginLib& lib, std::uint32_t device);
// The Backend of a checked plugin: its entries, host kernels and defaults (lib.source filled).
std::unique_ptr<Backend> make_backend(PluginLib& lib);

}  // namespace tensor::dispatch::plugin
