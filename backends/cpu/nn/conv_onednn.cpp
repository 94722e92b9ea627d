// The 2-d f32 convolution gradients on oneDNN's convolution primitives (conv_onednn.hpp).
#include "backends/cpu/nn/conv_onednn.hpp"

#if TENSOR_HAVE_ONEDNN
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdlib>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "backends/cpu/gemm.hpp"
#include "backends/cpu/parallel.hpp"
#endif

namespace tensor::cpu::nn {

#if TENSOR_HAVE_ONEDNN
namespace {

using I = std::int64_t;

dnnl_engine_t engine() {
  static const dnnl_engine_t e = [] {
    dnnl_engine_t x = nullptr;
    if (dnnl_engine_create(&x, dnnl_cpu, 0) != dnnl_success) x = nullptr;
    return x;
  }();
  return e;
}

// A reorder between two layouts of one tensor (null where they are the same layout).
struct Reorder {
  dnnl_primitive_t prim = nullptr;
  dnnl_memory_desc_t from{}, to{};
  bool same = true;
};

bool make_reorder(Reorder& r, const dnnl_memory_desc_t& from, const dnnl_memory_desc_t& to) {
  r.from = from;
  r.to = to;
  r.same = dnnl_memory_desc_equal(&from, &to) != 0;
  if (r.same) return true;
  dnnl_primitive_desc_t pd = nullptr;
  const bool ok = dnnl_reorder_primitive_desc_create(&pd, &from, engine(), &to, engine(), nullptr) == dnnl_success &&
                  dnnl_primitive_create(&r.prim, pd) == dnnl_success;
  if (pd != nullptr) dnnl_primitive_desc_destroy(pd);
  return ok;
}

// One gradient primitive for `nb` samples: inputs in0, in1 (plain layouts reordered into
// the primitive's), output out (reordered back into its plain layout).
struct ConvPrim {
  dnnl_primitive_t prim = nullptr;
  Reorder in0, in1, out;
  int arg0 = 0, arg1 = 0, arg_out = 0;
  dnnl_memory_desc_t scratch{};
  std::size_t scratch_bytes = 0;
  bool avx512 = false;  // an AVX-512 kernel (jit:avx512_core, brg:avx512_core...)
  ConvPrim() = default;
  ConvPrim(const ConvPrim&) = delete;
  ConvPrim& operator=(const ConvPrim&) = delete;
  ~ConvPrim() {
    for (dnnl_primitive_t p : {prim, in0.prim, in1.prim, out.prim})
      if (p != nullptr) dnnl_primitive_destroy(p);
  }
};

enum class Kind : I { backward_x = 1, backward_weight = 2, forward = 3 };
using Key = std::array<I, 17>;

Key key_of(Kind kind, const ConvGeom& g, std::size_t nb) {
  return {static_cast<I>(kind), static_cast<I>(nb), static_cast<I>(g.c_in), static_cast<I>(g.c_out),
          static_cast<I>(g.in[1]), static_cast<I>(g.in[2]), static_cast<I>(g.kernel[1]), static_cast<I>(g.kernel[2]),
          static_cast<I>(g.out[1]), static_cast<I>(g.out[2]), g.stride[1], g.stride[2], g.padding[1], g.padding[2],
          g.dilation[1], g.dilation[2], 0};
}

std::shared_ptr<const ConvPrim> make_prim(Kind kind, const ConvGeom& g, std::size_t nb) {
  auto p = std::make_shared<ConvPrim>();
  const dnnl_engine_t e = engine();
  if (e == nullptr) return p;
  const I n = static_cast<I>(nb), ci = static_cast<I>(g.c_in), co = static_cast<I>(g.c_out);
  const dnnl_dims_t src = {n, ci, static_cast<I>(g.in[1]), static_cast<I>(g.in[2])};
  const dnnl_dims_t wei = {co, ci, static_cast<I>(g.kernel[1]), static_cast<I>(g.kernel[2])};
  const dnnl_dims_t dst = {n, co, static_cast<I>(g.out[1]), static_cast<I>(g.out[2])};
  const dnnl_dims_t strides = {g.stride[1], g.stride[2]}, dil = {g.dilation[1] - 1, g.dilation[2] - 1};
  const dnnl_dims_t pad_l = {g.padding[1], g.padding[2]};
  dnnl_dims_t pad_r{};
  for (int d = 0; d < 2; ++d) {
    // The right padding that gives our (floored) output size.
    const I k = static_cast<I>(g.kernel[1 + d]), in = static_cast<I>(g.in[1 + d]), out = static_cast<I>(g.out[1 + d]);
    pad_r[d] = (out - 1) * g.stride[1 + d] + (k - 1) * g.dilation[1 + d] + 1 - in - g.padding[1 + d];
    if (pad_r[d] < 0) return p;
  }
  dnnl_memory_desc_t s_any, w_any, d_any, s_plain, w_plain, d_plain;
  if (dnnl_memory_desc_init_by_tag(&s_any, 4, src, dnnl_f32, dnnl_format_tag_any) != dnnl_success ||
      dnnl_memory_desc_init_by_tag(&w_any, 4, wei, dnnl_f32, dnnl_format_tag_any) != dnnl_success ||
      dnnl_memory_desc_init_by_tag(&d_any, 4, dst, dnnl_f32, dnnl_format_tag_any) != dnnl_success ||
      dnnl_memory_desc_init_by_tag(&s_plain, 4, src, dnnl_f32, dnnl_nchw) != dnnl_success ||
      dnnl_memory_desc_init_by_tag(&w_plain, 4, wei, dnnl_f32, dnnl_oihw) != dnnl_success ||
      dnnl_memory_desc_init_by_tag(&d_plain, 4, dst, dnnl_f32, dnnl_nchw) != dnnl_success)
    return p;
  dnnl_convolution_desc_t fd, bd;
  if (dnnl_dilated_convolution_forward_desc_init(&fd, dnnl_forward_training, dnnl_convolution_direct, &s_any, &w_any,
                                                 nullptr, &d_any, strides, dil, pad_l, pad_r) != dnnl_success)
    return p;
  const bool bx = kind == Kind::backward_x, fw = kind == Kind::forward;
  const dnnl_status_t st =
      fw ? dnnl_success
      : bx ? dnnl_dilated_convolution_backward_data_desc_init(&bd, dnnl_convolution_direct, &s_any, &w_any, &d_any,
                                                              strides, dil, pad_l, pad_r)
           : dnnl_dilated_convolution_backward_weights_desc_init(&bd, dnnl_convolution_direct, &s_any, &w_any, nullptr,
                                                                 &d_any, strides, dil, pad_l, pad_r);
  if (st != dnnl_success) return p;
  dnnl_primitive_attr_t attr = nullptr;
  if (dnnl_primitive_attr_create(&attr) != dnnl_success) return p;
  dnnl_primitive_desc_t fpd = nullptr, pd = nullptr;
  bool ok = dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user) == dnnl_success &&
            dnnl_primitive_desc_create(&fpd, &fd, attr, e, nullptr) == dnnl_success &&
            (fw || dnnl_primitive_desc_create(&pd, &bd, attr, e, fpd) == dnnl_success);
  dnnl_primitive_attr_destroy(attr);
  if (fw) std::swap(pd, fpd);  // the forward primitive itself
  const char* impl = nullptr;
  // Only JIT kernels: a reference or gemm-based (im2col, as ours) implementation gains nothing.
  ok = ok && dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success && impl != nullptr &&
       (std::string_view(impl).starts_with("jit:") || std::string_view(impl).starts_with("brg"));
  if (ok) {
    p->avx512 = std::string_view(impl).find("avx512") != std::string_view::npos;
    const dnnl_memory_desc_t* ms = dnnl_primitive_desc_query_md(pd, bx ? dnnl_query_diff_src_md : dnnl_query_src_md, 0);
    const dnnl_memory_desc_t* mw =
        dnnl_primitive_desc_query_md(pd, bx || fw ? dnnl_query_weights_md : dnnl_query_diff_weights_md, 0);
    const dnnl_memory_desc_t* md = dnnl_primitive_desc_query_md(pd, fw ? dnnl_query_dst_md : dnnl_query_diff_dst_md, 0);
    const dnnl_memory_desc_t* sp = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    ok = ms != nullptr && mw != nullptr && md != nullptr;
    if (ok && sp != nullptr) {
      p->scratch = *sp;
      p->scratch_bytes = dnnl_memory_desc_get_size(sp);
    }
    if (ok && fw) {
      // x, w in; y out.
      p->arg0 = DNNL_ARG_SRC;
      p->arg1 = DNNL_ARG_WEIGHTS;
      p->arg_out = DNNL_ARG_DST;
      ok = make_reorder(p->in0, s_plain, *ms) && make_reorder(p->in1, w_plain, *mw) && make_reorder(p->out, *md, d_plain);
    } else if (ok && bx) {
      // dy, w in; dx out.
      p->arg0 = DNNL_ARG_DIFF_DST;
      p->arg1 = DNNL_ARG_WEIGHTS;
      p->arg_out = DNNL_ARG_DIFF_SRC;
      ok = make_reorder(p->in0, d_plain, *md) && make_reorder(p->in1, w_plain, *mw) && make_reorder(p->out, *ms, s_plain);
    } else if (ok) {
      // x, dy in; dw out.
      p->arg0 = DNNL_ARG_SRC;
      p->arg1 = DNNL_ARG_DIFF_DST;
      p->arg_out = DNNL_ARG_DIFF_WEIGHTS;
      ok = make_reorder(p->in0, s_plain, *ms) && make_reorder(p->in1, d_plain, *md) && make_reorder(p->out, *mw, w_plain);
    }
    if (ok && dnnl_primitive_create(&p->prim, pd) != dnnl_success) p->prim = nullptr;
  }
  if (pd != nullptr) dnnl_primitive_desc_destroy(pd);
  if (fpd != nullptr) dnnl_primitive_desc_destroy(fpd);
  return p;
}

std::shared_ptr<const ConvPrim> prim_for(Kind kind, const ConvGeom& g, std::size_t nb) {
  struct KeyHash {
    std::size_t operator()(const Key& k) const {
      std::size_t h = 0;
      for (const I v : k) h = h * 1000003u ^ static_cast<std::size_t>(v);
      return h;
    }
  };
  constexpr std::size_t kMaxPrims = 128;
  static std::mutex mu;
  static std::unordered_map<Key, std::shared_ptr<const ConvPrim>, KeyHash> table;
  const Key key = key_of(kind, g, nb);
  {
    const std::lock_guard<std::mutex> lock(mu);
    if (auto it = table.find(key); it != table.end()) return it->second;
  }
  auto p = make_prim(kind, g, nb);
  const std::lock_guard<std::mutex> lock(mu);
  if (table.size() >= kMaxPrims) table.clear();
  return table.try_emplace(key, std::move(p)).first->second;
}

// This thread's stream and buffers (the primitives' layouts of in0, in1, out; scratchpad).
struct ThreadState {
  dnnl_stream_t stream = nullptr;
  std::array<std::vector<std::byte>, 4> buf;
  ThreadState() {
    if (engine() == nullptr || dnnl_stream_create(&stream, engine(), dnnl_stream_default_flags) != dnnl_success)
      stream = nullptr;
  }
  ThreadState(const ThreadState&) = delete;
  ThreadState& operator=(const ThreadState&) = delete;
  ~ThreadState() {
    if (stream != nullptr) dnnl_stream_destroy(stream);
  }
  void* get(int i, std::size_t bytes) {
    if (buf[static_cast<std::size_t>(i)].size() < bytes + 64) buf[static_cast<std::size_t>(i)].resize(bytes + 64);
    std::byte* d = buf[static_cast<std::size_t>(i)].data();
    return d + (64 - reinterpret_cast<std::uintptr_t>(d) % 64) % 64;
  }
};

// Runs p on this thread: in0, in1, out in their plain layouts.
bool run(const ConvPrim& p, const float* in0, const float* in1, float* out) {
  thread_local ThreadState st;
  if (st.stream == nullptr || p.prim == nullptr) return false;
  std::vector<dnnl_memory_t> mems;
  auto mem = [&](const dnnl_memory_desc_t& md, const void* h) {
    dnnl_memory_t m = nullptr;
    if (dnnl_memory_create(&m, &md, engine(), const_cast<void*>(h)) != dnnl_success) return static_cast<dnnl_memory_t>(nullptr);
    mems.push_back(m);
    return m;
  };
  auto reorder = [&](const Reorder& r, dnnl_memory_t from, dnnl_memory_t to) {
    const dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}};
    return dnnl_primitive_execute(r.prim, st.stream, 2, args) == dnnl_success;
  };
  bool ok = true;
  // Inputs in the primitive's layouts (reordered into this thread's buffers where they differ).
  dnnl_memory_t a0 = mem(p.in0.from, in0), a1 = mem(p.in1.from, in1);
  ok = a0 != nullptr && a1 != nullptr;
  dnnl_memory_t b0 = a0, b1 = a1;
  if (ok && !p.in0.same) {
    b0 = mem(p.in0.to, st.get(0, dnnl_memory_desc_get_size(&p.in0.to)));
    ok = b0 != nullptr && reorder(p.in0, a0, b0);
  }
  if (ok && !p.in1.same) {
    b1 = mem(p.in1.to, st.get(1, dnnl_memory_desc_get_size(&p.in1.to)));
    ok = b1 != nullptr && reorder(p.in1, a1, b1);
  }
  dnnl_memory_t o_plain = ok ? mem(p.out.to, out) : nullptr;
  dnnl_memory_t o = o_plain;
  ok = ok && o_plain != nullptr;
  if (ok && !p.out.same) {
    o = mem(p.out.from, st.get(2, dnnl_memory_desc_get_size(&p.out.from)));
    ok = o != nullptr;
  }
  dnnl_memory_t sp = nullptr;
  if (ok && p.scratch_bytes > 0) {
    sp = mem(p.scratch, st.get(3, p.scratch_bytes));
    ok = sp != nullptr;
  }
  if (ok) {
    const dnnl_exec_arg_t args[4] = {{p.arg0, b0}, {p.arg1, b1}, {p.arg_out, o}, {DNNL_ARG_SCRATCHPAD, sp}};
    ok = dnnl_primitive_execute(p.prim, st.stream, p.scratch_bytes > 0 ? 4 : 3, args) == dnnl_success;
  }
  if (ok && !p.out.same) ok = reorder(p.out, o, o_plain);
  ok = ok && dnnl_stream_wait(st.stream) == dnnl_success;
  for (dnnl_memory_t m : mems) dnnl_memory_destroy(m);
  return ok;
}

