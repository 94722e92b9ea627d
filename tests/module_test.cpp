// tensor/module.hpp and tensor/modules/: each module's forward against a reference written
// here (host loops over the same numbers), batch norm's running statistics against the
// formula, train/eval, device moves, save -> load, strict-load errors, initializer
// statistics, gradients against finite differences, optimizer steps over a module, and
// typed errors, on every device of the conformance list (cpu, mini, vulkan).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include <tensor/module.hpp>
#include <tensor/modules/attention.hpp>
#include <tensor/modules/conv.hpp>
#include <tensor/modules/core.hpp>
#include <tensor/modules/loss.hpp>
#include <tensor/modules/norm.hpp>
#include <tensor/modules/optim.hpp>

#include "conformance/devices.hpp"
#include "test_util.hpp"

namespace {

using namespace tensor;
using namespace tensor::nn;
using V = std::vector<double>;

const Device& dev() { return tt::conf::DeviceScope::current(); }

class Modules : public ::testing::TestWithParam<Device> {
 protected:
  void SetUp() override { scope_.enter(GetParam()); }
  void TearDown() override { scope_.leave(); }
  tt::conf::DeviceScope scope_;
};
INSTANTIATE_TEST_SUITE_P(Devices, Modules, ::testing::ValuesIn(tt::conf::devices()),
                         [](const ::testing::TestParamInfo<Device>& p) { return tt::conf::test_name(p.param); });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(Modules);

// Deterministic values in [-1, 1) from the test's own generator.
V host_random(std::size_t n, unsigned seed) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  V v(n);
  for (auto& x : v) x = u(g);
  return v;
}
template <std::size_t D>
Tensor<D> make(const V& v, const Shape& s, const Device& d = dev()) {
  std::vector<float> f(v.begin(), v.end());
  return Tensor<D>::from_data(TensorData::from(f, s), d);
}
template <std::size_t D, class K>
V values(const Tensor<D, K>& t) { return t.into_data().convert(DType::F64).template to_vec<double>(); }
// Values as the device holds them (f32), so references round like the inputs.
V f32(const V& v) {
  V o(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) o[i] = static_cast<float>(v[i]);
  return o;
}

#define EXPECT_CLOSE(got_expr, want_expr, tol)                                                   \
  do {                                                                                            \
    const V got_ = (got_expr), want_ = (want_expr);                                               \
    ASSERT_EQ(got_.size(), want_.size());                                                         \
    for (std::size_t i_ = 0; i_ < want_.size(); ++i_)                                             \
      ASSERT_NEAR(got_[i_], want_[i_], (tol) * (1.0 + std::abs(want_[i_]))) << "element " << i_; \
  } while (0)

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("module_test_" + std::to_string(::getpid()) + "_" + name)).string();
}

// ---- a small CNN used by several tests -----------------------------------------------------

struct Net : Module {
  Conv2d conv;
  BatchNorm bn;
  Linear fc;
  explicit Net(const Device& d)
      : conv(Conv2dConfig{.channels = {2, 3}, .kernel_size = {3, 3}, .padding = Padding<2>::same()}, d),
        bn(BatchNormConfig{.num_features = 3}, d),
        fc(LinearConfig{.d_input = 3 * 2 * 2, .d_output = 4}, d) {}
  void visit(ModuleVisitor& v) override {
    v.module("conv", conv);
    v.module("bn", bn);
    v.module("fc", fc);
  }
  const char* type_name() const override { return "Net"; }
  Tensor<2> forward(const Tensor<4>& x) {
    auto h = MaxPool2d(MaxPool2dConfig{.kernel_size = {2, 2}}).forward(activation::relu(bn.forward(conv.forward(x))));
    return fc.forward(h.reshape<2>(std::array<std::int64_t, 2>{static_cast<std::int64_t>(x.shape()[0]), -1}));
  }
};

TEST_P(Modules, NamedParametersBuffersAndCount) {
  Net net(dev());
  std::vector<std::string> names, types;
  for (const ParamRef& p : net.named_parameters()) {
    names.push_back(p.name);
    types.push_back(p.module_type);
  }
  EXPECT_EQ(names, (std::vector<std::string>{"conv.weight", "conv.bias", "bn.gamma", "bn.beta", "fc.weight", "fc.bias"}));
  EXPECT_EQ(types, (std::vector<std::string>{"Conv2d", "Conv2d", "BatchNorm", "BatchNorm", "Linear", "Linear"}));
  std::vector<std::string> buffers;
  for (const ParamRef& p : net.named_buffers()) buffers.push_back(p.name);
  EXPECT_EQ(buffers, (std::vector<std::string>{"bn.running_mean", "bn.running_var"}));
  // 3*2*3*3 + 3 conv, 3 + 3 batch norm, 12*4 + 4 linear.
  EXPECT_EQ(net.num_params(), 54u + 3 + 6 + 48 + 4);
  EXPECT_EQ(net.named_parameters()[4].shape(), (Shape{12, 4}));
}

TEST_P(Modules, TrainEvalReachesEverySubmodule) {
  Net net(dev());
  EXPECT_TRUE(net.bn.is_training());
  net.eval();
  EXPECT_FALSE(net.is_training());
  EXPECT_FALSE(net.bn.is_training());
  EXPECT_FALSE(net.conv.is_training());
  net.train();
  EXPECT_TRUE(net.bn.is_training());
}

// ---- forward against host loops -------------------------------------------------------------

TEST_P(Modules, LinearMatchesLoops) {
  Linear l(LinearConfig{.d_input = 3, .d_output = 2}, dev());
  const V w = f32(host_random(6, 1)), b = f32(host_random(2, 2)), x = f32(host_random(12, 3));
  l.weight = make<2>(w, {3, 2});
  l.bias = make<1>(b, {2});
  V want(8);
  for (int n = 0; n < 4; ++n)
    for (int o = 0; o < 2; ++o) {
      double s = b[o];
      for (int i = 0; i < 3; ++i) s += x[n * 3 + i] * w[i * 2 + o];
      want[n * 2 + o] = s;
    }
  EXPECT_CLOSE(values(l.forward(make<2>(x, {4, 3}))), want, 1e-5);
  // Rank 3 input: the same rows.
  EXPECT_CLOSE(values(l.forward(make<3>(x, {2, 2, 3}))), want, 1e-5);
}

// y[n, o, i, j] = b[o] + sum w[o, c, p, q] x[n, c, i*s - pad + p*dil, j*s - pad + q*dil].
V conv2d_ref(const V& x, const V& w, const V& b, int N, int C, int H, int W, int O, int K, int s, int pad, int dil, int& Ho, int& Wo) {
  Ho = (H + 2 * pad - dil * (K - 1) - 1) / s + 1;
  Wo = (W + 2 * pad - dil * (K - 1) - 1) / s + 1;
  V y(static_cast<std::size_t>(N * O * Ho * Wo));
  for (int n = 0; n < N; ++n)
    for (int o = 0; o < O; ++o)
      for (int i = 0; i < Ho; ++i)
        for (int j = 0; j < Wo; ++j) {
          double acc = b.empty() ? 0.0 : b[o];
          for (int c = 0; c < C; ++c)
            for (int p = 0; p < K; ++p)
              for (int q = 0; q < K; ++q) {
                const int yy = i * s - pad + p * dil, xx = j * s - pad + q * dil;
                if (yy < 0 || yy >= H || xx < 0 || xx >= W) continue;
                acc += w[((o * C + c) * K + p) * K + q] * x[((n * C + c) * H + yy) * W + xx];
              }
          y[((n * O + o) * Ho + i) * Wo + j] = acc;
        }
  return y;
}

