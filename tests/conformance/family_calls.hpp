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
#include "dispatch/quant.hpp"
#include "tensor/distributed.hpp"

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

namespace detail {
// The one switch of sample calls. With `in` null it only says whether `op` has one (an empty
// vector) or not (nullopt), running nothing; so has_call and call cannot disagree.
inline std::optional<std::vector<DispatchTensor>> call_or_probe(OpCode op, const Operands* in, bool& values) {
  values = true;
  // The quant rows take quantized operands: tests/quant_rows_test.cpp checks them.
  if (tensor::dispatch::op_info(op).qrule != tensor::dispatch::QRule::None) return std::nullopt;
  using Outs = std::optional<std::vector<DispatchTensor>>;
  auto go = [&](auto&& run) -> Outs {
    if (!in) return std::vector<DispatchTensor>{};
    return run();
  };
  const DType dtype = in ? in->dtype : DType::F32;
  const DeviceId d = in ? in->device : DeviceId{};
  const Kind k = kind_of_dtype(dtype);
  const bool is_int_k = k == Kind::Int, is_bool_k = k == Kind::Bool;
  auto A = [&] { return in->a(); };
  auto B = [&] { return in->b(); };
  auto I = [&] { return in->idx(); };
  auto M = [&] { return in->mask(); };
  auto updates = [&](auto&& run) {
    std::vector<DispatchTensor> outs;
    for (IndexingUpdateOp u : in->update_rules) outs.push_back(run(u));
    return outs;
  };
  switch (op_family(op)) {
    case Family::Unary: return go([&] { return one(unary(op, A())); });
    case Family::Binary: return go([&] { return one(binary(op, A(), B())); });
    case Family::Scalar: {
      Scalar s = is_int_k ? Scalar(3) : Scalar(0.75);
      if (op == OpCode::powi_scalar || op == OpCode::powi_scalar_impl) s = Scalar(3);
      if (op == OpCode::bitwise_left_shift_scalar || op == OpCode::bitwise_right_shift_scalar) s = Scalar(2);
      return go([&] { return one(scalar(op, A(), s)); });
    }
    case Family::Clamp:
      // A negative bound on an unsigned tensor acts as 0 (bounds saturate to the dtype).
      return go([&] { return one(clamp(op, A(), is_int_k ? Scalar(-2) : Scalar(-0.5), is_int_k ? Scalar(3) : Scalar(0.75))); });
    case Family::Compare: return go([&] { return one(compare(op, A(), B())); });
    case Family::CompareScalar: return go([&] { return one(compare_scalar(op, A(), is_bool_k ? Scalar(true) : Scalar(1))); });
    case Family::Predicate: return go([&] { return one(predicate(op, A())); });
    case Family::Matmul: return go([&] { return one(matmul(A(), B())); });
    case Family::Cross: return go([&] { return one(cross(A(), B(), 1)); });
    case Family::PowI: return go([&] { return one(powi(A(), I())); });
    case Family::Reduce: return go([&] { return one(reduce(op, A())); });
    case Family::Dim: return go([&] { return one(reduce_dim(op, A(), 1)); });
    case Family::DimIndex: return go([&] { return one(dim_index(op, A(), 1)); });
    case Family::DimWithIndices: return go([&] { return two(dim_with_indices(op, A(), 1)); });
    case Family::Moments: return go([&] { return two(var_mean(A(), 1, 1)); });
    case Family::AnyAll: return go([&] { return one(any_all(op, A())); });
    case Family::AnyAllDim: return go([&] { return one(any_all_dim(op, A(), 0)); });
    case Family::Cast: {
      return go([&] {
        const DType to = op == OpCode::into_float ? DType::F32 : op == OpCode::into_int ? DType::I32 : in->cast_to;
        return one(cast(op, A(), to));
      });
    }
    case Family::Reshape:
      return go([&] {
        if (op == OpCode::reshape) {
          const std::int64_t dims[] = {-1};
          return one(reshape(op, A(), dims));
        }
        const std::int64_t dims[] = {3, static_cast<std::int64_t>(in->rows), static_cast<std::int64_t>(in->cols)};
        return one(reshape(op, A(), dims));
      });
    case Family::SwapDims: return go([&] { return one(swap_dims(A(), 0, 1)); });
    case Family::Axes: {
      const std::int64_t ax[] = {1, 0};
      return go([&] { return one(axes(op, A(), op == OpCode::flip ? std::span<const std::int64_t>(ax, 1) : std::span<const std::int64_t>(ax, 2))); });
    }
    case Family::Slice: {
      const tensor::Slice sl[] = {{1, std::nullopt, 2}, {0, std::nullopt, -2}};
      return go([&] { return one(slice(A(), sl)); });
    }
    case Family::SliceAssign: {
      const tensor::Slice sl[] = {{1, 4, 1}, {2, 7, 2}};
      return go([&] { return one(slice_assign(A(), sl, B())); });
    }
    case Family::RepeatDim: return go([&] { return one(repeat_dim(A(), 0, 3)); });
    case Family::Cat:
      return go([&] {
        std::vector<DispatchTensor> parts;
        parts.push_back(A());
        parts.push_back(B());
        return one(dispatch::cat(std::move(parts), 1));
      });
    case Family::Unfold: return go([&] { return one(unfold(A(), 1, 4, 3)); });
    case Family::Gather: return go([&] { return one(gather(A(), 1, I())); });
    case Family::Scatter: return go([&] { return one(scatter(op, A(), 1, I(), B(), IndexingUpdateOp::Add)); });
    case Family::ScatterUpdate:
      return go([&] { return updates([&](IndexingUpdateOp u) { return scatter(op, A(), 1, I(), B(), u); }); });
    case Family::Select: return go([&] { return one(select(A(), 1, I())); });
    case Family::SelectAssign: return go([&] { return one(select_assign(op, A(), 1, I(), B(), IndexingUpdateOp::Add)); });
    case Family::SelectUpdate:
      return go([&] { return updates([&](IndexingUpdateOp u) { return select_assign(op, A(), 1, I(), B(), u); }); });
    case Family::MaskWhere: return go([&] { return one(mask_where(A(), M(), B())); });
    case Family::MaskFill: return go([&] { return one(mask_fill(A(), M(), is_bool_k ? Scalar(true) : Scalar(5))); });
    case Family::MaskSelect: return go([&] { return one(mask_select(A(), M())); });
    case Family::Argwhere: return go([&] { return one(argwhere(A())); });
    case Family::Sort: return go([&] { return one(dispatch::sort(A(), 1, false)); });
    case Family::SortWithIndices: return go([&] { return two(sort_with_indices(A(), 1, true)); });
    case Family::Argsort: return go([&] { return one(argsort(A(), 0, false)); });
    case Family::TopK: return go([&] { return one(topk(A(), 1, 4)); });
    case Family::TopKWithIndices: return go([&] { return two(topk_with_indices(A(), 1, 3)); });
    case Family::ArgTopK: return go([&] { return one(argtopk(A(), 0, 2)); });
    case Family::Create:
      values = op != OpCode::empty;
      return go([&] { return one(create(op, Shape{in->rows, in->cols}, d, k, dtype)); });
    case Family::Full: return go([&] { return one(full(Shape{in->rows, in->cols}, is_bool_k ? Scalar(true) : Scalar(3), d, k, dtype)); });
    case Family::Range: return go([&] { return one(arange(-4, 9, 1, d, dtype)); });
    case Family::RangeStep: return go([&] { return one(arange(-4, 29, 3, d, dtype)); });
    case Family::Random:  // generators differ per device: only dtype and shape are compared
      values = false;
      return go([&] { return one(random(Shape{in->rows, in->cols}, Distribution{}, d, k, dtype)); });
    case Family::FromData:  // needs the caller's host data (a_host)
      return go([&]() -> std::vector<DispatchTensor> {
        if (!in->a_host) return {};
        return one(from_data(*in->a_host, d, k));
      });
    case Family::IntoData: return go([&] { return one(A()); });
    case Family::Collective:  // two ranks (a LocalGroup), each with the operand; rank 0's result
      if (op == OpCode::reduce_scatter) return std::nullopt;  // dim 0 must divide: checked in tests/distributed_test.cpp
      return go([&] {
        std::vector<DispatchTensor> out;
        tensor::dist::LocalGroup(2).run([&](int r) {
          // all_reduce: Sum; broadcast: root 1; all_gather: no argument.
          DispatchTensor t = collective(op, A(), op == OpCode::broadcast ? 1 : 0);
          if (r == 0) out = one(std::move(t));
        });
        return out;
      });
    case Family::Quantize:  // per row, q8s, scales 0.01 (i + 1); per tensor, q4f, scale 0.25: the codes
    case Family::Dequantize:  // the same two, dequantized to the operand's dtype
      return go([&] {
        auto scales = [&](std::vector<float> v) { return from_data(TensorData::from<float>(v, Shape{v.size()}), d, Kind::Float); };
        std::vector<float> rows(in->rows);
        for (std::size_t i = 0; i < rows.size(); ++i) rows[i] = 0.01f * static_cast<float>(i + 1);
        const QuantScheme per_row = QuantScheme{}.with_value(QuantValue::Q8S).with_store(QuantStore::Native).with_level(
            QuantLevel::block({1, static_cast<std::uint32_t>(in->cols)}));
        const QuantScheme per_tensor = QuantScheme{}.with_value(QuantValue::Q4F);
        DispatchTensor q1 = quant::quantize_row(A(), scales(rows), per_row);
        DispatchTensor q2 = quant::quantize_row(A(), scales({0.25f}), per_tensor);
        std::vector<DispatchTensor> out;
        if (op == OpCode::quantize) {
          out.push_back(quant::as_quant(q1)->codes());
          out.push_back(quant::as_quant(q2)->codes());
        } else {
          out.push_back(quant::dequantize_row(q1, dtype));
          out.push_back(quant::dequantize_row(q2, dtype));
        }
        return out;
      });
    case Family::QMatmul:  // x [rows, cols] times a q8s weight [cols, 3], per output column and per tensor
      // x is the recipe's own: k / 64 with |k| <= 127 and 127 in every row, so a per-row int8
      // quantization of it (the cpu's oneDNN route) is exact and the routes agree to rounding.
      return go([&] {
        std::vector<float> xv(in->rows * in->cols), wv(in->cols * 3);
        for (std::size_t i = 0; i < xv.size(); ++i)
          xv[i] = static_cast<float>(i % in->cols == 0 ? 127 : static_cast<int>(i * 37 % 255) - 127) / 64.0f;
        for (std::size_t i = 0; i < wv.size(); ++i) wv[i] = 0.05f * static_cast<float>(static_cast<int>(i % 11) - 5);
        DispatchTensor x = from_data(TensorData::from<float>(xv, Shape{in->rows, in->cols}), d, Kind::Float);
        if (dtype != DType::F32) x = cast(OpCode::cast, std::move(x), dtype);
        DispatchTensor w = from_data(TensorData::from<float>(wv, Shape{in->cols, 3}), d, Kind::Float);
        auto scales = [&](std::vector<float> v) { return from_data(TensorData::from<float>(v, Shape{v.size()}), d, Kind::Float); };
        const QuantScheme q8 = QuantScheme{}.with_value(QuantValue::Q8S).with_store(QuantStore::Native);
        const QuantScheme per_col = q8.with_level(QuantLevel::block({static_cast<std::uint32_t>(in->cols), 1}));
        std::vector<DispatchTensor> out;
        out.push_back(q_matmul(x, quant::quantize_row(w, scales({0.002f, 0.001f, 0.0025f}), per_col)));
        out.push_back(q_matmul(x, quant::quantize_row(w, scales({0.002f}), q8)));
        return out;
      });
    case Family::QConv:  // x [2, 4, 5, 5] with a q8s weight [3, 4, 3, 3] (per output channel and per tensor), padding 1
      // x = k / 64 with |k| <= 127 and 127 in every image, so a per-image int8 quantization of
      // it (the cpu's oneDNN route) is exact and the routes agree to rounding.
      return go([&] {
        std::vector<float> xv(2 * 4 * 5 * 5), wv(3 * 4 * 3 * 3);
        for (std::size_t i = 0; i < xv.size(); ++i)
          xv[i] = static_cast<float>(i % 100 == 7 ? 127 : static_cast<int>(i * 37 % 255) - 127) / 64.0f;
        for (std::size_t i = 0; i < wv.size(); ++i) wv[i] = 0.05f * static_cast<float>(static_cast<int>(i % 11) - 5);
        DispatchTensor x = from_data(TensorData::from<float>(xv, Shape{2, 4, 5, 5}), d, Kind::Float);
        DispatchTensor b = from_data(TensorData::from<float>({0.5f, -0.25f, 1.0f}, Shape{3}), d, Kind::Float);
        if (dtype != DType::F32) {
          x = cast(OpCode::cast, std::move(x), dtype);
          b = cast(OpCode::cast, std::move(b), dtype);
        }
        DispatchTensor w = from_data(TensorData::from<float>(wv, Shape{3, 4, 3, 3}), d, Kind::Float);
        auto scales = [&](std::vector<float> v) { return from_data(TensorData::from<float>(v, Shape{v.size()}), d, Kind::Float); };
        const QuantScheme q8 = QuantScheme{}.with_value(QuantValue::Q8S).with_store(QuantStore::Native);
        const QuantScheme per_oc = q8.with_level(QuantLevel::block({1, 4, 3, 3}));
        QConvArgs a;
        a.conv.padding = {1, 1, 0};
        std::vector<DispatchTensor> out;
        out.push_back(q_conv2d(x, quant::quantize_row(w, scales({0.002f, 0.001f, 0.0025f}), per_oc), b, a));
        out.push_back(q_conv2d(x, quant::quantize_row(w, scales({0.002f}), q8), DispatchTensor{}, a));
        return out;
      });
    case Family::ToDevice: return go([&] { return one(to_device(A(), d)); });
    default: return std::nullopt;  // module ops, nd indexing, grid sampling, flags, queries, transactions
  }
}
}  // namespace detail

// Whether `op` has a sample call here (the module ops have their own recipes in each runner;
// the nd indexing ops and grid sampling are checked with values in tests/burn_api_test.cpp).
inline bool has_call(OpCode op) {
  bool values = true;
  return detail::call_or_probe(op, nullptr, values).has_value();
}

// The outputs of `op` on the sample arguments; `values` false when only dtype and shape are
// defined (random, empty). nullopt where has_call(op) is false.
inline std::optional<std::vector<DispatchTensor>> call(OpCode op, const Operands& in, bool& values) {
  return detail::call_or_probe(op, &in, values);
}

}  // namespace tensor::family_calls
