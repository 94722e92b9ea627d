// tensorctl bench --only quant: on the cpu, q_matmul (f32 activation x q8s weight, scales per
// output column; oneDNN's int8 matmul where built in) against our f32 matmul of the same
// shape: n = 1024 (M = N = K) and the GEMV M = 1, K = N = 4096, on 1 and 2 threads (the
// OpenMP count both routes use), interleaved so both see the same load; medians. Then the q4
// GEMV / GEMM (q4s weight, f16 scales per block of 32 along K: the fused kernel or the
// panels) at M = 1, 8, 16, 32, 512 (K = N = 4096) and the cnn's fc1, with the weight bytes
// each route reads. Prints the
// route q_matmul took (oneDNN's implementation name), the CPU's int8 / bf16 ISA flags and
// the load average.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <tensor/nn.hpp>
#include <tensor/quantization.hpp>
#include <tensor/tensor.hpp>

#include "backends/cpu/quant.hpp"
#include "backends/cpu/quant_q4.hpp"
#include "backends/cpu/quant_q8.hpp"
#include "tools/bench/bench_quant.hpp"

#if TENSOR_BENCH_HAVE_ONEDNN
#include <omp.h>
#endif

#include "tools/bench/bench_util.hpp"

namespace tensor_bench {
namespace {

using Clock = std::chrono::steady_clock;

// The int8 / bf16 flags of the first CPU in /proc/cpuinfo.
std::string isa_flags() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("flags", 0) != 0) continue;
    std::istringstream is(line.substr(line.find(':') + 1));
    std::string flag, out;
    while (is >> flag)
      if (flag == "avx2" || flag == "avx512f" || flag == "avx512bw" || flag == "avx512_vnni" || flag == "avx_vnni" ||
          flag == "avx512_bf16" || flag == "amx_tile" || flag == "amx_int8" || flag == "amx_bf16")
        out += (out.empty() ? "" : " ") + flag;
    return out.empty() ? "(none of avx2, avx512*, vnni, amx)" : out;
  }
  return "unknown";
}

void set_threads([[maybe_unused]] int n) {
#if TENSOR_BENCH_HAVE_ONEDNN
  omp_set_num_threads(n);
#endif
}

}  // namespace

