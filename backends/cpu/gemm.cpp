// The GEMM routes of the CPU backend: f32 on oneDNN's sgemm when built with it, else BLIS;
// bf16 on oneDNN's matmul primitive (AMX / AVX512_BF16 brgemm), per product or with B
// packed once and shared by slabs of rows (packed_gemm).
//
// Why oneDNN: Debian 12's BLIS 0.9 has no configuration for AMD family 0x1A (Zen 5) and
// falls back to its generic reference kernels there ("generic"), several times slower
// than dnnl_sgemm, which picks its JIT kernels from the CPUID ISA bits (AVX-512...)
// rather than the CPU family. dnnl_sgemm takes row-major matrices with a leading dimension, each
// optionally transposed; any other layout (general strides, broadcast zero strides,
// negative strides) stays on BLIS, which takes both strides.
//
// Medium products (up to 256^3: simd::use_medium_gemm) run on our own Highway kernel
// (gemm_medium_hwy.cpp), measured even with or faster than dnnl_sgemm there and allocating
// nothing per call (dnnl_sgemm mallocs its packing buffer on every call); small ones take the
// small kernel before sgemm (matmul.cpp). Otherwise dnnl_sgemm is faster than bli_sgemm_ex
// down to the smallest products. The first dnnl_sgemm call in a process pays oneDNN's initialisation and
// kernel JIT once; later calls of new shapes cost about as much as a warm one.
#include "backends/cpu/gemm.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdlib>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "backends/cpu/blis.hpp"
#include "backends/cpu/cpu_info.hpp"
#include "backends/cpu/gemm_medium_hwy.hpp"
#include "backends/cpu/parallel.hpp"

#if TENSOR_HAVE_ONEDNN
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>
#include <oneapi/dnnl/dnnl_version.h>
#endif

