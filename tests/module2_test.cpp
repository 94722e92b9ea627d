// tensor/modules/ (issue 29, second part): Lstm / BiLstm / Gru / BiGru against step-by-step
// references written here (host loops over the same numbers), Conv3d / ConvTranspose3d
// against loops, TransformerDecoder against a composition of the tested layers, the
// KL-divergence and CTC losses against their formulas, gradients against finite
// differences, and typed errors, on every device of the conformance list. Linked into
// module_test beside module_test.cpp.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include <tensor/module.hpp>
#include <tensor/modules/attention.hpp>
#include <tensor/modules/conv.hpp>
#include <tensor/modules/loss.hpp>
#include <tensor/modules/recurrent.hpp>

#include "conformance/devices.hpp"
#include "test_util.hpp"

namespace {

using namespace tensor;
using namespace tensor::nn;
using V = std::vector<double>;

const Device& dev() { return tt::conf::DeviceScope::current(); }

class Modules2 : public ::testing::TestWithParam<Device> {
 protected:
  void SetUp() override { scope_.enter(GetParam()); }
  void TearDown() override { scope_.leave(); }
  tt::conf::DeviceScope scope_;
};
INSTANTIATE_TEST_SUITE_P(Devices, Modules2, ::testing::ValuesIn(tt::conf::devices()),
                         [](const ::testing::TestParamInfo<Device>& p) { return tt::conf::test_name(p.param); });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(Modules2);

// Values as the device holds them (f32), so references round like the inputs.
V f32(const V& v) {
  V o(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) o[i] = static_cast<float>(v[i]);
  return o;
}
// Deterministic f32 values in [-1, 1) from the test's own generator.
V host_random(std::size_t n, unsigned seed) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  V v(n);
  for (auto& x : v) x = u(g);
  return f32(v);
}
template <std::size_t D>
Tensor<D> make(const V& v, const Shape& s, const Device& d = dev()) {
  std::vector<float> f(v.begin(), v.end());
  return Tensor<D>::from_data(TensorData::from(f, s), d);
}
template <std::size_t D, class K>
V values(const Tensor<D, K>& t) { return t.into_data().convert(DType::F64).template to_vec<double>(); }

#define EXPECT_CLOSE(got_expr, want_expr, tol)                                                   \
  do {                                                                                            \
    const V got_ = (got_expr), want_ = (want_expr);                                               \
    ASSERT_EQ(got_.size(), want_.size());                                                         \
    for (std::size_t i_ = 0; i_ < want_.size(); ++i_)                                             \
      ASSERT_NEAR(got_[i_], want_[i_], (tol) * (1.0 + std::abs(want_[i_]))) << "element " << i_; \
  } while (0)

// A parameter's tensor replaced by host values (on the module's plain device) / read back.
template <class F>
decltype(auto) by_rank(const ParamRef& p, F&& f) {
  switch (p.slot.rank) {
    case 1: return f(p.get<1>());
    case 2: return f(p.get<2>());
    case 3: return f(p.get<3>());
    case 4: return f(p.get<4>());
    default: return f(p.get<5>());
  }
}
void set_values(const ParamRef& p, const V& v, const Device& d) {
  by_rank(p, [&](auto& t) {
    using T = std::decay_t<decltype(t)>;
    t = make<T::rank()>(v, p.shape(), d);
  });
}
V param_values(const ParamRef& p) {
  return by_rank(p, [](auto& t) { return values(t); });
}
V param_grad(const ParamRef& p, const Gradients& g) {
  return by_rank(p, [&](auto& t) { return values(*t.grad(g)); });
}

// Every parameter of m set to host-random values; the values by name.
using Params = std::map<std::string, V>;
Params randomize(Module& m, unsigned seed, double scale = 1.0) {
  Params out;
  for (const ParamRef& p : m.named_parameters()) {
    V v = host_random(p.num_elements(), seed++);
    for (double& x : v) x = static_cast<float>(x * scale);
    set_values(p, v, dev());
    out[p.name] = v;
  }
  return out;
}

// d/dp loss(m) at three entries of one parameter, by central differences on the plain
// device, against autodiff on the autodiff device (the module moved there and back).
template <class M, class F>
void gradcheck(M& m, F loss, const std::string& param, double eps, double tol) {
  m.to(dev().autodiff());
  const Tensor<1> l = loss(m);
  Gradients g = l.backward();
  V grad;
  for (const ParamRef& p : m.named_parameters())
    if (p.name == param) grad = param_grad(p, g);
  ASSERT_FALSE(grad.empty()) << param;
  m.to(dev());
  ParamRef plain;
  for (const ParamRef& p : m.named_parameters())
    if (p.name == param) plain = p;
  const V orig = param_values(plain);
  const std::size_t n = orig.size();
  double largest = 0;  // the check is not vacuous: some entry moves the loss
  for (std::size_t idx : {std::size_t{0}, n / 2, n - 1}) {
    double f[2];
    for (int sgn = 0; sgn < 2; ++sgn) {
      V vals = orig;
      vals[idx] += sgn ? -eps : eps;
      set_values(plain, vals, dev());
      f[sgn] = values(loss(m))[0];
    }
    set_values(plain, orig, dev());
    EXPECT_NEAR(grad[idx], (f[0] - f[1]) / (2 * eps), tol) << param << "[" << idx << "]";
    largest = std::max(largest, std::abs(grad[idx]));
  }
  EXPECT_GT(largest, 1e-3) << param << ": no sampled entry has a gradient";
}

// ---- recurrent references -------------------------------------------------------------------

double sig(double v) { return 1.0 / (1.0 + std::exp(-v)); }

// y [B, out] = x [B, in] W [in, out] + b, W and b from P under `name` (b may be absent).
V affine(const Params& P, const std::string& name, const V& x, int B, int in, int out) {
  const V& w = P.at(name + ".weight");
  const auto bi = P.find(name + ".bias");
  V y(static_cast<std::size_t>(B * out));
  for (int n = 0; n < B; ++n)
    for (int o = 0; o < out; ++o) {
      double s = bi == P.end() ? 0.0 : bi->second[o];
      for (int i = 0; i < in; ++i) s += x[n * in + i] * w[i * out + o];
      y[n * out + o] = s;
    }
  return y;
}
V step_input(const V& x, int B, int L, int D, int t) {  // x [B, L, D] at step t -> [B, D]
  V o(static_cast<std::size_t>(B * D));
  for (int n = 0; n < B; ++n)
    for (int i = 0; i < D; ++i) o[n * D + i] = x[(n * L + t) * D + i];
  return o;
}

