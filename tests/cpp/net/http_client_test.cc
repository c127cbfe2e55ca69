// HttpClient (net/http_client.h) against a scripted loopback HTTP/1.1 server
// (test_http_server.h), so every fault is exact: ranges and their checks, missing objects,
// 412/403, retries (503, 429, S3 SlowDown in a 200, reset connections, stalls), resumed
// bodies with If-Match, servers that ignore Range, many requests over few connections,
// cancellation, exhausted attempts, SIGPIPE, and use after fork().
//
// Every test is bounded: timeouts are tens to hundreds of milliseconds and backoff delays a
// few milliseconds. SIGPIPE keeps its default action (terminate) in this binary, so a send
// to a reset connection that raised it would kill the test.
#include "net/http_client.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <deque>
#include <stdexcept>
#include <string>
#include <vector>

#include "net/test_http_server.h"

namespace lsio {
namespace {

using testing::HttpResponse;
using testing::SeenRequest;
using testing::ServerConnection;
using testing::TestHttpServer;
using Clock = std::chrono::steady_clock;

std::string Pattern(size_t n, unsigned seed = 1) {
  std::string s(n, '\0');
  uint32_t x = seed * 2654435761u + 1;
  for (size_t i = 0; i < n; ++i) {
    x = x * 1664525u + 1013904223u;
    s[i] = static_cast<char>(x >> 24);
  }
  return s;
}

struct Object {
  std::string data;
  std::string etag = "\"etag-1\"";
};

// [a, b] of a Range header against an object of `size` bytes; false for none/malformed.
bool ParseRange(const std::string& h, uint64_t size, uint64_t* a, uint64_t* b) {
  unsigned long long x = 0, y = 0;
  if (std::sscanf(h.c_str(), "bytes=%llu-%llu", &x, &y) == 2) {
    *a = x;
    *b = std::min<uint64_t>(y, size - 1);
    return true;
  }
  if (std::sscanf(h.c_str(), "bytes=-%llu", &x) == 1) {
    const uint64_t n = std::min<uint64_t>(x, size);
    *a = size - n;
    *b = size - 1;
    return true;
  }
  if (std::sscanf(h.c_str(), "bytes=%llu-", &x) == 1) {
    *a = x;
    *b = size - 1;
    return true;
  }
  return false;
}

// Answers like S3: If-Match, HEAD, Range (206 / 416), request ids.
void ServeObject(const Object& obj, const SeenRequest& req, ServerConnection& conn) {
  const std::vector<std::pair<std::string, std::string>> ids = {{"x-amz-request-id", "REQ" + std::to_string(req.connection)}};
  const std::string im = req.Header("If-Match");
  if (!im.empty() && im != obj.etag) {
    conn.Send(HttpResponse(412, ids, "<Error><Code>PreconditionFailed</Code></Error>"));
    return;
  }
  auto headers = ids;
  headers.emplace_back("ETag", obj.etag);
  if (req.method == "HEAD") {
    headers.emplace_back("Content-Length", std::to_string(obj.data.size()));
    conn.Send(HttpResponse(200, headers, "", false));
    return;
  }
  const std::string range = req.Header("Range");
  if (range.empty()) {
    conn.Send(HttpResponse(200, headers, obj.data));
    return;
  }
  uint64_t a = 0, b = 0;
  if (obj.data.empty() || !ParseRange(range, obj.data.size(), &a, &b) || a >= obj.data.size()) {
    headers.emplace_back("Content-Range", "bytes */" + std::to_string(obj.data.size()));
    conn.Send(HttpResponse(416, headers, ""));
    return;
  }
  headers.emplace_back("Content-Range", "bytes " + std::to_string(a) + "-" + std::to_string(b) + "/" +
                                            std::to_string(obj.data.size()));
  conn.Send(HttpResponse(206, headers, std::string_view(obj.data).substr(a, b - a + 1)));
}

// An error dialect written here, as a provider would pass one (store/providers.h has the
// real ones): the transport applies whatever vocabulary it is given and knows none itself.
std::shared_ptr<const ErrorDialect> XmlTestDialect() {
  auto d = std::make_shared<ErrorDialect>();
  d->request_id_headers = {"x-amz-request-id", "x-request-id"};
  auto element = [](std::string_view body, std::string_view tag) {
    const std::string open = "<" + std::string(tag) + ">", close = "</" + std::string(tag) + ">";
    const size_t a = body.find(open);
    const size_t b = a == std::string_view::npos ? a : body.find(close, a);
    return b == std::string_view::npos ? std::string() : std::string(body.substr(a + open.size(), b - a - open.size()));
  };
  d->describe = [element](std::string_view body) { return element(body, "Code"); };
  d->may_hide_error = [](std::string_view type) { return type.find("xml") != std::string_view::npos; };
  d->retry_in_body = [element](std::string_view body) {
    return body.find("<Error>") != std::string_view::npos && element(body, "Code") == "SlowDown" ? std::string("SlowDown")
                                                                                                 : std::string();
  };
  return d;
}

HttpClientOptions FastOptions() {
  HttpClientOptions o;
  o.dialect = XmlTestDialect();
  o.timeout_ms = 2000;
  o.connect_timeout_ms = 1000;
  o.stall_timeout_ms = 1000;
  o.max_attempts = 5;
  o.total_timeout_ms = 5000;
  o.retry_base_delay_ms = 1;
  o.retry_max_delay_ms = 5;
  return o;
}

HttpClient& Client() {
  auto c = ProcessHttpClient();
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return **c;
}

// A destination with guard bytes on both sides, to catch writes outside [dst, dst+length).
struct Dst {
  explicit Dst(size_t n) : buf(n + 64, '\xAB'), n(n) {}
  uint8_t* data() { return reinterpret_cast<uint8_t*>(buf.data() + 32); }
  std::string bytes() const { return buf.substr(32, n); }
  bool guards_intact() const {
    return buf.substr(0, 32) == std::string(32, '\xAB') && buf.substr(32 + n) == std::string(32, '\xAB');
  }
  std::string buf;
  size_t n;
};

HttpRequest RangeRequest(const std::string& url, uint64_t off, uint64_t len, Dst* dst) {
  HttpRequest r;
  r.url = url;
  r.range = RangeKind::kRange;
  r.offset = off;
  r.length = len;
  r.dst = dst != nullptr ? dst->data() : nullptr;
  return r;
}

void RunOne(HttpRequest& r, const HttpClientOptions& o = FastOptions()) {
  int done = 0;
  Client().Run(std::span<HttpRequest>(&r, 1), o, [&](size_t) { ++done; });
  EXPECT_EQ(done, 1);
}

TEST(HttpClientTest, RangeReadWritesExactlyTheRange) {
  Object obj{Pattern(10000)};
  TestHttpServer server([&](const SeenRequest& q, ServerConnection& c) { ServeObject(obj, q, c); });
  Dst dst(1000);
  HttpRequest r = RangeRequest(server.Url("/bucket/key"), 1234, 1000, &dst);
  RunOne(r);
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(dst.bytes(), obj.data.substr(1234, 1000));
  EXPECT_TRUE(dst.guards_intact());
  EXPECT_EQ(r.transferred, 1000u);
  EXPECT_EQ(r.http_status, 206);
  EXPECT_TRUE(r.object_size_known);
  EXPECT_EQ(r.object_size, 10000u);
  EXPECT_EQ(r.etag, obj.etag);
  EXPECT_EQ(r.request_id, "REQ1");
  EXPECT_EQ(r.attempts, 1u);
  EXPECT_FALSE(r.missing);
  const auto seen = server.requests();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].Header("Range"), "bytes=1234-2233");
  EXPECT_FALSE(seen[0].HasHeader("If-Match"));
  EXPECT_FALSE(seen[0].HasHeader("Accept-Encoding"));  // byte ranges of the stored bytes
}

