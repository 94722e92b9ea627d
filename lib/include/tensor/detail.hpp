// The compile firewall (SPEC §6): an opaque handle and the non-template functions
// exported from libtensor.so that every Tensor<D, K> method calls. Nothing here is
// a template, so user code instantiates no dispatch or backend code.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <iosfwd>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "tensor/data.hpp"
#include "tensor/device.hpp"
#include "tensor/export.hpp"
#include "tensor/op_code.hpp"
#include "tensor/options.hpp"
#include "tensor/scalar.hpp"
#include "tensor/shape.hpp"

namespace tensor {

/// The pending result of reading a tensor back (Tensor::into_data_async). Move-only.
/// get() blocks until the device is done and rethrows its ExecutionError.
/// (A thin wrapper, so public headers need not include `<future>`.)
class TENSOR_API DataFuture {
 public:
  DataFuture() = default;
  explicit DataFuture(void* impl) noexcept : impl_(impl) {}  ///< The library's: takes a pending read.
  DataFuture(DataFuture&& o) noexcept : impl_(o.impl_) { o.impl_ = nullptr; }  ///< Takes o's read; o is left empty.
  /** Drops this read (if any) and takes o's; o is left empty. */ DataFuture& operator=(DataFuture&& o) noexcept {
    if (this != &o) { reset(); impl_ = o.impl_; o.impl_ = nullptr; }
    return *this;
  }
  DataFuture(const DataFuture&) = delete;
  DataFuture& operator=(const DataFuture&) = delete;
  ~DataFuture() { reset(); }

  TensorData get();   ///< Consumes the result; a second call throws Error.
  bool ready() const;  ///< True when get() would not block.
  void wait() const;  ///< Blocks until the result is there (get() would not block).
  bool valid() const { return impl_ != nullptr; }  ///< False once get() consumed it, or default-made.

 private:
  void reset() noexcept;
  void* impl_ = nullptr;
};

}  // namespace tensor

