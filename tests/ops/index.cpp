// Op tests: the trials of the indexing families (gather, select, scatter, select_assign and
// their update rules) against references on the row-major host values.
#include "ops/ops_spec.hpp"

namespace ops_spec {

void index_trials(OPS_TRIALS_ARGS) {
  [[maybe_unused]] const std::string opn(tensor::dispatch::op_name(op));
  [[maybe_unused]] const bool contiguous = L == Layout::Contiguous;
  [[maybe_unused]] auto first = [](std::vector<H>& a) { return a[0].take(); };
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
    default:
      break;
  }
}

}  // namespace ops_spec
