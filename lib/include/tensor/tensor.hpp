// Tensor<D, K>: the typed front end. Rank D is static, kind K is Float, Int or Bool.
// Every method is a thin inline call into a non-template function of libtensor.so
// (detail.hpp), so user code compiles fast and never sees a backend (SPEC §6).
// Copying a Tensor is a reference-count increment; an rvalue operand
// (std::move(t).exp(), std::move(a) + b) lets the backend reuse its buffer.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <initializer_list>
#include <iosfwd>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "tensor/data.hpp"
#include "tensor/detail.hpp"
#include "tensor/device.hpp"
#include "tensor/dtype.hpp"
#include "tensor/error.hpp"
#include "tensor/gradients.hpp"
#include "tensor/options.hpp"
#include "tensor/scalar.hpp"
#include "tensor/shape.hpp"

/// libtensor: the typed Tensor with its kinds, dtypes, devices, scalars and errors; free
/// functions cat / stack, print options and Transaction; the module ops in tensor::nn and the
/// less common families in activation, linalg, signal, grid and loss; files in io; collectives in dist.
namespace tensor {

/// The Float kind (the `K` of `Tensor<D, K>`): elements of a float dtype (f64, f32, f16 or bf16).
/// Float math, autodiff and the module ops (tensor::nn) take this kind.
struct TENSOR_API Float { static constexpr detail::Kind kKind = detail::Kind::Float; };
/// The Int kind: elements of a signed or unsigned integer dtype (i64 ... i8, u64 ... u8);
/// indices, counts and bit operations use it.
struct TENSOR_API Int { static constexpr detail::Kind kKind = detail::Kind::Int; };
/// The Bool kind: true/false elements (stored in one or four bytes); comparisons return it,
/// masks take it.
struct TENSOR_API Bool { static constexpr detail::Kind kKind = detail::Kind::Bool; };

/// \var tensor::Float::kKind
/// The kind tag the library checks a handle against.

/// \var tensor::Int::kKind
/// The kind tag the library checks a handle against.

/// \var tensor::Bool::kKind
/// The kind tag the library checks a handle against.

/// A tensor kind: Float, Int or Bool.
template <class K> concept TensorKind = std::is_same_v<K, Float> || std::is_same_v<K, Int> || std::is_same_v<K, Bool>;
/// A kind with arithmetic: Float or Int.
template <class K> concept Numeric = std::is_same_v<K, Float> || std::is_same_v<K, Int>;

template <std::size_t D, TensorKind K = Float>
class TENSOR_API Tensor;

namespace detail {
/// Nested braces of rank D (the literal constructors' argument).
template <class T, std::size_t D> struct NestedT { using type = std::initializer_list<typename NestedT<T, D - 1>::type>; };
template <class T> struct NestedT<T, 1> { using type = std::initializer_list<T>; };
template <class T, std::size_t D> using Nested = typename NestedT<T, D>::type;
/// Appends the values row-major; the first list met at a depth fixes that dim, later ones must match.
template <class T, std::size_t D>
void flatten_nested(Nested<T, D> v, std::vector<T>& out, Shape& shape, unsigned& seen, std::size_t depth, const char* op) {
  const std::size_t n = v.size();
  if (!(seen & (1u << depth))) {
    seen |= 1u << depth;
    shape[depth] = n;
  } else if (shape[depth] != n) {
    throw ShapeError(std::string("[") + op + "] ragged nested values; expected " + std::to_string(shape[depth]) +
                     " entries at depth " + std::to_string(depth) + "; got " + std::to_string(n));
  }
  if constexpr (D == 1) {
    for (const T& x : v) out.push_back(x);
  } else {
    for (const auto& row : v) flatten_nested<T, D - 1>(row, out, shape, seen, depth + 1, op);
  }
}
}  // namespace detail


/// burn's Result for the try_* readbacks: the value, or the library error the read
/// raised (ok() is false, error() its message). value() rethrows that error.
template <class T>
class ReadResult {
 public:
  /// A succeeded read holding `v`.
  static ReadResult success(T v) { ReadResult r; r.v_.emplace(std::move(v)); return r; }
  /// A failed read holding the error `e` and its message.
  static ReadResult failure(std::exception_ptr e, std::string message) {
    ReadResult r;
    r.e_ = std::move(e);
    r.msg_ = std::move(message);
    return r;
  }
  /// True when the read succeeded (a value is held).
  bool ok() const { return v_.has_value(); }
  /// ok(), for `if (r) ...`.
  explicit operator bool() const { return ok(); }
  /// The value read; rethrows the read's error (a tensor::Error) when !ok().
  ///@{
  T& value() & { if (!v_) std::rethrow_exception(e_); return *v_; }
  const T& value() const& { if (!v_) std::rethrow_exception(e_); return *v_; }
  T&& value() && { if (!v_) std::rethrow_exception(e_); return std::move(*v_); }
  ///@}
  /// The failed read's message; empty when ok().
  const std::string& error() const { return msg_; }  // empty when ok()
  /// The failed read's exception (null when ok()), for std::rethrow_exception.
  std::exception_ptr exception() const { return e_; }

 private:
  std::optional<T> v_;
  std::exception_ptr e_;
  std::string msg_;
};

namespace detail {
/// Runs a read, turning a tensor::Error into a failed ReadResult.
template <class F>
auto try_read(F&& f) -> ReadResult<decltype(f())> {
  using T = decltype(f());
  try {
    return ReadResult<T>::success(f());
  } catch (const Error& e) {
    return ReadResult<T>::failure(std::current_exception(), e.what());
  }
}
}  // namespace detail

/// The pending result of into_scalar_async. get() blocks until the device is done, then
/// gives the element as into_scalar does (rethrowing the device's ExecutionError).
class ScalarFuture {
 public:
  /// An empty future: valid() is false, get() throws Error.
  ScalarFuture() = default;
  /// Wraps the pending read of a one-element tensor (see Tensor::into_scalar_async).
  explicit ScalarFuture(DataFuture f) noexcept : f_(std::move(f)) {}
  /// Waits for the read and returns the element as Tensor::into_scalar does, rethrowing the
  /// device's ExecutionError. Consumes the result: a second get() throws Error.
  Scalar get() { return detail::scalar_of(f_.get()); }  // consumes the result
  /// get() with a failed read in the ReadResult (burn's try_into_scalar_async).
  ReadResult<Scalar> try_get() { return detail::try_read([&] { return get(); }); }
  /// True when the read has finished, so get() does not block (Error once consumed).
  bool ready() const { return f_.ready(); }
  /// Blocks until the read has finished, without consuming it (Error once consumed).
  void wait() const { f_.wait(); }
  /// True while a pending result is held (false when default-constructed or after get()).
  bool valid() const { return f_.valid(); }

 private:
  DataFuture f_;
};

/// The pending result of an op whose output shape depends on values (burn's argwhere_async,
/// nonzero_async, mask_select_async): the values it needs are queued for reading when the
/// call returns; get() waits for them, then builds the result on the tensor's device
/// (rethrowing the device's ExecutionError; try_get() returns it instead).
template <class R>
class TensorFuture {
 public:
  /// Builds the result from the read values on the kept tensor's device.
  using Make = R (*)(TensorData&&, const detail::Handle&);
  /// The pending read `f`, the tensor `keep` the result is made from (its reference is
  /// handed over) and the function that makes it. Made by the *_async methods of Tensor.
  TensorFuture(DataFuture f, detail::Handle keep, Make make) noexcept : f_(std::move(f)), keep_(keep), make_(make) {}
  /// Takes over `o`'s pending read and tensor; futures are move-only.
  TensorFuture(TensorFuture&& o) noexcept : f_(std::move(o.f_)), keep_(std::exchange(o.keep_, detail::Handle{})), make_(o.make_) {}
  TensorFuture& operator=(TensorFuture&&) = delete;
  TensorFuture(const TensorFuture&) = delete;
  TensorFuture& operator=(const TensorFuture&) = delete;
  ~TensorFuture() { detail::release(keep_); }
  /// Waits for the read, then builds the result on the tensor's device; rethrows the
  /// device's ExecutionError. Consumes the read: a second get() throws Error.
  R get() { return make_(f_.get(), keep_); }  // consumes the result
  /// get(), with a failed read (a tensor::Error) in the ReadResult instead of thrown.
  ReadResult<R> try_get() { return detail::try_read([&] { return get(); }); }
  /// True when the read has finished, so get() does not block.
  bool ready() const { return f_.ready(); }
  /// Blocks until the read has finished, without consuming it.
  void wait() const { f_.wait(); }

 private:
  DataFuture f_;
  detail::Handle keep_;  ///< the tensor the result is made from (or on)
  Make make_;
};

namespace detail {
template <std::size_t D, class K> Tensor<D, K> adopt(Handle h);
template <std::size_t D, class K> Handle&& steal(Tensor<D, K>&& t);
template <std::size_t D, class K> Handle copy(const Tensor<D, K>& t);
}  // namespace detail

// Defines a const& and an && overload of a method: the && one passes the handle
// on, so a uniquely owned buffer can be reused. `self` is a reference to h_, which
// the library empties only once every argument has been evaluated: an operand that
// is this tensor again (std::move(a) + a, std::move(t).square()) is read first. Methods are compiled once, in
// libtensor.so (see the extern templates at the end): noinline keeps user
// translation units from compiling their bodies again (SPEC §8, compile time).
#define TENSOR_METHOD_REQ(req, R, name, params, call)                                                     \
  [[gnu::noinline]] R name params const& requires(req) { Handle self = detail::retain(h_); return R(call); } \
  [[gnu::noinline]] R name params&& requires(req) { Handle&& self = std::move(h_); return R(call); }
#define TENSOR_METHOD(...) TENSOR_METHOD_REQ(true, __VA_ARGS__)
#define TENSOR_NUM_METHOD(...) TENSOR_METHOD_REQ(!kIsBool, __VA_ARGS__)
#define TENSOR_FLOAT_METHOD(...) TENSOR_METHOD_REQ(kIsFloat, __VA_ARGS__)
#define TENSOR_INT_METHOD(...) TENSOR_METHOD_REQ(kIsInt, __VA_ARGS__)
#define TENSOR_BOOL_METHOD(...) TENSOR_METHOD_REQ(kIsBool, __VA_ARGS__)

/// A tensor of static rank `D` (1 to kMaxRank) and kind `K` (Float, Int or Bool) on one device;
/// its dtype within the kind is chosen at run time. Copies share the buffer (a reference
/// count); ops on an rvalue (std::move(t).exp()) may reuse it. Arithmetic takes Float and Int,
/// the elementwise math (recip ... detach) and autodiff Float, bitwise_* Int, bool_* Bool: where a
/// method is constrained, another kind is a compile error, elsewhere a DTypeError (greater on Bool).
/// Bad input throws a tensor::Error subclass: ShapeError, DTypeError, DeviceError (operands on
/// different devices), IndexError, ExecutionError.
template <std::size_t D, TensorKind K>
class TENSOR_API Tensor {
  static_assert(D >= 1 && D <= kMaxRank, "Tensor rank must be between 1 and kMaxRank");
  using Handle = detail::Handle;
  static constexpr bool kIsFloat = std::is_same_v<K, Float>;
  static constexpr bool kIsInt = std::is_same_v<K, Int>;
  static constexpr bool kIsBool = std::is_same_v<K, Bool>;

 public:
  /// The kind `K` (Float, Int or Bool).
  using Kind = K;
  /// The rank `D`.
  static constexpr std::size_t kRank = D;

