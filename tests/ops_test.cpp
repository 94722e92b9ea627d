// Op tests generated from the op table: every op of the elementwise, comparison,
// reduction and structured (indexing, sort/top-k, extrema with indices, any/all,
// cat, repeat_dim, clamp, predicates, cross) families x every dtype its kinds
// allow x several layouts, checked
// against a scalar reference written here (double / int64, independent of the
// kernels). Ops are called by OpCode through the public firewall functions
// (tensor/detail.hpp), exactly as the Tensor<D, K> methods do. Every test runs on
// every device of tt::conf::devices() (cpu, the mini test backend, vulkan:0, any
// backend registered later; TENSOR_TEST_DEVICE picks one) with the dtypes it supports.
#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <optional>
#include <set>
#include <sstream>

#include "dispatch/backend.hpp"
#include "dispatch/ops.hpp"
#include "conformance/devices.hpp"
#include "conformance/mini_backend.hpp"
#include "test_util.hpp"

namespace {

using namespace tt;
using tensor::dispatch::Family;
using tensor::dispatch::kOps;
using tensor::dispatch::OpInfo;
using tensor::dispatch::Registry;

constexpr std::size_t kRows = 4, kCols = 6;  // logical shape of the small operands (other shapes: shape_of)

// The device under test (set by the fixtures) and uploads onto it.
const Device& dev() { return tt::conf::DeviceScope::current(); }
H on_dev(const Host& h) { return upload(h, dev()); }
// The device's default index and bool dtypes (results of argmax, comparisons, ...).
DType idx_out() { return to_dtype(dev().settings().int_dtype); }
DType bool_out() { return to_dtype(dev().settings().bool_dtype); }

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

std::uint64_t U(std::int64_t v) { return static_cast<std::uint64_t>(v); }
std::int64_t S(std::uint64_t v) { return static_cast<std::int64_t>(v); }

// Floor-mod on ints (result has the divisor's sign); plain % on unsigned.
std::int64_t int_rem(std::int64_t a, std::int64_t b, DType t) {
  if (is_un(t)) return S(U(a) % U(b));
  std::int64_t r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}
double float_rem(double a, double b) {
  double r = std::fmod(a, b);
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}
double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
std::int64_t ipow(std::int64_t x, std::int64_t n) {
  std::uint64_t r = 1;
  for (std::int64_t k = 0; k < n; ++k) r *= U(x);
  return S(r);
}

Spec unary_f(std::function<double(double)> g, Domain d = {}, double tol = 4, double floor = 0) {
  Spec s;
  s.f = [g](const std::vector<double>& v) { return g(v[0]); };
  s.fd[0] = d;
  s.tol = tol;
  s.floor = floor;
  return s;
}
Spec transc(std::function<double(double)> g, Domain d = {}) { return unary_f(std::move(g), d, 16, 1); }
Spec binary_f(std::function<double(double, double)> g, Domain a = {}, Domain b = {}, double tol = 4, double floor = 0) {
  Spec s;
  s.f = [g](const std::vector<double>& v) { return g(v[0], v[1]); };
  s.fd[0] = a;
  s.fd[1] = b;
  s.tol = tol;
  s.floor = floor;
  return s;
}
// Comparisons: the same predicate on floats, ints and bools (as 0/1).
Spec compare(std::function<bool(double, double)> p) {
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

std::vector<double> cum(const std::vector<double>& v, std::function<double(double, double)> op) {
  std::vector<double> out(v.size());
  for (std::size_t k = 0; k < v.size(); ++k) out[k] = k ? op(out[k - 1], v[k]) : v[k];
  return out;
}
std::vector<std::int64_t> cumi(const std::vector<std::int64_t>& v, std::function<std::int64_t(std::int64_t, std::int64_t)> op) {
  std::vector<std::int64_t> out(v.size());
  for (std::size_t k = 0; k < v.size(); ++k) out[k] = k ? op(out[k - 1], v[k]) : v[k];
  return out;
}
double nan_max(double a, double b) { return std::isnan(a) || std::isnan(b) ? NAN : std::max(a, b); }
double nan_min(double a, double b) { return std::isnan(a) || std::isnan(b) ? NAN : std::min(a, b); }

std::map<std::string, Spec> make_specs() {
  std::map<std::string, Spec> m;
  const Domain pos{0.1, 5}, nonzero{-3, 3, 0, 0.5}, halves{-4, 4, 0.25};

  // ---- Unary
  m["detach"] = unary_f([](double x) { return x; }, {}, 0);
  {
    Spec s;
    s.transpose = true;
    s.f = [](const std::vector<double>& v) { return v[0]; };
    s.i = [](const std::vector<std::int64_t>& v, DType) { return v[0]; };
    s.tol = 0;
    m["transpose"] = s;
  }
  {
    Spec s = unary_f([](double x) { return -x; }, {}, 0);
    s.i = [](const std::vector<std::int64_t>& v, DType) { return S(0 - U(v[0])); };
    m["neg"] = s;
  }
  m["recip"] = unary_f([](double x) { return 1.0 / x; }, nonzero, 4);
  {
    Spec s;
    s.i = [](const std::vector<std::int64_t>& v, DType) { return S(U(v[0]) * U(v[0])); };
    s.ud[0] = Domain{0, 15};
    m["square"] = s;
  }
  m["sqrt"] = transc([](double x) { return std::sqrt(x); }, {0, 5});
  m["exp"] = transc([](double x) { return std::exp(x); });
  m["log"] = transc([](double x) { return std::log(x); }, pos);
  m["log1p"] = transc([](double x) { return std::log1p(x); }, {-0.5, 5});
  {
    Spec s = unary_f([](double x) { return std::fabs(x); }, {}, 0);
    s.i = [](const std::vector<std::int64_t>& v, DType t) { return is_un(t) ? v[0] : (v[0] < 0 ? S(0 - U(v[0])) : v[0]); };
    m["abs"] = s;
  }
  m["cos"] = transc([](double x) { return std::cos(x); });
  m["sin"] = transc([](double x) { return std::sin(x); });
  m["tan"] = transc([](double x) { return std::tan(x); }, {-1.2, 1.2});
  m["cosh"] = transc([](double x) { return std::cosh(x); });
  m["sinh"] = transc([](double x) { return std::sinh(x); });
  m["tanh"] = transc([](double x) { return std::tanh(x); });
  m["acos"] = transc([](double x) { return std::acos(x); }, {-0.95, 0.95});
  m["acosh"] = transc([](double x) { return std::acosh(x); }, {1.05, 5});
  m["asin"] = transc([](double x) { return std::asin(x); }, {-0.95, 0.95});
  m["asinh"] = transc([](double x) { return std::asinh(x); });
  m["atan"] = transc([](double x) { return std::atan(x); });
  m["atanh"] = transc([](double x) { return std::atanh(x); }, {-0.9, 0.9});
  m["round"] = unary_f([](double x) { return std::nearbyint(x); }, halves, 0);  // ties to even
  m["floor"] = unary_f([](double x) { return std::floor(x); }, halves, 0);
  m["ceil"] = unary_f([](double x) { return std::ceil(x); }, halves, 0);
  m["trunc"] = unary_f([](double x) { return std::trunc(x); }, halves, 0);
  m["erf"] = transc([](double x) { return std::erf(x); });
  {
    Spec s = unary_f([](double x) { return x > 0 ? 1.0 : x < 0 ? -1.0 : 0.0; }, halves, 0);
    s.i = [](const std::vector<std::int64_t>& v, DType) -> std::int64_t { return v[0] > 0 ? 1 : v[0] < 0 ? -1 : 0; };
    s.sd[0] = {-3, 3};
    m["sign"] = s;
  }
  {
    Spec s;
    s.i = [](const std::vector<std::int64_t>& v, DType) { return S(~U(v[0])); };
    m["bitwise_not"] = s;
  }
  {
    Spec s;
    s.i = [](const std::vector<std::int64_t>& v, DType) -> std::int64_t { return v[0] ? 0 : 1; };
    m["bool_not"] = s;
  }
  m["relu"] = unary_f([](double x) { return x > 0 ? x : 0.0; }, halves, 0);
  m["gelu"] = transc([](double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); });
  m["sigmoid"] = transc(sigmoid);
  m["log_sigmoid"] = transc([](double x) { return -std::log1p(std::exp(-x)); });

  // ---- Binary
  {
    Spec s = binary_f([](double a, double b) { return a + b; });
    s.i = [](const std::vector<std::int64_t>& v, DType) { return S(U(v[0]) + U(v[1])); };
    m["add"] = s;
  }
  {
    Spec s = binary_f([](double a, double b) { return a - b; });
    s.i = [](const std::vector<std::int64_t>& v, DType) { return S(U(v[0]) - U(v[1])); };
    s.ud[0] = Domain{16, 30};
    s.ud[1] = Domain{0, 15};
    m["sub"] = s;
  }
  {
    Spec s = binary_f([](double a, double b) { return a * b; });
    s.i = [](const std::vector<std::int64_t>& v, DType) { return S(U(v[0]) * U(v[1])); };
    s.ud[0] = s.ud[1] = Domain{0, 15};
    m["mul"] = s;
  }
  {
    Spec s = binary_f([](double a, double b) { return a / b; }, {}, nonzero);
    s.i = [](const std::vector<std::int64_t>& v, DType t) { return is_un(t) ? S(U(v[0]) / U(v[1])) : v[0] / v[1]; };
    s.sd[1] = {-5, 5, 0, 1};
    s.ud[1] = Domain{1, 5};
    m["div"] = s;
  }
  {
    Spec s = binary_f(float_rem, {-5, 5}, nonzero, 4, 1);
    s.i = [](const std::vector<std::int64_t>& v, DType t) { return int_rem(v[0], v[1], t); };
    s.sd[1] = {-5, 5, 0, 1};
    s.ud[1] = Domain{1, 5};
    m["remainder"] = s;
  }
  m["powf"] = binary_f([](double a, double b) { return std::pow(a, b); }, {0.1, 3}, {-2, 2}, 16, 1);
  m["atan2"] = binary_f([](double a, double b) { return std::atan2(a, b); }, {}, {}, 16, 1);
  m["hypot"] = binary_f([](double a, double b) { return std::hypot(a, b); }, {}, {}, 16, 1);
  for (const bool is_max : {true, false}) {
    Spec s = binary_f([is_max](double a, double b) {
      return std::isnan(a) || std::isnan(b) ? NAN : is_max ? std::max(a, b) : std::min(a, b);
    });
    s.i = [is_max](const std::vector<std::int64_t>& v, DType) { return is_max ? std::max(v[0], v[1]) : std::min(v[0], v[1]); };
    m[is_max ? "max_pair" : "min_pair"] = s;
  }
  {
    auto bits = [](std::function<std::uint64_t(std::uint64_t, std::uint64_t)> g) {
      Spec s;
      s.i = [g](const std::vector<std::int64_t>& v, DType) { return S(g(U(v[0]), U(v[1]))); };
      return s;
    };
    m["bitwise_and"] = bits([](std::uint64_t a, std::uint64_t b) { return a & b; });
    m["bitwise_or"] = bits([](std::uint64_t a, std::uint64_t b) { return a | b; });
    m["bitwise_xor"] = bits([](std::uint64_t a, std::uint64_t b) { return a ^ b; });
    Spec shl;
    shl.i = [](const std::vector<std::int64_t>& v, DType) { return S(U(v[0]) << v[1]); };
    shl.sd[1] = {0, 3};
    m["bitwise_left_shift"] = shl;
    Spec shr;  // arithmetic for signed dtypes (values are sign-extended), logical for unsigned
    shr.i = [](const std::vector<std::int64_t>& v, DType) { return v[0] >> v[1]; };
    shr.sd[1] = {0, 3};
    m["bitwise_right_shift"] = shr;
  }
  {
    auto logic = [](std::function<bool(bool, bool)> g) {
      Spec s;
      s.i = [g](const std::vector<std::int64_t>& v, DType) -> std::int64_t { return g(v[0] != 0, v[1] != 0) ? 1 : 0; };
      return s;
    };
    m["bool_and"] = logic([](bool a, bool b) { return a && b; });
    m["bool_or"] = logic([](bool a, bool b) { return a || b; });
    m["bool_xor"] = logic([](bool a, bool b) { return a != b; });
  }
  m["prelu"] = binary_f([](double x, double a) { return x < 0 ? x * a : x; }, {}, {0, 1});
  m["relu_backward"] = binary_f([](double out, double g) { return out > 0 ? g : 0.0; }, halves, {}, 0);
  {
    // Derivative of the exact (erf) GELU x·Φ(x), times grad: Φ(x) + x·φ(x).
    Spec s = binary_f(
        [](double x, double g) {
          return g * (0.5 * (1 + std::erf(x / std::sqrt(2.0))) + x * std::exp(-0.5 * x * x) / std::sqrt(2 * M_PI));
        },
        {}, {}, 32, 1);
    m["gelu_backward"] = s;
  }
  m["sigmoid_backward"] = binary_f([](double y, double g) { return y * (1 - y) * g; }, {0, 1}, {}, 16, 1);
  m["log_sigmoid_backward"] = binary_f([](double x, double g) { return g * sigmoid(-x); }, {}, {}, 32, 1);

  // ---- Scalar (the scalar is the last element input)
  auto scalar_arith = [](FEl f, IEl i) {
    Spec s;
    s.f = std::move(f);
    s.i = std::move(i);
    s.fs = {1.5, -2.5};
    s.ss = {3, -2};
    s.us = {3};
    s.ud[0] = Domain{3, 20};
    return s;
  };
  m["add_scalar"] = scalar_arith([](const std::vector<double>& v) { return v[0] + v[1]; },
                                 [](const std::vector<std::int64_t>& v, DType) { return S(U(v[0]) + U(v[1])); });
  m["sub_scalar"] = scalar_arith([](const std::vector<double>& v) { return v[0] - v[1]; },
                                 [](const std::vector<std::int64_t>& v, DType) { return S(U(v[0]) - U(v[1])); });
  m["mul_scalar"] = scalar_arith([](const std::vector<double>& v) { return v[0] * v[1]; },
                                 [](const std::vector<std::int64_t>& v, DType) { return S(U(v[0]) * U(v[1])); });
  m["div_scalar"] = scalar_arith([](const std::vector<double>& v) { return v[0] / v[1]; },
                                 [](const std::vector<std::int64_t>& v, DType t) {
                                   return is_un(t) ? S(U(v[0]) / U(v[1])) : v[0] / v[1];
                                 });
  {
    Spec s = scalar_arith([](const std::vector<double>& v) { return float_rem(v[0], v[1]); },
                          [](const std::vector<std::int64_t>& v, DType t) { return int_rem(v[0], v[1], t); });
    s.floor = 1;
    m["remainder_scalar"] = s;
  }
  {
    Spec s;
    s.f = [](const std::vector<double>& v) { return std::pow(v[0], v[1]); };
    s.i = [](const std::vector<std::int64_t>& v, DType) { return ipow(v[0], v[1]); };
    s.fd[0] = {-2, 2, 0, 0.5};
    s.sd[0] = {-4, 4};
    s.ud[0] = Domain{0, 5};
    s.fs = {3, 2, 0, -1, -2};
    s.ss = s.us = {3, 2, 1, 0};
    s.tol = 8;
    s.int_scalar = true;
    m["powi_scalar"] = s;
    s.fs = {3, 5};
    s.ss = s.us = {3};
    m["powi_scalar_impl"] = s;
  }
  {
    Spec s;
    s.f = [](const std::vector<double>& v) { return std::pow(v[0], v[1]); };
    s.fd[0] = {0.1, 3};
    s.fs = {2.5, 2.0, -0.5};
    s.tol = 16;
    s.floor = 1;
    m["powf_scalar"] = s;
    s.fs = {2.5, 1.5};
    m["powf_scalar_impl"] = s;
  }
  {
    Spec s;
    s.f = [](const std::vector<double>& v) { return std::max(v[0], v[1]); };
    s.i = [](const std::vector<std::int64_t>& v, DType) { return std::max(v[0], v[1]); };
    s.fs = {0.5, -1.5};
    s.ss = {2, -1};
    s.us = {5};
    s.ud[0] = Domain{0, 10};
    s.tol = 0;
    m["clamp_min"] = s;
    s.f = [](const std::vector<double>& v) { return std::min(v[0], v[1]); };
    s.i = [](const std::vector<std::int64_t>& v, DType) { return std::min(v[0], v[1]); };
    m["clamp_max"] = s;
  }
  {
    auto bits = [](std::function<std::uint64_t(std::uint64_t, std::uint64_t)> g, std::vector<std::int64_t> sc) {
      Spec s;
      s.i = [g](const std::vector<std::int64_t>& v, DType) { return S(g(U(v[0]), U(v[1]))); };
      s.ss = sc;
      s.us = {6};
      return s;
    };
    m["bitwise_and_scalar"] = bits([](std::uint64_t a, std::uint64_t b) { return a & b; }, {6, -3});
    m["bitwise_or_scalar"] = bits([](std::uint64_t a, std::uint64_t b) { return a | b; }, {6, -3});
    m["bitwise_xor_scalar"] = bits([](std::uint64_t a, std::uint64_t b) { return a ^ b; }, {6, -3});
    m["bitwise_left_shift_scalar"] = bits([](std::uint64_t a, std::uint64_t b) { return a << b; }, {1, 2});
    m["bitwise_left_shift_scalar"].us = {1, 2};
    Spec shr;
    shr.i = [](const std::vector<std::int64_t>& v, DType) { return v[0] >> v[1]; };
    shr.ss = shr.us = {1, 2};
    m["bitwise_right_shift_scalar"] = shr;
  }
  {
    Spec s;
    s.f = [](const std::vector<double>& v) { return v[0] < 0 ? v[0] * v[1] : v[0]; };
    s.fs = {0.25, 0.01};
    m["leaky_relu"] = s;
  }

  // ---- Compare / CompareScalar (same predicates)
  const std::pair<const char*, std::function<bool(double, double)>> preds[] = {
      {"equal", [](double a, double b) { return a == b; }},
      {"not_equal", [](double a, double b) { return a != b; }},
      {"greater", [](double a, double b) { return a > b; }},
      {"greater_equal", [](double a, double b) { return a >= b; }},
      {"lower", [](double a, double b) { return a < b; }},
      {"lower_equal", [](double a, double b) { return a <= b; }},
  };
  for (const auto& [n, p] : preds) {
    m[n] = compare(p);
    m[std::string(n) + "_elem"] = compare(p);
  }

  // ---- Reduce / Dim: lane functions
  auto fsum = [](const std::vector<double>& v) { return std::vector<double>{std::accumulate(v.begin(), v.end(), 0.0)}; };
  auto isum = [](const std::vector<std::int64_t>& v, DType) {
    std::uint64_t s = 0;
    for (auto x : v) s += U(x);
    return std::vector<std::int64_t>{S(s)};
  };
  auto fprod = [](const std::vector<double>& v) {
    double p = 1;
    for (double x : v) p *= x;
    return std::vector<double>{p};
  };
  auto iprod = [](const std::vector<std::int64_t>& v, DType) {
    std::uint64_t p = 1;  // wrapping: the product modulo 2^width, whatever the accumulator
    for (auto x : v) p *= U(x);
    return std::vector<std::int64_t>{S(p)};
  };
  auto fmean = [](const std::vector<double>& v) {
    return std::vector<double>{std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size())};
  };
  auto imean = [](const std::vector<std::int64_t>& v, DType) {  // integer division toward zero
    std::int64_t s = 0;
    for (auto x : v) s += x;
    return std::vector<std::int64_t>{s / static_cast<std::int64_t>(v.size())};
  };
  auto fext = [](bool mx, bool ab) {
    return [mx, ab](const std::vector<double>& v) {
      double r = ab ? std::fabs(v[0]) : v[0];
      for (double x : v) r = mx ? nan_max(r, ab ? std::fabs(x) : x) : nan_min(r, x);
      return std::vector<double>{r};
    };
  };
  auto iext = [](bool mx, bool ab) {
    return [mx, ab](const std::vector<std::int64_t>& v, DType t) {
      auto a = [&](std::int64_t x) { return ab && !is_un(t) && x < 0 ? -x : x; };
      std::int64_t r = a(v[0]);
      for (auto x : v) r = mx ? std::max(r, a(x)) : std::min(r, a(x));
      return std::vector<std::int64_t>{r};
    };
  };
  auto red = [](FLane fl, ILane il, LaneTol lt, Domain fd = {}, Domain sd = {-10, 10}) {
    Spec s;
    s.fl = std::move(fl);
    s.il = std::move(il);
    s.lane_tol = lt;
    s.fd[0] = fd;
    s.sd[0] = sd;
    return s;
  };
  const Domain prod_f{-1.5, 1.5, 0, 0.5}, prod_i{-2, 2, 0, 1};
  for (const char* suffix : {"", "_dim"}) {
    const std::string sfx = suffix;
    m["sum" + sfx] = red(fsum, isum, LaneTol::Sum);
    m["prod" + sfx] = red(fprod, iprod, LaneTol::Prod, prod_f, prod_i);
    m["mean" + sfx] = red(fmean, imean, LaneTol::Mean);
    m["mean" + sfx].empty = sfx.empty() ? Spec::EmptyRule::IntTensorEmpty : Spec::EmptyRule::IntLaneEmpty;
    m["max" + sfx] = red(fext(true, false), iext(true, false), LaneTol::Exact);
    m["min" + sfx] = red(fext(false, false), iext(false, false), LaneTol::Exact);
    m["max_abs" + sfx] = red(fext(true, true), iext(true, true), LaneTol::Exact);
    for (const char* e : {"max", "min", "max_abs"}) m[e + sfx].empty = Spec::EmptyRule::TensorEmpty;
  }
  auto scan = [](FLane fl, ILane il, LaneTol lt, Domain fd = {}, Domain sd = {-10, 10}) {
    Spec s;
    s.fl = std::move(fl);
    s.il = std::move(il);
    s.scan = true;
    s.lane_tol = lt;
    s.fd[0] = fd;
    s.sd[0] = sd;
    return s;
  };
  m["cumsum"] = scan([](const std::vector<double>& v) { return cum(v, [](double a, double b) { return a + b; }); },
                     [](const std::vector<std::int64_t>& v, DType) {
                       return cumi(v, [](std::int64_t a, std::int64_t b) { return S(U(a) + U(b)); });
                     },
                     LaneTol::Sum);
  m["cumprod"] = scan([](const std::vector<double>& v) { return cum(v, [](double a, double b) { return a * b; }); },
                      [](const std::vector<std::int64_t>& v, DType) {
                        return cumi(v, [](std::int64_t a, std::int64_t b) { return S(U(a) * U(b)); });
                      },
                      LaneTol::Prod, prod_f, prod_i);
  m["cummin"] = scan([](const std::vector<double>& v) { return cum(v, nan_min); },
                     [](const std::vector<std::int64_t>& v, DType) {
                       return cumi(v, [](std::int64_t a, std::int64_t b) { return std::min(a, b); });
                     },
                     LaneTol::Exact);
  m["cummax"] = scan([](const std::vector<double>& v) { return cum(v, nan_max); },
                     [](const std::vector<std::int64_t>& v, DType) {
                       return cumi(v, [](std::int64_t a, std::int64_t b) { return std::max(a, b); });
                     },
                     LaneTol::Exact);
  auto softmax = [](double sign, bool log) {
    return [sign, log](const std::vector<double>& v) {
      double mx = -INFINITY;
      for (double x : v) mx = std::max(mx, sign * x);
      double s = 0;
      for (double x : v) s += std::exp(sign * x - mx);
      std::vector<double> out;
      for (double x : v) out.push_back(log ? sign * x - mx - std::log(s) : std::exp(sign * x - mx) / s);
      return out;
    };
  };
  m["softmax"] = scan(softmax(1, false), nullptr, LaneTol::Rel);
  m["log_softmax"] = scan(softmax(1, true), nullptr, LaneTol::Rel);
  m["softmin"] = scan(softmax(-1, false), nullptr, LaneTol::Rel);
  return m;
}

