// The CPU backend's entry point: every native entry and the device-level ops.
#include "backends/cpu/cpu_backend.hpp"

#include "backends/cpu/cpu_info.hpp"
#include "backends/cpu/cpu_ops.hpp"
#include "backends/cpu/gemm.hpp"
#include "backends/cpu/quant.hpp"
#include "backends/cpu/graph_raw.hpp"

#include <algorithm>

#if TENSOR_HAVE_OPENMP
#include <omp.h>
#endif

namespace tensor::cpu {
namespace {

std::string name_entry(DeviceId) { return "cpu"; }
void flush_entry(DeviceId) {}
// Unmaps the cached large buffers (Storage::allocate keeps freed ones for reuse).
void memory_cleanup_entry(DeviceId) { buffer_cache_clear(); }
std::size_t device_count_entry() { return 1; }
// burn-flex's defaults: F32, I32, one-byte native bools.
DeviceSettings default_settings_entry(DeviceId) { return {FloatDType::F32, IntDType::I32, BoolDType::Native}; }

// Every float and int dtype and the one-byte bools are general; BoolU32 is not a CPU
// storage. BF16 is also Accelerated while its matrix products run on oneDNN's AVX512_BF16
// kernels (gemm.hpp's bf16_gemm_live: a CPU with AVX512_BF16 and a build with oneDNN).
// QFloat: dispatch derives Storage and Arithmetic from the i8 and f32 rows (a quantized
// tensor is dispatch's codes + scales); the cpu adds Accelerated where its int8 products run.
DTypeUsageSet dtype_usage_entry(DeviceId, DType dtype) {
  if (dtype == DType::BF16 && bf16_gemm_live()) return DTypeUsageSet::general() | DTypeUsage::Accelerated;
  if (dtype == DType::QFloat) return int8_products_live() ? DTypeUsageSet(DTypeUsage::Accelerated) : DTypeUsageSet{};
  if (is_float(dtype) || is_int(dtype) || dtype == DType::Bool || dtype == DType::BoolU8)
    return DTypeUsageSet::general();
  return {};
}

// copy_from and graph replay: src's elements written into dst's buffer through dst's own
// strides (same shape and dtype, checked by the caller). A src sharing dst's storage is
// copied out first, so an overlapping view reads its values before they are overwritten.
void assign_entry(DeviceId, const dispatch::Prim& dst, const dispatch::Prim& src) {
  const CpuTensor& d = cpu_of(dst);
  const CpuTensor& s = cpu_of(src);
  if (d.shape().num_elements() == 0) return;
  if (d.storage() == s.storage()) {
    if (d.offset() == s.offset() && std::equal(d.strides().begin(), d.strides().end(), s.strides().begin())) return;
    const CpuRef tmp = alloc_tensor(s.dtype(), s.shape());
    copy_strided(s, tmp->data());
    copy_strided_to(*tmp, d.data(), d.strides().data());
    return;
  }
  copy_strided_to(s, d.data(), d.strides().data());
}

// Native graph replay: the recorded list of resolved entries runs here, synchronously.
void graph_replay_entry(DeviceId, dispatch::GraphProgram& g) { g.run(g); }
bool graph_supported_entry(DeviceId) { return true; }

}  // namespace

int omp_threads() {
#if TENSOR_HAVE_OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}

std::unique_ptr<dispatch::Backend> make_cpu_backend() {
  auto b = std::make_unique<dispatch::Backend>("cpu", kCpuDeviceType);
  register_creation_ops(*b);
  register_layout_ops(*b);
  register_binary_ops(*b);
  register_unary_ops(*b);
  register_matmul_ops(*b);
  register_reduce_ops(*b);
  register_moments_ops(*b);
  register_index_ops(*b);
  register_sort_ops(*b);
  register_activation_ops(*b);
  register_nn_ops(*b);
  register_distributed_ops(*b);
  register_quant_ops(*b);
  b->set<dispatch::DeviceOp::name>(&name_entry);
  b->set<dispatch::DeviceOp::flush>(&flush_entry);
  b->set<dispatch::DeviceOp::memory_cleanup>(&memory_cleanup_entry);
  b->set<dispatch::DeviceOp::dtype_usage>(&dtype_usage_entry);
  b->set<dispatch::DeviceOp::device_count>(&device_count_entry);
  b->set<dispatch::DeviceOp::default_settings>(&default_settings_entry);
  b->set<dispatch::DeviceOp::assign>(&assign_entry);
  b->set<dispatch::DeviceOp::graph_stop_capture>(&graph_stop_capture_entry);
  b->set<dispatch::DeviceOp::graph_replay>(&graph_replay_entry);
  b->set<dispatch::DeviceOp::graph_supported>(&graph_supported_entry);
  return b;
}

}  // namespace tensor::cpu
