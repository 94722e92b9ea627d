// Every default composition agrees with the CPU backend's native override: the
// same inputs go through the "mini" backend (required entries only, so defaulted
// ops run Dispatch's compositions) and through the CPU backend, and the results
// must match. The op list comes from the op table: a defaulted op the CPU
// overrides must have an input recipe here, or the coverage test fails.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <array>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "dispatch/dispatch.hpp"
#include "lib/core/nn_shape.hpp"
#include "family_calls.hpp"
#include "mini_backend.hpp"
#include "tensor/error.hpp"

namespace {

using namespace tensor;
using namespace tensor::dispatch;

const DeviceId kCpu{kCpuDeviceType, 0};

DeviceId mini() { return tt::mini::device().id(); }

// Host inputs, uploaded identically to both devices.
TensorData floats(const Shape& s, std::uint32_t seed, bool specials) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  std::vector<float> v(s.num_elements());
  for (float& x : v) x = u(rng);
  if (specials && v.size() > 6) {
    v[1] = std::nanf("");
    v[3] = INFINITY;
    v[4] = -INFINITY;
    v[5] = 0.0f;
    v[6] = v[0];  // a tie
  }
  return TensorData::from(v, s);
}
TensorData ints(const Shape& s, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<std::int32_t> u(-5, 5);
  std::vector<std::int32_t> v(s.num_elements());
  for (auto& x : v) x = u(rng);
  return TensorData::from(v, s);
}
TensorData bools(const Shape& s, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<bool> v(s.num_elements());
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = (rng() & 1u) != 0;
  return TensorData::from(v, s);
}

struct Inputs {
  Kind kind;
  TensorData a, b;
};

// Compares two host results: same dtype and shape; floats within tolerance
// (NaN matches NaN, infinities must match exactly); everything else exactly.
::testing::AssertionResult same(const TensorData& want, const TensorData& got) {
  if (want.dtype() != got.dtype())
    return ::testing::AssertionFailure() << "dtype " << dtype_name(got.dtype()) << " vs " << dtype_name(want.dtype());
  if (!(want.shape() == got.shape()))
    return ::testing::AssertionFailure() << "shape " << got.shape().to_string() << " vs " << want.shape().to_string();
  if (!is_float(want.dtype())) {
    if (want.bytes() == got.bytes() ||
        (is_bool(want.dtype()) && want.to_vec<bool>() == got.to_vec<bool>()))
      return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "values " << got.to_string() << " vs " << want.to_string();
  }
  const auto w = want.convert(DType::F64).to_vec<double>();
  const auto g = got.convert(DType::F64).to_vec<double>();
  for (std::size_t i = 0; i < w.size(); ++i) {
    if (std::isnan(w[i]) && std::isnan(g[i])) continue;
    if (std::isinf(w[i]) || std::isinf(g[i])) {
      if (w[i] == g[i]) continue;
    } else if (std::fabs(w[i] - g[i]) <= 1e-5 + 1e-5 * std::fabs(w[i])) {
      continue;
    }
    return ::testing::AssertionFailure() << "element " << i << ": default " << g[i] << " vs native " << w[i] << "\n  native "
                                         << want.to_string() << "\n  default " << got.to_string();
  }
  return ::testing::AssertionSuccess();
}


DispatchTensor up(DeviceId d, const TensorData& t, Kind k) { return from_data(t, d, k); }


struct Case {
  std::vector<Inputs> inputs;
  std::function<std::vector<DispatchTensor>(OpCode, DeviceId, const Inputs&)> run;
};

std::vector<Inputs> numeric_inputs(const Shape& s, bool specials = true) {
  return {{Kind::Float, floats(s, 1, specials), floats(s, 2, specials)}, {Kind::Int, ints(s, 3), ints(s, 4)}};
}

