// ExecuteRead and SurveyChunks through ObjectStore, served by the scripted loopback server
// (net/test_object_server.h: objects in memory with Range, suffix, ETag and If-Match): the
// §6.9 shard blobs (index at the end and at the start) read identically to the local store;
// each shard index costs ONE request (a suffix, or a prefix range) and no HEAD; a second
// read takes the cached index (FindAny) and pins its chunk reads with If-Match; a shard
// replaced or removed between reads is ESTALE, never a mix of versions; absent shards and
// chunks (404) read as fill; unsharded chunks are fetched whole, once each. 1 and 3 threads.
#include "read/executor.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "io/fd_cache.h"
#include "io/io_backend.h"
#include "net/test_object_server.h"
#include "read/coalescing_tuner.h"
#include "source/index_cache.h"
#include "store/object_store.h"
#include "store/local_store.h"
#include "test_util.h"
#include "zarr/metadata.h"

namespace lsio {
namespace {

using lsio_test::Box;
using lsio_test::Bytes;
using lsio_test::TempDir;
using lsio_test::View;
using testing::SeenRequest;
using testing::TestObjectServer;

constexpr const char* kRoot = "/bucket/arr";
constexpr uint64_t kIndexSize = 4 * 16 + 4;  // 2x2 inner chunks of (offset, nbytes) + crc32c

std::string Sharded69Json(const char* location, const char* shape = "[4, 4]") {
  return std::string(R"({"zarr_format": 3, "node_type": "array", "shape": )") + shape +
         R"(, "data_type": "uint16",
    "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [4, 4]}},
    "chunk_key_encoding": {"name": "default"}, "fill_value": 7,
    "codecs": [{"name": "sharding_indexed", "configuration": {"chunk_shape": [2, 2],
      "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
      "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "crc32c"}],
      "index_location": ")" + location + R"("}}]})";
}

// [4, 4] uint16 in [2, 2] raw chunks, fill 9.
constexpr const char* kUnshardedJson = R"({"zarr_format": 3, "node_type": "array", "shape": [4, 4],
  "data_type": "uint16", "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [2, 2]}},
  "chunk_key_encoding": {"name": "default"}, "fill_value": 9, "codecs": ["bytes"]})";

// An array read through one store, as the facade holds it: metadata, layout, index cache.
struct Opened {
  ArrayMetadata meta;
  ArrayLayout layout;
  IndexCache index{1 << 20};
};

std::unique_ptr<Opened> Open(const std::string& json, const std::string& root) {
  auto m = ParseArrayMetadata(json);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  if (!m.ok()) return nullptr;
  auto o = std::make_unique<Opened>();
  o->meta = std::move(m).value();
  auto l = BuildArrayLayout(o->meta, root);
  EXPECT_TRUE(l.ok()) << l.status().ToString();
  if (!l.ok()) return nullptr;
  o->layout = std::move(l).value();
  return o;
}

ReadContext Context(Opened& o, Store& store, int threads) {
  ReadContext ctx;
  ctx.layout = &o.layout;
  ctx.store = &store;
  ctx.index_cache = &o.index;
  ctx.threads = threads;
  return ctx;
}

ObjectStoreConfig Config(const TestObjectServer& srv) {
  ObjectStoreConfig c;
  c.scheme = "http";
  c.host = srv.host();
  c.root = kRoot;
  c.display_root = "s3://bucket/arr";
  c.client.timeout_ms = 2000;
  c.client.connect_timeout_ms = 1000;
  c.client.stall_timeout_ms = 1000;
  c.client.max_attempts = 2;
  c.client.total_timeout_ms = 3000;
  c.client.retry_base_delay_ms = 1;
  c.client.retry_max_delay_ms = 5;
  return c;
}

// The whole [rows, cols] uint16 array read through `store`.
Status ReadAllValues(Opened& o, Store& store, int threads, std::vector<uint16_t>* out) {
  const int64_t rows = o.layout.shape[0], cols = o.layout.shape[1];
  out->assign(static_cast<size_t>(rows * cols), 0xBEEF);
  return ExecuteRead(Context(o, store, threads), {Box({0, 0}, {rows, cols})}, {View(out->data(), {rows, cols}, 2)});
}

