// CpuTensor: the CPU backend's one primitive for every kind (burn-flex's FlexTensor):
// a counted 64-byte-aligned byte buffer plus a strided Layout and a runtime dtype.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <span>

#include "dispatch/primitive.hpp"
#include "lib/core/strided.hpp"
#include "tensor/device.hpp"
#include "tensor/dtype.hpp"
#include "tensor/shape.hpp"

namespace tensor::cpu {

inline constexpr DeviceId kCpuDevice{kCpuDeviceType, 0};

// Header and bytes in one 64-byte-aligned allocation; the bytes start 64 bytes in,
// so they are 64-byte aligned too. Counted intrusively (dispatch::Ref<Storage>).
// Small buffers come from malloc (its thread cache is far cheaper than aligned
// operator new); large ones are 2 MiB-aligned mappings (transparent huge pages)
// that go back to a bounded, size-bucketed cache when freed, so a large op that
// allocates its output reuses pages that are already faulted in.
class Storage {
 public:
  static constexpr std::size_t kAlign = 64;

  // A fresh buffer of `bytes` bytes (uninitialised), refcount 1.
  static dispatch::Ref<Storage> allocate(std::size_t bytes);
  // As allocate(), with every byte zero (skips the memset for fresh mappings).
  static dispatch::Ref<Storage> allocate_zeroed(std::size_t bytes);

  std::byte* data() { return reinterpret_cast<std::byte*>(this) + kAlign; }
  const std::byte* data() const { return reinterpret_cast<const std::byte*>(this) + kAlign; }
  std::size_t size_bytes() const { return bytes_; }
  bool unique() const { return refs_.load(std::memory_order_acquire) == 1; }

  void add_ref() const { refs_.fetch_add(1, std::memory_order_relaxed); }
  void release_ref() const;

  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

 private:
  Storage(std::size_t bytes, std::size_t mapped, void* raw) : bytes_(bytes), mapped_(mapped), raw_(raw) {}
  ~Storage() = default;
  static dispatch::Ref<Storage> allocate_impl(std::size_t bytes, bool zeroed);

  mutable std::atomic<std::uint32_t> refs_{1};
  std::size_t bytes_;
  std::size_t mapped_;  // bytes of the mapping (large buffers), 0 for malloc'd ones
  void* raw_;           // what malloc returned (small buffers)
};
static_assert(sizeof(Storage) <= Storage::kAlign);

using StorageRef = dispatch::Ref<Storage>;

// Signed element strides and a start offset in elements (shape lives in Primitive).
using Layout = dispatch::StridedLayout;
using dispatch::contiguous_layout;

class CpuTensor final : public dispatch::Primitive {
 public:
  CpuTensor(DType dtype, const Shape& shape, StorageRef storage, const Layout& layout)
      : Primitive(dtype, shape, kCpuDevice), storage_(std::move(storage)), layout_(layout) {}

  // This handle is the only reference to the primitive and to its storage.
  bool can_mut() const override { return unique_ref() && storage_->unique(); }

  const Layout& layout() const { return layout_; }
  std::span<const std::int64_t> strides() const { return {layout_.strides.data(), rank()}; }
  std::int64_t stride(std::size_t d) const { return layout_.strides[d]; }
  std::int64_t offset() const { return layout_.offset; }
  std::size_t elem_size() const { return dtype_size(dtype_); }

  Storage* storage() const { return storage_.get(); }
  const StorageRef& storage_ref() const { return storage_; }
  // Address of the element at the start offset (index 0 of every dim).
  // An empty view may keep an offset past its buffer, even one whose byte count overflows
  // (a libFuzzer finding: 2^62 - 1 elements of f32, signed overflow); nothing is read there.
  std::byte* data() const {
    const auto off = static_cast<std::uint64_t>(layout_.offset);
    if (off > storage_->size_bytes()) return storage_->data();
    return storage_->data() + static_cast<std::int64_t>(off * elem_size());
  }

  // Row-major with positive strides (dims of size 1 ignored); the offset may be nonzero.
  bool is_contiguous() const;
  // Contiguous and starting at offset 0: the layout a fresh tensor of this shape has.
  bool is_dense_from_zero() const { return layout_.offset == 0 && is_contiguous(); }

  // Rewrites shape, strides and offset (views reuse a uniquely held primitive).
  void set_view(const Shape& shape, const Layout& layout) { shape_ = shape; layout_ = layout; }
  // Relabels the element type (same element size only; used to reuse a buffer).
  void set_dtype(DType dtype) { dtype_ = dtype; }

  // From a small per-thread stack of freed objects (one per op result: the per-op
  // overhead of tiny tensors is mostly allocator calls).
  static void* operator new(std::size_t size);
  static void operator delete(void* p);

 private:
  StorageRef storage_;
  Layout layout_;
};

using CpuRef = dispatch::Ref<CpuTensor>;

// The CPU primitive behind a Prim (the caller knows it is a CPU tensor).
inline CpuRef as_cpu(dispatch::Prim&& p) { return dispatch::prim_cast<CpuTensor>(std::move(p)); }
inline const CpuTensor& cpu_of(const dispatch::Prim& p) { return dispatch::prim_as<CpuTensor>(p); }

// A fresh contiguous tensor (uninitialised elements).
CpuRef alloc_tensor(DType dtype, const Shape& shape);
// A fresh contiguous tensor whose bytes are zero.
CpuRef alloc_zeroed(DType dtype, const Shape& shape);
// A view of `src`'s storage with a new shape and layout: rewrites `src` itself
// when it is uniquely held, else makes a new primitive sharing the storage.
CpuRef make_view(CpuRef src, const Shape& shape, const Layout& layout);
// `src` when already contiguous, else a contiguous copy (strided copy with dims merged).
CpuRef to_contiguous(CpuRef src);
// Copies the elements of `src` (any layout) into `dst` (contiguous, same shape and dtype).
void copy_strided(const CpuTensor& src, std::byte* dst);
// Copies the elements of `src` to `dst` laid out with `dst_strides` (elements, src's rank).
void copy_strided_to(const CpuTensor& src, std::byte* dst, const std::int64_t* dst_strides);

// When the elements of `t` (any permutation of dims, flips included) occupy exactly
// one dense block of memory, its lowest address; else null. Order-free reductions
// then read that block directly.
const std::byte* dense_block(const CpuTensor& t);

// The cache of freed large buffers (Storage::allocate), for tests and tools.
struct BufferCacheStats {
  std::size_t entries = 0, bytes = 0;  // held now
  std::size_t hits = 0, misses = 0;    // large allocations served from it / mapped fresh
  std::size_t limit = 0;               // bound on `bytes`
};
BufferCacheStats buffer_cache_stats();
// Unmaps every cached buffer (the device's memory_cleanup).
void buffer_cache_clear();

// "[op] <what> on an unsupported dtype on cpu; ...": names the op being run.
[[noreturn]] void throw_unsupported_dtype(const char* what, DType dt);

}  // namespace tensor::cpu
