// tensorctl bench --only plugin [--device NAME:N]: the per-op cost of a backend plugin's device
// beside the built-in cpu backend's, interleaved in one run so both see the same load; medians
// of rounds. Rows: the [4] + [4] add (dispatch, the plugin adapter and the plugin's own kernel:
// issue 31's target is within 40 ns of the cpu's), then the kernels' speed: the add on [1M], a
// sum, and a transpose-then-add (the reference plugin has no layout entries, so the adapter runs
// the transpose on the host).
#include <chrono>
#include <cstdio>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <tensor/tensor.hpp>

#include "tools/bench/bench_plugin.hpp"
#include "tools/bench/bench_util.hpp"

namespace tensor_bench {
namespace {

using Clock = std::chrono::steady_clock;

bool is_builtin(const tensor::Device& d) {
  const std::string s = d.to_string();
  return s == "cpu" || s.rfind("cpu:", 0) == 0 || s.rfind("vulkan", 0) == 0;
}

// Seconds per call of f, median of `rounds` rounds of `iters` calls each, the two interleaved.
struct Pair {
  double a, b;
};
Pair interleaved(int rounds, int iters, const std::function<void()>& fa, const std::function<void()>& fb) {
  std::vector<double> ta, tb;
  for (int r = 0; r < rounds; ++r)
    for (int k = 0; k < 2; ++k) {
      const auto& f = k == 0 ? fa : fb;
      const auto t0 = Clock::now();
      for (int i = 0; i < iters; ++i) f();
      (k == 0 ? ta : tb).push_back(std::chrono::duration<double>(Clock::now() - t0).count() / iters);
    }
  return {median(ta), median(tb)};
}

}  // namespace

int run_plugin(const std::string& device, bool quick) {
  using namespace tensor;
  std::optional<Device> plug;
  for (const Device& d : Device::available())
    if (!is_builtin(d) && (device.empty() || d.to_string() == device)) {
      plug = d;
      break;
    }
  if (!plug) {
    std::string have;
    for (const Device& d : Device::available()) have += (have.empty() ? "" : ", ") + d.to_string();
    std::fprintf(stderr, "bench --only plugin: expected a plugin's device%s%s (TENSOR_BACKEND_PATH); got %s\n",
                 device.empty() ? "" : " named ", device.c_str(), have.c_str());
    return 2;
  }
  const Device cpu = Device::cpu();
  std::printf("tensorctl bench --only plugin: %s (%s) beside cpu (%s), interleaved rounds, medians\n",
              plug->to_string().c_str(), plug->backend_name().c_str(), cpu.backend_name().c_str());
  std::printf("load average at start: %s\n", loadavg().c_str());
  std::printf("%-34s %12s %12s %12s  %s\n", "row", "cpu", plug->to_string().c_str(), "difference", "target");
  const int rounds = quick ? 5 : 21;
  struct Row {
    const char* name;
    std::size_t n;
    int iters;
    int kind;  // 0 add, 1 sum, 2 transposed add
  };
  for (const Row row : {Row{"a + b, two [4] f32", 4, quick ? 2000 : 20000, 0}, Row{"a + b, two [1M] f32", 1u << 20, quick ? 5 : 40, 0},
                        Row{"sum of [1M] f32", 1u << 20, quick ? 5 : 40, 1},
                        Row{"a.T + b, [512, 512] f32", 512, quick ? 5 : 40, 2}}) {
    const auto make = [&](const Device& d) {
      const std::size_t cols = row.kind == 2 ? row.n : 1;  // [n, n] for the transposed add, else [n, 1]
      return std::pair{Tensor<2>::full({row.n, cols}, 1.0f, d), Tensor<2>::full({row.n, cols}, 2.0f, d)};
    };
    const auto [ca, cb] = make(cpu);
    const auto [pa, pb] = make(*plug);
    std::optional<Tensor<2>> c1, c2;
    std::optional<Tensor<1>> s1, s2;
    const auto op = [&](const Tensor<2>& a, const Tensor<2>& b, std::optional<Tensor<2>>& c, std::optional<Tensor<1>>& s) {
      if (row.kind == 0) c = a + b;
      else if (row.kind == 1) s = a.sum();
      else c = a.transpose() + b;
    };
    const auto fc = [&] { op(ca, cb, c1, s1); };
    const auto fp = [&] { op(pa, pb, c2, s2); };
    fc();
    fp();
    const Pair t = interleaved(rounds, row.iters, fc, fp);
    const bool overhead_row = row.n == 4;
    std::printf("%-34s %12s %12s %12s  %s\n", row.name, fmt_time(t.a).c_str(), fmt_time(t.b).c_str(),
                ((t.b >= t.a ? "+" : "-") + fmt_time(t.b >= t.a ? t.b - t.a : t.a - t.b)).c_str(),
                overhead_row ? (t.b - t.a <= 40e-9 ? "<= +40 ns: met" : "<= +40 ns: BELOW TARGET") : "(kernel speed)");
  }
  return 0;
}

}  // namespace tensor_bench