namespace tensor::detail {

// Kind (the tensor kind a handle carries) is tensor/dtype.hpp's.

// Opaque: a counted reference to a backend primitive plus its device and kind.
// Moving is a bit copy that empties the source; copying goes through retain().
struct Handle {
  alignas(8) unsigned char bytes[16] = {};
  // The first word is the primitive pointer: null means no tensor.
  bool empty() const {
    std::uint64_t w;
    std::memcpy(&w, bytes, sizeof w);
    return w == 0;
  }
};

TENSOR_API Handle retain(const Handle& h) noexcept;  // a second reference
TENSOR_API void release(Handle& h) noexcept;         // drops the reference, empties h

TENSOR_API Shape shape(const Handle& h);
TENSOR_API DType dtype(const Handle& h);
TENSOR_API Device device(const Handle& h);
TENSOR_API Kind kind(const Handle& h);
// Throws ShapeError naming `op` unless the handle's rank is `rank`.
TENSOR_API void check_rank(const Handle& h, std::size_t rank, const char* op);
// Tensor(Handle): unless h is a tensor of `rank` and `kind`, releases h and throws
// (Error for an empty handle, ShapeError for the rank, DTypeError for the kind).
TENSOR_API void check_handle(Handle& h, std::size_t rank, Kind kind);

// Dims given as signed ints (negative counts from the end) are resolved by the
// library against the tensor's rank.
using Dims = std::span<const std::int64_t>;

// One function per signature family of the op table.
TENSOR_API Handle create(OpCode op, const Shape& shape, Device device, Kind kind, std::optional<DType> dtype);  // nullopt: device default
TENSOR_API Handle full(const Shape& shape, Scalar value, Device device, Kind kind, std::optional<DType> dtype);
TENSOR_API Handle from_data(TensorData data, Device device, Kind kind);
TENSOR_API Handle random(const Shape& shape, const Distribution& dist, Device device, Kind kind, std::optional<DType> dtype);
TENSOR_API Handle arange(std::int64_t start, std::int64_t end, std::int64_t step, Device device, std::optional<DType> dtype);
TENSOR_API DataFuture into_data(Handle&& h);
TENSOR_API Handle to_device(Handle&& h, Device device);
TENSOR_API Handle cast(OpCode op, Handle&& h, DType dtype);

TENSOR_API Handle unary(OpCode op, Handle&& a);
TENSOR_API Handle binary(OpCode op, Handle&& a, Handle&& b);
TENSOR_API Handle scalar(OpCode op, Handle&& a, Scalar s);
TENSOR_API Handle clamp(OpCode op, Handle&& a, Scalar lo, Scalar hi);
TENSOR_API Handle compare(OpCode op, Handle&& a, Handle&& b);
TENSOR_API Handle compare_scalar(OpCode op, Handle&& a, Scalar s);
TENSOR_API Handle predicate(OpCode op, Handle&& a);
TENSOR_API Handle matmul(Handle&& a, Handle&& b);
TENSOR_API Handle cross(Handle&& a, Handle&& b, std::int64_t dim);
TENSOR_API Handle powi(Handle&& a, Handle&& b);
// Writes src's values into dst's buffer (same device, shape and dtype; typed errors otherwise).
TENSOR_API void copy_from(const Handle& dst, const Handle& src);

TENSOR_API Handle reduce(OpCode op, Handle&& a);
TENSOR_API Handle reduce_dim(OpCode op, Handle&& a, std::int64_t dim);
TENSOR_API Handle dim_index(OpCode op, Handle&& a, std::int64_t dim);
TENSOR_API std::pair<Handle, Handle> dim_with_indices(OpCode op, Handle&& a, std::int64_t dim);
TENSOR_API Handle any_all(OpCode op, Handle&& a);
TENSOR_API Handle any_all_dim(OpCode op, Handle&& a, std::int64_t dim);
TENSOR_API Handle sort(Handle&& a, std::int64_t dim, bool descending);
TENSOR_API std::pair<Handle, Handle> sort_with_indices(Handle&& a, std::int64_t dim, bool descending);
TENSOR_API Handle argsort(Handle&& a, std::int64_t dim, bool descending);
TENSOR_API Handle topk(Handle&& a, std::int64_t dim, std::size_t k);
TENSOR_API std::pair<Handle, Handle> topk_with_indices(Handle&& a, std::int64_t dim, std::size_t k);
TENSOR_API Handle argtopk(Handle&& a, std::int64_t dim, std::size_t k);

TENSOR_API Handle reshape(OpCode op, Handle&& a, std::span<const std::int64_t> shape);  // -1 infers one dim (reshape)
// Tensor::reshape's arguments as burn takes them: 0 keeps the input dim at that index.
TENSOR_API Handle reshape_args(Handle&& a, std::span<const std::int64_t> dims);
TENSOR_API Handle swap_dims(Handle&& a, std::int64_t d0, std::int64_t d1);
TENSOR_API Handle axes(OpCode op, Handle&& a, Dims axes);
TENSOR_API Handle slice(Handle&& a, std::span<const Slice> slices);
TENSOR_API Handle slice_assign(Handle&& a, std::span<const Slice> slices, Handle&& value);
TENSOR_API Handle repeat_dim(Handle&& a, std::int64_t dim, std::size_t times);
TENSOR_API Handle cat(std::vector<Handle>&& parts, std::int64_t dim);
TENSOR_API Handle unfold(Handle&& a, std::int64_t dim, std::size_t size, std::size_t step);

TENSOR_API Handle gather(Handle&& a, std::int64_t dim, Handle&& indices);
TENSOR_API Handle scatter(OpCode op, Handle&& a, std::int64_t dim, Handle&& indices, Handle&& values,
                          IndexingUpdateOp update);
TENSOR_API Handle select(Handle&& a, std::int64_t dim, Handle&& indices);
TENSOR_API Handle select_assign(OpCode op, Handle&& a, std::int64_t dim, Handle&& indices, Handle&& values,
                                IndexingUpdateOp update);
TENSOR_API Handle mask_where(Handle&& a, Handle&& mask, Handle&& value);
TENSOR_API Handle mask_fill(Handle&& a, Handle&& mask, Scalar value);
TENSOR_API Handle mask_select(Handle&& a, Handle&& mask);
TENSOR_API Handle argwhere(Handle&& a);
TENSOR_API Handle grid_sample_2d(Handle&& a, Handle&& grid, const GridSampleOptions& options);

// A list of dims from braces, a std::vector or a span (negative counts from the end).
// A pointer and a count: user code instantiates no span constructor for it.
struct DimList {
  const std::int64_t* p = nullptr;
  std::size_t n = 0;
  DimList(const std::int64_t* ptr, std::size_t count) : p(ptr), n(count) {}
  // The list's array lives to the end of the call it is an argument of.
  DimList(std::initializer_list<std::int64_t> l) : n(l.size()) { p = l.begin(); }  // NOLINT: implicit by design
  DimList(Dims d) : p(d.data()), n(d.size()) {}                                  // NOLINT
  DimList(const std::vector<std::int64_t>& v) : p(v.data()), n(v.size()) {}      // NOLINT
};

// burn's composite methods (lib/src/composite/, one file per public header): compositions
// of the ops above, on every device; errors name the method the user called.
// math.cpp
TENSOR_API Handle is_finite(Handle&& a);
TENSOR_API Handle contains_nan(Handle&& a);
TENSOR_API Handle deg2rad(Handle&& a);
TENSOR_API Handle rad2deg(Handle&& a);
TENSOR_API Handle is_close(Handle&& a, Handle&& b, double rtol, double atol);
// activation.cpp (tensor/activation.hpp)
TENSOR_API Handle silu(Handle&& x);
TENSOR_API Handle relu6(Handle&& x);
TENSOR_API Handle hard_swish(Handle&& x);
TENSOR_API Handle gelu_approximate(Handle&& x);
TENSOR_API Handle softplus(Handle&& x, double beta);
TENSOR_API Handle mish(Handle&& x);
TENSOR_API Handle softsign(Handle&& x);
TENSOR_API Handle tanhshrink(Handle&& x);
TENSOR_API Handle elu(Handle&& x, double alpha);
TENSOR_API Handle celu(Handle&& x, double alpha);
TENSOR_API Handle selu(Handle&& x);
TENSOR_API Handle hardtanh(Handle&& x, double min, double max);
TENSOR_API Handle hard_shrink(Handle&& x, double lambda);
TENSOR_API Handle soft_shrink(Handle&& x, double lambda, double bias);
TENSOR_API Handle threshold(Handle&& x, double limit, double value);
TENSOR_API Handle thresholded_relu(Handle&& x, double alpha);
TENSOR_API Handle glu(Handle&& x, std::int64_t dim);
TENSOR_API Handle quiet_softmax(Handle&& x, std::int64_t dim);
TENSOR_API Handle prelu(Handle&& x, Handle&& alpha);
// stats.cpp
TENSOR_API Handle sum_dims(Handle&& a, DimList dims);
TENSOR_API Handle mean_dims(Handle&& a, DimList dims);
TENSOR_API Handle prod_dims(Handle&& a, DimList dims);
TENSOR_API Handle max_dims(Handle&& a, DimList dims);
TENSOR_API Handle min_dims(Handle&& a, DimList dims);
TENSOR_API Handle max_abs_dims(Handle&& a, DimList dims);
TENSOR_API Handle var(Handle&& a, std::int64_t dim, bool biased);
TENSOR_API std::pair<Handle, Handle> var_mean(Handle&& a, std::int64_t dim, bool biased);
TENSOR_API Handle cov(Handle&& a, std::int64_t dim, std::size_t correction);
// linalg.cpp (tensor/linalg.hpp)
TENSOR_API Handle vector_norm(Handle&& x, std::int64_t dim, double p);
TENSOR_API Handle vector_normalize(Handle&& x, std::int64_t dim, double p, double epsilon);
TENSOR_API Handle cosine_similarity(Handle&& a, Handle&& b, std::int64_t dim, double epsilon);
TENSOR_API Handle outer(Handle&& a, Handle&& b);
TENSOR_API Handle outer_dim(Handle&& a, Handle&& b, std::int64_t dim);
TENSOR_API Handle matvec(Handle&& m, Handle&& v);
TENSOR_API Handle diag(Handle&& x);
TENSOR_API Handle trace(Handle&& x);
TENSOR_API Handle dot(Handle&& a, Handle&& b);
// loss.cpp (tensor/loss.hpp)
TENSOR_API Handle cross_entropy_with_logits(Handle&& logits, Handle&& targets);
// shape.cpp, creation.cpp, readback.cpp
TENSOR_API Handle squeeze(Handle&& a, DimList dims, std::size_t out_rank, const char* op);  // no dims: every size-1 dim
TENSOR_API Handle unsqueeze(Handle&& a, DimList axes, std::size_t out_rank, bool leading);
TENSOR_API Handle flatten(Handle&& a, std::int64_t start, std::int64_t end, std::size_t out_rank);
// Owned handles (a non-template list: user code instantiates no container for it).
class TENSOR_API HandleList {
 public:
  HandleList() = default;
  HandleList(Handle* p, std::size_t n) noexcept : p_(p), n_(n) {}
  HandleList(HandleList&& o) noexcept : p_(o.p_), n_(o.n_) { o.p_ = nullptr; o.n_ = 0; }
  HandleList(const HandleList&) = delete;
  HandleList& operator=(const HandleList&) = delete;
  HandleList& operator=(HandleList&&) = delete;
  ~HandleList();
  std::size_t size() const { return n_; }
  Handle take(std::size_t i) noexcept { Handle h = p_[i]; p_[i] = Handle{}; return h; }

