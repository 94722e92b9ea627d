// Autodiff (issue 14) on every device of the conformance list (cpu, mini, vulkan; one
// process per device): closed-form gradients worked out in the comments, the traps of
// reference/autodiff.md (accumulation, broadcasting, views, detached branches, ties),
// the typed errors, and gradient checks generated from the op table: every Float op of
// the elementwise, scalar, reduction and along-dim families that the autodiff device
// differentiates, against central finite differences of the op's forward on the plain
// device (f64 on the cpu; f32 elsewhere, so there the check is looser).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <tensor/nn.hpp>
#include <tensor/profile.hpp>

#include "conformance/devices.hpp"
#include "dispatch/autodiff.hpp"
#include "dispatch/table/ops.hpp"
#include "test_util.hpp"

namespace {

using namespace tensor;
using tensor::detail::Handle;

const Device& dev() { return tt::conf::DeviceScope::current(); }
Device ad() { return dev().autodiff(); }
// f64 where the device computes with it (finite differences need the precision).
DType fdt() { return dev().supports_dtype(DType::F64) ? DType::F64 : DType::F32; }
double tol() { return fdt() == DType::F64 ? 1e-6 : 2e-2; }

class Autodiff : public ::testing::TestWithParam<Device> {
 protected:
  void SetUp() override { scope_.enter(GetParam()); }
  void TearDown() override { scope_.leave(); }
  tt::conf::DeviceScope scope_;
};
INSTANTIATE_TEST_SUITE_P(Devices, Autodiff, ::testing::ValuesIn(tt::conf::devices()),
                         [](const ::testing::TestParamInfo<Device>& p) { return tt::conf::test_name(p.param); });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(Autodiff);

template <std::size_t D>
Tensor<D> make(const std::vector<double>& v, Shape s, Device d) {
  return Tensor<D>::from_data(TensorData::from(v, s).convert(fdt()), d);
}
template <std::size_t D, class K>
std::vector<double> values(const Tensor<D, K>& t) { return t.into_data().convert(DType::F64).template to_vec<double>(); }
template <std::size_t D>
std::vector<double> grad_of(const Tensor<D>& x, const Gradients& g) {
  auto gx = x.grad(g);
  if (!gx) return {};
  EXPECT_EQ(gx->device(), x.device().inner());
  EXPECT_EQ(gx->shape(), x.shape());
  return values(*gx);
}
void expect_near(const std::vector<double>& got, const std::vector<double>& want, double eps, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t i = 0; i < want.size(); ++i)
    EXPECT_NEAR(got[i], want[i], eps * (1.0 + std::abs(want[i]))) << what << ", element " << i;
}

// Deterministic pseudo-random values in [lo, hi).
std::vector<double> spread(std::size_t n, double lo, double hi, unsigned seed) {
  std::vector<double> v(n);
  std::uint64_t s = 0x9E3779B97F4A7C15ull * (seed + 1);
  for (double& x : v) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    x = lo + (hi - lo) * static_cast<double>(s % 1000003) / 1000003.0;
  }
  return v;
}

// ---- closed forms -------------------------------------------------------------------

TEST_P(Autodiff, NameAndFlags) {
  const Device a = ad();
  EXPECT_TRUE(a.is_autodiff());
  EXPECT_FALSE(dev().is_autodiff());
  EXPECT_EQ(a.inner(), dev());
  EXPECT_EQ(a.backend_name().rfind("dispatch<autodiff<", 0), 0u) << a.backend_name();
  EXPECT_EQ(a.settings(), dev().settings());  // one settings table
  auto x = make<1>({1, 2}, Shape{2}, a);
  EXPECT_FALSE(x.is_require_grad());
  auto y = x.require_grad();
  EXPECT_TRUE(y.is_require_grad());
  EXPECT_FALSE(y.set_require_grad(false).is_require_grad());
  // On a plain device require_grad is a no-op and backward gives nothing.
  auto p = make<1>({1, 2}, Shape{2}, dev()).require_grad();
  EXPECT_FALSE(p.is_require_grad());
}

TEST_P(Autodiff, SquareSumIsTwoX) {
  // d/dx sum(x·x) = 2x: x used twice accumulates both paths.
  auto x = make<1>({-1.5, 0.0, 2.0, 3.25}, Shape{4}, ad()).require_grad();
  Gradients g = (x * x).sum().backward();
  EXPECT_EQ(g.size(), 1u);
  expect_near(grad_of(x, g), {-3.0, 0.0, 4.0, 6.5}, 1e-6, "2x");
}

TEST_P(Autodiff, MatmulBothGradients) {
  // L = sum(A·B): dL/dA[i][k] = sum_j B[k][j]; dL/dB[k][j] = sum_i A[i][k].
  auto a = make<2>({1, 2, 3, 4, 5, 6}, Shape{2, 3}, ad()).require_grad();
  auto b = make<2>({1, -1, 2, 0, 0.5, 3}, Shape{3, 2}, ad()).require_grad();
  Gradients g = a.matmul(b).sum().backward();
  expect_near(grad_of(a, g), {0, 2, 3.5, 0, 2, 3.5}, 1e-6, "dA");
  expect_near(grad_of(b, g), {5, 5, 7, 7, 9, 9}, 1e-6, "dB");
}

TEST_P(Autodiff, BroadcastReducesToOperandShape) {
  // L = sum((x + b) · x) with b [1,3] broadcast over 2 rows: dL/db = column sums of x.
  auto x = make<2>({1, 2, 3, 4, 5, 6}, Shape{2, 3}, ad()).require_grad();
  auto b = make<2>({10, 20, 30}, Shape{1, 3}, ad()).require_grad();
  Gradients g = ((x + b) * x).sum().backward();
  expect_near(grad_of(b, g), {5, 7, 9}, 1e-6, "db");
  // dL/dx = 2x + b
  expect_near(grad_of(x, g), {12, 24, 36, 18, 30, 42}, 1e-6, "dx");
}

TEST_P(Autodiff, SoftmaxJacobianVectorProduct) {
  // L = sum(softmax(x)·w): dL/dx_i = y_i (w_i - sum_j y_j w_j), per row.
  const std::vector<double> xv = {0.5, -1.0, 2.0, 0.0, 0.25, -0.75}, wv = {1, 2, 3, -1, 0.5, 4};
  auto x = make<2>(xv, Shape{2, 3}, ad()).require_grad();
  auto w = make<2>(wv, Shape{2, 3}, ad());
  Gradients g = (activation::softmax(x, 1) * w).sum().backward();
  std::vector<double> want(6);
  for (int r = 0; r < 2; ++r) {
    double z = 0, dot = 0;
    for (int c = 0; c < 3; ++c) z += std::exp(xv[r * 3 + c]);
    for (int c = 0; c < 3; ++c) dot += std::exp(xv[r * 3 + c]) / z * wv[r * 3 + c];
    for (int c = 0; c < 3; ++c) want[r * 3 + c] = std::exp(xv[r * 3 + c]) / z * (wv[r * 3 + c] - dot);
  }
  expect_near(grad_of(x, g), want, tol(), "softmax jvp");
}

TEST_P(Autodiff, DiamondGraph) {
  // a = 2x, b = exp(x), L = sum(a·b): dL/dx = 2e^x + 2x e^x.
  const std::vector<double> xv = {-1, 0, 0.5, 1.5};
  auto x = make<1>(xv, Shape{4}, ad()).require_grad();
  auto a = x * 2.0;
  auto b = x.exp();
  Gradients g = (a * b).sum().backward();
  std::vector<double> want;
  for (double v : xv) want.push_back(2 * std::exp(v) + 2 * v * std::exp(v));
  expect_near(grad_of(x, g), want, tol(), "diamond");
}

