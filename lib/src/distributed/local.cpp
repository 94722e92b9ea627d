// The local communicator: the ranks of a LocalGroup are threads of this process that meet at
// one rendezvous per collective; each rank reads the others' inputs and reduces them itself
// in rank order, so all ranks hold bitwise-identical results without a second exchange.
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "communicator.hpp"

namespace tensor::dist {
namespace internal {
namespace {

enum class What : std::uint8_t { all_reduce, broadcast, all_gather, reduce_scatter, barrier };

// The state the ranks of one LocalGroup::run share. Each collective is two rendezvous:
// arrival (every rank has posted its slot; the last to arrive checks the slots agree and
// records the verdict) and departure (every rank has finished reading the others' inputs,
// so no input is freed while read).
struct Rendezvous {
  Rendezvous(int n, double timeout_s) : n(n), timeout_s(timeout_s), slots(static_cast<std::size_t>(n)) {}

  struct Slot {
    What what = What::barrier;
    int arg = 0;  // the ReduceOp or root
    DType dtype = DType::F32;
    Shape shape;
    const TensorData* in = nullptr;  // valid from arrival to departure
  };

  const int n;
  const double timeout_s;
  std::mutex m;
  std::condition_variable cv;
  std::uint64_t generation = 0;
  int arrived = 0;
  std::vector<Slot> slots;
  std::string verdict;  // the last completed arrival's mismatch ("" when the slots agree)
  bool verdict_dtype = false;
  // A rank that threw ends the group (its message, naming it); one that returned cannot
  // join any later collective.
  std::string failure;
  std::exception_ptr first_error;
  std::vector<int> returned;

  // The slots of this arrival disagree: the message names the first rank differing from rank 0.
  void check_slots(const char* op) {
    verdict.clear();
    const Slot& a = slots[0];
    for (int r = 1; r < n; ++r) {
      const Slot& b = slots[static_cast<std::size_t>(r)];
      if (b.what == a.what && b.arg == a.arg && b.dtype == a.dtype && b.shape == a.shape) continue;
      verdict_dtype = b.what == a.what && b.arg == a.arg && b.dtype != a.dtype;
      auto desc = [](const Slot& s) {
        static const char* const kNames[] = {"all_reduce", "broadcast", "all_gather", "reduce_scatter", "barrier"};
        std::string d = kNames[static_cast<int>(s.what)];
        if (s.what == What::barrier) return d;
        return d + "(arg " + std::to_string(s.arg) + ", " + std::string(dtype_name(s.dtype)) + " " + s.shape.to_string() + ")";
      };
      verdict = std::string("[") + op + "] ranks disagree; expected every rank to call " + desc(a) + " as rank 0 did; got " +
                desc(b) + " on rank " + std::to_string(r);
      return;
    }
  }

  // Blocks until all n ranks arrived at this rendezvous (the watchdog bounds the wait).
  // `check`: this is an arrival, whose slots the last rank compares.
  void meet(int rank, const Call& c, bool check) {
    std::unique_lock<std::mutex> l(m);
    const std::string where = std::string("[") + c.op + "] collective #" + std::to_string(c.seq) + " on rank " +
                              std::to_string(rank) + " of " + std::to_string(n);
    if (!failure.empty()) throw ExecutionError(where + " cannot run: the group failed earlier (" + failure + ")");
    const std::uint64_t gen = generation;
    if (++arrived == n) {
      arrived = 0;
      ++generation;
      if (check) check_slots(c.op);
      cv.notify_all();
    } else {
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
      cv.wait_until(l, deadline, [&] { return generation != gen || !failure.empty() || !returned.empty(); });
      if (generation == gen) {
        --arrived;  // this rank leaves the rendezvous it never completed
        if (!failure.empty()) throw ExecutionError(where + " abandoned: " + failure);
        if (!returned.empty())
          throw ExecutionError(where + " abandoned: rank " + std::to_string(returned.front()) +
                               " returned from its function without joining it");
        failure = "rank " + std::to_string(rank) + "'s " + c.op + " #" + std::to_string(c.seq) + " timed out";
        cv.notify_all();
        throw ExecutionError(where + " timed out: waited longer than TENSOR_DIST_TIMEOUT_S = " + std::to_string(timeout_s) +
                             " s for the other ranks to arrive");
      }
    }
    if (check && !verdict.empty()) {
      if (verdict_dtype) throw DTypeError(verdict);
      throw ShapeError(verdict);
    }
  }
};

class LocalCommunicator final : public Communicator {
 public:
  LocalCommunicator(Rendezvous& rv, int rank) : rv_(rv), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return rv_.n; }
  std::string describe() const override {
    return "local (LocalGroup of " + std::to_string(rv_.n) + " threads), rank " + std::to_string(rank_);
  }