// ---- module ops: fixed shapes and options per op (each recipe runs a few variants) ----
std::vector<DispatchTensor> one_of(DispatchTensor t) { std::vector<DispatchTensor> v; v.push_back(std::move(t)); return v; }
DispatchTensor fl(DeviceId d, const Shape& s, std::uint32_t seed) { return from_data(floats(s, seed, false), d, Kind::Float); }
DispatchTensor none() { return DispatchTensor(); }
ConvArgs cargs(std::size_t rank, std::array<std::int64_t, 3> st, std::array<std::int64_t, 3> pad, std::array<std::int64_t, 3> dil,
               std::int64_t groups, std::array<std::int64_t, 3> pout = {0, 0, 0}) {
  ConvArgs a;
  a.rank = rank;
  a.stride = st;
  a.padding = pad;
  a.dilation = dil;
  a.groups = groups;
  a.padding_out = pout;
  return a;
}
PoolArgs pargs(std::size_t rank, std::array<std::int64_t, 3> k, std::array<std::int64_t, 3> st, std::array<std::int64_t, 3> pad,
               std::array<std::int64_t, 3> dil, bool ceil, bool cip = true) {
  PoolArgs a;
  a.rank = rank;
  a.kernel = k;
  a.stride = st;
  a.padding = pad;
  a.dilation = dil;
  a.ceil_mode = ceil;
  a.count_include_pad = cip;
  return a;
}
PoolArgs adaptive(std::size_t rank, std::array<std::int64_t, 3> out) {
  PoolArgs a;
  a.rank = rank;
  a.output_size = out;
  return a;
}

