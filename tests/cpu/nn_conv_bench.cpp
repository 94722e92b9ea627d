// Timing of the CPU conv2d kernel (im2col + BLIS) beside a direct bli_sgemm of the same
// GEMM (M = C_out, K = C_in*kh*kw, N = batch*Ho*Wo) from the same run; prints GFLOP/s and
// the ratio. A benchmark (suite perf), never a test: `meson test -C build --benchmark nn_conv_bench`.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <string>
#include <vector>

#include "backends/cpu/nn/attention.hpp"
#include "backends/cpu/nn/conv.hpp"
#include "backends/cpu/nn/conv_direct.hpp"
#include "backends/cpu/nn/nn_gemm.hpp"
#include "backends/cpu/nn/pool.hpp"

namespace {

using tensor::Shape;
using namespace tensor::cpu::nn;

// NN_BENCH_CPU_TIME=1: process CPU time instead of wall time (on one thread, the kernel's
// own cost while other processes share the cores).
double now_seconds() {
  static const bool cpu = std::getenv("NN_BENCH_CPU_TIME") != nullptr;
  if (cpu) {
    timespec ts{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

template <class F>
double best_seconds(F&& f, int reps) {
  f();  // warm-up (page faults, BLIS packing buffers)
  double best = 1e30;
  for (int i = 0; i < reps; ++i) {
    const double t0 = now_seconds();
    f();
    best = std::min(best, now_seconds() - t0);
  }
  return best;
}

void row(std::size_t n, std::size_t cin, std::size_t hw, std::size_t cout, int reps, std::size_t groups = 1) {
  const auto g = conv_geom<2>("conv2d", Shape{n, cin, hw, hw}, Shape{cout, cin / groups, 3, 3},
                              tensor::nn::ConvOptions<2>{{1, 1}, {1, 1}, {1, 1}, static_cast<std::int64_t>(groups)});
  cin /= groups;  // the reduction per output is over C_in / groups
  std::vector<float> x(n * cin * groups * hw * hw), w(cout * cin * 9), b(cout), y(n * cout * g.out_size());
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 7) * 0.25f - 0.5f;
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i % 5) * 0.1f - 0.2f;
  const double flops = 2.0 * static_cast<double>(n * cout * g.out_size()) * static_cast<double>(cin * 9);
  const double t_conv = best_seconds([&] { conv_forward(g, x.data(), w.data(), b.data(), y.data()); }, reps);
  std::vector<float> dx(x.size()), dw(w.size());
  const double t_bx = best_seconds([&] { conv_backward_x(g, y.data(), w.data(), dx.data()); }, reps);
  const double t_bw = best_seconds([&] { conv_backward_weight(g, x.data(), y.data(), dw.data()); }, reps);
  // Same GEMM size straight into BLIS: [cout x K] @ [K x n*P] on all threads.
  const std::size_t K = cin * 9, N = n * g.out_size();
  std::vector<float> bm(K * N, 0.5f), cm(cout * N);
  const int threads = nn_threads();
  const double t_gemm = best_seconds(
      [&] { nn_gemm<float>(false, false, cout, N, K, 1.0f, w.data(), K, bm.data(), N, 0.0f, cm.data(), N, threads); }, reps);
  std::printf("conv2d [%zu,%zu,%zu,%zu] 3x3 -> %zu pad 1 groups %zu | fwd %8.2f ms %6.1f GFLOP/s | bli_sgemm %zux%zux%zu %8.2f ms %6.1f GFLOP/s | "
              "fwd/gemm %.2f | bwd_x %6.1f GFLOP/s | bwd_w %6.1f GFLOP/s\n",
              n, cin * groups, hw, hw, cout, groups, t_conv * 1e3, flops / t_conv * 1e-9, static_cast<std::size_t>(cout), K, N,
              t_gemm * 1e3, flops / t_gemm * 1e-9, t_gemm / t_conv, flops / t_bx * 1e-9, flops / t_bw * 1e-9);
}

// Fused attention [B, H, L, D] beside the two gemms of the unfused form (Q K^T and P V per
// (b, h), same flops) from the same run.
void attention_row(std::size_t B, std::size_t H, std::size_t L, std::size_t D, bool causal) {
  tensor::nn::AttentionModuleOptions o;
  o.is_causal = causal;
  const Shape qs{B, H, L, D};
  const auto g = attention_geom("attention", qs, qs, qs, nullptr, nullptr, o);
  std::vector<float> q(B * H * L * D), out(q.size()), sc(B * H * L * L);
  for (std::size_t i = 0; i < q.size(); ++i) q[i] = static_cast<float>(i % 13) * 0.05f - 0.3f;
  const double flops = 4.0 * static_cast<double>(B * H) * static_cast<double>(L * L * D);
  const double t = best_seconds([&] { attention_forward(g, q.data(), q.data(), q.data(), nullptr, nullptr, out.data()); }, 3);
  // Heads on OpenMP threads, one BLIS thread each (as the fused kernel splits its work).
  const double tg = best_seconds(
      [&] {
        const auto heads = static_cast<std::int64_t>(B * H);
#if TENSOR_HAVE_OPENMP
#pragma omp parallel for schedule(dynamic, 1)
#endif
        for (std::int64_t bh = 0; bh < heads; ++bh) {
          const float* p = q.data() + static_cast<std::size_t>(bh) * L * D;
          float* sp = sc.data() + static_cast<std::size_t>(bh) * L * L;
          nn_gemm<float>(false, true, L, L, D, 1.0f, p, D, p, D, 0.0f, sp, L, 1);
          nn_gemm<float>(false, false, L, D, L, 1.0f, sp, L, p, D, 0.0f, out.data() + static_cast<std::size_t>(bh) * L * D, D, 1);
        }
      },
      3);
  std::printf("attention [%zu,%zu,%zu,%zu]%s | fused %8.2f ms %6.1f GFLOP/s (dense-equivalent) | 2 x bli_sgemm per head (no softmax) %8.2f ms "
              "%6.1f GFLOP/s | fused/gemm %.2f\n",
              B, H, L, D, causal ? " causal" : "", t * 1e3, flops / t * 1e-9, tg * 1e3, flops / tg * 1e-9, tg / t);
}

// max_pool2d 2x2 stride 2 with indices and its backward on [n, c, hw, hw] (the CNN's pools).
void pool_row(std::size_t n, std::size_t c, std::size_t hw, int reps) {
  const auto g = max_pool_geom<2>("max_pool2d", Shape{n, c, hw, hw},
                                  tensor::nn::MaxPoolOptions<2>{{2, 2}, {2, 2}, {0, 0}, {1, 1}, false});
  std::vector<float> x(n * c * hw * hw), y(g.planes * g.out_h * g.out_w), dx(x.size());
  std::vector<std::int64_t> idx(y.size());
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 7919) % 1009) * 0.01f;
  const double tf = best_seconds([&] { max_pool2d_forward(g, x.data(), y.data(), idx.data()); }, reps);
  const double tb = best_seconds([&] { max_pool2d_backward(g, y.data(), idx.data(), dx.data()); }, reps);
  std::printf("max_pool2d 2x2 [%zu,%zu,%zu,%zu] | fwd (indices) %7.3f ms | bwd %7.3f ms\n", n, c, hw, hw, tf * 1e3, tb * 1e3);
}

