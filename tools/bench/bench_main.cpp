// The `perf` Meson benchmark (meson test --benchmark): the same suite as `tensorctl bench`.
#include "tools/bench/bench_cpu.hpp"

int main(int argc, char** argv) {
  tensor_bench::Options opt;
  if (!tensor_bench::parse_args(argc - 1, argv + 1, opt)) return 2;
  return tensor_bench::run(opt);
}
