// dist::GradientSync: the buckets of a module's parameters and the per-step all_reduce of
// their gradients (tensor/distributed.hpp), reduced either after backward (sync_now) or, with
// overlap, on a communication thread while backward runs (Reducer, fed by the autodiff
// graph's reports of marked leaves: dispatch/autodiff.hpp's DistSession).
#include <array>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <type_traits>
#include <unordered_map>

#include "communicator.hpp"
#include "dispatch/autodiff.hpp"
#include "dispatch/profiler.hpp"
#include "lib/src/handles.hpp"
#include "tensor/distributed.hpp"
#include "tensor/gradients.hpp"
#include "tensor/module.hpp"

namespace tensor::dist {
namespace {

// Calls f(std::integral_constant<std::size_t, D>) for a run-time rank D (1-5).
template <class F>
void with_rank(std::size_t r, const std::string& name, F&& f) {
  switch (r) {
    case 1: return f(std::integral_constant<std::size_t, 1>{});
    case 2: return f(std::integral_constant<std::size_t, 2>{});
    case 3: return f(std::integral_constant<std::size_t, 3>{});
    case 4: return f(std::integral_constant<std::size_t, 4>{});
    case 5: return f(std::integral_constant<std::size_t, 5>{});
    default:
      throw ShapeError("[GradientSync] expected parameters of rank 1 to 5; got " + name + " of rank " + std::to_string(r));
  }
}
template <class F>
void with_rank(const ParamRef& p, F&& f) {
  with_rank(p.slot.rank, p.name, std::forward<F>(f));
}

template <std::size_t D>
std::array<std::int64_t, D> dims_of(const Shape& s) {
  std::array<std::int64_t, D> d{};
  for (std::size_t i = 0; i < D; ++i) d[i] = static_cast<std::int64_t>(s[i]);
  return d;
}

std::uint64_t ns_since(std::chrono::steady_clock::time_point t0) {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count());
}

// The pass number of the backward() that made `grads` (0: not made by one).
std::uint64_t pass_of(const Gradients& grads) {
  const auto* s = static_cast<const dispatch::ad::GradStore*>(grads.raw());
  return s ? s->pass : 0;
}

// Set on a Reducer's communication thread: its own collectives do not wait for it.
thread_local bool t_reducer_thread = false;

}  // namespace

namespace internal {

std::size_t bucket_cap_from_env() {
  const char* v = std::getenv("TENSOR_DIST_BUCKET_MB");
  if (!v || !*v) return std::size_t{25} << 20;
  char* end = nullptr;
  const double mb = std::strtod(v, &end);
  if (end == v || *end != '\0' || !(mb > 0) || mb > 1e6)
    throw Error(std::string("[GradientSync] TENSOR_DIST_BUCKET_MB expected a positive number of MiB; got '") + v + "'");
  return static_cast<std::size_t>(mb * 1048576.0);
}

bool overlap_from_env() {
  const char* v = std::getenv("TENSOR_DIST_OVERLAP");
  if (!v || !*v || std::string(v) == "1") return true;
  if (std::string(v) == "0") return false;
  throw Error(std::string("[GradientSync] TENSOR_DIST_OVERLAP expected 0 or 1; got '") + v + "'");
}

// One parameter as the reducer sees it.
struct ParamInfo {
  std::string name;
  Shape shape;
  DType dtype;
  Device device;  // the inner device (where its gradient lives)
  std::size_t bucket;
};

// The overlap of one GradientSync: which marks it owns, the state of the current backward
// pass, and the communication thread that all-reduces the buckets in plan order.
struct Reducer {
  Communicator* comm;  // the constructing rank's
  ReduceOp op;
  std::vector<ParamInfo> params;
  std::vector<std::vector<std::size_t>> buckets;
  std::uint64_t first_id = 0;  // params[k] is marked first_id + k

  std::mutex mu;
  std::condition_variable cv;
  // The pass being reduced (0: none); its per-parameter flat gradients and per-bucket counts.
  std::uint64_t pass = 0;
  bool finished = false, failed = false;
  std::vector<std::optional<Tensor<1>>> got;
  std::vector<std::size_t> missing;
  std::size_t next_launch = 0;
  std::deque<std::pair<std::size_t, Tensor<1>>> queue;  // launched, not yet reduced
  bool busy = false;                                     // the thread is inside an all_reduce
  std::vector<std::optional<Tensor<1>>> reduced;
  std::size_t n_reduced = 0;
  std::exception_ptr error;  // the thread's first failure (the group is broken after it)
  bool stop = false;
  std::thread thread;

  ~Reducer() {
    {
      std::lock_guard<std::mutex> l(mu);
      stop = true;
    }
    cv.notify_all();
    if (thread.joinable()) thread.join();
  }

