// tensorctl check: every op of the table on a device against the CPU backend.
#include "tools/op_check.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <set>

#include "dispatch/dispatch.hpp"
#include "lib/core/nn_shape.hpp"
#include "tests/conformance/family_calls.hpp"
#include "tensor/error.hpp"

namespace tensorctl {

using namespace tensor;
using namespace tensor::dispatch;

namespace {

constexpr DeviceId kCpu{kCpuDeviceType, 0};
constexpr std::size_t kRows = 7, kCols = 13;  // the shape every op is checked at, in every layout

const DType kAllDTypes[] = {DType::F64, DType::F32, DType::F16, DType::BF16, DType::I64, DType::I32, DType::I16,
                            DType::I8,  DType::U64, DType::U32, DType::U16,  DType::U8,  DType::Bool};

// Value range per op for float inputs, so every reference is finite and defined.
std::pair<double, double> domain(std::string_view op) {
  static const std::map<std::string_view, std::pair<double, double>> kDomains = {
      {"log", {0.1, 3.0}},     {"sqrt", {0.0, 4.0}},   {"log1p", {-0.5, 3.0}}, {"recip", {0.5, 2.0}},
      {"acosh", {1.1, 3.0}},   {"atanh", {-0.9, 0.9}}, {"asin", {-0.9, 0.9}},  {"acos", {-0.9, 0.9}},
      {"powf", {0.5, 2.0}},    {"powf_scalar", {0.5, 2.0}}, {"powf_scalar_impl", {0.5, 2.0}}, {"powi", {0.5, 2.0}},
      {"div", {0.5, 2.0}},     {"remainder", {0.5, 3.0}}, {"prod", {0.5, 1.5}}, {"prod_dim", {0.5, 1.5}},
      {"cumprod", {0.5, 1.5}}, {"exp", {-3.0, 3.0}},  {"cosh", {-3.0, 3.0}},  {"sinh", {-3.0, 3.0}}};
  const auto it = kDomains.find(op);
  return it == kDomains.end() ? std::pair{-2.0, 2.0} : it->second;
}

TensorData random_data(const Shape& s, DType dt, std::string_view op, std::mt19937_64& rng) {
  std::vector<double> v(s.num_elements());
  if (is_bool(dt)) {
    for (double& x : v) x = static_cast<double>(rng() & 1u);
  } else if (is_float(dt)) {
    auto [lo, hi] = domain(op);
    std::uniform_real_distribution<double> u(lo, hi);
    for (double& x : v) x = u(rng);
  } else {
    const bool positive = op == "div" || op == "remainder" || is_unsigned_int(dt);
    std::uniform_int_distribution<int> u(positive ? 1 : -6, 6);
    for (double& x : v) x = u(rng);
  }
  return TensorData::from(v, s).convert(dt);
}

Kind kind_for(DType dt) { return kind_of_dtype(dt); }

enum class Layout { Contiguous, Transposed, Sliced, Flipped };
const char* layout_name(Layout l) {
  switch (l) {
    case Layout::Contiguous: return "contiguous";
    case Layout::Transposed: return "transposed";
    case Layout::Sliced: return "sliced";
    case Layout::Flipped: return "flipped";
  }
  return "?";
}

// A shape and the layouts it is checked in. Besides [7, 13] in every layout, on one
// dtype per op (the full run stays under a minute on lavapipe): [3, 1025] transposed
// (one past the Vulkan workgroup sizes, 256 for elementwise and row kernels and 64
// for reductions, along strided lines) and [1024, 1024] contiguous (2^20 elements:
// whole-tensor reductions split across workgroups).
struct CaseShape {
  std::size_t rows, cols;
  std::vector<Layout> layouts;
  const char* suffix;  // appended to the layout name
};

// The families checked at the large shapes too (elementwise, reductions, sorts, casts);
// `huge`: at [1024, 1024] (elementwise and reductions).
bool at_large_shapes(Family f, bool huge) {
  switch (f) {
    case Family::Unary: case Family::Binary: case Family::Scalar: case Family::Compare: case Family::Reduce:
    case Family::Dim: case Family::DimIndex:
      return true;
    case Family::CompareScalar: case Family::DimWithIndices: case Family::Moments: case Family::AnyAll: case Family::AnyAllDim:
    case Family::Sort: case Family::SortWithIndices: case Family::Argsort: case Family::Cast:
      return !huge;
    default:
      return false;
  }
}

// Uploads `logical` (2-D) so that the device tensor is a view with that layout.
DispatchTensor place(DeviceId d, const TensorData& logical, Layout layout) {
  const Kind k = kind_for(logical.dtype());
  const Shape s = logical.shape();
  const std::size_t w = dtype_size(logical.dtype());
  const auto& src = logical.bytes();
  auto copy_el = [&](std::vector<std::byte>& dst, std::size_t to, std::size_t from) {
    std::copy_n(src.begin() + static_cast<std::ptrdiff_t>(from * w), w, dst.begin() + static_cast<std::ptrdiff_t>(to * w));
  };
  if (s.rank() != 2 || layout == Layout::Contiguous) return from_data(logical, d, k);
  const std::size_t r = s[0], c = s[1];
  if (layout == Layout::Transposed) {
    std::vector<std::byte> t(src.size());
    for (std::size_t i = 0; i < r; ++i)
      for (std::size_t j = 0; j < c; ++j) copy_el(t, j * r + i, i * c + j);
    return swap_dims(from_data(TensorData(std::move(t), Shape{c, r}, logical.dtype()), d, k), 0, 1);
  }
  if (layout == Layout::Flipped) {
    std::vector<std::byte> t(src.size());
    for (std::size_t i = 0; i < r; ++i)
      for (std::size_t j = 0; j < c; ++j) copy_el(t, (r - 1 - i) * c + j, i * c + j);
    const std::int64_t ax[] = {0};
    return axes(OpCode::flip, from_data(TensorData(std::move(t), s, logical.dtype()), d, k), ax);
  }
  // Sliced: the rows sit at even positions of a twice-as-tall buffer.
  std::vector<std::byte> t(src.size() * 2);
  for (std::size_t i = 0; i < r; ++i)
    for (std::size_t j = 0; j < c; ++j) copy_el(t, (2 * i) * c + j, i * c + j);
  const tensor::Slice sl[] = {{0, std::nullopt, 2}};
  return slice(from_data(TensorData(std::move(t), Shape{2 * r, c}, logical.dtype()), d, k), sl);
}

double tolerance(DType dt) {
  switch (dt) {
    case DType::F64: return 1e-9;
    case DType::F32: return 2e-4;
    case DType::F16: return 4e-3;
    case DType::BF16: return 3e-2;
    default: return 0.0;
  }
}

// Compares result `got` (device) with `want` (cpu); fills max errors; empty = equal.
std::string compare(const TensorData& want, const TensorData& got, bool values, CheckResult& r) {
  // Bool storages differ by device default (cpu: native, others: u8); compare values.
  if (want.dtype() != got.dtype() && !(is_bool(want.dtype()) && is_bool(got.dtype())))
    return "dtype " + std::string(dtype_name(got.dtype())) + ", cpu gives " + std::string(dtype_name(want.dtype()));
  if (!(want.shape() == got.shape())) return "shape " + got.shape().to_string() + ", cpu gives " + want.shape().to_string();
  if (!values) return {};
  const auto w = want.convert(DType::F64).to_vec<double>();
  const auto g = got.convert(DType::F64).to_vec<double>();
  const double tol = tolerance(want.dtype());
  std::string bad;
  for (std::size_t i = 0; i < w.size(); ++i) {
    if (std::isnan(w[i]) && std::isnan(g[i])) continue;
    const double abs = std::fabs(w[i] - g[i]);
    if (std::isinf(w[i]) || std::isinf(g[i])) {
      if (w[i] != g[i] && bad.empty()) bad = "element " + std::to_string(i) + ": " + std::to_string(g[i]) + " vs " + std::to_string(w[i]);
      continue;
    }
    const double rel = abs / std::max(std::fabs(w[i]), 1e-30);
    r.max_abs = std::max(r.max_abs, abs);
    r.max_rel = std::max(r.max_rel, std::fabs(w[i]) > 1e-6 ? rel : 0.0);
    if (abs > tol * (1.0 + std::fabs(w[i])) && bad.empty())
      bad = "element " + std::to_string(i) + ": " + std::to_string(g[i]) + " vs cpu " + std::to_string(w[i]);
  }
  return bad;
}

constexpr IndexingUpdateOp kUpdateRules[] = {IndexingUpdateOp::Assign, IndexingUpdateOp::Add, IndexingUpdateOp::Mul,
                                             IndexingUpdateOp::Min, IndexingUpdateOp::Max};

using family_calls::one;
using family_calls::two;

// ---- module ops: fixed shapes and options per op; the inputs come from a generator
// seeded by the op, so the cpu and the device get the same values; the first tensor is
// placed in the case's layout (the last two dims swapped, dim 0 flipped or step-sliced).
struct NnIn {
  DeviceId d;
  DType dt;
  Layout layout;
  std::mt19937_64 rng;
  bool first = true;

