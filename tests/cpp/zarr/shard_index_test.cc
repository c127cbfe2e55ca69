// sharding_indexed layout parsing and shard index decoding, on the byte-exact blobs of
// zarr-format.md §6.9 and hand-made malformed indexes: missing entries (both fields, or
// nbytes alone at 2^64-1), bad crc, entries past EOF, overflow, zero length, overlapping
// the index, short index, big-endian index, index without crc.
#include "zarr/shard_index.h"
#include "zarr/sharding_config.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "test_util.h"

namespace lsio {
namespace {

using lsio_test::Bytes;
constexpr uint64_t kMax = ~0ull;

ShardLayout Layout(const std::string& config_json, const std::vector<int64_t>& shard_shape) {
  auto l = ParseShardLayout(nlohmann::json::parse(config_json), shard_shape);
  EXPECT_TRUE(l.ok()) << l.status().ToString();
  return l.ok() ? l.value() : ShardLayout{};
}

// §6.9: [4,4] shard of [2,2] inner chunks.
const char* kConfigEnd = R"({"chunk_shape": [2, 2], "codecs": [{"name": "bytes"}],
  "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "crc32c"}],
  "index_location": "end"})";
const char* kConfigStart = R"({"chunk_shape": [2, 2], "codecs": [{"name": "bytes"}],
  "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "crc32c"}],
  "index_location": "start"})";
const char* kConfigBigNoCrc = R"({"chunk_shape": [2, 2], "codecs": ["bytes"],
  "index_codecs": [{"name": "bytes", "configuration": {"endian": "big"}}]})";
const char* kConfigBigCrc = R"({"chunk_shape": [2, 2], "codecs": ["bytes"],
  "index_codecs": [{"name": "bytes", "configuration": {"endian": "big"}}, "crc32c"]})";

// An index body of (offset, nbytes) pairs, optionally big endian, optionally with crc32c.
Bytes IndexBytes(const std::vector<std::pair<uint64_t, uint64_t>>& entries, bool big = false, bool crc = true) {
  Bytes b;
  for (const auto& [off, nb] : entries) {
    if (big) {
      lsio_test::PutBE<uint64_t>(b, off);
      lsio_test::PutBE<uint64_t>(b, nb);
    } else {
      lsio_test::PutLE<uint64_t>(b, off);
      lsio_test::PutLE<uint64_t>(b, nb);
    }
  }
  return crc ? lsio_test::WithCrc(b) : b;
}

Result<std::vector<ShardIndexEntry>> DecodeIndex(const Bytes& idx, const ShardLayout& l, uint64_t shard_size) {
  return DecodeShardIndex(std::span<const uint8_t>(idx.data(), idx.size()), l, shard_size);
}

void ExpectEntry(const ShardIndexEntry& e, uint64_t off, uint64_t nb) {
  EXPECT_FALSE(e.missing());
  EXPECT_EQ(e.offset, off);
  EXPECT_EQ(e.nbytes, nb);
}

