// Highway 2-D transpose kernels behind to_contiguous (a normal header: no
// hwy/highway.h here). Elements are moved as raw 4- or 8-byte words.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tensor::cpu::simd {

// dst[q * dst_stride + p] = src[p * src_stride + q] for p < rows, q < cols (strides in
// elements, either sign): `src` is read along its rows, `dst` written along its rows.
// Square register tiles of the vector width, so every cache line is touched once.
// whole_bytes: the size of the whole transpose when this call is one band of it (0: this
// call alone); from 16 MiB the destination is written with streaming stores.
void transpose_u32(const std::uint32_t* src, std::int64_t src_stride, std::uint32_t* dst, std::int64_t dst_stride,
                   std::size_t rows, std::size_t cols, std::size_t whole_bytes = 0);
void transpose_u64(const std::uint64_t* src, std::int64_t src_stride, std::uint64_t* dst, std::int64_t dst_stride,
                   std::size_t rows, std::size_t cols, std::size_t whole_bytes = 0);

}  // namespace tensor::cpu::simd
