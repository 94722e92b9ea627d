// tensorctl bench --only quant --device D (D not the cpu: vulkan's quant.comp): q_matmul with
// a q8s weight (scales per output column) and a q4s weight (f16 scales per block [32, 1])
// against the same device's f32 matmul of the same shape, interleaved (reference first, each
// followed by a sync), medians of wall and process CPU time: the GEMV M = 1 (K = N = 1024 and
// 4096) and 256^3. Also quantize and dequantize of the 1024 x 1024 weight. On lavapipe (a CPU
// driver) the figures only say the shaders are not pathological against the tiled f32 kernel.
#include <cstdio>
#include <string>
#include <vector>

#include <tensor/quantization.hpp>
#include <tensor/tensor.hpp>

#include "tools/bench/bench_quant.hpp"
#include "tools/bench/bench_util.hpp"

namespace tensor_bench {
namespace {


void row(const char* what, const std::string& shape, int reps, const Paired& t) {
  std::printf("%-10s %-20s %5d %9.3f|%8.3f ms %9.3f|%8.3f ms %6.2fx\n", what, shape.c_str(), reps, t.f_wall * 1e3,
              t.f_cpu * 1e3, t.g_wall * 1e3, t.g_cpu * 1e3, t.f_wall / t.g_wall);
  std::fflush(stdout);
}

}  // namespace

int run_quant_device(const std::string& device, bool quick) {
  using namespace tensor;
  const Device dev = Device::parse(device);
  std::printf("tensorctl bench --only quant --device %s: q_matmul vs f32 matmul on %s\n", device.c_str(), dev.backend_name().c_str());
  std::printf("load average at start: %s\n", loadavg().c_str());
  std::printf("%-10s %-20s %5s %21s %21s %7s\n", "weight", "M x K x N", "reps", "f32 wall|cpu", "q wall|cpu", "f32/q");
  struct Case { std::size_t m, k, n; };
  const QuantScheme q8 = QuantScheme{}.with_value(QuantValue::Q8S).with_store(QuantStore::Native);
  const QuantScheme q4 = QuantScheme{}.with_value(QuantValue::Q4S).with_store(QuantStore::PackedU32);
  for (const Case c : {Case{1, 1024, 1024}, Case{1, 4096, 4096}, Case{256, 256, 256}}) {
    const auto x = Tensor<2>::random({c.m, c.k}, Distribution::uniform(-1, 1), dev);
    const auto w = Tensor<2>::random({c.k, c.n}, Distribution::uniform(-1, 1), dev);
    const std::string shape = std::to_string(c.m) + " x " + std::to_string(c.k) + " x " + std::to_string(c.n);
    const int reps = quick ? 3 : c.k >= 4096 ? 7 : 15;
    for (const auto& [name, s] : {std::pair{"q8s col", q8.per_block({static_cast<std::uint32_t>(c.k), 1}, ScaleDtype::F32)},
                                  std::pair{"q4s [32,1]", q4.per_block({32, 1}, ScaleDtype::F16)}}) {
      const auto wq = quantize_dynamic(w, s);
      (void)x.matmul(w);
      (void)quantization::q_matmul(x, wq);  // pipelines, once
      dev.sync();
      row(name, shape, reps, time_paired(dev, reps, [&] { (void)x.matmul(w); }, [&] { (void)quantization::q_matmul(x, wq); }));
    }
  }
  // quantize (given scales) and dequantize of a 1024 x 1024 weight, against a float copy of it
  // (x * 1.0: one elementwise pass over the same elements) as the same-run reference.
  {
    const auto w = Tensor<2>::random({1024, 1024}, Distribution::uniform(-1, 1), dev);
    const QuantScheme s = q8.per_block({1024, 1}, ScaleDtype::F32);
    const auto params = quantization::compute_q_params(s, quantization::compute_range(s, w));
    const auto wq = quantize(w, s, params);
    const int reps = quick ? 3 : 15;
    (void)(w * 1.0);
    dev.sync();
    row("quantize", "1024 x 1024 (ref x*1)", reps, time_paired(dev, reps, [&] { (void)(w * 1.0); }, [&] { (void)quantize(w, s, params); }));
    row("dequant", "1024 x 1024 (ref x*1)", reps, time_paired(dev, reps, [&] { (void)(w * 1.0); }, [&] { (void)dequantize(wq); }));
  }
  std::printf("load average at end: %s\n", loadavg().c_str());
  return 0;
}

}  // namespace tensor_bench
