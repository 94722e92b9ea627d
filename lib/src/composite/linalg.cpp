// tensor/linalg.hpp's compositions and the linear-algebra methods of tensor.hpp: norms,
// normalisation, cosine similarity, outer products, matvec, diag / trace, dot, and det /
// lu / qr of small (batched) matrices (LAPACK on the plain cpu device).
#include <cmath>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "lib/src/composite/compose.hpp"
#include "lib/src/lapack.hpp"

namespace tensor::detail {

using namespace compose;

Handle vector_norm(Handle&& a_, std::int64_t dim, double p) {
  H x = take_h(a_);
  const std::size_t d = rdim_of("vector_norm", dim, x.shape().rank());
  return named("vector_norm", [&] { return norm_of(x, p, d).take(); });
}

Handle vector_normalize(Handle&& a_, std::int64_t dim, double p, double epsilon) {
  H x = take_h(a_);
  const std::size_t d = rdim_of("vector_normalize", dim, x.shape().rank());
  return named("vector_normalize", [&] {
    return binary(OpCode::div, x.r(), scalar(OpCode::clamp_min, norm_of(x, p, d).take(), Scalar(epsilon)));
  });
}

Handle cosine_similarity(Handle&& a_, Handle&& b_, std::int64_t dim, double epsilon) {  // dot / max(|a| |b|, eps) along dim
  H a = take_h(a_), b = take_h(b_);
  return named("cosine_similarity", [&] {
    const std::size_t d = rdim_of("cosine_similarity", dim, a.shape().rank());
    const H dotp = rdim(OpCode::sum_dim, bin(OpCode::mul, a, b), d);
    const H den = bin(OpCode::mul, norm_of(a, 2, d), norm_of(b, 2, d));
    return binary(OpCode::div, dotp.r(), scalar(OpCode::clamp_min, den.r(), Scalar(epsilon)));
  });
}

namespace {
// a[.., i, ..] * b[.., j, ..] at dims (d, d + 1), the other dims broadcast.
Handle outer_at(const char* op, H a, H b, std::int64_t dim) {
  const Shape sa = a.shape(), sb = b.shape();
  return named(op, [&] {
    if (sa.rank() != sb.rank())
      throw ShapeError(std::string("[") + op + "] operands of one rank; expected rank " + std::to_string(sa.rank()) + "; got " +
                       sa.to_string() + " and " + sb.to_string());
    if (sa.rank() + 1 > kMaxRank)
      throw ShapeError(std::string("[") + op + "] expected a rank below " + std::to_string(kMaxRank) + "; got " + sa.to_string());
    if (kind(a.h) == Kind::Bool) throw DTypeError(std::string("[") + op + "] expected Float or Int tensors; got Bool");
    const std::size_t d = rdim_of(op, dim, sa.rank());
    Shape ua = sa, ub = sb;
    ua.insert(d + 1, 1);
    ub.insert(d, 1);
    return binary(OpCode::mul, lit_reshape(a, ua).take(), lit_reshape(b, ub).take());
  });
}

// The diagonal of the last two dims (off-diagonal zeroed, then summed per row): [.., k].
// With `trace`, those summed too: [.., 1].
Handle diagonal(const char* op, const H& x, bool trace) {
  return named(op, [&] {
    const Shape s = x.shape();
    if (s.rank() < 2) throw ShapeError(std::string("[") + op + "] expected a tensor of rank >= 2; got shape " + s.to_string());
    const std::size_t r = s.rank(), k = std::min(s[r - 2], s[r - 1]);
    std::vector<Slice> sl(r);
    sl[r - 2] = Slice::range(0, static_cast<std::int64_t>(k));
    sl[r - 1] = Slice::range(0, static_cast<std::int64_t>(k));
    const H sq = H(slice(x.r(), sl));
    Shape ms;
    for (std::size_t i = 0; i + 2 < r; ++i) ms.push_back(1);
    ms.push_back(k);
    ms.push_back(k);
    const H off = lit_reshape(H(diag_mask(k, k, 0, device(x.h))), ms);
    const H d = rdim(OpCode::sum_dim, H(mask_fill(sq.r(), off.r(), Scalar(0))), r - 1);
    Shape out = d.shape();
    out.erase(r - 1);
    if (trace) {  // [.., k, 1] summed over k -> [.., 1]
      out[r - 2] = 1;
      return lit_reshape(rdim(OpCode::sum_dim, d, r - 2), out).take();
    }
    return lit_reshape(d, out).take();
  });
}
}  // namespace

Handle outer(Handle&& a_, Handle&& b_) { return outer_at("outer", take_h(a_), take_h(b_), -1); }
Handle outer_dim(Handle&& a_, Handle&& b_, std::int64_t dim) { return outer_at("outer_dim", take_h(a_), take_h(b_), dim); }

Handle matvec(Handle&& m_, Handle&& v_) {  // [.., m, n] x [.., n] -> [.., m]
  H a = take_h(m_), b = take_h(v_);
  const Shape sa = a.shape(), sb = b.shape();
  return named("matvec", [&] {
    if (sa.rank() < 2 || sb.rank() + 1 != sa.rank())
      throw ShapeError("[matvec] expected a matrix [.., m, n] and a vector [.., n] of one rank less; got " + sa.to_string() +
                       " and " + sb.to_string());
    Shape vs = sb;
    vs.push_back(1);
    const H r = H(matmul(a.r(), lit_reshape(b, vs).take()));
    Shape out = r.shape();
    out.erase(out.rank() - 1);
    return lit_reshape(r, out).take();
  });
}

Handle diag(Handle&& a_) { return diagonal("diag", take_h(a_), false); }
Handle trace(Handle&& a_) { return diagonal("trace", take_h(a_), true); }

Handle dot(Handle&& a_, Handle&& b_) {
  H a = take_h(a_), b = take_h(b_);
  if (!(a.shape() == b.shape()))
    throw ShapeError("[dot] operand shapes differ; expected " + a.shape().to_string() + "; got " + b.shape().to_string());
  return named("dot", [&] { return reduce(OpCode::sum, binary(OpCode::mul, a.r(), b.r())); });
}

namespace {

std::vector<Slice> sl3(Slice a, Slice b, Slice c) { return {a, b, c}; }

struct LuParts {
  H lu;    // [B, n, n]: L below the diagonal (unit diagonal implied), U on and above it
  H perm;  // [B, n] Int: row i of P A is row perm[i] of A
  H sign;  // [B, 1, 1]: the permutation's sign
};

void check_matrix(const char* op, const H& a) {
  const Shape s = a.shape();
  if (s.rank() < 2) throw ShapeError(std::string("[") + op + "] expected matrices [.., m, n]; got shape " + s.to_string());
  if (kind(a.h) != Kind::Float) throw DTypeError(std::string("[") + op + "] expected a Float tensor; got another kind");
}

void check_square(const char* op, const H& a) {
  const Shape s = a.shape();
  if (s.rank() < 2 || s[s.rank() - 1] != s[s.rank() - 2])
    throw ShapeError(std::string("[") + op + "] expected square matrices [.., n, n]; got shape " + s.to_string());
  if (kind(a.h) != Kind::Float) throw DTypeError(std::string("[") + op + "] expected a Float tensor; got another kind");
}

// Gaussian elimination with partial pivoting, one column per step, every batch at once;
// [B, m, n] of any m, n (min(m, n) steps).
LuParts lu_steps(const H& a) {
  const Shape s = a.shape();
  const std::size_t r = s.rank(), m = s[r - 2], n = s[r - 1], steps = std::min(m, n);
  std::size_t b = 1;
  for (std::size_t i = 0; i + 2 < r; ++i) b *= s[i];
  const Device dev = device(a.h);
  const auto bi = static_cast<std::int64_t>(b), mi = static_cast<std::int64_t>(m), ni = static_cast<std::int64_t>(n);
  H mat = lit_reshape(a, Shape{b, m, n});
  const H ar = lit_reshape(int_arange(m, dev), Shape{1, m});
  const H arb = H(reshape(OpCode::expand, ar.r(), std::vector<std::int64_t>{bi, mi}));
  H perm = arb;
  H sign = H(create(OpCode::ones, Shape{b, 1, 1}, dev, Kind::Float, dtype(a.h)));
  const Slice all = Slice::all();
  for (std::size_t k = 0; k < steps; ++k) {
    const auto ki = static_cast<std::int64_t>(k);
    const H col = H(slice(mat.r(), sl3(all, Slice::from(ki), Slice::range(ki, ki + 1))));     // [B, m - k, 1]
    const H p = sc(OpCode::add_scalar, H(dim_index(OpCode::argmax, unary(OpCode::abs, col.r()), 1)), Scalar(ki));  // [B, 1, 1]
    const H pb = lit_reshape(p, Shape{b, 1});
    const H pbe = H(reshape(OpCode::expand, pb.r(), std::vector<std::int64_t>{bi, mi}));
    H idx = H(mask_fill(arb.r(), compare(OpCode::equal, arb.r(), pbe.r()), Scalar(ki)));  // row p <- row k
    idx = H(mask_where(idx.r(), compare_scalar(OpCode::equal_elem, arb.r(), Scalar(ki)), pbe.r()));  // row k <- row p
    const H idx3 = H(reshape(OpCode::expand, lit_reshape(idx, Shape{b, m, 1}).take(), std::vector<std::int64_t>{bi, mi, ni}));
    mat = H(gather(mat.r(), 1, idx3.r()));
    perm = H(gather(perm.r(), 1, idx.r()));
    const H swapped = H(compare_scalar(OpCode::not_equal_elem, p.r(), Scalar(ki)));
    sign = H(mask_where(sign.r(), swapped.r(), unary(OpCode::neg, sign.r())));
    if (k + 1 == m) break;
    // The pivot is the largest |value| of its column: a zero pivot has zeros below it, so 0 / 1 = 0.
    const H piv = H(slice(mat.r(), sl3(all, Slice::range(ki, ki + 1), Slice::range(ki, ki + 1))));
    const H safe = H(mask_fill(piv.r(), compare_scalar(OpCode::equal_elem, piv.r(), Scalar(0.0)), Scalar(1.0)));
    const H below = H(slice(mat.r(), sl3(all, Slice::from(ki + 1), Slice::range(ki, ki + 1))));
    const H f = bin(OpCode::div, below, safe);                                                    // [B, m - k - 1, 1]
    if (k + 1 < n) {
      const H row = H(slice(mat.r(), sl3(all, Slice::range(ki, ki + 1), Slice::from(ki + 1))));  // [B, 1, n - k - 1]
      const auto rest = sl3(all, Slice::from(ki + 1), Slice::from(ki + 1));
      const H sub = bin(OpCode::sub, H(slice(mat.r(), rest)), bin(OpCode::mul, f, row));
      mat = H(slice_assign(mat.r(), rest, sub.r()));
    }
    mat = H(slice_assign(mat.r(), sl3(all, Slice::from(ki + 1), Slice::range(ki, ki + 1)), f.r()));
  }
  return {mat, perm, sign};
}

// LAPACK on the plain cpu device (lapack.hpp), the composed elimination elsewhere.
LuParts lu_parts(const H& a) {
  lapack::Lu f;
  if (lapack::lu(a.h, f)) return {H(f.lu), H(f.perm), H(f.sign)};
  return lu_steps(a);
}

Shape batch_with(const Shape& s, std::size_t drop, std::initializer_list<std::size_t> tail) {
  Shape out;
  for (std::size_t i = 0; i + drop < s.rank(); ++i) out.push_back(s[i]);
  for (std::size_t t : tail) out.push_back(t);
  return out;
}

}  // namespace

std::pair<Handle, Handle> lu_decomposition(Handle&& a_) {
  H a = take_h(a_);
  check_matrix("lu_decomposition", a);
  const Shape s = a.shape();
  const std::size_t m = s[s.rank() - 2];
  return named("lu_decomposition", [&] {
    LuParts p = lu_parts(a);
    H lu = lit_reshape(p.lu, s), perm = lit_reshape(p.perm, batch_with(s, 2, {m}));
    return std::pair<Handle, Handle>(lu.take(), perm.take());
  });
}

HandleList lu(Handle&& a_) {
  H a = take_h(a_);
  check_matrix("lu", a);
  const Shape s = a.shape();
  const std::size_t r = s.rank(), m = s[r - 2], n = s[r - 1], k = std::min(m, n);
  return named("lu", [&] {
    LuParts p = lu_parts(a);
    const H packed = lit_reshape(p.lu, s);
    // L [.., m, k] from the first k columns, U [.., k, n] from the first k rows.
    const H lsrc = m > n ? packed : slice_dim(packed, r - 1, Slice::range(0, static_cast<std::int64_t>(k)));
    const H usrc = m > n ? slice_dim(packed, r - 2, Slice::range(0, static_cast<std::int64_t>(k))) : packed;
    Shape es = batch_with(s, 2, {m, k});
    for (std::size_t i = 0; i + 2 < es.rank(); ++i) es[i] = 1;
    const H id = lit_reshape(slice_dim(H(eye(m, device(a.h), Kind::Float, dtype(a.h))), 1,
                                       Slice::range(0, static_cast<std::int64_t>(k))), es);
    H l = bin(OpCode::add, H(tri(lsrc.r(), -1, false)), id), u = H(tri(usrc.r(), 0, true));
    H perm = lit_reshape(p.perm, batch_with(s, 2, {m}));
    auto* arr = new Handle[3];
    HandleList out(arr, 3);
    arr[0] = l.take();
    arr[1] = u.take();
    arr[2] = perm.take();
    return out;
  });
}

Handle det(Handle&& a_) {
  H a = take_h(a_);
  check_square("det", a);
  const Shape s = a.shape();
  const std::size_t n = s[s.rank() - 1];
  return named("det", [&]() -> Handle {
    // The batch dims; a single matrix gives one element.
    const Shape out = s.rank() == 2 ? Shape{1} : batch_with(s, 2, {});
    if (n == 0) return create(OpCode::ones, out, device(a.h), Kind::Float, dtype(a.h));
    LuParts p = lu_parts(a);
    const H d = rdim(OpCode::prod_dim, H(diag(p.lu.r())), 1);  // [B, 1]
    const H v = bin(OpCode::mul, d, lit_reshape(p.sign, d.shape()));
    return lit_reshape(v, out).take();
  });
}

namespace {

// Reduced QR of [.., m, n], m >= n >= 1: LAPACK on the plain cpu device, else modified
// Gram-Schmidt column by column (R's diagonal >= 0; a rank-deficient column gives a zero
// column of Q).
std::pair<Handle, Handle> qr_gram_schmidt(const H& a) {
  const Shape s = a.shape();
  const std::size_t r = s.rank(), n = s[r - 1];
  if (Handle q0{}, r0{}; lapack::qr(a.h, q0, r0)) return std::pair<Handle, Handle>(q0, r0);
  std::vector<H> q;
  std::vector<std::vector<H>> rcol(n);  // rcol[j][i]: R[i, j], each [.., 1, 1]
  const H zero = H(create(OpCode::zeros, batch_with(s, 2, {1, 1}), device(a.h), Kind::Float, dtype(a.h)));
  for (std::size_t j = 0; j < n; ++j) {
    H v = slice_dim(a, r - 1, Slice::range(static_cast<std::int64_t>(j), static_cast<std::int64_t>(j + 1)));  // [.., m, 1]
    for (std::size_t i = 0; i < j; ++i) {
      const H rij = rdim(OpCode::sum_dim, bin(OpCode::mul, q[i], v), r - 2);  // [.., 1, 1]
      v = bin(OpCode::sub, v, bin(OpCode::mul, rij, q[i]));
      rcol[j].push_back(rij);
    }
    const H nrm = un(OpCode::sqrt, rdim(OpCode::sum_dim, bin(OpCode::mul, v, v), r - 2));
    const H safe = H(mask_fill(nrm.r(), compare_scalar(OpCode::equal_elem, nrm.r(), Scalar(0.0)), Scalar(1.0)));
    rcol[j].push_back(nrm);
    q.push_back(bin(OpCode::div, v, safe));
    for (std::size_t i = j + 1; i < n; ++i) rcol[j].push_back(zero);
  }
  std::vector<Handle> qs, rs;
  for (H& x : q) qs.push_back(x.take());
  H qm = H(cat(std::move(qs), static_cast<std::int64_t>(r - 1)));
  for (std::size_t j = 0; j < n; ++j) {
    std::vector<Handle> c;
    for (H& x : rcol[j]) c.push_back(x.r());
    rs.push_back(cat(std::move(c), static_cast<std::int64_t>(r - 2)));  // column j of R: [.., n, 1]
  }
  H rm = H(cat(std::move(rs), static_cast<std::int64_t>(r - 1)));
  return std::pair<Handle, Handle>(qm.take(), rm.take());
}

// QR of [.., m, n] by Householder reflections (every batch at once, min(m, n) steps):
// the complete Q [.., m, m] and R [.., m, n], signs chosen so that R's diagonal is >= 0;
// `reduced` keeps Q's first min(m, n) columns and R's first min(m, n) rows.
std::pair<Handle, Handle> qr_householder(const H& a, bool reduced) {
  const Shape s = a.shape();
  const std::size_t r = s.rank(), m = s[r - 2], n = s[r - 1], k = std::min(m, n);
  std::size_t b = 1;
  for (std::size_t i = 0; i + 2 < r; ++i) b *= s[i];
  const Device dev = device(a.h);
  const DType dt = dtype(a.h);
  const Slice all = Slice::all();
  H rm = lit_reshape(a, Shape{b, m, n});
  H qm = bin(OpCode::add, H(create(OpCode::zeros, Shape{b, m, m}, dev, Kind::Float, dt)),
             lit_reshape(H(eye(m, dev, Kind::Float, dt)), Shape{1, m, m}));  // I, materialised per batch
  for (std::size_t i = 0; i < k; ++i) {
    const auto ii = static_cast<std::int64_t>(i);
    const H x = H(slice(rm.r(), sl3(all, Slice::from(ii), Slice::range(ii, ii + 1))));  // [B, m - i, 1]
    const H alpha = H(slice(x.r(), sl3(all, Slice::range(0, 1), all)));                 // [B, 1, 1]
    const H nrm = un(OpCode::sqrt, rdim(OpCode::sum_dim, bin(OpCode::mul, x, x), 1));
    const H ones = H(create(OpCode::ones, Shape{b, 1, 1}, dev, Kind::Float, dt));
    const H sgn = H(mask_fill(ones.r(), compare_scalar(OpCode::lower_elem, alpha.r(), Scalar(0.0)), Scalar(-1.0)));
    std::vector<double> e(m - i, 0.0);
    e[0] = 1.0;
    const H e0 = H(from_data(TensorData::from<double>(e, Shape{1, m - i, 1}).convert(dt), dev, Kind::Float));
    const H v = bin(OpCode::add, x, bin(OpCode::mul, e0, bin(OpCode::mul, sgn, nrm)));  // x + sign(alpha) |x| e0
    const H vv = rdim(OpCode::sum_dim, bin(OpCode::mul, v, v), 1);
    const H zero_v = H(compare_scalar(OpCode::equal_elem, vv.r(), Scalar(0.0)));  // x = 0: no reflection
    const H safe = H(mask_fill(vv.r(), zero_v.r(), Scalar(1.0)));
    const H tau = H(mask_fill(scalar(OpCode::mul_scalar, unary(OpCode::recip, safe.r()), Scalar(2.0)), zero_v.r(), Scalar(0.0)));
    // R[:, i:, i:] -= v tau (v^T R[:, i:, i:])
    const auto rsl = sl3(all, Slice::from(ii), Slice::from(ii));
    const H rs = H(slice(rm.r(), rsl));                                                   // [B, m - i, n - i]
    const H w = bin(OpCode::mul, rdim(OpCode::sum_dim, bin(OpCode::mul, v, rs), 1), tau);  // [B, 1, n - i]
    rm = H(slice_assign(rm.r(), rsl, binary(OpCode::sub, rs.r(), binary(OpCode::mul, v.r(), w.r()))));
    // Q[:, :, i:] -= (Q[:, :, i:] v) tau v^T
    const auto qsl = sl3(all, all, Slice::from(ii));
    const H qs = H(slice(qm.r(), qsl));                                                   // [B, m, m - i]
    const H vt = lit_reshape(v, Shape{b, 1, m - i});
    const H qv = bin(OpCode::mul, rdim(OpCode::sum_dim, bin(OpCode::mul, qs, vt), 2), tau);  // [B, m, 1]
    qm = H(slice_assign(qm.r(), qsl, binary(OpCode::sub, qs.r(), binary(OpCode::mul, qv.r(), vt.r()))));
  }
  rm = H(tri(rm.r(), 0, true));
  if (k > 0) {  // flip the signs of R's rows (and Q's columns) with a negative diagonal entry
    const auto kk = static_cast<std::int64_t>(k);
    const H rk = H(slice(rm.r(), sl3(all, Slice::range(0, kk), Slice::range(0, kk))));
    const H d = H(diag(rk.r()));  // [B, k]
    const H sg = H(mask_fill(create(OpCode::ones, Shape{b, k}, dev, Kind::Float, dt),
                             compare_scalar(OpCode::lower_elem, d.r(), Scalar(0.0)), Scalar(-1.0)));
    const auto rows = sl3(all, Slice::range(0, kk), all), cols = sl3(all, all, Slice::range(0, kk));
    rm = H(slice_assign(rm.r(), rows, binary(OpCode::mul, slice(rm.r(), rows), lit_reshape(sg, Shape{b, k, 1}).take())));
    qm = H(slice_assign(qm.r(), cols, binary(OpCode::mul, slice(qm.r(), cols), lit_reshape(sg, Shape{b, 1, k}).take())));
  }
  std::size_t qc = m, rr = m;
  if (reduced && m > n) {
    qc = rr = n;
    qm = H(slice(qm.r(), sl3(all, all, Slice::range(0, static_cast<std::int64_t>(n)))));
    rm = H(slice(rm.r(), sl3(all, Slice::range(0, static_cast<std::int64_t>(n)), all)));
  }
  H q = lit_reshape(qm, batch_with(s, 2, {m, qc})), rt = lit_reshape(rm, batch_with(s, 2, {rr, n}));
  return std::pair<Handle, Handle>(q.take(), rt.take());
}

}  // namespace

std::pair<Handle, Handle> qr_mode(Handle&& a_, bool reduced) {
  H a = take_h(a_);
  check_matrix("qr", a);
  const Shape s = a.shape();
  const std::size_t m = s[s.rank() - 2], n = s[s.rank() - 1];
  return named("qr", [&] {
    if (reduced && m >= n && n > 0) return qr_gram_schmidt(a);
    return qr_householder(a, reduced);
  });
}

std::pair<Handle, Handle> qr(Handle&& a_) { return qr_mode(std::move(a_), true); }

Handle linalg_norm(Handle&& a_, double p, std::int64_t dim, const char* op) {
  H x = take_h(a_);
  const Kind k = kind(x.h);
  if (k != Kind::Float && k != Kind::Int)
    throw DTypeError(std::string("[") + op + "] expected a Float or Int tensor; got another kind");
  const std::size_t d = rdim_of(op, dim, x.shape().rank());
  return named(op, [&]() -> Handle {
    if (k == Kind::Float) return norm_of(x, p, d).take();
    if (p == 0) {  // the count of nonzero elements, in x's int dtype
      const H nz = H(compare_scalar(OpCode::not_equal_elem, x.r(), Scalar(std::int64_t{0})));
      return reduce_dim(OpCode::sum_dim, cast(OpCode::into_int, nz.r(), dtype(x.h)), static_cast<std::int64_t>(d));
    }
    if (p == 1) return rdim(OpCode::sum_dim, un(OpCode::abs, x), d).take();
    if (std::isinf(p)) return p > 0 ? rdim(OpCode::max_abs_dim, x, d).take() : rdim(OpCode::min_dim, un(OpCode::abs, x), d).take();
    throw DTypeError(std::string("[") + op + "] an Int tensor has only the norms p = 0, 1, inf and -inf; expected one of them; got p = " +
                     std::to_string(p));
  });
}


}  // namespace tensor::detail