TEST_P(Autodiff, DetachedBranchCarriesNoGradient) {
  // L = sum(x · detach(x)) = sum(x·c): dL/dx = x, not 2x.
  auto x = make<1>({1, -2, 3}, Shape{3}, ad()).require_grad();
  Gradients g = (x * x.detach()).sum().backward();
  expect_near(grad_of(x, g), {1, -2, 3}, 1e-6, "detach");
}

TEST_P(Autodiff, AbsentGradientsAreAbsentNotZero) {
  auto x = make<1>({1, 2}, Shape{2}, ad()).require_grad();
  auto y = make<1>({3, 4}, Shape{2}, ad()).require_grad();  // takes no part
  auto c = make<1>({5, 6}, Shape{2}, ad());                  // untracked
  Gradients g = (x * c).sum().backward();
  EXPECT_TRUE(x.grad(g).has_value());
  EXPECT_FALSE(y.grad(g).has_value());
  EXPECT_FALSE(c.grad(g).has_value());
  // A loss no tracked tensor reaches: empty gradients.
  Gradients none = (c * c).sum().backward();
  EXPECT_TRUE(none.empty());
}

TEST_P(Autodiff, UntrackedIntsIndexTrackedFloats) {
  // gather and select with Int indices: gradients scatter back, repeated indices add.
  auto x = make<2>({1, 2, 3, 4, 5, 6}, Shape{2, 3}, ad()).require_grad();
  auto idx = Tensor<2, Int>::from_data(TensorData::from(std::vector<std::int64_t>{2, 2, 0, 1}, Shape{2, 2}), ad());
  EXPECT_FALSE(idx.float_().is_require_grad());
  Gradients g = x.gather(1, idx).sum().backward();
  expect_near(grad_of(x, g), {0, 0, 2, 1, 1, 0}, 1e-6, "gather");
  auto rows = Tensor<1, Int>::from_data(TensorData::from(std::vector<std::int64_t>{1, 1, 0}, Shape{3}), ad());
  auto x2 = make<2>({1, 2, 3, 4, 5, 6}, Shape{2, 3}, ad()).require_grad();
  Gradients g2 = x2.select(0, rows).sum().backward();
  expect_near(grad_of(x2, g2), {1, 1, 1, 2, 2, 2}, 1e-6, "select");
}

TEST_P(Autodiff, MaxTiesGoToTheReturnedIndex) {
  // max_dim with ties: the whole gradient goes to the index max_dim_with_indices returns.
  auto x = make<2>({3, 1, 3, 2, 5, 5}, Shape{2, 3}, ad()).require_grad();
  auto [v, i] = x.max_dim_with_indices(1);
  const std::vector<std::int64_t> at = i.into_data().convert(DType::I64).to_vec<std::int64_t>();
  Gradients g = v.sum().backward();
  std::vector<double> want(6, 0.0);
  want[static_cast<std::size_t>(at[0])] = 1;
  want[3 + static_cast<std::size_t>(at[1])] = 1;
  expect_near(grad_of(x, g), want, 1e-6, "max ties");
}

TEST_P(Autodiff, ViewsOfNonContiguousInputs) {
  // L = sum(w · flip(slice(transpose(x)))) routes w back through each view.
  const std::vector<double> xv = {1, 2, 3, 4, 5, 6};  // [2,3]
  auto x = make<2>(xv, Shape{2, 3}, ad()).require_grad();
  auto t = x.transpose();                                              // [3,2]
  auto s = t.slice({Slice::range(1, 3), Slice::all()});               // rows 1..2 of t: x[:,1..2]^T
  auto f = s.flip({1});                                                // [2,2]
  auto w = make<2>({1, 2, 3, 4}, Shape{2, 2}, ad());
  Gradients g = (f * w).sum().backward();
  // f[r][c] = s[r][1-c] = t[1+r][1-c] = x[1-c][1+r]; dL/dx[1-c][1+r] = w[r][c].
  std::vector<double> want(6, 0.0);
  for (int r = 0; r < 2; ++r)
    for (int c = 0; c < 2; ++c) want[(1 - c) * 3 + (1 + r)] = std::vector<double>{1, 2, 3, 4}[r * 2 + c];
  expect_near(grad_of(x, g), want, 1e-6, "views");
}

TEST_P(Autodiff, SliceAssignAndMasksRouteSurvivors) {
  auto x = make<2>({1, 2, 3, 4}, Shape{2, 2}, ad()).require_grad();
  auto v = make<2>({7, 8}, Shape{1, 2}, ad()).require_grad();
  auto y = x.slice_assign({Slice::range(0, 1), Slice::all()}, v);  // row 0 replaced by v
  auto w = make<2>({1, 2, 3, 4}, Shape{2, 2}, ad());
  Gradients g = (y * w).sum().backward();
  expect_near(grad_of(x, g), {0, 0, 3, 4}, 1e-6, "slice_assign x");
  expect_near(grad_of(v, g), {1, 2}, 1e-6, "slice_assign v");
  auto x2 = make<2>({1, -2, 3, -4}, Shape{2, 2}, ad()).require_grad();
  auto m = x2.lower_elem(0.0);
  Gradients g2 = (x2.mask_fill(m, 0.0) * w).sum().backward();
  expect_near(grad_of(x2, g2), {1, 0, 3, 0}, 1e-6, "mask_fill");
}

TEST_P(Autodiff, InPlaceReuseKeepsSavedValues) {
  // exp's backward needs its output; an rvalue chain must not overwrite it.
  auto x = make<1>({0.0, 1.0}, Shape{2}, ad()).require_grad();
  auto y = x.exp();
  auto z = std::move(y).mul_scalar(3.0);  // would reuse y's buffer if nothing saved it
  Gradients g = z.sum().backward();
  expect_near(grad_of(x, g), {3.0, 3.0 * std::exp(1.0)}, tol(), "reuse");
}

TEST_P(Autodiff, ProdWithZeros) {
  // d prod / d x_i = product of the others, exact with a zero.
  auto x = make<1>({2, 0, 3}, Shape{3}, ad()).require_grad();
  Gradients g = x.prod().backward();
  expect_near(grad_of(x, g), {0, 6, 0}, 1e-6, "prod");
}

TEST_P(Autodiff, CumprodWithZeros) {
  // y = cumprod(x) along dim 1, L = sum(y·w): dL/dx_j = sum_{i>=j} w_i prod_{k<=i, k!=j} x_k.
  // Row 0: x = [2, 0, 3, 4], w = [1, 2, 3, 4]: j=0: 1; j=1: 1·... = 2·2 + 3·2·3 + 4·2·3·4 = 118;
  // j=2, j=3: every term holds x_1 = 0. Row 1: x = [0, 5, 0, 2]: j=0: 1 + 2·5 = 11, others 0.
  auto x = make<2>({2, 0, 3, 4, 0, 5, 0, 2}, Shape{2, 4}, ad()).require_grad();
  auto w = make<2>({1, 2, 3, 4, 1, 2, 3, 4}, Shape{2, 4}, ad());
  Gradients g = (x.cumprod(1) * w).sum().backward();
  expect_near(grad_of(x, g), {1, 118, 0, 0, 11, 0, 0, 0}, 1e-6, "cumprod dim 1");
  // The same along dim 0 of the transpose (a non-contiguous input).
  auto xt = make<2>({2, 0, 3, 4, 0, 5, 0, 2}, Shape{2, 4}, ad()).require_grad();
  Gradients gt = (xt.transpose().cumprod(0) * w.transpose()).sum().backward();
  expect_near(grad_of(xt, gt), {1, 118, 0, 0, 11, 0, 0, 0}, 1e-6, "cumprod dim 0");
}

