// Native graph replay on vulkan:0 (runtime/graph.cpp): one pre-recorded command buffer per
// graph, one vkQueueSubmit per replay (Context::submit_count), input refreshes queued before
// it, uploads made inside the capture repeated by each replay, index errors carried to the
// replay's results and cleared by a good replay, and the command buffer, descriptor pool and
// buffers released with the graph. Values are worked out by hand (loops over host vectors).
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <optional>
#include <tuple>
#include <vector>

#include <tensor/graph.hpp>
#include <tensor/tensor.hpp>

#include "backends/vulkan/runtime/context.hpp"
#include "tests/test_util.hpp"
#include "tests/vulkan/vk_test_util.hpp"

namespace {

using namespace tensor;
using vk_test::VulkanTest;

class VulkanGraph : public VulkanTest {};

Device vk() { return Device(vk_test::kVk); }
vulkan::Context& ctx() {
  vulkan::Context* c = vulkan::context(0);
  c->ensure_init();
  return *c;
}
Tensor<1> f1(const std::vector<float>& v) { return Tensor<1>::from_data(TensorData::from<float>(v, {v.size()}), vk()); }
void expect_near(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5f * (1.0f + std::fabs(want[i]))) << i;
}

// 200 dependent adds: four eager batches (64 dispatches each), one replay submission.
TEST_F(VulkanGraph, AChainReplaysInOneSubmissionAndEqualsALoop) {
  constexpr int kChain = 200;
  const auto x = f1({1, 2, 3, 4}), b = f1({0.5f, -0.25f, 2, 0});
  auto g = capture(vk(), [&] {
    Tensor<1> y = x + b;
    for (int i = 1; i < kChain; ++i) y = y * 0.5 + b;
    return y;
  });
  ASSERT_TRUE(g.is_native()) << g.stats().fallback_reason;
  EXPECT_EQ(g.stats().nodes, static_cast<std::size_t>(2 * kChain - 1));
  auto by_hand = [&](const std::vector<float>& xs, const std::vector<float>& bs) {
    std::vector<float> y(xs.size());
    for (std::size_t i = 0; i < xs.size(); ++i) {
      y[i] = xs[i] + bs[i];
      for (int k = 1; k < kChain; ++k) y[i] = y[i] * 0.5f + bs[i];
    }
    return y;
  };
  expect_near(g.outputs().to_vec<float>(), by_hand({1, 2, 3, 4}, {0.5f, -0.25f, 2, 0}));
  for (int r = 0; r < 3; ++r) {
    dispatch::sync(vk_test::kVk);
    const std::uint64_t before = ctx().submit_count();
    g.replay();
    EXPECT_EQ(ctx().submit_count() - before, 1u) << "replay " << r;  // nothing queued: the graph alone
    const std::vector<float> xs = {static_cast<float>(r), -1, 0.25f, 8}, bs = {1, 2, static_cast<float>(-r), 0.5f};
    x.copy_from(f1(xs));
    b.copy_from(f1(bs));
    const std::uint64_t mid = ctx().submit_count();
    g.replay();
    // The refreshes are one eager batch submitted first on the same queue, then the graph.
    EXPECT_EQ(ctx().submit_count() - mid, 2u) << "replay " << r;
    expect_near(g.outputs().to_vec<float>(), by_hand(xs, bs));
  }
}

// A constant uploaded inside the capture and then written over in place (an optimizer's
// state write): each replay must start from the uploaded values again.
TEST_F(VulkanGraph, AnUploadInsideTheCaptureIsRepeatedByEachReplay) {
  const auto x = f1({1, 10});
  auto g = capture(vk(), [&] {
    const auto c = Tensor<1>::from_data(TensorData::from<float>({100, 200}, {2}), vk());
    detail::graph_write(c.handle(), (c + x).handle());
    return c * 2.0;
  });
  ASSERT_TRUE(g.is_native()) << g.stats().fallback_reason;
  for (int r = 0; r < 3; ++r) {
    g.replay();
    expect_near(g.outputs().to_vec<float>(), {202, 420});
  }
}

