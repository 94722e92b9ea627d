// Forwarders: the collectives (the op table's distributed section). Each validates its
// arguments against the calling thread's group, states the output metadata and runs the
// backend entry through the one invocation path (dispatch/forward.hpp), so hooks, the
// profiler and autodiff see a collective like any other op.
#include "dispatch/forward.hpp"
#include "dispatch/graph.hpp"
#include "lib/src/distributed/communicator.hpp"

namespace tensor::dispatch {
using namespace fwd;

using T = DispatchTensor;
using I = std::int64_t;

// Collective: arg is the ReduceOp (all_reduce, reduce_scatter), the root (broadcast) or 0
// (all_gather). The output is the input's shape, with dim 0 times the world size
// (all_gather) or divided by it (reduce_scatter).
template <> struct fwd::Rule<Family::Collective> : OnFirst {
  struct Plan { Shape out; int size; };
  static Plan check(OpCode op, const T& a, const I& arg) {
    graph::refuse(op_name(op), "is a collective (another process must take part in every replay)");
    if (!a.prim)
      throw Error(fmt::format("[{}] use of an empty (moved-from) tensor; expected a tensor; got an empty handle", op_name(op)));
    const bool reduces = op == OpCode::all_reduce || op == OpCode::reduce_scatter;
    if (reduces && (arg < 0 || arg > 3))
      throw Error(fmt::format("[{}] expected a ReduceOp (Sum, Mean, Max or Min); got value {}", op_name(op), arg));
    if (a.kind != Kind::Float && a.kind != Kind::Int)
      throw DTypeError(fmt::format("[{}] expected a float or int tensor; got dtype {}", op_name(op), dtype_name(a.dtype())));
    check_first(op, a);
    const int n = dist::internal::current().size();
    const Shape& s = a.shape();
    if (op == OpCode::broadcast && (arg < 0 || arg >= n))
      throw IndexError(fmt::format("[{}] root outside the world; expected 0 <= root < {}; got {}", op_name(op), n, arg));
    if (op == OpCode::reduce_scatter && (s.rank() == 0 || s[0] % static_cast<std::size_t>(n) != 0))
      throw ShapeError(fmt::format("[{}] dim 0 must be divisible by the world size; expected a multiple of {}; got shape {}",
                                   op_name(op), n, s.to_string()));
    // Max and Min have no gradient rule (which rank's element won is not a derivative
    // anyone agrees on; burn has Sum and Mean only): refused on a tracked tensor.
    if (reduces && arg >= 2 && n > 1 && a.kind == Kind::Float && is_autodiff_device(a.device) && is_require_grad(a))
      throw NotImplemented(fmt::format("[{}] Max and Min have no autodiff rule; expected Sum or Mean on a tensor that requires "
                                       "grad, or a detached tensor; got {} on {}",
                                       op_name(op), arg == 2 ? "Max" : "Min", device_string(a.device)));
    Shape out = s;
    if (n > 1 && op == OpCode::all_gather) out[0] *= static_cast<std::size_t>(n);
    if (n > 1 && op == OpCode::reduce_scatter) out[0] /= static_cast<std::size_t>(n);
    if (n > 1) check_alloc_shape(op, out, a.dtype());
    return {std::move(out), n};
  }
  static OutMeta meta(OpCode, const Plan& p, const T& a, const I&) { return {p.out, a.dtype(), a.kind}; }
  static OpAttrs attrs(OpCode, const Plan& p, const T&, const I& arg) { return with_ints(arg, p.size); }
  template <class Entry>
  [[gnu::always_inline]] static T run(OpCode op, Entry entry, const Plan& p, T& a, const I& arg) {
    if (p.size == 1) return std::move(a);  // the singleton group: every collective returns its input
    const Kind k = a.kind;
    return {entry(op)(a.take(), arg), k};
  }
};

DispatchTensor collective(OpCode op, DispatchTensor a, std::int64_t arg) { return forward<Family::Collective>(op, a, arg); }

}  // namespace tensor::dispatch
