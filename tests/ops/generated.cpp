// Op tests of the elementwise harness families (Unary, Binary, Scalar, Compare,
// CompareScalar, Reduce, Dim): every op x dtype x layout against its spec
// (unary.cpp, binary.cpp, compare.cpp, reduce.cpp).
#include "ops/ops_spec.hpp"

namespace ops_spec {

class Summary : public ::testing::Environment {
 public:
  void TearDown() override {
    const auto& m = not_implemented();
    std::printf("\n[ops summary] %zu device op(s) raised NotImplemented and were skipped:\n", m.size());
    for (const auto& [op, dts] : m) {
      std::string d;
      for (const auto& x : dts) d += (d.empty() ? "" : ",") + x;
      std::printf("  %-28s (%s)\n", op.c_str(), d.c_str());
    }
  }
};
[[maybe_unused]] const auto* const kSummary = ::testing::AddGlobalTestEnvironment(new Summary);

class GeneratedOp : public DeviceOpTest {};

TEST_P(GeneratedOp, MatchesScalarReference) {
  const OpInfo& info = kOps[GetParam().op];
  const OpCode op = static_cast<OpCode>(GetParam().op);
  const std::string op_name(info.name);
  const auto it = specs().find(op_name);
  if (it == specs().end()) GTEST_SKIP() << op_name << " is listed as not yet referenced";
  const Spec& sp = it->second;
  const Device dev = GetParam().dev;
  const std::string dev_name = dev.to_string();
  // A required entry the backend left empty raises NotImplemented through the
  // forwarder; that is reported in the summary like any other NotImplemented.
  const bool has_entry = Registry::instance().get(dev.id().type_id).has(op);

  const Family fam = info.family;
  const bool binaryish = fam == Family::Binary || fam == Family::Compare;
  const bool scalar_fam = fam == Family::Scalar || fam == Family::CompareScalar;
  // Reserved up front: GCC 12's -Warray-bounds misreads the reallocation of a push_back
  // onto an initializer-list vector here (a false positive under -Werror).
  std::vector<Layout> layouts;
  layouts.reserve(16 + std::size(kShapeLayouts));
  layouts.insert(layouts.end(), {Layout::Contiguous, Layout::Transposed, Layout::Strided, Layout::Flipped,
                                 Layout::NegStep, Layout::Broadcast, Layout::ZeroCols, Layout::ZeroRows});
  if (binaryish) layouts.push_back(Layout::ImplicitBroadcast);
  layouts.insert(layouts.end(), std::begin(kShapeLayouts), std::end(kShapeLayouts));
  const std::vector<DType> dtypes = dtypes_for(info.kinds);
  const std::optional<DType> huge_dt =
      fam == Family::Reduce || fam == Family::Dim || first_of_family(GetParam().op) ? huge_dtype(dtypes, dev) : std::nullopt;

  std::mt19937 rng(1234u + static_cast<unsigned>(GetParam().op));
  int combos = 0;
  std::set<std::string> ni;
  for (DType dt : dtypes) {
    if (!dev.supports_dtype(dt)) continue;
    const bool fl = is_fl(dt);
    if (fl ? !(sp.f || sp.fl) : !(sp.i || sp.il)) {
      ADD_FAILURE() << op_name << ": the op table allows " << name(dt) << " but the reference has no "
                    << (fl ? "float" : "int/bool") << " form";
      continue;
    }
    const bool un = is_un(dt);
    std::vector<std::optional<Scalar>> scalars{std::nullopt};
    if (scalar_fam) {
      scalars.clear();
      if (is_bo(dt)) {
        scalars = {Scalar(true), Scalar(false)};
      } else if (fl) {
        for (double s : sp.fs)
          scalars.emplace_back(sp.int_scalar ? Scalar(static_cast<std::int64_t>(s)) : Scalar(s));
      } else {
        for (std::int64_t s : (un ? sp.us : sp.ss)) scalars.emplace_back(Scalar(s));
      }
    }
    std::vector<Layout> dt_layouts = grid_layouts(dev, dt, dtypes, layouts);
    if (huge_dt == dt) dt_layouts.push_back(Layout::Huge);
    for (Layout L : dt_layouts) {
      const bool huge = L == Layout::Huge;
      std::vector<std::optional<std::int64_t>> dims{std::nullopt};
      if (fam == Family::Dim) dims = huge ? std::vector<std::optional<std::int64_t>>{0, 1} : std::vector<std::optional<std::int64_t>>{0, 1, -1};
      for (const auto& dim : dims)
        for (std::size_t si = 0; si < std::min<std::size_t>(huge ? 1 : scalars.size(), scalars.size()); ++si) {
          const auto& sc = scalars[si];
          SCOPED_TRACE(op_name + " dtype=" + name(dt) + " layout=" + layout_name(L) +
                       (dim ? " dim=" + std::to_string(*dim) : std::string()) +
                       (sc ? " scalar=" + std::to_string(sc->to_double()) : std::string()));
          const int arity = binaryish ? 2 : 1;
          const std::mt19937 rng_before = rng;  // to rebuild identical, uniquely owned operands
          auto build = [&](std::mt19937& g) {
            std::vector<Operand> v;
            for (int k = 0; k < arity; ++k) {
              Domain d = fl ? sp.fd[k] : un ? (sp.ud[k] ? *sp.ud[k] : Domain{std::max(0.0, sp.sd[k].lo), sp.sd[k].hi,
                                                                            0, sp.sd[k].min_abs})
                                            : sp.sd[k];
              v.push_back(make_operand(L, k, dt, d, g));
            }
            return v;
          };
          std::vector<Operand> ops = build(rng);
          std::vector<Host> in;
          for (auto& o : ops) in.push_back(o.logical);
          Expected want;
          if (sp.transpose) {
            want = transposed(in[0]);
          } else if (fam == Family::Reduce) {
            want = lanes(sp, in[0], std::nullopt);
          } else if (fam == Family::Dim) {
            want = lanes(sp, in[0], static_cast<std::size_t>(*dim < 0 ? *dim + 2 : *dim));
          } else {
            std::optional<double> sf;
            std::optional<std::int64_t> si;
            if (sc) {
              if (fl) sf = sc->to_double();
              else if (is_bo(dt)) si = sc->to_bool() ? 1 : 0;
              else si = sc->to_int64();
            }
            want = elementwise(sp, in, sf, si);
          }
          // Calls the op; operands whose bit is set in `give` are handed over (then
          // uniquely owned, so the backend may write into them), the others shared.
          auto call = [&](std::vector<Operand>& v, unsigned give) {
            auto arg = [&](std::size_t k) { return (give >> k) & 1u ? v[k].t.take() : v[k].t.share(); };
            switch (fam) {
              case Family::Unary: return H(detail::unary(op, arg(0)));
              case Family::Binary: { auto a = arg(0); return H(detail::binary(op, std::move(a), arg(1))); }
              case Family::Scalar: return H(detail::scalar(op, arg(0), *sc));
              case Family::Compare: { auto a = arg(0); return H(detail::compare(op, std::move(a), arg(1))); }
              case Family::CompareScalar: return H(detail::compare_scalar(op, arg(0), *sc));
              case Family::Reduce: return H(detail::reduce(op, arg(0)));
              case Family::Dim: return H(detail::reduce_dim(op, arg(0), *dim));
              default: throw std::logic_error("family not driven by the harness");
            }
          };
          try {
            H out = call(ops, 0);
            if (want.error) {
              ADD_FAILURE() << "expected ShapeError, got a result of shape " << out.shape().to_string();
              continue;
            }
            const Host got = out.read();
            EXPECT_TRUE(same(want, got));
            // The inputs are untouched (ops take their operands by value; shared ones must not
            // change); checked where the ownership variants run (device round trips).
            for (std::size_t k = 0; variants_at(dev, L) && k < ops.size(); ++k) {
              Expected in_want{in[k], std::vector<double>(in[k].f.size(), 0.0), false};
              EXPECT_TRUE(same(in_want, ops[k].t.read())) << "operand " << k << " changed";
            }
            ++combos;
            // Ownership variants: the same values, operands handed over (unique), so
            // in-place paths (write into lhs, into rhs with reversed kernels, views) run.
            for (unsigned give = 1; variants_at(dev, L) && give < (1u << arity); ++give) {
              std::mt19937 again = rng_before;
              std::vector<Operand> fresh = build(again);
              SCOPED_TRACE("operands handed over: mask " + std::to_string(give));
              EXPECT_TRUE(same(want, call(fresh, give).read()));
              for (std::size_t k = 0; k < fresh.size(); ++k) {
                if ((give >> k) & 1u) {
                  EXPECT_THROW(fresh[k].t.shape(), tensor::Error) << "operand " << k << " not consumed";
                }
              }
            }
          } catch (const tensor::NotImplemented&) {
            ni.insert(name(dt));
            not_implemented()[dev_name + " " + op_name].insert(name(dt));
          } catch (const tensor::ShapeError& e) {
            if (!want.error) ADD_FAILURE() << "unexpected ShapeError: " << e.what();
            else EXPECT_NE(std::string(e.what()).find(op_name), std::string::npos) << e.what();
          } catch (const std::exception& e) {
            ADD_FAILURE() << "unexpected exception: " << e.what();
          }
        }
    }
  }
  RecordProperty("checked_combinations", combos);
  if (!has_entry) {
    EXPECT_EQ(combos, 0) << op_name << " has no " << dev_name << " entry, yet calls succeeded";
  }
  if (combos == 0 && !ni.empty())
    GTEST_SKIP() << op_name << " raised NotImplemented on " << dev_name << (has_entry ? "" : " (required entry missing)");
}

INSTANTIATE_TEST_SUITE_P(OpTable, GeneratedOp, ::testing::ValuesIn(cases_of(harness_family)), case_name);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(GeneratedOp);  // TENSOR_TEST_DEVICE names an absent device
}  // namespace ops_spec
