// parallel_chunks: the calling thread and persistent helpers share a chunk counter
// (see parallel.hpp for why there is no barrier on helpers that have not started).
#include "backends/cpu/parallel.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "backends/cpu/cpu_info.hpp"

#if TENSOR_HAVE_OPENMP
#include <omp.h>
#endif
#if defined(__linux__)
#include <pthread.h>
#include <sched.h>
#endif

namespace tensor::cpu {
namespace {

// How long a helper keeps polling for the next job after one ends, before it sleeps on
// the condition variable (TENSOR_CPU_SPIN_US, default 50 µs; 0: sleep at once). Waking a
// sleeping helper took longer than a 64-row slab of a 128^3 product (about 18 µs), so
// the caller ran both slabs itself and a 2-thread product was no faster than one thread;
// a helper still polling joins within a microsecond. The caller never waits for a helper
// either way, so a busy second core costs only the poll's CPU time, at most this long
// after each job.
int spin_us() {
  static const int us = [] {
    const char* e = std::getenv("TENSOR_CPU_SPIN_US");
    if (e == nullptr || *e == '\0') return 50;
    char* end = nullptr;
    const long v = std::strtol(e, &end, 10);
    return end != nullptr && *end == '\0' && v >= 0 && v <= 100000 ? static_cast<int>(v) : 50;
  }();
  return us;
}

// TENSOR_CPU_MOVE_HELPERS=0 leaves a helper on the caller's CPU (move_off below); for A/B runs.
bool move_helpers() {
  static const bool on = [] {
    const char* e = std::getenv("TENSOR_CPU_MOVE_HELPERS");
    return e == nullptr || std::strcmp(e, "0") != 0;
  }();
  return on;
}

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#else
  std::this_thread::yield();
#endif
}

// Run first on each helper: widens its CPU affinity to every CPU the OpenMP runtime's places
// cover. A thread inherits its creator's mask, and with OMP_PROC_BIND (or OMP_PLACES /
// GOMP_CPU_AFFINITY) libgomp pins the initial thread to one place when it loads, so a helper
// created by that thread was pinned to the caller's own core: every 2-thread job ran both
// threads on one core (n = 256: 330-346 against 145-160 us, in every process; issue 33).
// The places are the CPUs the process was allowed when the runtime started (or the ones
// the user listed), so a helper never runs outside what OpenMP itself may use. Without
// places (no binding asked for) the inherited mask is left as it is.
void unpin_helper() {
#if TENSOR_HAVE_OPENMP && defined(__linux__)
  const int places = omp_get_num_places();
  if (places < 2) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> ids;
  for (int p = 0; p < places; ++p) {
    ids.assign(static_cast<std::size_t>(std::max(0, omp_get_place_num_procs(p))), -1);
    if (ids.empty()) continue;
    omp_get_place_proc_ids(p, ids.data());
    for (const int id : ids)
      if (id >= 0 && id < CPU_SETSIZE) CPU_SET(id, &set);
  }
  if (CPU_COUNT(&set) > 0) pthread_setaffinity_np(pthread_self(), sizeof set, &set);  // best effort
#endif
}

// Moves this helper off `cpu` (the caller's) when it runs there and may run elsewhere: its
// mask without that CPU forces a migration now, then the full mask is restored (the thread
// stays where it landed). After any pause long enough for the helper to sleep, the kernel
// woke it on the caller's CPU with the other CPU idle in most jobs on this 2-vCPU VM, and
// left it there for milliseconds: bench-like blocks of 21 n = 256 products after 50 ms
// pauses ran on one core's time in 28-37 of 40 blocks, the machine otherwise idle (issue
// 33's slow mode); with this move 14-26 of 40, and `tensorctl bench --only matmul` had
// n = 128 / 256 at one core's time in 0 / 1 of 14 runs against 9 / 9 of 14 without it
// (2026-12-07, quiet: other processes < 0.02 cores). Returns whether it moved.
bool move_off(int cpu) {
#if defined(__linux__)
  if (cpu < 0 || cpu >= CPU_SETSIZE || sched_getcpu() != cpu) return false;
  cpu_set_t all;
  CPU_ZERO(&all);
  if (sched_getaffinity(0, sizeof all, &all) != 0 || CPU_COUNT(&all) < 2 || !CPU_ISSET(cpu, &all)) return false;
  cpu_set_t others = all;
  CPU_CLR(cpu, &others);
  if (sched_setaffinity(0, sizeof others, &others) != 0) return false;
  sched_setaffinity(0, sizeof all, &all);
  return true;
#else
  (void)cpu;
  return false;
#endif
}

int current_cpu() {
#if defined(__linux__)
  return sched_getcpu();
#else
  return -1;
#endif
}

struct Pool {
  std::mutex m;
  std::condition_variable wake, done;
  // The open job (guarded by m): helpers join only while `open`, and count themselves
  // in `inflight` when they do.
  bool open = false;
  std::uint64_t gen = 0;
  std::size_t chunks = 0;
  const ChunkFn* body = nullptr;
  // Helpers inside the open job: changed under m (so a helper joins only while `open`),
  // read without it by the caller's poll at the end of a job.
  std::atomic<int> inflight{0};
  std::atomic<std::size_t> next{0};
  std::atomic<std::uint64_t> published{0};  // gen, readable without m (the helpers' poll)
  std::atomic<bool> busy{false};  // one job at a time; a nested or concurrent caller runs serially
  std::atomic<int> caller_cpu{-1};  // the CPU the open job's caller published it from