using NnRun = std::function<std::vector<DispatchTensor>(DeviceId)>;
NnRun nn_recipe(OpCode op) {
  const ConvArgs c1 = cargs(1, {2, 1, 1}, {1, 0, 0}, {2, 1, 1}, 2);
  const ConvArgs c2 = cargs(2, {2, 1, 1}, {1, 1, 0}, {1, 2, 1}, 2);
  const ConvArgs c3 = cargs(3, {1, 2, 1}, {0, 1, 1}, {1, 1, 1}, 1);
  const ConvArgs t2 = cargs(2, {2, 2, 1}, {1, 0, 0}, {1, 1, 1}, 2, {1, 1, 0});
  const Shape x2{2, 4, 7, 6}, w2{6, 2, 3, 2};
  const Shape tx2{2, 4, 3, 4}, tw2{4, 3, 3, 2};
  switch (op) {
    case OpCode::conv1d:
      return [=](DeviceId d) { return one_of(conv(op, fl(d, {2, 4, 9}, 1), fl(d, {6, 2, 3}, 2), fl(d, {6}, 3), c1)); };
    case OpCode::conv2d:
      return [=](DeviceId d) {
        auto v = one_of(conv(op, fl(d, x2, 1), fl(d, w2, 2), fl(d, {6}, 3), c2));
        v.push_back(conv(op, fl(d, {1, 3, 5, 5}, 4), fl(d, {2, 3, 3, 3}, 5), none(), cargs(2, {1, 1, 1}, {0, 0, 0}, {1, 1, 1}, 1)));
        return v;
      };
    case OpCode::conv3d:
      return [=](DeviceId d) { return one_of(conv(op, fl(d, {1, 2, 4, 4, 3}, 1), fl(d, {3, 2, 2, 2, 2}, 2), fl(d, {3}, 3), c3)); };
    case OpCode::conv_transpose1d:
      return [=](DeviceId d) {
        return one_of(conv(op, fl(d, {2, 2, 5}, 1), fl(d, {2, 3, 3}, 2), fl(d, {3}, 3), cargs(1, {2, 1, 1}, {1, 0, 0}, {1, 1, 1}, 1, {1, 0, 0})));
      };
    case OpCode::conv_transpose2d:
      return [=](DeviceId d) { return one_of(conv(op, fl(d, tx2, 1), fl(d, tw2, 2), fl(d, {6}, 3), t2)); };
    case OpCode::conv_transpose3d:
      return [=](DeviceId d) {
        return one_of(conv(op, fl(d, {1, 2, 2, 3, 2}, 1), fl(d, {2, 2, 2, 2, 2}, 2), none(), cargs(3, {2, 1, 2}, {0, 0, 1}, {1, 1, 1}, 1)));
      };
    case OpCode::conv_x_backward:
      return [=](DeviceId d) {
        const Shape y = tensor::core::conv_output_shape<2>("t", x2, w2, tensor::nn::ConvOptions<2>{{2, 1}, {1, 1}, {1, 2}, 2});
        auto v = one_of(conv_backward_x(fl(d, y, 7), fl(d, w2, 2), x2, c2));
        // rank 1: stride 3, dilation 2, padding 2 (trailing inputs the forward never reads)
        const Shape x1{2, 2, 12}, w1{4, 2, 3};
        const ConvArgs a1 = cargs(1, {3, 1, 1}, {2, 0, 0}, {2, 1, 1}, 1);
        const Shape y1 = tensor::core::conv_output_shape<1>("t", x1, w1, tensor::nn::ConvOptions<1>{{3}, {2}, {2}, 1});
        v.push_back(conv_backward_x(fl(d, y1, 8), fl(d, w1, 9), x1, a1));
        return v;
      };
    case OpCode::conv_weight_backward:
      return [=](DeviceId d) {
        const Shape y = tensor::core::conv_output_shape<2>("t", x2, w2, tensor::nn::ConvOptions<2>{{2, 1}, {1, 1}, {1, 2}, 2});
        auto v = one_of(conv_backward_weight(fl(d, x2, 1), fl(d, y, 7), w2, c2));
        const Shape x1{2, 2, 12}, w1{4, 2, 3};
        const ConvArgs a1 = cargs(1, {3, 1, 1}, {2, 0, 0}, {2, 1, 1}, 1);
        const Shape y1 = tensor::core::conv_output_shape<1>("t", x1, w1, tensor::nn::ConvOptions<1>{{3}, {2}, {2}, 1});
        v.push_back(conv_backward_weight(fl(d, x1, 8), fl(d, y1, 9), w1, a1));
        return v;
      };
    case OpCode::conv_bias_backward:
      return [=](DeviceId d) { return one_of(conv_backward_bias(fl(d, {2, 3, 4, 5}, 1))); };
    case OpCode::conv_transpose_x_backward:
      return [=](DeviceId d) {
        const Shape y = tensor::core::conv_transpose_output_shape<2>("t", tx2, tw2, tensor::nn::ConvTransposeOptions<2>{{2, 2}, {1, 0}, {1, 1}, {1, 1}, 2});
        return one_of(conv_transpose_backward_x(fl(d, y, 7), fl(d, tw2, 2), tx2, t2));
      };
    case OpCode::conv_transpose_weight_backward:
      return [=](DeviceId d) {
        const Shape y = tensor::core::conv_transpose_output_shape<2>("t", tx2, tw2, tensor::nn::ConvTransposeOptions<2>{{2, 2}, {1, 0}, {1, 1}, {1, 1}, 2});
        return one_of(conv_transpose_backward_weight(fl(d, tx2, 1), fl(d, y, 7), tw2, t2));
      };
    case OpCode::max_pool1d:
      return [=](DeviceId d) {
        auto v = one_of(pool(op, fl(d, {2, 3, 9}, 1), pargs(1, {3, 1, 1}, {2, 1, 1}, {1, 0, 0}, {1, 1, 1}, true)));
        v.push_back(pool(op, fl(d, {2, 3, 9}, 2), pargs(1, {2, 1, 1}, {1, 1, 1}, {1, 0, 0}, {2, 1, 1}, false)));
        return v;
      };
    case OpCode::max_pool2d:
      return [=](DeviceId d) {
        auto v = one_of(pool(op, fl(d, {2, 3, 7, 8}, 1), pargs(2, {3, 2, 1}, {2, 2, 1}, {1, 1, 0}, {1, 2, 1}, true)));
        v.push_back(pool(op, fl(d, {1, 2, 6, 6}, 2), pargs(2, {2, 2, 1}, {2, 2, 1}, {0, 0, 0}, {1, 1, 1}, false)));
        return v;
      };
    case OpCode::max_pool1d_with_indices:
      return [=](DeviceId d) {
        auto [y, i] = max_pool_with_indices(op, fl(d, {2, 3, 9}, 1), pargs(1, {3, 1, 1}, {2, 1, 1}, {1, 0, 0}, {1, 1, 1}, true));
        auto v = one_of(std::move(y));
        v.push_back(std::move(i));
        return v;
      };
    case OpCode::max_pool2d_with_indices:
      return [=](DeviceId d) {
        auto [y, i] = max_pool_with_indices(op, fl(d, {2, 3, 7, 8}, 1), pargs(2, {3, 2, 1}, {2, 2, 1}, {1, 1, 0}, {1, 2, 1}, true));
        auto v = one_of(std::move(y));
        v.push_back(std::move(i));
        return v;
      };
    case OpCode::max_pool_with_indices_backward:
      return [=](DeviceId d) {
        const PoolArgs a = pargs(2, {3, 2, 1}, {2, 2, 1}, {1, 1, 0}, {1, 2, 1}, true);
        auto [y, i] = max_pool_with_indices(OpCode::max_pool2d_with_indices, fl(d, {2, 3, 7, 8}, 1), a);
        return one_of(max_pool_backward(fl(d, y.shape(), 5), std::move(i), Shape{2, 3, 7, 8}, a));
      };
    case OpCode::avg_pool1d:
      return [=](DeviceId d) {
        auto v = one_of(pool(op, fl(d, {2, 3, 6}, 1), pargs(1, {3, 1, 1}, {2, 1, 1}, {1, 0, 0}, {1, 1, 1}, true, true)));
        v.push_back(pool(op, fl(d, {2, 3, 6}, 1), pargs(1, {3, 1, 1}, {2, 1, 1}, {1, 0, 0}, {1, 1, 1}, true, false)));
        return v;
      };
    case OpCode::avg_pool2d:
      return [=](DeviceId d) {
        auto v = one_of(pool(op, fl(d, {2, 3, 7, 6}, 1), pargs(2, {3, 2, 1}, {2, 1, 1}, {1, 1, 0}, {1, 1, 1}, true, true)));
        v.push_back(pool(op, fl(d, {2, 3, 7, 6}, 1), pargs(2, {3, 3, 1}, {2, 2, 1}, {1, 1, 0}, {1, 1, 1}, true, false)));
        v.push_back(pool(op, fl(d, {1, 2, 4, 4}, 2), pargs(2, {2, 2, 1}, {2, 2, 1}, {0, 0, 0}, {1, 1, 1}, false, true)));
        return v;
      };
    case OpCode::avg_pool_backward:
      return [=](DeviceId d) {
        const PoolArgs a = pargs(2, {3, 2, 1}, {2, 1, 1}, {1, 1, 0}, {1, 1, 1}, true, false);
        const Shape y = tensor::core::avg_pool_output_shape<2>("t", Shape{2, 3, 7, 6}, tensor::nn::AvgPoolOptions<2>{{3, 2}, {2, 1}, {1, 1}, false, true});
        auto v = one_of(pool_backward(op, fl(d, y, 5), Shape{2, 3, 7, 6}, a));
        const PoolArgs b = pargs(2, {3, 3, 1}, {2, 2, 1}, {1, 1, 0}, {1, 1, 1}, true, true);
        const Shape yb = tensor::core::avg_pool_output_shape<2>("t", Shape{1, 2, 6, 7}, tensor::nn::AvgPoolOptions<2>{{3, 3}, {2, 2}, {1, 1}, true, true});
        v.push_back(pool_backward(op, fl(d, yb, 6), Shape{1, 2, 6, 7}, b));
        const PoolArgs c = pargs(1, {3, 1, 1}, {2, 1, 1}, {1, 0, 0}, {1, 1, 1}, true, true);  // E11's 1-d pool
        v.push_back(pool_backward(op, fl(d, {1, 1, 4}, 7), Shape{1, 1, 6}, c));
        return v;
      };
    case OpCode::adaptive_avg_pool1d:
      return [=](DeviceId d) { return one_of(pool(op, fl(d, {2, 3, 7}, 1), adaptive(1, {3, 1, 1}))); };
    case OpCode::adaptive_avg_pool2d:
      return [=](DeviceId d) {
        auto v = one_of(pool(op, fl(d, {2, 3, 7, 5}, 1), adaptive(2, {3, 4, 1})));
        v.push_back(pool(op, fl(d, {2, 3, 4, 4}, 2), adaptive(2, {1, 1, 1})));
        return v;
      };
    case OpCode::adaptive_avg_pool_backward:
      return [=](DeviceId d) {
        auto v = one_of(pool_backward(op, fl(d, {2, 3, 3, 4}, 5), Shape{2, 3, 7, 5}, adaptive(2, {3, 4, 1})));
        v.push_back(pool_backward(op, fl(d, {1, 2, 5}, 6), Shape{1, 2, 3}, adaptive(1, {5, 1, 1})));  // upsampling, 1-d
        return v;
      };
    case OpCode::interpolate:
      return [=](DeviceId d) {
        InterpArgs a{{7, 3}, {tensor::nn::InterpolateMode::Bilinear, false}};
        auto v = one_of(interpolate(fl(d, {2, 3, 4, 5}, 1), a));
        a.options = {tensor::nn::InterpolateMode::Bicubic, true};
        v.push_back(interpolate(fl(d, {2, 3, 4, 5}, 1), a));
        return v;
      };
    case OpCode::interpolate_backward:
      return [=](DeviceId d) {
        const InterpArgs a{{7, 3}, {tensor::nn::InterpolateMode::Nearest, false}};
        return one_of(interpolate_backward(fl(d, {2, 3, 7, 3}, 5), Shape{2, 3, 4, 5}, a));
      };
    case OpCode::embedding:
      return [=](DeviceId d) {
        auto idx = from_data(TensorData::from(std::vector<std::int32_t>{0, 4, 2, 2, 1, 3, 0, 4}, Shape{2, 4}), d, Kind::Int);
        return one_of(embedding(fl(d, {5, 3}, 1), std::move(idx)));
      };
    case OpCode::embedding_backward:
      return [=](DeviceId d) {
        auto idx = from_data(TensorData::from(std::vector<std::int32_t>{0, 4, 2, 2, 1, 3, 0, 4}, Shape{2, 4}), d, Kind::Int);
        return one_of(embedding_backward(fl(d, {2, 4, 3}, 1), std::move(idx), Shape{6, 3}));
      };
    case OpCode::rfft:  // along the last dim and a middle one; truncated, padded, odd and prime lengths
      return [=](DeviceId d) {
        std::vector<DispatchTensor> v;
        for (auto [dim, n] : std::vector<std::pair<std::int64_t, std::size_t>>{{-1, 0}, {-1, 4}, {-1, 12}, {1, 0}, {1, 7}}) {
          auto [re, im] = rfft(fl(d, {2, 5, 3}, 7), dim, n);
          v.push_back(std::move(re));
          v.push_back(std::move(im));
        }
        return v;
      };
    case OpCode::irfft:
      return [=](DeviceId d) {
        auto v = one_of(irfft(fl(d, {2, 5, 3}, 1), fl(d, {2, 5, 3}, 2), -1, 0));
        v.push_back(irfft(fl(d, {2, 5, 3}, 3), fl(d, {2, 5, 3}, 4), 1, 0));
        v.push_back(irfft(fl(d, {2, 5}, 5), fl(d, {2, 5}, 6), 1, 9));
        v.push_back(irfft(fl(d, {2, 5}, 5), fl(d, {2, 5}, 6), 1, 3));
        return v;
      };
    case OpCode::layer_norm:
      return [=](DeviceId d) {
        auto v = one_of(layer_norm(fl(d, {2, 3, 5}, 1), fl(d, {5}, 2), fl(d, {5}, 3), 1e-5));
        v.push_back(layer_norm(fl(d, {4, 6}, 4), fl(d, {6}, 5), none(), 0.0));
        return v;
      };
    case OpCode::attention:
      return [=](DeviceId d) {
        std::vector<bool> m(15);
        for (std::size_t i = 0; i < m.size(); ++i) m[i] = i % 4 == 1;
        auto mask = from_data(TensorData::from(m, Shape{1, 1, 3, 5}), d, Kind::Bool);
        return one_of(attention(fl(d, {1, 2, 3, 4}, 1), fl(d, {1, 2, 5, 4}, 2), fl(d, {1, 2, 5, 2}, 3), std::move(mask), none(),
                                tensor::nn::AttentionModuleOptions{}));
      };
    case OpCode::linear:
      return [=](DeviceId d) {
        auto v = one_of(linear(fl(d, {2, 3, 5}, 1), fl(d, {5, 4}, 2), fl(d, {4}, 3)));
        v.push_back(linear(fl(d, {6, 5}, 4), fl(d, {5, 3}, 5), none()));
        return v;
      };
    case OpCode::batch_norm:
      return [=](DeviceId d) {
        auto var = from_data(TensorData::from(std::vector<float>{0.5f, 1.0f, 2.0f}, Shape{3}), d, Kind::Float);
        return one_of(batch_norm(fl(d, {2, 3, 4, 2}, 1), fl(d, {3}, 2), fl(d, {3}, 3), fl(d, {3}, 4), std::move(var), 1e-5));
      };
    case OpCode::unfold4d:
      return [=](DeviceId d) {
        FoldArgs a;
        a.kernel = {2, 3};
        auto v = one_of(unfold4d(fl(d, {2, 2, 4, 5}, 1), a));  // burn's unfold path (no padding, dilation 1)
        a.options.stride = {2, 1};
        a.options.padding = {1, 1};
        a.options.dilation = {1, 2};
        v.push_back(unfold4d(fl(d, {2, 2, 5, 6}, 2), a));  // the one-hot conv path
        return v;
      };
    case OpCode::fold4d:
      return [=](DeviceId d) {
        FoldArgs a;
        a.kernel = {2, 3};
        a.output_size = {5, 6};
        a.options.stride = {2, 1};
        a.options.padding = {1, 1};
        a.options.dilation = {1, 2};
        const Shape cols = tensor::core::unfold4d_output_shape("t", Shape{2, 2, 5, 6}, a.kernel, a.options);
        auto v = one_of(fold4d(fl(d, cols, 1), a));
        FoldArgs b;
        b.kernel = {2, 2};
        b.output_size = {3, 3};
        v.push_back(fold4d(fl(d, {1, 4, 4}, 2), b));
        return v;
      };
    case OpCode::adaptive_avg_pool3d:
      return [=](DeviceId d) { return one_of(pool(op, fl(d, {1, 2, 3, 5, 4}, 1), adaptive(3, {2, 3, 1}))); };
    case OpCode::ctc_loss:
    case OpCode::ctc_loss_backward:
      return [=](DeviceId d) {
        auto ints = [d](std::vector<std::int32_t> v, Shape s) { return from_data(TensorData::from(v, s), d, Kind::Int); };
        auto lp = reduce_dim(OpCode::log_softmax, fl(d, {5, 3, 4}, 1), 2);
        auto tg = ints({1, 2, 1, 3, 1, 0, 2, 2, 2}, {3, 3});
        auto il = ints({5, 4, 2}, {3}), tl = ints({3, 2, 2}, {3});  // sample 2 is impossible (2 frames for "2 2")
        if (op == OpCode::ctc_loss) return one_of(ctc_loss(std::move(lp), std::move(tg), std::move(il), std::move(tl), 0));
        return one_of(ctc_loss_backward(std::move(lp), std::move(tg), std::move(il), std::move(tl), fl(d, {3}, 2), 0));
      };
    case OpCode::deform_conv2d:
    case OpCode::deform_conv2d_backward:
      return [=](DeviceId d) {
        tensor::nn::DeformConvOptions<2> o;
        o.padding = {1, 0};
        o.weight_groups = 2;
        o.offset_groups = 2;
        auto off = unary(OpCode::exp, fl(d, {1, 16, 5, 3}, 2));  // offsets in (e^-2, e^2): some points leave the image
        if (op == OpCode::deform_conv2d)
          return one_of(deform_conv2d(fl(d, {1, 4, 4, 4}, 1), std::move(off), fl(d, {2, 2, 2, 2}, 3), fl(d, {1, 8, 5, 3}, 4),
                                      fl(d, {2}, 5), o));
        std::vector<DispatchTensor> v;
        for (auto& g : deform_conv2d_backward(fl(d, {1, 4, 4, 4}, 1), std::move(off), fl(d, {2, 2, 2, 2}, 3),
                                              fl(d, {1, 8, 5, 3}, 4), fl(d, {1, 2, 5, 3}, 6), true, o))
          v.push_back(std::move(g));
        return v;
      };
    default:
      return nullptr;
  }
}

