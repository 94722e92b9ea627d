// Defaults: gather_nd / scatter_nd and grid_sample_2d (see dispatch/defaults/install.cpp for the rules every default keeps).
#include "dispatch/defaults/compose.hpp"

namespace tensor::dispatch::defaults {
namespace {

// ---- gather_nd / scatter_nd ------------------------------------------------------------
// The indices [.., k] are read back (their values decide the rows, and an out-of-range
// component would otherwise alias another row); x and the values stay on the device:
// x is viewed as [prod(first k dims), rest..] and rows of it are selected or updated.

struct NdRows {
  Shape flat;                      // [prod(s[0..k)), s[k..]..]
  std::vector<std::int64_t> rows;  // one linear row per index tuple
};
NdRows nd_rows(std::string_view op, const Shape& s, Prim idx) {
  const Shape is = idx->shape();
  const std::size_t k = is[is.rank() - 1];
  const std::vector<std::int64_t> host = read_prim(std::move(idx)).convert(DType::I64).to_vec<std::int64_t>();
  NdRows r;
  r.flat = Shape{1};
  for (std::size_t j = 0; j < k; ++j) r.flat[0] *= s[j];
  for (std::size_t j = k; j < s.rank(); ++j) r.flat.push_back(s[j]);
  std::vector<std::int64_t> strides(k, 1);
  for (std::size_t j = k - 1; j > 0; --j) strides[j - 1] = strides[j] * static_cast<std::int64_t>(s[j]);
  r.rows.assign(host.size() / k, 0);
  for (std::size_t i = 0; i < host.size(); ++i) {
    const std::size_t j = i % k;
    if (host[i] < 0 || host[i] >= static_cast<std::int64_t>(s[j]))
      throw IndexError(fmt::format("[{}] index out of range; expected 0..{} for dim {} of {}; got {}", op,
                                   static_cast<std::int64_t>(s[j]) - 1, j, s.to_string(), host[i]));
    r.rows[i / k] += host[i] * strides[j];
  }
  return r;
}
Prim upload_ints(const std::vector<std::int64_t>& v, DeviceId d) {
  return upload(TensorData::from(v, Shape{v.size()}).convert(int_dt(d)), d);
}

Prim d_gather_nd(Prim x, Prim idx) {
  const DeviceId d = x->device();
  const Shape s = x->shape(), out = nd_slices_shape(s, idx->shape());
  NdRows r = nd_rows("gather_nd", s, std::move(idx));
  Prim rows = upload_ints(r.rows, d);
  Prim sel = call<Family::Select>(OpCode::select, d, reshape_to(std::move(x), r.flat), std::size_t{0}, std::move(rows));
  return reshape_to(std::move(sel), out);
}

// Assign: the addressed rows are zeroed, then the last value written to each row is added
// (of duplicates, the last write wins, as burn's scatter_nd). Add: select_add; the other
// rules go to the backend's select_assign (a kernel, or its default: update_at below).
Prim d_scatter_nd(Prim x, Prim idx, Prim v, IndexingUpdateOp update) {
  const DeviceId d = x->device();
  const Shape s = x->shape();
  NdRows r = nd_rows("scatter_nd", s, std::move(idx));
  Shape vflat = r.flat;
  vflat[0] = r.rows.size();
  Prim base = reshape_to(std::move(x), r.flat), vals = reshape_to(std::move(v), vflat);
  if (r.rows.empty()) return reshape_to(std::move(base), s);
  IndexingUpdateOp how = update;
  std::vector<std::int64_t> rows = r.rows;
  if (update == IndexingUpdateOp::Assign) {
    std::vector<std::int64_t> last(r.flat[0], -1), keep, kept;
    for (std::size_t i = 0; i < rows.size(); ++i) last[static_cast<std::size_t>(rows[i])] = static_cast<std::int64_t>(i);
    std::vector<bool> hit(r.flat[0], false);
    for (std::size_t i = 0; i < rows.size(); ++i)
      if (last[static_cast<std::size_t>(rows[i])] == static_cast<std::int64_t>(i)) {
        keep.push_back(static_cast<std::int64_t>(i));
        kept.push_back(rows[i]);
        hit[static_cast<std::size_t>(rows[i])] = true;
      }
    Shape ms{std::vector<std::size_t>(r.flat.rank(), 1)};
    ms[0] = r.flat[0];
    Prim mask = upload(TensorData::from<bool>(hit).convert(bool_dt(d)), d);
    base = mfill(std::move(base), reshape_to(std::move(mask), ms), Scalar(0));
    if (keep.size() != rows.size()) {
      vals = call<Family::Select>(OpCode::select, d, std::move(vals), std::size_t{0}, upload_ints(keep, d));
      rows = std::move(kept);
    }
    how = IndexingUpdateOp::Add;
  }
  Prim out = how == IndexingUpdateOp::Add
                 ? call<Family::SelectAssign>(OpCode::select_add, d, std::move(base), std::size_t{0}, upload_ints(rows, d),
                                              std::move(vals))
                 : call<Family::SelectUpdate>(OpCode::select_assign, d, std::move(base), std::size_t{0}, upload_ints(rows, d),
                                              std::move(vals), how);
  return reshape_to(std::move(out), s);
}

// ---- updates by rule at host-computed positions (scatter, select_assign, scatter_nd) --------
// The touched positions U (ascending) are gathered into a short vector `sub`; each round
// applies every position's next update (round r: its r-th source, in source order), so
// positions written more than once combine in the order a sequential kernel would; then sub
// goes back into x. A write goes through select_add into a vector of -0.0 (x + -0.0 == x for
// every x, the sign of zero included) and mask_where, so values are exact.

}  // namespace

Prim update_at(Prim x, Prim v, const std::vector<std::int64_t>& targets, IndexingUpdateOp how) {
  const DeviceId d = x->device();
  const Shape s = x->shape();
  const std::size_t n = s.num_elements();
  if (targets.empty()) return x;
  Prim out = flat(std::move(x)), vals = flat(std::move(v));
  const DType dt = out->dtype();
  const Scalar neg_zero = is_float(dt) ? Scalar(-0.0) : Scalar(std::int64_t{0});
  // Writes `upd` (one value per position of `pos`, positions distinct) into `into` ([len]).
  const auto write = [&](Prim into, std::size_t len, const std::vector<std::int64_t>& pos, Prim upd) {
    std::vector<bool> hit(len, false);
    for (const std::int64_t p : pos) hit[static_cast<std::size_t>(p)] = true;
    Prim dense = call<Family::SelectAssign>(OpCode::select_add, d, full_shape(Shape{len}, neg_zero, d, dt), std::size_t{0},
                                            upload_ints(pos, d), std::move(upd));
    Prim mask = upload(TensorData::from<bool>(hit).convert(bool_dt(d)), d);
    return mwhere(std::move(into), std::move(mask), std::move(dense));
  };
  if (how == IndexingUpdateOp::Add)
    return reshape_to(call<Family::SelectAssign>(OpCode::select_add, d, std::move(out), std::size_t{0}, upload_ints(targets, d),
                                                 std::move(vals)),
                      s);
  // slot[t]: the position's index in U; rounds of (source, slot) pairs.
  std::vector<std::int64_t> slot(n, -1), touched;
  for (const std::int64_t t : targets) slot[static_cast<std::size_t>(t)] = 0;
  for (std::size_t t = 0; t < n; ++t)
    if (slot[t] == 0) {
      slot[t] = static_cast<std::int64_t>(touched.size());
      touched.push_back(static_cast<std::int64_t>(t));
    }
  std::vector<std::vector<std::int64_t>> src, dst;
  if (how == IndexingUpdateOp::Assign) {  // one round: each position's last source
    std::vector<std::int64_t> last(touched.size(), -1);
    for (std::size_t i = 0; i < targets.size(); ++i) last[static_cast<std::size_t>(slot[static_cast<std::size_t>(targets[i])])] = static_cast<std::int64_t>(i);
    src.push_back(std::move(last));
    dst.emplace_back(touched.size());
    std::iota(dst[0].begin(), dst[0].end(), std::int64_t{0});
  } else {
    std::vector<std::size_t> seen(touched.size(), 0);
    for (std::size_t i = 0; i < targets.size(); ++i) {
      const auto k = static_cast<std::size_t>(slot[static_cast<std::size_t>(targets[i])]);
      const std::size_t r = seen[k]++;
      if (r == src.size()) {
        src.emplace_back();
        dst.emplace_back();
      }
      src[r].push_back(static_cast<std::int64_t>(i));
      dst[r].push_back(static_cast<std::int64_t>(k));
    }
  }
  const OpCode combine = how == IndexingUpdateOp::Mul ? OpCode::mul : how == IndexingUpdateOp::Min ? OpCode::min_pair : OpCode::max_pair;
  const std::size_t u = touched.size();
  Prim sub = how == IndexingUpdateOp::Assign ? Prim{}
                                             : call<Family::Select>(OpCode::select, d, out, std::size_t{0}, upload_ints(touched, d));
  for (std::size_t r = 0; r < src.size(); ++r) {
    Prim upd = call<Family::Select>(OpCode::select, d, vals, std::size_t{0}, upload_ints(src[r], d));
    if (how == IndexingUpdateOp::Assign) {
      sub = std::move(upd);  // dst[0] is 0..u-1
      break;
    }
    Prim cur = call<Family::Select>(OpCode::select, d, sub, std::size_t{0}, upload_ints(dst[r], d));
    sub = write(std::move(sub), u, dst[r], bin(combine, std::move(cur), std::move(upd)));
  }
  return reshape_to(write(std::move(out), n, touched, std::move(sub)), s);
}

std::vector<std::int64_t> update_targets(std::string_view op, const Shape& xs, const Shape& vs, std::size_t dim, Prim idx,
                                         bool per_element) {
  const std::vector<std::int64_t> host = read_prim(std::move(idx)).convert(DType::I64).to_vec<std::int64_t>();
  const auto bound = static_cast<std::int64_t>(xs[dim]);
  for (const std::int64_t i : host)
    if (i < 0 || i >= bound)
      throw IndexError(fmt::format("[{}] index out of range for dim {}; expected 0 <= index < {}; got {}", op, dim, bound, i));
  const std::size_t rank = xs.rank(), m = vs.num_elements();
  std::vector<std::int64_t> xstride(rank, 1);
  for (std::size_t k = rank; k-- > 1;) xstride[k - 1] = xstride[k] * static_cast<std::int64_t>(xs[k]);
  std::vector<std::int64_t> targets(m);
  std::vector<std::size_t> p(rank, 0);  // v's multi-index, row major
  for (std::size_t i = 0; i < m; ++i) {
    std::int64_t t = 0;
    for (std::size_t k = 0; k < rank; ++k)
      t += (k == dim ? host[per_element ? i : p[k]] : static_cast<std::int64_t>(p[k])) * xstride[k];
    targets[i] = t;
    for (std::size_t k = rank; k-- > 0;) {
      if (++p[k] < vs[k]) break;
      p[k] = 0;
    }
  }
  return targets;
}

namespace {

// ---- grid_sample_2d ---------------------------------------------------------------------
// Bilinear (or nearest) taps gathered from the flattened image, as torch's grid_sampler_2d:
// the grid's x, y in [-1, 1] map to pixel coordinates (align_corners: -1 and 1 are the
// corner pixels' centres; otherwise their outer edges). Padding: Zeros (a tap outside the
// image adds nothing), Border (coordinates clamped to the image), Reflection (coordinates
// reflected at the border (align_corners: the corner centres; otherwise the outer edges),
// then clamped, as torch's reflect_coordinates).

// Reflects p into [lo2/2, hi2/2] (torch's reflect_coordinates(p, twice_low, twice_high)).
Prim reflected(Prim p, double twice_low, double twice_high) {
  if (twice_low == twice_high) return sc(OpCode::mul_scalar, std::move(p), Scalar(0.0));
  const double lo = twice_low / 2, span = (twice_high - twice_low) / 2;
  Prim in = un(OpCode::abs, sc(OpCode::sub_scalar, std::move(p), Scalar(lo)));
  Prim flips = un(OpCode::floor, sc(OpCode::div_scalar, in, Scalar(span)));
  Prim extra = bin(OpCode::sub, std::move(in), sc(OpCode::mul_scalar, flips, Scalar(span)));
  Prim odd = cmp_s(OpCode::greater_elem, sc(OpCode::remainder_scalar, std::move(flips), Scalar(2.0)), Scalar(0.5));
  Prim even_v = sc(OpCode::add_scalar, extra, Scalar(lo));
  Prim odd_v = sc(OpCode::add_scalar, un(OpCode::neg, std::move(extra)), Scalar(span + lo));
  return mwhere(std::move(even_v), std::move(odd), std::move(odd_v));
}

Prim d_grid_sample(Prim x, Prim grid_in, const GridSampleOptions& o) {
  using P = GridSampleOptions::Padding;
  const DeviceId d = x->device();
  const Shape s = x->shape(), gs = grid_in->shape();
  const std::size_t n = s[0], c = s[1], h = s[2], w = s[3], ho = gs[1], wo = gs[2];
  const DType dt = x->dtype();
  Prim grid = grid_in->dtype() == dt ? std::move(grid_in) : call<Family::Cast>(OpCode::cast, d, std::move(grid_in), dt);
  auto clamp_to = [&](Prim p, double hi) { return call<Family::Clamp>(OpCode::clamp, d, std::move(p), Scalar(0.0), Scalar(hi)); };
  // Pixel coordinates [N, Ho, Wo] of the grid's x (along W, which = 0) and y (along H).
  auto coord = [&](std::int64_t which, std::size_t size) {
    std::vector<DimSlice> sl = full_slices(gs);
    sl[3] = {which, 1, 1};
    Prim v = reshape_to(slice_prim(grid, sl), Shape{n, ho, wo});
    const double sz = static_cast<double>(size);
    Prim p = o.align_corners ? sc(OpCode::mul_scalar, sc(OpCode::add_scalar, std::move(v), Scalar(1.0)), Scalar((sz - 1) / 2))
                             : sc(OpCode::div_scalar,
                                  sc(OpCode::sub_scalar, sc(OpCode::mul_scalar, sc(OpCode::add_scalar, std::move(v), Scalar(1.0)), Scalar(sz)),
                                     Scalar(1.0)),
                                  Scalar(2.0));
    if (o.mode == GridSampleOptions::Mode::Bicubic) return p;  // bicubic pads each tap's coordinates instead
    if (o.padding == P::Border) p = clamp_to(std::move(p), sz - 1);
    if (o.padding == P::Reflection) {
      p = o.align_corners ? reflected(std::move(p), 0.0, 2 * (sz - 1)) : reflected(std::move(p), -1.0, 2 * sz - 1);
      p = clamp_to(std::move(p), sz - 1);
    }
    return p;
  };
  Prim ix = coord(0, w), iy = coord(1, h);
  Prim img = reshape_to(std::move(x), Shape{n, c, h * w});
  const DType it = int_dt(d);
  const Shape plane{n, 1, ho * wo}, taps{n, c, ho * wo}, out{n, c, ho, wo};
  // The pixel at integer coordinates (xc, yc) times weight wt, zero outside the image.
  auto tap = [&](const Prim& xc, const Prim& yc, Prim wt) {
    Prim outside = bin(OpCode::bool_or,
                       bin(OpCode::bool_or, cmp_s(OpCode::lower_elem, xc, Scalar(0.0)),
                           cmp_s(OpCode::greater_elem, xc, Scalar(static_cast<double>(w) - 1))),
                       bin(OpCode::bool_or, cmp_s(OpCode::lower_elem, yc, Scalar(0.0)),
                           cmp_s(OpCode::greater_elem, yc, Scalar(static_cast<double>(h) - 1))));
    Prim lin = bin(OpCode::add, sc(OpCode::mul_scalar, clamp_to(yc, static_cast<double>(h) - 1), Scalar(static_cast<double>(w))),
                   clamp_to(xc, static_cast<double>(w) - 1));
    Prim li = reshape_to(call<Family::Cast>(OpCode::into_int, d, std::move(lin), it), plane);
    Prim lie = call<Family::Reshape>(OpCode::expand, d, std::move(li), taps);
    Prim vals = reshape_to(call<Family::Gather>(OpCode::gather, d, img, std::size_t{2}, std::move(lie)), out);
    Prim wz = reshape_to(mfill(std::move(wt), std::move(outside), Scalar(0.0)), Shape{n, 1, ho, wo});
    return bin(OpCode::mul, std::move(vals), std::move(wz));
  };
  if (o.mode == GridSampleOptions::Mode::Nearest) {
    Prim rx = un(OpCode::round, ix), ry = un(OpCode::round, iy);
    return tap(rx, ry, full_shape(Shape{n, ho, wo}, Scalar(1.0), d, dt));
  }
  if (o.mode == GridSampleOptions::Mode::Bicubic) {
    // torch's bicubic: taps floor(p) - 1 .. floor(p) + 2 on each axis, cubic convolution
    // weights with A = -0.75, and the padding rule applied to each tap coordinate (Border:
    // clamped; Reflection: reflected, then clamped; Zeros: taps outside add nothing).
    constexpr double A = -0.75;
    auto pad_tap = [&](Prim c, std::size_t size) {
      const double sz = static_cast<double>(size);
      if (o.padding == P::Border) return clamp_to(std::move(c), sz - 1);
      if (o.padding == P::Reflection) {
        c = o.align_corners ? reflected(std::move(c), 0.0, 2 * (sz - 1)) : reflected(std::move(c), -1.0, 2 * sz - 1);
        return clamp_to(std::move(c), sz - 1);
      }
      return c;
    };
    // The four weights of fraction t: conv2(t + 1), conv1(t), conv1(1 - t), conv2(2 - t), with
    // conv1(u) = ((A + 2) u - (A + 3)) u^2 + 1 and conv2(u) = ((A u - 5A) u + 8A) u - 4A.
    auto weights = [&](const Prim& t) {
      auto conv1 = [&](Prim u) {
        Prim in = sc(OpCode::sub_scalar, sc(OpCode::mul_scalar, u, Scalar(A + 2)), Scalar(A + 3));
        return sc(OpCode::add_scalar, bin(OpCode::mul, bin(OpCode::mul, std::move(in), u), u), Scalar(1.0));
      };
      auto conv2 = [&](Prim u) {
        Prim in = sc(OpCode::sub_scalar, sc(OpCode::mul_scalar, u, Scalar(A)), Scalar(5 * A));
        in = sc(OpCode::add_scalar, bin(OpCode::mul, std::move(in), u), Scalar(8 * A));
        return sc(OpCode::sub_scalar, bin(OpCode::mul, std::move(in), u), Scalar(4 * A));
      };
      Prim one_minus = sc(OpCode::add_scalar, un(OpCode::neg, t), Scalar(1.0));
      return std::array<Prim, 4>{conv2(sc(OpCode::add_scalar, t, Scalar(1.0))), conv1(t), conv1(one_minus),
                                 conv2(sc(OpCode::add_scalar, un(OpCode::neg, t), Scalar(2.0)))};
    };
    Prim fx0 = un(OpCode::floor, ix), fy0 = un(OpCode::floor, iy);
    const std::array<Prim, 4> wx = weights(bin(OpCode::sub, ix, fx0)), wy = weights(bin(OpCode::sub, iy, fy0));
    std::array<Prim, 4> xs, ys;
    for (std::size_t i = 0; i < 4; ++i) {
      xs[i] = pad_tap(sc(OpCode::add_scalar, fx0, Scalar(static_cast<double>(i) - 1.0)), w);
      ys[i] = pad_tap(sc(OpCode::add_scalar, fy0, Scalar(static_cast<double>(i) - 1.0)), h);
    }
    Prim acc;
    for (std::size_t j = 0; j < 4; ++j)
      for (std::size_t i = 0; i < 4; ++i) {
        Prim t = tap(xs[i], ys[j], bin(OpCode::mul, wx[i], wy[j]));
        acc = acc ? bin(OpCode::add, std::move(acc), std::move(t)) : std::move(t);
      }
    return acc;
  }
  Prim x0 = un(OpCode::floor, ix), y0 = un(OpCode::floor, iy);
  Prim x1 = sc(OpCode::add_scalar, x0, Scalar(1.0)), y1 = sc(OpCode::add_scalar, y0, Scalar(1.0));
  Prim fx = bin(OpCode::sub, ix, x0), fy = bin(OpCode::sub, iy, y0);  // the weights of x1 / y1
  Prim gx = sc(OpCode::add_scalar, un(OpCode::neg, fx), Scalar(1.0));
  Prim gy = sc(OpCode::add_scalar, un(OpCode::neg, fy), Scalar(1.0));
  Prim acc = tap(x0, y0, bin(OpCode::mul, gx, gy));
  acc = bin(OpCode::add, std::move(acc), tap(x1, y0, bin(OpCode::mul, fx, gy)));
  acc = bin(OpCode::add, std::move(acc), tap(x0, y1, bin(OpCode::mul, gx, fy)));
  return bin(OpCode::add, std::move(acc), tap(x1, y1, bin(OpCode::mul, fx, fy)));
}

}  // namespace

TENSOR_DEFAULT(OpCode, gather_nd, d_gather_nd)
TENSOR_DEFAULT(OpCode, scatter_nd, d_scatter_nd)
TENSOR_DEFAULT(OpCode, grid_sample_2d, d_grid_sample)

}  // namespace tensor::dispatch::defaults
