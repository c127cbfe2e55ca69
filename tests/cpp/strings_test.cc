// lsio/strings.h: vlen-utf8 chunks built byte by byte (count, then length + UTF-8 per item),
// raw and through zstd (libzstd itself), and malformed ones: wrong count, truncated items,
// trailing bytes, invalid UTF-8, unknown codecs.
#include "lsio/strings.h"

#include <zstd.h>

#include <gtest/gtest.h>

#include "test_util.h"

namespace lsio {
namespace {

TEST(StringsTest, DecodesRawAndCompressedChunks) {
  const std::vector<std::string> items = {"", "a", "\xc3\xbc", "bcd", "\xf0\x9f\x98\x80"};
  auto raw = DecodeVlenUtf8Chunk("[]", lsio_test::VlenUtf8Chunk(items), items.size());
  ASSERT_TRUE(raw.ok()) << raw.status().ToString();
  EXPECT_EQ(*raw, items);
  const std::string plain = lsio_test::VlenUtf8Chunk(items);
  std::string z(ZSTD_compressBound(plain.size()), '\0');
  z.resize(ZSTD_compress(z.data(), z.size(), plain.data(), plain.size(), 3));
  auto dec = DecodeVlenUtf8Chunk(R"([{"name": "zstd", "configuration": {"level": 3, "checksum": false}}])", z,
                                 items.size());
  ASSERT_TRUE(dec.ok()) << dec.status().ToString();
  EXPECT_EQ(*dec, items);
}

TEST(StringsTest, MalformedChunksAreDataLoss) {
  const std::string good = lsio_test::VlenUtf8Chunk({"ab", "c"});
  struct Case {
    std::string bytes;
    uint64_t items;
    const char* words;
  };
  const std::vector<Case> cases = {
      {good, 3, "holds 2 items, expected 3"},
      {good.substr(0, good.size() - 1), 2, "item 1 runs past the chunk"},
      {good + "x", 2, "1 bytes after the last item"},
      {"\x01\x00", 1, "shorter than its 4-byte item count"},
      {lsio_test::VlenUtf8Chunk({"\xff"}), 1, "item 0 is not valid UTF-8"},
      {lsio_test::VlenUtf8Chunk({"\xed\xa0\x80"}), 1, "item 0 is not valid UTF-8"},  // a surrogate
      {lsio_test::Le32(1) + lsio_test::Le32(0xFFFFFFFFu), 1, "item 0 runs past the chunk"},
  };
  for (const Case& c : cases) {
    auto r = DecodeVlenUtf8Chunk("[]", c.bytes, c.items);
    ASSERT_FALSE(r.ok()) << c.words;
    EXPECT_EQ(r.status().code(), StatusCode::kDataLoss) << r.status().ToString();
    EXPECT_NE(r.status().message().find(c.words), std::string::npos) << r.status().message();
  }
  auto zstd = DecodeVlenUtf8Chunk(R"([{"name": "zstd"}])", "not zstd", 1);
  EXPECT_EQ(zstd.status().code(), StatusCode::kDataLoss) << zstd.status().ToString();
  EXPECT_EQ(DecodeVlenUtf8Chunk(R"([{"name": "frobnicate"}])", good, 2).status().code(), StatusCode::kUnimplemented);
  EXPECT_EQ(DecodeVlenUtf8Chunk(R"(["bytes"])", good, 2).status().code(), StatusCode::kUnimplemented);
  EXPECT_EQ(DecodeVlenUtf8Chunk("{", good, 2).status().code(), StatusCode::kInvalidFormat);
}

}  // namespace
}  // namespace lsio
