// Benchmark-only: issue 12's table, libtensor beside libtorch in one process.
// Not built by meson (libtorch's headers are slow to compile and warn under -Werror):
// scripts/bench-torch.sh installs Debian's libtorch-dev and compiles this with g++
// against the built libtensor. Both libraries run on the same number of threads
// (2 unless --threads N); each row times the two alternately, rep by rep, after one
// warm-up each, and prints the medians and ratio = libtorch / libtensor (> 1: we are
// faster).
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <tensor/tensor.hpp>

namespace {

using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

struct Result {
  double ours, torch;
};

Result measure(int reps, const std::function<void()>& ours, const std::function<void()>& theirs) {
  ours();
  theirs();
  std::vector<double> a, b;
  for (int r = 0; r < reps; ++r) {
    auto t0 = Clock::now();
    theirs();
    b.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
    t0 = Clock::now();
    ours();
    a.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return {median(a), median(b)};
}

std::string fmt_time(double s) {
  char b[32];
  if (s >= 1e-3) std::snprintf(b, sizeof b, "%.2f ms", s * 1e3);
  else if (s >= 1e-6) std::snprintf(b, sizeof b, "%.1f us", s * 1e6);
  else std::snprintf(b, sizeof b, "%.0f ns", s * 1e9);
  return b;
}

void row(const std::string& name, Result r, double per = 1.0) {
  std::printf("| %s | %s | %s | %.2f |\n", name.c_str(), fmt_time(r.ours / per).c_str(), fmt_time(r.torch / per).c_str(),
              r.torch / r.ours);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 2, reps = 11;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::string(argv[i]) == "--threads") threads = std::atoi(argv[++i]);
    if (std::string(argv[i]) == "--reps") reps = std::atoi(argv[++i]);
  }
  at::set_num_threads(threads);
  at::set_num_interop_threads(1);
  torch::NoGradGuard no_grad;
  using tensor::Tensor;
  namespace act = tensor::activation;
  const auto dev = tensor::Device::default_device();
  auto sync = [&] { dev.sync(); };
  std::printf("libtensor vs libtorch %s, %d threads, median of %d interleaved rounds\n\n", TORCH_VERSION, threads, reps);
  std::printf("| workload | libtensor | libtorch | ratio |\n|---|---|---|---|\n");