TEST(HttpClientTest, RangeIntoBodyWhenNoDst) {
  Object obj{Pattern(5000)};
  TestHttpServer server([&](const SeenRequest& q, ServerConnection& c) { ServeObject(obj, q, c); });
  HttpRequest r = RangeRequest(server.Url("/k"), 10, 300, nullptr);
  RunOne(r);
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.body, obj.data.substr(10, 300));
  EXPECT_EQ(r.transferred, 300u);
}

TEST(HttpClientTest, SuffixRanges) {
  Object obj{Pattern(1000)};
  Object empty{""};
  TestHttpServer server([&](const SeenRequest& q, ServerConnection& c) {
    ServeObject(q.target == "/empty" ? empty : obj, q, c);
  });
  Dst tail(100);
  HttpRequest r1;
  r1.url = server.Url("/obj");
  r1.range = RangeKind::kSuffix;
  r1.length = 100;
  r1.dst = tail.data();
  Dst all(4096);  // more than the object: the whole object lands at dst[0..1000)
  HttpRequest r2 = r1;
  r2.length = 4096;
  r2.dst = all.data();
  HttpRequest r3 = r1;  // the last bytes of an empty object: none (S3 answers 416)
  r3.url = server.Url("/empty");
  r3.dst = nullptr;
  std::vector<HttpRequest> reqs = {r1, r2, r3};
  Client().Run(reqs, FastOptions(), [](size_t) {});
  ASSERT_TRUE(reqs[0].status.ok()) << reqs[0].status.ToString();
  EXPECT_EQ(tail.bytes(), obj.data.substr(900));
  EXPECT_EQ(reqs[0].transferred, 100u);
  EXPECT_EQ(reqs[0].object_size, 1000u);
  ASSERT_TRUE(reqs[1].status.ok()) << reqs[1].status.ToString();
  EXPECT_EQ(reqs[1].transferred, 1000u);
  EXPECT_EQ(all.bytes().substr(0, 1000), obj.data);
  EXPECT_TRUE(all.guards_intact());
  ASSERT_TRUE(reqs[2].status.ok()) << reqs[2].status.ToString();
  EXPECT_EQ(reqs[2].transferred, 0u);
  EXPECT_TRUE(reqs[2].object_size_known);
  EXPECT_EQ(reqs[2].object_size, 0u);
  for (const auto& q : server.requests()) {
    EXPECT_EQ(q.Header("Range").substr(0, 7), "bytes=-");
  }
}

TEST(HttpClientTest, WholeObjectAndHead) {
  Object obj{Pattern(70000)};
  TestHttpServer server([&](const SeenRequest& q, ServerConnection& c) { ServeObject(obj, q, c); });
  HttpRequest get;
  get.url = server.Url("/o");
  HttpRequest head;
  head.url = server.Url("/o");
  head.method = "HEAD";
  std::vector<HttpRequest> reqs = {get, head};
  Client().Run(reqs, FastOptions(), [](size_t) {});
  ASSERT_TRUE(reqs[0].status.ok()) << reqs[0].status.ToString();
  EXPECT_EQ(reqs[0].body, obj.data);
  EXPECT_EQ(reqs[0].transferred, obj.data.size());
  EXPECT_EQ(reqs[0].object_size, obj.data.size());
  ASSERT_TRUE(reqs[1].status.ok()) << reqs[1].status.ToString();
  EXPECT_TRUE(reqs[1].object_size_known);
  EXPECT_EQ(reqs[1].object_size, obj.data.size());
  EXPECT_EQ(reqs[1].etag, obj.etag);
  EXPECT_TRUE(reqs[1].body.empty());
  EXPECT_EQ(reqs[1].transferred, 0u);
}

TEST(HttpClientTest, NotFoundAndGoneAreMissingNotErrors) {
  TestHttpServer server([&](const SeenRequest& q, ServerConnection& c) {
    c.Send(HttpResponse(q.target == "/gone" ? 410 : 404, {}, "<Error><Code>NoSuchKey</Code></Error>"));
  });
  Dst dst(10);
  std::vector<HttpRequest> reqs = {RangeRequest(server.Url("/nope"), 0, 10, &dst),
                                   RangeRequest(server.Url("/gone"), 0, 10, &dst)};
  reqs[1].method = "HEAD";
  Client().Run(reqs, FastOptions(), [](size_t) {});
  for (const auto& r : reqs) {
    EXPECT_TRUE(r.status.ok()) << r.status.ToString();
    EXPECT_TRUE(r.missing);
    EXPECT_EQ(r.attempts, 1u);
    EXPECT_EQ(r.transferred, 0u);
  }
  EXPECT_EQ(reqs[0].http_status, 404);
  EXPECT_EQ(reqs[1].http_status, 410);
  EXPECT_EQ(std::string(dst.buf), std::string(dst.buf.size(), '\xAB'));
}

