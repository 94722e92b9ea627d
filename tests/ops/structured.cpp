// Op tests of the structured families (tests/ops/ops_spec.hpp): each op x dtype x layout
// against the trials of index.cpp, layout.cpp, sort.cpp and misc.cpp.
#include "ops/ops_spec.hpp"

namespace ops_spec {

std::vector<Trial> make_trials(OpCode op, Family fam, DType dt, Layout L, std::mt19937& rng) {
  std::vector<Trial> out;
  index_trials(op, fam, dt, L, rng, out);
  layout_trials(op, fam, dt, L, rng, out);
  sort_trials(op, fam, dt, L, rng, out);
  misc_trials(op, fam, dt, L, rng, out);
  return out;
}

class StructuredOp : public DeviceOpTest {};

TEST_P(StructuredOp, MatchesReference) {
  const OpInfo& info = kOps[GetParam().op];
  const OpCode op = static_cast<OpCode>(GetParam().op);
  const std::string op_name(info.name);
  if (!structured_refs().count(op_name)) GTEST_SKIP() << op_name << " is listed as not yet referenced";
  const Device dev = GetParam().dev;
  std::vector<Layout> layouts = {Layout::Contiguous, Layout::Transposed, Layout::Strided, Layout::Flipped,
                                 Layout::NegStep,    Layout::Broadcast,  Layout::ZeroCols, Layout::ZeroRows};
  layouts.push_back(Layout::Scalar1x1);
  if (long_lanes(info.family))
    layouts.insert(layouts.end(), {Layout::Large, Layout::LargeTransposed, Layout::Row257, Layout::Wide3x1025Transposed});
  std::mt19937 rng(4321u + static_cast<unsigned>(GetParam().op));
  int combos = 0;
  const std::vector<DType> dtypes = dtypes_for(info.kinds);
  for (DType dt : dtypes) {
    if (!dev.supports_dtype(dt)) continue;
    for (Layout L : grid_layouts(dev, dt, dtypes, layouts)) {
      const std::mt19937 before = rng;
      std::vector<Trial> trials = make_trials(op, info.family, dt, L, rng);
      ASSERT_FALSE(trials.empty()) << op_name << " made no trials";
      for (std::size_t ti = 0; ti < trials.size(); ++ti) {
        Trial& tr = trials[ti];
        SCOPED_TRACE(op_name + " dtype=" + name(dt) + " layout=" + layout_name(L) + " " + tr.label);
        std::vector<H> args;
        for (Operand& o : tr.ops) args.push_back(o.t);
        bool not_impl = false;
        try {
          std::vector<H> got = tr.call(args);
          if (tr.err != Trial::Err::None) {
            for (const H& g : got) (void)g.read();  // a device may report the error when the result is read
            ADD_FAILURE() << "expected " << (tr.err == Trial::Err::Index ? "IndexError" : "ShapeError") << ", got a result";
          } else {
            EXPECT_EQ(got.size(), tr.want.size());
            for (std::size_t k = 0; k < std::min(got.size(), tr.want.size()); ++k)
              EXPECT_TRUE(same(tr.want[k], got[k].read())) << "result " << k;
            ++combos;
          }
        } catch (const tensor::NotImplemented& e) {
          // A device may lack an op (or one of its update rules): it must say so, naming
          // op and device; listed in the summary like GeneratedOp's.
          not_impl = true;
          EXPECT_NE(std::string(e.what()).find(Registry::instance().get(dev.id().type_id).short_name()), std::string::npos) << e.what();
          not_implemented()[dev.to_string() + " " + op_name].insert(name(dt));
        } catch (const tensor::IndexError& e) {
          if (tr.err != Trial::Err::Index) ADD_FAILURE() << "unexpected IndexError: " << e.what();
          else EXPECT_NE(std::string(e.what()).find("[" + op_name + "]"), std::string::npos) << e.what();
        } catch (const tensor::ShapeError& e) {
          if (tr.err != Trial::Err::Shape) ADD_FAILURE() << "unexpected ShapeError: " << e.what();
          else EXPECT_NE(std::string(e.what()).find(op_name), std::string::npos) << e.what();
        } catch (const std::exception& e) {
          ADD_FAILURE() << "unexpected exception: " << e.what();
        }
        // Shared operands are never changed, whether the op succeeded or raised.
        for (std::size_t k = 0; k < tr.ops.size(); ++k)
          EXPECT_TRUE(same(exact(tr.ops[k].logical), tr.ops[k].t.read())) << "operand " << k << " changed";
        if (tr.err != Trial::Err::None || not_impl || !variants_at(dev, L)) continue;
        // The first operand handed over (uniquely owned: in-place paths may run).
        std::mt19937 again = before;
        std::vector<Trial> fresh = make_trials(op, info.family, dt, L, again);
        std::vector<H> owned;
        for (std::size_t k = 0; k < fresh[ti].ops.size(); ++k)
          owned.push_back(k == 0 ? H(fresh[ti].ops[k].t.take()) : fresh[ti].ops[k].t);
        try {
          std::vector<H> got = fresh[ti].call(owned);
          for (std::size_t k = 0; k < std::min(got.size(), tr.want.size()); ++k)
            EXPECT_TRUE(same(tr.want[k], got[k].read())) << "first operand handed over: result " << k;
        } catch (const std::exception& e) {
          ADD_FAILURE() << "first operand handed over: unexpected exception: " << e.what();
        }
      }
    }
  }
  RecordProperty("checked_combinations", combos);
  EXPECT_GT(combos, 0) << op_name << " checked nothing";
}

INSTANTIATE_TEST_SUITE_P(OpTable, StructuredOp, ::testing::ValuesIn(cases_of(structured_family)), case_name);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(StructuredOp);
}  // namespace ops_spec
