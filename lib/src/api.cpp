// The *_impl side of the compile firewall: converts opaque handles to DispatchTensors
// and forwards to Dispatch. Compiled once inside libtensor.so.
#include <algorithm>
#include <cstring>
#include <future>
#include <optional>
#include <string>
#include <utility>

#include "dispatch/autodiff.hpp"
#include "dispatch/backend.hpp"
#include "dispatch/dispatch.hpp"
#include "lib/src/handles.hpp"
#include "tensor/detail.hpp"
#include "tensor/gradients.hpp"
#include "tensor/error.hpp"

namespace tensor::detail {
namespace {

using dispatch::DispatchTensor;
using dispatch::Primitive;

using handles::give;
using handles::give2;
using handles::prim_of;
using handles::take;

const Primitive& peek(const Handle& h, const char* op) {
  const Primitive* p = prim_of(h);
  if (!p) throw Error(std::string("[") + op + "] use of an empty (moved-from) tensor; expected a tensor; got an empty handle");
  return *p;
}


}  // namespace

Handle retain(const Handle& h) noexcept {
  if (const Primitive* p = prim_of(h)) p->add_ref();
  return h;
}

void release(Handle& h) noexcept {
  if (const Primitive* p = prim_of(h)) p->release_ref();
  h = Handle{};
}

Shape shape(const Handle& h) { return peek(h, "shape").shape(); }
DType dtype(const Handle& h) { return peek(h, "dtype").dtype(); }
Device device(const Handle& h) { return Device(peek(h, "device").device()); }
Kind kind(const Handle& h) {
  peek(h, "kind");
  return static_cast<Kind>(h.bytes[12]);
}

void check_rank(const Handle& h, std::size_t rank, const char* op) {
  const Shape& s = peek(h, op).shape();
  if (s.rank() != rank)
    throw ShapeError(std::string("[") + op + "] rank mismatch; expected rank " + std::to_string(rank) + "; got shape " +
                     s.to_string());
}

void check_handle(Handle& h, std::size_t rank, Kind k) {
  const Primitive* p = prim_of(h);
  if (!p) throw Error("[Tensor] expected a tensor handle; got an empty (moved-from) handle");
  const Kind hk = static_cast<Kind>(h.bytes[12]);
  if (p->shape().rank() == rank && hk == k) return;
  const Shape s = p->shape();
  release(h);
  if (s.rank() != rank)
    throw ShapeError("[Tensor] handle of the wrong rank; expected rank " + std::to_string(rank) + "; got shape " +
                     s.to_string());
  throw DTypeError(std::string("[Tensor] handle of the wrong kind; expected ") + std::string(dispatch::kind_name(k)) +
                   "; got " + std::string(dispatch::kind_name(hk)));
}

Handle create(OpCode op, const Shape& shape, Device device, Kind kind, std::optional<DType> dtype) {
  return give(dispatch::create(op, shape, device.id(), kind, dtype));
}
Handle full(const Shape& shape, Scalar value, Device device, Kind kind, std::optional<DType> dtype) {
  return give(dispatch::full(shape, value, device.id(), kind, dtype));
}
Handle from_data(TensorData data, Device device, Kind kind) {
  return give(dispatch::from_data(std::move(data), device.id(), kind));
}
Handle random(const Shape& shape, const Distribution& dist, Device device, Kind kind, std::optional<DType> dtype) {
  return give(dispatch::random(shape, dist, device.id(), kind, dtype));
}
Handle arange(std::int64_t start, std::int64_t end, std::int64_t step, Device device, std::optional<DType> dtype) {
  return give(dispatch::arange(start, end, step, device.id(), dtype));
}
DataFuture into_data(Handle&& h) { return DataFuture(new std::future<TensorData>(dispatch::into_data(take(h)))); }
Handle to_device(Handle&& h, Device device) { return give(dispatch::to_device(take(h), device.id())); }
Handle cast(OpCode op, Handle&& h, DType dtype) { return give(dispatch::cast(op, take(h), dtype)); }

Handle unary(OpCode op, Handle&& a) { return give(dispatch::unary(op, take(a))); }
Handle binary(OpCode op, Handle&& a, Handle&& b) { return give(dispatch::binary(op, take(a), take(b))); }
Handle scalar(OpCode op, Handle&& a, Scalar s) { return give(dispatch::scalar(op, take(a), s)); }
Handle clamp(OpCode op, Handle&& a, Scalar lo, Scalar hi) { return give(dispatch::clamp(op, take(a), lo, hi)); }
Handle compare(OpCode op, Handle&& a, Handle&& b) { return give(dispatch::compare(op, take(a), take(b))); }
Handle compare_scalar(OpCode op, Handle&& a, Scalar s) { return give(dispatch::compare_scalar(op, take(a), s)); }
Handle predicate(OpCode op, Handle&& a) { return give(dispatch::predicate(op, take(a))); }
Handle matmul(Handle&& a, Handle&& b) { return give(dispatch::matmul(take(a), take(b))); }
Handle cross(Handle&& a, Handle&& b, std::int64_t dim) { return give(dispatch::cross(take(a), take(b), dim)); }
Handle powi(Handle&& a, Handle&& b) { return give(dispatch::powi(take(a), take(b))); }

Handle reduce(OpCode op, Handle&& a) { return give(dispatch::reduce(op, take(a))); }
Handle reduce_dim(OpCode op, Handle&& a, std::int64_t dim) { return give(dispatch::reduce_dim(op, take(a), dim)); }
Handle dim_index(OpCode op, Handle&& a, std::int64_t dim) { return give(dispatch::dim_index(op, take(a), dim)); }
std::pair<Handle, Handle> dim_with_indices(OpCode op, Handle&& a, std::int64_t dim) {
  return give2(dispatch::dim_with_indices(op, take(a), dim));
}
Handle any_all(OpCode op, Handle&& a) { return give(dispatch::any_all(op, take(a))); }
Handle any_all_dim(OpCode op, Handle&& a, std::int64_t dim) { return give(dispatch::any_all_dim(op, take(a), dim)); }
Handle sort(Handle&& a, std::int64_t dim, bool descending) { return give(dispatch::sort(take(a), dim, descending)); }
std::pair<Handle, Handle> sort_with_indices(Handle&& a, std::int64_t dim, bool descending) {
  return give2(dispatch::sort_with_indices(take(a), dim, descending));
}
Handle argsort(Handle&& a, std::int64_t dim, bool descending) { return give(dispatch::argsort(take(a), dim, descending)); }
Handle topk(Handle&& a, std::int64_t dim, std::size_t k) { return give(dispatch::topk(take(a), dim, k)); }
std::pair<Handle, Handle> topk_with_indices(Handle&& a, std::int64_t dim, std::size_t k) {
  return give2(dispatch::topk_with_indices(take(a), dim, k));
}
Handle argtopk(Handle&& a, std::int64_t dim, std::size_t k) { return give(dispatch::argtopk(take(a), dim, k)); }

Handle reshape(OpCode op, Handle&& a, std::span<const std::int64_t> shape) {
  return give(dispatch::reshape(op, take(a), shape));
}
Handle reshape_args(Handle&& a, std::span<const std::int64_t> dims) {
  // burn's reshape arguments: 0 keeps the input's dim at that index, -1 is inferred.
  // The handle is taken first, so a throw below releases it.
  DispatchTensor t = take(a);
  std::vector<std::int64_t> out(dims.begin(), dims.end());
  if (std::find(out.begin(), out.end(), 0) != out.end()) {
    const Shape s = t.shape();
    for (std::size_t i = 0; i < out.size(); ++i) {
      if (out[i] != 0) continue;
      if (i >= s.rank())
        throw ShapeError("[reshape] 0 keeps the input's dim at its index; expected an index below the input rank " +
                         std::to_string(s.rank()) + "; got 0 at index " + std::to_string(i) + " for shape " + s.to_string());
      out[i] = static_cast<std::int64_t>(s[i]);
    }
  }
  return give(dispatch::reshape(OpCode::reshape, std::move(t), out));
}
Handle swap_dims(Handle&& a, std::int64_t d0, std::int64_t d1) { return give(dispatch::swap_dims(take(a), d0, d1)); }
Handle axes(OpCode op, Handle&& a, Dims ax) { return give(dispatch::axes(op, take(a), ax)); }
Handle slice(Handle&& a, std::span<const Slice> slices) { return give(dispatch::slice(take(a), slices)); }
Handle slice_assign(Handle&& a, std::span<const Slice> slices, Handle&& value) {
  return give(dispatch::slice_assign(take(a), slices, take(value)));
}
Handle repeat_dim(Handle&& a, std::int64_t dim, std::size_t times) { return give(dispatch::repeat_dim(take(a), dim, times)); }
Handle cat(std::vector<Handle>&& parts, std::int64_t dim) {
  std::vector<DispatchTensor> ts;
  ts.reserve(parts.size());
  for (Handle& h : parts) ts.push_back(take(h));
  return give(dispatch::cat(std::move(ts), dim));
}
Handle unfold(Handle&& a, std::int64_t dim, std::size_t size, std::size_t step) {
  return give(dispatch::unfold(take(a), dim, size, step));
}

Handle gather(Handle&& a, std::int64_t dim, Handle&& indices) { return give(dispatch::gather(take(a), dim, take(indices))); }
Handle scatter(OpCode op, Handle&& a, std::int64_t dim, Handle&& indices, Handle&& values, IndexingUpdateOp update) {
  return give(dispatch::scatter(op, take(a), dim, take(indices), take(values), update));
}
Handle select(Handle&& a, std::int64_t dim, Handle&& indices) { return give(dispatch::select(take(a), dim, take(indices))); }
Handle select_assign(OpCode op, Handle&& a, std::int64_t dim, Handle&& indices, Handle&& values, IndexingUpdateOp update) {
  return give(dispatch::select_assign(op, take(a), dim, take(indices), take(values), update));
}
Handle mask_where(Handle&& a, Handle&& mask, Handle&& value) {
  return give(dispatch::mask_where(take(a), take(mask), take(value)));
}
Handle mask_fill(Handle&& a, Handle&& mask, Scalar value) { return give(dispatch::mask_fill(take(a), take(mask), value)); }
Handle mask_select(Handle&& a, Handle&& mask) { return give(dispatch::mask_select(take(a), take(mask))); }
Handle argwhere(Handle&& a) { return give(dispatch::argwhere(take(a))); }
Handle grid_sample_2d(Handle&& a, Handle&& grid, const GridSampleOptions& options) {
  return give(dispatch::grid_sample_2d(take(a), take(grid), options));
}

// The public gather_nd<DO> names its result rank: checked here (after the op's own
// checks of the index depth), the rest by the op.
Handle gather_nd(Handle&& a, Handle&& indices, std::size_t out_rank) {
  DispatchTensor ta = take(a), ti = take(indices);
  if (ta.prim && ti.prim) {
    const Shape& s = ta.shape();
    const Shape& is = ti.shape();
    if (is.rank() >= 1 && is[is.rank() - 1] >= 1 && is[is.rank() - 1] <= s.rank()) {
      const std::size_t got = std::max<std::size_t>(1, is.rank() - 1 + s.rank() - is[is.rank() - 1]);
      if (got != out_rank)
        throw ShapeError("[gather_nd] result rank differs from the requested rank; expected rank " + std::to_string(out_rank) +
                         "; got rank " + std::to_string(got) + " for a tensor of shape " + s.to_string() + " and indices " +
                         is.to_string());
    }
  }
  return give(dispatch::gather_nd(std::move(ta), std::move(ti)));
}
Handle scatter_nd(Handle&& a, Handle&& indices, Handle&& values, IndexingUpdateOp update) {
  return give(dispatch::scatter_nd(take(a), take(indices), take(values), update));
}

}  // namespace tensor::detail