// The same array read from a local directory holding the same objects.
std::vector<uint16_t> LocalValues(const std::string& json, const std::vector<std::pair<std::string, Bytes>>& objects) {
  TempDir dir;
  for (const auto& [key, bytes] : objects) dir.Write(key, bytes);
  auto o = Open(json, dir.path());
  EXPECT_NE(o, nullptr);
  if (o == nullptr) return {};
  FdCache files(16);
  auto backend = MakePreadBackend();
  LocalStoreOptions so;
  so.files = &files;
  so.backend = backend.get();
  LocalStore store(dir.path(), so);
  std::vector<uint16_t> out;
  Status st = ReadAllValues(*o, store, 1, &out);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return out;
}

std::string Path(const std::string& key) { return std::string(kRoot) + "/" + key; }

// Requests from index `from` on.
std::vector<SeenRequest> Since(const TestObjectServer& srv, size_t from) {
  auto all = srv.requests();
  return std::vector<SeenRequest>(all.begin() + static_cast<std::ptrdiff_t>(std::min(from, all.size())), all.end());
}

// The §6.9 values with the absent lower-right 2x2 chunk read as the fill value 7.
std::vector<uint16_t> Values69() {
  std::vector<uint16_t> v = lsio_test::Shard69Values();
  for (size_t i : {10, 11, 14, 15}) v[i] = 7;
  return v;
}

struct Blob {
  const char* location;
  Bytes bytes;
  std::string index_range;  // the one request that reads its index
};

std::vector<Blob> Blobs() {
  return {{"end", lsio_test::Shard69ZarrPythonEnd(), "bytes=-" + std::to_string(kIndexSize)},
          {"start", lsio_test::Shard69ZarrPythonStart(), "bytes=0-" + std::to_string(kIndexSize - 1)}};
}

TEST(ExecutorRemoteTest, ShardedReadsMatchTheLocalReadWithOneIndexRequestPerShard) {
  for (const Blob& b : Blobs()) {
    for (int threads : {1, 3}) {
      SCOPED_TRACE(std::string(b.location) + " threads=" + std::to_string(threads));
      TestObjectServer srv;
      const std::string etag = srv.Put(Path("c/0/0"), b.bytes);
      ObjectStore store(Config(srv));
      auto o = Open(Sharded69Json(b.location), "s3://bucket/arr");
      ASSERT_NE(o, nullptr);
      std::vector<uint16_t> out;
      Status st = ReadAllValues(*o, store, threads, &out);
      ASSERT_TRUE(st.ok()) << st.ToString();
      EXPECT_EQ(out, Values69());
      EXPECT_EQ(out, LocalValues(Sharded69Json(b.location), {{"c/0/0", b.bytes}}));

      const auto seen = srv.requests();
      ASSERT_GE(seen.size(), 2u);
      // The index first, in one request that also tells size and ETag: no HEAD, no If-Match.
      EXPECT_EQ(seen[0].method, "GET");
      EXPECT_EQ(seen[0].target, Path("c/0/0"));
      EXPECT_EQ(seen[0].Header("Range"), b.index_range);
      EXPECT_FALSE(seen[0].HasHeader("If-Match"));
      for (size_t i = 1; i < seen.size(); ++i) {
        EXPECT_EQ(seen[i].method, "GET");
        EXPECT_NE(seen[i].Header("Range"), b.index_range) << "index read twice";
        EXPECT_TRUE(seen[i].HasHeader("Range"));
        EXPECT_EQ(seen[i].Header("If-Match"), etag) << "chunk reads are pinned to the index's version";
      }
      EXPECT_EQ(o->index.size(), 1u);
      auto hit = o->index.FindAny(0);
      ASSERT_TRUE(hit.has_value());
      EXPECT_EQ(hit->version, etag);
      EXPECT_EQ(hit->object_size, b.bytes.size());
      EXPECT_EQ(store.stats().requests.load(), seen.size());
      EXPECT_EQ(store.stats().errors.load(), 0u);
      // bytes_used: the index and the three stored 8-byte chunks.
      EXPECT_EQ(store.stats().bytes_used.load(), kIndexSize + 3 * 8);
    }
  }
}

