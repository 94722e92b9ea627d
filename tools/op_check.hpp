// The cross-device op checker behind `tensorctl check`: runs ops of the op table
// on a device and on the CPU backend with the same random inputs (several layouts),
// and compares the results at per-dtype tolerances.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "tensor/device.hpp"
#include "tensor/dtype.hpp"

namespace tensorctl {

struct CheckOptions {
  tensor::DeviceId device{};
  std::string op_pattern;             // substring of the op name; empty: every op
  std::optional<tensor::DType> dtype;  // only this dtype
  std::uint64_t seed = 1;
};

enum class CheckStatus { Pass, Fail, Unsupported };

struct CheckResult {
  std::string op, dtype, layout;
  double max_abs = 0.0, max_rel = 0.0;
  CheckStatus status = CheckStatus::Pass;
  std::string note;  // why it failed, or why it is unsupported
};

struct CheckSummary {
  int passed = 0, failed = 0, unsupported = 0;
};

// Calls `report` for every case; returns the counts.
CheckSummary run_checks(const CheckOptions& options, const std::function<void(const CheckResult&)>& report);

}  // namespace tensorctl
