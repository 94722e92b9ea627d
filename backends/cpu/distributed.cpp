// The CPU's all_reduce (op table: distributed section): the tensor's own buffer goes to the
// communicator, with no host staging. A contiguous input that this call holds alone is
// reduced in place; a shared one is read where it lies and the result written into a fresh
// buffer; a strided one is made contiguous first (one copy, where the default makes two).
// f16/bf16 (reduced through f32) and the other collectives take the staged default.
#include <cstring>

#include "backends/cpu/cpu_ops.hpp"
#include "lib/src/distributed/communicator.hpp"

namespace tensor::cpu {
namespace {

using dispatch::Prim;
namespace di = dist::internal;

bool host_reducible(DType dt) {
  switch (dt) {
    case DType::F64: case DType::F32: case DType::I64: case DType::I32: case DType::I16: case DType::I8:
    case DType::U64: case DType::U32: case DType::U16: case DType::U8:
      return true;
    default:
      return false;
  }
}

Prim all_reduce_entry(Prim px, std::int64_t arg) {
  CpuRef x = as_cpu(std::move(px));
  const DType dt = x->dtype();
  const Shape shape = x->shape();
  di::Communicator& comm = di::current();
  const di::Call call = di::begin(comm, 0, static_cast<int>(arg), dt, shape);
  if (!x->is_contiguous()) x = to_contiguous(std::move(x));
  const std::size_t n = shape.num_elements();
  if (!host_reducible(dt)) {
    TensorData in(std::vector<std::byte>(x->data(), x->data() + n * dtype_size(dt)), shape, dt);
    const TensorData out = di::staged(comm, call, 0, static_cast<int>(arg), std::move(in));
    CpuRef r = alloc_tensor(dt, shape);
    if (!out.bytes().empty()) std::memcpy(r->data(), out.bytes().data(), out.bytes().size());
    return r;
  }
  CpuRef r = x->can_mut() ? x : alloc_tensor(dt, shape);
  comm.all_reduce_buffer(x->data(), r->data(), n, dt, static_cast<dist::ReduceOp>(arg), call);
  return r;
}

}  // namespace

void register_distributed_ops(dispatch::Backend& b) { b.set<OpCode::all_reduce>(&all_reduce_entry); }

}  // namespace tensor::cpu