TEST(ExecutorRemoteTest, SecondReadTakesTheCachedIndexAndPinsChunkReads) {
  for (const Blob& b : Blobs()) {
    for (int threads : {1, 3}) {
      SCOPED_TRACE(std::string(b.location) + " threads=" + std::to_string(threads));
      TestObjectServer srv;
      const std::string etag = srv.Put(Path("c/0/0"), b.bytes);
      ObjectStore store(Config(srv));
      auto o = Open(Sharded69Json(b.location), "s3://bucket/arr");
      ASSERT_NE(o, nullptr);
      std::vector<uint16_t> out;
      ASSERT_TRUE(ReadAllValues(*o, store, threads, &out).ok());
      const size_t before = srv.request_count();

      // Each read call opens its objects afresh: nothing about the object is known but the
      // cached index, whose ETag and size are adopted.
      Status st = ReadAllValues(*o, store, threads, &out);
      ASSERT_TRUE(st.ok()) << st.ToString();
      EXPECT_EQ(out, Values69());
      const auto seen = Since(srv, before);
      ASSERT_GE(seen.size(), 1u);
      for (const SeenRequest& q : seen) {
        EXPECT_EQ(q.method, "GET");
        EXPECT_NE(q.Header("Range"), b.index_range) << "the index was read again";
        EXPECT_EQ(q.Header("If-Match"), etag);
      }
      // Only chunk bytes, not the index, fetched the second time.
      uint64_t fetched = 0;
      for (const SeenRequest& q : seen) {
        unsigned long long a = 0, e = 0;
        ASSERT_EQ(std::sscanf(q.Header("Range").c_str(), "bytes=%llu-%llu", &a, &e), 2) << q.Header("Range");
        fetched += e - a + 1;
      }
      EXPECT_LE(fetched, 24u);
    }
  }
}

TEST(ExecutorRemoteTest, ShardReplacedBetweenReadsIsEstaleNeverMixed) {
  // Both blobs hold the same values with the index at the end, but put the chunks at
  // different offsets: an old index applied to the new object would read wrong data.
  for (int threads : {1, 3}) {
    for (bool server_checks_if_match : {true, false}) {
      SCOPED_TRACE("threads=" + std::to_string(threads) + " if-match " + (server_checks_if_match ? "checked" : "ignored"));
      TestObjectServer srv;
      srv.set_ignore_if_match(!server_checks_if_match);
      srv.Put(Path("c/0/0"), lsio_test::Shard69ZarrPythonEnd());
      ObjectStore store(Config(srv));
      auto o = Open(Sharded69Json("end"), "s3://bucket/arr");
      ASSERT_NE(o, nullptr);
      std::vector<uint16_t> out;
      ASSERT_TRUE(ReadAllValues(*o, store, threads, &out).ok());

      srv.Put(Path("c/0/0"), lsio_test::Shard69TensorStore());
      Status st = ReadAllValues(*o, store, threads, &out);
      ASSERT_FALSE(st.ok());
      EXPECT_EQ(st.code(), StatusCode::kIoError);
      EXPECT_EQ(st.error_number(), ESTALE);
      EXPECT_NE(st.message().find("changed since its index was read"), std::string::npos) << st.message();
      EXPECT_EQ(st.path(), "s3://bucket/arr/c/0/0");

      // Dropping the cached indexes (Array.close()) reads the new version's index.
      o->index.Clear();
      st = ReadAllValues(*o, store, threads, &out);
      ASSERT_TRUE(st.ok()) << st.ToString();
      EXPECT_EQ(out, Values69());
    }
  }
}

TEST(ExecutorRemoteTest, ShardRemovedBetweenReadsIsEstale) {
  TestObjectServer srv;
  srv.Put(Path("c/0/0"), lsio_test::Shard69ZarrPythonEnd());
  ObjectStore store(Config(srv));
  auto o = Open(Sharded69Json("end"), "s3://bucket/arr");
  ASSERT_NE(o, nullptr);
  std::vector<uint16_t> out;
  ASSERT_TRUE(ReadAllValues(*o, store, 1, &out).ok());
  srv.Remove(Path("c/0/0"));
  Status st = ReadAllValues(*o, store, 1, &out);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), StatusCode::kIoError);
  EXPECT_EQ(st.error_number(), ESTALE);
  EXPECT_NE(st.message().find("disappeared since its index was read"), std::string::npos) << st.message();
  EXPECT_EQ(st.path(), "s3://bucket/arr/c/0/0");
}