TEST(HttpClientTest, PreconditionFailedIsNotRetried) {
  Object obj{Pattern(100)};
  TestHttpServer server([&](const SeenRequest& q, ServerConnection& c) { ServeObject(obj, q, c); });
  Dst dst(10);
  HttpRequest r = RangeRequest(server.Url("/k"), 0, 10, &dst);
  r.if_match = "\"old\"";
  RunOne(r);
  EXPECT_EQ(r.status.code(), StatusCode::kIoError);
  EXPECT_EQ(r.status.error_number(), ESTALE);
  EXPECT_TRUE(r.precondition_failed);
  EXPECT_EQ(r.attempts, 1u);
  EXPECT_EQ(r.http_status, 412);
  ASSERT_EQ(server.requests().size(), 1u);
  EXPECT_EQ(server.requests()[0].Header("If-Match"), "\"old\"");
}

TEST(HttpClientTest, ForbiddenIsNotRetriedAndTheMessageNamesTheRequest) {
  TestHttpServer server([&](const SeenRequest&, ServerConnection& c) {
    c.Send(HttpResponse(403, {{"x-amz-request-id", "RID42"}, {"Content-Type", "application/xml"}},
                        "<?xml version=\"1.0\"?><Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>"));
  });
  Dst dst(100);
  HttpRequest r = RangeRequest(server.Url("/b/k?X-Amz-Signature=topsecret&X-Amz-Credential=AKIAX"), 500, 100, &dst);
  RunOne(r);
  EXPECT_EQ(r.status.code(), StatusCode::kIoError);
  EXPECT_EQ(r.status.error_number(), EACCES);
  EXPECT_TRUE(r.permission_denied);
  EXPECT_EQ(r.attempts, 1u);
  const std::string msg = r.status.ToString();
  EXPECT_NE(msg.find("AccessDenied"), std::string::npos) << msg;
  EXPECT_NE(msg.find("RID42"), std::string::npos) << msg;
  EXPECT_NE(msg.find("403"), std::string::npos) << msg;
  EXPECT_NE(msg.find("bytes [500, 600)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("/b/k"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("topsecret"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("AKIAX"), std::string::npos) << msg;
}

TEST(HttpClientTest, ServiceUnavailableTwiceThenSuccessOnFreshConnections) {
  Object obj{Pattern(1000)};
  std::atomic<int> n{0};
  TestHttpServer server([&](const SeenRequest& q, ServerConnection& c) {
    if (++n <= 2) {
      c.Send(HttpResponse(503, {}, "<Error><Code>SlowDown</Code></Error>"));
      return;  // keep-alive: the client must still choose a new connection
    }
    ServeObject(obj, q, c);
  });
  Dst dst(100);
  HttpRequest r = RangeRequest(server.Url("/k"), 100, 100, &dst);
  RunOne(r);
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(dst.bytes(), obj.data.substr(100, 100));
  EXPECT_EQ(r.attempts, 3u);
  const auto seen = server.requests();
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(server.connections(), 3);
  for (const auto& q : seen) {
    EXPECT_EQ(q.Header("Range"), "bytes=100-199");
    EXPECT_EQ(q.seq_on_connection, 1);
  }
}

TEST(HttpClientTest, TooManyRequestsAndRequestTimeoutAreRetried) {
  Object obj{Pattern(1000)};
  std::atomic<int> n{0};
  TestHttpServer server([&](const SeenRequest& q, ServerConnection& c) {
    const int k = ++n;
    if (k == 1) {
      c.Send(HttpResponse(429, {{"Retry-After", "0"}}, ""));
    } else if (k == 2) {
      c.Send(HttpResponse(408, {}, ""));
    } else {
      ServeObject(obj, q, c);
    }
  });
  Dst dst(10);
  HttpRequest r = RangeRequest(server.Url("/k"), 0, 10, &dst);
  RunOne(r);
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.attempts, 3u);
}

TEST(HttpClientTest, WithoutADialectBodiesAreDataAndErrorsAreHttpOnly) {
  // The transport knows no provider: an XML 200 is the data, an error body is not parsed,
  // and only x-request-id names a request.
  TestHttpServer srv([](const SeenRequest&, ServerConnection& c) {
    c.Send(HttpResponse(200, {{"Content-Type", "application/xml"}, {"x-amz-request-id", "AMZ"}},
                        "<Error><Code>SlowDown</Code></Error>"));
  });
  HttpRequest r;
  r.url = srv.Url("/x");
  HttpClientOptions o = FastOptions();
  o.dialect = nullptr;
  RunOne(r, o);
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.body, "<Error><Code>SlowDown</Code></Error>");
  EXPECT_EQ(r.attempts, 1u);
  EXPECT_EQ(r.request_id, "");
}

TEST(HttpClientTest, SlowDownInA200BodyIsRetried) {
  Object obj{Pattern(2000)};
  std::atomic<int> n{0};
  TestHttpServer server([&](const SeenRequest& q, ServerConnection& c) {
    if (++n == 1) {
      c.Send(HttpResponse(200, {{"Content-Type", "application/xml"}},
                          "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>SlowDown</Code>"
                          "<Message>Please reduce your request rate.</Message></Error>"));
      return;
    }
    ServeObject(obj, q, c);
  });
  Dst dst(500);
  HttpRequest r = RangeRequest(server.Url("/k"), 1000, 500, &dst);
  RunOne(r);
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(dst.bytes(), obj.data.substr(1000, 500));
  EXPECT_EQ(r.attempts, 2u);
  EXPECT_TRUE(dst.guards_intact());
}

