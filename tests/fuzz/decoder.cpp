// The fuzz decoder: each step reads an op byte and its arguments from the input,
// makes one public-API call over a small pool of rank-2 tensors (Float, Int, Bool),
// and checks the contract (succeed or throw tensor::Error; inputs unchanged). The
// arguments come from tables that mix ordinary values with extreme ones (2^32, 2^62,
// SIZE_MAX, INT64_MIN, ...), so overflowing shapes, steps and counts turn up often.
// Op bytes from 240 reach the module ops (extreme options, max-pool indices, enum
// values), byte 255 the quant rows; inputs starting with WFIL are weight files (see run_weight_file).
#include "decoder.hpp"

#include <tensor/io.hpp>
#include <tensor/nn.hpp>
#include <tensor/quantization.hpp>
#include <tensor/tensor.hpp>

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <vector>

namespace tensor_fuzz {
namespace {

using namespace tensor;

constexpr std::size_t kMaxPool = 6;
constexpr std::size_t kMaxPoolElements = 64;  // results larger than this are checked, not kept
constexpr std::size_t kMaxSteps = 64;

class Bytes {
 public:
  Bytes(const std::uint8_t* p, std::size_t n) : p_(p), n_(n) {}
  bool empty() const { return i_ >= n_; }
  std::uint8_t u8() { return i_ < n_ ? p_[i_++] : 0; }
  template <class T, std::size_t N>
  T pick(const std::array<T, N>& table) { return table[u8() % N]; }
  // The unread bytes, as a string (the weight-file decoder).
  std::string rest() {
    const std::string out(reinterpret_cast<const char*>(p_) + std::min(i_, n_), n_ - std::min(i_, n_));
    i_ = n_;
    return out;
  }

 private:
  const std::uint8_t* p_;
  std::size_t n_, i_ = 0;
};

constexpr std::size_t kSizeMax = std::numeric_limits<std::size_t>::max();
constexpr std::int64_t kI64Max = std::numeric_limits<std::int64_t>::max();
constexpr std::int64_t kI64Min = std::numeric_limits<std::int64_t>::min();

// Mostly small, sometimes extreme.
// No large sizes that are valid: a tensor of 2^32 elements is legal but would take
// the run minutes and gigabytes. The extreme ones overflow the element or byte count,
// or ask for more memory than any machine maps (refused at once).
constexpr std::array<std::size_t, 16> kSizes = {0, 1, 2, 3, 4, 1, 2, 3, 2, 1, std::size_t{1} << 62, std::size_t{1} << 61,
                                               std::size_t{1} << 63, kSizeMax, std::size_t{1} << 60, 5};
constexpr std::array<std::int64_t, 16> kInts = {0, 1, -1, 2, -2, 3, 4, -3, kI64Max, kI64Min, kI64Min + 1, kI64Max - 1,
                                                std::int64_t{1} << 40, -(std::int64_t{1} << 32), 6, 7};
// For arange: either a few elements or more than fit (no 2^32-element ranges).
constexpr std::array<std::int64_t, 12> kRangeInts = {0, 1, -1, 2, -2, 3, 7, kI64Max, kI64Min, kI64Min + 1, kI64Max - 1,
                                                     kI64Max / 2};
constexpr std::array<std::int64_t, 10> kDims = {0, 1, -1, -2, 2, 0, 1, 3, -3, kI64Min};
constexpr std::array<std::int64_t, 12> kShapeDims = {-1, 0, 1, 2, 3, 4, 6, 1, 2, -1,
                                                     std::int64_t{1} << 32, std::int64_t{1} << 62};
constexpr std::array<double, 10> kFloats = {0.0, 1.0, -1.0, 0.5, 2.0, -3.5, 1e30, -1e-30,
                                            std::numeric_limits<double>::infinity(),
                                            std::numeric_limits<double>::quiet_NaN()};
constexpr std::array<DType, 8> kIntDTypes = {DType::I32, DType::I64, DType::I16, DType::I8,
                                             DType::U8, DType::U32, DType::I32, static_cast<DType>(42)};
constexpr std::array<DType, 6> kFloatDTypes = {DType::F32, DType::F64, DType::F16, DType::BF16, DType::F32,
                                               static_cast<DType>(77)};

// Host copy of a tensor: what "unchanged" is checked against.
struct Snapshot {
  Shape shape;
  DType dtype = DType::F32;
  std::vector<std::byte> bytes;
  bool operator==(const Snapshot&) const = default;
};

template <std::size_t D, class K>
Snapshot snap(const Tensor<D, K>& t) {
  TensorData d = t.into_data();
  return {d.shape(), d.dtype(), d.bytes()};
}

class Program {
 public:
  explicit Program(Device dev) : dev_(dev) {}

