// tensorctl demo: the main job — train the digits classifier on TENSOR_DEVICE
// (the code is tools/demo/digits.cpp, shared with tools/examples/train_digits.cpp).
#include <vector>

#include "digits.hpp"
#include "tools/tensorctl.hpp"

namespace tensorctl {

int run_demo(Args args) {
  std::vector<std::string> own(args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : own) argv.push_back(a.data());
  return digits::run(static_cast<int>(argv.size()), argv.data());
}

}  // namespace tensorctl
