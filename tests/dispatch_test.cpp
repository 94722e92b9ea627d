// Dispatch core (internal): the op table, backend registration (defaults filled,
// missing required entries recorded and reported by NotImplemented), kind checks
// in the forwarders and the composed backend name.
#include <future>
#include <set>

#include "dispatch/backend.hpp"
#include "dispatch/dispatch.hpp"
#include "dispatch/table/ops.hpp"
#include "test_util.hpp"

namespace {

using namespace tt;
namespace d = tensor::dispatch;
using d::DeviceOp;
using d::Family;
using d::kOps;
using d::Policy;
using d::Registry;

// ---- the op table ---------------------------------------------------------------

TEST(OpTable, SizeMatchesThePublicOpCodeEnum) {
  EXPECT_EQ(kOps.size(), static_cast<std::size_t>(kOpCount));
  EXPECT_GT(kOpCount, 100);
  // The public enum and the table are generated from one list, in one order.
  EXPECT_EQ(d::op_name(OpCode::from_data), "from_data");
  EXPECT_EQ(d::op_name(OpCode::matmul), "matmul");
  EXPECT_EQ(d::op_name(OpCode::sum_dim), "sum_dim");
  EXPECT_EQ(d::op_name(OpCode::tr_execute), "tr_execute");
  EXPECT_EQ(d::op_family(OpCode::exp), Family::Unary);
  EXPECT_EQ(d::op_family(OpCode::greater_elem), Family::CompareScalar);
}

TEST(OpTable, EveryRowHasANameAFamilyKindsAndAMeaning) {
  std::set<std::string_view> names;
  for (std::size_t i = 0; i < kOps.size(); ++i) {
    const d::OpInfo& o = kOps[i];
    EXPECT_FALSE(o.name.empty()) << "row " << i;
    EXPECT_TRUE(names.insert(o.name).second) << "duplicate op name '" << o.name << "'";
    EXPECT_NE(d::family_name(o.family), "?") << o.name;
    EXPECT_NE(o.kinds, 0) << o.name << " has no kinds";
    EXPECT_EQ(o.kinds & ~(d::kKindF | d::kKindI | d::kKindB), 0) << o.name;
    EXPECT_TRUE(o.policy == Policy::Req || o.policy == Policy::Def) << o.name;
    EXPECT_FALSE(o.meaning.empty()) << o.name;
    EXPECT_EQ(d::op_name(static_cast<OpCode>(i)), o.name);
  }
}

TEST(OpTable, DeviceRowsAreUniqueAndNamed) {
  std::set<std::string_view> names;
  for (const d::DeviceOpInfo& o : d::kDeviceOps) {
    EXPECT_TRUE(names.insert(o.name).second) << o.name;
    EXPECT_NE(d::family_name(o.family), "?") << o.name;
  }
  for (const char* n : {"name", "seed", "sync", "flush", "dtype_usage", "supports_dtype", "device_count"})
    EXPECT_TRUE(names.count(n)) << n;
  EXPECT_EQ(d::device_op_info(DeviceOp::name).policy, Policy::Req);
  EXPECT_EQ(d::device_op_info(DeviceOp::sync).policy, Policy::Def);
}

// ---- a minimal backend ---------------------------------------------------------------

constexpr std::uint16_t kMiniType = 5;

class MiniPrim : public d::Primitive {
 public:
  using d::Primitive::Primitive;
  bool can_mut() const override { return unique_ref(); }
};

d::Prim mini_from_data(TensorData data, DeviceId dev) { return d::Prim::adopt(new MiniPrim(data.dtype(), data.shape(), dev)); }
std::future<TensorData> mini_into_data(d::Prim p) {
  std::promise<TensorData> pr;
  pr.set_value(TensorData::zeros(p->shape(), p->dtype()));
  return pr.get_future();
}
std::string mini_name(DeviceId) { return "mini"; }
void mini_seed(DeviceId, std::uint64_t) {}
void mini_flush(DeviceId) {}
DTypeUsageSet mini_usage(DeviceId, DType t) {
  return t == DType::F32 || t == DType::I32 || t == DType::Bool ? DTypeUsageSet::general() : DTypeUsageSet{};
}
std::size_t mini_count() { return 1; }

std::unique_ptr<d::Backend> make_mini(std::uint16_t type, bool with_device_entries) {
  auto b = std::make_unique<d::Backend>("mini", type);
  b->set<OpCode::from_data>(&mini_from_data);
  b->set<OpCode::into_data>(&mini_into_data);
  b->set<DeviceOp::name>(&mini_name);
  b->set<DeviceOp::seed>(&mini_seed);
  b->set<DeviceOp::flush>(&mini_flush);
  if (with_device_entries) {
    b->set<DeviceOp::dtype_usage>(&mini_usage);
    b->set<DeviceOp::device_count>(&mini_count);
  }
  return b;
}

const d::Backend& mini() {
  static const d::Backend* b = [] {
    Registry::instance().register_backend(make_mini(kMiniType, true));
    return Registry::instance().find(kMiniType);
  }();
  return *b;
}

d::DispatchTensor mini_tensor() {
  return d::from_data(TensorData::from<float>({1, 2, 3, 4}, {2, 2}), DeviceId{kMiniType, 0}, d::Kind::Float);
}

TEST(Registry, CpuIsRegisteredWithNoMissingRequiredDeviceEntries) {
  const d::Backend& cpu = Registry::instance().get(kCpuDeviceType);
  EXPECT_EQ(cpu.short_name(), "cpu");
  EXPECT_TRUE(cpu.missing_required_device().empty());
  EXPECT_EQ(Registry::instance().find_by_name("cpu"), &cpu);
}

TEST(Registry, MiniBackendRecordsMissingRequiredEntries) {
  const d::Backend& b = mini();
  ASSERT_EQ(Registry::instance().find_by_name("mini"), &b);
  const std::vector<OpCode>& missing = b.missing_required();
  const std::set<OpCode> miss(missing.begin(), missing.end());
  std::size_t required = 0;
  for (std::size_t i = 0; i < kOps.size(); ++i) {
    const OpCode op = static_cast<OpCode>(i);
    if (kOps[i].policy == Policy::Req) {
      ++required;
      const bool provided = op == OpCode::from_data || op == OpCode::into_data;
      EXPECT_EQ(miss.count(op) == 1, !provided) << kOps[i].name;
      EXPECT_EQ(b.has(op), provided) << kOps[i].name;
    } else {
      EXPECT_EQ(miss.count(op), 0u) << kOps[i].name << " is defaulted, never missing";
      EXPECT_TRUE(b.has(op)) << kOps[i].name << " default not filled";
      EXPECT_FALSE(b.is_native(op)) << kOps[i].name;
    }
  }
  EXPECT_EQ(missing.size(), required - 2);
  EXPECT_TRUE(miss.count(OpCode::exp));
  EXPECT_TRUE(miss.count(OpCode::add));
  EXPECT_TRUE(b.is_native(OpCode::from_data));
  EXPECT_TRUE(b.missing_required_device().empty());
  EXPECT_TRUE(b.has(DeviceOp::sync));
  EXPECT_TRUE(b.has(DeviceOp::supports_dtype));
}

TEST(Registry, MissingRequiredOpRaisesNotImplementedNamingOpAndBackend) {
  mini();
  EXPECT_THROWS(NotImplemented, d::unary(OpCode::exp, mini_tensor()), "exp", "mini");
  EXPECT_THROWS(NotImplemented, d::binary(OpCode::add, mini_tensor(), mini_tensor()), "add", "mini");
  EXPECT_THROWS(NotImplemented, d::reduce(OpCode::sum, mini_tensor()), "sum", "mini");
  // A default composed of a missing entry names the missing entry.
  EXPECT_THROWS(NotImplemented, d::unary(OpCode::neg, mini_tensor()), "mul_scalar", "mini");
  // Provided entries work.
  const TensorData back = d::read(mini_tensor());
  EXPECT_EQ(back.shape(), Shape({2, 2}));
  EXPECT_EQ(back.dtype(), DType::F32);
}

TEST(Registry, DefaultDeviceEntriesAreFilled) {
  mini();
  const DeviceId dev{kMiniType, 0};
  EXPECT_TRUE(d::supports_dtype(dev, DType::F32));
  EXPECT_FALSE(d::supports_dtype(dev, DType::F64));
  EXPECT_NO_THROW(d::sync(dev));
  EXPECT_EQ(d::memory_stats(dev).bytes_in_use, 0u);
  EXPECT_EQ(d::backend_name(dev), "dispatch<mini>");
  // A dtype the device cannot store is rejected before the backend is called.
  EXPECT_THROWS(DTypeError, d::from_data(TensorData::from<double>({1.0}), dev, d::Kind::Float), "from_data", "f64");
}

TEST(Registry, BackendLackingRequiredDeviceEntriesIsRejected) {
  EXPECT_THROWS(Error, Registry::instance().register_backend(make_mini(6, false)), "mini", "dtype_usage", "device_count");
  EXPECT_EQ(Registry::instance().find(6), nullptr);
}

TEST(Registry, TakenOrOutOfRangeTypeIdIsRejected) {
  mini();
  EXPECT_THROWS(Error, Registry::instance().register_backend(make_mini(kMiniType, true)), "already taken", "mini");
  EXPECT_THROWS(Error, Registry::instance().register_backend(make_mini(Registry::kMaxTypes, true)), "out of range");
}

TEST(Registry, UnknownDeviceTypeIsDeviceError) {
  EXPECT_THROWS(DeviceError, Registry::instance().get(7), "7", "cpu");
}

// ---- kind checks in the forwarders ----------------------------------------------------

d::DispatchTensor cpu_int() {
  return d::from_data(TensorData::from<std::int32_t>({1, 2, 3}), DeviceId{}, d::Kind::Int);
}
d::DispatchTensor cpu_float() { return d::from_data(TensorData::from<float>({1, 2, 3}), DeviceId{}, d::Kind::Float); }

TEST(Dispatch, FloatOpOnIntTensorIsDTypeErrorNamingOpAndKinds) {
  EXPECT_THROWS(DTypeError, d::unary(OpCode::exp, cpu_int()), "exp", "Float", "Int");
  EXPECT_THROWS(DTypeError, d::unary(OpCode::bool_not, cpu_float()), "bool_not", "Bool", "Float");
  EXPECT_THROWS(DTypeError, d::unary(OpCode::bitwise_not, cpu_float()), "bitwise_not", "Int", "Float");
}

TEST(Dispatch, BinaryWithMismatchedKindsNamesBothKinds) {
  EXPECT_THROWS(DTypeError, d::binary(OpCode::add, cpu_float(), cpu_int()), "add", "Float", "Int");
  EXPECT_THROWS(DTypeError, d::compare(OpCode::equal, cpu_int(), cpu_float()), "equal", "Int", "Float");
}

TEST(Dispatch, OpThroughTheWrongFamilyIsAnError) {
  // exp is Unary; asking for it as a Reduce is a programming error, not a crash.
  EXPECT_THROWS(Error, d::reduce(OpCode::exp, cpu_float()), "exp", "Unary", "Reduce");
}

TEST(Dispatch, EmptyHandleIsAnError) {
  EXPECT_THROWS(Error, d::into_data(d::DispatchTensor{}), "into_data", "empty");
  EXPECT_THROWS(Error, d::unary(OpCode::exp, d::DispatchTensor{}), "exp", "empty");
}

TEST(Dispatch, NameComposesDispatchAndBackend) { EXPECT_EQ(d::backend_name(DeviceId{}), "dispatch<cpu>"); }

}  // namespace
