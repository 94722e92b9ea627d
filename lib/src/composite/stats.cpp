// The statistics methods of tensor.hpp composed from reductions: reductions over several
// dims, mean over dims, var / var_mean, cov, median.
#include <string>
#include <utility>
#include <vector>

#include "dispatch/dispatch.hpp"
#include "lib/src/composite/compose.hpp"
#include "lib/src/handles.hpp"

namespace tensor::detail {

using namespace compose;

namespace {
// Reduces x along each of the dims with `op` (a *_dim reduction keeping the dim).
Handle reduce_dims(const char* name, OpCode op, Handle& a_, DimList dims) {
  H x = take_h(a_);
  const std::vector<std::size_t> ds = dims_of(name, dims, x.shape().rank());
  return named(name, [&] {
    for (std::size_t d : ds) x = rdim(op, x, d);
    return x.take();
  });
}

// One dim of x, resolved, for the single-dim statistics.
std::size_t one_dim(const char* op, const H& x, std::int64_t dim) { return rdim_of(op, dim, x.shape().rank()); }
}  // namespace

Handle sum_dims(Handle&& a_, DimList dims) { return reduce_dims("sum_dims", OpCode::sum_dim, a_, dims); }
Handle prod_dims(Handle&& a_, DimList dims) { return reduce_dims("prod_dims", OpCode::prod_dim, a_, dims); }
Handle max_dims(Handle&& a_, DimList dims) { return reduce_dims("max_dims", OpCode::max_dim, a_, dims); }
Handle min_dims(Handle&& a_, DimList dims) { return reduce_dims("min_dims", OpCode::min_dim, a_, dims); }
Handle max_abs_dims(Handle&& a_, DimList dims) { return reduce_dims("max_abs_dims", OpCode::max_abs_dim, a_, dims); }

Handle mean_dims(Handle&& a_, DimList dims) {
  H x = take_h(a_);
  const Shape s = x.shape();
  const std::vector<std::size_t> ds = dims_of("mean_dims", dims, s.rank());
  return named("mean_dims", [&]() -> Handle {
    std::size_t n = 1;
    for (std::size_t d : ds) n *= s[d];
    if (kind(x.h) == Kind::Int && n == 0)
      throw ShapeError("[mean_dims] expected non-empty dims for an int tensor; got shape " + s.to_string());
    for (std::size_t d : ds) x = rdim(OpCode::sum_dim, x, d);
    if (ds.empty()) return x.take();
    return kind(x.h) == Kind::Int ? scalar(OpCode::div_scalar, x.r(), Scalar(static_cast<std::int64_t>(n)))
                                  : scalar(OpCode::div_scalar, x.r(), Scalar(static_cast<double>(n)));
  });
}

// var and var_mean: the op table's var_mean row (one pass on the cpu; the composite
// elsewhere), its divisor n - 1 (or n when biased).
Handle var(Handle&& a, std::int64_t dim, bool biased) {
  return named(biased ? "var_bias" : "var", [&] {
    auto [v, m] = dispatch::var_mean(handles::take(a), dim, biased ? 0 : 1);
    return handles::give(std::move(v));
  });
}

// burn's form: c = (x - mean along dim) with dim swapped to 0; c^T c / (n - correction)
// (c^T swaps the last two dims, so for rank > 2 the leading dims are batch dims of the
// product: [4, 2, 4] along 0 gives [4, 4, 4], as burn).
Handle cov(Handle&& a_, std::int64_t dim, std::size_t correction) {
  H x = take_h(a_);
  const Shape s = x.shape();
  const std::size_t d = one_dim("cov", x, dim);
  return named("cov", [&] {
    const std::size_t r = s.rank();
    if (r < 2) throw ShapeError("[cov] expected a tensor of rank >= 2; got shape " + s.to_string());
    H c = bin(OpCode::sub, x, rdim(OpCode::mean_dim, x, d));
    if (d != 0) c = H(swap_dims(c.r(), static_cast<std::int64_t>(d), 0));
    const H ct = H(swap_dims(c.r(), static_cast<std::int64_t>(r - 2), static_cast<std::int64_t>(r - 1)));
    return scalar(OpCode::div_scalar, matmul(ct.r(), c.r()),
                  Scalar(static_cast<double>(s[d]) - static_cast<double>(correction)));
  });
}

std::pair<Handle, Handle> var_mean(Handle&& a, std::int64_t dim, bool biased) {
  return named(biased ? "var_mean_bias" : "var_mean",
               [&] { return handles::give2(dispatch::var_mean(handles::take(a), dim, biased ? 0 : 1)); });
}

std::pair<Handle, Handle> median(Handle&& a_, std::int64_t dim, const char* op) {
  H a(a_);
  a_ = Handle{};
  const Shape s = a.shape();
  const std::size_t d = rdim_of(op, dim, s.rank());
  if (s[d] == 0)
    throw ShapeError(std::string("[") + op + "] expected a non-empty dim; got shape " + s.to_string() + " along dim " +
                     std::to_string(d));
  return named(op, [&] {
    auto [v, i] = sort_with_indices(a.r(), static_cast<std::int64_t>(d), false);
    const H vs(v), is(i);
    const auto m = static_cast<std::int64_t>((s[d] - 1) / 2);
    H mv = slice_dim(vs, d, Slice::index(m)), mi = slice_dim(is, d, Slice::index(m));
    return std::pair<Handle, Handle>(mv.take(), mi.take());
  });
}
}  // namespace tensor::detail
