// Backend plugins (issue 31) through the public API: the reference plugin as a device
// (TENSOR_BACKEND_PATH + TENSOR_DEVICE=ref:0; values worked out by hand), and the loader's checks
// on the negative variants built from the same source (tools/plugin_ref/meson.build).
#include <dlfcn.h>

#include <string>
#include <vector>

#include "tensor/backend_loader.hpp"
#include "tensor/distributed.hpp"
#include "tensor/graph.hpp"
#include "tensor/nn.hpp"
#include "tensor/quantization.hpp"
#include "test_util.hpp"

#ifndef REF_PLUGIN_DIR
#error "REF_PLUGIN_DIR: the build directory of tools/plugin_ref"
#endif

namespace {

using namespace tt;

std::string variant(const std::string& name) { return std::string(REF_PLUGIN_DIR) + "/libtensor-backend-" + name + ".so"; }

std::vector<float> vec(const auto& t) { return t.into_data().template to_vec<float>(); }

// ---- the reference plugin as the default device (suite plugin_ref) ----------------------

class RefDevice : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* d = std::getenv("TENSOR_DEVICE");
    if (!d || std::string(d) != "ref:0") GTEST_SKIP() << "run with TENSOR_DEVICE=ref:0 (meson test plugin_ref)";
    dev = Device::default_device();
  }
  Device dev;
  Tensor<2> a() const { return Tensor<2>::from_data(TensorData::from<float>({1, 2, 3, 4, 5, 6}, {2, 3}), dev); }
};

TEST_F(RefDevice, IsADeviceLikeTheBuiltInOnes) {
  EXPECT_EQ(dev.to_string(), "ref:0");
  EXPECT_EQ(dev.backend_name(), "dispatch<ref>");
  EXPECT_TRUE(dev.supports_dtype(DType::F32));
  EXPECT_FALSE(dev.dtype_usage(DType::BoolU32).contains(DTypeUsage::Storage));
  EXPECT_EQ(dev.settings().float_dtype, FloatDType::F32);
  EXPECT_EQ(a().device(), dev);
}

