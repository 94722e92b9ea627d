#include "model.hpp"

#include <cmath>
#include <utility>

#include <tensor/activation.hpp>
#include <tensor/error.hpp>

namespace train {

using tensor::Device;
using tensor::Shape;
using tensor::Tensor;
using tensor::TensorData;

namespace {

template <std::size_t D>
Tensor<D> leaf(Tensor<D> t, const Device& device) {
  return device.is_autodiff() ? std::move(t).require_grad() : t;
}

template <std::size_t D>
Tensor<D> inner_of(const Tensor<D>& t) {
  return t.device().is_autodiff() ? t.inner() : t;
}

std::vector<float> uniform_values(std::size_t n, std::size_t fan_in, Rng& rng) {
  const double bound = 1.0 / std::sqrt(static_cast<double>(fan_in));
  std::vector<float> v(n);
  for (auto& x : v) x = static_cast<float>((rng.uniform() * 2.0 - 1.0) * bound);
  return v;
}

template <std::size_t D>
Tensor<D> init(Shape shape, std::size_t fan_in, Rng& rng, const Device& device) {
  auto data = TensorData::from(uniform_values(shape.num_elements(), fan_in, rng), shape);
  return leaf(Tensor<D>::from_data(std::move(data), device), device);
}

}  // namespace

Tensor<2> kaiming_uniform(Shape shape, std::size_t fan_in, Rng& rng, Device device) {
  return init<2>(shape, fan_in, rng, device);
}

Linear::Linear(const std::string& name, std::size_t in, std::size_t out, Rng& rng, Device device, bool with_bias)
    : weight{name + ".weight", init<2>(Shape{in, out}, in, rng, device)} {
  if (with_bias) bias = Param<1>{name + ".bias", init<1>(Shape{out}, in, rng, device)};
}

Tensor<2> Linear::forward(const Tensor<2>& x) const {
  auto y = x.matmul(weight.value);
  if (!bias) return y;
  const std::array<std::int64_t, 2> row{1, -1};
  return y + bias->value.reshape<2>(row);
}

void Linear::params(std::vector<ParamRef>& out) {
  out.emplace_back(&weight);
  if (bias) out.emplace_back(&*bias);
}

Conv2d::Conv2d(const std::string& name, std::size_t in, std::size_t out, std::size_t kernel, std::int64_t padding, Rng& rng,
               Device device, bool with_bias)
    : weight{name + ".weight", init<4>(Shape{out, in, kernel, kernel}, in * kernel * kernel, rng, device)} {
  if (with_bias) bias = Param<1>{name + ".bias", init<1>(Shape{out}, in * kernel * kernel, rng, device)};
  options.padding = {padding, padding};
}

Tensor<4> Conv2d::forward(const Tensor<4>& x) const {
  return tensor::nn::conv2d(x, weight.value, bias ? std::optional<Tensor<1>>(bias->value) : std::nullopt, options);
}

void Conv2d::params(std::vector<ParamRef>& out) {
  out.emplace_back(&weight);
  if (bias) out.emplace_back(&*bias);
}

Model::Model(const std::string& kind, std::size_t height, std::size_t width, std::size_t classes, std::uint64_t seed,
             Device device)
    : kind_(kind) {
  Rng rng(seed);
  if (kind == "cnn") {
    if (height % 4 != 0 || width % 4 != 0)
      throw tensor::ShapeError("[train::Model] the cnn pools twice by 2; expected image sides divisible by 4; got " +
                               std::to_string(height) + "x" + std::to_string(width));
    convs_.emplace_back("conv1", 1, 32, 3, 1, rng, device);
    convs_.emplace_back("conv2", 32, 64, 3, 1, rng, device);
    linears_.emplace_back("fc1", 64 * (height / 4) * (width / 4), 128, rng, device);
    linears_.emplace_back("fc2", 128, classes, rng, device);
  } else if (kind == "mlp") {
    linears_.emplace_back("fc1", height * width, 128, rng, device);
    linears_.emplace_back("fc2", 128, classes, rng, device);
  } else {
    throw tensor::ShapeError("[train::Model] unknown model; expected cnn or mlp; got " + kind);
  }
}

Tensor<2> Model::forward(const Tensor<4>& x) const {
  using tensor::activation::relu;
  const auto n = static_cast<std::int64_t>(x.shape()[0]);
  const std::array<std::int64_t, 2> flat{n, -1};
  if (kind_ == "mlp") return linears_[1].forward(relu(linears_[0].forward(x.reshape<2>(flat))));
  tensor::nn::MaxPoolOptions<2> pool;
  pool.kernel_size = {2, 2};
  pool.stride = {2, 2};
  auto h = tensor::nn::max_pool2d(relu(convs_[0].forward(x)), pool);
  h = tensor::nn::max_pool2d(relu(convs_[1].forward(h)), pool);
  return linears_[1].forward(relu(linears_[0].forward(h.reshape<2>(flat))));
}

std::vector<ParamRef> Model::params() {
  std::vector<ParamRef> out;
  for (auto& c : convs_) c.params(out);
  for (auto& l : linears_) l.params(out);
  return out;
}

std::size_t Model::num_parameters() {
  std::size_t n = 0;
  for (auto& p : params()) std::visit([&](auto* q) { n += q->value.shape().num_elements(); }, p);
  return n;
}

tensor::io::NamedTensors Model::to_record() {
  tensor::io::NamedTensors out;
  for (auto& p : params()) std::visit([&](auto* q) { out.emplace_back(q->name, inner_of(q->value).to_data()); }, p);
  return out;
}

void Model::load_record(const tensor::io::NamedTensors& record, Device device, const std::string& prefix) {
  auto find = [&](const std::string& name) -> const TensorData* {
    for (const auto& [n, d] : record)
      if (n == prefix + name) return &d;
    return nullptr;
  };
  // Check everything first, so a bad record replaces nothing.
  for (auto& p : params())
    std::visit(
        [&](auto* q) {
          const TensorData* d = find(q->name);
          if (!d) throw tensor::ShapeError("[train::Model::load_record] missing parameter; expected " + prefix + q->name + "; got none");
          if (d->shape() != q->value.shape())
            throw tensor::ShapeError("[train::Model::load_record] " + prefix + q->name + " has the wrong shape; expected " +
                                     q->value.shape().to_string() + "; got " + d->shape().to_string());
        },
        p);
  for (auto& p : params())
    std::visit(
        [&](auto* q) {
          using T = std::decay_t<decltype(q->value)>;
          q->value = leaf(T::from_data(find(q->name)->convert(tensor::DType::F32), device), device);
        },
        p);
}

void Model::step(tensor::optim::Optimizer& opt, double lr, const tensor::Gradients& grads) {
  for (auto& p : params())
    std::visit(
        [&](auto* q) {
          using T = std::decay_t<decltype(q->value)>;
          auto g = q->value.grad(grads);
          if (!g) return;
          q->value = T::from_inner(opt.step(lr, q->name, q->value.inner(), *g)).require_grad();
        },
        p);
}

Model Model::detached() const {
  Model m = *this;
  for (auto& p : m.params()) std::visit([](auto* q) { q->value = inner_of(q->value); }, p);
  return m;
}

Tensor<1> cross_entropy(const Tensor<2>& logits, const Tensor<2>& one_hot) {
  const double n = static_cast<double>(logits.shape()[0]);
  return (tensor::activation::log_softmax(logits, 1) * one_hot).sum() * (-1.0 / n);
}

}  // namespace train