TEST(HttpClientTest, XmlDataThatIsNoErrorIsData) {
  Object obj{"<?xml version=\"1.0\"?><doc><Code>SlowDown</Code></doc>"};
  TestHttpServer server([&](const SeenRequest&, ServerConnection& c) {
    c.Send(HttpResponse(200, {{"Content-Type", "text/xml"}, {"ETag", obj.etag}}, obj.data));
  });
  HttpRequest r;
  r.url = server.Url("/doc.xml");
  RunOne(r);
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.body, obj.data);
  EXPECT_EQ(r.attempts, 1u);
}

// The first answer breaks off after `cut` bytes (RST or FIN); the client must ask for the
// rest with If-Match on the first answer's ETag.
void CutBodyThenResume(bool reset) {
  Object obj{Pattern(100000)};
  std::atomic<int> n{0};
  TestHttpServer server([&](const SeenRequest& q, ServerConnection& c) {
    if (++n == 1) {
      const std::string full = HttpResponse(206, {{"ETag", obj.etag}, {"Content-Range", "bytes 1000-50999/100000"}},
                                            std::string_view(obj.data).substr(1000, 50000));
      const size_t head = full.size() - 50000;
      c.Send(std::string_view(full).substr(0, head + 20000));
      c.Sleep(50);  // let the bytes arrive before the RST discards them
      if (reset) {
        c.Reset();
      } else {
        c.Close();
      }
      return;
    }
    ServeObject(obj, q, c);
  });
  Dst dst(50000);
  HttpRequest r = RangeRequest(server.Url("/k"), 1000, 50000, &dst);
  RunOne(r);
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(dst.bytes(), obj.data.substr(1000, 50000));
  EXPECT_TRUE(dst.guards_intact());
  EXPECT_EQ(r.transferred, 50000u);
  EXPECT_EQ(r.attempts, 2u);
  const auto seen = server.requests();
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0].Header("Range"), "bytes=1000-50999");
  EXPECT_FALSE(seen[0].HasHeader("If-Match"));
  EXPECT_EQ(seen[1].Header("Range"), "bytes=21000-50999");
  EXPECT_EQ(seen[1].Header("If-Match"), obj.etag);
}

TEST(HttpClientTest, ConnectionResetMidBodyIsResumedWithRangeAndIfMatch) { CutBodyThenResume(true); }

TEST(HttpClientTest, TruncatedBodyIsResumedWithRangeAndIfMatch) { CutBodyThenResume(false); }

TEST(HttpClientTest, TruncatedWholeObjectIsResumedOpenEnded) {
  Object obj{Pattern(30000)};
  std::atomic<int> n{0};
  TestHttpServer server([&](const SeenRequest& q, ServerConnection& c) {
    if (++n == 1) {
      const std::string full = HttpResponse(200, {{"ETag", obj.etag}}, obj.data);
      c.Send(std::string_view(full).substr(0, full.size() - 10000));
      c.Close();
      return;
    }
    ServeObject(obj, q, c);
  });
  HttpRequest r;
  r.url = server.Url("/k");
  RunOne(r);
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.body, obj.data);
  const auto seen = server.requests();
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[1].Header("Range"), "bytes=20000-");
  EXPECT_EQ(seen[1].Header("If-Match"), obj.etag);
}

TEST(HttpClientTest, ObjectChangedDuringResumeIsPreconditionFailed) {
  Object obj{Pattern(10000)};
  std::atomic<int> n{0};
  TestHttpServer server([&](const SeenRequest& q, ServerConnection& c) {
    if (++n == 1) {
      const std::string full = HttpResponse(206, {{"ETag", obj.etag}, {"Content-Range", "bytes 0-9999/10000"}}, obj.data);
      c.Send(std::string_view(full).substr(0, full.size() - 5000));
      c.Close();
      return;
    }
    Object changed{obj.data, "\"etag-2\""};
    ServeObject(changed, q, c);
  });
  Dst dst(10000);
  HttpRequest r = RangeRequest(server.Url("/k"), 0, 10000, &dst);
  RunOne(r);
  EXPECT_EQ(r.status.code(), StatusCode::kIoError) << r.status.ToString();
  EXPECT_EQ(r.status.error_number(), ESTALE);
  EXPECT_TRUE(r.precondition_failed);
  EXPECT_EQ(r.attempts, 2u);
}

TEST(HttpClientTest, ServerIgnoringRangeSmallObjectIsTaken) {
  Object obj{Pattern(3000)};
  TestHttpServer server([&](const SeenRequest&, ServerConnection& c) {
    c.Send(HttpResponse(200, {{"ETag", obj.etag}}, obj.data));
  });
  Dst dst(200);
  Dst tail(100);
  std::vector<HttpRequest> reqs = {RangeRequest(server.Url("/k"), 1500, 200, &dst), HttpRequest{}};
  reqs[1].url = server.Url("/k");
  reqs[1].range = RangeKind::kSuffix;
  reqs[1].length = 100;
  reqs[1].dst = tail.data();
  Client().Run(reqs, FastOptions(), [](size_t) {});
  ASSERT_TRUE(reqs[0].status.ok()) << reqs[0].status.ToString();
  EXPECT_EQ(dst.bytes(), obj.data.substr(1500, 200));
  EXPECT_TRUE(dst.guards_intact());
  EXPECT_EQ(reqs[0].transferred, 200u);
  EXPECT_EQ(reqs[0].object_size, 3000u);
  ASSERT_TRUE(reqs[1].status.ok()) << reqs[1].status.ToString();
  EXPECT_EQ(tail.bytes(), obj.data.substr(2900));
  EXPECT_TRUE(tail.guards_intact());
}