namespace tensor::cpu {

namespace {

void sgemm_fallback(std::size_t m, std::size_t n, std::size_t k, float alpha, const float* a, std::int64_t rsa,
                    std::int64_t csa, const float* b, std::int64_t rsb, std::int64_t csb, float beta, float* c,
                    std::int64_t rsc, std::int64_t csc) {
#if TENSOR_HAVE_BLIS
  // A unit dim makes BLIS's product a level-2 update that skips a zero scalar (inf * 0
  // gave 0, not NaN): the loop below takes those.
  if (std::min({m, n, k}) > 1) {
    rntm_t rntm = BLIS_RNTM_INITIALIZER;
    bli_rntm_set_num_threads(1, &rntm);
    bli_sgemm_ex(BLIS_NO_TRANSPOSE, BLIS_NO_TRANSPOSE, static_cast<dim_t>(m), static_cast<dim_t>(n),
                 static_cast<dim_t>(k), &alpha, const_cast<float*>(a), rsa, csa, const_cast<float*>(b), rsb, csb,
                 &beta, c, rsc, csc, nullptr, &rntm);
    return;
  }
#endif
  for (std::size_t i = 0; i < m; ++i) {
    float* crow = c + static_cast<std::int64_t>(i) * rsc;
    for (std::size_t j = 0; j < n; ++j) {
      float s = 0;
      for (std::size_t p = 0; p < k; ++p)
        s += a[static_cast<std::int64_t>(i) * rsa + static_cast<std::int64_t>(p) * csa] *
             b[static_cast<std::int64_t>(p) * rsb + static_cast<std::int64_t>(j) * csb];
      float& cv = crow[static_cast<std::int64_t>(j) * csc];
      cv = beta == 0.0f ? alpha * s : alpha * s + beta * cv;
    }
  }
}

// Off with TENSOR_MEDIUM_GEMM=0 (every product sgemm gets then goes to oneDNN / BLIS): for
// A/B timing and for checking that the allocation test notices the difference.
bool medium_gemm_enabled() {
  static const bool on = [] {
    const char* e = std::getenv("TENSOR_MEDIUM_GEMM");
    return e == nullptr || !(e[0] == '0' && e[1] == '\0');
  }();
  return on;
}

#if TENSOR_HAVE_ONEDNN
// A [rows x cols] operand as dnnl's (trans, ld): 'N' when its columns are contiguous,
// 'T' when its rows are; a stride along a dimension of extent 1 is never read, so it
// does not decide. False for any other layout.
bool as_dnnl(std::size_t rows, std::size_t cols, std::int64_t rs, std::int64_t cs, char& trans, std::int64_t& ld) {
  const auto r = static_cast<std::int64_t>(rows), cl = static_cast<std::int64_t>(cols);
  if (cs == 1 || cols == 1) {
    ld = rows == 1 ? std::max<std::int64_t>(cl, 1) : rs;
    if (ld >= std::max<std::int64_t>(cl, 1)) {
      trans = 'N';
      return true;
    }
  }
  if (rs == 1 || rows == 1) {
    ld = cols == 1 ? std::max<std::int64_t>(r, 1) : cs;
    if (ld >= std::max<std::int64_t>(r, 1)) {
      trans = 'T';
      return true;
    }
  }
  return false;
}
#endif

}  // namespace

void sgemm(std::size_t m, std::size_t n, std::size_t k, float alpha, const float* a, std::int64_t rsa,
           std::int64_t csa, const float* b, std::int64_t rsb, std::int64_t csb, float beta, float* c,
           std::int64_t rsc, std::int64_t csc) {
  if (m == 0 || n == 0) return;
  // Medium products on our own kernel (gemm_medium_hwy.hpp: where it was measured not slower
  // than dnnl_sgemm, and it allocates nothing); c's column stride is never read when n == 1.
  if ((csc == 1 || n == 1) && medium_gemm_enabled() && simd::use_medium_gemm(m, n, k, rsa, csa, rsb, csb)) {
    simd::sgemm_medium_f32(m, n, k, alpha, a, rsa, csa, b, rsb, csb, beta, c, rsc);
    return;
  }
#if TENSOR_HAVE_ONEDNN
  char ta = 'N', tb = 'N', tc = 'N';
  std::int64_t lda = 0, ldb = 0, ldc = 0;
  if (k > 0 && as_dnnl(m, k, rsa, csa, ta, lda) && as_dnnl(k, n, rsb, csb, tb, ldb) &&
      as_dnnl(m, n, rsc, csc, tc, ldc) && tc == 'N') {
    // dnnl_sgemm (built on OpenMP) opens a team of omp_get_max_threads() threads from
    // whatever thread calls it; our callers already run one product per thread, so the
    // calling thread's OpenMP thread count is 1 for the call and restored after (it is
    // a per-thread setting; the library's own OpenMP regions on this thread keep theirs).
    const int prev = omp_get_max_threads();
    if (prev != 1) omp_set_num_threads(1);
    const dnnl_status_t st = dnnl_sgemm(ta, tb, static_cast<dnnl_dim_t>(m), static_cast<dnnl_dim_t>(n),
                                        static_cast<dnnl_dim_t>(k), alpha, a, lda, b, ldb, beta, c, ldc);
    if (prev != 1) omp_set_num_threads(prev);
    if (st == dnnl_success) return;
  }
#endif
  sgemm_fallback(m, n, k, alpha, a, rsa, csa, b, rsb, csb, beta, c, rsc, csc);
}

#if TENSOR_HAVE_ONEDNN
GemmThreadScope::GemmThreadScope() : prev_(omp_get_max_threads()) {
  if (prev_ != 1) omp_set_num_threads(1);
}
GemmThreadScope::~GemmThreadScope() {
  if (prev_ != 1) omp_set_num_threads(prev_);
}
#else
GemmThreadScope::GemmThreadScope() = default;
GemmThreadScope::~GemmThreadScope() = default;
#endif

// ---- bf16 products ---------------------------------------------------------------
//
// oneDNN's matmul primitive with bf16 operands and destination: on AVX512_BF16 it runs
// brgemm kernels built on vdpbf16ps (f32 accumulators, one rounding at the end), about
// twice dnnl_sgemm's rate on the same data in f32 where the CPU issues vdpbf16ps at full
// width (Zen 5; on Zen 4 a zmm vdpbf16ps has half the f32 FMA rate and a hand-written
// kernel lost to convert + f32 GEMM).
//
// A primitive is compiled (JIT) for one shape and layout the first time, then kept here by (m, n, k, strides), so a training step's products pay it once. The
// primitives are created and run with the calling thread's OpenMP count at 1 (one
// product per thread, as sgemm), and with a user scratchpad, so two threads may run one
// primitive at once (each passes its own scratchpad and stream).
namespace {

#if TENSOR_HAVE_ONEDNN
dnnl_engine_t cpu_engine() {
  static const dnnl_engine_t engine = [] {
    dnnl_engine_t e = nullptr;
    if (dnnl_engine_create(&e, dnnl_cpu, 0) != dnnl_success) e = nullptr;
    return e;
  }();
  return engine;
}

// m, n, k, rsa, csa, rsb, csb, rsc, csc, data type (dnnl_data_type_t), packed B (0/1)
using Bf16Key = std::array<std::int64_t, 11>;

struct Bf16KeyHash {
  std::size_t operator()(const Bf16Key& k) const {
    std::size_t h = 0;
    for (const std::int64_t v : k) h = h * 1000003u ^ static_cast<std::size_t>(v);
    return h;
  }
};

// A reorder of one column panel of B into the blocked layout.
struct PackPanel {
  dnnl_primitive_t prim = nullptr;
  dnnl_memory_desc_t from{}, to{};
};

// One compiled product (f32 or bf16); prim is null where oneDNN offers no kernel for it.
// With packed B (key[10]), b is oneDNN's own blocked layout for the weights, `pack` the
// reorder from B's strided layout (b_plain) into it and `panels`, where oneDNN takes
// them, reorders of column panels of B (run side by side).
struct Bf16Prim {
  dnnl_primitive_t prim = nullptr, pack = nullptr;
  dnnl_memory_desc_t a{}, b{}, c{}, scratch{}, b_plain{};
  std::size_t scratch_bytes = 0, b_bytes = 0;
  std::vector<PackPanel> panels;
  Bf16Prim() = default;
  Bf16Prim(const Bf16Prim&) = delete;
  Bf16Prim& operator=(const Bf16Prim&) = delete;
  ~Bf16Prim() {
    if (prim != nullptr) dnnl_primitive_destroy(prim);
    if (pack != nullptr) dnnl_primitive_destroy(pack);
    for (const PackPanel& q : panels)
      if (q.prim != nullptr) dnnl_primitive_destroy(q.prim);
  }
};

// Reorders for column panels of B (k x n) into the blocked layout `to`: 4 panels of a
// multiple of 64 columns (the kernels' widest block of columns), the last taking the
// rest; none (one whole reorder) where oneDNN takes no such sub-block.
void make_panels(Bf16Prim& p, std::int64_t k, std::int64_t n, dnnl_engine_t engine) {
  constexpr std::int64_t kPanels = 4, kBlock = 64;
  const std::int64_t width = ((n + kPanels - 1) / kPanels + kBlock - 1) / kBlock * kBlock;
  if (width >= n) return;
  for (std::int64_t lo = 0; lo < n; lo += width) {
    PackPanel q;
    const dnnl_dims_t dims = {k, std::min(width, n - lo)}, offs = {0, lo};
    dnnl_primitive_desc_t rpd = nullptr;
    const bool ok = dnnl_memory_desc_init_submemory(&q.from, &p.b_plain, dims, offs) == dnnl_success &&
                    dnnl_memory_desc_init_submemory(&q.to, &p.b, dims, offs) == dnnl_success &&
                    dnnl_reorder_primitive_desc_create(&rpd, &q.from, engine, &q.to, engine, nullptr) == dnnl_success &&
                    dnnl_primitive_create(&q.prim, rpd) == dnnl_success;
    if (rpd != nullptr) dnnl_primitive_desc_destroy(rpd);
    if (!ok) {
      if (q.prim != nullptr) dnnl_primitive_destroy(q.prim);
      for (const PackPanel& x : p.panels) dnnl_primitive_destroy(x.prim);
      p.panels.clear();
      return;
    }
    p.panels.push_back(q);
  }
}

std::shared_ptr<const Bf16Prim> make_bf16_prim(const Bf16Key& key) {
  auto p = std::make_shared<Bf16Prim>();
  const dnnl_engine_t engine = cpu_engine();
  if (engine == nullptr) return p;
  const dnnl_dims_t ad = {key[0], key[2]}, bd = {key[2], key[1]}, cd = {key[0], key[1]};
  const dnnl_dims_t as = {key[3], key[4]}, bs = {key[5], key[6]}, cs = {key[7], key[8]};
  const auto dt = static_cast<dnnl_data_type_t>(key[9]);
  const bool packed = key[10] != 0;
  if (dnnl_memory_desc_init_by_strides(&p->a, 2, ad, dt, as) != dnnl_success ||
      dnnl_memory_desc_init_by_strides(&p->b_plain, 2, bd, dt, bs) != dnnl_success ||
      dnnl_memory_desc_init_by_strides(&p->c, 2, cd, dt, cs) != dnnl_success)
    return p;
  p->b = p->b_plain;
  if (packed && dnnl_memory_desc_init_by_tag(&p->b, 2, bd, dt, dnnl_format_tag_any) != dnnl_success) return p;
  dnnl_matmul_desc_t md;
  if (dnnl_matmul_desc_init(&md, &p->a, &p->b, nullptr, &p->c) != dnnl_success) return p;
  dnnl_primitive_attr_t attr = nullptr;
  if (dnnl_primitive_attr_create(&attr) != dnnl_success) return p;
  dnnl_primitive_desc_t pd = nullptr;
  const bool made = dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user) == dnnl_success &&
                    dnnl_primitive_desc_create(&pd, &md, attr, engine, nullptr) == dnnl_success;
  dnnl_primitive_attr_destroy(attr);
  if (!made) return p;
  const char* impl = nullptr;
  // Only oneDNN's bf16 kernels: brgemm ("brg:avx512_core_bf16") for dense operands, its
  // bf16 gemm ("gemm:jit") for a padded leading dimension (a column slab, a row slice),
  // close to brgemm up to n = 512. A reference implementation ("ref:any", general strides) would be far slower than the f32 route.
  // With packed B only brgemm: gemm:jit (a transposed or padded A or C) takes B in its
  // own layout, so packing would only copy it.
  const auto kernel = [packed](std::string_view name) {
    return name.starts_with("brg:") || (!packed && name.starts_with("gemm:"));
  };
  if (dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success && impl != nullptr &&
      kernel(impl)) {
    if (const dnnl_memory_desc_t* sp = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0)) {
      p->scratch = *sp;
      p->scratch_bytes = dnnl_memory_desc_get_size(sp);
    }
    bool ok = true;
    if (packed) {
      // The weights layout the kernel chose, and the reorder that packs B into it.
      const dnnl_memory_desc_t* wd = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
      dnnl_primitive_desc_t rpd = nullptr;
      ok = wd != nullptr;
      if (ok) {
        p->b = *wd;
        p->b_bytes = dnnl_memory_desc_get_size(wd);
        ok = dnnl_reorder_primitive_desc_create(&rpd, &p->b_plain, engine, &p->b, engine, nullptr) == dnnl_success &&
             dnnl_primitive_create(&p->pack, rpd) == dnnl_success;
      }
      if (rpd != nullptr) dnnl_primitive_desc_destroy(rpd);
      if (ok) make_panels(*p, key[2], key[1], engine);
    }
    if (!ok || dnnl_primitive_create(&p->prim, pd) != dnnl_success) p->prim = nullptr;
  }
  dnnl_primitive_desc_destroy(pd);
  return p;
}

