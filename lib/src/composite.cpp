// burn's composite Tensor methods (shape helpers, statistics, predicates,
// activations, norms, losses), composed from the op table's ops through the
// detail:: entry points, so every device has them and autodiff sees only ops it
// knows. Compiled once in libtensor.so: user code sees only the declarations in
// detail.hpp (the compile firewall). An error raised by an inner op is re-raised
// as the same type, naming the method the user called.
#include <algorithm>
#include <cmath>
#include <numbers>
#include <string>
#include <utility>
#include <vector>

#include "tensor/detail.hpp"
#include "tensor/error.hpp"
#include "lapack.hpp"

namespace tensor::detail {
namespace {

// An owning handle (released on every path, exceptions included).
struct H {
  Handle h;
  H() = default;
  explicit H(Handle x) noexcept : h(x) {}
  H(const H& o) noexcept : h(retain(o.h)) {}
  H(H&& o) noexcept : h(std::exchange(o.h, Handle{})) {}
  H& operator=(H o) noexcept { std::swap(h, o.h); return *this; }
  ~H() { release(h); }
  Handle r() const { return retain(h); }  // a new reference
  Handle take() noexcept { return std::exchange(h, Handle{}); }
  Shape shape() const { return detail::shape(h); }
};

H un(OpCode op, const H& a) { return H(unary(op, a.r())); }
H bin(OpCode op, const H& a, const H& b) { return H(binary(op, a.r(), b.r())); }
H sc(OpCode op, const H& a, Scalar s) { return H(scalar(op, a.r(), s)); }
H rdim(OpCode op, const H& a, std::size_t d) { return H(reduce_dim(op, a.r(), static_cast<std::int64_t>(d))); }
H lit_reshape(const H& a, const Shape& s) {
  std::vector<std::int64_t> v(s.begin(), s.end());
  return H(reshape(OpCode::reshape, a.r(), v));
}
H slice_dim(const H& a, std::size_t d, Slice s) {
  std::vector<Slice> sl(d + 1);
  sl[d] = s;
  return H(slice(a.r(), sl));
}

std::string rename(const char* method, const std::string& msg) {
  const std::string tag = std::string("[") + method + "]";
  if (msg.rfind(tag, 0) == 0) return msg;
  const std::size_t p = msg.find("] ");
  if (!msg.empty() && msg[0] == '[' && p != std::string::npos)
    return tag + " " + msg.substr(p + 2) + " (in " + msg.substr(1, p - 1) + ")";
  return tag + " " + msg;
}

// Runs f, re-raising a library error as the same type with the method's name.
template <class F>
auto named(const char* method, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const ShapeError& e) {
    throw ShapeError(rename(method, e.what()));
  } catch (const DTypeError& e) {
    throw DTypeError(rename(method, e.what()));
  } catch (const DeviceError& e) {
    throw DeviceError(e.kind(), rename(method, e.what()));
  } catch (const IndexError& e) {
    throw IndexError(rename(method, e.what()));
  } catch (const NotImplemented& e) {
    throw NotImplemented(rename(method, e.what()));
  } catch (const ExecutionError& e) {
    throw ExecutionError(rename(method, e.what()));
  } catch (const Error& e) {
    throw Error(rename(method, e.what()));
  }
}

std::size_t rdim_of(const char* op, std::int64_t dim, std::size_t rank) {
  const auto r = static_cast<std::int64_t>(rank);
  const std::int64_t d = dim < 0 ? dim + r : dim;
  if (d < 0 || d >= r)
    throw IndexError(std::string("[") + op + "] dim out of range; expected " + std::to_string(-r) + ".." +
                     std::to_string(r - 1) + " for rank " + std::to_string(rank) + "; got " + std::to_string(dim));
  return static_cast<std::size_t>(d);
}

void check_out_rank(const char* op, std::size_t got, std::size_t want, const Shape& s) {
  if (got != want)
    throw ShapeError(std::string("[") + op + "] result rank differs from the requested rank; expected rank " +
                     std::to_string(want) + "; got rank " + std::to_string(got) + " from shape " + s.to_string());
}

H int_arange(std::size_t n, Device dev) { return H(arange(0, static_cast<std::int64_t>(n), 1, dev, std::nullopt)); }

// `n` along dim `d` of a rank-`rank` shape of ones.
Shape along(std::size_t rank, std::size_t d, std::size_t n) {
  Shape s;
  for (std::size_t i = 0; i < rank; ++i) s.push_back(i == d ? n : 1);
  return s;
}

const char* name_of(Composite c) {
  switch (c) {
    case Composite::is_finite: return "is_finite";
    case Composite::contains_nan: return "contains_nan";
    case Composite::silu: return "silu";
    case Composite::relu6: return "relu6";
    case Composite::hard_swish: return "hard_swish";
    case Composite::gelu_approximate: return "gelu_approximate";
    case Composite::mish: return "mish";
    case Composite::softsign: return "softsign";
    case Composite::tanhshrink: return "tanhshrink";
    case Composite::selu: return "selu";
    case Composite::deg2rad: return "deg2rad";
    case Composite::rad2deg: return "rad2deg";
    case Composite::softplus: return "softplus";
    case Composite::elu: return "elu";
    case Composite::celu: return "celu";
    case Composite::hardtanh: return "hardtanh";
    case Composite::hard_shrink: return "hard_shrink";
    case Composite::soft_shrink: return "soft_shrink";
    case Composite::threshold: return "threshold";
    case Composite::thresholded_relu: return "thresholded_relu";
    case Composite::sum_dims: return "sum_dims";
    case Composite::mean_dims: return "mean_dims";
    case Composite::prod_dims: return "prod_dims";
    case Composite::max_dims: return "max_dims";
    case Composite::min_dims: return "min_dims";
    case Composite::max_abs_dims: return "max_abs_dims";
    case Composite::var: return "var";
    case Composite::var_bias: return "var_bias";
    case Composite::vector_norm: return "vector_norm";
    case Composite::vector_normalize: return "vector_normalize";
    case Composite::dot: return "dot";
    case Composite::is_close: return "is_close";
    case Composite::cosine_similarity: return "cosine_similarity";
    case Composite::cross_entropy_with_logits: return "cross_entropy_with_logits";
    case Composite::fmod: return "fmod";
    case Composite::glu: return "glu";
    case Composite::cov: return "cov";
    case Composite::quiet_softmax: return "quiet_softmax";
    case Composite::diag: return "diag";
    case Composite::trace: return "trace";
    case Composite::outer: return "outer";
    case Composite::matvec: return "matvec";
    case Composite::outer_dim: return "outer_dim";
    case Composite::prelu: return "prelu";
  }
  return "composite";
}

// Resolved, sorted, distinct dims.
std::vector<std::size_t> dims_of(const char* op, DimList dims, std::size_t rank) {
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < dims.n; ++i) out.push_back(rdim_of(op, dims.p[i], rank));
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

H norm_of(const H& x, double p, std::size_t d) {
  if (p == 0) {  // L0: the count of nonzero elements, in x's dtype
    const H nz = H(compare_scalar(OpCode::not_equal_elem, x.r(), Scalar(0.0)));
    const H f = H(cast(OpCode::into_float, nz.r(), dtype(x.h)));
    return rdim(OpCode::sum_dim, f, d);
  }
  if (std::isinf(p)) return p > 0 ? rdim(OpCode::max_abs_dim, x, d) : rdim(OpCode::min_dim, un(OpCode::abs, x), d);
  if (p == 1) return rdim(OpCode::sum_dim, un(OpCode::abs, x), d);
  if (p == 2) return un(OpCode::sqrt, rdim(OpCode::sum_dim, bin(OpCode::mul, x, x), d));
  const H s = rdim(OpCode::sum_dim, sc(OpCode::powf_scalar, un(OpCode::abs, x), Scalar(p)), d);
  return sc(OpCode::powf_scalar, s, Scalar(1.0 / p));
}

}  // namespace

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

