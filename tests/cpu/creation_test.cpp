// CPU creation, transfer and conversion: from_data/into_data round trips, full and
// zeros for every dtype, random distributions and seeding, arange, casts, device ops.
#include <cmath>
#include <limits>
#include <numeric>
#include <thread>

#include "backends/cpu/cpu_info.hpp"
#include "backends/cpu/gemm.hpp"
#include "backends/cpu/quant.hpp"
#include "cpu_test_util.hpp"

namespace tensor::cpu::test {
namespace {

constexpr DType kAll[] = {DType::F64, DType::F32, DType::F16, DType::BF16, DType::I64,  DType::I32,   DType::I16,
                          DType::I8,  DType::U64, DType::U32, DType::U16,  DType::U8,   DType::Bool, DType::BoolU8,
                          DType::BoolU32};

TEST(CpuCreation, StorageIsAlignedAndFromDataCopies) {
  std::vector<float> v{1, 2, 3};
  const Prim p = from_vec(v, Shape{3});
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(cpu_of(p).data()) % 64, 0u);
  EXPECT_TRUE(cpu_of(p).can_mut());
  const Prim q = p;
  EXPECT_FALSE(cpu_of(p).can_mut());
  EXPECT_EQ(to_f32(p), v);
}

// Small tensors (their primitives and storage come from per-thread block stacks)
// made on worker threads and freed on the main thread, and the other way round,
// more of them than a stack holds; every value read back.
TEST(CpuCreation, SmallTensorsMadeOnOneThreadFreedOnAnother) {
  constexpr std::size_t kThreads = 4, kEach = 200;
  std::vector<std::vector<Prim>> made(kThreads);
  std::vector<std::thread> workers;
  for (std::size_t t = 0; t < kThreads; ++t)
    workers.emplace_back([&, t] {
      for (std::size_t i = 0; i < kEach; ++i)
        made[t].push_back(from_vec(std::vector<float>{float(t), float(i), 1, 2}, Shape{4}));
    });
  for (auto& w : workers) w.join();
  for (std::size_t t = 0; t < kThreads; ++t)
    for (std::size_t i = 0; i < kEach; ++i)
      ASSERT_EQ(to_vec<float>(made[t][i]), (std::vector<float>{float(t), float(i), 1, 2}));
  made.clear();  // freed here, made there
  std::vector<Prim> mine;
  for (std::size_t i = 0; i < kEach; ++i) mine.push_back(from_vec(std::vector<float>{float(i)}, Shape{1}));
  std::thread freer([&] {
    for (std::size_t i = 0; i < kEach; ++i) ASSERT_EQ(to_vec<float>(mine[i]), (std::vector<float>{float(i)}));
    mine.clear();
  });
  freer.join();
  EXPECT_TRUE(mine.empty());
}

TEST(CpuCreation, FullZerosOnesEveryDtype) {
  for (DType dt : kAll) {
    SCOPED_TRACE(std::string(dtype_name(dt)));
    const Prim f = entry<Family::Full>(OpCode::full)(Shape{2, 3}, Scalar(3), kCpuDevice, dt);
    const Prim z = entry<Family::Create>(OpCode::zeros)(Shape{2, 3}, kCpuDevice, dt);
    const Prim o = entry<Family::Create>(OpCode::ones)(Shape{2, 3}, kCpuDevice, dt);
    const Prim e = entry<Family::Create>(OpCode::empty)(Shape{0, 3}, kCpuDevice, dt);
    EXPECT_EQ(cpu_of(f).dtype(), dt);
    EXPECT_EQ(cpu_of(e).shape(), (Shape{0, 3}));
    const TensorData fd = entry<Family::IntoData>(OpCode::into_data)(f).get();
    const TensorData zd = entry<Family::IntoData>(OpCode::into_data)(z).get();
    const TensorData od = entry<Family::IntoData>(OpCode::into_data)(o).get();
    // Compare through f64 (bool: nonzero is 1).
    const auto fv = fd.convert(DType::F64).to_vec<double>();
    const auto zv = zd.convert(DType::F64).to_vec<double>();
    const auto ov = od.convert(DType::F64).to_vec<double>();
    const double three = is_bool(dt) ? 1.0 : 3.0;
    for (std::size_t i = 0; i < 6; ++i) {
      EXPECT_EQ(fv[i], three);
      EXPECT_EQ(zv[i], 0.0);
      EXPECT_EQ(ov[i], 1.0);
    }
  }
  // Float scalars truncate (and saturate) for int dtypes.
  const Prim t = entry<Family::Full>(OpCode::full)(Shape{2}, Scalar(-2.9), kCpuDevice, DType::I16);
  EXPECT_EQ(to_vec<std::int16_t>(t), (std::vector<std::int16_t>{-2, -2}));
  const Prim s = entry<Family::Full>(OpCode::full)(Shape{1}, Scalar(1e9), kCpuDevice, DType::I8);
  EXPECT_EQ(to_vec<std::int8_t>(s), (std::vector<std::int8_t>{127}));
}

TEST(CpuCreation, IntoDataOfViewsAndEmpty) {
  std::vector<std::int32_t> v(12);
  std::iota(v.begin(), v.end(), 0);
  const Prim a = from_vec(v, Shape{3, 4});
  const TensorData d = entry<Family::IntoData>(OpCode::into_data)(swap_dims(a, 0, 1)).get();
  EXPECT_EQ(d.shape(), (Shape{4, 3}));
  EXPECT_EQ(d.to_vec<std::int32_t>(), (std::vector<std::int32_t>{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11}));
  const TensorData e = entry<Family::IntoData>(OpCode::into_data)(from_vec(std::vector<double>{}, Shape{0, 2})).get();
  EXPECT_EQ(e.num_elements(), 0u);
  EXPECT_EQ(e.dtype(), DType::F64);
  // A sliced view that is contiguous with a nonzero offset.
  const TensorData s = entry<Family::IntoData>(OpCode::into_data)(slice(a, {{1, 1, 2}, {0, 1, 4}})).get();
  EXPECT_EQ(s.to_vec<std::int32_t>(), (std::vector<std::int32_t>{4, 5, 6, 7, 8, 9, 10, 11}));
}

TEST(CpuCreation, ArangeAndArangeStep) {
  const Prim a = entry<Family::Range>(OpCode::arange)(-2, 3, kCpuDevice, DType::I64);
  EXPECT_EQ(to_vec<std::int64_t>(a), (std::vector<std::int64_t>{-2, -1, 0, 1, 2}));
  const Prim b = entry<Family::RangeStep>(OpCode::arange_step)(0, 10, 3, kCpuDevice, DType::I32);
  EXPECT_EQ(to_vec<std::int32_t>(b), (std::vector<std::int32_t>{0, 3, 6, 9}));
  const Prim c = entry<Family::RangeStep>(OpCode::arange_step)(5, -1, -2, kCpuDevice, DType::I8);
  EXPECT_EQ(to_vec<std::int8_t>(c), (std::vector<std::int8_t>{5, 3, 1}));
  const Prim d = entry<Family::RangeStep>(OpCode::arange_step)(3, 3, 1, kCpuDevice, DType::U8);
  EXPECT_EQ(cpu_of(d).shape(), (Shape{0}));
  const Prim e = entry<Family::RangeStep>(OpCode::arange_step)(INT64_MIN, INT64_MAX, INT64_MAX, kCpuDevice, DType::I64);
  EXPECT_EQ(to_vec<std::int64_t>(e), (std::vector<std::int64_t>{INT64_MIN, -1, INT64_MAX - 1}));
}

TEST(CpuCreation, RandomDistributionsAndSeed) {
  const auto random = entry<Family::Random>(OpCode::random);
  const auto seed = cpu().get<dispatch::DeviceOp::seed>();
  seed(kCpuDevice, 42);
  const auto u1 = to_f32(random(Shape{4096}, Distribution{}, kCpuDevice, DType::F32));
  seed(kCpuDevice, 42);
  const auto u2 = to_f32(random(Shape{4096}, Distribution{}, kCpuDevice, DType::F32));
  EXPECT_EQ(u1, u2);
  double mean = 0;
  for (float x : u1) {
    ASSERT_GE(x, 0.0f);
    ASSERT_LT(x, 1.0f);
    mean += x;
  }
  EXPECT_NEAR(mean / 4096, 0.5, 0.03);

  const auto h = to_vec<f16>(random(Shape{4096}, Distribution::uniform(-1, 1), kCpuDevice, DType::F16));
  for (f16 x : h) {
    ASSERT_GE(static_cast<float>(x), -1.0f);
    ASSERT_LT(static_cast<float>(x), 1.0f);
  }

  const auto n = to_vec<double>(random(Shape{20000}, Distribution::normal(3, 2), kCpuDevice, DType::F64));
  double m = 0, v = 0;
  for (double x : n) m += x;
  m /= static_cast<double>(n.size());
  for (double x : n) v += (x - m) * (x - m);
  v /= static_cast<double>(n.size());
  EXPECT_NEAR(m, 3.0, 0.1);
  EXPECT_NEAR(std::sqrt(v), 2.0, 0.1);

  const auto b = to_vec<std::int32_t>(random(Shape{4000}, Distribution::bernoulli(0.25), kCpuDevice, DType::I32));
  int ones = 0;
  for (std::int32_t x : b) {
    ASSERT_TRUE(x == 0 || x == 1);
    ones += x;
  }
  EXPECT_NEAR(ones / 4000.0, 0.25, 0.04);

  const auto iu = to_vec<std::int16_t>(random(Shape{4000}, Distribution::uniform(-3, 4), kCpuDevice, DType::I16));
  bool seen_low = false, seen_high = false;
  for (std::int16_t x : iu) {
    ASSERT_GE(x, -3);
    ASSERT_LT(x, 4);
    seen_low = seen_low || x == -3;
    seen_high = seen_high || x == 3;
  }
  EXPECT_TRUE(seen_low && seen_high);
}

TEST(CpuCast, EveryPairAnyLayout) {
  // Values every dtype holds: 0..5, read through a transposed view.
  const std::vector<double> base{0, 1, 2, 3, 4, 5};
  for (DType from : kAll)
    for (DType to : kAll) {
      SCOPED_TRACE(std::string(dtype_name(from)) + " -> " + std::string(dtype_name(to)));
      const TensorData src = TensorData::from(base, Shape{2, 3}).convert(from);
      const Prim p = swap_dims(entry<Family::FromData>(OpCode::from_data)(src, kCpuDevice), 0, 1);
      const Prim r = entry<Family::Cast>(OpCode::cast)(p, to);
      ASSERT_EQ(cpu_of(r).dtype(), to);
      const auto got = entry<Family::IntoData>(OpCode::into_data)(r).get().convert(DType::F64).to_vec<double>();
      const std::vector<double> t{0, 3, 1, 4, 2, 5};
      for (std::size_t i = 0; i < 6; ++i) {
        const double want = (is_bool(from) || is_bool(to)) ? (t[i] != 0 ? 1.0 : 0.0) : t[i];
        ASSERT_EQ(got[i], want) << i;
      }
    }
}

TEST(CpuCast, RustAsSemantics) {
  const Prim f = from_vec(std::vector<float>{4.4f, 5.5f, -6.6f, NAN, 1e10f, -1e10f}, Shape{6});
  EXPECT_EQ(to_vec<std::int32_t>(entry<Family::Cast>(OpCode::into_int)(f, DType::I32)),
            (std::vector<std::int32_t>{4, 5, -6, 0, INT32_MAX, INT32_MIN}));
  EXPECT_EQ(to_vec<std::uint8_t>(entry<Family::Cast>(OpCode::into_int)(f, DType::U8)),
            (std::vector<std::uint8_t>{4, 5, 0, 0, 255, 0}));
  const Prim i = from_vec(std::vector<std::int32_t>{300, -1}, Shape{2});
  EXPECT_EQ(to_vec<std::uint8_t>(entry<Family::Cast>(OpCode::cast)(i, DType::U8)), (std::vector<std::uint8_t>{44, 255}));
  const Prim b = from_vec(std::vector<std::uint8_t>{1, 0}, Shape{2}, DType::Bool);
  EXPECT_EQ(to_vec<double>(entry<Family::Cast>(OpCode::into_float)(b, DType::F64)), (std::vector<double>{1, 0}));
}

// Float -> int casts on long contiguous runs (the vectorized loop and its remainder):
// truncation, saturation at both ends, NaN -> 0, the values next to each bound; the
// reference is Rust's `as` written out here.
template <class To, class From>
void check_float_to_int_run(DType from, DType to) {
  constexpr double lo = static_cast<double>(std::numeric_limits<To>::min());
  constexpr double hi = static_cast<double>(std::numeric_limits<To>::max());
  std::vector<From> x;
  for (int i = 0; i < 700; ++i) x.push_back(static_cast<From>((i % 41 - 20) * 0.37 + (i % 3) * 1e-3));
  const From specials[] = {std::numeric_limits<From>::quiet_NaN(), std::numeric_limits<From>::infinity(),
                           -std::numeric_limits<From>::infinity(), static_cast<From>(lo), static_cast<From>(hi),
                           std::nextafter(static_cast<From>(lo), From(0)), std::nextafter(static_cast<From>(hi), From(0)),
                           std::nextafter(static_cast<From>(lo), -std::numeric_limits<From>::infinity()),
                           std::nextafter(static_cast<From>(hi), std::numeric_limits<From>::infinity()),
                           From(-0.0), From(0.999), From(-0.999), static_cast<From>(lo - 1e3), static_cast<From>(hi + 1e3)};
  for (std::size_t k = 0; k < std::size(specials); ++k) x.insert(x.begin() + static_cast<std::ptrdiff_t>(37 * k + 5), specials[k]);
  const auto got = to_vec<To>(entry<Family::Cast>(OpCode::cast)(from_vec(x, Shape{x.size()}, from), to));
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double v = static_cast<double>(x[i]);
    const To want = std::isnan(v) ? To{0} : v <= lo ? std::numeric_limits<To>::min()
                                      : v >= hi ? std::numeric_limits<To>::max() : static_cast<To>(std::trunc(v));
    ASSERT_EQ(got[i], want) << dtype_name(from) << " -> " << dtype_name(to) << " of " << v << " at " << i;
  }
}