using Fn = double (*)(double);
double host_tanh(double v) { return std::tanh(v); }
double hard_sigmoid(double v) { return std::clamp(0.2 * v + 0.5, 0.0, 1.0); }
double relu(double v) { return v > 0 ? v : 0.0; }
double softsign(double v) { return v / (1 + std::abs(v)); }

struct HostLstmOptions {
  bool reverse = false;
  std::optional<double> clip{};
  bool input_forget = false;
  Fn gate = sig, cell = host_tanh, hidden = host_tanh;
};

// One direction of an Lstm whose parameters are P under `pre` ("" or "forward." ...):
// out [B, L, H] at x's positions; c and h [B, H] updated in place.
V host_lstm(const Params& P, const std::string& pre, const V& x, int B, int L, int D, int H, V& c, V& h,
            const HostLstmOptions& o = {}) {
  V out(static_cast<std::size_t>(B * L * H));
  for (int s = 0; s < L; ++s) {
    const int t = o.reverse ? L - 1 - s : s;
    const V xt = step_input(x, B, L, D, t);
    auto gate = [&](const std::string& g) {
      V a = affine(P, pre + g + ".input_transform", xt, B, D, H);
      const V b = affine(P, pre + g + ".hidden_transform", h, B, H, H);
      for (std::size_t k = 0; k < a.size(); ++k) a[k] += b[k];
      return a;
    };
    const V i = gate("input_gate"), f = gate("forget_gate"), og = gate("output_gate"), g = gate("cell_gate");
    for (int k = 0; k < B * H; ++k) {
      const double iv = o.gate(i[k]), fv = o.input_forget ? 1.0 - iv : o.gate(f[k]);
      c[k] = fv * c[k] + iv * o.cell(g[k]);
      if (o.clip) c[k] = std::clamp(c[k], -*o.clip, *o.clip);
      h[k] = o.gate(og[k]) * o.hidden(c[k]);
      out[((k / H) * L + t) * H + k % H] = h[k];
    }
  }
  return out;
}

// One direction of a Gru (P under `pre`), as host_lstm.
V host_gru(const Params& P, const std::string& pre, const V& x, int B, int L, int D, int H, V& h, bool reset_after,
           bool reverse = false, Fn gate = sig, Fn hidden = host_tanh) {
  V out(static_cast<std::size_t>(B * L * H));
  for (int s = 0; s < L; ++s) {
    const int t = reverse ? L - 1 - s : s;
    const V xt = step_input(x, B, L, D, t);
    const V xz = affine(P, pre + "update_gate.input_transform", xt, B, D, H),
            hz = affine(P, pre + "update_gate.hidden_transform", h, B, H, H),
            xr = affine(P, pre + "reset_gate.input_transform", xt, B, D, H),
            hr = affine(P, pre + "reset_gate.hidden_transform", h, B, H, H),
            xn = affine(P, pre + "new_gate.input_transform", xt, B, D, H);
    V r(h.size());
    for (std::size_t k = 0; k < h.size(); ++k) r[k] = gate(xr[k] + hr[k]);
    V hn;
    if (reset_after) {
      hn = affine(P, pre + "new_gate.hidden_transform", h, B, H, H);
      for (std::size_t k = 0; k < h.size(); ++k) hn[k] *= r[k];
    } else {
      V rh(h.size());
      for (std::size_t k = 0; k < h.size(); ++k) rh[k] = r[k] * h[k];
      hn = affine(P, pre + "new_gate.hidden_transform", rh, B, H, H);
    }
    for (int k = 0; k < B * H; ++k) {
      const double z = gate(xz[k] + hz[k]), n = hidden(xn[k] + hn[k]);
      h[k] = (1 - z) * n + z * h[k];
      out[((k / H) * L + t) * H + k % H] = h[k];
    }
  }
  return out;
}

// [L, B, D] <-> [B, L, D] on host data.
V swap01(const V& x, int A, int Bn, int D) {
  V o(x.size());
  for (int a = 0; a < A; ++a)
    for (int b = 0; b < Bn; ++b)
      for (int i = 0; i < D; ++i) o[(b * A + a) * D + i] = x[(a * Bn + b) * D + i];
  return o;
}

constexpr int kB = 2, kL = 3, kD = 3, kH = 2;

TEST_P(Modules2, LstmMatchesStepByStepReference) {
  const V x = host_random(kB * kL * kD, 1);
  const auto xt = make<3>(x, {kB, kL, kD});
  struct Case {
    const char* name;
    HostLstmOptions o;
    bool bias;
    bool other_activations;
  };
  using K = ActivationConfig::Kind;
  for (const Case& cs : {Case{"plain", {}, true, false}, Case{"reverse", {.reverse = true}, true, false},
                         Case{"clip", {.clip = 0.3}, true, false},
                         Case{"input_forget, no bias", {.input_forget = true}, false, false},
                         Case{"hard sigmoid gates, relu cell, softsign hidden",
                              {.gate = hard_sigmoid, .cell = relu, .hidden = softsign}, true, true}}) {
    SCOPED_TRACE(cs.name);
    LstmConfig cfg{.d_input = kD, .d_hidden = kH, .bias = cs.bias, .reverse = cs.o.reverse, .clip = cs.o.clip,
                   .input_forget = cs.o.input_forget};
    if (cs.other_activations) {
      cfg.gate_activation = {K::HardSigmoid};
      cfg.cell_activation = {K::Relu};
      cfg.hidden_activation = {K::Softsign};
    }
    Lstm lstm(cfg, dev());
    const Params P = randomize(lstm, 10);
    V c(kB * kH, 0.0), h(kB * kH, 0.0);
    const V want = host_lstm(P, "", x, kB, kL, kD, kH, c, h, cs.o);
    const auto [out, st] = lstm.forward(xt);
    EXPECT_EQ(out.shape(), (Shape{kB, kL, kH}));
    EXPECT_CLOSE(values(out), want, 1e-4);
    EXPECT_CLOSE(values(st.cell), c, 1e-4);
    EXPECT_CLOSE(values(st.hidden), h, 1e-4);
  }
  // A given initial state, and the sequence-first layout.
  Lstm lstm(LstmConfig{.d_input = kD, .d_hidden = kH, .batch_first = false}, dev());
  const Params P = randomize(lstm, 20);
  V c = host_random(kB * kH, 30), h = host_random(kB * kH, 31);
  const LstmState<2> s0{make<2>(c, {kB, kH}), make<2>(h, {kB, kH})};
  const V want = swap01(host_lstm(P, "", x, kB, kL, kD, kH, c, h), kB, kL, kH);
  const auto [out, st] = lstm.forward(make<3>(swap01(x, kB, kL, kD), {kL, kB, kD}), s0);
  EXPECT_CLOSE(values(out), want, 1e-4);
  EXPECT_CLOSE(values(st.cell), c, 1e-4);
  EXPECT_CLOSE(values(st.hidden), h, 1e-4);
  // burn's names and defaults: four gates of two Linears, 4 (d h + h + h h + h) parameters.
  EXPECT_EQ(lstm.named_parameters().front().name, "input_gate.input_transform.weight");
  EXPECT_EQ(lstm.named_parameters().back().name, "cell_gate.hidden_transform.bias");
  EXPECT_EQ(lstm.num_params(), 4u * (kD * kH + kH + kH * kH + kH));
  // burn's GateController::gate_product: x Wi + bi + h Wh + bh.
  const V x2 = host_random(kB * kD, 32), h2 = host_random(kB * kH, 33);
  V gp = affine(P, "forget_gate.input_transform", x2, kB, kD, kH);
  const V gh = affine(P, "forget_gate.hidden_transform", h2, kB, kH, kH);
  for (std::size_t k = 0; k < gp.size(); ++k) gp[k] += gh[k];
  EXPECT_CLOSE(values(lstm.forget_gate.gate_product(make<2>(x2, {kB, kD}), make<2>(h2, {kB, kH}))), gp, 1e-5);
}

