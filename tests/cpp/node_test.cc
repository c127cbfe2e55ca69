// lsio/node.h: node metadata read from directories written file by file: a v2 group (with and
// without .zmetadata), v2 arrays (numbers, vlen strings, order F, unsupported compressors
// described not refused), a v3 group with inline consolidated metadata, malformed JSON naming
// the file; and lsio::StringArray reading chunks of such a node.
#include "lsio/node.h"

#include <gtest/gtest.h>

#include "lsio/strings.h"
#include "test_util.h"

namespace lsio {
namespace {

using lsio_test::TempDir;

Node Read(const TempDir& dir, const std::string& prefix = "", bool v2_consolidated = true) {
  auto r = ReadNode(dir.path(), prefix, v2_consolidated);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r.ok() && r.value().has_value());
  return r.ok() && r.value().has_value() ? *r.value() : Node{};
}

std::vector<std::string> Keys(const Node& n) {
  std::vector<std::string> keys;
  for (const NodeFile& f : n.files) keys.push_back(f.key);
  return keys;
}

TEST(NodeTest, V2GroupWithAndWithoutConsolidatedMetadata) {
  TempDir dir;
  dir.Write(".zgroup", R"({"zarr_format": 2})");
  dir.Write(".zattrs", R"({"title": "t", "bad": NaN})");
  dir.Write(".zmetadata", R"({"zarr_consolidated_format": 1, "metadata": {
      ".zgroup": {"zarr_format": 2},
      "a/.zarray": {"zarr_format": 2, "shape": [4], "chunks": [2], "dtype": "<f4", "compressor": null,
                    "fill_value": null, "order": "C", "filters": null},
      "a/.zattrs": {"_ARRAY_DIMENSIONS": ["x"]},
      "sub/.zgroup": {"zarr_format": 2}}})");
  Node g = Read(dir);
  EXPECT_EQ(g.node_type, "group");
  EXPECT_EQ(g.zarr_format, 2);
  EXPECT_EQ(Keys(g), (std::vector<std::string>{".zgroup", ".zattrs", ".zmetadata"}));
  EXPECT_EQ(g.files[0].location, dir.Join(".zgroup"));
  EXPECT_EQ(g.metadata["attributes"]["title"], "t");
  EXPECT_NE(NodeJsonText(g.metadata).find("\"bad\":NaN"), std::string::npos) << NodeJsonText(g.metadata);
  ASSERT_TRUE(g.consolidated.is_object());
  EXPECT_EQ(g.consolidated.size(), 2u);
  const nlohmann::json& a = g.consolidated["a"];
  EXPECT_EQ(a["node_type"], "array");
  EXPECT_EQ(a["data_type"], "float32");
  EXPECT_TRUE(a["fill_value"].is_null()) << "null stays null: no fill value";
  EXPECT_EQ(a["dimension_names"], nlohmann::json({"x"}));
  EXPECT_EQ(g.consolidated["sub"]["node_type"], "group");

  Node plain = Read(dir, "", /*v2_consolidated=*/false);
  EXPECT_EQ(Keys(plain), (std::vector<std::string>{".zgroup", ".zattrs"}));
  EXPECT_TRUE(plain.consolidated.is_null());
}

TEST(NodeTest, V2ArraysInTheV3Form) {
  TempDir dir;
  dir.Write("n/.zarray", R"({"zarr_format": 2, "shape": [6, 4], "chunks": [3, 2], "dtype": ">i2",
      "compressor": {"id": "zlib", "level": 1}, "fill_value": 7, "order": "F", "filters": null,
      "dimension_separator": "/"})");
  Node n = Read(dir, "n");
  EXPECT_EQ(n.node_type, "array");
  EXPECT_EQ(Keys(n), (std::vector<std::string>{"n/.zarray"}));
  const nlohmann::json& m = n.metadata;
  EXPECT_EQ(m["zarr_format"], 2);
  EXPECT_EQ(m["shape"], nlohmann::json({6, 4}));
  EXPECT_EQ(m["data_type"], "int16");
  EXPECT_EQ(m["chunk_grid"]["configuration"]["chunk_shape"], nlohmann::json({3, 2}));
  EXPECT_EQ(m["chunk_key_encoding"], (nlohmann::json{{"name", "v2"}, {"configuration", {{"separator", "/"}}}}));
  EXPECT_EQ(m["fill_value"], 7);
  ASSERT_EQ(m["codecs"].size(), 3u);
  EXPECT_EQ(m["codecs"][0]["name"], "transpose");
  EXPECT_EQ(m["codecs"][1], (nlohmann::json{{"name", "bytes"}, {"configuration", {{"endian", "big"}}}}));
  EXPECT_EQ(m["codecs"][2]["name"], "gzip");

  dir.Write("s/.zarray", R"({"zarr_format": 2, "shape": [3], "chunks": [2], "dtype": "|O",
      "compressor": {"id": "bz2", "level": 1}, "fill_value": "", "order": "C",
      "filters": [{"id": "vlen-utf8"}]})");
  Node s = Read(dir, "s");
  EXPECT_EQ(s.metadata["data_type"], "string");
  EXPECT_EQ(s.metadata["codecs"][0], (nlohmann::json{{"name", "vlen-utf8"}}));
  // A compressor lsio cannot run is described, so that a group still lists the array.
  EXPECT_EQ(s.metadata["codecs"][1], (nlohmann::json{{"name", "numcodecs.bz2"}, {"configuration", {{"level", 1}}}}));
}