TEST_F(RefDevice, NativeKernelsComputeByHandValues) {
  const auto b = Tensor<1>::from_data(TensorData::from<float>({10, 20, 30}, {3}), dev);
  EXPECT_EQ(vec(a() + b.unsqueeze<2>()), (std::vector<float>{11, 22, 33, 14, 25, 36}));
  EXPECT_EQ(vec(a() * 2.0f + 1.0f), (std::vector<float>{3, 5, 7, 9, 11, 13}));
  EXPECT_EQ(vec(a() - a() * a()), (std::vector<float>{0, -2, -6, -12, -20, -30}));
  EXPECT_EQ(vec(-a()), (std::vector<float>{-1, -2, -3, -4, -5, -6}));
  EXPECT_EQ(vec(a().sum()), (std::vector<float>{21}));
  EXPECT_EQ(vec(a().sum_dim(1)), (std::vector<float>{6, 15}));
  EXPECT_EQ(vec(a().sum_dim(0)), (std::vector<float>{5, 7, 9}));
  EXPECT_EQ(vec(Tensor<2>::zeros({2, 2}, dev).exp()), (std::vector<float>{1, 1, 1, 1}));
  EXPECT_EQ(vec(Tensor<1>::full({3}, 2.5f, dev)), (std::vector<float>{2.5f, 2.5f, 2.5f}));
  // matmul: [2, 3] x [3, 2], and a batch of 2 broadcast against one right-hand side.
  const auto w = Tensor<2>::from_data(TensorData::from<float>({1, 0, 0, 1, 1, 1}, {3, 2}), dev);
  EXPECT_EQ(vec(a().matmul(w)), (std::vector<float>{4, 5, 10, 11}));
  const auto batch = Tensor<3>::from_data(TensorData::from<float>({1, 2, 3, 4, 5, 6, 0, 0, 1, 0, 1, 0}, {2, 2, 3}), dev);
  EXPECT_EQ(vec(batch.matmul(w.unsqueeze<3>())), (std::vector<float>{4, 5, 10, 11, 1, 1, 0, 1}));
  // reshape and expand of any stored dtype.
  EXPECT_EQ(vec(a().reshape(std::array<std::int64_t, 2>{3, 2})), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  const auto col = Tensor<2, Int>::from_data(TensorData::from<std::int32_t>({7, 8}, {2, 1}), dev);
  EXPECT_EQ(col.expand(std::array<std::int64_t, 2>{2, 3}).into_data().to_vec<std::int32_t>(),
            (std::vector<std::int32_t>{7, 7, 7, 8, 8, 8}));
}

// ABI 1.2: entries of the families whose arguments travel in TensorOpCall::args.
TEST_F(RefDevice, LayoutIndexingAndConvEntriesByHandValues) {
  const auto x = a();  // [[1, 2, 3], [4, 5, 6]]
  EXPECT_EQ(vec(x.permute({1, 0})), (std::vector<float>{1, 4, 2, 5, 3, 6}));
  EXPECT_EQ(vec(x.flip({1})), (std::vector<float>{3, 2, 1, 6, 5, 4}));
  EXPECT_EQ(vec(x.flip({0, 1})), (std::vector<float>{6, 5, 4, 3, 2, 1}));
  EXPECT_EQ(vec(x.swap_dims(0, 1)), (std::vector<float>{1, 4, 2, 5, 3, 6}));
  EXPECT_EQ(vec(x.slice({Slice::range(0, 2), Slice::range(0, 3, 2)})), (std::vector<float>{1, 3, 4, 6}));
  EXPECT_EQ(vec(x.slice({Slice::range(1, 2)})), (std::vector<float>{4, 5, 6}));
  EXPECT_EQ(vec(cat(std::vector<Tensor<2>>{x, x * 10.0f}, 0)), (std::vector<float>{1, 2, 3, 4, 5, 6, 10, 20, 30, 40, 50, 60}));
  EXPECT_EQ(vec(cat(std::vector<Tensor<2>>{x, x.slice({Slice::range(0, 2), Slice::range(0, 1)})}, 1)), (std::vector<float>{1, 2, 3, 1, 4, 5, 6, 4}));
  const auto xi = Tensor<2, Int>::from_data(TensorData::from<std::int64_t>({1, 2, 3, 4, 5, 6}, {2, 3}), dev);
  EXPECT_EQ(xi.permute({1, 0}).into_data().to_vec<std::int64_t>(), (std::vector<std::int64_t>{1, 4, 2, 5, 3, 6}));
  const auto idx = Tensor<2, Int>::from_data(TensorData::from<std::int32_t>({2, 0, 1, 1}, {2, 2}), dev);
  EXPECT_EQ(vec(x.gather(1, idx)), (std::vector<float>{3, 1, 5, 5}));
  // The index values are the plugin's to check: its message, under [ref:gather].
  const auto bad = Tensor<2, Int>::from_data(TensorData::from<std::int32_t>({3, 0, 1, 1}, {2, 2}), dev);
  EXPECT_THROWS(IndexError, x.gather(1, bad), "[ref:gather] [gather] index out of range for dim 1; expected 0 <= index < 3; got 3");
  // conv2d [1, 2, 3, 3] * [2, 1, 2, 2] (groups 2), stride 1, padding 1, dilation 2, bias
  // [10, 20]: out[o][y][z] = b[o] + sum_ij x[o][y-1+2i][z-1+2j] w[o][i][j] (in range).
  std::vector<float> xv(18), wv{1, 2, 3, 4, -1, 0, 0, 1};
  for (std::size_t i = 0; i < xv.size(); ++i) xv[i] = static_cast<float>(i);
  const auto img = Tensor<4>::from_data(TensorData::from<float>(xv, {1, 2, 3, 3}), dev);
  const auto w = Tensor<4>::from_data(TensorData::from<float>(wv, {2, 1, 2, 2}), dev);
  const auto bias = Tensor<1>::from_data(TensorData::from<float>({10, 20}, {2}), dev);
  std::vector<float> want;
  for (int o = 0; o < 2; ++o)
    for (int y = 0; y < 3; ++y)
      for (int z = 0; z < 3; ++z) {
        float s = o == 0 ? 10.0f : 20.0f;
        for (int i = 0; i < 2; ++i)
          for (int j = 0; j < 2; ++j) {
            const int yy = y - 1 + 2 * i, zz = z - 1 + 2 * j;
            if (yy >= 0 && yy < 3 && zz >= 0 && zz < 3) s += xv[(o * 3 + yy) * 3 + zz] * wv[(o * 2 + i) * 2 + j];
          }
        want.push_back(s);
      }
  const nn::ConvOptions<2> opt{{1, 1}, {1, 1}, {2, 2}, 2};
  EXPECT_EQ(vec(nn::conv2d(img, w, bias, opt)), want);
}

// The plugin's all_reduce entry (ABI 1.2) hands its host buffer to the host's communicator:
// two LocalGroup ranks on ref:0, f32 / i32 / f64 by hand, f16 through the host's staging (not
// in its op_dtypes), a moved tensor reduced in place, and a shape mismatch between the ranks
// refused by the host's check under [ref:all_reduce].
TEST_F(RefDevice, AllReduceGoesThroughTheHostsCommunicator) {
  std::vector<std::vector<float>> sum(2), maxv(2), f16(2);
  std::vector<std::vector<std::int32_t>> isum(2);
  std::vector<std::vector<double>> mean(2);
  std::vector<std::int32_t> world(2), rank(2);
  const Device d = dev;
  dist::LocalGroup(2).run([&](int r) {
    const float b = static_cast<float>(r);
    const auto x = Tensor<1>::from_data(TensorData::from<float>({1 + b, -2 * b, 3}, {3}), d);
    sum[r] = vec(dist::all_reduce(x, dist::ReduceOp::Sum));
    maxv[r] = vec(dist::all_reduce(Tensor<1>(x), dist::ReduceOp::Max));  // moved: reduced in place
    const auto xi = Tensor<1, Int>::from_data(TensorData::from<std::int32_t>({10 * (r + 1), -r}, {2}), d);
    isum[r] = dist::all_reduce(xi, dist::ReduceOp::Sum).into_data().to_vec<std::int32_t>();
    const auto xd = Tensor<1>::from_data(TensorData::from<double>({1.0 + r, 4.0}, {2}), d);
    mean[r] = dist::all_reduce(xd, dist::ReduceOp::Mean).into_data().to_vec<double>();
    const auto xh = Tensor<1>::from_data(TensorData::from<float>({0.5f + b}, {1}).convert(DType::F16), d);
    f16[r] = dist::all_reduce(xh, dist::ReduceOp::Sum).into_data().convert(DType::F32).to_vec<float>();
    world[r] = dist::world_size();
    rank[r] = dist::rank();
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(world[r], 2);
    EXPECT_EQ(rank[r], r);
    EXPECT_EQ(sum[r], (std::vector<float>{3, -2, 6})) << r;
    EXPECT_EQ(maxv[r], (std::vector<float>{2, 0, 3})) << r;
    EXPECT_EQ(isum[r], (std::vector<std::int32_t>{30, -1})) << r;
    EXPECT_EQ(mean[r], (std::vector<double>{1.5, 4.0})) << r;
    EXPECT_EQ(f16[r], (std::vector<float>{2.0f})) << r;
  }
  // Ranks that disagree on the shape: the host's check (run through dist_all_reduce) refuses
  // on both, and the message comes back through the plugin's entry.
  std::vector<std::string> msg(2);
  dist::LocalGroup(2).run([&](int r) {
    const auto x = Tensor<1>::ones({static_cast<std::size_t>(2 + r)}, d);
    try {
      (void)dist::all_reduce(x, dist::ReduceOp::Sum);
    } catch (const ShapeError& e) {
      msg[r] = e.what();
    }
  });
  for (int r = 0; r < 2; ++r) EXPECT_EQ(msg[r].rfind("[ref:all_reduce] [all_reduce]", 0), 0u) << r << ": " << msg[r];
}

// Quantized tensors on a plugin's device (the QFloat rows never cross the ABI): quantize,
// dequantize and a matmul with a quantized weight run through the host's defaults. Values:
// the weight [[0.5, -1], [1, 0.25]] is exact in q8s per-tensor codes (scale 1/127).
TEST_F(RefDevice, QuantizedTensorsRunThroughTheHost) {
  const auto w = Tensor<2>::from_data(TensorData::from<float>({0.5f, -1.0f, 1.0f, 0.25f}, {2, 2}), dev);
  const QuantScheme q8s = QuantScheme{}.with_value(QuantValue::Q8S).with_store(QuantStore::Native);
  const auto q = quantize_dynamic(w, q8s);
  EXPECT_EQ(q.dtype(), DType::QFloat);
  EXPECT_EQ(q.device(), dev);
  const std::vector<float> back = vec(dequantize(q));
  const std::vector<float> want{0.5f, -1.0f, 1.0f, 0.25f};
  for (std::size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(back[i], want[i], 1.0f / 127) << i;
  const auto x = Tensor<2>::from_data(TensorData::from<float>({1, 2}, {1, 2}), dev);
  const std::vector<float> y = vec(x.matmul(q));  // [1*0.5 + 2*1, 1*-1 + 2*0.25] = [2.5, -0.5]
  ASSERT_EQ(y.size(), 2u);
  EXPECT_NEAR(y[0], 2.5f, 0.03f);
  EXPECT_NEAR(y[1], -0.5f, 0.03f);
  EXPECT_THROWS(DTypeError, dequantize(w), "dequantize");
}

TEST_F(RefDevice, OpsWithoutAKernelRunOnTheHost) {
  // transpose and f64 arithmetic have no entry in the plugin: the host CPU runs them.
  EXPECT_EQ(vec(a().transpose()), (std::vector<float>{1, 4, 2, 5, 3, 6}));
  const auto x = Tensor<1>::from_data(TensorData::from<double>({1.5, -2.0}, {2}), dev);
  EXPECT_EQ((x + x).into_data().to_vec<double>(), (std::vector<double>{3.0, -4.0}));
  EXPECT_EQ(vec(a().to_device(Device::cpu())), (std::vector<float>{1, 2, 3, 4, 5, 6}));
}

TEST_F(RefDevice, AutodiffRunsOverIt) {
  const Device ad = dev.autodiff();
  EXPECT_EQ(ad.backend_name(), "dispatch<autodiff<ref>>");
  auto x = Tensor<1>::from_data(TensorData::from<float>({1, 2, 3}, {3}), ad).require_grad();
  const Gradients g = (x * x).sum().backward();
  EXPECT_EQ(vec(*x.grad(g)), (std::vector<float>{2, 4, 6}));  // d/dx sum(x^2) = 2x
}

TEST_F(RefDevice, GraphsCaptureAndReplayThroughItsAssign) {
  // The capture writes through the plugin's ABI 1.1 `assign`; a replay reads x's new values.
  auto x = Tensor<1>::from_data(TensorData::from<float>({1, 2, 3}, {3}), dev);
  auto g = capture(dev, [&] { return (x * 2.0f + 1.0f).sum_dim(0); });
  EXPECT_TRUE(g.is_native()) << g.stats().fallback_reason;  // the list replays, not the closure
  EXPECT_EQ(vec(g.outputs()), (std::vector<float>{15}));
  x.copy_from(Tensor<1>::from_data(TensorData::from<float>({4, 5, 6}, {3}), dev));
  g.replay();
  EXPECT_EQ(vec(g.outputs()), (std::vector<float>{33}));  // 9 + 11 + 13
}

TEST_F(RefDevice, BadInputIsStillRefusedBeforeThePlugin) {
  const auto c = Tensor<2>::ones({2, 2}, dev);
  EXPECT_THROWS(ShapeError, a() + c, "add");
}

// ---- the loader's checks (suite plugin_checks) ---------------------------------------------

void expect_refused(const std::string& name, std::initializer_list<const char*> fragments) {
  std::vector<std::string> want{variant(name), "refused"};
  for (const char* f : fragments) want.emplace_back(f);
  try {
    (void)load_backend(variant(name));
    ADD_FAILURE() << name << " loaded";
  } catch (const DeviceError& e) {
    for (const std::string& f : want) EXPECT_NE(std::string(e.what()).find(f), std::string::npos) << e.what() << "\nlacks: " << f;
  }
}

TEST(PluginChecks, WrongAbiMajor) { expect_refused("ref_badabi", {"ABI major 2.2 != host 1.2"}); }
TEST(PluginChecks, AnAbi10PluginLoadsWithoutTheNewerMembers) {
  // Built as ABI 1.0 (its struct ends before `assign`): loaded, and its ops run; with no
  // `assign`, a capture replays by re-running the closure and copy_from is refused.
  const Device d = Device::parse("ref_abi10:0");
  EXPECT_EQ(vec(Tensor<1>::ones({2}, d) * 3.0f), (std::vector<float>{3, 3}));
  auto x = Tensor<1>::ones({2}, d);
  EXPECT_FALSE(capture(d, [&] { return x + 1.0f; }).is_native());
  EXPECT_THROW(x.copy_from(Tensor<1>::ones({2}, d)), NotImplemented);
  // Its gather entry is ABI 1.2's: never called under 1.0, so the host's kernel runs (and
  // its message, not the plugin's, names the bad index).
  const auto src = Tensor<2>::ones({1, 2}, d);
  const auto bad = Tensor<2, Int>::from_data(TensorData::from<std::int32_t>({0, 5}, {1, 2}), d);
  try {
    (void)src.gather(1, bad).into_data();
    ADD_FAILURE() << "gather with index 5 of 2 ran";
  } catch (const IndexError& e) {
    EXPECT_EQ(std::string(e.what()).find("[ref_abi10:gather]"), std::string::npos) << e.what();
  }
  // On ref:0 (ABI 1.1, with `assign`) the same capture is native.
  const Device r = Device::parse("ref:0");
  auto y = Tensor<1>::ones({2}, r);
  EXPECT_TRUE(capture(r, [&] { return y + 1.0f; }).is_native());
}
TEST(PluginChecks, ShortStruct) { expect_refused("ref_short", {"TensorPluginInfo struct_size", "< "}); }
TEST(PluginChecks, OpTableMismatchNamesTheFirstDifferingOp) {
  expect_refused("ref_badhash", {"op table differs at op 55", "plugin \"add:Binary:3\"", "host \"add:Binary:2\""});
}
TEST(PluginChecks, NullRequiredEntry) { expect_refused("ref_nullentry", {"required entry prim.release is NULL"}); }
TEST(PluginChecks, ScoreZero) { expect_refused("ref_score0", {"score 0", "not supported on this system"}); }
TEST(PluginChecks, MissingInitSymbol) { expect_refused("ref_noinit", {"missing init symbol tensor_plugin_init"}); }
TEST(PluginChecks, NotAPluginFile) { expect_refused("does_not_exist", {"dlopen"}); }
TEST(PluginChecks, NameTaken) {
  // TENSOR_BACKEND_PATH (this suite: the whole directory) registered "ref" already.
  expect_refused("ref", {"name 'ref' is taken"});
}

TEST(PluginChecks, RefusedCandidatesOnThePathLeaveTheOthersLoaded) {
  // The directory holds every variant: the good ones are devices, the others were refused.
  EXPECT_EQ(Device::parse("ref:0").backend_name(), "dispatch<ref>");
  EXPECT_EQ(Device::parse("refthrow:0").backend_name(), "dispatch<refthrow>");
  EXPECT_THROWS(DeviceError, Device::parse("ref_badabi:0"), "ABI major 2.2 != host 1.2");
}

TEST(PluginChecks, AFailingEntryKeepsItsMessage) {
  const Device d = Device::parse("refthrow:0");
  const auto x = Tensor<1>::from_data(TensorData::from<float>({0, 1}, {2}), d);
  EXPECT_THROWS(ExecutionError, x.exp().into_data(), "[refthrow:exp] ref exp kernel failed on purpose");
  EXPECT_EQ(vec(x + x), (std::vector<float>{0, 2}));  // the device still works
}

TEST(PluginChecks, AClashingSymbolDoesNotInterpose) {
  const Device d = Device::parse("refclash:0");
  EXPECT_EQ(vec(Tensor<1>::ones({2}, d) * 3.0f), (std::vector<float>{3, 3}));
  // Loaded RTLD_LOCAL: nothing of the plugin joined the global scope...
  EXPECT_EQ(dlsym(RTLD_DEFAULT, "tensor_plugin_init"), nullptr);
  // ...so the host's tensor::load_backend (which the plugin also defines) is still the host's.
  void* own = dlsym(RTLD_DEFAULT, "_ZN6tensor12load_backendERKNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEE");
  void* h = dlopen(variant("refclash").c_str(), RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(h, nullptr);
  void* theirs = dlsym(h, "_ZN6tensor12load_backendERKNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEE");
  dlclose(h);  // drops the NOLOAD reference only; the loader's stays
  ASSERT_NE(theirs, nullptr);
  EXPECT_NE(own, theirs);
  EXPECT_THROWS(DeviceError, load_backend("/nonexistent/libtensor-backend-x.so"), "dlopen");
}

}  // namespace