TEST_P(Modules, Conv2dMatchesLoops) {
  Conv2d conv(Conv2dConfig{.channels = {2, 3}, .kernel_size = {3, 3}, .stride = {2, 2}, .padding = Padding<2>::explicit_({1, 1})}, dev());
  EXPECT_EQ(conv.weight.shape(), (Shape{3, 2, 3, 3}));
  const V w = f32(host_random(54, 4)), b = f32(host_random(3, 5)), x = f32(host_random(2 * 2 * 5 * 5, 6));
  conv.weight = make<4>(w, {3, 2, 3, 3});
  conv.bias = make<1>(b, {3});
  int Ho = 0, Wo = 0;
  const V want = conv2d_ref(x, w, b, 2, 2, 5, 5, 3, 3, 2, 1, 1, Ho, Wo);
  const auto y = conv.forward(make<4>(x, {2, 2, 5, 5}));
  EXPECT_EQ(y.shape(), (Shape{2, 3, static_cast<std::size_t>(Ho), static_cast<std::size_t>(Wo)}));
  EXPECT_CLOSE(values(y), want, 1e-5);
  // Same padding keeps the size.
  Conv2d same(Conv2dConfig{.channels = {2, 1}, .kernel_size = {3, 3}, .padding = Padding<2>::same()}, dev());
  EXPECT_EQ(same.forward(make<4>(x, {2, 2, 5, 5})).shape(), (Shape{2, 1, 5, 5}));
}

TEST_P(Modules, Conv1dMatchesLoops) {
  Conv1d conv(Conv1dConfig{.channels_in = 2, .channels_out = 2, .kernel_size = 2, .dilation = 2}, dev());
  const V w = f32(host_random(8, 7)), b = f32(host_random(2, 8)), x = f32(host_random(12, 9));
  conv.weight = make<3>(w, {2, 2, 2});
  conv.bias = make<1>(b, {2});
  // L = 6, effective kernel 3: Lo = 4.
  V want(8);
  for (int o = 0; o < 2; ++o)
    for (int t = 0; t < 4; ++t) {
      double acc = b[o];
      for (int c = 0; c < 2; ++c)
        for (int k = 0; k < 2; ++k) acc += w[(o * 2 + c) * 2 + k] * x[c * 6 + t + 2 * k];
      want[o * 4 + t] = acc;
    }
  EXPECT_CLOSE(values(conv.forward(make<3>(x, {1, 2, 6}))), want, 1e-5);
}

TEST_P(Modules, ConvTranspose2dMatchesScatterLoops) {
  ConvTranspose2d ct(ConvTranspose2dConfig{.channels = {2, 1}, .kernel_size = {2, 2}, .stride = {2, 2}}, dev());
  EXPECT_EQ(ct.weight.shape(), (Shape{2, 1, 2, 2}));
  const V w = f32(host_random(8, 10)), b = f32(host_random(1, 11)), x = f32(host_random(2 * 3 * 3, 12));
  ct.weight = make<4>(w, {2, 1, 2, 2});
  ct.bias = make<1>(b, {1});
  // Each input pixel scatters w[c, 0] * x into a 2x2 block at (2i, 2j).
  V want(36, b[0]);
  for (int c = 0; c < 2; ++c)
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 3; ++j)
        for (int p = 0; p < 2; ++p)
          for (int q = 0; q < 2; ++q) want[(2 * i + p) * 6 + 2 * j + q] += w[c * 4 + p * 2 + q] * x[(c * 3 + i) * 3 + j];
  EXPECT_CLOSE(values(ct.forward(make<4>(x, {1, 2, 3, 3}))), want, 1e-5);
}

TEST_P(Modules, PoolsMatchLoops) {
  const V x = f32(host_random(16, 13));
  const auto t = make<4>(x, {1, 1, 4, 4});
  V mx(4), av(4);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 2; ++j) {
      double m = -1e9, s = 0;
      for (int p = 0; p < 2; ++p)
        for (int q = 0; q < 2; ++q) {
          const double v = x[(2 * i + p) * 4 + 2 * j + q];
          m = std::max(m, v);
          s += v;
        }
      mx[i * 2 + j] = m;
      av[i * 2 + j] = s / 4;
    }
  EXPECT_CLOSE(values(MaxPool2d(MaxPool2dConfig{.kernel_size = {2, 2}}).forward(t)), mx, 1e-6);
  EXPECT_CLOSE(values(AvgPool2d(AvgPool2dConfig{.kernel_size = {2, 2}}).forward(t)), av, 1e-6);
  EXPECT_CLOSE(values(AdaptiveAvgPool2d(AdaptiveAvgPool2dConfig{.output_size = {2, 2}}).forward(t)), av, 1e-6);
  double all = 0;
  for (double v : x) all += v;
  EXPECT_CLOSE(values(AdaptiveAvgPool2d().forward(t)), V{all / 16}, 1e-6);
}

TEST_P(Modules, OneDimensionalFormsMatchLoops) {
  const V x = f32(host_random(2 * 6, 14));  // [1, 2, 6]
  const auto t = make<3>(x, {1, 2, 6});
  V mx, av;
  for (int c = 0; c < 2; ++c)
    for (int i = 0; i < 3; ++i) {
      const double a = x[c * 6 + 2 * i], b = x[c * 6 + 2 * i + 1];
      mx.push_back(std::max(a, b));
      av.push_back((a + b) / 2);
    }
  EXPECT_CLOSE(values(MaxPool1d(MaxPool1dConfig{.kernel_size = 2}).forward(t)), mx, 1e-6);
  EXPECT_CLOSE(values(AvgPool1d(AvgPool1dConfig{.kernel_size = 2}).forward(t)), av, 1e-6);
  EXPECT_CLOSE(values(AdaptiveAvgPool1d(AdaptiveAvgPool1dConfig{.output_size = 3}).forward(t)), av, 1e-6);
  // ConvTranspose1d, stride 2, kernel 3: y[o, 2 i + k] += w[c, o, k] x[c, i] (+ b[o]), length 2 * 5 + 3 = 13.
  ConvTranspose1d ct(ConvTranspose1dConfig{.channels = {2, 1}, .kernel_size = 3, .stride = 2}, dev());
  const V w = f32(host_random(6, 15)), b = f32(host_random(1, 16));
  ct.weight = make<3>(w, {2, 1, 3});
  ct.bias = make<1>(b, {1});
  V want(13, b[0]);
  for (int c = 0; c < 2; ++c)
    for (int i = 0; i < 6; ++i)
      for (int k = 0; k < 3; ++k) want[2 * i + k] += w[c * 3 + k] * x[c * 6 + i];
  EXPECT_CLOSE(values(ct.forward(t)), want, 1e-5);
  // InstanceNorm: each (sample, channel) row of 6 normalised, then gamma / beta.
  InstanceNorm in(InstanceNormConfig{.num_channels = 2}, dev());
  const V g = f32({2.0, -1.0}), be = f32({0.5, 0.0});
  in.norm.gamma = make<1>(g, {2});
  in.norm.beta = make<1>(be, {2});
  V wi(12);
  for (int c = 0; c < 2; ++c) {
    double m = 0, v = 0;
    for (int l = 0; l < 6; ++l) m += x[c * 6 + l] / 6;
    for (int l = 0; l < 6; ++l) v += std::pow(x[c * 6 + l] - m, 2) / 6;
    for (int l = 0; l < 6; ++l) wi[c * 6 + l] = (x[c * 6 + l] - m) / std::sqrt(v + 1e-5) * g[c] + be[c];
  }
  EXPECT_CLOSE(values(in.forward(t)), wi, 1e-4);
  EXPECT_EQ(in.named_parameters()[0].name, "gamma");
  EXPECT_EQ(in.named_parameters()[0].module_type, "InstanceNorm");
  EXPECT_THROWS(ShapeError, in.forward(Tensor<3>::ones({1, 3, 2}, dev())), "[InstanceNorm]", "InstanceNorm.gamma");
  // The constructor names the module the user built, not the GroupNorm inside it.
  EXPECT_THROWS_FROM(ShapeError, "InstanceNorm", InstanceNorm(InstanceNormConfig{.num_channels = 0}, dev()), "num_channels");
}

// Per channel c of x [N, C, L]: mean and biased variance over n and l.
void channel_stats(const V& x, int N, int C, int L, V& mean, V& var) {
  mean.assign(C, 0);
  var.assign(C, 0);
  for (int c = 0; c < C; ++c) {
    for (int n = 0; n < N; ++n)
      for (int l = 0; l < L; ++l) mean[c] += x[(n * C + c) * L + l];
    mean[c] /= N * L;
    for (int n = 0; n < N; ++n)
      for (int l = 0; l < L; ++l) var[c] += std::pow(x[(n * C + c) * L + l] - mean[c], 2);
    var[c] /= N * L;
  }
}

