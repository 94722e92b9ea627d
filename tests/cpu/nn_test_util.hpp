// Helpers of the nn kernel tests: deterministic data, tolerant comparison, and a central
// finite-difference gradient of a scalar function of one buffer.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace tensor::cpu::nn::test {

// Values in [-1, 1) from a fixed LCG (no std::random: same values on every platform).
inline std::vector<double> rnd(std::size_t n, std::uint32_t seed) {
  std::vector<double> v(n);
  std::uint32_t s = seed * 2654435761u + 12345u;
  for (auto& x : v) {
    s = s * 1664525u + 1013904223u;
    x = static_cast<double>(s >> 8) / static_cast<double>(1u << 23) - 1.0;
  }
  return v;
}

template <class T>
std::vector<T> cast(const std::vector<double>& v) {
  return std::vector<T>(v.begin(), v.end());
}

template <class A, class B>
void expect_close(const std::vector<A>& got, const std::vector<B>& want, double tol, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double g = static_cast<double>(got[i]), w = static_cast<double>(want[i]);
    if (std::isnan(w)) {
      EXPECT_TRUE(std::isnan(g)) << what << " at " << i;
      continue;
    }
    if (std::isinf(w)) {
      EXPECT_EQ(g, w) << what << " at " << i;
      continue;
    }
    ASSERT_NEAR(g, w, tol * (1.0 + std::fabs(w))) << what << " at " << i;
  }
}

// d f / d x[i] for every i by central differences (f64).
inline std::vector<double> numeric_grad(std::vector<double> x, const std::function<double(const std::vector<double>&)>& f,
                                        double h = 1e-6) {
  std::vector<double> g(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double x0 = x[i];
    x[i] = x0 + h;
    const double fp = f(x);
    x[i] = x0 - h;
    const double fm = f(x);
    x[i] = x0;
    g[i] = (fp - fm) / (2 * h);
  }
  return g;
}

// Checks analytic[i] against a central difference of f at up to max_points indices spread
// over x (every index when x is small). For functions linear in x (conv, and L = <r, conv>)
// a large step has no truncation error and less rounding, hence the default h.
inline void expect_grad(const std::vector<double>& analytic, std::vector<double> x,
                        const std::function<double(const std::vector<double>&)>& f, double tol, const std::string& what,
                        std::size_t max_points = 40, double h = 1e-3) {
  ASSERT_EQ(analytic.size(), x.size()) << what;
  const std::size_t step = (x.size() + max_points - 1) / max_points;
  for (std::size_t i = x.size() % 7 % (step ? step : 1); i < x.size(); i += step ? step : 1) {
    const double x0 = x[i];
    x[i] = x0 + h;
    const double fp = f(x);
    x[i] = x0 - h;
    const double fm = f(x);
    x[i] = x0;
    const double want = (fp - fm) / (2 * h);
    ASSERT_NEAR(analytic[i], want, tol * (1.0 + std::fabs(want))) << what << " at " << i;
  }
}

inline double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (std::size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

}  // namespace tensor::cpu::nn::test
