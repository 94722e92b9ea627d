// The fused activation / softmax kernels (act_hwy.cpp) and the per-dim reduction
// kernels (reduce_hwy.cpp) on every compiled Highway target, against naive scalar
// references written here; then the backend entries on strided, broadcast and
// outer-dim layouts against the same references.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <limits>
#include <thread>
#include <hwy/targets.h>

#include "backends/cpu/act_hwy.hpp"
#include "backends/cpu/cpu_info.hpp"
#include "backends/cpu/parallel.hpp"
#include "backends/cpu/reduce_hwy.hpp"
#include "cpu_test_util.hpp"

namespace tensor::cpu::test {
namespace {

using simd::Act2Op;
using simd::ActOp;
using simd::SoftOp;

template <class T> constexpr T kNaN = std::numeric_limits<T>::quiet_NaN();
template <class T> constexpr T kInf = std::numeric_limits<T>::infinity();

// A sweep over [-12, 12] of odd length (vector bodies and tails) and the edges.
template <class T>
std::vector<T> inputs() {
  std::vector<T> v;
  for (int i = 0; i < 301; ++i) v.push_back(static_cast<T>(-12.0 + 24.0 * i / 300.0));
  for (T x : {T(0), T(-0.0), T(0.5), T(-2.5), T(1e-30), T(85), T(-85), T(100), T(-100), T(800), T(-800), T(5e4),
              kInf<T>, -kInf<T>, kNaN<T>, std::numeric_limits<T>::denorm_min()})
    v.push_back(x);
  return v;
}

// The default compositions, element by element, in T.
template <class T>
T sigmoid(T x) {
  if (x >= 0) return T(1) / (T(1) + std::exp(-x));
  const T e = std::exp(x);
  return e / (T(1) + e);
}
template <class T>
T ref1(ActOp op, T a, T p, T q) {
  switch (op) {
    case ActOp::Relu: return a <= 0 ? T(0) : a;
    case ActOp::LeakyRelu: return a < 0 ? a * p : a;
    case ActOp::Gelu: return a * ((std::erf(a / std::sqrt(T(2))) + T(1)) / T(2));
    case ActOp::Sigmoid: return sigmoid(a);
    case ActOp::LogSigmoid: return std::min(a, T(0)) - std::log1p(std::exp(-std::fabs(a)));
    case ActOp::HardSigmoid: return std::isnan(a) ? a : std::clamp(p * a + q, T(0), T(1));
  }
  return a;
}
template <class T>
T ref2(Act2Op op, T a, T b) {
  switch (op) {
    case Act2Op::ReluGrad: return a <= 0 ? T(0) : b;
    case Act2Op::Prelu: return a < 0 ? a * b : a;
    case Act2Op::SigmoidGrad: return a * (T(1) - a) * b;
    case Act2Op::LogSigmoidGrad: return b * sigmoid(-a);
    case Act2Op::GeluGrad: {  // exact GELU's derivative Φ(x) + x·φ(x), in double
      const double x = static_cast<double>(a);
      const double d = 0.5 * (1 + std::erf(x / std::sqrt(2.0))) + x * std::exp(-0.5 * x * x) / std::sqrt(2 * M_PI);
      return static_cast<T>(static_cast<double>(b) * d);
    }
  }
  return a;
}

// Equal, both NaN, or within `rel` relative plus `abs` absolute.
template <class T>
bool near(T got, T want, double rel, double abs) {
  if (std::isnan(want)) return std::isnan(got);
  if (got == want) return true;
  if (std::isinf(want) || std::isinf(got)) return false;
  return std::fabs(static_cast<double>(got) - static_cast<double>(want)) <= rel * std::fabs(static_cast<double>(want)) + abs;
}

template <class T> constexpr double kEps = std::numeric_limits<T>::epsilon();

template <class T>
void check_act(const std::string& target) {
  const std::vector<T> in = inputs<T>();
  const T p = T(0.2), q = T(0.5);
  for (ActOp op : {ActOp::Relu, ActOp::LeakyRelu, ActOp::Gelu, ActOp::Sigmoid, ActOp::LogSigmoid, ActOp::HardSigmoid}) {
    std::vector<T> out(in.size()), same = in;
    if constexpr (std::is_same_v<T, float>) {
      simd::act_f32(op, in.data(), out.data(), in.size(), p, q);
      simd::act_f32(op, same.data(), same.data(), same.size(), p, q);
    } else {
      simd::act_f64(op, in.data(), out.data(), in.size(), p, q);
      simd::act_f64(op, same.data(), same.data(), same.size(), p, q);
    }
    for (std::size_t i = 0; i < in.size(); ++i) {
      const T want = ref1(op, in[i], p, q);
      // gelu: erf within ~1 ulp of 1, times |x|; the rest: a few ulps of the result.
      // hard_sigmoid: alpha * x + beta may be fused (one rounding less) near 0 and 1.
      const double ax = std::fabs(static_cast<double>(in[i]));
      const double abs = op == ActOp::Gelu ? 4 * kEps<T> * ax : op == ActOp::HardSigmoid ? 2 * kEps<T> * ax * 0.2 : 0;
      ASSERT_TRUE(near(out[i], want, 16 * kEps<T>, abs)) << target << " op " << int(op) << " x=" << in[i] << " got "
                                                        << out[i] << " want " << want;
      ASSERT_TRUE(near(same[i], want, 16 * kEps<T>, abs)) << target << " in place, op " << int(op);
      if (want == 0 && (op == ActOp::Relu || op == ActOp::LeakyRelu)) {
        ASSERT_EQ(std::signbit(out[i]), std::signbit(want)) << target << " sign of zero, op " << int(op) << " x=" << in[i];
      }
    }
  }
  // Two inputs: b elementwise and b one broadcast value.
  std::vector<T> b(in.size());
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = static_cast<T>(std::cos(static_cast<double>(i)) * 3.0);
  for (Act2Op op : {Act2Op::ReluGrad, Act2Op::Prelu, Act2Op::SigmoidGrad, Act2Op::LogSigmoidGrad, Act2Op::GeluGrad}) {
    for (const bool bs : {false, true}) {
      std::vector<T> out(in.size());
      if constexpr (std::is_same_v<T, float>) simd::act2_f32(op, in.data(), b.data() + 3, bs, out.data(), in.size() - 3);
      else simd::act2_f64(op, in.data(), b.data() + 3, bs, out.data(), in.size() - 3);
      for (std::size_t i = 0; i + 3 < in.size(); ++i) {
        const T bi = bs ? b[3] : b[i + 3];
        const T want = ref2(op, in[i], bi);
        // gelu_backward: erf within ~1 ulp of 1 plus x·φ(x); sigmoid_backward: 1 - a rounds once more.
        const double scale = std::fabs(static_cast<double>(bi)) * (1 + std::fabs(static_cast<double>(in[i])));
        ASSERT_TRUE(near(out[i], want, 16 * kEps<T>, 8 * kEps<T> * scale))
            << target << " op2 " << int(op) << " bs " << bs << " a=" << in[i] << " b=" << bi << " got " << out[i]
            << " want " << want;
      }
    }
  }
}

// Softmax / log_softmax / softmin of one lane, in double.
template <class T>
std::vector<double> soft_ref(SoftOp op, std::vector<T> x) {
  std::vector<double> out(x.size());
  double mx = -kInf<double>;
  bool nan = false;
  for (T& v : x) {
    if (op == SoftOp::Softmin) v = -v;
    nan = nan || std::isnan(v);
    mx = std::max(mx, static_cast<double>(v));
  }
  if (nan || !std::isfinite(mx)) return std::vector<double>(x.size(), kNaN<double>);
  double sum = 0;
  for (T v : x) sum += std::exp(static_cast<double>(v) - mx);
  for (std::size_t j = 0; j < x.size(); ++j) {
    const double t = static_cast<double>(x[j]) - mx;
    out[j] = op == SoftOp::LogSoftmax ? t - std::log(sum) : std::exp(t) / sum;
  }
  return out;
}

// Lanes of several kinds: plain, a NaN, a +inf, all -inf, one -inf, a wide spread
// (exp underflows), constant.
template <class T>
std::vector<std::vector<T>> soft_lanes(std::size_t n) {
  std::vector<std::vector<T>> lanes;
  for (int rep = 0; rep < 21; ++rep) {  // three of each kind: enough lanes for full column vectors
    const int kind = rep % 7;
    std::vector<T> v(n);
    for (std::size_t j = 0; j < n; ++j) v[j] = static_cast<T>(std::sin(static_cast<double>(j * 7 + rep)) * 6.0);
    if (kind == 1) v[n / 2] = kNaN<T>;
    if (kind == 2) v[n - 1] = kInf<T>;
    if (kind == 3) v.assign(n, -kInf<T>);
    if (kind == 4) v[0] = -kInf<T>;
    if (kind == 5)
      for (std::size_t j = 0; j < n; ++j) v[j] = static_cast<T>(-150.0 * static_cast<double>(j % 5));
    if (kind == 6) v.assign(n, T(3));
    lanes.push_back(v);
  }
  return lanes;
}

template <class T>
void check_soft(const std::string& target) {
  const double tol = std::is_same_v<T, float> ? 4e-6 : 1e-13;
  for (SoftOp op : {SoftOp::Softmax, SoftOp::LogSoftmax, SoftOp::Softmin}) {
    for (const std::size_t n : {1u, 5u, 16u, 37u, 300u}) {
      const auto lanes = soft_lanes<T>(n);
      // Rows n apart + 3 (padding untouched).
      const std::size_t ld = n + 3, rows = lanes.size();
      std::vector<T> x(rows * ld, T(9)), out(rows * ld, T(7));
      for (std::size_t r = 0; r < rows; ++r) std::copy(lanes[r].begin(), lanes[r].end(), x.begin() + r * ld);
      // Columns: lane r at x[j * inner + r], inner = rows + 2 (two lanes unused).
      const std::size_t inner = rows + 2;
      std::vector<T> xc(n * inner, T(9)), oc(n * inner, T(7));
      for (std::size_t r = 0; r < rows; ++r)
        for (std::size_t j = 0; j < n; ++j) xc[j * inner + r] = lanes[r][j];
      if constexpr (std::is_same_v<T, float>) {
        simd::soft_rows_f32(op, x.data(), out.data(), rows, n, ld);
        simd::soft_cols_f32(op, xc.data(), oc.data(), n, inner, rows);
      } else {
        simd::soft_rows_f64(op, x.data(), out.data(), rows, n, ld);
        simd::soft_cols_f64(op, xc.data(), oc.data(), n, inner, rows);
      }
      for (std::size_t r = 0; r < rows; ++r) {
        const std::vector<double> want = soft_ref(op, lanes[r]);
        for (std::size_t j = 0; j < n; ++j) {
          const double w = want[j];
          const double tw = op == SoftOp::LogSoftmax ? tol * (1 + std::fabs(w)) : tol * std::fabs(w) + 1e-30;
          ASSERT_TRUE(near<double>(out[r * ld + j], w, 0, tw))
              << target << " rows op " << int(op) << " n=" << n << " lane " << r << " j " << j << " got " << out[r * ld + j]
              << " want " << w;
          ASSERT_TRUE(near<double>(oc[j * inner + r], w, 0, tw))
              << target << " cols op " << int(op) << " n=" << n << " lane " << r << " j " << j << " got "
              << oc[j * inner + r] << " want " << w;
        }
        for (std::size_t j = n; j < ld; ++j) ASSERT_EQ(out[r * ld + j], T(7)) << target << " row padding";
      }
      for (std::size_t j = 0; j < n; ++j)
        for (std::size_t r = rows; r < inner; ++r) ASSERT_EQ(oc[j * inner + r], T(7)) << target << " column padding";
    }
  }
}

template <class T>
void check_dim_kernels(const std::string& target) {
  // acc_rows: exactly the double loop.
  for (const std::size_t m : {1u, 9u, 64u, 101u}) {
    std::vector<T> x(m);
    std::vector<double> acc(m), accp(m), want(m), wantp(m);
    for (std::size_t i = 0; i < m; ++i) {
      x[i] = static_cast<T>(std::sin(static_cast<double>(i)) * 3.0);
      acc[i] = want[i] = static_cast<double>(i);
      accp[i] = wantp[i] = 0.5 + static_cast<double>(i);
      want[i] += static_cast<double>(x[i]);
      wantp[i] *= static_cast<double>(x[i]);
    }
    if constexpr (std::is_same_v<T, float>) {
      simd::acc_rows_f32(acc.data(), x.data(), m, false);
      simd::acc_rows_f32(accp.data(), x.data(), m, true);
    } else {
      simd::acc_rows_f64(acc.data(), x.data(), m, false);
      simd::acc_rows_f64(accp.data(), x.data(), m, true);
    }
    EXPECT_EQ(acc, want) << target << " m=" << m;
    EXPECT_EQ(accp, wantp) << target << " m=" << m;
  }
  // acc_rows_strided: rows `inner` apart, each lane in row order: exactly the double loop
  // (row counts around its 8-row blocks; two padding lanes untouched).
  for (const std::size_t rows : {1u, 8u, 13u, 40u}) {
    const std::size_t m = 37, inner = 39;
    std::vector<T> x(rows * inner);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<T>(std::cos(static_cast<double>(i) * 0.7) * 1.5 + 0.25);
    for (const bool prod : {false, true}) {
      std::vector<double> acc(inner), want(inner);
      for (std::size_t i = 0; i < inner; ++i) acc[i] = want[i] = 0.5 + static_cast<double>(i);
      for (std::size_t k = 0; k < rows; ++k)
        for (std::size_t i = 0; i < m; ++i) {
          const double v = static_cast<double>(x[k * inner + i]);
          want[i] = prod ? want[i] * v : want[i] + v;
        }
      if constexpr (std::is_same_v<T, float>) simd::acc_rows_strided_f32(acc.data(), x.data(), rows, inner, m, prod);
      else simd::acc_rows_strided_f64(acc.data(), x.data(), rows, inner, m, prod);
      EXPECT_EQ(acc, want) << target << " strided rows=" << rows << " prod " << prod;
    }
  }
  // argext over rows and down columns: many ties, -0/+0, NaNs.
  for (const std::size_t n : {1u, 7u, 40u, 133u}) {
    for (int kind = 0; kind < 3; ++kind) {
      std::vector<T> x(n);
      for (std::size_t i = 0; i < n; ++i) x[i] = static_cast<T>(static_cast<double>((i * 7) % 13) - 6.0);
      if (kind == 1 && n > 3) { x[n - 2] = kNaN<T>; x[n - 1] = kNaN<T>; }
      if (kind == 2) for (std::size_t i = 0; i < n; ++i) x[i] = i % 2 ? T(-0.0) : T(0);
      for (const bool is_min : {false, true}) {
        std::size_t want = 0;
        for (std::size_t i = 1; i < n; ++i) {
          if (std::isnan(x[want])) break;
          if (std::isnan(x[i]) || (is_min ? x[i] < x[want] : x[i] > x[want])) want = i;
        }
        std::size_t got;
        if constexpr (std::is_same_v<T, float>) got = simd::argext_f32(x.data(), n, is_min);
        else got = simd::argext_f64(x.data(), n, is_min);
        EXPECT_EQ(got, want) << target << " n=" << n << " kind " << kind << " min " << is_min;
        // The same values down a column of lanes (lane r holds x rotated by r).
        const std::size_t m = 19, inner = 21;
        std::vector<T> xc(n * inner, T(100)), best(m);
        std::vector<std::int64_t> where(m, -1);
        for (std::size_t r = 0; r < m; ++r)
          for (std::size_t j = 0; j < n; ++j) xc[j * inner + r] = x[(j + r) % n];
        if constexpr (std::is_same_v<T, float>) simd::argext_cols_f32(xc.data(), n, inner, m, is_min, best.data(), where.data());
        else simd::argext_cols_f64(xc.data(), n, inner, m, is_min, best.data(), where.data());
        for (std::size_t r = 0; r < m; ++r) {
          std::size_t w = 0;
          for (std::size_t j = 1; j < n; ++j) {
            const T b = xc[w * inner + r], v = xc[j * inner + r];
            if (std::isnan(b)) break;
            if (std::isnan(v) || (is_min ? v < b : v > b)) w = j;
          }
          ASSERT_EQ(where[r], static_cast<std::int64_t>(w)) << target << " cols n=" << n << " lane " << r << " kind " << kind;
          const T bw = xc[w * inner + r];
          ASSERT_TRUE(std::isnan(bw) ? std::isnan(best[r]) : best[r] == bw && std::signbit(best[r]) == std::signbit(bw));
        }
      }
    }
  }
}

TEST(CpuActSimd, KernelsMatchScalarReferencesOnEveryCompiledTarget) {
  const std::vector<std::int64_t> targets = compiled_targets();
  ASSERT_FALSE(targets.empty());
  for (const std::int64_t t : targets) {
    hwy::SetSupportedTargetsForTest(t);
    const std::string name = hwy::TargetName(t);
    ASSERT_EQ(std::string(current_target_name()), name);
    check_act<float>(name);
    check_act<double>(name);
    check_soft<float>(name);
    check_soft<double>(name);
    check_dim_kernels<float>(name);
    check_dim_kernels<double>(name);
  }
  hwy::SetSupportedTargetsForTest(0);
}


// The softmax family's f32 exp (ExpNonPos: a degree-5 polynomial) over its whole range,
// tighter than the 4e-6 of check_soft: lanes [0, t] (cols kernel, both of its passes)
// and rows [0, t x 32] (rows kernel) for t from -87 to 0, against double. Measured
// worst relative error 2.9e-7 (2.4 ulp) on AVX3; the tolerance is 4.5e-7.
void check_soft_exp(const std::string& target) {
  constexpr std::size_t kT = 20011, kRowLen = 33;
  constexpr double kTol = 4.5e-7;
  std::vector<float> ts(kT);
  for (std::size_t k = 0; k < kT; ++k) ts[k] = static_cast<float>(-87.0 * static_cast<double>(k) / (kT - 1));
  std::vector<float> xc(2 * kT, 0.0f), oc(2 * kT);
  std::copy(ts.begin(), ts.end(), xc.begin() + kT);
  simd::soft_cols_f32(SoftOp::Softmax, xc.data(), oc.data(), 2, kT, kT);
  std::vector<float> xr(kT * kRowLen), orow(kT * kRowLen);
  for (std::size_t k = 0; k < kT; ++k)
    for (std::size_t j = 0; j < kRowLen; ++j) xr[k * kRowLen + j] = j == 0 ? 0.0f : ts[k];
  simd::soft_rows_f32(SoftOp::Softmax, xr.data(), orow.data(), kT, kRowLen, kRowLen);
  double worst = 0;
  for (std::size_t k = 0; k < kT; ++k) {
    const double e = std::exp(static_cast<double>(ts[k]));
    if (e < 1e-37) continue;  // the denormal range goes to libm (checked by check_soft)
    const double want_c = e / (1 + e), want_r = e / (1 + 32 * e);
    const double err_c = std::fabs(oc[kT + k] - want_c) / want_c, err_r = std::fabs(orow[k * kRowLen + 5] - want_r) / want_r;
    worst = std::max({worst, err_c, err_r});
    ASSERT_LE(err_c, kTol) << target << " cols t=" << ts[k] << " got " << oc[kT + k] << " want " << want_c;
    ASSERT_LE(err_r, kTol) << target << " rows t=" << ts[k] << " got " << orow[k * kRowLen + 5] << " want " << want_r;
  }
  std::printf("%s: softmax exp worst relative error %.3g\n", target.c_str(), worst);
}

TEST(CpuActSimd, SoftmaxExpWithinAFewUlpOverItsRangeOnEveryTarget) {
  for (const std::int64_t t : compiled_targets()) {
    hwy::SetSupportedTargetsForTest(t);
    check_soft_exp(hwy::TargetName(t));
  }
  hwy::SetSupportedTargetsForTest(0);
}

// ---- through the backend entries: every layout, f32 / f64 (and bf16 contiguous) -----

template <class T>
std::vector<double> read(const Prim& p) {
  std::vector<double> out;
  for (T v : to_vec<T>(p)) out.push_back(static_cast<double>(dispatch::load_elem(v)));
  return out;
}

template <class T>
void check_entries(DType dt) {
  const std::size_t rows = 6, cols = 37;
  auto gen_x = [](std::size_t i, std::size_t j) { return static_cast<T>(std::sin(static_cast<double>(i * cols + j)) * 5.0); };
  auto gen_g = [](std::size_t i, std::size_t j) { return static_cast<T>(std::cos(static_cast<double>(i + 3 * j))); };
  const double tol = std::is_same_v<T, double> ? 1e-12 : 1e-5;
  std::vector<T> alpha(cols);
  for (std::size_t j = 0; j < cols; ++j) alpha[j] = static_cast<T>(0.1 * static_cast<double>(j) - 1.0);
  for (Lay lay : kLayouts) {
    const std::size_t r = rows_of(lay, rows);
    const std::vector<T> xv = logical_values<T>(lay, rows, cols, gen_x), gv = logical_values<T>(lay, rows, cols, gen_g);
    const std::string where = lay_name(lay) + " " + std::string(dtype_name(dt));
    auto x = [&] { return build(lay, xv, rows, cols, dt); };
    auto g = [&] { return build(lay, gv, rows, cols, dt); };
    // prelu with alpha [1, cols] and [1, 1] (broadcast rows and a broadcast value).
    const std::vector<double> pr = read<T>(entry<Family::Binary>(OpCode::prelu)(x(), from_vec(alpha, Shape{1, cols}, dt)));
    const std::vector<double> ps = read<T>(entry<Family::Binary>(OpCode::prelu)(x(), from_vec(std::vector<T>{T(0.25)}, Shape{1, 1}, dt)));
    ASSERT_EQ(pr.size(), r * cols) << where;
    for (std::size_t k = 0; k < pr.size(); ++k) {
      const T a = xv[k];
      ASSERT_EQ(pr[k], static_cast<double>(a < 0 ? static_cast<T>(a * alpha[k % cols]) : a)) << where << " prelu " << k;
      ASSERT_EQ(ps[k], static_cast<double>(a < 0 ? static_cast<T>(a * T(0.25)) : a)) << where << " prelu scalar " << k;
    }
    for (Act2Op op : {Act2Op::ReluGrad, Act2Op::SigmoidGrad, Act2Op::LogSigmoidGrad, Act2Op::GeluGrad}) {
      const OpCode code = op == Act2Op::ReluGrad      ? OpCode::relu_backward
                          : op == Act2Op::SigmoidGrad ? OpCode::sigmoid_backward
                          : op == Act2Op::GeluGrad    ? OpCode::gelu_backward
                                                      : OpCode::log_sigmoid_backward;
      const std::vector<double> got = read<T>(entry<Family::Binary>(code)(x(), g()));
      ASSERT_EQ(got.size(), r * cols) << where;
      for (std::size_t k = 0; k < got.size(); ++k)
        ASSERT_NEAR(got[k], static_cast<double>(ref2(op, xv[k], gv[k])), tol * 10) << where << " op2 " << int(op) << " " << k;
    }
    for (const std::size_t dim : {0u, 1u}) {
      const std::size_t n = dim == 0 ? r : cols, lanes = dim == 0 ? cols : r;
      auto at_ = [&](const std::vector<T>& v, std::size_t lane, std::size_t j) {
        return dim == 0 ? v[j * cols + lane] : v[lane * cols + j];
      };
      for (SoftOp op : {SoftOp::Softmax, SoftOp::LogSoftmax, SoftOp::Softmin}) {
        const OpCode code = op == SoftOp::Softmax ? OpCode::softmax : op == SoftOp::LogSoftmax ? OpCode::log_softmax : OpCode::softmin;
        const std::vector<double> got = read<T>(entry<Family::Dim>(code)(x(), dim));
        ASSERT_EQ(got.size(), r * cols) << where;
        for (std::size_t lane = 0; lane < lanes; ++lane) {
          std::vector<T> line(n);
          for (std::size_t j = 0; j < n; ++j) line[j] = at_(xv, lane, j);
          const std::vector<double> want = soft_ref(op, line);
          for (std::size_t j = 0; j < n; ++j) {
            const std::size_t k = dim == 0 ? j * cols + lane : lane * cols + j;
            ASSERT_NEAR(got[k], want[j], tol * (1 + std::fabs(want[j]))) << where << " soft " << int(op) << " dim " << dim;
          }
        }
      }
      if (n == 0) continue;
      const std::vector<double> sum = read<T>(entry<Family::Dim>(OpCode::sum_dim)(x(), dim));
      const std::vector<double> mx = read<T>(entry<Family::Dim>(OpCode::max_dim)(x(), dim));
      const std::vector<std::int64_t> am = to_vec<std::int64_t>(entry<Family::DimIndex>(OpCode::argmax)(x(), dim, DType::I64));
      const std::vector<std::int64_t> an = to_vec<std::int64_t>(entry<Family::DimIndex>(OpCode::argmin)(x(), dim, DType::I64));
      ASSERT_EQ(sum.size(), lanes) << where;
      for (std::size_t lane = 0; lane < lanes; ++lane) {
        double s = 0;
        std::size_t hi = 0, lo = 0;
        for (std::size_t j = 0; j < n; ++j) {
          const T v = at_(xv, lane, j);
          s += static_cast<double>(v);
          if (v > at_(xv, lane, hi)) hi = j;
          if (v < at_(xv, lane, lo)) lo = j;
        }
        ASSERT_NEAR(sum[lane], s, tol * 10) << where << " sum_dim " << dim;
        ASSERT_EQ(mx[lane], static_cast<double>(at_(xv, lane, hi))) << where << " max_dim " << dim;
        ASSERT_EQ(am[lane], static_cast<std::int64_t>(hi)) << where << " argmax " << dim << " lane " << lane;
        ASSERT_EQ(an[lane], static_cast<std::int64_t>(lo)) << where << " argmin " << dim << " lane " << lane;
      }
    }
  }
}

TEST(CpuActSimd, LongRunsSplitOverThreadsMatchTheElementRules) {
  // Runs past 1M elements go in pieces on the library's threads (the selects from 1M, the
  // math ops from 256K): every element of a 1M + 77 run (two or more pieces and a tail)
  // against the rules written here; the selects are exact, so equality.
  const std::size_t n = (std::size_t{1} << 20) + 77;
  std::vector<float> x(n), b(n), out(n);
  for (std::size_t i = 0; i < n; ++i) {
    x[i] = static_cast<float>(static_cast<int>(i % 2001) - 1000) * 0.01f;
    b[i] = static_cast<float>(static_cast<int>(i % 37) - 18) * 0.25f;
  }
  auto expect_all = [&](const char* what, auto rule) {
    std::size_t bad = 0, first = n;
    for (std::size_t i = 0; i < n; ++i)
      if (!(out[i] == rule(i))) {
        ++bad;
        first = std::min(first, i);
      }
    EXPECT_EQ(bad, 0u) << what << ": first at " << first;
  };
  simd::act_f32(ActOp::Relu, x.data(), out.data(), n, 0.0f, 0.0f);
  expect_all("relu", [&](std::size_t i) { return x[i] <= 0.0f ? 0.0f : x[i]; });
  simd::act_f32(ActOp::LeakyRelu, x.data(), out.data(), n, 0.125f, 0.0f);
  expect_all("leaky_relu", [&](std::size_t i) { return x[i] < 0.0f ? x[i] * 0.125f : x[i]; });
  simd::act_f32(ActOp::HardSigmoid, x.data(), out.data(), n, 0.2f, 0.5f);
  std::size_t off = 0;  // within one rounding of the double formula (the test may contract to an FMA)
  for (std::size_t i = 0; i < n; ++i) {
    const double v = std::clamp(0.2 * static_cast<double>(x[i]) + 0.5, 0.0, 1.0);
    if (std::fabs(out[i] - v) > 2e-7) ++off;
  }
  EXPECT_EQ(off, 0u) << "hard_sigmoid";
  simd::act2_f32(Act2Op::ReluGrad, x.data(), b.data(), false, out.data(), n);
  expect_all("relu_backward", [&](std::size_t i) { return x[i] <= 0.0f ? 0.0f : b[i]; });
  simd::act2_f32(Act2Op::Prelu, x.data(), b.data(), false, out.data(), n);
  expect_all("prelu", [&](std::size_t i) { return x[i] < 0.0f ? x[i] * b[i] : x[i]; });
  simd::act2_f32(Act2Op::Prelu, x.data(), b.data() + 5, true, out.data(), n);
  expect_all("prelu, one alpha", [&](std::size_t i) { return x[i] < 0.0f ? x[i] * b[5] : x[i]; });
  // in place, as the entries do on a reusable input
  std::vector<float> y = x;
  simd::act_f32(ActOp::Relu, y.data(), y.data(), n, 0.0f, 0.0f);
  out = y;
  expect_all("relu in place", [&](std::size_t i) { return x[i] <= 0.0f ? 0.0f : x[i]; });
  // sigmoid (a math op: pieces of 64K) within a few ulp of the double formula
  simd::act_f32(ActOp::Sigmoid, x.data(), out.data(), n, 0.0f, 0.0f);
  std::size_t far = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double want = 1.0 / (1.0 + std::exp(-static_cast<double>(x[i])));
    if (std::fabs(out[i] - want) > 4e-7 * want + 1e-30) ++far;
  }
  EXPECT_EQ(far, 0u) << "sigmoid";
}

TEST(CpuActEntries, ActivationsSoftmaxAndDimReductionsOnEveryLayout) {
  check_entries<float>(DType::F32);
  check_entries<double>(DType::F64);
}

// softmax / log_softmax / softmin along an outer dim of a [3, 200, 1100] tensor: lanes
// in two blocks, rows in four groups whose states are joined (on threads: 660K
// elements), against a double loop. Lanes with a NaN, a +inf, all -inf, the first
// group all -inf, a max rising in every row, and a spread where exp underflows.
template <class T>
void check_soft_outer(DType dt) {
  const std::size_t outer = 3, n = 200, inner = 1100;
  std::vector<T> x(outer * n * inner);
  auto at_ = [&](std::size_t o, std::size_t j, std::size_t i) -> T& { return x[(o * n + j) * inner + i]; };
  for (std::size_t o = 0; o < outer; ++o)
    for (std::size_t j = 0; j < n; ++j)
      for (std::size_t i = 0; i < inner; ++i) {
        T v = static_cast<T>(std::sin(static_cast<double>(o * 7919 + j * 131 + i)) * 8.0);
        switch (i % 97) {
          case 1: if (j == 150) v = kNaN<T>; break;
          case 2: if (j == 3) v = kInf<T>; break;
          case 3: v = -kInf<T>; break;
          case 4: if (j < 64) v = -kInf<T>; break;
          case 5: v = static_cast<T>(0.25 * static_cast<double>(j)); break;
          case 6: v = static_cast<T>(-120.0 * static_cast<double>(j % 3)); break;
          default: break;
        }
        at_(o, j, i) = v;
      }
  const double tol = std::is_same_v<T, float> ? 4e-6 : 1e-13;
  for (SoftOp op : {SoftOp::Softmax, SoftOp::LogSoftmax, SoftOp::Softmin}) {
    const OpCode code = op == SoftOp::Softmax ? OpCode::softmax : op == SoftOp::LogSoftmax ? OpCode::log_softmax : OpCode::softmin;
    const std::vector<T> got = to_vec<T>(entry<Family::Dim>(code)(from_vec(x, Shape{outer, n, inner}, dt), 1));
    ASSERT_EQ(got.size(), x.size());
    for (std::size_t o = 0; o < outer; ++o)
      for (std::size_t i = 0; i < inner; ++i) {
        std::vector<T> line(n);
        for (std::size_t j = 0; j < n; ++j) line[j] = at_(o, j, i);
        const std::vector<double> want = soft_ref(op, line);
        for (std::size_t j = 0; j < n; ++j) {
          const double w = want[j], g = static_cast<double>(got[(o * n + j) * inner + i]);
          const double tw = op == SoftOp::LogSoftmax ? tol * (1 + std::fabs(w)) : tol * std::fabs(w) + 1e-30;
          ASSERT_TRUE(near<double>(g, w, 0, tw)) << dtype_name(dt) << " op " << int(op) << " outer " << o << " lane " << i
                                                 << " row " << j << " got " << g << " want " << w;
        }
      }
  }
}

TEST(CpuActEntries, OuterDimSoftmaxInRowGroupsMatchesADoubleLoop) {
  check_soft_outer<float>(DType::F32);
  check_soft_outer<double>(DType::F64);
}

// Along dim 0 of a transposed (strided) [4100, 37] tensor: 4100 rows in the most groups
// (16 of 257 rows, joined in order, on threads), 37 lanes (two vectors and a scalar tail
// of 5 on AVX3), the input made contiguous first; f32 and f64 against a double loop.
template <class T>
void check_soft_tall(DType dt) {
  const std::size_t rows = 4100, cols = 37;
  auto gen = [](std::size_t i, std::size_t j) {
    if (j == 3) return static_cast<T>(0.01 * static_cast<double>(i));           // max rising in every row
    if (j == 4 && i == 4000) return std::numeric_limits<T>::quiet_NaN();       // NaN in the last group
    return static_cast<T>(std::sin(static_cast<double>(i * 31 + j * 7)) * 9.0);
  };
  const std::vector<T> xv = logical_values<T>(Lay::Transposed, rows, cols, gen);
  const double tol = std::is_same_v<T, float> ? 4e-6 : 1e-13;
  for (SoftOp op : {SoftOp::Softmax, SoftOp::LogSoftmax, SoftOp::Softmin}) {
    const OpCode code = op == SoftOp::Softmax ? OpCode::softmax : op == SoftOp::LogSoftmax ? OpCode::log_softmax : OpCode::softmin;
    const std::vector<T> got = to_vec<T>(entry<Family::Dim>(code)(build(Lay::Transposed, xv, rows, cols, dt), 0));
    ASSERT_EQ(got.size(), rows * cols);
    for (std::size_t j = 0; j < cols; ++j) {
      std::vector<T> line(rows);
      for (std::size_t i = 0; i < rows; ++i) line[i] = xv[i * cols + j];
      const std::vector<double> want = soft_ref(op, line);
      for (std::size_t i = 0; i < rows; ++i) {
        const double w = want[i], g = static_cast<double>(got[i * cols + j]);
        const double tw = op == SoftOp::LogSoftmax ? tol * (1 + std::fabs(w)) : tol * std::fabs(w) + 1e-30;
        ASSERT_TRUE(near<double>(g, w, 0, tw)) << dtype_name(dt) << " op " << int(op) << " lane " << j << " row " << i
                                               << " got " << g << " want " << w;
      }
    }
  }
}

TEST(CpuActEntries, OuterDimSoftmaxOfATallTransposedTensorMatchesADoubleLoop) {
  check_soft_tall<float>(DType::F32);
  check_soft_tall<double>(DType::F64);
}

TEST(CpuActEntries, HalvesGoThroughF32) {
  const std::size_t rows = 5, cols = 40;
  std::vector<bf16> x(rows * cols);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = dispatch::store_elem<bf16>(static_cast<float>(std::sin(0.3 * static_cast<double>(i)) * 4));
  const std::vector<double> sm = read<bf16>(entry<Family::Dim>(OpCode::softmax)(from_vec(x, Shape{rows, cols}, DType::BF16), 1));
  const std::vector<double> ge = read<bf16>(entry<Family::Unary>(OpCode::gelu)(from_vec(x, Shape{rows, cols}, DType::BF16)));
  for (std::size_t i = 0; i < rows; ++i) {
    std::vector<double> line(cols);
    for (std::size_t j = 0; j < cols; ++j) line[j] = static_cast<double>(dispatch::load_elem(x[i * cols + j]));
    const std::vector<double> want = soft_ref(SoftOp::Softmax, line);
    for (std::size_t j = 0; j < cols; ++j) {
      ASSERT_NEAR(sm[i * cols + j], want[j], 1e-2 * want[j] + 1e-6) << i << "," << j;
      const double a = line[j], w = a * (std::erf(a / std::sqrt(2.0)) + 1) / 2;
      ASSERT_NEAR(ge[i * cols + j], w, 1e-2 * std::fabs(w) + 1e-3) << i << "," << j;
    }
  }
}

// Stable order (equal keys by index), NaN largest: a naive reference of the top k /
// the full sort of lanes with many ties and NaNs, long enough for the one-scan top-k
// and vqsort, on two threads' worth of lanes.
TEST(CpuSortEntries, TopKAndSortMatchAStableReference) {
  const std::size_t rows = 70, n = 1000;
  std::vector<float> x(rows * n);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 7919) % 37) - 18.0f;
  for (std::size_t r = 0; r < rows; r += 3) x[r * n + (r * 13) % n] = kNaN<float>;
  x[5 * n + 1] = -0.0f;
  x[5 * n + 2] = 0.0f;
  // Key order of a < b for descending: NaN first, then larger; ties by index.
  auto before = [](float a, std::size_t ia, float b, std::size_t ib) {
    if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && (!std::isnan(b) || ia < ib);
    return a > b || (a == b && ia < ib);
  };
  for (const std::size_t k : {1u, 5u, 16u, 200u, 1000u}) {
    auto [vals, idxs] = entry<Family::TopKWithIndices>(OpCode::topk_with_indices)(from_vec(x, Shape{rows, n}), 1, k, DType::I64);
    const std::vector<float> v = to_vec<float>(vals);
    const std::vector<std::int64_t> ix = to_vec<std::int64_t>(idxs);
    for (std::size_t r = 0; r < rows; ++r) {
      std::vector<std::size_t> order(n);
      for (std::size_t j = 0; j < n; ++j) order[j] = j;
      std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return before(x[r * n + a], a, x[r * n + b], b); });
      for (std::size_t j = 0; j < k; ++j) {
        ASSERT_EQ(ix[r * k + j], static_cast<std::int64_t>(order[j])) << "k " << k << " row " << r << " pos " << j;
        const float w = x[r * n + order[j]];
        ASSERT_TRUE(std::isnan(w) ? std::isnan(v[r * k + j]) : v[r * k + j] == w && std::signbit(v[r * k + j]) == std::signbit(w));
      }
    }
  }
  // Ascending argsort: NaN last, ties by index.
  const std::vector<std::int64_t> as = to_vec<std::int64_t>(entry<Family::Argsort>(OpCode::argsort)(from_vec(x, Shape{rows, n}), 1, false, DType::I64));
  for (std::size_t r = 0; r < rows; ++r) {
    std::vector<std::size_t> order(n);
    for (std::size_t j = 0; j < n; ++j) order[j] = j;
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
      const float fa = x[r * n + a], fb = x[r * n + b];
      return !std::isnan(fa) && (std::isnan(fb) || fa < fb);
    });
    for (std::size_t j = 0; j < n; ++j) ASSERT_EQ(as[r * n + j], static_cast<std::int64_t>(order[j])) << "row " << r << " pos " << j;
  }
}