TEST(ExecutorRemoteTest, AbsentShardReadsAsFill) {
  for (const Blob& b : Blobs()) {
    for (int threads : {1, 3}) {
      SCOPED_TRACE(std::string(b.location) + " threads=" + std::to_string(threads));
      // [8, 4]: shard c/0/0 holds rows 0-3, shard c/1/0 (rows 4-7) does not exist.
      TestObjectServer srv;
      srv.Put(Path("c/0/0"), b.bytes);
      ObjectStore store(Config(srv));
      auto o = Open(Sharded69Json(b.location, "[8, 4]"), "s3://bucket/arr");
      ASSERT_NE(o, nullptr);
      std::vector<uint16_t> out;
      Status st = ReadAllValues(*o, store, threads, &out);
      ASSERT_TRUE(st.ok()) << st.ToString();
      std::vector<uint16_t> want = Values69();
      want.resize(32, 7);
      EXPECT_EQ(out, want);
      EXPECT_EQ(out, LocalValues(Sharded69Json(b.location, "[8, 4]"), {{"c/0/0", b.bytes}}));

      // One index request per shard, the absent one answered 404; no HEAD.
      int index_requests = 0;
      int absent = 0;
      for (const SeenRequest& q : srv.requests()) {
        EXPECT_EQ(q.method, "GET");
        if (q.Header("Range") == b.index_range) ++index_requests;
        if (q.target == Path("c/1/0")) {
          ++absent;
          EXPECT_EQ(q.Header("Range"), b.index_range);
        }
      }
      EXPECT_EQ(index_requests, 2);
      EXPECT_EQ(absent, 1);
      EXPECT_EQ(o->index.size(), 1u) << "absent shards are not cached";
      EXPECT_EQ(store.stats().errors.load(), 0u);
    }
  }
}

TEST(ExecutorRemoteTest, UnshardedChunksAreFetchedWholeOnceEach) {
  auto chunk = [](uint16_t first) {
    Bytes b;
    for (uint16_t v = first; v < first + 4; ++v) lsio_test::PutLE<uint16_t>(b, v);
    return b;
  };
  const std::vector<std::pair<std::string, Bytes>> objects = {
      {"c/0/0", chunk(100)}, {"c/0/1", chunk(200)}, {"c/1/1", chunk(400)}};  // c/1/0 absent
  const std::vector<uint16_t> want = {100, 101, 200, 201, 102, 103, 202, 203,
                                      9,   9,   400, 401, 9,   9,   402, 403};
  for (int threads : {1, 3}) {
    SCOPED_TRACE("threads=" + std::to_string(threads));
    TestObjectServer srv;
    for (const auto& [key, bytes] : objects) srv.Put(Path(key), bytes);
    ObjectStore store(Config(srv));
    auto o = Open(kUnshardedJson, "s3://bucket/arr");
    ASSERT_NE(o, nullptr);
    std::vector<uint16_t> out;
    Status st = ReadAllValues(*o, store, threads, &out);
    ASSERT_TRUE(st.ok()) << st.ToString();
    EXPECT_EQ(out, want);
    EXPECT_EQ(out, LocalValues(kUnshardedJson, objects));

    const auto seen = srv.requests();
    ASSERT_EQ(seen.size(), 4u);
    std::vector<std::string> targets;
    for (const SeenRequest& q : seen) {
      EXPECT_EQ(q.method, "GET");
      EXPECT_FALSE(q.HasHeader("Range")) << q.target;
      EXPECT_FALSE(q.HasHeader("If-Match")) << q.target;
      targets.push_back(q.target);
    }
    std::sort(targets.begin(), targets.end());
    EXPECT_EQ(targets, (std::vector<std::string>{Path("c/0/0"), Path("c/0/1"), Path("c/1/0"), Path("c/1/1")}));
    EXPECT_EQ(store.stats().bytes_fetched.load(), 24u);
    EXPECT_EQ(store.stats().bytes_used.load(), 24u);

    // A partial read fetches only the chunks it touches.
    const size_t before = srv.request_count();
    std::vector<uint16_t> one(2, 0);
    st = ExecuteRead(Context(*o, store, threads), {Box({3, 2}, {1, 2})}, {View(one.data(), {1, 2}, 2)});
    ASSERT_TRUE(st.ok()) << st.ToString();
    EXPECT_EQ(one, (std::vector<uint16_t>{402, 403}));
    const auto more = Since(srv, before);
    ASSERT_EQ(more.size(), 1u);
    EXPECT_EQ(more[0].target, Path("c/1/1"));
  }
}

