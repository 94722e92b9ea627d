// dist::GradientSync: the buckets of a module's parameters and the per-step all_reduce of
// their gradients (tensor/distributed.hpp). Public API only, above the op table's collectives.
#include <array>
#include <cstdlib>
#include <string>
#include <type_traits>

#include "tensor/distributed.hpp"
#include "tensor/gradients.hpp"
#include "tensor/module.hpp"

namespace tensor::dist {
namespace {

// Calls f(std::integral_constant<std::size_t, D>) for a parameter's run-time rank D (1-5).
template <class F>
void with_rank(const ParamRef& p, F&& f) {
  switch (p.slot.rank) {
    case 1: return f(std::integral_constant<std::size_t, 1>{});
    case 2: return f(std::integral_constant<std::size_t, 2>{});
    case 3: return f(std::integral_constant<std::size_t, 3>{});
    case 4: return f(std::integral_constant<std::size_t, 4>{});
    case 5: return f(std::integral_constant<std::size_t, 5>{});
    default:
      throw ShapeError("[GradientSync] expected parameters of rank 1 to 5; got " + p.name + " of rank " + std::to_string(p.slot.rank));
  }
}

std::size_t bucket_cap_from_env() {
  const char* v = std::getenv("TENSOR_DIST_BUCKET_MB");
  if (!v || !*v) return std::size_t{25} << 20;
  char* end = nullptr;
  const double mb = std::strtod(v, &end);
  if (end == v || *end != '\0' || !(mb > 0) || mb > 1e6)
    throw Error(std::string("[GradientSync] TENSOR_DIST_BUCKET_MB expected a positive number of MiB; got '") + v + "'");
  return static_cast<std::size_t>(mb * 1048576.0);
}

template <std::size_t D>
std::array<std::int64_t, D> dims_of(const Shape& s) {
  std::array<std::int64_t, D> d{};
  for (std::size_t i = 0; i < D; ++i) d[i] = static_cast<std::int64_t>(s[i]);
  return d;
}

}  // namespace

GradientSync::GradientSync(Module& module, GradientSyncOptions o)
    : module_(&module), op_(o.op), cap_(o.bucket_bytes ? o.bucket_bytes : bucket_cap_from_env()) {
  if (op_ != ReduceOp::Sum && op_ != ReduceOp::Mean)
    throw Error("[GradientSync] expected ReduceOp Sum or Mean for gradients; got Max or Min");
  std::vector<ParamRef> params = module.named_parameters();
  params_ = params.size();
  // Reverse visit order: the last layers' gradients are final first in backward.
  std::size_t bytes = 0, cap = o.first_bucket_bytes ? o.first_bucket_bytes : cap_;
  DType dtype{};
  for (std::size_t k = params.size(); k-- > 0;) {
    const ParamRef& p = params[k];
    const std::size_t b = p.num_elements() * dtype_size(p.dtype());
    const bool fits = !buckets_.empty() && p.dtype() == dtype && bytes + b <= cap;
    if (!fits) {
      if (!buckets_.empty()) cap = cap_;  // the first bucket is closed: the others take the full size
      buckets_.emplace_back();
      names_.emplace_back();
      bytes = 0;
      dtype = p.dtype();
    }
    buckets_.back().push_back(k);
    names_.back().push_back(p.name);
    bytes += b;
  }
  if (!o.broadcast || world_size() == 1) return;
  // Rank 0's values everywhere, in visit order (the same calls on every rank).
  for (ParamRef& p : module.named_tensors())
    with_rank(p, [&](auto rank) {
      constexpr std::size_t D = decltype(rank)::value;
      Tensor<D>& t = p.get<D>();
      const bool tracked = t.is_require_grad();
      Tensor<D> v = broadcast(tracked ? t.detach() : t, 0);
      t = tracked ? v.require_grad() : v;
    });
}

void GradientSync::sync(Gradients& grads) {
  std::vector<ParamRef> params = module_->named_parameters();
  if (params.size() != params_)
    throw ShapeError("[GradientSync] the module's parameters changed; expected " + std::to_string(params_) + "; got " +
                     std::to_string(params.size()));
  if (world_size() == 1) return;
  for (const std::vector<std::size_t>& bucket : buckets_) {
    std::vector<Tensor<1>> flat;
    flat.reserve(bucket.size());
    for (std::size_t k : bucket)
      with_rank(params[k], [&](auto rank) {
        constexpr std::size_t D = decltype(rank)::value;
        const Tensor<D>& t = params[k].get<D>();
        const std::optional<Tensor<D>> g = t.grad(grads);
        const auto n = static_cast<std::int64_t>(t.shape().num_elements());
        flat.push_back(g ? g->template reshape<1>(std::array<std::int64_t, 1>{n})
                         : Tensor<1>::zeros(Shape{t.shape().num_elements()}, t.device().inner(), t.dtype()));
      });
    // The flat bucket is held by this call alone (its handle goes straight to the
    // collective), so the CPU reduces it in place, in MPI's buffer-passing call.
    std::vector<detail::Handle> parts;
    parts.reserve(flat.size());
    for (Tensor<1>& f : flat) parts.push_back(detail::copy(f));
    flat.clear();
    const Tensor<1> reduced(detail::dist_collective(detail::DistOp::all_reduce, detail::cat(std::move(parts), 0), static_cast<int>(op_)));
    std::int64_t at = 0;
    for (std::size_t k : bucket)
      with_rank(params[k], [&](auto rank) {
        constexpr std::size_t D = decltype(rank)::value;
        const Tensor<D>& t = params[k].get<D>();
        const auto n = static_cast<std::int64_t>(t.shape().num_elements());
        t.grad_replace(grads, reduced.slice({Slice::range(at, at + n)}).template reshape<D>(dims_of<D>(t.shape())));
        at += n;
      });
  }
}

}  // namespace tensor::dist
