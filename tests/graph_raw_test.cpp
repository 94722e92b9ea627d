// Graph replay's raw path on the cpu (issue 28 step 3): elementwise nodes whose operands
// have the output's shape and dtype run as raw kernels on an arena planned at capture.
// Values are checked against loops written here and against the eager run (bitwise);
// broadcasting stays on the thunks; in-place and aliasing cases; a graph mixing raw and
// thunk nodes; host allocations per replay, counted by this binary's malloc.
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include <gtest/gtest.h>
#include <tensor/graph.hpp>
#include <tensor/loss.hpp>
#include <tensor/modules/core.hpp>
#include <tensor/modules/optim.hpp>
#include <tensor/tensor.hpp>

// ---- host allocations: every malloc-family call while armed (operator new ends here) ----
// A plain build replaces malloc and friends; under AddressSanitizer (the CI's sanitizer leg)
// the runtime owns them, so its allocation hook counts instead.
#if defined(__SANITIZE_ADDRESS__)
#define GRAPH_RAW_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define GRAPH_RAW_TEST_ASAN 1
#endif
#endif

namespace {
std::atomic<bool> g_armed{false};
std::atomic<std::size_t> g_allocs{0};
void note() {
  if (g_armed.load(std::memory_order_relaxed)) g_allocs.fetch_add(1, std::memory_order_relaxed);
}
}  // namespace

#ifdef GRAPH_RAW_TEST_ASAN
extern "C" int __sanitizer_install_malloc_and_free_hooks(void (*malloc_hook)(const volatile void*, std::size_t),
                                                         void (*free_hook)(const volatile void*));
namespace {
void on_malloc(const volatile void*, std::size_t) { note(); }
void on_free(const volatile void*) {}
const int kHooksInstalled = __sanitizer_install_malloc_and_free_hooks(&on_malloc, &on_free);
}  // namespace
#else
extern "C" {
void* __libc_malloc(std::size_t);
void* __libc_calloc(std::size_t, std::size_t);
void* __libc_realloc(void*, std::size_t);
void* __libc_memalign(std::size_t, std::size_t);
}
extern "C" void* malloc(std::size_t n) noexcept {
  note();
  return __libc_malloc(n);
}
extern "C" void* calloc(std::size_t a, std::size_t b) noexcept {
  note();
  return __libc_calloc(a, b);
}
extern "C" void* realloc(void* p, std::size_t n) noexcept {
  note();
  return __libc_realloc(p, n);
}
extern "C" void* aligned_alloc(std::size_t al, std::size_t n) noexcept {
  note();
  return __libc_memalign(al, n);
}
extern "C" int posix_memalign(void** p, std::size_t al, std::size_t n) noexcept {
  note();
  *p = __libc_memalign(al, n);
  return *p ? 0 : ENOMEM;
}
#endif