TEST_P(Autodiff, GeluBackwardIsTheExactFormsDerivative) {
  // gelu is the exact x·Φ(x); its derivative Φ(x) + x·φ(x) (values from the closed form;
  // the tanh approximation's would be -0.0829641, 0.8673699, 1.0860993, -0.0115842).
  const std::vector<double> xv = {-1, 0, 0.5, 2, -3};
  const std::vector<double> want = {-0.0833154706, 0.5, 0.8674951247, 1.0852318011, -0.0119456472};
  const double eps = fdt() == DType::F64 ? 1e-9 : 1e-5;
  auto x = make<1>(xv, Shape{5}, ad()).require_grad();
  Gradients g = activation::gelu(x).sum().backward();
  expect_near(grad_of(x, g), want, eps, "autodiff gelu");
  // The op-table entry itself (native where the backend has one), times a grad of 2.
  const auto px = make<1>(xv, Shape{5}, dev()), pg = make<1>({2, 2, 2, 2, 2}, Shape{5}, dev());
  Tensor<1> gb(tensor::detail::binary(OpCode::gelu_backward, tensor::detail::retain(px.handle()), tensor::detail::retain(pg.handle())));
  std::vector<double> twice;
  for (double v : want) twice.push_back(2 * v);
  expect_near(values(gb), twice, eps, "gelu_backward entry");
}

TEST_P(Autodiff, InnerAndFromInner) {
  auto x = make<1>({1, 2}, Shape{2}, ad()).require_grad();
  auto i = x.inner();
  EXPECT_EQ(i.device(), dev());
  auto back = Tensor<1>::from_inner(i);
  EXPECT_EQ(back.device(), ad());
  EXPECT_FALSE(back.is_require_grad());
  auto ints = Tensor<1, Int>::from_data(TensorData::from(std::vector<std::int64_t>{1, 2}), ad());
  EXPECT_EQ(ints.inner().device(), dev());
}

TEST_P(Autodiff, TypedErrors) {
  auto x = make<1>({1, 2}, Shape{2}, ad()).require_grad();
  EXPECT_THROWS(ShapeError, (x * 2.0).backward(), "[backward]", "one element");
  auto loss = (x * x).sum();
  (void)loss.backward();
  EXPECT_THROWS(Error, loss.backward(), "[backward]", "already freed");
  EXPECT_THROWS(DeviceError, ad().autodiff(), "[Device::autodiff]", "autodiff of an autodiff");
  EXPECT_THROWS(DeviceError, make<1>({1}, Shape{1}, dev()).backward(), "[backward]", "autodiff device");
  if (dev() != Device::cpu()) {
    EXPECT_THROWS(DeviceError, x.to_device(Device::cpu()), "[to_device]", "requires grad");
  }
  EXPECT_THROWS(DeviceError, x * make<1>({1, 2}, Shape{2}, dev()), "different devices");
  // Untracked tensors still move freely.
  EXPECT_EQ(make<1>({1}, Shape{1}, ad()).to_device(Device::cpu()).device(), Device::cpu());
}

TEST_P(Autodiff, GradRemoveAndReplace) {
  auto x = make<1>({1, 2}, Shape{2}, ad()).require_grad();
  Gradients g = (x * 3.0).sum().backward();
  auto r = x.grad_remove(g);
  ASSERT_TRUE(r.has_value());
  expect_near(values(*r), {3, 3}, 1e-6, "removed");
  EXPECT_FALSE(x.grad(g).has_value());
  x.grad_replace(g, make<1>({9, 8}, Shape{2}, dev()));
  expect_near(grad_of(x, g), {9, 8}, 1e-6, "replaced");
  EXPECT_THROWS(ShapeError, x.grad_replace(g, make<1>({1}, Shape{1}, dev())), "[grad_replace]");
}

TEST_P(Autodiff, BackwardNeverReadsBack) {
  // The backward pass runs on the device: the profiler sees no into_data/from_data in it.
  auto x = make<2>({1, 2, 3, 4, 5, 6}, Shape{2, 3}, ad()).require_grad();
  auto w = make<2>({1, -1, 2, 0, 0.5, 3}, Shape{3, 2}, ad()).require_grad();
  auto idx = Tensor<2, Int>::from_data(TensorData::from(std::vector<std::int64_t>{1, 0}, Shape{2, 1}), ad());
  auto loss = activation::log_softmax(activation::relu(x.matmul(w)), 1).gather(1, idx).sum().neg();
  profile::start();
  Gradients g = loss.backward();
  const ProfileResult p = profile::stop();
  std::size_t ops = 0;
  for (const ProfileRow& r : p.rows) {
    ops += r.calls;
    EXPECT_NE(r.op, "into_data") << "backward read a tensor back to the host";
    EXPECT_NE(r.op, "from_data") << "backward uploaded host data";
  }
  EXPECT_GT(ops, 5u) << "the profiler saw the backward ops";
  EXPECT_TRUE(x.grad(g).has_value());
}

TEST_P(Autodiff, LongChainFreesWithoutRecursion) {
  // 20,000 nodes: freeing the graph must not recurse once per node.
  auto x = make<1>({1.0}, Shape{1}, ad()).require_grad();
  {
    auto y = x;
    for (int i = 0; i < 20000; ++i) y = y.add_scalar(1.0);
  }
  SUCCEED();
}

// ---- gradient checks generated from the op table --------------------------------------

// Input range per op (the op's domain, away from kinks); everything else [-2, 2].
struct Domain {
  double lo = -2, hi = 2;
};
Domain domain(std::string_view op) {
  static const std::map<std::string_view, Domain> d = {
      {"log", {0.2, 3}},    {"sqrt", {0.2, 3}},  {"recip", {0.5, 3}},       {"acos", {-0.9, 0.9}},
      {"asin", {-0.9, 0.9}}, {"atanh", {-0.9, 0.9}}, {"acosh", {1.2, 3}},    {"log1p", {-0.5, 3}},
      {"powf", {0.3, 2}},   {"powf_scalar", {0.3, 2}}, {"powf_scalar_impl", {0.3, 2}}, {"tan", {-1.2, 1.2}},
      {"cumprod", {0.5, 2}}, {"prod", {0.5, 1.5}}, {"prod_dim", {0.5, 1.5}}, {"div", {0.5, 2}},
  };
  auto it = d.find(op);
  return it == d.end() ? Domain{} : it->second;
}
// Ops whose finite differences are not meaningful at random points (discontinuous).
bool skip_fd(std::string_view op) {
  return op == "remainder" || op == "remainder_scalar" || op == "sign" || op == "round" || op == "floor" ||
         op == "ceil" || op == "trunc";
}

using Op = std::function<Handle(std::vector<Handle>)>;

// The layouts an input is given in: contiguous, the transpose of a contiguous tensor, a
// slice of a wider one, and broadcast (a [1, c] tensor expanded to [r, c]: the gradient
// is the one of the [1, c] leaf, summed over the rows).
constexpr int kLayouts = 4;
constexpr int kBroadcast = 3;
// The shape of the leaf that requires grad for an op input of shape s.
Shape leaf_shape(const Shape& s, int layout) {
  return layout == kBroadcast && s.rank() == 2 && s[0] > 1 ? Shape{1, s[1]} : s;
}

