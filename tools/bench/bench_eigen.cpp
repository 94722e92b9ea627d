// Benchmark-only: libtensor beside Eigen 3.4 in one process, on the rows of issue 33 (f32
// products, allocating elementwise ops, sum, sum_dim, softmax, mean + var, transpose,
// a tiny add). Not built by meson: scripts/bench-eigen.sh installs Debian's
// libeigen3-dev (header-only) and compiles this with g++ -O3 -march=native against the
// built libtensor.
//
// Eigen runs its products on Matrix (row-major, `noalias()`, Eigen's own OpenMP threads:
// Eigen::setNbThreads) and everything else on the Tensor module (row-major tensors
// evaluated on a ThreadPoolDevice); both libraries get the same thread count
// (OMP_NUM_THREADS, 2 unless set). Each row times the two alternately, rep by rep
// (Eigen first in even rounds, libtensor first in odd ones), after one warm-up each, and
// prints the medians and ratio = Eigen / libtensor (> 1: libtensor is faster). Every
// libtensor op allocates its result, so Eigen's rows allocate theirs inside the timed
// call too (a Tensor constructed per call), except the in-place product, which writes a
// preallocated matrix (Eigen's natural form; libtensor's product allocates).
#define EIGEN_USE_THREADS
#include <Eigen/Dense>
#include <unsupported/Eigen/CXX11/Tensor>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <tensor/activation.hpp>
#include <tensor/tensor.hpp>

#include "tools/bench/bench_util.hpp"

