// The elementwise family (elementwise.comp, ew_f16.comp): unary, binary, scalar and
// comparison ops, the fused activations and powers, masks and casts.
#include <fmt/format.h>

#include <bit>
#include <cmath>

#include "backends/vulkan/ops/kernel.hpp"
#include "backends/vulkan/vk_ops.hpp"
#include "tensor/error.hpp"

namespace tensor::vulkan {

using namespace kernel;

namespace {

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

// Whether the operand reads one element for every output element (all strides 0: a
// 1-element tensor expanded, the optimizer's graph-mode step values).
bool single(const Operand& o, const Shape& shape) {
  for (std::size_t d = 0; d < shape.rank(); ++d)
    if (o.strides[d] != 0 && shape[d] != 1) return false;
  return true;
}

}  // namespace

void kernel::launch_ew(int op, DType dta, DType dtb, DType dto, bool bscalar, const Shape& shape, const Operand& out,
               const Operand& a, const Operand* b, const Operand* c, std::uint64_t s0, std::uint64_t s1) {
  const std::size_t n = shape.num_elements();
  if (n == 0) return;
  Context& ctx = *out.buf->context();
  const bool contig = dense(out, shape) && dense(a, shape) && (!b || dense(*b, shape)) && (!c || dense(*c, shape));
  // Not dense, but each input dense or a single element broadcast (the output dense):
  // elementwise.comp's CONTIG 2 + m, bit k-1 of m set where input k reads one element at
  // its offset (no per-dimension walk; a uniform load).
  std::uint32_t singles = 0;
  bool units = !contig && dense(out, shape);
  for (int k = 1; k < 4 && units; ++k) {
    const Operand* o = k == 1 ? &a : k == 2 ? b : c;
    if (!o || dense(*o, shape)) continue;
    if (single(*o, shape)) singles |= 1u << (k - 1);
    else units = false;
  }
  // A workgroup of 8 for tensors of at most 8 elements (elementwise.comp's LOCAL). Each
  // LOCAL is another pipeline per op and dtype: a third size, 64 up to 64 elements, made
  // lavapipe compile so many more that ops_vulkan's elementwise cases took 1.7x as long
  // (max_pair + powi_scalar + sign, fresh pipeline cache: 75 s against 43 s with 256
  // only, 38 s with 8 and 256), and ops_vulkan 870 s in CI.
  const std::uint32_t local = n <= 8 ? 8u : 256u;
  const std::vector<std::uint32_t> spec = {static_cast<std::uint32_t>(op), code(dta), code(dtb), code(dto),
                                           bscalar ? 1u : 0u, contig ? 1u : units ? 2u + singles : 0u, local};
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
    groups_for((n + local - 1) / local, gx, gy);
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

namespace {

bool reusable(const VulkanTensor& t, const Shape& shape, DType dt) {
  return t.can_mut() && t.is_dense_from_zero() && t.shape() == shape && dtype_size(t.dtype()) == dtype_size(dt);
}
VkRef output_for(VkRef& a, VkRef* b, const Shape& shape, DType dt) {
  if (reusable(*a, shape, dt)) { a->set_dtype(dt); return a; }
  if (b && reusable(**b, shape, dt)) { (*b)->set_dtype(dt); return *b; }
  return alloc(a->device(), dt, shape);
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

// ---- fused ops (one pass where dispatch/defaults/ composes several) ----------------

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

}  // namespace

// `t` converted to `to` (contiguous, fresh), or a strided copy when dtypes match.
VkRef kernel::convert(const VkRef& t, DType to) {
  const Shape s = t->shape();
  VkRef out = alloc(t->device(), to, s);
  launch_ew(EW_COPY, t->dtype(), t->dtype(), to, false, s, operand(*out, s), operand(*t, s), nullptr, nullptr, 0, 0);
  return out;
}
VkRef kernel::to_contiguous(VkRef t) {
  if (t->is_contiguous()) return t;
  return convert(t, t->dtype());
}
VkRef kernel::dense_from_zero(VkRef t) {
  if (t->is_dense_from_zero()) return t;
  return convert(t, t->dtype());
}

namespace {

Prim cast_entry(Prim pa, DType to) {
  VkRef a = as_vk(std::move(pa));
  check_storage_dtype(a->ctx(), to, "cast");
  if (a->dtype() == to) return a;
  return convert(a, to);
}

}  // namespace

namespace {

// The elementwise code serving `op` (vk_codes.h's TENSOR_VK_EW_OPS), -1 for none.
constexpr int ew_code(OpCode op) {
  switch (op) {
#define TENSOR_X(name, code) \
  case OpCode::name:         \
    return code;
    TENSOR_VK_EW_OPS(TENSOR_X)
#undef TENSOR_X
    default:
      return -1;
  }
}

template <OpCode>
inline constexpr bool kNoEwEntry = false;

// The entry of `op` from its family and elementwise code; null when it has no code
// (its entry, if any, is registered by hand below or in another family's file).
template <OpCode op>
constexpr dispatch::FamilyFn<dispatch::op_family(op)> ew_entry() {
  using dispatch::Family;
  constexpr int c = ew_code(op);
  constexpr Family f = dispatch::op_family(op);
  if constexpr (c < 0) return nullptr;
  else if constexpr (f == Family::Unary) return &unary_entry<c>;
  else if constexpr (f == Family::Binary || f == Family::PowI) return &binary_entry<c>;
  else if constexpr (f == Family::Scalar) return &scalar_entry<c>;
  else if constexpr (f == Family::Compare) return &compare_entry<c>;
  else if constexpr (f == Family::CompareScalar) return &compare_scalar_entry<c>;
  else if constexpr (f == Family::Predicate) return &predicate_entry<c>;
  else static_assert(kNoEwEntry<op>, "TENSOR_VK_EW_OPS lists an op of a family without an elementwise entry");
}

}  // namespace

void register_elementwise(dispatch::Backend& b) {
  // Every op table row with an elementwise code, on its family's entry.
#define TENSOR_OP(name, ...) \
  if constexpr (ew_code(OpCode::name) >= 0) b.set<OpCode::name>(ew_entry<OpCode::name>());
#include "tensor/op_table.def"
#undef TENSOR_OP

  // The ops with their own kernels or scalar conversions.
  using O = OpCode;
  b.set<O::cast>(&cast_entry);
  b.set<O::into_int>(&cast_entry);
  b.set<O::into_float>(&cast_entry);
  b.set<O::mask_fill>(&mask_fill_entry);
  b.set<O::mask_where>(&mask_where_entry);
  // Fused: one kernel each instead of the default compositions.
  b.set<O::powf_scalar_impl>(&powf_scalar_impl_entry);
  b.set<O::powi_scalar>(&powi_scalar_entry);
  b.set<O::powi_scalar_impl>(&powi_scalar_impl_entry);
  b.set<O::powf_scalar>(&powf_scalar_entry);
  b.set<O::clamp_min>(&clamp_min_entry);
  b.set<O::clamp_max>(&clamp_max_entry);
  b.set<O::clamp>(&clamp_entry);
  b.set<O::leaky_relu>(&leaky_relu_entry);
  b.set<O::hard_sigmoid>(&hard_sigmoid_entry);
}

}  // namespace tensor::vulkan