TEST(ExecutorRemoteTest, SurveyChunksWorksRemotely) {
  for (const Blob& b : Blobs()) {
    SCOPED_TRACE(b.location);
    TestObjectServer srv;
    srv.Put(Path("c/0/0"), b.bytes);
    ObjectStore store(Config(srv));
    auto o = Open(Sharded69Json(b.location, "[8, 4]"), "s3://bucket/arr");
    ASSERT_NE(o, nullptr);
    std::vector<int64_t> nbytes;
    Status st = SurveyChunks(Context(*o, store, 1), &nbytes);
    ASSERT_TRUE(st.ok()) << st.ToString();
    // C order of the [4, 2] read-chunk grid: shard 0 holds (0,0) (0,1) (1,0); the rest is absent.
    EXPECT_EQ(nbytes, (std::vector<int64_t>{8, 8, 8, -1, -1, -1, -1, -1}));
    // Indexes only: one request per shard, no chunk data.
    const auto seen = srv.requests();
    ASSERT_EQ(seen.size(), 2u);
    for (const SeenRequest& q : seen) EXPECT_EQ(q.Header("Range"), b.index_range);
    // Again: the cached index, its version confirmed by one conditional HEAD (sizes of a
    // remembered index are reported only for a version the server confirms), and the
    // absent shard asked again.
    ASSERT_TRUE(SurveyChunks(Context(*o, store, 1), &nbytes).ok());
    EXPECT_EQ(nbytes, (std::vector<int64_t>{8, 8, 8, -1, -1, -1, -1, -1}));
    const auto again = Since(srv, 2);
    ASSERT_EQ(again.size(), 2u);
    int heads = 0;
    for (const SeenRequest& q : again) {
      if (q.method == "HEAD") {
        ++heads;
        EXPECT_EQ(q.target, Path("c/0/0"));
        EXPECT_TRUE(q.HasHeader("If-None-Match"));
      } else {
        EXPECT_EQ(q.target, Path("c/1/0")) << "only the absent shard's index is read again";
      }
    }
    EXPECT_EQ(heads, 1);
  }
  // Unsharded: each chunk's stored size (fetched whole), -1 for absent ones.
  TestObjectServer srv;
  srv.Put(Path("c/0/0"), Bytes(8, 1));
  srv.Put(Path("c/1/1"), Bytes(8, 2));
  ObjectStore store(Config(srv));
  auto o = Open(kUnshardedJson, "s3://bucket/arr");
  ASSERT_NE(o, nullptr);
  std::vector<int64_t> nbytes;
  Status st = SurveyChunks(Context(*o, store, 1), &nbytes);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(nbytes, (std::vector<int64_t>{8, -1, -1, 8}));
  EXPECT_EQ(srv.request_count(), 4u);
}

TEST(ExecutorRemoteTest, EveryChunkRequestsTimingsReachTheCoalescingTuner) {
  // 64 KiB chunk objects (large enough for a rate to mean something): after one read of
  // the four, the tuner has its samples and gives a hint; without a tuner nothing is fed.
  constexpr const char* kJson = R"({"zarr_format": 3, "node_type": "array", "shape": [256, 256],
    "data_type": "uint16", "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [128, 128]}},
    "chunk_key_encoding": {"name": "default"}, "fill_value": 0, "codecs": ["bytes"]})";
  TestObjectServer srv;
  for (const char* key : {"c/0/0", "c/0/1", "c/1/0", "c/1/1"}) srv.Put(Path(key), std::string(128 * 128 * 2, 'x'));
  ObjectStore store(Config(srv));
  auto o = Open(kJson, "s3://bucket/arr");
  ASSERT_NE(o, nullptr);
  CoalescingTuner tuner;
  uint64_t gap = 0, req = 0;
  EXPECT_FALSE(tuner.Hint(1 << 20, 16 << 20, &gap, &req));
  std::vector<uint16_t> out(256 * 256);
  ReadContext ctx = Context(*o, store, 2);
  ctx.tuner = &tuner;
  Status st = ExecuteRead(ctx, {Box({0, 0}, {256, 256})}, {View(out.data(), {256, 256}, 2)});
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(out[0], 0x7878);
  ASSERT_TRUE(tuner.Hint(1 << 20, 16 << 20, &gap, &req)) << "four measured requests";
  EXPECT_GE(gap, 16u << 10);
  EXPECT_LE(gap, 1u << 20);
}

