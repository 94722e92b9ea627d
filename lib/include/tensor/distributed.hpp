// Collectives across processes or threads (tensor::dist): all_reduce, broadcast, all_gather,
// reduce_scatter and barrier over a communicator, plus the in-process group for tests.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tensor/tensor.hpp"

namespace tensor {
class Module;
class Gradients;
}  // namespace tensor

namespace tensor::detail {
/// The collective a Tensor call names; `arg` is the ReduceOp or the root (lib/src/distributed/).
enum class DistOp : std::uint8_t { all_reduce, broadcast, all_gather, reduce_scatter };
TENSOR_API Handle dist_collective(DistOp op, Handle&& h, int arg);
}  // namespace tensor::detail

/// Collectives across processes (MPI) or threads (LocalGroup): all_reduce, broadcast,
/// all_gather, reduce_scatter, barrier. Every rank calls the same collectives in the same
/// order with equal shapes and dtypes; all ranks get bitwise-identical results.
namespace tensor::dist {

/// Mean is Sum / world_size (integer division, truncating, on Int tensors).
enum class ReduceOp : std::uint8_t { Sum, Mean, Max, Min };

/// Joins the process group (idempotent). Under mpirun (OMPI_COMM_WORLD_SIZE set) in a build
/// with the `mpi` Meson feature, the group is MPI_COMM_WORLD's processes (MPI_Init_thread
/// asking for MPI_THREAD_MULTIPLE, unless the program initialised MPI itself; MPI_Finalize at
/// exit). Without mpirun the group is the singleton: rank 0 of 1. Throws DeviceError when the
/// environment says this is one of several mpirun processes but the build has no MPI, instead
/// of letting each process train alone. The collectives below call it themselves.
/// TENSOR_DIST_CHECK=1 (MPI group) makes every collective first compare (op, arg, dtype, shape,
/// sequence number) across ranks and throw ShapeError / DTypeError / ExecutionError naming the
/// first rank that differs from rank 0 (one small extra exchange per collective).
TENSOR_API void init();
/// This caller's rank and the group size: a LocalGroup rank's inside LocalGroup::run, the
/// process group's elsewhere.
TENSOR_API int rank();
/// The number of ranks in the caller's group (see rank()).
TENSOR_API int world_size();
/// Blocks until every rank of the group called barrier().
TENSOR_API void barrier();
/// The group in one line (`tensorctl info`): "mpi (Open MPI 4.1.4), world 2, rank 0, thread
/// level MULTIPLE, ...", "mpi (...) built; not launched by mpirun: world 1, rank 0",
/// "not built (...)", or "local (...)" inside a LocalGroup. Calls init().
TENSOR_API std::string describe();

// Contract of every collective: all ranks call the same collectives in the same order, with
// equal shapes and dtypes. Results are new tensors on the input's device; reductions run on
// the host (f16/bf16 through f32): in a LocalGroup in rank order 0, 1, ...; under MPI by
// MPI_Allreduce and friends, whose results are identical on every rank (with two ranks the
// order is also 0, 1). Either way all ranks get bitwise-identical values. World size 1: each call returns its input. A collective waiting longer than
// TENSOR_DIST_TIMEOUT_S seconds (default 300) throws ExecutionError naming the op and its
// sequence number. The collectives are rows of the op table (its distributed section), so
// hooks and the profiler see them; on an autodiff device they have burn's backward (every
// rank's backward then runs the matching collective, in the same order on every rank):
// all_reduce Sum/Mean -> all_reduce of the gradient, broadcast -> the gradients summed on
// the root (zero elsewhere), all_gather <-> reduce_scatter Sum. Max and Min on a tensor that
// requires grad are refused (NotImplemented). On the CPU, all_reduce hands the tensor's
// contiguous buffer to MPI (in place when the call holds it alone), without a host copy.

/// The elementwise reduction of every rank's `t`.
template <std::size_t D, TensorKind K>
  requires Numeric<K>
Tensor<D, K> all_reduce(const Tensor<D, K>& t, ReduceOp op) {
  return Tensor<D, K>(detail::dist_collective(detail::DistOp::all_reduce, detail::copy(t), static_cast<int>(op)));
}
/// The same, giving up `t`: where the call then holds its buffer alone (the CPU), the
/// reduction runs in place, in the buffer MPI is handed, with no result allocation or copy.
template <std::size_t D, TensorKind K>
  requires Numeric<K>
Tensor<D, K> all_reduce(Tensor<D, K>&& t, ReduceOp op) {
  detail::Handle h;
  {
    const Tensor<D, K> own(std::move(t));
    h = detail::copy(own);
  }  // `own` is gone: the handle is the only reference `t` had
  return Tensor<D, K>(detail::dist_collective(detail::DistOp::all_reduce, std::move(h), static_cast<int>(op)));
}
/// Rank `root`'s `t` on every rank; IndexError for a root outside [0, world_size).
template <std::size_t D, TensorKind K>
  requires Numeric<K>
Tensor<D, K> broadcast(const Tensor<D, K>& t, int root) {
  return Tensor<D, K>(detail::dist_collective(detail::DistOp::broadcast, detail::copy(t), root));
}
/// Every rank's `t` concatenated along dim 0 in rank order (dim 0 grows world_size times).
template <std::size_t D, TensorKind K>
  requires Numeric<K>
Tensor<D, K> all_gather(const Tensor<D, K>& t) {
  return Tensor<D, K>(detail::dist_collective(detail::DistOp::all_gather, detail::copy(t), 0));
}
/// all_reduce(t, op), then rank r keeps the r-th of world_size equal blocks of dim 0;
/// ShapeError unless world_size divides dim 0.
template <std::size_t D, TensorKind K>
  requires Numeric<K>
Tensor<D, K> reduce_scatter(const Tensor<D, K>& t, ReduceOp op) {
  return Tensor<D, K>(detail::dist_collective(detail::DistOp::reduce_scatter, detail::copy(t), static_cast<int>(op)));
}

/// Marks a parameter (a tensor that requires grad, on an autodiff device) with `param_id`
/// (burn's set_distributed; 0 removes the mark): backward then reports its gradient to the
/// gradient reducer that owns the id (GradientSync's overlap) as soon as it is final, while
/// the rest of the pass continues. The mark belongs to the graph leaf, so copies of the tensor
/// carry it; ModuleOptimizer::step carries it to the updated parameter. Error for an
/// untracked tensor or one computed from a leaf. GradientSync marks its module's parameters
/// itself with ids it draws; ids nobody owns are ignored.
template <std::size_t D>
const Tensor<D>& set_distributed(const Tensor<D>& t, std::uint64_t param_id) {
  detail::set_distributed(t.handle(), param_id);
  return t;
}
/// The set_distributed mark of `t` (0: none).
template <std::size_t D>
std::uint64_t distributed_id(const Tensor<D>& t) {
  return detail::distributed_id(t.handle());
}
/// True when `t` carries a set_distributed mark.
template <std::size_t D>
bool is_distributed(const Tensor<D>& t) {
  return distributed_id(t) != 0;
}

namespace internal {
struct Reducer;
}  // namespace internal

/// How GradientSync groups and reduces the gradients.
struct GradientSyncOptions {
  ReduceOp op = ReduceOp::Mean;  ///< Mean: the losses are means over the local batches; Sum or Mean only
  std::size_t bucket_bytes = 0;  ///< 0: TENSOR_DIST_BUCKET_MB MiB (a positive number; default 25)
  std::size_t first_bucket_bytes = std::size_t{1} << 20;  ///< the first bucket's cap (1 MiB: the first reduction starts early)
  bool broadcast = true;         ///< broadcast every parameter and buffer from rank 0 at construction
  /// Reduce while backward runs (see GradientSync): 1 on, 0 off, -1 TENSOR_DIST_OVERLAP
  /// (0 turns it off; default on). Off also where MPI gave less than MPI_THREAD_SERIALIZED.
  int overlap = -1;
};
/// Data-parallel training's gradient sync (burn's gradient-sync protocol, with PyTorch DDP's
/// buckets), for a module whose copies on every rank see different batches:
/// \code
///   dist::GradientSync sync(model);            // rank 0's parameters and buffers on every rank
///   auto grads = loss.backward();  sync.sync(grads);  adam.step(lr, model, grads);
/// \endcode
/// The parameters (Module::named_parameters) are grouped once, at construction, into buckets:
/// reverse visit order (roughly the order backward finishes them), one dtype per bucket, the
/// first bucket up to first_bucket_bytes and the others up to bucket_bytes (a larger
/// parameter alone). Each bucket's gradients are flattened into one tensor, reduced by one
/// all_reduce, and the slices written back into `grads`.
///
/// Overlap (on by default with more than one rank): the constructor marks every parameter
/// (set_distributed); backward reports each marked gradient as soon as it is final, and a
/// bucket whose gradients are all in is handed to this GradientSync's communication thread,
/// which all-reduces the buckets one after the other while backward goes on. Buckets are
/// launched strictly in plan order (a later one that fills first waits for the earlier), and
/// a parameter the pass does not reach counts as in from the start (zeros), so every rank
/// makes the same calls with the same contents whatever the thread timing. sync() waits for
/// the outstanding buckets and writes the results back. Without overlap (off, world size 1, a
/// graph that runs collectives in its own backward, or Gradients that did not come from the
/// last marked backward) sync() reduces bucket after bucket itself. Either way the ranks'
/// gradients (hence parameters) stay bitwise identical, and a parameter without a gradient
/// on a rank contributes zeros there (and gets the reduced one). Other collectives called
/// while the thread still reduces wait for it first (the order stays the same on every
/// rank). A rank whose backward throws launches no further bucket, so the others' pending
/// all_reduce fails (LocalGroup) or times out (TENSOR_DIST_TIMEOUT_S) instead of hanging.
class TENSOR_API GradientSync {
 public:
  /// Plans the buckets of `module`'s parameters (the module must outlive this and keep its
  /// parameters' names and shapes) and, with options.broadcast, copies rank 0's parameters
  /// and buffers to every rank (a collective: every rank constructs its GradientSync).
  explicit GradientSync(Module& module, GradientSyncOptions options = {});
  /// Waits for the communication thread's work and stops it.
  ~GradientSync();
  GradientSync(const GradientSync&) = delete;
  GradientSync& operator=(const GradientSync&) = delete;
  GradientSync(GradientSync&&) noexcept = default;  ///< the thread and the marks go with it
  GradientSync& operator=(GradientSync&&) noexcept = default;  ///< the same as the move constructor
  /// After backward: every parameter's gradient in `grads` replaced by its reduction over
  /// the ranks. A collective: every rank calls it once per step. World size 1: no change.
  /// Profiled (TENSOR_PROFILE=1, tensor/profile.hpp) as rows of the gradients' device:
  /// `dist.wait`, the time sync() waited for the reduction (without overlap: all of it),
  /// `dist.step`, the time from one sync() to the next (a training step; the profile prints
  /// dist.wait's share of it), and `dist.bucket`, each bucket's all_reduce on the
  /// communication thread (overlapping backward).
  void sync(Gradients& grads);
  /// The parameter names of each bucket, in the order sync() reduces them.
  const std::vector<std::vector<std::string>>& buckets() const { return names_; }
  /// The cap of every bucket after the first, in bytes.
  std::size_t bucket_bytes() const { return cap_; }
  /// True when the buckets are reduced while backward runs (see above).
  bool overlap() const { return reducer_ != nullptr; }

