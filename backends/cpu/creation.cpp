// Creation, transfer and dtype conversion on the CPU: from_data, empty/zeros/ones/full,
// random (xoshiro256** under a mutex), arange, into_data, to_device, cast/into_int/into_float.
#include <cmath>
#include <cstring>
#include <future>
#include <limits>
#include <mutex>
#include <numbers>
#include <random>

#include "backends/cpu/cpu_ops.hpp"
#include "backends/cpu/elementwise.hpp"
#include "tensor/error.hpp"
#include <fmt/format.h>

namespace tensor::cpu {
namespace {

using dispatch::Prim;

Prim from_data_entry(TensorData data, DeviceId) {
  CpuRef t = alloc_tensor(data.dtype(), data.shape());
  const std::size_t n = data.bytes().size();
  if (n) std::memcpy(t->data(), data.bytes().data(), n);
  if (is_bool(data.dtype()) && dtype_size(data.dtype()) == 1) {
    // Kernels read one-byte bools as bool: keep every byte 0 or 1.
    auto* p = reinterpret_cast<std::uint8_t*>(t->data());
    for (std::size_t i = 0; i < n; ++i) p[i] = p[i] != 0 ? 1 : 0;
  }
  return t;
}

// Bool tensors are zeroed so that reading an "uninitialised" one is still defined.
Prim empty_entry(const Shape& shape, DeviceId, DType dtype) {
  return is_bool(dtype) ? alloc_zeroed(dtype, shape) : alloc_tensor(dtype, shape);
}

Prim zeros_entry(const Shape& shape, DeviceId, DType dtype) { return alloc_zeroed(dtype, shape); }

Prim full_entry(const Shape& shape, Scalar value, DeviceId, DType dtype) {
  CpuRef t = alloc_tensor(dtype, shape);
  const std::size_t n = shape.num_elements();
  dispatch::visit_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    const T v = scalar_as<T>(value);
    T* p = at<T>(t->data());
    for (std::size_t i = 0; i < n; ++i) p[i] = v;
  });
  return t;
}

Prim ones_entry(const Shape& shape, DeviceId device, DType dtype) { return full_entry(shape, Scalar(1), device, dtype); }

// ---- random ----------------------------------------------------------------
class Xoshiro256 {
 public:
  void seed(std::uint64_t s) {
    for (auto& w : s_) w = splitmix(s);
  }
  std::uint64_t next() {
    const std::uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const std::uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }
  // Uniform on [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  // Uniform integer in [0, range) (range > 0), by the multiply-high method.
  std::uint64_t below(std::uint64_t range) {
    __extension__ typedef unsigned __int128 U128;
    return static_cast<std::uint64_t>((static_cast<U128>(next()) * range) >> 64);
  }

