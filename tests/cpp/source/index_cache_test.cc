// IndexCache: LRU bounded by bytes (64 + 16 per entry), refresh on Find, replacement on
// re-insert, oversized indexes not cached, evicted indexes still usable by their holders.
#include "source/index_cache.h"

#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace lsio {
namespace {

ShardIndexPtr Index(size_t n, uint64_t tag) {
  auto v = std::make_shared<std::vector<ShardIndexEntry>>(n);
  (*v)[0].offset = tag;
  return v;
}

const std::string kFile = "1:2:3:4:5";

constexpr uint64_t kCost4 = 64 + 4 * sizeof(ShardIndexEntry);

TEST(IndexCacheTest, MissThenHit) {
  IndexCache c(1 << 20);
  EXPECT_EQ(c.Find(7, kFile), nullptr);
  c.Insert(7, Index(4, 70), kFile, 100);
  auto hit = c.Find(7, kFile);
  ASSERT_NE(hit, nullptr);
  EXPECT_EQ((*hit)[0].offset, 70u);
  EXPECT_EQ(c.size(), 1u);
  EXPECT_EQ(c.bytes(), kCost4);
}

TEST(IndexCacheTest, EvictsLeastRecentlyUsedByBytes) {
  IndexCache c(3 * kCost4);
  c.Insert(1, Index(4, 1), kFile, 100);
  c.Insert(2, Index(4, 2), kFile, 100);
  c.Insert(3, Index(4, 3), kFile, 100);
  ShardIndexPtr held = c.Find(2, kFile);
  ASSERT_NE(c.Find(1, kFile), nullptr);
  ASSERT_NE(c.Find(3, kFile), nullptr);  // 2 is now the least recently used
  c.Insert(4, Index(4, 4), kFile, 100);
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
  c.Insert(1, Index(4, 1), kFile, 100);
  c.Insert(1, Index(8, 9), kFile, 100);
  EXPECT_EQ(c.size(), 1u);
  EXPECT_EQ(c.bytes(), 64 + 8 * sizeof(ShardIndexEntry));
  EXPECT_EQ((*c.Find(1, kFile))[0].offset, 9u);
}

TEST(IndexCacheTest, IndexLargerThanCapacityIsNotCached) {
  IndexCache c(kCost4 - 1);
  c.Insert(1, Index(4, 1), kFile, 100);
  EXPECT_EQ(c.Find(1, kFile), nullptr);
  EXPECT_EQ(c.bytes(), 0u);
  IndexCache zero(0);
  zero.Insert(1, Index(1, 1), kFile, 100);
  EXPECT_EQ(zero.size(), 0u);
}

TEST(IndexCacheTest, AnotherVersionIsAMissAndDropsTheEntry) {
  IndexCache c(1 << 20);
  c.Insert(7, Index(4, 70), kFile, 100);
  for (const std::string other : {"9:2:3:4:5", "1:9:3:4:5", "1:2:9:4:5", "1:2:3:9:5", "1:2:3:4:9", ""}) {
    c.Insert(7, Index(4, 70), kFile, 100);
    EXPECT_EQ(c.Find(7, other), nullptr);
    EXPECT_EQ(c.size(), 0u) << "the stale index is dropped";
    EXPECT_EQ(c.bytes(), 0u);
  }
  c.Insert(7, Index(4, 71), kFile, 100);
  ASSERT_NE(c.Find(7, kFile), nullptr);
  EXPECT_EQ((*c.Find(7, kFile))[0].offset, 71u);
}

TEST(IndexCacheTest, FindAnyReturnsTheEntryWithItsVersionAndSize) {
  IndexCache c(1 << 20);
  EXPECT_FALSE(c.FindAny(7).has_value());
  c.Insert(7, Index(4, 70), "\"etag-1\"", 4096);
  auto hit = c.FindAny(7);
  ASSERT_TRUE(hit.has_value());
  EXPECT_EQ((*hit->index)[0].offset, 70u);
  EXPECT_EQ(hit->version, "\"etag-1\"");
  EXPECT_EQ(hit->object_size, 4096u);
  // FindAny refreshes the entry's place in the LRU like Find does.
  EXPECT_NE(c.Find(7, "\"etag-1\""), nullptr);
}

TEST(IndexCacheTest, ClearDropsEverything) {
  IndexCache c(1 << 20);
  c.Insert(1, Index(4, 1), kFile, 100);
  c.Insert(2, Index(4, 2), kFile, 100);
  c.Clear();
  EXPECT_EQ(c.size(), 0u);
  EXPECT_EQ(c.bytes(), 0u);
  EXPECT_EQ(c.Find(1, kFile), nullptr);
}

}  // namespace
}  // namespace lsio
