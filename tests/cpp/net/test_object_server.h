// TestObjectServer: an in-memory object store served over HTTP/1.1 by TestHttpServer, with
// the semantics the remote store relies on (S3-like): HEAD (Content-Length, ETag), GET of the
// whole object (200), Range "bytes=a-b", "bytes=a-" and suffix "bytes=-n" (206 with
// Content-Range, 416 "bytes */size" when unsatisfiable), If-Match (412 when it does not match
// the current ETag strongly), If-None-Match (304 when it matches weakly), 404 for unknown paths. Objects are keyed by the request target's path as
// sent (percent-encoded, query string dropped), and may be replaced or removed while serving.
//
// Usage:
//   TestObjectServer srv;
//   srv.Put("/bucket/arr/c/0/0", bytes);            // ETag "\"1\"", then "\"2\"", ... per Put
//   ObjectStoreConfig c; c.scheme = "http"; c.host = srv.host(); c.root = "/bucket/arr";
//   ... srv.requests() lists every request seen (method, target, headers), in arrival order.
//   srv.set_ignore_if_match(true);                  // a server that ignores If-Match
//   srv.set_hook([](const SeenRequest& q, ServerConnection& c) { ...; return true; });
//                                                   // true: the hook answered the request
//
// Thread-safety: requests are served concurrently (a thread per connection); every method
// may be called while requests are in flight.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "net/test_http_server.h"

namespace lsio::testing {

class TestObjectServer {
 public:
  /// Answers a request itself when it returns true (faults, odd answers).
  using Hook = std::function<bool(const SeenRequest&, ServerConnection&)>;

  TestObjectServer() : server_([this](const SeenRequest& q, ServerConnection& c) { Serve(q, c); }) {}

  /// "127.0.0.1:port", for ObjectStoreConfig::host.
  std::string host() const { return "127.0.0.1:" + std::to_string(server_.port()); }

  /// Stores (or replaces) the object at `path` (as sent: percent-encoded) and returns its new
  /// ETag (quoted, distinct for every Put unless `etag` is given).
  template <typename Bytes>
  std::string Put(const std::string& path, const Bytes& data, std::string etag = {}) {
    std::lock_guard<std::mutex> lock(mu_);
    if (etag.empty()) etag = "\"" + std::to_string(++next_etag_) + "\"";
    objects_[path] = Object{std::string(data.begin(), data.end()), etag};
    return etag;
  }
  void Remove(const std::string& path) {
    std::lock_guard<std::mutex> lock(mu_);
    objects_.erase(path);
  }
  void set_ignore_if_match(bool v) { ignore_if_match_ = v; }
  void set_hook(Hook hook) {
    std::lock_guard<std::mutex> lock(mu_);
    hook_ = std::move(hook);
  }

  std::vector<SeenRequest> requests() const { return server_.requests(); }
  size_t request_count() const { return server_.request_count(); }
  TestHttpServer& server() { return server_; }

 private:
  struct Object {
    std::string data;
    std::string etag;
  };

  void Serve(const SeenRequest& q, ServerConnection& conn) {
    Hook hook;
    {
      std::lock_guard<std::mutex> lock(mu_);
      hook = hook_;
    }
    if (hook && hook(q, conn)) return;
    std::string path = q.target.substr(0, q.target.find('?'));
    Object obj;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = objects_.find(path);
      if (it == objects_.end()) {
        conn.Send(HttpResponse(404, {{"Content-Type", "application/xml"}}, "<Error><Code>NoSuchKey</Code></Error>"));
        return;
      }
      obj = it->second;
    }
    // If-Match compares strongly (a weak ETag never matches), If-None-Match weakly.
    const std::string im = q.Header("If-Match");
    const bool weak = obj.etag.rfind("W/", 0) == 0;
    if (!im.empty() && (im != obj.etag || weak) && !ignore_if_match_) {
      conn.Send(HttpResponse(412, {{"Content-Type", "application/xml"}, {"x-amz-request-id", "REQ412"}},
                             "<Error><Code>PreconditionFailed</Code><Message>At least one of the pre-conditions "
                             "you specified did not hold</Message></Error>"));
      return;
    }
    const uint64_t size = obj.data.size();
    std::vector<std::pair<std::string, std::string>> h = {{"ETag", obj.etag}, {"Accept-Ranges", "bytes"}};
    const std::string inm = q.Header("If-None-Match");
    const auto bare = [](const std::string& e) { return e.rfind("W/", 0) == 0 ? e.substr(2) : e; };
    if (!inm.empty() && bare(inm) == bare(obj.etag)) {
      conn.Send(HttpResponse(304, {{"ETag", obj.etag}}, "", /*add_content_length=*/false));
      return;
    }
    if (q.method == "HEAD") {
      h.emplace_back("Content-Length", std::to_string(size));
      conn.Send(HttpResponse(200, h, "", /*add_content_length=*/false));
      return;
    }
    const std::string range = q.Header("Range");
    if (range.empty()) {
      conn.Send(HttpResponse(200, h, obj.data));
      return;
    }
    uint64_t a = 0, b = 0;
    if (!ParseRange(range, size, &a, &b)) {
      h.emplace_back("Content-Range", "bytes */" + std::to_string(size));
      conn.Send(HttpResponse(416, h, ""));
      return;
    }
    h.emplace_back("Content-Range", "bytes " + std::to_string(a) + "-" + std::to_string(b) + "/" + std::to_string(size));
    conn.Send(HttpResponse(206, h, std::string_view(obj.data).substr(a, b - a + 1)));
  }

  // [a, b] of "bytes=a-b", "bytes=a-" or "bytes=-n" against `size` bytes; false when
  // unsatisfiable or malformed.
  static bool ParseRange(const std::string& v, uint64_t size, uint64_t* a, uint64_t* b) {
    unsigned long long x = 0, y = 0;
    if (std::sscanf(v.c_str(), "bytes=-%llu", &x) == 1) {
      if (x == 0 || size == 0) return false;
      const uint64_t n = std::min<uint64_t>(x, size);
      *a = size - n;
      *b = size - 1;
      return true;
    }
    const int got = std::sscanf(v.c_str(), "bytes=%llu-%llu", &x, &y);
    if (got < 1 || x >= size) return false;
    *a = x;
    *b = got == 2 ? std::min<uint64_t>(y, size - 1) : size - 1;
    return *b >= *a;
  }

  mutable std::mutex mu_;
  std::map<std::string, Object> objects_;
  uint64_t next_etag_ = 0;
  std::atomic<bool> ignore_if_match_{false};
  Hook hook_;
  TestHttpServer server_;  // last: stopped (threads joined) before the members it uses go
};

}  // namespace lsio::testing
