// The Vulkan op entries: creation and transfer, views, and the shader families
// (elementwise, reductions, scans, matmul, indexing). Inputs were validated by
// Dispatch; entries trust shapes, dims and dtypes.
#include <fmt/format.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <future>
#include <map>
#include <mutex>
#include <type_traits>

#include "backends/vulkan/shaders/vk_codes.h"
#include "backends/vulkan/vk_features.hpp"
#include "backends/vulkan/vk_ops.hpp"
#include "backends/vulkan/vk_tensor.hpp"
#include "dispatch/element.hpp"
#include "dispatch/validate.hpp"
#include "tensor/error.hpp"

namespace tensor::vulkan {

bool VulkanTensor::is_contiguous() const {
  std::int64_t s = 1;
  for (std::size_t d = rank(); d-- > 0;) {
    if (shape_[d] == 1) continue;
    if (layout_.strides[d] != s) return false;
    s *= static_cast<std::int64_t>(shape_[d]);
  }
  return true;
}

namespace {

using dispatch::Prim;

VkRef as_vk(Prim&& p) { return dispatch::prim_cast<VulkanTensor>(std::move(p)); }

Context& ctx_of(DeviceId d) {
  Context* c = context(d.index_id);
  if (!c) throw DeviceError(DeviceError::Kind::Unavailable, fmt::format("[{}] no such device; expected a vulkan device; got vulkan:{}", dispatch::current_op_name(), d.index_id));
  c->ensure_init();
  return *c;
}

void check_storage_dtype(const Context& c, DType t, const char* op) {
  if (!c.dtype_usage(t).contains(DTypeUsage::Storage))
    throw DTypeError(fmt::format("[{}] dtype not supported on this device; expected a dtype vulkan:{} can store; got {} on vulkan:{}",
                                 op, c.id().index_id, dtype_name(t), c.id().index_id));
}

VkRef alloc(DeviceId dev, DType dt, const Shape& shape) {
  Context& c = ctx_of(dev);
  check_storage_dtype(c, dt, "vulkan");
  const std::size_t n = shape.num_elements();
  if (n > 0x7FFFFFFFull)
    throw ExecutionError(fmt::format("[{}] tensor too large for vulkan:{}; expected at most 2^31 - 1 elements; got {} "
                                     "(shape {})",
                                     dispatch::current_op_name(), dev.index_id, n, shape.to_string()));
  BufRef buf = c.allocate(n * dtype_size(dt));
  return VkRef::make(dt, shape, dev, std::move(buf), contiguous_layout(shape));
}

VkRef make_view(VkRef t, const Shape& shape, const VkLayout& l) {
  if (t->unique_ref()) {
    t->set_view(shape, l);
    return t;
  }
  return VkRef::make(t->dtype(), shape, t->device(), t->buffer(), l);
}

// One operand of a strided launch.
struct Operand {
  const Buffer* buf = nullptr;
  std::int64_t offset = 0;
  std::array<std::int64_t, kMaxRank> strides{};
};
Operand operand(const VulkanTensor& t, const Shape& out) {
  Operand o{t.buffer().get(), t.offset(), {}};
  for (std::size_t d = 0; d < t.rank(); ++d) o.strides[d] = t.shape()[d] == out[d] ? t.stride(d) : 0;
  return o;
}

struct Params {
  std::vector<std::uint32_t> w = std::vector<std::uint32_t>(P_WORDS, 0u);
  void shape(const Shape& s, std::size_t n) {
    w[P_N] = static_cast<std::uint32_t>(n);
    w[P_RANK] = static_cast<std::uint32_t>(s.rank());
    for (std::size_t d = 0; d < s.rank(); ++d) w[P_SHAPE + d] = static_cast<std::uint32_t>(s[d]);
  }
  void operand(int k, const Operand& o, std::size_t rank) {
    w[P_OPND + 9 * k] = static_cast<std::uint32_t>(o.offset);
    for (std::size_t d = 0; d < rank; ++d) w[P_OPND + 9 * k + 1 + d] = static_cast<std::uint32_t>(o.strides[d]);
  }
  void extra(int i, std::int64_t v) { w[P_EXTRA + i] = static_cast<std::uint32_t>(v); }
  void scalar(int word, std::uint64_t raw) {
    w[word] = static_cast<std::uint32_t>(raw);
    w[word + 1] = static_cast<std::uint32_t>(raw >> 32);
  }
};

// Whether a dispatch touching these dtypes needs the 64-bit (WIDE) shader variant.
bool wide(std::initializer_list<DType> ts) {
  for (DType t : ts)
    if (dtype_size(t) == 8) return true;
  return false;
}

void groups_for(std::size_t groups, std::uint32_t& gx, std::uint32_t& gy) {
  gx = static_cast<std::uint32_t>(std::min<std::size_t>(groups, 65535));
  gy = static_cast<std::uint32_t>((groups + gx - 1) / gx);
}

std::uint32_t code(DType t) { return static_cast<std::uint32_t>(t); }

// ---- elementwise -----------------------------------------------------------------

// Whether the operand's strides are the row-major strides of `shape` (size-1 dims
// ignored): then element i sits at offset + i.
bool dense(const Operand& o, const Shape& shape) {
  std::int64_t s = 1;
  for (std::size_t d = shape.rank(); d-- > 0;) {
    if (shape[d] == 1) continue;
    if (o.strides[d] != s) return false;
    s *= static_cast<std::int64_t>(shape[d]);
  }
  return true;
}

void launch_ew(int op, DType dta, DType dtb, DType dto, bool bscalar, const Shape& shape, const Operand& out,
               const Operand& a, const Operand* b, const Operand* c, std::uint64_t s0, std::uint64_t s1) {
  const std::size_t n = shape.num_elements();
  if (n == 0) return;
  Context& ctx = *out.buf->context();
  const bool contig = dense(out, shape) && dense(a, shape) && (!b || dense(*b, shape)) && (!c || dense(*c, shape));
  const std::vector<std::uint32_t> spec = {static_cast<std::uint32_t>(op), code(dta), code(dtb), code(dto),
                                           bscalar ? 1u : 0u, contig ? 1u : 0u};
  const Operand* ops[4] = {&out, &a, b, c};
  const DType dts[4] = {dto, dta, dtb, dta};
  const VkDeviceSize limit = ctx.max_binding();
  bool big = false;
  for (const Operand* o : ops) big = big || (o && o->buf->size() > limit);
  // f16 in, f16 out, on a device with f16 arithmetic: the 16-bit-storage variant.
  const bool f16_path = dta == DType::F16 && dtb == DType::F16 && dto == DType::F16 && !big && ctx.f16_arith() &&
                        (op == EW_ADD || op == EW_SUB || op == EW_MUL || op == EW_DIV || op == EW_COPY || op == EW_FILL);
  if (f16_path) {
    Params p;
    p.shape(shape, n);
    for (int k = 0; k < 3; ++k)
      if (ops[k]) p.operand(k, *ops[k], shape.rank());
    p.scalar(P_S0, s0);
    std::uint32_t gx, gy;
    groups_for((n + 255) / 256, gx, gy);
    ctx.dispatch(ShaderFamily::ElementwiseF16,
                 {static_cast<std::uint32_t>(op), bscalar ? 1u : 0u, contig ? 1u : 0u}, p.w,
                 {{a.buf, false}, {b ? b->buf : nullptr, false}, {nullptr, false}, {out.buf, true}}, gx, gy, 1, false);
    return;
  }
  if (!big || !contig) {  // (a non-contiguous big tensor is refused by Context::dispatch)
    Params p;
    p.shape(shape, n);
    for (int k = 0; k < 4; ++k)
      if (ops[k]) p.operand(k, *ops[k], shape.rank());
    p.scalar(P_S0, s0);
    p.scalar(P_S1, s1);
    std::uint32_t gx, gy;
    groups_for((n + 255) / 256, gx, gy);
    ctx.dispatch(ShaderFamily::Elementwise, spec, p.w,
                 {{a.buf, false}, {b ? b->buf : nullptr, false}, {c ? c->buf : nullptr, false}, {out.buf, true}}, gx, gy, 1,
                 wide({dta, dtb, dto}));
    return;
  }
  // Tensors beyond maxStorageBufferRange: contiguous operands are processed in
  // pieces, each operand bound from an aligned byte offset at or below its piece.
  const VkDeviceSize align = ctx.binding_align();
  const std::size_t piece = static_cast<std::size_t>((limit - 2 * align) / 8) / 256 * 256;
  for (std::size_t start = 0; start < n; start += piece) {
    const std::size_t len = std::min(piece, n - start);
    const Shape flat{len};
    Params p;
    p.shape(flat, len);
    std::vector<Binding> binds(4);
    for (int k = 0; k < 4; ++k) {
      if (!ops[k]) continue;
      const std::size_t es = dtype_size(dts[k]);
      const VkDeviceSize first = (static_cast<VkDeviceSize>(ops[k]->offset) + start) * es;
      const VkDeviceSize at = first / align * align;
      const VkDeviceSize bytes = std::min<VkDeviceSize>(ops[k]->buf->size() - at, (first - at) + len * es + 8);
      Operand local{ops[k]->buf, static_cast<std::int64_t>((first - at) / es), {}};
      local.strides[0] = 1;
      p.operand(k, local, 1);
      binds[k == 0 ? 3 : k - 1] = Binding{ops[k]->buf, k == 0, at, (bytes + 3) / 4 * 4};
    }
    p.scalar(P_S0, s0);
    p.scalar(P_S1, s1);
    std::uint32_t gx, gy;
    groups_for((len + 255) / 256, gx, gy);
    ctx.dispatch(ShaderFamily::Elementwise, spec, p.w, binds, gx, gy, 1, wide({dta, dtb, dto}));
  }
}

bool reusable(const VulkanTensor& t, const Shape& shape, DType dt) {
  return t.can_mut() && t.is_dense_from_zero() && t.shape() == shape && dtype_size(t.dtype()) == dtype_size(dt);
}
VkRef output_for(VkRef& a, VkRef* b, const Shape& shape, DType dt) {
  if (reusable(*a, shape, dt)) { a->set_dtype(dt); return a; }
  if (b && reusable(**b, shape, dt)) { (*b)->set_dtype(dt); return *b; }
  return alloc(a->device(), dt, shape);
}

Shape broadcast(const Shape& a, const Shape& b) {
  Shape out = a;
  for (std::size_t d = 0; d < a.rank(); ++d)
    if (a[d] == 1) out[d] = b[d];
  return out;
}

// A Scalar as the raw bit pattern of an element of `dt` (the CPU's scalar_as).
std::uint64_t scalar_raw(DType dt, Scalar s) {
  return dispatch::visit_dtype(dt, [&](auto tag) -> std::uint64_t {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool> || std::is_same_v<T, dispatch::BoolU32>) {
      return s.to_bool() ? 1u : 0u;
    } else if constexpr (dispatch::kIsHalf<T>) {
      return dispatch::convert_value<T>(s.to_double()).bits;
    } else if constexpr (std::is_same_v<T, float>) {
      return std::bit_cast<std::uint32_t>(dispatch::convert_value<float>(s.to_double()));
    } else if constexpr (std::is_same_v<T, double>) {
      return std::bit_cast<std::uint64_t>(s.to_double());
    } else {
      T v;
      if (s.is_float()) v = dispatch::convert_value<T>(s.to_double());
      else if (s.kind() == Scalar::Kind::UInt) v = dispatch::convert_value<T>(s.to_uint64());
      else v = dispatch::convert_value<T>(s.to_int64());
      return static_cast<std::uint64_t>(static_cast<std::make_unsigned_t<T>>(v));
    }
  });
}

// An op of `a` alone (unary math and the fused scalar ops), scalar parameters s0, s1.
Prim map_entry(int op, Prim pa, std::uint64_t s0, std::uint64_t s1) {
  VkRef a = as_vk(std::move(pa));
  const Shape s = a->shape();
  const DType dt = a->dtype();
  VkRef out = output_for(a, nullptr, s, dt);
  launch_ew(op, dt, dt, dt, false, s, operand(*out, s), operand(*a, s), nullptr, nullptr, s0, s1);
  return out;
}

template <int OP>
Prim unary_entry(Prim pa) {
  return map_entry(OP, std::move(pa), 0, 0);
}

// b's dtype is a's except for powi (an int exponent tensor).
template <int OP>
Prim binary_entry(Prim pa, Prim pb) {
  VkRef a = as_vk(std::move(pa));
  VkRef b = as_vk(std::move(pb));
  const Shape s = broadcast(a->shape(), b->shape());
  const DType dt = a->dtype(), dtb = b->dtype();
  VkRef out = output_for(a, &b, s, dt);
  const Operand ob = operand(*b, s);
  launch_ew(OP, dt, dtb, dt, false, s, operand(*out, s), operand(*a, s), &ob, nullptr, 0, 0);
  return out;
}

template <int OP>
Prim scalar_entry(Prim pa, Scalar sc) {
  VkRef a = as_vk(std::move(pa));
  const Shape s = a->shape();
  const DType dt = a->dtype();
  const std::uint64_t raw = scalar_raw(dt, sc);
  VkRef out = output_for(a, nullptr, s, dt);
  launch_ew(OP, dt, dt, dt, true, s, operand(*out, s), operand(*a, s), nullptr, nullptr, raw, 0);
  return out;
}

template <int OP>
Prim compare_entry(Prim pa, Prim pb, DType out_dt) {
  VkRef a = as_vk(std::move(pa));
  VkRef b = as_vk(std::move(pb));
  const Shape s = broadcast(a->shape(), b->shape());
  VkRef out = alloc(a->device(), out_dt, s);
  const Operand ob = operand(*b, s);
  launch_ew(OP, a->dtype(), a->dtype(), out_dt, false, s, operand(*out, s), operand(*a, s), &ob, nullptr, 0, 0);
  return out;
}

template <int OP>
Prim compare_scalar_entry(Prim pa, Scalar sc, DType out_dt) {
  VkRef a = as_vk(std::move(pa));
  const Shape s = a->shape();
  VkRef out = alloc(a->device(), out_dt, s);
  launch_ew(OP, a->dtype(), a->dtype(), out_dt, true, s, operand(*out, s), operand(*a, s), nullptr, nullptr,
            scalar_raw(a->dtype(), sc), 0);
  return out;
}

template <int OP>
Prim predicate_entry(Prim pa, DType out_dt) {
  return compare_scalar_entry<OP>(std::move(pa), Scalar(0), out_dt);
}

// ---- fused ops (one pass where dispatch/defaults.cpp composes several) ----------------

// A float parameter in the kernel's compute type (f32; f64 in the WIDE variant), as
// the CPU converts it (calc_t), not rounded to a half dtype.
std::uint64_t compute_scalar(DType dt, double v) {
  if (wide({dt})) return std::bit_cast<std::uint64_t>(v);
  return std::bit_cast<std::uint32_t>(static_cast<float>(v));
}

Prim leaky_relu_entry(Prim a, Scalar slope) {
  const DType dt = a->dtype();
  return map_entry(EW_LEAKY_RELU, std::move(a), compute_scalar(dt, slope.to_double()), 0);
}
Prim hard_sigmoid_entry(Prim a, Scalar alpha, Scalar beta) {
  const DType dt = a->dtype();
  return map_entry(EW_HARD_SIGMOID, std::move(a), compute_scalar(dt, alpha.to_double()), compute_scalar(dt, beta.to_double()));
}
// Bounds converted to the tensor's dtype (Dispatch saturated out-of-range int bounds).
Prim clamp_min_entry(Prim a, Scalar lo) {
  const DType dt = a->dtype();
  return map_entry(EW_CLAMP_MIN, std::move(a), scalar_raw(dt, lo), 0);
}
Prim clamp_max_entry(Prim a, Scalar hi) {
  const DType dt = a->dtype();
  return map_entry(EW_CLAMP_MAX, std::move(a), 0, scalar_raw(dt, hi));
}
Prim clamp_entry(Prim a, Scalar lo, Scalar hi) {
  const DType dt = a->dtype();
  return map_entry(EW_CLAMP, std::move(a), scalar_raw(dt, lo), scalar_raw(dt, hi));
}

// a ^ n: s1 the exponent as a compute float (float tensors), s0 as an int (int
// tensors; beyond +-2^30 every |a| >= 2 saturates or rounds to 0 alike, so it is
// clamped there keeping its parity).
Prim pow_scalar_launch(Prim a, double e, std::int64_t n) {
  const DType dt = a->dtype();
  constexpr std::int64_t kCap = std::int64_t{1} << 30;
  const std::int64_t c = n > kCap ? kCap + (n & 1) : n < -kCap ? -kCap - (n & 1) : n;
  return map_entry(EW_POW_SCALAR, std::move(a), static_cast<std::uint64_t>(c), compute_scalar(dt, e));
}
// The default's routing in one kernel: n = 1 is the tensor itself, ints square with
// wrapping at n = 2 and go through the saturating power otherwise; floats take the
// x * x / recip shortcuts.
// Float tensors: beyond 2^24 (f32 compute) or 2^53 (f64) the exponent cannot be odd
// as a compute float, so an odd n is a^(n-1) * a (n > 0) or a^(n+1) / a (n < 0),
// with n -+ 1 even however it rounds: the sign of -1, -0 and -inf is kept (as the
// default composition does).
Prim pow_int_scalar(Prim a, std::int64_t n) {
  const std::int64_t exact = std::int64_t{1} << (a->dtype() == DType::F64 ? 53 : 24);
  if (is_int(a->dtype()) || (n > -exact && n < exact) || (n & 1) == 0)
    return pow_scalar_launch(std::move(a), static_cast<double>(n), n);
  Prim base = a;
  const std::int64_t m = n > 0 ? n - 1 : n + 1;
  Prim even = pow_scalar_launch(std::move(a), static_cast<double>(m), m);
  return n > 0 ? binary_entry<EW_MUL>(std::move(even), std::move(base)) : binary_entry<EW_DIV>(std::move(even), std::move(base));
}
Prim powi_scalar_entry(Prim a, Scalar s) {
  const std::int64_t n = s.to_int64();
  if (n == 1) return a;  // as the default: a 64-bit int above 2^53 stays exact
  if (n == 2 && is_int(a->dtype())) return map_entry(EW_SQUARE, std::move(a), 0, 0);
  return pow_int_scalar(std::move(a), n);
}
Prim powi_scalar_impl_entry(Prim a, Scalar s) { return pow_int_scalar(std::move(a), s.to_int64()); }
// The exponent as the CPU's calc_t (f32 for halves, not rounded to the half).
Prim powf_scalar_impl_entry(Prim a, Scalar s) { return pow_scalar_launch(std::move(a), s.to_double(), 0); }
Prim powf_scalar_entry(Prim a, Scalar s) {
  const double e = s.to_double();
  if (std::isfinite(e) && std::trunc(e) == e && std::fabs(e) < 2147483648.0)
    return powi_scalar_entry(std::move(a), Scalar(static_cast<std::int64_t>(e)));
  return powf_scalar_impl_entry(std::move(a), s);
}

Prim mask_fill_entry(Prim pa, Prim pm, Scalar sc) {
  VkRef a = as_vk(std::move(pa));
  VkRef m = as_vk(std::move(pm));
  const Shape s = a->shape();
  const DType dt = a->dtype();
  VkRef out = output_for(a, nullptr, s, dt);
  const Operand om = operand(*m, s);
  launch_ew(EW_MASK_FILL, dt, m->dtype(), dt, false, s, operand(*out, s), operand(*a, s), &om, nullptr, 0,
            scalar_raw(dt, sc));
  return out;
}

Prim mask_where_entry(Prim pa, Prim pm, Prim pv) {
  VkRef a = as_vk(std::move(pa));
  VkRef m = as_vk(std::move(pm));
  VkRef v = as_vk(std::move(pv));
  const Shape s = a->shape();
  const DType dt = a->dtype();
  VkRef out = output_for(a, &v, s, dt);
  const Operand om = operand(*m, s), ov = operand(*v, s);
  launch_ew(EW_MASK_WHERE, dt, m->dtype(), dt, false, s, operand(*out, s), operand(*a, s), &om, &ov, 0, 0);
  return out;
}

// `t` converted to `to` (contiguous, fresh), or a strided copy when dtypes match.
VkRef convert(const VkRef& t, DType to) {
  const Shape s = t->shape();
  VkRef out = alloc(t->device(), to, s);
  launch_ew(EW_COPY, t->dtype(), t->dtype(), to, false, s, operand(*out, s), operand(*t, s), nullptr, nullptr, 0, 0);
  return out;
}
VkRef to_contiguous(VkRef t) {
  if (t->is_contiguous()) return t;
  return convert(t, t->dtype());
}

Prim cast_entry(Prim pa, DType to) {
  VkRef a = as_vk(std::move(pa));
  check_storage_dtype(a->ctx(), to, "cast");
  if (a->dtype() == to) return a;
  return convert(a, to);
}

// ---- creation and transfer -------------------------------------------------------------

Prim from_data_entry(TensorData data, DeviceId dev) {
  Context& c = ctx_of(dev);
  check_storage_dtype(c, data.dtype(), "from_data");
  VkRef t = alloc(dev, data.dtype(), data.shape());
  if (is_bool(data.dtype()) && dtype_size(data.dtype()) == 1) {
    for (std::byte& b : data.bytes()) b = b != std::byte{0} ? std::byte{1} : std::byte{0};  // kernels read 0/1
  }
  c.upload(t->buffer(), data.bytes().data(), data.bytes().size());
  return t;
}

Prim empty_entry(const Shape& shape, DeviceId dev, DType dt) {
  VkRef t = alloc(dev, dt, shape);
  if (is_bool(dt)) {  // reading an "uninitialised" bool tensor stays defined
    std::vector<std::byte> zeros(shape.num_elements() * dtype_size(dt));
    t->ctx().upload(t->buffer(), zeros.data(), zeros.size());
  }
  return t;
}

std::future<TensorData> into_data_entry(Prim p) {
  VkRef t = to_contiguous(as_vk(std::move(p)));
  Context* c = &t->ctx();
  const std::size_t bytes = t->shape().num_elements() * dtype_size(t->dtype());
  std::size_t off = static_cast<std::size_t>(t->offset()) * dtype_size(t->dtype());
  BufRef host = c->prepare_readback(t->buffer(), off, bytes);
  const std::uint64_t ticket = c->flush();
  return std::async(std::launch::deferred, [c, ticket, host, off, bytes, shape = t->shape(), dt = t->dtype()] {
    c->wait(ticket);
    std::vector<std::byte> out;
    try {
      out.resize(bytes);
    } catch (const std::bad_alloc&) {
      throw ExecutionError(fmt::format("[into_data] out of host memory; expected {} bytes on the host for a tensor of "
                                       "vulkan:{}; got an allocation failure",
                                       bytes, c->id().index_id));
    }
    if (bytes) std::memcpy(out.data(), host->mapped() + off, bytes);
    return TensorData(std::move(out), shape, dt);
  });
}

Prim to_device_entry(Prim p, DeviceId dev) {
  VkRef t = as_vk(std::move(p));
  TensorData d = into_data_entry(std::move(t)).get();
  return from_data_entry(std::move(d), dev);
}

// Host-generated random values (xoshiro256** per device), uploaded.
struct Rng {
  std::uint64_t s[4] = {0x9e3779b97f4a7c15ull, 0xbf58476d1ce4e5b9ull, 0x94d049bb133111ebull, 0x2545f4914f6cdd1dull};
  static std::uint64_t rotl(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  void seed(std::uint64_t v) {
    for (auto& w : s) {
      std::uint64_t z = (v += 0x9e3779b97f4a7c15ull);
      z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
      z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
      w = z ^ (z >> 31);
    }
  }
  std::uint64_t next() {
    const std::uint64_t r = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0]; s[3] ^= s[1]; s[1] ^= s[2]; s[0] ^= s[3]; s[2] ^= t; s[3] = rotl(s[3], 45);
    return r;
  }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
};
std::mutex g_rng_mu;
std::map<std::uint16_t, Rng> g_rngs;

Prim random_entry(const Shape& shape, const Distribution& dist, DeviceId dev, DType dt) {
  const std::size_t n = shape.num_elements();
  std::vector<double> v(n);
  {
    std::lock_guard<std::mutex> lock(g_rng_mu);
    Rng& r = g_rngs[dev.index_id];
    for (std::size_t i = 0; i < n; ++i) {
      switch (dist.kind) {
        case Distribution::Kind::Default: v[i] = r.uniform(); break;
        case Distribution::Kind::Uniform: v[i] = dist.a + (dist.b - dist.a) * r.uniform(); break;
        case Distribution::Kind::Bernoulli: v[i] = r.uniform() < dist.a ? 1.0 : 0.0; break;
        case Distribution::Kind::Normal: {
          const double u1 = 1.0 - r.uniform(), u2 = r.uniform();
          v[i] = dist.a + dist.b * std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
          break;
        }
      }
      if (is_int(dt) && dist.kind != Distribution::Kind::Bernoulli) v[i] = std::floor(v[i]);
    }
  }
  return from_data_entry(TensorData::from(v, shape).convert(dt), dev);
}

// ---- layout ---------------------------------------------------------------------------------

Prim reshape_entry(Prim p, const Shape& shape) {
  VkRef t = to_contiguous(as_vk(std::move(p)));
  VkLayout l = contiguous_layout(shape);
  l.offset = t->offset();
  return make_view(std::move(t), shape, l);
}

// The pure view ops: shape, strides and offset from dispatch/strided.hpp.
template <auto kView, class... Args>
Prim view_entry(Prim p, Args... args) {
  VkRef t = as_vk(std::move(p));
  dispatch::StridedView v = kView(t->shape(), t->layout(), args...);
  return make_view(std::move(t), v.shape, v.layout);
}

// In place when `a` is unique and contiguous, else into a contiguous copy of `a`.
Prim slice_assign_entry(Prim p, dispatch::DimSlices slices, Prim pv) {
  VkRef t = as_vk(std::move(p));
  VkRef v = as_vk(std::move(pv));
  if (!(t->can_mut() && t->is_contiguous())) t = convert(t, t->dtype());
  const dispatch::StridedView region = dispatch::slice_view(t->shape(), t->layout(), slices);
  if (region.shape.num_elements() == 0) return t;
  Operand dst{t->buffer().get(), region.layout.offset, region.layout.strides};
  launch_ew(EW_COPY, v->dtype(), v->dtype(), t->dtype(), false, region.shape, dst, operand(*v, region.shape), nullptr,
            nullptr, 0, 0);
  return t;
}

// ---- reductions and scans ----------------------------------------------------------------------

// The dtype partial sums/products are kept in between the two passes of a split
// reduction: the shader's accumulator (f32 / f64, 32- / 64-bit wrapping ints).
DType accumulator_dtype(DType dt) {
  if (is_float(dt)) return dt == DType::F64 ? DType::F64 : DType::F32;
  if (dtype_size(dt) == 8) return dt;
  return is_signed_int(dt) ? DType::I32 : DType::U32;
}

// Lines at least this long, when there are only a few of them, are reduced by many
// workgroups (a chunk each) and then a second pass, instead of one workgroup each.
// Software Vulkan (lavapipe: Mesa's llvmpipe compiler) stops any one invocation's
// loops after 65535 iterations in all and the result is silently short. Where one
// invocation walks a whole line, lines stay under kLoopSafe iterations on every device:
// line reductions of many long lines go to the column path (which splits them),
// scatter/select_assign walk their indices in chunks; scans and softmax rows that
// would need more raise on software devices (Context::software).
constexpr std::size_t kLoopSafe = 16384;
constexpr std::size_t kLineReduceMax = 64 * 2 * kLoopSafe;  // the line path: n / 64 per invocation
constexpr std::size_t kRowsMaxSoftware = 256 * kLoopSafe;   // rows.comp softmax: 3 passes of n / 256
constexpr std::size_t kScanMaxSoftware = 2 * kLoopSafe;     // scan.comp: n per invocation
constexpr std::size_t kSplitMin = 16384;

// Lines of `a` along `dim` one invocation walks whole: at most `max` on a software device.
void check_loop_limit(const VulkanTensor& a, const char* what, std::size_t max, std::size_t dim) {
  if (a.shape()[dim] > max && a.ctx().software())
    throw ExecutionError(fmt::format("[{}] {} too long for a software Vulkan device (its shader loops stop after 65535 "
                                     "iterations); expected at most {} elements along dim {}; got {}",
                                     dispatch::current_op_name(), what, max, dim, a.shape()[dim]));
}
constexpr std::size_t kSplitChunk = 4096;

// Column path (see use_column): below this many outputs a long line is split so that
// about this many invocations run, in chunks of at least kColChunkMin elements.
constexpr std::size_t kColFill = 16384;
constexpr std::size_t kColChunkMin = 256;
// No column-path invocation walks more than this many elements: llvmpipe (lavapipe)
// ends a shader loop after 65535 iterations (a 65535-long column lost an element,
// nested loops included).
constexpr std::size_t kColMaxLen = 16384;

bool arg_style(int op) { return op == RD_ARGMAX || op == RD_ARGMIN || op == RD_MAX_ABS; }
bool flag_op(int op) { return op == RD_ANY || op == RD_ALL; }

// One reduce dispatch (or several, for an input beyond maxStorageBufferRange).
// `mode`: what an arg-style op writes (RD_OUT_*); `x_out`: binding 3 (pair or index
// output); `pair_idx_in`: the indices of pairs_in values. `column`: the column mode,
// one invocation per output of `space` (`count` of them) and per chunk.
void launch_reduce(Context& c, int op, DType dta, DType dto, const Shape& space, std::size_t count, const Operand& out,
                   const Operand& in, std::size_t n, std::int64_t stride, std::size_t chunk, bool pairs_in,
                   const Buffer* pair_idx_in, int mode, const Buffer* x_out, bool column = false) {
  const VkDeviceSize limit = c.max_binding();
  const std::size_t es = dtype_size(dta);
  // Chunked passes over an input beyond maxStorageBufferRange: pieces of whole
  // chunks, each binding its part of the input from an aligned offset.
  const bool pieces = !column && chunk > 0 && in.buf->size() > limit && stride > 0;
  const std::size_t per_piece =
      pieces ? static_cast<std::size_t>((limit - 2 * c.binding_align()) / (chunk * static_cast<std::size_t>(stride) * es))
             : count;
  // Arg-style ops store a 64-bit index as two words from the narrow variant too.
  const bool wide_dispatch = arg_style(op) ? wide({dta}) : wide({dta, dto});
  for (std::size_t g0 = 0; g0 < count; g0 += per_piece) {
    const std::size_t groups = std::min(per_piece, count - g0);
    Params p;
    p.shape(space, groups);
    p.operand(0, out, space.rank());
    Binding in_bind{in.buf, false};
    if (pieces) {
      const VkDeviceSize first = (static_cast<VkDeviceSize>(in.offset) + g0 * chunk * static_cast<std::size_t>(stride)) * es;
      const VkDeviceSize at = first / c.binding_align() * c.binding_align();
      const VkDeviceSize span = (first - at) + groups * chunk * static_cast<std::size_t>(stride) * es + 8;
      in_bind.offset = at;
      in_bind.range = std::min<VkDeviceSize>(in.buf->size() - at, (span + 3) / 4 * 4);
      p.operand(1, Operand{in.buf, static_cast<std::int64_t>((first - at) / es), {}}, space.rank());
    } else {
      p.operand(1, in, space.rank());
    }
    p.extra(0, static_cast<std::int64_t>(n));
    p.extra(1, stride);
    p.extra(2, static_cast<std::int64_t>(chunk));
    p.extra(3, pairs_in ? 1 : 0);
    p.extra(4, mode);
    p.extra(5, static_cast<std::int64_t>(g0));
    p.extra(6, column ? 1 : 0);
    const std::size_t parts = chunk > 0 ? (n + chunk - 1) / chunk : 1;
    std::uint32_t gx, gy;
    groups_for(column ? (groups * parts + 63) / 64 : groups, gx, gy);
    c.dispatch(ShaderFamily::Reduce, {static_cast<std::uint32_t>(op), code(dta), code(dto)}, p.w,
               {in_bind, {pair_idx_in, false}, {x_out, true}, {out.buf, true}}, gx, gy, 1, wide_dispatch);
  }
}

// What a reduction along a dim produced: the reduced values (sum/prod/mean, any/all,
// the extremum of an arg-style op) and/or the indices of arg-style ops.
struct Reduced {
  VkRef value, index;
};

// Line path or column path for reducing `a` along `dim` into `count` outputs.
// The line path (one workgroup of 64 per output) has a workgroup's invocations read
// one line at the reduced dim's stride sd: adjacent addresses only when |sd| == 1.
// The column path (one invocation per output, walking its line alone) has adjacent
// invocations read at the input stride si of the output's innermost dim (the last
// dim other than `dim` of size > 1): adjacent addresses when |si| == 1. So the column
// path is taken when |si| < |sd|, i.e. the reduced dim is not the innermost one of
// the layout (transposed and flipped layouts by their actual strides; a broadcast
// reduced dim, sd == 0, stays on the line path). A single output (no such dim) stays
// on the line path, which splits a long line over many workgroups. The column path
// has only `count` invocations, so with fewer than kColFill outputs it splits lines
// of at least 2 * kColChunkMin elements into chunks (about kColFill invocations in
// all, a second column pass folding the partials); with few outputs and short lines
// there is little work either way. Lines longer than kColMaxLen are always split
// (reduce_lines), or go to the line path where they cannot be (int means).
// TENSOR_VK_DISABLE_COLUMN_REDUCE=1 keeps every per-dim reduction on the line path
// (for comparison in benchmarks).
bool use_column(const VulkanTensor& a, std::size_t dim, std::size_t count) {
  static const bool disabled = env_flag("TENSOR_VK_DISABLE_COLUMN_REDUCE");
  if (disabled || count < 2) return false;
  for (std::size_t d = a.rank(); d-- > 0;) {
    if (d == dim || a.shape()[d] == 1) continue;
    const std::int64_t si = a.stride(d), sd = a.stride(dim);
    return (si < 0 ? -si : si) < (sd < 0 ? -sd : sd);
  }
  return false;
}

// Reduces every line of `a` along `dim` (kept as size 1). `out_dt`: the result dtype
// of sum/prod/mean (the input's) and any/all (the bool dtype), the index dtype of an
// arg-style op. `mode` (arg-style): RD_OUT_INDEX, RD_OUT_VALUE or RD_OUT_BOTH.
Reduced reduce_lines(VkRef a, std::size_t dim, int op, DType out_dt, int mode) {
  Shape out_shape = a->shape();
  const std::size_t n = out_shape[dim];
  out_shape[dim] = 1;
  const DType dt = a->dtype();
  const bool arg = arg_style(op);
  const bool flags = flag_op(op);
  Reduced r;
  if (!arg || mode != RD_OUT_INDEX) r.value = alloc(a->device(), arg ? dt : out_dt, out_shape);
  if (arg && mode != RD_OUT_VALUE) r.index = alloc(a->device(), out_dt, out_shape);
  const std::size_t count = out_shape.num_elements();
  if (count == 0) return r;
  // o: the index (RD_OUT_INDEX) or the value; x: the index beside a value.
  VulkanTensor& o = r.value ? *r.value : *r.index;
  const Buffer* x = arg && mode == RD_OUT_BOTH ? r.index->buffer().get() : nullptr;
  const DType dto = arg ? out_dt : o.dtype();
  Context& c = a->ctx();
  const Operand oa{a->buffer().get(), a->offset(), a->layout().strides};
  bool column = use_column(*a, dim, count) || (count > 1 && n > kLineReduceMax);
  // Int means are not split: their exact 64-bit sum does not survive the partials.
  const bool splittable = op != RD_MEAN || is_float(dt);
  std::size_t chunk = 0;
  if (column) {
    // Chunks per line: none longer than kColMaxLen; with few outputs, about kColFill
    // invocations of at least kColChunkMin elements. An int mean that would need
    // chunks, or a line too long for the second pass, goes to the line path.
    std::size_t parts = (n + kColMaxLen - 1) / kColMaxLen;
    if (splittable && count < kColFill) parts = std::max(parts, std::min((kColFill + count - 1) / count, n / kColChunkMin));
    if (parts >= 2 && (!splittable || parts > kColMaxLen)) column = false;
    else if (parts >= 2) chunk = (n + parts - 1) / parts;
  }
  if (!column && count == 1 && n >= kSplitMin && splittable) chunk = kSplitChunk;
  if (chunk == 0 && n > kLineReduceMax && c.software())
    throw ExecutionError(fmt::format("[{}] reduction lines too long for a software Vulkan device; expected at most {} "
                                     "elements per line for this reduction (an unsplittable integer mean); got {}",
                                     dispatch::current_op_name(), kLineReduceMax, n));
  if (chunk > 0) {
    const bool mean = op == RD_MEAN;  // float mean: split sum, then divide in the accumulator dtype
    // Pass 1: one workgroup (line path) or invocation (column path) per chunk of a line
    // into partials [groups(, count)]; pass 2 reduces them (a line, or columns).
    const std::size_t groups = (n + chunk - 1) / chunk;
    const Shape ps = column ? Shape{groups, count} : Shape{groups};
    const Shape one{1};
    const Shape& space2 = column ? out_shape : one;
    const DType pdt = arg ? dt : flags ? DType::U32 : accumulator_dtype(dt);
    VkRef part = alloc(a->device(), pdt, ps);
    VkRef part_idx = arg ? alloc(a->device(), DType::U32, ps) : VkRef();
    const int op1 = mean ? RD_SUM : op;
    launch_reduce(c, op1, dt, arg ? out_dt : pdt, column ? out_shape : ps, column ? count : groups, operand(*part, ps), oa, n,
                  a->stride(dim), chunk, false, nullptr, arg ? RD_OUT_PAIRS : RD_OUT_INDEX,
                  arg ? part_idx->buffer().get() : nullptr, column);
    // Pass 2 reads partial (k, i) for output i: column i of `part` (row-major over out_shape).
    Operand op_in{part->buffer().get(), 0, {}};
    std::int64_t s_in = 1;
    for (std::size_t d = out_shape.rank(); column && d-- > 0; s_in *= static_cast<std::int64_t>(out_shape[d]))
      op_in.strides[d] = s_in;
    const std::int64_t s2 = column ? static_cast<std::int64_t>(count) : 1;
    const std::size_t count2 = column ? count : 1;
    if (arg || flags) {
      launch_reduce(c, op, pdt, dto, space2, count2, column ? operand(o, out_shape) : Operand{o.buffer().get(), 0, {}}, op_in,
                    groups, s2, column ? 0 : groups, arg, arg ? part_idx->buffer().get() : nullptr, mode, x, column);
      return r;
    }
    // Sum/prod of the partials in the accumulator dtype, then narrowed (ints wrap).
    VkRef total = pdt == out_dt ? r.value : alloc(a->device(), pdt, out_shape);
    launch_reduce(c, op1, pdt, pdt, space2, count2, column ? operand(*total, out_shape) : Operand{total->buffer().get(), 0, {}},
                  op_in, groups, s2, column ? 0 : groups, false, nullptr, RD_OUT_INDEX, nullptr, column);
    if (mean)
      launch_ew(EW_DIV, pdt, pdt, pdt, true, out_shape, operand(*total, out_shape), operand(*total, out_shape), nullptr, nullptr,
                scalar_raw(pdt, Scalar(static_cast<double>(n))), 0);
    if (total.get() == r.value.get()) return r;
    launch_ew(EW_COPY, pdt, pdt, out_dt, false, out_shape, operand(*r.value, out_shape), operand(*total, out_shape), nullptr,
              nullptr, 0, 0);
    return r;
  }
  launch_reduce(c, op, dt, dto, out_shape, count, operand(o, out_shape), oa, n, a->stride(dim), 0, false, nullptr, mode, x,
                column);
  return r;
}

VkRef reduce_dim(VkRef a, std::size_t dim, int op, DType out_dt) {
  Reduced r = reduce_lines(std::move(a), dim, op, out_dt, RD_OUT_INDEX);
  return r.value ? std::move(r.value) : std::move(r.index);
}

// The whole tensor as one line: a contiguous flat view (a copy when it is strided).
VkRef flat_view(VkRef a) {
  a = to_contiguous(std::move(a));
  const Shape flat{a->shape().num_elements()};
  VkLayout l = contiguous_layout(flat);
  l.offset = a->offset();
  return make_view(std::move(a), flat, l);
}

template <int OP>
Prim reduce_dim_entry(Prim p, std::size_t dim) {
  VkRef a = as_vk(std::move(p));
  const DType dt = a->dtype();
  return reduce_dim(std::move(a), dim, OP, dt);
}

template <int OP>
Prim reduce_all_entry(Prim p) {
  VkRef a = flat_view(as_vk(std::move(p)));
  const DType dt = a->dtype();
  return reduce_dim(std::move(a), 0, OP, dt);
}

template <int OP>
Prim arg_entry(Prim p, std::size_t dim, DType out_dt) {
  return reduce_dim(as_vk(std::move(p)), dim, OP, out_dt);
}

// max / min / max_abs: the value of the arg-style reduction (ties: the first; NaN wins).
template <int OP>
Prim extremum_dim_entry(Prim p, std::size_t dim) {
  return reduce_lines(as_vk(std::move(p)), dim, OP, DType::U32, RD_OUT_VALUE).value;
}
template <int OP>
Prim extremum_all_entry(Prim p) {
  return reduce_lines(flat_view(as_vk(std::move(p))), 0, OP, DType::U32, RD_OUT_VALUE).value;
}
template <int OP>
dispatch::PrimPair extremum_wi_entry(Prim p, std::size_t dim, DType out_dt) {
  Reduced r = reduce_lines(as_vk(std::move(p)), dim, OP, out_dt, RD_OUT_BOTH);
  return {Prim(std::move(r.value)), Prim(std::move(r.index))};
}

// any / all (nonzero; NaN counts) into the bool dtype.
template <int OP>
Prim any_all_entry(Prim p, DType out_dt) {
  return reduce_dim(flat_view(as_vk(std::move(p))), 0, OP, out_dt);
}
template <int OP>
Prim any_all_dim_entry(Prim p, std::size_t dim, DType out_dt) {
  return reduce_dim(as_vk(std::move(p)), dim, OP, out_dt);
}

template <int OP>
Prim scan_entry(Prim p, std::size_t dim) {
  VkRef a = as_vk(std::move(p));
  const Shape shape = a->shape();
  VkRef out = alloc(a->device(), a->dtype(), shape);
  Shape lines = shape;
  lines[dim] = 1;
  const std::size_t count = lines.num_elements();
  if (count == 0 || shape[dim] == 0) return out;
  check_loop_limit(*a, "cumulative scan line", kScanMaxSoftware, dim);
  Params pr;
  pr.shape(lines, count);
  Operand oo{out->buffer().get(), 0, out->layout().strides};
  Operand oa{a->buffer().get(), a->offset(), a->layout().strides};
  pr.operand(0, oo, lines.rank());
  pr.operand(1, oa, lines.rank());
  pr.extra(0, static_cast<std::int64_t>(shape[dim]));
  pr.extra(1, a->stride(dim));
  pr.extra(2, out->stride(dim));
  std::uint32_t gx, gy;
  groups_for((count + 63) / 64, gx, gy);
  a->ctx().dispatch(ShaderFamily::Scan, {static_cast<std::uint32_t>(OP), code(a->dtype())}, pr.w,
                    {{a->buffer().get(), false}, {nullptr, false}, {nullptr, false}, {out->buffer().get(), true}}, gx, gy, 1,
                    wide({a->dtype()}));
  return out;
}

// ---- matmul -------------------------------------------------------------------------------------

// ---- cooperative-matrix f16 matmul (matmul_coop.comp; gating in vk_features.hpp) ----

std::size_t up16(std::size_t x) { return (x + kCoopTile - 1) / kCoopTile * kCoopTile; }

// Dense f16 [nb, rp, cp] copy of the [..., r, c] operand `t` (batch dims broadcast to
// `batch`), zeros in the padding.
VkRef padded_f16(const VulkanTensor& t, const Shape& batch, std::size_t rp, std::size_t cp) {
  const std::size_t rank = t.rank(), nb = batch.num_elements();
  const std::size_t r = t.shape()[rank - 2], c = t.shape()[rank - 1];
  VkRef p = alloc(t.device(), DType::F16, Shape{nb, rp, cp});
  if (rp != r || cp != c) {
    const Shape flat{nb * rp * cp};
    launch_ew(EW_FILL, DType::F16, DType::F16, DType::F16, false, flat, operand(*p, flat), operand(*p, flat), nullptr, nullptr,
              0, 0);
  }
  Shape s = batch;
  s.push_back(r);
  s.push_back(c);
  Operand dst{p->buffer().get(), 0, {}}, src{t.buffer().get(), t.offset(), {}};
  std::int64_t step = static_cast<std::int64_t>(rp * cp);
  for (std::size_t d = batch.rank(); d-- > 0;) {
    dst.strides[d] = step;
    step *= static_cast<std::int64_t>(batch[d]);
    src.strides[d] = t.shape()[d] == batch[d] ? t.stride(d) : 0;
  }
  dst.strides[rank - 2] = static_cast<std::int64_t>(cp);
  dst.strides[rank - 1] = 1;
  src.strides[rank - 2] = t.stride(rank - 2);
  src.strides[rank - 1] = t.stride(rank - 1);
  launch_ew(EW_COPY, DType::F16, DType::F16, DType::F16, false, s, dst, src, nullptr, nullptr, 0, 0);
  return p;
}

// f16 x f16 -> f16 through cooperative matrices: pad, multiply with f32 accumulation,
// round the [M, N] part to f16 once (the same rounding as the tiled path).
VkRef matmul_coop(const VulkanTensor& a, const VulkanTensor& b, const Shape& out_shape) {
  const std::size_t r = out_shape.rank();
  const std::size_t M = a.shape()[r - 2], K = a.shape()[r - 1], N = b.shape()[r - 1];
  const std::size_t Mp = up16(M), Kp = up16(K), Np = up16(N);
  Shape batch;
  for (std::size_t d = 0; d + 2 < r; ++d) batch.push_back(out_shape[d]);
  const std::size_t nb = batch.num_elements();
  VkRef pa = padded_f16(a, batch, Mp, Kp);
  VkRef pb = padded_f16(b, batch, Kp, Np);
  VkRef c32 = alloc(a.device(), DType::F32, Shape{nb, Mp, Np});
  std::vector<std::uint32_t> w(P_WORDS, 0u);
  w[0] = static_cast<std::uint32_t>(Mp);
  w[1] = static_cast<std::uint32_t>(Np);
  w[2] = static_cast<std::uint32_t>(Kp);
  w[3] = static_cast<std::uint32_t>(Mp * Kp);
  w[4] = static_cast<std::uint32_t>(Kp * Np);
  w[5] = static_cast<std::uint32_t>(Mp * Np);
  a.ctx().dispatch(ShaderFamily::MatmulCoop, {}, w,
                   {{pa->buffer().get(), false}, {pb->buffer().get(), false}, {nullptr, false}, {c32->buffer().get(), true}},
                   static_cast<std::uint32_t>((Np + 31) / 32), static_cast<std::uint32_t>((Mp + 31) / 32),
                   static_cast<std::uint32_t>(nb));
  VkRef out = alloc(a.device(), DType::F16, out_shape);
  Operand src{c32->buffer().get(), 0, {}};
  std::int64_t step = static_cast<std::int64_t>(Mp * Np);
  for (std::size_t d = batch.rank(); d-- > 0;) {
    src.strides[d] = step;
    step *= static_cast<std::int64_t>(batch[d]);
  }
  src.strides[r - 2] = static_cast<std::int64_t>(Np);
  src.strides[r - 1] = 1;
  launch_ew(EW_COPY, DType::F32, DType::F32, DType::F16, false, out_shape, operand(*out, out_shape), src, nullptr, nullptr,
            0, 0);
  return out;
}

VkRef matmul_tiled(VkRef a, VkRef b);

// First use of the cooperative-matrix path: a small f16 matmul with edge tiles on
// both paths; a mismatch (or any failure) switches the path off for the process and
// records why (tensorctl info shows it).
void coop_self_test(Context& c) {
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  if (c.coop_state() != CoopState::Untested) return;
  const std::size_t M = 40, K = 56, N = 24;
  std::vector<float> av(M * K), bv(K * N);
  for (std::size_t i = 0; i < av.size(); ++i) av[i] = static_cast<float>(static_cast<int>((i * 7 + 3) % 17) - 8) / 8.0f;
  for (std::size_t i = 0; i < bv.size(); ++i) bv[i] = static_cast<float>(static_cast<int>((i * 5 + 1) % 13) - 6) / 4.0f;
  try {
    VkRef a = as_vk(from_data_entry(TensorData::from(av, Shape{M, K}).convert(DType::F16), c.id()));
    VkRef b = as_vk(from_data_entry(TensorData::from(bv, Shape{K, N}).convert(DType::F16), c.id()));
    const std::vector<float> want =
        into_data_entry(matmul_tiled(a, b)).get().convert(DType::F32).to_vec<float>();
    const std::vector<float> got =
        into_data_entry(matmul_coop(*a, *b, Shape{M, N})).get().convert(DType::F32).to_vec<float>();
    for (std::size_t i = 0; i < want.size(); ++i) {
      // Products of k/8 and k/4 sum exactly in f32: both paths must agree to the last bit.
      if (!(got[i] == want[i])) {
        c.set_coop_state(CoopState::Failed, fmt::format("self-test mismatch at ({}, {}): coopmat {} vs tiled {}; disabled",
                                                        i / N, i % N, got[i], want[i]));
        return;
      }
    }
    c.set_coop_state(CoopState::Live, c.coop_reason() + "; self-test passed");
  } catch (const std::exception& e) {
    c.set_coop_state(CoopState::Failed, fmt::format("self-test failed: {}; disabled", e.what()));
  }
}

bool coop_ready(Context& c) {
  if (c.coop_state() == CoopState::Untested) coop_self_test(c);
  return c.coop_state() == CoopState::Live && c.coop_enabled();
}

Prim matmul_entry(Prim pa, Prim pb) {
  VkRef a = as_vk(std::move(pa));
  VkRef b = as_vk(std::move(pb));
  if (a->dtype() == DType::F16 && a->shape().num_elements() && b->shape().num_elements() && coop_ready(a->ctx())) {
    const std::size_t r = a->rank();
    Shape out_shape = a->shape();
    for (std::size_t d = 0; d + 2 < r; ++d) out_shape[d] = a->shape()[d] == 1 ? b->shape()[d] : a->shape()[d];
    out_shape[r - 1] = b->shape()[r - 1];
    if (out_shape.num_elements() && out_shape.num_elements() / (out_shape[r - 1] * out_shape[r - 2]) <= 65535)
      return matmul_coop(*a, *b, out_shape);
  }
  return matmul_tiled(std::move(a), std::move(b));
}

VkRef matmul_tiled(VkRef a, VkRef b) {
  const DType dt = a->dtype();
  const std::size_t r = a->rank();
  const std::size_t M = a->shape()[r - 2], K = a->shape()[r - 1], N = b->shape()[r - 1];
  Shape out_shape = a->shape();
  for (std::size_t d = 0; d + 2 < r; ++d) out_shape[d] = a->shape()[d] == 1 ? b->shape()[d] : a->shape()[d];
  out_shape[r - 1] = N;
  VkRef out = alloc(a->device(), dt, out_shape);
  if (out_shape.num_elements() == 0) return out;
  if (K == 0) {
    std::vector<std::byte> zeros(out_shape.num_elements() * dtype_size(dt));
    out->ctx().upload(out->buffer(), zeros.data(), zeros.size());
    return out;
  }
  Shape batch;
  for (std::size_t d = 0; d + 2 < r; ++d) batch.push_back(out_shape[d]);
  const std::size_t nb = batch.num_elements();
  Operand oo{out->buffer().get(), 0, {}}, oa{a->buffer().get(), a->offset(), {}}, ob{b->buffer().get(), b->offset(), {}};
  for (std::size_t d = 0; d + 2 < r; ++d) {
    oo.strides[d] = out->stride(d);
    oa.strides[d] = a->shape()[d] == batch[d] ? a->stride(d) : 0;
    ob.strides[d] = b->shape()[d] == batch[d] ? b->stride(d) : 0;
  }
  for (std::size_t base = 0; base < nb; base += 65535) {
    Params p;
    p.shape(batch, nb);
    p.operand(0, oo, batch.rank());
    p.operand(1, oa, batch.rank());
    p.operand(2, ob, batch.rank());
    p.extra(0, static_cast<std::int64_t>(M));
    p.extra(1, static_cast<std::int64_t>(N));
    p.extra(2, static_cast<std::int64_t>(K));
    p.extra(3, a->stride(r - 2));
    p.extra(4, a->stride(r - 1));
    p.extra(5, b->stride(r - 2));
    p.extra(6, b->stride(r - 1));
    p.extra(7, static_cast<std::int64_t>(N));
    p.extra(8, static_cast<std::int64_t>(base));
    const auto gz = static_cast<std::uint32_t>(std::min<std::size_t>(65535, nb - base));
    a->ctx().dispatch(ShaderFamily::Matmul, {code(dt)}, p.w,
                      {{a->buffer().get(), false}, {b->buffer().get(), false}, {nullptr, false}, {out->buffer().get(), true}},
                      static_cast<std::uint32_t>((N + 63) / 64), static_cast<std::uint32_t>((M + 63) / 64), gz, wide({dt}));
  }
  return out;
}

// ---- indexing -----------------------------------------------------------------------------------

// `check`: the IndexError text for an index outside [0, limit) ("; got <index>" follows).
void launch_index(int op, DType dt, DType idx_dt, const Shape& space, std::size_t count, const Operand& out,
                  const Operand& src, const Operand& idx, std::size_t rank, std::initializer_list<std::int64_t> extra,
                  const std::string& check) {
  if (count == 0) return;
  Params p;
  p.shape(space, count);
  p.operand(0, out, rank);
  p.operand(1, src, rank);
  p.operand(2, idx, rank);
  int i = 0;
  for (std::int64_t e : extra) p.extra(i++, e);
  std::uint32_t gx, gy;
  groups_for((count + 63) / 64, gx, gy);
  out.buf->context()->dispatch(ShaderFamily::Index, {static_cast<std::uint32_t>(op), code(dt), code(idx_dt)}, p.w,
                               {{src.buf, false}, {idx.buf, false}, {nullptr, false}, {out.buf, true}}, gx, gy, 1,
                               wide({dt, idx_dt}), &check);
}

std::string index_check(const char* op, std::size_t dim, std::size_t size) {
  // The CPU backend's message (backends/cpu/index.cpp); the shader supplies the index.
  return fmt::format("[{}] index out of range for dim {}; expected 0 <= index < {}", op, dim, size);
}

Prim gather_entry(Prim pa, std::size_t dim, Prim pi) {
  VkRef a = as_vk(std::move(pa));
  VkRef idx = as_vk(std::move(pi));
  const Shape s = idx->shape();
  VkRef out = alloc(a->device(), a->dtype(), s);
  Operand src{a->buffer().get(), a->offset(), a->layout().strides};
  src.strides[dim] = 0;
  launch_index(IX_GATHER, a->dtype(), idx->dtype(), s, s.num_elements(), operand(*out, s), src, operand(*idx, s), s.rank(),
               {static_cast<std::int64_t>(dim), static_cast<std::int64_t>(a->shape()[dim]), a->stride(dim)},
               index_check("gather", dim, a->shape()[dim]));
  return out;
}

Prim select_entry(Prim pa, std::size_t dim, Prim pi) {
  VkRef a = as_vk(std::move(pa));
  VkRef idx = as_vk(std::move(pi));
  Shape s = a->shape();
  s[dim] = idx->shape()[0];
  if (s.num_elements() == 0 && idx->shape()[0] != 0) {
    // No invocation runs for an empty result, so the shader cannot check the
    // indices: check them here, as the cpu does.
    const std::vector<std::int64_t> v = into_data_entry(idx).get().convert(DType::I64).to_vec<std::int64_t>();
    for (std::int64_t i : v)
      if (i < 0 || static_cast<std::uint64_t>(i) >= a->shape()[dim])
        throw IndexError(fmt::format("{}; got {}", index_check("select", dim, a->shape()[dim]), i));
  }
  VkRef out = alloc(a->device(), a->dtype(), s);
  Operand src{a->buffer().get(), a->offset(), a->layout().strides};
  src.strides[dim] = 0;
  Operand oi{idx->buffer().get(), idx->offset(), {}};
  oi.strides[0] = idx->stride(0);
  launch_index(IX_SELECT, a->dtype(), idx->dtype(), s, s.num_elements(), operand(*out, s), src, oi, s.rank(),
               {static_cast<std::int64_t>(dim), static_cast<std::int64_t>(a->shape()[dim]), a->stride(dim)},
               index_check("select", dim, a->shape()[dim]));
  return out;
}

// Accumulating writes go into a unique dense `a` or a fresh contiguous copy of it.
VkRef writable_copy(VkRef a) {
  if (a->can_mut() && a->is_dense_from_zero()) return a;
  return convert(a, a->dtype());
}

int upd_code(IndexingUpdateOp u) {
  switch (u) {
    case IndexingUpdateOp::Assign: return UPD_ASSIGN;
    case IndexingUpdateOp::Add: return UPD_ADD;
    case IndexingUpdateOp::Mul: return UPD_MUL;
    case IndexingUpdateOp::Min: return UPD_MIN;
    case IndexingUpdateOp::Max: return UPD_MAX;
  }
  throw Error(fmt::format("[scatter] unknown update rule {}", static_cast<int>(u)));
}

// out = a; out[p with p[dim] = idx[p]] upd= v[p] for every p of idx, in order along dim
// (one invocation per line, see index.comp).
Prim scatter_impl(const char* op, Prim pa, std::size_t dim, Prim pi, Prim pv, int upd) {
  VkRef out = writable_copy(as_vk(std::move(pa)));
  VkRef idx = as_vk(std::move(pi));
  VkRef v = as_vk(std::move(pv));
  Shape lines = idx->shape();
  const std::size_t len = lines[dim];
  lines[dim] = 1;
  if (len == 0) return out;
  Operand oo{out->buffer().get(), 0, out->layout().strides};
  // In chunks of kLoopSafe indices, in order (each dispatch sees the previous one's writes).
  for (std::size_t k0 = 0; k0 < len; k0 += kLoopSafe) {
    const auto k = static_cast<std::int64_t>(k0);
    Operand ov{v->buffer().get(), v->offset() + k * v->stride(dim), v->layout().strides};
    Operand oi{idx->buffer().get(), idx->offset() + k * idx->stride(dim), idx->layout().strides};
    launch_index(IX_SCATTER_ADD, out->dtype(), idx->dtype(), lines, lines.num_elements(), oo, ov, oi, lines.rank(),
                 {static_cast<std::int64_t>(dim), static_cast<std::int64_t>(out->shape()[dim]), out->stride(dim),
                  static_cast<std::int64_t>(std::min(kLoopSafe, len - k0)), v->stride(dim), idx->stride(dim), upd},
                 index_check(op, dim, out->shape()[dim]));
  }
  return out;
}

// out = a; out[..., idx[k], ...] upd= v[..., k, ...] along dim, k in order.
Prim select_assign_impl(const char* op, Prim pa, std::size_t dim, Prim pi, Prim pv, int upd) {
  VkRef out = writable_copy(as_vk(std::move(pa)));
  VkRef idx = as_vk(std::move(pi));
  VkRef v = as_vk(std::move(pv));
  Shape lines = v->shape();
  const std::size_t len = lines[dim];
  lines[dim] = 1;
  if (len == 0) return out;
  Operand oo{out->buffer().get(), 0, out->layout().strides};
  for (std::size_t k0 = 0; k0 < len; k0 += kLoopSafe) {  // in order, as scatter_impl
    const auto k = static_cast<std::int64_t>(k0);
    Operand ov{v->buffer().get(), v->offset() + k * v->stride(dim), v->layout().strides};
    Operand oi{idx->buffer().get(), idx->offset() + k * idx->stride(0), {}};
    launch_index(IX_SELECT_ADD, out->dtype(), idx->dtype(), lines, lines.num_elements(), oo, ov, oi, lines.rank(),
                 {static_cast<std::int64_t>(dim), static_cast<std::int64_t>(out->shape()[dim]), out->stride(dim),
                  static_cast<std::int64_t>(std::min(kLoopSafe, len - k0)), v->stride(dim), idx->stride(0), upd},
                 index_check(op, dim, out->shape()[dim]));
  }
  return out;
}

template <bool kOr>
Prim scatter_add_entry(Prim a, std::size_t dim, Prim i, Prim v) {
  return scatter_impl(kOr ? "scatter_or" : "scatter_add", std::move(a), dim, std::move(i), std::move(v),
                      kOr ? UPD_OR : UPD_ADD);
}
template <bool kOr>
Prim select_add_entry(Prim a, std::size_t dim, Prim i, Prim v) {
  return select_assign_impl(kOr ? "select_or" : "select_add", std::move(a), dim, std::move(i), std::move(v),
                            kOr ? UPD_OR : UPD_ADD);
}
Prim scatter_entry(Prim a, std::size_t dim, Prim i, Prim v, IndexingUpdateOp u) {
  return scatter_impl("scatter", std::move(a), dim, std::move(i), std::move(v), upd_code(u));
}
Prim select_assign_entry(Prim a, std::size_t dim, Prim i, Prim v, IndexingUpdateOp u) {
  return select_assign_impl("select_assign", std::move(a), dim, std::move(i), std::move(v), upd_code(u));
}

// ---- fill, rows (softmax, sort, cross) ---------------------------------------------------------

Prim full_entry(const Shape& shape, Scalar v, DeviceId dev, DType dt) {
  VkRef out = alloc(dev, dt, shape);
  launch_ew(EW_FILL, dt, dt, dt, false, shape, operand(*out, shape), operand(*out, shape), nullptr, nullptr,
            scalar_raw(dt, v), 0);
  return out;
}
Prim zeros_entry(const Shape& shape, DeviceId dev, DType dt) { return full_entry(shape, Scalar(0), dev, dt); }
Prim ones_entry(const Shape& shape, DeviceId dev, DType dt) { return full_entry(shape, Scalar(1), dev, dt); }

// One workgroup per line along `dim` (rows family). `x` is the second output (sort indices).
void launch_rows(int op, const VulkanTensor& a, std::size_t dim, const VulkanTensor* out, const VulkanTensor* x,
                 DType xdt, std::initializer_list<std::int64_t> tail) {
  Shape lines = a.shape();
  const std::size_t n = lines[dim];
  lines[dim] = 1;
  const std::size_t count = lines.num_elements();
  if (count == 0 || n == 0) return;
  const VulkanTensor& o = out ? *out : *x;
  Params p;
  p.shape(lines, count);
  p.operand(0, Operand{o.buffer().get(), o.offset(), o.layout().strides}, lines.rank());
  p.operand(1, Operand{a.buffer().get(), a.offset(), a.layout().strides}, lines.rank());
  if (x) p.operand(2, Operand{x->buffer().get(), x->offset(), x->layout().strides}, lines.rank());
  p.extra(0, static_cast<std::int64_t>(n));
  p.extra(1, a.stride(dim));
  p.extra(2, o.stride(dim));
  p.extra(3, x ? x->stride(dim) : 0);
  int i = 4;
  for (std::int64_t e : tail) p.extra(i++, e);
  std::uint32_t gx, gy;
  groups_for(count, gx, gy);
  a.ctx().dispatch(ShaderFamily::Rows, {static_cast<std::uint32_t>(op), code(a.dtype()), code(xdt)}, p.w,
                   {{a.buffer().get(), false}, {nullptr, false}, {x ? x->buffer().get() : nullptr, true},
                    {out ? out->buffer().get() : nullptr, true}},
                   gx, gy, 1, wide({a.dtype(), xdt}));
}

template <int OP>
Prim softmax_entry(Prim p, std::size_t dim) {
  VkRef a = as_vk(std::move(p));
  check_loop_limit(*a, "softmax row", kRowsMaxSoftware, dim);
  VkRef out = alloc(a->device(), a->dtype(), a->shape());
  launch_rows(OP, *a, dim, out.get(), nullptr, a->dtype(), {});
  return out;
}

// Sorted values and/or indices along `dim` (stable; NaN last ascending, first descending).
dispatch::PrimPair sort_impl(Prim p, std::size_t dim, bool desc, DType idx_dt, bool values, bool indices) {
  VkRef a = as_vk(std::move(p));
  const std::size_t n = a->shape()[dim];
  std::size_t np = 1;
  while (np < n) np <<= 1;
  VkRef vals = values ? alloc(a->device(), a->dtype(), a->shape()) : VkRef();
  VkRef idx = indices ? alloc(a->device(), idx_dt, a->shape()) : VkRef();
  const std::int64_t flags = (desc ? 1 : 0) | (values ? 2 : 0) | (indices ? 4 : 0);
  if (np <= RW_SORT_CAP) {
    launch_rows(RW_SORT, *a, dim, vals.get(), idx.get(), idx_dt, {flags, static_cast<std::int64_t>(np)});
    return {Prim(std::move(vals)), Prim(std::move(idx))};
  }
  // Long lines: the bitonic network over global scratch, one dispatch per stage.
  Shape lines = a->shape();
  lines[dim] = 1;
  const std::size_t count = lines.num_elements();
  const std::size_t total = count * np;
  if (count == 0) return {Prim(std::move(vals)), Prim(std::move(idx))};
  if (total > 0x7FFFFFFFull)
    throw ExecutionError(fmt::format("[sort] padded sort workspace too large; expected at most 2^31 - 1 elements; got {}", total));
  VkRef keys = alloc(a->device(), a->dtype(), Shape{total});
  VkRef ids = alloc(a->device(), DType::U32, Shape{total});
  Context& c = a->ctx();
  const VulkanTensor& dst = vals ? *vals : *idx;
  auto stage = [&](int op, std::int64_t k, std::int64_t j, std::vector<Binding> binds) {
    Params p;
    p.shape(lines, total);
    p.operand(0, Operand{dst.buffer().get(), dst.offset(), dst.layout().strides}, lines.rank());
    p.operand(1, Operand{a->buffer().get(), a->offset(), a->layout().strides}, lines.rank());
    if (idx) p.operand(2, Operand{idx->buffer().get(), idx->offset(), idx->layout().strides}, lines.rank());
    p.extra(0, static_cast<std::int64_t>(n));
    p.extra(1, a->stride(dim));
    p.extra(2, vals ? vals->stride(dim) : 0);
    p.extra(3, idx ? idx->stride(dim) : 0);
    p.extra(4, flags);
    p.extra(5, static_cast<std::int64_t>(np));
    p.extra(6, k);
    p.extra(7, j);
    std::uint32_t gx, gy;
    groups_for((total + 255) / 256, gx, gy);
    c.dispatch(ShaderFamily::Rows, {static_cast<std::uint32_t>(op), code(a->dtype()), code(idx_dt)}, p.w, binds, gx, gy, 1,
               wide({a->dtype(), idx_dt}));
  };
  stage(RW_GSORT_INIT, 0, 0,
        {{a->buffer().get(), false}, {nullptr, false}, {ids->buffer().get(), true}, {keys->buffer().get(), true}});
  for (std::size_t k = 2; k <= np; k <<= 1)
    for (std::size_t j = k >> 1; j > 0; j >>= 1)
      stage(RW_GSORT_STEP, static_cast<std::int64_t>(k), static_cast<std::int64_t>(j),
            {{nullptr, false}, {nullptr, false}, {ids->buffer().get(), true}, {keys->buffer().get(), true}});
  stage(RW_GSORT_OUT, 0, 0,
        {{keys->buffer().get(), false}, {ids->buffer().get(), false}, {idx ? idx->buffer().get() : nullptr, true},
         {vals ? vals->buffer().get() : nullptr, true}});
  return {Prim(std::move(vals)), Prim(std::move(idx))};
}
Prim sort_entry(Prim p, std::size_t dim, bool desc) {
  return sort_impl(std::move(p), dim, desc, DType::I32, true, false).first;
}
dispatch::PrimPair sort_wi_entry(Prim p, std::size_t dim, bool desc, DType out) {
  return sort_impl(std::move(p), dim, desc, out, true, true);
}
Prim argsort_entry(Prim p, std::size_t dim, bool desc, DType out) {
  return sort_impl(std::move(p), dim, desc, out, false, true).second;
}

Prim cross_entry(Prim pa, Prim pb, std::size_t dim) {
  VkRef a = as_vk(std::move(pa));
  VkRef b = as_vk(std::move(pb));
  const Shape s = broadcast(a->shape(), b->shape());
  VkRef out = alloc(a->device(), a->dtype(), s);
  Shape lines = s;
  lines[dim] = 1;
  const std::size_t count = lines.num_elements();
  if (count == 0) return out;
  const Operand oa = operand(*a, s), ob = operand(*b, s), oo = operand(*out, s);
  Params p;
  p.shape(lines, count);
  p.operand(0, oo, lines.rank());
  p.operand(1, oa, lines.rank());
  p.operand(2, ob, lines.rank());
  p.extra(1, oa.strides[dim]);
  p.extra(2, oo.strides[dim]);
  p.extra(3, ob.strides[dim]);
  std::uint32_t gx, gy;
  groups_for((count + 255) / 256, gx, gy);
  a->ctx().dispatch(ShaderFamily::Rows, {RW_CROSS, code(a->dtype()), code(a->dtype())}, p.w,
                    {{a->buffer().get(), false}, {b->buffer().get(), false}, {nullptr, false}, {out->buffer().get(), true}},
                    gx, gy, 1, wide({a->dtype()}));
  return out;
}

}  // namespace

