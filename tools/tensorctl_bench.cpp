// tensorctl bench [--device D] [--quick] [--only GROUP]: the SPEC §8 benchmark suite
// (tools/bench), each figure beside its reference measured in the same run. On a Vulkan
// device the Vulkan cases follow (tools/bench/bench_vulkan.cpp: matmul f32/f16 up to
// n = 4096, 16M elementwise and reductions against a device copy, coopmat on vs off,
// native f16 vs f32 compute, per-op overhead). `--only dist` (under mpirun) times tensor::dist's
// all_reduce against a raw MPI_Allreduce (tools/bench/bench_dist.cpp). `--only quant`: q_matmul
// (int8 on oneDNN) against our f32 matmul on the cpu (tools/bench/bench_quant.cpp). `--graph
// [--device D] [--quick]` times a chain of 1,000 adds on [4] eagerly and as a replayed graph,
// and an MLP 784-256-10 training step (batch 64, cross-entropy, Adam) eagerly and replayed,
// same run.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include <tensor/device.hpp>
#include <tensor/error.hpp>
#include <tensor/graph.hpp>
#include <tensor/loss.hpp>
#include <tensor/modules/core.hpp>
#include <tensor/modules/optim.hpp>

#include "tensor/version.hpp"
#include "tools/bench/bench_cpu.hpp"
#include "tools/bench/bench_dist.hpp"
#include "tools/bench/bench_plugin.hpp"
#include "tools/bench/bench_quant.hpp"
#include "tools/tensorctl.hpp"
#if TENSOR_HAVE_VULKAN
#include "tools/bench/bench_vulkan.hpp"
#endif

