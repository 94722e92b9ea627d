// Vulkan memory limits and failures: TENSOR_VK_MEMORY_LIMIT parsing, filling the tensor
// pool to its limit (ExecutionError, every earlier tensor intact, reuse after dropping
// some, an op whose output does not fit), the recovery steps before an allocation is
// refused (cached empty blocks freed, pending work waited for, a driver refusal
// retried), pipeline-creation errors naming the pipeline, and device loss (the
// internal hook, or vkQueueSubmit / vkWaitForFences / vkMapMemory returning it: driver
// failures lavapipe never produces come from stand-ins swapped into the loader table).
// meson tests: vulkan_memory (TENSOR_VK_MEMORY_LIMIT=16M), vulkan_memory_staging (the
// same through staging), vulkan_memory_bad_limit (a malformed limit) and
// vulkan_device_loss_* (each in its own process: a lost device stays lost).
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include <tensor/tensor.hpp>

#include "backends/vulkan/vk_backend.hpp"
#include "backends/vulkan/runtime/context.hpp"
#include "dispatch/dispatch.hpp"
#include "dispatch/validate.hpp"
#include "tests/vulkan/vk_test_util.hpp"

namespace {

using namespace tensor;
namespace d = tensor::dispatch;
using DT = d::DispatchTensor;
using Kind = d::Kind;
using vk_test::have_vulkan;
using vk_test::kCpu;
using vk_test::kVk;

constexpr std::uint64_t kMiB = std::uint64_t{1} << 20;
constexpr std::size_t kTensorFloats = 256 * 1024;  // 1 MiB of f32

// Exact small integers in f32 (-510..510), varying with the seed and the index.
std::vector<float> pattern(std::size_t n, int seed) {
  std::vector<float> v(n);
  for (std::size_t j = 0; j < n; ++j) v[j] = static_cast<float>((static_cast<std::size_t>(seed) * 7919 + j) % 1021) - 510.0f;
  return v;
}
DT upload(const std::vector<float>& v, DeviceId dev, Shape s = {}) {
  if (s.rank() == 0) s = Shape{v.size()};
  return d::from_data(TensorData::from(v, s), dev, Kind::Float);
}
std::vector<float> read_f32(const DT& t) { return d::read(t).to_vec<float>(); }

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// The message of the ExecutionError `f` throws ("" and a failure when it throws none).
std::string execution_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const ExecutionError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no ExecutionError";
  return {};
}

// Stand-ins for Vulkan entry points (the loader table's pointers are swapped, and put
// back by the guard), to reach the driver-failure paths lavapipe never takes.
PFN_vkAllocateMemory g_real_allocate = nullptr;
int g_allocate_refusals = 0;  // how many more vkAllocateMemory calls to refuse
VKAPI_ATTR VkResult VKAPI_CALL refusing_allocate(VkDevice dev, const VkMemoryAllocateInfo* info, const VkAllocationCallbacks* cb,
                                                 VkDeviceMemory* mem) {
  if (g_allocate_refusals > 0) {
    --g_allocate_refusals;
    return VK_ERROR_OUT_OF_DEVICE_MEMORY;
  }
  return g_real_allocate(dev, info, cb, mem);
}
PFN_vkWaitForFences g_real_wait = nullptr;
VKAPI_ATTR VkResult VKAPI_CALL losing_wait(VkDevice dev, std::uint32_t n, const VkFence* fences, VkBool32 all,
                                           std::uint64_t timeout) {
  (void)g_real_wait(dev, n, fences, all, timeout);  // the work really finishes first
  return VK_ERROR_DEVICE_LOST;
}
VKAPI_ATTR VkResult VKAPI_CALL failing_pipelines(VkDevice, VkPipelineCache, std::uint32_t, const VkComputePipelineCreateInfo*,
                                                 const VkAllocationCallbacks*, VkPipeline*) {
  return VK_ERROR_OUT_OF_HOST_MEMORY;
}
VKAPI_ATTR VkResult VKAPI_CALL losing_submit(VkQueue, std::uint32_t, const VkSubmitInfo*, VkFence) {
  return VK_ERROR_DEVICE_LOST;
}
VKAPI_ATTR VkResult VKAPI_CALL losing_map(VkDevice, VkDeviceMemory, VkDeviceSize, VkDeviceSize, VkMemoryMapFlags, void**) {
  return VK_ERROR_DEVICE_LOST;
}
template <typename F>
struct Swap {
  Swap(F& slot, F stand_in) : slot_(slot), saved_(slot) { slot = stand_in; }
  ~Swap() { slot_ = saved_; }
  Swap(const Swap&) = delete;
  Swap& operator=(const Swap&) = delete;
  F& slot_;
  F saved_;
};

