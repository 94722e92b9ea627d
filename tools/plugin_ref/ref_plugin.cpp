// The reference backend plugin (docs/plugins.md): dense host buffers, scalar f32 kernels for a
// handful of ops, every other op left to the host's defaults. Built from tensor/backend_plugin.h
// alone (no libtensor header, no libtensor.so). The REF_* macros build the negative variants the
// tests load (tests/plugin_test.cpp); REF_NAME names the backend.
#include <tensor/backend_plugin.h>

#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <new>
#include <stdexcept>
#include <utility>

#include <string>

#ifndef REF_NAME
#define REF_NAME "ref"
#endif

namespace {

const TensorHostApi* g_host = nullptr;

// A tensor: a counted header and its dense row-major buffer of any dtype, in one allocation
// (a [4] + [4] add costs what its allocations cost: one here, not two).
struct alignas(16) RefTensor {
  std::atomic<int> refs{1};
  TensorMeta meta{};
  std::size_t size = 0;  // bytes of the buffer after the header
  unsigned char* bytes() { return reinterpret_cast<unsigned char*>(this + 1); }
};
RefTensor* ref(TensorPrim p) { return reinterpret_cast<RefTensor*>(p); }
TensorPrim prim(RefTensor* t) { return reinterpret_cast<TensorPrim>(t); }

std::size_t elem_size(std::int32_t dtype) {
  switch (dtype) {
    case TENSOR_DTYPE_F64: case TENSOR_DTYPE_I64: case TENSOR_DTYPE_U64: return 8;
    case TENSOR_DTYPE_F32: case TENSOR_DTYPE_I32: case TENSOR_DTYPE_U32: case TENSOR_DTYPE_BOOL_U32: return 4;
    case TENSOR_DTYPE_F16: case TENSOR_DTYPE_BF16: case TENSOR_DTYPE_I16: case TENSOR_DTYPE_U16: return 2;
    default: return 1;
  }
}
std::size_t count(const TensorMeta& m) {
  std::size_t n = 1;
  for (std::uint32_t i = 0; i < m.rank; ++i) n *= static_cast<std::size_t>(m.shape[i]);
  return n;
}
// Small tensors (a header and up to 128 bytes) reuse freed blocks kept per thread: a [4] + [4]
// add then costs no malloc/free (what dominated its time); larger ones go to operator new.
constexpr std::size_t kSmallBlock = sizeof(RefTensor) + 128;
thread_local bool t_free_dead = false;  // past this thread's exit (trivial: never destroyed)
struct FreeBlocks {
  void* items[16];
  std::size_t n = 0;
  ~FreeBlocks() {
    while (n) ::operator delete(items[--n]);
    t_free_dead = true;
  }
};
thread_local FreeBlocks t_free;

RefTensor* make(const TensorMeta& m) {
  const std::size_t size = count(m) * elem_size(m.dtype);
  void* mem = sizeof(RefTensor) + size <= kSmallBlock
                  ? (!t_free_dead && t_free.n ? t_free.items[--t_free.n] : ::operator new(kSmallBlock))
                  : ::operator new(sizeof(RefTensor) + size);
  auto* t = new (mem) RefTensor;
  t->meta = m;
  t->size = size;
  return t;
}
void destroy(RefTensor* t) {
  const bool small = sizeof(RefTensor) + t->size <= kSmallBlock;
  t->~RefTensor();
  if (small && !t_free_dead && t_free.n < 16) t_free.items[t_free.n++] = t;
  else ::operator delete(t);
}
float* f32(RefTensor* t) { return reinterpret_cast<float*>(t->bytes()); }
bool same_shape(const TensorMeta& a, const TensorMeta& b) {
  if (a.rank != b.rank) return false;
  for (std::uint32_t i = 0; i < a.rank; ++i)
    if (a.shape[i] != b.shape[i]) return false;
  return true;
}

// ---- primitive rows --------------------------------------------------------------------
void retain(TensorPrim p) { ref(p)->refs.fetch_add(1, std::memory_order_relaxed); }
void release(TensorPrim p) {
  if (ref(p)->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) destroy(ref(p));
}
TensorStatus metadata(TensorPrim p, TensorMeta* out) {
  *out = ref(p)->meta;
  return TENSOR_STATUS_OK;
}
std::int32_t can_mut(TensorPrim p) { return ref(p)->refs.load(std::memory_order_acquire) == 1; }

// ABI 1.1: src's bytes into dst's own buffer (the host checked dtype and shape).
TensorStatus assign(TensorPrim dst, TensorPrim src) {
  if (ref(dst)->size != ref(src)->size) return g_host->set_error(TENSOR_STATUS_SHAPE, "assign: size mismatch");
  if (ref(dst)->size) std::memmove(ref(dst)->bytes(), ref(src)->bytes(), ref(dst)->size);
  return TENSOR_STATUS_OK;
}

// ---- device rows -----------------------------------------------------------------------
TensorStatus device_info(uint32_t, TensorDeviceInfo* out) {
  out->kind = TENSOR_DEVICE_KIND_CPU;
  out->name = "ref scalar cpu";
  out->description = "libtensor's reference plugin: scalar f32 kernels, the rest host defaults";
  return TENSOR_STATUS_OK;
}
// Every float and int dtype and the one-byte bools, as the host CPU (which computes what the
// kernels here do not); four-byte bools are not stored.
uint32_t dtype_usage(uint32_t, int32_t dtype) {
  if (dtype < 0 || dtype >= TENSOR_DTYPE_BOOL_U32) return 0;
  return TENSOR_USAGE_STORAGE | TENSOR_USAGE_ARITHMETIC;
}
TensorStatus from_host(uint32_t, const TensorMeta* meta, const void* bytes, TensorPrim* out) {
  TENSOR_PLUGIN_GUARD(g_host, {
    RefTensor* t = make(*meta);
    if (t->size) std::memcpy(t->bytes(), bytes, t->size);
    *out = prim(t);
    return TENSOR_STATUS_OK;
  })
}
TensorStatus to_host(TensorPrim p, void* bytes, size_t size) {
  if (size != ref(p)->size) return g_host->set_error(TENSOR_STATUS_EXECUTION, "to_host: size mismatch");
  if (size) std::memcpy(bytes, ref(p)->bytes(), size);
  return TENSOR_STATUS_OK;
}

// ---- kernels (f32 only: op_dtypes says so, the host takes other dtypes) --------------------

// The flat index into `in` (broadcast to `out`'s shape) of output element `i`.
std::size_t broadcast_index(const TensorMeta& in, const TensorMeta& out, std::size_t i) {
  std::size_t idx = 0, stride = 1;
  for (std::uint32_t k = 0; k < out.rank; ++k) {
    const std::uint32_t od = out.rank - 1 - k;
    const auto n = static_cast<std::size_t>(out.shape[od]);
    const std::size_t coord = i % n;
    i /= n;
    if (k < in.rank) {
      const auto m = static_cast<std::size_t>(in.shape[in.rank - 1 - k]);
      if (m != 1) idx += coord * stride;
      stride *= m;
    }
  }
  return idx;
}

template <class F>
TensorStatus binary(TensorOpCall* c, F f) {
  TENSOR_PLUGIN_GUARD(g_host, {
    RefTensor* a = ref(c->inputs[0]);
    RefTensor* b = ref(c->inputs[1]);
    RefTensor* o = make(c->out);
    const std::size_t n = count(c->out);
    if (same_shape(a->meta, c->out) && same_shape(b->meta, c->out)) {  // no broadcast: one flat loop
      for (std::size_t i = 0; i < n; ++i) f32(o)[i] = f(f32(a)[i], f32(b)[i]);
    } else {
      for (std::size_t i = 0; i < n; ++i)
        f32(o)[i] = f(f32(a)[broadcast_index(a->meta, c->out, i)], f32(b)[broadcast_index(b->meta, c->out, i)]);
    }
    c->result = prim(o);
    return TENSOR_STATUS_OK;
  })
}
template <class F>
TensorStatus unary(TensorOpCall* c, F f) {
  TENSOR_PLUGIN_GUARD(g_host, {
    RefTensor* a = ref(c->inputs[0]);
    // Ownership is permission: a buffer only the host holds is overwritten in place.
    RefTensor* o = c->input_unique[0] && can_mut(c->inputs[0]) ? a : make(c->out);
    if (o == a) retain(c->inputs[0]);
    const std::size_t n = count(c->out);
    for (std::size_t i = 0; i < n; ++i) f32(o)[i] = f(f32(a)[i]);
    c->result = prim(o);
    return TENSOR_STATUS_OK;
  })
}
float scalar_of(const TensorOpCall* c) {
  switch (c->scalar.kind) {
    case TENSOR_SCALAR_FLOAT: return static_cast<float>(c->scalar.f);
    case TENSOR_SCALAR_UINT: return static_cast<float>(c->scalar.u);
    default: return static_cast<float>(c->scalar.i);
  }
}

TensorStatus op_add(TensorOpCall* c) { return binary(c, [](float x, float y) { return x + y; }); }
TensorStatus op_sub(TensorOpCall* c) { return binary(c, [](float x, float y) { return x - y; }); }
TensorStatus op_mul(TensorOpCall* c) { return binary(c, [](float x, float y) { return x * y; }); }
TensorStatus op_div(TensorOpCall* c) { return binary(c, [](float x, float y) { return x / y; }); }
TensorStatus op_add_scalar(TensorOpCall* c) {
  const float s = scalar_of(c);
  return unary(c, [s](float x) { return x + s; });
}
TensorStatus op_mul_scalar(TensorOpCall* c) {
  const float s = scalar_of(c);
  return unary(c, [s](float x) { return x * s; });
}
TensorStatus op_neg(TensorOpCall* c) { return unary(c, [](float x) { return -x; }); }
TensorStatus op_relu(TensorOpCall* c) { return unary(c, [](float x) { return x > 0.0f ? x : 0.0f; }); }
TensorStatus op_exp(TensorOpCall* c) {
#ifdef REF_FAILING_ENTRY
  TENSOR_PLUGIN_GUARD(g_host, {
    (void)c;
    throw std::runtime_error("ref exp kernel failed on purpose");
  })
#else
  return unary(c, [](float x) { return std::exp(x); });
#endif
}
TensorStatus op_sum(TensorOpCall* c) {
  TENSOR_PLUGIN_GUARD(g_host, {
    RefTensor* a = ref(c->inputs[0]);
    RefTensor* o = make(c->out);
    double s = 0;
    for (std::size_t i = 0, n = count(a->meta); i < n; ++i) s += f32(a)[i];
    f32(o)[0] = static_cast<float>(s);
    c->result = prim(o);
    return TENSOR_STATUS_OK;
  })
}
TensorStatus op_sum_dim(TensorOpCall* c) {
  TENSOR_PLUGIN_GUARD(g_host, {
    RefTensor* a = ref(c->inputs[0]);
    RefTensor* o = make(c->out);
    const auto d = static_cast<std::uint32_t>(c->dim);
    std::size_t outer = 1, inner = 1;
    for (std::uint32_t k = 0; k < d; ++k) outer *= static_cast<std::size_t>(a->meta.shape[k]);
    for (std::uint32_t k = d + 1; k < a->meta.rank; ++k) inner *= static_cast<std::size_t>(a->meta.shape[k]);
    const auto len = static_cast<std::size_t>(a->meta.shape[d]);
    for (std::size_t p = 0; p < outer; ++p)
      for (std::size_t q = 0; q < inner; ++q) {
        double s = 0;
        for (std::size_t j = 0; j < len; ++j) s += f32(a)[(p * len + j) * inner + q];
        f32(o)[p * inner + q] = static_cast<float>(s);
      }
    c->result = prim(o);
    return TENSOR_STATUS_OK;
  })
}
// [.., M, K] x [.., K, N] with the batch dims broadcast (the host checked the shapes).
TensorStatus op_matmul(TensorOpCall* c) {
  TENSOR_PLUGIN_GUARD(g_host, {
    RefTensor* a = ref(c->inputs[0]);
    RefTensor* b = ref(c->inputs[1]);
    RefTensor* o = make(c->out);
    const std::uint32_t r = c->out.rank;
    const auto m = static_cast<std::size_t>(c->out.shape[r - 2]), n = static_cast<std::size_t>(c->out.shape[r - 1]),
               k = static_cast<std::size_t>(a->meta.shape[r - 1]);
    TensorMeta ob = c->out, ab = a->meta, bb = b->meta;  // the batch dims alone
    ob.rank = ab.rank = bb.rank = r - 2;
    for (std::size_t bi = 0, batches = count(ob); bi < batches; ++bi) {
      const float* x = f32(a) + broadcast_index(ab, ob, bi) * m * k;
      const float* y = f32(b) + broadcast_index(bb, ob, bi) * k * n;
      float* z = f32(o) + bi * m * n;
      for (std::size_t i = 0; i < m; ++i)
        for (std::size_t j = 0; j < n; ++j) {
          float s = 0.0f;
          for (std::size_t p = 0; p < k; ++p) s += x[i * k + p] * y[p * n + j];
          z[i * n + j] = s;
        }
    }
    c->result = prim(o);
    return TENSOR_STATUS_OK;
  })
}
// reshape: the same bytes under the new shape; expand: size-1 dims repeated (any dtype).
TensorStatus op_reshape(TensorOpCall* c) {
  TENSOR_PLUGIN_GUARD(g_host, {
    RefTensor* a = ref(c->inputs[0]);
    RefTensor* o = make(c->out);
    if (o->size) std::memcpy(o->bytes(), a->bytes(), o->size);
    c->result = prim(o);
    return TENSOR_STATUS_OK;
  })
}
TensorStatus op_expand(TensorOpCall* c) {
  TENSOR_PLUGIN_GUARD(g_host, {
    RefTensor* a = ref(c->inputs[0]);
    RefTensor* o = make(c->out);
    const std::size_t e = elem_size(c->out.dtype);
    for (std::size_t i = 0, n = count(c->out); i < n; ++i)
      std::memcpy(o->bytes() + i * e, a->bytes() + broadcast_index(a->meta, c->out, i) * e, e);
    c->result = prim(o);
    return TENSOR_STATUS_OK;
  })
}
TensorStatus fill(TensorOpCall* c, float v) {
  TENSOR_PLUGIN_GUARD(g_host, {
    RefTensor* o = make(c->out);
    for (std::size_t i = 0, n = count(c->out); i < n; ++i) f32(o)[i] = v;
    c->result = prim(o);
    return TENSOR_STATUS_OK;
  })
}
TensorStatus op_zeros(TensorOpCall* c) { return fill(c, 0.0f); }
TensorStatus op_ones(TensorOpCall* c) { return fill(c, 1.0f); }
TensorStatus op_full(TensorOpCall* c) { return fill(c, scalar_of(c)); }

// ---- ABI 1.2 entries: arguments in call->args (layout, indexing, a module op) --------------

// Element strides of a dense row-major meta.
void dense_strides(const TensorMeta& m, std::int64_t* st) {
  std::int64_t s = 1;
  for (std::uint32_t k = m.rank; k-- > 0;) {
    st[k] = s;
    s *= m.shape[k];
  }
}
// out[i] = a[base + sum(coord_k * step[k])] for every element of `out`, any dtype: permute,
// flip, swap_dims and slice are all such a view of the input, copied.
TensorStatus copy_view(TensorOpCall* c, const TensorMeta& out, std::int64_t base, const std::int64_t* step) {
  TENSOR_PLUGIN_GUARD(g_host, {
    RefTensor* a = ref(c->inputs[0]);
    RefTensor* o = make(out);
    const std::size_t e = elem_size(out.dtype);
    std::int64_t coord[TENSOR_PLUGIN_MAX_RANK] = {};
    for (std::size_t i = 0, n = count(out); i < n; ++i) {
      std::int64_t at = base;
      for (std::uint32_t k = 0; k < out.rank; ++k) at += coord[k] * step[k];
      std::memcpy(o->bytes() + i * e, a->bytes() + static_cast<std::size_t>(at) * e, e);
      for (std::uint32_t k = out.rank; k-- > 0;) {  // next coordinate, last dim fastest
        if (++coord[k] < out.shape[k]) break;
        coord[k] = 0;
      }
    }
    c->result = prim(o);
    return TENSOR_STATUS_OK;
  })
}
// permute: args = [rank, axes...] (output dim k is input dim axes[k]).
TensorStatus op_permute(TensorOpCall* c) {
  const TensorMeta& in = ref(c->inputs[0])->meta;
  std::int64_t st[TENSOR_PLUGIN_MAX_RANK], step[TENSOR_PLUGIN_MAX_RANK];
  dense_strides(in, st);
  TensorMeta out = in;
  for (std::uint32_t k = 0; k < in.rank; ++k) {
    const auto ax = static_cast<std::uint32_t>(c->args[1 + k]);
    out.shape[k] = in.shape[ax];
    step[k] = st[ax];
  }
  return copy_view(c, out, 0, step);
}
// flip: args = [n, axes...] (the dims reversed).
TensorStatus op_flip(TensorOpCall* c) {
  const TensorMeta& in = ref(c->inputs[0])->meta;
  std::int64_t step[TENSOR_PLUGIN_MAX_RANK];
  dense_strides(in, step);
  std::int64_t base = 0;
  for (std::int64_t j = 0; j < c->args[0]; ++j) {
    const auto ax = static_cast<std::uint32_t>(c->args[1 + j]);
    if (in.shape[ax] > 0) base += (in.shape[ax] - 1) * step[ax];
    step[ax] = -step[ax];
  }
  return copy_view(c, in, base, step);
}
// swap_dims: args = [dim0, dim1].
TensorStatus op_swap_dims(TensorOpCall* c) {
  const TensorMeta& in = ref(c->inputs[0])->meta;
  std::int64_t step[TENSOR_PLUGIN_MAX_RANK];
  dense_strides(in, step);
  TensorMeta out = in;
  const auto d0 = static_cast<std::uint32_t>(c->args[0]), d1 = static_cast<std::uint32_t>(c->args[1]);
  std::swap(out.shape[d0], out.shape[d1]);
  std::swap(step[d0], step[d1]);
  return copy_view(c, out, 0, step);
}
// slice: args = [n, (start, step, len) for dims 0..n-1]; dims past n are whole.
TensorStatus op_slice(TensorOpCall* c) {
  const TensorMeta& in = ref(c->inputs[0])->meta;
  std::int64_t st[TENSOR_PLUGIN_MAX_RANK], step[TENSOR_PLUGIN_MAX_RANK];
  dense_strides(in, st);
  TensorMeta out = in;
  std::int64_t base = 0;
  for (std::uint32_t k = 0; k < in.rank; ++k) {
    step[k] = st[k];
    if (k < static_cast<std::uint64_t>(c->args[0])) {
      const std::int64_t* d = c->args + 1 + 3 * k;
      out.shape[k] = d[2];
      if (d[2] > 0) base += d[0] * st[k];
      step[k] = st[k] * d[1];
    }
  }
  return copy_view(c, out, base, step);
}
// cat: inputs = the parts, args = [dim].
TensorStatus op_cat(TensorOpCall* c) {
  TENSOR_PLUGIN_GUARD(g_host, {
    const auto dim = static_cast<std::uint32_t>(c->args[0]);
    TensorMeta out = ref(c->inputs[0])->meta;
    out.shape[dim] = 0;
    for (std::uint32_t j = 0; j < c->input_count; ++j) out.shape[dim] += ref(c->inputs[j])->meta.shape[dim];
    std::size_t outer = 1, inner = elem_size(out.dtype);
    for (std::uint32_t k = 0; k < dim; ++k) outer *= static_cast<std::size_t>(out.shape[k]);
    for (std::uint32_t k = dim + 1; k < out.rank; ++k) inner *= static_cast<std::size_t>(out.shape[k]);
    RefTensor* o = make(out);
    std::size_t at = 0;
    for (std::size_t p = 0; p < outer; ++p)
      for (std::uint32_t j = 0; j < c->input_count; ++j) {
        RefTensor* part = ref(c->inputs[j]);
        const std::size_t row = static_cast<std::size_t>(part->meta.shape[dim]) * inner;
        if (row) std::memcpy(o->bytes() + at, part->bytes() + p * row, row);
        at += row;
      }
    c->result = prim(o);
    return TENSOR_STATUS_OK;
  })
}
std::int64_t index_at(RefTensor* t, std::size_t i) {
  switch (t->meta.dtype) {
    case TENSOR_DTYPE_I64: return reinterpret_cast<const std::int64_t*>(t->bytes())[i];
    case TENSOR_DTYPE_I32: return reinterpret_cast<const std::int32_t*>(t->bytes())[i];
    case TENSOR_DTYPE_I16: return reinterpret_cast<const std::int16_t*>(t->bytes())[i];
    case TENSOR_DTYPE_I8: return reinterpret_cast<const std::int8_t*>(t->bytes())[i];
    case TENSOR_DTYPE_U64: return static_cast<std::int64_t>(reinterpret_cast<const std::uint64_t*>(t->bytes())[i]);
    case TENSOR_DTYPE_U32: return reinterpret_cast<const std::uint32_t*>(t->bytes())[i];
    case TENSOR_DTYPE_U16: return reinterpret_cast<const std::uint16_t*>(t->bytes())[i];
    default: return t->bytes()[i];
  }
}
// gather: inputs = [x (f32), indices (any int dtype, x's shape but along dim)], args = [dim].
// The host checked the shapes, not the index values: out of range is an INDEX error.
TensorStatus op_gather(TensorOpCall* c) {
  TENSOR_PLUGIN_GUARD(g_host, {
    RefTensor* a = ref(c->inputs[0]);
    RefTensor* idx = ref(c->inputs[1]);
    const auto dim = static_cast<std::uint32_t>(c->args[0]);
    TensorMeta out = idx->meta;
    out.dtype = a->meta.dtype;
    std::size_t outer = 1, inner = 1;
    for (std::uint32_t k = 0; k < dim; ++k) outer *= static_cast<std::size_t>(out.shape[k]);
    for (std::uint32_t k = dim + 1; k < out.rank; ++k) inner *= static_cast<std::size_t>(out.shape[k]);
    const auto len = static_cast<std::size_t>(out.shape[dim]);
    const std::int64_t src_len = a->meta.shape[dim];
    for (std::size_t i = 0, n = count(out); i < n; ++i) {
      const std::int64_t j = index_at(idx, i);
      if (j < 0 || j >= src_len) {
        const std::string msg = "[gather] index out of range for dim " + std::to_string(dim) + "; expected 0 <= index < " +
                                std::to_string(src_len) + "; got " + std::to_string(j);
        return g_host->set_error(TENSOR_STATUS_INDEX, msg.c_str());
      }
    }
    RefTensor* o = make(out);
    for (std::size_t p = 0; p < outer; ++p)
      for (std::size_t j = 0; j < len; ++j)
        for (std::size_t q = 0; q < inner; ++q) {
          const std::size_t i = (p * len + j) * inner + q;
          const auto s = static_cast<std::size_t>(index_at(idx, i));
          f32(o)[i] = f32(a)[(p * static_cast<std::size_t>(src_len) + s) * inner + q];
        }
    c->result = prim(o);
    return TENSOR_STATUS_OK;
  })
}
// conv2d: inputs = [x [N,C,H,W], w [O,C/g,KH,KW], bias [O] or NULL] (f32), args = convolution
// options: rank, stride[3], padding[3], dilation[3], padding_out[3], groups.
TensorStatus op_conv2d(TensorOpCall* c) {
  TENSOR_PLUGIN_GUARD(g_host, {
    RefTensor* x = ref(c->inputs[0]);
    RefTensor* w = ref(c->inputs[1]);
    RefTensor* bias = c->input_count > 2 && c->inputs[2] ? ref(c->inputs[2]) : nullptr;
    const std::int64_t* a = c->args;
    const std::int64_t sh = a[1], sw = a[2], ph = a[4], pw = a[5], dh = a[7], dw = a[8], groups = a[13];
    const std::int64_t n = x->meta.shape[0], ci = x->meta.shape[1], h = x->meta.shape[2], wd = x->meta.shape[3];
    const std::int64_t co = w->meta.shape[0], cg = w->meta.shape[1], kh = w->meta.shape[2], kw = w->meta.shape[3];
    TensorMeta out = x->meta;
    out.shape[1] = co;
    out.shape[2] = (h + 2 * ph - dh * (kh - 1) - 1) / sh + 1;
    out.shape[3] = (wd + 2 * pw - dw * (kw - 1) - 1) / sw + 1;
    RefTensor* o = make(out);
    const std::int64_t oh = out.shape[2], ow = out.shape[3], og = co / groups;
    (void)ci;
    for (std::int64_t b = 0; b < n; ++b)
      for (std::int64_t oc = 0; oc < co; ++oc)
        for (std::int64_t y = 0; y < oh; ++y)
          for (std::int64_t z = 0; z < ow; ++z) {
            double s = bias ? f32(bias)[oc] : 0.0;
            const std::int64_t g = oc / og;
            for (std::int64_t ic = 0; ic < cg; ++ic)
              for (std::int64_t i = 0; i < kh; ++i)
                for (std::int64_t j = 0; j < kw; ++j) {
                  const std::int64_t yy = y * sh - ph + i * dh, zz = z * sw - pw + j * dw;
                  if (yy < 0 || yy >= h || zz < 0 || zz >= wd) continue;
                  s += static_cast<double>(f32(x)[((b * x->meta.shape[1] + g * cg + ic) * h + yy) * wd + zz]) *
                       f32(w)[((oc * cg + ic) * kh + i) * kw + j];
                }
            f32(o)[((b * co + oc) * oh + y) * ow + z] = static_cast<float>(s);
          }
    c->result = prim(o);
    return TENSOR_STATUS_OK;
  })
}

// all_reduce (the Collective family; args = [ReduceOp]): the buffer is host memory, so the
// host's communicator reduces it where it lies (TensorHostApi::dist_all_reduce, ABI 1.2), in
// place when the host holds the only reference. f16/bf16 are not in op_dtypes: the host's
// staging widens them.
TensorStatus op_all_reduce(TensorOpCall* c) {
  if (g_host->struct_size < offsetof(TensorHostApi, dist_all_reduce) + sizeof(g_host->dist_all_reduce) ||
      !g_host->dist_all_reduce)
    return g_host->set_error(TENSOR_STATUS_UNSUPPORTED, "[all_reduce] the host offers no dist_all_reduce (ABI < 1.2)");
  TENSOR_PLUGIN_GUARD(g_host, {
    RefTensor* a = ref(c->inputs[0]);
    RefTensor* o = c->input_unique[0] && can_mut(c->inputs[0]) ? a : make(a->meta);
    if (o == a) retain(c->inputs[0]);
    const TensorStatus s = g_host->dist_all_reduce(&a->meta, a->bytes(), o->bytes(), static_cast<int32_t>(c->args[0]));
    if (s != TENSOR_STATUS_OK) {
      release(prim(o));
      return s;
    }
    c->result = prim(o);
    return TENSOR_STATUS_OK;
  })
}

// ---- the tables --------------------------------------------------------------------------

struct Tables {
  TensorOpFn ops[TENSOR_PLUGIN_OP_COUNT] = {};
  uint32_t dtypes[TENSOR_PLUGIN_OP_COUNT] = {};
  const char* names[TENSOR_PLUGIN_OP_COUNT] = {
#define REF_X(code, name, entry) entry,
      TENSOR_PLUGIN_OP_LIST(REF_X)
#undef REF_X
  };
  TensorPluginInfo info{};
};

// The dtypes dtype_usage stores: every float and int dtype and the one-byte bools.
constexpr uint32_t kEveryStoredDtype = TENSOR_DTYPE_BIT(TENSOR_DTYPE_BOOL_U32) - 1;

void put(Tables& t, unsigned op, TensorOpFn fn, uint32_t dtypes = TENSOR_DTYPE_BIT(TENSOR_DTYPE_F32)) {
  t.ops[op] = fn;
  t.dtypes[op] = dtypes;
}

const TensorFeature kFeatures[] = {{"kernels", "scalar f32; layout ops on every dtype"}, {nullptr, nullptr}};

Tables* build() {
  auto* t = new Tables;
  put(*t, TENSOR_OP_add, &op_add);
  put(*t, TENSOR_OP_sub, &op_sub);
  put(*t, TENSOR_OP_mul, &op_mul);
  put(*t, TENSOR_OP_div, &op_div);
  put(*t, TENSOR_OP_add_scalar, &op_add_scalar);
  put(*t, TENSOR_OP_mul_scalar, &op_mul_scalar);
  put(*t, TENSOR_OP_neg, &op_neg);
  put(*t, TENSOR_OP_relu, &op_relu);
  put(*t, TENSOR_OP_exp, &op_exp);
  put(*t, TENSOR_OP_sum, &op_sum);
  put(*t, TENSOR_OP_sum_dim, &op_sum_dim);
  put(*t, TENSOR_OP_zeros, &op_zeros);
  put(*t, TENSOR_OP_ones, &op_ones);
  put(*t, TENSOR_OP_full, &op_full);
  put(*t, TENSOR_OP_matmul, &op_matmul);
  put(*t, TENSOR_OP_reshape, &op_reshape, kEveryStoredDtype);
  put(*t, TENSOR_OP_expand, &op_expand, kEveryStoredDtype);
  put(*t, TENSOR_OP_permute, &op_permute, kEveryStoredDtype);
  put(*t, TENSOR_OP_flip, &op_flip, kEveryStoredDtype);
  put(*t, TENSOR_OP_swap_dims, &op_swap_dims, kEveryStoredDtype);
  put(*t, TENSOR_OP_slice, &op_slice, kEveryStoredDtype);
  put(*t, TENSOR_OP_cat, &op_cat, kEveryStoredDtype);
  put(*t, TENSOR_OP_gather, &op_gather);
  put(*t, TENSOR_OP_conv2d, &op_conv2d);
  put(*t, TENSOR_OP_all_reduce, &op_all_reduce,
      kEveryStoredDtype & ~(TENSOR_DTYPE_BIT(TENSOR_DTYPE_F16) | TENSOR_DTYPE_BIT(TENSOR_DTYPE_BF16) |
                            TENSOR_DTYPE_BIT(TENSOR_DTYPE_BOOL) | TENSOR_DTYPE_BIT(TENSOR_DTYPE_BOOL_U8)));

  TensorPluginInfo& i = t->info;
  i.struct_size = sizeof(TensorPluginInfo);
  i.abi_major = TENSOR_PLUGIN_ABI_MAJOR;
  i.abi_minor = TENSOR_PLUGIN_ABI_MINOR;
  i.name = REF_NAME;
  i.version = "0.1.0";
  i.vendor = "libtensor";
  i.op_count = TENSOR_PLUGIN_OP_COUNT;
  i.op_table_hash = TENSOR_PLUGIN_OP_TABLE_HASH;
  i.op_names = t->names;
  i.ops = t->ops;
  i.op_dtypes = t->dtypes;
  i.device_count = 1;
  i.device = TensorDeviceRows{sizeof(TensorDeviceRows), &device_info, &dtype_usage, &from_host, &to_host,
                              nullptr, nullptr, nullptr, nullptr, nullptr, nullptr};
  i.prim = TensorPrimRows{sizeof(TensorPrimRows), &retain, &release, &metadata, &can_mut};
  i.features = kFeatures;
  i.assign = &assign;
#ifdef REF_ABI_1_0  // a plugin built against ABI 1.0's header: its struct ends before `assign`
  i.abi_minor = 0;
  i.struct_size = offsetof(TensorPluginInfo, assign);
  i.assign = nullptr;
#endif
#ifdef REF_BAD_ABI
  i.abi_major = TENSOR_PLUGIN_ABI_MAJOR + 1;
#endif
#ifdef REF_SHORT_STRUCT
  i.struct_size = offsetof(TensorPluginInfo, op_count);
#endif
#ifdef REF_BAD_HASH
  // A plugin built against an op table whose op 55 took a third tensor.
  t->names[TENSOR_OP_add] = "add:Binary:3";
  i.op_table_hash ^= 1;
#endif
#ifdef REF_NULL_ENTRY
  i.prim.release = nullptr;
#endif
  return t;
}

}  // namespace

