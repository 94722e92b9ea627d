// Graph capture and replay (tensor/graph.hpp) on every device (cpu, mini, vulkan:0 when
// present; one per process with TENSOR_TEST_DEVICE): replay equals values worked out by
// hand, outputs keep their buffers, copy_from refreshes inputs, each refusal throws
// GraphCaptureError and leaves the device usable, the fallback, a graph outliving its
// user's handles. Native replay: the CPU's list, vulkan's pre-recorded command buffer (a
// training step there too equals eager steps bitwise: the same kernels on the same
// buffers); mini re-runs the closure.
#include <cmath>
#include <sstream>

#include <tensor/distributed.hpp>
#include <tensor/graph.hpp>
#include <tensor/loss.hpp>
#include <tensor/modules/core.hpp>
#include <tensor/modules/optim.hpp>
#include <tensor/profile.hpp>
#include <tensor/quantization.hpp>

#include "conformance/devices.hpp"
#include "conformance/mini_backend.hpp"
#include "dispatch/hooks.hpp"
#include "lib/src/handles.hpp"
#include "test_util.hpp"

namespace {

using namespace tt;
namespace d = tensor::dispatch;

const Device& dev() { return tt::conf::DeviceScope::current(); }
// Native replay: the cpu's replay list, vulkan's pre-recorded command buffer; mini re-runs the closure.
bool native_here() { return dev().to_string() == "cpu" || dev().to_string().rfind("vulkan", 0) == 0; }

class Graphs : public ::testing::TestWithParam<Device> {
 protected:
  void SetUp() override { scope_.enter(GetParam()); }
  void TearDown() override { scope_.leave(); }
  tt::conf::DeviceScope scope_;
};

INSTANTIATE_TEST_SUITE_P(Devices, Graphs, ::testing::ValuesIn(tt::conf::devices()),
                         [](const ::testing::TestParamInfo<Device>& p) { return tt::conf::test_name(p.param); });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(Graphs);

Tensor<1> f1(const std::vector<float>& v) { return Tensor<1>::from_data(TensorData::from<float>(v, {v.size()}), dev()); }

void expect_near(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5f * (1.0f + std::fabs(want[i]))) << i;
}

// (x + w) * 2 - exp(w) * x, by hand.
std::vector<float> step_by_hand(const std::vector<float>& x, const std::vector<float>& w) {
  std::vector<float> out(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) out[i] = (x[i] + w[i]) * 2.0f - std::exp(w[i]) * x[i];
  return out;
}

// Counts the ops passing the hooks on this thread.
struct Counter final : d::OpHook {
  void around(d::OpCall& call, const d::OpNext& next) override {
    ++n;
    next(call);
  }
  int n = 0;
};

TEST_P(Graphs, ReplayThreeTimesEqualsValuesByHandAndRefreshesInputs) {
  std::vector<float> xv = {1, 2, 3, 4}, wv = {0.5f, -1, 0, 2};
  const auto x = f1(xv), w = f1(wv);
  auto g = capture(dev(), [&] { return (x + w) * 2.0 - w.exp() * x; });
  expect_near(g.outputs().to_vec<float>(), step_by_hand(xv, wv));  // the capture run's result is real
  EXPECT_EQ(g.is_native(), native_here()) << g.stats().fallback_reason;
  const Tensor<1> before = g.outputs();  // a second handle on the output buffer
  for (int r = 0; r < 3; ++r) {
    xv = {static_cast<float>(r), -2.0f * static_cast<float>(r), 7, 0.25f};
    x.copy_from(f1(xv));
    g.replay();
    expect_near(g.outputs().to_vec<float>(), step_by_hand(xv, wv));
    // The same buffer: the handle taken before the replays sees the new values.
    expect_near(before.to_vec<float>(), step_by_hand(xv, wv));
  }
  // An eager run of the same step on fresh tensors agrees with the last replay.
  const auto x2 = f1(xv), w2 = f1(wv);
  expect_near(g.outputs().to_vec<float>(), ((x2 + w2) * 2.0 - w2.exp() * x2).to_vec<float>());
}

