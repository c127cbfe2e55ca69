// Conversion kernels: one template instance per (input type, output type).
#include "read/convert.h"

#include "util/strided_copy.h"

#include <cstring>

namespace lsio {
namespace {

template <typename S, typename D>
void ConvertRun(uint8_t* dst, int64_t ds, const uint8_t* src, int64_t ss, int64_t n, double scale,
                double offset) {
  for (int64_t i = 0; i < n; ++i) {
    S v;
    std::memcpy(&v, src + i * ss, sizeof(S));
    const D out = static_cast<D>(static_cast<double>(v) * scale + offset);
    std::memcpy(dst + i * ds, &out, sizeof(D));
  }
}

template <typename D>
Result<ConvertFn> For(DataType src) {
  switch (src) {
    case DataType::kBool:
    case DataType::kUInt8: return &ConvertRun<uint8_t, D>;
    case DataType::kInt8: return &ConvertRun<int8_t, D>;
    case DataType::kInt16: return &ConvertRun<int16_t, D>;
    case DataType::kInt32: return &ConvertRun<int32_t, D>;
    case DataType::kInt64: return &ConvertRun<int64_t, D>;
    case DataType::kUInt16: return &ConvertRun<uint16_t, D>;
    case DataType::kUInt32: return &ConvertRun<uint32_t, D>;
    case DataType::kUInt64: return &ConvertRun<uint64_t, D>;
    case DataType::kFloat16: return &ConvertRun<_Float16, D>;
    case DataType::kFloat32: return &ConvertRun<float, D>;
    case DataType::kFloat64: return &ConvertRun<double, D>;
    case DataType::kComplex64:
    case DataType::kComplex128: break;
    case DataType::kFixedUtf32:
    case DataType::kFixedBytes: return Status::InvalidType("string arrays cannot be converted to a numeric output type");
    case DataType::kStructured: return Status::InvalidType("structured (record) arrays cannot be converted to a numeric output type");
  }
  return Status::InvalidType("complex arrays cannot be converted to a real output type");
}

}  // namespace

Result<ConvertFn> GetConverter(DataType src, bool to_double) {
  return to_double ? For<double>(src) : For<float>(src);
}

void ConvertStrided(ConvertFn fn, uint8_t* dst, const int64_t* dst_strides, const uint8_t* src,
                    const int64_t* src_strides, const int64_t* shape, int ndim, double scale,
                    double offset) {
  const int64_t n = ndim == 0 ? 1 : shape[ndim - 1];
  const int64_t ds = ndim == 0 ? 0 : dst_strides[ndim - 1];
  const int64_t ss = ndim == 0 ? 0 : src_strides[ndim - 1];
  ForEachInnerRun(dst, dst_strides, src, src_strides, shape, ndim,
                  [&](uint8_t* d, const uint8_t* s) { fn(d, ds, s, ss, n, scale, offset); });
}

}  // namespace lsio