TEST(VulkanMemoryLimitSyntax, ByteCountsWithKMGSuffixes) {
  EXPECT_EQ(vulkan::parse_memory_limit("1"), 1u);
  EXPECT_EQ(vulkan::parse_memory_limit("1048576"), kMiB);
  EXPECT_EQ(vulkan::parse_memory_limit("4K"), 4096u);
  EXPECT_EQ(vulkan::parse_memory_limit("4k"), 4096u);
  EXPECT_EQ(vulkan::parse_memory_limit("16M"), 16 * kMiB);
  EXPECT_EQ(vulkan::parse_memory_limit("3g"), 3 * 1024 * kMiB);
  EXPECT_EQ(vulkan::parse_memory_limit("17179869183G"), std::uint64_t{17179869183} << 30);  // 2^64 - 2^30
  for (const char* bad : {"", "M", "abc", "12Q", "0", "0K", "1.5G", "-5", " 5", "5 ", "16MB", "16MiB",
                          "18446744073709551616", "17179869184G"}) {
    const std::string msg = execution_error([&] { vulkan::parse_memory_limit(bad); });
    EXPECT_TRUE(contains(msg, "[vulkan] TENSOR_VK_MEMORY_LIMIT; expected ")) << bad << ": " << msg;
    EXPECT_TRUE(contains(msg, std::string("got '") + bad + "'")) << bad << ": " << msg;
  }
}

// The pipeline key keeps every specialization constant whole: an op code >= 256
// (which the old key packed into 8 bits, aliasing code - 256) and a dtype code with
// high bits set name other pipelines; more constants than the key holds raise.
TEST(VulkanPipelineKey, EverySpecializationBitCounts) {
  using vulkan::ShaderFamily;
  auto key = [](ShaderFamily f, int variant, std::uint32_t sg, std::vector<std::uint32_t> spec) {
    return vulkan::pipeline_key(f, variant, sg, spec.data(), spec.size());
  };
  const auto base = key(ShaderFamily::Elementwise, 0, 0, {1, 1, 1, 1, 0, 1});
  EXPECT_TRUE(base == key(ShaderFamily::Elementwise, 0, 0, {1, 1, 1, 1, 0, 1}));
  EXPECT_FALSE(base == key(ShaderFamily::Elementwise, 0, 0, {257, 1, 1, 1, 0, 1}));
  EXPECT_FALSE(base == key(ShaderFamily::Elementwise, 0, 0, {1, 1u | (1u << 31), 1, 1, 0, 1}));
  EXPECT_FALSE(base == key(ShaderFamily::Elementwise, 0, 0, {1, 1, 1, 1, 0, 1, 0}));  // one more constant
  EXPECT_FALSE(base == key(ShaderFamily::Elementwise, 1, 0, {1, 1, 1, 1, 0, 1}));     // WIDE
  EXPECT_FALSE(base == key(ShaderFamily::Reduce, 0, 0, {1, 1, 1, 1, 0, 1}));
  EXPECT_FALSE(key(ShaderFamily::Reduce, 2, 16, {1, 1, 1}) == key(ShaderFamily::Reduce, 2, 32, {1, 1, 1}));
  // Every (op code, dtype) pair of a wide range gets its own key.
  std::set<std::array<std::uint32_t, vulkan::PipelineKey::kMaxSpec + 2>> seen;
  for (std::uint32_t op = 0; op < 600; ++op)
    for (std::uint32_t dt = 0; dt < 15; ++dt) seen.insert(key(ShaderFamily::Index, 0, 0, {op, dt, dt}).words);
  EXPECT_EQ(seen.size(), 600u * 15u);
  constexpr std::size_t kMax = vulkan::PipelineKey::kMaxSpec;
  EXPECT_EQ(kMax, 16u);
  EXPECT_NO_THROW(key(ShaderFamily::ElementwiseProgram, 0, 0, std::vector<std::uint32_t>(kMax, 0u)));
  const std::string msg = execution_error([&] { key(ShaderFamily::Rows, 0, 0, std::vector<std::uint32_t>(kMax + 1, 0u)); });
  EXPECT_TRUE(contains(msg, "expected at most 16 specialization constants; got 17")) << msg;
}

