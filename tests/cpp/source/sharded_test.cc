// ShardedSource: shard objects opened through a store, their indexes read in one batch and
// cached by version, inner chunks located; absent shards, missing entries, short and corrupt
// shards; a rewritten shard's cached index is never applied to the new file.
#include "source/sharded.h"

#include <cerrno>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "io/fd_cache.h"
#include "io/io_backend.h"
#include "net/test_object_server.h"
#include "store/disk_cache_store.h"
#include "store/object_store.h"
#include "store/local_store.h"
#include "test_util.h"
#include "zarr/layout.h"
#include "zarr/metadata.h"

namespace lsio {
namespace {

using lsio_test::Bytes;
using lsio_test::TempDir;

// The §6.9 array of zarr-format.md: [4, 4] uint16, one shard of [2, 2] inner chunks, the
// lower-right chunk not stored, index [bytes, crc32c] at the end.
ArrayLayout Layout69(const std::string& root) {
  auto m = ParseArrayMetadata(R"({"zarr_format": 3, "node_type": "array", "shape": [4, 4], "data_type": "uint16",
    "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [4, 4]}},
    "chunk_key_encoding": {"name": "default"}, "fill_value": 0,
    "codecs": [{"name": "sharding_indexed", "configuration": {"chunk_shape": [2, 2],
      "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
      "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "crc32c"}],
      "index_location": "end"}}]})");
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  auto l = BuildArrayLayout(m.value(), root);
  EXPECT_TRUE(l.ok()) << l.status().ToString();
  return std::move(l).value();
}

struct Local {
  std::unique_ptr<IoBackend> backend = MakePreadBackend();
  FdCache files{64};
  std::unique_ptr<LocalStore> store;
  explicit Local(const std::string& root) {
    LocalStoreOptions o;
    o.files = &files;
    o.backend = backend.get();
    store = std::make_unique<LocalStore>(root, o);
  }
};

TEST(ShardedSourceTest, LocatesInnerChunksAndCachesIndexesByVersion) {
  TempDir dir;
  dir.Write("c/0/0", lsio_test::Shard69ZarrPythonEnd());
  const ArrayLayout l = Layout69(dir.path());
  Local local(dir.path());
  IndexCache cache(1 << 20);
  ShardedSource source(l.shard, &cache, local.store.get());
  std::vector<ShardedSource::Shard> shards = {{0, "c/0/0"}, {1, "c/0/1"}};  // the second does not exist
  ASSERT_TRUE(source.Resolve(shards, {}).ok());
  ASSERT_NE(shards[0].object, nullptr);
  EXPECT_EQ(shards[1].object, nullptr) << "an absent shard reads as fill";
  EXPECT_NE(shards[0].location.find("c/0/0"), std::string::npos);
  // Inner chunks in C order: (0,0) at 0, (0,1) at 16, (1,0) at 8, (1,1) not stored.
  const ChunkSpan c00 = ShardedSource::Locate(shards[0].index, 0);
  const ChunkSpan c01 = ShardedSource::Locate(shards[0].index, 1);
  const ChunkSpan c11 = ShardedSource::Locate(shards[0].index, 3);
  EXPECT_FALSE(c00.missing);
  EXPECT_EQ(c00.offset, 0u);
  EXPECT_EQ(c00.nbytes, 8u);
  EXPECT_EQ(c01.offset, 16u);
  EXPECT_TRUE(c11.missing);
  EXPECT_EQ(cache.size(), 1u);

  // Resolved again: the cached index of this very file version, no new decode needed.
  std::vector<ShardedSource::Shard> again = {{0, "c/0/0"}};
  ASSERT_TRUE(source.Resolve(again, {}).ok());
  EXPECT_EQ(again[0].index, shards[0].index);

  // Rewritten (another file, TensorStore's inner-chunk order): the cached index is not
  // applied to it; the new index is read.
  dir.Write("c/0/0", lsio_test::Shard69TensorStore());
  std::vector<ShardedSource::Shard> after = {{0, "c/0/0"}};
  ASSERT_TRUE(source.Resolve(after, {}).ok());
  EXPECT_NE(after[0].index, shards[0].index);
  EXPECT_EQ(ShardedSource::Locate(after[0].index, 1).offset, 8u);

  ShardedSource::Forget(&cache, std::vector<uint64_t>{0});
  EXPECT_EQ(cache.size(), 0u);
}

TEST(ShardedSourceTest, ShortAndCorruptShardsAreDataLossNamingTheShardAndItsIndex) {
  TempDir dir;
  const ArrayLayout l = Layout69(dir.path());
  Local local(dir.path());
  IndexCache cache(1 << 20);
  ShardedSource source(l.shard, &cache, local.store.get());

  dir.Write("c/0/0", Bytes(10, 0));  // shorter than the 68-byte index
  std::vector<ShardedSource::Shard> shards = {{0, "c/0/0"}};
  Status st = source.Resolve(shards, {});
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), StatusCode::kDataLoss);
  EXPECT_NE(st.ToString().find("shorter than its 68-byte index"), std::string::npos) << st.ToString();
  EXPECT_NE(st.ToString().find("c/0/0"), std::string::npos) << st.ToString();

  Bytes bad = lsio_test::Shard69ZarrPythonEnd();
  bad[bad.size() - 1] ^= 0xFF;  // the index's checksum
  dir.Write("c/0/0", bad);
  std::vector<ShardedSource::Shard> again = {{0, "c/0/0"}};
  st = source.Resolve(again, {});
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), StatusCode::kDataLoss);
  EXPECT_NE(st.ToString().find("c/0/0"), std::string::npos) << st.ToString();
  EXPECT_NE(st.ToString().find(std::to_string(bad.size() - 68)), std::string::npos)
      << "the index's byte range: " << st.ToString();
  EXPECT_EQ(cache.size(), 0u) << "a bad index is never cached";
}

