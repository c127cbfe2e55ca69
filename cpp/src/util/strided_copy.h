// Strided n-d copy and fill kernels shared by the codec layer (transpose) and the read
// layer (chunk -> output slice).
//
// Usage:
//   CopyStrided(dst, dst_strides, src, src_strides, shape, itemsize, swap_unit);
//   FillStrided(dst, dst_strides, shape, pattern, itemsize);
//   CopyStridedStreaming(dst, dst_strides, src, src_strides, shape, ndim, itemsize);
// Strides are in bytes and may be negative or arbitrary; the kernels walk the shape in C
// order and copy one element (or, where both sides are contiguous over the innermost
// dimension, one memcpy per innermost run). `swap_unit` > 1 byte-swaps each element's
// components of that size while copying (big-endian chunks, complex = two components).
// The caller guarantees every addressed byte is valid; nothing is checked here.
#pragma once

#include <cstddef>
#include <cstdint>

namespace lsio {

/// Walks an n-d box in C order and calls run(dst, src) once per innermost run of
/// shape[ndim-1] elements; the caller's `run` handles the innermost strides. `src` may be
/// null (with null src_strides) for walks that only write. ndim must be <= 64.
template <typename Run>
void ForEachInnerRun(uint8_t* dst, const int64_t* dst_strides, const uint8_t* src,
                     const int64_t* src_strides, const int64_t* shape, int ndim, Run&& run) {
  if (ndim == 0) {
    run(dst, src);
    return;
  }
  for (int d = 0; d < ndim; ++d) if (shape[d] <= 0) return;
  const int last = ndim - 1;
  int64_t idx[64] = {0};
  for (;;) {
    run(dst, src);
    int d = last - 1;
    for (; d >= 0; --d) {
      dst += dst_strides[d];
      if (src != nullptr) src += src_strides[d];
      if (++idx[d] < shape[d]) break;
      dst -= dst_strides[d] * shape[d];
      if (src != nullptr) src -= src_strides[d] * shape[d];
      idx[d] = 0;
    }
    if (d < 0) return;
  }
}

void CopyStrided(uint8_t* dst, const int64_t* dst_strides, const uint8_t* src,
                 const int64_t* src_strides, const int64_t* shape, int ndim, size_t itemsize,
                 size_t swap_unit);

/// CopyStrided without byte swapping, whose rows of at least kMinStreamedRow bytes bypass
/// the cache with non-temporal stores (where the CPU has them), ending with a store fence:
/// for outputs too large to stay cached, where a cached store first reads every line it
/// overwrites. Shorter or non-contiguous rows are copied as by CopyStrided.
void CopyStridedStreaming(uint8_t* dst, const int64_t* dst_strides, const uint8_t* src,
                          const int64_t* src_strides, const int64_t* shape, int ndim, size_t itemsize);

/// The shortest row CopyStridedStreaming streams: shorter rows are mostly the partial
/// cache lines at their ends, which are stored normally.
inline constexpr size_t kMinStreamedRow = 256;

/// Output size from which a read streams its scatter: a quarter of the last-level cache
/// (glibc's memcpy switches to non-temporal stores at that size too), 8 MiB when the cache
/// size is unknown, never below 4 MiB. Read from sysfs when the library loads.
uint64_t StreamingThresholdBytes();

void FillStrided(uint8_t* dst, const int64_t* dst_strides, const int64_t* shape, int ndim,
                 const uint8_t* pattern, size_t itemsize);

/// Byte-swaps `count` units of `unit` bytes (2, 4 or 8) in place.
void ByteSwapInPlace(uint8_t* data, size_t count, size_t unit);

}  // namespace lsio