  /// Adopts a handle (a reference the caller hands over, e.g. from detail::retain).
  /// Throws (and drops that reference) unless it is a tensor of rank D and kind K.
  explicit Tensor(Handle h) : h_(h) { detail::check_handle(h_, D, K::kKind); }
  /// Copies share the buffer (a reference-count increment); a moved-from tensor is empty and
  /// every method on it throws Error, until it is assigned again.
  ///@{
  Tensor(const Tensor& o) noexcept : h_(detail::retain(o.h_)) {}
  Tensor(Tensor&& o) noexcept : h_(std::exchange(o.h_, Handle{})) {}
  // Out of line (compiled once in libtensor.so, like the methods): inlined, every
  // `c = expr` in user code grew a self-test and a split clone (~0.15 s of the
  // compile-time benchmark's 1.1 s).
  [[gnu::noinline]] Tensor& operator=(const Tensor& o) noexcept {
    if (this != &o) { Handle n = detail::retain(o.h_); reset(); h_ = n; }
    return *this;
  }
  [[gnu::noinline]] Tensor& operator=(Tensor&& o) noexcept {
    if (this != &o) { reset(); h_ = std::exchange(o.h_, Handle{}); }
    return *this;
  }
  ///@}
  /// Drops this tensor's reference to the buffer (freed with the last one).
  ~Tensor() { reset(); }

  // ---- creation (shape rank must be D; dtype defaults to the device's setting) ----
  // noinline, as the methods: compiled once in libtensor.so, not inlined into every
  // user function that creates a tensor (with its rank check's message building).
  /// A tensor of `data` (values, shape and dtype kept) on `device`; data of another kind is converted
  /// to the device's default dtype of kind K (bool data to its bool dtype). ShapeError unless the
  /// data has rank D; DTypeError for quantized data or a dtype the device cannot store.
  [[gnu::noinline]] static Tensor from_data(TensorData data, Device device = Device::default_device()) {
    if (data.shape().rank() != D) throw_rank("from_data", data.shape());
    return Tensor(detail::from_data(std::move(data), device, K::kKind));
  }
  /// An uninitialised tensor of `shape` (rank D, else ShapeError) on `device`, in `dtype` or the
  /// device's default dtype of kind K. DTypeError: a dtype of another kind or one the device lacks.
  [[gnu::noinline]] static Tensor empty(const Shape& shape, Device device = Device::default_device(), std::optional<DType> dtype = std::nullopt) {
    check_shape("empty", shape);
    return Tensor(detail::create(OpCode::empty, shape, device, K::kKind, dtype));
  }
  /// A tensor of zeros (false for Bool) of `shape`; dtype and errors as empty().
  [[gnu::noinline]] static Tensor zeros(const Shape& shape, Device device = Device::default_device(), std::optional<DType> dtype = std::nullopt) {
    check_shape("zeros", shape);
    return Tensor(detail::create(OpCode::zeros, shape, device, K::kKind, dtype));
  }
  /// A tensor of ones (true for Bool) of `shape`; dtype and errors as empty().
  [[gnu::noinline]] static Tensor ones(const Shape& shape, Device device = Device::default_device(), std::optional<DType> dtype = std::nullopt) {
    check_shape("ones", shape);
    return Tensor(detail::create(OpCode::ones, shape, device, K::kKind, dtype));
  }
  /// Every element `value`, converted to the dtype (floats truncate toward zero for Int);
  /// dtype and errors as empty().
  [[gnu::noinline]] static Tensor full(const Shape& shape, Scalar value, Device device = Device::default_device(),
                     std::optional<DType> dtype = std::nullopt) {
    check_shape("full", shape);
    return Tensor(detail::full(shape, value, device, K::kKind, dtype));
  }
  /// Values drawn from `dist` with the device's random stream (Device::seed makes it
  /// reproducible). IndexError for bad parameters (uniform low > high, p outside 0..1, std < 0).
  [[gnu::noinline]] static Tensor random(const Shape& shape, const Distribution& dist, Device device = Device::default_device(),
                       std::optional<DType> dtype = std::nullopt) requires Numeric<K> {
    check_shape("random", shape);
    return Tensor(detail::random(shape, dist, device, K::kKind, dtype));
  }
  /// start, start + 1, ... below `end` (empty when end <= start), rank 1, Int.
  [[gnu::noinline]] static Tensor arange(std::int64_t start, std::int64_t end, Device device = Device::default_device(),
                       std::optional<DType> dtype = std::nullopt) requires(kIsInt && D == 1) {
    return Tensor(detail::arange(start, end, 1, device, dtype));
  }
  /// start, start + step, ... up to (excluding) `end`; a negative step counts down. IndexError
  /// when step is 0.
  [[gnu::noinline]] static Tensor arange_step(std::int64_t start, std::int64_t end, std::int64_t step, Device device = Device::default_device(),
                            std::optional<DType> dtype = std::nullopt) requires(kIsInt && D == 1) {
    return Tensor(detail::arange(start, end, step, device, dtype));
  }
  /// burn's TensorCreationOptions forms (a Device converts to the options): the dtype, when
  /// given, replaces the device's default; from_data converts the values to it.
  static Tensor from_data(TensorData data, const TensorCreationOptions& o) {
    if (o.dtype && data.dtype() != *o.dtype) data = data.convert(*o.dtype);
    return from_data(std::move(data), o.device);
  }
  /// empty, zeros, ones, full, random, arange and arange_step with the device and dtype in one
  /// TensorCreationOptions.
  ///@{
  static Tensor empty(const Shape& shape, const TensorCreationOptions& o) { return empty(shape, o.device, o.dtype); }
  static Tensor zeros(const Shape& shape, const TensorCreationOptions& o) { return zeros(shape, o.device, o.dtype); }
  static Tensor ones(const Shape& shape, const TensorCreationOptions& o) { return ones(shape, o.device, o.dtype); }
  static Tensor full(const Shape& shape, Scalar value, const TensorCreationOptions& o) {
    return full(shape, value, o.device, o.dtype);
  }
  static Tensor random(const Shape& shape, const Distribution& dist, const TensorCreationOptions& o) requires Numeric<K> {
    return Tensor(detail::random(shape, dist, o.device, K::kKind, o.dtype));
  }
  static Tensor arange(std::int64_t start, std::int64_t end, const TensorCreationOptions& o) requires(kIsInt && D == 1) {
    return Tensor(detail::arange(start, end, 1, o.device, o.dtype));
  }
  static Tensor arange_step(std::int64_t start, std::int64_t end, std::int64_t step, const TensorCreationOptions& o)
    requires(kIsInt && D == 1) { return Tensor(detail::arange(start, end, step, o.device, o.dtype)); }
  ///@}
  /// zeros(), ones() and full() of this tensor's shape, device and dtype.
  ///@{
  Tensor zeros_like() const { live("zeros_like"); return zeros(shape(), device(), dtype()); }
  Tensor ones_like() const { live("ones_like"); return ones(shape(), device(), dtype()); }
  Tensor full_like(Scalar v) const { live("full_like"); return full(shape(), v, device(), dtype()); }

  ///@}
  // ---- metadata and transfer ----
  /// The dims (Error on a moved-from tensor, as every accessor).
  Shape shape() const { return detail::shape(h_); }
  /// The dims as a fixed-size array of D entries.
  std::array<std::size_t, D> dims() const {
    live("dims");
    const Shape s = shape();
    std::array<std::size_t, D> out{};
    for (std::size_t i = 0; i < D; ++i) out[i] = s[i];
    return out;
  }
  /// The element type (one of kind K).
  DType dtype() const { return detail::dtype(h_); }
  /// The device holding the buffer.
  Device device() const { return detail::device(h_); }
  /// The element count, the product of the dims.
  std::size_t num_elements() const { live("num_elements"); return shape().num_elements(); }

  /// Writes `src`'s values into this tensor's buffer, in place: every handle sharing the
  /// buffer sees them, and a captured graph (tensor/graph.hpp) reads them at its next
  /// replay (the way static inputs are refreshed). Same device, shape and dtype, else
  /// DeviceError / ShapeError / DTypeError; refused inside capture().
  void copy_from(const Tensor& src) const { detail::copy_from(h_, src.h_); }
  /// Reads the values back (blocks until the device is done; rethrows its errors).
  TensorData into_data() const { return into_data_async().get(); }
  /// Queues the read and returns at once; DataFuture::get() waits (burn's into_data_async).
  DataFuture into_data_async() const { return detail::into_data(detail::retain(h_)); }
  /// into_data() (burn's other name).
  TensorData to_data() const { return into_data(); }
  /// into_data_async() (burn's other name).
  DataFuture to_data_async() const { return detail::into_data(detail::retain(h_)); }
  /// burn's try_* readbacks: a failed read (an ExecutionError from the device, a
  /// DTypeError from a conversion) comes back in the ReadResult instead of as a throw.
  ReadResult<TensorData> try_into_data() const { return detail::try_read([&] { return into_data(); }); }
  /// try_into_data() (burn's other name).
  ReadResult<TensorData> try_to_data() const { return detail::try_read([&] { return into_data(); }); }
  /// try_into_data / try_to_data, converted to `t` as TensorData::convert converts.
  ///@{
  ReadResult<TensorData> try_into_data_as(DType t) const { return detail::try_read([&] { return into_data().convert(t); }); }
  ReadResult<TensorData> try_to_data_as(DType t) const { return detail::try_read([&] { return into_data().convert(t); }); }
  ///@}
  /// to_vec<T>() with a failed read or conversion in the ReadResult.
  template <class T> ReadResult<std::vector<T>> try_to_vec() const {
    return detail::try_read([&] { return into_data().convert(dtype_of<T>).template to_vec<T>(); });
  }
  /// into_scalar() with a failed read (or a ShapeError: not one element) in the ReadResult.
  ReadResult<Scalar> try_into_scalar() const { return detail::try_read([&] { return into_scalar(); }); }
  /// The read of the one element, queued now (ShapeError now unless exactly one element).
  ScalarFuture into_scalar_async() const {
    if (num_elements() != 1)
      throw ShapeError("[into_scalar_async] expected a tensor of exactly one element; got shape " + shape().to_string());
    return ScalarFuture(into_data_async());
  }
  /// A copy on device `d` (the tensor itself when already there). DeviceError when `d` does not
  /// exist or a tensor that requires grad would leave its backend; DTypeError when `d` cannot store the dtype.
  Tensor to_device(Device d) const { return Tensor(detail::to_device(detail::retain(h_), d)); }

  // ---- conversion ----
  /// The values in another dtype of the same kind (Float or Int; float -> float rounds).
  /// DTypeError for a dtype of another kind or one the device cannot store.
  TENSOR_METHOD(Tensor, cast, (DType t), detail::cast(OpCode::cast, std::move(self), t))
  /// Float/Bool -> Int (float truncates toward zero).
  Tensor<D, Int> int_(std::optional<DType> t = std::nullopt) const requires(!kIsInt) {
    live("into_int");
    return Tensor<D, Int>(detail::cast(OpCode::into_int, detail::retain(h_), t ? *t : to_dtype(device().settings().int_dtype)));
  }
  /// int_() into the given int dtype.
  Tensor<D, Int> int_cast(DType t) const requires(!kIsInt) {
    return Tensor<D, Int>(detail::cast(OpCode::into_int, detail::retain(h_), t));
  }
  /// Int -> float (exact up to the float's precision), Bool -> 0/1, in the float dtype `t`.
  Tensor<D, Float> float_cast(DType t) const requires(!kIsFloat) {
    return Tensor<D, Float>(detail::cast(OpCode::into_float, detail::retain(h_), t));
  }
  /// Int/Bool -> the device's default float dtype.
  // (The constrained members below do not call other constrained members: clang 14,
  // used by scripts/fuzz.sh, checks those calls in the explicit instantiations.)
  Tensor<D, Float> float_() const requires(!kIsFloat) {
    live("into_float");
    return Tensor<D, Float>(detail::cast(OpCode::into_float, detail::retain(h_), to_dtype(device().settings().float_dtype)));
  }
  /// Numeric -> Bool: nonzero is true.
  Tensor<D, Bool> bool_() const requires Numeric<K> { return not_equal_elem(Scalar(0)); }

