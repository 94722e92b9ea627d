// Op tests: the trials of sort, argsort, top-k (with indices) and the extrema with indices
// (argmax, argmin, max/min_dim_with_indices).
#include "ops/ops_spec.hpp"

namespace ops_spec {

void sort_trials(OPS_TRIALS_ARGS) {
  [[maybe_unused]] const std::string opn(tensor::dispatch::op_name(op));
  [[maybe_unused]] const bool contiguous = L == Layout::Contiguous;
  [[maybe_unused]] auto first = [](std::vector<H>& a) { return a[0].take(); };
  switch (fam) {
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
    default:
      break;
  }
}

}  // namespace ops_spec
