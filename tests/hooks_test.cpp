// The one invocation path (dispatch/hooks.hpp) and its first user, the op profiler
// (tensor/profile.hpp), on every device (cpu, mini, vulkan:0 when present; one per
// process with TENSOR_TEST_DEVICE); plus the stable public op codes against the
// committed dispatch/table/op_codes.txt and the op table's derived columns.
#include <atomic>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include <tensor/profile.hpp>

#include "conformance/devices.hpp"
#include "dispatch/hooks.hpp"
#include "dispatch/table/ops.hpp"
#include "dispatch/profiler.hpp"
#include "test_util.hpp"

namespace {

using namespace tt;
namespace d = tensor::dispatch;

const Device& dev() { return tt::conf::DeviceScope::current(); }

// Records every op it sees: code, the metadata announced before the op ran, the
// input count, and the output the op produced.
struct Seen {
  OpCode op;
  d::OutMeta meta;
  std::size_t inputs;
  std::vector<Shape> out_shapes;
  std::vector<DType> out_dtypes;
};

class Recorder final : public d::OpHook {
 public:
  void around(d::OpCall& call, const d::OpNext& next) override {
    Seen s{call.op, call.out, call.inputs.size(), {}, {}};
    next(call);
    for (const d::DispatchTensor& t : call.outputs) {
      s.out_shapes.push_back(t.shape());
      s.out_dtypes.push_back(t.dtype());
    }
    seen.push_back(std::move(s));
  }
  std::vector<OpCode> ops() const {
    std::vector<OpCode> v;
    for (const Seen& s : seen) v.push_back(s.op);
    return v;
  }
  std::vector<Seen> seen;
};

// Installs a hook on this thread for the scope.
struct ThreadHook {
  explicit ThreadHook(d::OpHook* h) : h_(h) { d::add_thread_hook(h_); }
  ~ThreadHook() { d::remove_thread_hook(h_); }
  d::OpHook* h_;
};

class Hooks : public ::testing::TestWithParam<Device> {
 protected:
  void SetUp() override { scope_.enter(GetParam()); }
  void TearDown() override { scope_.leave(); }
  tt::conf::DeviceScope scope_;
};

INSTANTIATE_TEST_SUITE_P(Devices, Hooks, ::testing::ValuesIn(tt::conf::devices()),
                         [](const ::testing::TestParamInfo<Device>& p) { return tt::conf::test_name(p.param); });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(Hooks);

Tensor<2> f2(std::vector<float> v, std::size_t r, std::size_t c) {
  return Tensor<2>::from_data(TensorData::from<float>(v, {r, c}), dev());
}

TEST_P(Hooks, OpsTheBackendSkipsStillPassTheHooks) {
  const auto a = f2({1, 2, 3, 4, 5, 6}, 2, 3);
  Recorder rec;
  {
    ThreadHook h(&rec);
    auto same_cast = a.cast(DType::F32);          // same dtype: no backend call
    auto same_dev = a.to_device(dev());           // same device
    auto no_swap = a.swap_dims(1, 1);             // identity swap
    auto same_shape = a.reshape(std::array<std::int64_t, 2>{2, 3});
    auto once = a.repeat_dim(0, 1);
    auto sum = a + a;
    (void)same_cast, (void)same_dev, (void)no_swap, (void)same_shape, (void)once, (void)sum;
  }
  const std::vector<OpCode> want = {OpCode::cast, OpCode::to_device, OpCode::swap_dims, OpCode::reshape,
                                    OpCode::repeat_dim, OpCode::add};
  ASSERT_EQ(rec.ops(), want);
  for (const Seen& s : rec.seen) {
    EXPECT_EQ(s.meta.shape, (Shape{2, 3})) << d::op_name(s.op);
    ASSERT_EQ(s.out_shapes.size(), 1u) << d::op_name(s.op);
    EXPECT_EQ(s.out_shapes[0], (Shape{2, 3})) << d::op_name(s.op);
  }
  EXPECT_EQ(rec.seen.back().inputs, 2u);  // add: both operands
}

TEST_P(Hooks, AnnouncedMetadataMatchesTheOutput) {
  const auto a = f2({1, 5, 3, 4, 2, 6}, 2, 3);
  const auto b = f2({1, 0, 0, 1, 1, 1}, 3, 2);
  Recorder rec;
  {
    ThreadHook h(&rec);
    (void)a.matmul(b);                  // [2, 2]
    (void)a.sum_dim(1);                 // [2, 1]
    (void)a.cumsum(1);                  // [2, 3]
    (void)a.topk(2, 1);                 // [2, 2]
    (void)a.argmax(1);                  // [2, 1] int
    (void)a.transpose();                // [3, 2]
    (void)a.unfold(1, 2, 1);            // [2, 2, 2]
    (void)a.greater_elem(2.0f);         // [2, 3] bool
    (void)a.sum();                      // [1]
    (void)tensor::cat<2, Float>({a, a}, 0);  // [4, 3]
  }
  ASSERT_EQ(rec.seen.size(), 10u);
  const std::vector<Shape> shapes = {{2, 2}, {2, 1}, {2, 3}, {2, 2}, {2, 1}, {3, 2}, {2, 2, 2}, {2, 3}, {1}, {4, 3}};
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    const Seen& s = rec.seen[i];
    EXPECT_TRUE(s.meta.shape_known) << d::op_name(s.op);
    EXPECT_EQ(s.meta.shape, shapes[i]) << d::op_name(s.op);
    ASSERT_EQ(s.out_shapes.size(), 1u) << d::op_name(s.op);
    EXPECT_EQ(s.out_shapes[0], shapes[i]) << d::op_name(s.op);
    EXPECT_EQ(s.out_dtypes[0], s.meta.dtype) << d::op_name(s.op);
  }
  EXPECT_EQ(rec.seen[4].meta.kind, tensor::detail::Kind::Int);
  EXPECT_EQ(rec.seen[7].meta.kind, tensor::detail::Kind::Bool);
  EXPECT_EQ(rec.seen[1].inputs, 1u);
  EXPECT_EQ(rec.seen[9].inputs, 2u);  // cat: every part
}