// The geometries this route takes: 2-d, one group, dense enough channels for the JIT
// kernels (>= 16 in and out: a single input channel, the CNN's first layer, stays on
// im2col + gemm), and enough work for the reorders to pay.
bool taken(const ConvGeom& g) {
  const double work = static_cast<double>(g.batch) * static_cast<double>(g.c_out) * static_cast<double>(g.out_size()) *
                      static_cast<double>(g.c_in * g.kernel_size());
  return g.in[0] == 1 && g.kernel[0] == 1 && g.out[0] == 1 && g.groups == 1 && g.c_in >= 16 && g.c_out >= 16 &&
         g.batch >= 1 && work >= 128.0 * 128.0 * 128.0 && engine() != nullptr;
}

// TENSOR_CONV_ONEDNN: "1" this route for every geometry it takes, "0" for none; unset,
// where oneDNN picks a kernel measured faster than im2col + gemm (allowed()).
std::atomic<OnednnConvMode> g_mode{[] {
  const char* e = std::getenv("TENSOR_CONV_ONEDNN");
  if (e == nullptr) return OnednnConvMode::preferred;
  return std::string_view(e) == "1"   ? OnednnConvMode::forced
         : std::string_view(e) == "0" ? OnednnConvMode::off
                                      : OnednnConvMode::preferred;
}()};

