// The statistics methods of tensor.hpp composed from reductions: reductions over several
// dims, mean over dims, var / var_mean, cov, median.
#include <string>
#include <utility>
#include <vector>

#include "lib/src/composite/compose.hpp"

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

Handle var(Handle&& a_, std::int64_t dim, bool biased) {
  H x = take_h(a_);
  const char* op = biased ? "var_bias" : "var";
  const std::size_t d = one_dim(op, x, dim);
  return named(op, [&] {
    const H diff = bin(OpCode::sub, x, rdim(OpCode::mean_dim, x, d));
    const H ss = rdim(OpCode::sum_dim, bin(OpCode::mul, diff, diff), d);
    const double n = static_cast<double>(x.shape()[d]) - (biased ? 0.0 : 1.0);
    return scalar(OpCode::div_scalar, ss.r(), Scalar(n));
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

std::pair<Handle, Handle> var_mean(Handle&& a_, std::int64_t dim, bool biased) {
  H x(a_);
  a_ = Handle{};
  const char* op = biased ? "var_mean_bias" : "var_mean";
  const Shape s = x.shape();
  const std::size_t d = rdim_of(op, dim, s.rank());
  return named(op, [&] {
    H mean = rdim(OpCode::mean_dim, x, d);
    const H diff = bin(OpCode::sub, x, mean);
    const H ss = rdim(OpCode::sum_dim, bin(OpCode::mul, diff, diff), d);
    H var = sc(OpCode::div_scalar, ss, Scalar(static_cast<double>(s[d]) - (biased ? 0.0 : 1.0)));
    return std::pair<Handle, Handle>(var.take(), mean.take());
  });
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
