// Op tests: every op-table row of the tested families has a reference; max_pair/min_pair beyond
// the generated inputs.
#include "ops/ops_spec.hpp"

namespace ops_spec {

TEST(OpTable, EveryHarnessOpHasAReference) {
  std::set<std::string> table;
  for (const OpInfo& o : kOps) {
    if (!harness_family(o.family) && !structured_family(o.family)) continue;
    if (o.qfloat_in) continue;  // the quant rows take quantized operands: tests/quant_rows_test.cpp
    const std::string n(o.name);
    table.insert(n);
    const bool ref = harness_family(o.family) ? specs().count(n) != 0 : structured_refs().count(n) != 0;
    const bool listed = not_yet_referenced().count(n) != 0;
    EXPECT_TRUE(ref || listed) << "op '" << n << "' (family " << tensor::dispatch::family_name(o.family)
                               << ") has no reference in tests/ops/ and is not in not_yet_referenced()";
    EXPECT_FALSE(ref && listed) << "op '" << n << "' has a reference: remove it from not_yet_referenced()";
  }
  for (const auto& [n, spec] : specs()) EXPECT_TRUE(table.count(n)) << "reference for '" << n << "' matches no op-table row";
  for (const auto& n : structured_refs()) EXPECT_TRUE(table.count(n)) << "reference for '" << n << "' matches no op-table row";
  for (const auto& [n, why] : not_yet_referenced()) EXPECT_TRUE(table.count(n)) << "stale not-yet entry '" << n << "'";
}

// max_pair / min_pair beyond the generated inputs: NaN in either operand wins (burn,
// torch.maximum), broadcasting, and int tensors.
TEST(OpTable, MaxPairMinPairPropagateNaNAndBroadcast) {
  for (const Device& dev : tt::conf::devices()) {
    tt::conf::DeviceScope scope;
    scope.enter(dev);
    const auto a = Tensor<2>::from_data(TensorData::from<float>({1, NAN, 3, -0.5f}, {1, 4}), dev);
    const auto b = Tensor<2>::from_data(TensorData::from<float>({NAN, 2, 1, -1, 5, 5, 5, 5}, {2, 4}), dev);
    const auto mx = a.max_pair(b).into_data().to_vec<float>();
    const auto mn = a.min_pair(b).into_data().to_vec<float>();
    ASSERT_EQ(mx.size(), 8u) << dev.to_string();
    const float want_mx[8] = {NAN, NAN, 3, -0.5f, 5, NAN, 5, 5};
    const float want_mn[8] = {NAN, NAN, 1, -1, 1, NAN, 3, -0.5f};
    for (int i = 0; i < 8; ++i) {
      if (std::isnan(want_mx[i])) EXPECT_TRUE(std::isnan(mx[i])) << dev.to_string() << " max " << i;
      else EXPECT_EQ(mx[i], want_mx[i]) << dev.to_string() << " max " << i;
      if (std::isnan(want_mn[i])) EXPECT_TRUE(std::isnan(mn[i])) << dev.to_string() << " min " << i;
      else EXPECT_EQ(mn[i], want_mn[i]) << dev.to_string() << " min " << i;
    }
    const auto x = Tensor<1, Int>::from_data(TensorData::from<std::int32_t>({-7, 4, 0}), dev);
    const auto y = Tensor<1, Int>::from_data(TensorData::from<std::int32_t>({3, 4, -2}), dev);
    EXPECT_EQ(x.max_pair(y).into_data().to_vec<std::int32_t>(), (std::vector<std::int32_t>{3, 4, 0})) << dev.to_string();
    EXPECT_EQ(x.min_pair(y).into_data().to_vec<std::int32_t>(), (std::vector<std::int32_t>{-7, 4, -2})) << dev.to_string();
    scope.leave();
  }
}
}  // namespace ops_spec