void seed_device(DeviceId device, std::uint64_t seed) {
  std::lock_guard<std::mutex> lock(g_rng_mu);
  g_rngs[device.index_id].seed(seed);
}

void register_ops(dispatch::Backend& b) {
  using O = OpCode;
  b.set<O::from_data>(&from_data_entry);
  b.set<O::empty>(&empty_entry);
  b.set<O::random>(&random_entry);
  b.set<O::into_data>(&into_data_entry);
  b.set<O::to_device>(&to_device_entry);
  b.set<O::cast>(&cast_entry);
  b.set<O::into_int>(&cast_entry);
  b.set<O::into_float>(&cast_entry);

  b.set<O::reshape>(&reshape_entry);
  b.set<O::expand>(&view_entry<dispatch::expand_view, const Shape&>);
  b.set<O::swap_dims>(&view_entry<dispatch::swap_dims_view, std::size_t, std::size_t>);
  b.set<O::permute>(&view_entry<dispatch::permute_view, dispatch::Axes>);
  b.set<O::flip>(&view_entry<dispatch::flip_view, dispatch::Axes>);
  b.set<O::slice>(&view_entry<dispatch::slice_view, dispatch::DimSlices>);
  b.set<O::slice_assign>(&slice_assign_entry);
  b.set<O::unfold>(&view_entry<dispatch::unfold_view, std::size_t, std::size_t, std::size_t>);

  b.set<O::gather>(&gather_entry);
  b.set<O::select>(&select_entry);
  b.set<O::scatter_add>(&scatter_add_entry<false>);
  b.set<O::scatter_or>(&scatter_add_entry<true>);
  b.set<O::select_add>(&select_add_entry<false>);
  b.set<O::select_or>(&select_add_entry<true>);
  b.set<O::scatter>(&scatter_entry);
  b.set<O::select_assign>(&select_assign_entry);
  b.set<O::mask_fill>(&mask_fill_entry);
  b.set<O::mask_where>(&mask_where_entry);

  b.set<O::equal>(&compare_entry<EW_EQ>);
  b.set<O::greater>(&compare_entry<EW_GT>);
  b.set<O::greater_equal>(&compare_entry<EW_GE>);
  b.set<O::lower>(&compare_entry<EW_LT>);
  b.set<O::lower_equal>(&compare_entry<EW_LE>);
  b.set<O::equal_elem>(&compare_scalar_entry<EW_EQ>);
  b.set<O::greater_elem>(&compare_scalar_entry<EW_GT>);
  b.set<O::greater_equal_elem>(&compare_scalar_entry<EW_GE>);
  b.set<O::lower_elem>(&compare_scalar_entry<EW_LT>);
  b.set<O::lower_equal_elem>(&compare_scalar_entry<EW_LE>);

  b.set<O::add>(&binary_entry<EW_ADD>);
  b.set<O::sub>(&binary_entry<EW_SUB>);
  b.set<O::mul>(&binary_entry<EW_MUL>);
  b.set<O::div>(&binary_entry<EW_DIV>);
  b.set<O::remainder>(&binary_entry<EW_REM>);
  b.set<O::powf>(&binary_entry<EW_POW>);
  b.set<O::atan2>(&binary_entry<EW_ATAN2>);
  b.set<O::add_scalar>(&scalar_entry<EW_ADD>);
  b.set<O::sub_scalar>(&scalar_entry<EW_SUB>);
  b.set<O::mul_scalar>(&scalar_entry<EW_MUL>);
  b.set<O::div_scalar>(&scalar_entry<EW_DIV>);
  b.set<O::remainder_scalar>(&scalar_entry<EW_REM>);
  b.set<O::powf_scalar_impl>(&powf_scalar_impl_entry);
  b.set<O::matmul>(&matmul_entry);

  b.set<O::recip>(&unary_entry<EW_RECIP>);
  b.set<O::sqrt>(&unary_entry<EW_SQRT>);
  b.set<O::exp>(&unary_entry<EW_EXP>);
  b.set<O::log>(&unary_entry<EW_LOG>);
  b.set<O::log1p>(&unary_entry<EW_LOG1P>);
  b.set<O::abs>(&unary_entry<EW_ABS>);
  b.set<O::cos>(&unary_entry<EW_COS>);
  b.set<O::sin>(&unary_entry<EW_SIN>);
  b.set<O::tan>(&unary_entry<EW_TAN>);
  b.set<O::cosh>(&unary_entry<EW_COSH>);
  b.set<O::sinh>(&unary_entry<EW_SINH>);
  b.set<O::tanh>(&unary_entry<EW_TANH>);
  b.set<O::acos>(&unary_entry<EW_ACOS>);
  b.set<O::acosh>(&unary_entry<EW_ACOSH>);
  b.set<O::asin>(&unary_entry<EW_ASIN>);
  b.set<O::asinh>(&unary_entry<EW_ASINH>);
  b.set<O::atan>(&unary_entry<EW_ATAN>);
  b.set<O::atanh>(&unary_entry<EW_ATANH>);
  b.set<O::round>(&unary_entry<EW_ROUND>);
  b.set<O::floor>(&unary_entry<EW_FLOOR>);
  b.set<O::ceil>(&unary_entry<EW_CEIL>);
  b.set<O::trunc>(&unary_entry<EW_TRUNC>);
  b.set<O::erf>(&unary_entry<EW_ERF>);

  b.set<O::bitwise_and>(&binary_entry<EW_AND>);
  b.set<O::bitwise_or>(&binary_entry<EW_OR>);
  b.set<O::bitwise_xor>(&binary_entry<EW_XOR>);
  b.set<O::bitwise_left_shift>(&binary_entry<EW_SHL>);
  b.set<O::bitwise_right_shift>(&binary_entry<EW_SHR>);
  b.set<O::bitwise_and_scalar>(&scalar_entry<EW_AND>);
  b.set<O::bitwise_or_scalar>(&scalar_entry<EW_OR>);
  b.set<O::bitwise_xor_scalar>(&scalar_entry<EW_XOR>);
  b.set<O::bitwise_left_shift_scalar>(&scalar_entry<EW_SHL>);
  b.set<O::bitwise_right_shift_scalar>(&scalar_entry<EW_SHR>);
  b.set<O::bitwise_not>(&unary_entry<EW_NOT>);
  b.set<O::bool_not>(&unary_entry<EW_BOOL_NOT>);
  b.set<O::bool_and>(&binary_entry<EW_BOOL_AND>);
  b.set<O::bool_or>(&binary_entry<EW_BOOL_OR>);

  // Fused: one kernel each instead of the default compositions.
  b.set<O::not_equal>(&compare_entry<EW_NE>);
  b.set<O::not_equal_elem>(&compare_scalar_entry<EW_NE>);
  b.set<O::is_nan>(&predicate_entry<EW_IS_NAN>);
  b.set<O::is_inf>(&predicate_entry<EW_IS_INF>);
  b.set<O::bool_xor>(&binary_entry<EW_BOOL_XOR>);
  b.set<O::neg>(&unary_entry<EW_NEG>);
  b.set<O::sign>(&unary_entry<EW_SIGN>);
  b.set<O::square>(&unary_entry<EW_SQUARE>);
  b.set<O::hypot>(&binary_entry<EW_HYPOT>);
  b.set<O::powi>(&binary_entry<EW_POWI>);
  b.set<O::powi_scalar>(&powi_scalar_entry);
  b.set<O::powi_scalar_impl>(&powi_scalar_impl_entry);
  b.set<O::powf_scalar>(&powf_scalar_entry);
  b.set<O::clamp_min>(&clamp_min_entry);
  b.set<O::clamp_max>(&clamp_max_entry);
  b.set<O::clamp>(&clamp_entry);
  b.set<O::relu>(&unary_entry<EW_RELU>);
  b.set<O::leaky_relu>(&leaky_relu_entry);
  b.set<O::prelu>(&binary_entry<EW_PRELU>);
  b.set<O::gelu>(&unary_entry<EW_GELU>);
  b.set<O::sigmoid>(&unary_entry<EW_SIGMOID>);
  b.set<O::hard_sigmoid>(&hard_sigmoid_entry);
  b.set<O::log_sigmoid>(&unary_entry<EW_LOG_SIGMOID>);
  b.set<O::relu_backward>(&binary_entry<EW_RELU_BWD>);
  b.set<O::gelu_backward>(&binary_entry<EW_GELU_BWD>);
  b.set<O::sigmoid_backward>(&binary_entry<EW_SIGMOID_BWD>);
  b.set<O::log_sigmoid_backward>(&binary_entry<EW_LOG_SIGMOID_BWD>);

  b.set<O::sum>(&reduce_all_entry<RD_SUM>);
  b.set<O::prod>(&reduce_all_entry<RD_PROD>);
  // Native so that int means divide the exact (64-bit) sum: the default sum/n would
  // wrap narrow ints first.
  b.set<O::mean>(&reduce_all_entry<RD_MEAN>);
  b.set<O::sum_dim>(&reduce_dim_entry<RD_SUM>);
  b.set<O::prod_dim>(&reduce_dim_entry<RD_PROD>);
  b.set<O::mean_dim>(&reduce_dim_entry<RD_MEAN>);
  b.set<O::argmax>(&arg_entry<RD_ARGMAX>);
  b.set<O::argmin>(&arg_entry<RD_ARGMIN>);
  b.set<O::max>(&extremum_all_entry<RD_ARGMAX>);
  b.set<O::min>(&extremum_all_entry<RD_ARGMIN>);
  b.set<O::max_abs>(&extremum_all_entry<RD_MAX_ABS>);
  b.set<O::max_dim>(&extremum_dim_entry<RD_ARGMAX>);
  b.set<O::min_dim>(&extremum_dim_entry<RD_ARGMIN>);
  b.set<O::max_abs_dim>(&extremum_dim_entry<RD_MAX_ABS>);
  b.set<O::max_dim_with_indices>(&extremum_wi_entry<RD_ARGMAX>);
  b.set<O::min_dim_with_indices>(&extremum_wi_entry<RD_ARGMIN>);
  b.set<O::any>(&any_all_entry<RD_ANY>);
  b.set<O::all>(&any_all_entry<RD_ALL>);
  b.set<O::any_dim>(&any_all_dim_entry<RD_ANY>);
  b.set<O::all_dim>(&any_all_dim_entry<RD_ALL>);
  b.set<O::full>(&full_entry);
  b.set<O::zeros>(&zeros_entry);
  b.set<O::ones>(&ones_entry);
  b.set<O::softmax>(&softmax_entry<RW_SOFTMAX>);
  b.set<O::log_softmax>(&softmax_entry<RW_LOG_SOFTMAX>);
  b.set<O::softmin>(&softmax_entry<RW_SOFTMIN>);
  b.set<O::sort>(&sort_entry);
  b.set<O::sort_with_indices>(&sort_wi_entry);
  b.set<O::argsort>(&argsort_entry);
  b.set<O::cross>(&cross_entry);
  b.set<O::cumsum>(&scan_entry<SC_CUMSUM>);
  b.set<O::cumprod>(&scan_entry<SC_CUMPROD>);
  b.set<O::cummax>(&scan_entry<SC_CUMMAX>);
  b.set<O::cummin>(&scan_entry<SC_CUMMIN>);
}

}  // namespace tensor::vulkan
