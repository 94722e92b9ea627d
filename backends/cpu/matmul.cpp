// Matrix product on the CPU, batched with broadcast batch dims: f32/f64 through BLIS's
// typed gemm on the operands' own row/column strides (a transposed operand is not
// copied), bf16 on oneDNN's AVX512_BF16 kernels where they are live (gemm.hpp's
// bf16gemm; else, and for small products, through f32; with TENSOR_BF16_PACKED_B=1, from
// 256^3 on 2+ threads with B packed once and shared by the slabs: packed_gemm), f16 through f32 (Debian's oneDNN 2.6
// has no CPU f16 matmul), ints through a plain wrapping loop.
//
// Threads (the thread count is set per call, so the BLIS_NUM_THREADS / OMP_NUM_THREADS
// environment does not decide it): a product is split into slabs, each a
// single-threaded BLIS call, on parallel_chunks (never BLIS's own OpenMP threads); a batch of small products runs whole products per chunk on
// parallel_chunks. See gemm() for why.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "backends/cpu/cpu_info.hpp"
#include "backends/cpu/cpu_ops.hpp"
#include "backends/cpu/elementwise.hpp"
#include "backends/cpu/gemm.hpp"
#include "backends/cpu/gemm_small_hwy.hpp"
#include "backends/cpu/parallel.hpp"
#include "lib/core/shape_rules.hpp"

#include "backends/cpu/blis.hpp"

#if TENSOR_HAVE_OPENMP
#include <omp.h>
#endif

