// The digits demo (the main job): load the UCI handwritten digits, train a
// two-layer network with libtensor ops on any device, report test accuracy.
// Public API only, so tools/examples/train_digits.cpp can be the same code.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include <tensor/tensor.hpp>

namespace digits {

// A malformed or missing data file: the message names the path and the line.
class DataError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct Dataset {
  std::size_t rows = 0;
  std::size_t features = 0;        // 64 for 8x8 images
  std::vector<float> pixels;       // rows x features, raw values 0..16
  std::vector<std::int32_t> labels;  // rows, 0..9
};

// Reads a CSV (gzip-compressed or plain) of rows "f0,...,f63,label" with integer
// pixels in 0..16 and labels in 0..9. Throws DataError naming path and line.
Dataset load_csv(const std::string& path);

// Where the data file is: an explicit path, else $TENSOR_DIGITS, else the
// project cache (.cache/digits/digits.csv.gz beside the build or the cwd), else
// python3-sklearn's installed copy. Empty when none exists.
std::string find_data(const std::string& explicit_path);

struct Split {
  Dataset train, test;
};
// Deterministic shuffle (seeded) then an 80/20 split.
Split split(const Dataset& d, double train_fraction, std::uint64_t seed);

struct Options {
  std::size_t epochs = 30;
  std::size_t batch = 64;
  std::size_t hidden = 64;
  float learning_rate = 0.3f;
  std::uint64_t seed = 42;
  bool progress = true;  // a progress bar on a terminal, plain lines otherwise
};

struct EpochStats {
  std::size_t epoch = 0;
  double loss = 0.0;
  double seconds = 0.0;
  double samples_per_second = 0.0;
};

struct Result {
  double train_accuracy = 0.0;
  double test_accuracy = 0.0;
  double mean_epoch_seconds = 0.0;
  double final_loss = 0.0;
  std::string backend;
  std::vector<EpochStats> epochs;
};

// Trains a 64-hidden-10 ReLU network with softmax cross-entropy and
// hand-written gradients by mini-batch SGD on `device`.
Result train(const Split& data, const Options& options, tensor::Device device);

// The whole demo: parses argv (--data PATH, --epochs N, --batch N, --hidden N,
// --lr X, --seed N, --quiet), trains on the default device, prints the report.
// Returns a process exit status.
int run(int argc, char** argv);

}  // namespace digits
