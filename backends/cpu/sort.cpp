// Sorting along a dim on the CPU: sort, argsort, sort_with_indices and the top-k
// family (a partial sort or a scan per lane, no host round trip). The order is the one of
// dispatch's host sort: stable (equal keys keep their index order), NaN counts as
// the largest value, so it goes last ascending and first descending. Lanes of
// 32-bit keys sort with Highway's vqsort.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "hwy/contrib/sort/vqsort.h"

#include "backends/cpu/cpu_ops.hpp"
#include "backends/cpu/elementwise.hpp"
#include "backends/cpu/parallel.hpp"
#include "backends/cpu/reduce_hwy.hpp"

namespace tensor::cpu {
namespace {

using dispatch::Prim;
using dispatch::PrimPair;

// Sorting this many elements in all (lanes x lane length) spreads groups of lanes
// over threads (parallel_chunks): a lane sort is compute-bound (n log n compares on
// data in L1/L2), so a second thread halves it once the work dwarfs the wake-up of a
// helper (as for act_hwy.cpp's thresholds), and a busy second core
// costs at most one group.
constexpr std::size_t kParallelSortElems = std::size_t{1} << 16;

// Each element becomes one unsigned integer: its value mapped to an order-preserving
// key (NaN the largest, -0.0 equal to +0.0; complemented for descending), shifted
// above its 32-bit lane position. Integer order on these is exactly the stable
// order, and sort / partial_sort on plain integers avoid comparator branches.
__extension__ typedef unsigned __int128 U128;

template <class T> struct KeyOf { using type = std::uint32_t; using packed = std::uint64_t; };
template <> struct KeyOf<double> { using type = std::uint64_t; using packed = U128; };
template <> struct KeyOf<std::int64_t> { using type = std::uint64_t; using packed = U128; };
template <> struct KeyOf<std::uint64_t> { using type = std::uint64_t; using packed = U128; };

template <class T>
inline typename KeyOf<T>::type order_key(T raw) {
  using K = typename KeyOf<T>::type;
  constexpr K kSign = K{1} << (sizeof(K) * 8 - 1);
  if constexpr (dispatch::kIsFloatLike<T>) {
    using F = std::conditional_t<sizeof(K) == 4, float, double>;
    F x = static_cast<F>(ld(raw));
    if (std::isnan(x)) return ~K{0};
    if (x == F(0)) x = F(0);  // -0.0 sorts with +0.0
    const K bits = std::bit_cast<K>(x);
    return (bits & kSign) ? ~bits : (bits | kSign);
  } else if constexpr (std::is_signed_v<T>) {
    using S = std::make_signed_t<K>;
    return static_cast<K>(static_cast<S>(raw)) ^ kSign;  // sign-extend, then flip the sign bit
  } else {
    return static_cast<K>(raw);
  }
}

// Puts the k smallest packed keys first, in order. The keys are distinct (each holds
// its lane position), so any correct sort gives the stable order. 64-bit keys go to
// Highway's vectorized quicksort (vqsort); a top-k with k above kSmallK selects the k
// smallest with nth_element and sorts only those.
template <class P>
void sort_range(P* p, std::size_t n) {
  if constexpr (std::is_same_v<P, std::uint64_t>) {
    if (n > 32) {
      thread_local const hwy::Sorter sorter;
      sorter(p, n, hwy::SortAscending());
      return;
    }
  }
  std::sort(p, p + n);
}

template <class P>
void sort_first_k(std::vector<P>& packed, std::size_t k) {
  const std::size_t n = packed.size();
  if (k < n) std::nth_element(packed.begin(), packed.begin() + static_cast<std::ptrdiff_t>(k), packed.end());
  sort_range(packed.data(), std::min(k, n));
}

// A top-k with k <= kSmallK and k * 8 < n scans the lane in place, keeping the k
// smallest packed keys in order in best[0, k): past the first rows an insertion is
// rare, so the cost is the scan. Packed keys from one lane compare by key first and
// positions only grow, so an element enters iff its key is below the k-th's.
// Contiguous f32/f64 lanes skip, vectors at a time, to the next block of 64 with an
// element beyond the k-th's value (or NaN): order keys are monotone in the value and
// equal for equal values (-0.0 = +0.0), so every element that could enter is visited,
// and the key compare decides as in the plain scan.
constexpr std::size_t kSmallK = 16;

template <class T, class K, class P>
void scan_first_k(const std::byte* x, std::int64_t xs, std::size_t n, std::size_t k, K flip, bool desc, P* best) {
  auto key_at = [&](std::size_t j) { return order_key(*at<T>(x + static_cast<std::int64_t>(j) * xs)) ^ flip; };
  auto pack = [](K key, std::size_t j) { return (static_cast<P>(key) << 32) | static_cast<P>(j); };
  for (std::size_t j = 0; j < k; ++j) best[j] = pack(key_at(j), j);
  std::sort(best, best + k);
  auto offer = [&](std::size_t j) {
    const K key = key_at(j);
    if (key >= static_cast<K>(best[k - 1] >> 32)) return;
    std::size_t i = k - 1;
    const P v = pack(key, j);
    for (; i > 0 && best[i - 1] > v; --i) best[i] = best[i - 1];
    best[i] = v;
  };
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    if (xs == static_cast<std::int64_t>(sizeof(T))) {
      // A block of 64 at a time: its candidates against the k-th's value when the block
      // was found, each then offered (the threshold only rises, so offer decides).
      const T* p = reinterpret_cast<const T*>(x);
      for (std::size_t j = k; j < n;) {
        const T t = p[static_cast<std::uint32_t>(best[k - 1])];
        std::uint64_t mask = 0;
        std::size_t b;
        if constexpr (std::is_same_v<T, float>) b = simd::beyond_block_f32(p + j, n - j, t, desc, &mask);
        else b = simd::beyond_block_f64(p + j, n - j, t, desc, &mask);
        if (b >= n - j) break;
        for (; mask; mask &= mask - 1) offer(j + b + static_cast<std::size_t>(std::countr_zero(mask)));
        j += b + 64;
      }
      return;
    }
  }
  for (std::size_t j = k; j < n; ++j) offer(j);
}

// Sorts every lane along `dim` and keeps the first k of each (k = n: all). Writes
// the source elements to `vals` and their lane positions to `idxs` (either may be null).
void sort_lanes(const CpuTensor& a, std::size_t dim, bool desc, std::size_t k, CpuTensor* vals, CpuTensor* idxs) {
  const Shape& shape = a.shape();
  const std::size_t n = shape[dim];
  Shape lines = shape;
  lines[dim] = 1;
  if (lines.num_elements() == 0 || k == 0) return;
  const DType out_idx = idxs ? idxs->dtype() : DType::I64;
  dispatch::visit_dtype(a.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool> || std::is_same_v<T, BoolU32>) {
      throw DTypeError("[sort] expected a float or int tensor; got " + std::string(dtype_name(a.dtype())));
    } else {
      using K = typename KeyOf<T>::type;
      using P = typename KeyOf<T>::packed;
      dispatch::visit_dtype(out_idx, [&](auto otag) {
        using O = decltype(otag);
        if constexpr (std::is_integral_v<O> && !std::is_same_v<O, bool>) {
          const auto e = static_cast<std::int64_t>(sizeof(T));
          // Operands: values out, indices out, source; outputs missing use the source's strides (unused).
          const CpuTensor& vo = vals ? *vals : a;
          const CpuTensor& io = idxs ? *idxs : a;
          const auto plan = make_plan<3>(lines, {vo.layout().strides.data(), io.layout().strides.data(), a.layout().strides.data()},
                                         {sizeof(T), sizeof(O), sizeof(T)});
          const std::int64_t vs = vals ? vals->stride(dim) * e : 0;
          const std::int64_t is = idxs ? idxs->stride(dim) * static_cast<std::int64_t>(sizeof(O)) : 0;
          const std::int64_t xs = a.stride(dim) * e;
          const K flip = desc ? ~K{0} : K{0};
          // One lane: source at x, values out at vo, indices out at io (strides above).
          const bool scan = k <= kSmallK && k * 8 < n;
          auto lane = [&](const std::byte* x, std::byte* vo, std::byte* io, std::vector<T>& raw, std::vector<P>& packed) {
            if (scan) {
              scan_first_k<T>(x, xs, n, k, flip, desc, packed.data());
              if (vals)
                for (std::size_t j = 0; j < k; ++j, vo += vs)
                  *at<T>(vo) = *at<T>(x + static_cast<std::int64_t>(static_cast<std::uint32_t>(packed[j])) * xs);
            } else {
              const std::byte* xj = x;
              for (std::size_t j = 0; j < n; ++j, xj += xs) {
                raw[j] = *at<T>(xj);
                packed[j] = (static_cast<P>(order_key(raw[j]) ^ flip) << 32) | static_cast<P>(j);
              }
              sort_first_k(packed, k);
              if (vals)
                for (std::size_t j = 0; j < k; ++j, vo += vs) *at<T>(vo) = raw[static_cast<std::uint32_t>(packed[j])];
            }
            if (idxs)
              for (std::size_t j = 0; j < k; ++j, io += is) *at<O>(io) = static_cast<O>(static_cast<std::uint32_t>(packed[j]));
          };
          const std::size_t count = lines.num_elements();
          if (count > 1 && count * n >= kParallelSortElems && a.is_contiguous() && dim + 1 == shape.rank() &&
              (!vals || vals->is_contiguous()) && (!idxs || idxs->is_contiguous())) {
            // Lanes are rows (the last dim of contiguous tensors): independent, in
            // groups spread over threads, each group with its own scratch.
            const std::size_t per = std::max<std::size_t>(1, (std::size_t{1} << 14) / n);
            auto group = [&](std::size_t g) {
              std::vector<T> raw(n);
              std::vector<P> packed(n);
              for (std::size_t u = g * per; u < std::min(count, (g + 1) * per); ++u)
                lane(a.data() + static_cast<std::int64_t>(u * n) * e, vals ? vals->data() + static_cast<std::int64_t>(u * k) * e : nullptr,
                     idxs ? idxs->data() + static_cast<std::int64_t>(u * k * sizeof(O)) : nullptr, raw, packed);
            };
            parallel_chunks((count + per - 1) / per, group);
            return;
          }
          std::vector<T> raw(n);
          std::vector<P> packed(n);
          for_each_row(plan, {vals ? vals->data() : a.data(), idxs ? idxs->data() : a.data(), a.data()},
                       [&](std::array<std::byte*, 3> p, std::size_t m, std::array<std::int64_t, 3> s) {
                         for (std::size_t r = 0; r < m; ++r, p[0] += s[0], p[1] += s[1], p[2] += s[2])
                           lane(p[2], p[0], p[1], raw, packed);
                       });
        } else {
          throw DTypeError("[sort] index dtype must be an int dtype; got " + std::string(dtype_name(out_idx)));
        }
      });
    }
  });
}

