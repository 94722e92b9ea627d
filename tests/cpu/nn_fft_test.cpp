// rfft / irfft of any length against a direct O(n^2) DFT written here, the backward entries
// against central differences (f64), and module-ops.md E46-E51.
#include <cmath>
#include <numbers>
#include <vector>

#include "backends/cpu/nn/fft.hpp"
#include "nn_test_util.hpp"

namespace tensor::cpu::nn::test {
namespace {

void ref_rfft(const std::vector<double>& x, std::size_t n, std::vector<double>& re, std::vector<double>& im) {
  re.assign(n / 2 + 1, 0.0);
  im.assign(n / 2 + 1, 0.0);
  for (std::size_t k = 0; k <= n / 2; ++k)
    for (std::size_t j = 0; j < n && j < x.size(); ++j) {
      const double t = -2 * std::numbers::pi * static_cast<double>(j * k % n) / static_cast<double>(n);
      re[k] += x[j] * std::cos(t);
      im[k] += x[j] * std::sin(t);
    }
}
std::vector<double> ref_irfft(const std::vector<double>& re, const std::vector<double>& im, std::size_t n) {
  std::vector<double> y(n, 0.0);
  for (std::size_t j = 0; j < n; ++j) {
    double s = re.empty() ? 0.0 : re[0];
    for (std::size_t k = 1; k < re.size() && 2 * k <= n; ++k) {
      const double t = 2 * std::numbers::pi * static_cast<double>(j * k % n) / static_cast<double>(n);
      if (2 * k == n)
        s += re[k] * std::cos(t);
      else
        s += 2 * (re[k] * std::cos(t) - im[k] * std::sin(t));
    }
    y[j] = s / static_cast<double>(n);
  }
  return y;
}

template <class T>
void run_rfft(const std::vector<double>& x, std::size_t n, std::vector<double>& re, std::vector<double>& im) {
  const auto xt = cast<T>(x);
  std::vector<T> r(n / 2 + 1), i(n / 2 + 1);
  rfft(1, x.size(), n, xt.data(), r.data(), i.data());
  re.assign(r.begin(), r.end());
  im.assign(i.begin(), i.end());
}
template <class T>
std::vector<double> run_irfft(const std::vector<double>& re, const std::vector<double>& im, std::size_t n) {
  const auto rt = cast<T>(re), it = cast<T>(im);
  std::vector<T> y(n);
  irfft(1, re.size(), n, rt.data(), it.data(), y.data());
  return {y.begin(), y.end()};
}

TEST(NnFft, AnyLengthMatchesDirectDft) {
  std::vector<std::size_t> lengths;
  for (std::size_t n = 1; n <= 40; ++n) lengths.push_back(n);
  for (std::size_t n : {64u, 97u, 100u, 127u, 210u, 257u, 1000u, 1009u, 2 * 37u * 41u}) lengths.push_back(n);
  for (std::size_t n : lengths) {
    const auto x = rnd(n, static_cast<std::uint32_t>(n));
    std::vector<double> wr, wi, gr, gi;
    ref_rfft(x, n, wr, wi);
    const double tol = 1e-10 * std::sqrt(static_cast<double>(n));
    run_rfft<double>(x, n, gr, gi);
    expect_close(gr, wr, tol, "re n=" + std::to_string(n));
    expect_close(gi, wi, tol, "im n=" + std::to_string(n));
    run_rfft<float>(x, n, gr, gi);
    expect_close(gr, wr, 1e-4, "re f32 n=" + std::to_string(n));
    // irfft of the spectrum, with a non-zero imaginary DC/Nyquist that must be ignored.
    auto im = wi;
    im[0] = 3.0;
    if (n % 2 == 0) im.back() = -2.0;
    expect_close(run_irfft<double>(wr, im, n), x, tol, "round trip n=" + std::to_string(n));
    expect_close(run_irfft<double>(wr, im, n), ref_irfft(wr, wi, n), tol, "irfft n=" + std::to_string(n));
  }
}

TEST(NnFft, TruncatedAndPaddedLengths) {
  const auto x = rnd(10, 61);
  for (std::size_t n : {3u, 7u, 10u, 16u, 23u}) {
    std::vector<double> wr, wi, gr, gi;
    ref_rfft(x, n, wr, wi);
    run_rfft<double>(x, n, gr, gi);
    expect_close(gr, wr, 1e-12, "re");
    expect_close(gi, wi, 1e-12, "im");
  }
  // irfft with fewer and more bins than n/2 + 1.
  const auto re = rnd(4, 62), im = rnd(4, 63);
  for (std::size_t n : {3u, 6u, 9u, 12u}) {
    std::vector<double> r = re, i = im;
    r.resize(n / 2 + 1, 0.0);
    i.resize(n / 2 + 1, 0.0);
    expect_close(run_irfft<double>(re, im, n), ref_irfft(r, i, n), 1e-12, "irfft bins n=" + std::to_string(n));
  }
}

TEST(NnFft, BackwardMatchesFiniteDifferences) {
  for (auto [len, n] : {std::pair<std::size_t, std::size_t>{6, 6}, {7, 7}, {5, 8}, {9, 4}, {11, 11}}) {
    const auto x = rnd(len, 64);
    const std::size_t bins = n / 2 + 1;
    const auto gre = rnd(bins, 65), gim = rnd(bins, 66);
    std::vector<double> dx(len);
    rfft_backward(1, len, n, gre.data(), gim.data(), dx.data());
    expect_close(dx, numeric_grad(x, [&](const auto& v) {
                   std::vector<double> r, i;
                   run_rfft<double>(v, n, r, i);
                   return dot(gre, r) + dot(gim, i);
                 }),
                 1e-6, "rfft grad");
    for (std::size_t nb : {bins, bins + 2, bins > 1 ? bins - 1 : 1}) {
      const auto re = rnd(nb, 67), im = rnd(nb, 68), dy = rnd(n, 69);
      std::vector<double> dre(nb), dim(nb);
      irfft_backward(1, nb, n, dy.data(), dre.data(), dim.data());
      expect_close(dre, numeric_grad(re, [&](const auto& v) { return dot(dy, run_irfft<double>(v, im, n)); }), 1e-6, "irfft d re");
      expect_close(dim, numeric_grad(im, [&](const auto& v) { return dot(dy, run_irfft<double>(re, v, n)); }), 1e-6, "irfft d im");
    }
  }
}

TEST(NnFft, E46EvenLength) {
  std::vector<double> re, im;
  run_rfft<float>({1, 2, 3, 4}, 4, re, im);
  expect_close(re, std::vector<double>{10, -2, -2}, 1e-6, "E46 re");
  expect_close(im, std::vector<double>{0, 2, 0}, 1e-6, "E46 im");
}
TEST(NnFft, E47OddLengthHasNoNyquistBin) {
  std::vector<double> re, im;
  run_rfft<float>({1, 2, 3, 4, 5}, 5, re, im);
  expect_close(re, std::vector<double>{15, -2.5, -2.5}, 1e-5, "E47 re");
  expect_close(im, std::vector<double>{0, 3.441, 0.8123}, 1e-4, "E47 im");
}
TEST(NnFft, E48ExplicitLengthTruncatesOrPads) {
  std::vector<double> re, im;
  run_rfft<float>({1, 2, 3, 4}, 2, re, im);
  expect_close(re, std::vector<double>{3, -1}, 1e-6, "E48 n=2");
  run_rfft<float>({1, 2, 3, 4}, 8, re, im);
  expect_close(re, std::vector<double>{10, -0.4142, -2, 2.4142, -2}, 1e-4, "E48 n=8");
}
TEST(NnFft, E49IrfftIgnoresImaginaryDcAndNyquist) {
  expect_close(run_irfft<float>({1, 0, 0}, {5, 0, 7}, 4), std::vector<double>{0.25, 0.25, 0.25, 0.25}, 1e-6, "E49");
}
TEST(NnFft, E50IrfftDefaultLength) {
  std::vector<double> re, im;
  run_rfft<double>({1, 2, 3, 4, 5}, 5, re, im);
  expect_close(run_irfft<float>(re, im, 4), std::vector<double>{1.875, 2.6545, 4.375, 6.0955}, 1e-4, "E50 n=4");
  expect_close(run_irfft<float>(re, im, 5), std::vector<double>{1, 2, 3, 4, 5}, 1e-5, "E50 n=5");
}
TEST(NnFft, E51RfftBackward) {
  const std::vector<float> gre{1, 1, 1}, gim{0, 0, 0};
  std::vector<float> dx(4);
  rfft_backward(1, 4, 4, gre.data(), gim.data(), dx.data());
  expect_close(dx, std::vector<double>{3, 0, 1, 0}, 1e-6, "E51");
}

}  // namespace
}  // namespace tensor::cpu::nn::test
