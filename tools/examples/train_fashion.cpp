// The main job as a program a user would copy: the issue-15 CNN on Fashion-MNIST with
// autodiff and Adam, on TENSOR_DEVICE (public API only; tools/train/ holds the model, built from
// the public modules, and `tensorctl train`, which adds progress, checkpoints, --resume and the plot).
//   train_fashion [EPOCHS] [TRAIN_IMAGES]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <vector>

#include <tensor/modules/optim.hpp>
#include <tensor/tensor.hpp>

#include "model.hpp"    // train::Model (a tensor::Module of nn::Conv2d, nn::Linear, ...), train::cross_entropy, train::Rng
#include "trainer.hpp"  // train::load_data

int main(int argc, char** argv) {
  using namespace tensor;
  const std::size_t epochs = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 1;
  const std::size_t limit = argc > 2 ? std::strtoul(argv[2], nullptr, 10) : 0;
  const std::size_t batch = 128;
  const auto data = train::load_data("fashion", "", limit, 0, 42);

  const Device ad = Device::default_device().autodiff();
  train::Model model("cnn", 28, 28, 10, /*seed=*/42, ad);  // conv-relu-pool x2, linear-relu, linear
  auto adam = optim::ModuleOptimizer::adam();  // Adam over every parameter of the module

  auto batch_of = [&](const train::Images& set, const std::vector<std::size_t>& idx, std::size_t b, std::size_t e, Device d) {
    std::vector<float> x, y((e - b) * 10, 0.0f);
    for (std::size_t i = b; i < e; ++i) {
      const auto* p = &set.pixels[idx[i] * 784];
      x.insert(x.end(), p, p + 784);
      y[(i - b) * 10 + static_cast<std::size_t>(set.labels[idx[i]])] = 1.0f;
    }
    return std::pair{Tensor<4>::from_data(TensorData::from(x, Shape{e - b, 1, 28, 28}), d),
                     Tensor<2>::from_data(TensorData::from(y, Shape{e - b, 10}), d)};
  };

  std::vector<std::size_t> order(data.train.n);
  std::iota(order.begin(), order.end(), std::size_t{0});
  train::Rng rng(42);
  for (std::size_t epoch = 1; epoch <= epochs; ++epoch) {
    for (std::size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rng.below(i)]);
    double total = 0;
    for (std::size_t b = 0; b < order.size(); b += batch) {
      const std::size_t e = std::min(order.size(), b + batch);
      auto [x, y] = batch_of(data.train, order, b, e, ad);
      auto loss = train::cross_entropy(model.forward(x), y);  // forward
      auto grads = loss.backward();                          // backward
      adam.step(1e-3, model, grads);                         // Adam update of every parameter
      total += loss.to_vec<float>()[0] * static_cast<double>(e - b);
    }
    // Test accuracy with the parameters on the inner device (no graph recorded).
    const train::Model eval = model.detached();
    std::vector<std::size_t> all(data.test.n);
    std::iota(all.begin(), all.end(), std::size_t{0});
    std::size_t correct = 0;
    for (std::size_t b = 0; b < all.size(); b += 500) {
      const std::size_t e = std::min(all.size(), b + 500);
      auto [x, y] = batch_of(data.test, all, b, e, ad.inner());
      const auto pred = eval.forward(x).argmax(1).to_vec<std::int64_t>();
      for (std::size_t i = b; i < e; ++i) correct += pred[i - b] == data.test.labels[i];
    }
    std::printf("epoch %zu: loss %.4f, test accuracy %.2f%%\n", epoch, total / static_cast<double>(order.size()),
                100.0 * static_cast<double>(correct) / static_cast<double>(all.size()));
  }
  return 0;
}