 private:
  static std::uint64_t rotl(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  static std::uint64_t splitmix(std::uint64_t& x) {
    std::uint64_t z = (x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  std::uint64_t s_[4] = {};
};

struct RngState {
  std::mutex mutex;
  Xoshiro256 rng;
  bool seeded = false;
};
RngState& rng_state() {
  static RngState state;
  return state;
}

void seed_entry(DeviceId, std::uint64_t seed) {
  RngState& st = rng_state();
  std::lock_guard lock(st.mutex);
  st.rng.seed(seed);
  st.seeded = true;
}

template <class T>
void fill_random(T* p, std::size_t n, const Distribution& dist, Xoshiro256& rng) {
  using Kind = Distribution::Kind;
  auto normal = [&rng](double mean, double sd) {
    const double u1 = 1.0 - rng.uniform();  // (0, 1]
    const double u2 = rng.uniform();
    return mean + sd * std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
  };
  if (dist.kind == Kind::Bernoulli) {
    // The hot path of dropout: the same draws and results as `uniform() < a` (uniform() is
    // k * 2^-53 for k = next() >> 11, so the test is k < a * 2^53, exactly), without the
    // per-element switch and conversion.
    const double limit = dist.a * 0x1.0p53;
    const T one = dispatch::convert_value<T>(1.0), zero = dispatch::convert_value<T>(0.0);
    for (std::size_t i = 0; i < n; ++i) p[i] = static_cast<double>(rng.next() >> 11) < limit ? one : zero;
    return;
  }
  if constexpr (dispatch::kIsFloatLike<T>) {
    const double low = dist.kind == Kind::Uniform ? dist.a : 0.0;
    const double high = dist.kind == Kind::Uniform ? dist.b : 1.0;
    for (std::size_t i = 0; i < n; ++i) {
      switch (dist.kind) {
        case Kind::Default:
        case Kind::Uniform: {
          if (!(high > low)) { p[i] = dispatch::convert_value<T>(low); break; }
          // Rounding to T may land on `high`: draw again (rare except for halves).
          T v;
          do v = dispatch::convert_value<T>(low + (high - low) * rng.uniform());
          while (static_cast<double>(dispatch::load_elem(v)) >= high);
          p[i] = v;
          break;
        }
        case Kind::Bernoulli: p[i] = dispatch::convert_value<T>(rng.uniform() < dist.a ? 1.0 : 0.0); break;
        case Kind::Normal: p[i] = dispatch::convert_value<T>(normal(dist.a, dist.b)); break;
      }
    }
  } else {
    // Ints: Default is the full range of T (rand's Standard); Uniform draws integers
    // in [trunc(low), trunc(high)); Normal truncates a float sample.
    const auto lo = dispatch::convert_value<std::int64_t>(dist.a);
    const auto hi = dispatch::convert_value<std::int64_t>(dist.b);
    const std::uint64_t range = hi > lo ? static_cast<std::uint64_t>(hi) - static_cast<std::uint64_t>(lo) : 0;
    for (std::size_t i = 0; i < n; ++i) {
      switch (dist.kind) {
        case Kind::Default: p[i] = static_cast<T>(rng.next()); break;
        case Kind::Uniform:
          p[i] = range == 0 ? dispatch::convert_value<T>(lo)
                            : static_cast<T>(static_cast<std::uint64_t>(lo) + rng.below(range));
          break;
        case Kind::Bernoulli: p[i] = static_cast<T>(rng.uniform() < dist.a ? 1 : 0); break;
        case Kind::Normal: p[i] = dispatch::convert_value<T>(normal(dist.a, dist.b)); break;
      }
    }
  }
}

Prim random_entry(const Shape& shape, const Distribution& dist, DeviceId, DType dtype) {
  CpuRef t = alloc_tensor(dtype, shape);
  const std::size_t n = shape.num_elements();
  RngState& st = rng_state();
  std::lock_guard lock(st.mutex);
  if (!st.seeded) {
    std::random_device rd;
    st.rng.seed((static_cast<std::uint64_t>(rd()) << 32) ^ rd());
    st.seeded = true;
  }
  dispatch::visit_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (dispatch::kIsFloatLike<T> || (std::is_integral_v<T> && !std::is_same_v<T, bool>)) {
      fill_random(at<T>(t->data()), n, dist, st.rng);
    } else {
      throw DTypeError("[random] expected a float or int dtype; got " + std::string(dtype_name(dtype)));
    }
  });
  return t;
}

// ---- arange: start, start+step, ... strictly before end (step != 0) ------------
Prim arange_step_entry(std::int64_t start, std::int64_t end, std::int64_t step, DeviceId, DType dtype) {
  // Differences can exceed int64: count in uint64, where they are exact.
  std::uint64_t n = 0;
  if (step > 0 && end > start) {
    const std::uint64_t diff = static_cast<std::uint64_t>(end) - static_cast<std::uint64_t>(start);
    const auto s = static_cast<std::uint64_t>(step);
    n = diff / s + (diff % s != 0);
  } else if (step < 0 && end < start) {
    const std::uint64_t diff = static_cast<std::uint64_t>(start) - static_cast<std::uint64_t>(end);
    const std::uint64_t s = std::uint64_t{0} - static_cast<std::uint64_t>(step);
    n = diff / s + (diff % s != 0);
  }
  CpuRef t = alloc_tensor(dtype, Shape{static_cast<std::size_t>(n)});
  dispatch::visit_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    T* p = at<T>(t->data());
    for (std::uint64_t i = 0; i < n; ++i) {
      const auto v = static_cast<std::int64_t>(static_cast<std::uint64_t>(start) + i * static_cast<std::uint64_t>(step));
      p[i] = dispatch::convert_value<T>(v);
    }
  });
  return t;
}

Prim arange_entry(std::int64_t start, std::int64_t end, DeviceId device, DType dtype) {
  return arange_step_entry(start, end, 1, device, dtype);
}

