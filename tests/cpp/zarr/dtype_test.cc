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

TEST(DataTypeTest, FixedWidthStrings) {
  auto u = ParseDataType(nlohmann::json::parse(R"({"name": "fixed_length_utf32", "configuration": {"length_bytes": 12}})"));
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  EXPECT_EQ(u->type, DataType::kFixedUtf32);
  EXPECT_EQ(u->typestr, "<U3");
  EXPECT_EQ(u->itemsize, 12u);
  EXPECT_EQ(u->swap_unit, 4u);
  auto s = ParseDataType(nlohmann::json::parse(R"({"name": "null_terminated_bytes", "configuration": {"length_bytes": 5}})"));
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->typestr, "|S5");
  EXPECT_EQ(s->swap_unit, 1u);
  // Fill values: UTF-8 text to UTF-32 (beyond the BMP too), base64 bytes; zero-padded.
  std::string text = "\xc3\xa9\xf0\x9f\x98\x80";  // "é😀" in UTF-8
  auto fill = ParseFillValue(nlohmann::json(text), *u);
  ASSERT_TRUE(fill.ok()) << fill.status().ToString();
  EXPECT_EQ(*fill, (std::vector<uint8_t>{0xE9, 0, 0, 0, 0x00, 0xF6, 0x01, 0, 0, 0, 0, 0}));
  auto bytes = ParseFillValue(nlohmann::json("eHk="), *s);
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ(*bytes, (std::vector<uint8_t>{'x', 'y', 0, 0, 0}));
  for (const nlohmann::json& bad : {nlohmann::json("four"), nlohmann::json(3)}) {
    EXPECT_EQ(ParseFillValue(bad, *u).status().code(), StatusCode::kInvalidFormat) << bad.dump();
  }
  EXPECT_EQ(ParseFillValue(nlohmann::json("not base64"), *s).status().code(), StatusCode::kInvalidFormat);
  EXPECT_EQ(ParseFillValue(nlohmann::json("eHl6eHl6"), *s).status().code(), StatusCode::kInvalidFormat);  // 6 bytes
  for (const char* doc : {R"({"name": "fixed_length_utf32", "configuration": {"length_bytes": 6}})",
                          R"({"name": "fixed_length_utf32"})",
                          R"({"name": "null_terminated_bytes", "configuration": {"length_bytes": 0}})"}) {
    EXPECT_EQ(ParseDataType(nlohmann::json::parse(doc)).status().code(), StatusCode::kInvalidFormat) << doc;
  }
}

}  // namespace
}  // namespace lsio
