// CPU performance paths: the Highway unary, reduction and transpose kernels on every
// compiled target against scalar references; the large-buffer cache; to_contiguous
// of transposed / flipped / permuted / sliced layouts; sums over permuted buffers.
#include <bit>
#include <cmath>
#include <limits>
#include <thread>
#include <hwy/aligned_allocator.h>
#include <hwy/targets.h>

#include "backends/cpu/cpu_info.hpp"
#include "backends/cpu/convert_hwy.hpp"
#include "backends/cpu/cpu_ops.hpp"
#include "backends/cpu/layout_hwy.hpp"
#include "backends/cpu/reduce_hwy.hpp"
#include "backends/cpu/unary_hwy.hpp"
#include "cpu_test_util.hpp"

namespace tensor::cpu::test {
namespace {

using simd::UnOp;

constexpr UnOp kUnOps[] = {UnOp::Exp,  UnOp::Expm1, UnOp::Log,     UnOp::Log1p, UnOp::Sin,   UnOp::Cos,
                           UnOp::Tanh, UnOp::Sqrt,  UnOp::Abs,     UnOp::Neg,   UnOp::Erf,   UnOp::Sigmoid,
                           UnOp::Recip, UnOp::Floor, UnOp::Ceil,   UnOp::Trunc, UnOp::Round};

// Inputs: a sweep over [-12, 12] with odd length (vector bodies and tails), plus
// the edges each kernel must hand to libm.
template <class T>
std::vector<T> unary_inputs() {
  std::vector<T> v;
  for (int i = 0; i < 301; ++i) v.push_back(static_cast<T>(-12.0 + 24.0 * i / 300.0));
  const T inf = std::numeric_limits<T>::infinity();
  for (T x : {T(0), T(-0.0), T(0.5), T(2.5), T(-2.5), T(-0.999), T(1e-30), T(100), T(-100), T(5e4), T(-1), inf, -inf,
              std::numeric_limits<T>::quiet_NaN(), std::numeric_limits<T>::denorm_min()})
    v.push_back(x);
  return v;
}

// Within `ulps` units in the last place of the libm value (or both NaN, or equal).
template <class T>
bool close_ulps(T got, T want, double ulps) {
  if (std::isnan(want)) return std::isnan(got);
  if (got == want) return true;
  if (std::isinf(want) || std::isinf(got)) return false;
  const double scale = std::max<double>(std::fabs(static_cast<double>(want)), std::numeric_limits<T>::min());
  return std::fabs(static_cast<double>(got) - static_cast<double>(want)) <=
         ulps * scale * std::numeric_limits<T>::epsilon() + std::numeric_limits<T>::denorm_min();
}

template <class T>
void check_unary(const std::string& target) {
  const std::vector<T> in = unary_inputs<T>();
  for (UnOp op : kUnOps) {
    std::vector<T> out(in.size());
    if constexpr (std::is_same_v<T, float>) simd::unary_f32(op, in.data(), out.data(), in.size());
    else simd::unary_f64(op, in.data(), out.data(), in.size());
    std::vector<T> same = in;  // in place
    if constexpr (std::is_same_v<T, float>) simd::unary_f32(op, same.data(), same.data(), same.size());
    else simd::unary_f64(op, same.data(), same.data(), same.size());
    for (std::size_t i = 0; i < in.size(); ++i) {
      // Highway's math is within 4 ulp; log1p's u = 1 + x rewrite and erf add a few.
      const T want = simd::unary_ref(op, in[i]);
      ASSERT_TRUE(close_ulps(out[i], want, 8)) << target << " op " << static_cast<int>(op) << " x=" << in[i]
                                               << " got " << out[i] << " want " << want;
      ASSERT_TRUE(close_ulps(same[i], want, 8)) << target << " in place, op " << static_cast<int>(op);
    }
  }
}

template <class T>
void check_reductions(const std::string& target) {
  for (const std::size_t n : {1u, 7u, 64u, 1001u}) {
    std::vector<T> x(n);
    double sum = 0;
    T mx = -std::numeric_limits<T>::infinity(), mn = std::numeric_limits<T>::infinity();
    for (std::size_t i = 0; i < n; ++i) {
      x[i] = static_cast<T>(std::sin(static_cast<double>(i) * 0.37) * 100.0);
      sum += static_cast<double>(x[i]);
      mx = std::max(mx, x[i]);
      mn = std::min(mn, x[i]);
    }
    if constexpr (std::is_same_v<T, float>) {
      EXPECT_NEAR(simd::sum_f32(x.data(), n), sum, 1e-9 * n) << target << " n=" << n;
      EXPECT_EQ(simd::max_f32(x.data(), n), mx) << target;
      EXPECT_EQ(simd::min_f32(x.data(), n), mn) << target;
      x[n / 2] = std::numeric_limits<T>::quiet_NaN();
      EXPECT_TRUE(std::isnan(simd::max_f32(x.data(), n))) << target << " NaN propagates, n=" << n;
      EXPECT_TRUE(std::isnan(simd::min_f32(x.data(), n))) << target;
    } else {
      EXPECT_NEAR(simd::sum_f64(x.data(), n), sum, 1e-9 * n) << target << " n=" << n;
      EXPECT_EQ(simd::max_f64(x.data(), n), mx) << target;
      EXPECT_EQ(simd::min_f64(x.data(), n), mn) << target;
      x[n - 1] = std::numeric_limits<T>::quiet_NaN();
      EXPECT_TRUE(std::isnan(simd::max_f64(x.data(), n))) << target;
      EXPECT_TRUE(std::isnan(simd::min_f64(x.data(), n))) << target;
    }
  }
}

template <class U>
void check_transpose(const std::string& target) {
  // Sizes around the 4/8/16-lane tiles, a negative source stride and padded rows.
  // 150 x 131 spans several 64-element cache blocks in both dims, with ragged edges.
  for (const auto& [rows, cols] :
       {std::pair<std::size_t, std::size_t>{1, 1}, {3, 17}, {16, 16}, {33, 20}, {40, 71}, {150, 131}}) {
    const std::int64_t ss = static_cast<std::int64_t>(cols) + 3, ds = static_cast<std::int64_t>(rows) + 5;
    std::vector<U> src(rows * static_cast<std::size_t>(ss)), dst(cols * static_cast<std::size_t>(ds), U(7));
    for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<U>(i * 2654435761u);
    auto run = [&](const U* s, std::int64_t sst) {
      if constexpr (sizeof(U) == 4) simd::transpose_u32(s, sst, dst.data(), ds, rows, cols);
      else simd::transpose_u64(s, sst, dst.data(), ds, rows, cols);
    };
    run(src.data(), ss);
    for (std::size_t p = 0; p < rows; ++p)
      for (std::size_t q = 0; q < cols; ++q)
        ASSERT_EQ(dst[q * static_cast<std::size_t>(ds) + p], src[p * static_cast<std::size_t>(ss) + q])
            << target << " " << rows << "x" << cols;
    for (std::size_t q = 0; q < cols; ++q)  // padding untouched
      for (std::size_t p = rows; p < static_cast<std::size_t>(ds); ++p) ASSERT_EQ(dst[q * static_cast<std::size_t>(ds) + p], U(7));
    // Rows read bottom-up (a flipped source).
    run(src.data() + (rows - 1) * static_cast<std::size_t>(ss), -ss);
    for (std::size_t p = 0; p < rows; ++p)
      for (std::size_t q = 0; q < cols; ++q)
        ASSERT_EQ(dst[q * static_cast<std::size_t>(ds) + p], src[(rows - 1 - p) * static_cast<std::size_t>(ss) + q])
            << target << " flipped";
  }
  // One band of a large transpose (whole_bytes past the streaming bound): a vector-aligned
  // destination with aligned rows takes the streaming stores; the same values.
  {
    const std::size_t rows = 150, cols = 70, ds = 192;
    std::vector<U> src(rows * cols);
    for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<U>(i * 40503u + 1);
    auto dst = hwy::AllocateAligned<U>(cols * ds);
    for (std::size_t i = 0; i < cols * ds; ++i) dst[i] = U(7);
    if constexpr (sizeof(U) == 4) simd::transpose_u32(src.data(), cols, dst.get(), ds, rows, cols, std::size_t{1} << 30);
    else simd::transpose_u64(src.data(), cols, dst.get(), ds, rows, cols, std::size_t{1} << 30);
    for (std::size_t q = 0; q < cols; ++q)
      for (std::size_t p = 0; p < ds; ++p)
        ASSERT_EQ(dst[q * ds + p], p < rows ? src[p * cols + q] : U(7)) << target << " streamed " << p << "," << q;
  }
}

// f16/bf16 <-> f32 against tensor::f16 / tensor::bf16 bit for bit: every half bit
// pattern widened; narrowed, every half value, each midpoint to the next value and the
// floats one ulp either side of it (the round-to-nearest-even boundaries), a sweep of
// the float bit patterns, and NaNs with payloads. Odd lengths: vector bodies and tails.
template <class H>
void check_half_conversions(const std::string& target, void (*widen)(const std::uint16_t*, float*, std::size_t),
                            void (*narrow)(const float*, std::uint16_t*, std::size_t)) {
  std::vector<std::uint16_t> bits(65536 + 3);
  for (std::size_t i = 0; i < bits.size(); ++i) bits[i] = static_cast<std::uint16_t>(i);
  std::vector<float> wide(bits.size());
  widen(bits.data(), wide.data(), bits.size());
  for (std::size_t i = 0; i < bits.size(); ++i) {
    // A signaling NaN may come out quiet (F16C sets the quiet bit; the rest is kept).
    const float want = static_cast<float>(H::from_bits(bits[i]));
    const std::uint32_t quiet = std::isnan(want) ? 0x00400000u : 0u;
    ASSERT_EQ(std::bit_cast<std::uint32_t>(wide[i]) | quiet, std::bit_cast<std::uint32_t>(want) | quiet)
        << target << " widen " << bits[i];
  }
  std::vector<float> xs;
  for (std::uint32_t b = 0; b < 65536; ++b) {
    const float v = static_cast<float>(H::from_bits(static_cast<std::uint16_t>(b)));
    const float next = static_cast<float>(H::from_bits(static_cast<std::uint16_t>(b + 1 < 65536 ? b + 1 : b)));
    xs.push_back(v);
    if (std::isfinite(v) && std::isfinite(next)) {
      const float mid = static_cast<float>((static_cast<double>(v) + static_cast<double>(next)) / 2);
      xs.push_back(mid);
      xs.push_back(std::nextafter(mid, std::numeric_limits<float>::infinity()));
      xs.push_back(std::nextafter(mid, -std::numeric_limits<float>::infinity()));
    }
  }
  for (std::uint64_t b = 0; b < (std::uint64_t{1} << 32); b += 65537) xs.push_back(std::bit_cast<float>(static_cast<std::uint32_t>(b)));
  for (std::uint32_t nan : {0x7fc00000u, 0xffc00001u, 0x7f800001u, 0x7fa5a5a5u, 0xff812345u}) xs.push_back(std::bit_cast<float>(nan));
  std::vector<std::uint16_t> narrowed(xs.size());
  narrow(xs.data(), narrowed.data(), xs.size());
  for (std::size_t i = 0; i < xs.size(); ++i)
    ASSERT_EQ(narrowed[i], H::from_float(xs[i])) << target << " narrow " << std::bit_cast<std::uint32_t>(xs[i]);
}

TEST(CpuSimd, KernelsMatchScalarReferencesOnEveryCompiledTarget) {
  const std::vector<std::int64_t> targets = compiled_targets();  // before any mock
  ASSERT_FALSE(targets.empty());
  for (const std::int64_t t : targets) {
    hwy::SetSupportedTargetsForTest(t);
    const std::string name = hwy::TargetName(t);
    ASSERT_EQ(std::string(current_target_name()), name);
    check_unary<float>(name);
    check_unary<double>(name);
    check_reductions<float>(name);
    check_reductions<double>(name);
    check_transpose<std::uint32_t>(name);
    check_transpose<std::uint64_t>(name);
    check_half_conversions<tensor::f16>(name, simd::f16_to_f32, simd::f32_to_f16);
    check_half_conversions<tensor::bf16>(name, simd::bf16_to_f32, simd::f32_to_bf16);
  }
  hwy::SetSupportedTargetsForTest(0);
}

// ---- through the backend entries ----------------------------------------------------

Prim iota(const Shape& s, DType dt = DType::F32) {
  std::vector<float> v(s.num_elements());
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>((i * 37) % 101) - 50.0f;
  Prim p = from_vec(v, s);
  return dt == DType::F32 ? p : Prim(convert_tensor(as_cpu(std::move(p)), dt));
}

// Logical row-major values of any view, read element by element (the reference).
std::vector<double> logical(const Prim& p) {
  const CpuTensor& t = cpu_of(p);
  std::vector<double> out;
  const Shape& s = t.shape();
  std::vector<std::size_t> idx(s.rank(), 0);
  const std::size_t n = s.num_elements();
  for (std::size_t k = 0; k < n; ++k) {
    std::int64_t off = 0;
    for (std::size_t d = 0; d < s.rank(); ++d) off += static_cast<std::int64_t>(idx[d]) * t.stride(d);
    const std::byte* e = t.data() + off * static_cast<std::int64_t>(t.elem_size());
    double v = 0;
    dispatch::visit_dtype(t.dtype(), [&](auto tag) {
      using T = decltype(tag);
      if constexpr (dispatch::kIsFloatLike<T> || (std::is_integral_v<T> && !std::is_same_v<T, bool>))
        v = static_cast<double>(dispatch::load_elem(*reinterpret_cast<const T*>(e)));
    });
    out.push_back(v);
    for (std::size_t d = s.rank(); d-- > 0;) {
      if (++idx[d] < s[d]) break;
      idx[d] = 0;
    }
  }
  return out;
}

Prim permute(Prim p, std::vector<std::size_t> axes) { return entry<Family::Axes>(OpCode::permute)(std::move(p), axes); }

// Layouts the copy and the permuted-buffer sum must handle.
std::vector<std::pair<std::string, Prim>> layouts(DType dt) {
  std::vector<std::pair<std::string, Prim>> v;
  v.emplace_back("transposed 70x45", swap_dims(iota(Shape{45, 70}, dt), 0, 1));
  v.emplace_back("flipped 2-D", flip(iota(Shape{33, 19}, dt), {0, 1}));
  v.emplace_back("transposed+flipped", flip(swap_dims(iota(Shape{40, 24}, dt), 0, 1), {1}));
  v.emplace_back("permuted 3-D", permute(iota(Shape{5, 18, 21}, dt), {2, 0, 1}));
  v.emplace_back("batched transpose", permute(iota(Shape{3, 20, 36}, dt), {0, 2, 1}));
  v.emplace_back("sliced", slice(swap_dims(iota(Shape{30, 40}, dt), 0, 1), {{1, 2, 19}, {3, 1, 20}}));
  return v;
}

TEST(CpuToContiguous, TransposedFlippedPermutedAndSlicedLayouts) {
  for (DType dt : {DType::F32, DType::F64, DType::F16, DType::I8}) {
    for (auto& [name, view] : layouts(dt)) {
      const std::vector<double> want = logical(view);
      const CpuRef c = to_contiguous(as_cpu(Prim(view)));
      ASSERT_TRUE(c->is_contiguous()) << name;
      EXPECT_EQ(logical(Prim(c)), want) << name << " " << dtype_name(dt);
    }
  }
}

TEST(CpuToContiguous, LargeTransposeUsesTheTiledPath) {
  const Prim t = swap_dims(iota(Shape{300, 517}), 0, 1);
  const std::vector<double> want = logical(t);
  EXPECT_EQ(logical(Prim(to_contiguous(as_cpu(Prim(t))))), want);
}

// 2048^2 f32 (16 MB): the threaded, streaming-store path; a batch of four 1024^2
// transposes: one transpose per thread. Checked element by element against iota's formula.
TEST(CpuToContiguous, LargeAndBatchedTransposesOnThreads) {
  auto src = [](std::size_t i) { return static_cast<float>((i * 37) % 101) - 50.0f; };
  const std::size_t n = 2048;
  const CpuRef c = to_contiguous(as_cpu(swap_dims(iota(Shape{n, n}), 0, 1)));
  ASSERT_TRUE(c->is_contiguous());
  const auto* x = reinterpret_cast<const float*>(c->data());
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = 0; j < n; ++j) ASSERT_EQ(x[i * n + j], src(j * n + i)) << i << "," << j;
  const std::size_t b = 4, m = 1024;
  const CpuRef d = to_contiguous(as_cpu(permute(iota(Shape{b, m, m}), {0, 2, 1})));
  const auto* y = reinterpret_cast<const float*>(d->data());
  for (std::size_t k = 0; k < b; ++k)
    for (std::size_t i = 0; i < m; ++i)
      for (std::size_t j = 0; j < m; ++j)
        ASSERT_EQ(y[(k * m + i) * m + j], src((k * m + j) * m + i)) << k << "," << i << "," << j;
}

TEST(CpuReduce, SumMaxMinOverAPermutedBufferReadItDirectly) {
  for (DType dt : {DType::F32, DType::F64, DType::I32}) {
    for (auto& [name, view] : layouts(dt)) {
      const std::vector<double> v = logical(view);
      const bool dense = dense_block(cpu_of(view)) != nullptr;
      EXPECT_EQ(dense, name != "sliced") << name;
      double sum = 0, mx = -1e300, mn = 1e300;
      for (double x : v) { sum += x; mx = std::max(mx, x); mn = std::min(mn, x); }
      EXPECT_EQ(logical(entry<Family::Reduce>(OpCode::sum)(view))[0], sum) << name << " " << dtype_name(dt);
      EXPECT_EQ(logical(entry<Family::Reduce>(OpCode::max)(view))[0], mx) << name;
      EXPECT_EQ(logical(entry<Family::Reduce>(OpCode::min)(view))[0], mn) << name;
    }
  }
  // A NaN anywhere in a permuted f32 buffer is the max.
  std::vector<float> v(64, 1.0f);
  v[37] = std::numeric_limits<float>::quiet_NaN();
  const Prim nan = swap_dims(from_vec(v, Shape{8, 8}), 0, 1);
  EXPECT_TRUE(std::isnan(logical(entry<Family::Reduce>(OpCode::max)(nan))[0]));
}

TEST(CpuUnary, HalvesGoThroughFloatBlocks) {
  const Prim h = iota(Shape{1500}, DType::BF16);
  const std::vector<double> in = logical(h);
  const std::vector<double> got = logical(entry<Family::Unary>(OpCode::exp)(h));
  for (std::size_t i = 0; i < in.size(); ++i) {
    const double want = static_cast<double>(dispatch::load_elem(dispatch::store_elem<bf16>(std::exp(static_cast<float>(in[i])))));
    ASSERT_NEAR(got[i], want, std::fabs(want) * 1e-2 + 1e-30) << i;
  }
}

// ---- the large-buffer cache ---------------------------------------------------------

TEST(CpuBufferCache, FreedLargeBufferIsReusedAndZeroedWhenAsked) {
  buffer_cache_clear();
  const std::size_t bytes = (8u << 20) + 12;
  const std::byte* first = nullptr;
  {
    StorageRef s = Storage::allocate(bytes);
    first = s->data();
    std::memset(s->data(), 0xAB, bytes);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(s->data()) % Storage::kAlign, 0u);
  }
  EXPECT_EQ(buffer_cache_stats().entries, 1u);
  const std::size_t hits = buffer_cache_stats().hits;
  StorageRef z = Storage::allocate_zeroed(bytes + 1000);  // same size class (whole 2 MiB pages)
  EXPECT_EQ(z->data(), first);
  EXPECT_EQ(buffer_cache_stats().hits, hits + 1);
  for (std::size_t i = 0; i < z->size_bytes(); i += 4093) ASSERT_EQ(z->data()[i], std::byte{0}) << i;
  EXPECT_EQ(buffer_cache_stats().entries, 0u);
}

