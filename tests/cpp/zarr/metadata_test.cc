// zarr.json parsing: the zarr-python and TensorStore documents of zarr-format.md §2.5, and
// every malformed or unsupported case with its code (kInvalidFormat / kUnimplemented) and
// message.
#include "zarr/metadata.h"
#include "zarr/node.h"

#include <cmath>
#include <cstring>
#include <functional>
#include <ostream>
#include <string>

#include <gtest/gtest.h>

namespace lsio {
namespace {

// zarr-format.md §2.5, zarr-python >= 3.1 create_array(shape=(100,100), chunks=(10,10),
// shards=(50,50), dtype="uint16").
const char* kZarrPython = R"({"shape": [100, 100], "data_type": "uint16",
 "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [50, 50]}},
 "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
 "fill_value": 0,
 "codecs": [{"name": "sharding_indexed", "configuration": {
     "chunk_shape": [10, 10],
     "codecs": [{"name": "bytes", "configuration": {"endian": "little"}},
                {"name": "zstd", "configuration": {"level": 0, "checksum": false}}],
     "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "crc32c"}],
     "index_location": "end"}}],
 "attributes": {}, "zarr_format": 3, "node_type": "array", "storage_transformers": []})";

// zarr-format.md §2.5, TensorStore "zarr3/data/sharded" (transpose before sharding).
const char* kTensorStore = R"({"zarr_format": 3, "node_type": "array", "shape": [20, 30], "data_type": "uint16", "fill_value": 0,
 "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [4, 6]}},
 "chunk_key_encoding": {"name": "default"},
 "codecs": [{"name": "transpose", "configuration": {"order": [1, 0]}},
            {"name": "sharding_indexed", "configuration": {
                "chunk_shape": [3, 2],
                "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
                "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "crc32c"}]}}]})";

// The same TensorStore style without the outer transpose (what lsio reads today).
const char* kTensorStoreNoTranspose = R"({"zarr_format": 3, "node_type": "array", "shape": [20, 30], "data_type": "uint16", "fill_value": 0,
 "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [4, 6]}},
 "chunk_key_encoding": {"name": "default"},
 "codecs": [{"name": "sharding_indexed", "configuration": {
                "chunk_shape": [2, 3],
                "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
                "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "crc32c"}]}}]})";

// A small valid unsharded document; tests patch one key at a time.
nlohmann::json Base() {
  return nlohmann::json::parse(R"({"zarr_format": 3, "node_type": "array", "shape": [10, 20], "data_type": "float32",
    "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [5, 5]}},
    "chunk_key_encoding": {"name": "default"}, "fill_value": 0.0,
    "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}]})");
}

Result<ArrayMetadata> Parse(const nlohmann::json& j) { return ParseArrayMetadata(j.dump()); }

TEST(MetadataTest, ZarrPythonShardedDocument) {
  auto m = ParseArrayMetadata(kZarrPython);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->shape, (std::vector<int64_t>{100, 100}));
  EXPECT_EQ(m->dtype.name, "uint16");
  EXPECT_EQ(m->dtype.itemsize, 2u);
  EXPECT_EQ(m->chunk_shape, (std::vector<int64_t>{50, 50}));
  EXPECT_EQ(m->read_chunk_shape, (std::vector<int64_t>{10, 10}));
  EXPECT_FALSE(m->key_encoding.v2);
  EXPECT_EQ(m->key_encoding.separator, '/');
  EXPECT_EQ(m->fill_value, (std::vector<uint8_t>{0, 0}));
  ASSERT_TRUE(m->sharding.has_value());
  EXPECT_EQ(m->sharding->chunks_per_shard, (std::vector<int64_t>{5, 5}));
  EXPECT_EQ(m->sharding->index_size, 25u * 16 + 4);
  EXPECT_TRUE(m->sharding->index_at_end);
  ASSERT_NE(m->sharding->index_chain, nullptr);
  EXPECT_EQ(m->sharding->index_chain->description(), "bytes, crc32c");
  ASSERT_NE(m->chain, nullptr);
  EXPECT_EQ(m->chain->decoded_size(), 200u);
  EXPECT_FALSE(m->chain->stored_is_decoded());
  EXPECT_EQ(m->codecs_description, "sharding_indexed[bytes, zstd]");
  EXPECT_EQ(m->attributes, nlohmann::json::object());
  EXPECT_FALSE(m->dimension_names.has_value());
}

TEST(MetadataTest, TensorStoreDocumentWithOuterTransposeReadsLogicalInnerBlocks) {
  // Outer [4, 6] transposed to [6, 4], inner [3, 2] of that: in the array's order the inner
  // blocks are [2, 3], two per shard along each axis, the index addressed as [1, 0].
  auto m = ParseArrayMetadata(kTensorStore);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  ASSERT_TRUE(m->sharding.has_value());
  EXPECT_EQ(m->read_chunk_shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(m->sharding->chunks_per_shard, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(m->sharding->index_order, (std::vector<int>{1, 0}));
  EXPECT_EQ(m->codecs_description, "sharding_indexed[transpose, bytes]");
}

TEST(MetadataTest, CompressionAfterShardingIsReadWhole) {
  nlohmann::json j = nlohmann::json::parse(kTensorStoreNoTranspose);
  j["codecs"].push_back({{"name", "zstd"}});
  j["codecs"].push_back({{"name", "crc32c"}});
  auto m = ParseArrayMetadata(j.dump());
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  ASSERT_EQ(m->shard_codecs.size(), 2u);
  EXPECT_EQ(m->codecs_description, "sharding_indexed[bytes], zstd, crc32c");
  j["codecs"].push_back({{"name", "transpose"}, {"configuration", {{"order", {1, 0}}}}});
  auto bad = ParseArrayMetadata(j.dump());
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidFormat) << bad.status().ToString();
}

TEST(MetadataTest, TensorStoreStyleDefaultsAreFilledIn) {
  // No attributes, no storage_transformers, no separator, no index_location.
  auto m = ParseArrayMetadata(kTensorStoreNoTranspose);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->key_encoding.separator, '/');
  ASSERT_TRUE(m->sharding.has_value());
  EXPECT_TRUE(m->sharding->index_at_end);
  EXPECT_EQ(m->sharding->chunks_per_shard, (std::vector<int64_t>{2, 2}));
  EXPECT_TRUE(m->chain->stored_is_decoded());
  EXPECT_EQ(m->codecs_description, "sharding_indexed[bytes]");
  EXPECT_EQ(m->attributes, nlohmann::json::object());
}

TEST(MetadataTest, UnshardedDocumentWithAttributesAndDimensionNames) {
  nlohmann::json j = Base();
  j["attributes"] = {{"units", "K"}, {"scale", 2.5}};
  j["dimension_names"] = {"y", nullptr};
  j["storage_transformers"] = nlohmann::json::array();
  auto m = Parse(j);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_FALSE(m->sharding.has_value());
  EXPECT_EQ(m->chunk_shape, (std::vector<int64_t>{5, 5}));
  EXPECT_EQ(m->read_chunk_shape, (std::vector<int64_t>{5, 5}));
  EXPECT_EQ(m->attributes["units"], "K");
  ASSERT_TRUE(m->dimension_names.has_value());
  EXPECT_EQ((*m->dimension_names)[0], std::optional<std::string>("y"));
  EXPECT_EQ((*m->dimension_names)[1], std::nullopt);
  EXPECT_EQ(m->codecs_description, "bytes");
}

TEST(MetadataTest, ZeroDimensionalAndZeroLengthArrays) {
  nlohmann::json j = Base();
  j["shape"] = nlohmann::json::array();
  j["chunk_grid"]["configuration"]["chunk_shape"] = nlohmann::json::array();
  auto m = Parse(j);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_TRUE(m->shape.empty());
  EXPECT_EQ(m->chain->decoded_size(), 4u);

  nlohmann::json z = Base();
  z["shape"] = {0, 20};
  auto mz = Parse(z);
  ASSERT_TRUE(mz.ok()) << mz.status().ToString();
  EXPECT_EQ(mz->shape, (std::vector<int64_t>{0, 20}));
}

TEST(MetadataTest, UnknownKeyWithMustUnderstandFalseIsIgnored) {
  nlohmann::json j = Base();
  j["consolidated_metadata"] = {{"kind", "inline"}, {"must_understand", false}, {"metadata", nlohmann::json::object()}};
  auto m = Parse(j);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
}

TEST(MetadataTest, ShortHandCodecsAndChunkKeyEncoding) {
  nlohmann::json j = Base();
  j["data_type"] = "uint8";
  j["fill_value"] = 3;
  j["codecs"] = {"bytes", "crc32c"};
  j["chunk_key_encoding"] = "v2";
  auto m = Parse(j);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_TRUE(m->key_encoding.v2);
  EXPECT_EQ(m->key_encoding.separator, '.');
  EXPECT_EQ(m->chain->FixedEncodedSize(), 25u + 4);
}

TEST(MetadataTest, BareNanAndInfinityTokensAreTolerated) {
  const std::string text = R"({"zarr_format": 3, "node_type": "array", "shape": [4], "data_type": "float64",
    "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [4]}},
    "chunk_key_encoding": {"name": "default"}, "fill_value": NaN,
    "codecs": ["bytes"], "attributes": {"lo": -Infinity, "hi": Infinity, "note": "NaN stays a string"}})";
  auto m = ParseArrayMetadata(text);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  double fill;
  std::memcpy(&fill, m->fill_value.data(), 8);
  EXPECT_TRUE(std::isnan(fill));
  // attributes_json keeps the bare tokens (Python's json reads them back as floats), and a
  // string that merely says NaN stays a string.
  EXPECT_EQ(m->attributes_json, R"({"hi":Infinity,"lo":-Infinity,"note":"NaN stays a string"})");
  EXPECT_EQ(m->attributes["note"], "NaN stays a string");
}

TEST(MetadataTest, LenientJsonKeepsEscapedQuotesInStrings) {
  auto j = ParseJsonLenient(R"({"a": "say \"NaN\" here", "b": NaN})");
  ASSERT_TRUE(j.ok()) << j.status().ToString();
  EXPECT_EQ((*j)["a"], "say \"NaN\" here") << "tokens inside strings are left alone";
  EXPECT_TRUE((*j)["b"].is_string()) << "a bare token becomes an internal marker string";
  EXPECT_NE((*j)["b"], "NaN") << "the marker must not collide with a real \"NaN\" string";
}

struct BadDoc {
  std::string name;
  std::function<void(nlohmann::json&)> patch;
  StatusCode code;
  std::string message;  // exact, or a substring when it starts with '~'
};

void PrintTo(const BadDoc& b, std::ostream* os) { *os << b.name; }

class MalformedMetadataTest : public testing::TestWithParam<BadDoc> {};

TEST_P(MalformedMetadataTest, IsRefused) {
  const BadDoc& b = GetParam();
  nlohmann::json j = Base();
  b.patch(j);
  auto m = Parse(j);
  ASSERT_FALSE(m.ok()) << b.name;
  EXPECT_EQ(m.status().code(), b.code) << b.name << ": " << m.status().ToString();
  if (!b.message.empty() && b.message[0] == '~') {
    EXPECT_NE(m.status().message().find(b.message.substr(1)), std::string::npos) << m.status().message();
  } else {
    EXPECT_EQ(m.status().message(), b.message);
  }
}

using J = nlohmann::json;
const StatusCode kFmt = StatusCode::kInvalidFormat;
const StatusCode kUnimpl = StatusCode::kUnimplemented;

INSTANTIATE_TEST_SUITE_P(
    Cases, MalformedMetadataTest,
    testing::Values(
        BadDoc{"NotAnObject", [](J& j) { j = J::array(); }, kFmt, "zarr.json must hold a JSON object"},
        BadDoc{"NoZarrFormat", [](J& j) { j.erase("zarr_format"); }, kFmt, "zarr.json lacks \"zarr_format\""},
        BadDoc{"ZarrFormat4", [](J& j) { j["zarr_format"] = 4; }, kFmt, "zarr_format must be 3, got 4"},
        BadDoc{"ZarrFormatString", [](J& j) { j["zarr_format"] = "3"; }, kFmt, "zarr_format must be 3, got \"3\""},
        BadDoc{"ZarrFormat2", [](J& j) { j["zarr_format"] = 2; }, kFmt,
               "zarr.json says zarr_format 2: a Zarr v2 array keeps its metadata in .zarray"},
        BadDoc{"NoNodeType", [](J& j) { j.erase("node_type"); }, kFmt, "zarr.json lacks \"node_type\""},
        BadDoc{"GroupNode", [](J& j) { j["node_type"] = "group"; }, kFmt, "node_type is 'group', expected 'array'"},
        BadDoc{"UnknownKey", [](J& j) { j["my_extension"] = {{"x", 1}}; }, kFmt,
               "unknown metadata key 'my_extension' that must be understood (no \"must_understand\": false)"},
        BadDoc{"UnknownKeyMustUnderstandTrue", [](J& j) { j["ext"] = {{"must_understand", true}}; }, kFmt,
               "~unknown metadata key 'ext'"},
        BadDoc{"UnknownScalarKey", [](J& j) { j["ext"] = false; }, kFmt, "~unknown metadata key 'ext'"},
        BadDoc{"NoShape", [](J& j) { j.erase("shape"); }, kFmt, "zarr.json lacks \"shape\""},
        BadDoc{"NoDataType", [](J& j) { j.erase("data_type"); }, kFmt, "zarr.json lacks \"data_type\""},
        BadDoc{"NoChunkGrid", [](J& j) { j.erase("chunk_grid"); }, kFmt, "zarr.json lacks \"chunk_grid\""},
        BadDoc{"NoKeyEncoding", [](J& j) { j.erase("chunk_key_encoding"); }, kFmt,
               "zarr.json lacks \"chunk_key_encoding\""},
        BadDoc{"NoFillValue", [](J& j) { j.erase("fill_value"); }, kFmt, "zarr.json lacks \"fill_value\""},
        BadDoc{"NoCodecs", [](J& j) { j.erase("codecs"); }, kFmt, "zarr.json lacks \"codecs\""},
        BadDoc{"ShapeNotAList", [](J& j) { j["shape"] = 10; }, kFmt, "shape must be a list of integers"},
        BadDoc{"NegativeShape", [](J& j) { j["shape"] = {10, -1}; }, kFmt, "shape entries must be >= 0, got -1"},
        BadDoc{"FloatShape", [](J& j) { j["shape"] = {10, 2.5}; }, kFmt, "shape must hold integers, got 2.5"},
        BadDoc{"HugeShape", [](J& j) { j["shape"] = {10, 1ull << 63}; }, kFmt,
               "shape must hold integers, got 9223372036854775808"},
        BadDoc{"ArrayTooLarge", [](J& j) { j["shape"] = {1ll << 40, 1ll << 40}; }, kFmt,
               "the array is too large (more than 2^63 bytes)"},
        BadDoc{"ZeroChunk", [](J& j) { j["chunk_grid"]["configuration"]["chunk_shape"] = {5, 0}; }, kFmt,
               "chunk_grid.chunk_shape entries must be >= 1, got 0"},
        BadDoc{"ChunkRankMismatch", [](J& j) { j["chunk_grid"]["configuration"]["chunk_shape"] = {5}; }, kFmt,
               "chunk_shape has rank 1, shape has rank 2"},
        BadDoc{"ChunkShapeMissing", [](J& j) { j["chunk_grid"]["configuration"] = J::object(); }, kFmt,
               "chunk_grid lacks chunk_shape"},
        BadDoc{"RectilinearGrid", [](J& j) { j["chunk_grid"] = {{"name", "rectilinear"}, {"configuration", J::object()}}; },
               kUnimpl, "chunk grid 'rectilinear' is not supported (only 'regular')"},
        BadDoc{"ChunkGridNotObject", [](J& j) { j["chunk_grid"] = 5; }, kFmt,
               "chunk_grid: codec must be an object or a string"},
        BadDoc{"UnknownKeyEncoding", [](J& j) { j["chunk_key_encoding"] = {{"name", "morton"}}; }, kUnimpl,
               "chunk key encoding 'morton' is not supported"},
        BadDoc{"BadSeparator", [](J& j) { j["chunk_key_encoding"] = {{"name", "default"}, {"configuration", {{"separator", "-"}}}}; },
               kFmt, "chunk_key_encoding: separator must be \"/\" or \".\", got '-'"},
        BadDoc{"ExtensionDataType", [](J& j) { j["data_type"] = {{"name", "numpy.datetime64"}, {"configuration", {{"unit", "s"}}}}; },
               kUnimpl, "data type 'numpy.datetime64' (extension data types) is not supported by lsio yet"},
        BadDoc{"StringDataType", [](J& j) { j["data_type"] = "string"; }, kUnimpl,
               "data type 'string' is not supported by lsio yet"},
        BadDoc{"NullFill", [](J& j) { j["fill_value"] = nullptr; }, kFmt,
               "fill_value null is not valid for data type float32: null is not allowed in Zarr v3"},
        BadDoc{"StorageTransformer", [](J& j) { j["storage_transformers"] = {{{"name", "x"}}}; }, kUnimpl,
               "storage transformers are not supported"},
        BadDoc{"StorageTransformersNotList", [](J& j) { j["storage_transformers"] = J::object(); }, kFmt,
               "storage_transformers must be a list"},
        BadDoc{"AttributesNotObject", [](J& j) { j["attributes"] = J::array(); }, kFmt, "attributes must be an object"},
        BadDoc{"DimensionNamesWrongLength", [](J& j) { j["dimension_names"] = {"x"}; }, kFmt,
               "dimension_names must be a list with one entry per dimension"},
        BadDoc{"DimensionNamesNotStrings", [](J& j) { j["dimension_names"] = {"x", 1}; }, kFmt,
               "dimension_names entries must be strings or null"},
        BadDoc{"CodecsNotList", [](J& j) { j["codecs"] = "bytes"; }, kFmt, "\"codecs\" must be a list"},
        BadDoc{"CodecsEmpty", [](J& j) { j["codecs"] = J::array(); }, kFmt, "\"codecs\" must not be empty"},
        BadDoc{"UnknownCodec", [](J& j) { j["codecs"] = {"bytes", "lzma"}; }, kUnimpl, "unknown codec 'lzma'"},
        BadDoc{"ElementFilterAfterBytes",
               [](J& j) { j["codecs"] = {"bytes", {{"name", "numcodecs.delta"}, {"configuration", {{"dtype", "<f4"}}}}}; },
               kFmt, "codec 'numcodecs.delta' is an array -> array codec: it must come before \"bytes\""},
        BadDoc{"ElementFilterThenTranspose",
               [](J& j) {
                 j["codecs"] = {{{"name", "numcodecs.delta"}, {"configuration", {{"dtype", "<f4"}}}},
                                {{"name", "transpose"}, {"configuration", {{"order", {1, 0}}}}}, "bytes"};
               },
               kUnimpl, "codec 'transpose' between numcodecs element filters and \"bytes\" is not supported by lsio yet"},
        BadDoc{"ElementFilterOfAnotherSize",
               [](J& j) { j["codecs"] = {{{"name", "numcodecs.delta"}, {"configuration", {{"dtype", "<i8"}}}}, "bytes"}; },
               kFmt, "codec 'numcodecs.delta': \"dtype\" <i8 is not the array's data type (4-byte items)"},
        BadDoc{"PackbitsCodec", [](J& j) { j["codecs"] = {{{"name", "packbits"}}}; }, kUnimpl,
               "codec 'packbits' is not supported by lsio yet"},
        BadDoc{"BloscBadShuffle",
               [](J& j) { j["codecs"] = {"bytes", {{"name", "blosc"}, {"configuration", {{"shuffle", "byte"}}}}}; },
               kFmt, "blosc codec: \"shuffle\" must be one of bitshuffle, noshuffle, shuffle, got \"byte\""},
        BadDoc{"NoArrayToBytes", [](J& j) { j["codecs"] = {"zstd"}; }, kFmt,
               "codec 'zstd' (bytes -> bytes) before the array -> bytes codec"},
        BadDoc{"ShardingNestedThreeDeep",
               [](J& j) {
                 J third = {{"name", "sharding_indexed"},
                            {"configuration", {{"chunk_shape", {1, 1}}, {"codecs", {"bytes"}}, {"index_codecs", {"bytes"}}}}};
                 J inner = {{"name", "sharding_indexed"},
                            {"configuration", {{"chunk_shape", {1, 1}}, {"codecs", {third}}, {"index_codecs", {"bytes"}}}}};
                 j["codecs"] = {{{"name", "sharding_indexed"},
                                 {"configuration", {{"chunk_shape", {5, 5}}, {"codecs", {inner}}, {"index_codecs", {"bytes"}}}}}};
               },
               kUnimpl, "~more than two levels deep"},
        BadDoc{"NestedShardingBesideOtherCodecs",
               [](J& j) {
                 J inner = {{"name", "sharding_indexed"},
                            {"configuration", {{"chunk_shape", {1, 1}}, {"codecs", {"bytes"}}, {"index_codecs", {"bytes"}}}}};
                 j["codecs"] = {{{"name", "sharding_indexed"},
                                 {"configuration", {{"chunk_shape", {5, 5}}, {"codecs", {inner, "zstd"}}, {"index_codecs", {"bytes"}}}}}};
               },
               kUnimpl, "~other codecs beside the inner sharding_indexed"},
        BadDoc{"ShardingWithoutInnerCodecs",
               [](J& j) {
                 j["codecs"] = {{{"name", "sharding_indexed"},
                                 {"configuration", {{"chunk_shape", {5, 5}}, {"index_codecs", {"bytes"}}}}}};
               },
               kFmt, "sharding_indexed: missing inner \"codecs\" list"},
        BadDoc{"InnerChunkNotDividing",
               [](J& j) {
                 j["codecs"] = {{{"name", "sharding_indexed"},
                                 {"configuration", {{"chunk_shape", {2, 5}}, {"codecs", {"bytes"}}, {"index_codecs", {"bytes"}}}}}};
               },
               kFmt, "~does not divide the shard shape (dimension 0: 5 % 2 != 0)"}),
    [](const testing::TestParamInfo<BadDoc>& info) { return info.param.name; });

TEST(MetadataTest, InvalidJsonIsInvalidFormat) {
  for (const char* text : {"", "{", "{\"zarr_format\": 3,}", "not json", "{\"a\": Nan}"}) {
    auto m = ParseArrayMetadata(text);
    ASSERT_FALSE(m.ok()) << text;
    EXPECT_EQ(m.status().code(), StatusCode::kInvalidFormat) << text;
    EXPECT_EQ(m.status().message(), "zarr.json is not valid JSON") << text;
  }
}

// Zarr v2: .zarray as zarr-python 2.13 writes it (zarr-format.md §7.5), and variations.
constexpr const char* kZarray =
    R"({"chunks": [2, 3], "compressor": {"blocksize": 0, "clevel": 5, "cname": "lz4", "id": "blosc", "shuffle": 1},
        "dtype": "<u2", "fill_value": 0, "filters": null, "order": "C", "shape": [5, 4], "zarr_format": 2})";