// The small-k scan on f64 and f32 lanes, contiguous and strided (dim 0 of the transpose
// layout), where the k-th value is tied by many others (+0.0 and -0.0 alike), a NaN or an
// infinity: the reference is a stable sort of the lane by (NaN first, value descending).
template <class T>
void check_topk_ties(std::size_t dim) {
  const std::size_t lanes = 5, n = 300;
  std::vector<T> lane_vals(lanes * n);  // lane l, position j at [l * n + j]
  for (std::size_t l = 0; l < lanes; ++l)
    for (std::size_t j = 0; j < n; ++j) {
      const std::size_t h = (j * 2654435761u + l * 97) % 11;
      T v = h < 4 ? T(0) : h < 7 ? T(-0.0) : h < 9 ? T(1) : h == 9 ? T(-1) : T(2);
      if (l == 1 && j % 50 == 7) v = kNaN<T>;
      if (l == 2 && j % 40 == 3) v = std::numeric_limits<T>::infinity();
      lane_vals[l * n + j] = v;
    }
  // dim 1: rows are lanes; dim 0: columns are lanes (shape [n, lanes]).
  std::vector<T> data(lanes * n);
  for (std::size_t l = 0; l < lanes; ++l)
    for (std::size_t j = 0; j < n; ++j) data[dim == 1 ? l * n + j : j * lanes + l] = lane_vals[l * n + j];
  const Shape shape = dim == 1 ? Shape{lanes, n} : Shape{n, lanes};
  for (const std::size_t k : {1u, 3u, 8u, 16u}) {
    auto [vals, idxs] = entry<Family::TopKWithIndices>(OpCode::topk_with_indices)(from_vec(data, shape), dim, k, DType::I64);
    const std::vector<T> v = to_vec<T>(vals);
    const std::vector<std::int64_t> ix = to_vec<std::int64_t>(idxs);
    for (std::size_t l = 0; l < lanes; ++l) {
      const T* x = lane_vals.data() + l * n;
      std::vector<std::size_t> order(n);
      for (std::size_t j = 0; j < n; ++j) order[j] = j;
      std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
        if (std::isnan(x[a]) || std::isnan(x[b])) return std::isnan(x[a]) && !std::isnan(x[b]);
        return x[a] > x[b];
      });
      for (std::size_t q = 0; q < k; ++q) {
        const std::size_t at = dim == 1 ? l * k + q : q * lanes + l;
        ASSERT_EQ(ix[at], static_cast<std::int64_t>(order[q])) << "k " << k << " lane " << l << " pos " << q;
        const T w = x[order[q]];
        ASSERT_TRUE(std::isnan(w) ? std::isnan(v[at]) : v[at] == w && std::signbit(v[at]) == std::signbit(w));
      }
    }
  }
}