namespace tensor::cpu {
namespace {

using dispatch::Prim;

// Row and column strides (elements) of a matrix operand, normalised so that size-1
// dims carry a stride BLIS accepts; `ok` when BLIS can read it as it is.
struct MatStrides {
  std::int64_t rs = 0, cs = 0;
  bool ok = false;
};
MatStrides mat_strides(std::size_t rows, std::size_t cols, std::int64_t rs, std::int64_t cs) {
  const auto m = static_cast<std::int64_t>(rows), n = static_cast<std::int64_t>(cols);
  if (m == 1) rs = cs == 1 ? std::max<std::int64_t>(n, 1) : 1;
  if (n == 1) cs = rs == 1 ? std::max<std::int64_t>(m, 1) : 1;
  MatStrides s{rs, cs, false};
  if (rs <= 0 || cs <= 0) return s;
  s.ok = (rs == 1 && cs >= std::max<std::int64_t>(m, 1)) || (cs == 1 && rs >= std::max<std::int64_t>(n, 1));
  return s;
}

// c[m x n] = a[m x k] * b[k x n], all strides in elements (c is overwritten).
template <class T>
void gemm_loop(std::size_t m, std::size_t n, std::size_t k, const T* a, std::int64_t rsa, std::int64_t csa, const T* b,
               std::int64_t rsb, std::int64_t csb, T* c, std::int64_t rsc, std::int64_t csc) {
  using C = calc_t<T>;
  for (std::size_t i = 0; i < m; ++i) {
    T* crow = c + static_cast<std::int64_t>(i) * rsc;
    for (std::size_t j = 0; j < n; ++j) crow[static_cast<std::int64_t>(j) * csc] = T{};
    for (std::size_t p = 0; p < k; ++p) {
      const C av = ld(a[static_cast<std::int64_t>(i) * rsa + static_cast<std::int64_t>(p) * csa]);
      const T* brow = b + static_cast<std::int64_t>(p) * rsb;
      for (std::size_t j = 0; j < n; ++j) {
        T& dst = crow[static_cast<std::int64_t>(j) * csc];
        const C bv = ld(brow[static_cast<std::int64_t>(j) * csb]);
        if constexpr (std::is_integral_v<C>) {
          using U = wide_unsigned_t<C>;
          dst = static_cast<T>(static_cast<U>(dst) + static_cast<U>(av) * static_cast<U>(bv));
        } else {
          dst = dst + av * bv;
        }
      }
    }
  }
}

// BLIS threads for one product of m*n*k multiply-adds (bli_sgemm reads
// BLIS_NUM_THREADS, unset = 1). With the second core free two threads win from n = 64
// (square f32), so a product gets every thread from 64^3 multiply-adds. With another
// process on the second core, any 2-thread BLIS product can take many times longer than
// on one thread, as a descheduled thread holds up BLIS's barriers. Now such a product is split on parallel_chunks instead (gemm()),
// from 2 * kMinHalfSlab rows or columns (n = 64 stays on one thread: the second gained
// nothing there, see kMinHalfSlab).
constexpr double kBlisThreadsWork = 64.0 * 64.0 * 64.0;
// bf16 products from this many multiply-adds run on oneDNN's bf16 kernels (when live);
// smaller ones are widened to f32 as a whole: their compile, once per shape and layout
// (gemm.cpp), costs as much as some hundred calls save.
constexpr double kBf16NativeWork = 64.0 * 64.0 * 64.0;
// A batch of products runs whole products per parallel_chunks chunk (BLIS on one
// thread each)
// when each product is below this many multiply-adds (and the whole batch has at
// least kBlisThreadsWork): above it BLIS's own threads scale as well and keep each
// product's packed panels in one core's cache.
constexpr double kBatchParallelWork = 512.0 * 512.0 * 512.0;

int max_threads() {
#if TENSOR_HAVE_OPENMP
  return omp_in_parallel() ? 1 : omp_get_max_threads();
#else
  return 1;
#endif
}

// Off with TENSOR_SMALL_GEMM=0 (small f32 products then go to sgemm like the rest): for
// A/B timing and for checking that the allocation test notices the difference.
bool small_gemm_enabled() {
  static const bool on = [] {
    const char* e = std::getenv("TENSOR_SMALL_GEMM");
    return e == nullptr || !(e[0] == '0' && e[1] == '\0');
  }();
  return on;
}

// One single-threaded product on a sub-block of c: f32 on the shared route (oneDNN or
// BLIS, gemm.cpp), f64 on BLIS, anything else (or no BLIS) the loop.
template <class T>
void gemm1(std::size_t m, std::size_t n, std::size_t k, const T* a, MatStrides sa, const T* b, MatStrides sb, T* c,
           MatStrides sc) {
  if constexpr (std::is_same_v<T, float>) {
    // Small products on our own kernel (no oneDNN call overhead, and no malloc: a replayed
    // training step of small layers allocates nothing); c's column stride is never read
    // when n == 1.
    if ((sc.cs == 1 || n == 1) && simd::use_small_gemm(m, n, k, sb.cs) && small_gemm_enabled()) {
      simd::sgemm_small_f32(m, n, k, a, sa.rs, sa.cs, b, sb.rs, sb.cs, c, sc.rs);
      return;
    }
    sgemm(m, n, k, 1.0f, a, sa.rs, sa.cs, b, sb.rs, sb.cs, 0.0f, c, sc.rs, sc.cs);
  } else if constexpr (std::is_same_v<T, bf16>) {
    bf16gemm(m, n, k, a, sa.rs, sa.cs, b, sb.rs, sb.cs, c, sc.rs, sc.cs);
#if TENSOR_HAVE_BLIS
  } else if constexpr (std::is_same_v<T, double>) {
    // BLIS takes a product with a unit dim as a level-2 update that skips a zero
    // scalar, so inf * 0 gave 0 instead of NaN; those products go to the loop.
    if (std::min({m, n, k}) == 1) {
      gemm_loop(m, n, k, a, sa.rs, sa.cs, b, sb.rs, sb.cs, c, sc.rs, sc.cs);
      return;
    }
    double one = 1, zero = 0;
    rntm_t rntm = BLIS_RNTM_INITIALIZER;
    bli_rntm_set_num_threads(1, &rntm);
    bli_dgemm_ex(BLIS_NO_TRANSPOSE, BLIS_NO_TRANSPOSE, static_cast<dim_t>(m), static_cast<dim_t>(n),
                 static_cast<dim_t>(k), &one, const_cast<double*>(a), sa.rs, sa.cs, const_cast<double*>(b), sb.rs,
                 sb.cs, &zero, c, sc.rs, sc.cs, nullptr, &rntm);
#endif
  } else {
    gemm_loop(m, n, k, a, sa.rs, sa.cs, b, sb.rs, sb.cs, c, sc.rs, sc.cs);
  }
}

// A product on `threads` threads: c split into slabs along its longer dim (at least
// kMinSlab rows or columns, at most kSlabsPerThread per thread), each a single-threaded call,
// on parallel_chunks. Not BLIS's own threads: those are an OpenMP region whose
// barriers wait a whole time slice for a descheduled thread (and whose workers spin
// after it, GOMP_SPINCOUNT), which made a 2-thread n = 64..512 product 5-480x slower
// than one thread while another process held the second core; parallel_chunks never
// waits for a helper that has not started, so a busy core costs at most the helper's
// share. Each slab packs the whole other operand again: 1/kMinSlab of the flops.
// BLIS's own threads are not used for any size: under load their time varies by orders
// of magnitude from one run to the next, while these slabs stay steady and are no slower
// on a free machine, also for the largest products.
constexpr std::size_t kMinSlab = 64;
// The smallest slab of a product split in two where kMinSlab gives one piece: n = 96 on 2
// threads 8.6 us against 16.0 on one (2026-12-07, load 2.7, 3000 calls, medians). n = 64 in
// two 32-row halves gained nothing (4.7 us either way, the helper running half of them):
// 64 rows stay one product.
constexpr std::size_t kMinHalfSlab = 48;

// bf16 products from this many multiply-adds, with at least 2 * kMinSlab rows, run on
// packed_gemm (gemm.hpp): B packed once into the AMX / AVX512_BF16 brgemm kernels' blocked
// layout (its column panels side by side) and shared by 2 slabs of rows per thread,
// where a product per slab on B's own layout repacked all of B for every slab (8 slabs
// at n = 1024: the process's CPU time per product fell from 4.2 to 3.3 ms, at n = 2048
// from 39 to 30 ms; n = 128 rose from 17 to 26 us, n = 256 was even, hence from 256^3).
// f32 stays on dnnl_sgemm slabs: packed B there saved no CPU time at n = 128..2048, as
// dnnl_sgemm packs B in cache-sized blocks as it goes.
constexpr double kPackedBf16Work = 256.0 * 256.0 * 256.0;
// Slabs per thread: 4 (dynamic scheduling evens out a core shared with another process), but
// one for bf16, whose oneDNN primitive per slab repacks all of B for the AMX / AVX512_BF16
// kernels: on a Xeon with AMX (2 threads, 2026-12-07, load 1.1-1.5, 40-600 interleaved
// calls, medians) one slab per thread took n = 256 23.7 us against 34.7 with four, n = 512
// 135-151 against 227-252, n = 1024 1.33-1.37 ms against 1.70-1.74, n = 2048 13.0 against
// 13.2 ms. (f32 gained 0-10 % there, within its slabs' spread under load: unchanged.)
template <class T>
constexpr std::size_t kSlabsPerThread = std::is_same_v<T, bf16> ? 1 : 4;
// Off unless TENSOR_BF16_PACKED_B=1: on the idle machine (2026-12-06, load 0.6, 2 threads,
// AMX, three interleaved runs against the build without it) the packed route took more wall
// time than a product per slab: n = 2048 23.6-25.4 ms against 10.8-12.1 ms, n = 1024
// 2.14-2.30 ms against 1.46-2.56 ms; the CPU-time saving above was measured under load.
bool packed_bf16_enabled() {
  static const bool on = [] {
    const char* e = std::getenv("TENSOR_BF16_PACKED_B");
    return e != nullptr && e[0] == '1' && e[1] == '\0';
  }();
  return on;
}

template <class T>
void gemm(std::size_t m, std::size_t n, std::size_t k, const T* a, MatStrides sa, const T* b, MatStrides sb, T* c,
          MatStrides sc, int threads) {
  if constexpr (std::is_same_v<T, bf16>) {
    const double work = static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
    if (threads >= 2 && m >= 2 * kMinSlab && work >= kPackedBf16Work && packed_bf16_enabled() &&
        packed_gemm(GemmType::bf16, m, n, k, a, sa.rs, sa.cs, b, sb.rs, sb.cs, c, sc.rs, sc.cs,
                    2 * static_cast<std::size_t>(threads)))
      return;
  }
  const bool rows = m >= n;
  const std::size_t dim = rows ? m : n;
  std::size_t pieces = std::min<std::size_t>(dim / kMinSlab, kSlabsPerThread<T> * static_cast<std::size_t>(std::max(threads, 1)));
  if (pieces < 2 && dim >= 2 * kMinHalfSlab) pieces = 2;  // 96..127 rows or columns: two halves
  if (threads < 2 || pieces < 2) {
    gemm1(m, n, k, a, sa, b, sb, c, sc);
    return;
  }
  auto slab = [&](std::size_t i) {
    const std::size_t lo = dim * i / pieces, hi = dim * (i + 1) / pieces;
    const auto o = static_cast<std::int64_t>(lo);
    if (rows) {
      gemm1(hi - lo, n, k, a + o * sa.rs, sa, b, sb, c + o * sc.rs, sc);
    } else {
      gemm1(m, hi - lo, k, a, sa, b + o * sb.cs, sb, c + o * sc.cs, sc);
    }
  };
  parallel_chunks(pieces, slab);
}

// Whether BLIS (or the loop) can take this operand's last two dims without a copy.
bool usable(const CpuTensor& t) {
  const std::size_t r = t.rank();
  return mat_strides(t.shape()[r - 2], t.shape()[r - 1], t.stride(r - 2), t.stride(r - 1)).ok;
}

Prim matmul_entry(Prim pa, Prim pb) {
  CpuRef a = as_cpu(std::move(pa));
  CpuRef b = as_cpu(std::move(pb));
  const DType dtype = a->dtype();
  const std::size_t r = a->rank();
  const std::size_t m = a->shape()[r - 2], k = a->shape()[r - 1], n = b->shape()[r - 1];
  const double work = static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  if (dtype == DType::F16 || (dtype == DType::BF16 && !(work >= kBf16NativeWork && bf16_gemm_live()))) {
    Prim p = matmul_entry(convert_tensor(std::move(a), DType::F32), convert_tensor(std::move(b), DType::F32));
    return convert_tensor(as_cpu(std::move(p)), dtype);
  }
  const Shape out_shape = core::matmul_shape("matmul", a->shape(), b->shape());
  if (out_shape.num_elements() == 0) return alloc_tensor(dtype, out_shape);
  if (k == 0) return alloc_zeroed(dtype, out_shape);
  // Zero, negative or doubly non-unit strides: copy that operand once.
  if (!usable(*a)) a = to_contiguous(std::move(a));
  if (!usable(*b)) b = to_contiguous(std::move(b));
  CpuRef out = alloc_tensor(dtype, out_shape);

  const MatStrides sa = mat_strides(m, k, a->stride(r - 2), a->stride(r - 1));
  const MatStrides sb = mat_strides(k, n, b->stride(r - 2), b->stride(r - 1));
  const MatStrides sc = mat_strides(m, n, out->stride(r - 2), out->stride(r - 1));

  // Walk the broadcast batch dims with the elementwise plan (rank 0 = one matrix).
  Shape batch;
  for (std::size_t d = 0; d + 2 < r; ++d) batch.push_back(out_shape[d]);
  Shape a_batch, b_batch;
  for (std::size_t d = 0; d + 2 < r; ++d) { a_batch.push_back(a->shape()[d]); b_batch.push_back(b->shape()[d]); }
  const auto as = broadcast_strides(a_batch, a->strides(), batch);
  const auto bs = broadcast_strides(b_batch, b->strides(), batch);
  const std::size_t e = dtype_size(dtype);
  const auto plan = make_plan<3>(batch, {out->layout().strides.data(), as.data(), bs.data()}, {e, e, e});

  dispatch::visit_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool> || std::is_same_v<T, dispatch::BoolU32> ||
                  (dispatch::kIsHalf<T> && !std::is_same_v<T, bf16>)) {
      throw DTypeError("[matmul] expected a float or int dtype; got " + std::string(dtype_name(dtype)));
    } else {
      const std::size_t count = batch.num_elements();
      const int threads = max_threads();
      if (count >= 2 && threads > 1 && work < kBatchParallelWork &&
          work * static_cast<double>(count) >= kBlisThreadsWork) {
        // Many small products, each on a single BLIS thread, in 8 chunks per thread
        // claimed as threads come free (OpenMP's static schedule was slower than one
        // thread when another process held a core, as the last static half waits for
        // it); parallel_chunks never waits for a helper that has not started.
        std::vector<std::array<std::byte*, 3>> items;
        items.reserve(count);
        for_each_row(plan, {out->data(), a->data(), b->data()},
                     [&](std::array<std::byte*, 3> p, std::size_t cnt, std::array<std::int64_t, 3> s) {
                       for (std::size_t i = 0; i < cnt; ++i, p[0] += s[0], p[1] += s[1], p[2] += s[2])
                         items.push_back(p);
                     });
        const std::size_t total = items.size();
        const std::size_t chunks = std::min<std::size_t>(total, 8 * static_cast<std::size_t>(threads));
        auto run = [&](std::size_t ch) {
          const GemmThreadScope one_thread;
          for (std::size_t i = total * ch / chunks; i < total * (ch + 1) / chunks; ++i) {
            const auto& p = items[i];
            gemm1<T>(m, n, k, at<T>(p[1]), sa, at<T>(p[2]), sb, at<T>(p[0]), sc);
          }
        };
        parallel_chunks(chunks, run);
        return;
      }
      const int split_threads = work >= kBlisThreadsWork ? threads : 1;
      for_each_row(plan, {out->data(), a->data(), b->data()},
                   [&](std::array<std::byte*, 3> p, std::size_t cnt, std::array<std::int64_t, 3> s) {
                     for (std::size_t i = 0; i < cnt; ++i, p[0] += s[0], p[1] += s[1], p[2] += s[2])
                       gemm<T>(m, n, k, at<T>(p[1]), sa, at<T>(p[2]), sb, at<T>(p[0]), sc, split_threads);
                   });
    }
  });
  return out;
}

}  // namespace

std::string blis_arch() {
#if TENSOR_HAVE_BLIS
  return bli_arch_string(bli_arch_query_id());
#else
  return "none";
#endif
}

void register_matmul_ops(dispatch::Backend& b) { b.set<OpCode::matmul>(&matmul_entry); }

}  // namespace tensor::cpu