TEST_P(Modules, BatchNormRunningStatsAfterKStepsAndEval) {
  BatchNorm bn(BatchNormConfig{.num_features = 2, .momentum = 0.3}, dev());
  const V gamma = f32({1.5, -0.5}), beta = f32({0.25, 1.0});
  bn.gamma = make<1>(gamma, {2});
  bn.beta = make<1>(beta, {2});
  V rm{0, 0}, rv{1, 1};
  const int N = 3, C = 2, L = 4;  // x [3, 2, 2, 2]
  for (int k = 0; k < 3; ++k) {
    V x = f32(host_random(N * C * L, 20 + k));
    for (auto& v : x) v = v * (k + 1) + k;  // statistics that move between steps
    V mean, var;
    channel_stats(x, N, C, L, mean, var);
    V want(x.size());
    for (int n = 0; n < N; ++n)
      for (int c = 0; c < C; ++c)
        for (int l = 0; l < L; ++l) {
          const std::size_t i = static_cast<std::size_t>((n * C + c) * L + l);
          want[i] = (x[i] - mean[c]) / std::sqrt(var[c] + 1e-5) * gamma[c] + beta[c];
        }
    EXPECT_CLOSE(values(bn.forward(make<4>(x, {3, 2, 2, 2}))), want, 1e-4);
    for (int c = 0; c < C; ++c) {
      rm[c] = 0.7 * rm[c] + 0.3 * mean[c];
      rv[c] = 0.7 * rv[c] + 0.3 * var[c];
    }
  }
  EXPECT_CLOSE(values(bn.running_mean), rm, 1e-5);
  EXPECT_CLOSE(values(bn.running_var), rv, 1e-5);
  // Eval: the running statistics, and they stay put.
  bn.eval();
  const V x = f32(host_random(N * C * L, 30));
  V want(x.size());
  for (int n = 0; n < N; ++n)
    for (int c = 0; c < C; ++c)
      for (int l = 0; l < L; ++l) {
        const std::size_t i = static_cast<std::size_t>((n * C + c) * L + l);
        want[i] = (x[i] - rm[c]) / std::sqrt(rv[c] + 1e-5) * gamma[c] + beta[c];
      }
  EXPECT_CLOSE(values(bn.forward(make<4>(x, {3, 2, 2, 2}))), want, 1e-4);
  EXPECT_CLOSE(values(bn.running_mean), rm, 1e-5);
  // Rank 3 ([N, C, L]) works too.
  EXPECT_EQ(bn.forward(make<3>(x, {3, 2, 4})).shape(), (Shape{3, 2, 4}));
}

TEST_P(Modules, LayerGroupRmsNormMatchLoops) {
  const V x = f32(host_random(2 * 4 * 3, 40));  // [2, 4, 3]
  const V g = f32(host_random(4, 41)), b = f32(host_random(4, 42));
  // LayerNorm over the last dim (3).
  LayerNorm ln(LayerNormConfig{.d_model = 3}, dev());
  const V g3 = f32({0.5, 1.0, 2.0}), b3 = f32({0.1, 0.2, 0.3});
  ln.gamma = make<1>(g3, {3});
  ln.beta = make<1>(b3, {3});
  RmsNorm rms(RmsNormConfig{.d_model = 3}, dev());
  rms.gamma = make<1>(g3, {3});
  V want_ln(x.size()), want_rms(x.size());
  for (int r = 0; r < 8; ++r) {
    double m = 0, v = 0, sq = 0;
    for (int k = 0; k < 3; ++k) m += x[r * 3 + k] / 3;
    for (int k = 0; k < 3; ++k) v += std::pow(x[r * 3 + k] - m, 2) / 3;
    for (int k = 0; k < 3; ++k) sq += x[r * 3 + k] * x[r * 3 + k] / 3;
    for (int k = 0; k < 3; ++k) {
      want_ln[r * 3 + k] = (x[r * 3 + k] - m) / std::sqrt(v + 1e-5) * g3[k] + b3[k];
      want_rms[r * 3 + k] = x[r * 3 + k] / std::sqrt(sq + 1e-5) * g3[k];
    }
  }
  EXPECT_CLOSE(values(ln.forward(make<3>(x, {2, 4, 3}))), want_ln, 1e-4);
  EXPECT_CLOSE(values(rms.forward(make<3>(x, {2, 4, 3}))), want_rms, 1e-4);
  // GroupNorm: 4 channels in 2 groups, x [2, 4, 3].
  GroupNorm gn(GroupNormConfig{.num_groups = 2, .num_channels = 4}, dev());
  gn.gamma = make<1>(g, {4});
  gn.beta = make<1>(b, {4});
  V want_gn(x.size());
  for (int n = 0; n < 2; ++n)
    for (int grp = 0; grp < 2; ++grp) {
      double m = 0, v = 0;
      for (int c = grp * 2; c < grp * 2 + 2; ++c)
        for (int l = 0; l < 3; ++l) m += x[(n * 4 + c) * 3 + l] / 6;
      for (int c = grp * 2; c < grp * 2 + 2; ++c)
        for (int l = 0; l < 3; ++l) v += std::pow(x[(n * 4 + c) * 3 + l] - m, 2) / 6;
      for (int c = grp * 2; c < grp * 2 + 2; ++c)
        for (int l = 0; l < 3; ++l) {
          const int i = (n * 4 + c) * 3 + l;
          want_gn[i] = (x[i] - m) / std::sqrt(v + 1e-5) * g[c] + b[c];
        }
    }
  EXPECT_CLOSE(values(gn.forward(make<3>(x, {2, 4, 3}))), want_gn, 1e-4);
}

TEST_P(Modules, ActivationsAndEmbedding) {
  const V x = f32(host_random(6, 50));
  const auto t = make<2>(x, {2, 3});
  V relu(6), sig(6), th(6), lk(6), silu(6), gelu(6);
  for (int i = 0; i < 6; ++i) {
    relu[i] = std::max(x[i], 0.0);
    sig[i] = 1 / (1 + std::exp(-x[i]));
    th[i] = std::tanh(x[i]);
    lk[i] = x[i] >= 0 ? x[i] : 0.2 * x[i];
    silu[i] = x[i] * sig[i];
    gelu[i] = 0.5 * x[i] * (1 + std::erf(x[i] / std::sqrt(2.0)));
  }
  EXPECT_CLOSE(values(Relu().forward(t)), relu, 1e-6);
  EXPECT_CLOSE(values(Sigmoid().forward(t)), sig, 1e-5);
  EXPECT_CLOSE(values(Tanh().forward(t)), th, 1e-5);
  EXPECT_CLOSE(values(LeakyRelu(LeakyReluConfig{.negative_slope = 0.2}).forward(t)), lk, 1e-6);
  EXPECT_CLOSE(values(Silu().forward(t)), silu, 1e-5);
  EXPECT_CLOSE(values(Gelu().forward(t)), gelu, 1e-5);
  Embedding e(EmbeddingConfig{.n_embedding = 3, .d_model = 2}, dev());
  const V w = f32(host_random(6, 51));
  e.weight = make<2>(w, {3, 2});
  const auto idx = Tensor<2, Int>::from_ints({{2, 0}, {1, 2}}, dev());
  EXPECT_CLOSE(values(e.forward(idx)), (V{w[4], w[5], w[0], w[1], w[2], w[3], w[4], w[5]}), 1e-7);
}

TEST_P(Modules, DropoutSeededOffInEval) {
  Dropout d(DropoutConfig{.prob = 0.25});
  const auto x = Tensor<2>::ones({64, 64}, dev());
  dev().seed(7);
  const V a = values(d.forward(x));
  dev().seed(7);
  const V b = values(d.forward(x));
  EXPECT_EQ(a, b);
  std::size_t zeros = 0;
  for (double v : a) {
    ASSERT_TRUE(v == 0.0 || std::abs(v - 1 / 0.75) < 1e-6) << v;
    zeros += v == 0.0;
  }
  // 4096 Bernoulli(0.25) draws: the count is 1024 +- 28 (one sd); allow 5 sd.
  EXPECT_NEAR(static_cast<double>(zeros), 1024.0, 140.0);
  d.eval();
  EXPECT_EQ(values(d.forward(x)), V(4096, 1.0));
}

