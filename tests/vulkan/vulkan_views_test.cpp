// The Vulkan module ops (conv family, pools, interpolate, norms, embedding, attention,
// linear, fold/unfold, deform conv) on inputs that are views: a batch or channel slice
// (contiguous, from a non-zero offset), a transposed pair of dims, a step-sliced last dim.
// Each result is compared with the CPU backend's result of the same op on dense copies of
// the same values, forward and through autodiff; and the shader-word limits (issue 30).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <tensor/loss.hpp>
#include <tensor/nn.hpp>
#include <tensor/optim.hpp>
#include <tensor/tensor.hpp>

#include "tests/vulkan/vk_test_util.hpp"

namespace {

using namespace tensor;
using namespace tensor::nn;
using I = std::int64_t;
using vk_test::VulkanTest;

class VulkanViews : public VulkanTest {};

Device vk() { return Device(vk_test::kVk); }

// Values in [-1, 1) from a fixed LCG.
std::vector<double> rnd(std::size_t n, std::uint32_t seed) {
  std::vector<double> v(n);
  std::uint32_t s = seed * 2654435761u + 12345u;
  for (auto& x : v) {
    s = s * 1664525u + 1013904223u;
    x = static_cast<double>(s >> 8) / static_cast<double>(1u << 23) - 1.0;
  }
  return v;
}

// How an operand is stored. Dense: its own buffer. Batch / Channel: dims 0 / 1 sliced from 2
// of a larger tensor (contiguous for Batch and for Channel of a batch of one, from a non-zero
// offset). Transposed: the last two dims stored swapped. Stepped: every other element of a
// longer last dim, from element 1.
enum class Lay { Dense, Batch, Channel, Transposed, Stepped };
const char* lay_name(Lay l) {
  switch (l) {
    case Lay::Dense: return "dense";
    case Lay::Batch: return "batch slice";
    case Lay::Channel: return "channel slice";
    case Lay::Transposed: return "transposed";
    case Lay::Stepped: return "step slice";
  }
  return "?";
}
const Lay kViews[] = {Lay::Batch, Lay::Channel, Lay::Transposed, Lay::Stepped};

// `v` (row-major over `s`) as a tensor of dtype `dt` on `dev`, stored as `lay` says; the
// elements outside the view hold 99.
template <std::size_t D, class K = Float>
Tensor<D, K> laid(const std::vector<double>& v, const Shape& s, Lay lay, Device dev, DType dt = DType::F32) {
  if (D < 2 && (lay == Lay::Channel || lay == Lay::Transposed)) lay = Lay::Batch;
  Shape b = s;
  switch (lay) {
    case Lay::Dense: break;
    case Lay::Batch: b[0] += 2; break;
    case Lay::Channel: b[1] += 2; break;
    case Lay::Transposed: std::swap(b[D - 2], b[D - 1]); break;
    case Lay::Stepped: b[D - 1] = 2 * s[D - 1] + 1; break;
  }
  std::vector<double> base(b.num_elements(), 99.0);
  std::array<std::size_t, D> at{};
  for (std::size_t flat = 0; flat < v.size(); ++flat) {
    std::size_t r = flat;
    for (std::size_t d = D; d-- > 0;) {
      at[d] = r % s[d];
      r /= s[d];
    }
    switch (lay) {
      case Lay::Dense: break;
      case Lay::Batch: at[0] += 2; break;
      case Lay::Channel: at[1] += 2; break;
      case Lay::Transposed: std::swap(at[D - 2], at[D - 1]); break;
      case Lay::Stepped: at[D - 1] = 2 * at[D - 1] + 1; break;
    }
    std::size_t bi = 0;
    for (std::size_t d = 0; d < D; ++d) bi = bi * b[d] + at[d];
    base[bi] = v[flat];
  }
  Tensor<D, K> t = Tensor<D, K>::from_data(TensorData::from(base, b).convert(dt), dev);
  switch (lay) {
    case Lay::Dense: return t;
    case Lay::Batch: return t.slice_dim(0, Slice::from(2));
    case Lay::Channel: return t.slice_dim(1, Slice::from(2));
    case Lay::Transposed: return t.swap_dims(D - 2, D - 1);
    case Lay::Stepped: return t.slice_dim(D - 1, Slice::range(1, static_cast<I>(2 * s[D - 1] + 1), 2));
  }
  return t;
}

// One operand's values and shape; on(lay, dev) gives it stored as `lay` on `dev`.
template <std::size_t D, class K = Float>
struct Arg {
  std::vector<double> v;
  Shape s;
  DType dt = DType::F32;
  Tensor<D, K> on(Lay lay, Device dev) const { return laid<D, K>(v, s, lay, dev, dt); }
  Tensor<D, K> cpu() const { return on(Lay::Dense, Device::cpu()); }
};
template <std::size_t D>
Arg<D> arg(const Shape& s, std::uint32_t seed) { return {rnd(s.num_elements(), seed), s}; }

template <std::size_t D, class K>
std::vector<double> values(const Tensor<D, K>& t) { return t.into_data().convert(DType::F64).template to_vec<double>(); }

// vulkan's result (`got`) against the cpu's (`want`): shape and values within `tol`.
template <std::size_t D, class K>
void expect_same(const Tensor<D, K>& want, const Tensor<D, K>& got, const std::string& what, double tol = 1e-4) {
  ASSERT_EQ(want.shape().to_string(), got.shape().to_string()) << what;
  const auto w = values(want), g = values(got);
  std::size_t bad = 0;
  for (std::size_t i = 0; i < w.size() && bad < 4; ++i) {
    const bool ok = std::isinf(w[i]) ? g[i] == w[i] : std::fabs(g[i] - w[i]) <= tol * (1.0 + std::fabs(w[i]));
    if (!ok) {
      ++bad;
      ADD_FAILURE() << what << ": element " << i << " vulkan " << g[i] << " cpu " << w[i];
    }
  }
}

// ---- conv family ------------------------------------------------------------------------

TEST_F(VulkanViews, ConvForwardReadsViewsFromTheirOffset) {
  ConvOptions<2> o2;
  o2.stride = {2, 1};
  o2.padding = {1, 2};
  o2.dilation = {1, 2};
  o2.groups = 2;
  const auto x2 = arg<4>({2, 4, 6, 7}, 1), w2 = arg<4>({6, 2, 3, 2}, 2);
  const auto b = arg<1>({6}, 3);
  const auto x1 = arg<3>({2, 3, 9}, 4), w1 = arg<3>({4, 3, 3}, 5);
  const auto x3 = arg<5>({2, 2, 4, 3, 5}, 6), w3 = arg<5>({3, 2, 2, 2, 3}, 7);
  ConvOptions<1> o1;
  o1.padding = {1};
  ConvOptions<3> o3;
  o3.padding = {1, 0, 1};
  const auto want2 = conv2d(x2.cpu(), w2.cpu(), b.cpu(), o2);
  const auto want1 = conv1d(x1.cpu(), w1.cpu(), std::nullopt, o1);
  const auto want3 = conv3d(x3.cpu(), w3.cpu(), std::nullopt, o3);
  for (Lay l : kViews) {
    const std::string at = lay_name(l);
    expect_same(want2, conv2d(x2.on(l, vk()), w2.on(l, vk()), b.on(l, vk()), o2), "conv2d, " + at);
    expect_same(want2, conv2d(x2.on(l, vk()), w2.cpu().to_device(vk()), b.cpu().to_device(vk()), o2), "conv2d x only, " + at);
    expect_same(want1, conv1d(x1.on(l, vk()), w1.on(l, vk()), std::nullopt, o1), "conv1d, " + at);
    expect_same(want3, conv3d(x3.on(l, vk()), w3.on(l, vk()), std::nullopt, o3), "conv3d, " + at);
  }
  // The batch of the issue: conv2d(x[2..4], w) is not conv2d(x[0..2], w).
  const auto big = arg<4>({4, 4, 6, 7}, 8);
  const auto xs = big.cpu().slice_dim(0, Slice::range(2, 4));
  expect_same(conv2d(Tensor<4>::from_data(xs.into_data(), Device::cpu()), w2.cpu(), b.cpu(), o2),
              conv2d(big.cpu().to_device(vk()).slice_dim(0, Slice::range(2, 4)), w2.cpu().to_device(vk()),
                     b.cpu().to_device(vk()), o2),
              "conv2d of x[2..4]");
}

TEST_F(VulkanViews, ConvTransposeReadsViewsFromTheirOffset) {
  ConvTransposeOptions<2> t2;
  t2.stride = {2, 1};
  t2.padding = {1, 0};
  t2.padding_out = {1, 0};
  t2.groups = 2;
  const auto x2 = arg<4>({2, 4, 3, 5}, 11), w2 = arg<4>({4, 3, 3, 2}, 12);
  const auto b = arg<1>({6}, 13);
  const auto x1 = arg<3>({2, 3, 5}, 14), w1 = arg<3>({3, 2, 3}, 15);
  const auto x3 = arg<5>({2, 2, 2, 3, 2}, 16), w3 = arg<5>({2, 3, 2, 2, 2}, 17);
  ConvTransposeOptions<1> t1;
  t1.stride = {2};
  ConvTransposeOptions<3> t3;
  t3.stride = {1, 2, 1};
  const auto want2 = conv_transpose2d(x2.cpu(), w2.cpu(), b.cpu(), t2);
  const auto want1 = conv_transpose1d(x1.cpu(), w1.cpu(), std::nullopt, t1);
  const auto want3 = conv_transpose3d(x3.cpu(), w3.cpu(), std::nullopt, t3);
  for (Lay l : kViews) {
    const std::string at = lay_name(l);
    expect_same(want2, conv_transpose2d(x2.on(l, vk()), w2.on(l, vk()), b.on(l, vk()), t2), "conv_transpose2d, " + at);
    expect_same(want1, conv_transpose1d(x1.on(l, vk()), w1.on(l, vk()), std::nullopt, t1), "conv_transpose1d, " + at);
    expect_same(want3, conv_transpose3d(x3.on(l, vk()), w3.on(l, vk()), std::nullopt, t3), "conv_transpose3d, " + at);
  }
}

TEST_F(VulkanViews, ConvGradientsReadViewsFromTheirOffset) {
  ConvOptions<2> o;
  o.stride = {2, 1};
  o.padding = {1, 1};
  o.groups = 2;
  const auto x = arg<4>({2, 4, 6, 5}, 21), w = arg<4>({6, 2, 3, 3}, 22), dy = arg<4>({2, 6, 3, 5}, 23);
  ConvTransposeOptions<2> t;
  t.stride = {2, 1};
  t.padding = {1, 1};
  t.padding_out = {1, 0};
  t.groups = 2;
  // The transpose of x2 [2, 6, 3, 5] by w [6, 2, 3, 3] is [2, 4, 6, 5]: dy of that shape.
  const auto tx = arg<4>({2, 6, 3, 5}, 24), tdy = arg<4>({2, 4, 6, 5}, 25);
  const auto wx = conv2d_x_backward(x.cpu(), w.cpu(), dy.cpu(), o);
  const auto ww = conv2d_weight_backward(x.cpu(), w.cpu(), dy.cpu(), o);
  const auto wb = conv2d_bias_backward(dy.cpu());
  const auto twx = conv_transpose_x_backward<4>(tx.cpu(), w.cpu(), tdy.cpu(), t);
  const auto tww = conv_transpose_weight_backward<4>(tx.cpu(), w.cpu(), tdy.cpu(), t);
  const auto x1 = arg<3>({3, 2, 8}, 26), w1 = arg<3>({4, 2, 3}, 27), dy1 = arg<3>({3, 4, 6}, 28);
  const auto wx1 = conv_x_backward<3>(x1.cpu(), w1.cpu(), dy1.cpu(), {});
  const auto ww1 = conv_weight_backward<3>(x1.cpu(), w1.cpu(), dy1.cpu(), {});
  for (Lay l : kViews) {
    const std::string at = lay_name(l);
    const auto vx = x.on(l, vk()), vw = w.on(l, vk()), vdy = dy.on(l, vk());
    expect_same(wx, conv2d_x_backward(vx, vw, vdy, o), "conv_x_backward, " + at);
    expect_same(ww, conv2d_weight_backward(vx, vw, vdy, o), "conv_weight_backward, " + at);
    expect_same(wb, conv2d_bias_backward(vdy), "conv_bias_backward, " + at);
    expect_same(twx, conv_transpose_x_backward<4>(tx.on(l, vk()), vw, tdy.on(l, vk()), t), "conv_transpose_x_backward, " + at);
    expect_same(tww, conv_transpose_weight_backward<4>(tx.on(l, vk()), vw, tdy.on(l, vk()), t),
                "conv_transpose_weight_backward, " + at);
    expect_same(wx1, conv_x_backward<3>(x1.on(l, vk()), w1.on(l, vk()), dy1.on(l, vk()), {}), "conv1d x gradient, " + at);
    expect_same(ww1, conv_weight_backward<3>(x1.on(l, vk()), w1.on(l, vk()), dy1.on(l, vk()), {}),
                "conv1d weight gradient, " + at);
  }
}

// ---- pools, interpolate ------------------------------------------------------------------

TEST_F(VulkanViews, PoolsAndInterpolateReadViews) {
  const auto x = arg<4>({2, 3, 7, 6}, 31);
  const auto x1 = arg<3>({2, 3, 9}, 32);
  const auto x3 = arg<5>({2, 2, 5, 4, 6}, 33);
  MaxPoolOptions<2> mp{{3, 2}, {2, 1}, {1, 0}, {1, 2}, false};
  AvgPoolOptions<2> ap{{3, 2}, {2, 2}, {1, 1}, false, true};
  MaxPoolOptions<1> mp1{{3}, {2}, {1}, {1}, true};
  AvgPoolOptions<1> ap1{{2}, {1}, {1}, true, false};
  const auto [wm, wi] = max_pool2d_with_indices(x.cpu(), mp);
  const auto dym = arg<4>(wm.shape(), 34);
  const auto wa = avg_pool2d(x.cpu(), ap);
  const auto dya = arg<4>(wa.shape(), 35);
  const auto ad = arg<4>({2, 3, 4, 3}, 36);
  InterpolateOptions modes[4];
  for (int m = 0; m < 4; ++m) modes[m].mode = static_cast<InterpolateMode>(m);
  modes[2].align_corners = true;
  const auto dyi = arg<4>({2, 3, 9, 4}, 37);
  const auto id = Arg<4, Int>{values(wi), wi.shape(), DType::I32};
  for (Lay l : kViews) {
    const std::string at = lay_name(l);
    const auto vx = x.on(l, vk());
    expect_same(max_pool2d(x.cpu(), mp), max_pool2d(vx, mp), "max_pool2d, " + at);
    const auto [gm, gi] = max_pool2d_with_indices(vx, mp);
    expect_same(wm, gm, "max_pool2d_with_indices values, " + at);
    expect_same(wi, gi, "max_pool2d_with_indices indices, " + at, 0.0);
    expect_same(max_pool2d_with_indices_backward(x.cpu(), dym.cpu(), wi, mp),
                max_pool2d_with_indices_backward(vx, dym.on(l, vk()), id.on(l, vk()), mp), "max_pool backward, " + at);
    expect_same(wa, avg_pool2d(vx, ap), "avg_pool2d, " + at);
    expect_same(avg_pool2d_backward(x.cpu(), dya.cpu(), ap), avg_pool2d_backward(vx, dya.on(l, vk()), ap),
                "avg_pool backward, " + at);
    expect_same(max_pool1d(x1.cpu(), mp1), max_pool1d(x1.on(l, vk()), mp1), "max_pool1d, " + at);
    expect_same(avg_pool1d(x1.cpu(), ap1), avg_pool1d(x1.on(l, vk()), ap1), "avg_pool1d, " + at);
    expect_same(adaptive_avg_pool2d(x.cpu(), {4, 3}), adaptive_avg_pool2d(vx, {4, 3}), "adaptive_avg_pool2d, " + at);
    expect_same(adaptive_avg_pool2d_backward(x.cpu(), ad.cpu()), adaptive_avg_pool2d_backward(vx, ad.on(l, vk())),
                "adaptive backward, " + at);
    expect_same(adaptive_avg_pool1d(x1.cpu(), 4), adaptive_avg_pool1d(x1.on(l, vk()), 4), "adaptive_avg_pool1d, " + at);
    expect_same(adaptive_avg_pool3d(x3.cpu(), {2, 3, 4}), adaptive_avg_pool3d(x3.on(l, vk()), {2, 3, 4}),
                "adaptive_avg_pool3d, " + at);
    for (int m = 0; m < 4; ++m) {
      const std::string mode = at + ", mode " + std::to_string(m);
      expect_same(interpolate(x.cpu(), {9, 4}, modes[m]), interpolate(vx, {9, 4}, modes[m]), "interpolate, " + mode);
      expect_same(interpolate_backward(x.cpu(), dyi.cpu(), {9, 4}, modes[m]),
                  interpolate_backward(vx, dyi.on(l, vk()), {9, 4}, modes[m]), "interpolate_backward, " + mode);
    }
  }
}

// ---- norms, embedding, attention, linear, fold, deform ---------------------------------

TEST_F(VulkanViews, NormsEmbeddingAttentionLinearReadViews) {
  const auto x = arg<3>({2, 3, 5}, 41);
  const auto g = arg<1>({5}, 42), be = arg<1>({5}, 43);
  const auto xb = arg<4>({2, 3, 4, 2}, 44);
  const auto c = arg<1>({3}, 45);
  auto var = arg<1>({3}, 46);
  for (double& v : var.v) v = std::fabs(v) + 0.5;
  const auto ew = arg<2>({6, 4}, 47);
  const Arg<2, Int> ei{{5, 0, 2, 2, 1, 3}, {2, 3}, DType::I32};
  const auto edy = arg<3>({2, 3, 4}, 48);
  const auto q = arg<4>({2, 2, 3, 4}, 49), k = arg<4>({2, 2, 5, 4}, 50), v = arg<4>({2, 2, 5, 3}, 51);
  const auto ab = arg<4>({2, 2, 3, 5}, 52);
  Arg<4, Bool> mask{std::vector<double>(2 * 3 * 5, 0.0), {2, 1, 3, 5}, DType::Bool};
  for (std::size_t i = 0; i < mask.v.size(); i += 3) mask.v[i] = 1.0;
  const auto lx = arg<3>({2, 3, 4}, 53);
  const auto lw = arg<2>({4, 5}, 54);
  const auto lb = arg<1>({5}, 55);
  const auto ma = arg<3>({2, 3, 4}, 56), mb = arg<3>({2, 4, 3}, 57);
  for (Lay l : kViews) {
    const std::string at = lay_name(l);
    expect_same(layer_norm(x.cpu(), g.cpu(), be.cpu()), layer_norm(x.on(l, vk()), g.on(l, vk()), be.on(l, vk())),
                "layer_norm, " + at);
    expect_same(batch_norm(xb.cpu(), c.cpu(), c.cpu(), c.cpu(), var.cpu()),
                batch_norm(xb.on(l, vk()), c.on(l, vk()), c.on(l, vk()), c.on(l, vk()), var.on(l, vk())), "batch_norm, " + at);
    expect_same(embedding(ew.cpu(), ei.cpu()), embedding(ew.on(l, vk()), ei.on(l, vk())), "embedding, " + at);
    expect_same(embedding_backward(ew.cpu(), edy.cpu(), ei.cpu()), embedding_backward(ew.on(l, vk()), edy.on(l, vk()), ei.on(l, vk())),
                "embedding_backward, " + at);
    expect_same(attention(q.cpu(), k.cpu(), v.cpu(), mask.cpu(), ab.cpu()),
                attention(q.on(l, vk()), k.on(l, vk()), v.on(l, vk()), mask.on(l, vk()), ab.on(l, vk())), "attention, " + at);
    expect_same(attention(q.cpu(), k.cpu(), v.cpu(), std::nullopt, ab.cpu()),
                attention(q.on(l, vk()), k.on(l, vk()), v.on(l, vk()), std::nullopt, ab.on(l, vk())), "attention + bias, " + at);
    expect_same(linear(lx.cpu(), lw.cpu(), lb.cpu()), linear(lx.on(l, vk()), lw.on(l, vk()), lb.on(l, vk())), "linear, " + at);
    expect_same(ma.cpu().matmul(mb.cpu()), ma.on(l, vk()).matmul(mb.on(l, vk())), "matmul, " + at);
  }
}

TEST_F(VulkanViews, FoldUnfoldDeformReadViews) {
  const auto x = arg<4>({2, 2, 5, 4}, 61);
  UnfoldOptions u;
  u.stride = {2, 1};
  u.padding = {1, 0};
  const auto cols = unfold4d(x.cpu(), {3, 2}, u);
  const auto c = arg<3>(cols.shape(), 62);
  const auto w = arg<4>({3, 2, 2, 2}, 63), off = arg<4>({2, 8, 4, 3}, 64), m = arg<4>({2, 4, 4, 3}, 65);
  const auto b = arg<1>({3}, 66);
  for (Lay l : kViews) {
    const std::string at = lay_name(l);
    expect_same(cols, unfold4d(x.on(l, vk()), {3, 2}, u), "unfold4d, " + at);
    expect_same(fold4d(c.cpu(), {5, 4}, {3, 2}, u), fold4d(c.on(l, vk()), {5, 4}, {3, 2}, u), "fold4d, " + at);
    expect_same(deform_conv2d(x.cpu(), off.cpu(), w.cpu(), m.cpu(), b.cpu()),
                deform_conv2d(x.on(l, vk()), off.on(l, vk()), w.on(l, vk()), m.on(l, vk()), b.on(l, vk())),
                "deform_conv2d, " + at);
  }
}

// ---- autodiff through a sliced batch: the training loop of the issue -------------------

// conv2d -> relu -> linear -> sum of squares on x[2..4] of a larger batch: every gradient
// (the parameters' and the base input's) as on the cpu with a dense copy of the batch.
TEST_F(VulkanViews, GradientsThroughASlicedBatchMatchTheCpu) {
  const auto xv = rnd(5 * 2 * 5 * 5, 71), wv = rnd(4 * 2 * 3 * 3, 72), bv = rnd(4, 73), lv = rnd(4 * 9 * 3, 74);
  struct Grads {
    std::vector<double> x, w, b, l, loss;
  };
  auto run = [&](Device d, bool sliced) {
    const Device ad = d.autodiff();
    auto up = [&](const std::vector<double>& v, const Shape& s) { return TensorData::from(v, s).convert(DType::F32); };
    auto base = Tensor<4>::from_data(up(xv, Shape{5, 2, 5, 5}), ad).require_grad();
    auto w = Tensor<4>::from_data(up(wv, Shape{4, 2, 3, 3}), ad).require_grad();
    auto b = Tensor<1>::from_data(up(bv, Shape{4}), ad).require_grad();
    auto lw = Tensor<2>::from_data(up(lv, Shape{36, 3}), ad).require_grad();
    // The cpu reads a dense copy: the batch's values uploaded as their own tensor.
    const std::vector<double> batch(xv.begin() + 100, xv.begin() + 200);
    Tensor<4> xb = sliced ? base.slice_dim(0, Slice::range(2, 4))
                          : Tensor<4>::from_data(up(batch, Shape{2, 2, 5, 5}), ad).require_grad();
    ConvOptions<2> o;
    o.stride = {2, 2};
    o.padding = {1, 1};
    auto h = conv2d(xb, w, b, o).reshape(std::array<I, 2>{2, 36});
    auto y = linear(h, lw);
    auto loss = y.mul(y).sum();
    auto g = loss.backward();
    Grads r;
    if (sliced) {
      // The base's gradient: the batch's rows, zero outside the slice.
      const auto gb = values(*base.grad(g));
      for (std::size_t i = 0; i < gb.size(); ++i)
        if (i < 100 || i >= 200) {
          EXPECT_EQ(gb[i], 0.0) << "base gradient element " << i;
        }
      r.x = std::vector<double>(gb.begin() + 100, gb.begin() + 200);
    } else {
      r.x = values(*xb.grad(g));
    }
    r.w = values(*w.grad(g));
    r.b = values(*b.grad(g));
    r.l = values(*lw.grad(g));
    r.loss = values(loss);
    return r;
  };
  const Grads want = run(Device::cpu(), false), got = run(vk(), true);
  auto near = [](const std::vector<double>& w, const std::vector<double>& g, const char* what) {
    ASSERT_EQ(w.size(), g.size()) << what;
    for (std::size_t i = 0; i < w.size(); ++i) EXPECT_NEAR(g[i], w[i], 1e-3 * (1.0 + std::fabs(w[i]))) << what << " " << i;
  };
  near(want.loss, got.loss, "loss");
  near(want.x, got.x, "x gradient");
  near(want.w, got.w, "conv weight gradient");
  near(want.b, got.b, "conv bias gradient");
  near(want.l, got.l, "linear weight gradient");
}

// The symptom: a conv + linear classifier of four classes trained with Adam on a batch
// sliced from a larger tensor. Vulkan's conv read the first rows of the base tensor instead
// (the model stayed at ln 4); it must train as on the cpu, on a dense copy.
TEST_F(VulkanViews, ConvLinearModelTrainsWithAdamOnASlicedBatch) {
  constexpr std::size_t kN = 8, kSteps = 25;
  std::vector<double> images(12 * 16, 0.0), targets(kN * 4, 0.0);
  for (std::size_t n = 0; n < kN; ++n) {
    const std::size_t cls = n % 4;
    targets[n * 4 + cls] = 1.0;
    // Class c lights quadrant c of a 4 x 4 image (plus noise); rows 0..3 hold other images.
    const auto noise = rnd(16, static_cast<std::uint32_t>(100 + n));
    for (std::size_t i = 0; i < 16; ++i) {
      const std::size_t r = i / 4, c = i % 4, quad = (r / 2) * 2 + c / 2;
      images[(4 + n) * 16 + i] = (quad == cls ? 1.0 : 0.0) + 0.1 * noise[i];
    }
  }
  for (std::size_t i = 0; i < 4 * 16; ++i) images[i] = 5.0 * rnd(64, 120)[i];
  auto up = [](const std::vector<double>& v, const Shape& s) { return TensorData::from(v, s).convert(DType::F32); };
  auto train = [&](Device d, bool sliced) {
    const Device ad = d.autodiff();
    const std::vector<double> batch(images.begin() + 4 * 16, images.end());
    Tensor<4> cw = Tensor<4>::from_data(up(rnd(4 * 9, 121), {4, 1, 3, 3}), d);
    Tensor<1> cb = Tensor<1>::from_data(up(std::vector<double>(4, 0.0), {4}), d);
    Tensor<2> lw = Tensor<2>::from_data(up(rnd(64 * 4, 122), {64, 4}), d).mul_scalar(0.25);
    Tensor<1> lb = Tensor<1>::from_data(up(std::vector<double>(4, 0.0), {4}), d);
    optim::Adam opt;
    std::vector<double> losses;
    for (std::size_t step = 0; step < kSteps; ++step) {
      auto lift4 = [&](const Tensor<4>& t) { return Tensor<4>::from_data(t.into_data(), ad).require_grad(); };
      auto lift2 = [&](const Tensor<2>& t) { return Tensor<2>::from_data(t.into_data(), ad).require_grad(); };
      auto lift1 = [&](const Tensor<1>& t) { return Tensor<1>::from_data(t.into_data(), ad).require_grad(); };
      const Tensor<4> w = lift4(cw);
      const Tensor<2> lwa = lift2(lw);
      const Tensor<1> b = lift1(cb), lba = lift1(lb);
      const Tensor<4> x = sliced ? Tensor<4>::from_data(up(images, {12, 1, 4, 4}), ad).slice_dim(0, Slice::range(4, 12))
                                 : Tensor<4>::from_data(up(batch, {kN, 1, 4, 4}), ad);
      ConvOptions<2> o;
      o.padding = {1, 1};
      auto h = conv2d(x, w, b, o).reshape(std::array<I, 2>{static_cast<I>(kN), 64});
      auto logits = linear(h, lwa, lba);
      auto loss = loss::cross_entropy_with_logits(logits, Tensor<2>::from_data(up(targets, {kN, 4}), ad));
      auto g = loss.backward();
      losses.push_back(values(loss)[0]);
      cw = opt.step(0.05, "conv.weight", cw, *w.grad(g));
      cb = opt.step(0.05, "conv.bias", cb, *b.grad(g));
      lw = opt.step(0.05, "fc.weight", lw, *lwa.grad(g));
      lb = opt.step(0.05, "fc.bias", lb, *lba.grad(g));
    }
    return losses;
  };
  const auto want = train(Device::cpu(), false), got = train(vk(), true);
  ASSERT_EQ(want.size(), got.size());
  EXPECT_LT(want.back(), 0.5 * std::log(4.0)) << "the cpu run does not train: the test's model is wrong";
  for (std::size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 2e-2 * (1.0 + want[i])) << "step " << i;
}

// ---- options beyond the shaders' 32-bit words --------------------------------------------

// A typed error naming the user's op, before anything runs; the cpu computes the values.
template <class F>
void expect_refused(F&& f, const char* op) {
  try {
    (void)f().into_data();
    ADD_FAILURE() << "vulkan computed " << op << " with options beyond its 32-bit shader words";
  } catch (const ExecutionError& e) {
    EXPECT_NE(std::string(e.what()).find(std::string("[") + op + "]"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("expected"), std::string::npos) << e.what();
  }
}

TEST_F(VulkanViews, ConvOptionsBeyond32BitsAreRefused) {
  const I big = I{1} << 32;
  const auto x = arg<4>({1, 1, 5, 5}, 81), w = arg<4>({2, 1, 3, 3}, 82);
  const auto b = arg<1>({2}, 83);
  // Windows wholly in the padding: the output is the bias (the cpu's value).
  ConvOptions<2> o;
  o.padding = {big, 0};
  o.stride = {2 * big, 1};
  const auto want = conv2d(x.cpu(), w.cpu(), b.cpu(), o);
  ASSERT_EQ(want.shape().to_string(), "[1, 2, 2, 3]");
  const auto wv = values(want);
  for (std::size_t i = 0; i < wv.size(); ++i) EXPECT_EQ(wv[i], static_cast<float>(b.v[i / 6]));
  expect_refused([&] { return conv2d(x.on(Lay::Dense, vk()), w.on(Lay::Dense, vk()), b.on(Lay::Dense, vk()), o); }, "conv2d");
  ConvOptions<1> d1;
  d1.dilation = {big + 1};
  d1.padding = {big};
  d1.stride = {4 * big};
  const auto x1 = arg<3>({1, 1, 5}, 84), w1 = arg<3>({1, 1, 2}, 85);
  (void)values(conv1d(x1.cpu(), w1.cpu(), std::nullopt, d1));
  expect_refused([&] { return conv1d(x1.on(Lay::Dense, vk()), w1.on(Lay::Dense, vk()), std::nullopt, d1); }, "conv1d");
  ConvTransposeOptions<1> t1;
  t1.stride = {big};
  const auto tx = arg<3>({1, 1, 1}, 86);
  (void)values(conv_transpose1d(tx.cpu(), w1.cpu(), std::nullopt, t1));
  expect_refused([&] { return conv_transpose1d(tx.on(Lay::Dense, vk()), w1.on(Lay::Dense, vk()), std::nullopt, t1); },
                 "conv_transpose1d");
  // unfold4d runs conv on the device: the error names unfold4d.
  UnfoldOptions u;
  u.stride = {big, 1};
  (void)values(unfold4d(x.cpu(), {1, 2}, u));
  expect_refused([&] { return unfold4d(x.on(Lay::Dense, vk()), {1, 2}, u); }, "unfold4d");
}

TEST_F(VulkanViews, PoolOptionsBeyond32BitsAreRefused) {
  const I big = I{1} << 32;
  const auto x = arg<3>({1, 1, 5}, 91);
  // One window covering the input from far in the padding: the mean of the five values.
  AvgPoolOptions<1> a{{2 * big}, {2 * big}, {big}, false, false};
  const auto want = values(avg_pool1d(x.cpu(), a));
  double mean = 0;
  for (double v : x.v) mean += v / 5.0;
  ASSERT_EQ(want.size(), 1u);
  EXPECT_NEAR(want[0], mean, 1e-6);
  expect_refused([&] { return avg_pool1d(x.on(Lay::Dense, vk()), a); }, "avg_pool1d");
  MaxPoolOptions<1> m{{2}, {2 * big}, {big / 2}, {big}, false};
  (void)values(max_pool1d(x.cpu(), m));
  expect_refused([&] { return max_pool1d(x.on(Lay::Dense, vk()), m); }, "max_pool1d");
  // Sizes whose window bounds o * in overflow an int: refused rather than wrong.
  const auto wide = arg<3>({1, 1, 70000}, 92);
  expect_refused([&] { return adaptive_avg_pool1d(wide.on(Lay::Dense, vk()), 70000); }, "adaptive_avg_pool1d");
  const auto row = arg<4>({1, 1, 1, 50000}, 93);
  expect_refused([&] { return interpolate(row.on(Lay::Dense, vk()), {1, 50000}); }, "interpolate");
  // Sizes that fit still run.
  expect_same(adaptive_avg_pool1d(x.cpu(), 3), adaptive_avg_pool1d(x.on(Lay::Dense, vk()), 3), "adaptive_avg_pool1d");
}

}  // namespace