TEST(CpuSortEntries, SmallTopKScanKeepsTiesStableOnEveryLayout) {
  for (std::size_t dim : {0u, 1u}) {
    SCOPED_TRACE("dim " + std::to_string(dim));
    check_topk_ties<float>(dim);
    check_topk_ties<double>(dim);
  }
}

// parallel_chunks: every chunk runs exactly once, also when callers race (a second
// caller runs serially) and when a chunk body calls it again (nested: serial).
TEST(CpuParallelChunks, EveryChunkOnceUnderConcurrentAndNestedCalls) {
  auto run = [](std::size_t chunks) {
    std::vector<std::atomic<int>> hits(chunks);
    auto body = [&](std::size_t c) {
      hits[c].fetch_add(1);
      if (c % 7 == 0) {  // nested
        std::atomic<int> inner{0};
        auto in = [&](std::size_t) { inner.fetch_add(1); };
        parallel_chunks(5, in);
        EXPECT_EQ(inner.load(), 5);
      }
    };
    parallel_chunks(chunks, body);
    for (std::size_t c = 0; c < chunks; ++c) EXPECT_EQ(hits[c].load(), 1) << "chunk " << c << " of " << chunks;
  };
  for (std::size_t n : {0u, 1u, 2u, 3u, 64u, 1000u}) run(n);
  std::vector<std::thread> callers;
  for (int t = 0; t < 4; ++t)
    callers.emplace_back([&] {
      for (int r = 0; r < 50; ++r) run(37);
    });
  for (auto& t : callers) t.join();
}

}  // namespace
}  // namespace tensor::cpu::test