// The compiled product for key, made on first use (outside the lock: two threads may
// both make one, the second is dropped). Bounded: a full table is emptied (a primitive
// in use stays alive through its shared_ptr).
std::shared_ptr<const Bf16Prim> bf16_prim(const Bf16Key& key) {
  constexpr std::size_t kMaxPrims = 256;
  static std::mutex mu;
  static std::unordered_map<Bf16Key, std::shared_ptr<const Bf16Prim>, Bf16KeyHash> table;
  {
    const std::lock_guard<std::mutex> lock(mu);
    if (auto it = table.find(key); it != table.end()) return it->second;
  }
  auto p = make_bf16_prim(key);
  const std::lock_guard<std::mutex> lock(mu);
  if (table.size() >= kMaxPrims) table.clear();
  return table.try_emplace(key, std::move(p)).first->second;
}

// This thread's stream and scratchpad (oneDNN streams are not shared between threads).
struct Bf16ThreadState {
  dnnl_stream_t stream = nullptr;
  std::vector<std::byte> scratch;
  Bf16ThreadState() {
    if (cpu_engine() == nullptr || dnnl_stream_create(&stream, cpu_engine(), dnnl_stream_default_flags) != dnnl_success)
      stream = nullptr;
  }
  Bf16ThreadState(const Bf16ThreadState&) = delete;
  Bf16ThreadState& operator=(const Bf16ThreadState&) = delete;
  ~Bf16ThreadState() {
    if (stream != nullptr) dnnl_stream_destroy(stream);
  }
};

