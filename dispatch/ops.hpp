// Op metadata derived from op_table.def: signature families, their C++ function
// types, and a constexpr description of every op (name, family, kinds, policy).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <future>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dispatch/primitive.hpp"
#include "tensor/data.hpp"
#include "tensor/device.hpp"
#include "tensor/op_code.hpp"
#include "tensor/options.hpp"
#include "tensor/scalar.hpp"

namespace tensor::dispatch {

using tensor::OpCode;

// A resolved slice of one dim: element i of the result is source index
// start + i * step, for i < len. Validation produces one per dim.
struct DimSlice {
  std::int64_t start = 0;
  std::int64_t step = 1;
  std::size_t len = 0;
};

using PrimPair = std::pair<Prim, Prim>;
using Axes = std::span<const std::size_t>;
using DimSlices = std::span<const DimSlice>;

// Every signature family, with the function type a backend provides for it.
// Dims reaching a backend are already resolved (non-negative, in range).
#define TENSOR_FAMILIES(X)                                                              \
  X(Unary, Prim (*)(Prim))                                                              \
  X(Binary, Prim (*)(Prim, Prim))                                                       \
  X(Scalar, Prim (*)(Prim, tensor::Scalar))                                             \
  X(Clamp, Prim (*)(Prim, tensor::Scalar, tensor::Scalar))                              \
  X(Compare, Prim (*)(Prim, Prim, DType))                                               \
  X(CompareScalar, Prim (*)(Prim, tensor::Scalar, DType))                               \
  X(Predicate, Prim (*)(Prim, DType))                                                   \
  X(Matmul, Prim (*)(Prim, Prim))                                                       \
  X(Cross, Prim (*)(Prim, Prim, std::size_t))                                           \
  X(PowI, Prim (*)(Prim, Prim))                                                         \
  X(Reduce, Prim (*)(Prim))                                                             \
  X(Dim, Prim (*)(Prim, std::size_t))                                                   \
  X(DimIndex, Prim (*)(Prim, std::size_t, DType))                                       \
  X(DimWithIndices, PrimPair (*)(Prim, std::size_t, DType))                             \
  X(AnyAll, Prim (*)(Prim, DType))                                                      \
  X(AnyAllDim, Prim (*)(Prim, std::size_t, DType))                                      \
  X(Cast, Prim (*)(Prim, DType))                                                        \
  X(Reshape, Prim (*)(Prim, const Shape&))                                              \
  X(SwapDims, Prim (*)(Prim, std::size_t, std::size_t))                                 \
  X(Axes, Prim (*)(Prim, Axes))                                                         \
  X(Slice, Prim (*)(Prim, DimSlices))                                                   \
  X(SliceAssign, Prim (*)(Prim, DimSlices, Prim))                                       \
  X(RepeatDim, Prim (*)(Prim, std::size_t, std::size_t))                                \
  X(Cat, Prim (*)(std::vector<Prim>, std::size_t))                                      \
  X(Unfold, Prim (*)(Prim, std::size_t, std::size_t, std::size_t))                      \
  X(Gather, Prim (*)(Prim, std::size_t, Prim))                                          \
  X(Scatter, Prim (*)(Prim, std::size_t, Prim, Prim))                                   \
  X(ScatterUpdate, Prim (*)(Prim, std::size_t, Prim, Prim, IndexingUpdateOp))           \
  X(GatherNd, Prim (*)(Prim, Prim))                                                     \
  X(ScatterNd, Prim (*)(Prim, Prim, Prim, IndexingUpdateOp))                            \
  X(Select, Prim (*)(Prim, std::size_t, Prim))                                          \
  X(SelectAssign, Prim (*)(Prim, std::size_t, Prim, Prim))                              \
  X(SelectUpdate, Prim (*)(Prim, std::size_t, Prim, Prim, IndexingUpdateOp))            \
  X(MaskWhere, Prim (*)(Prim, Prim, Prim))                                              \
  X(MaskFill, Prim (*)(Prim, Prim, tensor::Scalar))                                     \
  X(MaskSelect, Prim (*)(Prim, Prim))                                                   \
  X(Argwhere, Prim (*)(Prim, DType))                                                    \
  X(Sort, Prim (*)(Prim, std::size_t, bool))                                            \
  X(SortWithIndices, PrimPair (*)(Prim, std::size_t, bool, DType))                      \
  X(Argsort, Prim (*)(Prim, std::size_t, bool, DType))                                  \
  X(TopK, Prim (*)(Prim, std::size_t, std::size_t))                                     \
  X(TopKWithIndices, PrimPair (*)(Prim, std::size_t, std::size_t, DType))               \
  X(ArgTopK, Prim (*)(Prim, std::size_t, std::size_t, DType))                           \
  X(GridSample, Prim (*)(Prim, Prim, const GridSampleOptions&))                         \
  X(FromData, Prim (*)(TensorData, DeviceId))                                           \
  X(Create, Prim (*)(const Shape&, DeviceId, DType))                                    \
  X(Full, Prim (*)(const Shape&, tensor::Scalar, DeviceId, DType))                      \
  X(Random, Prim (*)(const Shape&, const Distribution&, DeviceId, DType))               \
  X(Range, Prim (*)(std::int64_t, std::int64_t, DeviceId, DType))                       \
  X(RangeStep, Prim (*)(std::int64_t, std::int64_t, std::int64_t, DeviceId, DType))     \
  X(IntoData, std::future<TensorData> (*)(Prim))                                        \
  X(ToDevice, Prim (*)(Prim, DeviceId))                                                 \
  X(SetFlag, Prim (*)(Prim, bool))                                                      \
  X(Query, bool (*)(const Prim&))                                                       \
  X(Transaction, std::future<std::vector<TensorData>> (*)(std::vector<Prim>))           \
  X(DevName, std::string (*)(DeviceId))                                                 \
  X(DevSeed, void (*)(DeviceId, std::uint64_t))                                         \
  X(DevAction, void (*)(DeviceId))                                                      \
  X(DevUsage, DTypeUsageSet (*)(DeviceId, DType))                                       \
  X(DevSupports, bool (*)(DeviceId, DType))                                             \
  X(DevFlag, bool (*)(DeviceId))                                                        \
  X(DevCount, std::size_t (*)())                                                        \
  X(DevMemory, MemoryStats (*)(DeviceId))                                              \
  X(DevSettings, DeviceSettings (*)(DeviceId))

enum class Family : std::uint8_t {
#define TENSOR_X(name, sig) name,
  TENSOR_FAMILIES(TENSOR_X)
#undef TENSOR_X
};

template <Family F> struct FamilyTraits;
#define TENSOR_X(name, sig) \
  template <> struct FamilyTraits<Family::name> { using Fn = sig; static constexpr std::string_view kName = #name; };
TENSOR_FAMILIES(TENSOR_X)
#undef TENSOR_X
template <Family F> using FamilyFn = typename FamilyTraits<F>::Fn;

std::string_view family_name(Family f);

// Kind masks for the kinds column.
enum KindMask : std::uint8_t { kKindF = 1, kKindI = 2, kKindB = 4 };
namespace kinds {
inline constexpr std::uint8_t F = kKindF, I = kKindI, B = kKindB, FI = kKindF | kKindI, FB = kKindF | kKindB,
                              IB = kKindI | kKindB, FIB = kKindF | kKindI | kKindB;
}  // namespace kinds

enum class Policy : std::uint8_t { Req, Def };

struct OpInfo {
  std::string_view name;
  Family family;
  std::uint8_t kinds;
  Policy policy;
  std::string_view meaning;
};

inline constexpr std::array<OpInfo, kOpCount> kOps = {{
#define TENSOR_OP(name, family, k, policy, meaning) {#name, Family::family, kinds::k, Policy::policy, meaning},
#include "dispatch/op_table.def"
#undef TENSOR_OP
}};

enum class DeviceOp : std::uint8_t {
#define TENSOR_OP(...)
#define TENSOR_DEVICE_OP(name, family, policy, meaning) name,
#include "dispatch/op_table.def"
#undef TENSOR_DEVICE_OP
#undef TENSOR_OP
};

inline constexpr int kDeviceOpCount = 0
#define TENSOR_OP(...)
#define TENSOR_DEVICE_OP(name, family, policy, meaning) +1
#include "dispatch/op_table.def"
#undef TENSOR_DEVICE_OP
#undef TENSOR_OP
    ;

struct DeviceOpInfo {
  std::string_view name;
  Family family;
  Policy policy;
  std::string_view meaning;
};

inline constexpr std::array<DeviceOpInfo, kDeviceOpCount> kDeviceOps = {{
#define TENSOR_OP(...)
#define TENSOR_DEVICE_OP(name, family, policy, meaning) {#name, Family::family, Policy::policy, meaning},
#include "dispatch/op_table.def"
#undef TENSOR_DEVICE_OP
#undef TENSOR_OP
}};

constexpr const OpInfo& op_info(OpCode op) { return kOps[static_cast<std::size_t>(op)]; }
constexpr std::string_view op_name(OpCode op) { return op_info(op).name; }
constexpr Family op_family(OpCode op) { return op_info(op).family; }
constexpr const DeviceOpInfo& device_op_info(DeviceOp op) { return kDeviceOps[static_cast<std::size_t>(op)]; }

}  // namespace tensor::dispatch
