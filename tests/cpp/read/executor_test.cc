// ExecuteRead on stores written byte by byte: the §6.9 shard blobs, the index cache (the
// index is read once and reused while the shard file is unchanged, read again once it
// changed), error context (file, chunk, byte range), the uncompressed
// size check, chunk files opened by their reads, and identical results with 1 and several
// threads.
#include "read/executor.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <thread>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "io/fd_cache.h"
#include "io/io_backend.h"
#include "source/index_cache.h"
#include "store/local_store.h"
#include "test_util.h"
#include "zarr/metadata.h"

namespace lsio {
namespace {

using lsio_test::View;
using lsio_test::Box;

using lsio_test::Bytes;
using lsio_test::TempDir;

// An opened store: metadata, layout and the per-array caches, as the facade holds them.
struct Store {
  ArrayMetadata meta;
  ArrayLayout layout;
  std::unique_ptr<IoBackend> backend = MakePreadBackend();
  std::unique_ptr<IndexCache> index = std::make_unique<IndexCache>(1 << 20);
  std::unique_ptr<FdCache> files = std::make_unique<FdCache>(64);
  int threads = 1;
  std::function<bool()> interrupted;

  Status Read(const std::vector<Selection>& sels, const std::vector<DstView>& dsts) {
    LocalStoreOptions so;
    so.files = files.get();
    so.backend = backend.get();
    LocalStore store(layout.root, so);
    ReadContext ctx;
    ctx.layout = &layout;
    ctx.store = &store;
    ctx.index_cache = index.get();
    ctx.threads = threads;
    ctx.interrupted = interrupted;
    return ExecuteRead(ctx, sels, dsts);
  }
};

std::unique_ptr<Store> OpenStore(const std::string& root, const std::string& zarr_json) {
  auto m = ParseArrayMetadata(zarr_json);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  if (!m.ok()) return nullptr;
  auto s = std::make_unique<Store>();
  s->meta = std::move(m).value();
  auto l = BuildArrayLayout(s->meta, root);
  EXPECT_TRUE(l.ok()) << l.status().ToString();
  if (!l.ok()) return nullptr;
  s->layout = std::move(l).value();
  return s;
}

std::string Sharded69Json(const char* location) {
  return std::string(R"({"zarr_format": 3, "node_type": "array", "shape": [4, 4], "data_type": "uint16",
    "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [4, 4]}},
    "chunk_key_encoding": {"name": "default"}, "fill_value": 0,
    "codecs": [{"name": "sharding_indexed", "configuration": {"chunk_shape": [2, 2],
      "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
      "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "crc32c"}],
      "index_location": ")") + location + R"("}}]})";
}

TEST(ExecutorTest, ReadsTheSection69BlobsIdentically) {
  struct Case {
    const char* location;
    Bytes blob;
  };
  const Case cases[] = {{"end", lsio_test::Shard69ZarrPythonEnd()},
                        {"start", lsio_test::Shard69ZarrPythonStart()},
                        {"end", lsio_test::Shard69TensorStore()}};
  for (const Case& c : cases) {
    for (int threads : {1, 3}) {
      TempDir dir;
      dir.Write("c/0/0", c.blob);
      auto s = OpenStore(dir.path(), Sharded69Json(c.location));
      ASSERT_NE(s, nullptr);
      s->threads = threads;
      std::vector<uint16_t> out(16, 0xBEEF);
      Status st = s->Read({Box({0, 0}, {4, 4})}, {View(out.data(), {4, 4}, 2)});
      ASSERT_TRUE(st.ok()) << st.ToString();
      EXPECT_EQ(out, lsio_test::Shard69Values()) << c.location << " threads=" << threads;
    }
  }
}

