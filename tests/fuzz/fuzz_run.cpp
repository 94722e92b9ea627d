// The fuzz decoder as a plain program (no gtest, no clang): runs every file of the
// given corpus directories or files, then --iterations pseudo-random inputs from
// --seed, on --device (with --seconds S: random inputs until S seconds have passed, at
// most --iterations of them when that is given too). Prints the calls made; on a
// contract breach prints the input
// (hex) and exits 1, so a finding of scripts/fuzz.sh reproduces here:
//   fuzz_run --device cpu crash-<sha1>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "decoder.hpp"

namespace {

bool check(const std::vector<std::uint8_t>& input, const std::string& device, const std::string& name,
           std::size_t& calls, std::size_t& errors) {
  const tensor_fuzz::Result r = tensor_fuzz::run(input.data(), input.size(), device);
  calls += r.calls;
  errors += r.errors;
  if (r.ok) return true;
  std::fprintf(stderr, "FAIL %s on %s: %s\ninput (%zu bytes):", name.c_str(), device.c_str(), r.what.c_str(), input.size());
  for (std::uint8_t b : input) std::fprintf(stderr, " %02x", b);
  std::fprintf(stderr, "\n");
  return false;
}

std::vector<std::uint8_t> read_file(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

}  // namespace

int main(int argc, char** argv) {
  std::string device = "cpu";
  unsigned long iterations = 0;
  unsigned long long seed = 1;
  double seconds = 0;
  std::vector<std::filesystem::path> paths;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--device" && i + 1 < argc) device = argv[++i];
    else if (a == "--iterations" && i + 1 < argc) iterations = std::strtoul(argv[++i], nullptr, 10);
    else if (a == "--seed" && i + 1 < argc) seed = std::strtoull(argv[++i], nullptr, 10);
    else if (a == "--seconds" && i + 1 < argc) seconds = std::strtod(argv[++i], nullptr);
    else paths.emplace_back(a);
  }
  std::size_t calls = 0, errors = 0, inputs = 0;
  bool ok = true;
  for (const auto& p : paths) {
    std::vector<std::filesystem::path> files;
    if (std::filesystem::is_directory(p)) {
      for (const auto& e : std::filesystem::directory_iterator(p))
        if (e.is_regular_file()) files.push_back(e.path());
    } else {
      files.push_back(p);
    }
    for (const auto& f : files) {
      ok = check(read_file(f), device, f.string(), calls, errors) && ok;
      ++inputs;
    }
  }
  // splitmix64: inputs of 1..256 bytes.
  auto next = [&seed] {
    unsigned long long z = (seed += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  };
  const auto start = std::chrono::steady_clock::now();
  auto more = [&](unsigned long it) {
    if (seconds <= 0) return it < iterations;
    if (iterations > 0 && it >= iterations) return false;
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() < seconds;
  };
  for (unsigned long it = 0; more(it); ++it) {
    std::vector<std::uint8_t> input(1 + next() % 256);
    for (auto& b : input) b = static_cast<std::uint8_t>(next());
    // One input in 16 is a weight file for the decoder (its "WFIL" prefix; see decoder.cpp).
    if (it % 16 == 7 && input.size() >= 5) std::memcpy(input.data(), "WFIL", 4);
    ok = check(input, device, "random input " + std::to_string(it), calls, errors) && ok;
    ++inputs;
  }
  std::printf("fuzz_run: %zu inputs, %zu calls (%zu threw a tensor::Error) on %s: %s\n", inputs, calls, errors,
              device.c_str(), ok ? "no finding" : "FINDINGS");
  return ok ? 0 : 1;
}