// Lanes longer than 2^32 elements would overflow the permutation type.
void check_lane(const CpuTensor& a, std::size_t dim, const char* op) {
  if (a.shape()[dim] > 0xffffffffu)
    throw ShapeError(std::string("[") + op + "] dim too long to sort; expected at most 2^32 - 1 elements; got " +
                     std::to_string(a.shape()[dim]));
}

Shape first_k(Shape s, std::size_t dim, std::size_t k) {
  s[dim] = k;
  return s;
}

Prim sort_entry(Prim p, std::size_t dim, bool desc) {
  const CpuRef a = as_cpu(std::move(p));
  check_lane(*a, dim, "sort");
  CpuRef v = alloc_tensor(a->dtype(), a->shape());
  sort_lanes(*a, dim, desc, a->shape()[dim], v.get(), nullptr);
  return v;
}

PrimPair sort_with_indices_entry(Prim p, std::size_t dim, bool desc, DType out) {
  const CpuRef a = as_cpu(std::move(p));
  check_lane(*a, dim, "sort_with_indices");
  CpuRef v = alloc_tensor(a->dtype(), a->shape());
  CpuRef i = alloc_tensor(out, a->shape());
  sort_lanes(*a, dim, desc, a->shape()[dim], v.get(), i.get());
  return {std::move(v), std::move(i)};
}

