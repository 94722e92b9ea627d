#include "dispatch/autodiff/math.hpp"

#include "dispatch/settings.hpp"
#include "lib/src/distributed/communicator.hpp"

namespace tensor::dispatch::ad::detail {

int group_rank() { return dist::internal::current().rank(); }
int group_size() { return dist::internal::current().size(); }

// Sums a broadcast gradient back to the operand's shape. Dims align from the right (the
// broadcast rule): the operand's size-1 dims and every leading dim `g` has beyond the
// operand's rank (an expand that adds dims) are summed; sum_dim keeps them as size 1.
T sum_to(T g, const Shape& s) {
  if (g.shape() == s) return g;
  const std::size_t gr = g.shape().rank(), sr = s.rank();
  const std::size_t lead = gr > sr ? gr - sr : 0;
  for (std::size_t i = 0; i < sr && lead + i < gr; ++i)
    if (s[i] == 1 && g.shape()[lead + i] != 1) g = reduce_dim(OpCode::sum_dim, std::move(g), i64(lead + i));
  for (std::size_t i = 0; i < lead; ++i)
    if (g.shape()[i] != 1) g = reduce_dim(OpCode::sum_dim, std::move(g), i64(i));
  return g.shape() == s ? g : reshape_to(std::move(g), s);
}
// The gradient of a full reduction (shape [1]) spread over `s`.
T spread(T g, const Shape& s) {
  Shape ones = s;
  for (std::size_t i = 0; i < ones.rank(); ++i) ones[i] = 1;
  return expand_to(reshape_to(std::move(g), ones), s);
}
// Exclusive products along `d` from the start (inclusive = false shifts cumprod by one).
static T exclusive_cumprod(const T& x, std::size_t d) {
  const std::size_t n = x.shape()[d];
  T c = reduce_dim(OpCode::cumprod, x, i64(d));
  Shape one = x.shape();
  one[d] = 1;
  T first = create(OpCode::ones, one, x.device, Kind::Float, x.dtype());
  if (n <= 1) return first.shape() == x.shape() ? first : expand_to(std::move(first), x.shape());
  std::vector<tensor::Slice> sl(x.shape().rank(), tensor::Slice::all());
  sl[d] = tensor::Slice::range(0, i64(n - 1));
  std::vector<T> parts;
  parts.push_back(std::move(first));
  parts.push_back(slice(std::move(c), sl));
  return cat(std::move(parts), i64(d));
}
// d prod / d x_i along `d`: the product of the other elements (exact with zeros).
T prod_grad(const T& x, std::size_t d) {
  T pre = exclusive_cumprod(x, d);
  T post = flip_dim(exclusive_cumprod(flip_dim(x, d), d), d);
  return mul(std::move(pre), std::move(post));
}
// d cumprod: dL/dx_j = sum_{i>=j} g_i prod_{k<=i, k!=j} x_k, exact with zeros (burn's
// sum_{i>=j} g_i y_i / x_j divides by zero). A new dim j of n copies of x, each with
// x_j replaced by 1, is cumprod'ed along d (the i dim): c[j][i] = prod_{k<=i, k!=j} x_k;
// times g_i, masked to i >= j, summed over i. O(n) times the memory of x, with no
// read-back; cumprod lanes are short in practice.
T cumprod_grad(const T& g, const T& x, std::size_t d) {
  const std::size_t n = x.shape()[d], r = x.shape().rank();
  if (n <= 1) return g;
  const DType it = to_dtype(device_settings(x.device).int_dtype);
  // Shape with the j dim inserted before d: [.., n(j), n(i), ..].
  Shape big;
  for (std::size_t k = 0; k < r; ++k) {
    if (k == d) big.push_back(n);
    big.push_back(x.shape()[k]);
  }
  auto at = [&](Shape s, std::size_t k) {  // s with a 1 inserted at k
    Shape o;
    for (std::size_t q = 0; q <= s.rank(); ++q) {
      if (q == k) o.push_back(1);
      if (q < s.rank()) o.push_back(s[q]);
    }
    return o;
  };
  // j index along dim d, i index along dim d + 1 of `big`, as int tensors broadcast to it.
  Shape jline, iline;
  for (std::size_t k = 0; k <= r; ++k) {
    jline.push_back(k == d ? n : 1);
    iline.push_back(k == d + 1 ? n : 1);
  }
  T jj = expand_to(reshape_to(arange(0, i64(n), 1, x.device, it), jline), big);
  T ii = expand_to(reshape_to(arange(0, i64(n), 1, x.device, it), iline), big);
  T xs = expand_to(reshape_to(x, at(x.shape(), d)), big);
  T c = reduce_dim(OpCode::cumprod, mask_fill(std::move(xs), compare(OpCode::equal, jj, ii), Scalar(1.0)), i64(d + 1));
  T gi = expand_to(reshape_to(g, at(g.shape(), d)), big);
  T terms = mask_fill(mul(std::move(c), std::move(gi)), compare(OpCode::lower, ii, jj), Scalar(0.0));
  return reshape_to(reduce_dim(OpCode::sum_dim, std::move(terms), i64(d + 1)), x.shape());
}
// A DimSlice as the public Slice selecting the same elements in the same order.
static tensor::Slice public_slice(const DimSlice& s) {
  if (s.len == 0) return tensor::Slice::range(0, 0);
  if (s.step > 0) return tensor::Slice::range(s.start, s.start + static_cast<std::int64_t>(s.len) * s.step, s.step);
  return tensor::Slice::range(s.start + static_cast<std::int64_t>(s.len - 1) * s.step, s.start + 1, s.step);
}
std::vector<tensor::Slice> public_slices(std::span<const DimSlice> ds) {
  std::vector<tensor::Slice> v;
  for (const DimSlice& s : ds) v.push_back(public_slice(s));
  return v;
}

T scatter_into(const Shape& s, const T& like, std::size_t d, T idx, T g) {
  return scatter(OpCode::scatter_add, zeros(s, like), i64(d), std::move(idx), std::move(g), IndexingUpdateOp::Add);
}

T cumextreme_grad(const T& g, const T& x, const T& y, std::size_t d) {
  // The (last) position each running extremum came from: where x equals y, the running
  // max of those positions.
  const DType it = int_dtype(x.device);
  Shape line = x.shape();
  for (std::size_t i = 0; i < line.rank(); ++i) line[i] = i == d ? line[i] : 1;
  T pos = expand_to(reshape_to(arange(0, i64(x.shape()[d]), 1, x.device, it), line), x.shape());
  T hit = compare(OpCode::equal, x, y);
  T src = mask_where(create(OpCode::zeros, x.shape(), x.device, Kind::Int, it), std::move(hit), std::move(pos));
  T idx = reduce_dim(OpCode::cummax, std::move(src), i64(d));
  return scatter_into(x.shape(), x, d, std::move(idx), g);
}

T unfold_grad(const T& g, const Shape& from, std::size_t d, std::size_t size, std::size_t step) {
  // g: from with dim d -> windows, plus a last dim of `size`. Window w, offset j reads
  // source position w*step + j: add each back with select_add.
  const std::size_t r = from.rank();
  const std::size_t windows = g.shape()[d];
  const DType it = int_dtype(g.device);
  // Move the window-offset dim next to the window dim, then merge them.
  std::vector<std::int64_t> perm;
  for (std::size_t i = 0; i <= r; ++i) {
    if (i == r) continue;
    perm.push_back(i64(i));
    if (i == d) perm.push_back(i64(r));
  }
  T gp = axes(OpCode::permute, g, perm);
  Shape merged = from;
  merged[d] = windows * size;
  T gm = reshape_to(std::move(gp), merged);
  std::vector<std::int64_t> src;
  for (std::size_t w = 0; w < windows; ++w)
    for (std::size_t j = 0; j < size; ++j) src.push_back(i64(w * step + j));
  T idx = from_data(TensorData::from(src, Shape{src.size()}).convert(it), g.device, Kind::Int);
  return select_assign(OpCode::select_add, zeros(from, g), i64(d), std::move(idx), std::move(gm), IndexingUpdateOp::Add);
}

}  // namespace tensor::dispatch::ad::detail