Bf16ThreadState& thread_state() {
  thread_local Bf16ThreadState state;
  return state;
}

// Runs one compiled product on this thread (its OpenMP count must be 1: GemmThreadScope)
// with a, b, c in p's layouts; false where oneDNN refuses.
bool run_prim(const Bf16Prim& p, const void* a, const void* b, void* c) {
  Bf16ThreadState& state = thread_state();
  if (state.stream == nullptr) return false;
  if (state.scratch.size() < p.scratch_bytes) state.scratch.resize(p.scratch_bytes);
  std::array<dnnl_memory_t, 4> mem{};
  bool ok = dnnl_memory_create(&mem[0], &p.a, cpu_engine(), const_cast<void*>(a)) == dnnl_success &&
            dnnl_memory_create(&mem[1], &p.b, cpu_engine(), const_cast<void*>(b)) == dnnl_success &&
            dnnl_memory_create(&mem[2], &p.c, cpu_engine(), c) == dnnl_success &&
            (p.scratch_bytes == 0 ||
             dnnl_memory_create(&mem[3], &p.scratch, cpu_engine(), state.scratch.data()) == dnnl_success);
  if (ok) {
    const dnnl_exec_arg_t args[4] = {
        {DNNL_ARG_SRC, mem[0]}, {DNNL_ARG_WEIGHTS, mem[1]}, {DNNL_ARG_DST, mem[2]}, {DNNL_ARG_SCRATCHPAD, mem[3]}};
    ok = dnnl_primitive_execute(p.prim, state.stream, p.scratch_bytes == 0 ? 3 : 4, args) == dnnl_success &&
         dnnl_stream_wait(state.stream) == dnnl_success;
  }
  for (dnnl_memory_t x : mem)
    if (x != nullptr) dnnl_memory_destroy(x);
  return ok;
}