// A hook that replaces exp by the identity: wrapping, not only observing.
class SkipExp final : public d::OpHook {
 public:
  void around(d::OpCall& call, const d::OpNext& next) override {
    if (call.op != OpCode::exp) return next(call);
    call.outputs[0] = *call.inputs[0];
  }
};

TEST_P(Hooks, AHookCanReplaceTheOp) {
  const auto a = f2({0, 1, 2, 3}, 2, 2);
  SkipExp skip;
  std::vector<float> replaced;
  {
    ThreadHook h(&skip);
    replaced = a.exp().into_data().to_vec<float>();
  }
  EXPECT_EQ(replaced, (std::vector<float>{0, 1, 2, 3}));
  const auto normal = a.exp().into_data().to_vec<float>();  // hook gone: exp again
  EXPECT_NEAR(normal[1], 2.718281828f, 1e-5f);
}

// A hook that drops the op entirely is an error the caller sees, not an empty tensor.
class Drop final : public d::OpHook {
 public:
  void around(d::OpCall&, const d::OpNext&) override {}
};

TEST_P(Hooks, AHookThatProducesNothingIsAnError) {
  const auto a = f2({0, 1, 2, 3}, 2, 2);
  Drop drop;
  ThreadHook h(&drop);
  EXPECT_TRUE(throws_with<Error>([&] { (void)a.neg(); }, {"[neg]", "hook"}));
}

