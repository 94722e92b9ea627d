// Graph replay's fused raw groups on the cpu (issue 28 step 5, dispatch/graph_fuse.cpp):
// consecutive elementwise nodes over one element count run tile by tile, values no later
// node reads live in tile buffers only, 1-element broadcasts are tiles of the value.
// Counts below, at and above a tile (4,096 f32), over several chunks and above the parallel
// threshold (1M elements), with odd tails. Values are checked against loops written here (f32 arithmetic, one
// rounding per op as the kernels do) and bitwise against the eager run; an optimizer step
// (Adam, AdamW, SGD with momentum) replayed on a 301 x 257 layer is checked bitwise against
// the same steps run eagerly.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <iterator>
#include <tuple>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <tensor/graph.hpp>
#include <tensor/loss.hpp>
#include <tensor/modules/core.hpp>
#include <tensor/modules/optim.hpp>
#include <tensor/tensor.hpp>

namespace {

using namespace tensor;

const Device kCpu = Device::parse("cpu");
constexpr std::size_t kCounts[] = {5, 4096, 3 * 4096 + 7, 70001, (std::size_t{1} << 20) + 4097};

std::vector<float> wave(std::size_t n, double k) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<float>(std::sin(0.37 * static_cast<double>(i + 1) + k)) * 1.5f;
  return v;
}
Tensor<1> t1(const std::vector<float>& v) { return Tensor<1>::from_data(TensorData::from<float>(v, {v.size()}), kCpu); }

// t1 = x * b; t2 = t1 + 1; t3 = t2 * t2; t4 = t3 - t1; r = t4 * 0.5 (one group).
struct ChainVals {
  std::vector<float> t2, r;
};
ChainVals chain_by_hand(const std::vector<float>& x, const std::vector<float>& b) {
  ChainVals c{std::vector<float>(x.size()), std::vector<float>(x.size())};
  for (std::size_t i = 0; i < x.size(); ++i) {
    const float a = x[i] * b[i];
    const float t2 = a + 1.0f;
    const float t3 = t2 * t2;
    const float t4 = t3 - a;
    c.t2[i] = t2;
    c.r[i] = t4 * 0.5f;
  }
  return c;
}

// TENSOR_GRAPH_FUSE=0 at capture: the same groups run untiled on full buffers (the path a
// failed overlap check takes), with every value in the arena.
// TENSOR_GRAPH_FUSE=run: tile buffers planned, but every run takes the failed-check path
// (full buffers made for the values that have none).
struct Untiled {
  explicit Untiled(const char* mode) : on_(mode != nullptr) {
    if (on_) setenv("TENSOR_GRAPH_FUSE", mode, 1);
  }
  ~Untiled() {
    if (on_) unsetenv("TENSOR_GRAPH_FUSE");
  }
  bool on_;
};

void dead_intermediates(const char* mode) {
  const bool untiled = mode && mode[0] == '0';
  std::vector<std::size_t> counts(std::begin(kCounts), std::end(kCounts));
  counts.push_back(0);  // empty tensors: no tile at all
  for (const std::size_t n : counts) {
    std::vector<float> xv = wave(n, 0.0);
    const std::vector<float> bv = wave(n, 1.0);
    const auto x = t1(xv), b = t1(bv);
    auto step = [&] {
      const auto a = x * b;
      const auto t2 = a + 1.0;
      return (t2 * t2 - a) * 0.5;
    };
    auto g = [&] {
      const Untiled u(mode);
      return capture(kCpu, step);
    }();
    ASSERT_TRUE(g.stats().native) << g.stats().fallback_reason;
    EXPECT_EQ(g.stats().raw_nodes, g.stats().nodes);
    // The dead values (a, t2, t2 * t2, the difference) have no arena block: only the output
    // is stored, and it is pinned, so the arena holds nothing of n's size. Untiled: all four.
    if (untiled) {
      EXPECT_GE(g.stats().arena_alloc_bytes, 2 * n * sizeof(float)) << "n " << n;
    } else if (n > 0) {
      EXPECT_LT(g.stats().arena_alloc_bytes, n * sizeof(float)) << "n " << n;
    }
    EXPECT_EQ(g.outputs().to_vec<float>(), chain_by_hand(xv, bv).r) << "n " << n;
    for (int round = 0; round < 3; ++round) {
      for (float& e : xv) e = e * 0.75f + static_cast<float>(round) * 0.125f;
      x.copy_from(t1(xv));
      g.replay();
      EXPECT_EQ(g.outputs().to_vec<float>(), chain_by_hand(xv, bv).r) << "n " << n << ", round " << round;
      EXPECT_EQ(g.outputs().to_vec<float>(), step().to_vec<float>()) << "eager, n " << n << ", round " << round;
    }
  }
}