  void start() {
    thread = std::thread([this] {
      t_reducer_thread = true;
      ScopedCurrent scope(comm);
      std::unique_lock<std::mutex> l(mu);
      for (;;) {
        cv.wait(l, [&] { return stop || !queue.empty(); });
        if (queue.empty()) return;  // stopping with nothing left
        auto [b, flat] = std::move(queue.front());
        queue.pop_front();
        if (error) {  // the group failed: nothing more goes to it
          cv.notify_all();
          continue;
        }
        busy = true;
        l.unlock();
        std::optional<Tensor<1>> out;
        std::exception_ptr err;
        const auto t0 = std::chrono::steady_clock::now();
        const std::uint64_t bytes = flat.shape().num_elements() * dtype_size(flat.dtype());
        const DeviceId dev = flat.device().id();
        try {
          out.emplace(detail::dist_collective(detail::DistOp::all_reduce, detail::copy(flat), static_cast<int>(op)));
        } catch (...) {
          err = std::current_exception();
        }
        if (dispatch::profiler_active()) dispatch::profiler_record(dev, "dist.bucket", ns_since(t0), bytes);
        l.lock();
        busy = false;
        if (err) {
          if (!error) error = err;
        } else if (b < reduced.size()) {
          reduced[b] = std::move(out);
          ++n_reduced;
        }
        cv.notify_all();
      }
    });
  }

  // Waits (lock held) until the thread has nothing queued or running.
  void drain(std::unique_lock<std::mutex>& l) {
    cv.wait(l, [&] { return queue.empty() && !busy; });
  }

  // The bucket's flat gradient: the parameters' in plan order, zeros where none came.
  Tensor<1> flatten(std::size_t b) {
    std::vector<detail::Handle> parts;
    parts.reserve(buckets[b].size());
    for (std::size_t k : buckets[b]) {
      std::optional<Tensor<1>>& g = got[k];
      parts.push_back(detail::copy(g ? *g : Tensor<1>::zeros(Shape{params[k].shape.num_elements()}, params[k].device, params[k].dtype)));
      g.reset();
    }
    return Tensor<1>(detail::cat(std::move(parts), 0));
  }

  // Hands every complete bucket to the thread, strictly in plan order (lock held).
  void launch_ready() {
    bool any = false;
    while (!failed && next_launch < buckets.size() && missing[next_launch] == 0) {
      queue.emplace_back(next_launch, flatten(next_launch));
      ++next_launch;
      any = true;
    }
    if (any) cv.notify_all();
  }

  // A backward pass reached `reached` (indices into params). False: no overlap for it.
  bool begin(std::uint64_t new_pass, const std::vector<std::size_t>& reached, bool collectives) {
    std::unique_lock<std::mutex> l(mu);
    drain(l);  // an earlier pass whose results sync() never took
    if (error) std::rethrow_exception(error);
    pass = 0;
    reduced.clear();
    n_reduced = 0;
    // Collectives in the graph run on the backward thread: reducing beside them could order
    // the ranks' calls differently, so this pass is reduced by sync() instead.
    if (collectives) return false;
    pass = new_pass;
    finished = failed = false;
    got.assign(params.size(), std::nullopt);
    missing.assign(buckets.size(), 0);
    for (std::size_t k : reached) ++missing[params[k].bucket];
    reduced.assign(buckets.size(), std::nullopt);
    next_launch = 0;
    launch_ready();  // buckets the pass does not reach at all
    return true;
  }

  void ready(std::size_t k, const dispatch::DispatchTensor& g) {
    std::optional<Tensor<1>> flat;
    if (g.prim)
      with_rank(params[k].shape.rank(), params[k].name, [&](auto rank) {
        constexpr std::size_t D = decltype(rank)::value;
        const Tensor<D> t(detail::handles::give(g));
        flat.emplace(t.template reshape<1>(std::array<std::int64_t, 1>{static_cast<std::int64_t>(params[k].shape.num_elements())}));
      });
    std::lock_guard<std::mutex> l(mu);
    got[k] = std::move(flat);
    --missing[params[k].bucket];
    launch_ready();
  }

  void finish(bool ok) {
    std::lock_guard<std::mutex> l(mu);
    finished = true;
    if (!ok) {
      failed = true;  // launch nothing more of this pass: the others' all_reduce fails or times out
      got.clear();
      return;
    }
    for (std::size_t& m : missing) m = 0;  // every reached leaf was reported; defensive
    launch_ready();
  }
};

namespace {

// Which reducer owns each mark: first ids are drawn from one counter, so a range identifies it.
std::mutex g_reg_mu;
std::vector<std::weak_ptr<Reducer>> g_reducers;
std::uint64_t g_next_id = std::uint64_t{1} << 40;  // far from small user-chosen ids

// One backward pass's reports, fanned out to the reducers that own its marks.
class Session final : public dispatch::ad::DistSession {
 public:
  std::vector<std::shared_ptr<Reducer>> reducers;
  std::unordered_map<std::uint64_t, std::pair<Reducer*, std::size_t>> route;