Handle composite(Composite c, Handle&& a_, double p, double q) {
  H x(a_);
  a_ = Handle{};
  return named(name_of(c), [&]() -> Handle {
    switch (c) {
      case Composite::is_finite: {
        const H bad = bin(OpCode::bool_or, H(predicate(OpCode::is_nan, x.r())), H(predicate(OpCode::is_inf, x.r())));
        return unary(OpCode::bool_not, bad.r());
      }
      case Composite::contains_nan: return any_all(OpCode::any, predicate(OpCode::is_nan, x.r()));
      case Composite::silu: return binary(OpCode::mul, x.r(), unary(OpCode::sigmoid, x.r()));
      case Composite::relu6: return clamp(OpCode::clamp, x.r(), Scalar(0.0), Scalar(6.0));
      case Composite::hard_swish: {
        const H r6 = H(clamp(OpCode::clamp, scalar(OpCode::add_scalar, x.r(), Scalar(3.0)), Scalar(0.0), Scalar(6.0)));
        return scalar(OpCode::div_scalar, binary(OpCode::mul, x.r(), r6.r()), Scalar(6.0));
      }
      case Composite::gelu_approximate: {  // 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))
        const H x3 = bin(OpCode::mul, bin(OpCode::mul, x, x), x);
        const H in = sc(OpCode::mul_scalar, bin(OpCode::add, x, sc(OpCode::mul_scalar, x3, Scalar(0.044715))),
                        Scalar(std::sqrt(2.0 / std::numbers::pi)));
        const H t = sc(OpCode::add_scalar, un(OpCode::tanh, in), Scalar(1.0));
        return scalar(OpCode::mul_scalar, binary(OpCode::mul, x.r(), t.r()), Scalar(0.5));
      }
      case Composite::softplus: {  // log(1 + e^(beta x)) / beta, as relu(bx) + log1p(e^-|bx|) (no overflow)
        const H bx = sc(OpCode::mul_scalar, x, Scalar(p));
        const H t = un(OpCode::log1p, un(OpCode::exp, un(OpCode::neg, un(OpCode::abs, bx))));
        return scalar(OpCode::div_scalar, binary(OpCode::add, unary(OpCode::relu, bx.r()), t.r()), Scalar(p));
      }
      case Composite::mish: {  // x tanh(softplus(x))
        const H sp = H(composite(Composite::softplus, x.r(), 1.0, 0.0));
        return binary(OpCode::mul, x.r(), unary(OpCode::tanh, sp.r()));
      }
      case Composite::softsign:
        return binary(OpCode::div, x.r(), scalar(OpCode::add_scalar, unary(OpCode::abs, x.r()), Scalar(1.0)));
      case Composite::tanhshrink: return binary(OpCode::sub, x.r(), unary(OpCode::tanh, x.r()));
      case Composite::elu:
      case Composite::celu:
      case Composite::selu: {
        // x > 0 ? x : alpha (e^(x / s) - 1) (elu: s = 1; celu: s = alpha; selu: fixed alpha, scale).
        const double alpha = c == Composite::selu ? 1.6732632423543772848170429916717 : p;
        const double s = c == Composite::celu ? p : 1.0;
        const H neg = sc(OpCode::clamp_max, x, Scalar(0.0));
        H e = sc(OpCode::mul_scalar, sc(OpCode::sub_scalar, un(OpCode::exp, sc(OpCode::div_scalar, neg, Scalar(s))), Scalar(1.0)),
                 Scalar(alpha));
        H out = H(mask_where(x.r(), compare_scalar(OpCode::lower_equal_elem, x.r(), Scalar(0.0)), e.r()));
        if (c == Composite::selu) out = sc(OpCode::mul_scalar, out, Scalar(1.0507009873554804934193349852946));
        return out.take();
      }
      case Composite::hardtanh: return clamp(OpCode::clamp, x.r(), Scalar(p), Scalar(q));
      case Composite::hard_shrink: {  // |x| > lambda ? x : 0
        const H keep = H(compare_scalar(OpCode::lower_equal_elem, unary(OpCode::abs, x.r()), Scalar(p)));
        return mask_fill(x.r(), keep.r(), Scalar(0.0));
      }
      case Composite::soft_shrink: {  // x > l ? x - b : x < -l ? x + b : 0 (soft_shrink: b = l; shrink)
        const H small = H(compare_scalar(OpCode::lower_equal_elem, unary(OpCode::abs, x.r()), Scalar(p)));
        const H shrunk = bin(OpCode::sub, x, sc(OpCode::mul_scalar, un(OpCode::sign, x), Scalar(q)));
        return mask_fill(shrunk.r(), small.r(), Scalar(0.0));
      }
      case Composite::threshold: {  // x > threshold ? x : value
        const H low = H(compare_scalar(OpCode::lower_equal_elem, x.r(), Scalar(p)));
        return mask_fill(x.r(), low.r(), Scalar(q));
      }
      case Composite::thresholded_relu: {  // x > alpha ? x : 0
        const H low = H(compare_scalar(OpCode::lower_equal_elem, x.r(), Scalar(p)));
        return mask_fill(x.r(), low.r(), Scalar(0.0));
      }
      case Composite::diag:
      case Composite::trace: {  // the diagonal of the last two dims (off-diagonal zeroed, then summed per row)
        const Shape s = x.shape();
        if (s.rank() < 2)
          throw ShapeError(std::string("[") + name_of(c) + "] expected a tensor of rank >= 2; got shape " + s.to_string());
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
        if (c == Composite::trace) {  // [.., k, 1] summed over k -> [.., 1]
          out[r - 2] = 1;
          return lit_reshape(rdim(OpCode::sum_dim, d, r - 2), out).take();
        }
        return lit_reshape(d, out).take();
      }
      case Composite::deg2rad: return scalar(OpCode::mul_scalar, x.r(), Scalar(std::numbers::pi / 180.0));
      case Composite::rad2deg: return scalar(OpCode::mul_scalar, x.r(), Scalar(180.0 / std::numbers::pi));
      default: break;
    }
    throw Error(std::string("[") + name_of(c) + "] not a one-tensor composite; expected one; got another form");
  });
}