  Result run(Bytes in) {
    seed();
    for (std::size_t step = 0; step < kMaxSteps && !in.empty() && res_.ok; ++step) one(in);
    return res_;
  }

 private:
  Device dev_;
  Result res_;
  std::vector<Tensor<2>> f_;
  std::vector<Tensor<2, Int>> i_;
  std::vector<Tensor<2, Bool>> b_;

  void fail(std::string why) {
    if (res_.ok) res_ = {false, std::move(why), res_.calls, res_.errors};
  }

  // Runs one public-API call: success or tensor::Error, nothing else.
  template <class F>
  void call(const char* what, F&& fn) {
    ++res_.calls;
    try {
      fn();
    } catch (const Error&) {
      ++res_.errors;
    } catch (const std::exception& e) {
      fail(std::string(what) + ": a std:: exception escaped: " + e.what());
    } catch (...) {
      fail(std::string(what) + ": a non-std exception escaped");
    }
  }

  // Snapshots of the inputs before, compared after (reading them back is itself a call).
  template <class... T>
  std::vector<Snapshot> snaps(const T&... ts) {
    std::vector<Snapshot> out;
    try {
      (out.push_back(snap(ts)), ...);
    } catch (const std::exception& e) {
      fail(std::string("reading an input back failed: ") + e.what());
    }
    return out;
  }
  template <class F, class... T>
  void checked(const char* what, F&& fn, const T&... inputs) {
    const std::vector<Snapshot> before = snaps(inputs...);
    call(what, fn);
    if (!res_.ok) return;
    if (snaps(inputs...) != before) fail(std::string(what) + ": an input tensor changed");
  }

  template <class K>
  void keep(std::vector<Tensor<2, K>>& pool, const Tensor<2, K>& t) {
    if (t.num_elements() > kMaxPoolElements) return;
    if (pool.size() < kMaxPool) pool.push_back(t);
    else pool[res_.calls % kMaxPool] = t;
  }
  // Keeps a result (if small) once it has been read back successfully.
  template <class K>
  void keep_read(std::vector<Tensor<2, K>>& pool, const Tensor<2, K>& t) {
    if (t.num_elements() > kMaxPoolElements) return;
    // A failed read (on vulkan the error of an out-of-range index belongs to the result
    // and is thrown by its read) keeps nothing: the pool holds only good tensors.
    bool read = false;
    call("into_data", [&] { (void)t.into_data(); read = true; });
    if (read) keep(pool, t);
  }

  void seed() {
    call("seed", [&] {
      keep(f_, Tensor<2>::from_data(TensorData::from<float>({1, -2, 3.5f, 0, -0.25f, 8}, {2, 3}), dev_));
      keep(i_, Tensor<2, Int>::from_data(TensorData::from<std::int32_t>({0, 2, 1, -1, 5, 1}, {2, 3}), dev_));
      keep(b_, Tensor<2, Bool>::from_data(TensorData::from<bool>({true, false, true, true, false, false}, {2, 3}), dev_));
    });
  }

  template <class T>
  const T& any(const std::vector<T>& pool, Bytes& in) { return pool[in.u8() % pool.size()]; }

  Shape shape2(Bytes& in) { return Shape{in.pick(kSizes), in.pick(kSizes)}; }
  Slice slice(Bytes& in) {
    const std::int64_t s = in.pick(kInts);
    const std::uint8_t e = in.u8();
    return Slice{s, e & 1 ? std::optional<std::int64_t>(kInts[e / 2 % kInts.size()]) : std::nullopt, in.pick(kInts)};
  }