TEST_P(Graphs, AMovedFromGraphThrowsInsteadOfReplaying) {
  const auto x = f1({1, 2});
  auto g = capture(dev(), [&] { return x * 3.0; });
  auto h = std::move(g);
  EXPECT_THROW(g.replay(), Error);  // NOLINT(bugprone-use-after-move): the point of the test
  EXPECT_THROW((void)g.stats(), Error);
  h.replay();
  expect_near(h.outputs().to_vec<float>(), {3, 6});
}

TEST_P(Graphs, StatsCountTheNodesAndTheNativeReplayPassesNoHook) {
  const auto x = f1({1, 2, 3}), w = f1({4, 5, 6});
  auto g = capture(dev(), [&] {
    auto s = x + w;
    auto t = (x * w).sum();
    return std::make_pair(s, t);
  });
  const GraphStats s = g.stats();
  EXPECT_EQ(s.nodes, 3u);  // add, mul, sum
  EXPECT_EQ(s.inputs, 2u);
  EXPECT_EQ(s.outputs, 2u);
  ASSERT_EQ(s.op_counts.size(), 3u);
  EXPECT_EQ(s.op_counts[0].first, OpCode::add);
  EXPECT_EQ(s.op_counts[1].first, OpCode::mul);
  EXPECT_EQ(s.op_counts[2].first, OpCode::sum);
  EXPECT_EQ(s.native, native_here());
  EXPECT_EQ(s.fallback_reason.empty(), native_here());
  Counter c;
  d::add_thread_hook(&c);
  g.replay();
  d::remove_thread_hook(&c);
  if (native_here()) {
    EXPECT_EQ(c.n, 0);  // the list runs without dispatch or hooks
  } else {
    EXPECT_GE(c.n, 3);  // the closure ran again
  }
  expect_near(g.outputs().first.to_vec<float>(), {5, 7, 9});
  expect_near(g.outputs().second.to_vec<float>(), {4 + 10 + 18});
  // The profiler: one graph_replay row per native replay and no per-node rows; the
  // fallback's ops are profiled as ops.
  profile::start();
  g.replay();
  g.replay();
  const ProfileResult pr = profile::stop();
  auto calls = [&](const std::string& op) {
    std::uint64_t n = 0;
    for (const ProfileRow& r : pr.rows)
      if (r.op == op) n += r.calls;
    return n;
  };
  EXPECT_EQ(calls("graph_replay"), native_here() ? 2u : 0u);
  EXPECT_EQ(calls("add"), native_here() ? 0u : 2u);
}

TEST_P(Graphs, IntermediateValuesAndViewsReplayInOrder) {
  std::vector<float> xv = {1, 2, 3, 4, 5, 6};
  const auto x = Tensor<2>::from_data(TensorData::from<float>(xv, {2, 3}), dev());
  auto g = capture(dev(), [&] {
    auto t = x * 3.0;                        // internal
    auto u = t.transpose().reshape(std::array<std::int64_t, 1>{6});  // a view chain
    auto v = u + 1.0;
    return v * v;
  });
  auto by_hand = [](const std::vector<float>& a) {  // transpose of [2,3], then (3a + 1)^2
    std::vector<float> out;
    for (std::size_t c = 0; c < 3; ++c)
      for (std::size_t r = 0; r < 2; ++r) {
        const float t = 3 * a[r * 3 + c] + 1;
        out.push_back(t * t);
      }
    return out;
  };
  expect_near(g.outputs().to_vec<float>(), by_hand(xv));
  for (int r = 0; r < 3; ++r) {
    xv = {static_cast<float>(r), 1, -1, 2, static_cast<float>(-r), 0.5f};
    x.copy_from(Tensor<2>::from_data(TensorData::from<float>(xv, {2, 3}), dev()));
    g.replay();
    expect_near(g.outputs().to_vec<float>(), by_hand(xv));
  }
}