// loss(x...) = sum(op(x...) · w), w fixed; returns the analytic gradients (autodiff
// device) and compares each with central differences of the same loss on the plain device.
void gradcheck(const std::string& name, const Op& op, const std::vector<Shape>& shapes, Domain dom, int layout) {
  const Device a = ad();
  std::vector<std::vector<double>> xs;
  for (std::size_t i = 0; i < shapes.size(); ++i)
    xs.push_back(spread(leaf_shape(shapes[i], layout).num_elements(), dom.lo, dom.hi, unsigned(7 * i + 3)));
  // Builds the leaves on device d in the requested layout: 0 contiguous, 1 the transpose of
  // a contiguous tensor, 2 a slice of a wider one, 3 a contiguous [1, c] leaf (expanded by
  // as_input).
  auto build = [&](std::size_t i, const std::vector<double>& v, Device d) {
    const Shape& s = shapes[i];
    if (s.rank() != 2 || layout == 0 || layout == kBroadcast)
      return Tensor<2>::from_data(TensorData::from(v, leaf_shape(s, layout)).convert(fdt()), d);
    if (layout == 1) {
      std::vector<double> tv(v.size());
      for (std::size_t r = 0; r < s[0]; ++r)
        for (std::size_t c = 0; c < s[1]; ++c) tv[c * s[0] + r] = v[r * s[1] + c];
      return Tensor<2>::from_data(TensorData::from(tv, Shape{s[1], s[0]}).convert(fdt()), d).transpose();
    }
    std::vector<double> wide(s[0] * (s[1] + 2), 0.5);
    for (std::size_t r = 0; r < s[0]; ++r)
      for (std::size_t c = 0; c < s[1]; ++c) wide[r * (s[1] + 2) + c + 1] = v[r * s[1] + c];
    return Tensor<2>::from_data(TensorData::from(wide, Shape{s[0], s[1] + 2}).convert(fdt()), d)
        .slice({Slice::all(), Slice::range(1, static_cast<std::int64_t>(s[1] + 1))});
  };
  auto as_input = [&](std::size_t i, const Tensor<2>& leaf) {
    if (leaf.shape() == shapes[i]) return leaf;
    return leaf.expand(std::array<std::int64_t, 2>{static_cast<std::int64_t>(shapes[i][0]), static_cast<std::int64_t>(shapes[i][1])});
  };
  auto loss_on = [&](const std::vector<Tensor<2>>& in, Device d, DType t) {
    std::vector<Handle> hs;
    for (std::size_t i = 0; i < in.size(); ++i) hs.push_back(tensor::detail::retain(as_input(i, in[i]).handle()));
    tensor::detail::Handle out = op(std::move(hs));
    const Shape os = tensor::detail::shape(out);
    const std::size_t n = os.num_elements();
    Tensor<1> flat(tensor::detail::reshape(OpCode::reshape, std::move(out), std::vector<std::int64_t>{static_cast<std::int64_t>(n)}));
    auto w = Tensor<1>::from_data(TensorData::from(spread(n, -1, 1, 99), Shape{n}).convert(t), d);
    return (flat * w).sum();
  };
  auto loss = [&](const std::vector<Tensor<2>>& in, Device d) { return loss_on(in, d, fdt()); };
  std::vector<Tensor<2>> tracked;
  for (std::size_t i = 0; i < shapes.size(); ++i) tracked.push_back(build(i, xs[i], a).require_grad());
  Gradients g = loss(tracked, a).backward();
  // Devices with f64: central differences; others (Vulkan without shaderFloat64): the
  // cpu autodiff device's f64 gradients, so the device's f32 backward is checked against
  // a reference that was itself checked by differences.
  std::vector<Tensor<2>> ref;
  std::optional<Gradients> gref;
  if (fdt() != DType::F64) {
    const Device c = Device::cpu().autodiff();
    for (std::size_t i = 0; i < shapes.size(); ++i)
      ref.push_back(Tensor<2>::from_data(TensorData::from(xs[i], leaf_shape(shapes[i], layout)).convert(DType::F64), c).require_grad());
    std::vector<Handle> hs;
    gref = loss_on(ref, c, DType::F64).backward();
  }
  const double h = 1e-6;
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    auto gi = tracked[i].grad(g);
    ASSERT_TRUE(gi.has_value()) << name << ": no gradient for input " << i;
    const std::vector<double> got = values(*gi);
    std::vector<double> want(xs[i].size());
    if (gref) {
      want = values(*ref[i].grad(*gref));
    } else {
      for (std::size_t k = 0; k < xs[i].size(); ++k) {
        auto eval = [&](double delta) {
          std::vector<Tensor<2>> in;
          for (std::size_t j = 0; j < shapes.size(); ++j) {
            std::vector<double> v = xs[j];
            if (j == i) v[k] += delta;
            in.push_back(build(j, v, dev()));
          }
          return values(loss(in, dev()))[0];
        };
        want[k] = (eval(h) - eval(-h)) / (2 * h);
      }
    }
    expect_near(got, want, fdt() == DType::F64 ? 1e-5 : 2e-3,
                name + " layout " + std::to_string(layout) + " input " + std::to_string(i));
  }
}

// Every Float op of the families below that the autodiff device differentiates.
TEST_P(Autodiff, GradcheckFromOpTable) {
  using dispatch::Family;
  int checked = 0;
  for (const dispatch::OpInfo& info : dispatch::kOps) {
    const OpCode op = static_cast<OpCode>(info.code);
    const auto cov = dispatch::ad::coverage(op);
    if (!(info.kinds & dispatch::kKindF) || cov == dispatch::ad::Coverage::NotDifferentiable) continue;
    const std::string name(info.name);
    if (skip_fd(name)) continue;
    const Domain dom = domain(name);
    Op f;
    std::vector<Shape> shapes;
    switch (info.family) {
      case Family::Unary:
        if (op == OpCode::detach || op == OpCode::transpose) continue;  // checked by hand above
        f = [op](std::vector<Handle> h) { return tensor::detail::unary(op, std::move(h[0])); };
        shapes = {Shape{2, 3}};
        break;
      case Family::Binary:
        if (name.ends_with("_backward")) continue;  // second-order entries
        f = [op](std::vector<Handle> h) { return tensor::detail::binary(op, std::move(h[0]), std::move(h[1])); };
        shapes = {Shape{2, 3}, op == OpCode::prelu ? Shape{1, 3} : Shape{2, 3}};
        break;
      case Family::Scalar: {
        const double s = name == "leaky_relu" ? 0.1 : name.starts_with("pow") ? 1.7 : 0.75;
        if (name.starts_with("powi")) continue;  // integer exponents: Int scalars
        f = [op, s](std::vector<Handle> h) { return tensor::detail::scalar(op, std::move(h[0]), Scalar(s)); };
        shapes = {Shape{2, 3}};
        break;
      }
      case Family::Clamp:
        f = [op](std::vector<Handle> h) { return tensor::detail::clamp(op, std::move(h[0]), Scalar(-0.9), Scalar(1.1)); };
        shapes = {Shape{2, 3}};
        break;
      case Family::Reduce:
        f = [op](std::vector<Handle> h) { return tensor::detail::reduce(op, std::move(h[0])); };
        shapes = {Shape{2, 3}};
        break;
      case Family::Dim:
        f = [op](std::vector<Handle> h) { return tensor::detail::reduce_dim(op, std::move(h[0]), 1); };
        shapes = {Shape{2, 3}};
        break;
      default:
        continue;
    }
    for (int layout = 0; layout < kLayouts; ++layout) gradcheck(name, f, shapes, dom, layout);
    ++checked;
  }
  EXPECT_GE(checked, 60) << "ops gradchecked";
  std::printf("[ gradcheck ] elementwise/reduce: %d ops x %d layouts on %s\n", checked, kLayouts, ad().to_string().c_str());
}