// The sample operands of family_calls.hpp for `op` on device d: a and b [4, 5] from the
// inputs; b, the indices and the mask shaped as the family needs them. The update families
// run the Add rule only (the default compositions have it alone).
family_calls::Operands operands(OpCode op, DeviceId d, const Inputs& in) {
  static constexpr IndexingUpdateOp kAdd[] = {IndexingUpdateOp::Add};
  const Family f = op_family(op);
  const bool sel = f == Family::Select || f == Family::SelectAssign || f == Family::SelectUpdate;
  const Kind k = in.kind;
  auto host = [k](const Shape& s, std::uint32_t seed) {
    return k == Kind::Float ? floats(s, seed, false) : k == Kind::Int ? ints(s, seed) : bools(s, seed);
  };
  const TensorData b = sel ? host(Shape{4, 4}, 7) : op == OpCode::slice_assign ? host(Shape{3, 3}, 7)
                     : op == OpCode::cross ? host(Shape{4, 3}, 7) : op == OpCode::matmul ? host(Shape{5, 3}, 7) : in.b;
  const std::vector<std::int32_t> idx = sel ? std::vector<std::int32_t>{3, 0, 3, 1}
                                      : op == OpCode::powi ? std::vector<std::int32_t>{0, 1, 2, 3, 3, 2, 1, 0, 1, 1, 2, 2, 3, 3, 0, 0, 1, 2, 3, 1}
                                      : std::vector<std::int32_t>{0, 4, 4, 1, 2, 3, 3, 3, 0, 1, 2, 2, 1, 0, 4, 4, 0, 0, 0, 1};
  const Shape is = sel ? Shape{4} : Shape{4, 5};
  family_calls::Operands o;
  o.device = d;
  o.dtype = in.a.dtype();
  o.cast_to = k == Kind::Float ? DType::F64 : k == Kind::Int ? DType::I64 : DType::Bool;
  o.rows = 4;
  o.cols = 5;
  o.a = [d, a = in.a, k] { return up(d, a, k); };
  o.b = [d, b, k] { return up(d, b, k); };
  o.idx = [d, t = TensorData::from(idx, is)] { return up(d, t, Kind::Int); };
  o.mask = [d] { return up(d, bools(Shape{4, 5}, 11), Kind::Bool); };
  o.update_rules = kAdd;
  return o;
}