TEST_P(Hooks, ThreadHooksSeeOnlyTheirThreadGlobalHooksSeeAll) {
  const auto a = f2({1, 2, 3, 4}, 2, 2);
  Recorder mine;
  std::size_t other_thread_ops = 0;
  {
    ThreadHook h(&mine);
    std::thread t([&] { (void)(a + a); });
    t.join();
    (void)(a * a);
  }
  EXPECT_EQ(mine.ops(), (std::vector<OpCode>{OpCode::mul}));

  struct Counter final : d::OpHook {
    std::atomic<std::size_t> n{0};
    void around(d::OpCall& c, const d::OpNext& next) override { n.fetch_add(1); next(c); }
  } global;
  d::add_global_hook(&global);
  std::thread t([&] { (void)(a + a); (void)(a - a); });
  t.join();
  d::remove_global_hook(&global);
  other_thread_ops = global.n.load();
  EXPECT_EQ(other_thread_ops, 2u);
  EXPECT_EQ(d::hooks_detail::g_installed.load(), 0u);  // back to the direct path
}

TEST_P(Hooks, TheInputsABackendMayReuseAreUntouchedByAnObservingHook) {
  // The hook observes without holding references, so an op may still write into a
  // unique input: the values stay right either way.
  Recorder rec;
  ThreadHook h(&rec);
  auto x = f2({1, 2, 3, 4}, 2, 2);
  auto y = std::move(x) + f2({10, 20, 30, 40}, 2, 2);
  EXPECT_EQ(y.into_data().to_vec<float>(), (std::vector<float>{11, 22, 33, 44}));
}

// ---- the profiler ---------------------------------------------------------------------