// Timestamp queries (the profiler's device clock): while on, the work a sync waited
// for adds its device time, bounded by the wall time around it; while off, nothing
// is added. A software device (lavapipe) has timestamps.
class VulkanTimestamps : public vk_test::VulkanTest {};
TEST_F(VulkanTimestamps, SyncedWorkAddsDeviceTimeOnlyWhileOn) {
  vulkan::Context* c = vulkan::context(0);
  ASSERT_NE(c, nullptr);
  c->ensure_init();
  if (c->software()) {
    ASSERT_TRUE(c->timestamps_supported());
  }
  const bool was = c->timestamps_on();
  if (!c->timestamps_supported()) {
    c->set_timestamps(true);
    EXPECT_FALSE(c->timestamps_on());
    return;
  }
  const std::vector<float> av = pattern(128 * 128, 3);
  DT a = upload(av, kVk, Shape{128, 128});
  d::sync(kVk);
  c->set_timestamps(false);
  const std::uint64_t t0 = c->device_time_ns();
  EXPECT_EQ(read_f32(d::matmul(a, a)).size(), av.size());
  EXPECT_EQ(c->device_time_ns(), t0);
  c->set_timestamps(true);
  EXPECT_TRUE(c->timestamps_on());
  const auto w0 = std::chrono::steady_clock::now();
  EXPECT_EQ(read_f32(d::matmul(a, a)).size(), av.size());
  const auto wall = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - w0).count();
  const std::uint64_t t1 = c->device_time_ns();
  EXPECT_GT(t1, t0);
  EXPECT_LE(t1 - t0, static_cast<std::uint64_t>(wall));
  c->set_timestamps(was);
}

// Runs under TENSOR_VK_MEMORY_LIMIT (16M in meson); each test starts from a pool
// without cached empty blocks and checks the stats are back to that baseline.
class VulkanMemoryLimit : public vk_test::VulkanTest {
 protected:
  void SetUp() override {
    VulkanTest::SetUp();
    if (IsSkipped()) return;
    const char* env = std::getenv("TENSOR_VK_MEMORY_LIMIT");
    if (!env) GTEST_SKIP() << "run with TENSOR_VK_MEMORY_LIMIT=16M (meson test vulkan_memory)";
    ctx_ = vulkan::context(0);
    ctx_->ensure_init();
    limit_ = ctx_->memory_limit();
    ASSERT_EQ(limit_, vulkan::parse_memory_limit(env));
    ASSERT_EQ(ctx_->memory_limit_source(), "TENSOR_VK_MEMORY_LIMIT");
    ASSERT_LE(limit_, 64 * kMiB) << "these tests fill the pool: keep the limit small";
    d::memory_cleanup(kVk);
    base_ = d::memory_stats(kVk);
  }
  void TearDown() override {
    if (ctx_) {
      d::sync(kVk);
      EXPECT_EQ(d::memory_stats(kVk).bytes_in_use, base_.bytes_in_use) << "a tensor's memory was not given back";
      d::memory_cleanup(kVk);
      EXPECT_LE(d::memory_stats(kVk).bytes_reserved, base_.bytes_reserved);
    }
    VulkanTest::TearDown();
  }
  // Uploads 1 MiB tensors until one is refused; returns the refusal's message.
  std::string fill(std::vector<DT>& out, std::vector<int>& seeds, int first_seed) {
    for (int i = 0; i < static_cast<int>(limit_ / kMiB) + 8; ++i) {
      try {
        out.push_back(upload(pattern(kTensorFloats, first_seed + i), kVk));
        seeds.push_back(first_seed + i);
      } catch (const ExecutionError& e) {
        return e.what();
      }
    }
    return {};
  }
  void expect_out_of_memory_message(const std::string& msg) {
    EXPECT_TRUE(contains(msg, "] out of device memory on vulkan:0; expected room for ") && msg.rfind("[vulkan]", 0) != 0) << msg;
    EXPECT_TRUE(contains(msg, "; got ")) << msg;
    EXPECT_TRUE(contains(msg, "TENSOR_VK_MEMORY_LIMIT")) << msg;
    EXPECT_TRUE(contains(msg, std::to_string(limit_))) << msg;
  }
  vulkan::Context* ctx_ = nullptr;
  std::uint64_t limit_ = 0;
  MemoryStats base_{};
};

