// The op coverage report behind `tensorctl ops` and dispatch/table/ops.md: for each op
// of the op table and each device, whether it runs natively, through a default
// composition, or not at all, per dtype family (float / int / bool).
#pragma once

#include <string>
#include <vector>

#include "tensor/device.hpp"

namespace tensorctl {

// Host: a plugin device's op that runs the host CPU kernel through the plugin's host copies.
enum class OpStatus { NotApplicable, Native, Default, Missing, Unsupported, Host };

const char* status_name(OpStatus s);

struct OpRow {
  std::string name, family, kinds, policy, meaning;
  OpStatus status[3];  // float, int, bool
  std::string autodiff;  // on the device's autodiff wrapper: native, decomposed, missing or "-"
};

// One row per op of the table for `device`.
std::vector<OpRow> op_rows(tensor::DeviceId device);

// Markdown section for one device: a heading, totals and the table.
std::string ops_markdown(tensor::DeviceId device);

// The whole dispatch/table/ops.md: a preamble and one section per device.
std::string ops_markdown_document(const std::vector<tensor::DeviceId>& devices);

// Plain text for a terminal.
std::string ops_text(tensor::DeviceId device);

}  // namespace tensorctl