// ---- attention ------------------------------------------------------------------------------

// Host multi-head attention with d = 4, 2 heads: q/k/v/out weights w[4][4] (x W + b).
struct HostMha {
  V wq, wk, wv, wo, bq, bk, bv, bo;
  V proj(const V& x, int L, const V& w, const V& b) const {
    V y(static_cast<std::size_t>(L * 4));
    for (int l = 0; l < L; ++l)
      for (int o = 0; o < 4; ++o) {
        double s = b[o];
        for (int i = 0; i < 4; ++i) s += x[l * 4 + i] * w[i * 4 + o];
        y[l * 4 + o] = s;
      }
    return y;
  }
  // One batch: x [L, 4]; masked(i, j): key j hidden from query i.
  template <class M>
  V run(const V& x, int L, M masked) const {
    const V q = proj(x, L, wq, bq), k = proj(x, L, wk, bk), v = proj(x, L, wv, bv);
    V ctx(static_cast<std::size_t>(L * 4), 0.0);
    for (int h = 0; h < 2; ++h)
      for (int i = 0; i < L; ++i) {
        V s(L);
        double mx = -1e30;
        for (int j = 0; j < L; ++j) {
          s[j] = 0;
          for (int e = 0; e < 2; ++e) s[j] += q[i * 4 + h * 2 + e] * k[j * 4 + h * 2 + e];
          s[j] /= std::sqrt(2.0);
          if (masked(i, j)) s[j] = -1e4;
          mx = std::max(mx, s[j]);
        }
        double z = 0;
        for (int j = 0; j < L; ++j) z += std::exp(s[j] - mx);
        for (int j = 0; j < L; ++j)
          for (int e = 0; e < 2; ++e) ctx[i * 4 + h * 2 + e] += std::exp(s[j] - mx) / z * v[j * 4 + h * 2 + e];
      }
    return proj(ctx, L, wo, bo);
  }
};

HostMha set_mha(MultiHeadAttention& m) {
  HostMha h{f32(host_random(16, 60)), f32(host_random(16, 61)), f32(host_random(16, 62)), f32(host_random(16, 63)),
            f32(host_random(4, 64)),  f32(host_random(4, 65)),  f32(host_random(4, 66)),  f32(host_random(4, 67))};
  m.query.weight = make<2>(h.wq, {4, 4});
  m.key.weight = make<2>(h.wk, {4, 4});
  m.value.weight = make<2>(h.wv, {4, 4});
  m.output.weight = make<2>(h.wo, {4, 4});
  m.query.bias = make<1>(h.bq, {4});
  m.key.bias = make<1>(h.bk, {4});
  m.value.bias = make<1>(h.bv, {4});
  m.output.bias = make<1>(h.bo, {4});
  return h;
}

TEST_P(Modules, MultiHeadAttentionMatchesLoopsWithMasks) {
  MultiHeadAttention mha(MultiHeadAttentionConfig{.d_model = 4, .n_heads = 2, .dropout = 0.0}, dev());
  const HostMha h = set_mha(mha);
  const V x = f32(host_random(2 * 3 * 4, 68));  // [2, 3, 4]
  const auto xt = make<3>(x, {2, 3, 4});
  auto batch = [&](int n) { return V(x.begin() + n * 12, x.begin() + (n + 1) * 12); };
  // No mask.
  V want;
  for (int n = 0; n < 2; ++n) {
    V r = h.run(batch(n), 3, [](int, int) { return false; });
    want.insert(want.end(), r.begin(), r.end());
  }
  EXPECT_CLOSE(values(mha.forward(MhaInput::self_attn(xt)).context), want, 1e-4);
  // Causal mask: key j > query i hidden; the mask itself is true exactly above the diagonal.
  const auto causal = generate_autoregressive_mask(2, 3, dev());
  V cm = values(causal), cm_want;
  for (int n = 0; n < 2; ++n)
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 3; ++j) cm_want.push_back(j > i ? 1.0 : 0.0);
  EXPECT_EQ(cm, cm_want);
  MhaInput in = MhaInput::self_attn(xt);
  in.mask_attn = causal;
  want.clear();
  for (int n = 0; n < 2; ++n) {
    V r = h.run(batch(n), 3, [](int i, int j) { return j > i; });
    want.insert(want.end(), r.begin(), r.end());
  }
  EXPECT_CLOSE(values(mha.forward(in).context), want, 1e-4);
  // Padding mask: batch 0 hides key 2, batch 1 nothing.
  MhaInput pin = MhaInput::self_attn(xt);
  pin.mask_pad = Tensor<2, Bool>::from_bools({{false, false, true}, {false, false, false}}, dev());
  want.clear();
  for (int n = 0; n < 2; ++n) {
    V r = h.run(batch(n), 3, [n](int, int j) { return n == 0 && j == 2; });
    want.insert(want.end(), r.begin(), r.end());
  }
  const MhaOutput out = mha.forward(pin);
  EXPECT_CLOSE(values(out.context), want, 1e-4);
  EXPECT_EQ(out.weights.shape(), (Shape{2, 2, 3, 3}));
  // Bad mask shape names the mask.
  MhaInput bad = MhaInput::self_attn(xt);
  bad.mask_pad = Tensor<2, Bool>::from_bools({{false, true}}, dev());
  EXPECT_THROWS(ShapeError, mha.forward(bad), "[MultiHeadAttention]", "mask_pad");
  EXPECT_THROWS(ShapeError, MultiHeadAttention(MultiHeadAttentionConfig{.d_model = 5, .n_heads = 2}, dev()),
                "[MultiHeadAttention]", "n_heads");
}

TEST_P(Modules, TransformerEncoderLayerPreAndPostNorm) {
  for (bool pre : {false, true}) {
    TransformerEncoderLayer layer(
        TransformerEncoderLayerConfig{.d_model = 4, .d_ff = 6, .n_heads = 2, .dropout = 0.0, .norm_first = pre}, dev());
    const HostMha h = set_mha(layer.mha);
    const V w1 = f32(host_random(24, 70)), b1 = f32(host_random(6, 71)), w2 = f32(host_random(24, 72)), b2 = f32(host_random(4, 73));
    layer.pwff.linear_inner.weight = make<2>(w1, {4, 6});
    layer.pwff.linear_inner.bias = make<1>(b1, {6});
    layer.pwff.linear_outer.weight = make<2>(w2, {6, 4});
    layer.pwff.linear_outer.bias = make<1>(b2, {4});
    const V x = f32(host_random(12, 74));  // [1, 3, 4]
    auto norm = [](V v) {  // layer norm of each row of 4, gamma 1 beta 0
      for (int r = 0; r < 3; ++r) {
        double m = 0, s = 0;
        for (int k = 0; k < 4; ++k) m += v[r * 4 + k] / 4;
        for (int k = 0; k < 4; ++k) s += std::pow(v[r * 4 + k] - m, 2) / 4;
        for (int k = 0; k < 4; ++k) v[r * 4 + k] = (v[r * 4 + k] - m) / std::sqrt(s + 1e-5);
      }
      return v;
    };
    auto ff = [&](const V& v) {
      V out(12);
      for (int r = 0; r < 3; ++r) {
        V hdn(6);
        for (int o = 0; o < 6; ++o) {
          double s = b1[o];
          for (int i = 0; i < 4; ++i) s += v[r * 4 + i] * w1[i * 6 + o];
          hdn[o] = 0.5 * s * (1 + std::erf(s / std::sqrt(2.0)));
        }
        for (int o = 0; o < 4; ++o) {
          double s = b2[o];
          for (int i = 0; i < 6; ++i) s += hdn[i] * w2[i * 4 + o];
          out[r * 4 + o] = s;
        }
      }
      return out;
    };
    auto add = [](V a, const V& b) {
      for (std::size_t i = 0; i < a.size(); ++i) a[i] += b[i];
      return a;
    };
    auto attn = [&](const V& v) { return h.run(v, 3, [](int, int) { return false; }); };
    V want;
    if (pre) {
      const V y = add(x, attn(norm(x)));
      want = add(y, ff(norm(y)));
    } else {
      const V y = norm(add(x, attn(x)));
      want = norm(add(y, ff(y)));
    }
    SCOPED_TRACE(pre ? "pre-norm" : "post-norm");
    EXPECT_CLOSE(values(layer.forward(make<3>(x, {1, 3, 4}))), want, 2e-4);
  }
}

