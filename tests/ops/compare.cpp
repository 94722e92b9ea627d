// Op tests: the references of the Compare and CompareScalar families (one predicate each).
#include "ops/ops_spec.hpp"

namespace ops_spec {

void add_compare_specs(std::map<std::string, Spec>& m) {
  // ---- Compare / CompareScalar (same predicates)
  const std::pair<const char*, std::function<bool(double, double)>> preds[] = {
      {"equal", [](double a, double b) { return a == b; }},
      {"not_equal", [](double a, double b) { return a != b; }},
      {"greater", [](double a, double b) { return a > b; }},
      {"greater_equal", [](double a, double b) { return a >= b; }},
      {"lower", [](double a, double b) { return a < b; }},
      {"lower_equal", [](double a, double b) { return a <= b; }},
  };
  for (const auto& [n, p] : preds) {
    m[n] = compare(p);
    m[std::string(n) + "_elem"] = compare(p);
  }
}

}  // namespace ops_spec
