// tensorctl bench [--device D] [--quick] [--only GROUP]: the SPEC §8 benchmark suite (tools/bench),
// each figure beside its reference measured in the same run.
#include <vector>

#include "tools/bench/bench_cpu.hpp"
#include "tools/tensorctl.hpp"

namespace tensorctl {

int run_bench(Args args) {
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  tensor_bench::Options opt;
  if (!tensor_bench::parse_args(static_cast<int>(argv.size()), argv.data(), opt)) return kExitUsage;
  return tensor_bench::run(opt);
}

}  // namespace tensorctl
