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

TEST(DataTypeTest, V3RecordTypes) {
  // zarr-python 3's "structured": fields little-endian, nested records, datetime fields.
  auto r = ParseDataType(nlohmann::json::parse(R"({"name": "structured", "configuration": {"fields": [
      ["a", "int32"], ["s", {"name": "null_terminated_bytes", "configuration": {"length_bytes": 2}}],
      ["n", {"name": "structured", "configuration": {"fields": [
          ["u", {"name": "fixed_length_utf32", "configuration": {"length_bytes": 4}}], ["b", "bool"]]}}],
      ["t", {"name": "numpy.datetime64", "configuration": {"unit": "s", "scale_factor": 10}}],
      ["v", {"name": "raw_bytes", "configuration": {"length_bytes": 3}}]]}})"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->type, DataType::kStructured);
  EXPECT_EQ(r->itemsize, 4u + 2 + 5 + 8 + 3);
  EXPECT_EQ(r->swap_unit, 1u);  // never swapped: the descr says each field's order
  EXPECT_EQ(r->typestr, "|V22");
  EXPECT_EQ(r->descr, R"([["a","<i4"],["s","|S2"],["n",[["u","<U1"],["b","|b1"]]],["t","<M8[10s]"],["v","|V3"]])");
  // numpy's cast of 0: "0" in string fields, zeros elsewhere.
  std::vector<uint8_t> zero(22, 0);
  zero[4] = '0';
  zero[6] = '0';
  EXPECT_EQ(r->zero, zero);
  // The fill value: the base64 of exactly one element.
  auto one = ParseDataType(nlohmann::json::parse(R"({"name": "structured", "configuration": {"fields": [["a", "int32"]]}})"));
  ASSERT_TRUE(one.ok());
  auto fill = ParseFillValue(nlohmann::json("AQAAAA=="), *one);
  ASSERT_TRUE(fill.ok()) << fill.status().ToString();
  EXPECT_EQ(*fill, (std::vector<uint8_t>{1, 0, 0, 0}));
  EXPECT_EQ(ParseFillValue(nlohmann::json("AQAA"), *r).status().code(), StatusCode::kInvalidFormat);
  EXPECT_EQ(ParseFillValue(nlohmann::json(0), *r).status().code(), StatusCode::kInvalidFormat);
  for (const char* doc : {
           R"({"name": "structured"})",
           R"({"name": "structured", "configuration": {"fields": []}})",
           R"({"name": "structured", "configuration": {"fields": [["a"]]}})",
           R"({"name": "structured", "configuration": {"fields": [["a", "int8"], ["a", "int8"]]}})",
           R"({"name": "structured", "configuration": {"fields": [["a", {"name": "raw_bytes", "configuration": {}}]]}})",
       }) {
    EXPECT_EQ(ParseDataType(nlohmann::json::parse(doc)).status().code(), StatusCode::kInvalidFormat) << doc;
  }
  auto unknown = ParseDataType(nlohmann::json::parse(R"({"name": "structured", "configuration": {"fields": [["a", "r8"]]}})"));
  EXPECT_EQ(unknown.status().code(), StatusCode::kUnimplemented);
}

