// tensor/loss.hpp's compositions.
#include "lib/src/composite/compose.hpp"

namespace tensor::detail {

using namespace compose;

Handle cross_entropy_with_logits(Handle&& logits_, Handle&& targets_) {  // -mean(sum(targets * log_softmax(logits, last), last))
  const H a = take_h(logits_), b = take_h(targets_);
  const Shape sa = a.shape(), sb = b.shape();
  if (!(sa == sb))
    throw ShapeError("[cross_entropy_with_logits] operand shapes differ; expected " + sa.to_string() + "; got " + sb.to_string());
  return named("cross_entropy_with_logits", [&] {
    const std::size_t last = sa.rank() - 1;
    const H ls = H(reduce_dim(OpCode::log_softmax, a.r(), static_cast<std::int64_t>(last)));
    const H s = rdim(OpCode::sum_dim, bin(OpCode::mul, ls, b), last);
    return unary(OpCode::neg, reduce(OpCode::mean, s.r()));
  });
}

}  // namespace tensor::detail