TEST(HttpClientTest, ServerIgnoringRangeLargeObjectFails) {
  Object obj{Pattern(3000)};
  TestHttpServer server([&](const SeenRequest&, ServerConnection& c) {
    c.Send(HttpResponse(200, {{"ETag", obj.etag}}, obj.data));
  });
  HttpClientOptions o = FastOptions();
  o.ignored_range_limit = 2999;
  Dst dst(200);
  HttpRequest r = RangeRequest(server.Url("/k"), 1500, 200, &dst);
  RunOne(r, o);
  EXPECT_EQ(r.status.code(), StatusCode::kUnavailable) << r.status.ToString();
  EXPECT_NE(r.status.message().find("ignores Range"), std::string::npos) << r.status.ToString();
  EXPECT_EQ(r.attempts, 1u);
  EXPECT_EQ(dst.buf, std::string(dst.buf.size(), '\xAB'));
}

TEST(HttpClientTest, WrongContentRangeIsDataLoss) {
  Object obj{Pattern(1000)};
  std::atomic<int> which{0};
  TestHttpServer server([&](const SeenRequest& q, ServerConnection& c) {
    if (q.target == "/shifted") {  // asked 100-199, sent 0-99
      c.Send(HttpResponse(206, {{"Content-Range", "bytes 0-99/1000"}}, obj.data.substr(0, 100)));
    } else if (q.target == "/short") {  // object shorter than the range asked
      c.Send(HttpResponse(206, {{"Content-Range", "bytes 100-149/150"}}, obj.data.substr(100, 50)));
    } else if (q.target == "/lengths") {  // Content-Length disagrees with Content-Range
      c.Send(HttpResponse(206, {{"Content-Range", "bytes 100-199/1000"}}, obj.data.substr(100, 150)));
    } else {  // no Content-Range at all
      c.Send(HttpResponse(206, {}, obj.data.substr(100, 100)));
    }
    ++which;
  });
  Dst d1(100), d2(100), d3(100), d4(100);
  std::vector<HttpRequest> reqs = {RangeRequest(server.Url("/shifted"), 100, 100, &d1),
                                   RangeRequest(server.Url("/short"), 100, 100, &d2),
                                   RangeRequest(server.Url("/lengths"), 100, 100, &d3),
                                   RangeRequest(server.Url("/none"), 100, 100, &d4)};
  Client().Run(reqs, FastOptions(), [](size_t) {});
  for (const auto& r : reqs) {
    EXPECT_EQ(r.status.code(), StatusCode::kDataLoss) << r.status.ToString();
    EXPECT_EQ(r.attempts, 1u);
  }
  EXPECT_NE(reqs[0].status.message().find("bytes 0-99/1000"), std::string::npos) << reqs[0].status.ToString();
  EXPECT_NE(reqs[0].status.message().find("bytes 100-199"), std::string::npos) << reqs[0].status.ToString();
  for (Dst* d : {&d1, &d2, &d3, &d4}) EXPECT_TRUE(d->guards_intact());
}

TEST(HttpClientTest, StallIsDetectedAndBounded) {
  std::atomic<int> n{0};
  TestHttpServer server([&](const SeenRequest&, ServerConnection& c) {
    ++n;
    // Headers and part of the body, then nothing.
    c.Send("HTTP/1.1 206 Partial Content\r\nContent-Range: bytes 0-999/1000\r\nContent-Length: 1000\r\n\r\n");
    c.Send(std::string(100, 'x'));
    c.Sleep(5000);
    c.Close();
  });
  HttpClientOptions o = FastOptions();
  o.stall_timeout_ms = 200;
  o.max_attempts = 2;
  Dst dst(1000);
  HttpRequest r = RangeRequest(server.Url("/k"), 0, 1000, &dst);
  const auto t0 = Clock::now();
  RunOne(r, o);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
  EXPECT_EQ(r.status.code(), StatusCode::kIoError) << r.status.ToString();
  EXPECT_EQ(r.status.error_number(), ETIMEDOUT);
  EXPECT_NE(r.status.message().find("stalled"), std::string::npos) << r.status.ToString();
  EXPECT_NE(r.status.message().find("after 2 attempts"), std::string::npos) << r.status.ToString();
  EXPECT_EQ(r.attempts, 2u);
  EXPECT_LT(ms, 2000);
  EXPECT_GE(ms, 400);
  EXPECT_TRUE(dst.guards_intact());
}

TEST(HttpClientTest, ThinkTimeBeforeTheFirstByteIsNotAStall) {
  // A server that takes longer than the stall time to start answering is waited for up to
  // the attempt's timeout: the stall clock starts at the answer's first byte (a 15 s stall
  // cap made servers slower than that to first byte unreadable whatever timeout said).
  std::atomic<int> n{0};
  TestHttpServer server([&](const SeenRequest&, ServerConnection& c) {
    ++n;
    c.Sleep(600);
    c.Send("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello");
  });
  HttpClientOptions o = FastOptions();
  o.stall_timeout_ms = 200;
  o.timeout_ms = 5000;
  o.max_attempts = 1;
  HttpRequest r;
  r.url = server.Url("/k");
  RunOne(r, o);
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(std::string(r.body.begin(), r.body.end()), "hello");
  EXPECT_EQ(n.load(), 1);
}

TEST(HttpClientTest, AttemptTimeoutIsRetriedAndBounded) {
  TestHttpServer server([&](const SeenRequest&, ServerConnection& c) {
    // A trickle: never a stall, but never done within the attempt's timeout.
    c.Send("HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\n");
    for (int i = 0; i < 100 && c.Sleep(20); ++i) c.Send("x");
  });
  HttpClientOptions o = FastOptions();
  o.timeout_ms = 150;
  o.max_attempts = 3;
  o.ignored_range_limit = 1 << 30;
  HttpRequest r;
  r.url = server.Url("/k");
  const auto t0 = Clock::now();
  RunOne(r, o);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
  EXPECT_EQ(r.status.code(), StatusCode::kIoError) << r.status.ToString();
  EXPECT_EQ(r.status.error_number(), ETIMEDOUT) << r.status.ToString();
  EXPECT_EQ(r.attempts, 3u);
  EXPECT_LT(ms, 2000);
}

