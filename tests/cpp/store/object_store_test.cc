// ObjectStore against the scripted loopback server (net/test_object_server.h): URLs (each path
// segment percent-encoded once), Stat (HEAD), ReadAll (missing, size cap), range reads
// (suffix learns size and ETag, pinned reads send If-Match, 412 / an ignored If-Match / a
// vanished object are ESTALE), whole-object reads, SigV4 signatures recomputed from what the
// server received, bearer tokens, extra headers, credential refresh, counters and config
// refusals.
//
// Every test is bounded: attempts time out after a second or two, backoff is milliseconds.
#include "store/object_store.h"
#include "store/disk_cache_store.h"

#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "net/sigv4.h"
#include "net/test_object_server.h"
#include "test_util.h"

namespace lsio {
namespace {

using testing::HttpResponse;
using testing::SeenRequest;
using testing::ServerConnection;
using testing::TestObjectServer;
using lsio_test::TempDir;

std::string Pattern(size_t n, unsigned seed = 1) {
  std::string s(n, '\0');
  uint32_t x = seed * 2654435761u + 1;
  for (size_t i = 0; i < n; ++i) {
    x = x * 1664525u + 1013904223u;
    s[i] = static_cast<char>(x >> 24);
  }
  return s;
}

ObjectStoreConfig Config(const TestObjectServer& srv, std::string root = "/bucket/arr") {
  ObjectStoreConfig c;
  c.scheme = "http";
  c.host = srv.host();
  c.root = std::move(root);
  c.display_root = "s3://bucket/arr";
  c.client.timeout_ms = 2000;
  c.client.connect_timeout_ms = 1000;
  c.client.stall_timeout_ms = 1000;
  c.client.max_attempts = 3;
  c.client.total_timeout_ms = 4000;
  c.client.retry_base_delay_ms = 1;
  c.client.retry_max_delay_ms = 5;
  return c;
}

// One read of `obj` through the store; returns the read (status, missing, transferred).
RangeRead ReadOne(Store& store, StoreObject* obj, ReadKind kind, uint64_t offset, uint64_t length,
                  std::string* buf, bool pin = false) {
  RangeRead r;
  r.object = obj;
  r.kind = kind;
  r.offset = offset;
  r.length = length;
  r.pin_version = pin;
  buf->assign(length, '\0');
  r.dst = reinterpret_cast<uint8_t*>(buf->data());
  int done = 0;
  store.Read(std::span<RangeRead>(&r, 1), [&](size_t i) {
    EXPECT_EQ(i, 0u);
    ++done;
  });
  EXPECT_EQ(done, 1);
  return r;
}

TEST(ObjectStoreTest, EncodesEachSegmentOfRootAndKeyOnce) {
  TestObjectServer srv;
  // root "/my bucket/données", key "c/a b+é~_.-": spaces, '+', UTF-8 bytes are %XX (uppercase),
  // unreserved characters and '/' are kept.
  const std::string path = "/my%20bucket/donn%C3%A9es/c/a%20b%2B%C3%A9~_.-";
  srv.Put(path, std::string("payload"));
  ObjectStoreConfig c = Config(srv, "/my bucket/données/");  // a trailing '/' is dropped
  c.display_root = "s3://my bucket/données";
  ObjectStore store(c);
  ASSERT_TRUE(store.Check().ok());
  EXPECT_EQ(store.Url("c/a b+é~_.-"), "http://" + srv.host() + path);
  EXPECT_EQ(store.Location("c/a b+é~_.-"), "s3://my bucket/données/c/a b+é~_.-");

  auto got = store.ReadAll("c/a b+é~_.-", 100);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_TRUE(got.value().has_value());
  EXPECT_EQ(*got.value(), "payload");
  auto info = store.Stat("c/a b+é~_.-");
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_TRUE(info.value().found);
  const auto seen = srv.requests();
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0].method, "GET");
  EXPECT_EQ(seen[0].target, path);
  EXPECT_EQ(seen[1].method, "HEAD");
  EXPECT_EQ(seen[1].target, path);