// A disk-cached remote store over the test server (a new one per "process": its own
// ObjectStore, so nothing learned in memory carries over; the cache directory is shared).
std::shared_ptr<DiskCacheStore> CachedStore(const testing::TestObjectServer& srv, const std::string& dir) {
  ObjectStoreConfig c;
  c.scheme = "http";
  c.host = srv.host();
  c.root = "/bucket/arr";
  c.client.timeout_ms = 2000;
  c.client.connect_timeout_ms = 1000;
  auto disk = SharedDiskCache(dir, 1 << 20);
  EXPECT_TRUE(disk.ok());
  return std::make_shared<DiskCacheStore>(std::make_shared<ObjectStore>(c), disk.value());
}

TEST(ShardedSourceTest, RememberedVersionsAreConfirmedByTheChunkReadsNotWithinResolve) {
  // A call that adopts one shard's remembered version and reads another's index sends only
  // the index read: the confirming HEAD goes out with the chunk reads (overlapping the disk
  // reads), or at the latest in ConfirmServed; within Resolve it held every such call up
  // for a round trip.
  testing::TestObjectServer srv;
  const std::string v0 = srv.Put("/bucket/arr/c/0/0", lsio_test::Shard69ZarrPythonEnd());
  srv.Put("/bucket/arr/c/0/1", lsio_test::Shard69ZarrPythonEnd());
  TempDir dir;
  auto store = CachedStore(srv, dir.path() + "/cache");
  const ArrayLayout l = Layout69("/bucket/arr");
  IndexCache cache(1 << 20);
  ShardedSource source(l.shard, &cache, store.get());
  std::vector<ShardedSource::Shard> first = {{0, "c/0/0"}};
  ASSERT_TRUE(source.Resolve(first, {}).ok());

  const size_t before = srv.request_count();
  std::vector<ShardedSource::Shard> shards = {{0, "c/0/0"}, {1, "c/0/1"}};
  ASSERT_TRUE(source.Resolve(shards, {}).ok());
  EXPECT_EQ(shards[0].index, first[0].index) << "the remembered index, adopted";
  ASSERT_NE(shards[1].index, nullptr);
  auto seen = srv.requests();
  ASSERT_EQ(seen.size(), before + 1);
  EXPECT_EQ(seen[before].method, "GET");
  EXPECT_EQ(seen[before].target, "/bucket/arr/c/0/1");
  // The end of the wave confirms the adopted version (one conditional HEAD) and nothing else.
  ASSERT_TRUE(store->ConfirmServed(std::vector<ObjectRef>{shards[0].object, shards[1].object}).ok());
  seen = srv.requests();
  ASSERT_EQ(seen.size(), before + 2);
  EXPECT_EQ(seen[before + 1].method, "HEAD");
  EXPECT_EQ(seen[before + 1].target, "/bucket/arr/c/0/0");
  EXPECT_EQ(seen[before + 1].Header("If-None-Match"), v0);
}