TEST_F(VulkanMemoryLimit, FillingThePoolFailsCleanlyAndFreedMemoryIsReused) {
  std::vector<DT> ts;
  std::vector<int> seeds;
  const std::string msg = fill(ts, seeds, 0);
  ASSERT_FALSE(msg.empty()) << "no error after " << ts.size() << " MiB under a " << limit_ << "-byte limit";
  expect_out_of_memory_message(msg);
  // At least three quarters of the limit is usable, never more than all of it.
  EXPECT_GE(ts.size() * kMiB, limit_ * 3 / 4);
  EXPECT_LE(ts.size() * kMiB, limit_);
  EXPECT_LE(d::memory_stats(kVk).bytes_reserved, limit_);
  for (std::size_t i = 0; i < ts.size(); ++i) ASSERT_EQ(read_f32(ts[i]), pattern(kTensorFloats, seeds[i])) << "tensor " << i;

  // Drop every other tensor: as many new ones fit again (the freed ranges are reused).
  std::vector<DT> kept;
  std::vector<int> kept_seeds;
  for (std::size_t i = 0; i < ts.size(); i += 2) {
    kept.push_back(ts[i]);
    kept_seeds.push_back(seeds[i]);
  }
  const std::size_t dropped = ts.size() - kept.size();
  ts.clear();
  const std::uint64_t reserved = d::memory_stats(kVk).bytes_reserved;
  for (std::size_t i = 0; i < dropped; ++i) {
    kept.push_back(upload(pattern(kTensorFloats, 1000 + static_cast<int>(i)), kVk));
    kept_seeds.push_back(1000 + static_cast<int>(i));
  }
  EXPECT_EQ(d::memory_stats(kVk).bytes_reserved, reserved) << "reuse needed no new block";
  expect_out_of_memory_message(execution_error([&] { upload(pattern(kTensorFloats, 99), kVk); }));
  for (std::size_t i = 0; i < kept.size(); ++i) ASSERT_EQ(read_f32(kept[i]), pattern(kTensorFloats, kept_seeds[i])) << "tensor " << i;

  // An op whose output cannot fit even in an empty pool: an error, inputs intact.
  kept.resize(2);
  const std::size_t n = 4096;  // 4096 x 4096 f32 = 64 MiB
  const std::vector<float> av = pattern(n, 7), bv = pattern(n, 8);
  DT a = upload(av, kVk, Shape{n, 1}), b = upload(bv, kVk, Shape{1, n});
  expect_out_of_memory_message(execution_error([&] { d::read(d::binary(OpCode::add, a, b)); }));
  EXPECT_EQ(read_f32(a), av);
  EXPECT_EQ(read_f32(b), bv);
  for (std::size_t i = 0; i < kept.size(); ++i) EXPECT_EQ(read_f32(kept[i]), pattern(kTensorFloats, kept_seeds[i]));
  // The same op on a slice that fits works and is right.
  const std::vector<Slice> rows{Slice::range(0, 16)};
  const std::vector<float> sum = read_f32(d::binary(OpCode::add, d::slice(a, rows), b));
  ASSERT_EQ(sum.size(), 16 * n);
  for (std::size_t i = 0; i < 16; ++i)
    for (std::size_t j = 0; j < n; ++j) ASSERT_EQ(sum[i * n + j], av[i] + bv[j]) << i << "," << j;
}

