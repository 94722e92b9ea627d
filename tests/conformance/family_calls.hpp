// One "call family F with sample arguments" table for the runners that put every op of the
// table through two devices or two paths and compare the results: tools/op_check.cpp
// (`tensorctl check`: a device against the CPU backend) and tests/conformance/
// defaults_test.cpp (the default compositions against the CPU's native entries). The
// caller makes the operands (its data, layout and devices); the dims, scalars and options
// of each family are fixed here, once. The module ops keep their own recipes (shapes and
// options per op) in each runner.
#pragma once

#include <functional>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "dispatch/dispatch.hpp"

namespace tensor::family_calls {

using namespace tensor::dispatch;

// What a family call needs; every operand is made on demand on `device`.
struct Operands {
  DeviceId device{};
  DType dtype = DType::F32;
  DType cast_to = DType::F32;  // the target of `cast`: another dtype of the same kind
  std::size_t rows = 0, cols = 0;
  std::function<DispatchTensor()> a;     // [rows, cols], in the caller's layout
  std::function<DispatchTensor()> b;     // the second operand: [rows, cols]; matmul [cols, n];
                                         // slice_assign [3, 3]; cross [rows, 3]; the select
                                         // families [rows, 4]
  std::function<DispatchTensor()> idx;   // int, in [0, cols): [rows, cols]; the select families [4];
                                         // powi: the exponents
  std::function<DispatchTensor()> mask;  // bool [rows, cols]
  const TensorData* a_host = nullptr;     // a's host data (from_data uploads it as it is)
  std::span<const IndexingUpdateOp> update_rules;  // the rules the update families run, one output each
};

inline std::vector<DispatchTensor> one(DispatchTensor t) {
  std::vector<DispatchTensor> v;
  v.push_back(std::move(t));
  return v;
}
inline std::vector<DispatchTensor> two(std::pair<DispatchTensor, DispatchTensor> p) {
  std::vector<DispatchTensor> v;
  v.push_back(std::move(p.first));
  v.push_back(std::move(p.second));
  return v;
}

// Whether `call` has a sample call for family f: everything but the module ops (each runner
// has its own recipes), the nd indexing ops and grid sampling (checked with values in
// tests/burn_api_test.cpp), flags, queries, transactions and the device-level entries.
inline bool has_call(Family f) {
  switch (f) {
    case Family::Conv: case Family::ConvBackward: case Family::ConvBiasBackward: case Family::Pool:
    case Family::PoolWithIndices: case Family::PoolBackward: case Family::MaxPoolBackward: case Family::Interpolate:
    case Family::InterpolateBackward: case Family::Embedding: case Family::EmbeddingBackward: case Family::LayerNorm:
    case Family::Attention: case Family::Rfft: case Family::Irfft: case Family::Linear: case Family::BatchNorm:
    case Family::Unfold4d: case Family::CtcLoss: case Family::CtcLossBackward: case Family::DeformConv:
    case Family::DeformConvBackward:
    case Family::GatherNd: case Family::ScatterNd: case Family::GridSample:
    case Family::SetFlag: case Family::Query: case Family::Transaction:
    case Family::DevName: case Family::DevSeed: case Family::DevAction: case Family::DevUsage: case Family::DevSupports:
    case Family::DevFlag: case Family::DevCount: case Family::DevMemory: case Family::DevSettings:
      return false;
    default:
      return true;
  }
}

// The outputs of `op` on the sample arguments; `values` false when only dtype and shape
// are defined (random, empty). nullopt: the family has no sample call here (module ops,
// the nd indexing ops, device-level entries).
inline std::optional<std::vector<DispatchTensor>> call(OpCode op, const Operands& in, bool& values) {
  values = true;
  const DeviceId d = in.device;
  const Kind k = kind_of_dtype(in.dtype);
  const bool is_int_k = k == Kind::Int, is_bool_k = k == Kind::Bool;
  const auto& A = in.a;
  const auto& B = in.b;
  const auto& I = in.idx;
  const auto& M = in.mask;
  auto updates = [&](auto&& run) {
    std::vector<DispatchTensor> outs;
    for (IndexingUpdateOp u : in.update_rules) outs.push_back(run(u));
    return outs;
  };
  switch (op_family(op)) {
    case Family::Unary: return one(unary(op, A()));
    case Family::Binary: return one(binary(op, A(), B()));
    case Family::Scalar: {
      Scalar s = is_int_k ? Scalar(3) : Scalar(0.75);
      if (op == OpCode::powi_scalar || op == OpCode::powi_scalar_impl) s = Scalar(3);
      if (op == OpCode::bitwise_left_shift_scalar || op == OpCode::bitwise_right_shift_scalar) s = Scalar(2);
      return one(scalar(op, A(), s));
    }
    case Family::Clamp:
      // A negative bound on an unsigned tensor acts as 0 (bounds saturate to the dtype).
      return one(clamp(op, A(), is_int_k ? Scalar(-2) : Scalar(-0.5), is_int_k ? Scalar(3) : Scalar(0.75)));
    case Family::Compare: return one(compare(op, A(), B()));
    case Family::CompareScalar: return one(compare_scalar(op, A(), is_bool_k ? Scalar(true) : Scalar(1)));
    case Family::Predicate: return one(predicate(op, A()));
    case Family::Matmul: return one(matmul(A(), B()));
    case Family::Cross: return one(cross(A(), B(), 1));
    case Family::PowI: return one(powi(A(), I()));
    case Family::Reduce: return one(reduce(op, A()));
    case Family::Dim: return one(reduce_dim(op, A(), 1));
    case Family::DimIndex: return one(dim_index(op, A(), 1));
    case Family::DimWithIndices: return two(dim_with_indices(op, A(), 1));
    case Family::AnyAll: return one(any_all(op, A()));
    case Family::AnyAllDim: return one(any_all_dim(op, A(), 0));
    case Family::Cast: {
      const DType to = op == OpCode::into_float ? DType::F32 : op == OpCode::into_int ? DType::I32 : in.cast_to;
      return one(cast(op, A(), to));
    }
    case Family::Reshape: {
      if (op == OpCode::reshape) {
        const std::int64_t dims[] = {-1};
        return one(reshape(op, A(), dims));
      }
      const std::int64_t dims[] = {3, static_cast<std::int64_t>(in.rows), static_cast<std::int64_t>(in.cols)};
      return one(reshape(op, A(), dims));
    }
    case Family::SwapDims: return one(swap_dims(A(), 0, 1));
    case Family::Axes: {
      const std::int64_t ax[] = {1, 0};
      return one(axes(op, A(), op == OpCode::flip ? std::span<const std::int64_t>(ax, 1) : std::span<const std::int64_t>(ax, 2)));
    }
    case Family::Slice: {
      const tensor::Slice sl[] = {{1, std::nullopt, 2}, {0, std::nullopt, -2}};
      return one(slice(A(), sl));
    }
    case Family::SliceAssign: {
      const tensor::Slice sl[] = {{1, 4, 1}, {2, 7, 2}};
      return one(slice_assign(A(), sl, B()));
    }
    case Family::RepeatDim: return one(repeat_dim(A(), 0, 3));
    case Family::Cat: {
      std::vector<DispatchTensor> parts;
      parts.push_back(A());
      parts.push_back(B());
      return one(dispatch::cat(std::move(parts), 1));
    }
    case Family::Unfold: return one(unfold(A(), 1, 4, 3));
    case Family::Gather: return one(gather(A(), 1, I()));
    case Family::Scatter: return one(scatter(op, A(), 1, I(), B(), IndexingUpdateOp::Add));
    case Family::ScatterUpdate:
      return updates([&](IndexingUpdateOp u) { return scatter(op, A(), 1, I(), B(), u); });
    case Family::Select: return one(select(A(), 1, I()));
    case Family::SelectAssign: return one(select_assign(op, A(), 1, I(), B(), IndexingUpdateOp::Add));
    case Family::SelectUpdate:
      return updates([&](IndexingUpdateOp u) { return select_assign(op, A(), 1, I(), B(), u); });
    case Family::MaskWhere: return one(mask_where(A(), M(), B()));
    case Family::MaskFill: return one(mask_fill(A(), M(), is_bool_k ? Scalar(true) : Scalar(5)));
    case Family::MaskSelect: return one(mask_select(A(), M()));
    case Family::Argwhere: return one(argwhere(A()));
    case Family::Sort: return one(dispatch::sort(A(), 1, false));
    case Family::SortWithIndices: return two(sort_with_indices(A(), 1, true));
    case Family::Argsort: return one(argsort(A(), 0, false));
    case Family::TopK: return one(topk(A(), 1, 4));
    case Family::TopKWithIndices: return two(topk_with_indices(A(), 1, 3));
    case Family::ArgTopK: return one(argtopk(A(), 0, 2));
    case Family::Create:
      values = op != OpCode::empty;
      return one(create(op, Shape{in.rows, in.cols}, d, k, in.dtype));
    case Family::Full: return one(full(Shape{in.rows, in.cols}, is_bool_k ? Scalar(true) : Scalar(3), d, k, in.dtype));
    case Family::Range: return one(arange(-4, 9, 1, d, in.dtype));
    case Family::RangeStep: return one(arange(-4, 29, 3, d, in.dtype));
    case Family::Random:  // generators differ per device: only dtype and shape are compared
      values = false;
      return one(random(Shape{in.rows, in.cols}, Distribution{}, d, k, in.dtype));
    case Family::FromData:
      if (!in.a_host) return std::nullopt;
      return one(from_data(*in.a_host, d, k));
    case Family::IntoData: return one(A());
    case Family::ToDevice: return one(to_device(A(), d));
    default: return std::nullopt;
  }
}

}  // namespace tensor::family_calls