TEST_P(Graphs, EachRefusalThrowsAndTheDeviceStaysUsable) {
  const auto a = f1({1, 2, 3}), b = f1({10, 20, 30});
  const auto mask = Tensor<1, Bool>::from_data(TensorData::from<bool>({true, false, true}, {3}), dev());
  const Device other = dev().to_string() == "cpu" ? tt::mini::device() : Device::cpu();
  const auto qa = quantize_dynamic(a, QuantScheme{}.with_value(QuantValue::Q8S));
  const std::vector<std::pair<const char*, std::function<void()>>> refused = {
      {"into_data", [&] { (void)(a + b).into_data(); }},
      {"to_vec", [&] { (void)(a + b).to_vec<float>(); }},
      {"into_data", [&] { std::ostringstream os; os << (a + b); }},
      {"sync", [&] { dev().sync(); }},
      {"seed", [&] { dev().seed(7); }},
      {"set_default_dtypes", [&] { (void)set_default_dtypes(dev(), FloatDType::F32, IntDType::I32, BoolDType::U8); }},
      {"mask_select", [&] { (void)a.mask_select(mask); }},
      {"argwhere", [&] { (void)mask.argwhere(); }},
      {"random", [&] { (void)Tensor<1>::random({3}, Distribution::uniform(0, 1), dev()); }},
      {"to_device", [&] { (void)a.to_device(other); }},
      {"runs on", [&] { (void)(Tensor<1>::ones({3}, other) + 1.0); }},
      {"copy_from", [&] { a.copy_from(b); }},
      {"nested", [&] { (void)capture(dev(), [&] { return a + b; }); }},
      {"all_reduce", [&] { (void)dist::all_reduce(a, dist::ReduceOp::Sum); }},
      // quantize_dynamic reads the scales' maxima back; so may every quant row that quantizes again
      {"quantize_dynamic", [&] { (void)quantize_dynamic(a, QuantScheme{}.with_value(QuantValue::Q8S)); }},
      {"q_exp", [&] { (void)qa.exp(); }},
      {"q_flip", [&] { (void)qa.flip({0}); }},
  };
  for (const auto& [what, body] : refused) {
    SCOPED_TRACE(what);
    EXPECT_THROWS(GraphCaptureError, capture(dev(), [&] { return (a * 2.0) + (body(), b); }), "[graph_capture]", what);
    // The device works eagerly, and a new capture records and replays.
    expect_near((a + b).to_vec<float>(), {11, 22, 33});
    auto g = capture(dev(), [&] { return a - b; });
    g.replay();
    expect_near(g.outputs().to_vec<float>(), {-9, -18, -27});
  }
}

TEST_P(Graphs, CopyFromChecksShapeDtypeAndDevice) {
  const auto a = f1({1, 2, 3});
  EXPECT_THROWS(ShapeError, a.copy_from(f1({1, 2})), "[copy_from]", "[3]", "[2]");
  EXPECT_THROWS(DTypeError, a.copy_from(Tensor<1>::from_data(TensorData::from<double>({1, 2, 3}, {3}), dev())),
                "[copy_from]", "f64");
  const Device other = dev().to_string() == "cpu" ? tt::mini::device() : Device::cpu();
  EXPECT_THROWS(DeviceError, a.copy_from(Tensor<1>::ones({3}, other)), "[copy_from]");
  a.copy_from(f1({7, 8, 9}));
  expect_near(a.to_vec<float>(), {7, 8, 9});
  // Into a strided view: the values land where the view looks.
  const auto m = Tensor<2>::zeros({2, 2}, dev());
  const auto mt = m.transpose();
  mt.copy_from(Tensor<2>::from_data(TensorData::from<float>({1, 2, 3, 4}, {2, 2}), dev()));
  expect_near(m.reshape(std::array<std::int64_t, 1>{4}).to_vec<float>(), {1, 3, 2, 4});
}

