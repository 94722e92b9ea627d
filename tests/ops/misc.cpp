// Op tests: the trials of any/all, clamp (hard_sigmoid), the predicates (is_nan, is_inf)
// cross and var_mean.
#include "ops/ops_spec.hpp"

namespace ops_spec {

void misc_trials(OPS_TRIALS_ARGS) {
  [[maybe_unused]] const std::string opn(tensor::dispatch::op_name(op));
  [[maybe_unused]] const bool contiguous = L == Layout::Contiguous;
  [[maybe_unused]] auto first = [](std::vector<H>& a) { return a[0].take(); };
  switch (fam) {
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
    case Family::Moments: {
      // var_mean against the two-pass formula in double on the host values; NaN and
      // infinities among the data (a lane with one gives a NaN variance). The tolerance
      // covers a device that composes it in the dtype (mean, centred squares, sum).
      for (std::int64_t d : {0, 1, -1})
        for (bool biased : {false, true}) {
          const auto dim = static_cast<std::size_t>(d < 0 ? d + 2 : d);
          Operand a = make_operand(L, 0, dt, Domain{-3, 3, 0, 0, 0.03}, rng);
          Host var = host_like(dt, shape_with(a.logical.shape, dim, 1)), mean = var;
          std::vector<double> vtol(var.size()), mtol(var.size());
          const double eps = eps_of(dt), c = biased ? 0.0 : 1.0;
          for (std::size_t j = 0; j < a.logical.shape[1 - dim]; ++j) {
            const auto lane = lane_of(a.logical.shape, dim, j);
            const double n = static_cast<double>(lane.size());
            double s = 0, sabs = 0;
            for (std::size_t x : lane) s += a.logical.f[x], sabs += std::fabs(a.logical.f[x]);
            const double mu = s / n;  // n == 0: NaN
            double m2 = 0, dabs = 0;
            for (std::size_t x : lane) {
              const double dv = a.logical.f[x] - mu;
              m2 += dv * dv;
              dabs += std::fabs(dv);
            }
            mean.f[j] = mu;
            var.f[j] = m2 / (n - c);  // n == c: 0 / 0
            mtol[j] = (n + 2) * eps * sabs / std::max(n, 1.0) + 2 * eps * std::fabs(mu);
            vtol[j] = ((n + 4) * eps * m2 + 2 * dabs * mtol[j]) / std::max(std::fabs(n - c), 1.0) + 4 * eps * std::fabs(var.f[j]);
          }
          Trial t{"dim=" + std::to_string(d) + (biased ? " biased" : ""), {a}, nullptr,
                  {Expected{var, vtol, false}, Expected{mean, mtol, false}}};
          t.call = [d, biased, first](std::vector<H>& h) {
            auto [v, m] = detail::var_mean(first(h), d, biased);
            return std::vector<H>{H(v), H(m)};
          };
          out.push_back(t);
        }
      break;
    }
    default:
      break;
  }
}

}  // namespace ops_spec
