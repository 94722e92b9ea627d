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
#include "lib/core/nn_args.hpp"
#include "lib/core/strided.hpp"
#include "tensor/data.hpp"
#include "tensor/device.hpp"
#include "tensor/nn_options.hpp"
#include "tensor/op_code.hpp"
#include "tensor/options.hpp"
#include "tensor/scalar.hpp"

namespace tensor::dispatch {

using tensor::OpCode;

using PrimPair = std::pair<Prim, Prim>;

// A captured graph as the device rows graph_stop_capture / graph_replay / graph_release
// see it (dispatch/graph.hpp): `run` replays the recorded list of resolved entries.
struct GraphProgram {
  void (*run)(GraphProgram&) = nullptr;
};

// ---- module-op arguments (the nn rows of the op table): lib/core/nn_args.hpp's, one form
// from lib/src/nn.cpp down to the kernels; a null Prim stands for an absent optional tensor
// (bias, mask, beta).
using core::ConvArgs;
using core::FoldArgs;
using core::InterpArgs;
using core::PoolArgs;
// q_conv2d's arguments (the quant section): conv2d's normalized args, in a type of their own
// so that the plugin adapter never encodes the row (a quantized tensor does not cross).
struct QConvArgs {
  ConvArgs conv;
};
// DimSlice, Axes and DimSlices (the resolved layout arguments) are lib/core's (strided.hpp).

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
  X(Moments, PrimPair (*)(Prim, std::size_t, std::size_t))                              \
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
  X(Conv, Prim (*)(Prim, Prim, Prim, const ConvArgs&))                                   \
  X(ConvBackward, Prim (*)(Prim, Prim, const Shape&, const ConvArgs&))                   \
  X(ConvBiasBackward, Prim (*)(Prim))                                                    \
  X(Pool, Prim (*)(Prim, const PoolArgs&))                                               \
  X(PoolWithIndices, PrimPair (*)(Prim, const PoolArgs&, DType))                         \
  X(PoolBackward, Prim (*)(Prim, const Shape&, const PoolArgs&))                         \
  X(MaxPoolBackward, Prim (*)(Prim, Prim, const Shape&, const PoolArgs&))                \
  X(Interpolate, Prim (*)(Prim, const InterpArgs&))                                      \
  X(InterpolateBackward, Prim (*)(Prim, const Shape&, const InterpArgs&))                \
  X(Embedding, Prim (*)(Prim, Prim))                                                     \
  X(EmbeddingBackward, Prim (*)(Prim, Prim, const Shape&))                               \
  X(LayerNorm, Prim (*)(Prim, Prim, Prim, double))                                       \
  X(Attention, Prim (*)(Prim, Prim, Prim, Prim, Prim, const tensor::nn::AttentionModuleOptions&)) \
  X(Rfft, PrimPair (*)(Prim, std::size_t, std::size_t))                                  \
  X(Irfft, Prim (*)(Prim, Prim, std::size_t, std::size_t))                               \
  X(Linear, Prim (*)(Prim, Prim, Prim))                                                  \
  X(BatchNorm, Prim (*)(Prim, Prim, Prim, Prim, Prim, double))                           \
  X(Unfold4d, Prim (*)(Prim, const FoldArgs&))                                           \
  X(CtcLoss, Prim (*)(Prim, Prim, Prim, Prim, std::int64_t))                             \
  X(CtcLossBackward, Prim (*)(Prim, Prim, Prim, Prim, Prim, std::int64_t))               \
  X(DeformConv, Prim (*)(Prim, Prim, Prim, Prim, Prim, const tensor::nn::DeformConvOptions<2>&)) \
  X(DeformConvBackward, std::vector<Prim> (*)(Prim, Prim, Prim, Prim, Prim, bool, const tensor::nn::DeformConvOptions<2>&)) \
  X(Collective, Prim (*)(Prim, std::int64_t))                                            \
  X(Quantize, Prim (*)(Prim, Prim, const tensor::QuantScheme&))                           \
  X(QuantizeDynamic, Prim (*)(Prim, const tensor::QuantScheme&))                          \
  X(Dequantize, Prim (*)(Prim, DType))                                                    \
  X(QMatmul, Prim (*)(Prim, Prim))                                                        \
  X(QConv, Prim (*)(Prim, Prim, Prim, const QConvArgs&))                                  \
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
  X(DevSettings, DeviceSettings (*)(DeviceId))                                          \
  X(DevGraph, void (*)(DeviceId, GraphProgram&))                                        \
  X(DevAssign, void (*)(DeviceId, const Prim&, const Prim&))

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

// The table's empty-input rule: Ok (the op has an answer for no elements), Raises
// (ShapeError: extrema), IntRaises (raises for Int tensors only: int mean).
enum class EmptyRule : std::uint8_t { Ok, Raises, IntRaises };

// The module-op facts of a row: the spatial rank of a convolution or pool (0: given by
// its arguments), whether a convolution is transposed, which input a convolution's
// backward row differentiates, and which window rule a pool row follows.
using core::Window;  // None, Max, Avg, AdaptiveAvg (lib/core/nn_args.hpp)
enum class GradOf : std::uint8_t { None, Input, Weight };
// The quant section's rows over a float op (the row's twin: its name without "q_"), by what
// their default does (dispatch/defaults/quant_ops.cpp): Codes works on the codes (layout
// ops and extrema of per-tensor schemes; a per-block scheme takes Requant's way), Requant
// dequantizes, runs the twin, and quantizes the result again with the input's scheme,
// Flow does the same under QuantPropagation::Propagate and returns the float result under
// Inhibit, Out runs the twin on the dequantized input (its result is not a float tensor).
enum class QRule : std::uint8_t { None, Codes, Requant, Flow, Out };
// CompareScalar rows: the relation a row tests (x R s).
enum class Relation : std::uint8_t { None, Eq, Ne, Gt, Ge, Lt, Le };

struct OpInfo {
  std::string_view name;
  Family family{};
  std::uint8_t kinds = 0;
  Policy policy{};
  std::string_view meaning;
  std::uint16_t code = 0;      // the public OpCode value (stable, append-only)
  std::uint8_t diff = 0;       // bit i set: tensor input i carries a gradient (Cat: every part)
  bool storage_only = false;   // moves or views data: Storage suffices, not Arithmetic
  bool keeps_shape = false;    // Dim family: output keeps the input shape (scans, softmax)
  bool host_trip = false;      // the default reads back or uploads through the host
  EmptyRule empty = EmptyRule::Ok;
  std::uint8_t spatial = 0;    // conv / pool rows: the spatial rank (1..3)
  bool transposed = false;     // conv rows: a transposed convolution
  GradOf grad_of = GradOf::None;  // ConvBackward rows: the gradient the row computes
  Window window = Window::None;   // pool rows: the window rule
  bool swaps_last_two = false;    // Unary rows: the output swaps the last two dims (transpose)
  bool bounds = false;            // Scalar / Clamp rows: the scalars are bounds compared as numbers
  Relation relation = Relation::None;  // CompareScalar rows: the relation tested
  std::uint8_t result_kind = 0;   // Cast rows: the result's kind mask (0: the input's kind)
  bool broadcasts = false;        // Reshape rows: the shape broadcasts size-1 dims (expand), not re-reads
  bool reorders = false;          // Axes rows: the axes reorder every dim (permute), not a subset (flip)
  bool folds = false;             // Unfold4d rows: blocks summed back into an image (fold4d)
  bool qfloat_in = false;         // the first operand is a quantized (QFloat) tensor (its kind is Float)
  QRule qrule = QRule::None;      // quant rows over a float op: what the default does
  std::uint16_t twin = 0xffff;    // q rows: the float op's code; float ops: their q row's (0xffff: none)
};
inline constexpr std::uint16_t kNoTwin = 0xffff;

// The optional columns of op_table.def rows, and how a row becomes an OpInfo.
namespace table {

// Which tensor inputs carry a gradient, by family, for ops that take Float tensors:
// the data operands, never indices, masks or exponents.
constexpr std::uint8_t default_diff(Family f, std::uint8_t kinds) {
  if (!(kinds & kKindF)) return 0;
  switch (f) {
    case Family::Binary: case Family::Matmul: case Family::Cross: case Family::SliceAssign: case Family::GridSample:
      return 0b11;
    case Family::Conv: case Family::LayerNorm: case Family::Linear:  // x, weight, bias (gamma, beta)
      return 0b111;
    case Family::BatchNorm:  // x, gamma, beta, mean, variance
    case Family::DeformConv:  // x, offset, weight, mask, bias
      return 0b11111;
    case Family::Pool: case Family::PoolWithIndices: case Family::Interpolate: case Family::Embedding:
    case Family::Unfold4d: case Family::CtcLoss: case Family::Collective:
      return 0b1;  // x (embedding: the weights, not the indices; ctc: the log-probabilities)
    case Family::Attention:  // q, k, v and the additive bias, not the mask
      return 0b10111;
    case Family::Rfft:  // the signal
      return 0b1;
    case Family::Irfft:  // re and im
      return 0b11;
    case Family::Scatter: case Family::ScatterUpdate: case Family::SelectAssign: case Family::SelectUpdate:
    case Family::MaskWhere: case Family::ScatterNd:
      return 0b101;
    case Family::Cat:
      return 0xff;
    case Family::Unary: case Family::Scalar: case Family::Clamp: case Family::PowI: case Family::Reduce: case Family::Dim:
    case Family::DimWithIndices: case Family::Moments: case Family::Cast: case Family::Reshape: case Family::SwapDims: case Family::Axes:
    case Family::Slice: case Family::RepeatDim: case Family::Unfold: case Family::Gather: case Family::GatherNd:
    case Family::Select: case Family::MaskFill: case Family::MaskSelect: case Family::Sort: case Family::SortWithIndices:
    case Family::TopK: case Family::TopKWithIndices: case Family::ToDevice: case Family::SetFlag:
      return 0b1;
    default:
      return 0;  // comparisons, index results, creation, reads: nothing to differentiate
  }
}

struct StorageOnly {};
struct KeepsShape {};
struct HostTrip {};
struct Diff { std::uint8_t mask; };
struct Spatial { std::uint8_t rank; };
struct Transposed {};
struct SwapsLastTwo {};
struct Bounds {};
struct ResultKind { std::uint8_t mask; };
struct Broadcasts {};
struct Reorders {};
struct Folds {};
struct QFloatIn {};
inline constexpr QRule q_codes = QRule::Codes, q_requant = QRule::Requant, q_flow = QRule::Flow, q_out = QRule::Out;
inline constexpr StorageOnly storage_only{};
inline constexpr KeepsShape keeps_shape{};
inline constexpr HostTrip host_trip{};
inline constexpr EmptyRule empty_raises = EmptyRule::Raises;
inline constexpr EmptyRule empty_int_raises = EmptyRule::IntRaises;
inline constexpr Diff no_diff{0};
inline constexpr Spatial d1{1}, d2{2}, d3{3};
inline constexpr Transposed transposed{};
inline constexpr SwapsLastTwo swaps_last_two{};
inline constexpr Bounds bound{};
inline constexpr ResultKind to_int{kKindI}, to_float{kKindF};
inline constexpr Broadcasts broadcasts{};
inline constexpr Reorders reorders{};
inline constexpr Folds folds{};
inline constexpr QFloatIn q_in{};
inline constexpr Relation eq = Relation::Eq, ne = Relation::Ne, gt = Relation::Gt, ge = Relation::Ge, lt = Relation::Lt,
                          le = Relation::Le;
inline constexpr GradOf grad_input = GradOf::Input, grad_weight = GradOf::Weight;
inline constexpr Window max_window = Window::Max, avg_window = Window::Avg, adaptive_window = Window::AdaptiveAvg;
template <class... I>
constexpr Diff diff(I... inputs) { return Diff{static_cast<std::uint8_t>((0u | ... | (1u << inputs)))}; }

constexpr void apply(OpInfo& o, StorageOnly) { o.storage_only = true; }
constexpr void apply(OpInfo& o, KeepsShape) { o.keeps_shape = true; }
constexpr void apply(OpInfo& o, HostTrip) { o.host_trip = true; }
constexpr void apply(OpInfo& o, EmptyRule r) { o.empty = r; }
constexpr void apply(OpInfo& o, Diff d) { o.diff = d.mask; }
constexpr void apply(OpInfo& o, Spatial d) { o.spatial = d.rank; }
constexpr void apply(OpInfo& o, Transposed) { o.transposed = true; }
constexpr void apply(OpInfo& o, SwapsLastTwo) { o.swaps_last_two = true; }
constexpr void apply(OpInfo& o, Bounds) { o.bounds = true; }
constexpr void apply(OpInfo& o, ResultKind r) { o.result_kind = r.mask; }
constexpr void apply(OpInfo& o, Broadcasts) { o.broadcasts = true; }
constexpr void apply(OpInfo& o, Reorders) { o.reorders = true; }
constexpr void apply(OpInfo& o, Folds) { o.folds = true; }
constexpr void apply(OpInfo& o, QFloatIn) { o.qfloat_in = true; }
constexpr void apply(OpInfo& o, QRule r) {
  o.qrule = r;
  o.qfloat_in = true;
  o.diff = 0;  // a quantized tensor is never tracked (burn)
}
constexpr void apply(OpInfo& o, Relation r) { o.relation = r; }
constexpr void apply(OpInfo& o, GradOf g) { o.grad_of = g; }
constexpr void apply(OpInfo& o, Window w) { o.window = w; }

template <class... C>
constexpr OpInfo row(OpInfo o, std::uint16_t code, C... columns) {
  o.code = code;
  o.diff = default_diff(o.family, o.kinds);
  (apply(o, columns), ...);
  return o;
}

// Rows in table order, then placed by code: kOps[code] describes OpCode(code).
inline constexpr std::array<OpInfo, kOpCount> kRows = {{
#define TENSOR_OP(name, family, k, policy, meaning, ...) \
  row({#name, Family::family, kinds::k, Policy::policy, meaning}, __VA_ARGS__),
#include "dispatch/table/op_table.def"
#undef TENSOR_OP
}};

// A q row's twin: the row named as it without "q_"; kOpCount where there is none.
constexpr std::size_t twin_of(const std::array<OpInfo, kOpCount>& rows, const OpInfo& q) {
  if (q.qrule == QRule::None || q.name.substr(0, 2) != "q_") return kOpCount;
  for (const OpInfo& r : rows)
    if (r.name == q.name.substr(2)) return r.code;
  return kOpCount;
}

// Rows placed by code; a q row and its twin linked both ways, the q row taking the twin's
// columns (its layout and shape rules are the twin's; kinds, policy, diff stay its own).
constexpr std::array<OpInfo, kOpCount> by_code(const std::array<OpInfo, kOpCount>& rows) {
  std::array<OpInfo, kOpCount> out{};
  for (const OpInfo& r : rows) out[r.code] = r;
  for (const OpInfo& r : rows) {
    const std::size_t t = twin_of(rows, r);
    if (t == kOpCount) continue;
    OpInfo& q = out[r.code];
    const OpInfo& f = out[t];
    q.twin = f.code;
    out[t].twin = r.code;
    q.storage_only = f.storage_only;
    q.keeps_shape = f.keeps_shape;
    q.empty = f.empty;
    q.swaps_last_two = f.swaps_last_two;
    q.bounds = f.bounds;
    q.result_kind = f.result_kind;
    q.broadcasts = f.broadcasts;
    q.reorders = f.reorders;
    q.relation = f.relation;
    // quantize_dynamic reads the blocks' maxima back: every rule that may quantize again (flow
    // under Propagate, requant, the codes rows' per-block way) is a host trip for graph capture.
    q.host_trip = f.host_trip || r.qrule != QRule::Out;
  }
  return out;
}
// Every q row has a twin of its family that takes Float tensors.
constexpr bool twins_match(const std::array<OpInfo, kOpCount>& rows) {
  for (const OpInfo& r : rows) {
    if (r.qrule == QRule::None) continue;
    const std::size_t t = twin_of(rows, r);
    if (t == kOpCount) return false;
    for (const OpInfo& f : rows)
      if (f.code == t && (f.family != r.family || !(f.kinds & kKindF))) return false;
  }
  return true;
}
static_assert(twins_match(kRows), "op_table_quant.def: a row with q_codes / q_requant / q_flow / q_out needs a float row "
                                  "of its family named as it without q_");
// Codes are dense and unique (0..kOpCount-1 once each), so arrays indexed by OpCode hold.
constexpr bool codes_dense(const std::array<OpInfo, kOpCount>& rows) {
  std::array<bool, kOpCount> seen{};
  for (const OpInfo& r : rows) {
    if (r.code >= kOpCount || seen[r.code]) return false;
    seen[r.code] = true;
  }
  return true;
}
static_assert(codes_dense(kRows),
              "op_table.def: every row needs its own code, the next free number (see dispatch/table/op_codes.txt)");

}  // namespace table

inline constexpr std::array<OpInfo, kOpCount> kOps = table::by_code(table::kRows);

enum class DeviceOp : std::uint8_t {
#define TENSOR_OP(...)
#define TENSOR_DEVICE_OP(name, family, policy, meaning) name,
#include "dispatch/table/op_table.def"
#undef TENSOR_DEVICE_OP
#undef TENSOR_OP
};

inline constexpr int kDeviceOpCount = 0
#define TENSOR_OP(...)
#define TENSOR_DEVICE_OP(name, family, policy, meaning) +1
#include "dispatch/table/op_table.def"
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
#include "dispatch/table/op_table.def"
#undef TENSOR_DEVICE_OP
#undef TENSOR_OP
}};

constexpr const OpInfo& op_info(OpCode op) { return kOps[static_cast<std::size_t>(op)]; }
constexpr std::string_view op_name(OpCode op) { return op_info(op).name; }
constexpr Family op_family(OpCode op) { return op_info(op).family; }
constexpr const DeviceOpInfo& device_op_info(DeviceOp op) { return kDeviceOps[static_cast<std::size_t>(op)]; }

}  // namespace tensor::dispatch
