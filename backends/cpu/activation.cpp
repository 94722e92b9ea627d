// Activations on the CPU: relu, leaky_relu, gelu (exact erf form), sigmoid and
// log_sigmoid (overflow-safe), hard_sigmoid, prelu, the relu / gelu / sigmoid /
// log_sigmoid backward entries, and softmax / log_softmax / softmin along any dim
// (numerically stable: the last dim row by row in L1, max, then sum of exp, then the
// scaled write; an outer dim in two passes over memory with running max / sum states). Contiguous runs
// go to the fused Highway kernels of act_hwy.cpp; other rows use the same formula per
// element. Float dtypes only; halves compute through f32.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

#include "backends/cpu/act_hwy.hpp"
#include "backends/cpu/cpu_ops.hpp"
#include "backends/cpu/elementwise.hpp"
#include "backends/cpu/parallel.hpp"

namespace tensor::cpu {
namespace {

using dispatch::Prim;

// Softmax along an outer dim: chunks of rows and lanes are spread over threads from this
// many elements (exps per element, compute-bound; chosen as the math ops in act_hwy.cpp).
constexpr std::size_t kParallelSoftElems = std::size_t{1} << 18;

using simd::Act2Op;
using simd::ActOp;

// Halves (and bf16) through f32 in blocks that stay in L1 (o may alias x).
constexpr std::size_t kBlock = 512;

template <class T>
struct ActFn {
  ActOp op;
  calc_t<T> p, q;
  T operator()(T a) const { return st<T>(simd::act_ref(op, ld(a), p, q)); }
  void vv(T* o, const T* x, std::size_t n) const {
    if constexpr (std::is_same_v<T, float>) {
      simd::act_f32(op, x, o, n, p, q);
    } else if constexpr (std::is_same_v<T, double>) {
      simd::act_f64(op, x, o, n, p, q);
    } else {
      float buf[kBlock];
      for (std::size_t i = 0; i < n; i += kBlock) {
        const std::size_t m = std::min(kBlock, n - i);
        for (std::size_t k = 0; k < m; ++k) buf[k] = ld(x[i + k]);
        simd::act_f32(op, buf, buf, m, p, q);
        for (std::size_t k = 0; k < m; ++k) o[i + k] = st<T>(buf[k]);
      }
    }
  }
};

Prim act_impl(ActOp op, Prim pa, double p, double q) {
  const DType dt = pa->dtype();
  return map_same_dtype(std::move(pa), [&](auto tag, auto apply) {
    using T = decltype(tag);
    if constexpr (dispatch::kIsFloatLike<T>) {
      apply(ActFn<T>{op, static_cast<calc_t<T>>(p), static_cast<calc_t<T>>(q)});
    } else {
      throw_unsupported_dtype("an activation (float dtypes only)", dt);
    }
  });
}

template <ActOp kOp>
Prim act_entry(Prim a) { return act_impl(kOp, std::move(a), 0.0, 0.0); }
Prim leaky_relu_entry(Prim a, Scalar slope) { return act_impl(ActOp::LeakyRelu, std::move(a), slope.to_double(), 0.0); }
Prim hard_sigmoid_entry(Prim a, Scalar alpha, Scalar beta) {
  return act_impl(ActOp::HardSigmoid, std::move(a), alpha.to_double(), beta.to_double());
}

// ---- two-input entries: prelu and the backward ops (broadcasting, same dtype) -----

template <class T>
struct Act2Fn {
  Act2Op op;
  T operator()(T a, T b) const { return st<T>(simd::act2_ref(op, ld(a), ld(b))); }
  void run(T* o, const T* a, const T* b, bool bs, std::size_t n) const {
    if constexpr (std::is_same_v<T, float>) {
      simd::act2_f32(op, a, b, bs, o, n);
    } else if constexpr (std::is_same_v<T, double>) {
      simd::act2_f64(op, a, b, bs, o, n);
    } else {
      float fa[kBlock], fb[kBlock];
      if (bs) fb[0] = ld(b[0]);
      for (std::size_t i = 0; i < n; i += kBlock) {
        const std::size_t m = std::min(kBlock, n - i);
        for (std::size_t k = 0; k < m; ++k) fa[k] = ld(a[i + k]);
        if (!bs)
          for (std::size_t k = 0; k < m; ++k) fb[k] = ld(b[i + k]);
        simd::act2_f32(op, fa, fb, bs, fa, m);
        for (std::size_t k = 0; k < m; ++k) o[i + k] = st<T>(fa[k]);
      }
    }
  }
  void vv(T* o, const T* a, const T* b, std::size_t n) const { run(o, a, b, false, n); }
  void vs(T* o, const T* a, T b, std::size_t n) const { run(o, a, &b, true, n); }
};

template <Act2Op kOp>
Prim act2_entry(Prim pa, Prim pb) {
  CpuRef a = as_cpu(std::move(pa));
  CpuRef b = as_cpu(std::move(pb));
  const Shape shape = broadcast_shape(a->shape(), b->shape());
  const DType dt = a->dtype();
  const std::size_t es = a->elem_size();
  CpuRef out = reusable(*a, shape, es) ? a : reusable(*b, shape, es) ? b : alloc_tensor(dt, shape);
  const auto sa = broadcast_strides(a->shape(), a->strides(), shape);
  const auto sb = broadcast_strides(b->shape(), b->strides(), shape);
  const auto plan = make_plan<3>(shape, {out->layout().strides.data(), sa.data(), sb.data()}, {es, es, es});
  dispatch::visit_dtype(dt, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (dispatch::kIsFloatLike<T>) {
      Act2Fn<T> fn{kOp};
      map2<T, T, T>(plan, out->data(), a->data(), b->data(), fn);
    } else {
      throw_unsupported_dtype("an activation (float dtypes only)", dt);
    }
  });
  return out;
}

// ---- softmax family along a dim ---------------------------------------------------------

// Softmax of a row-major [outer, n, inner] f32/f64 array along n (inner > 1), in two
// passes over memory: chunks of (group of rows, block of lanes) fold their rows into
// per-lane running max / sum states (soft_cols_stats), each block's group states are
// joined in group order (the result depends on the shape only, never on the thread
// count), then the same chunks write the result. A block of kCols lanes keeps its state
// in L1 (12-16 KB) while whole contiguous rows stream by; groups of rows give the
// threads work even where the lanes are few (softmax(0) of [4096, 1024]: 16 chunks).
template <class T>
void soft_outer(simd::SoftOp op, const T* x, T* o, std::size_t outer, std::size_t n, std::size_t inner) {
  constexpr std::size_t kCols = 1024, kMinRows = 64, kMaxGroups = 16;
  const std::size_t cols = std::min(inner, kCols), blocks = (inner + cols - 1) / cols;
  const std::size_t rows = std::max(kMinRows, (n + kMaxGroups - 1) / kMaxGroups);
  const std::size_t groups = (n + rows - 1) / rows;
  const std::size_t chunks = outer * blocks * groups;
  // State of chunk (ob, blk, grp): lanes at ((ob * blocks + blk) * groups + grp) * cols.
  std::vector<T> pm(chunks * cols, -std::numeric_limits<T>::infinity());
  std::vector<double> ps(chunks * cols, 0.0);
  std::vector<T> fin(2 * outer * blocks * cols);  // per (ob, blk): M then scale
  struct Chunk {
    std::size_t ob, blk, grp, k0, k1, ib, m;
  };
  auto chunk = [&](std::size_t t) {
    const std::size_t grp = t % groups, blk = (t / groups) % blocks, ob = t / (groups * blocks);
    const std::size_t k0 = grp * rows, ib = blk * cols;
    return Chunk{ob, blk, grp, k0, std::min(n, k0 + rows), ib, std::min(cols, inner - ib)};
  };
  const bool threads = outer * n * inner >= kParallelSoftElems;
  auto stats = [&](std::size_t t) {
    const Chunk c = chunk(t);
    const T* base = x + (c.ob * n + c.k0) * inner + c.ib;
    if constexpr (std::is_same_v<T, float>) simd::soft_cols_stats_f32(op, base, c.k1 - c.k0, inner, c.m, &pm[t * cols], &ps[t * cols]);
    else simd::soft_cols_stats_f64(op, base, c.k1 - c.k0, inner, c.m, &pm[t * cols], &ps[t * cols]);
  };
  auto write = [&](std::size_t t) {
    const Chunk c = chunk(t);
    const std::size_t off = (c.ob * n + c.k0) * inner + c.ib;
    const T* f = &fin[(c.ob * blocks + c.blk) * 2 * cols];
    if constexpr (std::is_same_v<T, float>) simd::soft_cols_write_f32(op, x + off, o + off, c.k1 - c.k0, inner, c.m, f, f + cols);
    else simd::soft_cols_write_f64(op, x + off, o + off, c.k1 - c.k0, inner, c.m, f, f + cols);
  };
  if (threads) parallel_chunks(chunks, stats);
  else for (std::size_t t = 0; t < chunks; ++t) stats(t);
  for (std::size_t b = 0; b < outer * blocks; ++b) {
    const std::size_t m = std::min(cols, inner - (b % blocks) * cols);
    T* f = &fin[b * 2 * cols];
    if constexpr (std::is_same_v<T, float>) simd::soft_cols_finish_f32(op, &pm[b * groups * cols], &ps[b * groups * cols], groups, cols, m, f, f + cols);
    else simd::soft_cols_finish_f64(op, &pm[b * groups * cols], &ps[b * groups * cols], groups, cols, m, f, f + cols);
  }
  if (threads) parallel_chunks(chunks, write);
  else for (std::size_t t = 0; t < chunks; ++t) write(t);
}

// f32/f64: the tensor made contiguous, viewed as [outer, n, inner]. The last dim
// (inner = 1) runs row by row; any other dim runs down columns, vectors across the
// contiguous inner lanes, in blocks spread over threads. Halves: each lane through
// an f32 buffer and the row kernel.
template <simd::SoftOp kS>
Prim soft_entry(Prim pa, std::size_t dim) {
  const CpuRef a = as_cpu(std::move(pa));
  const Shape& shape = a->shape();
  const std::size_t n = shape[dim];
  CpuRef out = alloc_tensor(a->dtype(), shape);
  if (shape.num_elements() == 0) return out;
  std::size_t outer = 1, inner = 1;
  for (std::size_t d = 0; d < dim; ++d) outer *= shape[d];
  for (std::size_t d = dim + 1; d < shape.rank(); ++d) inner *= shape[d];
  dispatch::visit_dtype(a->dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      const CpuRef c = to_contiguous(a);
      const T* x = at<T>(c->data());
      T* o = at<T>(out->data());
      if (inner == 1) {
        if constexpr (std::is_same_v<T, float>) simd::soft_rows_f32(kS, x, o, outer, n, n);
        else simd::soft_rows_f64(kS, x, o, outer, n, n);
        return;
      }
      soft_outer<T>(kS, x, o, outer, n, inner);
    } else if constexpr (dispatch::kIsFloatLike<T>) {
      Shape lines = shape;
      lines[dim] = 1;
      const auto e = static_cast<std::int64_t>(sizeof(T));
      const auto plan = make_plan<2>(lines, {out->layout().strides.data(), a->layout().strides.data()}, {sizeof(T), sizeof(T)});
      const std::int64_t os = out->stride(dim) * e, xs = a->stride(dim) * e;
      std::vector<float> lane(n);
      for_each_row(plan, {out->data(), a->data()}, [&](std::array<std::byte*, 2> p, std::size_t m, std::array<std::int64_t, 2> s) {
        for (std::size_t r = 0; r < m; ++r, p[0] += s[0], p[1] += s[1]) {
          const std::byte* xp = p[1];
          for (std::size_t j = 0; j < n; ++j, xp += xs) lane[j] = ld(*at<T>(xp));
          simd::soft_rows_f32(kS, lane.data(), lane.data(), 1, n, n);
          std::byte* op = p[0];
          for (std::size_t j = 0; j < n; ++j, op += os) *at<T>(op) = st<T>(lane[j]);
        }
      });
    } else {
      throw DTypeError("[softmax] expected a float dtype; got " + std::string(dtype_name(a->dtype())));
    }
  });
  return out;
}

}  // namespace

