// lsio::Array with OpenOptions::direct (O_DIRECT): chunks at unaligned offsets, indexes at
// the start and the end of shards, compressed and uncompressed chunks (the latter would be
// read straight into the output without O_DIRECT), on every backend. Each read must equal
// the buffered read of the same store.
#include <zstd.h>

#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "lsio/array.h"
#include "test_util.h"

namespace lsio {
namespace {

using lsio_test::Box;
using lsio_test::Bytes;
using lsio_test::TempDir;
using lsio_test::View;

constexpr int64_t kN = 256;      // array is kN x kN uint16
constexpr int64_t kShard = 128;  // 2 x 2 shards
constexpr int64_t kChunk = 32;   // 4 x 4 inner chunks per shard, 2 KiB each

uint16_t Value(int64_t r, int64_t c) {
  uint64_t x = static_cast<uint64_t>(r * 7919 + c * 104729 + 12345);
  x ^= x >> 13;
  x *= 0x9E3779B97F4A7C15ull;
  // Half noise, half structure: zstd frames of uneven sizes.
  return static_cast<uint16_t>(((c / 8) % 2 == 0) ? (x >> 48) : (r + c));
}

// Writes a sharded store: index at `location`, inner chunks zstd-compressed or raw.
void WriteStore(const TempDir& dir, const std::string& name, const std::string& location, bool zstd) {
  const std::string codecs = zstd ? R"([{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "zstd", "configuration": {"level": 3, "checksum": false}}])"
                                  : R"([{"name": "bytes", "configuration": {"endian": "little"}}])";
  dir.Write(name + "/zarr.json", R"({"zarr_format": 3, "node_type": "array", "shape": [256, 256],
    "data_type": "uint16", "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [128, 128]}},
    "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}}, "fill_value": 7,
    "codecs": [{"name": "sharding_indexed", "configuration": {"chunk_shape": [32, 32], "codecs": )" +
                                  codecs + R"(, "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "crc32c"}],
      "index_location": ")" + location + R"("}}]})");
  const int per = static_cast<int>(kShard / kChunk);
  const uint64_t index_size = static_cast<uint64_t>(per * per) * 16 + 4;
  for (int sr = 0; sr < kN / kShard; ++sr)
    for (int sc = 0; sc < kN / kShard; ++sc) {
      Bytes data;
      std::vector<std::pair<uint64_t, uint64_t>> entries;
      const uint64_t base = location == "start" ? index_size : 0;
      for (int k = 0; k < per * per; ++k) {
        if (sr == 1 && sc == 0 && k == 5) {  // one missing chunk: fill
          entries.emplace_back(~0ull, ~0ull);
          continue;
        }
        Bytes raw;
        for (int64_t r = 0; r < kChunk; ++r)
          for (int64_t c = 0; c < kChunk; ++c) {
            const int64_t gr = sr * kShard + (k / per) * kChunk + r;
            const int64_t gc = sc * kShard + (k % per) * kChunk + c;
            lsio_test::PutLE<uint16_t>(raw, Value(gr, gc));
          }
        Bytes stored = raw;
        if (zstd) {
          stored.resize(ZSTD_compressBound(raw.size()));
          stored.resize(ZSTD_compress(stored.data(), stored.size(), raw.data(), raw.size(), 3));
        }
        data.insert(data.end(), 3 + k % 5, 0xEE);  // odd gaps: nothing is aligned
        entries.emplace_back(base + data.size(), stored.size());
        data.insert(data.end(), stored.begin(), stored.end());
      }
      Bytes index;
      for (auto [o, n] : entries) {
        lsio_test::PutLE<uint64_t>(index, o);
        lsio_test::PutLE<uint64_t>(index, n);
      }
      index = lsio_test::WithCrc(index);
      const Bytes file = location == "start" ? lsio_test::Concat({index, data}) : lsio_test::Concat({data, index});
      dir.Write(name + "/c/" + std::to_string(sr) + "/" + std::to_string(sc), file);
    }
}

std::vector<uint16_t> ReadBox(Array& a, int64_t r0, int64_t c0, int64_t nr, int64_t nc) {
  std::vector<uint16_t> out(static_cast<size_t>(nr * nc), 0xDEAD);
  const Status st = a.Read(Box({r0, c0}, {nr, nc}), View(out.data(), {nr, nc}, 2));
  EXPECT_TRUE(st.ok()) << st.ToString();
  return out;
}

TEST(DirectArrayTest, DirectReadsEqualBufferedReadsOnEveryBackend) {
  TempDir dir;
  int cases = 0;
  for (const char* location : {"end", "start"})
    for (bool zstd : {true, false}) {
      const std::string name = std::string("a_") + location + (zstd ? "_zstd" : "_raw");
      WriteStore(dir, name, location, zstd);
      for (const char* io : {"pread", "uring", "auto"}) {
        SCOPED_TRACE(name + " io=" + io);
        OpenOptions buffered_opts;
        buffered_opts.io = "pread";
        auto buffered = Array::Open(dir.Join(name), buffered_opts);
        ASSERT_TRUE(buffered.ok()) << buffered.status().ToString();
        OpenOptions o;
        o.io = io;
        o.direct = DirectIo::kOn;
        o.threads = 2;
        o.max_gap = (cases % 2) ? 0 : 64 << 10;  // separate and coalesced reads
        auto direct = Array::Open(dir.Join(name), o);
        if (!direct.ok() && std::string(io) == "uring") continue;  // io_uring unavailable here
        ASSERT_TRUE(direct.ok()) << direct.status().ToString();
        ++cases;
        const std::vector<uint16_t> whole = ReadBox(**direct, 0, 0, kN, kN);
        ASSERT_EQ(whole, ReadBox(**buffered, 0, 0, kN, kN));
        for (int64_t r = 0; r < kN; ++r)
          for (int64_t c = 0; c < kN; ++c) {
            const bool missing = r >= 128 && r < 256 && c < 128 && ((r - 128) / 32) * 4 + c / 32 == 5;
            ASSERT_EQ(whole[static_cast<size_t>(r * kN + c)], missing ? 7 : Value(r, c)) << r << "," << c;
          }
        // Crops that start and end inside chunks.
        for (auto [r0, c0, nr, nc] : {std::array<int64_t, 4>{3, 5, 70, 129}, {100, 200, 150, 56}, {255, 0, 1, 256}}) {
          EXPECT_EQ(ReadBox(**direct, r0, c0, nr, nc), ReadBox(**buffered, r0, c0, nr, nc));
        }
      }
    }
  EXPECT_GE(cases, 8);
}

}  // namespace
}  // namespace lsio