  // ---- arithmetic (broadcasting; operands of equal rank) ----
  /// Elementwise a + b. Operands broadcast (each dim equal, or 1 in one of them; else ShapeError)
  /// and must share dtype (DTypeError) and device (DeviceError). Also operator+.
  TENSOR_NUM_METHOD(Tensor, add, (const Tensor& o), detail::binary(OpCode::add, std::move(self), detail::retain(o.h_)))
  /// Elementwise a - b; broadcasting and errors as add(). Also operator-.
  TENSOR_NUM_METHOD(Tensor, sub, (const Tensor& o), detail::binary(OpCode::sub, std::move(self), detail::retain(o.h_)))
  /// Elementwise a * b; broadcasting and errors as add(). Also operator*.
  TENSOR_NUM_METHOD(Tensor, mul, (const Tensor& o), detail::binary(OpCode::mul, std::move(self), detail::retain(o.h_)))
  /// Elementwise a / b (Int: truncated toward zero); broadcasting and errors as add(). Also operator/.
  TENSOR_NUM_METHOD(Tensor, div, (const Tensor& o), detail::binary(OpCode::div, std::move(self), detail::retain(o.h_)))
  /// Elementwise remainder with the divisor's sign (Python's %); broadcasting and errors as
  /// add(). Also operator%.
  TENSOR_NUM_METHOD(Tensor, remainder, (const Tensor& o), detail::binary(OpCode::remainder, std::move(self), detail::retain(o.h_)))
  /// Elementwise max / min of two tensors (broadcast, as add()); a NaN in either operand gives NaN.
  TENSOR_NUM_METHOD(Tensor, max_pair, (const Tensor& o), detail::binary(OpCode::max_pair, std::move(self), detail::retain(o.h_)))
  /// Elementwise minimum of two tensors (broadcast, as add()); a NaN in either operand gives NaN.
  TENSOR_NUM_METHOD(Tensor, min_pair, (const Tensor& o), detail::binary(OpCode::min_pair, std::move(self), detail::retain(o.h_)))
  /// a + s, with `s` converted to the tensor's dtype (floats truncate for Int). Also operator+.
  TENSOR_NUM_METHOD(Tensor, add_scalar, (Scalar s), detail::scalar(OpCode::add_scalar, std::move(self), s))
  /// a - s (`s` converted as in add_scalar). Also operator-.
  TENSOR_NUM_METHOD(Tensor, sub_scalar, (Scalar s), detail::scalar(OpCode::sub_scalar, std::move(self), s))
  /// a * s (`s` converted as in add_scalar). Also operator*.
  TENSOR_NUM_METHOD(Tensor, mul_scalar, (Scalar s), detail::scalar(OpCode::mul_scalar, std::move(self), s))
  /// a / s (Int: truncated toward zero; `s` converted as in add_scalar). Also operator/.
  TENSOR_NUM_METHOD(Tensor, div_scalar, (Scalar s), detail::scalar(OpCode::div_scalar, std::move(self), s))
  /// a mod s with the divisor's sign (`s` converted as in add_scalar). Also operator%.
  TENSOR_NUM_METHOD(Tensor, remainder_scalar, (Scalar s), detail::scalar(OpCode::remainder_scalar, std::move(self), s))
  /// -a (Int wraps at the minimum). Also unary operator-.
  TENSOR_NUM_METHOD(Tensor, neg, (), detail::unary(OpCode::neg, std::move(self)))
  /// |a| (Int wraps at the minimum).
  TENSOR_NUM_METHOD(Tensor, abs, (), detail::unary(OpCode::abs, std::move(self)))
  /// -1, 0 or 1 by the sign of each element (sign(-0.0) is +0.0).
  TENSOR_NUM_METHOD(Tensor, sign, (), detail::unary(OpCode::sign, std::move(self)))
  /// min(max(a, lo), hi) elementwise. IndexError when lo > hi.
  TENSOR_NUM_METHOD(Tensor, clamp, (Scalar lo, Scalar hi), detail::clamp(OpCode::clamp, std::move(self), lo, hi))
  /// max(a, lo) elementwise.
  TENSOR_NUM_METHOD(Tensor, clamp_min, (Scalar lo), detail::scalar(OpCode::clamp_min, std::move(self), lo))
  /// min(a, hi) elementwise.
  TENSOR_NUM_METHOD(Tensor, clamp_max, (Scalar hi), detail::scalar(OpCode::clamp_max, std::move(self), hi))
  /// a ^ e elementwise with an Int exponent tensor (broadcast as in add()).
  TENSOR_NUM_METHOD(Tensor, powi, (const Tensor<D, Int>& e), detail::powi(std::move(self), detail::copy(e)))
  /// a ^ e for an integer e.
  TENSOR_NUM_METHOD(Tensor, powi_scalar, (std::int64_t e), detail::scalar(OpCode::powi_scalar, std::move(self), Scalar(e)))
  /// Matrix product: [.., m, k] x [.., k, n] -> [.., m, n], batch dims broadcast. ShapeError
  /// when the inner dims differ or the batch dims do not broadcast; DTypeError for mixed dtypes.
  TENSOR_NUM_METHOD(Tensor, matmul, (const Tensor& o), detail::matmul(std::move(self), detail::retain(o.h_)))
  /// a * a elementwise.
  TENSOR_NUM_METHOD(Tensor, square, (), detail::binary(OpCode::mul, std::move(self), detail::retain(h_)))

  /// 1 / a elementwise (Float only).
  TENSOR_FLOAT_METHOD(Tensor, recip, (), detail::unary(OpCode::recip, std::move(self)))
  /// e ^ a elementwise.
  TENSOR_FLOAT_METHOD(Tensor, exp, (), detail::unary(OpCode::exp, std::move(self)))
  /// Natural logarithm elementwise (NaN below 0, -inf at 0).
  TENSOR_FLOAT_METHOD(Tensor, log, (), detail::unary(OpCode::log, std::move(self)))
  /// log(1 + a), accurate near 0.
  TENSOR_FLOAT_METHOD(Tensor, log1p, (), detail::unary(OpCode::log1p, std::move(self)))
  /// Square root elementwise (NaN below 0).
  TENSOR_FLOAT_METHOD(Tensor, sqrt, (), detail::unary(OpCode::sqrt, std::move(self)))
  /// Sine (radians).
  TENSOR_FLOAT_METHOD(Tensor, sin, (), detail::unary(OpCode::sin, std::move(self)))
  /// Cosine (radians).
  TENSOR_FLOAT_METHOD(Tensor, cos, (), detail::unary(OpCode::cos, std::move(self)))
  /// Tangent (radians).
  TENSOR_FLOAT_METHOD(Tensor, tan, (), detail::unary(OpCode::tan, std::move(self)))
  /// Hyperbolic sine.
  TENSOR_FLOAT_METHOD(Tensor, sinh, (), detail::unary(OpCode::sinh, std::move(self)))
  /// Hyperbolic cosine.
  TENSOR_FLOAT_METHOD(Tensor, cosh, (), detail::unary(OpCode::cosh, std::move(self)))
  /// Hyperbolic tangent.
  TENSOR_FLOAT_METHOD(Tensor, tanh, (), detail::unary(OpCode::tanh, std::move(self)))
  /// Inverse sine (NaN outside [-1, 1]).
  TENSOR_FLOAT_METHOD(Tensor, asin, (), detail::unary(OpCode::asin, std::move(self)))
  /// Inverse cosine (NaN outside [-1, 1]).
  TENSOR_FLOAT_METHOD(Tensor, acos, (), detail::unary(OpCode::acos, std::move(self)))
  /// Inverse tangent.
  TENSOR_FLOAT_METHOD(Tensor, atan, (), detail::unary(OpCode::atan, std::move(self)))
  /// Inverse hyperbolic sine.
  TENSOR_FLOAT_METHOD(Tensor, asinh, (), detail::unary(OpCode::asinh, std::move(self)))
  /// Inverse hyperbolic cosine (NaN below 1).
  TENSOR_FLOAT_METHOD(Tensor, acosh, (), detail::unary(OpCode::acosh, std::move(self)))
  /// Inverse hyperbolic tangent (NaN outside [-1, 1]).
  TENSOR_FLOAT_METHOD(Tensor, atanh, (), detail::unary(OpCode::atanh, std::move(self)))
  /// The error function.
  TENSOR_FLOAT_METHOD(Tensor, erf, (), detail::unary(OpCode::erf, std::move(self)))
  /// Rounds to the nearest integer, half to even.
  TENSOR_FLOAT_METHOD(Tensor, round, (), detail::unary(OpCode::round, std::move(self)))
  /// Rounds down.
  TENSOR_FLOAT_METHOD(Tensor, floor, (), detail::unary(OpCode::floor, std::move(self)))
  /// Rounds up.
  TENSOR_FLOAT_METHOD(Tensor, ceil, (), detail::unary(OpCode::ceil, std::move(self)))
  /// Rounds toward zero.
  TENSOR_FLOAT_METHOD(Tensor, trunc, (), detail::unary(OpCode::trunc, std::move(self)))
  /// a ^ b elementwise; broadcasting and errors as add().
  TENSOR_FLOAT_METHOD(Tensor, powf, (const Tensor& o), detail::binary(OpCode::powf, std::move(self), detail::retain(o.h_)))
  /// a ^ e (an integral e takes the exact integer-power path).
  TENSOR_FLOAT_METHOD(Tensor, powf_scalar, (double e), detail::scalar(OpCode::powf_scalar, std::move(self), Scalar(e)))
  /// Four-quadrant atan(a / b) (a is y, b is x); broadcasting and errors as add().
  TENSOR_FLOAT_METHOD(Tensor, atan2, (const Tensor& o), detail::binary(OpCode::atan2, std::move(self), detail::retain(o.h_)))
  /// sqrt(a^2 + b^2) without intermediate overflow; broadcasting and errors as add().
  TENSOR_FLOAT_METHOD(Tensor, hypot, (const Tensor& o), detail::binary(OpCode::hypot, std::move(self), detail::retain(o.h_)))
  /// The 3-vector cross product along `dim` (negative counts from the end). ShapeError unless
  /// both have size 3 there and broadcast elsewhere; IndexError for a dim out of range.
  TENSOR_FLOAT_METHOD(Tensor, cross, (const Tensor& o, std::int64_t dim), detail::cross(std::move(self), detail::retain(o.h_), dim))
  /// The same values with autodiff tracking dropped (the identity off an autodiff device).
  TENSOR_FLOAT_METHOD(Tensor, detach, (), detail::unary(OpCode::detach, std::move(self)))

  // ---- autodiff (on a Device::autodiff() device; elsewhere require_grad is a no-op) ----
  /// Marks this tensor as a leaf whose gradient backward() keeps (autodiff devices only).
  TENSOR_FLOAT_METHOD(Tensor, require_grad, (), detail::set_require_grad(std::move(self), true))
  /// require_grad() when `on`, else drops the mark.
  TENSOR_FLOAT_METHOD(Tensor, set_require_grad, (bool on), detail::set_require_grad(std::move(self), on))
  /// True when marked with require_grad() (always false off an autodiff device).
  bool is_require_grad() const requires(kIsFloat) { return detail::is_require_grad(h_); }
  /// Marks this parameter (a require_grad leaf on an autodiff device) for data-parallel
  /// training with `param_id` (burn's set_distributed; 0 removes the mark): backward reports
  /// its gradient to the reducer that owns the id as soon as it is final (dist::GradientSync,
  /// <tensor/distributed.hpp>). Error for an untracked tensor or one computed from a leaf.
  const Tensor& set_distributed(std::uint64_t param_id) const requires(kIsFloat) {
    detail::set_distributed(h_, param_id);
    return *this;
  }
  /// True when this tensor carries a set_distributed mark.
  bool is_distributed() const requires(kIsFloat) { return detail::distributed_id(h_) != 0; }
  /// Backward pass from this one-element tensor (a loss; ShapeError otherwise); frees the graph's
  /// intermediates, so a second backward() over them throws Error.
  Gradients backward() const requires(kIsFloat) { return detail::backward(h_); }
  /// This tensor's gradient (on the inner device), or nullopt when it took no part.
  std::optional<Tensor> grad(const Gradients& grads) const requires(kIsFloat) {
    Handle h = detail::grad(grads, h_);
    if (h.empty()) return std::nullopt;
    return Tensor(h);
  }
  /// grad(), moved out of `grads` (nullopt when absent).
  std::optional<Tensor> grad_remove(Gradients& grads) const requires(kIsFloat) {
    Handle h = detail::grad_remove(grads, h_);
    if (h.empty()) return std::nullopt;
    return Tensor(h);
  }
  /// Replaces (or sets) this tensor's gradient in `grads` with `g`: Error unless this tensor requires
  /// grad, ShapeError unless g has its shape, DeviceError unless g is on the inner device.
  void grad_replace(Gradients& grads, Tensor g) const requires(kIsFloat) { detail::grad_replace(grads, h_, std::move(g.h_)); }
  /// The same values on the inner device (untracked), and back (untracked, on its autodiff device).
  TENSOR_METHOD(Tensor, inner, (), detail::inner(std::move(self)))
  /// The tensor `t` of the inner device back on its autodiff device (untracked).
  static Tensor from_inner(Tensor t) { return Tensor(detail::from_inner(std::move(t.h_))); }