nlohmann::json V2Doc() {
  nlohmann::json j = nlohmann::json::parse(kZarray);
  j["compressor"] = {{"id", "zstd"}, {"level", 3}};
  return j;
}

TEST(MetadataV2Test, ParsesIntoTheV3Structures) {
  auto m = ParseArrayMetadataV2(V2Doc().dump(), R"({"_ARRAY_DIMENSIONS": ["y", "x"], "units": "K"})");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->zarr_format, 2);
  EXPECT_EQ(m->shape, (std::vector<int64_t>{5, 4}));
  EXPECT_EQ(m->chunk_shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(m->read_chunk_shape, m->chunk_shape);
  EXPECT_FALSE(m->sharding.has_value());
  EXPECT_EQ(m->dtype.name, "uint16");
  EXPECT_TRUE(m->key_encoding.v2);
  EXPECT_EQ(m->key_encoding.separator, '.');
  EXPECT_EQ(m->codecs_description, "v2[bytes, zstd]");
  ASSERT_TRUE(m->dimension_names.has_value());
  EXPECT_EQ(*m->dimension_names, (std::vector<std::optional<std::string>>{"y", "x"}));
  EXPECT_EQ(m->attributes["units"], "K");
}

TEST(MetadataV2Test, CodecIdsThatAreNotStringsAreErrorsNotExceptions) {
  // Found by node_fuzzer: a numeric "id" made nlohmann's value() throw out of the parser.
  for (const char* field : {"compressor", "filters", "order"}) {
    nlohmann::json j = V2Doc();
    if (std::string(field) == "compressor") j["compressor"] = {{"id", 0}};
    if (std::string(field) == "filters") j["filters"] = nlohmann::json::array({{{"id", 7}}});
    if (std::string(field) == "order") j["order"] = 3;
    auto m = ParseArrayMetadataV2(j.dump(), "");
    EXPECT_FALSE(m.ok()) << field;
    EXPECT_EQ(V2ArrayAsV3(j, nlohmann::json::object())["zarr_format"], 2) << field;
  }
}