TEST_P(Modules, TransformerEncoderStacksItsLayers) {
  dev().seed(11);
  TransformerEncoder enc(TransformerEncoderConfig{.d_model = 4, .d_ff = 8, .n_heads = 2, .n_layers = 2, .dropout = 0.0}, dev());
  EXPECT_EQ(enc.layers.size(), 2u);
  EXPECT_EQ(enc.named_parameters().front().name, "layers.0.mha.query.weight");
  EXPECT_EQ(enc.named_parameters().back().name, "layers.1.norm_2.beta");
  const auto x = make<3>(f32(host_random(2 * 3 * 4, 75)), {2, 3, 4});
  const auto mask = generate_autoregressive_mask(2, 3, dev());
  EXPECT_EQ(values(enc.forward(x, std::nullopt, mask)),
            values(enc.layers[1].forward(enc.layers[0].forward(x, std::nullopt, mask), std::nullopt, mask)));
}

TEST_P(Modules, PositionalEncodingMatchesFormula) {
  PositionalEncoding pe(PositionalEncodingConfig{.d_model = 4, .max_sequence_size = 8}, dev());
  const auto x = Tensor<3>::zeros({2, 3, 4}, dev());
  V want;
  for (int n = 0; n < 2; ++n)
    for (int p = 0; p < 3; ++p)
      for (int i = 0; i < 4; i += 2) {
        const double a = p / std::pow(10000.0, i / 4.0);
        want.push_back(std::sin(a));
        want.push_back(std::cos(a));
      }
  EXPECT_CLOSE(values(pe.forward(x)), want, 1e-6);
  EXPECT_THROWS(ShapeError, pe.forward(Tensor<3>::zeros({1, 9, 4}, dev())), "[PositionalEncoding]", "max_sequence_size");
}

// ---- losses ---------------------------------------------------------------------------------

TEST_P(Modules, LossesMatchFormulas) {
  const V l = f32(host_random(6, 80));  // logits [2, 3]
  const auto logits = make<2>(l, {2, 3});
  const auto targets = Tensor<1, Int>::from_ints({2, 0}, dev());
  for (double alpha : {0.0, 0.1}) {
    double total = 0;
    const int tg[2] = {2, 0};
    for (int n = 0; n < 2; ++n) {
      double mx = std::max({l[n * 3], l[n * 3 + 1], l[n * 3 + 2]}), z = 0;
      for (int c = 0; c < 3; ++c) z += std::exp(l[n * 3 + c] - mx);
      for (int c = 0; c < 3; ++c) {
        const double t = (c == tg[n] ? 1.0 - alpha : 0.0) + alpha / 3;
        total -= t * (l[n * 3 + c] - mx - std::log(z));
      }
    }
    CrossEntropyLossConfig cfg;
    if (alpha > 0) cfg.smoothing = alpha;
    SCOPED_TRACE(alpha);
    EXPECT_CLOSE(values(CrossEntropyLoss(cfg).forward(logits, targets)), V{total / 2}, 1e-5);
  }
  const V p = f32(host_random(4, 81)), t = f32(host_random(4, 82));
  double mse = 0, hub = 0;
  for (int i = 0; i < 4; ++i) {
    const double r = (p[i] - t[i]) * 2;  // residuals up to 4: both Huber branches
    mse += r * r;
    hub += std::abs(r) <= 0.5 ? 0.5 * r * r : 0.5 * (std::abs(r) - 0.25);
  }
  const auto pt = make<1>(p, {4}) * 2.0, tt_ = make<1>(t, {4}) * 2.0;
  EXPECT_CLOSE(values(MseLoss().forward(pt, tt_)), V{mse / 4}, 1e-5);
  EXPECT_CLOSE(values(MseLoss().forward(pt, tt_, Reduction::Sum)), V{mse}, 1e-5);
  EXPECT_CLOSE(values(HuberLoss(HuberLossConfig{.delta = 0.5}).forward(pt, tt_)), V{hub / 4}, 1e-5);
  // BCE with logits: -(t log s(x) + (1 - t) log(1 - s(x))).
  const auto bt = Tensor<1, Int>::from_ints({1, 0, 1, 0}, dev());
  double bce = 0;
  for (int i = 0; i < 4; ++i) {
    const double s = 1 / (1 + std::exp(-p[i])), y = i % 2 == 0 ? 1 : 0;
    bce -= y * std::log(s) + (1 - y) * std::log(1 - s);
  }
  EXPECT_CLOSE(values(BinaryCrossEntropyLoss().forward(make<1>(p, {4}), bt)), V{bce / 4}, 1e-5);
  EXPECT_THROWS(ShapeError, CrossEntropyLoss().forward(logits, Tensor<1, Int>::from_ints({1}, dev())), "[CrossEntropyLoss]");
}

// ---- save / load ----------------------------------------------------------------------------

TEST_P(Modules, SaveLoadGivesIdenticalOutputs) {
  dev().seed(1);
  Net a(dev());
  const auto x = make<4>(f32(host_random(2 * 2 * 4 * 4, 90)), {2, 2, 4, 4});
  a.forward(x);  // move the running statistics off their start
  a.eval();
  const std::string path = temp_path("net.safetensors");
  a.save(path, {{"note", "test"}});
  dev().seed(2);
  Net b(dev());
  b.eval();
  EXPECT_NE(values(a.forward(x)), values(b.forward(x)));
  const LoadReport r = b.load(path);
  EXPECT_TRUE(r.complete());
  EXPECT_EQ(values(a.forward(x)), values(b.forward(x)));
  EXPECT_EQ(values(a.bn.running_mean), values(b.bn.running_mean));
  std::remove(path.c_str());
}

TEST_P(Modules, StrictLoadErrorsNameTheTensorAndLoadNothing) {
  Net a(dev());
  const io::NamedTensors good = a.to_record();
  auto without = [&](const std::string& name) {
    io::NamedTensors r;
    for (const auto& e : good)
      if (e.first != name) r.push_back(e);
    return r;
  };
  Net b(dev());
  const V before = values(b.conv.weight);
  const std::string path = temp_path("bad.safetensors");
  // Missing.
  io::save_safetensors(path, without("fc.bias"));
  EXPECT_THROWS(FormatError, b.load(path), "[Module::load]", "fc.bias", "missing");
  EXPECT_EQ(values(b.conv.weight), before);  // nothing half-loaded
  // Extra.
  io::NamedTensors extra = good;
  extra.emplace_back("fc2.weight", TensorData::zeros(Shape{2}, DType::F32));
  io::save_safetensors(path, extra);
  EXPECT_THROWS(FormatError, b.load(path), "fc2.weight");
  // Mis-shaped.
  io::NamedTensors shaped = without("bn.gamma");
  shaped.emplace_back("bn.gamma", TensorData::zeros(Shape{4}, DType::F32));
  io::save_safetensors(path, shaped);
  EXPECT_THROWS(FormatError, b.load(path), "BatchNorm", "bn.gamma", "shape");
  // Wrong dtype.
  io::NamedTensors typed = without("conv.weight");
  typed.emplace_back("conv.weight", good[0].second.convert(DType::F64));
  io::save_safetensors(path, typed);
  EXPECT_THROWS(FormatError, b.load(path), "Conv2d", "conv.weight", "dtype");
  EXPECT_EQ(values(b.conv.weight), before);
  // Not strict: loads the rest and reports the skipped names.
  const LoadReport r = b.load(path, false);
  EXPECT_EQ(r.mismatched.size(), 1u);
  EXPECT_EQ(r.mismatched[0].rfind("conv.weight", 0), 0u);
  EXPECT_EQ(r.missing, std::vector<std::string>{});
  EXPECT_EQ(values(b.fc.weight), values(a.fc.weight));
  EXPECT_EQ(values(b.conv.weight), before);
  std::remove(path.c_str());
}

// ---- devices --------------------------------------------------------------------------------

