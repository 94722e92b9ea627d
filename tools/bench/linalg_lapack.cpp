// det / lu / qr of n x n f32 matrices: the composed tensor-op path (tensor/linalg.hpp, on
// the CPU device) against LAPACK (sgetrf, sgeqrf + sorgqr; Debian liblapack-dev, here the
// reference LAPACK over BLIS's BLAS). A measurement for issue 17's "use LAPACK where it is
// faster": not part of the build; scripts/bench-linalg-lapack.sh compiles and runs it.
#include <tensor/linalg.hpp>
#include <tensor/tensor.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

extern "C" {
void sgetrf_(const int* m, const int* n, float* a, const int* lda, int* ipiv, int* info);
void sgeqrf_(const int* m, const int* n, float* a, const int* lda, float* tau, float* work, const int* lwork, int* info);
void sorgqr_(const int* m, const int* n, const int* k, float* a, const int* lda, const float* tau, float* work,
             const int* lwork, int* info);
}

using namespace tensor;
using Clock = std::chrono::steady_clock;

template <class F>
double best_ms(int reps, F&& f) {
  double best = 1e300;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = Clock::now();
    f();
    best = std::min(best, std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  return best;
}

int main() {
  const Device cpu = Device::cpu();
  std::printf("%-4s %5s %14s %14s %9s\n", "op", "n", "composed ms", "lapack ms", "speedup");
  for (int n : {64, 256, 512}) {
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> u(-1, 1);
    std::vector<float> a(static_cast<std::size_t>(n) * n);
    for (float& v : a) v = u(rng);
    const auto sn = static_cast<std::size_t>(n);
    const auto t = Tensor<2>::from_data(TensorData::from<float>(a, {sn, sn}), cpu);
    const int reps = n <= 64 ? 5 : n <= 256 ? 2 : 1;
    // LAPACK works column-major: A^T in our row-major buffer; det(A^T) = det(A), and the
    // QR of A^T is what a caller would transpose in and out (same cost).
    auto lapack_lu = [&](std::vector<float>& m, std::vector<int>& piv) {
      int info = 0;
      sgetrf_(&n, &n, m.data(), &n, piv.data(), &info);
    };
    const double c_det = best_ms(reps, [&] { (void)linalg::det(t).into_data(); });
    const double l_det = best_ms(reps, [&] {
      std::vector<float> m = a;
      std::vector<int> piv(sn);
      lapack_lu(m, piv);
      double d = 1;
      for (int i = 0; i < n; ++i) d *= (piv[static_cast<std::size_t>(i)] != i + 1 ? -1.0 : 1.0) * m[static_cast<std::size_t>(i) * sn + static_cast<std::size_t>(i)];
      (void)Tensor<1>::from_data(TensorData::from<float>({static_cast<float>(d)}, {1}), cpu);
    });
    const double c_lu = best_ms(reps, [&] {
      auto [lu, p] = linalg::lu_decomposition(t);
      (void)lu.into_data();
      (void)p.into_data();
    });
    const double l_lu = best_ms(reps, [&] {
      std::vector<float> m = a;
      std::vector<int> piv(sn);
      lapack_lu(m, piv);
      (void)Tensor<2>::from_data(TensorData::from<float>(m, {sn, sn}), cpu);
    });
    const double c_qr = best_ms(reps, [&] {
      auto [q, r] = linalg::qr(t);
      (void)q.into_data();
      (void)r.into_data();
    });
    const double l_qr = best_ms(reps, [&] {
      std::vector<float> m = a, tau(sn);
      int info = 0, lwork = -1;
      float wq = 0;
      sgeqrf_(&n, &n, m.data(), &n, tau.data(), &wq, &lwork, &info);
      lwork = static_cast<int>(wq);
      std::vector<float> work(static_cast<std::size_t>(std::max(1, lwork)));
      sgeqrf_(&n, &n, m.data(), &n, tau.data(), work.data(), &lwork, &info);
      std::vector<float> r(sn * sn, 0.0f);
      for (std::size_t j = 0; j < sn; ++j)
        for (std::size_t i = 0; i <= j; ++i) r[j * sn + i] = m[j * sn + i];
      sorgqr_(&n, &n, &n, m.data(), &n, tau.data(), work.data(), &lwork, &info);
      (void)Tensor<2>::from_data(TensorData::from<float>(m, {sn, sn}), cpu);
      (void)Tensor<2>::from_data(TensorData::from<float>(r, {sn, sn}), cpu);
    });
    std::printf("%-4s %5d %14.2f %14.3f %8.0fx\n", "det", n, c_det, l_det, c_det / l_det);
    std::printf("%-4s %5d %14.2f %14.3f %8.0fx\n", "lu", n, c_lu, l_lu, c_lu / l_lu);
    std::printf("%-4s %5d %14.2f %14.3f %8.0fx\n", "qr", n, c_qr, l_qr, c_qr / l_qr);
    std::fflush(stdout);
  }
}
