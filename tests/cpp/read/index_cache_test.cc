// IndexCache: LRU bounded by bytes (64 + 16 per entry), refresh on Find, replacement on
// re-insert, oversized indexes not cached, evicted indexes still usable by their holders.
#include "read/index_cache.h"

#include <memory>
#include <vector>

#include <gtest/gtest.h>

namespace lsio {
namespace {

ShardIndexPtr Index(size_t n, uint64_t tag) {
  auto v = std::make_shared<std::vector<ShardIndexEntry>>(n);
  (*v)[0].offset = tag;
  return v;
}

const FileIdentity kFile{1, 2, 3, 4, 5};

constexpr uint64_t kCost4 = 64 + 4 * sizeof(ShardIndexEntry);

TEST(IndexCacheTest, MissThenHit) {
  IndexCache c(1 << 20);
  EXPECT_EQ(c.Find(7, kFile), nullptr);
  c.Insert(7, Index(4, 70), kFile);
  auto hit = c.Find(7, kFile);
  ASSERT_NE(hit, nullptr);
  EXPECT_EQ((*hit)[0].offset, 70u);
  EXPECT_EQ(c.size(), 1u);
  EXPECT_EQ(c.bytes(), kCost4);
}

TEST(IndexCacheTest, EvictsLeastRecentlyUsedByBytes) {
  IndexCache c(3 * kCost4);
  c.Insert(1, Index(4, 1), kFile);
  c.Insert(2, Index(4, 2), kFile);
  c.Insert(3, Index(4, 3), kFile);
  ShardIndexPtr held = c.Find(2, kFile);
  ASSERT_NE(c.Find(1, kFile), nullptr);
  ASSERT_NE(c.Find(3, kFile), nullptr);  // 2 is now the least recently used
  c.Insert(4, Index(4, 4), kFile);
  EXPECT_EQ(c.size(), 3u);
  EXPECT_EQ(c.bytes(), 3 * kCost4);
  EXPECT_EQ(c.Find(2, kFile), nullptr);
  EXPECT_NE(c.Find(1, kFile), nullptr);
  EXPECT_NE(c.Find(3, kFile), nullptr);
  EXPECT_NE(c.Find(4, kFile), nullptr);
  ASSERT_NE(held, nullptr);
  EXPECT_EQ((*held)[0].offset, 2u) << "an evicted index stays valid for its holder";
}

TEST(IndexCacheTest, ReinsertReplacesAndKeepsAccounting) {
  IndexCache c(1 << 20);
  c.Insert(1, Index(4, 1), kFile);
  c.Insert(1, Index(8, 9), kFile);
  EXPECT_EQ(c.size(), 1u);
  EXPECT_EQ(c.bytes(), 64 + 8 * sizeof(ShardIndexEntry));
  EXPECT_EQ((*c.Find(1, kFile))[0].offset, 9u);
}

TEST(IndexCacheTest, IndexLargerThanCapacityIsNotCached) {
  IndexCache c(kCost4 - 1);
  c.Insert(1, Index(4, 1), kFile);
  EXPECT_EQ(c.Find(1, kFile), nullptr);
  EXPECT_EQ(c.bytes(), 0u);
  IndexCache zero(0);
  zero.Insert(1, Index(1, 1), kFile);
  EXPECT_EQ(zero.size(), 0u);
}

TEST(IndexCacheTest, AnotherFileIdentityIsAMissAndDropsTheEntry) {
  IndexCache c(1 << 20);
  c.Insert(7, Index(4, 70), kFile);
  for (FileIdentity other : {FileIdentity{9, 2, 3, 4, 5}, FileIdentity{1, 9, 3, 4, 5}, FileIdentity{1, 2, 9, 4, 5},
                             FileIdentity{1, 2, 3, 9, 5}, FileIdentity{1, 2, 3, 4, 9}}) {
    c.Insert(7, Index(4, 70), kFile);
    EXPECT_EQ(c.Find(7, other), nullptr);
    EXPECT_EQ(c.size(), 0u) << "the stale index is dropped";
    EXPECT_EQ(c.bytes(), 0u);
  }
  c.Insert(7, Index(4, 71), kFile);
  ASSERT_NE(c.Find(7, kFile), nullptr);
  EXPECT_EQ((*c.Find(7, kFile))[0].offset, 71u);
}

TEST(IndexCacheTest, ClearDropsEverything) {
  IndexCache c(1 << 20);
  c.Insert(1, Index(4, 1), kFile);
  c.Insert(2, Index(4, 2), kFile);
  c.Clear();
  EXPECT_EQ(c.size(), 0u);
  EXPECT_EQ(c.bytes(), 0u);
  EXPECT_EQ(c.Find(1, kFile), nullptr);
}

}  // namespace
}  // namespace lsio
