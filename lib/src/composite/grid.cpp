// tensor/grid.hpp's compositions: meshgrid, meshgrid_stack, cartesian_grid, affine_grid_2d.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "lib/src/composite/compose.hpp"
#include "tensor/grid.hpp"

namespace tensor::detail {

using namespace compose;

namespace {

// The grids of rank-1 inputs (meshgrid's): output i holds input i along its dim (dims 0
// and 1 swapped for Cartesian indexing), as a view of shape [1, .., n_i, .., 1], expanded
// to the full shape unless sparse.
std::vector<H> grids_of(std::vector<Handle>& inputs_, bool cartesian, bool sparse) {
  std::vector<H> in;
  in.reserve(inputs_.size());
  for (Handle& h : inputs_) in.push_back(take_h(h));
  const std::size_t n = in.size();
  const auto pos = [&](std::size_t i) { return cartesian && n >= 2 && i < 2 ? 1 - i : i; };
  std::vector<std::int64_t> full(n);
  for (std::size_t i = 0; i < n; ++i) full[pos(i)] = static_cast<std::int64_t>(in[i].shape()[0]);
  std::vector<H> out;
  out.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    std::vector<std::int64_t> s(n, 1);
    s[pos(i)] = full[pos(i)];
    H g = H(reshape_args(in[i].r(), s));
    if (!sparse) g = H(reshape(OpCode::expand, g.r(), full));
    out.push_back(std::move(g));
  }
  return out;
}

// Tensors of one shape stacked along a new dim `d` (each given a size-1 dim there, then
// concatenated along it).
Handle stack_at(const std::vector<H>& parts, std::size_t d) {
  std::vector<Handle> up;
  up.reserve(parts.size());
  for (const H& p : parts) {
    Shape s = p.shape();
    s.insert(d, 1);
    up.push_back(lit_reshape(p, s).take());
  }
  return cat(std::move(up), static_cast<std::int64_t>(d));
}

}  // namespace

namespace {
// n sample positions in [-1, 1] (align_corners: the end points are the corner pixels'
// centres; otherwise their outer edges), as a Float tensor of shape [n].
H norm_coords(std::size_t n, bool align, Device dev, DType dt) {
  const H i = H(cast(OpCode::into_float, int_arange(n, dev).take(), dt));
  if (align) {
    if (n == 1) return sc(OpCode::mul_scalar, i, Scalar(0.0));
    return sc(OpCode::sub_scalar, sc(OpCode::mul_scalar, i, Scalar(2.0 / static_cast<double>(n - 1))), Scalar(1.0));
  }
  return sc(OpCode::sub_scalar, sc(OpCode::div_scalar, sc(OpCode::add_scalar, sc(OpCode::mul_scalar, i, Scalar(2.0)), Scalar(1.0)),
                                   Scalar(static_cast<double>(n))),
            Scalar(1.0));
}
}  // namespace

Handle affine_grid_2d(Handle&& t_, const Shape& size, bool align_corners) {
  H theta = take_h(t_);
  const Shape ts = theta.shape();
  if (ts.rank() != 3 || ts[1] != 2 || ts[2] != 3)
    throw ShapeError("[affine_grid_2d] expected affine matrices of shape [N, 2, 3]; got " + ts.to_string());
  if (size.rank() != 4 || size[0] != ts[0])
    throw ShapeError("[affine_grid_2d] expected an output size [N, C, H, W] with N = " + std::to_string(ts[0]) + "; got " + size.to_string());
  if (kind(theta.h) != Kind::Float) throw DTypeError("[affine_grid_2d] expected Float matrices; got another kind");
  return named("affine_grid_2d", [&] {
    const std::size_t n = size[0], h = size[2], w = size[3];
    const Device dev = device(theta.h);
    const DType dt = dtype(theta.h);
    const Shape hw1{h, w, 1};
    const H xs = H(reshape(OpCode::expand, lit_reshape(norm_coords(w, align_corners, dev, dt), Shape{1, w, 1}).take(),
                           std::vector<std::int64_t>{static_cast<std::int64_t>(h), static_cast<std::int64_t>(w), 1}));
    const H ys = H(reshape(OpCode::expand, lit_reshape(norm_coords(h, align_corners, dev, dt), Shape{h, 1, 1}).take(),
                           std::vector<std::int64_t>{static_cast<std::int64_t>(h), static_cast<std::int64_t>(w), 1}));
    const H ones = H(create(OpCode::ones, hw1, dev, Kind::Float, dt));
    std::vector<Handle> parts;
    parts.push_back(xs.r());
    parts.push_back(ys.r());
    parts.push_back(ones.r());
    const H base = lit_reshape(H(cat(std::move(parts), 2)), Shape{1, h * w, 3});  // (x, y, 1) per output point
    const H tt = H(swap_dims(theta.r(), 1, 2));                                    // [N, 3, 2]
    const H g = H(matmul(base.r(), tt.r()));                                       // [N, H W, 2]
    return lit_reshape(g, Shape{n, h, w, 2}).take();
  });
}
}  // namespace tensor::detail

namespace tensor::grid::detail_ {

using namespace tensor::detail::compose;

detail::HandleList meshgrid(std::vector<detail::Handle>&& inputs, bool cartesian, bool sparse) {
  std::vector<H> gs = detail::grids_of(inputs, cartesian, sparse);
  auto* arr = new detail::Handle[gs.size()];
  for (std::size_t i = 0; i < gs.size(); ++i) arr[i] = gs[i].take();
  return detail::HandleList(arr, gs.size());
}

detail::Handle meshgrid_stack(std::vector<detail::Handle>&& inputs, bool last) {
  const std::size_t n = inputs.size();
  return detail::stack_at(detail::grids_of(inputs, false, false), last ? n : 0);
}

detail::Handle cartesian_grid(const Shape& shape, Device device) {
  std::vector<H> rs;
  for (std::size_t n : shape) rs.push_back(int_arange(n, device));
  std::vector<detail::Handle> ranges;
  for (H& r : rs) ranges.push_back(r.take());
  return detail::stack_at(detail::grids_of(ranges, false, false), shape.rank());
}

}  // namespace tensor::grid::detail_
