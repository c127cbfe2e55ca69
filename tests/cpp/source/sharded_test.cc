// ShardedSource: shard objects opened through a store, their indexes read in one batch and
// cached by version, inner chunks located; absent shards, missing entries, short and corrupt
// shards; a rewritten shard's cached index is never applied to the new file.
#include "source/sharded.h"

#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "io/fd_cache.h"
#include "io/io_backend.h"
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

}  // namespace
}  // namespace lsio