bool chosen(const ConvGeom& g) { return g_mode.load(std::memory_order_relaxed) != OnednnConvMode::off && taken(g); }

// Whether primitive p runs where the mode allows: forced, any JIT kernel; preferred, the
// AVX-512 kernels, measured faster than im2col + gemm on this route's geometries (Zen
// with AVX-512, 2026-12-07: single-thread CPU time [128,32,14,14] -> 64 forward / x-grad
// / w-grad 8.7 / 8.7 / 9.8 ms against 10.2 / 10.7 / 10.4, [32,64,56,56] -> 64 70 / 72 /
// 80 against 76 / 90 / 84; on 2 threads, idle, docs/benchmarks.md's issue 33 rows). The
// AVX2 and SSE4.1 kernels were not measured: those CPUs stay on im2col + gemm.
bool allowed(const ConvPrim& p) {
  return p.prim != nullptr && (p.avx512 || g_mode.load(std::memory_order_relaxed) == OnednnConvMode::forced);
}

// Batch parts: a fixed count (not the thread count), so every result is the same on any
// number of threads; parts of at most two sizes (two primitives).
constexpr std::size_t kParts = 8;

// The part primitives of `kind` for parts of `small` and `big` samples. Created with one
// OpenMP thread allowed, as they run (oneDNN's JIT kernels choose their blocking for the
// thread count they see at creation); only around creation: parallel_chunks runs
// serially while one thread is allowed (which the gradients did before 2026-12-07).
std::pair<std::shared_ptr<const ConvPrim>, std::shared_ptr<const ConvPrim>> part_prims(Kind kind, const ConvGeom& g,
                                                                                       std::size_t small,
                                                                                       std::size_t big) {
  const GemmThreadScope one_thread;
  auto ps = prim_for(kind, g, small);
  auto pb = big == small ? ps : prim_for(kind, g, big);
  return {std::move(ps), std::move(pb)};
}