TEST_P(Hooks, ProfilerCountsCallsTimeAndBytesPerOp) {
  const auto a = f2({1, 2, 3, 4, 5, 6}, 2, 3);
  const auto b = f2({1, 0, 0, 1, 1, 1}, 3, 2);
  (void)a.into_data();  // settle uploads before the profile
  tensor::profile::start();
  EXPECT_TRUE(tensor::profile::active());
  for (int i = 0; i < 3; ++i) (void)(a + a);
  const auto m = a.matmul(b);
  const tensor::ProfileResult mid = tensor::profile::read();
  EXPECT_EQ(mid.rows.size(), 2u);
  (void)m.sum();
  const tensor::ProfileResult r = tensor::profile::stop();
  EXPECT_FALSE(tensor::profile::active());

  std::map<std::string, tensor::ProfileRow> by_op;
  for (const auto& row : r.rows) {
    EXPECT_EQ(row.device, dev().to_string());
    by_op[row.op] = row;
  }
  ASSERT_EQ(by_op.size(), 3u);
  EXPECT_EQ(by_op["add"].calls, 3u);
  EXPECT_EQ(by_op["add"].bytes, 3u * 6 * 4);  // three [2, 3] f32 outputs
  EXPECT_EQ(by_op["matmul"].calls, 1u);
  EXPECT_EQ(by_op["matmul"].bytes, 4u * 4);   // [2, 2] f32
  EXPECT_EQ(by_op["sum"].bytes, 4u);          // [1] f32
  for (const auto& [name, row] : by_op) {
    EXPECT_GT(row.total_ms, 0.0) << name;
    EXPECT_NEAR(row.mean_us, row.total_ms * 1e3 / static_cast<double>(row.calls), 1e-9) << name;
  }
  for (std::size_t i = 1; i < r.rows.size(); ++i) EXPECT_GE(r.rows[i - 1].total_ms, r.rows[i].total_ms);

  ASSERT_EQ(r.clocks.size(), 1u);
  EXPECT_EQ(r.clocks[0].device, dev().to_string());
  const bool cpu = dev().id().type_id == kCpuDeviceType;
  const bool vulkan = dev().id().type_id == kVulkanDeviceType;
  // Vulkan times ops with timestamp queries where the queue has them, which lavapipe
  // (llvmpipe, the CI's device) does; the cpu and mini have the host's clock only.
  if (vulkan && dev().backend_name().find("llvmpipe") != std::string::npos) {
    EXPECT_TRUE(r.clocks[0].device_clock);
  }
  if (!vulkan) {
    EXPECT_FALSE(r.clocks[0].device_clock);
  }
  const bool timed = r.clocks[0].device_clock;
  EXPECT_EQ(r.clocks[0].clock, cpu     ? "host wall time"
                               : timed ? "device timestamp queries"
                                       : "host wall time, device synced after each op");
  for (const auto& [name, row] : by_op) {
    EXPECT_GT(row.host_ms, 0.0) << name;
    if (timed) {
      // The device's time for the work an op submitted lies inside the host's window
      // from the sync before the op to the sync after it.
      EXPECT_LE(row.total_ms, row.host_ms) << name;
    } else {
      EXPECT_EQ(row.total_ms, row.host_ms) << name;
    }
  }
  const std::string table = r.to_string();
  EXPECT_EQ(table.find("host ms") != std::string::npos, timed) << table;
  if (timed) {
    // stop() turned the device clock off again: synced work adds no device time.
    const d::DeviceClock clock = d::device_clock_of(dev().id());
    ASSERT_NE(clock.ns, nullptr);
    const std::uint64_t t0 = clock.ns(dev().id());
    EXPECT_EQ((a + a).into_data().to_vec<float>(), (std::vector<float>{2, 4, 6, 8, 10, 12}));
    d::sync(dev().id());
    EXPECT_EQ(clock.ns(dev().id()), t0);
  }
  EXPECT_NE(table.find("tensor profile: " + dev().to_string() + " (clock: " + r.clocks[0].clock + ")"), std::string::npos)
      << table;
  EXPECT_NE(table.find("matmul"), std::string::npos) << table;
  EXPECT_LT(table.find("op"), table.find("calls")) << table;
  // The device's memory at read time (where it keeps an account: not the cpu's heap):
  // a, b and m (24 + 24 + 16 bytes of f32) are alive.
  // (the cpu and mini keep none: mini's tensors are the cpu's).
  const bool accounted = dev().id().type_id == kVulkanDeviceType;
  EXPECT_EQ(r.clocks[0].has_memory, accounted);
  EXPECT_EQ(table.find("  memory: ") != std::string::npos, accounted) << table;
  if (accounted) {
    EXPECT_GE(r.clocks[0].memory.bytes_in_use, 64u);
    EXPECT_GE(r.clocks[0].memory.peak_bytes_in_use, r.clocks[0].memory.bytes_in_use);
    EXPECT_GE(r.clocks[0].memory.bytes_reserved, r.clocks[0].memory.bytes_in_use);
    EXPECT_NE(table.find(" in use, "), std::string::npos) << table;
  }

  // Stopped: nothing more is recorded, and a second stop has nothing.
  (void)(a + a);
  EXPECT_TRUE(tensor::profile::stop().rows.empty());
}

TEST_P(Hooks, ProfilerRestartClearsThePreviousProfile) {
  const auto a = f2({1, 2}, 1, 2);
  tensor::profile::start();
  (void)(a + a);
  tensor::profile::start();
  (void)(a * a);
  const auto r = tensor::profile::stop();
  ASSERT_EQ(r.rows.size(), 1u);
  EXPECT_EQ(r.rows[0].op, "mul");
}

// ---- stable op codes and the table's columns ----------------------------------------