TEST(MetadataV2Test, FiltersAndLz4BecomeBytesToBytesCodecs) {
  nlohmann::json j = V2Doc();
  j["filters"] = {{{"id", "delta"}, {"dtype", "<u2"}}, {{"id", "shuffle"}, {"elementsize", 2}}};
  j["compressor"] = {{"id", "lz4"}, {"acceleration", 1}};
  auto m = ParseArrayMetadataV2(j.dump(), "");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  // Encoding order (filters in order, then the compressor); decoded in reverse.
  EXPECT_EQ(m->codecs_description, "v2[bytes, delta, numcodecs.shuffle, numcodecs.lz4]");
}

TEST(MetadataV2Test, FixedWidthStringsAreV3StringTypes) {
  nlohmann::json j = V2Doc();
  j["dtype"] = ">U3";
  j["fill_value"] = "ab";
  auto m = ParseArrayMetadataV2(j.dump(), "");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->dtype.type, DataType::kFixedUtf32);
  EXPECT_EQ(m->dtype.typestr, "<U3");  // returned in native order
  EXPECT_EQ(m->dtype.itemsize, 12u);
  EXPECT_EQ(m->codecs_description, "v2[bytes(big), zstd]");
  EXPECT_EQ(m->fill_value, (std::vector<uint8_t>{'a', 0, 0, 0, 'b', 0, 0, 0, 0, 0, 0, 0}));
  j["dtype"] = "|S4";
  j["fill_value"] = "eHk=";  // base64 of "xy"
  m = ParseArrayMetadataV2(j.dump(), "");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->dtype.typestr, "|S4");
  EXPECT_EQ(m->fill_value, (std::vector<uint8_t>{'x', 'y', 0, 0}));
  j["fill_value"] = nullptr;
  m = ParseArrayMetadataV2(j.dump(), "");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->fill_value, std::vector<uint8_t>(4, 0));
  j["fill_value"] = "not base64!";
  EXPECT_EQ(ParseArrayMetadataV2(j.dump(), "").status().code(), StatusCode::kInvalidFormat);
}

