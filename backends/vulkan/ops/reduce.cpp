// The reduce and scan families (reduce.comp, scan.comp): sums, products, means,
// extrema and arg-extrema, any/all, over a dim or the whole tensor, on the line or
// column path, split in two passes for long lines; cumulative scans.
#include <fmt/format.h>

#include <algorithm>

#include "backends/vulkan/runtime/features.hpp"
#include "backends/vulkan/ops/kernel.hpp"
#include "backends/vulkan/vk_ops.hpp"
#include "lib/core/current_op.hpp"
#include "lib/core/shape_rules.hpp"
#include "tensor/error.hpp"

namespace tensor::vulkan {

using namespace kernel;

namespace {

// The dtype partial sums/products are kept in between the two passes of a split
// reduction: the shader's accumulator (f32 / f64, 32- / 64-bit wrapping ints).
DType accumulator_dtype(DType dt) {
  if (is_float(dt)) return dt == DType::F64 ? DType::F64 : DType::F32;
  if (dtype_size(dt) == 8) return dt;
  return is_signed_int(dt) ? DType::I32 : DType::U32;
}

// Lines at least this long, when there are only a few of them, are reduced by many
// workgroups (a chunk each) and then a second pass, instead of one workgroup each.
constexpr std::size_t kLineReduceMax = 64 * 2 * kLoopSafe;  // the line path: n / 64 per invocation
constexpr std::size_t kScanMaxSoftware = 2 * kLoopSafe;     // scan.comp: n per invocation
constexpr std::size_t kSplitMin = 16384;
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
  const Shape out_shape = core::reduce_dim_shape(a->shape(), dim);
  const std::size_t n = a->shape()[dim];
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
                                     core::current_op_name(), kLineReduceMax, n));
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

}  // namespace

void register_reduce(dispatch::Backend& b) {
  using O = OpCode;
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
  b.set<O::cumsum>(&scan_entry<SC_CUMSUM>);
  b.set<O::cumprod>(&scan_entry<SC_CUMPROD>);
  b.set<O::cummax>(&scan_entry<SC_CUMMAX>);
  b.set<O::cummin>(&scan_entry<SC_CUMMIN>);
}

}  // namespace tensor::vulkan