// A dispatch beyond maxComputeWorkGroupCount is refused with an ExecutionError naming
// the op and the limit before anything is recorded: the device is not lost, work goes on.
TEST_F(VulkanMemoryLimit, AWorkgroupGridBeyondTheDeviceIsRefusedBeforeRecording) {
  const DT x = upload(pattern(64, 31), kVk);
  const std::uint32_t* grid = ctx_->limits().maxComputeWorkGroupCount;
  ASSERT_GE(grid[0], 65535u);  // the Vulkan minimum, in each dim
  int refused = 0;
  for (int dim = 0; dim < 3; ++dim) {
    if (grid[dim] == UINT32_MAX) continue;  // nothing lies beyond it in this dim
    std::uint32_t g[3] = {1, 1, 1};
    g[dim] = grid[dim] + 1;
    d::set_current_op(OpCode::add);
    const std::string msg = execution_error([&] {
      ctx_->dispatch(vulkan::ShaderFamily::Elementwise, {}, {}, {}, g[0], g[1], g[2]);
    });
    EXPECT_EQ(msg.rfind("[add] too many workgroups for the ", 0), 0u) << msg;
    EXPECT_TRUE(contains(msg, "(maxComputeWorkGroupCount); got ")) << msg;
    ++refused;
  }
  EXPECT_GE(refused, 2) << "devices bound y and z of the grid (lavapipe: 65535 each)";
  EXPECT_FALSE(ctx_->lost());
  EXPECT_EQ(read_f32(d::scalar(OpCode::add_scalar, x, Scalar(1.0)))[0], pattern(64, 31)[0] + 1.0f);
}

TEST_F(VulkanMemoryLimit, CachedEmptyBlocksAreFreedBeforeARequestIsRefused) {
  {
    std::vector<DT> ts;
    std::vector<int> seeds;
    ASSERT_FALSE(fill(ts, seeds, 0).empty());
  }
  d::sync(kVk);
  const MemoryStats cached = d::memory_stats(kVk);
  EXPECT_EQ(cached.bytes_in_use, base_.bytes_in_use);
  // The blocks stay reserved (cached for reuse) ...
  ASSERT_GE(cached.bytes_reserved, base_.bytes_reserved + limit_ * 3 / 4);
  // ... until a request larger than the room left needs them.
  const std::size_t big = static_cast<std::size_t>(limit_ / 2 / 4) + 1;  // floats: over half the limit
  const std::vector<float> v = pattern(big, 3);
  DT t = upload(v, kVk);
  EXPECT_LE(d::memory_stats(kVk).bytes_reserved, limit_);
  EXPECT_EQ(read_f32(t), v);
}

TEST_F(VulkanMemoryLimit, PendingWorkIsWaitedForBeforeARequestIsRefused) {
  // x and y each hold over a third of the limit; x is dropped while the recorded
  // (not yet submitted) op that reads it still holds its buffer. A third tensor of
  // the same size fits only once that work has run and let x go.
  const std::size_t n = static_cast<std::size_t>(limit_ / 3 / 4) + 1024;
  const std::vector<float> xv = pattern(n, 11), zv = pattern(n, 12);
  DT y;
  {
    DT x = upload(xv, kVk);
    y = d::scalar(OpCode::mul_scalar, x, Scalar(2.0));
  }
  EXPECT_GE(d::memory_stats(kVk).bytes_in_use, base_.bytes_in_use + 2 * n * 4) << "x should still be held by pending work";
  DT z = upload(zv, kVk);
  const std::vector<float> yv = read_f32(y);
  ASSERT_EQ(yv.size(), n);
  for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(yv[i], 2.0f * xv[i]) << i;
  EXPECT_EQ(read_f32(z), zv);
}