// The recipes. Scalars and dims are fixed per family; ops that need their own
// arguments are special-cased.
Case case_for(OpCode op) {
  if (NnRun r = nn_recipe(op))
    return Case{{{Kind::Float, floats(Shape{1}, 1, false), floats(Shape{1}, 2, false)}},
                [r](OpCode, DeviceId d, const Inputs&) { return r(d); }};
  const Shape s{4, 5};
  const std::uint8_t kinds = op_info(op).kinds;
  std::vector<Inputs> in;
  for (auto& i : numeric_inputs(s))
    if ((i.kind == Kind::Float && (kinds & kKindF)) || (i.kind == Kind::Int && (kinds & kKindI))) in.push_back(i);
  if (kinds & kKindB) in.push_back({Kind::Bool, bools(s, 5), bools(s, 6)});
  Case c{in, nullptr};
  if (!family_calls::has_call(op)) return c;
  c.run = [](OpCode o, DeviceId d, const Inputs& i) {
    bool v = true;
    return *family_calls::call(o, operands(o, d, i), v);
  };
  return c;
}

// Defaulted ops with no input recipe here (gather_nd, scatter_nd and grid_sample_2d have
// no native CPU override; they are tested with values in tests/burn_api_test.cpp).
const std::set<std::string> kNoRecipe = {"set_require_grad", "is_require_grad", "gather_nd", "scatter_nd",
                                         "grid_sample_2d", "tr_execute"};

