// Op tests: the references of the Binary and Scalar families.
#include "ops/ops_spec.hpp"

namespace ops_spec {

void add_binary_specs(std::map<std::string, Spec>& m) {
  [[maybe_unused]] const Domain pos{0.1, 5}, nonzero{-3, 3, 0, 0.5}, halves{-4, 4, 0.25};
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
  m["fmod"] = binary_f([](double a, double b) { return std::fmod(a, b); }, {-5, 5}, nonzero, 4, 1);
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
    s.f = [](const std::vector<double>& v) { return std::fmod(v[0], v[1]); };
    s.fs = {1.5, -2.5};
    s.floor = 1;
    m["fmod_scalar"] = s;
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
}

}  // namespace ops_spec