Handle composite_dims(Composite c, Handle&& a_, DimList dims, double p, double q) {
  H x(a_);
  a_ = Handle{};
  const char* op = name_of(c);
  const Shape s = x.shape();
  const std::vector<std::size_t> ds = dims_of(op, dims, s.rank());
  if ((c == Composite::var || c == Composite::var_bias || c == Composite::vector_norm || c == Composite::vector_normalize ||
       c == Composite::glu || c == Composite::quiet_softmax || c == Composite::cov) &&
      ds.size() != 1)
    throw ShapeError(std::string("[") + op + "] expected one dim; got " + std::to_string(ds.size()));
  return named(op, [&]() -> Handle {
    switch (c) {
      case Composite::sum_dims:
      case Composite::prod_dims:
      case Composite::max_dims:
      case Composite::min_dims:
      case Composite::max_abs_dims: {
        const OpCode r = c == Composite::sum_dims   ? OpCode::sum_dim
                         : c == Composite::prod_dims ? OpCode::prod_dim
                         : c == Composite::max_dims  ? OpCode::max_dim
                         : c == Composite::min_dims  ? OpCode::min_dim
                                                     : OpCode::max_abs_dim;
        for (std::size_t d : ds) x = rdim(r, x, d);
        return x.take();
      }
      case Composite::mean_dims: {
        std::size_t n = 1;
        for (std::size_t d : ds) n *= s[d];
        if (kind(x.h) == Kind::Int && n == 0)
          throw ShapeError("[mean_dims] expected non-empty dims for an int tensor; got shape " + s.to_string());
        for (std::size_t d : ds) x = rdim(OpCode::sum_dim, x, d);
        if (ds.empty()) return x.take();
        return kind(x.h) == Kind::Int ? scalar(OpCode::div_scalar, x.r(), Scalar(static_cast<std::int64_t>(n)))
                                      : scalar(OpCode::div_scalar, x.r(), Scalar(static_cast<double>(n)));
      }
      case Composite::var:
      case Composite::var_bias: {
        const std::size_t d = ds[0];
        const H diff = bin(OpCode::sub, x, rdim(OpCode::mean_dim, x, d));
        const H ss = rdim(OpCode::sum_dim, bin(OpCode::mul, diff, diff), d);
        const double n = static_cast<double>(s[d]) - (c == Composite::var ? 1.0 : 0.0);
        return scalar(OpCode::div_scalar, ss.r(), Scalar(n));
      }
      case Composite::glu: {  // first half * sigmoid(second half) along dim
        const std::size_t d = ds[0], n = s[d];
        if (n % 2 != 0)
          throw ShapeError("[glu] the dim must split in halves; expected an even size; got " + std::to_string(n) + " in dim " +
                           std::to_string(d) + " of " + s.to_string());
        const auto h = static_cast<std::int64_t>(n / 2);
        const H a = slice_dim(x, d, Slice::range(0, h)), b = slice_dim(x, d, Slice::range(h, 2 * h));
        return binary(OpCode::mul, a.r(), unary(OpCode::sigmoid, b.r()));
      }
      case Composite::quiet_softmax: {  // e^x / (1 + sum e^x), as e^(x - m) / (e^-m + sum e^(x - m))
        const std::size_t d = ds[0];
        const H m = rdim(OpCode::max_dim, un(OpCode::detach, x), d);
        const H e = un(OpCode::exp, bin(OpCode::sub, x, m));
        const H den = bin(OpCode::add, rdim(OpCode::sum_dim, e, d), un(OpCode::exp, un(OpCode::neg, m)));
        return binary(OpCode::div, e.r(), den.r());
      }
      case Composite::cov: {  // burn's form: c = (x - mean along dim) with dim swapped to 0; c^T c / (n - correction)
        // (c^T swaps the last two dims, so for rank > 2 the leading dims are batch dims
        // of the product: [4, 2, 4] along 0 gives [4, 4, 4], as burn.)
        const std::size_t d = ds[0], r = s.rank();
        if (r < 2) throw ShapeError("[cov] expected a tensor of rank >= 2; got shape " + s.to_string());
        H c = bin(OpCode::sub, x, rdim(OpCode::mean_dim, x, d));
        if (d != 0) c = H(swap_dims(c.r(), static_cast<std::int64_t>(d), 0));
        const H ct = H(swap_dims(c.r(), static_cast<std::int64_t>(r - 2), static_cast<std::int64_t>(r - 1)));
        return scalar(OpCode::div_scalar, matmul(ct.r(), c.r()), Scalar(static_cast<double>(s[d]) - p));
      }
      case Composite::vector_norm: return norm_of(x, p, ds[0]).take();
      case Composite::vector_normalize:
        return binary(OpCode::div, x.r(), scalar(OpCode::clamp_min, norm_of(x, p, ds[0]).take(), Scalar(q)));
      default: break;
    }
    throw Error(std::string("[") + op + "] not a dims composite; expected one; got another form");
  });
}