namespace tensorctl {

namespace {

// capture(dev, f) with the environment variable `var` set to `value` during the capture (a
// switch read at capture: the benchmark's references), restored afterwards.
template <class F>
auto capture_with_env(const tensor::Device& dev, const char* var, const char* value, F&& f) {
  const char* was = std::getenv(var);
  const std::string old = was ? was : "";
  setenv(var, value, 1);
  struct Restore {
    const char* var;
    bool had;
    const std::string& old;
    ~Restore() {
      if (had) setenv(var, old.c_str(), 1);
      else unsetenv(var);
    }
  } restore{var, was != nullptr, old};
  return tensor::capture(dev, std::forward<F>(f));
}

// The MLP 784-256-10 of issue 28's targets.
struct BenchMlp : tensor::Module {
  tensor::nn::Linear fc1, fc2;
  explicit BenchMlp(const tensor::Device& ad)
      : fc1(tensor::nn::LinearConfig{.d_input = 784, .d_output = 256}, ad), fc2(tensor::nn::LinearConfig{.d_input = 256, .d_output = 10}, ad) {}
  void visit(tensor::ModuleVisitor& v) override {
    v.module("fc1", fc1);
    v.module("fc2", fc2);
  }
  const char* type_name() const override { return "BenchMlp"; }
};

// One training step of the MLP (batch 64, cross-entropy, Adam): the usual eager step beside
// the step captured (Adam in graph mode, after two warm-up steps) and replayed; the best of
// a few rounds each, interleaved.
void run_mlp_step_bench(const tensor::Device& dev, bool quick) {
  using namespace tensor;
  using Clock = std::chrono::steady_clock;
  const Device ad = dev.autodiff();
  std::vector<float> xv(64 * 784), yv(64 * 10, 0.0f);
  for (std::size_t i = 0; i < xv.size(); ++i) xv[i] = static_cast<float>((i * 37) % 101) / 101.0f;
  for (std::size_t r = 0; r < 64; ++r) yv[r * 10 + r % 10] = 1.0f;
  const auto x = Tensor<2>::from_data(TensorData::from<float>(xv, {64, 784}), ad);
  const auto y = Tensor<2>::from_data(TensorData::from<float>(yv, {64, 10}), ad);
  BenchMlp eager_m(ad), graph_m(ad);
  auto eager_opt = optim::ModuleOptimizer::adam(), graph_opt = optim::ModuleOptimizer::adam();
  graph_opt.set_graph_mode(ad);
  constexpr double kLr = 1e-3;
  auto eager_step = [&] {
    auto loss = tensor::loss::cross_entropy_with_logits(eager_m.fc2.forward(tensor::activation::relu(eager_m.fc1.forward(x))), y);
    eager_opt.step(kLr, eager_m, loss.backward());
    return loss;
  };
  auto graph_step = [&] {
    auto loss = tensor::loss::cross_entropy_with_logits(graph_m.fc2.forward(tensor::activation::relu(graph_m.fc1.forward(x))), y);
    graph_opt.step(kLr, graph_m, loss.backward());
    return loss;
  };
  for (int i = 0; i < 2; ++i) {
    (void)eager_step();
    graph_opt.prepare_step(kLr);
    (void)graph_step();
  }
  graph_opt.prepare_step(kLr);
  auto g = capture(ad, graph_step);
  // The same step captured with its raw groups untiled (TENSOR_GRAPH_FUSE=0 at capture: node
  // after node on full buffers), on a fourth model: what the fused groups save, same run.
  BenchMlp unf_m(ad);
  auto unf_opt = optim::ModuleOptimizer::adam();
  unf_opt.set_graph_mode(ad);
  auto unf_step = [&] {
    auto loss = tensor::loss::cross_entropy_with_logits(unf_m.fc2.forward(tensor::activation::relu(unf_m.fc1.forward(x))), y);
    unf_opt.step(kLr, unf_m, loss.backward());
    return loss;
  };
  for (int i = 0; i < 2; ++i) {
    unf_opt.prepare_step(kLr);
    (void)unf_step();
  }
  unf_opt.prepare_step(kLr);
  auto g_unf = capture_with_env(ad, "TENSOR_GRAPH_FUSE", "0", unf_step);
  const int reps = quick ? 5 : 30, rounds = quick ? 3 : 5;
  // The graph-mode step run eagerly (the same ops the graph holds: the optimizer's state
  // writes and its device-tensor rate) on a third model: what replay saves on that work.
  BenchMlp mode_m(ad);
  auto mode_opt = optim::ModuleOptimizer::adam();
  mode_opt.set_graph_mode(ad);
  auto mode_step = [&] {
    auto loss = tensor::loss::cross_entropy_with_logits(mode_m.fc2.forward(tensor::activation::relu(mode_m.fc1.forward(x))), y);
    mode_opt.step(kLr, mode_m, loss.backward());
    return loss;
  };
  for (int i = 0; i < 2; ++i) {
    mode_opt.prepare_step(kLr);
    (void)mode_step();
  }
  double eager = 1e300, replay = 1e300, eager_mode = 1e300, replay_unf = 1e300;
  for (int r = 0; r < rounds; ++r) {
    {
      const auto u0 = Clock::now();
      for (int i = 0; i < reps; ++i) {
        unf_opt.prepare_step(kLr);
        g_unf.replay();
      }
      dev.sync();
      replay_unf = std::min(replay_unf, std::chrono::duration<double, std::micro>(Clock::now() - u0).count() / reps);
    }
    auto t0 = Clock::now();
    for (int i = 0; i < reps; ++i) (void)eager_step();
    dev.sync();
    auto t1 = Clock::now();
    eager = std::min(eager, std::chrono::duration<double, std::micro>(t1 - t0).count() / reps);
    t0 = Clock::now();
    for (int i = 0; i < reps; ++i) {
      mode_opt.prepare_step(kLr);
      (void)mode_step();
    }
    dev.sync();
    t1 = Clock::now();
    eager_mode = std::min(eager_mode, std::chrono::duration<double, std::micro>(t1 - t0).count() / reps);
    t0 = Clock::now();
    for (int i = 0; i < reps; ++i) {
      graph_opt.prepare_step(kLr);
      g.replay();
    }
    dev.sync();
    t1 = Clock::now();
    replay = std::min(replay, std::chrono::duration<double, std::micro>(t1 - t0).count() / reps);
  }
  const GraphStats s = g.stats();
  std::printf("graph bench on %s: MLP 784-256-10 training step (batch 64, cross-entropy, Adam), best of %d rounds x %d\n",
              ad.to_string().c_str(), rounds, reps);
  std::printf("  graph: %zu nodes (%zu writes, %zu raw), arena %.2f MiB (raw values %.2f MiB), native=%s%s%s\n", s.nodes,
              s.writes, s.raw_nodes, static_cast<double>(s.arena_bytes) / (1024.0 * 1024.0),
              static_cast<double>(s.arena_alloc_bytes) / (1024.0 * 1024.0), s.native ? "yes" : "no", s.native ? "" : " (",
              s.native ? "" : (s.fallback_reason + ")").c_str());
  std::printf("  eager   %8.1f us/step\n  replay  %8.1f us/step  (%.2fx; prepare_step included)\n", eager, replay,
              eager / replay);
  std::printf("  eager graph-mode step %8.1f us/step  (replay %.2fx of it; the same ops, prepare_step included)\n",
              eager_mode, eager_mode / replay);
  std::printf("  replay, groups untiled %8.1f us/step  (replay %.2fx of it; TENSOR_GRAPH_FUSE=0 at capture)\n", replay_unf,
              replay_unf / replay);
}

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
  // The same chain replayed by the thunk list (TENSOR_GRAPH_RAW=0 at capture): the
  // reference the raw path is measured against in the same run.
  // On vulkan (one pre-recorded command buffer either way) the reference is the closure
  // re-run instead (TENSOR_VK_GRAPH_NATIVE=0 at capture): what replay did before it.
  const char* ref_var = dev.to_string().rfind("vulkan", 0) == 0 ? "TENSOR_VK_GRAPH_NATIVE" : "TENSOR_GRAPH_RAW";
  auto g_thunk = capture_with_env(dev, ref_var, "0", chain);
  // On vulkan, also the command buffer with one dispatch per add (elementwise fusion off at
  // capture): what the fused program saves. The cpu ignores the variable.
  const bool vk = dev.to_string().rfind("vulkan", 0) == 0;
  const char* fuse_var = "TENSOR_VK_GRAPH_FUSION_MAX";
  auto g_unfused = capture_with_env(dev, fuse_var, "0", chain);
  double eager = 1e300, replay = 1e300, replay_thunk = 1e300, replay_unfused = 1e300;
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
    t0 = Clock::now();
    for (int i = 0; i < reps; ++i) g_thunk.replay();
    dev.sync();
    t1 = Clock::now();
    replay_thunk = std::min(replay_thunk, std::chrono::duration<double, std::nano>(t1 - t0).count() / (reps * kChain));
    if (!vk) continue;
    t0 = Clock::now();
    for (int i = 0; i < reps; ++i) g_unfused.replay();
    dev.sync();
    t1 = Clock::now();
    replay_unfused = std::min(replay_unfused, std::chrono::duration<double, std::nano>(t1 - t0).count() / (reps * kChain));
  }
  const GraphStats s = g.stats();
  const char* lp = std::getenv("LP_NUM_THREADS");
  std::printf("graph bench on %s (LP_NUM_THREADS=%s): chain of %d adds on [4], best of %d rounds x %d\n",
              dev.to_string().c_str(), lp ? lp : "unset", kChain, rounds, reps);
  std::printf("  graph: %zu nodes (%zu raw), arena %zu bytes, native=%s%s%s\n", s.nodes, s.raw_nodes, s.arena_alloc_bytes,
              s.native ? "yes" : "no", s.native ? "" : " (", s.native ? "" : (s.fallback_reason + ")").c_str());
  if (g_thunk.is_native())
    std::printf("  eager   %8.1f ns/op\n  replay  %8.1f ns/node  (%.2fx)\n  replay  %8.1f ns/node  (%.2fx; thunk list, %zu raw)\n",
                eager, replay, eager / replay, replay_thunk, eager / replay_thunk, g_thunk.stats().raw_nodes);
  else
    std::printf("  eager   %8.1f ns/op\n  replay  %8.1f ns/node  (%.2fx)\n  replay  %8.1f ns/node  (%.2fx; closure re-run)\n",
                eager, replay, eager / replay, replay_thunk, eager / replay_thunk);
  if (vk)
    std::printf("  replay  %8.1f ns/node  (%.2fx; one dispatch per add, %s=0 at capture)\n", replay_unfused,
                eager / replay_unfused, fuse_var);
  run_mlp_step_bench(dev, quick);
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
  // --only quant takes [--device D] [--quick]: the int8 product on the cpu (tools/bench/bench_quant.cpp),
  // another device's quant rows against its f32 ops (tools/bench/bench_quant_device.cpp).
  if (std::find(args.begin(), args.end(), "quant") != args.end()) {
    bool quick = false;
    std::string device = "cpu";
    for (std::size_t i = 0; i < args.size(); ++i) {
      if (args[i] == "--quick") quick = true;
      else if (args[i] == "--only" && i + 1 < args.size() && args[i + 1] == "quant") ++i;
      else if (args[i] == "--device" && i + 1 < args.size()) device = args[++i];
      else {
        std::fprintf(stderr, "bench --only quant: expected [--device D] [--quick]; got '%s'\n", args[i].c_str());
        return kExitUsage;
      }
    }
    return device == "cpu" ? tensor_bench::run_quant(quick) : tensor_bench::run_quant_device(device, quick);
  }
  // --only plugin takes [--device D] [--quick]: a plugin's device beside the cpu (tools/bench/bench_plugin.cpp).
  if (std::find(args.begin(), args.end(), "plugin") != args.end()) {
    bool quick = false;
    std::string device;
    for (std::size_t i = 0; i < args.size(); ++i) {
      if (args[i] == "--quick") quick = true;
      else if (args[i] == "--only" && i + 1 < args.size() && args[i + 1] == "plugin") ++i;
      else if (args[i] == "--device" && i + 1 < args.size()) device = args[++i];
      else {
        std::fprintf(stderr, "bench --only plugin: expected [--device D] [--quick]; got '%s'\n", args[i].c_str());
        return kExitUsage;
      }
    }
    return tensor_bench::run_plugin(device, quick);
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