TEST(HttpClientTest, ManyConcurrentRequestsReuseConnections) {
  Object obj{Pattern(1 << 20)};
  std::atomic<int> active{0}, peak{0};
  TestHttpServer server([&](const SeenRequest& q, ServerConnection& c) {
    const int now = ++active;
    int p = peak.load();
    while (now > p && !peak.compare_exchange_weak(p, now)) {
    }
    c.Sleep(1);
    ServeObject(obj, q, c);
    --active;
  });
  constexpr int kN = 200;
  HttpClientOptions o = FastOptions();
  o.max_in_flight = 16;
  std::vector<Dst> dsts;
  dsts.reserve(kN);
  std::vector<HttpRequest> reqs;
  for (int i = 0; i < kN; ++i) {
    const uint64_t len = 1000 + 97 * static_cast<uint64_t>(i);
    dsts.emplace_back(len);
    reqs.push_back(RangeRequest(server.Url("/k"), 4999 * static_cast<uint64_t>(i), len, &dsts.back()));
  }
  std::vector<int> done(kN, 0);
  Client().Run(reqs, o, [&](size_t i) { ++done[i]; });
  for (int i = 0; i < kN; ++i) {
    ASSERT_TRUE(reqs[i].status.ok()) << i << ": " << reqs[i].status.ToString();
    EXPECT_EQ(done[i], 1);
    EXPECT_EQ(dsts[i].bytes(), obj.data.substr(reqs[i].offset, reqs[i].length)) << i;
    EXPECT_TRUE(dsts[i].guards_intact()) << i;
  }
  EXPECT_LE(peak.load(), 16);
  EXPECT_LE(server.connections(), 32);  // keep-alive: far fewer connections than requests
  EXPECT_EQ(server.request_count(), static_cast<size_t>(kN));

  // A second call on the same thread reuses the idle connections.
  const int before = server.connections();
  std::vector<HttpRequest> again(reqs.begin(), reqs.begin() + 16);
  Client().Run(again, o, [](size_t) {});
  for (const auto& r : again) ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(server.connections(), before);
}