// ---- transfer ------------------------------------------------------------------
std::future<TensorData> into_data_entry(Prim p) {
  const CpuRef t = as_cpu(std::move(p));
  std::vector<std::byte> bytes;
  try {
    bytes.resize(t->shape().num_elements() * t->elem_size());
  } catch (const std::bad_alloc&) {
    throw ExecutionError(fmt::format("[into_data] out of host memory; expected {} bytes on the host for a cpu tensor of "
                                     "shape {}; got an allocation failure",
                                     t->shape().num_elements() * t->elem_size(), t->shape().to_string()));
  }
  if (!bytes.empty()) {
    if (t->is_contiguous()) std::memcpy(bytes.data(), t->data(), bytes.size());
    else copy_strided(*t, bytes.data());
  }
  std::promise<TensorData> promise;
  promise.set_value(TensorData(std::move(bytes), t->shape(), t->dtype()));
  return promise.get_future();
}

Prim to_device_entry(Prim p, DeviceId) { return p; }

// ---- dtype conversion (any pair, any layout; Rust `as` semantics) ----------------
template <class To, class From>
struct ConvertFn {
  // float -> int keeps convert_value's rules (truncate, saturate, NaN -> 0) as selects
  // on a conversion that is always in range (out-of-range and NaN lanes convert a 0
  // that the selects replace), so runs of plain numbers vectorize (kVec; a branchy loop
  // is several times slower).
  To operator()(From v) const {
    if constexpr (std::is_floating_point_v<From> && std::is_integral_v<To> && !std::is_same_v<To, bool>) {
      constexpr To kMin = std::numeric_limits<To>::min(), kMax = std::numeric_limits<To>::max();
      constexpr From lo = static_cast<From>(kMin), hi = static_cast<From>(kMax);
      const bool in_range = (v > lo) & (v < hi);  // false for NaN
      const To t = static_cast<To>(in_range ? v : From(0));
      return v <= lo ? kMin : (v >= hi ? kMax : t);
    } else {
      return dispatch::convert_value<To>(v);
    }
  }
  static constexpr bool kVec = std::is_arithmetic_v<To> && std::is_arithmetic_v<From>;
};

Prim convert_entry(Prim p, DType to) { return convert_tensor(as_cpu(std::move(p)), to); }

}  // namespace

// Contiguous halves <-> f32: the vector conversions, in blocks over threads.
template <class H>
bool convert_half(const CpuTensor& a, CpuTensor& out) {
  constexpr DType kHalf = std::is_same_v<H, tensor::f16> ? DType::F16 : DType::BF16;
  const std::size_t n = a.shape().num_elements();
  if (a.dtype() == kHalf && out.dtype() == DType::F32) {
    const H* x = at<H>(a.data());
    float* o = at<float>(out.data());
    half_blocks(n, [&](std::size_t i, std::size_t m) { widen_block(x + i, o + i, m); });
    return true;
  }
  if (a.dtype() == DType::F32 && out.dtype() == kHalf) {
    const float* x = at<float>(a.data());
    H* o = at<H>(out.data());
    half_blocks(n, [&](std::size_t i, std::size_t m) { narrow_block(x + i, o + i, m); });
    return true;
  }
  return false;
}

CpuRef convert_tensor(CpuRef a, DType to) {
  if (a->dtype() == to) return a;
  const Shape& shape = a->shape();
  CpuRef out = alloc_tensor(to, shape);
  if (a->is_contiguous() && (convert_half<tensor::f16>(*a, *out) || convert_half<tensor::bf16>(*a, *out))) return out;
  const auto plan = make_plan<2>(shape, {out->layout().strides.data(), a->layout().strides.data()},
                                 {out->elem_size(), a->elem_size()});
  dispatch::visit_dtype(a->dtype(), [&](auto ftag) {
    using From = decltype(ftag);
    dispatch::visit_dtype(to, [&](auto ttag) {
      using To = decltype(ttag);
      ConvertFn<To, From> fn;
      map1<To, From>(plan, out->data(), a->data(), fn);
    });
  });
  return out;
}

void register_creation_ops(dispatch::Backend& b) {
  b.set<OpCode::from_data>(&from_data_entry);
  b.set<OpCode::empty>(&empty_entry);
  b.set<OpCode::zeros>(&zeros_entry);
  b.set<OpCode::ones>(&ones_entry);
  b.set<OpCode::full>(&full_entry);
  b.set<OpCode::random>(&random_entry);
  b.set<OpCode::arange>(&arange_entry);
  b.set<OpCode::arange_step>(&arange_step_entry);
  b.set<OpCode::into_data>(&into_data_entry);
  b.set<OpCode::to_device>(&to_device_entry);
  b.set<OpCode::cast>(&convert_entry);
  b.set<OpCode::into_int>(&convert_entry);
  b.set<OpCode::into_float>(&convert_entry);
  b.set<dispatch::DeviceOp::seed>(&seed_entry);
}

}  // namespace tensor::cpu
