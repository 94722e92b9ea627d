// The Vulkan benchmark cases (issue: matmul n = 256...4096 f32/f16, elementwise and
// reductions on 16M, per-op overhead), each median beside a reference measured in
// the same run: matmul GFLOP/s beside the CPU backend's (BLIS) and, for f16, beside
// the other Vulkan path (cooperative matrices on vs off); elementwise and sum
// bandwidth beside a plain buffer copy (vkCmdCopyBuffer) on the same device; native
// f16 elementwise beside the f32-compute path; the per-op cost of a tiny add beside
// the CPU backend's; fused activations / clamp (one kernel) beside the default
// compositions of dispatch/defaults/; conv2d (forward and weight gradient) and fused
// attention beside the CPU backend on the same shapes. Sizes shrink on lavapipe (software) so a run
// stays short (the fused group keeps 16M).
#include "tools/bench/bench_vulkan.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include <tensor/tensor.hpp>

#include "backends/vulkan/runtime/context.hpp"
#include "dispatch/backend.hpp"
#include "dispatch/dispatch.hpp"

namespace tensor_bench {
namespace {

using namespace tensor;
namespace d = tensor::dispatch;
using DT = d::DispatchTensor;
using Clock = std::chrono::steady_clock;

const DeviceId kCpu{kCpuDeviceType, 0};

// Median seconds of `reps` runs of f (after one warm-up run).
double median_s(int reps, const std::function<void()>& f) {
  f();
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    const auto t0 = Clock::now();
    f();
    t.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

DT filled(DeviceId dev, const Shape& s, DType dt, double v) { return d::full(s, Scalar(v), dev, d::Kind::Float, dt); }

// Deterministic values in [-1, 1) (so f16 sums stay finite), on `dev`.
DT pattern(DeviceId dev, const Shape& s, DType dt, unsigned seed) {
  std::vector<float> v(s.num_elements());
  for (std::size_t i = 0; i < v.size(); ++i)
    v[i] = static_cast<float>((static_cast<unsigned>(i) * 2654435761u + seed * 97u) % 2048u) / 1024.0f - 1.0f;
  return d::from_data(TensorData::from(v, s).convert(dt), dev, d::Kind::Float);
}

void row(const std::string& name, const std::string& value, const std::string& ref, const std::string& ratio) {
  std::printf("%-40s %18s   %-34s %s\n", name.c_str(), value.c_str(), ref.c_str(), ratio.c_str());
}
std::string fmt1(const char* f, double v) {
  char b[96];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

double max_abs_diff(const TensorData& x, const TensorData& y) {
  const auto a = x.convert(DType::F32).to_vec<float>(), b = y.convert(DType::F32).to_vec<float>();
  double m = 0;
  for (std::size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(static_cast<double>(a[i]) - b[i]));
  return m;
}

}  // namespace

int run_vulkan(std::uint16_t index, bool quick) {
  const DeviceId dev{kVulkanDeviceType, index};
  if (d::device_count(kVulkanDeviceType) <= index) {
    std::printf("no Vulkan device %u: nothing to measure\n", static_cast<unsigned>(index));
    return 0;
  }
  vulkan::Context& ctx = *vulkan::context(index);
  ctx.ensure_init();
  const std::string name = d::backend_name(dev);
  const bool software = name.find("llvmpipe") != std::string::npos;
  const bool small = software || quick;
  std::printf("device: %s%s\n", name.c_str(), small ? " (software or --quick: reduced sizes)" : "");

  // The f16 matmul's first use runs the cooperative-matrix self-test; do it up front
  // so its state is known (and not timed).
  {
    DT a = filled(dev, Shape{32, 32}, DType::F16, 0.5), b = filled(dev, Shape{32, 32}, DType::F16, 0.25);
    DT c = d::matmul(a, b);
    d::sync(dev);
  }
  const bool coop_live = ctx.coop_state() == vulkan::CoopState::Live;
  std::printf("f16 arithmetic: %s\n", ctx.f16_arith() ? "native f16" : "f32 compute");
  std::printf("coopmat: %s%s\n",
              coop_live ? "live, " : ctx.coop_state() == vulkan::CoopState::Failed ? "off, " : "unavailable, ",
              ctx.coop_reason().c_str());
  std::printf("%-40s %18s   %-34s %s\n", "case", "median", "reference (same run)", "ratio");

  // ---- matmul ----
  const std::vector<std::size_t> sizes = small ? std::vector<std::size_t>{256, 512, 1024}
                                               : std::vector<std::size_t>{256, 512, 1024, 2048, 4096};
  for (DType dt : {DType::F32, DType::F16}) {
    if (!d::supports_dtype(dev, dt)) continue;
    for (std::size_t n : sizes) {
      const double flop = 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n);
      const int reps = small ? (n >= 1024 ? 3 : 5) : (n >= 2048 ? 5 : 10);
      DT a = filled(dev, Shape{n, n}, dt, 0.5), b = filled(dev, Shape{n, n}, dt, 0.25);
      const std::string label = std::string("matmul ") + std::string(dtype_name(dt)) + " n=" + std::to_string(n);
      const double tv = median_s(reps, [&] { DT c = d::matmul(a, b); d::sync(dev); });
      if (dt == DType::F16 && coop_live) {  // the same matmul on the tiled path
        ctx.set_coop_enabled(false);
        const double tt = median_s(reps, [&] { DT c = d::matmul(a, b); d::sync(dev); });
        ctx.set_coop_enabled(true);
        row(label + " coopmat", fmt1("%.1f GFLOP/s", flop / tv * 1e-9), fmt1("tiled %.1f GFLOP/s", flop / tt * 1e-9),
            fmt1("x%.2f", tt / tv));
        continue;
      }
      std::string ref = "-", ratio;
      if (n <= (small ? 1024u : 2048u)) {  // CPU reference (BLIS for f32); larger n would dominate the run
        DT ca = filled(kCpu, Shape{n, n}, dt, 0.5), cb = filled(kCpu, Shape{n, n}, dt, 0.25);
        const double tc = median_s(3, [&] { DT c = d::matmul(ca, cb); d::sync(kCpu); });
        ref = fmt1("cpu %.1f GFLOP/s", flop / tc * 1e-9);
        ratio = fmt1("x%.2f", tc / tv);
      }
      row(label + (dt == DType::F16 ? " tiled" : ""), fmt1("%.1f GFLOP/s", flop / tv * 1e-9), ref, ratio);
    }
  }
  if (coop_live) {  // agreement of the two f16 paths and the CPU on one odd-sized product
    const std::size_t m = 200, k = 264, n = 136;
    DT a = pattern(dev, Shape{m, k}, DType::F16, 1), b = pattern(dev, Shape{k, n}, DType::F16, 2);
    const TensorData on = d::read(d::matmul(a, b));
    ctx.set_coop_enabled(false);
    const TensorData off = d::read(d::matmul(a, b));
    ctx.set_coop_enabled(true);
    const TensorData cpu = d::read(d::matmul(d::to_device(a, kCpu), d::to_device(b, kCpu)));
    row("f16 200x264x136: coopmat vs tiled", fmt1("max|d| %.3g", max_abs_diff(on, off)),
        fmt1("coopmat vs cpu max|d| %.3g", max_abs_diff(on, cpu)), fmt1("tiled vs cpu %.3g", max_abs_diff(off, cpu)));
  }

  // ---- bandwidth: copy reference, elementwise, reductions ----
  const std::size_t n = small ? (std::size_t{4} << 20) : (std::size_t{16} << 20);
  // Appended piecewise: GCC 12 at -O3 flags " " + std::string with a false -Wrestrict.
  std::string tag = " ";
  tag.append(std::to_string(n >> 20)).append("M");
  const double bytes = static_cast<double>(n) * 4.0;
  const int reps = small ? 5 : 20;
  vulkan::BufRef src = ctx.allocate(n * 4), dst = ctx.allocate(n * 4);
  const double tcopy = median_s(reps, [&] { ctx.copy(*src, *dst, n * 4); ctx.sync(); });
  const double copy_gbs = 2.0 * bytes / tcopy * 1e-9;  // read + write
  const std::string copy_ref = fmt1("copy %.1f GB/s", copy_gbs);
  row("buffer copy" + tag + " f32", fmt1("%.1f GB/s", copy_gbs), "(reference)", "");
  auto pct = [&](double gbs) { return fmt1("%.0f%% of copy", 100.0 * gbs / copy_gbs); };
  DT x = filled(dev, Shape{n}, DType::F32, 1.5), y = filled(dev, Shape{n}, DType::F32, 2.5);
  const double tadd = median_s(reps, [&] { DT z = d::binary(OpCode::add, x, y); d::sync(dev); });
  row("add" + tag + " f32 (allocating)", fmt1("%.1f GB/s", 3.0 * bytes / tadd * 1e-9), copy_ref, pct(3.0 * bytes / tadd * 1e-9));
  const double texp = median_s(reps, [&] { DT z = d::unary(OpCode::exp, x); d::sync(dev); });
  row("exp" + tag + " f32 (allocating)", fmt1("%.1f GB/s", 2.0 * bytes / texp * 1e-9), copy_ref, pct(2.0 * bytes / texp * 1e-9));
  // Reductions over 16M f32 on every device (whole tensor, and along each dim of
  // [16384, 1024]; softmax rows), beside a copy of the same size; where the subgroup
  // path is in use, the shared-memory path of the same run as a second figure.
  {
    const std::size_t rn = std::size_t{16} << 20;
    const double rbytes = static_cast<double>(rn) * 4.0;
    const int rreps = small ? 9 : 20;
    vulkan::BufRef rsrc = ctx.allocate(rn * 4), rdst = ctx.allocate(rn * 4);
    const double trcopy = median_s(rreps, [&] { ctx.copy(*rsrc, *rdst, rn * 4); ctx.sync(); });
    const double rcopy_gbs = 2.0 * rbytes / trcopy * 1e-9;
    const std::string rcopy_ref = fmt1("copy %.1f GB/s", rcopy_gbs);
    row("buffer copy 16M f32", fmt1("%.1f GB/s", rcopy_gbs), "(reference)", "");
    DT r = filled(dev, Shape{rn}, DType::F32, 1.5);
    const std::int64_t rc[2] = {static_cast<std::int64_t>(rn >> 10), 1024};
    DT r2 = d::reshape(OpCode::reshape, r, rc);
    const bool sub = ctx.subgroup_on();
    struct Case { const char* label; std::function<DT()> run; };
    const Case cases[] = {
        {"sum 16M f32", [&] { return d::reduce(OpCode::sum, r); }},
        {"max 16M f32", [&] { return d::reduce(OpCode::max, r); }},
        {"argmax 16M f32", [&] { return d::dim_index(OpCode::argmax, r, 0); }},
        {"sum_dim 1 16Kx1K f32", [&] { return d::reduce_dim(OpCode::sum_dim, r2, 1); }},
        {"sum_dim 0 16Kx1K f32", [&] { return d::reduce_dim(OpCode::sum_dim, r2, 0); }},
        {"max_dim 0 16Kx1K f32", [&] { return d::reduce_dim(OpCode::max_dim, r2, 0); }},
        {"argmax dim 0 16Kx1K f32", [&] { return d::dim_index(OpCode::argmax, r2, 0); }},
        {"max_dim 1 16Kx1K f32", [&] { return d::reduce_dim(OpCode::max_dim, r2, 1); }},
        {"argmax dim 1 16Kx1K f32", [&] { return d::dim_index(OpCode::argmax, r2, 1); }},
        {"softmax dim 1 16Kx1K f32", [&] { return d::reduce_dim(OpCode::softmax, r2, 1); }},
        // What max and max_dim were composed of before they were native.
        {"max 16M f32 as argmax+gather", [&] { return d::gather(r, 0, d::dim_index(OpCode::argmax, r, 0)); }},
        {"max_dim 1 as argmax+gather", [&] { return d::gather(r2, 1, d::dim_index(OpCode::argmax, r2, 1)); }},
    };
    for (const Case& k : cases) {
      const double t = median_s(rreps, [&] { DT z = k.run(); d::sync(dev); });
      const double gbs = rbytes / t * 1e-9;
      row(std::string(k.label) + (sub ? " (subgroup)" : " (shared mem)"), fmt1("%.1f GB/s", gbs), rcopy_ref,
          fmt1("%.0f%% of copy", 100.0 * gbs / rcopy_gbs));
      if (!sub) continue;
      ctx.set_subgroup(false);
      const double ts = median_s(rreps, [&] { DT z = k.run(); d::sync(dev); });
      ctx.set_subgroup(true);
      row(std::string(k.label) + " (shared mem)", fmt1("%.1f GB/s", rbytes / ts * 1e-9), rcopy_ref,
          fmt1("subgroup x%.2f", ts / t));
    }
  }
  if (d::supports_dtype(dev, DType::F16)) {
    DT h1 = filled(dev, Shape{n}, DType::F16, 1.5), h2 = filled(dev, Shape{n}, DType::F16, 2.5);
    const bool native = ctx.f16_arith();
    const double th = median_s(reps, [&] { DT z = d::binary(OpCode::mul, h1, h2); d::sync(dev); });
    std::string ref = "(no native f16 on this device)", ratio;
    if (native) {
      ctx.set_f16_arith(false);
      const double tf = median_s(reps, [&] { DT z = d::binary(OpCode::mul, h1, h2); d::sync(dev); });
      ctx.set_f16_arith(true);
      ref = fmt1("f32-compute path %.2f ms", tf * 1e3);
      ratio = fmt1("x%.2f", tf / th);
    }
    row("mul" + tag + " f16 (" + (native ? "native f16" : "f32 compute") + ")", fmt1("%.2f ms", th * 1e3), ref, ratio);
  }

  // ---- fused activations vs the default compositions (dispatch/defaults/'s own
  // functions, from a Backend filled by install_defaults: each runs over this
  // device's native entries) on 16M f32, beside a buffer copy of the same size ----
  {
    const std::size_t fn = std::size_t{16} << 20;
    const std::string ftag = " 16M f32";
    const int freps = small ? 3 : 10;
    vulkan::BufRef fsrc = ctx.allocate(fn * 4), fdst = ctx.allocate(fn * 4);
    const double tfcopy = median_s(freps, [&] { ctx.copy(*fsrc, *fdst, fn * 4); ctx.sync(); });
    row("buffer copy" + ftag, fmt1("%.2f ms", tfcopy * 1e3), "(reference)", "");
    d::Backend defaults("defaults", 0);
    d::install_defaults(defaults);
    DT fx = pattern(dev, Shape{fn}, DType::F32, 3);
    auto take = [](DT t) { return t.take(); };
    struct Case {
      const char* name;
      std::function<DT()> native;
      std::function<d::Prim()> composed;
    };
    const Case cases[] = {
        {"gelu", [&] { return d::unary(OpCode::gelu, fx); },
         [&] { return defaults.get<d::Family::Unary>(OpCode::gelu)(take(fx)); }},
        {"sigmoid", [&] { return d::unary(OpCode::sigmoid, fx); },
         [&] { return defaults.get<d::Family::Unary>(OpCode::sigmoid)(take(fx)); }},
        {"clamp", [&] { return d::clamp(OpCode::clamp, fx, Scalar(-0.5), Scalar(0.5)); },
         [&] { return defaults.get<d::Family::Clamp>(OpCode::clamp)(take(fx), Scalar(-0.5), Scalar(0.5)); }},
        {"relu", [&] { return d::unary(OpCode::relu, fx); },
         [&] { return defaults.get<d::Family::Unary>(OpCode::relu)(take(fx)); }},
    };
    for (const Case& c : cases) {
      const double tn = median_s(freps, [&] { DT z = c.native(); d::sync(dev); });
      const double td = median_s(freps, [&] { d::Prim z = c.composed(); d::sync(dev); });
      row(std::string(c.name) + ftag + " fused", fmt1("%.2f ms", tn * 1e3),
          fmt1("default %.2f ms, copy ", td * 1e3) + fmt1("%.2f ms", tfcopy * 1e3), fmt1("x%.2f vs default", td / tn));
    }
  }

  // ---- module ops: conv2d forward / weight gradient and fused attention, beside the CPU
  // backend on the same shapes ----
  {
    const std::size_t n = small ? 2 : 8, c = small ? 16 : 64, hw = small ? 16 : 56, L = small ? 128 : 1024;
    const int mreps = small ? 3 : 10;
    d::ConvArgs ca;
    ca.padding = {1, 1, 0};
    const Shape xs{n, c, hw, hw}, ws{c, c, 3, 3}, qs{n, 4, L, 64};
    // Each case returns its median seconds on the device it is given.
    struct Case { std::string name; double flop; std::function<double(DeviceId)> run; };
    auto on = [&](DeviceId dv, const Shape& s, unsigned seed) { return pattern(dv, s, DType::F32, seed); };
    const double conv_flop = 2.0 * static_cast<double>(n * c * hw * hw) * static_cast<double>(c * 9);
    const double att_flop = 4.0 * static_cast<double>(n * 4) * static_cast<double>(L * L) * 64.0;
    const std::string cs = "[" + std::to_string(n) + "," + std::to_string(c) + "," + std::to_string(hw) + "^2] 3x3";
    const Case cases[] = {
        {"conv2d f32 " + cs, conv_flop,
         [&](DeviceId dv) {
           DT x = on(dv, xs, 1), w = on(dv, ws, 2);
           return median_s(mreps, [&] { DT y = d::conv(OpCode::conv2d, x, w, DT(), ca); d::sync(dv); });
         }},
        {"conv2d weight grad f32 " + cs, conv_flop,
         [&](DeviceId dv) {
           DT x = on(dv, xs, 1), dy = on(dv, xs, 3);
           return median_s(mreps, [&] { DT g = d::conv_backward_weight(x, dy, ws, ca); d::sync(dv); });
         }},
        {"attention f32 L=" + std::to_string(L) + " D=64", att_flop,
         [&](DeviceId dv) {
           DT q = on(dv, qs, 4), k = on(dv, qs, 5), v = on(dv, qs, 6);
           return median_s(mreps, [&] { DT y = d::attention(q, k, v, DT(), DT(), {}); d::sync(dv); });
         }},
    };
    for (const Case& k : cases) {
      const double tv = k.run(dev), tc = k.run(kCpu);
      row(k.name, fmt1("%.1f GFLOP/s", k.flop / tv * 1e-9), fmt1("cpu %.1f GFLOP/s", k.flop / tc * 1e-9),
          fmt1("x%.2f", tc / tv));
    }
  }

  // ---- per-op overhead ----
  DT s1 = filled(dev, Shape{4}, DType::F32, 1.0), s2 = filled(dev, Shape{4}, DType::F32, 2.0);
  const int ops = 1000;
  const double tloop = median_s(5, [&] {
    for (int i = 0; i < ops; ++i) { DT z = d::binary(OpCode::add, s1, s2); }
    d::sync(dev);
  });
  const double tone = median_s(50, [&] { DT z = d::binary(OpCode::add, s1, s2); d::sync(dev); });
  DT c1 = filled(kCpu, Shape{4}, DType::F32, 1.0), c2 = filled(kCpu, Shape{4}, DType::F32, 2.0);
  const double tcpu = median_s(5, [&] { for (int i = 0; i < ops; ++i) { DT z = d::binary(OpCode::add, c1, c2); } });
  row("add [4] f32, 1000 queued + 1 wait", fmt1("%.2f us/op", tloop / ops * 1e6), fmt1("cpu %.3f us/op", tcpu / ops * 1e6),
      fmt1("x%.0f", tloop / tcpu));
  row("add [4] f32 + wait (round trip)", fmt1("%.1f us", tone * 1e6), fmt1("cpu %.3f us", tcpu / ops * 1e6), "");
  return 0;
}

}  // namespace tensor_bench
