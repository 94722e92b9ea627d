// Peak memory of one training step (forward, backward, Adam update) of the main job's
// CNN (tools/train, 28x28 inputs as Fashion-MNIST) with and without balanced
// checkpointing (Device::autodiff(CheckpointingStrategy::Balanced)). Each strategy runs
// in its own process (RSS peaks do not go down): `checkpointing_memory none 128`,
// `checkpointing_memory balanced 128`. Prints the step's peak RSS above the RSS before it.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <tensor/activation.hpp>
#include <tensor/modules/optim.hpp>
#include <tensor/tensor.hpp>

#include "model.hpp"

namespace {

long status_kib(const char* key) {  // VmRSS / VmHWM of this process
  std::ifstream f("/proc/self/status");
  std::string k;
  long v = 0;
  while (f >> k)
    if (k == key) {
      f >> v;
      return v;
    }
  return -1;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace tensor;
  const std::string mode = argc > 1 ? argv[1] : "none";
  const std::size_t batch = argc > 2 ? std::stoul(argv[2]) : 128;
  const int steps = argc > 3 ? std::stoi(argv[3]) : 3;
  const auto strategy = mode == "balanced" ? CheckpointingStrategy::Balanced : CheckpointingStrategy::None;
  const Device ad = Device::default_device().autodiff(strategy);
  train::Model model("cnn", 28, 28, 10, 42, ad);
  auto adam = optim::ModuleOptimizer::adam();
  train::Rng rng(7);
  std::vector<float> px(batch * 28 * 28), oh(batch * 10, 0.0f);
  for (float& v : px) v = static_cast<float>(rng.uniform());
  for (std::size_t i = 0; i < batch; ++i) oh[i * 10 + i % 10] = 1.0f;
  const auto x = Tensor<4>::from_data(TensorData::from(px, Shape{batch, 1, 28, 28}), ad);
  const auto y = Tensor<2>::from_data(TensorData::from(oh, Shape{batch, 10}), ad);
  auto step = [&] {
    const auto loss = (activation::log_softmax(model.forward(x), 1) * y).sum() * (-1.0 / static_cast<double>(batch));
    const Gradients g = loss.backward();
    adam.step(1e-3, model, g);
    return loss.to_vec<float>()[0];
  };
  for (int i = 0; i + 1 < steps; ++i) step();  // warm-up: Adam's state, the allocator's pools
  const long before = status_kib("VmRSS:");
  { std::ofstream("/proc/self/clear_refs") << "5"; }  // resets VmHWM to the current RSS
  const auto t0 = std::chrono::steady_clock::now();
  const float loss = step();
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  const long peak = status_kib("VmHWM:");
  std::printf("%s: %s batch %zu: step peak %ld KiB above %ld KiB before (%.1f ms, loss %.4f)\n", mode.c_str(),
              ad.to_string().c_str(), batch, peak - before, before, ms, static_cast<double>(loss));
  return 0;
}
