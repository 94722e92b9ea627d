// The MPI communicator: tensor::dist's process group under mpirun, over a dup of
// MPI_COMM_WORLD (library traffic never matches the program's own MPI traffic). The only
// file that includes <mpi.h>. Every wait for the other ranks is a non-blocking MPI call polled
// with MPI_Test until a deadline (TENSOR_DIST_TIMEOUT_S), so a rank whose peers never arrive
// throws ExecutionError naming the op and its sequence number instead of hanging in a
// blocking call (large payloads: see exchange()).
// Reductions run in MPI on the host-staged bytes (in place for all_reduce); all ranks receive
// identical results (MPI_Allreduce's guarantee; with two ranks the order is rank 0 then 1).
#define OMPI_SKIP_MPICXX 1  // the C API only: no libmpi_cxx, no deprecated C++ bindings
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "communicator.hpp"

namespace tensor::dist::internal {
namespace {

double env_timeout_s() {
  const char* env = std::getenv("TENSOR_DIST_TIMEOUT_S");
  if (!env || !*env) return 300.0;
  char* end = nullptr;
  const double v = std::strtod(env, &end);
  if (end == env || *end != '\0' || !(v > 0) || v > 1e9)
    throw Error(std::string("[init] TENSOR_DIST_TIMEOUT_S expected a positive number of seconds; got '") + env + "'");
  return v;
}

bool env_check() {
  const char* env = std::getenv("TENSOR_DIST_CHECK");
  if (!env || !*env || std::string(env) == "0") return false;
  if (std::string(env) == "1") return true;
  throw Error(std::string("[init] TENSOR_DIST_CHECK expected 0 or 1; got '") + env + "'");
}

const char* thread_level_name(int level) {
  if (level == MPI_THREAD_MULTIPLE) return "MULTIPLE";
  if (level == MPI_THREAD_SERIALIZED) return "SERIALIZED";
  if (level == MPI_THREAD_FUNNELED) return "FUNNELED";
  return "SINGLE";
}

std::string mpi_error_text(int rc) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) return "MPI error code " + std::to_string(rc);
  return std::string(text, static_cast<std::size_t>(len));
}

// The MPI type of a host-reduced dtype (the front end widened f16/bf16 to f32 already).
MPI_Datatype mpi_type(DType dt, const char* op) {
  switch (dt) {
    case DType::F64: return MPI_DOUBLE;
    case DType::F32: return MPI_FLOAT;
    case DType::I64: return MPI_INT64_T;
    case DType::I32: return MPI_INT32_T;
    case DType::I16: return MPI_INT16_T;
    case DType::I8: return MPI_INT8_T;
    case DType::U64: return MPI_UINT64_T;
    case DType::U32: return MPI_UINT32_T;
    case DType::U16: return MPI_UINT16_T;
    case DType::U8: return MPI_UINT8_T;
    default: break;
  }
  throw DTypeError(std::string("[") + op + "] expected a dtype MPI reduces (f32, f64 or an int); got " + std::string(dtype_name(dt)));
}

// Float Max/Min as the host reduction defines them (NaN propagates, in any rank order);
// MPI_MAX/MPI_MIN would drop a NaN met as the first operand. Commutative.
template <ReduceOp Op>
void float_minmax(void* in, void* inout, int* len, MPI_Datatype* type) {
  const DType dt = *type == MPI_DOUBLE ? DType::F64 : DType::F32;
  reduce_into(static_cast<std::byte*>(inout), static_cast<const std::byte*>(in), static_cast<std::size_t>(*len), dt, Op);
}

// The process count a launcher announces (Open MPI's mpirun, else a PMI launcher); 0 for none.
long launched_size() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"}) {
    const char* v = std::getenv(name);
    if (v && *v) return std::strtol(v, nullptr, 10);
  }
  return 0;
}

