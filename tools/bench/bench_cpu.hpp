// The benchmark suite of SPEC §8 behind `tensorctl bench` and the `perf` Meson
// benchmark: every figure is printed beside a reference measured in the same run.
#pragma once

#include <string>

namespace tensor_bench {

struct Options {
  std::string device = "cpu";  // a TENSOR_DEVICE-style spec: cpu, vulkan, vulkan:N
  bool quick = false;          // fewer repetitions and sizes (a smoke run)
  std::string only;            // one group: overhead, elementwise, models, transpose or matmul (empty: all)
};

// Runs every case on `opt.device` and prints the table to stdout; returns the
// process exit status (0; 2 for an unknown device).
int run(const Options& opt);

// Parses [--device D] [--quick] [--only GROUP]; false (after printing why) on a bad argument.
bool parse_args(int argc, const char* const* argv, Options& opt);

}  // namespace tensor_bench