namespace {

using namespace tensor;

const Device kCpu = Device::parse("cpu");

// Allocations made by f() (replays), per call, rounded up: 0 means none in any of the calls.
template <class F>
std::size_t allocations(F&& f, int calls = 4, int warmups = 1) {
  for (int i = 0; i < warmups; ++i) f();  // a first call may rebuild the plan (see BroadcastViewsLeaveTheRawPath)
#ifdef GRAPH_RAW_TEST_ASAN
  EXPECT_NE(kHooksInstalled, 0) << "the sanitizer's allocation hook is not installed: nothing would be counted";
#endif
  g_allocs = 0;
  g_armed = true;
  for (int i = 0; i < calls; ++i) f();
  g_armed = false;
  return (g_allocs.load() + static_cast<std::size_t>(calls) - 1) / static_cast<std::size_t>(calls);
}

template <class T, class K>
Tensor<1, K> t1(const std::vector<T>& v) {
  return Tensor<1, K>::from_data(TensorData::from<T>(v, {v.size()}), kCpu);
}

// ((x + b) * 3 - x) / b, then abs and neg: Binary, Scalar and Unary nodes.
template <class T, class K>
Tensor<1, K> chain(const Tensor<1, K>& x, const Tensor<1, K>& b) {
  return -((((x + b) * 3) - x) / b).abs();
}
template <class T>
std::vector<T> chain_by_hand(const std::vector<T>& x, const std::vector<T>& b) {
  std::vector<T> out(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    const T q = static_cast<T>((static_cast<T>((x[i] + b[i]) * T(3)) - x[i]) / b[i]);  // ints: truncating division
    out[i] = static_cast<T>(-(q < 0 ? -q : q));
  }
  return out;
}

template <class T, class K>
void check_chain_dtype() {
  std::vector<T> xv{T(1), T(-7), T(12), T(5), T(-3), T(9)}, bv{T(2), T(3), T(-5), T(4), T(7), T(-2)};
  const auto x = t1<T, K>(xv), b = t1<T, K>(bv);
  auto g = capture(kCpu, [&] { return chain<T, K>(x, b); });
  const GraphStats s = g.stats();
  ASSERT_TRUE(s.native) << s.fallback_reason;
  EXPECT_EQ(s.raw_nodes, s.nodes) << "every node of the chain runs raw";
  EXPECT_EQ(s.arena_alloc_bytes, 0u) << "every intermediate is read only inside the fused group: tile buffers, no arena";
  const Tensor<1, K>& out = g.outputs();
  EXPECT_EQ(out.template to_vec<T>(), chain_by_hand(xv, bv));
  for (int round = 0; round < 3; ++round) {
    for (std::size_t i = 0; i < xv.size(); ++i) xv[i] = static_cast<T>(xv[i] * T(2) + T(round + 1));
    x.copy_from(t1<T, K>(xv));
    g.replay();
    EXPECT_EQ(out.template to_vec<T>(), chain_by_hand(xv, bv)) << "round " << round;
    EXPECT_EQ(out.template to_vec<T>(), (chain<T, K>(x, b).template to_vec<T>())) << "eager, round " << round;
  }
  EXPECT_EQ(allocations([&] { g.replay(); }), 0u) << "a raw replay allocates nothing";
}

TEST(GraphRaw, ElementwiseChainsRunRawOnEveryCoveredDtype) {
  check_chain_dtype<float, Float>();
  check_chain_dtype<double, Float>();
  check_chain_dtype<std::int32_t, Int>();
  check_chain_dtype<std::int64_t, Int>();
}

TEST(GraphRaw, BroadcastingOperandsStayOnTheirThunk) {
  const auto x = Tensor<2>::from_data(TensorData::from<float>({1, 2, 3, 4, 5, 6}, {2, 3}), kCpu);
  const auto b = Tensor<1>::from_data(TensorData::from<float>({10, 20, 30}, {3}), kCpu);
  auto g = capture(kCpu, [&] { return (x + b.reshape(std::array<std::int64_t, 2>{1, 3})) * 2.0; });
  const GraphStats s = g.stats();
  ASSERT_TRUE(s.native) << s.fallback_reason;
  EXPECT_EQ(s.nodes, 3u);      // reshape, add (broadcast), mul_scalar
  EXPECT_EQ(s.raw_nodes, 1u);  // only mul_scalar: the broadcast add keeps its thunk
  x.copy_from(Tensor<2>::from_data(TensorData::from<float>({-1, 0, 1, 2, 3, 4}, {2, 3}), kCpu));
  g.replay();
  const std::vector<float> xs{-1, 0, 1, 2, 3, 4}, bs{10, 20, 30};
  std::vector<float> want(6);
  for (std::size_t i = 0; i < 6; ++i) want[i] = (xs[i] + bs[i % 3]) * 2.0f;
  EXPECT_EQ(g.outputs().to_vec<float>(), want);
}

// Three replays of g = x * s (broadcast) + 1 for x = [1, 2, 3, 4], s refreshed to 2, 3, 4.
template <class G>
void replay_scaled(G& g, const Tensor<1>& s) {  // G: the Graph of a Tensor<1>
  for (int r = 0; r < 3; ++r) {
    s.copy_from(Tensor<1>::from_data(TensorData::from<float>({static_cast<float>(r) + 2.0f}, {1}), kCpu));
    g.replay();
    std::vector<float> want(4);
    for (std::size_t i = 0; i < 4; ++i) want[i] = static_cast<float>(i + 1) * (static_cast<float>(r) + 2.0f) + 1.0f;
    EXPECT_EQ(g.outputs().template to_vec<float>(), want) << "replay " << r;
  }
}

TEST(GraphRaw, OneElementBroadcastsRunRaw) {
  // e is an expand of a pinned 1-element tensor read only by raw nodes: the expand runs
  // nothing and x * e reads a tile of s's value (graph_fuse.cpp), refreshed at every replay.
  const auto x = Tensor<1>::from_data(TensorData::from<float>({1, 2, 3, 4}, {4}), kCpu);
  const auto s = Tensor<1>::from_data(TensorData::from<float>({0.5f}, {1}), kCpu);
  auto g = capture(kCpu, [&] { return (x * s.expand(std::array<std::int64_t, 1>{4})) + 1.0; });
  const std::size_t before = g.stats().raw_nodes;
  EXPECT_EQ(before, 3u);
  replay_scaled(g, s);
  EXPECT_EQ(g.stats().raw_nodes, 3u);
  EXPECT_EQ(allocations([&] { g.replay(); }), 0u) << "a raw replay allocates nothing";
}

TEST(GraphRaw, BroadcastViewsLeaveTheRawPathAfterTheFirstReplay) {
  // e is an expand (a stride-0 view a thunk makes) of a value made in the window, not of a
  // pinned tensor; x * e has equal shapes, so it is planned raw, finds e not dense at the
  // first replay (a dense copy keeps that replay right) and goes back to its thunk.
  const auto x = Tensor<1>::from_data(TensorData::from<float>({1, 2, 3, 4}, {4}), kCpu);
  const auto s = Tensor<1>::from_data(TensorData::from<float>({0.5f}, {1}), kCpu);
  auto g = capture(kCpu, [&] { return (x * (s * 1.0).expand(std::array<std::int64_t, 1>{4})) + 1.0; });
  EXPECT_EQ(g.stats().raw_nodes, 3u);  // s * 1, x * e, + 1
  replay_scaled(g, s);
  EXPECT_EQ(g.stats().raw_nodes, 2u);
}

TEST(GraphRaw, InPlaceAndAliasedOperandsKeepTheirValues) {
  const std::vector<float> xv{1, -2, 3, 0.5f}, x2v{4, 5, -6, 7};
  const auto x = Tensor<1>::from_data(TensorData::from<float>(xv, {4}), kCpu);
  const auto x2 = Tensor<2>::from_data(TensorData::from<float>(x2v, {2, 2}), kCpu);
  auto step = [&] {
    auto y = x + x;                 // one value as both operands
    auto t1 = y * 2.0;              // read again at the end: its block must outlive the chain
    auto t2 = t1 + 1.0;
    auto t3 = t2 * t2;
    auto t4 = t3 - y;
    auto r = t4 + t1;
    // A thunk's view of a raw value (reshape): the value's block lives as long as the view,
    // although its own last reader is the reshape; c is made while the view is alive.
    auto v = (r * 0.5).reshape(std::array<std::int64_t, 2>{2, 2});
    auto c = x2 + 1.0;
    return v + c;
  };
  auto g = capture(kCpu, step);
  ASSERT_TRUE(g.stats().native);
  EXPECT_EQ(g.stats().raw_nodes, g.stats().nodes);  // the reshape, read only by raw nodes, renames r * 0.5
  auto by_hand = [&](const std::vector<float>& a, const std::vector<float>& a2) {
    std::vector<float> out(4);
    for (std::size_t i = 0; i < 4; ++i) {
      const float y = a[i] + a[i], t1 = y * 2.0f, t2 = t1 + 1.0f, t3 = t2 * t2, t4 = t3 - y, r = t4 + t1;
      out[i] = r * 0.5f + (a2[i] + 1.0f);
    }
    return out;
  };
  EXPECT_EQ(g.outputs().to_vec<float>(), by_hand(xv, x2v));
  std::vector<float> a = xv, a2 = x2v;
  for (int round = 0; round < 3; ++round) {
    for (float& e : a) e = e * 1.5f - 1.0f;
    for (float& e : a2) e = e - 0.25f;
    x.copy_from(Tensor<1>::from_data(TensorData::from<float>(a, {4}), kCpu));
    x2.copy_from(Tensor<2>::from_data(TensorData::from<float>(a2, {2, 2}), kCpu));
    g.replay();
    EXPECT_EQ(g.outputs().to_vec<float>(), by_hand(a, a2)) << "round " << round;
    EXPECT_EQ(g.outputs().to_vec<float>(), step().to_vec<float>()) << "eager, round " << round;
  }
}

TEST(GraphRaw, AThunksViewOfARawValueKeepsItsBlockAlive) {
  // a's last reader is the reshape, but v (a view of a's arena block; a thunk, as the max
  // reads it too) is read after c is made: c must not be given a's block, the only one free
  // by then.
  const auto x = Tensor<1>::from_data(TensorData::from<float>({1, 2, 3, 4}, {4}), kCpu);
  const auto x2 = Tensor<2>::from_data(TensorData::from<float>({10, 20, 30, 40}, {2, 2}), kCpu);
  auto g = capture(kCpu, [&] {
    auto v = (x * 2.0).reshape(std::array<std::int64_t, 2>{2, 2});
    auto c = x2 + 1.0;
    return std::make_pair(v + c, v.max());
  });
  EXPECT_EQ(g.stats().raw_nodes, 3u);  // not the reshape, not the max
  for (int r = 0; r < 2; ++r) {
    g.replay();
    EXPECT_EQ(g.outputs().first.to_vec<float>(), (std::vector<float>{13, 25, 37, 49})) << "replay " << r;
    EXPECT_EQ(g.outputs().second.to_vec<float>(), (std::vector<float>{8})) << "replay " << r;
  }
}

TEST(GraphRaw, AReshapeReadOnlyByRawNodesRenamesItsSource) {
  // v renames x * 2 (no node, no block of its own); the same with a pinned input (w) and
  // with a thunk's value (the matmul's, published at replay).
  const auto x = Tensor<1>::from_data(TensorData::from<float>({1, 2, 3, 4}, {4}), kCpu);
  const auto w = Tensor<1>::from_data(TensorData::from<float>({-1, 0.5f, 2, 3}, {4}), kCpu);
  const auto a = Tensor<2>::from_data(TensorData::from<float>({1, 2, 3, 4}, {2, 2}), kCpu);
  const std::array<std::int64_t, 2> sq{2, 2};
  auto step = [&] {
    auto v = (x * 2.0).reshape(sq);
    auto m = a.matmul(a).reshape(std::array<std::int64_t, 1>{4});
    return (v + w.reshape(sq)).reshape(std::array<std::int64_t, 1>{4}) - m;
  };
  auto g = capture(kCpu, step);
  ASSERT_TRUE(g.stats().native) << g.stats().fallback_reason;
  EXPECT_EQ(g.stats().raw_nodes + 1, g.stats().nodes);  // all but the matmul
  const std::vector<float> aa{7, 10, 15, 22};  // [[1,2],[3,4]]^2
  std::vector<float> xv{1, 2, 3, 4};
  for (int r = 0; r < 3; ++r) {
    for (float& e : xv) e = e * 1.5f - static_cast<float>(r);
    x.copy_from(Tensor<1>::from_data(TensorData::from<float>(xv, {4}), kCpu));
    g.replay();
    const std::vector<float> wv{-1, 0.5f, 2, 3};
    std::vector<float> want(4);
    for (std::size_t i = 0; i < 4; ++i) want[i] = (xv[i] * 2.0f + wv[i]) - aa[i];
    EXPECT_EQ(g.outputs().to_vec<float>(), want) << "replay " << r;
    EXPECT_EQ(g.outputs().to_vec<float>(), step().to_vec<float>()) << "eager, replay " << r;
  }
}

TEST(GraphRaw, AGraphMixingRawAndThunkNodes) {
  std::vector<float> xv(12), wv(8);
  for (std::size_t i = 0; i < 12; ++i) xv[i] = static_cast<float>(i) * 0.25f - 1.0f;
  for (std::size_t i = 0; i < 8; ++i) wv[i] = static_cast<float>(i % 3) - 0.5f;
  const auto x = Tensor<2>::from_data(TensorData::from<float>(xv, {3, 4}), kCpu);
  const auto w = Tensor<2>::from_data(TensorData::from<float>(wv, {4, 2}), kCpu);
  auto step = [&] {
    auto h = x.matmul(w);           // thunk
    auto r = h * 2.0 + 1.0;         // raw, reading a thunk's value
    auto s = r.transpose();         // thunk: a transposed view of an arena value
    auto t = s.exp() - s;           // raw ops on a non-dense value: back to thunks after replay 1
    return std::make_pair(t.sum(), r);  // a thunk reading ... and a raw output
  };
  auto by_hand = [](const std::vector<float>& a, const std::vector<float>& b) {
    std::vector<float> r(6);
    for (std::size_t i = 0; i < 3; ++i)
      for (std::size_t j = 0; j < 2; ++j) {
        float acc = 0;
        for (std::size_t k = 0; k < 4; ++k) acc += a[i * 4 + k] * b[k * 2 + j];
        r[i * 2 + j] = acc * 2.0f + 1.0f;
      }
    double sum = 0;
    for (float v : r) sum += std::exp(static_cast<double>(v)) - v;
    return std::make_pair(sum, r);
  };
  auto g = capture(kCpu, step);
  ASSERT_TRUE(g.stats().native) << g.stats().fallback_reason;
  EXPECT_GE(g.stats().raw_nodes, 2u);
  EXPECT_LT(g.stats().raw_nodes, g.stats().nodes);
  for (int round = 0; round < 3; ++round) {
    for (float& e : xv) e = e * 0.9f + 0.05f;
    x.copy_from(Tensor<2>::from_data(TensorData::from<float>(xv, {3, 4}), kCpu));
    g.replay();
    const auto [sum, r] = by_hand(xv, wv);
    const auto& [gs, gr] = g.outputs();
    const std::vector<float> got_r = gr.to_vec<float>();
    for (std::size_t i = 0; i < 6; ++i) EXPECT_NEAR(got_r[i], r[i], 1e-5f * (1.0f + std::fabs(r[i]))) << i;
    EXPECT_NEAR(gs.to_vec<float>()[0], sum, 1e-4 * (1.0 + std::fabs(sum)));
    const auto [es, er] = step();
    EXPECT_EQ(gs.to_vec<float>(), es.to_vec<float>()) << "eager, round " << round;
    EXPECT_EQ(got_r, er.to_vec<float>()) << "eager, round " << round;
  }
}

// ---- an MLP training step (Adam in graph mode): host allocations per replayed step ----
struct Mlp : Module {
  nn::Linear fc1, fc2;
  // d_in -> hidden -> d_out, deterministic weights.
  Mlp(const Device& ad, std::size_t d_in = 32, std::size_t hidden = 16, std::size_t d_out = 4)
      : fc1(nn::LinearConfig{.d_input = d_in, .d_output = hidden}, ad),
        fc2(nn::LinearConfig{.d_input = hidden, .d_output = d_out}, ad) {
    auto fill = [&](std::size_t n, double k) {
      std::vector<float> v(n);
      for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<float>(std::sin(0.37 * static_cast<double>(i + 1) + k)) * 0.3f;
      return v;
    };
    fc1.weight = Tensor<2>::from_data(TensorData::from<float>(fill(d_in * hidden, 1), {d_in, hidden}), ad).require_grad();
    fc1.bias = Tensor<1>::from_data(TensorData::from<float>(fill(hidden, 2), {hidden}), ad).require_grad();
    fc2.weight = Tensor<2>::from_data(TensorData::from<float>(fill(hidden * d_out, 3), {hidden, d_out}), ad).require_grad();
    fc2.bias = Tensor<1>::from_data(TensorData::from<float>(fill(d_out, 4), {d_out}), ad).require_grad();
  }
  void visit(ModuleVisitor& v) override {
    v.module("fc1", fc1);
    v.module("fc2", fc2);
  }
  const char* type_name() const override { return "Mlp"; }
  std::vector<float> params() const {
    std::vector<float> out;
    for (const auto& t : {fc1.weight.inner().to_vec<float>(), fc1.bias->inner().to_vec<float>(),
                          fc2.weight.inner().to_vec<float>(), fc2.bias->inner().to_vec<float>()})
      out.insert(out.end(), t.begin(), t.end());
    return out;
  }
};

struct MlpRun {
  std::vector<float> params;
  std::size_t allocs = 0, raw_nodes = 0, nodes = 0;
};
MlpRun mlp_run(bool raw, std::size_t batch = 8, std::size_t d_in = 32, std::size_t hidden = 16, std::size_t d_out = 4) {
  if (!raw) setenv("TENSOR_GRAPH_RAW", "0", 1);
  const Device ad = kCpu.autodiff();
  Mlp m(ad, d_in, hidden, d_out);
  auto opt = optim::ModuleOptimizer::adam();
  opt.set_graph_mode(ad);
  std::vector<float> xv(batch * d_in), yv(batch * d_out, 0.0f);
  for (std::size_t i = 0; i < xv.size(); ++i) xv[i] = static_cast<float>((i * 37) % 101) / 101.0f;
  for (std::size_t r = 0; r < batch; ++r) yv[r * d_out + r % d_out] = 1.0f;
  const auto x = Tensor<2>::from_data(TensorData::from<float>(xv, {batch, d_in}), ad);
  const auto y = Tensor<2>::from_data(TensorData::from<float>(yv, {batch, d_out}), ad);
  auto step = [&] {
    auto loss = loss::cross_entropy_with_logits(m.fc2.forward(activation::relu(m.fc1.forward(x))), y);
    opt.step(1e-2, m, loss.backward());
    return loss;
  };
  for (int i = 0; i < 2; ++i) {
    opt.prepare_step(1e-2);
    (void)step();
  }
  opt.prepare_step(1e-2);
  auto g = capture(ad, step);
  MlpRun r;
  r.allocs = allocations([&] {
    const bool armed = g_armed.exchange(false);  // the step's parameters are refreshed outside the count
    opt.prepare_step(1e-2);
    g_armed = armed;
    g.replay();
  }, 4, 2);  // the second replay still fills the per-thread block stacks once (2 mallocs; 0 from the third)
  r.params = m.params();
  r.raw_nodes = g.stats().raw_nodes;
  r.nodes = g.stats().nodes;
  unsetenv("TENSOR_GRAPH_RAW");
  return r;
}

TEST(GraphRaw, AnAdamStepReplaysRawBitwiseEqualToTheThunkList) {
  const MlpRun raw = mlp_run(true), thunk = mlp_run(false);
  EXPECT_EQ(thunk.raw_nodes, 0u);
  EXPECT_GT(raw.raw_nodes, 20u);
  EXPECT_EQ(raw.params, thunk.params) << "raw and thunk replays agree bitwise";
  // None. The thunks' results (matmul, bias add, relu, softmax, their gradients) are fresh
  // buffers at every replay, but the CPU keeps freed medium blocks per thread
  // (cpu_tensor.cpp) and reductions keep their accumulators, so those do not reach malloc;
  // the step's 5 small f32 products run on the CPU's own small-product kernel
  // (backends/cpu/gemm_small_hwy.cpp), where dnnl_sgemm malloc'ed its packing workspace on
  // each call (4 per step; TENSOR_SMALL_GEMM=0 brings that back and fails this test).
  // Under AddressSanitizer the cpu keeps no freed blocks (so that it sees every use after
  // free): there the thunks' results reach malloc again.
  EXPECT_LE(raw.allocs, thunk.allocs);
#ifndef GRAPH_RAW_TEST_ASAN
  EXPECT_EQ(raw.allocs, 0u);
  EXPECT_EQ(thunk.allocs, 0u);
#endif
  // The figures of the report: host allocations per replayed step (prepare_step excluded).
  std::printf("[ graph  ] MLP Adam step: %zu of %zu nodes raw; host allocations per replay: raw %zu, thunk list %zu\n",
              raw.raw_nodes, raw.nodes, raw.allocs, thunk.allocs);
  RecordProperty("allocs_raw", static_cast<int>(raw.allocs));
  RecordProperty("allocs_thunk", static_cast<int>(thunk.allocs));
}

// The MLP of `tensorctl bench --graph` (784-256-10, batch 64): its products are too large for
// the small kernel and run on the medium one (backends/cpu/gemm_medium_hwy.cpp, packing into a
// per-thread buffer kept for the thread's life), where dnnl_sgemm malloc'ed its packing
// buffer on every call: 15 host allocations per replayed step before (TENSOR_MEDIUM_GEMM=0
// brings them back and fails this test). The medium kernel is routed only where Highway
// dispatches to 512-bit vectors (AVX-512: F, VL, DQ, BW); on other CPUs the products stay on
// dnnl_sgemm (faster there) and the count is only printed.
bool cpu_has_avx512() {
#if defined(__x86_64__) && defined(__GNUC__)
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
         __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512bw");
#else
  return false;
#endif
}
TEST(GraphRaw, TheBenchMlpAdamStepReplaysWithoutAllocating) {
  const MlpRun raw = mlp_run(true, 64, 784, 256, 10);
  EXPECT_GT(raw.raw_nodes, 20u);
  std::printf("[ graph  ] MLP 784-256-10 batch 64 Adam step: host allocations per replay: %zu (AVX-512: %s)\n",
              raw.allocs, cpu_has_avx512() ? "yes" : "no");
  RecordProperty("allocs_784", static_cast<int>(raw.allocs));
#ifndef GRAPH_RAW_TEST_ASAN
  if (cpu_has_avx512()) {
    EXPECT_EQ(raw.allocs, 0u);
  }
#endif
}

}  // namespace