TEST(ExecutorTest, ShardIndexIsReadOnceThenServedFromTheCache) {
  TempDir dir;
  const Bytes blob = lsio_test::Shard69ZarrPythonEnd();
  const std::string path = dir.Write("c/0/0", blob);
  auto s = OpenStore(dir.path(), Sharded69Json("end"));
  ASSERT_NE(s, nullptr);
  std::vector<uint16_t> out(16, 0);
  ASSERT_TRUE(s->Read({Box({0, 0}, {4, 4})}, {View(out.data(), {4, 4}, 2)}).ok());
  EXPECT_EQ(s->index->size(), 1u);

  // While the file is unchanged, the cached index is what the read uses: swap in a doctored
  // index (every inner chunk missing) under the file's identity, and the read returns fill.
  FileRef f = s->files->Open(path).value();
  ASSERT_NE(f, nullptr);
  auto all_missing = std::make_shared<std::vector<ShardIndexEntry>>((*s->index->Find(0, FileVersion(f->id))).size());
  for (ShardIndexEntry& e : *all_missing) e = ShardIndexEntry{UINT64_MAX, UINT64_MAX};
  s->index->Insert(0, all_missing, FileVersion(f->id), f->size);
  std::fill(out.begin(), out.end(), 0xFFFF);
  Status again = s->Read({Box({0, 0}, {4, 4})}, {View(out.data(), {4, 4}, 2)});
  ASSERT_TRUE(again.ok()) << again.ToString();
  EXPECT_EQ(out, std::vector<uint16_t>(16, 0)) << "the cached index was not used";

  // Rewritten in place (same inode, same size, later mtime): the cached index belongs to
  // the old version, so the index is read again, and its corruption found.
  Bytes corrupt = blob;
  corrupt.back() ^= 0xFF;
  dir.Write("c/0/0", corrupt);
  struct timespec times[2] = {{0, UTIME_OMIT}, {f->id.mtime_ns / 1000000000 + 5, 0}};
  ASSERT_EQ(utimensat(AT_FDCWD, path.c_str(), times, 0), 0);
  Status fresh = s->Read({Box({0, 0}, {4, 4})}, {View(out.data(), {4, 4}, 2)});
  ASSERT_FALSE(fresh.ok());
  EXPECT_EQ(fresh.code(), StatusCode::kDataLoss);
  EXPECT_EQ(fresh.message().rfind("shard index: crc32c checksum mismatch (stored 0xa99d79ba", 0), 0u) << fresh.message();
  EXPECT_EQ(fresh.path(), path);
  EXPECT_TRUE(fresh.has_range());
  EXPECT_EQ(fresh.range_offset(), 24u);
  EXPECT_EQ(fresh.range_length(), 68u);
}

TEST(ExecutorTest, ShardShorterThanItsIndexIsDataLossNamingTheFile) {
  TempDir dir;
  const std::string path = dir.Write("c/0/0", Bytes(40, 0));
  auto s = OpenStore(dir.path(), Sharded69Json("end"));
  ASSERT_NE(s, nullptr);
  std::vector<uint16_t> out(16);
  Status st = s->Read({Box({0, 0}, {4, 4})}, {View(out.data(), {4, 4}, 2)});
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), StatusCode::kDataLoss);
  EXPECT_EQ(st.message(), "shard is 40 bytes, shorter than its 68-byte index");
  EXPECT_EQ(st.path(), path);
}

const char* kCrcChunks = R"({"zarr_format": 3, "node_type": "array", "shape": [4, 4], "data_type": "uint8",
  "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [2, 2]}},
  "chunk_key_encoding": {"name": "default"}, "fill_value": 9, "codecs": ["bytes", "crc32c"]})";

TEST(ExecutorTest, DecodeErrorsNameTheFileChunkAndRange) {
  TempDir dir;
  dir.Write("c/0/0", lsio_test::WithCrc({1, 2, 3, 4}));
  Bytes bad = lsio_test::WithCrc({5, 6, 7, 8});
  bad[0] ^= 1;
  const std::string bad_path = dir.Write("c/0/1", bad);
  auto s = OpenStore(dir.path(), kCrcChunks);
  ASSERT_NE(s, nullptr);
  std::vector<uint8_t> out(16);
  Status st = s->Read({Box({0, 0}, {4, 4})}, {View(out.data(), {4, 4}, 1)});
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), StatusCode::kDataLoss);
  EXPECT_EQ(st.message().rfind("crc32c checksum mismatch", 0), 0u) << st.message();
  EXPECT_EQ(st.path(), bad_path);
  EXPECT_EQ(st.chunk(), "(0, 1)");
  EXPECT_TRUE(st.has_range());
  EXPECT_EQ(st.range_offset(), 0u);
  EXPECT_EQ(st.range_length(), 8u);
}

