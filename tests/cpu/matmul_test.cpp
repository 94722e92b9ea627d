// CPU matmul against a naive reference: transposed, strided, flipped and expanded
// operands, broadcast batch dims, zero-size dims, and the f16/bf16/int paths.
#include <cmath>

#include "cpu_test_util.hpp"

namespace tensor::cpu::test {
namespace {

Prim matmul(Prim a, Prim b) { return entry<Family::Matmul>(OpCode::matmul)(std::move(a), std::move(b)); }

std::vector<double> as_f64(const Prim& p) {
  return entry<Family::IntoData>(OpCode::into_data)(p).get().convert(DType::F64).to_vec<double>();
}

// Logical values (row-major) of any tensor, through into_data.
struct Mat {
  Prim p;
  std::vector<double> v;  // logical row-major
  Shape shape;
};
Mat mat(Prim p) {
  Mat m{p, as_f64(p), cpu_of(p).shape()};
  return m;
}

Prim typed(const std::vector<double>& v, const Shape& s, DType dt) {
  return entry<Family::FromData>(OpCode::from_data)(TensorData::from(v, s).convert(dt), kCpuDevice);
}

std::vector<double> values(std::size_t n, int seed) {
  std::vector<double> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<double>(static_cast<int>((i * 7 + static_cast<std::size_t>(seed) * 3) % 11) - 5);
  return v;
}

// Naive batched product with broadcast batch dims (equal ranks).
std::vector<double> reference(const Mat& a, const Mat& b, Shape& out) {
  const std::size_t r = a.shape.rank();
  const std::size_t m = a.shape[r - 2], k = a.shape[r - 1], n = b.shape[r - 1];
  out = a.shape;
  for (std::size_t d = 0; d + 2 < r; ++d) out[d] = std::max(a.shape[d], b.shape[d]);
  out[r - 1] = n;
  std::size_t batches = 1;
  for (std::size_t d = 0; d + 2 < r; ++d) batches *= out[d];
  std::vector<double> c(batches * m * n, 0.0);
  for (std::size_t bi = 0; bi < batches; ++bi) {
    std::size_t rem = bi, ao = 0, bo = 0, as = m * k, bs = k * n;
    for (std::size_t d = r - 2; d-- > 0;) {
      const std::size_t idx = rem % out[d];
      rem /= out[d];
      ao += (a.shape[d] == 1 ? 0 : idx) * as;
      bo += (b.shape[d] == 1 ? 0 : idx) * bs;
      as *= a.shape[d];
      bs *= b.shape[d];
    }
    for (std::size_t i = 0; i < m; ++i)
      for (std::size_t j = 0; j < n; ++j) {
        double s = 0;
        for (std::size_t p = 0; p < k; ++p) s += a.v[ao + i * k + p] * b.v[bo + p * n + j];
        c[bi * m * n + i * n + j] = s;
      }
  }
  return c;
}

void check(Prim a, Prim b, double tol, const std::string& what) {
  const Mat ma = mat(a), mb = mat(b);
  Shape out;
  const auto want = reference(ma, mb, out);
  const Prim c = matmul(std::move(a), std::move(b));
  ASSERT_EQ(cpu_of(c).shape(), out) << what;
  const auto got = as_f64(c);
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], tol * (1 + std::fabs(want[i]))) << what << " at " << i;
}