std::pair<Handle, Handle> var_mean(Handle&& a_, std::int64_t dim, bool biased) {
  H x(a_);
  a_ = Handle{};
  const char* op = biased ? "var_mean_bias" : "var_mean";
  const Shape s = x.shape();
  const std::size_t d = rdim_of(op, dim, s.rank());
  return named(op, [&] {
    H mean = rdim(OpCode::mean_dim, x, d);
    const H diff = bin(OpCode::sub, x, mean);
    const H ss = rdim(OpCode::sum_dim, bin(OpCode::mul, diff, diff), d);
    H var = sc(OpCode::div_scalar, ss, Scalar(static_cast<double>(s[d]) - (biased ? 0.0 : 1.0)));
    return std::pair<Handle, Handle>(var.take(), mean.take());
  });
}

Handle composite2(Composite c, Handle&& a_, Handle&& b_, std::int64_t dim, double p, double q) {
  H a(a_), b(b_);
  a_ = Handle{};
  b_ = Handle{};
  const char* op = name_of(c);
  const Shape sa = a.shape(), sb = b.shape();
  if ((c == Composite::dot || c == Composite::cross_entropy_with_logits) && !(sa == sb))
    throw ShapeError(std::string("[") + op + "] operand shapes differ; expected " + sa.to_string() + "; got " + sb.to_string());
  return named(op, [&]() -> Handle {
    switch (c) {
      case Composite::dot: return reduce(OpCode::sum, binary(OpCode::mul, a.r(), b.r()));
      case Composite::is_close: {  // |a - b| <= atol + rtol |b| where both are finite, or equal
        // An infinity is close only to itself: the tolerance (itself infinite when b is)
        // must not make inf and -inf close.
        const H diff = un(OpCode::abs, bin(OpCode::sub, a, b));
        const H tol = sc(OpCode::add_scalar, sc(OpCode::mul_scalar, un(OpCode::abs, b), Scalar(p)), Scalar(q));
        const H near = H(compare(OpCode::lower_equal, diff.r(), tol.r()));
        const H inf = bin(OpCode::bool_or, H(predicate(OpCode::is_inf, a.r())), H(predicate(OpCode::is_inf, b.r())));
        const H finite_near = bin(OpCode::bool_and, near, un(OpCode::bool_not, inf));
        return binary(OpCode::bool_or, finite_near.r(), compare(OpCode::equal, a.r(), b.r()));
      }
      case Composite::cosine_similarity: {  // dot / max(|a| |b|, eps) along dim
        const std::size_t d = rdim_of(op, dim, sa.rank());
        const H dotp = rdim(OpCode::sum_dim, bin(OpCode::mul, a, b), d);
        const H den = bin(OpCode::mul, norm_of(a, 2, d), norm_of(b, 2, d));
        return binary(OpCode::div, dotp.r(), scalar(OpCode::clamp_min, den.r(), Scalar(p)));
      }
      case Composite::cross_entropy_with_logits: {  // -mean(sum(targets * log_softmax(logits, last), last))
        const std::size_t last = sa.rank() - 1;
        const H ls = H(reduce_dim(OpCode::log_softmax, a.r(), static_cast<std::int64_t>(last)));
        const H s = rdim(OpCode::sum_dim, bin(OpCode::mul, ls, b), last);
        return unary(OpCode::neg, reduce(OpCode::mean, s.r()));
      }
      case Composite::outer:
      case Composite::outer_dim: {  // a[.., i, ..] * b[.., j, ..] at dims (d, d + 1), the other dims broadcast
        if (sa.rank() != sb.rank())
          throw ShapeError(std::string("[") + op + "] operands of one rank; expected rank " + std::to_string(sa.rank()) + "; got " +
                           sa.to_string() + " and " + sb.to_string());
        if (sa.rank() + 1 > kMaxRank)
          throw ShapeError(std::string("[") + op + "] expected a rank below " + std::to_string(kMaxRank) + "; got " + sa.to_string());
        if (kind(a.h) == Kind::Bool) throw DTypeError(std::string("[") + op + "] expected Float or Int tensors; got Bool");
        const std::size_t d = rdim_of(op, c == Composite::outer ? -1 : dim, sa.rank());
        Shape ua = sa, ub = sb;
        ua.insert(d + 1, 1);
        ub.insert(d, 1);
        return binary(OpCode::mul, lit_reshape(a, ua).take(), lit_reshape(b, ub).take());
      }
      case Composite::prelu: {  // alpha [1] or [C] along dim 1 of x
        const std::size_t n = sb.rank() == 1 ? sb[0] : 0;
        if (sb.rank() != 1 || !(n == 1 || (sa.rank() >= 2 && n == sa[1])))
          throw ShapeError("[prelu] expected weights of shape [1] or [C] with C the size of dim 1; got weights " + sb.to_string() +
                           " for input " + sa.to_string());
        Shape ws;
        for (std::size_t i = 0; i < sa.rank(); ++i) ws.push_back(i == 1 ? n : 1);
        return binary(OpCode::prelu, a.r(), lit_reshape(b, ws).take());
      }
      case Composite::matvec: {  // [.., m, n] x [.., n] -> [.., m]
        if (sa.rank() < 2 || sb.rank() + 1 != sa.rank())
          throw ShapeError("[matvec] expected a matrix [.., m, n] and a vector [.., n] of one rank less; got " + sa.to_string() +
                           " and " + sb.to_string());
        Shape vs = sb;
        vs.push_back(1);
        const H r = H(matmul(a.r(), lit_reshape(b, vs).take()));
        Shape out = r.shape();
        out.erase(out.rank() - 1);
        return lit_reshape(r, out).take();
      }
      case Composite::fmod: {  // a - trunc(a / b) b (the sign of a, as C's fmod)
        // Where the quotient truncates to zero the result is a itself: so a finite a
        // over an infinite b is a (burn), not a - 0 * inf = NaN.
        const H t = un(OpCode::trunc, bin(OpCode::div, a, b));
        const H tb = H(mask_fill(binary(OpCode::mul, t.r(), b.r()), compare_scalar(OpCode::equal_elem, t.r(), Scalar(0.0)),
                                 Scalar(0.0)));
        return binary(OpCode::sub, a.r(), tb.r());
      }
      default: break;
    }
    throw Error(std::string("[") + op + "] not a two-tensor composite; expected one; got another form");
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

std::pair<Handle, Handle> median(Handle&& a_, std::int64_t dim, const char* op) {
  H a(a_);
  a_ = Handle{};
  const Shape s = a.shape();
  const std::size_t d = rdim_of(op, dim, s.rank());
  if (s[d] == 0)
    throw ShapeError(std::string("[") + op + "] expected a non-empty dim; got shape " + s.to_string() + " along dim " +
                     std::to_string(d));
  return named(op, [&] {
    auto [v, i] = sort_with_indices(a.r(), static_cast<std::int64_t>(d), false);
    const H vs(v), is(i);
    const auto m = static_cast<std::int64_t>((s[d] - 1) / 2);
    H mv = slice_dim(vs, d, Slice::index(m)), mi = slice_dim(is, d, Slice::index(m));
    return std::pair<Handle, Handle>(mv.take(), mi.take());
  });
}

}  // namespace tensor::detail

// ---- issue 17, second part -------------------------------------------------------------

namespace tensor::detail {
namespace {

H take_h(Handle& h) noexcept { return H(std::exchange(h, Handle{})); }

// The shape with dim `d` replaced by `n`.
Shape with_dim(Shape s, std::size_t d, std::size_t n) {
  s[d] = n;
  return s;
}


}  // namespace

Handle from_values(TensorData data, Device dev, Kind k, const char* op) {
  return named(op, [&] {
    if (k == Kind::Float) data = data.convert(to_dtype(dev.settings().float_dtype));
    else if (k == Kind::Int) data = data.convert(to_dtype(dev.settings().int_dtype));
    return from_data(std::move(data), dev, k);
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
    const bool finite = into_scalar(any_all(OpCode::all, composite(Composite::is_finite, a.r()))).to_bool();
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

// ---- det / lu / qr: small (batched) matrices, composed from tensor ops ----------------

namespace tensor::detail {
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
    const H d = rdim(OpCode::prod_dim, H(composite(Composite::diag, p.lu.r())), 1);  // [B, 1]
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
    const H d = H(composite(Composite::diag, rk.r()));  // [B, k]
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
