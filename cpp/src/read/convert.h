// Element conversion applied while a decoded chunk is scattered into the output: the
// optional per-call transform `out = in * scale + offset`, stored as float32 or float64.
//
// Usage:
//   LSIO_ASSIGN_OR_RETURN(ConvertFn fn, GetConverter(DataType::kUInt16, /*to_double=*/false));
//   ConvertStrided(fn, dst, dst_strides, src, src_strides, shape, ndim, scale, offset);
// Lets a uint16 store feed float32 tensors in one pass, while the chunk is still in cache.
// Arithmetic is done in double, then rounded once to the output type.
#pragma once

#include <cstddef>
#include <cstdint>

#include "lsio/status.h"
#include "zarr/dtype.h"

namespace lsio {

/// Converts n elements: dst[i*ds] = D(src[i*ss] * scale + offset).
using ConvertFn = void (*)(uint8_t* dst, int64_t ds, const uint8_t* src, int64_t ss, int64_t n,
                           double scale, double offset);

/// Converter from a real data type to float32 (or float64). Fails with kInvalidType for
/// complex inputs.
Result<ConvertFn> GetConverter(DataType src, bool to_double);

/// Strided n-d walk (C order) calling `fn` on each innermost run.
void ConvertStrided(ConvertFn fn, uint8_t* dst, const int64_t* dst_strides, const uint8_t* src,
                    const int64_t* src_strides, const int64_t* shape, int ndim, double scale,
                    double offset);

}  // namespace lsio
