// lsio/records.h: offset-table entries loaded and stored whole, record payloads compressed
// and decoded in parallel, gathered from files (decoded as reads land, or in place after),
// and the checks that keep a corrupt payload from allocating or decoding past its
// destination.
#include "lsio/records.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "lsio/array.h"  // GetIoBackendInfo
#include "test_util.h"

namespace lsio {
namespace {

std::vector<uint8_t> Record(std::mt19937& rng, size_t n) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(rng() % 7);  // compressible
  return v;
}

TEST(RecordEntriesTest, StoreThenLoadRoundTripsEveryField) {
  alignas(16) uint8_t table[16 * 8] = {};
  const std::vector<int64_t> ids = {5, 0, 7};
  const std::vector<RecordEntry> in = {{3, 0x0102030405060708ull, 77}, {kEmptyRecordChunk, 0, 0}, {1, 1ull << 40, 0xFFFFFFFFu}};
  ASSERT_TRUE(StoreRecordEntries(table, 8, ids, in).ok());
  // The on-disk layout: [chunk u32][offset u64][length u32], little-endian.
  uint32_t chunk;
  uint64_t offset;
  std::memcpy(&chunk, table + 16 * 5, 4);
  std::memcpy(&offset, table + 16 * 5 + 4, 8);
  EXPECT_EQ(chunk, 3u);
  EXPECT_EQ(offset, 0x0102030405060708ull);
  std::vector<RecordEntry> out(3);
  ASSERT_TRUE(LoadRecordEntries(table, 8, ids, out.data()).ok());
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(out[i].chunk, in[i].chunk);
    EXPECT_EQ(out[i].offset, in[i].offset);
    EXPECT_EQ(out[i].length, in[i].length);
  }
}

TEST(RecordEntriesTest, RefusesIdsOutsideTheTableAndMisalignedTables) {
  alignas(16) uint8_t table[16 * 5] = {};
  RecordEntry e;
  const std::vector<int64_t> past = {4, 2};
  EXPECT_EQ(LoadRecordEntries(table, 2, past, &e).code(), StatusCode::kInvalidArgument);
  const std::vector<int64_t> negative = {-1};
  EXPECT_EQ(LoadRecordEntries(table, 2, negative, &e).code(), StatusCode::kInvalidArgument);
  const std::vector<int64_t> one = {0};
  EXPECT_EQ(LoadRecordEntries(table + 8, 2, one, &e).code(), StatusCode::kInvalidArgument);
  const std::vector<RecordEntry> two(2);
  EXPECT_EQ(StoreRecordEntries(table, 2, one, two).code(), StatusCode::kInvalidArgument);
}

// `n` records of up to `most` compressible bytes (every 17th empty), compressed end to end.
struct Compressed {
  std::vector<uint8_t> values;
  std::vector<uint64_t> offsets = {0};  // record i is values[offsets[i], offsets[i + 1])
  std::vector<uint8_t> payload;
  std::vector<uint64_t> poffs;          // and payload[poffs[i], poffs[i + 1])
};

Compressed CompressedRecords(RecordCompression kind, int level, int n, uint32_t most, int threads) {
  Compressed c;
  std::mt19937 rng(11);
  for (int i = 0; i < n; ++i) {
    auto r = Record(rng, i % 17 == 0 ? 0 : rng() % most);
    c.values.insert(c.values.end(), r.begin(), r.end());
    c.offsets.push_back(c.values.size());
  }
  const Status st = CompressRecords(kind, level, c.values.data(), c.values.size(), c.offsets, threads, &c.payload,
                                    &c.poffs);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return c;
}

class RecordCodecTest : public ::testing::TestWithParam<std::pair<RecordCompression, int>> {};

TEST_P(RecordCodecTest, CompressThenDecodeInParallelRoundTrips) {
  const auto [kind, level] = GetParam();
  Compressed c = CompressedRecords(kind, level, 300, 5000, 3);
  const std::vector<uint8_t>& values = c.values;
  const std::vector<uint64_t>& offsets = c.offsets;
  const std::vector<uint8_t>& payload = c.payload;
  const std::vector<uint64_t>& poffs = c.poffs;
  ASSERT_EQ(poffs.size(), offsets.size());
  EXPECT_LT(payload.size(), values.size());
  std::vector<uint8_t> out(values.size(), 0xAB);
  std::vector<RecordDecode> work;
  for (size_t i = 0; i + 1 < offsets.size(); ++i) {
    std::span<const uint8_t> p(payload.data() + poffs[i], poffs[i + 1] - poffs[i]);
    Result<uint64_t> size = RecordDecodedSize(kind, p);
    ASSERT_TRUE(size.ok()) << size.status().ToString();
    ASSERT_EQ(*size, offsets[i + 1] - offsets[i]);
    work.push_back({p.data(), p.size(), out.data() + offsets[i], *size});
  }
  ASSERT_TRUE(DecodeRecords(kind, work, 3).ok());
  EXPECT_EQ(out, values);
}

