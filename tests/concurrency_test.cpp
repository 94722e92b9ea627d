// Several threads creating, computing and reading tensors at once, on TENSOR_TEST_DEVICE
// (cpu when unset): independent tensors per thread, tensors shared read-only between
// threads (and left unchanged), handles made on one thread and dropped on another, and
// independent autodiff graphs per thread. Every value is checked against a scalar
// reference written here. CI runs this binary under ThreadSanitizer (.ci/run, the TSan
// leg), where a data race in the library is a failure even when the values come out right.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <tensor/tensor.hpp>

namespace {

using namespace tensor;

Device dev() {
  const char* env = std::getenv("TENSOR_TEST_DEVICE");
  return env && *env ? Device::parse(env) : Device::cpu();
}
bool on_cpu() { return dev() == Device::cpu(); }

constexpr int kThreads = 4;
// Few iterations: under TSan every access is instrumented, and lavapipe is slow.
int iterations() { return on_cpu() ? 12 : 3; }

// Collects mismatches from the workers; the test thread reports them.
struct Failures {
  std::mutex m;
  std::vector<std::string> msgs;
  void add(std::string s) {
    std::lock_guard<std::mutex> lock(m);
    msgs.push_back(std::move(s));
  }
  void report() {
    for (const std::string& s : msgs) ADD_FAILURE() << s;
  }
};

// Host [r, c] row-major matrix with values from (seed, i).
std::vector<float> host(std::size_t r, std::size_t c, int seed) {
  std::vector<float> v(r * c);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>((static_cast<int>(i) * 7 + seed * 13) % 17 - 8) / 4.0f;
  return v;
}
std::vector<float> ref_matmul(const std::vector<float>& a, const std::vector<float>& b, std::size_t n, std::size_t k,
                              std::size_t m) {
  std::vector<float> out(n * m, 0.0f);
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = 0; j < m; ++j) {
      double s = 0;
      for (std::size_t p = 0; p < k; ++p) s += static_cast<double>(a[i * k + p]) * b[p * m + j];
      out[i * m + j] = static_cast<float>(s);
    }
  return out;
}
Tensor<2> mat(const std::vector<float>& v, std::size_t r, std::size_t c) {
  return Tensor<2>::from_data(TensorData::from<float>(v, {r, c}), dev());
}
std::vector<float> vals(const Tensor<2>& t) { return t.into_data().to_vec<float>(); }
std::vector<float> vals1(const Tensor<1>& t) { return t.into_data().to_vec<float>(); }

// First index where got and want differ beyond tol, as a message; empty when equal.
std::string compare(const std::string& what, const std::vector<float>& got, const std::vector<float>& want,
                    double tol = 1e-4) {
  if (got.size() != want.size())
    return what + ": " + std::to_string(got.size()) + " values, expected " + std::to_string(want.size());
  for (std::size_t i = 0; i < got.size(); ++i)
    if (!(std::fabs(static_cast<double>(got[i]) - want[i]) <= tol * (1.0 + std::fabs(static_cast<double>(want[i])))))
      return what + "[" + std::to_string(i) + "] = " + std::to_string(got[i]) + ", expected " + std::to_string(want[i]);
  return {};
}

template <class F>
void run_threads(F&& body) {
  std::vector<std::thread> workers;
  for (int t = 0; t < kThreads; ++t) workers.emplace_back([&body, t] { body(t); });
  for (auto& w : workers) w.join();
}

// Each thread its own tensors: elementwise, matmul, a reduction along a dim, a view.
TEST(Concurrency, IndependentTensorsPerThread) {
  Failures f;
  run_threads([&](int t) {
    try {
      for (int it = 0; it < iterations(); ++it) {
        const int seed = t * 100 + it;
        const auto ha = host(5, 7, seed), hb = host(7, 3, seed + 1), hc = host(5, 7, seed + 2);
        const Tensor<2> a = mat(ha, 5, 7), b = mat(hb, 7, 3), c = mat(hc, 5, 7);
        std::vector<float> want_ew(ha.size()), want_sum(7, 0.0f);
        for (std::size_t i = 0; i < ha.size(); ++i) want_ew[i] = (ha[i] + hc[i]) * hc[i];
        for (std::size_t i = 0; i < 5; ++i)
          for (std::size_t j = 0; j < 7; ++j) want_sum[j] += ha[i * 7 + j];
        std::vector<float> want_t(ha.size());
        for (std::size_t i = 0; i < 5; ++i)
          for (std::size_t j = 0; j < 7; ++j) want_t[j * 5 + i] = ha[i * 7 + j];
        for (const std::string& m : {compare("(a + c) * c", vals((a + c) * c), want_ew),
                                     compare("a.matmul(b)", vals(a.matmul(b)), ref_matmul(ha, hb, 5, 7, 3)),
                                     compare("a.sum_dim(0)", vals(a.sum_dim(0)), want_sum),
                                     compare("a.transpose()", vals(a.transpose()), want_t)})
          if (!m.empty()) f.add("thread " + std::to_string(t) + ": " + m);
      }
    } catch (const std::exception& e) {
      f.add("thread " + std::to_string(t) + " threw: " + e.what());
    }
  });
  f.report();
}