  for (const std::size_t n : {64u, 256u, 1024u, 2048u}) {
    const auto a = Tensor<2>::full({n, n}, 0.5f), b = Tensor<2>::full({n, n}, 0.25f);
    const auto ta = torch::full({(long)n, (long)n}, 0.5f), tb = torch::full({(long)n, (long)n}, 0.25f);
    std::optional<Tensor<2>> c;
    torch::Tensor tc;
    row("matmul f32 n = " + std::to_string(n), measure(n <= 256 ? 3 * reps : reps, [&] { c = a.matmul(b); sync(); },
                                                        [&] { tc = torch::matmul(ta, tb); }));
  }
  const std::size_t n = 16u << 20;
  const auto ln = static_cast<long>(n);
  {
    auto a = Tensor<1>::full({n}, 1.0f);
    const auto b = Tensor<1>::full({n}, 2.0f);
    auto ta = torch::full({ln}, 1.0f);
    const auto tb = torch::full({ln}, 2.0f);
    std::optional<Tensor<1>> c;
    torch::Tensor tc;
    row("add 16M allocating", measure(reps, [&] { c = a + b; sync(); }, [&] { tc = ta + tb; }));
    c.reset();
    tc = torch::Tensor();
    row("add 16M in place", measure(reps, [&] { a = std::move(a) + b; sync(); }, [&] { ta.add_(tb); }));
    const auto e = Tensor<1>::full({n}, 0.5f);
    const auto te = torch::full({ln}, 0.5f);
    row("exp 16M", measure(reps, [&] { c = e.exp(); sync(); }, [&] { tc = te.exp(); }));
    c.reset();
    tc = torch::Tensor();
    row("sum 16M", measure(reps, [&] { auto s = b.sum(); sync(); }, [&] { auto s = tb.sum(); }));
    const auto g = Tensor<1>::random({n}, tensor::Distribution::normal(0, 2));
    const auto tg = torch::randn({ln}) * 2;
    row("gelu 16M", measure(reps, [&] { c = act::gelu(g); sync(); }, [&] { tc = torch::gelu(tg); }));
    row("sigmoid 16M", measure(reps, [&] { c = act::sigmoid(g); sync(); }, [&] { tc = torch::sigmoid(tg); }));
  }
  {
    const std::size_t m = 4096;
    const auto a = Tensor<2>::full({m, m}, 1.0f);
    const auto ta = torch::full({(long)m, (long)m}, 1.0f);
    std::optional<Tensor<1>> c;
    torch::Tensor tc;
    const std::array<std::int64_t, 1> flat{static_cast<std::int64_t>(m * m)};
    row("transpose -> contiguous 4096^2", measure(reps, [&] { c = a.transpose().reshape(flat); sync(); },
                                                   [&] { tc = ta.t().contiguous(); }));
  }
  {
    const auto a = Tensor<1>::full({4}, 1.0f), b = Tensor<1>::full({4}, 2.0f);
    const auto ta = torch::full({4}, 1.0f), tb = torch::full({4}, 2.0f);
    std::optional<Tensor<1>> c;
    torch::Tensor tc;
    const int iters = 1000;
    row("1,000 adds of [4] (per op)", measure(reps, [&] { for (int i = 0; i < iters; ++i) c = a + b; sync(); },
                                             [&] { for (int i = 0; i < iters; ++i) tc = ta + tb; }),
        iters);
  }
  {
    const std::size_t r = 4096, k = 1024;
    const auto x = Tensor<2>::random({r, k}, tensor::Distribution::normal(0, 2));
    const auto tx = torch::randn({(long)r, (long)k}) * 2;
    std::optional<Tensor<2>> c;
    torch::Tensor tc;
    row("sum_dim(0) of [4096, 1024]", measure(reps, [&] { c = x.sum_dim(0); sync(); }, [&] { tc = tx.sum(0, true); }));
    row("sum_dim(1) of [4096, 1024]", measure(reps, [&] { c = x.sum_dim(1); sync(); }, [&] { tc = tx.sum(1, true); }));
    row("argmax(1) of [4096, 1024]", measure(reps, [&] { auto i = x.argmax(1); sync(); }, [&] { tc = tx.argmax(1, true); }));
    row("argmax(0) of [4096, 1024]", measure(reps, [&] { auto i = x.argmax(0); sync(); }, [&] { tc = tx.argmax(0, true); }));
    row("max_dim(1) of [4096, 1024]", measure(reps, [&] { c = x.max_dim(1); sync(); }, [&] { tc = std::get<0>(tx.max(1, true)); }));
    row("softmax(1) of [4096, 1024]", measure(reps, [&] { c = act::softmax(x, 1); sync(); }, [&] { tc = torch::softmax(tx, 1); }));
    row("softmax(0) of [4096, 1024]", measure(reps, [&] { c = act::softmax(x, 0); sync(); }, [&] { tc = torch::softmax(tx, 0); }));
    row("log_softmax(1) of [4096, 1024]",
        measure(reps, [&] { c = act::log_softmax(x, 1); sync(); }, [&] { tc = torch::log_softmax(tx, 1); }));
    row("mean_dim(1) + var(1) of [4096, 1024]", measure(reps,
        [&] {
          auto mu = x.mean_dim(1);
          auto d = x - mu;
          c = (d * d).mean_dim(1);
          sync();
        },
        [&] { auto vm = torch::var_mean(tx, 1, /*unbiased=*/false, /*keepdim=*/true); }));
  }
  {
    const std::size_t r = 1024, k = 1024;
    const auto x = Tensor<2>::random({r, k}, tensor::Distribution::normal(0, 1));
    const auto tx = torch::randn({(long)r, (long)k});
    std::optional<Tensor<2>> c;
    torch::Tensor tc;
    row("sort(1) of [1024, 1024]", measure(reps, [&] { c = x.sort(1); sync(); }, [&] { tc = std::get<0>(tx.sort(1)); }));
    row("argsort(1) of [1024, 1024]", measure(reps, [&] { auto i = x.argsort(1); sync(); }, [&] { tc = tx.argsort(static_cast<int64_t>(1), false); }));
    row("topk(8, dim 1) of [1024, 1024]", measure(reps, [&] { auto t = x.topk(8, 1); sync(); }, [&] { tc = std::get<0>(tx.topk(8, 1)); }));
  }
  return 0;
}
