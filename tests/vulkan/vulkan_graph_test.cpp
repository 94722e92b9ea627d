// Native graph replay on vulkan:0 (runtime/graph.cpp): one pre-recorded command buffer per
// graph, one vkQueueSubmit per replay (Context::submit_count), input refreshes queued before
// it, uploads made inside the capture repeated by each replay, index errors carried to the
// replay's results and cleared by a good replay, and the command buffer, descriptor pool and
// buffers released with the graph. Values are worked out by hand (loops over host vectors).
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <optional>
#include <tuple>
#include <vector>

#include <tensor/graph.hpp>
#include <tensor/tensor.hpp>

#include "backends/vulkan/runtime/context.hpp"
#include "backends/vulkan/runtime/graph_fusion.hpp"
#include "backends/vulkan/shaders/vk_codes.h"
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

// Elementwise fusion (graph.cpp plan_fusion): a run of dense f32 elementwise dispatches is one
// dispatch of elementwise.comp's PROGRAM variant. Unary, binary, scalar and fused forms, an
// in-place chain, a one-element value read everywhere, on 4 elements (one workgroup of 8)
// and 1000 (four of 256); the leaky_relu (a scalar parameter the program does not carry)
// ends a run, so does a ninth distinct op, and the replay equals host loops after the
// inputs change. Fusion off: one dispatch per kernel, the same values.
TEST_F(VulkanGraph, ElementwiseRunsReplayAsOneDispatchEach) {
  for (const std::size_t n : {std::size_t{4}, std::size_t{1000}}) {
    SCOPED_TRACE(n);
    std::vector<float> xv(n), bv(n);
    for (std::size_t i = 0; i < n; ++i) {
      xv[i] = static_cast<float>(static_cast<int>(i % 13) - 6) * 0.375f;
      bv[i] = static_cast<float>(i % 5) * 0.5f + 0.25f;
    }
    const auto x = f1(xv), b = f1(bv), s = f1({1.5f});
    const std::array<std::int64_t, 1> to{static_cast<std::int64_t>(n)};
    auto run = [&] {
      Tensor<1> y = x * b + 1.0;                                // mul, scalar add
      y = activation::sigmoid(y) - x;                           // fused unary, sub
      y = y.exp() / b;                                          // unary, div
      y = activation::relu(y * s.expand(to)) + y.abs().sqrt();  // one element everywhere, relu, abs, sqrt
      Tensor<1> z = activation::leaky_relu(y, 0.25);            // not in the program: ends the run
      return (z - 2.0).tanh() * (-y);                           // a second run
    };
    auto by_hand = [&](const std::vector<float>& xs, const std::vector<float>& bs, float sv) {
      std::vector<float> out(n);
      for (std::size_t i = 0; i < n; ++i) {
        float y = xs[i] * bs[i] + 1.0f;
        y = 1.0f / (1.0f + std::exp(-y)) - xs[i];
        y = std::exp(y) / bs[i];
        y = std::max(y * sv, 0.0f) + std::sqrt(std::fabs(y));
        const float z = y < 0 ? y * 0.25f : y;
        out[i] = std::tanh(z - 2.0f) * -y;
      }
      return out;
    };
    const std::size_t kernels = 16;  // the dispatches of one eager run of `run`
    const std::uint32_t limit = ctx().graph_fusion_max();
    EXPECT_EQ(limit, ctx().software() ? vulkan::Context::kFuseMaxSoftware : vulkan::Context::kFuseMaxHardware);
    // Fused whatever the element count (so n = 1000 is checked on lavapipe too), not fused,
    // and the device's own bound.
    for (const std::uint32_t max : {1u << 20, 0u, limit}) {
      SCOPED_TRACE(max);
      const bool fuse = n <= max;
      x.copy_from(f1(xv));  // the last pass's replays changed them
      b.copy_from(f1(bv));
      s.copy_from(f1({1.5f}));
      ctx().set_graph_fusion_max(max);
      auto g = capture(vk(), run);
      ctx().set_graph_fusion_max(limit);
      ASSERT_TRUE(g.is_native()) << g.stats().fallback_reason;
      const vulkan::Context::GraphBuildStats st = ctx().last_graph_build();
      if (fuse) {  // the first run's ninth distinct op (abs) starts another
        EXPECT_EQ(st.fused_runs, 3u);
        EXPECT_EQ(st.fused_dispatches + 1, kernels);
        EXPECT_EQ(st.dispatches, 4u);
      } else {
        EXPECT_EQ(st.fused_runs, 0u);
        EXPECT_EQ(st.dispatches, kernels);
      }
      expect_near(g.outputs().to_vec<float>(), by_hand(xv, bv, 1.5f));
      for (int r = 0; r < 2; ++r) {
        SCOPED_TRACE(r);
        std::vector<float> xs = xv, bs = bv;
        for (std::size_t i = 0; i < n; ++i) {
          xs[i] = -xs[i] + static_cast<float>(r);
          bs[i] += static_cast<float>(r) * 0.125f;
        }
        const float sv = -0.5f + static_cast<float>(r);
        x.copy_from(f1(xs));
        b.copy_from(f1(bs));
        s.copy_from(f1({sv}));
        g.replay();
        expect_near(g.outputs().to_vec<float>(), by_hand(xs, bs, sv));
      }
    }
  }
}