TEST_P(Modules2, BiLstmIsForwardAndReverseLstms) {
  BiLstm bi(BiLstmConfig{.d_input = kD, .d_hidden = kH}, dev());
  const Params P = randomize(bi, 40);
  EXPECT_EQ(bi.named_parameters().front().name, "forward.input_gate.input_transform.weight");
  const V x = host_random(kB * kL * kD, 2);
  V cf = host_random(kB * kH, 50), hf = host_random(kB * kH, 51), cr = host_random(kB * kH, 52), hr = host_random(kB * kH, 53);
  auto join = [](const V& a, const V& b) {
    V o = a;
    o.insert(o.end(), b.begin(), b.end());
    return o;
  };
  const LstmState<3> s0{make<3>(join(cf, cr), {2, kB, kH}), make<3>(join(hf, hr), {2, kB, kH})};
  const V of = host_lstm(P, "forward.", x, kB, kL, kD, kH, cf, hf);
  const V orv = host_lstm(P, "reverse.", x, kB, kL, kD, kH, cr, hr, {.reverse = true});
  V want;  // [B, L, 2H]: forward features then reverse ones
  for (int p = 0; p < kB * kL; ++p) {
    want.insert(want.end(), of.begin() + p * kH, of.begin() + (p + 1) * kH);
    want.insert(want.end(), orv.begin() + p * kH, orv.begin() + (p + 1) * kH);
  }
  const auto [out, st] = bi.forward(make<3>(x, {kB, kL, kD}), s0);
  EXPECT_EQ(out.shape(), (Shape{kB, kL, 2 * kH}));
  EXPECT_CLOSE(values(out), want, 1e-4);
  EXPECT_CLOSE(values(st.cell), join(cf, cr), 1e-4);
  EXPECT_CLOSE(values(st.hidden), join(hf, hr), 1e-4);
}

TEST_P(Modules2, GruAndBiGruMatchStepByStepReference) {
  const V x = host_random(kB * kL * kD, 3);
  const auto xt = make<3>(x, {kB, kL, kD});
  for (bool reset_after : {true, false}) {
    SCOPED_TRACE(reset_after ? "reset_after" : "reset_before");
    Gru gru(GruConfig{.d_input = kD, .d_hidden = kH, .reset_after = reset_after}, dev());
    const Params P = randomize(gru, 60);
    V h(kB * kH, 0.0);
    const V want = host_gru(P, "", x, kB, kL, kD, kH, h, reset_after);
    const auto [out, hT] = gru.forward(xt);
    EXPECT_CLOSE(values(out), want, 1e-4);
    EXPECT_CLOSE(values(hT), h, 1e-4);
    V h2 = host_random(kB * kH, 70);
    const Tensor<2> s0 = make<2>(h2, {kB, kH});
    const V want2 = host_gru(P, "", x, kB, kL, kD, kH, h2, reset_after);
    EXPECT_CLOSE(values(gru.forward(xt, s0).first), want2, 1e-4);
  }
  {
    SCOPED_TRACE("hard sigmoid (alpha 0.25, beta 0.4) gates, softsign hidden");
    Gru gru(GruConfig{.d_input = kD, .d_hidden = kH, .gate_activation = {ActivationConfig::Kind::HardSigmoid, 0.25, 0.4},
                      .hidden_activation = {ActivationConfig::Kind::Softsign}},
            dev());
    const Params P = randomize(gru, 65);
    V h(kB * kH, 0.0);
    const V want = host_gru(P, "", x, kB, kL, kD, kH, h, true, false,
                            [](double v) { return std::clamp(0.25 * v + 0.4, 0.0, 1.0); }, softsign);
    EXPECT_CLOSE(values(gru.forward(xt).first), want, 1e-4);
  }
  Gru gru(GruConfig{.d_input = kD, .d_hidden = kH}, dev());
  EXPECT_EQ(gru.num_params(), 3u * (kD * kH + kH + kH * kH + kH));
  EXPECT_EQ(gru.named_parameters()[4].name, "reset_gate.input_transform.weight");
  // BiGru, sequence first.
  BiGru bi(BiGruConfig{.d_input = kD, .d_hidden = kH, .batch_first = false}, dev());
  const Params P = randomize(bi, 80);
  V hf(kB * kH, 0.0), hr(kB * kH, 0.0);
  const V of = host_gru(P, "forward.", x, kB, kL, kD, kH, hf, true);
  const V orv = host_gru(P, "reverse.", x, kB, kL, kD, kH, hr, true, true);
  V want;
  for (int p = 0; p < kB * kL; ++p) {
    want.insert(want.end(), of.begin() + p * kH, of.begin() + (p + 1) * kH);
    want.insert(want.end(), orv.begin() + p * kH, orv.begin() + (p + 1) * kH);
  }
  const auto [out, st] = bi.forward(make<3>(swap01(x, kB, kL, kD), {kL, kB, kD}));
  EXPECT_EQ(out.shape(), (Shape{kL, kB, 2 * kH}));
  EXPECT_CLOSE(values(out), swap01(want, kB, kL, 2 * kH), 1e-4);
  V hs = hf;
  hs.insert(hs.end(), hr.begin(), hr.end());
  EXPECT_CLOSE(values(st), hs, 1e-4);
}