// Tensors made once and read by every thread at the same time: ops on them, views of
// them, and their data; afterwards they still hold their values.
TEST(Concurrency, SharedReadOnlyTensors) {
  const auto ha = host(6, 4, 1), hb = host(4, 6, 2);
  const Tensor<2> a = mat(ha, 6, 4), b = mat(hb, 4, 6);
  const auto want_mm = ref_matmul(ha, hb, 6, 4, 6);
  std::vector<float> want_sq(ha.size()), want_row(4);
  for (std::size_t i = 0; i < ha.size(); ++i) want_sq[i] = ha[i] * ha[i];
  for (std::size_t j = 0; j < 4; ++j) want_row[j] = ha[2 * 4 + j];
  Failures f;
  run_threads([&](int t) {
    try {
      for (int it = 0; it < iterations(); ++it)
        for (const std::string& m : {compare("a.matmul(b)", vals(a.matmul(b)), want_mm),
                                     compare("a * a", vals(a * a), want_sq),
                                     compare("a.slice(2)", vals(a.slice({Slice::index(2)})), want_row),
                                     compare("a", vals(a), ha), compare("b", vals(b), hb)})
          if (!m.empty()) f.add("thread " + std::to_string(t) + ": " + m);
    } catch (const std::exception& e) {
      f.add("thread " + std::to_string(t) + " threw: " + e.what());
    }
  });
  f.report();
  EXPECT_EQ(vals(a), ha);
  EXPECT_EQ(vals(b), hb);
}

// Handles made on one thread, the last copy dropped on another (while others compute).
TEST(Concurrency, TensorsMadeOnOneThreadAndDroppedOnAnother) {
  std::vector<Tensor<1>> made;
  for (int i = 0; i < kThreads * 4; ++i)
    made.push_back(Tensor<1>::from_data(TensorData::from<float>({float(i), float(i) + 0.5f}), dev()));
  Failures f;
  run_threads([&](int t) {
    try {
      for (int k = t * 4; k < t * 4 + 4; ++k) {
        Tensor<1> mine = std::move(made[static_cast<std::size_t>(k)]);
        const std::string m = compare("made[" + std::to_string(k) + "] + 1", vals1(mine + 1.0),
                                      {float(k) + 1.0f, float(k) + 1.5f});
        if (!m.empty()) f.add("thread " + std::to_string(t) + ": " + m);
      }  // mine dies here, on this thread
    } catch (const std::exception& e) {
      f.add("thread " + std::to_string(t) + " threw: " + e.what());
    }
  });
  f.report();
}

// Each thread its own autodiff graph on the same autodiff device: loss = sum(x * x * w),
// so dloss/dx = 2 x w and dloss/dw = x^2.
TEST(Concurrency, IndependentAutodiffGraphsPerThread) {
  const Device ad = dev().autodiff();
  Failures f;
  run_threads([&](int t) {
    try {
      for (int it = 0; it < iterations(); ++it) {
        std::vector<float> hx(6), hw(6), want_gx(6), want_gw(6);
        for (std::size_t i = 0; i < 6; ++i) {
          hx[i] = static_cast<float>(static_cast<int>(i) - 2 + t) / 2.0f;
          hw[i] = static_cast<float>(it + 1) / static_cast<float>(i + 1);
          want_gx[i] = 2.0f * hx[i] * hw[i];
          want_gw[i] = hx[i] * hx[i];
        }
        auto x = Tensor<1>::from_data(TensorData::from<float>(hx), ad).require_grad();
        auto w = Tensor<1>::from_data(TensorData::from<float>(hw), ad).require_grad();
        Gradients g = (x * x * w).sum().backward();
        const auto gx = x.grad(g), gw = w.grad(g);
        if (!gx || !gw) {
          f.add("thread " + std::to_string(t) + ": a gradient is missing");
          continue;
        }
        for (const std::string& m : {compare("dloss/dx", vals1(*gx), want_gx), compare("dloss/dw", vals1(*gw), want_gw)})
          if (!m.empty()) f.add("thread " + std::to_string(t) + ": " + m);
      }
    } catch (const std::exception& e) {
      f.add("thread " + std::to_string(t) + " threw: " + e.what());
    }
  });
  f.report();
}

}  // namespace