  // An empty root: the key alone.
  ObjectStore bare(Config(srv, ""));
  EXPECT_EQ(bare.Url("x y/z"), "http://" + srv.host() + "/x%20y/z");
  // Keys that could escape the root are refused before any request.
  EXPECT_EQ(store.Open("../x").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(store.ReadAll("a/./b", 10).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(store.Stat("/abs").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(srv.request_count(), 2u);
}

TEST(ObjectStoreTest, StatIsAHeadGivingSizeAndETag) {
  TestObjectServer srv;
  const std::string etag = srv.Put("/bucket/arr/zarr.json", Pattern(1234));
  ObjectStore store(Config(srv));
  auto info = store.Stat("zarr.json");
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_TRUE(info.value().found);
  EXPECT_EQ(info.value().size, 1234u);
  EXPECT_EQ(info.value().version, etag);
  auto none = store.Stat("nothing.json");
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_FALSE(none.value().found);
  EXPECT_EQ(none.value().size, 0u);
  EXPECT_TRUE(none.value().version.empty());
  for (const SeenRequest& q : srv.requests()) EXPECT_EQ(q.method, "HEAD");
  EXPECT_EQ(store.stats().bytes_fetched.load(), 0u);
}

TEST(ObjectStoreTest, ReadAllMissingIsNulloptAndLargerThanTheCapIsInvalidFormat) {
  TestObjectServer srv;
  srv.Put("/bucket/arr/zarr.json", Pattern(100));
  ObjectStore store(Config(srv));
  auto missing = store.ReadAll("absent.json", 1000);
  ASSERT_TRUE(missing.ok()) << missing.status().ToString();
  EXPECT_FALSE(missing.value().has_value());

  auto exact = store.ReadAll("zarr.json", 100);  // exactly max_bytes is fine
  ASSERT_TRUE(exact.ok()) << exact.status().ToString();
  EXPECT_EQ(exact.value().value(), Pattern(100));

  auto big = store.ReadAll("zarr.json", 99);
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.status().code(), StatusCode::kInvalidFormat);
  EXPECT_NE(big.status().message().find("99 bytes"), std::string::npos) << big.status().message();
  EXPECT_EQ(big.status().path(), "s3://bucket/arr/zarr.json");
  // Whole-object GETs: no Range.
  for (const SeenRequest& q : srv.requests()) EXPECT_FALSE(q.HasHeader("Range")) << q.target;
}

TEST(ObjectStoreTest, SuffixLearnsSizeAndVersionThenPinnedRangesSendIfMatch) {
  TestObjectServer srv;
  const std::string data = Pattern(1000);
  const std::string etag = srv.Put("/bucket/arr/c/0", data);
  ObjectStore store(Config(srv));
  auto obj = store.Open("c/0");  // no I/O
  ASSERT_TRUE(obj.ok());
  ASSERT_NE(obj.value(), nullptr);
  EXPECT_EQ(srv.request_count(), 0u);
  EXPECT_FALSE(obj.value()->size_known);

  std::string buf;
  RangeRead s = ReadOne(store, obj.value().get(), ReadKind::kSuffix, 0, 24, &buf);
  ASSERT_TRUE(s.status.ok()) << s.status.ToString();
  EXPECT_FALSE(s.missing);
  EXPECT_EQ(s.transferred, 24u);
  EXPECT_EQ(buf, data.substr(976));
  EXPECT_TRUE(obj.value()->size_known);
  EXPECT_EQ(obj.value()->size, 1000u);
  EXPECT_EQ(obj.value()->version, etag);

  RangeRead r = ReadOne(store, obj.value().get(), ReadKind::kRange, 100, 50, &buf, /*pin=*/true);
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.transferred, 50u);
  EXPECT_EQ(buf, data.substr(100, 50));

  const auto seen = srv.requests();
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0].method, "GET");
  EXPECT_EQ(seen[0].Header("Range"), "bytes=-24");
  EXPECT_FALSE(seen[0].HasHeader("If-Match"));
  EXPECT_EQ(seen[1].Header("Range"), "bytes=100-149");
  EXPECT_EQ(seen[1].Header("If-Match"), etag);

  // A suffix longer than the object gives all of it.
  auto small = store.Open("c/0");
  RangeRead all = ReadOne(store, small.value().get(), ReadKind::kSuffix, 0, 4096, &buf);
  ASSERT_TRUE(all.status.ok()) << all.status.ToString();
  EXPECT_EQ(all.transferred, 1000u);
  EXPECT_EQ(buf.substr(0, 1000), data);
  EXPECT_EQ(small.value()->size, 1000u);

  // An unpinned read of an absent object is "missing", not an error.
  auto gone = store.Open("c/9");
  RangeRead m = ReadOne(store, gone.value().get(), ReadKind::kSuffix, 0, 24, &buf);
  EXPECT_TRUE(m.status.ok()) << m.status.ToString();
  EXPECT_TRUE(m.missing);
}

TEST(ObjectStoreTest, ObjectReplacedUnderAPinnedReadIsEstale) {
  TestObjectServer srv;
  srv.Put("/bucket/arr/c/0", Pattern(500, 1));
  ObjectStore store(Config(srv));
  auto obj = store.Open("c/0");
  std::string buf;
  ASSERT_TRUE(ReadOne(store, obj.value().get(), ReadKind::kSuffix, 0, 10, &buf).status.ok());
  const std::string v1 = obj.value()->version;

  // Replaced: the server checks If-Match and answers 412.
  const std::string v2 = srv.Put("/bucket/arr/c/0", Pattern(500, 2));
  ASSERT_NE(v1, v2);
  RangeRead r = ReadOne(store, obj.value().get(), ReadKind::kRange, 0, 10, &buf, /*pin=*/true);
  ASSERT_FALSE(r.status.ok());
  EXPECT_EQ(r.status.code(), StatusCode::kIoError);
  EXPECT_EQ(r.status.error_number(), ESTALE);
  EXPECT_NE(r.status.message().find("changed since its index was read"), std::string::npos) << r.status.message();
  // The server's own code, message and request id stay in the message.
  EXPECT_EQ(r.status.message().rfind("object changed since its index was read (If-Match " + v1 + " failed: HTTP 412): ", 0),
            0u)
      << r.status.message();
  for (const char* part : {"PreconditionFailed", "pre-conditions you specified did not hold", "REQ412"}) {
    EXPECT_NE(r.status.message().find(part), std::string::npos) << part << " missing: " << r.status.message();
  }
  EXPECT_FALSE(r.missing);
  EXPECT_EQ(srv.requests().back().Header("If-Match"), v1);
  EXPECT_EQ(obj.value()->version, v1) << "a failed pinned read must not adopt the new version";

  // A server that ignores If-Match answers 206 with the new ETag: still never mixed.
  srv.set_ignore_if_match(true);
  RangeRead ignored = ReadOne(store, obj.value().get(), ReadKind::kRange, 0, 10, &buf, /*pin=*/true);
  ASSERT_FALSE(ignored.status.ok());
  EXPECT_EQ(ignored.status.code(), StatusCode::kIoError);
  EXPECT_EQ(ignored.status.error_number(), ESTALE);
  // Worded as what happened: the server answered 206 (not 412) with the new ETag.
  EXPECT_EQ(ignored.status.message().rfind(
                "object changed since its index was read (If-Match " + v1 + " ignored: HTTP 206 with another ETag)", 0),
            0u)
      << ignored.status.message();
  EXPECT_EQ(srv.requests().back().Header("If-Match"), v1);

  // Gone: a pinned read's 404 is an error (its index said the bytes are there), not missing.
  srv.Remove("/bucket/arr/c/0");
  RangeRead gone = ReadOne(store, obj.value().get(), ReadKind::kRange, 0, 10, &buf, /*pin=*/true);
  ASSERT_FALSE(gone.status.ok());
  EXPECT_FALSE(gone.missing);
  EXPECT_EQ(gone.status.code(), StatusCode::kIoError);
  EXPECT_EQ(gone.status.error_number(), ESTALE);
  EXPECT_EQ(gone.status.message(), "object disappeared since its index was read (HTTP 404)");
  EXPECT_EQ(store.stats().errors.load(), 3u);
}

