// Benchmark-only: training speed against libtorch in one process (issue 15's images/s, the vit's (issue 29),
// issue 14's MLP step and tape cost, issue 13's small-CNN conv rows). Not built by meson
// (libtorch's headers are slow to compile and warn under -Werror): scripts/bench-train.sh
// compiles it with g++ against the built libtensor and tools/train/model.cpp (the model
// `tensorctl train` runs). Both libraries run on the same threads (--threads N, default 2;
// the script sets OMP_NUM_THREADS to match, which libtensor reads at start). Each row runs
// the two alternately, step by step, after warm-up steps, and prints the medians and
// ratio = libtorch time / libtensor time (> 1: we are faster).
//   bench_train [--threads N] [--steps N] [--only cnn|vit|mlp|tape|conv]   (BENCH_OURS_ONLY=1: libtensor alone)
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <tensor/activation.hpp>
#include <tensor/modules/core.hpp>
#include <tensor/modules/optim.hpp>
#include <tensor/nn.hpp>
#include <tensor/optim.hpp>
#include <tensor/tensor.hpp>

#include "model.hpp"

#include "tools/bench/bench_util.hpp"

namespace {

using Clock = std::chrono::steady_clock;
using tensor::Shape;
using tensor::Tensor;
using tensor::TensorData;

using tensor_bench::fmt_time;
using tensor_bench::median;
struct Result {
  double ours, torch;
};

// `warm` untimed calls of each, then `reps` interleaved timed calls; medians.
// BENCH_OURS_ONLY=1 skips libtorch (for profiling libtensor alone; the ratio is then meaningless).
Result measure(int warm, int reps, const std::function<void()>& ours, const std::function<void()>& theirs_in) {
  static const bool ours_only = std::getenv("BENCH_OURS_ONLY") != nullptr;
  const std::function<void()> skip = [] {};
  const std::function<void()>& theirs = ours_only ? skip : theirs_in;
  for (int i = 0; i < warm; ++i) {
    ours();
    theirs();
  }
  std::vector<double> a, b;
  for (int r = 0; r < reps; ++r) {
    auto t0 = Clock::now();
    theirs();
    b.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
    t0 = Clock::now();
    ours();
    a.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return {median(a), median(b)};
}

void row(const std::string& name, Result r, double per = 1.0) {
  std::printf("| %s | %s | %s | %.2f |\n", name.c_str(), fmt_time(r.ours / per).c_str(), fmt_time(r.torch / per).c_str(),
              r.torch / r.ours);
  std::fflush(stdout);
}

std::vector<float> normal_values(std::size_t n, std::uint32_t seed) {
  std::mt19937 g(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(g);
  return v;
}

// A fixed batch: standardised-looking pixels and one-hot labels.
struct Batch {
  std::vector<float> x, y;
  std::vector<std::int64_t> labels;
};
Batch make_batch(std::size_t n, std::size_t features, std::size_t classes, std::uint32_t seed) {
  Batch b{normal_values(n * features, seed), std::vector<float>(n * classes, 0.0f), {}};
  for (std::size_t i = 0; i < n; ++i) {
    b.labels.push_back(static_cast<std::int64_t>((i * 7 + seed) % classes));
    b.y[i * classes + static_cast<std::size_t>(b.labels.back())] = 1.0f;
  }
  return b;
}

// The issue-15 CNN in libtorch (same layers as train::Model's "cnn").
struct TorchCnn : torch::nn::Module {
  torch::nn::Conv2d c1{torch::nn::Conv2dOptions(1, 32, 3).padding(1)};
  torch::nn::Conv2d c2{torch::nn::Conv2dOptions(32, 64, 3).padding(1)};
  torch::nn::Linear f1{3136, 128}, f2{128, 10};
  TorchCnn() {
    register_module("c1", c1);
    register_module("c2", c2);
    register_module("f1", f1);
    register_module("f2", f2);
  }
  torch::Tensor forward(torch::Tensor x) {
    x = torch::max_pool2d(torch::relu(c1(x)), 2);
    x = torch::max_pool2d(torch::relu(c2(x)), 2);
    return f2(torch::relu(f1(x.flatten(1))));
  }
};

struct TorchMlp : torch::nn::Module {
  torch::nn::Linear f1{784, 512}, f2{512, 512}, f3{512, 10};
  TorchMlp() {
    register_module("f1", f1);
    register_module("f2", f2);
    register_module("f3", f3);
  }
  torch::Tensor forward(torch::Tensor x) { return f3(torch::relu(f2(torch::relu(f1(x))))); }
};

// The vit of `tensorctl train --model vit` (train::Model's "vit") in libtorch: the same
// layers written out (libtorch 1.13's C++ TransformerEncoderLayer has no pre-norm option):
// 4x4 patch conv 1 -> 64, class token, learned positions, dropout 0.1, 4 pre-norm layers
// (4 heads, feed-forward 128, GELU, dropout 0.1 on the attention weights and both residual
// branches and inside the feed-forward), final LayerNorm, head on the class token.
struct TorchVitLayer : torch::nn::Module {
  torch::nn::Linear q{64, 64}, k{64, 64}, v{64, 64}, o{64, 64}, inner{64, 128}, outer{128, 64};
  torch::nn::LayerNorm n1{torch::nn::LayerNormOptions({64})}, n2{torch::nn::LayerNormOptions({64})};
  torch::nn::Dropout drop{0.1};
  TorchVitLayer() {
    register_module("q", q);
    register_module("k", k);
    register_module("v", v);
    register_module("o", o);
    register_module("inner", inner);
    register_module("outer", outer);
    register_module("n1", n1);
    register_module("n2", n2);
    register_module("drop", drop);
  }
  torch::Tensor forward(torch::Tensor x) {  // [N, L, 64]
    const auto n = x.size(0), l = x.size(1);
    auto h = n1(x);
    auto split = [&](torch::Tensor t) { return t.view({n, l, 4, 16}).transpose(1, 2); };  // [N, 4, L, 16]
    auto scores = torch::matmul(split(q(h)), split(k(h)).transpose(-2, -1)) / 4.0;  // sqrt(16)
    auto att = torch::matmul(drop(torch::softmax(scores, -1)), split(v(h))).transpose(1, 2).reshape({n, l, 64});
    x = x + drop(o(att));
    return x + drop(outer(drop(torch::gelu(inner(n2(x))))));
  }
};
struct TorchVit : torch::nn::Module {
  torch::nn::Conv2d patch{torch::nn::Conv2dOptions(1, 64, 4).stride(4)};
  torch::Tensor cls, pos;
  torch::nn::ModuleList layers;
  torch::nn::LayerNorm norm{torch::nn::LayerNormOptions({64})};
  torch::nn::Linear head{64, 10};
  torch::nn::Dropout drop{0.1};
  TorchVit() {
    register_module("patch", patch);
    cls = register_parameter("cls", torch::randn({1, 1, 64}) * 0.02);
    pos = register_parameter("pos", torch::randn({1, 50, 64}) * 0.02);
    for (int i = 0; i < 4; ++i) layers->push_back(TorchVitLayer());
    register_module("layers", layers);
    register_module("norm", norm);
    register_module("head", head);
    register_module("drop", drop);
  }
  torch::Tensor forward(torch::Tensor x) {
    const auto n = x.size(0);
    auto h = patch(x).flatten(2).transpose(1, 2);  // [N, 49, 64]
    h = drop(torch::cat({cls.expand({n, 1, 64}), h}, 1) + pos);
    for (auto& m : *layers) h = m->as<TorchVitLayer>()->forward(h);
    return head(norm(h).select(1, 0));
  }
};

torch::Tensor torch_input(std::vector<float>& v, std::vector<long> shape) {
  return torch::from_blob(v.data(), shape, torch::kFloat32).clone();
}

void cnn_rows(int warm, int reps) {
  const std::size_t bs = 128;
  Batch data = make_batch(bs, 784, 10, 1);
  const tensor::Device ad = tensor::Device::default_device().autodiff();
  train::Model model("cnn", 28, 28, 10, 42, ad);
  auto adam = tensor::optim::ModuleOptimizer::adam();
  auto ours = [&] {
    auto x = Tensor<4>::from_data(TensorData::from(data.x, Shape{bs, 1, 28, 28}), ad);
    auto y = Tensor<2>::from_data(TensorData::from(data.y, Shape{bs, 10}), ad);
    auto loss = train::cross_entropy(model.forward(x), y);
    auto grads = loss.backward();
    adam.step(1e-3, model, grads);
    (void)loss.to_vec<float>();  // the loss reaches the host each step, as in tensorctl train
  };
  torch::manual_seed(42);
  TorchCnn net;
  torch::optim::Adam topt(net.parameters(), torch::optim::AdamOptions(1e-3));
  const auto labels = torch::tensor(data.labels);
  auto theirs = [&] {
    auto x = torch_input(data.x, {static_cast<long>(bs), 1, 28, 28});
    topt.zero_grad();
    auto loss = torch::nn::functional::cross_entropy(net.forward(x), labels);
    loss.backward();
    topt.step();
    (void)loss.item<float>();
  };
  const Result r = measure(warm, reps, ours, theirs);
  row("CNN train step, batch 128 (Adam)", r);
  std::printf("| CNN training images/s | %.0f | %.0f | %.2f |\n", static_cast<double>(bs) / r.ours,
              static_cast<double>(bs) / r.torch, r.torch / r.ours);
  std::fflush(stdout);
}

// The vit's training step (batch 128, AdamW wd 0.05, dropout on), libtensor's model being
// tensorctl train's own.
void vit_rows(int warm, int reps) {
  const std::size_t bs = 128;
  Batch data = make_batch(bs, 784, 10, 3);
  const tensor::Device ad = tensor::Device::default_device().autodiff();
  train::Model model("vit", 28, 28, 10, 42, ad);
  auto adamw = tensor::optim::ModuleOptimizer::adamw(tensor::optim::AdamWConfig{.weight_decay = 0.05}, true);
  auto ours = [&] {
    auto x = Tensor<4>::from_data(TensorData::from(data.x, Shape{bs, 1, 28, 28}), ad);
    auto y = Tensor<2>::from_data(TensorData::from(data.y, Shape{bs, 10}), ad);
    auto loss = train::cross_entropy(model.forward(x), y);
    auto grads = loss.backward();
    adamw.step(1e-3, model, grads);
    (void)loss.to_vec<float>();
  };
  torch::manual_seed(42);
  TorchVit net;
  net.train();
  torch::optim::AdamW topt(net.parameters(), torch::optim::AdamWOptions(1e-3).weight_decay(0.05));
  const auto labels = torch::tensor(data.labels);
  auto theirs = [&] {
    auto x = torch_input(data.x, {static_cast<long>(bs), 1, 28, 28});
    topt.zero_grad();
    auto loss = torch::nn::functional::cross_entropy(net.forward(x), labels);
    loss.backward();
    topt.step();
    (void)loss.item<float>();
  };
  const Result r = measure(warm, reps, ours, theirs);
  row("ViT train step, batch 128 (AdamW)", r);
  std::printf("| ViT training images/s | %.0f | %.0f | %.2f |\n", static_cast<double>(bs) / r.ours,
              static_cast<double>(bs) / r.torch, r.torch / r.ours);
  std::fflush(stdout);
}

void mlp_rows(int warm, int reps) {
  const std::size_t bs = 256;
  Batch data = make_batch(bs, 784, 10, 2);
  const tensor::Device ad = tensor::Device::default_device().autodiff();
  ad.seed(7);
  struct Mlp : tensor::Module {
    std::vector<tensor::nn::Linear> layers;
    void visit(tensor::ModuleVisitor& v) override { v.module("fc", layers); }
  } mlp;
  auto& layers = mlp.layers;
  layers.emplace_back(tensor::nn::LinearConfig{.d_input = 784, .d_output = 512}, ad);
  layers.emplace_back(tensor::nn::LinearConfig{.d_input = 512, .d_output = 512}, ad);
  layers.emplace_back(tensor::nn::LinearConfig{.d_input = 512, .d_output = 10}, ad);
  auto sgd = tensor::optim::ModuleOptimizer::sgd();
  using tensor::activation::relu;
  auto ours = [&] {
    auto x = Tensor<2>::from_data(TensorData::from(data.x, Shape{bs, 784}), ad);
    auto y = Tensor<2>::from_data(TensorData::from(data.y, Shape{bs, 10}), ad);
    auto logits = layers[2].forward(relu(layers[1].forward(relu(layers[0].forward(x)))));
    auto loss = train::cross_entropy(logits, y);
    auto grads = loss.backward();
    sgd.step(0.01, mlp, grads);
    (void)loss.to_vec<float>();
  };
  torch::manual_seed(7);
  TorchMlp net;
  torch::optim::SGD topt(net.parameters(), torch::optim::SGDOptions(0.01));
  const auto labels = torch::tensor(data.labels);
  auto theirs = [&] {
    auto x = torch_input(data.x, {static_cast<long>(bs), 784});
    topt.zero_grad();
    auto loss = torch::nn::functional::cross_entropy(net.forward(x), labels);
    loss.backward();
    topt.step();
    (void)loss.item<float>();
  };
  row("MLP 784-512-512-10 train step, batch 256 (SGD)", measure(warm, reps, ours, theirs));
}

// Tape bookkeeping: 1,000 adds of [4] tensors, tracked (autodiff leaves) vs untracked, per op.
void tape_rows(int reps) {
  const tensor::Device dev = tensor::Device::default_device();
  const tensor::Device ad = dev.autodiff();
  const auto a = Tensor<1>::full({4}, 1.0f, dev), b = Tensor<1>::full({4}, 2.0f, dev);
  const auto ta = Tensor<1>::full({4}, 1.0f, ad).require_grad(), tb = Tensor<1>::full({4}, 2.0f, ad).require_grad();
  auto xa = torch::full({4}, 1.0f), xb = torch::full({4}, 2.0f);
  auto ya = torch::full({4}, 1.0f).requires_grad_(), yb = torch::full({4}, 2.0f).requires_grad_();
  const int iters = 1000;
  std::optional<Tensor<1>> c;
  torch::Tensor tc;
  row("add [4] untracked (per op)",
      measure(2, reps, [&] { for (int i = 0; i < iters; ++i) c = a + b; }, [&] {
        torch::NoGradGuard ng;
        for (int i = 0; i < iters; ++i) tc = xa + xb;
      }),
      iters);
  row("add [4] tracked (per op)", measure(2, reps, [&] { for (int i = 0; i < iters; ++i) c = ta + tb; }, [&] {
        for (int i = 0; i < iters; ++i) tc = ya + yb;
      }),
      iters);
  // A chain of 1,000 tracked adds and its backward, per op.
  row("1,000 chained tracked adds + backward (per op)", measure(1, reps,
      [&] {
        auto s = ta;
        for (int i = 0; i < iters; ++i) s = s + tb;
        auto g = s.sum().backward();
      },
      [&] {
        auto s = ya;
        for (int i = 0; i < iters; ++i) s = s + yb;
        s.sum().backward();
        ya.mutable_grad().reset();
        yb.mutable_grad().reset();
      }),
      iters);
}

// Issue 13's small-CNN conv rows: forward + both backward passes, no autodiff tape.
void conv_rows(int warm, int reps) {
  struct Case {
    std::size_t n, ci, co, hw;
  };
  for (const Case c : {Case{128, 1, 32, 28}, Case{128, 32, 64, 14}}) {
    const auto xv = normal_values(c.n * c.ci * c.hw * c.hw, 3), wv = normal_values(c.co * c.ci * 9, 4);
    const Shape xs{c.n, c.ci, c.hw, c.hw}, ws{c.co, c.ci, 3, 3};
    const tensor::Device ad = tensor::Device::default_device().autodiff();
    const auto x = Tensor<4>::from_data(TensorData::from(xv, xs), ad).require_grad();
    const auto w = Tensor<4>::from_data(TensorData::from(wv, ws), ad).require_grad();
    tensor::nn::ConvOptions<2> o;
    o.padding = {1, 1};
    const long n = static_cast<long>(c.n), ci = static_cast<long>(c.ci), co = static_cast<long>(c.co),
               hw = static_cast<long>(c.hw);
    auto tx = torch::from_blob(const_cast<float*>(xv.data()), {n, ci, hw, hw}).clone().requires_grad_();
    auto tw = torch::from_blob(const_cast<float*>(wv.data()), {co, ci, 3, 3}).clone().requires_grad_();
    std::optional<Tensor<4>> y;
    torch::Tensor ty;
    const std::string name = "conv2d [" + std::to_string(c.n) + "," + std::to_string(c.ci) + "," + std::to_string(c.hw) +
                             "," + std::to_string(c.hw) + "] -> " + std::to_string(c.co) + " 3x3 pad 1";
    {
      torch::NoGradGuard ng;
      const auto xi = x.inner(), wi = w.inner();
      row(name + " fwd", measure(warm, reps, [&] { y = tensor::nn::conv2d(xi, wi, std::nullopt, o); },
                                 [&] { ty = torch::conv2d(tx, tw, {}, 1, 1); }));
    }
    row(name + " fwd+bwd (dx, dw)", measure(warm, reps,
        [&] {
          auto g = tensor::nn::conv2d(x, w, std::nullopt, o).sum().backward();
        },
        [&] {
          torch::conv2d(tx, tw, {}, 1, 1).sum().backward();
          tx.mutable_grad().reset();
          tw.mutable_grad().reset();
        }));
  }
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 2, steps = 15;
  std::string only;
  for (int i = 1; i + 1 < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--threads") threads = std::atoi(argv[++i]);
    else if (a == "--steps") steps = std::atoi(argv[++i]);
    else if (a == "--only") only = argv[++i];
  }
  at::set_num_threads(threads);
  at::set_num_interop_threads(1);
  const char* omp = std::getenv("OMP_NUM_THREADS");
  std::printf("libtensor vs libtorch %s, %d threads (libtensor: OMP_NUM_THREADS=%s), medians of %d interleaved steps\n\n",
              TORCH_VERSION, threads, omp ? omp : "unset", steps);
  std::printf("| workload | libtensor | libtorch | ratio |\n|---|---|---|---|\n");
  if (only.empty() || only == "cnn") cnn_rows(3, steps);
  if (only.empty() || only == "vit") vit_rows(2, steps);
  if (only.empty() || only == "mlp") mlp_rows(3, 2 * steps);
  if (only.empty() || only == "tape") tape_rows(steps);
  if (only.empty() || only == "conv") conv_rows(2, steps);
  return 0;
}
