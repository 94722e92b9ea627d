// parallel_chunks: the calling thread and persistent helpers share a chunk counter
// (see parallel.hpp for why there is no barrier on helpers that have not started).
#include "backends/cpu/parallel.hpp"

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "backends/cpu/cpu_info.hpp"

namespace tensor::cpu {
namespace {

struct Pool {
  std::mutex m;
  std::condition_variable wake, done;
  // The open job (guarded by m): helpers join only while `open`, and count themselves
  // in `inflight` when they do.
  bool open = false;
  std::uint64_t gen = 0;
  std::size_t chunks = 0;
  const ChunkFn* body = nullptr;
  int inflight = 0;
  std::atomic<std::size_t> next{0};
  std::atomic<bool> busy{false};  // one job at a time; a nested or concurrent caller runs serially

  explicit Pool(int helpers) {
    for (int i = 0; i < helpers; ++i) std::thread([this] { loop(); }).detach();
  }

  void run_chunks(const ChunkFn& f, std::size_t n) {
    for (std::size_t c = next.fetch_add(1, std::memory_order_relaxed); c < n; c = next.fetch_add(1, std::memory_order_relaxed))
      f(c);
  }

  void loop() {
    std::uint64_t seen = 0;
    std::unique_lock<std::mutex> lk(m);
    for (;;) {
      wake.wait(lk, [&] { return open && gen != seen; });
      seen = gen;
      ++inflight;
      const ChunkFn* f = body;
      const std::size_t n = chunks;
      lk.unlock();
      run_chunks(*f, n);
      lk.lock();
      if (--inflight == 0) done.notify_all();
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
  }
  p->wake.notify_all();
  p->run_chunks(body, chunks);
  {
    std::unique_lock<std::mutex> lk(p->m);
    p->open = false;  // helpers not yet in stay out
    p->done.wait(lk, [&] { return p->inflight == 0; });
  }
  t_inside = false;
  p->busy.store(false, std::memory_order_release);
}

}  // namespace tensor::cpu