TEST(ShardLayoutTest, ZarrPythonDefaults) {
  const ShardLayout l = Layout(kConfigEnd, {4, 4});
  EXPECT_EQ(l.inner_shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(l.chunks_per_shard, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(l.num_entries, 4u);
  EXPECT_TRUE(l.index_at_end);
  ASSERT_NE(l.index_chain, nullptr);
  EXPECT_EQ(l.index_chain->description(), "bytes, crc32c");
  EXPECT_EQ(l.index_size, 68u);
  EXPECT_EQ(l.IndexOffset(92), 24u);
}

TEST(ShardLayoutTest, NoIndexLocationMeansEndAndCrcIsOptional) {
  const ShardLayout l = Layout(kConfigBigNoCrc, {4, 4});
  EXPECT_TRUE(l.index_at_end);
  ASSERT_NE(l.index_chain, nullptr);
  EXPECT_EQ(l.index_chain->description(), "bytes(big)");
  EXPECT_EQ(l.index_size, 64u) << "no crc32c: no 4 extra bytes";
  const ShardLayout s = Layout(kConfigStart, {4, 4});
  EXPECT_FALSE(s.index_at_end);
  EXPECT_EQ(s.IndexOffset(92), 0u);
}

TEST(ShardLayoutTest, ZeroDimensionalShardHasOneEntry) {
  const ShardLayout l = Layout(R"({"chunk_shape": [], "codecs": ["bytes"], "index_codecs": ["bytes", "crc32c"]})", {});
  EXPECT_EQ(l.num_entries, 1u);
  EXPECT_EQ(l.index_size, 20u);
}

TEST(ShardLayoutTest, MalformedConfigurations) {
  struct Case {
    const char* json;
    std::vector<int64_t> shard;
    StatusCode code;
    const char* message;
  };
  const Case cases[] = {
      {R"({"codecs": ["bytes"], "index_codecs": ["bytes"]})", {4}, StatusCode::kInvalidFormat,
       "sharding_indexed: missing \"chunk_shape\" list"},
      {R"({"chunk_shape": [2], "index_codecs": ["bytes"]})", {4, 4}, StatusCode::kInvalidFormat,
       "sharding_indexed: chunk_shape has rank 1, the array has rank 2"},
      {R"({"chunk_shape": [3, 2], "index_codecs": ["bytes"]})", {4, 4}, StatusCode::kInvalidFormat,
       "sharding_indexed: inner chunk shape does not divide the shard shape (dimension 0: 4 % 3 != 0)"},
      {R"({"chunk_shape": [0, 2], "index_codecs": ["bytes"]})", {4, 4}, StatusCode::kInvalidFormat,
       "sharding_indexed: chunk_shape entries must be integers >= 1"},
      {R"({"chunk_shape": [2, "2"], "index_codecs": ["bytes"]})", {4, 4}, StatusCode::kInvalidFormat,
       "sharding_indexed: chunk_shape entries must be integers >= 1"},
      {R"({"chunk_shape": [2, 2], "index_codecs": ["bytes"], "index_location": "middle"})", {4, 4},
       StatusCode::kInvalidFormat, "sharding_indexed: index_location must be \"start\" or \"end\", got 'middle'"},
      {R"({"chunk_shape": [2, 2], "index_codecs": ["bytes"], "index_location": 1})", {4, 4},
       StatusCode::kInvalidFormat, "sharding_indexed: index_location must be a string"},
      {R"({"chunk_shape": [2, 2]})", {4, 4}, StatusCode::kInvalidFormat, "sharding_indexed: missing \"index_codecs\" list"},
      {R"({"chunk_shape": [2, 2], "index_codecs": []})", {4, 4}, StatusCode::kInvalidFormat,
       "sharding_indexed: missing \"index_codecs\" list"},
      {R"({"chunk_shape": [2, 2], "index_codecs": ["bytes", "zstd"]})", {4, 4}, StatusCode::kInvalidFormat,
       "sharding_indexed: index_codecs (bytes, zstd) are not fixed-size, so the index cannot be located"},
      {R"({"chunk_shape": [2, 2], "index_codecs": ["crc32c", "bytes"]})", {4, 4}, StatusCode::kInvalidFormat,
       "sharding_indexed: index_codecs: codec 'crc32c' (bytes -> bytes) before the array -> bytes codec"},
      {R"({"chunk_shape": [2, 2], "index_codecs": ["crc32c"]})", {4, 4}, StatusCode::kInvalidFormat,
       "sharding_indexed: index_codecs: codec 'crc32c' (bytes -> bytes) before the array -> bytes codec"},
      {R"({"chunk_shape": [2, 2], "index_codecs": [{"name": "transpose", "configuration": {"order": [1, 0]}}, "bytes"]})",
       {4, 4}, StatusCode::kInvalidFormat,
       "sharding_indexed: index_codecs: transpose codec: order has 2 entries for a chunk of rank 3"},
      {R"({"chunk_shape": [2, 2], "index_codecs": ["foo"]})", {4, 4}, StatusCode::kUnimplemented,
       "sharding_indexed: index_codecs: unknown codec 'foo'"},
      {R"({"chunk_shape": [1, 1], "index_codecs": ["bytes"]})", {65536, 65537}, StatusCode::kInvalidFormat,
       "sharding_indexed: more than 2^32 inner chunks per shard"},
  };
  for (const Case& c : cases) {
    auto l = ParseShardLayout(nlohmann::json::parse(c.json), c.shard);
    ASSERT_FALSE(l.ok()) << c.json;
    EXPECT_EQ(l.status().code(), c.code) << c.json << ": " << l.status().ToString();
    EXPECT_EQ(l.status().message(), c.message) << c.json;
  }
}

TEST(ShardIndexTest, Section69ZarrPythonIndexAtEnd) {
  const Bytes blob = lsio_test::Shard69ZarrPythonEnd();
  ASSERT_EQ(blob.size(), 92u);
  const ShardLayout l = Layout(kConfigEnd, {4, 4});
  const Bytes idx(blob.begin() + 24, blob.end());
  auto e = DecodeIndex(idx, l, blob.size());
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  ASSERT_EQ(e->size(), 4u);
  ExpectEntry((*e)[0], 0, 8);
  ExpectEntry((*e)[1], 16, 8);
  ExpectEntry((*e)[2], 8, 8);
  EXPECT_TRUE((*e)[3].missing());
}

TEST(ShardIndexTest, Section69ZarrPythonIndexAtStart) {
  const Bytes blob = lsio_test::Shard69ZarrPythonStart();
  const ShardLayout l = Layout(kConfigStart, {4, 4});
  const Bytes idx(blob.begin(), blob.begin() + 68);
  auto e = DecodeIndex(idx, l, blob.size());
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  ExpectEntry((*e)[0], 68, 8);
  ExpectEntry((*e)[1], 84, 8);
  ExpectEntry((*e)[2], 76, 8);
  EXPECT_TRUE((*e)[3].missing());
}

TEST(ShardIndexTest, Section69TensorStoreCOrder) {
  const Bytes blob = lsio_test::Shard69TensorStore();
  const ShardLayout l = Layout(kConfigEnd, {4, 4});
  auto e = DecodeIndex(Bytes(blob.begin() + 24, blob.end()), l, blob.size());
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  ExpectEntry((*e)[0], 0, 8);
  ExpectEntry((*e)[1], 8, 8);
  ExpectEntry((*e)[2], 16, 8);
  EXPECT_TRUE((*e)[3].missing());
}

TEST(ShardIndexTest, AllOnesEntryIsMissing) {
  const ShardLayout l = Layout(kConfigEnd, {4, 4});
  auto e = DecodeIndex(IndexBytes({{kMax, kMax}, {kMax, kMax}, {kMax, kMax}, {kMax, kMax}}), l, 68);
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  for (const auto& x : *e) EXPECT_TRUE(x.missing());
}

TEST(ShardIndexTest, EarlyStartWritersShiftedEmptyEntriesAreMissing) {
  // Early "start" writers shifted the offset of empty entries too (to index_size - 1).
  const ShardLayout l = Layout(kConfigStart, {4, 4});
  auto e = DecodeIndex(IndexBytes({{67, kMax}, {68, 8}, {kMax, kMax}, {67, kMax}}), l, 76);
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_TRUE((*e)[0].missing());
  ExpectEntry((*e)[1], 68, 8);
  EXPECT_TRUE((*e)[2].missing());
  EXPECT_TRUE((*e)[3].missing());
}

TEST(ShardIndexTest, NbytesAloneAtMaxIsDataLoss) {
  // zarr-python reads such an entry as a chunk (and fails), never as the fill value.
  for (const auto& [config, off] : {std::pair{kConfigStart, uint64_t{0}}, std::pair{kConfigStart, uint64_t{12345}},
                                    std::pair{kConfigEnd, uint64_t{67}}, std::pair{kConfigEnd, uint64_t{0}}}) {
    const ShardLayout l = Layout(config, {4, 4});
    auto e = DecodeIndex(IndexBytes({{off, kMax}, {kMax, kMax}, {kMax, kMax}, {kMax, kMax}}), l, 100);
    ASSERT_FALSE(e.ok()) << off;
    EXPECT_EQ(e.status().code(), StatusCode::kDataLoss);
    EXPECT_EQ(e.status().message().rfind("shard index entry 0 (offset " + std::to_string(off) +
                                             ", nbytes 18446744073709551615) ", 0), 0u) << e.status().message();
  }
}

TEST(ShardIndexTest, OffsetAloneAtMaxIsNotMissingAndOverflows) {
  const ShardLayout l = Layout(kConfigEnd, {4, 4});
  auto e = DecodeIndex(IndexBytes({{kMax, 8}, {kMax, kMax}, {kMax, kMax}, {kMax, kMax}}), l, 100);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(e.status().message(), "shard index entry 0 (offset 18446744073709551615, nbytes 8) overflows");
}

TEST(ShardIndexTest, OffsetPlusNbytesOverflowIsDataLoss) {
  const ShardLayout l = Layout(kConfigEnd, {4, 4});
  auto e = DecodeIndex(IndexBytes({{0, 8}, {16, kMax - 1}, {kMax, kMax}, {kMax, kMax}}), l, 100);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(e.status().message(), "shard index entry 1 (offset 16, nbytes 18446744073709551614) overflows");
}

TEST(ShardIndexTest, BadCrcIsDataLossNamingBothValues) {
  Bytes blob = lsio_test::Shard69ZarrPythonEnd();
  blob[24 + 8] = 0x09;  // idx(0,0).nbytes 8 -> 9
  const ShardLayout l = Layout(kConfigEnd, {4, 4});
  auto e = DecodeIndex(Bytes(blob.begin() + 24, blob.end()), l, blob.size());
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), StatusCode::kDataLoss);
  const Bytes body(blob.begin() + 24, blob.begin() + 88);
  char want[128];
  std::snprintf(want, sizeof want, "shard index: crc32c checksum mismatch (stored 0x569d79ba, computed 0x%08x)",
                lsio_test::ReferenceCrc32c(body));
  EXPECT_EQ(e.status().message(), want);
}

