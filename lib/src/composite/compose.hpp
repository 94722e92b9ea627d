// The one compose vocabulary of lib/src/composite/: burn's composite methods are composed
// from the op table's ops through the detail:: entry points (so every device has them and
// autodiff sees only ops it knows), with an owning handle H and short names for the ops
// they call. An error raised by an inner op is re-raised by named() as the same type,
// naming the method the user called.
#pragma once

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "tensor/detail.hpp"
#include "tensor/error.hpp"

namespace tensor::detail::compose {

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

inline H un(OpCode op, const H& a) { return H(unary(op, a.r())); }
inline H bin(OpCode op, const H& a, const H& b) { return H(binary(op, a.r(), b.r())); }
inline H sc(OpCode op, const H& a, Scalar s) { return H(scalar(op, a.r(), s)); }
inline H rdim(OpCode op, const H& a, std::size_t d) { return H(reduce_dim(op, a.r(), static_cast<std::int64_t>(d))); }
inline H lit_reshape(const H& a, const Shape& s) {
  std::vector<std::int64_t> v(s.begin(), s.end());
  return H(reshape(OpCode::reshape, a.r(), v));
}
inline H slice_dim(const H& a, std::size_t d, Slice s) {
  std::vector<Slice> sl(d + 1);
  sl[d] = s;
  return H(slice(a.r(), sl));
}

inline std::string rename(const char* method, const std::string& msg) {
  const std::string tag = std::string("[") + method + "]";
  if (msg.rfind(tag, 0) == 0) return msg;
  const std::size_t p = msg.find("] ");
  if (!msg.empty() && msg[0] == '[' && p != std::string::npos)
    return tag + " " + msg.substr(p + 2) + " (in " + msg.substr(1, p - 1) + ")";
  return tag + " " + msg;
}

// Runs f, re-raising a library error as the same type with the method's name.
template <class F>
inline auto named(const char* method, F&& f) -> decltype(f()) {
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

inline std::size_t rdim_of(const char* op, std::int64_t dim, std::size_t rank) {
  const auto r = static_cast<std::int64_t>(rank);
  const std::int64_t d = dim < 0 ? dim + r : dim;
  if (d < 0 || d >= r)
    throw IndexError(std::string("[") + op + "] dim out of range; expected " + std::to_string(-r) + ".." +
                     std::to_string(r - 1) + " for rank " + std::to_string(rank) + "; got " + std::to_string(dim));
  return static_cast<std::size_t>(d);
}

inline void check_out_rank(const char* op, std::size_t got, std::size_t want, const Shape& s) {
  if (got != want)
    throw ShapeError(std::string("[") + op + "] result rank differs from the requested rank; expected rank " +
                     std::to_string(want) + "; got rank " + std::to_string(got) + " from shape " + s.to_string());
}

inline H int_arange(std::size_t n, Device dev) { return H(arange(0, static_cast<std::int64_t>(n), 1, dev, std::nullopt)); }

// `n` along dim `d` of a rank-`rank` shape of ones.
inline Shape along(std::size_t rank, std::size_t d, std::size_t n) {
  Shape s;
  for (std::size_t i = 0; i < rank; ++i) s.push_back(i == d ? n : 1);
  return s;
}

// Takes ownership of a handle argument, leaving it empty.
inline H take_h(Handle& h) noexcept { return H(std::exchange(h, Handle{})); }

// The shape with dim `d` replaced by `n`.
inline Shape with_dim(Shape s, std::size_t d, std::size_t n) {
  s[d] = n;
  return s;
}

// Resolved, sorted, distinct dims.
inline std::vector<std::size_t> dims_of(const char* op, DimList dims, std::size_t rank) {
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < dims.n; ++i) out.push_back(rdim_of(op, dims.p[i], rank));
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

inline H norm_of(const H& x, double p, std::size_t d) {
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


}  // namespace tensor::detail::compose