 private:
  Handle* p_ = nullptr;
  std::size_t n_ = 0;
};
TENSOR_API HandleList chunk(Handle&& a, std::size_t chunks, std::int64_t dim);
TENSOR_API HandleList split(Handle&& a, std::size_t split_size, std::int64_t dim);
TENSOR_API HandleList split_with_sizes(Handle&& a, const std::vector<std::size_t>& sizes, std::int64_t dim);
TENSOR_API Handle repeat(Handle&& a, const std::vector<std::size_t>& times);
TENSOR_API Handle pad(Handle&& a, const std::vector<std::pair<std::size_t, std::size_t>>& pads, const PadMode& mode);
TENSOR_API Handle one_hot(Handle&& a, std::size_t classes, Scalar on, Scalar off, std::int64_t axis, const char* op);
TENSOR_API Handle eye(std::size_t n, Device device, Kind kind, std::optional<DType> dtype);
TENSOR_API Handle tri(Handle&& a, std::int64_t diagonal, bool upper);
TENSOR_API Handle tri_mask(std::size_t rows, std::size_t cols, std::int64_t offset, bool upper, Device device);
TENSOR_API Handle diag_mask(std::size_t rows, std::size_t cols, std::int64_t offset, Device device);
TENSOR_API Scalar into_scalar(Handle&& a);
// The one element of host data as into_scalar gives it (ShapeError unless exactly one).
TENSOR_API Scalar scalar_of(const TensorData& d);
// The *_async forms' second half, from the mask read back: argwhere's [n, rank] and
// nonzero's rank index tensors on `device`, and a's elements where the mask (already
// expanded to a's shape) is true.
TENSOR_API Handle argwhere_of(const TensorData& mask, Device device);
TENSOR_API HandleList nonzero_of(const TensorData& mask, Device device);
TENSOR_API Handle mask_select_of(Handle&& a, const TensorData& mask);
TENSOR_API Handle movedim(Handle&& a, DimList src, DimList dst);
TENSOR_API Handle roll(Handle&& a, DimList shifts, DimList dims, const char* op);
TENSOR_API Handle slice_dim(Handle&& a, std::int64_t dim, Slice s);
TENSOR_API Handle slice_fill(Handle&& a, std::span<const Slice> slices, Scalar value);
TENSOR_API Handle take(Handle&& a, std::int64_t dim, Handle&& indices);
TENSOR_API HandleList nonzero(Handle&& a);
TENSOR_API std::pair<Handle, Handle> median(Handle&& a, std::int64_t dim, const char* op);

// Literal constructors, list-argument select / permute, sampling, nd indexing, grids,
// transactions, det / lu / qr, printing (lib/src/composite/, lib/src/print.cpp).
TENSOR_API Handle select_dim(Handle&& a, std::int64_t dim, std::int64_t index);
TENSOR_API Handle select_list(Handle&& a, std::int64_t dim, DimList indices);
TENSOR_API Handle categorical(Handle&& a, std::size_t num_samples);
// Host values (any dtype of the kind) on `device` in its default dtype of `kind`.
TENSOR_API Handle from_values(TensorData data, Device device, Kind kind, const char* op);
TENSOR_API Handle gather_nd(Handle&& a, Handle&& indices, std::size_t out_rank);
TENSOR_API Handle scatter_nd(Handle&& a, Handle&& indices, Handle&& values, IndexingUpdateOp update);
TENSOR_API Handle affine_grid_2d(Handle&& theta, const Shape& size, bool align_corners);
TENSOR_API Handle permute_list(Handle&& a, DimList axes);
// Reads every handle back with one wait (all reads are queued before the first wait).
TENSOR_API std::vector<TensorData> transaction(std::vector<Handle>&& hs);
TENSOR_API std::pair<Handle, Handle> lu_decomposition(Handle&& a);
TENSOR_API HandleList lu(Handle&& a);
TENSOR_API Handle det(Handle&& a);
TENSOR_API std::pair<Handle, Handle> qr(Handle&& a);
TENSOR_API std::string format(const Handle& h, const PrintOptions& options);
TENSOR_API std::ostream& print(std::ostream& os, const Handle& h);
TENSOR_API PrintOptions print_options();
TENSOR_API void set_print_options(const PrintOptions& options);

}  // namespace tensor::detail