// Fused runs over sliced operands (element offsets 0, 1 and 2 into their buffers), each
// ended by the next run's element count; the replay equals host loops.
TEST_F(VulkanGraph, FusedRunsReadSlicesAtTheirOffsets) {
  constexpr std::size_t n = 600;
  std::vector<float> xv(n);
  for (std::size_t i = 0; i < n; ++i) xv[i] = static_cast<float>(i % 29) * 0.5f - 7;
  const auto x = f1(xv);
  const std::uint32_t limit = ctx().graph_fusion_max();
  ctx().set_graph_fusion_max(n);
  auto g = capture(vk(), [&] {
    Tensor<1> y = x * 2.0 + 1.0;
    Tensor<1> lo = y.slice({Slice::range(0, n - 1)}), hi = y.slice({Slice::range(1, n)});
    Tensor<1> d = (hi - lo) * 3.0;      // reads y shifted by one element: a new run
    Tensor<1> e = d.slice({Slice::range(1, n - 1)}) + d.slice({Slice::range(0, n - 2)});
    return e.neg();
  });
  ctx().set_graph_fusion_max(limit);
  ASSERT_TRUE(g.is_native()) << g.stats().fallback_reason;
  const vulkan::Context::GraphBuildStats st = ctx().last_graph_build();
  // Three runs, [mul, add] over n, [sub, mul] over n - 1 (reading y at offsets 0 and 1),
  // [add, neg] over n - 2: the element counts end them (plan_fusion's shifted-range rule is
  // checked on made-up commands below).
  EXPECT_EQ(st.fused_runs, 3u);
  EXPECT_EQ(st.fused_dispatches, 6u);
  EXPECT_EQ(st.dispatches, 3u);
  for (int r = 0; r < 2; ++r) {
    std::vector<float> xs = xv;
    for (float& v : xs) v = v * static_cast<float>(r + 1) - static_cast<float>(r);
    x.copy_from(f1(xs));
    g.replay();
    std::vector<float> y(n), d(n - 1), e(n - 2);
    for (std::size_t i = 0; i < n; ++i) y[i] = xs[i] * 2.0f + 1.0f;
    for (std::size_t i = 0; i + 1 < n; ++i) d[i] = (y[i + 1] - y[i]) * 3.0f;
    for (std::size_t i = 0; i + 2 < n; ++i) e[i] = -(d[i + 1] + d[i]);
    expect_near(g.outputs().to_vec<float>(), e);
  }
}