TEST(ExecutorRemoteTest, ServerErrorsNameTheObject) {
  TestObjectServer srv;
  srv.Put(Path("c/0/0"), lsio_test::Shard69ZarrPythonEnd());
  srv.set_hook([](const SeenRequest&, testing::ServerConnection& conn) {
    conn.Send(testing::HttpResponse(403, {{"x-amz-request-id", "RID7"}}, "<Error><Code>AccessDenied</Code></Error>"));
    return true;
  });
  ObjectStore store(Config(srv));
  auto o = Open(Sharded69Json("end"), "s3://bucket/arr");
  ASSERT_NE(o, nullptr);
  std::vector<uint16_t> out;
  Status st = ReadAllValues(*o, store, 3, &out);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), StatusCode::kIoError);
  EXPECT_EQ(st.error_number(), EACCES);
  // The object's URL (not yet its display location: see ObjectStoreTest.
  // DISABLED_ClientErrorsNameTheDisplayLocation).
  const std::string tail = "/bucket/arr/c/0/0";
  ASSERT_GE(st.path().size(), tail.size());
  EXPECT_EQ(st.path().substr(st.path().size() - tail.size()), tail) << st.path();
  EXPECT_EQ(srv.request_count(), 1u);
}

TEST(ExecutorRemoteTest, ASlowResponseDoesNotHoldBackTheRequestsBehindIt) {
  // 12 shards, one chunk read each, two requests in flight, one worker. The first chunk
  // read answers only after 400 ms: the worker must go on through the other eleven in its
  // second slot meanwhile (a worker that waited for its batch's slowest request sent none).
  constexpr int kShards = 12;
  TestObjectServer srv;
  std::vector<std::pair<std::string, Bytes>> objects;
  for (int k = 0; k < kShards; ++k) {
    const std::string key = "c/0/" + std::to_string(k);
    srv.Put(Path(key), lsio_test::Shard69ZarrPythonEnd());
    objects.emplace_back(key, lsio_test::Shard69ZarrPythonEnd());
  }
  std::atomic<long> seen_at_arrival{-1}, seen_at_answer{-1};
  srv.set_hook([&](const SeenRequest& q, testing::ServerConnection& conn) {
    if (q.target != Path("c/0/0") || !q.HasHeader("If-Match")) return false;  // not the slow chunk read
    seen_at_arrival = static_cast<long>(srv.request_count());
    conn.Sleep(400);
    seen_at_answer = static_cast<long>(srv.request_count());
    return false;  // then served normally
  });
  ObjectStoreConfig c = Config(srv);
  c.client.max_in_flight = 2;
  ObjectStore store(c);
  const std::string json = Sharded69Json("end", "[4, 48]");
  auto o = Open(json, "s3://bucket/arr");
  ASSERT_NE(o, nullptr);
  std::vector<uint16_t> out;
  ReadContext ctx = Context(*o, store, 1);
  ctx.plan.max_gap = 0;  // no merging across shards anyway: one request per shard
  out.assign(4 * 48, 0xBEEF);
  Status st = ExecuteRead(ctx, {Box({0, 0}, {4, 48})}, {View(out.data(), {4, 48}, 2)});
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(out, LocalValues(json, objects));
  ASSERT_GE(seen_at_arrival.load(), 0) << "the slow chunk read never came";
  // Every other chunk read had arrived by the time the slow one was answered: nothing waited
  // for it. (The other slot's first request may reach the server before or after the slow
  // one, so the count at its arrival is not fixed; the count at its answer is everything.)
  EXPECT_EQ(static_cast<size_t>(seen_at_answer.load()), srv.request_count());
  EXPECT_EQ(srv.request_count(), 2u * kShards);  // one index read and one chunk read per shard
}

}  // namespace
}  // namespace lsio
