// CpuTensor storage, layouts and the strided copy behind to_contiguous (dims merged,
// inner-contiguous runs as memcpy, transposes in cache blocks).
#include "backends/cpu/cpu_tensor.hpp"

#include <fmt/format.h>
#include <sys/mman.h>

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <vector>

#include "backends/cpu/layout_hwy.hpp"
#include "backends/cpu/parallel.hpp"
#include "backends/cpu/strided.hpp"
#include "lib/core/block_stack.hpp"
#include "lib/core/current_op.hpp"
#include "lib/core/shape_rules.hpp"
#include "tensor/error.hpp"

#if TENSOR_HAVE_OPENMP
#include <omp.h>
#endif

namespace tensor::cpu {

namespace {

// Buffers from here up are mapped (and cached when freed); below, malloc's thread
// cache is the faster allocator.
constexpr std::size_t kLargeBytes = std::size_t{1} << 20;
constexpr std::size_t kHugePage = std::size_t{2} << 20;
// The cache holds at most this many bytes, and no single buffer above a quarter of it.
constexpr std::size_t kCacheLimit = std::size_t{1} << 30;

std::size_t round_up(std::size_t n, std::size_t m) { return (n + m - 1) / m * m; }

// Mapping size for `need` bytes: whole huge pages, then rounded to 1/8 of the power
// of two below, so sizes that differ a little share a bucket (<= 12.5% slack, and
// untouched slack pages cost no memory).
std::size_t size_class(std::size_t need) {
  const std::size_t c = round_up(need, kHugePage);
  return round_up(c, std::max(kHugePage, std::bit_floor(c) / 8));
}

// A 2 MiB-aligned anonymous mapping of `size` bytes with huge pages advised; null on failure.
void* map_aligned(std::size_t size) {
  void* p = ::mmap(nullptr, size + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  const auto base = reinterpret_cast<std::uintptr_t>(p);
  const std::uintptr_t aligned = round_up(base, kHugePage);
  if (aligned > base) ::munmap(p, aligned - base);
  if (const std::size_t tail = base + size + kHugePage - (aligned + size)) ::munmap(reinterpret_cast<void*>(aligned + size), tail);
  ::madvise(reinterpret_cast<void*>(aligned), size, MADV_HUGEPAGE);
  return reinterpret_cast<void*>(aligned);
}

// Freed large mappings by size class, oldest first; evicts the oldest past the limit.
class BufferCache {
 public:
  void* take(std::size_t size) {
    std::lock_guard<std::mutex> lock(mu_);
    for (std::size_t i = free_.size(); i-- > 0;) {
      if (free_[i].size != size) continue;
      void* p = free_[i].ptr;
      bytes_ -= size;
      free_.erase(free_.begin() + static_cast<std::ptrdiff_t>(i));
      ++hits_;
      return p;
    }
    ++misses_;
    return nullptr;
  }
  void give(void* p, std::size_t size) {
    std::vector<Block> evicted;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (size <= kCacheLimit / 4) {
        while (bytes_ + size > kCacheLimit && !free_.empty()) {
          evicted.push_back(free_.front());
          bytes_ -= free_.front().size;
          free_.erase(free_.begin());
        }
        free_.push_back({p, size});
        bytes_ += size;
        p = nullptr;
      }
    }
    for (const Block& b : evicted) ::munmap(b.ptr, b.size);
    if (p) ::munmap(p, size);
  }
  void clear() {
    std::vector<Block> all;
    {
      std::lock_guard<std::mutex> lock(mu_);
      all.swap(free_);
      bytes_ = 0;
    }
    for (const Block& b : all) ::munmap(b.ptr, b.size);
  }
  BufferCacheStats stats() {
    std::lock_guard<std::mutex> lock(mu_);
    return {free_.size(), bytes_, hits_, misses_, kCacheLimit};
  }

 private:
  struct Block {
    void* ptr;
    std::size_t size;
  };
  std::mutex mu_;
  std::vector<Block> free_;
  std::size_t bytes_ = 0, hits_ = 0, misses_ = 0;
};

// Never destroyed: tensors in static storage may be freed after main returns.
BufferCache& cache() {
  static BufferCache* c = new BufferCache();
  return *c;
}

// Small storage blocks: the header line, up to 128 bytes of elements, and malloc's
// 16-byte alignment slack to the next 64-byte line.
constexpr std::size_t kSmallBlock = 256;
using SmallBlocks = core::BlockStack<kSmallBlock>;
using TensorBlocks = core::BlockStack<sizeof(CpuTensor)>;

// Medium blocks (above kSmallBlock, below kLargeBytes): freed blocks kept per thread in size
// classes four to a doubling (<= 25 % slack), at most kMediumPerClass a class and
// kMediumThreadBytes in all, so a loop that frees and allocates the same sizes (an op's
// result each step, a replayed graph's thunk results) stops calling malloc. A thread's
// blocks are freed when it exits; after that its frees go straight to free().
constexpr std::size_t kMediumPerClass = 4;
constexpr std::size_t kMediumThreadBytes = std::size_t{8} << 20;
// Block bytes of the class of a malloc request of `n` bytes (n > kSmallBlock): n rounded up
// to a quarter of the power of two below it.
std::size_t medium_block(std::size_t n) { return round_up(n, std::bit_floor(n) / 4); }
// Its index: four a doubling from kSmallBlock on.
std::size_t medium_class(std::size_t block) {
  const auto lg = static_cast<std::size_t>(std::bit_width(block) - 1);  // block in [2^lg, 2^(lg+1))
  return (lg - 8) * 4 + (block - (std::size_t{1} << lg)) / (std::size_t{1} << (lg - 2));
}
// Up to 2^21: a request just under kLargeBytes plus the header and slack rounds past 2^20.
constexpr std::size_t kMediumClasses = (21 - 8) * 4;

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kKeepMedium = false;  // AddressSanitizer sees every use after free
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kKeepMedium = false;
#else
constexpr bool kKeepMedium = true;
#endif
#else
constexpr bool kKeepMedium = true;
#endif

class MediumBlocks {
 public:
  static void* take(std::size_t block) {
    if (kKeepMedium && !dead_) {
      MediumBlocks& s = mine();
      Stack& c = s.classes_[medium_class(block)];
      if (c.n) {
        s.bytes_ -= block;
        return c.items[--c.n];
      }
    }
    return std::malloc(block);
  }
  static void give(void* p, std::size_t block) {
    if (kKeepMedium && !dead_) {
      MediumBlocks& s = mine();
      Stack& c = s.classes_[medium_class(block)];
      if (c.n < kMediumPerClass && s.bytes_ + block <= kMediumThreadBytes) {
        c.items[c.n++] = p;
        s.bytes_ += block;
        return;
      }
    }
    std::free(p);
  }
  ~MediumBlocks() {
    dead_ = true;
    for (Stack& c : classes_)
      while (c.n) std::free(c.items[--c.n]);
  }