std::vector<OpCode> compared_ops() {
  const Backend& cpu = Registry::instance().get(kCpuDeviceType);
  std::vector<OpCode> out;
  for (std::size_t i = 0; i < kOps.size(); ++i) {
    const auto op = static_cast<OpCode>(i);
    if (kOps[i].policy == Policy::Def && cpu.is_native(op)) out.push_back(op);
  }
  return out;
}

TEST(Defaults, MiniBackendLeavesEveryDefaultedEntryToDispatch) {
  mini();
  const Backend& m = Registry::instance().get(tt::mini::kMiniDeviceType);
  for (std::size_t i = 0; i < kOps.size(); ++i)
    if (kOps[i].policy == Policy::Def) {
      EXPECT_FALSE(m.is_native(static_cast<OpCode>(i))) << kOps[i].name;
    }
  EXPECT_EQ(backend_name(mini()), "dispatch<mini>");
}

TEST(Defaults, EveryOverriddenDefaultHasARecipe) {
  std::string missing;
  for (OpCode op : compared_ops())
    if (!case_for(op).run && !kNoRecipe.count(std::string(op_name(op)))) missing += std::string(op_name(op)) + " ";
  EXPECT_TRUE(missing.empty()) << "defaulted ops the CPU overrides but this test cannot run: " << missing;
}