TEST(ShardIndexTest, BadCrcOnTheStoredChecksumItself) {
  Bytes idx = IndexBytes({{0, 8}, {8, 8}, {16, 8}, {kMax, kMax}});
  idx.back() ^= 0x80;
  auto e = DecodeIndex(idx, Layout(kConfigEnd, {4, 4}), 92);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(e.status().message().rfind("shard index: crc32c checksum mismatch", 0), 0u);
}

TEST(ShardIndexTest, EntryPastEndOfFileIsDataLoss) {
  const ShardLayout l = Layout(kConfigEnd, {4, 4});
  // 92-byte shard: data lies in [0, 24); (20, 8) ends at 28.
  auto e = DecodeIndex(IndexBytes({{0, 8}, {8, 8}, {20, 8}, {kMax, kMax}}), l, 92);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(e.status().message(), "shard index entry 2 (offset 20, nbytes 8) lies outside the shard's data [0, 24)");
  // Far past the file.
  auto far = DecodeIndex(IndexBytes({{1000, 8}, {8, 8}, {16, 8}, {kMax, kMax}}), l, 92);
  ASSERT_FALSE(far.ok());
  EXPECT_EQ(far.status().message(), "shard index entry 0 (offset 1000, nbytes 8) lies outside the shard's data [0, 24)");
}

