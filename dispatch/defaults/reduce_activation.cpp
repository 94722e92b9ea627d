// Defaults: reductions, scans and activations (see dispatch/defaults/install.cpp for the rules every default keeps).
#include "dispatch/defaults/compose.hpp"

namespace tensor::dispatch::defaults {
namespace {

// ---- reductions -------------------------------------------------------------------

// Sums in a wide type (f32/f64, i64/u64) so narrow dtypes cannot overflow the
// intermediate sum, then divides and casts back.
Prim d_mean(Prim x) {
  const std::size_t n = x->shape().num_elements();
  const DeviceId d = x->device();
  const DType dt = x->dtype();
  const DType wide = is_float(dt)                                ? (dt == DType::F64 ? DType::F64 : DType::F32)
                     : is_unsigned_int(dt) && arith(d, DType::U64) ? DType::U64
                     : is_unsigned_int(dt)                         ? DType::U32
                                                                   : wide_int(d);
  if (dt != wide) x = call<Family::Cast>(OpCode::cast, d, std::move(x), wide);
  Prim s = call<Family::Reduce>(OpCode::sum, d, std::move(x));
  s = is_float(dt) ? sc(OpCode::div_scalar, std::move(s), Scalar(static_cast<double>(n)))
                   : sc(OpCode::div_scalar, std::move(s), Scalar(static_cast<std::uint64_t>(n)));
  return dt == wide ? s : call<Family::Cast>(OpCode::cast, d, std::move(s), dt);
}

Prim gather_at(Prim x, std::size_t dim, Prim idx) {
  const DeviceId d = x->device();
  return call<Family::Gather>(OpCode::gather, d, std::move(x), dim, std::move(idx));
}
PrimPair extremum_dim(Prim x, std::size_t dim, bool is_max, DType out) {
  const DeviceId d = x->device();
  Prim idx = call<Family::DimIndex>(is_max ? OpCode::argmax : OpCode::argmin, d, x, dim, out);
  Prim v = gather_at(std::move(x), dim, idx);
  return {std::move(v), std::move(idx)};
}
Prim d_max_dim(Prim x, std::size_t dim) { const DType t = int_dt(x->device()); return extremum_dim(std::move(x), dim, true, t).first; }
Prim d_min_dim(Prim x, std::size_t dim) { const DType t = int_dt(x->device()); return extremum_dim(std::move(x), dim, false, t).first; }
PrimPair d_max_dim_wi(Prim x, std::size_t dim, DType out) { return extremum_dim(std::move(x), dim, true, out); }
PrimPair d_min_dim_wi(Prim x, std::size_t dim, DType out) { return extremum_dim(std::move(x), dim, false, out); }
// var_mean: the two-pass composite (mean, centred squares summed, divided by n - correction).
PrimPair d_var_mean(Prim x, std::size_t dim, std::size_t correction) {
  const double n = static_cast<double>(x->shape()[dim]);
  Prim mean = rdim(OpCode::mean_dim, x, dim);
  Prim diff = bin(OpCode::sub, std::move(x), mean);
  Prim ss = rdim(OpCode::sum_dim, d_square(std::move(diff)), dim);
  return {sc(OpCode::div_scalar, std::move(ss), Scalar(n - static_cast<double>(correction))), std::move(mean)};
}
Prim d_max(Prim x) { return rdim(OpCode::max_dim, flat(std::move(x)), 0); }
Prim d_min(Prim x) { return rdim(OpCode::min_dim, flat(std::move(x)), 0); }
Prim d_max_abs_dim(Prim x, std::size_t dim) { return rdim(OpCode::max_dim, un(OpCode::abs, std::move(x)), dim); }
Prim d_max_abs(Prim x) { return rdim(OpCode::max_abs_dim, flat(std::move(x)), 0); }

// Count of nonzero elements along `dim` (or everything when dim == npos), in the widest int.
Prim nonzero_count(Prim x, std::size_t dim) {
  const DeviceId d = x->device();
  Prim nz = is_bool(x->dtype()) ? std::move(x)
                                : call<Family::CompareScalar>(OpCode::not_equal_elem, d, std::move(x), Scalar(0), bool_dt(d));
  Prim n = call<Family::Cast>(OpCode::into_int, d, std::move(nz), wide_int(d));
  if (dim == static_cast<std::size_t>(-1)) return call<Family::Reduce>(OpCode::sum, d, std::move(n));
  return rdim(OpCode::sum_dim, std::move(n), dim);
}
Prim d_any(Prim x, DType out) {
  const DeviceId d = x->device();
  return call<Family::CompareScalar>(OpCode::greater_elem, d, nonzero_count(std::move(x), static_cast<std::size_t>(-1)),
                                     Scalar(0), out);
}
Prim d_all(Prim x, DType out) {
  const DeviceId d = x->device();
  const auto n = static_cast<std::int64_t>(x->shape().num_elements());
  return call<Family::CompareScalar>(OpCode::equal_elem, d, nonzero_count(std::move(x), static_cast<std::size_t>(-1)),
                                     Scalar(n), out);
}
Prim d_any_dim(Prim x, std::size_t dim, DType out) {
  const DeviceId d = x->device();
  return call<Family::CompareScalar>(OpCode::greater_elem, d, nonzero_count(std::move(x), dim), Scalar(0), out);
}
Prim d_all_dim(Prim x, std::size_t dim, DType out) {
  const DeviceId d = x->device();
  const auto n = static_cast<std::int64_t>(x->shape()[dim]);
  return call<Family::CompareScalar>(OpCode::equal_elem, d, nonzero_count(std::move(x), dim), Scalar(n), out);
}

// Host sort along `dim` of row-major data: stable; NaN counts as the largest value,
// so it goes last ascending and first descending. Returns values and indices.
std::pair<TensorData, std::vector<std::int64_t>> host_sort(const TensorData& data, std::size_t dim, bool desc) {
  const Shape& s = data.shape();
  const std::size_t n = s[dim];
  std::size_t inner = 1;
  for (std::size_t i = dim + 1; i < s.rank(); ++i) inner *= s[i];
  const std::size_t outer = n && inner ? s.num_elements() / (n * inner) : 0;  // zero-size: nothing to sort
  TensorData out = data;
  std::vector<std::int64_t> idx(s.num_elements());
  visit_dtype(data.dtype(), [&](auto t) {
    using T = decltype(t);
    if constexpr (std::is_same_v<T, bool> || std::is_same_v<T, BoolU32>) {
      throw DTypeError("[sort] expected a Float or Int tensor; got Bool");
    } else {
      const auto* src = reinterpret_cast<const T*>(data.bytes().data());
      auto* dst = reinterpret_cast<T*>(out.bytes().data());
      std::vector<std::size_t> perm(n);
      auto key = [](T v) { return load_elem(v); };
      for (std::size_t o = 0; o < outer; ++o)
        for (std::size_t in = 0; in < inner; ++in) {
          const std::size_t base = o * n * inner + in;
          std::iota(perm.begin(), perm.end(), std::size_t{0});
          std::stable_sort(perm.begin(), perm.end(), [&](std::size_t i, std::size_t j) {
            const auto a = key(src[base + i * inner]);
            const auto b = key(src[base + j * inner]);
            if constexpr (kIsFloatLike<T>) {
              const bool na = std::isnan(a), nb = std::isnan(b);
              if (na || nb) return desc ? (na && !nb) : (!na && nb);
            }
            return desc ? b < a : a < b;
          });
          for (std::size_t k = 0; k < n; ++k) {
            dst[base + k * inner] = src[base + perm[k] * inner];
            idx[base + k * inner] = static_cast<std::int64_t>(perm[k]);
          }
        }
    }
  });
  return {std::move(out), std::move(idx)};
}

PrimPair sort_impl(Prim x, std::size_t dim, bool desc, DType out_dt) {
  const DeviceId d = x->device();
  const Shape s = x->shape();
  auto [values, idx] = host_sort(read_prim(std::move(x)), dim, desc);
  return {upload(std::move(values), d), upload(TensorData::from(idx, s).convert(out_dt), d)};
}
Prim d_sort(Prim x, std::size_t dim, bool desc) {
  const DType idx = int_dt(x->device());
  return sort_impl(std::move(x), dim, desc, idx).first;
}
PrimPair d_sort_wi(Prim x, std::size_t dim, bool desc, DType out) { return sort_impl(std::move(x), dim, desc, out); }
Prim d_argsort(Prim x, std::size_t dim, bool desc, DType out) { return sort_impl(std::move(x), dim, desc, out).second; }

Prim first_k(Prim x, std::size_t dim, std::size_t k) {
  std::vector<DimSlice> ds = full_slices(x->shape());
  ds[dim] = {0, 1, k};
  return slice_prim(std::move(x), std::move(ds));
}
PrimPair d_topk_wi(Prim x, std::size_t dim, std::size_t k, DType out) {
  const DeviceId d = x->device();
  auto [v, i] = call<Family::SortWithIndices>(OpCode::sort_with_indices, d, std::move(x), dim, true, out);
  return {first_k(std::move(v), dim, k), first_k(std::move(i), dim, k)};
}
Prim d_topk(Prim x, std::size_t dim, std::size_t k) {
  const DeviceId d = x->device();
  return first_k(call<Family::Sort>(OpCode::sort, d, std::move(x), dim, true), dim, k);
}
Prim d_argtopk(Prim x, std::size_t dim, std::size_t k, DType out) {
  const DeviceId d = x->device();
  return first_k(call<Family::Argsort>(OpCode::argsort, d, std::move(x), dim, true, out), dim, k);
}

// ---- activations ------------------------------------------------------------------

Prim d_relu(Prim x) {
  Prim m = cmp_s(OpCode::lower_equal_elem, x, Scalar(0));
  return mfill(std::move(x), std::move(m), Scalar(0));
}
Prim d_leaky_relu(Prim x, Scalar slope) {
  Prim m = cmp_s(OpCode::lower_elem, x, Scalar(0));
  Prim scaled = sc(OpCode::mul_scalar, x, slope);
  return mwhere(std::move(x), std::move(m), std::move(scaled));
}
Prim d_prelu(Prim x, Prim alpha) {
  Prim m = cmp_s(OpCode::lower_elem, x, Scalar(0));
  Prim scaled = bin(OpCode::mul, x, std::move(alpha));
  return mwhere(std::move(x), std::move(m), std::move(scaled));
}
Prim d_gelu(Prim x) {
  Prim e = un(OpCode::erf, sc(OpCode::mul_scalar, x, Scalar(0.70710678118654752440)));
  Prim h = sc(OpCode::mul_scalar, sc(OpCode::add_scalar, std::move(e), Scalar(1.0)), Scalar(0.5));
  return bin(OpCode::mul, std::move(x), std::move(h));
}
Prim d_sigmoid(Prim x) {
  // exp(-log1p(exp(-x))): saturates to exactly 0 and 1 instead of overflowing.
  Prim t = un(OpCode::log1p, un(OpCode::exp, un(OpCode::neg, std::move(x))));
  return un(OpCode::exp, un(OpCode::neg, std::move(t)));
}
Prim d_hard_sigmoid(Prim x, Scalar alpha, Scalar beta) {
  Prim y = sc(OpCode::add_scalar, sc(OpCode::mul_scalar, std::move(x), alpha), beta);
  const DeviceId d = y->device();
  return call<Family::Clamp>(OpCode::clamp, d, std::move(y), Scalar(0.0), Scalar(1.0));
}
Prim d_log_sigmoid(Prim x) {
  // min(x, 0) - log1p(exp(-|x|)): never exponentiates a large positive number, and
  // keeps log_sigmoid(-inf) = -inf (burn's -(m + log(exp(-m) + exp(-x - m))) form
  // with m = max(-x, 0) gives NaN there: inf - inf inside the exp).
  Prim m = sc(OpCode::clamp_max, x, Scalar(0.0));
  Prim t = un(OpCode::log1p, un(OpCode::exp, un(OpCode::neg, un(OpCode::abs, std::move(x)))));
  return bin(OpCode::sub, std::move(m), std::move(t));
}
Prim d_softmax(Prim x, std::size_t dim) {
  if (x->shape().num_elements() == 0) return x;  // max_dim of an empty lane would raise
  Prim m = rdim(OpCode::max_dim, x, dim);
  Prim e = un(OpCode::exp, bin(OpCode::sub, std::move(x), std::move(m)));
  Prim s = rdim(OpCode::sum_dim, e, dim);
  return bin(OpCode::div, std::move(e), std::move(s));
}
Prim d_log_softmax(Prim x, std::size_t dim) {
  if (x->shape().num_elements() == 0) return x;
  Prim m = rdim(OpCode::max_dim, x, dim);
  Prim shifted = bin(OpCode::sub, std::move(x), std::move(m));
  Prim lse = un(OpCode::log, rdim(OpCode::sum_dim, un(OpCode::exp, shifted), dim));
  return bin(OpCode::sub, std::move(shifted), std::move(lse));
}
Prim d_softmin(Prim x, std::size_t dim) { return rdim(OpCode::softmax, un(OpCode::neg, std::move(x)), dim); }
Prim d_relu_backward(Prim out, Prim grad) {
  Prim m = cmp_s(OpCode::lower_equal_elem, std::move(out), Scalar(0));
  return mfill(std::move(grad), std::move(m), Scalar(0));
}
Prim d_gelu_backward(Prim x, Prim grad) {
  // Derivative of the exact (erf) GELU x·Φ(x): Φ(x) + x·φ(x), φ(x) = exp(-x²/2) / sqrt(2π).
  Prim e = un(OpCode::erf, sc(OpCode::mul_scalar, x, Scalar(0.70710678118654752440)));
  Prim cdf = sc(OpCode::mul_scalar, sc(OpCode::add_scalar, std::move(e), Scalar(1.0)), Scalar(0.5));
  Prim pdf = sc(OpCode::mul_scalar, un(OpCode::exp, sc(OpCode::mul_scalar, d_square(x), Scalar(-0.5))),
                Scalar(0.39894228040143267794));
  Prim d = bin(OpCode::add, std::move(cdf), bin(OpCode::mul, std::move(x), std::move(pdf)));
  return bin(OpCode::mul, std::move(grad), std::move(d));
}
Prim d_sigmoid_backward(Prim out, Prim grad) {
  Prim one_minus = sc(OpCode::add_scalar, un(OpCode::neg, out), Scalar(1.0));
  return bin(OpCode::mul, bin(OpCode::mul, std::move(out), std::move(one_minus)), std::move(grad));
}
Prim d_log_sigmoid_backward(Prim x, Prim grad) {
  // d/dx log(sigmoid(x)) = sigmoid(-x)
  return bin(OpCode::mul, std::move(grad), un(OpCode::sigmoid, un(OpCode::neg, std::move(x))));
}

}  // namespace

TENSOR_DEFAULT(OpCode, mean, d_mean)
TENSOR_DEFAULT(OpCode, max, d_max)
TENSOR_DEFAULT(OpCode, min, d_min)
TENSOR_DEFAULT(OpCode, max_dim, d_max_dim)
TENSOR_DEFAULT(OpCode, min_dim, d_min_dim)
TENSOR_DEFAULT(OpCode, max_dim_with_indices, d_max_dim_wi)
TENSOR_DEFAULT(OpCode, min_dim_with_indices, d_min_dim_wi)
TENSOR_DEFAULT(OpCode, max_abs, d_max_abs)
TENSOR_DEFAULT(OpCode, var_mean, d_var_mean)
TENSOR_DEFAULT(OpCode, max_abs_dim, d_max_abs_dim)
TENSOR_DEFAULT(OpCode, any, d_any)
TENSOR_DEFAULT(OpCode, all, d_all)
TENSOR_DEFAULT(OpCode, any_dim, d_any_dim)
TENSOR_DEFAULT(OpCode, all_dim, d_all_dim)
TENSOR_DEFAULT(OpCode, sort, d_sort)
TENSOR_DEFAULT(OpCode, sort_with_indices, d_sort_wi)
TENSOR_DEFAULT(OpCode, argsort, d_argsort)
TENSOR_DEFAULT(OpCode, topk, d_topk)
TENSOR_DEFAULT(OpCode, topk_with_indices, d_topk_wi)
TENSOR_DEFAULT(OpCode, argtopk, d_argtopk)
TENSOR_DEFAULT(OpCode, relu, d_relu)
TENSOR_DEFAULT(OpCode, leaky_relu, d_leaky_relu)
TENSOR_DEFAULT(OpCode, prelu, d_prelu)
TENSOR_DEFAULT(OpCode, gelu, d_gelu)
TENSOR_DEFAULT(OpCode, sigmoid, d_sigmoid)
TENSOR_DEFAULT(OpCode, hard_sigmoid, d_hard_sigmoid)
TENSOR_DEFAULT(OpCode, log_sigmoid, d_log_sigmoid)
TENSOR_DEFAULT(OpCode, softmax, d_softmax)
TENSOR_DEFAULT(OpCode, log_softmax, d_log_softmax)
TENSOR_DEFAULT(OpCode, softmin, d_softmin)
TENSOR_DEFAULT(OpCode, relu_backward, d_relu_backward)
TENSOR_DEFAULT(OpCode, gelu_backward, d_gelu_backward)
TENSOR_DEFAULT(OpCode, sigmoid_backward, d_sigmoid_backward)
TENSOR_DEFAULT(OpCode, log_sigmoid_backward, d_log_sigmoid_backward)

}  // namespace tensor::dispatch::defaults