TEST(ObjectStoreTest, WholeReadFillsBodyAndLearnsSizeAndVersion) {
  TestObjectServer srv;
  const std::string data = Pattern(777);
  const std::string etag = srv.Put("/bucket/arr/c/1/2", data);
  ObjectStore store(Config(srv));
  auto obj = store.Open("c/1/2");
  RangeRead r;
  r.object = obj.value().get();
  r.kind = ReadKind::kWhole;
  store.Read(std::span<RangeRead>(&r, 1), [](size_t) {});
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.body, data);
  EXPECT_EQ(r.transferred, 777u);
  EXPECT_TRUE(obj.value()->size_known);
  EXPECT_EQ(obj.value()->size, 777u);
  EXPECT_EQ(obj.value()->version, etag);
  ASSERT_EQ(srv.request_count(), 1u);
  EXPECT_FALSE(srv.requests()[0].HasHeader("Range"));

  // Several reads in one call, each reported once, missing ones as missing.
  srv.Put("/bucket/arr/c/0/0", std::string("abc"));
  auto a = store.Open("c/0/0");
  auto b = store.Open("c/0/1");
  std::vector<RangeRead> rs(2);
  rs[0].object = a.value().get();
  rs[0].kind = ReadKind::kWhole;
  rs[1].object = b.value().get();
  rs[1].kind = ReadKind::kWhole;
  std::vector<int> done(2, 0);
  store.Read(rs, [&](size_t i) { ++done[i]; });
  EXPECT_EQ(done, (std::vector<int>{1, 1}));
  EXPECT_TRUE(rs[0].status.ok());
  EXPECT_EQ(rs[0].body, "abc");
  EXPECT_TRUE(rs[1].status.ok());
  EXPECT_TRUE(rs[1].missing);
  EXPECT_TRUE(rs[1].body.empty());
}

// The parts of "AWS4-HMAC-SHA256 Credential=..., SignedHeaders=..., Signature=...".
struct AuthParts {
  std::string credential, signed_headers, signature;
};
AuthParts ParseAuth(const std::string& v) {
  AuthParts p;
  auto field = [&](const std::string& name) {
    const size_t a = v.find(name + "=");
    if (a == std::string::npos) return std::string();
    const size_t s = a + name.size() + 1;
    const size_t e = v.find(',', s);
    return v.substr(s, e == std::string::npos ? std::string::npos : e - s);
  };
  p.credential = field("Credential");
  p.signed_headers = field("SignedHeaders");
  p.signature = field("Signature");
  return p;
}

int64_t ParseAmzDate(const std::string& d) {
  struct tm tm = {};
  if (std::sscanf(d.c_str(), "%4d%2d%2dT%2d%2d%2dZ", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour, &tm.tm_min,
                  &tm.tm_sec) != 6) {
    return -1;
  }
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  return static_cast<int64_t>(timegm(&tm));
}

// Recomputes the request's signature from what the server received: the headers the store
// asked for (everything but Host, what libcurl adds, and the signer's own), the unencoded
// path, the time of x-amz-date. Returns the expected Authorization value.
std::string ExpectedAuthorization(const SeenRequest& q, const std::string& host, const std::string& unencoded_path,
                                  const SigV4Credentials& creds, const SigV4Scope& scope) {
  SigV4Request s;
  s.method = q.method;
  s.host = host;
  s.path = unencoded_path;
  s.payload_hash = std::string(kUnsignedPayload);
  for (const auto& [name, value] : q.headers) {
    std::string n = name;
    for (char& ch : n) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    if (n == "host" || n == "accept" || n == "user-agent" || n == "authorization" || n.rfind("x-amz-", 0) == 0) continue;
    s.headers.emplace_back(name, value);
  }
  auto sig = SignV4(s, creds, scope, ParseAmzDate(q.Header("x-amz-date")));
  EXPECT_TRUE(sig.ok()) << sig.status().ToString();
  if (!sig.ok()) return {};
  for (const auto& [name, value] : sig.value().headers) {
    if (name == "Authorization" || name == "authorization") return value;
  }
  ADD_FAILURE() << "SignV4 gave no Authorization header";
  return {};
}

TEST(ObjectStoreTest, WeakETagsAreComparedNeverSentInIfMatch) {
  // If-Match compares strongly: sending a weak tag there makes a conforming server answer
  // 412 to every pinned read (a sharded array behind such a server could never be read).
  TestObjectServer srv;
  srv.Put("/bucket/arr/c/0", Pattern(400, 1), "W/\"w1\"");
  ObjectStore store(Config(srv));
  auto obj = store.Open("c/0");
  std::string buf;
  ASSERT_TRUE(ReadOne(store, obj.value().get(), ReadKind::kSuffix, 0, 10, &buf).status.ok());
  EXPECT_EQ(obj.value()->version, "W/\"w1\"");
  RangeRead r = ReadOne(store, obj.value().get(), ReadKind::kRange, 0, 10, &buf, /*pin=*/true);
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_FALSE(srv.requests().back().HasHeader("If-Match"));
  // Replaced: the answer's tag differs, so the pinned read fails instead of mixing versions.
  srv.Put("/bucket/arr/c/0", Pattern(400, 2), "W/\"w2\"");
  RangeRead changed = ReadOne(store, obj.value().get(), ReadKind::kRange, 0, 10, &buf, /*pin=*/true);
  ASSERT_FALSE(changed.status.ok());
  EXPECT_EQ(changed.status.error_number(), ESTALE) << changed.status.ToString();
}