// Index and mask arguments on the device of h.
Handle ints(std::vector<std::int64_t> v, Shape s, const Handle& like) {
  return tensor::detail::from_data(TensorData::from(v, s), tensor::detail::device(like), tensor::detail::Kind::Int);
}
Handle mask_for(Shape s, const Handle& like) {  // true where the pattern is positive
  const std::vector<double> pat = spread(s.num_elements(), -1, 1, 42);
  Handle f = tensor::detail::from_data(TensorData::from(pat, s), tensor::detail::device(like), tensor::detail::Kind::Float);
  return tensor::detail::compare_scalar(OpCode::greater_elem, std::move(f), Scalar(0.0));
}

// The layout, index and matmul families, from the op table: each Float op of these
// families that the autodiff device differentiates and that has a case here is checked
// in every layout; the differentiable ops of other families without a case (the
// *_with_indices pairs, scatter/select_assign updates, gather_nd/scatter_nd, powi,
// grid_sample_2d) are printed, and checked by hand elsewhere where they are.
TEST_P(Autodiff, GradcheckLayoutIndexMatmulFromOpTable) {
  using dispatch::Family;
  namespace td = tensor::detail;
  int checked = 0;
  std::string unhandled;
  for (const dispatch::OpInfo& info : dispatch::kOps) {
    const OpCode op = static_cast<OpCode>(info.code);
    const auto cov = dispatch::ad::coverage(op);
    if (!(info.kinds & dispatch::kKindF) || cov == dispatch::ad::Coverage::NotDifferentiable) continue;
    const std::string name(info.name);
    Op f;
    std::vector<Shape> shapes;
    switch (info.family) {
      case Family::Reshape:
        if (op == OpCode::reshape) {
          f = [](std::vector<Handle> h) { return td::reshape(OpCode::reshape, std::move(h[0]), std::vector<std::int64_t>{3, 4}); };
          shapes = {Shape{2, 6}};
        } else {
          f = [op](std::vector<Handle> h) { return td::reshape(op, std::move(h[0]), std::vector<std::int64_t>{4, 3}); };
          shapes = {Shape{1, 3}};
        }
        break;
      case Family::SwapDims:
        f = [](std::vector<Handle> h) { return td::swap_dims(std::move(h[0]), 0, 1); };
        shapes = {Shape{2, 3}};
        break;
      case Family::Axes:
        f = [op](std::vector<Handle> h) {
          const std::vector<std::int64_t> ax = op == OpCode::permute ? std::vector<std::int64_t>{1, 0} : std::vector<std::int64_t>{0, 1};
          return td::axes(op, std::move(h[0]), ax);
        };
        shapes = {Shape{3, 4}};
        break;
      case Family::Slice:
        f = [](std::vector<Handle> h) {
          const std::vector<Slice> sl = {Slice::range(1, 3), Slice::range(0, 4, 2)};
          return td::slice(std::move(h[0]), sl);
        };
        shapes = {Shape{3, 4}};
        break;
      case Family::SliceAssign:
        f = [](std::vector<Handle> h) {
          const std::vector<Slice> sl = {Slice::range(1, 3), Slice::range(0, 4, 2)};
          return td::slice_assign(std::move(h[0]), sl, std::move(h[1]));
        };
        shapes = {Shape{3, 4}, Shape{2, 2}};
        break;
      case Family::RepeatDim:
        f = [](std::vector<Handle> h) { return td::repeat_dim(std::move(h[0]), 0, 3); };
        shapes = {Shape{2, 3}};
        break;
      case Family::Cat:
        f = [](std::vector<Handle> h) {
          std::vector<Handle> parts{std::move(h[0]), std::move(h[1]), std::move(h[2])};
          return td::cat(std::move(parts), 1);
        };
        shapes = {Shape{2, 3}, Shape{2, 1}, Shape{2, 2}};
        break;
      case Family::Unfold:
        f = [](std::vector<Handle> h) { return td::unfold(std::move(h[0]), 1, 3, 2); };
        shapes = {Shape{2, 7}};
        break;
      case Family::Gather:
        f = [](std::vector<Handle> h) {
          Handle idx = ints({2, 0, 2, 1, 1, 1, 0, 2}, Shape{2, 4}, h[0]);
          return td::gather(std::move(h[0]), 1, std::move(idx));
        };
        shapes = {Shape{2, 3}};
        break;
      case Family::Scatter:
        f = [op](std::vector<Handle> h) {
          Handle idx = ints({2, 2, 0, 1}, Shape{2, 2}, h[0]);
          return td::scatter(op, std::move(h[0]), 1, std::move(idx), std::move(h[1]), IndexingUpdateOp::Add);
        };
        shapes = {Shape{2, 3}, Shape{2, 2}};
        break;
      case Family::Select:
        f = [](std::vector<Handle> h) {
          Handle idx = ints({2, 0, 2, 1}, Shape{4}, h[0]);
          return td::select(std::move(h[0]), 0, std::move(idx));
        };
        shapes = {Shape{3, 4}};
        break;
      case Family::SelectAssign:
        f = [op](std::vector<Handle> h) {
          Handle idx = ints({2, 0, 2}, Shape{3}, h[0]);
          return td::select_assign(op, std::move(h[0]), 0, std::move(idx), std::move(h[1]), IndexingUpdateOp::Add);
        };
        shapes = {Shape{3, 4}, Shape{3, 4}};
        break;
      case Family::MaskWhere:
        f = [](std::vector<Handle> h) {
          Handle m = mask_for(Shape{2, 3}, h[0]);
          return td::mask_where(std::move(h[0]), std::move(m), std::move(h[1]));
        };
        shapes = {Shape{2, 3}, Shape{2, 3}};
        break;
      case Family::MaskFill:
        f = [](std::vector<Handle> h) {
          Handle m = mask_for(Shape{2, 3}, h[0]);
          return td::mask_fill(std::move(h[0]), std::move(m), Scalar(0.5));
        };
        shapes = {Shape{2, 3}};
        break;
      case Family::MaskSelect:
        f = [](std::vector<Handle> h) {
          Handle m = mask_for(Shape{2, 3}, h[0]);
          return td::mask_select(std::move(h[0]), std::move(m));
        };
        shapes = {Shape{2, 3}};
        break;
      case Family::Matmul:
        f = [](std::vector<Handle> h) { return td::matmul(std::move(h[0]), std::move(h[1])); };
        shapes = {Shape{2, 3}, Shape{3, 4}};
        break;
      case Family::Cross:
        f = [](std::vector<Handle> h) { return td::cross(std::move(h[0]), std::move(h[1]), 1); };
        shapes = {Shape{2, 3}, Shape{2, 3}};
        break;
      case Family::Sort:
        f = [](std::vector<Handle> h) { return td::sort(std::move(h[0]), 1, true); };
        shapes = {Shape{2, 5}};
        break;
      case Family::TopK:
        f = [](std::vector<Handle> h) { return td::topk(std::move(h[0]), 1, 2); };
        shapes = {Shape{2, 5}};
        break;
      case Family::Cast: case Family::ToDevice:
        continue;  // a dtype or device change: checked by hand (finite differences need one dtype)
      case Family::Unary: case Family::Binary: case Family::Scalar: case Family::Clamp: case Family::Reduce:
      case Family::Dim:
        continue;  // GradcheckFromOpTable
      case Family::Conv: case Family::Pool: case Family::PoolWithIndices: case Family::Interpolate:
      case Family::Embedding: case Family::Attention: case Family::LayerNorm:
        continue;  // the module-op gradchecks below
      default:
        unhandled += name + " ";
        continue;
    }
    for (int layout = 0; layout < kLayouts; ++layout) gradcheck(name, f, shapes, Domain{}, layout);
    ++checked;
  }
  EXPECT_GE(checked, 20) << "ops gradchecked";
  std::printf("[ gradcheck ] layout/index/matmul: %d ops x %d layouts on %s (not here: %s)\n", checked, kLayouts,
              ad().to_string().c_str(), unhandled.empty() ? "-" : unhandled.c_str());
}