// Work queued without any read back (issue 16's soak): the submissions pending stay
// within kMaxInFlight and the command batches in existence within that plus the
// spares kept, so the buffers they hold and their arenas stay bounded; the chain's
// value is still exact.
TEST_F(VulkanMemoryLimit, QueuedWorkWithoutReadsHoldsBoundedBatches) {
  const std::vector<float> xv = pattern(64, 21);
  DT y = upload(xv, kVk);
  constexpr int kOps = 3000;  // ~47 batches of 64 dispatches
  std::size_t most_in_flight = 0, most_batches = 0;
  for (int i = 0; i < kOps; ++i) {
    y = d::scalar(OpCode::add_scalar, y, Scalar(1.0));
    most_in_flight = std::max(most_in_flight, ctx_->in_flight_count());
    most_batches = std::max(most_batches, ctx_->batch_count());
  }
  EXPECT_LE(most_in_flight, vulkan::kMaxInFlight);
  EXPECT_LE(most_batches, vulkan::kMaxInFlight + vulkan::kMaxSpare + 1);  // + the one recording
  EXPECT_LE(d::memory_stats(kVk).bytes_in_use, base_.bytes_in_use + (vulkan::kMaxInFlight + 2) * 64 * 256);
  const std::vector<float> got = read_f32(y);
  ASSERT_EQ(got.size(), xv.size());
  for (std::size_t i = 0; i < xv.size(); ++i) ASSERT_EQ(got[i], xv[i] + static_cast<float>(kOps)) << i;
  EXPECT_EQ(ctx_->in_flight_count(), 0u);
  EXPECT_LE(ctx_->batch_count(), vulkan::kMaxSpare + 1);
}

// A driver that refuses vkAllocateMemory (VK_ERROR_OUT_OF_DEVICE_MEMORY): one refusal
// is retried after reclaiming, a persistent one is an ExecutionError naming it.
TEST_F(VulkanMemoryLimit, DriverOutOfMemoryIsRetriedThenAnExecutionError) {
  const std::size_t n = static_cast<std::size_t>(limit_ / 3 / 4);  // over a block: its own allocation
  const std::vector<float> v = pattern(n, 21), w = pattern(n, 22);
  DT t;
  {
    g_real_allocate = vulkan::vkAllocateMemory;
    Swap<PFN_vkAllocateMemory> swap(vulkan::vkAllocateMemory, &refusing_allocate);
    g_allocate_refusals = 1;
    t = upload(v, kVk);
    EXPECT_EQ(g_allocate_refusals, 0);
    g_allocate_refusals = 1000;
    const std::string msg = execution_error([&] { upload(w, kVk); });
    g_allocate_refusals = 0;
    EXPECT_TRUE(contains(msg, "] out of device memory on vulkan:0; expected room for ") && msg.rfind("[vulkan]", 0) != 0) << msg;
    EXPECT_TRUE(contains(msg, "; got VK_ERROR_OUT_OF_DEVICE_MEMORY from vkAllocateMemory")) << msg;
  }
  EXPECT_EQ(read_f32(t), v);
  EXPECT_EQ(read_f32(upload(w, kVk)), w);
}