TEST_P(Modules2, RecurrentGradientsMatchFiniteDifferences) {
  const V x = host_random(1 * 3 * 2, 4), r = host_random(1 * 3 * 2, 5);
  Lstm lstm(LstmConfig{.d_input = 2, .d_hidden = 2}, dev());
  randomize(lstm, 90);
  auto lloss = [&](Lstm& m) {
    const Device d = *m.device();
    const auto [out, st] = m.forward(make<3>(x, {1, 3, 2}, d));
    return (out * make<3>(r, {1, 3, 2}, d)).sum() + st.cell.sum();
  };
  for (const char* p : {"input_gate.input_transform.weight", "forget_gate.hidden_transform.weight", "output_gate.input_transform.bias",
                        "cell_gate.hidden_transform.bias"}) {
    Lstm copy = lstm;
    gradcheck(copy, lloss, p, 1e-2, 2e-3);
  }
  Gru gru(GruConfig{.d_input = 2, .d_hidden = 2}, dev());
  randomize(gru, 95);
  auto gloss = [&](Gru& m) {
    const Device d = *m.device();
    return (m.forward(make<3>(x, {1, 3, 2}, d)).first * make<3>(r, {1, 3, 2}, d)).sum();
  };
  for (const char* p : {"update_gate.input_transform.weight", "reset_gate.hidden_transform.weight", "new_gate.hidden_transform.bias"}) {
    Gru copy = gru;
    gradcheck(copy, gloss, p, 1e-2, 2e-3);
  }
}

TEST_P(Modules2, RecurrentBadInputGivesTypedErrors) {
  Lstm lstm(LstmConfig{.d_input = kD, .d_hidden = kH}, dev());
  EXPECT_THROWS(ShapeError, lstm.forward(Tensor<3>::ones({kB, kL, kD + 1}, dev())), "[Lstm]",
                "Lstm.input_gate.input_transform.weight");
  const LstmState<2> bad{Tensor<2>::zeros({kB, kH + 1}, dev()), Tensor<2>::zeros({kB, kH}, dev())};
  EXPECT_THROWS(ShapeError, lstm.forward(Tensor<3>::ones({kB, kL, kD}, dev()), bad), "[Lstm]", "state.cell");
  EXPECT_THROWS(ShapeError, Lstm(LstmConfig{.d_input = 0, .d_hidden = 2}, dev()), "[Lstm]", "d_input");
  Gru gru(GruConfig{.d_input = kD, .d_hidden = kH}, dev());
  EXPECT_THROWS(ShapeError, gru.forward(Tensor<3>::ones({kB, kL, 1}, dev())), "[Gru]", "Gru.update_gate.input_transform.weight");
  EXPECT_THROWS(ShapeError, gru.forward(Tensor<3>::ones({kB, kL, kD}, dev()), Tensor<2>::zeros({kB + 1, kH}, dev())), "[Gru]",
                "state");
  BiLstm bl(BiLstmConfig{.d_input = kD, .d_hidden = kH}, dev());
  const LstmState<3> one_way{Tensor<3>::zeros({1, kB, kH}, dev()), Tensor<3>::zeros({1, kB, kH}, dev())};
  EXPECT_THROWS(ShapeError, bl.forward(Tensor<3>::ones({kB, kL, kD}, dev()), one_way), "[BiLstm]", "state.cell");
  BiGru bg(BiGruConfig{.d_input = kD, .d_hidden = kH}, dev());
  EXPECT_THROWS(ShapeError, bg.forward(Tensor<3>::ones({kB, kL, 2}, dev())), "[BiGru]", "input_transform.weight");
  if (!dev().is_autodiff()) {
    EXPECT_THROWS(DeviceError, lstm.forward(Tensor<3>::ones({kB, kL, kD}, dev().autodiff())), "[Lstm]");
    // A module on an autodiff device and a plain input.
    Gru on_ad(GruConfig{.d_input = kD, .d_hidden = kH}, dev().autodiff());
    EXPECT_THROWS(DeviceError, on_ad.forward(Tensor<3>::ones({kB, kL, kD}, dev())), "[Gru]", "Gru.update_gate.input_transform.weight");
  }
}

TEST_P(Modules2, RecurrentSaveLoadGivesIdenticalOutputs) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("module2_test_" + std::to_string(::getpid()) + "_bilstm.safetensors")).string();
  dev().seed(5);
  BiLstm a(BiLstmConfig{.d_input = kD, .d_hidden = kH}, dev());
  a.save(path);
  dev().seed(6);
  BiLstm b(BiLstmConfig{.d_input = kD, .d_hidden = kH}, dev());
  const auto x = make<3>(host_random(kB * kL * kD, 7), {kB, kL, kD});
  EXPECT_NE(values(a.forward(x).first), values(b.forward(x).first));
  EXPECT_TRUE(b.load(path).complete());
  EXPECT_EQ(values(a.forward(x).first), values(b.forward(x).first));
  // Another model's file: a strict FormatError naming a tensor, nothing loaded.
  Gru g(GruConfig{.d_input = kD, .d_hidden = kH}, dev());
  const V before = values(g.forward(x).first);
  EXPECT_THROWS(FormatError, g.load(path), "update_gate");
  EXPECT_EQ(values(g.forward(x).first), before);
  std::filesystem::remove(path);
}

// ---- 3-d convolution and pooling against loops ----------------------------------------------

using I3 = std::array<int, 3>;

// Conv3d: out[n, o, p] = b[o] + sum_{c, k} x[n, g cin + c, p s - pad + k dil] W[o, c, k].
V host_conv3d(const V& x, const V& w, const V& b, int N, int Ci, I3 in, int Co, I3 k, I3 s, I3 pad, I3 dil, int groups, I3& out) {
  for (int a = 0; a < 3; ++a) out[a] = (in[a] + 2 * pad[a] - dil[a] * (k[a] - 1) - 1) / s[a] + 1;
  const int cig = Ci / groups, cog = Co / groups;
  V y(static_cast<std::size_t>(N * Co * out[0] * out[1] * out[2]));
  std::size_t at = 0;
  for (int n = 0; n < N; ++n)
    for (int o = 0; o < Co; ++o)
      for (int p0 = 0; p0 < out[0]; ++p0)
        for (int p1 = 0; p1 < out[1]; ++p1)
          for (int p2 = 0; p2 < out[2]; ++p2) {
            double acc = b[o];
            const int g = o / cog;
            for (int c = 0; c < cig; ++c)
              for (int k0 = 0; k0 < k[0]; ++k0)
                for (int k1 = 0; k1 < k[1]; ++k1)
                  for (int k2 = 0; k2 < k[2]; ++k2) {
                    const int i0 = p0 * s[0] - pad[0] + k0 * dil[0], i1 = p1 * s[1] - pad[1] + k1 * dil[1],
                              i2 = p2 * s[2] - pad[2] + k2 * dil[2];
                    if (i0 < 0 || i1 < 0 || i2 < 0 || i0 >= in[0] || i1 >= in[1] || i2 >= in[2]) continue;
                    const int ci = g * cig + c;
                    acc += x[(((n * Ci + ci) * in[0] + i0) * in[1] + i1) * in[2] + i2] *
                           w[(((o * cig + c) * k[0] + k0) * k[1] + k1) * k[2] + k2];
                  }
            y[at++] = acc;
          }
  return y;
}