INSTANTIATE_TEST_SUITE_P(Kinds, RecordCodecTest,
                         ::testing::Values(std::make_pair(RecordCompression::kZstd, 3),
                                           std::make_pair(RecordCompression::kZstd, 19),
                                           std::make_pair(RecordCompression::kDeflate, 1),
                                           std::make_pair(RecordCompression::kDeflate, 12)));

TEST(RecordCodecTest, CorruptPayloadsAreDataLossAndNamedByPosition) {
  for (RecordCompression kind : {RecordCompression::kZstd, RecordCompression::kDeflate}) {
    std::mt19937 rng(3);
    std::vector<uint8_t> values = Record(rng, 4000);
    std::vector<uint8_t> more = Record(rng, 3000);
    values.insert(values.end(), more.begin(), more.end());
    const std::vector<uint64_t> offsets = {0, 4000, 7000};
    std::vector<uint8_t> payload;
    std::vector<uint64_t> poffs;
    ASSERT_TRUE(CompressRecords(kind, 3, values.data(), values.size(), offsets, 1, &payload, &poffs).ok());
    // A prefix claiming 4 GiB: refused by the size check (no allocation follows).
    std::vector<uint8_t> big(payload.begin(), payload.begin() + poffs[1]);
    const uint32_t huge = 0xFFFFFFFFu;
    std::memcpy(big.data(), &huge, 4);
    EXPECT_EQ(RecordDecodedSize(kind, big).status().code(), StatusCode::kDataLoss);
    EXPECT_EQ(RecordDecodedSize(kind, std::span<const uint8_t>(payload.data(), 3)).status().code(),
              StatusCode::kDataLoss);
    // A flipped byte in the second frame: the decode fails at position 1, and never writes
    // past its destination.
    std::vector<uint8_t> bad = payload;
    bad[poffs[1] + (poffs[2] - poffs[1]) / 2] ^= 0x5A;
    std::vector<uint8_t> out(7000 + 64, 0xEE);
    std::vector<RecordDecode> work = {{bad.data(), poffs[1], out.data(), 4000},
                                      {bad.data() + poffs[1], poffs[2] - poffs[1], out.data() + 4000, 3000}};
    size_t failed = 99;
    const Status st = DecodeRecords(kind, work, 2, &failed);
    EXPECT_EQ(st.code(), StatusCode::kDataLoss) << st.ToString();
    EXPECT_EQ(failed, 1u);
    for (size_t i = 7000; i < out.size(); ++i) ASSERT_EQ(out[i], 0xEE) << i;
    // A destination of the wrong size is refused from the prefix.
    std::vector<RecordDecode> wrong = {{payload.data(), poffs[1], out.data(), 3999}};
    EXPECT_EQ(DecodeRecords(kind, wrong, 1).code(), StatusCode::kDataLoss);
  }
}