TEST(CpuMatmul, FloatLayoutsAgainstNaiveReference) {
  for (DType dt : {DType::F32, DType::F64}) {
    const std::string name(dtype_name(dt));
    const double tol = dt == DType::F32 ? 1e-5 : 1e-12;
    const Prim a = typed(values(5 * 7, 1), Shape{5, 7}, dt);
    const Prim b = typed(values(7 * 4, 2), Shape{7, 4}, dt);
    check(a, b, tol, name + " contiguous");
    // Transposed operands (views, not copied by the backend).
    const Prim at = swap_dims(typed(values(7 * 5, 3), Shape{7, 5}, dt), 0, 1);
    const Prim bt = swap_dims(typed(values(4 * 7, 4), Shape{4, 7}, dt), 0, 1);
    check(at, b, tol, name + " transposed lhs");
    check(a, bt, tol, name + " transposed rhs");
    check(at, bt, tol, name + " both transposed");
    // Row-sliced (non-unit row stride, unit column stride), step-sliced in both dims,
    // flipped (negative stride) and expanded (stride 0).
    const Prim big = typed(values(10 * 14, 5), Shape{10, 14}, dt);
    check(slice(big, {{0, 2, 5}, {3, 1, 7}}), b, tol, name + " row-sliced lhs");
    check(slice(big, {{1, 2, 5}, {0, 2, 7}}), b, tol, name + " step-sliced lhs");
    check(a, flip(b, {0}), tol, name + " flipped rhs");
    check(a, expand(typed(values(4, 6), Shape{1, 4}, dt), Shape{7, 4}), tol, name + " expanded rhs");
    // Vectors: m = 1, n = 1, k = 1.
    check(typed(values(7, 7), Shape{1, 7}, dt), b, tol, name + " m=1");
    check(a, typed(values(7, 8), Shape{7, 1}, dt), tol, name + " n=1");
    check(typed(values(5, 9), Shape{5, 1}, dt), typed(values(4, 10), Shape{1, 4}, dt), tol, name + " k=1");
    // Batched with broadcast batch dims, one operand transposed.
    const Prim ba = typed(values(2 * 1 * 3 * 4, 11), Shape{2, 1, 3, 4}, dt);
    const Prim bb = swap_dims(typed(values(1 * 3 * 2 * 4, 12), Shape{1, 3, 2, 4}, dt), 2, 3);
    check(ba, bb, tol, name + " batched broadcast");
    // Bigger than BLIS's micro-tiles.
    check(typed(values(67 * 45, 13), Shape{67, 45}, dt), swap_dims(typed(values(33 * 45, 14), Shape{33, 45}, dt), 0, 1),
          tol, name + " 67x45x33");
    // Large enough for BLIS's own threads (>= 128^3 multiply-adds), one operand transposed.
    check(typed(values(150 * 130, 15), Shape{150, 130}, dt),
          swap_dims(typed(values(140 * 130, 16), Shape{140, 130}, dt), 0, 1), tol, name + " 150x130x140");
    // A short batch of tiny products (one thread), and a batch of small products big
    // enough in total to run one per thread; the rhs broadcast over the batch.
    check(typed(values(9 * 6 * 5, 17), Shape{9, 6, 5}, dt), typed(values(5 * 4, 18), Shape{1, 5, 4}, dt), tol,
          name + " batch of 9");
    check(typed(values(20 * 40 * 50, 19), Shape{20, 40, 50}, dt), typed(values(50 * 60, 20), Shape{1, 50, 60}, dt),
          tol, name + " batch of 20 x 40x50x60");
  }
}

// Products (from 64^3 multiply-adds) split into slabs of rows (m >= n) or columns
// (n > m) over threads, with row-major and transposed operands and slabs that do not
// divide evenly, and a batch of small products split into chunks.
TEST(CpuMatmul, ThreadSlabsAgainstNaiveReference) {
  for (DType dt : {DType::F32, DType::F64}) {
    for (const bool ta : {false, true})
      for (const bool tb : {false, true}) {
        for (const auto [m, n, k] : {std::array<std::size_t, 3>{301, 20, 48}, std::array<std::size_t, 3>{17, 290, 64},
                                     std::array<std::size_t, 3>{200, 200, 130}, std::array<std::size_t, 3>{100, 40, 96},
                                     std::array<std::size_t, 3>{40, 66, 100}, std::array<std::size_t, 3>{64, 64, 64}}) {
          const Prim a = ta ? swap_dims(typed(values(m * k, 1), Shape{k, m}, dt), 0, 1) : typed(values(m * k, 1), Shape{m, k}, dt);
          const Prim b = tb ? swap_dims(typed(values(k * n, 2), Shape{n, k}, dt), 0, 1) : typed(values(k * n, 2), Shape{k, n}, dt);
          check(a, b, 1e-6, std::string(dtype_name(dt)) + " " + std::to_string(m) + "x" + std::to_string(n) + "x" +
                                std::to_string(k) + (ta ? " a^T" : "") + (tb ? " b^T" : ""));
        }
      }
    check(typed(values(37 * 32 * 16, 3), Shape{37, 32, 16}, dt), typed(values(37 * 16 * 32, 4), Shape{37, 16, 32}, dt), 1e-6,
          std::string(dtype_name(dt)) + " batch 37");
  }
}