  void one(Bytes& in) {
    if (f_.empty() || i_.empty() || b_.empty()) return fail("the tensor pool is empty");
    // Copies: results pushed into the pools must not move what a call reads.
    const Tensor<2> x = any(f_, in);
    const Tensor<2> y = any(f_, in);
    const Tensor<2, Int> n = any(i_, in);
    const Tensor<2, Bool> m = any(b_, in);
    const std::uint8_t family = in.u8();
    // Op bytes from 240 reach the module-op families (the older corpus files use the
    // ones below, whose meaning stays as it was).
    if (family == 255) return quant_family(in, x, y);  // (was a module-op byte; 240..254 stay them)
    if (family >= 240) return module_family(family - 240, in, x, y, n);
    switch (family % 14) {
      case 0: {  // float creation
        const Shape s = shape2(in);
        const std::uint8_t k = in.u8();
        const std::optional<DType> dt = k & 8 ? std::optional<DType>(in.pick(kFloatDTypes)) : std::nullopt;
        call("create", [&] {
          switch (k % 5) {
            case 0: keep_read(f_, Tensor<2>::zeros(s, dev_, dt)); break;
            case 1: keep_read(f_, Tensor<2>::ones(s, dev_, dt)); break;
            case 2: keep_read(f_, Tensor<2>::full(s, in.pick(kFloats), dev_, dt)); break;
            case 3: keep_read(f_, Tensor<2>::random(s, Distribution::uniform(-2, 2), dev_, dt)); break;
            default: keep_read(f_, Tensor<2>::empty(s, dev_, dt).zeros_like()); break;
          }
        });
        break;
      }
      case 1: {  // int creation: arange with extreme bounds and steps
        const std::int64_t a = in.pick(kRangeInts), b = in.pick(kRangeInts), st = in.pick(kRangeInts);
        const DType dt = in.pick(kIntDTypes);
        call("arange_step", [&] {
          const auto r = Tensor<1, Int>::arange_step(a, b, st, dev_, dt);
          if (r.num_elements() <= kMaxPoolElements) keep_read(i_, r.reshape<2>({1, -1}));
        });
        break;
      }
      case 2: {  // float unary, const& and && forms
        const std::uint8_t k = in.u8();
        checked("unary", [&] {
          Tensor<2> c = x;
          Tensor<2> r = k & 16 ? std::move(c).exp() : c.exp();
          switch (k % 8) {
            case 0: r = x.log(); break;
            case 1: r = x.sqrt().neg(); break;
            case 2: r = k & 16 ? std::move(c).square() : x.square(); break;
            case 3: r = x.recip().abs(); break;
            case 4: r = activation::softmax(x, in.pick(kDims)); break;
            case 5: r = x.tanh().floor(); break;
            case 6: r = (k & 32 ? std::move(c) - x : c - x).square(); break;
            default: break;
          }
          keep_read(f_, r);
        }, x);
        break;
      }
      case 3: {  // float binary, incl. the moved operand aliased as the other
        const std::uint8_t k = in.u8();
        checked("binary", [&] {
          Tensor<2> c = x;
          switch (k % 9) {
            case 0: keep_read(f_, x + y); break;
            case 1: keep_read(f_, std::move(c) * c); break;
            case 2: keep_read(f_, x.matmul(y)); break;
            case 3: keep_read(f_, std::move(c).matmul(c)); break;
            case 4: keep_read(f_, x / y); break;
            case 5: keep_read(f_, x.powf(y)); break;
            case 6: keep_read(f_, std::move(c) - y); break;
            case 7: keep_read(f_, x.atan2(y)); break;
            default: keep_read(f_, x % y); break;
          }
        }, x, y);
        break;
      }
      case 4: {  // float scalar ops with extreme scalars
        const std::uint8_t k = in.u8();
        const double v = in.pick(kFloats);
        const std::int64_t e = in.pick(kInts);
        checked("scalar", [&] {
          switch (k % 5) {
            case 0: keep_read(f_, x + static_cast<float>(v)); break;
            case 1: keep_read(f_, x.powi_scalar(e)); break;
            case 2: keep_read(f_, x.clamp(v, in.pick(kFloats))); break;
            case 3: keep_read(f_, x.powf_scalar(v)); break;
            default: keep_read(f_, x.div_scalar(v)); break;
          }
        }, x);
        break;
      }
      case 5: {  // reductions, sort, topk
        const std::uint8_t k = in.u8();
        const std::int64_t d = in.pick(kDims);
        checked("reduce", [&] {
          switch (k % 8) {
            case 0: keep_read(f_, x.sum_dim(d)); break;
            case 1: keep_read(f_, x.mean_dim(d)); break;
            case 2: keep_read(i_, x.argmax(d)); break;
            case 3: keep_read(f_, x.cumsum(d)); break;
            case 4: keep_read(f_, x.sort(d)); break;
            case 5: keep_read(f_, x.topk(in.pick(kSizes), d)); break;
            case 6: (void)x.sum().into_data(); break;
            default: keep_read(i_, n.max_dim(d)); break;
          }
        }, x, n);
        break;
      }
      case 6: {  // reshape / expand / unfold with extreme dims
        const std::array<std::int64_t, 2> dims = {in.pick(kShapeDims), in.pick(kShapeDims)};
        const std::uint8_t k = in.u8();
        checked("reshape", [&] {
          switch (k % 4) {
            case 0: keep_read(f_, x.reshape(dims)); break;
            case 1: keep_read(f_, x.expand(dims)); break;
            case 2: (void)x.unfold(in.pick(kDims), in.pick(kSizes), in.pick(kSizes)).sum().into_data(); break;
            default: keep_read(f_, x.reshape<3>({dims[0], -1, dims[1]}).reshape<2>({dims[1], -1})); break;
          }
        }, x);
        break;
      }
      case 7: {  // slice / narrow with extreme bounds and steps
        const Slice a = slice(in), b = slice(in);
        const std::int64_t d = in.pick(kDims);
        const std::size_t st = in.pick(kSizes), len = in.pick(kSizes);
        const std::uint8_t k = in.u8();
        checked("slice", [&] {
          if (k & 1) keep_read(f_, x.slice({a, b}));
          else keep_read(f_, x.narrow(d, st, len));
        }, x);
        break;
      }
      case 8: {  // repeat_dim, cat, flip, permute, swap_dims
        const std::int64_t d = in.pick(kDims);
        const std::size_t times = in.pick(kSizes);
        const std::uint8_t k = in.u8();
        checked("layout", [&] {
          switch (k % 5) {
            case 0: keep_read(f_, x.repeat_dim(d, times)); break;
            case 1: keep_read(f_, cat(std::vector<Tensor<2>>{x, y, x}, d)); break;
            case 2: keep_read(f_, x.flip({d})); break;
            case 3: keep_read(f_, x.permute({1, 0}).transpose()); break;
            default: keep_read(f_, x.swap_dims(d, in.pick(kDims))); break;
          }
        }, x, y);
        break;
      }
      case 9: {  // indexing with pool indices (often out of range)
        const std::int64_t d = in.pick(kDims);
        const std::uint8_t k = in.u8();
        checked("index", [&] {
          switch (k % 5) {
            case 0: keep_read(f_, x.select(d, n.reshape<1>({-1}))); break;
            case 1: keep_read(f_, x.gather(d, n)); break;
            case 2: keep_read(f_, x.mask_where(m, y)); break;
            case 3: keep_read(f_, x.mask_fill(m, in.pick(kFloats))); break;
            default: keep_read(f_, x.slice_assign({Slice::range(0, 1)}, y)); break;
          }
        }, x, y, n, m);
        break;
      }
      case 10: {  // comparisons and bool logic
        const std::uint8_t k = in.u8();
        checked("bool", [&] {
          switch (k % 5) {
            case 0: keep_read(b_, x.greater(y)); break;
            case 1: keep_read(b_, x.equal_elem(in.pick(kFloats))); break;
            case 2: { const Tensor<2, Bool> o = any(b_, in); keep_read(b_, m.bool_and(o)); break; }
            case 3: (void)m.argwhere().into_data(); break;
            default: keep_read(b_, m.bool_not().bool_or(m)); break;
          }
        }, x, y, m);
        break;
      }
      case 11: {  // casts, including dtype values outside the enum
        const std::uint8_t k = in.u8();
        checked("cast", [&] {
          switch (k % 4) {
            case 0: keep_read(i_, x.int_(in.pick(kIntDTypes))); break;
            case 1: keep_read(f_, n.float_cast(in.pick(kFloatDTypes))); break;
            case 2: keep_read(f_, x.cast(in.pick(kFloatDTypes))); break;
            default: keep_read(i_, m.int_()); break;
          }
        }, x, n, m);
        break;
      }
      case 12: {  // int arithmetic
        const std::uint8_t k = in.u8();
        const std::int64_t e = in.pick(kInts);
        checked("int", [&] {
          const Tensor<2, Int> o = any(i_, in);
          switch (k % 6) {
            case 0: keep_read(i_, n + o); break;
            case 1: keep_read(i_, n.powi_scalar(e)); break;
            case 2: keep_read(i_, n / o); break;
            case 3: keep_read(i_, n.bitwise_left_shift_scalar(e)); break;
            case 4: keep_read(i_, n.mul_scalar(e)); break;
            default: keep_read(i_, n.matmul(o)); break;
          }
        }, n);
        break;
      }
      default: {  // devices and settings with values that do not exist
        const auto type = static_cast<std::uint16_t>(in.u8() % 4);
        const auto index = static_cast<std::uint16_t>(in.u8() % 5);
        const std::uint8_t k = in.u8();
        checked("device", [&] {
          const Device d(DeviceId{type, index});
          switch (k % 4) {
            case 0: d.sync(); break;
            case 1: (void)Tensor<2>::zeros({1, 2}, d); break;
            case 2:
              (void)set_default_dtypes(d, static_cast<FloatDType>(k % 6), static_cast<IntDType>(k % 10),
                                       static_cast<BoolDType>(k % 4));
              break;
            default: (void)x.to_device(d).into_data(); break;
          }
        }, x);
        break;
      }
    }
  }

