// tensor::dist's entry points: the process group made by init(), the null communicator (the
// singleton group), the public collectives' crossing into the op table (whose rule validates
// and whose rows run them: dispatch/rules/distributed.cpp, dispatch/defaults/distributed.cpp),
// and the host staging those rows share (into_data -> the communicator -> from_data).
#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <string>

#include "communicator.hpp"
#include "dispatch/dispatch.hpp"
#include "dispatch/graph.hpp"
#include "lib/src/handles.hpp"

namespace tensor::dist {
namespace internal {
namespace {

// The singleton group: every collective returns its input.
class NullCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  TensorData all_reduce(TensorData in, ReduceOp, const Call&) override { return in; }
  TensorData broadcast(TensorData in, int, const Call&) override { return in; }
  TensorData all_gather(TensorData in, const Call&) override { return in; }
  TensorData reduce_scatter(TensorData in, ReduceOp, const Call&) override { return in; }
  void barrier(const Call&) override {}
  std::string describe() const override {
    const std::string mpi = mpi_library_version();
    if (!mpi.empty()) return "mpi (" + mpi + ") built; not launched by mpirun: world 1, rank 0";
    return "not built (meson -Dmpi=enabled with libopenmpi-dev installed); world 1, rank 0";
  }
};

// The process count a launcher announces (Open MPI, then PMI-based launchers); 0 for none.
long launched_size() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"}) {
    const char* v = std::getenv(name);
    if (v && *v) return std::strtol(v, nullptr, 10);
  }
  return 0;
}

std::mutex world_mutex;
std::unique_ptr<Communicator> world_comm;
thread_local Communicator* thread_comm = nullptr;

Communicator& world() {
  std::lock_guard<std::mutex> l(world_mutex);
  if (!world_comm) world_comm = make_world();
  return *world_comm;
}

}  // namespace

std::unique_ptr<Communicator> make_world() {
  // Under mpirun (even -np 1) or another launcher of several processes: MPI, when built.
  if (std::getenv("OMPI_COMM_WORLD_SIZE") || launched_size() > 1)
    if (std::unique_ptr<Communicator> mpi = make_mpi_world()) return mpi;
  // Without MPI, N processes each alone would train N copies silently: refuse.
  if (const long n = launched_size(); n > 1)
    throw DeviceError(DeviceError::Kind::Unavailable,
                      "[init] launched as one of " + std::to_string(n) +
                          " processes (mpirun); expected a build with an MPI communicator; got a build without one");
  return std::make_unique<NullCommunicator>();
}

Communicator& current() { return thread_comm ? *thread_comm : world(); }

ScopedCurrent::ScopedCurrent(Communicator* c) : prev_(thread_comm) { thread_comm = c; }
ScopedCurrent::~ScopedCurrent() { thread_comm = prev_; }

}  // namespace internal

void init() { (void)internal::current(); }
int rank() { return internal::current().rank(); }
int world_size() { return internal::current().size(); }
void barrier() {
  dispatch::graph::refuse("barrier", "is a collective (another process must take part in every replay)");
  internal::Communicator& c = internal::current();
  internal::drain_reducers(c);
  const internal::Call call{"barrier", c.next_seq()};
  c.check(call, 4, 0, DType::F32, Shape());
  c.barrier(call);
}
std::string describe() { return internal::current().describe(); }

}  // namespace tensor::dist

namespace tensor::dist::internal {

const char* op_name(int what) {
  static const char* const kNames[] = {"all_reduce", "broadcast", "all_gather", "reduce_scatter", "barrier"};
  return what >= 0 && what <= 4 ? kNames[what] : "collective";
}

Call begin(Communicator& c, int what, int arg, DType dtype, const Shape& shape) {
  const Call call{op_name(what), c.next_seq()};
  c.check(call, what, what == 2 ? 0 : arg, dtype, shape);
  return call;
}

TensorData staged(Communicator& c, const Call& call, int what, int arg, TensorData data) {
  const DType dt = data.dtype();
  const bool reduces = what == 0 || what == 3;
  const bool widen = reduces && (dt == DType::F16 || dt == DType::BF16);
  if (widen) data = data.convert(DType::F32);
  TensorData out;
  switch (what) {
    case 0: out = c.all_reduce(std::move(data), static_cast<ReduceOp>(arg), call); break;
    case 1: out = c.broadcast(std::move(data), arg, call); break;
    case 2: out = c.all_gather(std::move(data), call); break;
    case 3: out = c.reduce_scatter(std::move(data), static_cast<ReduceOp>(arg), call); break;
    default: throw Error(std::string("[dist] expected a collective (all_reduce, broadcast, all_gather, reduce_scatter); got code ") + std::to_string(what));
  }
  if (widen) out = out.convert(dt);
  return out;
}

void Communicator::all_reduce_buffer(const std::byte* src, std::byte* dst, std::size_t n, DType dtype, ReduceOp op, const Call& c) {
  const std::size_t bytes = n * dtype_size(dtype);
  TensorData in(std::vector<std::byte>(src, src + bytes), Shape{n}, dtype);
  const TensorData out = all_reduce(std::move(in), op, c);
  std::copy(out.bytes().begin(), out.bytes().end(), dst);
}

}  // namespace tensor::dist::internal

namespace tensor::detail {

// The public collectives' crossing of the firewall: the op table's rows (dispatch/table/
// op_table_distributed.def) through the one forward path, so hooks and the profiler see
// them and an autodiff device records their backward.
Handle dist_collective(DistOp op, Handle&& h, int arg) {
  const auto index = static_cast<unsigned>(op);
  if (index > 3) {
    release(h);
    throw Error("[dist] expected a collective (all_reduce, broadcast, all_gather, reduce_scatter); got code " + std::to_string(index));
  }
  static constexpr OpCode kOps[] = {OpCode::all_reduce, OpCode::broadcast, OpCode::all_gather, OpCode::reduce_scatter};
  dispatch::DispatchTensor t = handles::take(h);
  dist::internal::drain_reducers(dist::internal::current());
  return handles::give(dispatch::collective(kOps[index], std::move(t), arg));
}

}  // namespace tensor::detail
