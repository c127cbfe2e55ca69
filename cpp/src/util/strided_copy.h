// Strided n-d copy and fill kernels shared by the codec layer (transpose) and the read
// layer (chunk -> output slice).
//
// Usage:
//   CopyStrided(dst, dst_strides, src, src_strides, shape, itemsize, swap_unit);
//   FillStrided(dst, dst_strides, shape, pattern, itemsize);
// Strides are in bytes and may be negative or arbitrary; the kernels walk the shape in C
// order and copy one element (or, where both sides are contiguous over the innermost
// dimension, one memcpy per innermost run). `swap_unit` > 1 byte-swaps each element's
// components of that size while copying (big-endian chunks, complex = two components).
// The caller guarantees every addressed byte is valid; nothing is checked here.
#pragma once

#include <cstddef>
#include <cstdint>

namespace lsio {

void CopyStrided(uint8_t* dst, const int64_t* dst_strides, const uint8_t* src,
                 const int64_t* src_strides, const int64_t* shape, int ndim, size_t itemsize,
                 size_t swap_unit);

void FillStrided(uint8_t* dst, const int64_t* dst_strides, const int64_t* shape, int ndim,
                 const uint8_t* pattern, size_t itemsize);

/// Byte-swaps `count` units of `unit` bytes (2, 4 or 8) in place.
void ByteSwapInPlace(uint8_t* data, size_t count, size_t unit);

}  // namespace lsio