// plan_fusion's rules on made-up commands over real buffers (so the ranges are real
// buffer-absolute offsets, wherever the pool put them).
struct FakeEw {
  vulkan::BufRef out, a, b;
  std::uint32_t oo = 0, ao = 0, bo = 0, n = 8, single = 0;
  std::uint32_t op = EW_ADD;
  bool scalar = false;
};
vulkan::GraphCmd fake(const FakeEw& f) {
  vulkan::GraphCmd c;
  c.params.assign(P_WORDS, 0);
  c.params[P_N] = f.n;
  c.params[P_OPND] = f.oo;
  c.params[P_OPND + 9] = f.ao;
  c.params[P_OPND + 18] = f.bo;
  c.params[P_S0] = 0x3F800000u;  // 1.0f
  auto use = [](const vulkan::BufRef& b, bool w) {
    vulkan::GraphCmd::Use u;
    if (b) u = {b, b->offset(), b->size(), w};
    return u;
  };
  c.uses = {use(f.a, false), use(f.b, false), {}, use(f.out, true)};
  c.ew_op = static_cast<std::int32_t>(f.op);
  c.ew_scalar = f.scalar;
  c.ew_single = f.single;
  return c;
}
std::vector<std::pair<std::size_t, std::size_t>> runs_of(const std::vector<vulkan::GraphCmd>& cmds) {
  std::vector<std::pair<std::size_t, std::size_t>> out;
  for (const vulkan::FusedRun& r : vulkan::plan_fusion(cmds, 256, 1u << 27, 1u << 20)) out.emplace_back(r.begin, r.end);
  return out;
}
using Runs = std::vector<std::pair<std::size_t, std::size_t>>;

TEST_F(VulkanGraph, FusionPlanTakesSameRangesAndStopsAtShiftedOnes) {
  const auto buf = [](std::size_t floats) { return ctx().allocate(floats * 4); };
  const vulkan::BufRef t = buf(9), u = buf(9), x = buf(8), y = buf(8), s = buf(1);
  // A chain through t in place, then into u: one run of three.
  EXPECT_EQ(runs_of({fake({t, x, y}), fake({t, t, y, 0, 0, 0, 8, 0, EW_MUL}), fake({u, t, {}, 0, 0, 0, 8, 0, EW_EXP})}),
            (Runs{{0, 3}}));
  // Reading t one element further on than the run wrote it: two runs of one, i.e. none.
  EXPECT_EQ(runs_of({fake({t, x, y}), fake({u, t, y, 0, 1, 0})}), Runs{});
  // Writing t one element further on than the run read it (write after read).
  EXPECT_EQ(runs_of({fake({u, t, y, 0, 1, 0}), fake({t, x, y})}), Runs{});
  // One element of t read everywhere after the run wrote all of t.
  EXPECT_EQ(runs_of({fake({t, x, y}), fake({u, x, t, 0, 0, 0, 8, 2})}), Runs{});
  // One element read everywhere and never written, by both: one run.
  EXPECT_EQ(runs_of({fake({u, x, s, 0, 0, 0, 8, 2, EW_MUL}), fake({u, u, s, 0, 0, 0, 8, 2})}), (Runs{{0, 2}}));
  // A different element count ends the run; a scalar b reads no buffer.
  EXPECT_EQ(runs_of({fake({t, x, y}), fake({u, t, {}, 0, 0, 0, 8, 0, EW_ADD, true}), fake({t, x, y, 0, 0, 0, 7})}),
            (Runs{{0, 2}}));
  // A ninth distinct op ends the run (the program's op table holds eight).
  std::vector<vulkan::GraphCmd> nine;
  for (const std::uint32_t op : {EW_ADD, EW_SUB, EW_MUL, EW_DIV})
    nine.push_back(fake({t, t, y, 0, 0, 0, 8, 0, op}));
  for (const std::uint32_t op : {EW_EXP, EW_LOG, EW_SQRT, EW_NEG, EW_ABS, EW_ADD})
    nine.push_back(fake({t, t, {}, 0, 0, 0, 8, 0, op}));
  EXPECT_EQ(runs_of(nine), (Runs{{0, 8}, {8, 10}}));
  // More elements than the bound: none.
  EXPECT_TRUE(vulkan::plan_fusion({fake({t, x, y}), fake({t, t, y})}, 256, 1u << 27, 7).empty());
  EXPECT_EQ(vulkan::plan_fusion({fake({t, x, y}), fake({t, t, y})}, 256, 1u << 27, 8).size(), 1u);
  // Not fusable (ew_op -1) between: two runs.
  std::vector<vulkan::GraphCmd> cmds = {fake({t, x, y}), fake({t, t, y}), fake({u, x, y}), fake({u, u, x}), fake({u, u, y})};
  cmds[2].ew_op = -1;
  EXPECT_EQ(runs_of(cmds), (Runs{{0, 2}, {3, 5}}));

  // The program: each operand's slot binding (its lowest byte aligned down) plus its offset is
  // where the command's operand lies; the scalar's bits are carried.
  const std::vector<vulkan::GraphCmd> two = {fake({t, x, y, 1, 0, 0}), fake({u, t, {}, 0, 1, 0, 8, 0, EW_SUB, true})};
  const std::vector<vulkan::FusedRun> plan = vulkan::plan_fusion(two, 256, 1u << 27, 1u << 20);
  ASSERT_EQ(plan.size(), 1u);
  const vulkan::FusedRun& r = plan[0];
  ASSERT_EQ(r.words.size(), 2u + 2 * vulkan::kProgWords);
  EXPECT_EQ(r.words[0], 8u);
  EXPECT_EQ(r.words[1], 2u);
  auto addr = [&](std::uint32_t slot, std::uint32_t at) {
    EXPECT_LT(slot, r.slots);
    return std::make_pair(r.buf[slot], r.lo[slot] / 256 * 256 + at * 4ull);
  };
  auto where = [](const vulkan::BufRef& b, std::uint32_t elem) { return std::make_pair(b->vk(), b->offset() + elem * 4ull); };
  const std::uint32_t* w0 = &r.words[2];
  const std::uint32_t* w1 = w0 + vulkan::kProgWords;
  EXPECT_EQ(r.ops, (std::vector<std::uint32_t>{EW_ADD, EW_SUB}));  // the op table; words hold indices
  EXPECT_EQ(w0[0], 0u);
  EXPECT_EQ(w0[1], 8u);  // reads b
  EXPECT_EQ(addr(w0[2], w0[3]), where(t, 1));
  EXPECT_EQ(addr(w0[4], w0[5]), where(x, 0));
  EXPECT_EQ(addr(w0[6], w0[7]), where(y, 0));
  EXPECT_EQ(w1[0], 1u);
  EXPECT_EQ(w1[1], 9u);  // b is the scalar
  EXPECT_EQ(addr(w1[2], w1[3]), where(u, 0));
  EXPECT_EQ(addr(w1[4], w1[5]), where(t, 1));
  EXPECT_EQ(w1[7], 0x3F800000u);
}