  void ready(std::uint64_t param, const dispatch::DispatchTensor& grad) override {
    if (auto it = route.find(param); it != route.end()) it->second.first->ready(it->second.second, grad);
  }
  void finish(bool ok) override {
    for (const std::shared_ptr<Reducer>& r : reducers) r->finish(ok);
  }
};

std::unique_ptr<dispatch::ad::DistSession> begin_pass(std::span<const dispatch::ad::DistLeaf> leaves, std::uint64_t pass, bool collectives) {
  std::vector<std::shared_ptr<Reducer>> live;
  {
    std::lock_guard<std::mutex> l(g_reg_mu);
    for (const std::weak_ptr<Reducer>& w : g_reducers)
      if (std::shared_ptr<Reducer> r = w.lock()) live.push_back(std::move(r));
  }
  auto s = std::make_unique<Session>();
  for (const std::shared_ptr<Reducer>& r : live) {
    std::vector<std::size_t> reached;
    for (const dispatch::ad::DistLeaf& leaf : leaves)
      if (leaf.param >= r->first_id && leaf.param < r->first_id + r->params.size()) reached.push_back(leaf.param - r->first_id);
    if (reached.empty()) continue;
    if (!r->begin(pass, reached, collectives)) continue;
    for (std::size_t k : reached) s->route.emplace(r->first_id + k, std::pair<Reducer*, std::size_t>{r.get(), k});
    s->reducers.push_back(r);
  }
  if (s->reducers.empty()) return nullptr;
  return s;
}

}  // namespace

// Marks params[k] (those that require grad) first_id + k; false when one was not marked so
// already (a parameter replaced by other means than ModuleOptimizer::step, which keeps marks).
bool mark(std::vector<ParamRef>& params, std::uint64_t first_id) {
  bool all = true;
  for (std::size_t k = 0; k < params.size(); ++k)
    with_rank(params[k], [&](auto rank) {
      constexpr std::size_t D = decltype(rank)::value;
      const Tensor<D>& t = params[k].get<D>();
      if (!t.is_require_grad() || distributed_id(t) == first_id + k) return;
      all = false;
      set_distributed(t, first_id + k);
    });
  return all;
}

void drain_reducers(const Communicator& c) {
  if (t_reducer_thread) return;
  std::vector<std::shared_ptr<Reducer>> live;
  {
    std::lock_guard<std::mutex> l(g_reg_mu);
    for (const std::weak_ptr<Reducer>& w : g_reducers)
      if (std::shared_ptr<Reducer> r = w.lock(); r && r->comm == &c) live.push_back(std::move(r));
  }
  for (const std::shared_ptr<Reducer>& r : live) {
    std::unique_lock<std::mutex> l(r->mu);
    r->drain(l);
  }
}

}  // namespace internal

GradientSync::GradientSync(Module& module, GradientSyncOptions o)
    : module_(&module), op_(o.op), cap_(o.bucket_bytes ? o.bucket_bytes : internal::bucket_cap_from_env()) {
  if (op_ != ReduceOp::Sum && op_ != ReduceOp::Mean)
    throw Error("[GradientSync] expected ReduceOp Sum or Mean for gradients; got Max or Min");
  if (o.overlap < -1 || o.overlap > 1)
    throw Error("[GradientSync] expected overlap -1 (TENSOR_DIST_OVERLAP), 0 or 1; got " + std::to_string(o.overlap));
  const bool overlap = o.overlap == -1 ? internal::overlap_from_env() : o.overlap == 1;
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
  if (world_size() == 1) return;
  if (o.broadcast)
    // Rank 0's values everywhere, in visit order (the same calls on every rank).
    for (ParamRef& p : module.named_tensors())
      with_rank(p, [&](auto rank) {
        constexpr std::size_t D = decltype(rank)::value;
        Tensor<D>& t = p.get<D>();
        const bool tracked = t.is_require_grad();
        Tensor<D> v = broadcast(tracked ? t.detach() : t, 0);
        t = tracked ? v.require_grad() : v;
      });
  internal::Communicator& comm = internal::current();
  if (!overlap || !comm.threads_ok()) return;
  // Overlap needs every parameter to be a leaf of an autodiff device (to be marked).
  params = module.named_parameters();
  for (const ParamRef& p : params)
    if (!p.device().is_autodiff()) return;
  auto r = std::make_shared<internal::Reducer>();
  r->comm = &comm;
  r->op = op_;
  r->buckets = buckets_;
  r->params.resize(params.size());
  for (std::size_t b = 0; b < buckets_.size(); ++b)
    for (std::size_t k : buckets_[b]) r->params[k] = {params[k].name, params[k].shape(), params[k].dtype(), params[k].device().inner(), b};
  {
    std::lock_guard<std::mutex> l(internal::g_reg_mu);
    r->first_id = internal::g_next_id;
    internal::g_next_id += params.size() + 1;
    std::erase_if(internal::g_reducers, [](const std::weak_ptr<internal::Reducer>& w) { return w.expired(); });
    internal::g_reducers.push_back(r);
  }
  dispatch::ad::set_dist_listener(&internal::begin_pass);
  (void)internal::mark(params, r->first_id);
  r->start();
  reducer_ = std::move(r);
}

