// The README's module example: a small CNN (Conv2d, BatchNorm, ReLU, pooling, Linear) from
// <tensor/modules/...>, trained with Adam on synthetic images on TENSOR_DEVICE, saved, and
// loaded again in a second process that must reproduce the first one's outputs bit for bit.
//   module_cnn train DIR   trains, writes DIR/cnn.safetensors and DIR/outputs.safetensors
//   module_cnn check DIR   loads DIR/cnn.safetensors, compares its outputs with the saved ones
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include <tensor/activation.hpp>
#include <tensor/modules/conv.hpp>
#include <tensor/modules/core.hpp>
#include <tensor/modules/loss.hpp>
#include <tensor/modules/norm.hpp>
#include <tensor/modules/optim.hpp>

using namespace tensor;
using namespace tensor::nn;

struct Cnn : Module {
  Conv2d conv1, conv2;
  BatchNorm bn1, bn2;
  Linear fc;
  explicit Cnn(Device d)
      : conv1(Conv2dConfig{.channels = {1, 8}, .kernel_size = {3, 3}, .padding = Padding<2>::same()}, d),
        conv2(Conv2dConfig{.channels = {8, 16}, .kernel_size = {3, 3}, .padding = Padding<2>::same()}, d),
        bn1(BatchNormConfig{.num_features = 8}, d), bn2(BatchNormConfig{.num_features = 16}, d),
        fc(LinearConfig{.d_input = 16, .d_output = 4}, d) {}
  void visit(ModuleVisitor& v) override {
    v.module("conv1", conv1), v.module("bn1", bn1), v.module("conv2", conv2), v.module("bn2", bn2), v.module("fc", fc);
  }
  Tensor<2> forward(const Tensor<4>& x) {
    auto h = MaxPool2d(MaxPool2dConfig{.kernel_size = {2, 2}}).forward(activation::relu(bn1.forward(conv1.forward(x))));
    h = AdaptiveAvgPool2d().forward(activation::relu(bn2.forward(conv2.forward(h))));
    return fc.forward(h.reshape<2>(std::array<std::int64_t, 2>{static_cast<std::int64_t>(x.dims()[0]), -1}));
  }
};

// Synthetic 8x8 images: noise plus one bright quadrant, whose index is the label.
static void batch(std::mt19937& g, std::size_t n, const Device& d, Tensor<4>& x, Tensor<1, Int>& y) {
  std::normal_distribution<float> noise(0.0f, 0.3f);
  std::vector<float> px(n * 64);
  std::vector<std::int64_t> labels(n);
  for (std::size_t i = 0; i < n; ++i) {
    labels[i] = static_cast<std::int64_t>(g() % 4);
    for (std::size_t p = 0; p < 64; ++p) {
      const std::size_t r = p / 8, c = p % 8, q = (r / 4) * 2 + c / 4;
      px[i * 64 + p] = noise(g) + (static_cast<std::int64_t>(q) == labels[i] ? 1.0f : 0.0f);
    }
  }
  x = Tensor<4>::from_data(TensorData::from(px, Shape{n, 1, 8, 8}), d);
  y = Tensor<1, Int>::from_ints(labels, Shape{n}, d);
}

int main(int argc, char** argv) {
  if (argc != 3 || (std::string(argv[1]) != "train" && std::string(argv[1]) != "check")) {
    std::fprintf(stderr, "usage: module_cnn train|check DIR\n");
    return 2;
  }
  const std::string dir = argv[2], weights = dir + "/cnn.safetensors", outputs = dir + "/outputs.safetensors";
  const Device dev = Device::default_device();
  dev.seed(42);
  std::mt19937 g(7);
  Tensor<4> x_eval = Tensor<4>::zeros({1, 1, 8, 8}, dev);
  Tensor<1, Int> y_eval = Tensor<1, Int>::zeros({1}, dev);
  batch(g, 16, dev, x_eval, y_eval);  // the same evaluation batch in both runs

  if (std::string(argv[1]) == "train") {
    Cnn model(dev.autodiff());
    auto opt = optim::ModuleOptimizer::adam();
    CrossEntropyLoss ce;
    double first = 0, last = 0;
    for (int step = 0; step < 40; ++step) {
      Tensor<4> x = x_eval;
      Tensor<1, Int> y = y_eval;
      batch(g, 32, dev.autodiff(), x, y);
      Tensor<1> loss = ce.forward(model.forward(x), y);
      (step == 0 ? first : last) = loss.into_scalar().to_double();
      opt.step(1e-2, model, loss.backward());
    }
    std::printf("%s: %zu parameters, loss %.4f -> %.4f after 40 Adam steps\n", dev.to_string().c_str(), model.num_params(),
                first, last);
    model.to(dev);
    model.eval();
    model.save(weights);
    io::save_safetensors(outputs, {{"logits", model.forward(x_eval).into_data()}});
    return last < first ? 0 : 1;
  }
  Cnn model(dev);
  model.load(weights);
  model.eval();
  const TensorData got = model.forward(x_eval).into_data();
  const bool same = got == io::load_safetensors(outputs).at("logits");
  std::printf("%s: reloaded outputs %s\n", dev.to_string().c_str(), same ? "identical" : "DIFFER");
  return same ? 0 : 1;
}