TEST(OpCodes, StableAgainstTheCommittedList) {
  std::ifstream in(TENSOR_SOURCE_ROOT "/dispatch/table/op_codes.txt");
  ASSERT_TRUE(in) << "dispatch/table/op_codes.txt not found";
  std::string line;
  std::size_t listed = 0;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream ls(line);
    std::size_t code = 0;
    std::string name;
    ASSERT_TRUE(ls >> code >> name) << "bad line '" << line << "'";
    // Append-only: the list runs 0, 1, 2, ... and each listed code keeps its op.
    ASSERT_EQ(code, listed) << "op_codes.txt must list codes in order, each once";
    ASSERT_LT(code, static_cast<std::size_t>(kOpCount)) << name << " is listed but no longer in the op table";
    EXPECT_EQ(d::op_name(static_cast<OpCode>(code)), name) << "code " << code << " was renumbered";
    ++listed;
  }
  // Ops added after the list was last written take the codes above it (ops.hpp checks
  // that codes are dense and unique); appending them to the list freezes them.
  EXPECT_GT(listed, 160u);
  EXPECT_LE(listed, static_cast<std::size_t>(kOpCount));
  EXPECT_EQ(static_cast<int>(OpCode::from_data), 0);
  EXPECT_EQ(static_cast<int>(OpCode::add), 55);
  EXPECT_EQ(static_cast<int>(OpCode::tr_execute), 164);
}

TEST(OpTableColumns, StorageOnlyAndEmptyRulesAreTheFormerHandLists) {
  const std::set<OpCode> layout = {OpCode::transpose, OpCode::detach,      OpCode::reshape,  OpCode::expand,
                                   OpCode::swap_dims, OpCode::permute,     OpCode::flip,     OpCode::slice,
                                   OpCode::slice_assign, OpCode::repeat_dim, OpCode::cat,    OpCode::unfold,
                                   OpCode::gather,    OpCode::select,      OpCode::mask_where, OpCode::mask_fill,
                                   OpCode::into_data, OpCode::to_device,   OpCode::empty};
  const std::set<OpCode> extremum = {OpCode::max,     OpCode::min,    OpCode::max_abs,
                                     OpCode::max_dim, OpCode::min_dim, OpCode::max_abs_dim,
                                     OpCode::argmax,  OpCode::argmin, OpCode::max_dim_with_indices,
                                     OpCode::min_dim_with_indices};
  for (int i = 0; i < kOpCount; ++i) {
    const auto op = static_cast<OpCode>(i);
    // A quant row over a float op (its twin) has the twin's columns.
    const bool q = d::op_info(op).qrule != d::QRule::None;
    const auto f = q ? static_cast<OpCode>(d::op_info(op).twin) : op;
    if (q) {
      EXPECT_EQ(d::op_info(f).twin, i) << d::op_name(op);
    }
    EXPECT_EQ(d::op_info(op).storage_only, layout.count(f) == 1) << d::op_name(op);
    EXPECT_EQ(d::op_info(op).empty == d::EmptyRule::Raises, extremum.count(f) == 1) << d::op_name(op);
  }
  EXPECT_EQ(d::op_info(OpCode::mean).empty, d::EmptyRule::IntRaises);
  EXPECT_TRUE(d::op_info(OpCode::cumsum).keeps_shape);
  EXPECT_FALSE(d::op_info(OpCode::sum_dim).keeps_shape);
  EXPECT_TRUE(d::op_info(OpCode::sort).host_trip);
  EXPECT_FALSE(d::op_info(OpCode::relu).host_trip);
}

TEST(OpTableColumns, DifferentiableInputs) {
  EXPECT_EQ(d::op_info(OpCode::add).diff, 0b11);
  EXPECT_EQ(d::op_info(OpCode::exp).diff, 0b1);
  EXPECT_EQ(d::op_info(OpCode::mask_where).diff, 0b101);  // tensor and value, not the mask
  EXPECT_EQ(d::op_info(OpCode::gather).diff, 0b1);        // not the indices
  EXPECT_EQ(d::op_info(OpCode::powi).diff, 0b1);          // not the int exponent
  EXPECT_EQ(d::op_info(OpCode::greater).diff, 0);         // bool result
  EXPECT_EQ(d::op_info(OpCode::argmax).diff, 0);
  EXPECT_EQ(d::op_info(OpCode::detach).diff, 0);
  EXPECT_EQ(d::op_info(OpCode::into_int).diff, 0);
  EXPECT_EQ(d::op_info(OpCode::bitwise_and).diff, 0);     // int only
}

}  // namespace