TEST(CpuCast, LongFloatToIntRunsSaturate) {
  check_float_to_int_run<std::int32_t, float>(DType::F32, DType::I32);
  check_float_to_int_run<std::int8_t, float>(DType::F32, DType::I8);
  check_float_to_int_run<std::uint8_t, float>(DType::F32, DType::U8);
  check_float_to_int_run<std::uint32_t, float>(DType::F32, DType::U32);
  check_float_to_int_run<std::int64_t, float>(DType::F32, DType::I64);
  check_float_to_int_run<std::int32_t, double>(DType::F64, DType::I32);
  check_float_to_int_run<std::int64_t, double>(DType::F64, DType::I64);
  check_float_to_int_run<std::uint64_t, double>(DType::F64, DType::U64);
  check_float_to_int_run<std::int16_t, double>(DType::F64, DType::I16);
}

TEST(CpuDevice, DeviceOpsAndInfo) {
  EXPECT_EQ(cpu().get<dispatch::DeviceOp::name>()(kCpuDevice), "cpu");
  EXPECT_EQ(cpu().get<dispatch::DeviceOp::device_count>()(), 1u);
  cpu().get<dispatch::DeviceOp::flush>()(kCpuDevice);
  const auto usage = cpu().get<dispatch::DeviceOp::dtype_usage>();
  for (DType dt : kAll) {
    const bool general = dt != DType::BoolU32;
    // BF16 adds Accelerated where its products run on AVX512_BF16 (gemm_test checks when).
    const DTypeUsageSet want =
        dt == DType::BF16 && bf16_gemm_live() ? DTypeUsageSet::general() | DTypeUsage::Accelerated : DTypeUsageSet::general();
    EXPECT_EQ(usage(kCpuDevice, dt) == want, general) << dtype_name(dt);
  }
  EXPECT_TRUE(usage(kCpuDevice, DType::BoolU32).empty());
  // QFloat: the backend answers only its integer path (dispatch derives Storage / Arithmetic).
  EXPECT_EQ(usage(kCpuDevice, DType::QFloat) == DTypeUsageSet(DTypeUsage::Accelerated), int8_products_live());
  EXPECT_EQ(usage(kCpuDevice, DType::QFloat).empty(), !int8_products_live());
  EXPECT_FALSE(compiled_targets().empty());
  EXPECT_FALSE(std::string(current_target_name()).empty());
  EXPECT_FALSE(blis_arch().empty());
  EXPECT_GE(omp_threads(), 1);
}

}  // namespace
}  // namespace tensor::cpu::test
