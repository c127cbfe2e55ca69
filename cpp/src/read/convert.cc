// Conversion kernels: one template instance per (input type, output type).
#include "read/convert.h"

#include <cstring>
#include <vector>

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
  if (ndim == 0) {
    fn(dst, 0, src, 0, 1, scale, offset);
    return;
  }
  for (int d = 0; d < ndim; ++d) if (shape[d] <= 0) return;
  const int last = ndim - 1;
  std::vector<int64_t> idx(static_cast<size_t>(ndim), 0);
  for (;;) {
    fn(dst, dst_strides[last], src, src_strides[last], shape[last], scale, offset);
    int d = last - 1;
    for (; d >= 0; --d) {
      dst += dst_strides[d];
      src += src_strides[d];
      if (++idx[d] < shape[d]) break;
      dst -= dst_strides[d] * shape[d];
      src -= src_strides[d] * shape[d];
      idx[d] = 0;
    }
    if (d < 0) return;
  }
}

}  // namespace lsio