int run_quant(bool quick) {
  using namespace tensor;
  const Device cpu = Device::cpu();
  std::printf("tensorctl bench --only quant: q_matmul (f32 x q8s weight, scales per output column) vs f32 matmul, cpu\n");
  std::printf("cpu flags: %s\n", isa_flags().c_str());
  std::printf("load average at start: %s\n", loadavg().c_str());
  std::printf("%-22s %4s %5s %12s %12s %7s  %s\n", "shape (M x K x N)", "thr", "reps", "f32 matmul", "q_matmul", "speedup",
              "q_matmul route");
  struct Case { std::size_t m, k, n; };
  for (const Case c : {Case{1024, 1024, 1024}, Case{1, 4096, 4096}, Case{8, 4096, 4096}}) {
    const auto x = Tensor<2>::random({c.m, c.k}, Distribution::uniform(-1, 1), cpu);
    const auto w = Tensor<2>::random({c.k, c.n}, Distribution::uniform(-1, 1), cpu);
    const QuantScheme s = QuantScheme{}.with_value(QuantValue::Q8S).with_store(QuantStore::Native).with_level(
        QuantLevel::block({static_cast<std::uint32_t>(c.k), 1}));
    const auto wq = quantize_dynamic(w, s);
    for (const int nt : {1, 2}) {
      set_threads(nt);
      (void)x.matmul(w);
      (void)quantization::q_matmul(x, wq);  // the plan: primitive and weight reorder, once
      const std::string route = cpu::last_q_matmul_route();
      const int reps = quick ? 3 : c.m == 1 ? 41 : 21;  // 11 moved the 1-thread 1024^3 ratio 5.7-6.4x between runs
      std::vector<double> tf, tq;
      for (int r = 0; r < reps; ++r) {
        auto t0 = Clock::now();
        auto y = x.matmul(w);
        cpu.sync();
        auto t1 = Clock::now();
        auto yq = quantization::q_matmul(x, wq);
        cpu.sync();
        auto t2 = Clock::now();
        tf.push_back(std::chrono::duration<double>(t1 - t0).count());
        tq.push_back(std::chrono::duration<double>(t2 - t1).count());
      }
      const double f = median(tf), q = median(tq);
      const std::string shape = std::to_string(c.m) + " x " + std::to_string(c.k) + " x " + std::to_string(c.n);
      std::printf("%-22s %4d %5d %9.3f ms %9.3f ms %6.2fx  %s\n", shape.c_str(), nt, reps, f * 1e3, q * 1e3, f / q, route.c_str());
      std::fflush(stdout);
    }
  }
  // The q8 GEMV's two routes (issue 32): the fused dpbusd kernel (quant_q8.hpp, its row
  // limit raised to kQ8MaxRows) against oneDNN's int8 matmul (the fused route turned off),
  // interleaved, K = N = 4096, q8s per column; the route q_matmul takes by default printed
  // (where oneDNN runs AMX-INT8 the fused route stops at 3 rows). TENSOR_BENCH_Q8="1,2,4,..."
  // replaces the M list.
  if (tensor::cpu::qdetail::q8_route_for(1) && tensor::cpu::int8_products_live()) {
    std::printf("%-22s %4s %5s %12s %12s %7s  %s\n", "q8s small M (M x K x N)", "thr", "reps", "onednn", "q8 fused",
                "speedup", "q_matmul route by default");
    std::vector<std::size_t> ms = {1, 3, 4, 8, 16};
    if (const char* env = std::getenv("TENSOR_BENCH_Q8")) {
      ms.clear();
      std::stringstream ss(env);
      std::string item;
      while (std::getline(ss, item, ','))
        if (const unsigned long v = std::strtoul(item.c_str(), nullptr, 10); v > 0) ms.push_back(v);
    }
    constexpr std::size_t kK = 4096, kN = 4096;
    const auto w = Tensor<2>::random({kK, kN}, Distribution::uniform(-1, 1), cpu);
    const auto wq = quantize_dynamic(w, QuantScheme{}.with_value(QuantValue::Q8S).with_store(QuantStore::Native).with_level(
                                            QuantLevel::block({static_cast<std::uint32_t>(kK), 1})));
    for (const std::size_t m : ms) {
      const auto x = Tensor<2>::random({m, kK}, Distribution::uniform(-1, 1), cpu);
      for (const int nt : {1, 2}) {
        set_threads(nt);
        auto onednn = [&] {
          tensor::cpu::qdetail::q8_disable(true);
          (void)quantization::q_matmul(x, wq);
          tensor::cpu::qdetail::q8_disable(false);
        };
        auto fused = [&] {
          tensor::cpu::qdetail::q8_set_max_rows(tensor::cpu::qdetail::kQ8MaxRows);
          (void)quantization::q_matmul(x, wq);
          tensor::cpu::qdetail::q8_set_max_rows(0);
        };
        onednn();
        fused();
        (void)quantization::q_matmul(x, wq);
        cpu.sync();
        const std::string route = cpu::last_q_matmul_route();
        const int reps = quick ? 3 : 41;
        const Paired t = time_paired(cpu, reps, onednn, fused);
        const std::string shape = std::to_string(m) + " x " + std::to_string(kK) + " x " + std::to_string(kN);
        std::printf("%-22s %4d %5d %9.3f ms %9.3f ms %6.2fx  %s\n", shape.c_str(), nt, reps, t.f_wall * 1e3, t.g_wall * 1e3,
                    t.f_wall / t.g_wall, route.c_str());
        std::fflush(stdout);
      }
    }
  }
  // The q4 weight-only GEMV (issue 32): x [M, 4096] times a q4s weight [4096, 4096] with f16
  // scales per block of 32 along K (tensorctl eval --quantize q4s's layout), M = 1 and 8,
  // against the f32 matmul of the same shape, interleaved; the bytes of weight each reads
  // (f32: 4 per weight; q4: the nibble pack and its scales, as the route reports them).
  std::printf("%-22s %4s %5s %12s %12s %7s  %s\n", "q4s GEMV (M x K x N)", "thr", "reps", "f32 matmul", "q4 matmul", "speedup",
              "q_matmul route; weight bytes read f32 | q4");
  // M = 1, 8, 16 on 1 and 2 threads; M = 32 and 512 (K = N = 4096) and the cnn's fc1 as
  // tensorctl eval --quantize q4s runs it ([500, 3136] x [3136, 128]) on 2 threads.
  // TENSOR_BENCH_Q4="M:K:N,..." replaces the list (2 threads each); TENSOR_BENCH_Q4_PORTABLE=1
  // forces the portable kernel's choice (the panel route above M = 16): a CPU without VNNI.
  struct Q4Case {
    std::size_t m, k, n;
    bool one_thread;
  };
  std::vector<Q4Case> q4_cases = {{1, 4096, 4096, true},  {8, 4096, 4096, true},   {16, 4096, 4096, true},
                                  {32, 4096, 4096, false}, {512, 4096, 4096, false}, {500, 3136, 128, false}};
  if (const char* env = std::getenv("TENSOR_BENCH_Q4")) {
    q4_cases.clear();
    std::stringstream ss(env);
    std::string item;
    while (std::getline(ss, item, ',')) {
      unsigned long long m = 0, k = 0, n = 0;
      if (std::sscanf(item.c_str(), "%llu:%llu:%llu", &m, &k, &n) == 3 && m > 0 && k % 32 == 0 && k > 0 && n > 0)
        q4_cases.push_back({m, k, n, false});
    }
  }
  const bool force_portable = std::getenv("TENSOR_BENCH_Q4_PORTABLE") != nullptr;
  tensor::cpu::qdetail::q4_force_portable(force_portable);
  for (const Q4Case qc : q4_cases) {
    const std::size_t m = qc.m, kK = qc.k, kN = qc.n;
    const auto x = Tensor<2>::random({m, kK}, Distribution::uniform(-1, 1), cpu);
    const auto w = Tensor<2>::random({kK, kN}, Distribution::uniform(-1, 1), cpu);
    const QuantScheme s = QuantScheme{}.with_value(QuantValue::Q4S).with_store(QuantStore::PackedU32).per_block(
        BlockSize({32, 1}), ScaleDtype::F16);
    const auto wq = quantize_dynamic(w, s);
    // the pack's bytes: K / 2 per column (nibbles) + an f16 scale per 32 codes (K * N / 16 bytes)
    const double q4_bytes = static_cast<double>(kK * kN) / 2.0 + static_cast<double>(kK * kN) / 32.0 * 2.0;
    for (const int nt : {1, 2}) {
      if (nt == 1 && !qc.one_thread) continue;
      set_threads(nt);
      (void)x.matmul(w);
      (void)quantization::q_matmul(x, wq);  // the nibble pack, once
      cpu.sync();
      const std::string route = cpu::last_q_matmul_route();
      const int reps = quick ? 3 : m > 64 ? 11 : m > 8 ? 21 : 41;
      const Paired t = time_paired(cpu, reps, [&] { (void)x.matmul(w); }, [&] { (void)quantization::q_matmul(x, wq); });
      const double f = t.f_wall, q = t.g_wall;
      const std::string shape = std::to_string(m) + " x " + std::to_string(kK) + " x " + std::to_string(kN);
      const double f32_mib = static_cast<double>(kK * kN * 4) / 1048576.0;
      if (route.starts_with("q4 "))
        std::printf("%-22s %4d %5d %9.3f ms %9.3f ms %6.2fx  %s; %.1f | %.1f MiB\n", shape.c_str(), nt, reps, f * 1e3, q * 1e3,
                    f / q, route.c_str(), f32_mib, q4_bytes / 1048576.0);
      else  // the dequantize route reads the i8 codes, writes the f32 weight and reads it back
        std::printf("%-22s %4d %5d %9.3f ms %9.3f ms %6.2fx  %s; %.1f | %.1f (i8 codes) + 2 x %.1f MiB\n", shape.c_str(), nt,
                    reps, f * 1e3, q * 1e3, f / q, route.c_str(), f32_mib, static_cast<double>(kK * kN) / 1048576.0, f32_mib);
      // the median CPU time of each (all threads): what the product costs under load
      std::printf("%-22s %4d %5s %9.3f ms %9.3f ms %6.2fx  cpu time (all threads)\n", "", nt, "", t.f_cpu * 1e3,
                  t.g_cpu * 1e3, t.f_cpu / t.g_cpu);
      std::fflush(stdout);
    }
  }
  tensor::cpu::qdetail::q4_force_portable(false);
  // conv2d with a q8s weight (scales per output channel) against the f32 conv2d: the second
  // conv of tensorctl's cnn at eval's batch (x [500, 32, 14, 14], w [64, 32, 3, 3], padding 1),
  // wall and process CPU time (all threads), interleaved; the route q_conv2d took.
  std::printf("%-30s %4s %5s %16s %16s %7s  %s\n", "conv2d x / w", "thr", "reps", "f32 wall|cpu", "q8s wall|cpu", "speedup",
              "q_conv2d route");
  {
    const auto x = Tensor<4>::random({500, 32, 14, 14}, Distribution::uniform(0, 1), cpu);
    const auto w = Tensor<4>::random({64, 32, 3, 3}, Distribution::uniform(-0.1, 0.1), cpu);
    const auto b = Tensor<1>::random({64}, Distribution::uniform(-0.1, 0.1), cpu);
    const auto wq = quantize_dynamic(w, QuantScheme{}.with_value(QuantValue::Q8S).with_store(QuantStore::Native).with_level(
                                            QuantLevel::block({1, 32, 3, 3})));
    nn::ConvOptions<2> o;
    o.padding = {1, 1};
    for (const int nt : {1, 2}) {
      set_threads(nt);
      (void)nn::conv2d(x, w, b, o);
      (void)nn::conv2d(x, wq, b, o);
      cpu.sync();
      const std::string route = cpu::last_q_conv2d_route();
      const int reps = quick ? 3 : 11;
      const Paired t = time_paired(cpu, reps, [&] { (void)nn::conv2d(x, w, b, o); }, [&] { (void)nn::conv2d(x, wq, b, o); });
      std::printf("%-30s %4d %5d %7.2f|%6.2f ms %7.2f|%6.2f ms %6.2fx  %s\n", "[500,32,14,14] / [64,32,3,3]", nt, reps,
                  t.f_wall * 1e3, t.f_cpu * 1e3, t.g_wall * 1e3, t.g_cpu * 1e3, t.f_wall / t.g_wall, route.c_str());
      std::fflush(stdout);
    }
  }
  std::printf("load average at end: %s\n", loadavg().c_str());
  return 0;
}

}  // namespace tensor_bench