// bf16 products large enough for oneDNN's bf16 kernels where they are live (from 64^3
// multiply-adds; smaller ones go through f32): small integer inputs make every f32
// partial sum exact, so each element must be the exact sum rounded once to bf16
// (nearest even) on either route. Layouts: contiguous, transposed views, a row slice
// (padded leading dim), copied ones (step-sliced, flipped, expanded), vectors, broadcast
// batches, row and column slabs over threads, and a batch of products per thread.
void check_bf16_exact(Prim a, Prim b, const std::string& what) {
  const Mat ma = mat(a), mb = mat(b);
  Shape out;
  const auto want = reference(ma, mb, out);
  const Prim c = matmul(std::move(a), std::move(b));
  ASSERT_EQ(cpu_of(c).dtype(), DType::BF16) << what;
  ASSERT_EQ(cpu_of(c).shape(), out) << what;
  const auto got = as_f64(c);
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t i = 0; i < got.size(); ++i)
    ASSERT_EQ(got[i], static_cast<double>(static_cast<float>(bf16(static_cast<float>(want[i])))))
        << what << " at " << i << " exact " << want[i];
}

TEST(CpuMatmul, Bf16ProductsRoundExactSumsOnce) {
  const DType dt = DType::BF16;
  auto t = [&](std::size_t r, std::size_t c, int seed) { return typed(values(r * c, seed), Shape{r, c}, dt); };
  const Prim a = t(150, 130, 1), b = t(130, 140, 2);
  check_bf16_exact(a, b, "150x130x140");
  check_bf16_exact(swap_dims(t(130, 150, 3), 0, 1), b, "transposed lhs");
  check_bf16_exact(a, swap_dims(t(140, 130, 4), 0, 1), "transposed rhs");
  check_bf16_exact(swap_dims(t(130, 150, 3), 0, 1), swap_dims(t(140, 130, 4), 0, 1), "both transposed");
  const Prim big = t(160, 200, 5);
  check_bf16_exact(slice(big, {{0, 1, 150}, {10, 1, 130}}), b, "row-sliced lhs");
  check_bf16_exact(slice(big, {{0, 1, 150}, {0, 1, 130}}), slice(t(130, 180, 6), {{0, 1, 130}, {20, 1, 140}}),
                   "row-sliced both");
  check_bf16_exact(slice(big, {{0, 1, 150}, {0, 1, 200}}), slice(swap_dims(big, 0, 1), {{0, 1, 200}, {0, 1, 120}}),
                   "one storage, both operands");
  check_bf16_exact(slice(t(150, 260, 7), {{0, 1, 150}, {0, 2, 130}}), b, "step-sliced lhs");
  check_bf16_exact(a, flip(b, {0}), "flipped rhs");
  check_bf16_exact(a, expand(typed(values(140, 8), Shape{1, 140}, dt), Shape{130, 140}), "expanded rhs");
  check_bf16_exact(t(1, 512, 9), t(512, 512, 10), "m=1");
  check_bf16_exact(t(512, 512, 11), t(512, 1, 12), "n=1");
  check_bf16_exact(typed(values(2 * 70 * 64, 13), Shape{2, 1, 70, 64}, dt),
                   swap_dims(typed(values(3 * 80 * 64, 14), Shape{1, 3, 80, 64}, dt), 2, 3), "batched broadcast");
  for (const auto [m, n, k] : {std::array<std::size_t, 3>{301, 20, 48}, std::array<std::size_t, 3>{17, 290, 64},
                               std::array<std::size_t, 3>{200, 200, 130}, std::array<std::size_t, 3>{20, 20, 20}})
    check_bf16_exact(t(m, k, 15), swap_dims(t(n, k, 16), 0, 1),
                     "slabs " + std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k));
  check_bf16_exact(typed(values(37 * 64 * 64, 17), Shape{37, 64, 64}, dt), typed(values(37 * 64 * 64, 18), Shape{37, 64, 64}, dt),
                   "batch 37 of 64^3");
}

