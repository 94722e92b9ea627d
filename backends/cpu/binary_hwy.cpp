// Highway kernels for contiguous f32/f64 add/sub/mul/div (vector-vector, vector-scalar
// and reversed scalar-vector), compiled once per target and picked at run time.
#include "backends/cpu/binary_hwy.hpp"
#include "backends/cpu/cpu_info.hpp"

#include <algorithm>

#include "backends/cpu/parallel.hpp"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backends/cpu/binary_hwy.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/cache_control.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace tensor::cpu::simd {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

struct AddV { template <class V> HWY_INLINE V operator()(V a, V b) const { return hn::Add(a, b); } };
struct SubV { template <class V> HWY_INLINE V operator()(V a, V b) const { return hn::Sub(a, b); } };
struct MulV { template <class V> HWY_INLINE V operator()(V a, V b) const { return hn::Mul(a, b); } };
struct DivV { template <class V> HWY_INLINE V operator()(V a, V b) const { return hn::Div(a, b); } };

// Stores `n` results get(tag, i) at out[i]. `stream`: non-temporal stores (the output
// is large and fresh, so writing it through the cache would first read every line
// from memory: 4 streams of traffic instead of 3); out is aligned to the vector first.
// No HWY_RESTRICT: `out` may alias an input element for element (in-place ops).
template <class T, class Get>
HWY_INLINE void Drive(T* out, size_t n, bool stream, const Get& get) {
  const hn::ScalableTag<T> d;
  const hn::CappedTag<T, 1> d1;
  const size_t N = hn::Lanes(d);
  size_t i = 0;
  if (stream) {
    for (; i < n && reinterpret_cast<uintptr_t>(out + i) % (N * sizeof(T)) != 0; ++i) hn::StoreU(get(d1, i), d1, out + i);
    for (; i + 2 * N <= n; i += 2 * N) {
      const auto r0 = get(d, i), r1 = get(d, i + N);
      hn::Stream(r0, d, out + i);
      hn::Stream(r1, d, out + i + N);
    }
    hwy::FlushStream();
  } else {
    for (; i + 2 * N <= n; i += 2 * N) {
      const auto r0 = get(d, i), r1 = get(d, i + N);
      hn::StoreU(r0, d, out + i);
      hn::StoreU(r1, d, out + i + N);
    }
  }
  for (; i + N <= n; i += N) hn::StoreU(get(d, i), d, out + i);
  for (; i < n; ++i) hn::StoreU(get(d1, i), d1, out + i);
}

template <class T, class Op>
HWY_INLINE void VecVec(const T* a, const T* b, T* out, size_t n, bool stream) {
  Drive(out, n, stream, [a, b](auto d, size_t i) { return Op()(hn::LoadU(d, a + i), hn::LoadU(d, b + i)); });
}

template <class T, class Op>
HWY_INLINE void VecScalar(const T* a, T s, T* out, size_t n, bool stream) {
  Drive(out, n, stream, [a, s](auto d, size_t i) { return Op()(hn::LoadU(d, a + i), hn::Set(d, s)); });
}

template <class T, class Op>
HWY_INLINE void ScalarVec(T s, const T* b, T* out, size_t n, bool stream) {
  Drive(out, n, stream, [b, s](auto d, size_t i) { return Op()(hn::Set(d, s), hn::LoadU(d, b + i)); });
}

// Non-template per-dtype wrappers (HWY_EXPORT takes plain names in 1.0.3).
#define TENSOR_HWY_BINARY(X) X(Add, AddV) X(Sub, SubV) X(Mul, MulV) X(Div, DivV)
#define TENSOR_X(name, op)                                                                            \
  void name##F32(const float* a, const float* b, float* o, size_t n, bool st) {                       \
    VecVec<float, op>(a, b, o, n, st);                                                                \
  }                                                                                                   \
  void name##F64(const double* a, const double* b, double* o, size_t n, bool st) {                    \
    VecVec<double, op>(a, b, o, n, st);                                                               \
  }                                                                                                   \
  void name##ScalarF32(const float* a, float s, float* o, size_t n, bool st) {                        \
    VecScalar<float, op>(a, s, o, n, st);                                                             \
  }                                                                                                   \
  void name##ScalarF64(const double* a, double s, double* o, size_t n, bool st) {                     \
    VecScalar<double, op>(a, s, o, n, st);                                                            \
  }                                                                                                   \
  void name##RScalarF32(float s, const float* b, float* o, size_t n, bool st) {                       \
    ScalarVec<float, op>(s, b, o, n, st);                                                             \
  }                                                                                                   \
  void name##RScalarF64(double s, const double* b, double* o, size_t n, bool st) {                    \
    ScalarVec<double, op>(s, b, o, n, st);                                                            \
  }
TENSOR_HWY_BINARY(TENSOR_X)
#undef TENSOR_X

const char* TargetNameHere() { return hwy::TargetName(HWY_TARGET); }

}  // namespace HWY_NAMESPACE
}  // namespace tensor::cpu::simd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace tensor::cpu::simd {

