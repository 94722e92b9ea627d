// The communicator interface under tensor::dist: host-staged collectives over TensorData,
// with the null (size 1), local (threads of one process) and MPI (mpi_communicator.cpp, the
// `mpi` Meson feature) implementations.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "tensor/data.hpp"
#include "tensor/distributed.hpp"

namespace tensor::dist::internal {

// Which call a rank is making: the public op's name and this rank's sequence number of it
// (1, 2, ... per communicator), for the watchdog's and the cross-rank check's messages.
struct Call {
  const char* op;
  std::uint64_t seq;
};

// One rank's end of a group. Every method blocks until all ranks made the same call; the
// data is host bytes, row-major, with a dtype the host reduction handles (not f16/bf16 or
// bool: the front end widens those). Every rank passes equal shapes and dtypes; the local
// implementation checks that and throws ShapeError/DTypeError naming the rank that differs.
class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // The next sequence number of a collective on this rank (atomic: the process group's
  // communicator is shared by every thread outside a LocalGroup).
  std::uint64_t next_seq() { return seq_.fetch_add(1, std::memory_order_relaxed) + 1; }

  virtual TensorData all_reduce(TensorData in, ReduceOp op, const Call& c) = 0;
  // all_reduce of `n` contiguous host elements of `dtype` (one the host reduction handles)
  // read from `src` and written to `dst` (src == dst: in place): the CPU backend's zero-copy
  // path. This default goes through all_reduce (one copy in, one out); the MPI communicator
  // hands the two buffers to MPI_Allreduce itself.
  virtual void all_reduce_buffer(const std::byte* src, std::byte* dst, std::size_t n, DType dtype, ReduceOp op, const Call& c);
  virtual TensorData broadcast(TensorData in, int root, const Call& c) = 0;
  // Shape [size * d0, ...]: the ranks' inputs in rank order.
  virtual TensorData all_gather(TensorData in, const Call& c) = 0;
  // Shape [d0 / size, ...]: block rank() of all_reduce(in, op); size divides d0 (checked before).
  virtual TensorData reduce_scatter(TensorData in, ReduceOp op, const Call& c) = 0;
  virtual void barrier(const Call& c) = 0;

  // What the caller is about to do, before staging (the dtype as the caller's tensor has it,
  // before f16/bf16 widening; barrier: dtype F32, empty shape). The MPI communicator compares
  // it across ranks when TENSOR_DIST_CHECK=1 (the local one compares its slots always);
  // ShapeError / DTypeError / ExecutionError name the first rank that differs.
  virtual void check(const Call& c, int what, int arg, DType dtype, const Shape& shape) {
    (void)c, (void)what, (void)arg, (void)dtype, (void)shape;
  }
  // The `distributed:` line of `tensorctl info` for this communicator.
  virtual std::string describe() const = 0;
  // Whether a second thread (GradientSync's communication thread) may make the calls, one
  // at a time (MPI: MPI_THREAD_SERIALIZED or more provided).
  virtual bool threads_ok() const { return true; }

 private:
  std::atomic<std::uint64_t> seq_{0};
};

// The factory behind init(): the process group's communicator. Under a launcher
// (OMPI_COMM_WORLD_SIZE set, or PMI_SIZE > 1) the MPI one when the `mpi` feature is built,
// else DeviceError (the mpirun guard); without a launcher the null one (the singleton group).
std::unique_ptr<Communicator> make_world();

// mpi_communicator.cpp: MPI_Init_thread (unless the program initialised MPI itself), a dup of
// MPI_COMM_WORLD; MPI_Finalize at exit when this made the MPI_Init call. In a build without
// the `mpi` feature (mpi_absent.cpp): nullptr.
std::unique_ptr<Communicator> make_mpi_world();
// "Open MPI 4.1.4": the MPI library's name and version (callable before MPI_Init); "" without
// the `mpi` feature.
std::string mpi_library_version();
// The bench's reference (tensorctl bench --only dist): a plain blocking
// MPI_Allreduce(MPI_IN_PLACE, buf, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD), as a program using
// MPI directly would call it; n <= INT_MAX. False (nothing done) without the `mpi` feature or
// before init() made the MPI group.
bool mpi_raw_allreduce_sum_f32(float* buf, std::size_t n);

// The collectives as the op table's rows see them (dispatch/defaults/distributed.cpp,
// backends/cpu/distributed.cpp): `what` is the public DistOp's value (0 all_reduce,
// 1 broadcast, 2 all_gather, 3 reduce_scatter; 4 barrier), `arg` the ReduceOp or the root.
// begin(): takes this rank's next sequence number and runs the TENSOR_DIST_CHECK exchange
// (the dtype and shape as the caller's tensor has them). staged(): the collective on host
// data, f16/bf16 reduced through f32.
Call begin(Communicator& c, int what, int arg, DType dtype, const Shape& shape);
TensorData staged(Communicator& c, const Call& call, int what, int arg, TensorData data);
// The public op names by `what` (barrier: 4).
const char* op_name(int what);

// The communicator this thread's collectives use: the LocalGroup rank it runs as, else the
// process group's (made by init() on first use).
Communicator& current();
// Installs `c` as this thread's communicator for its lifetime (LocalGroup::run).
class ScopedCurrent {
 public:
  explicit ScopedCurrent(Communicator* c);
  ~ScopedCurrent();
  ScopedCurrent(const ScopedCurrent&) = delete;
  ScopedCurrent& operator=(const ScopedCurrent&) = delete;

 private:
  Communicator* prev_;
};

// GradientSync (gradient_sync.cpp): the bucket cap TENSOR_DIST_BUCKET_MB sets (bytes;
// 25 MiB by default) and whether TENSOR_DIST_OVERLAP lets the buckets be reduced while
// backward runs (default on); both throw Error for a malformed value.
std::size_t bucket_cap_from_env();
bool overlap_from_env();
// Waits until every GradientSync communication thread working for `c` has reduced what it
// was handed (a no-op on such a thread): a collective from another thread then comes after
// them on every rank.
void drain_reducers(const Communicator& c);

// Host reduction (host_reduce.cpp): acc[i] = acc[i] op x[i] over n elements of `dtype`
// (Sum and Mean add, wrapping for integers; Max/Min propagate NaN); finish() turns a Mean's
// sum into the mean (a no-op for the other ops).
void reduce_into(std::byte* acc, const std::byte* x, std::size_t n, DType dtype, ReduceOp op);
void finish(std::byte* acc, std::size_t n, DType dtype, ReduceOp op, int size);

}  // namespace tensor::dist::internal
