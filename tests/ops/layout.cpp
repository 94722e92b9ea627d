// Op tests: the trials of cat and repeat_dim.
#include "ops/ops_spec.hpp"

namespace ops_spec {

void layout_trials(OPS_TRIALS_ARGS) {
  [[maybe_unused]] const std::string opn(tensor::dispatch::op_name(op));
  [[maybe_unused]] const bool contiguous = L == Layout::Contiguous;
  [[maybe_unused]] auto first = [](std::vector<H>& a) { return a[0].take(); };
  switch (fam) {
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
        for (std::size_t times : {0, 2, 3, 5}) {
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
    default:
      break;
  }
}

}  // namespace ops_spec