const std::map<std::string, Spec>& specs() {
  static const std::map<std::string, Spec> s = make_specs();
  return s;
}

// Ops of the harness families that have no reference here yet, each with the
// reason. Adding a row to the op table without a reference fails
// OpTable.EveryHarnessOpHasAReference until it is referenced or listed here.
const std::map<std::string, std::string>& not_yet_referenced() {
  static const std::map<std::string, std::string> m = {};
  return m;
}

bool harness_family(Family f) {
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
const char* layout_name(Layout l) {
  static const char* k[] = {"contiguous", "transposed", "sliced-step2", "flipped", "negative-step",
                            "broadcast",  "implicit-broadcast", "zero-size[R,0]", "zero-size[0,C]",
                            "large-33x67", "large-33x67-transposed", "scalar-like[1,1]", "odd[1,257]",
                            "wide[3,1025]", "wide[3,1025]-transposed", "huge[1024,1024]"};
  return k[static_cast<int>(l)];
}
// The logical [rows, cols] of an operand in layout L.
std::pair<std::size_t, std::size_t> shape_of(Layout L) {
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

Host gen(DType t, std::vector<std::size_t> shape, const Domain& d, std::mt19937& rng) {
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

void copy_elem(const Host& from, std::size_t fk, Host& to, std::size_t tk) {
  if (from.floaty()) to.f[tk] = from.f[fk];
  else to.i[tk] = from.i[fk];
}
Host like(const Host& h, std::vector<std::size_t> shape) {
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

Operand make_operand(Layout L, int role, DType dt, const Domain& d, std::mt19937& rng) {
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

double eps_of(DType t) { return epsilon(t); }
double min_normal(DType t) {
  switch (t) {
    case DType::F64: return std::numeric_limits<double>::min();
    case DType::F16: return 6.103515625e-05;
    default: return std::numeric_limits<float>::min();  // f32, bf16
  }
}

Expected elementwise(const Spec& sp, const std::vector<Host>& in, std::optional<double> sf, std::optional<std::int64_t> si) {
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
          e.tol.push_back(sp.tol * eps * (std::fabs(v) + sp.floor) + sp.abs);
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

Expected transposed(const Host& in) {
  Expected e;
  e.value = like(in, {in.shape[1], in.shape[0]});
  for (std::size_t r = 0; r < in.shape[0]; ++r)
    for (std::size_t c = 0; c < in.shape[1]; ++c) copy_elem(in, r * in.shape[1] + c, e.value, c * in.shape[0] + r);
  e.tol.assign(e.value.f.size(), 0.0);
  return e;
}

// Reductions and scans along `dim` (nullopt: the whole tensor, row-major, result [1]).
Expected lanes(const Spec& sp, const Host& in, std::optional<std::size_t> dim) {
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

std::string fmt_shape(const std::vector<std::size_t>& s) {
  std::ostringstream o;
  o << "[";
  for (std::size_t k = 0; k < s.size(); ++k) o << (k ? ", " : "") << s[k];
  return o.str() + "]";
}

::testing::AssertionResult same(const Expected& want, const Host& got) {
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

std::vector<DType> dtypes_for(std::uint8_t kinds) {
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
std::map<std::string, std::set<std::string>>& not_implemented() {
  static std::map<std::string, std::set<std::string>> m;
  return m;
}

class Summary : public ::testing::Environment {
 public:
  void TearDown() override {
    const auto& m = not_implemented();
    std::printf("\n[ops summary] %zu device op(s) raised NotImplemented and were skipped:\n", m.size());
    for (const auto& [op, dts] : m) {
      std::string d;
      for (const auto& x : dts) d += (d.empty() ? "" : ",") + x;
      std::printf("  %-28s (%s)\n", op.c_str(), d.c_str());
    }
  }
};
[[maybe_unused]] const auto* const kSummary = ::testing::AddGlobalTestEnvironment(new Summary);

// One test per device x op: the device comes from the registry (tt::conf::devices()),
// so a backend registered later is tested without an edit here.
struct OpCase {
  Device dev;
  std::size_t op = 0;
};
void PrintTo(const OpCase& c, std::ostream* os) { *os << c.dev.to_string() << " " << kOps[c.op].name; }

std::vector<OpCase> cases_of(bool (*in_family)(Family)) {
  std::vector<OpCase> out;
  for (const Device& d : tt::conf::devices())
    for (std::size_t k = 0; k < kOps.size(); ++k)
      if (in_family(kOps[k].family)) out.push_back({d, k});
  return out;
}
std::string case_name(const ::testing::TestParamInfo<OpCase>& p) {
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
bool first_of_family(std::size_t op) {
  for (std::size_t k = 0; k < op; ++k)
    if (kOps[k].family == kOps[op].family) return false;
  return true;
}
std::optional<DType> huge_dtype(const std::vector<DType>& dts, const Device& d) {
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
bool variants_at(const Device& d, Layout L) {
  if (L == Layout::Huge) return false;
  const std::uint16_t t = d.id().type_id;
  if (t == kCpuDeviceType || t == tt::mini::kMiniDeviceType) return true;
  return L == Layout::Contiguous || L == Layout::Transposed;
}

class GeneratedOp : public DeviceOpTest {};

TEST_P(GeneratedOp, MatchesScalarReference) {
  const OpInfo& info = kOps[GetParam().op];
  const OpCode op = static_cast<OpCode>(GetParam().op);
  const std::string op_name(info.name);
  const auto it = specs().find(op_name);
  if (it == specs().end()) GTEST_SKIP() << op_name << " is listed as not yet referenced";
  const Spec& sp = it->second;
  const Device dev = GetParam().dev;
  const std::string dev_name = dev.to_string();
  // A required entry the backend left empty raises NotImplemented through the
  // forwarder; that is reported in the summary like any other NotImplemented.
  const bool has_entry = Registry::instance().get(dev.id().type_id).has(op);

  const Family fam = info.family;
  const bool binaryish = fam == Family::Binary || fam == Family::Compare;
  const bool scalar_fam = fam == Family::Scalar || fam == Family::CompareScalar;
  std::vector<Layout> layouts = {Layout::Contiguous, Layout::Transposed, Layout::Strided, Layout::Flipped,
                                 Layout::NegStep,    Layout::Broadcast,  Layout::ZeroCols, Layout::ZeroRows};
  if (binaryish) layouts.push_back(Layout::ImplicitBroadcast);
  layouts.insert(layouts.end(), std::begin(kShapeLayouts), std::end(kShapeLayouts));
  const std::vector<DType> dtypes = dtypes_for(info.kinds);
  const std::optional<DType> huge_dt =
      fam == Family::Reduce || fam == Family::Dim || first_of_family(GetParam().op) ? huge_dtype(dtypes, dev) : std::nullopt;

  std::mt19937 rng(1234u + static_cast<unsigned>(GetParam().op));
  int combos = 0;
  std::set<std::string> ni;
  for (DType dt : dtypes) {
    if (!dev.supports_dtype(dt)) continue;
    const bool fl = is_fl(dt);
    if (fl ? !(sp.f || sp.fl) : !(sp.i || sp.il)) {
      ADD_FAILURE() << op_name << ": the op table allows " << name(dt) << " but the reference has no "
                    << (fl ? "float" : "int/bool") << " form";
      continue;
    }
    const bool un = is_un(dt);
    std::vector<std::optional<Scalar>> scalars{std::nullopt};
    if (scalar_fam) {
      scalars.clear();
      if (is_bo(dt)) {
        scalars = {Scalar(true), Scalar(false)};
      } else if (fl) {
        for (double s : sp.fs)
          scalars.emplace_back(sp.int_scalar ? Scalar(static_cast<std::int64_t>(s)) : Scalar(s));
      } else {
        for (std::int64_t s : (un ? sp.us : sp.ss)) scalars.emplace_back(Scalar(s));
      }
    }
    std::vector<Layout> dt_layouts = layouts;
    if (huge_dt == dt) dt_layouts.push_back(Layout::Huge);
    for (Layout L : dt_layouts) {
      const bool huge = L == Layout::Huge;
      std::vector<std::optional<std::int64_t>> dims{std::nullopt};
      if (fam == Family::Dim) dims = huge ? std::vector<std::optional<std::int64_t>>{0, 1} : std::vector<std::optional<std::int64_t>>{0, 1, -1};
      for (const auto& dim : dims)
        for (std::size_t si = 0; si < std::min<std::size_t>(huge ? 1 : scalars.size(), scalars.size()); ++si) {
          const auto& sc = scalars[si];
          SCOPED_TRACE(op_name + " dtype=" + name(dt) + " layout=" + layout_name(L) +
                       (dim ? " dim=" + std::to_string(*dim) : std::string()) +
                       (sc ? " scalar=" + std::to_string(sc->to_double()) : std::string()));
          const int arity = binaryish ? 2 : 1;
          const std::mt19937 rng_before = rng;  // to rebuild identical, uniquely owned operands
          auto build = [&](std::mt19937& g) {
            std::vector<Operand> v;
            for (int k = 0; k < arity; ++k) {
              Domain d = fl ? sp.fd[k] : un ? (sp.ud[k] ? *sp.ud[k] : Domain{std::max(0.0, sp.sd[k].lo), sp.sd[k].hi,
                                                                            0, sp.sd[k].min_abs})
                                            : sp.sd[k];
              v.push_back(make_operand(L, k, dt, d, g));
            }
            return v;
          };
          std::vector<Operand> ops = build(rng);
          std::vector<Host> in;
          for (auto& o : ops) in.push_back(o.logical);
          Expected want;
          if (sp.transpose) {
            want = transposed(in[0]);
          } else if (fam == Family::Reduce) {
            want = lanes(sp, in[0], std::nullopt);
          } else if (fam == Family::Dim) {
            want = lanes(sp, in[0], static_cast<std::size_t>(*dim < 0 ? *dim + 2 : *dim));
          } else {
            std::optional<double> sf;
            std::optional<std::int64_t> si;
            if (sc) {
              if (fl) sf = sc->to_double();
              else if (is_bo(dt)) si = sc->to_bool() ? 1 : 0;
              else si = sc->to_int64();
            }
            want = elementwise(sp, in, sf, si);
          }
          // Calls the op; operands whose bit is set in `give` are handed over (then
          // uniquely owned, so the backend may write into them), the others shared.
          auto call = [&](std::vector<Operand>& v, unsigned give) {
            auto arg = [&](std::size_t k) { return (give >> k) & 1u ? v[k].t.take() : v[k].t.share(); };
            switch (fam) {
              case Family::Unary: return H(detail::unary(op, arg(0)));
              case Family::Binary: { auto a = arg(0); return H(detail::binary(op, std::move(a), arg(1))); }
              case Family::Scalar: return H(detail::scalar(op, arg(0), *sc));
              case Family::Compare: { auto a = arg(0); return H(detail::compare(op, std::move(a), arg(1))); }
              case Family::CompareScalar: return H(detail::compare_scalar(op, arg(0), *sc));
              case Family::Reduce: return H(detail::reduce(op, arg(0)));
              case Family::Dim: return H(detail::reduce_dim(op, arg(0), *dim));
              default: throw std::logic_error("family not driven by the harness");
            }
          };
          try {
            H out = call(ops, 0);
            if (want.error) {
              ADD_FAILURE() << "expected ShapeError, got a result of shape " << out.shape().to_string();
              continue;
            }
            const Host got = out.read();
            EXPECT_TRUE(same(want, got));
            // The inputs are untouched (ops take their operands by value; shared ones must not
            // change); checked where the ownership variants run (device round trips).
            for (std::size_t k = 0; variants_at(dev, L) && k < ops.size(); ++k) {
              Expected in_want{in[k], std::vector<double>(in[k].f.size(), 0.0), false};
              EXPECT_TRUE(same(in_want, ops[k].t.read())) << "operand " << k << " changed";
            }
            ++combos;
            // Ownership variants: the same values, operands handed over (unique), so
            // in-place paths (write into lhs, into rhs with reversed kernels, views) run.
            for (unsigned give = 1; variants_at(dev, L) && give < (1u << arity); ++give) {
              std::mt19937 again = rng_before;
              std::vector<Operand> fresh = build(again);
              SCOPED_TRACE("operands handed over: mask " + std::to_string(give));
              EXPECT_TRUE(same(want, call(fresh, give).read()));
              for (std::size_t k = 0; k < fresh.size(); ++k) {
                if ((give >> k) & 1u) {
                  EXPECT_THROW(fresh[k].t.shape(), tensor::Error) << "operand " << k << " not consumed";
                }
              }
            }
          } catch (const tensor::NotImplemented&) {
            ni.insert(name(dt));
            not_implemented()[dev_name + " " + op_name].insert(name(dt));
          } catch (const tensor::ShapeError& e) {
            if (!want.error) ADD_FAILURE() << "unexpected ShapeError: " << e.what();
            else EXPECT_NE(std::string(e.what()).find(op_name), std::string::npos) << e.what();
          } catch (const std::exception& e) {
            ADD_FAILURE() << "unexpected exception: " << e.what();
          }
        }
    }
  }
  RecordProperty("checked_combinations", combos);
  if (!has_entry) {
    EXPECT_EQ(combos, 0) << op_name << " has no " << dev_name << " entry, yet calls succeeded";
  }
  if (combos == 0 && !ni.empty())
    GTEST_SKIP() << op_name << " raised NotImplemented on " << dev_name << (has_entry ? "" : " (required entry missing)");
}

INSTANTIATE_TEST_SUITE_P(OpTable, GeneratedOp, ::testing::ValuesIn(cases_of(harness_family)), case_name);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(GeneratedOp);  // TENSOR_TEST_DEVICE names an absent device

// ---- structured families --------------------------------------------------------------
// Ops whose result is not one value per input element (indexing, sort and top-k,
// extrema with indices, any/all, cat, repeat_dim) or that take other arguments
// (clamp, predicates, cross): each op x dtype x layout against a reference written
// here on the row-major host values. Index tensors take a random int dtype; every
// index op also gets an out-of-range index (IndexError naming the op, inputs unchanged).

bool structured_family(Family f) {
  switch (f) {
    case Family::Clamp: case Family::Predicate: case Family::Cross: case Family::DimIndex: case Family::DimWithIndices:
    case Family::AnyAll: case Family::AnyAllDim: case Family::Sort: case Family::SortWithIndices: case Family::Argsort:
    case Family::TopK: case Family::TopKWithIndices: case Family::ArgTopK: case Family::Gather: case Family::Scatter:
    case Family::ScatterUpdate: case Family::Select: case Family::SelectAssign: case Family::SelectUpdate: case Family::Cat:
    case Family::RepeatDim:
      return true;
    default:
      return false;
  }
}

// The structured ops that have a reference below.
const std::set<std::string>& structured_refs() {
  static const std::set<std::string> s = {
      "clamp", "hard_sigmoid", "is_nan", "is_inf", "cross", "argmax", "argmin", "max_dim_with_indices",
      "min_dim_with_indices", "any", "all", "any_dim", "all_dim", "sort", "sort_with_indices", "argsort", "topk",
      "topk_with_indices", "argtopk", "gather", "scatter_add", "scatter_or", "scatter", "select", "select_add",
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

Expected exact(Host h) {
  Expected e;
  e.tol.assign(h.f.size(), 0.0);
  e.value = std::move(h);
  return e;
}
Expected near(Host h, double ulps) {
  Expected e = exact(std::move(h));
  for (std::size_t k = 0; k < e.tol.size(); ++k) e.tol[k] = ulps * eps_of(e.value.dtype) * (std::fabs(e.value.f[k]) + 1);
  return e;
}


Host host_like(DType t, std::vector<std::size_t> shape) {
  Host h;
  h.dtype = t;
  h.shape = std::move(shape);
  if (is_fl(t)) h.f.assign(h.size(), 0.0);
  else h.i.assign(h.size(), 0);
  return h;
}

// Flat indices of lane j along `dim` of a 2-D shape (dim 1: row j; dim 0: column j).
std::vector<std::size_t> lane_of(const std::vector<std::size_t>& shape, std::size_t dim, std::size_t j) {
  std::vector<std::size_t> out;
  for (std::size_t k = 0; k < shape[dim]; ++k) out.push_back(dim == 1 ? j * shape[1] + k : k * shape[1] + j);
  return out;
}

// A tensor holding the 2-D `logical` values in layout L (a view for the strided
// layouts, else contiguous).
H in_layout(const Host& logical, Layout L) {
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
Operand operand_of(Host h, Layout L) {
  Operand o;
  o.t = in_layout(h, L);
  o.logical = std::move(h);
  return o;
}
// 1-D index tensor: contiguous, or reversed through a flip view for the flipped layout.
Operand index_vector(const Host& idx, Layout L) {
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

Domain data_domain(DType t, bool ties, double special = 0) {
  if (is_fl(t)) return {-3, 3, ties ? 0.5 : 0.25, 0, special};
  if (is_un(t)) return {0, ties ? 6.0 : 10.0};
  return {ties ? -3.0 : -10.0, ties ? 3.0 : 10.0};
}

DType random_index_dtype(std::mt19937& rng) {
  static const DType k[] = {DType::I64, DType::I32, DType::I16, DType::I8, DType::U64, DType::U32, DType::U16, DType::U8};
  return k[std::uniform_int_distribution<int>(0, 7)(rng)];
}

// An index tensor of `shape` with values in [0, bound).
Host index_host(DType it, std::vector<std::size_t> shape, std::size_t bound, std::mt19937& rng) {
  Host h = host_like(it, std::move(shape));
  for (auto& v : h.i) v = std::uniform_int_distribution<std::int64_t>(0, static_cast<std::int64_t>(bound) - 1)(rng);
  return h;
}

// The same index tensor with one entry out of range (bound, or -1 for signed dtypes).
Host poisoned(Host idx, std::size_t bound, std::mt19937& rng) {
  const std::size_t at = std::uniform_int_distribution<std::size_t>(0, idx.size() - 1)(rng);
  idx.i[at] = !is_un(idx.dtype) && (rng() & 1u) ? -1 : static_cast<std::int64_t>(bound);
  return idx;
}

enum class RU { Assign, Add, Mul, Min, Max, Or };
IndexingUpdateOp rule_of(RU u) {
  switch (u) {
    case RU::Assign: return IndexingUpdateOp::Assign;
    case RU::Mul: return IndexingUpdateOp::Mul;
    case RU::Min: return IndexingUpdateOp::Min;
    case RU::Max: return IndexingUpdateOp::Max;
    default: return IndexingUpdateOp::Add;  // Add, and Or (ignored by scatter_or / select_or)
  }
}
const char* ru_name(RU u) {
  static const char* k[] = {"assign", "add", "mul", "min", "max", "or"};
  return k[static_cast<int>(u)];
}

// out[k] = out[k] (rule) v[vk], rounded/wrapped to the dtype as the kernels store it.
void ref_update(Host& out, std::size_t k, const Host& v, std::size_t vk, RU u) {
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
std::vector<std::size_t> ref_order(const std::vector<double>& keys, bool desc) {
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
std::size_t ref_arg(const std::vector<double>& keys, bool mx) {
  std::size_t best = 0;
  for (std::size_t j = 1; j < keys.size(); ++j) {
    if (std::isnan(keys[best])) break;
    if (std::isnan(keys[j]) || (mx ? keys[j] > keys[best] : keys[j] < keys[best])) best = j;
  }
  return best;
}

std::vector<double> keys_of(const Host& h, const std::vector<std::size_t>& lane) {
  std::vector<double> k;
  for (std::size_t x : lane) k.push_back(h.at(x));
  return k;
}

std::vector<std::size_t> shape_with(std::vector<std::size_t> s, std::size_t dim, std::size_t n) {
  s[dim] = n;
  return s;
}

std::vector<Trial> make_trials(OpCode op, Family fam, DType dt, Layout L, std::mt19937& rng) {
  std::vector<Trial> out;
  const std::string opn(tensor::dispatch::op_name(op));
  const bool contiguous = L == Layout::Contiguous;
  auto first = [](std::vector<H>& a) { return a[0].take(); };
  switch (fam) {
    case Family::Gather: {
      for (std::size_t dim : {0, 1}) {
        Operand a = make_operand(L, 0, dt, data_domain(dt, false), rng);
        const std::size_t bound = a.logical.shape[dim];
        const DType it = random_index_dtype(rng);
        std::vector<std::vector<std::size_t>> shapes = {a.logical.shape};
        if (contiguous && bound > 0) shapes.push_back(shape_with(a.logical.shape, dim, 2));
        for (const auto& ishape : shapes) {
          Host idx = index_host(it, ishape, bound, rng);
          Host want = host_like(dt, ishape);
          for (std::size_t r = 0; r < ishape[0]; ++r)
            for (std::size_t c = 0; c < ishape[1]; ++c) {
              const auto k = static_cast<std::size_t>(idx.i[r * ishape[1] + c]);
              copy_elem(a.logical, dim == 0 ? k * a.logical.shape[1] + c : r * a.logical.shape[1] + k, want, r * ishape[1] + c);
            }
          const auto d = static_cast<std::int64_t>(dim);
          auto call = [d](std::vector<H>& h) { auto x = h[0].take(); return std::vector<H>{H(detail::gather(std::move(x), d, h[1].take()))}; };
          Trial t{"dim=" + std::to_string(dim) + " idx=" + name(it), {a, operand_of(idx, ishape == a.logical.shape ? L : Layout::Contiguous)}, call, {exact(want)}};
          if (ishape == a.logical.shape && L == Layout::Broadcast) t.ops[1] = operand_of(idx, Layout::Contiguous);
          out.push_back(t);
          if (contiguous && idx.size() > 0) {
            Trial e{t.label + " out-of-range", {a, operand_of(poisoned(idx, bound, rng), L)}, call, {}, Trial::Err::Index};
            out.push_back(e);
          }
        }
      }
      break;
    }
    case Family::Select: {
      for (std::size_t dim : {0, 1}) {
        Operand a = make_operand(L, 0, dt, data_domain(dt, false), rng);
        const std::size_t bound = a.logical.shape[dim];
        const DType it = random_index_dtype(rng);
        Host idx = index_host(it, {bound ? std::size_t{5} : 0}, bound, rng);
        Host want = host_like(dt, shape_with(a.logical.shape, dim, idx.size()));
        const std::size_t lanes = a.logical.shape[1 - dim];
        for (std::size_t j = 0; j < lanes; ++j) {
          const auto src = lane_of(a.logical.shape, dim, j), dst = lane_of(want.shape, dim, j);
          for (std::size_t k = 0; k < idx.size(); ++k) copy_elem(a.logical, src[static_cast<std::size_t>(idx.i[k])], want, dst[k]);
        }
        const auto d = static_cast<std::int64_t>(dim);
        auto call = [d](std::vector<H>& h) { auto x = h[0].take(); return std::vector<H>{H(detail::select(std::move(x), d, h[1].take()))}; };
        Trial t{"dim=" + std::to_string(dim) + " idx=" + name(it), {a, index_vector(idx, L)}, call, {exact(want)}};
        out.push_back(t);
        if (contiguous && idx.size() > 0)
          out.push_back(Trial{t.label + " out-of-range", {a, index_vector(poisoned(idx, bound, rng), L)}, call, {}, Trial::Err::Index});
      }
      break;
    }
    case Family::Scatter:
    case Family::ScatterUpdate: {
      std::vector<RU> rules;
      if (op == OpCode::scatter_or) rules = {RU::Or};
      else if (op == OpCode::scatter_add) rules = {RU::Add};
      else rules = {RU::Assign, RU::Add, RU::Mul, RU::Min, RU::Max};
      for (std::size_t dim : {0, 1})
        for (RU u : rules) {
          Operand a = make_operand(L, 0, dt, data_domain(dt, false), rng);
          const std::size_t bound = a.logical.shape[dim], other = a.logical.shape[1 - dim];
          const DType it = random_index_dtype(rng);
          std::vector<std::vector<std::size_t>> shapes = {a.logical.shape};
          if (contiguous && bound > 0 && other > 1) shapes.push_back(shape_with(shape_with(a.logical.shape, 1 - dim, other - 1), dim, 3));
          for (const auto& ishape : shapes) {
            const bool same_shape = ishape == a.logical.shape;
            Host idx = index_host(it, ishape, bound, rng);
            Host v = gen(dt, ishape, data_domain(dt, false), rng);
            Host want = a.logical;
            const std::size_t C = a.logical.shape[1];
            for (std::size_t r = 0; r < ishape[0]; ++r)
              for (std::size_t c = 0; c < ishape[1]; ++c) {
                const std::size_t q = r * ishape[1] + c;
                const auto k = static_cast<std::size_t>(idx.i[q]);
                ref_update(want, dim == 0 ? k * C + c : r * C + k, v, q, u);
              }
            const auto d = static_cast<std::int64_t>(dim);
            const IndexingUpdateOp rule = rule_of(u);
            auto call = [op, d, rule](std::vector<H>& h) {
              auto x = h[0].take();
              auto i = h[1].take();
              return std::vector<H>{H(detail::scatter(op, std::move(x), d, std::move(i), h[2].take(), rule))};
            };
            const Layout li = same_shape && L != Layout::Broadcast ? L : Layout::Contiguous;
            Trial t{"dim=" + std::to_string(dim) + " rule=" + ru_name(u) + " idx=" + name(it) + (same_shape ? "" : " smaller-indices"),
                    {a, operand_of(idx, li), operand_of(v, li)}, call, {near(want, 2)}};
            out.push_back(t);
            if (contiguous && idx.size() > 0)
              out.push_back(Trial{t.label + " out-of-range", {a, operand_of(poisoned(idx, bound, rng), li), t.ops[2]}, call, {},
                                  Trial::Err::Index});
          }
        }
      break;
    }
    case Family::SelectAssign:
    case Family::SelectUpdate: {
      std::vector<RU> rules;
      if (op == OpCode::select_or) rules = {RU::Or};
      else if (op == OpCode::select_add) rules = {RU::Add};
      else rules = {RU::Assign, RU::Add, RU::Mul, RU::Min, RU::Max};
      for (std::size_t dim : {0, 1})
        for (RU u : rules) {
          Operand a = make_operand(L, 0, dt, data_domain(dt, false), rng);
          const std::size_t bound = a.logical.shape[dim];
          const DType it = random_index_dtype(rng);
          Host idx = index_host(it, {bound ? std::size_t{5} : 0}, bound, rng);
          Host v = gen(dt, shape_with(a.logical.shape, dim, idx.size()), data_domain(dt, false), rng);
          Host want = a.logical;
          for (std::size_t j = 0; j < a.logical.shape[1 - dim]; ++j) {
            const auto dst = lane_of(want.shape, dim, j), src = lane_of(v.shape, dim, j);
            for (std::size_t k = 0; k < idx.size(); ++k) ref_update(want, dst[static_cast<std::size_t>(idx.i[k])], v, src[k], u);
          }
          const auto d = static_cast<std::int64_t>(dim);
          const IndexingUpdateOp rule = rule_of(u);
          auto call = [op, d, rule](std::vector<H>& h) {
            auto x = h[0].take();
            auto i = h[1].take();
            return std::vector<H>{H(detail::select_assign(op, std::move(x), d, std::move(i), h[2].take(), rule))};
          };
          Trial t{"dim=" + std::to_string(dim) + " rule=" + ru_name(u) + " idx=" + name(it),
                  {a, index_vector(idx, L), operand_of(v, L)}, call, {near(want, 2)}};
          out.push_back(t);
          if (contiguous && idx.size() > 0)
            out.push_back(Trial{t.label + " out-of-range", {a, index_vector(poisoned(idx, bound, rng), L), t.ops[2]}, call, {},
                                Trial::Err::Index});
        }
      break;
    }
    case Family::Cat: {
      for (std::size_t dim : {0, 1}) {
        Operand a = make_operand(L, 0, dt, data_domain(dt, false), rng);
        Host b = gen(dt, shape_with(a.logical.shape, dim, 2), data_domain(dt, false), rng);
        Host e = gen(dt, shape_with(a.logical.shape, dim, 0), data_domain(dt, false), rng);
        auto concat = [&](const std::vector<const Host*>& parts) {
          std::size_t total = 0;
          for (const Host* p : parts) total += p->shape[dim];
          Host w = host_like(dt, shape_with(a.logical.shape, dim, total));
          std::size_t off = 0;
          for (const Host* p : parts) {
            for (std::size_t r = 0; r < p->shape[0]; ++r)
              for (std::size_t c = 0; c < p->shape[1]; ++c)
                copy_elem(*p, r * p->shape[1] + c, w, dim == 0 ? (off + r) * w.shape[1] + c : r * w.shape[1] + off + c);
            off += p->shape[dim];
          }
          return w;
        };
        const auto d = static_cast<std::int64_t>(dim);
        auto call = [d](std::vector<H>& h) {
          std::vector<detail::Handle> parts;
          for (H& x : h) parts.push_back(x.take());
          return std::vector<H>{H(detail::cat(std::move(parts), d))};
        };
        out.push_back(Trial{"dim=" + std::to_string(dim) + " [a, empty, b]", {a, operand_of(e, Layout::Contiguous), operand_of(b, Layout::Contiguous)},
                            call, {exact(concat({&a.logical, &e, &b}))}});
        out.push_back(Trial{"dim=" + std::to_string(dim) + " [b, a]", {operand_of(b, Layout::Contiguous), a}, call,
                            {exact(concat({&b, &a.logical}))}});
      }
      break;
    }
    case Family::RepeatDim: {
      for (std::size_t dim : {0, 1})
        for (std::size_t times : {0, 2, 3}) {
          Operand a = make_operand(L, 0, dt, data_domain(dt, false), rng);
          const std::size_t n = a.logical.shape[dim];
          Host want = host_like(dt, shape_with(a.logical.shape, dim, n * times));
          for (std::size_t r = 0; r < want.shape[0]; ++r)
            for (std::size_t c = 0; c < want.shape[1]; ++c)
              copy_elem(a.logical, dim == 0 ? (r % n) * a.logical.shape[1] + c : r * a.logical.shape[1] + c % n, want,
                        r * want.shape[1] + c);
          const auto d = static_cast<std::int64_t>(dim);
          auto call = [d, times, first](std::vector<H>& h) { return std::vector<H>{H(detail::repeat_dim(first(h), d, times))}; };
          out.push_back(Trial{"dim=" + std::to_string(dim) + " times=" + std::to_string(times), {a}, call, {exact(want)}});
        }
      break;
    }
    case Family::Sort:
    case Family::SortWithIndices:
    case Family::Argsort:
    case Family::TopK:
    case Family::TopKWithIndices:
    case Family::ArgTopK: {
      const bool topk = fam == Family::TopK || fam == Family::TopKWithIndices || fam == Family::ArgTopK;
      for (std::int64_t d : {0, 1, -1})
        for (bool desc : {false, true}) {
          if (topk && !desc) continue;  // top-k is always descending
          const auto dim = static_cast<std::size_t>(d < 0 ? d + 2 : d);
          Operand a = make_operand(L, 0, dt, data_domain(dt, true, 0.1), rng);
          const std::size_t n = a.logical.shape[dim];
          std::vector<std::size_t> ks = {n};
          if (topk && n > 0) ks = {1, std::min<std::size_t>(3, n), n};
          for (std::size_t k : ks) {
            Host vals = host_like(dt, shape_with(a.logical.shape, dim, k));
            Host idxs = host_like(idx_out(), vals.shape);
            for (std::size_t j = 0; j < a.logical.shape[1 - dim]; ++j) {
              const auto src = lane_of(a.logical.shape, dim, j), dst = lane_of(vals.shape, dim, j);
              const auto order = ref_order(keys_of(a.logical, src), desc);
              for (std::size_t q = 0; q < k; ++q) {
                copy_elem(a.logical, src[order[q]], vals, dst[q]);
                idxs.i[dst[q]] = static_cast<std::int64_t>(order[q]);
              }
            }
            std::function<std::vector<H>(std::vector<H>&)> call;
            std::vector<Expected> want;
            switch (fam) {
              case Family::Sort:
                call = [d, desc, first](std::vector<H>& h) { return std::vector<H>{H(detail::sort(first(h), d, desc))}; };
                want = {exact(vals)};
                break;
              case Family::SortWithIndices:
                call = [d, desc, first](std::vector<H>& h) {
                  auto [v, i] = detail::sort_with_indices(first(h), d, desc);
                  return std::vector<H>{H(v), H(i)};
                };
                want = {exact(vals), exact(idxs)};
                break;
              case Family::Argsort:
                call = [d, desc, first](std::vector<H>& h) { return std::vector<H>{H(detail::argsort(first(h), d, desc))}; };
                want = {exact(idxs)};
                break;
              case Family::TopK:
                call = [d, k, first](std::vector<H>& h) { return std::vector<H>{H(detail::topk(first(h), d, k))}; };
                want = {exact(vals)};
                break;
              case Family::TopKWithIndices:
                call = [d, k, first](std::vector<H>& h) {
                  auto [v, i] = detail::topk_with_indices(first(h), d, k);
                  return std::vector<H>{H(v), H(i)};
                };
                want = {exact(vals), exact(idxs)};
                break;
              default:
                call = [d, k, first](std::vector<H>& h) { return std::vector<H>{H(detail::argtopk(first(h), d, k))}; };
                want = {exact(idxs)};
                break;
            }
            out.push_back(Trial{"dim=" + std::to_string(d) + (desc ? " descending" : "") + (topk ? " k=" + std::to_string(k) : ""),
                                {a}, call, want});
          }
        }
      break;
    }
    case Family::DimIndex:
    case Family::DimWithIndices: {
      const bool mx = op == OpCode::argmax || op == OpCode::max_dim_with_indices;
      for (std::int64_t d : {0, 1, -1}) {
        const auto dim = static_cast<std::size_t>(d < 0 ? d + 2 : d);
        Operand a = make_operand(L, 0, dt, data_domain(dt, true, 0.05), rng);
        Host vals = host_like(dt, shape_with(a.logical.shape, dim, 1));
        Host idxs = host_like(idx_out(), vals.shape);
        for (std::size_t j = 0; j < a.logical.shape[1 - dim]; ++j) {
          const auto src = lane_of(a.logical.shape, dim, j);
          if (src.empty()) continue;
          const std::size_t b = ref_arg(keys_of(a.logical, src), mx);
          copy_elem(a.logical, src[b], vals, j);
          idxs.i[j] = static_cast<std::int64_t>(b);
        }
        Trial t{"dim=" + std::to_string(d), {a}, nullptr, {}};
        if (fam == Family::DimIndex) {
          t.call = [op, d, first](std::vector<H>& h) { return std::vector<H>{H(detail::dim_index(op, first(h), d))}; };
          t.want = {exact(idxs)};
        } else {
          t.call = [op, d, first](std::vector<H>& h) {
            auto [v, i] = detail::dim_with_indices(op, first(h), d);
            return std::vector<H>{H(v), H(i)};
          };
          t.want = {exact(vals), exact(idxs)};
        }
        if (a.logical.shape[dim] == 0) t.err = Trial::Err::Shape;  // extrema of an empty lane raise
        out.push_back(t);
      }
      break;
    }
    case Family::AnyAll:
    case Family::AnyAllDim: {
      const bool all = op == OpCode::all || op == OpCode::all_dim;
      const Domain dom = is_fl(dt) ? Domain{-0.6, 0.6, 0.5, 0, 0.05} : is_un(dt) ? Domain{0, 1} : Domain{-1, 1};
      std::vector<std::int64_t> dims = {0, 1, -1};
      if (fam == Family::AnyAll) dims = {0};
      for (std::int64_t d : dims) {
        // All-nonzero data too, so that all() sees both answers.
        for (bool dense : {false, true}) {
          Domain use = dom;
          if (dense) use = is_fl(dt) ? Domain{0.5, 2, 0.5, 0, 0.05} : Domain{1, 3};
          Operand a = make_operand(L, 0, dt, use, rng);
          auto nz = [&](std::size_t x) { return a.logical.floaty() ? a.logical.f[x] != 0 : a.logical.i[x] != 0; };
          Host want;
          if (fam == Family::AnyAll) {
            want = host_like(bool_out(), {1});
            bool acc = all;
            for (std::size_t x = 0; x < a.logical.size(); ++x) acc = all ? acc && nz(x) : acc || nz(x);
            want.i[0] = acc;
          } else {
            const auto dim = static_cast<std::size_t>(d < 0 ? d + 2 : d);
            want = host_like(bool_out(), shape_with(a.logical.shape, dim, 1));
            for (std::size_t j = 0; j < a.logical.shape[1 - dim]; ++j) {
              bool acc = all;
              for (std::size_t x : lane_of(a.logical.shape, dim, j)) acc = all ? acc && nz(x) : acc || nz(x);
              want.i[j] = acc;
            }
          }
          Trial t{(fam == Family::AnyAll ? std::string() : "dim=" + std::to_string(d)) + (dense ? " nonzero-data" : ""), {a}, nullptr,
                  {exact(want)}};
          if (fam == Family::AnyAll) t.call = [op, first](std::vector<H>& h) { return std::vector<H>{H(detail::any_all(op, first(h)))}; };
          else t.call = [op, d, first](std::vector<H>& h) { return std::vector<H>{H(detail::any_all_dim(op, first(h), d))}; };
          out.push_back(t);
        }
      }
      break;
    }
    case Family::Clamp: {
      std::vector<std::pair<Scalar, Scalar>> args;
      if (op == OpCode::hard_sigmoid) args = {{Scalar(0.2), Scalar(0.5)}, {Scalar(1.0 / 6.0), Scalar(0.5)}};
      else if (is_fl(dt)) args = {{Scalar(-1.0), Scalar(1.5)}, {Scalar(0.5), Scalar(0.5)}};
      else if (is_un(dt)) args = {{Scalar(std::int64_t{2}), Scalar(std::int64_t{7})}};
      else args = {{Scalar(std::int64_t{-3}), Scalar(std::int64_t{4})}};
      for (const auto& [p, q] : args) {
        Operand a = make_operand(L, 0, dt, is_fl(dt) ? Domain{-4, 4, 0, 0, 0.1} : data_domain(dt, false), rng);
        Host want = a.logical;
        double ulps = 0;
        for (std::size_t x = 0; x < want.size(); ++x) {
          if (op == OpCode::hard_sigmoid) {
            const double v = p.to_double() * want.f[x] + q.to_double();
            want.f[x] = std::isnan(v) ? v : v < 0 ? 0.0 : v > 1 ? 1.0 : round_to(dt, v);
            ulps = 4;
          } else if (is_fl(dt)) {
            const double lo = round_to(dt, p.to_double()), hi = round_to(dt, q.to_double()), v = want.f[x];
            want.f[x] = v < lo ? lo : v > hi ? hi : v;
          } else {
            const std::int64_t lo = p.to_int64(), hi = q.to_int64(), v = want.i[x];
            want.i[x] = v < lo ? lo : v > hi ? hi : v;
          }
        }
        auto call = [op, p, q, first](std::vector<H>& h) { return std::vector<H>{H(detail::clamp(op, first(h), p, q))}; };
        out.push_back(Trial{"args=" + std::to_string(p.to_double()) + "," + std::to_string(q.to_double()), {a}, call,
                            {ulps > 0 ? near(want, ulps) : exact(want)}});
      }
      break;
    }
    case Family::Predicate: {
      Operand a = make_operand(L, 0, dt, Domain{-3, 3, 0, 0, 0.3}, rng);
      Host want = host_like(bool_out(), a.logical.shape);
      for (std::size_t x = 0; x < want.size(); ++x)
        want.i[x] = op == OpCode::is_nan ? std::isnan(a.logical.f[x]) : std::isinf(a.logical.f[x]);
      auto call = [op, first](std::vector<H>& h) { return std::vector<H>{H(detail::predicate(op, first(h)))}; };
      out.push_back(Trial{"", {a}, call, {exact(want)}});
      break;
    }
    case Family::Cross: {
      for (std::size_t dim : {0, 1}) {
        const std::size_t other = L == Layout::ZeroCols || L == Layout::ZeroRows ? 0 : dim == 0 ? kCols : kRows;
        const std::vector<std::size_t> shape = dim == 0 ? std::vector<std::size_t>{3, other} : std::vector<std::size_t>{other, 3};
        Host ah = gen(dt, shape, Domain{-3, 3}, rng), bh = gen(dt, shape, Domain{-3, 3}, rng);
        Operand a, b = operand_of(bh, L);
        if (L == Layout::Broadcast && other > 0) {
          // a: one 3-vector broadcast along the other dim.
          Host small = gen(dt, dim == 0 ? std::vector<std::size_t>{3, 1} : std::vector<std::size_t>{1, 3}, Domain{-3, 3}, rng);
          for (std::size_t r = 0; r < shape[0]; ++r)
            for (std::size_t c = 0; c < shape[1]; ++c) copy_elem(small, dim == 0 ? r : c, ah, r * shape[1] + c);
          const std::int64_t dims[] = {static_cast<std::int64_t>(shape[0]), static_cast<std::int64_t>(shape[1])};
          a.logical = ah;
          a.t = H(detail::reshape(OpCode::expand, on_dev(small).share(), dims));
        } else {
          a = operand_of(ah, L);
        }
        Host want = host_like(dt, shape);
        std::vector<double> tol(want.size());
        const double eps = eps_of(dt);
        for (std::size_t j = 0; j < other; ++j) {
          const auto l = lane_of(shape, dim, j);
          const double x[3] = {ah.f[l[0]], ah.f[l[1]], ah.f[l[2]]}, y[3] = {bh.f[l[0]], bh.f[l[1]], bh.f[l[2]]};
          for (int c = 0; c < 3; ++c) {
            const int p = (c + 1) % 3, q = (c + 2) % 3;
            want.f[l[static_cast<std::size_t>(c)]] = x[p] * y[q] - x[q] * y[p];
            tol[l[static_cast<std::size_t>(c)]] = 4 * eps * (std::fabs(x[p] * y[q]) + std::fabs(x[q] * y[p]));
          }
        }
        const auto d = static_cast<std::int64_t>(dim);
        auto call = [d](std::vector<H>& h) { auto x = h[0].take(); return std::vector<H>{H(detail::cross(std::move(x), h[1].take(), d))}; };
        out.push_back(Trial{"dim=" + std::to_string(dim), {a, b}, call, {Expected{want, tol, false}}});
      }
      break;
    }
    default:
      break;
  }
  return out;
}

bool long_lanes(Family f) {
  switch (f) {
    case Family::Sort: case Family::SortWithIndices: case Family::Argsort: case Family::TopK: case Family::TopKWithIndices:
    case Family::ArgTopK: case Family::DimIndex: case Family::DimWithIndices: case Family::AnyAllDim:
      return true;
    default:
      return false;
  }
}

class StructuredOp : public DeviceOpTest {};

TEST_P(StructuredOp, MatchesReference) {
  const OpInfo& info = kOps[GetParam().op];
  const OpCode op = static_cast<OpCode>(GetParam().op);
  const std::string op_name(info.name);
  if (!structured_refs().count(op_name)) GTEST_SKIP() << op_name << " is listed as not yet referenced";
  const Device dev = GetParam().dev;
  std::vector<Layout> layouts = {Layout::Contiguous, Layout::Transposed, Layout::Strided, Layout::Flipped,
                                 Layout::NegStep,    Layout::Broadcast,  Layout::ZeroCols, Layout::ZeroRows};
  layouts.push_back(Layout::Scalar1x1);
  if (long_lanes(info.family))
    layouts.insert(layouts.end(), {Layout::Large, Layout::LargeTransposed, Layout::Row257, Layout::Wide3x1025Transposed});
  std::mt19937 rng(4321u + static_cast<unsigned>(GetParam().op));
  int combos = 0;
  for (DType dt : dtypes_for(info.kinds)) {
    if (!dev.supports_dtype(dt)) continue;
    for (Layout L : layouts) {
      const std::mt19937 before = rng;
      std::vector<Trial> trials = make_trials(op, info.family, dt, L, rng);
      ASSERT_FALSE(trials.empty()) << op_name << " made no trials";
      for (std::size_t ti = 0; ti < trials.size(); ++ti) {
        Trial& tr = trials[ti];
        SCOPED_TRACE(op_name + " dtype=" + name(dt) + " layout=" + layout_name(L) + " " + tr.label);
        std::vector<H> args;
        for (Operand& o : tr.ops) args.push_back(o.t);
        bool not_impl = false;
        try {
          std::vector<H> got = tr.call(args);
          if (tr.err != Trial::Err::None) {
            for (const H& g : got) (void)g.read();  // a device may report the error when the result is read
            ADD_FAILURE() << "expected " << (tr.err == Trial::Err::Index ? "IndexError" : "ShapeError") << ", got a result";
          } else {
            EXPECT_EQ(got.size(), tr.want.size());
            for (std::size_t k = 0; k < std::min(got.size(), tr.want.size()); ++k)
              EXPECT_TRUE(same(tr.want[k], got[k].read())) << "result " << k;
            ++combos;
          }
        } catch (const tensor::NotImplemented& e) {
          // A device may lack an op (or one of its update rules): it must say so, naming
          // op and device; listed in the summary like GeneratedOp's.
          not_impl = true;
          EXPECT_NE(std::string(e.what()).find(Registry::instance().get(dev.id().type_id).short_name()), std::string::npos) << e.what();
          not_implemented()[dev.to_string() + " " + op_name].insert(name(dt));
        } catch (const tensor::IndexError& e) {
          if (tr.err != Trial::Err::Index) ADD_FAILURE() << "unexpected IndexError: " << e.what();
          else EXPECT_NE(std::string(e.what()).find("[" + op_name + "]"), std::string::npos) << e.what();
        } catch (const tensor::ShapeError& e) {
          if (tr.err != Trial::Err::Shape) ADD_FAILURE() << "unexpected ShapeError: " << e.what();
          else EXPECT_NE(std::string(e.what()).find(op_name), std::string::npos) << e.what();
        } catch (const std::exception& e) {
          ADD_FAILURE() << "unexpected exception: " << e.what();
        }
        // Shared operands are never changed, whether the op succeeded or raised.
        for (std::size_t k = 0; k < tr.ops.size(); ++k)
          EXPECT_TRUE(same(exact(tr.ops[k].logical), tr.ops[k].t.read())) << "operand " << k << " changed";
        if (tr.err != Trial::Err::None || not_impl || !variants_at(dev, L)) continue;
        // The first operand handed over (uniquely owned: in-place paths may run).
        std::mt19937 again = before;
        std::vector<Trial> fresh = make_trials(op, info.family, dt, L, again);
        std::vector<H> owned;
        for (std::size_t k = 0; k < fresh[ti].ops.size(); ++k)
          owned.push_back(k == 0 ? H(fresh[ti].ops[k].t.take()) : fresh[ti].ops[k].t);
        try {
          std::vector<H> got = fresh[ti].call(owned);
          for (std::size_t k = 0; k < std::min(got.size(), tr.want.size()); ++k)
            EXPECT_TRUE(same(tr.want[k], got[k].read())) << "first operand handed over: result " << k;
        } catch (const std::exception& e) {
          ADD_FAILURE() << "first operand handed over: unexpected exception: " << e.what();
        }
      }
    }
  }
  RecordProperty("checked_combinations", combos);
  EXPECT_GT(combos, 0) << op_name << " checked nothing";
}

INSTANTIATE_TEST_SUITE_P(OpTable, StructuredOp, ::testing::ValuesIn(cases_of(structured_family)), case_name);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(StructuredOp);

TEST(OpTable, EveryHarnessOpHasAReference) {
  std::set<std::string> table;
  for (const OpInfo& o : kOps) {
    if (!harness_family(o.family) && !structured_family(o.family)) continue;
    const std::string n(o.name);
    table.insert(n);
    const bool ref = harness_family(o.family) ? specs().count(n) != 0 : structured_refs().count(n) != 0;
    const bool listed = not_yet_referenced().count(n) != 0;
    EXPECT_TRUE(ref || listed) << "op '" << n << "' (family " << tensor::dispatch::family_name(o.family)
                               << ") has no reference in ops_test.cpp and is not in not_yet_referenced()";
    EXPECT_FALSE(ref && listed) << "op '" << n << "' has a reference: remove it from not_yet_referenced()";
  }
  for (const auto& [n, spec] : specs()) EXPECT_TRUE(table.count(n)) << "reference for '" << n << "' matches no op-table row";
  for (const auto& n : structured_refs()) EXPECT_TRUE(table.count(n)) << "reference for '" << n << "' matches no op-table row";
  for (const auto& [n, why] : not_yet_referenced()) EXPECT_TRUE(table.count(n)) << "stale not-yet entry '" << n << "'";
}

// max_pair / min_pair beyond the generated inputs: NaN in either operand wins (burn,
// torch.maximum), broadcasting, and int tensors.
TEST(OpTable, MaxPairMinPairPropagateNaNAndBroadcast) {
  for (const Device& dev : tt::conf::devices()) {
    tt::conf::DeviceScope scope;
    scope.enter(dev);
    const auto a = Tensor<2>::from_data(TensorData::from<float>({1, NAN, 3, -0.5f}, {1, 4}), dev);
    const auto b = Tensor<2>::from_data(TensorData::from<float>({NAN, 2, 1, -1, 5, 5, 5, 5}, {2, 4}), dev);
    const auto mx = a.max_pair(b).into_data().to_vec<float>();
    const auto mn = a.min_pair(b).into_data().to_vec<float>();
    ASSERT_EQ(mx.size(), 8u) << dev.to_string();
    const float want_mx[8] = {NAN, NAN, 3, -0.5f, 5, NAN, 5, 5};
    const float want_mn[8] = {NAN, NAN, 1, -1, 1, NAN, 3, -0.5f};
    for (int i = 0; i < 8; ++i) {
      if (std::isnan(want_mx[i])) EXPECT_TRUE(std::isnan(mx[i])) << dev.to_string() << " max " << i;
      else EXPECT_EQ(mx[i], want_mx[i]) << dev.to_string() << " max " << i;
      if (std::isnan(want_mn[i])) EXPECT_TRUE(std::isnan(mn[i])) << dev.to_string() << " min " << i;
      else EXPECT_EQ(mn[i], want_mn[i]) << dev.to_string() << " min " << i;
    }
    const auto x = Tensor<1, Int>::from_data(TensorData::from<std::int32_t>({-7, 4, 0}), dev);
    const auto y = Tensor<1, Int>::from_data(TensorData::from<std::int32_t>({3, 4, -2}), dev);
    EXPECT_EQ(x.max_pair(y).into_data().to_vec<std::int32_t>(), (std::vector<std::int32_t>{3, 4, 0})) << dev.to_string();
    EXPECT_EQ(x.min_pair(y).into_data().to_vec<std::int32_t>(), (std::vector<std::int32_t>{-7, 4, -2})) << dev.to_string();
    scope.leave();
  }
}

}  // namespace