// Reads a range pinned to the object's version, as the executor's chunk reads are.
RangeRead ReadPinned(Store& store, StoreObject* obj, uint64_t offset, uint64_t length, std::string* buf) {
  return ReadOne(store, obj, ReadKind::kRange, offset, length, buf, /*pin=*/true);
}

TEST(ObjectStoreTest, AdoptedVersionsAreConfirmedBeforeTheCallMaySucceed) {
  TestObjectServer srv;
  const std::string v1 = srv.Put("/bucket/arr/c/0", Pattern(300, 1));
  ObjectStore store(Config(srv));
  auto fresh = store.Open("c/0");
  EXPECT_FALSE(store.AdoptVersion(*fresh.value(), "", 300)) << "no validator pins nothing";

  // Adopted, then nothing read over the network (all served from caches): one HEAD asks.
  auto obj = store.Open("c/0");
  ASSERT_TRUE(store.AdoptVersion(*obj.value(), v1, 300));
  EXPECT_EQ(obj.value()->version, v1);
  const size_t before = srv.request_count();
  ASSERT_TRUE(store.ConfirmServed(std::vector<ObjectRef>{obj.value()}).ok());
  ASSERT_EQ(srv.request_count(), before + 1);
  EXPECT_EQ(srv.requests().back().method, "HEAD");
  EXPECT_EQ(srv.requests().back().Header("If-None-Match"), v1);
  // Confirmed once: asking again costs nothing.
  ASSERT_TRUE(store.ConfirmServed(std::vector<ObjectRef>{obj.value()}).ok());
  EXPECT_EQ(srv.request_count(), before + 1);

  // A pinned read that succeeds over the network is the confirmation itself.
  auto read = store.Open("c/0");
  ASSERT_TRUE(store.AdoptVersion(*read.value(), v1, 300));
  std::string buf;
  ASSERT_TRUE(ReadPinned(store, read.value().get(), 0, 10, &buf).status.ok());
  const size_t after_read = srv.request_count();
  ASSERT_TRUE(store.ConfirmServed(std::vector<ObjectRef>{read.value()}).ok());
  EXPECT_EQ(srv.request_count(), after_read);

  // Rewritten: a remembered version is refused with ESTALE naming the object.
  srv.Put("/bucket/arr/c/0", Pattern(300, 2));
  auto stale = store.Open("c/0");
  ASSERT_TRUE(store.AdoptVersion(*stale.value(), v1, 300));
  Status st = store.ConfirmServed(std::vector<ObjectRef>{stale.value()});
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error_number(), ESTALE) << st.ToString();
  EXPECT_NE(st.ToString().find("/c/0"), std::string::npos) << st.ToString();
}

// One pinned read through ReadStream, with `confirm` as the executor passes it.
RangeRead StreamPinned(Store& store, const ObjectRef& obj, uint64_t offset, uint64_t length, std::string* buf) {
  RangeRead r;
  r.object = obj.get();
  r.kind = ReadKind::kRange;
  r.offset = offset;
  r.length = length;
  r.pin_version = true;
  buf->assign(length, '\0');
  r.dst = reinterpret_cast<uint8_t*>(buf->data());
  bool given = false;
  std::vector<ObjectRef> confirm = {obj};
  store.ReadStream([&]() -> RangeRead* { return given ? nullptr : (given = true, &r); }, [](RangeRead&) {}, {},
                   confirm);
  return r;
}

