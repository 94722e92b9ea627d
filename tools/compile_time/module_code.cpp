// Compile-time benchmark input for the module layer (issue 29): a user file with a 5-layer
// model on <tensor/module.hpp> and <tensor/modules/...> (two convolutions, a batch norm,
// two linear layers), its forward pass, a training step with Adam and a checkpoint.
// measure.sh --source module_code.cpp times it against user_code.cpp's target.
#include <tensor/activation.hpp>
#include <tensor/module.hpp>
#include <tensor/modules/conv.hpp>
#include <tensor/modules/core.hpp>
#include <tensor/modules/loss.hpp>
#include <tensor/modules/norm.hpp>
#include <tensor/modules/optim.hpp>

using namespace tensor;
using namespace tensor::nn;

struct Model : Module {
  Conv2d conv1, conv2;
  BatchNorm bn;
  Linear fc1, fc2;
  explicit Model(Device d)
      : conv1(Conv2dConfig{.channels = {1, 16}, .kernel_size = {3, 3}, .padding = Padding<2>::same()}, d),
        conv2(Conv2dConfig{.channels = {16, 32}, .kernel_size = {3, 3}, .padding = Padding<2>::same()}, d),
        bn(BatchNormConfig{.num_features = 32}, d),
        fc1(LinearConfig{.d_input = 32 * 7 * 7, .d_output = 128}, d),
        fc2(LinearConfig{.d_input = 128, .d_output = 10}, d) {}
  void visit(ModuleVisitor& v) override {
    v.module("conv1", conv1);
    v.module("conv2", conv2);
    v.module("bn", bn);
    v.module("fc1", fc1);
    v.module("fc2", fc2);
  }
  Tensor<2> forward(const Tensor<4>& x) {
    MaxPool2d pool(MaxPool2dConfig{.kernel_size = {2, 2}});
    auto h = pool.forward(activation::relu(conv1.forward(x)));
    h = pool.forward(activation::relu(bn.forward(conv2.forward(h))));
    auto f = h.reshape<2>(std::array<std::int64_t, 2>{static_cast<std::int64_t>(x.dims()[0]), -1});
    return fc2.forward(activation::relu(fc1.forward(f)));
  }
};

double train_step(Model& m, optim::ModuleOptimizer& opt, const Tensor<4>& x, const Tensor<1, Int>& y) {
  Tensor<1> loss = CrossEntropyLoss().forward(m.forward(x), y);
  opt.step(1e-3, m, loss.backward());
  return loss.into_scalar().to_double();
}

double run(const std::string& path) {
  const Device d = Device::default_device().autodiff();
  Model m(d);
  auto opt = optim::ModuleOptimizer::adam();
  auto x = Tensor<4>::random({8, 1, 28, 28}, Distribution::normal(0, 1), d);
  auto y = Tensor<1, Int>::zeros({8}, d);
  double l = train_step(m, opt, x, y);
  optim::save_checkpoint(path, m, opt);
  m.eval();
  return l + static_cast<double>(m.num_params());
}