// The forward of a conv with few input channels on the direct small-C_in kernel and on
// im2col + gemm (set_conv_direct(false)), 9 interleaved rounds of `reps` calls each; medians of the
// per-round best, wall and process CPU time.
void small_cin_row(std::size_t n, std::size_t cin, std::size_t hw, std::size_t cout, std::size_t k, std::int64_t pad,
                   std::int64_t stride, int reps) {
  const auto g = conv_geom<2>("conv2d", Shape{n, cin, hw, hw}, Shape{cout, cin, k, k},
                              tensor::nn::ConvOptions<2>{{stride, stride}, {pad, pad}, {1, 1}, 1});
  std::vector<float> x(n * cin * hw * hw), w(cout * cin * k * k), b(cout), y(n * cout * g.out_size());
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 7) * 0.25f - 0.5f;
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i % 5) * 0.1f - 0.2f;
  auto cpu_now = [] {
    timespec ts{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
  };
  auto wall_now = [] { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); };
  std::vector<double> wall[2], cpu[2];
  set_conv_direct(false);
  auto run = [&](int direct) {  // the direct kernel itself (also where the route leaves it), or im2col + gemm
    if (direct == 1) direct_small_cin_forward(g, x.data(), w.data(), b.data(), y.data());
    else conv_forward(g, x.data(), w.data(), b.data(), y.data());
  };
  for (int round = 0; round < 9; ++round)
    for (int direct = 1; direct >= 0; --direct) {
      run(direct);  // warm-up
      double bw = 1e30, bc = 1e30;
      for (int i = 0; i < reps; ++i) {
        const double w0 = wall_now(), c0 = cpu_now();
        run(direct);
        bw = std::min(bw, wall_now() - w0);
        bc = std::min(bc, cpu_now() - c0);
      }
      wall[direct].push_back(bw);
      cpu[direct].push_back(bc);
    }
  set_conv_direct(true);
  auto med = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  std::printf("conv2d [%zu,%zu,%zu,%zu] %zux%zu -> %zu pad %lld stride %lld | direct small-C_in (%s) %7.3f ms (cpu %7.3f) | "
              "im2col + gemm %7.3f ms (cpu %7.3f) | %.2fx wall, %.2fx cpu | route: %s\n",
              n, cin, hw, hw, k, k, cout, static_cast<long long>(pad), static_cast<long long>(stride),
              conv_direct_target().c_str(), med(wall[1]) * 1e3, med(cpu[1]) * 1e3, med(wall[0]) * 1e3, med(cpu[0]) * 1e3,
              med(wall[0]) / med(wall[1]), med(cpu[0]) / med(cpu[1]), direct_small_cin(g) ? "direct" : "im2col + gemm");
}

}  // namespace