// bf16 products past 256^3 multiply-adds with at least 128 rows, split into slabs of rows on 2+
// threads (with TENSOR_BF16_PACKED_B=1 on packed_gemm: B packed once, shared by the slabs;
// gemm_test calls packed_gemm itself; 301 rows leave a shorter last slab):
// contiguous, transposed, row-sliced and copied operands, and a batch, each element the
// exact sum rounded once.
TEST(CpuMatmul, Bf16PackedBSlabsRoundExactSumsOnce) {
  const DType dt = DType::BF16;
  auto t = [&](std::size_t r, std::size_t c, int seed) { return typed(values(r * c, seed), Shape{r, c}, dt); };
  const Prim a = t(301, 240, 21), b = t(240, 250, 22);
  check_bf16_exact(a, b, "packed 301x250x240");
  check_bf16_exact(swap_dims(t(240, 301, 23), 0, 1), b, "packed, transposed lhs");
  check_bf16_exact(a, swap_dims(t(250, 240, 24), 0, 1), "packed, transposed rhs");
  check_bf16_exact(slice(t(320, 260, 25), {{5, 1, 301}, {10, 1, 240}}), slice(t(250, 300, 26), {{3, 1, 240}, {20, 1, 250}}),
                   "packed, row-sliced both");
  check_bf16_exact(a, flip(b, {1}), "packed, flipped rhs");
  check_bf16_exact(typed(values(2 * 260 * 256, 27), Shape{2, 260, 256}, dt), typed(values(256 * 260, 28), Shape{1, 256, 260}, dt),
                   "packed, broadcast batch");
}

TEST(CpuMatmul, ZeroSizeDims) {
  const Prim a = typed({}, Shape{3, 0}, DType::F32);
  const Prim b = typed({}, Shape{0, 2}, DType::F32);
  const Prim c = matmul(a, b);
  EXPECT_EQ(cpu_of(c).shape(), (Shape{3, 2}));
  EXPECT_EQ(as_f64(c), (std::vector<double>(6, 0.0)));
  const Prim d = matmul(typed({}, Shape{0, 4}, DType::F64), typed(values(8, 1), Shape{4, 2}, DType::F64));
  EXPECT_EQ(cpu_of(d).shape(), (Shape{0, 2}));
  const Prim e = matmul(typed({}, Shape{2, 0, 3}, DType::I32), typed({}, Shape{2, 3, 0}, DType::I32));
  EXPECT_EQ(cpu_of(e).shape(), (Shape{2, 0, 0}));
}

TEST(CpuMatmul, HalfAndIntPaths) {
  for (DType dt : {DType::F16, DType::BF16}) {
    const Prim a = typed(values(6 * 5, 1), Shape{2, 3, 5}, dt);
    const Prim b = swap_dims(typed(values(4 * 5, 2), Shape{1, 4, 5}, dt), 1, 2);
    const Prim c = matmul(a, b);
    EXPECT_EQ(cpu_of(c).dtype(), dt);
    check(a, b, 1e-2, std::string(dtype_name(dt)));  // small integers: exact in both
  }
  for (DType dt : {DType::I32, DType::I64, DType::I16, DType::U8}) {
    const std::vector<double> av = dt == DType::U8 ? std::vector<double>{1, 2, 3, 4, 5, 6} : values(6, 3);
    const std::vector<double> bv = dt == DType::U8 ? std::vector<double>{7, 8, 9, 10, 11, 12} : values(6, 4);
    check(typed(av, Shape{2, 3}, dt), swap_dims(typed(bv, Shape{2, 3}, dt), 0, 1), 0, std::string(dtype_name(dt)));
  }
  // Int products wrap.
  const Prim a = typed({100, 100}, Shape{1, 2}, DType::I8);
  const Prim b = typed({2, 1}, Shape{2, 1}, DType::I8);
  EXPECT_EQ(as_f64(matmul(a, b)), (std::vector<double>{44}));
}

}  // namespace
}  // namespace tensor::cpu::test
