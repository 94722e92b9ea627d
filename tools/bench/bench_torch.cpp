// Benchmark-only: issue 12's table (tensor ops), issue 13's (module ops) and issue 32's (dynamic
// int8 Linear, --only quant), libtensor
// beside libtorch in one process.
// Not built by meson (libtorch's headers are slow to compile and warn under -Werror):
// scripts/bench-torch.sh installs Debian's libtorch-dev and compiles this with g++
// against the built libtensor. Both libraries run on the same number of threads
// (2 unless --threads N); each row times the two alternately, rep by rep, after one
// warm-up each, and prints the medians and ratio = libtorch / libtensor (> 1: we are
// faster).
#include <torch/torch.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include <tensor/nn.hpp>
#include <tensor/quantization.hpp>
#include <tensor/tensor.hpp>

#include "tools/bench/bench_util.hpp"

namespace {

using Clock = std::chrono::steady_clock;

using tensor_bench::fmt_time;
using tensor_bench::median;
struct Result {
  double ours, torch;
};

// Interleaved rounds; the order alternates (theirs first in even rounds, ours first in
// odd ones) so neither library always runs right after the other's cache and thread
// state. `ref`, when given, is a third workload timed in the same rounds (median in
// Result::ref).
struct Result3 {
  double ours, torch, ref;
};
Result3 measure3(int reps, const std::function<void()>& ours, const std::function<void()>& theirs,
                 const std::function<void()>& ref) {
  ours();
  theirs();
  if (ref) ref();
  std::vector<double> a, b, c;
  auto timed = [](const std::function<void()>& f, std::vector<double>& into) {
    const auto t0 = Clock::now();
    f();
    into.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  };
  for (int r = 0; r < reps; ++r) {
    if (r % 2 == 0) {
      timed(theirs, b);
      timed(ours, a);
    } else {
      timed(ours, a);
      timed(theirs, b);
    }
    if (ref) timed(ref, c);
  }
  return {median(a), median(b), c.empty() ? 0.0 : median(c)};
}

Result measure(int reps, const std::function<void()>& ours, const std::function<void()>& theirs) {
  const Result3 r = measure3(reps, ours, theirs, {});
  return {r.ours, r.torch};
}

std::string g_filter;  // --filter SUBSTR: only rows whose name contains it

void row(const std::string& name, const std::function<Result()>& run, double per = 1.0) {
  if (!g_filter.empty() && name.find(g_filter) == std::string::npos) return;
  const Result r = run();
  std::printf("| %s | %s | %s | %.2f |\n", name.c_str(), fmt_time(r.ours / per).c_str(), fmt_time(r.torch / per).c_str(),
              r.torch / r.ours);
  std::fflush(stdout);
}

// Rows bound by memory bandwidth also time a plain loop over the same bytes (two OpenMP
// threads, static halves, vectorised by the compiler): the machine's ceiling in that
// run, printed under the table with each library's GB/s.
std::vector<std::string> g_ceilings;
int g_threads = 2;

void ceiling_row(const std::string& name, double gb, const std::function<Result3()>& run) {
  if (!g_filter.empty() && name.find(g_filter) == std::string::npos) return;
  const Result3 r = run();
  std::printf("| %s | %s | %s | %.2f |\n", name.c_str(), fmt_time(r.ours).c_str(), fmt_time(r.torch).c_str(),
              r.torch / r.ours);
  std::fflush(stdout);
  char b[320];
  std::snprintf(b, sizeof b, "%s: %.0f MB moved; plain loop %s (%.1f GB/s); libtensor %.1f GB/s (%.2f of it), libtorch %.1f GB/s (%.2f)",
                name.c_str(), gb * 1e3, fmt_time(r.ref).c_str(), gb / r.ref, gb / r.ours, r.ref / r.ours, gb / r.torch,
                r.ref / r.torch);
  g_ceilings.push_back(b);
}

void loop_add(float* a, const float* b, long n) {
#pragma omp parallel for simd schedule(static) num_threads(g_threads)
  for (long i = 0; i < n; ++i) a[i] += b[i];
}
float loop_sum(const float* a, long n) {
  float s = 0;
#pragma omp parallel for simd reduction(+ : s) schedule(static) num_threads(g_threads)
  for (long i = 0; i < n; ++i) s += a[i];
  return s;
}
volatile float g_sink = 0;

void ops_table(int reps, const tensor::Device& dev) {
  using tensor::Tensor;
  namespace act = tensor::activation;
  auto sync = [&] { dev.sync(); };
  std::printf("| workload | libtensor | libtorch | ratio |\n|---|---|---|---|\n");
  for (const std::size_t n : {64u, 256u, 1024u, 2048u}) {
    const auto a = Tensor<2>::full({n, n}, 0.5f), b = Tensor<2>::full({n, n}, 0.25f);
    const auto ta = torch::full({(long)n, (long)n}, 0.5f), tb = torch::full({(long)n, (long)n}, 0.25f);
    std::optional<Tensor<2>> c;
    torch::Tensor tc;
    row("matmul f32 n = " + std::to_string(n), [&] { return measure(n <= 256 ? 3 * reps : reps, [&] { c = a.matmul(b); sync(); },
                                                        [&] { tc = torch::matmul(ta, tb); }); });
  }
  for (const std::size_t n : {256u, 512u, 1024u, 2048u}) {
    const auto a = Tensor<2>::full({n, n}, 0.5f, tensor::Device::default_device(), tensor::DType::BF16);
    const auto b = Tensor<2>::full({n, n}, 0.25f, tensor::Device::default_device(), tensor::DType::BF16);
    const auto ta = torch::full({(long)n, (long)n}, 0.5f, torch::kBFloat16);
    const auto tb = torch::full({(long)n, (long)n}, 0.25f, torch::kBFloat16);
    std::optional<Tensor<2>> c;
    torch::Tensor tc;
    row("matmul bf16 n = " + std::to_string(n), [&] { return measure(n <= 256 ? 3 * reps : reps, [&] { c = a.matmul(b); sync(); },
                                                         [&] { tc = torch::matmul(ta, tb); }); });
  }
  const std::size_t n = 16u << 20;
  const auto ln = static_cast<long>(n);
  {
    auto a = Tensor<1>::full({n}, 1.0f);
    const auto b = Tensor<1>::full({n}, 2.0f);
    auto ta = torch::full({ln}, 1.0f);
    const auto tb = torch::full({ln}, 2.0f);
    std::optional<Tensor<1>> c;
    torch::Tensor tc;
    row("add 16M allocating", [&] { return measure(reps, [&] { c = a + b; sync(); }, [&] { tc = ta + tb; }); });
    c.reset();
    tc = torch::Tensor();
    std::vector<float> x(n), y(n);
    loop_add(x.data(), y.data(), ln);  // first touch on both threads
    loop_add(y.data(), x.data(), ln);
    const double gb = static_cast<double>(n) * 4 / 1e9;  // one stream
    ceiling_row("add 16M in place", 3 * gb, [&] {
      return measure3(reps, [&] { a = std::move(a) + b; sync(); }, [&] { ta.add_(tb); }, [&] { loop_add(x.data(), y.data(), ln); });
    });
    const auto e = Tensor<1>::full({n}, 0.5f);
    const auto te = torch::full({ln}, 0.5f);
    row("exp 16M", [&] { return measure(reps, [&] { c = e.exp(); sync(); }, [&] { tc = te.exp(); }); });
    c.reset();
    tc = torch::Tensor();
    ceiling_row("sum 16M", gb, [&] {
      return measure3(reps, [&] { auto s = b.sum(); sync(); }, [&] { auto s = tb.sum(); }, [&] { g_sink = loop_sum(y.data(), ln); });
    });
    const auto g = Tensor<1>::random({n}, tensor::Distribution::normal(0, 2));
    const auto tg = torch::randn({ln}) * 2;
    row("gelu 16M", [&] { return measure(reps, [&] { c = act::gelu(g); sync(); }, [&] { tc = torch::gelu(tg); }); });
    row("sigmoid 16M", [&] { return measure(reps, [&] { c = act::sigmoid(g); sync(); }, [&] { tc = torch::sigmoid(tg); }); });
  }
  {
    const std::size_t m = 4096;
    const auto a = Tensor<2>::full({m, m}, 1.0f);
    const auto ta = torch::full({(long)m, (long)m}, 1.0f);
    std::optional<Tensor<1>> c;
    torch::Tensor tc;
    const std::array<std::int64_t, 1> flat{static_cast<std::int64_t>(m * m)};
    row("transpose -> contiguous 4096^2", [&] { return measure(reps, [&] { c = a.transpose().reshape(flat); sync(); },
                                                   [&] { tc = ta.t().contiguous(); }); });
  }
  {
    const auto a = Tensor<1>::full({4}, 1.0f), b = Tensor<1>::full({4}, 2.0f);
    const auto ta = torch::full({4}, 1.0f), tb = torch::full({4}, 2.0f);
    std::optional<Tensor<1>> c;
    torch::Tensor tc;
    const int iters = 1000;
    row("1,000 adds of [4] (per op)", [&] { return measure(reps, [&] { for (int i = 0; i < iters; ++i) c = a + b; sync(); },
                                             [&] { for (int i = 0; i < iters; ++i) tc = ta + tb; }); },
        iters);
  }
  {
    const std::size_t r = 4096, k = 1024;
    const auto x = Tensor<2>::random({r, k}, tensor::Distribution::normal(0, 2));
    const auto tx = torch::randn({(long)r, (long)k}) * 2;
    std::optional<Tensor<2>> c;
    torch::Tensor tc;
    row("sum_dim(0) of [4096, 1024]", [&] { return measure(reps, [&] { c = x.sum_dim(0); sync(); }, [&] { tc = tx.sum(0, true); }); });
    row("sum_dim(1) of [4096, 1024]", [&] { return measure(reps, [&] { c = x.sum_dim(1); sync(); }, [&] { tc = tx.sum(1, true); }); });
    row("argmax(1) of [4096, 1024]", [&] { return measure(reps, [&] { auto i = x.argmax(1); sync(); }, [&] { tc = tx.argmax(1, true); }); });
    row("argmax(0) of [4096, 1024]", [&] { return measure(reps, [&] { auto i = x.argmax(0); sync(); }, [&] { tc = tx.argmax(0, true); }); });
    row("max_dim(1) of [4096, 1024]", [&] { return measure(reps, [&] { c = x.max_dim(1); sync(); }, [&] { tc = std::get<0>(tx.max(1, true)); }); });
    row("softmax(1) of [4096, 1024]", [&] { return measure(reps, [&] { c = act::softmax(x, 1); sync(); }, [&] { tc = torch::softmax(tx, 1); }); });
    row("softmax(0) of [4096, 1024]", [&] { return measure(reps, [&] { c = act::softmax(x, 0); sync(); }, [&] { tc = torch::softmax(tx, 0); }); });
    row("log_softmax(1) of [4096, 1024]",
        [&] { return measure(reps, [&] { c = act::log_softmax(x, 1); sync(); }, [&] { tc = torch::log_softmax(tx, 1); }); });
    row("mean_dim(1) + var(1) of [4096, 1024]", [&] { return measure(reps,
        [&] {
          auto mu = x.mean_dim(1);
          auto d = x - mu;
          c = (d * d).mean_dim(1);
          sync();
        },
        [&] { auto vm = torch::var_mean(tx, 1, /*unbiased=*/false, /*keepdim=*/true); }); });
  }
  {
    const std::size_t r = 1024, k = 1024;
    const auto x = Tensor<2>::random({r, k}, tensor::Distribution::normal(0, 1));
    const auto tx = torch::randn({(long)r, (long)k});
    std::optional<Tensor<2>> c;
    torch::Tensor tc;
    row("sort(1) of [1024, 1024]", [&] { return measure(reps, [&] { c = x.sort(1); sync(); }, [&] { tc = std::get<0>(tx.sort(1)); }); });
    row("argsort(1) of [1024, 1024]", [&] { return measure(reps, [&] { auto i = x.argsort(1); sync(); }, [&] { tc = tx.argsort(static_cast<int64_t>(1), false); }); });
    row("topk(8, dim 1) of [1024, 1024]", [&] { return measure(reps, [&] { auto t = x.topk(8, 1); sync(); }, [&] { tc = std::get<0>(tx.topk(8, 1)); }); });
  }
}

// Issue 13's module ops, f32, channels first. Backward rows time one gradient each
// (at::convolution_backward with one output asked for, as autograd would call it).
void nn_table(int reps, const tensor::Device& dev) {
  using tensor::Tensor;
  namespace nn = tensor::nn;
  auto sync = [&] { dev.sync(); };
  const auto normal = tensor::Distribution::normal(0, 1);
  using Dims = std::array<std::size_t, 4>;
  auto pair = [&](Dims d) {
    return std::pair{Tensor<4>::random({d[0], d[1], d[2], d[3]}, normal),
                     torch::randn({(long)d[0], (long)d[1], (long)d[2], (long)d[3]})};
  };
  std::printf("\n| module op | libtensor | libtorch | ratio |\n|---|---|---|---|\n");
  std::optional<Tensor<4>> c;
  torch::Tensor tc;
  // One 3x3 pad-1 convolution: forward, x gradient, weight gradient.
  auto conv_rows = [&](const std::string& name, Dims xs, std::size_t c_out, std::size_t groups, bool grads) {
    const auto [x, tx] = pair(xs);
    const auto [w, tw] = pair({c_out, xs[1] / groups, 3, 3});
    const auto [dy, tdy] = pair({xs[0], c_out, xs[2], xs[3]});
    nn::ConvOptions<2> o;
    o.padding = {1, 1};
    o.groups = static_cast<std::int64_t>(groups);
    const std::vector<int64_t> s1{1, 1}, p1{1, 1}, op{0, 0};
    const auto g = static_cast<int64_t>(groups);
    row(name + " forward", [&] { return measure(reps, [&] { c = nn::conv2d(x, w, std::nullopt, o); sync(); },
                                   [&] { tc = torch::conv2d(tx, tw, {}, s1, p1, s1, g); }); });
    if (!grads) return;
    row(name + " x grad", [&] { return measure(reps, [&] { c = nn::conv2d_x_backward(x, w, dy, o); sync(); },
                                  [&] { tc = std::get<0>(at::convolution_backward(tdy, tx, tw, c10::nullopt, s1, p1, s1,
                                                                                  false, op, g, {true, false, false})); }); });
    row(name + " weight grad", [&] { return measure(reps, [&] { c = nn::conv2d_weight_backward(x, w, dy, o); sync(); },
                                       [&] { tc = std::get<1>(at::convolution_backward(tdy, tx, tw, c10::nullopt, s1, p1, s1,
                                                                                       false, op, g, {false, true, false})); }); });
  };
  conv_rows("conv2d [32,64,56,56] 3x3 64->64", {32, 64, 56, 56}, 64, 1, true);
  conv_rows("CNN conv1 [128,1,28,28] 3x3 ->32", {128, 1, 28, 28}, 32, 1, true);
  conv_rows("CNN conv2 [128,32,14,14] 3x3 ->64", {128, 32, 14, 14}, 64, 1, true);
  conv_rows("depthwise 3x3 [32,128,56,56]", {32, 128, 56, 56}, 128, 128, true);
  {
    const auto [x, tx] = pair({32, 64, 56, 56});
    nn::MaxPoolOptions<2> mo;
    mo.kernel_size = {2, 2};
    mo.stride = {2, 2};
    row("max_pool2d 2x2 [32,64,56,56]", [&] { return measure(reps, [&] { c = nn::max_pool2d(x, mo); sync(); },
                                               [&] { tc = torch::max_pool2d(tx, {2, 2}, {2, 2}); }); });
    row("adaptive_avg_pool2d 7x7 [32,64,56,56]", [&] { return measure(reps, [&] { c = nn::adaptive_avg_pool2d(x, {7, 7}); sync(); },
                                                        [&] { tc = torch::adaptive_avg_pool2d(tx, {7, 7}); }); });
    row("adaptive_avg_pool2d 1x1 [32,64,56,56]", [&] { return measure(reps, [&] { c = nn::adaptive_avg_pool2d(x, {1, 1}); sync(); },
                                                        [&] { tc = torch::adaptive_avg_pool2d(tx, {1, 1}); }); });
    nn::InterpolateOptions io;
    io.mode = nn::InterpolateMode::Bilinear;
    row("bilinear x2 [32,64,56,56]", [&] { return measure(reps, [&] { c = nn::interpolate(x, {112, 112}, io); sync(); },
                                            [&] { tc = torch::upsample_bilinear2d(tx, {112, 112}, false); }); });
  }
  {
    std::optional<Tensor<2>> c2;
    const auto x = Tensor<2>::random({4096, 1024}, normal);
    const auto tx = torch::randn({4096, 1024});
    const auto gamma = Tensor<1>::random({1024}, normal), beta = Tensor<1>::random({1024}, normal);
    const auto tgamma = torch::randn({1024}), tbeta = torch::randn({1024});
    row("layer_norm [4096,1024]", [&] { return measure(reps, [&] { c2 = nn::layer_norm(x, gamma, beta); sync(); },
                                          [&] { tc = torch::layer_norm(tx, {1024}, tgamma, tbeta); }); });
  }
  {
    const auto [q, tq] = pair({8, 8, 512, 64});
    const auto [k, tk] = pair({8, 8, 512, 64});
    const auto [v, tv] = pair({8, 8, 512, 64});
    const auto causal = torch::ones({512, 512}, torch::kBool).triu(1);
    // libtorch: softmax(q k^T / sqrt(64) [masked]) v in torch ops, and 1.13's
    // at::_scaled_dot_product_attention (its CPU path composes the same ops).
    auto torch_attn = [&](bool masked) {
      auto s = torch::matmul(tq, tk.transpose(-2, -1)).mul_(0.125);
      if (masked) s.masked_fill_(causal, -std::numeric_limits<float>::infinity());
      return torch::matmul(torch::softmax(s, -1), tv);
    };
    nn::AttentionModuleOptions ao;
    row("attention [8,8,512,64] vs torch ops", [&] { return measure(reps, [&] { c = nn::attention(q, k, v); sync(); },
                                                       [&] { tc = torch_attn(false); }); });
    row("attention [8,8,512,64] vs _sdpa", [&] { return measure(reps, [&] { c = nn::attention(q, k, v); sync(); },
                                                   [&] { tc = std::get<0>(at::_scaled_dot_product_attention(tq, tk, tv)); }); });
    ao.is_causal = true;
    row("attention causal vs torch ops", [&] { return measure(reps, [&] { c = nn::attention(q, k, v, std::nullopt, std::nullopt, ao); sync(); },
                                                 [&] { tc = torch_attn(true); }); });
    row("attention causal vs _sdpa",
        [&] { return measure(reps, [&] { c = nn::attention(q, k, v, std::nullopt, std::nullopt, ao); sync(); },
                [&] { tc = std::get<0>(at::_scaled_dot_product_attention(tq, tk, tv, {}, 0.0, false, true)); }); });
  }
}

// Issue 32: a dynamically quantized int8 Linear, y = x w + b with the weight int8 per output
// channel (symmetric, scale = amax / 127) and the activation quantized per call. Ours:
// nn::linear(x, quantize_dynamic(w, q8s block {K, 1})), which runs oneDNN's int8 matmul
// (weight reorder cached with the weight). libtorch 1.13: quantized::linear_prepack on a
// quantize_per_channel weight, then quantized::linear_dynamic under its current qengine
// (Debian's build has no FBGEMM: the at::fbgemm_* entry points throw, the qengines are
// QNNPACK and ONEDNN). Both sides pack the weight once, outside the timed loop. Each shape
// also times both f32 Linears, and checks both int8 results against libtorch's f32 result.
struct TorchDynLinear {
  c10::IValue packed;
  c10::OperatorHandle op;
  torch::Tensor operator()(const torch::Tensor& x) const {
    torch::jit::Stack s{x, packed, false};
    op.callBoxed(s);
    return s[0].toTensor();
  }
};

// Packs w [N, K] (libtorch's layout) per output channel; nullopt with the reason where the
// ops are missing or throw.
std::optional<TorchDynLinear> torch_dyn_linear(const torch::Tensor& w, const torch::Tensor& b, std::string& why) {
  auto& d = c10::Dispatcher::singleton();
  const auto prepack = d.findSchema({"quantized::linear_prepack", ""});
  const auto dyn = d.findSchema({"quantized::linear_dynamic", ""});
  if (!prepack || !dyn) {
    why = "quantized::linear_prepack / linear_dynamic are not registered in this libtorch";
    return std::nullopt;
  }
  try {
    const auto scales = (std::get<0>(w.abs().max(1)) / 127.0).clamp_min(1e-12).to(torch::kDouble);
    const auto qw = at::quantize_per_channel(w, scales, torch::zeros({w.size(0)}, torch::kLong), 0, torch::kQInt8);
    torch::jit::Stack s{qw, b};
    prepack->callBoxed(s);
    return TorchDynLinear{s[0], *dyn};
  } catch (const std::exception& e) {
    why = std::string("quantized::linear_prepack threw: ") + std::string(e.what()).substr(0, 160);
    return std::nullopt;
  }
}

std::string qengine_list() {
  std::string out;
  for (const auto e : at::globalContext().supportedQEngines())
    if (e != at::QEngine::NoQEngine) out += (out.empty() ? "" : ", ") + c10::toString(e);
  return out;
}

double rel_err(const torch::Tensor& y, const torch::Tensor& ref) {
  return ((y - ref).norm() / ref.norm()).item<double>();
}

void quant_table(int reps, const tensor::Device& dev) {
  using tensor::Tensor;
  namespace nn = tensor::nn;
  auto sync = [&] { dev.sync(); };
  const auto engines = at::globalContext().supportedQEngines();
  const bool has_fbgemm = std::find(engines.begin(), engines.end(), at::QEngine::FBGEMM) != engines.end();
  std::printf("\nDynamic int8 Linear (weight int8 per output channel, activation quantized per call); libtorch qengine %s "
              "(supported: %s; FBGEMM %s)\n",
              c10::toString(at::globalContext().qEngine()).c_str(), qengine_list().c_str(),
              has_fbgemm ? "built in" : "not built in");
  std::printf("\n| linear (M x K x N) | libtensor | libtorch | ratio |\n|---|---|---|---|\n");
  struct Shape { std::size_t m, k, n; const char* what; };
  std::vector<std::string> notes;
  for (const Shape sh : {Shape{1, 4096, 4096, " (GEMV)"}, Shape{64, 1024, 1024, ""}, Shape{1024, 1024, 1024, ""},
                         Shape{500, 3136, 128, " (cnn fc1, eval batch)"}}) {
    const std::string dims = std::to_string(sh.m) + " x " + std::to_string(sh.k) + " x " + std::to_string(sh.n) + sh.what;
    if (!g_filter.empty() && ("int8 " + dims).find(g_filter) == std::string::npos &&
        ("f32 " + dims).find(g_filter) == std::string::npos)
      continue;
    const auto uni = tensor::Distribution::uniform(-1, 1);
    const auto x = Tensor<2>::random({sh.m, sh.k}, uni), w = Tensor<2>::random({sh.k, sh.n}, uni);
    const auto b = Tensor<1>::random({sh.n}, uni);
    auto xv = x.to_vec<float>(), wv = w.to_vec<float>(), bv = b.to_vec<float>();
    const auto lm = static_cast<long>(sh.m), lk = static_cast<long>(sh.k), ln = static_cast<long>(sh.n);
    const auto tx = torch::from_blob(xv.data(), {lm, lk}).clone();
    const auto tw = torch::from_blob(wv.data(), {lk, ln}).t().contiguous();  // [N, K]
    const auto tb = torch::from_blob(bv.data(), {ln}).clone();
    const auto scheme = tensor::QuantScheme{}.with_value(tensor::QuantValue::Q8S).with_store(tensor::QuantStore::Native).with_level(
        tensor::QuantLevel::block({static_cast<std::uint32_t>(sh.k), 1}));
    const auto wq = tensor::quantize_dynamic(w, scheme);
    std::string why;
    const auto tq = torch_dyn_linear(tw, tb, why);
    const int r = sh.m <= 64 ? 3 * reps : reps;
    std::optional<Tensor<2>> c;
    torch::Tensor tc;
    // values first (also the warm-up: our weight reorder, libtorch's first call)
    const auto ref = torch::linear(tx, tw, tb);
    auto to_torch = [&](const Tensor<2>& y) {
      auto v = y.to_vec<float>();
      return torch::from_blob(v.data(), {lm, ln}).clone();
    };
    const double e_ours_f32 = rel_err(to_torch(nn::linear(x, w, b)), ref);
    const double e_ours = rel_err(to_torch(nn::linear(x, wq, b)), ref);
    const double e_torch = tq ? rel_err((*tq)(tx), ref) : std::nan("");
    if (tq) {
      row("int8 " + dims, [&] { return measure(r, [&] { c = nn::linear(x, wq, b); sync(); }, [&] { tc = (*tq)(tx); }); });
    } else {
      std::printf("| int8 %s | (see below) | n/a: %s | - |\n", dims.c_str(), why.c_str());
    }
    row("f32 " + dims, [&] { return measure(r, [&] { c = nn::linear(x, w, b); sync(); }, [&] { tc = torch::linear(tx, tw, tb); }); });
    char line[400];
    std::snprintf(line, sizeof line,
                  "%s: rel. error (Frobenius) against libtorch's f32 Linear: libtensor int8 %.2e, libtorch int8 %.2e, "
                  "libtensor f32 %.2e%s",
                  dims.c_str(), e_ours, e_torch, e_ours_f32,
                  (e_ours < 1e-2 && (!tq || e_torch < 1e-2)) ? "" : "  ** above 1e-2 **");
    notes.push_back(line);
  }
  std::printf("\n");
  for (const std::string& n : notes) std::printf("- %s\n", n.c_str());
}

// One call of each int8 Linear with oneDNN's verbose mode on: the matmul implementation each
// library's call executes (both load Debian's libdnnl.so.2).
void quant_routes() {
  namespace nn = tensor::nn;
  using tensor::Tensor;
  const std::size_t m = 64, k = 1024, n = 1024;
  const auto uni = tensor::Distribution::uniform(-1, 1);
  const auto x = Tensor<2>::random({m, k}, uni), w = Tensor<2>::random({k, n}, uni);
  const auto b = Tensor<1>::random({n}, uni);
  const auto wq = tensor::quantize_dynamic(w, tensor::QuantScheme{}.with_value(tensor::QuantValue::Q8S).with_store(
                                                  tensor::QuantStore::Native).with_level(tensor::QuantLevel::block({1024, 1})));
  const auto tx = torch::randn({(long)m, (long)k}), tw = torch::randn({(long)n, (long)k}), tb = torch::randn({(long)n});
  std::string why;
  const auto tq = torch_dyn_linear(tw, tb, why);
  (void)nn::linear(x, wq, b);
  if (tq) (void)(*tq)(tx);
  std::printf("\nRoutes, 64 x 1024 x 1024 (ONEDNN_VERBOSE exec lines of one call each):\nlibtensor:\n");
  std::fflush(stdout);
  dnnl_set_verbose(1);
  (void)nn::linear(x, wq, b);
  std::fflush(stdout);
  dnnl_set_verbose(0);
  std::printf("libtorch:\n");
  std::fflush(stdout);
  if (tq) {
    dnnl_set_verbose(1);
    (void)(*tq)(tx);
    std::fflush(stdout);
    dnnl_set_verbose(0);
  }
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 2, reps = 11;
  std::string only;  // "ops", "nn" or "quant": one table only
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::string(argv[i]) == "--threads") threads = std::atoi(argv[++i]);
    if (std::string(argv[i]) == "--reps") reps = std::atoi(argv[++i]);
    if (std::string(argv[i]) == "--only") only = argv[++i];
    if (std::string(argv[i]) == "--filter") g_filter = argv[++i];
  }
  at::set_num_threads(threads);
  at::set_num_interop_threads(1);
  torch::NoGradGuard no_grad;
  const auto dev = tensor::Device::default_device();
  std::printf("libtensor vs libtorch %s (oneDNN %s), %d threads, median of %d interleaved rounds\n\n", TORCH_VERSION,
              at::hasMKLDNN() ? "on" : "off", threads, reps);
  g_threads = threads;
  if (only.empty() || only == "ops") {
    ops_table(reps, dev);
    if (!g_ceilings.empty()) std::printf("\nBandwidth-bound rows against a plain loop in the same rounds:\n");
    for (const std::string& c : g_ceilings) std::printf("- %s\n", c.c_str());
    std::printf("\n");
  }
  if (only.empty() || only == "nn") nn_table(reps, dev);
  if (only.empty() || only == "quant") {
    quant_table(reps, dev);
    quant_routes();
  }
  return 0;
}
