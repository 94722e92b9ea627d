// Defaults: the collectives (the op table's distributed section) staged through the host:
// the tensor is read back (into_data), the calling thread's communicator runs the collective
// on host bytes (f16/bf16 reductions through f32), and the result is uploaded to the same
// device (from_data). Every backend has them; the CPU replaces all_reduce with its zero-copy
// path (backends/cpu/distributed.cpp). Collectives finish before returning, so
// sync_collective (burn's row) has nothing to wait for.
#include "dispatch/defaults/compose.hpp"
#include "lib/src/distributed/communicator.hpp"

namespace tensor::dispatch::defaults {
namespace {

template <OpCode op>
Prim d_collective(Prim x, std::int64_t arg) {
  constexpr int what = op == OpCode::all_reduce ? 0 : op == OpCode::broadcast ? 1 : op == OpCode::all_gather ? 2 : 3;
  const DeviceId d = x->device();
  dist::internal::Communicator& comm = dist::internal::current();
  const dist::internal::Call call = dist::internal::begin(comm, what, static_cast<int>(arg), x->dtype(), x->shape());
  TensorData data = read_prim(std::move(x));
  return upload(dist::internal::staged(comm, call, what, static_cast<int>(arg), std::move(data)), d);
}
void d_sync_collective(DeviceId) {}

}  // namespace

TENSOR_DEFAULT(OpCode, all_reduce, d_collective<OpCode::all_reduce>)
TENSOR_DEFAULT(OpCode, broadcast, d_collective<OpCode::broadcast>)
TENSOR_DEFAULT(OpCode, all_gather, d_collective<OpCode::all_gather>)
TENSOR_DEFAULT(OpCode, reduce_scatter, d_collective<OpCode::reduce_scatter>)
TENSOR_DEFAULT(DeviceOp, sync_collective, d_sync_collective)

}  // namespace tensor::dispatch::defaults
