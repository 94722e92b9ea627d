// The row forms of rules/*.def. A row names a differentiable op, what its backward step
// keeps and its gradient; having a row is what makes an op's coverage "native"
// (rules.hpp), and the rows are what the decorator registers (track.hpp).
//
//   AD_RULE(op, keeps, statements)       the general form: the statements write out[k]
//                                        (the gradient of tensor input k) for each bit k
//                                        of `need`
//   AD_VIA(op, via, keeps, statements)   the forward runs `via` instead: op's arguments
//                                        plus the int dtype, giving (values, indices)
//   AD_UNARY(op, keeps, expr)            expr: the gradient of the one input
//   AD_SCALAR(op, keeps, expr)           the same, with v: the scalar as a double
//   AD_DIM(op, keeps, expr)              the same, with d: the dim
//   AD_BINARY(op, keeps, da, db)         da, db: the gradients of a and b before the
//                                        broadcast is summed away (sum_to is applied)
//   AD_ENTRY(op, function)               an entry of its own (the graph ops, and the
//                                        few whose forward is more than running the op)
//
// keeps: what the step reads, besides every tensor input's shape, dtype and device and
// every other argument (always kept): X (alias A): tensor input 0, B: input 1, C, D, E:
// inputs 2-4, Y: the output, I: the indices output (the with-indices forms and AD_VIA),
// Nothing; Crossed: A is kept only when B is tracked and B only when A is (each
// operand's gradient reads the other). Under balanced checkpointing a kept tensor may be
// a recipe, recomputed when the step runs (checkpoint.hpp).
//
// In the statements: g (the output's gradient), x or a and b (tensor inputs 0 and 1,
// empty unless kept), y, ix (the outputs, empty unless kept), st.get(k) (tensor input
// k), st.shape(k), st.dtype(k), st.device(k), st.has(k) (an optional tensor given),
// arg<k>(st) (the k-th argument that is not a tensor), need and out. Tensors are
// numbered among the tensor arguments and the rest among the rest: gather(x, d, idx)
// has tensor inputs x (0) and idx (1) and arg<0> = d. The helpers are math.hpp's.
#pragma once

#define AD_RULE(op, keeps, ...) AD_ROW(op, op, keeps, __VA_ARGS__)
#define AD_VIA(op, via, keeps, ...) AD_ROW(op, via, keeps, __VA_ARGS__)
#define AD_UNARY(op, keeps, expr) AD_ROW(op, op, keeps, out[0] = (expr);)
#define AD_SCALAR(op, keeps, expr) \
  AD_ROW(op, op, keeps, [[maybe_unused]] const double v = arg<0>(st).to_double(); out[0] = (expr);)
#define AD_DIM(op, keeps, expr) \
  AD_ROW(op, op, keeps, [[maybe_unused]] const std::size_t d = arg<0>(st); out[0] = (expr);)
#define AD_BINARY(op, keeps, da, db)                     \
  AD_ROW(op, op, keeps, if (need & 1) out[0] = sum_to(da, st.shape(0)); \
         if (need & 2) out[1] = sum_to(db, st.shape(1));)
