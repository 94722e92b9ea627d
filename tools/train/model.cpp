#include "model.hpp"

#include <atomic>
#include <cmath>
#include <map>
#include <utility>
#include <vector>

#include <tensor/activation.hpp>
#include <tensor/error.hpp>

namespace train {

using tensor::Device;
using tensor::Shape;
using tensor::Tensor;
using tensor::TensorData;

namespace {

// The modules are built with zeros (no draw from the device's stream); the weights then come
// from the tool's Rng.
tensor::nn::Conv2d conv(std::size_t in, std::size_t out, const Device& device) {
  tensor::nn::Conv2dConfig c;
  c.channels = {in, out};
  c.kernel_size = {3, 3};
  c.padding = tensor::nn::Padding<2>::explicit_({1, 1});
  c.initializer = tensor::Initializer::zeros();
  return tensor::nn::Conv2d(c, device);
}

tensor::nn::Linear linear(std::size_t in, std::size_t out, const Device& device) {
  tensor::nn::LinearConfig c;
  c.d_input = in;
  c.d_output = out;
  c.initializer = tensor::Initializer::zeros();
  return tensor::nn::Linear(c, device);
}

// burn's module default, U(-1/sqrt(fan_in), 1/sqrt(fan_in)), drawn from `rng` in element order.
template <std::size_t D>
void draw(Tensor<D>& t, std::size_t fan_in, Rng& rng, const Device& device) {
  const double bound = 1.0 / std::sqrt(static_cast<double>(fan_in));
  std::vector<float> v(t.shape().num_elements());
  for (auto& x : v) x = static_cast<float>((rng.uniform() * 2.0 - 1.0) * bound);
  auto value = Tensor<D>::from_data(TensorData::from(v, t.shape()), device);
  t = device.is_autodiff() ? std::move(value).require_grad() : value;
}

template <class M>
void draw_module(M& m, std::size_t fan_in, Rng& rng, const Device& device) {
  draw(m.weight, fan_in, rng, device);
  if (m.bias) draw(*m.bias, fan_in, rng, device);
}

// The vit's sizes (see model.hpp).
constexpr std::size_t kPatch = 4, kVitWidth = 64, kVitHeads = 4, kVitLayers = 4, kVitFeedForward = 128;
constexpr double kVitDropout = 0.1;

// N(0, std^2) from two of `rng`'s uniforms (Box-Muller).
float normal(Rng& rng, double std) {
  const double u1 = 1.0 - rng.uniform(), u2 = rng.uniform();
  return static_cast<float>(std * std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
}

// The vit's initial weights: every parameter in `model`'s order, drawn from `rng` (see
// model.hpp); loaded in one load_record.
void draw_vit(Model& model, Rng& rng) {
  tensor::io::NamedTensors record;
  std::size_t fan_in = 1;  // of the last weight: its bias follows it
  for (const auto& p : model.named_parameters()) {
    const Shape shape = p.shape();
    std::vector<float> v(shape.num_elements());
    const bool is_norm = p.module_type == std::string("LayerNorm");
    if (is_norm) {
      std::fill(v.begin(), v.end(), p.name.ends_with("gamma") ? 1.0f : 0.0f);
    } else if (p.name == "cls_token" || p.name == "pos_embedding") {
      for (auto& x : v) x = normal(rng, 0.02);
    } else {
      if (p.name.ends_with("weight"))  // Linear [in, out]; Conv2d [out, in, kh, kw]
        fan_in = shape.rank() == 2 ? shape[0] : shape.num_elements() / shape[0];
      const double bound = 1.0 / std::sqrt(static_cast<double>(fan_in));
      for (auto& x : v) x = static_cast<float>((rng.uniform() * 2.0 - 1.0) * bound);
    }
    record.emplace_back(p.name, TensorData::from(v, shape));
  }
  model.tensor::Module::load_record(record, true, "<vit init>");
}

}  // namespace

Model::Model(const std::string& kind, std::size_t height, std::size_t width, std::size_t classes, std::uint64_t seed,
             Device device)
    : kind_(kind) {
  if (kind == "vit") {
    if (height % kPatch != 0 || width % kPatch != 0)
      throw tensor::ShapeError("[train::Model] the vit cuts 4x4 patches; expected image sides divisible by 4; got " +
                               std::to_string(height) + "x" + std::to_string(width));
    tensor::nn::Conv2dConfig pc;
    pc.channels = {1, kVitWidth};
    pc.kernel_size = {kPatch, kPatch};
    pc.stride = {kPatch, kPatch};
    pc.initializer = tensor::Initializer::zeros();
    patch_embedding = tensor::nn::Conv2d(pc, device);
    const std::size_t tokens = (height / kPatch) * (width / kPatch) + 1;
    cls_token = tensor::Tensor<3>::zeros(Shape{1, 1, kVitWidth}, device);
    pos_embedding = tensor::Tensor<3>::zeros(Shape{1, tokens, kVitWidth}, device);
    encoder = tensor::nn::TransformerEncoder(
        tensor::nn::TransformerConfig{.d_model = kVitWidth, .d_ff = kVitFeedForward, .n_heads = kVitHeads,
                                      .n_layers = kVitLayers, .dropout = kVitDropout, .norm_first = true,
                                      .initializer = tensor::Initializer::zeros()},
        device);
    norm = tensor::nn::LayerNorm(tensor::nn::LayerNormConfig{.d_model = kVitWidth}, device);
    embedding_dropout = tensor::nn::Dropout(tensor::nn::DropoutConfig{.prob = kVitDropout});
    fc2 = linear(kVitWidth, classes, device);
    Rng rng(seed);
    draw_vit(*this, rng);
    return;
  }
  if (kind == "cnn") {
    if (height % 4 != 0 || width % 4 != 0)
      throw tensor::ShapeError("[train::Model] the cnn pools twice by 2; expected image sides divisible by 4; got " +
                               std::to_string(height) + "x" + std::to_string(width));
    conv1 = conv(1, 32, device);
    conv2 = conv(32, 64, device);
    fc1 = linear(64 * (height / 4) * (width / 4), 128, device);
  } else if (kind == "mlp") {
    fc1 = linear(height * width, 128, device);
  } else {
    throw tensor::ShapeError("[train::Model] unknown model; expected cnn, mlp or vit; got " + kind);
  }
  fc2 = linear(128, classes, device);
  // The draws in parameter order, as the tool's own layers made them.
  Rng rng(seed);
  if (conv1) draw_module(*conv1, 1 * 3 * 3, rng, device);
  if (conv2) draw_module(*conv2, 32 * 3 * 3, rng, device);
  draw_module(*fc1, fc1->weight.shape()[0], rng, device);
  draw_module(*fc2, 128, rng, device);
}

void Model::visit(tensor::ModuleVisitor& v) {
  if (kind_ == "vit") {
    v.module("patch_embedding", patch_embedding);
    v.param("cls_token", cls_token);
    v.param("pos_embedding", pos_embedding);
    v.module("encoder", encoder);
    v.module("norm", norm);
    v.module("embedding_dropout", embedding_dropout);
    v.module("head", fc2);
    return;
  }
  v.module("conv1", conv1);
  v.module("conv2", conv2);
  v.module("fc1", fc1);
  v.module("fc2", fc2);
}

namespace {
std::atomic<ConvReluPool> g_conv_relu_pool_hook{nullptr};
}  // namespace

void set_conv_relu_pool_hook(ConvReluPool hook) { g_conv_relu_pool_hook.store(hook); }

Tensor<2> Model::forward(const Tensor<4>& x) const {
  if (kind_ == "mlp") return fc2->forward(relu.forward(fc1->forward(flatten.forward(x))));
  if (kind_ == "vit") {
    const auto n = static_cast<std::int64_t>(x.shape()[0]);
    const auto d = static_cast<std::int64_t>(kVitWidth);
    // [N, d, H/4, W/4] -> [N, tokens - 1, d], the class token in front, positions added.
    const Tensor<3> patches = patch_embedding->forward(x).reshape<3>({n, d, -1}).swap_dims(1, 2);
    Tensor<3> h = tensor::cat(std::vector<Tensor<3>>{cls_token->expand<3>({n, 1, d}), patches}, 1) + *pos_embedding;
    h = norm->forward(encoder->forward(embedding_dropout->forward(h)));
    return fc2->forward(h.slice_dim(1, tensor::Slice::range(0, 1)).reshape<2>({n, d}));
  }
  // relu after the 2x2 max pool: relu is monotone, so it commutes with max (the same values,
  // NaN kept, -0 -> 0 either way) and runs on a quarter of the elements.
  const ConvReluPool fused = g_conv_relu_pool_hook.load(std::memory_order_relaxed);
  auto block = [&](const tensor::nn::Conv2d& c, const Tensor<4>& in) {
    if (fused != nullptr)
      if (auto y = fused(in, c)) return *std::move(y);
    return relu.forward(pool.forward(c.forward(in)));
  };
  const auto h = block(*conv2, block(*conv1, x));
  return fc2->forward(relu.forward(fc1->forward(flatten.forward(h))));
}

void Model::load_record(const tensor::io::NamedTensors& record, Device device, const std::string& prefix) {
  std::map<std::string, const TensorData*> by_name;
  for (const auto& [n, d] : record)
    if (n.starts_with(prefix)) by_name.emplace(n.substr(prefix.size()), &d);
  // Check everything first, so a bad record replaces nothing.
  const auto params = named_parameters();
  for (const auto& p : params) {
    const auto it = by_name.find(p.name);
    if (it == by_name.end())
      throw tensor::ShapeError("[train::Model::load_record] missing parameter; expected " + prefix + p.name + "; got none");
    if (it->second->shape() != p.shape())
      throw tensor::ShapeError("[train::Model::load_record] " + prefix + p.name + " has the wrong shape; expected " +
                               p.shape().to_string() + "; got " + it->second->shape().to_string());
  }
  if (by_name.size() != params.size())
    for (const auto& [n, d] : by_name) {
      bool known = false;
      for (const auto& p : params) known = known || p.name == n;
      if (!known)
        throw tensor::FormatError("", "[train::Model::load_record] " + prefix + n + " is not a parameter of the " + kind_ +
                                          "; expected only its parameters under '" + prefix + "'; got " + prefix + n);
    }
  // Float tensors as f32; quantized ones (a checkpoint of train --quantize-after) as they are.
  tensor::io::NamedTensors f32;
  for (const auto& [n, d] : by_name)
    f32.emplace_back(n, d->dtype() == tensor::DType::QFloat ? *d : d->convert(tensor::DType::F32));
  if (device != *this->device()) to(device);
  tensor::Module::load_record(f32, true, "<record>");
}

Model Model::detached() const {
  Model m = *this;
  const Device d = *m.device();
  if (d.is_autodiff()) m.to(d.inner());
  m.eval();
  return m;
}

namespace {

// Visits the module tree, quantizing every Linear and Conv2d weight it meets.
class WeightQuantizer final : public tensor::ModuleVisitor {
 public:
  explicit WeightQuantizer(bool q4) : q4_(q4) {}
  QuantizedSize size;