// Runs reorder r from b (in layout from) into `to` (layout to) on this thread.
bool run_pack(dnnl_primitive_t r, const dnnl_memory_desc_t& from, const dnnl_memory_desc_t& to_md, const void* b,
              void* to) {
  Bf16ThreadState& state = thread_state();
  if (state.stream == nullptr || r == nullptr) return false;
  std::array<dnnl_memory_t, 2> mem{};
  bool ok = dnnl_memory_create(&mem[0], &from, cpu_engine(), const_cast<void*>(b)) == dnnl_success &&
            dnnl_memory_create(&mem[1], &to_md, cpu_engine(), to) == dnnl_success;
  if (ok) {
    const dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, mem[0]}, {DNNL_ARG_TO, mem[1]}};
    ok = dnnl_primitive_execute(r, state.stream, 2, args) == dnnl_success &&
         dnnl_stream_wait(state.stream) == dnnl_success;
  }
  for (dnnl_memory_t x : mem)
    if (x != nullptr) dnnl_memory_destroy(x);
  return ok;
}

// Runs the product on oneDNN; false (c untouched or to be overwritten) where it cannot.
bool bf16gemm_onednn(std::size_t m, std::size_t n, std::size_t k, const bf16* a, std::int64_t rsa, std::int64_t csa,
                     const bf16* b, std::int64_t rsb, std::int64_t csb, bf16* c, std::int64_t rsc, std::int64_t csc) {
  const GemmThreadScope one_thread;  // the primitive is made and run for one thread
  const auto p = bf16_prim({static_cast<std::int64_t>(m), static_cast<std::int64_t>(n), static_cast<std::int64_t>(k),
                            rsa, csa, rsb, csb, rsc, csc, dnnl_bf16, 0});
  return p->prim != nullptr && run_prim(*p, a, b, c);
}
#endif