// ConvTranspose3d as a scatter: y[n, g cog + oc, i s - pad + k dil] += x[n, g cig + ic, i] W[g cig + ic, oc, k].
V host_conv_transpose3d(const V& x, const V& w, const V& b, int N, int Ci, I3 in, int Co, I3 k, I3 s, I3 pad, I3 dil, I3 pout,
                        int groups, I3& out) {
  for (int a = 0; a < 3; ++a) out[a] = (in[a] - 1) * s[a] - 2 * pad[a] + dil[a] * (k[a] - 1) + pout[a] + 1;
  const int cig = Ci / groups, cog = Co / groups, plane = out[0] * out[1] * out[2];
  V y(static_cast<std::size_t>(N * Co * plane));
  for (int n = 0; n < N; ++n)
    for (int o = 0; o < Co; ++o)
      for (int q = 0; q < plane; ++q) y[(n * Co + o) * plane + q] = b[o];
  for (int n = 0; n < N; ++n)
    for (int ci = 0; ci < Ci; ++ci)
      for (int i0 = 0; i0 < in[0]; ++i0)
        for (int i1 = 0; i1 < in[1]; ++i1)
          for (int i2 = 0; i2 < in[2]; ++i2) {
            const double xv = x[(((n * Ci + ci) * in[0] + i0) * in[1] + i1) * in[2] + i2];
            const int g = ci / cig;
            for (int oc = 0; oc < cog; ++oc)
              for (int k0 = 0; k0 < k[0]; ++k0)
                for (int k1 = 0; k1 < k[1]; ++k1)
                  for (int k2 = 0; k2 < k[2]; ++k2) {
                    const int o0 = i0 * s[0] - pad[0] + k0 * dil[0], o1 = i1 * s[1] - pad[1] + k1 * dil[1],
                              o2 = i2 * s[2] - pad[2] + k2 * dil[2];
                    if (o0 < 0 || o1 < 0 || o2 < 0 || o0 >= out[0] || o1 >= out[1] || o2 >= out[2]) continue;
                    const int o = g * cog + oc;
                    y[(((n * Co + o) * out[0] + o0) * out[1] + o1) * out[2] + o2] +=
                        xv * w[(((ci * cog + oc) * k[0] + k0) * k[1] + k1) * k[2] + k2];
                  }
          }
  return y;
}

TEST_P(Modules2, Conv3dAndConvTranspose3dMatchLoops) {
  {
    SCOPED_TRACE("Conv3d, groups 2, stride, padding, dilation");
    Conv3d conv(Conv3dConfig{.channels = {2, 4}, .kernel_size = {2, 2, 2}, .stride = {1, 2, 1}, .dilation = {1, 1, 2},
                             .groups = 2, .padding = Padding<3>::explicit_({1, 0, 1})},
                dev());
    EXPECT_EQ(conv.weight.shape(), (Shape{4, 1, 2, 2, 2}));
    const Params P = randomize(conv, 200);
    const V x = host_random(2 * 2 * 3 * 4 * 3, 201);
    I3 out{};
    const V want = host_conv3d(x, P.at("weight"), P.at("bias"), 2, 2, {3, 4, 3}, 4, {2, 2, 2}, {1, 2, 1}, {1, 0, 1}, {1, 1, 2}, 2, out);
    const Tensor<5> y = conv.forward(make<5>(x, {2, 2, 3, 4, 3}));
    EXPECT_EQ(y.shape(), (Shape{2, 4, std::size_t(out[0]), std::size_t(out[1]), std::size_t(out[2])}));
    EXPECT_CLOSE(values(y), want, 1e-4);
  }
  {
    SCOPED_TRACE("Conv3d, Same padding, no bias");
    Conv3d conv(Conv3dConfig{.channels = {3, 2}, .kernel_size = {3, 1, 3}, .padding = Padding<3>::same(), .bias = false}, dev());
    EXPECT_FALSE(conv.bias.has_value());
    const Params P = randomize(conv, 210);
    const V x = host_random(1 * 3 * 2 * 3 * 4, 211);
    I3 out{};
    const V want = host_conv3d(x, P.at("weight"), V(2, 0.0), 1, 3, {2, 3, 4}, 2, {3, 1, 3}, {1, 1, 1}, {1, 0, 1}, {1, 1, 1}, 1, out);
    EXPECT_EQ(out, (I3{2, 3, 4}));
    EXPECT_CLOSE(values(conv.forward(make<5>(x, {1, 3, 2, 3, 4}))), want, 1e-4);
  }
  {
    SCOPED_TRACE("ConvTranspose3d, groups 2, stride, padding, padding_out");
    ConvTranspose3d ct(ConvTranspose3dConfig{.channels = {2, 4}, .kernel_size = {2, 3, 2}, .stride = {2, 1, 2}, .dilation = {1, 1, 1},
                                             .padding = {0, 1, 1}, .padding_out = {1, 0, 0}, .groups = 2},
                       dev());
    EXPECT_EQ(ct.weight.shape(), (Shape{2, 2, 2, 3, 2}));
    const Params P = randomize(ct, 220);
    const V x = host_random(1 * 2 * 2 * 3 * 2, 221);
    I3 out{};
    const V want = host_conv_transpose3d(x, P.at("weight"), P.at("bias"), 1, 2, {2, 3, 2}, 4, {2, 3, 2}, {2, 1, 2}, {0, 1, 1}, {1, 1, 1},
                                         {1, 0, 0}, 2, out);
    const Tensor<5> y = ct.forward(make<5>(x, {1, 2, 2, 3, 2}));
    EXPECT_EQ(y.shape(), (Shape{1, 4, std::size_t(out[0]), std::size_t(out[1]), std::size_t(out[2])}));
    EXPECT_CLOSE(values(y), want, 1e-4);
  }
  {
    SCOPED_TRACE("AdaptiveAvgPool3d");
    const V x = host_random(1 * 2 * 3 * 4 * 5, 230);
    const I3 in{3, 4, 5}, o{2, 3, 2};
    V want;
    for (int c = 0; c < 2; ++c)
      for (int a = 0; a < o[0]; ++a)
        for (int b = 0; b < o[1]; ++b)
          for (int e = 0; e < o[2]; ++e) {
            auto lo = [&](int i, int ax) { return i * in[ax] / o[ax]; };
            auto hi = [&](int i, int ax) { return ((i + 1) * in[ax] + o[ax] - 1) / o[ax]; };
            double s = 0;
            int cnt = 0;
            for (int i0 = lo(a, 0); i0 < hi(a, 0); ++i0)
              for (int i1 = lo(b, 1); i1 < hi(b, 1); ++i1)
                for (int i2 = lo(e, 2); i2 < hi(e, 2); ++i2, ++cnt) s += x[((c * 3 + i0) * 4 + i1) * 5 + i2];
            want.push_back(s / cnt);
          }
    AdaptiveAvgPool3d pool(AdaptiveAvgPool3dConfig{.output_size = {2, 3, 2}});
    EXPECT_CLOSE(values(pool.forward(make<5>(x, {1, 2, 3, 4, 5}))), want, 1e-5);
  }
  // Typed errors naming the module.
  Conv3d conv(Conv3dConfig{.channels = {3, 2}, .kernel_size = {1, 1, 1}}, dev());
  EXPECT_THROWS(ShapeError, conv.forward(Tensor<5>::ones({1, 2, 2, 2, 2}, dev())), "[Conv3d]", "Conv3d.weight", "3 channels");
  ConvTranspose3d ct(ConvTranspose3dConfig{.channels = {3, 2}, .kernel_size = {1, 1, 1}}, dev());
  EXPECT_THROWS(ShapeError, ct.forward(Tensor<5>::ones({1, 2, 2, 2, 2}, dev())), "[ConvTranspose3d]", "ConvTranspose3d.weight");
  EXPECT_THROWS(ShapeError, Conv3d(Conv3dConfig{.channels = {3, 2}, .kernel_size = {2, 1, 1}, .padding = Padding<3>::same()}, dev()),
                "[Conv3d]", "Same");
  EXPECT_THROWS(ShapeError, Conv3d(Conv3dConfig{.channels = {3, 2}, .groups = 2}, dev()), "[Conv3d]", "groups");
}