TEST(ExecutorTest, MissingChunkFilesReadAsFill) {
  TempDir dir;
  dir.Write("c/1/1", lsio_test::WithCrc({1, 2, 3, 4}));
  auto s = OpenStore(dir.path(), kCrcChunks);
  ASSERT_NE(s, nullptr);
  std::vector<uint8_t> out(16, 0);
  ASSERT_TRUE(s->Read({Box({0, 0}, {4, 4})}, {View(out.data(), {4, 4}, 1)}).ok());
  EXPECT_EQ(out, (std::vector<uint8_t>{9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 1, 2, 9, 9, 3, 4}));
}

TEST(ExecutorTest, UncompressedChunkOfTheWrongSizeIsDataLossBeforeReading) {
  // Longer and shorter than the 8 bytes the chunk must have. The size is learnt only by the
  // worker that opens the file (one-read objects), which must refuse it before any byte
  // lands in the output.
  const char* json = R"({"zarr_format": 3, "node_type": "array", "shape": [4], "data_type": "uint16",
    "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [4]}},
    "chunk_key_encoding": {"name": "default"}, "fill_value": 0, "codecs": ["bytes"]})";
  for (size_t size : {9u, 7u}) {
    TempDir dir;
    const std::string path = dir.Write("c/0", Bytes(size, 1));
    auto s = OpenStore(dir.path(), json);
    ASSERT_NE(s, nullptr);
    std::vector<uint16_t> out(4, 0x7777);
    Status st = s->Read({Box({0}, {4})}, {View(out.data(), {4}, 2)});
    ASSERT_FALSE(st.ok());
    EXPECT_EQ(st.code(), StatusCode::kDataLoss);
    EXPECT_EQ(st.message(), "uncompressed chunk has " + std::to_string(size) + " bytes, expected 8");
    EXPECT_EQ(st.path(), path);
    EXPECT_EQ(st.chunk(), "(0)");
    EXPECT_EQ(out, std::vector<uint16_t>(4, 0x7777)) << "nothing written before the check";
  }
}

TEST(ExecutorTest, UnshardedChunkFilesAreOpenedByTheirReadsAndNeverCached) {
  // 20 x 20 chunks of 2 x 2 (400 files, more than the test cache's 64 descriptors), a tenth
  // of them missing; compressed-like (crc32c: read into a buffer, then scattered) and raw
  // (bytes only: whole rows read straight into the output). Every read call is one wave that
  // holds a descriptor only while a worker reads the file, and none stays behind.
  const char* crc_json = R"({"zarr_format": 3, "node_type": "array", "shape": [40, 40], "data_type": "uint8",
    "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [2, 2]}},
    "chunk_key_encoding": {"name": "default"}, "fill_value": 7, "codecs": ["bytes", "crc32c"]})";
  const char* raw_json = R"({"zarr_format": 3, "node_type": "array", "shape": [40, 40], "data_type": "uint8",
    "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [1, 40]}},
    "chunk_key_encoding": {"name": "default"}, "fill_value": 7, "codecs": ["bytes"]})";
  auto value = [](int64_t r, int64_t c) { return static_cast<uint8_t>((r * 40 + c) % 251); };
  for (const bool raw : {false, true}) {
    TempDir dir;
    std::vector<uint8_t> expected(1600, 7);
    const int64_t ch = raw ? 1 : 2;
    const int64_t cw = raw ? 40 : 2;
    int files = 0;
    for (int64_t gr = 0; gr < 40 / ch; ++gr) {
      for (int64_t gc = 0; gc < 40 / cw; ++gc) {
        if ((gr * 7 + gc * 3) % 10 == 0) continue;  // missing: fill
        Bytes b;
        for (int64_t r = gr * ch; r < (gr + 1) * ch; ++r) {
          for (int64_t c = gc * cw; c < (gc + 1) * cw; ++c) {
            b.push_back(value(r, c));
            expected[static_cast<size_t>(r * 40 + c)] = value(r, c);
          }
        }
        dir.Write("c/" + std::to_string(gr) + "/" + std::to_string(gc), raw ? b : lsio_test::WithCrc(b));
        ++files;
      }
    }
    auto s = OpenStore(dir.path(), raw ? raw_json : crc_json);
    ASSERT_NE(s, nullptr);
    ASSERT_GT(files, 30);
    for (int threads : {1, 3}) {
      s->threads = threads;
      const int fds = lsio_test::OpenDescriptors();
      std::vector<uint8_t> out(1600, 0);
      Status st = s->Read({Box({0, 0}, {40, 40})}, {View(out.data(), {40, 40}, 1)});
      ASSERT_TRUE(st.ok()) << st.ToString();
      EXPECT_EQ(out, expected) << "raw " << raw << ", threads " << threads;
      EXPECT_EQ(s->files->size(), 0u) << "chunk files read once are not cached";
      EXPECT_EQ(lsio_test::OpenDescriptors(), fds) << "no descriptor stays open after the call";
      // A crop that splits chunks (scatter from the read buffer) too.
      std::vector<uint8_t> crop(15 * 13, 0);
      st = s->Read({Box({3, 5}, {15, 13})}, {View(crop.data(), {15, 13}, 1)});
      ASSERT_TRUE(st.ok()) << st.ToString();
      for (int64_t r = 0; r < 15; ++r) {
        for (int64_t c = 0; c < 13; ++c) {
          ASSERT_EQ(crop[static_cast<size_t>(r * 13 + c)], expected[static_cast<size_t>((r + 3) * 40 + c + 5)]);
        }
      }
    }
  }
}