  /// Elementwise a & b (Int only); broadcasting and errors as add().
  TENSOR_INT_METHOD(Tensor, bitwise_and, (const Tensor& o), detail::binary(OpCode::bitwise_and, std::move(self), detail::retain(o.h_)))
  /// Elementwise a | b; broadcasting and errors as add().
  TENSOR_INT_METHOD(Tensor, bitwise_or, (const Tensor& o), detail::binary(OpCode::bitwise_or, std::move(self), detail::retain(o.h_)))
  /// Elementwise a ^ b (xor); broadcasting and errors as add().
  TENSOR_INT_METHOD(Tensor, bitwise_xor, (const Tensor& o), detail::binary(OpCode::bitwise_xor, std::move(self), detail::retain(o.h_)))
  /// Elementwise a << b; broadcasting and errors as add().
  TENSOR_INT_METHOD(Tensor, bitwise_left_shift, (const Tensor& o),
                detail::binary(OpCode::bitwise_left_shift, std::move(self), detail::retain(o.h_)))
  /// Elementwise a >> b; broadcasting and errors as add().
  TENSOR_INT_METHOD(Tensor, bitwise_right_shift, (const Tensor& o),
                detail::binary(OpCode::bitwise_right_shift, std::move(self), detail::retain(o.h_)))
  /// a & s, `s` converted to the dtype.
  TENSOR_INT_METHOD(Tensor, bitwise_and_scalar, (Scalar s), detail::scalar(OpCode::bitwise_and_scalar, std::move(self), s))
  /// a | s, `s` converted to the dtype.
  TENSOR_INT_METHOD(Tensor, bitwise_or_scalar, (Scalar s), detail::scalar(OpCode::bitwise_or_scalar, std::move(self), s))
  /// a ^ s (xor), `s` converted to the dtype.
  TENSOR_INT_METHOD(Tensor, bitwise_xor_scalar, (Scalar s), detail::scalar(OpCode::bitwise_xor_scalar, std::move(self), s))
  /// a << s.
  TENSOR_INT_METHOD(Tensor, bitwise_left_shift_scalar, (Scalar s),
                detail::scalar(OpCode::bitwise_left_shift_scalar, std::move(self), s))
  /// a >> s.
  TENSOR_INT_METHOD(Tensor, bitwise_right_shift_scalar, (Scalar s),
                detail::scalar(OpCode::bitwise_right_shift_scalar, std::move(self), s))
  /// ~a (every bit flipped).
  TENSOR_INT_METHOD(Tensor, bitwise_not, (), detail::unary(OpCode::bitwise_not, std::move(self)))

  /// Logical not (Bool only).
  TENSOR_BOOL_METHOD(Tensor, bool_not, (), detail::unary(OpCode::bool_not, std::move(self)))
  /// Logical and; broadcasting and errors as add().
  TENSOR_BOOL_METHOD(Tensor, bool_and, (const Tensor& o), detail::binary(OpCode::bool_and, std::move(self), detail::retain(o.h_)))
  /// Logical or; broadcasting and errors as add().
  TENSOR_BOOL_METHOD(Tensor, bool_or, (const Tensor& o), detail::binary(OpCode::bool_or, std::move(self), detail::retain(o.h_)))
  /// Logical xor; broadcasting and errors as add().
  TENSOR_BOOL_METHOD(Tensor, bool_xor, (const Tensor& o), detail::binary(OpCode::bool_xor, std::move(self), detail::retain(o.h_)))

  // ---- comparisons (result: Tensor<D, Bool> in the device's bool dtype) ----
  /// Elementwise a == b as a Bool tensor in the device's bool dtype. Operands broadcast as in
  /// add() and share dtype (DTypeError) and device (DeviceError).
  Tensor<D, Bool> equal(const Tensor& o) const { return cmp(OpCode::equal, o); }
  /// Elementwise a != b; as equal().
  Tensor<D, Bool> not_equal(const Tensor& o) const { return cmp(OpCode::not_equal, o); }
  /// Elementwise a > b (Float and Int); as equal().
  Tensor<D, Bool> greater(const Tensor& o) const { return cmp(OpCode::greater, o); }
  /// Elementwise a >= b; as greater().
  Tensor<D, Bool> greater_equal(const Tensor& o) const { return cmp(OpCode::greater_equal, o); }
  /// Elementwise a < b; as greater().
  Tensor<D, Bool> lower(const Tensor& o) const { return cmp(OpCode::lower, o); }
  /// Elementwise a <= b; as greater().
  Tensor<D, Bool> lower_equal(const Tensor& o) const { return cmp(OpCode::lower_equal, o); }
  /// Elementwise a == s, `s` converted to the dtype; a Bool tensor of this shape.
  Tensor<D, Bool> equal_elem(Scalar s) const { return cmp_s(OpCode::equal_elem, s); }
  /// Elementwise a != s; as equal_elem().
  Tensor<D, Bool> not_equal_elem(Scalar s) const { return cmp_s(OpCode::not_equal_elem, s); }
  /// Elementwise a > s (Float and Int); as equal_elem().
  Tensor<D, Bool> greater_elem(Scalar s) const { return cmp_s(OpCode::greater_elem, s); }
  /// Elementwise a >= s; as greater_elem().
  Tensor<D, Bool> greater_equal_elem(Scalar s) const { return cmp_s(OpCode::greater_equal_elem, s); }
  /// Elementwise a < s; as greater_elem().
  Tensor<D, Bool> lower_elem(Scalar s) const { return cmp_s(OpCode::lower_elem, s); }
  /// Elementwise a <= s; as greater_elem().
  Tensor<D, Bool> lower_equal_elem(Scalar s) const { return cmp_s(OpCode::lower_equal_elem, s); }
  /// True where an element is NaN (Float only).
  Tensor<D, Bool> is_nan() const { return Tensor<D, Bool>(detail::predicate(OpCode::is_nan, detail::retain(h_))); }
  /// True where an element is +inf or -inf (Float only).
  Tensor<D, Bool> is_inf() const { return Tensor<D, Bool>(detail::predicate(OpCode::is_inf, detail::retain(h_))); }

  // ---- reductions (the *_dim forms keep the dim with size 1) ----
  /// The sum of all elements as a one-element tensor (empty: 0).
  Tensor<1, K> sum() const { return red(OpCode::sum); }
  /// The product of all elements as a one-element tensor (empty: 1).
  Tensor<1, K> prod() const { return red(OpCode::prod); }
  /// The mean of all elements as a one-element tensor (empty: NaN for Float, ShapeError for Int).
  Tensor<1, K> mean() const { return red(OpCode::mean); }
  /// The largest element as a one-element tensor (ShapeError when empty).
  Tensor<1, K> max() const { return red(OpCode::max); }
  /// The smallest element as a one-element tensor (ShapeError when empty).
  Tensor<1, K> min() const { return red(OpCode::min); }
  /// The largest |a| as a one-element tensor (ShapeError when empty).
  Tensor<1, K> max_abs() const { return red(OpCode::max_abs); }
  /// The sum along dim `d`, kept with size 1 (negative counts from the end; IndexError when out
  /// of range, as for every dim argument).
  TENSOR_NUM_METHOD(Tensor, sum_dim, (std::int64_t d), detail::reduce_dim(OpCode::sum_dim, std::move(self), d))
  /// The product along `d`, kept with size 1.
  TENSOR_NUM_METHOD(Tensor, prod_dim, (std::int64_t d), detail::reduce_dim(OpCode::prod_dim, std::move(self), d))
  /// The mean along `d`, kept with size 1 (an empty Int dim: ShapeError).
  TENSOR_NUM_METHOD(Tensor, mean_dim, (std::int64_t d), detail::reduce_dim(OpCode::mean_dim, std::move(self), d))
  /// The maximum along `d`, kept with size 1 (ShapeError when the dim is empty).
  TENSOR_NUM_METHOD(Tensor, max_dim, (std::int64_t d), detail::reduce_dim(OpCode::max_dim, std::move(self), d))
  /// The minimum along `d`, kept with size 1 (ShapeError when the dim is empty).
  TENSOR_NUM_METHOD(Tensor, min_dim, (std::int64_t d), detail::reduce_dim(OpCode::min_dim, std::move(self), d))
  /// The largest |a| along `d`, kept with size 1 (ShapeError when the dim is empty).
  TENSOR_NUM_METHOD(Tensor, max_abs_dim, (std::int64_t d), detail::reduce_dim(OpCode::max_abs_dim, std::move(self), d))
  /// The running sum along `d` (same shape).
  TENSOR_NUM_METHOD(Tensor, cumsum, (std::int64_t d), detail::reduce_dim(OpCode::cumsum, std::move(self), d))
  /// The running product along `d` (same shape).
  TENSOR_NUM_METHOD(Tensor, cumprod, (std::int64_t d), detail::reduce_dim(OpCode::cumprod, std::move(self), d))
  /// The running minimum along `d` (same shape; NaN propagates).
  TENSOR_NUM_METHOD(Tensor, cummin, (std::int64_t d), detail::reduce_dim(OpCode::cummin, std::move(self), d))
  /// The running maximum along `d` (same shape; NaN propagates).
  TENSOR_NUM_METHOD(Tensor, cummax, (std::int64_t d), detail::reduce_dim(OpCode::cummax, std::move(self), d))
  /// The index of the maximum along `d`, kept with size 1 (lowest index on ties; a NaN wins).
  /// ShapeError when the dim is empty.
  Tensor<D, Int> argmax(std::int64_t d) const { return Tensor<D, Int>(detail::dim_index(OpCode::argmax, detail::retain(h_), d)); }
  /// The index of the minimum along `d`, kept with size 1 (lowest on ties; a NaN wins).
  Tensor<D, Int> argmin(std::int64_t d) const { return Tensor<D, Int>(detail::dim_index(OpCode::argmin, detail::retain(h_), d)); }
  /// max_dim() and argmax() of `d` together: (values, indices).
  std::pair<Tensor, Tensor<D, Int>> max_dim_with_indices(std::int64_t d) const {
    return pair_of(detail::dim_with_indices(OpCode::max_dim_with_indices, detail::retain(h_), d));
  }
  /// min_dim() and argmin() of `d` together: (values, indices).
  std::pair<Tensor, Tensor<D, Int>> min_dim_with_indices(std::int64_t d) const {
    return pair_of(detail::dim_with_indices(OpCode::min_dim_with_indices, detail::retain(h_), d));
  }
  /// True (one element) when any element is nonzero / true (empty: false).
  Tensor<1, Bool> any() const { return Tensor<1, Bool>(detail::any_all(OpCode::any, detail::retain(h_))); }
  /// True (one element) when every element is nonzero / true (empty: true).
  Tensor<1, Bool> all() const { return Tensor<1, Bool>(detail::any_all(OpCode::all, detail::retain(h_))); }
  /// any() along `d`, kept with size 1.
  Tensor<D, Bool> any_dim(std::int64_t d) const { return Tensor<D, Bool>(detail::any_all_dim(OpCode::any_dim, detail::retain(h_), d)); }
  /// all() along `d`, kept with size 1.
  Tensor<D, Bool> all_dim(std::int64_t d) const { return Tensor<D, Bool>(detail::any_all_dim(OpCode::all_dim, detail::retain(h_), d)); }
  /// Sorted ascending along `d` (NaN last).
  Tensor sort(std::int64_t d) const { return Tensor(detail::sort(detail::retain(h_), d, false)); }
  /// Sorted descending along `d`.
  Tensor sort_descending(std::int64_t d) const { return Tensor(detail::sort(detail::retain(h_), d, true)); }
  /// The sorted values along `d` and the source index of each.
  std::pair<Tensor, Tensor<D, Int>> sort_with_indices(std::int64_t d, bool descending = false) const {
    return pair_of(detail::sort_with_indices(detail::retain(h_), d, descending));
  }
  /// The indices that sort along `d` (ascending unless `descending`).
  Tensor<D, Int> argsort(std::int64_t d, bool descending = false) const {
    return Tensor<D, Int>(detail::argsort(detail::retain(h_), d, descending));
  }
  /// The `k` largest along `d`, largest first. IndexError when k exceeds the dim.
  Tensor topk(std::size_t k, std::int64_t d) const { return Tensor(detail::topk(detail::retain(h_), d, k)); }
  /// topk() and the source indices of its values.
  std::pair<Tensor, Tensor<D, Int>> topk_with_indices(std::size_t k, std::int64_t d) const {
    return pair_of(detail::topk_with_indices(detail::retain(h_), d, k));
  }
  /// The indices of the `k` largest along `d`, largest first.
  Tensor<D, Int> argtopk(std::size_t k, std::int64_t d) const { return Tensor<D, Int>(detail::argtopk(detail::retain(h_), d, k)); }