TEST_P(Modules, ToAutodiffAndBack) {
  Net net(dev());
  const V w = values(net.fc.weight);
  const Device ad = dev().autodiff();
  net.to(ad);
  EXPECT_EQ(net.fc.weight.device(), ad);
  EXPECT_TRUE(net.fc.weight.is_require_grad());
  EXPECT_FALSE(net.bn.running_mean.is_require_grad());
  EXPECT_EQ(values(net.fc.weight.inner()), w);
  net.to(dev());
  EXPECT_EQ(net.fc.weight.device(), dev());
  EXPECT_EQ(values(net.fc.weight), w);
  // A module on autodiff with a plain input: a DeviceError naming the parameter.
  Linear l(LinearConfig{.d_input = 2, .d_output = 2}, ad);
  EXPECT_THROWS(DeviceError, l.forward(Tensor<2>::ones({1, 2}, dev())), "[Linear]", "Linear.weight");
}

// ---- initializers ---------------------------------------------------------------------------

void stats(const V& v, double& mean, double& var) {
  mean = 0;
  for (double x : v) mean += x;
  mean /= static_cast<double>(v.size());
  var = 0;
  for (double x : v) var += (x - mean) * (x - mean);
  var /= static_cast<double>(v.size());
}

TEST_P(Modules, InitializerStatistics) {
  const Shape s{256, 256};
  double m = 0, v = 0;
  auto check = [&](const Initializer& init, double want_mean, double want_var, double lo, double hi, const char* what) {
    const V x = values(init.init<2>(s, dev(), 64, 32));
    stats(x, m, v);
    EXPECT_NEAR(m, want_mean, 0.02 * std::sqrt(want_var) + 1e-9) << what;
    EXPECT_NEAR(v, want_var, 0.03 * want_var + 1e-12) << what;
    for (double e : x) {
      ASSERT_GE(e, lo) << what;
      ASSERT_LE(e, hi) << what;
    }
  };
  const double inf = 1e30;
  check(Initializer::uniform(-2, 1), -0.5, 9.0 / 12, -2, 1, "uniform");
  check(Initializer::normal(1, 0.5), 1, 0.25, -inf, inf, "normal");
  // Kaiming: std = gain / sqrt(fan_in = 64); uniform bound sqrt(3) std.
  const double k = 2.0 / 8.0;
  check(Initializer::kaiming_uniform(2.0), 0, k * k, -std::sqrt(3.0) * k, std::sqrt(3.0) * k, "kaiming_uniform");
  check(Initializer::kaiming_normal(2.0), 0, k * k, -inf, inf, "kaiming_normal");
  const double ko = 1.0 / std::sqrt(32.0);
  check(Initializer::kaiming_normal(1.0, true), 0, ko * ko, -inf, inf, "kaiming_normal fan_out");
  // Xavier: std = gain sqrt(2 / (64 + 32)).
  const double xs = std::sqrt(2.0 / 96);
  check(Initializer::xavier_uniform(1.0), 0, xs * xs, -std::sqrt(3.0) * xs, std::sqrt(3.0) * xs, "xavier_uniform");
  check(Initializer::xavier_normal(1.0), 0, xs * xs, -inf, inf, "xavier_normal");
  EXPECT_EQ(values(Initializer::constant(0.5).init<1>(Shape{3}, dev())), V(3, 0.5));
  EXPECT_EQ(values(Initializer::ones().init<1>(Shape{3}, dev())), V(3, 1.0));
  EXPECT_EQ(values(Initializer::zeros().init<1>(Shape{3}, dev())), V(3, 0.0));
  EXPECT_THROWS(ShapeError, Initializer::kaiming_uniform(1.0).init<2>(Shape{2, 2}, dev()), "[Initializer::kaiming_uniform]", "fan_in");
  // burn's module default: U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for Linear's weight.
  Linear l(LinearConfig{.d_input = 100, .d_output = 300}, dev());
  for (double e : values(l.weight)) ASSERT_LE(std::abs(e), 0.1 + 1e-7);
}

TEST_P(Modules, OrthogonalInitializer) {
  for (const Shape& s : {Shape{6, 4}, Shape{3, 5}}) {
    const auto w = Initializer::orthogonal(2.0).init<2>(s, dev());
    // Columns (rows when wide) orthogonal with norm gain: W^T W or W W^T = 4 I.
    const Tensor<2> g = s[0] >= s[1] ? w.transpose().matmul(w) : w.matmul(w.transpose());
    const std::size_t n = std::min(s[0], s[1]);
    V want(n * n, 0.0);
    for (std::size_t i = 0; i < n; ++i) want[i * n + i] = 4.0;
    EXPECT_CLOSE(values(g), want, 1e-4);
  }
}

// ---- gradients against finite differences ---------------------------------------------------

V modules_grad(const ParamRef& p, const Gradients& g) {
  const AnyTensor v = p.value();
  switch (p.slot.rank) {
    case 1: return values(*v.get<1>("grad").grad(g));
    case 2: return values(*v.get<2>("grad").grad(g));
    case 4: return values(*v.get<4>("grad").grad(g));
    default: return {};
  }
}

TensorData data_of(const ParamRef& p) {
  switch (p.slot.rank) {
    case 1: return p.get<1>().into_data();
    case 2: return p.get<2>().into_data();
    case 4: return p.get<4>().into_data();
    default: ADD_FAILURE() << "rank " << p.slot.rank; return {};
  }
}
void set_data(const ParamRef& p, const TensorData& d) {
  switch (p.slot.rank) {
    case 1: p.get<1>() = Tensor<1>::from_data(d, dev()); break;
    case 2: p.get<2>() = Tensor<2>::from_data(d, dev()); break;
    case 4: p.get<4>() = Tensor<4>::from_data(d, dev()); break;
    default: ADD_FAILURE() << "rank " << p.slot.rank;
  }
}

// d/dp sum(f(x) * r) at a few entries of one parameter, by central differences on the
// plain device (the module moved back), against autodiff on the autodiff device.
template <class M, class F>
void gradcheck(M& m, F loss, const std::string& param, double eps, double tol) {
  m.to(dev().autodiff());
  const Tensor<1> l = loss(m);
  Gradients g = l.backward();
  ParamRef ref;
  for (const ParamRef& p : m.named_parameters())
    if (p.name == param) ref = p;
  ASSERT_EQ(ref.name, param);
  V grad = modules_grad(ref, g);
  m.to(dev());
  ParamRef plain;
  for (const ParamRef& p : m.named_parameters())
    if (p.name == param) plain = p;
  const Shape s = plain.shape();
  const std::vector<float> orig = data_of(plain).to_vec<float>();
  const std::size_t n = s.num_elements();
  double largest = 0;  // the check is not vacuous: some entry moves the loss
  for (std::size_t idx : {std::size_t{0}, n / 2, n - 1}) {
    double f[2];
    for (int sgn = 0; sgn < 2; ++sgn) {
      std::vector<float> vals = orig;
      vals[idx] += static_cast<float>(sgn ? -eps : eps);
      set_data(plain, TensorData::from(vals, s));
      f[sgn] = values(loss(m))[0];
    }
    set_data(plain, TensorData::from(orig, s));
    EXPECT_NEAR(grad[idx], (f[0] - f[1]) / (2 * eps), tol) << param << "[" << idx << "]";
    largest = std::max(largest, std::abs(grad[idx]));
  }
  EXPECT_GT(largest, 1e-2) << param << ": no sampled entry has a gradient";
}


TEST_P(Modules, GradientsMatchFiniteDifferences) {
  // Through conv, batch norm (train), max pool and linear (conv.bias is cancelled by the
  // batch norm's mean: its gradient is 0, so it is not sampled).
  dev().seed(3);
  Net net(dev());
  const V xv = f32(host_random(2 * 2 * 4 * 4, 100)), rv = f32(host_random(8, 101));
  auto loss = [&](Net& m) {
    const Device d = *m.device();
    return (m.forward(make<4>(xv, {2, 2, 4, 4}, d)) * make<2>(rv, {2, 4}, d)).sum();
  };
  for (const char* p : {"conv.weight", "bn.gamma", "bn.beta", "fc.weight", "fc.bias"}) {
    Net copy = net;
    gradcheck(copy, loss, p, 1e-2, 2e-2);
  }
  // A rank-2 weight: Linear's, through one entry.
  Linear l(LinearConfig{.d_input = 3, .d_output = 2}, dev().autodiff());
  const auto x = make<2>(f32(host_random(6, 102)), {2, 3}, dev().autodiff());
  Gradients g = (l.forward(x) * 1.0).sum().backward();
  // d sum(x W + b) / dW[i, o] = sum_n x[n, i].
  const V xs = f32(host_random(6, 102));
  V want(6);
  for (int i = 0; i < 3; ++i)
    for (int o = 0; o < 2; ++o) want[i * 2 + o] = xs[i] + xs[3 + i];
  EXPECT_CLOSE(values(*l.weight.grad(g)), want, 1e-5);
}

