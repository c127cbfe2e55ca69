// Chunk keys (zarr-format.md §4.2): default / v2 encodings x "/" / "." separators x 0-d.
#include "zarr/chunk_key.h"

#include <gtest/gtest.h>

namespace lsio {
namespace {

ChunkKeyEncoding Enc(const char* json) {
  auto e = ParseChunkKeyEncoding(nlohmann::json::parse(json));
  EXPECT_TRUE(e.ok()) << json << ": " << e.status().ToString();
  return e.ok() ? e.value() : ChunkKeyEncoding{};
}

TEST(ChunkKeyTest, TableOfSection42) {
  const int64_t c[] = {1, 23, 45};
  EXPECT_EQ(ChunkKey(Enc(R"({"name": "default"})"), c, 3), "c/1/23/45");
  EXPECT_EQ(ChunkKey(Enc(R"({"name": "default", "configuration": {"separator": "/"}})"), c, 3), "c/1/23/45");
  EXPECT_EQ(ChunkKey(Enc(R"({"name": "default", "configuration": {"separator": "."}})"), c, 3), "c.1.23.45");
  EXPECT_EQ(ChunkKey(Enc(R"({"name": "v2"})"), c, 3), "1.23.45");
  EXPECT_EQ(ChunkKey(Enc(R"({"name": "v2", "configuration": {"separator": "."}})"), c, 3), "1.23.45");
  EXPECT_EQ(ChunkKey(Enc(R"({"name": "v2", "configuration": {"separator": "/"}})"), c, 3), "1/23/45");
}

TEST(ChunkKeyTest, ZeroDimensional) {
  EXPECT_EQ(ChunkKey(Enc(R"({"name": "default"})"), nullptr, 0), "c");
  EXPECT_EQ(ChunkKey(Enc(R"({"name": "default", "configuration": {"separator": "."}})"), nullptr, 0), "c");
  EXPECT_EQ(ChunkKey(Enc(R"({"name": "v2"})"), nullptr, 0), "0");
  EXPECT_EQ(ChunkKey(Enc(R"({"name": "v2", "configuration": {"separator": "/"}})"), nullptr, 0), "0");
}

TEST(ChunkKeyTest, OneDimensionalAndLargeIndices) {
  const int64_t c[] = {0};
  EXPECT_EQ(ChunkKey(Enc(R"("default")"), c, 1), "c/0");
  EXPECT_EQ(ChunkKey(Enc(R"("v2")"), c, 1), "0");
  const int64_t big[] = {9007199254740993, 0};
  EXPECT_EQ(ChunkKey(Enc(R"({"name": "default"})"), big, 2), "c/9007199254740993/0");
}

TEST(ChunkKeyTest, MalformedEncodings) {
  struct Case {
    const char* json;
    StatusCode code;
    const char* message;
  };
  const Case cases[] = {
      {R"({"name": "default", "configuration": {"separator": "-"}})", StatusCode::kInvalidFormat,
       "chunk_key_encoding: separator must be \"/\" or \".\", got '-'"},
      {R"({"name": "v2", "configuration": {"separator": ""}})", StatusCode::kInvalidFormat,
       "chunk_key_encoding: separator must be \"/\" or \".\", got ''"},
      {R"({"name": "default", "configuration": {"separator": 1}})", StatusCode::kInvalidFormat,
       "chunk_key_encoding: separator must be a string"},
      {R"({"name": "suffix"})", StatusCode::kUnimplemented, "chunk key encoding 'suffix' is not supported"},
      {R"({"configuration": {}})", StatusCode::kInvalidFormat,
       "chunk_key_encoding: codec object without a string \"name\""},
      {R"(7)", StatusCode::kInvalidFormat, "chunk_key_encoding: codec must be an object or a string"},
  };
  for (const Case& c : cases) {
    auto e = ParseChunkKeyEncoding(nlohmann::json::parse(c.json));
    ASSERT_FALSE(e.ok()) << c.json;
    EXPECT_EQ(e.status().code(), c.code) << c.json;
    EXPECT_EQ(e.status().message(), c.message) << c.json;
  }
}

}  // namespace
}  // namespace lsio