TEST(ExecutorTest, ManyCropsGiveTheSameResultWithOneOrSeveralThreads) {
  // [32, 32] uint16 in [16,16] shards of [4,4] raw chunks, C-order data, some chunks absent.
  TempDir dir;
  const char* json = R"({"zarr_format": 3, "node_type": "array", "shape": [30, 30], "data_type": "uint16",
    "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [16, 16]}},
    "chunk_key_encoding": {"name": "default"}, "fill_value": 4660,
    "codecs": [{"name": "sharding_indexed", "configuration": {"chunk_shape": [4, 4],
      "codecs": ["bytes"], "index_codecs": ["bytes", "crc32c"]}}]})";
  auto value = [](int64_t r, int64_t c) { return static_cast<uint16_t>(r * 100 + c); };
  for (int64_t sr = 0; sr < 2; ++sr) {
    for (int64_t sc = 0; sc < 2; ++sc) {
      Bytes data;
      Bytes index;
      for (int64_t ir = 0; ir < 4; ++ir) {
        for (int64_t ic = 0; ic < 4; ++ic) {
          if ((ir + ic + sr) % 5 == 0) {  // absent inner chunk
            lsio_test::PutLE<uint64_t>(index, ~0ull);
            lsio_test::PutLE<uint64_t>(index, ~0ull);
            continue;
          }
          lsio_test::PutLE<uint64_t>(index, data.size());
          lsio_test::PutLE<uint64_t>(index, 32);
          for (int64_t r = 0; r < 4; ++r)
            for (int64_t c = 0; c < 4; ++c)
              lsio_test::PutLE<uint16_t>(data, value(sr * 16 + ir * 4 + r, sc * 16 + ic * 4 + c));
        }
      }
      dir.Write("c/" + std::to_string(sr) + "/" + std::to_string(sc), lsio_test::Concat({data, lsio_test::WithCrc(index)}));
    }
  }
  auto expected = [&](int64_t r, int64_t c) -> uint16_t {
    const int64_t sr = r / 16, ir = (r % 16) / 4, ic = (c % 16) / 4;
    return (ir + ic + sr) % 5 == 0 ? 4660 : value(r, c);
  };
  std::vector<Selection> sels;
  for (int i = 0; i < 40; ++i) sels.push_back(Box({(i * 7) % 23, (i * 11) % 23}, {8, 8}));
  std::vector<std::vector<uint16_t>> results;
  for (int threads : {1, 4}) {
    auto s = OpenStore(dir.path(), json);
    ASSERT_NE(s, nullptr);
    s->threads = threads;
    std::vector<uint16_t> out(40 * 64, 0);
    std::vector<DstView> views;
    for (int i = 0; i < 40; ++i) views.push_back(View(out.data() + i * 64, {8, 8}, 2));
    Status st = s->Read(sels, views);
    ASSERT_TRUE(st.ok()) << st.ToString();
    for (int i = 0; i < 40; ++i)
      for (int64_t r = 0; r < 8; ++r)
        for (int64_t c = 0; c < 8; ++c)
          ASSERT_EQ(out[static_cast<size_t>(i * 64 + r * 8 + c)], expected(sels[static_cast<size_t>(i)][0].start + r,
                                                                           sels[static_cast<size_t>(i)][1].start + c))
              << "crop " << i << " (" << r << ", " << c << ") threads=" << threads;
    results.push_back(out);
  }
  EXPECT_EQ(results[0], results[1]);
}