 private:
  struct Stack {
    void* items[kMediumPerClass];
    std::size_t n = 0;
  };
  static MediumBlocks& mine() {
    thread_local MediumBlocks s;
    return s;
  }
  Stack classes_[kMediumClasses];
  std::size_t bytes_ = 0;
  static thread_local bool dead_;
};
thread_local bool MediumBlocks::dead_ = false;

}  // namespace

void* CpuTensor::operator new(std::size_t size) {
  return size == sizeof(CpuTensor) ? TensorBlocks::take() : ::operator new(size);
}
void CpuTensor::operator delete(void* p) { TensorBlocks::give(p); }

BufferCacheStats buffer_cache_stats() { return cache().stats(); }
void buffer_cache_clear() { cache().clear(); }

// Out of host memory: ExecutionError naming the running op, the byte count and the
// device (the process stays usable: nothing was allocated).
[[noreturn]] void throw_out_of_memory(std::size_t bytes) {
  throw ExecutionError(fmt::format("[{}] out of memory on cpu; expected {} bytes of host memory; got an allocation failure",
                                   core::current_op_name(), bytes));
}

[[noreturn]] void throw_unsupported_dtype(const char* what, DType dt) {
  throw DTypeError(fmt::format("[{}] {} on an unsupported dtype on cpu; expected a dtype this op supports; got {}",
                               core::current_op_name(), what, dtype_name(dt)));
}

StorageRef Storage::allocate_impl(std::size_t bytes, bool zeroed) {
  if (bytes > core::kMaxAllocBytes) throw_out_of_memory(bytes);
  const std::size_t need = kAlign + bytes;
  if (need < kLargeBytes) {
    // malloc aligns to 16: over-allocate and start the header at the next 64-byte line.
    void* raw;
    if (need + kAlign - 16 <= kSmallBlock) {
      raw = SmallBlocks::take();
      if (zeroed) std::memset(raw, 0, kSmallBlock);
    } else {
      const std::size_t block = medium_block(need + kAlign - 16);
      raw = MediumBlocks::take(block);
      if (zeroed && raw) std::memset(raw, 0, need + kAlign - 16);
    }
    if (!raw) throw_out_of_memory(bytes);
    void* at = reinterpret_cast<void*>(round_up(reinterpret_cast<std::uintptr_t>(raw), kAlign));
    return StorageRef::adopt(::new (at) Storage(bytes, 0, raw));
  }
  const std::size_t size = size_class(need);
  void* mem = cache().take(size);
  const bool reused = mem != nullptr;
  if (!mem) mem = map_aligned(size);
  if (!mem) {
    buffer_cache_clear();  // cached mappings may be what is in the way
    mem = map_aligned(size);
  }
  if (!mem) throw_out_of_memory(bytes);
  Storage* s = ::new (mem) Storage(bytes, size, nullptr);
  if (zeroed && reused) std::memset(s->data(), 0, bytes);  // fresh mappings are zero already
  return StorageRef::adopt(s);
}

StorageRef Storage::allocate(std::size_t bytes) { return allocate_impl(bytes, false); }
StorageRef Storage::allocate_zeroed(std::size_t bytes) { return allocate_impl(bytes, true); }

void Storage::release_ref() const {
  if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    Storage* self = const_cast<Storage*>(this);
    const std::size_t mapped = mapped_, bytes = bytes_;
    void* raw = raw_;
    self->~Storage();
    if (mapped) cache().give(self, mapped);
    else if (kAlign + bytes + kAlign - 16 <= kSmallBlock) SmallBlocks::give(raw);
    else MediumBlocks::give(raw, medium_block(kAlign + bytes + kAlign - 16));
  }
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

namespace {
// Bytes of a fresh tensor; a count that does not fit is an out-of-memory error.
std::size_t tensor_bytes(DType dtype, const Shape& shape) {
  std::size_t bytes = dtype_size(dtype);
  bool zero = false;
  for (std::size_t d : shape) {
    if (d == 0) zero = true;
    else if (__builtin_mul_overflow(bytes, d, &bytes)) bytes = SIZE_MAX;
  }
  if (zero) return 0;
  if (bytes > core::kMaxAllocBytes)
    throw ExecutionError(fmt::format("[{}] out of memory on cpu; expected {} elements of {} ({} bytes or more); got a "
                                     "byte count beyond 2^63 - 1",
                                     core::current_op_name(), shape.to_string(), dtype_name(dtype), bytes));
  return bytes;
}
}  // namespace

CpuRef alloc_tensor(DType dtype, const Shape& shape) {
  return CpuRef::make(dtype, shape, Storage::allocate(tensor_bytes(dtype, shape)),
                      contiguous_layout(shape));
}

CpuRef alloc_zeroed(DType dtype, const Shape& shape) {
  return CpuRef::make(dtype, shape, Storage::allocate_zeroed(tensor_bytes(dtype, shape)),
                      contiguous_layout(shape));
}

// Every view passes here. A dim of at most one element is never stepped along, so its
// stride is set to 0: a view op may leave it any value (a slice step or unfold step of
// 2^62 on a dim left with one element), and kernels scale strides to bytes, which for
// such a stride overflowed (UBSan, libFuzzer). Every other stride stays within the buffer.
CpuRef make_view(CpuRef src, const Shape& shape, const Layout& layout) {
  Layout l = layout;
  for (std::size_t d = 0; d < shape.rank(); ++d)
    if (shape[d] <= 1) l.strides[d] = 0;
  if (src->unique_ref()) {
    src->set_view(shape, l);
    return src;
  }
  return CpuRef::make(src->dtype(), shape, src->storage_ref(), l);
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

// Transposes of at least this many elements are split across threads (parallel_chunks).
// A blocked transpose runs at about the speed of a copy, so two threads gain where a copy
// does (large, memory-bound transposes): from 4 M elements (16 MB f32, the streaming
// bound). `tensorctl bench` (transpose->contiguous against a copy) re-measures it.
constexpr std::size_t kParallelTransposeElems = std::size_t{1} << 22;

int parallel_threads(std::size_t elems) {
#if TENSOR_HAVE_OPENMP
  if (elems >= kParallelTransposeElems && !omp_in_parallel()) return omp_get_max_threads();
#else
  (void)elems;
#endif
  return 1;
}

// One rows x cols transpose (dst contiguous along cols, src along rows) on `threads`
// threads: SIMD register tiles in cache blocks for 4- and 8-byte elements, plain
// cache blocks otherwise.
void transpose_tile(std::byte* d, const std::byte* s, std::size_t rows, std::size_t cols, std::int64_t drow,
                    std::int64_t srow, std::int64_t scol, std::size_t e, int threads) {
  const auto ie = static_cast<std::int64_t>(e);
  // Kernel terms: src row p = our column j (stride scol), dst row q = our row i.
  auto simd_rows = [&](std::size_t j0, std::size_t j1) {
    const std::byte* sp = s + static_cast<std::int64_t>(j0) * scol;
    std::byte* dp = d + static_cast<std::int64_t>(j0) * ie;
    if (e == 4) {
      simd::transpose_u32(reinterpret_cast<const std::uint32_t*>(sp), scol / ie, reinterpret_cast<std::uint32_t*>(dp),
                          drow / ie, j1 - j0, rows, rows * cols * e);
    } else {
      simd::transpose_u64(reinterpret_cast<const std::uint64_t*>(sp), scol / ie, reinterpret_cast<std::uint64_t*>(dp),
                          drow / ie, j1 - j0, rows, rows * cols * e);
    }
  };
  if ((e == 4 || e == 8) && scol % ie == 0 && drow % ie == 0) {
    if (threads > 1) {
      // Column bands of whole 64-element groups, four per thread, taken as threads come
      // free (a descheduled helper leaves its bands to the caller).
      const auto bands = 4 * static_cast<std::size_t>(threads);
      const std::size_t step = (cols + bands * 64 - 1) / (bands * 64) * 64;
      auto band = [&](std::size_t b) {
        const std::size_t j0 = std::min(cols, b * step), j1 = std::min(cols, j0 + step);
        if (j1 > j0) simd_rows(j0, j1);
      };
      parallel_chunks(bands, band);
      return;
    }
    simd_rows(0, cols);
    return;
  }
  switch (e) {
    case 1: transpose_2d<std::uint8_t>(d, s, rows, cols, drow, srow, scol); break;
    case 2: transpose_2d<std::uint16_t>(d, s, rows, cols, drow, srow, scol); break;
    case 4: transpose_2d<std::uint32_t>(d, s, rows, cols, drow, srow, scol); break;
    default: transpose_2d<std::uint64_t>(d, s, rows, cols, drow, srow, scol); break;
  }
}

// The blocked path for plans whose two innermost dims are swapped between source
// and destination; false when the plan has another shape (caller does rows). A batch
// of at least as many transposes as threads runs one transpose per thread; a single
// large one (or a short batch) splits each transpose into column bands.
bool copy_transposed(const Plan<2>& plan, std::byte* dst, const std::byte* src, std::size_t e) {
  if (plan.empty || plan.rank < 2) return false;
  const std::size_t r = plan.rank;
  const auto ie = static_cast<std::int64_t>(e);
  const std::int64_t drow = plan.strides[0][r - 2], dcol = plan.strides[0][r - 1];
  const std::int64_t srow = plan.strides[1][r - 2], scol = plan.strides[1][r - 1];
  const std::size_t rows = plan.dims[r - 2], cols = plan.dims[r - 1];
  if (dcol != ie || srow != ie || scol == ie || rows < 8 || cols < 8) return false;
  std::size_t batch = 1;
  for (std::size_t d = 0; d + 2 < r; ++d) batch *= plan.dims[d];
  const int threads = parallel_threads(batch * rows * cols);
  // Walk the outer dims (if any) with a plan of rank r - 2: a batch of 2-D transposes.
  Plan<2> outer = plan;
  outer.rank = r - 2;
  if (threads > 1 && batch >= static_cast<std::size_t>(threads)) {
    std::vector<std::array<std::byte*, 2>> items;
    items.reserve(batch);
    for_each_row(outer, {dst, const_cast<std::byte*>(src)},
                 [&](std::array<std::byte*, 2> p, std::size_t n, std::array<std::int64_t, 2> s) {
                   for (std::size_t i = 0; i < n; ++i, p[0] += s[0], p[1] += s[1]) items.push_back(p);
                 });
    auto one = [&](std::size_t i) { transpose_tile(items[i][0], items[i][1], rows, cols, drow, srow, scol, e, 1); };
    parallel_chunks(items.size(), one);
    return true;
  }
  for_each_row(outer, {dst, const_cast<std::byte*>(src)},
               [&](std::array<std::byte*, 2> p, std::size_t n, std::array<std::int64_t, 2> s) {
                 for (std::size_t i = 0; i < n; ++i, p[0] += s[0], p[1] += s[1])
                   transpose_tile(p[0], p[1], rows, cols, drow, srow, scol, e, threads);
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

const std::byte* dense_block(const CpuTensor& t) {
  // Sort the non-trivial dims by |stride|; they must then be row-major dense.
  std::array<std::pair<std::int64_t, std::size_t>, kMaxRank> dims{};
  std::size_t k = 0;
  std::int64_t low = t.offset();  // lowest element index
  for (std::size_t d = 0; d < t.rank(); ++d) {
    const std::size_t n = t.shape()[d];
    if (n == 0) return nullptr;
    if (n == 1) continue;
    const std::int64_t st = t.stride(d);
    if (st < 0) low += st * static_cast<std::int64_t>(n - 1);
    dims[k++] = {st < 0 ? -st : st, n};
  }
  for (std::size_t i = 1; i < k; ++i)  // insertion sort (at most kMaxRank entries)
    for (std::size_t j = i; j > 0 && dims[j].first < dims[j - 1].first; --j) std::swap(dims[j], dims[j - 1]);
  std::int64_t expect = 1;
  for (std::size_t i = 0; i < k; ++i) {
    if (dims[i].first != expect) return nullptr;
    expect *= static_cast<std::int64_t>(dims[i].second);
  }
  return t.storage()->data() + low * static_cast<std::int64_t>(t.elem_size());
}

CpuRef to_contiguous(CpuRef src) {
  if (src->is_contiguous()) return src;
  CpuRef out = alloc_tensor(src->dtype(), src->shape());
  copy_strided(*src, out->data());
  return out;
}

}  // namespace tensor::cpu
