// tensor::dist's entry points: validation, host staging (into_data, reduce on the host or in
// MPI, from_data on the tensor's device), the process group made by init(), and the null
// communicator (the singleton group).
#include <cstdlib>
#include <mutex>
#include <string>

#include "communicator.hpp"
#include "dispatch/graph.hpp"

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
  const internal::Call call{"barrier", c.next_seq()};
  c.check(call, 4, 0, DType::F32, Shape());
  c.barrier(call);
}
std::string describe() { return internal::current().describe(); }

}  // namespace tensor::dist

namespace tensor::detail {

Handle dist_collective(DistOp op, Handle&& h, int arg) {
  using dist::ReduceOp;
  static const char* const kNames[] = {"all_reduce", "broadcast", "all_gather", "reduce_scatter"};
  const auto index = static_cast<unsigned>(op);
  if (index > 3) throw Error("[dist] expected a collective (all_reduce, broadcast, all_gather, reduce_scatter); got code " + std::to_string(index));
  const char* name = kNames[index];
  const std::string pre = std::string("[") + name + "] ";
  Handle in = std::move(h);
  struct Drop {
    Handle& h;
    ~Drop() { release(h); }
  } drop{in};
  if (in.empty()) throw Error(pre + "use of an empty (moved-from) tensor; expected a tensor; got an empty handle");
  dispatch::graph::refuse(name, "is a collective (another process must take part in every replay)");

  const bool reduces = op == DistOp::all_reduce || op == DistOp::reduce_scatter;
  if (reduces && (arg < 0 || arg > 3))
    throw Error(pre + "expected a ReduceOp (Sum, Mean, Max or Min); got value " + std::to_string(arg));
  const Kind k = kind(in);
  const DType dt = dtype(in);
  if (k != Kind::Float && k != Kind::Int)
    throw DTypeError(pre + "expected a float or int tensor; got dtype " + std::string(dtype_name(dt)));

  dist::internal::Communicator& comm = dist::internal::current();
  const int n = comm.size();
  if (op == DistOp::broadcast && (arg < 0 || arg >= n))
    throw IndexError(pre + "root outside the world; expected 0 <= root < " + std::to_string(n) + "; got " + std::to_string(arg));
  const Shape s = shape(in);
  if (op == DistOp::reduce_scatter && s[0] % static_cast<std::size_t>(n) != 0)
    throw ShapeError(pre + "dim 0 must be divisible by the world size; expected a multiple of " + std::to_string(n) +
                     "; got shape " + s.to_string());
  if (n == 1) return retain(in);

  const Device dev = device(in);
  if (k == Kind::Float && dev.is_autodiff() && is_require_grad(in))
    throw NotImplemented(pre + "collectives have no autodiff rule yet; expected a tensor that does not require grad; got one that does (on " +
                         dev.to_string() + ")");

  const dist::internal::Call call{name, comm.next_seq()};
  comm.check(call, static_cast<int>(index), reduces || op == DistOp::broadcast ? arg : 0, dt, s);
  TensorData data = into_data(retain(in)).get();
  const bool widen = reduces && (dt == DType::F16 || dt == DType::BF16);
  if (widen) data = data.convert(DType::F32);
  TensorData out;
  switch (op) {
    case DistOp::all_reduce: out = comm.all_reduce(std::move(data), static_cast<ReduceOp>(arg), call); break;
    case DistOp::broadcast: out = comm.broadcast(std::move(data), arg, call); break;
    case DistOp::all_gather: out = comm.all_gather(std::move(data), call); break;
    case DistOp::reduce_scatter: out = comm.reduce_scatter(std::move(data), static_cast<ReduceOp>(arg), call); break;
  }
  if (widen) out = out.convert(dt);
  return from_data(std::move(out), dev, k);
}

}  // namespace tensor::detail
