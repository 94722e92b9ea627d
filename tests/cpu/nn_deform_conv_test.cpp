// deform_conv2d against a direct loop reference written from module-ops.md §2.3, all five
// gradients against central differences (f64), and zero offsets = plain conv2d.
#include <cmath>
#include <vector>

#include "backends/cpu/nn/deform_conv.hpp"
#include "nn_test_util.hpp"

namespace tensor::cpu::nn::test {
namespace {

using I = std::int64_t;

struct DCase {
  std::size_t n = 2, cin = 4, cout = 6, H = 5, W = 6, kh = 3, kw = 2, wg = 1, og = 1;
  I s[2] = {1, 1}, p[2] = {0, 0}, d[2] = {1, 1};
  bool mask = false, bias = false;
  std::size_t ho() const { return static_cast<std::size_t>((static_cast<I>(H) + 2 * p[0] - d[0] * (static_cast<I>(kh) - 1) - 1) / s[0] + 1); }
  std::size_t wo() const { return static_cast<std::size_t>((static_cast<I>(W) + 2 * p[1] - d[1] * (static_cast<I>(kw) - 1) - 1) / s[1] + 1); }
  std::size_t taps() const { return kh * kw; }
};

double sample(const std::vector<double>& x, std::size_t plane, const DCase& c, double ph, double pw) {
  if (ph <= -1 || ph >= static_cast<double>(c.H) || pw <= -1 || pw >= static_cast<double>(c.W)) return 0.0;
  const I h0 = static_cast<I>(std::floor(ph)), w0 = static_cast<I>(std::floor(pw));
  double v = 0;
  for (I a = 0; a < 2; ++a)
    for (I b = 0; b < 2; ++b) {
      const I h = h0 + a, w = w0 + b;
      if (h < 0 || w < 0 || h >= static_cast<I>(c.H) || w >= static_cast<I>(c.W)) continue;
      const double wt = (a ? ph - static_cast<double>(h0) : 1 - (ph - static_cast<double>(h0))) *
                        (b ? pw - static_cast<double>(w0) : 1 - (pw - static_cast<double>(w0)));
      v += wt * x[(plane * c.H + static_cast<std::size_t>(h)) * c.W + static_cast<std::size_t>(w)];
    }
  return v;
}

std::vector<double> ref(const DCase& c, const std::vector<double>& x, const std::vector<double>& off,
                        const std::vector<double>& w, const std::vector<double>& m, const std::vector<double>& b) {
  const std::size_t Ho = c.ho(), Wo = c.wo(), K = c.taps(), cgi = c.cin / c.wg, cgo = c.cout / c.wg;
  std::vector<double> y;
  for (std::size_t n = 0; n < c.n; ++n)
    for (std::size_t o = 0; o < c.cout; ++o)
      for (std::size_t ho = 0; ho < Ho; ++ho)
        for (std::size_t wo = 0; wo < Wo; ++wo) {
          double acc = c.bias ? b[o] : 0.0;
          const std::size_t grp = o / cgo;
          for (std::size_t ci = 0; ci < cgi; ++ci) {
            const std::size_t ch = grp * cgi + ci, og = ch / (c.cin / c.og);
            for (std::size_t i = 0; i < c.kh; ++i)
              for (std::size_t j = 0; j < c.kw; ++j) {
                const std::size_t k = i * c.kw + j;
                const double dh = off[((n * 2 * c.og * K + og * 2 * K + 2 * k) * Ho + ho) * Wo + wo];
                const double dw = off[((n * 2 * c.og * K + og * 2 * K + 2 * k + 1) * Ho + ho) * Wo + wo];
                const double ph = static_cast<double>(static_cast<I>(ho) * c.s[0] - c.p[0] + static_cast<I>(i) * c.d[0]) + dh;
                const double pw = static_cast<double>(static_cast<I>(wo) * c.s[1] - c.p[1] + static_cast<I>(j) * c.d[1]) + dw;
                double v = sample(x, n * c.cin + ch, c, ph, pw);
                if (c.mask) v *= m[((n * c.og * K + og * K + k) * Ho + ho) * Wo + wo];
                acc += w[((o * cgi + ci) * c.kh + i) * c.kw + j] * v;
              }
          }
          y.push_back(acc);
        }
  return y;
}

DeformGeom geom(const DCase& c) {
  const Shape x{c.n, c.cin, c.H, c.W}, off{c.n, 2 * c.og * c.taps(), c.ho(), c.wo()}, w{c.cout, c.cin / c.wg, c.kh, c.kw},
      m{c.n, c.og * c.taps(), c.ho(), c.wo()}, b{c.cout};
  tensor::nn::DeformConvOptions<2> o{{c.s[0], c.s[1]}, {c.p[0], c.p[1]}, {c.d[0], c.d[1]}, static_cast<I>(c.wg), static_cast<I>(c.og)};
  return deform_conv2d_geom("deform_conv2d", x, off, w, c.mask ? &m : nullptr, c.bias ? &b : nullptr, o);
}

struct Inputs {
  std::vector<double> x, off, w, m, b;
};
Inputs inputs(const DCase& c) {
  Inputs in;
  in.x = rnd(c.n * c.cin * c.H * c.W, 81);
  in.off = rnd(c.n * 2 * c.og * c.taps() * c.ho() * c.wo(), 82);
  for (auto& v : in.off) v *= 1.7;  // up to 1.7 pixels: samples cross borders and cells
  in.w = rnd(c.cout * (c.cin / c.wg) * c.taps(), 83);
  in.m = rnd(c.n * c.og * c.taps() * c.ho() * c.wo(), 84);
  for (auto& v : in.m) v = 0.5 * (v + 1);
  in.b = rnd(c.cout, 85);
  return in;
}

template <class T>
std::vector<double> run(const DCase& c, const Inputs& in) {
  const DeformGeom g = geom(c);
  const auto x = cast<T>(in.x), off = cast<T>(in.off), w = cast<T>(in.w), m = cast<T>(in.m), b = cast<T>(in.b);
  std::vector<T> y(c.n * c.cout * c.ho() * c.wo());
  deform_conv2d_forward(g, x.data(), off.data(), w.data(), c.mask ? m.data() : nullptr, c.bias ? b.data() : nullptr, y.data());
  return {y.begin(), y.end()};
}

std::vector<DCase> cases() {
  std::vector<DCase> out;
  int i = 0;
  for (std::size_t wg : {1, 2})
    for (std::size_t og : {1, 2})
      for (bool mask : {false, true}) {
        DCase c;
        c.wg = wg;
        c.og = og;
        c.mask = mask;
        c.bias = i % 2 == 1;
        if (i % 3 == 1) {
          c.s[0] = 2;
          c.p[1] = 1;
        }
        if (i % 3 == 2) {
          c.d[0] = 2;
          c.p[0] = 1;
        }
        ++i;
        out.push_back(c);
      }
  return out;
}

TEST(NnDeformConv, ForwardMatchesDirectLoops) {
  for (const DCase& c : cases()) {
    const Inputs in = inputs(c);
    const auto want = ref(c, in.x, in.off, in.w, in.m, in.b);
    expect_close(run<double>(c, in), want, 1e-12, "deform f64");
    expect_close(run<float>(c, in), want, 1e-5, "deform f32");
  }
}

TEST(NnDeformConv, BackwardMatchesFiniteDifferences) {
  for (DCase c : cases()) {
    c.bias = true;
    const Inputs in = inputs(c);
    const DeformGeom g = geom(c);
    const auto r = rnd(c.n * c.cout * c.ho() * c.wo(), 86);
    std::vector<double> dx(in.x.size()), doff(in.off.size()), dw(in.w.size()), dm(in.m.size()), db(in.b.size());
    deform_conv2d_backward(g, in.x.data(), in.off.data(), in.w.data(), c.mask ? in.m.data() : nullptr, r.data(), dx.data(),
                           doff.data(), dw.data(), c.mask ? dm.data() : nullptr, db.data());
    auto loss = [&](Inputs v) { return dot(r, ref(c, v.x, v.off, v.w, v.m, v.b)); };
    expect_grad(dx, in.x, [&](const auto& v) { Inputs t = in; t.x = v; return loss(t); }, 1e-6, "dx");
    expect_grad(dw, in.w, [&](const auto& v) { Inputs t = in; t.w = v; return loss(t); }, 1e-6, "dw");
    expect_grad(db, in.b, [&](const auto& v) { Inputs t = in; t.b = v; return loss(t); }, 1e-6, "db");
    if (c.mask) expect_grad(dm, in.m, [&](const auto& v) { Inputs t = in; t.m = v; return loss(t); }, 1e-6, "dmask");
    // Nonlinear in the offsets: a small step (the sample points are at random fractions).
    expect_grad(doff, in.off, [&](const auto& v) { Inputs t = in; t.off = v; return loss(t); }, 1e-5, "doffset", 60, 1e-6);
  }
}

TEST(NnDeformConv, ZeroOffsetsWithoutMaskIsConv2d) {
  DCase c;
  c.wg = 2;
  c.p[0] = 1;
  c.s[1] = 2;
  c.bias = true;
  Inputs in = inputs(c);
  std::fill(in.off.begin(), in.off.end(), 0.0);
  const auto cg = conv_geom<2>("conv2d", Shape{c.n, c.cin, c.H, c.W}, Shape{c.cout, c.cin / c.wg, c.kh, c.kw},
                               tensor::nn::ConvOptions<2>{{c.s[0], c.s[1]}, {c.p[0], c.p[1]}, {c.d[0], c.d[1]}, 2});
  std::vector<double> y(c.n * c.cout * cg.out_size());
  conv_forward(cg, in.x.data(), in.w.data(), in.b.data(), y.data());
  expect_close(run<double>(c, in), y, 1e-12, "zero offsets");
}

}  // namespace
}  // namespace tensor::cpu::nn::test