TEST(Defaults, CompositionsAgreeWithCpuOverrides) {
  int compared = 0;
  std::string unsupported;
  for (OpCode op : compared_ops()) {
    const Case c = case_for(op);
    if (!c.run) continue;
    for (const Inputs& in : c.inputs) {
      SCOPED_TRACE(std::string(op_name(op)) + " on " + std::string(kind_name(in.kind)));
      std::vector<TensorData> want, got;
      try {
        for (auto& t : c.run(op, kCpu, in)) want.push_back(read(std::move(t)));
      } catch (const Error& e) {
        ADD_FAILURE() << "native cpu raised: " << e.what();
        continue;
      }
      try {
        for (auto& t : c.run(op, mini(), in)) got.push_back(read(std::move(t)));
      } catch (const NotImplemented& e) {
        unsupported += std::string(op_name(op)) + " (" + e.what() + ")\n";  // a required entry the CPU still lacks
        continue;
      }
      ASSERT_EQ(want.size(), got.size());
      for (std::size_t k = 0; k < want.size(); ++k) EXPECT_TRUE(same(want[k], got[k])) << "output " << k;
      ++compared;
    }
  }
  std::printf("compared %d (op, kind) pairs; defaults that could not run on mini:\n%s", compared, unsupported.c_str());
  EXPECT_GT(compared, 0);
}

