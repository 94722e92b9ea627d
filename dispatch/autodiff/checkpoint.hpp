// Balanced checkpointing (reference/autodiff.md): the output of a memory-bound op (the
// Unary and Scalar families) carries the recipe that recomputes it. A backward step that
// reads such a tensor saves its recipe instead of the tensor, so the intermediates of a
// chain of memory-bound ops are freed after the forward pass and recomputed during
// backward.
#pragma once

#include "dispatch/autodiff/graph.hpp"

namespace tensor::dispatch::ad::detail {

// Longer chains start again from a saved base (replaying is O(chain) per step).
inline constexpr std::size_t kMaxRecipe = 8;

// The families whose outputs carry a recipe: one input, elementwise, cheap to replay.
constexpr bool replayable(Family f) { return f == Family::Unary || f == Family::Scalar; }

// The recipe of a memory-bound op's input: its own, or the input itself as a base.
RecipeRef input_recipe(const In& x);
// `r` followed by one more step.
RecipeRef extend(const RecipeRef& r, RecipeStep s);
T replay(const Recipe& r);

// A tensor a backward step reads: kept, or (balanced checkpointing, for the output of a
// memory-bound op) recomputed from its recipe when the step runs. Empty when not kept.
struct Saved {
  T t;
  RecipeRef r;
  T get() const { return r ? replay(*r) : t; }
};
// Saves an opened input: its recipe under balanced checkpointing, the tensor otherwise.
inline Saved save(const In& x) {
  if (!x.p) return {};
  if (balanced() && x.recipe) return {T(), x.recipe};
  return {dt(x.p), nullptr};
}
inline Prim with_recipe(Prim out, RecipeRef r) {
  if (as_ad(out).node_) as_ad(out).recipe_ = std::move(r);
  return out;
}

}  // namespace tensor::dispatch::ad::detail