TEST_P(Graphs, TheFallbackReRunsTheClosure) {
  // Rebinding a captured variable makes the step's effect live in the closure, so the
  // graph replays by re-running it on every device: x grows by one per run.
  auto x = f1({1, 2});
  auto g = capture(dev(), [&] {
    x = x + 1.0;
    return x * 10.0;
  });
  EXPECT_FALSE(g.is_native());
  EXPECT_FALSE(g.stats().fallback_reason.empty());
  expect_near(g.outputs().to_vec<float>(), {20, 30});
  const Tensor<1> before = g.outputs();
  for (int r = 1; r <= 3; ++r) {
    g.replay();
    expect_near(x.to_vec<float>(), {1.0f + r + 1, 2.0f + r + 1});
    expect_near(g.outputs().to_vec<float>(), {(2.0f + r) * 10, (3.0f + r) * 10});
    expect_near(before.to_vec<float>(), {(2.0f + r) * 10, (3.0f + r) * 10});  // same buffer
  }
  // allow_eager_fallback = false refuses what would fall back.
  CaptureOptions strict;
  strict.allow_eager_fallback = false;
  EXPECT_THROWS(GraphCaptureError, capture(dev(), [&] { x = x + 1.0; return x * 1.0; }, strict), "[graph_capture]",
                "not supported");
  if (!native_here()) {
    EXPECT_THROWS(GraphCaptureError, capture(dev(), [&] { return x + 1.0; }, strict), "not supported");
  }
}

TEST_P(Graphs, AGraphOutlivesItsUsersHandlesAndReleasesThem) {
  std::optional<Graph<Tensor<1>>> g;
  const auto keep = f1({3, 4});
  d::Primitive* p = tensor::detail::handles::prim_of(keep.handle());
  {
    const Tensor<1> x = keep;  // the user's handle for the capture, dropped below
    g.emplace(capture(dev(), [x] { return x * 2.0 + 1.0; }));
  }
  // The user kept nothing of the output: a fresh read after each replay.
  for (int r = 0; r < 3; ++r) {
    keep.copy_from(f1({static_cast<float>(r), 5}));
    g->replay();
    expect_near(g->outputs().to_vec<float>(), {2.0f * r + 1, 11});
  }
  EXPECT_FALSE(p->unique_ref());  // the graph (its pins, its closure) holds the input
  g.reset();
  EXPECT_TRUE(p->unique_ref());   // released: `keep` is the only handle again
}

// ---- a whole training step: forward, backward and an optimizer step ----------------------
// A 6-8-3 MLP on the autodiff device over this one, trained with cross-entropy. The
// optimizer runs in graph mode (state updated in place, the rate and Adam's bias
// corrections in device tensors refreshed by prepare_step), so the captured step replays
// with each step's values. The CPU replays the inner device's kernels natively, and N
// replayed steps must give bitwise the parameters and losses of N eager steps.
struct Mlp : Module {
  nn::Linear fc1, fc2;
  Mlp(const Device& ad, std::uint64_t seed)
      : fc1(nn::LinearConfig{.d_input = 6, .d_output = 8}, ad), fc2(nn::LinearConfig{.d_input = 8, .d_output = 3}, ad) {
    // Deterministic starting weights from the seed (the same for both runs of a test).
    auto fill = [&](std::size_t n, std::uint64_t k) {
      std::vector<float> v(n);
      for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<float>(std::sin(0.37 * static_cast<double>(i + 1) + 1.3 * static_cast<double>(seed + k))) * 0.4f;
      return v;
    };
    fc1.weight = Tensor<2>::from_data(TensorData::from<float>(fill(48, 1), {6, 8}), ad).require_grad();
    fc1.bias = Tensor<1>::from_data(TensorData::from<float>(fill(8, 2), {8}), ad).require_grad();
    fc2.weight = Tensor<2>::from_data(TensorData::from<float>(fill(24, 3), {8, 3}), ad).require_grad();
    fc2.bias = Tensor<1>::from_data(TensorData::from<float>(fill(3, 4), {3}), ad).require_grad();
  }
  Tensor<1> loss(const Tensor<2>& x, const Tensor<2>& y) const {
    return tensor::loss::cross_entropy_with_logits(fc2.forward(tensor::activation::relu(fc1.forward(x))), y);
  }
  void visit(ModuleVisitor& v) override {
    v.module("fc1", fc1);
    v.module("fc2", fc2);
  }
  const char* type_name() const override { return "Mlp"; }
  std::vector<float> params() const {
    std::vector<float> out;
    for (const auto& t : {fc1.weight.inner().to_vec<float>(), fc1.bias->inner().to_vec<float>(), fc2.weight.inner().to_vec<float>(),
                          fc2.bias->inner().to_vec<float>()})
      out.insert(out.end(), t.begin(), t.end());
    return out;
  }
};

