// `tensorctl train` / `tensorctl eval`: the data and the training loop over tools/train/model.hpp
// (a model of the public modules) with autodiff and the module layer's Adam, on Fashion-MNIST (or the UCI digits), with per-epoch progress, test
// accuracy, a .safetensors checkpoint (weights, Adam's record, epoch, history) and an SVG
// training curve. Public API only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include <tensor/device.hpp>
#include "model.hpp"

namespace train {

// A data set as normalised float images [n, 1, h, w] (pixels in [0, 1]) and labels 0..classes-1.
struct Images {
  std::size_t n = 0, height = 0, width = 0;
  std::vector<float> pixels;
  std::vector<std::int32_t> labels;
};
struct DataSet {
  Images train, test;
  std::size_t classes = 10;
};
// "fashion": Fashion-MNIST from `dir` (or datasets::find_fashion_mnist()); "digits": the
// 8x8 UCI digits (80/20 split, seeded). train_limit / test_limit: 0 for all. Missing data is
// a tensor::FormatError saying how to fetch it.
DataSet load_data(const std::string& dataset, const std::string& dir, std::size_t train_limit, std::size_t test_limit,
                  std::uint64_t seed);

struct Options {
  std::string model = "cnn";        // cnn | mlp | vit
  std::string dataset = "fashion";  // fashion | digits
  std::string data_dir;             // default: find_fashion_mnist() / the digits cache
  std::string out_dir = "train-out";
  std::string resume;               // a checkpoint to continue from
  std::size_t epochs = 5;           // total, counting the resumed ones
  std::size_t batch = 128;
  double lr = 1e-3;                 // tensorctl train: 2e-3 for the vit unless --lr is given
  std::uint64_t seed = 42;
  std::size_t limit = 0;            // train images (0: all)
  std::size_t test_limit = 0;       // test images (0: all)
  bool progress = true;             // a bar on a terminal, plain lines otherwise
  bool write_files = true;          // checkpoint + SVG in out_dir
  bool graph = false;               // capture the training step after two warm-up steps, replay it (one process)
  std::string quantize_after;       // q8s | q4s: the final weights quantized, saved beside the checkpoint
};

struct EpochRecord {
  std::size_t epoch = 0;
  double loss = 0.0;      // mean training loss over the epoch
  double accuracy = 0.0;  // test accuracy after it, in [0, 1]
  double images_per_second = 0.0;
};

struct Result {
  std::vector<EpochRecord> history;  // every epoch, the resumed ones included
  std::string checkpoint;            // path written ("" without write_files)
  std::string svg;
  std::size_t parameters = 0;
  std::string quantized_checkpoint;  // with quantize_after: the quantized weights' file
  std::size_t quantized_bytes = 0;   // its weights' bytes (codes, scales, f32 biases) ...
  std::size_t f32_bytes = 0;         // ... and the same weights in f32
};

// Trains on `device` (an autodiff device is made from it). Writes progress to `log`.
Result run_training(const Options& options, tensor::Device device, std::ostream& log);

// Test accuracy of the checkpoint at `weights` on `device`, with the data set and test subset
// the checkpoint names (data_dir overrides where the files are).
double evaluate_checkpoint(const std::string& weights, const std::string& data_dir, tensor::Device device,
                           std::size_t* correct = nullptr, std::size_t* total = nullptr);

// tensorctl eval --quantize: the checkpoint's test accuracy in f32 and with its Linear and
// Conv2d weights quantized (quantize_weights), the weight bytes, and inference images/s of
// both on the same batches in the same run (each eval run twice, interleaved, the faster
// run of each kept). test_limit > 0 evaluates the first test_limit test images only.
struct QuantEval {
  double f32_accuracy = 0.0, accuracy = 0.0;  // in [0, 1]
  std::size_t total = 0;
  QuantizedSize size;
  double f32_images_per_second = 0.0, images_per_second = 0.0;
  // Process CPU time (all threads) per image, the best of the same runs: on a loaded machine,
  // where wall time mostly measures the other processes.
  double f32_cpu_per_image = 0.0, cpu_per_image = 0.0;
  std::string conv_route;  // the route the last quantized conv2d took (cpu: tensor::cpu's name)
  // The f32 convolutions' routes in each model (cpu: tensor::cpu's names), where probed.
  std::string f32_model_conv_routes, model_conv_routes;
};
// A probe for the cpu's conv2d route (tensorctl passes tensor::cpu::last_q_conv2d_route).
void set_conv_route_probe(std::string (*probe)());
// Probes for the f32 conv forward routes the calling thread took since the last reset
// (tensorctl passes tensor::cpu::nn::conv_forward_routes and its reset).
void set_f32_conv_routes_probe(std::string (*routes)(), void (*reset)());
QuantEval evaluate_quantized(const std::string& weights, const std::string& data_dir, tensor::Device device,
                             const std::string& scheme, std::size_t test_limit = 0);

// The training-curve plot: loss (left axis) and test accuracy (right axis) per epoch.
std::string curve_svg(const std::vector<EpochRecord>& history, const std::string& title);

// The subcommands' argument parsing and reports; return a process exit status.
int train_main(const std::vector<std::string>& args);
int eval_main(const std::vector<std::string>& args);

}  // namespace train
