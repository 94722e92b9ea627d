// The CPU's side of graph replay's raw path (dispatch/graph_raw.hpp): the kernels of the
// elementwise entries, dense addresses, the arena and views into it. graph_stop_capture
// hands them to the replay list.
#include "backends/cpu/cpu_backend.hpp"
#include "backends/cpu/graph_raw.hpp"

#include "backends/cpu/cpu_tensor.hpp"
#include "backends/cpu/parallel.hpp"

namespace tensor::cpu {
namespace {

dispatch::RawKernel raw_kernel(OpCode op, dispatch::RawFn entry, DType dtype, const Scalar& s, dispatch::RawScalar& out) {
  if (dispatch::RawKernel f = raw_binary_kernel(op, entry, dtype, s, out)) return f;
  return raw_unary_kernel(op, entry, dtype);
}

void* raw_data(const dispatch::Primitive& p) {
  const auto& t = static_cast<const CpuTensor&>(p);
  return t.is_contiguous() ? t.data() : nullptr;
}

dispatch::Prim raw_arena(std::size_t bytes) { return alloc_tensor(DType::U8, Shape{bytes}); }

dispatch::Prim raw_view(const dispatch::Prim& arena, std::size_t offset, const Shape& shape, DType dtype) {
  const CpuTensor& a = cpu_of(arena);
  Layout l = contiguous_layout(shape);
  l.offset = static_cast<std::int64_t>(offset / dtype_size(dtype));  // offsets are 64-byte aligned
  return CpuRef::make(dtype, shape, a.storage_ref(), l);
}

void raw_copy(void* dst, const dispatch::Primitive& src) {
  copy_strided(static_cast<const CpuTensor&>(src), static_cast<std::byte*>(dst));
}

void raw_parallel(std::size_t chunks, void (*body)(void*, std::size_t), void* ctx) {
  auto f = [&](std::size_t c) { body(ctx, c); };
  parallel_chunks(chunks, f);
}

constexpr dispatch::GraphRaw kRaw{&raw_kernel, &raw_data, &raw_arena, &raw_view, &raw_copy, &raw_parallel};

}  // namespace

void graph_stop_capture_entry(DeviceId, dispatch::GraphProgram& g) { dispatch::set_graph_raw(g, &kRaw); }

}  // namespace tensor::cpu
