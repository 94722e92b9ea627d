// `tensorctl info`: what this machine's libtensor can do — devices, backends (and why
// some are absent), per-dtype usage, settings, op-table coverage, CPU SIMD/BLIS/OpenMP.
// Reads below the public API (dispatch introspection), so it links tensor_internal.
#include <fmt/format.h>
#include <hwy/targets.h>  // hwy::TargetName only; no SIMD code here

#include <array>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "backends/cpu/cpu_info.hpp"
#include "backends/cpu/nn/conv.hpp"
#include "backends/cpu/quant.hpp"
#include "dispatch/backend.hpp"
#include "dispatch/dispatch.hpp"
#include "dispatch/plugin.hpp"
#include "dispatch/settings.hpp"
#include "tensor/device.hpp"
#include "tensor/distributed.hpp"
#include "tensor/dtype.hpp"
#include "tensor/error.hpp"
#include "tensor/nn.hpp"
#include "tensor/quantization.hpp"
#include "tensor/version.hpp"
#include "tools/tensorctl.hpp"

#if TENSOR_HAVE_VULKAN
#include "backends/vulkan/runtime/context.hpp"
#endif

namespace tensorctl {
namespace {

namespace td = tensor::dispatch;
using tensor::DeviceId;
using tensor::DType;
using tensor::DTypeUsage;

std::string yes_no(bool b) { return b ? "yes" : "no"; }

std::string id_string(DeviceId d) {
  // Appended piecewise: GCC 12 at -O3 flags "(" + std::string with a false -Wrestrict.
  std::string s = "(";
  s.append(std::to_string(d.type_id)).append(",").append(std::to_string(d.index_id)).append(")");
  return s;
}

// Names joined by ", ", wrapped at ~88 columns under an indent.
void print_wrapped(std::ostream& os, const std::vector<std::string>& names, const std::string& indent) {
  std::string line = indent;
  for (std::size_t i = 0; i < names.size(); ++i) {
    const std::string item = names[i] + (i + 1 < names.size() ? "," : "");
    if (line.size() > indent.size() && line.size() + 1 + item.size() > 88) {
      os << line << '\n';
      line = indent;
    }
    if (line.size() > indent.size()) line += ' ';
    line += item;
  }
  if (line.size() > indent.size()) os << line << '\n';
}

void print_dtype_table(std::ostream& os, DeviceId dev) {
  TextTable t({"dtype", "Storage", "Arithmetic", "Accelerated", "supports"}, 4);
  for (int i = 0; i < tensor::kDTypeCount; ++i) {
    const auto dt = static_cast<DType>(i);
    try {
      const tensor::DTypeUsageSet u = td::dtype_usage(dev, dt);
      t.add({std::string(tensor::dtype_name(dt)), yes_no(u.contains(DTypeUsage::Storage)),
             yes_no(u.contains(DTypeUsage::Arithmetic)), yes_no(u.contains(DTypeUsage::Accelerated)),
             yes_no(td::supports_dtype(dev, dt))});
    } catch (const std::exception& e) {
      t.add({std::string(tensor::dtype_name(dt)), "error: " + std::string(e.what())});
    }
  }
  t.print(os);
}

// Quantized tensors (docs/quantization.md): the qfloat row of the table above is dispatch's
// answer (Storage and Arithmetic where the device stores i8 and computes f32, Accelerated where
// the backend has an integer path). Here the q rows by what runs them: native, or a default
// on the codes, or through the float op.
void print_quantized(std::ostream& os, DeviceId dev, const td::Backend& b) {
  tensor::DTypeUsageSet u;
  try {
    u = td::dtype_usage(dev, DType::QFloat);
  } catch (const std::exception&) {
    u = {};
  }
  if (!u.contains(DTypeUsage::Storage)) {
    os << "  qfloat (quantized): no (needs i8 and f32 storage)\n";
    return;
  }
  const bool arith = u.contains(DTypeUsage::Arithmetic), accel = u.contains(DTypeUsage::Accelerated);
  std::size_t rows = 0, codes = 0, through = 0, native = 0;
  for (std::size_t i = 0; i < td::kOps.size(); ++i) {
    const td::OpInfo& o = td::kOps[i];
    using F = td::Family;
    const bool quant_row = o.qfloat_in || o.family == F::Quantize || o.family == F::QuantizeDynamic ||
                           o.family == F::Dequantize || o.family == F::QMatmul || o.family == F::QConv;
    if (!quant_row) continue;
    ++rows;
    if (b.is_native(static_cast<tensor::OpCode>(i))) ++native;
    else if (o.qrule == td::QRule::Codes) ++codes;
    else if (o.qrule != td::QRule::None) ++through;
  }
  os << "  qfloat (quantized): Storage" << (arith ? " Arithmetic" : "") << (accel ? " Accelerated (int8 products)" : "")
     << "; " << rows << " quant rows (burn's 80 QTensorOps and q_conv2d): " << native << " native, "
     << rows - native << " default (" << codes << " on the codes for per-tensor schemes, " << through
     << " through the float op)\n";
}

void print_op_coverage(std::ostream& os, const td::Backend& b) {
  std::size_t native = 0, defaulted = 0, empty = 0;
  for (std::size_t i = 0; i < td::kOps.size(); ++i) {
    const auto op = static_cast<tensor::OpCode>(i);
    if (!b.has(op)) ++empty;
    else if (b.is_native(op)) ++native;
    else ++defaulted;
  }
  os << "  op table: " << td::kOps.size() << " ops; " << native << " native, " << defaulted << " default, " << empty
     << " empty\n";
  const auto& missing = b.missing_required();
  os << "  missing required ops: " << missing.size() << '\n';
  std::vector<std::string> names;
  for (tensor::OpCode op : missing) names.emplace_back(td::op_name(op));
  print_wrapped(os, names, "    ");
  if (empty > missing.size()) {
    names.clear();
    for (std::size_t i = 0; i < td::kOps.size(); ++i) {
      const auto op = static_cast<tensor::OpCode>(i);
      if (!b.has(op) && td::kOps[i].policy == td::Policy::Def) names.emplace_back(td::op_name(op));
    }
    os << "  defaulted ops with no default: " << names.size() << '\n';
    print_wrapped(os, names, "    ");
  }
}

// The conv routes, from one small probe of each on the cpu (the route depends on the shape:
// these are the Fashion-MNIST CNN's two convs): the f32 forwards of [8,1,28,28] x [32,1,3,3]
// and [8,32,14,14] x [64,32,3,3], and a q8s-weight conv2d of [8,32,14,14] x [64,32,3,3] (q_conv2d).
std::array<std::string, 3> probe_conv_routes() {
  using namespace tensor;
  std::string f32, f32_2, q;
  try {
    const Device cpu = Device::cpu();
    nn::ConvOptions<2> o;
    o.padding = {1, 1};
    cpu::nn::reset_conv_forward_routes();
    (void)nn::conv2d(Tensor<4>::full({8, 1, 28, 28}, 0.5f, cpu), Tensor<4>::full({32, 1, 3, 3}, 0.25f, cpu), std::nullopt, o)
        .into_data();
    f32 = cpu::nn::conv_forward_routes();
    if (f32.find("direct small-C_in") != std::string::npos) f32 += " (Highway " + cpu::nn::conv_direct_target() + ")";
    cpu::nn::reset_conv_forward_routes();
    (void)nn::conv2d(Tensor<4>::full({8, 32, 14, 14}, 0.5f, cpu), Tensor<4>::full({64, 32, 3, 3}, 0.25f, cpu),
                     std::nullopt, o)
        .into_data();
    f32_2 = cpu::nn::conv_forward_routes();
    const auto scheme = QuantScheme{}.with_value(QuantValue::Q8S).with_store(QuantStore::Native);
    const auto wq = quantize_dynamic(Tensor<4>::full({64, 32, 3, 3}, 0.25f, cpu), scheme);
    (void)nn::conv2d(Tensor<4>::full({8, 32, 14, 14}, 0.5f, cpu), wq, std::nullopt, o).into_data();
    q = cpu::last_q_conv2d_route();
  } catch (const std::exception& e) {
    if (f32.empty()) f32 = std::string("(probe failed: ") + e.what() + ")";
    if (f32_2.empty()) f32_2 = std::string("(probe failed: ") + e.what() + ")";
    q = std::string("(probe failed: ") + e.what() + ")";
  }
  return {f32, f32_2, q};
}

void print_cpu_details(std::ostream& os) {
  std::string compiled;
  for (std::int64_t t : tensor::cpu::compiled_targets()) compiled += std::string(compiled.empty() ? "" : " ") + hwy::TargetName(t);
  os << "  cpu backend:\n";
  TextTable t({"", ""}, 4);
  t.add({"Highway target", tensor::cpu::current_target_name()});
  t.add({"compiled+supported targets", compiled.empty() ? "(none)" : compiled});
  t.add({"BLIS architecture", tensor::cpu::blis_arch()});
  t.add({"GEMM routes", tensor::cpu::gemm_route()});
  const auto [f32_conv, f32_conv2, q_conv] = probe_conv_routes();
  t.add({"conv2d route [8,1,28,28] 3x3->32", f32_conv});
  t.add({"conv2d route [8,32,14,14] 3x3->64", f32_conv2});
  t.add({"q_conv2d route [8,32,14,14] 3x3->64 q8s", q_conv});
  t.add({"OpenMP threads", std::to_string(tensor::cpu::omp_threads())});
  t.print(os, /*with_header=*/false);
}

#if TENSOR_HAVE_VULKAN
// The optional Vulkan paths and why each is (not) in use.
void print_vulkan_details(std::ostream& os, DeviceId d) {
  tensor::vulkan::Context* c = tensor::vulkan::context(d.index_id);
  if (!c) return;
  namespace vk = tensor::vulkan;
  os << "  vulkan backend:\n";
  TextTable t({"", ""}, 4);
  t.add({"f16 arithmetic", c->f16_arith() ? "native f16 (shaderFloat16 + storageBuffer16BitAccess)"
                           : c->f16_arith_supported() ? "f32 compute (native f16 switched off)"
                                                      : "f32 compute (no shaderFloat16 + 16-bit storage, or TENSOR_VK_DISABLE_F16ARITH)"});
  std::string state;
  switch (c->coop_state()) {
    case vk::CoopState::Unavailable: state = "unavailable: "; break;
    case vk::CoopState::Untested: state = "usable, self-test at first f16 matmul: "; break;
    case vk::CoopState::Live: state = c->coop_enabled() ? "live: " : "switched off: "; break;
    case vk::CoopState::Failed: state = "off: "; break;
  }
  t.add({"cooperative-matrix f16 matmul", state + c->coop_reason()});
  std::string limit;
  try {
    c->ensure_init();
    limit = std::to_string(c->memory_limit()) + " bytes (" + std::to_string(c->memory_limit() >> 20) + " MiB; " +
            c->memory_limit_source() + ")";
  } catch (const std::exception& e) {
    limit = e.what();  // e.g. a bad TENSOR_VK_MEMORY_LIMIT
  }
  t.add({"memory limit (tensor pool)", limit});
  {
    const tensor::MemoryStats h = c->host_memory_stats();
    t.add({"staging/parameter pool", fmt::format("{} bytes in use, {} reserved, peak {}", h.bytes_in_use, h.bytes_reserved,
                                                 h.peak_bytes_in_use)});
    t.add({"command batches", fmt::format("{} live, {} in flight (at most {} queued, {} kept for reuse); {} pipelines",
                                          c->batch_count(), c->in_flight_count(), vk::kMaxInFlight, vk::kMaxSpare,
                                          c->pipeline_count())});
  }
  const vk::SubgroupFacts& sf = c->subgroup_facts();
  std::string facts = fmt::format("size {}, arithmetic in compute: {}", sf.size, sf.compute && sf.arithmetic ? "yes" : "no");
  if (sf.size_control_ext)
    facts += fmt::format("; size control {}..{} (compute: {}), full subgroups: {}, max {} per workgroup", sf.min_size,
                         sf.max_size, sf.size_control && sf.required_compute ? "yes" : "no",
                         sf.full_subgroups ? "yes" : "no", sf.max_workgroup_subgroups);
  else
    facts += "; no VK_EXT_subgroup_size_control";
  t.add({"subgroups", facts});
  for (auto [family, name] : {std::pair{vk::ShaderFamily::Reduce, "reductions"}, std::pair{vk::ShaderFamily::Rows, "softmax rows"}}) {
    const std::uint32_t sg = c->subgroup_size(family);
    const vk::SubgroupDecision& dec = c->subgroup_decision(family);
    t.add({name, sg ? fmt::format("subgroup path at subgroup size {} ({})", sg, dec.reason)
                    : "shared-memory trees: " + (dec.size ? std::string("subgroup path switched off") : dec.reason)});
  }
  t.print(os, /*with_header=*/false);
}
#endif

}  // namespace

int run_info(Args args) {
  if (!args.empty()) {
    std::cerr << "tensorctl info: takes no arguments; got '" << args[0] << "'\n";
    return kExitUsage;
  }
  std::ostream& os = std::cout;
  os << "libtensor " << TENSOR_VERSION_STRING << '\n';
  // The process group (tensor::dist): MPI under mpirun when built with it, else the singleton.
  try {
    os << "distributed: " << tensor::dist::describe() << '\n';
  } catch (const tensor::Error& e) {
    os << "distributed: error: " << e.what() << '\n';
  }

  td::Registry& reg = td::Registry::instance();
  const std::vector<DeviceId> devices = td::available_devices();

  os << "\ndevices:\n";
  TextTable dt({"id", "device", "backend"});
  for (DeviceId d : devices) dt.add({id_string(d), td::device_string(d), td::backend_name(d)});
  dt.print(os);

  // TENSOR_DEVICE as every other entry point reads it: an unknown or absent device is reported
  // here and makes the command fail after the report (a diagnosis tool still prints the rest).
  const char* env = std::getenv("TENSOR_DEVICE");
  const std::string spec = env ? env : "";
  std::string bad_default;
  try {
    os << "default device (TENSOR_DEVICE): " << tensor::Device::default_device().to_string()
       << (spec.empty() ? " (unset)" : "") << '\n';
  } catch (const tensor::Error& e) {
    bad_default = e.what();
    os << "default device (TENSOR_DEVICE): error: " << bad_default << '\n';
  }

  os << "\nabsent backends:\n";
  if (reg.absent().empty()) os << "  (none)\n";
  for (const auto& [name, why] : reg.absent()) os << "  " << name << ": " << why << '\n';

  // Backend plugins (TENSOR_BACKEND_PATH, <libdir>/tensor/backends, tensor::load_backend).
  os << "\nplugins:\n";
  const std::vector<td::PluginRecord> plugins = td::plugin_records();
  if (plugins.empty()) os << "  (none; TENSOR_BACKEND_PATH lists plugin files or directories)\n";
  for (const td::PluginRecord& p : plugins) {
    if (!p.loaded) {
      os << "  refused " << p.path << ": " << p.reason << '\n';
      continue;
    }
    os << "  " << p.name << ' ' << p.version << " (" << p.vendor << ", " << p.path << ") abi " << p.abi_major << '.'
       << p.abi_minor << ", op table " << p.op_count << " of " << td::kOps.size() << " ops (hash ok), native " << p.native
       << " / default " << p.defaulted << " / host " << p.host << ", score "
       << (p.score < 0 ? std::string("(none)") : std::to_string(p.score)) << '\n';
    for (const std::string& d : p.devices) os << "    device " << d << '\n';
    for (const auto& [k, v] : p.features) os << "    feature " << k << ": " << v << '\n';
  }

  for (DeviceId d : devices) {
    const td::Backend& b = reg.get(d.type_id);
    os << "\ndevice " << td::device_string(d) << " " << id_string(d) << " -- " << td::backend_name(d) << '\n';

    // Reading the settings fixes them to the device defaults (SPEC §3); fine for a tool.
    const tensor::DeviceSettings& s = td::device_settings(d);
    os << "  settings: float " << tensor::dtype_name(tensor::to_dtype(s.float_dtype)) << ", int "
       << tensor::dtype_name(tensor::to_dtype(s.int_dtype)) << ", bool "
       << tensor::dtype_name(tensor::to_dtype(s.bool_dtype)) << '\n';

    // The device's memory_stats (SPEC: bytes in use, reserved, peak in use).
    try {
      const tensor::MemoryStats m = td::memory_stats(d);
      os << "  memory: " << m.bytes_in_use << " bytes in use, " << m.bytes_reserved << " reserved, peak "
         << m.peak_bytes_in_use << " in use\n";
    } catch (const std::exception& e) {
      os << "  memory: " << e.what() << '\n';
    }

    os << "  dtype usage:\n";
    print_dtype_table(os, d);
    print_quantized(os, d, b);
    print_op_coverage(os, b);
    if (d.type_id == tensor::kCpuDeviceType) print_cpu_details(os);
#if TENSOR_HAVE_VULKAN
    if (d.type_id == tensor::kVulkanDeviceType) print_vulkan_details(os, d);
#endif
  }
  if (!bad_default.empty()) {
    std::cerr << "tensorctl info: TENSOR_DEVICE='" << spec << "' is not a device on this machine: " << bad_default << '\n';
    return kExitFailure;
  }
  return kExitOk;
}

}  // namespace tensorctl
