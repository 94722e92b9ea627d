// tensorctl bench [--device D] [--quick] [--only GROUP]: the SPEC §8 benchmark suite
// (tools/bench), each figure beside its reference measured in the same run. On a Vulkan
// device the Vulkan cases follow (tools/bench/bench_vulkan.cpp: matmul f32/f16 up to
// n = 4096, 16M elementwise and reductions against a device copy, coopmat on vs off,
// native f16 vs f32 compute, per-op overhead). `--only dist` (under mpirun) times tensor::dist's
// all_reduce against a raw MPI_Allreduce (tools/bench/bench_dist.cpp). `--only quant`: q_matmul
// (int8 on oneDNN) against our f32 matmul on the cpu (tools/bench/bench_quant.cpp). `--graph [--device D]
// [--quick]` times a chain of 1,000 adds on [4] eagerly and as a replayed graph, same run.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <tensor/device.hpp>
#include <tensor/error.hpp>
#include <tensor/graph.hpp>

#include "tensor/version.hpp"
#include "tools/bench/bench_cpu.hpp"
#include "tools/bench/bench_dist.hpp"
#include "tools/bench/bench_quant.hpp"
#include "tools/tensorctl.hpp"
#if TENSOR_HAVE_VULKAN
#include "tools/bench/bench_vulkan.hpp"
#endif

namespace tensorctl {

namespace {

// Chain of 1,000 adds on [4]: ns per op eagerly and per node replayed (the best of a few
// rounds each, eager and replay interleaved so both see the same load).
int run_graph_bench(const Args& args) {
  std::string device = "cpu";
  bool quick = false;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--graph") continue;
    if (args[i] == "--quick") quick = true;
    else if (args[i] == "--device" && i + 1 < args.size()) device = args[++i];
    else {
      std::fprintf(stderr, "bench --graph: expected [--device D] [--quick]; got '%s'\n", args[i].c_str());
      return kExitUsage;
    }
  }
  using namespace tensor;
  using Clock = std::chrono::steady_clock;
  const Device dev = Device::parse(device);
  constexpr int kChain = 1000;
  const int reps = quick ? 20 : 200, rounds = quick ? 3 : 7;
  const auto x = Tensor<1>::from_data(TensorData::from<float>({1, 2, 3, 4}, {4}), dev);
  const auto b = Tensor<1>::from_data(TensorData::from<float>({0.5f, 0.25f, 0.125f, 1}, {4}), dev);
  auto chain = [&] {
    Tensor<1> y = x + b;
    for (int i = 1; i < kChain; ++i) y = y + b;
    return y;
  };
  auto g = capture(dev, chain);
  double eager = 1e300, replay = 1e300;
  for (int r = 0; r < rounds; ++r) {
    auto t0 = Clock::now();
    for (int i = 0; i < reps; ++i) (void)chain();
    dev.sync();
    auto t1 = Clock::now();
    eager = std::min(eager, std::chrono::duration<double, std::nano>(t1 - t0).count() / (reps * kChain));
    t0 = Clock::now();
    for (int i = 0; i < reps; ++i) g.replay();
    dev.sync();
    t1 = Clock::now();
    replay = std::min(replay, std::chrono::duration<double, std::nano>(t1 - t0).count() / (reps * kChain));
  }
  const GraphStats s = g.stats();
  const char* lp = std::getenv("LP_NUM_THREADS");
  std::printf("graph bench on %s (LP_NUM_THREADS=%s): chain of %d adds on [4], best of %d rounds x %d\n",
              dev.to_string().c_str(), lp ? lp : "unset", kChain, rounds, reps);
  std::printf("  graph: %zu nodes, arena %zu bytes, native=%s%s%s\n", s.nodes, s.arena_bytes, s.native ? "yes" : "no",
              s.native ? "" : " (", s.native ? "" : (s.fallback_reason + ")").c_str());
  std::printf("  eager   %8.1f ns/op\n  replay  %8.1f ns/node  (%.2fx)\n", eager, replay, eager / replay);
  return kExitOk;
}

}  // namespace

int run_bench(Args args) {
  if (std::find(args.begin(), args.end(), "--graph") != args.end()) return run_graph_bench(args);
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
  // --only quant takes [--quick] alone: the int8 product on the cpu (tools/bench/bench_quant.cpp).
  if (std::find(args.begin(), args.end(), "quant") != args.end()) {
    bool quick = false;
    for (std::size_t i = 0; i < args.size(); ++i) {
      if (args[i] == "--quick") quick = true;
      else if (args[i] == "--only" && i + 1 < args.size() && args[i + 1] == "quant") ++i;
      else {
        std::fprintf(stderr, "bench --only quant: expected [--quick]; got '%s'\n", args[i].c_str());
        return kExitUsage;
      }
    }
    return tensor_bench::run_quant(quick);
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