  DispatchTensor F(const Shape& s, double lo = -2.0, double hi = 2.0) {
    std::vector<double> v(s.num_elements());
    std::uniform_real_distribution<double> u(lo, hi);
    for (double& x : v) x = u(rng);
    const Layout l = first ? layout : Layout::Contiguous;
    first = false;
    return placed(v, s, l);
  }
  DispatchTensor placed(const std::vector<double>& v, const Shape& s, Layout l) {
    const std::size_t n = v.size(), r = s.rank();
    if (l == Layout::Contiguous || r < 2 || n == 0)
      return from_data(TensorData::from(v, s).convert(dt), d, Kind::Float);
    if (l == Layout::Transposed) {
      const std::size_t R = s[r - 2], C = s[r - 1], A = n / (R * C);
      std::vector<double> t(n);
      for (std::size_t a = 0; a < A; ++a)
        for (std::size_t i = 0; i < R; ++i)
          for (std::size_t j = 0; j < C; ++j) t[a * R * C + j * R + i] = v[a * R * C + i * C + j];
      Shape ts = s;
      std::swap(ts[r - 2], ts[r - 1]);
      return swap_dims(from_data(TensorData::from(t, ts).convert(dt), d, Kind::Float), static_cast<std::int64_t>(r - 2),
                       static_cast<std::int64_t>(r - 1));
    }
    const std::size_t n0 = s[0], inner = n / n0;
    if (l == Layout::Flipped) {
      std::vector<double> t(n);
      for (std::size_t k = 0; k < n0; ++k)
        for (std::size_t i = 0; i < inner; ++i) t[(n0 - 1 - k) * inner + i] = v[k * inner + i];
      const std::int64_t ax[] = {0};
      return axes(OpCode::flip, from_data(TensorData::from(t, s).convert(dt), d, Kind::Float), ax);
    }
    std::vector<double> t(2 * n, 0.0);
    for (std::size_t k = 0; k < n0; ++k)
      for (std::size_t i = 0; i < inner; ++i) t[2 * k * inner + i] = v[k * inner + i];
    Shape ts = s;
    ts[0] = 2 * n0;
    const tensor::Slice sl[] = {{0, std::nullopt, 2}};
    return slice(from_data(TensorData::from(t, ts).convert(dt), d, Kind::Float), sl);
  }
  DispatchTensor Ints(const std::vector<std::int32_t>& v, const Shape& s) {
    return from_data(TensorData::from(v, s), d, Kind::Int);
  }
};

ConvArgs nn_conv_args(std::size_t rank, std::array<std::int64_t, 3> st, std::array<std::int64_t, 3> pad,
                      std::array<std::int64_t, 3> dil, std::int64_t groups, std::array<std::int64_t, 3> pout = {0, 0, 0}) {
  ConvArgs a;
  a.rank = rank;
  a.stride = st;
  a.padding = pad;
  a.dilation = dil;
  a.groups = groups;
  a.padding_out = pout;
  return a;
}
PoolArgs nn_pool_args(std::size_t rank, std::array<std::int64_t, 3> k, std::array<std::int64_t, 3> st,
                      std::array<std::int64_t, 3> pad, bool ceil, bool cip = true) {
  PoolArgs a;
  a.rank = rank;
  a.kernel = k;
  a.stride = st;
  a.padding = pad;
  a.ceil_mode = ceil;
  a.count_include_pad = cip;
  return a;
}
PoolArgs nn_adaptive(std::size_t rank, std::array<std::int64_t, 3> out) {
  PoolArgs a;
  a.rank = rank;
  a.output_size = out;
  return a;
}

bool is_module_family(Family f) {
  switch (f) {
    case Family::Conv: case Family::ConvBackward: case Family::ConvBiasBackward: case Family::Pool:
    case Family::PoolWithIndices: case Family::PoolBackward: case Family::MaxPoolBackward: case Family::Interpolate:
    case Family::InterpolateBackward: case Family::Embedding: case Family::EmbeddingBackward: case Family::LayerNorm:
    case Family::Attention: case Family::Linear: case Family::BatchNorm: case Family::Unfold4d: case Family::CtcLoss:
    case Family::CtcLossBackward: case Family::DeformConv: case Family::DeformConvBackward:
      return true;
    default:
      return false;
  }
}

std::vector<DispatchTensor> nn_run(OpCode op, DeviceId d, DType dt, Layout layout) {
  NnIn in{d, dt, layout, std::mt19937_64(0x9e3779b97f4a7c15ull + static_cast<std::uint64_t>(op)), true};
  const ConvArgs c1 = nn_conv_args(1, {2, 1, 1}, {1, 0, 0}, {2, 1, 1}, 2);
  const ConvArgs c2 = nn_conv_args(2, {2, 1, 1}, {1, 1, 0}, {1, 2, 1}, 2);
  const ConvArgs c3 = nn_conv_args(3, {1, 2, 1}, {0, 1, 1}, {1, 1, 1}, 1);
  const ConvArgs t2 = nn_conv_args(2, {2, 2, 1}, {1, 0, 0}, {1, 1, 1}, 2, {1, 1, 0});
  const Shape x2{2, 4, 7, 6}, w2{6, 2, 3, 2}, tx2{2, 4, 3, 4}, tw2{4, 3, 3, 2};
  const PoolArgs mp2 = [] {
    PoolArgs a = nn_pool_args(2, {3, 2, 1}, {2, 2, 1}, {1, 1, 0}, true);
    a.dilation = {1, 2, 1};
    return a;
  }();
  const PoolArgs ap2 = nn_pool_args(2, {3, 2, 1}, {2, 1, 1}, {1, 1, 0}, true, false);
  switch (op) {
    case OpCode::conv1d: { auto x = in.F({2, 4, 9}); auto w = in.F({6, 2, 3}); return one(conv(op, std::move(x), std::move(w), in.F({6}), c1)); }
    case OpCode::conv2d: { auto x = in.F(x2); auto w = in.F(w2); return one(conv(op, std::move(x), std::move(w), in.F({6}), c2)); }
    case OpCode::conv3d: {
      auto x = in.F({1, 2, 4, 4, 3});
      auto w = in.F({3, 2, 2, 2, 2});
      return one(conv(op, std::move(x), std::move(w), in.F({3}), c3));
    }
    case OpCode::conv_transpose1d: {
      auto x = in.F({2, 2, 5});
      auto w = in.F({2, 3, 3});
      return one(conv(op, std::move(x), std::move(w), in.F({3}), nn_conv_args(1, {2, 1, 1}, {1, 0, 0}, {1, 1, 1}, 1, {1, 0, 0})));
    }
    case OpCode::conv_transpose2d: { auto x = in.F(tx2); auto w = in.F(tw2); return one(conv(op, std::move(x), std::move(w), in.F({6}), t2)); }
    case OpCode::conv_transpose3d: {
      auto x = in.F({1, 2, 2, 3, 2});
      auto w = in.F({2, 2, 2, 2, 2});
      return one(conv(op, std::move(x), std::move(w), DispatchTensor(), nn_conv_args(3, {2, 1, 2}, {0, 0, 1}, {1, 1, 1}, 1)));
    }
    case OpCode::conv_x_backward: case OpCode::conv_weight_backward: {
      const Shape y = tensor::core::conv_output_shape<2>("check", x2, w2, tensor::nn::ConvOptions<2>{{2, 1}, {1, 1}, {1, 2}, 2});
      auto a = in.F(op == OpCode::conv_x_backward ? y : x2);
      auto b = in.F(op == OpCode::conv_x_backward ? w2 : y);
      return one(conv_backward(op, std::move(a), std::move(b), op == OpCode::conv_x_backward ? x2 : w2, c2));
    }
    case OpCode::conv_bias_backward: return one(conv_backward_bias(in.F({2, 3, 4, 5})));
    case OpCode::conv_transpose_x_backward: case OpCode::conv_transpose_weight_backward: {
      const Shape y = tensor::core::conv_transpose_output_shape<2>(
          "check", tx2, tw2, tensor::nn::ConvTransposeOptions<2>{{2, 2}, {1, 0}, {1, 1}, {1, 1}, 2});
      const bool for_x = op == OpCode::conv_transpose_x_backward;
      auto a = in.F(for_x ? y : tx2);
      auto b = in.F(for_x ? tw2 : y);
      return one(conv_backward(op, std::move(a), std::move(b), for_x ? tx2 : tw2, t2));
    }
    case OpCode::max_pool1d: return one(pool(op, in.F({2, 3, 9}), nn_pool_args(1, {3, 1, 1}, {2, 1, 1}, {1, 0, 0}, true)));
    case OpCode::max_pool2d: return one(pool(op, in.F({2, 3, 7, 8}), mp2));
    case OpCode::max_pool1d_with_indices:
      return two(max_pool_with_indices(op, in.F({2, 3, 9}), nn_pool_args(1, {3, 1, 1}, {2, 1, 1}, {1, 0, 0}, true)));
    case OpCode::max_pool2d_with_indices: return two(max_pool_with_indices(op, in.F({2, 3, 7, 8}), mp2));
    case OpCode::max_pool_with_indices_backward: {
      auto x = in.F({2, 3, 7, 8});
      auto [y, i] = max_pool_with_indices(OpCode::max_pool2d_with_indices, std::move(x), mp2);
      const Shape ys = y.shape();
      return one(max_pool_backward(in.F(ys), std::move(i), Shape{2, 3, 7, 8}, mp2));
    }
    case OpCode::avg_pool1d: return one(pool(op, in.F({2, 3, 6}), nn_pool_args(1, {3, 1, 1}, {2, 1, 1}, {1, 0, 0}, true, false)));
    case OpCode::avg_pool2d: return one(pool(op, in.F({2, 3, 7, 6}), ap2));
    case OpCode::avg_pool_backward: {
      const Shape y = tensor::core::avg_pool_output_shape<2>("check", Shape{2, 3, 7, 6},
                                                           tensor::nn::AvgPoolOptions<2>{{3, 2}, {2, 1}, {1, 1}, false, true});
      return one(pool_backward(op, in.F(y), Shape{2, 3, 7, 6}, ap2));
    }
    case OpCode::adaptive_avg_pool1d: return one(pool(op, in.F({2, 3, 7}), nn_adaptive(1, {3, 1, 1})));
    case OpCode::adaptive_avg_pool2d: return one(pool(op, in.F({2, 3, 7, 5}), nn_adaptive(2, {3, 4, 1})));
    case OpCode::adaptive_avg_pool3d: return one(pool(op, in.F({1, 2, 3, 5, 4}), nn_adaptive(3, {2, 3, 1})));
    case OpCode::adaptive_avg_pool_backward:
      return one(pool_backward(op, in.F({2, 3, 3, 4}), Shape{2, 3, 7, 5}, nn_adaptive(2, {3, 4, 1})));
    case OpCode::interpolate: {
      std::vector<DispatchTensor> v;
      for (auto mode : {tensor::nn::InterpolateMode::Nearest, tensor::nn::InterpolateMode::Bilinear,
                        tensor::nn::InterpolateMode::Bicubic}) {
        in.first = true;
        in.rng.seed(static_cast<std::uint64_t>(op));
        v.push_back(interpolate(in.F({2, 3, 4, 5}), InterpArgs{{7, 3}, {mode, mode == tensor::nn::InterpolateMode::Bicubic}}));
      }
      return v;
    }
    case OpCode::interpolate_backward:
      return one(interpolate_backward(in.F({2, 3, 7, 3}), Shape{2, 3, 4, 5},
                                      InterpArgs{{7, 3}, {tensor::nn::InterpolateMode::Bilinear, false}}));
    case OpCode::embedding: {
      auto w = in.F({5, 3});
      return one(embedding(std::move(w), in.Ints({0, 4, 2, 2, 1, 3, 0, 4}, {2, 4})));
    }
    case OpCode::embedding_backward:
      return one(embedding_backward(in.F({2, 4, 3}), in.Ints({0, 4, 2, 2, 1, 3, 0, 4}, {2, 4}), Shape{6, 3}));
    case OpCode::layer_norm: {
      auto x = in.F({2, 3, 5});
      auto g = in.F({5});
      return one(layer_norm(std::move(x), std::move(g), in.F({5}), 1e-5));
    }
    case OpCode::attention: {
      auto q = in.F({1, 2, 3, 4});
      auto k = in.F({1, 2, 5, 4});
      auto v = in.F({1, 2, 5, 2});
      std::vector<bool> m(15);
      for (std::size_t i = 0; i < m.size(); ++i) m[i] = i % 4 == 1;
      auto mask = from_data(TensorData::from(m, Shape{1, 1, 3, 5}), d, Kind::Bool);
      tensor::nn::AttentionModuleOptions o;
      o.is_causal = true;
      return one(attention(std::move(q), std::move(k), std::move(v), std::move(mask), DispatchTensor(), o));
    }
    case OpCode::linear: {
      auto x = in.F({2, 3, 5});
      auto w = in.F({5, 4});
      return one(linear(std::move(x), std::move(w), in.F({4})));
    }
    case OpCode::batch_norm: {
      auto x = in.F({2, 3, 4, 2});
      auto g = in.F({3});
      auto b = in.F({3});
      auto m = in.F({3});
      return one(batch_norm(std::move(x), std::move(g), std::move(b), std::move(m), in.F({3}, 0.5, 2.0), 1e-5));
    }
    case OpCode::unfold4d: case OpCode::fold4d: {
      FoldArgs a;
      a.kernel = {2, 3};
      a.output_size = {5, 6};
      a.options.stride = {2, 1};
      a.options.padding = {1, 1};
      a.options.dilation = {1, 2};
      if (op == OpCode::unfold4d) return one(unfold4d(in.F({2, 2, 5, 6}), a));
      return one(fold4d(in.F(tensor::core::unfold4d_output_shape("check", Shape{2, 2, 5, 6}, a.kernel, a.options)), a));
    }
    case OpCode::ctc_loss: case OpCode::ctc_loss_backward: {
      auto lp = reduce_dim(OpCode::log_softmax, in.F({5, 3, 4}), 2);
      auto tg = in.Ints({1, 2, 1, 3, 1, 0, 2, 2, 2}, {3, 3});
      auto il = in.Ints({5, 4, 2}, {3}), tl = in.Ints({3, 2, 2}, {3});
      if (op == OpCode::ctc_loss) return one(ctc_loss(std::move(lp), std::move(tg), std::move(il), std::move(tl), 0));
      return one(ctc_loss_backward(std::move(lp), std::move(tg), std::move(il), std::move(tl), in.F({3}), 0));
    }
    case OpCode::deform_conv2d: case OpCode::deform_conv2d_backward: {
      tensor::nn::DeformConvOptions<2> o;
      o.padding = {1, 0};
      o.weight_groups = 2;
      o.offset_groups = 2;
      auto x = in.F({1, 4, 4, 4});
      auto off = in.F({1, 16, 5, 3}, -1.7, 1.7);
      auto w = in.F({2, 2, 2, 2});
      auto m = in.F({1, 8, 5, 3});
      if (op == OpCode::deform_conv2d)
        return one(deform_conv2d(std::move(x), std::move(off), std::move(w), std::move(m), in.F({2}), o));
      return deform_conv2d_backward(std::move(x), std::move(off), std::move(w), std::move(m), in.F({1, 2, 5, 3}), true, o);
    }
    default: break;
  }
  throw NotImplemented("[check] no recipe");
}

// The inputs of one case, as host data (identical for both devices).
struct Inputs {
  TensorData a, b, idx, mask;
  DType dtype;
  DType cast_to;  // target of `cast`: another dtype of the kind that the checked device supports
  std::size_t rows = kRows, cols = kCols;
};

// Runs `op` on device `d`; `a` is placed with `layout`, other operands contiguous.
// Returns the outputs; `values` false when only dtype/shape are defined (empty).
std::vector<DispatchTensor> run_op(OpCode op, DeviceId d, const Inputs& in, Layout layout, bool& values) {
  values = true;
  if (is_module_family(op_family(op))) return nn_run(op, d, in.dtype, layout);
  const Kind k = kind_for(in.dtype);
  const family_calls::Operands o{.device = d,
                                 .dtype = in.dtype,
                                 .cast_to = in.cast_to,
                                 .rows = in.rows,
                                 .cols = in.cols,
                                 .a = [&] { return place(d, in.a, layout); },
                                 .b = [&] { return from_data(in.b, d, k); },
                                 .idx = [&] { return from_data(in.idx, d, Kind::Int); },
                                 .mask = [&] { return from_data(in.mask, d, Kind::Bool); },
                                 .a_host = &in.a,
                                 .update_rules = kUpdateRules};
  if (auto outs = family_calls::call(op, o, values)) return std::move(*outs);
  throw NotImplemented("[check] no recipe");
}

// Which dtypes an op is checked for.
std::vector<DType> dtypes_for(OpCode op) {
  std::vector<DType> out;
  const std::uint8_t k = op_info(op).kinds;
  for (DType t : kAllDTypes) {
    const Kind kk = kind_for(t);
    if ((kk == Kind::Float && (k & kKindF)) || (kk == Kind::Int && (k & kKindI)) || (kk == Kind::Bool && (k & kKindB)))
      out.push_back(t);
  }
  return out;
}

// The families with a recipe: the module ops' here, the others' in family_calls.hpp (fft is
// checked against a naive DFT by tests/burn_api_test.cpp and conformance_defaults, not here yet).
bool has_recipe(OpCode op) { return is_module_family(op_family(op)) || family_calls::has_call(op); }

// Families whose result does not depend on the input layout: one case is enough.
bool layout_free(Family f) {
  switch (f) {
    case Family::Create: case Family::Full: case Family::Range: case Family::RangeStep: case Family::FromData:
      return true;
    default:
      return false;
  }
}

// The dtype an op is checked at the large shapes: f32, else i32, else the first the device has.
std::optional<DType> huge_dtype(const std::vector<DType>& dts, DeviceId d) {
  for (DType p : {DType::F32, DType::I32})
    if (std::find(dts.begin(), dts.end(), p) != dts.end() && dispatch::supports_dtype(d, p)) return p;
  for (DType p : dts)
    if (dispatch::supports_dtype(d, p)) return p;
  return std::nullopt;
}

// The random inputs of one case of `op` at [R, C] (identical for both devices).
Inputs make_inputs(OpCode op, DType dt, std::size_t R, std::size_t C, DeviceId device, std::mt19937_64& rng) {
  const std::string name(op_name(op));
  const Family f = op_family(op);
  // Shapes per family: matmul needs [R,C] x [C,5]; slice_assign a [3,3] value; indices in range.
  const bool sel = f == Family::Select || f == Family::SelectAssign || f == Family::SelectUpdate;
  const Shape sa = op == OpCode::cross ? Shape{R, 3} : Shape{R, C};
  Inputs in{random_data(sa, dt, name, rng), {}, {}, {}, dt, dt, R, C};
  for (DType t : kAllDTypes)
    if (t != dt && kind_for(t) == kind_for(dt) && dispatch::supports_dtype(device, t)) {
      in.cast_to = t;
      break;
    }
  in.b = random_data(op == OpCode::matmul ? Shape{C, 5} : op == OpCode::slice_assign ? Shape{3, 3}
                     : op == OpCode::cross ? Shape{R, 3}
                     : sel ? Shape{R, 4}
                           : Shape{R, C},
                     dt, name, rng);
  const Shape is = sel ? Shape{4} : Shape{R, C};
  std::vector<std::int64_t> idx(is.num_elements());
  for (auto& x : idx) x = static_cast<std::int64_t>(rng() % (op == OpCode::powi ? 4 : C));
  in.idx = TensorData::from(idx, is).convert(DType::I32);
  std::vector<bool> m(R * C);
  for (std::size_t j = 0; j < m.size(); ++j) m[j] = (rng() & 3u) == 0;
  in.mask = TensorData::from(m, Shape{R, C});
  return in;
}

}  // namespace

CheckSummary run_checks(const CheckOptions& opt, const std::function<void(const CheckResult&)>& report) {
  CheckSummary sum;
  std::mt19937_64 rng(opt.seed);
  const CaseShape small{kRows, kCols, {Layout::Contiguous, Layout::Transposed, Layout::Sliced, Layout::Flipped}, ""};
  const CaseShape wide{3, 1025, {Layout::Transposed}, " [3,1025]"};
  const CaseShape huge{1024, 1024, {Layout::Contiguous}, " [1024,1024]"};
  for (std::size_t i = 0; i < kOps.size(); ++i) {
    const auto op = static_cast<OpCode>(i);
    const Family fam = op_family(op);
    const std::string name(op_name(op));
    if (!opt.op_pattern.empty() && name.find(opt.op_pattern) == std::string::npos) continue;
    if (!has_recipe(op)) continue;
    const std::vector<DType> dtypes = dtypes_for(op);
    const std::optional<DType> large_dt = huge_dtype(dtypes, opt.device);
    for (DType dt : dtypes) {
      if (opt.dtype && *opt.dtype != dt) continue;
      const DTypeUsageSet usage = dispatch::dtype_usage(opt.device, dt);
      std::vector<const CaseShape*> shapes = {&small};
      if (large_dt == dt && at_large_shapes(fam, false)) shapes.push_back(&wide);
      if (large_dt == dt && at_large_shapes(fam, true)) shapes.push_back(&huge);
      for (const CaseShape* cs : shapes) {
        const Inputs in = make_inputs(op, dt, cs->rows, cs->cols, opt.device, rng);
        for (Layout layout : cs->layouts) {
          if (layout_free(fam) && layout != Layout::Contiguous) continue;
          CheckResult r{name, std::string(dtype_name(dt)), layout_name(layout) + std::string(cs->suffix), 0, 0, CheckStatus::Pass, {}};
          if (!usage.contains(DTypeUsage::Storage)) {
            // No silent fallback: the op must refuse the dtype with a DTypeError.
            r.status = CheckStatus::Unsupported;
            try {
              bool v = true;
              auto outs = run_op(op, opt.device, in, layout, v);
              for (auto& o : outs) read(std::move(o));
              r.status = CheckStatus::Fail;
              r.note = "device reports no support for this dtype but the op ran";
            } catch (const DTypeError&) {
            } catch (const Error& e) {
              r.note = e.what();
            }
          } else {
            try {
              bool values = true;
              std::vector<TensorData> want, got;
              for (auto& o : run_op(op, kCpu, in, layout, values)) want.push_back(read(std::move(o)));
              for (auto& o : run_op(op, opt.device, in, layout, values)) got.push_back(read(std::move(o)));
              for (std::size_t o = 0; o < want.size() && r.note.empty(); ++o) r.note = compare(want[o], got[o], values, r);
              if (!r.note.empty()) r.status = CheckStatus::Fail;
            } catch (const DTypeError& e) {
              // Storage without Arithmetic: compute ops may refuse the dtype, and must.
              if (usage.contains(DTypeUsage::Arithmetic)) {
                r.status = CheckStatus::Fail;
                r.note = e.what();
              } else {
                r.status = CheckStatus::Unsupported;
              }
            } catch (const Error& e) {
              r.status = CheckStatus::Fail;
              r.note = e.what();
            }
          }
          if (r.status == CheckStatus::Pass) ++sum.passed;
          else if (r.status == CheckStatus::Fail) ++sum.failed;
          else ++sum.unsupported;
          report(r);
        }
      }
    }
  }
  return sum;
}

}  // namespace tensorctl