TEST(NodeTest, V3GroupWithConsolidatedMetadata) {
  TempDir dir;
  dir.Write("zarr.json", R"({"zarr_format": 3, "node_type": "group", "attributes": {"k": 1},
      "consolidated_metadata": {"kind": "inline", "must_understand": false, "metadata": {
        "a": {"zarr_format": 3, "node_type": "array", "shape": [2]},
        "/sub/b/": {"zarr_format": 3, "node_type": "array", "shape": [3]},
        "junk": 5}}})");
  Node g = Read(dir);
  EXPECT_EQ(g.node_type, "group");
  EXPECT_EQ(g.zarr_format, 3);
  EXPECT_EQ(Keys(g), (std::vector<std::string>{"zarr.json"}));
  EXPECT_EQ(g.metadata["attributes"]["k"], 1);
  ASSERT_TRUE(g.consolidated.is_object());
  EXPECT_EQ(g.consolidated.size(), 2u) << g.consolidated.dump();
  EXPECT_EQ(g.consolidated["sub/b"]["shape"], nlohmann::json({3}));

  TempDir plain;
  plain.Write("zarr.json", R"({"zarr_format": 3, "node_type": "group"})");
  EXPECT_TRUE(Read(plain).consolidated.is_null());
}

TEST(NodeTest, MalformedMetadataIsFormatErrorNamingTheFile) {
  TempDir dir;
  dir.Write("a/zarr.json", "{\"zarr_format\": 3,");
  auto a = ReadNode(dir.path(), "a", true);
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().code(), StatusCode::kInvalidFormat);
  EXPECT_EQ(a.status().path(), dir.Join("a/zarr.json"));
  dir.Write("b/.zarray", R"({"zarr_format": 2, "shape": [1]})");
  dir.Write("b/.zattrs", "[1, 2]");
  auto b = ReadNode(dir.path(), "b", true);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), StatusCode::kInvalidFormat);
  EXPECT_EQ(b.status().path(), dir.Join("b/.zattrs")) << b.status().ToString();
  dir.Write("c/.zgroup", R"({"zarr_format": 2})");
  dir.Write("c/.zmetadata", R"({"metadata": 3})");
  auto c = ReadNode(dir.path(), "c", true);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().path(), dir.Join("c/.zmetadata"));
  dir.Write("d/zarr.json", R"({"zarr_format": 3, "node_type": "thing"})");
  EXPECT_EQ(ReadNode(dir.path(), "d", true).status().code(), StatusCode::kInvalidFormat);
  dir.Write("e/zarr.json", R"({"zarr_format": 4, "node_type": "array"})");
  EXPECT_EQ(ReadNode(dir.path(), "e", true).status().code(), StatusCode::kUnimplemented);
  auto none = ReadNode(dir.path(), "missing", true);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none.value().has_value());
}

TEST(NodeTest, StringArrayReadsChunksByTheirKeys) {
  TempDir dir;
  // v2, order F, "/" keys: chunk (1, 0) of a 4x4 array in 2x2 chunks holds rows 2-3, cols 0-1,
  // stored column by column.
  dir.Write(".zarray", R"({"zarr_format": 2, "shape": [4, 4], "chunks": [2, 2], "dtype": "|O",
      "compressor": null, "fill_value": "", "order": "F", "filters": [{"id": "vlen-utf8"}],
      "dimension_separator": "/"})");
  dir.Write("1/0", lsio_test::VlenUtf8Chunk({"r2c0", "r3c0", "r2c1", "r3c1"}));
  Node n = Read(dir);
  auto arr = StringArray::Open(dir.path(), n.metadata, n.files[0].location);
  ASSERT_TRUE(arr.ok()) << arr.status().ToString();
  EXPECT_EQ((*arr)->ChunkKey({1, 0}), "1/0");
  auto chunk = (*arr)->ReadChunk({1, 0});
  ASSERT_TRUE(chunk.ok()) << chunk.status().ToString();
  ASSERT_TRUE(chunk.value().has_value());
  EXPECT_EQ(*chunk.value(), (std::vector<std::string>{"r2c0", "r2c1", "r3c0", "r3c1"}));  // C order
  auto missing = (*arr)->ReadChunk({0, 1});
  ASSERT_TRUE(missing.ok());
  EXPECT_FALSE(missing.value().has_value());
  dir.Write("0/0", lsio_test::VlenUtf8Chunk({"x"}));
  auto bad = (*arr)->ReadChunk({0, 0});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(bad.status().path(), dir.Join("0/0"));
  EXPECT_EQ(bad.status().chunk(), "(0, 0)");

  nlohmann::json sharded = {{"data_type", "string"}, {"shape", {4}},
                            {"chunk_grid", {{"name", "regular"}, {"configuration", {{"chunk_shape", {2}}}}}},
                            {"codecs", {{{"name", "sharding_indexed"}}}}};
  auto s = StringArray::Open(dir.path(), sharded, "zarr.json");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(s.status().message().find("sharded variable-length strings"), std::string::npos);
}

}  // namespace
}  // namespace lsio
