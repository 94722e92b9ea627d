// CpuTensor storage, layouts and the strided copy behind to_contiguous (dims merged,
// inner-contiguous runs as memcpy, transposes in cache blocks).
#include "backends/cpu/cpu_tensor.hpp"

#include <algorithm>
#include <cstring>
#include <new>

#include "backends/cpu/strided.hpp"

namespace tensor::cpu {

StorageRef Storage::allocate(std::size_t bytes) {
  void* mem = ::operator new(kAlign + bytes, std::align_val_t{kAlign});
  return StorageRef::adopt(::new (mem) Storage(bytes));
}

void Storage::release_ref() const {
  if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    Storage* self = const_cast<Storage*>(this);
    self->~Storage();
    ::operator delete(static_cast<void*>(self), std::align_val_t{kAlign});
  }
}

Layout contiguous_layout(const Shape& shape) {
  Layout l;
  std::int64_t s = 1;
  for (std::size_t d = shape.rank(); d-- > 0;) {
    l.strides[d] = s;
    s *= static_cast<std::int64_t>(shape[d]);
  }
  return l;
}

bool CpuTensor::is_contiguous() const {
  std::int64_t expect = 1;
  for (std::size_t d = rank(); d-- > 0;) {
    const std::size_t n = shape_[d];
    if (n == 0) return true;
    if (n == 1) continue;
    if (layout_.strides[d] != expect) return false;
    expect *= static_cast<std::int64_t>(n);
  }
  return true;
}

CpuRef alloc_tensor(DType dtype, const Shape& shape) {
  return CpuRef::make(dtype, shape, Storage::allocate(shape.num_elements() * dtype_size(dtype)),
                      contiguous_layout(shape));
}

CpuRef alloc_zeroed(DType dtype, const Shape& shape) {
  CpuRef t = alloc_tensor(dtype, shape);
  if (const std::size_t n = t->storage()->size_bytes()) std::memset(t->storage()->data(), 0, n);
  return t;
}

CpuRef make_view(CpuRef src, const Shape& shape, const Layout& layout) {
  if (src->unique_ref()) {
    src->set_view(shape, layout);
    return src;
  }
  return CpuRef::make(src->dtype(), shape, src->storage_ref(), layout);
}

namespace {

// Copies one R x C tile grid where the destination is contiguous along columns and
// the source along rows (a transpose): 32 x 32 blocks keep both sides in cache.
template <class U>
void transpose_2d(std::byte* dst, const std::byte* src, std::size_t rows, std::size_t cols, std::int64_t drow,
                  std::int64_t srow, std::int64_t scol) {
  constexpr std::size_t kBlock = 16;
  for (std::size_t ib = 0; ib < rows; ib += kBlock) {
    const std::size_t ie = std::min(rows, ib + kBlock);
    for (std::size_t jb = 0; jb < cols; jb += kBlock) {
      const std::size_t je = std::min(cols, jb + kBlock);
      for (std::size_t i = ib; i < ie; ++i) {
        U* d = reinterpret_cast<U*>(dst + static_cast<std::int64_t>(i) * drow);
        const std::byte* s = src + static_cast<std::int64_t>(i) * srow;
        for (std::size_t j = jb; j < je; ++j) {
          U v;
          std::memcpy(&v, s + static_cast<std::int64_t>(j) * scol, sizeof(U));
          d[j] = v;
        }
      }
    }
  }
}

// The blocked path for plans whose two innermost dims are swapped between source
// and destination; false when the plan has another shape (caller does rows).
bool copy_transposed(const Plan<2>& plan, std::byte* dst, const std::byte* src, std::size_t e) {
  if (plan.empty || plan.rank < 2) return false;
  const std::size_t r = plan.rank;
  const auto ie = static_cast<std::int64_t>(e);
  const std::int64_t drow = plan.strides[0][r - 2], dcol = plan.strides[0][r - 1];
  const std::int64_t srow = plan.strides[1][r - 2], scol = plan.strides[1][r - 1];
  const std::size_t rows = plan.dims[r - 2], cols = plan.dims[r - 1];
  if (dcol != ie || srow != ie || scol == ie || rows < 8 || cols < 8) return false;
  // Walk the outer dims (if any) with a plan of rank r - 2.
  Plan<2> outer = plan;
  outer.rank = r - 2;
  auto tile = [&](std::byte* d, const std::byte* s) {
    switch (e) {
      case 1: transpose_2d<std::uint8_t>(d, s, rows, cols, drow, srow, scol); break;
      case 2: transpose_2d<std::uint16_t>(d, s, rows, cols, drow, srow, scol); break;
      case 4: transpose_2d<std::uint32_t>(d, s, rows, cols, drow, srow, scol); break;
      default: transpose_2d<std::uint64_t>(d, s, rows, cols, drow, srow, scol); break;
    }
  };
  for_each_row(outer, {dst, const_cast<std::byte*>(src)},
               [&](std::array<std::byte*, 2> p, std::size_t n, std::array<std::int64_t, 2> s) {
                 for (std::size_t i = 0; i < n; ++i, p[0] += s[0], p[1] += s[1]) tile(p[0], p[1]);
               });
  return true;
}

}  // namespace

void copy_strided(const CpuTensor& src, std::byte* dst) {
  copy_strided_to(src, dst, contiguous_layout(src.shape()).strides.data());
}

void copy_strided_to(const CpuTensor& src, std::byte* dst, const std::int64_t* dst_strides) {
  const Shape& shape = src.shape();
  const std::size_t e = src.elem_size();
  const auto plan = make_plan<2>(shape, {dst_strides, src.layout().strides.data()}, {e, e});
  if (copy_transposed(plan, dst, src.data(), e)) return;
  for_each_row(plan, {dst, src.data()}, [e](std::array<std::byte*, 2> p, std::size_t n, std::array<std::int64_t, 2> s) {
    const auto ie = static_cast<std::int64_t>(e);
    if (s[0] == ie && s[1] == ie) {
      std::memcpy(p[0], p[1], n * e);
      return;
    }
    auto copy = [&](auto tag) {
      using U = decltype(tag);
      std::byte* o = p[0];
      const std::byte* i = p[1];
      for (std::size_t j = 0; j < n; ++j, o += s[0], i += s[1]) {
        U v;
        std::memcpy(&v, i, sizeof(U));
        std::memcpy(o, &v, sizeof(U));
      }
    };
    switch (e) {
      case 1: copy(std::uint8_t{}); break;
      case 2: copy(std::uint16_t{}); break;
      case 4: copy(std::uint32_t{}); break;
      default: copy(std::uint64_t{}); break;
    }
  });
}

CpuRef to_contiguous(CpuRef src) {
  if (src->is_contiguous()) return src;
  CpuRef out = alloc_tensor(src->dtype(), src->shape());
  copy_strided(*src, out->data());
  return out;
}

}  // namespace tensor::cpu
