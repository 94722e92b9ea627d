// Compile-time benchmark reference: user_code.cpp's 16 generic functions x 12 ops x
// ranks 1-4, written against the smallest header any C++ tensor API with value
// semantics and exceptions can have (a 16-byte handle with a reference-counting copy,
// a releasing destructor, out-of-line methods and operators; no standard header).
// measure.sh compiles it beside user_code.cpp in the same run: the difference is
// what libtensor's headers cost; this file's time is the floor GCC needs for the
// calls, temporaries and exception cleanups of the code itself (about half of
// user_code.cpp's instructions under callgrind, 3.6 G of 6.8 G with g++ 12).
namespace floor_api {

using size_t = decltype(sizeof 0);
struct Handle { alignas(8) unsigned char bytes[16] = {}; };
Handle retain(const Handle&) noexcept;
void release(Handle&) noexcept;
struct Device { unsigned id = 0; };
struct Shape { size_t dims[8] = {}; size_t rank = 0; };

template <size_t D>
class Tensor {
 public:
  Tensor(const Tensor& o) noexcept : h_(retain(o.h_)) {}
  Tensor(Tensor&& o) noexcept : h_(o.h_) { o.h_ = Handle{}; }
  [[gnu::noinline]] Tensor& operator=(Tensor&& o) noexcept;
  ~Tensor() { release(h_); }
  [[gnu::noinline]] static Tensor ones(const Shape& s, Device d);
#define FLOOR_UNARY(n) [[gnu::noinline]] Tensor n() const&; [[gnu::noinline]] Tensor n() &&;
#define FLOOR_BINARY(n) [[gnu::noinline]] Tensor n(const Tensor&) const&; [[gnu::noinline]] Tensor n(const Tensor&) &&;
  FLOOR_UNARY(exp) FLOOR_UNARY(log) FLOOR_UNARY(neg) FLOOR_UNARY(transpose)
  FLOOR_BINARY(add) FLOOR_BINARY(sub) FLOOR_BINARY(mul) FLOOR_BINARY(div) FLOOR_BINARY(matmul)
#undef FLOOR_UNARY
#undef FLOOR_BINARY
  [[gnu::noinline]] Tensor sum_dim(long d) const&;
  [[gnu::noinline]] Tensor mean_dim(long d) const&;
  [[gnu::noinline]] Tensor swap_dims(long a, long b) const&;
  friend Tensor operator+(const Tensor& a, const Tensor& b) { return a.add(b); }
  friend Tensor operator+(Tensor&& a, const Tensor& b) { return static_cast<Tensor&&>(a).add(b); }
  friend Tensor operator-(const Tensor& a, const Tensor& b) { return a.sub(b); }
  friend Tensor operator-(Tensor&& a, const Tensor& b) { return static_cast<Tensor&&>(a).sub(b); }
  friend Tensor operator*(const Tensor& a, const Tensor& b) { return a.mul(b); }
  friend Tensor operator*(Tensor&& a, const Tensor& b) { return static_cast<Tensor&&>(a).mul(b); }
  friend Tensor operator/(const Tensor& a, const Tensor& b) { return a.div(b); }
  friend Tensor operator/(Tensor&& a, const Tensor& b) { return static_cast<Tensor&&>(a).div(b); }
  friend Tensor operator-(const Tensor& a) { return a.neg(); }
  friend Tensor operator-(Tensor&& a) { return static_cast<Tensor&&>(a).neg(); }

 private:
  Handle h_;
};

}  // namespace floor_api

#include <vector>  // user_code.cpp's make<D> builds its shape from a std::vector too

namespace user {

using floor_api::Device;
using floor_api::Tensor;

template <std::size_t D>
Tensor<D> make(const Device& device) {
  const std::vector<floor_api::size_t> dims(D, 2);
  floor_api::Shape s;
  for (floor_api::size_t i = 0; i < dims.size(); ++i) s.dims[s.rank++] = dims[i];
  return Tensor<D>::ones(s, device);
}

#include "user_steps.inc"

}  // namespace user
