// libFuzzer entry (scripts/fuzz.sh builds it with clang -fsanitize=fuzzer): the same
// decoder as fuzz_run; a contract breach aborts, so libFuzzer records the input.
// TENSOR_FUZZ_DEVICE picks the device (cpu when unset).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <new>

#include "decoder.hpp"

// The replaceable global allocation functions, as the C++ runtime has them: a failed
// allocation throws std::bad_alloc. AddressSanitizer's own operator new aborts instead
// ("out-of-memory", even with allocator_may_return_null=1; a TODO in compiler-rt's
// asan_new_delete.cpp), so a hostile shape whose scratch buffer (a std::vector in a
// kernel) cannot be allocated would be reported as a crash although the library's
// std:: exception net turns the bad_alloc into ExecutionError in every real build
// (the first CI fuzz run that drew such an input, a mean_dim with a 2^31-row output,
// failed on it). These forward to malloc / aligned_alloc, which ASan still tracks
// (overflows, use after free, leaks); only new/delete mismatch reports are lost.
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
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::string device = [] {
    const char* d = std::getenv("TENSOR_FUZZ_DEVICE");
    return std::string(d && *d ? d : "cpu");
  }();
  const tensor_fuzz::Result r = tensor_fuzz::run(data, size, device);
  if (!r.ok) {
    std::fprintf(stderr, "contract breach on %s: %s\n", device.c_str(), r.what.c_str());
    std::abort();
  }
  return 0;
}