TEST(CpuBufferCache, SmallBuffersAreAlignedAndNotCached) {
  buffer_cache_clear();
  for (std::size_t bytes : {0u, 1u, 17u, 4096u, 100000u}) {
    StorageRef s = Storage::allocate_zeroed(bytes);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(s->data()) % Storage::kAlign, 0u);
    for (std::size_t i = 0; i < bytes; ++i) ASSERT_EQ(s->data()[i], std::byte{0});
  }
  EXPECT_EQ(buffer_cache_stats().entries, 0u);
}

TEST(CpuBufferCache, TotalStaysWithinItsBound) {
  buffer_cache_clear();
  const std::size_t limit = buffer_cache_stats().limit;
  {
    std::vector<StorageRef> held;
    for (std::size_t mb = 2; mb < 200; mb += 7) held.push_back(Storage::allocate(mb << 20));
    std::size_t total = 0;
    for (const auto& s : held) total += s->size_bytes();
    ASSERT_GT(total, limit);  // more than fits
  }
  EXPECT_LE(buffer_cache_stats().bytes, limit);
  EXPECT_GT(buffer_cache_stats().entries, 0u);
  buffer_cache_clear();
  EXPECT_EQ(buffer_cache_stats().bytes, 0u);
}

TEST(CpuBufferCache, ConcurrentAllocateAndFreeKeepContents) {
  buffer_cache_clear();
  std::vector<std::thread> threads;
  std::atomic<int> bad{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([t, &bad] {
      for (int i = 0; i < 40; ++i) {
        const std::size_t bytes = (static_cast<std::size_t>(1 + (i + t) % 3) << 20) * 2;
        StorageRef s = Storage::allocate(bytes);
        const auto tag = static_cast<std::byte>(t * 40 + i);
        std::memset(s->data(), static_cast<int>(tag), bytes);
        std::this_thread::yield();
        for (std::size_t k = 0; k < bytes; k += 65537)
          if (s->data()[k] != tag) ++bad;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_LE(buffer_cache_stats().bytes, buffer_cache_stats().limit);
}

TEST(CpuBufferCache, AllocatingLargeAddReusesTheFreedOutput) {
  buffer_cache_clear();
  const Prim a = iota(Shape{1u << 20}), b = iota(Shape{1u << 20});
  const std::byte* first = nullptr;
  {
    const Prim c = entry<Family::Binary>(OpCode::add)(a, b);
    first = cpu_of(c).data();
  }
  const Prim c2 = entry<Family::Binary>(OpCode::add)(a, b);
  EXPECT_EQ(cpu_of(c2).data(), first);
  EXPECT_EQ(logical(c2)[5], 2.0 * logical(a)[5]);
}

}  // namespace
}  // namespace tensor::cpu::test