  // The quant rows (quantize, dequantize, q_matmul, q_conv2d) with schemes, blocks and scales
  // from the input: enum values out of range, blocks that do not divide, extreme or zero
  // scales, mismatched weights, conv options far out of range. Quantized tensors are read back
  // (codes and scales), never pooled.
  void quant_family(Bytes& in, const Tensor<2>& x, const Tensor<2>& y) {
    const std::uint8_t k = in.u8(), v = in.u8(), lvl = in.u8();
    QuantScheme s = QuantScheme{}.with_value(static_cast<QuantValue>(v % 7)).with_store(static_cast<QuantStore>((v >> 3) % 3));
    if (lvl & 1)
      s = s.with_level(QuantLevel::block({static_cast<std::uint32_t>(in.pick(kSizes)), static_cast<std::uint32_t>(in.pick(kSizes))}));
    const float sc = static_cast<float>(in.pick(kFloats));
    checked("quant", [&] {
      switch (k % 5) {
        case 0: (void)quantize_dynamic(x, s).into_data(); break;
        case 1: {
          const std::size_t nb = quantization::params_shape(x.shape(), s).num_elements();
          const auto scales = Tensor<1>::full({nb}, sc, x.device());
          (void)dequantize(quantize(x, s, QuantParams{scales})).into_data();
          break;
        }
        case 2: (void)quantization::q_matmul(x, quantize_dynamic(y, s)).into_data(); break;
        case 3: (void)quantization::q_matmul(x, y).into_data(); break;  // not quantized: a DTypeError
        case 4: {  // conv2d with a quantized weight (q_conv2d): x as [1, 1, H, W], y as the kernel
          const Shape sx = x.shape(), sy = y.shape();
          const auto i64 = [](std::size_t n) { return static_cast<std::int64_t>(n); };
          const auto x4 = x.reshape<4>({1, 1, i64(sx[0]), i64(sx[1])});
          const auto w4 = y.reshape<4>({1, 1, i64(sy[0]), i64(sy[1])});
          nn::ConvOptions<2> o;
          o.stride = {in.pick(kInts), 1};
          o.padding = {in.pick(kInts), 0};
          o.dilation = {1, in.pick(kInts)};
          const auto bias = (lvl & 2) ? std::optional<Tensor<1>>(Tensor<1>::full({1}, sc, x.device())) : std::nullopt;
          (void)nn::conv2d(x4, quantize_dynamic(w4, s), bias, o).into_data();
          break;
        }
      }
    }, x, y);
  }