TEST_P(Modules, NormAndAttentionGradientsMatchFiniteDifferences) {
  // LayerNorm, GroupNorm and RmsNorm parameters through one loss.
  struct Norms : Module {
    LayerNorm ln;
    GroupNorm gn;
    RmsNorm rms;
    explicit Norms(const Device& d)
        : ln(LayerNormConfig{.d_model = 3}, d), gn(GroupNormConfig{.num_groups = 2, .num_channels = 4}, d),
          rms(RmsNormConfig{.d_model = 3}, d) {}
    void visit(ModuleVisitor& v) override {
      v.module("ln", ln);
      v.module("gn", gn);
      v.module("rms", rms);
    }
  };
  Norms norms(dev());
  // Parameters away from 1 / 0, so every gradient term matters.
  norms.ln.gamma = make<1>(f32({0.5, 1.5, -1.0}), {3});
  norms.gn.gamma = make<1>(f32({1.2, 0.8, -0.5, 2.0}), {4});
  const V xv = f32(host_random(24, 130)), rv = f32(host_random(24, 131));
  auto loss = [&](Norms& m) {
    const Device d = *m.device();
    const auto x = make<3>(xv, {2, 4, 3}, d), r = make<3>(rv, {2, 4, 3}, d);
    return (m.rms.forward(m.ln.forward(x)) * r).sum() + (m.gn.forward(x) * r).sum();
  };
  for (const char* p : {"ln.gamma", "ln.beta", "gn.gamma", "gn.beta", "rms.gamma"}) {
    Norms copy = norms;
    gradcheck(copy, loss, p, 1e-2, 2e-2);
  }
  // Attention and the feed-forward block through a pre-norm encoder layer.
  dev().seed(9);
  TransformerEncoderLayer layer(
      TransformerEncoderLayerConfig{.d_model = 4, .d_ff = 6, .n_heads = 2, .dropout = 0.0, .norm_first = true}, dev());
  const V tv = f32(host_random(12, 132)), tr = f32(host_random(12, 133));
  auto tloss = [&](TransformerEncoderLayer& m) {
    const Device d = *m.device();
    return (m.forward(make<3>(tv, {1, 3, 4}, d)) * make<3>(tr, {1, 3, 4}, d)).sum();
  };
  for (const char* p : {"mha.query.bias", "mha.value.bias", "mha.output.bias", "pwff.linear_inner.bias", "norm_2.gamma"}) {
    TransformerEncoderLayer copy = layer;
    gradcheck(copy, tloss, p, 1e-2, 2e-2);
  }
}

// ---- optimizers over a module ---------------------------------------------------------------

TEST_P(Modules, SgdStepOverModuleWithDecayGroups) {
  const Device ad = dev().autodiff();
  LayerNorm ln(LayerNormConfig{.d_model = 2}, ad);
  Linear l(LinearConfig{.d_input = 2, .d_output = 2}, ad);
  struct Two : Module {
    Linear* l;
    LayerNorm* ln;
    void visit(ModuleVisitor& v) override {
      v.module("fc", *l);
      v.module("norm", *ln);
    }
  } m;
  m.l = &l;
  m.ln = &ln;
  const V w = values(l.weight.inner()), b = values(l.bias->inner());
  const V xv{1.0, 2.0};
  const auto x = make<2>(xv, {1, 2}, ad);
  Gradients g = ln.forward(l.forward(x)).mul(make<2>({1.0, -1.0}, {1, 2}, ad)).sum().backward();
  const V gw = values(*l.weight.grad(g)), gb = values(*l.bias->grad(g)), gg = values(*ln.gamma.grad(g));
  const V gamma = values(ln.gamma.inner());
  auto opt = optim::ModuleOptimizer::sgd(optim::SgdConfig{.weight_decay = 0.5}, true);
  EXPECT_EQ(opt.num_groups(), 2u);
  EXPECT_EQ(opt.step(0.1, m, g), 4u);
  // Decayed: the weight, p - lr (g + 0.5 p); not decayed: bias and the norm's gamma, p - lr g.
  V ww(4), wb(2), wg(2);
  for (int i = 0; i < 4; ++i) ww[i] = w[i] - 0.1 * (gw[i] + 0.5 * w[i]);
  for (int i = 0; i < 2; ++i) wb[i] = b[i] - 0.1 * gb[i];
  for (int i = 0; i < 2; ++i) wg[i] = gamma[i] - 0.1 * gg[i];
  EXPECT_CLOSE(values(l.weight.inner()), ww, 1e-6);
  EXPECT_CLOSE(values(l.bias->inner()), wb, 1e-6);
  EXPECT_CLOSE(values(ln.gamma.inner()), wg, 1e-6);
  EXPECT_TRUE(l.weight.is_require_grad());
  // A module on a plain device: DeviceError naming the module.
  Linear plain(LinearConfig{.d_input = 2, .d_output = 2}, dev());
  EXPECT_THROWS(DeviceError, opt.step(0.1, plain, g), "[ModuleOptimizer::step]", "Linear");
}

TEST_P(Modules, CheckpointWithOptimizerStateResumesIdentically) {
  const Device ad = dev().autodiff();
  dev().seed(5);
  Net a(ad);
  const V xv = f32(host_random(2 * 2 * 4 * 4, 110));
  auto step = [&](Net& m, optim::ModuleOptimizer& opt) {
    Gradients g = m.forward(make<4>(xv, {2, 2, 4, 4}, ad)).square().sum().backward();
    opt.step(1e-2, m, g);
  };
  auto oa = optim::ModuleOptimizer::adam();
  step(a, oa);
  const std::string path = temp_path("ckpt.safetensors");
  optim::save_checkpoint(path, a, oa, {{"epoch", "1"}});
  dev().seed(6);
  Net b(ad);
  auto ob = optim::ModuleOptimizer::adam();
  EXPECT_EQ(optim::load_checkpoint(path, b, ob).at("epoch"), "1");
  step(a, oa);
  step(b, ob);
  EXPECT_EQ(values(a.fc.weight.inner()), values(b.fc.weight.inner()));
  EXPECT_EQ(values(a.conv.weight.inner()), values(b.conv.weight.inner()));
  std::remove(path.c_str());
}

TEST_P(Modules, CheckpointWhoseOptimizerPartIsRefusedLoadsNothing) {
  const Device ad = dev().autodiff();
  dev().seed(5);
  Net a(ad);
  auto oa = optim::ModuleOptimizer::adam();
  oa.step(1e-2, a, a.forward(make<4>(f32(host_random(2 * 2 * 4 * 4, 111)), {2, 2, 4, 4}, ad)).square().sum().backward());
  // The model part is valid; one optimizer step count is negative, which only the
  // optimizer's own load checks (after the model part would have loaded).
  io::NamedTensors all;
  for (auto& [n, d] : a.to_record()) all.emplace_back("model." + n, std::move(d));
  for (auto& [n, d] : oa.to_record()) {
    const bool step = n.size() > 5 && n.compare(n.size() - 5, 5, ".step") == 0;
    all.emplace_back("optim." + n, step ? TensorData::from<std::int64_t>({-1}) : std::move(d));
  }
  const std::string path = temp_path("bad_ckpt.safetensors");
  io::save_safetensors(path, all, {});
  dev().seed(6);
  Net b(ad);
  auto ob = optim::ModuleOptimizer::adam();
  const V fc = values(b.fc.weight.inner()), conv = values(b.conv.weight.inner());
  EXPECT_THROWS(ShapeError, optim::load_checkpoint(path, b, ob), "negative step");
  EXPECT_EQ(values(b.fc.weight.inner()), fc);
  EXPECT_EQ(values(b.conv.weight.inner()), conv);
  EXPECT_TRUE(ob.to_record().empty());
  std::remove(path.c_str());
}