// Payloads written to a file, gathered back with every io mode, cold (reads wait on the disk:
// decoded as they land) and hot (page-cache hits: decoded in place by PlaceRecords).
TEST(GatherRecordsTest, GathersAndPlacesEveryRecordColdAndHot) {
  for (RecordCompression kind : {RecordCompression::kZstd, RecordCompression::kDeflate}) {
    std::mt19937 rng(5);
    Compressed c = CompressedRecords(kind, 3, 400, 9000, 2);
    const std::vector<uint8_t>& values = c.values;
    const std::vector<uint64_t>& offsets = c.offsets;
    std::vector<uint8_t>& payload = c.payload;
    const std::vector<uint64_t>& poffs = c.poffs;
    lsio_test::TempDir dir;
    const std::string path = dir.Write("0.zr", payload);
    // Records in a shuffled order, one of them twice.
    std::vector<size_t> order(400);
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    order.push_back(order[3]);
    // Gathers the payloads of records order[0, count) with `io` into *g (staged in *staged).
    auto gather = [&](const char* io, size_t count, std::vector<uint8_t>* staged, GatheredRecords* g,
                      size_t* failed) {
      staged->assign(payload.size() * 2, 0);
      std::vector<ByteRange> ranges;
      uint64_t at = 0;
      for (size_t k = 0; k < count; ++k) {
        const size_t id = order[k];
        ranges.push_back({0, poffs[id], poffs[id + 1] - poffs[id], staged->data() + at});
        at += poffs[id + 1] - poffs[id];
      }
      RangeOptions o;
      o.io = io;
      o.threads = 2;
      return GatherRecords(kind, {RangeSource::File(path)}, ranges, o, {}, g, failed);
    };
    for (const char* io : {"auto", "pread", "uring"}) {
      for (bool cold : {true, false}) {
        const bool dropped = cold && lsio_test::DropCached(path);
        std::vector<uint8_t> staged;
        GatheredRecords g;
        size_t failed = 99;
        Status st = gather(io, order.size(), &staged, &g, &failed);
        if (std::string(io) == "uring" && st.code() == StatusCode::kUnavailable) break;
        ASSERT_TRUE(st.ok()) << io << ": " << st.ToString();
        std::vector<uint64_t> place = {0};
        for (size_t k = 0; k < order.size(); ++k) {
          ASSERT_EQ(g.sizes[k], offsets[order[k] + 1] - offsets[order[k]]) << io << " record " << k;
          place.push_back(place.back() + g.sizes[k]);
        }
        std::vector<uint8_t> out(place.back() + 16, 0xEE);
        place.pop_back();
        ASSERT_TRUE(PlaceRecords(g, out.data(), place, 2).ok());
        for (size_t k = 0; k < order.size(); ++k) {
          ASSERT_EQ(0, std::memcmp(out.data() + place[k], values.data() + offsets[order[k]], g.sizes[k]))
              << io << (cold ? " cold" : " hot") << " record " << k;
        }
        for (size_t i = out.size() - 16; i < out.size(); ++i) ASSERT_EQ(out[i], 0xEE);
        // io="auto" on io_uring asks the page cache first: a dropped file's payloads wait on
        // the disk and are decoded on arrival (most of them: a neighbour's read may have
        // cached some, and the duplicate is reported at the end). Hits, and reads that
        // cannot tell (pread, io="uring"), are left to PlaceRecords.
        if (std::string(io) == "auto" && dropped && GetIoBackendInfo().uring_available &&
            lsio_test::NowaitWorks(path)) {
          size_t on_arrival = 0;
          for (size_t k = 0; k < order.size(); ++k) on_arrival += g.decoded[k] != nullptr;
          EXPECT_GT(on_arrival, order.size() / 2) << "decoded on arrival";
        }
        if (std::string(io) != "auto" || !cold) {
          for (size_t k = 0; k < order.size(); ++k) ASSERT_EQ(g.decoded[k], nullptr) << k;
        }
      }
    }
    // A flipped byte in one frame: named by its position, whether met on arrival (io="auto",
    // the file dropped first) or in place (pread, io="uring", a hot io="auto" read).
    payload[poffs[order[7]] + (poffs[order[7] + 1] - poffs[order[7]]) / 2] ^= 0x5A;
    dir.Write("0.zr", payload);
    for (int round = 0; round < 4; ++round) {
      const char* io = round == 1 ? "pread" : round == 2 ? "uring" : "auto";
      if (round == 0) lsio_test::DropCached(path);
      std::vector<uint8_t> staged;
      GatheredRecords g;
      size_t failed = 99;
      Status st = gather(io, 20, &staged, &g, &failed);
      if (st.code() == StatusCode::kUnavailable) continue;  // io_uring refused by the kernel
      if (st.ok()) {
        std::vector<uint64_t> place = {0};
        for (size_t k = 0; k + 1 < g.sizes.size(); ++k) place.push_back(place.back() + g.sizes[k]);
        std::vector<uint8_t> out(place.back() + g.sizes.back());
        st = PlaceRecords(g, out.data(), place, 2, &failed);
      }
      EXPECT_EQ(st.code(), StatusCode::kDataLoss) << io << ": " << st.ToString();
      EXPECT_EQ(failed, 7u) << io;
    }
  }
}

TEST(RecordCodecTest, RefusesBadArguments) {
  const uint8_t v[4] = {1, 2, 3, 4};
  std::vector<uint8_t> out;
  std::vector<uint64_t> o;
  const std::vector<uint64_t> ok = {0, 4};
  EXPECT_EQ(CompressRecords(RecordCompression::kNone, 0, v, 4, ok, 1, &out, &o).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(CompressRecords(RecordCompression::kZstd, 99, v, 4, ok, 1, &out, &o).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(CompressRecords(RecordCompression::kDeflate, 13, v, 4, ok, 1, &out, &o).code(), StatusCode::kInvalidArgument);
  const std::vector<uint64_t> past = {0, 5};
  EXPECT_EQ(CompressRecords(RecordCompression::kZstd, 3, v, 4, past, 1, &out, &o).code(), StatusCode::kInvalidArgument);
  const std::vector<uint64_t> back = {0, 3, 2};
  EXPECT_EQ(CompressRecords(RecordCompression::kZstd, 3, v, 4, back, 1, &out, &o).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace lsio