namespace tensor {
namespace {
std::future<TensorData>& fut(void* impl) {
  if (!impl) throw Error("[into_data] future already consumed; expected a pending result; got an empty future");
  return *static_cast<std::future<TensorData>*>(impl);
}
}  // namespace

TensorData DataFuture::get() {
  std::future<TensorData>& f = fut(impl_);
  struct Reset { DataFuture* self; ~Reset() { self->reset(); } } r{this};
  try {
    return f.get();
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {  // the std:: exception net of dispatch's invoke, for pending results
    throw ExecutionError(std::string("[into_data] the pending result failed; expected a tensor::Error on failure; got ") +
                         e.what());
  }
}
bool DataFuture::ready() const { return fut(impl_).wait_for(std::chrono::seconds(0)) == std::future_status::ready; }
void DataFuture::wait() const { fut(impl_).wait(); }
void DataFuture::reset() noexcept {
  delete static_cast<std::future<TensorData>*>(impl_);
  impl_ = nullptr;
}

}  // namespace tensor

// ---- autodiff ----------------------------------------------------------------------

namespace tensor {
namespace {
dispatch::ad::GradStore* store_of(const Gradients& g) { return static_cast<dispatch::ad::GradStore*>(g.raw()); }
}  // namespace

Gradients& Gradients::operator=(Gradients&& o) noexcept {
  if (this != &o) {
    delete store_of(*this);
    impl_ = std::exchange(o.impl_, nullptr);
  }
  return *this;
}
Gradients::~Gradients() { delete store_of(*this); }
std::size_t Gradients::size() const { return impl_ ? store_of(*this)->grads.size() : 0; }

namespace detail {
namespace {
// The graph node a gradient of `x` is stored under; throws for an empty handle.
std::optional<std::uint64_t> grad_key(const Handle& x, const char* op) {
  if (x.empty()) throw Error(std::string("[") + op + "] use of an empty (moved-from) tensor; expected a tensor; got an empty handle");
  Handle h = retain(x);
  return dispatch::ad::node_id(take(h));
}
}  // namespace

Gradients backward(const Handle& loss) {
  Handle h = retain(loss);
  const DispatchTensor t = take(h);
  if (!t.prim) throw Error("[backward] use of an empty (moved-from) tensor; expected a tensor; got an empty handle");
  return Gradients::adopt(dispatch::ad::backward(t).release());
}

Handle grad(const Gradients& grads, const Handle& x) {
  const auto key = grad_key(x, "grad");
  const dispatch::ad::GradStore* s = store_of(grads);
  if (!key || !s) return Handle{};
  auto it = s->grads.find(*key);
  return it == s->grads.end() ? Handle{} : give(it->second);
}

Handle grad_remove(Gradients& grads, const Handle& x) {
  const auto key = grad_key(x, "grad_remove");
  dispatch::ad::GradStore* s = store_of(grads);
  if (!key || !s) return Handle{};
  auto it = s->grads.find(*key);
  if (it == s->grads.end()) return Handle{};
  DispatchTensor g = std::move(it->second);
  s->grads.erase(it);
  return give(std::move(g));
}

void grad_replace(Gradients& grads, const Handle& x, Handle&& g) {
  DispatchTensor v = take(g);
  const auto key = grad_key(x, "grad_replace");
  if (!key)
    throw Error("[grad_replace] expected a tensor that requires grad (a graph leaf); got an untracked tensor");
  if (!v.prim) throw Error("[grad_replace] expected a gradient tensor; got an empty (moved-from) handle");
  const Shape want = shape(x);
  if (!(v.shape() == want))
    throw ShapeError("[grad_replace] gradient shape differs from the tensor's; expected " + want.to_string() + "; got " +
                     v.shape().to_string());
  if (v.device != dispatch::autodiff_inner(device(x).id()))
    throw DeviceError(DeviceError::Kind::Mismatch, "[grad_replace] expected a gradient on the inner device " +
                                                       dispatch::device_string(dispatch::autodiff_inner(device(x).id())) +
                                                       "; got one on " + dispatch::device_string(v.device));
  if (!grads.raw()) grads = Gradients::adopt(new dispatch::ad::GradStore());
  store_of(grads)->grads.insert_or_assign(*key, std::move(v));
}

Handle set_require_grad(Handle&& a, bool on) { return give(dispatch::set_require_grad(take(a), on)); }
bool is_require_grad(const Handle& a) {
  Handle h = retain(a);
  return dispatch::is_require_grad(take(h));
}
Handle inner(Handle&& a) {
  DispatchTensor t = take(a);
  if (t.prim && !dispatch::is_autodiff_device(t.device)) return give(std::move(t));  // already a plain device's
  return give(dispatch::ad::inner(std::move(t)));
}
Handle from_inner(Handle&& a) { return give(dispatch::ad::from_inner(take(a))); }

}  // namespace detail
}  // namespace tensor
