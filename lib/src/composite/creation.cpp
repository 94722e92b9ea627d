// The creation methods of tensor.hpp composed from ops: one_hot, eye, triangular parts and
// masks, tensors from host values, categorical sampling.
#include <string>
#include <utility>
#include <vector>

#include "lib/src/composite/compose.hpp"

namespace tensor::detail {

using namespace compose;

Handle one_hot(Handle&& a_, std::size_t classes, Scalar on, Scalar off, std::int64_t axis, const char* op) {
  H a(a_);
  a_ = Handle{};
  const Shape s = a.shape();
  const auto r = static_cast<std::int64_t>(s.rank()) + 1;
  const std::int64_t ax = axis < 0 ? axis + r : axis;
  if (ax < 0 || ax >= r)
    throw IndexError(std::string("[") + op + "] axis out of range; expected " + std::to_string(-r) + ".." +
                     std::to_string(r - 1) + "; got " + std::to_string(axis));
  return named(op, [&] {
    const Kind k = kind(a.h);
    const Device dev = device(a.h);
    const H idx = k == Kind::Int ? a : H(cast(OpCode::into_int, a.r(), to_dtype(dev.settings().int_dtype)));
    // As burn, the values must be class indices, a negative one counting from the end
    // (-1 is the last class); read back to check them.
    const TensorData host = into_data(idx.r()).get().convert(DType::I64);
    const auto c = static_cast<std::int64_t>(classes);
    bool negative = false;
    for (std::int64_t v : host.to_vec<std::int64_t>()) {
      if (v < -c || v >= c)
        throw IndexError(std::string("[") + op + "] value is not a class index; expected " + std::to_string(-c) + ".." +
                         std::to_string(c - 1) + "; got " + std::to_string(v));
      negative = negative || v < 0;
    }
    const H wrapped =
        negative ? H(mask_where(idx.r(), compare_scalar(OpCode::lower_elem, idx.r(), Scalar(std::int64_t{0})),
                                scalar(OpCode::add_scalar, idx.r(), Scalar(c))))
                 : idx;
    Shape us = s;
    us.insert(static_cast<std::size_t>(ax), 1);
    const H cls = lit_reshape(H(arange(0, static_cast<std::int64_t>(classes), 1, dev, dtype(idx.h))),
                              along(us.rank(), static_cast<std::size_t>(ax), classes));
    const H eq = H(compare(OpCode::equal, lit_reshape(wrapped, us).take(), cls.r()));
    Shape out = us;
    out[static_cast<std::size_t>(ax)] = classes;
    const H base = H(full(out, off, dev, k, dtype(a.h)));
    return mask_fill(base.r(), eq.r(), on);
  });
}

Handle eye(std::size_t n, Device dev, Kind k, std::optional<DType> dt) {
  return named("eye", [&] {
    const H i = int_arange(n, dev);
    const H eq = H(compare(OpCode::equal, lit_reshape(i, Shape{n, 1}).take(), lit_reshape(i, Shape{1, n}).take()));
    const H z = H(create(OpCode::zeros, Shape{n, n}, dev, k, dt));
    return mask_fill(z.r(), eq.r(), Scalar(1));
  });
}

Handle tri(Handle&& a_, std::int64_t diagonal, bool upper) {
  H a(a_);
  a_ = Handle{};
  const char* op = upper ? "triu" : "tril";
  const Shape s = a.shape();
  if (s.rank() < 2)
    throw ShapeError(std::string("[") + op + "] expected a tensor of rank >= 2; got shape " + s.to_string());
  return named(op, [&] {
    const std::size_t rows = s[s.rank() - 2], cols = s[s.rank() - 1];
    const H m = H(tri_mask(rows, cols, diagonal, !upper, device(a.h)));
    Shape ms;
    for (std::size_t i = 0; i + 2 < s.rank(); ++i) ms.push_back(1);
    ms.push_back(rows);
    ms.push_back(cols);
    return mask_fill(a.r(), lit_reshape(m, ms).take(), kind(a.h) == Kind::Bool ? Scalar(false) : Scalar(0));
  });
}

Handle tri_mask(std::size_t rows, std::size_t cols, std::int64_t offset, bool upper, Device dev) {
  return named(upper ? "tril_mask" : "triu_mask", [&] {
    const H row = lit_reshape(int_arange(rows, dev), Shape{rows, 1});
    const H col = lit_reshape(int_arange(cols, dev), Shape{1, cols});
    const H diff = bin(OpCode::sub, col, row);  // col - row: 0 on the diagonal
    return compare_scalar(upper ? OpCode::greater_elem : OpCode::lower_elem, diff.r(), Scalar(offset));
  });
}

Handle diag_mask(std::size_t rows, std::size_t cols, std::int64_t offset, Device dev) {
  return named("diag_mask", [&] {
    const H row = lit_reshape(int_arange(rows, dev), Shape{rows, 1});
    const H col = lit_reshape(int_arange(cols, dev), Shape{1, cols});
    const H diff = bin(OpCode::sub, col, row);
    return compare_scalar(OpCode::not_equal_elem, diff.r(), Scalar(offset));
  });
}

Handle from_values(TensorData data, Device dev, Kind k, const char* op) {
  return named(op, [&] {
    if (k == Kind::Float) data = data.convert(to_dtype(dev.settings().float_dtype));
    else if (k == Kind::Int) data = data.convert(to_dtype(dev.settings().int_dtype));
    return from_data(std::move(data), dev, k);
  });
}

Handle categorical(Handle&& a_, std::size_t num_samples) {
  H a = take_h(a_);
  const Shape s = a.shape();
  const std::size_t r = s.rank(), last = r - 1, c = s[last];
  if (kind(a.h) != Kind::Float)
    throw DTypeError("[categorical] expected a Float tensor of class weights; got another kind");
  if (c == 0) throw ShapeError("[categorical] expected at least one class in the last dim; got shape " + s.to_string());
  if (num_samples == 0) throw ShapeError("[categorical] expected at least one sample (num_samples > 0, as burn); got 0");
  if (r + 1 > kMaxRank)
    throw ShapeError("[categorical] expected a rank below " + std::to_string(kMaxRank) + "; got shape " + s.to_string());
  return named("categorical", [&]() -> Handle {
    const Device dev = device(a.h);
    const Shape out = with_dim(s, last, num_samples);
    if (out.num_elements() == 0) return create(OpCode::zeros, out, dev, Kind::Int, std::nullopt);
    // Weights: finite, non-negative, a positive sum per row (checked on the host).
    const H cum = rdim(OpCode::cumsum, a, last);
    const H total = slice_dim(cum, last, Slice::index(static_cast<std::int64_t>(c) - 1));  // [.., 1]
    const double lo = into_scalar(reduce(OpCode::min, a.r())).to_double();
    const double lo_total = into_scalar(reduce(OpCode::min, total.r())).to_double();
    const bool finite = into_scalar(any_all(OpCode::all, is_finite(a.r()))).to_bool();
    if (!finite || !(lo >= 0) || !(lo_total > 0))
      throw IndexError("[categorical] expected finite, non-negative class weights with a positive sum in every row; got " +
                       std::string(!finite ? "a non-finite weight" : !(lo >= 0) ? "a negative weight" : "a row summing to 0"));
    // u in [0, 1) per sample; the class is the number of running sums <= u * total
    // (the last running sum is left out, so the index stays below c).
    Shape us = out;
    us.push_back(1);  // [.., S, 1]
    const H u = H(random(us, Distribution{}, dev, Kind::Float, dtype(a.h)));
    Shape ts = s;
    ts.insert(last, 1);  // [.., 1, 1]
    ts[r] = 1;
    const H t = bin(OpCode::mul, u, lit_reshape(total, ts));  // [.., S, 1]
    Shape cs = s;
    cs.insert(last, 1);  // [.., 1, C]
    H head = lit_reshape(cum, cs);
    if (c == 1) return create(OpCode::zeros, out, dev, Kind::Int, std::nullopt);
    head = slice_dim(head, r, Slice::range(0, static_cast<std::int64_t>(c) - 1));  // [.., 1, C - 1]
    const H le = H(compare(OpCode::lower_equal, head.r(), t.r()));                // [.., S, C - 1]
    const H cnt = rdim(OpCode::sum_dim, H(cast(OpCode::into_int, le.r(), to_dtype(dev.settings().int_dtype))), r);
    return lit_reshape(cnt, out).take();
  });
}
}  // namespace tensor::detail