// The product widened to f32 (kept in each operand's own layout) and through sgemm.
void bf16gemm_f32(std::size_t m, std::size_t n, std::size_t k, const bf16* a, std::int64_t rsa, std::int64_t csa,
                  const bf16* b, std::int64_t rsb, std::int64_t csb, bf16* c, std::int64_t rsc, std::int64_t csc) {
  std::vector<float> fa(m * k), fb(k * n), fc(m * n);
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t p = 0; p < k; ++p)
      fa[i * k + p] = static_cast<float>(a[static_cast<std::int64_t>(i) * rsa + static_cast<std::int64_t>(p) * csa]);
  for (std::size_t p = 0; p < k; ++p)
    for (std::size_t j = 0; j < n; ++j)
      fb[p * n + j] = static_cast<float>(b[static_cast<std::int64_t>(p) * rsb + static_cast<std::int64_t>(j) * csb]);
  const auto sk = static_cast<std::int64_t>(k), sn = static_cast<std::int64_t>(n);
  sgemm(m, n, k, 1.0f, fa.data(), sk, 1, fb.data(), sn, 1, 0.0f, fc.data(), sn, 1);
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t j = 0; j < n; ++j)
      c[static_cast<std::int64_t>(i) * rsc + static_cast<std::int64_t>(j) * csc] = bf16(fc[i * n + j]);
}

}  // namespace

bool onednn_amx_live() {
#if TENSOR_HAVE_ONEDNN
  return dnnl_get_effective_cpu_isa() == dnnl_cpu_isa_avx512_core_amx;
#else
  return false;
#endif
}

bool bf16_gemm_live() {
#if TENSOR_HAVE_ONEDNN
  static const bool live = [] {
    const dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
    if (isa != dnnl_cpu_isa_avx512_core_bf16 && isa != dnnl_cpu_isa_avx512_core_amx) return false;
    const GemmThreadScope one_thread;
    return bf16_prim({64, 64, 64, 64, 1, 64, 1, 64, 1, dnnl_bf16, 0})->prim != nullptr;
  }();
  return live;
#else
  return false;
#endif
}

void bf16gemm(std::size_t m, std::size_t n, std::size_t k, const bf16* a, std::int64_t rsa, std::int64_t csa,
              const bf16* b, std::int64_t rsb, std::int64_t csb, bf16* c, std::int64_t rsc, std::int64_t csc) {
  if (m == 0 || n == 0) return;
#if TENSOR_HAVE_ONEDNN
  if (k > 0 && bf16_gemm_live() && bf16gemm_onednn(m, n, k, a, rsa, csa, b, rsb, csb, c, rsc, csc)) return;
#endif
  bf16gemm_f32(m, n, k, a, rsa, csa, b, rsb, csb, c, rsc, csc);
}