namespace {

using Clock = std::chrono::steady_clock;
using tensor_bench::fmt_time;
using tensor_bench::median;

template <int R>
using ETensor = Eigen::Tensor<float, R, Eigen::RowMajor>;
using EMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

struct Result {
  double ours, eigen;
};

Result measure(int reps, const std::function<void()>& ours, const std::function<void()>& eigen) {
  ours();
  eigen();
  std::vector<double> a, b;
  auto timed = [](const std::function<void()>& f, std::vector<double>& into) {
    const auto t0 = Clock::now();
    f();
    into.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  };
  for (int r = 0; r < reps; ++r) {
    if (r % 2 == 0) {
      timed(eigen, b);
      timed(ours, a);
    } else {
      timed(ours, a);
      timed(eigen, b);
    }
  }
  return {median(a), median(b)};
}

std::string g_filter;  // --filter SUBSTR: only rows whose name contains it

void row(const std::string& name, const std::function<Result()>& run, double per = 1.0) {
  if (!g_filter.empty() && name.find(g_filter) == std::string::npos) return;
  const Result r = run();
  std::printf("| %s | %s | %s | %.2f |\n", name.c_str(), fmt_time(r.ours / per).c_str(), fmt_time(r.eigen / per).c_str(),
              r.eigen / r.ours);
  std::fflush(stdout);
}

volatile float g_sink = 0;

void table(int reps, int threads) {
  using tensor::Tensor;
  namespace act = tensor::activation;
  const auto dev = tensor::Device::default_device();
  auto sync = [&] { dev.sync(); };
  Eigen::ThreadPool pool(threads);
  Eigen::ThreadPoolDevice ed(&pool, threads);
  Eigen::setNbThreads(threads);
  std::printf("| workload | libtensor | Eigen | ratio |\n|---|---|---|---|\n");

  for (const std::size_t n : {64u, 256u, 1024u}) {
    const auto a = Tensor<2>::full({n, n}, 0.5f), b = Tensor<2>::full({n, n}, 0.25f);
    const auto en = static_cast<Eigen::Index>(n);
    const EMatrix ea = EMatrix::Constant(en, en, 0.5f), eb = EMatrix::Constant(en, en, 0.25f);
    EMatrix ec(en, en);
    std::optional<Tensor<2>> c;
    row("matmul f32 n = " + std::to_string(n),
        [&] { return measure(n <= 256 ? 3 * reps : reps, [&] { c = a.matmul(b); sync(); }, [&] { ec.noalias() = ea * eb; }); });
  }

  const std::size_t n = 16u << 20;
  const auto ln = static_cast<Eigen::Index>(n);
  {
    const auto a = Tensor<1>::full({n}, 1.0f), b = Tensor<1>::full({n}, 2.0f);
    ETensor<1> ea(ln), eb(ln);
    ea.setConstant(1.0f);
    eb.setConstant(2.0f);
    std::optional<Tensor<1>> c;
    row("add 16M allocating", [&] {
      return measure(reps, [&] { c = a + b; sync(); }, [&] {
        ETensor<1> ec(ln);
        ec.device(ed) = ea + eb;
        g_sink = ec(0);
      });
    });
    row("mul 16M allocating", [&] {
      return measure(reps, [&] { c = a * b; sync(); }, [&] {
        ETensor<1> ec(ln);
        ec.device(ed) = ea * eb;
        g_sink = ec(0);
      });
    });
    row("exp 16M", [&] {
      return measure(reps, [&] { c = a.exp(); sync(); }, [&] {
        ETensor<1> ec(ln);
        ec.device(ed) = ea.exp();
        g_sink = ec(0);
      });
    });
    row("sigmoid 16M", [&] {
      return measure(reps, [&] { c = act::sigmoid(a); sync(); }, [&] {
        ETensor<1> ec(ln);
        ec.device(ed) = ea.sigmoid();
        g_sink = ec(0);
      });
    });
    c.reset();
    row("sum 16M", [&] {
      return measure(reps, [&] { auto s = b.sum(); sync(); }, [&] {
        ETensor<0> s;
        s.device(ed) = eb.sum();
        g_sink = s();
      });
    });
  }
  {
    const std::size_t m = 4096;
    const auto em = static_cast<Eigen::Index>(m);
    const auto a = Tensor<2>::full({m, m}, 1.0f);
    ETensor<2> ea(em, em);
    ea.setConstant(1.0f);
    std::optional<Tensor<1>> c;
    const std::array<std::int64_t, 1> flat{static_cast<std::int64_t>(m * m)};
    const Eigen::array<int, 2> swap{1, 0};
    row("transpose -> contiguous 4096^2", [&] {
      return measure(reps, [&] { c = a.transpose().reshape(flat); sync(); }, [&] {
        ETensor<2> ec(em, em);
        ec.device(ed) = ea.shuffle(swap);
        g_sink = ec(0, 0);
      });
    });
  }
  {
    const std::size_t r = 4096, k = 1024;
    const auto er = static_cast<Eigen::Index>(r), ek = static_cast<Eigen::Index>(k);
    const auto x = Tensor<2>::random({r, k}, tensor::Distribution::normal(0, 2));
    ETensor<2> ex(er, ek);
    {
      const auto v = x.to_vec<float>();  // the same values in both libraries
      std::copy(v.begin(), v.end(), ex.data());
    }
    std::optional<Tensor<2>> c;
    const Eigen::array<int, 1> d0{0}, d1{1};
    row("sum_dim(0) of [4096, 1024]", [&] {
      return measure(reps, [&] { c = x.sum_dim(0); sync(); }, [&] {
        ETensor<1> s(ek);
        s.device(ed) = ex.sum(d0);
        g_sink = s(0);
      });
    });
    row("sum_dim(1) of [4096, 1024]", [&] {
      return measure(reps, [&] { c = x.sum_dim(1); sync(); }, [&] {
        ETensor<1> s(er);
        s.device(ed) = ex.sum(d1);
        g_sink = s(0);
      });
    });
    // softmax along dim 1 as Eigen expressions: row max, exp of the shifted values, row
    // sums, the quotient (three passes, each on the pool).
    const Eigen::array<Eigen::Index, 2> col{er, 1}, across{1, ek}, row_v{1, ek}, down{er, 1};
    row("softmax(1) of [4096, 1024]", [&] {
      return measure(reps, [&] { c = act::softmax(x, 1); sync(); }, [&] {
        ETensor<2> mx(er, 1), e(er, ek), s(er, 1), out(er, ek);
        mx.device(ed) = ex.maximum(d1).reshape(col);
        e.device(ed) = (ex - mx.broadcast(across)).exp();
        s.device(ed) = e.sum(d1).reshape(col);
        out.device(ed) = e / s.broadcast(across);
        g_sink = out(0, 0);
      });
    });
    row("softmax(0) of [4096, 1024]", [&] {
      return measure(reps, [&] { c = act::softmax(x, 0); sync(); }, [&] {
        ETensor<2> mx(1, ek), e(er, ek), s(1, ek), out(er, ek);
        mx.device(ed) = ex.maximum(d0).reshape(row_v);
        e.device(ed) = (ex - mx.broadcast(down)).exp();
        s.device(ed) = e.sum(d0).reshape(row_v);
        out.device(ed) = e / s.broadcast(down);
        g_sink = out(0, 0);
      });
    });
    row("mean_dim(1) + var(1) of [4096, 1024]", [&] {
      return measure(reps,
                     [&] {
                       auto mu = x.mean_dim(1);
                       auto d = x - mu;
                       c = (d * d).mean_dim(1);
                       sync();
                     },
                     [&] {
                       ETensor<2> mu(er, 1), var(er, 1);
                       mu.device(ed) = ex.mean(d1).reshape(col);
                       var.device(ed) = (ex - mu.broadcast(across)).square().mean(d1).reshape(col);
                       g_sink = var(0, 0);
                     });
    });
  }
  {
    // Dispatch-free on Eigen's side (an expression compiled for [4]); libtensor's
    // answer to this row is graph replay, not this issue.
    const auto a = Tensor<1>::full({4}, 1.0f), b = Tensor<1>::full({4}, 2.0f);
    ETensor<1> ea(4), eb(4);
    ea.setConstant(1.0f);
    eb.setConstant(2.0f);
    std::optional<Tensor<1>> c;
    const int iters = 1000;
    row("1,000 adds of [4] (per op; no dispatch in Eigen)", [&] {
      return measure(reps, [&] { for (int i = 0; i < iters; ++i) c = a + b; sync(); }, [&] {
        for (int i = 0; i < iters; ++i) {
          ETensor<1> ec(4);
          ec = ea + eb;
          g_sink = ec(3);
        }
      });
    }, iters);
  }
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 11;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::string(argv[i]) == "--reps") reps = std::atoi(argv[++i]);
    if (std::string(argv[i]) == "--filter") g_filter = argv[++i];
  }
  const char* env = std::getenv("OMP_NUM_THREADS");
  const int threads = env != nullptr && std::atoi(env) > 0 ? std::atoi(env) : 2;
  std::printf("libtensor vs Eigen %d.%d.%d, %d threads, median of %d interleaved rounds, load %s\n\n", EIGEN_WORLD_VERSION,
              EIGEN_MAJOR_VERSION, EIGEN_MINOR_VERSION, threads, reps, tensor_bench::loadavg().c_str());
  table(reps, threads);
  return 0;
}