TEST(DiskCacheStoreTest, HitsOfAnAdoptedVersionAreConfirmedAlongsideAndStaleOnesFailTheCall) {
  TestObjectServer srv;
  const std::string data = Pattern(200000, 5);
  const std::string v1 = srv.Put("/bucket/arr/c/0", data);
  TempDir dir;
  auto cache = SharedDiskCache(dir.path() + "/cache", 16 << 20);
  ASSERT_TRUE(cache.ok());
  auto http = std::make_shared<ObjectStore>(Config(srv));
  DiskCacheStore store(http, cache.value());
  EXPECT_TRUE(store.traits().confirm_early);
  std::string buf;
  {  // Learned by an unpinned read, then a pinned read fills the disk cache.
    auto obj = store.Open("c/0");
    ASSERT_TRUE(ReadOne(store, obj.value().get(), ReadKind::kSuffix, 0, 16, &buf).status.ok());
    ASSERT_TRUE(ReadPinned(store, obj.value().get(), 1000, 70000, &buf).status.ok());
    EXPECT_EQ(buf, data.substr(1000, 70000));
    ASSERT_TRUE(store.ConfirmServed(std::vector<ObjectRef>{obj.value()}).ok());
  }
  // A later call adopts the version: the bytes come from disk, and the HEAD that confirms
  // them goes out in the same stream (no chunk GET at all).
  auto obj = store.Open("c/0");
  ASSERT_TRUE(store.AdoptVersion(*obj.value(), v1, data.size()));
  const size_t before = srv.request_count();
  RangeRead r = StreamPinned(store, obj.value(), 1000, 70000, &buf);
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(buf, data.substr(1000, 70000));
  ASSERT_EQ(srv.request_count(), before + 1);
  EXPECT_EQ(srv.requests().back().method, "HEAD");
  EXPECT_EQ(srv.requests().back().Header("If-None-Match"), v1);
  EXPECT_GT(http->stats().disk_cache_hits.load(), 0u);
  EXPECT_EQ(&store.stats(), &http->stats()) << "one set of counters";
  ASSERT_TRUE(store.ConfirmServed(std::vector<ObjectRef>{obj.value()}).ok());
  EXPECT_EQ(srv.request_count(), before + 1);

  // Rewritten on the server: the old blocks are served (batch read, no request), but the
  // call cannot succeed.
  srv.Put("/bucket/arr/c/0", Pattern(200000, 6));
  auto stale = store.Open("c/0");
  ASSERT_TRUE(store.AdoptVersion(*stale.value(), v1, data.size()));
  const size_t before_stale = srv.request_count();
  RangeRead old = ReadPinned(store, stale.value().get(), 1000, 70000, &buf);
  ASSERT_TRUE(old.status.ok());
  EXPECT_EQ(srv.request_count(), before_stale);
  Status st = store.ConfirmServed(std::vector<ObjectRef>{stale.value()});
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error_number(), ESTALE) << st.ToString();
  // A weak ETag does not name bytes: nothing of it is served from (or kept on) disk.
  srv.Put("/bucket/arr/c/1", data, "W/\"w\"");
  auto weak = store.Open("c/1");
  ASSERT_TRUE(ReadOne(store, weak.value().get(), ReadKind::kSuffix, 0, 16, &buf).status.ok());
  const uint64_t hits = http->stats().disk_cache_hits.load();
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(ReadPinned(store, weak.value().get(), 0, 70000, &buf).status.ok());
  EXPECT_EQ(http->stats().disk_cache_hits.load(), hits);
}

TEST(ObjectStoreTest, CacheMaxAgeTrustsARecentConfirmationWithoutAsking) {
  TestObjectServer srv;
  const std::string v1 = srv.Put("/bucket/arr/c/0", Pattern(300, 1));
  ObjectStoreConfig c = Config(srv);
  c.cache_max_age_s = 60;
  ObjectStore store(c);
  auto first = store.Open("c/0");
  std::string buf;
  ASSERT_TRUE(ReadOne(store, first.value().get(), ReadKind::kSuffix, 0, 10, &buf).status.ok());
  auto obj = store.Open("c/0");
  ASSERT_TRUE(store.AdoptVersion(*obj.value(), v1, 300));
  const size_t before = srv.request_count();
  ASSERT_TRUE(store.ConfirmServed(std::vector<ObjectRef>{obj.value()}).ok());
  EXPECT_EQ(srv.request_count(), before) << "confirmed within cache_max_age";
  auto other = store.Open("c/0");
  ASSERT_TRUE(store.AdoptVersion(*other.value(), "\"elsewhere\"", 300));
  EXPECT_FALSE(store.ConfirmServed(std::vector<ObjectRef>{other.value()}).ok()) << "another version is asked";
}

TEST(ObjectStoreTest, OversizedWholeObjectsAreRefusedFromTheirContentLength) {
  TestObjectServer srv;
  srv.Put("/bucket/arr/zarr.json", Pattern(1 << 20, 3));
  srv.Put("/bucket/arr/c/0", Pattern(5000, 4));
  ObjectStore store(Config(srv));
  auto all = store.ReadAll("zarr.json", 1000);
  ASSERT_FALSE(all.ok());
  EXPECT_EQ(all.status().code(), StatusCode::kInvalidFormat);
  EXPECT_NE(all.status().ToString().find("larger than the limit of 1000 bytes"), std::string::npos)
      << all.status().ToString();
  auto obj = store.Open("c/0");
  RangeRead r;
  r.object = obj.value().get();
  r.kind = ReadKind::kWhole;
  r.max_length = 4999;
  store.Read(std::span<RangeRead>(&r, 1), [](size_t) {});
  EXPECT_FALSE(r.status.ok());
  EXPECT_TRUE(r.too_large);
  EXPECT_TRUE(r.body.empty());
  r = RangeRead();
  r.object = obj.value().get();
  r.kind = ReadKind::kWhole;
  r.max_length = 5000;
  store.Read(std::span<RangeRead>(&r, 1), [](size_t) {});
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.body.size(), 5000u);
}

TEST(ObjectStoreTest, SigV4SignsEveryRequestAsTheServerReceivesIt) {
  TestObjectServer srv;
  const std::string etag = srv.Put("/bucket/arr%20x/c/%C3%A9/0", Pattern(300));
  ObjectStoreConfig c = Config(srv, "/bucket/arr x");
  c.signing = HttpSigning::kSigV4;
  c.region = "eu-west-3";
  c.service = "s3";
  c.credentials.access_key_id = "AKIDEXAMPLE";
  c.credentials.secret_access_key = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY";
  c.credentials.session_token = "SESSION/TOKEN+1==";
  c.headers = {{"X-Extra", "yes"}};
  ObjectStore store(c);
  ASSERT_TRUE(store.Check().ok()) << store.Check().ToString();

  ASSERT_TRUE(store.Stat("c/é/0").ok());
  auto all = store.ReadAll("c/é/0", 1000);
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  auto obj = store.Open("c/é/0");
  std::string buf;
  ASSERT_TRUE(ReadOne(store, obj.value().get(), ReadKind::kSuffix, 0, 16, &buf).status.ok());
  ASSERT_TRUE(ReadOne(store, obj.value().get(), ReadKind::kRange, 3, 7, &buf, /*pin=*/true).status.ok());

  const SigV4Credentials creds{"AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", "SESSION/TOKEN+1=="};
  const SigV4Scope scope{"eu-west-3", "s3", SigV4Style::kS3};
  const auto seen = srv.requests();
  ASSERT_EQ(seen.size(), 4u);
  for (const SeenRequest& q : seen) {
    SCOPED_TRACE(q.method + " " + q.target + " Range=" + q.Header("Range"));
    EXPECT_EQ(q.target, "/bucket/arr%20x/c/%C3%A9/0");
    const std::string date = q.Header("x-amz-date");
    ASSERT_EQ(date.size(), 16u) << date;
    EXPECT_EQ(q.Header("x-amz-content-sha256"), kUnsignedPayload);
    EXPECT_EQ(q.Header("x-amz-security-token"), "SESSION/TOKEN+1==");
    EXPECT_EQ(q.Header("X-Extra"), "yes");
    const std::string auth = q.Header("Authorization");
    ASSERT_EQ(auth.rfind("AWS4-HMAC-SHA256 ", 0), 0u) << auth;
    const AuthParts p = ParseAuth(auth);
    EXPECT_EQ(p.credential, "AKIDEXAMPLE/" + date.substr(0, 8) + "/eu-west-3/s3/aws4_request");
    EXPECT_NE(p.signed_headers.find("host"), std::string::npos) << p.signed_headers;
    EXPECT_NE(p.signed_headers.find("x-amz-date"), std::string::npos) << p.signed_headers;
    EXPECT_NE(p.signed_headers.find("x-amz-security-token"), std::string::npos) << p.signed_headers;
    EXPECT_NE(p.signed_headers.find("x-extra"), std::string::npos) << p.signed_headers;
    if (q.HasHeader("Range")) {
      EXPECT_NE(p.signed_headers.find("range"), std::string::npos) << p.signed_headers;
    }
    if (q.HasHeader("If-Match")) {
      EXPECT_NE(p.signed_headers.find("if-match"), std::string::npos) << p.signed_headers;
    }
    EXPECT_EQ(p.signature.size(), 64u);
    // The signature the server would compute from this request.
    EXPECT_EQ(auth, ExpectedAuthorization(q, srv.host(), "/bucket/arr x/c/é/0", creds, scope));
    // Time is current (signed per attempt, not at store creation).
    EXPECT_LT(std::llabs(ParseAmzDate(date) - static_cast<int64_t>(std::time(nullptr))), 300);
  }
  EXPECT_EQ(seen[3].Header("If-Match"), etag);

  // Refreshed credentials sign the requests that start afterwards.
  store.SetCredentials({"AKIDNEW", "newsecret", "", ""});
  EXPECT_EQ(store.CurrentCredentials().access_key_id, "AKIDNEW");
  ASSERT_TRUE(store.Stat("c/é/0").ok());
  const SeenRequest q = srv.requests().back();
  EXPECT_EQ(ParseAuth(q.Header("Authorization")).credential.rfind("AKIDNEW/", 0), 0u) << q.Header("Authorization");
  EXPECT_FALSE(q.HasHeader("x-amz-security-token"));
  EXPECT_EQ(q.Header("Authorization"),
            ExpectedAuthorization(q, srv.host(), "/bucket/arr x/c/é/0", {"AKIDNEW", "newsecret", ""}, scope));
}

TEST(ObjectStoreTest, SigV4SignsEachRetryAfresh) {
  TestObjectServer srv;
  srv.Put("/bucket/arr/k", std::string("data"));
  std::atomic<int> fails{1};
  srv.set_hook([&](const SeenRequest&, ServerConnection& conn) {
    if (fails.fetch_sub(1) <= 0) return false;
    conn.Send(HttpResponse(503, {}, "slow down"));
    return true;
  });
  ObjectStoreConfig c = Config(srv);
  c.signing = HttpSigning::kSigV4;
  c.credentials = {"AKID", "SECRET", "", ""};
  ObjectStore store(c);
  auto got = store.ReadAll("k", 100);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  const auto seen = srv.requests();
  ASSERT_EQ(seen.size(), 2u);
  for (const SeenRequest& q : seen) {
    EXPECT_EQ(q.Header("Authorization"),
              ExpectedAuthorization(q, srv.host(), "/bucket/arr/k", {"AKID", "SECRET", ""}, {"us-east-1", "s3", SigV4Style::kS3}));
  }
}

TEST(ObjectStoreTest, BearerTokenAndExtraHeadersGoWithEveryRequest) {
  TestObjectServer srv;
  srv.Put("/bucket/arr/k", Pattern(64));
  ObjectStoreConfig c = Config(srv);
  c.signing = HttpSigning::kBearer;
  c.credentials.token = "ya29.token-1";
  c.headers = {{"x-goog-user-project", "proj"}, {"X-Empty", ""}};
  ObjectStore store(c);
  ASSERT_TRUE(store.Check().ok());
  ASSERT_TRUE(store.Stat("k").ok());
  ASSERT_TRUE(store.ReadAll("k", 100).ok());
  auto obj = store.Open("k");
  std::string buf;
  ASSERT_TRUE(ReadOne(store, obj.value().get(), ReadKind::kSuffix, 0, 8, &buf).status.ok());
  ASSERT_TRUE(ReadOne(store, obj.value().get(), ReadKind::kRange, 0, 8, &buf, true).status.ok());
  store.SetCredentials({"", "", "", "ya29.token-2"});
  ASSERT_TRUE(store.Stat("k").ok());
  const auto seen = srv.requests();
  ASSERT_EQ(seen.size(), 5u);
  for (size_t i = 0; i < seen.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(seen[i].Header("Authorization"), i < 4 ? "Bearer ya29.token-1" : "Bearer ya29.token-2");
    EXPECT_EQ(seen[i].Header("x-goog-user-project"), "proj");
    EXPECT_TRUE(seen[i].HasHeader("X-Empty"));
    EXPECT_FALSE(seen[i].HasHeader("x-amz-date"));
  }

  // Unsigned stores send no Authorization at all.
  ObjectStore plain(Config(srv));
  ASSERT_TRUE(plain.Stat("k").ok());
  EXPECT_FALSE(srv.requests().back().HasHeader("Authorization"));
}

TEST(ObjectStoreTest, StatsCountRequestsRetriesAndBytes) {
  TestObjectServer srv;
  srv.Put("/bucket/arr/k", Pattern(100));
  std::atomic<int> fails{1};
  srv.set_hook([&](const SeenRequest&, ServerConnection& conn) {
    if (fails.fetch_sub(1) <= 0) return false;
    conn.Send(HttpResponse(503, {}, "busy"));
    return true;
  });
  ObjectStore store(Config(srv));
  ASSERT_TRUE(store.ReadAll("k", 1000).ok());  // 503, then 200
  EXPECT_EQ(store.stats().requests.load(), 2u);
  EXPECT_EQ(store.stats().retries.load(), 1u);
  EXPECT_EQ(store.stats().bytes_fetched.load(), 100u);
  EXPECT_EQ(store.stats().bytes_used.load(), 100u);
  EXPECT_EQ(store.stats().errors.load(), 0u);

  auto obj = store.Open("k");
  std::string buf;
  ASSERT_TRUE(ReadOne(store, obj.value().get(), ReadKind::kSuffix, 0, 30, &buf).status.ok());
  ASSERT_TRUE(store.Stat("k").ok());
  EXPECT_EQ(store.stats().requests.load(), 4u);
  EXPECT_EQ(store.stats().retries.load(), 1u);
  EXPECT_EQ(store.stats().bytes_fetched.load(), 130u);

  // A failed request counts as an error; a 404 does not.
  srv.Put("/bucket/arr/k", Pattern(100, 7));
  EXPECT_FALSE(ReadOne(store, obj.value().get(), ReadKind::kRange, 0, 10, &buf, true).status.ok());
  EXPECT_TRUE(store.ReadAll("absent", 10).ok());
  EXPECT_EQ(store.stats().requests.load(), 6u);
  EXPECT_EQ(store.stats().errors.load(), 1u);
  EXPECT_EQ(srv.request_count(), 6u);
}

TEST(ObjectStoreTest, ErrorsNameTheObjectAndNoSecret) {
  TestObjectServer srv;
  srv.set_hook([](const SeenRequest&, ServerConnection& conn) {
    conn.Send(HttpResponse(403, {{"x-amz-request-id", "RID42"}}, "<Error><Code>AccessDenied</Code></Error>"));
    return true;
  });
  ObjectStoreConfig c = Config(srv);
  c.signing = HttpSigning::kBearer;
  c.credentials.token = "supersecret-token";
  ObjectStore store(c);
  auto r = store.ReadAll("zarr.json", 100);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kIoError);
  EXPECT_EQ(r.status().error_number(), EACCES);
  EXPECT_NE(r.status().ToString().find("/bucket/arr/zarr.json"), std::string::npos) << r.status().ToString();
  EXPECT_NE(r.status().ToString().find("RID42"), std::string::npos) << r.status().ToString();
  EXPECT_EQ(r.status().ToString().find("supersecret"), std::string::npos) << r.status().ToString();
  EXPECT_EQ(srv.request_count(), 1u) << "403 is not retried";
}

// Errors the HTTP client reports (403, 5xx after retries, timeouts, a bad Content-Range)
// name the object as the user wrote it (Location(key): "s3://bucket/arr/c/0"), like the
// errors the store words itself, not the transport's endpoint URL (Status::ReplacePath).
TEST(ObjectStoreTest, ClientErrorsNameTheDisplayLocation) {
  TestObjectServer srv;
  srv.set_hook([](const SeenRequest&, ServerConnection& conn) {
    conn.Send(HttpResponse(403, {}, "<Error><Code>AccessDenied</Code></Error>"));
    return true;
  });
  ObjectStore store(Config(srv));
  auto all = store.ReadAll("zarr.json", 100);
  ASSERT_FALSE(all.ok());
  EXPECT_EQ(all.status().path(), "s3://bucket/arr/zarr.json");
  auto info = store.Stat("zarr.json");
  ASSERT_FALSE(info.ok());
  EXPECT_EQ(info.status().path(), "s3://bucket/arr/zarr.json");
}

TEST(ObjectStoreTest, CheckRefusesUnusableConfigs) {
  TestObjectServer srv;
  EXPECT_TRUE(ObjectStore(Config(srv)).Check().ok());
  auto refused = [&](const std::function<void(ObjectStoreConfig&)>& edit, const std::string& words) {
    ObjectStoreConfig c = Config(srv);
    edit(c);
    Status st = ObjectStore(c).Check();
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << words << ": " << st.ToString();
    EXPECT_NE(st.message().find(words), std::string::npos) << st.message();
    EXPECT_EQ(st.message().find("s3cr3t"), std::string::npos) << st.message();
  };
  refused([](ObjectStoreConfig& c) { c.scheme = "ftp"; }, "scheme");
  refused([](ObjectStoreConfig& c) { c.scheme = "HTTP"; }, "scheme");
  refused([](ObjectStoreConfig& c) { c.host = ""; }, "host");
  refused([](ObjectStoreConfig& c) { c.host = "a/b"; }, "host");
  refused([](ObjectStoreConfig& c) { c.host = "evil\r\nX-Injected: 1"; }, "host");
  refused([](ObjectStoreConfig& c) { c.root = "no-slash"; }, "root");
  refused([](ObjectStoreConfig& c) { c.root = "/a\nb"; }, "root");
  refused([](ObjectStoreConfig& c) { c.headers = {{"X-A", "ok\r\nX-Injected: s3cr3t"}}; }, "header");
  refused([](ObjectStoreConfig& c) { c.headers = {{"X-A\r\nX-B", "v"}}; }, "header");
  refused([](ObjectStoreConfig& c) { c.headers = {{"X-A:", "v"}}; }, "header");
  refused([](ObjectStoreConfig& c) { c.headers = {{"", "v"}}; }, "header");
  refused([](ObjectStoreConfig& c) {
    c.signing = HttpSigning::kSigV4;
    c.credentials = {"AKID", "", "", ""};
  }, "SigV4");
  refused([](ObjectStoreConfig& c) {
    c.signing = HttpSigning::kSigV4;
    c.credentials = {"", "s3cr3t", "", ""};
  }, "SigV4");
  refused([](ObjectStoreConfig& c) { c.signing = HttpSigning::kBearer; }, "bearer");
  EXPECT_EQ(srv.request_count(), 0u);
}