TEST_P(Modules2, Conv3dGradientsMatchFiniteDifferences) {
  const V x = host_random(1 * 2 * 3 * 3 * 2, 240);
  Conv3d conv(Conv3dConfig{.channels = {2, 2}, .kernel_size = {2, 2, 1}, .padding = Padding<3>::explicit_({0, 1, 0})}, dev());
  randomize(conv, 241);
  auto closs = [&](Conv3d& m) {
    const Device d = *m.device();
    const Tensor<5> y = m.forward(make<5>(x, {1, 2, 3, 3, 2}, d));
    return (y * y).sum();
  };
  for (const char* p : {"weight", "bias"}) {
    Conv3d copy = conv;
    gradcheck(copy, closs, p, 1e-2, 2e-2);
  }
  ConvTranspose3d ct(ConvTranspose3dConfig{.channels = {2, 2}, .kernel_size = {2, 1, 2}, .stride = {2, 1, 1}}, dev());
  randomize(ct, 242);
  auto tloss = [&](ConvTranspose3d& m) {
    const Device d = *m.device();
    const Tensor<5> y = m.forward(make<5>(x, {1, 2, 3, 3, 2}, d));
    return (y * y).sum();
  };
  for (const char* p : {"weight", "bias"}) {
    ConvTranspose3d copy = ct;
    gradcheck(copy, tloss, p, 1e-2, 2e-2);
  }
}

// ---- TransformerDecoder ---------------------------------------------------------------------