TEST(MetadataV2Test, BloscIsTheV3BloscCodec) {
  // zarr-python 2's default compressor, as written (numcodecs keys).
  auto m = ParseArrayMetadataV2(kZarray, "");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->codecs_description, "v2[bytes, blosc]");
  nlohmann::json j = nlohmann::json::parse(kZarray);
  j["compressor"]["shuffle"] = -1;  // TensorStore's AUTOSHUFFLE
  j["compressor"].erase("blocksize");
  m = ParseArrayMetadataV2(j.dump(), "");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
}

TEST(MetadataV2Test, NullCompressorFieldsAreLeftUnsaid) {
  // numcodecs builds a codec with None for a null key and decodes without it; so does lsio,
  // with no default standing in for it (lz4's null "acceleration" was refused as a non-integer).
  const std::vector<std::pair<nlohmann::json, std::string>> cases = {
      {nlohmann::json::parse(kZarray)["compressor"], "clevel"},
      {nlohmann::json::parse(kZarray)["compressor"], "cname"},
      {nlohmann::json::parse(kZarray)["compressor"], "shuffle"},
      {nlohmann::json::parse(kZarray)["compressor"], "blocksize"},
      {{{"id", "zstd"}, {"level", 1}, {"checksum", true}}, "level"},
      {{{"id", "zstd"}, {"level", 1}, {"checksum", true}}, "checksum"},
      {{{"id", "gzip"}, {"level", 1}}, "level"},
      {{{"id", "zlib"}, {"level", 1}}, "level"},
      {{{"id", "lz4"}, {"acceleration", 1}}, "acceleration"},
  };
  for (auto [compressor, key] : cases) {
    nlohmann::json j = V2Doc();
    compressor[key] = nullptr;
    j["compressor"] = compressor;
    auto m = ParseArrayMetadataV2(j.dump(), "");
    EXPECT_TRUE(m.ok()) << compressor.dump() << ": " << m.status().ToString();
  }
  // A value that is given is still checked.
  nlohmann::json j = V2Doc();
  j["compressor"] = nlohmann::json::parse(kZarray)["compressor"];
  j["compressor"]["clevel"] = "5";
  auto m = ParseArrayMetadataV2(j.dump(), "");
  EXPECT_EQ(m.status().code(), StatusCode::kInvalidFormat);
  EXPECT_NE(m.status().message().find("blosc clevel must be an integer or null, got \"5\""), std::string::npos)
      << m.status().message();
  j["compressor"]["clevel"] = 5;
  j["compressor"]["cname"] = 4;
  m = ParseArrayMetadataV2(j.dump(), "");
  EXPECT_EQ(m.status().code(), StatusCode::kInvalidFormat);
  EXPECT_NE(m.status().message().find("\"cname\""), std::string::npos) << m.status().message();
}

