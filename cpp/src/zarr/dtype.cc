// Zarr v3 core data types: name -> element layout.
#include "zarr/dtype.h"

#include <bit>

namespace lsio {

static_assert(std::endian::native == std::endian::little,
              "lsio assumes a little-endian host (x86-64, aarch64)");

Result<DataTypeInfo> ParseDataType(const nlohmann::json& j) {
  if (j.is_object()) {
    auto n = j.find("name");
    const std::string name = (n != j.end() && n->is_string()) ? n->get<std::string>() : "?";
    if (name == "fixed_length_utf32" || name == "null_terminated_bytes") {
      auto c = j.find("configuration");
      auto lb = c != j.end() && c->is_object() ? c->find("length_bytes") : j.end();
      const bool utf32 = name == "fixed_length_utf32";
      if (c == j.end() || !c->is_object() || lb == c->end() || !lb->is_number_integer() || lb->get<int64_t>() < 1 ||
          lb->get<int64_t>() > (1 << 30) || (utf32 && lb->get<int64_t>() % 4 != 0)) {
        return Status::InvalidFormat("data type '" + name + "' needs a positive integer \"length_bytes\"" +
                                     (utf32 ? std::string(" that is a multiple of 4") : std::string()));
      }
      const size_t bytes = static_cast<size_t>(lb->get<int64_t>());
      if (utf32) {
        return DataTypeInfo{DataType::kFixedUtf32, name, "<U" + std::to_string(bytes / 4), bytes, 4};
      }
      return DataTypeInfo{DataType::kFixedBytes, name, "|S" + std::to_string(bytes), bytes, 1};
    }
    return Status::Unimplemented("data type '" + name + "' (extension data types) is not supported by lsio yet");
  }
  if (!j.is_string()) return Status::InvalidFormat("\"data_type\" must be a string");
  const std::string s = j.get<std::string>();
  struct Row { const char* name; DataType t; const char* typestr; size_t itemsize; size_t swap; };
  static const Row kRows[] = {
      {"bool", DataType::kBool, "|b1", 1, 1},
      {"int8", DataType::kInt8, "|i1", 1, 1},
      {"int16", DataType::kInt16, "<i2", 2, 2},
      {"int32", DataType::kInt32, "<i4", 4, 4},
      {"int64", DataType::kInt64, "<i8", 8, 8},
      {"uint8", DataType::kUInt8, "|u1", 1, 1},
      {"uint16", DataType::kUInt16, "<u2", 2, 2},
      {"uint32", DataType::kUInt32, "<u4", 4, 4},
      {"uint64", DataType::kUInt64, "<u8", 8, 8},
      {"float16", DataType::kFloat16, "<f2", 2, 2},
      {"float32", DataType::kFloat32, "<f4", 4, 4},
      {"float64", DataType::kFloat64, "<f8", 8, 8},
      {"complex64", DataType::kComplex64, "<c8", 8, 4},
      {"complex128", DataType::kComplex128, "<c16", 16, 8},
  };
  for (const Row& r : kRows) {
    if (s == r.name) return DataTypeInfo{r.t, r.name, r.typestr, r.itemsize, r.swap};
  }
  return Status::Unimplemented("data type '" + s + "' is not supported by lsio yet");
}

}  // namespace lsio