  TensorData all_reduce(TensorData in, ReduceOp op, const Call& c) override {
    return exchange(What::all_reduce, static_cast<int>(op), in, c, [&] { return reduce(in, op, 0, in.num_elements(), in.shape()); });
  }
  TensorData broadcast(TensorData in, int root, const Call& c) override {
    return exchange(What::broadcast, root, in, c, [&] { return *rv_.slots[static_cast<std::size_t>(root)].in; });
  }
  TensorData all_gather(TensorData in, const Call& c) override {
    return exchange(What::all_gather, 0, in, c, [&] {
      Shape s = in.shape();
      s[0] *= static_cast<std::size_t>(rv_.n);
      const std::size_t each = in.bytes().size();
      std::vector<std::byte> out(each * static_cast<std::size_t>(rv_.n));
      for (int r = 0; r < rv_.n; ++r)
        if (each) std::memcpy(out.data() + each * static_cast<std::size_t>(r), rv_.slots[static_cast<std::size_t>(r)].in->bytes().data(), each);
      return TensorData(std::move(out), s, in.dtype());
    });
  }
  TensorData reduce_scatter(TensorData in, ReduceOp op, const Call& c) override {
    return exchange(What::reduce_scatter, static_cast<int>(op), in, c, [&] {
      Shape s = in.shape();
      s[0] /= static_cast<std::size_t>(rv_.n);
      const std::size_t count = s.num_elements();
      return reduce(in, op, count * static_cast<std::size_t>(rank_), count, s);
    });
  }
  void barrier(const Call& c) override {
    post(What::barrier, 0, nullptr);
    rv_.meet(rank_, c, true);
  }

 private:
  void post(What w, int arg, const TensorData* in) {
    std::lock_guard<std::mutex> l(rv_.m);
    Rendezvous::Slot& s = rv_.slots[static_cast<std::size_t>(rank_)];
    s.what = w;
    s.arg = arg;
    s.in = in;
    s.dtype = in ? in->dtype() : DType::F32;
    s.shape = in ? in->shape() : Shape();
  }
  template <class F>
  TensorData exchange(What w, int arg, const TensorData& in, const Call& c, F compute) {
    post(w, arg, &in);
    rv_.meet(rank_, c, true);
    TensorData out = compute();
    rv_.meet(rank_, c, false);
    return out;
  }
  // Elements [first, first + count) of the reduction over ranks 0, 1, ... in that order.
  TensorData reduce(const TensorData& in, ReduceOp op, std::size_t first, std::size_t count, const Shape& shape) const {
    const std::size_t w = dtype_size(in.dtype());
    std::vector<std::byte> acc(count * w);
    if (count) {
      std::memcpy(acc.data(), rv_.slots[0].in->bytes().data() + first * w, count * w);
      for (int r = 1; r < rv_.n; ++r)
        reduce_into(acc.data(), rv_.slots[static_cast<std::size_t>(r)].in->bytes().data() + first * w, count, in.dtype(), op);
      finish(acc.data(), count, in.dtype(), op, rv_.n);
    }
    return TensorData(std::move(acc), shape, in.dtype());
  }

  Rendezvous& rv_;
  const int rank_;
};

}  // namespace
}  // namespace internal

namespace {
double timeout_from_env() {
  const char* env = std::getenv("TENSOR_DIST_TIMEOUT_S");
  if (!env || !*env) return 300.0;
  char* end = nullptr;
  const double v = std::strtod(env, &end);
  if (end == env || *end != '\0' || !(v > 0) || v > 1e9)
    throw Error(std::string("[LocalGroup] TENSOR_DIST_TIMEOUT_S expected a positive number of seconds; got '") + env + "'");
  return v;
}
}  // namespace

LocalGroup::LocalGroup(int size) : size_(size), timeout_s_(timeout_from_env()) {
  if (size < 1 || size > 1024)
    throw IndexError("[LocalGroup] size outside the supported range; expected 1 <= size <= 1024; got " + std::to_string(size));
}

LocalGroup::~LocalGroup() = default;

void LocalGroup::run(const std::function<void(int rank)>& fn) {
  internal::Rendezvous rv(size_, timeout_s_);
  std::vector<std::thread> threads;
  threads.reserve(static_cast<std::size_t>(size_));
  for (int r = 0; r < size_; ++r) {
    threads.emplace_back([&rv, &fn, r] {
      internal::LocalCommunicator comm(rv, r);
      internal::ScopedCurrent scope(&comm);
      try {
        fn(r);
        std::lock_guard<std::mutex> l(rv.m);
        rv.returned.push_back(r);
      } catch (...) {
        std::lock_guard<std::mutex> l(rv.m);
        if (!rv.first_error) rv.first_error = std::current_exception();
        if (rv.failure.empty()) {
          std::string what = "unknown exception";
          try {
            throw;
          } catch (const std::exception& e) {
            what = e.what();
          } catch (...) {
          }
          rv.failure = "rank " + std::to_string(r) + " threw: " + what;
        }
      }
      rv.cv.notify_all();
    });
  }
  for (std::thread& t : threads) t.join();
  if (rv.first_error) std::rethrow_exception(rv.first_error);
}

}  // namespace tensor::dist