// ---- module ops --------------------------------------------------------------------

// A weighted sum, so every output element has its own gradient.
template <std::size_t D>
Tensor<1> wsum(const Tensor<D>& t) {
  const std::size_t n = t.shape().num_elements();
  auto w = Tensor<1>::from_data(TensorData::from(spread(n, -1, 1, 77), Shape{n}).convert(t.dtype()), t.device());
  return (t.reshape(std::array<std::int64_t, 1>{static_cast<std::int64_t>(n)}) * w).sum();
}

using AnyLoss = std::function<Tensor<1>(std::vector<Handle>)>;

// Gradients of loss(inputs) for every input, against central differences on the plain
// device (f64) or the cpu autodiff device's (other devices).
void gradcheck_any(const std::string& name, const std::vector<Shape>& shapes, const AnyLoss& loss,
                   const std::vector<Domain>& doms = {}) {
  std::vector<std::vector<double>> xs;
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    const Domain d = i < doms.size() ? doms[i] : Domain{};
    xs.push_back(spread(shapes[i].num_elements(), d.lo, d.hi, unsigned(11 * i + 5)));
  }
  auto inputs = [&](Device d, DType t, bool track, const std::vector<std::vector<double>>& v) {
    std::vector<Handle> hs;
    for (std::size_t i = 0; i < shapes.size(); ++i) {
      Handle h = tensor::detail::from_data(TensorData::from(v[i], shapes[i]).convert(t), d, tensor::detail::Kind::Float);
      hs.push_back(track ? tensor::detail::set_require_grad(std::move(h), true) : h);
    }
    return hs;
  };
  auto grads = [&](Device d, DType t) {
    std::vector<Handle> hs = inputs(d, t, true, xs);
    std::vector<Handle> keep;
    for (const Handle& h : hs) keep.push_back(tensor::detail::retain(h));
    Gradients g = loss(std::move(hs)).backward();
    std::vector<std::vector<double>> out;
    for (Handle& h : keep) {
      Handle gh = tensor::detail::grad(g, h);
      EXPECT_FALSE(gh.empty()) << name << ": an input got no gradient";
      out.push_back(gh.empty() ? std::vector<double>{} : tensor::detail::into_data(std::move(gh)).get().convert(DType::F64).to_vec<double>());
      tensor::detail::release(h);
    }
    return out;
  };
  const auto got = grads(ad(), fdt());
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    std::vector<double> want(xs[i].size());
    if (fdt() == DType::F64) {
      for (std::size_t k = 0; k < xs[i].size(); ++k) {
        auto eval = [&](double delta) {
          auto v = xs;
          v[i][k] += delta;
          return values(loss(inputs(dev(), DType::F64, false, v)))[0];
        };
        want[k] = (eval(1e-6) - eval(-1e-6)) / 2e-6;
      }
    } else {
      want = [&] {
        const Device c = Device::cpu().autodiff();
        std::vector<Handle> hs = inputs(c, DType::F64, true, xs);
        Handle keep = tensor::detail::retain(hs[i]);
        Gradients g = loss(std::move(hs)).backward();
        Handle gh = tensor::detail::grad(g, keep);
        tensor::detail::release(keep);
        return tensor::detail::into_data(std::move(gh)).get().convert(DType::F64).to_vec<double>();
      }();
    }
    expect_near(got[i], want, fdt() == DType::F64 ? 1e-5 : 2e-3, name + " input " + std::to_string(i));
  }
}

TEST_P(Autodiff, Conv2dWithBiasGradcheck) {
  nn::ConvOptions<2> o;
  o.padding = {1, 0};
  o.stride = {1, 2};
  gradcheck_any("conv2d", {Shape{2, 2, 4, 5}, Shape{3, 2, 3, 2}, Shape{3}}, [o](std::vector<Handle> h) {
    return wsum(nn::conv2d(Tensor<4>(h[0]), Tensor<4>(h[1]), Tensor<1>(h[2]), o));
  });
  nn::ConvOptions<2> g;
  g.groups = 2;
  gradcheck_any("conv2d groups", {Shape{1, 4, 3, 3}, Shape{2, 2, 2, 2}}, [g](std::vector<Handle> h) {
    return wsum(nn::conv2d(Tensor<4>(h[0]), Tensor<4>(h[1]), std::nullopt, g));
  });
}

TEST_P(Autodiff, PoolsGradcheck) {
  nn::MaxPoolOptions<2> m;
  m.kernel_size = {2, 2};
  m.stride = {2, 2};
  gradcheck_any("max_pool2d", {Shape{1, 2, 4, 4}}, [m](std::vector<Handle> h) { return wsum(nn::max_pool2d(Tensor<4>(h[0]), m)); });
  gradcheck_any("max_pool2d_with_indices", {Shape{1, 1, 4, 4}},
                [m](std::vector<Handle> h) { return wsum(nn::max_pool2d_with_indices(Tensor<4>(h[0]), m).first); });
  nn::AvgPoolOptions<2> a;
  a.kernel_size = {3, 3};
  a.stride = {1, 2};
  a.padding = {1, 1};
  gradcheck_any("avg_pool2d", {Shape{1, 2, 4, 5}}, [a](std::vector<Handle> h) { return wsum(nn::avg_pool2d(Tensor<4>(h[0]), a)); });
  gradcheck_any("adaptive_avg_pool2d", {Shape{2, 1, 5, 4}},
                [](std::vector<Handle> h) { return wsum(nn::adaptive_avg_pool2d(Tensor<4>(h[0]), {2, 3})); });
}

TEST_P(Autodiff, InterpolateEmbeddingLayerNormAttentionGradcheck) {
  nn::InterpolateOptions bil;
  bil.mode = nn::InterpolateMode::Bilinear;
  gradcheck_any("interpolate bilinear", {Shape{1, 1, 3, 3}},
                [bil](std::vector<Handle> h) { return wsum(nn::interpolate(Tensor<4>(h[0]), {5, 4}, bil)); });
  gradcheck_any("embedding", {Shape{4, 3}}, [](std::vector<Handle> h) {
    Tensor<2> w(h[0]);
    auto idx = Tensor<2, Int>::from_data(TensorData::from(std::vector<std::int64_t>{3, 0, 3, 1}, Shape{2, 2}), w.device());
    return wsum(nn::embedding(w, idx));
  });
  gradcheck_any("layer_norm", {Shape{2, 4}, Shape{4}, Shape{4}}, [](std::vector<Handle> h) {
    return wsum(nn::layer_norm(Tensor<2>(h[0]), Tensor<1>(h[1]), Tensor<1>(h[2])));
  });
  nn::AttentionOptions causal;
  causal.is_causal = true;
  gradcheck_any("attention causal", {Shape{1, 2, 3, 2}, Shape{1, 2, 4, 2}, Shape{1, 2, 4, 3}}, [causal](std::vector<Handle> h) {
    return wsum(nn::attention(Tensor<4>(h[0]), Tensor<4>(h[1]), Tensor<4>(h[2]), std::nullopt, std::nullopt, causal));
  });
}

