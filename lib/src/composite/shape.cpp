// The shape and layout methods of tensor.hpp composed from views and copies: squeeze /
// unsqueeze / flatten, chunk and split, repeat, pad, movedim, roll, slice helpers, take,
// nonzero, select by list, permute by list.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "lib/src/composite/compose.hpp"

namespace tensor::detail {

using namespace compose;

Handle squeeze(Handle&& a_, DimList dims, std::size_t out_rank, const char* op) {
  H a(a_);
  a_ = Handle{};
  const Shape s = a.shape();
  std::vector<bool> drop(s.rank(), false);
  if (dims.n == 0) {
    for (std::size_t i = 0; i < s.rank(); ++i) drop[i] = s[i] == 1;
  } else {
    for (std::size_t d : dims_of(op, dims, s.rank())) {
      if (s[d] != 1)
        throw ShapeError(std::string("[") + op + "] can only remove a dim of size 1; expected size 1 at dim " +
                         std::to_string(d) + "; got shape " + s.to_string());
      drop[d] = true;
    }
  }
  Shape out;
  for (std::size_t i = 0; i < s.rank(); ++i)
    if (!drop[i]) out.push_back(s[i]);
  check_out_rank(op, out.rank(), out_rank, s);
  return lit_reshape(a, out).take();
}

Handle unsqueeze(Handle&& a_, DimList axes, std::size_t out_rank, bool leading) {
  H a(a_);
  a_ = Handle{};
  const char* op = leading ? "unsqueeze" : "unsqueeze_dims";
  const Shape s = a.shape();
  if (out_rank < s.rank() || out_rank > kMaxRank)
    throw ShapeError(std::string("[") + op + "] cannot lower the rank or pass the maximum; expected a rank in " +
                     std::to_string(s.rank()) + ".." + std::to_string(kMaxRank) + "; got " + std::to_string(out_rank));
  std::vector<bool> one(out_rank, false);
  if (leading) {
    for (std::size_t i = 0; i < out_rank - s.rank(); ++i) one[i] = true;
  } else {
    if (axes.n != out_rank - s.rank())
      throw ShapeError(std::string("[unsqueeze_dims] one axis per new dim; expected ") + std::to_string(out_rank - s.rank()) +
                       " axes; got " + std::to_string(axes.n));
    // As burn: negative axes count from the back of the result (repeated -1s stack
    // up from the end); repeated axes insert that many dims there.
    std::vector<std::int64_t> pos;
    auto neg = static_cast<std::int64_t>(out_rank);
    for (std::size_t k = 0; k < axes.n; ++k) {
      const std::int64_t x = axes.p[k];
      const auto r = static_cast<std::int64_t>(out_rank);
      if (x < -r || x >= r)
        throw IndexError("[unsqueeze_dims] axis out of range; expected " + std::to_string(-r) + ".." + std::to_string(r - 1) +
                         "; got " + std::to_string(x));
      if (x < 0) pos.push_back(x + --neg + 1);
      else pos.push_back(x);
    }
    std::sort(pos.begin(), pos.end());
    std::int64_t last = -1;
    for (std::int64_t p : pos) {
      const std::int64_t q = std::max(p, last + 1);
      if (q >= static_cast<std::int64_t>(out_rank))
        throw IndexError("[unsqueeze_dims] axes do not fit the result rank; expected at most rank " + std::to_string(out_rank) +
                         "; got an axis at " + std::to_string(q));
      one[static_cast<std::size_t>(q)] = true;
      last = q;
    }
  }
  Shape out;
  for (std::size_t i = 0, j = 0; i < out_rank; ++i) out.push_back(one[i] ? 1 : s[j++]);
  return lit_reshape(a, out).take();
}

Handle flatten(Handle&& a_, std::int64_t start, std::int64_t end, std::size_t out_rank) {
  H a(a_);
  a_ = Handle{};
  const Shape s = a.shape();
  const std::size_t b = rdim_of("flatten", start, s.rank()), e = rdim_of("flatten", end, s.rank());
  if (b > e)
    throw IndexError("[flatten] start dim after end dim; expected start <= end; got " + std::to_string(start) + " and " +
                     std::to_string(end));
  Shape out;
  std::size_t n = 1;
  for (std::size_t i = 0; i < s.rank(); ++i) {
    if (i < b || i > e) out.push_back(s[i]);
    else n *= s[i];
    if (i == e) out.push_back(n);
  }
  check_out_rank("flatten", out.rank(), out_rank, s);
  return lit_reshape(a, out).take();
}

HandleList::~HandleList() {
  for (std::size_t i = 0; i < n_; ++i) release(p_[i]);
  delete[] p_;
}

namespace {
HandleList pieces(const H& a, std::size_t d, const std::vector<std::size_t>& sizes) {
  std::vector<H> parts;
  std::size_t at = 0;
  for (std::size_t n : sizes) {
    parts.push_back(slice_dim(a, d, Slice::range(static_cast<std::int64_t>(at), static_cast<std::int64_t>(at + n))));
    at += n;
  }
  auto* arr = new Handle[parts.size()];
  for (std::size_t i = 0; i < parts.size(); ++i) arr[i] = parts[i].take();
  return HandleList(arr, parts.size());
}
}  // namespace

HandleList chunk(Handle&& a_, std::size_t chunks, std::int64_t dim) {
  H a(a_);
  a_ = Handle{};
  const Shape s = a.shape();
  const std::size_t d = rdim_of("chunk", dim, s.rank());
  if (chunks == 0) throw IndexError("[chunk] number of chunks must be positive; expected >= 1; got 0");
  const std::size_t n = s[d], size = (n + chunks - 1) / chunks;
  std::vector<std::size_t> sizes;
  for (std::size_t at = 0; at < n; at += size) sizes.push_back(std::min(size, n - at));
  return named("chunk", [&] { return pieces(a, d, sizes); });
}

HandleList split(Handle&& a_, std::size_t split_size, std::int64_t dim) {
  H a(a_);
  a_ = Handle{};
  const Shape s = a.shape();
  const std::size_t d = rdim_of("split", dim, s.rank());
  const std::size_t n = s[d];
  if (split_size == 0 && n != 0)
    throw IndexError("[split] split_size must be positive unless the dim is empty; expected >= 1; got 0 for size " +
                     std::to_string(n));
  std::vector<std::size_t> sizes;  // an empty dim gives no pieces (burn)
  for (std::size_t at = 0; at < n; at += split_size) sizes.push_back(std::min(split_size, n - at));
  return named("split", [&] { return pieces(a, d, sizes); });
}

HandleList split_with_sizes(Handle&& a_, const std::vector<std::size_t>& sizes, std::int64_t dim) {
  H a(a_);
  a_ = Handle{};
  const Shape s = a.shape();
  const std::size_t d = rdim_of("split_with_sizes", dim, s.rank());
  std::size_t total = 0;
  for (std::size_t n : sizes) total += n;
  if (total != s[d])
    throw ShapeError("[split_with_sizes] sizes must add up to the dim; expected a sum of " + std::to_string(s[d]) + " (dim " +
                     std::to_string(d) + " of " + s.to_string() + "); got " + std::to_string(total));
  std::vector<std::size_t> kept;  // 0-length entries give no piece (burn)
  for (std::size_t n : sizes)
    if (n != 0) kept.push_back(n);
  return named("split_with_sizes", [&] { return pieces(a, d, kept); });
}

Handle repeat(Handle&& a_, const std::vector<std::size_t>& times) {
  H a(a_);
  a_ = Handle{};
  const Shape s = a.shape();
  // Counts past the rank are accepted when they are 1 (burn repeats only counts > 1).
  for (std::size_t i = s.rank(); i < times.size(); ++i)
    if (times[i] != 1)
      throw ShapeError("[repeat] a count past the rank must be 1; expected at most " + std::to_string(s.rank()) +
                       " counts or 1 beyond; got " + std::to_string(times[i]) + " for dim " + std::to_string(i) + " of " +
                       s.to_string());
  return named("repeat", [&] {
    for (std::size_t i = 0; i < std::min(times.size(), s.rank()); ++i)
      if (times[i] != 1) a = H(repeat_dim(a.r(), static_cast<std::int64_t>(i), times[i]));
    return a.take();
  });
}

Handle pad(Handle&& a_, const std::vector<std::pair<std::size_t, std::size_t>>& pads, const PadMode& mode) {
  H a(a_);
  a_ = Handle{};
  const Shape s = a.shape();
  if (pads.size() > s.rank())
    throw ShapeError("[pad] more (before, after) pairs than dims; expected at most " + std::to_string(s.rank()) + "; got " +
                     std::to_string(pads.size()));
  if (static_cast<unsigned>(mode.kind) > static_cast<unsigned>(PadMode::Kind::Edge))
    throw ShapeError("[pad] pad mode out of range; expected one of Constant, Reflect, Edge; got " +
                     std::to_string(static_cast<unsigned>(mode.kind)));
  const std::size_t off = s.rank() - pads.size();
  for (std::size_t i = 0; i < pads.size(); ++i) {
    const auto [b, e] = pads[i];
    const std::size_t n = s[off + i];
    if (b == 0 && e == 0) continue;
    if (mode.kind == PadMode::Kind::Reflect && (b >= n || e >= n))
      throw IndexError("[pad] reflect padding must be below the dim size; expected before and after < " + std::to_string(n) +
                       " in dim " + std::to_string(off + i) + "; got " + std::to_string(b) + " and " + std::to_string(e));
    if (mode.kind == PadMode::Kind::Edge && n == 0)
      throw IndexError("[pad] edge padding of an empty dim; expected a dim of size >= 1; got size 0 in dim " +
                       std::to_string(off + i));
  }
  return named("pad", [&] {
    for (std::size_t i = 0; i < pads.size(); ++i) {
      const auto [b, e] = pads[i];
      if (b == 0 && e == 0) continue;
      const std::size_t d = off + i;
      const Shape cur = a.shape();
      const auto n = static_cast<std::int64_t>(cur[d]);
      auto side = [&](std::size_t count, bool before) -> H {
        Shape ps = cur;
        ps[d] = count;
        switch (mode.kind) {
          case PadMode::Kind::Constant: return H(full(ps, mode.value, device(a.h), kind(a.h), dtype(a.h)));
          case PadMode::Kind::Reflect: {
            const auto c = static_cast<std::int64_t>(count);
            return before ? slice_dim(a, d, Slice::range(1, c + 1, -1)) : slice_dim(a, d, Slice::range(n - 1 - c, n - 1, -1));
          }
          case PadMode::Kind::Edge: break;
        }
        const H edge = slice_dim(a, d, Slice::index(before ? 0 : n - 1));
        return H(repeat_dim(edge.r(), static_cast<std::int64_t>(d), count));
      };
      std::vector<Handle> parts;
      H pb = side(b, true), pe = side(e, false);
      parts.push_back(pb.take());
      parts.push_back(a.r());
      parts.push_back(pe.take());
      a = H(cat(std::move(parts), static_cast<std::int64_t>(d)));
    }
    return a.take();
  });
}

Handle movedim(Handle&& a_, DimList src, DimList dst) {
  H a(a_);
  a_ = Handle{};
  const Shape s = a.shape();
  const std::size_t r = s.rank();
  if (src.n != dst.n)
    throw ShapeError("[movedim] source and destination dims differ in number; expected " + std::to_string(src.n) + "; got " +
                     std::to_string(dst.n));
  std::vector<std::int64_t> perm(r, -1);
  std::vector<bool> used(r, false), placed(r, false);
  for (std::size_t i = 0; i < src.n; ++i) {
    const std::size_t f = rdim_of("movedim", src.p[i], r), t = rdim_of("movedim", dst.p[i], r);
    if (used[f] || placed[t])
      throw IndexError("[movedim] repeated dim; expected each source and destination dim once; got " + std::to_string(src.p[i]) +
                       " -> " + std::to_string(dst.p[i]));
    used[f] = placed[t] = true;
    perm[t] = static_cast<std::int64_t>(f);
  }
  std::size_t next = 0;
  for (std::size_t t = 0; t < r; ++t) {
    if (perm[t] >= 0) continue;
    while (used[next]) ++next;
    perm[t] = static_cast<std::int64_t>(next++);
  }
  return named("movedim", [&] { return axes(OpCode::permute, a.r(), perm); });
}

Handle roll(Handle&& a_, DimList shifts, DimList dims, const char* op) {
  H a(a_);
  a_ = Handle{};
  const Shape s = a.shape();
  if (shifts.n != dims.n || shifts.n == 0)
    throw ShapeError(std::string("[") + op + "] one shift per dim; expected " + std::to_string(dims.n) + " shifts (at least 1); got " +
                     std::to_string(shifts.n));
  std::vector<std::size_t> ds;
  for (std::size_t i = 0; i < dims.n; ++i) ds.push_back(rdim_of(op, dims.p[i], s.rank()));
  return named(op, [&] {
    for (std::size_t i = 0; i < ds.size(); ++i) {
      const auto n = static_cast<std::int64_t>(s[ds[i]]);
      if (n == 0) continue;
      // burn's direction: out[j] = a[(j + shift) mod n], so the first k elements move to the end.
      const std::int64_t k = ((shifts.p[i] % n) + n) % n;
      if (k == 0) continue;
      std::vector<Handle> parts;
      H tail = slice_dim(a, ds[i], Slice::range(k, n)), head = slice_dim(a, ds[i], Slice::range(0, k));
      parts.push_back(tail.take());
      parts.push_back(head.take());
      a = H(cat(std::move(parts), static_cast<std::int64_t>(ds[i])));
    }
    return a.take();
  });
}

Handle slice_dim(Handle&& a_, std::int64_t dim, Slice sl) {
  H a(a_);
  a_ = Handle{};
  const std::size_t d = rdim_of("slice_dim", dim, a.shape().rank());
  return named("slice_dim", [&] { return slice_dim(a, d, sl).take(); });
}

Handle slice_fill(Handle&& a_, std::span<const Slice> slices, Scalar value) {
  H a(a_);
  a_ = Handle{};
  return named("slice_fill", [&] {
    const H part = H(slice(a.r(), slices));
    const H v = H(full(part.shape(), value, device(a.h), kind(a.h), dtype(a.h)));
    return slice_assign(a.r(), slices, v.r());
  });
}

Handle take(Handle&& a_, std::int64_t dim, Handle&& i_) {
  H a(a_), idx(i_);
  a_ = Handle{};
  i_ = Handle{};
  const Shape s = a.shape(), is = idx.shape();
  const std::size_t d = rdim_of("take", dim, s.rank());
  return named("take", [&] {
    const H flat = lit_reshape(idx, Shape{is.num_elements()});
    const H sel = H(select(a.r(), static_cast<std::int64_t>(d), flat.r()));
    Shape out;
    for (std::size_t k = 0; k < s.rank(); ++k) {
      if (k != d) { out.push_back(s[k]); continue; }
      for (std::size_t j = 0; j < is.rank(); ++j) out.push_back(is[j]);
    }
    return lit_reshape(sel, out).take();
  });
}

HandleList nonzero(Handle&& a_) {
  H a(a_);
  a_ = Handle{};
  return named("nonzero", [&] {
    const H b = kind(a.h) == Kind::Bool ? a : H(compare_scalar(OpCode::not_equal_elem, a.r(), Scalar(0)));
    const H w = H(argwhere(b.r()));  // [n, rank]
    const std::size_t n = w.shape()[0];
    const std::size_t r = n == 0 ? 0 : b.shape().rank();  // no true element: an empty list (burn)
    auto* arr = new Handle[r];
    HandleList out(arr, r);
    for (std::size_t j = 0; j < r; ++j) {
      const H col = slice_dim(w, 1, Slice::index(static_cast<std::int64_t>(j)));
      arr[j] = lit_reshape(col, Shape{n}).take();
    }
    return out;
  });
}

Handle select_dim(Handle&& a_, std::int64_t dim, std::int64_t index) {
  H a = take_h(a_);
  const Shape s = a.shape();
  const std::size_t d = rdim_of("select_dim", dim, s.rank());
  const auto n = static_cast<std::int64_t>(s[d]);
  const std::int64_t i = index < 0 ? index + n : index;
  if (i < 0 || i >= n)
    throw IndexError("[select_dim] index out of range; expected " + std::to_string(-n) + ".." + std::to_string(n - 1) + " for dim " +
                     std::to_string(d) + " of " + s.to_string() + "; got " + std::to_string(index));
  if (s.rank() < 2) throw ShapeError("[select_dim] expected a tensor of rank >= 2 (the dim is removed); got shape " + s.to_string());
  Shape out = s;
  out.erase(d);
  return named("select_dim", [&] { return lit_reshape(slice_dim(a, d, Slice::range(i, i + 1)), out).take(); });
}

Handle select_list(Handle&& a_, std::int64_t dim, DimList indices) {
  H a = take_h(a_);
  const std::vector<std::int64_t> v(indices.p, indices.p + indices.n);
  return named("select", [&] {
    const H idx = H(from_values(TensorData::from<std::int64_t>(v), device(a.h), Kind::Int, "select"));
    return select(a.r(), dim, idx.r());
  });
}

Handle permute_list(Handle&& a_, DimList axes_) {
  H a = take_h(a_);
  const Shape s = a.shape();
  if (axes_.n != s.rank())
    throw ShapeError("[permute] one axis per dim; expected " + std::to_string(s.rank()) + " axes; got " + std::to_string(axes_.n));
  return named("permute", [&] { return axes(OpCode::permute, a.r(), Dims(axes_.p, axes_.n)); });
}
}  // namespace tensor::detail
