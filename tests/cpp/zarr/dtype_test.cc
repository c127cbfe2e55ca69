// Core data types: name -> itemsize, numpy typestr and byte-swap unit; extension types are
// kUnimplemented naming the type.
#include "zarr/dtype.h"

#include <gtest/gtest.h>

namespace lsio {
namespace {

TEST(DataTypeTest, CoreTypes) {
  struct Row {
    const char* name;
    DataType type;
    const char* typestr;
    size_t itemsize;
    size_t swap;
  };
  const Row rows[] = {
      {"bool", DataType::kBool, "|b1", 1, 1},          {"int8", DataType::kInt8, "|i1", 1, 1},
      {"int16", DataType::kInt16, "<i2", 2, 2},        {"int32", DataType::kInt32, "<i4", 4, 4},
      {"int64", DataType::kInt64, "<i8", 8, 8},        {"uint8", DataType::kUInt8, "|u1", 1, 1},
      {"uint16", DataType::kUInt16, "<u2", 2, 2},      {"uint32", DataType::kUInt32, "<u4", 4, 4},
      {"uint64", DataType::kUInt64, "<u8", 8, 8},      {"float16", DataType::kFloat16, "<f2", 2, 2},
      {"float32", DataType::kFloat32, "<f4", 4, 4},    {"float64", DataType::kFloat64, "<f8", 8, 8},
      {"complex64", DataType::kComplex64, "<c8", 8, 4}, {"complex128", DataType::kComplex128, "<c16", 16, 8},
  };
  for (const Row& r : rows) {
    auto dt = ParseDataType(nlohmann::json(r.name));
    ASSERT_TRUE(dt.ok()) << r.name;
    EXPECT_EQ(dt->type, r.type) << r.name;
    EXPECT_EQ(dt->name, r.name);
    EXPECT_EQ(dt->typestr, r.typestr) << r.name;
    EXPECT_EQ(dt->itemsize, r.itemsize) << r.name;
    EXPECT_EQ(dt->swap_unit, r.swap) << r.name;
  }
}

TEST(DataTypeTest, UnsupportedAndMalformed) {
  for (const char* name : {"r16", "string", "bfloat16", "Float32", "<f4"}) {
    auto dt = ParseDataType(nlohmann::json(name));
    ASSERT_FALSE(dt.ok()) << name;
    EXPECT_EQ(dt.status().code(), StatusCode::kUnimplemented);
    EXPECT_EQ(dt.status().message(), std::string("data type '") + name + "' is not supported by lsio yet");
  }
  auto ext = ParseDataType(nlohmann::json::parse(R"({"name": "struct", "configuration": {}})"));
  ASSERT_FALSE(ext.ok());
  EXPECT_EQ(ext.status().code(), StatusCode::kUnimplemented);
  EXPECT_EQ(ext.status().message(), "data type 'struct' (extension data types) is not supported by lsio yet");
  auto num = ParseDataType(nlohmann::json(4));
  ASSERT_FALSE(num.ok());
  EXPECT_EQ(num.status().code(), StatusCode::kInvalidFormat);
  EXPECT_EQ(num.status().message(), "\"data_type\" must be a string");
}

}  // namespace
}  // namespace lsio