// out = kind(in0, in1) over the batch in parts on parallel_chunks (in0 and out per sample,
// in1 the weight, shared).
// `bias` (forward only, may be null) is added to each part's output as it comes out of
// the reorder, while it is still in cache. With `epilogue` (forward only) each part's
// output goes to a per-thread buffer (`slack` floats longer) handed to it, not to out.
bool run_parts(Kind kind, const ConvGeom& g, const float* in0, std::size_t in0_step, const float* in1, float* out,
               std::size_t out_step, const float* bias = nullptr, const PartEpilogue* epilogue = nullptr,
               std::size_t slack = 0) {
  const std::size_t parts = std::min(g.batch, kParts);
  const std::size_t small = g.batch / parts, big = small + (g.batch % parts != 0 ? 1 : 0);
  const auto [ps, pb] = part_prims(kind, g, small, big);
  if (!allowed(*ps) || !allowed(*pb)) return false;
  std::atomic<bool> ok{true};
  auto part = [&](std::size_t i) {
    const GemmThreadScope part_thread;
    const std::size_t n0 = g.batch * i / parts, n1 = g.batch * (i + 1) / parts;
    const ConvPrim& p = n1 - n0 == small ? *ps : *pb;
    thread_local std::vector<float> part_out;
    float* dst = out != nullptr ? out + n0 * out_step : nullptr;  // sample n0's output
    if (epilogue != nullptr) {
      if (part_out.size() < (n1 - n0) * out_step + slack) part_out.resize((n1 - n0) * out_step + slack);
      dst = part_out.data();
    }
    if (!run(p, in0 + n0 * in0_step, in1, dst)) {
      ok = false;
      return;
    }
    const std::size_t plane = g.out_size();
    if (bias != nullptr)
      for (std::size_t n = 0; n < n1 - n0; ++n)
        for (std::size_t o = 0; o < g.c_out; ++o) {
          float* yo = dst + n * out_step + o * plane;
          const float b = bias[o];
          for (std::size_t i = 0; i < plane; ++i) yo[i] += b;
        }
    if (epilogue != nullptr) (*epilogue)(n0, n1, dst);
  };
  parallel_chunks(parts, part);
  return ok.load();
}

}  // namespace