bool packed_gemm(GemmType type, std::size_t m, std::size_t n, std::size_t k, const void* a, std::int64_t rsa,
                 std::int64_t csa, const void* b, std::int64_t rsb, std::int64_t csb, void* c, std::int64_t rsc,
                 std::int64_t csc, std::size_t pieces) {
#if TENSOR_HAVE_ONEDNN
  if (m == 0 || n == 0 || k == 0 || pieces == 0 || cpu_engine() == nullptr) return false;
  if (type == GemmType::bf16 && !bf16_gemm_live()) return false;
  const dnnl_data_type_t dt = type == GemmType::bf16 ? dnnl_bf16 : dnnl_f32;
  const std::size_t esz = type == GemmType::bf16 ? 2 : 4;
  // Slabs of a multiple of 32 rows (two AMX tiles, two AVX-512 register blocks); the
  // last takes the rest and has its own primitive, which must want B in the same layout.
  std::size_t rows = (m + pieces - 1) / pieces;
  rows = std::min(m, (rows + 31) / 32 * 32);
  pieces = (m + rows - 1) / rows;
  const std::size_t tail = m - (pieces - 1) * rows;
  const GemmThreadScope one_thread;
  auto key = [&](std::size_t mm) {
    return Bf16Key{static_cast<std::int64_t>(mm), static_cast<std::int64_t>(n), static_cast<std::int64_t>(k), rsa, csa,
                   rsb, csb, rsc, csc, dt, 1};
  };
  const auto main = bf16_prim(key(rows));
  if (main->prim == nullptr) return false;
  auto last = main;
  if (tail != rows) {
    last = bf16_prim(key(tail));
    if (last->prim == nullptr || dnnl_memory_desc_equal(&last->b, &main->b) == 0) return false;
  }
  // Packed B, 64-byte aligned: this thread's buffer, kept between calls up to kKeptBytes
  // (a training step's products reuse it), a buffer of this call's own above that.
  constexpr std::size_t kKeptBytes = std::size_t{16} << 20;
  thread_local std::vector<std::byte> kept;
  std::vector<std::byte> own;
  std::vector<std::byte>& buf = main->b_bytes + 64 <= kKeptBytes ? kept : own;
  if (buf.size() < main->b_bytes + 64) buf.resize(main->b_bytes + 64);
  void* packed = buf.data() + (64 - reinterpret_cast<std::uintptr_t>(buf.data()) % 64) % 64;
  std::atomic<bool> ok{true};
  if (main->panels.empty()) {
    if (!run_pack(main->pack, main->b_plain, main->b, b, packed)) return false;
  } else {
    auto pack = [&](std::size_t i) {
      const GemmThreadScope pack_thread;
      const PackPanel& q = main->panels[i];
      if (!run_pack(q.prim, q.from, q.to, b, packed)) ok.store(false, std::memory_order_relaxed);
    };
    parallel_chunks(main->panels.size(), pack);
    if (!ok.load()) return false;
  }
  const auto* ab = static_cast<const std::byte*>(a);
  auto* cb = static_cast<std::byte*>(c);
  auto slab = [&](std::size_t i) {
    const GemmThreadScope slab_thread;
    const auto lo = static_cast<std::int64_t>(i * rows);
    const Bf16Prim& p = i + 1 == pieces ? *last : *main;
    if (!run_prim(p, ab + lo * rsa * static_cast<std::int64_t>(esz), packed, cb + lo * rsc * static_cast<std::int64_t>(esz)))
      ok.store(false, std::memory_order_relaxed);
  };
  parallel_chunks(pieces, slab);
  return ok.load();
#else
  (void)type, (void)m, (void)n, (void)k, (void)a, (void)rsa, (void)csa, (void)b, (void)rsb, (void)csb, (void)c,
      (void)rsc, (void)csc, (void)pieces;
  return false;
#endif
}

std::string gemm_route() {
#if TENSOR_HAVE_ONEDNN
  const char* isa = "sse41";
  switch (dnnl_get_effective_cpu_isa()) {
    case dnnl_cpu_isa_avx: isa = "avx"; break;
    case dnnl_cpu_isa_avx2: isa = "avx2"; break;
    case dnnl_cpu_isa_avx2_vnni: isa = "avx2_vnni"; break;
    case dnnl_cpu_isa_avx512_mic:
    case dnnl_cpu_isa_avx512_mic_4ops: isa = "avx512_mic"; break;
    case dnnl_cpu_isa_avx512_core: isa = "avx512_core"; break;
    case dnnl_cpu_isa_avx512_core_vnni: isa = "avx512_core_vnni"; break;
    case dnnl_cpu_isa_avx512_core_bf16: isa = "avx512_core_bf16"; break;
    case dnnl_cpu_isa_avx512_core_amx: isa = "avx512_core_amx"; break;
    default: break;
  }
  // f16: Debian's oneDNN 2.6 has no CPU f16 matmul (no AVX512_FP16 kernels; its matmul
  // refuses f16 operands), so f16 products are widened to f32 on every CPU.
  std::string half = "; f16 and bf16 widened to f32";
  if (bf16_gemm_live())
    half = std::string("; bf16 onednn brgemm (") +
           (onednn_amx_live() ? "AMX" : "AVX512_BF16") +
           "), one slab per thread, B packed per slab (TENSOR_BF16_PACKED_B=1: once per product); f16 widened to f32 (no f16 matmul in oneDNN " +
           std::to_string(DNNL_VERSION_MAJOR) + "." + std::to_string(DNNL_VERSION_MINOR) + ")";
  return std::string("f32 onednn sgemm (") + isa + "), small (up to 64^3) and medium products (up to 256^3, whole vectors of columns or n < 16) highway" + half + "; f64 blis";
#elif TENSOR_HAVE_BLIS
  return std::string("blis ") + bli_arch_string(bli_arch_query_id()) + ", small and medium f32 products highway";
#else
  return "loop, small and medium f32 products highway";
#endif
}

}  // namespace tensor::cpu