// Reductions, matmul, softmax and views in one graph, against loops on the host.
TEST_F(VulkanGraph, MatmulReductionAndSoftmaxReplayEqualLoops) {
  const std::vector<float> av = {1, 2, 3, 4, 5, 6}, bv = {0.5f, -1, 2, 0.25f, 1, 1};
  const auto a = Tensor<2>::from_data(TensorData::from<float>(av, {2, 3}), vk());
  const auto b = Tensor<2>::from_data(TensorData::from<float>(bv, {3, 2}), vk());
  auto g = capture(vk(), [&] {
    auto m = a.matmul(b);  // [2, 2]
    auto s = activation::softmax(m, 1);
    auto t = (m.transpose() * 2.0).sum_dim(1);  // [2, 1]
    return std::make_pair(s, t);
  });
  ASSERT_TRUE(g.is_native()) << g.stats().fallback_reason;
  for (int r = 0; r < 3; ++r) {
    std::vector<float> ar = av;
    for (float& e : ar) e += static_cast<float>(r);
    a.copy_from(Tensor<2>::from_data(TensorData::from<float>(ar, {2, 3}), vk()));
    g.replay();
    float m[2][2];
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 2; ++j) {
        m[i][j] = 0;
        for (int k = 0; k < 3; ++k) m[i][j] += ar[i * 3 + k] * bv[k * 2 + j];
      }
    std::vector<float> s(4), t(2);
    for (int i = 0; i < 2; ++i) {
      const float mx = std::max(m[i][0], m[i][1]);
      const float e0 = std::exp(m[i][0] - mx), e1 = std::exp(m[i][1] - mx);
      s[i * 2] = e0 / (e0 + e1);
      s[i * 2 + 1] = e1 / (e0 + e1);
      t[i] = 2 * (m[0][i] + m[1][i]);
    }
    expect_near(g.outputs().first.to_vec<float>(), s);
    expect_near(g.outputs().second.to_vec<float>(), t);
  }
}

// The optimizer's graph mode multiplies by 1-element device values expanded over a
// parameter (Optimizer::graph_value); those dispatches take elementwise.comp's CONTIG 2
// (each operand dense or one element, no per-dimension walk). Refreshing the values
// between replays must reach every element; a 1-element slice from an offset, a
// broadcast on the right and a rank-3 broadcast along inner dims (the strided walk,
// whose outermost dim needs no division) are checked too.
TEST_F(VulkanGraph, ExpandedOneElementValuesAndBroadcastsReplayEqualLoops) {
  constexpr std::size_t n = 1000;
  std::vector<float> xv(n);
  for (std::size_t i = 0; i < n; ++i) xv[i] = static_cast<float>(i % 17) * 0.25f - 2;
  const auto x = f1(xv), s = f1({0.5f}), pair = f1({7, 3});
  const std::vector<float> cv = {1, -2, 4};  // [1, 3, 1] broadcast over [2, 3, 4]
  const auto c = Tensor<3>::from_data(TensorData::from<float>(cv, {1, 3, 1}), vk());
  const auto z = Tensor<3>::from_data(TensorData::from<float>(std::vector<float>(xv.begin(), xv.begin() + 24), {2, 3, 4}), vk());
  const std::array<std::int64_t, 1> to{static_cast<std::int64_t>(n)};
  auto g = capture(vk(), [&] {
    auto a = x * s.expand(to);                                   // dense * one element
    auto b = pair.slice({Slice::range(1, 2)}).expand(to) - a;   // one element at offset 1 - dense
    auto e = z * c.expand(std::array<std::int64_t, 3>{2, 3, 4});  // a rank-3 strided broadcast
    return std::make_tuple(a, b, e);
  });
  ASSERT_TRUE(g.is_native()) << g.stats().fallback_reason;
  for (int r = 0; r < 3; ++r) {
    const float sv = 0.5f + static_cast<float>(r), pv = 3 - static_cast<float>(r);
    s.copy_from(f1({sv}));
    pair.copy_from(f1({-1, pv}));
    g.replay();
    std::vector<float> a(n), b(n), e(24);
    for (std::size_t i = 0; i < n; ++i) {
      a[i] = xv[i] * sv;
      b[i] = pv - a[i];
    }
    for (std::size_t i = 0; i < 24; ++i) e[i] = xv[i] * cv[i / 4 % 3];
    expect_near(std::get<0>(g.outputs()).to_vec<float>(), a);
    expect_near(std::get<1>(g.outputs()).to_vec<float>(), b);
    expect_near(std::get<2>(g.outputs()).to_vec<float>(), e);
  }
}

