// tensorctl: the command-line front door to libtensor (SPEC §7). This file is the
// subcommand table and argument entry; each subcommand lives in tensorctl_<name>.cpp.
#include "tools/tensorctl.hpp"

#include <algorithm>
#include <array>
#include <exception>
#include <iostream>
#include <string>
#include <string_view>
#include <vector>

#include "tensor/error.hpp"
#include "tensor/version.hpp"

namespace tensorctl {
namespace {

struct Command {
  std::string_view name;
  std::string_view synopsis;  // arguments, shown in the usage
  std::string_view summary;   // one line
  CommandFn run;
};

// Adding a subcommand: declare run_<name> in tensorctl.hpp, add a row here, add its
// file to tools/meson.build. (ops, check, bench and demo are planned, SPEC §7.)
constexpr std::array kCommands = {
    Command{"info", "", "devices, backends, dtype usage, settings, op coverage, SIMD/BLIS/OpenMP", &run_info},
    Command{"bench", "[--device D] [--quick] [--only GROUP]", "benchmarks (SPEC 8), each beside a reference measured in the same run",
            &run_bench},
    Command{"ops", "[--device D] [--markdown]", "op coverage per device: native / default / missing / unsupported", &run_ops},
    Command{"check", "[--device D] [--op PATTERN] [--dtype T] [--seed S]", "every op on D against the CPU backend",
            &run_check},
    Command{"demo", "[--data PATH] [--epochs N] [--quiet]", "the main job: train a digit classifier on TENSOR_DEVICE",
            &run_demo},
    Command{"train", "[--model cnn|mlp|vit] [--dataset fashion|digits] [--epochs N] [--batch N] [--lr X] [--data DIR] [--out DIR] [--limit N] [--resume CKPT] [--quantize-after q8s|q4s]",
            "train a CNN/MLP with autodiff and Adam on TENSOR_DEVICE; checkpoint + SVG curve in --out", &run_train},
    Command{"eval", "--weights FILE [--data DIR] [--quantize q8s|q4s] [--test-limit N]",
            "test accuracy of a tensorctl train checkpoint (and of its quantized weights)", &run_eval},
};

void print_usage(std::ostream& os) {
  os << "usage: tensorctl <command> [args]\n"
        "       tensorctl --help | --version\n\n"
        "commands:\n";
  std::size_t w = 0;
  for (const auto& c : kCommands) w = std::max(w, c.name.size() + (c.synopsis.empty() ? 0 : c.synopsis.size() + 1));
  for (const auto& c : kCommands) {
    std::string head(c.name);
    if (!c.synopsis.empty()) head.append(" ").append(c.synopsis);  // (GCC 12 -O3 flags operator+ with -Wrestrict)
    os << "  " << head << std::string(w - head.size() + 2, ' ') << c.summary << '\n';
  }
  os << "\nenvironment:\n"
        "  TENSOR_DEVICE   default device: cpu | vulkan | vulkan:N (unset: cpu)\n";
}

}  // namespace
}  // namespace tensorctl

int main(int argc, char** argv) {
  using namespace tensorctl;
  if (argc < 2) {
    print_usage(std::cerr);
    return kExitUsage;
  }
  const std::string_view name = argv[1];
  if (name == "-h" || name == "--help" || name == "help") {
    print_usage(std::cout);
    return kExitOk;
  }
  if (name == "--version" || name == "version") {
    std::cout << "tensorctl (libtensor) " << TENSOR_VERSION_STRING << '\n';
    return kExitOk;
  }
  for (const auto& c : kCommands) {
    if (c.name != name) continue;
    const std::vector<std::string> args(argv + 2, argv + argc);
    try {
      return c.run(args);
    } catch (const tensor::Error& e) {
      std::cerr << "tensorctl " << name << ": " << e.what() << '\n';
      return kExitFailure;
    } catch (const std::exception& e) {
      std::cerr << "tensorctl " << name << ": unexpected error: " << e.what() << '\n';
      return kExitFailure;
    }
  }
  std::cerr << "tensorctl: unknown command '" << name << "'\n\n";
  print_usage(std::cerr);
  return kExitUsage;
}