TEST(ShardIndexTest, EntryEndingExactlyAtTheIndexIsValid) {
  const ShardLayout l = Layout(kConfigEnd, {4, 4});
  auto e = DecodeIndex(IndexBytes({{0, 24}, {0, 24}, {23, 1}, {kMax, kMax}}), l, 92);
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  ExpectEntry((*e)[0], 0, 24);
  ExpectEntry((*e)[1], 0, 24) ;  // shared bytes are legal
  ExpectEntry((*e)[2], 23, 1);
}

TEST(ShardIndexTest, ZeroLengthEntryIsDataLoss) {
  const ShardLayout l = Layout(kConfigEnd, {4, 4});
  auto e = DecodeIndex(IndexBytes({{0, 8}, {8, 0}, {16, 8}, {kMax, kMax}}), l, 92);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(e.status().message(), "shard index entry 1 (offset 8, nbytes 0) has zero length");
}

TEST(ShardIndexTest, EntryOverlappingTheIndexAtEndIsDataLoss) {
  const ShardLayout l = Layout(kConfigEnd, {4, 4});
  auto e = DecodeIndex(IndexBytes({{0, 8}, {8, 8}, {30, 8}, {kMax, kMax}}), l, 92);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(e.status().message(), "shard index entry 2 (offset 30, nbytes 8) lies outside the shard's data [0, 24)");
}

TEST(ShardIndexTest, EntryOverlappingTheIndexAtStartIsDataLoss) {
  const ShardLayout l = Layout(kConfigStart, {4, 4});
  // Offsets count from the blob start, so data begins at 68; 64 is inside the index.
  auto e = DecodeIndex(IndexBytes({{68, 8}, {64, 8}, {84, 8}, {kMax, kMax}}), l, 92);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(e.status().message(), "shard index entry 1 (offset 64, nbytes 8) lies outside the shard's data [68, 92)");
  // An offset relative to the data section (0) instead of the blob is caught as well.
  auto rel = DecodeIndex(IndexBytes({{0, 8}, {8, 8}, {16, 8}, {kMax, kMax}}), l, 92);
  ASSERT_FALSE(rel.ok());
  EXPECT_EQ(rel.status().code(), StatusCode::kDataLoss);
}

TEST(ShardIndexTest, ShortIndexIsDataLoss) {
  const ShardLayout l = Layout(kConfigEnd, {4, 4});
  Bytes idx = IndexBytes({{0, 8}, {8, 8}, {16, 8}, {kMax, kMax}});
  idx.pop_back();
  auto e = DecodeIndex(idx, l, 92);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(e.status().message(), "shard index has 67 bytes, expected 68");
}

TEST(ShardIndexTest, ShardShorterThanItsIndexIsDataLoss) {
  const ShardLayout l = Layout(kConfigEnd, {4, 4});
  auto e = DecodeIndex(IndexBytes({{kMax, kMax}, {kMax, kMax}, {kMax, kMax}, {kMax, kMax}}), l, 67);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(e.status().message(), "shard is 67 bytes, shorter than its 68-byte index");
}