// TENSOR_VK_GRAPH_FUSION_MAX at capture: the bound for that graph (0: off, 600: a run of
// 600 elements fused on any device); a malformed value makes the capture throw, and the
// device captures and replays again afterwards.
TEST_F(VulkanGraph, TheFusionBoundCanBeSetPerCapture) {
  const auto x = f1(std::vector<float>(600, 2.0f));
  auto run = [&] { return (x * 3.0 + 1.0).sqrt(); };
  auto capture_with = [&](const char* v) {
    setenv("TENSOR_VK_GRAPH_FUSION_MAX", v, 1);
    try {
      auto g = capture(vk(), run);
      unsetenv("TENSOR_VK_GRAPH_FUSION_MAX");
      return g;
    } catch (...) {
      unsetenv("TENSOR_VK_GRAPH_FUSION_MAX");
      throw;
    }
  };
  {
    auto g = capture_with("600");
    EXPECT_EQ(ctx().last_graph_build().fused_runs, 1u);
    EXPECT_EQ(ctx().last_graph_build().dispatches, 1u);
    g.replay();
    expect_near(g.outputs().to_vec<float>(), std::vector<float>(600, std::sqrt(7.0f)));
  }
  {
    auto g = capture_with("0");
    EXPECT_EQ(ctx().last_graph_build().fused_runs, 0u);
    EXPECT_EQ(ctx().last_graph_build().dispatches, 3u);
  }
  for (const char* bad : {"", "-1", "12x", "1234567890"}) {
    SCOPED_TRACE(bad);
    std::string msg = "no ExecutionError";
    try {
      (void)capture_with(bad);
    } catch (const ExecutionError& e) {
      msg = e.what();
    }
    EXPECT_NE(msg.find("TENSOR_VK_GRAPH_FUSION_MAX: expected a number of elements"), std::string::npos) << msg;
  }
  auto g = capture(vk(), run);
  g.replay();
  expect_near(g.outputs().to_vec<float>(), std::vector<float>(600, std::sqrt(7.0f)));
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
