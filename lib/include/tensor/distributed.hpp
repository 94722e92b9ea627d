// Collectives across processes or threads (tensor::dist): all_reduce, broadcast, all_gather,
// reduce_scatter and barrier over a communicator, plus the in-process group for tests.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "tensor/tensor.hpp"

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
// sequence number. Tensors that require grad are refused (NotImplemented) in a group of
// several ranks until collectives have an autodiff rule.

/// The elementwise reduction of every rank's `t`.
template <std::size_t D, TensorKind K>
  requires Numeric<K>
Tensor<D, K> all_reduce(const Tensor<D, K>& t, ReduceOp op) {
  return Tensor<D, K>(detail::dist_collective(detail::DistOp::all_reduce, detail::copy(t), static_cast<int>(op)));
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