// Each call's descriptor under TENSOR_DIST_CHECK: what, arg, dtype, seq, ndim, dims (zero-padded).
constexpr int kDescLen = 5 + static_cast<int>(kMaxRank);

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator() : timeout_s_(env_timeout_s()), check_(env_check()) {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (initialized) {
      MPI_Query_thread(&provided_);
    } else {
      const int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided_);
      if (rc != MPI_SUCCESS) throw DeviceError(DeviceError::Kind::Unavailable, "[init] MPI_Init_thread failed: " + mpi_error_text(rc));
      // Finalize once, at exit, before the process group (a static) is destroyed.
      std::atexit([] {
        int finalized = 0;
        MPI_Finalized(&finalized);
        if (!finalized) MPI_Finalize();
      });
    }
    if (const int rc = MPI_Comm_dup(MPI_COMM_WORLD, &comm_); rc != MPI_SUCCESS)
      throw DeviceError(DeviceError::Kind::Unavailable, "[init] MPI_Comm_dup(MPI_COMM_WORLD) failed: " + mpi_error_text(rc));
    // Errors come back as codes (typed exceptions naming the op and rank), not an abort.
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    // The launcher's count must be MPI's: a process that inherited OMPI_COMM_WORLD_SIZE
    // without being started by mpirun initialises as a singleton and would run alone.
    if (const long launched = launched_size(); launched > 0 && launched != size_) {
      MPI_Comm_free(&comm_);
      throw DeviceError(DeviceError::Kind::Unavailable,
                        "[init] launched as one of " + std::to_string(launched) +
                            " processes (OMPI_COMM_WORLD_SIZE / PMI_SIZE); expected MPI_COMM_WORLD to hold them; got " + std::to_string(size_) +
                            " (was this process started by mpirun?)");
    }
    MPI_Op_create(&float_minmax<ReduceOp::Max>, 1, &float_max_);
    MPI_Op_create(&float_minmax<ReduceOp::Min>, 1, &float_min_);
  }

  // At exit (the process group is a static): MPI was finalized already when this made the
  // MPI_Init call (the atexit handler); a program that initialised MPI itself gets the dup
  // and the ops freed. A collective abandoned by the watchdog may still be pending; Open MPI
  // 4.1 finalizes regardless (measured), so the process still exits cleanly.
  ~MpiCommunicator() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized) return;
    MPI_Op_free(&float_max_);
    MPI_Op_free(&float_min_);
    MPI_Comm_free(&comm_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  std::string describe() const override {
    return "mpi (" + mpi_library_version() + "), world " + std::to_string(size_) + ", rank " + std::to_string(rank_) +
           ", thread level " + thread_level_name(provided_) + ", overlap " + (threads_ok() && overlap_from_env() ? "on" : "off") +
           ", bucket " + fmt_mib(bucket_cap_from_env()) + (check_ ? ", TENSOR_DIST_CHECK on" : "") +
           ", timeout " + fmt_seconds(timeout_s_);
  }

  bool threads_ok() const override { return provided_ >= MPI_THREAD_SERIALIZED; }

  void check(const Call& c, int what, int arg, DType dtype, const Shape& shape) override {
    if (!check_) return;
    std::lock_guard<std::mutex> l(m_);
    auto mine = std::make_shared<std::array<std::int64_t, kDescLen>>();
    (*mine)[0] = what;
    (*mine)[1] = arg;
    (*mine)[2] = static_cast<std::int64_t>(dtype);
    (*mine)[3] = static_cast<std::int64_t>(c.seq);
    (*mine)[4] = static_cast<std::int64_t>(shape.rank());
    for (std::size_t d = 0; d < shape.rank(); ++d) (*mine)[5 + d] = static_cast<std::int64_t>(shape[d]);
    auto all = std::make_shared<std::vector<std::int64_t>>(static_cast<std::size_t>(kDescLen * size_));
    run(c, "MPI_Iallgather (TENSOR_DIST_CHECK)", [&](MPI_Request* req) {
      return MPI_Iallgather(mine->data(), kDescLen, MPI_INT64_T, all->data(), kDescLen, MPI_INT64_T, comm_, req);
    }, [&] { keep_.push_back(mine); keep_.push_back(all); });
    checked_seq_ = c.seq;
    auto at = [&](int r, int i) { return (*all)[static_cast<std::size_t>(r * kDescLen + i)]; };
    for (int r = 1; r < size_; ++r) {
      bool same = true;
      for (int i = 0; i < kDescLen; ++i) same = same && at(r, i) == at(0, i);
      if (same) continue;
      auto desc = [&](int q) {
        static const char* const kNames[] = {"all_reduce", "broadcast", "all_gather", "reduce_scatter", "barrier"};
        const auto w = static_cast<std::size_t>(at(q, 0));
        std::string d = w < 5 ? kNames[w] : "collective " + std::to_string(w);
        d += " #" + std::to_string(at(q, 3));
        if (w == 4) return d;
        std::vector<std::size_t> dims;
        for (std::int64_t k = 0; k < at(q, 4) && k < static_cast<std::int64_t>(kMaxRank); ++k) dims.push_back(static_cast<std::size_t>(at(q, 5 + static_cast<int>(k))));
        return d + "(arg " + std::to_string(at(q, 1)) + ", " + std::string(dtype_name(static_cast<DType>(at(q, 2)))) + " " +
               Shape(dims).to_string() + ")";
      };
      const std::string msg = std::string("[") + c.op + "] TENSOR_DIST_CHECK: ranks disagree; expected every rank to call " + desc(0) +
                              " as rank 0 did; got " + desc(r) + " on rank " + std::to_string(r) + " of " + std::to_string(size_);
      const bool same_call = at(r, 0) == at(0, 0) && at(r, 1) == at(0, 1) && at(r, 3) == at(0, 3);
      if (!same_call) throw ExecutionError(msg);
      if (at(r, 2) != at(0, 2)) throw DTypeError(msg);
      throw ShapeError(msg);
    }
  }

  TensorData all_reduce(TensorData in, ReduceOp op, const Call& c) override {
    std::lock_guard<std::mutex> l(m_);
    const DType dt = in.dtype();
    const MPI_Datatype type = mpi_type(dt, c.op);
    const MPI_Op mop = mpi_op(op, dt);
    auto buf = std::make_shared<TensorData>(std::move(in));
    const std::size_t w = dtype_size(dt);
    const std::size_t n = buf->num_elements();
    // MPI 3.1 counts are int: chunks of at most INT_MAX elements, one collective each.
    for (std::size_t first = 0; first < n || first == 0; first += static_cast<std::size_t>(INT_MAX)) {
      const int count = static_cast<int>(std::min<std::size_t>(n - first, static_cast<std::size_t>(INT_MAX)));
      std::byte* p = buf->bytes().data() + first * w;
      exchange(c, static_cast<std::size_t>(count) * w, "MPI_Iallreduce",
               [&](MPI_Request* req) { return MPI_Iallreduce(MPI_IN_PLACE, p, count, type, mop, comm_, req); },
               "MPI_Allreduce", [&] { return MPI_Allreduce(MPI_IN_PLACE, p, count, type, mop, comm_); }, [&] { keep_.push_back(buf); });
      if (n == 0) break;
    }
    finish(buf->bytes().data(), n, dt, op, size_);
    return std::move(*buf);
  }

  // The CPU's zero-copy path: the caller's buffers go to MPI. Only through the blocking call
  // (payloads from kBlockingFrom up): a non-blocking one abandoned by the watchdog would keep
  // using buffers the caller frees, so small payloads take the staged all_reduce above.
  void all_reduce_buffer(const std::byte* src, std::byte* dst, std::size_t n, DType dt, ReduceOp op, const Call& c) override {
    const std::size_t w = dtype_size(dt);
    if (n * w < kBlockingFrom) return Communicator::all_reduce_buffer(src, dst, n, dt, op, c);
    std::lock_guard<std::mutex> l(m_);
    if (!failure_.empty()) throw ExecutionError(where(c) + " cannot run: the group failed earlier (" + failure_ + ")");
    const MPI_Datatype type = mpi_type(dt, c.op);
    const MPI_Op mop = mpi_op(op, dt);
    if (!(check_ && checked_seq_ == c.seq))
      run(c, "MPI_Ibarrier (arrival)", [&](MPI_Request* req) { return MPI_Ibarrier(comm_, req); }, [] {});
    for (std::size_t first = 0; first < n; first += static_cast<std::size_t>(INT_MAX)) {
      const int count = static_cast<int>(std::min<std::size_t>(n - first, static_cast<std::size_t>(INT_MAX)));
      const void* from = src == dst ? MPI_IN_PLACE : static_cast<const void*>(src + first * w);
      if (const int rc = MPI_Allreduce(from, dst + first * w, count, type, mop, comm_); rc != MPI_SUCCESS)
        throw ExecutionError(where(c) + ": MPI_Allreduce failed: " + mpi_error_text(rc));
    }
    finish(dst, n, dt, op, size_);
  }

  TensorData broadcast(TensorData in, int root, const Call& c) override {
    std::lock_guard<std::mutex> l(m_);
    auto buf = std::make_shared<TensorData>(std::move(in));
    const std::size_t n = buf->bytes().size();
    for (std::size_t first = 0; first < n || first == 0; first += static_cast<std::size_t>(INT_MAX)) {
      const int count = static_cast<int>(std::min<std::size_t>(n - first, static_cast<std::size_t>(INT_MAX)));
      std::byte* p = buf->bytes().data() + first;
      exchange(c, static_cast<std::size_t>(count), "MPI_Ibcast", [&](MPI_Request* req) { return MPI_Ibcast(p, count, MPI_BYTE, root, comm_, req); },
               "MPI_Bcast", [&] { return MPI_Bcast(p, count, MPI_BYTE, root, comm_); }, [&] { keep_.push_back(buf); });
      if (n == 0) break;
    }
    return std::move(*buf);
  }

  TensorData all_gather(TensorData in, const Call& c) override {
    std::lock_guard<std::mutex> l(m_);
    const std::size_t each = in.bytes().size();
    if (each > static_cast<std::size_t>(INT_MAX))
      throw ShapeError(std::string("[") + c.op + "] expected at most " + std::to_string(INT_MAX) +
                       " bytes per rank (MPI 3.1 counts); got " + std::to_string(each));
    auto src = std::make_shared<TensorData>(std::move(in));
    auto out = std::make_shared<std::vector<std::byte>>(each * static_cast<std::size_t>(size_));
    const int ne = static_cast<int>(each);
    exchange(c, each * static_cast<std::size_t>(size_), "MPI_Iallgather", [&](MPI_Request* req) {
      return MPI_Iallgather(src->bytes().data(), ne, MPI_BYTE, out->data(), ne, MPI_BYTE, comm_, req);
    }, "MPI_Allgather", [&] { return MPI_Allgather(src->bytes().data(), ne, MPI_BYTE, out->data(), ne, MPI_BYTE, comm_); },
    [&] { keep_.push_back(src); keep_.push_back(out); });
    Shape s = src->shape();
    s[0] *= static_cast<std::size_t>(size_);
    return TensorData(std::move(*out), s, src->dtype());
  }

  TensorData reduce_scatter(TensorData in, ReduceOp op, const Call& c) override {
    std::lock_guard<std::mutex> l(m_);
    const DType dt = in.dtype();
    const MPI_Datatype type = mpi_type(dt, c.op);
    const MPI_Op mop = mpi_op(op, dt);
    Shape s = in.shape();
    s[0] /= static_cast<std::size_t>(size_);
    const std::size_t count = s.num_elements();
    if (count > static_cast<std::size_t>(INT_MAX))
      throw ShapeError(std::string("[") + c.op + "] expected at most " + std::to_string(INT_MAX) +
                       " elements per rank's block (MPI 3.1 counts); got " + std::to_string(count));
    auto src = std::make_shared<TensorData>(std::move(in));
    auto out = std::make_shared<std::vector<std::byte>>(count * dtype_size(dt));
    const int nc = static_cast<int>(count);
    exchange(c, src->bytes().size(), "MPI_Ireduce_scatter_block", [&](MPI_Request* req) {
      return MPI_Ireduce_scatter_block(src->bytes().data(), out->data(), nc, type, mop, comm_, req);
    }, "MPI_Reduce_scatter_block", [&] { return MPI_Reduce_scatter_block(src->bytes().data(), out->data(), nc, type, mop, comm_); },
    [&] { keep_.push_back(src); keep_.push_back(out); });
    finish(out->data(), count, dt, op, size_);
    return TensorData(std::move(*out), s, dt);
  }

  void barrier(const Call& c) override {
    std::lock_guard<std::mutex> l(m_);
    run(c, "MPI_Ibarrier", [&](MPI_Request* req) { return MPI_Ibarrier(comm_, req); }, [] {});
  }

 private:
  static std::string fmt_seconds(double s) {
    std::string t = std::to_string(s);
    t.erase(t.find_last_not_of('0') + 1);
    if (!t.empty() && t.back() == '.') t.pop_back();
    return t + " s";
  }

  static std::string fmt_mib(std::size_t bytes) {
    std::string t = std::to_string(static_cast<double>(bytes) / 1048576.0);
    t.erase(t.find_last_not_of('0') + 1);
    if (!t.empty() && t.back() == '.') t.pop_back();
    return t + " MiB";
  }

  MPI_Op mpi_op(ReduceOp op, DType dt) const {
    const bool fl = dt == DType::F32 || dt == DType::F64;
    switch (op) {
      case ReduceOp::Sum:
      case ReduceOp::Mean: return MPI_SUM;
      case ReduceOp::Max: return fl ? float_max_ : MPI_MAX;
      case ReduceOp::Min: return fl ? float_min_ : MPI_MIN;
    }
    return MPI_SUM;
  }

  std::string where(const Call& c) const {
    return std::string("[") + c.op + "] collective #" + std::to_string(c.seq) + " on rank " + std::to_string(rank_) + " of " +
           std::to_string(size_);
  }

  // One collective moving `bytes`. Below kBlockingFrom: the non-blocking call, polled (run).
  // From there up Open MPI's non-blocking collectives (libnbc) take 1.5-2x the time of the
  // blocking ones (measured: 64 MiB all_reduce over vader), so the ranks first meet in a
  // polled MPI_Ibarrier (or the TENSOR_DIST_CHECK exchange of this very call), which the
  // watchdog bounds, and then make the blocking call: once every rank has arrived it completes
  // (a rank dying inside it is mpirun's to handle: it aborts the job).
  static constexpr std::size_t kBlockingFrom = std::size_t{64} << 10;
  template <class Start, class Blocking, class Keep>
  void exchange(const Call& c, std::size_t bytes, const char* nb_call, Start start, const char* b_call, Blocking blocking, Keep keep) {
    if (bytes < kBlockingFrom) return run(c, nb_call, start, keep);
    if (!(check_ && checked_seq_ == c.seq))
      run(c, "MPI_Ibarrier (arrival)", [&](MPI_Request* req) { return MPI_Ibarrier(comm_, req); }, [] {});
    if (const int rc = blocking(); rc != MPI_SUCCESS) throw ExecutionError(where(c) + ": " + b_call + " failed: " + mpi_error_text(rc));
  }

  // Starts one non-blocking MPI call and polls it to completion or the deadline. On a timeout
  // the request stays pending (MPI cannot cancel a collective): keep() parks the buffers it
  // uses for the process's lifetime, and the communicator refuses every later collective,
  // whose messages could otherwise match the abandoned one.
  template <class Start, class Keep>
  void run(const Call& c, const char* mpi_call, Start start, Keep keep) {
    if (!failure_.empty()) throw ExecutionError(where(c) + " cannot run: the group failed earlier (" + failure_ + ")");
    MPI_Request req = MPI_REQUEST_NULL;
    if (const int rc = start(&req); rc != MPI_SUCCESS)
      throw ExecutionError(where(c) + ": " + mpi_call + " failed: " + mpi_error_text(rc));
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s_);
    for (unsigned spin = 0;; ++spin) {
      int done = 0;
      if (const int rc = MPI_Test(&req, &done, MPI_STATUS_IGNORE); rc != MPI_SUCCESS)
        throw ExecutionError(where(c) + ": " + mpi_call + " failed: " + mpi_error_text(rc));
      if (done) return;
      // Spin like a blocking MPI call does (MPI_Test drives the progress engine), reading the
      // clock every 256 polls. No sched_yield: on a loaded machine it gives the core away for
      // a whole time slice per poll (1 MiB all_reduce: 7.5 ms instead of 0.5 ms, measured).
      if ((spin & 255u) == 255u) {
        if (std::chrono::steady_clock::now() > deadline) {
          keep();
          failure_ = "rank " + std::to_string(rank_) + "'s " + c.op + " #" + std::to_string(c.seq) + " timed out";
          throw ExecutionError(where(c) + " timed out: waited longer than TENSOR_DIST_TIMEOUT_S = " + fmt_seconds(timeout_s_) +
                               " for the other ranks to join it (a rank that failed, returned or called another collective)");
        }
      }
    }
  }

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int size_ = 1;
  int provided_ = MPI_THREAD_SINGLE;
  MPI_Op float_max_ = MPI_OP_NULL;
  MPI_Op float_min_ = MPI_OP_NULL;
  const double timeout_s_;
  const bool check_;
  std::uint64_t checked_seq_ = 0;  // the call whose TENSOR_DIST_CHECK exchange completed last
  // One MPI call at a time: every thread outside a LocalGroup shares this communicator.
  // Which thread's collective goes first is still the caller's to fix (the contract: the
  // same collectives in the same order on every rank).
  std::mutex m_;
  std::string failure_;
  std::vector<std::shared_ptr<void>> keep_;  // buffers of collectives abandoned by the watchdog
};

}  // namespace

std::unique_ptr<Communicator> make_mpi_world() { return std::make_unique<MpiCommunicator>(); }

bool mpi_raw_allreduce_sum_f32(float* buf, std::size_t n) {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized || n > static_cast<std::size_t>(INT_MAX)) return false;
  return MPI_Allreduce(MPI_IN_PLACE, buf, static_cast<int>(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD) == MPI_SUCCESS;
}

std::string mpi_library_version() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  if (MPI_Get_library_version(text, &len) != MPI_SUCCESS) return "unknown MPI";
  // "Open MPI v4.1.4, package: ..." -> "Open MPI 4.1.4"
  std::string s(text, static_cast<std::size_t>(len));
  if (const auto comma = s.find(','); comma != std::string::npos) s.resize(comma);
  if (const auto v = s.find(" v"); v != std::string::npos && v + 2 < s.size() && s[v + 2] >= '0' && s[v + 2] <= '9') s.erase(v + 1, 1);
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

}  // namespace tensor::dist::internal
