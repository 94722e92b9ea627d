// Chunked parallel loops for the CPU kernels that must not slow down when the other
// cores are busy. The calling thread claims chunks itself from a shared counter
// beside persistent helper threads (one per extra thread the OpenMP settings allow);
// when the work is done it waits only for chunks a helper has already started, never
// for a helper that has not been scheduled yet. A fork-join with a barrier (an OpenMP
// parallel region) instead waits a whole scheduler time slice for a descheduled
// thread, so on a shared 2-core machine two threads could be several times slower
// than one.
#pragma once

#include <cstddef>

namespace tensor::cpu {

// A callable taking a chunk index, type-erased without allocation.
class ChunkFn {
 public:
  template <class F>
  ChunkFn(F& f) : obj_(&f), call_([](void* o, std::size_t c) { (*static_cast<F*>(o))(c); }) {}  // NOLINT: implicit
  void operator()(std::size_t c) const { call_(obj_, c); }

 private:
  void* obj_;
  void (*call_)(void*, std::size_t);
};

// Runs body(c) for every c in [0, chunks), each exactly once, in any order and on any
// thread; returns when all have run. Runs serially when chunks < 2, when only one
// thread is allowed, or when called from inside another parallel_chunks loop.
void parallel_chunks(std::size_t chunks, ChunkFn body);

// Chunk length for a memory-streaming kernel over n elements split on parallel_chunks:
// about 8 chunks (a few per thread, so a helper descheduled mid-chunk holds back little),
// each at least 64K elements and a multiple of 64. Long chunks give each thread long runs
// of consecutive memory, which the hardware prefetchers need (a large in-place add ran
// a third faster in chunks of 1M elements than of 64K). The length depends on n only, so reductions that
// combine per-chunk partials in chunk order stay independent of the thread count.
inline std::size_t stream_chunk(std::size_t n) {
  constexpr std::size_t kMin = std::size_t{1} << 16, kChunks = 8;
  const std::size_t c = (n / kChunks + 63) / 64 * 64;
  return c > kMin ? c : kMin;
}

}  // namespace tensor::cpu
