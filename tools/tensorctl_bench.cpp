// tensorctl bench [--device D] [--quick] [--only GROUP]: the SPEC §8 benchmark suite
// (tools/bench), each figure beside its reference measured in the same run. On a Vulkan
// device the Vulkan cases follow (tools/bench/bench_vulkan.cpp: matmul f32/f16 up to
// n = 4096, 16M elementwise and reductions against a device copy, coopmat on vs off,
// native f16 vs f32 compute, per-op overhead). `--only dist` (under mpirun) times tensor::dist's
// all_reduce against a raw MPI_Allreduce (tools/bench/bench_dist.cpp).
#include <algorithm>
#include <cstdio>
#include <vector>

#include <tensor/device.hpp>
#include <tensor/error.hpp>

#include "tensor/version.hpp"
#include "tools/bench/bench_cpu.hpp"
#include "tools/bench/bench_dist.hpp"
#include "tools/tensorctl.hpp"
#if TENSOR_HAVE_VULKAN
#include "tools/bench/bench_vulkan.hpp"
#endif

namespace tensorctl {

int run_bench(Args args) {
  // --only dist takes [--quick] alone and needs no device: it runs on the cpu under mpirun.
  if (std::find(args.begin(), args.end(), "dist") != args.end()) {
    bool quick = false;
    for (std::size_t i = 0; i < args.size(); ++i) {
      if (args[i] == "--quick") quick = true;
      else if (args[i] == "--only" && i + 1 < args.size() && args[i + 1] == "dist") ++i;
      else {
        std::fprintf(stderr, "bench --only dist: expected [--quick]; got '%s'\n", args[i].c_str());
        return kExitUsage;
      }
    }
    return tensor_bench::run_dist(quick);
  }
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  tensor_bench::Options opt;
  if (!tensor_bench::parse_args(static_cast<int>(argv.size()), argv.data(), opt)) return kExitUsage;
  const int rc = tensor_bench::run(opt);
#if TENSOR_HAVE_VULKAN
  if (rc == 0 && opt.only.empty()) {  // --only names a group of the common table
    const tensor::DeviceId id = tensor::Device::parse(opt.device).id();
    if (id.type_id == tensor::kVulkanDeviceType) {
      std::printf("\nVulkan cases\n");
      std::fflush(stdout);
      return tensor_bench::run_vulkan(id.index_id, opt.quick);
    }
  }
#endif
  return rc;
}

}  // namespace tensorctl
