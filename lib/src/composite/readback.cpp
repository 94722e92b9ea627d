// Reading tensors back to the host: into_scalar, the second halves of the *_async forms
// (argwhere, nonzero, mask_select from a mask already read back), transaction.
#include <string>
#include <utility>
#include <vector>

#include "lib/src/composite/compose.hpp"

namespace tensor::detail {

using namespace compose;

Scalar into_scalar(Handle&& a_) {
  H a(a_);
  a_ = Handle{};
  const Shape s = a.shape();
  if (s.num_elements() != 1)
    throw ShapeError("[into_scalar] expected a tensor of exactly one element; got shape " + s.to_string());
  return scalar_of(named("into_scalar", [&] { return into_data(a.r()).get(); }));
}

Scalar scalar_of(const TensorData& d) {
  if (d.shape().num_elements() != 1)
    throw ShapeError("[into_scalar] expected a tensor of exactly one element; got shape " + d.shape().to_string());
  if (is_float(d.dtype())) return Scalar(d.convert(DType::F64).to_vec<double>()[0]);
  if (is_unsigned_int(d.dtype())) return Scalar(d.convert(DType::U64).to_vec<std::uint64_t>()[0]);
  if (is_int(d.dtype())) return Scalar(d.convert(DType::I64).to_vec<std::int64_t>()[0]);
  return Scalar(static_cast<bool>(d.to_vec<bool>()[0]));
}

namespace {
// The row-major positions of the true elements of host bool data.
std::vector<std::size_t> true_positions(const TensorData& m) {
  const std::vector<bool> v = m.dtype() == DType::Bool ? m.to_vec<bool>() : m.convert(DType::Bool).to_vec<bool>();
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < v.size(); ++i)
    if (v[i]) out.push_back(i);
  return out;
}
Handle int_tensor(const std::vector<std::int64_t>& v, const Shape& s, Device dev) {
  return from_data(TensorData::from<std::int64_t>(v, s).convert(to_dtype(dev.settings().int_dtype)), dev, Kind::Int);
}
}  // namespace

Handle argwhere_of(const TensorData& mask, Device dev) {
  const Shape s = mask.shape();
  const std::vector<std::size_t> at = true_positions(mask);
  const std::size_t r = s.rank();
  std::vector<std::int64_t> coords(at.size() * r);
  for (std::size_t k = 0; k < at.size(); ++k)
    for (std::size_t j = r, rest = at[k]; j-- > 0;) {
      coords[k * r + j] = static_cast<std::int64_t>(rest % s[j]);
      rest /= s[j];
    }
  return int_tensor(coords, Shape{at.size(), r}, dev);
}

HandleList nonzero_of(const TensorData& mask, Device dev) {
  const H w = H(argwhere_of(mask, dev));  // [n, rank]
  const std::size_t r = mask.shape().rank(), n = w.shape()[0];
  auto* arr = new Handle[r];
  HandleList out(arr, r);
  for (std::size_t j = 0; j < r; ++j) arr[j] = lit_reshape(slice_dim(w, 1, Slice::index(static_cast<std::int64_t>(j))), Shape{n}).take();
  return out;
}

Handle mask_select_of(Handle&& a_, const TensorData& mask) {
  H a(a_);
  a_ = Handle{};
  return named("mask_select_async", [&]() -> Handle {
    if (!(mask.shape() == a.shape()))
      throw ShapeError("[mask_select_async] expected a mask of the tensor's shape " + a.shape().to_string() + "; got " +
                       mask.shape().to_string());
    const std::vector<std::size_t> at = true_positions(mask);
    const std::vector<std::int64_t> idx(at.begin(), at.end());
    const H flat = lit_reshape(a, Shape{a.shape().num_elements()});
    return select(flat.r(), 0, int_tensor(idx, Shape{idx.size()}, device(a.h)));
  });
}

std::vector<TensorData> transaction(std::vector<Handle>&& hs_) {
  std::vector<H> hs;
  hs.reserve(hs_.size());
  for (Handle& h : hs_) hs.emplace_back(std::exchange(h, Handle{}));
  hs_.clear();
  return named("transaction", [&] {
    std::vector<DataFuture> pending;
    pending.reserve(hs.size());
    for (H& h : hs) pending.push_back(into_data(h.take()));  // queue every read, then wait
    std::vector<TensorData> out;
    out.reserve(pending.size());
    for (DataFuture& f : pending) out.push_back(f.get());
    return out;
  });
}
}  // namespace tensor::detail