TEST(MetadataV2Test, OrderFByteOrderSeparatorAndFills) {
  nlohmann::json j = V2Doc();
  j["order"] = "F";
  j["dtype"] = ">f4";
  j["dimension_separator"] = "/";
  j["fill_value"] = "-Infinity";
  auto m = ParseArrayMetadataV2(j.dump(), "");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->codecs_description, "v2[transpose, bytes(big), zstd]");
  EXPECT_EQ(m->key_encoding.separator, '/');
  float f;
  ASSERT_EQ(m->fill_value.size(), sizeof f);
  std::memcpy(&f, m->fill_value.data(), sizeof f);
  EXPECT_TRUE(std::isinf(f) && f < 0);
  // null: the dtype's zero, as zarr-python 3 reads it; a bare NaN token is tolerated.
  j["fill_value"] = nullptr;
  m = ParseArrayMetadataV2(j.dump(), "");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->fill_value, std::vector<uint8_t>(4, 0));
  std::string bare = j.dump();
  bare.replace(bare.find("null"), 4, "NaN");
  m = ParseArrayMetadataV2(bare, "");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  std::memcpy(&f, m->fill_value.data(), sizeof f);
  EXPECT_TRUE(std::isnan(f));
  // zlib streams are inflated by the gzip codec; the description says what was stored.
  j["compressor"] = {{"id", "zlib"}, {"level", 1}};
  j["order"] = "C";
  m = ParseArrayMetadataV2(j.dump(), "");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->codecs_description, "v2[bytes(big), zlib]");
}

