#include "dispatch/autodiff/checkpoint.hpp"

#include "dispatch/dispatch.hpp"

namespace tensor::dispatch::ad::detail {

RecipeRef input_recipe(const In& x) {
  if (x.recipe && x.recipe->steps.size() < kMaxRecipe) return x.recipe;
  return std::make_shared<const Recipe>(Recipe{x.p, {}});
}

RecipeRef extend(const RecipeRef& r, RecipeStep s) {
  auto o = std::make_shared<Recipe>(*r);
  o->steps.push_back(s);
  return o;
}

T replay(const Recipe& r) {
  T v = dt(r.base);
  for (const RecipeStep& s : r.steps) v = s.s ? scalar(s.op, std::move(v), *s.s) : unary(s.op, std::move(v));
  return v;
}

}  // namespace tensor::dispatch::ad::detail