// scatter / select_assign by Assign, Mul, Min, Max: the defaults (mini) and the CPU kernels
// against values worked out by hand, with positions written several times (the updates
// combine in source order; Assign keeps the last), -0.0 kept, NaN winning Min/Max.
TEST(Defaults, UpdateRulesAtRepeatedPositionsMatchHandValues) {
  using U = IndexingUpdateOp;
  const auto put = [](const TensorData& t, DeviceId d) {
    return from_data(t, d, is_float(t.dtype()) ? Kind::Float : Kind::Int);
  };
  const auto f32 = [](std::vector<float> v, Shape s) { return TensorData::from(v, std::move(s)); };
  for (const DeviceId d : {kCpu, mini()}) {
    SCOPED_TRACE(backend_name(d));
    const TensorData x = f32({1, 2, 3, 4, 5, 6}, Shape{2, 3});
    const TensorData idx = TensorData::from(std::vector<std::int64_t>{0, 0, 2, 1, 1, 1}, Shape{2, 3});
    const TensorData v = f32({2, 3, -0.0f, 0.5f, 4, 2}, Shape{2, 3});
    const auto scattered = [&](U how) {
      return read(dispatch::scatter(OpCode::scatter, put(x, d), 1, put(idx, d), put(v, d), how))
          .to_vec<float>();
    };
    const std::map<U, std::vector<float>> want = {{U::Mul, {6, 2, -0.0f, 4, 20, 6}},
                                                  {U::Assign, {3, 2, -0.0f, 4, 2, 6}},
                                                  {U::Max, {3, 2, 3, 4, 5, 6}},
                                                  {U::Min, {1, 2, -0.0f, 4, 0.5f, 6}}};
    for (const auto& [how, w] : want) {
      SCOPED_TRACE(static_cast<int>(how));
      const std::vector<float> got = scattered(how);
      ASSERT_EQ(got.size(), w.size());
      for (std::size_t i = 0; i < w.size(); ++i) {
        EXPECT_EQ(got[i], w[i]) << i;
        EXPECT_EQ(std::signbit(got[i]), std::signbit(w[i])) << i;
      }
    }
    // select_assign along dim 0 of a [2] vector: NaN wins Min and Max; ints multiply in order.
    const TensorData two = f32({1, 2}, Shape{2});
    const TensorData sel = TensorData::from(std::vector<std::int64_t>{1, 1}, Shape{2});
    for (const U how : {U::Max, U::Min}) {
      const auto got = read(select_assign(OpCode::select_assign, put(two, d), 0, put(sel, d), put(f32({NAN, 7}, Shape{2}), d), how))
                           .to_vec<float>();
      EXPECT_EQ(got[0], 1.0f);
      EXPECT_TRUE(std::isnan(got[1])) << got[1];
    }
    const TensorData xi = TensorData::from(std::vector<std::int32_t>{10, -3}, Shape{2});
    const TensorData ii = TensorData::from(std::vector<std::int64_t>{0, 0, 1, 0}, Shape{4});
    const TensorData vi = TensorData::from(std::vector<std::int32_t>{2, -1, 5, 3}, Shape{4});
    const std::map<U, std::vector<std::int32_t>> want_i = {
        {U::Mul, {-60, -15}}, {U::Assign, {3, 5}}, {U::Max, {10, 5}}, {U::Min, {-1, -3}}};
    for (const auto& [how, w] : want_i) {
      SCOPED_TRACE(static_cast<int>(how));
      EXPECT_EQ(read(select_assign(OpCode::select_assign, put(xi, d), 0, put(ii, d), put(vi, d), how))
                    .to_vec<std::int32_t>(),
                w);
    }
    // An index out of range: IndexError naming the op; the input is unchanged.
    const DispatchTensor kept = put(x, d);
    const TensorData bad = TensorData::from(std::vector<std::int64_t>{0, 3, 0, 0, 0, 0}, Shape{2, 3});
    try {
      (void)dispatch::scatter(OpCode::scatter, kept, 1, put(bad, d), put(v, d), U::Mul);
      ADD_FAILURE() << "no IndexError";
    } catch (const IndexError& e) {
      EXPECT_NE(std::string(e.what()).find("[scatter]"), std::string::npos) << e.what();
    }
    EXPECT_EQ(read(kept).to_vec<float>(), x.to_vec<float>());
  }
}


}  // namespace