TEST(ShardIndexTest, BigEndianIndexWithoutCrc) {
  const ShardLayout l = Layout(kConfigBigNoCrc, {4, 4});
  const Bytes idx = IndexBytes({{0, 8}, {8, 8}, {16, 8}, {kMax, kMax}}, /*big=*/true, /*crc=*/false);
  ASSERT_EQ(idx.size(), 64u);
  auto e = DecodeIndex(idx, l, 24 + 64);
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  ExpectEntry((*e)[0], 0, 8);
  ExpectEntry((*e)[1], 8, 8);
  ExpectEntry((*e)[2], 16, 8);
  EXPECT_TRUE((*e)[3].missing());
  // Read as little endian, the same bytes would be absurd offsets.
  const ShardLayout little = Layout(R"({"chunk_shape": [2, 2], "index_codecs": ["bytes"]})", {4, 4});
  EXPECT_FALSE(DecodeIndex(idx, little, 24 + 64).ok());
}

TEST(ShardIndexTest, BigEndianIndexWithCrc) {
  const ShardLayout l = Layout(kConfigBigCrc, {4, 4});
  const Bytes idx = IndexBytes({{8, 8}, {kMax, kMax}, {0, 8}, {16, 8}}, /*big=*/true, /*crc=*/true);
  auto e = DecodeIndex(idx, l, 24 + 68);
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  ExpectEntry((*e)[0], 8, 8);
  EXPECT_TRUE((*e)[1].missing());
  ExpectEntry((*e)[2], 0, 8);
  ExpectEntry((*e)[3], 16, 8);
}

TEST(ShardIndexTest, IndexDecodesThroughItsOwnCodecChain) {
  // index_codecs are a codec chain like any other: a transpose of the (2, 2, 2) index array
  // ("F": stored as all offsets, then all nbytes, in Fortran order of the inner grid) and
  // two crc32c layers both decode; a failure names the shard index.
  const ShardLayout l = Layout(R"({"chunk_shape": [2, 2], "index_codecs": [
      {"name": "transpose", "configuration": {"order": "F"}}, "bytes", "crc32c", "crc32c"]})", {4, 4});
  ASSERT_NE(l.index_chain, nullptr);
  EXPECT_EQ(l.index_chain->description(), "transpose, bytes, crc32c, crc32c");
  EXPECT_EQ(l.index_size, 72u);
  // Entries in C order of the inner grid: (0,0) (0,1) (1,0) (1,1).
  const std::vector<std::pair<uint64_t, uint64_t>> entries = {{0, 8}, {8, 8}, {16, 8}, {kMax, kMax}};
  Bytes body;
  for (int field = 0; field < 2; ++field) {
    for (int j = 0; j < 2; ++j) {
      for (int i = 0; i < 2; ++i) {
        const auto& e = entries[static_cast<size_t>(i * 2 + j)];
        lsio_test::PutLE<uint64_t>(body, field == 0 ? e.first : e.second);
      }
    }
  }
  const Bytes idx = lsio_test::WithCrc(lsio_test::WithCrc(body));
  auto e = DecodeIndex(idx, l, 24 + 72);
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  ExpectEntry((*e)[0], 0, 8);
  ExpectEntry((*e)[1], 8, 8);
  ExpectEntry((*e)[2], 16, 8);
  EXPECT_TRUE((*e)[3].missing());
  // The same bytes read without the transpose give other entries: (0, 16), then one whose
  // nbytes alone is 2^64-1, which is corrupt.
  const ShardLayout plain = Layout(R"({"chunk_shape": [2, 2], "index_codecs": ["bytes", "crc32c", "crc32c"]})", {4, 4});
  auto p = DecodeIndex(idx, plain, 24 + 72);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(p.status().message().find("shard index entry 1 (offset "), std::string::npos) << p.status().message();
  Bytes bad = idx;
  bad[3] ^= 1;
  auto b = DecodeIndex(bad, l, 24 + 72);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(b.status().message().rfind("shard index: crc32c checksum mismatch", 0), 0u) << b.status().message();
}

TEST(ShardIndexTest, IndexOnlyShardWithAllEntriesMissing) {
  const ShardLayout l = Layout(kConfigStart, {4, 4});
  auto e = DecodeIndex(IndexBytes({{kMax, kMax}, {kMax, kMax}, {kMax, kMax}, {kMax, kMax}}), l, 68);
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  for (const auto& x : *e) EXPECT_TRUE(x.missing());
}

}  // namespace
}  // namespace lsio
