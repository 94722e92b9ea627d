// Op tests: the references of the Reduce and Dim families (lane functions: reductions, scans, softmax).
#include "ops/ops_spec.hpp"

namespace ops_spec {

void add_reduce_specs(std::map<std::string, Spec>& m) {
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
}

}  // namespace ops_spec