// `nn_conv_bench small`: only the small-C_in rows (direct vs im2col + gemm).
// `nn_conv_bench cnn`: only the rows of the issue-15 CNN at batch 128 (convs and pools).
int main(int argc, char** argv) {
  const bool cnn_only = argc > 1 && std::string(argv[1]) == "cnn";
  std::printf("threads: %d\n", nn_threads());
  if (argc > 1 && std::string(argv[1]) == "small") {
    small_cin_row(500, 1, 28, 32, 3, 1, 1, 5);  // the Fashion-MNIST CNN's first conv at eval batch
    small_cin_row(128, 1, 28, 32, 3, 1, 1, 5);
    small_cin_row(64, 3, 32, 16, 5, 0, 1, 5);
    small_cin_row(64, 3, 32, 16, 5, 2, 2, 5);
    small_cin_row(8, 3, 224, 64, 7, 3, 2, 3);  // an ImageNet stem
    small_cin_row(1, 1, 28, 32, 3, 1, 1, 20);
    small_cin_row(256, 4, 7, 128, 3, 1, 1, 5);   // narrow rows (7 of 16 lanes), many outputs
    small_cin_row(256, 1, 7, 32, 3, 1, 1, 5);    // narrow rows, few outputs
    small_cin_row(128, 1, 17, 32, 3, 1, 1, 5);   // 17 columns: 16 + 1
    small_cin_row(128, 3, 12, 64, 3, 1, 1, 5);   // 12 columns
    small_cin_row(16, 2, 64, 256, 3, 1, 1, 3);  // many outputs, K = 18
    small_cin_row(16, 4, 64, 64, 7, 3, 1, 3);   // K = 196
    return 0;
  }
  if (!cnn_only) row(32, 64, 56, 64, 3);
  row(128, 1, 28, 32, 5);
  row(128, 32, 14, 64, 5);
  pool_row(128, 32, 28, 5);
  pool_row(128, 64, 14, 5);
  if (cnn_only) return 0;
  row(32, 128, 56, 128, 3, 128);  // depthwise (the gemm column is the dense-equivalent size)
  attention_row(8, 8, 512, 64, false);
  attention_row(8, 8, 512, 64, true);
  return 0;
}
