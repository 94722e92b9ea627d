// Forwarders: rfft / irfft. Each validates its arguments, states the output metadata and runs
// the backend entry through the one invocation path (dispatch/forward.hpp).
#include "dispatch/forward.hpp"

namespace tensor::dispatch {
using namespace fwd;

// ---- fft --------------------------------------------------------------------------------

using T = DispatchTensor;
using I = std::int64_t;
using N = std::size_t;

// Rfft: x [.., L, ..] -> (re, im) [.., n/2 + 1, ..] along dim; n 0 means L (L >= 1).
template <> struct fwd::Rule<Family::Rfft> : FloatOut {
  struct Plan { std::size_t d, len; Shape out; };
  static Plan check(OpCode op, const T& x, const I& dim, const N& n) {
    check_module_first(op, x, "signal");
    const Shape& s = x.shape();
    if (s.rank() < 1) throw ShapeError(fmt::format("[{}] expected a signal of rank >= 1; got a scalar shape []", op_name(op)));
    const std::size_t d = resolve_dim(op, dim, s.rank());
    const std::size_t len = n ? n : s[d];
    if (len < 1)
      throw ShapeError(fmt::format("[{}] expected a signal length n >= 1; got n = 0 for an empty dim {} of {}", op_name(op), d,
                                   s.to_string()));
    Shape out = resized_shape(s, d, len / 2 + 1);
    check_alloc_shape(op, out, x.dtype());
    return {d, len, std::move(out)};
  }
  static OpAttrs attrs(OpCode, const Plan& p, const T&, const I&, const N&) { return with_ints(i64(p.d), i64(p.len)); }
  template <class Entry>
  [[gnu::always_inline]] static std::pair<T, T> run(OpCode op, Entry entry, const Plan& p, T& x, const I&, const N&) {
    auto [re, im] = entry(op)(x.take(), p.d, p.len);
    return {T(std::move(re), Kind::Float), T(std::move(im), Kind::Float)};
  }
};

// Irfft: (re, im) [.., m, ..] -> [.., n, ..] along dim; n 0 means 2 (m - 1) (m >= 2).
template <> struct fwd::Rule<Family::Irfft> : FloatOut {
  struct Plan { std::size_t d, len; Shape out; };
  static Plan check(OpCode op, const T& re, const T& im, const I& dim, const N& n) {
    check_module_first(op, re, "real part");
    check_operand(op, re, im, "imaginary part");
    const Shape& s = re.shape();
    check_same_shape(op, "imaginary part", im.shape(), s);
    if (!(re.dtype() == im.dtype()))
      throw DTypeError(fmt::format("[{}] real and imaginary parts must have one dtype; got {} and {}", op_name(op),
                                   dtype_name(re.dtype()), dtype_name(im.dtype())));
    if (s.rank() < 1) throw ShapeError(fmt::format("[{}] expected spectra of rank >= 1; got a scalar shape []", op_name(op)));
    const std::size_t d = resolve_dim(op, dim, s.rank());
    const std::size_t m = s[d];
    if (m < 1)
      throw ShapeError(fmt::format("[{}] expected at least one bin along dim {}; got shape {}", op_name(op), d, s.to_string()));
    const std::size_t len = n ? n : 2 * (m - 1);
    if (len < 1)
      throw ShapeError(fmt::format("[{}] the default output length 2 (bins - 1) is 0 for one bin; expected an explicit n >= 1 "
                                   "or at least 2 bins; got shape {}",
                                   op_name(op), s.to_string()));
    Shape out = resized_shape(s, d, len);
    check_alloc_shape(op, out, re.dtype());
    return {d, len, std::move(out)};
  }
  static OpAttrs attrs(OpCode, const Plan& p, const T&, const T&, const I&, const N&) { return with_ints(i64(p.d), i64(p.len)); }
  template <class Entry>
  [[gnu::always_inline]] static T run(OpCode op, Entry entry, const Plan& p, T& re, T& im, const I&, const N&) {
    return {entry(op)(re.take(), im.take(), p.d, p.len), Kind::Float};
  }
};

std::pair<DispatchTensor, DispatchTensor> rfft(DispatchTensor x, std::int64_t dim, std::size_t n) {
  return forward<Family::Rfft>(OpCode::rfft, x, dim, n);
}
DispatchTensor irfft(DispatchTensor re, DispatchTensor im, std::int64_t dim, std::size_t n) {
  return forward<Family::Irfft>(OpCode::irfft, re, im, dim, n);
}

}  // namespace tensor::dispatch