TEST_P(Modules, OptimizerRecordErrorsLoadNothing) {
  const Device ad = dev().autodiff();
  Linear l(LinearConfig{.d_input = 2, .d_output = 2}, ad);
  // Two groups: the bias (no decay) and the weight (the rest), each with a momentum buffer.
  auto opt = optim::ModuleOptimizer::sgd(optim::SgdConfig{.momentum = 0.9, .weight_decay = 0.1}, true);
  opt.step(0.1, l, l.forward(Tensor<2>::ones({1, 2}, ad)).sum().backward());
  const io::NamedTensors rec = opt.to_record();
  ASSERT_EQ(rec.size(), 4u);
  io::NamedTensors foreign = rec;
  foreign.emplace_back("nope.step", TensorData::from<std::int64_t>({1}));
  EXPECT_THROWS(FormatError, opt.load_record(foreign, l), "nope.step");
  // The bias's group would load (step 5), the weight's refuses a negative step: both keep their state.
  io::NamedTensors broken;
  for (const auto& [n, d] : rec) {
    if (n == "bias.step") broken.emplace_back(n, TensorData::from<std::int64_t>({5}));
    else if (n == "weight.step") broken.emplace_back(n, TensorData::from<std::int64_t>({-1}));
    else broken.emplace_back(n, d);
  }
  EXPECT_THROW(opt.load_record(broken, l), Error);
  const io::NamedTensors after = opt.to_record();
  ASSERT_EQ(after.size(), rec.size());
  for (std::size_t i = 0; i < rec.size(); ++i) {
    EXPECT_EQ(after[i].first, rec[i].first);
    EXPECT_TRUE(after[i].second == rec[i].second) << rec[i].first;
  }
}

// ---- Sequential and bad input ---------------------------------------------------------------

TEST_P(Modules, SequentialMatchesTheChain) {
  dev().seed(8);
  Sequential s;
  s.add(Conv2d(Conv2dConfig{.channels = {1, 2}, .kernel_size = {3, 3}}, dev()))
      .add(Relu())
      .add(AvgPool2d(AvgPool2dConfig{.kernel_size = {2, 2}}))
      .add(Flatten())
      .add(Linear(LinearConfig{.d_input = 2 * 2 * 2, .d_output = 3}, dev()));
  EXPECT_EQ(s.named_parameters()[0].name, "0.weight");
  EXPECT_EQ(s.named_parameters()[2].name, "4.weight");
  const auto x = make<4>(f32(host_random(2 * 36, 120)), {2, 1, 6, 6});
  auto& conv = static_cast<Conv2d&>(s[0]);
  auto& fc = static_cast<Linear&>(s[4]);
  const auto want = fc.forward(AvgPool2d(AvgPool2dConfig{.kernel_size = {2, 2}})
                                   .forward(activation::relu(conv.forward(x)))
                                   .reshape<2>(std::array<std::int64_t, 2>{2, -1}));
  EXPECT_EQ(values(s.forward<2>(x)), values(want));
  EXPECT_THROWS(ShapeError, s.forward<3>(x), "[Sequential::forward]", "rank");
}

// PRelu: one slope per channel (dim 1) or one for all; SwiGlu: silu(x Wi) * (x Wo), both
// against loops in doubles; burn's defaults and record names; bad slopes named.
TEST_P(Modules, PReluAndSwiGluMatchLoops) {
  PRelu one(PReluConfig{}, dev());
  EXPECT_EQ(values(one.alpha), V{0.25});
  EXPECT_EQ(one.named_parameters()[0].name, "alpha");
  PRelu per(PReluConfig{.num_parameters = 3, .alpha = 0.5}, dev());
  per.alpha = make<1>(f32({0.1, -2.0, 0.5}), {3});
  const V x = f32(host_random(2 * 3 * 4, 41));
  V want(x.size()), want1(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double a = V{0.1, -2.0, 0.5}[(i / 4) % 3];
    want[i] = x[i] >= 0 ? x[i] : static_cast<double>(static_cast<float>(a)) * x[i];
    want1[i] = x[i] >= 0 ? x[i] : 0.25 * x[i];
  }
  const auto t = make<3>(x, {2, 3, 4});
  EXPECT_CLOSE(values(per.forward(t)), want, 1e-6);
  EXPECT_CLOSE(values(one.forward(t)), want1, 1e-6);
  EXPECT_THROWS(ShapeError, per.forward(make<3>(f32(host_random(2 * 2 * 4, 1)), {2, 2, 4})), "[PRelu]", "PRelu.alpha");
  EXPECT_THROWS_FROM(ShapeError, "PRelu", PRelu(PReluConfig{.num_parameters = 0}, dev()), "num_parameters");

  SwiGlu sg(SwiGluConfig{.d_input = 3, .d_output = 2}, dev());
  EXPECT_FALSE(sg.linear_inner.bias.has_value()) << "burn's default: no bias";
  std::vector<std::string> names;
  for (const ParamRef& p : sg.named_parameters()) names.push_back(p.name);
  EXPECT_EQ(names, (std::vector<std::string>{"linear_inner.weight", "linear_outer.weight"}));
  const V wi = f32(host_random(6, 42)), wo = f32(host_random(6, 43)), xs = f32(host_random(4 * 3, 44));
  sg.linear_inner.weight = make<2>(wi, {3, 2});
  sg.linear_outer.weight = make<2>(wo, {3, 2});
  V y(4 * 2);
  for (std::size_t n = 0; n < 4; ++n)
    for (std::size_t j = 0; j < 2; ++j) {
      double g = 0, v = 0;
      for (std::size_t k = 0; k < 3; ++k) g += xs[n * 3 + k] * wi[k * 2 + j], v += xs[n * 3 + k] * wo[k * 2 + j];
      y[n * 2 + j] = g / (1.0 + std::exp(-g)) * v;
    }
  EXPECT_CLOSE(values(sg.forward(make<2>(xs, {4, 3}))), y, 1e-5);
  EXPECT_THROWS(ShapeError, sg.forward(Tensor<2>::ones({1, 4}, dev())), "[Linear]");
}

TEST_P(Modules, BadInputGivesTypedErrorsNamingTheModule) {
  Linear l(LinearConfig{.d_input = 3, .d_output = 2}, dev());
  EXPECT_THROWS(ShapeError, l.forward(Tensor<2>::ones({1, 4}, dev())), "[Linear]", "Linear.weight");
  Conv2d c(Conv2dConfig{.channels = {3, 2}, .kernel_size = {1, 1}}, dev());
  EXPECT_THROWS(ShapeError, c.forward(Tensor<4>::ones({1, 2, 2, 2}, dev())), "[Conv2d]", "Conv2d.weight", "3 channels");
  BatchNorm bn(BatchNormConfig{.num_features = 3}, dev());
  EXPECT_THROWS(ShapeError, bn.forward(Tensor<4>::ones({2, 2, 2, 2}, dev())), "[BatchNorm]", "BatchNorm.gamma");
  LayerNorm ln(LayerNormConfig{.d_model = 3}, dev());
  EXPECT_THROWS(ShapeError, ln.forward(Tensor<2>::ones({2, 2}, dev())), "[LayerNorm]", "LayerNorm.gamma");
  EXPECT_THROWS(ShapeError, GroupNorm(GroupNormConfig{.num_groups = 2, .num_channels = 3}, dev()), "[GroupNorm]");
  EXPECT_THROWS(ShapeError, Dropout(DropoutConfig{.prob = 1.0}), "[Dropout]");
  if (dev().supports_dtype(DType::F64)) {
    EXPECT_THROWS(DTypeError, l.forward(Tensor<2>::ones({1, 3}, dev(), DType::F64)), "[Linear]", "Linear.weight");
  }
  Sequential s;
  s.add(Linear(LinearConfig{.d_input = 3, .d_output = 2}, dev()));
  EXPECT_THROWS(ShapeError, s.forward<2>(Tensor<4>::ones({1, 1, 1, 2}, dev())), "[Linear]");
}

}  // namespace