  // Module ops with extreme options (products of stride, padding, dilation and kernel
  // that overflow int64, windows far beyond the input), max-pool gradients with
  // perturbed indices, and enum arguments cast from bytes.
  void module_family(std::uint8_t f, Bytes& in, const Tensor<2>& x, const Tensor<2>& y, const Tensor<2, Int>& n) {
    const std::uint8_t k = in.u8();
    const std::int64_t a = in.pick(kInts), b = in.pick(kInts), c = in.pick(kInts);
    const auto i64 = [](std::size_t v) { return static_cast<std::int64_t>(v); };
    switch (f % 3) {
      case 0:
        checked("module_options", [&] {
          const Shape sx = x.shape(), sy = y.shape();
          const auto x4 = x.reshape<4>({1, 1, i64(sx[0]), i64(sx[1])});
          const auto w4 = y.reshape<4>({1, 1, i64(sy[0]), i64(sy[1])});
          const auto x3 = x4.reshape<3>({1, 1, i64(sx[0] * sx[1])});
          const auto w3 = w4.reshape<3>({1, 1, i64(sy[0] * sy[1])});
          switch (k % 8) {
            case 0: {
              nn::ConvOptions<2> o;
              o.stride = {a, 1};
              o.padding = {b, 0};
              o.dilation = {1, c};
              (void)nn::conv2d(x4, w4, std::nullopt, o).into_data();
              break;
            }
            case 1: {
              nn::ConvOptions<1> o;
              o.stride = {a};
              o.padding = {b};
              o.dilation = {c};
              (void)nn::conv1d(x3, w3, std::nullopt, o).into_data();
              break;
            }
            case 2: {
              nn::ConvTransposeOptions<2> o;
              o.stride = {a, 1};
              o.padding = {0, b};
              o.dilation = {c, 1};
              o.padding_out = {in.pick(kInts), 0};
              (void)nn::conv_transpose2d(x4, w4, std::nullopt, o).into_data();
              break;
            }
            case 3: {
              nn::UnfoldOptions o;
              o.stride = {a, 1};
              o.padding = {b, b};
              o.dilation = {1, c};
              (void)nn::unfold4d(x4, {in.pick(kInts), in.pick(kInts)}, o).into_data();
              break;
            }
            case 4: {
              nn::MaxPoolOptions<2> o;
              o.kernel_size = {a, in.pick(kInts)};
              o.stride = {1, b};
              o.padding = {c, 0};
              o.dilation = {in.pick(kInts), 1};
              o.ceil_mode = k & 8;
              (void)nn::max_pool2d(x4, o).into_data();
              break;
            }
            case 5: {
              nn::AvgPoolOptions<1> o;
              o.kernel_size = {a};
              o.stride = {b};
              o.padding = {c};
              o.ceil_mode = k & 8;
              (void)nn::avg_pool1d(x3, o).into_data();
              break;
            }
            case 6: {
              nn::ConvOptions<2> o;
              o.padding = {a, b};
              o.groups = c;
              (void)nn::conv_weight_backward<4>(x4, w4, x4, o).into_data();
              break;
            }
            default:
              (void)nn::adaptive_avg_pool1d(x3, a).into_data();
              break;
          }
        }, x, y);
        break;
      case 1:  // max-pool gradient with the forward's indices moved by an extreme amount
        checked("max_pool_indices", [&] {
          const Shape sx = x.shape();
          const auto x4 = x.reshape<4>({1, 1, i64(sx[0]), i64(sx[1])});
          nn::MaxPoolOptions<2> o;
          o.kernel_size = {1 + k % 2, 1 + k / 2 % 2};
          o.stride = {1 + k / 4 % 2, 1};
          const auto [v, idx] = nn::max_pool2d_with_indices(x4, o);
          const std::int64_t shift = k & 16 ? a : static_cast<std::int64_t>(n.num_elements() ? 1 : 0);
          const auto moved = k & 32 ? idx.add_scalar(shift) : idx.mul_scalar(b);
          (void)nn::max_pool2d_with_indices_backward(x4, v.ones_like(), moved, o).into_data();
        }, x, n);
        break;
      default:  // enum arguments with values beyond their enumerators
        checked("enums", [&] {
          const Shape sx = x.shape();
          const auto x4 = x.reshape<4>({1, 1, i64(sx[0]), i64(sx[1])});
          const std::uint8_t e = in.u8();
          switch (k % 6) {
            case 0: {
              nn::InterpolateOptions o;
              o.mode = static_cast<nn::InterpolateMode>(e % 8);
              (void)nn::interpolate(x4, {2, 3}, o).into_data();
              break;
            }
            case 1: {
              GridSampleOptions o;
              o.mode = static_cast<GridSampleOptions::Mode>(e % 4);
              o.padding = static_cast<GridSampleOptions::Padding>(e / 4 % 5);
              (void)x4.grid_sample_2d(Tensor<4>::zeros({1, 2, 2, 2}, dev_), o).into_data();
              break;
            }
            case 2: {
              const auto flat = n.reshape<1>({-1});
              (void)x.reshape<1>({-1}).scatter(0, flat, flat.float_(), static_cast<IndexingUpdateOp>(e % 8)).into_data();
              break;
            }
            case 3: {
              Distribution d;
              d.kind = static_cast<Distribution::Kind>(e % 6);
              (void)Tensor<2>::random({2, 2}, d, dev_).into_data();
              break;
            }
            case 4: {
              PadMode p;
              p.kind = static_cast<PadMode::Kind>(e % 5);
              (void)x.pad({{1, 0}}, p).into_data();
              break;
            }
            default:
              (void)x.select_assign(0, n.reshape<1>({-1}), y, static_cast<IndexingUpdateOp>(e % 7)).into_data();
              break;
          }
        }, x, y, n);
        break;
    }
  }
};

// ---- weight files (issue 30) ------------------------------------------------------------
// An input that starts with "WFIL" is a weight file, not an op program: the next byte picks
// how the rest becomes a .npy / .safetensors file (raw bytes, a nested header of a given
// depth, extreme declared sizes in a sparse file, tensor names to save), which is then
// loaded (and, when it loads, saved and loaded again: the same tensors must come back).
// Loading must succeed or throw a tensor::Error; nothing else may escape.

constexpr char kWeightFileMagic[] = "WFIL";
constexpr std::size_t kWeightFileMagicSize = 4;
static_assert(sizeof(kWeightFileMagic) == kWeightFileMagicSize + 1);

bool is_weight_file_input(const std::uint8_t* data, std::size_t size) {
  return size >= kWeightFileMagicSize && std::memcmp(data, kWeightFileMagic, kWeightFileMagicSize) == 0;
}

// A path per process (fuzz_run and libFuzzer run one input at a time).
std::string weight_path(const char* ext) {
  return (std::filesystem::temp_directory_path() / ("tensor_fuzz_" + std::to_string(::getpid()) + ext)).string();
}

class WeightFiles {
 public:
  Result run(Bytes in) {
    const std::uint8_t mode = in.u8();
    const bool npy = mode & 1;
    const std::string path = weight_path(npy ? ".npy" : ".safetensors");
    switch (mode / 2 % 4) {
      case 0: write(path, in.rest()); break;
      case 1: write(path, nested(in)); break;
      case 2: if (!sparse(path, npy, in)) return res_; break;
      default: save_names(path, in); return res_;
    }
    load(path, npy);
    std::error_code ec;
    std::filesystem::remove(path, ec);
    return res_;
  }