void register_activation_ops(dispatch::Backend& b) {
  b.set<OpCode::relu>(&act_entry<ActOp::Relu>);
  b.set<OpCode::gelu>(&act_entry<ActOp::Gelu>);
  b.set<OpCode::sigmoid>(&act_entry<ActOp::Sigmoid>);
  b.set<OpCode::log_sigmoid>(&act_entry<ActOp::LogSigmoid>);
  b.set<OpCode::leaky_relu>(&leaky_relu_entry);
  b.set<OpCode::hard_sigmoid>(&hard_sigmoid_entry);
  b.set<OpCode::prelu>(&act2_entry<Act2Op::Prelu>);
  b.set<OpCode::relu_backward>(&act2_entry<Act2Op::ReluGrad>);
  b.set<OpCode::gelu_backward>(&act2_entry<Act2Op::GeluGrad>);
  b.set<OpCode::sigmoid_backward>(&act2_entry<Act2Op::SigmoidGrad>);
  b.set<OpCode::log_sigmoid_backward>(&act2_entry<Act2Op::LogSigmoidGrad>);
  b.set<OpCode::softmax>(&soft_entry<simd::SoftOp::Softmax>);
  b.set<OpCode::log_softmax>(&soft_entry<simd::SoftOp::LogSoftmax>);
  b.set<OpCode::softmin>(&soft_entry<simd::SoftOp::Softmin>);
}

}  // namespace tensor::cpu