TEST_P(Modules2, TransformerDecoderLayerIsItsLayersComposed) {
  const V tv = host_random(2 * 3 * 4, 300), mv = host_random(2 * 4 * 4, 301);
  const auto target = make<3>(tv, {2, 3, 4}), memory = make<3>(mv, {2, 4, 4});
  const auto causal = generate_autoregressive_mask(2, 3, dev());
  const auto mpad = Tensor<2, Bool>::from_bools({{false, false, false, true}, {false, false, false, false}}, dev());
  for (bool pre : {false, true}) {
    SCOPED_TRACE(pre ? "pre-norm" : "post-norm");
    TransformerDecoderLayer layer(
        TransformerDecoderLayerConfig{.d_model = 4, .d_ff = 6, .n_heads = 2, .dropout = 0.0, .norm_first = pre}, dev());
    randomize(layer, pre ? 310 : 320);  // norms' gamma / beta random too: their order matters
    auto sa = [&](const Tensor<3>& x) {
      MhaInput i = MhaInput::self_attn(x);
      i.mask_attn = causal;
      return layer.self_attn.forward(i).context;
    };
    auto ca = [&](const Tensor<3>& x, const Tensor<3>& mem) {
      return layer.cross_attn.forward(MhaInput{x, mem, mem, mpad, std::nullopt}).context;
    };
    Tensor<3> want = target;
    if (pre) {
      want = want + sa(layer.norm_3.forward(want));
      want = want + ca(layer.norm_1.forward(want), memory);
      want = want + layer.pwff.forward(layer.norm_2.forward(want));
    } else {
      want = layer.norm_1.forward(want + sa(want));
      want = layer.norm_2.forward(want + ca(want, memory));
      want = layer.norm_3.forward(want + layer.pwff.forward(want));
    }
    TransformerDecoderInput in = TransformerDecoderInput::make(target, memory);
    in.target_mask_attn = causal;
    in.memory_mask_pad = mpad;
    const V got = values(layer.forward(in));
    EXPECT_CLOSE(got, values(want), 1e-5);
    // Causal: changing the last target position leaves the earlier ones; the padded memory
    // position of batch 0 does not reach batch 0's output.
    V tv2 = tv, mv2 = mv;
    for (int n = 0; n < 2; ++n)
      for (int k = 0; k < 4; ++k) tv2[(n * 3 + 2) * 4 + k] += 0.5;
    for (int k = 0; k < 4; ++k) mv2[3 * 4 + k] -= 0.7;
    TransformerDecoderInput in2 = in;
    in2.target = make<3>(tv2, {2, 3, 4});
    in2.memory = make<3>(mv2, {2, 4, 4});
    const V got2 = values(layer.forward(in2));
    for (int n = 0; n < 2; ++n)
      for (int p = 0; p < 2; ++p)
        for (int k = 0; k < 4; ++k) {
          const std::size_t at = static_cast<std::size_t>((n * 3 + p) * 4 + k);
          EXPECT_NEAR(got2[at], got[at], 1e-5) << "batch " << n << " position " << p;
        }
    double moved = 0;
    for (int k = 0; k < 4; ++k) moved += std::abs(got2[(0 * 3 + 2) * 4 + k] - got[(0 * 3 + 2) * 4 + k]);
    EXPECT_GT(moved, 1e-3);  // the changed position itself moves
  }
  // burn's activation option reaches the feed-forward block (GELU unless given).
  TransformerDecoderLayer relu_layer(TransformerDecoderLayerConfig{.d_model = 4, .d_ff = 6, .n_heads = 2, .dropout = 0.0,
                                                                   .activation = {ActivationConfig::Kind::Relu}},
                                     dev());
  randomize(relu_layer, 340);
  const PositionWiseFeedForward& ff = relu_layer.pwff;
  EXPECT_EQ(values(ff.forward(target)), values(ff.linear_outer.forward(activation::relu(ff.linear_inner.forward(target)))));
  EXPECT_EQ(TransformerDecoderLayer(TransformerDecoderLayerConfig{.d_model = 4, .d_ff = 6, .n_heads = 2}, dev()).pwff.activation.kind,
            ActivationConfig::Kind::Gelu);
  // Names and the stack.
  dev().seed(12);
  TransformerDecoder dec(TransformerDecoderConfig{.d_model = 4, .d_ff = 8, .n_heads = 2, .n_layers = 2, .dropout = 0.0}, dev());
  EXPECT_EQ(dec.named_parameters().front().name, "layers.0.cross_attn.query.weight");
  EXPECT_EQ(dec.named_parameters().back().name, "layers.1.norm_3.beta");
  TransformerDecoderInput in = TransformerDecoderInput::make(target, memory);
  in.target_mask_attn = causal;
  TransformerDecoderInput mid = in;
  mid.target = dec.layers[0].forward(in);
  EXPECT_EQ(values(dec.forward(in)), values(dec.layers[1].forward(mid)));
  // Typed errors.
  EXPECT_THROWS(ShapeError, dec.forward(TransformerDecoderInput::make(target, Tensor<3>::ones({2, 4, 5}, dev()))),
                "[TransformerDecoderLayer]", "memory");
  EXPECT_THROWS(ShapeError, dec.forward(TransformerDecoderInput::make(target, Tensor<3>::ones({1, 4, 4}, dev()))),
                "[TransformerDecoderLayer]");
  TransformerDecoderInput bad = TransformerDecoderInput::make(target, memory);
  bad.memory_mask_pad = Tensor<2, Bool>::from_bools({{false, false, true}, {false, false, false}}, dev());
  EXPECT_THROWS(ShapeError, dec.forward(bad), "[MultiHeadAttention]", "mask_pad");
  EXPECT_THROWS(ShapeError, TransformerDecoder(TransformerDecoderConfig{.d_model = 4, .d_ff = 8, .n_heads = 2, .n_layers = 0}, dev()),
                "[TransformerDecoder]", "n_layers");
}

TEST_P(Modules2, TransformerDecoderGradientsMatchFiniteDifferences) {
  dev().seed(13);
  TransformerDecoderLayer layer(
      TransformerDecoderLayerConfig{.d_model = 4, .d_ff = 6, .n_heads = 2, .dropout = 0.0, .norm_first = true}, dev());
  randomize(layer, 330);
  const V tv = host_random(1 * 3 * 4, 331), mv = host_random(1 * 2 * 4, 332), rv = host_random(1 * 3 * 4, 333);
  auto loss = [&](TransformerDecoderLayer& m) {
    const Device d = *m.device();
    TransformerDecoderInput in = TransformerDecoderInput::make(make<3>(tv, {1, 3, 4}, d), make<3>(mv, {1, 2, 4}, d));
    in.target_mask_attn = generate_autoregressive_mask(1, 3, d);
    return (m.forward(in) * make<3>(rv, {1, 3, 4}, d)).sum();
  };
  for (const char* p : {"self_attn.query.weight", "cross_attn.value.bias", "cross_attn.output.weight", "norm_3.gamma",
                        "pwff.linear_outer.bias"}) {
    TransformerDecoderLayer copy = layer;
    gradcheck(copy, loss, p, 1e-2, 2e-2);
  }
}

// ---- KL divergence and CTC losses -----------------------------------------------------------

TEST_P(Modules2, KLDivLossMatchesFormulaWithReductions) {
  // Predictions: log-probabilities; targets: probabilities with one exact zero.
  const V p = {-1.0, -0.5, -2.0, -0.2, -0.7, -1.3}, t = f32({0.4, 0.6, 0.0, 1.0, 0.25, 0.75});
  const auto pt = make<2>(p, {3, 2}), tt_ = make<2>(t, {3, 2});
  V elem(6);
  double sum = 0;
  for (int i = 0; i < 6; ++i) {
    elem[i] = t[i] == 0.0 ? 0.0 : t[i] * (std::log(t[i]) - p[i]);
    sum += elem[i];
  }
  const KLDivLoss kl;
  EXPECT_CLOSE(values(kl.forward_no_reduction(pt, tt_)), elem, 1e-5);
  EXPECT_CLOSE(values(kl.forward(pt, tt_)), V{sum / 3}, 1e-5);  // Auto: batch mean
  EXPECT_CLOSE(values(kl.forward(pt, tt_, Reduction::BatchMean)), V{sum / 3}, 1e-5);
  EXPECT_CLOSE(values(kl.forward(pt, tt_, Reduction::Mean)), V{sum / 6}, 1e-5);
  EXPECT_CLOSE(values(kl.forward(pt, tt_, Reduction::Sum)), V{sum}, 1e-5);
  // log_target: exp(t) (t - p) with t given as log-probabilities.
  const V lt = f32({-0.5, -1.5, -0.1, -3.0, -0.9, -0.6});
  const KLDivLoss klog(KLDivLossConfig{.log_target = true});
  double lsum = 0;
  V lelem(6);
  for (int i = 0; i < 6; ++i) lsum += lelem[i] = std::exp(lt[i]) * (lt[i] - p[i]);
  EXPECT_CLOSE(values(klog.forward_no_reduction(pt, make<2>(lt, {3, 2}))), lelem, 1e-5);
  EXPECT_CLOSE(values(klog.forward(pt, make<2>(lt, {3, 2}), Reduction::Sum)), V{lsum}, 1e-5);
  // The gradient through autodiff: d(batch-mean KL)/dp = -t / N.
  const Tensor<2> pa = make<2>(p, {3, 2}, dev().autodiff()).require_grad();
  Gradients g = kl.forward(pa, make<2>(t, {3, 2}, dev().autodiff())).backward();
  V want(6);
  for (int i = 0; i < 6; ++i) want[i] = -t[i] / 3;
  EXPECT_CLOSE(values(*pa.grad(g)), want, 1e-5);
  EXPECT_THROWS(ShapeError, kl.forward(pt, Tensor<2>::ones({2, 3}, dev())), "[KLDivLoss]");
}