TEST_P(Autodiff, LinearBatchNormFoldGradcheck) {
  gradcheck_any("linear", {Shape{2, 3, 4}, Shape{4, 5}, Shape{5}}, [](std::vector<Handle> h) {
    return wsum(nn::linear(Tensor<3>(h[0]), Tensor<2>(h[1]), Tensor<1>(h[2])));
  });
  gradcheck_any("batch_norm", {Shape{2, 3, 2}, Shape{3}, Shape{3}, Shape{3}, Shape{3}}, [](std::vector<Handle> h) {
    return wsum(nn::batch_norm(Tensor<3>(h[0]), Tensor<1>(h[1]), Tensor<1>(h[2]), Tensor<1>(h[3]), Tensor<1>(h[4])));
  }, {Domain{}, Domain{}, Domain{}, Domain{}, Domain{0.5, 2.0}});
  nn::UnfoldOptions o;
  o.stride = {2, 1};
  o.padding = {1, 0};
  gradcheck_any("unfold4d", {Shape{1, 2, 4, 3}},
                [o](std::vector<Handle> h) { return wsum(nn::unfold4d(Tensor<4>(h[0]), {2, 2}, o)); });
  gradcheck_any("fold4d", {Shape{1, 8, 6}},
                [o](std::vector<Handle> h) { return wsum(nn::fold4d(Tensor<3>(h[0]), {4, 3}, {2, 2}, o)); });
  gradcheck_any("adaptive_avg_pool3d", {Shape{1, 2, 3, 4, 2}},
                [](std::vector<Handle> h) { return wsum(nn::adaptive_avg_pool3d(Tensor<5>(h[0]), {2, 3, 1})); });
}

TEST_P(Autodiff, CtcLossAndDeformConvGradcheck) {
  gradcheck_any("ctc_loss", {Shape{4, 2, 3}}, [](std::vector<Handle> h) {
    Tensor<3> lp(h[0]);
    const Device d = lp.device();
    auto tg = Tensor<2, Int>::from_data(TensorData::from(std::vector<std::int64_t>{1, 2, 2, 1}, Shape{2, 2}), d);
    auto il = Tensor<1, Int>::from_data(TensorData::from(std::vector<std::int64_t>{4, 3}, Shape{2}), d);
    auto tl = Tensor<1, Int>::from_data(TensorData::from(std::vector<std::int64_t>{2, 1}, Shape{2}), d);
    return wsum(nn::ctc_loss(lp, tg, il, tl));
  });
  nn::DeformConvOptions<2> o;
  o.padding = {1, 0};
  // Offsets in (0.1, 0.45): the sample points stay off integer coordinates.
  gradcheck_any("deform_conv2d", {Shape{1, 2, 3, 3}, Shape{1, 8, 4, 2}, Shape{2, 2, 2, 2}, Shape{1, 4, 4, 2}, Shape{2}},
                [o](std::vector<Handle> h) {
                  return wsum(nn::deform_conv2d(Tensor<4>(h[0]), Tensor<4>(h[1]), Tensor<4>(h[2]), Tensor<4>(h[3]),
                                                Tensor<1>(h[4]), o));
                },
                {Domain{}, Domain{0.1, 0.45}, Domain{}, Domain{}, Domain{}});
}

TEST_P(Autodiff, SecondOrderIsRefused) {
  auto x = make<4>(spread(16, -1, 1, 1), Shape{1, 1, 4, 4}, ad()).require_grad();
  auto w = make<4>(spread(4, -1, 1, 2), Shape{1, 1, 2, 2}, ad());
  auto dy = make<4>(spread(9, -1, 1, 3), Shape{1, 1, 3, 3}, ad());
  EXPECT_THROWS(Error, nn::conv2d_weight_backward(x, w, dy, nn::ConvOptions<2>{}), "second-order");
  auto lp = make<3>(spread(6, -2, -0.5, 4), Shape{2, 1, 3}, ad()).require_grad();
  auto tg = Tensor<2, Int>::from_data(TensorData::from(std::vector<std::int64_t>{1}, Shape{1, 1}), ad());
  auto len = Tensor<1, Int>::from_data(TensorData::from(std::vector<std::int64_t>{2}, Shape{1}), ad());
  auto one = Tensor<1, Int>::from_data(TensorData::from(std::vector<std::int64_t>{1}, Shape{1}), ad());
  EXPECT_THROWS(Error, nn::ctc_loss_backward(lp, tg, len, one, make<1>({1.0}, Shape{1}, ad())), "second-order");
}

TEST(AutodiffCoverage, NoDifferentiableOpIsMissing) {
  int native = 0, decomposed = 0;
  std::string missing;
  for (const dispatch::OpInfo& info : dispatch::kOps) {
    switch (dispatch::ad::coverage(static_cast<OpCode>(info.code))) {
      case dispatch::ad::Coverage::Native: ++native; break;
      case dispatch::ad::Coverage::Decomposed: ++decomposed; break;
      case dispatch::ad::Coverage::Missing: missing += std::string(info.name) + " "; break;
      default: break;
    }
  }
  EXPECT_EQ(missing, "") << "differentiable ops without a backward";
  EXPECT_GT(native, 60);
  std::printf("[ coverage ] native %d, decomposed %d\n", native, decomposed);
}

// ---- concurrency (ThreadSanitizer leg: --gtest_filter='*Concurrent*') ----------------------

// `steps` SGD steps of a 6-12-3 MLP on the cpu autodiff device from data seeded by `seed`;
// returns the trained weights' values.
std::vector<double> train_mlp(unsigned seed, int steps) {
  const Device a = Device::cpu().autodiff();
  auto mk = [&](std::size_t r, std::size_t c, double lo, double hi, unsigned s) {
    return Tensor<2>::from_data(TensorData::from(spread(r * c, lo, hi, s), Shape{r, c}), a);
  };
  auto w1 = mk(6, 12, -0.4, 0.4, seed * 10 + 1).require_grad();
  auto w2 = mk(12, 3, -0.4, 0.4, seed * 10 + 2).require_grad();
  const auto x = mk(5, 6, -1, 1, seed * 10 + 3), y = mk(5, 3, -1, 1, seed * 10 + 4);
  for (int i = 0; i < steps; ++i) {
    auto d = activation::sigmoid(activation::relu(x.matmul(w1)).matmul(w2)) - y;
    Gradients g = (d * d).mean().backward();
    w1 = Tensor<2>::from_inner(w1.inner() - *w1.grad(g) * 0.5).require_grad();
    w2 = Tensor<2>::from_inner(w2.inner() - *w2.grad(g) * 0.5).require_grad();
  }
  std::vector<double> out = values(w1);
  for (double v : values(w2)) out.push_back(v);
  return out;
}

TEST(AutodiffConcurrent, IndependentGraphsOnFourThreads) {
  // Four threads each train their own MLP (own tensors, own graphs) at once; each result
  // equals the same training run alone on one thread.
  constexpr int kThreads = 4, kSteps = 60;
  std::vector<std::vector<double>> alone;
  for (int t = 0; t < kThreads; ++t) alone.push_back(train_mlp(unsigned(t), kSteps));
  std::vector<std::vector<double>> together(kThreads);
  std::vector<std::string> errors(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      try {
        together[t] = train_mlp(unsigned(t), kSteps);
      } catch (const std::exception& e) {
        errors[t] = e.what();
      }
    });
  for (std::thread& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ(errors[t], "") << "thread " << t;
    expect_near(together[t], alone[t], 1e-12, "thread " + std::to_string(t));
    if (t > 0) {
      EXPECT_NE(alone[t], alone[0]) << "the runs differ from each other";
    }
  }
}