// The matmul tile check runs before its pipeline is created: with a (pretended)
// smaller shared memory, a new matmul pipeline is refused with an error naming it,
// and the device works on once the real limit is back. Likewise for a driver that
// fails to create a pipeline.
TEST_F(VulkanMemoryLimit, PipelineCreationFailuresNameThePipeline) {
  const std::uint32_t real = ctx_->limits().maxComputeSharedMemorySize;
  const std::vector<float> av = pattern(12, 1), bv = pattern(8, 2);
  DT a = upload(av, kVk, Shape{3, 4}), b = upload(bv, kVk, Shape{4, 2});
  ctx_->set_shared_memory_limit_for_testing(1024);
  const std::string msg = execution_error([&] { d::read(d::matmul(a, b)); });
  ctx_->set_shared_memory_limit_for_testing(real);
  EXPECT_TRUE(contains(msg, "[matmul]")) << msg;
  EXPECT_TRUE(contains(msg, "maxComputeSharedMemorySize")) << msg;
  EXPECT_TRUE(contains(msg, "expected at most 1024")) << msg;
  const std::vector<float> c = read_f32(d::matmul(a, b));
  ASSERT_EQ(c.size(), 6u);
  for (std::size_t i = 0; i < 3; ++i)
    for (std::size_t j = 0; j < 2; ++j) {
      float want = 0;
      for (std::size_t k = 0; k < 4; ++k) want += av[i * 4 + k] * bv[k * 2 + j];
      EXPECT_EQ(c[i * 2 + j], want) << i << "," << j;
    }
  // A failing vkCreateComputePipelines names the pipeline's family (cumsum: the scan
  // family, not used before in this process); nothing is cached, the retry works.
  const std::vector<float> sv = pattern(5, 4);
  DT x = upload(sv, kVk);
  {
    Swap<PFN_vkCreateComputePipelines> swap(vulkan::vkCreateComputePipelines, &failing_pipelines);
    const std::string e = execution_error([&] { d::read(d::reduce_dim(OpCode::cumsum, x, 0)); });
    EXPECT_TRUE(contains(e, "vkCreateComputePipelines (pipeline scan)")) << e;
    EXPECT_TRUE(contains(e, "got VK_ERROR_OUT_OF_HOST_MEMORY")) << e;
  }
  const std::vector<float> cs = read_f32(d::reduce_dim(OpCode::cumsum, x, 0));
  ASSERT_EQ(cs.size(), sv.size());
  float run = 0;
  for (std::size_t i = 0; i < sv.size(); ++i) EXPECT_EQ(cs[i], run += sv[i]) << i;
}

// A malformed TENSOR_VK_MEMORY_LIMIT fails device init with an error naming it; the
// cpu device keeps working (meson test vulkan_memory_bad_limit).
TEST(VulkanMemoryBadLimit, DeviceInitFailsNamingTheVariable) {
  const char* env = std::getenv("TENSOR_VK_MEMORY_LIMIT");
  const bool malformed = env && [&] {
    try {
      vulkan::parse_memory_limit(env);
      return false;
    } catch (const ExecutionError&) {
      return true;
    }
  }();
  if (!have_vulkan() || !malformed) GTEST_SKIP() << "run with a malformed TENSOR_VK_MEMORY_LIMIT (meson test vulkan_memory_bad_limit)";
  for (int attempt = 0; attempt < 2; ++attempt) {  // the failure is remembered, not retried
    const std::string msg = execution_error([] { upload({1, 2}, kVk); });
    EXPECT_TRUE(contains(msg, "could not be initialised")) << msg;
    EXPECT_TRUE(contains(msg, "TENSOR_VK_MEMORY_LIMIT; expected")) << msg;
    EXPECT_TRUE(contains(msg, std::string("got '") + env + "'")) << msg;
  }
  EXPECT_EQ(read_f32(d::scalar(OpCode::add_scalar, upload({1, 2}, kCpu), Scalar(1.0))), (std::vector<float>{2, 3}));
}

