// Hostile input through the public API (issue 16): shape products that overflow,
// allocations that cannot succeed, extreme slice steps, operands aliased through &&,
// devices and enum values that do not exist, and the messages of all of these. Each
// call either succeeds with the right answer or throws a tensor::Error subclass naming
// the op; the process stays usable afterwards. Runs on TENSOR_TEST_DEVICE (cpu when
// unset): meson runs it as hostile_cpu and, with Vulkan, hostile_vulkan.
#include <cstdlib>
#include <functional>
#include <limits>
#include <optional>

#include <tensor/io.hpp>
#include <tensor/nn.hpp>

#include "test_util.hpp"

namespace {

using namespace tt;

using I1 = Tensor<1, Int>;
using I2 = Tensor<2, Int>;
using I3 = Tensor<3, Int>;
using B1 = Tensor<1, Bool>;

constexpr std::int64_t kI64Max = std::numeric_limits<std::int64_t>::max();
constexpr std::int64_t kI64Min = std::numeric_limits<std::int64_t>::min();
constexpr std::size_t k2p32 = std::size_t{1} << 32;

Device dev() {
  const char* env = std::getenv("TENSOR_TEST_DEVICE");
  return env && *env ? Device::parse(env) : Device::cpu();
}
bool is_cpu() { return dev() == Device::cpu(); }

Tensor<1> vec(std::vector<float> v) { return Tensor<1>::from_data(TensorData::from<float>(v), dev()); }
Tensor<2> mat(std::vector<float> v, std::size_t r, std::size_t c) {
  return Tensor<2>::from_data(TensorData::from<float>(v, {r, c}), dev());
}
template <std::size_t D>
std::vector<float> fvals(const Tensor<D>& t) { return t.into_data().template to_vec<float>(); }
template <std::size_t D>
std::vector<std::int32_t> ivals(const Tensor<D, Int>& t) { return t.into_data().convert(DType::I32).template to_vec<std::int32_t>(); }

// Normal work still gives the right answer (after a refused call).
void still_usable() {
  EXPECT_EQ(fvals(vec({1, 2, 3}) + 1.0f), (std::vector<float>{2, 3, 4}));
}

// ---- 1. shape products ---------------------------------------------------------------

TEST(HostileShapes, CreationRejectsElementCountsBeyond2p63) {
  const Device d = dev();
  EXPECT_THROWS(ShapeError, Tensor<2>::zeros({k2p32, k2p32}, d), "[zeros]", "too many elements");
  EXPECT_THROWS(ShapeError, Tensor<2>::empty({k2p32, k2p32}, d), "[empty]", "too many elements");
  EXPECT_THROWS(ShapeError, Tensor<2>::ones({k2p32, k2p32}, d), "[ones]", "too many elements");
  EXPECT_THROWS(ShapeError, Tensor<2>::full({k2p32, k2p32}, 1.0f, d), "[full]", "too many elements");
  EXPECT_THROWS(ShapeError, Tensor<2>::random({k2p32, k2p32}, Distribution::uniform(0, 1), d), "[random]");
  EXPECT_THROWS(ShapeError, (Tensor<8>::zeros({256, 256, 256, 256, 256, 256, 256, 256}, d)), "[zeros]");
  // A zero dim makes the tensor empty, but its other dims still have to fit.
  EXPECT_THROWS(ShapeError, Tensor<2>::zeros({std::numeric_limits<std::size_t>::max(), 0}, d), "[zeros]");
  // Elements that fit but bytes that do not: 2^62 f32 elements are 2^64 bytes.
  EXPECT_THROWS(ShapeError, Tensor<1>::zeros({std::size_t{1} << 62}, d, DType::F32), "[zeros]", "bytes");
  still_usable();
}

TEST(HostileShapes, TensorDataRejectsAWrappingProduct) {
  // 274177 x 67280421310721 = 2^64 + 1, which wraps to 1.
  EXPECT_THROWS(ShapeError, TensorData(std::vector<std::byte>(1), Shape{274177, 67280421310721ull}, DType::U8), "[TensorData]",
                "too many elements");
  EXPECT_THROWS(ShapeError, TensorData::from<std::uint8_t>({7}, Shape{274177, 67280421310721ull}), "[TensorData::from]");
  EXPECT_THROWS(ShapeError, TensorData::zeros(Shape{k2p32, k2p32}, DType::U8), "[TensorData::zeros]");
}

TEST(HostileShapes, ViewsAndCopiesRejectOverflowingShapes) {
  const Device d = dev();
  const auto one = Tensor<1>::ones({1}, d);
  EXPECT_THROWS(ShapeError, (one.expand<2>({static_cast<std::int64_t>(k2p32), static_cast<std::int64_t>(k2p32)})),
                "[expand]", "too many elements");
  const auto e0 = Tensor<1>::zeros({0}, d);
  EXPECT_THROWS(ShapeError, (e0.reshape<3>({0, static_cast<std::int64_t>(k2p32), static_cast<std::int64_t>(k2p32)})),
                "[reshape]");
  const auto two = vec({1, 2});
  EXPECT_THROWS(ShapeError, two.repeat_dim(0, std::size_t{1} << 63), "[repeat_dim]", "too many elements");
  // cat of two expanded views of 2^62 elements each: 2^63 does not fit.
  const auto big = one.expand<1>({std::int64_t{1} << 62});
  EXPECT_THROWS(ShapeError, cat(std::vector<Tensor<1>>{big, big}, 0), "[cat]");
  // unfold of an expanded 2^40-element view into windows of 2^30: 2^70 elements.
  const auto wide = one.expand<1>({std::int64_t{1} << 40});
  EXPECT_THROWS(ShapeError, wide.unfold(0, std::size_t{1} << 30, 1), "[unfold]", "too many elements");
  // Broadcasting [2^40, 1] + [1, 2^40].
  const auto col = Tensor<2>::ones({1, 1}, d).expand<2>({std::int64_t{1} << 40, 1});
  const auto row = Tensor<2>::ones({1, 1}, d).expand<2>({1, std::int64_t{1} << 40});
  EXPECT_THROWS(ShapeError, col + row, "[add]", "too many elements");
  EXPECT_EQ(fvals(one), (std::vector<float>{1}));
  still_usable();
}

TEST(HostileShapes, ReductionOfAHugeEmptyTensorIsAnErrorNotAHang) {
  const Device d = dev();
  // [2^62, 0] is empty; sum_dim(1) makes [2^62, 1], 2^65 bytes of f64 (2^64 of f32).
  const auto e = Tensor<2>::zeros({std::size_t{1} << 62, 0}, d, d.supports_dtype(DType::F64) ? DType::F64 : DType::F32);
  try {
    (void)e.sum_dim(1);
    ADD_FAILURE() << "sum_dim of [2^62, 0] along dim 1 returned";
  } catch (const Error& err) {
    EXPECT_EQ(std::string(err.what()).rfind("[sum_dim]", 0), 0u) << err.what();
  }
  EXPECT_EQ(e.sum_dim(0).shape(), Shape({1, 0}));
  EXPECT_EQ(e.prod_dim(0).shape(), Shape({1, 0}));
  EXPECT_EQ(e.cumsum(0).shape(), e.shape());
  EXPECT_EQ(e.any_dim(0).shape(), Shape({1, 0}));
  still_usable();
}

// Fuzz finding (tests/fuzz/corpus/hang-gather-cpu-seed16-131368.bin): gather / scatter
// with an empty index tensor whose dim is 2^60 long spun 2^60 times over empty rows on
// the cpu. An empty index gives an empty result at once, on every device.
TEST(HostileShapes, GatherAndScatterWithAHugeEmptyIndexReturnAtOnce) {
  const Device d = dev();
  const auto x = Tensor<2>::zeros({3, 0}, d);
  const auto idx = Tensor<2, Int>::zeros({std::size_t{1} << 60, 0}, d);
  EXPECT_EQ(x.gather(0, idx).shape(), Shape({std::size_t{1} << 60, 0}));
  const auto v = Tensor<2>::zeros({std::size_t{1} << 60, 0}, d);
  EXPECT_EQ(x.scatter(0, idx, v, IndexingUpdateOp::Add).shape(), Shape({3, 0}));
  still_usable();
}

TEST(HostileShapes, ArangeOfMoreThanFitsIsAnError) {
  EXPECT_THROWS(ShapeError, I1::arange(0, kI64Max, dev()), "[arange]");
  EXPECT_THROWS(ShapeError, I1::arange_step(kI64Min, kI64Max, 1, dev(), DType::I64), "[arange");
  EXPECT_EQ(ivals(I1::arange_step(kI64Max - 3, kI64Max, 2, dev(), DType::I64).sub_scalar(kI64Max - 3)),
            (std::vector<std::int32_t>{0, 2}));
  still_usable();
}

// ---- 2. allocation failure -------------------------------------------------------------

TEST(HostileAlloc, RefusedAllocationIsAnExecutionErrorAndTheProcessGoesOn) {
  const Device d = dev();
  const std::string name = d.to_string().substr(0, d.to_string().find(':'));
  // 2^60 f32 elements = 2^62 bytes: no machine maps that.
  EXPECT_THROWS(ExecutionError, Tensor<1>::zeros({std::size_t{1} << 60}, d, DType::F32), "[zeros]", name);
  EXPECT_THROWS(ExecutionError, Tensor<1>::zeros({1'000'000'000'000}, d, DType::F32), "[zeros]", name);
  EXPECT_THROWS(ExecutionError, I1::arange(0, std::int64_t{1} << 40, d, DType::I32), "[arange]", name);
  if (is_cpu()) {
    EXPECT_THROWS(ExecutionError, Tensor<1>::zeros({std::size_t{1} << 60}, d, DType::F32), "4611686018427387904 bytes");
    EXPECT_THROWS(ExecutionError, Tensor<1>::zeros({1'000'000'000'000}, d, DType::F32), "4000000000000 bytes");
  }
  // An expanded 2^40-element view is fine; materialising it is not.
  const auto v = Tensor<1>::ones({1}, d).expand<1>({std::int64_t{1} << 40});
  EXPECT_THROWS(ExecutionError, v.exp(), "[exp]", name);
  // A 2^21 x 2^21 matmul output (16 TiB of f32).
  const auto a = Tensor<2>::ones({1, 1}, d).expand<2>({std::int64_t{1} << 21, 1});
  const auto b = Tensor<2>::ones({1, 1}, d).expand<2>({1, std::int64_t{1} << 21});
  EXPECT_THROWS(ExecutionError, a.matmul(b), "[matmul]", name);
  still_usable();
  EXPECT_EQ(fvals(Tensor<2>::ones({2, 2}, d).matmul(Tensor<2>::ones({2, 2}, d))), (std::vector<float>{2, 2, 2, 2}));
}

// ---- 3. extreme slice steps, narrow ---------------------------------------------------

TEST(HostileSlice, ExtremeStepsGiveTheRightShape) {
  const Device d = dev();
  const auto t = I1::arange(0, 3, d).reshape<2>({3, 1});
  const auto s = t.slice({Slice{-2, 3, kI64Max}, Slice{-1, 1, -1}});
  EXPECT_EQ(s.shape(), Shape({1, 1}));
  EXPECT_EQ(ivals(s), (std::vector<std::int32_t>{1}));
  const auto v = I1::arange(0, 5, d);
  EXPECT_EQ(ivals(v.slice({Slice{0, std::nullopt, kI64Min}})), (std::vector<std::int32_t>{4}));
  EXPECT_EQ(ivals(v.slice({Slice{0, std::nullopt, kI64Min + 1}})), (std::vector<std::int32_t>{4}));
  EXPECT_EQ(ivals(v.slice({Slice{0, std::nullopt, kI64Max}})), (std::vector<std::int32_t>{0}));
  EXPECT_EQ(ivals(v.slice({Slice{1, 5, kI64Max}})), (std::vector<std::int32_t>{1}));
  EXPECT_EQ(ivals(v.slice({Slice{1, 1, kI64Min}})).size(), 0u);
  // The usual steps still work next to them.
  EXPECT_EQ(ivals(v.slice({Slice{0, std::nullopt, -2}})), (std::vector<std::int32_t>{4, 2, 0}));
  EXPECT_EQ(ivals(v.slice({Slice{1, std::nullopt, 3}})), (std::vector<std::int32_t>{1, 4}));
}

TEST(HostileSlice, NarrowRejectsAnOverflowingRange) {
  const auto v = vec({1, 2, 3, 4});
  const std::size_t huge = std::numeric_limits<std::size_t>::max() - 1;
  EXPECT_THROWS(IndexError, v.narrow(0, huge, 3), "[narrow]");
  EXPECT_THROWS(IndexError, v.narrow(0, 2, huge), "[narrow]");
  EXPECT_THROWS(IndexError, v.narrow(0, 3, 2), "[narrow]");
  EXPECT_EQ(fvals(v.narrow(0, 1, 3)), (std::vector<float>{2, 3, 4}));
  EXPECT_EQ(fvals(v), (std::vector<float>{1, 2, 3, 4}));
}

// ---- 4. aliasing through && ----------------------------------------------------------

TEST(HostileAliasing, AnOperandThatIsTheMovedTensorIsReadFirst) {
  {
    auto a = vec({1, 2, 3});
    auto r = std::move(a) + a;
    EXPECT_EQ(fvals(r), (std::vector<float>{2, 4, 6}));
  }
  {
    auto a = mat({1, 2, 3, 4}, 2, 2);
    auto r = std::move(a).matmul(a);
    EXPECT_EQ(fvals(r), (std::vector<float>{7, 10, 15, 22}));
  }
  {
    auto t = vec({-2, 3});
    auto r = std::move(t).square();
    EXPECT_EQ(fvals(r), (std::vector<float>{4, 9}));
  }
  {
    // issue 17, defect 1: the mean-squared-error line.
    const auto a = vec({3, 5, 7});
    const auto b = vec({1, 1, 1});
    EXPECT_EQ(fvals((a - b).square()), (std::vector<float>{4, 16, 36}));
    EXPECT_EQ(fvals((a - b).square().mean()), (std::vector<float>{56.0f / 3.0f}));
    EXPECT_EQ(fvals(a), (std::vector<float>{3, 5, 7}));
  }
  {
    auto a = vec({1, 2});
    auto r = std::move(a).mul(a).sub(vec({1, 1}));
    EXPECT_EQ(fvals(r), (std::vector<float>{0, 3}));
    auto m = B1::from_data(TensorData::from<bool>({true, false}), dev());
    auto w = std::move(m).bool_and(m);
    EXPECT_EQ(w.into_data().to_vec<bool>(), (std::vector<bool>{true, false}));
    auto x = vec({5, 6});
    auto y = std::move(x).slice_assign({Slice::range(0, 2)}, x);
    EXPECT_EQ(fvals(y), (std::vector<float>{5, 6}));
  }
}

// ---- 5. devices, enums, handles ---------------------------------------------------------

TEST(HostileDevices, NonexistentDevicesAreRejected) {
  const Device cpu3(DeviceId{kCpuDeviceType, 3});
  EXPECT_THROWS(DeviceError, Tensor<1>::zeros({2}, cpu3), "[zeros]", "no such device");
  EXPECT_THROWS(DeviceError, cpu3.sync(), "[Device::sync]", "no such device");
  EXPECT_THROWS(DeviceError, cpu3.settings(), "[Device::settings]");
  const Device far(DeviceId{kCpuDeviceType, 100});
  EXPECT_THROWS(DeviceError, Tensor<1>::zeros({2}, far), "[zeros]");
  const Device vk9(DeviceId{kVulkanDeviceType, 9});
  EXPECT_THROWS(DeviceError, vk9.sync(), "[Device::sync]");
  EXPECT_THROWS(DeviceError, Tensor<1>::from_data(TensorData::from<float>({1}), vk9), "[from_data]");
  EXPECT_THROWS(DeviceError, vec({1}).to_device(cpu3), "[to_device]");
  const Device nobody(DeviceId{200, 0});
  EXPECT_THROWS(DeviceError, nobody.sync(), "[Device::sync]");
  still_usable();
}

TEST(HostileDevices, OutOfRangeEnumValuesAreTypedErrors) {
  const Device d = dev();
  EXPECT_THROWS(DTypeError, set_default_dtypes(d, static_cast<FloatDType>(7), IntDType::I32, BoolDType::Native),
                "[set_default_dtypes]", "FloatDType");
  EXPECT_THROWS(DTypeError, set_default_dtypes(d, FloatDType::F32, static_cast<IntDType>(200), BoolDType::Native),
                "[set_default_dtypes]", "IntDType");
  EXPECT_THROWS(DTypeError, set_default_dtypes(d, FloatDType::F32, IntDType::I32, static_cast<BoolDType>(3)),
                "[set_default_dtypes]", "BoolDType");
  EXPECT_THROWS(DTypeError, d.dtype_usage(static_cast<DType>(99)), "[Device::dtype_usage]");
  EXPECT_THROWS(DTypeError, d.supports_dtype(static_cast<DType>(16)), "[Device::supports_dtype]");
  EXPECT_THROWS(DTypeError, TensorData(std::vector<std::byte>(4), Shape{1}, static_cast<DType>(42)), "[TensorData]");
  EXPECT_THROWS(DTypeError, TensorData::from<float>({1}).convert(static_cast<DType>(42)), "[TensorData::convert]");
  EXPECT_THROWS(DTypeError, Tensor<1>::zeros({2}, d, static_cast<DType>(42)), "[zeros]");
  EXPECT_THROWS(DTypeError, vec({1}).cast(static_cast<DType>(42)), "[cast]");
  // Nothing was applied: the float default is still a float dtype.
  EXPECT_TRUE(is_float(to_dtype(d.settings().float_dtype)));
  EXPECT_EQ(Tensor<1>::zeros({1}, d).dtype(), to_dtype(d.settings().float_dtype));
}

TEST(HostileDevices, TensorFromAHandleChecksRankAndKind) {
  const auto f = mat({1, 2, 3, 4}, 2, 2);
  EXPECT_THROWS(ShapeError, Tensor<3>(detail::retain(f.handle())), "[Tensor]", "rank");
  EXPECT_THROWS(DTypeError, (I2(detail::retain(f.handle()))), "[Tensor]", "kind");
  EXPECT_THROWS(Error, Tensor<2>(detail::Handle{}), "[Tensor]", "empty");
  const Tensor<2> g(detail::retain(f.handle()));
  EXPECT_EQ(fvals(g), (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(fvals(f), (std::vector<float>{1, 2, 3, 4}));
}

// ---- 6. messages -------------------------------------------------------------------------

// Every error names the op the user called, first: "[op] ...", never a layer
// ([vulkan], [cpu], [dispatch], [tensor], [dtype], [settings], ...).
TEST(HostileMessages, EveryErrorStartsWithTheOpTheUserCalled) {
  const Device d = dev();
  const auto x = mat({1, 2, 3, 4, 5, 6}, 2, 3);
  const auto idx = I1::from_data(TensorData::from<std::int32_t>({0, 7}), d);
  struct Case {
    const char* op;
    std::function<void()> call;
  };
  const std::vector<Case> cases = {
      {"zeros", [&] { (void)Tensor<2>::zeros({k2p32, k2p32}, d); }},
      {"zeros", [&] { (void)Tensor<1>::zeros({2}, Device(DeviceId{kCpuDeviceType, 3})); }},
      {"zeros", [&] { (void)Tensor<1>::zeros({2}, d, static_cast<DType>(42)); }},
      {"ones", [&] { (void)Tensor<1>::ones({std::size_t{1} << 62}, d); }},
      {"full", [&] { (void)Tensor<2>::full({k2p32, k2p32}, 1.0f, d); }},
      {"arange", [&] { (void)I1::arange(0, kI64Max, d); }},
      {"arange_step", [&] { (void)I1::arange_step(0, 10, 0, d); }},
      {"from_data", [&] { (void)Tensor<2>::from_data(TensorData::from<float>({1, 2, 3}), d); }},
      {"add", [&] { (void)(x + mat({1, 2, 3, 4, 5, 6}, 3, 2)); }},
      {"matmul", [&] { (void)x.matmul(x); }},
      {"reshape", [&] { (void)x.reshape<2>({4, -1}); }},
      {"expand", [&] { (void)x.expand<2>({3, 3}); }},
      {"repeat_dim", [&] { (void)x.repeat_dim(0, std::size_t{1} << 63); }},
      {"slice", [&] { (void)x.slice({Slice{0, 2, 0}}); }},
      {"narrow", [&] { (void)x.narrow(1, 2, 5); }},
      {"sum_dim", [&] { (void)x.sum_dim(5); }},
      {"argmax", [&] { (void)x.argmax(-3); }},
      {"sort", [&] { (void)x.sort(2); }},
      {"topk", [&] { (void)x.topk(4, 1); }},
      // Read back: on vulkan an index is checked on the device, and the error surfaces at the wait.
      {"select", [&] { (void)x.select(1, idx).into_data(); }},
      {"gather", [&] { (void)x.gather(1, I2::zeros({3, 3}, d)); }},
      {"cast", [&] { (void)x.cast(static_cast<DType>(42)); }},
      {"swap_dims", [&] { (void)x.swap_dims(0, 2); }},
      {"unfold", [&] { (void)x.unfold(1, 0, 1); }},
      {"shape", [&] { Tensor<2> m = x; Tensor<2> n = std::move(m); (void)n; (void)m.shape(); }},
      {"dtype", [&] { Tensor<2> m = x; Tensor<2> n = std::move(m); (void)n; (void)m.dtype(); }},
      {"set_default_dtypes", [&] { set_default_dtypes(d, static_cast<FloatDType>(9), IntDType::I32, BoolDType::Native); }},
      {"Device::sync", [&] { Device(DeviceId{kCpuDeviceType, 3}).sync(); }},
      {"Tensor", [&] { (void)Tensor<3>(detail::retain(x.handle())); }},
  };
  for (const Case& c : cases) {
    try {
      c.call();
      ADD_FAILURE() << c.op << ": no error";
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_EQ(msg.rfind(std::string("[") + c.op + "] ", 0), 0u) << c.op << ": " << msg;
    } catch (const std::exception& e) {
      ADD_FAILURE() << c.op << ": not a tensor::Error: " << e.what();
    }
  }
  EXPECT_EQ(fvals(x), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  still_usable();
}

// Issue 30: the op the user called, not an inner op a default or kernel is built from
// ([ctc_loss] from ctc_loss_backward, [scatter] / [select_add] from scatter_nd, [TensorData]
// from the loaders), nor an accessor a method calls first ([shape] / [dtype] / [device] from
// zeros_like, unsqueeze_dim, int_ ... on a moved-from tensor).
TEST(HostileMessages, ErrorsNameTheCalledOpNotAnInnerOne) {
  const Device d = dev();
  const auto x = mat({1, 2, 3, 4, 5, 6}, 2, 3);
  Tensor<2> moved = x;
  const Tensor<2> keep = std::move(moved);
  const Tensor<2>& m = moved;  // NOLINT(bugprone-use-after-move): the moved-from tensor is the input
  I2 imoved = I2::zeros({1, 1}, d);
  const I2 ikeep = std::move(imoved);
  // ctc: log_probs [T 2, N 1, C 3], one target label 5 (out of range).
  const auto lp = Tensor<3>::zeros({2, 1, 3}, d);
  const auto tg = I2::from_data(TensorData::from<std::int32_t>({5}, {1, 1}), d);
  const auto il = I1::from_data(TensorData::from<std::int32_t>({2}), d);
  const auto tl = I1::from_data(TensorData::from<std::int32_t>({1}), d);
  const auto nd_bad = I2::from_data(TensorData::from<std::int32_t>({5}, {1, 1}), d);
  const auto nd_ok = I2::from_data(TensorData::from<std::int32_t>({1}, {1, 1}), d);
  const auto rows = Tensor<2>::ones({1, 3}, d);
  struct Case {
    const char* op;
    std::function<void()> call;
  };
  const std::vector<Case> cases = {
      {"exp", [&] { (void)m.exp(); }},
      {"zeros_like", [&] { (void)m.zeros_like(); }},
      {"ones_like", [&] { (void)m.ones_like(); }},
      {"full_like", [&] { (void)m.full_like(1.0f); }},
      {"empty_like", [&] { (void)m.empty_like(); }},
      {"random_like", [&] { (void)m.random_like(Distribution::uniform(0, 1)); }},
      {"num_elements", [&] { (void)m.num_elements(); }},
      {"dims", [&] { (void)m.dims(); }},
      {"device", [&] { (void)m.device(); }},
      {"into_int", [&] { (void)m.int_(); }},  // int_ and int_cast are the op into_int
      {"into_float", [&] { (void)imoved.float_(); }},  // NOLINT(bugprone-use-after-move)
      {"narrow", [&] { (void)m.narrow(0, 0, 1); }},
      {"unsqueeze_dim", [&] { (void)m.unsqueeze_dim(0); }},
      {"sum_dim", [&] { (void)m.sum_dim(0); }},
      {"add", [&] { (void)(x + m); }},
      {"matmul", [&] { (void)m.matmul(x); }},
      {"into_data", [&] { (void)m.into_data(); }},
      {"to_device", [&] { (void)m.to_device(d); }},
      {"cat", [&] { (void)cat(std::vector<Tensor<2>>{x, m}, 0); }},
      {"ctc_loss", [&] { (void)nn::ctc_loss(lp, tg, il, tl).into_data(); }},
      {"ctc_loss_backward", [&] { (void)nn::ctc_loss_backward(lp, tg, il, tl, vec({1})).into_data(); }},
      {"scatter_nd", [&] { (void)x.scatter_nd(nd_bad, rows).into_data(); }},
      {"scatter_nd", [&] { (void)x.scatter_nd(nd_bad, rows, IndexingUpdateOp::Add).into_data(); }},
      {"scatter_nd", [&] { (void)x.scatter_nd(nd_bad, rows, IndexingUpdateOp::Mul).into_data(); }},
      {"scatter_nd", [&] { (void)x.scatter_nd(nd_ok, rows, static_cast<IndexingUpdateOp>(9)).into_data(); }},
      {"scatter", [&] { (void)x.scatter(0, I2::zeros({1, 3}, d), rows, static_cast<IndexingUpdateOp>(9)).into_data(); }},
      {"gather_nd", [&] { (void)x.gather_nd<2>(nd_bad).into_data(); }},
      {"load_npy", [&] { (void)io::load_npy(::testing::TempDir() + "/no_such_file.npy"); }},
      {"load_safetensors", [&] { (void)io::load_safetensors(::testing::TempDir() + "/no_such_file.safetensors"); }},
  };
  for (const Case& c : cases) {
    try {
      c.call();
      ADD_FAILURE() << c.op << ": no error";
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_EQ(msg.rfind(std::string("[") + c.op + "] ", 0), 0u) << c.op << ": " << msg;
    } catch (const std::exception& e) {
      ADD_FAILURE() << c.op << ": not a tensor::Error: " << e.what();
    }
  }
  EXPECT_EQ(fvals(x), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(fvals(keep), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  still_usable();
}

// ---- 7. cpu / vulkan disagreements -------------------------------------------------------

TEST(HostileAgreement, PowiOfAHugeOddExponentKeepsTheSign) {
  EXPECT_EQ(fvals(vec({-1, 1, 0.5f, -2}).powi_scalar(kI64Max)),
            (std::vector<float>{-1, 1, 0, -std::numeric_limits<float>::infinity()}));
  EXPECT_EQ(fvals(vec({-1, 1}).powi_scalar(kI64Max - 1)), (std::vector<float>{1, 1}));
  EXPECT_EQ(fvals(vec({-1, 2}).powi_scalar(kI64Min + 1)), (std::vector<float>{-1, 0}));
  const auto i = I1::from_data(TensorData::from<std::int32_t>({-1, 1, 0}), dev());
  EXPECT_EQ(ivals(i.powi_scalar(kI64Max)), (std::vector<std::int32_t>{-1, 1, 0}));
}

TEST(HostileAgreement, MatmulWithAnEmptyBatchKeepsIt) {
  const Device d = dev();
  if (!d.supports_dtype(DType::I16)) GTEST_SKIP() << "no i16 on " << d.to_string();
  const auto a = I3::zeros({0, 1, 1}, d, DType::I16);
  const auto b = I3::ones({1, 1, 2}, d, DType::I16);
  EXPECT_EQ(a.matmul(b).shape(), Shape({0, 1, 2}));
  EXPECT_EQ(b.matmul(I3::zeros({0, 2, 1}, d, DType::I16)).shape(), Shape({0, 1, 1}));
}

TEST(HostileAgreement, SelectOnAnEmptyTensorChecksItsIndices) {
  const Device d = dev();
  const auto e = Tensor<2>::zeros({0, 3}, d);
  const auto bad = I1::from_data(TensorData::from<std::int32_t>({1, 5}), d);
  EXPECT_THROWS(IndexError, e.select(1, bad), "[select]", "5");
  const auto ok = I1::from_data(TensorData::from<std::int32_t>({2, 0}), d);
  EXPECT_EQ(e.select(1, ok).shape(), Shape({0, 2}));
}

// An out-of-range index is the bad call's error and nobody else's: the cpu throws at the
// call; vulkan checks indices on the device, so there the call may return and the error
// is thrown by a read of its result or of anything computed from it, and never by a read
// of a tensor that does not depend on it (the fuzzer's finding
// vulkan-deferred-select-check-984: the next, unrelated read threw it).
TEST(HostileAgreement, AnOutOfRangeIndexErrorBelongsToItsResult) {
  const Device d = dev();
  const auto x = Tensor<2>::from_data(TensorData::from<float>({1, 2, 3, 4}, Shape{2, 2}), d);
  const auto bad = I1::from_data(TensorData::from<std::int32_t>({1, 8}), d);
  const auto bad2 = I2::from_data(TensorData::from<std::int32_t>({0, 1, 7, 0}, Shape{2, 2}), d);
  const auto before = x * 2.0f;  // queued before the bad ops, read after them
  std::optional<Tensor<2>> sel, gat, derived;
  try {
    sel = x.select(0, bad);
    derived = (sel->exp() + 1.0f).sum_dim(1).matmul(x.slice({Slice::range(0, 1)}));
  } catch (const IndexError& e) {
    EXPECT_NE(std::string(e.what()).find("[select] index out of range for dim 0"), std::string::npos) << e.what();
  }
  try {
    gat = x.gather(1, bad2);
  } catch (const IndexError& e) {
    EXPECT_NE(std::string(e.what()).find("[gather] index out of range for dim 1"), std::string::npos) << e.what();
  }
  const auto after = x + 1.0f;  // queued after the bad ops
  d.sync();                     // a sync is not a read: it throws nothing
  EXPECT_EQ(fvals(after), (std::vector<float>{2, 3, 4, 5}));
  EXPECT_EQ(fvals(before), (std::vector<float>{2, 4, 6, 8}));
  EXPECT_EQ(fvals(x), (std::vector<float>{1, 2, 3, 4}));
  if (sel) {
    EXPECT_THROWS(IndexError, (void)sel->into_data(), "[select]", "got 8");
    EXPECT_THROWS(IndexError, (void)sel->to_device(Device::cpu()).into_data(), "[select]");
  }
  if (derived) {
    EXPECT_THROWS(IndexError, (void)derived->into_data(), "[select]", "got 8");
  }
  if (gat) {
    EXPECT_THROWS(IndexError, (void)gat->into_data(), "[gather]", "got 7");
  }
  EXPECT_FALSE(sel && d.id().type_id == kCpuDeviceType) << "the cpu checks indices at the call";
  EXPECT_EQ(fvals(x.select(0, I1::from_data(TensorData::from<std::int32_t>({1, 0}), d))),
            (std::vector<float>{3, 4, 1, 2}));
  still_usable();
}

}  // namespace