TEST(GraphFuse, AChainWhoseIntermediatesAreDeadOutsideItsGroup) { dead_intermediates(nullptr); }
TEST(GraphFuse, TheSameChainUntiled) { dead_intermediates("0"); }
TEST(GraphFuse, TheSameChainOnTheFailedOverlapCheckPath) { dead_intermediates("run"); }

TEST(GraphFuse, AnIntermediateReadAfterItsGroupIsStored) {
  for (const std::size_t n : kCounts) {
    std::vector<float> xv = wave(n, 0.5);
    const std::vector<float> bv = wave(n, 2.0);
    const auto x = t1(xv), b = t1(bv);
    // t2 is read inside the group (t2 * t2) and again after it, by a thunk (max) and by a
    // raw node of a later group (t2 - x after the thunk): it must keep its full value.
    auto step = [&] {
      const auto a = x * b;
      const auto t2 = a + 1.0;
      const auto r = (t2 * t2 - a) * 0.5;
      const auto m = t2.max();
      return std::make_tuple(r, m, t2 - x);
    };
    auto g = capture(kCpu, step);
    ASSERT_TRUE(g.stats().native) << g.stats().fallback_reason;
    EXPECT_EQ(g.stats().raw_nodes + 1, g.stats().nodes);  // all but the max
    for (int round = 0; round < 3; ++round) {
      for (float& e : xv) e = e * -0.5f + 0.25f;
      x.copy_from(t1(xv));
      g.replay();
      const ChainVals c = chain_by_hand(xv, bv);
      float mx = c.t2[0];
      std::vector<float> d(n);
      for (std::size_t i = 0; i < n; ++i) {
        mx = std::max(mx, c.t2[i]);
        d[i] = c.t2[i] - xv[i];
      }
      const auto& [r, m, t2x] = g.outputs();
      EXPECT_EQ(r.to_vec<float>(), c.r) << "n " << n << ", round " << round;
      EXPECT_EQ(m.to_vec<float>(), std::vector<float>{mx}) << "n " << n << ", round " << round;
      EXPECT_EQ(t2x.to_vec<float>(), d) << "n " << n << ", round " << round;
    }
  }
}

TEST(GraphFuse, OneElementBroadcastsAreTilesOfTheValue) {
  for (const std::size_t n : kCounts) {
    const std::vector<float> xv = wave(n, 3.0);
    const auto x = t1(xv);
    const auto s = t1({0.5f}), u = t1({-2.0f});
    const std::array<std::int64_t, 1> to{static_cast<std::int64_t>(n)};
    // s broadcast only to raw readers: the expand runs nothing; u also read by a thunk
    // (its sum): u's expand keeps its thunk and so does its raw-capable reader.
    auto step = [&] {
      const auto ue = u.expand(to);
      return std::make_pair((x * s.expand(to) + 1.0) * ue, ue.sum());
    };
    auto g = capture(kCpu, step);
    ASSERT_TRUE(g.stats().native) << g.stats().fallback_reason;
    EXPECT_EQ(g.stats().raw_nodes, 3u) << "n " << n;  // the expand of s, the mul by it, add_scalar
    for (int round = 0; round < 3; ++round) {
      const float sv = 0.25f * static_cast<float>(round) - 1.5f, uv = static_cast<float>(round) + 0.5f;
      s.copy_from(t1({sv}));
      u.copy_from(t1({uv}));
      g.replay();
      std::vector<float> want(n);
      for (std::size_t i = 0; i < n; ++i) want[i] = (xv[i] * sv + 1.0f) * uv;
      const auto& [out, sum] = g.outputs();
      EXPECT_EQ(out.to_vec<float>(), want) << "n " << n << ", round " << round;
      const auto [eo, es] = step();
      EXPECT_EQ(out.to_vec<float>(), eo.to_vec<float>()) << "eager, n " << n << ", round " << round;
      EXPECT_EQ(sum.to_vec<float>(), es.to_vec<float>()) << "eager, n " << n << ", round " << round;
    }
  }
}