#ifdef REF_CLASH
// The same symbol as the host's tensor::load_backend(const std::string&) (the return type is not
// part of a function's mangled name): loaded RTLD_LOCAL, it must not interpose.
namespace tensor {
TENSOR_PLUGIN_EXPORT int load_backend(const std::string&);
int load_backend(const std::string&) { return 42; }
}  // namespace tensor
#endif

extern "C" {

TENSOR_PLUGIN_EXPORT int32_t tensor_plugin_score(void) {
#ifdef REF_SCORE0
  return 0;
#else
  return 1;
#endif
}

#ifdef REF_NO_INIT
// The init entry under another name: the host finds no tensor_plugin_init.
TENSOR_PLUGIN_EXPORT TensorStatus tensor_plugin_init_misspelt(const TensorHostApi* host, const TensorPluginInfo** out);
#define REF_INIT tensor_plugin_init_misspelt
#else
#define REF_INIT tensor_plugin_init
#endif
TENSOR_PLUGIN_EXPORT TensorStatus REF_INIT(const TensorHostApi* host, const TensorPluginInfo** out) {
  if (!host || host->abi_major != TENSOR_PLUGIN_ABI_MAJOR) return TENSOR_STATUS_UNSUPPORTED;
  g_host = host;
  TENSOR_PLUGIN_GUARD(host, {
    static const Tables* tables = build();
    *out = &tables->info;
    return TENSOR_STATUS_OK;
  })
}

}  // extern "C"