// -log p(target | log_probs[:, n, :]) over the first Tn frames: the forward (alpha)
// recursion over blank-extended targets, in probability space (tiny sizes).
double host_ctc(const V& lp, int N, int C, int n, const std::vector<int>& target, int Tn, int blank) {
  std::vector<int> ext{blank};
  for (int l : target) {
    ext.push_back(l);
    ext.push_back(blank);
  }
  const int S = static_cast<int>(ext.size());
  auto prob = [&](int t, int c) { return std::exp(lp[(t * N + n) * C + c]); };
  V alpha(S, 0.0);
  alpha[0] = prob(0, ext[0]);
  if (S > 1) alpha[1] = prob(0, ext[1]);
  for (int t = 1; t < Tn; ++t) {
    V next(S, 0.0);
    for (int s = 0; s < S; ++s) {
      double a = alpha[s] + (s > 0 ? alpha[s - 1] : 0.0);
      if (s > 1 && ext[s] != blank && ext[s] != ext[s - 2]) a += alpha[s - 2];
      next[s] = a * prob(t, ext[s]);
    }
    alpha = next;
  }
  const double total = alpha[S - 1] + (S > 1 ? alpha[S - 2] : 0.0);
  return -std::log(total);
}

TEST_P(Modules2, CTCLossMatchesForwardRecursionWithReductions) {
  constexpr int T = 5, N = 3, C = 4;
  // log_softmax of random logits over the classes, on the host.
  V lp = host_random(T * N * C, 400);
  for (int r = 0; r < T * N; ++r) {
    double z = 0;
    for (int c = 0; c < C; ++c) z += std::exp(lp[r * C + c]);
    for (int c = 0; c < C; ++c) lp[r * C + c] = static_cast<float>(lp[r * C + c] - std::log(z));
  }
  // Sample 2 repeats a label (needs a blank between), sample 1 has an empty-ish short target.
  const std::vector<std::vector<int>> tg = {{1, 2, 3}, {2}, {3, 3}};
  const std::vector<int> in_len = {5, 4, 5};
  const auto targets = Tensor<2, Int>::from_ints({{1, 2, 3}, {2, 0, 0}, {3, 3, 0}}, dev());
  const auto il = Tensor<1, Int>::from_ints({5, 4, 5}, dev()), tl = Tensor<1, Int>::from_ints({3, 1, 2}, dev());
  V want(N);
  double sum = 0, mean = 0;
  for (int n = 0; n < N; ++n) {
    want[n] = host_ctc(lp, N, C, n, tg[n], in_len[n], 0);
    sum += want[n];
    mean += want[n] / static_cast<double>(tg[n].size()) / N;
  }
  const auto lpt = make<3>(lp, {T, N, C});
  const CTCLoss ctc;
  EXPECT_CLOSE(values(ctc.forward(lpt, targets, il, tl)), want, 1e-4);
  EXPECT_CLOSE(values(ctc.forward_with_reduction(lpt, targets, il, tl)), V{mean}, 1e-4);
  EXPECT_CLOSE(values(ctc.forward_with_reduction(lpt, targets, il, tl, Reduction::Sum)), V{sum}, 1e-4);
  EXPECT_THROWS(Error, ctc.forward_with_reduction(lpt, targets, il, tl, Reduction::BatchMean), "[CTCLoss]", "BatchMean");
  // Another blank index: class 3 is the blank, labels from 0-2.
  const auto targets_b = Tensor<2, Int>::from_ints({{0, 1, 2}, {1, 0, 0}, {2, 2, 0}}, dev());
  const std::vector<std::vector<int>> tgb = {{0, 1, 2}, {1}, {2, 2}};
  V want_b(N);
  for (int n = 0; n < N; ++n) want_b[n] = host_ctc(lp, N, C, n, tgb[n], in_len[n], 3);
  EXPECT_CLOSE(values(CTCLoss(CTCLossConfig{.blank = 3}).forward(lpt, targets_b, il, tl)), want_b, 1e-4);
  // An impossible alignment (3, 3 needs 3 frames; 2 given): +inf, or 0 with zero_infinity.
  const auto il_short = Tensor<1, Int>::from_ints({5, 4, 2}, dev());
  const V impossible = values(ctc.forward(lpt, targets, il_short, tl));
  EXPECT_TRUE(std::isinf(impossible[2]) && impossible[2] > 0);
  const V zeroed = values(CTCLoss(CTCLossConfig{.zero_infinity = true}).forward(lpt, targets, il_short, tl));
  EXPECT_CLOSE(zeroed, (V{want[0], want[1], 0.0}), 1e-4);
  // The gradient with respect to the log-probabilities against central differences.
  const Tensor<3> la = make<3>(lp, {T, N, C}, dev().autodiff()).require_grad();
  const Device ad = dev().autodiff();
  Gradients g = ctc.forward_with_reduction(la, targets.to_device(ad), il.to_device(ad), tl.to_device(ad), Reduction::Sum).backward();
  const V grad = values(*la.grad(g));
  for (int idx : {(1 * N + 0) * C + 1, (2 * N + 1) * C + 0, (4 * N + 2) * C + 3}) {
    double f[2];
    for (int sgn = 0; sgn < 2; ++sgn) {
      V l2 = lp;
      l2[idx] += sgn ? -1e-2 : 1e-2;
      f[sgn] = values(ctc.forward_with_reduction(make<3>(l2, {T, N, C}), targets, il, tl, Reduction::Sum))[0];
    }
    EXPECT_NEAR(grad[idx], (f[0] - f[1]) / 2e-2, 2e-3) << "log_probs[" << idx << "]";
  }
  // Typed errors naming the module.
  EXPECT_THROWS(ShapeError, ctc.forward(lpt, Tensor<2, Int>::from_ints({{1}, {2}}, dev()), il, tl), "[CTCLoss]", "targets");
  EXPECT_THROWS(ShapeError, ctc.forward(lpt, targets, Tensor<1, Int>::from_ints({5, 4}, dev()), tl), "[CTCLoss]", "input_lengths");
  EXPECT_THROWS(IndexError, CTCLoss(CTCLossConfig{.blank = 4}).forward(lpt, targets, il, tl), "[CTCLoss]", "blank");
}

}  // namespace