TEST(GraphFuse, AWriteIntoAViewOverlappingItsSourceAtAnotherOffsetRunsUntiled) {
  // a = base[0, n), b = base[1, n + 1): b <- a * 2 + 1 reads a's elements before the write
  // changes them (node after node); tile by tile, tile k's write would change the first
  // element tile k + 1 reads.
  constexpr std::size_t n = 3 * 4096 + 5;
  std::vector<float> bv(n + 1);
  for (std::size_t i = 0; i <= n; ++i) bv[i] = static_cast<float>(i % 7);
  const auto base = t1(bv);
  const auto a = base.slice({Slice(0, static_cast<std::int64_t>(n))});
  const auto b = base.slice({Slice(1, static_cast<std::int64_t>(n) + 1)});
  auto step = [&] {
    detail::graph_write(b.handle(), (a * 2.0 + 1.0).handle());
    return base * 1.0;
  };
  auto by_hand = [&](std::vector<float>& v) {
    const std::vector<float> old = v;
    for (std::size_t i = 0; i < n; ++i) v[i + 1] = old[i] * 2.0f + 1.0f;
  };
  for (const char* mode : {static_cast<const char*>(nullptr), "run"}) {
    std::vector<float> want = bv;
    base.copy_from(t1(bv));
    auto g = [&] {
      const Untiled u(mode);
      return capture(kCpu, step);
    }();
    ASSERT_TRUE(g.stats().native) << g.stats().fallback_reason;
    by_hand(want);
    EXPECT_EQ(base.to_vec<float>(), want) << "the capture run";
    for (int r = 0; r < 3; ++r) {
      g.replay();
      by_hand(want);
      EXPECT_EQ(base.to_vec<float>(), want) << "replay " << r;
      EXPECT_EQ(g.outputs().to_vec<float>(), want) << "replay " << r;
    }
  }
}

// ---- an optimizer step on a 301 x 257 layer (77,357 weights: 19 tiles, odd tail) ----
struct Layer : Module {
  nn::Linear fc;
  explicit Layer(const Device& ad) : fc(nn::LinearConfig{.d_input = 301, .d_output = 257}, ad) {
    fc.weight = Tensor<2>::from_data(TensorData::from<float>(wave(301 * 257, 1.0), {301, 257}), ad).require_grad();
    fc.bias = Tensor<1>::from_data(TensorData::from<float>(wave(257, 2.0), {257}), ad).require_grad();
  }
  void visit(ModuleVisitor& v) override { v.module("fc", fc); }
  const char* type_name() const override { return "Layer"; }
  std::vector<float> params() const {
    std::vector<float> out = fc.weight.inner().to_vec<float>();
    const std::vector<float> b = fc.bias->inner().to_vec<float>();
    out.insert(out.end(), b.begin(), b.end());
    return out;
  }
};

template <class MakeOpt>
void check_optimizer(MakeOpt make) {
  const Device ad = kCpu.autodiff();
  std::vector<float> xv(3 * 301), yv(3 * 257, 0.0f);
  for (std::size_t i = 0; i < xv.size(); ++i) xv[i] = static_cast<float>((i * 37) % 101) / 101.0f - 0.3f;
  for (std::size_t r = 0; r < 3; ++r) yv[r * 257 + r * 11] = 1.0f;
  const auto x = Tensor<2>::from_data(TensorData::from<float>(xv, {3, 301}), ad);
  const auto y = Tensor<2>::from_data(TensorData::from<float>(yv, {3, 257}), ad);
  Layer eager_m(ad), graph_m(ad);
  auto eager_opt = make(), graph_opt = make();
  graph_opt.set_graph_mode(ad);
  constexpr double kLr = 1e-2;
  auto step = [&](Layer& m, optim::ModuleOptimizer& opt) {
    auto loss = loss::cross_entropy_with_logits(m.fc.forward(x), y);
    opt.step(kLr, m, loss.backward());
    return loss;
  };
  for (int i = 0; i < 2; ++i) {  // warm-up: the state exists before the capture
    (void)step(eager_m, eager_opt);
    graph_opt.prepare_step(kLr);
    (void)step(graph_m, graph_opt);
  }
  graph_opt.prepare_step(kLr);
  auto g = capture(ad, [&] { return step(graph_m, graph_opt); });
  ASSERT_TRUE(g.stats().native) << g.stats().fallback_reason;
  (void)step(eager_m, eager_opt);  // the captured step, eagerly
  EXPECT_EQ(graph_m.params(), eager_m.params()) << "after the capture run";
  for (int i = 0; i < 6; ++i) {
    graph_opt.prepare_step(kLr);
    g.replay();
    (void)step(eager_m, eager_opt);
    ASSERT_EQ(graph_m.params(), eager_m.params()) << "replay " << i << " against eager step " << i + 4;
  }
}

TEST(GraphFuse, AdamStepsReplayBitwiseEqualToEager) {
  check_optimizer([] { return optim::ModuleOptimizer::adam(); });
}
TEST(GraphFuse, AdamWStepsReplayBitwiseEqualToEager) {
  check_optimizer([] { return optim::ModuleOptimizer::adamw(); });
}
TEST(GraphFuse, SgdMomentumStepsReplayBitwiseEqualToEager) {
  check_optimizer([] { return optim::ModuleOptimizer::sgd(optim::SgdConfig{.momentum = 0.9, .weight_decay = 1e-3}); });
}

}  // namespace