TEST(ShardedSourceTest, ANewProcessTakesShardIndexesFromTheDiskCachesTailsAndConfirmsThem) {
  testing::TestObjectServer srv;
  const std::string v0 = srv.Put("/bucket/arr/c/0/0", lsio_test::Shard69ZarrPythonEnd());
  TempDir dir;
  const std::string cache_dir = dir.path() + "/cache";
  const ArrayLayout l = Layout69("/bucket/arr");
  ShardIndexPtr learned;
  {
    auto store = CachedStore(srv, cache_dir);
    IndexCache cache(1 << 20);
    ShardedSource source(l.shard, &cache, store.get());
    std::vector<ShardedSource::Shard> shards = {{0, "c/0/0"}};
    ASSERT_TRUE(source.Resolve(shards, {}).ok());
    learned = shards[0].index;
    EXPECT_FALSE(shards[0].object->remembered) << "read from the server";
  }
  // "Another process": nothing in memory; the index comes from the tail, with no request.
  auto store = CachedStore(srv, cache_dir);
  IndexCache cache(1 << 20);
  ShardedSource source(l.shard, &cache, store.get());
  std::vector<ShardedSource::Shard> shards = {{0, "c/0/0"}};
  const size_t before = srv.request_count();
  ASSERT_TRUE(source.Resolve(shards, {}).ok());
  EXPECT_EQ(srv.request_count(), before) << "the shard index came from the disk cache";
  ASSERT_NE(shards[0].index, nullptr);
  ASSERT_EQ(shards[0].index->size(), learned->size());
  for (size_t i = 0; i < learned->size(); ++i) {
    EXPECT_EQ((*shards[0].index)[i].offset, (*learned)[i].offset);
    EXPECT_EQ((*shards[0].index)[i].nbytes, (*learned)[i].nbytes);
  }
  EXPECT_TRUE(shards[0].object->remembered);
  EXPECT_EQ(shards[0].object->version, v0);
  EXPECT_GT(store->stats().disk_cache_hits.load(), 0u);
  // ...and its version is confirmed before the call may succeed.
  ASSERT_TRUE(store->ConfirmServed(std::vector<ObjectRef>{shards[0].object}).ok());
  ASSERT_EQ(srv.request_count(), before + 1);
  EXPECT_EQ(srv.requests().back().method, "HEAD");
  EXPECT_EQ(store->RememberedServed(), 1u) << "one index read served from what another process kept";
}

TEST(ShardedSourceTest, AStaleTailFailsTheConfirmationAndEveryAdoptedTailIsErased) {
  testing::TestObjectServer srv;
  srv.Put("/bucket/arr/c/0/0", lsio_test::Shard69ZarrPythonEnd());
  srv.Put("/bucket/arr/c/0/1", lsio_test::Shard69ZarrPythonEnd());  // rewritten too, found later
  TempDir dir;
  const std::string cache_dir = dir.path() + "/cache";
  const ArrayLayout l = Layout69("/bucket/arr");
  {
    auto store = CachedStore(srv, cache_dir);
    IndexCache cache(1 << 20);
    ShardedSource source(l.shard, &cache, store.get());
    std::vector<ShardedSource::Shard> shards = {{0, "c/0/0"}, {1, "c/0/1"}};
    ASSERT_TRUE(source.Resolve(shards, {}).ok());
  }
  // Both rewritten (other ETags) before the next process starts.
  std::vector<uint8_t> v1 = lsio_test::Shard69ZarrPythonEnd();
  v1[0] ^= 0xff;  // a chunk byte: the index is the same, the version is not
  const std::string etag1 = srv.Put("/bucket/arr/c/0/0", v1);
  srv.Put("/bucket/arr/c/0/1", v1);
  auto store = CachedStore(srv, cache_dir);
  {
    IndexCache cache(1 << 20);
    ShardedSource source(l.shard, &cache, store.get());
    std::vector<ShardedSource::Shard> shards = {{0, "c/0/0"}, {1, "c/0/1"}};
    ASSERT_TRUE(source.Resolve(shards, {}).ok());
    EXPECT_TRUE(shards[0].object->remembered && shards[1].object->remembered);
    // Only the first one's change is noticed (a call fails at its first stale object)...
    const Status st = store->ConfirmServed(std::vector<ObjectRef>{shards[0].object});
    EXPECT_EQ(st.error_number(), ESTALE) << st.ToString();
    EXPECT_EQ(store->RememberedServed(), 2u) << "the executor runs a failed call after these once more";
  }
  // ...yet every tail adopted so far is gone: the call run again reads both indexes (and the
  // current versions), instead of failing on the second shard.
  IndexCache cache(1 << 20);
  ShardedSource source(l.shard, &cache, store.get());
  std::vector<ShardedSource::Shard> shards = {{0, "c/0/0"}, {1, "c/0/1"}};
  const size_t before = srv.request_count();
  ASSERT_TRUE(source.Resolve(shards, {}).ok());
  EXPECT_EQ(srv.request_count(), before + 2);
  EXPECT_FALSE(shards[0].object->remembered || shards[1].object->remembered);
  EXPECT_EQ(shards[0].object->version, etag1);
}

}  // namespace
}  // namespace lsio