Prim argsort_entry(Prim p, std::size_t dim, bool desc, DType out) {
  const CpuRef a = as_cpu(std::move(p));
  check_lane(*a, dim, "argsort");
  CpuRef i = alloc_tensor(out, a->shape());
  sort_lanes(*a, dim, desc, a->shape()[dim], nullptr, i.get());
  return i;
}

Prim topk_entry(Prim p, std::size_t dim, std::size_t k) {
  const CpuRef a = as_cpu(std::move(p));
  check_lane(*a, dim, "topk");
  CpuRef v = alloc_tensor(a->dtype(), first_k(a->shape(), dim, k));
  sort_lanes(*a, dim, true, k, v.get(), nullptr);
  return v;
}

PrimPair topk_with_indices_entry(Prim p, std::size_t dim, std::size_t k, DType out) {
  const CpuRef a = as_cpu(std::move(p));
  check_lane(*a, dim, "topk_with_indices");
  CpuRef v = alloc_tensor(a->dtype(), first_k(a->shape(), dim, k));
  CpuRef i = alloc_tensor(out, first_k(a->shape(), dim, k));
  sort_lanes(*a, dim, true, k, v.get(), i.get());
  return {std::move(v), std::move(i)};
}

Prim argtopk_entry(Prim p, std::size_t dim, std::size_t k, DType out) {
  const CpuRef a = as_cpu(std::move(p));
  check_lane(*a, dim, "argtopk");
  CpuRef i = alloc_tensor(out, first_k(a->shape(), dim, k));
  sort_lanes(*a, dim, true, k, nullptr, i.get());
  return i;
}

}  // namespace

void register_sort_ops(dispatch::Backend& b) {
  b.set<OpCode::sort>(&sort_entry);
  b.set<OpCode::sort_with_indices>(&sort_with_indices_entry);
  b.set<OpCode::argsort>(&argsort_entry);
  b.set<OpCode::topk>(&topk_entry);
  b.set<OpCode::topk_with_indices>(&topk_with_indices_entry);
  b.set<OpCode::argtopk>(&argtopk_entry);
}

}  // namespace tensor::cpu
