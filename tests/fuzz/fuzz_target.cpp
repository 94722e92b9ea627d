// libFuzzer entry (scripts/fuzz.sh builds it with clang -fsanitize=fuzzer): the same
// decoder as fuzz_run; a contract breach aborts, so libFuzzer records the input.
// TENSOR_FUZZ_DEVICE picks the device (cpu when unset).
#include <cstdio>
#include <cstdlib>

#include "decoder.hpp"

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