// After a device loss: reads, syncs and new work raise ExecutionError naming the loss,
// tensors can be dropped (their memory goes back), the cpu keeps working and the
// process exits cleanly. A real loss cannot be provoked on lavapipe: the loss comes
// from TENSOR_VK_TEST_DEVICE_LOSS = hook (the internal hook), submit, fence or map
// (that call returns VK_ERROR_DEVICE_LOST), one per process (meson tests vulkan_device_loss_*).
TEST(VulkanDeviceLoss, ReadsSyncsAndNewWorkFailDroppingIsSafe) {
  const char* mode_env = std::getenv("TENSOR_VK_TEST_DEVICE_LOSS");
  if (!have_vulkan() || !mode_env) GTEST_SKIP() << "leaves vulkan:0 lost: run alone (meson tests vulkan_device_loss_*)";
  const std::string mode = mode_env;
  const std::uint64_t messages = vulkan::validation_message_count();
  vulkan::Context& ctx = *vulkan::context(0);
  d::sync(kVk);
  const MemoryStats base = d::memory_stats(kVk);
  g_real_wait = vulkan::vkWaitForFences;
  {
    const std::vector<float> xv = pattern(1000, 1);
    DT x = upload(xv, kVk);
    DT done = d::scalar(OpCode::add_scalar, x, Scalar(1.0));
    d::sync(kVk);
    DT pending = d::unary(OpCode::exp, done);  // recorded, not yet submitted
    DT view = d::swap_dims(upload(pattern(6, 2), kVk, Shape{2, 3}), 0, 1);
    EXPECT_GT(d::memory_stats(kVk).bytes_in_use, base.bytes_in_use);
    std::string where, first;
    if (mode == "hook") {
      where = "the test hook";
      ctx.simulate_device_loss(where.c_str());
    } else if (mode == "submit") {
      where = "vkQueueSubmit";
      Swap<PFN_vkQueueSubmit> swap(vulkan::vkQueueSubmit, &losing_submit);
      first = execution_error([] { d::sync(kVk); });
    } else if (mode == "fence") {
      where = "vkWaitForFences";
      Swap<PFN_vkWaitForFences> swap(vulkan::vkWaitForFences, &losing_wait);
      first = execution_error([] { d::sync(kVk); });
    } else if (mode == "map") {
      where = "vkMapMemory";
      // 80 MiB: beyond a pool block (64 MiB at most), so a new mapping is needed: of
      // the tensor's memory where it is host-visible, else of its staging buffer.
      const std::vector<float> big = pattern(std::size_t{20} << 20, 3);
      Swap<PFN_vkMapMemory> swap(vulkan::vkMapMemory, &losing_map);
      first = execution_error([&] { upload(big, kVk); });
    } else {
      FAIL() << "TENSOR_VK_TEST_DEVICE_LOSS: expected hook, submit, fence or map; got " << mode;
    }
    if (mode != "hook") {
      EXPECT_TRUE(contains(first, "VK_ERROR_DEVICE_LOST")) << first;
    }
    EXPECT_TRUE(ctx.lost());
    auto expect_lost = [&](const char* what, const std::function<void()>& f) {
      const std::string msg = execution_error(f);
      // Named after the op the user called (read: into_data), not the backend.
      EXPECT_TRUE(contains(msg, "] vulkan device 0 (") && msg.rfind("[vulkan]", 0) != 0) << what << ": " << msg;
      EXPECT_TRUE(contains(msg, "lost; expected a working device; got VK_ERROR_DEVICE_LOST from " + where)) << what << ": " << msg;
    };
    expect_lost("read", [&] { d::read(x); });
    expect_lost("read of a pending result", [&] { d::read(pending); });
    expect_lost("read of a view", [&] { d::read(view); });
    expect_lost("sync", [&] { d::sync(kVk); });
    expect_lost("upload", [&] { upload({1, 2, 3}, kVk); });
    expect_lost("new op", [&] { d::read(d::scalar(OpCode::mul_scalar, x, Scalar(3.0))); });
    expect_lost("empty", [&] { d::create(OpCode::empty, Shape{4}, kVk, Kind::Float, DType::F32); });
    expect_lost("to the cpu", [&] { d::to_device(done, kCpu); });
    expect_lost("sync again", [&] { d::sync(kVk); });
  }  // every vulkan tensor dropped here
  EXPECT_EQ(d::memory_stats(kVk).bytes_in_use, base.bytes_in_use);
  d::memory_cleanup(kVk);  // frees the empty blocks; no throw, no hang
  EXPECT_LE(d::memory_stats(kVk).bytes_reserved, base.bytes_reserved);
  // The cpu device is unaffected.
  const std::vector<float> c = read_f32(d::binary(OpCode::mul, upload({1, 2, 3}, kCpu), upload({4, 5, 6}, kCpu)));
  EXPECT_EQ(c, (std::vector<float>{4, 10, 18}));
  EXPECT_EQ(vulkan::validation_message_count(), messages) << "validation layer reported problems (see stderr)";
}

}  // namespace