  // ---- layout (views where the backend can) ----
  /// The same elements in the shape `dims` (row-major), as burn's: -1 infers one dim, 0 keeps
  /// the input's dim at the same index. ShapeError when the element count differs.
  template <std::size_t D2>
  Tensor<D2, K> reshape(const std::array<std::int64_t, D2>& dims) const& {
    return Tensor<D2, K>(detail::reshape_args(detail::retain(h_), dims));
  }
  /// reshape() of an rvalue: the buffer passes on (no reference-count change).
  template <std::size_t D2>
  Tensor<D2, K> reshape(const std::array<std::int64_t, D2>& dims) && {
    return Tensor<D2, K>(detail::reshape_args(std::move(h_), dims));
  }
  /// Broadcasts size-1 dims to `dims` (and adds leading dims); -1 keeps a dim. ShapeError when a
  /// dim is neither 1 nor the target.
  template <std::size_t D2>
  Tensor<D2, K> expand(const std::array<std::int64_t, D2>& dims) const {
    static_assert(D2 >= D, "expand cannot lower the rank");
    return Tensor<D2, K>(detail::reshape(OpCode::expand, detail::retain(h_), dims));
  }
  /// A size-1 dim at `dim` (0..D; negative counts from D + 1; IndexError otherwise). As burn's
  /// `unsqueeze_dim::<D2>`, a result rank D2 above D + 1 appends size-1 dims after the input's last dim.
  template <std::size_t D2 = D + 1>
  Tensor<D2, K> unsqueeze_dim(std::int64_t dim) const requires(D2 > D && D2 <= kMaxRank) {
    live("unsqueeze_dim");
    Shape s = shape();
    const auto r = static_cast<std::int64_t>(D + 1);
    const std::int64_t d = dim < 0 ? dim + r : dim;
    if (d < 0 || d >= r) throw IndexError("[unsqueeze_dim] dim out of range; expected -" + std::to_string(r) + ".." +
                                          std::to_string(r - 1) + "; got " + std::to_string(dim));
    std::array<std::int64_t, D2> dims{};
    dims.fill(1);
    for (std::size_t i = 0, j = 0; i < D + 1; ++i)
      dims[i] = static_cast<std::int64_t>(i) == d ? 1 : static_cast<std::int64_t>(s[j++]);
    return Tensor<D2, K>(detail::reshape(OpCode::reshape, detail::retain(h_), dims));  // literal dims (0 is a size)
  }
  /// burn's `Tensor::stack::<D2>`: each part `unsqueeze_dim::<D2>(dim)`, then concatenated along
  /// dim (so D2 > D + 1 gives trailing size-1 dims). Parts must share one shape (ShapeError; an
  /// empty list too).
  template <std::size_t D2 = D + 1>
  static Tensor<D2, K> stack(const std::vector<Tensor>& parts, std::int64_t dim) requires(D2 > D && D2 <= kMaxRank) {
    const std::int64_t d = dim < 0 ? dim + static_cast<std::int64_t>(D + 1) : dim;  // as unsqueeze_dim reads it
    std::vector<Tensor<D2, K>> up;
    up.reserve(parts.size());
    for (const auto& p : parts) up.push_back(p.template unsqueeze_dim<D2>(d));
    std::vector<Handle> hs;
    hs.reserve(up.size());
    for (const auto& u : up) hs.push_back(detail::retain(u.h_));
    return Tensor<D2, K>(detail::cat(std::move(hs), d));
  }
  /// Exchanges dims `a` and `b` (negative counts from the end).
  TENSOR_METHOD(Tensor, swap_dims, (std::int64_t a, std::int64_t b), detail::swap_dims(std::move(self), a, b))
  /// Swaps the last two dims.
  TENSOR_METHOD(Tensor, transpose, (), detail::unary(OpCode::transpose, std::move(self)))
  /// Reorders the dims: result dim i is input dim axes[i] (each dim once; IndexError otherwise).
  TENSOR_METHOD(Tensor, permute, (const std::array<std::int64_t, D>& axes),
                detail::axes(OpCode::permute, std::move(self), axes))
  /// Reverses the order of elements along each dim in `axes`.
  TENSOR_METHOD(Tensor, flip, (std::initializer_list<std::int64_t> axes),
                detail::axes(OpCode::flip, std::move(self), std::span<const std::int64_t>(axes.begin(), axes.size())))
  /// A sub-range per leading dim (one Slice each; missing dims whole). As burn's, negative bounds
  /// count from the end and bounds clamp to the dim; a start past the end, a step of 0 or more
  /// slices than dims: IndexError.
  TENSOR_METHOD(Tensor, slice, (std::initializer_list<Slice> s),
                detail::slice(std::move(self), std::span<const Slice>(s.begin(), s.size())))
  /// A copy with the sliced region replaced by `v`, which must have the slice's shape (ShapeError).
  TENSOR_METHOD(Tensor, slice_assign, (std::initializer_list<Slice> s, const Tensor& v),
                detail::slice_assign(std::move(self), std::span<const Slice>(s.begin(), s.size()), detail::retain(v.h_)))
  /// Elements [start, start + length) of dim `dim`; IndexError for a dim out of range, length 0 or
  /// a range past the dim.
  TENSOR_METHOD(Tensor, narrow, (std::int64_t dim, std::size_t start, std::size_t length),
                narrow_(std::move(self), dim, start, length))
  /// `times` copies of the tensor concatenated along dim `d`.
  TENSOR_METHOD(Tensor, repeat_dim, (std::int64_t d, std::size_t times), detail::repeat_dim(std::move(self), d, times))
  /// Windows of `size` every `step` along `dim`, as a new last dim.
  Tensor<D + 1, K> unfold(std::int64_t dim, std::size_t size, std::size_t step) const requires(D < kMaxRank) {
    return Tensor<D + 1, K>(detail::unfold(detail::retain(h_), dim, size, step));
  }

  // ---- indexing ----
  /// out[.., i, ..] = this[.., idx[.., i, ..], ..] along `dim`: picks elements by the Int indices,
  /// whose shape (equal to this one outside `dim`, else ShapeError) is the result's. IndexError for
  /// an index outside the dim (as for every index tensor: scatter, select, select_assign).
  TENSOR_METHOD(Tensor, gather, (std::int64_t dim, const Tensor<D, Int>& idx),
                detail::gather(std::move(self), dim, detail::copy(idx)))
  /// A copy with `v`'s elements combined (Add by default, or the given update rule; Bool: or)
  /// into the positions `idx` gives along `dim`; `idx` and `v` have one shape (else ShapeError).
  TENSOR_METHOD(Tensor, scatter, (std::int64_t dim, const Tensor<D, Int>& idx, const Tensor& v,
                                  IndexingUpdateOp op = IndexingUpdateOp::Add),
                detail::scatter(kIsBool ? OpCode::scatter_or : OpCode::scatter, std::move(self), dim, detail::copy(idx),
                                detail::retain(v.h_), op))
  /// The slices at the 1-D indices `idx` along `dim`, in order (repeats allowed); ShapeError
  /// unless idx is 1-D.
  TENSOR_METHOD(Tensor, select, (std::int64_t dim, const Tensor<1, Int>& idx),
                detail::select(std::move(self), dim, detail::copy(idx)))
  /// A copy with `v`'s slices combined (Add by default; Bool: or) into the slices `idx` selects
  /// along `dim`; v's shape is this one with `dim` of idx's length (else ShapeError).
  TENSOR_METHOD(Tensor, select_assign, (std::int64_t dim, const Tensor<1, Int>& idx, const Tensor& v,
                                        IndexingUpdateOp op = IndexingUpdateOp::Add),
                detail::select_assign(kIsBool ? OpCode::select_or : OpCode::select_assign, std::move(self), dim,
                                      detail::copy(idx), detail::retain(v.h_), op))
  /// `v` where the mask is true, this tensor elsewhere; mask, this and v broadcast to one shape
  /// (ShapeError otherwise).
  TENSOR_METHOD(Tensor, mask_where, (const Tensor<D, Bool>& m, const Tensor& v),
                detail::mask_where(std::move(self), detail::copy(m), detail::retain(v.h_)))
  /// `v` (converted to the dtype) where the mask is true; the mask broadcasts to this shape.
  TENSOR_METHOD(Tensor, mask_fill, (const Tensor<D, Bool>& m, Scalar v), detail::mask_fill(std::move(self), detail::copy(m), v))
  /// The elements where the (broadcast) mask is true, row-major, as a rank-1 tensor.
  Tensor<1, K> mask_select(const Tensor<D, Bool>& m) const {
    return Tensor<1, K>(detail::mask_select(detail::retain(h_), detail::copy(m)));
  }
  /// [n, D] indices of the true elements.
  Tensor<2, Int> argwhere() const requires kIsBool { return Tensor<2, Int>(detail::argwhere(detail::retain(h_))); }
  /// burn's async forms of the value-dependent ops (see TensorFuture): argwhere_async (of the
  /// true elements), nonzero_async and mask_select_async (ShapeError now unless the mask
  /// broadcasts to this tensor's shape).
  TensorFuture<Tensor<2, Int>> argwhere_async() const requires kIsBool {
    return TensorFuture<Tensor<2, Int>>(into_data_async(), detail::retain(h_), [](TensorData&& d, const Handle& h) {
      return Tensor<2, Int>(detail::argwhere_of(d, detail::device(h)));
    });
  }
  /// nonzero() as a TensorFuture (the nonzero / true elements' indices, one tensor per dim).
  TensorFuture<std::vector<Tensor<1, Int>>> nonzero_async() const {
    DataFuture f = kIsBool ? into_data_async() : detail::into_data(detail::compare_scalar(OpCode::not_equal_elem, detail::retain(h_), Scalar(0)));
    return TensorFuture<std::vector<Tensor<1, Int>>>(std::move(f), detail::retain(h_), [](TensorData&& d, const Handle& h) {
      detail::HandleList hs = detail::nonzero_of(d, detail::device(h));
      std::vector<Tensor<1, Int>> out;
      for (std::size_t i = 0; i < hs.size(); ++i) out.emplace_back(hs.take(i));
      return out;
    });
  }
  /// mask_select() as a TensorFuture. ShapeError now unless the mask broadcasts to this shape.
  TensorFuture<Tensor<1, K>> mask_select_async(const Tensor<D, Bool>& m) const {
    const Shape s = shape();
    std::array<std::int64_t, D> full{};
    for (std::size_t i = 0; i < D; ++i) full[i] = static_cast<std::int64_t>(s[i]);
    const Shape ms = m.shape();
    bool fits = true;
    for (std::size_t i = 0; i < D; ++i) fits = fits && (ms[i] == s[i] || ms[i] == 1);
    if (!fits)
      throw ShapeError("[mask_select_async] mask must broadcast to the tensor's shape; expected " + s.to_string() + "; got " +
                       m.shape().to_string());
    DataFuture f = detail::into_data(detail::reshape(OpCode::expand, detail::copy(m), full));
    return TensorFuture<Tensor<1, K>>(std::move(f), detail::retain(h_), [](TensorData&& d, const Handle& h) {
      return Tensor<1, K>(detail::mask_select_of(detail::retain(h), d));
    });
  }

