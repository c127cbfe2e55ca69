// Fill value parsing (Zarr v3 "fill_value" per data type). Integers never pass through a
// double, so uint64 max and int64 min stay exact; floats keep -0.0 and NaN payloads.
#include <cmath>
#include <cstring>
#include <limits>

#include "util/base64.h"
#include "util/utf8.h"
#include "zarr/dtype.h"

namespace lsio {
namespace {

Status Bad(const DataTypeInfo& dt, const nlohmann::json& j, const std::string& why) {
  return Status::InvalidFormat("fill_value " + j.dump() + " is not valid for data type " + dt.name +
                               (why.empty() ? "" : ": " + why));
}

template <typename T>
void Put(std::vector<uint8_t>& out, size_t at, T v) {
  std::memcpy(out.data() + at, &v, sizeof(T));
}

// "0x..." -> bits of `width` bytes; false if not a hex pattern that fits.
bool ParseHex(const std::string& s, size_t width, uint64_t* bits) {
  if (s.size() < 3 || s[0] != '0' || (s[1] != 'x' && s[1] != 'X')) return false;
  const size_t digits = s.size() - 2;
  if (digits > 2 * width) return false;
  uint64_t v = 0;
  for (size_t i = 2; i < s.size(); ++i) {
    const char c = s[i];
    int d;
    if (c >= '0' && c <= '9') d = c - '0';
    else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
    else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
    else return false;
    v = (v << 4) | static_cast<uint64_t>(d);
  }
  *bits = v;
  return true;
}

// One float component of `width` bytes (2, 4, 8) written at out[at].
Status PutFloat(const nlohmann::json& j, const DataTypeInfo& dt, size_t width,
                std::vector<uint8_t>& out, size_t at) {
  double v;
  if (j.is_number()) {
    v = j.get<double>();
  } else if (j.is_string()) {
    const std::string s = j.get<std::string>();
    uint64_t bits;
    if (s == "NaN") {
      v = std::numeric_limits<double>::quiet_NaN();
    } else if (s == "Infinity") {
      v = std::numeric_limits<double>::infinity();
    } else if (s == "-Infinity") {
      v = -std::numeric_limits<double>::infinity();
    } else if (ParseHex(s, width, &bits)) {
      if (width == 2) Put<uint16_t>(out, at, static_cast<uint16_t>(bits));
      else if (width == 4) Put<uint32_t>(out, at, static_cast<uint32_t>(bits));
      else Put<uint64_t>(out, at, bits);
      return Status::Ok();
    } else {
      return Bad(dt, j, "expected a number, \"NaN\", \"Infinity\", \"-Infinity\" or \"0x...\"");
    }
  } else {
    return Bad(dt, j, "");
  }
  if (width == 2) {
    // The spec's canonical NaN (mantissa MSB only) is what the cast produces.
    const _Float16 h = static_cast<_Float16>(v);
    Put<_Float16>(out, at, h);
  } else if (width == 4) {
    Put<float>(out, at, static_cast<float>(v));
  } else {
    Put<double>(out, at, v);
  }
  return Status::Ok();
}

template <typename T>
Status PutInt(const nlohmann::json& j, const DataTypeInfo& dt, std::vector<uint8_t>& out) {
  using L = std::numeric_limits<T>;
  if (j.is_number_unsigned()) {
    const uint64_t u = j.get<uint64_t>();
    if (u > static_cast<uint64_t>(L::max())) return Bad(dt, j, "out of range");
    Put<T>(out, 0, static_cast<T>(u));
    return Status::Ok();
  }
  if (j.is_number_integer()) {
    const int64_t i = j.get<int64_t>();
    const bool out_of_range =
        L::is_signed ? (i < static_cast<int64_t>(L::min()) || i > static_cast<int64_t>(L::max()))
                     : (i < 0 || static_cast<uint64_t>(i) > static_cast<uint64_t>(L::max()));
    if (out_of_range) {
      return Bad(dt, j, "out of range");
    }
    Put<T>(out, 0, static_cast<T>(i));
    return Status::Ok();
  }
  if (j.is_number_float()) {
    const double d = j.get<double>();
    // Integral floats (e.g. 0.0) are non-conforming but written by some tools.
    if (std::isfinite(d) && d == std::floor(d) && d >= static_cast<double>(L::min()) &&
        d <= static_cast<double>(L::max()) && std::fabs(d) < 9007199254740992.0) {
      Put<T>(out, 0, static_cast<T>(d));
      return Status::Ok();
    }
    return Bad(dt, j, "not an integer");
  }
  return Bad(dt, j, "expected an integer");
}


}  // namespace

Result<std::vector<uint8_t>> ParseFillValue(const nlohmann::json& j, const DataTypeInfo& dt) {
  std::vector<uint8_t> out(dt.itemsize, 0);
  if (j.is_null()) return Bad(dt, j, "null is not allowed in Zarr v3");
  switch (dt.type) {
    case DataType::kBool:
      if (j.is_boolean()) {
        out[0] = j.get<bool>() ? 1 : 0;
      } else if (j.is_number_integer() && (j.get<int64_t>() == 0 || j.get<int64_t>() == 1)) {
        out[0] = static_cast<uint8_t>(j.get<int64_t>());
      } else {
        return Bad(dt, j, "expected true or false");
      }
      break;
    case DataType::kInt8: LSIO_RETURN_IF_ERROR(PutInt<int8_t>(j, dt, out)); break;
    case DataType::kInt16: LSIO_RETURN_IF_ERROR(PutInt<int16_t>(j, dt, out)); break;
    case DataType::kInt32: LSIO_RETURN_IF_ERROR(PutInt<int32_t>(j, dt, out)); break;
    case DataType::kInt64: LSIO_RETURN_IF_ERROR(PutInt<int64_t>(j, dt, out)); break;
    case DataType::kUInt8: LSIO_RETURN_IF_ERROR(PutInt<uint8_t>(j, dt, out)); break;
    case DataType::kUInt16: LSIO_RETURN_IF_ERROR(PutInt<uint16_t>(j, dt, out)); break;
    case DataType::kUInt32: LSIO_RETURN_IF_ERROR(PutInt<uint32_t>(j, dt, out)); break;
    case DataType::kUInt64: LSIO_RETURN_IF_ERROR(PutInt<uint64_t>(j, dt, out)); break;
    case DataType::kFloat16: LSIO_RETURN_IF_ERROR(PutFloat(j, dt, 2, out, 0)); break;
    case DataType::kFloat32: LSIO_RETURN_IF_ERROR(PutFloat(j, dt, 4, out, 0)); break;
    case DataType::kFloat64: LSIO_RETURN_IF_ERROR(PutFloat(j, dt, 8, out, 0)); break;
    case DataType::kComplex64:
    case DataType::kComplex128: {
      const size_t w = dt.itemsize / 2;
      if (!j.is_array() || j.size() != 2) return Bad(dt, j, "expected [real, imaginary]");
      LSIO_RETURN_IF_ERROR(PutFloat(j[0], dt, w, out, 0));
      LSIO_RETURN_IF_ERROR(PutFloat(j[1], dt, w, out, w));
      break;
    }
    case DataType::kFixedUtf32: {
      if (!j.is_string()) return Bad(dt, j, "expected a string");
      std::vector<uint32_t> cps;
      if (!DecodeUtf8(j.get<std::string>(), &cps)) return Bad(dt, j, "not valid UTF-8");
      if (cps.size() * 4 > dt.itemsize) return Bad(dt, j, "longer than the string length");
      for (size_t k = 0; k < cps.size(); ++k) Put<uint32_t>(out, 4 * k, cps[k]);  // native (little) order
      break;
    }
    case DataType::kStructured: {
      // zarr-python (2 and 3) writes the base64 of one element's bytes.
      if (!j.is_string()) return Bad(dt, j, "expected the base64 of one element");
      std::string raw;
      if (!DecodeBase64(j.get<std::string>(), &raw)) return Bad(dt, j, "not valid base64");
      if (raw.size() != dt.itemsize) {
        return Bad(dt, j, "holds " + std::to_string(raw.size()) + " bytes, an element has " + std::to_string(dt.itemsize));
      }
      std::memcpy(out.data(), raw.data(), raw.size());
      break;
    }
    case DataType::kFixedBytes: {
      if (!j.is_string()) return Bad(dt, j, "expected a base64 string");
      std::string raw;
      if (!DecodeBase64(j.get<std::string>(), &raw)) return Bad(dt, j, "not valid base64");
      if (raw.size() > dt.itemsize) return Bad(dt, j, "longer than the string length");
      std::memcpy(out.data(), raw.data(), raw.size());
      break;
    }
  }
  return out;
}

}  // namespace lsio
