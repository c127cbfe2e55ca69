// ChunkCache: hits and misses, LRU eviction by bytes (each entry costing its decoded size,
// key and overhead), entries larger than the capacity not kept, Reserve only growing, Clear,
// replaced keys, entries outliving their eviction, and concurrent use (run under TSan too).
#include "read/chunk_cache.h"

#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace lsio {
namespace {

std::vector<uint8_t> Bytes(size_t n, uint8_t v) { return std::vector<uint8_t>(n, v); }
std::vector<uint8_t> Of(const ChunkCache::Chunk& c) { return std::vector<uint8_t>(c->data(), c->data() + c->size); }

TEST(ChunkCacheTest, FindsWhatWasInsertedAndCountsHitsAndMisses) {
  ChunkCache c(1 << 20);
  EXPECT_EQ(c.Find("a"), nullptr);
  auto b = Bytes(100, 7);
  c.Insert("a", b.data(), b.size());
  auto hit = c.Find("a");
  ASSERT_NE(hit, nullptr);
  EXPECT_EQ(Of(hit), b);
  const auto s = c.stats();
  EXPECT_EQ(s.hits, 1u);
  EXPECT_EQ(s.misses, 1u);
  EXPECT_EQ(s.inserts, 1u);
  EXPECT_EQ(s.entries, 1u);
  EXPECT_EQ(s.bytes, ChunkCache::Cost("a", 100));
}

TEST(ChunkCacheTest, EvictsTheLeastRecentlyUsedToStayWithinTheCapacity) {
  const uint64_t one = ChunkCache::Cost("k0", 1000);
  ChunkCache c(3 * one);
  auto b = Bytes(1000, 1);
  c.Insert("k0", b.data(), b.size());
  c.Insert("k1", b.data(), b.size());
  c.Insert("k2", b.data(), b.size());
  ASSERT_NE(c.Find("k0"), nullptr);  // k0 is now the most recent: k1 goes first
  c.Insert("k3", b.data(), b.size());
  EXPECT_EQ(c.Find("k1"), nullptr);
  EXPECT_NE(c.Find("k0"), nullptr);
  EXPECT_NE(c.Find("k2"), nullptr);
  EXPECT_NE(c.Find("k3"), nullptr);
  EXPECT_LE(c.stats().bytes, 3 * one);
  EXPECT_EQ(c.stats().evictions, 1u);
}

TEST(ChunkCacheTest, AnEntryLargerThanTheCapacityIsNotKept) {
  ChunkCache c(1000);
  auto b = Bytes(2000, 1);
  c.Insert("big", b.data(), b.size());
  EXPECT_EQ(c.Find("big"), nullptr);
  EXPECT_EQ(c.stats().entries, 0u);
  ChunkCache none(0);  // capacity 0: nothing is kept
  none.Insert("x", b.data(), 1);
  EXPECT_EQ(none.Find("x"), nullptr);
}

TEST(ChunkCacheTest, ReserveOnlyGrowsAndClearResets) {
  ChunkCache c(100);
  c.Reserve(50);
  EXPECT_EQ(c.stats().capacity, 100u);
  c.Reserve(5000);
  EXPECT_EQ(c.stats().capacity, 5000u);
  auto b = Bytes(10, 1);
  c.Insert("a", b.data(), b.size());
  c.Clear();
  EXPECT_EQ(c.Find("a"), nullptr);
  EXPECT_EQ(c.stats().capacity, 0u);
  EXPECT_EQ(c.stats().bytes, 0u);
}

TEST(ChunkCacheTest, ReplacingAKeyKeepsOneEntryAndEvictedEntriesStayValidForTheirHolders) {
  ChunkCache c(ChunkCache::Cost("a", 10) + 10);
  auto one = Bytes(10, 1), two = Bytes(10, 2);
  c.Insert("a", one.data(), one.size());
  auto held = c.Find("a");
  c.Insert("a", two.data(), two.size());
  EXPECT_EQ(c.stats().entries, 1u);
  EXPECT_EQ(Of(c.Find("a")), two);
  c.Insert("b", one.data(), one.size());  // evicts "a"
  EXPECT_EQ(c.Find("a"), nullptr);
  EXPECT_EQ(Of(held), one);  // the old value lives while held
}

TEST(ChunkCacheTest, AChunkInsertedAsItIsKeptWithoutACopy) {
  ChunkCache c(1 << 20);
  EXPECT_TRUE(c.Fits("a", 1000));
  EXPECT_FALSE(c.Fits("a", 2 << 20));
  auto entry = std::make_shared<CachedChunk>(1000);
  std::memset(entry->bytes.get(), 9, 1000);
  const uint8_t* where = entry->data();
  c.Insert("a", ChunkCache::Chunk(entry));
  auto hit = c.Find("a");
  ASSERT_NE(hit, nullptr);
  EXPECT_EQ(hit->data(), where);
  EXPECT_EQ(Of(hit), Bytes(1000, 9));
}

TEST(ChunkCacheTest, KeysSeparateNamespaceLocationVersionAndRange) {
  const std::string k = ChunkCacheKey("ns", "/a/c/0", "1:2:3", 100, 20);
  EXPECT_NE(k, ChunkCacheKey("ns2", "/a/c/0", "1:2:3", 100, 20));
  EXPECT_NE(k, ChunkCacheKey("ns", "/a/c/1", "1:2:3", 100, 20));
  EXPECT_NE(k, ChunkCacheKey("ns", "/a/c/0", "1:2:4", 100, 20));
  EXPECT_NE(k, ChunkCacheKey("ns", "/a/c/0", "1:2:3", 101, 20));
  EXPECT_NE(k, ChunkCacheKey("ns", "/a/c/0", "1:2:3", 100, 21));
}

TEST(ChunkCacheTest, ConcurrentFindsAndInsertsStayConsistent) {
  ChunkCache c(64 * ChunkCache::Cost("key-000", 256));
  std::vector<std::thread> ts;
  for (int t = 0; t < 4; ++t) {
    ts.emplace_back([&c, t] {
      for (int i = 0; i < 2000; ++i) {
        const std::string key = "key-" + std::to_string((i * 7 + t) % 100);
        auto hit = c.Find(key);
        if (hit != nullptr) {
          ASSERT_EQ(hit->size, 256u);
          ASSERT_EQ(hit->data()[0], static_cast<uint8_t>(key.size()));
        } else {
          auto b = Bytes(256, static_cast<uint8_t>(key.size()));
          c.Insert(key, b.data(), b.size());
        }
      }
    });
  }
  for (auto& t : ts) t.join();
  const auto s = c.stats();
  EXPECT_LE(s.bytes, s.capacity);
  EXPECT_EQ(s.hits + s.misses, 8000u);
}

}  // namespace
}  // namespace lsio