 private:
  void sync_now(Gradients& grads);

  Module* module_;
  ReduceOp op_;
  std::size_t cap_;
  std::size_t params_ = 0;
  std::vector<std::vector<std::size_t>> buckets_;  ///< indices into named_parameters()
  std::vector<std::vector<std::string>> names_;
  std::shared_ptr<internal::Reducer> reducer_;  ///< the overlap's state and thread (null: no overlap)
  std::int64_t last_sync_ns_ = 0;  ///< when the last sync() returned (steady clock; the profile's dist.step)
};

/// The in-process group: `size` ranks as threads of this process, meeting at a shared
/// rendezvous (for unit tests and single-process multi-device use). run(fn) calls fn(rank) on
/// one new thread per rank, where rank(), world_size() and the collectives use this group, and
/// returns when all returned; if any threw, the others' pending collectives fail promptly
/// (ExecutionError naming the rank) and run rethrows the first exception. A rank that returns
/// while the others wait in a collective makes that collective fail the same way.
/// TENSOR_DIST_TIMEOUT_S is read when the group is made.
class TENSOR_API LocalGroup {
 public:
  explicit LocalGroup(int size);  ///< IndexError unless 1 <= size <= 1024
  ~LocalGroup();
  LocalGroup(const LocalGroup&) = delete;
  LocalGroup& operator=(const LocalGroup&) = delete;

  /// The number of ranks.
  int size() const { return size_; }
  /// Calls `fn(rank)` on one new thread per rank and returns when all returned; rethrows the
  /// first exception a rank threw (the others' pending collectives fail with ExecutionError).
  void run(const std::function<void(int rank)>& fn);

 private:
  int size_;
  double timeout_s_;
};

}  // namespace tensor::dist