  // ---- burn's composite methods (lib/src/composite/; errors name the method) ----
  /// The rank D.
  static constexpr std::size_t rank() { return D; }
  /// Removes every size-1 dim (D2: the rank left), the given dim, or the given dims
  /// (all size-1 dims when the list is empty); a listed dim must have size 1.
  template <std::size_t D2> Tensor<D2, K> squeeze() const { return Tensor<D2, K>(detail::squeeze(detail::retain(h_), {nullptr, 0}, D2, "squeeze")); }
  /// Removes dim `dim`, which must have size 1 (ShapeError otherwise).
  template <std::size_t D2 = D - 1> Tensor<D2, K> squeeze_dim(std::int64_t dim) const {
    return Tensor<D2, K>(detail::squeeze(detail::retain(h_), {&dim, 1}, D2, "squeeze_dim"));
  }
  /// Removes the listed dims, each of size 1 (ShapeError otherwise; an empty list: every size-1 dim).
  template <std::size_t D2> Tensor<D2, K> squeeze_dims(detail::DimList dims) const {
    return Tensor<D2, K>(detail::squeeze(detail::retain(h_), dims, D2, "squeeze_dims"));
  }
  /// Leading size-1 dims up to rank D2; or size-1 dims at the given axes of the result.
  template <std::size_t D2> Tensor<D2, K> unsqueeze() const { return Tensor<D2, K>(detail::unsqueeze(detail::retain(h_), {nullptr, 0}, D2, true)); }
  /// Inserts size-1 dims at the given axes of the rank-D2 result.
  template <std::size_t D2> Tensor<D2, K> unsqueeze_dims(detail::DimList axes) const {
    return Tensor<D2, K>(detail::unsqueeze(detail::retain(h_), axes, D2, false));
  }
  /// Dims start..end (inclusive) as one.
  template <std::size_t D2> Tensor<D2, K> flatten(std::int64_t start, std::int64_t end) const {
    return Tensor<D2, K>(detail::flatten(detail::retain(h_), start, end, D2));
  }
  /// Pieces of ceil(size / chunks) (the last shorter; fewer pieces when the dim is short).
  std::vector<Tensor> chunk(std::size_t chunks, std::int64_t dim) const { return many(detail::chunk(detail::retain(h_), chunks, dim)); }
  /// Pieces of `size` along `dim` (the last may be shorter; IndexError when size is 0).
  std::vector<Tensor> split(std::size_t size, std::int64_t dim) const { return many(detail::split(detail::retain(h_), size, dim)); }
  /// Pieces of the given sizes along `dim`; the sizes must sum to the dim (ShapeError otherwise).
  std::vector<Tensor> split_with_sizes(const std::vector<std::size_t>& sizes, std::int64_t dim) const {
    return many(detail::split_with_sizes(detail::retain(h_), sizes, dim));
  }
  /// times[i] copies along dim i (fewer counts than dims: the rest once).
  Tensor repeat(const std::vector<std::size_t>& times) const { return Tensor(detail::repeat(detail::retain(h_), times)); }
  /// (before, after) pairs for the last pads.size() dims.
  Tensor pad(const std::vector<std::pair<std::size_t, std::size_t>>& pads, const PadMode& mode) const requires(!kIsBool) {
    return Tensor(detail::pad(detail::retain(h_), pads, mode));
  }
  /// Class indices -> one-hot along a new last dim (one_hot_fill: on/off values, any axis).
  template <std::size_t D2 = D + 1> Tensor<D2, K> one_hot(std::size_t classes) const requires(!kIsBool) {
    static_assert(D2 == D + 1, "one_hot adds one dim");
    return Tensor<D2, K>(detail::one_hot(detail::retain(h_), classes, Scalar(1), Scalar(0), -1, "one_hot"));
  }
  template <std::size_t D2 = D + 1>
  /// one_hot() with `on` / `off` values and the new dim at `axis` (-1: last).
  Tensor<D2, K> one_hot_fill(std::size_t classes, Scalar on, Scalar off, std::int64_t axis = -1) const requires(!kIsBool) {
    static_assert(D2 == D + 1, "one_hot_fill adds one dim");
    return Tensor<D2, K>(detail::one_hot(detail::retain(h_), classes, on, off, axis, "one_hot_fill"));
  }
  /// The n x n identity matrix (rank 2, Float or Int).
  static Tensor eye(std::size_t n, Device device = Device::default_device(), std::optional<DType> dtype = std::nullopt)
    requires(!kIsBool && D == 2) { return Tensor(detail::eye(n, device, K::kKind, dtype)); }
  /// Masks of [rows, cols] (true where tril / triu / diag would zero an element).
  static Tensor tril_mask(std::size_t rows, std::size_t cols, std::int64_t offset = 0, Device device = Device::default_device())
    requires(kIsBool && D == 2) { return Tensor(detail::tri_mask(rows, cols, offset, true, device)); }
  /// [rows, cols], true below diagonal `offset` (where triu would zero an element).
  static Tensor triu_mask(std::size_t rows, std::size_t cols, std::int64_t offset = 0, Device device = Device::default_device())
    requires(kIsBool && D == 2) { return Tensor(detail::tri_mask(rows, cols, offset, false, device)); }
  /// [rows, cols], true off diagonal `offset` (everywhere but that diagonal).
  static Tensor diag_mask(std::size_t rows, std::size_t cols, std::int64_t offset = 0, Device device = Device::default_device())
    requires(kIsBool && D == 2) { return Tensor(detail::diag_mask(rows, cols, offset, device)); }
  /// The lower / upper triangle of the last two dims (diagonal > 0: above the main one); the rest 0.
  Tensor tril(std::int64_t diagonal = 0) const { return Tensor(detail::tri(detail::retain(h_), diagonal, false)); }
  /// The upper triangle of the last two dims (diagonal > 0: above the main one); the rest 0.
  Tensor triu(std::int64_t diagonal = 0) const { return Tensor(detail::tri(detail::retain(h_), diagonal, true)); }
  /// empty() of this tensor's shape, device and dtype.
  Tensor empty_like() const { live("empty_like"); return empty(shape(), device(), dtype()); }
  /// random() of this tensor's shape, device and dtype.
  Tensor random_like(const Distribution& dist) const requires Numeric<K> {
    live("random_like");
    return Tensor(detail::random(shape(), dist, device(), K::kKind, dtype()));
  }
  /// The one element (ShapeError otherwise), exactly: a double, int64, uint64 or bool Scalar.
  Scalar into_scalar() const { return detail::into_scalar(detail::retain(h_)); }
  /// The dot product of two rank-1 tensors of one length, as a one-element tensor.
  Tensor<1, K> dot(const Tensor& o) const requires(!kIsBool && D == 1) { return Tensor<1, K>(detail::dot(detail::retain(h_), detail::retain(o.h_))); }
  /// True where an element is neither NaN nor infinite.
  Tensor<D, Bool> is_finite() const requires kIsFloat { return Tensor<D, Bool>(detail::is_finite(detail::retain(h_))); }
  /// True (one element) when any element is NaN.
  Tensor<1, Bool> contains_nan() const requires kIsFloat { return Tensor<1, Bool>(detail::contains_nan(detail::retain(h_))); }
  /// |a - b| <= atol + rtol |b| (or a == b) elementwise; all_close: everywhere.
  Tensor<D, Bool> is_close(const Tensor& o, double rtol = 1e-5, double atol = 1e-8) const requires kIsFloat {
    return Tensor<D, Bool>(detail::is_close(detail::retain(h_), detail::retain(o.h_), rtol, atol));
  }
  /// True when is_close() holds everywhere (reads the result back: blocks).
  bool all_close(const Tensor& o, double rtol = 1e-5, double atol = 1e-8) const requires kIsFloat {
    return Tensor<D, Bool>(detail::is_close(detail::retain(h_), detail::retain(o.h_), rtol, atol)).all().into_scalar().to_bool();
  }
  /// Elementwise C fmod: the remainder with the dividend's sign; broadcasting and errors as add().
  Tensor fmod(const Tensor& o) const requires kIsFloat { return Tensor(detail::binary(OpCode::fmod, detail::retain(h_), detail::retain(o.h_))); }
  /// fmod(a, s): the remainder with the dividend's sign.
  Tensor fmod_scalar(double s) const requires kIsFloat { return Tensor(detail::scalar(OpCode::fmod_scalar, detail::retain(h_), Scalar(s))); }
  /// Degrees to radians (a * pi / 180).
  Tensor deg2rad() const requires kIsFloat { return Tensor(detail::deg2rad(detail::retain(h_))); }
  /// Radians to degrees (a * 180 / pi).
  Tensor rad2deg() const requires kIsFloat { return Tensor(detail::rad2deg(detail::retain(h_))); }
  /// Reductions over several dims, each kept with size 1 (no dims: the tensor unchanged).
  Tensor sum_dims(detail::DimList d) const requires(!kIsBool) { return Tensor(detail::sum_dims(detail::retain(h_), d)); }
  /// The mean over the dims `d`, each kept with size 1.
  Tensor mean_dims(detail::DimList d) const requires(!kIsBool) { return Tensor(detail::mean_dims(detail::retain(h_), d)); }
  /// The product over the dims `d`, each kept with size 1.
  Tensor prod_dims(detail::DimList d) const requires(!kIsBool) { return Tensor(detail::prod_dims(detail::retain(h_), d)); }
  /// The maximum over the dims `d`, each kept with size 1.
  Tensor max_dims(detail::DimList d) const requires(!kIsBool) { return Tensor(detail::max_dims(detail::retain(h_), d)); }
  /// The minimum over the dims `d`, each kept with size 1.
  Tensor min_dims(detail::DimList d) const requires(!kIsBool) { return Tensor(detail::min_dims(detail::retain(h_), d)); }
  /// The largest |a| over the dims `d`, each kept with size 1.
  Tensor max_abs_dims(detail::DimList d) const requires(!kIsBool) { return Tensor(detail::max_abs_dims(detail::retain(h_), d)); }
  /// Variance along dim (kept): var divides by n - 1, var_bias by n; *_mean also return the mean.
  Tensor var(std::int64_t dim) const requires kIsFloat { return Tensor(detail::var(detail::retain(h_), dim, false)); }
  /// The biased variance along `dim` (divides by n), kept with size 1.
  Tensor var_bias(std::int64_t dim) const requires kIsFloat { return Tensor(detail::var(detail::retain(h_), dim, true)); }
  /// (var(dim), mean along dim), both kept with size 1.
  std::pair<Tensor, Tensor> var_mean(std::int64_t dim) const requires kIsFloat { return two(detail::var_mean(detail::retain(h_), dim, false)); }
  /// (var_bias(dim), mean along dim), both kept with size 1.
  std::pair<Tensor, Tensor> var_mean_bias(std::int64_t dim) const requires kIsFloat { return two(detail::var_mean(detail::retain(h_), dim, true)); }
  /// The covariance of the variables along the other dims, observations along `dim`
  /// ([vars, obs] with dim 1 -> [vars, vars]); divides by n - correction.
  Tensor cov(std::int64_t dim, std::size_t correction = 1) const requires kIsFloat {
    return Tensor(detail::cov(detail::retain(h_), dim, correction));
  }
  /// argsort(d, true): the indices that sort descending.
  Tensor<D, Int> argsort_descending(std::int64_t d) const { return argsort(d, true); }
  /// sort_with_indices(d, true).
  std::pair<Tensor, Tensor<D, Int>> sort_descending_with_indices(std::int64_t d) const { return sort_with_indices(d, true); }
  /// Runtime-sized argument lists (as the brace forms).
  Tensor slice(const std::vector<Slice>& s) const { return Tensor(detail::slice(detail::retain(h_), std::span<const Slice>(s.data(), s.size()))); }
  /// flip() with a runtime list of dims.
  Tensor flip(const std::vector<std::int64_t>& axes) const {
    return Tensor(detail::axes(OpCode::flip, detail::retain(h_), std::span<const std::int64_t>(axes.data(), axes.size())));
  }
  /// transpose(): the last two dims swapped.
  Tensor t() const { return transpose(); }
  /// Dims src[i] moved to dst[i], the others kept in order.
  Tensor movedim(detail::DimList src, detail::DimList dst) const { return Tensor(detail::movedim(detail::retain(h_), src, dst)); }
  /// Elements shifted by shifts[i] (wrapping) along dims[i].
  Tensor roll(detail::DimList shifts, detail::DimList dims) const { return Tensor(detail::roll(detail::retain(h_), shifts, dims, "roll")); }
  /// roll() of one dim: elements shifted by `shift` (wrapping) along `dim`.
  Tensor roll_dim(std::int64_t shift, std::int64_t dim) const { return Tensor(detail::roll(detail::retain(h_), {&shift, 1}, {&dim, 1}, "roll_dim")); }
  /// slice() of one dim: `s` applied along `dim`, the others whole.
  Tensor slice_dim(std::int64_t dim, Slice s) const { return Tensor(detail::slice_dim(detail::retain(h_), dim, s)); }
  /// The sliced elements set to `value`.
  Tensor slice_fill(std::initializer_list<Slice> s, Scalar value) const {
    return Tensor(detail::slice_fill(detail::retain(h_), std::span<const Slice>(s.begin(), s.size()), value));
  }
  /// Slices of size 1 along dim, in order.
  std::vector<Tensor> iter_dim(std::int64_t dim) const { return split(1, dim); }
  /// select along dim with indices of any rank: dim is replaced by the indices' dims.
  template <std::size_t DI, std::size_t DO = D + DI - 1>
  Tensor<DO, K> take(std::int64_t dim, const Tensor<DI, Int>& idx) const {
    static_assert(DO == D + DI - 1, "take: the result rank is D + DI - 1");
    return Tensor<DO, K>(detail::take(detail::retain(h_), dim, detail::copy(idx)));
  }
  /// One index tensor per dim, of the nonzero (true) elements (row-major order).
  template <std::size_t R = 1>  // (a template: user code compiles the body only where it is called)
  std::vector<Tensor<R, Int>> nonzero() const {
    detail::HandleList hs = detail::nonzero(detail::retain(h_));
    std::vector<Tensor<R, Int>> out;
    for (std::size_t i = 0; i < hs.size(); ++i) out.emplace_back(hs.take(i));
    return out;
  }
  /// sum_dims, then those dims removed.
  template <std::size_t D2> Tensor<D2, K> sum_dims_squeeze(detail::DimList d) const requires(!kIsBool) {
    return sum_dims(d).template squeeze_dims<D2>(d);
  }
  /// The lower median along dim (kept), as burn; with its index.
  Tensor median(std::int64_t dim) const requires(!kIsBool) { return pair_of(detail::median(detail::retain(h_), dim, "median")).first; }
  /// median() and the index of each median along `dim`.
  std::pair<Tensor, Tensor<D, Int>> median_with_indices(std::int64_t dim) const requires(!kIsBool) {
    return pair_of(detail::median(detail::retain(h_), dim, "median_with_indices"));
  }
  /// burn's primary names of the scalar comparisons (the *_elem forms stay).
  Tensor<D, Bool> equal_scalar(Scalar s) const { return cmp_s(OpCode::equal_elem, s); }
  /// a != s (same as not_equal_elem).
  Tensor<D, Bool> not_equal_scalar(Scalar s) const { return cmp_s(OpCode::not_equal_elem, s); }
  /// a > s (same as greater_elem).
  Tensor<D, Bool> greater_scalar(Scalar s) const { return cmp_s(OpCode::greater_elem, s); }
  /// a >= s (same as greater_equal_elem).
  Tensor<D, Bool> greater_equal_scalar(Scalar s) const { return cmp_s(OpCode::greater_equal_elem, s); }
  /// a < s (same as lower_elem).
  Tensor<D, Bool> lower_scalar(Scalar s) const { return cmp_s(OpCode::lower_elem, s); }
  /// a <= s (same as lower_equal_elem).
  Tensor<D, Bool> lower_equal_scalar(Scalar s) const { return cmp_s(OpCode::lower_equal_elem, s); }

