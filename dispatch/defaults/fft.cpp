// Defaults: rfft / irfft (see dispatch/defaults/install.cpp for the rules every default keeps).
#include "dispatch/defaults/compose.hpp"

namespace tensor::dispatch::defaults {
namespace {

// ---- rfft / irfft: the DFT as a matmul with cos / sin matrices ---------------------------
// O(n^2) per row (the CPU has the mixed-radix / Bluestein kernels). The matrices are built
// on the host in double (angles 2 pi (j k mod n) / n, exact in the index) and uploaded in x's
// dtype; the signal moves to the last dim, [rows, len] @ [len, bins].

Prim dim_last(Prim x, std::size_t dim) {
  const std::size_t last = x->shape().rank() - 1;
  if (dim == last) return x;
  const DeviceId d = x->device();
  return call<Family::SwapDims>(OpCode::swap_dims, d, std::move(x), dim, last);
}
Prim matrix(std::size_t rows, std::size_t cols, DeviceId d, DType dt, const std::vector<double>& v) {
  return upload(TensorData::from(v, Shape{rows, cols}).convert(dt), d);
}
double angle(std::size_t j, std::size_t k, std::size_t n) {
  const auto r = static_cast<double>((static_cast<unsigned long long>(j) * k) % n);
  return 2.0 * 3.14159265358979323846 * r / static_cast<double>(n);
}
// x [.., L] (last dim) with L cut to `used`: [rows, used].
Prim rows_of(Prim x, std::size_t used) {
  const Shape s = x->shape();
  const std::size_t last = s.rank() - 1;
  if (s[last] != used) {
    std::vector<DimSlice> sl = full_slices(s);
    sl[last] = {0, 1, used};
    x = slice_prim(std::move(x), sl);
  }
  const std::size_t rows = used ? x->shape().num_elements() / used : 0;
  return reshape_to(std::move(x), Shape{rows, used});
}
Prim back_to(Prim y2, Shape s_last, std::size_t len, std::size_t dim) {
  s_last[s_last.rank() - 1] = len;
  Prim y = reshape_to(std::move(y2), s_last);
  return dim_last(std::move(y), dim);  // swapping back is the same swap
}

PrimPair d_rfft(Prim x, std::size_t dim, std::size_t n) {
  const DeviceId d = x->device();
  const DType dt = x->dtype();
  x = dim_last(std::move(x), dim);
  const Shape s = x->shape();
  const std::size_t used = std::min(s[s.rank() - 1], n), bins = n / 2 + 1;
  std::vector<double> c(used * bins), sn(used * bins);
  for (std::size_t j = 0; j < used; ++j)
    for (std::size_t k = 0; k < bins; ++k) {
      c[j * bins + k] = std::cos(angle(j, k, n));
      sn[j * bins + k] = -std::sin(angle(j, k, n));
    }
  Prim x2 = rows_of(std::move(x), used);
  Prim re = call<Family::Matmul>(OpCode::matmul, d, x2, matrix(used, bins, d, dt, c));
  Prim im = call<Family::Matmul>(OpCode::matmul, d, std::move(x2), matrix(used, bins, d, dt, sn));
  return {back_to(std::move(re), s, bins, dim), back_to(std::move(im), s, bins, dim)};
}

// y[j] = (1/n) sum_k c_k (re_k cos - im_k sin)(2 pi j k / n), c_k = 1 at DC and Nyquist, 2
// between; the imaginary parts of DC and Nyquist are ignored; bins past n/2 + 1 unused,
// missing bins zero.
Prim d_irfft(Prim re, Prim im, std::size_t dim, std::size_t n) {
  const DeviceId d = re->device();
  const DType dt = re->dtype();
  re = dim_last(std::move(re), dim);
  im = dim_last(std::move(im), dim);
  const Shape s = re->shape();
  const std::size_t used = std::min(s[s.rank() - 1], n / 2 + 1);
  std::vector<double> a(used * n), b(used * n);
  for (std::size_t k = 0; k < used; ++k) {
    const bool edge = k == 0 || (n % 2 == 0 && k == n / 2);
    const double ck = (edge ? 1.0 : 2.0) / static_cast<double>(n);
    for (std::size_t j = 0; j < n; ++j) {
      a[k * n + j] = ck * std::cos(angle(j, k, n));
      b[k * n + j] = edge ? 0.0 : -ck * std::sin(angle(j, k, n));
    }
  }
  Prim y = bin(OpCode::add, call<Family::Matmul>(OpCode::matmul, d, rows_of(std::move(re), used), matrix(used, n, d, dt, a)),
               call<Family::Matmul>(OpCode::matmul, d, rows_of(std::move(im), used), matrix(used, n, d, dt, b)));
  return back_to(std::move(y), s, n, dim);
}

}  // namespace

TENSOR_DEFAULT(OpCode, rfft, d_rfft)
TENSOR_DEFAULT(OpCode, irfft, d_irfft)

}  // namespace tensor::dispatch::defaults