// Batch `i % 3` of 4 rows (a data set of three batches): inputs and one-hot targets.
std::pair<TensorData, TensorData> batch(std::size_t i) {
  const std::size_t b = i % 3;
  std::vector<float> x(24), y(12, 0.0f);
  for (std::size_t i = 0; i < 24; ++i) x[i] = static_cast<float>(std::cos(0.11 * static_cast<double>(i * (b + 3)) + static_cast<double>(b)));
  for (std::size_t r = 0; r < 4; ++r) y[r * 3 + (r + b) % 3] = 1.0f;
  return {TensorData::from<float>(x, {4, 6}), TensorData::from<float>(y, {4, 3})};
}

// The rate of step `i` (a schedule: a rate frozen at capture would be caught).
double rate(std::size_t i) { return 0.05 / (1.0 + 0.1 * static_cast<double>(i)); }

enum class Opt { Sgd, SgdMomentum, Adam, AdamW };
optim::ModuleOptimizer make_opt(Opt o) {
  switch (o) {
    case Opt::Sgd: return optim::ModuleOptimizer::sgd();
    case Opt::SgdMomentum: return optim::ModuleOptimizer::sgd(optim::SgdConfig{.momentum = 0.9, .weight_decay = 0.01});
    case Opt::Adam: return optim::ModuleOptimizer::adam();
    case Opt::AdamW: return optim::ModuleOptimizer::adamw();
  }
  return optim::ModuleOptimizer::sgd();
}

// Parameters and losses after `steps` steps: eager, or two eager warm-up steps, a capture
// (the third step) and replays for the rest.
struct TrainRun {
  std::vector<float> params, losses;
  bool native = false;
  GraphStats stats;
};
TrainRun train(Opt which, std::size_t steps, bool replay, bool graph_mode = true) {
  const Device ad = dev().autodiff();
  Mlp m(ad, 7);
  auto opt = make_opt(which);
  if (graph_mode) opt.set_graph_mode(ad);
  auto [x0, y0] = batch(0);
  const auto x = Tensor<2>::from_data(std::move(x0), ad), y = Tensor<2>::from_data(std::move(y0), ad);
  double opt_lr = 0.0;
  auto step = [&] {
    Tensor<1> l = m.loss(x, y);
    opt.step(opt_lr, m, l.backward());
    return l;
  };
  TrainRun r;
  std::optional<Graph<Tensor<1>>> g;
  for (std::size_t i = 0; i < steps; ++i) {
    auto [xd, yd] = batch(i);
    x.copy_from(Tensor<2>::from_data(std::move(xd), ad));
    y.copy_from(Tensor<2>::from_data(std::move(yd), ad));
    opt_lr = rate(i);
    if (graph_mode) opt.prepare_step(opt_lr);
    if (!replay || i < 2) {
      r.losses.push_back(step().to_vec<float>()[0]);
    } else if (i == 2) {
      g.emplace(capture(ad, step));
      r.losses.push_back(g->outputs().to_vec<float>()[0]);
    } else {
      g->replay();
      r.losses.push_back(g->outputs().to_vec<float>()[0]);
    }
  }
  r.params = m.params();
  if (g) {
    r.native = g->is_native();
    r.stats = g->stats();
  }
  return r;
}

