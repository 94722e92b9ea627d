// Shared helpers for the tests in tests/: error assertions, an independent host
// model of tensor values (encode/decode of every dtype written here, not taken
// from the library), and an owning wrapper over the opaque public Handle.
#pragma once

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <tensor/tensor.hpp>

namespace tt {

using namespace tensor;

// ---- error assertions ------------------------------------------------------------

// Runs `fn`, expects an exception of exactly type E (or derived) whose what()
// contains every fragment. Reports the actual type/message otherwise.
template <class E, class F>
::testing::AssertionResult throws_with(F&& fn, std::initializer_list<std::string> fragments) {
  try {
    fn();
  } catch (const E& e) {
    const std::string msg = e.what();
    for (const std::string& f : fragments)
      if (msg.find(f) == std::string::npos)
        return ::testing::AssertionFailure() << "message lacks '" << f << "': " << msg;
    return ::testing::AssertionSuccess();
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "wrong exception type (" << typeid(e).name() << "): " << e.what();
  } catch (...) {
    return ::testing::AssertionFailure() << "non-std exception";
  }
  return ::testing::AssertionFailure() << "no exception thrown";
}
#define EXPECT_THROWS(E, stmt, ...) EXPECT_TRUE(::tt::throws_with<E>([&] { (void)(stmt); }, {__VA_ARGS__}))

// As EXPECT_THROWS, and the message starts with "[op]": the op the caller called, not a layer
// or an inner op it is built from.
template <class E, class F>
::testing::AssertionResult throws_from(const std::string& op, F&& fn, std::initializer_list<std::string> fragments) {
  std::string msg;
  ::testing::AssertionResult r = throws_with<E>([&] {
    try {
      fn();
    } catch (const E& e) {
      msg = e.what();
      throw;
    }
  }, fragments);
  if (r && msg.rfind("[" + op + "]", 0) != 0)
    return ::testing::AssertionFailure() << "message does not start with [" << op << "]: " << msg;
  return r;
}
#define EXPECT_THROWS_FROM(E, op, stmt, ...) EXPECT_TRUE(::tt::throws_from<E>(op, [&] { (void)(stmt); }, {__VA_ARGS__}))

// ---- independent half conversions ------------------------------------------------

inline std::uint16_t f16_bits(double v) {
  const _Float16 h = static_cast<_Float16>(v);  // the compiler's correctly rounded conversion
  std::uint16_t b;
  std::memcpy(&b, &h, 2);
  return b;
}
inline double f16_value(std::uint16_t b) {
  _Float16 h;
  std::memcpy(&h, &b, 2);
  return static_cast<double>(h);
}
// bfloat16 from a float: round to nearest, ties to even, NaN kept quiet.
inline std::uint16_t bf16_bits(double v) {
  const float f = static_cast<float>(v);
  std::uint32_t x;
  std::memcpy(&x, &f, 4);
  if (std::isnan(f)) return static_cast<std::uint16_t>((x >> 16) | 0x40u);
  const std::uint32_t upper = x >> 16, lower = x & 0xffffu;
  std::uint32_t r = upper;
  if (lower > 0x8000u || (lower == 0x8000u && (upper & 1u))) ++r;
  return static_cast<std::uint16_t>(r);
}
inline double bf16_value(std::uint16_t b) {
  const std::uint32_t x = static_cast<std::uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

inline double epsilon(DType t) {
  switch (t) {
    case DType::F64: return std::numeric_limits<double>::epsilon();
    case DType::F32: return std::numeric_limits<float>::epsilon();
    case DType::F16: return 0.0009765625;
    case DType::BF16: return 0.0078125;
    default: return 0.0;
  }
}

inline const char* name(DType t) {
  static const char* kNames[] = {"f64", "f32", "f16", "bf16", "i64", "i32", "i16", "i8",
                                 "u64", "u32", "u16", "u8",  "bool", "bool(u8)", "bool(u32)", "qfloat"};
  return kNames[static_cast<int>(t)];
}

inline bool is_fl(DType t) { return t == DType::F64 || t == DType::F32 || t == DType::F16 || t == DType::BF16; }
inline bool is_bo(DType t) { return t == DType::Bool || t == DType::BoolU8 || t == DType::BoolU32; }
inline bool is_un(DType t) { return t == DType::U64 || t == DType::U32 || t == DType::U16 || t == DType::U8; }
inline std::size_t width(DType t) {
  switch (t) {
    case DType::F64: case DType::I64: case DType::U64: return 8;
    case DType::F32: case DType::I32: case DType::U32: case DType::BoolU32: return 4;
    case DType::F16: case DType::BF16: case DType::I16: case DType::U16: return 2;
    default: return 1;
  }
}

// Wraps an integer to the dtype's width (two's complement), as the stored value.
inline std::int64_t wrap(DType t, std::int64_t v) {
  switch (t) {
    case DType::I32: return static_cast<std::int32_t>(static_cast<std::uint32_t>(v));
    case DType::I16: return static_cast<std::int16_t>(static_cast<std::uint16_t>(v));
    case DType::I8: return static_cast<std::int8_t>(static_cast<std::uint8_t>(v));
    case DType::U32: return static_cast<std::uint32_t>(v);
    case DType::U16: return static_cast<std::uint16_t>(v);
    case DType::U8: return static_cast<std::uint8_t>(v);
    case DType::Bool: case DType::BoolU8: case DType::BoolU32: return v != 0;
    default: return v;  // 64-bit: u64 kept as its bit pattern
  }
}

// Rounds a double to what the float dtype stores.
inline double round_to(DType t, double v) {
  switch (t) {
    case DType::F32: return static_cast<double>(static_cast<float>(v));
    case DType::F16: return f16_value(f16_bits(v));
    case DType::BF16: return bf16_value(bf16_bits(v));
    default: return v;
  }
}

// ---- host tensors ------------------------------------------------------------------

// Row-major values of a tensor: floats in f, ints and bools in i (u64 as bits).
struct Host {
  std::vector<std::size_t> shape;
  DType dtype = DType::F32;
  std::vector<double> f;
  std::vector<std::int64_t> i;

  std::size_t size() const {
    std::size_t n = 1;
    for (auto d : shape) n *= d;
    return n;
  }
  bool floaty() const { return is_fl(dtype); }
  double at(std::size_t k) const { return floaty() ? f[k] : static_cast<double>(i[k]); }
};

inline Shape to_shape(const std::vector<std::size_t>& s) { return Shape(s); }

inline TensorData encode(const Host& h) {
  const std::size_t n = h.size(), w = width(h.dtype);
  std::vector<std::byte> bytes(n * w);
  for (std::size_t k = 0; k < n; ++k) {
    std::byte* p = bytes.data() + k * w;
    switch (h.dtype) {
      case DType::F64: { const double v = h.f[k]; std::memcpy(p, &v, 8); break; }
      case DType::F32: { const float v = static_cast<float>(h.f[k]); std::memcpy(p, &v, 4); break; }
      case DType::F16: { const std::uint16_t v = f16_bits(h.f[k]); std::memcpy(p, &v, 2); break; }
      case DType::BF16: { const std::uint16_t v = bf16_bits(h.f[k]); std::memcpy(p, &v, 2); break; }
      default: {
        const std::uint64_t v = static_cast<std::uint64_t>(wrap(h.dtype, h.i[k]));
        std::memcpy(p, &v, w);  // little endian: the low bytes
        break;
      }
    }
  }
  return TensorData(std::move(bytes), to_shape(h.shape), h.dtype);
}

inline Host decode(const TensorData& d) {
  Host h;
  h.shape = d.shape().to_vector();
  h.dtype = d.dtype();
  const std::size_t n = d.num_elements(), w = width(h.dtype);
  EXPECT_EQ(d.bytes().size(), n * w) << "byte count of " << name(h.dtype) << " data";
  const std::byte* base = d.bytes().data();
  for (std::size_t k = 0; k < n; ++k) {
    const std::byte* p = base + k * w;
    switch (h.dtype) {
      case DType::F64: { double v; std::memcpy(&v, p, 8); h.f.push_back(v); break; }
      case DType::F32: { float v; std::memcpy(&v, p, 4); h.f.push_back(v); break; }
      case DType::F16: { std::uint16_t v; std::memcpy(&v, p, 2); h.f.push_back(f16_value(v)); break; }
      case DType::BF16: { std::uint16_t v; std::memcpy(&v, p, 2); h.f.push_back(bf16_value(v)); break; }
      case DType::I64: { std::int64_t v; std::memcpy(&v, p, 8); h.i.push_back(v); break; }
      case DType::I32: { std::int32_t v; std::memcpy(&v, p, 4); h.i.push_back(v); break; }
      case DType::I16: { std::int16_t v; std::memcpy(&v, p, 2); h.i.push_back(v); break; }
      case DType::I8: { std::int8_t v; std::memcpy(&v, p, 1); h.i.push_back(v); break; }
      case DType::U64: { std::uint64_t v; std::memcpy(&v, p, 8); h.i.push_back(static_cast<std::int64_t>(v)); break; }
      case DType::U32: { std::uint32_t v; std::memcpy(&v, p, 4); h.i.push_back(v); break; }
      case DType::U16: { std::uint16_t v; std::memcpy(&v, p, 2); h.i.push_back(v); break; }
      case DType::U8: { std::uint8_t v; std::memcpy(&v, p, 1); h.i.push_back(v); break; }
      case DType::Bool: case DType::BoolU8: {
        std::uint8_t v; std::memcpy(&v, p, 1);
        EXPECT_LE(v, 1) << "a bool byte holds " << int(v);
        h.i.push_back(v != 0); break;
      }
      case DType::BoolU32: { std::uint32_t v; std::memcpy(&v, p, 4); h.i.push_back(v != 0); break; }
      default: ADD_FAILURE() << "cannot decode dtype " << name(h.dtype);
    }
  }
  return h;
}

// ---- an owning handle for code that drives ops by OpCode ----------------------------

class H {
 public:
  H() = default;
  explicit H(detail::Handle h) : h_(h) {}
  H(const H& o) : h_(detail::retain(o.h_)) {}
  H(H&& o) noexcept : h_(std::exchange(o.h_, detail::Handle{})) {}
  H& operator=(H o) noexcept { std::swap(h_, o.h_); return *this; }
  ~H() { detail::release(h_); }

  detail::Handle share() const { return detail::retain(h_); }
  // Gives the reference away (the op may then reuse a uniquely owned buffer).
  detail::Handle take() { return std::exchange(h_, detail::Handle{}); }
  Shape shape() const { return detail::shape(h_); }
  DType dtype() const { return detail::dtype(h_); }
  Host read() const { return decode(detail::into_data(share()).get()); }

 private:
  detail::Handle h_;
};

inline detail::Kind kind_of(DType t) {
  return is_fl(t) ? detail::Kind::Float : is_bo(t) ? detail::Kind::Bool : detail::Kind::Int;
}
// Bool host data takes the device's bool dtype (as in burn); another bool storage is
// reached by filling a tensor created in that dtype through the uploaded mask.
inline H upload(const Host& h, Device dev = Device::cpu()) {
  H t(detail::from_data(encode(h), dev, kind_of(h.dtype)));
  if (t.dtype() == h.dtype) return t;
  H z(detail::create(OpCode::zeros, t.shape(), dev, detail::Kind::Bool, h.dtype));
  return H(detail::mask_fill(z.take(), t.take(), Scalar(true)));
}

template <std::size_t D, class K>
Host read(const Tensor<D, K>& t) { return decode(t.into_data()); }

}  // namespace tt
