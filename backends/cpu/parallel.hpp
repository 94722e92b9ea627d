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

}  // namespace tensor::cpu