 protected:
  void on_tensor(const std::string&, tensor::TensorSlot, bool) override {}
  void on_module(const std::string&, tensor::Module& m) override {
    using tensor::QuantLevel;
    if (auto* l = dynamic_cast<tensor::nn::Linear*>(&m)) {
      const Shape s = l->weight.shape();  // [d_in, d_out]
      const auto din = static_cast<std::uint32_t>(s[0]);
      l->weight = quantized(l->weight, QuantLevel::block({q4_ && din % 32 == 0 ? 32u : din, 1}));
    } else if (auto* c = dynamic_cast<tensor::nn::Conv2d*>(&m)) {
      const Shape s = c->weight.shape();  // [out, in, kh, kw]
      const auto in = static_cast<std::uint32_t>(s[1]), kh = static_cast<std::uint32_t>(s[2]), kw = static_cast<std::uint32_t>(s[3]);
      c->weight = quantized(c->weight, q4_ && in % 32 == 0 ? QuantLevel::block({1, 32, 1, 1}) : QuantLevel::block({1, in, kh, kw}));
    } else {
      m.visit(*this);
    }
  }

 private:
  template <std::size_t D>
  Tensor<D> quantized(const Tensor<D>& w, const tensor::QuantLevel& level) {
    using namespace tensor;
    QuantScheme s = q4_ ? QuantScheme{}.with_value(QuantValue::Q4S).with_store(QuantStore::PackedU32).with_param(ScaleDtype::F16)
                        : QuantScheme{}.with_value(QuantValue::Q8S).with_store(QuantStore::Native).with_param(ScaleDtype::F32);
    s = s.with_level(level);
    // burn's PackedU32 packs each line of the last axis into words of its own: a conv kernel's
    // rows of 3 q4 codes take a 4-byte word each, more than one byte per code (Native). The
    // codes are the same either way; the weight keeps the store that takes fewer bytes.
    if (q4_) {
      const QuantScheme native = s.with_store(QuantStore::Native);
      if (quantization::quantized_data_len(native, w.shape()) < quantization::quantized_data_len(s, w.shape())) s = native;
    }
    Tensor<D> q = quantize_dynamic(w, s);
    size.bytes += q.into_data().bytes().size();
    size.bytes -= w.shape().num_elements() * 4;  // counted as f32 by the caller
    ++size.quantized;
    return q;
  }
  bool q4_;
};

}  // namespace

QuantizedSize quantize_weights(Model& model, const std::string& scheme) {
  if (scheme != "q8s" && scheme != "q4s")
    throw tensor::DTypeError("[quantize_weights] unknown scheme; expected q8s or q4s; got " + scheme);
  std::size_t f32 = 0;
  for (const auto& p : model.named_parameters()) f32 += p.shape().num_elements() * 4;
  WeightQuantizer v(scheme == "q4s");
  model.visit(v);
  v.size.f32_bytes = f32;
  v.size.bytes += f32;
  return v.size;
}

Tensor<1> cross_entropy(const Tensor<2>& logits, const Tensor<2>& one_hot) {
  const double n = static_cast<double>(logits.shape()[0]);
  return (tensor::activation::log_softmax(logits, 1) * one_hot).sum() * (-1.0 / n);
}

}  // namespace train