  // ---- literal constructors, typed read-back, display, list-argument select/permute, sampling, nd indexing ----
  /// burn's literal constructors: nested braces of rank D (Tensor<2>::from_floats({{1, 2}, {3, 4}})),
  /// or flat values and a shape; stored in the device's default dtype of the kind.
  /// Ragged braces or a shape that does not match the values: ShapeError.
  static Tensor from_floats(detail::Nested<double, D> v, Device device = Device::default_device()) requires kIsFloat {
    return from_nested<double>(v, device, "from_floats");
  }
  /// A Float tensor of the flat values `v` (row-major) and `shape` (ShapeError when the
  /// counts differ or the rank is not D).
  static Tensor from_floats(const std::vector<double>& v, const Shape& shape, Device device = Device::default_device())
    requires kIsFloat { return from_flat<double>(v, shape, device, "from_floats"); }
  /// An Int tensor of nested braces of rank D (ShapeError when ragged).
  static Tensor from_ints(detail::Nested<std::int64_t, D> v, Device device = Device::default_device()) requires kIsInt {
    return from_nested<std::int64_t>(v, device, "from_ints");
  }
  /// An Int tensor of flat values and a shape (ShapeError when they do not match).
  static Tensor from_ints(const std::vector<std::int64_t>& v, const Shape& shape, Device device = Device::default_device())
    requires kIsInt { return from_flat<std::int64_t>(v, shape, device, "from_ints"); }
  /// A Bool tensor of nested braces of rank D (ShapeError when ragged).
  static Tensor from_bools(detail::Nested<bool, D> v, Device device = Device::default_device()) requires kIsBool {
    return from_nested<bool>(v, device, "from_bools");
  }
  /// A Bool tensor of flat values and a shape (ShapeError when they do not match).
  static Tensor from_bools(const std::vector<bool>& v, const Shape& shape, Device device = Device::default_device())
    requires kIsBool { return from_flat<bool>(v, shape, device, "from_bools"); }
  /// Reads back converted to another dtype (as TensorData::convert converts).
  TensorData into_data_as(DType t) const { return into_data().convert(t); }
  /// into_data_as(t) (burn's other name).
  TensorData to_data_as(DType t) const { return into_data().convert(t); }
  /// into_data_as / to_data_as with the dtype of the C++ type T (dtype_of<T>).
  ///@{
  template <class T> TensorData into_data_as() const { return into_data().convert(dtype_of<T>); }
  template <class T> TensorData to_data_as() const { return into_data().convert(dtype_of<T>); }
  ///@}
  /// The values as T, converted from the tensor's dtype.
  template <class T> std::vector<T> to_vec() const { return into_data().convert(dtype_of<T>).template to_vec<T>(); }
  /// burn's Display: values (truncated past PrintOptions::threshold), shape, device, kind, dtype.
  std::string to_string() const { return detail::format(h_, detail::print_options()); }
  /// to_string() with explicit print options.
  std::string to_string(const PrintOptions& o) const { return detail::format(h_, o); }
  /// Writes to_string() to `os`.
  friend std::ostream& operator<<(std::ostream& os, const Tensor& t) { return detail::print(os, t.h_); }
  /// The slice at `index` along dim, that dim removed (burn's select_dim::<D - 1>; a
  /// negative dim or index counts from the end). IndexError when either is out of range.
  template <std::size_t D2 = D - 1>
  Tensor<D2, K> select_dim(std::int64_t dim, std::int64_t index) const requires(D >= 2) {
    static_assert(D2 + 1 == D, "select_dim removes one dim");
    return Tensor<D2, K>(detail::select_dim(detail::retain(h_), dim, index));
  }
  /// select with a runtime list of indices (negative: not allowed, as select's).
  Tensor select(std::int64_t dim, const std::vector<std::int64_t>& idx) const {
    return Tensor(detail::select_list(detail::retain(h_), dim, idx));
  }
  /// permute with a runtime list (one entry per dim; a std::vector converts). A span, so
  /// that braces still pick the std::array form.
  Tensor permute(detail::Dims axes) const { return Tensor(detail::permute_list(detail::retain(h_), axes)); }
  /// Multinomial sampling with replacement: the last dim holds non-negative class weights
  /// (not necessarily normalised); the result holds num_samples class indices per row in
  /// its last dim. Uses the device's random stream (Device::seed makes it reproducible).
  Tensor<D, Int> categorical(std::size_t num_samples) const requires(kIsFloat && D < kMaxRank) {
    return Tensor<D, Int>(detail::categorical(detail::retain(h_), num_samples));
  }
  /// burn's gather_nd: indices [..., k] address the first k dims; the result is
  /// indices' leading dims followed by the remaining dims of this tensor (rank DI - 1 + D - k).
  template <std::size_t DO, std::size_t DI> Tensor<DO, K> gather_nd(const Tensor<DI, Int>& idx) const requires(!kIsBool) {
    return Tensor<DO, K>(detail::gather_nd(detail::retain(h_), detail::copy(idx), DO));
  }
  /// burn's scatter_nd: values of shape (indices' leading dims + remaining dims) combined
  /// into the slices the indices address (Assign: the last write of duplicates wins).
  template <std::size_t DI, std::size_t DV>
  Tensor scatter_nd(const Tensor<DI, Int>& idx, const Tensor<DV, K>& values, IndexingUpdateOp op = IndexingUpdateOp::Assign) const
    requires(!kIsBool) {
    return Tensor(detail::scatter_nd(detail::retain(h_), detail::copy(idx), detail::copy(values), op));
  }
  /// Samples [N, C, H, W] at grid [N, Hout, Wout, 2] points (x, y in [-1, 1]) -> [N, C, Hout, Wout].
  Tensor grid_sample_2d(const Tensor<4>& grid, const GridSampleOptions& options = {}) const requires(kIsFloat && D == 4) {
    return Tensor(detail::grid_sample_2d(detail::retain(h_), detail::copy(grid), options));
  }

  // ---- operators ----
  // Each operator has a const& and an && form (no by-value parameter: fewer
  // temporaries in user code); the && form lets the backend reuse the buffer.
#define TENSOR_OPERATOR(sym, method, Rhs)                                             \
  friend Tensor operator sym(const Tensor& a, Rhs b) { return a.method(b); }          \
  friend Tensor operator sym(Tensor&& a, Rhs b) { return std::move(a).method(b); }
  /// a + b, a - b, a * b, a / b, a % b: add(), sub(), mul(), div(), remainder() (broadcasting,
  /// errors and Int division as there). Float and Int only.
  ///@{
  TENSOR_OPERATOR(+, add, const Tensor&)
  TENSOR_OPERATOR(-, sub, const Tensor&)
  TENSOR_OPERATOR(*, mul, const Tensor&)
  TENSOR_OPERATOR(/, div, const Tensor&)
  TENSOR_OPERATOR(%, remainder, const Tensor&)
  ///@}
  /// a + s, a - s, a * s, a / s, a % s: add_scalar() ... remainder_scalar() (`s` converted to
  /// the tensor's dtype).
  ///@{
  TENSOR_OPERATOR(+, add_scalar, Scalar)
  TENSOR_OPERATOR(-, sub_scalar, Scalar)
  TENSOR_OPERATOR(*, mul_scalar, Scalar)
  TENSOR_OPERATOR(/, div_scalar, Scalar)
  TENSOR_OPERATOR(%, remainder_scalar, Scalar)
///@}
#undef TENSOR_OPERATOR
  /// s + a and s * a (add_scalar, mul_scalar).
  ///@{
  friend Tensor operator+(Scalar s, const Tensor& a) { return a.add_scalar(s); }
  friend Tensor operator+(Scalar s, Tensor&& a) { return std::move(a).add_scalar(s); }
  friend Tensor operator*(Scalar s, const Tensor& a) { return a.mul_scalar(s); }
  friend Tensor operator*(Scalar s, Tensor&& a) { return std::move(a).mul_scalar(s); }
  ///@}
  /// s - a, as neg() then add_scalar(s).
  ///@{
  friend Tensor operator-(Scalar s, const Tensor& a) { return a.neg().add_scalar(s); }
  friend Tensor operator-(Scalar s, Tensor&& a) { return std::move(a).neg().add_scalar(s); }
  ///@}
  /// -a, as neg().
  ///@{
  friend Tensor operator-(const Tensor& a) { return a.neg(); }
  friend Tensor operator-(Tensor&& a) { return std::move(a).neg(); }
///@}

