// Highway kernels for contiguous f32/f64 add/sub/mul/div (vector-vector, vector-scalar
// and reversed scalar-vector), compiled once per target and picked at run time.
#include "backends/cpu/binary_hwy.hpp"
#include "backends/cpu/cpu_info.hpp"

#include <algorithm>

#if TENSOR_HAVE_OPENMP
#include <omp.h>
#endif

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backends/cpu/binary_hwy.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace tensor::cpu::simd {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

struct AddV { template <class V> HWY_INLINE V operator()(V a, V b) const { return hn::Add(a, b); } };
struct SubV { template <class V> HWY_INLINE V operator()(V a, V b) const { return hn::Sub(a, b); } };
struct MulV { template <class V> HWY_INLINE V operator()(V a, V b) const { return hn::Mul(a, b); } };
struct DivV { template <class V> HWY_INLINE V operator()(V a, V b) const { return hn::Div(a, b); } };

// No HWY_RESTRICT: `out` may alias an input element for element (in-place ops).
template <class T, class Op>
HWY_INLINE void VecVec(const T* a, const T* b, T* out, size_t n) {
  const hn::ScalableTag<T> d;
  const size_t N = hn::Lanes(d);
  const Op op;
  size_t i = 0;
  for (; i + 2 * N <= n; i += 2 * N) {
    const auto r0 = op(hn::LoadU(d, a + i), hn::LoadU(d, b + i));
    const auto r1 = op(hn::LoadU(d, a + i + N), hn::LoadU(d, b + i + N));
    hn::StoreU(r0, d, out + i);
    hn::StoreU(r1, d, out + i + N);
  }
  for (; i + N <= n; i += N) hn::StoreU(op(hn::LoadU(d, a + i), hn::LoadU(d, b + i)), d, out + i);
  const hn::CappedTag<T, 1> d1;
  for (; i < n; ++i) hn::StoreU(op(hn::LoadU(d1, a + i), hn::LoadU(d1, b + i)), d1, out + i);
}

template <class T, class Op>
HWY_INLINE void VecScalar(const T* a, T s, T* out, size_t n) {
  const hn::ScalableTag<T> d;
  const size_t N = hn::Lanes(d);
  const Op op;
  const auto vs = hn::Set(d, s);
  size_t i = 0;
  for (; i + 2 * N <= n; i += 2 * N) {
    const auto r0 = op(hn::LoadU(d, a + i), vs);
    const auto r1 = op(hn::LoadU(d, a + i + N), vs);
    hn::StoreU(r0, d, out + i);
    hn::StoreU(r1, d, out + i + N);
  }
  for (; i + N <= n; i += N) hn::StoreU(op(hn::LoadU(d, a + i), vs), d, out + i);
  const hn::CappedTag<T, 1> d1;
  const auto vs1 = hn::Set(d1, s);
  for (; i < n; ++i) hn::StoreU(op(hn::LoadU(d1, a + i), vs1), d1, out + i);
}

template <class T, class Op>
HWY_INLINE void ScalarVec(T s, const T* b, T* out, size_t n) {
  const hn::ScalableTag<T> d;
  const size_t N = hn::Lanes(d);
  const Op op;
  const auto vs = hn::Set(d, s);
  size_t i = 0;
  for (; i + 2 * N <= n; i += 2 * N) {
    const auto r0 = op(vs, hn::LoadU(d, b + i));
    const auto r1 = op(vs, hn::LoadU(d, b + i + N));
    hn::StoreU(r0, d, out + i);
    hn::StoreU(r1, d, out + i + N);
  }
  for (; i + N <= n; i += N) hn::StoreU(op(vs, hn::LoadU(d, b + i)), d, out + i);
  const hn::CappedTag<T, 1> d1;
  const auto vs1 = hn::Set(d1, s);
  for (; i < n; ++i) hn::StoreU(op(vs1, hn::LoadU(d1, b + i)), d1, out + i);
}

// Non-template per-dtype wrappers (HWY_EXPORT takes plain names in 1.0.3).
#define TENSOR_HWY_BINARY(X) X(Add, AddV) X(Sub, SubV) X(Mul, MulV) X(Div, DivV)
#define TENSOR_X(name, op)                                                                                   \
  void name##F32(const float* a, const float* b, float* o, size_t n) { VecVec<float, op>(a, b, o, n); }      \
  void name##F64(const double* a, const double* b, double* o, size_t n) { VecVec<double, op>(a, b, o, n); }  \
  void name##ScalarF32(const float* a, float s, float* o, size_t n) { VecScalar<float, op>(a, s, o, n); }    \
  void name##ScalarF64(const double* a, double s, double* o, size_t n) { VecScalar<double, op>(a, s, o, n); } \
  void name##RScalarF32(float s, const float* b, float* o, size_t n) { ScalarVec<float, op>(s, b, o, n); }   \
  void name##RScalarF64(double s, const double* b, double* o, size_t n) { ScalarVec<double, op>(s, b, o, n); }
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

// Runs (transposes) of at least this many elements are split across OpenMP threads.
// Measured on the 2-core development machine (shared, so the sibling core is usually
// busy): two threads were slower than one for every size up to 16 M elements (add
// 14 vs 8.5 ms, sum 14 vs 3-6 ms, exp equal), so splitting starts only at 64 M.
constexpr std::size_t kParallelBinaryElems = std::size_t{1} << 26;

// f(begin, count) over the whole run, or over one chunk per thread.
template <class F>
void split(std::size_t n, F&& f) {
#if TENSOR_HAVE_OPENMP
  const int threads = omp_get_max_threads();
  if (n >= kParallelBinaryElems && threads > 1 && !omp_in_parallel()) {
    const std::size_t step = (n / static_cast<std::size_t>(threads) + 16) / 16 * 16;
#pragma omp parallel for schedule(static)
    for (int c = 0; c < threads; ++c) {
      const std::size_t b = std::min(n, static_cast<std::size_t>(c) * step), e = std::min(n, b + step);
      if (e > b) f(b, e - b);
    }
    return;
  }
#endif
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
  split(n, [&](size_t i, size_t m) { TENSOR_SWITCH(F32, a + i, b + i, out + i, m) });
}
void binary_f64(BinOp op, const double* a, const double* b, double* out, size_t n) {
  split(n, [&](size_t i, size_t m) { TENSOR_SWITCH(F64, a + i, b + i, out + i, m) });
}
void binary_scalar_f32(BinOp op, const float* a, float s, float* out, size_t n) {
  split(n, [&](size_t i, size_t m) { TENSOR_SWITCH(ScalarF32, a + i, s, out + i, m) });
}
void binary_scalar_f64(BinOp op, const double* a, double s, double* out, size_t n) {
  split(n, [&](size_t i, size_t m) { TENSOR_SWITCH(ScalarF64, a + i, s, out + i, m) });
}
void binary_rscalar_f32(BinOp op, float s, const float* b, float* out, size_t n) {
  split(n, [&](size_t i, size_t m) { TENSOR_SWITCH(RScalarF32, s, b + i, out + i, m) });
}
void binary_rscalar_f64(BinOp op, double s, const double* b, double* out, size_t n) {
  split(n, [&](size_t i, size_t m) { TENSOR_SWITCH(RScalarF64, s, b + i, out + i, m) });
}
#undef TENSOR_SWITCH

const char* target_name() { return HWY_DYNAMIC_DISPATCH(TargetNameHere)(); }

}  // namespace tensor::cpu::simd

namespace tensor::cpu {

std::vector<std::int64_t> compiled_targets() { return hwy::SupportedAndGeneratedTargets(); }
const char* current_target_name() { return simd::target_name(); }

}  // namespace tensor::cpu
#endif  // HWY_ONCE