TEST(MetadataV2Test, UnsupportedAndMalformedAreTypedErrors) {
  struct Case {
    std::function<void(nlohmann::json&)> edit;
    StatusCode code;
    std::string words;
  };
  const std::vector<Case> cases = {
      {[](nlohmann::json& j) { j["compressor"] = {{"id", "pcodec"}, {"level", 8}}; }, kUnimpl,
       "compressor 'pcodec' is not supported by lsio yet"},
      {[](nlohmann::json& j) { j["compressor"] = {{"id", "lzma"}, {"format", 3}}; }, kFmt,
       "raw streams (format 3) need a non-empty \"filters\" list"},
      {[](nlohmann::json& j) {
         j["compressor"] = {{"id", "lzma"}, {"format", 3}, {"filters", {{{"id", 33}, {"dict_size", 1u << 31}}}}};
       },
       kUnimpl, "more than lsio allows"},
      {[](nlohmann::json& j) { j["compressor"] = nlohmann::json::parse(kZarray)["compressor"]; j["compressor"]["shuffle"] = 3; },
       kFmt, "blosc shuffle must be -1, 0, 1 or 2"},
      {[](nlohmann::json& j) { j["filters"] = {{{"id", "astype"}, {"encode_dtype", "<i2"}}}; }, kUnimpl,
       "filter 'astype' is not supported by lsio yet"},
      {[](nlohmann::json& j) { j["filters"] = {{{"id", "fixedscaleoffset"}, {"scale", 2}}}; }, kFmt,
       "fixedscaleoffset filter: \"dtype\" is missing"},
      {[](nlohmann::json& j) { j["filters"] = {"delta"}; }, kFmt, "filters must be objects with a string \"id\""},
      {[](nlohmann::json& j) { j["dtype"] = "|O"; }, kUnimpl,
       "dtype '|O' (variable-length strings or objects) is not supported by lsio yet"},
      {[](nlohmann::json& j) { j["dtype"] = "|U4"; }, kFmt, "dtype '|U4' needs a byte order"},
      {[](nlohmann::json& j) { j["dtype"] = "<M8[ns]"; }, kUnimpl, "(datetime/timedelta)"},
      {[](nlohmann::json& j) { j["dtype"] = nlohmann::json::parse(R"([[["title", "a"], "<f4"]])"); }, kUnimpl, "titles"},
      {[](nlohmann::json& j) { j["dtype"] = "|f4"; }, kFmt, "needs a byte order"},
      {[](nlohmann::json& j) { j["order"] = "K"; }, kFmt, "order must be \"C\" or \"F\""},
      {[](nlohmann::json& j) { j["chunks"] = {2}; }, kFmt, "chunks has rank 1, shape has rank 2"},
      {[](nlohmann::json& j) { j.erase("fill_value"); }, kFmt, ".zarray lacks \"fill_value\""},
      {[](nlohmann::json& j) { j["zarr_format"] = 3; }, kFmt, "zarr_format must be 2"},
      {[](nlohmann::json& j) { j["dimension_separator"] = "-"; }, kFmt, "dimension_separator"},
      {[](nlohmann::json& j) { j["compressor"] = {{"level", 1}}; }, kFmt, "compressor lacks a string \"id\""},
  };
  for (const Case& c : cases) {
    nlohmann::json j = V2Doc();
    c.edit(j);
    auto m = ParseArrayMetadataV2(j.dump(), "");
    ASSERT_FALSE(m.ok()) << j.dump();
    EXPECT_EQ(m.status().code(), c.code) << m.status().ToString();
    EXPECT_NE(m.status().message().find(c.words), std::string::npos) << m.status().message();
  }
  EXPECT_EQ(ParseArrayMetadataV2("{", "").status().message(), ".zarray is not valid JSON");
  EXPECT_EQ(ParseArrayMetadataV2(V2Doc().dump(), "[1]").status().message(), ".zattrs must hold a JSON object");
}

}  // namespace
}  // namespace lsio
