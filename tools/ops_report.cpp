// Builds the coverage report from the op table and the registered backends.
#include "tools/ops_report.hpp"

#include <sstream>

#include "dispatch/autodiff.hpp"
#include "dispatch/dispatch.hpp"
#include "dispatch/plugin.hpp"
#include "tools/tensorctl.hpp"

namespace tensorctl {

using namespace tensor;
using namespace tensor::dispatch;

const char* status_name(OpStatus s) {
  switch (s) {
    case OpStatus::NotApplicable: return "-";
    case OpStatus::Native: return "native";
    case OpStatus::Default: return "default";
    case OpStatus::Missing: return "missing";
    case OpStatus::Unsupported: return "unsupported";
    case OpStatus::Host: return "host";
  }
  return "?";
}

namespace {

constexpr DType kFloat[] = {DType::F64, DType::F32, DType::F16, DType::BF16};
constexpr DType kInt[] = {DType::I64, DType::I32, DType::I16, DType::I8, DType::U64, DType::U32, DType::U16, DType::U8};
constexpr DType kBool[] = {DType::Bool, DType::BoolU8, DType::BoolU32};

// Some dtype of the family can be computed with (or, for bool, stored) on the device.
template <std::size_t N>
bool any_usable(DeviceId d, const DType (&ts)[N], DTypeUsage need) {
  for (DType t : ts)
    if (dtype_usage(d, t).contains(need)) return true;
  return false;
}

// Q: the first operand is a quantized Float tensor (the op table's q_in).
std::string kinds_letters(std::uint8_t k, bool qfloat_in) {
  if (qfloat_in) return "Q";
  std::string s;
  if (k & kKindF) s += 'F';
  if (k & kKindI) s += 'I';
  if (k & kKindB) s += 'B';
  return s;
}

}  // namespace

std::vector<OpRow> op_rows(DeviceId device) {
  const Backend& b = Registry::instance().get(device.type_id);
  const bool fam_ok[3] = {any_usable(device, kFloat, DTypeUsage::Arithmetic), any_usable(device, kInt, DTypeUsage::Arithmetic),
                          any_usable(device, kBool, DTypeUsage::Storage)};
  std::vector<OpRow> rows;
  for (std::size_t i = 0; i < kOps.size(); ++i) {
    const OpInfo& info = kOps[i];
    const auto op = static_cast<OpCode>(i);
    OpRow r{std::string(info.name), std::string(family_name(info.family)), kinds_letters(info.kinds, info.qfloat_in),
            info.policy == Policy::Req ? "required" : "defaulted", std::string(info.meaning), {}, {}};
    const std::uint8_t bits[3] = {kKindF, kKindI, kKindB};
    for (int k = 0; k < 3; ++k) {
      if (!(info.kinds & bits[k])) r.status[k] = OpStatus::NotApplicable;
      else if (!b.has(op)) r.status[k] = OpStatus::Missing;
      else if (!fam_ok[k]) r.status[k] = OpStatus::Unsupported;
      else if (plugin_op_source(device.type_id, op) == PluginOpSource::Host) r.status[k] = OpStatus::Host;
      else if (plugin_op_source(device.type_id, op) == PluginOpSource::Native &&
               !(plugin_native_kinds(device.type_id, op) & bits[k]))
        r.status[k] = OpStatus::Host;  // the plugin's entry computes no dtype of this kind
      else if (plugin_op_source(device.type_id, op) == PluginOpSource::Default) r.status[k] = OpStatus::Default;
      else r.status[k] = b.is_native(op) ? OpStatus::Native : OpStatus::Default;
    }
    const ad::Coverage c = ad::coverage(op);
    r.autodiff = c == ad::Coverage::NotDifferentiable ? "-" : std::string(ad::coverage_name(c));
    rows.push_back(std::move(r));
  }
  return rows;
}

namespace {

struct Totals {
  int native = 0, deflt = 0, missing = 0, unsupported = 0, host = 0;
  int ad_native = 0, ad_decomposed = 0, ad_missing = 0;
};

Totals totals(const std::vector<OpRow>& rows) {
  Totals t;
  for (const auto& r : rows)
    for (OpStatus s : r.status) {
      if (s == OpStatus::Native) ++t.native;
      else if (s == OpStatus::Default) ++t.deflt;
      else if (s == OpStatus::Missing) ++t.missing;
      else if (s == OpStatus::Unsupported) ++t.unsupported;
      else if (s == OpStatus::Host) ++t.host;
    }
  for (const auto& r : rows) {
    if (r.autodiff == "native") ++t.ad_native;
    else if (r.autodiff == "decomposed") ++t.ad_decomposed;
    else if (r.autodiff == "missing") ++t.ad_missing;
  }
  return t;
}

std::string totals_line(const Totals& t) {
  std::ostringstream os;
  os << t.native << " native, " << t.deflt << " default, ";
  if (t.host) os << t.host << " host (a plugin's op run by the host CPU kernel), ";
  os << t.missing << " missing, " << t.unsupported
     << " unsupported (op x dtype family); autodiff: " << t.ad_native << " native backward, " << t.ad_decomposed
     << " decomposed, " << t.ad_missing << " without a backward (of " << t.ad_native + t.ad_decomposed + t.ad_missing
     << " differentiable ops)";
  return os.str();
}

}  // namespace

namespace {

// The device-level rows (op_table_device.def): the backend's own entry or dispatch's default.
// graph_replay's default is the closure re-run (tensor/graph.hpp's fallback).
struct DevRow {
  std::string name, family, policy, status, meaning;
};
std::vector<DevRow> device_rows(DeviceId device) {
  const Backend& b = Registry::instance().get(device.type_id);
  std::vector<DevRow> rows;
  for (std::size_t i = 0; i < kDeviceOps.size(); ++i) {
    const DeviceOpInfo& info = kDeviceOps[i];
    const auto op = static_cast<DeviceOp>(i);
    const bool native = b.is_native(op);
    std::string status = native ? "native" : "default";
    if (op == DeviceOp::graph_replay && !native) status = "fallback";
    rows.push_back({std::string(info.name), std::string(family_name(info.family)),
                    info.policy == Policy::Req ? "required" : "defaulted", status, std::string(info.meaning)});
  }
  return rows;
}

}  // namespace

std::string ops_markdown(DeviceId device) {
  const auto rows = op_rows(device);
  std::ostringstream os;
  os << "## " << Registry::instance().get(device.type_id).short_name() << "\n\n";
  os << totals_line(totals(rows)) << ".\n\n";
  os << "| op | family | kinds | policy | float | int | bool | autodiff | meaning |\n";
  os << "|---|---|---|---|---|---|---|---|---|\n";
  for (const auto& r : rows)
    os << "| `" << r.name << "` | " << r.family << " | " << r.kinds << " | " << r.policy << " | " << status_name(r.status[0])
       << " | " << status_name(r.status[1]) << " | " << status_name(r.status[2]) << " | " << r.autodiff << " | " << r.meaning
       << " |\n";
  os << "\n| device row | family | policy | status | meaning |\n|---|---|---|---|---|\n";
  for (const auto& r : device_rows(device))
    os << "| `" << r.name << "` | " << r.family << " | " << r.policy << " | " << r.status << " | " << r.meaning << " |\n";
  return os.str();
}

std::string ops_markdown_document(const std::vector<DeviceId>& devices) {
  std::ostringstream os;
  os << "# Op coverage\n\n"
        "Generated by `tensorctl ops --markdown` from `dispatch/table/op_table.def` and the registered backends;\n"
        "`tests/ops_doc_test` fails when this file is out of date (regenerate it with\n"
        "`build/tools/tensorctl ops --markdown > dispatch/table/ops.md`).\n\n"
        "Per op and dtype family: `native` (the backend's own kernel), `default` (composed by Dispatch\n"
        "from other entries, `dispatch/defaults/`), `missing` (a required entry the backend lacks:\n"
        "calling it raises NotImplemented), `unsupported` (the device has no dtype of that family), `-`\n"
        "(the op does not take that kind). `autodiff`: how the device's `Device::autodiff()` wrapper\n"
        "differentiates the op (`dispatch/autodiff/`): `native` (an explicit backward step),\n"
        "`decomposed` (the op's default composition, differentiated through its parts), `missing` (a\n"
        "tracked input raises), `-` (nothing to differentiate).\n\n";
  for (DeviceId d : devices) os << ops_markdown(d) << "\n";
  return os.str();
}

std::string ops_text(DeviceId device) {
  const auto rows = op_rows(device);
  std::ostringstream os;
  os << device_string(device) << " (" << backend_name(device) << "): " << totals_line(totals(rows)) << "\n";
  TextTable t({"op", "family", "policy", "float", "int", "bool", "autodiff"});
  for (const auto& r : rows)
    t.add({r.name, r.family, r.policy, status_name(r.status[0]), status_name(r.status[1]), status_name(r.status[2]),
           r.autodiff});
  t.print(os);
  TextTable dt({"device row", "family", "policy", "status"});
  for (const auto& r : device_rows(device)) dt.add({r.name, r.family, r.policy, r.status});
  os << "\n";
  dt.print(os);
  return os.str();
}

}  // namespace tensorctl