TEST(HttpClientTest, RunFromManyThreadsAtOnce) {
  Object obj{Pattern(100000)};
  TestHttpServer server([&](const SeenRequest& q, ServerConnection& c) { ServeObject(obj, q, c); });
  std::vector<std::thread> threads;
  std::atomic<int> bad{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 3; ++round) {
        std::vector<Dst> dsts;
        dsts.reserve(20);
        std::vector<HttpRequest> reqs;
        for (int i = 0; i < 20; ++i) {
          dsts.emplace_back(500);
          reqs.push_back(RangeRequest(server.Url("/k"), 1000 * (t * 20 + i), 500, &dsts.back()));
        }
        HttpClientOptions o = FastOptions();
        o.max_in_flight = 4;
        Client().Run(reqs, o, [](size_t) {});
        for (int i = 0; i < 20; ++i) {
          if (!reqs[i].status.ok() || dsts[i].bytes() != obj.data.substr(reqs[i].offset, 500)) ++bad;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
}

TEST(HttpClientTest, CancellationEndsUnfinishedRequestsPromptly) {
  Object obj{Pattern(1000)};
  TestHttpServer server([&](const SeenRequest& q, ServerConnection& c) {
    if (q.target == "/fast") {
      ServeObject(obj, q, c);
      return;
    }
    c.Sleep(5000);  // never answers in time
    c.Close();
  });
  HttpClientOptions o = FastOptions();
  o.max_in_flight = 2;
  o.stall_timeout_ms = 10000;
  o.timeout_ms = 10000;
  std::vector<HttpRequest> reqs;
  Dst d0(10);
  reqs.push_back(RangeRequest(server.Url("/fast"), 0, 10, &d0));
  for (int i = 0; i < 5; ++i) reqs.push_back(RangeRequest(server.Url("/slow"), 0, 10, nullptr));
  const auto t0 = Clock::now();
  std::vector<int> done(reqs.size(), 0);
  Client().Run(reqs, o, [&](size_t i) { ++done[i]; },
               [&] { return Clock::now() - t0 > std::chrono::milliseconds(150); });
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
  EXPECT_LT(ms, 600);
  EXPECT_TRUE(reqs[0].status.ok()) << reqs[0].status.ToString();
  for (size_t i = 1; i < reqs.size(); ++i) {
    EXPECT_EQ(reqs[i].status.code(), StatusCode::kCancelled) << reqs[i].status.ToString();
  }
  for (int d : done) EXPECT_EQ(d, 1);
}

TEST(HttpClientTest, RunStreamRefillsAsRequestsFinish) {
  // One slow request must not hold back the ones behind it: with two slots, the fast
  // requests flow through the second slot while the slow one is in flight.
  Object obj{Pattern(100000)};
  TestHttpServer server([&](const SeenRequest& q, ServerConnection& c) {
    if (q.target == "/slow") c.Sleep(400);
    ServeObject(obj, q, c);
  });
  HttpClientOptions o = FastOptions();
  o.max_in_flight = 2;
  o.timeout_ms = o.stall_timeout_ms = 5000;
  constexpr size_t kN = 21;
  std::deque<Dst> dsts;
  std::deque<HttpRequest> reqs;
  for (size_t i = 0; i < kN; ++i) {
    dsts.emplace_back(100);
    reqs.push_back(RangeRequest(server.Url(i == 0 ? "/slow" : "/fast"), 100 * i, 100, &dsts.back()));
    reqs.back().user = reinterpret_cast<void*>(i);
  }
  size_t given = 0, finished = 0, peak = 0;
  std::vector<size_t> order;
  const auto t0 = Clock::now();
  Client().RunStream(
      [&]() -> HttpRequest* {
        EXPECT_LT(given - finished, 2u) << "asked for more than max_in_flight";
        if (given == kN) return nullptr;
        peak = std::max(peak, given + 1 - finished);
        return &reqs[given++];
      },
      o,
      [&](HttpRequest& r) {
        ++finished;
        order.push_back(reinterpret_cast<size_t>(r.user));
      });
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
  ASSERT_EQ(order.size(), kN);
  EXPECT_EQ(order.back(), 0u) << "the slow request finishes last; the others did not wait for it";
  EXPECT_EQ(peak, 2u);
  EXPECT_LT(ms, 1500);
  for (size_t i = 0; i < kN; ++i) {
    ASSERT_TRUE(reqs[i].status.ok()) << i << ": " << reqs[i].status.ToString();
    EXPECT_EQ(dsts[i].bytes(), obj.data.substr(100 * i, 100)) << i;
  }
}

TEST(HttpClientTest, RunStreamAsksAgainAfterEachFinish) {
  // A source limited by memory gives nothing while one of its requests is out, then more
  // once it finished: RunStream must ask again rather than end.
  Object obj{Pattern(10000)};
  TestHttpServer server([&](const SeenRequest& q, ServerConnection& c) { ServeObject(obj, q, c); });
  HttpClientOptions o = FastOptions();
  o.max_in_flight = 8;
  constexpr size_t kN = 10;
  std::deque<Dst> dsts;
  std::deque<HttpRequest> reqs;
  for (size_t i = 0; i < kN; ++i) {
    dsts.emplace_back(10);
    reqs.push_back(RangeRequest(server.Url("/k"), 10 * i, 10, &dsts.back()));
  }
  size_t given = 0, out = 0, calls = 0, done = 0;
  Client().RunStream(
      [&]() -> HttpRequest* {
        ++calls;
        if (out > 0 || given == kN) return nullptr;
        ++out;
        return &reqs[given++];
      },
      o, [&](HttpRequest&) {
        --out;
        ++done;
      });
  EXPECT_EQ(done, kN);
  EXPECT_GE(calls, 2 * kN);
  for (size_t i = 0; i < kN; ++i) EXPECT_EQ(dsts[i].bytes(), obj.data.substr(10 * i, 10)) << i;
}

TEST(HttpClientTest, ExceptionFromOnDoneCancelsTheRestThenPropagates) {
  Object obj{Pattern(1000)};
  TestHttpServer server([&](const SeenRequest& q, ServerConnection& c) {
    if (q.target != "/fast") {
      c.Sleep(3000);
      c.Close();
      return;
    }
    ServeObject(obj, q, c);
  });
  HttpClientOptions o = FastOptions();
  o.max_in_flight = 4;
  o.timeout_ms = o.stall_timeout_ms = 10000;
  std::vector<HttpRequest> reqs;
  Dst d0(10);
  for (int i = 0; i < 7; ++i) reqs.push_back(RangeRequest(server.Url(i == 3 ? "/fast" : "/slow"), 0, 10, i == 3 ? &d0 : nullptr));
  std::vector<int> done(reqs.size(), 0);
  const auto t0 = Clock::now();
  bool thrown = false;
  try {
    Client().Run(reqs, o, [&](size_t i) {
      ++done[i];
      if (reqs[i].status.ok()) throw std::runtime_error("decoder failed");
    });
  } catch (const std::runtime_error& e) {
    thrown = std::string(e.what()) == "decoder failed";
  }
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
  EXPECT_TRUE(thrown);
  EXPECT_LT(ms, 1500) << "in-flight requests were cancelled, not waited for";
  for (size_t i = 0; i < reqs.size(); ++i) EXPECT_EQ(done[i], 1) << i;
  EXPECT_TRUE(reqs[3].status.ok());
  for (size_t i : {0, 1, 2, 4, 5, 6}) {
    EXPECT_EQ(reqs[i].status.code(), StatusCode::kCancelled) << i << ": " << reqs[i].status.ToString();
  }
  // The thread's connection pool is still usable afterwards.
  Dst d1(10);
  HttpRequest again = RangeRequest(server.Url("/fast"), 5, 10, &d1);
  RunOne(again, o);
  ASSERT_TRUE(again.status.ok()) << again.status.ToString();
  EXPECT_EQ(d1.bytes(), obj.data.substr(5, 10));
}

TEST(HttpClientTest, ExhaustedAttemptsSayHowMany) {
  std::atomic<int> n{0};
  TestHttpServer server([&](const SeenRequest&, ServerConnection& c) {
    ++n;
    c.Send(HttpResponse(500, {{"x-request-id", "abc"}}, "oops"));
  });
  HttpClientOptions o = FastOptions();
  o.max_attempts = 3;
  Dst dst(10);
  HttpRequest r = RangeRequest(server.Url("/k"), 0, 10, &dst);
  RunOne(r, o);
  EXPECT_EQ(r.status.code(), StatusCode::kIoError);
  EXPECT_EQ(r.attempts, 3u);
  EXPECT_EQ(n.load(), 3);
  EXPECT_EQ(r.http_status, 500);
  const std::string msg = r.status.ToString();
  EXPECT_NE(msg.find("after 3 attempts"), std::string::npos) << msg;
  EXPECT_NE(msg.find("HTTP 500"), std::string::npos) << msg;
  EXPECT_NE(msg.find("request id abc"), std::string::npos) << msg;
}

TEST(HttpClientTest, ConnectionRefusedIsRetriedThenReported) {
  uint16_t port = 0;
  {
    TestHttpServer closed([](const SeenRequest&, ServerConnection&) {});
    port = closed.port();
  }
  HttpClientOptions o = FastOptions();
  o.max_attempts = 3;
  HttpRequest r;
  r.url = "http://127.0.0.1:" + std::to_string(port) + "/k";
  RunOne(r, o);
  EXPECT_EQ(r.status.code(), StatusCode::kIoError);
  EXPECT_EQ(r.status.error_number(), ECONNREFUSED) << r.status.ToString();
  EXPECT_EQ(r.attempts, 3u);
  EXPECT_NE(r.status.message().find("after 3 attempts"), std::string::npos) << r.status.ToString();
}

TEST(HttpClientTest, SignIsCalledBeforeEveryAttemptAndItsHeadersAreSent) {
  Object obj{Pattern(100)};
  std::atomic<int> n{0};
  TestHttpServer server([&](const SeenRequest& q, ServerConnection& c) {
    if (++n == 1) {
      c.Send(HttpResponse(503, {}, ""));
      return;
    }
    ServeObject(obj, q, c);
  });
  int calls = 0;
  Dst dst(10);
  HttpRequest r = RangeRequest(server.Url("/k"), 0, 10, &dst);
  r.headers.emplace_back("x-extra", "1");
  r.sign = [&](const HttpRequest& req, std::vector<std::pair<std::string, std::string>>* h) {
    ++calls;
    bool has_range = false;
    for (const auto& [k, v] : *h) has_range |= (k == "Range");
    if (!has_range) return Status::Internal("sign saw no Range");
    h->emplace_back("Authorization", "sig-" + std::to_string(calls));
    return Status::Ok();
  };
  RunOne(r);
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(calls, 2);
  const auto seen = server.requests();
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0].Header("Authorization"), "sig-1");
  EXPECT_EQ(seen[1].Header("Authorization"), "sig-2");
  EXPECT_EQ(seen[1].Header("x-extra"), "1");

  // A signing error ends the request, unretried.
  HttpRequest bad = RangeRequest(server.Url("/k"), 0, 10, &dst);
  bad.sign = [](const HttpRequest&, std::vector<std::pair<std::string, std::string>>*) {
    return Status::InvalidArgument("no credentials");
  };
  RunOne(bad);
  EXPECT_EQ(bad.status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(server.request_count(), 2u);
}

TEST(HttpClientTest, ResetWhileSendingRaisesNoSigpipe) {
  struct sigaction sa;
  ASSERT_EQ(sigaction(SIGPIPE, nullptr, &sa), 0);
  ASSERT_EQ(sa.sa_handler, SIG_DFL);  // a SIGPIPE would kill this test
  Object obj{Pattern(100)};
  TestHttpServer server([&](const SeenRequest& q, ServerConnection& c) {
    ServeObject(obj, q, c);
    c.Close();  // no keep-alive: every request meets a new connection
  });
  server.ResetNextConnections(2, 100);
  Dst dst(10);
  HttpRequest r = RangeRequest(server.Url("/k"), 0, 10, &dst);
  // ~900 KB of request headers: the client is still writing when the RST comes.
  r.headers.emplace_back("x-pad", std::string(900 * 1024, 'p'));
  HttpClientOptions o = FastOptions();
  o.retry_base_delay_ms = 1;
  RunOne(r, o);
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.attempts, 3u);
  EXPECT_EQ(dst.bytes(), obj.data.substr(0, 10));

  // With one attempt the failure shows: EPIPE when the send met the RST (no signal), or
  // ECONNRESET when libcurl read first; both occur run to run.
  server.ResetNextConnections(1, 100);
  o.max_attempts = 1;
  HttpRequest once = r;
  RunOne(once, o);
  EXPECT_EQ(once.status.code(), StatusCode::kIoError);
  EXPECT_TRUE(once.status.error_number() == EPIPE || once.status.error_number() == ECONNRESET)
      << once.status.ToString();
}

