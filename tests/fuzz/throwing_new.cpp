// Linked into both fuzz programs (fuzz_run and scripts/fuzz.sh's libFuzzer target).
#include <cstdint>
#include <cstdlib>
#include <new>

// The replaceable global allocation functions, as the C++ runtime has them: a failed
// allocation throws std::bad_alloc. AddressSanitizer's own operator new aborts instead
// ("out-of-memory", even with allocator_may_return_null=1; a TODO in compiler-rt's
// asan_new_delete.cpp), so a hostile shape whose scratch buffer (a std::vector in a
// kernel) cannot be allocated would be reported as a crash although the library's
// std:: exception net turns the bad_alloc into ExecutionError in every real build
// (the first CI fuzz run that drew such an input, a mean_dim whose accumulator could
// not be allocated, failed on it; corpus/asan-new-oom-mean-dim-ci.bin). GCC's ASan (the
// sanitizer leg's fuzz_cpu replays the corpus) does the same. These forward to malloc /
// aligned_alloc, which ASan still tracks (overflows, use after free, leaks); only
// new/delete mismatch reports are lost.
namespace {
void* checked(void* p) {
  if (!p) throw std::bad_alloc();
  return p;
}
void* aligned(std::size_t n, std::align_val_t a) {
  const auto al = static_cast<std::size_t>(a);
  if (n > SIZE_MAX - al) throw std::bad_alloc();
  return checked(std::aligned_alloc(al, n == 0 ? al : (n + al - 1) / al * al));
}
}  // namespace
void* operator new(std::size_t n) { return checked(std::malloc(n ? n : 1)); }
void* operator new[](std::size_t n) { return checked(std::malloc(n ? n : 1)); }
void* operator new(std::size_t n, std::align_val_t a) { return aligned(n, a); }
void* operator new[](std::size_t n, std::align_val_t a) { return aligned(n, a); }
// The nothrow forms too: every allocation function is replaced, so none of ASan's is left
// to pair with our deletes (ASan reports a mismatch otherwise).
void* operator new(std::size_t n, const std::nothrow_t&) noexcept { return std::malloc(n ? n : 1); }
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept { return std::malloc(n ? n : 1); }
void* operator new(std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  try { return aligned(n, a); } catch (...) { return nullptr; }
}
void* operator new[](std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  try { return aligned(n, a); } catch (...) { return nullptr; }
}
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }

