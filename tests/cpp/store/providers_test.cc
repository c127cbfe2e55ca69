// The providers' error dialects (store/providers.h) through the real transport, and S3's
// ListObjectsV2 page parsing: S3's <Code>/<Message> and request id in messages, SlowDown in
// a 200 body retried, GCS's request-id header preferred for GCS.
#include "store/providers.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "net/test_http_server.h"

namespace lsio {
namespace {

using testing::HttpResponse;
using testing::SeenRequest;
using testing::ServerConnection;
using testing::TestHttpServer;

HttpClientOptions Fast(ObjectProvider p) {
  HttpClientOptions o;
  o.timeout_ms = 2000;
  o.max_attempts = 3;
  o.retry_base_delay_ms = 1;
  o.retry_max_delay_ms = 2;
  o.dialect = ProviderErrorDialect(p);
  return o;
}

TEST(ProvidersTest, S3ErrorsKeepTheirCodeMessageAndRequestId) {
  TestHttpServer srv([](const SeenRequest&, ServerConnection& c) {
    c.Send(HttpResponse(403, {{"x-amz-request-id", "RID7"}, {"x-request-id", "OTHER"}, {"Content-Type", "application/xml"}},
                        "<Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>"));
  });
  auto client = ProcessHttpClient();
  ASSERT_TRUE(client.ok());
  HttpRequest r;
  r.url = srv.Url("/b/k");
  client.value()->Run(std::span<HttpRequest>(&r, 1), Fast(ObjectProvider::kS3), [](size_t) {});
  ASSERT_FALSE(r.status.ok());
  EXPECT_EQ(r.request_id, "RID7");
  const std::string msg = r.status.ToString();
  EXPECT_NE(msg.find("AccessDenied: Access Denied"), std::string::npos) << msg;
  EXPECT_NE(msg.find("RID7"), std::string::npos) << msg;
}

TEST(ProvidersTest, SlowDownInA200IsRetriedAndGcsPrefersItsRequestId) {
  int calls = 0;
  TestHttpServer srv([&](const SeenRequest&, ServerConnection& c) {
    if (calls++ == 0) {
      c.Send(HttpResponse(200, {{"Content-Type", "application/xml"}}, "<Error><Code>SlowDown</Code></Error>"));
    } else {
      c.Send(HttpResponse(200, {{"x-guploader-uploadid", "GUP"}, {"x-request-id", "OTHER"}}, "data"));
    }
  });
  auto client = ProcessHttpClient();
  ASSERT_TRUE(client.ok());
  HttpRequest r;
  r.url = srv.Url("/o");
  client.value()->Run(std::span<HttpRequest>(&r, 1), Fast(ObjectProvider::kGcs), [](size_t) {});
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.body, "data");
  EXPECT_EQ(r.attempts, 2u);
  EXPECT_EQ(r.request_id, "GUP");
}

TEST(ProvidersTest, ListPagesGiveChildNamesAndTheNextToken) {
  std::vector<std::string> names;
  std::string next;
  const std::string page =
      "<ListBucketResult><Prefix>g.zarr/</Prefix><CommonPrefixes><Prefix>g.zarr/t2m/</Prefix></CommonPrefixes>"
      "<CommonPrefixes><Prefix>g.zarr/a&amp;b/</Prefix></CommonPrefixes><IsTruncated>true</IsTruncated>"
      "<NextContinuationToken>tok</NextContinuationToken></ListBucketResult>";
  ASSERT_TRUE(ParseListPage(page, "g.zarr/", &names, &next).ok());
  EXPECT_EQ(names, (std::vector<std::string>{"t2m", "a&b"}));
  EXPECT_EQ(next, "tok");
  Status bad = ParseListPage("<html>nope</html>", "", &names, &next);
  EXPECT_EQ(bad.code(), StatusCode::kDataLoss);
}

}  // namespace
}  // namespace lsio