  explicit Pool(int helpers) {
    for (int i = 0; i < helpers; ++i)
      std::thread([this] {
        unpin_helper();
        loop();
      }).detach();
  }

  void run_chunks(const ChunkFn& f, std::size_t n) {
    for (std::size_t c = next.fetch_add(1, std::memory_order_relaxed); c < n; c = next.fetch_add(1, std::memory_order_relaxed))
      f(c);
  }

  // Polls `published` for a job newer than `seen` for up to spin_us().
  void poll(std::uint64_t seen) const {
    const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(spin_us());
    for (unsigned i = 1;; ++i) {
      if (published.load(std::memory_order_acquire) != seen) return;
      cpu_relax();
      if ((i & 63u) == 0 && std::chrono::steady_clock::now() >= until) return;
    }
  }

  // Polls after every job it saw, joined or missed, then sleeps. A helper woken from its
  // sleep for a job that has already closed (the caller ran every chunk while the wake-up
  // took its 20-50 us) goes back to polling: it used to wait on the condition variable
  // again, so with jobs shorter than a wake-up (a 64^3 or 96^3 product split in two) it was
  // always asleep when the next one came and never joined one; n = 128 (18 us slabs) joined
  // or not from one run to the next (20 or 37 us).
  void loop() {
    std::uint64_t seen = 0;
    for (;;) {
      if (spin_us() > 0) poll(seen);
      std::unique_lock<std::mutex> lk(m);
      wake.wait(lk, [&] { return gen != seen; });
      seen = gen;
      if (!open) continue;  // missed: closed before this helper got here
      inflight.fetch_add(1, std::memory_order_relaxed);
      const ChunkFn* f = body;
      const std::size_t n = chunks;
      lk.unlock();
      if (move_helpers()) move_off(caller_cpu.load(std::memory_order_relaxed));
      run_chunks(*f, n);
      lk.lock();
      if (inflight.fetch_sub(1, std::memory_order_release) == 1) done.notify_all();
    }
  }
};

Pool* pool() {
  // Never destroyed: detached helpers may still be parked on it at exit.
  static Pool* const p = new Pool(omp_threads() - 1);
  return p;
}

thread_local bool t_inside = false;

}  // namespace

void parallel_chunks(std::size_t chunks, ChunkFn body) {
  bool expected = false;
  if (chunks < 2 || t_inside || omp_threads() < 2) {
    for (std::size_t c = 0; c < chunks; ++c) body(c);
    return;
  }
  Pool* p = pool();
  if (!p->busy.compare_exchange_strong(expected, true, std::memory_order_acquire)) {
    for (std::size_t c = 0; c < chunks; ++c) body(c);
    return;
  }
  t_inside = true;
  {
    std::lock_guard<std::mutex> lk(p->m);
    p->body = &body;
    p->chunks = chunks;
    p->next.store(0, std::memory_order_relaxed);
    p->open = true;
    ++p->gen;
    p->caller_cpu.store(current_cpu(), std::memory_order_relaxed);
    p->published.store(p->gen, std::memory_order_release);
  }
  p->wake.notify_all();
  p->run_chunks(body, chunks);
  {
    std::lock_guard<std::mutex> lk(p->m);
    p->open = false;  // helpers not yet in stay out
  }
  // A helper still running its last chunk: polled for up to spin_us() before sleeping on
  // `done`. Sleeping at once cost the caller a futex wake-up (tens of µs on this VM) after
  // every job a helper finished last, which also outlasted the helper's own poll for the
  // next job: a 2-thread n = 128 product then took the 1-thread time (37 against 20 µs).
  if (p->inflight.load(std::memory_order_acquire) != 0 && spin_us() > 0) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(spin_us());
    for (unsigned i = 1; p->inflight.load(std::memory_order_acquire) != 0; ++i) {
      cpu_relax();
      if ((i & 63u) == 0 && std::chrono::steady_clock::now() >= until) break;
    }
  }
  if (p->inflight.load(std::memory_order_acquire) != 0) {
    std::unique_lock<std::mutex> lk(p->m);
    p->done.wait(lk, [&] { return p->inflight.load(std::memory_order_acquire) == 0; });
  }
  t_inside = false;
  p->busy.store(false, std::memory_order_release);
}

}  // namespace tensor::cpu
