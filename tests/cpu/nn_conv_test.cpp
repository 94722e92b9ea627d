// conv / conv_transpose kernels (1-d, 2-d, 3-d) against direct nested-loop references written
// here, an options grid, finite-difference gradients in f64, and module-ops.md E1-E7.
#include <array>
#include <cmath>
#include <vector>

#include "backends/cpu/nn/conv.hpp"

#if TENSOR_HAVE_OPENMP
#include <omp.h>
#endif
#include "lib/core/nn_shape.hpp"
#include "nn_test_util.hpp"

namespace tensor::cpu::nn::test {
namespace {

using I = std::int64_t;
using tensor::nn::ConvOptions;
using tensor::nn::ConvTransposeOptions;

// One case in N-d; spatial vectors have N entries.
struct Case {
  std::size_t batch = 1, cin = 1, cout = 1, groups = 1;
  std::vector<std::size_t> in, k;
  std::vector<I> s, p, d, op;  // op: padding_out (transpose only)
  bool bias = false;
};

std::size_t prod(const std::vector<std::size_t>& v) {
  std::size_t n = 1;
  for (auto x : v) n *= x;
  return n;
}
// Pads an N-d spatial vector to 3 dims in front.
template <class T>
std::array<T, 3> pad3(const std::vector<T>& v, T fill) {
  std::array<T, 3> a{fill, fill, fill};
  for (std::size_t i = 0; i < v.size(); ++i) a[3 - v.size() + i] = v[i];
  return a;
}

std::vector<std::size_t> conv_out(const Case& c) {
  std::vector<std::size_t> o;
  for (std::size_t i = 0; i < c.in.size(); ++i)
    o.push_back(static_cast<std::size_t>((static_cast<I>(c.in[i]) + 2 * c.p[i] - c.d[i] * (static_cast<I>(c.k[i]) - 1) - 1) / c.s[i] + 1));
  return o;
}
std::vector<std::size_t> transpose_out(const Case& c) {
  std::vector<std::size_t> o;
  for (std::size_t i = 0; i < c.in.size(); ++i)
    o.push_back(static_cast<std::size_t>((static_cast<I>(c.in[i]) - 1) * c.s[i] - 2 * c.p[i] +
                                         c.d[i] * (static_cast<I>(c.k[i]) - 1) + c.op[i] + 1));
  return o;
}

// y[n,o,q] = b[o] + sum_{c',k} w[o,c',k] x[n, g*Cin/G + c', q*s + k*d - p]
std::vector<double> ref_conv(const Case& c, const std::vector<double>& x, const std::vector<double>& w,
                             const std::vector<double>& b) {
  const auto in = pad3<std::size_t>(c.in, 1), k = pad3<std::size_t>(c.k, 1), out = pad3<std::size_t>(conv_out(c), 1);
  const auto s = pad3<I>(c.s, 1), p = pad3<I>(c.p, 0), d = pad3<I>(c.d, 1);
  const std::size_t cgi = c.cin / c.groups, cgo = c.cout / c.groups;
  std::vector<double> y(c.batch * c.cout * out[0] * out[1] * out[2]);
  std::size_t at = 0;
  for (std::size_t n = 0; n < c.batch; ++n)
    for (std::size_t o = 0; o < c.cout; ++o)
      for (std::size_t q0 = 0; q0 < out[0]; ++q0)
        for (std::size_t q1 = 0; q1 < out[1]; ++q1)
          for (std::size_t q2 = 0; q2 < out[2]; ++q2) {
            double sum = c.bias ? b[o] : 0.0;
            const std::size_t g = o / cgo;
            for (std::size_t ci = 0; ci < cgi; ++ci)
              for (std::size_t a0 = 0; a0 < k[0]; ++a0)
                for (std::size_t a1 = 0; a1 < k[1]; ++a1)
                  for (std::size_t a2 = 0; a2 < k[2]; ++a2) {
                    const I i0 = static_cast<I>(q0) * s[0] + static_cast<I>(a0) * d[0] - p[0];
                    const I i1 = static_cast<I>(q1) * s[1] + static_cast<I>(a1) * d[1] - p[1];
                    const I i2 = static_cast<I>(q2) * s[2] + static_cast<I>(a2) * d[2] - p[2];
                    if (i0 < 0 || i1 < 0 || i2 < 0 || i0 >= static_cast<I>(in[0]) || i1 >= static_cast<I>(in[1]) ||
                        i2 >= static_cast<I>(in[2]))
                      continue;
                    const double xv = x[(((n * c.cin + g * cgi + ci) * in[0] + static_cast<std::size_t>(i0)) * in[1] +
                                         static_cast<std::size_t>(i1)) * in[2] + static_cast<std::size_t>(i2)];
                    const double wv = w[(((o * cgi + ci) * k[0] + a0) * k[1] + a1) * k[2] + a2];
                    sum += xv * wv;
                  }
            y[at++] = sum;
          }
  return y;
}

// Transposed conv by scattering: y[n, g*Cout/G + o', i*s + k*d - p] += x[n,c,i] w[c,o',k].
std::vector<double> ref_conv_transpose(const Case& c, const std::vector<double>& x, const std::vector<double>& w,
                                       const std::vector<double>& b) {
  const auto in = pad3<std::size_t>(c.in, 1), k = pad3<std::size_t>(c.k, 1), out = pad3<std::size_t>(transpose_out(c), 1);
  const auto s = pad3<I>(c.s, 1), p = pad3<I>(c.p, 0), d = pad3<I>(c.d, 1);
  const std::size_t cgi = c.cin / c.groups, cgo = c.cout / c.groups, osz = out[0] * out[1] * out[2];
  std::vector<double> y(c.batch * c.cout * osz, 0.0);
  for (std::size_t n = 0; n < c.batch; ++n)
    for (std::size_t ch = 0; ch < c.cin; ++ch)
      for (std::size_t i0 = 0; i0 < in[0]; ++i0)
        for (std::size_t i1 = 0; i1 < in[1]; ++i1)
          for (std::size_t i2 = 0; i2 < in[2]; ++i2) {
            const double xv = x[(((n * c.cin + ch) * in[0] + i0) * in[1] + i1) * in[2] + i2];
            const std::size_t g = ch / cgi;
            for (std::size_t oo = 0; oo < cgo; ++oo)
              for (std::size_t a0 = 0; a0 < k[0]; ++a0)
                for (std::size_t a1 = 0; a1 < k[1]; ++a1)
                  for (std::size_t a2 = 0; a2 < k[2]; ++a2) {
                    const I q0 = static_cast<I>(i0) * s[0] + static_cast<I>(a0) * d[0] - p[0];
                    const I q1 = static_cast<I>(i1) * s[1] + static_cast<I>(a1) * d[1] - p[1];
                    const I q2 = static_cast<I>(i2) * s[2] + static_cast<I>(a2) * d[2] - p[2];
                    if (q0 < 0 || q1 < 0 || q2 < 0 || q0 >= static_cast<I>(out[0]) || q1 >= static_cast<I>(out[1]) ||
                        q2 >= static_cast<I>(out[2]))
                      continue;
                    const double wv = w[(((ch * cgo + oo) * k[0] + a0) * k[1] + a1) * k[2] + a2];
                    y[((n * c.cout + g * cgo + oo) * out[0] + static_cast<std::size_t>(q0)) * out[1] * out[2] +
                      static_cast<std::size_t>(q1) * out[2] + static_cast<std::size_t>(q2)] += xv * wv;
                  }
          }
  if (c.bias)
    for (std::size_t n = 0; n < c.batch; ++n)
      for (std::size_t o = 0; o < c.cout; ++o)
        for (std::size_t i = 0; i < osz; ++i) y[(n * c.cout + o) * osz + i] += b[o];
  return y;
}

template <std::size_t N>
std::array<I, N> arr(const std::vector<I>& v) {
  std::array<I, N> a{};
  for (std::size_t i = 0; i < N; ++i) a[i] = v[i];
  return a;
}
Shape shape_of(std::size_t a, std::size_t b, const std::vector<std::size_t>& sp) {
  Shape s{a, b};
  for (auto v : sp) s.push_back(v);
  return s;
}

ConvGeom geom(const Case& c) {
  const Shape x = shape_of(c.batch, c.cin, c.in), w = shape_of(c.cout, c.cin / c.groups, c.k);
  switch (c.in.size()) {
    case 1: return conv_geom<1>("conv1d", x, w, ConvOptions<1>{arr<1>(c.s), arr<1>(c.p), arr<1>(c.d), static_cast<I>(c.groups)});
    case 2: return conv_geom<2>("conv2d", x, w, ConvOptions<2>{arr<2>(c.s), arr<2>(c.p), arr<2>(c.d), static_cast<I>(c.groups)});
    default: return conv_geom<3>("conv3d", x, w, ConvOptions<3>{arr<3>(c.s), arr<3>(c.p), arr<3>(c.d), static_cast<I>(c.groups)});
  }
}
ConvGeom tgeom(const Case& c) {
  const Shape x = shape_of(c.batch, c.cin, c.in), w = shape_of(c.cin, c.cout / c.groups, c.k);
  switch (c.in.size()) {
    case 1:
      return conv_transpose_geom<1>("conv_transpose1d", x, w,
                                    ConvTransposeOptions<1>{arr<1>(c.s), arr<1>(c.p), arr<1>(c.op), arr<1>(c.d), static_cast<I>(c.groups)});
    case 2:
      return conv_transpose_geom<2>("conv_transpose2d", x, w,
                                    ConvTransposeOptions<2>{arr<2>(c.s), arr<2>(c.p), arr<2>(c.op), arr<2>(c.d), static_cast<I>(c.groups)});
    default:
      return conv_transpose_geom<3>("conv_transpose3d", x, w,
                                    ConvTransposeOptions<3>{arr<3>(c.s), arr<3>(c.p), arr<3>(c.op), arr<3>(c.d), static_cast<I>(c.groups)});
  }
}

template <class T>
std::vector<double> run_conv(const Case& c, const std::vector<double>& x, const std::vector<double>& w,
                             const std::vector<double>& b) {
  const ConvGeom g = geom(c);
  const auto xt = cast<T>(x), wt = cast<T>(w), bt = cast<T>(b);
  std::vector<T> y(g.batch * g.c_out * g.out_size());
  conv_forward(g, xt.data(), wt.data(), c.bias ? bt.data() : nullptr, y.data());
  return std::vector<double>(y.begin(), y.end());
}
template <class T>
std::vector<double> run_transpose(const Case& c, const std::vector<double>& x, const std::vector<double>& w,
                                  const std::vector<double>& b) {
  const ConvGeom g = tgeom(c);
  const auto xt = cast<T>(x), wt = cast<T>(w), bt = cast<T>(b);
  std::vector<T> y(g.batch * g.c_in * g.in_size());
  conv_transpose_forward(g, xt.data(), wt.data(), c.bias ? bt.data() : nullptr, y.data());
  return std::vector<double>(y.begin(), y.end());
}

std::string describe(const Case& c) {
  auto l = [](const auto& v) {
    std::string s = "[";
    for (auto x : v) s += std::to_string(x) + ",";
    return s + "]";
  };
  return "N=" + std::to_string(c.batch) + " Cin=" + std::to_string(c.cin) + " Cout=" + std::to_string(c.cout) +
         " G=" + std::to_string(c.groups) + " in=" + l(c.in) + " k=" + l(c.k) + " s=" + l(c.s) + " p=" + l(c.p) +
         " d=" + l(c.d) + " op=" + l(c.op) + (c.bias ? " bias" : "");
}

// The 2-d grid: strides, paddings, dilations, groups, bias, 1x1 kernels, batch 1 and 3.
std::vector<Case> grid2d() {
  std::vector<Case> cases;
  int i = 0;
  for (I s : {1, 2, 3})
    for (I p : {0, 1, 2})
      for (I d : {1, 2})
        for (std::size_t g : {1, 2, 4}) {
          Case c;
          c.batch = (i % 3 == 0) ? 1 : 3;
          // groups 4 with C_in 4 is depthwise (conv.cpp's direct path), the rest im2col + gemm.
          c.cin = (i / 2) % 2 == 0 ? 4 : 12;
          c.cout = g == 2 ? 6 : g == 4 ? 8 : 3;
          c.groups = g;
          c.in = {6, 7};
          c.k = (i % 5 == 4) ? std::vector<std::size_t>{1, 1} : std::vector<std::size_t>{3, 2};
          c.s = {s, s == 1 ? 2 : 1};
          c.p = {p, p == 2 ? 0 : p};
          c.d = {d, 1};
          c.op = {0, 0};
          c.bias = i % 2 == 0;
          ++i;
          cases.push_back(c);
        }
  Case pw;  // the 1x1 stride-1 path (no im2col)
  pw.batch = 2;
  pw.cin = 4;
  pw.cout = 6;
  pw.groups = 2;
  pw.in = {3, 5};
  pw.k = {1, 1};
  pw.s = {1, 1};
  pw.p = {0, 0};
  pw.d = {1, 1};
  pw.op = {0, 0};
  pw.bias = true;
  cases.push_back(pw);
  return cases;
}

std::vector<Case> grid_nd() {
  std::vector<Case> cases;
  for (I s : {1, 2})
    for (I p : {0, 1})
      for (I d : {1, 2}) {
        Case c1;
        c1.batch = 2;
        c1.cin = 2;
        c1.cout = 4;
        c1.groups = 2;
        c1.in = {9};
        c1.k = {3};
        c1.s = {s};
        c1.p = {p};
        c1.d = {d};
        c1.op = {0};
        c1.bias = true;
        cases.push_back(c1);
        Case c3;
        c3.batch = 2;
        c3.cin = 2;
        c3.cout = 2;
        c3.groups = s == 1 ? 1 : 2;
        c3.in = {4, 5, 4};
        c3.k = {2, 2, 3};
        c3.s = {s, 1, s};
        c3.p = {p, 1, 0};
        c3.d = {1, d, 1};
        c3.op = {0, 0, 0};
        c3.bias = d == 1;
        cases.push_back(c3);
      }
  return cases;
}

void check_forward(const Case& c) {
  const auto x = rnd(c.batch * c.cin * prod(c.in), 1), w = rnd(c.cout * (c.cin / c.groups) * prod(c.k), 2),
             b = rnd(c.cout, 3);
  const auto want = ref_conv(c, x, w, b);
  expect_close(run_conv<double>(c, x, w, b), want, 1e-12, "f64 " + describe(c));
  expect_close(run_conv<float>(c, x, w, b), want, 1e-5, "f32 " + describe(c));
}

// Gradients of L = sum(r * conv(x, w, b)) against central differences (f64).
void check_backward(const Case& c) {
  const auto x = rnd(c.batch * c.cin * prod(c.in), 4), w = rnd(c.cout * (c.cin / c.groups) * prod(c.k), 5),
             b = rnd(c.cout, 6);
  const ConvGeom g = geom(c);
  const auto r = rnd(g.batch * g.c_out * g.out_size(), 7);
  std::vector<double> dx(x.size()), dw(w.size()), db(b.size());
  conv_backward_x(g, r.data(), w.data(), dx.data());
  conv_backward_weight(g, x.data(), r.data(), dw.data());
  conv_backward_bias(g, r.data(), db.data());
  expect_grad(dx, x, [&](const auto& v) { return dot(r, run_conv<double>(c, v, w, b)); }, 1e-6,
               "dx " + describe(c));
  expect_grad(dw, w, [&](const auto& v) { return dot(r, run_conv<double>(c, x, v, b)); }, 1e-6,
               "dw " + describe(c));
  Case cb = c;
  cb.bias = true;
  expect_grad(db, b, [&](const auto& v) { return dot(r, run_conv<double>(cb, x, w, v)); }, 1e-6,
               "db " + describe(c));
}

// Transposed-conv cases: the conv grid with Cin/Cout swapped in meaning and every valid
// padding_out (< max(stride, dilation)).
std::vector<Case> transpose_cases(const std::vector<Case>& base) {
  std::vector<Case> out;
  for (Case c : base) {
    c.op.assign(c.in.size(), 0);
    for (std::size_t i = 0; i < c.in.size(); ++i) c.op[i] = std::max(c.s[i], c.d[i]) - 1;
    out.push_back(c);
  }
  return out;
}

void check_transpose(const Case& c, bool grads) {
  const auto x = rnd(c.batch * c.cin * prod(c.in), 8), w = rnd(c.cin * (c.cout / c.groups) * prod(c.k), 9),
             b = rnd(c.cout, 10);
  const auto want = ref_conv_transpose(c, x, w, b);
  expect_close(run_transpose<double>(c, x, w, b), want, 1e-12, "T f64 " + describe(c));
  expect_close(run_transpose<float>(c, x, w, b), want, 1e-5, "T f32 " + describe(c));
  if (!grads) return;
  const ConvGeom g = tgeom(c);
  const auto r = rnd(want.size(), 11);
  std::vector<double> dx(x.size()), dw(w.size()), db(b.size());
  conv_transpose_backward_x(g, r.data(), w.data(), dx.data());
  conv_transpose_backward_weight(g, x.data(), r.data(), dw.data());
  conv_transpose_backward_bias(g, r.data(), db.data());
  expect_grad(dx, x, [&](const auto& v) { return dot(r, run_transpose<double>(c, v, w, b)); }, 1e-6,
               "T dx " + describe(c));
  expect_grad(dw, w, [&](const auto& v) { return dot(r, run_transpose<double>(c, x, v, b)); }, 1e-6,
               "T dw " + describe(c));
  Case cb = c;
  cb.bias = true;
  expect_grad(db, b, [&](const auto& v) { return dot(r, run_transpose<double>(cb, x, w, v)); }, 1e-6,
               "T db " + describe(c));
}

TEST(NnConv, Conv2dMatchesDirectLoopsOverOptionsGrid) {
  for (const auto& c : grid2d()) check_forward(c);
}
TEST(NnConv, Conv1dAnd3dMatchDirectLoops) {
  for (const auto& c : grid_nd()) check_forward(c);
}
TEST(NnConv, BackwardMatchesFiniteDifferences) {
  const auto g2 = grid2d();
  for (std::size_t i = 0; i < g2.size(); i += 2) check_backward(g2[i]);
  check_backward(g2.back());
  for (const auto& c : grid_nd()) check_backward(c);
}
TEST(NnConv, ConvTransposeMatchesScatterLoopsOverOptionsGrid) {
  for (const auto& c : transpose_cases(grid2d())) check_transpose(c, false);
  for (const auto& c : transpose_cases(grid_nd())) check_transpose(c, false);
}
TEST(NnConv, ConvTransposeBackwardMatchesFiniteDifferences) {
  const auto g2 = transpose_cases(grid2d());
  for (std::size_t i = 1; i < g2.size(); i += 2) check_transpose(g2[i], true);
  for (const auto& c : transpose_cases(grid_nd())) check_transpose(c, true);
}

// conv.cpp's shifted-plane im2col/col2im (trailing strides 1, rows as wide as the input's):
// "same" widths with row offsets that drop rows, pad beyond the input or exceed it, a
// dilated width, a 3-d stride, and more output channels than cols rows (the weight
// gradient's transposed product).
std::vector<Case> shifted_cases() {
  std::vector<Case> cases;
  struct Row {
    std::size_t k1;
    I p1, d1;
  };
  struct Width {
    std::size_t k2;
    I p2, d2;
  };
  int i = 0;
  for (Row r : {Row{3, 1, 1}, Row{3, 0, 1}, Row{2, 3, 1}, Row{3, 2, 3}, Row{5, 0, 1}})
    for (Width wd : {Width{3, 1, 1}, Width{5, 2, 1}, Width{3, 2, 2}, Width{1, 0, 1}}) {
      Case c;
      c.batch = i % 2 == 0 ? 3 : 2;
      c.cin = i % 3 == 0 ? 1 : 4;
      c.cout = i % 3 == 0 ? 12 : 6;
      c.groups = c.cin == 4 && i % 4 == 1 ? 2 : 1;
      c.in = {5, 6};
      c.k = {r.k1, wd.k2};
      c.s = {1, 1};
      c.p = {r.p1, wd.p2};
      c.d = {r.d1, wd.d2};
      c.op = {0, 0};
      c.bias = i % 2 == 1;
      ++i;
      cases.push_back(c);
    }
  Case c3;
  c3.batch = 2;
  c3.cin = 2;
  c3.cout = 4;
  c3.in = {5, 4, 6};
  c3.k = {3, 3, 3};
  c3.s = {2, 1, 1};
  c3.p = {1, 1, 1};
  c3.d = {1, 1, 1};
  c3.op = {0, 0, 0};
  c3.bias = true;
  cases.push_back(c3);
  return cases;
}

TEST(NnConv, ShiftedPlanesMatchReference) {
  for (const auto& c : shifted_cases()) {
    const ConvGeom g = geom(c);
    ASSERT_EQ(g.in[2], g.out[2]) << describe(c);
    check_forward(c);
    check_backward(c);
  }
  for (const auto& c : transpose_cases(shifted_cases())) {
    bool valid = true;  // a transposed conv's output: (in - 1) s - 2p + d (k - 1) + op + 1 >= 1
    for (std::size_t i = 0; i < c.in.size(); ++i)
      valid = valid && (static_cast<I>(c.in[i]) - 1) * c.s[i] - 2 * c.p[i] + c.d[i] * (static_cast<I>(c.k[i]) - 1) +
                               c.op[i] >= 0;
    if (valid) check_transpose(c, true);
  }
}

// Cases above the threading threshold: samples on parallel_chunks (batch >= threads), one
// sample with its gemms cut into slabs on parallel_chunks, a batch of 11 (the weight
// gradient sums two fixed halves, 5 + 6 samples) and one of 23 with one input channel
// (the weight gradient's transposed products); forward, backward and the transpose. The threaded
// gradients equal the serial ones exactly (the kernels do not depend on the thread count).
TEST(NnConv, ThreadedPathsMatchReference) {
  Case a;
  a.batch = 2;
  a.cin = 8;
  a.cout = 16;
  a.groups = 2;
  a.in = {16, 16};
  a.k = {3, 3};
  a.s = {1, 1};
  a.p = {1, 1};
  a.d = {1, 1};
  a.op = {0, 0};
  a.bias = true;
  Case b = a;
  b.batch = 1;
  b.cout = 32;
  b.groups = 1;
  b.s = {2, 1};
  Case c = a;  // 1x1 with several samples
  c.k = {1, 1};
  c.p = {0, 0};
  c.cin = 32;
  c.cout = 32;
  Case dw = a;  // depthwise with a channel multiplier of 2 (the direct kernels)
  dw.cin = 16;
  dw.cout = 32;
  dw.groups = 16;
  dw.in = {24, 24};
  Case e = a;  // an odd batch: unequal halves of the weight gradient
  e.batch = 11;
  e.cin = 4;
  e.cout = 8;
  e.groups = 1;
  e.in = {12, 12};
  Case f = e;  // the weight gradient's transposed products (Kc = 9 < 32 output channels)
  f.batch = 23;
  f.cin = 1;
  f.cout = 32;
  f.in = {14, 14};
  // Each case is at least 64^3 multiply-adds, the threading threshold of conv.cpp.
  for (const Case& k : {a, b, c, dw, e, f}) {
    const ConvGeom g = geom(k);
    EXPECT_GE(static_cast<double>(g.batch * g.c_out * g.out_size() * (g.c_in / g.groups) * g.kernel_size()), 262144.0);
  }
  for (const Case& k : {a, b, c, dw, e, f}) {
    check_forward(k);
    Case t = k;
    t.op = {std::max(t.s[0], t.d[0]) - 1, std::max(t.s[1], t.d[1]) - 1};
    check_transpose(t, false);
    // The serial path's gradients are checked against finite differences above; the threaded
    // ones must equal them (finite differences here would take seconds on a loaded machine).
    const auto x = rnd(k.batch * k.cin * prod(k.in), 4), w = rnd(k.cout * (k.cin / k.groups) * prod(k.k), 5);
    const ConvGeom g = geom(k), gt = tgeom(t);
    const auto r = rnd(g.batch * g.c_out * g.out_size(), 7), rt = rnd(gt.batch * gt.c_in * gt.in_size(), 8);
    const auto xt = rnd(gt.batch * gt.c_out * gt.out_size(), 9);
    auto grads = [&] {
      std::vector<std::vector<double>> out(6);
      out[0].resize(x.size());
      out[1].resize(w.size());
      out[2].resize(k.cout);
      out[3].resize(xt.size());
      out[4].resize(w.size());
      out[5].resize(gt.c_in);
      conv_backward_x(g, r.data(), w.data(), out[0].data());
      conv_backward_weight(g, x.data(), r.data(), out[1].data());
      conv_backward_bias(g, r.data(), out[2].data());
      conv_transpose_backward_x(gt, rt.data(), w.data(), out[3].data());
      conv_transpose_backward_weight(gt, xt.data(), rt.data(), out[4].data());
      conv_transpose_backward_bias(gt, rt.data(), out[5].data());
      return out;
    };
    const auto threaded = grads();
#if TENSOR_HAVE_OPENMP
    const int before = omp_get_max_threads();
    omp_set_num_threads(1);
    const auto serial = grads();
    omp_set_num_threads(before);
#else
    const auto serial = grads();
#endif
    for (std::size_t i = 0; i < serial.size(); ++i) expect_close(threaded[i], serial[i], 0, "grad " + std::to_string(i) + " " + describe(k));
  }
}

// f32 2-d gradients large enough for oneDNN's convolution primitives (conv_onednn.hpp:
// 16+ channels in and out, one group, 128^3+ multiply-adds; the batch in 8 parts, 9
// samples leaving parts of two sizes): the input and weight gradients, and the transposed
// convolution's forward and weight gradient (the same kernels), against sums in double
// written here, and equal bit for bit on one thread and on all.
TEST(NnConv, F32GradientsOfWideConvsMatchDirectSums) {
  Case a;
  a.batch = 5;
  a.cin = 16;
  a.cout = 32;
  a.in = {12, 11};
  a.k = {3, 3};
  a.s = {1, 1};
  a.p = {1, 1};
  a.d = {1, 1};
  a.op = {0, 0};
  Case b = a;  // strided, a 3x2 kernel whose last window stops short of the padding
  b.batch = 9;
  b.cin = 32;
  b.cout = 40;
  b.in = {21, 19};
  b.k = {3, 2};
  b.s = {2, 2};
  Case d = b;  // and dilated
  d.d = {2, 2};
  for (const Case& c : {a, b, d}) {
    const ConvGeom g = geom(c);
    ASSERT_GE(static_cast<double>(g.batch * g.c_out * g.out_size() * g.c_in * g.kernel_size()), 128.0 * 128 * 128);
    const auto x = rnd(g.batch * g.c_in * g.in_size(), 11), w = rnd(g.c_out * g.c_in * g.kernel_size(), 12);
    const auto dy = rnd(g.batch * g.c_out * g.out_size(), 13);
    // dx[n,c,a,b] += dy[n,o,i,j] w[o,c,ki,kj] and dw[o,c,ki,kj] += dy[n,o,i,j] x[n,c,a,b]
    // for a = i*s - p + ki*d inside the input (likewise b).
    std::vector<double> dx(x.size(), 0.0), dw(w.size(), 0.0);
    const I h = static_cast<I>(g.in[1]), wd = static_cast<I>(g.in[2]);
    const I oh = static_cast<I>(g.out[1]), ow = static_cast<I>(g.out[2]), kh = static_cast<I>(g.kernel[1]),
            kw = static_cast<I>(g.kernel[2]);
    const I ci = static_cast<I>(g.c_in), co = static_cast<I>(g.c_out);
    for (I n = 0; n < static_cast<I>(g.batch); ++n)
      for (I o = 0; o < co; ++o)
        for (I i = 0; i < oh; ++i)
          for (I j = 0; j < ow; ++j) {
            const double gy = dy[static_cast<std::size_t>(((n * co + o) * oh + i) * ow + j)];
            for (I c2 = 0; c2 < ci; ++c2)
              for (I ki = 0; ki < kh; ++ki)
                for (I kj = 0; kj < kw; ++kj) {
                  const I r = i * c.s[0] - c.p[0] + ki * c.d[0], q = j * c.s[1] - c.p[1] + kj * c.d[1];
                  if (r < 0 || r >= h || q < 0 || q >= wd) continue;
                  const auto xi = static_cast<std::size_t>(((n * ci + c2) * h + r) * wd + q);
                  const auto wi = static_cast<std::size_t>(((o * ci + c2) * kh + ki) * kw + kj);
                  dx[xi] += gy * w[wi];
                  dw[wi] += gy * x[xi];
                }
          }
    const auto xf = cast<float>(x), wf = cast<float>(w), dyf = cast<float>(dy);
    auto grads = [&] {
      std::vector<std::vector<float>> out(4);
      out[0].resize(x.size());
      out[1].resize(w.size());
      out[2].resize(x.size());
      out[3].resize(w.size());
      conv_backward_x(g, dyf.data(), wf.data(), out[0].data());
      conv_backward_weight(g, xf.data(), dyf.data(), out[1].data());
      // The transposed convolution of dy with w is the input gradient; its weight gradient
      // (input dy, output gradient x) is the weight gradient.
      const Case t = [&] {
        Case u = c;
        u.batch = c.batch;
        u.cin = c.cout;
        u.cout = c.cin;
        u.in = {g.out[1], g.out[2]};
        u.op = {static_cast<I>(g.in[1]) - ((static_cast<I>(g.out[1]) - 1) * c.s[0] - 2 * c.p[0] + c.d[0] * (kh - 1) + 1),
                static_cast<I>(g.in[2]) - ((static_cast<I>(g.out[2]) - 1) * c.s[1] - 2 * c.p[1] + c.d[1] * (kw - 1) + 1)};
        return u;
      }();
      const ConvGeom gt = tgeom(t);
      EXPECT_EQ(gt.in_size(), g.in_size());
      conv_transpose_forward(gt, dyf.data(), wf.data(), nullptr, out[2].data());
      conv_transpose_backward_weight(gt, dyf.data(), xf.data(), out[3].data());
      return out;
    };
    const auto all = grads();
    const double tol = 1e-4 * std::sqrt(static_cast<double>(g.c_out * g.kernel_size()));
    expect_close(all[0], dx, tol, "dx " + describe(c));
    expect_close(all[1], dw, 1e-4 * std::sqrt(static_cast<double>(g.batch * g.out_size())), "dw " + describe(c));
    expect_close(all[2], dx, tol, "conv_transpose y " + describe(c));
    expect_close(all[3], dw, 1e-4 * std::sqrt(static_cast<double>(g.batch * g.out_size())), "conv_transpose dw " + describe(c));
#if TENSOR_HAVE_OPENMP
    const int before = omp_get_max_threads();
    omp_set_num_threads(1);
    const auto serial = grads();
    omp_set_num_threads(before);
    for (std::size_t i = 0; i < serial.size(); ++i) EXPECT_EQ(all[i], serial[i]) << "grad " << i << " " << describe(c);
#endif
  }
}

// Samples whose im2col columns outgrow conv.cpp's block (512 KB) are done in blocks of
// output rows, each its own gemm on a slice of y / dy: the forward and the weight
// gradient against direct loops, on the shifted-plane copy (stride 1, "same" padding)
// and the row-by-row one (stride 2), f64 and f32, with a last block shorter than the rest.
TEST(NnConv, RowBlocksOfLargeColumnsMatchReference) {
  Case a;
  a.batch = 2;
  a.cin = 16;
  a.cout = 8;
  a.in = {40, 40};
  a.k = {3, 3};
  a.s = {1, 1};
  a.p = {1, 1};
  a.d = {1, 1};
  a.op = {0, 0};
  a.bias = true;
  Case b = a;
  b.cin = 32;
  b.in = {48, 48};
  b.s = {2, 2};
  for (const Case& c : {a, b}) {
    const ConvGeom g = geom(c);
    ASSERT_GT(g.c_in * g.kernel_size() * g.out_size() * sizeof(float), std::size_t{512} << 10) << describe(c);
    check_forward(c);
    const auto x = rnd(c.batch * c.cin * prod(c.in), 4), r = rnd(g.batch * g.c_out * g.out_size(), 7);
    // dw[o, ci, a1, a2] = sum over n, q of r[n, o, q] x[n, ci, q*s + a*d - p] (2-d).
    std::vector<double> want(c.cout * c.cin * 9, 0.0);
    const std::size_t oh = g.out[1], ow = g.out[2];
    for (std::size_t n = 0; n < c.batch; ++n)
      for (std::size_t o = 0; o < c.cout; ++o)
        for (std::size_t ci = 0; ci < c.cin; ++ci)
          for (std::size_t a1 = 0; a1 < 3; ++a1)
            for (std::size_t a2 = 0; a2 < 3; ++a2)
              for (std::size_t q1 = 0; q1 < oh; ++q1)
                for (std::size_t q2 = 0; q2 < ow; ++q2) {
                  const I i1 = static_cast<I>(q1) * c.s[0] + static_cast<I>(a1) - c.p[0];
                  const I i2 = static_cast<I>(q2) * c.s[1] + static_cast<I>(a2) - c.p[1];
                  if (i1 < 0 || i2 < 0 || i1 >= static_cast<I>(c.in[0]) || i2 >= static_cast<I>(c.in[1])) continue;
                  want[((o * c.cin + ci) * 3 + a1) * 3 + a2] +=
                      r[((n * c.cout + o) * oh + q1) * ow + q2] *
                      x[((n * c.cin + ci) * c.in[0] + static_cast<std::size_t>(i1)) * c.in[1] + static_cast<std::size_t>(i2)];
                }
    std::vector<double> dw(want.size());
    conv_backward_weight(g, x.data(), r.data(), dw.data());
    expect_close(dw, want, 1e-10, "dw f64 " + describe(c));
    const auto xf = cast<float>(x), rf = cast<float>(r);
    std::vector<float> dwf(want.size());
    conv_backward_weight(g, xf.data(), rf.data(), dwf.data());
    expect_close(std::vector<double>(dwf.begin(), dwf.end()), want, 1e-4, "dw f32 " + describe(c));
  }
}

// ---- module-ops.md edge cases (values from torch 1.13) ----

std::vector<double> iota(std::size_t n, double from = 0) {
  std::vector<double> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = from + static_cast<double>(i);
  return v;
}

TEST(NnConv, E1GroupsDilationStrideReadOnlyTheirGroup) {
  const auto g = conv_geom<2>("conv2d", Shape{1, 4, 5, 5}, Shape{2, 2, 2, 2}, ConvOptions<2>{{2, 1}, {1, 0}, {2, 2}, 2});
  ASSERT_EQ(g.out[1], 3u);
  ASSERT_EQ(g.out[2], 3u);
  const auto x = cast<float>(iota(100));
  const std::vector<float> w(16, 1.0f);
  std::vector<float> y(18);
  conv_forward(g, x.data(), w.data(), nullptr, y.data());
  expect_close(y, std::vector<double>{74, 78, 82, 188, 196, 204, 114, 118, 122, 274, 278, 282, 588, 596, 604, 314, 318, 322},
               1e-6, "E1");
}

TEST(NnConv, E2Conv1dDilationAndPadding) {
  const auto g = conv_geom<1>("conv1d", Shape{1, 1, 7}, Shape{1, 1, 3}, ConvOptions<1>{{2}, {1}, {3}, 1});
  const std::vector<float> x{1, 2, 3, 4, 5, 6, 7}, w{1, 10, 100};
  std::vector<float> y(g.out_size());
  conv_forward(g, x.data(), w.data(), nullptr, y.data());
  expect_close(y, std::vector<double>{630, 52}, 1e-6, "E2");
}

TEST(NnConv, E3UnreadInputsGetZeroGradient) {
  const auto g = conv_geom<1>("conv1d", Shape{1, 1, 5}, Shape{1, 1, 2}, ConvOptions<1>{{2}, {0}, {1}, 1});
  const std::vector<double> x{1, 2, 3, 4, 5}, w{1, 1}, dy(g.out_size(), 1.0);
  ASSERT_EQ(g.out_size(), 2u);
  std::vector<double> dx(5), dw(2);
  conv_backward_x(g, dy.data(), w.data(), dx.data());
  conv_backward_weight(g, x.data(), dy.data(), dw.data());
  expect_close(dx, std::vector<double>{1, 1, 1, 1, 0}, 1e-12, "E3 dx");
  expect_close(dw, std::vector<double>{4, 6}, 1e-12, "E3 dw");
  // The padding_out that conv_transpose needs to reach length 5.
  EXPECT_EQ(tensor::core::conv_backward_padding_out(5, 2, 2, 2, 0, 1), 1);
}

TEST(NnConv, E4ConvTransposeOutputPaddingRowIsNotZero) {
  const auto g = conv_transpose_geom<2>("conv_transpose2d", Shape{1, 1, 2, 2}, Shape{1, 1, 3, 3},
                                        ConvTransposeOptions<2>{{2, 2}, {1, 1}, {1, 1}, {1, 1}, 1});
  ASSERT_EQ(g.in[1], 4u);
  ASSERT_EQ(g.in[2], 4u);
  const std::vector<float> x(4, 1.0f), w(9, 1.0f);
  std::vector<float> y(16);
  conv_transpose_forward(g, x.data(), w.data(), nullptr, y.data());
  expect_close(y, std::vector<double>{1, 2, 1, 1, 2, 4, 2, 2, 1, 2, 1, 1, 1, 2, 1, 1}, 1e-6, "E4");
}

TEST(NnConv, E5ConvTransposeGroups) {
  const auto g = conv_transpose_geom<1>("conv_transpose1d", Shape{1, 2, 2}, Shape{2, 1, 2},
                                        ConvTransposeOptions<1>{{1}, {0}, {0}, {1}, 2});
  const std::vector<float> x{1, 2, 3, 4}, w{1, 1, 10, 10};
  std::vector<float> y(6);
  conv_transpose_forward(g, x.data(), w.data(), nullptr, y.data());
  expect_close(y, std::vector<double>{1, 3, 2, 30, 70, 40}, 1e-6, "E5");
}

TEST(NnConv, E6ConvTransposeDilation) {
  const auto g = conv_transpose_geom<1>("conv_transpose1d", Shape{1, 1, 2}, Shape{1, 1, 3},
                                        ConvTransposeOptions<1>{{3}, {0}, {0}, {2}, 1});
  ASSERT_EQ(g.in_size(), 8u);
  const std::vector<float> x{1, 2}, w{1, 10, 100};
  std::vector<float> y(8);
  conv_transpose_forward(g, x.data(), w.data(), nullptr, y.data());
  expect_close(y, std::vector<double>{1, 0, 10, 2, 100, 20, 0, 200}, 1e-6, "E6");
}

TEST(NnConv, E7BiasGradientSumsBatchAndSpace) {
  const auto g = conv_geom<2>("conv2d", Shape{2, 1, 3, 3}, Shape{3, 1, 2, 2}, ConvOptions<2>{});
  ASSERT_EQ(g.out_size(), 4u);
  const std::vector<float> dy(2 * 3 * 4, 1.0f);
  std::vector<float> db(3);
  conv_backward_bias(g, dy.data(), db.data());
  expect_close(db, std::vector<double>{8, 8, 8}, 1e-6, "E7");
}

TEST(NnConv, UnfoldMatchesLoopsAndFoldIsItsAdjoint) {
  const std::size_t N = 2, Cc = 3, H = 6, W = 5;
  const auto x = rnd(N * Cc * H * W, 71);
  for (I s : {1, 2})
    for (I p : {0, 1})
      for (I d : {1, 2}) {
        const tensor::nn::UnfoldOptions o{{s, 1}, {p, 1}, {d, 1}};
        const std::array<I, 2> k{2, 3};
        const ConvGeom g = unfold_geom("unfold4d", Shape{N, Cc, H, W}, k, o);
        const I Ho = (static_cast<I>(H) + 2 * p - d * (k[0] - 1) - 1) / s + 1, Wo = (static_cast<I>(W) + 2 - 2 - 1) / 1 + 1;
        ASSERT_EQ(g.out[1], static_cast<std::size_t>(Ho));
        ASSERT_EQ(g.out[2], static_cast<std::size_t>(Wo));
        std::vector<double> want;
        for (std::size_t n = 0; n < N; ++n)
          for (std::size_t c = 0; c < Cc; ++c)
            for (I i = 0; i < k[0]; ++i)
              for (I j = 0; j < k[1]; ++j)
                for (I ho = 0; ho < Ho; ++ho)
                  for (I wo = 0; wo < Wo; ++wo) {
                    const I h = ho * s - p + i * d, w = wo - 1 + j;
                    want.push_back(h < 0 || w < 0 || h >= static_cast<I>(H) || w >= static_cast<I>(W)
                                       ? 0.0
                                       : x[((n * Cc + c) * H + static_cast<std::size_t>(h)) * W + static_cast<std::size_t>(w)]);
                  }
        std::vector<double> cols(want.size());
        unfold_forward(g, x.data(), cols.data());
        expect_close(cols, want, 0, "unfold4d");
        // <fold(c), x> = <c, unfold(x)> for any c.
        const auto c = rnd(cols.size(), 72);
        std::vector<double> folded(x.size());
        fold_forward(g, c.data(), folded.data());
        EXPECT_NEAR(dot(folded, x), dot(c, cols), 1e-10);
      }
}

TEST(NnConv, E36Unfold4dOrdering) {
  const ConvGeom g = unfold_geom("unfold4d", Shape{1, 2, 3, 3}, {2, 2}, tensor::nn::UnfoldOptions{});
  const auto x = cast<float>(iota(18));
  std::vector<float> cols(32);
  unfold_forward(g, x.data(), cols.data());
  const std::vector<double> want{0, 1, 3, 4, 1, 2, 4, 5, 3, 4, 6, 7, 4, 5, 7, 8,
                                 9, 10, 12, 13, 10, 11, 13, 14, 12, 13, 15, 16, 13, 14, 16, 17};
  expect_close(cols, want, 0, "E36");
}

TEST(NnConv, E37FoldSumsOverlaps) {
  const ConvGeom g = unfold_geom("fold4d", Shape{1, 1, 3, 3}, {2, 2}, tensor::nn::UnfoldOptions{});
  const std::vector<float> ones(9, 1.0f);
  std::vector<float> cols(16), back(9);
  unfold_forward(g, ones.data(), cols.data());
  fold_forward(g, cols.data(), back.data());
  expect_close(back, std::vector<double>{1, 2, 1, 2, 4, 2, 1, 2, 1}, 0, "E37");
}

TEST(NnConv, ZeroBatchWritesNothingAndDoesNotThrow) {
  const auto g = conv_geom<2>("conv2d", Shape{0, 2, 4, 4}, Shape{2, 2, 3, 3}, ConvOptions<2>{});
  const std::vector<float> w(36, 1.0f);
  conv_forward(g, static_cast<const float*>(nullptr), w.data(), nullptr, static_cast<float*>(nullptr));
  std::vector<float> dw(36, 5.0f);
  conv_backward_weight(g, static_cast<const float*>(nullptr), static_cast<const float*>(nullptr), dw.data());
  expect_close(dw, std::vector<double>(36, 0.0), 0, "dw of an empty batch");
}

}  // namespace
}  // namespace tensor::cpu::nn::test