GradientSync::~GradientSync() = default;

void GradientSync::sync(Gradients& grads) {
  std::vector<ParamRef> params = module_->named_parameters();
  if (params.size() != params_)
    throw ShapeError("[GradientSync] the module's parameters changed; expected " + std::to_string(params_) + "; got " +
                     std::to_string(params.size()));
  if (world_size() == 1) return;
  // dist.step: from the last sync() to the end of this one (a training step).
  struct StepRow {
    std::int64_t& last;
    DeviceId dev;
    ~StepRow() {
      const std::int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
      if (last != 0 && dispatch::profiler_active()) dispatch::profiler_record(dev, "dist.step", static_cast<std::uint64_t>(now - last), 0);
      last = now;
    }
  } step_row{last_sync_ns_, params.empty() ? DeviceId{} : params[0].device().inner().id()};
  const std::uint64_t pass = pass_of(grads);
  if (!reducer_ || pass == 0) return sync_now(grads);
  internal::Reducer& r = *reducer_;
  // A parameter that lost its mark (replaced by other means than ModuleOptimizer::step) was
  // not reported: its gradient went in as zeros. Every rank sees the same, drops the thread's
  // results and reduces again by itself; the marks are back for the next pass.
  const bool marked = internal::mark(params, r.first_id);
  std::vector<std::optional<Tensor<1>>> reduced;
  {
    std::unique_lock<std::mutex> l(r.mu);
    if (r.pass != pass || !r.finished || r.failed || !marked) {  // not the pass the thread reduced
      r.drain(l);
      r.pass = 0;
      if (r.error) std::rethrow_exception(r.error);
      l.unlock();
      return sync_now(grads);
    }
    // The step waits here for the gradients still on the wire (dist.wait).
    const auto t0 = std::chrono::steady_clock::now();
    r.cv.wait(l, [&] { return r.n_reduced == r.buckets.size() || (r.error && r.queue.empty() && !r.busy); });
    if (dispatch::profiler_active() && !r.params.empty()) dispatch::profiler_record(r.params[0].device.id(), "dist.wait", ns_since(t0), 0);
    r.pass = 0;
    if (r.n_reduced != r.buckets.size()) std::rethrow_exception(r.error);
    reduced.swap(r.reduced);
    r.n_reduced = 0;
  }
  for (std::size_t b = 0; b < buckets_.size(); ++b) {
    std::int64_t at = 0;
    for (std::size_t k : buckets_[b])
      with_rank(params[k], [&](auto rank) {
        constexpr std::size_t D = decltype(rank)::value;
        const Tensor<D>& t = params[k].get<D>();
        const auto n = static_cast<std::int64_t>(t.shape().num_elements());
        t.grad_replace(grads, reduced[b]->slice({Slice::range(at, at + n)}).template reshape<D>(dims_of<D>(t.shape())));
        at += n;
      });
  }
}

void GradientSync::sync_now(Gradients& grads) {
  std::vector<ParamRef> params = module_->named_parameters();
  const auto t0 = std::chrono::steady_clock::now();
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
  // Without overlap the whole reduction is the step's wait for its gradients.
  if (dispatch::profiler_active() && !params.empty()) dispatch::profiler_record(params[0].device().inner().id(), "dist.wait", ns_since(t0), 0);
}

}  // namespace tensor::dist

namespace tensor::detail {

void set_distributed(const Handle& h, std::uint64_t param_id) {
  if (h.empty()) throw Error("[set_distributed] use of an empty (moved-from) tensor; expected a tensor; got an empty handle");
  Handle r = retain(h);
  const dispatch::DispatchTensor t = handles::take(r);
  dispatch::ad::set_distributed(t, param_id);
}

std::uint64_t distributed_id(const Handle& h) {
  if (h.empty()) return 0;
  Handle r = retain(h);
  return dispatch::ad::distributed_param(handles::take(r));
}

}  // namespace tensor::detail