  /// The handle, for code that works below the typed API (tools, tests).
  const Handle& handle() const { return h_; }

 private:
  template <std::size_t, TensorKind> friend class Tensor;
  template <std::size_t D2, class K2> friend detail::Handle detail::copy(const Tensor<D2, K2>& t);

  /// A moved-from handle is an error naming `op`, the method called, not the accessor
  /// (shape(), dtype(), device()) it reads first.
  void live(const char* op) const { detail::check_rank(h_, D, op); }
  /// release() accepts an empty handle; one call is less code per temporary than a test and a call.
  void reset() noexcept { detail::release(h_); }
  [[gnu::noinline, noreturn]] static void throw_rank(const char* op, const Shape& s) {
    throw ShapeError(std::string("[") + op + "] rank mismatch; expected rank " + std::to_string(D) + "; got shape " +
                     s.to_string());
  }
  static void check_shape(const char* op, const Shape& s) {
    if (s.rank() != D) throw_rank(op, s);
  }
  Tensor<D, Bool> cmp(OpCode op, const Tensor& o) const {
    return Tensor<D, Bool>(detail::compare(op, detail::retain(h_), detail::retain(o.h_)));
  }
  Tensor<D, Bool> cmp_s(OpCode op, Scalar s) const { return Tensor<D, Bool>(detail::compare_scalar(op, detail::retain(h_), s)); }
  Tensor<1, K> red(OpCode op) const { return Tensor<1, K>(detail::reduce(op, detail::retain(h_))); }
  static std::vector<Tensor> many(detail::HandleList&& hs) {
    std::vector<Tensor> out;
    out.reserve(hs.size());
    for (std::size_t i = 0; i < hs.size(); ++i) out.emplace_back(hs.take(i));
    return out;
  }
  static std::pair<Tensor, Tensor> two(std::pair<Handle, Handle> p) { return {Tensor(p.first), Tensor(p.second)}; }
  std::pair<Tensor, Tensor<D, Int>> pair_of(std::pair<Handle, Handle> p) const {
    return {Tensor(p.first), Tensor<D, Int>(p.second)};
  }
  static Handle narrow_(Handle&& self, std::int64_t dim, std::size_t start, std::size_t length) {
    std::array<Slice, D> s{};
    const auto r = static_cast<std::int64_t>(D);
    const std::int64_t d = dim < 0 ? dim + r : dim;
    if (d < 0 || d >= r) {
      detail::release(self);
      throw IndexError("[narrow] dim out of range; expected -" + std::to_string(r) + ".." + std::to_string(r - 1) + "; got " +
                       std::to_string(dim));
    }
    if (length == 0) {
      detail::release(self);
      throw IndexError("[narrow] length must be positive; expected >= 1; got 0");
    }
    detail::check_rank(self, D, "narrow");  // a moved-from tensor is narrow's error, not [shape]'s
    const std::size_t n = detail::shape(self)[static_cast<std::size_t>(d)];
    if (start > n || length > n - start) {  // start + length may not fit: compare against n - start
      detail::release(self);
      throw IndexError("[narrow] range out of bounds; expected start + length <= " + std::to_string(n) + "; got start " +
                       std::to_string(start) + " length " + std::to_string(length));
    }
    s[static_cast<std::size_t>(d)] = Slice::range(static_cast<std::int64_t>(start), static_cast<std::int64_t>(start + length));
    return detail::slice(std::move(self), s);
  }

  template <class T>
  static Tensor from_flat(const std::vector<T>& v, const Shape& shape, Device device, const char* op) {
    if (shape.rank() != D) throw_rank(op, shape);
    if (shape.num_elements() != v.size())
      throw ShapeError(std::string("[") + op + "] value count differs from the shape; expected " +
                       std::to_string(shape.num_elements()) + " values for " + shape.to_string() + "; got " + std::to_string(v.size()));
    return Tensor(detail::from_values(TensorData::from<T>(v, shape), device, K::kKind, op));
  }
  template <class T>
  static Tensor from_nested(detail::Nested<T, D> v, Device device, const char* op) {
    std::vector<T> flat;
    Shape shape;
    for (std::size_t i = 0; i < D; ++i) shape.push_back(0);
    unsigned seen = 0;
    detail::flatten_nested<T, D>(v, flat, shape, seen, 0, op);
    return Tensor(detail::from_values(TensorData::from<T>(flat, shape), device, K::kKind, op));
  }

  Handle h_;
};

#undef TENSOR_METHOD
#undef TENSOR_METHOD_REQ
#undef TENSOR_NUM_METHOD
#undef TENSOR_FLOAT_METHOD
#undef TENSOR_INT_METHOD
#undef TENSOR_BOOL_METHOD

namespace detail {
template <std::size_t D, class K>
Handle copy(const Tensor<D, K>& t) { return retain(t.h_); }
}  // namespace detail

// Ranks 1-4 of every kind are instantiated once, in libtensor.so
// (lib/src/tensor_instances.cpp); user code calls those members instead of
// compiling its own copies. Higher ranks are instantiated where used: declaring
// them here too would cost every user file more than they save.
#define TENSOR_INSTANCES(X) \
  X class Tensor<1, Float>; X class Tensor<2, Float>; X class Tensor<3, Float>; X class Tensor<4, Float>; \
  X class Tensor<1, Int>; X class Tensor<2, Int>; X class Tensor<3, Int>; X class Tensor<4, Int>;         \
  X class Tensor<1, Bool>; X class Tensor<2, Bool>; X class Tensor<3, Bool>; X class Tensor<4, Bool>;
TENSOR_INSTANCES(extern template)

/// burn's set_print_options: how every later to_string / operator<< prints.
inline void set_print_options(const PrintOptions& o) { detail::set_print_options(o); }
/// The print options in effect (set_print_options' last value, else the defaults).
inline PrintOptions print_options() { return detail::print_options(); }

/// burn's Transaction: register tensors, then execute() reads them all back with one
/// wait (every read is queued before the first wait), in registration order.
class TENSOR_API Transaction {
 public:
  /// Adds `t` to the reads (its reference is kept until execute()); returns *this to chain.
  template <std::size_t D, TensorKind K> Transaction& register_(const Tensor<D, K>& t) {  // `register` is a C++ keyword
    hs_.push_back(detail::copy(t));
    return *this;
  }
  /// The number of registered tensors.
  std::size_t size() const { return hs_.size(); }
  /// Consumes the registered tensors (a second execute() returns an empty list).
  std::vector<TensorData> execute() { return detail::transaction(std::exchange(hs_, {})); }
  /// execute() with a failed read in the ReadResult instead of thrown (burn's try_execute).
  ReadResult<std::vector<TensorData>> try_execute() { return detail::try_read([&] { return execute(); }); }
  /// Queues every read and returns the pending results, in registration order.
  std::vector<DataFuture> execute_async() {
    std::vector<detail::Handle> hs = std::exchange(hs_, {});
    std::vector<DataFuture> out;
    out.reserve(hs.size());
    for (auto& h : hs) out.push_back(detail::into_data(std::move(h)));
    return out;
  }
  Transaction() = default;
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  ~Transaction() { for (auto& h : hs_) detail::release(h); }

 private:
  std::vector<detail::Handle> hs_;
};

/// Concatenates tensors of one rank along `dim` (empty tensors are skipped).
template <std::size_t D, TensorKind K>
Tensor<D, K> cat(const std::vector<Tensor<D, K>>& parts, std::int64_t dim) {
  std::vector<detail::Handle> hs;
  hs.reserve(parts.size());
  for (const auto& p : parts) hs.push_back(detail::copy(p));
  return Tensor<D, K>(detail::cat(std::move(hs), dim));
}

/// Stacks tensors of one shape along a new dim.
template <std::size_t D, TensorKind K>
Tensor<D + 1, K> stack(const std::vector<Tensor<D, K>>& parts, std::int64_t dim) {
  std::vector<Tensor<D + 1, K>> up;
  up.reserve(parts.size());
  for (const auto& p : parts) up.push_back(p.unsqueeze_dim(dim));
  return cat(up, dim);
}

// Activation functions (burn::tensor::activation).
namespace activation {
/// max(x, 0) elementwise (Float, as every activation here).
template <std::size_t D> Tensor<D> relu(const Tensor<D>& x) { return Tensor<D>(detail::unary(OpCode::relu, detail::copy(x))); }
/// x (1 + erf(x / sqrt 2)) / 2, the exact (erf) GELU.
template <std::size_t D> Tensor<D> gelu(const Tensor<D>& x) { return Tensor<D>(detail::unary(OpCode::gelu, detail::copy(x))); }
/// 1 / (1 + e^-x), without overflow.
template <std::size_t D> Tensor<D> sigmoid(const Tensor<D>& x) { return Tensor<D>(detail::unary(OpCode::sigmoid, detail::copy(x))); }
/// log(sigmoid(x)), without overflow.
template <std::size_t D> Tensor<D> log_sigmoid(const Tensor<D>& x) {
  return Tensor<D>(detail::unary(OpCode::log_sigmoid, detail::copy(x)));
}
/// Hyperbolic tangent (Tensor::tanh).
template <std::size_t D> Tensor<D> tanh(const Tensor<D>& x) { return x.tanh(); }
/// x < 0 ? slope x : x.
template <std::size_t D> Tensor<D> leaky_relu(const Tensor<D>& x, double slope) {
  return Tensor<D>(detail::scalar(OpCode::leaky_relu, detail::copy(x), Scalar(slope)));
}
/// x < 0 ? alpha x : x, `alpha` broadcast against x (ShapeError when it does not).
template <std::size_t D> Tensor<D> prelu(const Tensor<D>& x, const Tensor<D>& alpha) {
  return Tensor<D>(detail::binary(OpCode::prelu, detail::copy(x), detail::copy(alpha)));
}
/// clamp(alpha x + beta, 0, 1).
template <std::size_t D> Tensor<D> hard_sigmoid(const Tensor<D>& x, double alpha, double beta) {
  return Tensor<D>(detail::clamp(OpCode::hard_sigmoid, detail::copy(x), Scalar(alpha), Scalar(beta)));
}
/// exp(x - max) / sum(exp(x - max)) along `dim` (same shape; IndexError for a dim out of range).
template <std::size_t D> Tensor<D> softmax(const Tensor<D>& x, std::int64_t dim) {
  return Tensor<D>(detail::reduce_dim(OpCode::softmax, detail::copy(x), dim));
}
/// x - max - log(sum(exp(x - max))) along `dim`, computed stably.
template <std::size_t D> Tensor<D> log_softmax(const Tensor<D>& x, std::int64_t dim) {
  return Tensor<D>(detail::reduce_dim(OpCode::log_softmax, detail::copy(x), dim));
}
/// softmax(-x) along `dim`.
template <std::size_t D> Tensor<D> softmin(const Tensor<D>& x, std::int64_t dim) {
  return Tensor<D>(detail::reduce_dim(OpCode::softmin, detail::copy(x), dim));
}
}  // namespace activation

}  // namespace tensor