 private:
  Result res_;

  void fail(std::string why) {
    if (res_.ok) res_ = {false, std::move(why), res_.calls, res_.errors};
  }
  template <class F>
  bool call(const char* what, F&& fn) {
    ++res_.calls;
    try {
      fn();
      return true;
    } catch (const Error&) {
      ++res_.errors;
    } catch (const std::exception& e) {
      fail(std::string(what) + ": a std:: exception escaped: " + e.what());
    } catch (...) {
      fail(std::string(what) + ": a non-std exception escaped");
    }
    return false;
  }

  static void write(const std::string& path, const std::string& bytes) {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  static std::string le64(std::uint64_t v) {
    std::string s;
    for (int i = 0; i < 8; ++i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
    return s;
  }

  // A safetensors header whose JSON nests `depth` levels (up to 2^20) in a shape, in the
  // metadata or as the whole header.
  static std::string nested(Bytes& in) {
    const std::size_t depth = (std::size_t{in.u8()} << 12 | std::size_t{in.u8()} << 4) + 1;
    const std::string deep = std::string(depth, '[') + std::string(depth, ']');
    std::string header;
    switch (in.u8() % 3) {
      case 0: header = R"({"a":{"dtype":"U8","shape":)" + deep + R"(,"data_offsets":[0,0]}})"; break;
      case 1: header = R"({"__metadata__":{"k":)" + deep + "}}"; break;
      default: header = deep; break;
    }
    return le64(header.size()) + header;
  }

  // A header declaring an extreme size over a file that is either that large (sparse) or
  // small. Sizes: nothing valid above a few bytes is ever read (at most the file's own size
  // would be, and the large files are larger than any host's memory).
  bool sparse(const std::string& path, bool npy, Bytes& in) {
    constexpr std::array<std::uint64_t, 8> kDeclared = {std::uint64_t{1} << 43, (std::uint64_t{1} << 43) - 1,
                                                        std::uint64_t{1} << 62, std::uint64_t{1} << 63,
                                                        std::numeric_limits<std::uint64_t>::max(), 10737418240ull, 8, 0};
    const std::uint64_t declared = in.pick(kDeclared);
    const bool big_file = in.u8() & 1;
    std::string head;
    if (npy) {
      std::string dict = "{'descr': '|u1', 'fortran_order': False, 'shape': (" + std::to_string(declared) + ",), }";
      dict.append(128 - 10 - dict.size() - 1, ' ');
      dict += '\n';
      head = std::string("\x93NUMPY\x01\x00", 8) + static_cast<char>(dict.size() & 0xff) + static_cast<char>(dict.size() >> 8) + dict;
    } else {
      std::string json = R"({"a":{"dtype":"U8","shape":[)" + std::to_string(declared) + R"(],"data_offsets":[0,)" +
                         std::to_string(declared) + "]}}";
      json.append((8 - json.size() % 8) % 8, ' ');
      head = le64(json.size()) + json;
    }
    write(path, head + in.rest());
    if (!big_file) return true;
    std::error_code ec;
    // Only sizes beyond any host's memory (past the file system's limit the input is skipped):
    // the declared data exactly when it is that large, else 8 TiB.
    constexpr std::uint64_t kBig = std::uint64_t{1} << 43;
    const std::uint64_t size = declared >= kBig - 1 && declared <= kBig ? head.size() + declared : kBig;
    std::filesystem::resize_file(path, size, ec);
    if (ec) std::filesystem::remove(path, ec);
    return !ec;
  }

  // Tensor names (bytes split at 0, often not UTF-8) saved and loaded back.
  void save_names(const std::string& path, Bytes& in) {
    io::NamedTensors named;
    std::string name;
    const std::string rest = in.rest();
    for (std::size_t i = 0; i <= rest.size(); ++i) {
      if (i < rest.size() && rest[i] != '\0') { name.push_back(rest[i]); continue; }
      named.emplace_back(name, TensorData::from(std::vector<std::uint8_t>{static_cast<std::uint8_t>(named.size())}));
      name.clear();
      if (named.size() == 16) break;
    }
    std::map<std::string, std::string> metadata;
    if (!named.empty()) metadata[named.back().first] = named.front().first;
    if (!call("save_safetensors", [&] { io::save_safetensors(path, named, metadata); })) return;
    io::SafetensorsFile back;
    if (!call("load_safetensors", [&] { back = io::load_safetensors(path); })) return fail("a saved file did not load");
    if (back.tensors != named || back.metadata != metadata) fail("names saved and loaded back differ");
    std::error_code ec;
    std::filesystem::remove(path, ec);
  }

  // Loads; what loads must save and load back the same.
  void load(const std::string& path, bool npy) {
    const std::string again = path + ".again";
    std::error_code ec;
    if (npy) {
      TensorData d;
      if (!call("load_npy", [&] { d = io::load_npy(path); })) return;
      if (!call("save_npy", [&] { io::save_npy(again, d); })) return;
      TensorData back;
      if (!call("load_npy", [&] { back = io::load_npy(again); })) return fail("a saved .npy did not load");
      if (!(back == d)) fail("a loaded .npy saved and loaded again differs");
    } else {
      io::SafetensorsFile f;
      if (!call("load_safetensors", [&] { f = io::load_safetensors(path); })) return;
      if (!call("save_safetensors", [&] { io::save_safetensors(again, f.tensors, f.metadata); })) return;
      io::SafetensorsFile back;
      if (!call("load_safetensors", [&] { back = io::load_safetensors(again); })) return fail("a saved file did not load");
      if (back.tensors != f.tensors || back.metadata != f.metadata) fail("a loaded file saved and loaded again differs");
    }
    std::filesystem::remove(again, ec);
  }
};

Result run_weight_file(const std::uint8_t* data, std::size_t size) {
  try {
    return WeightFiles().run(Bytes(data, size));
  } catch (const std::exception& e) {
    return {false, std::string("escaped the weight-file decoder: ") + e.what(), 0, 0};
  }
}

}  // namespace

Result run(const std::uint8_t* data, std::size_t size, const std::string& device) {
  if (is_weight_file_input(data, size)) return run_weight_file(data + kWeightFileMagicSize, size - kWeightFileMagicSize);
  Result r;
  try {
    r = Program(Device::parse(device)).run(Bytes(data, size));
  } catch (const std::exception& e) {
    r = {false, std::string("escaped the decoder: ") + e.what(), r.calls, r.errors};
  }
  return r;
}

}  // namespace tensor_fuzz