// Wraps a backend: marks the time this thread spends inside the completion callback (where
// its read arena holds the batch and, with io_uring, more completions wait on its ring),
// and slows each callback down so that the executor's 10 ms interrupt poll comes due there.
class CallbackWatchingBackend final : public IoBackend {
 public:
  explicit CallbackWatchingBackend(std::unique_ptr<IoBackend> base) : base_(std::move(base)) {}
  const char* name() const override { return base_->name(); }
  void Read(std::span<ReadRequest> requests, const std::function<void(size_t)>& on_done) override {
    base_->Read(requests, [&](size_t i) {
      std::this_thread::sleep_for(std::chrono::microseconds(700));
      in_callback = true;
      on_done(i);
      in_callback = false;
    });
  }
  static thread_local bool in_callback;

 private:
  std::unique_ptr<IoBackend> base_;
};
thread_local bool CallbackWatchingBackend::in_callback = false;

TEST(ExecutorTest, InterruptPollNeverRunsInsideACompletionCallback) {
  // The poll may run Python signal handlers, which may read through lsio on the same thread:
  // it must only come where this thread holds no batch in its arena and nothing on its ring.
  // [64, 64] uint16 in 256 unsharded raw [4, 4] chunk files: 256 reads through the arena.
  TempDir dir;
  const char* json = R"({"zarr_format": 3, "node_type": "array", "shape": [64, 64], "data_type": "uint16",
    "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [4, 4]}},
    "chunk_key_encoding": {"name": "default"}, "fill_value": 0, "codecs": ["bytes"]})";
  for (int64_t gr = 0; gr < 16; ++gr) {
    for (int64_t gc = 0; gc < 16; ++gc) {
      Bytes raw;
      for (int64_t r = 0; r < 4; ++r)
        for (int64_t c = 0; c < 4; ++c) lsio_test::PutLE<uint16_t>(raw, static_cast<uint16_t>((gr * 4 + r) * 64 + gc * 4 + c));
      dir.Write("c/" + std::to_string(gr) + "/" + std::to_string(gc), raw);
    }
  }
  std::vector<std::pair<std::string, std::unique_ptr<IoBackend>>> backends;
  backends.emplace_back("pread", MakePreadBackend());
  if (ProbeUringSetup() == 0) {
    backends.emplace_back("uring", std::move(MakeUringBackend(64, false)).value());
    backends.emplace_back("uring+nowait", std::move(MakeUringBackend(64, true)).value());
  }
  for (auto& [name, backend] : backends) {
    SCOPED_TRACE(name);
    auto s = OpenStore(dir.path(), json);
    ASSERT_NE(s, nullptr);
    s->backend = std::make_unique<CallbackWatchingBackend>(std::move(backend));
    int polls = 0;
    int inside = 0;
    s->interrupted = [&] {
      ++polls;
      inside += CallbackWatchingBackend::in_callback;
      return false;
    };
    std::vector<uint16_t> out(64 * 64, 0);
    Status st = s->Read({Box({0, 0}, {64, 64})}, {View(out.data(), {64, 64}, 2)});
    ASSERT_TRUE(st.ok()) << st.ToString();
    for (size_t i = 0; i < out.size(); ++i) ASSERT_EQ(out[i], static_cast<uint16_t>(i)) << i;
    EXPECT_GT(polls, 5) << "the read takes ~180 ms: the poll must have come due many times";
    EXPECT_EQ(inside, 0) << "of " << polls << " polls ran inside a completion callback";
  }
}

}  // namespace
}  // namespace lsio
