// Op tests: the references of the Unary family (element functions in double / int64).
#include "ops/ops_spec.hpp"

namespace ops_spec {

void add_unary_specs(std::map<std::string, Spec>& m) {
  [[maybe_unused]] const Domain pos{0.1, 5}, nonzero{-3, 3, 0, 0.5}, halves{-4, 4, 0.25};
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
}

}  // namespace ops_spec