TEST(DataTypeTest, V2RecordTypes) {
  // numpy's descr: byte orders kept, subarray fields, nested records, padding named f<i>.
  auto r = ParseV2StructuredType(nlohmann::json::parse(
      R"([["", "|V2"], ["b", ">f8", [2]], ["c", [["x", "<u2"], ["y", ">U1"]]], ["d", "|S2", 3], ["e", "<i1"]])"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->itemsize, 2u + 16 + 6 + 6 + 1);
  EXPECT_EQ(r->descr, R"([["f0","|V2"],["b",">f8",[2]],["c",[["x","<u2"],["y",">U1"]]],["d","|S2",[3]],["e","|i1"]])");
  std::vector<uint8_t> zero(31, 0);
  zero[2 + 16 + 2 + 3] = '0';  // big-endian UTF-32 "0"
  zero[24] = zero[26] = zero[28] = '0';
  EXPECT_EQ(r->zero, zero);
  struct Bad {
    const char* doc;
    StatusCode code;
  };
  const Bad bad[] = {
      {R"([])", StatusCode::kInvalidFormat},
      {R"([["a", "<i4"], ["a", "<i4"]])", StatusCode::kInvalidFormat},
      {R"([["f1", "<i4"], ["", "<i4"]])", StatusCode::kInvalidFormat},  // numpy names the second f1
      {R"([["a", "|i4"]])", StatusCode::kInvalidFormat},
      {R"([["a", "<M8[3fortnights]"]])", StatusCode::kInvalidFormat},
      {R"([["a", "<i4", [-1]]])", StatusCode::kInvalidFormat},
      {R"([["a", "<i8", [1073741824, 1073741824, 1073741824]]])", StatusCode::kInvalidFormat},
      {R"([["a", "<i4", [0]]])", StatusCode::kInvalidFormat},  // an element of no bytes
      {R"([["a", "|O"]])", StatusCode::kUnimplemented},
      {R"([["a", "<f16"]])", StatusCode::kUnimplemented},
      {R"([[["title", "a"], "<i4"]])", StatusCode::kUnimplemented},
  };
  for (const Bad& b : bad) {
    EXPECT_EQ(ParseV2StructuredType(nlohmann::json::parse(b.doc)).status().code(), b.code) << b.doc;
  }
  nlohmann::json deep = nlohmann::json::parse(R"([["x", "<i4"]])");
  for (int k = 0; k < 16; ++k) deep = nlohmann::json::array({nlohmann::json::array({"n", deep})});
  EXPECT_EQ(ParseV2StructuredType(deep).status().code(), StatusCode::kInvalidFormat);
}

TEST(DataTypeTest, Hdf5Compounds) {
  // numpy's dict form: members at offsets, padding kept, nested compounds, subarrays.
  auto c = ParseDataType(nlohmann::json::parse(R"({"name": "lsio.hdf5.compound", "configuration": {
      "names": ["a", "s", "n", "p"], "offsets": [2, 4, 8, 16], "itemsize": 28,
      "formats": ["<u2", "|S3", {"names": ["k"], "formats": [">U1"], "offsets": [0], "itemsize": 4},
                  {"subarray": "<f4", "shape": [3]}]}})"));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->type, DataType::kStructured);
  EXPECT_EQ(c->itemsize, 28u);
  EXPECT_EQ(c->typestr, "|V28");
  EXPECT_EQ(nlohmann::json::parse(c->descr)["offsets"], nlohmann::json::parse("[2, 4, 8, 16]"));
  EXPECT_TRUE(c->zero.empty());  // HDF5 datasets always have a fill value: none built
  for (const char* config : {
           R"({"names": ["a", "b"], "formats": ["<i4", "<i4"], "offsets": [0, 2], "itemsize": 8})",  // overlap
           R"({"names": ["a"], "formats": ["<i8"], "offsets": [4], "itemsize": 8})",                  // past the end
           R"({"names": ["a", "a"], "formats": ["<i1", "<i1"], "offsets": [0, 1], "itemsize": 2})",   // same name
           R"({"names": [""], "formats": ["<i1"], "offsets": [0], "itemsize": 1})",
           R"({"names": ["a"], "formats": ["<i1"], "offsets": [-1], "itemsize": 1})",
           R"({"names": ["a"], "formats": ["<i1"], "offsets": [0], "itemsize": 0})",
           R"({"names": ["a"], "formats": ["<i1"], "offsets": [0, 1], "itemsize": 2})",
           R"({"names": ["a"], "formats": [{"subarray": "<i1", "shape": [-1]}], "offsets": [0], "itemsize": 1})",
           R"({"names": ["a"], "formats": [7], "offsets": [0], "itemsize": 1})",
           R"({"names": ["a"], "formats": [{"subarray": {"subarray": "<i1", "shape": [0]}, "shape": [1073741824]}],
               "offsets": [0], "itemsize": 1})",  // numpy refuses a subarray of empty elements
       }) {
    nlohmann::json j = {{"name", "lsio.hdf5.compound"}, {"configuration", nlohmann::json::parse(config)}};
    EXPECT_EQ(ParseDataType(j).status().code(), StatusCode::kInvalidFormat) << config;
  }
  // Only at the top: not a field type of a zarr-python record.
  auto nested = ParseDataType(nlohmann::json::parse(R"({"name": "structured", "configuration": {"fields": [
      ["c", {"name": "lsio.hdf5.compound", "configuration": {"names": ["a"], "formats": ["<i1"], "offsets": [0], "itemsize": 1}}]]}})"));
  EXPECT_EQ(nested.status().code(), StatusCode::kUnimplemented);
}

}  // namespace
}  // namespace lsio