TEST(HttpClientTest, ForkedChildUsesItsOwnConnections) {
  Object obj{Pattern(5000)};
  TestHttpServer server([&](const SeenRequest& q, ServerConnection& c) { ServeObject(obj, q, c); });
  Dst dst(100);
  HttpRequest r = RangeRequest(server.Url("/k"), 0, 100, &dst);
  RunOne(r);
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  ASSERT_EQ(server.connections(), 1);

  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    auto client = ProcessHttpClient();
    if (!client.ok()) _exit(2);
    std::string buf(100, '\0');
    HttpRequest c;
    c.url = server.Url("/k");
    c.range = RangeKind::kRange;
    c.offset = 1000;
    c.length = 100;
    c.dst = reinterpret_cast<uint8_t*>(buf.data());
    (*client)->Run(std::span<HttpRequest>(&c, 1), FastOptions(), [](size_t) {});
    if (!c.status.ok()) _exit(3);
    if (buf != obj.data.substr(1000, 100)) _exit(4);
    _exit(0);
  }
  int wstatus = 0;
  ASSERT_EQ(waitpid(pid, &wstatus, 0), pid);
  ASSERT_TRUE(WIFEXITED(wstatus));
  EXPECT_EQ(WEXITSTATUS(wstatus), 0);
  auto seen = server.requests();
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[1].connection, 2);  // the child opened its own connection
  EXPECT_EQ(seen[1].seq_on_connection, 1);

  // The parent's connection survived the child (no shutdown, no stray bytes): reused.
  HttpRequest again = RangeRequest(server.Url("/k"), 200, 100, &dst);
  RunOne(again);
  ASSERT_TRUE(again.status.ok()) << again.status.ToString();
  EXPECT_EQ(dst.bytes(), obj.data.substr(200, 100));
  seen = server.requests();
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(seen[2].connection, 1);
  EXPECT_EQ(seen[2].seq_on_connection, 2);
}

TEST(HttpClientTest, BadArgumentsFailWithoutARequest) {
  TestHttpServer server([&](const SeenRequest&, ServerConnection& c) { c.Send(HttpResponse(200, {}, "x")); });
  std::vector<HttpRequest> reqs(3);
  reqs[0].url = server.Url("/k");
  reqs[0].method = "PUT";
  reqs[1].url = server.Url("/k");
  reqs[1].headers.emplace_back("x-evil", "a\r\nInjected: 1");
  reqs[2].url = server.Url("/k");  // zero-length range: nothing to fetch
  reqs[2].range = RangeKind::kRange;
  reqs[2].length = 0;
  Client().Run(reqs, FastOptions(), [](size_t) {});
  EXPECT_EQ(reqs[0].status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(reqs[1].status.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(reqs[2].status.ok());
  EXPECT_EQ(reqs[2].transferred, 0u);
  EXPECT_EQ(server.request_count(), 0u);

  // Only http and https: a file:// URL is refused by libcurl, and not retried.
  HttpRequest file;
  file.url = "file:///etc/hostname";
  RunOne(file);
  EXPECT_EQ(file.status.code(), StatusCode::kIoError) << file.status.ToString();
  EXPECT_EQ(file.attempts, 1u);
  EXPECT_TRUE(file.body.empty());
}

}  // namespace
}  // namespace lsio
