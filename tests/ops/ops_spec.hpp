// The shared part of the op tests generated from the op table (tests/ops/*.cpp, linked
// into one executable per device: ops_cpu, ops_mini, ops_vulkan): the scalar reference
// model (double / int64, independent of the kernels), inputs in every layout, expected
// results, comparison and the per-device test fixtures. The references themselves live
// in the per-family spec files: unary.cpp, binary.cpp (binary and scalar), compare.cpp,
// reduce.cpp (the elementwise harness, generated.cpp) and index.cpp, layout.cpp,
// sort.cpp, misc.cpp (the structured families, structured.cpp); table.cpp checks that
// every op-table row of those families has a reference.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <map>
#include <numeric>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "dispatch/backend.hpp"
#include "dispatch/table/ops.hpp"
#include "conformance/devices.hpp"
#include "conformance/mini_backend.hpp"
#include "test_util.hpp"

namespace ops_spec {

using namespace tt;
using tensor::dispatch::Family;
using tensor::dispatch::kOps;
using tensor::dispatch::OpInfo;
using tensor::dispatch::Registry;

constexpr std::size_t kRows = 4, kCols = 6;  // logical shape of the small operands (other shapes: shape_of)

// The device under test (set by the fixtures) and uploads onto it.
inline const Device& dev() { return tt::conf::DeviceScope::current(); }
inline H on_dev(const Host& h) { return upload(h, dev()); }
// The device's default index and bool dtypes (results of argmax, comparisons, ...).
inline DType idx_out() { return to_dtype(dev().settings().int_dtype); }
inline DType bool_out() { return to_dtype(dev().settings().bool_dtype); }

// ---- the reference model -----------------------------------------------------------

struct Domain {
  double lo = -3, hi = 3;
  double quantum = 0;  // values snapped to multiples of this (0: continuous)
  double min_abs = 0;  // |value| at least this
  double special = 0;  // floats: probability of NaN, +inf or -inf instead
};

using FEl = std::function<double(const std::vector<double>&)>;                      // element inputs (+ scalar)
using IEl = std::function<std::int64_t(const std::vector<std::int64_t>&, DType)>;  // ints/bools, result unwrapped
using FLane = std::function<std::vector<double>(const std::vector<double>&)>;
using ILane = std::function<std::vector<std::int64_t>(const std::vector<std::int64_t>&, DType)>;

enum class LaneTol { Exact, Sum, Mean, Prod, Rel };

struct Spec {
  FEl f;
  IEl i;
  FLane fl;
  ILane il;
  bool scan = false;       // Dim family: output keeps the dim (cumsum, softmax)
  bool transpose = false;  // the transpose op
  bool bool_out = false;   // comparisons
  Domain fd[2];
  Domain sd[2] = {{-10, 10}, {-10, 10}};
  std::optional<Domain> ud[2];  // unsigned; default: sd clipped to >= 0
  std::vector<double> fs;        // scalar arguments for float tensors
  std::vector<std::int64_t> ss;  // ... signed int tensors
  std::vector<std::int64_t> us;  // ... unsigned int tensors
  bool int_scalar = false;       // float tensors get the scalars as ints (powi)
  double tol = 4;                // float results: |got - want| <= tol * eps * (|want| + floor) + abs
  double floor = 0;
  double abs = 0;
  LaneTol lane_tol = LaneTol::Exact;
  // Reductions: which inputs must raise ShapeError instead of giving a value.
  enum class EmptyRule { None, TensorEmpty, IntLaneEmpty, IntTensorEmpty } empty = EmptyRule::None;
};

inline std::uint64_t U(std::int64_t v) { return static_cast<std::uint64_t>(v); }
inline std::int64_t S(std::uint64_t v) { return static_cast<std::int64_t>(v); }

// Floor-mod on ints (result has the divisor's sign); plain % on unsigned.
inline std::int64_t int_rem(std::int64_t a, std::int64_t b, DType t) {
  if (is_un(t)) return S(U(a) % U(b));
  std::int64_t r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}
inline double float_rem(double a, double b) {
  double r = std::fmod(a, b);
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}
inline double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
inline std::int64_t ipow(std::int64_t x, std::int64_t n) {
  std::uint64_t r = 1;
  for (std::int64_t k = 0; k < n; ++k) r *= U(x);
  return S(r);
}

inline Spec unary_f(std::function<double(double)> g, Domain d = {}, double tol = 4, double floor = 0) {
  Spec s;
  s.f = [g](const std::vector<double>& v) { return g(v[0]); };
  s.fd[0] = d;
  s.tol = tol;
  s.floor = floor;
  return s;
}
inline Spec transc(std::function<double(double)> g, Domain d = {}) { return unary_f(std::move(g), d, 16, 1); }
inline Spec binary_f(std::function<double(double, double)> g, Domain a = {}, Domain b = {}, double tol = 4, double floor = 0) {
  Spec s;
  s.f = [g](const std::vector<double>& v) { return g(v[0], v[1]); };
  s.fd[0] = a;
  s.fd[1] = b;
  s.tol = tol;
  s.floor = floor;
  return s;
}
// Comparisons: the same predicate on floats, ints and bools (as 0/1).
inline Spec compare(std::function<bool(double, double)> p) {
  Spec s;
  s.bool_out = true;
  s.f = [p](const std::vector<double>& v) { return p(v[0], v[1]) ? 1.0 : 0.0; };
  s.i = [p](const std::vector<std::int64_t>& v, DType) -> std::int64_t {
    return p(static_cast<double>(v[0]), static_cast<double>(v[1])) ? 1 : 0;
  };
  // Small integer-valued sets so that ties happen.
  s.fd[0] = s.fd[1] = {-3, 3, 0.5};
  s.sd[0] = s.sd[1] = {-3, 3};
  s.ud[0] = s.ud[1] = Domain{0, 6};
  s.fs = {1.0, -0.5};
  s.ss = {1, -2};
  s.us = {1, 3};
  return s;
}

inline std::vector<double> cum(const std::vector<double>& v, std::function<double(double, double)> op) {
  std::vector<double> out(v.size());
  for (std::size_t k = 0; k < v.size(); ++k) out[k] = k ? op(out[k - 1], v[k]) : v[k];
  return out;
}
inline std::vector<std::int64_t> cumi(const std::vector<std::int64_t>& v, std::function<std::int64_t(std::int64_t, std::int64_t)> op) {
  std::vector<std::int64_t> out(v.size());
  for (std::size_t k = 0; k < v.size(); ++k) out[k] = k ? op(out[k - 1], v[k]) : v[k];
  return out;
}
inline double nan_max(double a, double b) { return std::isnan(a) || std::isnan(b) ? NAN : std::max(a, b); }
inline double nan_min(double a, double b) { return std::isnan(a) || std::isnan(b) ? NAN : std::min(a, b); }

// The references of the elementwise families, one spec file each (tests/ops/unary.cpp,
// binary.cpp, compare.cpp, reduce.cpp), keyed by op-table name.
void add_unary_specs(std::map<std::string, Spec>& m);
void add_binary_specs(std::map<std::string, Spec>& m);
void add_compare_specs(std::map<std::string, Spec>& m);
void add_reduce_specs(std::map<std::string, Spec>& m);
inline const std::map<std::string, Spec>& specs() {
  static const std::map<std::string, Spec> s = [] {
    std::map<std::string, Spec> m;
    add_unary_specs(m);
    add_binary_specs(m);
    add_compare_specs(m);
    add_reduce_specs(m);
    return m;
  }();
  return s;
}

// Ops of the harness families that have no reference here yet, each with the
// reason. Adding a row to the op table without a reference fails
// OpTable.EveryHarnessOpHasAReference until it is referenced or listed here.
inline const std::map<std::string, std::string>& not_yet_referenced() {
  static const std::map<std::string, std::string> m = {};
  return m;
}

inline bool harness_family(Family f) {
  return f == Family::Unary || f == Family::Binary || f == Family::Scalar || f == Family::Compare ||
         f == Family::CompareScalar || f == Family::Reduce || f == Family::Dim;
}

// ---- inputs in every layout ---------------------------------------------------------

// Layouts of the small [4, 6] operands, then shapes: odd sizes that leave SIMD tails
// (33 x 67), a scalar-like [1, 1], sizes one past the Vulkan workgroup sizes (256
// invocations for elementwise and row kernels, 64 for reductions and scans: [1, 257],
// [3, 1025]) and a large one (2^20 elements: whole-tensor reductions split across
// workgroups on Vulkan).
enum class Layout {
  Contiguous, Transposed, Strided, Flipped, NegStep, Broadcast, ImplicitBroadcast, ZeroCols, ZeroRows, Large, LargeTransposed,
  Scalar1x1, Row257, Wide3x1025, Wide3x1025Transposed, Huge
};
inline const char* layout_name(Layout l) {
  static const char* k[] = {"contiguous", "transposed", "sliced-step2", "flipped", "negative-step",
                            "broadcast",  "implicit-broadcast", "zero-size[R,0]", "zero-size[0,C]",
                            "large-33x67", "large-33x67-transposed", "scalar-like[1,1]", "odd[1,257]",
                            "wide[3,1025]", "wide[3,1025]-transposed", "huge[1024,1024]"};
  return k[static_cast<int>(l)];
}
// The logical [rows, cols] of an operand in layout L.
inline std::pair<std::size_t, std::size_t> shape_of(Layout L) {
  switch (L) {
    case Layout::Large: case Layout::LargeTransposed: return {33, 67};
    case Layout::Scalar1x1: return {1, 1};
    case Layout::Row257: return {1, 257};
    case Layout::Wide3x1025: case Layout::Wide3x1025Transposed: return {3, 1025};
    case Layout::Huge: return {1024, 1024};
    default: return {kRows, kCols};
  }
}
// The shapes beyond the small layouts, for every harness op (Huge: see GeneratedOp).
constexpr Layout kShapeLayouts[] = {Layout::Large, Layout::LargeTransposed, Layout::Scalar1x1, Layout::Row257,
                                    Layout::Wide3x1025, Layout::Wide3x1025Transposed};

inline Host gen(DType t, std::vector<std::size_t> shape, const Domain& d, std::mt19937& rng) {
  Host h;
  h.shape = std::move(shape);
  h.dtype = t;
  const std::size_t n = h.size();
  for (std::size_t k = 0; k < n; ++k) {
    if (is_fl(t)) {
      double v;
      if (d.special > 0 && std::uniform_real_distribution<double>(0, 1)(rng) < d.special) {
        const double kSpecials[] = {NAN, INFINITY, -INFINITY};
        h.f.push_back(kSpecials[std::uniform_int_distribution<int>(0, 2)(rng)]);
        continue;
      }
      do {
        v = std::uniform_real_distribution<double>(d.lo, d.hi)(rng);
        if (d.quantum > 0) v = std::round(v / d.quantum) * d.quantum;
      } while (std::fabs(v) < d.min_abs);
      h.f.push_back(round_to(t, v));
    } else if (is_bo(t)) {
      h.i.push_back(std::bernoulli_distribution(0.5)(rng) ? 1 : 0);
    } else {
      std::int64_t v;
      do {
        v = std::uniform_int_distribution<std::int64_t>(static_cast<std::int64_t>(d.lo), static_cast<std::int64_t>(d.hi))(rng);
      } while (std::fabs(static_cast<double>(v)) < d.min_abs);
      h.i.push_back(v);
    }
  }
  return h;
}

inline void copy_elem(const Host& from, std::size_t fk, Host& to, std::size_t tk) {
  if (from.floaty()) to.f[tk] = from.f[fk];
  else to.i[tk] = from.i[fk];
}
inline Host like(const Host& h, std::vector<std::size_t> shape) {
  Host o;
  o.shape = std::move(shape);
  o.dtype = h.dtype;
  if (h.floaty()) o.f.assign(o.size(), 0.0);
  else o.i.assign(o.size(), 0);
  return o;
}

struct Operand {
  Host logical;
  H t;
};

inline Operand make_operand(Layout L, int role, DType dt, const Domain& d, std::mt19937& rng) {
  const auto [R, C] = shape_of(L);
  Operand o;
  switch (L) {
    case Layout::Large:
    case Layout::Scalar1x1:
    case Layout::Row257:
    case Layout::Wide3x1025:
    case Layout::Huge:
    case Layout::Contiguous:
      o.logical = gen(dt, {R, C}, d, rng);
      o.t = on_dev(o.logical);
      break;
    case Layout::LargeTransposed:
    case Layout::Wide3x1025Transposed:
    case Layout::Transposed: {
      o.logical = gen(dt, {R, C}, d, rng);
      Host base = like(o.logical, {C, R});
      for (std::size_t r = 0; r < R; ++r)
        for (std::size_t c = 0; c < C; ++c) copy_elem(o.logical, r * C + c, base, c * R + r);
      o.t = H(detail::unary(OpCode::transpose, on_dev(base).share()));
      break;
    }
    case Layout::Strided: {
      o.logical = gen(dt, {R, C}, d, rng);
      Host base = gen(dt, {R + 1, 2 * C}, d, rng);  // junk around the selected elements
      for (std::size_t r = 0; r < R; ++r)
        for (std::size_t c = 0; c < C; ++c) copy_elem(o.logical, r * C + c, base, (r + 1) * 2 * C + 2 * c);
      const Slice s[] = {Slice::range(1, R + 1), Slice::range(0, 2 * C, 2)};
      o.t = H(detail::slice(on_dev(base).share(), s));
      break;
    }
    case Layout::Flipped: {
      o.logical = gen(dt, {R, C}, d, rng);
      Host base = like(o.logical, {R, C});
      for (std::size_t r = 0; r < R; ++r)
        for (std::size_t c = 0; c < C; ++c) copy_elem(o.logical, r * C + c, base, (R - 1 - r) * C + (C - 1 - c));
      const std::int64_t ax[] = {0, 1};
      o.t = H(detail::axes(OpCode::flip, on_dev(base).share(), ax));
      break;
    }
    case Layout::NegStep: {
      o.logical = gen(dt, {R, C}, d, rng);
      Host base = like(o.logical, {R, C});
      for (std::size_t r = 0; r < R; ++r)
        for (std::size_t c = 0; c < C; ++c) copy_elem(o.logical, r * C + c, base, r * C + (C - 1 - c));
      const Slice s[] = {Slice::all(), Slice{0, std::nullopt, -1}};
      o.t = H(detail::slice(on_dev(base).share(), s));
      break;
    }
    case Layout::Broadcast: {
      const std::vector<std::size_t> small = role == 0 ? std::vector<std::size_t>{1, C} : std::vector<std::size_t>{R, 1};
      Host h = gen(dt, small, d, rng);
      o.logical = like(h, {R, C});
      for (std::size_t r = 0; r < R; ++r)
        for (std::size_t c = 0; c < C; ++c) copy_elem(h, role == 0 ? c : r, o.logical, r * C + c);
      const std::int64_t dims[] = {static_cast<std::int64_t>(R), static_cast<std::int64_t>(C)};
      o.t = H(detail::reshape(OpCode::expand, on_dev(h).share(), dims));
      break;
    }
    case Layout::ImplicitBroadcast:
      o.logical = gen(dt, role == 0 ? std::vector<std::size_t>{R, 1} : std::vector<std::size_t>{1, C}, d, rng);
      o.t = on_dev(o.logical);
      break;
    case Layout::ZeroCols:
      o.logical = gen(dt, {R, 0}, d, rng);
      o.t = on_dev(o.logical);
      break;
    case Layout::ZeroRows:
      o.logical = gen(dt, {0, C}, d, rng);
      o.t = on_dev(o.logical);
      break;
  }
  return o;
}

// ---- expected results ----------------------------------------------------------------

struct Expected {
  Host value;
  std::vector<double> tol;  // per element, floats only
  bool error = false;       // ShapeError expected
};

inline double eps_of(DType t) { return epsilon(t); }
inline double min_normal(DType t) {
  switch (t) {
    case DType::F64: return std::numeric_limits<double>::min();
    case DType::F16: return 6.103515625e-05;
    default: return std::numeric_limits<float>::min();  // f32, bf16
  }
}

inline Expected elementwise(const Spec& sp, const std::vector<Host>& in, std::optional<double> sf, std::optional<std::int64_t> si) {
  Expected e;
  std::vector<std::size_t> shape = {1, 1};  // broadcast: a dim other than 1 wins
  for (const Host& h : in)
    for (std::size_t k = 0; k < 2; ++k)
      if (h.shape[k] != 1) shape[k] = h.shape[k];
  const DType in_t = in[0].dtype;
  e.value.shape = shape;
  e.value.dtype = sp.bool_out ? bool_out() : in_t;
  const double eps = eps_of(in_t);
  for (std::size_t r = 0; r < shape[0]; ++r)
    for (std::size_t c = 0; c < shape[1]; ++c) {
      auto idx = [&](const Host& h) { return (h.shape[0] == 1 ? 0 : r) * h.shape[1] + (h.shape[1] == 1 ? 0 : c); };
      if (is_fl(in_t)) {
        std::vector<double> args;
        for (const Host& h : in) args.push_back(h.f[idx(h)]);
        if (sf) args.push_back(*sf);
        const double v = sp.f(args);
        if (sp.bool_out) {
          e.value.i.push_back(v != 0);
        } else {
          e.value.f.push_back(v);
          // min_normal: below it a dtype's spacing stops shrinking (subnormals; an f16
          // leaky_relu of -2.9e-4 lands on -2.9e-6, 48.5 subnormal steps), so the relative
          // bound gets the same floor the spacing has.
          e.tol.push_back(sp.tol * eps * (std::fabs(v) + sp.floor + min_normal(in_t)) + sp.abs);
        }
      } else {
        std::vector<std::int64_t> args;
        for (const Host& h : in) args.push_back(h.i[idx(h)]);
        if (si) args.push_back(*si);
        const std::int64_t v = sp.i(args, in_t);
        e.value.i.push_back(sp.bool_out ? (v != 0) : wrap(in_t, v));
      }
    }
  return e;
}

inline Expected transposed(const Host& in) {
  Expected e;
  e.value = like(in, {in.shape[1], in.shape[0]});
  for (std::size_t r = 0; r < in.shape[0]; ++r)
    for (std::size_t c = 0; c < in.shape[1]; ++c) copy_elem(in, r * in.shape[1] + c, e.value, c * in.shape[0] + r);
  e.tol.assign(e.value.f.size(), 0.0);
  return e;
}

// Reductions and scans along `dim` (nullopt: the whole tensor, row-major, result [1]).
inline Expected lanes(const Spec& sp, const Host& in, std::optional<std::size_t> dim) {
  Expected e;
  const DType t = in.dtype;
  const bool fl = is_fl(t);
  using R_ = Spec::EmptyRule;
  const bool tensor_empty = in.size() == 0;
  const std::size_t lane_len = dim ? in.shape[*dim] : in.size();
  // Extrema of nothing raise: of an empty tensor, or (along a dim) of an empty lane;
  // along a non-empty dim of an empty tensor the result is empty (issue 17).
  const bool extremum_empty = dim ? lane_len == 0 : tensor_empty;
  if ((sp.empty == R_::TensorEmpty && extremum_empty) || (!fl && sp.empty == R_::IntTensorEmpty && tensor_empty) ||
      (!fl && sp.empty == R_::IntLaneEmpty && lane_len == 0)) {
    e.error = true;
    return e;
  }
  std::vector<std::vector<std::size_t>> lane_idx;  // source flat indices of each lane
  std::vector<std::size_t> out_shape;
  if (!dim) {
    lane_idx.emplace_back(in.size());
    std::iota(lane_idx[0].begin(), lane_idx[0].end(), std::size_t{0});
    out_shape = {sp.scan ? in.size() : 1};
  } else {
    const std::size_t d = *dim, o = 1 - d;
    out_shape = in.shape;
    if (!sp.scan) out_shape[d] = 1;
    for (std::size_t j = 0; j < in.shape[o]; ++j) {
      std::vector<std::size_t> l;
      for (std::size_t k = 0; k < in.shape[d]; ++k) l.push_back(d == 1 ? j * in.shape[1] + k : k * in.shape[1] + j);
      lane_idx.push_back(l);
    }
  }
  e.value = like(in, out_shape);
  const double eps = eps_of(t);
  for (std::size_t j = 0; j < lane_idx.size(); ++j) {
    const auto& li = lane_idx[j];
    std::vector<std::size_t> dst;  // destination flat indices
    if (!dim) {
      dst = sp.scan ? li : std::vector<std::size_t>{0};
    } else if (sp.scan) {
      dst = li;
    } else {
      dst = {j};  // the output has size 1 in dim: lane j is row j (dim 1) or column j (dim 0)
    }
    if (fl) {
      std::vector<double> v;
      double sabs = 0;
      for (auto k : li) { v.push_back(in.f[k]); sabs += std::fabs(in.f[k]); }
      const std::vector<double> r = sp.fl(v);
      const double n = static_cast<double>(v.size());
      for (std::size_t k = 0; k < r.size(); ++k) {
        e.value.f[dst[k]] = r[k];
        double tol = 0;
        switch (sp.lane_tol) {
          case LaneTol::Exact: break;
          case LaneTol::Sum: tol = (n + 2) * eps * sabs; break;
          case LaneTol::Mean: tol = (n + 2) * eps * sabs / std::max(n, 1.0) + 2 * eps * std::fabs(r[k]); break;
          // Long lanes of factors below 1 in magnitude underflow: allow the smallest normal.
          case LaneTol::Prod: tol = (n + 2) * eps * std::fabs(r[k]) + min_normal(t); break;
          case LaneTol::Rel: tol = 16 * eps * (std::fabs(r[k]) + 1); break;
        }
        if (sp.lane_tol == LaneTol::Prod && sp.scan) {
          // every prefix product is bounded by the lane's magnitudes
          double mx = 1;
          for (double x : v) mx *= std::max(1.0, std::fabs(x));
          tol = (n + 2) * eps * mx;
        }
        e.tol.resize(e.value.f.size(), 0.0);
        e.tol[dst[k]] = tol;
      }
    } else {
      std::vector<std::int64_t> v;
      for (auto k : li) v.push_back(in.i[k]);
      const std::vector<std::int64_t> r = sp.il(v, t);
      for (std::size_t k = 0; k < r.size(); ++k) e.value.i[dst[k]] = wrap(t, r[k]);
    }
  }
  if (fl) e.tol.resize(e.value.f.size(), 0.0);
  return e;
}

// ---- comparing ------------------------------------------------------------------------

inline std::string fmt_shape(const std::vector<std::size_t>& s) {
  std::ostringstream o;
  o << "[";
  for (std::size_t k = 0; k < s.size(); ++k) o << (k ? ", " : "") << s[k];
  return o.str() + "]";
}

inline ::testing::AssertionResult same(const Expected& want, const Host& got) {
  if (got.shape != want.value.shape)
    return ::testing::AssertionFailure() << "shape: want " << fmt_shape(want.value.shape) << " got " << fmt_shape(got.shape);
  if (got.dtype != want.value.dtype)
    return ::testing::AssertionFailure() << "dtype: want " << name(want.value.dtype) << " got " << name(got.dtype);
  int bad = 0;
  std::ostringstream msg;
  const std::size_t n = want.value.size();
  for (std::size_t k = 0; k < n; ++k) {
    bool ok;
    if (want.value.floaty()) {
      const double w = want.value.f[k], g = got.f[k];
      ok = (std::isnan(w) && std::isnan(g)) || w == g || std::fabs(w - g) <= want.tol[k];
      if (!ok && bad < 4) msg << " [" << k << "] want " << w << " got " << g << " (tol " << want.tol[k] << ");";
    } else {
      ok = want.value.i[k] == got.i[k];
      if (!ok && bad < 4) msg << " [" << k << "] want " << want.value.i[k] << " got " << got.i[k] << ";";
    }
    bad += !ok;
  }
  if (bad) return ::testing::AssertionFailure() << bad << "/" << n << " elements differ:" << msg.str();
  return ::testing::AssertionSuccess();
}

// ---- the harness ------------------------------------------------------------------------

inline std::vector<DType> dtypes_for(std::uint8_t kinds) {
  // push_back, not insert(initializer_list): GCC 12 at -O3 warns falsely (-Wstringop-overflow) on the latter.
  std::vector<DType> out;
  auto add = [&](std::initializer_list<DType> ds) { for (DType d : ds) out.push_back(d); };
  if (kinds & tensor::dispatch::kKindF) add({DType::F64, DType::F32, DType::F16, DType::BF16});
  if (kinds & tensor::dispatch::kKindI)
    add({DType::I64, DType::I32, DType::I16, DType::I8, DType::U64, DType::U32, DType::U16, DType::U8});
  if (kinds & tensor::dispatch::kKindB) add({DType::Bool, DType::BoolU8});
  return out;
}

// Ops that raised NotImplemented ("device op"), with the dtypes, for the summary.
inline std::map<std::string, std::set<std::string>>& not_implemented() {
  static std::map<std::string, std::set<std::string>> m;
  return m;
}



// One test per device x op: the device comes from the registry (tt::conf::devices()),
// so a backend registered later is tested without an edit here.
struct OpCase {
  Device dev;
  std::size_t op = 0;
};
inline void PrintTo(const OpCase& c, std::ostream* os) { *os << c.dev.to_string() << " " << kOps[c.op].name; }

inline std::vector<OpCase> cases_of(bool (*in_family)(Family)) {
  std::vector<OpCase> out;
  for (const Device& d : tt::conf::devices())
    for (std::size_t k = 0; k < kOps.size(); ++k)
      if (in_family(kOps[k].family) && !kOps[k].qfloat_in) out.push_back({d, k});  // quant rows: quant_rows_test
  return out;
}
inline std::string case_name(const ::testing::TestParamInfo<OpCase>& p) {
  return tt::conf::test_name(p.param.dev) + "_" + std::string(kOps[p.param.op].name);
}

class DeviceOpTest : public ::testing::TestWithParam<OpCase> {
 protected:
  void SetUp() override { scope_.enter(GetParam().dev); }
  void TearDown() override { scope_.leave(); }
  tt::conf::DeviceScope scope_;
};

// The huge shape costs ~1 s per case: it runs for every reduction (long lines split
// across workgroups on Vulkan) and for the first op of each elementwise family, on one
// dtype (f32, else i32, else the first the device supports), without ownership variants.
inline bool first_of_family(std::size_t op) {
  for (std::size_t k = 0; k < op; ++k)
    if (kOps[k].family == kOps[op].family) return false;
  return true;
}
inline std::optional<DType> huge_dtype(const std::vector<DType>& dts, const Device& d) {
  for (DType p : {DType::F32, DType::I32})
    if (std::find(dts.begin(), dts.end(), p) != dts.end() && d.supports_dtype(p)) return p;
  for (DType p : dts)
    if (d.supports_dtype(p)) return p;
  return std::nullopt;
}

// Ownership variants (operands handed over) at layout L. Every layout on host-memory
// devices; on the others (each variant is a device round trip: ops_vulkan would take
// minutes on lavapipe) the small contiguous and transposed layouts, where the in-place
// paths are. Never at the huge shape.
inline bool variants_at(const Device& d, Layout L) {
  if (L == Layout::Huge) return false;
  const std::uint16_t t = d.id().type_id;
  if (t == kCpuDeviceType || t == tt::mini::kMiniDeviceType) return true;
  return L == Layout::Contiguous || L == Layout::Transposed;
}

// The grid per device. cpu and mini (host memory, microseconds a case) run every layout
// and shape for every dtype. Other devices run a reduced grid: on Vulkan every case is a
// device round trip and many compile a pipeline, and the full grid took 8.5 minutes on
// lavapipe in CI. There every layout and shape runs for one dtype of each kind (f32, i32,
// bool, else the first the device supports); the other dtypes run contiguous, transposed
// (the strided path: each layout class is its own pipeline, a JIT compile on lavapipe), an
// empty dim and the odd large shape (tails of workgroups and of 8/16-bit values packed in
// words). Measured on lavapipe: add, powi_scalar, sum_dim, gather check 57% fewer cases
// (1695 -> 723) for 7% less CPU (40.9 -> 38.0 s); clamp_max + neg 19% less (24.5 ->
// 19.8 s): most of the cost is per op and dtype (lavapipe 44%, the validation layer 36%
// of the samples), not per case. The assertions are the same. TENSOR_TEST_FULL_GRID=1 runs the full grid on every device (on a GPU,
// where it takes seconds).
inline bool full_grid(const Device& d) {
  const char* env = std::getenv("TENSOR_TEST_FULL_GRID");
  if (env && std::string(env) == "1") return true;
  const std::uint16_t t = d.id().type_id;
  return t == kCpuDeviceType || t == tt::mini::kMiniDeviceType;
}
inline bool primary_dtype(DType dt, const std::vector<DType>& dts, const Device& d) {
  auto cls = [](DType t) { return is_fl(t) ? 0 : is_bo(t) ? 2 : 1; };
  const DType preferred[] = {DType::F32, DType::I32, DType::Bool};
  const DType p = preferred[cls(dt)];
  if (std::find(dts.begin(), dts.end(), p) != dts.end() && d.supports_dtype(p)) return dt == p;
  for (DType t : dts)
    if (cls(t) == cls(dt) && d.supports_dtype(t)) return dt == t;
  return false;
}
inline std::vector<Layout> grid_layouts(const Device& d, DType dt, const std::vector<DType>& dts, const std::vector<Layout>& all) {
  if (full_grid(d) || primary_dtype(dt, dts, d)) return all;
  std::vector<Layout> out;
  for (Layout L : all)
    if (L == Layout::Contiguous || L == Layout::Transposed || L == Layout::ZeroRows || L == Layout::Large ||
        L == Layout::Huge)
      out.push_back(L);
  return out;
}


// ---- structured families --------------------------------------------------------------
// Ops whose result is not one value per input element (indexing, sort and top-k,
// extrema with indices, any/all, cat, repeat_dim) or that take other arguments
// (clamp, predicates, cross): each op x dtype x layout against a reference written
// here on the row-major host values. Index tensors take a random int dtype; every
// index op also gets an out-of-range index (IndexError naming the op, inputs unchanged).

inline bool structured_family(Family f) {
  switch (f) {
    case Family::Clamp: case Family::Predicate: case Family::Cross: case Family::DimIndex: case Family::DimWithIndices:
    case Family::AnyAll: case Family::AnyAllDim: case Family::Sort: case Family::SortWithIndices: case Family::Argsort:
    case Family::TopK: case Family::TopKWithIndices: case Family::ArgTopK: case Family::Gather: case Family::Scatter:
    case Family::ScatterUpdate: case Family::Select: case Family::SelectAssign: case Family::SelectUpdate: case Family::Cat:
    case Family::RepeatDim: case Family::Moments:
      return true;
    default:
      return false;
  }
}

// The structured ops that have a reference below.
inline const std::set<std::string>& structured_refs() {
  static const std::set<std::string> s = {
      "clamp", "hard_sigmoid", "is_nan", "is_inf", "cross", "argmax", "argmin", "max_dim_with_indices",
      "min_dim_with_indices", "any", "all", "any_dim", "all_dim", "sort", "sort_with_indices", "argsort", "topk",
      "topk_with_indices", "argtopk", "var_mean", "gather", "scatter_add", "scatter_or", "scatter", "select", "select_add",
      "select_or", "select_assign", "cat", "repeat_dim"};
  return s;
}

struct Trial {
  std::string label;
  std::vector<Operand> ops;                                // the call's tensor arguments, in order
  std::function<std::vector<H>(std::vector<H>&)> call;     // takes the handles it passes on
  std::vector<Expected> want;                              // one per result
  enum class Err { None, Index, Shape } err = Err::None;
};

inline Expected exact(Host h) {
  Expected e;
  e.tol.assign(h.f.size(), 0.0);
  e.value = std::move(h);
  return e;
}
inline Expected near(Host h, double ulps) {
  Expected e = exact(std::move(h));
  for (std::size_t k = 0; k < e.tol.size(); ++k) e.tol[k] = ulps * eps_of(e.value.dtype) * (std::fabs(e.value.f[k]) + 1);
  return e;
}


inline Host host_like(DType t, std::vector<std::size_t> shape) {
  Host h;
  h.dtype = t;
  h.shape = std::move(shape);
  if (is_fl(t)) h.f.assign(h.size(), 0.0);
  else h.i.assign(h.size(), 0);
  return h;
}

// Flat indices of lane j along `dim` of a 2-D shape (dim 1: row j; dim 0: column j).
inline std::vector<std::size_t> lane_of(const std::vector<std::size_t>& shape, std::size_t dim, std::size_t j) {
  std::vector<std::size_t> out;
  for (std::size_t k = 0; k < shape[dim]; ++k) out.push_back(dim == 1 ? j * shape[1] + k : k * shape[1] + j);
  return out;
}

// A tensor holding the 2-D `logical` values in layout L (a view for the strided
// layouts, else contiguous).
inline H in_layout(const Host& logical, Layout L) {
  const std::size_t R = logical.shape[0], C = logical.shape[1];
  if (logical.size() == 0) return on_dev(logical);
  switch (L) {
    case Layout::Transposed:
    case Layout::LargeTransposed:
    case Layout::Wide3x1025Transposed: {
      Host base = like(logical, {C, R});
      for (std::size_t r = 0; r < R; ++r)
        for (std::size_t c = 0; c < C; ++c) copy_elem(logical, r * C + c, base, c * R + r);
      return H(detail::unary(OpCode::transpose, on_dev(base).share()));
    }
    case Layout::Strided: {
      Host base = like(logical, {R + 1, 2 * C});
      for (std::size_t r = 0; r < R; ++r)
        for (std::size_t c = 0; c < C; ++c) copy_elem(logical, r * C + c, base, (r + 1) * 2 * C + 2 * c);
      const Slice s[] = {Slice::range(1, static_cast<std::int64_t>(R) + 1), Slice::range(0, 2 * static_cast<std::int64_t>(C), 2)};
      return H(detail::slice(on_dev(base).share(), s));
    }
    case Layout::Flipped: {
      Host base = like(logical, {R, C});
      for (std::size_t r = 0; r < R; ++r)
        for (std::size_t c = 0; c < C; ++c) copy_elem(logical, r * C + c, base, (R - 1 - r) * C + (C - 1 - c));
      const std::int64_t ax[] = {0, 1};
      return H(detail::axes(OpCode::flip, on_dev(base).share(), ax));
    }
    case Layout::NegStep: {
      Host base = like(logical, {R, C});
      for (std::size_t r = 0; r < R; ++r)
        for (std::size_t c = 0; c < C; ++c) copy_elem(logical, r * C + c, base, r * C + (C - 1 - c));
      const Slice s[] = {Slice::all(), Slice{0, std::nullopt, -1}};
      return H(detail::slice(on_dev(base).share(), s));
    }
    default:
      return on_dev(logical);
  }
}
inline Operand operand_of(Host h, Layout L) {
  Operand o;
  o.t = in_layout(h, L);
  o.logical = std::move(h);
  return o;
}
// 1-D index tensor: contiguous, or reversed through a flip view for the flipped layout.
inline Operand index_vector(const Host& idx, Layout L) {
  Operand o;
  o.logical = idx;
  if (L != Layout::Flipped || idx.size() < 2) {
    o.t = on_dev(idx);
    return o;
  }
  Host base = idx;
  std::reverse(base.i.begin(), base.i.end());
  const std::int64_t ax[] = {0};
  o.t = H(detail::axes(OpCode::flip, on_dev(base).share(), ax));
  return o;
}

inline Domain data_domain(DType t, bool ties, double special = 0) {
  if (is_fl(t)) return {-3, 3, ties ? 0.5 : 0.25, 0, special};
  if (is_un(t)) return {0, ties ? 6.0 : 10.0};
  return {ties ? -3.0 : -10.0, ties ? 3.0 : 10.0};
}

inline DType random_index_dtype(std::mt19937& rng) {
  static const DType k[] = {DType::I64, DType::I32, DType::I16, DType::I8, DType::U64, DType::U32, DType::U16, DType::U8};
  return k[std::uniform_int_distribution<int>(0, 7)(rng)];
}

// An index tensor of `shape` with values in [0, bound).
inline Host index_host(DType it, std::vector<std::size_t> shape, std::size_t bound, std::mt19937& rng) {
  Host h = host_like(it, std::move(shape));
  for (auto& v : h.i) v = std::uniform_int_distribution<std::int64_t>(0, static_cast<std::int64_t>(bound) - 1)(rng);
  return h;
}

// The same index tensor with one entry out of range (bound, or -1 for signed dtypes).
inline Host poisoned(Host idx, std::size_t bound, std::mt19937& rng) {
  const std::size_t at = std::uniform_int_distribution<std::size_t>(0, idx.size() - 1)(rng);
  idx.i[at] = !is_un(idx.dtype) && (rng() & 1u) ? -1 : static_cast<std::int64_t>(bound);
  return idx;
}

enum class RU { Assign, Add, Mul, Min, Max, Or };
inline IndexingUpdateOp rule_of(RU u) {
  switch (u) {
    case RU::Assign: return IndexingUpdateOp::Assign;
    case RU::Mul: return IndexingUpdateOp::Mul;
    case RU::Min: return IndexingUpdateOp::Min;
    case RU::Max: return IndexingUpdateOp::Max;
    default: return IndexingUpdateOp::Add;  // Add, and Or (ignored by scatter_or / select_or)
  }
}
inline const char* ru_name(RU u) {
  static const char* k[] = {"assign", "add", "mul", "min", "max", "or"};
  return k[static_cast<int>(u)];
}

// out[k] = out[k] (rule) v[vk], rounded/wrapped to the dtype as the kernels store it.
inline void ref_update(Host& out, std::size_t k, const Host& v, std::size_t vk, RU u) {
  const DType t = out.dtype;
  if (is_fl(t)) {
    const double a = out.f[k], b = v.f[vk];
    double r = b;
    if (u == RU::Add) r = a + b;
    else if (u == RU::Mul) r = a * b;
    else if (u == RU::Min) r = std::min(a, b);
    else if (u == RU::Max) r = std::max(a, b);
    out.f[k] = round_to(t, r);
  } else if (is_bo(t)) {
    out.i[k] = (out.i[k] != 0 || v.i[vk] != 0) ? 1 : 0;
  } else {
    const std::int64_t a = out.i[k], b = v.i[vk];
    const bool less = is_un(t) ? U(b) < U(a) : b < a;
    std::int64_t r = b;
    if (u == RU::Add) r = S(U(a) + U(b));
    else if (u == RU::Mul) r = S(U(a) * U(b));
    else if (u == RU::Min) r = less ? b : a;
    else if (u == RU::Max) r = (!less && b != a) ? b : a;
    out.i[k] = wrap(t, r);
  }
}

// Stable order of a lane: NaN is the largest value (last ascending, first descending).
inline std::vector<std::size_t> ref_order(const std::vector<double>& keys, bool desc) {
  std::vector<std::size_t> p(keys.size());
  std::iota(p.begin(), p.end(), std::size_t{0});
  std::stable_sort(p.begin(), p.end(), [&](std::size_t i, std::size_t j) {
    const double a = keys[i], b = keys[j];
    const bool na = std::isnan(a), nb = std::isnan(b);
    if (na || nb) return desc ? (na && !nb) : (!na && nb);
    return desc ? b < a : a < b;
  });
  return p;
}

// Position of the extremum of a lane: ties keep the lowest index, the first NaN wins.
inline std::size_t ref_arg(const std::vector<double>& keys, bool mx) {
  std::size_t best = 0;
  for (std::size_t j = 1; j < keys.size(); ++j) {
    if (std::isnan(keys[best])) break;
    if (std::isnan(keys[j]) || (mx ? keys[j] > keys[best] : keys[j] < keys[best])) best = j;
  }
  return best;
}

inline std::vector<double> keys_of(const Host& h, const std::vector<std::size_t>& lane) {
  std::vector<double> k;
  for (std::size_t x : lane) k.push_back(h.at(x));
  return k;
}

inline std::vector<std::size_t> shape_with(std::vector<std::size_t> s, std::size_t dim, std::size_t n) {
  s[dim] = n;
  return s;
}

inline bool long_lanes(Family f) {
  switch (f) {
    case Family::Sort: case Family::SortWithIndices: case Family::Argsort: case Family::TopK: case Family::TopKWithIndices:
    case Family::ArgTopK: case Family::DimIndex: case Family::DimWithIndices: case Family::AnyAllDim: case Family::Moments:
      return true;
    default:
      return false;
  }
}

// The structured families' trials, one function per group of families (index.cpp,
// layout.cpp, sort.cpp, misc.cpp); each appends the trials of `fam`'s ops it knows.
#define OPS_TRIALS_ARGS [[maybe_unused]] OpCode op, [[maybe_unused]] Family fam, [[maybe_unused]] DType dt, \
    [[maybe_unused]] Layout L, [[maybe_unused]] std::mt19937& rng, std::vector<Trial>& out
void index_trials(OPS_TRIALS_ARGS);
void layout_trials(OPS_TRIALS_ARGS);
void sort_trials(OPS_TRIALS_ARGS);
void misc_trials(OPS_TRIALS_ARGS);

}  // namespace ops_spec