TEST(AutodiffConcurrent, BackwardOfSharedLeafOnManyThreads) {
  // One leaf shared by graphs built and backwarded on four threads: node ids stay unique,
  // each thread's gradient is its own (d/dx sum(x·k) = k).
  const Device a = Device::cpu().autodiff();
  auto x = Tensor<1>::from_data(TensorData::from(std::vector<double>{1, 2, 3}, Shape{3}), a).require_grad();
  std::vector<std::vector<double>> got(4);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) {
        Gradients g = (x * double(t + 1)).exp().log().sum().backward();
        got[t] = values(*x.grad(g));
      }
    });
  for (std::thread& th : threads) th.join();
  for (int t = 0; t < 4; ++t) expect_near(got[t], {double(t + 1), double(t + 1), double(t + 1)}, 1e-9, "thread " + std::to_string(t));
}

// ---- balanced checkpointing ---------------------------------------------------------------

TEST_P(Autodiff, BalancedCheckpointingDevice) {
  const Device b = dev().autodiff(CheckpointingStrategy::Balanced);
  EXPECT_TRUE(b.is_autodiff());
  EXPECT_EQ(b.checkpointing(), CheckpointingStrategy::Balanced);
  EXPECT_EQ(ad().checkpointing(), CheckpointingStrategy::None);
  EXPECT_EQ(dev().checkpointing(), CheckpointingStrategy::None);
  EXPECT_EQ(b.inner(), dev());
  EXPECT_NE(b, ad());
  EXPECT_EQ(b.settings(), dev().settings());
  EXPECT_NE(b.to_string().find("balanced"), std::string::npos) << b.to_string();
  EXPECT_THROWS(DeviceError, b.autodiff(), "[Device::autodiff]", "autodiff of an autodiff");
  // Results stay on the balanced device; mixing strategies is a device mismatch.
  auto x = make<1>({1, 2}, Shape{2}, b).require_grad();
  EXPECT_EQ(x.exp().device(), b);
  EXPECT_EQ((x * 2.0).device(), b);
  EXPECT_EQ(x.detach().device(), b);
  EXPECT_EQ(Tensor<1>::zeros(Shape{2}, b).device(), b);
  EXPECT_THROWS(DeviceError, x + make<1>({1, 2}, Shape{2}, ad()), "different devices");
  // from_inner goes to the strategy this thread last used; to_device moves it across.
  auto i = (x * 3.0).inner();
  EXPECT_EQ(Tensor<1>::from_inner(i).device(), b);
  auto n = make<1>({1, 2}, Shape{2}, ad());
  (void)(n * 2.0);
  const auto back = Tensor<1>::from_inner(i);
  EXPECT_EQ(back.device(), ad());
  EXPECT_EQ(back.to_device(b).device(), b);
  expect_near(values(back.to_device(b)), {3, 6}, 1e-6, "moved");
}

TEST_P(Autodiff, BalancedCheckpointingGivesEqualGradients) {
  // A graph with chains of memory-bound ops (recomputed under Balanced, some longer than
  // one recipe) between compute-bound ones, backwarded on both strategies.
  auto run = [&](Device d) {
    auto x = make<2>(spread(12, -1, 1, 5), Shape{3, 4}, d).require_grad();
    auto w = make<2>(spread(8, -1, 1, 6), Shape{4, 2}, d).require_grad();
    auto h = x.exp().mul_scalar(0.5).tanh().sin().add_scalar(0.25);
    auto s = activation::sigmoid(h);
    for (int i = 0; i < 10; ++i) s = s.mul_scalar(1.1).tanh();  // longer than one recipe
    auto z = activation::relu(s.matmul(w).add_scalar(5.0)).sqrt().log1p();
    auto loss = (z * z).sum() + (h.recip() * x).sum();
    Gradients g = loss.backward();
    return std::make_pair(grad_of(x, g), grad_of(w, g));
  };
  const auto none = run(ad());
  const auto bal = run(dev().autodiff(CheckpointingStrategy::Balanced));
  ASSERT_FALSE(none.first.empty());
  expect_near(bal.first, none.first, 1e-12, "dx");
  expect_near(bal.second, none.second, 1e-12, "dw");
  // The values themselves, against central differences of the same loss (cpu/mini: f64).
  if (fdt() == DType::F64) {
    auto loss_at = [&](std::vector<double> xv) {
      auto x = make<2>(xv, Shape{3, 4}, dev());
      auto w = make<2>(spread(8, -1, 1, 6), Shape{4, 2}, dev());
      auto h = x.exp().mul_scalar(0.5).tanh().sin().add_scalar(0.25);
      auto s = activation::sigmoid(h);
      for (int i = 0; i < 10; ++i) s = s.mul_scalar(1.1).tanh();
      auto z = activation::relu(s.matmul(w).add_scalar(5.0)).sqrt().log1p();
      return values((z * z).sum() + (h.recip() * x).sum())[0];
    };
    const std::vector<double> xv = spread(12, -1, 1, 5);
    std::vector<double> want(12);
    for (std::size_t k = 0; k < 12; ++k) {
      auto p = xv, m = xv;
      p[k] += 1e-6, m[k] -= 1e-6;
      want[k] = (loss_at(p) - loss_at(m)) / 2e-6;
    }
    expect_near(bal.first, want, 1e-5, "dx vs differences");
  }
}

// RSS of this process in KiB (Linux).
long rss_kib() {
  std::ifstream f("/proc/self/status");
  std::string k;
  long v = 0;
  while (f >> k)
    if (k == "VmRSS:") { f >> v; return v; }
  return 0;
}

TEST_P(Autodiff, TrainingLoopMemoryIsBounded) {
  // 2,000 SGD steps of a 16-32-4 MLP (300 on Vulkan, where lavapipe is slow): graphs are
  // freed by backward and by their tensors.
  const int steps = dev().to_string().starts_with("vulkan") ? 300 : 2000;
  const Device a = ad();
  auto w1 = Tensor<2>::random(Shape{16, 32}, Distribution::uniform(-0.3, 0.3), a).require_grad();
  auto w2 = Tensor<2>::random(Shape{32, 4}, Distribution::uniform(-0.3, 0.3), a).require_grad();
  auto x = Tensor<2>::random(Shape{8, 16}, Distribution::uniform(-1, 1), a);
  auto y = Tensor<2>::random(Shape{8, 4}, Distribution::uniform(-1, 1), a);
  long start = 0;
  double first = 0, last = 0;
  for (int step = 0; step < steps; ++step) {
    auto h = activation::relu(x.matmul(w1));
    auto d = h.matmul(w2) - y;
    auto loss = (d * d).mean();
    if (step == 0) first = values(loss)[0];
    if (step == steps - 1) last = values(loss)[0];
    Gradients g = loss.backward();
    w1 = Tensor<2>::from_inner(w1.inner() - *w1.grad(g) * 0.05).require_grad();
    w2 = Tensor<2>::from_inner(w2.inner() - *w2.grad(g) * 0.05).require_grad();
    if (step == steps / 10) start = rss_kib();
  }
  const long end = rss_kib();
  EXPECT_LT(last, first * 0.5) << "the loss should fall";
#if defined(__SANITIZE_ADDRESS__)
  // ASan holds freed memory in its quarantine (256 MiB by default) instead of reusing it,
  // so RSS grows until the quarantine is full; LeakSanitizer checks for leaks at exit.
  constexpr long kQuarantineKiB = 256 * 1024;
#else
  constexpr long kQuarantineKiB = 0;
#endif
  EXPECT_LT(end - start, 4096 + kQuarantineKiB) << "RSS grew from " << start << " KiB to " << end << " KiB";
}

}  // namespace
