// Trains a two-layer digit classifier on TENSOR_DEVICE with libtensor ops and
// hand-written gradients. The training code itself is tools/demo/digits.cpp
// (public API only); this is the same program `tensorctl demo` runs.
//   build/tools/examples/train_digits [--data PATH] [--epochs N] [--quiet]
#include "digits.hpp"

int main(int argc, char** argv) { return digits::run(argc - 1, argv + 1); }
