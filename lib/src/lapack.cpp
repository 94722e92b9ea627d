#include "lapack.hpp"

#include <cmath>
#include <algorithm>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <numeric>
#include <vector>

#include "tensor/data.hpp"
#include "tensor/device.hpp"

#if defined(TENSOR_HAVE_LAPACK) && TENSOR_HAVE_LAPACK
// Fortran LAPACK, column-major; every argument by pointer.
extern "C" {
void sgetrf_(const int* m, const int* n, float* a, const int* lda, int* ipiv, int* info);
void dgetrf_(const int* m, const int* n, double* a, const int* lda, int* ipiv, int* info);
void sgeqrf_(const int* m, const int* n, float* a, const int* lda, float* tau, float* work, const int* lwork, int* info);
void dgeqrf_(const int* m, const int* n, double* a, const int* lda, double* tau, double* work, const int* lwork, int* info);
void sorgqr_(const int* m, const int* n, const int* k, float* a, const int* lda, const float* tau, float* work,
             const int* lwork, int* info);
void dorgqr_(const int* m, const int* n, const int* k, double* a, const int* lda, const double* tau, double* work,
             const int* lwork, int* info);
}
#endif

namespace tensor::detail::lapack {
namespace {

#if defined(TENSOR_HAVE_LAPACK) && TENSOR_HAVE_LAPACK
void getrf(int m, int n, float* a, int* ipiv, int* info) { sgetrf_(&m, &n, a, &m, ipiv, info); }
void getrf(int m, int n, double* a, int* ipiv, int* info) { dgetrf_(&m, &n, a, &m, ipiv, info); }
// The plain cpu device (the autodiff device needs the composed, differentiable path),
// f32 or f64, sizes LAPACK's int takes.
bool applies(const Handle& a, std::size_t m, std::size_t n) {
  const Device dev = device(a);
  const DType dt = dtype(a);
  return dev.id().type_id == kCpuDeviceType && (dt == DType::F32 || dt == DType::F64) && m >= 1 && n >= 1 &&
         m <= 46340 && n <= 46340;
}

Shape batch_shape(const Shape& s, std::size_t drop, std::initializer_list<std::size_t> tail) {
  Shape out;
  for (std::size_t i = 0; i + drop < s.rank(); ++i) out.push_back(s[i]);
  for (std::size_t t : tail) out.push_back(t);
  return out;
}

Handle host_tensor(TensorData d, const Device& dev, Kind k) {
  if (k == Kind::Int) d = d.convert(to_dtype(dev.settings().int_dtype));
  return from_data(std::move(d), dev, k);
}

template <class T>
void lu_typed(const Handle& a, std::size_t m, std::size_t n, Lu& out) {
  const std::vector<T> v = into_data(retain(a)).get().template to_vec<T>();
  const std::size_t batches = v.size() / (m * n), k = std::min(m, n);
  std::vector<T> lu(v.size()), col(m * n);
  std::vector<std::int64_t> perm(batches * m);
  std::vector<T> sign(batches);
  std::vector<int> ipiv(k);
  const int mi = static_cast<int>(m), ni = static_cast<int>(n);
  for (std::size_t b = 0; b < batches; ++b) {
    const T* src = v.data() + b * m * n;
    for (std::size_t i = 0; i < m; ++i)
      for (std::size_t j = 0; j < n; ++j) col[j * m + i] = src[i * n + j];  // row-major -> column-major
    int info = 0;
    getrf(mi, ni, col.data(), ipiv.data(), &info);  // info > 0: U is singular; the factors are still right
    T* dst = lu.data() + b * m * n;
    for (std::size_t i = 0; i < m; ++i)
      for (std::size_t j = 0; j < n; ++j) dst[i * n + j] = col[j * m + i];
    std::int64_t* p = perm.data() + b * m;
    std::iota(p, p + m, std::int64_t{0});
    T sg = 1;
    for (std::size_t i = 0; i < k; ++i) {
      const auto r = static_cast<std::size_t>(ipiv[i] - 1);
      if (r != i) {
        std::swap(p[i], p[r]);
        sg = -sg;
      }
    }
    sign[b] = sg;
  }
  const Device dev = device(a);
  const Kind fk = Kind::Float;
  out.lu = host_tensor(TensorData::from(lu, Shape{batches, m, n}), dev, fk);
  out.perm = host_tensor(TensorData::from(perm, Shape{batches, m}), dev, Kind::Int);
  out.sign = host_tensor(TensorData::from(sign, Shape{batches, 1, 1}), dev, fk);
}

template <class T>
bool qr_typed(const Handle& a, std::size_t m, std::size_t n, Handle& q_out, Handle& r_out) {
  const Shape s = shape(a);
  const std::vector<T> v = into_data(retain(a)).get().template to_vec<T>();
  const std::size_t batches = v.size() / (m * n);
  std::vector<T> q(batches * m * n), r(batches * n * n, T{0}), col(m * n), tau(n);
  const int mi = static_cast<int>(m), ni = static_cast<int>(n);
  for (std::size_t b = 0; b < batches; ++b) {
    const T* src = v.data() + b * m * n;
    for (std::size_t i = 0; i < m; ++i)
      for (std::size_t j = 0; j < n; ++j) col[j * m + i] = src[i * n + j];
    // R's column scale: a diagonal entry this small (relative) is a rank-deficient
    // column, where the composed path's zero column of Q is the documented answer.
    T scale = 0;
    for (T x : col) scale = std::max(scale, std::abs(x));
    int info = 0;
    T* rb = r.data() + b * n * n;
    // geqrf overwrites col: R on and above the diagonal, reflectors below.
    std::vector<T> work_col = col;
    {
      T query{};
      int lwork = -1;
      if constexpr (std::is_same_v<T, float>) sgeqrf_(&mi, &ni, work_col.data(), &mi, tau.data(), &query, &lwork, &info);
      else dgeqrf_(&mi, &ni, work_col.data(), &mi, tau.data(), &query, &lwork, &info);
      lwork = std::max(1, static_cast<int>(query));
      std::vector<T> work(static_cast<std::size_t>(lwork));
      if constexpr (std::is_same_v<T, float>) sgeqrf_(&mi, &ni, work_col.data(), &mi, tau.data(), work.data(), &lwork, &info);
      else dgeqrf_(&mi, &ni, work_col.data(), &mi, tau.data(), work.data(), &lwork, &info);
      if (info != 0) return false;
      for (std::size_t i = 0; i < n; ++i)
        for (std::size_t j = i; j < n; ++j) rb[i * n + j] = work_col[j * m + i];
      lwork = -1;
      if constexpr (std::is_same_v<T, float>) sorgqr_(&mi, &ni, &ni, work_col.data(), &mi, tau.data(), &query, &lwork, &info);
      else dorgqr_(&mi, &ni, &ni, work_col.data(), &mi, tau.data(), &query, &lwork, &info);
      lwork = std::max(1, static_cast<int>(query));
      work.assign(static_cast<std::size_t>(lwork), T{});
      if constexpr (std::is_same_v<T, float>) sorgqr_(&mi, &ni, &ni, work_col.data(), &mi, tau.data(), work.data(), &lwork, &info);
      else dorgqr_(&mi, &ni, &ni, work_col.data(), &mi, tau.data(), work.data(), &lwork, &info);
      if (info != 0) return false;
    }
    const T tiny = scale * static_cast<T>(m) * std::numeric_limits<T>::epsilon() * 16;
    T* qb = q.data() + b * m * n;
    for (std::size_t j = 0; j < n; ++j) {
      const T d = rb[j * n + j];
      if (!(std::abs(d) > tiny)) return false;  // rank-deficient (or NaN): the composed path
      const T f = d < 0 ? T{-1} : T{1};
      for (std::size_t k = j; k < n; ++k) rb[j * n + k] *= f;
      for (std::size_t i = 0; i < m; ++i) qb[i * n + j] = work_col[j * m + i] * f;
    }
  }
  const Device dev = device(a);
  q_out = host_tensor(TensorData::from(q, s), dev, Kind::Float);
  r_out = host_tensor(TensorData::from(r, batch_shape(s, 2, {n, n})), dev, Kind::Float);
  return true;
}
#endif

}  // namespace

bool lu(const Handle& a, Lu& out) {
#if defined(TENSOR_HAVE_LAPACK) && TENSOR_HAVE_LAPACK
  const Shape s = shape(a);
  if (s.rank() < 2) return false;
  const std::size_t m = s[s.rank() - 2], n = s[s.rank() - 1];
  if (!applies(a, m, n) || s.num_elements() == 0) return false;
  if (dtype(a) == DType::F32) lu_typed<float>(a, m, n, out);
  else lu_typed<double>(a, m, n, out);
  return true;
#else
  (void)a;
  (void)out;
  return false;
#endif
}

bool qr(const Handle& a, Handle& q, Handle& r) {
#if defined(TENSOR_HAVE_LAPACK) && TENSOR_HAVE_LAPACK
  const Shape s = shape(a);
  if (s.rank() < 2) return false;
  const std::size_t m = s[s.rank() - 2], n = s[s.rank() - 1];
  if (!applies(a, m, n) || s.num_elements() == 0) return false;
  return dtype(a) == DType::F32 ? qr_typed<float>(a, m, n, q, r) : qr_typed<double>(a, m, n, q, r);
#else
  (void)a;
  (void)q;
  (void)r;
  return false;
#endif
}

}  // namespace tensor::detail::lapack
