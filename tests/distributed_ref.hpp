// The reference side of the tensor::dist tests (distributed_test.cpp on the in-process group,
// distributed_mpi_test.cpp under mpirun): each rank's input computed from its rank number, the
// reductions of those inputs computed here in rank order, and the calls under test.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include <tensor/distributed.hpp>

#include "test_util.hpp"

namespace dist_ref {

using namespace tensor;
using tt::Host;

inline Device dev() {
  const char* env = std::getenv("TENSOR_TEST_DEVICE");
  return env && *env ? Device::parse(env) : Device::cpu();
}

const std::vector<DType> kDTypes = {DType::F32, DType::F64, DType::F16, DType::BF16, DType::I32, DType::I64};
const std::vector<dist::ReduceOp> kOps = {dist::ReduceOp::Sum, dist::ReduceOp::Mean, dist::ReduceOp::Max, dist::ReduceOp::Min};

// Rank r's input: shape `shape`, values differing per rank and element, with fractions that
// make the f32 sum's rounding depend on the order.
inline Host input(int r, DType dt, std::vector<std::size_t> shape) {
  Host h;
  h.shape = std::move(shape);
  h.dtype = dt;
  const std::size_t n = h.size();
  for (std::size_t k = 0; k < n; ++k) {
    const int sign = (k + static_cast<std::size_t>(r)) % 3 == 0 ? -1 : 1;
    if (tt::is_fl(dt))
      h.f.push_back(tt::round_to(dt, sign * (0.1 * (r + 1) + 1.37 * static_cast<double>(k) + 0.013 * r * r)));
    else
      h.i.push_back(sign * (7 * r + 3 * static_cast<std::int64_t>(k) + 1));
  }
  return h;
}

// The reduction of ins[0], ins[1], ... in that order, as the contract defines it: f16/bf16
// and f32 accumulate in float, f64 in double, ints in int64 (values here never overflow),
// Mean divides the sum by the count (truncating for ints), then rounds to the dtype.
inline Host reduce_ref(const std::vector<Host>& ins, dist::ReduceOp op) {
  Host out = ins[0];
  const std::size_t n = out.size();
  const int count = static_cast<int>(ins.size());
  const bool as_double = out.dtype == DType::F64;
  for (std::size_t k = 0; k < n; ++k) {
    if (out.floaty()) {
      double acc = ins[0].f[k];
      for (int r = 1; r < count; ++r) {
        const double x = ins[static_cast<std::size_t>(r)].f[k];
        if (op == dist::ReduceOp::Max) acc = x > acc ? x : acc;
        else if (op == dist::ReduceOp::Min) acc = x < acc ? x : acc;
        else acc = as_double ? acc + x : static_cast<double>(static_cast<float>(acc) + static_cast<float>(x));
      }
      if (op == dist::ReduceOp::Mean)
        acc = as_double ? acc / count : static_cast<double>(static_cast<float>(acc) / static_cast<float>(count));
      out.f[k] = tt::round_to(out.dtype, acc);
    } else {
      std::int64_t acc = ins[0].i[k];
      for (int r = 1; r < count; ++r) {
        const std::int64_t x = ins[static_cast<std::size_t>(r)].i[k];
        if (op == dist::ReduceOp::Max) acc = std::max(acc, x);
        else if (op == dist::ReduceOp::Min) acc = std::min(acc, x);
        else acc += x;
      }
      if (op == dist::ReduceOp::Mean) acc /= count;
      out.i[k] = acc;
    }
  }
  return out;
}

// Runs fn(rank) on a LocalGroup of n and returns each rank's result.
template <class F>
std::vector<TensorData> on_group(int n, F fn) {
  std::vector<TensorData> out(static_cast<std::size_t>(n));
  dist::LocalGroup group(n);
  group.run([&](int r) { out[static_cast<std::size_t>(r)] = fn(r); });
  return out;
}

// A collective applied to a rank-2 tensor of the right kind for dt.
enum class Coll { all_reduce, broadcast, all_gather, reduce_scatter };
template <class K>
TensorData apply(Coll c, const Tensor<2, K>& t, dist::ReduceOp op, int root) {
  switch (c) {
    case Coll::all_reduce: return dist::all_reduce(t, op).into_data();
    case Coll::broadcast: return dist::broadcast(t, root).into_data();
    case Coll::all_gather: return dist::all_gather(t).into_data();
    case Coll::reduce_scatter: return dist::reduce_scatter(t, op).into_data();
  }
  return {};
}
inline TensorData apply_host(Coll c, const Host& h, dist::ReduceOp op, int root) {
  if (tt::is_fl(h.dtype)) return apply(c, Tensor<2>::from_data(tt::encode(h), dev()), op, root);
  return apply(c, Tensor<2, Int>::from_data(tt::encode(h), dev()), op, root);
}

// Rows [first, first + count) of a row-major host tensor.
inline Host rows(const Host& h, std::size_t first, std::size_t count) {
  Host out = h;
  const std::size_t w = h.size() / h.shape[0];
  out.shape[0] = count;
  if (h.floaty()) out.f.assign(h.f.begin() + static_cast<std::ptrdiff_t>(first * w), h.f.begin() + static_cast<std::ptrdiff_t>((first + count) * w));
  else out.i.assign(h.i.begin() + static_cast<std::ptrdiff_t>(first * w), h.i.begin() + static_cast<std::ptrdiff_t>((first + count) * w));
  return out;
}

inline void expect_host_eq(const Host& got, const Host& want, const std::string& what) {
  EXPECT_EQ(got.shape, want.shape) << what;
  EXPECT_EQ(got.dtype, want.dtype) << what;
  if (want.floaty()) EXPECT_EQ(got.f, want.f) << what;
  else EXPECT_EQ(got.i, want.i) << what;
}

}  // namespace dist_ref
