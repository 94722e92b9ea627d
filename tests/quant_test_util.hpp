// Helpers shared by quant_test.cpp and quant_ops_test.cpp: the device fixture (TENSOR_TEST_DEVICE
// picks the device; quant_test.cpp instantiates the suite once for both files), float tensors
// in and out, the q8s scheme, a tolerant comparison and a typed-error check.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <sstream>

#include <tensor/modules/core.hpp>
#include <tensor/nn.hpp>
#include <tensor/profile.hpp>
#include <tensor/quantization.hpp>

#include "conformance/devices.hpp"
#include "test_util.hpp"

namespace quant_test {

using namespace tt;
namespace qz = tensor::quantization;

inline const Device& dev() { return tt::conf::DeviceScope::current(); }

class Quant : public ::testing::TestWithParam<Device> {
 protected:
  void SetUp() override { scope_.enter(GetParam()); }
  void TearDown() override { scope_.leave(); }
  tt::conf::DeviceScope scope_;
};

template <std::size_t D>
Tensor<D> fl(std::vector<float> v, Shape s) { return Tensor<D>::from_data(TensorData::from<float>(v, s), dev()); }
template <std::size_t D>
std::vector<float> fv(const Tensor<D>& t) { return t.into_data().convert(DType::F32).template to_vec<float>(); }

// n values in [-amp, amp) from a fixed linear congruential sequence (seeded by `state`).
inline std::vector<float> lcg(std::size_t n, std::uint32_t state, float amp) {
  std::vector<float> v(n);
  for (float& x : v) {
    state = state * 1664525u + 1013904223u;
    x = (static_cast<float>(state >> 8) / static_cast<float>(1u << 24) * 2.0f - 1.0f) * amp;
  }
  return v;
}

inline QuantScheme q8s() { return QuantScheme{}.with_value(QuantValue::Q8S).with_store(QuantStore::Native); }

inline ::testing::AssertionResult near(const std::vector<float>& got, const std::vector<float>& want, float tol) {
  if (got.size() != want.size()) return ::testing::AssertionFailure() << "size " << got.size() << " != " << want.size();
  for (std::size_t i = 0; i < got.size(); ++i)
    if (!(std::fabs(got[i] - want[i]) <= tol * std::max(1.0f, std::fabs(want[i]))))
      return ::testing::AssertionFailure() << "at " << i << ": " << got[i] << " != " << want[i];
  return ::testing::AssertionSuccess();
}

template <std::size_t D>
qz::QuantizedValues values_of(const Tensor<D>& q) { return qz::quantized_values(q.into_data()); }

inline std::vector<std::int8_t> i8(std::initializer_list<int> v) { return std::vector<std::int8_t>(v.begin(), v.end()); }

template <class E, class F>
void expect_error(F&& f, const std::string& op) {
  try {
    f();
    ADD_FAILURE() << "no exception; expected one naming [" << op << "]";
  } catch (const E& e) {
    EXPECT_NE(std::string(e.what()).find("[" + op + "]"), std::string::npos) << e.what();
  }
}

inline std::vector<std::byte> f32_bytes(float v) {
  std::vector<std::byte> b(4);
  std::memcpy(b.data(), &v, 4);
  return b;
}

}  // namespace quant_test
