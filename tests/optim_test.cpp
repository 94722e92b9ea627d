// tensor/optim.hpp: a few optimizer steps against values worked out by hand (the
// arithmetic is in the comments), clipping, schedules and the typed errors, on every
// device of the conformance list (cpu, mini, vulkan; one process per device).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include <tensor/optim.hpp>

#include "conformance/devices.hpp"
#include "test_util.hpp"

namespace {

using namespace tensor;
using namespace tensor::optim;

const Device& dev() { return tt::conf::DeviceScope::current(); }

class Optim : public ::testing::TestWithParam<Device> {
 protected:
  void SetUp() override { scope_.enter(GetParam()); }
  void TearDown() override { scope_.leave(); }
  tt::conf::DeviceScope scope_;
};
INSTANTIATE_TEST_SUITE_P(Devices, Optim, ::testing::ValuesIn(tt::conf::devices()),
                         [](const ::testing::TestParamInfo<Device>& p) { return tt::conf::test_name(p.param); });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(Optim);

Tensor<1> vec(std::vector<float> v) { return Tensor<1>::from_data(TensorData::from(v), dev()); }
template <std::size_t D>
std::vector<double> values(const Tensor<D>& t) { return t.into_data().convert(DType::F64).template to_vec<double>(); }

#define EXPECT_VALUES(t, ...)                                                              \
  do {                                                                                      \
    const std::vector<double> got_ = values(t), want_ = __VA_ARGS__;                        \
    ASSERT_EQ(got_.size(), want_.size());                                                   \
    for (std::size_t i_ = 0; i_ < want_.size(); ++i_)                                      \
      EXPECT_NEAR(got_[i_], want_[i_], 2e-6 * (1.0 + std::abs(want_[i_]))) << "element " << i_; \
  } while (0)

TEST_P(Optim, SgdPlain) {
  Sgd opt;
  // p - lr g = [1 - 0.1 * 0.5, 2 + 0.1 * 1]
  EXPECT_VALUES(opt.step(0.1, "p", vec({1, 2}), vec({0.5f, -1})), {0.95, 2.1});
  EXPECT_EQ(opt.steps("p"), 1u);
  EXPECT_EQ(opt.steps("other"), 0u);
}

TEST_P(Optim, SgdMomentum) {
  Sgd opt(SgdConfig{.momentum = 0.9});
  Tensor<1> p = vec({1});
  // g = 1 each step: buf = 1, 1.9, 2.71; p = 1 - 0.1 buf cumulatively: 0.9, 0.71, 0.439.
  const std::vector<double> want = {0.9, 0.71, 0.439};
  for (double w : want) {
    p = opt.step(0.1, "p", p, vec({1}));
    EXPECT_VALUES(p, {w});
  }
}

TEST_P(Optim, SgdNesterov) {
  Sgd opt(SgdConfig{.momentum = 0.9, .nesterov = true});
  Tensor<1> p = vec({1});
  // buf = 1 then 1.9; the step is g + 0.9 buf = 1.9 then 2.71: p = 0.81, then 0.539.
  p = opt.step(0.1, "p", p, vec({1}));
  EXPECT_VALUES(p, {0.81});
  p = opt.step(0.1, "p", p, vec({1}));
  EXPECT_VALUES(p, {0.539});
}

TEST_P(Optim, SgdDampeningAndWeightDecay) {
  Sgd damp(SgdConfig{.momentum = 0.9, .dampening = 0.5});
  Tensor<1> p = vec({1});
  // buf = 1 (no dampening on the first step), then 0.9 + 0.5 = 1.4: p = 0.9, then 0.76.
  p = damp.step(0.1, "p", p, vec({1}));
  p = damp.step(0.1, "p", p, vec({1}));
  EXPECT_VALUES(p, {0.76});

  Sgd decay(SgdConfig{.weight_decay = 0.1});
  Tensor<1> q = vec({2});
  // g' = 1 + 0.1 * 2 = 1.2: q = 2 - 0.5 * 1.2 = 1.4; g' = 1.14: q = 1.4 - 0.57 = 0.83.
  q = decay.step(0.5, "q", q, vec({1}));
  EXPECT_VALUES(q, {1.4});
  q = decay.step(0.5, "q", q, vec({1}));
  EXPECT_VALUES(q, {0.83});
}

TEST_P(Optim, AdamThreeSteps) {
  Adam opt;
  Tensor<1> p = vec({0});
  // lr 0.1, g = 1, -2, 0.5. t=1: m = 0.1, v = 0.001, m^ = 1, v^ = 1, p = -0.1 (+1e-9 from eps).
  // t=2: m = -0.11, v = 0.004999; m^ = -0.11/0.19, v^ = 0.004999/0.001999; p = -0.0633896465.
  // t=3: m = -0.049, v = 0.005244001; c1 = 0.271, c2 = 0.002997001; p = -0.0497205803.
  const std::vector<float> grads = {1, -2, 0.5f};
  const std::vector<double> want = {-0.099999999, -0.0633896465, -0.0497205803};
  for (std::size_t i = 0; i < grads.size(); ++i) {
    p = opt.step(0.1, "p", p, vec({grads[i]}));
    EXPECT_VALUES(p, {want[i]});
  }
  EXPECT_EQ(opt.steps("p"), 3u);
}

TEST_P(Optim, AdamStatesArePerParameterAndKeepTheShape) {
  Adam opt;
  const Tensor<2> w = Tensor<2>::from_data(TensorData::from(std::vector<float>{1, 2, 3, 4}, Shape{2, 2}), dev());
  const Tensor<2> g = Tensor<2>::from_data(TensorData::from(std::vector<float>{2, -2, 0, 4}, Shape{2, 2}), dev());
  // First Adam step is lr * g / (|g| + eps): -0.1 sign(g), and 0 where g = 0.
  const Tensor<2> w1 = opt.step(0.1, "w", w, g);
  EXPECT_EQ(w1.shape(), (Shape{2, 2}));
  EXPECT_VALUES(w1, {0.9, 2.1, 3.0, 3.9});
  // A second parameter starts its own moments: its first step is again -0.1 sign(g).
  EXPECT_VALUES(opt.step(0.1, "b", vec({5}), vec({-3})), {5.1});
  EXPECT_EQ(opt.steps("w"), 1u);
  EXPECT_EQ(opt.steps("b"), 1u);
  opt.reset();
  EXPECT_EQ(opt.steps("w"), 0u);
}

TEST_P(Optim, AdamL2AndAdamWDecoupled) {
  Adam l2(AdamConfig{.weight_decay = 0.5});
  // g' = 0 + 0.5 * 1: the first step is -0.1 sign(g') = -0.1.
  EXPECT_VALUES(l2.step(0.1, "p", vec({1}), vec({0})), {0.9});

  AdamW w(AdamWConfig{.weight_decay = 0.5});
  Tensor<1> p = vec({1});
  // p *= 1 - 0.1 * 0.5 = 0.95, then Adam's -0.1: 0.85; then 0.85 * 0.95 - 0.1 = 0.7075.
  p = w.step(0.1, "p", p, vec({1}));
  EXPECT_VALUES(p, {0.85});
  p = w.step(0.1, "p", p, vec({1}));
  EXPECT_VALUES(p, {0.7075});
  // With g = 0 AdamW only decays (Adam's step is 0 / (0 + eps) = 0): 2 * 0.95.
  AdamW decay_only(AdamWConfig{.weight_decay = 0.5});
  EXPECT_VALUES(decay_only.step(0.1, "q", vec({2}), vec({0})), {1.9});
}

TEST_P(Optim, GradientClipping) {
  EXPECT_VALUES(GradientClipping::value(0.5).clip(vec({-2, 0.3f, 1})), {-0.5, 0.3, 0.5});
  // ||[3, 4]|| = 5 > 1: scaled by 1 / (5 + 1e-6).
  EXPECT_VALUES(GradientClipping::norm(1.0).clip(vec({3, 4})), {0.6 / (1 + 2e-7), 0.8 / (1 + 2e-7)});
  // ||[0.3, 0.4]|| = 0.5 <= 1: unchanged.
  EXPECT_VALUES(GradientClipping::norm(1.0).clip(vec({0.3f, 0.4f})), {0.3, 0.4});
  const Tensor<2> g2 = Tensor<2>::from_data(TensorData::from(std::vector<float>{0, 6, 8, 0}, Shape{2, 2}), dev());
  const Tensor<2> c2 = GradientClipping::norm(5.0).clip(g2);  // norm 10 -> halved
  EXPECT_EQ(c2.shape(), (Shape{2, 2}));
  EXPECT_VALUES(c2, {0, 3, 4, 0});
  // Inside an optimizer the clip comes first: lr 1, p 0, g [2, -3] clipped to [1, -1].
  Sgd opt(SgdConfig{.grad_clipping = GradientClipping::value(1.0)});
  EXPECT_VALUES(opt.step(1.0, "p", vec({0, 0}), vec({2, -3})), {-1, 1});
}

TEST_P(Optim, TypedErrors) {
  Adam opt;
  EXPECT_THROWS(ShapeError, opt.step(0.1, "fc.weight", vec({1, 2}), vec({1, 2, 3})), "[Adam::step]", "fc.weight", "[2]", "[3]");
  EXPECT_EQ(opt.steps("fc.weight"), 0u);  // a failed step leaves no state behind
  EXPECT_THROWS(ShapeError, GradientClipping::norm(0.0), "[GradientClipping::norm]");
  EXPECT_THROWS(ShapeError, GradientClipping::value(-1.0), "[GradientClipping::value]");
  EXPECT_THROWS(ShapeError, Adam(AdamConfig{.beta_1 = 1.0}), "[Adam]", "beta");
  EXPECT_THROWS(ShapeError, Sgd(SgdConfig{.nesterov = true}), "[Sgd]", "nesterov");
}

TEST_P(Optim, RecordRoundTripResumesTheSameSteps) {
  // Two Adam steps, the state through a .safetensors file into a fresh optimizer, then the
  // third step: the uninterrupted run's value from AdamThreeSteps.
  Adam first;
  Tensor<1> p = vec({0});
  p = first.step(0.1, "p", p, vec({1}));
  p = first.step(0.1, "p", p, vec({-2}));
  const io::NamedTensors record = first.to_record();
  ASSERT_EQ(record.size(), 3u);
  EXPECT_EQ(record[0].first, "p.step");
  EXPECT_EQ(record[0].second.to_vec<std::int64_t>(), std::vector<std::int64_t>{2});
  EXPECT_EQ(record[1].first, "p.a");
  EXPECT_EQ(record[2].first, "p.b");
  // m = -0.11, v = 0.004999 after g = 1, -2 (AdamThreeSteps' comment).
  EXPECT_NEAR(record[1].second.convert(DType::F64).to_vec<double>()[0], -0.11, 1e-7);
  EXPECT_NEAR(record[2].second.convert(DType::F64).to_vec<double>()[0], 0.004999, 1e-9);
  const std::string path = ::testing::TempDir() + "/optim_record_" + tt::conf::test_name(dev()) + ".safetensors";
  io::save_safetensors(path, record);

  Adam resumed;
  resumed.load_record(io::load_safetensors(path).tensors, dev());
  EXPECT_EQ(resumed.steps("p"), 2u);
  EXPECT_VALUES(resumed.step(0.1, "p", p, vec({0.5f})), {-0.0497205803});

  // A record of another shape is caught at the next step; malformed records are typed errors.
  EXPECT_THROWS(ShapeError, resumed.step(0.1, "p", vec({1, 2}), vec({1, 2})), "[Adam::step]", "'p'", "expected 2 elements; got 1");
  EXPECT_THROWS(ShapeError, resumed.load_record({{"p.velocity", TensorData::from(std::vector<float>{1})}}), "[load_record]", "p.velocity");
  EXPECT_THROWS(ShapeError, resumed.load_record({{"q.a", TensorData::from(std::vector<float>{1})}}), "[load_record]", "q.step");
  EXPECT_THROWS(DTypeError, resumed.load_record({{"q.step", TensorData::from(std::vector<float>{1})}}), "[load_record]", "i64");
  EXPECT_EQ(resumed.steps("p"), 3u);  // failed loads leave the state as it was

  // Sgd with momentum: the buffer comes back too (buf 1.9 after two steps of g = 1).
  Sgd sgd(SgdConfig{.momentum = 0.9});
  Tensor<1> q = vec({1});
  q = sgd.step(0.1, "q", q, vec({1}));
  q = sgd.step(0.1, "q", q, vec({1}));
  Sgd sgd2(SgdConfig{.momentum = 0.9});
  sgd2.load_record(sgd.to_record(), dev());
  EXPECT_VALUES(sgd2.step(0.1, "q", q, vec({1})), {0.439});
}

// Records that would poison the next update (issue 30): each is refused by load_record with
// a typed error naming the entry, and the state stays as it was.
TEST_P(Optim, RecordsThatWouldPoisonAnUpdateAreRefused) {
  auto i64 = [](std::int64_t v) { return TensorData::from(std::vector<std::int64_t>{v}); };
  auto f32 = [](float v) { return TensorData::from(std::vector<float>{v}); };
  Adam adam;
  (void)adam.step(0.1, "p", vec({0}), vec({1}));
  ASSERT_EQ(adam.steps("p"), 1u);
  // A negative step wrapped to 2^64 - 1, and the next step's count to 0: 1 - beta^0 = 0 in the
  // bias correction made the update NaN.
  EXPECT_THROWS_FROM(ShapeError, "load_record", adam.load_record({{"p.step", i64(-1)}, {"p.a", f32(0)}, {"p.b", f32(0)}}, dev()),
                     "'p.step'", "negative", "got -1");
  // Some moments without the others: update() would read the absent one.
  EXPECT_THROWS_FROM(ShapeError, "load_record", adam.load_record({{"p.step", i64(2)}, {"p.a", f32(0.5f)}}, dev()), "'p'",
                     "'p.a' and 'p.b'", "'p.a' only");
  EXPECT_THROWS_FROM(ShapeError, "load_record", adam.load_record({{"p.step", i64(2)}}, dev()), "'p'", "neither");
  // Values no update can start from: NaN, infinity, a negative mean of squares.
  const float nan = std::nanf(""), inf = HUGE_VALF;
  EXPECT_THROWS_FROM(ShapeError, "load_record", adam.load_record({{"p.step", i64(2)}, {"p.a", f32(nan)}, {"p.b", f32(1)}}, dev()),
                     "'p.a'", "finite");
  EXPECT_THROWS_FROM(ShapeError, "load_record", adam.load_record({{"p.step", i64(2)}, {"p.a", f32(0)}, {"p.b", f32(inf)}}, dev()),
                     "'p.b'", "finite");
  EXPECT_THROWS_FROM(ShapeError, "load_record", adam.load_record({{"p.step", i64(2)}, {"p.a", f32(0)}, {"p.b", f32(-1)}}, dev()),
                     "'p.b'", ">= 0", "got -1");
  EXPECT_EQ(adam.steps("p"), 1u);  // every refused record left the state alone
  // A moment the optimizer does not keep, and momentum SGD's buffer missing after a step.
  Sgd plain;
  EXPECT_THROWS_FROM(ShapeError, "load_record", plain.load_record({{"p.step", i64(1)}, {"p.a", f32(1)}}, dev()), "'p.a'",
                     "Sgd::step does not keep");
  Sgd momentum(SgdConfig{.momentum = 0.9});
  EXPECT_THROWS_FROM(ShapeError, "load_record", momentum.load_record({{"p.step", i64(3)}}, dev()), "'p'", "'p.a'");
  // Moments of another dtype than the parameter: the step names itself, not an inner add.
  Adam other;
  other.load_record({{"p.step", i64(1)}, {"p.a", f32(0).convert(DType::F16)}, {"p.b", f32(0).convert(DType::F16)}}, dev());
  EXPECT_THROWS_FROM(DTypeError, "Adam::step", other.step(0.1, "p", vec({0}), vec({1})), "'p'", "f32", "f16");
  // Step 0 without moments is a fresh start: the first Adam step from 0 with g = 1 is -lr.
  Adam fresh;
  fresh.load_record({{"p.step", i64(0)}}, dev());
  EXPECT_VALUES(fresh.step(0.1, "p", vec({0}), vec({1})), {-0.1});
}

// The schedules are host arithmetic: one device is enough.
TEST(LrSchedule, ConstantStepCosine) {
  ConstantLr c(0.01);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(c.step(), 0.01);
  StepLr s(1.0, 2, 0.5);
  for (double w : {1.0, 1.0, 0.5, 0.5, 0.25}) EXPECT_DOUBLE_EQ(s.step(), w);
  // Warm-up 2 of 6: 0.5, 1; then 0.5 (1 + cos(pi x)) for x = 0, 1/4, 1/2, 3/4; then 0.
  CosineLr cos(1.0, 6, 2);
  for (double w : {0.5, 1.0, 1.0, 0.8535533905932737, 0.5, 0.1464466094067262, 0.0, 0.0}) EXPECT_NEAR(cos.step(), w, 1e-12);
  EXPECT_EQ(cos.iteration(), 8u);
  cos.set_iteration(3);
  EXPECT_NEAR(cos.step(), 0.8535533905932737, 1e-12);
  CosineLr floor(1.0, 2, 0, 0.2);  // min_lr 0.2: 1.0, then 0.2 + 0.4 (1 + cos(pi / 2)) = 0.6
  EXPECT_NEAR(floor.step(), 1.0, 1e-12);
  EXPECT_NEAR(floor.step(), 0.6, 1e-12);
  EXPECT_THROWS(ShapeError, StepLr(1.0, 0), "[StepLr]");
  EXPECT_THROWS(ShapeError, CosineLr(1.0, 2, 3), "[CosineLr]");
}

}  // namespace