#define TENSOR_X(name, op)     \
  HWY_EXPORT(name##F32);       \
  HWY_EXPORT(name##F64);       \
  HWY_EXPORT(name##ScalarF32); \
  HWY_EXPORT(name##ScalarF64); \
  HWY_EXPORT(name##RScalarF32); \
  HWY_EXPORT(name##RScalarF64);
TENSOR_HWY_BINARY(TENSOR_X)
#undef TENSOR_X
HWY_EXPORT(TargetNameHere);

namespace {

// Runs of at least this many elements (4 MB of f32) are split into chunks on
// parallel_chunks. One core does not reach the machine's bandwidth; two threads come
// closer. The chunked pool, unlike the OpenMP regions this replaced, does not wait for a
// descheduled helper, so two threads stay ahead of one also with the second core busy.
// How to re-measure:
// `scripts/bench-torch.sh -- --only ops --filter 16M` with OMP_NUM_THREADS=1 and 2,
// alternately, idle and under load.
constexpr std::size_t kParallelBinaryElems = std::size_t{1} << 20;
// Fresh outputs of at least this many bytes (half the 32 MiB L3) are written with
// non-temporal stores: an allocating add then costs little more than an in-place one,
// where cached stores nearly double it (the new output's lines are first read). Below the
// output may still be in L3 for the next op, so stores go through the cache.
constexpr std::size_t kStreamBytes = std::size_t{16} << 20;

// Whether [out, out + n) is large and overlaps neither input (nullptr: a scalar).
template <class T>
bool streams(const T* out, const T* a, const T* b, std::size_t n) {
  if (n * sizeof(T) < kStreamBytes) return false;
  const auto o = reinterpret_cast<std::uintptr_t>(out), bytes = n * sizeof(T);
  auto overlaps = [&](const T* x) {
    const auto p = reinterpret_cast<std::uintptr_t>(x);
    return x && p < o + bytes && o < p + bytes;
  };
  return !overlaps(a) && !overlaps(b);
}

// f(begin, count) over the whole run, or over chunks (stream_chunk) shared out on
// parallel_chunks as threads come free (a descheduled helper leaves its chunks to the
// caller; no OpenMP region, whose spinning workers would compete with the helpers).
template <class F>
void split(std::size_t n, std::size_t min_parallel, F&& f) {
  if (n >= min_parallel) {
    const std::size_t len = stream_chunk(n);
    auto chunk = [&](std::size_t c) {
      const std::size_t b = c * len;
      f(b, std::min(n, b + len) - b);
    };
    parallel_chunks((n + len - 1) / len, chunk);
    return;
  }
  f(std::size_t{0}, n);
}

}  // namespace

#define TENSOR_SWITCH(fn_suffix, ...)                                             \
  switch (op) {                                                                   \
    case BinOp::Add: HWY_DYNAMIC_DISPATCH(Add##fn_suffix)(__VA_ARGS__); return; \
    case BinOp::Sub: HWY_DYNAMIC_DISPATCH(Sub##fn_suffix)(__VA_ARGS__); return; \
    case BinOp::Mul: HWY_DYNAMIC_DISPATCH(Mul##fn_suffix)(__VA_ARGS__); return; \
    case BinOp::Div: HWY_DYNAMIC_DISPATCH(Div##fn_suffix)(__VA_ARGS__); return; \
  }

void binary_f32(BinOp op, const float* a, const float* b, float* out, size_t n) {
  const bool st = streams(out, a, b, n);
  split(n, kParallelBinaryElems, [&](size_t i, size_t m) { TENSOR_SWITCH(F32, a + i, b + i, out + i, m, st) });
}
void binary_f64(BinOp op, const double* a, const double* b, double* out, size_t n) {
  const bool st = streams(out, a, b, n);
  split(n, kParallelBinaryElems, [&](size_t i, size_t m) { TENSOR_SWITCH(F64, a + i, b + i, out + i, m, st) });
}
void binary_scalar_f32(BinOp op, const float* a, float s, float* out, size_t n) {
  const bool st = streams(out, a, static_cast<const float*>(nullptr), n);
  split(n, kParallelBinaryElems, [&](size_t i, size_t m) { TENSOR_SWITCH(ScalarF32, a + i, s, out + i, m, st) });
}
void binary_scalar_f64(BinOp op, const double* a, double s, double* out, size_t n) {
  const bool st = streams(out, a, static_cast<const double*>(nullptr), n);
  split(n, kParallelBinaryElems, [&](size_t i, size_t m) { TENSOR_SWITCH(ScalarF64, a + i, s, out + i, m, st) });
}
void binary_rscalar_f32(BinOp op, float s, const float* b, float* out, size_t n) {
  const bool st = streams(out, static_cast<const float*>(nullptr), b, n);
  split(n, kParallelBinaryElems, [&](size_t i, size_t m) { TENSOR_SWITCH(RScalarF32, s, b + i, out + i, m, st) });
}
void binary_rscalar_f64(BinOp op, double s, const double* b, double* out, size_t n) {
  const bool st = streams(out, static_cast<const double*>(nullptr), b, n);
  split(n, kParallelBinaryElems, [&](size_t i, size_t m) { TENSOR_SWITCH(RScalarF64, s, b + i, out + i, m, st) });
}
#undef TENSOR_SWITCH

const char* target_name() { return HWY_DYNAMIC_DISPATCH(TargetNameHere)(); }

}  // namespace tensor::cpu::simd

namespace tensor::cpu {

std::vector<std::int64_t> compiled_targets() { return hwy::SupportedAndGeneratedTargets(); }
const char* current_target_name() { return simd::target_name(); }

}  // namespace tensor::cpu
#endif  // HWY_ONCE