// copy_from between dense tensors of one dtype is a buffer copy (Context::copy with byte
// offsets), also inside a replay (the optimizer's state writes); rows of [3, 4] tensors
// (offsets 4 and 8 elements), a whole tensor, and a strided source (the shader copy).
TEST_F(VulkanGraph, DenseCopyFromIsABufferCopyAtTheTensorsOffsets) {
  std::vector<float> av(12), bv(12);
  for (std::size_t i = 0; i < 12; ++i) {
    av[i] = static_cast<float>(i);
    bv[i] = 100 + static_cast<float>(i);
  }
  const auto a = Tensor<2>::from_data(TensorData::from<float>(av, {3, 4}), vk());
  const auto b = Tensor<2>::from_data(TensorData::from<float>(bv, {3, 4}), vk());
  a.narrow(0, 1, 1).copy_from(b.narrow(0, 2, 1));  // a row 1 <- b row 2
  std::vector<float> want = av;
  for (std::size_t j = 0; j < 4; ++j) want[4 + j] = bv[8 + j];
  expect_near(a.to_vec<float>(), want);
  a.copy_from(b.transpose().transpose() * 1.0);  // whole, dense
  expect_near(a.to_vec<float>(), bv);
  const auto t = Tensor<2>::from_data(TensorData::from<float>(av, {4, 3}), vk());
  a.copy_from(t.transpose());  // strided source: the elementwise copy
  for (std::size_t i = 0; i < 3; ++i)
    for (std::size_t j = 0; j < 4; ++j) want[i * 4 + j] = av[j * 3 + i];
  expect_near(a.to_vec<float>(), want);
  // Inside a replay: a state written in place each step (s <- s + x).
  const auto x = f1({1, 2, 3}), st = f1({0, 0, 0});
  auto g = capture(vk(), [&] {
    detail::graph_write(st.handle(), (st + x).handle());
    return st * 2.0;
  });
  ASSERT_TRUE(g.is_native()) << g.stats().fallback_reason;
  for (int r = 0; r < 3; ++r) g.replay();
  // capture + 3 replays: st = 4 x
  expect_near(st.to_vec<float>(), {4, 8, 12});
  expect_near(g.outputs().to_vec<float>(), {8, 16, 24});
}

// A checked (index) dispatch: an index refreshed out of range makes the replay's results
// throw the op's IndexError when read; a good refresh and replay clears it.
TEST_F(VulkanGraph, IndexErrorsOfAReplayReachItsResultsAndAGoodReplayClearsThem) {
  const auto src = f1({10, 20, 30, 40});
  const auto idx = Tensor<1, Int>::from_data(TensorData::from<std::int64_t>({3, 0}, {2}), vk());
  auto g = capture(vk(), [&] { return src.gather(0, idx) + 1.0; });
  ASSERT_TRUE(g.is_native()) << g.stats().fallback_reason;
  expect_near(g.outputs().to_vec<float>(), {41, 11});
  idx.copy_from(Tensor<1, Int>::from_data(TensorData::from<std::int64_t>({1, 9}, {2}), vk()));
  g.replay();
  EXPECT_THROW((void)g.outputs().to_vec<float>(), IndexError);
  idx.copy_from(Tensor<1, Int>::from_data(TensorData::from<std::int64_t>({2, 1}, {2}), vk()));
  g.replay();
  expect_near(g.outputs().to_vec<float>(), {31, 21});
}