TEST_P(Graphs, TrainingStepsReplayedEqualEagerStepsBitwise) {
  if (!native_here()) GTEST_SKIP() << "native replay of a training step is the CPU's and vulkan's";
  for (const Opt o : {Opt::Sgd, Opt::SgdMomentum, Opt::Adam, Opt::AdamW}) {
    SCOPED_TRACE(static_cast<int>(o));
    constexpr std::size_t kSteps = 24;
    const TrainRun eager = train(o, kSteps, false), replayed = train(o, kSteps, true);
    EXPECT_TRUE(replayed.native) << replayed.stats.fallback_reason;
    // Forward, backward and the update are in the list: matmuls of both layers forward and
    // backward, and one write per parameter (and per moment) each step.
    EXPECT_GE(replayed.stats.nodes, 20u);
    const std::size_t per_param = o == Opt::Sgd ? 1 : o == Opt::SgdMomentum ? 2 : 3;
    EXPECT_EQ(replayed.stats.writes, 4 * per_param);
    // The update's elementwise nodes and the writes run as raw kernels on the arena (the
    // cpu's; vulkan replays one command buffer of the capture run's dispatches).
    if (dev().to_string() == "cpu") {
      EXPECT_GE(replayed.stats.raw_nodes, 4 * per_param);
    }
    ASSERT_EQ(eager.losses.size(), kSteps);
    ASSERT_EQ(replayed.losses.size(), kSteps);
    for (std::size_t i = 0; i < kSteps; ++i) EXPECT_EQ(eager.losses[i], replayed.losses[i]) << "step " << i;
    ASSERT_EQ(eager.params.size(), replayed.params.size());
    for (std::size_t i = 0; i < eager.params.size(); ++i) EXPECT_EQ(eager.params[i], replayed.params[i]) << i;
    // Training happened: the loss on the first batch fell (steps 0 and 21 see it) and the
    // parameters moved.
    EXPECT_LT(eager.losses[21], eager.losses[0]);
    EXPECT_NE(eager.params, Mlp(dev().autodiff(), 7).params());
  }
}

TEST_P(Graphs, APlainOptimizerStepFallsBackAndStillEqualsEager) {
  if (!native_here()) GTEST_SKIP() << "native replay of a training step is the CPU's and vulkan's";
  // Not in graph mode the optimizer gives the module new parameter tensors each step, so
  // the list could not repeat the step: the graph re-runs the closure instead.
  constexpr std::size_t kSteps = 6;
  const TrainRun eager = train(Opt::Adam, kSteps, false, false), replayed = train(Opt::Adam, kSteps, true, false);
  EXPECT_FALSE(replayed.native);
  EXPECT_FALSE(replayed.stats.fallback_reason.empty());
  EXPECT_EQ(eager.losses, replayed.losses);
  EXPECT_EQ(eager.params, replayed.params);
}

TEST_P(Graphs, GraphModeOptimizerChecksItsRateAndRefusesStateMadeInCapture) {
  const Device ad = dev().autodiff();
  Mlp m(ad, 3);
  auto opt = make_opt(Opt::Adam);
  opt.set_graph_mode(ad);
  const auto x = Tensor<2>::from_data(batch(0).first, ad), y = Tensor<2>::from_data(batch(0).second, ad);
  EXPECT_THROWS(Error, opt.step(0.1, m, m.loss(x, y).backward()), "prepare_step");
  opt.prepare_step(0.1);
  EXPECT_THROWS(Error, opt.step(0.2, m, m.loss(x, y).backward()), "prepare_step", "0.2");
  // The first step makes the moments: inside a capture that is refused (on mini the
  // backward's `ones`, a host-trip default there, is refused first).
  EXPECT_THROWS(GraphCaptureError, capture(ad, [&] { opt.step(0.1, m, m.loss(x, y).backward()); }), "[graph_capture]",
                native_here() ? "first step" : "");
  EXPECT_THROWS(GraphCaptureError, capture(ad, [&] { opt.prepare_step(0.1); }), "[graph_capture]", "prepare_step");
  opt.step(0.1, m, m.loss(x, y).backward());  // the device stays usable
  auto plain = make_opt(Opt::Adam);
  EXPECT_THROWS(Error, plain.prepare_step(0.1), "set_graph_mode");
}

TEST_P(Graphs, CopyFromOnAnAutodiffDevice) {
  const Device ad = dev().autodiff();
  const auto a = Tensor<1>::from_data(TensorData::from<float>({1, 2, 3}, {3}), ad);
  a.copy_from(Tensor<1>::from_data(TensorData::from<float>({4, 5, 6}, {3}), ad));
  expect_near(a.to_vec<float>(), {4, 5, 6});
  expect_near(a.inner().to_vec<float>(), {4, 5, 6});
}

}  // namespace