bool onednn_conv_forward(const ConvGeom& g, const float* x, const float* w, const float* bias, float* y) {
  return chosen(g) &&
         run_parts(Kind::forward, g, x, g.c_in * g.in_size(), w, y, g.c_out * g.out_size(), bias);
}

bool onednn_conv_forward_parts(const ConvGeom& g, const float* x, const float* w, const float* bias, std::size_t slack,
                               const PartEpilogue& epilogue) {
  return chosen(g) &&
         run_parts(Kind::forward, g, x, g.c_in * g.in_size(), w, nullptr, g.c_out * g.out_size(), bias, &epilogue, slack);
}

bool onednn_conv_backward_x(const ConvGeom& g, const float* dy, const float* w, float* dx) {
  return chosen(g) && run_parts(Kind::backward_x, g, dy, g.c_out * g.out_size(), w, dx, g.c_in * g.in_size());
}

bool onednn_conv_backward_weight(const ConvGeom& g, const float* x, const float* dy, float* dw) {
  if (!chosen(g)) return false;
  const std::size_t parts = std::min(g.batch, kParts);
  const std::size_t small = g.batch / parts, big = small + (g.batch % parts != 0 ? 1 : 0);
  const auto [ps, pb] = part_prims(Kind::backward_weight, g, small, big);
  if (!allowed(*ps) || !allowed(*pb)) return false;
  const std::size_t wsize = g.c_out * g.c_in * g.kernel_size();
  // Part 0 writes dw itself, part i > 0 its own partial; added in part order at the end.
  std::vector<float> partial((parts - 1) * wsize);
  std::atomic<bool> ok{true};
  auto part = [&](std::size_t i) {
    const GemmThreadScope part_thread;
    const std::size_t n0 = g.batch * i / parts, n1 = g.batch * (i + 1) / parts;
    const ConvPrim& p = n1 - n0 == small ? *ps : *pb;
    float* acc = i == 0 ? dw : partial.data() + (i - 1) * wsize;
    if (!run(p, x + n0 * g.c_in * g.in_size(), dy + n0 * g.c_out * g.out_size(), acc)) ok = false;
  };
  parallel_chunks(parts, part);
  if (!ok.load()) return false;
  for (std::size_t i = 1; i < parts; ++i) {
    const float* src = partial.data() + (i - 1) * wsize;
    for (std::size_t j = 0; j < wsize; ++j) dw[j] += src[j];
  }
  return true;
}

void set_onednn_conv_mode(OnednnConvMode m) { g_mode.store(m, std::memory_order_relaxed); }
OnednnConvMode onednn_conv_mode() { return g_mode.load(std::memory_order_relaxed); }

#else

void set_onednn_conv_mode(OnednnConvMode) {}
OnednnConvMode onednn_conv_mode() { return OnednnConvMode::off; }
bool onednn_conv_forward(const ConvGeom&, const float*, const float*, const float*, float*) { return false; }
bool onednn_conv_forward_parts(const ConvGeom&, const float*, const float*, const float*, std::size_t,
                               const PartEpilogue&) {
  return false;
}
bool onednn_conv_backward_x(const ConvGeom&, const float*, const float*, float*) { return false; }
bool onednn_conv_backward_weight(const ConvGeom&, const float*, const float*, float*) { return false; }

#endif

}  // namespace tensor::cpu::nn
