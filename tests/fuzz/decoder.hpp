// The fuzz decoder (issue 16): bytes -> a sequence of public-API calls on small
// tensors. Each call must either succeed or throw a tensor::Error; nothing else may
// escape, and no input tensor may change. Inputs starting with "WFIL" are weight files
// instead (issue 30): written as a .npy / .safetensors file and loaded. Shared by the plain runner (fuzz_run.cpp,
// in the test suite) and the libFuzzer target (fuzz_target.cpp, scripts/fuzz.sh).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace tensor_fuzz {

struct Result {
  bool ok = true;
  std::string what;       // the contract breach, when !ok
  std::size_t calls = 0;  // public-API calls made
  std::size_t errors = 0;  // of which threw a tensor::Error (the rest succeeded)
};

// Runs the program the bytes encode on `device` ("cpu", "vulkan:0").
Result run(const std::uint8_t* data, std::size_t size, const std::string& device);

}  // namespace tensor_fuzz