TEST(ObjectStoreTest, TraitsAreRemote) {
  TestObjectServer srv;
  ObjectStoreConfig c = Config(srv);
  c.client.max_in_flight = 7;
  ObjectStore store(c);
  const StoreTraits t = store.traits();
  EXPECT_TRUE(t.remote);
  EXPECT_FALSE(t.one_at_a_time);
  EXPECT_EQ(t.max_in_flight, 7u);
  EXPECT_EQ(store.TransportName().value(), "http");
}

TEST(ObjectStoreTest, AProviderWithoutSuffixRangesSizesTheObjectWithAHeadFirst) {
  // Azure Blob, say, answers no "bytes=-N": the store asks HEAD for size and ETag, then reads
  // the last bytes with a plain range pinned (If-Match) to that ETag. Batch and stream alike.
  TestObjectServer srv;
  const std::string data = Pattern(5000, 7);
  const std::string v1 = srv.Put("/bucket/arr/c/0", data);
  srv.Put("/bucket/arr/c/small", std::string("abc"));
  srv.Put("/bucket/arr/c/empty", std::string());
  ObjectStoreConfig c = Config(srv);
  auto provider = std::make_shared<Provider>(*ProviderOf(ObjectProvider::kHttp));
  provider->suffix_ranges = false;
  c.provider = provider;
  ObjectStore store(c);
  std::string buf;
  {
    auto obj = store.Open("c/0");
    RangeRead r = ReadOne(store, obj.value().get(), ReadKind::kSuffix, 0, 100, &buf);
    ASSERT_TRUE(r.status.ok()) << r.status.ToString();
    EXPECT_EQ(r.transferred, 100u);
    EXPECT_EQ(buf, data.substr(4900));
    EXPECT_TRUE(obj.value()->size_known);
    EXPECT_EQ(obj.value()->size, 5000u);
    EXPECT_EQ(obj.value()->version, v1);
    const auto seen = srv.requests();
    ASSERT_EQ(seen.size(), 2u);
    EXPECT_EQ(seen[0].method, "HEAD");
    EXPECT_EQ(seen[1].method, "GET");
    EXPECT_EQ(seen[1].Header("Range"), "bytes=4900-4999");
    EXPECT_EQ(seen[1].Header("If-Match"), v1);
  }
  {  // Shorter than asked: the whole object, as a suffix range gives it; empty: nothing.
    auto small = store.Open("c/small");
    RangeRead r = ReadOne(store, small.value().get(), ReadKind::kSuffix, 0, 100, &buf);
    ASSERT_TRUE(r.status.ok()) << r.status.ToString();
    EXPECT_EQ(r.transferred, 3u);
    EXPECT_EQ(buf.substr(0, 3), "abc");
    auto empty = store.Open("c/empty");
    const size_t before = srv.request_count();
    RangeRead e = ReadOne(store, empty.value().get(), ReadKind::kSuffix, 0, 100, &buf);
    ASSERT_TRUE(e.status.ok()) << e.status.ToString();
    EXPECT_EQ(e.transferred, 0u);
    EXPECT_EQ(srv.request_count(), before + 1) << "the HEAD only";
    auto gone = store.Open("c/none");
    RangeRead m = ReadOne(store, gone.value().get(), ReadKind::kSuffix, 0, 100, &buf);
    ASSERT_TRUE(m.status.ok()) << m.status.ToString();
    EXPECT_TRUE(m.missing);
  }
  {  // The stream: several suffix reads, each HEAD then GET, all delivered once.
    std::vector<ObjectRef> objs;
    std::vector<RangeRead> reads(3);
    std::vector<std::string> bufs(3, std::string(10, '\0'));
    for (size_t i = 0; i < reads.size(); ++i) {
      objs.push_back(store.Open("c/0").value());
      reads[i].object = objs.back().get();
      reads[i].kind = ReadKind::kSuffix;
      reads[i].length = 10;
      reads[i].dst = reinterpret_cast<uint8_t*>(bufs[i].data());
    }
    size_t at = 0, done = 0;
    store.ReadStream([&]() -> RangeRead* { return at < reads.size() ? &reads[at++] : nullptr; },
                     [&](RangeRead& r) {
                       ++done;
                       EXPECT_TRUE(r.status.ok()) << r.status.ToString();
                     });
    EXPECT_EQ(done, 3u);
    for (const std::string& b : bufs) EXPECT_EQ(b, data.substr(4990));
  }
  for (const SeenRequest& q : srv.requests()) {
    EXPECT_EQ(q.Header("Range").rfind("bytes=-", 0), std::string::npos) << "no suffix range is ever sent";
  }
}

}  // namespace
}  // namespace lsio