// The graph's command batch lives until the graph goes; then the batch count and the
// device memory in use are back where they were.
TEST_F(VulkanGraph, ReleasingAGraphFreesItsCommandBufferAndBuffers) {
  const auto x = f1(std::vector<float>(4096, 1.0f));
  dispatch::sync(vk_test::kVk);
  const std::uint64_t used = ctx().memory_stats().bytes_in_use;
  std::optional<Graph<Tensor<1>>> g;
  g.emplace(capture(vk(), [&] { return ((x + 1.0) * 3.0).exp() - x; }));
  ASSERT_TRUE(g->is_native());
  g->replay();
  expect_near(g->outputs().to_vec<float>(), std::vector<float>(4096, std::exp(6.0f) - 1.0f));
  dispatch::sync(vk_test::kVk);
  const std::size_t batches = ctx().batch_count();  // the eager spares and the graph's own
  EXPECT_GT(ctx().memory_stats().bytes_in_use, used);
  g.reset();
  dispatch::sync(vk_test::kVk);
  ctx().memory_cleanup();
  EXPECT_EQ(ctx().batch_count(), batches - 1);
  EXPECT_EQ(ctx().memory_stats().bytes_in_use, used);
}

// A capture that throws (a refused host read) or falls back drops what the context noted:
// the buffers of its dispatches go back, and the next capture is native again.
TEST_F(VulkanGraph, AnAbandonedOrFallenBackCaptureLeavesNoRecordingBehind) {
  auto x = f1(std::vector<float>(8192, 2.0f));
  dispatch::sync(vk_test::kVk);
  ctx().memory_cleanup();
  const std::uint64_t used = ctx().memory_stats().bytes_in_use;
  EXPECT_THROW((void)capture(vk(), [&] {
                 auto y = (x * 2.0).exp();
                 (void)y.to_vec<float>();  // refused inside capture()
                 return y;
               }),
               GraphCaptureError);
  {
    auto g = capture(vk(), [&] {  // rebinding a captured variable: the closure re-run
      x = x + 1.0;
      return x * 1.0;
    });
    EXPECT_FALSE(g.is_native());
  }
  x.copy_from(f1(std::vector<float>(8192, 2.0f)));
  dispatch::sync(vk_test::kVk);
  ctx().memory_cleanup();
  EXPECT_EQ(ctx().memory_stats().bytes_in_use, used);
  // Eager work after them is not noted anywhere, and a new capture is native.
  for (int i = 0; i < 5; ++i) x.copy_from(x * 1.0);
  auto h = capture(vk(), [&] { return x + 1.0; });
  EXPECT_TRUE(h.is_native()) << h.stats().fallback_reason;
  h.replay();
  expect_near(h.outputs().to_vec<float>(), std::vector<float>(8192, 3.0f));
}

// TENSOR_VK_GRAPH_NATIVE=0: the reference path (the closure re-run) says why.
TEST_F(VulkanGraph, NativeReplayCanBeSwitchedOffForTheReference) {
  const auto x = f1({1, 2});
  setenv("TENSOR_VK_GRAPH_NATIVE", "0", 1);
  auto g = capture(vk(), [&] { return x * 3.0; });
  unsetenv("TENSOR_VK_GRAPH_NATIVE");
  EXPECT_FALSE(g.is_native());
  EXPECT_NE(g.stats().fallback_reason.find("graph_supported is false"), std::string::npos) << g.stats().fallback_reason;
  g.replay();
  expect_near(g.outputs().to_vec<float>(), {3, 6});
  auto h = capture(vk(), [&] { return x * 3.0; });
  EXPECT_TRUE(h.is_native());
}

}  // namespace
